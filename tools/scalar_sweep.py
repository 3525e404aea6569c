"""Every elementwise scalar op over its whole domain, on every engine, against an
independent reference.

For each scalar op that ``theano_dag.tensor`` wraps in an ``Elemwise`` (enumerated from
the ops themselves, so that a new one is not forgotten: one without an entry in
:data:`SPECS` or :data:`SKIPPED` is an error), in each input dtype it takes, the sweep
builds inputs over the whole range (log-spaced magnitudes of both signs from the smallest
subnormal to the largest finite number, +-0, +-inf, nan, a dense stretch of [-40, 40],
and the op's special points), compiles the op on every engine (the reference engine, the
CPU engine with numpy kernels and with C kernels, OpenCL where a platform is found), and
compares each result with

- mpmath at 50 digits rounded to the output dtype, for the functions of analysis (where
  an input is 0, infinite or NaN, or mpmath has no value, numpy's/scipy's value in
  float64 stands in: it names the sign of a zero and the IEEE conventions);
- numpy, for the ops whose semantics numpy defines (integer division and ``mod``'s
  signs, rounding, comparisons with NaN, clip, wrapping integer arithmetic).

Per op, dtype and engine it reports the largest error in ulps where the reference is
finite, the points where the class of the value (finite, +inf, -inf, NaN, and the sign of
a zero) differs from the reference, and where it differs from what numpy/scipy itself
gives (the bar: numpy's own error for the same op in the same dtype).

Each op's result is multiplied by an input of ones, which is exact and makes the fusion
rewrite put the op into a ``Composite``: the CPU engine runs a plain ``Elemwise`` with
numpy's ufunc, and only a ``Composite`` with the op's C expression.

Run ``python tools/scalar_sweep.py`` (``--quick`` for the trimmed sweep of the test,
``--op exp --op log`` for a few ops, ``--engines py,cpu_c``).

>>> [s.name for s in specs() if s.name in ("exp", "int_div")]
['exp', 'int_div']
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import mpmath
import numpy as np
import scipy.special as sps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

import theano_dag  # noqa: E402
from theano_dag import scalar as ts  # noqa: E402
from theano_dag.compile.mode import Mode  # noqa: E402
from theano_dag.engines.cpu.linker import CPULinker  # noqa: E402
from theano_dag.engines.cpu.native import ckernel  # noqa: E402
from theano_dag.engines.opencl.context import opencl_available  # noqa: E402
from theano_dag.scalar.basic import ScalarOp  # noqa: E402
from theano_dag.tensor import TensorType  # noqa: E402
from theano_dag.tensor.elemwise import Elemwise  # noqa: E402

mpmath.mp.dps = 50
mp = mpmath

#: name -> (mode, the C kernels' build mode: "off" runs numpy kernels, "sync" builds C)
ENGINES = {
    "py": (lambda: Mode(linker="py", optimizer="fast_run"), "off"),
    "cpu": (lambda: Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run"), "off"),
    "cpu_c": (lambda: Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run"), "sync"),
    "opencl": (lambda: Mode(linker="opencl", optimizer="fast_run"), "off"),
}
FLOATS = ("float32", "float64")
INTS = ("bool", "int8", "uint8", "int32", "int64")


@dataclasses.dataclass
class Spec:
    """How to check one scalar op.

    ``exact(*mpf)`` is the mathematical function (mpmath), or None where numpy defines
    the semantics; ``bar(*arrays)`` is numpy's/scipy's function for the same op: the
    reference where ``exact`` is None or has no value, and the bar otherwise.
    ``dtypes`` are the input dtypes to try; ``points`` extra inputs (unary ops) or the
    values of the binary grid; ``domain(*arrays)`` keeps the points that count (a
    boolean mask); ``ulps`` the error allowed beyond numpy's own (the test's bound).
    """

    name: str
    arity: int
    exact: Callable | None
    bar: Callable
    dtypes: tuple = FLOATS
    points: tuple = ()
    domain: Callable | None = None
    ulps: float = 4.0
    grid: tuple | None = None  # binary: the values each input takes (default: GRID)


# ---- references ---------------------------------------------------------------------


def _nan_if_complex(r):
    if isinstance(r, mpmath.mpc):
        return r.real if r.imag == 0 else mpmath.mpf("nan")
    return r


def _mp(fn):
    """An exact function of mpf arguments, complex results (outside the real domain)
    taken as NaN."""

    def call(*xs):
        return _nan_if_complex(fn(*xs))

    call.__name__ = getattr(fn, "__name__", "exact")
    return call


def _gamma(x):
    if x > 200:  # beyond float64's range; mpmath would compute all of its digits
        return mp.inf
    return mp.gamma(x)


def _gammaln(x):
    if x < 0 and x == mp.floor(x):
        return mp.inf
    return mp.log(abs(_gamma(x))) if abs(x) < 150 else mp.re(mp.loggamma(x))


def _trigamma(x):
    # mpmath's polygamma takes minutes far from 0: the asymptotic series (exact to
    # x**-9 relative) there, and the reflection formula for large negative x
    if x > 1e6:
        return 1 / x + 1 / (2 * x**2) + 1 / (6 * x**3) - 1 / (30 * x**5) + 1 / (42 * x**7)
    if x < -1e6:
        if x == mp.floor(x):
            return mp.inf
        return (mp.pi / mp.sin(mp.pi * x)) ** 2 - _trigamma(1 - x)
    return mp.polygamma(1, x)


def _sigmoid(x):
    return 1 / (1 + mp.exp(-x))


def _erfcinv(y):
    # mpmath has no erfcinv: scipy's float64 value refined by two Newton steps at 50 digits
    if not 0 < y < 2:
        raise ValueError
    x = mp.mpf(float(sps.erfcinv(float(y))))
    for _ in range(2):
        x -= (mp.erfc(x) - y) / (-2 / mp.sqrt(mp.pi) * mp.exp(-x * x))
    return x


def _log_erfc(x):
    # erfc(x) = 1 - erf(x) rounds to 1 at 50 digits for |x| < 1e-50: log1p(-erf) there
    return mp.log1p(-mp.erf(x)) if abs(x) < 0.5 else mp.log(mp.erfc(x))


def _erfcx_deriv(x):
    if x > 1e4:  # its asymptotic series (exact to x**-10 relative); mpmath's erfc cancels
        v = 1 / (2 * x * x)
        return -1 / (mp.sqrt(mp.pi) * x * x) * (1 - 3 * v + 15 * v * v - 105 * v**3)
    with mp.workdps(70):  # 2 x erfcx(x) - 2/sqrt(pi) cancels 2 log10(x) digits
        return 2 * x * mp.exp(x * x) * mp.erfc(x) - 2 / mp.sqrt(mp.pi)


def _bar_erfcx_deriv(x):
    # the formula is inf * 0 at +inf, where the limit is -0 (the reference's class there)
    with np.errstate(all="ignore"):
        return np.where(np.isposinf(x), -0.0, 2 * x * sps.erfcx(x) - 2 / np.sqrt(np.pi))


def _bar_sech2(x):
    with np.errstate(over="ignore"):  # cosh overflows where sech**2 is 0
        return 1 / np.cosh(x) ** 2


def _log1mexp(x):
    # log(-expm1(x)) loses exp(x) at 50 digits below -115: log1p(-exp(x)) there
    if x < -1:
        return mp.log1p(-mp.exp(x))
    return mp.log(-mp.expm1(x)) if x < 0 else (mp.ninf if x == 0 else mp.nan)


def _xlogx(x):
    return x * mp.log(x) if x > 0 else mp.nan


def _xlogy0(x, y):
    return x * mp.log(y) if y > 0 else mp.nan


def _bce(o, t):
    a = 0 if t == 0 else t * mp.log(o)  # a term of weight 0 is 0, also where log is -inf
    b = 0 if t == 1 else (1 - t) * mp.log(1 - o)
    return -(a + b)


def _bce_grad(o, t):
    return -t / o + (1 - t) / (1 - o)


def _probabilities(o, t):
    return (o >= 0) & (o <= 1) & (t >= 0) & (t <= 1)


def _sigmoid_bce(z, t):
    # t * softplus(-z) + (1 - t) * softplus(z) = softplus(z) - t z, which does not cancel
    # 300 digits for a target far from [0, 1] (softplus(z) = z + softplus(-z))
    return mp.log1p(mp.exp(-abs(z))) + (z - t * z if z > 0 else -t * z)


def _int_div_exact(x, y):
    return mp.floor(x / y)


def _logaddexp(x, y):
    m = max(x, y)
    return m + mp.log(mp.exp(x - m) + mp.exp(y - m))


def _exp_sub(x, y):
    return mp.mpf(1) if x == y else mp.exp(x - y)


def _bar_exp_sub(x, y):
    # numpy's exp(x - y), with 1 at equal infinities (inf - inf: NaN), the op's convention
    with np.errstate(all="ignore"):
        return np.where(x == y, np.ones_like(x), np.exp(x - y))


def _pow(x, y):
    if x < 0 and y != mp.floor(y):
        return mp.nan
    if abs(y) > 1e4:  # mpmath's integer powers take seconds; exp-log is exact enough here
        odd = x < 0 and y == mp.floor(y) and int(mp.fmod(y, 2)) != 0
        r = mp.exp(y * mp.log(abs(x)))
        return -r if odd else r
    return mp.power(x, y)


def _bar_softplus(x):
    return np.logaddexp(np.zeros_like(x), x)


def _bar_softsign(x):
    # numpy's x / (1 + |x|) is inf / inf at +-inf, where the limit is +-1
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(x), np.sign(x), x / (1 + np.abs(x)))


def _bar_log1mexp(x):
    with np.errstate(all="ignore"):
        return np.where(x < -np.log(2), np.log1p(-np.exp(x)), np.log(-np.expm1(x)))


def _bar_log_erfc(x):
    with np.errstate(all="ignore"):
        return np.log(sps.erfc(x))


def _bar_xlogy0(x, y):
    with np.errstate(all="ignore"):
        return np.where(x == 0, np.zeros_like(x), x * np.log(y))


def _bar_bce(o, t):
    with np.errstate(all="ignore"):
        a = np.where(t == 0, 0, t * np.log(o))
        return 0 - a - np.where(t == 1, 0, (1 - t) * np.log1p(-o))


def _bar_bce_grad(o, t):
    with np.errstate(all="ignore"):
        return np.where(t == 0, 0, -t / o) + np.where(t == 1, 0, (1 - t) / (1 - o))


def _bar_sigmoid_bce(z, t):
    # softplus(z) - t z, the linear part apart from the bounded one (no cancellation for
    # 0 <= t <= 1); a target of 0 or 1 takes only its own term
    with np.errstate(all="ignore"):
        mixed = np.where(z > 0, (1 - t) * z + np.logaddexp(0, -z), np.logaddexp(0, z) - t * z)
        return np.where(t == 0, np.logaddexp(0, z), np.where(t == 1, np.logaddexp(0, -z), mixed))


def _bar_gammaln(x):
    # numpy/scipy's log|gamma| with C99's lgamma(-inf) = +inf (scipy gives -inf)
    return np.where(np.isneginf(x), np.inf, sps.gammaln(x))


def _bar_i0(x):
    return sps.i0(x)


def _bar_round_away(x):
    return ts.basic.round_half_away_from_zero_vec(x)


def _bar_chi2sf(x, k):
    return sps.gammaincc(k / 2, x / 2)


# Special points (unary inputs) by theme.
_POLES = tuple(
    v for k in range(1, 21) for v in (-k, -k + 0.5, -k + 1e-9, -k - 1e-9, -k + 2**-40)
) + (-170.5, -171.5, -180.25, -1e15 + 0.5, 171.6, 171.7, 35.0, 35.1, 1e-300)
_NEAR_1 = (1.0, 1 + 2**-52, 1 - 2**-53, 1 + 2**-23, 1 - 2**-24, 1 + 1e-10, 1 - 1e-10, 2.0)
_NEAR_PM1 = _NEAR_1 + tuple(-v for v in _NEAR_1)
_TRIG = (1e6, 1e15, 1e22, 2.0**60, 1e300, 3e38, np.pi, np.pi / 2, 2 * np.pi, 1e5 * np.pi, 355.0)
_EXP_EDGES = (709.78, 709.79, 710.0, 88.72, 88.73, 89.0, -745.13, -745.2, -103.97, -104.0, -87.3)
_TIES = tuple(k + 0.5 for k in range(-6, 7)) + (
    0.49999999999999994,
    -0.49999999999999994,
    0.49999997,
    2.0**52 + 1,
    2.0**51 + 0.5,
    2.0**23 - 0.5,
    2.0**22 + 0.5,
    4503599627370495.5,
)
_ERF_EDGES = (26.0, 26.5, 26.55, 27.3, 9.0, 9.19, 9.2, 10.06, 0.4999, 0.5, -0.5, -26.0, -9.5)
_LOG1MEXP = (-1e-20, -1e-10, -np.log(2), -np.log(2) * (1 + 2**-50), -0.6931471, -1e-300, -40.0)
_ERFINV = (0.999999, 0.9999999999999999, 1 - 2**-24, 1e-300, 1.9999999, 2.0, 1e-20, 0.5)
_ERFINV = _ERFINV + tuple(-v for v in _ERFINV)


def _ultra_fast(x):
    # an approximation of the sigmoid: (1 + tanh(x / 2)) / 2 with tanh's [3/2] Pade
    # approximant, u (27 + u**2) / (27 + 9 u**2), which reaches +-1 at u = x / 2 = +-3
    # and is held there
    u = max(mp.mpf(-3), min(mp.mpf(3), x / 2))
    return (1 + u * (27 + u**2) / (27 + 9 * u**2)) / 2


def _bar_ultra_fast(x):
    u = np.clip(np.asarray(x, dtype="float64") / 2, -3, 3)
    return 0.5 + 0.5 * np.clip(u * (27 + u**2) / (27 + 9 * u**2), -1, 1)


def _float_bar(name):
    return getattr(np, name)


def _unary(name, exact, bar, points=(), ulps=4.0, dtypes=FLOATS + INTS):
    return Spec(name, 1, _mp(exact) if exact else None, bar, dtypes, points, ulps=ulps)


def _binary(name, exact, bar, dtypes=FLOATS, ulps=4.0, grid=None, domain=None):
    return Spec(
        name, 2, _mp(exact) if exact else None, bar, dtypes, ulps=ulps, grid=grid, domain=domain
    )


_NUMPY_INT_BINARY = FLOATS + ("bool", "int8", "uint8", "int32", "int64")
# Grids of the special functions of two arguments: mpmath's series need a bounded order.
_ORDER_GRID = (0.0, 0.5, 1.0, 2.5, 10.0, 37.5, -0.5, -3.0, np.inf, np.nan)
_ARG_GRID = (0.0, 1e-30, 0.1, 1.0, 2.0, 5.0, 30.0, 120.0, -1.0, np.inf, np.nan)
_GAMMAINC_K = (1e-3, 0.5, 1.0, 2.5, 10.0, 100.0, 0.0, -1.0, np.inf, np.nan)


def _specs():
    one = mp.mpf(1)
    return [
        _unary("exp", mp.exp, np.exp, _EXP_EDGES),
        _unary("exp2", lambda x: mp.power(2, x), np.exp2, (128.0, 127.99, -149.0, 1024.0, -1074.0)),
        _unary("log", mp.log, np.log, _NEAR_1),
        _unary("log2", lambda x: mp.log(x, 2), np.log2, _NEAR_1),
        _unary("log10", mp.log10, np.log10, _NEAR_1),
        _unary("log1p", mp.log1p, np.log1p, _NEAR_PM1),
        _unary("expm1", mp.expm1, np.expm1, _EXP_EDGES),
        _unary("sqrt", mp.sqrt, np.sqrt),
        _unary("sqr", lambda x: x * x, np.square),
        _unary("reciprocal", lambda x: one / x, np.reciprocal),
        _unary("sin", mp.sin, np.sin, _TRIG),
        _unary("cos", mp.cos, np.cos, _TRIG),
        _unary("tan", mp.tan, np.tan, _TRIG),
        _unary("arcsin", mp.asin, np.arcsin, _NEAR_PM1),
        _unary("arccos", mp.acos, np.arccos, _NEAR_PM1),
        _unary("arctan", mp.atan, np.arctan),
        _unary("sinh", mp.sinh, np.sinh, _EXP_EDGES),
        _unary("cosh", mp.cosh, np.cosh, _EXP_EDGES),
        _unary("tanh", mp.tanh, np.tanh),
        # where tanh rounds to 1 (9 and 19), where exp(-2|x|) underflows (52, 372.5)
        _unary("sech2", lambda x: 1 / mp.cosh(x) ** 2, _bar_sech2, (9.1, 19.1, 52.0, 372.5)),
        _unary("arcsinh", mp.asinh, np.arcsinh),
        _unary("arccosh", mp.acosh, np.arccosh, _NEAR_1),
        _unary("arctanh", mp.atanh, np.arctanh, _NEAR_PM1),
        _unary("deg2rad", lambda x: x * mp.pi / 180, np.deg2rad),
        _unary("rad2deg", lambda x: x * 180 / mp.pi, np.rad2deg),
        _unary("sigmoid", _sigmoid, sps.expit, _EXP_EDGES),
        _unary("softplus", lambda x: mp.log1p(mp.exp(x)), _bar_softplus, _EXP_EDGES),
        _unary("softsign", lambda x: x / (1 + abs(x)), _bar_softsign, (1.8e19, 1.4e154)),
        _unary("ultra_fast_sigmoid", _ultra_fast, _bar_ultra_fast, (6.0, -6.0, -5.99, 1e19, 1e155)),
        _unary("erf", mp.erf, sps.erf, _ERF_EDGES),
        _unary("erfc", mp.erfc, sps.erfc, _ERF_EDGES),
        _unary("erfcx", lambda x: mp.exp(x * x) * mp.erfc(x), sps.erfcx, _ERF_EDGES),
        # the bar (2 x erfcx(x) - 2/sqrt(pi)) cancels for large x; the op is within 22 ulps
        # (the reference engine's scipy erfcx is 440 ulps off near -25, as erfcx's own)
        _unary("erfcx_deriv", _erfcx_deriv, _bar_erfcx_deriv, (2.6, 1.5, 1e4, 1e20), ulps=24),
        _unary("log_erfc", _log_erfc, _bar_log_erfc, _ERF_EDGES, ulps=8),
        _unary("erfinv", mp.erfinv, sps.erfinv, _ERFINV),
        _unary("erfcinv", _erfcinv, sps.erfcinv, _ERFINV),
        _unary("gamma", _gamma, sps.gamma, _POLES),
        _unary("gammaln", _gammaln, _bar_gammaln, _POLES),
        _unary("psi", mp.digamma, sps.psi, _POLES),
        # scipy's polygamma(1, x) does not return below about -1e9: the op's own reflection
        _unary("tri_gamma", _trigamma, ts.math._trigamma, _POLES),
        _unary("j0", lambda x: mp.besselj(0, x), sps.j0, (2.404825557695773, 1e4)),
        _unary("j1", lambda x: mp.besselj(1, x), sps.j1, (3.8317059702075125, 1e4)),
        _unary("i0", lambda x: mp.besseli(0, x), _bar_i0, (700.0, 713.9, 714.0, 100.0)),
        _unary("i1", lambda x: mp.besseli(1, x), sps.i1, (700.0, 713.9, 714.0, 100.0)),
        _unary("log1mexp", _log1mexp, _bar_log1mexp, _LOG1MEXP),
        _unary("xlogx", _xlogx, lambda x: sps.xlogy(x, x)),
        # semantics of numpy's
        _unary("neg", None, np.negative),
        _unary("abs", None, np.abs),
        _unary("sgn", None, np.sign),
        _unary("floor", None, np.floor, _TIES),
        _unary("ceil", None, np.ceil, _TIES),
        _unary("trunc", None, np.trunc, _TIES),
        _unary("round_half_to_even", None, np.round, _TIES),
        _unary("round_half_away_from_zero", None, _bar_round_away, _TIES),
        _unary("isnan", None, np.isnan),
        _unary("isinf", None, np.isinf),
        _unary("invert", None, np.invert, dtypes=INTS),
        _unary("identity", None, lambda x: x),
        _unary("conj", None, np.conj),
        _unary("real", None, np.real),
        _unary("imag", None, np.imag),
        _unary("angle", None, lambda x: np.angle(x.astype("float64"))),  # float64 out
        # binary
        _binary("add", None, np.add, _NUMPY_INT_BINARY),
        _binary("sub", None, np.subtract, _NUMPY_INT_BINARY),
        _binary("mul", None, np.multiply, _NUMPY_INT_BINARY),
        _binary("true_div", None, np.true_divide, _NUMPY_INT_BINARY),
        _binary("int_div", None, np.floor_divide, _NUMPY_INT_BINARY),
        _binary("mod", None, np.mod, _NUMPY_INT_BINARY),
        _binary("maximum", None, np.maximum, _NUMPY_INT_BINARY),
        _binary("minimum", None, np.minimum, _NUMPY_INT_BINARY),
        _binary("lt", None, np.less, _NUMPY_INT_BINARY),
        _binary("gt", None, np.greater, _NUMPY_INT_BINARY),
        _binary("le", None, np.less_equal, _NUMPY_INT_BINARY),
        _binary("ge", None, np.greater_equal, _NUMPY_INT_BINARY),
        _binary("eq", None, np.equal, _NUMPY_INT_BINARY),
        _binary("neq", None, np.not_equal, _NUMPY_INT_BINARY),
        _binary("and_", None, np.bitwise_and, INTS),
        _binary("or_", None, np.bitwise_or, INTS),
        _binary("xor", None, np.bitwise_xor, INTS),
        _binary("second", None, lambda x, y: y, _NUMPY_INT_BINARY),
        # numpy's power for integers (negative exponents raise there: left out)
        _binary(
            "pow",
            _pow,
            np.power,
            _NUMPY_INT_BINARY,
            domain=lambda x, y: (y >= 0) if y.dtype.kind in "iub" else np.ones(y.shape, bool),
        ),
        _binary("arctan2", mp.atan2, np.arctan2),
        _binary("logaddexp", _logaddexp, np.logaddexp),
        _binary("exp_sub", _exp_sub, _bar_exp_sub),
        _binary("xlogy0", _xlogy0, _bar_xlogy0),
        # probabilities and targets in [0, 1] (the formulas' terms cancel outside)
        _binary("binary_crossentropy", _bce, _bar_bce, domain=_probabilities),
        _binary("binary_crossentropy_grad", _bce_grad, _bar_bce_grad, domain=_probabilities),
        # targets are probabilities: outside [0, 1] its two terms cancel (as the formula's)
        _binary(
            "sigmoid_binary_crossentropy",
            _sigmoid_bce,
            _bar_sigmoid_bce,
            domain=lambda z, t: (t >= 0) & (t <= 1),
        ),
        # No C or OpenCL form: every engine runs scipy's, which is the reference (mpmath's
        # series for these ran for minutes at some points of the grid).
        _binary("jv", None, sps.jv, grid=(_ORDER_GRID, _ARG_GRID)),
        _binary("iv", None, sps.iv, grid=(_ORDER_GRID, _ARG_GRID)),
        _binary("gammainc", None, sps.gammainc, grid=(_GAMMAINC_K, _ARG_GRID)),
        _binary("gammaincc", None, sps.gammaincc, grid=(_GAMMAINC_K, _ARG_GRID)),
        _binary("chi2sf", None, _bar_chi2sf, grid=(_ARG_GRID, _GAMMAINC_K)),
        # Theano's clip: numpy's minimum(maximum(x, lo), hi), but lo where x < lo > hi
        Spec(
            "clip",
            3,
            None,
            lambda x, lo, hi: np.where((x < lo) & (lo > hi), lo, np.minimum(np.maximum(x, lo), hi)),
            FLOATS,
        ),
        Spec("fma", 3, None, lambda x, y, z: x * y + z, FLOATS),
        Spec("switch", 3, None, lambda c, x, y: np.where(c, x, y), FLOATS),
    ]


#: Scalar ops the sweep leaves out, and why.
SKIPPED = {
    "complex": "a complex output: no C or OpenCL form, every engine runs numpy on the host",
    "complex_from_polar": "a complex output: no C or OpenCL form, numpy on the host",
}


def scalar_ops() -> dict:
    """Every scalar op that ``theano_dag.tensor`` wraps in an ``Elemwise`` (and the
    ternary ``clip`` and ``switch`` it builds on demand), by name."""
    ops = {}
    for module in (theano_dag.tensor, theano_dag.tensor.nnet):
        for v in vars(module).values():
            if isinstance(v, Elemwise) and not v.inplace_items:
                ops[v.scalar_op.name] = v.scalar_op
    for name in (
        "clip",
        "switch",
        "logaddexp",
        "xlogy0",
        "xlogx",
        "fma",
        "softsign",
        "erfcx_deriv",
        "exp_sub",
        "sigmoid_binary_crossentropy",
        "binary_crossentropy",
        "binary_crossentropy_grad",
    ):
        ops[name] = getattr(ts, name)
    return {n: op for n, op in ops.items() if isinstance(op, ScalarOp)}


def specs(names=None) -> list:
    """The specs of the ops swept (all, or those ``names``); an op of
    :func:`scalar_ops` with neither a spec nor an entry in :data:`SKIPPED` is an error."""
    out = _specs()
    known = {s.name for s in out} | set(SKIPPED)
    missing = sorted(set(scalar_ops()) - known)
    if missing:
        raise LookupError(f"scalar ops without a sweep spec or a reason to skip: {missing}")
    if names:
        out = [s for s in out if s.name in names]
    return out


# ---- inputs -------------------------------------------------------------------------


def _float_values(dtype, n):
    """Log-spaced magnitudes of both signs from the smallest subnormal to the largest
    finite value, a dense irregular stretch of [-40, 40], and the IEEE specials."""
    fi = np.finfo(dtype)
    with np.errstate(over="ignore"):  # the last one rounds past the largest: clamped
        mags = np.geomspace(float(fi.smallest_subnormal), float(fi.max), n)
    mags = np.minimum(mags, float(fi.max))
    lin = np.linspace(-40.0, 40.0, 2 * n + 1) + 0.01370703
    specials = [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        float(fi.max),
        -float(fi.max),
        float(fi.smallest_subnormal),
        -float(fi.smallest_subnormal),
        float(fi.tiny),
        -float(fi.tiny),
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        1e-8,
        -1e-8,
    ]
    return np.concatenate([mags, -mags, lin, specials])


def _int_values(dtype, n):
    if dtype == "bool":
        return np.array([False, True])
    info = np.iinfo(dtype)
    if info.bits <= 8:
        return np.arange(info.min, info.max + 1)
    base = [info.min, info.min + 1, -(2**31), -1000, -7, -2, -1, 0, 1, 2, 3, 7, 1000]
    base += [2**31 - 1, info.max - 1, info.max]
    rng = np.random.default_rng(0)
    rand = rng.integers(info.min, info.max, size=n, endpoint=True)
    return np.array([v for v in base if info.min <= v <= info.max] + list(rand))


def unary_inputs(spec, dtype, n):
    """The input values of a unary op in ``dtype`` (``n``: points per decade band)."""
    if dtype in FLOATS:
        vals = np.concatenate([_float_values(dtype, n), np.asarray(spec.points, "float64")])
        with np.errstate(over="ignore"):
            return (vals.astype(dtype),)
    return (_int_values(dtype, 4 * n).astype(dtype),)


_GRID = (
    0.0,
    -0.0,
    np.inf,
    -np.inf,
    np.nan,
    1.0,
    -1.0,
    0.5,
    -0.5,
    2.0,
    -2.0,
    3.0,
    -3.0,
    2.5,
    -7.25,
    0.1,
    -0.1,
    1e-5,
    1e5,
    123.456,
    -123.456,
    700.0,
    -745.5,
    1e30,
    -1e30,
    1e-30,
    "max",
    "-max",
    "sub",
    "-sub",
    "tiny",
)


def _grid_value(v, dtype):
    fi = np.finfo(dtype)
    return {
        "max": fi.max,
        "-max": -fi.max,
        "sub": fi.smallest_subnormal,
        "-sub": -fi.smallest_subnormal,
        "tiny": fi.tiny,
    }.get(v, v)


def nary_inputs(spec, dtype, n):
    """The inputs of an op of 2 or 3 arguments: every pair (triple) of a grid of
    values, and random pairs of log-uniform magnitudes and random signs."""
    rng = np.random.default_rng(1)
    if dtype in FLOATS:
        if spec.grid is not None:
            axes = [np.asarray(g, "float64") for g in spec.grid]
        else:
            g = np.array([float(_grid_value(v, dtype)) for v in _GRID])
            if n < 8 and spec.arity == 2:  # trimmed: the IEEE specials, every other value
                g = np.concatenate([g[:5], g[5::2]])
            if spec.arity == 3:
                g = g[[0, 1, 2, 3, 4, 5, 6, 9, 12, 14, 26, 28]]
            axes = [g] * spec.arity
        mesh = [a.ravel() for a in np.meshgrid(*axes, indexing="ij")]
        if spec.grid is None and spec.arity == 2:
            fi = np.finfo(dtype)
            lo, hi = np.log10(float(fi.smallest_subnormal)), np.log10(float(fi.max))
            for k in range(2):
                mag = 10 ** rng.uniform(lo, hi, size=8 * n)
                near = rng.uniform(-50, 50, size=8 * n)
                sign = rng.choice([-1.0, 1.0], size=8 * n)
                mesh[k] = np.concatenate([mesh[k], sign * mag, near])
        if spec.name == "switch":
            mesh[0] = (mesh[0] > 0.7) | np.isnan(mesh[0])
            return tuple([mesh[0]] + [m.astype(dtype) for m in mesh[1:]])
        with np.errstate(over="ignore"):
            return tuple(m.astype(dtype) for m in mesh)
    if dtype == "bool":
        vals = np.array([False, True])
    else:
        info = np.iinfo(dtype)
        base = [info.min, info.min + 1, -100, -7, -3, -2, -1, 0, 1, 2, 3, 5, 7, 31, 100]
        base += [info.max - 1, info.max]
        vals = np.array([v for v in base if info.min <= v <= info.max])
    mesh = [a.ravel() for a in np.meshgrid(*[vals] * spec.arity, indexing="ij")]
    if dtype != "bool":
        info = np.iinfo(dtype)
        mesh = [
            np.concatenate([m, rng.integers(info.min, info.max, size=4 * n, endpoint=True)])
            for m in mesh
        ]
    return tuple(m.astype(dtype) for m in mesh)


def inputs(spec, dtype, n):
    """The input arrays of ``spec`` in ``dtype``, the points outside its domain left out."""
    arrays = unary_inputs(spec, dtype, n) if spec.arity == 1 else nary_inputs(spec, dtype, n)
    if spec.domain is not None:
        keep = spec.domain(*arrays)
        arrays = tuple(a[keep] for a in arrays)
    return arrays


# ---- the reference ------------------------------------------------------------------


def _to_mpf(v):
    if isinstance(v, (bool, np.bool_)):
        return mp.mpf(int(v))
    return mp.mpf(int(v)) if isinstance(v, (int, np.integer)) else mp.mpf(float(v))


def _exact_values(spec, arrays):
    """(hi, lo, sign, known): ``hi + lo`` is the exact value in float64 pairs where
    ``known``; ``sign`` its sign (for the sign of a zero it underflows to)."""
    n = arrays[0].shape[0]
    hi, lo = np.zeros(n), np.zeros(n)
    sign = np.zeros(n)
    known = np.zeros(n, bool)
    for i in range(n):
        args = [a[i] for a in arrays]
        fl = [float(a) for a in args]
        if any(v == 0 or not np.isfinite(v) for v in fl):
            continue  # numpy's IEEE conventions serve there
        try:
            r = spec.exact(*[_to_mpf(a) for a in args])
        except (ValueError, ZeroDivisionError, OverflowError, mpmath.libmp.NoConvergence):
            continue
        if mp.isnan(r):
            hi[i], known[i] = np.nan, True
            continue
        if mp.isinf(r):
            hi[i], known[i] = (np.inf if r > 0 else -np.inf), True
            continue
        h = float(r)
        hi[i], lo[i] = h, (float(r - h) if np.isfinite(h) else 0.0)
        sign[i] = 1.0 if r > 0 else (-1.0 if r < 0 else 0.0)
        known[i] = True
    return hi, lo, sign, known


def _bar_values(spec, arrays, out_dtype):
    """numpy's/scipy's value in the dtype under test (inputs cast to the output dtype,
    as the op computes), and in float64 (the stand-in reference)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if spec.exact is None or np.dtype(out_dtype).kind != "f":  # ints wrap as numpy's
            args = arrays
            if np.dtype(out_dtype).kind == "f" and all(a.dtype.kind == "f" for a in arrays):
                # an op that widens floats (chi2sf is float64) computes in its output dtype
                args = [a.astype(out_dtype) for a in arrays]
            try:
                same = spec.bar(*args)
            except TypeError:  # numpy refuses bools (-x): the op upcasts them first
                same = spec.bar(*[a.astype(out_dtype) for a in arrays])
            return np.asarray(same), np.asarray(same)
        cast = [a.astype(out_dtype) for a in arrays]
        if spec.name == "switch":
            cast[0] = arrays[0]
        in_dtype = np.asarray(spec.bar(*cast))
        wide = np.asarray(spec.bar(*[a.astype("float64") for a in arrays]))
    return in_dtype, wide


