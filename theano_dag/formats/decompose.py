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

__all__ = ["DECOMPOSITIONS", "decompose", "expand"]


def _c(value, like):
    """A constant of ``like``'s dtype (a float32 graph stays in float32)."""
    return ts.constant(np.asarray(value, dtype=like.dtype)[()], dtype=like.dtype)


def _bce(o, t):
    # -(t log(o) + (1 - t) log1p(-o)), a term of weight 0 taking no part
    zero, one = _c(0, o), _c(1, o)
    a = ts.switch(ts.eq(t, zero), zero, t * ts.log(o))
    b = ts.switch(ts.eq(t, one), zero, (one - t) * ts.log1p(-o))
    return (zero - a) - b  # +0 at o = t, as the op's


def _bce_grad(o, t):
    zero, one = _c(0, o), _c(1, o)
    a = ts.switch(ts.eq(t, zero), zero, -t / o)
    return a + ts.switch(ts.eq(t, one), zero, (one - t) / (one - o))


def _sigmoid_bce(z, t):
    # log1p(exp(-|z|)) plus the linear part, (1 - t) z above 0 and -t z below, each 0
    # where its weight is (so that z = +-inf with the matching t gives 0, not inf - inf)
    zero, one = _c(0, z), _c(1, z)
    linear = ts.switch(
        ts.gt(z, zero),
        ts.switch(ts.eq(t, one), zero, (one - t) * z),
        ts.switch(ts.eq(t, zero), zero, -t * z),
    )
    return ts.log1p(ts.exp(-ts.abs_(z))) + linear


def _sech2(x):
    if x.dtype.startswith("complex"):  # (|x| is the modulus: the real formula does not extend)
        c = ts.cosh(x)
        return _c(1, x) / (c * c)
    one = _c(1, x)
    e = ts.exp(_c(-2, x) * ts.abs_(x))  # in (0, 1]: never overflows, 1 + e never cancels
    return _c(4, x) * e / ((one + e) * (one + e))


def _exp_sub(x, y):
    return ts.switch(ts.eq(x, y), _c(1, x), ts.exp(x - y))


def _softsign(x):
    return ts.switch(ts.isinf(x), ts.sgn(x), x / (_c(1, x) + ts.abs_(x)))


def _logaddexp(x, y):
    # x == y first: inf - inf would be NaN; a NaN falls through to the last branch
    return ts.switch(
        ts.eq(x, y),
        x + _c(np.log(2.0), x),
        ts.switch(ts.gt(x, y), x + ts.log1p(ts.exp(y - x)), y + ts.log1p(ts.exp(x - y))),
    )


def _log1mexp(x):
    near_0 = ts.log(-ts.expm1(x))
    return ts.switch(ts.lt(x, _c(-np.log(2.0), x)), ts.log1p(-ts.exp(x)), near_0)


def _xlogx(x):
    return ts.switch(ts.eq(x, _c(0, x)), _c(0, x), x * ts.log(x))


def _xlogy0(x, y):
    return ts.switch(ts.eq(x, _c(0, x)), _c(0, x), x * ts.log(y))


#: our scalar op's class -> its scalar graph, a function of the op's inputs (cast to the
#: op's output dtype first)
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
    res = build(*xs)
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
