"""Rewrites of reductions (``CAReduce``: sum, prod, max, min, all, any).

Theano's names (``theano.tensor.opt``):

- ``local_op_of_op``: ``x.sum(0).sum(1)`` -> ``x.sum((0, 2))``: one pass over ``x``;
- ``local_reduce_join``: ``max(stack([x, y]), 0)`` -> ``maximum(x, y)``: no stacked copy;
- ``local_reduce_broadcastable``: a reduction over length-1 dimensions among others
  reduces only over the others;
- ``local_sumsqr2dot``: ``sqr(W[None] * G[:, None]).sum(axis=(1, 2))`` ->
  ``dot(sqr(G), sqr(W).sum(0))``: no 3-D product (in specialize; it reorders the sum).

The others in canonicalize.
"""

from __future__ import annotations

from theano_dag import scalar as ts
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.algebra import REASSOCIATE
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import fit, is_float, scalar_op, single_client
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import Join, cast
from theano_dag.tensor.elemwise import CAReduce, DimShuffle, Sum

__all__ = [
    "local_op_of_op",
    "local_reduce_join",
    "local_reduce_broadcastable",
    "local_sumsqr2dot",
]

canonicalize = RULES.canonicalize


def _with_axis(op, axis):
    """A reduction like ``op`` over ``axis`` (its other parameters kept)."""
    props = {p: getattr(op, p) for p in op.__props__ if p != "axis"}
    if type(op) is CAReduce:
        return CAReduce(props["scalar_op"], axis)
    return type(op)(axis=axis, **props)


@canonicalize()
@local_optimizer([CAReduce])
def local_op_of_op(fgraph, node):
    """A reduction of a reduction of the same kind is one reduction over both sets of
    axes (when the inner one keeps its input's dtype, so the sums are the same).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dtensor3("x")
    >>> local_op_of_op.transform(None, x.sum(0).sum(1).owner)[0].owner.op
    Sum{axis=(0, 2)}
    """
    # sum(sum(x, a), b) -> sum(x, a + b) ; prod, max, min, all, any alike
    inner = node.inputs[0]
    inode = inner.owner
    if inode is None or type(inode.op) is not type(node.op):
        return False
    if _with_axis(inode.op, None) != _with_axis(node.op, None):
        return False  # another scalar op, dtype or accumulator
    if fgraph is not None and not single_client(fgraph, inner):
        return False  # the inner result is needed anyway: reducing it again is cheaper
    x = inode.inputs[0]
    if inner.dtype != x.dtype:
        return False  # the inner reduction casts (ints summed in int64): values could differ
    a1 = inode.op._axes(x.ndim)
    kept = [d for d in range(x.ndim) if d not in a1]
    a2 = node.op._axes(inner.ndim)
    axes = tuple(sorted({*a1, *(kept[a] for a in a2)}))
    new = fit(node.outputs[0], _with_axis(node.op, axes)(x))
    return [new] if new is not None else False


# The binary elementwise op each reduction applies.
_ELEMWISE_OF = {ts.Add: tm.add, ts.Mul: tm.mul, ts.Maximum: tm.maximum, ts.Minimum: tm.minimum}


def _stacked(var, axis):
    """The tensor that ``var`` adds a length-1 dimension ``axis`` to (its other
    dimensions in any order), else None."""
    owner = var.owner
    if owner is None or not isinstance(owner.op, DimShuffle) or owner.op.new_order[axis] != "x":
        return None
    order = list(owner.op.new_order)
    del order[axis]
    x = owner.inputs[0]
    if sorted(o for o in order if o != "x") != list(range(x.ndim)):
        return None  # the DimShuffle also drops a dimension
    return x if order == list(range(x.ndim)) else DimShuffle(x.type.broadcastable, order)(x)


@canonicalize()
@local_optimizer([CAReduce])
def local_reduce_join(fgraph, node):
    """Reducing a stack along the stacking axis is the elementwise op of the tensors
    stacked: no stacked copy is made.

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dmatrix("x"), tt.dmatrix("y")
    >>> local_reduce_join.transform(None, tt.max(tt.stack([x, y]), 0).owner)[0].owner.op
    Elemwise{maximum,no_inplace}
    """
    # max(stack([x, y]), 0) -> maximum(x, y) ; sum(stack([x, y, z]), 0) -> x + y + z
    j = node.inputs[0]
    if j.owner is None or not isinstance(j.owner.op, Join) or j.owner.op.axis is None:
        return False
    axis = j.owner.op.axis % j.ndim
    if node.op._axes(j.ndim) != (axis,):
        return False
    ew = _ELEMWISE_OF.get(type(node.op.scalar_op))
    if ew is None or len(j.owner.inputs) < 2:
        return False
    parts = [_stacked(i, axis) for i in j.owner.inputs]
    if any(p is None for p in parts):
        return False
    out = node.outputs[0]
    # Computed in the reduction's output dtype (ints summed in int64 stay so).
    parts = [p if p.dtype == out.dtype else cast(p, out.dtype) for p in parts]
    if ew in (tm.add, tm.mul):
        new = ew(*parts)
    else:
        new = parts[0]
        for p in parts[1:]:
            new = ew(new, p)
    new = fit(out, new)
    return [new] if new is not None else False


