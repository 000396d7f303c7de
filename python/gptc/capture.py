"""Capture a PyTorch model as MLIR text plus its weights.

`capture(model, example_inputs)` runs torch.export (static shapes) and writes
each aten op of the exported graph as one generic MLIR op named
"torch.<overload>" (e.g. "torch.aten.linear.default"):

  * tensor arguments become operands; the attribute `torch.operands` names the
    schema argument each operand binds to;
  * other arguments become attributes named after the schema argument;
  * result types come from the traced shapes; the location is the model.py
    line that called the op.

Parameters and buffers become function arguments with `gpt.kind = "param"`
and `gpt.name` = their PyTorch name; tied parameters (nanoGPT's wte/lm_head)
appear once, as torch.export gives them. Those that training must not update
(buffers, parameters without requires_grad) also carry `gpt.trainable = false`.
frontend/ turns this into the gpt dialect (see frontend/AtenToGpt.h for the contract).

This module runs the export and returns the Captured; signature.py reads the function's
arguments and results from the exported program, mlir_text.py prints the ops.
"""
from __future__ import annotations

import os
import re
import signal
import sys
from dataclasses import dataclass, field

import torch

from . import checksums, fold, signature
from .errors import CaptureError, GptcError  # noqa: F401 (gptc.capture.GptcError, as before)
from .mlir_text import FuncPrinter
from .signature import TensorSpec, is_tril_ones  # noqa: F401 (their home until now)


@dataclass
class Captured:
    mlir: str
    weights: dict  # name -> torch.Tensor (parameters, buffers, constants)
    args: list  # TensorSpec per function argument, in order
    results: list  # TensorSpec per function result
    out_spec: object = None  # pytree spec to rebuild the model's outputs
    const_outputs: dict = field(default_factory=dict)  # flat index -> Python value
    tied: dict = field(default_factory=dict)  # other name of a tied parameter -> its arg name
    example_inputs: dict = field(default_factory=dict)  # input name -> example tensor


def capture(model: torch.nn.Module, example_inputs, input_names=None) -> Captured:
    """Export `model` on `example_inputs` (a tuple) and return its MLIR text."""
    # torch.export merges an input passed twice (the same tensor object) into one
    # placeholder; distinct copies keep one argument per input.
    example_inputs = tuple(x.clone() if isinstance(x, torch.Tensor) else x
                           for x in example_inputs)
    try:
        ep = torch.export.export(model, example_inputs)
    except Exception as e:  # torch's own message is the useful part
        first = (str(e).strip().splitlines() or ["(no message)"])[0]
        raise CaptureError(f"torch.export failed: {type(e).__name__}: {first}")

    functional_in_place(ep.graph)
    sig = signature.extract(model, ep, input_names)
    printer = FuncPrinter(sig)
    printer.body(ep)  # an op it cannot print is reported before a problem with the outputs
    results, const_outputs = signature.outputs(ep)
    result_specs = [spec for _, spec in results]
    return Captured(mlir=printer.module(results), weights=sig.weights, args=sig.args,
                    results=result_specs, out_spec=ep.call_spec.out_spec,
                    const_outputs=const_outputs, tied=sig.tied,
                    example_inputs={a.name: x for a, x in zip(
                        [s for s in sig.args if s.kind == "input"], example_inputs)})


def _fresh(node) -> bool:
    """Whether `node` is an aten op whose results share no storage with its operands."""
    return (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
            and all(r.alias_info is None for r in node.target._schema.returns))


