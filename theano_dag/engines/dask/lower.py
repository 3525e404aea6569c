"""The Dask engine's lowering.

* ``inline_shared_elementwise`` (optdb pass ``dask_inline_elementwise``): a small
  elementwise node whose value several elementwise nodes read is computed again inside
  each of them, so its chunks are never tasks nor stored (the fusion pass keeps such a
  node apart, since on one machine its value is computed once and read from memory).
* ``insert_gathers`` (optdb pass ``dask_gather``): ``DaskGather`` on the inputs of ops
  with no chunked form; it warns once per op, naming it, since such an op runs in one
  task that holds its whole inputs (on one worker of a cluster).
"""

from __future__ import annotations

import warnings

from theano_dag import scalar as ts
from theano_dag.engines.dask.ops import DaskGather, dask_gather
from theano_dag.engines.dask.translate import has_chunked_form
from theano_dag.graph.basic import Constant
from theano_dag.scalar import Composite
from theano_dag.tensor.elemwise import Elemwise

__all__ = ["insert_gathers", "inline_shared_elementwise", "GatherWarning", "INLINE_MAX_OPS"]

# Scalar ops at most in a node computed again by each reader (cheap next to a task).
INLINE_MAX_OPS = 4
# Inputs at most of a node made by inlining (the fusion pass's limit).
INLINE_MAX_INPUTS = 32


def _scalar_ops(sop) -> int:
    return len(sop.nodes) if isinstance(sop, Composite) else 1


def _apply_scalar(sop, args):
    """The outputs of scalar op ``sop`` (a Composite's graph rebuilt) on ``args``."""
    if not isinstance(sop, Composite):
        return sop.make_node(*args).outputs
    env = dict(zip(sop.inputs, args))
    for node in sop.nodes:
        ins = [v if isinstance(v, Constant) else env[v] for v in node.inputs]
        env.update(zip(node.outputs, node.op.make_node(*ins).outputs))
    return [env[o] for o in sop.outputs]


def _inlined(reader, node):
    """``reader`` (an Elemwise) with ``node``'s output computed inside it, or None."""
    shared = node.outputs[0]
    inputs = list(dict.fromkeys([v for v in reader.inputs if v is not shared] + node.inputs))
    if len(inputs) > INLINE_MAX_INPUTS:
        return None
    svars = {v: ts.get_scalar_type(v.dtype)() for v in inputs}
    (inner,) = _apply_scalar(node.op.scalar_op, [svars[v] for v in node.inputs])
    args = [inner if v is shared else svars[v] for v in reader.inputs]
    outs = _apply_scalar(reader.op.scalar_op, args)
    if [o.type.dtype for o in outs] != [o.dtype for o in reader.outputs]:
        return None
    comp = Composite([svars[v] for v in inputs], outs, copy=False)
    new = Elemwise(comp).make_node(*inputs).outputs
    if [o.type for o in new] != [o.type for o in reader.outputs]:
        return None
    return new


def inline_shared_elementwise(fgraph) -> int:
    """Compute each small single-output ``Elemwise`` node read only by several
    ``Elemwise`` nodes of its shape inside each of them; return how many it inlined."""
    count = 0
    for node in list(reversed(fgraph.toposort())):
        if node not in fgraph.apply_nodes or type(node.op) is not Elemwise:
            continue
        if len(node.outputs) != 1 or _scalar_ops(node.op.scalar_op) > INLINE_MAX_OPS:
            continue
        out = node.outputs[0]
        readers = list(dict.fromkeys(c for c, _ in fgraph.clients.get(out, ())))
        if len(readers) < 2 or any(
            c == "output"
            or type(c.op) is not Elemwise
            or c.outputs[0].type.broadcastable != out.type.broadcastable
            for c in readers
        ):
            continue
        news = [_inlined(c, node) for c in readers]
        if any(n is None for n in news):
            continue
        for c, new in zip(readers, news):
            fgraph.replace_all(list(zip(c.outputs, new)), reason="dask_inline_elementwise")
        count += 1
    return count


class GatherWarning(UserWarning):
    """An op with no chunked form runs on gathered arrays (Dask engine)."""


def insert_gathers(fgraph) -> list:
    """Put ``DaskGather`` on each array input (not constant, at least 1-d) of every node
    of ``fgraph`` with no chunked form; return those nodes' ops."""
    gathered = []
    for node in list(fgraph.toposort()):
        if has_chunked_form(node):
            continue
        arrays = [
            (i, v)
            for i, v in enumerate(node.inputs)
            if getattr(v.type, "ndim", 0) >= 1
            and not isinstance(v, Constant)
            and not (v.owner is not None and isinstance(v.owner.op, DaskGather))
        ]
        if not arrays:
            continue
        for i, v in arrays:
            fgraph.change_input(node, i, dask_gather(v), reason="dask_gather")
        gathered.append(node.op)
    for op in dict.fromkeys(str(op) for op in gathered):
        warnings.warn(
            f"Dask engine: {op} has no chunked form; it runs on its whole inputs "
            "gathered into one task",
            GatherWarning,
            stacklevel=2,
        )
    return gathered