@dataclasses.dataclass
class Reference:
    """The reference of one op at its inputs, in the output dtype."""

    value: np.ndarray  # rounded to the output dtype
    hi: np.ndarray  # exact value = hi + lo (float64 pair), for the error in ulps
    lo: np.ndarray
    bar: np.ndarray  # numpy's/scipy's own result in the dtype under test


def reference(spec, arrays, out_dtype) -> Reference:
    """The reference value of ``spec`` at ``arrays`` for an output of ``out_dtype``."""
    bar, wide = _bar_values(spec, arrays, out_dtype)
    if spec.exact is None or np.dtype(out_dtype).kind != "f":
        with np.errstate(all="ignore"):
            value = bar.astype(out_dtype) if out_dtype != "bool" else bar.astype(bool)
        hi = bar.astype("float64") if bar.dtype.kind == "f" else bar.astype("float64")
        return Reference(value, hi, np.zeros_like(hi), bar)
    hi, lo, sign, known = _exact_values(spec, arrays)
    with np.errstate(all="ignore"):
        wide = wide.astype("float64")
        hi = np.where(known, hi, wide)
        lo = np.where(known, lo, 0.0)
        value = hi.astype(out_dtype)
        # a value that underflows to zero keeps the sign of the exact value; an exact
        # zero (log(1)) takes numpy's sign
        tiny = known & (value == 0) & (sign != 0)
        value[tiny] = np.copysign(0.0, sign[tiny]).astype(out_dtype)
        zero = known & (value == 0) & (sign == 0)
        value[zero] = np.copysign(0.0, wide[zero]).astype(out_dtype)
    return Reference(value, hi, lo, bar)


