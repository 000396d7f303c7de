"""The CUDA target's code path without a GPU: gptc compile --target=cuda-emulated builds the
generated kernels.cu (the CUDA kernel families and the grid-stride kernels) with the host
compiler over gptc/cuda/emulate.hpp, which runs each block's threads as fibers, shuffles and
barriers included. Its results must be the CPU artifact's, bit for bit: the proof of the
portable numerics that runs everywhere (the GPU check runs the same source on a GPU)."""
import json
import os

import pytest
import torch

import gptc
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig
from test_train import ADAMW, batches

def persistent(step):
    """Parameters and AdamW moments, by name, as the runtime holds them."""
    return {n: step.model.runtime.param(n).copy() for n in step._persistent}


def test_ten_training_steps_with_dropout_are_the_cpus_bits(tmp_path, monkeypatch):
    shape = tmp_path / "graph_shape.json"  # written when the step's graph is captured
    monkeypatch.setenv("GPTC_CUDA_GRAPH_SHAPE", str(shape))
    torch.manual_seed(3)
    cfg = TinyGPTConfig(dropout=0.1)
    model = TinyGPT(cfg).train()
    data = batches(10, cfg)
    steps = {target: gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW),
                                             seed=7, device=target,
                                             workdir=str(tmp_path / target))
             for target in ("cpu", "cuda-emulated")}
    gpu = steps["cuda-emulated"]
    # It is the CUDA source that ran: the manifest says so, and kernels.cu calls the GPU's
    # kernel families and launches kernels of its own, none of the CPU's.
    with open(os.path.join(gpu.model.artifact_dir, "manifest.json")) as f:
        manifest = json.load(f)
    assert (manifest["target"], manifest["source"]) == ("cuda-emulated", "kernels.cu")
    with open(os.path.join(gpu.model.artifact_dir, "kernels.cu")) as f:
        source = f.read()
    assert source.count("__global__ void") >= 15  # 19 distinct ones at this size
    for family in ("gptc::cuda::matmul(", "gptc::cuda::attention(",
                   "gptc::cuda::attention_grad(", "gptc::cuda::layer_norm_kernel"):
        assert family in source, family
    assert "GPTC_FOR(" not in source and "gptc::matmul(" not in source
    losses = {"cpu": [], "cuda-emulated": []}
    for it, (x, y) in enumerate(data):
        lr = 1e-3 * (it + 1) / len(data)
        for target, step in steps.items():
            losses[target].append(step(x, y, lr=lr).item())
    assert losses["cpu"] == losses["cuda-emulated"]
    assert len(set(losses["cpu"])) == len(data)  # the steps train (each loss its own)
    # The graph the steps replayed: every kernel call of the entry launches one kernel or
    # more, and the groups' launches run beside one another, so its longest chain of
    # kernels is shorter than the whole.
    graph = json.loads(shape.read_text())
    assert graph["nodes"] >= graph["kernels"] >= manifest["kernels"]
    assert 0 < graph["longest_kernel_chain"] < graph["kernels"], graph
    cpu_state, gpu_state = persistent(steps["cpu"]), persistent(gpu)
    # every parameter (tied ones once) and both of its moments
    assert len(cpu_state) == 3 * len(list(model.parameters()))
    for name, value in cpu_state.items():
        assert value.tobytes() == gpu_state[name].tobytes(), name
    # Dropout is on in both: another seed gives other bits.
    other = gptc.compile_train_step(model, data[0], optimizer=gptc.AdamW(**ADAMW), seed=8,
                                    device="cuda-emulated", workdir=str(tmp_path / "seed8"))
    assert other(*data[0], lr=1e-4).item() != losses["cpu"][0]


def test_the_forward_is_the_cpus_bits(tmp_path, monkeypatch):
    torch.manual_seed(3)
    cfg = TinyGPTConfig(dropout=0.0)
    model = TinyGPT(cfg).eval()
    x, y = batches(1, cfg)[0]
    cpu = gptc.compile(model, (x, y), workdir=str(tmp_path / "cpu"))
    gpu = gptc.compile(model, (x, y), device="cuda-emulated", workdir=str(tmp_path / "gpu"))
    for a, b in zip(cpu(x, y), gpu(x, y)):
        assert a.shape == b.shape and torch.equal(a, b)
    # The debug switch (each kernel on its own, a sync and a check after it) changes nothing.
    monkeypatch.setenv("GPTC_CUDA_DEBUG", "1")
    debug = gptc.compile(model, (x, y), device="cuda-emulated", workdir=str(tmp_path / "debug"))
    for a, b in zip(cpu(x, y), debug(x, y)):
        assert torch.equal(a, b)


