"""Scalar ops at the points where an engine once gave a wrong value, on every engine
(the reference, the CPU engine with numpy and with C kernels, OpenCL), float32 and
float64, against mpmath or numpy; and a trimmed run of ``tools/scalar_sweep.py``, which
sweeps every elementwise op over its whole domain: the class of each value (finite,
+-0, +-inf, NaN) as the reference's wherever numpy's is, and the error in ulps within a
bound per op of numpy's own."""

import importlib.util
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
import scipy.special

import theano_dag
import theano_dag.tensor as tt
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.opencl.context import opencl_available

ROOT = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("scalar_sweep", ROOT / "tools" / "scalar_sweep.py")
sweep = importlib.util.module_from_spec(_spec)
sys.modules["scalar_sweep"] = sweep  # its dataclasses look their module up by name
_spec.loader.exec_module(sweep)

OCL_OK, OCL_WHY = opencl_available()
ENGINES = [
    "py",
    "cpu",
    "cpu_c",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]
FLOATS = ("float32", "float64")


def run(engine, build, *values):
    """``build(*symbols)`` compiled on ``engine`` and applied to ``values`` (arrays). The
    result is multiplied by an input of ones, so that the op runs fused into a Composite:
    what the CPU engine runs in C."""
    syms = [tt.TensorType(v.dtype.name, shape=(None,))(f"x{k}") for k, v in enumerate(values)]
    out = build(*syms)
    one = tt.TensorType(out.dtype, shape=(None,))("one")
    make_mode, build_mode = sweep.ENGINES[engine]
    with ckernel.compile_mode(build_mode):
        f = theano_dag.function(syms + [one], out * one, mode=make_mode())
        return np.asarray(f(*values, np.ones(values[0].shape, out.dtype)))


def ulps(got, want, dtype):
    """|got - want| in ulps of ``dtype`` at ``want`` (mpf or float values)."""
    want = np.array([float(w) for w in want])
    return np.abs(got.astype("float64") - want) / np.spacing(np.abs(want).astype(dtype))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_tri_gamma_far_below_zero_returns_and_is_right(engine, dtype):
    # scipy's polygamma(1, x) ran for seconds at -1e8 and did not return at -1e15 + 0.5
    far = [-1e15 + 0.5, -1e8 - 0.5] if dtype == "float64" else [-4194303.5, -100000.5]
    x = np.array([*far, -12345.25, -2.5], dtype)
    got = run(engine, tt.tri_gamma, x)
    with mpmath.workdps(50):
        want = [
            (mpmath.pi / mpmath.sin(mpmath.pi * v)) ** 2 - mpmath.polygamma(1, 1 - v)
            for v in map(mpmath.mpf, x.astype("float64"))
        ]
    assert got.dtype == dtype
    assert np.all(ulps(got, want, dtype) <= 4), (got, want)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_erfcx_at_the_largest_floats_and_where_x_squared_rounds(engine, dtype):
    # the C tail was (1 + s) / (x * sqrt(pi)), and x * sqrt(pi) overflowed to inf: 0;
    # exp(x * x) * erfc(x) multiplied x * x's rounding by x * x (282 ulps at x = 23.35)
    big = float(np.finfo(dtype).max)
    mid = [23.347040363333335, 20.5, 5.5, -6.652959823608398, -25.0]
    if dtype == "float32":
        mid = [8.9, 7.5, -6.652959823608398, -9.3]
    x = np.array([big, big / 3, *mid], dtype)
    got = run(engine, tt.erfcx, x)

    def exact(v):  # mpmath's erfc overflows far out, where the series' 2 terms are exact
        if v > 1e10:
            return (1 - 1 / (2 * v * v)) / (v * mpmath.sqrt(mpmath.pi))
        return mpmath.exp(v * v) * mpmath.erfc(v)

    with mpmath.workdps(50):
        want = [exact(v) for v in map(mpmath.mpf, x.astype("float64"))]
    assert np.all(got[:2] > 0)
    assert np.all(ulps(got, want, dtype) <= 16), (got, want)


