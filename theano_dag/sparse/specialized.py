"""Ops on the parts of a CSR or CSC matrix (its ``data``, ``indices`` and ``indptr``
vectors), under the names of Theano's C specialisations (``theano.sparse.opt``):
``MulSDCSC`` / ``MulSDCSR`` (a sparse matrix times a dense one, elementwise),
``MulSVCSR`` (times a vector along the columns), ``StructuredAddSVCSR`` (plus a vector
along the columns, on the stored entries) and ``SamplingDotCSR`` (``p * (x @ y.T)`` on
``p``'s pattern).

The specialising rewrites of :mod:`theano_dag.sparse.opt` replace ``mul_s_d``,
``mul_s_v``, ``structured_add_s_v`` and ``sampling_dot`` by
``CSM(op(csm_properties(x)...), indices, indptr, shape)``, as Theano's do: the
rewritten graph has the structure a Theano user inspects, and chains of elementwise
sparse ops then share one pattern (``local_csm_properties_csm``). The kernels are numpy
gathers over the stored entries; no dense matrix is made.

Each op takes the matrix's ``shape`` as an optional last input (the rewrites always give
it): with it, a dense operand of another size is an error instead of a read of the
wrong entries. Their gradients are those of the ops they specialise.

>>> import numpy as np, theano_dag, theano_dag.tensor as tt
>>> d, b = tt.dvector("d"), tt.dmatrix("b")
>>> f = theano_dag.function([d, b], mul_s_d_csr(d, [1, 0], [0, 1, 2], b))
>>> f(np.array([2.0, 3.0]), np.array([[10.0, 20.0], [30.0, 40.0]]))
array([40., 90.])
"""

from __future__ import annotations

import numpy as np

import theano_dag.tensor as tt
from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import DisconnectedType, disconnected_type
from theano_dag.graph.op import Op
from theano_dag.scalar.basic import upcast
from theano_dag.sparse.basic import CSM, _dense_type, _fits, dense_from_sparse, transpose
from theano_dag.sparse.products import _GATHER_ELEMENTS, dot
from theano_dag.tensor.type import discrete_dtypes

__all__ = [
    "MulSDCSC",
    "MulSDCSR",
    "MulSVCSR",
    "StructuredAddSVCSR",
    "SamplingDotCSR",
    "mul_s_d_csc",
    "mul_s_d_csr",
    "mul_s_v_csr",
    "structured_add_s_v_csr",
    "sampling_dot_csr",
]


def _int_vector(v, op, what):
    v = tt.as_tensor_variable(v)
    if v.ndim != 1 or v.dtype not in discrete_dtypes:
        raise TypeError(f"{op}: {what} must be a vector of integers, got {v.type}")
    return v


def _parts(op, data, indices, indptr):
    data = tt.as_tensor_variable(data)
    if data.ndim != 1:
        raise TypeError(f"{op}: the data must be a vector, got {data.type}")
    return data, _int_vector(indices, op, "indices"), _int_vector(indptr, op, "indptr")


def _check_parts(op, data, indices, indptr):
    if data.shape != indices.shape or len(indptr) == 0 or indptr[-1] != len(data):
        raise ValueError(
            f"{op}: {len(data)} values, {len(indices)} indices and an indptr ending at "
            f"{indptr[-1] if len(indptr) else None} do not make one matrix"
        )


def _major(indptr):
    """The major index (the row of a CSR matrix, the column of a CSC one) of each stored
    entry."""
    return np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))


class _PartsOp(Op):
    """An op whose first three inputs are a matrix's ``data``, ``indices`` and ``indptr``,
    its fourth a dense operand and its optional fifth the matrix's shape."""

    __props__ = ()
    format = "csr"
    dense_ndim = 2

    def make_node(self, a_data, a_indices, a_indptr, b, *shape):
        name = type(self).__name__
        data, indices, indptr = _parts(name, a_data, a_indices, a_indptr)
        b = tt.as_tensor_variable(b)
        if b.ndim != self.dense_ndim:
            kind = "a matrix" if self.dense_ndim == 2 else "a vector"
            raise TypeError(f"{name}: the dense operand must be {kind}, got {b.type}")
        ins = [data, indices, indptr, b]
        if shape:
            if len(shape) != 1:
                raise TypeError(f"{name}: one shape input at most")
            ins.append(_int_vector(shape[0], name, "shape"))
        return Apply(self, ins, [_dense_type(upcast(data.dtype, b.dtype), 1)()])

    def _shape(self, inputs):
        """The matrix's shape: the shape input's, else what the parts and ``b`` tell."""
        if len(inputs) == 5:
            shape = tuple(int(s) for s in inputs[4])
            if len(shape) != 2:
                raise ValueError(f"{type(self).__name__}: a shape of {len(shape)} lengths")
            return shape
        n_major, b = len(inputs[2]) - 1, inputs[3]
        if self.dense_ndim == 1:
            return (n_major, b.shape[0])
        return (n_major, b.shape[1]) if self.format == "csr" else (b.shape[0], n_major)

    def _rows_cols(self, inputs):
        data, indices, indptr = inputs[:3]
        _check_parts(type(self).__name__, data, indices, indptr)
        shape = self._shape(inputs)
        n_major = shape[0] if self.format == "csr" else shape[1]
        if len(indptr) - 1 != n_major:
            raise ValueError(
                f"{type(self).__name__}: an indptr of {len(indptr)} entries for a "
                f"{self.format} matrix of shape {shape}"
            )
        major = _major(indptr)
        rows, cols = (major, indices) if self.format == "csr" else (indices, major)
        return shape, rows, cols

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True], [False], [False], [True]] + [[False]] * (len(node.inputs) - 4)

    def _disconnected(self, inputs):
        return [disconnected_type() for _ in inputs[1:3]]


