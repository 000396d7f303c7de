"""Text generation with a KV cache: a compiled decode step and prefill, gptc's sampler.

    gen = gptc.compile_generate(model)              # a nanoGPT-style GPT, or transformers'
                                                    # *ForCausalLM (hf.py), eval mode
    gen.load_state_dict(trained_state)              # PyTorch names, as compile's
    ids = gen.generate(prompt_ids, 200, temperature=0.8, top_k=40, seed=7)
    gen.save("out/generate")                        # for a C or C++ program (runtime.h)

    gen4 = gptc.compile_generate(model, batch=4)    # four texts at once
    rows = gen4.generate([p0, p1, p2, p3], 200, seed=7)   # prompts of any lengths

A generator compiled for a batch of B texts runs B prompts side by side (B rows of every
product, so each weight is read once a step for all of them); row b's draws use seed + b,
and its text is exactly what a batch-1 generator writes for its prompt with seed + b (no
kernel's arithmetic for one row depends on another row). The prompts may differ in length,
with no padding: the texts advance a position a step together, each feeding its token at
that position, a prompt's or one drawn, so a shorter prompt's text starts drawing while a
longer one is still being fed, and all reach max_len at the same step.

Two forwards of their own, captured from the model's modules (the weights are the
model's): for a nanoGPT-style GPT, DecodeStep and PrefillStep below; for a transformers
model, hf.py's, which run the model's own forward and hand it gptc's caches through the
object transformers keeps keys and values in. The decode step takes one token, its
position and every layer's key and value caches (DecodeStep says their layout), attends
over the cached positions before it and its own key and value, and returns the next
token's logits and its keys and values, which the caller stores in the caches at that
position. The prefill takes the first max_len // 2 tokens of a
text at once and returns the logits after them with the caches they fill. A prompt goes
through the prefill when it is that long, the rest of it a decode step a token; each new
token is one decode step, whose attention spans at most max_len positions where running
the whole block again (nanoGPT's loop) costs max_len positions of every layer. When the
text reaches max_len the context shifts: its last max_len // 2 tokens go through the
prefill again, from position 0 (nanoGPT instead crops to the last block_size tokens for
every token). A decode step's shapes are static, so it reads its caches' every position;
while the texts are short the loop runs decode steps compiled over fewer positions
(shorter_lengths), with the same bits.

Tokens are drawn by gptc.sample (runtime/include/gptc/sample.hpp): temperature, top-k,
top-p, from a Philox stream keyed by the seed, the n-th new token being draw n; the C
API's gptc_sample is the same function. The loop itself is the runtime's
(gptc::rt::Generator: runtime/src/generate.cpp), which Generator.generate runs over its
compiled programs and a C program (examples/generate.c, gptc_generate) over the saved
ones, so both write the same text. The logits' bits do not depend on the thread count.
compile_generate(model, device="cuda") compiles the programs for the GPU, the weights and
the caches in its memory (a token moves only its ids and logits across), and the text is
the CPU generator's.
"""
from __future__ import annotations

import copy
import json
import math
import os
import shutil

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .capture import captures_in_child
from .compiler import (CompiledModel, capture_job, check_device, check_float_dtypes,
                       check_int, compile_captured)
from .errors import GptcError
from .locate import load_runtime


def sample(logits, *, temperature: float = 1.0, top_k: int | None = None,
           top_p: float = 1.0, seed: int = 0, draw: int = 0) -> int:
    """The token gptc's sampler draws from a 1-D row of logits (see the module's doc)."""
    row = np.ascontiguousarray(
        (logits.detach().float().numpy() if isinstance(logits, torch.Tensor)
         else np.asarray(logits)), dtype=np.float32)
    if row.ndim != 1:
        raise GptcError(f"sample: logits must be one row, got shape {row.shape}")
    try:
        return int(load_runtime().sample(row, float(temperature),
                                         -1 if top_k is None else int(top_k), float(top_p),
                                         check_int("seed", seed, -2**63, 2**64 - 1) % 2**64,
                                         check_int("draw", draw, 0, 2**64 - 1)))
    except RuntimeError as e:
        raise GptcError(str(e)) from None


