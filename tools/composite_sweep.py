"""The composite functions users call (``nnet.softsign``, ``relu``, ``softmax``,
``logsumexp``, cross-entropies, ``var``, ``norm`` ...) and the forms the stabilize
rewrites catch (``log(1 + exp(x))``, ``log(sigmoid(x))``), at extreme and special inputs,
on every engine, value and gradient against mpmath.

``tools/scalar_sweep.py`` sweeps each scalar op alone; a function built of several ops
can still overflow in an intermediate (``x + |x|`` past half the range), turn an infinite
input into ``inf / inf`` or ``inf - inf``, or lose its gradient there. Each function here
is compiled with the default rewrites (as a user's program runs it) at +-0, subnormals,
the smallest normal, +-1, the thresholds where ``exp``, squares and products overflow,
the largest float, +-inf and NaN, in float32 and float64 (and the integer dtypes the
function takes); its value and ``theano_dag.grad`` of ``sum(w * f)`` (fixed weights) are
compared with the exact values (mpmath at 60 digits; +-inf taken as +-1e400, so that an
exact function gives its limit there) rounded to the dtype.

A point is wrong where the class of the value (finite, +inf, -inf, NaN) differs from the
exact one's, or the error exceeds the case's bound in ulps (4 by default). Run::

    PYTHONPATH=. python tools/composite_sweep.py            # every case, every engine
    PYTHONPATH=. python tools/composite_sweep.py --case softsign --engines py,cpu_c

>>> sorted(c.name for c in CASES if c.name.startswith("relu"))
['relu', 'relu(alpha=0.1)']
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import mpmath
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag.compile.mode import Mode  # noqa: E402
from theano_dag.engines.cpu.linker import CPULinker  # noqa: E402
from theano_dag.engines.cpu.native import ckernel  # noqa: E402
from theano_dag.engines.opencl.context import opencl_available  # noqa: E402
from theano_dag.tensor import linalg, nnet, xlogx  # noqa: E402

mp = mpmath
mp.mp.dps = 60

#: name -> (mode, the C kernels' build mode: "off" runs numpy kernels, "sync" builds C)
ENGINES = {
    "py": (lambda: Mode(linker="py", optimizer="fast_run"), "off"),
    "fast_compile": (lambda: Mode(linker="py", optimizer="fast_compile"), "off"),
    "cpu": (lambda: Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run"), "off"),
    "cpu_c": (lambda: Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run"), "sync"),
    "opencl": (lambda: Mode(linker="opencl", optimizer="fast_run"), "off"),
}
FLOATS = ("float32", "float64")
INTS = ("bool", "int8", "uint8", "int16", "int32", "int64")
ALL = FLOATS + INTS

#: +-inf stand in as these two: an exact formula gives its limit there where both give
#: the same float64, and an infinity where they differ (log1p grows without bound)
BIG, BIGGER = mp.mpf("1e400"), mp.mpf("1e800")
NAN, INF = mp.mpf("nan"), mp.inf


def _special(dtype):
    """The extreme and special points of a float dtype, both signs, each once."""
    fi = np.finfo(dtype)
    mags = [
        0.0,
        float(fi.smallest_subnormal),
        float(fi.tiny),
        1e-30,
        1e-8,
        0.5,
        1.0,
        2.0,
        10.0,
        30.0,
        40.0,
        88.7,
        89.0,
        100.0,
        709.7,
        710.0,
        800.0,
        1e10,
        1e19,
        1e20,
        1.8e19,  # float32's sqr overflows past 1.8e19
        1e38,
        float(np.finfo("float32").max),
        1.3e154,
        1.4e154,  # float64's sqr overflows past 1.34e154
        1e200,
        9e307,
        1e308,
        float(fi.max),
        np.inf,
    ]
    with np.errstate(over="ignore"):
        vals = np.array(mags + [-m for m in mags] + [np.nan]).astype(dtype)
    # distinct values (-0.0 kept beside 0.0), NaN once
    keyed = {(float(v), bool(np.signbit(v))): v for v in vals if not np.isnan(v)}
    return np.array(sorted(keyed.values(), key=float) + [np.nan], dtype=dtype)


def _int_points(dtype):
    if dtype == "bool":
        return np.array([False, True])
    info = np.iinfo(dtype)
    vals = {0, 1, 2, 63, 64, 100, info.max, info.min, info.min + 1, -1, -64, -65}
    return np.array(sorted(v for v in vals if info.min <= v <= info.max), dtype=dtype)


def to_mp(v, big=BIG):
    v = float(v)
    if np.isnan(v):
        return NAN
    if np.isinf(v):
        return big if v > 0 else -big
    return mp.mpf(v)


def _limit(r1, r2):
    """The exact value at an infinite input from its values at ``BIG`` and ``BIGGER``."""
    with np.errstate(over="ignore"):
        f1, f2 = float(r1), float(r2)
    if f1 == f2 or (np.isnan(f1) and np.isnan(f2)) or not (np.isfinite(f1) and np.isfinite(f2)):
        return r2
    if abs(r2) > 1.5 * abs(r1) and r1 * r2 > 0:  # grows without bound
        return mp.sign(r2) * INF
    return r2  # converges (to 0, slowly: 1 / x)


def round_to(r, dtype) -> float:
    """An exact value rounded to ``dtype`` (through float64: two roundings, off by less
    than one ulp of the dtype)."""
    if mp.isnan(r):
        return np.nan
    with np.errstate(over="ignore"):
        return float(np.asarray(float(r)).astype(dtype))


# ---- cases --------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    """One function at its inputs.

    Elementwise: ``exact(*mpf) -> mpf`` and ``deriv(*mpf) -> [mpf per input]`` (None: no
    gradient checked); ``points(dtype)`` the arrays of its inputs (default: every special
    point, for a unary function). Not elementwise: ``exact_rows(list of arrays of mpf)
    -> array of mpf`` and ``deriv_rows(arrays, weights) -> [arrays]`` the gradient of
    ``sum(w * f)``. ``kinks`` are the inputs where the derivative is not defined (not
    checked). ``ulps`` bounds the value's error, ``grad_ulps`` the gradient's.
    """

    name: str
    build: Callable
    exact: Callable | None = None
    deriv: Callable | None = None
    points: Callable | None = None
    exact_rows: Callable | None = None
    deriv_rows: Callable | None = None
    dtypes: tuple = FLOATS
    kinks: tuple = ()
    ulps: float = 4.0
    grad_ulps: float = 8.0

    def __str__(self):
        return self.name


def _nan_in(*xs):
    return any(mp.isnan(x) for x in xs)


def unary(name, build, f, df, dtypes=FLOATS, kinks=(), **kw):
    """An elementwise function of one input; NaN in, NaN out."""

    def exact(x):
        return NAN if _nan_in(x) else f(x)

    def deriv(x):
        return [NAN if _nan_in(x) else df(x)]

    return Case(name, build, exact, deriv if df else None, dtypes=dtypes, kinks=kinks, **kw)


def _sigmoid(x):
    return 1 / (1 + mp.exp(-x)) if x >= 0 else mp.exp(x) / (1 + mp.exp(x))


def _softplus(x):
    return mp.log1p(mp.exp(x)) if x < 0 else x + mp.log1p(mp.exp(-x))


SELU_ALPHA = mp.mpf("1.6732632423543772848170429916717")
SELU_SCALE = mp.mpf("1.0507009873554804934193349852946")


def _relu(alpha):
    return lambda x: x if x > 0 else alpha * x


def _elu(alpha):
    return lambda x: x if x > 0 else alpha * mp.expm1(x)


def _d_elu(alpha):
    return lambda x: 1 if x > 0 else alpha * mp.exp(x)


def _hard_sigmoid(x):
    return min(max(mp.mpf("0.2") * x + mp.mpf("0.5"), 0), 1)


def _d_hard_sigmoid(x):
    return mp.mpf("0.2") if -2.5 < x < 2.5 else 0


def _log1mexp(x):
    if x < -1:  # log(-expm1(x)) would need 300 digits to see exp(-700) beside 1
        return mp.log1p(-mp.exp(x))
    return mp.log(-mp.expm1(x)) if x < 0 else (-INF if x == 0 else NAN)


def _log1p(x):
    return mp.log1p(x) if x > -1 else (-INF if x == -1 else NAN)


def _d_log1p(x):
    return 1 / (1 + x) if x > -1 else (INF if x == -1 else NAN)


def _xlogx(x):
    return 0 if x == 0 else (x * mp.log(x) if x > 0 else NAN)


def _d_xlogx(x):
    return (mp.log(x) + 1) if x > 0 else (mp.mpf("-inf") if x == 0 else NAN)


def _erfcx(x):
    if x > 1e30:  # mpmath's erfc has no series that far: the asymptotic form is exact
        return 1 / (x * mp.sqrt(mp.pi)) * (1 - 1 / (2 * x * x))
    if x < -30:  # exp(x**2) is past every float
        return INF
    return mp.exp(x * x) * mp.erfc(x)


def _d_erfcx(x):
    if x > 1e30:  # 2 x erfcx(x) - 2 / sqrt(pi) cancels to its asymptotic form
        return -1 / (mp.sqrt(mp.pi) * x * x)
    # it cancels 2 log10(x) digits: 60 beyond those (whatever mpmath's precision, which
    # tools/scalar_sweep.py sets to 50 when a test imports it)
    with mp.workdps(130):
        return 2 * x * _erfcx(x) - 2 / mp.sqrt(mp.pi)


def _pole(x):
    """erfinv's derivative at the ends of its domain: inf at +-1, no value beyond."""
    return INF if abs(x) == 1 else NAN


