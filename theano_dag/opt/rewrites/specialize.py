"""Specialization: replace general operations by cheaper specific ones.

``x ** 2`` by ``sqr(x)``, ``x ** 0.5`` by ``sqrt(x)``; the Adagrad update pattern by one
fused ``Adagrad`` node, and ``a * b + c`` by ``fma(a, b, c)`` (Owl's optimiser, figure
6). FMA runs as its own pass (``fma``, after ``specialize``) so that the patterns which
contain a product plus a sum (Adagrad's ``acc + g*g``, BLAS's ``z + a*dot(x, y)``) are
recognised first.
"""

from __future__ import annotations

import copy

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.algebra import NONFINITE_UNSAFE
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import (
    abs_arg,
    const_value,
    fit,
    has_signed_zeros,
    is_float,
    is_plus_zero,
    is_scalar_like,
    lengths_kept,
    pattern,
    scalar_op,
    single_client,
    typed_constant,
)
from theano_dag.scalar.composite import Composite
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import cast
from theano_dag.tensor.elemwise import Elemwise
from theano_dag.tensor.fused import Adagrad
from theano_dag.tensor.subtensor import IncSubtensor

__all__ = [
    "local_pow_specialize",
    "local_pow_canonicalize",
    "local_pow_sqrt",
    "local_pow_specialize_device",
    "local_mul_to_sqr",
    "local_adagrad",
    "local_fma",
    "local_add_specialize",
    "local_add_specialize_float",
    "local_abs_merge",
    "local_incsubtensor_of_zeros_to_setsubtensor",
]

# x ** c for these exponents c -> a cheaper unary op (exact for every x, inf and NaN too)
_POW = {
    2.0: tm.sqr,
    -1.0: tm.reciprocal,
    -2.0: lambda x: tm.reciprocal(tm.sqr(x)),
}
# ... and those exact for every x but -inf (pow(-inf, 0.5) is inf, sqrt(-inf) is NaN)
_POW_SQRT = {
    0.5: tm.sqrt,
    -0.5: lambda x: tm.reciprocal(tm.sqrt(x)),
}


_FLOAT_X = {"pattern": "x", "constraint": is_float}


def _constant_power(node):
    """``(x, p)`` for a float ``x ** p`` node whose exponent is the constant ``p``."""
    if not isinstance(scalar_op(node), ts.Pow):
        return None
    x, y = node.inputs
    if not is_scalar_like(y) or not is_float(node.outputs[0]):
        return None
    p = const_value(y)
    return None if p is None else (x, float(p))


def _pow_rewrite(node, table, trivial):
    xp = _constant_power(node)
    if xp is None:
        return False
    x, p = xp
    out = node.outputs[0]
    xf = cast(x, out.dtype)
    if trivial and p == 1.0:
        new = xf
    elif trivial and p == 0.0:
        new = typed_constant(1, out.dtype)
    elif p in table:
        new = table[p](xf)
    else:
        return False
    return fit(out, new, node.inputs)


@RULES.canonicalize()
@local_optimizer([tm.pow])
def local_pow_canonicalize(fgraph, node):
    """``x ** 1`` is ``x`` and ``x ** 0`` is 1, already in canonicalize (Theano's rule):
    the gradient of ``x ** 2`` is ``2 * x ** 1``, and the rewrites before specialize
    (the gemm rule gathering an L2 penalty's ``W`` with the update's own) must see ``x``.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> local_pow_canonicalize.transform(None, (x ** 1).owner)[0] is x
    True
    """
    # x ** 1 -> x ; x ** 0 -> 1 (of x's shape)
    return _pow_rewrite(node, {}, trivial=True)


@RULES.specialize()
@local_optimizer([tm.pow])
def local_pow_specialize(fgraph, node):
    """Powers with a simple constant exponent."""
    # x ** 2 -> sqr(x) ; x ** -1 -> 1/x ; x ** -2 -> 1/sqr(x) ; x ** 1 -> x ; x ** 0 -> 1
    return _pow_rewrite(node, _POW, trivial=True)


# The largest integer exponent written as products (Theano's bound): 9 squarings and at
# most 9 products, each rounding once (pow rounds once, the products up to ~18 times).
_POW_MUL_MAX = 512


