"""Rewrites of the ``uncanonicalize`` pass (Theano's ``theano.tensor.opt_uncanonicalize``):
after specialize, a DimShuffle that only adds or drops length-1 dimensions is folded into
the Alloc, Reshape or Subtensor next to it, which then makes the right shape itself.

* ``local_alloc_dimshuffle``: ``alloc(x.dimshuffle('x', ..., 0, 1, ...), *shape)`` ->
  ``alloc(x, *shape)`` (alloc broadcasts ``x`` from the left anyway);
* ``local_reshape_dimshuffle``: ``reshape(x.dimshuffle(...), shp)`` -> ``reshape(x, shp)``
  when the DimShuffle keeps the order of ``x``'s dimensions (it only adds or drops
  length-1 ones, so the elements are the same in the same order);
* ``local_dimshuffle_alloc``: ``alloc(x, *shape).dimshuffle('x', ..., 0, 1, ...)`` ->
  ``alloc(x, 1, ..., *shape)``;
* ``local_max_and_argmax``: a ``MaxAndArgmax`` whose index nobody reads -> ``max``
  (one output, no index to track; the same value, NaN included);
* ``local_dimshuffle_subtensor``: a DimShuffle that drops length-1 dimensions of an
  indexing ``x[...]`` (keeping the others in order) -> the same indexing with ``0`` at
  those dimensions, where the indexing took them whole.

``register_uncanonicalize`` (in ``theano_dag.opt.optdb``) adds a user's rewrite to the
pass.

>>> import numpy as np
>>> import theano_dag.tensor as tt
>>> from theano_dag.graph.fg import FunctionGraph
>>> from theano_dag.graph.rewriting import out2in
>>> x = tt.dvector("x")
>>> g = FunctionGraph([x], [tt.alloc(x, 3, 2).dimshuffle("x", 0, 1)])
>>> _ = out2in(local_dimshuffle_alloc)(g)
>>> [type(n.op).__name__ for n in g.toposort()], g.outputs[0].ndim
(['Alloc'], 3)
"""

from __future__ import annotations

from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import keep_trace
from theano_dag.tensor import math as tm
from theano_dag.tensor.arrays import MaxAndArgmax
from theano_dag.tensor.basic import Alloc, alloc
from theano_dag.tensor.elemwise import DimShuffle
from theano_dag.tensor.shape import Reshape, reshape
from theano_dag.tensor.subtensor import Subtensor

__all__ = [
    "local_alloc_dimshuffle",
    "local_reshape_dimshuffle",
    "local_dimshuffle_alloc",
    "local_dimshuffle_subtensor",
    "local_max_and_argmax",
]


def _only_adds_on_the_left(new_order, ndim):
    """Whether ``new_order`` (a DimShuffle's, of an input of ``ndim`` dimensions) is
    ``('x', ..., 'x', 0, 1, ..., ndim - 1)``."""
    k = len(new_order) - ndim
    return k >= 0 and tuple(new_order) == ("x",) * k + tuple(range(ndim))


def _same(node, new):
    """``[new]`` when it has the type of ``node``'s output (else no rewrite), the stack of
    the output kept."""
    out = node.outputs[0]
    if new.type != out.type:
        return None
    return [keep_trace(out, new, node.inputs)]


@RULES.uncanonicalize()
@local_optimizer([Alloc])
def local_alloc_dimshuffle(fgraph, node):
    """``alloc(x.dimshuffle('x', ..., 0, 1, ...), *shape)`` -> ``alloc(x, *shape)``."""
    if not isinstance(node.op, Alloc):
        return False
    value = node.inputs[0]
    ds = value.owner
    if ds is None or not isinstance(ds.op, DimShuffle):
        return False
    if not _only_adds_on_the_left(ds.op.new_order, ds.inputs[0].ndim):
        return False
    return _same(node, alloc(ds.inputs[0], *node.inputs[1:])) or False


