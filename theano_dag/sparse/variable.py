"""``SparseVariable`` and ``SparseConstant``: symbolic sparse matrices with Theano's
operators (``x + y``, ``x * y``, ``-x``, ``x.T``, ``x.dot(y)``, ``x.toarray()``), and
the constructors ``csr_matrix``, ``csc_matrix``, ``as_sparse_variable``.

A sparse variable never turns dense by itself: ``as_tensor_variable`` refuses it and
``x.toarray()`` (``dense_from_sparse``) is the explicit way.

>>> x = csr_matrix("x", dtype="float64")
>>> x, x.type, x.format, x.dtype, x.ndim
(x, Sparse[float64, csr], 'csr', 'float64', 2)
>>> (x * 2).type, x.T.type
(Sparse[float64, csr], Sparse[float64, csc])
"""

from __future__ import annotations

# The ops behind the operators (sparse.basic, sparse.products) build on this module's classes:
# they are reached through the package when called.
from theano_dag import sparse as _sparse
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.sparse.type import SparseType, is_sparse_value, sparse_formats
from theano_dag.tensor.shape import Shape
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "SparseVariable",
    "SparseConstant",
    "as_sparse_variable",
    "as_sparse",
    "as_sparse_or_tensor_variable",
    "constant",
    "matrix",
    "csr_matrix",
    "csc_matrix",
    "csr_dmatrix",
    "csc_dmatrix",
    "csr_fmatrix",
    "csc_fmatrix",
    "all_dtypes",
    "float_dtypes",
    "complex_dtypes",
    "int_dtypes",
    "uint_dtypes",
    "integer_dtypes",
    "continuous_dtypes",
    "discrete_dtypes",
]

# The dtypes a sparse matrix can have (scipy.sparse has no float16 or bool), by kind.
all_dtypes = sorted(SparseType.dtype_set)
float_dtypes = [t for t in all_dtypes if t.startswith("float")]
complex_dtypes = [t for t in all_dtypes if t.startswith("complex")]
int_dtypes = [t for t in all_dtypes if t.startswith("int")]
uint_dtypes = [t for t in all_dtypes if t.startswith("uint")]
integer_dtypes = [*int_dtypes, *uint_dtypes]
continuous_dtypes = [*float_dtypes, *complex_dtypes]
discrete_dtypes = integer_dtypes


class _sparse_py_operators:  # noqa: N801 (Theano's name)
    """The operators of a sparse variable (arithmetic follows ``sparse.basic``)."""

    T = property(lambda self: _sparse.basic.transpose(self), doc="the transpose (CSR <-> CSC)")
    ndim = property(lambda self: self.type.ndim)
    dtype = property(lambda self: self.type.dtype)
    format = property(lambda self: self.type.format)
    # The shape comes from the matrix itself (its two lengths), never from a dense copy.
    shape = property(lambda self: Shape()(self))
    size = property(lambda self: _sparse.basic.csm_data(self).size, doc="stored entries")

    def astype(self, dtype):
        return _sparse.basic.cast(self, dtype)

    def __neg__(self):
        return _sparse.basic.neg(self)

    def __add__(self, other):
        return _sparse.basic.add(self, other)

    def __radd__(self, other):
        return _sparse.basic.add(other, self)

    def __sub__(self, other):
        return _sparse.basic.sub(self, other)

    def __rsub__(self, other):
        return _sparse.basic.sub(other, self)

    def __mul__(self, other):
        return _sparse.basic.mul(self, other)

    def __rmul__(self, other):
        return _sparse.basic.mul(other, self)

    def __dot__(self, other):
        return _sparse.products.structured_dot(self, other)

    def __rdot__(self, other):
        return _sparse.products.structured_dot(other, self)

    dot = __dot__

    def toarray(self):
        """The dense matrix (``dense_from_sparse``)."""
        return _sparse.basic.dense_from_sparse(self)

    def zeros_like(self):
        """A matrix of the same shape and format with no stored entries."""
        return _sparse.basic.sp_zeros_like(self)

    def sum(self, axis=None, sparse_grad=False):
        return _sparse.basic.sp_sum(self, axis=axis, sparse_grad=sparse_grad)

    def __getitem__(self, args):
        return _sparse.indexing.getitem(self, args)

    # The orderings, as Theano's (no __eq__: variables stay hashable and comparable).
    def __lt__(self, other):
        return _sparse.compare.lt(self, other)

    def __le__(self, other):
        return _sparse.compare.le(self, other)

    def __gt__(self, other):
        return _sparse.compare.gt(self, other)

    def __ge__(self, other):
        return _sparse.compare.ge(self, other)


class SparseVariable(_sparse_py_operators, Variable):
    """A symbolic sparse matrix (its type is a :class:`SparseType`)."""

    def __str__(self):
        if self.name is not None:
            return self.name
        return super().__str__()


