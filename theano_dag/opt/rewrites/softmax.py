"""Stable softmax forms: log-softmax, softmax, cross-entropies and log-sum-exp.

``softmax(x)`` underflows to 0 where a logit is far below the largest one, and the
written-out ``exp(x) / sum(exp(x))`` overflows to ``inf / inf`` above ``x = 709``
(``88`` in float32). The rewrites here recognise these expressions, *and the shapes
``theano_dag.grad`` builds from them*, and compute them with ``Softmax``,
``LogSoftmax``, ``SoftmaxGrad`` and the fused cross-entropy ops, which never form the
intermediate that overflows or the ``0 / 0`` of a gradient divided by an underflowed
softmax. They may change results, always for the better.

The gradients come in two steps. The gradient of a written-out softmax (``exp(x)``
times the chain rule through the division and the sum) is recognised as the
``SoftmaxGrad`` of a ``Softmax`` (``local_softmax_graph_grad``); then the gradient of a
``log`` of a softmax, which divides by the softmax, is simplified with that division
cancelled (``local_logsoftmax_grad``), or fused with a one-hot cross-entropy
(``local_crossentropy_softmax_grad``). So every form below ends in the same stable
graph, whichever way the softmax was written.
"""

from __future__ import annotations

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import Constant
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import (
    const_value,
    fit,
    is_float,
    is_op,
    scalar_op,
    typed_constant,
)
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.arrays import MaxAndArgmax
from theano_dag.tensor.elemwise import CAReduce, DimShuffle, Elemwise, Sum
from theano_dag.tensor.nnet import nnet
from theano_dag.tensor.shape import shape_padleft
from theano_dag.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    IncSubtensor,
    Subtensor,
)
from theano_dag.tensor.type import discrete_dtypes

stabilize = RULES.stabilize

__all__ = [
    "local_log_sum_exp",
    "local_exp_over_sum_exp",
    "local_log_softmax",
    "local_softmax_graph",
    "local_softmax_graph_grad",
    "local_logsoftmax_grad",
    "local_crossentropy_softmax",
    "local_crossentropy_softmax_grad",
    "local_advanced_indexing_crossentropy_onehot",
    "local_advanced_indexing_crossentropy_onehot_grad",
    "local_crossentropy_softmax_only",
    "local_useless_crossentropy_softmax_1hot_with_bias_dx_alloc",
    "local_argmax_pushdown",
    "local_max_and_argmax",
]


def _exp_arg(var):
    """``x`` when ``var`` is ``exp(x)``."""
    owner = var.owner
    return owner.inputs[0] if owner is not None and scalar_op(owner) == ts.exp else None


# The most variables ``_factors`` looks at: products are flat after canonicalize, but
# shared sub-products are not (a DAG of products would be walked as its tree).
_MAX_FACTORS = 32
_PRODUCT = (ts.Mul, ts.TrueDiv, ts.Neg)


def _factors(var):
    """``(negated, num, den)``: ``var`` is ``±prod(num) / prod(den)`` through ``mul``,
    ``true_div``, ``neg`` and ``fill`` nodes of its dtype (whatever their other clients;
    the product rebuilt may broadcast where ``var`` does not); None for a product of
    more than ``_MAX_FACTORS`` nodes and factors."""
    negated, num, den, todo = False, [], [], [(var, True)]
    for _ in range(_MAX_FACTORS):
        if not todo:
            return negated, num, den
        v, up = todo.pop()
        sop = scalar_op(v.owner)
        if v.dtype == var.dtype and isinstance(sop, ts.Mul):
            todo.extend((i, up) for i in reversed(v.owner.inputs))
        elif v.dtype == var.dtype and isinstance(sop, ts.TrueDiv):
            todo.extend([(v.owner.inputs[1], not up), (v.owner.inputs[0], up)])
        elif v.dtype == var.dtype and isinstance(sop, ts.Neg):
            negated = not negated
            todo.append((v.owner.inputs[0], up))
        elif v.dtype == var.dtype and isinstance(sop, ts.Second):
            todo.append((v.owner.inputs[1], up))  # a factor broadcast by fill: the factor
        else:
            (num if up else den).append(v)
    return None


def _product(negated, num, den, dtype):
    """``±prod(num) / prod(den)`` (the inverse of ``_factors``)."""
    top = tm.mul(*num) if len(num) > 1 else num[0] if num else typed_constant(1, dtype)
    if den:
        top = tm.true_div(top, tm.mul(*den) if len(den) > 1 else den[0])
    return tm.neg(top) if negated else top


def _remove(factors, var):
    """``factors`` without one occurrence of ``var`` (by identity), or None."""
    for k, f in enumerate(factors):
        if f is var:
            return factors[:k] + factors[k + 1 :]
    return None


def _same_factors(a, b):
    """Whether the lists ``a`` and ``b`` hold the same variables (by identity)."""
    if len(a) != len(b):
        return False
    rest = list(b)
    for v in a:
        rest = _remove(rest, v)
        if rest is None:
            return False
    return True


def _coefficient(negated, num, den):
    """``(c, num, den)``: the constant factors of ``±prod(num) / prod(den)`` multiplied
    into the array ``c``, and the other factors."""
    c = np.float64(-1.0 if negated else 1.0)
    with np.errstate(all="ignore"):
        for v in num:
            if isinstance(v, Constant):
                c = c * v.data
        for v in den:
            if isinstance(v, Constant):
                c = c / v.data
    keep = [[v for v in vs if not isinstance(v, Constant)] for vs in (num, den)]
    return c, keep[0], keep[1]


def _same_product(a, b):
    """Whether the products ``a`` and ``b`` (``(negated, num, den)``) are the same: the
    same variables, and constants of the same product (the gradient folds a sign into
    a constant of one of them)."""
    ca, na, da = _coefficient(*a)
    cb, nb, db = _coefficient(*b)
    if not (_same_factors(na, nb) and _same_factors(da, db)):
        return False
    try:
        ca, cb = np.broadcast_arrays(ca, cb)
    except ValueError:
        return False
    return bool(np.array_equal(ca, cb))