def binary(name, build, f, grads, xs, ys, dtypes=FLOATS, **kw):
    """An elementwise function of two inputs over the grid ``xs`` x ``ys`` (float lists;
    ``ys`` None: the special points)."""

    @np.errstate(over="ignore")  # the grid's float64 values past float32's range: inf
    def points(dtype):
        a = _special(dtype) if xs is None else np.array(xs, dtype=dtype)
        b = _special(dtype) if ys is None else np.array(ys, dtype=dtype)
        return [np.repeat(a, len(b)), np.tile(b, len(a))]

    def exact(x, y):
        return NAN if _nan_in(x, y) else f(x, y)

    def deriv(x, y):
        return [NAN] * 2 if _nan_in(x, y) else grads(x, y)

    return Case(name, build, exact, deriv, points=points, dtypes=dtypes, **kw)


def _bce(o, t):
    # -(t log o + (1 - t) log(1 - o)); 0 * log(0) is 0 in the limit, but the written
    # formula is Theano's: 0 * -inf is NaN there. The exact value counts t*log(o) as 0
    # where t is 0 (the function's meaning).
    a = 0 if t == 0 else t * mp.log(o) if o > 0 else mp.mpf("-inf")
    # log1p: log(1 - o) at o = 1e-45 needs 45 more digits than mpmath may have (a test
    # module that sets mp.dps = 50 left it 5 correct ones)
    b = 0 if t == 1 else (1 - t) * mp.log1p(-o) if o < 1 else mp.mpf("-inf")
    return -(a + b)


