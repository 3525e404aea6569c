"""``theano.sandbox.linalg``'s path: the hints (``psd``: see ``theano_dag.tensor.hints``;
the rewrites that read them are in ``theano_dag.opt.rewrites.linalg``, run for every
graph), the linear-algebra functions Theano gathered here, and
:func:`spectral_radius_bound`."""

from theano_dag.tensor import math as tm
from theano_dag.tensor.hints import Hint, hints, is_positive, is_psd, is_symmetric, psd
from theano_dag.tensor.nlinalg import (
    alloc_diag,
    det,
    diag,
    eig,
    eigh,
    extract_diag,
    matrix_inverse,
    trace,
)
from theano_dag.tensor.slinalg import cholesky, eigvalsh, solve
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "Hint",
    "alloc_diag",
    "cholesky",
    "det",
    "diag",
    "eig",
    "eigh",
    "eigvalsh",
    "extract_diag",
    "hints",
    "is_positive",
    "is_psd",
    "is_symmetric",
    "matrix_inverse",
    "psd",
    "solve",
    "spectral_radius_bound",
    "trace",
]


def spectral_radius_bound(X, log2_exponent):  # noqa: N803 (Theano's argument name)
    """An upper bound of the largest absolute eigenvalue of the symmetric matrix ``X``:
    ``trace(X ** (2 ** k)) ** (2 ** -k)`` with the matrix power of ``k = log2_exponent``
    squarings (V. Pan, 1990); the larger ``k``, the tighter and the slower.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> b = spectral_radius_bound(x, 3).eval({x: np.diag([3.0, -1.0])})
    >>> bool(3.0 <= b < 3.001)
    True
    """
    X = as_tensor_variable(X)  # noqa: N806
    if X.ndim != 2:
        raise TypeError(f"spectral_radius_bound: expected a matrix, got {X.type}")
    if isinstance(log2_exponent, bool) or not isinstance(log2_exponent, int):
        raise TypeError(
            f"spectral_radius_bound: log2_exponent must be an int, got {log2_exponent!r}"
        )
    if log2_exponent <= 0:
        raise ValueError(
            f"spectral_radius_bound: log2_exponent must be positive, got {log2_exponent}"
        )
    xx = X
    for _ in range(log2_exponent):
        xx = tm.dot(xx, xx)
    return tm.pow(trace(xx), 2.0 ** (-log2_exponent))
