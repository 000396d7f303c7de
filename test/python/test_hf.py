"""Hugging Face models (transformers, built from small configs; nothing downloaded) through
gptc.hf.causal_lm, and what capture does for them (fold.py, the no_grad() region)."""
import re
import subprocess

import pytest
import torch
import torch.nn.functional as F

import gptc
from gptc import fold, parity
from gptc.errors import GptcError

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
transformers.logging.set_verbosity_error()

V, T = 97, 32


def hf_model(family: str, positions: int = T):
    """A 2-layer model of `family` from a small config (`positions` long), its weights from
    seed 0."""
    torch.manual_seed(0)
    small = dict(vocab_size=V, bos_token_id=0, eos_token_id=0)
    if family == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=positions,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **small)
    else:
        sizes = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, max_position_embeddings=positions, **small)
        cfg = {"llama": lambda: transformers.LlamaConfig(num_key_value_heads=2, **sizes),
               "phi3": lambda: transformers.Phi3Config(num_key_value_heads=2, pad_token_id=None,
                                                       **sizes),
               "gemma": lambda: transformers.GemmaConfig(num_key_value_heads=2, head_dim=16,
                                                         **sizes),
               "opt": lambda: transformers.OPTConfig(
                   hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4,
                   max_position_embeddings=positions, word_embed_proj_dim=64, dropout=0.0, **small),
               "falcon": lambda: transformers.FalconConfig(
                   hidden_size=64, num_hidden_layers=2, num_attention_heads=4, hidden_dropout=0.0,
                   attention_dropout=0.0, **small),
               "gptj": lambda: transformers.GPTJConfig(
                   n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=positions, resid_pdrop=0.0,
                   embd_pdrop=0.0, attn_pdrop=0.0, **small),
               "codegen": lambda: transformers.CodeGenConfig(
                   n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=positions, n_ctx=positions,
                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **small),
               "bloom": lambda: transformers.BloomConfig(
                   hidden_size=64, n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0,
                   **small),
               "qwen3": lambda: transformers.Qwen3Config(num_key_value_heads=2, head_dim=16,
                                                         **sizes),
               "gemma2": lambda: transformers.Gemma2Config(num_key_value_heads=2, head_dim=16,
                                                           sliding_window=8, **sizes),
               "phi": lambda: transformers.PhiConfig(num_key_value_heads=2, resid_pdrop=0.0,
                                                     embd_pdrop=0.0, **sizes),
               "gpt_neox": lambda: transformers.GPTNeoXConfig(hidden_dropout=0.0, **sizes),
               "gpt_bigcode": lambda: transformers.GPTBigCodeConfig(
                   n_embd=64, n_layer=2, n_head=4, n_positions=positions, resid_pdrop=0.0,
                   embd_pdrop=0.0, attn_pdrop=0.0, **small),
               }[family]()
    return transformers.AutoModelForCausalLM.from_config(cfg)


def batches(n):
    g = torch.Generator().manual_seed(1)
    return [(x, x.clone()) for x in (torch.randint(0, V, (4, T), generator=g) for _ in range(n))]


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_hugging_face_models_train_as_eager_does(family):
    """GPT-2 (Conv1D's addmm, the tanh GELU, tied embeddings) and LLaMA (RMSNorm, rotary
    cos/sin computed under no_grad(), grouped-query attention, SwiGLU): 6 AdamW steps beside
    eager's, every parameter reached by a gradient, transformers' own loss (labels shifted
    inside, padded with -100); the attention mask transformers builds is is_causal."""
    model = gptc.hf.causal_lm(hf_model(family))
    hf_names = {n for n in model.hf.state_dict()}
    assert set(model.state_dict()) == hf_names  # the checkpoint's names, no prefix

    captured = gptc.capture(model, batches(1)[0])
    for op in ("diff", "cumsum", "attn_mask", "wrap_with_set_grad_enabled"):
        assert op not in captured.mlir
    assert len(re.findall(r"scaled_dot_product_attention.*is_causal = true", captured.mlir)) == 2

    rows = parity.report(model, batches(6), lr=1e-3, out=lambda line: None)
    summary, failure = parity.verdict(rows, 1e-5, 1e-4)
    print(f"\n{family}: {summary}")
    assert failure is None, failure


