"""Comparisons with a sparse operand (Theano's ``eq``, ``neq``, ``lt``, ``gt``, ``le``,
``ge``): between two sparse matrices of the same shape the result is a sparse ``uint8``
matrix (the first one's format); between a sparse and a dense matrix, a dense ``uint8``
matrix. They have no gradient (their values are piecewise constant), as in Theano.

A comparison that is true where both matrices are zero (``eq``, ``le``, ``ge`` of two
sparse matrices) stores most of its entries: it is as large as a dense matrix.

>>> import numpy as np, scipy.sparse as sp, theano_dag
>>> import theano_dag.tensor as tt
>>> from theano_dag.sparse import csr_matrix
>>> x = csr_matrix("x", dtype="float64")
>>> lt(x, tt.ones((2, 2))).eval({x: sp.csr_matrix(np.array([[0.0, 2.0], [1.0, -1.0]]))})
array([[1, 0],
       [0, 1]], dtype=uint8)
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

import theano_dag.tensor as tt
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.sparse.basic import _dense_type, _matrix_class
from theano_dag.sparse.type import SparseType, scipy_sparse
from theano_dag.sparse.variable import (
    _is_sparse_variable,
    as_sparse_or_tensor_variable,
    as_sparse_variable,
)

__all__ = [
    "EqualSS",
    "EqualSD",
    "NotEqualSS",
    "NotEqualSD",
    "LessThanSS",
    "LessThanSD",
    "GreaterThanSS",
    "GreaterThanSD",
    "LessEqualSS",
    "LessEqualSD",
    "GreaterEqualSS",
    "GreaterEqualSD",
    "equal_s_s",
    "equal_s_d",
    "not_equal_s_s",
    "not_equal_s_d",
    "less_than_s_s",
    "less_than_s_d",
    "greater_than_s_s",
    "greater_than_s_d",
    "less_equal_s_s",
    "less_equal_s_d",
    "greater_equal_s_s",
    "greater_equal_s_d",
    "eq",
    "neq",
    "lt",
    "gt",
    "le",
    "ge",
]


def _same_shape(op, x, y):
    if x.shape != y.shape:
        raise ValueError(f"{type(op).__name__}: shapes {x.shape} and {y.shape} differ")


class _ComparisonSS(Op):
    """A comparison of two sparse matrices: a sparse uint8 matrix."""

    __props__ = ()
    comparison = staticmethod(operator.eq)

    def make_node(self, x, y):
        x, y = as_sparse_variable(x), as_sparse_variable(y)
        return Apply(self, [x, y], [SparseType(x.format, "uint8")()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        _same_shape(self, x, y)
        sp = scipy_sparse()
        # scipy warns that the result is dense-like (eq, le, ge): Theano's op is that.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sp.SparseEfficiencyWarning)
            r = self.comparison(x, y)
        output_storage[0][0] = _matrix_class(x.format)(r).astype("uint8")

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class _ComparisonSD(Op):
    """A comparison of a sparse matrix with a dense one of the same shape: dense uint8."""

    __props__ = ()
    comparison = staticmethod(np.equal)

    def make_node(self, x, y):
        x, y = as_sparse_variable(x), tt.as_tensor_variable(y)
        if y.ndim != 2:
            raise TypeError(f"{type(self).__name__}: the dense operand must be a matrix")
        return Apply(self, [x, y], [_dense_type("uint8", 2)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        _same_shape(self, x, y)
        # The result is dense by definition: the sparse operand is read as dense too.
        output_storage[0][0] = self.comparison(x.toarray(), y).astype("uint8")

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


def _pair(name, ss_op, sd_op):
    ss = type(f"{name}SS", (_ComparisonSS,), {"comparison": staticmethod(ss_op)})
    sd = type(f"{name}SD", (_ComparisonSD,), {"comparison": staticmethod(sd_op)})
    ss.__module__ = sd.__module__ = __name__
    ss.__doc__ = f"``{name}`` of two sparse matrices: a sparse uint8 matrix."
    sd.__doc__ = f"``{name}`` of a sparse and a dense matrix: a dense uint8 matrix."
    return ss, sd


EqualSS, EqualSD = _pair("Equal", operator.eq, np.equal)
NotEqualSS, NotEqualSD = _pair("NotEqual", operator.ne, np.not_equal)
LessThanSS, LessThanSD = _pair("LessThan", operator.lt, np.less)
GreaterThanSS, GreaterThanSD = _pair("GreaterThan", operator.gt, np.greater)
LessEqualSS, LessEqualSD = _pair("LessEqual", operator.le, np.less_equal)
GreaterEqualSS, GreaterEqualSD = _pair("GreaterEqual", operator.ge, np.greater_equal)

equal_s_s, equal_s_d = EqualSS(), EqualSD()
not_equal_s_s, not_equal_s_d = NotEqualSS(), NotEqualSD()
less_than_s_s, less_than_s_d = LessThanSS(), LessThanSD()
greater_than_s_s, greater_than_s_d = GreaterThanSS(), GreaterThanSD()
less_equal_s_s, less_equal_s_d = LessEqualSS(), LessEqualSD()
greater_equal_s_s, greater_equal_s_d = GreaterEqualSS(), GreaterEqualSD()


def _switch(name, ss, sd, ds):
    """The comparison ``name``: ``ss`` for two sparse operands, ``sd`` for a sparse and
    a dense one, ``ds`` (the mirrored comparison, operands swapped) for a dense then a
    sparse one."""

    def compare(x, y):
        x, y = as_sparse_or_tensor_variable(x), as_sparse_or_tensor_variable(y)
        x_sparse, y_sparse = _is_sparse_variable(x), _is_sparse_variable(y)
        if x_sparse and y_sparse:
            return ss(x, y)
        if x_sparse:
            return sd(x, y)
        if y_sparse:
            return ds(y, x)
        raise TypeError(f"sparse.{name} needs a sparse operand, got {x.type} and {y.type}")

    compare.__name__ = compare.__qualname__ = name
    compare.__doc__ = (
        f"``{name}(x, y)`` elementwise, with one or both operands sparse: sparse uint8 "
        "when both are, else dense uint8."
    )
    return compare


eq = _switch("eq", equal_s_s, equal_s_d, equal_s_d)
neq = _switch("neq", not_equal_s_s, not_equal_s_d, not_equal_s_d)
lt = _switch("lt", less_than_s_s, less_than_s_d, greater_than_s_d)
gt = _switch("gt", greater_than_s_s, greater_than_s_d, less_than_s_d)
le = _switch("le", less_equal_s_s, less_equal_s_d, greater_equal_s_d)
ge = _switch("ge", greater_equal_s_s, greater_equal_s_d, less_equal_s_d)
