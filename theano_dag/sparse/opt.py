"""Rewrites of sparse graphs (Theano's ``theano.sparse.opt``), registered in the optdb by
:mod:`theano_dag.opt.rewrites.sparse` (a floor above: this module only defines them):

- ``local_csm_properties_csm``: the parts of a matrix just built by ``CSM`` are the
  parts it was built from (``structured_exp(structured_exp(x))`` builds one matrix, not
  two); parts not known to be canonical (a matrix built from parts with a place stored
  twice has the summed parts) become ``CanonicalParts`` of them; canonicalize and
  specialize;
- ``local_mul_s_d``: a sparse matrix times a row vector broadcast to a matrix
  (``mul_s_d(x, v[None, :])``) becomes ``mul_s_v(x, v)``, which reads ``v`` by column
  index instead of broadcasting it (twice as fast on a 10^5 x 2000 matrix); times any
  other dense matrix, ``CSx(mul_s_d_csx(data, indices, indptr, b), indices, indptr,
  shape)`` (Theano's specialisation, on the matrix's parts); specialize;
- ``local_mul_s_v`` and ``local_structured_add_s_v``: ``mul_s_v`` and
  ``structured_add_s_v`` of a CSR matrix become ``MulSVCSR`` and ``StructuredAddSVCSR``
  on its parts (Theano's specialisations); specialize;
- ``local_sampling_dot_csr``: ``sampling_dot`` with a CSR pattern becomes
  ``SamplingDotCSR`` on its parts, when ``config.blas__ldflags`` is set, as in Theano
  (whose kernel calls BLAS; this one does not, the condition keeps the graphs alike);
  specialize;
- ``local_sparse_shape``: the shape of a sparse matrix an op makes (or of a dense value
  made from sparse ones) is the op's ``infer_shape`` of its inputs' shapes (the graph's
  shape tracking covers dense values only), so ``f(x).shape`` never computes ``f(x)``;
  canonicalize;
- ``local_dense_from_sparse_sparse_from_dense``: a dense matrix made sparse and back is
  the matrix; canonicalize;
- ``local_usmm``: ``z + alpha * dot(x, y)`` (or ``z - ...``) with a sparse operand becomes
  one ``usmm`` node: the product is scaled and accumulated in place, one dense
  temporary fewer; specialize.

``SPARSE_RULES`` lists ``(db, rewrite, tags)`` for the registering module.

The part-level ops are in :mod:`theano_dag.sparse.specialized` (numpy kernels).
Theano also replaced ``StructuredDot`` by C kernels for each format
(``local_structured_dot``); scipy's product is the kernel here, and converting a CSC
operand to CSR first is faster for some shapes and slower for others (measured), so no
format is forced.

>>> import theano_dag, theano_dag.tensor as tt
>>> from theano_dag import sparse as S
>>> x, v = S.csr_matrix("x", dtype="float64"), tt.dvector("v")
>>> f = theano_dag.function([x, v], S.mul_s_d(x, v.dimshuffle("x", 0)))
>>> [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
['CSMProperties', 'MulSVCSR', 'CSM']
"""

from __future__ import annotations

import numpy as np

import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.config import config
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.scalar.basic import upcast
from theano_dag.sparse.basic import (
    CSM,
    AddSD,
    CanonicalParts,
    CSMGrad,
    CSMProperties,
    DenseFromSparse,
    MulSD,
    MulSV,
    SparseFromDense,
    StructuredAddSV,
    _dense_type,
    csm_properties,
    mul_s_v,
)
from theano_dag.sparse.products import Dot, SamplingDot, StructuredDot, usmm
from theano_dag.sparse.specialized import (
    MulSDCSC,
    MulSDCSR,
    MulSVCSR,
    SamplingDotCSR,
    StructuredAddSVCSR,
    mul_s_d_csc,
    mul_s_d_csr,
    mul_s_v_csr,
    sampling_dot_csr,
    structured_add_s_v_csr,
)
from theano_dag.sparse.type import SparseType, scipy_sparse
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.shape import Shape, Shape_i