def padded_batches(n):
    """(ids, labels, attention_mask): row 0 padded on the left by 5, row 1 on the right by 9,
    the padding's labels -100."""
    out = []
    for x, _ in batches(n):
        mask = torch.ones_like(x)
        mask[0, :5] = 0
        mask[1, -9:] = 0
        out.append((x, x.masked_fill(mask == 0, -100), mask))
    return out


@pytest.mark.parametrize("family", ["gpt2", "llama", "opt", "falcon", "bloom", "gptj", "codegen",
                                    "qwen3", "phi3", "gemma2", "phi", "gpt_neox", "gpt_bigcode"])
def test_padded_batches_train_as_eager_does(family):
    """transformers' attention_mask: the mask it builds from it (the causal one `&` the
    padding, `attention_mask[batch_idx, kv_idx]`) reaches the attention as is_causal and
    the padding mask alone [B, 1, 1, T], gpt.attention's key mask (no scores spelled out);
    a padding query, which sees no key, gives zeros as PyTorch's does. OPT numbers its
    positions from the mask (`cumsum(mask) * mask - 1`), so its padded rows' positions
    start after the padding; Bloom's ALiBi biases count the
    same way (`baddbmm` adds them to the scores; their slopes' powers an int32 arange, folded
    at capture); Falcon attends with one key/value head for all four query heads and adds
    its branches in place (`+=`); GPT-J gathers its rotary table at the positions (CodeGen
    indexes it: a slice, at capture either way) and rotates every other element
    (`x[..., ::2]`, whose gradient is strided); and the others, each for what sets it apart:
    Qwen3's q/k norms, Phi-3's fused gate/up, Gemma 2's soft-capped scores and sliding
    windows (masks it spells out itself), Phi's partial rotary, GPT-NeoX's parallel
    residual, GPTBigCode's one key/value head.
    4 AdamW steps beside eager's, losses and parameters within the parity tolerances, and
    the forward's logits eager's everywhere, padding included."""
    model = gptc.hf.causal_lm(hf_model(family))
    data = padded_batches(4)
    captured = gptc.capture(model, data[0])
    assert "add_" not in captured.mlir and "aten.gather" not in captured.mlir
    assert not re.search(r"aten\.index\.Tensor.*\(tensor<4x32xi", captured.mlir)  # the mask's
    assert ("aten.cumsum" in captured.mlir) == (family in ("opt", "bloom"))
    if family not in ("bloom", "gptj", "codegen", "gemma2"):  # attention as matmuls, softmax
        assert len(re.findall(r'scaled_dot_product_attention.*"attn_mask"\].*is_causal = true'
                              r'.*tensor<4x1x1x32xi1>', captured.mlir)) == 2
    model.eval()
    logits, loss = gptc.compile(model, data[0])(*data[0])
    with torch.no_grad():
        want, want_loss = model(*data[0])
    assert (logits - want).abs().max().item() <= 1e-5
    assert abs(loss.item() - want_loss.item()) <= 1e-5 * want_loss.item()
    model.train()
    rows = parity.report(model, data, lr=1e-3, out=lambda line: None)
    summary, failure = parity.verdict(rows, 1e-5, 1e-4)
    print(f"\n{family} padded: {summary}")
    assert failure is None, failure


@pytest.mark.parametrize("family", ["gpt2", "bloom", "gemma2"])
def test_hugging_face_models_train_on_the_gpu_with_the_cpus_bits(family):
    """device="cuda-emulated" (the CUDA kernels, on the CPU): padded batches, 2 steps, the
    CPU artifact's losses, parameters and moments bit for bit. The families for what
    their steps hold apart from nanoGPT's: GPT-2's Conv1D and tied embeddings, Bloom's
    ALiBi scores (baddbmm) from a cumsum of the mask, Gemma 2's soft-capped scores and
    sliding windows spelled out."""
    data = padded_batches(2)
    steps = {d: gptc.compile_train_step(gptc.hf.causal_lm(hf_model(family)), data[0], seed=3,
                                        device=d)
             for d in ("cpu", "cuda-emulated")}
    for batch in data:
        a, b = (s(*batch) for s in steps.values())
        assert a.numpy().tobytes() == b.numpy().tobytes()
    cpu, gpu = ({n: s.model.runtime.param(n) for n in s._persistent} for s in steps.values())
    assert cpu.keys() == gpu.keys() and any(k.startswith("exp_avg_sq.") for k in cpu)
    for name, value in cpu.items():
        assert value.tobytes() == gpu[name].tobytes(), name


