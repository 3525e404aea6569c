"""The linear algebra of ``slinalg``/``nlinalg``: values against numpy (and scipy where it
is installed) in float32 and float64, ``infer_shape`` against the real shapes, gradients by
finite differences, on the reference and CPU engines."""

import numpy as np
import pytest
from tensor_helpers import inferred_node_shapes

from theano_dag import function
from theano_dag import tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.engines.dask import backend as dask_backend
from theano_dag.gradient import grad
from theano_dag.gradient.verify import verify_grad
from theano_dag.tensor import linalg, nlinalg, slinalg

rng = np.random.default_rng(7)


def spd(n):
    x = rng.standard_normal((n, n))
    return x @ x.T + n * np.eye(n)


def well_conditioned(n, m=None):
    return rng.standard_normal((n, m or n)) + 3 * np.eye(n, m or n)


A = well_conditioned(4)
SPD = spd(4)
RECT = rng.standard_normal((5, 3))
B_VEC = rng.standard_normal(4)
B_MAT = rng.standard_normal((4, 2))
LOW = np.tril(A)

# name: (symbolic builder, numpy reference, inputs)
CASES = {
    "matrix_inverse": (nlinalg.matrix_inverse, np.linalg.inv, [A]),
    "inv": (nlinalg.inv, np.linalg.inv, [A]),
    "pinv": (nlinalg.pinv, np.linalg.pinv, [RECT]),
    "det": (nlinalg.det, np.linalg.det, [A]),
    "slogdet_logdet": (lambda x: nlinalg.slogdet(x)[1], lambda x: np.linalg.slogdet(x)[1], [A]),
    "slogdet_sign": (lambda x: nlinalg.slogdet(x)[0], lambda x: np.linalg.slogdet(x)[0], [-A]),
    "solve_vec": (slinalg.solve, np.linalg.solve, [A, B_VEC]),
    "solve_mat": (slinalg.solve, np.linalg.solve, [A, B_MAT]),
    "solve_sym": (
        lambda a, b: slinalg.solve(a, b, assume_a="pos"),
        np.linalg.solve,
        [SPD, B_MAT],
    ),
    "solve_lower": (
        lambda a, b: slinalg.solve_triangular(a, b, lower=True),
        lambda a, b: np.linalg.solve(np.tril(a), b),
        [A, B_VEC],
    ),
    "solve_upper_trans": (
        lambda a, b: slinalg.solve_triangular(a, b, trans="T"),
        lambda a, b: np.linalg.solve(np.triu(a).T, b),
        [A, B_MAT],
    ),
    "solve_unit": (
        lambda a, b: slinalg.solve_triangular(a, b, lower=True, unit_diagonal=True),
        lambda a, b: np.linalg.solve(np.tril(a, -1) + np.eye(4), b),
        [A, B_MAT],
    ),
    "solve_lower_triangular": (
        slinalg.solve_lower_triangular,
        lambda a, b: np.linalg.solve(np.tril(a), b),
        [A, B_MAT],
    ),
    "cho_solve_lower": (
        lambda c, b: slinalg.cho_solve((c, True), b),
        lambda c, b: np.linalg.solve(np.tril(c) @ np.tril(c).T, b),
        [LOW, B_VEC],
    ),
    "cho_solve_upper": (
        lambda c, b: slinalg.cho_solve((c, False), b),
        lambda c, b: np.linalg.solve(np.triu(c).T @ np.triu(c), b),
        [LOW.T, B_MAT],
    ),
    "svd_s": (
        lambda x: nlinalg.svd(x, compute_uv=False),
        lambda x: np.linalg.svd(x, compute_uv=False),
        [RECT],
    ),
    "trace": (nlinalg.trace, np.trace, [A]),
    "kron": (linalg.kron, np.kron, [RECT, A]),
    "kron_vec_mat": (linalg.kron, np.kron, [B_VEC, RECT]),
    # Theano's slinalg.kron: numpy's for two matrices, a vector where the ranks sum to 3.
    "slinalg_kron": (slinalg.kron, np.kron, [RECT, A]),
    "slinalg_kron_vec_mat": (slinalg.kron, lambda a, b: np.kron(a, b).ravel(), [B_VEC, RECT]),
    "slinalg_kron_mat_vec": (
        slinalg.kron,
        lambda a, b: np.multiply.outer(a, b).transpose(1, 0, 2).ravel(),
        [RECT, B_VEC],
    ),
    "slinalg_kron_3d_mat": (
        slinalg.kron,
        lambda a, b: np.multiply.outer(a, b).swapaxes(1, 2).reshape(4, 12, 3),
        [RECT[:2, :, None] * np.array([1.0, -0.5]), B_VEC[:, None] * RECT[0]],
    ),
    "matrix_power_3": (lambda m: nlinalg.matrix_power(m, 3), lambda m: m @ m @ m, [A]),
    "matrix_power_-2": (
        lambda m: nlinalg.matrix_power(m, -2),
        lambda m: np.linalg.matrix_power(m, -2),
        [A],
    ),
    "matrix_power_0": (lambda m: nlinalg.matrix_power(m, 0), lambda m: np.eye(4), [A]),
    "expm": (slinalg.expm, None, [A / 3]),
    "norm_vec": (nlinalg.norm, np.linalg.norm, [B_VEC]),
    "norm_vec_inf": (
        lambda v: nlinalg.norm(v, np.inf),
        lambda v: np.linalg.norm(v, np.inf),
        [B_VEC],
    ),
    "norm_vec_3": (lambda v: nlinalg.norm(v, 3), lambda v: np.linalg.norm(v, 3), [B_VEC]),
    "norm_fro": (nlinalg.norm, np.linalg.norm, [RECT]),
    "norm_mat_1": (lambda m: nlinalg.norm(m, 1), lambda m: np.linalg.norm(m, 1), [RECT]),
    "norm_mat_-inf": (
        lambda m: nlinalg.norm(m, -np.inf),
        lambda m: np.linalg.norm(m, -np.inf),
        [RECT],
    ),
    "norm_mat_2": (lambda m: nlinalg.norm(m, 2), lambda m: np.linalg.norm(m, 2), [RECT]),
    "norm_nuc": (lambda m: nlinalg.norm(m, "nuc"), lambda m: np.linalg.norm(m, "nuc"), [RECT]),
    "matrix_dot": (nlinalg.matrix_dot, lambda a, b, c: a @ b @ c, [A, B_MAT, B_MAT.T]),
}

