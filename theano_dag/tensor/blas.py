"""BLAS-shaped ops: Gemm, Gemv, Ger, Dot22, Dot22Scalar (``theano.tensor.blas``).

Users write ``dot`` and arithmetic; the optimizer fuses ``b*z + a*dot(x, y)`` into
``Gemm`` and later swaps in the inplace variant (``destroy_map = {0: [0]}``, so
``DestroyHandler`` knows ``z`` is overwritten). Because that happens after ``grad``,
the gradients here are plain ``dot`` graphs: they exist so every op can be
differentiated and checked, not because the optimizer needs them.

Like BLAS, a zero ``beta``/``b`` ignores the old contents of the accumulator (even NaN).
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply, Variable, view_roots
from theano_dag.graph.op import Op
from theano_dag.graph.utils import InconsistencyError
from theano_dag.tensor import math
from theano_dag.tensor.shape import checked_shape, equal_lengths
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "Gemm",
    "Gemv",
    "Ger",
    "Dot22",
    "Dot22Scalar",
    "gemm_inplace",
    "gemm_no_inplace",
    "gemm",
    "gemv_inplace",
    "gemv_no_inplace",
    "gemv",
    "ger",
    "ger_destructive",
    "dot22",
    "dot22scalar",
]

_BLAS_DTYPES = ("float32", "float64", "complex64", "complex128")


def _check(op, name, x, ndim, dtype=None):
    """``x`` as a tensor of ``ndim`` dimensions (and ``dtype``), or a TypeError saying
    which argument of which op is wrong (starting with the op's ``E_rank``, ``E_mixed``
    or ``E_float`` when it has them: Theano's texts)."""

    def start(kind):
        text = getattr(op, kind, None)
        return f"{text}: " if text else ""

    what = {0: "a scalar", 1: "a vector", 2: "a matrix"}[ndim]
    if isinstance(x, Variable):
        x = as_tensor_variable(x)
    else:
        # A Python number or array takes the dtype of the matrices it combines with.
        x = as_tensor_variable(np.asarray(x, dtype=dtype)) if dtype else as_tensor_variable(x)
    if x.ndim != ndim:
        raise TypeError(
            f"{op}: {start('E_rank')}argument {name} must be {what}, "
            f"got {x.type} ({x.ndim} dimensions)"
        )
    if dtype is not None and x.dtype != dtype:
        raise TypeError(
            f"{op}: {start('E_mixed')}argument {name} must have dtype {dtype} like the other "
            f"arguments, got {x.dtype}"
        )
    if dtype is None and x.dtype not in _BLAS_DTYPES:
        raise TypeError(
            f"{op}: {start('E_float')}argument {name} must be floating point or complex "
            f"({', '.join(_BLAS_DTYPES)}), got {x.dtype}"
        )
    return x


def _check_len(op, what, n1, n2, shapes):
    if n1 is not None and n2 is not None and n1 != n2:
        raise ValueError(f"{op}: incompatible shapes for {what}: {shapes}")


def _math():
    return math


class _Destructive(Op):
    """Shared by the ops whose one output may overwrite input 0."""

    __props__ = ("inplace",)

    def __init__(self, inplace=False):
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def __str__(self):
        return f"{type(self).__name__}{{{'inplace' if self.inplace else 'no_inplace'}}}"

    __repr__ = __str__

    # Per dimension of the result, the (input, dimension) pairs whose lengths give it
    # (the overwritten input's first), and the pairs of the product's inner lengths:
    # they must agree, as perform checks (set by each op).
    _result_lengths: tuple = ()
    _inner_lengths: tuple = ()

    def infer_shape(self, fgraph, node, input_shapes):
        def names(pairs):
            return tuple(f"{node.inputs[k]} along dimension {d}" for k, d in pairs)

        out = []
        for d, pairs in enumerate(self._result_lengths):
            lengths = [input_shapes[k][e] for k, e in pairs]
            out.append(
                equal_lengths(lengths, f"{self} along dimension {d}", names(pairs).__getitem__)
            )
        inner = self._inner_lengths
        if inner:
            lengths = [input_shapes[k][e] for k, e in inner]
            out = checked_shape(tuple(out), lengths, f"{self}: the inner lengths", names(inner))
        return [tuple(out)]

    def _target(self, z):
        return z if self.inplace else z.copy()


class Gemm(_Destructive):
    """``gemm(z, a, x, y, b) = b*z + a*dot(x, y)`` for matrices z, x, y and scalars a, b.

    The inplace form (``gemm_inplace``) overwrites ``z``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> z, x, y = tt.dmatrix("z"), tt.dmatrix("x"), tt.dmatrix("y")
    >>> out = gemm_no_inplace(z, 2.0, x, y, 0.5)
    >>> out.owner.op
    Gemm{no_inplace}
    >>> out.eval({z: np.ones((2, 2)), x: np.eye(2), y: np.full((2, 2), 3.0)})
    array([[6.5, 6.5],
           [6.5, 6.5]])
    """

    # Theano's texts of Gemm's errors, which its code and tests match: the start of the
    # messages raised here for a wrong rank and for an aliased z.
    E_rank = "gemm only works for rank 2"
    E_z_uniq = "argument z aliased to x or y"
    E_mixed = "gemm requires matching dtypes"
    E_float = "gemm requires floating-point dtypes"
    _result_lengths = (((0, 0), (2, 0)), ((0, 1), (3, 1)))  # z's rows x's, z's columns y's
    _inner_lengths = ((2, 1), (3, 0))

    def make_node(self, z, a, x, y, b):
        z = _check(self, "z", z, 2)
        x = _check(self, "x", x, 2, z.dtype)
        y = _check(self, "y", y, 2, z.dtype)
        a = _check(self, "a", a, 0, z.dtype)
        b = _check(self, "b", b, 0, z.dtype)
        shapes = (z.type.shape, x.type.shape, y.type.shape)
        _check_len(self, "dot(x, y)", x.type.shape[1], y.type.shape[0], shapes)
        _check_len(self, "z rows", z.type.shape[0], x.type.shape[0], shapes)
        _check_len(self, "z columns", z.type.shape[1], y.type.shape[1], shapes)
        if self.inplace:
            # z is overwritten: it must not alias x or y.
            zr = set(view_roots(z))
            if zr & set(view_roots(x)) or zr & set(view_roots(y)):
                raise InconsistencyError(f"{Gemm.E_z_uniq}: {self} overwrites z")
        return Apply(self, [z, a, x, y, b], [z.type()])

    def check_shapes(self, zs, xs, ys):
        """Raise the op's error where the shapes of ``z``, ``x``, ``y`` do not fit (an
        engine that computes the op its own way checks with it too)."""
        if xs[1] != ys[0] or tuple(zs) != (xs[0], ys[1]):
            raise ValueError(
                f"{self}: incompatible shapes for b*z + a*dot(x, y): z {tuple(zs)}, "
                f"x {tuple(xs)}, y {tuple(ys)}"
            )

    def perform(self, node, inputs, output_storage, params=None):
        z, a, x, y, b = inputs
        self.check_shapes(z.shape, x.shape, y.shape)
        out = self._target(z)
        prod = np.dot(x, y)
        if b == 0:
            out[...] = a * prod
        else:
            if b != 1:
                out *= b
            out += a * prod if a != 1 else prod
        output_storage[0][0] = out

    def L_op(self, inputs, outputs, output_grads):
        m = _math()
        z, a, x, y, b = inputs
        (g,) = output_grads
        return [b * g, m.sum(g * m.dot(x, y)), a * m.dot(g, y.T), a * m.dot(x.T, g), m.sum(g * z)]


gemm_inplace = Gemm(inplace=True)
gemm_no_inplace = Gemm(inplace=False)
gemm = gemm_no_inplace


class Gemv(_Destructive):
    """``gemv(y, alpha, A, x, beta) = beta*y + alpha*dot(A, x)`` (A matrix, x and y vectors).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> y, A, x = tt.dvector("y"), tt.dmatrix("A"), tt.dvector("x")
    >>> gemv_no_inplace(y, 1.0, A, x, 1.0).eval(
    ...     {y: np.ones(2), A: np.eye(2), x: np.array([2.0, 3.0])})
    array([3., 4.])
    """

    _result_lengths = (((0, 0), (2, 0)),)  # y's length A's rows
    _inner_lengths = ((2, 1), (3, 0))

    def make_node(self, y, alpha, A, x, beta):  # noqa: N803 (BLAS's name)
        y = _check(self, "y", y, 1)
        A = _check(self, "A", A, 2, y.dtype)  # noqa: N806
        x = _check(self, "x", x, 1, y.dtype)
        alpha = _check(self, "alpha", alpha, 0, y.dtype)
        beta = _check(self, "beta", beta, 0, y.dtype)
        shapes = (y.type.shape, A.type.shape, x.type.shape)
        _check_len(self, "dot(A, x)", A.type.shape[1], x.type.shape[0], shapes)
        _check_len(self, "y", A.type.shape[0], y.type.shape[0], shapes)
        return Apply(self, [y, alpha, A, x, beta], [y.type()])

    def check_shapes(self, ys, As, xs):  # noqa: N803
        """Raise the op's error where the shapes of ``y``, ``A``, ``x`` do not fit."""
        if tuple(As) != (ys[0], xs[0]):
            raise ValueError(
                f"{self}: incompatible shapes for beta*y + alpha*dot(A, x): "
                f"y {tuple(ys)}, A {tuple(As)}, x {tuple(xs)}"
            )

    def perform(self, node, inputs, output_storage, params=None):
        y, alpha, A, x, beta = inputs  # noqa: N806
        self.check_shapes(y.shape, A.shape, x.shape)
        out = self._target(y)
        prod = np.dot(A, x)
        if beta == 0:
            out[...] = alpha * prod
        else:
            if beta != 1:
                out *= beta
            out += alpha * prod if alpha != 1 else prod
        output_storage[0][0] = out

    def L_op(self, inputs, outputs, output_grads):
        m = _math()
        y, alpha, A, x, beta = inputs  # noqa: N806
        (g,) = output_grads
        return [
            beta * g,
            m.dot(g, m.dot(A, x)),
            alpha * m.outer(g, x),
            alpha * m.dot(A.T, g),
            m.dot(g, y),
        ]


gemv_inplace = Gemv(inplace=True)
gemv_no_inplace = Gemv(inplace=False)
gemv = gemv_no_inplace


class Ger(_Destructive):
    """``ger(A, alpha, x, y) = A + alpha * outer(x, y)``; ``ger_destructive`` overwrites A.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> A, x, y = tt.dmatrix("A"), tt.dvector("x"), tt.dvector("y")
    >>> ger(A, 2.0, x, y).eval({A: np.zeros((2, 2)), x: np.array([1.0, 2.0]), y: np.ones(2)})
    array([[2., 2.],
           [4., 4.]])
    """

    __props__ = ("destructive",)
    _result_lengths = (((0, 0), (2, 0)), ((0, 1), (3, 0)))  # A's rows x's, columns y's

    def __init__(self, destructive=False):
        super().__init__(destructive)
        self.destructive = bool(destructive)

    def __str__(self):
        return f"Ger{{{'destructive' if self.destructive else 'non-destructive'}}}"

    __repr__ = __str__

    def make_node(self, A, alpha, x, y):  # noqa: N803
        A = _check(self, "A", A, 2)  # noqa: N806
        x = _check(self, "x", x, 1, A.dtype)
        y = _check(self, "y", y, 1, A.dtype)
        alpha = _check(self, "alpha", alpha, 0, A.dtype)
        shapes = (A.type.shape, x.type.shape, y.type.shape)
        _check_len(self, "A rows", A.type.shape[0], x.type.shape[0], shapes)
        _check_len(self, "A columns", A.type.shape[1], y.type.shape[0], shapes)
        return Apply(self, [A, alpha, x, y], [A.type()])

    def check_shapes(self, As, xs, ys):  # noqa: N803
        """Raise the op's error where the shapes of ``A``, ``x``, ``y`` do not fit."""
        if tuple(As) != (xs[0], ys[0]):
            raise ValueError(
                f"{self}: incompatible shapes for A + alpha*outer(x, y): "
                f"A {tuple(As)}, x {tuple(xs)}, y {tuple(ys)}"
            )

    def perform(self, node, inputs, output_storage, params=None):
        A, alpha, x, y = inputs  # noqa: N806
        self.check_shapes(A.shape, x.shape, y.shape)
        out = self._target(A)
        out += alpha * np.outer(x, y)
        output_storage[0][0] = out

    def L_op(self, inputs, outputs, output_grads):
        m = _math()
        A, alpha, x, y = inputs  # noqa: N806
        (g,) = output_grads
        return [g, m.dot(x, m.dot(g, y)), alpha * m.dot(g, y), alpha * m.dot(g.T, x)]


ger = Ger(destructive=False)
ger_destructive = Ger(destructive=True)


class Dot22(Op):
    """``dot(x, y)`` for two matrices of one float dtype (what the BLAS pass turns
    ``Dot`` on matrices into).

    >>> from theano_dag import tensor as tt
    >>> dot22(tt.fmatrix("x"), tt.fmatrix("y")).type
    TensorType(float32, matrix)
    """

    __props__ = ()

    def make_node(self, x, y):
        x = _check(self, "x", x, 2)
        y = _check(self, "y", y, 2, x.dtype)
        _check_len(
            self, "dot(x, y)", x.type.shape[1], y.type.shape[0], (x.type.shape, y.type.shape)
        )
        out = TensorType(x.dtype, shape=(x.type.shape[0], y.type.shape[1]))
        return Apply(self, [x, y], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        if x.shape[1] != y.shape[0]:
            raise ValueError(f"{self}: shapes {x.shape} and {y.shape} are not aligned")
        output_storage[0][0] = np.dot(x, y)

    def infer_shape(self, fgraph, node, input_shapes):
        return [math.dot_shape(self, node, input_shapes)]

    def L_op(self, inputs, outputs, output_grads):
        x, y = inputs
        (g,) = output_grads
        return [self(g, y.T), self(x.T, g)]


class Dot22Scalar(Op):
    """``a * dot(x, y)`` for two matrices and a scalar of the same float dtype.

    >>> from theano_dag import tensor as tt
    >>> dot22scalar(tt.dmatrix("x"), tt.dmatrix("y"), 2.0).owner.op
    Dot22Scalar
    """

    __props__ = ()

    def make_node(self, x, y, a):
        x = _check(self, "x", x, 2)
        y = _check(self, "y", y, 2, x.dtype)
        a = _check(self, "a", a, 0, x.dtype)
        _check_len(
            self, "dot(x, y)", x.type.shape[1], y.type.shape[0], (x.type.shape, y.type.shape)
        )
        out = TensorType(x.dtype, shape=(x.type.shape[0], y.type.shape[1]))
        return Apply(self, [x, y, a], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y, a = inputs
        if x.shape[1] != y.shape[0]:
            raise ValueError(f"{self}: shapes {x.shape} and {y.shape} are not aligned")
        out = np.dot(x, y)
        out *= a
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [math.dot_shape(self, node, input_shapes)]

    def L_op(self, inputs, outputs, output_grads):
        m = _math()
        x, y, a = inputs
        (g,) = output_grads
        return [self(g, y.T, a), self(x.T, g, a), m.sum(g * m.dot(x, y))]


dot22 = Dot22()
dot22scalar = Dot22Scalar()
