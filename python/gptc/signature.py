"""The compiled function's signature, read from a torch.export ExportedProgram.

Which placeholders are parameters, buffers or user inputs and their names; which
parameters are one tensor under several names (tied); which small constants go inline;
and which outputs are tensors. capture.py turns this into MLIR with mlir_text.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .errors import CaptureError

# The torch dtypes gptc compiles, as MLIR spells them.
DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.bool: "i1",
}

# A lifted constant this small (nanoGPT's `x[:, [-1], :]` index) is written inline.
_INLINE_CONSTANT_ELEMENTS = 4096


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
    # A "param" in the model's state_dict: False for a buffer registered with
    # persistent=False (LLaMA's rotary inv_freq) and a lifted constant, as in PyTorch's.
    persistent: bool = True


@dataclass
class Signature:
    args: list  # TensorSpec per function argument, in order
    nodes: list  # the fx placeholder name of each argument
    weights: dict  # param name -> tensor (parameters, buffers, constants)
    aliases: dict = field(default_factory=dict)  # placeholder -> placeholder of the same tensor
    constants: dict = field(default_factory=dict)  # placeholder -> small tensor written inline
    tied: dict = field(default_factory=dict)  # other name of a tied parameter -> its arg name


def dtype_name(t: torch.dtype, where: str) -> str:
    """`t` as MLIR spells it; a CaptureError for a dtype gptc does not compile."""
    if t not in DTYPES:
        raise CaptureError(f"unsupported dtype {t} {where}")
    return DTYPES[t]


def static_shape(val, where: str) -> tuple:
    """The shape of tensor `val` (its dtype checked first); a CaptureError where a size
    is symbolic (depends on the data)."""
    dtype_name(val.dtype, where)
    if not all(isinstance(d, int) for d in val.shape):
        raise CaptureError(f"a tensor whose shape depends on the data ({list(val.shape)}) "
                           f"{where}; gptc compiles static shapes only")
    return tuple(val.shape)


def is_tril_ones(t: torch.Tensor) -> bool:
    """Whether `t` is tril(ones(N, N)), perhaps viewed with leading dims of size 1."""
    if t.dim() < 2 or t.shape[-1] != t.shape[-2] or any(d != 1 for d in t.shape[:-2]):
        return False
    n = t.shape[-1]
    return bool(torch.equal(t.detach().reshape(n, n).to(torch.float64).cpu(),
                            torch.tril(torch.ones(n, n, dtype=torch.float64))))


def extract(model: torch.nn.Module, ep, input_names=None) -> Signature:
    """The arguments of `ep` (exported from `model`): user inputs named by `input_names`
    (else by their placeholders), parameters and buffers by their PyTorch names."""
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
    constants = {}
    args, weights, trainable, persistent = [], {}, {}, {}  # args: (placeholder, name, kind)
    user_index = 0
    for spec in ep.graph_signature.input_specs:
        node_name = spec.arg.name
        if spec.kind == InputKind.USER_INPUT:
            kind = "input"
            name = (input_names[user_index] if input_names and user_index < len(input_names)
                    else node_name)
            user_index += 1
        elif (spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.BUFFER)
              and state[spec.target].dtype in (torch.int64, torch.bool)
              and (spec.kind == InputKind.BUFFER
                   or state[spec.target].numel() <= _INLINE_CONSTANT_ELEMENTS)):
            # An integer or boolean buffer is no parameter (those are floating-point): a
            # constant, printed where something printed uses it (fold.py).
            constants[node_name] = state[spec.target].detach()
            continue
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            kind, name = "param", spec.target
            trainable[node_name] = (spec.kind == InputKind.PARAMETER
                                    and model.get_parameter(spec.target).requires_grad)
            persistent[node_name] = (spec.kind == InputKind.PARAMETER
                                     or (spec.kind == InputKind.BUFFER and spec.persistent))
            if spec.kind == InputKind.PARAMETER:
                name = canonical.get(id(model.get_parameter(spec.target)), spec.target)
                if name in seen:
                    aliases[node_name] = seen[name]
                    continue
                seen[name] = node_name
            weights[name] = state[spec.target].detach()
        else:
            raise CaptureError(f"unsupported input kind {spec.kind} for {node_name}")
        args.append((node_name, name, kind))

    # Each argument's type; buffers and frozen parameters are not trainable.
    nodes = {n.name: n for n in ep.graph.nodes}
    specs = []
    for node_name, name, kind in args:
        val = nodes[node_name].meta["val"]
        if not isinstance(val, torch.Tensor):
            raise CaptureError(f"input '{name}' is not a tensor")
        shape = static_shape(val, f"for input '{name}'")
        frozen = kind == "param" and not trainable[node_name]
        specs.append(TensorSpec(name, kind, DTYPES[val.dtype], shape,
                                trainable=kind == "param" and not frozen,
                                tril_ones=frozen and is_tril_ones(weights[name]),
                                persistent=persistent.get(node_name, True)))

    tied = {}
    for pname, p in model.named_parameters(remove_duplicate=False):
        first = canonical.get(id(p))
        if first is not None and first != pname:
            tied[pname] = first
    return Signature(args=specs, nodes=[a[0] for a in args], weights=weights,
                     aliases=aliases, constants=constants, tied=tied)


def outputs(ep) -> tuple[list, dict]:
    """([(fx node, TensorSpec)] of the tensor outputs, {flat index: value} of the others)."""
    output = next(n for n in ep.graph.nodes if n.op == "output")
    tensors, const_outputs = [], {}
    for i, o in enumerate(output.args[0]):
        if isinstance(o, torch.fx.Node):
            val = o.meta["val"]
            shape = static_shape(val, "for a model output")
            tensors.append((o, TensorSpec(f"output{i}", "result", DTYPES[val.dtype], shape)))
        else:
            const_outputs[i] = o
    if not tensors:  # an empty return is not MLIR: the compiler's parse error said nothing useful
        raise CaptureError("the model's forward returns no tensor")
    return tensors, const_outputs
