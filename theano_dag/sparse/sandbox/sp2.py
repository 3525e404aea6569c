"""Sampling with sparse values (Theano's ``theano.sparse.sandbox.sp2``): ``poisson`` (a
Poisson draw at each stored entry), ``Binomial`` (a sparse matrix of binomial draws) and
``multinomial`` (a multinomial draw per row of a sparse matrix of probabilities). They
draw from numpy's global generator, as Theano's do, and have no gradient.

>>> import numpy as np, scipy.sparse as sp, theano_dag
>>> from theano_dag import sparse as S
>>> p = S.csr_matrix("p", dtype="float64")
>>> draw = multinomial(5, p).eval({p: sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))})
>>> draw.toarray()
array([[0., 5.],
       [5., 0.]])
"""

from __future__ import annotations

import numpy as np

import theano_dag.tensor as tt
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.sparse.basic import _matrix_class, _with_data
from theano_dag.sparse.type import SparseType
from theano_dag.sparse.variable import as_sparse_variable

__all__ = [
    "Poisson",
    "poisson",
    "Binomial",
    "csr_fbinomial",
    "csr_dbinomial",
    "Multinomial",
    "multinomial",
]


class Poisson(Op):
    """A Poisson draw with mean ``x[i, j]`` at each stored entry of ``x`` (pattern and
    dtype kept)."""

    __props__ = ()

    def make_node(self, x):
        x = as_sparse_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        data = np.random.poisson(x.data).astype(x.dtype)
        output_storage[0][0] = _with_data(x, data)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


poisson = Poisson()


class Binomial(Op):
    """A sparse matrix of ``shape`` (format, dtype given) of binomial draws ``B(n, p)``,
    its zeros not stored."""

    __props__ = ("format", "dtype")

    def __init__(self, format, dtype):
        self.format, self.dtype = format, str(np.dtype(dtype))

    def make_node(self, n, p, shape):
        n, p, shape = (tt.as_tensor_variable(v) for v in (n, p, shape))
        if shape.ndim != 1:
            raise TypeError(f"Binomial: the shape must be a vector, got {shape.type}")
        return Apply(self, [n, p, shape], [SparseType(self.format, self.dtype)()])

    def perform(self, node, inputs, output_storage, params=None):
        n, p, shape = inputs
        draws = np.random.binomial(n, p, size=tuple(int(s) for s in shape))
        output_storage[0][0] = _matrix_class(self.format)(draws, dtype=self.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        shape = node.inputs[2]
        return [(shape[0], shape[1])]


csr_fbinomial = Binomial("csr", "float32")
csr_dbinomial = Binomial("csr", "float64")


class Multinomial(Op):
    """For each row ``i`` of the CSR matrix of probabilities ``p``, a multinomial draw of
    ``n`` (or ``n[i]``) trials over the row's stored entries (pattern kept)."""

    __props__ = ()

    def make_node(self, n, p):
        n, p = tt.as_tensor_variable(n), as_sparse_variable(p)
        if p.format != "csr":
            raise NotImplementedError("Multinomial needs a csr matrix of probabilities")
        return Apply(self, [n, p], [p.type()])

    def perform(self, node, inputs, output_storage, params=None):
        n, p = inputs
        n = np.broadcast_to(np.asarray(n), (p.shape[0],))
        data = np.zeros_like(p.data)
        for i in range(p.shape[0]):
            lo, hi = p.indptr[i], p.indptr[i + 1]
            if hi > lo:
                data[lo:hi] = np.random.multinomial(int(n[i]), p.data[lo:hi])
        output_storage[0][0] = _with_data(p, data)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[1]]


multinomial = Multinomial()
