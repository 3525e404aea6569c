"""The sparse ops (``theano.sparse.basic``): building and taking apart a matrix (``CSM``,
``csm_properties``), conversions to and from dense, casts, transpose, negation, sums,
row and column scaling, sums and products with sparse or dense operands, and the
elementwise functions that keep the sparsity pattern (``structured_exp``, ``sqrt``...).

Every op computes with ``scipy.sparse`` and never makes a dense copy of a sparse input,
except the ones whose result is dense by definition (``dense_from_sparse``, a sparse
plus a dense matrix, the *regular* gradients Theano defines as dense).

A gradient is *structured* when it is only defined on the stored entries of a sparse
input (the sparsity pattern is taken as fixed), *regular* when it is the gradient with
respect to every entry of the matrix. Each op's docstring says which it gives.

>>> import numpy as np, scipy.sparse as sp, theano_dag
>>> from theano_dag.sparse import csr_matrix
>>> x = csr_matrix("x", dtype="float64")
>>> f = theano_dag.function([x], dense_from_sparse(x * 2.0))
>>> f(sp.csr_matrix(np.array([[0.0, 1.0], [3.0, 0.0]])))
array([[0., 2.],
       [6., 0.]])
"""

from __future__ import annotations

import numpy as np

import theano_dag.tensor as tt
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.null_type import DisconnectedType, disconnected_type, grad_not_implemented
from theano_dag.graph.op import Op
from theano_dag.scalar.basic import upcast
from theano_dag.sparse.type import SparseType, is_sparse_value, scipy_sparse
from theano_dag.sparse.variable import (
    _is_sparse_variable,
    as_sparse_or_tensor_variable,
    as_sparse_variable,
    continuous_dtypes,
    discrete_dtypes,
)
from theano_dag.tensor.type import TensorType

__all__ = [
    "CSMProperties",
    "csm_properties",
    "csm_data",
    "csm_indices",
    "csm_indptr",
    "csm_shape",
    "CSM",
    "CSC",
    "CSR",
    "CSMGrad",
    "csm_grad",
    "CanonicalParts",
    "Cast",
    "cast",
    "fcast",
    "dcast",
    "icast",
    "lcast",
    "DenseFromSparse",
    "dense_from_sparse",
    "SparseFromDense",
    "csr_from_dense",
    "csc_from_dense",
    "sp_ones_like",
    "sp_zeros_like",
    "Transpose",
    "transpose",
    "Neg",
    "neg",
    "ColScaleCSC",
    "RowScaleCSC",
    "col_scale",
    "row_scale",
    "SpSum",
    "sp_sum",
    "AddSS",
    "add_s_s",
    "AddSD",
    "add_s_d",
    "add",
    "sub",
    "MulSS",
    "mul_s_s",
    "MulSD",
    "mul_s_d",
    "mul",
    "AddSSData",
    "add_s_s_data",
    "StructuredAddSV",
    "structured_add_s_v",
    "MulSV",
    "mul_s_v",
    "structured_monoid",
    "structured_sigmoid",
    "structured_exp",
    "structured_log",
    "structured_pow",
    "structured_minimum",
    "structured_maximum",
    "structured_add",
    "sin",
    "tan",
    "arcsin",
    "arctan",
    "sinh",
    "arcsinh",
    "tanh",
    "arctanh",
    "rint",
    "sgn",
    "ceil",
    "floor",
    "log1p",
    "expm1",
    "deg2rad",
    "rad2deg",
    "trunc",
    "sqr",
    "sqrt",
    "abs_",
    "conj",
]

_INT32_MAX = np.iinfo(np.int32).max


def _is_sparse(x):
    """Whether ``x`` is a scipy.sparse matrix (a value, not a variable)."""
    return is_sparse_value(x)


def _is_dense_variable(x):
    """Whether ``x`` is a dense tensor variable (Theano's helper)."""
    return isinstance(x, Variable) and isinstance(x.type, TensorType)


def __getattr__(name):
    # Theano's ``_mtypes``: scipy's matrix classes, made on use (no scipy at import).
    if name == "_mtypes":
        sp = scipy_sparse()
        return [sp.csc_matrix, sp.csr_matrix]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _dense_type(dtype, ndim):
    return TensorType(dtype, shape=(None,) * ndim)


def _matrix_class(format):
    sp = scipy_sparse()
    return sp.csr_matrix if format == "csr" else sp.csc_matrix


def _with_data(x, data, format=None):
    """A matrix of ``x``'s pattern holding ``data``; its index arrays are copies, so that
    scipy canonicalising one matrix in place never changes another."""
    cls = _matrix_class(format or x.format)
    return cls((data, x.indices.copy(), x.indptr.copy()), shape=x.shape)


def _canonical(x):
    """``x`` with its duplicate entries summed and its indices sorted: ``x`` itself when
    it is so already, else a copy (scipy canonicalises in place; the caller's matrix must
    not change). A matrix's value at a place is the sum of the entries stored there, so
    an op on the stored entries one by one reads them from this."""
    if x.has_canonical_format:
        return x
    x = x.copy()
    x.sum_duplicates()
    return x


def _fits(shape, dense, broadcastable):
    """Whether a dense operand of shape ``dense.shape`` combines with a sparse matrix of
    ``shape``: equal lengths, or a length of 1 along an axis its type declares
    broadcastable (as a dense elementwise op: no broadcast the gradient does not know)."""
    return all(b == a or (b == 1 and bc) for a, b, bc in zip(shape, dense.shape, broadcastable))


