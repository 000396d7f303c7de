"""Training steps compiled by gptc: parity with PyTorch, determinism, checkpoints,
gradient checks and the gradient-flow arbiter."""
import copy
import json
import math
import os
import platform
import re
import subprocess

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import safe_open

import gptc
from gptc.parity import (nanogpt_lr, torch_adamw, torch_step, worst_param_difference,
                          worst_tensor_difference)
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig

ADAMW = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, eps=1e-8)


def batches(n, cfg, batch=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=g)
        y = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=g)
        y[0, :3] = -1  # ignore_index positions
        out.append((x, y))
    return out


def lr_at(it, total=20):
    return nanogpt_lr(it, lr=1e-3, min_lr=1e-4, warmup=5, decay_iters=total)


@pytest.mark.parametrize("bias,flash", [(True, True), (False, True), (True, False)])
def test_twenty_steps_match_pytorch(bias, flash, tmp_path):
    """flash=False: nanoGPT's manual attention (q k^T scaled, masked_fill where a tril
    buffer == 0, softmax, dropout, @ v) in place of scaled_dot_product_attention, raised
    to the same attention kernel."""
    torch.manual_seed(0)
    cfg = TinyGPTConfig(bias=bias, dropout=0.0, flash=flash)
    model = TinyGPT(cfg).train()
    ref = copy.deepcopy(model)
    data = batches(20, cfg)
    step = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), grad_clip=1.0,
                                   check_gradients=True, workdir=str(tmp_path))
    opt = torch_adamw(ref, **ADAMW)
    print(f"\nbias={bias} flash={flash}: {step.num_kernels} kernels per step")
    assert step.num_kernels <= 25 * cfg.n_layer + 15  # the fusion budget
    for it, (x, y) in enumerate(data):
        lr = lr_at(it)
        loss = step(x, y, lr=lr).item()
        ref_loss = torch_step(ref, opt, x, y, lr=lr)
        sd = step.state_dict()
        worst = worst_param_difference(sd, ref)
        rel = abs(loss - ref_loss) / abs(ref_loss)
        print(f"step {it + 1:2d}: loss {loss:.7f} torch {ref_loss:.7f} "
              f"rel {rel:.2e} worst param diff {worst:.2e}")
        assert rel <= 1e-5
        assert worst <= 1e-4
    assert torch.equal(sd["lm_head.weight"], sd["transformer.wte.weight"])


def run_steps(step, data, start=0):
    for it in range(start, len(data)):
        step(*data[it], lr=lr_at(it, total=len(data)))
    return step.state_dict()


def dropout_model():
    torch.manual_seed(3)
    cfg = TinyGPTConfig(dropout=0.1)
    return TinyGPT(cfg).train(), cfg


def test_dropout_runs_are_bitwise_identical_across_runs_and_threads(tmp_path):
    model, cfg = dropout_model()
    data = batches(50, cfg)
    a = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=7,
                                workdir=str(tmp_path / "a"))
    b = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=7,
                                workdir=str(tmp_path / "b"))
    # The fusion budget holds with dropout (and biases) too: each dropout is fused.
    assert a.num_kernels <= 25 * cfg.n_layer + 15
    a.set_num_threads(1)
    b.set_num_threads(2)
    b.save(str(tmp_path / "start.safetensors"))
    sa, sb = run_steps(a, data), run_steps(b, data)
    for n in sa:
        assert torch.equal(sa[n], sb[n]), n
    # Counts that split no extent evenly, past the cores too: the same bits.
    for threads in (3, 7):
        b.load(str(tmp_path / "start.safetensors"))
        b.set_num_threads(threads)
        st = run_steps(b, data)
        for n in sa:
            assert torch.equal(sa[n], st[n]), (threads, n)
    # Dropout is really on: another seed gives other parameters.
    c = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=8,
                                workdir=str(tmp_path / "c"))
    sc = run_steps(c, data[:5])
    a5 = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=7,
                                 workdir=str(tmp_path / "a5"))
    sa5 = run_steps(a5, data[:5])
    assert not torch.equal(sc["transformer.wte.weight"], sa5["transformer.wte.weight"])


def test_thread_count_starts_at_torchs(tmp_path):
    """A compiled step starts with as many threads as PyTorch's ops use here
    (torch.get_num_threads(): 1 in these tests, which conftest sets); set_num_threads
    changes it, and neither changes a loss."""
    model, cfg = dropout_model()
    data = batches(3, cfg)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        two = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=7,
                                      workdir=str(tmp_path / "two"))
    finally:
        torch.set_num_threads(before)
    one = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=7,
                                  workdir=str(tmp_path / "one"))
    assert two.num_threads == 2 and one.num_threads == before == 1
    assert [two(x, y).item() for x, y in data] == [one(x, y).item() for x, y in data]
    one.set_num_threads(0)
    assert one.num_threads == 0


def test_save_and_resume_is_bitwise(tmp_path):
    model, cfg = dropout_model()
    data = batches(50, cfg)
    whole = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=7,
                                    workdir=str(tmp_path / "whole"))
    expected = run_steps(whole, data)

    first = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=7,
                                    workdir=str(tmp_path / "first"))
    for it in range(25):
        first(*data[it], lr=lr_at(it, total=50))
    ckpt = tmp_path / "ckpt.safetensors"
    first.save(str(ckpt))
    del first

    resumed = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=0,
                                      workdir=str(tmp_path / "resumed"))
    resumed.load(str(ckpt))
    assert resumed.num_steps == 25 and resumed.seed == 7
    got = run_steps(resumed, data, start=25)
    for n in expected:
        assert torch.equal(expected[n], got[n]), n


def stepped_once(tmp_path, n_batches):
    """A training step of the dropout model in tmp_path/s, run once on the first of
    `n_batches` batches; (step, batches)."""
    model, cfg = dropout_model()
    data = batches(n_batches, cfg)
    step = gptc.compile_train_step(model, data[0], workdir=str(tmp_path / "s"))
    step(*data[0])
    return step, data


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    model, cfg = dropout_model()
    data = batches(1, cfg)
    step = gptc.compile_train_step(model, data[0], workdir=str(tmp_path / "s"))
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(gptc.GptcError, match="cannot read checkpoint"):
        step.load(str(bad))
    with pytest.raises(gptc.GptcError, match="cannot read checkpoint"):
        step.load(str(tmp_path / "missing.safetensors"))