@canonicalize()
@local_optimizer([CAReduce])
def local_reduce_broadcastable(fgraph, node):
    """A reduction over length-1 (broadcastable) dimensions and others reduces over the
    others only, the length-1 ones dropped first.

    >>> import theano_dag.tensor as tt
    >>> x = tt.TensorType("float64", (True, False, True))("x")
    >>> local_reduce_broadcastable.transform(None, x.sum(axis=(0, 1)).owner)[0].owner.op
    Sum{axis=(0,)}
    """
    # sum(x, (0, 1)) with x.shape[0] == 1 -> sum(x.dimshuffle(1, 2), 0)
    x = node.inputs[0]
    axes = node.op._axes(x.ndim)
    ones = [a for a in axes if x.type.broadcastable[a]]
    rest = [a for a in axes if not x.type.broadcastable[a]]
    if not ones or not rest:
        return False  # nothing to drop, or everything (local_cut_useless_reduce)
    kept = [d for d in range(x.ndim) if d not in ones]
    squeezed = DimShuffle(x.type.broadcastable, kept)(x)
    new = fit(node.outputs[0], _with_axis(node.op, tuple(kept.index(a) for a in rest))(squeezed))
    return [new] if new is not None else False


def _matrix_spread(var, order):
    """The matrix that ``var`` is ``DimShuffle(order)`` of, else None."""
    owner = var.owner
    if owner is None or not isinstance(owner.op, DimShuffle) or owner.op.new_order != order:
        return None
    x = owner.inputs[0]
    return x if x.ndim == 2 else None


@RULES.specialize(REASSOCIATE)
@local_optimizer([Sum])
def local_sumsqr2dot(fgraph, node):
    """The sum over its last two axes of ``sqr(W[None, :, :] * G[:, None, :])`` (the
    squared norms of the per-example gradients of a dense layer) is
    ``dot(sqr(G), sqr(W).sum(axis=0))``: no ``(n, m, k)`` product is made, one
    matrix-vector product instead. The product without ``sqr`` likewise:
    ``dot(G, W.sum(axis=0))``.

    >>> import theano_dag.tensor as tt
    >>> W, G = tt.dmatrix("W"), tt.dmatrix("G")
    >>> y = tt.sqr(W.dimshuffle("x", 0, 1) * G.dimshuffle(0, "x", 1)).sum(axis=(1, 2))
    >>> local_sumsqr2dot.transform(None, y.owner)[0].owner.op
    Dot
    """
    # sum(sqr(W.dimshuffle(x, 0, 1) * G.dimshuffle(0, x, 1)), (1, 2)) -> dot(sqr(G), sum(sqr(W), 0))
    # sum(W.dimshuffle(x, 0, 1) * G.dimshuffle(0, x, 1), (1, 2)) -> dot(G, sum(W, 0))
    if type(node.op) is not Sum:
        return False
    prod, out = node.inputs[0], node.outputs[0]
    if prod.ndim != 3 or node.op._axes(3) != (1, 2) or not is_float(out):
        return False
    square = prod.owner is not None and scalar_op(prod.owner) == ts.sqr
    if square:
        if fgraph is not None and not single_client(fgraph, prod):
            return False  # the 3-D squares are needed anyway
        prod = prod.owner.inputs[0]
    if not isinstance(scalar_op(prod.owner), ts.Mul) or len(prod.owner.inputs) != 2:
        return False
    if fgraph is not None and not single_client(fgraph, prod):
        return False
    for a, b in (prod.owner.inputs, prod.owner.inputs[::-1]):
        w, g = _matrix_spread(a, ("x", 0, 1)), _matrix_spread(b, (0, "x", 1))
        if w is not None and g is not None:
            break
    else:
        return False
    # computed in the product's dtype, as the sum of it was
    w, g = (v if v.dtype == prod.dtype else cast(v, prod.dtype) for v in (w, g))
    if square:
        w, g = tm.sqr(w), tm.sqr(g)
    new = fit(out, tm.dot(g, tm.sum(w, axis=0)))
    return [new] if new is not None else False
