"""BLAS: a ``dot`` plus an accumulation becomes one ``Gemm``, ``Gemv`` or ``Ger`` call.

``b*z + a*dot(x, y)`` on matrices is ``Gemm(z, a, x, y, b)``, on a matrix and a vector
``Gemv``; ``A + a*outer(x, y)`` is ``Ger``. The rules run in the ``blas`` EquilibriumDB
(position 1.7), before ``fma`` would turn ``a*dot + z`` into a fused multiply-add. A
``dot`` of two matrices left alone becomes ``Dot22``. The inplace versions (which
overwrite ``z``) come later, from the ``inplace`` pass.

Like BLAS, a Gemm or Gemv whose ``b`` is 0 never reads ``z``: an inf or NaN there is
dropped where ``0*z`` is NaN. ``local_gemm`` therefore takes ``b`` out of the
accumulator only when it is a constant known not to be 0; any other ``b*z`` (``0*z``,
a variable ``b``) is accumulated whole, with ``b = 1``, which is exact.
``local_gemm_scaled_accumulator`` then takes such a ``b`` out as well (``gemm(b*z, a, x,
y, 1) -> gemm(z, a, x, y, b)``, one elementwise pass fewer); it is tagged
``nonfinite_unsafe``, and ``mode.excluding("nonfinite_unsafe")`` keeps the IEEE result.
"""

from __future__ import annotations

from theano_dag import scalar as ts
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.algebra import NONFINITE_UNSAFE
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import (
    const_value,
    fit,
    is_float,
    is_scalar_like,
    scalar_op,
    single_client,
    typed_constant,
)
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import cast
from theano_dag.tensor.blas import (
    Dot22,
    dot22,
    dot22scalar,
    gemm_no_inplace,
    gemv_no_inplace,
    ger,
)
from theano_dag.tensor.elemwise import DimShuffle
from theano_dag.tensor.math import Dot
from theano_dag.tensor.type import integer_dtypes

__all__ = [
    "local_gemm",
    "local_gemm_scaled_accumulator",
    "local_dot22",
    "local_dot22_to_dot22scalar",
]


def _squeezed(v):
    """The scalar-like ``v`` as a 0-d variable (the 0-d one it was broadcast from)."""
    if not v.ndim:
        return v
    owner = v.owner
    if owner is not None and isinstance(owner.op, DimShuffle) and not owner.inputs[0].ndim:
        return owner.inputs[0]
    return DimShuffle(v.broadcastable, [])(v)


# The dtypes of BLAS's products (Theano's Dot22 takes complex matrices too).
_DOT22_DTYPES = ("float32", "float64", "complex64", "complex128")


def _as_scalar(v, dtype):
    """``v`` (a broadcastable-everywhere tensor) as a 0-d tensor of ``dtype``, or None."""
    if v.ndim and not is_scalar_like(v):
        return None
    c = const_value(v)
    if c is not None:
        return typed_constant(c, dtype)
    if v.dtype != dtype:
        return None
    return _squeezed(v)


def _scaled(fgraph, term, dtype):
    """``(scale, base)`` with ``term = scale * base`` (scale a 0-d tensor)."""
    owner = term.owner
    sop = scalar_op(owner)
    if sop is not None and single_client(fgraph, term):
        if isinstance(sop, ts.Neg):
            return typed_constant(-1, dtype), owner.inputs[0]
        if isinstance(sop, ts.Mul) and len(owner.inputs) == 2:
            for i, j in ((0, 1), (1, 0)):
                s = _as_scalar(owner.inputs[i], dtype)
                if s is not None and not is_scalar_like(owner.inputs[j]):
                    return s, owner.inputs[j]
    return typed_constant(1, dtype), term


def _transposed_dot(var):
    """The ``dot(x, y)`` node when ``var`` is ``dot(x, y).T``, else None."""
    owner = var.owner
    if owner is None or not isinstance(owner.op, DimShuffle) or owner.op.new_order != (1, 0):
        return None
    d = owner.inputs[0].owner
    return d if d is not None and isinstance(d.op, (Dot, Dot22)) else None


def _is_dot(var) -> bool:
    """Whether ``var`` is a dot, or the transpose of one."""
    owner = var.owner
    if owner is None:
        return False
    return isinstance(owner.op, (Dot, Dot22)) or _transposed_dot(var) is not None


def _outer_vectors(x, y):
    """``(u, v)`` when ``dot(x, y)`` is ``outer(u, v)`` (a column times a row)."""
    xo, yo = x.owner, y.owner
    if xo is None or yo is None:
        return None
    if not (isinstance(xo.op, DimShuffle) and isinstance(yo.op, DimShuffle)):
        return None
    if xo.op.new_order != (0, "x") or yo.op.new_order != ("x", 0):
        return None
    return xo.inputs[0], yo.inputs[0]


