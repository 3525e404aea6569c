"""Matrix decompositions (``theano.tensor.slinalg.Cholesky``, ``theano.tensor.nlinalg.Eigh``).

Each Op computes with ``numpy.linalg`` (scipy is not needed). Cholesky and the
symmetric eigendecomposition read only the lower triangle of their input, as LAPACK
does, so their gradients are lower triangular too: the gradient of an entry below
the diagonal counts both it and its mirror image.

The generalized problem ``A v = w B v`` (:class:`GeneralizedEigh`) is what the
OpGraph's ``EigenSolve`` with two inputs means; it has no gradient.
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import DisconnectedType, grad_not_implemented
from theano_dag.graph.op import Op
from theano_dag.scalar import upcast
from theano_dag.tensor.basic import cast, zeros_like
from theano_dag.tensor.type import TensorType, float_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "Cholesky",
    "CholeskyGrad",
    "Eigh",
    "EighGrad",
    "GeneralizedEigh",
    "cholesky",
    "eigh",
    "generalized_eigh",
]


def _float_matrix(op, x, k=0):
    x = as_tensor_variable(x)
    if x.ndim != 2:
        raise TypeError(f"{op}: input {k} ({x}) must be a matrix, got {x.ndim} dimensions")
    if x.dtype not in float_dtypes:
        # integers decompose in float64, as numpy.linalg does

        x = cast(x, "float64")
    return x


def _square(shape):
    n = shape[0] if shape[0] is not None else shape[1]
    return (n, n)


def _is_disconnected(g):
    return isinstance(g.type, DisconnectedType)


def _lower_grad(g):
    """Fold a gradient with respect to a symmetric matrix onto its lower triangle."""
    return np.tril(g) + np.triu(g, 1).T


class Cholesky(Op):
    """The Cholesky factor of a symmetric positive definite matrix: lower ``L`` with
    ``A = L L^T`` (``lower=False``: upper ``U = L^T``).

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> cholesky(a).eval({a: np.array([[4.0, 2.0], [2.0, 5.0]])})
    array([[2., 0.],
           [1., 2.]])
    """

    __props__ = ("lower",)

    def __init__(self, lower=True):
        self.lower = bool(lower)

    def make_node(self, x):
        x = _float_matrix(self, x)
        return Apply(self, [x], [TensorType(x.dtype, shape=_square(x.type.shape))()])

    def perform(self, node, inputs, output_storage, params=None):
        low = np.linalg.cholesky(inputs[0])
        out = low if self.lower else low.T
        output_storage[0][0] = np.ascontiguousarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        (g,) = output_grads
        factor = outputs[0] if self.lower else outputs[0].T
        g = g if self.lower else g.T
        return [CholeskyGrad()(inputs[0], factor, g)]


class CholeskyGrad(Op):
    """The gradient of :class:`Cholesky` (lower form): inputs ``A``, ``L``, ``dL``.

    ``S = L^-T Phi(L^T dL) L^-1``, with ``Phi`` the lower triangle with its diagonal
    halved (Murray, 2016); the result is ``S + S^T`` folded onto the lower triangle.
    """

    __props__ = ()

    def make_node(self, x, low, g):
        x, low, g = (as_tensor_variable(v) for v in (x, low, g))
        return Apply(self, [x, low, g], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        _, low, g = inputs
        inner = low.T @ g
        phi = np.tril(inner) - np.diag(np.diag(inner)) / 2
        # L^-T X L^-1 with two solves: L^T Y = X, then L^T Z^T = Y^T
        s = np.linalg.solve(low.T, np.linalg.solve(low.T, phi).T).T
        grad = np.tril(s + s.T) - np.diag(np.diag(s))
        output_storage[0][0] = np.asarray(grad, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class Eigh(Op):
    """Eigenvalues ``w`` (ascending) and eigenvectors ``v`` (columns) of a symmetric
    matrix, read from its lower (``UPLO='L'``) or upper triangle: ``eigh(a) -> (w, v)``.

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> w, v = eigh(a)
    >>> w.eval({a: np.array([[2.0, 1.0], [1.0, 2.0]])})
    array([1., 3.])
    """

    __props__ = ("UPLO",)

    def __init__(self, UPLO="L"):  # noqa: N803 (numpy's and Theano's name)
        if UPLO not in ("L", "U"):
            raise ValueError(f"Eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
        self.UPLO = UPLO

    def make_node(self, x):
        x = _float_matrix(self, x)
        n = _square(x.type.shape)
        return Apply(
            self, [x], [TensorType(x.dtype, shape=n[:1])(), TensorType(x.dtype, shape=n)()]
        )

    def perform(self, node, inputs, output_storage, params=None):
        w, v = np.linalg.eigh(inputs[0], self.UPLO)
        output_storage[0][0] = np.asarray(w, dtype=node.outputs[0].dtype)
        output_storage[1][0] = np.asarray(v, dtype=node.outputs[1].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        n = input_shapes[0][0]
        return [(n,), (n, n)]

    def L_op(self, inputs, outputs, output_grads):
        grads = [zeros_like(o) if _is_disconnected(g) else g for o, g in zip(outputs, output_grads)]
        return [EighGrad(self.UPLO)(inputs[0], *outputs, *grads)]


class EighGrad(Op):
    """The gradient of :class:`Eigh`: inputs ``A, w, v, dw, dv``.

    ``G = v (diag(dw) + F * (v^T dv)) v^T`` with ``F[i, j] = 1 / (w[j] - w[i])`` off
    the diagonal (distinct eigenvalues assumed), folded onto the triangle read.
    """

    __props__ = ("UPLO",)

    def __init__(self, UPLO="L"):  # noqa: N803
        self.UPLO = UPLO

    def make_node(self, x, w, v, gw, gv):
        ins = [as_tensor_variable(a) for a in (x, w, v, gw, gv)]
        return Apply(self, ins, [ins[0].type()])

    def perform(self, node, inputs, output_storage, params=None):
        _, w, v, gw, gv = inputs
        diff = w[None, :] - w[:, None]
        np.fill_diagonal(diff, 1.0)
        f = 1.0 / diff
        np.fill_diagonal(f, 0.0)
        g = v @ (np.diag(gw) + f * (v.T @ gv)) @ v.T
        out = _lower_grad(g) if self.UPLO == "L" else _lower_grad(g.T).T
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class GeneralizedEigh(Op):
    """``A v = w B v`` for symmetric ``A`` and symmetric positive definite ``B``:
    ascending ``w`` and ``B``-orthonormal eigenvectors ``v`` (columns), ``-> (w, v)``.

    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.dmatrix("b")
    >>> w, v = generalized_eigh(a, b)
    >>> w.eval({a: np.diag([2.0, 6.0]), b: np.diag([1.0, 2.0])})
    array([2., 3.])
    """

    __props__ = ()

    def make_node(self, a, b):
        a, b = _float_matrix(self, a), _float_matrix(self, b, 1)

        dtype = upcast(a.dtype, b.dtype)
        n = _square(a.type.shape)
        return Apply(self, [a, b], [TensorType(dtype, shape=n[:1])(), TensorType(dtype, shape=n)()])

    def perform(self, node, inputs, output_storage, params=None):
        a, b = inputs
        # With B = L L^T the problem is the symmetric C u = w u, C = L^-1 A L^-T, v = L^-T u.
        low = np.linalg.cholesky(b)
        c = np.linalg.solve(low, np.linalg.solve(low, a).T).T
        w, u = np.linalg.eigh(c)
        v = np.linalg.solve(low.T, u)
        output_storage[0][0] = np.asarray(w, dtype=node.outputs[0].dtype)
        output_storage[1][0] = np.asarray(v, dtype=node.outputs[1].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        n = input_shapes[0][0]
        return [(n,), (n, n)]

    def L_op(self, inputs, outputs, output_grads):
        return [grad_not_implemented(self, k, x) for k, x in enumerate(inputs)]


def cholesky(x, lower=True):
    """The Cholesky factor of ``x`` (see :class:`Cholesky`).

    >>> from theano_dag import tensor as tt
    >>> cholesky(tt.dmatrix("a")).owner.op
    Cholesky{lower=True}
    """
    return Cholesky(lower)(x)


def eigh(a, UPLO="L"):  # noqa: N803
    """``(w, v)``: eigenvalues and eigenvectors of the symmetric ``a`` (see :class:`Eigh`).

    >>> from theano_dag import tensor as tt
    >>> [o.ndim for o in eigh(tt.dmatrix("a"))]
    [1, 2]
    """
    return tuple(Eigh(UPLO)(a, return_list=True))


def generalized_eigh(a, b):
    """``(w, v)`` of ``A v = w B v`` (see :class:`GeneralizedEigh`).

    >>> from theano_dag import tensor as tt
    >>> generalized_eigh(tt.dmatrix("a"), tt.dmatrix("b"))[0].owner.op
    GeneralizedEigh
    """
    return tuple(GeneralizedEigh()(a, b, return_list=True))