def test_padded_micro_batches_accumulate_as_eagers_loop():
    """Gradient accumulation through gptc.hf.causal_lm: LLaMA's padded (ids, labels,
    attention_mask) micro-batches, 2 a step, stacked; 3 steps beside eager's loop (each
    micro-batch's loss / 2 backward, then AdamW): the mean losses within 1e-5 relative,
    the parameters within 1e-4."""
    import copy
    model = gptc.hf.causal_lm(hf_model("llama"))
    eager = copy.deepcopy(model)
    data = padded_batches(6)
    steps = [tuple(torch.stack([a, b]) for a, b in zip(data[i], data[i + 1]))
             for i in range(0, 6, 2)]
    step = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(weight_decay=0.0),
                                   grad_clip=None, accumulation_steps=2)
    opt = torch.optim.AdamW(eager.parameters(), lr=1e-3, weight_decay=0.0)
    for inputs in steps:
        loss = step(*inputs)
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for i in range(2):
            micro = eager(*(t[i] for t in inputs))[1]
            (micro / 2).backward()
            total += micro.item()
        opt.step()
        assert abs(loss.item() - total / 2) <= 1e-5 * total / 2
    state = step.state_dict()
    worst = max((state[k] - v).abs().max().item() for k, v in eager.state_dict().items()
                if k in state)
    assert worst <= 1e-4, worst


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_lora_adapters_train_as_eager_and_nothing_else_moves(family, tmp_path):
    """peft's LoRA on the attention's projections (GPT-2's Conv1D c_attn, LLaMA's q_proj and
    v_proj): 4 AdamW steps beside eager's within the parity tolerances, with the gradient-
    flow check on (each A's gradient is exactly zero at the first step, its B still zero);
    only the adapters move: the frozen weights are no trainable parameters of the step."""
    peft = pytest.importorskip("peft")
    targets = ["c_attn"] if family == "gpt2" else ["q_proj", "v_proj"]
    full = gptc.hf.causal_lm(hf_model(family))
    model = gptc.hf.causal_lm(peft.get_peft_model(hf_model(family), peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=targets, lora_dropout=0.0,
        fan_in_fan_out=family == "gpt2")))  # GPT-2's Conv1D holds its weight transposed
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = parity.report(model, batches(4), lr=1e-2, out=lambda line: None)
    summary, failure = parity.verdict(rows, 1e-5, 1e-4)
    print(f"\n{family} LoRA: {summary}")
    assert failure is None, failure
    step = gptc.compile_train_step(model, batches(1)[0], optimizer=gptc.AdamW())
    x, y = batches(1)[0]
    step(x, y, lr=1e-2)
    state = step.state_dict()
    adapters = 2 * len(targets) * 2  # A and B of each target in both layers
    moved = {n for n, t in state.items() if n in before and not torch.equal(t, before[n])}
    assert moved and all(".lora_" in n for n in moved), sorted(moved)
    assert len(moved) == adapters
    trainable = [sum(a.trainable for a in gptc.capture(m, (x, y)).args) for m in (model, full)]
    assert trainable[0] == adapters < trainable[1]
    # The trained state loads back into the peft model strictly, and its adapters save as
    # peft saves them (adapter_model.safetensors), the trained values.
    model.hf.load_state_dict(state)
    model.hf.save_pretrained(str(tmp_path))
    from safetensors.torch import load_file
    saved = load_file(str(tmp_path / "adapter_model.safetensors"))
    assert len(saved) == len(moved)
    for n in moved:
        assert torch.equal(saved[n.replace(".default", "")], state[n]), n


