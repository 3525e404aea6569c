"""Indexing a sparse matrix (Theano's ``x[...]`` on sparse variables):

- ``x[a:b, c:d]`` (``GetItem2d``): a sparse sub-matrix; slices only, as in Theano (an
  integer index would give a sparse vector, which does not exist: write ``x[a:a+1]``);
- ``x[[rows]]`` (``GetItemList``): the listed rows, as a sparse matrix;
- ``x[[rows], [cols]]`` (``GetItem2Lists``): the listed entries, as a dense vector;
- ``x[i, j]`` (``GetItemScalar``): one entry, as a dense scalar.

Their gradients are sparse matrices of ``x``'s shape holding the output gradient where
the entries were read (summed where an entry was read twice).

>>> import numpy as np, scipy.sparse as sp, theano_dag
>>> from theano_dag.sparse import csr_matrix
>>> x = csr_matrix("x", dtype="float64")
>>> m = sp.csr_matrix(np.arange(12.0).reshape(3, 4))
>>> x[1:, 2:].toarray().eval({x: m})
array([[ 6.,  7.],
       [10., 11.]])
>>> x[[2, 0]].toarray().eval({x: m})
array([[ 8.,  9., 10., 11.],
       [ 0.,  1.,  2.,  3.]])
>>> float(x[2, 1].eval({x: m}))
9.0
"""

from __future__ import annotations

import numpy as np

import theano_dag.tensor as tt
from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.graph.type import generic
from theano_dag.sparse.basic import _cast_like, _dense_type, dense_from_sparse
from theano_dag.sparse.type import SparseType, scipy_sparse
from theano_dag.sparse.variable import as_sparse_variable, integer_dtypes
from theano_dag.tensor.subtensor import SPARSE_ROWS_GRAD, slice_length

__all__ = [
    "GetItem2d",
    "get_item_2d",
    "GetItem2dGrad",
    "GetItemList",
    "get_item_list",
    "GetItemListGrad",
    "get_item_list_grad",
    "GetItem2Lists",
    "get_item_2lists",
    "GetItem2ListsGrad",
    "get_item_2lists_grad",
    "GetItemScalar",
    "get_item_scalar",
    "getitem",
    "ConstructSparseFromList",
    "construct_sparse_from_list",
]


def _none():
    return Constant(generic, None)


def _is_none(v):
    return isinstance(v, Constant) and v.data is None


def _int_scalar(v, what):
    if not isinstance(v, Variable):
        v = tt.as_tensor_variable(v)
    if not (v.ndim == 0 and v.dtype in integer_dtypes):
        raise ValueError(
            f"Impossible to index into a sparse matrix with slice where {what}={v} "
            f"({v.type}): it must be an integer scalar"
        )
    return v


def _int_vector(v, what):
    v = tt.as_tensor_variable(v)
    if v.ndim != 1 or v.dtype not in integer_dtypes:
        raise TypeError(f"sparse indexing: {what} must be a vector of integers, got {v.type}")
    return v


