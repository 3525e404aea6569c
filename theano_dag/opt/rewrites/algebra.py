"""Canonicalization: algebraic identities, broadcasts and a canonical argument order.

Each rule keeps the type of what it replaces (dtype and broadcast pattern: ``x * 0``
becomes zeros of the shape ``x * 0`` had, not a scalar 0). Rules tagged
``nonfinite_unsafe`` are exact for finite numbers but not for inf and NaN
(``inf - inf`` is NaN, not 0: ``x - x -> 0``, ``x * 0 -> 0``); FAST_RUN uses them, as
Theano does, and ``mode.excluding("nonfinite_unsafe")`` leaves them out.
"""

from __future__ import annotations

import weakref

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.graph.rewriting.pattern import PatternSub
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import (
    elemwise_of,
    fit,
    is_const,
    is_float,
    scalar_op,
    single_client,
    typed_constant,
)
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import Alloc, alloc, cast
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.shape import Reshape

__all__ = [
    "NONFINITE_UNSAFE",
    "commutative_key",
    "local_add_zero",
    "local_mul_one",
    "local_mul_zero",
    "local_div_one",
    "local_sub_zero",
    "local_sub_self",
    "local_neg_neg",
    "local_log_exp",
    "local_exp_log",
    "local_dimshuffle_dimshuffle",
    "local_reshape_reshape",
    "local_alloc_alloc",
    "local_elemwise_drop_broadcast",
    "local_commutative_canonical",
]

# Tag of rewrites that are exact for finite values only.
NONFINITE_UNSAFE = "nonfinite_unsafe"

# The elementwise ops whose arguments may be reordered (tracked by instance, so that a
# rule only meets the nodes it can change).
COMMUTATIVE_OPS = [tm.add, tm.mul, tm.maximum, tm.minimum, tm.eq, tm.neq, tm.and_, tm.or_, tm.xor]


def _replace_neutral(node, neutral, scalar_cls):
    """Drop the constant ``neutral`` inputs of an ``scalar_cls`` node (``x + 0``, ``x * 1``)."""
    if not isinstance(scalar_op(node), scalar_cls):
        return False
    ins = node.inputs
    keep = [i for i in ins if not is_const(i, neutral)]
    if len(keep) == len(ins):
        return False
    out = node.outputs[0]
    if not keep:
        new = typed_constant(neutral, out.dtype)
    elif len(keep) == 1:
        new = keep[0]
    else:
        new = node.op(*keep)
    new = fit(out, new, ins)
    return [new] if new is not None else False


@local_optimizer([tm.add])
def local_add_zero(fgraph, node):
    """Adding zero does nothing."""
    # x + 0 -> x
    return _replace_neutral(node, 0, ts.Add)


@local_optimizer([tm.mul])
def local_mul_one(fgraph, node):
    """Multiplying by one does nothing."""
    # x * 1 -> x
    return _replace_neutral(node, 1, ts.Mul)


@local_optimizer([tm.mul])
def local_mul_zero(fgraph, node):
    """A product with a zero factor is zeros of the product's shape."""
    # x * 0 -> zeros(shape of x * 0)
    if not isinstance(scalar_op(node), ts.Mul):
        return False
    if not any(is_const(i, 0) for i in node.inputs):
        return False
    out = node.outputs[0]
    new = fit(out, typed_constant(0, out.dtype), node.inputs)
    return [new] if new is not None else False


@local_optimizer([tm.true_div, tm.int_div])
def local_div_one(fgraph, node):
    """Dividing by one does nothing (floor division only for integers)."""
    # x / 1 -> x ; x // 1 -> x (integers)
    sop = scalar_op(node)
    if isinstance(sop, ts.TrueDiv):
        pass
    elif isinstance(sop, ts.IntDiv):
        if is_float(node.outputs[0]):
            return False  # x // 1 is floor(x) for floats
    else:
        return False
    x, y = node.inputs
    if not is_const(y, 1):
        return False
    new = fit(node.outputs[0], x, [y])
    return [new] if new is not None else False


@local_optimizer([tm.sub])
def local_sub_zero(fgraph, node):
    """Subtracting zero does nothing; subtracting from zero negates."""
    # x - 0 -> x ; 0 - x -> -x
    if not isinstance(scalar_op(node), ts.Sub):
        return False
    x, y = node.inputs
    out = node.outputs[0]
    if is_const(y, 0):
        new = fit(out, x, [y])
    elif is_const(x, 0) and out.dtype != "bool":
        new = fit(out, tm.neg(cast(y, out.dtype)), [x])
    else:
        return False
    return [new] if new is not None else False