def _like(var, sm):
    """``var`` spread over ``sm``'s shape where it broadcasts and ``sm`` does not (the
    gradient a softmax receives has the softmax's shape). A ``var`` of fewer dimensions
    (the constant 1 left of ``dy`` when the cost was ``sum(softmax)``) is padded first."""
    if var.ndim < sm.ndim:
        var = shape_padleft(var, sm.ndim - var.ndim)
    if any(v and not s for v, s in zip(var.type.broadcastable, sm.type.broadcastable)):
        return tb.second(sm, var)
    return var


# -- log-sum-exp ----------------------------------------------------------------------


def _shifted_by_a_max(var, depth=4):
    """Whether ``var`` is computed (within ``depth`` elementwise steps) from a max
    reduction: the argument of exp in a stabilized log-sum-exp, which must not be
    rewritten again."""
    owner = var.owner
    if owner is None or depth == 0:
        return False
    if isinstance(owner.op, CAReduce):
        return owner.op.scalar_op == ts.maximum
    if not isinstance(owner.op, (Elemwise, DimShuffle)):
        return False
    return any(_shifted_by_a_max(i, depth - 1) for i in owner.inputs)


@stabilize()
@local_optimizer([tm.log])
def local_log_sum_exp(fgraph, node):
    """``log(sum(exp(x), axis))`` as ``m + log(sum(exp(x - m), axis))`` with ``m`` the
    max over ``axis`` (``tensor.logsumexp``), which cannot overflow; ``log(mean(exp(x),
    axis))`` as that less ``log(n)``, ``n`` the count."""
    # log(sum(exp(x), axis)) -> logsumexp(x, axis) ; also with keepdims=True
    # log(sum(exp(x), axis) / n) -> logsumexp(x, axis) - log(n) ; n a count (a mean)
    if scalar_op(node) != ts.log:
        return False
    (arg,) = node.inputs
    new = _log_sum_exp_of(arg)
    div = arg.owner
    if new is None and isinstance(scalar_op(div), ts.TrueDiv) and _a_count(div.inputs[1]):
        new = _log_sum_exp_of(div.inputs[0])
        if new is not None:
            new = new - tm.log(div.inputs[1])
    return False if new is None else fit(node.outputs[0], new)


def _log_sum_exp_of(arg):
    """``tensor.logsumexp`` of ``x`` where ``arg`` is ``sum(exp(x), axis)`` (or with
    keepdims=True), else None."""
    outer = None
    s = arg.owner
    if s is not None and isinstance(s.op, DimShuffle) and not s.op.drop:
        outer, s = s.op, s.inputs[0].owner
    if s is None or type(s.op) is not Sum:
        return None
    x = _exp_arg(s.inputs[0])
    inner = s.inputs[0].owner
    if x is None and inner is not None and isinstance(inner.op, DimShuffle):
        # A sum over a broadcastable axis is canonicalized to a DimShuffle that drops it,
        # then a Sum over the others (``sum(exp(x), axis=(0, 1), keepdims=True)`` for an
        # ``x`` whose axis 1 is broadcastable): exp commutes with the DimShuffle.
        y = _exp_arg(inner.inputs[0])
        x = None if y is None else inner.op(y)
    if x is None or not is_float(x) or _shifted_by_a_max(x):
        return None
    new = tm.logsumexp(x, axis=s.op.axis)
    return new if outer is None else outer(new)


def _a_count(var, depth=6):
    """Whether ``var`` is a positive constant or a count: lengths of arrays and their
    products, cast and broadcast (a mean's divisor). ``log(s / n)`` is ``log(s) -
    log(n)`` for every ``s >= 0`` and ``n > 0`` then, infinities and NaN alike; a count
    of 0 is a mean over an empty axis, NaN either way (``logsumexp`` is -inf there)."""
    if isinstance(var, Constant):
        return bool(np.all(np.asarray(var.data) > 0))
    owner = var.owner
    if owner is None or depth == 0:
        return False
    if type(owner.op) in (tb.Shape_i, tb.Shape):
        return True
    if isinstance(owner.op, DimShuffle) or isinstance(scalar_op(owner), (ts.Cast, ts.Mul)):
        return all(_a_count(i, depth - 1) for i in owner.inputs)
    return False


@stabilize()
@local_optimizer([tm.mul], needs=[type(ts.exp)])
def local_exp_over_sum_exp(fgraph, node):
    """The gradient of ``log(sum(exp(x), axis))``, ``exp(x) * (g / sum(exp(x)))``, with
    both exponentials shifted by the max of ``x`` (the ratio is the same, and neither
    overflows)."""
    # exp(x) * dimshuffle(g / sum(exp(x), axis)) -> exp(x - m) * dimshuffle(g / sum(exp(x - m)))
    # (and with -(g / sum(exp(x))), or a sum with keepdims=True, the same)
    if not isinstance(scalar_op(node), ts.Mul) or len(node.inputs) != 2:
        return False
    for e, d in (node.inputs, node.inputs[::-1]):
        x = _exp_arg(e)
        ds = d.owner
        if x is None or ds is None or not isinstance(ds.op, DimShuffle):
            continue
        div = ds.inputs[0].owner
        negated = isinstance(scalar_op(div), ts.Neg)  # a cost of -log(sum(exp(x)))
        if negated:
            div = div.inputs[0].owner
        if not isinstance(scalar_op(div), ts.TrueDiv):
            continue
        g, total = div.inputs
        s, kept = total.owner, None
        if s is not None and isinstance(s.op, DimShuffle) and not s.op.drop:
            s, kept = s.inputs[0].owner, s.op  # with keepdims=True
        if s is None or type(s.op) is not Sum:
            continue
        axis, x_axis, dropped = s.op.axis, s.op.axis, None
        if s.inputs[0] is not e:
            # the Sum of a DimShuffle of e that drops broadcastable axes (a sum over a
            # broadcastable axis, canonicalized): the max is over e's axes that the summed
            # ones come from, and over the dropped ones (of length 1)
            dropped = s.inputs[0].owner
            if dropped is None or not isinstance(dropped.op, DimShuffle):
                continue
            order = dropped.op.new_order
            if dropped.inputs[0] is not e or any(order[k] == "x" for k in axis):
                continue
            x_axis = tuple(sorted({order[k] for k in axis} | set(dropped.op.drop)))
        if not is_float(x) or _shifted_by_a_max(x):
            return False
        # the terms of tensor.logsumexp (its value's shift merges with theirs): their
        # ratio is the softmax's limit at a +inf, where exp(x) / sum was inf / inf
        shifted, _ = tm._log_sum_exp_terms(x, x_axis)
        total = tm.sum(shifted if dropped is None else dropped.op(shifted), axis=axis)
        ratio = g / (kept(total) if kept is not None else total)
        return fit(node.outputs[0], shifted * ds.op(tm.neg(ratio) if negated else ratio))
    return False


