"""Linear algebra (``theano.tensor.slinalg`` and ``theano.tensor.nlinalg``).

Decompositions (Cholesky, Eigh, Eig, SVD, QR), solves (Solve in Theano's four
structures, ``solve_triangular``, ``cho_solve``), inverses (MatrixInverse, MatrixPinv),
determinants (Det, SLogDet) and Expm are Ops; ``trace``, ``kron``, ``norm``,
``matrix_power`` and ``matrix_dot`` are built from other ops, so their gradients come
from those.

Each Op computes with ``numpy.linalg`` (scipy is not needed); where the optional scipy
extra is installed, the triangular solves (``Solve`` with a triangular ``A_structure``,
the gradient of ``Cholesky``) use its ``solve_triangular`` (LAPACK's ``trtrs``), several
times faster than an LU of the triangle on the small matrices of a sampler's model,
with the same result. Cholesky and the
symmetric eigendecomposition read only the lower triangle of their input, as LAPACK
does, so their gradients are lower triangular too: the gradient of an entry below
the diagonal counts both it and its mirror image.

The generalized problem ``A v = w B v`` (:class:`GeneralizedEigh`) is what the
OpGraph's ``EigenSolve`` with two inputs means; it has no gradient.
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.null_type import grad_not_implemented, is_disconnected
from theano_dag.graph.op import Op
from theano_dag.scalar import upcast
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import cast, eye, join, zeros_like
from theano_dag.tensor.elemwise import DimShuffle
from theano_dag.tensor.extra_ops import diagonal, tril, triu
from theano_dag.tensor.shape import checked_shape, reshape, shape_i
from theano_dag.tensor.type import TensorType, float_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "Adjugate",
    "Cholesky",
    "CholeskyGrad",
    "Det",
    "Eig",
    "Eigh",
    "EighGrad",
    "Expm",
    "GeneralizedEigh",
    "MatrixInverse",
    "MatrixPinv",
    "QR",
    "SLogDet",
    "SVD",
    "Solve",
    "TensorInv",
    "TensorSolve",
    "lstsq",
    "tensorinv",
    "tensorsolve",
    "cho_solve",
    "adjugate",
    "cholesky",
    "det",
    "eig",
    "eigh",
    "eigvalsh",
    "expm",
    "generalized_eigh",
    "inv",
    "kron",
    "matrix_dot",
    "matrix_inverse",
    "matrix_power",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_lower_triangular",
    "solve_symmetric",
    "solve_triangular",
    "solve_upper_triangular",
    "svd",
    "trace",
]


def _float_matrix(op, x, k=0):
    x = as_tensor_variable(x)
    if x.ndim != 2:
        raise TypeError(f"{op}: input {k} ({x}) must be a matrix, got {x.ndim} dimensions")
    if x.dtype not in float_dtypes:
        # integers decompose in float64, as numpy.linalg does

        x = cast(x, "float64")
    return x


def _linalg_dtype(a):
    """``a`` in a dtype numpy.linalg computes in (float16 is not one: float32)."""
    a = np.asarray(a)
    return a.astype("float32") if a.dtype == np.float16 else a


def _svd_input(a, who):
    """``_linalg_dtype(a)`` for an SVD, refused where an entry is not finite: LAPACK's SVD
    (numpy's, OpenBLAS's build) never returns for some matrices holding an infinity,
    ``diag([inf, 1, 1])`` among them, and gives no singular values for NaN (numpy raises
    ``LinAlgError`` there: the same error, for both)."""
    a = _linalg_dtype(a)
    if not np.isfinite(a).all():
        raise np.linalg.LinAlgError(
            f"SVD did not converge: {who} got a matrix with an infinite or NaN entry"
        )
    return a


_TRIANGULAR_SOLVE: list = []  # [scipy's solve_triangular or None], looked up once


def _triangular_solver():
    """scipy's ``solve_triangular``, or None where the optional scipy extra is missing."""
    if not _TRIANGULAR_SOLVE:
        try:
            from scipy.linalg import solve_triangular as st  # noqa: PLC0415 (optional extra)
        except ImportError:
            st = None
        _TRIANGULAR_SOLVE.append(st)
    return _TRIANGULAR_SOLVE[0]


def _solve_triangle(a, b, lower, trans=False, unit_diagonal=False):
    """``x`` with ``T x = b`` (``T^T x = b`` with ``trans``), ``T`` the lower or upper
    triangle of ``a``: scipy's triangular solve where it is installed, else numpy's
    general solve of the triangle (the same ``x``; a zero on the diagonal raises
    ``LinAlgError`` either way)."""
    st = _triangular_solver()
    if st is not None:
        return st(
            a, b, trans=1 if trans else 0, lower=lower, unit_diagonal=unit_diagonal,
            check_finite=False,
        )  # fmt: skip
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        np.fill_diagonal(t, 1)
    return np.linalg.solve(t.T if trans else t, b)


def _square(shape):
    n = shape[0] if shape[0] is not None else shape[1]
    return (n, n)


