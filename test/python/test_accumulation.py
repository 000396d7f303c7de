"""Gradient accumulation (compile_train_step(..., accumulation_steps=N)): a step over N
micro-batches, their gradients summed in order by one program and applied over N by
another, trains as eager PyTorch's accumulation loop (nanoGPT's loss / N), the same bits
on any thread count, and resumes from a checkpoint bit for bit."""
import copy
import json
import os

import numpy as np
import pytest
import torch

import gptc
from gptc import _runtime
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig

CFG = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=23)
N, B = 4, 2
HYPER = dict(lr=1e-3, weight_decay=0.1)


def batches(steps, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, CFG["vocab_size"], (N, B, CFG["block_size"]), generator=g),
             torch.randint(0, CFG["vocab_size"], (N, B, CFG["block_size"]), generator=g))
            for _ in range(steps)]


def model(dropout=0.0):
    torch.manual_seed(0)
    return TinyGPT(TinyGPTConfig(**CFG, dropout=dropout))


def compile_step(m, **kw):
    x, y = batches(1)[0]
    return gptc.compile_train_step(m, (x[0], y[0]), optimizer=gptc.AdamW(**HYPER),
                                   grad_clip=1.0, seed=3, accumulation_steps=N, **kw)


def test_accumulated_steps_train_as_eagers_accumulation_loop():
    """nanoGPT's loop: each micro-batch's loss / N backward, then clip and AdamW (decay on
    tensors of 2+ dimensions). gptc's step returns the micro-batches' mean loss."""
    m = model()
    step = compile_step(m)
    eager = copy.deepcopy(m)
    ps = list(eager.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in ps if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in ps if p.dim() < 2], "weight_decay": 0.0}],
                            lr=HYPER["lr"])
    for xs, ys in batches(5):
        loss = step(xs, ys)
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for i in range(N):
            _, micro = eager(xs[i], ys[i])
            (micro / N).backward()
            total += micro.item()
        torch.nn.utils.clip_grad_norm_(eager.parameters(), 1.0)
        opt.step()
        assert abs(loss.item() - total / N) <= 1e-5 * abs(total / N)
    state = step.state_dict()
    worst = max((state[k] - v).abs().max().item() for k, v in eager.state_dict().items()
                if k in state)
    assert worst < 1e-4
    # The micro-batches' gradients were summed, not only the last one's used: the last
    # step's norms are those of the mean gradient, which one micro-batch alone misses.
    assert step.num_steps == 5 and step.last_grad_norms.shape[0] == len(ps)


def test_the_same_bits_on_any_thread_count_and_from_a_checkpoint(tmp_path):
    """With dropout (each micro-batch its own masks): one thread and two give the same
    parameters, moments and losses; a checkpoint after two steps, loaded into another
    step, continues bit for bit. The checkpoint holds no accumulated gradients."""
    data = batches(4)
    one, two = compile_step(model(0.1)), compile_step(model(0.1))
    one.set_num_threads(1)
    two.set_num_threads(2)
    for xs, ys in data[:2]:
        assert one(xs, ys).numpy().tobytes() == two(xs, ys).numpy().tobytes()
    one.save(str(tmp_path / "ckpt.safetensors"))
    from safetensors import safe_open
    with safe_open(str(tmp_path / "ckpt.safetensors"), "np") as f:
        assert not [k for k in f.keys() if k.startswith("grad.")]
        assert any(k.startswith("exp_avg.") for k in f.keys())
    resumed = compile_step(model(0.1))
    resumed.load(str(tmp_path / "ckpt.safetensors"))
    for xs, ys in data[2:]:
        a, b, c = one(xs, ys), two(xs, ys), resumed(xs, ys)
        assert a.numpy().tobytes() == b.numpy().tobytes() == c.numpy().tobytes()
    for name in one._persistent:
        bits = one.model.runtime.param(name).tobytes()
        assert bits == two.model.runtime.param(name).tobytes() == \
            resumed.model.runtime.param(name).tobytes(), name


def test_what_an_accumulating_step_cannot_take_is_one_line():
    step = compile_step(model())
    xs, ys = batches(1)[0]
    before = {n: step.model.runtime.param(n).copy() for n in step._persistent}
    for bad, said in (((xs[:3], ys[:3]), "input 'idx' must hold 4 micro-batches along its "
                                         "first dimension (accumulation_steps=4), got (3, 2, 16)"),
                      ((xs[0], ys[0]), "must hold 4 micro-batches"),
                      ((xs, ys, xs), "the training step takes inputs")):
        with pytest.raises(gptc.GptcError, match=said.replace("(", r"\(").replace(")", r"\)")):
            step(*bad)
    assert step.num_steps == 0
    for n, a in before.items():
        assert np.array_equal(step.model.runtime.param(n), a), n
    with pytest.raises(gptc.GptcError, match="accumulation_steps"):
        gptc.compile_train_step(model(), (xs[0], ys[0]), accumulation_steps=0)


def test_the_gpus_accumulated_steps_are_the_cpus_bits(tmp_path):
    """device="cuda-emulated" (the CUDA kernels and the runtime's device layer, on the CPU):
    the two programs share the params and the gradient sums in device memory, and give the
    CPU's losses, params, moments and sums bit for bit, with dropout."""
    steps = {d: compile_step(model(dropout=0.1), device=d, workdir=str(tmp_path / d))
             for d in ("cpu", "cuda-emulated")}
    gpu = steps["cuda-emulated"]
    for program in (gpu._micro, gpu.model):
        with open(os.path.join(program.artifact_dir, "manifest.json")) as f:
            assert json.load(f)["target"] == "cuda-emulated"
    for xs, ys in batches(3):
        a, b = (s(xs, ys) for s in steps.values())
        assert a.numpy().tobytes() == b.numpy().tobytes()
    cpu = steps["cpu"]
    sums = [n for n, _, _ in cpu._micro.runtime.params if n.startswith("grad.")]
    assert len(sums) == len(list(model().parameters()))
    for name in [*cpu._persistent, *sums]:
        runtime = cpu.model.runtime if name in cpu._persistent else cpu._micro.runtime
        other = gpu.model.runtime if name in cpu._persistent else gpu._micro.runtime
        assert runtime.param(name).tobytes() == other.param(name).tobytes(), name
    # A write through the update's program reaches the device buffer both programs hold.
    name = "lm_head.weight" if "lm_head.weight" in cpu._persistent else cpu._trainable[0]
    for s in steps.values():
        s.model.set_param(name, np.zeros_like(s.model.runtime.param(name)))
    xs, ys = batches(1, seed=5)[0]
    a, b = (s(xs, ys) for s in steps.values())
    assert a.numpy().tobytes() == b.numpy().tobytes()
    assert gpu._micro.runtime.param(name).tobytes() == cpu._micro.runtime.param(name).tobytes()
    # Buffers are shared between artifacts of one target only.
    with pytest.raises(RuntimeError, match=r'step/artifact: an artifact for target "cuda-emulated" '
                                           r'cannot share the weights of one for "cpu" \('):
        _runtime.Model(gpu.model.artifact_dir, cpu._micro.runtime)