NO_GRAD = {"slogdet_sign", "norm_vec_inf", "norm_mat_-inf", "norm_mat_1", "matrix_power_0"}


def _expm_reference(x):
    scipy_linalg = pytest.importorskip("scipy.linalg")
    return scipy_linalg.expm(x)


def _symbolic(values, dtype):
    return [tt.TensorType(dtype, shape=(None,) * np.ndim(v))(f"x{k}") for k, v in enumerate(values)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_value_against_numpy(name, dtype):
    build, ref, values = CASES[name]
    ref = ref or _expm_reference
    values = [np.asarray(v, dtype=dtype) for v in values]
    xs = _symbolic(values, dtype)
    out = build(*xs)
    assert out.dtype == dtype
    got = function(xs, out)(*values)
    want = ref(*[v.astype("float64") for v in values])
    tol = 2e-3 if dtype == "float32" else 1e-9
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert got.dtype == dtype


@pytest.mark.parametrize("name", sorted(CASES))
def test_infer_shape_matches_the_value(name):
    build, _, values = CASES[name]
    xs = _symbolic(values, "float64")
    out = build(*xs)
    givens = dict(zip(xs, values))
    value = function(xs, out)(*values)
    node = out.owner
    # a composed function's last node; every op's infer_shape on the way is checked by the
    # shape feature when the graph is compiled, the op under test here directly
    (shape, *_) = [s for s, o in zip(inferred_node_shapes(node, givens), node.outputs) if o is out]
    assert tuple(shape) == value.shape


@pytest.mark.parametrize("name", sorted(set(CASES) - NO_GRAD))
def test_grad_by_finite_differences(name):
    build, _, values = CASES[name]
    verify_grad(
        build, [np.asarray(v, dtype="float64") for v in values], rng=np.random.default_rng(0)
    )


def test_engines_agree():
    a, b = tt.dmatrix("a"), tt.dvector("b")
    outs = [
        slinalg.solve(a, b),
        nlinalg.slogdet(a)[1],
        nlinalg.det(a),
        slinalg.expm(a / 4),
        grad(nlinalg.slogdet(a)[1] + slinalg.solve(a, b).sum(), a),
    ]
    ref = function([a, b], outs, mode=Mode(linker="py"))(A, B_VEC)
    cpu = function([a, b], outs, mode=Mode(linker="cpu"))(A, B_VEC)
    for r, c in zip(ref, cpu):
        np.testing.assert_allclose(r, c, rtol=1e-12)


def _det_fd_grad(a, step=1e-6):
    g = np.zeros_like(a)
    for k in np.ndindex(a.shape):
        up, down = a.copy(), a.copy()
        up[k] += step
        down[k] -= step
        g[k] = (np.linalg.det(up) - np.linalg.det(down)) / (2 * step)
    return g


SINGULAR = {
    "rank_1_of_2": np.array([[1.0, 2.0], [2.0, 4.0]]),
    "rank_1_of_3": np.outer([1.0, 2.0, 3.0], [4.0, -5.0, 6.0]),
    "rank_2_of_3": np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),
    "zeros": np.zeros((3, 3)),
    "nilpotent": np.array([[0.0, 1.0], [0.0, 0.0]]),
}