def _square_checked(op, out, x, shape, *more):
    """``out``, the lengths of ``op``'s result as before (passed through as they are),
    checked by the agreement of the rows and columns of ``x``, a square matrix of shape
    ``shape``, and of each of ``more`` (``(name, length)``: the rows of a right-hand
    side), as perform refuses another matrix (``checked_shape``)."""
    named = [(f"{x}'s rows", shape[0]), (f"{x}'s columns", shape[1]), *more]
    what = f"{op}: a square matrix" + (" and what it multiplies" if more else "")
    lengths = [n for _, n in named]
    return checked_shape(tuple(out), lengths, what, tuple(name for name, _ in named))


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

    __props__ = ("lower", "on_error")

    def __init__(self, lower=True, on_error="raise"):
        if on_error not in ("raise", "nan"):
            raise ValueError(f"Cholesky: on_error must be 'raise' or 'nan', got {on_error!r}")
        self.lower = bool(lower)
        self.on_error = on_error

    def __str__(self):
        nan = ", on_error='nan'" if self.on_error == "nan" else ""
        return f"Cholesky{{lower={self.lower}{nan}}}"

    __repr__ = __str__

    def make_node(self, x):
        x = _float_matrix(self, x)
        return Apply(self, [x], [TensorType(x.dtype, shape=_square(x.type.shape))()])

    def perform(self, node, inputs, output_storage, params=None):
        try:
            low = np.linalg.cholesky(_linalg_dtype(inputs[0]))
        except np.linalg.LinAlgError:
            if self.on_error == "raise":
                raise
            # on_error="nan": a matrix that is not positive definite gives NaNs (Theano's)
            low = np.full(inputs[0].shape, np.nan)
        out = low if self.lower else low.T
        output_storage[0][0] = np.ascontiguousarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        if self.on_error == "nan":  # a matrix that is not square gives NaNs of its shape
            return [input_shapes[0]]
        return [_square_checked(self, input_shapes[0], node.inputs[0], input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        (g,) = output_grads
        factor = outputs[0] if self.lower else outputs[0].T
        g = g if self.lower else g.T
        grad = CholeskyGrad()(inputs[0], factor, g)
        if self.on_error == "nan":
            # A matrix that is not positive definite has no factor (NaNs): its gradient is
            # NaN everywhere, not only where the NaN factor reaches (the triangular
            # solves leave the other triangle at 0).
            ok = ~tm.any(tm.isnan(outputs[0]))
            grad = tm.switch(ok, grad, np.nan)
        return [grad]


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
        y = _solve_triangle(low, phi, lower=True, trans=True)
        s = _solve_triangle(low, y.T, lower=True, trans=True).T
        grad = np.tril(s + s.T) - np.diag(np.diag(s))
        output_storage[0][0] = np.asarray(grad, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


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
        vgv = v.T @ gv
        # Equal eigenvalues make 1 / (w[j] - w[i]) infinite; where v^T dv is 0 there (the
        # eigenvalues alone differentiated: dv is 0) the term is 0, not inf * 0 = NaN
        # (the gradient of sum(eigvalsh(A)), the identity, was NaN at every A with a
        # repeated eigenvalue).
        with np.errstate(divide="ignore", invalid="ignore"):
            term = np.where(vgv == 0, 0.0, vgv / diff)
        np.fill_diagonal(term, 0.0)
        g = v @ (np.diag(gw) + term) @ v.T
        out = _lower_grad(g) if self.UPLO == "L" else _lower_grad(g.T).T
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class GeneralizedEigh(Op):
    """``A v = w B v`` for symmetric ``A`` and symmetric positive definite ``B``:
    ascending ``w`` and ``B``-orthonormal eigenvectors ``v`` (columns), ``-> (w, v)``.
    Both matrices are read from their lower triangles (scipy's ``eigh(a, b)``). The
    eigenvalues have a gradient; the eigenvectors have none.

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
        # A is read from its lower triangle, as B is (scipy.linalg.eigh's lower=True).
        a = np.tril(a) + np.tril(a, -1).T
        # With B = L L^T the problem is the symmetric C u = w u, C = L^-1 A L^-T, v = L^-T u.
        low = np.linalg.cholesky(b)
        c = np.linalg.solve(low, np.linalg.solve(low, a).T).T
        w, u = np.linalg.eigh(c)
        v = np.linalg.solve(low.T, u)
        output_storage[0][0] = np.asarray(w, dtype=node.outputs[0].dtype)
        output_storage[1][0] = np.asarray(v, dtype=node.outputs[1].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        b, bshape = node.inputs[1], input_shapes[1]
        more = ((f"{b}'s rows", bshape[0]), (f"{b}'s columns", bshape[1]))
        n, shape = input_shapes[0][0], input_shapes[0]
        return [_square_checked(self, out, node.inputs[0], shape, *more) for out in [(n,), (n, n)]]

    def L_op(self, inputs, outputs, output_grads):
        gw, gv = output_grads
        if not is_disconnected(gv):
            return [grad_not_implemented(self, k, x) for k, x in enumerate(inputs)]
        a, b = inputs
        w, v = outputs
        if is_disconnected(gw):
            return [zeros_like(a), zeros_like(b)]
        # The eigenvalues alone (eigvalsh): with v B-orthonormal, dw_i = v_i^T (dA - w_i dB)
        # v_i. perform reads the lower triangles of A and B: the gradients are folded
        # onto them.
        ga = tm.dot(v * gw.dimshuffle("x", 0), v.T)
        gb = -tm.dot(v * (gw * w).dimshuffle("x", 0), v.T)
        ga, gb = (tril(g) + triu(g, 1).T for g in (ga, gb))
        return [cast(ga, a.dtype), cast(gb, b.dtype)]


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


def _square_matrix(op, x, k=0):
    x = _float_matrix(op, x, k)
    a, b = x.type.shape
    if a is not None and b is not None and a != b:
        raise ValueError(f"{op}: input {k} ({x}) must be square, got shape {x.type.shape}")
    return x


def _like_inputs(grads, inputs):
    """Cast each gradient to its input's dtype (a float32 input keeps a float32 grad)."""
    return [g if g.dtype == i.dtype else cast(g, i.dtype) for g, i in zip(grads, inputs)]


class MatrixInverse(Op):
    """``numpy.linalg.inv``: the inverse of a square matrix.

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> matrix_inverse(a).eval({a: np.array([[2.0, 0.0], [0.0, 4.0]])})
    array([[0.5 , 0.  ],
           [0.  , 0.25]])
    """

    __props__ = ()

    def make_node(self, x):
        x = _square_matrix(self, x)
        return Apply(self, [x], [TensorType(x.dtype, shape=_square(x.type.shape))()])

    def perform(self, node, inputs, output_storage, params=None):
        out = np.linalg.inv(_linalg_dtype(inputs[0]))
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [_square_checked(self, input_shapes[0], node.inputs[0], input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        # d(X^-1) = -X^-1 dX X^-1, so the gradient is -X^-T G X^-T
        zt = outputs[0].T
        return [-tm.dot(tm.dot(zt, output_grads[0]), zt)]


class MatrixPinv(Op):
    """``numpy.linalg.pinv``: the Moore-Penrose pseudo-inverse (``n x m`` for ``m x n``).

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> pinv(a).eval({a: np.array([[1.0], [1.0]])})
    array([[0.5, 0.5]])
    """

    __props__ = ()

    def make_node(self, x):
        x = _float_matrix(self, x)
        m, n = x.type.shape
        return Apply(self, [x], [TensorType(x.dtype, shape=(n, m))()])

    def perform(self, node, inputs, output_storage, params=None):
        out = np.linalg.pinv(_svd_input(inputs[0], "pinv"))
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        m, n = input_shapes[0]
        return [(n, m)]

    def L_op(self, inputs, outputs, output_grads):
        # dZ = -Z dX Z + Z Z^T dX^T (I - X Z) + (I - Z X) dX^T Z^T Z (Golub & Pereyra, 1973)
        (x,), (z,), (g,) = inputs, outputs, output_grads
        eye_m = eye(shape_i(x, 0), dtype=x.dtype)
        eye_n = eye(shape_i(x, 1), dtype=x.dtype)
        gx = (
            -matrix_dot(z.T, g, z.T)
            + matrix_dot(eye_m - tm.dot(x, z), g.T, z, z.T)
            + matrix_dot(z.T, z, g.T, eye_n - tm.dot(z, x))
        )
        return [gx]


class Det(Op):
    """``numpy.linalg.det``: the determinant of a square matrix (a scalar).

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> float(det(a).eval({a: np.array([[2.0, 1.0], [1.0, 3.0]])}))
    5.0
    """

    __props__ = ()

    def make_node(self, x):
        x = _square_matrix(self, x)
        return Apply(self, [x], [TensorType(x.dtype, shape=())()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(
            np.linalg.det(_linalg_dtype(inputs[0])), dtype=node.outputs[0].dtype
        )

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]

    def L_op(self, inputs, outputs, output_grads):
        # d det(X) = tr(adj(X) dX): det(X) X^-1 where X is invertible, and finite where
        # it is not (the adjugate, from the SVD, not from an inverse that does not exist)
        return [output_grads[0] * adjugate(inputs[0]).T]


class Adjugate(Op):
    """The adjugate of a square matrix: ``det(a) * inv(a)`` where ``a`` is invertible,
    and defined where it is not (the gradient of ``det`` is its transpose). Computed from
    the SVD ``a = u s vt`` as ``det(u) det(vt) vt.T diag(prod of the other s) u.T``,
    without dividing by a singular value.

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> adjugate(a).eval({a: np.array([[1.0, 2.0], [2.0, 4.0]])}).round(12)
    array([[ 4., -2.],
           [-2.,  1.]])
    """

    __props__ = ()

    def make_node(self, x):
        x = _square_matrix(self, x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        a = _svd_input(inputs[0], str(self))
        n = a.shape[0]
        if n == 0:
            adj = np.zeros((0, 0))
        else:
            u, s, vt = np.linalg.svd(a)
            # each singular value's product with all the others, without a division
            before = np.concatenate([[1.0], np.cumprod(s[:-1])])
            after = np.concatenate([np.cumprod(s[::-1][:-1])[::-1], [1.0]])
            sign = np.sign(np.linalg.det(u)) * np.sign(np.linalg.det(vt))
            adj = sign * (vt.T * (before * after)) @ u.T
        output_storage[0][0] = np.asarray(adj, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        # adj(X) = det(X) X^-1: d adj = det(X) (tr(X^-1 dX) X^-1 - X^-1 dX X^-1), which
        # needs the inverse (a Hessian of det at a singular matrix raises LinAlgError).
        (gz,) = output_grads
        x = inputs[0]
        inv_t = matrix_inverse(x).T
        g = det(x) * (tm.sum(gz * inv_t.T) * inv_t - tm.dot(tm.dot(inv_t, gz), inv_t))
        return _like_inputs([g], inputs)


class SLogDet(Op):
    """``numpy.linalg.slogdet``: ``(sign, log|det|)`` of a square matrix, which stays
    finite where the determinant itself would overflow.

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> sign, logdet = slogdet(a)
    >>> round(float(logdet.eval({a: np.eye(3) * 1e200})), 6)
    1381.551056
    """

    __props__ = ()

    def make_node(self, x):
        x = _square_matrix(self, x)
        return Apply(self, [x], [TensorType(x.dtype, shape=())(), TensorType(x.dtype, shape=())()])

    def perform(self, node, inputs, output_storage, params=None):
        sign, logdet = np.linalg.slogdet(_linalg_dtype(inputs[0]))
        output_storage[0][0] = np.asarray(sign, dtype=node.outputs[0].dtype)
        output_storage[1][0] = np.asarray(logdet, dtype=node.outputs[1].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [(), ()]

    def L_op(self, inputs, outputs, output_grads):
        # the sign is piecewise constant; d log|det X| = tr(X^-1 dX)
        g = output_grads[1]
        if is_disconnected(g):
            return [zeros_like(inputs[0])]
        return [g * matrix_inverse(inputs[0]).T]


_STRUCTURES = ("general", "symmetric", "lower_triangular", "upper_triangular")


class Solve(Op):
    """``x`` with ``A x = b``, for Theano's four ``A_structure``s: ``"general"``,
    ``"symmetric"``, ``"lower_triangular"`` and ``"upper_triangular"`` (a triangular
    structure reads only that triangle of ``A``, and ``unit_diagonal`` takes its diagonal
    as ones). ``b`` is a vector or a matrix of right-hand sides.

    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.dvector("b")
    >>> solve(a, b).eval({a: np.array([[2.0, 0.0], [1.0, 1.0]]), b: np.array([2.0, 3.0])})
    array([1., 2.])
    """

    __props__ = ("A_structure", "lower", "unit_diagonal")

    def __init__(
        self,
        A_structure="general",  # noqa: N803 (Theano's name)
        lower=False,
        unit_diagonal=False,
        overwrite_A=False,  # noqa: N803 (accepted for Theano; a copy is always made)
        overwrite_b=False,
    ):
        if A_structure not in _STRUCTURES:
            raise ValueError(
                f"Solve: A_structure must be one of {_STRUCTURES}, got {A_structure!r}"
            )
        self.A_structure = A_structure
        self.lower = bool(lower)
        self.unit_diagonal = bool(unit_diagonal)

    def make_node(self, a, b):
        a = _square_matrix(self, a)
        b = as_tensor_variable(b)
        if b.ndim not in (1, 2):
            raise TypeError(
                f"{self}: b ({b}) must be a vector or a matrix, got {b.ndim} dimensions"
            )
        if b.dtype not in float_dtypes:
            b = cast(b, "float64")
        dtype = upcast(a.dtype, b.dtype)
        return Apply(self, [a, b], [TensorType(dtype, shape=b.type.shape)()])

    def _matrix(self, a):
        if self.A_structure == "lower_triangular":
            a = np.tril(a)
        elif self.A_structure == "upper_triangular":
            a = np.triu(a)
        if self.unit_diagonal:
            a = np.array(a)
            np.fill_diagonal(a, 1)
        return a

    def perform(self, node, inputs, output_storage, params=None):
        work = _linalg_dtype(np.zeros(0, dtype=node.outputs[0].dtype)).dtype
        a, b = (np.asarray(v, dtype=work) for v in inputs)
        if self.A_structure in ("lower_triangular", "upper_triangular"):
            lower = self.A_structure == "lower_triangular"
            out = _solve_triangle(a, b, lower, unit_diagonal=self.unit_diagonal)
        else:
            out = np.linalg.solve(self._matrix(a), b)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        b, bshape = node.inputs[1], input_shapes[1]
        rows = (f"{b}'s rows", bshape[0])
        return [_square_checked(self, bshape, node.inputs[0], input_shapes[0], rows)]

    def L_op(self, inputs, outputs, output_grads):
        # b_bar = A^-T x_bar and A_bar = -b_bar x^T (Giles, 2008), kept to the triangle read
        (a, _), (x,), (gx,) = inputs, outputs, output_grads
        flipped = {"lower_triangular": "upper_triangular", "upper_triangular": "lower_triangular"}
        structure = flipped.get(self.A_structure, self.A_structure)
        gb = Solve(structure, not self.lower, self.unit_diagonal)(a.T, gx)
        ga = -(tm.outer(gb, x) if x.ndim == 1 else tm.dot(gb, x.T))
        k = 1 if self.unit_diagonal else 0
        if self.A_structure == "lower_triangular":
            ga = tril(ga, -k)
        elif self.A_structure == "upper_triangular":
            ga = triu(ga, k)
        return _like_inputs([ga, gb], inputs)


class Eig(Op):
    """``numpy.linalg.eig`` for a matrix whose eigenvalues are real: ``(w, v)`` with the
    eigenvectors in the columns of ``v``.

    Complex eigenvalues raise ``ValueError`` (the outputs have the input's real dtype;
    Theano silently dropped the imaginary parts). No gradient, as in Theano.

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> w, v = eig(a)
    >>> w.eval({a: np.array([[2.0, 0.0], [1.0, 3.0]])})
    array([3., 2.])
    """

    __props__ = ()

    def make_node(self, x):
        x = _square_matrix(self, x)
        n = _square(x.type.shape)
        return Apply(
            self, [x], [TensorType(x.dtype, shape=n[:1])(), TensorType(x.dtype, shape=n)()]
        )

    def perform(self, node, inputs, output_storage, params=None):
        w, v = np.linalg.eig(_linalg_dtype(inputs[0]))
        if np.iscomplexobj(w) and np.any(w.imag != 0):
            raise ValueError(
                "Eig: the matrix has complex eigenvalues, which real outputs cannot hold; "
                "use eigh for a symmetric matrix"
            )
        output_storage[0][0] = np.asarray(w.real, dtype=node.outputs[0].dtype)
        output_storage[1][0] = np.asarray(v.real, dtype=node.outputs[1].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        n = input_shapes[0][0]
        shape = input_shapes[0]
        return [_square_checked(self, out, node.inputs[0], shape) for out in [(n,), (n, n)]]

    def L_op(self, inputs, outputs, output_grads):
        return [grad_not_implemented(self, 0, inputs[0])]


class Eigh(Eig):
    """Eigenvalues ``w`` (ascending) and eigenvectors ``v`` (columns) of a symmetric
        matrix, read from its lower (``UPLO='L'``) or upper triangle: ``eigh(a) -> (w, v)``.
    An ``Eig`` specialised to symmetric matrices, as in Theano (its tests look for ``Eig``).

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
        w, v = np.linalg.eigh(_linalg_dtype(inputs[0]), self.UPLO)
        output_storage[0][0] = np.asarray(w, dtype=node.outputs[0].dtype)
        output_storage[1][0] = np.asarray(v, dtype=node.outputs[1].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        n = input_shapes[0][0]
        shape = input_shapes[0]
        return [_square_checked(self, out, node.inputs[0], shape) for out in [(n,), (n, n)]]

    def L_op(self, inputs, outputs, output_grads):
        grads = [zeros_like(o) if is_disconnected(g) else g for o, g in zip(outputs, output_grads)]
        return [EighGrad(self.UPLO)(inputs[0], *outputs, *grads)]


class SVD(Op):
    """``numpy.linalg.svd``: ``(u, s, vt)`` with ``a = u diag(s) vt``, or ``s`` alone
    (``compute_uv=False``); ``full_matrices=False`` gives the reduced ``u`` and ``vt``.

    The gradient is defined for the singular values (``d s_i = u_i^T dA v_i``).

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> svd(a, compute_uv=False).eval({a: np.array([[3.0, 0.0], [0.0, -4.0]])})
    array([4., 3.])
    """

    __props__ = ("full_matrices", "compute_uv")

    def __init__(self, full_matrices=True, compute_uv=True):
        self.full_matrices = bool(full_matrices)
        self.compute_uv = bool(compute_uv)

    def make_node(self, x):
        x = _float_matrix(self, x)
        m, n = x.type.shape
        k = None if m is None or n is None else min(m, n)
        s = TensorType(x.dtype, shape=(k,))()
        if not self.compute_uv:
            return Apply(self, [x], [s])
        u_cols, vt_rows = (m, n) if self.full_matrices else (k, k)
        u = TensorType(x.dtype, shape=(m, u_cols))()
        vt = TensorType(x.dtype, shape=(vt_rows, n))()
        return Apply(self, [x], [u, s, vt])

    def perform(self, node, inputs, output_storage, params=None):
        x = _svd_input(inputs[0], "svd")
        outs = np.linalg.svd(x, self.full_matrices, self.compute_uv)
        outs = outs if self.compute_uv else (outs,)
        for store, o, var in zip(output_storage, outs, node.outputs):
            store[0] = np.asarray(o, dtype=var.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        m, n = input_shapes[0]
        k = tm.minimum(m, n)
        if not self.compute_uv:
            return [(k,)]
        if self.full_matrices:
            return [(m, m), (k,), (n, n)]
        return [(m, k), (k,), (k, n)]

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        gs = output_grads[1] if self.compute_uv else output_grads[0]
        if self.compute_uv and not all(is_disconnected(output_grads[i]) for i in (0, 2)):
            return [grad_not_implemented(self, 0, x, "the gradient through u and vt")]
        if is_disconnected(gs):
            return [zeros_like(x)]
        u, _, vt = SVD(False, True)(x)
        return [tm.dot(u * DimShuffle(gs.broadcastable, ["x", 0])(gs), vt)]


_QR_MODES = ("reduced", "complete", "r", "raw")


class QR(Op):
    """``numpy.linalg.qr``: ``(q, r)`` with ``a = q r`` (``mode="reduced"`` or
    ``"complete"``), ``r`` alone (``mode="r"``), or LAPACK's ``(h, tau)``
    (``mode="raw"``). No gradient, as in Theano.

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> q, r = qr(a)
    >>> m = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> bool(np.allclose(q.eval({a: m}) @ r.eval({a: m}), m))
    True
    """

    __props__ = ("mode",)

    def __init__(self, mode="reduced"):
        if mode not in _QR_MODES:
            raise ValueError(f"QR: mode must be one of {_QR_MODES}, got {mode!r}")
        self.mode = mode

    def make_node(self, x):
        x = _float_matrix(self, x)
        m, n = x.type.shape
        k = None if m is None or n is None else min(m, n)
        rows = m if self.mode == "complete" else k
        r = TensorType(x.dtype, shape=(rows, n))()
        if self.mode == "r":
            return Apply(self, [x], [r])
        if self.mode == "raw":  # LAPACK's (h, tau), h transposed as numpy gives it
            h, tau = TensorType(x.dtype, shape=(n, m))(), TensorType(x.dtype, shape=(k,))()
            return Apply(self, [x], [h, tau])
        return Apply(self, [x], [TensorType(x.dtype, shape=(m, rows))(), r])

    def perform(self, node, inputs, output_storage, params=None):
        outs = np.linalg.qr(_linalg_dtype(inputs[0]), self.mode)
        outs = (outs,) if self.mode == "r" else outs
        for store, o, var in zip(output_storage, outs, node.outputs):
            store[0] = np.asarray(o, dtype=var.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        m, n = input_shapes[0]
        rows = m if self.mode == "complete" else tm.minimum(m, n)
        if self.mode == "r":
            return [(rows, n)]
        if self.mode == "raw":
            return [(n, m), (rows,)]
        return [(m, rows), (rows, n)]

    def L_op(self, inputs, outputs, output_grads):
        return [grad_not_implemented(self, 0, inputs[0])]


def _expm_pade(a):
    """``exp(a)`` by scaling and squaring with the (8, 8) Pade approximant (Golub & Van
    Loan, algorithm 11.3.1): its error is below float64's rounding once ``|a| <= 1/2``."""
    a = np.asarray(a, dtype=np.float64)
    norm = np.linalg.norm(a, np.inf)
    squarings = max(0, int(np.ceil(np.log2(norm))) + 1) if norm > 0 else 0
    a = a / 2.0**squarings
    q = 8
    ident = np.eye(a.shape[0])
    c, power, num, den = 1.0, ident, ident.copy(), ident.copy()
    for k in range(1, q + 1):
        c = c * (q - k + 1) / ((2 * q - k + 1) * k)
        power = a @ power
        num += c * power
        den += (-1) ** k * c * power
    out = np.linalg.solve(den, num)
    for _ in range(squarings):
        out = out @ out
    return out


class Expm(Op):
    """The matrix exponential ``exp(A) = sum_k A^k / k!`` (``scipy.linalg.expm``,
    computed here with numpy).

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> expm(a).eval({a: np.array([[0.0, 1.0], [0.0, 0.0]])})
    array([[1., 1.],
           [0., 1.]])
    """

    __props__ = ()

    def make_node(self, x):
        x = _square_matrix(self, x)
        return Apply(self, [x], [TensorType(x.dtype, shape=_square(x.type.shape))()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(_expm_pade(inputs[0]), dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [_square_checked(self, input_shapes[0], node.inputs[0], input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        # The gradient is the Frechet derivative at A^T in the direction G: the top right
        # block of exp([[A^T, G], [0, A^T]]) (Najfeld & Havel, 1995).
        (a,), (g,) = inputs, output_grads
        at = a.T
        n = shape_i(a, 0)
        block = join(0, join(1, at, g), join(1, zeros_like(at), at))
        return [expm(block)[:n, n:]]


class TensorInv(Op):
    """``numpy.linalg.tensorinv``: the inverse of ``a`` for ``tensordot(.., ind)``; the
    result has the shape ``a.shape[ind:] + a.shape[:ind]``. No gradient, as in Theano.

    >>> from theano_dag import tensor as tt
    >>> a = tt.dtensor3("a")
    >>> tensorinv(a, ind=1).eval({a: np.eye(4).reshape(4, 2, 2)}).shape
    (2, 2, 4)
    """

    __props__ = ("ind",)

    def __init__(self, ind=2):
        self.ind = int(ind)

    def make_node(self, a):
        a = as_tensor_variable(a)
        if a.dtype not in float_dtypes:
            a = cast(a, "float64")
        shape = a.type.shape[self.ind :] + a.type.shape[: self.ind]
        return Apply(self, [a], [TensorType(a.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        out = np.linalg.tensorinv(_linalg_dtype(inputs[0]), self.ind)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        (shp,) = input_shapes
        return [tuple(shp[self.ind :]) + tuple(shp[: self.ind])]

    def L_op(self, inputs, outputs, output_grads):
        return [grad_not_implemented(self, 0, inputs[0])]


class TensorSolve(Op):
    """``numpy.linalg.tensorsolve``: ``x`` with ``tensordot(a, x, x.ndim) = b``, the
    axes ``axes`` of ``a`` moved to its end first. No gradient, as in Theano.

    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dtensor3("a"), tt.dmatrix("b")
    >>> x = tensorsolve(a, b)
    >>> x.eval({a: np.eye(4).reshape(2, 2, 4), b: np.arange(4.0).reshape(2, 2)})
    array([0., 1., 2., 3.])
    """

    __props__ = ("axes",)

    def __init__(self, axes=None):
        self.axes = None if axes is None else tuple(axes)

    def make_node(self, a, b):
        a, b = as_tensor_variable(a), as_tensor_variable(b)
        dtype = upcast(a.dtype, b.dtype, "float32")
        out = TensorType(dtype, shape=(None,) * (a.ndim - b.ndim))()
        return Apply(self, [a, b], [out])

    def perform(self, node, inputs, output_storage, params=None):
        a, b = (_linalg_dtype(np.asarray(v, dtype="float64")) for v in inputs)
        out = np.linalg.tensorsolve(a, b, self.axes)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        shp_a, shp_b = input_shapes
        order = list(range(len(shp_a)))
        for k in self.axes or ():  # numpy moves these axes of a to its end first
            order.remove(k % len(shp_a))
            order.append(k % len(shp_a))
        out = tuple(shp_a[k] for k in order[len(shp_b) :])
        # numpy's square system: as many unknowns (a's trailing lengths' product) as
        # equations (its leading lengths'), and as many values in b
        unknowns, equations, values = 1, 1, 1
        for n in out:
            unknowns = unknowns * n
        for k in order[: len(shp_b)]:
            equations = equations * shp_a[k]
        for n in shp_b:
            values = values * n
        names = ("the unknowns", "the equations", f"the values of {node.inputs[1]}")
        return [checked_shape(out, [unknowns, equations, values], str(self), names)]

    def L_op(self, inputs, outputs, output_grads):
        return [grad_not_implemented(self, k, x) for k, x in enumerate(inputs)]


class lstsq(Op):  # noqa: N801 (Theano's name for the op class)
    """``numpy.linalg.lstsq(a, b, rcond)``: ``[x, residuals, rank, s]``, ``x``
    minimizing ``|b - a x|``. No gradient, as in Theano.

    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.dvector("b")
    >>> x = lstsq()(a, b, -1)[0]
    >>> x.eval({a: np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]), b: np.array([1.0, 4.0, 5.0])})
    array([1., 2.])
    """

    __props__ = ()

    def make_node(self, a, b, rcond):
        a, b = _float_matrix(self, a), as_tensor_variable(b)
        rcond = as_tensor_variable(rcond)
        if rcond.ndim != 0:
            raise TypeError(f"lstsq: rcond must be a scalar, got {rcond} of type {rcond.type}")
        if b.ndim not in (1, 2):
            raise TypeError(f"lstsq: b must be a vector or a matrix, got {b} of type {b.type}")
        dtype = upcast(a.dtype, b.dtype)
        outs = [
            TensorType(dtype, shape=(None,) * b.ndim)(),
            TensorType(dtype, shape=(None,))(),
            TensorType("int64", shape=())(),
            TensorType(dtype, shape=(None,))(),
        ]
        return Apply(self, [a, b, rcond], outs)

    def perform(self, node, inputs, output_storage, params=None):
        a, b, rcond = inputs
        outs = np.linalg.lstsq(_svd_input(a, "lstsq"), _linalg_dtype(b), rcond=float(rcond))
        for store, o, var in zip(output_storage, outs, node.outputs):
            store[0] = np.asarray(o, dtype=var.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        (m, n), shp_b = input_shapes[0], input_shapes[1]
        # the residuals' length depends on the rank found (empty when it is below n)
        return [(n, *shp_b[1:]), None, (), (tm.minimum(m, n),)]

    def L_op(self, inputs, outputs, output_grads):
        return [grad_not_implemented(self, k, x) for k, x in enumerate(inputs)]


def tensorinv(a, ind=2):
    """The tensor inverse of ``a`` (see :class:`TensorInv`).

    >>> from theano_dag import tensor as tt
    >>> tensorinv(tt.dtensor4("a")).ndim
    4
    """
    return TensorInv(ind)(a)


def tensorsolve(a, b, axes=None):
    """``x`` with ``tensordot(a, x, x.ndim) = b`` (see :class:`TensorSolve`).

    >>> from theano_dag import tensor as tt
    >>> tensorsolve(tt.dtensor3("a"), tt.dmatrix("b")).ndim
    1
    """
    return TensorSolve(axes)(a, b)


matrix_inverse = MatrixInverse()
pinv = MatrixPinv()
det = Det()
adjugate = Adjugate()
eig = Eig()
expm = Expm()
solve_lower_triangular = Solve("lower_triangular", lower=True)
solve_upper_triangular = Solve("upper_triangular", lower=False)
solve_symmetric = Solve("symmetric")


def inv(a):
    """The inverse of ``a`` (PyTensor's name for :data:`matrix_inverse`).

    >>> from theano_dag import tensor as tt
    >>> inv(tt.dmatrix("a")).owner.op
    MatrixInverse
    """
    return matrix_inverse(a)


def slogdet(a):
    """``(sign, log|det a|)`` (see :class:`SLogDet`).

    >>> from theano_dag import tensor as tt
    >>> [o.ndim for o in slogdet(tt.dmatrix("a"))]
    [0, 0]
    """
    return tuple(SLogDet()(a, return_list=True))


def solve(a, b, assume_a="gen", lower=False):
    """``x`` with ``a x = b`` (scipy's signature; ``assume_a`` is ``"gen"``, ``"sym"`` or
    ``"pos"``; every one is solved by LU, so the choice does not change the result).

    >>> from theano_dag import tensor as tt
    >>> solve(tt.dmatrix("a"), tt.dmatrix("b")).owner.op
    Solve{A_structure='general', lower=False, unit_diagonal=False}
    """
    if assume_a not in ("gen", "sym", "pos", "her"):
        raise ValueError(f"solve: assume_a must be 'gen', 'sym', 'her' or 'pos', got {assume_a!r}")
    return Solve("general" if assume_a == "gen" else "symmetric", lower)(a, b)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False):
    """``x`` with ``a x = b`` (``trans=1`` or ``"T"``: ``a^T x = b``) for the lower or
    upper triangle of ``a`` (``scipy.linalg.solve_triangular``'s signature).

    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.dvector("b")
    >>> x = solve_triangular(a, b, lower=True)
    >>> x.eval({a: np.array([[2.0, 9.0], [1.0, 1.0]]), b: np.array([2.0, 3.0])})
    array([1., 2.])
    """
    if trans in (1, 2, "T", "C"):
        a, lower = as_tensor_variable(a).T, not lower
    elif trans not in (0, "N"):
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    structure = "lower_triangular" if lower else "upper_triangular"
    return Solve(structure, lower, unit_diagonal)(a, b)


def cho_solve(c_and_lower, b):
    """``x`` with ``A x = b`` given the Cholesky factor of ``A``: ``c_and_lower`` is
    ``(c, lower)`` as from ``scipy.linalg.cho_factor`` (two triangular solves).

    >>> from theano_dag import tensor as tt
    >>> c, b = tt.dmatrix("c"), tt.dvector("b")
    >>> x = cho_solve((c, True), b)
    >>> x.eval({c: np.array([[2.0, 0.0], [1.0, 1.0]]), b: np.array([4.0, 4.0])})
    array([0., 2.])
    """
    c, lower = c_and_lower
    if lower:  # A = L L^T
        return solve_triangular(c, solve_triangular(c, b, lower=True), trans=1, lower=True)
    # A = U^T U
    return solve_triangular(c, solve_triangular(c, b, trans=1, lower=False), lower=False)


def eigvalsh(a, b=None, lower=True):
    """The ascending eigenvalues of symmetric ``a`` (of ``a v = w b v`` when ``b`` is
    given), read from its lower triangle (``lower=False``: upper).

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> eigvalsh(a).eval({a: np.array([[2.0, 1.0], [1.0, 2.0]])})
    array([1., 3.])
    """
    if b is None or (isinstance(b, Constant) and b.data is None):  # None or NoneConst
        return eigh(a, "L" if lower else "U")[0]
    return generalized_eigh(a, b)[0]


def svd(a, full_matrices=1, compute_uv=1):
    """``(u, s, vt)``, or ``s`` when ``compute_uv`` is false (see :class:`SVD`).

    >>> from theano_dag import tensor as tt
    >>> [o.ndim for o in svd(tt.dmatrix("a"))]
    [2, 1, 2]
    """
    outs = SVD(full_matrices, compute_uv)(a, return_list=True)
    return tuple(outs) if compute_uv else outs[0]


def qr(a, mode="reduced"):
    """``(q, r)``, or ``r`` for ``mode="r"`` (see :class:`QR`).

    >>> from theano_dag import tensor as tt
    >>> qr(tt.dmatrix("a"), mode="r").ndim
    2
    """
    outs = QR(mode)(a, return_list=True)
    return outs[0] if mode == "r" else tuple(outs)


def matrix_dot(*args):
    """``args[0] . args[1] . ...``: the product of several matrices, left to right.

    >>> from theano_dag import tensor as tt
    >>> a = tt.dmatrix("a")
    >>> matrix_dot(a, a, a).eval({a: np.array([[0.0, 1.0], [1.0, 0.0]])})
    array([[0., 1.],
           [1., 0.]])
    """
    out = as_tensor_variable(args[0])
    for m in args[1:]:
        out = tm.dot(out, m)
    return out


def trace(x):
    """The sum of the diagonal of the matrix ``x``.

    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> float(trace(x).eval({x: np.array([[1.0, 2.0], [3.0, 4.0]])}))
    5.0
    """
    x = as_tensor_variable(x)
    if x.ndim != 2:
        raise TypeError(f"trace: {x} must be a matrix, got {x.ndim} dimensions")
    return tm.sum(diagonal(x))


def kron(a, b):
    """``numpy.kron``: the Kronecker product, block ``(i, j)`` being ``a[i, j] * b``.

    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.dmatrix("b")
    >>> kron(a, b).eval({a: np.array([[1.0, 2.0]]), b: np.array([[1.0], [10.0]])})
    array([[ 1.,  2.],
           [10., 20.]])
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    nd = max(a.ndim, b.ndim)

    def spread(x, first):
        # x's dims at the even (first) or odd places of 2 * nd dims, the others broadcast
        lead = ["x"] * (nd - x.ndim) + list(range(x.ndim))
        order = []
        for d in lead:
            order.extend([d, "x"] if first else ["x", d])
        return DimShuffle(x.broadcastable, order)(x)

    shape = []
    for d in range(nd):
        da, db = d - (nd - a.ndim), d - (nd - b.ndim)
        size_a = shape_i(a, da) if da >= 0 else 1
        size_b = shape_i(b, db) if db >= 0 else 1
        shape.append(size_a * size_b)
    return reshape(spread(a, True) * spread(b, False), shape)


def matrix_power(m, n):
    """``m`` to the integer power ``n`` by repeated squaring (negative: of the inverse).

    >>> from theano_dag import tensor as tt
    >>> m = tt.dmatrix("m")
    >>> matrix_power(m, 3).eval({m: np.array([[1.0, 1.0], [0.0, 1.0]])})
    array([[1., 3.],
           [0., 1.]])
    """
    m = as_tensor_variable(m)
    n = int(n)
    if n < 0:
        m, n = matrix_inverse(m), -n
    if n == 0:
        return eye(shape_i(m, 0), dtype=m.dtype)
    result, base = None, m
    while n:
        if n & 1:
            result = base if result is None else tm.dot(result, base)
        n >>= 1
        if n:
            base = tm.dot(base, base)
    return result


def norm(x, ord=None):  # noqa: A002 (numpy's name)
    """``numpy.linalg.norm`` of a vector or a matrix (``ord``: None/2, inf, -inf, 0, p
    for vectors; None/"fro", inf, -inf, 1, -1, 2, -2, "nuc" for matrices; Theano's
    ``"inf"`` and ``"-inf"`` strings are the infinities).

    >>> from theano_dag import tensor as tt
    >>> v = tt.dvector("v")
    >>> float(norm(v).eval({v: np.array([3.0, 4.0])}))
    5.0
    """
    x = as_tensor_variable(x)
    inf = float("inf")
    ord = {"inf": inf, "-inf": -inf}.get(ord, ord) if isinstance(ord, str) else ord  # noqa: A001
    if x.ndim == 0:
        raise ValueError("norm: 'axis' entry is out of bounds (x is a scalar)")
    if x.ndim > 2:
        raise NotImplementedError(f"norm: {x} has {x.ndim} dimensions; vectors and matrices only")
    if x.ndim == 1:
        if ord is None or ord == 2:
            return tm.sqrt(tm.sum(tm.sqr(x)))
        if ord == inf:
            return tm.max(abs(x))
        if ord == -inf:
            return tm.min(abs(x))
        if ord == 0:
            return tm.sum(tm.neq(x, 0), dtype=x.dtype)
        if isinstance(ord, str):
            raise ValueError(f"norm: invalid ord {ord!r} for a vector")
        # In x's dtype: a Python float would upcast float32 to float64 (and numpy 1's
        # ``1 / p`` of a float32 p is a float64).
        p = np.asarray(ord, dtype=x.dtype)
        return tm.sum(abs(x) ** p) ** np.asarray(1 / float(ord), dtype=x.dtype)
    if ord is None or ord == "fro":
        return tm.sqrt(tm.sum(tm.sqr(x)))
    table = {inf: (1, tm.max), -inf: (1, tm.min), 1: (0, tm.max), -1: (0, tm.min)}
    if ord in table:
        axis, pick = table[ord]
        return pick(tm.sum(abs(x), axis=axis))
    if ord in (2, -2, "nuc"):
        s = svd(x, compute_uv=False)
        return {2: tm.max, -2: tm.min, "nuc": tm.sum}[ord](s)
    raise ValueError(f"norm: invalid ord {ord!r} for a matrix")
