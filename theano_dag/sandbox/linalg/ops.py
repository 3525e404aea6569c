"""``theano.sandbox.linalg.ops``' path: Theano's linear-algebra hints (``psd``: see
``theano_dag.tensor.hints``), the rewrites that read them and its other linear-algebra
rules (``theano_dag.opt.rewrites.linalg``, run for every graph), the ops and functions
Theano gathered here, and :func:`spectral_radius_bound`."""

from theano_dag.opt.rewrites.linalg import (
    inv_as_solve,
    local_det_chol,
    local_log_pow,
    local_log_prod_sqr,
    no_transpose_symmetric,
    psd_solve_with_chol,
    remove_hint_nodes,
    tag_solve_triangular,
    transinv_to_invtrans,
)
from theano_dag.tensor import math as tm
from theano_dag.tensor.hints import Hint, hints, is_positive, is_psd, is_symmetric, psd
from theano_dag.tensor.linalg import Cholesky, Det, MatrixInverse, Solve
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

# Theano's flag that its solves and factorizations can run (they needed scipy); these
# compute with numpy, so they always can.
imported_scipy = True

__all__ = [
    "Cholesky",
    "Det",
    "Hint",
    "MatrixInverse",
    "Solve",
    "alloc_diag",
    "cholesky",
    "det",
    "diag",
    "eig",
    "eigh",
    "eigvalsh",
    "extract_diag",
    "hints",
    "imported_scipy",
    "inv_as_solve",
    "is_positive",
    "is_psd",
    "is_symmetric",
    "local_det_chol",
    "local_log_pow",
    "local_log_prod_sqr",
    "matrix_inverse",
    "no_transpose_symmetric",
    "psd",
    "psd_solve_with_chol",
    "remove_hint_nodes",
    "solve",
    "spectral_radius_bound",
    "tag_solve_triangular",
    "trace",
    "transinv_to_invtrans",
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
