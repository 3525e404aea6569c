"""Special functions (gammaln, gamma, psi, erfinv, erfcx, log1mexp, xlogx, ...) and
logsumexp: values against scipy/numpy in float32 and float64 on the reference and CPU
engines, gradients by finite differences, the C kernels that compute them."""

import sys

import numpy as np
import pytest
from tensor_helpers import inferred_shapes

import theano_dag
from theano_dag import function
from theano_dag import tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu.native.ckernel import c_code
from theano_dag.gradient.verify import verify_grad
from theano_dag.tensor import xlogx

sps = pytest.importorskip("scipy.special")

POSITIVE = np.array([0.2, 0.7, 1.5, 3.0, 7.25])
UNIT = np.array([-0.9, -0.3, 0.1, 0.5, 0.95])
NEGATIVE = np.array([-30.0, -2.0, -0.5, -1e-3, -1e-12])

# name: (tensor function, reference, inputs)
UNARY = {
    "gammaln": (tt.gammaln, sps.gammaln, POSITIVE),
    "gamma": (tt.gamma, sps.gamma, POSITIVE),
    "psi": (tt.psi, sps.psi, POSITIVE),
    "tri_gamma": (tt.tri_gamma, lambda x: sps.polygamma(1, x), POSITIVE),
    "erfinv": (tt.erfinv, sps.erfinv, UNIT),
    "erfcinv": (tt.erfcinv, sps.erfcinv, UNIT + 1),
    "erfcx": (tt.erfcx, sps.erfcx, np.array([-1.0, 0.0, 2.0, 30.0, 1e4])),
    "erfcx_deriv": (
        tt.erfcx_deriv,
        lambda x: 2 * x * sps.erfcx(x) - 2 / np.sqrt(np.pi),
        np.array([-1.0, 0.0, 0.5, 2.0, 3.0]),
    ),
    "log1mexp": (tt.log1mexp, lambda x: np.log(-np.expm1(x)), NEGATIVE),
    "log_erfc": (tt.log_erfc, lambda x: np.log(sps.erfc(x)), np.array([-3.0, -0.2, 0.1, 2.0, 8.5])),
    "log1pexp": (tt.log1pexp, lambda x: np.logaddexp(0, x), np.array([-800.0, -1, 0, 2, 800])),
    "xlogx": (xlogx.xlogx, lambda x: sps.xlogy(x, x), np.array([0.0, 0.1, 1.0, 4.0])),
}
NO_GRAD = {"tri_gamma"}
ENGINES = [Mode(linker="py"), Mode(linker="cpu")]


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values(name, dtype, mode):
    fn, ref, values = UNARY[name]
    x = tt.vector("x", dtype=dtype)
    out = fn(x)
    assert out.dtype == dtype
    got = function([x], out, mode=mode)(values.astype(dtype))
    want = ref(values.astype(dtype).astype("float64"))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(set(UNARY) - NO_GRAD))
def test_unary_grad(name):
    fn, _, values = UNARY[name]
    # away from 0: xlogx's derivative is -inf there, and log1mexp is defined for x < 0 only
    values = values[np.abs(values) > 1e-2]
    verify_grad(fn, [values.astype("float64")], rng=np.random.default_rng(0))


def test_erfcx_second_derivative_in_the_tail():
    # d/dx (2 x erfcx(x) - 2/sqrt(pi)) = 2 erfcx(x) + 2 x erfcx'(x) cancels as erfcx'
    # did; grad of grad is erfcx_deriv of order 2: about 2 / (sqrt(pi) x**3), 0 at +inf
    x = tt.dvector("x")
    g = theano_dag.grad(tt.sum(tt.erfcx(x)), x)
    h = theano_dag.grad(tt.sum(g), x)
    v = np.array([1.0, 3.0, 1e4, 1e8, np.inf])
    got = function([x], h)(v)
    near = v[:2]
    y = sps.erfcx(near)
    want_near = 2 * y + 2 * near * (2 * near * y - 2 / np.sqrt(np.pi))
    np.testing.assert_allclose(got[:2], want_near, rtol=1e-13)
    far = v[2:4]
    want_far = 2 / (np.sqrt(np.pi) * far**3) * (1 - 3 / far**2)
    np.testing.assert_allclose(got[2:4], want_far, rtol=1e-15)
    assert got[4] == 0
    verify_grad(lambda t: tt.erfcx_deriv(t, 2), [np.array([-1.0, 0.5, 2.0, 4.0, 30.0])])