# ---- comparing ------------------------------------------------------------------------


def value_class(v) -> np.ndarray:
    """Per element: 0 finite non-zero, 1 +0, 2 -0, 3 +inf, 4 -inf, 5 NaN (ints: 0)."""
    v = np.asarray(v)
    if v.dtype.kind != "f":
        return np.where(v == 0, 1, 0)
    out = np.zeros(v.shape, int)
    out[v == 0] = 1
    out[(v == 0) & np.signbit(v)] = 2
    out[np.isposinf(v)] = 3
    out[np.isneginf(v)] = 4
    out[np.isnan(v)] = 5
    return out


CLASS_NAMES = ("finite", "+0", "-0", "+inf", "-inf", "nan")


def ulp_errors(got, ref: Reference, dtype) -> np.ndarray:
    """|got - exact| in ulps of the output dtype where both are finite (0 elsewhere)."""
    got = np.asarray(got)
    if got.dtype.kind not in "f" or np.dtype(dtype).kind != "f":
        return np.where(np.asarray(got).astype("float64") == ref.hi, 0.0, np.inf)
    with np.errstate(all="ignore"):
        g = got.astype("float64")
        both = np.isfinite(g) & np.isfinite(ref.value)
        ulp = np.spacing(np.abs(ref.value.astype(dtype))).astype("float64")
        err = np.abs((g - ref.hi) - ref.lo) / ulp
    return np.where(both, err, 0.0)