def test_a_trained_state_loads_back_into_the_transformers_model():
    """step.state_dict() has the model's own keys: LLaMA's rotary inv_freq buffers,
    registered persistent=False, are not among them, so a strict load takes it."""
    hf = hf_model("llama")
    x, y = batches(1)[0]
    step = gptc.compile_train_step(gptc.hf.causal_lm(hf), (x, y), optimizer=gptc.AdamW())
    step(x, y, lr=1e-2)
    state = step.state_dict()
    assert set(state) == set(hf.state_dict())
    hf.load_state_dict(state)  # strict
    assert torch.equal(hf.model.norm.weight.detach(), state["model.norm.weight"])


@pytest.mark.parametrize("family", ["phi3", "gemma", "opt"])
def test_more_hugging_face_families_run_as_eager_does(family):
    """Phi-3 (a pass-through half of no elements, dropped from its cat), Gemma (a 0-d
    buffer, the embedding's scale; padding_idx 0), OPT (position ids a cumsum of ones:
    embedded as a constant; padding_idx 1): logits and loss as eager's, to float rounding."""
    model = gptc.hf.causal_lm(hf_model(family)).eval()
    x, y = batches(1)[0]
    logits, loss = gptc.compile(model, (x, y))(x, y)
    ref_logits, ref_loss = model(x, y)
    assert (logits - ref_logits).abs().max().item() <= 1e-5
    assert abs(loss.item() - ref_loss.item()) <= 1e-6 * ref_loss.item()


class PaddedEmbedding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 8, padding_idx=3)
        self.head = torch.nn.Linear(8, 11)

    def forward(self, x, y):
        logits = self.head(self.emb(x))
        return logits, F.cross_entropy(logits.view(-1, 11), y.view(-1))


def test_padding_idx_rows_take_no_gradient_as_in_pytorch():
    """Token 3 is in every batch: its row gets no gradient in eager (AdamW's weight decay
    alone moves it); with a gradient there it would drift by ~lr a step, 1e-3."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    data = [(torch.randint(0, 11, (4, 16), generator=g), torch.randint(0, 11, (4, 16),
                                                                       generator=g))
            for _ in range(5)]
    for x, _ in data:
        x[:, 0] = 3
    rows = parity.report(PaddedEmbedding(), data, lr=1e-3, out=lambda line: None)
    summary, failure = parity.verdict(rows, 1e-5, 1e-5)
    assert failure is None, failure


def test_causal_lm_refuses_a_module_that_is_not_a_transformers_model():
    with pytest.raises(GptcError, match="^causal_lm needs a transformers model, not Linear$"):
        gptc.hf.causal_lm(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("mask, kind", [
    (torch.ones(4, 4, dtype=torch.bool).tril(), "causal"),
    (torch.ones(2, 1, 4, 4, dtype=torch.bool).tril(), "causal"),  # broadcast over heads
    (torch.zeros(4, 4).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), float("-inf")),
     "causal"),
    (torch.zeros(4, 4).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1),
                                   torch.finfo(torch.float32).min), "causal"),
    (torch.ones(4, 4, dtype=torch.bool), "none"),
    (torch.zeros(1, 4), "none"),
    (torch.ones(4, 4, dtype=torch.bool).tril().triu(-1), None),  # a sliding window
    (torch.ones(4, 4, dtype=torch.bool).tril(-1), None),
    (torch.zeros(4, 4).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), -5.0), None),
    (torch.ones(3, 3, dtype=torch.bool).tril(), None),  # not the attention's shape
])
def test_which_attention_masks_are_is_causal(mask, kind):
    assert fold.attention_mask_kind(mask, 4, 4) == kind


class Masked(torch.nn.Module):
    """Attention with a mask made from nothing but T: causal, all-visible or a window."""

    def __init__(self, which):
        super().__init__()
        self.which = which
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x, y):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, 2, 8).transpose(1, 2) for t in self.qkv(x).split(16, dim=2))
        i = torch.arange(T)
        mask = {"causal": i[None, :] <= i[:, None], "all": torch.ones(T, T, dtype=torch.bool),
                "window": (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - 2)}[self.which]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out, ((out.transpose(1, 2).reshape(B, T, C) - y) ** 2).mean()


@pytest.mark.parametrize("which", ["causal", "all"])
def test_a_mask_made_from_aranges_is_dropped_and_the_result_is_eagers(which):
    torch.manual_seed(0)
    model = Masked(which)
    x, y = torch.randn(2, 8, 16), torch.randn(2, 8, 16)
    captured = gptc.capture(model, (x, y))
    assert "attn_mask" not in captured.mlir and "arange" not in captured.mlir
    assert f"is_causal = {'true' if which == 'causal' else 'false'}" in captured.mlir
    out, loss = gptc.compile(model, (x, y))(x, y)
    ref, ref_loss = model(x, y)
    assert (out - ref).abs().max().item() <= 1e-6


def test_any_other_mask_is_spelled_out_and_trains_as_eager():
    """A mask neither causal nor all-visible (a window of 2) stays an operand; the frontend
    spells the attention out (scores, the hidden ones -inf, softmax, times v), and 4 AdamW
    steps through it are eager's."""
    torch.manual_seed(0)
    model = Masked("window")
    # The keys' bias has no gradient but rounding (a row's scores all move by q . b, which
    # softmax ignores): AdamW would scale either side's rounding to a step of lr.
    model.qkv.bias.requires_grad_(False)
    g = torch.Generator().manual_seed(3)
    batches = [(torch.randn(2, 8, 16, generator=g), torch.randn(2, 8, 16, generator=g))
               for _ in range(4)]
    assert "attn_mask" in gptc.capture(model, batches[0]).mlir
    rows = parity.report(model, batches, lr=1e-2, out=lambda line: None)
    summary, failure = parity.verdict(rows, 1e-5, 1e-4)
    assert failure is None, failure