# The elementwise ops ``_ScaleDegree`` walks through (of inputs of any degree).
_SQR, _RECIPROCAL, _SECOND = type(ts.sqr), type(ts.reciprocal), type(ts.second)
_SCALING = (ts.Mul, ts.TrueDiv, ts.Neg, _SQR, _RECIPROCAL, ts.Add, ts.Sub, _SECOND)
# The most nodes computed from an exp that ``_ScaleDegree`` looks at (a product of a few
# sums of it): past them, it gives up.
_MAX_SCALE_NODES = 64


class _ScaleDegree:
    """How values depend on the scale of ``e = exp(x)``: ``degree(v)`` is ``k`` when
    ``v`` computed from ``c * e`` instead of ``e`` is ``c**k * v``, for a ``c > 0`` that
    may differ along the axes outside ``axes`` (those the sums of the walk reduce); it
    raises ``_NotScaled`` where that is not known (``log(sum(e))``, sums over different
    axes, a transposition, an op other than those below). Values are walked through
    products, quotients, sums of terms of one degree, ``fill``, sums over ``axes`` and
    DimShuffles that keep the order of the axes; values that do not depend on ``e``
    have degree 0, as has an elementwise op of values of degree 0."""

    def __init__(self, fgraph, e):
        self.e = e
        self.axes = None  # x's axes the sums reduce, set by the first
        self.memo = {e: (1, tuple(range(e.ndim)))}  # var -> (degree, x's axis per dim)
        self.region = []  # the nodes that depend on e, inputs first
        # The nodes computed from e (a few, or the walk gives up).
        self.below, todo = set(), [e]
        while todo:
            for client, _ in fgraph.clients.get(todo.pop(), ()):
                if type(client) is not str and client not in self.below:
                    if len(self.below) == _MAX_SCALE_NODES:
                        raise _NotScaled
                    self.below.add(client)
                    todo.extend(client.outputs)

    def degree(self, var):
        return self._walk(var)[0]

    def _walk(self, var):
        got = self.memo.get(var)
        if got is None:
            node = var.owner
            got = (0, None)  # independent of e
            if node in self.below:
                got = self._apply(node, [self._walk(i) for i in node.inputs])
                self.region.append(node)
            self.memo[var] = got
        return got

    def _apply(self, node, ins):
        op = node.op
        if isinstance(op, DimShuffle):
            ((k, amap),) = ins
            kept = [amap[i] for i in op.new_order if i != "x"]
            if [a for a in kept if a is not None] != sorted(a for a in kept if a is not None):
                raise _NotScaled  # a transposition
            return k, tuple(None if i == "x" else amap[i] for i in op.new_order)
        if type(op) is Sum:
            ((k, amap),) = ins
            summed = range(len(amap)) if op.axis is None else op.axis
            axes = frozenset(amap[i] for i in summed)
            if None in axes or self.axes is not None and axes != self.axes:
                raise _NotScaled
            self.axes = axes
            return k, tuple(a for i, a in enumerate(amap) if i not in summed)
        sop = scalar_op(node)
        if sop is None:
            raise _NotScaled
        if all(k == 0 for k, _ in ins):
            return 0, self._merge(ins)
        if not isinstance(sop, _SCALING):
            raise _NotScaled
        amap = self._merge(ins)
        degs = [k for k, _ in ins]
        if isinstance(sop, ts.Mul):
            return sum(degs), amap
        if isinstance(sop, ts.TrueDiv):
            return degs[0] - degs[1], amap
        if isinstance(sop, ts.Neg):
            return degs[0], amap
        if isinstance(sop, _SQR):
            return 2 * degs[0], amap
        if isinstance(sop, _RECIPROCAL):
            return -degs[0], amap
        if isinstance(sop, _SECOND):
            return degs[1], amap
        # add, sub: terms of one degree (a term of zeros, a gradient's fill, has any)
        degs = {k for k, i in zip(degs, node.inputs) if not _zeros(i)}
        if len(degs) != 1:
            raise _NotScaled
        return degs.pop(), amap

    def _merge(self, ins):
        """The axis map of an elementwise node's output: x's axis per dim. An input of
        nonzero degree broadcast along an axis that no sum reduces is not known (its
        scale is not that of the values it meets there)."""
        out = [None] * max(len(m) for _, m in ins if m is not None)
        for _, amap in ins:
            for d, a in enumerate(amap or ()):
                if a is not None:
                    if out[d] not in (None, a):
                        raise _NotScaled
                    out[d] = a
        axes = self.axes or frozenset()
        for k, amap in ins:
            if k and any(a is None and o not in (None, *axes) for a, o in zip(amap, out)):
                raise _NotScaled
        return tuple(out)


class _NotScaled(Exception):
    pass


def _zeros(var):
    """Whether ``var`` is zeros: a constant, ``fill(a, 0)``, or the negation of one."""
    while True:
        sop = scalar_op(var.owner)
        if isinstance(sop, ts.Neg):
            var = var.owner.inputs[0]
        elif isinstance(sop, _SECOND):
            var = var.owner.inputs[1]
        else:
            return isinstance(var, Constant) and not np.any(var.data)


def _exp_below(var):
    """An ``exp(x)`` that ``var`` is computed from through products, sums and
    DimShuffles (the nearest, within a few nodes), or None."""
    todo, seen = [var], 0
    while todo and seen < 16:
        v = todo.pop(0)
        seen += 1
        if _exp_arg(v) is not None:
            return v
        owner = v.owner
        if owner is not None and (
            isinstance(owner.op, DimShuffle)
            or type(owner.op) is Sum
            or isinstance(scalar_op(owner), _SCALING)
        ):
            todo.extend(owner.inputs)
    return None