@dataclasses.dataclass
class Result:
    """One op, input dtype and engine compared with the reference."""

    op: str
    dtype: str
    engine: str
    max_ulps: float
    worst_input: tuple
    class_bad: int  # points whose class (finite/+-0/+-inf/NaN) differs from the reference
    class_bad_vs_bar: int  # ... of those, points where numpy's/scipy's class is right
    examples: list  # (inputs, got, want, numpy's) at up to 3 such points
    bar_ulps: float  # numpy's/scipy's own largest error in ulps on the same points
    in_c: bool | None = None  # cpu_c: the op ran in a C kernel (None: not known)
    out_dtype: str = ""

    def bad(self, ulps):
        """Whether this is a bug by the sweep's rule: a class numpy gets right, or an
        error beyond ``ulps`` plus twice numpy's own."""
        return self.class_bad_vs_bar > 0 or self.max_ulps > 2 * self.bar_ulps + ulps


def compare(spec, dtype, engine, arrays, got, ref: Reference, out_dtype) -> Result:
    """The :class:`Result` of ``got`` (an engine's output) against ``ref``."""
    got = np.asarray(got)
    want_c, got_c, bar_c = value_class(ref.value), value_class(got), value_class(ref.bar)
    if got.dtype.kind != "f" and ref.value.dtype.kind != "f":
        wrong = got.astype("int64") != ref.value.astype("int64")
        want_c, got_c, bar_c = np.zeros_like(want_c), wrong.astype(int), np.zeros_like(want_c)
    bad = want_c != got_c
    bad_vs_bar = bad & (bar_c == want_c)
    err = ulp_errors(got, ref, out_dtype)
    bar_err = ulp_errors(ref.bar.astype(out_dtype), ref, out_dtype)
    k = int(np.argmax(err)) if err.size else 0
    examples = [
        (tuple(a[i].item() for a in arrays), got[i].item(), ref.value[i].item(), ref.bar[i].item())
        for i in np.flatnonzero(bad_vs_bar if bad_vs_bar.any() else bad)[:3]
    ]
    return Result(
        spec.name,
        dtype,
        engine,
        float(err.max(initial=0.0)),
        tuple(a[k].item() for a in arrays) if err.size else (),
        int(bad.sum()),
        int(bad_vs_bar.sum()),
        examples,
        float(bar_err.max(initial=0.0)),
        out_dtype=out_dtype,
    )