def _blas_call(z, alpha, x, y, beta):
    """The Gemm/Gemv/Ger computing ``beta*z + alpha*dot(x, y)``, or None."""
    dtype = z.dtype
    if not (x.dtype == y.dtype == dtype):
        return None
    if x.ndim == 2 and y.ndim == 2:
        uv = _outer_vectors(x, y)
        if uv is not None and z.ndim == 2 and const_value(beta) == 1:
            return ger(z, alpha, *uv)
        if z.ndim == 2:
            return gemm_no_inplace(z, alpha, x, y, beta)
    elif x.ndim == 2 and y.ndim == 1 and z.ndim == 1:
        return gemv_no_inplace(z, alpha, x, y, beta)
    elif x.ndim == 1 and y.ndim == 2 and z.ndim == 1:
        return gemv_no_inplace(z, alpha, y.T, x, beta)
    return None


def _known_nonzero(scale) -> bool:
    """Whether ``scale`` is a constant other than 0 (a Gemm then reads its ``z``)."""
    v = const_value(scale)
    return v is not None and v != 0


# A scale of a term of a sum: ``(c, factors)`` stands for the number ``c`` times the
# product of the 0-d variables ``factors``. Numbers stay numbers (folded as they combine),
# so ``0.01 * (dot - 1e-4 * s)`` gives Gemm the constants 0.01 and -1e-6.
_ONE, _MINUS_ONE = (1, ()), (-1, ())


def _scale_times(s, t):
    return s[0] * t[0], s[1] + t[1]


def _scale_plus(s, t, dtype):
    if not s[1] and not t[1]:
        return s[0] + t[0], ()
    return 1, (tm.add(_scale_var(s, dtype), _scale_var(t, dtype)),)


def _scale_var(s, dtype):
    """The scale ``s`` as a 0-d variable of ``dtype``."""
    c, factors = s
    if not factors:
        return typed_constant(c, dtype)
    factors = [_squeezed(f) for f in factors]
    v = factors[0] if len(factors) == 1 else tm.mul(*factors)
    if c == 1:
        return v
    return tm.neg(v) if c == -1 else tm.mul(typed_constant(c, dtype), v)


def _scaled_term(s, var, dtype):
    """``s * var`` as a variable (``var`` itself, its negation or a product)."""
    c, factors = s
    if not factors:
        if c == 1:
            return var
        if c == -1:
            return tm.neg(var)
    consts = [typed_constant(c, dtype)] if c != 1 else []
    return tm.mul(*consts, *factors, var)


def _children(node, dtype):
    """``[(scale, child)]`` when ``node``'s output is the sum of its scaled children (an
    add, a sub, a neg, or a product of scalars and one array); None for any other node."""
    sop = scalar_op(node)
    if isinstance(sop, ts.Add):
        return [(_ONE, i) for i in node.inputs]
    if isinstance(sop, ts.Sub):
        return [(_ONE, node.inputs[0]), (_MINUS_ONE, node.inputs[1])]
    if isinstance(sop, ts.Neg):
        return [(_MINUS_ONE, node.inputs[0])]
    if not isinstance(sop, ts.Mul):
        return None
    c, factors, array = 1, [], None
    for i in node.inputs:
        if not is_scalar_like(i):
            if array is not None:
                return None  # a product of two arrays is a term of its own
            array = i
            continue
        v = const_value(i)
        if v is not None:
            c = c * v
        elif i.dtype == dtype:
            factors.append(i)  # as it is: a term left out of the call is scaled by it
        else:
            return None
    return None if array is None else [((c, tuple(factors)), array)]


def _is_sum(node) -> bool:
    return isinstance(scalar_op(node), (ts.Add, ts.Sub))


def _expands(fgraph, var, dtype, ndim):
    """The children of ``var``'s node when the sum around it takes its node apart: it is
    used once, has the sum's dtype and rank, and is a sum or a scaled array itself.

    A vector's inner sums stay whole: Gemv over a few hundred elements costs more than
    the fused loop it would break (a sampler's ``y - (a + dot(X, b))``: 5 us a call
    became 12), and Theano's Gemv rule reads no deeper either."""
    if var.owner is None or var.dtype != dtype or var.ndim != ndim:
        return None
    if not single_client(fgraph, var) or (ndim == 1 and _is_sum(var.owner)):
        return None
    return _children(var.owner, dtype)


def _flat_sum(fgraph, node, dtype):
    """``node``'s output as ``[[scale, term], ...]``: the sum taken apart through the
    nodes only it uses (adds, subs, negs, scalar products), equal terms gathered (their
    scales added), with the number of times each term was reached."""
    ndim = node.outputs[0].ndim
    leaves, where, counts = [], {}, {}
    stack = list(reversed(_children(node, dtype)))
    while stack:
        scale, var = stack.pop()
        kids = _expands(fgraph, var, dtype, ndim)
        if kids is not None:
            stack.extend((_scale_times(scale, s), v) for s, v in reversed(kids))
            continue
        counts[var] = counts.get(var, 0) + 1
        if var in where:
            leaf = leaves[where[var]]
            leaf[0] = _scale_plus(leaf[0], scale, dtype)
        else:
            where[var] = len(leaves)
            leaves.append([scale, var])
    return leaves, counts