def _div(a, b):
    """``a / b``, +-inf for a non-zero ``a`` over 0 (the derivative's pole)."""
    if b == 0:
        return NAN if a == 0 else mp.sign(a) * INF
    return a / b


def _d_bce(o, t):
    do = -(_div(t, o) if t else 0) + (_div(1 - t, 1 - o) if t != 1 else 0)
    dt = (mp.log(1 - o) if o < 1 else -INF) - (mp.log(o) if o > 0 else -INF)
    return [do, dt]


def _sbce(z, t):
    return t * _softplus(-z) + (1 - t) * _softplus(z)


def _d_sbce(z, t):
    return [_sigmoid(z) - t, _softplus(-z) - _softplus(z)]


def _logaddexp(x, y):
    m = max(x, y)
    return m + mp.log(mp.exp(x - m) + mp.exp(y - m))


def _d_logaddexp(x, y):
    if abs(x) >= BIG and x == y:  # inf - inf: no limit
        return [NAN, NAN]
    return [_sigmoid(x - y), _sigmoid(y - x)]


def _xlogy0(x, y):
    if x == 0:
        return mp.mpf(0) if y >= 0 else NAN
    return x * mp.log(y) if y > 0 else (NAN if y < 0 else -mp.sign(x) * INF)


def _d_xlogy0(x, y):
    dx = mp.log(y) if y > 0 else (NAN if y < 0 else -INF)
    dy = _div(x, y) if y >= 0 else NAN
    return [dx, dy]


# rows for the functions of a vector (each a row of a matrix; float32 rows are cast)
ROWS = [
    [0.0, 1.0, 2.0],
    [1000.0, 1000.0, 0.0],
    [-1000.0, -1000.0, -1001.0],
    [1e300, 0.0, -1e300],
    [3e38, 0.0, -3e38],
    [np.inf, 0.0, 1.0],
    [-np.inf, 0.0, 1.0],
    [-np.inf, -np.inf, -np.inf],
    [np.inf, np.inf, 0.0],
    [np.nan, 0.0, 1.0],
    [1e-310, -1e-310, 0.0],
    [88.0, 89.0, 90.0],
    [710.0, 711.0, 0.0],
]