# ---- running the engines ----------------------------------------------------------------


def _symbol(dtype, name):
    return TensorType(dtype, shape=(None,))(name)


def build(spec, dtype, tag=0):
    """The symbolic inputs and output of ``spec`` on ``dtype`` inputs, or None where the op
    refuses that dtype."""
    op = scalar_ops()[spec.name]
    dts = [dtype] * spec.arity
    if spec.name == "switch":
        dts[0] = "bool"
    syms = [_symbol(d, f"{spec.name}_{tag}_x{k}") for k, d in enumerate(dts)]
    try:
        out = Elemwise(op)(*syms)
    except (TypeError, NotImplementedError):
        return None
    return syms, out


def run_engine(engine, items):
    """Compile every (symbols, output, input arrays) of ``items`` (a dict) into one
    function on ``engine`` and run it; returns {key: (output array or the exception,
    whether it ran in a C kernel)}. Where the whole function fails, each item runs alone.

    Each output is multiplied by an input of ones of its dtype, which the fusion rewrite
    merges with the op into a Composite (the CPU engine's C kernels run Composites only).
    """
    make_mode, build_mode = ENGINES[engine]
    keys = list(items)
    ins, outs, vals = [], [], []
    for key in keys:
        syms, out, arrays = items[key]
        one = _symbol(out.dtype, f"one_{len(outs)}")
        ins += syms + [one]
        outs.append(out * one)
        vals += list(arrays) + [np.ones(arrays[0].shape, out.dtype)]
    with ckernel.compile_mode(build_mode), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            f = theano_dag.function(ins, outs, mode=make_mode())
            got = [np.asarray(g) for g in f(*vals)]
        except Exception as e:  # one op's failure is a result, not the end of the sweep
            if len(keys) == 1:
                return {keys[0]: (e, None)}
            results = {}
            for key in keys:
                results.update(run_engine(engine, {key: items[key]}))
            return results
    results = {}
    for key, g in zip(keys, got):
        in_c = None
        if engine == "cpu_c":
            in_c = _ran_in_c(f, type(items[key][1].owner.op.scalar_op), items[key][0])
        results[key] = (g, in_c)
    return results


