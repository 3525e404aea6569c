"""Shared variables holding a ``scipy.sparse`` matrix: ``theano_dag.shared(csr)`` gives
one (this module registers its constructor with :func:`theano_dag.graph.shared.shared`).

>>> import numpy as np, scipy.sparse as sp
>>> from theano_dag.graph.shared import shared
>>> w = shared(sp.csr_matrix(np.eye(3)), name="w")
>>> w.type, w.get_value().nnz
(Sparse[float64, csr], 3)
"""

from __future__ import annotations

from theano_dag.graph.shared import SharedVariable, shared_constructor
from theano_dag.sparse.type import SparseType, is_sparse_value
from theano_dag.sparse.variable import _sparse_py_operators

__all__ = ["SparseTensorSharedVariable", "sparse_constructor"]


class SparseTensorSharedVariable(_sparse_py_operators, SharedVariable):
    """A shared variable whose value is a CSR or CSC matrix."""


@shared_constructor
def sparse_constructor(
    value, name=None, strict=False, allow_downcast=None, borrow=False, format=None
):
    """Shared sparse matrix of a ``scipy.sparse`` value (a copy unless ``borrow``), in
    ``format`` (the value's own when None: CSR or CSC).

    >>> import numpy as np, scipy.sparse as sp
    >>> w = sparse_constructor(sp.csr_matrix(np.eye(2)), name="w", format="csc")
    >>> w.type, w.get_value().format
    (Sparse[float64, csc], 'csc')
    """
    if not is_sparse_value(value):
        raise TypeError(f"not a scipy.sparse matrix: {type(value).__name__}")
    format = format or value.format
    if format not in ("csr", "csc"):
        raise TypeError(
            f"shared: sparse matrices are held as csr or csc, not {format}; pass "
            "format='csr' or convert the value (value.tocsr())"
        )
    stype = SparseType(format, value.dtype)
    value = value.asformat(format)
    if not borrow:
        value = value.copy()
    return SparseTensorSharedVariable(
        type=stype, value=value, name=name, strict=strict, allow_downcast=allow_downcast
    )
