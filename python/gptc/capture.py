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
    return captures_in_child([(model, example_inputs, input_names)])[0]


def captures_in_child(jobs) -> list:
    """capture_in_child of each (model, example_inputs, input_names) in `jobs`, in order.
    Each child captures several jobs, so that torch.export's imports (about a second) are
    paid once a child, and there is a child a processor (at most), since an export runs
    on one: a generator captures five programs. The first job that fails raises its
    error."""
    import pickle
    import warnings
    jobs = [tuple(job) for job in jobs]
    if (not hasattr(os, "fork") or os.environ.get("GPTC_CAPTURE_IN_PROCESS")
            or torch.cuda.is_initialized()):
        return [capture(*job) for job in jobs]
    states = [{**dict(model.named_parameters(remove_duplicate=False)),
               **dict(model.named_buffers(remove_duplicate=False))} for model, _, _ in jobs]
    fold.converted_ops()  # `gptc ops` once a process (cached), not once a child
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    children = min(len(jobs), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                   else os.cpu_count() or 1)
    started = []  # (pid, read end, the jobs' indices)
    try:
        for c in range(children):
            mine = list(range(c, len(jobs), children))
            read_fd, write_fd = os.pipe()
            try:
                with warnings.catch_warnings():  # Python 3.12+ warns on fork with threads
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
            except BaseException:
                os.close(read_fd)
                os.close(write_fd)
                raise
            if pid == 0:  # the child: never returns
                status = 0
                try:
                    os.close(read_fd)
                    for _, other, _ in started:
                        os.close(other)
                    _answer([jobs[i] for i in mine], [states[i] for i in mine], write_fd)
                except BaseException:  # noqa: BLE001
                    status = 1
                finally:
                    os._exit(status)
            os.close(write_fd)
            started.append((pid, read_fd, mine))
        answers = [None] * len(jobs)
        while started:  # in order: a child's answer waits in its pipe until it is read
            pid, read_fd, mine = started.pop(0)
            try:
                with os.fdopen(read_fd, "rb") as f:
                    data = f.read()
            except BaseException:
                os.kill(pid, signal.SIGKILL)
                raise
            finally:
                os.waitpid(pid, 0)
            try:
                blobs = pickle.loads(data)
            except Exception:  # the child died before answering: its jobs are captured here
                continue
            for i, blob in zip(mine, blobs):
                try:
                    answers[i] = pickle.loads(blob)
                except Exception:  # an error that does not unpickle: captured here
                    pass
    except BaseException:  # Ctrl-C while waiting: the children go too
        for pid, read_fd, _ in started:
            os.kill(pid, signal.SIGKILL)
            os.close(read_fd)
            os.waitpid(pid, 0)
        raise
    results = []
    for job, state, answer in zip(jobs, states, answers):
        if answer is None or answer[0] == "redo":
            if answer is None:
                warnings.warn("gptc: the capture child process gave no answer; capturing in "
                              "process")
            results.append(capture(*job))
            continue
        kind, value = answer
        if kind == "error":
            raise value
        example_inputs = job[1]
        value.weights = {k: state[ref].detach() if how == "state" else ref
                         for k, (how, ref) in value.weights.items()}
        value.example_inputs = {k: example_inputs[ref] if how == "input" else ref
                                for k, (how, ref) in value.example_inputs.items()}
        results.append(value)
    return results


def _answer(jobs, states, write_fd) -> None:
    """A capture child's work: capture() each job and write the answers (("ok",
    Captured), ("error", exception) or ("redo", None)) to write_fd, stopping at the first
    error: a pickled list of each one pickled, so that the parent unpickles them one by
    one. Each weight that is one of the model's parameters or buffers goes as its name,
    each example input as its position."""
    import pickle
    torch.set_num_threads(1)  # a forked OpenMP pool must not be entered
    answers = []
    for (model, example_inputs, input_names), state in zip(jobs, states):
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
            answers.append(pickle.dumps(answer))
        except Exception:  # an error that does not pickle goes as its message; a capture
            kind, value = answer  # that does not, as a request to redo it
            answer = (("error", CaptureError(f"{type(value).__name__}: {value}"))
                      if kind == "error" else ("redo", None))
            answers.append(pickle.dumps(answer))
        if answer[0] == "error":
            break
    with os.fdopen(write_fd, "wb") as f:
        f.write(pickle.dumps(answers))


def save(captured: Captured, mlir_path: str, leave_out=(), inputs: bool = True) -> str:
    """Write MODEL.mlir, MODEL.safetensors (weights, each tensor's CRC-32 in the metadata:
    gptc.checksums) and MODEL.inputs.safetensors (the example inputs, for `gptc check`;
    not with inputs=False) beside it; returns the weights path. The weights named in
    `leave_out` are not written (another artifact holds them: `gptc compile
    --weights-of`)."""
    from safetensors.torch import save_file
    stem = re.sub(r"\.mlir$", "", mlir_path)
    with open(mlir_path, "w") as f:
        f.write(captured.mlir)
    weights = {k: v.detach().clone().contiguous() for k, v in captured.weights.items()
               if k not in leave_out}
    save_file(weights, stem + ".safetensors", metadata=checksums.metadata(weights))
    if inputs:
        save_file({k: v.detach().clone().contiguous()
                   for k, v in captured.example_inputs.items()}, stem + ".inputs.safetensors")
    return stem + ".safetensors"
