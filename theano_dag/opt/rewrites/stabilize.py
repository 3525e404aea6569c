"""Stabilization: replace expressions that lose precision or overflow by stable forms.

``log(1 + x)`` loses every digit of a tiny ``x``; ``log(sigmoid(x))`` is ``-inf`` for
``x < -745`` although the true value is about ``x``; ``log(softmax(x))`` underflows the
same way; ``log(1 + exp(x))`` and ``log(sum(exp(x)))`` overflow for ``x > 709`` where
the true values are about ``x``; ``log(1 - exp(x))`` loses every digit near 0. The
stable forms compute the same function without the intermediate that rounds or
overflows. These rewrites may change results, always for the better: the
values they give are closer to the exact ones.
"""

from __future__ import annotations

from theano_dag import scalar as ts
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import fit, is_const, is_float, scalar_op
from theano_dag.tensor import math as tm
from theano_dag.tensor.elemwise import CAReduce, DimShuffle, Elemwise, Sum
from theano_dag.tensor.nnet import nnet

stabilize = RULES.stabilize

__all__ = [
    "local_log1p",
    "local_log1p_exp",
    "local_log_sum_exp",
    "local_exp_over_sum_exp",
    "local_log_softmax",
    "local_softmax_graph",
    "local_crossentropy_softmax",
    "local_crossentropy_softmax_grad",
]


@stabilize()
@local_optimizer([tm.log])
def local_log1p(fgraph, node):
    """``log(1 + x)`` computed without forming ``1 + x``."""
    # log(1 + x) -> log1p(x) ; log(1 - x) -> log1p(-x)
    if scalar_op(node) != ts.log:
        return False
    (arg,) = node.inputs
    out = node.outputs[0]
    inner = arg.owner
    sop = scalar_op(inner)
    if isinstance(sop, ts.Add):
        ones = [i for i in inner.inputs if is_const(i, 1)]
        if not ones:
            return False
        rest = list(inner.inputs)
        rest.remove(ones[0])
        x = rest[0] if len(rest) == 1 else tm.add(*rest)
    elif isinstance(sop, ts.Sub) and is_const(inner.inputs[0], 1):
        x = tm.neg(inner.inputs[1])
    else:
        return False
    if not is_float(x) or x.dtype != arg.dtype:
        return False
    return fit(out, tm.log1p(x), inner.inputs)


def _exp_arg(var):
    """``x`` when ``var`` is ``exp(x)``."""
    owner = var.owner
    return owner.inputs[0] if owner is not None and scalar_op(owner) == ts.exp else None