def _rows(dtype):
    with np.errstate(over="ignore"):
        return [np.array(ROWS, dtype=dtype)]


def _row_case(name, build, f, df, rows=_rows, **kw):
    """A function of each row (``f(list of mpf) -> list of mpf`` or one mpf; ``df(row,
    w) -> list of mpf``: the gradient of ``sum(w * f(row))``)."""

    def exact_rows(mats):
        (m,) = mats
        return np.array([f(list(r)) for r in m], dtype=object)

    def deriv_rows(mats, w):
        (m,) = mats
        return [np.array([df(list(r), wr) for r, wr in zip(m, w)], dtype=object)]

    return Case(name, build, exact_rows=exact_rows, deriv_rows=deriv_rows, points=rows, **kw)


def _indeterminate(r):
    """NaN in the row, or all of it -inf: the softmax has no limit there (0 / 0). Two
    +inf share the mass equally (the limit as both grow at one rate; +-BIG do so)."""
    return any(mp.isnan(v) for v in r) or max(r) <= -BIG


def _softmax_row(r):
    if _indeterminate(r):
        return [NAN] * len(r)
    m = max(r)
    e = [mp.exp(v - m) for v in r]
    s = sum(e)
    return [v / s for v in e]


def _d_softmax_row(r, w):
    s = _softmax_row(r)
    if any(mp.isnan(v) for v in s):
        return [NAN] * len(r)
    dot = sum(a * b for a, b in zip(w, s))
    return [si * (wi - dot) for si, wi in zip(s, w)]


def _log_softmax_row(r):
    if _indeterminate(r):
        return [NAN] * len(r)
    m = max(r)
    ls = mp.log(sum(mp.exp(v - m) for v in r))
    return [(v - m) - ls for v in r]  # m + ls would lose ls beside a huge m


def _d_log_softmax_row(r, w):
    s = _softmax_row(r)
    if any(mp.isnan(v) for v in s):
        return [NAN] * len(r)
    tot = sum(w)
    return [wi - si * tot for si, wi in zip(s, w)]


def _lse_row(r):
    if any(mp.isnan(v) for v in r):
        return NAN
    m = max(r)
    return m + mp.log(sum(mp.exp(v - m) for v in r))


def _d_lse_row(r, w):
    return [si * w for si in _softmax_row(r)]


def _no_limit(r):
    """NaN or an infinity in the row: the deviations are inf - inf (numpy's NaN)."""
    return any(mp.isnan(v) or abs(v) >= BIG for v in r)


def _var_row(r):
    if _no_limit(r):
        return NAN
    mu = sum(r) / len(r)
    return sum((v - mu) ** 2 for v in r) / len(r)


def _d_var_row(r, w):
    if _no_limit(r):
        return [NAN] * len(r)
    mu = sum(r) / len(r)
    return [w * 2 * (v - mu) / len(r) for v in r]


def _std_row(r):
    v = _var_row(r)
    return v if mp.isnan(v) else mp.sqrt(v)


def _d_std_row(r, w):
    s = _std_row(r)
    if mp.isnan(s) or s == 0:
        return [NAN] * len(r)
    mu = sum(r) / len(r)
    return [w * (v - mu) / (len(r) * s) for v in r]


def _mean_row(r):
    return (
        NAN
        if any(mp.isnan(v) for v in r) or (max(r) >= BIG and min(r) <= -BIG)
        else sum(r) / len(r)
    )


def _d_mean_row(r, w):
    return [w / len(r)] * len(r)


def _norm2_row(r):
    return NAN if any(mp.isnan(v) for v in r) else mp.sqrt(sum(v * v for v in r))


def _d_norm2_row(r, w):
    n = _norm2_row(r)
    if _no_limit(r) or n == 0:
        return [NAN] * len(r)
    return [w * v / n for v in r]


def _cce_row(r):
    """categorical_crossentropy(softmax(r), 0): -log_softmax(r)[0]."""
    return -_log_softmax_row(r)[0]


def _d_cce_row(r, w):
    s = _softmax_row(r)
    return [w * (si - (1 if k == 0 else 0)) for k, si in enumerate(s)]