def attend_cached(q, keys_t, values, own_k, own_v, unwritten, scale, softcap=None):
    """The decode step's attention: query rows `q` ([..., rows, head size]) over the cached
    keys (held transposed, [..., head size, max_len]) and values ([..., max_len, head size])
    at the positions `unwritten` does not hide, and over the token's own key and value
    ([..., 1, head size]), whose score is joined to the cached ones before one softmax: no
    cache is copied to write the token in. `softcap` (Gemma 2's): the scores are
    tanh(s / softcap) * softcap. Returns [..., rows, head size]."""
    T = keys_t.shape[-1]
    cached = (q @ keys_t) * scale                                # [..., rows, T]
    own = (q * own_k).sum(dim=-1, keepdim=True) * scale          # [..., rows, 1]
    if softcap is not None:
        cached, own = (torch.tanh(s / softcap) * softcap for s in (cached, own))
    att = F.softmax(torch.cat([cached.masked_fill(unwritten, float("-inf")), own], dim=-1),
                    dim=-1)
    return att[..., :T] @ values + att[..., T:] * own_v


def store_rows(k, v, k_row, v_row, pos: int) -> None:
    """Writes a decode step's own keys and values ([layers, batch, heads, 1, head size]
    each, numpy or torch) into the stacked caches at `pos`: keys [layers, batch, heads,
    head size, max_len] (transposed), values [layers, batch, heads, max_len, head size]."""
    k[:, :, :, :, pos] = k_row[:, :, :, 0]
    v[:, :, :, pos] = v_row[:, :, :, 0]


class DecodeStep(nn.Module):
    """One decode step of a nanoGPT-style GPT (transformer.wte, .wpe, .h[i].ln_1,
    .attn.c_attn, .attn.c_proj, .attn.n_head, .ln_2, .mlp, transformer.ln_f, lm_head),
    reading its modules: the weights are the model's.

    Inputs: the token [batch, 1], its position [1], then each layer's key cache, held
    transposed ([batch, heads, head size, max_len]: the scores are q times it, with no
    transpose to copy), then each layer's value cache ([batch, heads, max_len, head
    size]); one input a layer, so that no step copies a layer out of a stacked cache. The
    caches are read, not written: the token attends to the cached positions before `pos`
    and to its own key and value, and the step returns those ([layers, batch, heads, 1,
    head size] each) for the caller to store at `pos`."""

    def __init__(self, model: nn.Module, max_len: int):
        super().__init__()
        self.model = model
        self.max_len = max_len

    def forward(self, idx, pos, *caches):
        tr = self.model.transformer
        B, C, T, L = idx.shape[0], tr.wte.weight.shape[1], self.max_len, len(tr.h)
        x = tr.wte(idx) + tr.wpe(pos)                          # [B, 1, C]
        unwritten = (torch.arange(T, dtype=torch.long) >= pos).view(1, 1, 1, T)
        ks, vs = [], []
        for i, block in enumerate(tr.h):
            H = block.attn.n_head
            hs = C // H
            q, k, v = block.attn.c_attn(block.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, 1, H, hs).transpose(1, 2) for t in (q, k, v))  # [B, H, 1, hs]
            y = attend_cached(q, caches[i], caches[L + i], k, v, unwritten,
                              1.0 / math.sqrt(hs))                              # [B, H, 1, hs]
            x = x + block.attn.c_proj(y.transpose(1, 2).contiguous().view(B, 1, C))
            x = x + block.mlp(block.ln_2(x))
            ks.append(k)
            vs.append(v)
        logits = self.model.lm_head(tr.ln_f(x))[:, -1, :]      # [B, vocab]
        return logits, torch.stack(ks), torch.stack(vs)