def _power_by_squaring(x, n):
    """``x ** n`` for an integer ``n >= 1`` in the scalar graph: ``x``, ``sqr(x)``,
    ``sqr(sqr(x))``... multiplied for each bit of ``n`` (``x ** 15`` is
    ``x * x2 * x4 * x8``: 3 squarings and 3 products)."""
    squares = [x]
    while 2 ** len(squares) <= n:
        squares.append(ts.sqr(squares[-1]))
    out = None
    for k in reversed(range(len(squares))):
        if n & (1 << k):
            out = squares[k] if out is None else out * squares[k]
    return out


@RULES.specialize()
@local_optimizer([tm.pow])
def local_pow_specialize_device(fgraph, node):
    """A power with an integer constant exponent, ``3 <= |n| <= 512``, as products of
    squares in one Composite (Theano's name): a few multiplications instead of a call
    to ``pow``; a negative exponent takes the reciprocal.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> (new,) = local_pow_specialize_device.transform(None, (x ** 15).owner)
    >>> str(new.owner.op.scalar_op)
    'Composite{mul(mul(mul(sqr(sqr(sqr(i0))), sqr(sqr(i0))), sqr(i0)), i0)}'
    """
    # x ** 15 -> Composite{x * x2 * x4 * x8}(x) ; x ** -15 -> 1 / (that)
    xp = _constant_power(node)
    if xp is None:
        return False
    x, p = xp
    if not np.isfinite(p) or p != int(p) or not 3 <= abs(p) <= _POW_MUL_MAX:
        return False
    out = node.outputs[0]
    xs = ts.get_scalar_type(out.dtype)()
    power = Elemwise(Composite([xs], [_power_by_squaring(xs, int(abs(p)))]))(cast(x, out.dtype))
    new = tm.reciprocal(power) if p < 0 else power
    return fit(out, new, node.inputs)


@RULES.specialize(NONFINITE_UNSAFE)
@local_optimizer([tm.pow])
def local_pow_sqrt(fgraph, node):
    """Square roots written as powers (not IEEE-exact at -inf: nonfinite_unsafe)."""
    # x ** 0.5 -> sqrt(x) ; x ** -0.5 -> 1/sqrt(x)
    return _pow_rewrite(node, _POW_SQRT, trivial=False)


# x * x -> sqr(x)   (floats)
local_mul_to_sqr = RULES.specialize()(
    pattern("local_mul_to_sqr", (tm.mul, _FLOAT_X, _FLOAT_X), (tm.sqr, "x"))
)


def _is_square_of(var, g) -> bool:
    """Whether ``var`` is ``g * g`` or ``sqr(g)``."""
    owner = var.owner
    sop = scalar_op(owner)
    if isinstance(sop, ts.Mul) and len(owner.inputs) == 2:
        return owner.inputs[0] is g and owner.inputs[1] is g
    return sop == ts.sqr and owner.inputs[0] is g


def _accumulator(var, g):
    """``acc`` when ``var`` is ``acc + g*g`` (an add of two terms, or ``fma(g, g, acc)``)."""
    owner = var.owner
    sop = scalar_op(owner)
    if isinstance(sop, ts.Add) and len(owner.inputs) == 2:
        a, b = owner.inputs
        if _is_square_of(b, g):
            return a
        if _is_square_of(a, g):
            return b
    if isinstance(sop, ts.FMA) and owner.inputs[0] is g and owner.inputs[1] is g:
        return owner.inputs[2]
    return None


def _adagrad_parts(node):
    """``(acc, g, eps, acc_plus_sq)`` when ``node`` divides ``g`` by ``sqrt(acc + g*g + eps)``.

    ``acc_plus_sq`` is the variable holding ``acc + g*g`` (the updated accumulator),
    or None when that sum only exists inside the denominator.
    """
    g, den = node.inputs
    return _adagrad_denominator(g, den)


def _adagrad_denominator(g, den):
    if den.owner is None or scalar_op(den.owner) != ts.sqrt:
        return None
    total = den.owner.inputs[0]
    add = total.owner
    if not isinstance(scalar_op(add), ts.Add):
        return None
    terms = list(add.inputs)
    eps = None
    for t in terms:
        if is_scalar_like(t):
            c = const_value(t)
            if c is not None and c >= 0:
                eps = float(c)
                terms.remove(t)
                break
    if eps is None:
        return None
    if len(terms) == 1:
        acc = _accumulator(terms[0], g)
        return None if acc is None else (acc, g, eps, terms[0])
    if len(terms) == 2:
        a, b = terms
        if _is_square_of(b, g):
            return a, g, eps, None
        if _is_square_of(a, g):
            return b, g, eps, None
    return None