@pytest.mark.parametrize("engine", ["py", "cpu", "opencl"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(SINGULAR))
def test_det_gradient_at_a_singular_matrix_is_the_adjugate(engine, dtype, case):
    # det(X) X^-1 (Theano's, PyTensor's) does not exist there; the adjugate does
    if engine == "opencl":
        pytest.importorskip("pyopencl")
    a = tt.matrix("a", dtype=dtype)
    f = function([a], grad(nlinalg.det(a), a), mode=Mode(linker=engine, optimizer="fast_run"))
    value = SINGULAR[case]
    got = f(value.astype(dtype))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, _det_fd_grad(value), atol=1e-5 if dtype == "float32" else 1e-8)


def test_multi_output_decompositions():
    x = tt.dmatrix("x")
    u, s, vt = nlinalg.svd(x)
    gu, gs, gvt = function([x], [u, s, vt])(RECT)
    assert gu.shape == (5, 5) and gvt.shape == (3, 3)
    np.testing.assert_allclose(gu[:, :3] * gs @ gvt, RECT, atol=1e-12)
    ru, _, rvt = function([x], list(nlinalg.svd(x, full_matrices=False)))(RECT)
    assert ru.shape == (5, 3) and rvt.shape == (3, 3)
    for mode, shapes in [("reduced", [(5, 3), (3, 3)]), ("complete", [(5, 5), (5, 3)])]:
        q, r = function([x], list(nlinalg.qr(x, mode)))(RECT)
        assert [q.shape, r.shape] == shapes
        np.testing.assert_allclose(q @ r, RECT, atol=1e-12)
    r_only = function([x], nlinalg.qr(x, "r"))(RECT)
    np.testing.assert_allclose(np.abs(r_only), np.abs(np.linalg.qr(RECT, "r")), atol=1e-12)
    w, v = function([x], list(nlinalg.eig(x)))(LOW)
    np.testing.assert_allclose(LOW @ v, v * w, atol=1e-10)
    np.testing.assert_allclose(sorted(w), sorted(np.diag(LOW)), atol=1e-12)
    w2 = function([x], slinalg.eigvalsh(x))(SPD)
    np.testing.assert_allclose(w2, np.linalg.eigvalsh(SPD))


