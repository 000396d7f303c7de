"""Hugging Face causal language models (transformers' `*ForCausalLM`) as gptc models.

    model = transformers.AutoModelForCausalLM.from_pretrained("path/to/local/model")
    step = gptc.compile_train_step(gptc.hf.causal_lm(model), (input_ids, labels), ...)

A transformers model takes keyword arguments and returns a ModelOutput; gptc's models take
tensors and return (logits, loss). causal_lm() wraps one into the other without renaming:
the wrapper's parameters are the model's own, under the model's own names, so state_dict()
and load_state_dict() speak the checkpoint's names. `labels` are transformers' labels, the
input ids themselves (the loss shifts them; -100 is ignored), not nanoGPT's shifted targets.
A third input, transformers' attention_mask, trains and runs padded batches: the mask
transformers builds from it reaches the attention as a boolean attn_mask (fold.py reads its
`attention_mask[batch_idx, kv_idx]` as a view), which the frontend spells out.

gptc.compile_generate(model) takes a transformers model too: its decode step and prefill
(below) are the model's own forward, given gptc's key/value caches through the object
transformers keeps keys and values in, checked against the model's forward on a few tokens
before anything is compiled.

What gptc does with transformers' graphs is capture's (fold.py: the attention mask built
from `arange`s becomes `is_causal`; mlir_text.py: a `torch.no_grad()` region, as the rotary
embeddings' cos/sin are computed in, is printed in place with its results detached).
"""
from __future__ import annotations

import torch

from .errors import GptcError
from .generate import attend_cached, store_rows


class CausalLM(torch.nn.Module):
    """`model(input_ids, labels)` -> (logits, loss); `model(input_ids)` -> logits;
    `model(input_ids, labels, attention_mask)`: transformers' padding mask (1: a token, 0:
    padding), [batch, tokens]."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        own = [n for n, _ in model.named_parameters(recurse=False)]
        own += [n for n, _ in model.named_buffers(recurse=False)]
        if own:
            raise GptcError(f"causal_lm: {type(model).__name__} holds tensors of its own "
                            f"({', '.join(own)}), outside its submodules")
        object.__setattr__(self, "hf", model)  # not a submodule: its children are ours
        for name, child in model.named_children():
            self.add_module(name, child)

    def train(self, mode: bool = True):
        self.hf.train(mode)
        return super().train(mode)

    def forward(self, input_ids, labels=None, attention_mask=None):
        out = self.hf(input_ids=input_ids, labels=labels, attention_mask=attention_mask,
                      use_cache=False, return_dict=True)
        return out.logits if labels is None else (out.logits, out.loss)


def causal_lm(model: torch.nn.Module) -> CausalLM:
    """`model` (a transformers `*ForCausalLM`) as a gptc model; see the module's text."""
    if isinstance(model, CausalLM):
        return model
    if not hasattr(model, "config") or not callable(getattr(model, "forward", None)):
        raise GptcError(f"causal_lm needs a transformers model, not {type(model).__name__}")
    return CausalLM(model)


# Generation (gptc.compile_generate on a transformers model): the decode step and the
# prefill of generate.py, made of the model's own forward. transformers hands each layer's
# keys and values to a cache object, then calls the attention function its config names;
# _Cache is that object for gptc's programs, whose caches are tensors in and out
# (generate.py's layout), and the decode step's attention is _decode_attention.