def functional_in_place(graph) -> None:
    """Makes each in-place op that cannot be told from its functional form that form:
    `y += x` (aten.add_) on a tensor an op made for itself (no input, parameter, buffer or
    view), that no op reads after the write but through the write's result. torch.export
    keeps such writes (Falcon's `mlp_output += attention_output`). Any other write (into a
    view, an input, or a tensor read again afterwards) stays, and the frontend refuses it
    in one line."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        schema = node.target._schema
        written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        name = node.target.overloadpacket.__name__
        if not written or written[0] is not schema.arguments[0] or len(written) > 1 \
                or not name.endswith("_") or not node.args:
            continue
        functional = getattr(getattr(torch.ops.aten, name[:-1], None), node.target._overloadname, None)
        target = node.args[0]
        if functional is None or not isinstance(target, torch.fx.Node) or not _fresh(target):
            continue
        if all(u is node or (order[u] < order[node] and _fresh(u)) for u in target.users):
            node.target = functional


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.device == b.device and a.dtype == b.dtype and a.data_ptr() == b.data_ptr()
            and a.shape == b.shape and a.stride() == b.stride())


def capture_in_child(model: torch.nn.Module, example_inputs, input_names=None) -> Captured:
    """capture(), run in a forked child process: the same result, but torch.export's
    imports (sympy, networkx, torch._dynamo, and the memory they hold) stay in the child
    and the calling process (the one that goes on to train) never holds them.

    The child sends back the Captured with each weight that is one of the model's own
    parameters or buffers named, and each example input by its position, not copied; the
    parent puts its own tensor back in.
    Errors raised in the child are raised here. Where fork is unavailable or unsafe (no
    os.fork, CUDA initialised), GPTC_CAPTURE_IN_PROCESS is set, or the child cannot give
    its answer, this is capture() in this process.
    """
    import pickle
    import warnings
    if (not hasattr(os, "fork") or os.environ.get("GPTC_CAPTURE_IN_PROCESS")
            or torch.cuda.is_initialized()):
        return capture(model, example_inputs, input_names)
    state = {**dict(model.named_parameters(remove_duplicate=False)),
             **dict(model.named_buffers(remove_duplicate=False))}
    fold.converted_ops()  # `gptc ops` once a process (cached), not once a child
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns on fork with threads (OpenMP's)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 0
        try:
            os.close(read_fd)
            torch.set_num_threads(1)  # a forked OpenMP pool must not be entered
            try:
                c = capture(model, example_inputs, input_names)
                refs = {}
                for k, w in c.weights.items():
                    ref = next((n for n, t in state.items() if _same_tensor(t.detach(), w)), None)
                    refs[k] = ("state", ref) if ref is not None else ("tensor", w)
                c.weights = refs
                # The example inputs likewise: capture's clones of the parent's tensors go
                # back as their positions (a generator's example caches are 300 MB at GPT-2
                # small's size, 4 texts), unless the export changed them.
                c.example_inputs = {
                    k: ("input", i) if isinstance(example_inputs[i], torch.Tensor)
                    and torch.equal(x, example_inputs[i]) else ("tensor", x)
                    for i, (k, x) in enumerate(c.example_inputs.items())}
                answer = ("ok", c)
            except BaseException as e:  # noqa: BLE001 - re-raised in the parent
                answer = ("error", e)
            try:
                data = pickle.dumps(answer)
            except Exception:  # an error that does not pickle goes as its message; a
                kind, value = answer  # capture that does not, as a request to redo it
                data = pickle.dumps(("error", CaptureError(f"{type(value).__name__}: {value}"))
                                    if kind == "error" else ("redo", None))
            with os.fdopen(write_fd, "wb") as f:
                f.write(data)
        except BaseException:  # noqa: BLE001
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    try:
        with os.fdopen(read_fd, "rb") as f:
            data = f.read()
    except BaseException:  # Ctrl-C while waiting: the child goes too
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.waitpid(pid, 0)
    try:
        kind, value = pickle.loads(data)
    except Exception:  # the child died before answering, or its error does not unpickle
        warnings.warn("gptc: the capture child process gave no answer; capturing in process")
        return capture(model, example_inputs, input_names)
    if kind == "redo":
        return capture(model, example_inputs, input_names)
    if kind == "error":
        raise value
    value.weights = {k: state[ref].detach() if how == "state" else ref
                     for k, (how, ref) in value.weights.items()}
    value.example_inputs = {k: example_inputs[ref] if how == "input" else ref
                            for k, (how, ref) in value.example_inputs.items()}
    return value


def save(captured: Captured, mlir_path: str) -> str:
    """Write MODEL.mlir, MODEL.safetensors (weights, each tensor's CRC-32 in the metadata:
    gptc.checksums) and MODEL.inputs.safetensors (the example inputs, for `gptc check`)
    beside it; returns the weights path."""
    from safetensors.torch import save_file
    stem = re.sub(r"\.mlir$", "", mlir_path)
    with open(mlir_path, "w") as f:
        f.write(captured.mlir)
    weights = {k: v.detach().clone().contiguous() for k, v in captured.weights.items()}
    save_file(weights, stem + ".safetensors", metadata=checksums.metadata(weights))
    save_file({k: v.detach().clone().contiguous() for k, v in captured.example_inputs.items()},
              stem + ".inputs.safetensors")
    return stem + ".safetensors"
