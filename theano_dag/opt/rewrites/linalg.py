"""Linear algebra: products with an inverse as solves, solves with a Cholesky factor as
triangular solves, and what the hints of ``theano_dag.tensor.hints`` allow (Theano's
``theano.sandbox.linalg`` rewrites, registered here for every graph, as PyTensor does).

``dot(inv(A), b)`` is ``solve(A, b)``: one factorization instead of an inverse and a
product, and closer to the exact value when ``A`` is ill-conditioned. A ``solve`` with
``psd(A)`` (the user's promise) goes through ``A``'s Cholesky factor. ``log(x ** p)`` is
``p * log(x)`` (``log(abs(x))`` for an even ``p``: Theano's rule gave NaN for a negative
``x``), which does not overflow where ``x ** p`` does; ``log(prod(p))`` of a value known
not negative is ``sum(log(p))``.

The hint nodes stay until ``specialize``, where ``remove_hint_nodes`` takes them out
(the rewrites that read them run in ``canonicalize`` and ``stabilize``).
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import const_value, fit, is_float, scalar_op, single_client
from theano_dag.scalar import basic as ts
from theano_dag.tensor import math as tm
from theano_dag.tensor.blas import Dot22
from theano_dag.tensor.elemwise import DimShuffle, Prod
from theano_dag.tensor.extra_ops import diag
from theano_dag.tensor.hints import Hint, is_positive, is_psd, is_symmetric
from theano_dag.tensor.linalg import Cholesky, Det, MatrixInverse, Solve, cholesky
from theano_dag.tensor.math import Dot

__all__ = [
    "inv_as_solve",
    "local_det_chol",
    "local_log_pow",
    "local_log_prod_sqr",
    "no_transpose_symmetric",
    "psd_solve_with_chol",
    "remove_hint_nodes",
    "tag_solve_triangular",
    "transinv_to_invtrans",
]


def _transposed(v):
    """``x`` when ``v`` is ``x.T`` of a matrix, else None."""
    owner = v.owner
    if owner is not None and type(owner.op) is DimShuffle and owner.op.new_order == (1, 0):
        return owner.inputs[0]
    return None


def _inverted(v):
    """``A`` when ``v`` is ``inv(A)``, else None."""
    owner = v.owner
    return owner.inputs[0] if owner is not None and type(owner.op) is MatrixInverse else None


@RULES.specialize()
@local_optimizer([Hint])
def remove_hint_nodes(fgraph, node):
    """A hint's node is its input, once the rewrites that read hints have run."""
    return [node.inputs[0]]


@RULES.canonicalize()
@local_optimizer([DimShuffle])
def transinv_to_invtrans(fgraph, node):
    """``inv(X).T`` is ``inv(X.T)`` (Theano's name): the transpose meets ``X``, where
    other rewrites see it; not where ``inv(X)`` is read elsewhere too (two inverses)."""
    inverse = node.inputs[0]
    x = _inverted(inverse) if node.op.new_order == (1, 0) else None
    if x is None or not single_client(fgraph, inverse):
        return False
    return [inverse.owner.op(node.op(x))]


# In canonicalize only: the transposes it removes are the user's (no later rule transposes
# a marked matrix: inv_as_solve takes a symmetric one as it is, psd_solve_with_chol
# transposes the factor).
@RULES.canonicalize()
@local_optimizer([DimShuffle])
def no_transpose_symmetric(fgraph, node):
    """The transpose of a matrix marked symmetric is the matrix."""
    x = node.inputs[0]
    if node.op.new_order != (1, 0) or x.ndim != 2 or not is_symmetric(x):
        return False
    new = fit(node.outputs[0], x)  # (a column marked symmetric is no matrix to keep)
    return [new] if new is not None else False


@RULES.stabilize()
@local_optimizer([Dot, Dot22])
def inv_as_solve(fgraph, node):
    """``dot(inv(A), b)`` is ``solve(A, b)``; ``dot(b, inv(A))`` is ``solve(A.T, b.T).T``
    (``A`` for ``A.T`` where it is marked symmetric)."""
    left, right = node.inputs
    out = node.outputs[0]
    a = _inverted(left)
    if a is not None:
        if right.ndim not in (1, 2):
            return False
        new = Solve()(a, right)
    else:
        a = _inverted(right)
        if a is None or left.ndim not in (1, 2):
            return False
        new = Solve()(a if is_symmetric(a) else a.T, left.T).T
    new = fit(out, new)
    return [new] if new is not None else False