def test_checkpoints_of_another_writer_cut_short_or_missing_a_tensor_are_refused(tmp_path):
    """A checkpoint with the step's tensors written by another program (no gptc metadata),
    one whose format is not gptc's, one missing a tensor, one cut in half: one line each,
    and the step as it was."""
    from safetensors.torch import load_file, save_file
    step, _ = stepped_once(tmp_path, 1)
    good = tmp_path / "good.safetensors"
    step.save(str(good))
    tensors = load_file(str(good))
    with safe_open(str(good), "pt") as f:
        meta = f.metadata()
    save_file(tensors, str(tmp_path / "torch.safetensors"))
    save_file(tensors, str(tmp_path / "format.safetensors"), metadata=dict(meta, format="pt"))
    first = sorted(tensors)[0]
    save_file({n: t for n, t in tensors.items() if n != first},
              str(tmp_path / "short.safetensors"), metadata=meta)
    blob = good.read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(blob[:len(blob) // 2])
    before = {n: t.clone() for n, t in step.state_dict().items()}
    cases = {"torch": "not a gptc training checkpoint", "format": "not a gptc training checkpoint",
             "short": f"missing tensor '{first}'", "cut": "cannot read checkpoint"}
    for name, message in cases.items():
        with pytest.raises(gptc.GptcError, match=r"^[^\n]*" + re.escape(message) + r"[^\n]*$"):
            step.load(str(tmp_path / f"{name}.safetensors"))
        assert step.num_steps == 1
        after = step.state_dict()
        assert all(torch.equal(before[n], after[n]) for n in before), name
    step.load(str(good))  # the good one still loads


def test_wrong_state_is_refused_and_leaves_the_step_as_it_was(tmp_path):
    """Another model's checkpoint or state_dict (the same names, other shapes), a NaN or
    negative lr, a negative thread count: one clear error each, and the step's parameters,
    moments and counter unchanged."""
    model, cfg = dropout_model()
    data = batches(2, cfg)
    step = gptc.compile_train_step(model, data[0], workdir=str(tmp_path / "s"))
    step(*data[0])
    torch.manual_seed(1)
    other_cfg = TinyGPTConfig(n_embd=32)
    other = gptc.compile_train_step(TinyGPT(other_cfg).train(), batches(1, other_cfg)[0],
                                    workdir=str(tmp_path / "o"))
    other.save(str(tmp_path / "other.safetensors"))
    before = {n: t.clone() for n, t in step.state_dict().items()}
    step.save(str(tmp_path / "before.safetensors"))
    with pytest.raises(gptc.GptcError, match=r"tensor '.*' is float32 \(.*\), this step has"):
        step.load(str(tmp_path / "other.safetensors"))
    with pytest.raises(gptc.GptcError, match="state_dict entry '.*' has shape"):
        step.load_state_dict(other.state_dict())
    with pytest.raises(gptc.GptcError, match="lr must be a finite number >= 0, got nan"):
        step(*data[1], lr=float("nan"))
    with pytest.raises(gptc.GptcError, match="lr must be a finite number >= 0, got -0.1"):
        step(*data[1], lr=-0.1)
    with pytest.raises(gptc.GptcError, match="^lr must be a finite number >= 0, got '0.001'$"):
        step(*data[1], lr="0.001")  # float() took a string
    with pytest.raises(gptc.GptcError, match=r"^lr must be a finite number >= 0, got tensor\(\[0.0010, 0.0020\]\)$"):
        step(*data[1], lr=torch.tensor([1e-3, 2e-3]))
    # 2.5 was truncated to 2, 10**20 pybind11's TypeError; "4" and True were taken as 4 and 1
    for n in (-1, 1025, 2.5, 10**20, "4", True):
        with pytest.raises(gptc.GptcError, match=f"^thread count must be an integer from 0 to 1024, got {n!r}$"):
            step.set_num_threads(n)
    assert step.num_threads == 1
    assert step.num_steps == 1
    for n, t in step.state_dict().items():
        assert torch.equal(t, before[n]), n
    step.save(str(tmp_path / "after.safetensors"))  # the AdamW moments too
    with safe_open(str(tmp_path / "before.safetensors"), "numpy") as f, \
            safe_open(str(tmp_path / "after.safetensors"), "numpy") as g:
        assert f.metadata() == g.metadata() and set(f.keys()) == set(g.keys())
        for n in f.keys():
            assert np.array_equal(f.get_tensor(n), g.get_tensor(n)), n


class FrozenAndBuffer(nn.Module):
    """A frozen layer (requires_grad=False) and a float buffer between an embedding and a
    head: only the embedding and the head are trained."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 16)
        self.frozen = nn.Linear(16, 16)
        self.frozen.requires_grad_(False)
        self.register_buffer("scale", torch.full((16, 16), 0.5))
        self.head = nn.Linear(16, 11)

    def forward(self, idx, targets):
        logits = self.head(self.frozen(self.emb(idx)) @ self.scale)
        return logits, F.cross_entropy(logits.view(-1, 11), targets.view(-1), ignore_index=-1)


def train_beside_eager(model, ref, steps, tmp_path, **options):
    """`steps` steps of a gptc step compiled from `model` and of eager AdamW on `ref` (a copy),
    on batches of an 11-token vocabulary at lr 1e-2, the losses equal to 1e-5; the step."""
    step = gptc.compile_train_step(model, batches(1, TinyGPTConfig(vocab_size=11))[0],
                                   optimizer=gptc.AdamW(**ADAMW), grad_clip=1.0,
                                   workdir=str(tmp_path), **options)
    opt = torch_adamw(ref, **ADAMW)
    for x, y in batches(steps, TinyGPTConfig(vocab_size=11)):
        loss = step(x, y, lr=1e-2).item()
        ref_loss = torch_step(ref, opt, x, y, lr=1e-2)
        assert abs(loss - ref_loss) <= 1e-5 * abs(ref_loss)
    return step


def test_frozen_parameters_and_buffers_are_not_trained(tmp_path):
    """Buffers and parameters without requires_grad were differentiated, clipped, decayed
    and updated like the rest (a rank-2 buffer shrank by weight decay), and the trainable
    parameters then drifted from eager's; with check_gradients, a buffer failed the
    gradient-flow check."""
    torch.manual_seed(0)
    model = FrozenAndBuffer()
    ref = copy.deepcopy(model)
    frozen, scale = model.frozen.weight.detach().clone(), model.scale.clone()
    step = train_beside_eager(model, ref, 5, tmp_path, check_gradients=True)
    sd = step.state_dict()
    assert torch.equal(sd["frozen.weight"], frozen) and torch.equal(sd["scale"], scale)
    assert worst_param_difference(sd, ref) <= 1e-4
    assert not torch.equal(sd["emb.weight"], model.emb.weight)  # the rest did train
    # A state_dict without a buffer (torch leaves non-persistent ones out) keeps the step's;
    # one without a trained parameter is refused.
    step.load_state_dict({n: t for n, t in ref.state_dict().items() if n != "scale"})
    assert torch.equal(step.state_dict()["scale"], scale)
    with pytest.raises(gptc.GptcError, match="^state_dict has no entry 'emb.weight'$"):
        step.load_state_dict({n: t for n, t in ref.state_dict().items() if n != "emb.weight"})


class UnusedAndDetached(nn.Module):
    """A head, a parameter the forward never reads and one it reads only through a detach:
    PyTorch leaves the last two's .grad None, so AdamW skips them, weight decay included."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 16)
        self.head = nn.Linear(16, 11)
        self.unused = nn.Parameter(torch.randn(16, 16))
        self.detached = nn.Parameter(torch.randn(11))

    def forward(self, idx, targets):
        logits = self.head(self.emb(idx)) + self.detached.detach()
        return logits, F.cross_entropy(logits.view(-1, 11), targets.view(-1), ignore_index=-1)


def test_parameters_no_gradient_reaches_are_left_as_they_are(tmp_path):
    """They were given a zero gradient and decayed by AdamW each step (an unused 16x16
    weight moved by lr * wd * |w|), and the loss drifted from eager's from the second step
    on; eager leaves them untouched."""
    torch.manual_seed(0)
    model = UnusedAndDetached()
    ref = copy.deepcopy(model)
    unused, detached = model.unused.detach().clone(), model.detached.detach().clone()
    step = train_beside_eager(model, ref, 4, tmp_path)
    sd = step.state_dict()
    assert torch.equal(sd["unused"], unused) and torch.equal(sd["detached"], detached)
    assert ref.unused.grad is None and torch.equal(ref.unused.detach(), unused)
    assert worst_param_difference(sd, ref) <= 1e-4
    norms = sorted(step.last_grad_norms.tolist())  # still reported: 0 for those two
    assert norms[:2] == [0.0, 0.0] and norms[2] > 0


class LlamaStyle(nn.Module):
    """A relative of nanoGPT in the style of LLaMA and modded-nanogpt: RMSNorm with and
    without a weight, no biases, rotary embeddings computed in the forward, grouped-query
    attention (4 query heads, 2 key/value heads), a SwiGLU MLP (silu), a ReLU-squared MLP,
    and logits soft-capped by tanh and clamped."""

    def __init__(self, vocab=11, n_embd=16, n_head=4, n_kv_head=2):
        super().__init__()
        self.n_head, self.n_kv_head = n_head, n_kv_head
        hs = n_embd // n_head
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, hs, 2) / hs))
        self.wte = nn.Embedding(vocab, n_embd)
        self.norm1, self.norm2 = nn.RMSNorm(n_embd), nn.RMSNorm(n_embd)
        self.q = nn.Linear(n_embd, n_embd, bias=False)
        self.kv = nn.Linear(n_embd, 2 * n_embd * n_kv_head // n_head, bias=False)
        self.proj = nn.Linear(n_embd, n_embd, bias=False)
        self.gate, self.up = nn.Linear(n_embd, 32, bias=False), nn.Linear(n_embd, 32, bias=False)
        self.down = nn.Linear(32, n_embd, bias=False)
        self.fc, self.fc_out = nn.Linear(n_embd, 32, bias=False), nn.Linear(32, n_embd, bias=False)
        self.head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.wte(idx)
        B, T, C = x.shape
        h, hs = self.norm1(x), C // self.n_head
        angles = torch.outer(torch.arange(T, dtype=torch.float32), self.inv_freq)
        cos, sin = angles.cos()[None, None], angles.sin()[None, None]

        def rotary(t):  # computed in the forward, as Hugging Face's LLaMA does
            t1, t2 = t.chunk(2, dim=-1)
            return torch.cat((t1 * cos - t2 * sin, t2 * cos + t1 * sin), dim=-1)

        q = rotary(self.q(h).view(B, T, self.n_head, hs).transpose(1, 2))
        k, v = (t.view(B, T, self.n_kv_head, hs).transpose(1, 2)
                for t in self.kv(h).split(self.n_kv_head * hs, dim=2))
        k = rotary(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        h = self.norm2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        x = x + self.fc_out(F.relu(self.fc(F.rms_norm(x, (C,)))).square())
        logits = (15 * torch.tanh(self.head(F.rms_norm(x, (C,))) / 15)).clamp(-10, 10)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                       ignore_index=-1)


def test_a_llama_style_relative_trains_as_eager_does(tmp_path):
    """RMSNorm, rotary, GQA, SwiGLU, ReLU squared, soft-capped logits: 5 AdamW steps beside
    eager's, every parameter reached by a gradient; -O0 (no fusion) gives the same bits."""
    torch.manual_seed(0)
    model = LlamaStyle()
    ref = copy.deepcopy(model)
    fused = train_beside_eager(model, ref, 5, tmp_path / "o3", check_gradients=True)
    assert worst_param_difference(fused.state_dict(), ref) <= 1e-4
    data = batches(8, TinyGPTConfig(vocab_size=11))
    unfused = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW),
                                      fuse=False, workdir=str(tmp_path / "o0"))
    fused.save(str(tmp_path / "five.ckpt"))  # parameters, moments and step
    unfused.load(str(tmp_path / "five.ckpt"))
    assert fused.num_kernels < unfused.num_kernels
    for x, y in data[5:]:
        assert torch.equal(fused(x, y, lr=1e-2), unfused(x, y, lr=1e-2))
    su = unfused.state_dict()
    assert all(torch.equal(t, su[n]) for n, t in fused.state_dict().items())