@RULES.specialize("stabilize")
@local_optimizer([tm.mul, tm.true_div], needs=[type(ts.exp)])
def local_scale_free_exp(fgraph, node):
    """A product of ``exp(x)`` and sums of it that does not change when ``exp(x)`` is
    scaled (``exp(x) * (w / s - t / s**2)`` with ``s = sum(exp(x))``, ``t = sum(exp(x) *
    w)``: the second derivative of a log-sum-exp) computed from ``exp(x - m)``, ``m`` the
    max of ``x`` over the sums' axes: exp(x) overflowed at large ``x`` (inf / inf) and
    its sums underflowed at very negative ``x`` (0 / 0). After the first derivative's own
    rewrite (``local_exp_over_sum_exp``) and the softmax's, whose forms it leaves alone."""
    # exp(x) * f(exp(x), sum(exp(x) * ..)) of degree 0 -> the same of exp(x - m)
    presence = getattr(fgraph, "op_presence", None)
    if presence is not None and not presence.counts.get(Sum):
        return False
    e = _exp_below(node.outputs[0])
    if e is None:
        return False
    x = _exp_arg(e)
    if not is_float(x) or _shifted_by_a_max(x):
        return False
    try:
        walk = _ScaleDegree(fgraph, e)
        if walk.degree(node.outputs[0]) != 0 or walk.axes is None:
            return False
    except _NotScaled:
        return False
    shifted, _ = tm._log_sum_exp_terms(x, tuple(sorted(walk.axes)))
    new = {e: shifted}
    for n in walk.region:  # inputs first: every input is made
        outs = n.op.make_node(*[new.get(i, i) for i in n.inputs]).outputs
        new.update(zip(n.outputs, outs))
    return fit(node.outputs[0], new[node.outputs[0]])


# -- softmax and log-softmax ----------------------------------------------------------

# Indexings that commute with an elementwise log: log(a[idx]) == log(a)[idx].
_INDEXINGS = (Subtensor, AdvancedSubtensor, AdvancedSubtensor1, DimShuffle)


@stabilize("local_logsoftmax", "fast_compile")  # Theano's name and tags
@local_optimizer([tm.log], fit=fit)
def local_log_softmax(fgraph, node):
    """``log(softmax(x))`` as one ``LogSoftmax``, which does not underflow, also when
    the softmax is indexed first (``log(softmax(x)[arange(n), y])``)."""
    # log(softmax(x, axis)) -> log_softmax(x, axis)
    # log(softmax(x)[idx]) -> log_softmax(x)[idx] (any indexing or dimshuffle between)
    if scalar_op(node) != ts.log:
        return False
    lifted = []
    sm = node.inputs[0].owner
    while sm is not None and isinstance(sm.op, _INDEXINGS) and len(lifted) < 4:
        lifted.append(sm)
        sm = sm.inputs[0].owner
    if sm is None or type(sm.op) is not nnet.Softmax:
        return False
    new = nnet.LogSoftmax(sm.op.axis)(sm.inputs[0])
    for indexing in reversed(lifted):
        new = indexing.op(new, *indexing.inputs[1:])
    return new


def _sum_axis_keepdims(var):
    """``(x, axis)`` when ``var`` is ``sum(x, axis=axis, keepdims=True)`` over one axis
    (or the sum of a vector, broadcast back)."""
    ds = var.owner
    if ds is None or not isinstance(ds.op, DimShuffle):
        return None
    s = ds.inputs[0].owner
    if s is None or type(s.op) is not Sum:
        return None
    x = s.inputs[0]
    if s.op.axis is None and x.ndim == 1:
        axis = 0
    elif s.op.axis is not None and len(s.op.axis) == 1:
        (axis,) = s.op.axis
    else:
        return None
    kept = [d for d in range(x.ndim) if d != axis]
    expected = tuple("x" if d == axis else kept.index(d) for d in range(x.ndim))
    if ds.op.new_order != expected:
        return None
    return x, axis


def _exp_total(s, e):
    """The axis when ``s`` is ``sum(e, axis, keepdims=True)``, else None."""
    found = _sum_axis_keepdims(s)
    return found[1] if found is not None and found[0] is e else None


@stabilize()
@local_optimizer([tm.true_div], fit=fit)
def local_softmax_graph(fgraph, node):
    """The written-out softmax (``nnet.softmax_graph``) becomes one stable ``Softmax``,
    also inside a product (``w * exp(x) / sum(exp(x))``)."""
    # exp(x) / sum(exp(x), axis, keepdims=True) -> softmax(x, axis)
    # (num * exp(x)) / (den * sum(exp(x), axis, keepdims=True)) -> num * softmax(x, axis) / den
    if not isinstance(scalar_op(node), ts.TrueDiv):
        return False
    e, s = node.inputs
    if _exp_arg(e) is not None and _exp_total(s, e) is not None:
        negated, num, den = False, [e], [s]
    elif not any(_sum_axis_keepdims(d) for d in (s, *(s.owner.inputs if is_op(s, ts.Mul) else ()))):
        return False  # (cheap: no sum in the denominator of a canonical product)
    else:
        found = _factors(node.outputs[0])
        if found is None:
            return False
        negated, num, den = found
    for s in den:
        found = _sum_axis_keepdims(s)
        e = found[0] if found is not None else None
        if e is None or _exp_arg(e) is None:
            continue
        rest = _remove(num, e)
        # one sum per exp: s * s in the denominator (the gradient of e / s) is
        # recognised whole by local_softmax_graph_grad
        if rest is None or sum(d is s for d in den) != 1:
            continue
        x = _exp_arg(e)
        if not is_float(x) or x.ndim == 0:
            return False
        sm = nnet.softmax(x, _exp_total(s, e))
        return _product(negated, [sm, *rest], _remove(den, s), sm.dtype)
    return False


def _grad_of_division(e, term):
    """How ``e * term`` enters the gradient of ``e / s`` (``s = sum(e, axis, keepdims)``,
    ``term`` a product ``(negated, num, den)``): ``("direct", axis, dy)`` for
    ``e * dy / s``, ``("sum", axis, dy)`` for ``e * sum(-(dy * e) / (s * s), axis,
    keepdims)``, ``dy`` a product; else None. (A ``term`` ``None`` is skipped.)"""
    if term is None:
        return None
    if term[0] == "direct":  # softmax(x) * dy, found by the caller
        return term
    negated, num, den = term
    inner = [_sum_axis_keepdims(v) for v in num]
    sums = [k for k, found in enumerate(inner) if found is not None]
    if len(sums) == 1 and all(
        isinstance(v, Constant) and all(v.broadcastable) for v in num + den if v is not num[sums[0]]
    ):  # ±c * sum(-(dy * e) / (s * s), axis, keepdims=True)
        c_num = [v for v in num if v is not num[sums[0]]]
        inner, axis = inner[sums[0]]
        found = _factors(inner)
        if found is None:
            return None
        neg_c, num, den_c = found
        rest = _remove(num, e)
        if rest is None or any(v is e for v in rest):
            return None
        for s in den_c:
            if _exp_total(s, e) == axis and sum(d is s for d in den_c) == 2:
                den_c = _remove(_remove(den_c, s), s)
                return "sum", axis, (negated == neg_c, rest + c_num, den_c + den)
        return None
    for s in den:
        axis = _exp_total(s, e)
        if axis is not None and not any(v is e for v in num):
            return "direct", axis, (negated, num, _remove(den, s))
    return None