def _erfcx_deriv_exact(x, order):
    """The ``order``-th derivative of erfcx at ``x`` (mpf), at 60 digits: its asymptotic
    series far out (8 terms: exact to x**-16 relative), mpmath's derivative below."""
    if x == mpmath.inf:  # the limit, 0 (mpmath before 1.4 sums the series to NaN there)
        return mpmath.mpf(0)
    if x > 1e4:
        s = mpmath.fsum(
            (-1) ** k * mpmath.factorial(order + 2 * k) / (mpmath.factorial(k) * (2 * x) ** (2 * k))
            for k in range(8)
        )
        return 2 / mpmath.sqrt(mpmath.pi) * (-2) ** order * s / (2 * x) ** (order + 1)
    with mpmath.workdps(80):  # the derivative cancels about 2 log10(x) digits
        return mpmath.diff(lambda t: mpmath.exp(t * t) * mpmath.erfc(t), x, order)


def _erfcx_deriv_points(dtype):
    big = float(np.finfo(dtype).max)
    far = [1e4, 1e10, 1e19, 3e38, big, np.inf]
    if dtype == "float64":
        far += [1e100, 1.3e154, 1e200]  # 1.3e154: a subnormal derivative
    near = [-26.0, -5.0, -1.0, -0.0, 0.0, 0.5, 1.2, 1.49, 1.5, 2.0, 2.59, 2.6, 3.0, 8.0, 300.0]
    return np.array(near + far, dtype)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("order", [1, 2])
def test_erfcx_deriv_against_mpmath(engine, dtype, order):
    # 2 x erfcx(x) - 2/sqrt(pi), erfcx's gradient, cancelled: float32 kept no digit past
    # x ~ 300, float64 past 1e4 (a sign wrong, values 1e20 times too large), NaN at +inf
    x = _erfcx_deriv_points(dtype)
    got = run(engine, lambda v: tt.erfcx_deriv(v, order), x)
    with np.errstate(over="ignore"):
        want = np.array([float(_erfcx_deriv_exact(mpmath.mpf(float(v)), order)) for v in x])
        rounded = want.astype(dtype)
    finite = np.isfinite(rounded)
    np.testing.assert_array_equal(got[~finite], rounded[~finite])  # -26: -inf in float32
    # the direct form below the continued fraction's threshold (float64: 2.6) loses a few
    # bits: at most 22 ulps (order 1) and 174 (order 2) over [-5, 8] in steps of 0.05
    bound = {1: 24, 2: 200}[order]
    err = ulps(got[finite], [mpmath.mpf(w) for w in want[finite]], dtype)
    assert np.all(err <= bound), list(zip(x[finite], got[finite], want[finite], err))
    assert got[-1 if dtype == "float32" else -4] == 0  # the limit at +inf
    assert np.signbit(got[x == np.inf][0]) == (order % 2 == 1)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_erfcx_gradient_far_in_the_tail(engine, dtype):
    # normal_lcdf's log(erfcx(-z / sqrt(2))) differentiated by NUTS far in the tail: the
    # gradient 2 x erfcx(x) - 2/sqrt(pi) was 0 or of the wrong sign past 1e4, NaN at +inf
    x = tt.TensorType(dtype, shape=(None,))("x")
    g = theano_dag.grad(tt.sum(tt.log(tt.erfcx(x))), x)
    make_mode, build_mode = sweep.ENGINES[engine]
    with ckernel.compile_mode(build_mode):
        f = theano_dag.function([x], g, mode=make_mode())
    # (not at +inf: the chain rule's erfcx'(x) / erfcx(x) is -0 / 0 there)
    v = np.array([3.0, 300.0, 1e4, 1e8, 1e15], dtype)
    got = f(v)
    # d/dx log erfcx(x) = erfcx'(x) / erfcx(x) = -1 / (x + 1 / (x + 1.5 / (x + ...)))
    with mpmath.workdps(60):
        want = [
            _erfcx_deriv_exact(m, 1) / (mpmath.exp(m * m) * mpmath.erfc(m))
            if m < 1e4
            else -1 / (m + 1 / (m + mpmath.mpf(1.5) / m))  # exact to about x**-6 relative
            for m in map(mpmath.mpf, v.astype("float64"))
        ]
    assert np.all(ulps(got, want, dtype) <= 16), (got, want)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_log1mexp_gradient_where_it_is_subnormal(engine, dtype):
    # -1 / expm1(-x) was -1 / inf = -0 where exp(-x) overflows, the derivative -exp(x)
    # still a (subnormal) number: from x = -709.8 (float64), -88.7 (float32)
    far = [-710.0, -730.0, -745.0] if dtype == "float64" else [-88.8, -95.0, -103.0]
    x = np.array([*far, -40.0, -1.0, -1e-3, -1e-30, -np.inf], dtype)
    sym = tt.TensorType(dtype, shape=(None,))("x")
    make_mode, build_mode = sweep.ENGINES[engine]
    with ckernel.compile_mode(build_mode):
        f = theano_dag.function(
            [sym], theano_dag.grad(tt.sum(tt.log1mexp(sym)), sym), mode=make_mode()
        )
    got = f(x)
    with mpmath.workdps(50):
        want = [-1 / mpmath.expm1(-mpmath.mpf(float(v))) for v in x[:-1]]
    assert np.all(got[:3] < 0), got
    assert np.all(ulps(got[:-1], want, dtype) <= 4), (got, want)
    assert got[-1] == 0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("other", ["int8", "uint8", "int16", "int32", "uint64"])