@RULES.specialize()
@local_optimizer([tm.true_div])
def local_adagrad(fgraph, node):
    """The Adagrad update as one fused node (Owl's ``Fused_Adagrad``)."""
    # g / sqrt(acc + g*g + eps) -> Adagrad(eps)(acc, g)[1]   (and acc + g*g -> [0])
    # (lr * g) / sqrt(acc + g*g + eps) -> Adagrad(eps)(acc, g)[1] * lr
    if not isinstance(scalar_op(node), ts.TrueDiv):
        return False
    num, den = node.inputs
    # The numerator is g, or (after canonicalize) a product of g and a learning rate.
    candidates = [(num, [])]
    if isinstance(scalar_op(num.owner), ts.Mul) and single_client(fgraph, num):
        factors = num.owner.inputs
        candidates += [(f, factors[:k] + factors[k + 1 :]) for k, f in enumerate(factors)]
    found = next(
        (
            (parts, others)
            for g, others in candidates
            if (parts := _adagrad_denominator(g, den)) is not None
        ),
        None,
    )
    if found is None:
        return False
    (acc, g, eps, acc_plus_sq), others = found
    out = node.outputs[0]
    if not (is_float(acc) and acc.dtype == g.dtype == out.dtype and acc.ndim == g.ndim):
        return False
    if out.ndim != g.ndim:
        return False
    new_acc, step = Adagrad(eps)(acc, g)
    if others:
        step = tm.mul(step, *others)
    step = fit(out, step)
    if step is None:
        return False
    repl = {out: step}
    if acc_plus_sq is not None:
        new_acc = fit(acc_plus_sq, new_acc)
        if new_acc is None:
            return False
        repl[acc_plus_sq] = new_acc
    return repl


def _as_dtype(var, dtype):
    """``var`` in ``dtype``: a broadcast constant is remade in it, a variable cast."""
    if var.dtype == dtype:
        return var
    c = const_value(var) if is_scalar_like(var) else None
    if c is not None:
        return typed_constant(c, dtype, var.ndim)
    return cast(var, dtype)


@RULES.fma()
@local_optimizer([tm.add], fit=fit)
def local_fma(fgraph, node):
    """A product added to something, as one fused multiply-add."""
    # a*b + c -> fma(a, b, c) ; a*b*d + c -> fma(a, b*d, c) ; a*b + c + e -> fma(a, b, c + e)
    if not isinstance(scalar_op(node), ts.Add) or len(node.inputs) < 2:
        return False
    out = node.outputs[0]
    if not is_float(out):
        return False
    # The product must be computed in the sum's dtype (not, say, an int product that wraps
    # around); the other operands are cast, as the sum itself computes in that dtype.
    k = next(
        (
            k
            for k, term in enumerate(node.inputs)
            if isinstance(scalar_op(term.owner), ts.Mul)
            and len(term.owner.inputs) >= 2
            and term.dtype == out.dtype
            and single_client(fgraph, term)
        ),
        None,
    )
    if k is None:
        return False
    a, *bs = (_as_dtype(f, out.dtype) for f in node.inputs[k].owner.inputs)
    b = bs[0] if len(bs) == 1 else tm.mul(*bs)
    rest = [_as_dtype(r, out.dtype) for r in node.inputs[:k] + node.inputs[k + 1 :]]
    c = rest[0] if len(rest) == 1 else tm.add(*rest)
    return tm.fma(a, b, c)


@RULES.specialize()
@local_optimizer([tm.add])
def local_add_specialize(fgraph, node):
    """Zero terms of a sum go; a sum of zeros is zeros of the sum's type (Theano's
    ``local_add_specialize``; ``local_add_zero`` handles ``x + 0`` in canonicalize).
    A ``+0`` beside float terms is left to ``local_add_specialize_float``.

    >>> import theano_dag.tensor as tt
    >>> a = tt.vector("a")
    >>> s = tt.add(tt.zeros_like(a))
    >>> local_add_specialize.transform(None, s.owner)[0].type == s.type
    True
    """
    return _without_zero_terms(fgraph, node, sign_of_zero=False)