@RULES.canonicalize()
@RULES.stabilize()
@local_optimizer([Solve])
def tag_solve_triangular(fgraph, node):
    """A general ``solve`` with a Cholesky factor (or its transpose) is a triangular
    solve of the factor's triangle."""
    if node.op.A_structure != "general":
        return False
    a, b = node.inputs
    lower = None
    if a.owner is not None and isinstance(a.owner.op, Cholesky):
        lower = a.owner.op.lower
    else:
        t = _transposed(a)
        if t is not None and t.owner is not None and isinstance(t.owner.op, Cholesky):
            lower = not t.owner.op.lower
    if lower is None:
        return False
    structure = "lower_triangular" if lower else "upper_triangular"
    return [Solve(structure, lower=lower)(a, b)]


@RULES.stabilize()
@local_optimizer([Solve])
def psd_solve_with_chol(fgraph, node):
    """A general ``solve`` with a matrix marked positive semi-definite: two triangular
    solves with its Cholesky factor ``L`` (``L y = b``, then ``L^T x = y``)."""
    a, b = node.inputs
    if node.op.A_structure != "general" or not is_psd(a):
        return False
    chol = cholesky(a)
    y = Solve("lower_triangular", lower=True)(chol, b)
    x = Solve("upper_triangular", lower=False)(chol.T, y)
    new = fit(node.outputs[0], x)
    return [new] if new is not None else False


def _symmetric(x):
    """Whether ``x`` is symmetric by its graph: marked so, or ``M M^T`` / ``M^T M``."""
    if is_symmetric(x):
        return True
    owner = x.owner
    if owner is None or not isinstance(owner.op, (Dot, Dot22)):
        return False
    left, right = owner.inputs
    return left.ndim == 2 and (_transposed(right) is left or _transposed(left) is right)


# In stabilize, where psd_solve_with_chol makes its factors (specialize makes none).
@RULES.stabilize()
@local_optimizer([Det])
def local_det_chol(fgraph, node):
    """``det(X)`` where the graph has ``L = cholesky(X)`` already: ``prod(diag(L))**2``.
    Only for an ``X`` symmetric by its graph (a factor reads one triangle: the rule
    Theano applied to any ``X`` gave the determinant of another matrix) and a factor that
    raises on a matrix that is not positive definite (one giving NaN would turn the
    determinant into NaN)."""
    (x,) = node.inputs
    if not _symmetric(x):
        return False
    for client, _ in fgraph.clients.get(x, ()):
        if client == "output":
            continue
        op = client.op
        if isinstance(op, Cholesky) and op.on_error == "raise":
            new = fit(node.outputs[0], tm.prod(diag(client.outputs[0]) ** 2))
            return [new] if new is not None else False
    return False


@RULES.canonicalize()
@local_optimizer([tm.log])
def local_log_prod_sqr(fgraph, node):
    """``log(prod(p))`` of a ``p`` known not negative (a square, an even power, a
    ``positive`` hint) is ``sum(log(p))``: no product to overflow or underflow."""
    if scalar_op(node) != ts.log:
        return False
    (x,) = node.inputs
    owner = x.owner
    if owner is None or type(owner.op) is not Prod or not is_float(x):
        return False
    p = owner.inputs[0]
    if not is_positive(p) or p.dtype != x.dtype:
        return False
    new = fit(node.outputs[0], tm.log(p).sum(axis=owner.op.axis))
    return [new] if new is not None else False


@RULES.canonicalize()
@local_optimizer([tm.log])
def local_log_pow(fgraph, node):
    """``log(x ** p)`` of a float ``x`` and a constant ``p`` is ``p * log(x)``, and
    ``p * log(abs(x))`` for an even ``p`` (Theano's rule gave NaN there for a negative
    ``x``); not for ``p = 0`` (``log(0 ** 0)`` is 0, ``0 * log(0)`` NaN)."""
    if scalar_op(node) != ts.log:
        return False
    (x,) = node.inputs
    owner = x.owner
    if owner is None or scalar_op(owner) != ts.pow:
        return False
    base, exponent = owner.inputs
    p = const_value(exponent)
    if p is None or p == 0 or not np.isfinite(p) or not is_float(base) or base.dtype != x.dtype:
        return False  # (1 ** inf is 1, inf * log(1) NaN)
    if p % 2 == 0:
        base = abs(base)
    new = fit(node.outputs[0], exponent * tm.log(base), owner.inputs)
    return [new] if new is not None else False