def test_errors_say_what_is_wrong():
    x = tt.dmatrix("x")
    with pytest.raises(ValueError, match="Eig: the matrix has complex eigenvalues"):
        function([x], nlinalg.eig(x)[0])(np.array([[0.0, -1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="A_structure must be one of"):
        slinalg.Solve("banded")
    with pytest.raises(ValueError, match="QR: mode must be one of"):
        nlinalg.qr(x, "economic")  # ("raw" is Theano's and numpy's: issue 16 adds it)
    with pytest.raises(TypeError, match="must be a vector or a matrix"):
        slinalg.solve(x, tt.tensor3("b"))
    with pytest.raises(ValueError, match="must be square"):
        nlinalg.det(tt.TensorType("float64", shape=(2, 3))("r"))
    with pytest.raises(ValueError, match="trans must be"):
        slinalg.solve_triangular(x, x, trans=5)
    with pytest.raises(ValueError, match="invalid ord"):
        nlinalg.norm(x, 3)
    with pytest.raises(Exception, match="the gradient through u and vt"):
        grad(nlinalg.svd(x)[0].sum(), x)
    with pytest.raises(
        Exception, match=r"QR\{mode='reduced'\}.grad: gradient with respect to input 0"
    ):
        grad(nlinalg.qr(x)[1].sum(), x)


def test_expm_large_norm_and_float32_input():
    x = tt.dmatrix("x")
    m = np.array([[1.0, 20.0], [-3.0, 2.0]])
    got = function([x], slinalg.expm(x))(m)
    # exp of [[a, b], [-c, a]]-like blocks: checked by the eigendecomposition
    w, v = np.linalg.eig(m)
    want = (v @ np.diag(np.exp(w)) @ np.linalg.inv(v)).real
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_import_paths_and_instances_match_theano():
    assert isinstance(nlinalg.matrix_inverse, linalg.MatrixInverse)
    assert isinstance(slinalg.solve_lower_triangular, slinalg.Solve)
    assert slinalg.solve_lower_triangular.A_structure == "lower_triangular"
    assert tt.slinalg.cholesky is linalg.cholesky
    assert tt.nlinalg.extract_diag(np.eye(2)).eval().tolist() == [1.0, 1.0]


def test_slinalg_kron_is_theanos():
    # Theano 1.1.2's slinalg.kron: ranks summing to 2 or less are refused, and a matrix
    # with a vector gives a vector (numpy's kron a matrix).
    a, b = tt.dvector("a"), tt.dvector("b")
    with pytest.raises(
        TypeError, match=r"^kron: inputs dimensions must sum to 3 or more\. You passed 1 and 1\.$"
    ):
        slinalg.kron(a, b)
    m = tt.dmatrix("m")
    out = slinalg.kron(m, a)
    assert out.ndim == 1
    got = function([m, a], out)(np.array([[1.0, 2.0]]), np.array([1.0, 10.0]))
    assert got.tolist() == [1.0, 10.0, 2.0, 20.0]
    assert linalg.kron(m, a).ndim == 2


def test_cholesky_on_error_and_float16():
    x = tt.dmatrix("x")
    nan_chol = linalg.Cholesky(on_error="nan")
    assert str(nan_chol) == "Cholesky{lower=True, on_error='nan'}"
    assert np.isnan(function([x], nan_chol(x))(-np.eye(2))).all()
    with pytest.raises(np.linalg.LinAlgError):
        function([x], linalg.cholesky(x))(-np.eye(2))
    with pytest.raises(ValueError, match="on_error must be 'raise' or 'nan'"):
        linalg.Cholesky(on_error="warn")
    h = tt.TensorType("float16", shape=(None, None))("h")
    eye = np.eye(3, dtype="float16") * 2
    got = function([h], [slinalg.solve(h, h), nlinalg.det(h), nlinalg.matrix_inverse(h)])(eye)
    assert [g.dtype for g in got] == ["float16"] * 3
    np.testing.assert_allclose(got[0], np.eye(3))
    assert float(got[1]) == 8.0


def test_tensorinv_tensorsolve_lstsq():
    a3 = tt.dtensor3("a3")
    a = rng.standard_normal((6, 2, 3))
    inv = function([a3], nlinalg.tensorinv(a3, ind=1))(a)
    np.testing.assert_allclose(inv, np.linalg.tensorinv(a, ind=1))
    b = tt.dmatrix("b")
    sq = rng.standard_normal((2, 3, 6))
    rhs = rng.standard_normal((2, 3))
    got = function([a3, b], nlinalg.tensorsolve(a3, b))(sq, rhs)
    np.testing.assert_allclose(got, np.linalg.tensorsolve(sq, rhs))
    m, v = tt.dmatrix("m"), tt.dvector("v")
    outs = function([m, v], nlinalg.lstsq()(m, v, -1))(RECT, RECT @ np.ones(3))
    for g, w in zip(outs, np.linalg.lstsq(RECT, RECT @ np.ones(3), rcond=-1)):
        np.testing.assert_allclose(g, w, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_svds_of_a_non_finite_matrix_raise(bad, dtype):
    # numpy's SVD never returns for diag([inf, 1, 1]) (OpenBLAS's LAPACK) and raises
    # LinAlgError for NaN: the ops that take an SVD raise that error for both.
    m, v = tt.matrix("m", dtype=dtype), tt.vector("v", dtype=dtype)
    cases = [
        ("svd", nlinalg.svd(m, compute_uv=False), lambda a, b: np.linalg.svd(a)[1]),
        ("svd", nlinalg.svd(m)[1], lambda a, b: np.linalg.svd(a)[1]),
        ("svd", nlinalg.norm(m, 2), lambda a, b: np.linalg.norm(a, 2)),
        ("pinv", nlinalg.pinv(m), lambda a, b: np.linalg.pinv(a)),
        ("lstsq", nlinalg.lstsq()(m, v, -1)[0], lambda a, b: np.linalg.lstsq(a, b, -1)[0]),
    ]
    good = (RECT[:3, :3] + 3 * np.eye(3)).astype(dtype), np.arange(3, dtype=dtype)
    try:
        dask_backend.require()
        modes = ("FAST_RUN", Mode(linker="py"), "DASK")
    except ImportError:  # (the numpy 1.23 venv has no dask)
        modes = ("FAST_RUN", Mode(linker="py"))
    for mode in modes:
        for who, out, numpy_form in cases:
            f = function([m, v], out, mode=mode, on_unused_input="ignore")
            with pytest.raises(np.linalg.LinAlgError, match=f"{who} got a matrix with an inf"):
                f(np.diag([bad, 1, 1]).astype(dtype), good[1])
            np.testing.assert_allclose(f(*good), numpy_form(*good), rtol=1e-5)


def test_lstsq_refuses_wrong_ranks_when_the_graph_is_built():
    # Theano's TestLstsq wrong-shape tests: numpy refuses these when the function runs;
    # here make_node says which argument is wrong before anything is compiled.
    v, s, m = tt.dvector("v"), tt.dscalar("s"), tt.dmatrix("m")
    with pytest.raises(TypeError, match="must be a matrix, got 1 dimensions"):
        nlinalg.lstsq()(v, v, s)
    with pytest.raises(TypeError, match="lstsq: rcond must be a scalar"):
        nlinalg.lstsq()(m, v, v)
    with pytest.raises(TypeError, match="lstsq: b must be a vector or a matrix"):
        nlinalg.lstsq()(m, tt.dtensor3("b"), s)
    x = function([m, v, s], nlinalg.lstsq()(m, v, s)[0])(RECT, RECT @ np.ones(3), -1.0)
    np.testing.assert_allclose(x, np.ones(3), atol=1e-10)


def test_norm_takes_theanos_strings_and_raises_its_errors():
    v, m = tt.dvector("v"), tt.dmatrix("m")
    np.testing.assert_allclose(nlinalg.norm(v, "inf").eval({v: B_VEC}), np.abs(B_VEC).max())
    np.testing.assert_allclose(
        nlinalg.norm(m, "-inf").eval({m: RECT}), np.linalg.norm(RECT, -np.inf)
    )
    with pytest.raises(ValueError, match="out of bounds"):
        nlinalg.norm(tt.dscalar("s"))
    with pytest.raises(NotImplementedError, match="vectors and matrices only"):
        nlinalg.norm(tt.dtensor3("t"))
    with pytest.raises(ValueError, match="invalid ord 'x' for a vector"):
        nlinalg.norm(v, "x")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("structure", ["lower_triangular", "upper_triangular"])
def test_triangular_solve_numpy_fallback_matches_scipy(monkeypatch, structure, unit, dtype):
    """Where scipy is installed a triangular Solve (and Cholesky's gradient) goes through
    scipy's solve_triangular; without it, numpy's solve of the triangle: the same x."""
    a_val = (A + 4 * np.eye(4)).astype(dtype)
    b_val = B_MAT.astype(dtype)
    a, b = tt.matrix("a", dtype=dtype), tt.matrix("b", dtype=dtype)
    x = linalg.Solve(structure, unit_diagonal=unit)(a, b)
    c = tt.matrix("c", dtype=dtype)
    g = grad((slinalg.cholesky(c) * a_val).sum(), c)
    spd = (LOW @ LOW.T).astype(dtype)
    tri = np.tril(a_val) if structure == "lower_triangular" else np.triu(a_val)
    if unit:
        np.fill_diagonal(tri, 1)
    want = np.linalg.solve(tri.astype("float64"), b_val.astype("float64"))
    results = []
    for solver in (None, "scipy"):
        monkeypatch.setattr(linalg, "_TRIANGULAR_SOLVE", [None] if solver is None else [])
        if solver is not None:
            assert linalg._triangular_solver() is not None  # scipy is a test dependency
        f = function([a, b, c], [x, g], mode=Mode(linker="py", optimizer=None))
        xv, gv = f(a_val, b_val, spd)
        assert xv.dtype == dtype and gv.dtype == dtype
        np.testing.assert_allclose(xv, want, rtol=1e-4 if dtype == "float32" else 1e-10)
        results.append((xv, gv))
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=tol, atol=tol)


@pytest.mark.parametrize("solver", [None, "scipy"])
def test_triangular_solve_of_a_zero_diagonal_raises(monkeypatch, solver):
    monkeypatch.setattr(linalg, "_TRIANGULAR_SOLVE", [None] if solver is None else [])
    a, b = tt.dmatrix("a"), tt.dvector("b")
    f = function([a, b], slinalg.solve_lower_triangular(a, b), mode="FAST_COMPILE")
    singular = np.tril(np.ones((3, 3)))
    singular[1, 1] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match="(?i)singular"):
        f(singular, np.ones(3))