@local_optimizer([tm.sub])
def local_sub_self(fgraph, node):
    """``x - x`` is zeros of the shape of ``x``."""
    # x - x -> zeros_like(x)
    if not isinstance(scalar_op(node), ts.Sub):
        return False
    x, y = node.inputs
    if x is not y:
        return False
    out = node.outputs[0]
    new = fit(out, typed_constant(0, out.dtype), [x])
    return [new] if new is not None else False


def _same_dtype_float(var):
    return is_float(var)


_X = {"pattern": "x", "constraint": _same_dtype_float}

# --x -> x   (floats: neg of a bool is an int8)
local_neg_neg = PatternSub((tm.neg, (tm.neg, _X)), "x", name="local_neg_neg")
# log(exp(x)) -> x
local_log_exp = PatternSub((tm.log, (tm.exp, _X)), "x", name="local_log_exp")


def _nan_below_zero(x):
    """``x`` where ``x >= 0``, NaN elsewhere (what ``exp(log(x))`` computes)."""
    return tm.switch(tm.ge(x, 0), x, typed_constant(np.nan, x.dtype, x.ndim))


# exp(log(x)) -> switch(x >= 0, x, nan)
local_exp_log = PatternSub((tm.exp, (tm.log, _X)), (_nan_below_zero, "x"), name="local_exp_log")


@local_optimizer([DimShuffle])
def local_dimshuffle_dimshuffle(fgraph, node):
    """Two DimShuffles in a row are one (``x.T.T`` becomes ``x``, once the identity
    DimShuffle left is removed)."""
    # dimshuffle{o2}(dimshuffle{o1}(x)) -> dimshuffle{o1[o2]}(x)
    inner = node.inputs[0].owner
    if inner is None or not isinstance(inner.op, DimShuffle):
        return False
    order1 = inner.op.new_order
    order = [o if o == "x" else order1[o] for o in node.op.new_order]
    x = inner.inputs[0]
    try:
        new = DimShuffle(x.broadcastable, order)(x)
    except ValueError:
        return False
    new = fit(node.outputs[0], new)
    return [new] if new is not None else False


@local_optimizer([Reshape])
def local_reshape_reshape(fgraph, node):
    """Only the last of two reshapes matters."""
    # reshape(reshape(x, s1), s2) -> reshape(x, s2)
    inner = node.inputs[0].owner
    if inner is None or not isinstance(inner.op, Reshape):
        return False
    new = node.op(inner.inputs[0], node.inputs[1])
    new = fit(node.outputs[0], new)
    return [new] if new is not None else False


@local_optimizer([Alloc])
def local_alloc_alloc(fgraph, node):
    """Broadcasting a broadcast value again: only the outer shape matters."""
    # alloc(alloc(v, *s1), *s2) -> alloc(v, *s2)
    inner = node.inputs[0].owner
    if inner is None or not isinstance(inner.op, Alloc):
        return False
    v = inner.inputs[0]
    new = fit(node.outputs[0], alloc(v, *node.inputs[1:]))
    return [new] if new is not None else False


def _broadcast_source(var):
    """``v`` when ``var`` is ``alloc(v, ...)`` or ``fill(m, v)`` (a broadcast of ``v``)."""
    owner = var.owner
    if owner is None:
        return None
    if isinstance(owner.op, Alloc):
        return owner.inputs[0]
    if isinstance(scalar_op(owner), ts.Second):
        return owner.inputs[1]
    return None


@local_optimizer([Elemwise])
def local_elemwise_drop_broadcast(fgraph, node):
    """An Elemwise broadcasts its inputs itself: an input that is only a broadcast of a
    smaller value (alloc or fill) is replaced by that value when the other inputs give
    the result its shape anyway (Owl: "repeating the input of an operation supporting
    broadcasting")."""
    # add(x, alloc(y, *x.shape)) -> add(x, y) ; mul(x, fill(x, y)) -> mul(x, y)
    sop = scalar_op(node)
    if sop is None or isinstance(sop, ts.Second) or len(node.inputs) < 2:
        return False
    out = node.outputs[0]
    ins = list(node.inputs)
    changed = False
    for k, inp in enumerate(ins):
        src = _broadcast_source(inp)
        if src is None or src.ndim > out.ndim or src.dtype != inp.dtype:
            continue
        trial = ins[:k] + [src] + ins[k + 1 :]
        others = [i for j, i in enumerate(trial) if j != k]
        if _broadcast_of(others, out.ndim) != out.type.broadcastable:
            continue
        ins = trial
        changed = True
    if not changed:
        return False
    try:
        new = node.op(*ins)
    except (TypeError, ValueError):
        return False
    new = fit(out, new)
    return [new] if new is not None else False