def test_a_bad_id_fails_the_step_before_any_kernel_runs(tmp_path):
    """On the device as on the CPU: ids are checked first, and the step is not applied."""
    torch.manual_seed(3)
    cfg = TinyGPTConfig(dropout=0.1)
    data = batches(2, cfg)
    step = gptc.compile_train_step(TinyGPT(cfg).train(), data[0], device="cuda-emulated",
                                   workdir=str(tmp_path))
    step(*data[0])
    before = persistent(step)
    x, y = data[1]
    for bad_x, bad_y, said in ((x, y.clone().fill_(cfg.vocab_size), "cross_entropy target"),
                               (x.clone().fill_(-1), y, "embedding index")):
        with pytest.raises(gptc.GptcError, match=f"run failed: {said} out of range"):
            step(bad_x, bad_y)
        assert step.num_steps == 1
        after = persistent(step)
        for n, v in before.items():
            assert v.tobytes() == after[n].tobytes(), (said, n)


def test_a_cuda_artifact_without_a_gpu_is_one_line(tmp_path):
    """nvcc builds the step; loading it where there is no GPU says so, naming the call."""
    import shutil
    if not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")):
        pytest.skip("no CUDA toolkit (nvcc) on this machine")
    if os.path.exists("/dev/nvidiactl"):
        pytest.skip("this machine has an NVIDIA driver: the no-GPU path is not reachable")
    model = TinyGPT(TinyGPTConfig()).eval()
    x = torch.zeros(1, 8, dtype=torch.long)
    with pytest.raises(gptc.GptcError, match=r"^[^\n]*kernels.so: cudaGetDeviceCount: no NVIDIA "
                                             r"GPU or driver \(cudaErrorInsufficientDriver\)$"):
        gptc.compile(model, (x,), device="cuda", workdir=str(tmp_path))
    with open(tmp_path / "artifact" / "manifest.json") as f:
        manifest = json.load(f)
    assert (manifest["target"], manifest["cuda_arch"], manifest["numerics"]) == \
        ("cuda", "sm_90", "portable")
    with pytest.raises(gptc.GptcError, match="device must be one of cpu, cuda, cuda-emulated, "
                                             "got 'tpu'"):
        gptc.compile(model, (x,), device="tpu")


class Reductions(torch.nn.Module):
    """Sums of every kind the CUDA flavour runs a warp an output: a hand-written RMSNorm and
    softmax (ops after a row's sum, of the row's shape), sums over an outer dimension and to
    a scalar, a max and a mean."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(48))

    def forward(self, x):
        rms = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.w
        e = torch.exp(x - x.amax(-1, keepdim=True))
        soft = e / e.sum(-1, keepdim=True)
        return rms, soft, (x * 3.0).sum(0), x.sum(), x.amax(1), x.mean((0, 2))


def test_reductions_are_the_cpus_bits(tmp_path):
    torch.manual_seed(5)
    model = Reductions().eval()
    x = torch.randn(5, 7, 48) * 4
    cpu = gptc.compile(model, (x,), workdir=str(tmp_path / "cpu"))
    gpu = gptc.compile(model, (x,), device="cuda-emulated", workdir=str(tmp_path / "gpu"))
    outs = cpu(x), gpu(x)
    assert len(outs[0]) == 6
    for a, b in zip(*outs):
        assert a.shape == b.shape and torch.equal(a, b)


class LongSums(torch.nn.Module):
    """Sums long enough (4,096 elements or more) that the CUDA flavour gives each a block:
    with ops after them of the sum's and of the row's shape (RMSNorm and softmax written
    out), over an outer dimension, to a scalar, a max and a mean; lengths that are not a
    multiple of the block's tile."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(5000))

    def forward(self, x, y):
        rms = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.w
        e = torch.exp(x - x.amax(-1, keepdim=True))
        soft = e / e.sum(-1, keepdim=True)
        return rms, soft, (y * 3.0).sum(0), x.sum(), y.amax(0), x.mean(1)


def test_long_sums_are_the_cpus_bits(tmp_path):
    torch.manual_seed(6)
    model = LongSums().eval()
    x, y = torch.randn(3, 5000) * 4, torch.randn(9001, 5)
    cpu = gptc.compile(model, (x, y), workdir=str(tmp_path / "cpu"))
    gpu = gptc.compile(model, (x, y), device="cuda-emulated", workdir=str(tmp_path / "gpu"))
    with open(os.path.join(gpu.artifact_dir, "kernels.cu")) as f:
        source = f.read()
    assert "GPTC_CUDA_FOR_BLOCKS(" in source and "gptc::cuda::block_sum<" in source
    assert "gptc::cuda::block_max<" in source
    outs = cpu(x, y), gpu(x, y)
    assert len(outs[0]) == 6
    for a, b in zip(*outs):
        assert a.shape == b.shape and torch.equal(a, b)