@stabilize()
@local_optimizer([tm.log1p, tm.log])
def local_log1p_exp(fgraph, node):
    """``log1p(exp(x))`` as ``softplus(x)`` and ``log1p(-exp(x))`` as ``log1mexp(x)``
    (local_log1p turns ``log(1 + exp(x))`` and ``log(1 - exp(x))`` into these first)."""
    # log1p(exp(x)) -> softplus(x) ; log1p(-exp(x)) -> log1mexp(x) ; log(-expm1(x)) -> log1mexp(x)
    (arg,) = node.inputs
    inner = arg.owner
    sop = scalar_op(inner)
    if scalar_op(node) == ts.log1p:
        x = _exp_arg(arg)
        if x is not None:
            new = tm.softplus(x)
        elif isinstance(sop, ts.Neg):
            x = _exp_arg(inner.inputs[0])
            new = None if x is None else tm.log1mexp(x)
        else:
            return False
    elif scalar_op(node) == ts.log and isinstance(sop, ts.Neg):
        expm1_node = inner.inputs[0].owner
        if expm1_node is None or scalar_op(expm1_node) != ts.expm1:
            return False
        x = expm1_node.inputs[0]
        new = tm.log1mexp(x)
    else:
        return False
    if x is None or new is None or not is_float(x):
        return False
    return fit(node.outputs[0], new, inner.inputs)


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
    max over ``axis`` (``tensor.logsumexp``), which cannot overflow."""
    # log(sum(exp(x), axis)) -> logsumexp(x, axis) ; also with keepdims=True
    if scalar_op(node) != ts.log:
        return False
    (arg,) = node.inputs
    outer = None
    s = arg.owner
    if s is not None and isinstance(s.op, DimShuffle) and not s.op.drop:
        outer, s = s.op, s.inputs[0].owner
    if s is None or type(s.op) is not Sum:
        return False
    x = _exp_arg(s.inputs[0])
    if x is None or not is_float(x) or _shifted_by_a_max(x):
        return False
    new = tm.logsumexp(x, axis=s.op.axis)
    if outer is not None:
        new = outer(new)
    return fit(node.outputs[0], new)


@stabilize()
@local_optimizer([tm.mul])
def local_exp_over_sum_exp(fgraph, node):
    """The gradient of ``log(sum(exp(x), axis))``, ``exp(x) * (g / sum(exp(x)))``, with
    both exponentials shifted by the max of ``x`` (the ratio is the same, and neither
    overflows)."""
    # exp(x) * dimshuffle(g / sum(exp(x), axis)) -> exp(x - m) * dimshuffle(g / sum(exp(x - m)))
    # (and with -(g / sum(exp(x))), the same)
    if not isinstance(scalar_op(node), ts.Mul) or len(node.inputs) != 2:
        return False
    for e, d in (node.inputs, node.inputs[::-1]):
        x = _exp_arg(e)
        ds = d.owner
        if x is None or ds is None or not isinstance(ds.op, DimShuffle) or ds.op.drop:
            continue
        div = ds.inputs[0].owner
        negated = isinstance(scalar_op(div), ts.Neg)  # a cost of -log(sum(exp(x)))
        if negated:
            div = div.inputs[0].owner
        if not isinstance(scalar_op(div), ts.TrueDiv):
            continue
        g, total = div.inputs
        s = total.owner
        if s is None or type(s.op) is not Sum or s.inputs[0] is not e:
            continue
        if not is_float(x) or _shifted_by_a_max(x):
            return False
        axis = s.op.axis
        m = tm.max(x, axis=axis, keepdims=True)
        m = tm.switch(tm.isinf(m), 0, m)  # x - inf would be nan
        shifted = tm.exp(x - m)
        ratio = g / tm.sum(shifted, axis=axis)
        return fit(node.outputs[0], shifted * ds.op(tm.neg(ratio) if negated else ratio))
    return False


@stabilize()
@local_optimizer([tm.log], fit=fit)
def local_log_softmax(fgraph, node):
    """``log(softmax(x))`` as one ``LogSoftmax``, which does not underflow."""
    # log(softmax(x, axis)) -> log_softmax(x, axis)
    if scalar_op(node) != ts.log:
        return False
    sm = node.inputs[0].owner
    if sm is None or type(sm.op) is not nnet.Softmax:
        return False
    return nnet.LogSoftmax(sm.op.axis)(sm.inputs[0])


def _sum_axis_keepdims(var):
    """``(x, axis)`` when ``var`` is ``sum(x, axis=axis, keepdims=True)`` over one axis."""
    ds = var.owner
    if ds is None or not isinstance(ds.op, DimShuffle):
        return None
    s = ds.inputs[0].owner
    if s is None or type(s.op) is not Sum or s.op.axis is None or len(s.op.axis) != 1:
        return None
    x = s.inputs[0]
    (axis,) = s.op.axis
    kept = [d for d in range(x.ndim) if d != axis]
    expected = tuple("x" if d == axis else kept.index(d) for d in range(x.ndim))
    if ds.op.new_order != expected:
        return None
    return x, axis


@stabilize()
@local_optimizer([tm.true_div], fit=fit)
def local_softmax_graph(fgraph, node):
    """The written-out softmax (``nnet.softmax_graph``) becomes one stable ``Softmax``."""
    # exp(x) / sum(exp(x), axis, keepdims=True) -> softmax(x, axis)
    if not isinstance(scalar_op(node), ts.TrueDiv):
        return False
    e, s = node.inputs
    found = _sum_axis_keepdims(s)
    if found is None or found[0] is not e or scalar_op(e.owner) != ts.exp:
        return False
    x = e.owner.inputs[0]
    if not is_float(x) or x.ndim == 0:
        return False
    return nnet.Softmax(found[1])(x)


def _softmax_bias(sm_node):
    """``(x, b)`` for a 2-d ``softmax(x + b)`` over the last axis (b a row bias, or None)."""
    if type(sm_node.op) is not nnet.Softmax or sm_node.inputs[0].ndim != 2:
        return None
    if sm_node.op.axis not in (-1, 1):
        return None
    z = sm_node.inputs[0]
    add = z.owner
    if isinstance(scalar_op(add), ts.Add) and len(add.inputs) == 2:
        for i, j in ((0, 1), (1, 0)):
            b = add.inputs[j]
            if (
                b.owner is not None
                and isinstance(b.owner.op, DimShuffle)
                and b.owner.op.new_order == ("x", 0)
                and add.inputs[i].ndim == 2
                and b.owner.inputs[0].dtype == z.dtype
                and add.inputs[i].dtype == z.dtype
            ):
                return add.inputs[i], b.owner.inputs[0]
    return z, None


@stabilize()
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


@stabilize()
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
    if sm2 is not sm:
        return False
    return nnet.crossentropy_softmax_1hot_with_bias_dx(g, sm, y)