class PrefillStep(nn.Module):
    """The first `length` tokens of a text at once, at positions 0..length-1 (causal
    attention over them): the logits after the last, and the caches as DecodeStep reads
    them, stacked over the layers — keys [layers, batch, heads, head size, max_len],
    values [layers, batch, heads, max_len, head size], zero past `length` — as that many
    decode steps would leave them (to rounding)."""

    def __init__(self, model: nn.Module, max_len: int, length: int):
        super().__init__()
        self.model = model
        self.max_len = max_len
        self.length = length

    def forward(self, idx):
        tr = self.model.transformer
        B, P, C = idx.shape[0], self.length, tr.wte.weight.shape[1]
        x = tr.wte(idx) + tr.wpe(torch.arange(P, dtype=torch.long))
        ks, vs = [], []
        for block in tr.h:
            H = block.attn.n_head
            hs = C // H
            q, k, v = block.attn.c_attn(block.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, P, H, hs).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + block.attn.c_proj(y.transpose(1, 2).contiguous().view(B, P, C))
            x = x + block.mlp(block.ln_2(x))
            ks.append(torch.cat([k.transpose(-2, -1),
                                 torch.zeros(B, H, hs, self.max_len - P)], dim=3))
            vs.append(torch.cat([v, torch.zeros(B, H, self.max_len - P, hs)], dim=2))
        # The head on the last position alone, as nanoGPT's own inference does: the same
        # bits (LayerNorm and the product are row by row), without the logits of every
        # position (at GPT-2 small's size 100 MB a text, and a quarter of the prefill's work).
        logits = self.model.lm_head(tr.ln_f(x[:, -1:, :]))[:, -1, :]
        return logits, torch.stack(ks), torch.stack(vs)


_NEEDS = ("transformer.wte", "transformer.wpe", "transformer.h", "transformer.ln_f", "lm_head")
_BLOCK_NEEDS = ("ln_1", "attn.c_attn", "attn.c_proj", "attn.n_head", "ln_2", "mlp")


def _check_nanogpt_style(model) -> None:
    def has(obj, dotted):
        for part in dotted.split("."):
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    missing = [n for n in _NEEDS if not has(model, n)]
    if not missing and len(model.transformer.h):
        missing = [f"transformer.h[0].{n}" for n in _BLOCK_NEEDS
                   if not has(model.transformer.h[0], n)]
    if missing:
        raise GptcError(f"compile_generate takes a nanoGPT-style GPT; "
                        f"{type(model).__name__} has no {missing[0]}")