def _major_minor(x):
    """For each stored entry of ``x`` (CSR or CSC): its row and its column."""
    major = np.repeat(np.arange(len(x.indptr) - 1), np.diff(x.indptr))
    return (major, x.indices) if x.format == "csr" else (x.indices, major)


def _int32(a, what):
    a = np.asarray(a)
    if a.size and (a.max() > _INT32_MAX or a.min() < -_INT32_MAX - 1):
        raise ValueError(f"sparse {what} do not fit int32 (largest {a.max()})")
    return a.astype("int32", copy=False)


def _cast_like(g, var):
    """``g`` in ``var``'s dtype (a gradient must have its input's dtype)."""
    if g.dtype == var.dtype:
        return g
    return cast(g, var.dtype) if _is_sparse_variable(g) else tt.cast(g, var.dtype)


# -- building and taking apart ---------------------------------------------------------


class CSMProperties(Op):
    """``(data, indices, indptr, shape)`` of a CSR or CSC matrix: the stored values, their
    minor indices (int32), the index pointer (int32) and the shape (int32 vector). They
    are those of the matrix made canonical (scipy's ``sum_duplicates``: one entry per
    place, indices sorted), so that a function of the data is a function of the values:
    the matrix's own arrays when it is canonical already, else copies.

    The gradient is regular with respect to the data: a matrix of ``x``'s pattern.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> value = sp.csr_matrix(np.array([[0.0, 5.0], [7.0, 0.0]]))
    >>> for v in csm_properties(x):
    ...     print(v.eval({x: value}))
    [5. 7.]
    [1 0]
    [0 1 2]
    [2 2]
    """

    __props__ = ()
    # The data, indices and indptr are the matrix's own arrays.
    view_map = {0: [0], 1: [0], 2: [0]}

    def make_node(self, csm):
        csm = as_sparse_variable(csm)
        outs = [
            _dense_type(csm.dtype, 1)(),
            _dense_type("int32", 1)(),
            _dense_type("int32", 1)(),
            TensorType("int32", shape=(2,))(),
        ]
        return Apply(self, [csm], outs)

    def perform(self, node, inputs, output_storage, params=None):
        # Canonical: each place once, so a function of the data is one of the values.
        x = _canonical(inputs[0])
        output_storage[0][0] = x.data
        output_storage[1][0] = _int32(x.indices, "indices")
        output_storage[2][0] = _int32(x.indptr, "indptr")
        output_storage[3][0] = np.asarray(x.shape, dtype="int32")

    def connection_pattern(self, node):
        return [[True, False, False, False]]

    def grad(self, inputs, output_grads):
        (x,) = inputs
        g_data = output_grads[0]
        if isinstance(g_data.type, DisconnectedType):
            return [sp_zeros_like(x)]
        _data, indices, indptr, shape = csm_properties(x)
        return [CSM(x.format)(g_data, indices, indptr, shape)]


csm_properties = CSMProperties()


def csm_data(csm):
    """The stored values of ``csm`` (a dense vector)."""
    return csm_properties(csm)[0]


def csm_indices(csm):
    """The minor indices of ``csm``'s stored values (int32 vector)."""
    return csm_properties(csm)[1]


def csm_indptr(csm):
    """The index pointer of ``csm`` (int32 vector, one more than the major length)."""
    return csm_properties(csm)[2]


def csm_shape(csm):
    """The shape of ``csm`` (int32 vector of length 2)."""
    return csm_properties(csm)[3]


def _int_vector(v, what):
    if not isinstance(v, Variable):
        v = _int32(v, what)
    v = tt.as_tensor_variable(v)
    if v.ndim != 1 or v.dtype not in discrete_dtypes:
        raise TypeError(f"CSM: {what} must be a vector of integers, got {v.type}")
    return v


class CSM(Op):
    """A CSR or CSC matrix from ``(data, indices, indptr, shape)``; the inverse of
    :func:`csm_properties`. The result holds ``data`` itself (a view) and copies of the
    index arrays. The gradient with respect to ``data`` is regular (a dense vector).

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> d = tt.dvector("d")
    >>> m = CSR(d, [1, 0], [0, 1, 2], [2, 2])
    >>> m.type, dense_from_sparse(m).eval({d: np.array([5.0, 7.0])})
    (Sparse[float64, csr], array([[0., 5.],
           [7., 0.]]))
    """

    __props__ = ("format",)

    def __init__(self, format):
        if format not in ("csr", "csc"):
            raise ValueError(f"CSM: format must be 'csr' or 'csc', got {format!r}")
        self.format = format
        self.view_map = {0: [0]}

    def make_node(self, data, indices, indptr, shape):
        data = tt.as_tensor_variable(data)
        if data.ndim != 1:
            raise TypeError(f"CSM: data must be a vector, got {data.type}")
        indices = _int_vector(indices, "indices")
        indptr = _int_vector(indptr, "indptr")
        shape = _int_vector(shape, "shape")
        return Apply(self, [data, indices, indptr, shape], [SparseType(self.format, data.dtype)()])

    def perform(self, node, inputs, output_storage, params=None):
        data, indices, indptr, shape = inputs
        if len(shape) != 2:
            raise ValueError(f"CSM: shape must have two entries, got {list(shape)}")
        if data.shape != indices.shape:
            raise ValueError(
                f"CSM: data ({data.shape[0]} values) and indices ({indices.shape[0]}) "
                "must have the same length"
            )
        cls = _matrix_class(self.format)
        output_storage[0][0] = cls(
            (data, indices.copy(), indptr.copy()), shape=tuple(int(s) for s in shape), copy=False
        )

    def connection_pattern(self, node):
        return [[True], [False], [False], [False]]

    def grad(self, inputs, output_grads):
        x_data, x_indices, x_indptr, x_shape = inputs
        g_data, g_indices, g_indptr, g_shape = csm_properties(output_grads[0])
        gx = csm_grad(x_data, x_indices, x_indptr, x_shape, g_data, g_indices, g_indptr, g_shape)
        return [gx] + [disconnected_type() for _ in range(3)]

    def infer_shape(self, fgraph, node, input_shapes):
        shape = node.inputs[3]
        return [(tt.cast(shape[0], "int64"), tt.cast(shape[1], "int64"))]