def _broadcast_of(variables, ndim):
    pattern = [True] * ndim
    for v in variables:
        off = ndim - v.ndim
        for d, b in enumerate(v.broadcastable):
            if not b:
                pattern[off + d] = False
    return tuple(pattern)


def commutative_key(var):
    """Sort key of the arguments of commutative ops: variables in creation order (so two
    orders of the same arguments sort alike and merge finds them), constants last."""
    base = var
    owner = var.owner
    if owner is not None and type(owner.op) is DimShuffle:
        base = owner.inputs[0]  # a broadcast constant sorts as the constant
    if isinstance(base, Constant):
        return (*_constant_key(base), var.ndim)
    return (0, int(var.auto_name[5:]))


# Constant -> the start of its sort key (its data never changes; dtype names are slow).
_CONSTANT_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _constant_key(c):
    try:
        return _CONSTANT_KEYS[c]
    except (KeyError, TypeError):
        data = np.asarray(c.data)
        key = (1, str(data.dtype), data.shape, data.tobytes())
        try:
            _CONSTANT_KEYS[c] = key
        except TypeError:  # not weakly referable: just not cached
            pass
        return key


def _reorderable(fgraph, node, order) -> bool:
    """Can ``node`` take the argument order ``order`` in place (``reorder_inputs``)?

    Not when an argument would change type at its position (broadcasting), nor for an
    op whose destroy or view map names input positions.
    """
    if node not in fgraph.apply_nodes:  # (a node LocalOptGroup made, not yet in the graph)
        return False
    op = node.op
    if getattr(op, "destroy_map", None) or getattr(op, "view_map", None):
        return False
    return all(a is b or a.type == b.type for a, b in zip(order, node.inputs))


@local_optimizer(COMMUTATIVE_OPS)
def local_commutative_canonical(fgraph, node):
    """Arguments of commutative ops in a canonical order, nested ``add``/``mul`` of the
    same dtype flattened, so that merge finds more common subexpressions."""
    # add(add(a, b), c) -> add(a, b, c) ; mul(y, x) -> mul(x, y) ; eq(y, x) -> eq(x, y)
    sop = scalar_op(node)
    if sop is None or not sop.commutative or len(node.outputs) != 1:
        return False
    out = node.outputs[0]
    ins = list(node.inputs)
    flattened = False
    if sop.nin == -1 and sop.associative:
        flat = []
        for i in ins:
            inner = i.owner
            if scalar_op(inner) == sop and i.dtype == out.dtype and single_client(fgraph, i):
                flat.extend(inner.inputs)
                flattened = True
            else:
                flat.append(i)
        ins = flat
    if not flattened and len(ins) == 2:
        # The common binary case, without sorted(): a stable sort keeps equal keys.
        a, b = ins
        if commutative_key(a) <= commutative_key(b):
            return False
        order = [b, a]
    else:
        order = sorted(ins, key=commutative_key)
    if not flattened:
        if all(a is b for a, b in zip(order, ins)):
            return False
        if _reorderable(fgraph, node, order):
            # The same node with its arguments moved: no new node, no client to rewire.
            fgraph.reorder_inputs(node, order, reason=local_commutative_canonical)
            return True
        # A permutation of a commutative op's arguments gives the same output type:
        # build the node directly (make_node's type inference is the costly part).
        return Apply(node.op, order, [out.type()]).outputs
    new = fit(out, elemwise_of(sop)(*order))
    return [new] if new is not None else False


_CANONICALIZE = [
    (local_add_zero, ("fast_compile",)),
    (local_mul_one, ("fast_compile",)),
    (local_mul_zero, (NONFINITE_UNSAFE,)),
    (local_div_one, ("fast_compile",)),
    (local_sub_zero, ()),
    (local_sub_self, (NONFINITE_UNSAFE,)),
    (local_neg_neg, ("fast_compile",)),
    (local_log_exp, ()),
    (local_exp_log, ()),
    (local_dimshuffle_dimshuffle, ("fast_compile",)),
    (local_reshape_reshape, ()),
    (local_alloc_alloc, ()),
    (local_elemwise_drop_broadcast, ()),
    (local_commutative_canonical, ()),
]
for _rule, _tags in _CANONICALIZE:
    RULES.add("canonicalize", _rule, *_tags)
