"""MLIR text of an exported graph: one generic op per aten op (the generic-op printer).

Each aten op becomes `"torch.<overload>"(operands) {attrs} : (types) -> types loc(...)`:
tensor arguments are operands, named in order by the `torch.operands` attribute; other
arguments are attributes named after the schema argument; the location is the model's
line that called the op. frontend/AtenToGpt.h reads this form.
"""
from __future__ import annotations

import math
import operator
import os
import re

import torch

from . import fold
from .errors import CaptureError
from .signature import dtype_name, static_shape


def type_text(dtype: str, shape: tuple) -> str:
    """`tensor<2x3xf32>`; `tensor<f32>` for rank 0."""
    dims = "x".join(str(d) for d in shape)
    return f"tensor<{dims}x{dtype}>" if dims else f"tensor<{dtype}>"


def tensor_type(val, where: str) -> str:
    """The MLIR type of tensor `val`, checked (dtype, static shape)."""
    return type_text(dtype_name(val.dtype, where), static_shape(val, where))


def escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def float_attr(x: float) -> str:
    """An f64 attribute; NaN and infinities as their bit patterns (MLIR has no literal)."""
    if math.isnan(x):
        return "0x7FF8000000000000 : f64"
    if math.isinf(x):
        return ("0xFFF0000000000000" if x < 0 else "0x7FF0000000000000") + " : f64"
    return f"{x:.17e} : f64"


def attr(value, where: str):
    """MLIR attribute text for a non-tensor argument, or None to omit it."""
    if value is None or isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value} : i64"
    if isinstance(value, float):
        return float_attr(value)
    if isinstance(value, str):
        return f'"{escape(value)}"'
    if isinstance(value, torch.dtype):
        return f'"{dtype_name(value, where)}"'
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in value):
        return "array<i64" + (": " + ", ".join(str(v) for v in value) if value else "") + ">"
    raise CaptureError(f"unsupported argument value {value!r} {where}")


def source_line(node) -> tuple[str, int] | None:
    """(file, line) of the model code that made fx `node`, from its stack trace."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+)', trace)
    # The innermost frame outside torch itself is the model's line.
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    frames = [f for f in frames if not f[0].startswith(torch_dir)] or frames
    if not frames:
        return None
    path, line = frames[-1]
    return path, int(line)


def loc(node) -> str:
    src = source_line(node)
    if src is None:
        return f'loc("{node.name}")'
    path, line = src
    return f'loc("{escape(path)}":{line}:0)'


def where(node) -> str:
    """Where an error about `node` points: the model's line (for a higher-order op without
    one, the first line of the region it wraps), else the node."""
    src = source_line(node) or next(filter(None, map(source_line, inner_nodes(node))), None)
    return f"at {src[0]}:{src[1]}" if src else f"in node {node.name}"


def inner_nodes(node):
    """The nodes of the subgraphs a higher-order op's node calls (its get_attr operands)."""
    owner = node.graph.owning_module
    for a in node.args:
        if isinstance(a, torch.fx.Node) and a.op == "get_attr" and owner is not None:
            sub = getattr(owner, a.target, None)
            if isinstance(sub, torch.fx.GraphModule):
                yield from sub.graph.nodes


# What a region torch.export keeps as a higher-order op is, in the model's words.
_REGIONS = {"wrap_with_set_grad_enabled": "a torch.no_grad() or torch.enable_grad() region",
            "wrap_with_autocast": "a torch.autocast region",
            "cond": "a torch.cond branch", "map_impl": "a torch.map loop",
            "while_loop": "a torch.while_loop"}


