"""capture_in_child: torch.export runs in a forked child, so the process that trains
never imports its machinery; the result must be exactly capture()'s."""
import os
import subprocess
import sys

import pytest
import torch

import gptc
from gptc.capture import capture_in_child
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig


class WithBuffers(torch.nn.Module):
    """A persistent and a non-persistent buffer, and a tensor made inside forward."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("scale", torch.full((8,), 0.5))
        self.register_buffer("shift", torch.arange(8.0), persistent=False)

    def forward(self, x):
        return (self.lin(x) * self.scale + self.shift + torch.tensor([1.0])).sum()


@pytest.mark.parametrize("make", ["gpt", "buffers"])
def test_child_capture_is_capture(make):
    torch.manual_seed(0)
    if make == "gpt":
        cfg = TinyGPTConfig(n_layer=1, n_embd=32, n_head=2, block_size=16)
        model = TinyGPT(cfg).train()
        g = torch.Generator().manual_seed(1)
        inputs = tuple(torch.randint(0, cfg.vocab_size, (2, 16), generator=g) for _ in "xy")
    else:
        model, inputs = WithBuffers(), (torch.randn(3, 8),)
    here = gptc.capture(model, inputs)
    child = capture_in_child(model, inputs)
    assert child.mlir == here.mlir
    assert (child.args, child.results, child.tied) == (here.args, here.results, here.tied)
    assert child.out_spec == here.out_spec and child.const_outputs == here.const_outputs
    assert child.weights.keys() == here.weights.keys()
    own = {p.data_ptr() for p in list(model.parameters()) + list(model.buffers())}
    for name, w in here.weights.items():
        assert torch.equal(child.weights[name], w), name
        # The model's own parameters and buffers come back as the parent's tensors.
        assert (child.weights[name].data_ptr() in own) == (w.data_ptr() in own), name
    assert child.example_inputs.keys() == here.example_inputs.keys()
    for name, x in here.example_inputs.items():
        assert torch.equal(child.example_inputs[name], x)


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # torch.export cannot trace a branch on data
            return x * 2
        return x


def test_child_capture_error_is_the_same_error():
    x = torch.ones(4)
    with pytest.raises(gptc.CaptureError) as here:
        gptc.capture(DataDependent(), (x,))
    with pytest.raises(gptc.CaptureError) as child:
        capture_in_child(DataDependent(), (x,))
    print("\n" + str(child.value))
    assert str(child.value) == str(here.value)
    assert str(child.value).startswith("torch.export failed")


def test_several_captures_in_children_are_each_capture(monkeypatch):
    """captures_in_child: three jobs, spread over two children, come back in order, each
    capture()'s; a failing job raises its own error, whichever child ran it."""
    from gptc.capture import captures_in_child
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    torch.manual_seed(0)
    jobs = [(WithBuffers(), (torch.randn(n, 8),), None) for n in (3, 5, 7)]
    for job, child in zip(jobs, captures_in_child(jobs)):
        here = gptc.capture(*job)
        assert child.mlir == here.mlir and child.args == here.args
        for name, w in here.weights.items():
            assert torch.equal(child.weights[name], w), name
    x = torch.ones(4)
    for at in (1, 2):
        failing = list(jobs)
        failing[at] = (DataDependent(), (x,), None)
        with pytest.raises(gptc.CaptureError, match="torch.export failed"):
            captures_in_child(failing)


def test_training_process_never_imports_torch_export(tmp_path):
    """compile_train_step leaves torch._dynamo, sympy and networkx (and their memory)
    out of the calling process; GPTC_CAPTURE_IN_PROCESS=1 brings them back."""
    script = (
        "import sys, torch, gptc\n"
        "torch.manual_seed(0)\n"
        "from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig\n"
        "cfg = TinyGPTConfig(n_layer=1, n_embd=32, n_head=2, block_size=16)\n"
        "x = torch.randint(0, cfg.vocab_size, (2, 16))\n"
        "step = gptc.compile_train_step(TinyGPT(cfg), (x, x.clone()), workdir=sys.argv[1])\n"
        "loss = step(x, x.clone()).item()\n"
        "print(loss, sorted(m for m in ('torch._dynamo', 'sympy', 'networkx')"
        " if m in sys.modules))\n")
    env = dict(os.environ)
    outs = []
    for in_process in ("", "1"):
        env["GPTC_CAPTURE_IN_PROCESS"] = in_process
        out = subprocess.run([sys.executable, "-c", script, str(tmp_path / f"w{in_process}")],
                             env=env, capture_output=True, text=True, check=True).stdout
        outs.append(out.split(" ", 1))
    (loss_child, mods_child), (loss_here, mods_here) = outs
    assert mods_child.strip() == "[]"
    assert "torch._dynamo" in mods_here
    assert loss_child == loss_here  # the same bits either way


class DiesInChild(torch.nn.Module):
    """Exits the process when traced anywhere but in the process that built it."""

    def __init__(self):
        super().__init__()
        self.parent = os.getpid()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if os.getpid() != self.parent:
            os._exit(3)
        return self.lin(x).sum()


def test_a_child_that_dies_falls_back_to_capture_in_process():
    model, x = DiesInChild(), torch.randn(2, 4)
    with pytest.warns(UserWarning, match="gave no answer"):
        child = capture_in_child(model, (x,))
    assert child.mlir == gptc.capture(model, (x,)).mlir
    assert child.weights["lin.weight"].data_ptr() == model.lin.weight.data_ptr()
