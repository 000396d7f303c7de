"""torch.compile(model, backend="gptc"): gptc as a backend of TorchDynamo.

    model = torch.compile(model.eval(), backend="gptc")   # or backend=gptc.dynamo.backend
    with torch.no_grad():
        logits, loss = model(idx, targets)

For inference forwards. Each graph TorchDynamo captures is compiled by gptc.compile, its
parameters passed as inputs on every call (TorchDynamo lifts them into the graph's
inputs), so an update of the weights between calls is always seen. A graph gptc does not
take — an op it does not convert, a graph that needs gradients, dynamic shapes — runs in
eager PyTorch instead, after one line on stderr naming why (`gptc: warning: ...`).
Found by name through the `torch_dynamo_backends` entry point (python/gptc-*.dist-info),
so `import gptc` does not import TorchDynamo.
"""
import sys

import torch

from .compiler import compile as gptc_compile
from .errors import GptcError


def _warn(why: str) -> None:
    print(f"gptc: warning: torch.compile backend: running this graph in eager PyTorch: {why}",
          file=sys.stderr, flush=True)


def _refusal(example_inputs):
    """Why gptc cannot take a graph with these example inputs, or None."""
    if any(not isinstance(t, torch.Tensor) for t in example_inputs):
        return ("the graph has dynamic shapes (torch.compile(..., dynamic=False) keeps them "
                "static)")
    if torch.is_grad_enabled() and any(t.requires_grad for t in example_inputs):
        return ("the graph needs gradients; gptc's backend compiles inference forwards "
                "(run under torch.no_grad(), or train with gptc.compile_train_step)")
    return None


def backend(gm: torch.fx.GraphModule, example_inputs):
    """The TorchDynamo backend: gptc's compiled forward of `gm`, or `gm` itself (eager)
    when gptc does not take it."""
    why = _refusal(example_inputs)
    if why:
        _warn(why)
        return gm.forward
    try:
        compiled = gptc_compile(gm, tuple(t.detach() for t in example_inputs))
    except GptcError as e:  # a CaptureError among them: the op and its line
        _warn(str(e).splitlines()[0])
        return gm.forward

    def run(*args):
        return compiled(*args)
    return run