__all__ = [
    "local_csm_properties_csm",
    "local_mul_s_d",
    "local_usmm",
    "local_sparse_shape",
    "SPARSE_RULES",
    "CSMGradC",
    "StructuredDotCSC",
    "StructuredDotCSR",
    "UsmmCscDense",
    "AddSD_ccode",
    "sd_csc",
    "sd_csr",
    "usmm_csc_dense",
    "usmm_csc_dense_inplace",
    "local_dense_from_sparse_sparse_from_dense",
    "local_mul_s_v",
    "local_structured_add_s_v",
    "local_sampling_dot_csr",
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


def _canonical_pattern(indices, indptr):
    """Whether ``indices`` and ``indptr`` are known to be a canonical pattern (each place
    once, sorted): the parts :class:`CSMProperties` gives, or ``SamplingDotCSR``'s
    copies of such parts."""
    node = indices.owner
    if node is None or indptr.owner is not node:
        return False
    if isinstance(node.op, CSMProperties):
        return node.outputs[1] is indices and node.outputs[2] is indptr
    if isinstance(node.op, SamplingDotCSR):
        return (node.outputs[1], node.outputs[2]) == (indices, indptr) and _canonical_pattern(
            node.inputs[3], node.inputs[4]
        )
    return False


@local_optimizer([CSMProperties])
def local_csm_properties_csm(fgraph, node):
    """``csm_properties(CSM(data, indices, indptr, shape))`` -> those four inputs (cast
    to the properties' types), when the pattern is known canonical: the properties of a
    matrix with duplicate or unsorted entries are its canonical form's, not its parts."""
    if not isinstance(node.op, CSMProperties):
        return None
    (csm,) = node.inputs
    if csm.owner is None or not isinstance(csm.owner.op, CSM):
        return None
    data, indices, indptr, shape = csm.owner.inputs
    if not _canonical_pattern(indices, indptr):
        # Parts that may hold a place twice: their canonical form, still no matrix.
        new = CanonicalParts(csm.owner.op.format)(data, indices, indptr, shape)
        return new if all(n.type == o.type for n, o in zip(new, node.outputs)) else None
    if shape.type != node.outputs[3].type:  # (a shape read from a matrix has that type)
        shape = tt.specify_shape(tt.cast(shape, "int32"), (2,))
    new = [data, tt.cast(indices, "int32"), tt.cast(indptr, "int32"), shape]
    if any(n.type != o.type for n, o in zip(new, node.outputs)):
        return None
    return new


def _shapes_of(fgraph, node):
    """The symbolic shape of each input of ``node`` (the graph's shape tracking for dense
    values, the matrix's own lengths for sparse ones)."""
    feature = getattr(fgraph, "shape_feature", None)
    shapes = []
    for i in node.inputs:
        known = feature.shape_tuple(i) if feature is not None else None
        ndim = getattr(i.type, "ndim", None)
        if known is not None:
            shapes.append(known)
        elif ndim is not None and getattr(i.type, "dtype", None) is not None:
            shapes.append(tuple(Shape_i(d)(i) for d in range(ndim)))
        else:
            shapes.append(None)
    return shapes


@local_optimizer([Shape, Shape_i])
def local_sparse_shape(fgraph, node):
    """``x.shape`` / ``Shape_i(d)(x)`` of a sparse ``x = op(...)`` -> ``op.infer_shape``'s
    lengths."""
    if not isinstance(node.op, (Shape, Shape_i)):
        return None
    (x,) = node.inputs
    owner = x.owner
    if owner is None:
        # An input's shape: its two lengths, each read alone (as a tensor's are).
        if isinstance(node.op, Shape) and isinstance(x.type, SparseType):
            return [tt.as_tensor_variable([Shape_i(0)(x), Shape_i(1)(x)])]
        return None
    # A sparse value, or a dense one made from sparse ones (whose shapes the graph's
    # shape tracking does not know).
    if not isinstance(x.type, SparseType) and not any(
        isinstance(i.type, SparseType) for i in owner.inputs
    ):
        return None
    try:
        shapes = owner.op.infer_shape(fgraph, owner, _shapes_of(fgraph, owner))
    except Exception:  # noqa: BLE001 (no infer_shape, or one that cannot tell)
        return None
    shape = shapes[owner.outputs.index(x)]
    if shape is None or len(shape) != x.ndim:
        return None
    lengths = [tt.cast(tt.as_tensor_variable(e), "int64") for e in shape]
    new = lengths[node.op.i] if isinstance(node.op, Shape_i) else tt.as_tensor_variable(lengths)
    return [new] if new.type == node.outputs[0].type else None


def _elemwise_op(node, cls):
    return (
        node is not None
        and type(node) is not str
        and type(node.op) is Elemwise
        and not node.op.inplace_items
        and isinstance(node.op.scalar_op, cls)
    )


def _on_parts(x, make_data):
    """``CSx(make_data(data, indices, indptr, shape), indices, indptr, shape)``: a
    matrix of ``x``'s pattern whose data an op computes from ``x``'s parts."""
    data, indices, indptr, shape = csm_properties(x)
    return CSM(x.type.format)(make_data(data, indices, indptr, shape), indices, indptr, shape)


@local_optimizer([MulSD])
def local_mul_s_d(fgraph, node):
    """``mul_s_d(x, v.dimshuffle('x', 0))`` -> ``mul_s_v(x, v)``; ``mul_s_d(x, b)`` for
    another dense matrix ``b`` -> ``CSx(mul_s_d_csx(parts of x, b), ...)``."""
    if not isinstance(node.op, MulSD):
        return None
    x, y = node.inputs
    owner = y.owner
    if owner is not None and isinstance(owner.op, DimShuffle) and owner.op.new_order == ("x", 0):
        new = mul_s_v(x, owner.inputs[0])
    elif y.ndim == 2:
        op = mul_s_d_csr if x.type.format == "csr" else mul_s_d_csc
        new = _on_parts(x, lambda d, i, p, s: op(d, i, p, y, s))
    else:
        return None
    return [new] if new.type == node.outputs[0].type else None


def _csr_row_vector(node, cls, op):
    """``cls(x, v)`` of a CSR ``x`` -> ``CSR(op(parts of x, v), ...)``."""
    if not isinstance(node.op, cls):
        return None
    x, v = node.inputs
    if x.type.format != "csr" or v.ndim != 1:
        return None
    new = _on_parts(x, lambda d, i, p, s: op(d, i, p, v, s))
    return [new] if new.type == node.outputs[0].type else None


@local_optimizer([MulSV])
def local_mul_s_v(fgraph, node):
    """``mul_s_v(x, v)`` of a CSR ``x`` -> ``CSR(mul_s_v_csr(parts of x, v), ...)``."""
    return _csr_row_vector(node, MulSV, mul_s_v_csr)


@local_optimizer([StructuredAddSV])
def local_structured_add_s_v(fgraph, node):
    """``structured_add_s_v(x, v)`` of a CSR ``x`` -> ``CSR(structured_add_s_v_csr(parts
    of x, v), ...)``."""
    return _csr_row_vector(node, StructuredAddSV, structured_add_s_v_csr)


@local_optimizer([SamplingDot])
def local_sampling_dot_csr(fgraph, node):
    """``sampling_dot(x, y, p)`` of a CSR ``p`` -> ``CSR(sampling_dot_csr(x, y, parts of
    p), ...)`` when ``config.blas__ldflags`` is set (Theano's condition)."""
    if not config.blas__ldflags or not isinstance(node.op, SamplingDot):
        return None
    x, y, p = node.inputs
    if p.type.format != "csr":
        return None
    data, indices, indptr, shape = csm_properties(p)
    z_data, z_ind, z_ptr = sampling_dot_csr(x, y, data, indices, indptr, shape[1])
    new = CSM("csr")(z_data, z_ind, z_ptr, shape)
    return [new] if new.type == node.outputs[0].type else None


def _sparse_product(var):
    """Whether ``var`` is a dense matrix made by a sparse product."""
    owner = var.owner
    return (
        owner is not None
        and isinstance(owner.op, (Dot, StructuredDot))
        and not isinstance(var.type, SparseType)
        and var.ndim == 2
    )


def _single_client(fgraph, var):
    clients = fgraph.clients.get(var, ())
    return len(clients) == 1 and type(clients[0][0]) is not str


def _scaled_product(fgraph, var):
    """``(alpha, product)`` when ``var`` is ``alpha * product`` (alpha: the product of
    scalar-like factors; None for no factor) and only ``var``'s node uses the product."""
    if _sparse_product(var):
        return (None, var) if _single_client(fgraph, var) else None
    if not _elemwise_op(var.owner, ts.Mul) or not _single_client(fgraph, var):
        return None
    products = [v for v in var.owner.inputs if _sparse_product(v)]
    if len(products) != 1 or not _single_client(fgraph, products[0]):
        return None
    factors = [v for v in var.owner.inputs if v is not products[0]]
    if not all(all(f.type.broadcastable) for f in factors):
        return None
    alpha = factors[0] if len(factors) == 1 else tt.mul(*factors)
    return alpha, products[0]


@local_optimizer([Elemwise], needs=[Dot, StructuredDot])
def local_usmm(fgraph, node):
    """``z + alpha * dot(x, y)`` and ``z - alpha * dot(x, y)`` (``x`` or ``y`` sparse) ->
    ``usmm(+-alpha, x, y, z)``."""
    if _elemwise_op(node, ts.Add):
        terms = list(node.inputs)
        for k, term in enumerate(terms):
            found = _scaled_product(fgraph, term)
            if found is not None:
                rest = terms[:k] + terms[k + 1 :]
                sign = 1
                break
        else:
            return None
    elif _elemwise_op(node, ts.Sub):
        z, term = node.inputs
        found = _scaled_product(fgraph, term)
        if found is None:
            return None
        rest, sign = [z], -1
    else:
        return None
    alpha, product = found
    if not rest:
        return None
    z = rest[0] if len(rest) == 1 else tt.add(*rest)
    out = node.outputs[0]
    if z.ndim != 2 or z.type.broadcastable != out.type.broadcastable:
        return None
    if alpha is None:
        alpha = tt.constant(1, dtype=product.dtype)
    if sign < 0:
        alpha = -alpha
    x, y = product.owner.inputs
    new = usmm(alpha, x, y, z)
    return [new] if new.type == out.type else None


# Theano's ops of the C specialisations, by name and signature (computed with scipy; no
# rewrite makes them, as none is faster than the general ops here).


class CSMGradC(CSMGrad):
    """:class:`CSMGrad` under Theano's name of its C form."""


class _StructuredDotParts(Op):
    """A sparse matrix given by its parts times a dense matrix, dense result."""

    __props__ = ()
    format = "csr"

    def make_node(self, a_val, a_ind, a_ptr, *rest):
        ins = [tt.as_tensor_variable(v) for v in (a_val, a_ind, a_ptr, *rest)]
        b = ins[-1]
        return Apply(self, ins, [_dense_type(upcast(ins[0].dtype, b.dtype), 2)()])

    def _matrix(self, val, ind, ptr, n_rows, n_cols):
        sp = scipy_sparse()
        if self.format == "csc":
            return sp.csc_matrix((val, ind, ptr), shape=(int(n_rows), n_cols))
        return sp.csr_matrix((val, ind, ptr), shape=(len(ptr) - 1, n_cols))

    def perform(self, node, inputs, output_storage, params=None):
        val, ind, ptr, *rest = inputs
        b = rest[-1]
        n_rows = rest[0] if self.format == "csc" else None
        a = self._matrix(val, ind, ptr, n_rows, b.shape[0])
        output_storage[0][0] = np.asarray(a @ b, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        n_rows = node.inputs[3] if self.format == "csc" else input_shapes[2][0] - 1
        return [(n_rows, input_shapes[-1][1])]


class StructuredDotCSC(_StructuredDotParts):
    """``csc(a_val, a_ind, a_ptr, a_nrows) @ b``, dense (Theano's name)."""

    format = "csc"


class StructuredDotCSR(_StructuredDotParts):
    """``csr(a_val, a_ind, a_ptr) @ b``, dense (Theano's name)."""

    format = "csr"


class UsmmCscDense(Op):
    """``z + alpha * csc(x_val, x_ind, x_ptr, x_nrows) @ y`` (Theano's name)."""

    __props__ = ("inplace",)

    def __init__(self, inplace):
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [6]}

    def make_node(self, alpha, x_val, x_ind, x_ptr, x_nrows, y, z):
        ins = [tt.as_tensor_variable(v) for v in (alpha, x_val, x_ind, x_ptr, x_nrows, y, z)]
        dtype = upcast(ins[0].dtype, ins[1].dtype, ins[5].dtype, ins[6].dtype)
        return Apply(self, ins, [_dense_type(dtype, 2)()])

    def perform(self, node, inputs, output_storage, params=None):
        alpha, val, ind, ptr, n_rows, y, z = inputs
        x = scipy_sparse().csc_matrix((val, ind, ptr), shape=(int(n_rows), y.shape[0]))
        out = z if self.inplace and z.dtype == node.outputs[0].dtype else z.copy()
        out = out.astype(node.outputs[0].dtype, copy=False)
        out += np.asarray(alpha).reshape(()) * (x @ y)
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[6]]