class _MulSDParts(_PartsOp):
    """The stored values of a sparse matrix times the entries of the dense matrix ``b``
    at their places (``b`` may have one row or column, broadcast): the data of
    ``mul_s_d(x, b)``."""

    def perform(self, node, inputs, output_storage, params=None):
        data, b = inputs[0], inputs[3]
        shape, rows, cols = self._rows_cols(inputs)
        if not _fits(shape, b, node.inputs[3].broadcastable):
            raise ValueError(
                f"{type(self).__name__}: a dense operand of shape {b.shape} for a sparse "
                f"matrix of shape {shape} (it broadcasts along an axis of length 1 only "
                "when declared so)"
            )
        picked = b[rows if b.shape[0] != 1 else 0, cols if b.shape[1] != 1 else 0]
        output_storage[0][0] = np.multiply(data, picked, dtype=node.outputs[0].dtype)

    def grad(self, inputs, output_grads):
        data, indices, indptr, b = inputs[:4]
        (gz,) = output_grads
        g_data = self(gz, *inputs[1:])
        # b's gradient: gz * data at the stored places, summed over b's broadcast axes.
        if len(inputs) == 5:
            shape = inputs[4]
        elif self.format == "csr":
            shape = tt.stack([indptr.shape[0] - 1, b.shape[1]])
        else:
            shape = tt.stack([b.shape[0], indptr.shape[0] - 1])
        g_b = dense_from_sparse(CSM(self.format)(gz * data, indices, indptr, shape))
        axes = [d for d in range(2) if b.broadcastable[d]]
        if axes:
            g_b = g_b.sum(axis=axes, keepdims=True)
        grads = [tt.cast(g_data, data.dtype), *self._disconnected(inputs)]
        grads.append(tt.patternbroadcast(tt.cast(g_b, b.dtype), b.broadcastable))
        return grads + [disconnected_type()] * (len(inputs) - 4)


class MulSDCSC(_MulSDParts):
    """The data of ``mul_s_d(x, b)`` from the parts of the CSC matrix ``x`` (Theano's
    name): ``a_data[k] * b[a_indices[k], column of k]``."""

    format = "csc"


class MulSDCSR(_MulSDParts):
    """The data of ``mul_s_d(x, b)`` from the parts of the CSR matrix ``x`` (Theano's
    name): ``a_data[k] * b[row of k, a_indices[k]]``."""

    format = "csr"


def _gather_vector(op, inputs):
    """``b[column of each stored entry]`` for a CSR matrix's parts and a vector ``b``."""
    b = inputs[3]
    shape, _rows, cols = op._rows_cols(inputs)
    if b.shape != (shape[1],):
        raise ValueError(
            f"{type(op).__name__}: a vector of {b.shape[0]} entries for a matrix of shape {shape}"
        )
    return b[cols]


def _scatter_vector(values, indices, b):
    """The gradient of ``b[indices]``: ``values`` summed into a vector like ``b``."""
    return tt.inc_subtensor(tt.zeros_like(b)[indices], values)


class MulSVCSR(_PartsOp):
    """The data of ``mul_s_v(x, b)`` from the parts of the CSR matrix ``x`` (Theano's
    name): ``a_data[k] * b[a_indices[k]]``."""

    dense_ndim = 1

    def perform(self, node, inputs, output_storage, params=None):
        picked = _gather_vector(self, inputs)
        output_storage[0][0] = np.multiply(inputs[0], picked, dtype=node.outputs[0].dtype)

    def grad(self, inputs, output_grads):
        data, indices, _indptr, b = inputs[:4]
        (gz,) = output_grads
        g_data = self(gz, *inputs[1:])
        g_b = _scatter_vector(gz * data, indices, b)
        return [
            tt.cast(g_data, data.dtype),
            *self._disconnected(inputs),
            tt.cast(g_b, b.dtype),
        ] + [disconnected_type()] * (len(inputs) - 4)