def test_erfcx_gradient_of_a_complex_input():
    # the continued fraction is for real x: a complex one takes the recurrence (the
    # first version cast it to a real, dropping the imaginary part)
    x = tt.zvector("x")
    g = theano_dag.grad(tt.sum(tt.real(tt.erfcx(x))), x)
    v = np.array([1 + 1j, -0.5 + 2j, 3 - 0.25j])
    got = function([x], g)(v)
    np.testing.assert_allclose(got, np.conj(2 * v * sps.erfcx(v) - 2 / np.sqrt(np.pi)))


def test_tanh_gradient_of_a_complex_input():
    # sech2's real formula 4 e / (1 + e)**2, e = exp(-2|x|), takes |x| as the modulus
    # for a complex x: the complex path is 1 / cosh(x)**2
    x = tt.zvector("x")
    g = theano_dag.grad(tt.sum(tt.real(tt.tanh(x))), x)
    v = np.array([0.5 + 0.3j, -1 + 2j, 3 - 0.25j])
    np.testing.assert_allclose(function([x], g)(v), np.conj(1 / np.cosh(v) ** 2))


def test_erfcx_deriv_order_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="ErfcxDeriv: order must be a positive integer, got 0"):
        tt.erfcx_deriv(tt.dvector(), order=0)


def test_binary_and_composed_values_and_grads():
    a, b = tt.dvectors("a", "b")
    va, vb = np.array([0.0, 0.5, 2.0]), np.array([0.0, 3.0, 0.25])
    f = function([a, b], [xlogx.xlogy0(a, b), tt.betaln(a + 1, b + 1)])
    xl, bl = f(va, vb)
    np.testing.assert_allclose(xl, [0.0, 0.5 * np.log(3.0), 2.0 * np.log(0.25)])
    np.testing.assert_allclose(bl, sps.betaln(va + 1, vb + 1))
    verify_grad(xlogx.xlogy0, [va[1:], vb[1:]], rng=np.random.default_rng(1))
    verify_grad(tt.betaln, [va + 1, vb + 1], rng=np.random.default_rng(2))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logsumexp(dtype):
    m = tt.matrix("m", dtype=dtype)
    v = np.array([[1000.0, 1000.0, -5.0], [-np.inf, -np.inf, -np.inf]], dtype=dtype)
    outs = [tt.logsumexp(m), tt.logsumexp(m, axis=1), tt.logsumexp(m, axis=0, keepdims=True)]
    assert [o.dtype for o in outs] == [dtype] * 3
    got = function([m], outs)(v)
    for g, axis, keep in zip(got, [None, 1, 0], [False, False, True]):
        want = sps.logsumexp(v.astype("float64"), axis=axis, keepdims=keep)
        np.testing.assert_allclose(g, want, rtol=1e-6)
    small = np.array([[0.5, -1.0, 2.0], [0.25, 0.0, 0.0]])
    verify_grad(lambda x: tt.logsumexp(x, axis=1), [small], rng=np.random.default_rng(3))
    g = theano_dag.grad(tt.logsumexp(m, axis=1).sum(), m)
    np.testing.assert_allclose(
        function([m], g)(v[:1]), [[0.5, 0.5, 0.0]], atol=1e-6
    )  # finite where exp(1000) would overflow


@pytest.mark.parametrize(
    "dtype, out",
    [("int8", "float32"), ("uint16", "float32"), ("int64", "float64"), ("bool", "float32")],
)
def test_logsumexp_of_integers_in_the_float_exp_gives(dtype, out):
    # log(sum(exp(x))) of integers: exp's float (Theano's rule), not an error.
    m = tt.matrix("m", dtype=dtype)
    y = tt.logsumexp(m, axis=1)
    assert y.dtype == out
    v = np.array([[1, 0, 1], [0, 0, 0]], dtype=dtype)
    np.testing.assert_allclose(function([m], y)(v), sps.logsumexp(v, axis=1), rtol=1e-6)