#: huge values for mean, var, std, norm (a row each)
HUGE_ROWS = [
    [1e200, 1e200, 1e200],
    [1e200, -1e200, 0.0],
    [1e160, -1e160, 0.0],
    [1.7e308, 1.7e308, 1.7e308],
    [3e38, 3e38, -3e38],
    [2e19, -2e19, 0.0],
    [1e-200, 1e-200, 0.0],
    [1e-310, 2e-310, 0.0],
    [1.0, 2.0, 4.0],
    [np.inf, 0.0, 1.0],
    [np.nan, 0.0, 1.0],
]


def _huge_rows(dtype):
    with np.errstate(over="ignore"):
        return [np.array(HUGE_ROWS, dtype=dtype)]


def _ax1(fn):
    return lambda x: fn(x, axis=1)


def _sum_exp_log(x):
    return tt.log(tt.sum(tt.exp(x), axis=1))


def _norm_rows(x):
    # tensor.linalg.norm is of one vector: each row's, stacked
    return tt.stack([linalg.norm(x[k]) for k in range(len(HUGE_ROWS))])


CASES = [
    # ---- nnet activations --------------------------------------------------------
    unary(
        "softsign",
        nnet.softsign,
        lambda x: x / (1 + abs(x)),
        lambda x: 1 / (1 + abs(x)) ** 2,
        dtypes=FLOATS + INTS,
    ),
    unary("x / (1 + abs(x))", lambda x: x / (1 + abs(x)), lambda x: x / (1 + abs(x)), None),
    unary("sigmoid", nnet.sigmoid, _sigmoid, lambda x: _sigmoid(x) * _sigmoid(-x), dtypes=ALL),
    unary("softplus", nnet.softplus, _softplus, _sigmoid, dtypes=ALL),
    unary(
        "hard_sigmoid",
        nnet.hard_sigmoid,
        _hard_sigmoid,
        _d_hard_sigmoid,
        dtypes=FLOATS + INTS,
        kinks=(-2.5, 2.5),
    ),
    unary("elu", nnet.elu, _elu(1), _d_elu(1), kinks=(0.0,), dtypes=ALL),
    unary("elu(alpha=0.5)", lambda x: nnet.elu(x, 0.5), _elu(0.5), _d_elu(0.5), kinks=(0.0,)),
    unary(
        "selu",
        nnet.selu,
        lambda x: SELU_SCALE * _elu(SELU_ALPHA)(x),
        lambda x: SELU_SCALE * _d_elu(SELU_ALPHA)(x),
        kinks=(0.0,),
        dtypes=ALL,
    ),
    unary(
        "relu",
        nnet.relu,
        _relu(0),
        lambda x: 1 if x > 0 else 0,
        dtypes=FLOATS + INTS,
        kinks=(0.0,),
    ),
    unary(
        "relu(alpha=0.1)",
        lambda x: nnet.relu(x, 0.1),
        _relu(mp.mpf("0.1")),
        lambda x: 1 if x > 0 else mp.mpf("0.1"),
        kinks=(0.0,),
        ulps=8.0,  # the slope is 0.1 rounded to the dtype (4 ulps of float32 at -1e20)
    ),
    # ---- tensor.math functions (their gradients at the extremes) ------------------
    unary("log1p", tt.log1p, _log1p, _d_log1p),
    unary("expm1", tt.expm1, mp.expm1, mp.exp),
    unary(
        "log1mexp",
        tt.log1mexp,
        _log1mexp,
        lambda x: -1 / mp.expm1(-x) if x < 0 else NAN,
        kinks=(0.0,),  # the end of the domain
    ),
    unary("xlogx", xlogx.xlogx, _xlogx, _d_xlogx),
    unary(
        "erfcx",
        tt.erfcx,
        _erfcx,
        _d_erfcx,
        grad_ulps=16.0,  # the derivative's direct form below 2.6 (float64): 12 ulps
    ),
    unary(
        "erfinv",
        tt.erfinv,
        lambda x: mp.erfinv(x) if -1 < x < 1 else (mp.sign(x) * INF if abs(x) == 1 else NAN),
        lambda x: mp.sqrt(mp.pi) / 2 * mp.exp(mp.erfinv(x) ** 2) if -1 < x < 1 else _pole(x),
    ),
    unary("tanh", tt.tanh, mp.tanh, lambda x: 1 / mp.cosh(x) ** 2, dtypes=ALL),
    unary("sqrt(sqr(x))", lambda x: tt.sqrt(tt.sqr(x)), abs, lambda x: mp.sign(x), kinks=(0.0,)),
    # ---- forms the stabilize rewrites catch ----------------------------------------
    unary("log(1 + exp(x))", lambda x: tt.log(1 + tt.exp(x)), _softplus, _sigmoid),
    unary(
        "log(sigmoid(x))",
        lambda x: tt.log(nnet.sigmoid(x)),
        lambda x: -_softplus(-x),
        lambda x: _sigmoid(-x),
    ),
    unary(
        "log(1 - sigmoid(x))",
        lambda x: tt.log(1 - nnet.sigmoid(x)),
        lambda x: -_softplus(x),
        lambda x: -_sigmoid(x),
    ),
    unary("exp(x) - 1", lambda x: tt.exp(x) - 1, mp.expm1, mp.exp),
    unary(
        "log(1 + x)",
        lambda x: tt.log(1 + x),
        _log1p,
        _d_log1p,
    ),
    # ---- functions of two inputs -------------------------------------------------
    binary(
        "binary_crossentropy",
        nnet.binary_crossentropy,
        _bce,
        _d_bce,
        [0.0, 1e-45, 1e-30, 1e-8, 0.25, 0.5, 0.999, 1 - 2**-24, 1.0],
        [0.0, 0.25, 1.0],
        ulps=8.0,
        grad_ulps=1e6,  # 1 - o at o near 1 is as exact as o: ulps of o, not of 1 - o
    ),
    binary(
        "sigmoid_binary_crossentropy",
        nnet.sigmoid_binary_crossentropy,
        _sbce,
        _d_sbce,
        [-np.inf, -1e308, -800.0, -40.0, -1.0, 0.0, 1.0, 40.0, 800.0, 1e308, np.inf, np.nan],
        [0.0, 0.25, 1.0],
        ulps=8.0,
        grad_ulps=16.0,
    ),
    binary(
        "logaddexp",
        tt.logaddexp,
        _logaddexp,
        _d_logaddexp,
        [-np.inf, -1e308, -1000.0, 0.0, 1000.0, 1e308, np.inf],
        [-np.inf, -1e308, -1000.0, -1.0, 0.0, 1000.0, 1e308, np.inf],
    ),
    binary(
        "xlogy0",
        xlogx.xlogy0,
        _xlogy0,
        _d_xlogy0,
        [0.0, 1e-300, 0.5, 1.0, 1e300, -1.0],
        [0.0, 1e-310, 1e-30, 0.5, 1.0, 1e30, 1e308, np.inf],
        dtypes=("float64",),
    ),
    # ---- functions of rows ---------------------------------------------------------
    _row_case("softmax", nnet.softmax, _softmax_row, _d_softmax_row, grad_ulps=32.0),
    _row_case("log_softmax", nnet.log_softmax, _log_softmax_row, _d_log_softmax_row),
    _row_case(
        "log(softmax(x))",
        lambda x: tt.log(nnet.softmax(x)),
        _log_softmax_row,
        _d_log_softmax_row,
    ),
    _row_case("logsumexp", _ax1(tt.logsumexp), _lse_row, _d_lse_row),
    _row_case("log(sum(exp(x)))", _sum_exp_log, _lse_row, _d_lse_row),
    _row_case(
        "categorical_crossentropy(softmax(x), 0)",
        lambda x: nnet.categorical_crossentropy(
            nnet.softmax(x), tt.zeros((x.shape[0],), dtype="int64")
        ),
        _cce_row,
        _d_cce_row,
    ),
    _row_case("mean", _ax1(tt.mean), _mean_row, _d_mean_row, rows=_huge_rows),
    _row_case("var", _ax1(tt.var), _var_row, _d_var_row, rows=_huge_rows, grad_ulps=16.0),
    _row_case("std", _ax1(tt.std), _std_row, _d_std_row, rows=_huge_rows, grad_ulps=16.0),
    _row_case(
        "x.norm(2, axis=1)",
        lambda x: x.norm(2, axis=1),
        _norm2_row,
        _d_norm2_row,
        rows=_huge_rows,
        grad_ulps=16.0,
    ),
    _row_case("linalg.norm", _norm_rows, _norm2_row, _d_norm2_row, rows=_huge_rows, grad_ulps=16.0),
]