CSC = CSM("csc")
CSR = CSM("csr")


class CSMGrad(Op):
    """The gradient of :class:`CSM` with respect to its data: for each stored entry of
    ``x``, the value of the gradient matrix ``g`` at the same place (duplicates summed).
    ``g`` may store other places than ``x``: they have no data entry to go to."""

    __props__ = ()

    def make_node(self, x_data, x_indices, x_indptr, x_shape, g_data, g_indices, g_indptr, g_shape):
        ins = [x_data, x_indices, x_indptr, x_shape, g_data, g_indices, g_indptr, g_shape]
        ins = [tt.as_tensor_variable(v) for v in ins]
        return Apply(self, ins, [_dense_type(ins[4].dtype, 1)()])

    def perform(self, node, inputs, output_storage, params=None):
        x_data, x_indices, x_indptr, x_shape, g_data, g_indices, g_indptr, g_shape = inputs
        n_major = len(x_indptr) - 1
        # Both matrices have the same format: read each as CSR of (major, minor) lengths.
        n_minor = int(x_shape[1] if n_major == x_shape[0] else x_shape[0])
        out = np.zeros(x_data.shape, dtype=node.outputs[0].dtype)
        if out.size and len(g_data):
            sp = scipy_sparse()
            g = sp.csr_matrix((g_data, g_indices, g_indptr), shape=(n_major, n_minor), copy=True)
            g.sum_duplicates()
            major = np.repeat(np.arange(n_major), np.diff(x_indptr))
            out[:] = np.asarray(g[major, x_indices]).ravel()
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [grad_not_implemented(self, i, v) for i, v in enumerate(inputs)]


csm_grad = CSMGrad()


class CanonicalParts(Op):
    """``csm_properties(CSM(format)(data, indices, indptr, shape))`` in one op, without
    the matrix: the parts themselves when they are canonical (one entry per place, sorted
    indices), else the summed and sorted parts. The rewrite of ``csm_properties`` of a
    matrix just built from parts makes it where the parts may hold a place twice. The
    gradient with respect to ``data`` is regular (each entry gets its place's).

    >>> import numpy as np, theano_dag.tensor as tt
    >>> d = tt.dvector("d")
    >>> data, indices, indptr, shape = CanonicalParts("csr")(d, [2, 0, 2], [0, 3], [1, 3])
    >>> data.eval({d: np.array([1.0, 2.0, 3.0])}), indices.eval({d: np.array([1.0, 2.0, 3.0])})
    (array([2., 4.]), array([0, 2], dtype=int32))
    """

    __props__ = ("format",)
    # The parts themselves when they are canonical already.
    view_map = {0: [0], 1: [1], 2: [2], 3: [3]}

    def __init__(self, format):
        if format not in ("csr", "csc"):
            raise ValueError(f"CanonicalParts: format must be 'csr' or 'csc', got {format!r}")
        self.format = format

    def make_node(self, data, indices, indptr, shape):
        data = tt.as_tensor_variable(data)
        if data.ndim != 1:
            raise TypeError(f"CanonicalParts: data must be a vector, got {data.type}")
        ins = [data, _int_vector(indices, "indices"), _int_vector(indptr, "indptr")]
        ins.append(_int_vector(shape, "shape"))
        outs = [
            _dense_type(data.dtype, 1)(),
            _dense_type("int32", 1)(),
            _dense_type("int32", 1)(),
            TensorType("int32", shape=(2,))(),
        ]
        return Apply(self, ins, outs)

    def perform(self, node, inputs, output_storage, params=None):
        data, indices, indptr, shape = inputs
        if len(shape) != 2 or data.shape != indices.shape:
            raise ValueError(
                f"CanonicalParts: {len(data)} values, {len(indices)} indices and a shape "
                f"of {len(shape)} lengths do not make a matrix"
            )
        shape = tuple(int(s) for s in shape)
        x = _canonical(_matrix_class(self.format)((data, indices, indptr), shape=shape))
        output_storage[0][0] = x.data
        output_storage[1][0] = _int32(x.indices, "indices")
        output_storage[2][0] = _int32(x.indptr, "indptr")
        output_storage[3][0] = np.asarray(shape, dtype="int32")

    def connection_pattern(self, node):
        return [[True, False, False, False]] + [[False] * 4] * 3

    def grad(self, inputs, output_grads):
        data, indices, indptr, shape = inputs
        g_data = output_grads[0]
        if isinstance(g_data.type, DisconnectedType):
            return [tt.zeros_like(data)] + [disconnected_type()] * 3
        _data, c_indices, c_indptr, c_shape = self(*inputs)
        gx = csm_grad(data, indices, indptr, shape, g_data, c_indices, c_indptr, c_shape)
        return [gx] + [disconnected_type()] * 3