def _times_exp(product, e):
    """``product`` (``(negated, num, den)``) as ``e`` times a product, or as
    ``("direct", axis, dy)`` when it is ``softmax(x) * dy`` (``e = exp(x)``); or None."""
    if product is None:
        return None
    negated, num, den = product
    rest = _remove(num, e)
    if rest is not None:
        return negated, rest, den
    x = _exp_arg(e)
    for k, v in enumerate(num):
        if v.owner is not None and type(v.owner.op) is nnet.Softmax and v.owner.inputs[0] is x:
            return "direct", v.owner.op.axis % v.ndim, (negated, num[:k] + num[k + 1 :], den)
    return None


def _softmax_grad_of(e, terms):
    """``(SoftmaxGrad(dy, softmax(x)), used)`` when two of ``terms`` (products, each
    times ``e = exp(x)``) are the gradient of ``e / sum(e, axis, keepdims=True)``
    (``used`` their indices), else None."""
    found = [_grad_of_division(e, t) for t in terms]
    direct = [(k, t) for k, t in enumerate(found) if t and t[0] == "direct"]
    through = [(k, t) for k, t in enumerate(found) if t and t[0] == "sum"]
    for kd, (_, axis, dy) in direct:
        for ks, (_, axis2, dy2) in through:
            if axis == axis2 and _same_product(dy, dy2):
                sm = nnet.softmax(_exp_arg(e), axis)
                dy = _like(_product(*dy, sm.dtype), sm)
                return nnet.softmax_grad(dy, sm, axis), (kd, ks)
    return None


def _product_or_softmax(var):
    """Whether ``var`` may be a term of a softmax's gradient: a product, or a ``Softmax``
    (the gradient's ``e * dy / s`` when ``dy`` is 1, already rewritten)."""
    owner = var.owner
    return is_op(var, _PRODUCT) or (owner is not None and type(owner.op) is nnet.Softmax)


@stabilize()
@local_optimizer([tm.mul, tm.add], needs=[type(ts.exp)])
def local_softmax_graph_grad(fgraph, node):
    """The gradient of a written-out softmax ``exp(x) / sum(exp(x))``, which computes
    ``inf / inf`` at large logits, as the ``SoftmaxGrad`` of a ``Softmax``."""
    # exp(x) * (dy / s + sum(-(dy * exp(x)) / (s * s), axis, keepdims=True))
    #   -> softmax_grad(dy, softmax(x))      with s = sum(exp(x), axis, keepdims=True)
    # exp(x) * dy / s + exp(x) * sum(...)   (the same, distributed) -> the same
    sop = scalar_op(node)
    ins = node.inputs
    if isinstance(sop, ts.Mul):
        for i, e in enumerate(ins):
            if _exp_arg(e) is None:
                continue
            for j, a in enumerate(ins):
                if j == i or not isinstance(scalar_op(a.owner), ts.Add):
                    continue
                terms = a.owner.inputs
                found = _softmax_grad_of(e, [_factors(t) for t in terms])
                if found is None:
                    continue
                new, used = found
                rest = [t for k, t in enumerate(terms) if k not in used]
                if rest:  # other uses of exp(x) than the softmax's
                    new = new + e * (tm.add(*rest) if len(rest) > 1 else rest[0])
                others = [v for k, v in enumerate(ins) if k not in (i, j)]
                return fit(node.outputs[0], tm.mul(new, *others) if others else new, ins)
    elif isinstance(sop, ts.Add) and sum(map(_product_or_softmax, ins)) >= 2:
        # (cheap first: a term e * ... with e = exp(x), the product flat after canonicalize)
        if all(_exp_arg(i) is None for t in ins if is_op(t, ts.Mul) for i in t.owner.inputs):
            return False
        products = [_factors(t) for t in ins]
        exps = {id(v): v for p in products if p for v in p[1] if _exp_arg(v) is not None}
        for e in exps.values():
            # e * dy / s may be softmax(x) * dy already (local_softmax_graph)
            terms = [_times_exp(p, e) for p in products]
            found = _softmax_grad_of(e, terms)
            if found is None:
                continue
            new, used = found
            rest = [t for k, t in enumerate(ins) if k not in used]
            return fit(node.outputs[0], tm.add(new, *rest) if rest else new, ins)
    return False


def _softmax_of(var):
    """``(x, b, axis)`` when ``var`` is ``softmax(x + b, axis)`` (``b`` a row bias of a
    matrix, or None): a ``Softmax`` or the softmax output of the fused cross-entropy."""
    owner = var.owner
    if owner is None:
        return None
    if type(owner.op) is nnet.Softmax:
        found = _softmax_bias(owner)
        x, b = found if found is not None else (owner.inputs[0], None)
        return x, b, owner.op.axis % var.ndim
    if type(owner.op) is nnet.CrossentropySoftmaxArgmax1HotWithBias and var is owner.outputs[1]:
        x, b, _ = owner.inputs
        return x, None if const_value(b) == 0 else b, 1
    return None


def _same_softmax(a, b):
    """Whether ``a`` and ``b`` are the same softmax (computed by one node or two)."""
    if a is b:
        return True
    fa, fb = _softmax_of(a), _softmax_of(b)
    if fa is None or fb is None:
        return False
    return fa[0] is fb[0] and fa[1] is fb[1] and fa[2] == fb[2]


_INC_OF = {
    IncSubtensor: Subtensor,
    AdvancedIncSubtensor1: AdvancedSubtensor1,
    AdvancedIncSubtensor: AdvancedSubtensor,
}