class Biased(torch.nn.Module):
    """Attention with a float attn_mask: a learned bias per query and key (as relative
    position biases are), -inf over the upper triangle (causal) and on query 0's keys
    (a query that sees nothing: zeros, as PyTorch's)."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48, bias=False)
        self.bias = torch.nn.Parameter(torch.randn(8, 8) * 0.5)

    def forward(self, x, y):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, 2, 8).transpose(1, 2) for t in self.qkv(x).split(16, dim=2))
        i = torch.arange(T)
        hidden = (i[None, :] > i[:, None]) | (i[:, None] == 0)
        mask = self.bias.masked_fill(hidden, float("-inf"))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out, ((out.transpose(1, 2).reshape(B, T, C) - y) ** 2).mean()


def test_a_float_mask_is_a_bias_and_trains_as_eager():
    """A float attn_mask is added to the scores; its own gradient (the learned bias) and
    the rest train as eager's for 4 AdamW steps; query 0, which sees no key, gives zeros."""
    torch.manual_seed(0)
    model = Biased()
    g = torch.Generator().manual_seed(4)
    batches = [(torch.randn(2, 8, 16, generator=g), torch.randn(2, 8, 16, generator=g))
               for _ in range(4)]
    out, _ = gptc.compile(model, batches[0])(*batches[0])
    assert not out[:, :, 0].any() and torch.isfinite(out).all()
    rows = parity.report(model, batches, lr=1e-2, out=lambda line: None)
    summary, failure = parity.verdict(rows, 1e-5, 1e-4)
    assert failure is None, failure


class WrittenMask(torch.nn.Module):
    """A mask made from nothing but T, then written into in place (a row of it filled)."""

    def forward(self, x, y):
        hidden = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        hidden[0] = True
        out = x.masked_fill(hidden, 0.0)
        return out, ((out - y) ** 2).mean()


def test_a_mask_written_in_place_is_one_line_not_left_out():
    """torch.export keeps `hidden[0] = True` as fill_ on a view, its result unused: capture
    must not fold it away (the mask would be printed without the write), so the frontend
    names it."""
    x = torch.randn(2, 4, 4)
    with pytest.raises(GptcError, match=r"unsupported PyTorch op 'aten.fill_.Scalar'"):
        gptc.compile(WrittenMask(), (x, x.clone()))