@RULES.uncanonicalize()
@local_optimizer([Reshape])
def local_reshape_dimshuffle(fgraph, node):
    """``reshape(x.dimshuffle(...), shp)`` -> ``reshape(x, shp)`` when the DimShuffle
    keeps the order of ``x``'s dimensions (it adds or drops length-1 ones only)."""
    if not isinstance(node.op, Reshape):
        return False
    ds = node.inputs[0].owner
    if ds is None or not isinstance(ds.op, DimShuffle):
        return False
    kept = [d for d in ds.op.new_order if d != "x"]
    if kept != sorted(kept):
        return False
    new = reshape(ds.inputs[0], node.inputs[1], ndim=node.outputs[0].ndim)
    return _same(node, new) or False


@RULES.uncanonicalize()
@local_optimizer([DimShuffle])
def local_dimshuffle_alloc(fgraph, node):
    """``alloc(x, *shape).dimshuffle('x', ..., 0, 1, ...)`` -> ``alloc(x, 1, ..., *shape)``."""
    if not isinstance(node.op, DimShuffle):
        return False
    al = node.inputs[0].owner
    if al is None or not isinstance(al.op, Alloc):
        return False
    ndim = node.inputs[0].ndim
    if not _only_adds_on_the_left(node.op.new_order, ndim):
        return False
    ones = (1,) * (len(node.op.new_order) - ndim)
    return _same(node, alloc(al.inputs[0], *ones, *al.inputs[1:])) or False


@RULES.uncanonicalize()
@local_optimizer([DimShuffle])
def local_dimshuffle_subtensor(fgraph, node):
    """A DimShuffle that drops length-1 dimensions of ``x[...]`` and keeps the others in
    order -> the same indexing with ``0`` at those dimensions, where it took them whole
    (``x[i:j, :, k].dimshuffle(0)`` -> ``x[i:j, 0, k]`` when ``x``'s second dimension has
    length 1)."""
    if not isinstance(node.op, DimShuffle):
        return False
    order = node.op.new_order
    if "x" in order or list(order) != sorted(order):
        return False
    sub = node.inputs[0].owner
    if sub is None or not isinstance(sub.op, Subtensor):
        return False
    x, idx_inputs = sub.inputs[0], iter(sub.inputs[1:])
    dropped = set(range(node.inputs[0].ndim)) - set(order)
    # Each output dimension of the indexing comes from a slice (or a trailing dimension
    # it did not index): rebuild the indices, 0 at the dropped whole ones.
    indices, out_dim = [], 0
    for entry in sub.op.idx_list:
        if entry[0] == "int":
            indices.append(next(idx_inputs))
            continue
        parts = [next(idx_inputs) if present else None for present in entry[1:]]
        if out_dim in dropped:
            if any(p is not None for p in parts):
                return False  # a dropped dimension the indexing cut: left as it is
            indices.append(0)
        else:
            indices.append(slice(*parts))
        out_dim += 1
    for _ in range(len(sub.op.idx_list), x.ndim):
        indices.append(0 if out_dim in dropped else slice(None))
        out_dim += 1
    return _same(node, x[tuple(indices)]) or False


@RULES.uncanonicalize()
@local_optimizer([MaxAndArgmax])
def local_max_and_argmax(fgraph, node):
    """``max_and_argmax(x, axis)`` whose index is unused becomes ``max(x, axis)``
    (Theano's name and pass).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.rewriting import out2in
    >>> x = tt.dmatrix("x")
    >>> g = FunctionGraph([x], [tt.max_and_argmax(x, 0)[0]])
    >>> _ = out2in(local_max_and_argmax)(g)
    >>> g.toposort()[0].op
    Max{axis=(0,)}
    """
    # max_and_argmax(x, axis)[0] (the index unused) -> max(x, axis)
    if fgraph is None or fgraph.clients.get(node.outputs[1]):
        return False
    axis = node.op.axis
    new = tm.max(node.inputs[0], axis=None if axis is None else list(axis))
    if new.type != node.outputs[0].type:
        return False
    return {node.outputs[0]: keep_trace(node.outputs[0], new, node.inputs)}