# ---- running ------------------------------------------------------------------------


def _weights(shape):
    n = int(np.prod(shape)) if shape else 1
    return (1.0 + 0.25 * (np.arange(n) % 3)).reshape(shape)


def _exact(case, arrays):
    """(value, [gradient per input]) as arrays of mpf (gradients None where unchecked),
    the limits at infinite inputs."""
    if not any(np.isinf(a).any() for a in arrays if a.dtype.kind == "f"):
        return _exact_at(case, arrays, BIG)
    v1, g1, w = _exact_at(case, arrays, BIG)
    v2, g2, _ = _exact_at(case, arrays, BIGGER)
    lim = np.frompyfunc(_limit, 2, 1)
    grads = None if g1 is None else [None if a is None else lim(a, b) for a, b in zip(g1, g2)]
    return lim(v1, v2), grads, w


def _exact_at(case, arrays, big):
    if case.exact_rows is not None:
        mats = [[[to_mp(v, big) for v in row] for row in a] for a in arrays]
        val = case.exact_rows(mats)
        w = _weights(val.shape)
        # a weight per value: a row of weights, or one number for a value per row
        wm = [[mp.mpf(v) for v in r] if np.ndim(r) else mp.mpf(float(r)) for r in w.tolist()]
        return val, case.deriv_rows(mats, wm), w
    mps = [[to_mp(v, big) for v in a] for a in arrays]
    val = np.array([case.exact(*xs) for xs in zip(*mps)], dtype=object)
    w = _weights(val.shape)
    grads = None
    if case.deriv is not None:
        per = [case.deriv(*xs) for xs in zip(*mps)]
        grads = []
        for k, a in enumerate(arrays):
            g = np.array([p[k] * mp.mpf(float(wi)) for p, wi in zip(per, w)], dtype=object)
            grads.append(g if a.dtype.kind == "f" else None)
    return val, grads, w


