"""Stabilization: replace expressions that lose precision or overflow by stable forms
(logarithms, exponentials and special functions; the sigmoid family is in ``sigmoid``,
the softmax family in ``softmax``).

``log(1 + x)`` loses every digit of a tiny ``x``; ``exp(x) - 1`` likewise;
``log(1 + exp(x))`` overflows for ``x > 709`` where the true value is about ``x``;
``log(1 - exp(x))`` loses every digit near 0; ``log(erfc(x))`` is ``-inf`` from
``x = 27`` although the true value is about ``-x**2``. The stable forms compute the same
function without the intermediate that rounds or overflows. These rewrites may change
results, always for the better: the values they give are closer to the exact ones.
"""

from __future__ import annotations

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.algebra import NONFINITE_UNSAFE
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import (
    abs_arg,
    const_value,
    count_scalar_ops,
    fit,
    graph_holds,
    is_const,
    is_float,
    is_scalar_like,
    scalar_op,
    typed_constant,
)
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import cast, zeros_like
from theano_dag.tensor.nnet.nnet import softsign

stabilize = RULES.stabilize

__all__ = [
    "local_log1p",
    "local_log1p_exp",
    "local_erf_complement",
    "local_expm1",
    "local_1_plus_expm1",
    "local_log_erfc",
    "local_grad_log_erfc_neg",
    "local_grad_log_erfcx",
    "local_log_add_exp",
    "local_logdiffexp",
    "local_log_div",
    "local_sqrt_sqr",
    "local_log1p_expm1",
    "local_exp_log_inverses",
    "local_exp_over_add_exp",
    "local_div_by_reciprocal",
    "local_func_inv",
    "local_mul_exp",
    "local_log_erf",
    "local_relu_maximum",
    "local_softsign",
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


# -- logarithms, exponentials and the error function -----------------------------------
# (tracked by op, so that each rule meets only the nodes it can change, and each looks
# at most two nodes up: compile time stays flat.)


def _is_op(var, sop):
    """Whether ``var`` is computed by an Elemwise of the scalar op instance ``sop``."""
    return var.owner is not None and scalar_op(var.owner) == sop


_EXP_CLASS = type(ts.exp)


def _maybe_exp(var) -> bool:
    """A cheap first look: whether ``_is_op(var, ts.exp)`` may hold (an exp's class)."""
    return isinstance(scalar_op(var.owner), _EXP_CLASS)


def _any_maybe_exp(variables) -> bool:
    for v in variables:
        if isinstance(scalar_op(v.owner), _EXP_CLASS):
            return True
    return False


def _negated(var):
    """``x`` when ``var`` is ``-x`` or ``-1 * x``."""
    owner = var.owner
    sop = scalar_op(owner)
    if isinstance(sop, ts.Neg):
        return owner.inputs[0]
    if isinstance(sop, ts.Mul) and len(owner.inputs) == 2:
        a, b = owner.inputs
        if is_const(a, -1):
            return b
        if is_const(b, -1):
            return a
    return None


def _two_terms(node):
    """``(a, b, sign)`` for a 2-input ``a + b`` (sign 1) or ``a - b`` (sign -1)."""
    sop = scalar_op(node)
    if isinstance(sop, ts.Add) and len(node.inputs) == 2:
        return node.inputs[0], node.inputs[1], 1
    if isinstance(sop, ts.Sub):
        return node.inputs[0], node.inputs[1], -1
    return None


def _const_and_other(node):
    """``(c, term)`` for ``c + term``, ``term + c``, ``c - term`` (as ``c + (-term)``: the
    term is then returned wrapped as ``("neg", term)``) or ``term - c`` (``-c``), ``c`` a
    constant 1 or -1."""
    found = _two_terms(node)
    if found is None:
        return None
    a, b, sign = found
    for c, t, flip in ((a, b, False), (b, a, True)):
        for value in (1, -1):
            if is_const(c, value):
                if sign == -1 and flip:  # term - c
                    return -value, t, False
                return value, t, sign == -1  # c + term, or c - term
    return None


@stabilize()
@local_optimizer(
    [tm.add, tm.sub], requirements=(count_scalar_ops,), needs=[type(ts.erf), type(ts.erfc)]
)
def local_erf_complement(fgraph, node):
    """``1 - erf(x)`` as ``erfc(x)`` (and the other sums of 1 and +-erf or +-erfc), which
    keeps the digits the subtraction from 1 cancels: ``1 - erf(6)`` is 0 in float64,
    ``erfc(6)`` is 2.2e-17."""
    # 1 - erf(x) -> erfc(x) ; 1 + erf(x) -> erfc(-x) ; erf(x) - 1 -> -erfc(x)
    # 1 - erfc(x) -> erf(x) ; erfc(x) - 1 -> -erf(x) (erfc(-x) - 1 -> erf(x))
    # and with 1 + (-erf(x)), 1 + (-1 * erf(x)), -1 + erf(x), the forms of the same sums
    if not graph_holds(fgraph, ts.erf, ts.erfc):
        return False
    found = _const_and_other(node)
    if found is None:
        return False
    c, term, subtracted = found
    negated = _negated(term)
    if negated is not None:
        term, subtracted = negated, not subtracted
    owner = term.owner
    sop = scalar_op(owner)
    if sop != ts.erf and sop != ts.erfc:
        return False
    x = owner.inputs[0]
    if not is_float(x):
        return False
    sign = -1 if subtracted else 1  # c + sign * f(x)
    if sop == ts.erf:
        if c == 1 and sign == -1:
            new = tm.erfc(x)
        elif c == 1:
            new = tm.erfc(tm.neg(x))
        elif sign == 1:  # -1 + erf(x)
            new = tm.neg(tm.erfc(x))
        else:  # -1 - erf(x) = -(1 + erf(x))
            new = tm.neg(tm.erfc(tm.neg(x)))
    else:
        if c == 1 and sign == -1:
            new = tm.erf(x)
        elif c == -1 and sign == 1:  # erfc(x) - 1 = -erf(x) = erf(-x)
            inner = _negated(x)
            new = tm.erf(inner) if inner is not None else tm.neg(tm.erf(x))
        else:  # 1 + erfc(x), -1 - erfc(x): no cancellation to remove
            return False
    return fit(node.outputs[0], new, node.inputs)


RULES.canonicalize()(local_erf_complement)
RULES.specialize()(local_erf_complement)


@stabilize()
@local_optimizer([tm.add, tm.sub], requirements=(count_scalar_ops,), needs=[type(ts.exp)])
def local_expm1(fgraph, node):
    """``exp(x) - 1`` as ``expm1(x)`` (and ``1 - exp(x)`` as ``-expm1(x)``), which keeps
    the digits of a tiny ``x``."""
    # exp(x) - 1 -> expm1(x) ; -1 + exp(x) -> expm1(x)
    # exp(x) + y - 1 -> expm1(x) + y ; exp(x) + y + -1 -> expm1(x) + y
    # 1 - exp(x) -> -expm1(x)   (the gradient of log(1 - exp(x)) divides by it)
    # 1 + -exp(x) + y -> -expm1(x) + y   (the gradient of log1p(-exp(x)): 1 + z)
    if not graph_holds(fgraph, ts.exp):
        return False
    if isinstance(scalar_op(node), ts.Sub):
        terms, one = node.inputs
        # Every form needs an exp operand: most sums and differences have none.
        if not (
            _maybe_exp(one)
            or _maybe_exp(terms)
            or isinstance(scalar_op(terms.owner), ts.Add)
            and _any_maybe_exp(terms.owner.inputs)
        ):
            return False
        if is_const(terms, 1) and _is_op(one, ts.exp) and is_float(one):
            return fit(node.outputs[0], tm.neg(tm.expm1(one.owner.inputs[0])), node.inputs)
        if not is_const(one, 1):
            return False
        add = terms.owner
        ins = list(add.inputs) if isinstance(scalar_op(add), ts.Add) else [terms]
    else:
        ins = list(node.inputs)
        if not _any_maybe_exp(ins):
            return _one_minus_exp(node, ins)
        minus = next((i for i in ins if is_const(i, -1)), None)
        if minus is None:
            return False
        ins.remove(minus)
    e = next((i for i in ins if _is_op(i, ts.exp)), None)
    if e is None:
        return False
    rest = list(ins)
    rest.remove(e)
    x = e.owner.inputs[0]
    if not is_float(x):
        return False
    new = tm.expm1(x)
    if rest:
        new = tm.add(new, *rest)
    return fit(node.outputs[0], new, node.inputs)


def _is_exp_float(var):
    return var is not None and _is_op(var, ts.exp) and is_float(var)


def _one_minus_exp(node, ins):
    """``-expm1(x) + rest`` for the sum ``ins`` of ``node`` holding 1 and ``-exp(x)``."""
    # (map is lazy: most sums have no -exp(x) term, and this runs on each of them)
    found = next(((k, e) for k, e in enumerate(map(_negated, ins)) if _is_exp_float(e)), None)
    if found is None:
        return False
    k, e = found
    rest = ins[:k] + ins[k + 1 :]
    one = next((i for i in rest if is_const(i, 1)), None)
    if one is None:
        return False
    rest.remove(one)
    new = tm.neg(tm.expm1(e.owner.inputs[0]))
    if rest:
        new = tm.add(new, *rest)
    return fit(node.outputs[0], new, node.inputs)


RULES.canonicalize()(local_expm1)
RULES.specialize()(local_expm1)


@stabilize()
@local_optimizer([tm.add], requirements=(count_scalar_ops,), needs=[type(ts.expm1)])
def local_1_plus_expm1(fgraph, node):
    """``1 + expm1(x)`` as ``exp(x)``: the sum is 0 once ``expm1(x)`` rounds to -1 (the
    derivative of ``expm1`` is written so; canonicalize has simplified ratios first)."""
    # 1 + expm1(x) -> exp(x) ; expm1(x) + 1 -> exp(x)
    if not graph_holds(fgraph, ts.expm1):
        return False
    if not isinstance(scalar_op(node), ts.Add) or len(node.inputs) != 2:
        return False
    a, b = node.inputs
    if is_const(b, 1):
        a, b = b, a
    if not (is_const(a, 1) and _is_op(b, ts.expm1) and is_float(b)):
        return False
    return fit(node.outputs[0], tm.exp(b.owner.inputs[0]), node.inputs)


@stabilize()
@local_optimizer([tm.log, tm.log1p])
def local_log_erfc(fgraph, node):
    """``log(erfc(x))`` as ``log_erfc(x)``, finite where ``erfc(x)`` underflows (``x``
    beyond 26.5 in float64, 9.2 in float32), with a gradient that stays finite too."""
    # log(erfc(x)) -> log_erfc(x) ; log1p(-erf(x)) -> log_erfc(x)
    (arg,) = node.inputs
    if scalar_op(node) == ts.log:
        if not _is_op(arg, ts.erfc):
            return False
        x = arg.owner.inputs[0]
    else:
        inner = _negated(arg)
        if inner is None or not _is_op(inner, ts.erf):
            return False
        x = inner.owner.inputs[0]
    if not is_float(x):
        return False
    return fit(node.outputs[0], tm.log_erfc(x), node.inputs)


def _is_minus_square_of(var, z) -> bool:
    """Whether ``var`` is ``-(z * z)`` (``-sqr(z)``, ``-1 * z * z``..., or the same of
    ``w`` where ``z`` is ``-w``: the gradient of ``erfc(-w)`` squares ``w``)."""
    w = _negated(z)
    return _is_minus_square(var, z) or (w is not None and _is_minus_square(var, w))


def _is_minus_square(var, z) -> bool:
    owner = var.owner
    sop = scalar_op(owner)
    if isinstance(sop, ts.Mul) and len(owner.inputs) == 2:  # z * (-z)
        a, b = owner.inputs
        if (a is z and _negated(b) is z) or (b is z and _negated(a) is z):
            return True
    inner = _negated(var)
    if inner is not None:
        owner = inner.owner
        sop = scalar_op(owner)
        if sop == ts.sqr:
            return owner.inputs[0] is z
        return isinstance(sop, ts.Mul) and list(owner.inputs) == [z, z]
    if not isinstance(sop, ts.Mul) or len(owner.inputs) != 3:
        return False
    ins = list(owner.inputs)
    minus = next((i for i in ins if is_const(i, -1)), None)
    if minus is None:
        return False
    ins.remove(minus)
    return ins == [z, z]


@stabilize()
@local_optimizer([tm.true_div])
def local_grad_log_erfc_neg(fgraph, node):
    """``exp(-x**2) / erfc(x)`` (in the gradient of ``log(erfc(x))``) as
    ``1 / erfcx(x)`` where ``x >= 0``: both factors underflow to 0 for large ``x``, their
    ratio does not. Below 0 the quotient as written, which is finite there, where
    ``erfcx`` overflows (``x < -26.6``) and its derivative with it (a Hessian's NaN); each
    branch reads a stand-in value where it is not taken, so that neither derivative is
    0 * inf there."""
    # [y *] exp(-x**2) / erfc(x) -> [y *] (1 / erfcx(x))
    found = _factor_over(
        node, ts.erfc, lambda f, z: _is_op(f, ts.exp) and _is_minus_square_of(f.owner.inputs[0], z)
    )
    if found is None:
        return False
    z, rest = found
    below, neg, pos = _apart_at_zero(z)
    # erfc(z) written 2 - erfc(-z) below 0 (no cancellation: erfc(-z) <= 1 there), so that
    # this rewrite does not meet its own quotient again.
    written = tm.exp(-tm.sqr(neg)) / tm.sub(2, tm.erfc(-neg))
    new = tm.switch(below, written, tm.reciprocal(tm.erfcx(pos)))
    return fit(node.outputs[0], tm.mul(*rest, new) if rest else new, node.inputs)


def _factor_over(node, den_op, match):
    """``(z, rest)`` when ``node`` is ``f * rest / den_op(z)`` with a factor ``f`` of the
    numerator that ``match(f, z)`` accepts (a float ``z``), else None."""
    if not isinstance(scalar_op(node), ts.TrueDiv):
        return None
    num, den = node.inputs
    if not _is_op(den, den_op) or not is_float(den.owner.inputs[0]):
        return None
    z = den.owner.inputs[0]
    factors = list(num.owner.inputs) if isinstance(scalar_op(num.owner), ts.Mul) else [num]
    f = next((f for f in factors if match(f, z)), None)
    if f is None:
        return None
    factors.remove(f)
    return z, factors


def _apart_at_zero(z):
    """``(z < 0, z where z < 0 else 0, z where z >= 0 else 0)``: each branch of a switch
    on the sign of ``z`` reads a stand-in value where it is not taken, so that neither
    branch's derivative is ``0 * inf`` there."""
    below = tm.lt(z, 0)
    zero = zeros_like(z)
    return below, tm.switch(below, z, zero), tm.switch(below, zero, z)


@stabilize()
@local_optimizer([tm.true_div])
def local_grad_log_erfcx(fgraph, node):
    """``erfcx'(x) / erfcx(x)`` (the gradient of ``log(erfcx(x))``) as
    ``2 x - 2 / (sqrt(pi) erfcx(x))`` below 0, where both factors overflow for
    ``x < -26.6`` (``inf / inf``) and the two terms have one sign (no cancellation); the
    quotient as written from 0 up, where the difference would cancel. Each branch reads a
    stand-in value where it is not taken."""
    # [y *] erfcx_deriv(x) / erfcx(x)
    #   -> [y *] switch(x < 0, 2 x - 2 / (sqrt(pi) erfcx(x)), erfcx_deriv(x) / erfcx(x))
    found = _factor_over(
        node, ts.erfcx, lambda f, z: _is_op(f, ts.erfcx_deriv) and f.owner.inputs[0] is z
    )
    if found is None:
        return False
    z, rest = found
    below, neg, pos = _apart_at_zero(z)
    two_over_sqrt_pi = typed_constant(2 / np.sqrt(np.pi), z.dtype)
    written = 2 * neg - two_over_sqrt_pi / tm.erfcx(neg)
    # (times a reciprocal: a quotient would meet this rewrite again)
    new = tm.switch(below, written, tm.erfcx_deriv(pos) * tm.reciprocal(tm.erfcx(pos)))
    return fit(node.outputs[0], tm.mul(*rest, new) if rest else new, node.inputs)


@stabilize()
@local_optimizer([tm.log])
def local_log_add_exp(fgraph, node):
    """``log(exp(x) + exp(y) + ...)`` as ``logaddexp(x, y, ...)``: the largest term taken
    out, so that ``exp`` cannot overflow and a tiny term is not lost."""
    # log(exp(x) + exp(y)) -> logaddexp(x, y) (and with more terms)
    if scalar_op(node) != ts.log:
        return False
    (arg,) = node.inputs
    add = arg.owner
    if not isinstance(scalar_op(add), ts.Add):
        return False
    xs = []
    for i in add.inputs:
        if not _is_op(i, ts.exp):
            return False
        xs.append(i.owner.inputs[0])
    if not all(is_float(x) for x in xs):
        return False
    return fit(node.outputs[0], tm.logaddexp(*xs), add.inputs)


def _float_const(dtype, value):
    return typed_constant(value, dtype)


@stabilize()
@local_optimizer([tm.log])
def local_logdiffexp(fgraph, node):
    """``log(exp(x) - exp(y))`` as ``x + log1mexp(y - x)`` (``x`` itself where ``y`` is
    ``-inf``), which does not overflow and keeps the digits of a difference near 0."""
    # log(exp(x) - exp(y)) -> switch(y == -inf, x, x + log1mexp(y - x))
    if scalar_op(node) != ts.log:
        return False
    sub = node.inputs[0].owner
    if not isinstance(scalar_op(sub), ts.Sub):
        return False
    a, b = sub.inputs
    if not (_is_op(a, ts.exp) and _is_op(b, ts.exp)):
        return False
    x, y = a.owner.inputs[0], b.owner.inputs[0]
    if not (is_float(x) and is_float(y)):
        return False
    neg_inf = _float_const(y.dtype, -np.inf)
    new = tm.switch(tm.eq(y, neg_inf), x, x + tm.log1mexp(y - x))
    return fit(node.outputs[0], new, sub.inputs)


def _positive_const(var) -> bool:
    v = const_value(var)
    return v is not None and np.asarray(v).dtype.kind in "iuf" and bool(v > 0)


# nonfinite_unsafe as well: at x = -inf the written log(1 / x) is log(-0.0) = -inf, and
# -log(x) NaN (at x = -0.0, NaN and inf).
@stabilize(NONFINITE_UNSAFE)
@local_optimizer([tm.log])
def local_log_div(fgraph, node):
    """``log(1 / x)`` as ``-log(x)`` (and ``log(c / x)``, ``log(x / c)`` with a positive
    constant ``c`` as differences of logs): ``1 / x`` overflows for a subnormal ``x``."""
    # log(1 / x) -> -log(x) ; log(c / x) -> log(c) - log(x) ; log(x / c) -> log(x) - log(c)
    if scalar_op(node) != ts.log:
        return False
    inner = node.inputs[0].owner
    sop = scalar_op(inner)
    if sop == ts.reciprocal or (isinstance(sop, ts.TrueDiv) and is_const(inner.inputs[0], 1)):
        x = inner.inputs[-1]
        new = tm.neg(tm.log(x))
    elif isinstance(sop, ts.TrueDiv):
        num, den = inner.inputs
        if _positive_const(num) and not _positive_const(den):
            new = tm.log(num) - tm.log(den)
        elif _positive_const(den) and not _positive_const(num):
            new = tm.log(num) - tm.log(den)
        else:
            return False
        x = num
    else:
        return False
    if not is_float(node.outputs[0]):
        return False
    return fit(node.outputs[0], new, inner.inputs)


RULES.specialize(NONFINITE_UNSAFE)(local_log_div)


def _nan_unless(cond, value):
    """``value`` where ``cond``, NaN elsewhere (what the composition it replaces gave)."""
    return tm.switch(cond, value, typed_constant(np.nan, value.dtype))


@RULES.canonicalize("stabilize")
@local_optimizer([tm.sqrt, tm.sqr, tm.mul], needs=[type(ts.sqrt)])
def local_sqrt_sqr(fgraph, node):
    """``sqrt(x**2)`` as ``|x|`` (``x**2`` overflows for ``|x| > 1.3e154`` in float64),
    and ``sqrt(x)**2`` as ``x`` (NaN for ``x < 0``, as before)."""
    # sqrt(sqr(x)) -> abs(x) ; sqrt(x * x) -> abs(x)
    # sqr(sqrt(x)) -> switch(x >= 0, x, nan) ; sqrt(x) * sqrt(x) -> the same
    sop = scalar_op(node)
    if sop == ts.sqrt:
        inner = node.inputs[0].owner
        isop = scalar_op(inner)
        if isop == ts.sqr:
            x = inner.inputs[0]
        elif isinstance(isop, ts.Mul) and len(inner.inputs) == 2:
            x = inner.inputs[0]
            if inner.inputs[1] is not x:
                return False
        else:
            return False
        if not is_float(inner.outputs[0]):
            # An integer's square wraps in its dtype (uint8 200 * 200 is 64, whose root
            # is 8, not 200: fuzz --values wide, seed 10, graph 440).
            return False
        return fit(node.outputs[0], tm.abs(x), inner.inputs)
    if sop == ts.sqr:
        s = node.inputs[0]
    elif isinstance(sop, ts.Mul) and len(node.inputs) == 2 and node.inputs[1] is node.inputs[0]:
        s = node.inputs[0]
    else:
        return False
    if not _is_op(s, ts.sqrt):
        return False
    x = s.owner.inputs[0]
    if not is_float(node.outputs[0]):
        return False
    xf = fit(node.outputs[0], x)
    if xf is None:
        return False
    return fit(node.outputs[0], _nan_unless(tm.ge(x, 0), xf), [x])


RULES.specialize("stabilize")(local_sqrt_sqr)


@RULES.canonicalize(NONFINITE_UNSAFE, "stabilize")
@local_optimizer([tm.log1p])
def local_log1p_expm1(fgraph, node):
    """``log1p(expm1(x))`` as ``x`` (``expm1`` overflows beyond 709 in float64)."""
    # log1p(expm1(x)) -> x
    arg = node.inputs[0]
    if scalar_op(node) != ts.log1p or not _is_op(arg, ts.expm1):
        return False
    x = arg.owner.inputs[0]
    if not is_float(x):
        return False
    return fit(node.outputs[0], x)


# outer op, inner op -> (the domain of the inner op's argument, the composition)
_INVERSE_PAIRS = {
    (ts.exp, ts.log1p): (lambda x: tm.ge(x, -1), lambda x: 1 + x),
    (ts.expm1, ts.log): (lambda x: tm.ge(x, 0), lambda x: x - 1),
    (ts.expm1, ts.log1p): (lambda x: tm.ge(x, -1), lambda x: x),
    (ts.exp, ts.log1mexp): (lambda x: tm.le(x, 0), lambda x: -tm.expm1(x)),
    (ts.expm1, ts.log1mexp): (lambda x: tm.le(x, 0), lambda x: -tm.exp(x)),
    (ts.softplus, ts.log): (lambda x: tm.ge(x, 0), tm.log1p),
    (ts.log1mexp, ts.log): (lambda x: tm.ge(x, 0), lambda x: tm.log1p(-x)),
    (ts.log1mexp, ts.log1mexp): (lambda x: tm.le(x, 0), lambda x: x),
    (ts.exp, ts.softplus): (None, lambda x: 1 + tm.exp(x)),
    (ts.expm1, ts.softplus): (None, tm.exp),
}


@RULES.specialize("stabilize")
@local_optimizer([tm.exp, tm.expm1, tm.softplus, tm.log1mexp])
def local_exp_log_inverses(fgraph, node):
    """An exponential of a logarithm (``exp(log1p(x))``, ``expm1(log(x))``,
    ``exp(log1mexp(x))``, ``exp(softplus(x))``...) as the plain expression, NaN outside
    the logarithm's domain as before: no rounding through the pair, no overflow."""
    # exp(log1p(x)) -> switch(x >= -1, 1 + x, nan) ; expm1(log(x)) -> switch(x >= 0, x - 1, nan)
    # expm1(log1p(x)) -> switch(x >= -1, x, nan)
    # exp(log1mexp(x)) -> switch(x <= 0, -expm1(x), nan)
    # expm1(log1mexp(x)) -> switch(x <= 0, -exp(x), nan)
    # softplus(log(x)) -> switch(x >= 0, log1p(x), nan)
    # log1mexp(log(x)) -> switch(x >= 0, log1p(-x), nan)
    # log1mexp(log1mexp(x)) -> switch(x <= 0, x, nan)
    # exp(softplus(x)) -> 1 + exp(x) ; expm1(softplus(x)) -> exp(x)
    arg = node.inputs[0]
    inner = arg.owner
    found = _INVERSE_PAIRS.get((scalar_op(node), scalar_op(inner)))
    if found is None:
        return False
    x = inner.inputs[0]
    if not is_float(x):
        return False
    domain, value = found
    new = value(x)
    if domain is not None:
        new = _nan_unless(domain(x), new)
    return fit(node.outputs[0], new, [x])


def _exp_ratio(e, den):
    """``e / den`` computed stably, where ``e`` is ``exp(a)`` and ``den`` a sum of
    exponentials one of which is ``e`` itself, or ``exp(a) - exp(b)``; else None."""
    owner = den.owner
    sop = scalar_op(owner)
    a = e.owner.inputs[0]
    if isinstance(sop, ts.Add):
        if e not in owner.inputs or not all(_is_op(t, ts.exp) for t in owner.inputs):
            return None
        # exp(a) / sum_i exp(x_i) = 1 / sum_i exp(x_i - a): the differences are exact
        # for close terms (a - logaddexp(...) is not: it rounds at the sum's magnitude)
        others = [t.owner.inputs[0] for t in owner.inputs if t is not e]
        if len(others) == 1:
            return tm.sigmoid(a - others[0])
        return tm.reciprocal(tm.add(1, *[tm.exp(b - a) for b in others]))
    if isinstance(sop, ts.Sub):
        p, q = owner.inputs
        if not (_is_op(p, ts.exp) and _is_op(q, ts.exp)):
            return None
        b, c = p.owner.inputs[0], q.owner.inputs[0]
        if e is p:  # exp(b) / (exp(b) - exp(c)) = -1 / expm1(c - b)
            return tm.neg(tm.reciprocal(tm.expm1(c - b)))
        if e is q:  # exp(c) / (exp(b) - exp(c)) = 1 / expm1(b - c)
            return tm.reciprocal(tm.expm1(b - c))
    return None


@stabilize()
@local_optimizer([tm.mul, tm.true_div], requirements=(count_scalar_ops,), needs=[type(ts.exp)])
def local_exp_over_add_exp(fgraph, node):
    """``exp(x) / (exp(x) + exp(y))`` (the gradient of ``log(exp(x) + exp(y))``) as
    ``sigmoid(x - y)`` (``1 / (1 + exp(y - x) + exp(z - x))`` for more terms), and
    ``exp(x) / (exp(x) - exp(y))`` (the gradient of ``log(exp(x) - exp(y))``) as
    ``-1 / expm1(y - x)``: no ``inf / inf``."""
    # exp(x) * (g / (exp(x) + exp(y))) -> g * sigmoid(x - y)
    # exp(x) * (g / (exp(x) + exp(y) + exp(z))) -> g / (1 + exp(y - x) + exp(z - x))
    # exp(x) * (g / (exp(x) - exp(y))) -> g * (-1 / expm1(y - x))
    # exp(y) * (g / (exp(x) - exp(y))) -> g * (1 / expm1(x - y)) ; and as (g * exp(x)) / (...)
    if not graph_holds(fgraph, ts.exp):
        return False
    sop = scalar_op(node)
    if isinstance(sop, ts.TrueDiv):
        num, den = node.inputs
        factors = list(num.owner.inputs) if isinstance(scalar_op(num.owner), ts.Mul) else [num]
        others = []
    elif isinstance(sop, ts.Mul):
        div = next((i for i in node.inputs if isinstance(scalar_op(i.owner), ts.TrueDiv)), None)
        if div is None:
            return False
        num, den = div.owner.inputs
        factors = list(node.inputs)
        factors.remove(div)
        others = [num]
    else:
        return False
    if not isinstance(scalar_op(den.owner), (ts.Add, ts.Sub)) or not is_float(den):
        return False
    for e in factors:
        if not _is_op(e, ts.exp):
            continue
        ratio = _exp_ratio(e, den)
        if ratio is not None:
            rest = list(factors)
            rest.remove(e)
            new = tm.mul(*rest, *others, ratio) if rest or others else ratio
            return fit(node.outputs[0], new, node.inputs)
    return False


def _reciprocal_arg(var):
    """``x`` when ``var`` is ``1 / x`` or ``reciprocal(x)``."""
    owner = var.owner
    sop = scalar_op(owner)
    if sop == ts.reciprocal:
        return owner.inputs[0]
    if isinstance(sop, ts.TrueDiv) and is_const(owner.inputs[0], 1):
        return owner.inputs[1]
    return None


@stabilize()
@local_optimizer([tm.true_div, tm.reciprocal])
def local_div_by_reciprocal(fgraph, node):
    """``a / (1 / x)`` as ``a * x``: ``1 / x`` overflows for a subnormal ``x`` and its
    reciprocal is then 0 (the gradient of ``log(1 / x)`` divides by ``1 / x``)."""
    # a / (1 / x) -> a * x ; 1 / (1 / x) -> x ; reciprocal(reciprocal(x)) -> x
    sop = scalar_op(node)
    if sop == ts.reciprocal:
        a, r = None, node.inputs[0]
    elif isinstance(sop, ts.TrueDiv):
        a, r = node.inputs
    else:
        return False
    x = _reciprocal_arg(r)
    if x is None or not is_float(node.outputs[0]):
        return False
    if a is None or is_const(a, 1):
        return fit(node.outputs[0], x, node.inputs)
    d = node.outputs[0].dtype
    if a.dtype != d and x.dtype != d:
        # Integers' product in their own dtype wraps where the quotient divided in
        # floats: uint16 x / (1 / x) of 65535 was 1.0 (x * x in uint16), not 4.29e9.
        a, x = (v if v.dtype == d else cast(v, d) for v in (a, x))
    return fit(node.outputs[0], tm.mul(a, x), node.inputs)


RULES.canonicalize()(local_div_by_reciprocal)


def _identity(x):
    return x


# f(g(x)) for a function and its inverse -> (the domain of g's argument where the pair
# is defined, the composition): Theano's local_func_inv, with the domain kept (Theano
# gave x for arccosh(cosh(x)), which is |x|).
_FUNC_INV = {
    (ts.deg2rad, ts.rad2deg): (None, _identity),
    (ts.rad2deg, ts.deg2rad): (None, _identity),
    (ts.sinh, ts.arcsinh): (None, _identity),
    (ts.arcsinh, ts.sinh): (None, _identity),
    (ts.tanh, ts.arctanh): (lambda x: tm.le(abs(x), 1), _identity),
    (ts.arctanh, ts.tanh): (None, _identity),
    (ts.cosh, ts.arccosh): (lambda x: tm.ge(x, 1), _identity),
    (ts.arccosh, ts.cosh): (None, abs),
}


@RULES.canonicalize()
@stabilize()
@local_optimizer(
    [tm.deg2rad, tm.rad2deg, tm.sinh, tm.arcsinh, tm.tanh, tm.arctanh, tm.cosh, tm.arccosh]
)
def local_func_inv(fgraph, node):
    """A function of its inverse (``arcsinh(sinh(x))``, ``arctanh(tanh(x))``,
    ``deg2rad(rad2deg(x))``...) as its argument, NaN outside the inverse's domain as
    before: ``sinh(800)`` overflows and ``tanh(20)`` rounds to 1, where the composition
    is just ``x``."""
    # arcsinh(sinh(x)) -> x ; sinh(arcsinh(x)) -> x ; arctanh(tanh(x)) -> x
    # tanh(arctanh(x)) -> switch(|x| <= 1, x, nan) ; cosh(arccosh(x)) -> switch(x >= 1, x, nan)
    # arccosh(cosh(x)) -> |x| ; deg2rad(rad2deg(x)) -> x ; rad2deg(deg2rad(x)) -> x
    inner = node.inputs[0].owner
    found = _FUNC_INV.get((scalar_op(node), scalar_op(inner)))
    if found is None:
        return False
    x = inner.inputs[0]
    if not is_float(x) or x.dtype != node.outputs[0].dtype:
        return False
    domain, value = found
    new = value(x)
    if domain is not None:
        new = _nan_unless(domain(x), new)
    return fit(node.outputs[0], new, [x])


# In specialize, as PyTensor's: after stabilize has paired exp(x) with 1 + exp(x) into
# sigmoids (exp(x) * exp(x) / (1 + exp(x))**2 would otherwise become exp(2x) / ...).
@RULES.specialize("stabilize")
@local_optimizer([tm.mul, tm.true_div], requirements=(count_scalar_ops,), needs=[type(ts.exp)])
def local_mul_exp(fgraph, node):
    """A product or quotient of exponentials as the exponential of the sum or
    difference (PyTensor's ``local_mul_exp_to_exp_add``, ``local_div_exp_to_exp_sub``):
    ``exp(800) * exp(-800)`` is ``inf * 0``, ``exp(0)`` is 1."""
    # exp(x) * exp(y) * z -> exp(x + y) * z ; exp(x) / exp(y) -> exp(x - y)
    if not graph_holds(fgraph, ts.exp):
        return False
    out = node.outputs[0]
    if not is_float(out):
        return False
    sop = scalar_op(node)
    if isinstance(sop, ts.TrueDiv):
        a, b = node.inputs
        if not (_is_op(a, ts.exp) and _is_op(b, ts.exp)):
            return False
        return fit(out, tm.exp(a.owner.inputs[0] - b.owner.inputs[0]), node.inputs)
    if not isinstance(sop, ts.Mul):
        return False
    exps = [i for i in node.inputs if _is_op(i, ts.exp) and i.dtype == out.dtype]
    if len(exps) < 2:
        return False
    rest = list(node.inputs)
    for e in exps:
        rest.remove(e)
    new = tm.exp(tm.add(*[e.owner.inputs[0] for e in exps]))
    if rest:
        new = tm.mul(new, *rest)
    return fit(out, new, node.inputs)


@stabilize()
@local_optimizer([tm.log], requirements=(count_scalar_ops,), needs=[type(ts.erf)])
def local_log_erf(fgraph, node):
    """``log(erf(x))`` as ``log1p(-erfc(x))`` from ``x = 1`` on, where ``erf(x)`` rounds
    to 1 (from ``x = 6`` in float64) and its log to 0 although the true value is
    ``-erfc(x)``."""
    # log(erf(x)) -> switch(x < 1, log(erf(x)), log1p(-erfc(x)))
    if not graph_holds(fgraph, ts.erf):
        return False
    inner = node.inputs[0].owner
    if scalar_op(node) != ts.log or scalar_op(inner) != ts.erf:
        return False
    x = inner.inputs[0]
    if not is_float(x) or x.dtype != node.outputs[0].dtype:
        return False
    if isinstance(scalar_op(x.owner), ts.Minimum) and is_const(x.owner.inputs[1], 1):
        return False  # the small-x branch this rule wrote
    small = tm.log(tm.erf(tm.minimum(x, 1)))  # (the branch not taken stays finite)
    new = tm.switch(tm.lt(x, 1), small, tm.log1p(-tm.erfc(x)))
    return fit(node.outputs[0], new, [x])


def _leaky_slope(a, b, x):
    """The slope ``alpha`` of ``a * x + b * |x|`` for negative ``x`` when the expression is
    a (leaky) relu with ``0 <= alpha <= 1`` in ``x``'s dtype (``a + b == 1``), else None."""
    a, b = np.asarray(a, x.dtype), np.asarray(b, x.dtype)
    if a + b != 1:
        return None
    alpha = a - b
    return alpha if 0 <= alpha <= 1 else None


@stabilize()
@local_optimizer([tm.mul, tm.add], requirements=(count_scalar_ops,), needs=[ts.Abs])
def local_relu_maximum(fgraph, node):
    """The relu as Theano writes it, ``0.5 * (x + |x|)``, as ``maximum(x, 0)``; the leaky
    relu ``a * x + b * |x|`` (``a + b == 1``) as ``maximum(x, (a - b) * x)``.

    ``x + |x|`` overflows from half the dtype's largest value on (a float32 relu of
    ``2e38`` was inf) and is NaN at ``x = -inf`` (``-inf + inf``); ``maximum`` is exact
    for every ``x``. The gradient, built from the written form, is unchanged."""
    # mul(0.5, add(x, abs(x))) -> maximum(x, 0)
    # add(mul(a, x), mul(b, abs(x))) -> maximum(x, mul(a - b, x))
    if not graph_holds(fgraph, ts.abs_):
        return False
    out = node.outputs[0]
    if not is_float(out) or len(node.inputs) != 2:
        return False
    sop = scalar_op(node)
    if isinstance(sop, ts.Mul):
        for half, s in (node.inputs, node.inputs[::-1]):
            if not isinstance(scalar_op(s.owner), ts.Add) or len(s.owner.inputs) != 2:
                continue
            u, v = s.owner.inputs
            x = u if abs_arg(v) is u else v if abs_arg(u) is v else None
            if x is None or x.dtype != out.dtype or not is_const(half, 0.5):
                continue
            if not is_scalar_like(half):
                return False  # an array of halves broadcasts x + |x| to its own shape
            return fit(out, tm.maximum(x, typed_constant(0, x.dtype)), [x])
        return False
    if not isinstance(sop, ts.Add):
        return False
    terms = []
    for t in node.inputs:
        if not isinstance(scalar_op(t.owner), ts.Mul) or len(t.owner.inputs) != 2:
            return False
        p, q = t.owner.inputs
        c, y = (const_value(p), q) if const_value(p) is not None else (const_value(q), p)
        if c is None or not is_scalar_like(p if y is q else q):
            return False
        terms.append((c, y))
    (a, x), (b, ax) = terms
    if abs_arg(x) is ax:
        (a, x), (b, ax) = (b, ax), (a, x)
    if abs_arg(ax) is not x or x.dtype != out.dtype:
        return False
    alpha = _leaky_slope(a, b, x)
    if alpha is None:
        return False
    neg = typed_constant(0, x.dtype) if alpha == 0 else tm.mul(typed_constant(alpha, x.dtype), x)
    return fit(out, tm.maximum(x, neg), [x])


@stabilize()
@local_optimizer([tm.true_div], requirements=(count_scalar_ops,), needs=[ts.Abs])
def local_softsign(fgraph, node):
    """The softsign written out, ``x / (1 + |x|)``, as ``nnet.softsign(x)``: the quotient
    is ``inf / inf`` at ``x = +-inf``, where the value is +-1. The gradient, built from
    the written form, is unchanged."""
    # true_div(x, add(1, abs(x))) -> softsign(x)
    if not graph_holds(fgraph, ts.abs_):
        return False
    x, den = node.inputs
    out = node.outputs[0]
    if not is_float(x) or x.dtype != out.dtype:
        return False
    if not isinstance(scalar_op(den.owner), ts.Add) or len(den.owner.inputs) != 2:
        return False
    one, ax = den.owner.inputs
    if abs_arg(one) is x:
        one, ax = ax, one
    if abs_arg(ax) is not x or not is_const(one, 1) or not is_scalar_like(one):
        return False  # an array of ones broadcasts the quotient to its own shape
    return fit(out, softsign(x), [x])