class Gathered(torch.nn.Module):
    """x[rows, cols] with index tensors made from aranges: in order (a view of x), read
    twice along a dimension no index counts (a view, expanded), a run of x's rows with its
    columns taken whole (a slice, then a view: CodeGen's rotary table), or with the rows
    reversed (a gather)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x, y):
        rows, cols = torch.arange(x.shape[0]), torch.arange(x.shape[1])
        if self.kind == "reversed":
            rows = rows.flip(0)
        if self.kind == "run":
            g = x[torch.arange(1, 3).view(1, -1)]
        elif self.kind == "wider":
            g = x[rows.view(-1, 1, 1).expand(-1, 2, 1), cols.view(1, 1, -1)]
        else:
            g = x[rows.view(-1, 1, 1), cols.view(1, 1, -1)]
        return g, ((g - y) ** 2).mean()


def test_an_index_by_aranges_in_order_is_a_view_and_any_other_is_refused():
    x = torch.randn(3, 5)
    want = {"in order": x.view(3, 1, 5), "wider": x.view(3, 1, 5).expand(3, 2, 5),
            "run": x[1:3].view(1, 2, 5)}
    for kind, view in want.items():
        y = torch.randn(view.shape)
        captured = gptc.capture(Gathered(kind), (x, y))
        assert "aten.index" not in captured.mlir and "arange" not in captured.mlir, kind
        out, _ = gptc.compile(Gathered(kind), (x, y))(x, y)
        assert torch.equal(out, view), kind
    y = torch.randn(3, 1, 5)
    assert "aten.index" in gptc.capture(Gathered("reversed"), (x, y)).mlir
    with pytest.raises(GptcError, match=r"'aten.index.Tensor' \(only one index tensor"):
        gptc.compile(Gathered("reversed"), (x, y))


class NoGradScale(torch.nn.Module):
    """A scale computed from a parameter under no_grad(): a constant to autograd."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x, y):
        with torch.no_grad():
            s = self.w.abs().mean()
        out = x @ self.w / s
        return out, ((out - y) ** 2).mean()


def test_a_no_grad_region_gives_no_gradient_through_its_results(tmp_path):
    """gptc's gradient (`--grad`) is eager's, which does not differentiate the scale; the
    scale differentiated too gives another gradient."""
    from gptc.compiler import CompiledModel, capture_and_compile
    torch.manual_seed(0)
    model = NoGradScale()
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    compiled = CompiledModel(*capture_and_compile(model, (x, y), str(tmp_path), "t-", "--grad"))
    assert "torch.aten.detach.default" in compiled.captured.mlir
    rt = compiled.runtime
    out = dict(zip((r[0] for r in rt.results),
                   rt.run([compiled.input_array(a.name, t) for a, t in zip(compiled.inputs,
                                                                           (x, y))])))
    grad = torch.from_numpy(out["grad.w"])
    _, loss = model(x, y)
    loss.backward()
    assert (grad - model.w.grad).abs().max().item() <= 1e-6
    model.w.grad = None
    s = model.w.abs().mean()
    (((x @ model.w / s) - y) ** 2).mean().backward()
    assert (grad - model.w.grad).abs().max().item() > 1e-4


@pytest.fixture(scope="module")
def llama_generator():
    hf = hf_model("llama").eval()
    return hf, gptc.compile_generate(hf)