def _over_softmax(dy, sm):
    """``n`` when ``dy`` is ``n / sm`` (a product with ``sm`` in its denominator), or
    an increment of zeros by ``v / sm[idx]`` at ``idx`` (then ``n`` increments zeros by
    ``v``): the gradient of ``log(sm)`` or of ``log(sm[idx])``. Else None."""
    negated, num, den = _factors(dy) or (False, [], [])
    for d in den:
        if _same_softmax(d, sm):
            return _product(negated, num, _remove(den, d), dy.dtype)
    inc = dy.owner
    if inc is None or type(inc.op) not in _INC_OF or const_value(inc.inputs[0]) != 0:
        return None
    zeros, v, *idx = inc.inputs
    negated, num, den = _factors(v) or (False, [], [])
    for d in den:
        sub = d.owner
        if (
            sub is not None
            and type(sub.op) is _INC_OF[type(inc.op)]
            and getattr(sub.op, "idx_list", None) == getattr(inc.op, "idx_list", None)
            and len(sub.inputs) == len(inc.inputs) - 1
            and all(p is q for p, q in zip(sub.inputs[1:], idx))
            and _same_softmax(sub.inputs[0], sm)
        ):
            return inc.op(zeros, _product(negated, num, _remove(den, d), v.dtype), *idx)
    return None


@stabilize("fast_compile")
@local_optimizer([nnet.SoftmaxGrad])
def local_logsoftmax_grad(fgraph, node):
    """The gradient of ``log(softmax(x))``, ``softmax_grad(dy / sm, sm)``, as
    ``dy - sm * sum(dy)``: no ``0 / 0`` where the softmax underflows."""
    # softmax_grad(dy / sm, sm) -> dy - sm * sum(dy, axis, keepdims=True)
    # softmax_grad(inc(zeros, v / sm[idx], idx), sm) -> n - sm * sum(n)   n = inc(zeros, v, idx)
    dy, sm = node.inputs
    n = _over_softmax(dy, sm)
    if n is None or not is_float(n):
        return False
    n = _like(n, sm)
    new = n - sm * tm.sum(n, axis=node.op.axis, keepdims=True)
    return fit(node.outputs[0], new, [sm])


def _softmax_bias(sm_node, op_class=nnet.Softmax):
    """``(x, b)`` for a 2-d ``softmax(x + b)`` over the last axis (b a row bias, or None);
    ``op_class`` ``LogSoftmax`` for ``log_softmax(x + b)``."""
    if type(sm_node.op) is not op_class or sm_node.inputs[0].ndim != 2:
        return None
    if sm_node.op.axis not in (-1, 1):
        return None
    return _split_bias(sm_node.inputs[0])


def _split_bias(z):
    """``(x, b)`` for the 2-d ``z = x + b`` (b a row bias), else ``(z, None)``."""
    add = z.owner
    if not isinstance(scalar_op(add), ts.Add):
        return z, None
    # x + b1 + ... + bk, the b's row biases (vectors broadcast over the rows): the bias
    # is their sum.
    rows, biases = [], []
    for inp in add.inputs:
        (biases if _row_bias(inp, z.dtype) else rows).append(inp)
    if len(rows) != 1 or not biases or rows[0].ndim != 2 or rows[0].dtype != z.dtype:
        return z, None
    vectors = [b.owner.inputs[0] for b in biases]
    return rows[0], vectors[0] if len(vectors) == 1 else tm.add(*vectors)


def _row_bias(var, dtype):
    """Whether ``var`` is a vector of ``dtype`` broadcast over rows (``v.dimshuffle('x', 0)``)."""
    return (
        var.owner is not None
        and isinstance(var.owner.op, DimShuffle)
        and var.owner.op.new_order == ("x", 0)
        and var.owner.inputs[0].dtype == dtype
    )


@stabilize(  # Theano's names and tag
    "crossentropy_to_crossentropy_with_softmax_with_bias",
    "crossentropy_to_crossentropy_with_softmax",
    "fast_compile_gpu",
)
@local_optimizer([nnet.CrossentropyCategorical1Hot])
def local_crossentropy_softmax(fgraph, node):
    """The cross-entropy of a softmax, fused into the op that computes both stably."""
    # crossentropy_1hot(softmax(x + b), y) -> crossentropy_softmax_argmax_1hot_with_bias(x, b, y)[0]
    sm, y = node.inputs
    if sm.owner is None:
        return False
    found = _softmax_bias(sm.owner)
    if found is None:
        return False
    x, b = found
    if b is None:
        nll, new_sm = nnet.crossentropy_softmax_1hot(x, y)
    else:
        nll, new_sm = nnet.crossentropy_softmax_1hot_with_bias(x, b, y)
    nll = fit(node.outputs[0], nll)
    if nll is None:
        return False
    repl = {node.outputs[0]: nll}
    new_sm = fit(sm, new_sm)
    if new_sm is not None:  # the softmax computed by the fused op serves other uses too
        repl[sm] = new_sm
    return repl


@stabilize("local_softmax_grad_to_crossentropy_with_softmax_grad", "fast_compile_gpu")
@local_optimizer([nnet.SoftmaxGrad], fit=fit)
def local_crossentropy_softmax_grad(fgraph, node):
    """The gradient of the cross-entropy of a softmax, fused into one op."""
    # softmax_grad(xent_1hot_grad(g, sm, y), sm) -> xent_softmax_1hot_with_bias_dx(g, sm, y)
    dy, sm = node.inputs
    if sm.ndim != 2 or node.op.axis not in (-1, 1) or dy.owner is None:
        return False
    if type(dy.owner.op) is not nnet.CrossentropyCategorical1HotGrad:
        return False
    g, sm2, y = dy.owner.inputs
    if not _same_softmax(sm2, sm):
        return False
    return nnet.crossentropy_softmax_1hot_with_bias_dx(g, sm2, y)  # sm2 may be the fused one


def _rows_of(rows, y, table):
    """Whether the index ``rows`` is ``arange(n)`` with ``n`` the length of the labels
    ``y`` or the rows of ``table``: each row picked once, in order."""
    owner = rows.owner
    if owner is None or type(owner.op) is not tb.ARange:
        return False
    start, stop, step = owner.inputs
    if const_value(start) != 0 or const_value(step) != 1 or stop.owner is None:
        return False
    op = stop.owner.op
    if type(op) is not tb.Shape_i or op.i != 0:
        return False
    length_of = stop.owner.inputs[0]
    while y is not length_of and isinstance(y.owner and y.owner.op, Elemwise):
        if len(y.owner.inputs) != 1:
            break
        y = y.owner.inputs[0]  # the labels cast (their length is the length read)
    return length_of is y or length_of is table