class Generator:
    """A compiled decode step and prefill, and the loop around them; see the module's doc."""

    def __init__(self, step: CompiledModel, prefill: CompiledModel, *, max_len: int,
                 vocab_size: int, n_layer: int, n_head: int, head_size: int, batch: int = 1,
                 shorter: tuple = ()):
        self.step, self.prefill = step, prefill
        self.shorter = tuple(shorter)  # decode steps over fewer positions (shorter_lengths)
        self.batch = batch  # the texts generated side by side
        self.max_len = max_len
        self.prefill_len = max_len // 2  # the prompt tokens the prefill takes at once
        self.vocab_size = vocab_size  # the logits' width
        self.n_layer = n_layer
        self.n_head = n_head  # of the keys and values (fewer than the queries' in GQA)
        self.head_size = head_size
        # The caches as DecodeStep reads them (one layer an input) and PrefillStep writes
        # them: keys transposed.
        self.k_shape = (self.n_layer, batch, self.n_head, self.head_size, max_len)
        self.v_shape = (self.n_layer, batch, self.n_head, max_len, self.head_size)
        self._loop = load_runtime().Generator(step.runtime, prefill.runtime,
                                              [m.runtime for m in self.shorter])

    def load_state_dict(self, state: dict) -> None:
        """The model's parameters by PyTorch name (the programs hold them under "model."),
        as gptc.compile's load_state_dict; extra entries (AdamW's moments in a training
        checkpoint, say) are left out. The params that the prefill and the shorter decode
        steps hold in the decode step's buffers (Model::load's weights_of) are written
        once, through the decode step."""
        for program in (self.step, self.prefill, *self.shorter):
            skip = set(program.runtime.shared_params)
            names = [a.name for a in program.captured.args
                     if a.kind == "param" and a.name not in skip]
            wanted = set(names)
            program.set_params({"model." + k: v for k, v in state.items()
                                if "model." + k in wanted}, names)

    def set_num_threads(self, n: int) -> None:
        for program in (self.step, self.prefill, *self.shorter):
            program.set_num_threads(n)

    def _check(self, prompt, n, temperature, top_k, top_p, vocab):
        """The prompts as lists of ids (one list for a batch of 1), and vocab; the settings
        checked."""
        if isinstance(prompt, torch.Tensor):
            prompt = (prompt.tolist() if prompt.dim() == 2 and self.batch > 1
                      else prompt.flatten().tolist())
        if self.batch == 1:
            rows = [list(prompt)]
        elif isinstance(prompt, (list, tuple)) and all(
                isinstance(r, (list, tuple, np.ndarray, torch.Tensor)) for r in prompt):
            rows = [list(r.flatten().tolist() if isinstance(r, torch.Tensor) else r)
                    for r in prompt]
        else:
            raise GptcError(f"generate: the generator writes {self.batch} texts at once; give "
                            f"a list of {self.batch} prompts")
        # The prompts' count, lengths and tokens are checked by the runtime's loop.
        rows = [[int(i) for i in r] for r in rows]
        vocab = self.vocab_size if vocab is None else check_int("vocab", vocab, 1,
                                                                self.vocab_size)
        check_int("generate: n", n, 0, 2**63 - 1)
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                                  or top_k < 1):
            raise GptcError(f"generate: top_k must be at least 1 (None: every token), "
                            f"got {top_k!r}")
        if not (isinstance(temperature, (int, float)) and math.isfinite(temperature)
                and temperature >= 0):
            raise GptcError(f"generate: temperature must be a finite number >= 0, "
                            f"got {temperature!r}")
        if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
            raise GptcError(f"generate: top_p must be in (0, 1], got {top_p!r}")
        return rows, vocab

    def generate(self, prompt, n: int, *, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float = 1.0, seed: int = 0, vocab: int | None = None) -> list:
        """`n` new token ids after `prompt` (ids; for a batch of B, a list of B prompts of
        any lengths, and the result a list of B lists, row b drawn with seed + b); draw from
        the first `vocab` logits (all by default: nanoGPT's padded vocabularies are larger
        than the tokenizer's). The loop is the runtime's (gptc::rt::Generator, which C and
        C++ programs run on the saved programs): see the module's doc."""
        rows, vocab = self._check(prompt, n, temperature, top_k, top_p, vocab)
        seed = check_int("seed", seed, -2**63, 2**64 - 1) % 2**64
        try:
            outs = self._loop.generate_batch(rows, n, float(temperature),
                                             -1 if top_k is None else top_k, float(top_p),
                                             seed, vocab)
        except (RuntimeError, ValueError) as e:
            raise GptcError(str(e)) from None
        return outs if self.batch > 1 else outs[0]

    def save(self, directory: str, tokens: list | None = None) -> None:
        """The decode step as an artifact folder with the current weights, the prefill as
        another in its prefill/ and the shorter decode steps in steps/LENGTH/ (what
        gptc_generator_load and gptc::rt::Generator load), their weights files holding
        only what the decode step's does not; with `tokens` (each
        token's bytes, in id order) also tokens.bin (a u32 count, then each token as a u32
        length and its bytes, little-endian), the vocabulary a C program encodes and prints
        with (examples/generate.c)."""
        steps = os.path.join(directory, "steps")
        if os.path.isdir(steps):  # a folder saved before over: none of its old steps stays
            shutil.rmtree(steps)
        for program, where in ((self.step, directory),
                               (self.prefill, os.path.join(directory, "prefill")),
                               *((m, os.path.join(steps, str(m.runtime.inputs[2][2][-1])))
                                 for m in self.shorter)):
            os.makedirs(where, exist_ok=True)
            with open(os.path.join(program.artifact_dir, "manifest.json")) as f:
                source = json.load(f).get("source")  # kernels.cpp or kernels.cu: the record
            for name in ("manifest.json", "kernels.so", source):
                if name and os.path.exists(os.path.join(program.artifact_dir, name)):
                    shutil.copyfile(os.path.join(program.artifact_dir, name),
                                    os.path.join(where, name))
            program.runtime.save_weights(os.path.join(where, "weights.safetensors"))
        if tokens is not None:
            blob = bytearray(len(tokens).to_bytes(4, "little"))
            for t in tokens:
                blob += len(t).to_bytes(4, "little") + bytes(t)
            with open(os.path.join(directory, "tokens.bin"), "wb") as f:
                f.write(blob)


