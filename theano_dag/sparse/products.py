"""Matrix products with sparse operands (``theano.sparse``'s ``dot`` family).

- :func:`structured_dot` (a sparse matrix times a dense one, dense result): its gradient
  with respect to the sparse operand is *structured*, computed only on its stored
  entries (never a dense matrix of its shape). ``x.dot(y)`` on a sparse ``x`` is this.
- :func:`dot` (one or both operands sparse, dense result): *regular* gradients, dense.
- :func:`true_dot` (sparse result): regular gradients.

>>> import numpy as np, scipy.sparse as sp, theano_dag
>>> import theano_dag.tensor as tt
>>> from theano_dag.sparse import csr_matrix
>>> a, b = csr_matrix("a", dtype="float64"), tt.dmatrix("b")
>>> f = theano_dag.function([a, b], structured_dot(a, b))
>>> f(sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]])), np.array([[1.0], [10.0]]))
array([[20.],
       [ 1.]])
"""

from __future__ import annotations

import numpy as np

import theano_dag.tensor as tt
from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import grad_not_implemented
from theano_dag.graph.op import Op
from theano_dag.scalar.basic import upcast
from theano_dag.sparse.basic import (
    CSM,
    SparseFromDense,
    _cast_like,
    _dense_type,
    _major_minor,
    _with_data,
    csm_indices,
    csm_indptr,
    csm_shape,
    dense_from_sparse,
    mul_s_s,
    transpose,
)
from theano_dag.sparse.type import SparseType, is_sparse_value, scipy_sparse, type_formats
from theano_dag.sparse.variable import _is_sparse_variable, as_sparse_or_tensor_variable
from theano_dag.tensor.type import TensorType

__all__ = [
    "StructuredDot",
    "structured_dot",
    "StructuredDotGrad",
    "StructuredDotGradCSC",
    "StructuredDotGradCSR",
    "sdg_csr",
    "sdg_csc",
    "structured_dot_grad",
    "TrueDot",
    "true_dot",
    "Dot",
    "dot",
    "SamplingDot",
    "sampling_dot",
    "Usmm",
    "usmm",
]

# Rows of the gradient's gather computed at once (bounds the temporary to ~32 MiB).
_GATHER_ELEMENTS = 1 << 22


def _product(a, b):
    """``a @ b`` for sparse or dense operands, as an ndarray when dense."""
    r = a @ b
    return r if is_sparse_value(r) else np.asarray(r)


class StructuredDot(Op):
    """A sparse matrix times a dense matrix (dense result) or a sparse one (sparse
    result). Structured gradient for the sparse operand."""

    __props__ = ()

    def make_node(self, a, b):
        a = as_sparse_or_tensor_variable(a, formats=type_formats)
        b = as_sparse_or_tensor_variable(b, formats=type_formats)
        if not _is_sparse_variable(a):
            raise TypeError(f"StructuredDot: the first operand must be sparse, got {a.type}")
        if b.ndim != 2:
            raise TypeError(f"StructuredDot: the second operand must be a matrix, got {b.type}")
        dtype = upcast(a.dtype, b.dtype)
        if _is_sparse_variable(b):
            out = SparseType(a.format, dtype)()
        else:  # a column stays a column, as in a dense product
            out = TensorType(dtype, shape=(None, 1 if b.broadcastable[1] else None))()
        return Apply(self, [a, b], [out])

    def perform(self, node, inputs, output_storage, params=None):
        a, b = inputs
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"StructuredDot: shapes {a.shape} and {b.shape} do not align")
        out = node.outputs[0].type
        r = _product(a, b)
        if isinstance(out, SparseType):
            r = r.asformat(out.format)
        output_storage[0][0] = r.astype(out.dtype, copy=False)

    def grad(self, inputs, output_grads):
        a, b = inputs
        (gz,) = output_grads
        _no_bsr_gradient(self, inputs)
        return [
            _cast_like(structured_dot_grad(a, b, gz), a),
            _cast_like(structured_dot(transpose(a), gz), b),
        ]

    def infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[0][0], input_shapes[1][1])]


_structured_dot = StructuredDot()


def _no_bsr_gradient(op, inputs):
    for v in inputs:
        if isinstance(v.type, SparseType) and v.type.format not in ("csr", "csc"):
            raise NotImplementedError(
                f"{op}: no gradient through the {v.type.format} matrix {v} (csr and csc only)"
            )