def _labels(y):
    return y.ndim == 1 and y.dtype in discrete_dtypes and y.dtype != "bool"


def _fused_crossentropy(z, y):
    """``(nll, sm)`` of the fused op for the 2-d logits ``z`` (a row bias split off)."""
    x, b = _split_bias(z)
    if b is None:
        return nnet.crossentropy_softmax_1hot(x, y)
    return nnet.crossentropy_softmax_1hot_with_bias(x, b, y)


@stabilize("fast_compile_gpu")
@local_optimizer([AdvancedSubtensor], needs=[nnet.LogSoftmax])
def local_advanced_indexing_crossentropy_onehot(fgraph, node):
    """``log_softmax(x + b)[arange(n), y]`` (the log-likelihoods of the labels ``y``,
    ``log(softmax(x)[arange(n), y])`` once ``local_log_softmax`` lifted the log) as
    minus the fused cross-entropy op's output; a softmax of ``x + b`` elsewhere in the
    graph is the fused op's. As in Theano, ``x`` must have ``len(y)`` rows (the indexing
    read the first ``len(y)`` when ``n = len(y)``) and the labels must be in
    ``[0, classes)`` (the indexing read ``-1`` as the last class)."""
    # log_softmax(x + b)[arange(n), y] -> -crossentropy_softmax_argmax_1hot_with_bias(x, b, y)[0]
    ls, *idx = node.inputs
    if len(idx) != 2 or ls.owner is None or _softmax_bias(ls.owner, nnet.LogSoftmax) is None:
        return False
    rows, y = idx
    z = ls.owner.inputs[0]
    if not _labels(y) or not _rows_of(rows, y, z) or node.outputs[0].ndim != 1:
        return False
    nll, sm = _fused_crossentropy(z, y)
    out, new = node.outputs[0], tm.neg(nll)
    sums, cur = [], out
    while fgraph is not None and len(sums) < 2:
        # -(log-likelihoods), or -sum(log-likelihoods): the negative log-likelihoods
        # themselves (canonicalize, which would cancel the double negation, has run)
        clients = fgraph.clients.get(cur, [])
        if len(clients) != 1 or clients[0][0] == "output":
            break
        client = clients[0][0]
        if is_op(client.outputs[0], ts.Neg):
            out, new = client.outputs[0], nll
            for s in sums:
                new = s.op(new)
            break
        if type(client.op) is not Sum:
            break
        sums.append(client)
        cur = client.outputs[0]
    new = fit(out, new)
    if new is None:
        return False
    repl = {out: new}
    for client, _ in fgraph.clients.get(z, ()) if fgraph is not None else ():
        # the gradient's softmax, which the fused op computes too
        if client != "output" and type(client.op) is nnet.Softmax and client.op.axis in (-1, 1):
            repl[client.outputs[0]] = sm
    return repl


def _unfilled(v):
    """``v`` without the fills around it: ``v`` has the labels' length or broadcasts to
    it, so a fill's shape source (the forward log-likelihoods, for the gradient of their
    sum) need not be computed."""
    while isinstance(scalar_op(v.owner), ts.Second):
        v = v.owner.inputs[1]
    return v


def _softmax_2d(fgraph, z):
    """``softmax(z)`` over the rows of ``z``: a fused cross-entropy op's of ``z``'s
    logits and bias where the graph has one, else a new ``Softmax``."""
    x, b = _split_bias(z)
    for c, _ in fgraph.clients.get(x, ()) if fgraph is not None else ():
        if (
            c != "output"
            and type(c.op) is nnet.CrossentropySoftmaxArgmax1HotWithBias
            and c.inputs[0] is x
            and (c.inputs[1] is b or (b is None and const_value(c.inputs[1]) == 0))
        ):
            return c.outputs[1]
    return nnet.softmax(z, axis=-1)


@stabilize("fast_compile_gpu")
@local_optimizer([tm.sub], needs=[AdvancedIncSubtensor], fit=fit)
def local_advanced_indexing_crossentropy_onehot_grad(fgraph, node):
    """The gradient of ``log_softmax(x)[arange(n), y]``, ``g - sm * sum(g, 1)`` with
    ``g`` zeros incremented by ``v`` at ``(arange(n), y)`` (``local_logsoftmax_grad``'s
    form), as the fused cross-entropy's gradient op of ``-v`` (one entry per row)."""
    # g - sm * sum(g, 1, keepdims=True) -> xent_softmax_1hot_with_bias_dx(-v, sm, y)
    #   with g = inc(zeros, v, arange(n), y)
    if not isinstance(scalar_op(node), ts.Sub):
        return False
    g, prod = node.inputs
    inc = g.owner
    if (
        inc is None
        or type(inc.op) is not AdvancedIncSubtensor
        or inc.op.set_instead_of_inc
        or len(inc.inputs) != 4
        or not isinstance(scalar_op(prod.owner), ts.Mul)
        or len(prod.owner.inputs) != 2
        or const_value(inc.inputs[0]) != 0
    ):
        return False
    sm, total = prod.owner.inputs
    if _sum_axis_keepdims(total) != (g, 1):
        sm, total = total, sm
        if _sum_axis_keepdims(total) != (g, 1):
            return False
    ls = _exp_arg(sm)
    if ls is not None and ls.owner is not None and _softmax_bias(ls.owner, nnet.LogSoftmax):
        sm = _softmax_2d(fgraph, ls.owner.inputs[0])  # exp(log_softmax(z)): LogSoftmax's L_op
    found = _softmax_of(sm)
    _, v, rows, y = inc.inputs
    if found is None or found[2] != 1 or sm.ndim != 2 or v.ndim > 1 or not _labels(y):
        return False
    if not _rows_of(rows, y, sm) or not is_float(v):
        return False
    # -v, without a double negation (canonicalize has run: it would stay)
    v = _unfilled(v)
    dy = _unfilled(v.owner.inputs[0]) if is_op(v, ts.Neg) else tm.neg(v)
    if dy.ndim == 0:
        dy = dy.dimshuffle("x")  # one value for every row: the gradient op broadcasts it
    return nnet.crossentropy_softmax_1hot_with_bias_dx(dy, sm, y)