class _Cache:
    """As much of transformers' Cache as a decoder's layers and create_causal_mask ask of
    one. update() keeps each layer's keys and values ([batch, kv heads, tokens, head size])
    for the program to return, and gives back what the layer attends over. In the prefill
    (no caches) that is what it was handed: the prompt attends within itself. In the decode
    step (one token at position `pos`; each layer's keys held transposed, [batch, kv heads,
    head size, max_len], its values [batch, kv heads, max_len, head size]) it is the layer's
    caches as they came in, which _decode_attention reads beside the token's own key and
    value. Positions go to the model as position_ids, so the count of cached tokens that
    some models read to make positions (get_seq_length) is 0.

    A family that attends with its own code rather than through transformers' attention
    interface (Falcon, Bloom, GPT-J, CodeGen) never calls _decode_attention: for it the
    decode step's `own` cache hands back each layer's whole caches ([batch, kv heads,
    max_len, head size]) with the token's key and value written at `pos`, and says that
    the query sits at `pos` among max_len keys (get_query_offset, get_mask_sizes), so that
    the causal mask the model builds hides the positions past it."""

    is_compileable = False
    decoding = None  # the decode step's _Cache while its forward runs
    attended = False  # set by _decode_attention: the family attends through the interface

    def __init__(self, keys=None, values=None, pos=None, own=False):
        self.keys, self.values, self.pos, self.own = keys, values, pos, own
        self.new_keys, self.new_values = [], []

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        if layer_idx != len(self.new_keys):
            raise GptcError(f"generation: layer {layer_idx} handed its keys to the cache "
                            f"after {len(self.new_keys)} layers; gptc expects them in order")
        self.new_keys.append(key_states)
        self.new_values.append(value_states)
        if self.keys is None:
            return key_states, value_states
        if not self.own:
            return self.keys[layer_idx].transpose(2, 3), self.values[layer_idx]
        values = self.values[layer_idx]
        at = (torch.arange(values.shape[2], dtype=torch.long) == self.pos).view(1, 1, -1, 1)
        return (torch.where(at, key_states, self.keys[layer_idx].transpose(2, 3)),
                torch.where(at, value_states, values))

    def get_seq_length(self, layer_idx=0):
        return 0

    def get_query_offset(self, layer_idx=0):
        return self.pos if self.own else 0

    def get_mask_sizes(self, query_length, layer_idx=0):
        return (self.values[layer_idx].shape[2] if self.own else query_length), 0


DECODE_ATTENTION = "gptc_decode"