class FuncPrinter:
    """Prints `func.func @forward` of a Signature: body() (or constant() and op() in
    order), then module()."""

    def __init__(self, sig):
        self.values = {}  # fx node name -> SSA names (one per result)
        self.lines = []
        self.arg_text = []
        self.counter = 0
        for i, (node_name, spec) in enumerate(zip(sig.nodes, sig.args)):
            self.values[node_name] = [f"%arg{i}"]
            self.arg_text.append(
                f'%arg{i}: {type_text(spec.dtype, spec.shape)} {{gpt.kind = "{spec.kind}", '
                f'gpt.name = "{escape(spec.name)}"'
                + (", gpt.trainable = false" if spec.kind == "param" and not spec.trainable else "")
                + (", gpt.tril_ones" if spec.tril_ones else "") + "}")
        for alias, first in sig.aliases.items():
            self.values[alias] = self.values[first]
        self.constants = sig.constants
        self.plan = fold.Plan()

    def body(self, ep) -> None:
        """The inline constants, then every call_function node of `ep`'s graph, as
        fold.plan() says: some values embedded as constants, some nodes not printed."""
        self.plan = fold.plan(ep, self.constants, fold.converted_ops())
        for node_name, value in self.constants.items():
            if node_name not in self.plan.skip:
                self.constant(node_name, value)
        for node in ep.graph.nodes:
            if node.op != "call_function" or node.name in self.plan.skip:
                continue
            if node.name in self.plan.embed:
                self.constant(node.name, self.plan.embed[node.name])
            else:
                self.op(node)

    def constant(self, node_name: str, value: torch.Tensor) -> None:
        """A tensor as a gpt.constant (bool, integer or floating point; exact)."""
        ssa = f"%c{len(self.values)}"
        self.values[node_name] = [ssa]
        ty = tensor_type(value, f"for constant '{node_name}'")
        if value.dtype == torch.bool:
            elem = lambda v: "true" if v else "false"  # noqa: E731
        elif value.is_floating_point():
            if not bool(torch.isfinite(value).all()):
                raise CaptureError(f"constant '{node_name}' has a NaN or an infinity")
            elem = lambda v: f"{v:.17e}"  # noqa: E731 (reads back as the same value)
        else:
            elem = lambda v: str(int(v))  # noqa: E731

        def nested(v):
            return "[" + ", ".join(map(nested, v)) + "]" if isinstance(v, list) else elem(v)
        self.lines.append(f"    {ssa} = gpt.constant dense<{nested(value.tolist())}> : {ty}")

    def op(self, node) -> None:
        """One call_function node: a generic op, or nothing (getitem, assertions)."""
        values = self.values
        if node.target is operator.getitem:
            src, idx = node.args
            values[node.name] = [values[src.name][idx]]
            return
        at = where(node)
        if fold.is_assertion(node):
            return
        if isinstance(node.target, torch._ops.HigherOrderOperator):
            name = node.target.name()
            if name == "wrap_with_set_grad_enabled":
                self.grad_region(node)
                return
            raise CaptureError(
                f"{_REGIONS.get(name, 'a higher-order op')} ('{name}') {at} is not supported: "
                "gptc captures plain tensor ops; compute it outside forward(), or without the "
                "context manager")
        if not isinstance(node.target, torch._ops.OpOverload):
            raise CaptureError(f"unsupported call {node.target} {at}")
        if node.name in self.plan.views:
            self.view(node, *self.plan.views[node.name])
            return
        if node.name in self.plan.rows:
            self.rows(node, *self.plan.rows[node.name])
            return
        schema = node.target._schema
        opname = "torch." + str(node.target)
        operands, operand_types, operand_names, attrs = [], [], [], []
        bound = fold.bound_args(node)
        if node.name in self.plan.causal:
            bound.pop("attn_mask", None)
            bound["is_causal"] = self.plan.causal[node.name]
        if node.name in self.plan.key_masks:  # with is_causal: gpt.attention takes both
            bound["attn_mask"] = self.plan.key_masks[node.name]
        dropped = self.plan.dropped.get(node.name, ())
        for a in schema.arguments:
            if a.name not in bound:
                continue
            v = bound[a.name]
            items = v if isinstance(v, (list, tuple)) and v and all(
                isinstance(x, torch.fx.Node) or x is None for x in v) else None
            if items and dropped:
                items = [x for x in items if x is None or x.name not in dropped]
            if isinstance(v, torch.fx.Node) or items:
                for x in items or [v]:
                    if x is None:
                        continue
                    operands.append(values[x.name][0])
                    operand_types.append(tensor_type(x.meta["val"], at))
                    operand_names.append(f'"{a.name}"')
                if items and any(x is None for x in items):
                    # aten.index's [None, idx]: which positions the tensors fill.
                    pos = [i for i, x in enumerate(items) if x is not None]
                    attrs.append(f"{a.name}_positions = " + attr(pos, at))
                continue
            text = attr(v, f"for argument '{a.name}' of {node.target} {at}")
            if text is not None:
                attrs.append(f"{a.name} = {text}")
        attrs.insert(0, "torch.operands = [" + ", ".join(operand_names) + "]")
        val = node.meta.get("val")
        results = list(val) if isinstance(val, (list, tuple)) else [val]
        if any(not isinstance(r, torch.Tensor) for r in results):
            raise CaptureError(f"op {node.target} {at} does not return tensors")
        result_types = [tensor_type(r, at) for r in results]
        n = self.counter
        self.counter += 1
        if len(results) > 1:  # %3:2 = ..., used as %3#0 and %3#1
            lhs = f"%{n}:{len(results)}"
            values[node.name] = [f"%{n}#{j}" for j in range(len(results))]
            res_ty = "(" + ", ".join(result_types) + ")"
        else:
            lhs = f"%{n}"
            values[node.name] = [lhs]
            res_ty = result_types[0]
        self.lines.append(f'    {lhs} = "{opname}"({", ".join(operands)}) {{{", ".join(attrs)}}} : '
                          f'({", ".join(operand_types)}) -> {res_ty} {loc(node)}')

    def view(self, node, runs: list, shape: tuple) -> None:
        """An index or gather that reads its `self` in place (fold.index_view,
        fold.gather_slice): `self` sliced to each run (dim, start, end), viewed as `shape`,
        expanded to the result's shape where that is wider."""
        at = where(node)
        x = fold.bound_args(node)["self"]
        val = node.meta["val"]
        ssa, ty = self.values[x.name][0], tensor_type(x.meta["val"], at)
        size = list(x.meta["val"].shape)
        for dim, start, end in runs:
            size[dim] = end - start
            out_ty = type_text(dtype_name(val.dtype, at), size)
            ssa = self.self_op("torch.aten.slice.Tensor", ssa, ty, out_ty, node, ", ".join(
                f"{k} = {attr(v, at)}" for k, v in (("dim", dim), ("start", start), ("end", end),
                                                    ("step", 1))))
            ty = out_ty
        for target, size in ((torch.ops.aten.view.default, shape),
                             (torch.ops.aten.expand.default, tuple(val.shape))):
            out_ty = type_text(dtype_name(val.dtype, at), size)
            if out_ty != ty:
                ssa = self.self_op(f"torch.{target}", ssa, ty, out_ty, node,
                                   f"size = {attr(list(size), at)}")
                ty = out_ty
        self.values[node.name] = [ssa]

    def rows(self, node, table, index) -> None:
        """A gather that reads a table's rows (fold.gather_rows): table[index]."""
        at = where(node)
        out = f"%{self.counter}"
        self.counter += 1
        types = (tensor_type(table.meta["val"], at), tensor_type(index.meta["val"], at))
        self.lines.append(
            f'    {out} = "torch.aten.index.Tensor"({self.values[table.name][0]}, '
            f'{self.values[index.name][0]}) {{torch.operands = ["self", "indices"]}} : '
            f'({", ".join(types)}) -> {tensor_type(node.meta["val"], at)} {loc(node)}')
        self.values[node.name] = [out]

    def grad_region(self, node) -> None:
        """A torch.no_grad() (or enable_grad()) region, its ops printed in place: the
        region's values are the same, and out of no_grad() each result is detached, so no
        gradient flows back through it (Hugging Face computes rotary cos/sin in one)."""
        enabled, sub, *operands = node.args
        graph = getattr(node.graph.owning_module, sub.target).graph
        outer = self.values
        self.values = {ph.name: outer[x.name]
                       for ph, x in zip((n for n in graph.nodes if n.op == "placeholder"),
                                        operands)}
        for inner in graph.nodes:
            if inner.op == "call_function":
                self.op(inner)
        output = next(n for n in graph.nodes if n.op == "output")
        results = [(x, self.values[x.name][0]) for x in output.args[0]]
        self.values = outer
        if not enabled:
            results = [(x, self.detach(x, ssa)) for x, ssa in results]
        outer[node.name] = [ssa for _, ssa in results]

    def detach(self, node, ssa: str) -> str:
        """`ssa` (the value of fx `node`) through aten.detach: no gradient flows back."""
        ty = tensor_type(node.meta["val"], where(node))
        return self.self_op("torch.aten.detach.default", ssa, ty, ty, node)

    def self_op(self, opname: str, ssa: str, ty: str, out_ty: str, node, attrs: str = "") -> str:
        """An op of one operand (`self`) that capture adds, located at fx `node`; its value."""
        out = f"%{self.counter}"
        self.counter += 1
        extra = f", {attrs}" if attrs else ""
        self.lines.append(f'    {out} = "{opname}"({ssa}) {{torch.operands = ["self"]{extra}}} : '
                          f'({ty}) -> {out_ty} {loc(node)}')
        return out

    def module(self, results) -> str:
        """The whole module, returning `results` ([(fx node, TensorSpec)])."""
        ret = [self.values[node.name][0] for node, _ in results]
        ret_types = [type_text(s.dtype, s.shape) for _, s in results]
        res_decl = ", ".join(f'{t} {{gpt.name = "{s.name}"}}'
                             for t, (_, s) in zip(ret_types, results))
        text = ["module {",
                f'  func.func @forward({", ".join(self.arg_text)}) -> ({res_decl}) {{',
                *self.lines,
                f'    return {", ".join(ret)} : {", ".join(ret_types)}',
                "  }",
                "}"]
        return "\n".join(text) + "\n"
