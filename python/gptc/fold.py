"""What an exported graph computes from no input: evaluated once at capture, with torch.

Hugging Face models compute bookkeeping from `arange`s alone: the attention mask
(transformers' `create_causal_mask`: position ids, their `diff` and `cumsum` to find packed
sequences, `index` and comparisons), OPT's position ids (a `cumsum` of ones). None of it
depends on the tokens or the weights, so capture evaluates it here, and:

- an attention whose `attn_mask` is such a mask and the causal one (query i sees keys
  j <= i, top-left aligned as `is_causal`) is printed with `is_causal=True` and without the
  mask; one whose mask lets every query see every key, without the mask. A mask that is
  such a mask and (`&`) one that hides keys alone, the same for every head and query
  (transformers' padding mask, [B, 1, 1, S]), is printed as that key mask, with
  `is_causal` as the other says: gpt.attention takes both (its key_mask). Any other mask
  stays an operand, which the frontend spells out;
- a value the rest of the graph needs, computed with an op gptc has no conversion for
  (`gptc ops`), is printed as a `gpt.constant` instead of its ops. Values computed by ops
  gptc converts stay ops (an `arange` feeding an embedding becomes a slice of it).

An `index` whose index tensors are such values, each counting 0, 1, ... along a dimension of
its own (transformers' padding mask, `attention_mask[batch_idx, kv_idx]` with the two
aranges), reads every element where it is: it is printed as a view of the tensor indexed
(and an expand where the result is wider), without the index tensors.

A `gather` that reads rows of a table at indices computed from the input (GPT-J's rotary
table, repeated over the batch, gathered by the position ids repeated along its width) is
printed as `table[index]`, which the frontend takes as a row lookup.

An operand of `cat` with no elements (Phi-3's pass-through half of a fully rotated head) is
dropped. Folded and empty nodes, and the inline constants (signature.py), that nothing
printed uses are not printed.
"""
from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass, field

import torch

from .errors import CaptureError
from .signature import DTYPES

# Larger results are not evaluated (a mask is batch x 1 x T x T booleans at most).
_MAX_ELEMENTS = 1 << 26
# Larger values are not written into the module as constants.
MAX_EMBEDDED_ELEMENTS = 1 << 16


@dataclass
class Plan:
    causal: dict = field(default_factory=dict)  # attention node -> is_causal (mask dropped)
    key_masks: dict = field(default_factory=dict)  # attention node -> its key mask's node
    embed: dict = field(default_factory=dict)   # node -> value printed as gpt.constant
    dropped: dict = field(default_factory=dict)  # node -> names of operands not printed
    skip: set = field(default_factory=set)      # nodes not printed
    # index or gather node -> (runs, shape): its `self` sliced to each run (dim, start, end),
    # viewed as shape, expanded to the result
    views: dict = field(default_factory=dict)
    # gather node -> (table node, index node): printed as the table's rows, table[index]
    rows: dict = field(default_factory=dict)