class StructuredAddSVCSR(_PartsOp):
    """The data of ``structured_add_s_v(x, b)`` from the parts of the CSR matrix ``x``
    (Theano's name): ``a_data[k] + b[a_indices[k]]``."""

    dense_ndim = 1

    def perform(self, node, inputs, output_storage, params=None):
        picked = _gather_vector(self, inputs)
        output_storage[0][0] = np.add(inputs[0], picked, dtype=node.outputs[0].dtype)

    def grad(self, inputs, output_grads):
        data, indices, _indptr, b = inputs[:4]
        (gz,) = output_grads
        g_b = _scatter_vector(gz, indices, b)
        return [
            tt.cast(gz, data.dtype),
            *self._disconnected(inputs),
            tt.cast(g_b, b.dtype),
        ] + [disconnected_type()] * (len(inputs) - 4)


mul_s_d_csc, mul_s_d_csr = MulSDCSC(), MulSDCSR()
mul_s_v_csr = MulSVCSR()
structured_add_s_v_csr = StructuredAddSVCSR()


class SamplingDotCSR(Op):
    """``sampling_dot(x, y, p)`` on the parts of the CSR pattern ``p`` (Theano's name):
    ``(z_data, z_indices, z_indptr)`` with ``z_data[k] = p_data[k] * (x[i] . y[j])`` for
    the ``k``-th stored entry ``(i, j)`` of ``p``; the index arrays are ``p``'s (copies).
    Inputs: ``x`` (m x k), ``y`` (n x k), ``p_data``, ``p_ind``, ``p_ptr`` and ``p_ncols``
    (``n``)."""

    __props__ = ()

    def make_node(self, x, y, p_data, p_ind, p_ptr, p_ncols):
        x, y = tt.as_tensor_variable(x), tt.as_tensor_variable(y)
        if x.ndim != 2 or y.ndim != 2:
            raise TypeError(f"SamplingDotCSR: x and y must be matrices, got {x.type}, {y.type}")
        data, ind, ptr = _parts("SamplingDotCSR", p_data, p_ind, p_ptr)
        ncols = tt.as_tensor_variable(p_ncols)
        if ncols.ndim != 0 or ncols.dtype not in discrete_dtypes:
            raise TypeError(f"SamplingDotCSR: p_ncols must be an integer, got {ncols.type}")
        dtype = upcast(x.dtype, y.dtype, data.dtype)
        outs = [_dense_type(dtype, 1)(), _dense_type(ind.dtype, 1)(), _dense_type(ptr.dtype, 1)()]
        return Apply(self, [x, y, data, ind, ptr, ncols], outs)

    def perform(self, node, inputs, output_storage, params=None):
        x, y, data, ind, ptr, ncols = inputs
        _check_parts("SamplingDotCSR", data, ind, ptr)
        if x.shape[1] != y.shape[1] or len(ptr) - 1 != x.shape[0] or int(ncols) != y.shape[0]:
            raise ValueError(
                f"SamplingDotCSR: shapes x {x.shape}, y {y.shape} and a pattern of "
                f"{len(ptr) - 1} rows and {int(ncols)} columns do not match"
            )
        rows = _major(ptr)
        dtype = node.outputs[0].dtype
        dots = np.empty(len(rows), dtype=dtype)
        # Only the sampled entries: x[i] . y[j] for each stored (i, j), in bounded chunks.
        step = max(1, _GATHER_ELEMENTS // max(1, x.shape[1]))
        for s in range(0, len(rows), step):
            r, c = rows[s : s + step], ind[s : s + step]
            dots[s : s + step] = np.einsum("ij,ij->i", x[r], y[c])
        output_storage[0][0] = np.multiply(data, dots, dtype=dtype)
        output_storage[1][0] = ind.copy()
        output_storage[2][0] = ptr.copy()

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[2], input_shapes[3], input_shapes[4]]

    def connection_pattern(self, node):
        return [
            [True, False, False],
            [True, False, False],
            [True, False, False],
            [False, True, False],
            [False, False, True],
            [False, False, False],
        ]

    def grad(self, inputs, output_grads):
        x, y, data, ind, ptr, ncols = inputs
        gz = output_grads[0]
        if isinstance(gz.type, DisconnectedType):
            return [disconnected_type() for _ in inputs]
        shape = tt.stack([x.shape[0], tt.cast(ncols, x.shape.dtype)])
        # gz * p on p's pattern, as a matrix: x's and y's gradients are its products.
        weights = CSM("csr")(gz * data, ind, ptr, shape)
        g_data = self(x, y, gz, ind, ptr, ncols)[0]
        return [
            tt.cast(dot(weights, y), x.dtype),
            tt.cast(dot(transpose(weights), x), y.dtype),
            tt.cast(g_data, data.dtype),
            disconnected_type(),
            disconnected_type(),
            disconnected_type(),
        ]


sampling_dot_csr = SamplingDotCSR()