class AddSD_ccode(AddSD):  # noqa: N801 (Theano's name)
    """:class:`AddSD` under Theano's name of its C form (``format`` and ``inplace`` are
    kept for its signature; the sum is scipy's)."""

    __props__ = ("format", "inplace")

    def __init__(self, format, inplace=False):
        self.format, self.inplace = format, bool(inplace)


sd_csc, sd_csr = StructuredDotCSC(), StructuredDotCSR()
usmm_csc_dense = UsmmCscDense(inplace=False)
usmm_csc_dense_inplace = UsmmCscDense(inplace=True)


@local_optimizer([DenseFromSparse])
def local_dense_from_sparse_sparse_from_dense(fgraph, node):
    """``dense_from_sparse(csr_from_dense(m))`` -> ``m``: a round trip computes nothing."""
    if not isinstance(node.op, DenseFromSparse):
        return None
    (s,) = node.inputs
    if s.owner is None or not isinstance(s.owner.op, SparseFromDense):
        return None
    (m,) = s.owner.inputs
    return [m] if m.type == node.outputs[0].type else None


SPARSE_RULES = (
    ("canonicalize", local_sparse_shape, ("fast_compile", "sparse", "shape")),
    ("canonicalize", local_dense_from_sparse_sparse_from_dense, ("fast_compile", "sparse")),
    ("canonicalize", local_csm_properties_csm, ("fast_compile", "sparse")),
    ("specialize", local_csm_properties_csm, ("sparse",)),
    ("specialize", local_mul_s_d, ("sparse",)),
    ("specialize", local_mul_s_v, ("sparse",)),
    ("specialize", local_structured_add_s_v, ("sparse",)),
    ("specialize", local_sampling_dot_csr, ("sparse",)),
    ("specialize", local_usmm, ("sparse",)),
)
