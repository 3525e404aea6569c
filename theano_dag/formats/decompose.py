"""theano_dag's compound scalar ops written in elementary ones, for the formats that
have no operator of their own for them (ONNX, PyTensor, Theano).

``binary_crossentropy``, ``sigmoid_binary_crossentropy``, ``sech2``, ``exp_sub`` and the
others below are one scalar op each in theano_dag (one loop, one C expression, a rule
for their edge values); a format without them gets their scalar graph instead, built
from ``switch``, ``log1p``, ``exp`` and the arithmetic ops, with the same branches as
the op's own formula, so that the format computes the same values at the same edges
(``binary_crossentropy`` is 0 at ``o = t = 0``, not ``0 * log(0)``). A format that has
an op natively keeps it: :func:`expand` replaces only the ops its ``has`` refuses.

>>> import numpy as np
>>> from theano_dag import scalar as ts
>>> o, t = ts.float64("o"), ts.float64("t")
>>> (out,) = expand([o, t], [ts.binary_crossentropy(o, t)], has=lambda op: False)
>>> fn = ts.Composite([o, t], [out]).impl
>>> print(fn(np.float64(0.0), np.float64(0.0)), fn(np.float64(0.5), np.float64(1.0)))
0.0 0.6931471805599453
"""

from __future__ import annotations

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import io_toposort

# (the ops' own constants and coefficients: one source for their kernels and formulas)
from theano_dag.scalar.math import (
    _LOG_SQRT_PI,
    _TAIL_SERIES,
    _TWO_OVER_SQRT_PI,
    _erfc_tail_threshold,
    _erfcx_deriv_polys,
)

__all__ = ["DECOMPOSITIONS", "decompose", "expand"]


def _c(value, like):
    """A constant of ``like``'s dtype (a float32 graph stays in float32)."""
    return ts.constant(np.asarray(value, dtype=like.dtype)[()], dtype=like.dtype)


def _bce(_, o, t):
    # -(t log(o) + (1 - t) log1p(-o)), a term of weight 0 taking no part
    zero, one = _c(0, o), _c(1, o)
    a = ts.switch(ts.eq(t, zero), zero, t * ts.log(o))
    b = ts.switch(ts.eq(t, one), zero, (one - t) * ts.log1p(-o))
    return (zero - a) - b  # +0 at o = t, as the op's


def _bce_grad(_, o, t):
    zero, one = _c(0, o), _c(1, o)
    a = ts.switch(ts.eq(t, zero), zero, -t / o)
    return a + ts.switch(ts.eq(t, one), zero, (one - t) / (one - o))


def _sigmoid_bce(_, z, t):
    # log1p(exp(-|z|)) plus the linear part, (1 - t) z above 0 and -t z below, each 0
    # where its weight is (so that z = +-inf with the matching t gives 0, not inf - inf)
    zero, one = _c(0, z), _c(1, z)
    linear = ts.switch(
        ts.gt(z, zero),
        ts.switch(ts.eq(t, one), zero, (one - t) * z),
        ts.switch(ts.eq(t, zero), zero, -t * z),
    )
    return ts.log1p(ts.exp(-ts.abs_(z))) + linear


def _sech2(_, x):
    if x.dtype.startswith("complex"):  # (|x| is the modulus: the real formula does not extend)
        c = ts.cosh(x)
        return _c(1, x) / (c * c)
    one = _c(1, x)
    e = ts.exp(_c(-2, x) * ts.abs_(x))  # in (0, 1]: never overflows, 1 + e never cancels
    return _c(4, x) * e / ((one + e) * (one + e))


def _exp_sub(_, x, y):
    return ts.switch(ts.eq(x, y), _c(1, x), ts.exp(x - y))


def _softsign(_, x):
    return ts.switch(ts.isinf(x), ts.sgn(x), x / (_c(1, x) + ts.abs_(x)))


def _logaddexp(_, x, y):
    # x == y first: inf - inf would be NaN; a NaN falls through to the last branch
    return ts.switch(
        ts.eq(x, y),
        x + _c(np.log(2.0), x),
        ts.switch(ts.gt(x, y), x + ts.log1p(ts.exp(y - x)), y + ts.log1p(ts.exp(x - y))),
    )


def _log1mexp(_, x):
    near_0 = ts.log(-ts.expm1(x))
    return ts.switch(ts.lt(x, _c(-np.log(2.0), x)), ts.log1p(-ts.exp(x)), near_0)


def _xlogx(_, x):
    return ts.switch(ts.eq(x, _c(0, x)), _c(0, x), x * ts.log(x))