# -- conversions ---------------------------------------------------------------------


class Cast(Op):
    """``x`` with its entries in dtype ``out_type`` (the pattern unchanged); the gradient
    is regular."""

    __props__ = ("out_type",)

    def __init__(self, out_type):
        self.out_type = str(np.dtype(out_type))

    def make_node(self, x):
        x = as_sparse_variable(x)
        return Apply(self, [x], [SparseType(x.format, self.out_type)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        # An older scipy (1.9) sums the duplicates of the matrix it casts, in place.
        output_storage[0][0] = _canonical(x).astype(self.out_type)

    def grad(self, inputs, output_grads):
        (x,) = inputs
        (gz,) = output_grads
        if x.dtype in discrete_dtypes:
            return [sp_zeros_like(cast(x, config.floatX))]
        return [_cast_like(gz, x)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def __str__(self):
        return f"Cast({self.out_type})"


def cast(variable, dtype):
    """The sparse ``variable`` with entries of ``dtype`` (no op when it has it already).

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> cast(x, "int32").eval({x: a}).dtype
    dtype('int32')
    """
    variable = as_sparse_variable(variable)
    if variable.dtype == str(np.dtype(dtype)):
        return variable
    return Cast(dtype)(variable)


fcast, dcast = Cast("float32"), Cast("float64")
icast, lcast = Cast("int32"), Cast("int64")


class DenseFromSparse(Op):
    """The dense matrix of a sparse one. With ``structured=True`` (the default, as in
    Theano) the gradient is structured: the output gradient read on ``x``'s pattern;
    with ``structured=False`` it is regular (the whole output gradient, made sparse).

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> dense_from_sparse(x).eval({x: a})
    array([[0., 2.],
           [1., 0.]])
    """

    __props__ = ("sparse_grad",)

    def __init__(self, structured=True):
        self.sparse_grad = bool(structured)

    def __str__(self):
        return f"DenseFromSparse{{structured_grad={self.sparse_grad}}}"

    def make_node(self, x):
        x = as_sparse_variable(x)
        return Apply(self, [x], [_dense_type(x.dtype, 2)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        if not is_sparse_value(x):
            raise TypeError(f"DenseFromSparse: expected a sparse matrix, got {type(x).__name__}")
        output_storage[0][0] = x.toarray()

    def grad(self, inputs, output_grads):
        (x,) = inputs
        (gz,) = output_grads
        if self.sparse_grad:
            return [_cast_like(mul_s_d(sp_ones_like(x), gz), x)]
        return [_cast_like(SparseFromDense(x.format)(gz), x)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


dense_from_sparse = DenseFromSparse()


class SparseFromDense(Op):
    """A dense matrix (a vector or scalar is made a one-row matrix) as a sparse matrix
    of ``format``, storing its non-zero entries. The gradient is the output gradient
    made dense.

    >>> import numpy as np, theano_dag.tensor as tt
    >>> d = tt.dmatrix("d")
    >>> s = csc_from_dense(d).eval({d: np.array([[0.0, 2.0], [1.0, 0.0]])})
    >>> s.format, s.nnz
    ('csc', 2)
    """

    __props__ = ("format",)

    def __init__(self, format):
        if format not in ("csr", "csc"):
            raise ValueError(f"SparseFromDense: format must be 'csr' or 'csc', got {format!r}")
        self.format = format

    def __str__(self):
        return f"SparseFromDense{{{self.format}}}"

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        if x.ndim > 2:
            raise TypeError(f"sparse matrices have 2 dimensions, but {x} has {x.ndim}")
        if x.ndim < 2:
            x = x.dimshuffle(*(["x"] * (2 - x.ndim)), *range(x.ndim))
        return Apply(self, [x], [SparseType(self.format, x.dtype)()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = _matrix_class(self.format)(inputs[0])

    def grad(self, inputs, output_grads):
        (x,) = inputs
        gx = dense_from_sparse(output_grads[0])
        return [tt.patternbroadcast(_cast_like(gx, x), x.broadcastable)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


csr_from_dense = SparseFromDense("csr")
csc_from_dense = SparseFromDense("csc")


def sp_ones_like(x):
    """A matrix of ``x``'s pattern holding ones.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> sp_ones_like(x).eval({x: a}).toarray()
    array([[0., 1.],
           [1., 0.]])
    """
    data, indices, indptr, shape = csm_properties(x)
    return CSM(x.format)(tt.ones_like(data), indices, indptr, shape)


def sp_zeros_like(x):
    """A matrix of ``x``'s shape and format with no stored entries."""
    _data, _indices, indptr, shape = csm_properties(x)
    return CSM(x.format)(
        tt.zeros((0,), dtype=x.dtype),
        tt.zeros((0,), dtype="int32"),
        tt.zeros_like(indptr),
        shape,
    )


# -- structure -----------------------------------------------------------------------


class Transpose(Op):
    """The transpose, a view: a CSR matrix becomes CSC and the other way. Regular
    gradient.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> x.T.type
    Sparse[float64, csc]
    >>> x.T.eval({x: a}).toarray()
    array([[0., 1.],
           [2., 0.]])
    """

    __props__ = ()
    view_map = {0: [0]}
    format_map = {"csr": "csc", "csc": "csr"}

    def __str__(self):
        return "SparseTranspose"

    def make_node(self, x):
        x = as_sparse_variable(x)
        return Apply(self, [x], [SparseType(self.format_map[x.format], x.dtype)()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0].transpose()

    def grad(self, inputs, output_grads):
        return [transpose(output_grads[0])]

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])[::-1]]


transpose = Transpose()


class Neg(Op):
    """``-x``; regular gradient."""

    __props__ = ()

    def __str__(self):
        return "SparseNeg"

    def make_node(self, x):
        x = as_sparse_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = -inputs[0]

    def grad(self, inputs, output_grads):
        return [neg(output_grads[0])]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


neg = Neg()


class _ScaleCSC(Op):
    """Each stored entry of a CSC matrix times the entry of a dense vector along one axis
    (``axis=1``: its column's, ``axis=0``: its row's). Structured gradient."""

    __props__ = ()
    axis: int

    def make_node(self, x, s):
        x = as_sparse_variable(x)
        s = tt.as_tensor_variable(s)
        if x.format != "csc":
            raise ValueError(f"{type(self).__name__} needs a csc matrix, got {x.format}")
        if s.ndim != 1:
            raise TypeError(f"{type(self).__name__}: the scale must be a vector, got {s.type}")
        return Apply(self, [x, s], [SparseType("csc", upcast(x.dtype, s.dtype))()])

    def perform(self, node, inputs, output_storage, params=None):
        x, s = inputs
        if s.shape != (x.shape[self.axis],):
            raise ValueError(
                f"{type(self).__name__}: a scale of {s.shape[0]} entries for a matrix of "
                f"shape {x.shape}"
            )
        rows, cols = _major_minor(x)
        where = cols if self.axis == 1 else rows
        data = (x.data * s[where]).astype(node.outputs[0].dtype, copy=False)
        output_storage[0][0] = _with_data(x, data)

    def grad(self, inputs, output_grads):
        x, s = inputs
        (gz,) = output_grads
        scale = col_scale if self.axis == 1 else row_scale
        gs = sp_sum(mul(x, gz), axis=1 - self.axis, sparse_grad=True)
        return [_cast_like(scale(gz, s), x), _cast_like(gs, s)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class ColScaleCSC(_ScaleCSC):
    """Column ``j`` of a CSC matrix times ``s[j]``; see :func:`col_scale`."""

    axis = 1


class RowScaleCSC(_ScaleCSC):
    """Row ``i`` of a CSC matrix times ``s[i]``; see :func:`row_scale`."""

    axis = 0


def col_scale(x, s):
    """Each column ``j`` of the sparse ``x`` times ``s[j]`` (``x``'s format kept).
    Structured gradient.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> col_scale(x, [10.0, 100.0]).toarray().eval({x: sp.csr_matrix(np.ones((1, 2)))})
    array([[ 10., 100.]])
    """
    x = as_sparse_variable(x)
    if x.format == "csc":
        return ColScaleCSC()(x, s)
    return transpose(RowScaleCSC()(transpose(x), s))


def row_scale(x, s):
    """Each row ``i`` of the sparse ``x`` times ``s[i]`` (``x``'s format kept).
    Structured gradient.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> row_scale(x, [10.0, 100.0]).eval({x: a}).toarray()
    array([[  0.,  20.],
           [100.,   0.]])
    """
    return transpose(col_scale(transpose(as_sparse_variable(x)), s))


class SpSum(Op):
    """The sum of a sparse matrix (``axis=None``) or along an axis, as a dense tensor.
    ``sparse_grad=True`` gives a structured gradient; ``False`` a regular one, which is a
    sparse matrix storing every entry (as dense as the matrix)."""

    __props__ = ("axis", "sparse_grad")

    def __init__(self, axis=None, sparse_grad=True):
        if axis not in (None, 0, 1):
            raise ValueError(f"sp_sum: axis must be None, 0 or 1, got {axis!r}")
        self.axis = axis
        self.sparse_grad = bool(sparse_grad)

    def make_node(self, x):
        x = as_sparse_variable(x)
        return Apply(self, [x], [_dense_type(x.dtype, 0 if self.axis is None else 1)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        dtype = node.outputs[0].dtype
        if self.axis is None:
            # scipy's x.sum() sums duplicates in x itself: the stored values' sum instead.
            output_storage[0][0] = np.asarray(np.sum(x.data), dtype=dtype)
        else:
            output_storage[0][0] = np.asarray(x.sum(axis=self.axis), dtype=dtype).ravel()

    def grad(self, inputs, output_grads):
        (x,) = inputs
        (gz,) = output_grads
        if x.dtype not in continuous_dtypes:
            return [sp_zeros_like(cast(x, config.floatX))]
        if self.sparse_grad:
            ones = sp_ones_like(x)
            if self.axis is None:
                r = mul_s_d(ones, gz)
            elif self.axis == 0:
                r = col_scale(ones, gz)
            else:
                r = row_scale(ones, gz)
        else:
            ones = tt.ones(x.shape, dtype=gz.dtype)
            if self.axis == 0:
                gz = gz.dimshuffle("x", 0)
            elif self.axis == 1:
                gz = gz.dimshuffle(0, "x")
            r = SparseFromDense(x.format)(ones * gz)
        return [_cast_like(r, x)]

    def infer_shape(self, fgraph, node, input_shapes):
        if self.axis is None:
            return [()]
        return [(input_shapes[0][1 - self.axis],)]

    def __str__(self):
        return f"SpSum{{axis={self.axis}}}"


def sp_sum(x, axis=None, sparse_grad=False):
    """The sum of the sparse ``x`` (all entries, or along ``axis``) as a dense tensor.
    The gradient is structured with ``sparse_grad=True``, regular otherwise (Theano's
    default).

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> sp_sum(x).eval({x: a}), sp_sum(x, axis=0).eval({x: a})
    (array(3.), array([1., 2.]))
    """
    return SpSum(axis, sparse_grad)(x)


# -- sums and products ---------------------------------------------------------------


class AddSS(Op):
    """The sum of two sparse matrices, in the first one's format; regular gradient."""

    __props__ = ()

    def make_node(self, x, y):
        x, y = as_sparse_variable(x), as_sparse_variable(y)
        return Apply(self, [x, y], [SparseType(x.format, upcast(x.dtype, y.dtype))()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        out = node.outputs[0].type
        output_storage[0][0] = (x + y).asformat(out.format).astype(out.dtype, copy=False)

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        return [_cast_like(gz, x), _cast_like(gz, y)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


add_s_s = AddSS()


class AddSD(Op):
    """A sparse matrix plus a dense one (which may broadcast along an axis of length 1):
    a dense matrix. Structured gradient for the sparse operand."""

    __props__ = ()

    def make_node(self, x, y):
        x, y = as_sparse_variable(x), tt.as_tensor_variable(y)
        if y.ndim != 2:
            raise TypeError(f"AddSD: the dense operand must be a matrix, got {y.type}")
        return Apply(self, [x, y], [_dense_type(upcast(x.dtype, y.dtype), 2)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        if not _fits(x.shape, y, node.inputs[1].broadcastable):
            raise ValueError(
                f"AddSD: shapes {x.shape} (sparse) and {y.shape} do not match (a dense "
                "operand broadcasts along an axis of length 1 only when declared so)"
            )
        out = np.broadcast_to(y, x.shape).astype(node.outputs[0].dtype)
        if not x.has_canonical_format:  # duplicates: summed into one entry first
            x = x.copy()
            x.sum_duplicates()
        out[_major_minor(x)] += x.data
        output_storage[0][0] = out

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        axes = [d for d in range(2) if y.broadcastable[d]]
        gy = gz.sum(axis=axes, keepdims=True) if axes else gz
        return [_cast_like(mul_s_d(sp_ones_like(x), gz), x), _cast_like(gy, y)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


add_s_d = AddSD()


def add(x, y):
    """``x + y`` where one or both are sparse: sparse when both are, else dense.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x, y = csr_matrix("x", dtype="float64"), csr_matrix("y", dtype="float64")
    >>> add(x, y).type, add(x, np.ones((2, 2))).type
    (Sparse[float64, csr], TensorType(float64, matrix))
    """
    x, y = as_sparse_or_tensor_variable(x), as_sparse_or_tensor_variable(y)
    x_sparse, y_sparse = _is_sparse_variable(x), _is_sparse_variable(y)
    if x_sparse and y_sparse:
        return add_s_s(x, y)
    if not (x_sparse or y_sparse):
        raise TypeError(f"sparse.add needs a sparse operand, got {x.type} and {y.type}")
    sparse, dense = (x, y) if x_sparse else (y, x)
    if dense.ndim > 2:
        raise TypeError(f"sparse.add: {dense} has {dense.ndim} dimensions (at most 2)")
    dense = dense.dimshuffle(*(["x"] * (2 - dense.ndim)), *range(dense.ndim))
    return add_s_d(sparse, dense)


def sub(x, y):
    """``x - y`` where one or both are sparse (``x + (-y)``).

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> sub(x, np.ones((2, 2))).eval({x: a})
    array([[-1.,  1.],
           [ 0., -1.]])
    """
    y = as_sparse_or_tensor_variable(y)
    return add(x, -y)


class MulSS(Op):
    """The elementwise product of two sparse matrices (stored where both store), in the
    first one's format; regular gradient."""

    __props__ = ()

    def make_node(self, x, y):
        x, y = as_sparse_variable(x), as_sparse_variable(y)
        return Apply(self, [x, y], [SparseType(x.format, upcast(x.dtype, y.dtype))()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        if x.shape != y.shape:
            raise ValueError(f"MulSS: shapes {x.shape} and {y.shape} differ")
        out = node.outputs[0].type
        result = scipy_sparse().csr_matrix(x.multiply(y))
        output_storage[0][0] = result.asformat(out.format).astype(out.dtype, copy=False)

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        return [_cast_like(mul(y, gz), x), _cast_like(mul(x, gz), y)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


mul_s_s = MulSS()


class MulSD(Op):
    """A sparse matrix times a dense scalar or matrix (which may broadcast), elementwise:
    a sparse matrix of the sparse operand's pattern. Structured gradient for the sparse
    operand, regular for the dense one."""

    __props__ = ()

    def make_node(self, x, y):
        x, y = as_sparse_variable(x), tt.as_tensor_variable(y)
        if y.ndim not in (0, 2):
            raise TypeError(f"MulSD: the dense operand must be a scalar or matrix, got {y.type}")
        return Apply(self, [x, y], [SparseType(x.format, upcast(x.dtype, y.dtype))()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        dtype = node.outputs[0].dtype
        if y.ndim == 0:
            data = x.data * y
        else:
            if not _fits(x.shape, y, node.inputs[1].broadcastable):
                raise ValueError(
                    f"MulSD: shapes {x.shape} (sparse) and {y.shape} do not match (a dense "
                    "operand broadcasts along an axis of length 1 only when declared so)"
                )
            data = x.data * np.broadcast_to(y, x.shape)[_major_minor(x)]
        output_storage[0][0] = _with_data(x, data.astype(dtype, copy=False))

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        gx = mul_s_d(gz, y)
        if y.ndim == 0:
            gy = sp_sum(mul(x, gz), sparse_grad=True)
        else:
            gy = dense_from_sparse(mul(x, gz))
            axes = [d for d in range(2) if y.broadcastable[d]]
            if axes:
                gy = gy.sum(axis=axes, keepdims=True)
        return [_cast_like(gx, x), _cast_like(gy, y)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


mul_s_d = MulSD()


def mul(x, y):
    """``x * y`` elementwise where one or both are sparse; the result is sparse (stored
    only where a sparse operand stores). A dense vector multiplies each row.

    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float32")
    >>> mul(x, 2.0).type, mul(x, x).type
    (Sparse[float32, csr], Sparse[float32, csr])
    """
    x, y = as_sparse_or_tensor_variable(x), as_sparse_or_tensor_variable(y)
    x_sparse, y_sparse = _is_sparse_variable(x), _is_sparse_variable(y)
    if x_sparse and y_sparse:
        return mul_s_s(x, y)
    if not (x_sparse or y_sparse):
        raise TypeError(f"sparse.mul needs a sparse operand, got {x.type} and {y.type}")
    sparse, dense = (x, y) if x_sparse else (y, x)
    if dense.ndim == 1:
        dense = dense.dimshuffle("x", 0)
    return mul_s_d(sparse, dense)


class AddSSData(Op):
    """The sum of two sparse matrices of the same format, dtype and pattern, computed on
    their data (the first one's index arrays are kept). Structured gradient."""

    __props__ = ()

    def make_node(self, x, y):
        x, y = as_sparse_variable(x), as_sparse_variable(y)
        if x.type.dtype != y.type.dtype or x.type.format != y.type.format:
            raise NotImplementedError(
                f"AddSSData: both matrices need one dtype and format, got {x.type} and {y.type}"
            )
        return Apply(self, [x, y], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = (_canonical(v) for v in inputs)
        if x.shape != y.shape or x.data.shape != y.data.shape:
            raise ValueError(
                f"AddSSData: the matrices must have one shape and pattern, got {x.shape} "
                f"({x.nnz} stored) and {y.shape} ({y.nnz} stored)"
            )
        output_storage[0][0] = _with_data(x, x.data + y.data)

    def grad(self, inputs, output_grads):
        (gz,) = output_grads
        return [
            _cast_like(gz, v) if v.dtype in continuous_dtypes else sp_zeros_like(v) for v in inputs
        ]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


add_s_s_data = AddSSData()


def _check_row_vector(op, x, y):
    if y.shape != (x.shape[1],):
        raise ValueError(
            f"{type(op).__name__}: a vector of {y.shape[0]} entries for a matrix of shape {x.shape}"
        )


def _row_vector(op, x, y):
    x, y = as_sparse_variable(x), tt.as_tensor_variable(y)
    if y.ndim != 1:
        raise TypeError(f"{type(op).__name__}: the dense operand must be a vector, got {y.type}")
    return x, y


class _RowVectorOp(Op):
    """Each stored entry ``(i, j)`` of the sparse ``x`` combined by ``ufunc`` with
    ``y[j]`` (a dense vector along the columns); the pattern is kept."""

    __props__ = ()
    ufunc = None

    def make_node(self, x, y):
        x, y = _row_vector(self, x, y)
        return Apply(self, [x, y], [SparseType(x.format, upcast(x.dtype, y.dtype))()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        _check_row_vector(self, x, y)
        x = _canonical(x)  # y[j] is added once to the value at (i, j), not per entry
        data = self.ufunc(x.data, y[_major_minor(x)[1]]).astype(node.outputs[0].dtype, copy=False)
        output_storage[0][0] = _with_data(x, data)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class StructuredAddSV(_RowVectorOp):
    """Each stored entry ``(i, j)`` of the sparse ``x`` plus ``y[j]`` (a dense vector along
    the columns); the pattern is kept. Structured gradient."""

    ufunc = staticmethod(np.add)

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        return [_cast_like(gz, x), _cast_like(sp_sum(gz, axis=0, sparse_grad=True), y)]


structured_add_s_v = StructuredAddSV()


class MulSV(_RowVectorOp):
    """Each stored entry ``(i, j)`` of the sparse ``x`` times ``y[j]`` (a dense vector
    along the columns): ``x * y[None, :]``, the pattern kept. Structured gradient for
    ``x``."""

    ufunc = staticmethod(np.multiply)

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        gy = sp_sum(mul_s_s(x, gz), axis=0, sparse_grad=True)
        return [_cast_like(mul_s_v(gz, y), x), _cast_like(gy, y)]


mul_s_v = MulSV()


# -- elementwise functions on the stored entries ---------------------------------------


def structured_monoid(tensor_op):
    """Make ``f(x, *scalars)`` that applies ``tensor_op`` to the stored entries of the
    sparse ``x`` only (the pattern is kept; the other entries stay zero). The gradient
    goes through :func:`csm_properties` and :class:`CSM`: structured.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag.sparse import csr_matrix
    >>> x = csr_matrix("x", dtype="float64")
    >>> a = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    >>> import theano_dag.tensor as tt
    >>> @structured_monoid(tt.sqr)
    ... def structured_sqr(x):
    ...     "The square of each stored entry."
    >>> structured_sqr(x).eval({x: a}).toarray()
    array([[0., 4.],
           [1., 0.]])
    """

    def decorator(f):
        def wrapper(x, *args):
            x = as_sparse_variable(x)
            data, indices, indptr, shape = csm_properties(x)
            return CSM(x.format)(tensor_op(data, *args), indices, indptr, shape)

        wrapper.__name__ = f.__name__
        wrapper.__qualname__ = f.__qualname__
        wrapper.__doc__ = f.__doc__
        return wrapper

    return decorator


@structured_monoid(tt.sigmoid)
def structured_sigmoid(x):
    """The sigmoid of the stored entries of ``x`` (pattern kept)."""


@structured_monoid(tt.exp)
def structured_exp(x):
    """The exponential of the stored entries of ``x`` (pattern kept)."""


@structured_monoid(tt.log)
def structured_log(x):
    """The logarithm of the stored entries of ``x`` (pattern kept)."""


@structured_monoid(tt.pow)
def structured_pow(x, y):
    """The stored entries of ``x`` to the power of the scalar ``y`` (pattern kept)."""


@structured_monoid(tt.minimum)
def structured_minimum(x, y):
    """The minimum of each stored entry of ``x`` and the scalar ``y`` (pattern kept)."""


@structured_monoid(tt.maximum)
def structured_maximum(x, y):
    """The maximum of each stored entry of ``x`` and the scalar ``y`` (pattern kept)."""


@structured_monoid(tt.add)
def structured_add(x, y):
    """The stored entries of ``x`` plus the scalar ``y`` (pattern kept)."""


def _zero_preserving(tensor_op, name):
    """An elementwise function that maps 0 to 0: computed on the stored entries alone it
    gives the whole matrix's result."""

    @structured_monoid(tensor_op)
    def f(x):
        pass

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``{name}`` of every entry of the sparse ``x`` (zero stays zero)."
    return f


sin = _zero_preserving(tt.sin, "sin")
tan = _zero_preserving(tt.tan, "tan")
arcsin = _zero_preserving(tt.arcsin, "arcsin")
arctan = _zero_preserving(tt.arctan, "arctan")
sinh = _zero_preserving(tt.sinh, "sinh")
arcsinh = _zero_preserving(tt.arcsinh, "arcsinh")
tanh = _zero_preserving(tt.tanh, "tanh")
arctanh = _zero_preserving(tt.arctanh, "arctanh")
rint = _zero_preserving(tt.round_half_to_even, "rint")
sgn = _zero_preserving(tt.sgn, "sgn")
ceil = _zero_preserving(tt.ceil, "ceil")
floor = _zero_preserving(tt.floor, "floor")
log1p = _zero_preserving(tt.log1p, "log1p")
expm1 = _zero_preserving(tt.expm1, "expm1")
deg2rad = _zero_preserving(tt.deg2rad, "deg2rad")
rad2deg = _zero_preserving(tt.rad2deg, "rad2deg")
trunc = _zero_preserving(tt.trunc, "trunc")
sqr = _zero_preserving(tt.sqr, "sqr")
sqrt = _zero_preserving(tt.sqrt, "sqrt")
abs_ = _zero_preserving(tt.abs_, "abs_")
conj = _zero_preserving(tt.conj, "conj")


# Theano's ``theano.sparse.basic`` also holds the products, indexing, joins, comparisons
# and storage ops. Their modules import this one, so they are read after all its names
# (the package always imports this module first): deferred to the end for that cycle.
from theano_dag.sparse import compare, indexing, join, products, structure  # noqa: E402
from theano_dag.sparse.compare import *  # noqa: E402, F403
from theano_dag.sparse.indexing import *  # noqa: E402, F403
from theano_dag.sparse.join import *  # noqa: E402, F403
from theano_dag.sparse.products import *  # noqa: E402, F403
from theano_dag.sparse.structure import *  # noqa: E402, F403
from theano_dag.sparse.variable import *  # noqa: E402, F403 (Theano's basic held these too)

__all__ += [  # noqa: PLE0605 (extended with the names read above)
    *products.__all__,
    *indexing.__all__,
    *join.__all__,
    *compare.__all__,
    *structure.__all__,
]