def test_gradients_beside_an_integer_operand_in_the_output_float(engine, dtype, other):
    # arctan2's x * x + y * y and pow's y - 1 were computed in the integer's own dtype:
    # uint8 128 * 128 wrapped to 0 (the derivative 128 / y**2 where 1 / 128 is right),
    # int8 -128 - 1 to 127. Theano's formulas wrap the same.
    info = np.iinfo(other)
    k = np.array([info.min, info.max, 128 if info.max >= 128 else 100, 0], dtype=other)
    x = np.array([0.75, -1.25, 0.5, 1.5], dtype)
    sym = tt.TensorType(dtype, shape=(None,))("x")
    ks = tt.TensorType(other, shape=(None,))("k")
    make_mode, build_mode = sweep.ENGINES[engine]
    with ckernel.compile_mode(build_mode):
        f = theano_dag.function(
            [sym, ks],
            [
                theano_dag.grad(tt.sum(tt.arctan2(sym, ks)), sym),
                theano_dag.grad(tt.sum(tt.arctan2(ks, sym)), sym),
                theano_dag.grad(tt.sum(tt.pow(sym, ks)), sym),
                theano_dag.grad(tt.sum(sym ** tt.constant(np.asarray(info.min, other))), sym),
            ],
            mode=make_mode(),
        )
    got = f(x, k)
    with mpmath.workdps(50):
        xs, kv = [mpmath.mpf(float(v)) for v in x], [mpmath.mpf(int(v)) for v in k]
        want = [
            [b / (b * b + a * a) for a, b in zip(xs, kv)],
            [-b / (a * a + b * b) for a, b in zip(xs, kv)],
            [b * a ** (b - 1) for a, b in zip(xs, kv)],
            [kv[0] * a ** (kv[0] - 1) for a in xs],  # a constant exponent, its minimum
        ]
    for g, w in zip(got, want):
        assert g.dtype == dtype
        w = np.array([float(v) for v in w]).astype(dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_sech2_where_tanh_rounds_to_one(engine, dtype):
    # 1 - tanh(x)**2 is 0 from |x| = 9 (float32; 19 in float64), where the derivative,
    # about 4 exp(-2|x|), is a normal number to |x| = 43 (float32; 354 in float64)
    far = [9.5, 20.0, 43.0, 51.0] if dtype == "float32" else [19.5, 40.0, 354.0, 372.0]
    x = np.array([*far, *(-v for v in far), 0.0, 1e-30, 0.5, -2.0, 5.0, np.inf, -np.inf], dtype)
    sym = tt.TensorType(dtype, shape=(None,))("x")
    make_mode, build_mode = sweep.ENGINES[engine]
    with ckernel.compile_mode(build_mode):
        f = theano_dag.function([sym], tt.sech2(sym), mode=make_mode())
    got = f(x)
    with mpmath.workdps(50):
        want = [1 / mpmath.cosh(mpmath.mpf(float(v))) ** 2 for v in x[:-2]]
    assert np.all(got[:-2] > 0), got
    assert np.all(ulps(got[:-2], want, dtype) <= 4), (got, want)
    assert list(got[-2:]) == [0, 0]


def test_tanh_gradient_reads_the_output_not_the_input():
    # 1 - tanh(x)**2 of the output, as every peer's: sech2(x) would keep a tanh layer's
    # pre-activation alive until the backward pass (docs/optimization.md)
    x = tt.dvector("x")
    y = tt.tanh(x)
    g = theano_dag.grad(tt.sum(y * y), x)
    f = theano_dag.function([x], g, mode=theano_dag.Mode(linker="py").excluding("fusion"))
    fg = f.maker.fgraph
    (tanh_node,) = [n for n in fg.toposort() if n.op.scalar_op.name == "tanh"]
    assert [n for n, _ in fg.clients[fg.inputs[0]]] == [tanh_node]
    assert not [n for n in fg.toposort() if n.op.scalar_op.name == "sech2"]
    xv = np.array([0.3, -2.0])
    np.testing.assert_allclose(f(xv), 2 * np.tanh(xv) * (1 - np.tanh(xv) ** 2), rtol=1e-14)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_log_erfc_of_zero_is_plus_zero(engine, dtype):
    # log1p(-erf(0)) is -0.0; log(erfc(0)) = log(1) is +0 (numpy's, scipy's)
    got = run(engine, tt.log_erfc, np.array([0.0, -0.0, 1e-30], dtype))
    assert got[0] == 0 and not np.signbit(got[0]) and not np.signbit(got[1])
    assert got[2] < 0


@pytest.mark.parametrize("engine", ENGINES)
def test_angle_of_a_float32_is_float64_pi(engine):
    # numpy's angle of a float32 is float32's pi, 9e-8 from the float64 output's
    got = run(engine, tt.angle, np.array([-1.0, -0.0, 2.0], "float32"))
    assert got.dtype == "float64"
    np.testing.assert_array_equal(got, [np.pi, np.pi, 0.0])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32"])
def test_round_half_away_from_zero_of_integers_is_the_value(engine, dtype):
    # the numpy implementation subtracted bools (a TypeError)
    x = np.array([0, 1, 1, 0] if dtype in ("bool", "uint8") else [-3, 0, 5, 7]).astype(dtype)
    got = run(engine, tt.round_half_away_from_zero, x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_fma_rounds_twice_as_numpy(engine, dtype):
    # OpenCL's fma() (and a contracted a * b + c) rounds once: fma(2, max, -inf) was -inf
    big = np.finfo(dtype).max
    e = 2.0**-12 if dtype == "float32" else 2.0**-30
    x = np.array([2, -3, 1 + e], dtype)
    y = np.array([big, big, 1 + e], dtype)
    z = np.array([-np.inf, np.inf, -(1 + 2 * e)], dtype)
    got = run(engine, tt.fma, x, y, z)
    with np.errstate(all="ignore"):
        want = x * y + z
    np.testing.assert_array_equal(got, want)  # NaN, NaN, 0 (once rounded: e**2)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_log1p_of_subnormals_and_its_users(engine, dtype):
    # PoCL's log1p gave 0 for a subnormal x: log1p(-tiny) was +0, softplus(-745.13) 0
    tiny = float(np.finfo(dtype).smallest_subnormal)
    x = np.array([tiny, -tiny, 1e-30], dtype)
    got = run(engine, tt.log1p, x)
    np.testing.assert_array_equal(got, x)
    assert np.signbit(got[1])
    far = np.array([-745.13 if dtype == "float64" else -103.97], dtype)
    with mpmath.workdps(50):
        e = mpmath.exp(mpmath.mpf(float(far[0])))
    want = np.array([float(e)], dtype)
    np.testing.assert_array_equal(run(engine, tt.softplus, far), want)
    np.testing.assert_array_equal(run(engine, tt.log1mexp, far), -want)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_int_div_and_mod_by_minus_one(engine, dtype):
    # INT_MIN % -1 and INT_MIN / -1 overflow, undefined in C: PoCL gave INT_MIN % -1 = -1
    lo = np.iinfo(dtype).min
    x = np.array([lo, lo + 1, -7, 0, 7], dtype)
    y = np.full(5, -1, dtype)
    with np.errstate(all="ignore"):
        want_div, want_mod = np.floor_divide(x, y), np.mod(x, y)
    np.testing.assert_array_equal(run(engine, tt.int_div, x, y), want_div)
    np.testing.assert_array_equal(run(engine, tt.mod, x, y), want_mod)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_gamma_underflows_with_its_sign(engine, dtype):
    # gamma(x < 0) has the sign of (-1)**floor(x); PoCL's tgamma(-180.25) was +0, and
    # scipy's gamma (the numpy engines') of -22315985849.5357 -0.0
    far = -22315985849.535698 if dtype == "float64" else -99999.5
    x = np.array([-180.25, -181.25, -170.5, -0.5, far], dtype)
    got = run(engine, tt.gamma, x)
    with mpmath.workdps(50):
        want = np.array([float(mpmath.gamma(mpmath.mpf(float(v)))) for v in x[:-1]] + [0], dtype)
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=0)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("engine", ENGINES)
def test_gammaln_of_subnormals_is_finite(engine):
    # scipy's gammaln (the numpy engines') of 5e-324 is inf; lgamma's (C, OpenCL) 744.44
    x = np.array([5e-324, -5e-324, 1e-310, 1e-200])
    got = run(engine, tt.gammaln, x)
    with mpmath.workdps(50):
        want = [mpmath.log(abs(mpmath.gamma(mpmath.mpf(float(v))))) for v in x]
    assert np.all(ulps(got, want, "float64") <= 4), (got, want)


# ---- the trimmed sweep ----------------------------------------------------------------

SWEEP_DTYPES = ("float32", "float64", "int8", "int32")


def test_every_elemwise_scalar_op_is_swept_or_skipped_with_a_reason():
    specs = {s.name for s in sweep.specs()}
    ops = set(sweep.scalar_ops())
    assert ops <= specs | set(sweep.SKIPPED)
    assert {"exp", "erfcx", "int_div", "pow", "clip", "switch", "xlogy0"} <= specs


@pytest.fixture(scope="module")
def references():
    """The trimmed inputs of every op and their references, once for all engines."""
    groups = {}
    for spec in sweep.specs():
        for dtype in spec.dtypes:
            if dtype not in SWEEP_DTYPES:
                continue
            built = sweep.build(spec, dtype, tag=len(groups.get(dtype, ())))
            if built is None:
                continue
            syms, out = built
            arrays = sweep.inputs(spec, dtype, 3)
            ref = sweep.reference(spec, arrays, out.dtype)
            groups.setdefault(dtype, {})[spec.name] = (spec, syms, out, arrays, ref)
    return groups


@pytest.mark.parametrize("engine", ENGINES)
def test_trimmed_sweep(engine, references):
    bad = []
    for dtype, group in references.items():
        items = {n: (syms, out, arrays) for n, (_, syms, out, arrays, _) in group.items()}
        got = sweep.run_engine(engine, items)
        for name, (spec, _, out, arrays, ref) in group.items():
            val, _ = got[name]
            assert not isinstance(val, Exception), f"{name} {dtype} on {engine}: {val!r}"
            assert str(val.dtype) == out.dtype, f"{name} {dtype} on {engine}: {val.dtype}"
            res = sweep.compare(spec, dtype, engine, arrays, val, ref, out.dtype)
            if res.bad(spec.ulps):
                bad.append(sweep.format_result(res, spec.ulps))
    assert not bad, "\n".join(bad)


#: Graphs whose value's sign of zero (seen through a division, arctan2 or a pole of
#: gamma) a rewrite that drops a zero term or negates for ``0 - x`` would change:
#: ``-0.0 + 0.0`` is ``0.0`` and ``0.0 - 0.0`` is ``0.0``, not ``-(0.0)``.
SIGNED_ZERO_GRAPHS = {
    "1 / (x + 0)": (lambda x, y: 1 / (x + 0.0), lambda x, y: 1 / (x + 0.0)),
    "1 / (0 - x)": (lambda x, y: 1 / (0.0 - x), lambda x, y: 1 / (0.0 - x)),
    "1 / (x + y + 0)": (lambda x, y: 1 / (x + y + 0.0), lambda x, y: 1 / (x + y + 0.0)),
    "1 / (zeros_like(x) + x)": (
        lambda x, y: 1 / (tt.zeros_like(x) + x),
        lambda x, y: 1 / (np.zeros_like(x) + x),
    ),
    "1 / (x * 0)": (lambda x, y: 1 / (x * 0.0), lambda x, y: 1 / (x * 0.0)),
    "1 / (0 / (x - 2))": (lambda x, y: 1 / (0.0 / (x - 2)), lambda x, y: 1 / (0.0 / (x - 2))),
    "arctan2(x + 0, -1)": (
        lambda x, y: tt.arctan2(x + 0.0, -1.0),
        lambda x, y: np.arctan2(x + 0.0, -1.0),
    ),
    "gamma(0 - x)": (lambda x, y: tt.gamma(0.0 - x), lambda x, y: scipy.special.gamma(0.0 - x)),
    # an integer's zero converts to 0.0: 0.0 - 0 is 0.0, -(0.0) is -0.0
    "1 / (0 - int8)": (
        lambda x, y: 1 / (tt.constant(np.zeros((), x.dtype)) - tt.cast(tt.gt(x, 5), "int8")),
        lambda x, y: 1 / (0.0 - (x > 5).astype("int8")),
    ),
    # GCC 12 folds -(double)i + 0.0 into -(double)i: the C kernel writes it otherwise
    "1 / (-float(int8) + 0)": (
        lambda x, y: 1 / (-tt.cast(tt.gt(x, 5), x.dtype) + tt.constant(np.zeros((), x.dtype))),
        lambda x, y: 1 / (-(x > 5).astype(x.dtype) + 0.0),
    ),
    "1 / (x - 0)": (lambda x, y: 1 / (x - 0.0), lambda x, y: 1 / (x - 0.0)),
    "1 / (x + -0.0)": (lambda x, y: 1 / (x + np.float32(-0.0)), lambda x, y: 1 / (x + -0.0)),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_without_nonfinite_unsafe_the_sign_of_a_zero_is_numpys(engine, dtype):
    # FAST_RUN drops x + 0 and makes 0 - x a negation, as Theano's and PyTensor's do
    # (docs/optimization.md, nonfinite_unsafe); excluded, every engine gives IEEE's sign.
    x = np.array([-0.0, 0.0, 1.0, -3.0], dtype=dtype)
    y = np.array([-0.0, -0.0, 4.0, 0.5], dtype=dtype)
    make_mode, build_mode = sweep.ENGINES[engine]
    xs, ys = tt.vector("x", dtype=dtype), tt.vector("y", dtype=dtype)
    differs = set()
    for name, (graph, numpys) in SIGNED_ZERO_GRAPHS.items():
        with np.errstate(all="ignore"):
            want = np.asarray(numpys(x, y)).astype(dtype)
        for safe in (True, False):
            mode = make_mode().excluding("nonfinite_unsafe") if safe else make_mode()
            with ckernel.compile_mode(build_mode):
                f = theano_dag.function(
                    [xs, ys], graph(xs, ys), mode=mode, on_unused_input="ignore"
                )
                got = np.asarray(f(x, y))
            assert got.dtype == want.dtype, name
            if safe:  # the signs exactly, the finite values within float32's last bit
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=name)
                np.testing.assert_allclose(got, want, rtol=3e-7, err_msg=name)
            elif not np.array_equal(got, want, equal_nan=True):
                differs.add(name)
    # ... and the default mode's rewrites are the ones the docs list.
    assert differs == {
        "1 / (x + 0)",
        "1 / (0 - x)",
        "1 / (x + y + 0)",
        "1 / (zeros_like(x) + x)",
        "1 / (x * 0)",
        "1 / (0 / (x - 2))",
        "arctan2(x + 0, -1)",
        "gamma(0 - x)",
        "1 / (0 - int8)",
        "1 / (-float(int8) + 0)",
    }