@functools.lru_cache(maxsize=1)
def converted_ops() -> frozenset:
    """The aten overloads the frontend converts (`gptc ops`); empty without the tool."""
    from .locate import find_tool
    try:
        out = subprocess.run([find_tool("gptc"), "ops"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    except Exception:  # noqa: BLE001 (no tool: every folded value stays ops, as before)
        return frozenset()
    return frozenset(out.split())


def plan(ep, constants: dict, converted: frozenset) -> Plan:
    """What the printer does with `ep`'s graph besides printing each op (see the module)."""
    folded = input_independent(ep, constants)
    p = Plan(causal=attention_rewrites(ep, folded))
    bypassed = set()  # the `&` of a key mask rewrite, and its expands: printed if used elsewhere
    for node, (causal, keys, chain) in key_mask_rewrites(ep, folded).items():
        p.causal[node] = causal
        p.key_masks[node] = keys
        bypassed.update(chain)
    nodes = list(ep.graph.nodes)
    for node in nodes:
        if node.name in p.causal:
            p.dropped[node.name] = {bound_args(node)["attn_mask"].name}
        elif (node.target is torch.ops.aten.index.Tensor
              and (view := index_view(node, folded)) is not None):
            p.views[node.name] = view
            p.dropped[node.name] = {n.name for n in bound_args(node)["indices"]}
        elif (node.target is torch.ops.aten.gather.default
              and (run := gather_slice(node, folded)) is not None):
            p.views[node.name] = ([run], tuple(node.meta["val"].shape))
            p.dropped[node.name] = {bound_args(node)["index"].name}
        elif node.target is torch.ops.aten.gather.default and (rows := gather_rows(node)):
            p.rows[node.name] = rows
            bound = bound_args(node)
            p.dropped[node.name] = {bound["self"].name, bound["index"].name}
        elif node.target is torch.ops.aten.cat.default:
            empty = {n.name for n in node.all_input_nodes if _numel(n) == 0}
            if empty and len(empty) < len(node.all_input_nodes):
                p.dropped[node.name] = empty
    # A folded value computed with an op the frontend lacks, or in a type gptc does not
    # compile (Bloom's int32 arange of its ALiBi slopes' powers): embedded where first needed.
    opaque = set()
    for node in nodes:
        if node.name in folded and converted and (
                str(node.target) not in converted or not _compiled_type(node)
                or any(n.name in opaque for n in node.all_input_nodes)):
            opaque.add(node.name)
    needed = set()
    for node in reversed(nodes):
        if node.op == "output":
            needed.update(n.name for n in node.all_input_nodes)
            continue
        if node.op != "call_function" or is_assertion(node):
            continue
        removable = node.name in folded or node.name in bypassed or _numel(node) == 0
        if removable and node.name not in needed:
            p.skip.add(node.name)
            continue
        if node.name in opaque:
            p.embed[node.name] = folded[node.name]
            continue
        gone = p.dropped.get(node.name, set())
        needed.update(n.name for n in node.all_input_nodes if n.name not in gone)
        if node.name in p.key_masks:
            needed.add(p.key_masks[node.name].name)
        needed.update(n.name for n in p.rows.get(node.name, ()))
    p.skip.update(name for name in constants if name not in needed)
    for name, value in list(p.embed.items()) + [(n, v) for n, v in constants.items()
                                                 if n in needed]:
        if value.numel() > MAX_EMBEDDED_ELEMENTS:
            raise CaptureError(f"'{name}' is a constant of {value.numel()} elements, more than "
                               f"the {MAX_EMBEDDED_ELEMENTS} gptc writes into a model")
    return p


def input_independent(ep, constants: dict) -> dict:
    """{fx node name: value} of every call_function node whose value depends on no input,
    parameter or buffer (only on `constants`, the inline constants, and literals), and is
    not random. An op that writes into an operand (`fill_` on a view of a mask) is not
    evaluated: it stays in the graph, where the frontend refuses it in one line, rather
    than be left out unused while what it wrote into is printed without its write."""
    values = dict(constants)
    for node in ep.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if (torch.Tag.nondeterministic_seeded in node.target.tags
                or node.target._schema.is_mutable):
            continue
        numel = _numel(node)
        if numel is None or numel > _MAX_ELEMENTS:
            continue
        if any(n.name not in values for n in node.all_input_nodes):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: values[n.name])
        try:
            out = node.target(*args, **kwargs)
        except Exception:  # noqa: BLE001 (not folded; the frontend converts or refuses it)
            continue
        if isinstance(out, torch.Tensor):
            values[node.name] = out
    for name in constants:
        del values[name]
    return values


def _counts(idx: torch.Tensor, shape: tuple, d: int, limit: int) -> int | None:
    """start where `idx` (broadcast to `shape`) counts start, start + 1, ... along dimension
    d of `shape` and is constant along the others, within [0, limit); else None."""
    try:
        idx = torch.broadcast_to(idx, shape)
    except RuntimeError:
        return None
    if idx.numel() == 0:
        return None
    start = int(idx.flatten()[0])
    grid = start + torch.arange(shape[d]).view([-1 if j == d else 1 for j in range(len(shape))])
    if start < 0 or start + shape[d] > limit or not bool((idx == grid).all()):
        return None
    return start


def index_view(node, folded: dict) -> tuple | None:
    """For `x[i0, i1, ...]` (aten.index.Tensor; x's dimensions past the indices taken whole)
    whose index tensors are input-independent and each counts start, start + 1, ... along
    one dimension of the result, in order: (runs, shape), x sliced to each run (dim,
    start, end) where it reads less than its whole dimension, viewed as shape (dimension k
    at the result dimension d_k it fills, 1 elsewhere, then x's dimensions taken whole)
    and expanded to the result. transformers' padding mask, `attention_mask[batch_idx,
    kv_idx]`, reads every element; CodeGen's rotary table at positions 0..T-1 a run. None
    for any other index."""
    bound = bound_args(node)
    x, indices = bound["self"], bound["indices"]
    result = node.meta.get("val")
    xs = tuple(x.meta["val"].shape)
    if (not isinstance(result, torch.Tensor) or not indices or len(indices) > len(xs)
            or any(i is None or i.name not in folded for i in indices)):
        return None
    whole = xs[len(indices):]
    shape = tuple(result.shape)
    lead = shape[:len(shape) - len(whole)]
    if shape[len(lead):] != whole:
        return None
    view, runs, at = [1] * len(lead), [], -1
    for k, i in enumerate(indices):
        for d in range(at + 1, len(lead)):
            if (start := _counts(folded[i.name], lead, d, xs[k])) is not None:
                break
        else:
            return None
        if lead[d] != xs[k]:
            runs.append((k, start, start + lead[d]))
        view[d], at = lead[d], d
    return runs, tuple(view) + whole


def gather_slice(node, folded: dict) -> tuple | None:
    """For gather(x, dim, index) whose index is input-independent, counts start, start + 1,
    ... along dim and has x's size along every other dimension (GPT-J's rotary table read
    at position ids 0..T-1): (dim, start, end), the run x[start:end] along dim that it
    reads. None for any other index."""
    bound = bound_args(node)
    x, index = bound["self"], bound["index"]
    if bound.get("sparse_grad") or not isinstance(index, torch.fx.Node) or index.name not in folded:
        return None
    idx, xs = folded[index.name], tuple(x.meta["val"].shape)
    if idx.dim() != len(xs):
        return None
    dim = bound["dim"] % len(xs)
    if any(idx.shape[d] != xs[d] for d in range(len(xs)) if d != dim):
        return None
    start = _counts(idx, tuple(idx.shape), dim, xs[dim])
    return None if start is None else (dim, start, start + idx.shape[dim])


def gather_rows(node) -> tuple | None:
    """For gather(x, d, index) that reads rows of a table at indices computed from the input
    (GPT-J's rotary table at its position ids): x a repeat of a 2-D table [N, C] over new
    leading dimensions (`table.repeat(B, 1, 1)`), d its next-to-last dimension, index
    `p.unsqueeze(-1)` repeated (or expanded) along the last dimension to C: (table node, p
    node), the gather being table[p]. None for any other gather."""
    bound = bound_args(node)
    x, index = bound["self"], bound["index"]
    if (bound.get("sparse_grad") or not isinstance(x, torch.fx.Node)
            or not isinstance(index, torch.fx.Node)
            or x.target is not torch.ops.aten.repeat.default):
        return None
    table, reps = x.args[0], list(x.args[1])
    t, xs = table.meta.get("val"), tuple(x.meta["val"].shape)
    if (not isinstance(t, torch.Tensor) or t.dim() != 2 or reps[-2:] != [1, 1]
            or bound["dim"] % len(xs) != len(xs) - 2):
        return None
    if index.target is torch.ops.aten.repeat.default:
        unsqueezed, wide = index.args[0], list(index.args[1])
        if wide[:-1] != [1] * (len(wide) - 1):
            return None
    elif index.target is torch.ops.aten.expand.default:
        unsqueezed = index.args[0]
    else:
        return None
    if (not isinstance(unsqueezed, torch.fx.Node)
            or unsqueezed.target is not torch.ops.aten.unsqueeze.default):
        return None
    rank = unsqueezed.meta["val"].dim()
    if unsqueezed.args[1] % rank != rank - 1:
        return None
    p = unsqueezed.args[0]
    shape = tuple(index.meta["val"].shape)
    if (p.meta["val"].dtype != torch.long or shape[-1] != t.shape[1]
            or shape[:-2] != xs[:-2] or tuple(p.meta["val"].shape) != shape[:-1]):
        return None
    return table, p


def attention_mask_kind(mask: torch.Tensor, q_len: int, kv_len: int) -> str | None:
    """'causal' if `mask` (bool, or float with 0 and -inf/finfo.min) lets query i see keys
    j <= i only, 'none' if it lets every query see every key, None otherwise."""
    if mask.dtype == torch.bool:
        allowed = mask
    elif mask.is_floating_point():
        blocked = mask <= torch.finfo(mask.dtype).min
        if not ((mask == 0) | blocked).all():
            return None
        allowed = ~blocked
    else:
        return None
    try:
        allowed = torch.broadcast_to(allowed, allowed.shape[:-2] + (q_len, kv_len))
    except RuntimeError:
        return None
    if bool(allowed.all()):
        return "none"
    causal = torch.ones(q_len, kv_len, dtype=torch.bool).tril()
    return "causal" if bool((allowed == causal).all()) else None


def _masked_attentions(ep):
    """(node, attn_mask node, q, k) for each scaled_dot_product_attention of `ep` with a
    tensor attn_mask and no is_causal (torch refuses both; so does the frontend)."""
    sdpa = torch.ops.aten.scaled_dot_product_attention.default
    for node in ep.graph.nodes:
        if node.op != "call_function" or node.target is not sdpa:
            continue
        bound = bound_args(node)
        mask = bound.get("attn_mask")
        if isinstance(mask, torch.fx.Node) and not bound.get("is_causal"):
            yield node, mask, bound["query"].meta["val"], bound["key"].meta["val"]


def attention_rewrites(ep, folded: dict) -> dict:
    """{fx node name: is_causal} for each scaled_dot_product_attention whose `attn_mask` is
    an input-independent causal or all-visible mask (it is printed without the mask)."""
    rewrites = {}
    for node, mask, q, k in _masked_attentions(ep):
        if mask.name not in folded:
            continue
        kind = attention_mask_kind(folded[mask.name], q.shape[-2], k.shape[-2])
        if kind is not None:
            rewrites[node.name] = kind == "causal"
    return rewrites


_AND = (torch.ops.aten.__and__.Tensor, torch.ops.aten.logical_and.default,
        torch.ops.aten.bitwise_and.Tensor)


def key_mask_rewrites(ep, folded: dict) -> dict:
    """{fx node name: (is_causal, key mask node, names of the mask's nodes from the `&` on)}
    for each scaled_dot_product_attention whose boolean `attn_mask` is (an expand of)
    `a & b`: a input-independent, causal or hiding nothing (attention_mask_kind), b a mask
    of its keys alone, [B or 1, 1, 1, S] (or fewer leading dimensions), that depends on the
    input (transformers' padding mask)."""
    rewrites = {}
    for node, mask, q, k in _masked_attentions(ep):
        if mask.name in folded:
            continue
        chain = {mask.name}
        while mask.target is torch.ops.aten.expand.default:
            mask = mask.args[0]
            chain.add(mask.name)
        if mask.target not in _AND or len(mask.args) != 2:
            continue
        for a, b in (mask.args, mask.args[::-1]):
            if not (isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node)
                    and a.name in folded and b.name not in folded):
                continue
            kind = attention_mask_kind(folded[a.name], q.shape[-2], k.shape[-2])
            val = b.meta.get("val")
            if (kind is None or not isinstance(val, torch.Tensor) or val.dtype != torch.bool
                    or not 1 <= val.dim() <= 4):
                continue
            shape = (1,) * (4 - val.dim()) + tuple(val.shape)
            if shape[0] in (1, q.shape[0]) and shape[1:] == (1, 1, k.shape[-2]):
                rewrites[node.name] = (kind == "causal", b, chain)
                break
    return rewrites


def is_assertion(node) -> bool:
    """torch.export's shape and dtype assertions: nothing to compute, nothing printed."""
    return node.meta.get("val") is None and not node.users and "_assert" in str(node.target)


def _numel(node) -> int | None:
    """The node's element count; None if it is no tensor or its shape is symbolic (the
    printer names a data-dependent shape in its own error)."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not all(isinstance(d, int) for d in val.shape):
        return None
    return val.numel()


def _compiled_type(node) -> bool:
    """Whether the node's value, a tensor, is of an element type gptc compiles."""
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype in DTYPES


def bound_args(node) -> dict:
    """The node's arguments by their schema names."""
    bound = dict(zip((a.name for a in node.target._schema.arguments), node.args))
    bound.update(node.kwargs)
    return bound