def _xlogy0(_, x, y):
    return ts.switch(ts.eq(x, _c(0, x)), _c(0, x), x * ts.log(y))


def _poly(coefs, x):
    """The polynomial (lowest power first) at ``x``, by Horner."""
    acc = _c(coefs[-1], x)
    for c in coefs[-2::-1]:
        acc = acc * x + _c(c, x)
    return acc


def _erfcx_deriv(op, x):
    # the op's impl, branch for branch: the recurrence P(x) erfcx(x) - 2/sqrt(pi) Q(x)
    # below the threshold, Laplace's continued fraction of erfc from it (real x only)
    n = op.order
    p, q = _erfcx_deriv_polys(n)
    near = _poly(p, x) * ts.erfcx(x) - _c(_TWO_OVER_SQRT_PI, x) * _poly(q, x)
    if x.dtype.startswith("complex"):
        return near
    threshold, terms = op._cf(x.dtype)
    k = n + terms
    d = x + _c(k + 1, x) / (ts.sqrt(x * x + _c(2 * (k + 1), x)) + x)
    ds = {}
    for j in range(k - 1, -1, -1):
        d = x + _c((j + 1) / 2, x) / d
        if j <= n:
            ds[j] = d
    far = _c(op._tail_constant(), x)
    for j in range(n, -1, -1):
        far = far / ds[j]
    return ts.switch(ts.ge(x, _c(threshold, x)), far, near)


def _log_erfc(_, x):
    # the asymptotic series past erfc's tail threshold, log1p(-erf(x)) near 0, else log(erfc)
    v = _c(1, x) / (x * x)
    series = _c(_TAIL_SERIES[-1], x) * v
    for c in _TAIL_SERIES[-2::-1]:
        series = (series + _c(c, x)) * v
    tail = -(x * x) - ts.log(x) - _c(_LOG_SQRT_PI, x) + ts.log1p(series)
    near_0 = ts.log1p(_c(0, x) - ts.erf(x))  # 0 - erf(0) is +0: log_erfc(0) = +0
    inner = ts.switch(ts.lt(ts.abs_(x), _c(0.5, x)), near_0, ts.log(ts.erfc(x)))
    return ts.switch(ts.ge(x, _c(_erfc_tail_threshold(x.dtype), x)), tail, inner)


#: our scalar op's class -> its scalar graph, ``build(op, *inputs)`` (the inputs cast to
#: the op's output dtype first)
DECOMPOSITIONS = {
    type(ts.binary_crossentropy): _bce,
    type(ts.binary_crossentropy_grad): _bce_grad,
    type(ts.sigmoid_binary_crossentropy): _sigmoid_bce,
    type(ts.sech2): _sech2,
    type(ts.exp_sub): _exp_sub,
    type(ts.softsign): _softsign,
    type(ts.logaddexp): _logaddexp,
    type(ts.log1mexp): _log1mexp,
    type(ts.xlogx): _xlogx,
    type(ts.xlogy0): _xlogy0,
    ts.ErfcxDeriv: _erfcx_deriv,
    type(ts.log_erfc): _log_erfc,
}


def decompose(op, inputs):
    """The output of ``op`` applied to the scalar variables ``inputs``, as a graph of
    elementary scalar ops (None where ``op`` has no decomposition here).

    >>> x = ts.float32("x")
    >>> out = decompose(ts.exp_sub, [x, x])
    >>> out.dtype, out.owner.op.name, decompose(ts.exp, [x]) is None
    ('float32', 'switch', True)
    """
    build = DECOMPOSITIONS.get(type(op))
    if build is None:
        return None
    (out,) = op.make_node(*inputs).outputs
    xs = [x if x.dtype == out.dtype else ts.convert_to(out.dtype)(x) for x in inputs]
    res = build(op, *xs)
    return res if res.dtype == out.dtype else ts.convert_to(out.dtype)(res)


def expand(inputs, outputs, has):
    """``outputs`` rebuilt over the same ``inputs`` with every op that ``has(op)`` refuses
    and that has a decomposition written in elementary ops (again, where the
    decomposition's own ops are refused and have one)."""
    vmap = {v: v for v in inputs}
    for node in io_toposort(inputs, outputs):
        args = [vmap.get(v, v) for v in node.inputs]
        out = None if has(node.op) else decompose(node.op, args)
        if out is not None:
            (inner,) = expand(args, [out], has)
            vmap[node.outputs[0]] = inner
        else:
            vmap.update(zip(node.outputs, node.op.make_node(*args).outputs))
    return [vmap.get(o, o) for o in outputs]
