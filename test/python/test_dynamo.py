"""torch.compile(model, backend="gptc") (python/gptc/dynamo.py)."""
import os
import subprocess
import sys

import torch

import gptc
from conftest import REPO
from gptc.testing.tiny_gpt import TinyGPT, TinyGPTConfig

CFG = TinyGPTConfig(n_layer=1, n_embd=32, n_head=2, block_size=8, vocab_size=11)


def batch(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 11, (2, 8), generator=g), torch.randint(0, 11, (2, 8), generator=g))


def test_backend_by_name_gives_gptcs_bits_and_sees_new_weights(capfd):
    """Found by name (the entry point in python/gptc-*.dist-info); the outputs are
    gptc.compile's bits; a weight changed between calls is used."""
    torch.manual_seed(0)
    model = TinyGPT(CFG).eval()
    x, y = batch(1)
    compiled = torch.compile(model, backend="gptc")
    with torch.no_grad():
        got = compiled(x, y)
        want = gptc.compile(model, (x, y))(x, y)
        eager = model(x, y)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert (got[0] - eager[0]).abs().max() < 1e-5
        model.lm_head.weight.mul_(0.5)  # tied to wte: both change
        again = compiled(x, y)
        assert (again[0] - model(x, y)[0]).abs().max() < 1e-5
        assert not torch.equal(again[0], got[0])
    assert "gptc: warning" not in capfd.readouterr().err


class WithFlip(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.flip(self.lin(x), dims=[-1])


def test_an_op_gptc_does_not_take_runs_eagerly_after_one_line(capfd):
    torch.manual_seed(0)
    model = WithFlip().eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        got = torch.compile(model, backend="gptc")(x)
        assert torch.equal(got, model(x))
    lines = [l for l in capfd.readouterr().err.splitlines() if l.startswith("gptc:")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("gptc: warning: torch.compile backend: running this graph in "
                               "eager PyTorch: ") and "flip" in lines[0]


def test_a_graph_that_needs_gradients_runs_eagerly(capfd):
    """gptc's backend compiles inference forwards: under autograd it says so and leaves the
    graph to PyTorch, so that training through torch.compile still gets gradients."""
    torch.manual_seed(0)
    model = TinyGPT(CFG).train()
    x, y = batch(2)
    _, loss = torch.compile(model, backend=gptc.dynamo.backend)(x, y)
    loss.backward()
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0
    err = capfd.readouterr().err
    assert "the graph needs gradients; gptc's backend compiles inference forwards" in err


def test_importing_gptc_does_not_import_torchdynamo():
    code = "import sys, gptc; print('torch._dynamo' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "False", out.stderr