@RULES.specialize()
@local_optimizer([nnet.CrossentropySoftmaxArgmax1HotWithBias])
def local_crossentropy_softmax_only(fgraph, node):
    """The fused cross-entropy op of which only the softmax is read, by the fused
    gradient op of the same labels (which checks them), as ``softmax(x + b)``; the
    log-likelihoods may be read as the shape of fills (the gradient of their sum), which
    take the labels' shape instead."""
    # crossentropy_softmax_argmax_1hot_with_bias(x, b, y)[1] -> softmax(x + b)
    #   when [1] is read by xent_softmax_1hot_with_bias_dx(., ., y), [2] unread and
    #   [0] read by fill(nll, v) only (-> fill(y, v))
    if fgraph is None:
        return False
    nll, sm, am = node.outputs
    clients = fgraph.clients
    x, b, y = node.inputs
    if clients.get(am) or not any(
        c != "output" and type(c.op) is nnet.CrossentropySoftmax1HotWithBiasDx and c.inputs[2] is y
        for c, _ in clients.get(sm, ())
    ):
        return False
    fills = [c for c, _ in clients.get(nll, ())]
    if not all(
        c != "output" and isinstance(scalar_op(c), ts.Second) and c.inputs[1] is not nll
        for c in fills
    ):
        return False
    z = x if const_value(b) == 0 else x + b.dimshuffle("x", 0)
    repl = {sm: fit(sm, nnet.softmax(z, axis=-1))}
    for c in fills:
        repl[c.outputs[0]] = fit(c.outputs[0], tb.second(y, c.inputs[1]))
    return None if any(v is None for v in repl.values()) else repl


def _length_of(var, y, sm):
    """Whether the length ``var`` (a 0-d int) is known to be the labels' ``y`` or the
    rows of ``sm``."""
    owner = var.owner
    return (
        owner is not None
        and type(owner.op) is tb.Shape_i
        and owner.op.i == 0
        and owner.inputs[0] in (y, sm)
    )


@stabilize()
@RULES.specialize()
@local_optimizer([nnet.CrossentropySoftmax1HotWithBiasDx])
def local_useless_crossentropy_softmax_1hot_with_bias_dx_alloc(fgraph, node):
    """The fused cross-entropy gradient op of a ``dy`` that spreads one value over the
    labels' length (a fill of the labels, an alloc of their length) on that value: the
    op broadcasts it itself."""
    # xent_softmax_1hot_with_bias_dx(fill(y, v), sm, y) -> xent_softmax_1hot_with_bias_dx(v, sm, y)
    #   (and alloc(v, len(y)) the same), v one value
    dy, sm, y = node.inputs
    owner = dy.owner
    if owner is None:
        return False
    if isinstance(scalar_op(owner), ts.Second) and owner.inputs[0] is y:
        v = owner.inputs[1]
    elif (
        type(owner.op) is tb.Alloc and len(owner.inputs) == 2 and _length_of(owner.inputs[1], y, sm)
    ):
        v = owner.inputs[0]
    else:
        return False
    if v.ndim > 1 or (v.ndim == 1 and not v.broadcastable[0]) or v.dtype != dy.dtype:
        return False
    v = v.dimshuffle("x") if v.ndim == 0 else v
    return [nnet.crossentropy_softmax_1hot_with_bias_dx(v, sm, y)]


# ---- argmax of an increasing function -------------------------------------------------

# Strictly increasing elementwise functions: the argmax of f(x) is the argmax of x.
_INCREASING = tuple(type(op) for op in (ts.exp, ts.tanh, ts.sigmoid, ts.softplus))


def _argmax_axis(fgraph, node):
    """The one axis (>= 0) an ``Argmax``, or a ``MaxAndArgmax`` whose max is unused,
    reduces; else None."""
    x = node.inputs[0]
    if type(node.op) is tm.Argmax:  # not Argmin, its subclass
        axis = node.op.axis
        if isinstance(axis, (tuple, list)):
            axis = axis[0] if len(axis) == 1 else None
    elif isinstance(node.op, MaxAndArgmax):
        if node.op.axis is None or len(node.op.axis) != 1 or fgraph is None:
            return None
        if fgraph.clients.get(node.outputs[0]):
            return None  # the max is used: keep the op that computes both
        axis = node.op.axis[0]
    else:
        return None
    return None if axis is None or x.ndim == 0 else axis % x.ndim


@RULES.specialize()
@local_optimizer([tm.Argmax, MaxAndArgmax])
def local_argmax_pushdown(fgraph, node):
    """The argmax of an increasing function of ``x`` as the argmax of ``x``: of
    ``softmax(x)`` along the softmax's axis, of ``exp``/``tanh``/``sigmoid``/``softplus``
    of ``x`` (which also never ties where the function rounds equal values)."""
    # argmax(softmax(x)) -> argmax(x) ; argmax(exp(x)) -> argmax(x)
    axis = _argmax_axis(fgraph, node)
    if axis is None:
        return False
    inner = node.inputs[0].owner
    if inner is None:
        return False
    if type(inner.op) is nnet.Softmax and inner.op.axis % inner.inputs[0].ndim == axis:
        x = inner.inputs[0]
    elif isinstance(scalar_op(inner), _INCREASING) and len(inner.inputs) == 1:
        x = inner.inputs[0]
    else:
        return False
    if x.ndim != node.inputs[0].ndim:
        return False
    out = node.outputs[0] if isinstance(node.op, tm.Argmax) else node.outputs[1]
    return {out: tm.Argmax(axis)(x)}


@RULES.canonicalize()
@RULES.specialize()
@local_optimizer([MaxAndArgmax])
def local_max_and_argmax(fgraph, node):
    """A ``MaxAndArgmax`` whose argmax is unused as the ``Max`` reduction alone (the
    counterpart of ``local_argmax_pushdown``, which takes the argmax alone)."""
    # max_and_argmax(x)[0] (argmax unused) -> max(x)
    if fgraph is None or fgraph.clients.get(node.outputs[1]):
        return False
    return {node.outputs[0]: tm.max(node.inputs[0], axis=node.op.axis)}
