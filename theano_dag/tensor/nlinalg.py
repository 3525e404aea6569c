"""``theano.tensor.nlinalg``'s path: the ops live in :mod:`theano_dag.tensor.linalg`."""

from theano_dag.tensor.extra_ops import AllocDiag, ExtractDiag, diag
from theano_dag.tensor.linalg import (
    QR,
    SVD,
    Adjugate,
    Det,
    Eig,
    Eigh,
    EighGrad,
    GeneralizedEigh,
    MatrixInverse,
    MatrixPinv,
    SLogDet,
    TensorInv,
    TensorSolve,
    adjugate,
    det,
    eig,
    eigh,
    generalized_eigh,
    inv,
    lstsq,
    matrix_dot,
    matrix_inverse,
    matrix_power,
    norm,
    pinv,
    qr,
    slogdet,
    svd,
    tensorinv,
    tensorsolve,
    trace,
)
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "Adjugate",
    "AllocDiag",
    "Det",
    "Eig",
    "Eigh",
    "EighGrad",
    "ExtractDiag",
    "GeneralizedEigh",
    "MatrixInverse",
    "MatrixPinv",
    "QR",
    "SLogDet",
    "SVD",
    "TensorInv",
    "TensorSolve",
    "adjugate",
    "alloc_diag",
    "det",
    "diag",
    "eig",
    "eigh",
    "extract_diag",
    "generalized_eigh",
    "inv",
    "lstsq",
    "matrix_dot",
    "matrix_inverse",
    "matrix_power",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "svd",
    "tensorinv",
    "tensorsolve",
    "trace",
]


def alloc_diag(v):
    """The square matrix with the vector ``v`` on its diagonal (Theano's name).

    >>> import numpy as np
    >>> alloc_diag(np.array([1.0, 2.0])).eval()
    array([[1., 0.],
           [0., 2.]])
    """
    v = as_tensor_variable(v)
    if v.ndim != 1:  # Theano's alloc_diag takes vectors only (diag also takes matrices)
        raise TypeError(f"alloc_diag: expected a vector, got {v.type}")
    return diag(v)


def extract_diag(x):
    """The main diagonal of the matrix ``x`` (Theano's name).

    >>> import numpy as np
    >>> extract_diag(np.array([[1.0, 2.0], [3.0, 4.0]])).eval()
    array([1., 4.])
    """
    x = as_tensor_variable(x)
    if x.ndim != 2:  # Theano's extract_diag takes matrices only
        raise TypeError(f"extract_diag: expected a matrix, got {x.type}")
    return diag(x)