@pytest.mark.skipif(not config.cxx, reason="no C compiler")
def test_cpu_kernels_compute_the_libm_functions_in_c():
    x = tt.dvector("x")
    f = function(
        [x], tt.gammaln(x) + tt.gamma(x) * xlogx.xlogx(x) - tt.log1mexp(-x), mode="FAST_RUN"
    )
    src = c_code(f)
    for name in ("lgamma(", "tgamma(", "log1p(", "expm1("):
        assert name in src
    want = sps.gammaln(POSITIVE) + sps.gamma(POSITIVE) * POSITIVE * np.log(POSITIVE)
    want -= np.log(-np.expm1(-POSITIVE))
    np.testing.assert_allclose(f(POSITIVE), want, rtol=1e-12)


def test_without_scipy_gammaln_falls_back_and_psi_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.special", None)  # import fails as if absent
    x = tt.dvector("x")
    got = function([x], tt.gammaln(x), mode=Mode(linker="py"))(np.array([0.0, 0.5, 4.0]))
    np.testing.assert_allclose(got, [np.inf, np.log(np.sqrt(np.pi)), np.log(6.0)])
    with pytest.raises(ImportError, match=r"psi computes with scipy.special.psi: pip install"):
        function([x], tt.psi(x), mode=Mode(linker="py"))(np.array([1.0]))


def test_theano_test_helpers():
    from theano_dag.compile.debugmode import str_diagnostic
    from theano_dag.tensor.basic import _allclose

    assert tt.xlogx is xlogx and xlogx.xlogy0 is theano_dag.tensor.math.xlogy0
    assert tt.verify_grad is theano_dag.gradient.verify.verify_grad
    assert _allclose(np.float32(1), np.float32(1 + 2e-6)) and not _allclose(1.0, 1.001)
    text = str_diagnostic(np.zeros(2), np.array([0.0, np.nan]), 1e-5, 1e-8)
    assert "n_inf, n_nan" in text
    assert "Value    : (2,) float64 (8,) nan nan 0 1" in text  # one NaN counted
    assert "1 of 2 elements differ beyond the tolerances" in text
    # Shapes that do not broadcast: the description without the differences.
    assert str_diagnostic(np.zeros(2), np.zeros(3), None, None).endswith("rtol, atol: 1e-05 1e-08")
    assert theano_dag.config.unittests__rseed == "666"


def test_theano_misc_paths():
    from theano_dag.misc.safe_asarray import _asarray

    assert _asarray([1], dtype="floatX").dtype == theano_dag.config.floatX
    s = tt._shared(np.ones(2), name="s")
    assert s.type.ndim == 1 and s.name == "s"


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_erfc_beyond_erfc_underflow(dtype, mode):
    # erfc underflows at 26.5 (float64), 9.2 (float32); log(erfcx(x)) - x**2 does not
    x = tt.vector("x", dtype=dtype)
    points = np.array([9.5, 12.0, 30.0, 1000.0, 1e10])
    got = function([x], tt.log_erfc(x), mode=mode)(points.astype(dtype))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, np.log(sps.erfcx(points)) - points**2, rtol=1e-6)


def test_log_erfc_and_logaddexp_shapes_and_grads():
    m = tt.dmatrix("m")
    r = tt.drow("r")
    v = np.arange(6.0).reshape(2, 3)
    assert inferred_shapes(tt.log_erfc(m), {m: v}) == [(2, 3)]
    assert inferred_shapes(tt.logaddexp(m, r), {m: v, r: v[:1]}) == [(2, 3)]
    verify_grad(tt.log_erfc, [np.array([-2.0, 0.3, 4.0, 12.0])], rng=np.random.default_rng(4))
    verify_grad(
        tt.logaddexp,
        [np.array([-2.0, 0.3, 4.0]), np.array([1.0, 0.3, -7.0])],
        rng=np.random.default_rng(5),
    )


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logaddexp_values(dtype, mode):
    x, y, z = (tt.vector(n, dtype=dtype) for n in "xyz")
    a = np.array([1000.0, -1000.0, 0.0, -np.inf, np.inf, 3.0], dtype=dtype)
    b = np.array([1000.0, -1000.0, -40.0, -np.inf, np.inf, np.nan], dtype=dtype)
    f = function([x, y, z], [tt.logaddexp(x, y), tt.logaddexp(x, y, z)], mode=mode)
    two, three = f(a, b, a)
    assert two.dtype == three.dtype == dtype
    np.testing.assert_allclose(two, np.logaddexp(a, b), rtol=1e-6)
    np.testing.assert_allclose(three, np.logaddexp(np.logaddexp(a, b), a), rtol=1e-6)
    with pytest.raises(TypeError, match="at least two arguments"):
        tt.logaddexp(x)