def _decode_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      **kwargs):
    """transformers' attention interface, for the decode step: the token's query heads
    ([batch, heads, 1, head size]) over the cached positions before `pos` and over its own
    key and value (generate.attend_cached, as nanoGPT's decode step). Grouped-query
    attention's query heads that share a key/value head are rows of one product, so no
    cache is repeated per head (transformers' repeat_kv): `key` and `value` are the caches
    _Cache.update gave back, the token's own its last update's. Returns ([batch, 1, heads,
    head size], None) as transformers' functions do. A layer's `sliding_window` hides the
    cached positions that many or more before the token; `softcap` caps the scores."""
    cache = _Cache.decoding
    _Cache.attended = True
    for name in ("s_aux", "sinks"):
        if kwargs.get(name) is not None:
            raise GptcError(f"compile_generate: {type(module).__name__} attends with {name}, "
                            f"which gptc's decode step does not")
    if cache is None or query.shape[2] != 1 or dropout:
        raise GptcError("compile_generate: gptc's decode attention runs one token, in eval "
                        "mode, inside its decode step")
    B, H, _, hs = query.shape
    keys_t = key.transpose(2, 3)  # the cache as it came in: [B, kv heads, hs, T]
    kv, T = keys_t.shape[1], keys_t.shape[3]
    q = query.reshape(B, kv, H // kv, hs)  # the query heads of each key/value head
    positions = torch.arange(T, dtype=torch.long)
    unwritten = positions >= cache.pos
    window = kwargs.get("sliding_window")
    if window is not None:
        unwritten = unwritten | (positions <= cache.pos - window)
    y = attend_cached(q, keys_t, value, cache.new_keys[-1], cache.new_values[-1],
                      unwritten.view(1, 1, 1, T), hs ** -0.5 if scaling is None else scaling,
                      kwargs.get("softcap"))  # [B, kv, H/kv, hs]
    return y.reshape(B, H, 1, hs).transpose(1, 2), None


class _Attention:
    """Within it, every config of `model` names attention `implementation`."""

    def __init__(self, model, implementation):
        self.configs = {id(m.config): m.config for m in model.modules()
                        if hasattr(m, "config") and hasattr(m.config, "_attn_implementation")}
        self.implementation = implementation

    def __enter__(self):
        self.before = {k: c._attn_implementation for k, c in self.configs.items()}
        for c in self.configs.values():
            c._attn_implementation = self.implementation

    def __exit__(self, *exc):
        for k, c in self.configs.items():
            c._attn_implementation = self.before[k]


def _logits(model, idx, position_ids, cache):
    """The logits after the last of `idx`'s tokens, [batch, vocab]. Where the model's
    forward takes `logits_to_keep`, its head runs on that last position alone (the same
    bits: a row's logits do not depend on the other rows); a prefill otherwise computes,
    and its arena holds, the logits of every position."""
    keep = {"logits_to_keep": 1} if _takes_logits_to_keep(model.hf) else {}
    out = model.hf(input_ids=idx, position_ids=position_ids, past_key_values=cache,
                   use_cache=True, return_dict=True, **keep)
    return out.logits[:, -1, :]


def _takes_logits_to_keep(hf) -> bool:
    import inspect
    base = hf.get_base_model() if hasattr(hf, "get_base_model") else hf  # peft's wrapper
    return "logits_to_keep" in inspect.signature(type(base).forward).parameters


class DecodeStep(torch.nn.Module):
    """generate.py's decode step (its DecodeStep says the inputs, outputs and layouts) for
    a causal_lm: the model's forward on one token, its caches through _Cache and its
    attention _decode_attention; with `own`, the model's own attention over _Cache's whole
    caches (a family whose attention code is its own: _Cache says how)."""

    def __init__(self, model: CausalLM, max_len: int, own: bool = False):
        super().__init__()
        self.model = model
        self.max_len = max_len
        self.own = own

    def forward(self, idx, pos, *caches):
        L = len(caches) // 2
        cache = _Cache(caches[:L], caches[L:], pos, self.own)
        _Cache.decoding = cache
        try:
            if self.own:
                logits = _logits(self.model, idx, pos.view(1, 1), cache)
            else:
                with _Attention(self.model.hf, DECODE_ATTENTION):
                    logits = _logits(self.model, idx, pos.view(1, 1), cache)
        finally:
            _Cache.decoding = None
        return logits, torch.stack(cache.new_keys), torch.stack(cache.new_values)


class PrefillStep(torch.nn.Module):
    """generate.py's prefill for a causal_lm: the model's forward on the first `length`
    tokens (its own attention and causal mask, which capture makes is_causal), the keys and
    values its layers hand to _Cache laid out as DecodeStep reads them, zero past
    `length`."""

    def __init__(self, model: CausalLM, max_len: int, length: int):
        super().__init__()
        self.model = model
        self.max_len = max_len
        self.length = length

    def forward(self, idx):
        P, T = self.length, self.max_len
        cache = _Cache()
        logits = _logits(self.model, idx, torch.arange(P, dtype=torch.long).view(1, P), cache)
        ks = [torch.cat([k.transpose(2, 3), k.new_zeros(*k.shape[:2], k.shape[3], T - P)],
                        dim=3) for k in cache.new_keys]
        vs = [torch.cat([v, v.new_zeros(*v.shape[:2], T - P, v.shape[3])], dim=2)
              for v in cache.new_values]
        return logits, torch.stack(ks), torch.stack(vs)


def is_transformers_model(model) -> bool:
    return (isinstance(model, CausalLM)
            or type(model).__module__.split(".")[0] in ("transformers", "transformers_modules",
                                                        "peft"))


def _check_generation(model: CausalLM, decode: DecodeStep, vocab: int):
    """The decode step, run eagerly on a few tokens from empty caches, against the model's
    own forward: a family whose layers ignore the positions they are given, attend in a
    way _decode_attention does not, or keep keys where _Cache does not see them, is refused
    here rather than generating text of its own. A family that never calls
    _decode_attention attends with its own code: its decode step is set to `own` (_Cache).
    Returns the kv cache's (layers, heads, head size), read off what a one-token forward
    hands to _Cache."""
    name = type(model.hf).__name__
    n = min(4, decode.max_len)
    ids = (torch.arange(n, dtype=torch.long) * 7 % vocab).view(1, n)
    with torch.no_grad():
        full = model.hf(input_ids=ids, use_cache=False, return_dict=True).logits[0]
        probe = _Cache()
        _logits(model, ids[:, :1], torch.zeros(1, 1, dtype=torch.long), probe)
        if not probe.new_keys:
            raise GptcError(f"compile_generate: {name} does not hand its keys and values to "
                            f"transformers' cache; gptc cannot generate with it")
        shapes = {tuple(k.shape) for k in probe.new_keys + probe.new_values}
        if len(shapes) != 1:
            raise GptcError(f"compile_generate: {name}'s layers keep keys and values of "
                            f"different shapes ({sorted(shapes)}); gptc's cache holds one")
        _, heads, _, head_size = shapes.pop()
        layers = len(probe.new_keys)
        T = decode.max_len
        k = torch.zeros(layers, 1, heads, head_size, T)
        v = torch.zeros(layers, 1, heads, T, head_size)
        _Cache.attended = False
        try:
            decode(ids[:, :1], torch.tensor([0]), *k, *v)
        except Exception:  # noqa: BLE001 (the checks below run it again and say what failed)
            pass
        decode.own = not _Cache.attended
        scale = 1.0 + full.abs().max().item()
        for pos in range(n):
            logits, k_row, v_row = decode(ids[:, pos:pos + 1], torch.tensor([pos]), *k, *v)
            err = (logits[0] - full[pos]).abs().max().item()
            if not err <= 1e-4 * scale:
                raise GptcError(f"compile_generate: {name}'s forward through gptc's key/value "
                                f"cache is {err:.3g} from its own at position {pos}; gptc "
                                f"cannot generate with it")
            store_rows(k, v, k_row, v_row, pos)
    return layers, heads, head_size


def generation_programs(model, max_len: int | None):
    """(decode step, prefill, sizes) for compile_generate; see generate.py."""
    from .compiler import check_int
    import transformers
    transformers.AttentionInterface.register(DECODE_ATTENTION, _decode_attention)
    model = causal_lm(model).eval()
    cfg, name = model.hf.config, type(model.hf).__name__
    positions = getattr(cfg, "max_position_embeddings", None)
    if not isinstance(positions, int):
        if max_len is None:
            raise GptcError(f"compile_generate: {name}'s config gives no "
                            f"max_position_embeddings; give max_len")
        positions = 2**31
    max_len = (min(positions, 1024) if max_len is None
               else check_int("max_len", max_len, 2, positions))
    out = model.hf.get_output_embeddings()
    vocab = out.weight.shape[0] if out is not None else cfg.vocab_size
    decode = DecodeStep(model, max_len).eval()
    try:
        layers, heads, head_size = _check_generation(model, decode, vocab)
    except GptcError:
        raise
    except Exception as e:  # noqa: BLE001 (the model's own code, under gptc's cache)
        first = (str(e).strip().splitlines() or ["(no message)"])[0]
        raise GptcError(f"compile_generate: {name}'s forward fails under gptc's key/value cache "
                        f"and attention ({type(e).__name__}: {first}); gptc cannot generate "
                        f"with it") from None
    prefill = PrefillStep(model, max_len, max_len // 2).eval()
    return decode, prefill, dict(max_len=max_len, vocab_size=vocab, n_layer=layers,
                                 n_head=heads, head_size=head_size)