def _sum_parent(fgraph, node, dtype):
    """Whether the one node using ``node``'s output takes it apart as a term of a larger
    sum: the gemm rule then runs there, on the whole sum, and not here."""
    out = node.outputs[0]
    if not single_client(fgraph, out) or (out.ndim == 1 and _is_sum(node)):
        return False
    parent = fgraph.clients[out][0][0]
    pout = parent.outputs[0]
    if pout.dtype != dtype or pout.ndim != out.ndim or len(parent.outputs) != 1:
        return False
    kids = _children(parent, dtype)
    return kids is not None and any(v is out for _, v in kids)


def _dot_parts(fgraph, var, uses):
    """``(x, y)`` when ``var`` is ``dot(x, y)`` (or ``dot(y.T, x.T).T``) that only the sum
    being rewritten reads (``uses`` times)."""
    clients = fgraph.clients.get(var, ())
    if len(clients) != uses or any(type(c[0]) is str for c in clients):
        return None
    owner = var.owner
    if isinstance(owner.op, (Dot, Dot22)):
        return tuple(owner.inputs)
    d = _transposed_dot(var)
    if d is None or not single_client(fgraph, d.outputs[0]):
        return None
    x, y = d.inputs
    return y.T, x.T


@RULES.blas()
@local_optimizer([tm.add, tm.sub, tm.neg, tm.mul], needs=[Dot, Dot22])
def local_gemm(fgraph, node):
    """A sum holding a scaled dot product and a scaled accumulator, as one BLAS call.

    The sum is taken apart as Theano's gemm optimizer does, through the adds, subs,
    negations and scalar products that only it uses, equal terms gathered: ``a*Z - b*(c*
    dot(X, Y) + d*Z)`` is ``gemm(Z, -b*c, X, Y, a - b*d)``.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> X, Y, Z, a = tt.dmatrix("X"), tt.dmatrix("Y"), tt.dmatrix("Z"), tt.dscalar("a")
    >>> fg = FunctionGraph([X, Y, Z, a], [a * (tt.dot(X, Y) - 0.5 * Z)], clone=False)
    >>> new = local_gemm.transform(fg, fg.outputs[0].owner)[0]
    >>> new.owner.op, new.owner.inputs[1] is a
    (Gemm{no_inplace}, True)
    """
    # b*z + a*dot(x, y) -> gemm(z, a, x, y, b) ; z - dot(x, y) -> gemm(z, -1, x, y, 1)
    # c*(z + a*dot(x, y)) -> gemm(z, c*a, x, y, c) ; z + z + dot(x, y) -> gemm(z, 1, x, y, 2)
    # y + dot(A, x) -> gemv(y, 1, A, x, 1) ; A + a*outer(x, y) -> ger(A, a, x, y)
    out = node.outputs[0]
    if not is_float(out) or out.ndim not in (1, 2):
        return False
    dtype = out.dtype
    if _children(node, dtype) is None or _sum_parent(fgraph, node, dtype):
        return False
    leaves, counts = _flat_sum(fgraph, node, dtype)
    if len(leaves) < 2 or not any(_is_dot(v) for _, v in leaves):
        return False  # the common case, rejected before any closer look
    for k, (alpha, base) in enumerate(leaves):
        if not _is_dot(base):
            continue
        xy = _dot_parts(fgraph, base, counts[base])
        if xy is None:
            continue
        # Accumulate into a term that is no dot product first: a dot left over becomes
        # a second call, accumulating into this one.
        order = sorted(range(len(leaves)), key=lambda j: _is_dot(leaves[j][1]))
        for j in order:
            beta, z = leaves[j]
            if j == k or z.type.broadcastable != base.type.broadcastable or z.dtype != dtype:
                continue
            # A b that may be 0 would drop an inf or nan of z: only a nonzero number goes
            # into the call, the rest scales z (local_gemm_scaled_accumulator may take it).
            if beta[0] == 0:
                z, beta = _scaled_term(beta, z, dtype), _ONE
            elif beta[1]:
                z, beta = tm.mul(_scale_var((1, beta[1]), dtype), z), (beta[0], ())
            call = _blas_call(z, _scale_var(alpha, dtype), *xy, _scale_var(beta, dtype))
            if call is None:
                continue
            rest = [_scaled_term(s, v, dtype) for i, (s, v) in enumerate(leaves) if i not in (k, j)]
            new = fit(out, tm.add(call, *rest) if rest else call)
            if new is not None:  # else another pairing of the terms may fit
                return new
    return False


