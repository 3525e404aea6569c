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

__all__ = [
    "local_gemm",
    "local_gemm_scaled_accumulator",
    "local_dot22",
    "local_dot22_to_dot22scalar",
]


def _as_scalar(v, dtype):
    """``v`` (a broadcastable-everywhere tensor) as a 0-d tensor of ``dtype``, or None."""
    if v.ndim and not is_scalar_like(v):
        return None
    c = const_value(v)
    if c is not None:
        return typed_constant(c, dtype)
    if v.dtype != dtype:
        return None
    if v.ndim:
        v = DimShuffle(v.broadcastable, [])(v)
    return v


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


def _mentions_dot(term) -> bool:
    """Whether ``term`` is a dot (or its transpose), or a scaled or negated one (a cheap
    first test)."""
    owner = term.owner
    if owner is None:
        return False
    if _is_dot(term):
        return True
    return scalar_op(owner) is not None and any(_is_dot(i) for i in owner.inputs)


def _dot_args(fgraph, var):
    """``(x, y)`` when ``var`` is a single-use ``dot(x, y)``; ``(y.T, x.T)`` when it is
    the single-use transpose of a single-use ``dot(x, y)`` (Theano lifts the transpose
    through the dot first): the transposes are views, the BLAS call reads them as such."""
    owner = var.owner
    if owner is None or not single_client(fgraph, var):
        return None
    if isinstance(owner.op, (Dot, Dot22)):
        return tuple(owner.inputs)
    d = _transposed_dot(var)
    if d is None or not single_client(fgraph, d.outputs[0]):
        return None
    x, y = d.inputs
    return y.T, x.T


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


def _terms(node):
    """``[(sign, term)]`` of an add or a sub node."""
    sop = scalar_op(node)
    if isinstance(sop, ts.Add):
        return [(1, t) for t in node.inputs]
    if isinstance(sop, ts.Sub):
        return [(1, node.inputs[0]), (-1, node.inputs[1])]
    return None


@RULES.blas()
@local_optimizer([tm.add, tm.sub], needs=[Dot, Dot22])
def local_gemm(fgraph, node):
    """A scaled dot product added to a scaled accumulator, as one BLAS call."""
    # b*z + a*dot(x, y) -> gemm(z, a, x, y, b) ; z - dot(x, y) -> gemm(z, -1, x, y, 1)
    # y + dot(A, x) -> gemv(y, 1, A, x, 1) ; A + a*outer(x, y) -> ger(A, a, x, y)
    terms = _terms(node)
    out = node.outputs[0]
    if terms is None or len(terms) < 2 or not is_float(out) or out.ndim not in (1, 2):
        return False
    if not any(_mentions_dot(t) for _, t in terms):
        return False  # the common case, rejected before any closer look
    dtype = out.dtype
    for k, (sign_d, t) in enumerate(terms):
        alpha, base = _scaled(fgraph, t, dtype)
        xy = _dot_args(fgraph, base)
        if xy is None:
            continue
        for j, (sign_z, zt) in enumerate(terms):
            if j == k or zt.type.broadcastable != base.type.broadcastable:
                continue
            beta, z = _scaled(fgraph, zt, dtype)
            if not _known_nonzero(beta):  # b = 0 would drop an inf or nan of z: keep b*z
                beta, z = typed_constant(1, dtype), zt
            if z.type.broadcastable != base.type.broadcastable or z.dtype != dtype:
                continue
            a = alpha if sign_d == 1 else tm.neg(alpha)
            b = beta if sign_z == 1 else tm.neg(beta)
            call = _blas_call(z, a, *xy, b)
            if call is None:
                continue
            rest = [
                t2 if s == 1 else tm.neg(t2) for i, (s, t2) in enumerate(terms) if i not in (k, j)
            ]
            new = tm.add(call, *rest) if rest else call
            new = fit(out, new)
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
    """A product of two float matrices of one dtype, as the BLAS ``Dot22``."""
    # dot(x, y) -> dot22(x, y)   (x, y matrices)
    x, y = node.inputs
    if x.ndim != 2 or y.ndim != 2 or not is_float(x) or x.dtype != y.dtype:
        return False
    return dot22(x, y)


@RULES.specialize()
@local_optimizer([tm.mul], fit=fit, needs=[Dot22])
def local_dot22_to_dot22scalar(fgraph, node):
    """A scalar times a ``Dot22`` (left by the gemm rules: nothing to accumulate into) is
    one ``Dot22Scalar``, which scales the product as BLAS's ``alpha``. It runs in
    specialize, after the ``blas`` pass, so that ``b*z + a*dot(x, y)`` still becomes Gemm.
    """
    # a * dot22(x, y) -> dot22scalar(x, y, a)   (a a scalar of the product's dtype)
    if not isinstance(scalar_op(node), ts.Mul) or len(node.inputs) < 2:
        return False
    out = node.outputs[0]
    for k, v in enumerate(node.inputs):
        if v.owner is None or not isinstance(v.owner.op, Dot22) or v.dtype != out.dtype:
            continue
        if not single_client(fgraph, v) if fgraph is not None else False:
            continue
        others = node.inputs[:k] + node.inputs[k + 1 :]
        scalars = [_as_scalar(o, out.dtype) for o in others]
        if any(s is None for s in scalars):
            continue
        a = scalars[0] if len(scalars) == 1 else tm.mul(*scalars)
        return dot22scalar(*v.owner.inputs, a)
    return False
