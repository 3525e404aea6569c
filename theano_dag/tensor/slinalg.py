"""``theano.tensor.slinalg``'s path: the ops live in :mod:`theano_dag.tensor.linalg`."""

from theano_dag.tensor.linalg import (
    Cholesky,
    CholeskyGrad,
    Expm,
    Solve,
    cho_solve,
    cholesky,
    eigvalsh,
    expm,
    kron,
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