def test_the_bench_llama_style_model_trains_as_eager_does(tmp_path):
    """gptc.testing.llama_style (bench/run.py --model llama): 5 AdamW steps beside eager's,
    every parameter reached by a gradient, RMSNorm's sums fused with their epilogues, the
    rotary embeddings' transposes, splits and concats no kernels."""
    from gptc.testing.llama_style import LlamaConfig, LlamaStyle as BenchLlama
    torch.manual_seed(0)
    model = BenchLlama(LlamaConfig(block_size=TinyGPTConfig().block_size, vocab_size=11))
    ref = copy.deepcopy(model)
    step = train_beside_eager(model, ref, 5, tmp_path, check_gradients=True)
    name, worst = worst_tensor_difference(step.state_dict(), ref)
    print(f"\nworst parameter difference {worst:.2e} ({name})")
    # At lr 1e-2 an AdamW step moves a parameter by up to 1e-2 whatever its gradient's
    # size, so rounding differences in a near-zero gradient show at ~1e-4 after 5 steps.
    assert worst <= 1e-3
    # 67 at the bench's tiny size: the rotary embeddings read and write their heads in
    # place (gpt-strided-views), 93 without.
    assert step.num_kernels <= 70, step.num_kernels


def test_nanogpts_manual_attention_is_the_flash_kernel(tmp_path):
    """nanoGPT's attention without flash, at dropout 0.1 (on the attention weights too):
    gpt-raise-attention makes it scaled_dot_product_attention's one causal kernel, so the
    manual model takes the flash model's kernels and gives its bits, at -O0 and -O3 alike,
    over 4 steps; the tril buffer is left as it is, and a state_dict that changes it is
    refused (the compiled step no longer reads it)."""
    torch.manual_seed(0)
    cfg = TinyGPTConfig(flash=False, dropout=0.1)
    model = TinyGPT(cfg).train()
    flash = TinyGPT(TinyGPTConfig(flash=True, dropout=0.1)).train()
    masks = {n for n in model.state_dict() if n.endswith(".attn.bias")}
    assert len(masks) == cfg.n_layer
    flash.load_state_dict({n: t for n, t in model.state_dict().items() if n not in masks})
    data = batches(4, cfg)
    steps = [gptc.compile_train_step(m, data[0], workdir=str(tmp_path / name), fuse=fuse)
             for name, m, fuse in (("o0", model, False), ("o3", model, True),
                                   ("flash", flash, True))]
    assert steps[1].num_kernels == steps[2].num_kernels <= 25 * cfg.n_layer + 15
    assert steps[1].num_kernels < steps[0].num_kernels
    for x, y in data:
        losses = [s(x, y) for s in steps]
        assert all(torch.equal(loss, losses[2]) for loss in losses), losses
    unfused, fused, by_flash = (s.state_dict() for s in steps)
    assert all(torch.equal(t, unfused[n]) and torch.equal(t, fused[n]) for n, t in by_flash.items())
    mask = "transformer.h.0.attn.bias"
    assert torch.equal(fused[mask], model.transformer.h[0].attn.bias)
    steps[1].load_state_dict(fused)  # the mask as it was: accepted
    changed = dict(fused, **{mask: torch.ones_like(fused[mask])})
    with pytest.raises(gptc.GptcError, match=f"'{mask}' is not the causal mask"):
        steps[1].load_state_dict(changed)
    # Below the Python API, in the runtime's own buffer (as a deployment binary could): the
    # manifest marks the masks, and the runtime refuses the run before any kernel.
    with open(os.path.join(steps[1].artifact_dir, "manifest.json")) as f:
        marked = {a["name"] for a in json.load(f)["args"] if a.get("tril_ones")}
    assert marked == masks
    steps[1].model.set_param(mask, np.ones(tuple(fused[mask].shape), dtype=np.float32))
    with pytest.raises(gptc.GptcError, match=f"run: param '{mask}' no longer holds the causal "
                       r"mask tril\(ones\).*\(element \[0, 0, 0, 1\] is not 0\)"):
        steps[1](*data[0])
    assert steps[1].num_steps == len(data)
    steps[1].model.set_param(mask, fused[mask].numpy())
    steps[1](*data[0])