def _ulps(got, exact, dtype, scale=None):
    """|got - exact| in ulps of ``dtype`` at the rounded exact value (or at ``scale``
    where larger: the magnitude of the terms a value cancels from), per element; inf
    where the class (finite, +inf, -inf, NaN) differs."""
    out = np.zeros(got.shape)
    scale = np.zeros(got.shape) if scale is None else np.broadcast_to(scale, got.shape)
    for i, (g, r) in enumerate(zip(got.flat, exact.flat)):
        want = round_to(r, dtype)
        g = float(g)
        if np.isnan(want) or np.isnan(g) or np.isinf(want) or np.isinf(g):
            same = (np.isnan(want) and np.isnan(g)) or g == want
            out.flat[i] = 0.0 if same else np.inf
            continue
        with np.errstate(over="ignore"):  # past the largest float: one ulp is inf
            big = max(abs(want), float(scale.flat[i]))
            ulp = float(np.spacing(np.asarray(big, dtype=dtype)))
        out.flat[i] = float(abs(mp.mpf(g) - r) / ulp)
    return out


@dataclasses.dataclass
class Result:
    case: str
    dtype: str
    engine: str
    value_ulps: float  # the worst error where the class agrees (inf: a class differs)
    grad_ulps: float
    bad: list  # (input(s), what, got, want) of each point beyond the bound
    error: str = ""


def _float_dtype_of(case, dtype):
    return dtype if dtype in FLOATS else str(case.build(tt.TensorType(dtype, (None,))()).dtype)