def _ran_in_c(f, op_type, syms):
    """Whether the op of ``op_type`` applied to ``syms`` ran inside a Composite (a C
    kernel) in ``f``."""
    for node in f.maker.fgraph.toposort():
        so = getattr(node.op, "scalar_op", None)
        if not isinstance(so, ts.Composite):
            continue
        names = {getattr(v, "name", None) for v in node.inputs}
        if syms[0].name in names and any(isinstance(n.op, op_type) for n in so.nodes):
            return True
    return False


def sweep(names=None, engines=None, n=160, dtypes=None, log=None) -> list:
    """Run the sweep; returns a list of :class:`Result`, ops in order, per input dtype
    and engine. All ops of one input dtype compile into one function per engine."""
    engines = list(engines or ENGINES)
    if "opencl" in engines and not opencl_available()[0]:
        engines.remove("opencl")
    by_dtype = {}
    for spec in specs(names):
        for dtype in spec.dtypes:
            if dtypes and dtype not in dtypes:
                continue
            built = build(spec, dtype, tag=len(by_dtype.get(dtype, ())))
            if built is None:
                continue
            syms, o = built
            arrays = inputs(spec, dtype, n)
            by_dtype.setdefault(dtype, {})[spec.name] = (spec, syms, o, arrays)
    out = []
    for dtype, group in by_dtype.items():
        refs = {}
        for name, (spec, _syms, o, arrays) in group.items():
            t0 = time.time()
            refs[name] = reference(spec, arrays, o.dtype)
            if log and time.time() - t0 > 5:
                print(f"  (reference of {name} {dtype}: {time.time() - t0:.1f}s)", file=sys.stderr)
        items = {name: (syms, o, arrays) for name, (spec, syms, o, arrays) in group.items()}
        values = {}
        for engine in engines:
            got = run_engine(engine, items)
            for name, (spec, _syms, o, arrays) in group.items():
                val, in_c = got[name]
                if isinstance(val, Exception):
                    res = Result(name, dtype, engine, np.inf, (), -1, -1, [repr(val)], 0.0)
                else:
                    res = compare(spec, dtype, engine, arrays, val, refs[name], o.dtype)
                    res.in_c = in_c
                    values.setdefault(name, {})[engine] = val
                out.append(res)
                if log:
                    log(res)
        if log:
            for name, by_engine in values.items():
                line = disagreement(name, dtype, by_engine, group[name][3])
                if line:
                    print(line, flush=True)
    return out


