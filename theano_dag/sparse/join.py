"""Joining sparse matrices: ``hstack`` (side by side), ``vstack`` (one above the other)
and ``sparse_block_diag`` (on the diagonal of a larger matrix). The result is sparse
(CSC unless ``format`` says otherwise); each input's gradient is its block of the output
gradient, sparse, read with :func:`~theano_dag.sparse.indexing.get_item_2d` (regular).

>>> import numpy as np, scipy.sparse as sp, theano_dag
>>> from theano_dag.sparse import csr_matrix
>>> x, y = csr_matrix("x", dtype="float64"), csr_matrix("y", dtype="float64")
>>> a, b = sp.csr_matrix(np.eye(2)), sp.csr_matrix(np.ones((1, 1)))
>>> sparse_block_diag(x, y).toarray().eval({x: a, y: b})
array([[1., 0., 0.],
       [0., 1., 0.],
       [0., 0., 1.]])
"""

from __future__ import annotations

import numpy as np

import theano_dag.tensor as tt
from theano_dag.config import config
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.scalar.basic import upcast
from theano_dag.sparse.basic import _cast_like, cast, sp_zeros_like
from theano_dag.sparse.indexing import get_item_2d
from theano_dag.sparse.structure import as_format
from theano_dag.sparse.type import SparseType, scipy_sparse
from theano_dag.sparse.variable import as_sparse_variable, continuous_dtypes

__all__ = [
    "HStack",
    "hstack",
    "VStack",
    "vstack",
    "SparseBlockDiagonal",
    "sparse_block_diag",
]


def _block_grad(x, gz, rows, cols):
    """``x``'s gradient: the block ``gz[rows, cols]`` in ``x``'s format and dtype; no
    entries for a discrete ``x``."""
    if x.dtype not in continuous_dtypes:
        return sp_zeros_like(cast(x, config.floatX))
    return _cast_like(as_format(get_item_2d(gz, (rows, cols)), x.format), x)


def _offsets(sizes):
    out, total = [], tt.constant(0, dtype="int64")
    for s in sizes:
        out.append((total, total + s))
        total = total + s
    return out


class HStack(Op):
    """The sparse matrices side by side (same number of rows), in ``format`` (CSC by
    default) and ``dtype``, which Theano makes you give (``hstack`` upcasts)."""

    __props__ = ("format", "dtype")
    _axis = 1

    def __init__(self, format=None, dtype=None):
        self.format = "csc" if format is None else format
        if self.format not in ("csr", "csc"):
            raise ValueError(f"{type(self).__name__}: format must be 'csr' or 'csc'")
        if dtype is None:
            raise ValueError("The output dtype must be specified.")
        self.dtype = str(np.dtype(dtype))

    def __str__(self):
        return f"{type(self).__name__}({self.format},{self.dtype})"

    def make_node(self, *mat):
        if not mat:
            raise ValueError("Cannot join an empty list of sparses.")
        var = [as_sparse_variable(x) for x in mat]
        return Apply(self, var, [SparseType(self.format, self.dtype)()])

    def _join(self, blocks):
        return scipy_sparse().hstack(blocks, format=self.format, dtype=self.dtype)

    def perform(self, node, inputs, output_storage, params=None):
        out = self._join(inputs)
        output_storage[0][0] = out.astype(self.dtype, copy=False).asformat(self.format)

    def grad(self, inputs, output_grads):
        (gz,) = output_grads
        spans = _offsets([x.shape[self._axis] for x in inputs])
        whole = slice(None)
        return [
            _block_grad(x, gz, *((whole, slice(a, b)) if self._axis == 1 else (slice(a, b), whole)))
            for x, (a, b) in zip(inputs, spans)
        ]

    def infer_shape(self, fgraph, node, input_shapes):
        joined = sum(s[self._axis] for s in input_shapes)
        first = input_shapes[0]
        return [(first[0], joined) if self._axis == 1 else (joined, first[1])]


def hstack(blocks, format=None, dtype=None):
    """The sparse matrices ``blocks`` side by side, in ``format`` (CSC by default);
    ``dtype`` defaults to their upcast.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> r = hstack([x, x]).eval({x: a})
    >>> r.format, r.shape
    ('csc', (2, 4))
    """
    blocks = [as_sparse_variable(b) for b in blocks]
    if dtype is None:
        dtype = upcast(*[b.dtype for b in blocks])
    return HStack(format=format, dtype=dtype)(*blocks)


class VStack(HStack):
    """The sparse matrices one above the other (same number of columns)."""

    _axis = 0

    def _join(self, blocks):
        return scipy_sparse().vstack(blocks, format=self.format, dtype=self.dtype)


def vstack(blocks, format=None, dtype=None):
    """The sparse matrices ``blocks`` one above the other, in ``format`` (CSC by
    default); ``dtype`` defaults to their upcast.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> vstack([x, x], format="csr").eval({x: a}).toarray()
    array([[0., 2.],
           [1., 0.],
           [0., 2.],
           [1., 0.]])
    """
    blocks = [as_sparse_variable(b) for b in blocks]
    if dtype is None:
        dtype = upcast(*[b.dtype for b in blocks])
    return VStack(format=format, dtype=dtype)(*blocks)


class SparseBlockDiagonal(Op):
    """The block-diagonal matrix of the sparse inputs (scipy's ``block_diag``), in
    ``format``; its dtype is the inputs' upcast."""

    __props__ = ("n_inputs", "format")

    def __init__(self, n_inputs, format="csc"):
        if format not in ("csr", "csc"):
            raise ValueError(f"sparse_block_diag: format must be 'csr' or 'csc', got {format!r}")
        self.n_inputs, self.format = int(n_inputs), format

    def make_node(self, *matrices):
        if len(matrices) != self.n_inputs:
            raise ValueError(f"expected {self.n_inputs} matrices, got {len(matrices)}")
        var = [as_sparse_variable(x) for x in matrices]
        dtype = upcast(*[x.dtype for x in var])
        return Apply(self, var, [SparseType(self.format, dtype)()])

    def perform(self, node, inputs, output_storage, params=None):
        dtype = node.outputs[0].dtype
        out = scipy_sparse().block_diag(inputs, format=self.format, dtype=dtype)
        output_storage[0][0] = out.astype(dtype, copy=False)

    def grad(self, inputs, output_grads):
        (gz,) = output_grads
        rows = _offsets([x.shape[0] for x in inputs])
        cols = _offsets([x.shape[1] for x in inputs])
        return [
            _block_grad(x, gz, slice(r0, r1), slice(c0, c1))
            for x, (r0, r1), (c0, c1) in zip(inputs, rows, cols)
        ]

    def infer_shape(self, fgraph, node, input_shapes):
        return [(sum(s[0] for s in input_shapes), sum(s[1] for s in input_shapes))]


def sparse_block_diag(*matrices, format="csc"):
    """The sparse matrices on the diagonal of one sparse matrix of ``format``, zero
    elsewhere (scipy's ``block_diag``).

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> sparse_block_diag(x, x).eval({x: a}).shape
    (4, 4)
    """
    if not matrices:
        raise ValueError("sparse_block_diag needs at least one matrix")
    return SparseBlockDiagonal(len(matrices), format)(*matrices)
