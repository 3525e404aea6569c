"""Theano's ``theano.tensor.blas`` namespace: the BLAS ops (``theano_dag.tensor.blas``),
the rewrites that make them (``theano_dag.opt.rewrites.blas``) and the helpers of
Theano's gemm optimizer that its code and tests call, written for theano_dag's graphs.

>>> import theano_dag.tensor as tt
>>> _as_scalar(tt.dscalar("a").dimshuffle("x", "x")).ndim
0
>>> _is_real_matrix(tt.dmatrix()), _is_real_matrix(tt.drow())
(True, False)
"""

from __future__ import annotations

from theano_dag import scalar as ts
from theano_dag.config import config
from theano_dag.graph.utils import InconsistencyError
from theano_dag.opt.rewrites.blas import local_dot22, local_dot22_to_dot22scalar, local_gemm
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import cast
from theano_dag.tensor.blas import *  # noqa: F403
from theano_dag.tensor.blas import __all__ as _blas_all
from theano_dag.tensor.blas import dot22, dot22scalar
from theano_dag.tensor.elemwise import DimShuffle
from theano_dag.tensor.type import integer_dtypes

__all__ = [
    *_blas_all,
    "InconsistencyError",
    "local_gemm",
    "local_dot22",
    "local_dot22_to_dot22scalar",
    "local_gemm_to_ger",
    "res_is_a",
    "_as_scalar",
    "_is_real_matrix",
    "_is_real_vector",
    "_gemm_canonicalize",
    "_factor_canonicalized",
    "_dot22",
    "_dot22scalar",
]

# Theano's private names of the two op instances.
_dot22, _dot22scalar = dot22, dot22scalar
# theano_dag's gemm rule also makes Ger from ``A + a*outer(x, y)``: Theano's separate
# gemm -> ger rewrite is that rule.
local_gemm_to_ger = local_gemm

_REAL = ("float16", "float32", "float64")
_BLAS_DTYPES = (*_REAL, "complex64", "complex128")


def res_is_a(fgraph, var, op, maxclients=None) -> bool:
    """Whether ``var`` is computed by ``op`` (and used by at most ``maxclients`` nodes)."""
    if var.owner is None or var.owner.op != op:
        return False
    return maxclients is None or len(fgraph.clients.get(var, ())) <= maxclients


def _as_scalar(res, dtype=None):
    """``res`` as a 0-d variable when it broadcasts along every dimension (the
    DimShuffles that only add dimensions seen through), an integer cast to ``dtype``
    (floatX by default) when the cast loses nothing; else None."""
    dtype = dtype or config.floatX
    if not all(res.type.broadcastable):
        return None
    while res.owner is not None and isinstance(res.owner.op, DimShuffle):
        res = res.owner.inputs[0]
    if res.ndim:
        res = res.dimshuffle()
    if res.dtype in integer_dtypes:
        return cast(res, dtype) if ts.upcast(res.dtype, dtype) == dtype else None
    return res


def _is_real_matrix(res) -> bool:
    """A float matrix neither of whose dimensions is broadcastable."""
    return res.type.dtype in _REAL and res.ndim == 2 and not any(res.type.broadcastable)


def _is_real_vector(res) -> bool:
    """A float vector whose dimension is not broadcastable."""
    return res.type.dtype in _REAL and res.ndim == 1 and not res.type.broadcastable[0]


def _gemm_canonicalize(fgraph, r, scale, rval, maxclients):
    """Append to ``rval`` the terms of ``scale * r`` as a sum: ``(scale, term)`` pairs for
    the float vectors and matrices (through add, sub, neg and scalar products), plain
    variables for the rest. Returns ``rval``."""

    def scaled(v):
        if isinstance(scale, (int, float)) and scale == 1:
            return v
        if isinstance(scale, (int, float)) and scale == -1 and v.dtype != "bool":
            return -v
        return scale * v

    if r.ndim not in (1, 2) or r.dtype not in _BLAS_DTYPES:
        rval.append(scaled(r))
        return rval
    if maxclients and len(fgraph.clients.get(r, ())) > maxclients:
        rval.append((scale, r))
        return rval
    op = r.owner.op if r.owner is not None else None
    if op == tm.sub:
        _gemm_canonicalize(fgraph, r.owner.inputs[0], scale, rval, 1)
        _gemm_canonicalize(fgraph, r.owner.inputs[1], -scale, rval, 1)
    elif op == tm.add:
        for i in r.owner.inputs:
            _gemm_canonicalize(fgraph, i, scale, rval, 1)
    elif op == tm.neg:
        _gemm_canonicalize(fgraph, r.owner.inputs[0], -scale, rval, 1)
    elif op == tm.mul:
        scalars, arrays = [], []
        for i in r.owner.inputs:
            if all(i.type.broadcastable):
                scalars.append(_as_scalar(i, i.dtype))
            elif _is_real_vector(i) or _is_real_matrix(i):
                arrays.append(i)
            else:
                rval.append((scale, r))
                return rval
        if len(arrays) != 1:
            rval.append((scale, r))
            return rval
        # the first scalar takes the scale as a term would (-1 as a negation), the
        # others multiply it: b*Z*c under a minus is (-c)*b
        factor = scale
        if scalars:
            first = scaled(scalars[0])
            factor = tm.mul(first, *scalars[1:]) if len(scalars) > 1 else first
        _gemm_canonicalize(fgraph, arrays[0], factor, rval, 1)
    else:
        rval.append((scale, r))
    return rval


def _factor_canonicalized(lst):
    """``lst`` (from ``_gemm_canonicalize``) with the pairs of one term merged: their
    scales added."""
    out: list = []
    for item in lst:
        if isinstance(item, tuple):
            s, m = item
            for k, other in enumerate(out):
                if isinstance(other, tuple) and other[1] is m:
                    out[k] = (other[0] + s, m)
                    break
            else:
                out.append(item)
        else:
            out.append(item)
    return out