class ColumnSums(torch.nn.Module):
    """Sums over outer dimensions (a bias's gradient: each output a column of a row-major
    array), which the CUDA flavour forms 8 outputs a block, a thread a partial
    (gptc::cuda::column_sum): fused and plain, long enough for its loads issued 8 ahead
    (3,001 rows: 93 elements a partial, 11 rounds of 8 and a tail of 5), a last group of 4
    outputs (20 columns), over two outer dimensions, and a mean."""

    def forward(self, y, z):
        return (y * 3.0).sum(0), y.sum(0), z.sum((0, 1)), z.mean(0)


def test_column_sums_are_the_cpus_bits(tmp_path):
    torch.manual_seed(8)
    model = ColumnSums().eval()
    y, z = torch.randn(3001, 20) * 4, torch.randn(37, 5, 24)
    cpu = gptc.compile(model, (y, z), workdir=str(tmp_path / "cpu"))
    gpu = gptc.compile(model, (y, z), device="cuda-emulated", workdir=str(tmp_path / "gpu"))
    with open(os.path.join(gpu.artifact_dir, "kernels.cu")) as f:
        source = f.read()
    assert source.count("GPTC_CUDA_FOR_COLUMNS(") == 4, source
    assert "gptc::cuda::column_sum<float>(3001, " in source
    outs = cpu(y, z), gpu(y, z)
    assert len(outs[0]) == 4
    for a, b in zip(*outs):
        assert a.shape == b.shape and torch.equal(a, b)


