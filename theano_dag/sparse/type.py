"""``SparseType``: the type of 2-D ``scipy.sparse`` matrices in CSR or CSC format
(``theano.sparse.type``).

The format and the dtype are part of the type: a CSR float64 variable holds
``scipy.sparse.csr_matrix`` values of dtype float64. scipy is an optional dependency
(the ``scipy`` extra): this module never imports it at import time, only when a sparse
variable is made or a sparse value is checked, and then says which extra to install.

>>> t = SparseType("csr", "float64")
>>> t, t.ndim, t == SparseType("csr", "float64"), t == SparseType("csc", "float64")
(Sparse[float64, csr], 2, True, False)
"""

from __future__ import annotations

import sys

import numpy as np

from theano_dag.graph.type import Type
from theano_dag.tensor.type import all_dtypes

__all__ = ["SparseType", "scipy_sparse", "is_sparse_value", "sparse_formats", "type_formats"]

sparse_formats = ("csr", "csc")
# Theano's SparseType also has bsr (block) matrices. Here they are a type whose values the
# products alone read (structured_dot, dot, usmm: scipy's product, no gradient); every
# other op refuses them (as_sparse_variable), as their index arrays count blocks.
type_formats = (*sparse_formats, "bsr")

SCIPY_MISSING = (
    "theano_dag.sparse holds its values as scipy.sparse matrices, and scipy is not "
    "installed: pip install 'theano_dag[scipy]' (or pip install 'scipy>=1.9')"
)


def scipy_sparse():
    """The ``scipy.sparse`` module, imported on first use; ImportError naming the ``scipy``
    extra when scipy is not installed.

    >>> scipy_sparse().csr_matrix((2, 3)).shape
    (2, 3)
    """
    try:
        import scipy.sparse  # noqa: PLC0415 (the optional scipy extra, loaded when sparse is used)
    except ImportError:
        raise ImportError(SCIPY_MISSING) from None
    return scipy.sparse


def is_sparse_value(value) -> bool:
    """True for a ``scipy.sparse`` matrix or array. Never imports scipy: whoever holds
    such a value has imported it.

    >>> is_sparse_value(np.zeros((2, 2)))
    False
    """
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(value)


class SparseType(Type):
    """Sparse matrices of one format (``"csr"`` or ``"csc"``; ``"bsr"``, which only the
    products read) and one dtype.

    Values are ``scipy.sparse`` matrices; ``filter`` takes a scipy sparse array of the
    format and dtype as the matrix of the same arrays, and converts another format, a
    dense 2-D array or a safe dtype change when not ``strict``.

    >>> import scipy.sparse as sp
    >>> t = SparseType("csc", "float64")
    >>> t.filter(sp.csr_matrix(np.eye(2))).format
    'csc'
    >>> t.is_valid_value(sp.csr_matrix(np.eye(2)))
    False
    """

    __props__ = ("format", "dtype")
    ndim = 2
    # Sparse matrices never broadcast, and their lengths are not part of the type.
    broadcastable = (False, False)
    shape = (None, None)
    dtype_set = frozenset(all_dtypes) - {"bool", "float16"}

    def __init__(self, format, dtype):
        dtype = str(np.dtype(dtype)) if dtype is not None else None
        if format not in type_formats:
            raise NotImplementedError(
                f"SparseType: format {format!r} is not supported (one of {type_formats})"
            )
        if dtype not in self.dtype_set:
            raise NotImplementedError(
                f"SparseType: dtype {dtype!r} is not supported (one of {sorted(self.dtype_set)})"
            )
        self.format = format
        self.dtype = dtype

    def __str__(self):
        return f"Sparse[{self.dtype}, {self.format}]"

    __repr__ = __str__

    @property
    def numpy_dtype(self):
        return np.dtype(self.dtype)

    def make_variable(self, name=None):
        scipy_sparse()  # the one clear message when scipy is missing, before any graph
        return self.Variable(self, None, None, name)

    def filter(self, value, strict=False, allow_downcast=None):
        sp = scipy_sparse()
        if sp.issparse(value) and value.format == self.format and value.dtype == self.dtype:
            if isinstance(value, sp.spmatrix):
                return value
            # A scipy sparse *array* (csr_array...): the same arrays as a matrix, so that
            # every op answers the one kind of value (an array's * is not a matrix's).
            return self._as_format(value, sp)
        if strict:
            what = (
                f"a {value.format} matrix of dtype {value.dtype}"
                if sp.issparse(value)
                else f"a {type(value).__name__}"
            )
            raise TypeError(
                f"{self} expected a {self.format} matrix of dtype {self.dtype}, got {what}"
            )
        if not sp.issparse(value):
            if not isinstance(value, np.ndarray) or value.ndim != 2:
                raise TypeError(
                    f"{self} expected a scipy.sparse matrix (or a 2-D array to convert), "
                    f"got {type(value).__name__}"
                )
        if value.dtype != self.dtype:
            if not allow_downcast and not np.can_cast(value.dtype, self.dtype, "safe"):
                raise TypeError(
                    f"{self} cannot store a value of dtype {value.dtype} without risking loss "
                    "of precision; cast it, or set allow_input_downcast=True"
                )
        return self._as_format(value, sp)

    def _as_format(self, value, sp):
        cls = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "bsr": sp.bsr_matrix}[self.format]
        return cls(value, dtype=self.dtype)

    def is_valid_value(self, value) -> bool:
        return is_sparse_value(value) and value.format == self.format and value.dtype == self.dtype

    def values_eq(self, a, b) -> bool:
        if not (is_sparse_value(a) and is_sparse_value(b)) or a.shape != b.shape:
            return False
        return abs(a - b).nnz == 0 or not abs(a - b).max()

    def values_eq_approx(self, a, b, eps=None) -> bool:
        if not (is_sparse_value(a) and is_sparse_value(b)) or a.shape != b.shape:
            return False
        if eps is None:
            eps = 1e-4 if self.dtype in ("float32", "complex64") else 1e-8
        diff = abs(a - b)
        if diff.nnz == 0:
            return True
        scale = max(abs(a).max(), abs(b).max(), 1.0)
        return bool(diff.max() <= eps * scale)

    @staticmethod
    def may_share_memory(a, b) -> bool:
        def arrays(v):
            if is_sparse_value(v):
                return [v.data, v.indices, v.indptr]
            return [v] if isinstance(v, np.ndarray) else []

        return any(np.may_share_memory(x, y) for x in arrays(a) for y in arrays(b))