def disagreement(name, dtype, by_engine, arrays) -> str:
    """A line saying where the engines' values differ in class (finite, +-0, +-inf,
    NaN) from one another, and the largest spread between them in ulps ('' if none)."""
    engines = list(by_engine)
    if len(engines) < 2:
        return ""
    classes = np.stack([value_class(by_engine[e]) for e in engines])
    split = np.flatnonzero((classes != classes[0]).any(axis=0))
    spread = 0.0
    first = np.asarray(by_engine[engines[0]])
    if first.dtype.kind == "f":
        with np.errstate(all="ignore"):
            ulp = np.spacing(np.abs(first)).astype("float64")
            for e in engines[1:]:
                d = np.abs(np.asarray(by_engine[e]).astype("float64") - first) / ulp
                spread = max(spread, float(np.nanmax(np.where(np.isfinite(d), d, 0), initial=0)))
    if not len(split) and spread <= 8:
        return ""
    at = [tuple(a[i].item() for a in arrays) for i in split[:2]]
    vals = {e: [by_engine[e][i].item() for i in split[:2]] for e in engines}
    return (
        f"DIFF {name:26s} {dtype:8s} engines differ in class at {len(split)} points "
        f"{at} {vals if len(split) else ''}, spread {spread:.3g} ulps"
    )


