"""``theano.tensor.slinalg``'s path: the ops live in :mod:`theano_dag.tensor.linalg`, but
for :func:`kron`, which here is Theano's (``linalg.kron`` is numpy's)."""

from theano_dag.tensor.basic import as_tensor_variable
from theano_dag.tensor.elemwise import DimShuffle
from theano_dag.tensor.linalg import (
    Cholesky,
    CholeskyGrad,
    Expm,
    Solve,
    cho_solve,
    cholesky,
    eigvalsh,
    expm,
    solve,
    solve_lower_triangular,
    solve_symmetric,
    solve_triangular,
    solve_upper_triangular,
)

__all__ = [
    "Cholesky",
    "CholeskyGrad",
    "Expm",
    "Solve",
    "cho_solve",
    "cholesky",
    "eigvalsh",
    "expm",
    "kron",
    "solve",
    "solve_lower_triangular",
    "solve_symmetric",
    "solve_triangular",
    "solve_upper_triangular",
]


def kron(a, b):
    """Theano's ``slinalg.kron``: with ``o[i..., j...] = a[i...] * b[j...]``, the
    dimensions 1 and 2 of ``o`` swapped and then merged pairwise with 0 and 3, giving
    ``a.ndim + b.ndim - 2`` dimensions. For two matrices that is ``numpy.kron``; where
    the dimensions sum to 3 the result is a vector (a vector and a matrix:
    ``numpy.kron(a, b).ravel()``; a matrix and a vector: another order). Theano code
    that passes other ranks gets Theano's values, not numpy's; for numpy's, use
    :func:`theano_dag.tensor.linalg.kron`.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dvector("a"), tt.dmatrix("b")
    >>> kron(a, b).eval({a: np.array([1.0, 2.0]), b: np.array([[1.0], [10.0]])})
    array([ 1.,  2., 10., 20.])
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.ndim + b.ndim <= 2:
        raise TypeError(
            "kron: inputs dimensions must sum to 3 or more. " f"You passed {a.ndim} and {b.ndim}."
        )
    # o = outer(a, b) with its dimensions kept: a's first, then b's.
    o = DimShuffle(a.broadcastable, list(range(a.ndim)) + ["x"] * b.ndim)(a) * DimShuffle(
        b.broadcastable, ["x"] * a.ndim + list(range(b.ndim))
    )(b)
    if o.ndim == 3:
        return o.dimshuffle(1, 0, 2).flatten()
    shape = o.shape
    merged = (shape[0] * shape[2], shape[1] * shape[3]) + tuple(shape[i] for i in range(4, o.ndim))
    return o.dimshuffle(0, 2, 1, *range(3, o.ndim)).reshape(merged, ndim=o.ndim - 2)
