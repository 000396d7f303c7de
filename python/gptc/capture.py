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
(buffers, parameters without requires_grad) also carry `gpt.trainable = false`. frontend/ turns this into the gpt
dialect (see frontend/AtenToGpt.h for the contract).
"""
from __future__ import annotations

import math
import operator
import os
import re
import signal
import sys
from dataclasses import dataclass, field

import torch

_DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.bool: "i1",
}


class GptcError(Exception):
    """The compiler or the runtime refused; the message is its one-line reason. (Defined
    here, where the capture is, so that CaptureError can be one; gptc.GptcError.)"""


class CaptureError(GptcError):
    """A model gptc cannot capture; the message names the op and the line. A GptcError,
    so that `except gptc.GptcError` sees every refusal."""


@dataclass
class TensorSpec:
    name: str
    kind: str  # "param" | "input" | "result"
    dtype: str
    shape: tuple
    # A "param" that training updates: a parameter with requires_grad. Buffers, frozen
    # parameters and lifted constants are params too (the weights file holds them) but are
    # never differentiated, updated, clipped or checked for gradient flow.
    trainable: bool = False
    # A buffer holding tril(ones(N, N)) (nanoGPT's causal mask `bias`): its argument is
    # marked `gpt.tril_ones`, so that gpt-raise-attention may make the attention it masks
    # one causal kernel. The compiled model refuses a state_dict that changes it.
    tril_ones: bool = False


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


def _dtype(t: torch.dtype, where: str) -> str:
    if t not in _DTYPES:
        raise CaptureError(f"unsupported dtype {t} {where}")
    return _DTYPES[t]


def is_tril_ones(t: torch.Tensor) -> bool:
    """Whether `t` is tril(ones(N, N)), perhaps viewed with leading dims of size 1."""
    if t.dim() < 2 or t.shape[-1] != t.shape[-2] or any(d != 1 for d in t.shape[:-2]):
        return False
    n = t.shape[-1]
    return bool(torch.equal(t.detach().reshape(n, n).to(torch.float64).cpu(),
                            torch.tril(torch.ones(n, n, dtype=torch.float64))))


def _tensor_type(val, where: str) -> str:
    dt = _dtype(val.dtype, where)
    if not all(isinstance(d, int) for d in val.shape):  # a SymInt: the size depends on data
        raise CaptureError(f"a tensor whose shape depends on the data ({list(val.shape)}) "
                           f"{where}; gptc compiles static shapes only")
    dims = "x".join(str(d) for d in val.shape)
    return f"tensor<{dims}x{dt}>" if dims else f"tensor<{dt}>"


def _source_line(node) -> tuple[str, int] | None:
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+)', trace)
    # The innermost frame outside torch itself is the model's line.
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    frames = [f for f in frames if not f[0].startswith(torch_dir)] or frames
    if not frames:
        return None
    path, line = frames[-1]
    return path, int(line)


def _loc(node) -> str:
    src = _source_line(node)
    if src is None:
        return f'loc("{node.name}")'
    path, line = src
    return f'loc("{_escape(path)}":{line}:0)'


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _float(x: float) -> str:
    if math.isnan(x):
        return "0x7FF8000000000000 : f64"
    if math.isinf(x):
        return ("0xFFF0000000000000" if x < 0 else "0x7FF0000000000000") + " : f64"
    return f"{x:.17e} : f64"


def _attr(value, where: str):
    """MLIR attribute text for a non-tensor argument, or None to omit it."""
    if value is None or isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value} : i64"
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return f'"{_escape(value)}"'
    if isinstance(value, torch.dtype):
        return f'"{_dtype(value, where)}"'
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in value):
        return "array<i64" + (": " + ", ".join(str(v) for v in value) if value else "") + ">"
    raise CaptureError(f"unsupported argument value {value!r} {where}")


def _where(node) -> str:
    src = _source_line(node)
    return f"at {src[0]}:{src[1]}" if src else f"in node {node.name}"


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

    from torch.export.graph_signature import InputKind

    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}) or {})
    # Tied parameters (one tensor under several names) must stay one argument,
    # named by its first name in model.named_parameters().
    canonical = {}
    for pname, p in model.named_parameters():
        canonical.setdefault(id(p), pname)
    aliases = {}  # placeholder -> placeholder of the same tensor seen first
    seen = {}
    constants = {}  # placeholder -> small constant tensor emitted inline
    names, args, weights, trainable = {}, [], {}, {}
    user_index = 0
    for spec in ep.graph_signature.input_specs:
        node_name = spec.arg.name
        if spec.kind == InputKind.USER_INPUT:
            kind = "input"
            name = (input_names[user_index] if input_names and user_index < len(input_names)
                    else node_name)
            user_index += 1
        elif (spec.kind == InputKind.CONSTANT_TENSOR and state[spec.target].numel() <= 4096
              and state[spec.target].dtype in (torch.int64, torch.bool)):
            # A small lifted constant (nanoGPT's `x[:, [-1], :]` index) goes inline.
            constants[spec.arg.name] = state[spec.target].detach()
            continue
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            kind, name = "param", spec.target
            trainable[node_name] = (spec.kind == InputKind.PARAMETER
                                    and model.get_parameter(spec.target).requires_grad)
            if spec.kind == InputKind.PARAMETER:
                name = canonical.get(id(model.get_parameter(spec.target)), spec.target)
                if name in seen:
                    aliases[node_name] = seen[name]
                    continue
                seen[name] = node_name
            weights[name] = state[spec.target].detach()
        else:
            raise CaptureError(f"unsupported input kind {spec.kind} for {node_name}")
        names[node_name] = name
        args.append((node_name, name, kind))

    nodes = {n.name: n for n in ep.graph.nodes}
    values = {}  # fx node name -> list of SSA names (one per result)
    lines = []
    arg_text, arg_specs = [], []
    for i, (node_name, name, kind) in enumerate(args):
        val = nodes[node_name].meta["val"]
        if not isinstance(val, torch.Tensor):
            raise CaptureError(f"input '{name}' is not a tensor")
        ty = _tensor_type(val, f"for input '{name}'")
        values[node_name] = [f"%arg{i}"]
        frozen = kind == "param" and not trainable[node_name]
        tril = frozen and is_tril_ones(weights[name])
        arg_text.append(f'%arg{i}: {ty} {{gpt.kind = "{kind}", gpt.name = "{_escape(name)}"'
                        + (", gpt.trainable = false" if frozen else "")
                        + (", gpt.tril_ones" if tril else "") + "}")
        arg_specs.append(TensorSpec(name, kind, _DTYPES[val.dtype], tuple(val.shape),
                                    trainable=kind == "param" and not frozen, tril_ones=tril))
    for alias, first in aliases.items():
        values[alias] = values[first]
    tied = {}
    for pname, p in model.named_parameters(remove_duplicate=False):
        first = canonical.get(id(p))
        if first is not None and first != pname:
            tied[pname] = first

    counter = 0
    for node_name, value in constants.items():
        ssa = f"%c{len(values)}"
        values[node_name] = [ssa]
        ty = _tensor_type(value, f"for constant '{node_name}'")
        elems = ", ".join(("true" if v else "false") if value.dtype == torch.bool else str(int(v))
                          for v in value.flatten().tolist())
        literal = f"dense<[{elems}]>" if value.dim() == 1 else f"dense<{elems}>"
        if value.dim() > 1:
            raise CaptureError(f"unsupported constant of shape {tuple(value.shape)}")
        lines.append(f"    {ssa} = gpt.constant {literal} : {ty}")
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            src, idx = node.args
            values[node.name] = [values[src.name][idx]]
            continue
        where = _where(node)
        if node.meta.get("val") is None and not node.users and "_assert" in str(node.target):
            continue  # torch.export's shape/dtype assertions: nothing to compute
        if not isinstance(node.target, torch._ops.OpOverload):
            raise CaptureError(f"unsupported call {node.target} {where}")
        schema = node.target._schema
        opname = "torch." + str(node.target)
        operands, operand_types, operand_names, attrs = [], [], [], []
        bound = {}
        for a, v in zip(schema.arguments, node.args):
            bound[a.name] = v
        for k, v in node.kwargs.items():
            bound[k] = v
        for a in schema.arguments:
            if a.name not in bound:
                continue
            v = bound[a.name]
            items = v if isinstance(v, (list, tuple)) and v and all(
                isinstance(x, torch.fx.Node) or x is None for x in v) else None
            if isinstance(v, torch.fx.Node) or items:
                for x in items or [v]:
                    if x is None:
                        continue
                    operands.append(values[x.name][0])
                    operand_types.append(_tensor_type(x.meta["val"], where))
                    operand_names.append(f'"{a.name}"')
                if items and any(x is None for x in items):
                    # aten.index's [None, idx]: which positions the tensors fill.
                    pos = [i for i, x in enumerate(items) if x is not None]
                    attrs.append(f"{a.name}_positions = " + _attr(pos, where))
                continue
            text = _attr(v, f"for argument '{a.name}' of {node.target} {where}")
            if text is not None:
                attrs.append(f"{a.name} = {text}")
        attrs.insert(0, "torch.operands = [" + ", ".join(operand_names) + "]")
        val = node.meta.get("val")
        results = list(val) if isinstance(val, (list, tuple)) else [val]
        if any(not isinstance(r, torch.Tensor) for r in results):
            raise CaptureError(f"op {node.target} {where} does not return tensors")
        result_types = [_tensor_type(r, where) for r in results]
        ssa = [f"%{counter}_{j}" if len(results) > 1 else f"%{counter}"
               for j in range(len(results))]
        counter += 1
        values[node.name] = ssa
        lhs = (f"%{counter - 1}:{len(results)}" if len(results) > 1 else ssa[0])
        if len(results) > 1:
            values[node.name] = [f"%{counter - 1}#{j}" for j in range(len(results))]
        res_ty = result_types[0] if len(results) == 1 else "(" + ", ".join(result_types) + ")"
        lines.append(f'    {lhs} = "{opname}"({", ".join(operands)}) {{{", ".join(attrs)}}} : '
                     f'({", ".join(operand_types)}) -> {res_ty} {_loc(node)}')

    output = next(n for n in ep.graph.nodes if n.op == "output")
    flat_out = list(output.args[0])
    ret, ret_types, result_specs, const_outputs = [], [], [], {}
    for i, o in enumerate(flat_out):
        if isinstance(o, torch.fx.Node):
            val = o.meta["val"]
            if o.name in names:  # an input returned as is
                ret.append(values[o.name][0])
            else:
                ret.append(values[o.name][0])
            ret_types.append(_tensor_type(val, "for a model output"))
            result_specs.append(TensorSpec(f"output{i}", "result", _DTYPES[val.dtype],
                                           tuple(val.shape)))
        else:
            const_outputs[i] = o
    if not ret:  # an empty return is not MLIR: the compiler's parse error said nothing useful
        raise CaptureError("the model's forward returns no tensor")
    res_decl = ", ".join(f'{t} {{gpt.name = "{s.name}"}}' for t, s in zip(ret_types, result_specs))
    text = ["module {",
            f'  func.func @forward({", ".join(arg_text)}) -> ({res_decl}) {{',
            *lines,
            f'    return {", ".join(ret)} : {", ".join(ret_types)}',
            "  }",
            "}"]
    return Captured(mlir="\n".join(text) + "\n", weights=weights, args=arg_specs,
                    results=result_specs, out_spec=ep.call_spec.out_spec,
                    const_outputs=const_outputs, tied=tied,
                    example_inputs={a.name: x for a, x in zip(
                        [s for s in arg_specs if s.kind == "input"], example_inputs)})


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.device == b.device and a.dtype == b.dtype and a.data_ptr() == b.data_ptr()
            and a.shape == b.shape and a.stride() == b.stride())


def capture_in_child(model: torch.nn.Module, example_inputs, input_names=None) -> Captured:
    """capture(), run in a forked child process: the same result, but torch.export's
    imports (sympy, networkx, torch._dynamo, ~180 MB resident) stay in the child and the
    calling process (the one that goes on to train) never holds them.

    The child sends back the Captured with each weight that is one of the model's own
    parameters or buffers named, not copied; the parent puts its own tensor back in.
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
    return value


def save(captured: Captured, mlir_path: str) -> str:
    """Write MODEL.mlir, MODEL.safetensors (weights) and MODEL.inputs.safetensors (the
    example inputs, for `gptc check`) beside it; returns the weights path."""
    from safetensors.torch import save_file
    stem = re.sub(r"\.mlir$", "", mlir_path)
    with open(mlir_path, "w") as f:
        f.write(captured.mlir)
    save_file({k: v.detach().clone().contiguous() for k, v in captured.weights.items()},
              stem + ".safetensors")
    save_file({k: v.detach().clone().contiguous() for k, v in captured.example_inputs.items()},
              stem + ".inputs.safetensors")
    return stem + ".safetensors"