class GetItem2d(Op):
    """``x[a:b:s, c:d:t]``: a sparse matrix of ``x``'s format. The node's inputs are ``x``
    and the six slice parts (a missing part is a ``None`` constant)."""

    __props__ = ()

    def make_node(self, x, index):
        x = as_sparse_variable(x)
        index = tuple(index) if isinstance(index, (tuple, list)) else (index,)
        if len(index) not in (1, 2):
            raise ValueError(f"a sparse matrix takes 1 or 2 indices, got {len(index)}")
        parts = [x]
        for ind in index:
            if isinstance(ind, slice):
                step = (
                    None
                    if ind.step is None or (ind.step == 1 and isinstance(ind.step, int))
                    else ind.step
                )
                for what, v in (("start", ind.start), ("stop", ind.stop), ("step", step)):
                    parts.append(_none() if v is None else _int_scalar(v, what))
            elif np.isscalar(ind) or getattr(ind, "ndim", None) == 0:
                raise NotImplementedError(
                    "Theano has no sparse vector: use X[a:b, c:d], X[a:b, c:c+1] or X[a:b] "
                    "instead"
                )
            else:
                raise ValueError(
                    "Advanced indexing is not implemented for sparse matrices. "
                    f"Argument not supported: {ind}"
                )
        if len(index) == 1:
            parts += [_none(), _none(), _none()]
        return Apply(self, parts, [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, a, b, s, c, d, t = inputs
        output_storage[0][0] = x[a:b:s, c:d:t]

    def connection_pattern(self, node):
        return [[True]] + [[False]] * 6

    def grad(self, inputs, output_grads):
        x, *parts = inputs
        gx = GetItem2dGrad()(x, output_grads[0], *parts)
        return [_cast_like(gx, x)] + [disconnected_type() for _ in parts]

    def infer_shape(self, fgraph, node, input_shapes):
        parts = [None if _is_none(p) else p for p in node.inputs[1:]]
        n, m = input_shapes[0]
        return [(slice_length(n, *parts[:3]), slice_length(m, *parts[3:]))]


get_item_2d = GetItem2d()


def _positions(n, start, stop, step):
    return np.arange(n)[slice(start, stop, step)]


class GetItem2dGrad(Op):
    """The gradient of ``x[a:b:s, c:d:t]``: the output gradient ``gz`` put back where the
    slice reads, in a sparse matrix of ``x``'s shape and format."""

    __props__ = ()

    def make_node(self, x, gz, *parts):
        x, gz = as_sparse_variable(x), as_sparse_variable(gz)
        return Apply(self, [x, gz, *parts], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, gz, a, b, s, c, d, t = inputs
        rows, cols = _positions(x.shape[0], a, b, s), _positions(x.shape[1], c, d, t)
        g = gz.tocoo()
        out = scipy_sparse().coo_matrix((g.data, (rows[g.row], cols[g.col])), shape=x.shape)
        output_storage[0][0] = out.asformat(x.format).astype(node.outputs[0].dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class GetItemList(Op):
    """``x[rows]`` for an integer vector ``rows``: those rows (repeats allowed, negative
    indices from the end) as a sparse matrix of ``x``'s format."""

    __props__ = ()

    def make_node(self, x, index):
        x = as_sparse_variable(x)
        return Apply(self, [x, _int_vector(index, "the row list")], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, index = inputs
        output_storage[0][0] = x[index]

    def connection_pattern(self, node):
        return [[True], [False]]

    def grad(self, inputs, output_grads):
        x, index = inputs
        gx = get_item_list_grad(x, index, output_grads[0])
        return [_cast_like(gx, x), disconnected_type()]

    def infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[1][0], input_shapes[0][1])]


get_item_list = GetItemList()


class GetItemListGrad(Op):
    """The gradient of ``x[rows]``: row ``k`` of ``gz`` added to row ``rows[k]`` of a
    sparse matrix of ``x``'s shape and format."""

    __props__ = ()

    def make_node(self, x, index, gz):
        x, gz = as_sparse_variable(x), as_sparse_variable(gz)
        return Apply(self, [x, _int_vector(index, "the row list"), gz], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, index, gz = inputs
        sp = scipy_sparse()
        k, n = len(index), x.shape[0]
        # The selection matrix's transpose scatters the rows back, summing repeats.
        pick = sp.csr_matrix((np.ones(k), (np.arange(k), np.asarray(index) % n)), shape=(k, n))
        out = (pick.T @ gz).asformat(x.format)
        output_storage[0][0] = out.astype(node.outputs[0].dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


get_item_list_grad = GetItemListGrad()


class GetItem2Lists(Op):
    """``x[rows, cols]`` for two integer vectors: the entries ``x[rows[k], cols[k]]`` as a
    dense vector (a list of one index broadcasts against the other, as in numpy)."""

    __props__ = ()

    def make_node(self, x, ind1, ind2):
        x = as_sparse_variable(x)
        ind1, ind2 = _int_vector(ind1, "the row list"), _int_vector(ind2, "the column list")
        return Apply(self, [x, ind1, ind2], [_dense_type(x.dtype, 1)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, ind1, ind2 = inputs
        if len(ind1) != len(ind2) and 1 not in (len(ind1), len(ind2)):
            raise IndexError(
                f"shape mismatch: indexing arrays could not be broadcast together with "
                f"shapes ({len(ind1)},) ({len(ind2)},)"
            )
        rows, cols = (np.array(v) for v in np.broadcast_arrays(ind1, ind2))
        if rows.size:
            out = np.asarray(x[rows, cols], dtype=x.dtype).ravel()
        else:  # scipy answers a sparse matrix for no index
            out = np.zeros(0, dtype=x.dtype)
        output_storage[0][0] = out

    def connection_pattern(self, node):
        return [[True], [False], [False]]

    def grad(self, inputs, output_grads):
        x, ind1, ind2 = inputs
        gx = get_item_2lists_grad(x, ind1, ind2, output_grads[0])
        return [
            _cast_like(gx, x),
            disconnected_type(),
            disconnected_type(),
        ]

    def infer_shape(self, fgraph, node, input_shapes):
        # The lists broadcast as numpy's (a list of one index pairs with each of the other).
        (n1,), (n2,) = input_shapes[1], input_shapes[2]
        return [(tt.switch(tt.eq(n1, 1), n2, n1),)]


get_item_2lists = GetItem2Lists()


class GetItem2ListsGrad(Op):
    """The gradient of ``x[rows, cols]``: ``gz[k]`` added at ``(rows[k], cols[k])`` of a
    sparse matrix of ``x``'s shape and format."""

    __props__ = ()

    def make_node(self, x, ind1, ind2, gz):
        x = as_sparse_variable(x)
        ind1, ind2 = _int_vector(ind1, "the row list"), _int_vector(ind2, "the column list")
        return Apply(self, [x, ind1, ind2, tt.as_tensor_variable(gz)], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, ind1, ind2, gz = inputs
        n, m = x.shape
        rows, cols = np.broadcast_arrays(np.asarray(ind1) % n, np.asarray(ind2) % m)
        out = scipy_sparse().coo_matrix((gz, (rows, cols)), shape=x.shape)  # sums repeats
        output_storage[0][0] = out.asformat(x.format).astype(node.outputs[0].dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


get_item_2lists_grad = GetItem2ListsGrad()


class GetItemScalar(Op):
    """``x[i, j]`` for two integer scalars: the entry as a dense scalar of ``x``'s
    dtype."""

    __props__ = ()

    def make_node(self, x, index):
        x = as_sparse_variable(x)
        if len(index) != 2:
            raise ValueError(f"GetItemScalar takes two indices, got {len(index)}")
        parts = []
        for ind in index:
            if isinstance(ind, slice):
                raise TypeError("GetItemScalar called with a slice as index")
            ind = tt.as_tensor_variable(ind)
            if ind.ndim != 0 or ind.dtype not in integer_dtypes:
                raise NotImplementedError(f"GetItemScalar: an index must be an integer, got {ind}")
            parts.append(ind)
        return Apply(self, [x, *parts], [_dense_type(x.dtype, 0)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, i, j = inputs
        output_storage[0][0] = np.asarray(x[int(i), int(j)], dtype=x.dtype)

    def connection_pattern(self, node):
        return [[True], [False], [False]]

    def grad(self, inputs, output_grads):
        x, i, j = inputs
        gz = output_grads[0].dimshuffle("x")
        gx = get_item_2lists_grad(x, i.dimshuffle("x"), j.dimshuffle("x"), gz)
        return [_cast_like(gx, x), disconnected_type(), disconnected_type()]

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]


get_item_scalar = GetItemScalar()


class ConstructSparseFromList(Op):
    """A CSC matrix of ``x``'s shape (and dtype) with ``values[k]`` added to row
    ``ilist[k]``: the gradient of reading rows, made sparse (Theano's op of that name).
    The gradient with respect to ``values`` is the output gradient's rows ``ilist``."""

    __props__ = ()

    def make_node(self, x, values, ilist):
        x, values = tt.as_tensor_variable(x), tt.as_tensor_variable(values)
        ilist = tt.as_tensor_variable(ilist)
        if ilist.dtype not in integer_dtypes:
            raise TypeError("index must be integers")
        if ilist.ndim != 1:
            raise TypeError("index must be vector")
        if x.ndim != 2:
            raise TypeError(f"cannot create a sparse matrix with {x.ndim} dimensions")
        if values.ndim != 2:
            raise TypeError(f"cannot create a sparse matrix from values with {values.ndim} ndim")
        return Apply(self, [x.shape, values, ilist], [SparseType("csc", x.dtype)()])

    def perform(self, node, inputs, output_storage, params=None):
        shape, values, ilist = inputs
        rows, cols = values.shape
        if rows != len(ilist):
            raise ValueError(f"{rows} rows of values for {len(ilist)} indices")
        if cols != shape[1]:
            raise ValueError(
                f"ConstructSparseFromList: rows of {cols} values for a matrix of shape "
                f"{tuple(int(s) for s in shape)}"
            )
        ilist = np.asarray(ilist)
        if len(ilist) and (ilist.min() < -shape[0] or ilist.max() >= shape[0]):
            bad = ilist[(ilist < -shape[0]) | (ilist >= shape[0])][0]
            raise IndexError(
                f"ConstructSparseFromList: index {bad} is out of bounds for a matrix of "
                f"{shape[0]} rows"
            )
        r = np.repeat(ilist % max(shape[0], 1), cols)
        c = np.tile(np.arange(cols), rows)
        out = scipy_sparse().coo_matrix((values.ravel(), (r, c)), shape=tuple(shape))
        output_storage[0][0] = out.tocsc().astype(node.outputs[0].dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        shape = node.inputs[0]
        return [(shape[0], shape[1])]

    def connection_pattern(self, node):
        return [[False], [True], [False]]

    def grad(self, inputs, output_grads):
        _shape, values, ilist = inputs
        rows = dense_from_sparse(get_item_list(output_grads[0], ilist))
        return [disconnected_type(), _cast_like(rows, values), disconnected_type()]


construct_sparse_from_list = ConstructSparseFromList()
# The gradient of AdvancedSubtensor1(sparse_grad=True) (the tensor floor, below, holds
# the slot).
SPARSE_ROWS_GRAD[:] = [construct_sparse_from_list]


def _is_int_scalar(v):
    if isinstance(v, (int, np.integer)):
        return True
    return isinstance(v, Variable) and getattr(v, "ndim", None) == 0 and v.dtype in integer_dtypes


def getitem(x, args):
    """``x[args]`` on a sparse variable, dispatched as Theano does: two integers give
    the entry, a list (or integer vector) of rows gives those rows (with a second list,
    those entries), slices give a sub-matrix.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> x[1, 0].eval({x: a}), x[[1, 1]].eval({x: a}).toarray()
    (array(1.), array([[1., 0.],
           [1., 0.]]))
    >>> x[:, 1:].eval({x: a}).toarray()
    array([[2.],
           [0.]])
    """
    if not isinstance(args, tuple):
        args = (args,)
    if len(args) == 2 and _is_int_scalar(args[0]) and _is_int_scalar(args[1]):
        return get_item_scalar(x, args)
    first_is_list = isinstance(args[0], (list, np.ndarray)) or (
        isinstance(args[0], Variable) and getattr(args[0], "ndim", None) == 1
    )
    if first_is_list:
        if len(args) == 2:
            return get_item_2lists(x, args[0], args[1])
        return get_item_list(x, args[0])
    return get_item_2d(x, args)