def run(case, dtype, engine):
    """Compile ``case`` in ``dtype`` on ``engine``; return its :class:`Result`."""
    pts = case.points or (lambda d: [_special(d)] if d in FLOATS else [_int_points(d)])
    arrays = pts(dtype) if dtype in FLOATS else [_int_points(dtype)]
    syms = [tt.TensorType(dtype, (None,) * a.ndim)(f"x{k}") for k, a in enumerate(arrays)]
    out = case.build(*syms)
    val_ref, grad_ref, w = _exact(case, arrays)
    outs = [out]
    wrt = [s for s, a in zip(syms, arrays) if a.dtype.kind == "f"]
    checked_grads = grad_ref is not None and wrt
    if checked_grads:
        cost = tt.sum(out * np.asarray(w, dtype=out.dtype))
        outs += theano_dag.grad(cost, wrt)
    make_mode, build_mode = ENGINES[engine]
    try:
        with ckernel.compile_mode(build_mode), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = theano_dag.function(syms, outs, mode=make_mode())
            got = [np.asarray(g) for g in f(*arrays)]
    except Exception as e:  # a failure is a result
        return Result(case.name, dtype, engine, np.inf, np.inf, [], f"{type(e).__name__}: {e}")
    odtype = str(out.dtype)
    bad = []

    def where(i):
        if case.exact_rows is not None:
            return f"row {arrays[0][i[0]].tolist()}"
        return ", ".join(repr(a.flat[i[0]].item()) for a in arrays)

    def check(what, g, ref, bound, mask=None, scale=None):
        e = _ulps(g, ref, odtype, scale)
        if mask is not None:
            e = np.where(mask, e, 0.0)
        for i in zip(*np.nonzero(e > bound)):
            bad.append((where(i), what, g[i].item(), round_to(ref[i], odtype)))
        return float(e.max(initial=0.0))

    vu = check("value", got[0], val_ref, case.ulps)
    gu = 0.0
    if checked_grads:
        for k, (g, ref) in enumerate(zip(got[1:], [r for r in grad_ref if r is not None])):
            mask = scale = None
            if case.exact_rows is None:
                # no derivative at a kink, nor where the function has no value
                nan = np.array([mp.isnan(v) for v in val_ref])
                mask = ~np.isin(arrays[k].astype("float64"), case.kinks) & ~nan
            else:
                # a row's gradient cancels its terms (w - s sum(w)): in ulps of its largest
                with np.errstate(invalid="ignore", over="ignore"):
                    f = np.array([[round_to(v, "float64") for v in r] for r in ref])
                    f = np.where(np.isfinite(f), np.abs(f), 0.0)
                scale = f.max(axis=1, keepdims=True)
            gu = max(gu, check(f"grad {k}", g, ref, case.grad_ulps, mask, scale))
    return Result(case.name, dtype, engine, vu, gu, bad)


def engines_available():
    ok, _ = opencl_available()
    return [e for e in ENGINES if e != "opencl" or ok]


def sweep(names=None, engines=None, dtypes=None, log=print):
    results = []
    for case in CASES:
        if names and case.name not in names:
            continue
        for dtype in case.dtypes:
            if dtypes and dtype not in dtypes:
                continue
            for engine in engines or engines_available():
                r = run(case, dtype, engine)
                results.append(r)
                if log:
                    log(format_result(r))
    return results


def _fmt(u):
    return "-" if u == 0 else ("class" if np.isinf(u) else f"{u:.3g}")


def format_result(r: Result, limit=40) -> str:
    head = f"{r.case:40s} {r.dtype:8s} {r.engine:12s} value {_fmt(r.value_ulps):>7s}"
    head += f"  grad {_fmt(r.grad_ulps):>7s}"
    if r.error:
        return head + f"  ERROR {r.error[:200]}"
    lines = [head]
    for b in r.bad[:limit]:
        lines.append(f"    at {b[0]}: {b[1]} {b[2]!r}, want {b[3]!r}")
    if len(r.bad) > limit:
        lines.append(f"    ... {len(r.bad) - limit} more")
    return "\n".join(lines)


def table(results) -> str:
    """One line per function: its dtypes, and the worst value/gradient error in ulps with
    the default rewrites (every engine but FAST_COMPILE) and in FAST_COMPILE ("class":
    a value of the wrong class somewhere, such as NaN for a finite value)."""
    rows = {}
    for r in results:
        d = rows.setdefault(r.case, {"dtypes": set(), "engines": set()})
        d["dtypes"].add(r.dtype)
        d["engines"].add(r.engine)
        fc = "fc" if r.engine == "fast_compile" else "run"
        d[fc + "v"] = max(d.get(fc + "v", 0.0), r.value_ulps)
        d[fc + "g"] = max(d.get(fc + "g", 0.0), r.grad_ulps)
    out = [
        "| function | dtypes | value | gradient | FAST_COMPILE value | FAST_COMPILE gradient |",
        "|---" * 6 + "|",
    ]
    for name, d in rows.items():
        cells = [_fmt(d[k]) if k in d else "" for k in ("runv", "rung", "fcv", "fcg")]
        out.append(f"| {name} | {', '.join(sorted(d['dtypes']))} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", action="append", help="a case's name (repeatable)")
    p.add_argument("--engines", help="comma-separated engines (default: all available)")
    p.add_argument("--dtypes", help="comma-separated dtypes")
    p.add_argument("--table", action="store_true", help="print the summary table at the end")
    args = p.parse_args(argv)
    engines = args.engines.split(",") if args.engines else None
    dtypes = args.dtypes.split(",") if args.dtypes else None
    results = sweep(args.case, engines, dtypes)
    if args.table:
        print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