@RULES.blas(NONFINITE_UNSAFE)  # a Gemm with b = 0 never reads z: 0 * nan is now 0
@local_optimizer(
    [gemm_no_inplace, gemv_no_inplace], needs=[type(gemm_no_inplace), type(gemv_no_inplace)]
)
def local_gemm_scaled_accumulator(fgraph, node):
    """A scaled accumulator of a Gemm or Gemv, its scale taken into ``b``. Where the scale
    is 0, the call no longer reads ``z``: an inf or NaN there, which made the written
    ``0*z`` NaN, is dropped (as Theano's and PyTensor's gemm rules do).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> z, x, y, b = tt.dmatrix("z"), tt.dmatrix("x"), tt.dmatrix("y"), tt.dscalar("b")
    >>> fg = FunctionGraph([z, x, y, b], [gemm_no_inplace(b * z, 1.0, x, y, 1.0)], clone=False)
    >>> new = local_gemm_scaled_accumulator.transform(fg, fg.outputs[0].owner)[0]
    >>> new.owner.inputs[0] is z, new.owner.inputs[4] is b
    (True, True)
    """
    # gemm(b*z, a, x, y, c) -> gemm(z, a, x, y, c*b) ; gemm(0*z, a, x, y, 1) -> gemm(z, a, x, y, 0)
    z, a, x, y, c = node.inputs
    scale, base = _scaled(fgraph, z, z.dtype)
    if base is z or base.dtype != z.dtype:
        return False
    cv, sv = const_value(c), const_value(scale)
    if cv is not None and sv is not None:
        beta = typed_constant(cv * sv, z.dtype)
    else:
        beta = scale if cv == 1 else tm.mul(c, scale)
    new = fit(node.outputs[0], node.op(base, a, x, y, beta))
    return [new] if new is not None else False


@RULES.blas()
@local_optimizer([Dot], fit=fit, needs=[Dot])
def local_dot22(fgraph, node):
    """A product of two float or complex matrices of one dtype, as the BLAS ``Dot22``."""
    # dot(x, y) -> dot22(x, y)   (x, y matrices)
    x, y = node.inputs
    if x.ndim != 2 or y.ndim != 2 or x.dtype not in _DOT22_DTYPES or x.dtype != y.dtype:
        return False
    return dot22(x, y)


def _as_float_scalar(v, dtype):
    """``_as_scalar``, an integer ``v`` cast to ``dtype`` (the product's dtype, which the
    mul's output has: the integer fits in it)."""
    if v.dtype in integer_dtypes and is_scalar_like(v) and const_value(v) is None:
        return cast(_squeezed(v), dtype)
    return _as_scalar(v, dtype)


@RULES.specialize()
@local_optimizer([tm.mul], fit=fit, needs=[Dot22])
def local_dot22_to_dot22scalar(fgraph, node):
    """A scalar times a ``Dot22`` (left by the gemm rules: nothing to accumulate into) is
    one ``Dot22Scalar``, which scales the product as BLAS's ``alpha``; an integer scalar
    is cast to the product's dtype when the mul keeps that dtype. It runs in specialize,
    after the ``blas`` pass, so that ``b*z + a*dot(x, y)`` still becomes Gemm.

    Theano also makes ``dot22scalar(x, y, a) * m`` of ``a * m * dot22(x, y)``; here the
    mul stays whole: one fused loop over the product, where Dot22Scalar would add a pass
    over it (measured 1-3% slower at 256 x 256).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.tensor.blas import dot22
    >>> A, i = tt.dmatrix("A"), tt.iscalar("i")
    >>> new = local_dot22_to_dot22scalar.transform(None, tt.mul(dot22(A, A), i).owner)
    >>> new[0].owner.op, new[0].owner.inputs[2].dtype
    (Dot22Scalar, 'float64')
    """
    # a * dot22(x, y) -> dot22scalar(x, y, a)   (a a scalar of the product's dtype)
    # i * dot22(x, y) -> dot22scalar(x, y, cast(i))   (i an integer scalar)
    if not isinstance(scalar_op(node), ts.Mul) or len(node.inputs) < 2:
        return False
    out = node.outputs[0]
    for k, v in enumerate(node.inputs):
        if v.owner is None or not isinstance(v.owner.op, Dot22) or v.dtype != out.dtype:
            continue
        if fgraph is not None and not single_client(fgraph, v):
            continue
        others = node.inputs[:k] + node.inputs[k + 1 :]
        scalars = [_as_float_scalar(o, out.dtype) for o in others]
        if any(s is None for s in scalars):
            continue
        a = scalars[0] if len(scalars) == 1 else tm.mul(*scalars)
        return dot22scalar(*v.owner.inputs, a)
    return False