@RULES.specialize(NONFINITE_UNSAFE)
@local_optimizer([tm.add])
def local_add_specialize_float(fgraph, node):
    """``local_add_specialize`` where a ``+0`` term goes beside float terms: exact but
    for the sign of a zero (``-0.0 + 0.0`` is ``0.0``, the terms left may sum to
    ``-0.0``; ``1 / x`` tells them apart)."""
    return _without_zero_terms(fgraph, node, sign_of_zero=True)


def _without_zero_terms(fgraph, node, sign_of_zero):
    """``node`` (an add) without its zero terms, where dropping them changes the sign
    of a zero (``sign_of_zero``) or not; else False. Not where a term dropped (zeros of
    ``x``'s shape, ``x - x``) has lengths the others are not known to share: the sum
    checks them (numpy raises where they differ)."""
    # add(x, 0, y) -> add(x, y) ; add(zeros_like(a)) -> zeros of the result's type
    if not isinstance(scalar_op(node), ts.Add):
        return False
    out = node.outputs[0]
    kept = [i for i in node.inputs if not _is_zero(i)]
    if len(kept) == len(node.inputs):
        return False
    signed = any(map(has_signed_zeros, kept)) and any(map(is_plus_zero, node.inputs))
    if signed != sign_of_zero:
        return False
    if not kept:
        new = fit(out, typed_constant(0, out.dtype), node.inputs)
    elif len(kept) == 1:
        new = fit(out, kept[0], node.inputs)
    else:
        new = fit(out, tm.add(*kept), node.inputs)
    if new is None or not lengths_kept(out, new, fgraph):
        return False
    return [new]


def _is_zero(var) -> bool:
    v = const_value(var)
    return v is not None and v == 0


@RULES.specialize()
@local_optimizer([IncSubtensor])
def local_incsubtensor_of_zeros_to_setsubtensor(fgraph, node):
    """Adding into zeros is setting: no read of the old values (Theano's name).

    >>> import theano_dag.tensor as tt
    >>> y = tt.dvector("y")
    >>> z = tt.inc_subtensor(tt.zeros((4,))[:2], y)
    >>> local_incsubtensor_of_zeros_to_setsubtensor.transform(None, z.owner)[0].owner.op
    SetSubtensor{:int64:}
    """
    # inc_subtensor(zeros[idx], y) -> set_subtensor(zeros[idx], y)
    op = node.op
    if op.inplace or op.set_instead_of_inc:
        return False
    v = const_value(node.inputs[0])
    if v is None or v != 0:
        return False
    # (basic indexing only: repeated advanced indices add up, a set would keep one)
    new_op = copy.copy(op)
    new_op.set_instead_of_inc = True
    return new_op(*node.inputs, return_list=True)


@RULES.specialize()
@local_optimizer([tm.mul, tm.true_div], fit=fit)
def local_abs_merge(fgraph, node):
    """``|x| * |y|`` becomes ``|x * y|`` and ``|x| / |y|`` becomes ``|x / y|``: one
    ``abs`` where canonicalize's ``local_abs_lift`` made several (Theano's name). A
    product may also hold non-negative constants (``2 * |x| * |y| -> |2 * x * y|``).
    Only ``abs`` nodes used nowhere else: the rewrite then leaves fewer nodes.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x, y = tt.dvectors("x", "y")
    >>> fg = FunctionGraph([x, y], [abs(x) / abs(y)])
    >>> local_abs_merge.transform(fg, fg.outputs[0].owner)
    [Elemwise{abs,no_inplace}.0]
    """
    # |x| * |y| * c -> |x * y * c| (c >= 0) ; |x| / |y| -> |x / y|
    sop = scalar_op(node)
    out = node.outputs[0]
    if not isinstance(sop, (ts.Mul, ts.TrueDiv)) or not out.type.dtype.startswith("float"):
        return False
    args, n_abs = [], 0
    for v in node.inputs:
        x = abs_arg(v)
        if x is not None and single_client(fgraph, v):  # an |x| used elsewhere stays
            args.append(x)
            n_abs += 1
            continue
        c = const_value(v) if isinstance(sop, ts.Mul) and is_scalar_like(v) else None
        if c is None or not c >= 0:
            return False
        args.append(v)
    if n_abs < 2:
        return False
    return tm.abs(node.op(*args))