def test_gptc_check_against_cpu_names_the_first_difference(monkeypatch, capsys):
    """`gptc check --against-cpu`: the same steps on the CPU and the device, compared bit
    for bit after each; a device that changes one bit of one moment is caught at that step,
    named by tensor and element."""
    import subprocess
    import numpy as np
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the CLI sets it
    run = subprocess.run([gptc.find_tool("gptc"), "check", "--against-cpu", "--device",
                          "cuda-emulated", "--steps", "2", "--config", "n_layer=1"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "cuda-emulated gave the CPU's bits for 2 steps" in run.stdout
    # Gradient accumulation's two programs: the gradient sums compared too.
    run = subprocess.run([gptc.find_tool("gptc"), "check", "--against-cpu", "--device",
                          "cuda-emulated", "--steps", "2", "--accumulate", "3", "--config",
                          "n_layer=1"], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "gradient sums; 3 micro-batches a step), dropout 0.1" in run.stdout

    from gptc.apps import against_cpu
    real = against_cpu.compile_train_step

    class Planted:  # the device's step, with one bit of one moment changed after step 2
        def __init__(self, step):
            self.step, self.model, self._persistent, self._micro, self.calls = \
                step, step.model, step._persistent, step._micro, 0

        def __call__(self, x, y, lr):
            loss = self.step(x, y, lr=lr)
            self.calls += 1
            if self.calls == 2:
                a = self.model.runtime.param("exp_avg.transformer.wpe.weight")
                a.reshape(-1)[5] = np.nextafter(a.reshape(-1)[5], np.float32(np.inf))
                self.model.runtime.set_param("exp_avg.transformer.wpe.weight", a)
            return loss

    monkeypatch.setattr(against_cpu, "compile_train_step",
                        lambda *a, **kw: real(*a, **kw) if kw["device"] == "cpu"
                        else Planted(real(*a, **kw)))
    with pytest.raises(SystemExit) as e:
        against_cpu.cli(["--device", "cuda-emulated", "--steps", "3", "--config", "n_layer=1"])
    assert str(e.value).startswith("gptc: error: step 2: exp_avg.transformer.wpe.weight "
                                   "differs first at (0, 5): CPU "), e.value
    assert "step   1: loss" in capsys.readouterr().out


class WideVocabulary(torch.nn.Module):
    """An embedding table of more rows than the CUDA flavour gives a thread each (3,000 by
    32): its gradient takes the blocks-of-rows form, whose sums run in memory."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(3000, 32)
        self.w = torch.nn.Parameter(torch.randn(32))

    def forward(self, idx, y):
        return ((torch.tanh(self.emb(idx)) * self.w).sum(-1) - y).square().mean()


@pytest.mark.parametrize("model_cls", [WideVocabulary, TinyGPT])
def test_embedding_gradients_are_the_cpus_bits(tmp_path, model_cls):
    """Each row's positions added in position order, however the device splits the table:
    a thread an element (the test GPT's 65 rows) or blocks of rows (3,000); ids repeated
    many times, and the first and last rows."""
    torch.manual_seed(11)
    if model_cls is TinyGPT:
        model, vocab = TinyGPT(TinyGPTConfig()).train(), 65
        make = lambda idx: (idx, torch.roll(idx, 1, 1))
    else:
        model, vocab = WideVocabulary().train(), 3000
        make = lambda idx: (idx, torch.randn(idx.shape, generator=torch.Generator().manual_seed(1)))
    idx = torch.randint(0, 12, (4, 32))  # a few ids, each at many positions
    idx[0, :8] = torch.randint(0, vocab, (8,))
    idx[1, 0], idx[1, 1] = 0, vocab - 1
    steps = {t: gptc.compile_train_step(model, make(idx), optimizer=gptc.AdamW(**ADAMW),
                                        device=t, workdir=str(tmp_path / t))
             for t in ("cpu", "cuda-emulated")}
    for _ in range(2):
        losses = [s(*make(idx), lr=1e-3).item() for s in steps.values()]
        assert losses[0] == losses[1]
    cpu, gpu = (persistent(s) for s in steps.values())
    table = "exp_avg.emb.weight" if model_cls is WideVocabulary else \
        "exp_avg.transformer.wte.weight"
    assert (cpu[table] != 0).any(axis=1).sum() >= 10  # rows that got gradients
    for name, value in cpu.items():
        assert value.tobytes() == gpu[name].tobytes(), name


def test_a_llama_style_relative_trains_with_the_cpus_bits(tmp_path):
    """RMSNorm, rotary embeddings by halves, grouped-query attention, SwiGLU and an untied
    head on the GPU's code path: 4 AdamW steps with clipping, every loss, parameter and
    moment the CPU artifact's."""
    from gptc.testing.llama_style import LlamaConfig, LlamaStyle
    torch.manual_seed(0)
    model = LlamaStyle(LlamaConfig(block_size=32, n_layer=2, n_head=4, n_kv_head=2,
                                   n_embd=64)).train()
    x, y = torch.randint(0, 65, (4, 32)), torch.randint(0, 65, (4, 32))
    steps = {t: gptc.compile_train_step(model, (x, y), optimizer=gptc.AdamW(**ADAMW),
                                        grad_clip=1.0, device=t, workdir=str(tmp_path / t))
             for t in ("cpu", "cuda-emulated")}
    losses = [[s(x, y, lr=1e-3).item() for s in steps.values()] for _ in range(4)]
    assert all(cpu == gpu for cpu, gpu in losses), losses
    assert losses[-1][0] < losses[0][0]  # it trains
    cpu, gpu = (persistent(s) for s in steps.values())
    # every parameter and both its moments (and the rotary tables, buffers)
    assert sum(n.startswith("exp_avg.") for n in cpu) == len(list(model.parameters()))
    for name, value in cpu.items():
        assert value.tobytes() == gpu[name].tobytes(), name


def test_the_profile_names_every_kernel_of_a_step(tmp_path, monkeypatch):
    """GPTC_CUDA_PROFILE=FILE times each kernel call of the entry between two events (on the
    emulation, the CPU's time) and writes a line a kernel, slowest first; the results stay
    the CPU's bits."""
    import re
    torch.manual_seed(3)
    cfg = TinyGPTConfig()
    model = TinyGPT(cfg).eval()
    x, y = batches(1, cfg)[0]
    cpu = gptc.compile(model, (x, y), workdir=str(tmp_path / "cpu"))
    path = tmp_path / "profile.tsv"
    monkeypatch.setenv("GPTC_CUDA_PROFILE", str(path))
    gpu = gptc.compile(model, (x, y), device="cuda-emulated", workdir=str(tmp_path / "gpu"))
    for _ in range(3):
        for a, b in zip(cpu(x, y), gpu(x, y)):
            assert torch.equal(a, b)
    with open(os.path.join(gpu.artifact_dir, "kernels.cu")) as f:
        labels = re.findall(r'GPTC_CUDA_KERNEL\("([^"]+)"', f.read())
    lines = path.read_text().splitlines()
    assert lines[0] == "kernel\tcalls\ttotal_ms\tus_per_call"
    rows = [line.split("\t") for line in lines[1:]]
    assert sorted(r[0] for r in rows) == sorted(set(labels)) and len(labels) > 10
    runs = {int(r[1]) // labels.count(r[0]) for r in rows}  # every kernel, every run
    assert len(runs) == 1 and runs.pop() >= 3
    totals = [float(r[2]) for r in rows]
    assert totals == sorted(totals, reverse=True) and totals[0] > 0