def greedy_as_transformers(hf, prompt, n):
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), max_new_tokens=n, min_new_tokens=n,
                          do_sample=False, pad_token_id=0)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_hugging_face_models_generate_transformers_greedy_text(family, llama_generator):
    """compile_generate on a transformers model: the model's own forward with gptc's key and
    value caches (hf.DecodeStep, hf.PrefillStep). Greedy, it writes the tokens transformers'
    generate writes, from a short prompt (decode steps only) and from one past the prefill's
    length; the caches' heads are the key/value heads (LLaMA's grouped-query 2, not 4)."""
    hf, gen = llama_generator if family == "llama" else (None, None)
    if gen is None:
        hf = hf_model(family).eval()
        gen = gptc.compile_generate(hf)
    assert (gen.max_len, gen.prefill_len, gen.vocab_size) == (T, T // 2, V)
    assert (gen.n_layer, gen.n_head, gen.head_size) == ((2, 2, 16) if family == "llama"
                                                        else (2, 2, 32))
    for prompt in ([5, 6, 7], list(range(3, 3 + T // 2 + 1))):
        n = T - len(prompt)
        assert gen.generate(prompt, n, temperature=0) == greedy_as_transformers(hf, prompt, n)
    # Past max_len the context shifts (generate.py); the text goes on.
    long = gen.generate([5, 6, 7], T + 8, temperature=0)
    assert len(long) == T + 8 and long[:T - 3] == greedy_as_transformers(hf, [5, 6, 7], T - 3)


@pytest.mark.parametrize("family", ["gpt2", "llama", "falcon"])
def test_shorter_decode_steps_write_the_full_steps_text(family):
    """A transformers model of 96 positions (GPT-2's Conv1D, LLaMA's grouped-query heads
    through gptc's attention, Falcon's own attention code) runs decode steps over 32 and 64
    positions while its texts are that short: the text is the full step's alone, sampled
    past the context shift, and greedy transformers' own."""
    from gptc.locate import load_runtime
    hf = hf_model(family, positions=96).eval()
    gen = gptc.compile_generate(hf, max_len=96)
    assert [s.runtime.inputs[2][2][-1] for s in gen.shorter] == [32, 64]
    alone = load_runtime().Generator(gen.step.runtime, gen.prefill.runtime)
    for prompt in ([5, 6, 7], list(range(3, 53))):
        assert gen.generate(prompt, 110, temperature=0.9, top_k=20, seed=4) == \
            alone.generate_batch([prompt], 110, 0.9, 20, 1.0, 4, 0)[0]
    assert gen.generate([5, 6, 7], 70, temperature=0) == greedy_as_transformers(hf, [5, 6, 7], 70)


def test_a_hugging_face_batch_writes_each_rows_text_as_batch_1_does(llama_generator):
    """A transformers model compiled for 3 texts, prompts of three lengths (one past the
    prefill's): each row is the batch-1 text for its prompt and seed + row, sampled, past
    the compiled length."""
    hf, gen = llama_generator
    gen3 = gptc.compile_generate(hf, batch=3)
    prompts = [[5, 6, 7], list(range(3, 3 + T // 2 + 2)), [9]]
    rows = gen3.generate(prompts, T + 5, temperature=0.9, top_k=20, seed=3)
    assert rows == [gen.generate(p, T + 5, temperature=0.9, top_k=20, seed=3 + b)
                    for b, p in enumerate(prompts)]


def test_a_lora_model_generates_transformers_greedy_text():
    """compile_generate on peft's LoRA model (its adapters drawn away from zero, so that
    they change the text): the tokens transformers' generate writes with the same model."""
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(hf_model("llama"), peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    torch.manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_" in name:
                p.normal_(0.0, 0.3)
    model.eval()
    gen = gptc.compile_generate(model)
    want = greedy_as_transformers(model, [5, 6, 7], 20)
    assert gen.generate([5, 6, 7], 20, temperature=0) == want
    with model.disable_adapter():  # the adapters do change the text
        assert want != greedy_as_transformers(model, [5, 6, 7], 20)


@pytest.mark.parametrize("family", ["llama", "falcon"])
def test_a_c_program_writes_a_hugging_face_models_text(family, tmp_path, llama_generator):
    """Generator.save of a transformers model, run by examples/generate.c (the runtime's
    generator, no Python): the text gptc writes in Python, sampled; Falcon's decode step is
    its own attention over the whole caches."""
    from conftest import generate_program
    exe = generate_program(tmp_path)
    gen = (llama_generator[1] if family == "llama"
           else gptc.compile_generate(hf_model(family).eval(), max_len=T))
    tokens = [chr(ord("!") + i).encode() for i in range(V)]
    gen.save(str(tmp_path / "generate"), tokens)
    c = subprocess.run([str(exe), str(tmp_path / "generate"), "ABC", "40", "7", "0.9", "20"],
                       capture_output=True, timeout=300)
    assert c.returncode == 0, c.stderr
    ids = gen.generate([32, 33, 34], 40, temperature=0.9, top_k=20, seed=7)
    assert c.stdout == b"ABC" + b"".join(tokens[i] for i in ids) + b"\n"


@pytest.mark.parametrize("family", ["mistral", "gemma2"])
def test_sliding_windows_and_softcaps_generate_transformers_greedy_text(family):
    """A sliding window of 5 tokens, shorter than the cache: the decode step hides the cached
    positions 5 or more before the token (Mistral's every layer; Gemma 2's every other, with
    its scores soft-capped, tanh(s / 50) * 50). Greedy, the tokens transformers' generate
    writes, from a short prompt and from one past the prefill's length (whose own forward
    masks the window)."""
    torch.manual_seed(0)
    sizes = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=T, sliding_window=5, vocab_size=V,
                 bos_token_id=0, eos_token_id=0)
    cfg = (transformers.MistralConfig(**sizes) if family == "mistral"
           else transformers.Gemma2Config(head_dim=16, **sizes))
    hf = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    gen = gptc.compile_generate(hf)
    assert gen.max_len == T
    for prompt in ([5, 6, 7], list(range(3, 3 + T // 2 + 1))):
        n = T - len(prompt)
        assert gen.generate(prompt, n, temperature=0) == greedy_as_transformers(hf, prompt, n)


@pytest.mark.parametrize("family", ["falcon", "bloom", "codegen", "gptj"])
def test_families_with_their_own_attention_code_generate_transformers_greedy_text(family):
    """Falcon (SDPA on its own, one key/value head), Bloom (ALiBi biases and baddbmm),
    CodeGen (its rotary table indexed at the position: a row lookup) and GPT-J (its table
    gathered at the position, which capture prints as that row lookup) attend with their own
    code, not through transformers' attention interface: the decode step hands them the
    whole caches with the token's key and value written at its position, and the causal
    mask they build from gptc's cache hides the positions past it. Greedy, the tokens
    transformers' generate writes, from a short prompt and from one past the prefill's."""
    hf = hf_model(family).eval()
    gen = gptc.compile_generate(hf, max_len=T)  # Bloom's config gives no positions
    assert gen.step.captured.mlir.count("aten.where.self") >= 4  # two caches a layer
    assert "aten.gather" not in gen.step.captured.mlir
    for prompt in ([5, 6, 7], list(range(3, 3 + T // 2 + 1))):
        n = T - len(prompt)
        assert gen.generate(prompt, n, temperature=0) == greedy_as_transformers(hf, prompt, n)


def test_generation_refuses_what_its_cache_cannot_hold(monkeypatch):
    """One line each, before anything is compiled: a model whose forward fails under gptc's
    cache (planted: the cache raises when asked its mask's sizes), and a decode step that
    differs from the model's own forward (planted: the positions after the token left
    visible)."""
    torch.manual_seed(0)
    falcon = hf_model("falcon").eval()

    def sizes(*args, **kw):
        raise TypeError("planted")
    with monkeypatch.context() as m:
        m.setattr(gptc.hf._Cache, "get_mask_sizes", sizes)
        with pytest.raises(GptcError) as e:
            gptc.compile_generate(falcon, max_len=T)
    assert str(e.value) == ("compile_generate: FalconForCausalLM's forward fails under gptc's "
                            "key/value cache and attention (TypeError: planted); gptc cannot "
                            "generate with it")

    hf = hf_model("llama").eval()
    attention = gptc.hf._decode_attention

    def leaky(*args, **kw):
        gptc.hf._Cache.decoding.pos = torch.tensor([T])  # every position counted as written
        return attention(*args, **kw)
    monkeypatch.setattr(gptc.hf, "_decode_attention", leaky)
    with pytest.raises(GptcError) as e:
        gptc.compile_generate(hf)
    assert re.fullmatch(r"compile_generate: LlamaForCausalLM's forward through gptc's key/value "
                        r"cache is \S+ from its own at position 0; gptc cannot generate with it",
                        str(e.value))