def structured_dot(x, y):
    """``x @ y`` with at least one sparse operand; its gradient with respect to a sparse
    operand is structured (only on its stored entries). Dense when one operand is. An
    operand may be a ``bsr`` matrix (no gradient then).

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> structured_dot(x, np.array([[1.0], [10.0]])).eval({x: a})
    array([[20.],
           [ 1.]])
    """
    x = as_sparse_or_tensor_variable(x, formats=type_formats)
    y = as_sparse_or_tensor_variable(y, formats=type_formats)
    if _is_sparse_variable(x):
        return _structured_dot(x, y)
    if _is_sparse_variable(y):
        return _structured_dot(transpose(y), x.T).T
    raise TypeError(f"structured_dot needs a sparse operand, got {x.type} and {y.type}")


class StructuredDotGrad(Op):
    """The gradient of ``a @ b`` with respect to the sparse ``a``, on its stored entries:
    for entry ``(i, j)``, ``g[i, :] . b[j, :]``. Inputs: ``a``'s indices and indptr (of
    ``format``), ``b`` and the output gradient ``g``; output: the data vector."""

    __props__ = ("format",)

    def __init__(self, format):
        self.format = format

    def make_node(self, a_indices, a_indptr, b, g_ab):
        a_indices, a_indptr = tt.as_tensor_variable(a_indices), tt.as_tensor_variable(a_indptr)
        b, g_ab = as_sparse_or_tensor_variable(b), as_sparse_or_tensor_variable(g_ab)
        return Apply(self, [a_indices, a_indptr, b, g_ab], [_dense_type(g_ab.dtype, 1)()])

    def perform(self, node, inputs, output_storage, params=None):
        indices, indptr, b, g = inputs
        major = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        rows, cols = (major, indices) if self.format == "csr" else (indices, major)
        dtype = node.outputs[0].dtype
        out = np.empty(len(indices), dtype=dtype)
        if is_sparse_value(b) or is_sparse_value(g):
            m = scipy_sparse().csr_matrix(g @ b.T)
            out[:] = np.asarray(m[rows, cols]).ravel() if len(out) else 0
        else:
            step = max(1, _GATHER_ELEMENTS // max(1, g.shape[1]))
            for s in range(0, len(out), step):
                r, c = rows[s : s + step], cols[s : s + step]
                out[s : s + step] = np.einsum("ij,ij->i", g[r], b[c])
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [grad_not_implemented(self, i, v) for i, v in enumerate(inputs)]


class StructuredDotGradCSC(StructuredDotGrad):
    """:class:`StructuredDotGrad` of a CSC matrix (Theano's name)."""

    __props__ = ()

    def __init__(self):
        super().__init__("csc")


class StructuredDotGradCSR(StructuredDotGrad):
    """:class:`StructuredDotGrad` of a CSR matrix (Theano's name)."""

    __props__ = ()

    def __init__(self):
        super().__init__("csr")


sdg_csr = StructuredDotGradCSR()
sdg_csc = StructuredDotGradCSC()


def structured_dot_grad(sparse_a, b, ga):
    """The structured gradient of ``structured_dot(sparse_a, b)`` given the output
    gradient ``ga``: a sparse matrix of ``sparse_a``'s pattern."""
    indices, indptr = csm_indices(sparse_a), csm_indptr(sparse_a)
    data = (sdg_csr if sparse_a.format == "csr" else sdg_csc)(indices, indptr, b, ga)
    return CSM(sparse_a.format)(data, indices, indptr, csm_shape(sparse_a))


class TrueDot(Op):
    """A sparse matrix times a sparse or dense matrix, as a sparse matrix (the first
    operand's format). Regular gradients; ``grad_preserves_dense`` makes the gradient of
    a dense operand dense."""

    __props__ = ("grad_preserves_dense",)

    def __init__(self, grad_preserves_dense=True):
        self.grad_preserves_dense = bool(grad_preserves_dense)

    def make_node(self, x, y):
        x, y = as_sparse_or_tensor_variable(x), as_sparse_or_tensor_variable(y)
        if not _is_sparse_variable(x):
            raise TypeError(f"TrueDot: the first operand must be sparse, got {x.type}")
        if y.ndim != 2:
            raise TypeError(f"TrueDot: the second operand must be a matrix, got {y.type}")
        return Apply(self, [x, y], [SparseType(x.format, upcast(x.dtype, y.dtype))()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        if x.shape[1] != y.shape[0]:
            raise ValueError(f"TrueDot: shapes {x.shape} and {y.shape} do not align")
        out = node.outputs[0].type
        r = _product(x, y)
        if not is_sparse_value(r):
            r = scipy_sparse().csr_matrix(r)
        output_storage[0][0] = r.asformat(out.format).astype(out.dtype, copy=False)

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        gx = true_dot(gz, y.T)
        gy = true_dot(transpose(x), gz)
        if not _is_sparse_variable(y) and self.grad_preserves_dense:
            gy = dense_from_sparse(gy)
        return [_cast_like(gx, x), _cast_like(gy, y)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[0][0], input_shapes[1][1])]


def true_dot(x, y, grad_preserves_dense=True):
    """``x @ y`` as a sparse matrix, with at least one sparse operand; regular gradient.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> r = true_dot(x, x).eval({x: a})
    >>> r.format, r.toarray()
    ('csr', array([[2., 0.],
           [0., 2.]]))
    """
    x, y = as_sparse_or_tensor_variable(x), as_sparse_or_tensor_variable(y)
    if _is_sparse_variable(x):
        return TrueDot(grad_preserves_dense)(x, y)
    if _is_sparse_variable(y):
        return transpose(TrueDot(grad_preserves_dense)(transpose(y), x.T))
    raise TypeError(f"true_dot needs a sparse operand, got {x.type} and {y.type}")


class Dot(Op):
    """``x @ y`` with one or both operands sparse (a dense one may be a vector): a dense
    result. Regular gradients: that of a sparse operand is a sparse matrix storing every
    entry (as large as the dense matrix; :func:`structured_dot` avoids it)."""

    __props__ = ()

    def __str__(self):
        return "SparseDot"

    def make_node(self, x, y):
        x = as_sparse_or_tensor_variable(x, formats=type_formats)
        y = as_sparse_or_tensor_variable(y, formats=type_formats)
        if not (_is_sparse_variable(x) or _is_sparse_variable(y)):
            raise TypeError(
                f"sparse dot needs a sparse operand, got {x} ({x.type}) and {y} ({y.type})"
            )
        for k, v in enumerate((x, y)):
            if v.ndim not in (1, 2):
                raise TypeError(
                    f"sparse dot: operand {k} must have 1 or 2 dimensions, got {v.type}"
                )
        ndim = x.ndim + y.ndim - 2
        return Apply(self, [x, y], [_dense_type(upcast(x.dtype, y.dtype), ndim)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        r = _product(x, y)
        if is_sparse_value(r):
            r = r.toarray()
        output_storage[0][0] = np.asarray(r, dtype=node.outputs[0].dtype).reshape(
            self._out_shape(x, y)
        )

    @staticmethod
    def _out_shape(x, y):
        return x.shape[:-1] + y.shape[1:]

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        _no_bsr_gradient(self, inputs)

        def product(a, b):
            sparse = _is_sparse_variable(a) or _is_sparse_variable(b)
            return dot(a, b) if sparse else tt.dot(a, b)

        # A vector operand is dense (sparse ones are matrices): its gradient is a vector,
        # the other operand's an outer product.
        if y.ndim == 1:
            gx = tt.outer(gz, y)
            gy = product(transpose(x), gz)
        elif x.ndim == 1:
            gx = product(y, gz)
            gy = tt.outer(x, gz)
        else:
            gx = product(gz, transpose(y) if _is_sparse_variable(y) else y.T)
            gy = product(transpose(x) if _is_sparse_variable(x) else x.T, gz)
        # A sparse operand's gradient has its type: a sparse matrix storing every entry.
        gx, gy = (
            SparseFromDense(v.format)(g)
            if _is_sparse_variable(v) and not _is_sparse_variable(g)
            else g
            for v, g in ((x, gx), (y, gy))
        )
        return [_cast_like(gx, x), _cast_like(gy, y)]

    def infer_shape(self, fgraph, node, input_shapes):
        xs, ys = input_shapes
        return [tuple(xs)[:-1] + tuple(ys)[1:]]


_dot = Dot()


def dot(x, y):
    """``x @ y`` with one or both operands sparse, as a dense tensor; regular gradients.

    >>> from theano_dag.sparse import csc_matrix
    >>> import theano_dag.tensor as tt
    >>> dot(csc_matrix("x", dtype="float64"), tt.dvector("v")).type
    TensorType(float64, vector)
    """
    return _dot(x, y)


class SamplingDot(Op):
    """``p * (x @ y.T)`` for dense ``x`` (m x k), ``y`` (n x k) and a sparse pattern
    ``p`` (m x n): the product computed only where ``p`` stores an entry, as a sparse
    matrix of ``p``'s pattern and format. Regular gradients for ``x`` and ``y``; none
    for ``p``.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> sampling_dot(np.ones((2, 3)), np.ones((2, 3)), x).eval({x: a}).toarray()
    array([[0., 6.],
           [3., 0.]])
    """

    __props__ = ()

    def make_node(self, x, y, p):
        x, y = tt.as_tensor_variable(x), tt.as_tensor_variable(y)
        p = as_sparse_or_tensor_variable(p)
        if not _is_sparse_variable(p):
            raise TypeError(f"SamplingDot: the pattern p must be sparse, got {p.type}")
        if x.ndim != 2 or y.ndim != 2:
            raise TypeError(f"SamplingDot: x and y must be matrices, got {x.type}, {y.type}")
        dtype = upcast(x.dtype, y.dtype, p.dtype)
        return Apply(self, [x, y, p], [SparseType(p.format, dtype)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y, p = inputs
        if x.shape[1] != y.shape[1] or p.shape != (x.shape[0], y.shape[0]):
            raise ValueError(
                f"SamplingDot: shapes x {x.shape}, y {y.shape} and p {p.shape} do not match"
            )
        rows, cols = _major_minor(p)
        dtype = node.outputs[0].dtype
        dots = np.empty(len(rows), dtype=dtype)
        # Only the sampled entries: x[i] . y[j] for each stored (i, j), in bounded chunks.
        step = max(1, _GATHER_ELEMENTS // max(1, x.shape[1]))
        for s in range(0, len(rows), step):
            r, c = rows[s : s + step], cols[s : s + step]
            dots[s : s + step] = np.einsum("ij,ij->i", x[r], y[c])
        output_storage[0][0] = _with_data(p, (p.data * dots).astype(dtype, copy=False))

    def grad(self, inputs, output_grads):
        x, y, p = inputs
        (gz,) = output_grads
        pgz = mul_s_s(p, gz)
        return [
            _cast_like(dot(pgz, y), x),
            _cast_like(dot(transpose(pgz), x), y),
            grad_not_implemented(self, 2, p),
        ]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[2]]


sampling_dot = SamplingDot()


class Usmm(Op):
    """``alpha * (x @ y) + z`` with ``x`` or ``y`` sparse, ``alpha`` a scalar and ``z`` a
    dense matrix: a dense matrix, with one temporary fewer than the three ops. Regular
    gradients (those of :func:`dot`).

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> usmm(2.0, x, np.eye(2), np.ones((2, 2))).eval({x: a})
    array([[1., 5.],
           [3., 1.]])
    """

    __props__ = ()

    def __str__(self):
        return "Usmm{no_inplace}"

    def make_node(self, alpha, x, y, z):
        x = as_sparse_or_tensor_variable(x, formats=type_formats)
        y = as_sparse_or_tensor_variable(y, formats=type_formats)
        if not (_is_sparse_variable(x) or _is_sparse_variable(y)):
            raise TypeError(f"Usmm: x or y must be sparse, got {x.type} and {y.type}")
        alpha, z = tt.as_tensor_variable(alpha), tt.as_tensor_variable(z)
        if not all(alpha.broadcastable):
            raise TypeError(f"Usmm: alpha must be a scalar, got {alpha.type}")
        if z.ndim != 2 or x.ndim != 2 or y.ndim != 2:
            raise TypeError("Usmm: x, y and z must be matrices")
        dtype = upcast(alpha.dtype, x.dtype, y.dtype, z.dtype)
        return Apply(self, [alpha, x, y, z], [_dense_type(dtype, 2)()])

    def perform(self, node, inputs, output_storage, params=None):
        alpha, x, y, z = inputs
        dtype = node.outputs[0].dtype
        r = _product(x, y)
        if is_sparse_value(r):
            r = r.toarray()
        r = np.asarray(r, dtype=dtype)
        r *= np.asarray(alpha).reshape(())
        r += z
        output_storage[0][0] = r

    def grad(self, inputs, output_grads):
        alpha, x, y, z = inputs
        (gout,) = output_grads
        _no_bsr_gradient(self, inputs)
        xy = dot(x, y)
        galpha = (gout * xy).sum()
        galpha = tt.patternbroadcast(
            galpha.reshape((1,) * alpha.ndim) if alpha.ndim else galpha, alpha.broadcastable
        )
        scale = tt.cast(alpha.reshape(()) if alpha.ndim else alpha, gout.dtype)
        gx, gy = _dot.grad([x, y], [gout * scale])
        return [_cast_like(galpha, alpha), gx, gy, _cast_like(gout, z)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[1][0], input_shapes[2][1])]


usmm = Usmm()