def compile_generate(model: nn.Module, max_len: int | None = None, *, batch: int = 1,
                     workdir: str | None = None, device: str = "cpu") -> Generator:
    """Compile `model`'s decode step and prefill (see the module's doc) for `batch` texts
    at once of up to `max_len` tokens. `model` is a nanoGPT-style GPT (max_len by default
    its block size, its position table's length) or a transformers causal LM (hf.py: by
    default its max_position_embeddings, at most 1024). `device` as compile's: on a GPU
    the weights and the caches stay there, only the ids and the logits pass through the
    host each token, and the text is the CPU's."""
    from . import hf
    batch = check_int("compile_generate: batch", batch, 1, 4096)
    device = check_device(device)
    if isinstance(model, nn.Module):
        check_float_dtypes(model, "compile_generate")
    if model.training:
        model = model.eval()
    if hf.is_transformers_model(model):
        step, prefill, sizes = hf.generation_programs(model, max_len)
    else:
        step, prefill, sizes = _nanogpt_programs(model, max_len)
    L, H, hs, T = sizes["n_layer"], sizes["n_head"], sizes["head_size"], sizes["max_len"]

    def example(length):  # the caches' zeros as views of one zero: the programs keep them
        zero = torch.zeros(())
        return ((torch.zeros(batch, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long))
                + tuple(zero.expand(batch, H, hs, length) for _ in range(L))
                + tuple(zero.expand(batch, H, length, hs) for _ in range(L)))
    # Captured together (captures_in_child); the prefill and the shorter steps hold only
    # the weights the decode step does not, so that they are written and read once (gptc
    # compile --weights-of). No example inputs file: no `gptc check` runs a decode step.
    jobs = [capture_job(step, example(T)),
            capture_job(prefill, (torch.zeros(batch, prefill.length, dtype=torch.long),))]
    lengths = shorter_lengths(T)
    for length in lengths:
        at = copy.copy(step)  # the same modules, over caches of `length` positions
        at.max_len = length
        jobs.append(capture_job(at, example(length)))
    captured = captures_in_child(jobs)
    target = f"--target={device}"
    decode = CompiledModel(*compile_captured(
        captured[0], workdir and os.path.join(workdir, "decode"), "gptc-generate-", target,
        inputs_file=False))

    def beside_decode(c, folder, prefix):
        return CompiledModel(*compile_captured(
            c, workdir and os.path.join(workdir, folder), prefix, target, weights_of=decode,
            inputs_file=False), weights_of=decode)
    prefill = beside_decode(captured[1], "prefill", "gptc-prefill-")
    shorter = [beside_decode(c, f"decode-{length}", "gptc-generate-")
               for c, length in zip(captured[2:], lengths)]
    return Generator(decode, prefill, batch=batch, shorter=shorter, **sizes)


def shorter_lengths(max_len: int) -> list:
    """The cache lengths of the decode steps a generator runs while its texts are short
    (about max_len / 8, / 4 and / 2): a step reads its caches' every position, written or
    not (at GPT-2 small's size 75 MB a text a token at 1,024 positions). Each is max_len less
    a multiple of 32, so that the softmax's 32 partials hold the same terms as the full
    step's but for its masked positions' zeros: the same bits (reduce.h)."""
    out = []
    for part in (8, 4, 2):
        length = max_len - 32 * ((max_len - max_len // part) // 32)
        if 32 <= length < max_len and length not in out:
            out.append(length)
    return out


def _nanogpt_programs(model: nn.Module, max_len: int | None):
    """(decode step, prefill, sizes) of a nanoGPT-style GPT."""
    _check_nanogpt_style(model)
    tr = model.transformer
    positions = tr.wpe.weight.shape[0]
    max_len = positions if max_len is None else check_int("max_len", max_len, 2, positions)
    H = tr.h[0].attn.n_head
    return (DecodeStep(model, max_len).eval(), PrefillStep(model, max_len, max_len // 2).eval(),
            dict(max_len=max_len, vocab_size=tr.wte.weight.shape[0], n_layer=len(tr.h),
                 n_head=H, head_size=tr.wte.weight.shape[1] // H))