class LectureGPT(nn.Module):
    """Karpathy's GPT of the "Let's build GPT" lecture (its gpt.py): every head a module of
    its own, with its own key, query, value and tril buffer; q @ k^T scaled by C**-0.5 (C
    the model's width, as the lecture has it), masked_fill where tril[:T, :T] == 0,
    softmax, dropout, @ v; the heads concatenated and projected; a ReLU MLP; pre-LayerNorm
    blocks; positions from torch.arange."""

    class Head(nn.Module):
        def __init__(self, n_embd, head_size, block_size, dropout):
            super().__init__()
            self.key = nn.Linear(n_embd, head_size, bias=False)
            self.query = nn.Linear(n_embd, head_size, bias=False)
            self.value = nn.Linear(n_embd, head_size, bias=False)
            self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            B, T, C = x.shape
            k, q = self.key(x), self.query(x)
            wei = q @ k.transpose(-2, -1) * C**-0.5
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
            wei = self.dropout(F.softmax(wei, dim=-1))
            return wei @ self.value(x)

    class Block(nn.Module):
        def __init__(self, n_embd, n_head, block_size, dropout):
            super().__init__()
            self.heads = nn.ModuleList(LectureGPT.Head(n_embd, n_embd // n_head, block_size,
                                                       dropout) for _ in range(n_head))
            self.proj = nn.Linear(n_embd, n_embd)
            self.ffwd = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.ReLU(),
                                      nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout))
            self.drop = nn.Dropout(dropout)
            self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.drop(self.proj(torch.cat([head(h) for head in self.heads], dim=-1)))
            return x + self.ffwd(self.ln2(x))

    def __init__(self, vocab=11, n_embd=16, n_head=2, n_layer=2, block_size=32, dropout=0.0):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(*[LectureGPT.Block(n_embd, n_head, block_size, dropout)
                                      for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.token_embedding_table(idx) + self.position_embedding_table(torch.arange(T))
        logits = self.lm_head(self.ln_f(self.blocks(x)))
        return logits, F.cross_entropy(logits.view(B * T, -1), targets.view(B * T),
                                       ignore_index=-1)  # the tests' batches have some


def kernel_calls(source: str, needle: str) -> int:
    """How many times a step of the kernels.cpp `source` runs the code `needle`: its entry's
    calls followed into the kernels (a kernel is written once however often it is called,
    and a horizontal group calls its members)."""
    bodies = dict(re.findall(r"^static void (\w+)\(.*?\) \{\n(.*?)^\}$", source, re.S | re.M))

    def runs(body: str) -> int:
        if needle in body:
            return body.count(needle)
        return sum(runs(bodies[name]) for name in re.findall(r"\b(k\d+\w*)\(", body)
                   if name in bodies)
    return runs(source.split("GPTC_EXPORT const char* gptc_entry(", 1)[1])


def test_the_lecture_gpts_heads_are_attention_kernels(tmp_path):
    """Karpathy's lecture GPT, whose heads are modules of their own with q, k, v of [B, T,
    D]: gpt-raise-attention makes each head's spelled-out attention one attention kernel
    (its scores, mask, softmax and dropout are no tensors of their own). 5 AdamW steps
    beside eager's without dropout; with dropout 0.1 (the attention weights' included),
    -O0 and -O3 give the same bits over 4 steps."""
    torch.manual_seed(0)
    model = LectureGPT()
    ref = copy.deepcopy(model)
    step = train_beside_eager(model, ref, 5, tmp_path / "eager", check_gradients=True)
    assert worst_param_difference(step.state_dict(), ref) <= 1e-3
    with open(os.path.join(step.artifact_dir, "kernels.cpp")) as f:
        source = f.read()
    heads = 2 * 2  # n_layer * n_head: one attention and one attention gradient each
    assert kernel_calls(source, "gptc::attention_rows(") == heads
    assert kernel_calls(source, "gptc::attention_grad_rows(") == heads

    torch.manual_seed(0)
    dropped = LectureGPT(dropout=0.1).train()
    data = batches(4, TinyGPTConfig(vocab_size=11))
    steps = [gptc.compile_train_step(dropped, data[0], workdir=str(tmp_path / name), fuse=fuse)
             for name, fuse in (("o0", False), ("o3", True))]
    assert steps[1].num_kernels < steps[0].num_kernels
    for x, y in data:
        losses = [s(x, y) for s in steps]
        assert torch.equal(losses[0], losses[1]), losses
    unfused, fused = (s.state_dict() for s in steps)
    assert all(torch.equal(t, unfused[n]) for n, t in fused.items())


def test_a_step_with_an_index_out_of_range_fails_whole(tmp_path):
    """A target or token id out of range fails the step before any kernel runs: the
    kernels' own checks came after AdamW had updated every parameter and moment (from row
    0 in the bad one's place), and the failed step's number was then used again."""
    model, cfg = dropout_model()
    data = batches(2, cfg)
    step = gptc.compile_train_step(model, data[0], workdir=str(tmp_path / "s"))
    step(*data[0])
    before = {n: t.clone() for n, t in step.state_dict().items()}
    x, y = data[1]
    for bad_x, bad_y, said in ((x, y.clone().fill_(cfg.vocab_size), "cross_entropy target"),
                               (x.clone().fill_(-1), y, "embedding index"),
                               (x.clone().fill_(cfg.vocab_size), y, "embedding index")):
        with pytest.raises(gptc.GptcError, match=f"run failed: {said} out of range"):
            step(bad_x, bad_y)
        assert step.num_steps == 1
        for n, t in step.state_dict().items():
            assert torch.equal(t, before[n]), (said, n)
    ignored = y.clone()
    ignored[0, :3] = -1  # TinyGPT's ignore_index: not out of range
    step(x, ignored)
    assert step.num_steps == 2


def test_bad_checkpoint_metadata_is_refused_and_leaves_the_step_as_it_was(tmp_path):
    """A checkpoint's step and seed are checked with its tensors, before anything is copied
    in: a missing or non-numeric step was a KeyError or ValueError after the parameters
    were overwritten, a negative one trained on to non-finite parameters, and one beyond
    int64 an OverflowError at the next step."""
    from safetensors.numpy import save_file
    model, cfg = dropout_model()
    data = batches(2, cfg)
    step = gptc.compile_train_step(model, data[0], seed=7, workdir=str(tmp_path / "s"))
    step(*data[0])
    good = tmp_path / "good.safetensors"
    step.save(str(good))
    with safe_open(str(good), "numpy") as f:
        meta = f.metadata()
        tensors = {n: f.get_tensor(n) for n in f.keys()}
    step(*data[1])  # the state differs from the checkpoint's: a copy-in would show
    before = {n: t.clone() for n, t in step.state_dict().items()}
    huge = "99999999999999999999999"
    for key, value, said in (
            ("step", None, "no 'step' in the checkpoint's metadata"),
            ("step", "abc", "metadata 'step' must be an integer from 0 to 9223372036854775806, got 'abc'"),
            ("step", "-3", "metadata 'step' must be an integer from 0 to .*, got '-3'"),
            ("step", huge, f"metadata 'step' must be an integer from 0 to .*, got '{huge}'"),
            ("seed", "abc", "metadata 'seed' must be an integer from -9223372036854775808 to "
                            "9223372036854775807, got 'abc'"),
            ("seed", huge, f"metadata 'seed' must be an integer .*, got '{huge}'")):
        bad = tmp_path / f"{key}-{value}.safetensors"
        save_file(tensors, str(bad), metadata={**{k: v for k, v in meta.items() if k != key},
                                               **({key: value} if value else {})})
        with pytest.raises(gptc.GptcError, match=f"^{bad}: {said}$"):
            step.load(str(bad))
        assert step.num_steps == 2 and step.seed == 7, (key, value)
        for n, t in step.state_dict().items():
            assert torch.equal(t, before[n]), (key, value, n)
    step.load(str(good))
    assert step.num_steps == 1


def test_a_model_without_a_scalar_loss_and_a_seed_beyond_int64_are_refused():
    """The autodiff pass's own error named the temporary model.mlir, deleted by then; a
    seed beyond int64 compiled, then raised an OverflowError at the first step."""
    model, cfg = dropout_model()
    data = batches(1, cfg)

    class LogitsOnly(nn.Module):
        def __init__(self, gpt):
            super().__init__()
            self.gpt = gpt

        def forward(self, idx, targets):
            return self.gpt(idx, targets)[0]

    with pytest.raises(gptc.GptcError, match=r"^the model must return its loss as a scalar "
                       r"floating-point output \(its tensor outputs: f32 \(4, 32, 65\)\)$"):
        gptc.compile_train_step(LogitsOnly(model).train(), data[0])
    # gptc.gradcheck refuses it the same way, before compiling.
    with pytest.raises(gptc.GptcError, match=r"^the model must return its loss as a scalar "
                       r"floating-point output \(its tensor outputs: f64 \(4, 32, 65\)\)$"):
        gptc.gradcheck(LogitsOnly(TinyGPT(TinyGPTConfig(n_layer=1, n_embd=16))), data[0])
    with pytest.raises(gptc.GptcError, match="seed must be an integer from .* got 18446744073709551616"):
        gptc.compile_train_step(model, data[0], seed=2**64)


class LossAndMetric(nn.Module):
    """forward returns (loss, a logged metric): two scalar floating-point outputs."""

    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(11, 16), nn.Linear(16, 11)

    def forward(self, idx, targets):
        logits = self.head(self.emb(idx))
        return F.cross_entropy(logits.view(-1, 11), targets.view(-1)), logits.mean()


def test_a_model_with_two_scalar_outputs_is_refused():
    """Autodiff differentiated the last scalar: a (loss, metric) model trained the metric
    and step() returned it; gradcheck checked one against the other's differences."""
    x, y = torch.randint(0, 11, (2, 8)), torch.randint(0, 11, (2, 8))
    said = (r"^the model returns 2 scalar floating-point outputs \(output0, output1\): "
            r"the loss must be the only one$")
    with pytest.raises(gptc.GptcError, match=said):
        gptc.compile_train_step(LossAndMetric(), (x, y))
    with pytest.raises(gptc.GptcError, match=said):
        gptc.gradcheck(LossAndMetric(), (x, y))


def test_gradcheck_refuses_dropout_a_bad_seed_and_bad_targets():
    """A dropout model compiled, then failed with the runtime's 'got 2 inputs, the model
    takes 3' (its own check looked for the compiler's rng input in the capture); a bad
    seed was numpy's ValueError and a bad target the runtime's RuntimeError."""
    torch.manual_seed(0)
    cfg = TinyGPTConfig(n_layer=1, n_embd=16, dropout=0.1)
    (x, y), = batches(1, cfg, batch=2)
    with pytest.raises(gptc.GptcError, match=r"^gradcheck needs a deterministic model: call "
                                             r"model.eval\(\) or set dropout to 0$"):
        gptc.gradcheck(TinyGPT(cfg).train(), (x, y))
    with pytest.raises(gptc.GptcError, match="^seed must be an integer from 0 to "
                                             "9223372036854775807, got -1$"):
        gptc.gradcheck(TinyGPT(cfg).eval(), (x, y), seed=-1)
    with pytest.raises(gptc.GptcError, match="cross_entropy target out of range"):
        gptc.gradcheck(TinyGPT(cfg).eval(), (x, torch.full_like(y, 1000)))


def test_load_state_dict_is_strict_and_names_the_entry(tmp_path):
    """Like torch's strict load: a misspelt name and a tied alias with a value of its own
    were ignored; numpy, list and bf16 values were AttributeError or TypeError. A refused
    state_dict leaves the step as it was; bf16 values load exactly."""
    torch.manual_seed(0)
    cfg = TinyGPTConfig(n_layer=1, n_embd=16)
    model = TinyGPT(cfg).train()
    step = gptc.compile_train_step(model, batches(1, cfg)[0], workdir=str(tmp_path))
    step.load_state_dict(model.state_dict())  # both tied names, one value: fine
    sd = step.state_dict()
    before = {n: t.clone() for n, t in sd.items()}
    wte = sd["transformer.wte.weight"]
    for state, said in (
            ({**sd, "transformer.h.0.attn.c_atn.weight": wte},
             "state_dict has entries the model does not have: 'transformer.h.0.attn.c_atn.weight'"),
            ({**sd, "lm_head.weight": torch.zeros_like(wte)},
             r"state_dict entries 'lm_head.weight' and 'transformer.wte.weight' differ, but "
             r"they are one parameter in the compiled model \(tied\)"),
            ({**sd, "transformer.wte.weight": wte.numpy()},
             "state_dict entry 'transformer.wte.weight' must be a torch.Tensor, got ndarray"),
            ({**sd, "transformer.wte.weight": wte.tolist()},
             "state_dict entry 'transformer.wte.weight' must be a torch.Tensor, got list"),
            ({**sd, "transformer.wte.weight": wte.to(torch.complex64)},
             "state_dict entry 'transformer.wte.weight' has dtype torch.complex64, the model has f32")):
        with pytest.raises(gptc.GptcError, match=f"^{said}$"):
            step.load_state_dict(state)
        for n, t in step.state_dict().items():
            assert torch.equal(t, before[n]), (said, n)
    half = {n: t.bfloat16() for n, t in sd.items()}
    step.load_state_dict(half)
    for n, t in step.state_dict().items():
        assert torch.equal(t, half[n].float()), n


@pytest.mark.parametrize("bias", [True, False])
def test_gradcheck_f64(bias, tmp_path):
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(bias=bias)).train()
    (x, y), = batches(1, TinyGPTConfig(), batch=2)
    report = gptc.gradcheck(model, (x, y), workdir=str(tmp_path))
    print(f"\nbias={bias}: worst relative error {max(report.values()):.2e}")
    assert len(report) == len({id(p) for p in model.parameters()})
    assert all(err <= 1e-6 for err in report.values()), report  # (max() would skip a NaN)


class Unreached(nn.Module):
    """A parameter no path from the loss reaches."""

    def __init__(self):
        super().__init__()
        self.used = nn.Linear(8, 4)
        self.orphan = nn.Linear(8, 4)

    def forward(self, x, y):
        return F.cross_entropy(self.used(x), y)


class Detached(nn.Module):
    """A gradient cut by detach(): first's parameters get nothing."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.second = nn.Linear(8, 4)

    def forward(self, x, y):
        return F.cross_entropy(self.second(torch.tanh(self.first(x)).detach()), y)


@pytest.mark.parametrize("model,missing", [(Unreached(), ["orphan.weight", "orphan.bias"]),
                                           (Detached(), ["first.weight", "first.bias"])])
def test_gradient_flow_arbiter_names_the_parameter(model, missing, tmp_path):
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    step = gptc.compile_train_step(model, (x, y), check_gradients=True, workdir=str(tmp_path))
    assert sorted(a["name"] for a in step.model.manifest["args"] if a.get("no_gradient")) == sorted(missing)
    with pytest.raises(gptc.GradientFlowError) as info:
        step(x, y)
    print("\n" + str(info.value))
    for name in missing:
        assert f"{name} (no gradient)" in str(info.value)
    assert "second" not in str(info.value) and "used" not in str(info.value)


class ZeroThenMoving(nn.Module):
    """A low-rank branch as LoRA starts it, B zero (so A's gradient is exactly zero at the
    first step, and not after), and a parameter a gradient reaches only times zero (zero at
    every step)."""

    def __init__(self, dead):
        super().__init__()
        self.base = nn.Linear(8, 4)
        self.a = nn.Parameter(torch.randn(2, 8))
        self.b = nn.Parameter(torch.zeros(4, 2))
        self.dead = nn.Parameter(torch.randn(4)) if dead else None

    def forward(self, x, y):
        out = self.base(x) + x @ self.a.t() @ self.b.t()
        if self.dead is not None:
            out = out + self.dead * 0.0
        return F.cross_entropy(out, y)


@pytest.mark.parametrize("dead", [False, True])
def test_a_zero_gradient_on_two_steps_in_a_row_fails_and_on_one_does_not(dead, tmp_path):
    """The manifest names the parameters no gradient reaches (those fail at the first step,
    above); a reached one fails only when its gradient is zero on two steps in a row: LoRA's
    A, zero at the first step only, trains; `dead` fails at the second, named alone."""
    torch.manual_seed(0)
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    step = gptc.compile_train_step(ZeroThenMoving(dead), (x, y), check_gradients=True,
                                   workdir=str(tmp_path))
    assert not any(a.get("no_gradient") for a in step.model.manifest["args"])
    step(x, y, lr=1e-2)
    assert step.last_grad_norms[step._trainable.index("a")].item() == 0.0
    if dead:
        with pytest.raises(gptc.GradientFlowError,
                           match=r"^gradient-flow check failed: dead \(no gradient\); the step"):
            step(x, y, lr=1e-2)
    else:
        step(x, y, lr=1e-2)
        assert step.last_grad_norms.min().item() > 0


def test_a_step_the_gradient_flow_check_refuses_is_not_applied(tmp_path):
    """A NaN weight makes every gradient NaN: the step is refused, and the parameters, the
    AdamW moments and the step count stay exactly as before it (they were all NaN and the
    count 1); a later healthy step is step 1."""
    torch.manual_seed(0)
    cfg = TinyGPTConfig(n_layer=1)
    model = TinyGPT(cfg).train()
    (x, y), = batches(1, cfg, batch=2)
    step = gptc.compile_train_step(model, (x, y), check_gradients=True, workdir=str(tmp_path))
    state = step.state_dict()
    poisoned = state["lm_head.weight"].clone()
    poisoned[0, 0] = float("nan")
    step.load_state_dict({**state, "lm_head.weight": poisoned,
                          "transformer.wte.weight": poisoned})
    runtime = step.model.runtime
    before = {n: runtime.param(n) for n, _, _ in runtime.params}
    with pytest.raises(gptc.GradientFlowError, match="the step was not applied"):
        step(x, y)
    assert step.num_steps == 0
    for n, a in before.items():
        assert np.array_equal(runtime.param(n), a, equal_nan=True), n
    step.load_state_dict(state)  # healthy again: the next step is numbered 1
    step(x, y)
    assert step.num_steps == 1


def test_gptc_check_gradcheck_cli_on_an_f32_capture(tmp_path):
    """`gptc check --gradcheck` builds the f64 twin itself (gpt-promote-f64)."""
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig()).train()
    (x, y), = batches(1, TinyGPTConfig(), batch=2)
    mlir = tmp_path / "model.mlir"
    gptc.capture_save(gptc.capture(model, (x, y), input_names=["idx", "targets"]), str(mlir))
    proc = subprocess.run([gptc.find_tool("gptc"), "check", "--gradcheck", str(mlir)],
                          capture_output=True, text=True)
    print("\n" + proc.stdout.splitlines()[-1])
    assert proc.returncode == 0, proc.stderr
    lines = [l for l in proc.stdout.splitlines() if l.startswith("gradcheck ")]
    assert len(lines) == len({id(p) for p in model.parameters()})
    assert "tolerance 1.0e-06" in proc.stdout


class NanGradient(nn.Module):
    """A finite loss whose second parameter's gradient is NaN: sqrt(b) of a negative b is
    never selected, but its derivative still multiplies the zero that reaches it (as in
    PyTorch). Float inputs, which an f32 capture saves in f32."""

    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.randn(4))
        self.b = nn.Parameter(-torch.ones(4))

    def forward(self, x, keep):
        return (self.a * x).sum() + torch.where(keep, torch.sqrt(self.b), self.b * 0.0).sum()


def test_gptc_check_gradcheck_fails_a_nan_gradient_and_refuses_a_zero_step(tmp_path):
    """A NaN error after a finite one never became the worst (compared with >), so a NaN
    gradient passed the check; a step of 0 made every error NaN and passed; a NaN
    tolerance passed anything. And a capture with float inputs could not be checked at all
    (its f32 inputs against the f64 twin: "no tensor 'x' of 32 bytes")."""
    torch.manual_seed(0)
    x, keep = torch.randn(4), torch.zeros(4, dtype=torch.bool)
    model = NanGradient()
    model(x, keep).backward()
    assert torch.isfinite(model.a.grad).all() and torch.isnan(model.b.grad).all()  # PyTorch too
    mlir = tmp_path / "model.mlir"
    gptc.capture_save(gptc.capture(NanGradient(), (x, keep)), str(mlir))

    def check(*flags):
        return subprocess.run([gptc.find_tool("gptc"), "check", "--gradcheck", str(mlir), *flags],
                              capture_output=True, text=True)

    proc = check()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "worst relative error nan (b)" in proc.stdout
    assert proc.stderr.strip() == "gptc: error: gradcheck failed: b off by nan"
    a = [l for l in proc.stdout.splitlines() if l.startswith("gradcheck a ")]
    assert len(a) == 1 and float(a[0].split()[-1]) < 1e-9  # the f32 inputs, widened
    for flags, said in ((["--step", "0"], "--step must be a finite number > 0, got 0"),
                        (["--tolerance", "nan"], "--tolerance must be a finite number > 0, got nan")):
        proc = check(*flags)  # a command line gptc cannot take: exit 2
        assert proc.returncode == 2 and proc.stderr.strip() == f"gptc: error: {said}", proc.stderr
    with pytest.raises(gptc.GptcError, match="step must be a finite number > 0, got 0"):
        gptc.gradcheck(NanGradient(), (x, keep), step=0.0)


class NearFlat(nn.Module):
    """A loss near 1000 with one parameter, w, whose gradient is 1e-9 x: below what
    central differences of an f64 loss that large resolve (~1e-10)."""

    def __init__(self):
        super().__init__()
        self.v = nn.Parameter(torch.randn(16))
        self.w = nn.Parameter(torch.randn(16))

    def forward(self, x):
        return (x * self.v).sum() + 1e-9 * (x * self.w).sum() + 1000.0


def test_gradcheck_does_not_fail_a_gradient_below_the_differences_resolution(tmp_path):
    """Unseeded, the README's `gptc check --gradcheck` once failed a correct gradient: a
    directional derivative of -1.4e-7 that the differences matched to 1.2e-12, f64 noise,
    was 8e-6 relative. Differences within the resolution now count as 0; one beyond it
    still counts in full."""
    from gptc.gradcheck import relative_error, resolution
    assert relative_error(-1.43e-7, -1.43e-7 + 1.2e-12, resolution(4.2, 1e-3)) == 0
    assert relative_error(1e-7, 0.0, resolution(4.2, 1e-3)) > 0.999  # a zero gradient
    assert relative_error(1.0, 1.0 + 1e-5, resolution(4.2, 1e-3)) == pytest.approx(1e-5, rel=1e-3)
    assert math.isnan(relative_error(math.nan, 1.0, 1e-11))
    torch.manual_seed(0)
    x = torch.randn(16)
    mlir = tmp_path / "model.mlir"
    gptc.capture_save(gptc.capture(NearFlat(), (x,)), str(mlir))
    proc = subprocess.run([gptc.find_tool("gptc"), "check", "--gradcheck", str(mlir)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = {l.split()[1]: l.split() for l in proc.stdout.splitlines() if l.startswith("gradcheck ")}
    analytic, numeric = float(line["w"][3]), float(line["w"][5])
    assert 1e-10 < abs(analytic) < 1e-7 and abs(analytic - numeric) / abs(analytic) > 1e-6
    assert float(line["w"][-1]) == 0 and float(line["v"][-1]) <= 1e-6
    report = gptc.gradcheck(NearFlat(), (x,), workdir=str(tmp_path / "py"))
    assert report["w"] == 0 and report["v"] <= 1e-6, report


def test_a_crash_while_saving_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    import safetensors.numpy
    step, data = stepped_once(tmp_path, 2)
    ckpt = tmp_path / "ckpt.safetensors"
    step.save(str(ckpt))
    before = ckpt.read_bytes()

    def crash(tensors, path, metadata=None):
        with open(path, "wb") as f:
            f.write(b"half a checkpoint")
        raise OSError("disk full")

    step(*data[1])
    monkeypatch.setattr(safetensors.numpy, "save_file", crash)
    with pytest.raises(gptc.GptcError, match=f"^cannot save checkpoint {ckpt}: disk full$"):
        step.save(str(ckpt))
    assert ckpt.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".gptc-ckpt-")] == []
    monkeypatch.undo()
    step.load(str(ckpt))
    assert step.num_steps == 1
    # A folder that is not there: one error naming the path, not a traceback from tempfile.
    with pytest.raises(gptc.GptcError, match="^cannot save checkpoint .*/nowhere/c.safetensors: "
                                             "No such file or directory$"):
        step.save(str(tmp_path / "nowhere" / "c.safetensors"))


def test_a_flipped_byte_in_a_checkpoint_is_found_on_load(tmp_path):
    """Each tensor's CRC-32 is in the checkpoint's metadata: one flipped data byte is an
    error naming the file and the tensor, and the step keeps its state (it loaded silently,
    with a loss off in the fifth digit)."""
    model, cfg = dropout_model()
    data = batches(1, cfg)
    step = gptc.compile_train_step(model, data[0], workdir=str(tmp_path / "s"))
    step(*data[0])
    ckpt = tmp_path / "ckpt.safetensors"
    step.save(str(ckpt))
    raw = bytearray(ckpt.read_bytes())
    header = int.from_bytes(raw[:8], "little")
    raw[8 + header + 1000] ^= 0x10  # a byte inside the data section
    ckpt.write_bytes(bytes(raw))
    before = step.state_dict()
    with pytest.raises(gptc.GptcError, match=r"ckpt.safetensors: tensor '.+' does not match its "
                                             r"checksum \(the file is corrupt\)$"):
        step.load(str(ckpt))
    assert step.num_steps == 1
    for n, t in step.state_dict().items():
        assert torch.equal(t, before[n]), n


def test_save_writes_through_links_and_clears_a_killed_saves_temporaries(tmp_path):
    """A checkpoint saved to a symbolic link goes to its target (the link stays); the
    temporary a save killed with -9 left behind (its process gone) is removed by the next
    save, while one of a live process (a save in flight) is left alone."""
    model, cfg = dropout_model()
    data = batches(1, cfg)
    step = gptc.compile_train_step(model, data[0], workdir=str(tmp_path / "s"))
    step(*data[0])
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "latest.safetensors").symlink_to(store / "ckpt.safetensors")
    # A dead process's temporary (a child that exited), and a live one's (this test's parent).
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = store / f".gptc-ckpt-{dead.pid}-abc123"
    stale.write_bytes(b"x" * 4096)
    live = store / f".gptc-ckpt-{os.getppid()}-def456"
    live.write_bytes(b"y")
    step.save(str(tmp_path / "latest.safetensors"))
    assert (tmp_path / "latest.safetensors").is_symlink()
    assert (store / "ckpt.safetensors").is_file()
    assert not stale.exists() and live.exists()
    restored = gptc.compile_train_step(dropout_model()[0], data[0], workdir=str(tmp_path / "r"))
    restored.load(str(tmp_path / "latest.safetensors"))
    assert restored.num_steps == 1


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="the -march levels compared are x86-64's")
def test_vector_width_never_changes_a_bit(tmp_path, monkeypatch):
    """The same training step built for the host (-march=native: AVX-512 or AVX2), for AVX2
    with FMA (x86-64-v3), for plain x86-64 (SSE2: the scalar matmul and attention loops) and
    with the AVX-512 forms emulated on AVX2 (GPTC_EMULATE_AVX512: SIMDe's intrinsics; what a
    machine without AVX-512 can check of them), 10 steps with dropout 0.1: the same losses
    and parameters, bit for bit."""
    model, cfg = dropout_model()
    data = batches(10, cfg)
    losses, states = {}, {}
    builds = {"native": ("native", "0"), "x86-64-v3": ("x86-64-v3", "0"),
              "x86-64": ("x86-64", "0")}
    simde = os.path.exists("/usr/include/simde/x86/avx512.h")
    if simde:
        builds["avx512-emulated"] = ("x86-64-v3", "1")
    for name, (march, emulate) in builds.items():
        monkeypatch.setenv("GPTC_MARCH", march)
        monkeypatch.setenv("GPTC_EMULATE_AVX512", emulate)
        step = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=7,
                                       workdir=str(tmp_path / name))
        step.set_num_threads(2)
        losses[name] = [step(x, y, lr=lr_at(i, total=10)).item() for i, (x, y) in enumerate(data)]
        states[name] = step.state_dict()
    for name in builds:
        assert losses[name] == losses["native"], name
        for n in states["native"]:
            assert torch.equal(states["native"][n], states[name][n]), (name, n)
    if not simde:
        pytest.skip("the other builds agree; the emulated AVX-512 one was not built: SIMDe "
                    "(libsimde-dev, which scripts/setup.sh installs) is not installed")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="x86-64-v4 is x86-64's AVX-512 level")
def test_avx512_kernels_compile(tmp_path):
    """The training step's kernels built for AVX-512 (GPTC_MARCH=x86-64-v4: the real
    intrinsics, not the emulation) compile, with AVX-512 code in them; on a machine
    without AVX-512 they are not run (test_vector_width_never_changes_a_bit runs the
    emulated forms)."""
    model, cfg = dropout_model()
    (x, y), = batches(1, cfg)
    mlir = tmp_path / "model.mlir"
    gptc.capture_save(gptc.capture(model, (x, y)), str(mlir))
    proc = subprocess.run([gptc.find_tool("gptc"), "compile", str(mlir), "-o", str(tmp_path / "art"),
                           "--train"], env=dict(os.environ, GPTC_MARCH="x86-64-v4"),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    dis = subprocess.run(["objdump", "-d", str(tmp_path / "art" / "kernels.so")],
                         capture_output=True, text=True, check=True).stdout
    assert "zmm" in dis


def test_fused_and_unfused_programs_are_bitwise_identical(tmp_path):
    """-O0 (one kernel per op) and -O3 (fused) after 20 steps with dropout 0.1."""
    model, cfg = dropout_model()
    data = batches(20, cfg)
    fused = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=7,
                                    workdir=str(tmp_path / "o3"))
    unfused = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=7,
                                      fuse=False, workdir=str(tmp_path / "o0"))
    print(f"\nkernels per step: {unfused.num_kernels} unfused, {fused.num_kernels} fused")
    assert fused.num_kernels < unfused.num_kernels
    losses_f = [fused(x, y, lr=lr_at(i)).item() for i, (x, y) in enumerate(data)]
    losses_u = [unfused(x, y, lr=lr_at(i)).item() for i, (x, y) in enumerate(data)]
    assert losses_f == losses_u
    sf, su = fused.state_dict(), unfused.state_dict()
    for n in sf:
        assert torch.equal(sf[n], su[n]), n


def test_compiling_again_into_the_same_workdir(tmp_path):
    """A notebook cell run twice: the same workdir while the earlier step is still alive,
    once with the same model and once with another. Every step runs its own kernels (the
    runtime loads a private copy of kernels.so); this crashed the process before."""
    torch.manual_seed(0)
    cfg = TinyGPTConfig()
    small, big = TinyGPT(TinyGPTConfig(n_layer=1)).train(), TinyGPT(cfg).train()
    (x, y), = batches(1, cfg)
    workdir = str(tmp_path / "same")
    a = gptc.compile_train_step(small, (x, y), workdir=workdir)
    first = a(x, y).item()
    b = gptc.compile_train_step(small, (x, y), workdir=workdir)
    c = gptc.compile_train_step(big, (x, y), workdir=workdir)
    ref = gptc.compile_train_step(big, (x, y), workdir=str(tmp_path / "ref"))
    assert b(x, y).item() == first
    assert a(x, y).item() == b(x, y).item()
    assert c.num_kernels == ref.num_kernels != a.num_kernels
    assert [c(x, y).item() for _ in range(2)] == [ref(x, y).item() for _ in range(2)]


def test_adamw_and_grad_clip_out_of_range_are_refused_before_compiling():
    """torch.optim.AdamW's ranges, and finite: gptc compiled a beta of 1 or more and a
    negative decay without a word, and a negative clip silently meant no clipping."""
    for kwargs, said in ((dict(betas=(1.0, 0.99)), r"betas\[0\] must be in \[0, 1\), got 1.0"),
                         (dict(betas=(0.9, -0.1)), r"betas\[1\] must be in \[0, 1\), got -0.1"),
                         (dict(betas=(0.9,)), r"betas must be two numbers"),
                         (dict(betas=("a", 0.9)), r"betas\[0\] must be in \[0, 1\), got 'a'"),
                         (dict(eps=-1e-8), "eps must be a finite number >= 0, got -1e-08"),
                         (dict(weight_decay=float("nan")), "weight_decay must be a finite number >= 0, got nan"),
                         (dict(lr=float("inf")), "lr must be a finite number >= 0, got inf")):
        with pytest.raises(gptc.GptcError, match=said):
            gptc.AdamW(**kwargs)
    model, cfg = dropout_model()
    with pytest.raises(gptc.GptcError, match="grad_clip must be a finite number >= 0, got -1"):
        gptc.compile_train_step(model, batches(1, cfg)[0], grad_clip=-1.0)
    # torch's own AdamW was an AttributeError ('betas'); the step runs gptc's.
    with pytest.raises(gptc.GptcError, match=r"^optimizer must be a gptc.AdamW \(the same lr, "
                       r"betas, eps and weight_decay\), got torch.optim.adamw.AdamW$"):
        gptc.compile_train_step(model, batches(1, cfg)[0],
                                optimizer=torch.optim.AdamW(model.parameters()))
    with pytest.raises(gptc.GptcError, match="^lr must be a finite number >= 0, got '0.001'$"):
        gptc.AdamW(lr="0.001")