def format_result(r: Result, ulps=4.0) -> str:
    flag = "BUG" if r.bad(ulps) else "   "
    c = {True: "C", False: "host", None: ""}[r.in_c]
    s = (
        f"{flag} {r.op:26s} {r.dtype:8s}->{r.out_dtype:8s} {r.engine:7s} {c:4s} "
        f"ulps {r.max_ulps:10.3g} (numpy {r.bar_ulps:8.3g}) class {r.class_bad:4d} "
        f"(numpy right {r.class_bad_vs_bar:4d})"
    )
    if r.max_ulps > 2 * r.bar_ulps + ulps:
        s += f" worst at {r.worst_input}"
    if r.examples and r.class_bad:
        s += f" e.g. {r.examples[:2]}"
    return s


def table(results) -> str:
    """Per op and engine: the worst error in ulps over the dtypes (float outputs), with
    numpy's own in brackets, and the count of points of a wrong class (``!`` marks a row
    with a bug by :meth:`Result.bad`)."""
    engines = list(dict.fromkeys(r.engine for r in results))
    rows = {}
    for r in results:
        rows.setdefault(r.op, {}).setdefault(r.engine, []).append(r)
    lines = [f"{'op':26s} " + " ".join(f"{e:>24s}" for e in engines)]
    for op, by_engine in rows.items():
        cells = []
        for e in engines:
            rs = by_engine.get(e, [])
            if not rs:
                cells.append(f"{'-':>24s}")
                continue
            u = max(r.max_ulps for r in rs)
            b = max(r.bar_ulps for r in rs)
            c = sum(max(r.class_bad_vs_bar, 0) for r in rs)
            flag = "!" if any(r.bad(4.0) for r in rs) else " "
            cells.append(f"{flag}{u:9.3g} ({b:7.3g}) c{c:4d}")
        lines.append(f"{op:26s} " + " ".join(cells))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", action="append", help="only this op (repeatable)")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--dtype", action="append")
    p.add_argument("--quick", action="store_true", help="the trimmed sweep of the test")
    p.add_argument("--only-bad", action="store_true")
    p.add_argument("--table", action="store_true", help="a summary per op and engine")
    a = p.parse_args(argv)
    n = 12 if a.quick else 160

    def log(r):
        if not a.only_bad or r.bad(4.0):
            print(format_result(r), flush=True)

    print("skipped:", SKIPPED)
    res = sweep(a.op, a.engines.split(","), n=n, dtypes=a.dtype, log=log)
    if a.table:
        print(table(res))
    bad = [r for r in res if r.bad(4.0)]
    print(f"{len(res)} results, {len(bad)} flagged")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
