"""The linear-algebra rewrites (``theano_dag.opt.rewrites.linalg``) and the hints they
read (``theano_dag.tensor.hints``, Theano's ``theano.sandbox.linalg``): structure of the
rewritten graphs and values against numpy, in float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.sandbox import linalg as sl
from theano_dag.tensor.hints import Hint, hints, is_positive, is_psd, is_symmetric, psd
from theano_dag.tensor.linalg import Cholesky, Det, MatrixInverse, Solve

DTYPES = ["float32", "float64"]
REF = Mode(linker="py", optimizer=None)
rng = np.random.default_rng(11)


def _ops(f):
    return [n.op for n in f.maker.fgraph.toposort()]


def _spd(n, dtype):
    m = rng.standard_normal((n, n))
    return (m @ m.T + n * np.eye(n)).astype(dtype)


def _tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-10}


def _same_values(inputs, out, values, dtype):
    got = theano_dag.function(inputs, out)(*values)
    want = theano_dag.function(inputs, out, mode=REF)(*values)
    assert got.dtype == want.dtype == out.dtype
    np.testing.assert_allclose(got, want, **_tol(dtype))
    return got


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_product_with_an_inverse_is_a_solve(dtype):
    a, b, v = tt.matrix("a", dtype), tt.matrix("b", dtype), tt.vector("v", dtype)
    av, bv, vv = _spd(4, dtype), rng.standard_normal((4, 3)).astype(dtype), np.ones(4, dtype)
    for inputs, out, values, want in [
        ([a, b], tt.dot(sl.matrix_inverse(a), b), [av, bv], np.linalg.solve(av, bv)),
        ([a, v], tt.dot(sl.matrix_inverse(a), v), [av, vv], np.linalg.solve(av, vv)),
        ([a, b], tt.dot(b.T, sl.matrix_inverse(a)), [av, bv], bv.T @ np.linalg.inv(av)),
        ([a, v], tt.dot(v, sl.matrix_inverse(a)), [av, vv], vv @ np.linalg.inv(av)),
    ]:
        f = theano_dag.function(inputs, out)
        ops = _ops(f)
        assert not any(isinstance(op, MatrixInverse) for op in ops)
        assert sum(isinstance(op, Solve) for op in ops) == 1
        got = _same_values(inputs, out, values, dtype)
        np.testing.assert_allclose(got, want, **_tol(dtype))


def test_a_solve_is_closer_than_the_inverse_on_an_ill_conditioned_matrix():
    a, b = tt.dmatrix("a"), tt.dvector("b")
    h = 1.0 / (np.arange(10)[:, None] + np.arange(10)[None, :] + 1.0)  # Hilbert, cond 1e13
    x_true = np.ones(10)
    f = theano_dag.function([a, b], tt.dot(sl.matrix_inverse(a), b))
    err = np.abs(h @ f(h, h @ x_true) - h @ x_true).max()
    err_inv = np.abs(h @ (np.linalg.inv(h) @ (h @ x_true)) - h @ x_true).max()
    assert err < err_inv / 10


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_transpose_of_an_inverse_is_the_inverse_of_the_transpose(dtype):
    a = tt.matrix("a", dtype)
    f = theano_dag.function([a], sl.matrix_inverse(a).T)
    (inv_node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, MatrixInverse)]
    assert inv_node.inputs[0].owner is not None  # inv of the transpose
    av = rng.standard_normal((3, 3)).astype(dtype) + 3 * np.eye(3, dtype=dtype)
    np.testing.assert_allclose(f(av), np.linalg.inv(av).T, **_tol(dtype))


def test_an_inverse_read_elsewhere_is_not_inverted_twice():
    a = tt.dmatrix("a")
    inv = sl.matrix_inverse(a)
    f = theano_dag.function([a], [inv.T, inv * 2])
    assert sum(isinstance(op, MatrixInverse) for op in _ops(f)) == 1
    av = np.array([[2.0, 1.0], [0.0, 4.0]])
    got_t, got_2 = f(av)
    np.testing.assert_allclose(got_t, np.linalg.inv(av).T)
    np.testing.assert_allclose(got_2, np.linalg.inv(av) * 2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
def test_a_solve_with_a_cholesky_factor_is_triangular(dtype, lower):
    a, b = tt.matrix("a", dtype), tt.matrix("b", dtype)
    c = Cholesky(lower=lower)(a)
    av, bv = _spd(4, dtype), rng.standard_normal((4, 2)).astype(dtype)
    for factor, structure in [
        (c, "lower_triangular" if lower else "upper_triangular"),
        (c.T, "upper_triangular" if lower else "lower_triangular"),
    ]:
        out = sl.solve(factor, b)
        f = theano_dag.function([a, b], out)
        (solve,) = [op for op in _ops(f) if isinstance(op, Solve)]
        assert solve.A_structure == structure
        _same_values([a, b], out, [av, bv], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_solve_with_a_psd_matrix_goes_through_its_cholesky_factor(dtype):
    a, b = tt.matrix("a", dtype), tt.vector("b", dtype)
    out = sl.solve(psd(a), b)
    f = theano_dag.function([a, b], out)
    ops = _ops(f)
    assert sum(isinstance(op, Cholesky) for op in ops) == 1
    assert sorted(op.A_structure for op in ops if isinstance(op, Solve)) == [
        "lower_triangular",
        "upper_triangular",
    ]
    assert not any(isinstance(op, Hint) for op in ops)  # gone in specialize
    av, bv = _spd(5, dtype), rng.standard_normal(5).astype(dtype)
    got = _same_values([a, b], out, [av, bv], dtype)
    np.testing.assert_allclose(got, np.linalg.solve(av, bv), **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_transpose_of_a_matrix_marked_symmetric_is_the_matrix(dtype):
    a = tt.matrix("a", dtype)
    out = Hint(symmetric=True)(a).T + 1
    f = theano_dag.function([a], out)
    assert not any(isinstance(op, tt.DimShuffle) for op in _ops(f))
    av = _spd(3, dtype)
    np.testing.assert_allclose(f(av), av.T + 1, **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_determinant_beside_a_cholesky_factor_of_a_symmetric_matrix(dtype):
    m = tt.matrix("m", dtype)
    a = tt.dot(m, m.T)
    out = [sl.det(a), sl.cholesky(a)]
    f = theano_dag.function([m], out)
    assert not any(isinstance(op, Det) for op in _ops(f))
    mv = rng.standard_normal((4, 4)).astype(dtype) + 2 * np.eye(4, dtype=dtype)
    got = f(mv)[0]
    assert got.dtype == dtype
    np.testing.assert_allclose(
        got, np.linalg.det(mv @ mv.T), rtol=1e-4 if dtype == "float32" else 1e-10
    )


def test_a_determinant_of_a_matrix_not_known_symmetric_stays():
    # A factor reads only the lower triangle: for a matrix not symmetric, prod(diag(L))**2
    # is the determinant of another matrix (Theano's rule made no such check).
    a = tt.dmatrix("a")
    f = theano_dag.function([a], [sl.det(a), sl.cholesky(a)])
    assert any(isinstance(op, Det) for op in _ops(f))
    av = np.array([[4.0, 3.0], [1.0, 5.0]])
    np.testing.assert_allclose(f(av)[0], 17.0)
    # nor beside a factor that gives NaN instead of raising
    s = tt.dmatrix("s")
    g = theano_dag.function([s], [sl.det(psd(s)), Cholesky(on_error="nan")(psd(s))])
    assert any(isinstance(op, Det) for op in _ops(g))


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_of_a_power(dtype):
    x = tt.vector("x", dtype)
    xv = np.array([-2.0, -0.5, 0.0, 0.5, 3.0, 1e30], dtype)
    for p in [4, 3, 0.5, -2]:
        out = tt.log(x**p)
        f = theano_dag.function([x], out)
        assert not any("pow" in str(op) for op in _ops(f)), p
        got = f(xv)
        assert got.dtype == dtype
        with np.errstate(all="ignore"):
            want = (
                (np.log(np.abs(xv)) * p) if p % 2 == 0 and p else np.log(xv.astype("float64") ** p)
            )
        finite = np.isfinite(want)
        # where x ** p overflows, the rewritten graph stays finite (and exact)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def test_log_of_a_power_with_an_exponent_of_zero_stays_zero():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.log(x**0))
    np.testing.assert_array_equal(f(np.array([0.0, -1.0, 2.0])), [0.0, 0.0, 0.0])


def test_log_of_a_power_with_an_infinite_exponent_is_left():
    # 1 ** inf is 1 (its log 0), inf * log(1) NaN
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.log(x**np.inf))
    with np.errstate(all="ignore"):
        want = np.log(np.array([1.0, 0.5, 2.0]) ** np.inf)
    np.testing.assert_array_equal(f(np.array([1.0, 0.5, 2.0])), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_of_a_product_of_squares_is_a_sum_of_logs(dtype):
    x = tt.matrix("x", dtype)
    out = tt.log(tt.prod(x**2, axis=1))
    f = theano_dag.function([x], out)
    assert not any("Prod" in type(op).__name__ for op in _ops(f))
    xv = np.array([[1e20, 1e20, 1e-3], [2.0, -3.0, 0.5]], dtype)
    got = f(xv)
    want = np.log(xv.astype("float64") ** 2).sum(axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5)  # prod overflows float32 here
    # a value that may be negative keeps its product
    g = theano_dag.function([x], tt.log(tt.prod(x, axis=1)))
    assert any("Prod" in type(op).__name__ for op in _ops(g))


def test_hints():
    a = tt.dmatrix("a")
    assert hints(psd(a)) == {"psd": True, "symmetric": True} and hints(a) == {}
    assert is_psd(psd(a)) and is_symmetric(psd(a)) and not is_psd(a)
    x = tt.dvector("x")
    assert is_positive(x**2) and is_positive(tt.sqr(x)) and is_positive(Hint(positive=True)(x))
    assert not is_positive(x**3) and not is_positive(x)
    assert Hint(psd=True, symmetric=True) == Hint(symmetric=True, psd=True)
    # a hint is its input's value, with the identity's gradient and shape
    h = psd(a)
    av = _spd(3, "float64")
    np.testing.assert_array_equal(h.eval({a: av}), av)
    g = theano_dag.grad((h * h).sum(), a)
    np.testing.assert_allclose(theano_dag.function([a], g)(av), 2 * av)
    np.testing.assert_array_equal(theano_dag.function([a], h.shape)(av), [3, 3])
    f = theano_dag.function([a], h * 2, mode="FAST_COMPILE")  # kept there: its perform
    np.testing.assert_array_equal(f(av), 2 * av)


def test_spectral_radius_bound():
    x = tt.dmatrix("x")
    xv = _spd(4, "float64")
    radius = np.abs(np.linalg.eigvalsh(xv)).max()
    bounds = [float(sl.spectral_radius_bound(x, k).eval({x: xv})) for k in (1, 3, 5)]
    assert all(b >= radius * (1 - 1e-12) for b in bounds)
    assert bounds[0] >= bounds[1] >= bounds[2] and bounds[2] < radius * 1.05
    with pytest.raises(TypeError, match="expected a matrix"):
        sl.spectral_radius_bound(tt.dvector(), 2)
    with pytest.raises(TypeError, match="must be an int"):
        sl.spectral_radius_bound(x, 2.0)
    with pytest.raises(ValueError, match="must be positive"):
        sl.spectral_radius_bound(x, 0)


def test_theanos_module_level_switch_and_join_ops():
    # Theano's users recognise a switch and a join by their module-level ops.
    x = tt.dvector("x")
    assert tt.switch(x > 0, x, 0).owner.op == tt.switch
    assert tt.stacklists([[x[0], x[1]], [x[1], x[0]]]).owner.op == tt.join_
    np.testing.assert_array_equal(tt.switch(x > 0, x, 0).eval({x: np.array([-1.0, 2.0])}), [0, 2])
