"""Ops on a sparse matrix's storage and diagonal: ``remove0`` (drop the stored zeros),
``ensure_sorted_indices``, ``clean`` (both), ``as_format`` (CSR <-> CSC), ``diag`` (the
diagonal as a dense vector) and ``square_diagonal`` (a diagonal CSC matrix from a vector).

None of them changes a value of the matrix: their gradients pass the output gradient
through (regular).

>>> import numpy as np, scipy.sparse as sp, theano_dag
>>> from theano_dag.sparse import csr_matrix
>>> x = csr_matrix("x", dtype="float64")
>>> m = sp.csr_matrix((np.array([0.0, 2.0]), np.array([1, 0]), np.array([0, 1, 2])))
>>> clean(x).eval({x: m}).nnz, diag(x).eval({x: m})
(1, array([0., 0.]))
"""

from __future__ import annotations

import numpy as np

import theano_dag.tensor as tt
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.sparse.basic import _cast_like, _dense_type, _matrix_class
from theano_dag.sparse.type import SparseType
from theano_dag.sparse.variable import as_sparse_variable

__all__ = [
    "Remove0",
    "remove0",
    "EnsureSortedIndices",
    "ensure_sorted_indices",
    "clean",
    "AsFormat",
    "as_format",
    "Diag",
    "diag",
    "SquareDiagonal",
    "square_diagonal",
]


class Remove0(Op):
    """``x`` without its stored zeros (scipy's ``eliminate_zeros``). ``inplace=True``
    changes ``x``'s own value. Regular gradient (the output gradient).

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> stored_zero = sp.csr_matrix(([0.0, 1.0], [0, 1], [0, 2]), shape=(1, 2))
    >>> stored_zero.nnz, remove0(x).eval({x: stored_zero}).nnz
    (2, 1)
    """

    __props__ = ("inplace",)

    def __init__(self, inplace=False):
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def __str__(self):
        return f"Remove0{{{'inplace' if self.inplace else ''}}}"

    def make_node(self, x):
        x = as_sparse_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        z = x if self.inplace else x.copy()
        z.eliminate_zeros()
        output_storage[0][0] = z

    def grad(self, inputs, output_grads):
        return [output_grads[0]]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


remove0 = Remove0()


class EnsureSortedIndices(Op):
    """``x`` with the minor indices of each row (CSR) or column (CSC) sorted, as other
    libraries may require. ``inplace=True`` sorts ``x``'s own value (a view). Regular
    gradient."""

    __props__ = ("inplace",)

    def __init__(self, inplace=False):
        self.inplace = bool(inplace)
        if self.inplace:
            self.view_map = {0: [0]}

    def __str__(self):
        return f"EnsureSortedIndices{{{'inplace' if self.inplace else 'no_inplace'}}}"

    def make_node(self, x):
        x = as_sparse_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        if self.inplace:
            x.sort_indices()
            output_storage[0][0] = x
        else:
            output_storage[0][0] = x.sorted_indices()

    def grad(self, inputs, output_grads):
        return [output_grads[0]]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


ensure_sorted_indices = EnsureSortedIndices(inplace=False)


def clean(x):
    """``x`` without stored zeros and with sorted indices (``remove0`` then
    ``ensure_sorted_indices``). Regular gradient.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> unsorted = sp.csr_matrix(([0.0, 2.0], [1, 0], [0, 2]), shape=(1, 2))
    >>> clean(x).eval({x: unsorted}).indices
    array([0], dtype=int32)
    """
    return ensure_sorted_indices(remove0(x))


class AsFormat(Op):
    """``x`` in another format (CSR <-> CSC), the same matrix. The gradient is the
    output gradient in ``x``'s format."""

    __props__ = ("format",)

    def __init__(self, format):
        if format not in ("csr", "csc"):
            raise ValueError(f"AsFormat: format must be 'csr' or 'csc', got {format!r}")
        self.format = format

    def make_node(self, x):
        x = as_sparse_variable(x)
        return Apply(self, [x], [SparseType(self.format, x.dtype)()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = _matrix_class(self.format)(inputs[0])

    def grad(self, inputs, output_grads):
        return [_cast_like(as_format(output_grads[0], inputs[0].format), inputs[0])]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


def as_format(x, format):
    """The sparse ``x`` in ``format`` (itself when it has it already).

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> as_format(x, "csc").type, as_format(x, "csr") is x
    (Sparse[float64, csc], True)
    """
    x = as_sparse_variable(x)
    return x if x.format == format else AsFormat(format)(x)


class Diag(Op):
    """The diagonal of a square sparse matrix, as a dense vector (a ValueError for a
    matrix that is not square, as in Theano). Regular gradient: a diagonal matrix.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> diag(x).eval({x: sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0]]))})
    array([1., 3.])
    """

    __props__ = ()

    def make_node(self, x):
        x = as_sparse_variable(x)
        return Apply(self, [x], [_dense_type(x.dtype, 1)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        if x.shape[0] != x.shape[1]:
            raise ValueError(f"Diag only applies to a square matrix, got shape {x.shape}")
        output_storage[0][0] = x.diagonal()

    def grad(self, inputs, output_grads):
        (x,) = inputs
        return [_cast_like(as_format(square_diagonal(output_grads[0]), x.format), x)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [(tt.minimum(*input_shapes[0]),)]


diag = Diag()


class SquareDiagonal(Op):
    """A square CSC matrix whose diagonal is the dense vector ``d`` (every diagonal entry
    stored). Regular gradient: the output gradient's diagonal.

    >>> import numpy as np, theano_dag.tensor as tt
    >>> v = tt.dvector("v")
    >>> square_diagonal(v).eval({v: np.array([1.0, 2.0])}).toarray()
    array([[1., 0.],
           [0., 2.]])
    """

    __props__ = ()

    def make_node(self, d):
        d = tt.as_tensor_variable(d)
        if d.ndim != 1:
            raise TypeError(f"square_diagonal: the diagonal must be a vector, got {d.type}")
        return Apply(self, [d], [SparseType("csc", d.dtype)()])

    def perform(self, node, inputs, output_storage, params=None):
        (d,) = inputs
        n = len(d)
        index = np.arange(n + 1, dtype="int32")
        output_storage[0][0] = _matrix_class("csc")((d.copy(), index[:n], index), shape=(n, n))

    def grad(self, inputs, output_grads):
        return [_cast_like(diag(output_grads[0]), inputs[0])]

    def infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[0][0], input_shapes[0][0])]


square_diagonal = SquareDiagonal()