class SparseConstant(_sparse_py_operators, Constant):
    """A sparse matrix with a fixed value; two constants with the same entries merge.

    >>> import numpy as np, scipy.sparse as sp
    >>> a = constant(sp.csr_matrix(np.eye(2)))
    >>> b = constant(sp.csr_matrix(np.eye(2)))
    >>> a.equals(b), str(a)
    (True, 'SparseConstant{csr,float64,shape=(2, 2),nnz=2}')
    """

    def signature(self):
        d = self.data
        # The stored arrays identify the value exactly (after sorting, for duplicates).
        c = d.copy()
        c.sum_duplicates()
        c.sort_indices()
        return (self.type, d.shape, c.data.tobytes(), c.indices.tobytes(), c.indptr.tobytes())

    def __str__(self):
        if self.name is not None:
            return self.name
        d = self.data
        return f"SparseConstant{{{d.format},{d.dtype},shape={d.shape},nnz={d.nnz}}}"


SparseType.Variable = SparseVariable
SparseType.Constant = SparseConstant


def _is_sparse_variable(x) -> bool:
    return isinstance(x, Variable) and isinstance(x.type, SparseType)


def constant(x, name=None):
    """A SparseConstant holding (a copy of) the scipy.sparse matrix ``x``.

    >>> import numpy as np, scipy.sparse as sp
    >>> c = constant(sp.csc_matrix(np.eye(2)), name="identity")
    >>> c.type, c.data.nnz
    (Sparse[float64, csc], 2)
    """
    if not is_sparse_value(x):
        raise TypeError(f"sparse.constant needs a scipy.sparse matrix, got {type(x).__name__}")
    if x.format not in ("csr", "csc"):
        x = x.tocsr()
    return SparseConstant(SparseType(x.format, x.dtype), x.copy(), name=name)


def as_sparse_variable(x, name=None, formats=sparse_formats):
    """``x`` as a sparse variable: sparse variables pass, scipy.sparse matrices become
    constants, anything else (a dense tensor included) is a TypeError. A variable of a
    format not in ``formats`` (a ``bsr`` one, which only the products take) is a
    NotImplementedError naming it.

    >>> import numpy as np, scipy.sparse as sp
    >>> as_sparse_variable(sp.csc_matrix(np.eye(3))).type
    Sparse[float64, csc]
    """
    if isinstance(x, Apply):
        if len(x.outputs) != 1:
            raise ValueError(f"as_sparse_variable: {x} has several outputs; pick one")
        x = x.outputs[0]
    if isinstance(x, Variable):
        if not isinstance(x.type, SparseType):
            raise TypeError(
                f"as_sparse_variable: {x} has type {x.type}, not a sparse type "
                "(csr_from_dense / csc_from_dense convert a dense matrix)"
            )
        if x.type.format not in formats:
            raise NotImplementedError(
                f"{x} is a {x.type.format} matrix ({x.type}): this op takes "
                f"{' and '.join(formats)} matrices (a bsr matrix goes into products only)"
            )
        return x
    return constant(x, name=name)


as_sparse = as_sparse_variable


def as_sparse_or_tensor_variable(x, name=None, formats=sparse_formats):
    """``as_sparse_variable(x)`` when ``x`` is sparse, else ``as_tensor_variable(x)``.

    >>> import numpy as np, scipy.sparse as sp
    >>> as_sparse_or_tensor_variable(sp.csr_matrix(np.eye(2))).type
    Sparse[float64, csr]
    >>> as_sparse_or_tensor_variable(np.eye(2)).type
    TensorType(float64, matrix)
    """
    if _is_sparse_variable(x) or is_sparse_value(x):
        return as_sparse_variable(x, name, formats)
    return as_tensor_variable(x, name)


def matrix(format, name=None, dtype=None):
    """A sparse matrix variable of ``format`` (``"csr"`` or ``"csc"``); dtype floatX
    unless given.

    >>> matrix("csc", "m", dtype="int32").type
    Sparse[int32, csc]
    """
    return SparseType(format, dtype or config.floatX)(name)


def csr_matrix(name=None, dtype=None):
    """A CSR sparse matrix variable (dtype floatX unless given).

    >>> csr_matrix("a", dtype="float32").type
    Sparse[float32, csr]
    """
    return matrix("csr", name, dtype)


def csc_matrix(name=None, dtype=None):
    """A CSC sparse matrix variable (dtype floatX unless given).

    >>> csc_matrix("m", dtype="float64").type
    Sparse[float64, csc]
    """
    return matrix("csc", name, dtype)


csr_dmatrix = SparseType("csr", "float64")
csc_dmatrix = SparseType("csc", "float64")
csr_fmatrix = SparseType("csr", "float32")
csc_fmatrix = SparseType("csc", "float32")
