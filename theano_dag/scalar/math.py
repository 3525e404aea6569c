"""Transcendental and rounding scalar ops: exp, log, trig, sigmoid, softplus, erf, floor...

Most are defined by three things: a numpy function, a C expression that compiles as
C99 and as OpenCL C, and the derivative ``f'(x)`` (written with tensor ops, given the
input ``x`` and the output ``out``).
"""

from __future__ import annotations

import functools
import math as _pymath
import warnings

import numpy as np

from theano_dag.config import install_hint
from theano_dag.graph.null_type import grad_not_implemented
from theano_dag.scalar.basic import (
    C_TYPES,
    OPENCL_TYPES,
    BinaryScalarOp,
    UnaryScalarOp,
    const_like,
    float_dtypes,
    real_out,
    round_half_away_from_zero_vec,
    same_out,
    same_out_no_complex,
    upcast_out_nobool,
    upgrade_to_float,
    upgrade_to_float64_no_complex,
    upgrade_to_float_no_complex,
    vocabulary,
    zero_grads,
)

__all__ = [
    "FloatUnaryOp",
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "sqrt",
    "sqr",
    "reciprocal",
    "inv",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "arctan2",
    "sinh",
    "cosh",
    "tanh",
    "sech2",
    "arcsinh",
    "arccosh",
    "arctanh",
    "deg2rad",
    "rad2deg",
    "j0",
    "j1",
    "i0",
    "i1",
    "jv",
    "iv",
    "chi2sf",
    "conj",
    "real",
    "imag",
    "angle",
    "complex",
    "complex_from_polar",
    "sigmoid",
    "softplus",
    "softsign",
    "erf",
    "erfc",
    "floor",
    "ceil",
    "trunc",
    "round_half_to_even",
    "round_half_away_from_zero",
    "gammaln",
    "gamma",
    "psi",
    "tri_gamma",
    "erfinv",
    "erfcinv",
    "erfcx",
    "ErfcxDeriv",
    "erfcx_deriv",
    "log_erfc",
    "logaddexp",
    "SigmoidBinaryCrossentropy",
    "sigmoid_binary_crossentropy",
    "BinaryCrossentropy",
    "binary_crossentropy",
    "BinaryCrossentropyGrad",
    "binary_crossentropy_grad",
    "ExpSub",
    "exp_sub",
    "log1mexp",
    "xlogx",
    "xlogy0",
]


class _SpecialFunction:
    """``scipy.special.<name>``, imported on the first call, else ``math.<name>`` per element.

    scipy is the optional ``scipy`` extra: importing it at ``import theano_dag`` cost about
    half the import time, for two ops. Without it the values are the same (``math.erf`` is
    correctly rounded to within an ulp) but computed one element at a time, which a single
    warning names with the line that installs the extra.

    >>> _SpecialFunction("erf")(np.array([0.0, 1.0])).round(6)
    array([0.      , 0.842701])
    """

    def __init__(self, name):
        self.name = name
        self._impl = None

    def _load(self):
        try:
            import scipy.special  # the optional scipy extra, needed only when erf/erfc run
        except ImportError:
            warnings.warn(
                f"{self.name} runs math.{self.name} once per element because scipy is not "
                f"installed; for the vectorized scipy.special.{self.name}: "
                + install_hint("scipy", "scipy>=1.9"),
                RuntimeWarning,
                stacklevel=3,
            )
            return np.vectorize(getattr(_pymath, self.name), otypes=[np.float64])
        return getattr(scipy.special, self.name)

    def __call__(self, *args, **kwargs):
        if self._impl is None:
            self._impl = self._load()
        return self._impl(*args, **kwargs)

    def __repr__(self):
        return f"<scipy.special.{self.name}, imported when first called>"


_np_erf = _SpecialFunction("erf")
_np_erfc = _SpecialFunction("erfc")


# The functions that build a gradient of x's kind (tensor ops, for Elemwise's tensors).
_of = vocabulary


class FloatUnaryOp(UnaryScalarOp):
    """A unary op with a float result (integers are upgraded first).

    ``deriv(x, out)`` returns ``f'(x)`` as a tensor expression.
    """

    deriv = None

    def L_op(self, inputs, outputs, output_grads):
        if self.deriv is None:
            return super().L_op(inputs, outputs, output_grads)
        return [output_grads[0] * self.deriv(inputs[0], outputs[0])]


def _unary(name, nfunc, c_expr, deriv, doc, pref=upgrade_to_float, **methods):
    cls = type(
        name.capitalize(),
        (FloatUnaryOp,),
        {
            "nfunc": staticmethod(nfunc),
            "c_expr": c_expr,
            "deriv": staticmethod(deriv) if deriv is not None else None,
            "__doc__": doc,
            "__module__": __name__,
            **methods,
        },
    )
    globals()[cls.__name__] = cls  # importable by name, so that ops pickle
    return cls(pref, name=name)


def _sigmoid(x):
    e = np.exp(-np.abs(x))  # never overflows
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


exp = _unary("exp", np.exp, "exp(%(x)s)", lambda x, out: out, "e**x")
exp2 = _unary(
    "exp2", np.exp2, "exp2(%(x)s)", lambda x, out: out * const_like(np.log(2.0), out), "2**x"
)
log = _unary("log", np.log, "log(%(x)s)", lambda x, out: 1 / x, "natural log")
log2 = _unary(
    "log2",
    np.log2,
    "log2(%(x)s)",
    lambda x, out: 1 / (x * const_like(np.log(2.0), out)),
    "base-2 log",
)
log10 = _unary(
    "log10",
    np.log10,
    "log10(%(x)s)",
    lambda x, out: 1 / (x * const_like(np.log(10.0), out)),
    "base-10 log",
)
log1p = _unary("log1p", np.log1p, "log1p(%(x)s)", lambda x, out: 1 / (1 + x), "log(1 + x)")
expm1 = _unary("expm1", np.expm1, "expm1(%(x)s)", lambda x, out: out + 1, "exp(x) - 1")
sqrt = _unary(
    "sqrt", np.sqrt, "sqrt(%(x)s)", lambda x, out: const_like(0.5, out) / out, "square root"
)


sqr = _unary(
    "sqr",
    np.square,
    "(%(x)s * %(x)s)",
    lambda x, out: 2 * x,
    "x * x",
    pref=upcast_out_nobool,
    wraps_integers=True,
)
reciprocal = _unary(
    "reciprocal", np.reciprocal, "((%(t)s)1 / %(x)s)", lambda x, out: -(out * out), "1 / x"
)
# Theano 1.1.2's names of reciprocal's class and op.
Inv = type(reciprocal)
inv = reciprocal
sin = _unary("sin", np.sin, "sin(%(x)s)", lambda x, out: _of(x).cos(x), "sine")
cos = _unary("cos", np.cos, "cos(%(x)s)", lambda x, out: -_of(x).sin(x), "cosine")
tan = _unary("tan", np.tan, "tan(%(x)s)", lambda x, out: 1 + out * out, "tangent")
arcsin = _unary(
    "arcsin",
    np.arcsin,
    "asin(%(x)s)",
    lambda x, out: 1 / _of(x).sqrt(1 - x * x),
    "inverse sine",
)
arccos = _unary(
    "arccos",
    np.arccos,
    "acos(%(x)s)",
    lambda x, out: -1 / _of(x).sqrt(1 - x * x),
    "inverse cosine",
)
arctan = _unary(
    "arctan", np.arctan, "atan(%(x)s)", lambda x, out: 1 / (1 + x * x), "inverse tangent"
)
sinh = _unary("sinh", np.sinh, "sinh(%(x)s)", lambda x, out: _of(x).cosh(x), "hyperbolic sine")
cosh = _unary("cosh", np.cosh, "cosh(%(x)s)", lambda x, out: _of(x).sinh(x), "hyperbolic cosine")


def _tanh_c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES):
    """``tanh``; in OpenCL C with the infinities said outright: the standard asks
    tanh(+-inf) = +-1, and PoCL's float tanh gives +-(1 - 2**-24), which a cast to an
    integer turns into 0.

    >>> from theano_dag.scalar.basic import OPENCL_TYPES
    >>> print(tanh.c_code(["x"], ["float32"], ["float32"], types=OPENCL_TYPES)[0])
    (isinf(x) ? copysign((float)1, x) : tanh(x))
    """
    (e,) = FloatUnaryOp.c_code(self, inputs, in_dtypes, out_dtypes, types)
    if types is not OPENCL_TYPES:
        return [e]
    x = e[len("tanh(") : -1]
    return [f"(isinf({x}) ? copysign(({types[out_dtypes[0]]})1, {x}) : {e})"]


tanh = _unary(
    "tanh",
    np.tanh,
    "tanh(%(x)s)",
    # 1 - out**2, of the output, as every peer's: 0 from |x| = 9 (float32; 19 in float64)
    # where the derivative is about 4 exp(-2|x|). sech2(x) is exact there, but reads the
    # input: a tanh layer would keep its pre-activation for the backward pass too, one
    # more activation per layer in training (+56% planned for six 1024-wide layers).
    lambda x, out: 1 - out * out,
    "hyperbolic tangent",
    c_code=_tanh_c_code,
)


def _sech2(x):
    x = np.asarray(x)
    if x.dtype.kind == "c":  # (|x| is the modulus: the real formula does not extend)
        with np.errstate(all="ignore"):
            return 1 / (np.cosh(x) * np.cosh(x))
    e = np.exp(-2 * np.abs(x))  # in (0, 1]: never overflows, and 1 + e never cancels
    return 4 * e / ((1 + e) * (1 + e))


# sech(x)**2 = 4 e / (1 + e)**2 with e = exp(-2|x|): within a few ulps for every x, and
# not 0 until e underflows (|x| > 372 in float64, 52 in float32). The C compilers share
# the three exp(-2|x|) of the expression (exp has no side effect under -fno-math-errno).
sech2 = _unary(
    "sech2",
    _sech2,
    "((%(t)s)4 * exp((%(t)s)-2 * fabs(%(x)s)) / "
    "(((%(t)s)1 + exp((%(t)s)-2 * fabs(%(x)s))) * ((%(t)s)1 + exp((%(t)s)-2 * fabs(%(x)s)))))",
    lambda x, out: -2 * out * _of(x).tanh(x),
    "sech(x)**2 = 1 - tanh(x)**2, tanh's derivative, without rounding to 0 where tanh "
    "rounds to +-1",
)
arcsinh = _unary(
    "arcsinh",
    np.arcsinh,
    "asinh(%(x)s)",
    lambda x, out: 1 / _of(x).sqrt(x * x + 1),
    "inverse hyperbolic sine",
)
arccosh = _unary(
    "arccosh",
    np.arccosh,
    "acosh(%(x)s)",
    lambda x, out: 1 / _of(x).sqrt(x * x - 1),
    "inverse hyperbolic cosine",
)
arctanh = _unary(
    "arctanh",
    np.arctanh,
    "atanh(%(x)s)",
    lambda x, out: 1 / (1 - x * x),
    "inverse hyperbolic tangent",
)
_DEG = np.pi / 180.0
deg2rad = _unary(
    "deg2rad",
    np.deg2rad,
    f"(%(x)s * (%(t)s){_DEG!r})",
    lambda x, out: const_like(_DEG, out),
    "degrees to radians",
    pref=upgrade_to_float_no_complex,
)
rad2deg = _unary(
    "rad2deg",
    np.rad2deg,
    f"(%(x)s * (%(t)s){1 / _DEG!r})",
    lambda x, out: const_like(1 / _DEG, out),
    "radians to degrees",
    pref=upgrade_to_float_no_complex,
)
# sigmoid and softplus: written so that exp never overflows, in numpy and in C alike.
# Their stable forms compare x with 0, which has no meaning for a complex x (the numpy
# form dropped its imaginary part): a complex input is refused when the graph is built,
# as are those of the other ops below defined on reals only (scipy's and numpy's
# functions without a complex loop would raise only when the function runs).
sigmoid = _unary(
    "sigmoid",
    _sigmoid,
    "(%(x)s >= 0 ? (%(t)s)1 / ((%(t)s)1 + exp(-%(x)s)) : exp(%(x)s) / ((%(t)s)1 + exp(%(x)s)))",
    # ``1.0``, the constant a user writes in ``1.0 - sigmoid(x)`` (autocast alike): the
    # two subgraphs merge, so that canonicalize cancels ``s * (1 - s) / (1 - s)`` (the
    # gradient of ``log(1 - sigmoid(x))``) instead of computing 0 / 0 at large x.
    lambda x, out: out * (1.0 - out),
    "1 / (1 + exp(-x))",
    pref=upgrade_to_float_no_complex,
)
softplus = _unary(
    "softplus",
    _softplus,
    "((%(x)s > 0 ? %(x)s : (%(t)s)0) + log1p(exp(-fabs(%(x)s))))",
    lambda x, out: _of(x).sigmoid(x),
    "log(1 + exp(x))",
    pref=upgrade_to_float_no_complex,
)


def _softsign(x):
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(x), np.sign(x), x / (1 + np.abs(x)))


def _d_softsign(x, out):
    # (1 / d)**2 with d = 1 + |x|, not 1 / d**2: d * d overflows from |x| = 1.3e154
    # (1.8e19 in float32) where the true value is still a normal number
    r = 1 / (1 + abs(x))
    return r * r


# x / (1 + |x|) is inf / inf at +-inf, where the value is +-1
softsign = _unary(
    "softsign",
    _softsign,
    "(isinf(%(x)s) ? copysign((%(t)s)1, %(x)s) : %(x)s / ((%(t)s)1 + fabs(%(x)s)))",
    _d_softsign,
    "x / (1 + |x|), +-1 at +-inf",
)
_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)
erf = _unary(
    "erf",
    _np_erf,
    "erf(%(x)s)",
    lambda x, out: const_like(_TWO_OVER_SQRT_PI, out) * _of(x).exp(-x * x),
    "error function",
)
erfc = _unary(
    "erfc",
    _np_erfc,
    "erfc(%(x)s)",
    lambda x, out: -const_like(_TWO_OVER_SQRT_PI, out) * _of(x).exp(-x * x),
    "complementary error function",
)


def _scipy_special(name, fallback=None):
    """``scipy.special.<name>``, looked up at the first call: scipy is an optional
    dependency, needed only by the graphs that use these functions. ``fallback`` (a numpy
    function) serves when scipy is not installed."""

    def call(*args):
        try:
            import scipy.special as sps  # noqa: PLC0415 (optional extra, loaded when used)
        except ImportError:
            if fallback is not None:
                return fallback(*args)
            raise ImportError(
                f"the scalar op {name} computes with scipy.special.{name}: pip install scipy"
            ) from None
        return getattr(sps, name)(*args)

    call.__name__ = name
    return call


_SQRT_PI_OVER_2 = np.sqrt(np.pi) / 2


# lgamma and tgamma are in C99's and OpenCL C's maths libraries; the others are not, so
# their Elemwise nodes run numpy's (scipy's) function on every engine.
def _per_element(f, at_pole):
    """``f`` (a ``math`` function) over arrays; its poles and overflows give ``at_pole``."""

    def safe(v):
        try:
            return f(v)
        except ValueError:  # a pole: 0, -1, -2, ...
            return at_pole
        except OverflowError:
            return np.inf

    return np.vectorize(safe, otypes=[np.float64])


_scipy_gammaln = _scipy_special("gammaln", _per_element(_pymath.lgamma, np.inf))


def _gammaln(x):
    """scipy's gammaln with C99's lgamma(-inf) = +inf (|gamma| grows without bound;
    scipy says -inf), and -log|x| for 0 < |x| < 1e-300, where it is exact to 1e-300
    relative and scipy's is inf (gammaln(5e-324) is 744.44, lgamma's).

    >>> print(_gammaln(np.array([5e-324, -np.inf, 1.0])))
    [744.44007192  inf   0.        ]
    """
    x = np.asarray(x)
    with np.errstate(divide="ignore"):
        tiny = (np.abs(x) < 1e-300) & (x != 0)
        out = np.where(np.isneginf(x), np.inf, _scipy_gammaln(x))
        return np.where(tiny, -np.log(np.abs(np.where(tiny, x, 1))), out)


gammaln = _unary(
    "gammaln",
    _gammaln,
    "lgamma(%(x)s)",
    lambda x, out: _of(x).psi(x),
    "log|gamma(x)|",
    pref=upgrade_to_float_no_complex,
)


def _gamma_c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES):
    """``tgamma``; in OpenCL C with the sign of an underflow said outright: gamma(x) for
    x < 0 has the sign of (-1)**floor(x), and PoCL's tgamma(-180.25) is +0 (-0 in C99
    and scipy).

    >>> from theano_dag.scalar.basic import OPENCL_TYPES
    >>> print(gamma.c_code(["x"], ["float32"], ["float32"], types=OPENCL_TYPES)[0])
    ((x < 0 && tgamma(x) == 0) ? (fmod(floor(x), (float)2) == 0 ? (float)0 : -(float)0) : tgamma(x))
    """
    (e,) = FloatUnaryOp.c_code(self, inputs, in_dtypes, out_dtypes, types)
    if types is not OPENCL_TYPES:
        return [e]
    x, t = e[len("tgamma(") : -1], types[out_dtypes[0]]
    zero = f"(fmod(floor({x}), ({t})2) == 0 ? ({t})0 : -({t})0)"
    return [f"(({x} < 0 && {e} == 0) ? {zero} : {e})"]


_scipy_gamma = _scipy_special("gamma", _per_element(_pymath.gamma, np.nan))


def _gamma(x):
    """scipy's gamma, an underflow below 0 given its sign, (-1)**floor(x), as C99's
    tgamma gives it: scipy's gamma(-22315985849.5357) is -0.0, the C kernels' +0.

    >>> _gamma(np.array([-22315985849.535698, -180.25]))
    array([ 0., -0.])
    """
    x = np.asarray(x)
    out = np.asarray(_scipy_gamma(x))
    with np.errstate(invalid="ignore"):
        under = (out == 0) & (x < 0)
    if not under.any():
        return out
    sign = np.where(np.fmod(np.floor(x), 2) == 0, 1.0, -1.0).astype(out.dtype)
    return np.where(under, np.copysign(np.zeros_like(out), sign), out)


gamma = _unary(
    "gamma",
    _gamma,
    "tgamma(%(x)s)",
    lambda x, out: out * _of(x).psi(x),
    "the gamma function",
    c_code=_gamma_c_code,
)
psi = _unary(
    "psi",
    _scipy_special("psi"),
    None,
    lambda x, out: _of(x).tri_gamma(x),
    "the digamma function, d/dx log(gamma(x))",
)
# Below this, scipy's polygamma(1, x) (its zeta's reflection) runs for a time that grows
# with |x|: seconds at -1e8, without end at -1e15 + 0.5.
_TRIGAMMA_REFLECT_BELOW = -1e4


def _trigamma(x):
    """scipy's ``polygamma(1, x)``; for ``x`` far below 0 by the reflection formula
    ``psi1(x) = pi**2 / sin(pi x)**2 - psi1(1 - x)``, ``sin(pi x)`` taken at ``x`` less its
    nearest integer (exact), so that ``pi x`` loses no digits.

    >>> print(np.round(_trigamma(np.array([1.0, -1e15 + 0.5])), 6))
    [1.644934 9.869604]
    """
    x = np.asarray(x)
    far = x < _TRIGAMMA_REFLECT_BELOW
    polygamma = _scipy_special("polygamma")
    if not far.any():
        return polygamma(1, x)
    with np.errstate(all="ignore"):
        s = np.sin(np.pi * (x - np.round(x)))
        reflected = np.pi**2 / (s * s) - polygamma(1, np.where(far, 1 - x, 1))
        return np.where(far, reflected, polygamma(1, np.where(far, 1, x)))


tri_gamma = _unary(
    "tri_gamma",
    _trigamma,
    None,
    None,
    "the trigamma function, d/dx psi(x)",
    pref=upgrade_to_float_no_complex,
)
erfinv = _unary(
    "erfinv",
    _scipy_special("erfinv"),
    None,
    lambda x, out: const_like(_SQRT_PI_OVER_2, out) * _of(x).exp(out * out),
    "the inverse of erf",
    pref=upgrade_to_float_no_complex,
)
erfcinv = _unary(
    "erfcinv",
    _scipy_special("erfcinv"),
    None,
    lambda x, out: -const_like(_SQRT_PI_OVER_2, out) * _of(x).exp(out * out),
    "the inverse of erfc",
    pref=upgrade_to_float_no_complex,
)


# -- erfc's tail: erfcx and log_erfc ----------------------------------------------------
# Beyond a threshold erfc(x) is about to underflow (float64: erfc(26.55) is the smallest
# normal number; float32: erfc(9.2)), and the asymptotic series
#     erfc(x) = exp(-x**2) / (x sqrt(pi)) * (1 - 1/(2x^2) + 3/(2x^2)^2 - 15/(2x^2)^3 ...)
# takes over: at the thresholds below its first terms are exact to about 1e-15 (float64)
# and 1e-8 (float32). Below them erfc(x) itself is accurate to a few ulps of its value.
_ERFC_TAIL = {"float64": 26.0}
_ERFC_TAIL_DEFAULT = 9.0  # float32 and float16
_LOG_SQRT_PI = 0.5 * _pymath.log(_pymath.pi)
_ONE_OVER_SQRT_PI = 1 / _pymath.sqrt(_pymath.pi)
# The series minus its leading 1, by Horner in v = 1/x**2 (coefficients (-1)^k (2k-1)!!/2^k).
_TAIL_SERIES = (-0.5, 0.75, -1.875, 6.5625, -29.53125)


def _erfc_tail_threshold(dtype) -> float:
    return _ERFC_TAIL.get(str(dtype), _ERFC_TAIL_DEFAULT)


def _tail_series_np(x):
    v = 1 / (x * x)
    acc = _TAIL_SERIES[-1] * v
    for c in _TAIL_SERIES[-2::-1]:
        acc = (acc + c) * v
    return acc


def _tail_series_c(x, t):
    """The series minus 1 as a C expression of ``x`` (type ``t``)."""
    v = f"(({t})1 / ({x} * {x}))"
    acc = f"({t}){_TAIL_SERIES[-1]!r} * {v}"
    for c in _TAIL_SERIES[-2::-1]:
        acc = f"(({acc}) + ({t}){c!r}) * {v}"
    return acc


def _erfcx_np(x):
    """exp(x**2) * erfc(x) by the same formula as the C kernels (when scipy is absent)."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        tail = (1 + _tail_series_np(x)) / x * _ONE_OVER_SQRT_PI
        return np.where(x >= _erfc_tail_threshold(x.dtype), tail, np.exp(x * x) * _np_erfc(x))


def _erfcx_c_template(self, in_dtypes, out_dtypes):
    t = "%(t)s"
    # divided by x, then times 1/sqrt(pi): x * sqrt(pi) overflows near the largest float
    tail = f"(({t})1 + {_tail_series_c('%(x)s', t)}) / %(x)s * ({t}){_ONE_OVER_SQRT_PI!r}"
    threshold = _erfc_tail_threshold(out_dtypes[0])
    # exp(x * x) multiplies the rounding error of x * x by x * x (200 ulps at x = 23):
    # exp(hi + lo) = e + e * lo, lo = fma(x, x, -hi) the part of x**2 that hi lost
    e = "(exp(%(x)s * %(x)s) * erfc(%(x)s))"
    # (not where e is inf: inf * lo would be NaN where lo is 0 or -inf)
    near = f"(isinf({e}) ? {e} : {e} + {e} * fma(%(x)s, %(x)s, -(%(x)s * %(x)s)))"
    return f"(%(x)s >= ({t}){threshold!r} ? {tail} : {near})"


_np_erfcx = _scipy_special("erfcx", _erfcx_np)
erfcx = _unary(
    "erfcx",
    _np_erfcx,
    None,  # c_template gives it, by dtype
    # 2 x erfcx(x) - 2 / sqrt(pi) cancels for large x: erfcx_deriv does not
    lambda x, out: _of(x).erfcx_deriv(x),
    "exp(x**2) * erfc(x), which does not overflow for large x",
    c_template=_erfcx_c_template,
)


# -- erfcx's derivatives ------------------------------------------------------------------
# The n-th derivative y_n of y = erfcx(x) by the recurrence y_{m+1} = 2x y_m + 2m y_{m-1}
# (y_1 = 2x y - 2/sqrt(pi)) is P_n(x) y - Q_n(x) with polynomials P, Q: it cancels as x
# grows (y_n ~ (-1)^n n! / (sqrt(pi) x^(n+1)); float32 keeps no digit past x ~ 300,
# float64 past ~ 1e4, NaN at inf). Laplace's continued fraction of erfc,
#     sqrt(pi) y = 1 / d_0,  d_j = x + ((j + 1) / 2) / d_{j+1},
# gives it without cancelling: y_n = (-1)^n n! / (sqrt(pi) d_0 d_1 ... d_n), all terms
# positive for x > 0. From the threshold below, the fraction cut N terms past d_n (its
# tail d_K taken as x + r, r = (K + 1) / (sqrt(x**2 + 2 (K + 1)) + x), the fixed point
# of r = ((K + 1) / 2) / (x + r)) is exact to a few ulps (mpmath, 60 digits); below it the
# recurrence loses a few bits (float64: 22 ulps at most for n = 1, 174 for n = 2;
# float32: 7 and 31, over [-5, 8] in steps of 0.05).
_ERFCX_DERIV_CF = {"float64": (2.6, 32)}  # (threshold, terms)
_ERFCX_DERIV_CF_DEFAULT = (1.5, 16)  # float32 and float16


@functools.cache  # impl asks at every call of the numpy path
def _erfcx_deriv_polys(order):
    """The coefficients (lowest power first) of ``P_n`` and of ``Q_n / (2 / sqrt(pi))``."""
    p_prev, p = [1], [0, 2]
    q_prev, q = [0], [1]
    for m in range(1, order):

        def step(cur, prev, m=m):
            out = [0] + [2 * c for c in cur]
            return [a + (2 * m * prev[k] if k < len(prev) else 0) for k, a in enumerate(out)]

        p_prev, p = p, step(p, p_prev)
        q_prev, q = q, step(q, q_prev)
    return p, q


def _horner(coefs, x):
    """The polynomial (lowest power first) at ``x``, in ``x``'s dtype (from the leading
    coefficient: ``numpy.polyval`` starts from ``0 * x``, NaN at an infinite ``x``)."""
    acc = np.full(x.shape, coefs[-1], dtype=x.dtype)
    for c in coefs[-2::-1]:
        acc = acc * x + x.dtype.type(c)
    return acc


class ErfcxDeriv(FloatUnaryOp):
    """The ``order``-th derivative of ``erfcx``, without the cancellation of
    ``2 x erfcx(x) - 2/sqrt(pi)`` for large ``x`` (a continued fraction there; ``-0`` at
    ``+inf``, the limit). Its gradient is the next order's.

    >>> import numpy as np
    >>> print(erfcx_deriv.impl(np.array([0.0, 1e5, np.inf])))
    [-1.12837917e+00 -5.64189583e-11 -0.00000000e+00]
    """

    __props__ = ("order",)

    def __init__(self, order=1, name=None):
        if not isinstance(order, int | np.integer) or order < 1:
            raise ValueError(f"ErfcxDeriv: order must be a positive integer, got {order!r}")
        self.order = int(order)
        super().__init__(
            upgrade_to_float, name or ("erfcx_deriv" if order == 1 else f"erfcx_deriv{order}")
        )

    def _cf(self, dtype):
        return _ERFCX_DERIV_CF.get(str(dtype), _ERFCX_DERIV_CF_DEFAULT)

    def impl(self, x):
        x = np.asarray(x)
        n = self.order
        p, q = _erfcx_deriv_polys(n)
        if x.dtype.kind == "c":  # the recurrence (holomorphic; no fraction: x is not real)
            with np.errstate(all="ignore"):
                return _horner(p, x) * _np_erfcx(x) - _TWO_OVER_SQRT_PI * _horner(q, x)
        work = np.float64 if x.dtype == np.float64 else np.float32
        xs = x.astype(work)
        threshold, terms = self._cf(xs.dtype)
        with np.errstate(all="ignore"):
            near = _horner(p, xs) * _np_erfcx(xs) - work(_TWO_OVER_SQRT_PI) * _horner(q, xs)
            k = n + terms
            d = xs + work(k + 1) / (np.sqrt(xs * xs + work(2 * (k + 1))) + xs)
            ds = {}
            for j in range(k - 1, -1, -1):
                d = xs + work((j + 1) / 2) / d
                if j <= n:
                    ds[j] = d
            far = np.full(xs.shape, work(self._tail_constant()))
            for j in range(n, -1, -1):
                far = far / ds[j]
            return np.where(xs >= threshold, far, near)

    def _tail_constant(self):
        return (-1) ** self.order * _pymath.factorial(self.order) * _ONE_OVER_SQRT_PI

    def c_template(self, in_dtypes, out_dtypes):
        t, x = "%(t)s", "%(x)s"
        n = self.order
        threshold, terms = self._cf(out_dtypes[0])
        p, q = _erfcx_deriv_polys(n)

        def poly(coefs):
            acc = f"({t}){float(coefs[-1])!r}"
            for c in coefs[-2::-1]:
                acc = f"({acc} * {x} + ({t}){float(c)!r})"
            return acc

        y = _erfcx_c_template(self, in_dtypes, out_dtypes)
        near = f"({poly(p)} * {y} - ({t}){float(_TWO_OVER_SQRT_PI)!r} * {poly(q)})"
        k = n + terms
        d = f"({x} + ({t}){float(k + 1)!r} / (sqrt({x} * {x} + ({t}){float(2 * (k + 1))!r}) + {x}))"
        ds = {}
        for j in range(k - 1, -1, -1):
            d = f"({x} + ({t}){(j + 1) / 2!r} / {d})"
            if j <= n:
                ds[j] = d
        far = f"({t}){self._tail_constant()!r}"
        for j in range(n, -1, -1):
            far = f"({far} / {ds[j]})"
        return f"({x} >= ({t}){threshold!r} ? {far} : {near})"

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        return [output_grads[0] * _of(x).erfcx_deriv(x, self.order + 1)]


erfcx_deriv = ErfcxDeriv(1)


def _log_erfc_np(x):
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        tail = -x * x - np.log(x) - _LOG_SQRT_PI + np.log1p(_tail_series_np(x))
        # erfc(x) = 1 - tiny: its log is -tiny, not 0; 0 - erf(0) is +0 (log(1) = +0)
        near_0 = np.log1p(0 - _np_erf(x))
        mid = np.log(_np_erfc(x))
        return np.where(
            x >= _erfc_tail_threshold(x.dtype), tail, np.where(np.abs(x) < 0.5, near_0, mid)
        )


def _log_erfc_c_template(self, in_dtypes, out_dtypes):
    t = "%(t)s"
    tail = (
        f"(-(%(x)s * %(x)s) - log(%(x)s) - ({t}){_LOG_SQRT_PI!r}"
        f" + log1p({_tail_series_c('%(x)s', t)}))"
    )
    threshold = _erfc_tail_threshold(out_dtypes[0])
    return (
        f"(%(x)s >= ({t}){threshold!r} ? {tail} : "
        f"(fabs(%(x)s) < ({t})0.5 ? log1p(({t})0 - erf(%(x)s)) : log(erfc(%(x)s))))"
    )


log_erfc = _unary(
    "log_erfc",
    _log_erfc_np,
    None,  # c_template gives it, by dtype
    lambda x, out: -const_like(_TWO_OVER_SQRT_PI, out) / _of(x).erfcx(x),
    "log(erfc(x)), finite where erfc(x) underflows (about -x**2 - log(x sqrt(pi)))",
    c_template=_log_erfc_c_template,
)
# Bessel functions (scipy.special, imported when they first run; no C expression).
# The order-1 derivatives by the recurrence of _Bessel2 (Theano's): (f0 -+ f2) / 2.
j1 = _unary(
    "j1",
    _scipy_special("j1"),
    None,
    lambda x, out: (_of(x).j0(x) - _of(x).jv(const_like(2, out), x)) / 2,
    "Bessel function of the first kind, order 1",
    pref=upgrade_to_float_no_complex,
)
j0 = _unary(
    "j0",
    _scipy_special("j0"),
    None,
    lambda x, out: -_of(x).j1(x),
    "Bessel function of the first kind, order 0",
    pref=upgrade_to_float_no_complex,
)
i1 = _unary(
    "i1",
    _scipy_special("i1"),
    None,
    lambda x, out: (_of(x).i0(x) + _of(x).iv(const_like(2, out), x)) / 2,
    "modified Bessel function of the first kind, order 1",
    pref=upgrade_to_float_no_complex,
)
i0 = _unary(
    "i0",
    _scipy_special("i0"),
    None,
    lambda x, out: _of(x).i1(x),
    "modified Bessel function of the first kind, order 0",
    pref=upgrade_to_float_no_complex,
)


class LogAddExp(BinaryScalarOp):
    """``log(exp(x) + exp(y))`` (``numpy.logaddexp``): the larger argument plus
    ``log1p(exp(-|x - y|))``, which neither overflows nor loses a tiny second term."""

    nfunc = staticmethod(np.logaddexp)
    # x == y first: inf - inf would be NaN (and the sum of two equal terms is x + log 2)
    c_expr = (
        "(%(x)s == %(y)s ? %(x)s + (%(t)s)0.6931471805599453"
        " : (%(x)s > %(y)s ? %(x)s + log1p(exp(%(y)s - %(x)s))"
        " : %(y)s + log1p(exp(%(x)s - %(y)s))))"
    )

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        t = _of(x)
        # exp(x - out) = sigmoid(x - y); x - y is exact for close arguments, x - out not
        return [gz * t.sigmoid(x - y), gz * t.sigmoid(y - x)]


logaddexp = LogAddExp(upgrade_to_float_no_complex, name="logaddexp")


def _sigmoid_bce(z, t):
    with np.errstate(invalid="ignore", over="ignore"):
        linear = np.where(z > 0, np.where(t == 1, 0, (1 - t) * z), np.where(t == 0, 0, -t * z))
        return np.log1p(np.exp(-np.abs(z))) + linear


class SigmoidBinaryCrossentropy(BinaryScalarOp):
    """``t * softplus(-z) + (1 - t) * softplus(z)``, the binary cross-entropy of
    ``sigmoid(z)`` for the target ``t``, as ``log1p(exp(-|z|))`` plus the linear part,
    ``(1 - t) z`` for ``z > 0`` and ``-t z`` below: one ``exp`` and one ``log1p``, both
    terms positive for ``0 <= t <= 1``, and a zero ``t`` (``1 - t`` above 0) takes no
    part, so that ``z = -inf, t = 0`` gives 0, not ``0 * inf``. Its derivatives are
    ``sigmoid(z) - t`` (``1 - t - sigmoid(-z)`` for ``z > 0``) and ``-z``, at every
    ``t`` (also 0 and 1).

    >>> import numpy as np
    >>> z = np.array([-np.inf, -800.0, 0.0, np.inf])
    >>> print(sigmoid_binary_crossentropy.impl(z, np.array([0.0, 1.0, 0.5, 1.0])))
    [0.00000000e+00 8.00000000e+02 6.93147181e-01 0.00000000e+00]
    """

    nfunc = staticmethod(_sigmoid_bce)
    c_expr = (
        "(log1p(exp(-fabs(%(x)s))) + (%(x)s > 0"
        " ? (%(y)s == 1 ? (%(t)s)0 : ((%(t)s)1 - %(y)s) * %(x)s)"
        " : (%(y)s == 0 ? (%(t)s)0 : -%(y)s * %(x)s)))"
    )

    @staticmethod
    def d_logit(z, t):
        """The derivative in ``z``, ``sigmoid(z) - t``, as a graph of ``z``'s kind
        (``1 - t - sigmoid(-z)`` for ``z > 0``, where ``sigmoid(z)`` rounds to 1 from
        ``z = 37``, 17 in float32)."""
        v = _of(z)
        return v.switch(v.gt(z, 0), (1 - t) - v.sigmoid(-z), v.sigmoid(z) - t)

    def L_op(self, inputs, outputs, output_grads):
        z, t = inputs
        (gz,) = output_grads
        return [gz * self.d_logit(z, t), gz * -z]


sigmoid_binary_crossentropy = SigmoidBinaryCrossentropy(
    upgrade_to_float_no_complex, name="sigmoid_binary_crossentropy"
)


def _bce(o, t):
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(t == 0, 0, t * np.log(o))
        return (0 - a) - np.where(t == 1, 0, (1 - t) * np.log1p(-o))  # +0 at o = t


class BinaryCrossentropy(BinaryScalarOp):
    """``-(t log(o) + (1 - t) log(1 - o))``, the binary cross-entropy of the
    probability ``o`` for the target ``t``, a term of weight 0 taking no part: 0 at
    ``o = t = 0`` and ``o = t = 1``, where the formula is ``0 * -inf``, NaN (``log1p(-o)``
    for ``log(1 - o)``, exact for a small ``o``). Its derivatives are
    :class:`BinaryCrossentropyGrad`'s (the same rule: ``-t / o`` is 0 for ``t = 0``) and
    ``log(1 - o) - log(o)``.

    >>> import numpy as np
    >>> print(binary_crossentropy.impl(np.array([0.0, 1.0, 0.5]), np.array([0.0, 1.0, 1.0])))
    [0.         0.         0.69314718]
    """

    nfunc = staticmethod(_bce)
    c_expr = (
        "(((%(t)s)0 - (%(y)s == 0 ? (%(t)s)0 : %(y)s * log(%(x)s)))"
        " - (%(y)s == 1 ? (%(t)s)0 : ((%(t)s)1 - %(y)s) * log1p(-%(x)s)))"
    )

    def L_op(self, inputs, outputs, output_grads):
        o, t = inputs
        (gz,) = output_grads
        v = _of(o)
        # (Elemwise: the op's tensor form lives in tensor.nnet, which no vocabulary names)
        d_o = v.Elemwise(binary_crossentropy_grad)(o, t)
        return [gz * d_o, gz * (v.log1p(-o) - v.log(o))]


binary_crossentropy = BinaryCrossentropy(upgrade_to_float, name="binary_crossentropy")


def _bce_grad(o, t):
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(t == 0, 0, -t / o)
        return a + np.where(t == 1, 0, (1 - t) / (1 - o))


class BinaryCrossentropyGrad(BinaryScalarOp):
    """``-t / o + (1 - t) / (1 - o)``, the derivative of :class:`BinaryCrossentropy` in
    ``o``, a term of weight 0 taking no part (1 at ``o = t = 0``, where the formula is
    ``0 / 0``). The stabilize rewrites cancel it against a sigmoid's derivative
    (``local_bce_grad_sigmoid``).

    >>> import numpy as np
    >>> print(binary_crossentropy_grad.impl(np.array([0.0, 1.0]), np.array([0.0, 1.0])))
    [ 1. -1.]
    """

    nfunc = staticmethod(_bce_grad)
    c_expr = (
        "((%(y)s == 0 ? (%(t)s)0 : -%(y)s / %(x)s)"
        " + (%(y)s == 1 ? (%(t)s)0 : ((%(t)s)1 - %(y)s) / ((%(t)s)1 - %(x)s)))"
    )

    def L_op(self, inputs, outputs, output_grads):
        o, t = inputs
        (gz,) = output_grads
        q = 1 - o
        return [gz * (t / (o * o) + (1 - t) / (q * q)), gz * (-1 / o - 1 / q)]


binary_crossentropy_grad = BinaryCrossentropyGrad(upgrade_to_float, name="binary_crossentropy_grad")


def _exp_sub(x, y):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(x == y, 1, np.exp(x - y))


class ExpSub(BinaryScalarOp):
    """``exp(x - y)``, and 1 where ``x == y``: also at equal infinities, where ``x - y``
    is NaN. The terms of a stable log-sum-exp ``m + log(sum(exp_sub(x, m)))`` (``m``
    the max of ``x``): at a ``+inf`` maximum they are 1 at each ``+inf`` and 0 elsewhere,
    so that the value is inf and its gradient, ``exp_sub(x, m) / sum``, the softmax's
    limit. The derivative is ``exp(x - y)`` (``-exp(x - y)`` for ``y``) everywhere.

    >>> import numpy as np
    >>> print(exp_sub.impl(np.array([np.inf, 0.0, 2.0]), np.array([np.inf, np.inf, 1.0])))
    [1.         0.         2.71828183]
    """

    nfunc = staticmethod(_exp_sub)
    c_expr = "(%(x)s == %(y)s ? (%(t)s)1 : exp(%(x)s - %(y)s))"

    def L_op(self, inputs, outputs, output_grads):
        d = output_grads[0] * outputs[0]
        return [d, -d]


exp_sub = ExpSub(upgrade_to_float, name="exp_sub")


def _log1mexp(x):
    # log1p(-exp(x)) loses digits near x = 0, log(-expm1(x)) far from it (Maechler, 2012)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x < -_pymath.log(2), np.log1p(-np.exp(x)), np.log(-np.expm1(x)))


log1mexp = _unary(
    "log1mexp",
    _log1mexp,
    "(%(x)s < (%(t)s)-0.6931471805599453 ? log1p(-exp(%(x)s)) : log(-expm1(%(x)s)))",
    # -exp(x) / (1 - exp(x)) as exp(x) / expm1(x): -1 / expm1(-x) is -1 / inf, 0, where
    # exp(-x) overflows (x < -709.8; -88.7 in float32) and the derivative is -exp(x).
    # At x = +0 that is 1 / +0, where the limit from the domain (x < 0) is -inf: out, there
    lambda x, out: _of(x).switch(_of(x).eq(x, 0), out, _of(x).exp(x) / _of(x).expm1(x)),
    "log(1 - exp(x)) for x <= 0, accurate at both ends",
    pref=upgrade_to_float_no_complex,
)


def _xlogx(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1, x)))


xlogx = _unary(
    "xlogx",
    _xlogx,
    "(%(x)s == 0 ? (%(t)s)0 : %(x)s * log(%(x)s))",
    lambda x, out: _of(x).log(x) + 1,
    "x * log(x), 0 at x = 0 (its limit)",
)


class XLogY0(BinaryScalarOp):
    """``x * log(y)``, 0 where ``x`` is 0 (whatever ``y``: the entropy convention)."""

    nfunc = staticmethod(lambda x, y: np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1, y))))
    c_expr = "(%(x)s == 0 ? (%(t)s)0 : %(x)s * log(%(y)s))"

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        return [gz * _of(x).log(y), gz * x / y]


xlogy0 = XLogY0(upgrade_to_float, name="xlogy0")


class _Rounding(UnaryScalarOp):
    """Piecewise constant: zero gradient. floor, ceil and trunc of integers are floats, by
    Theano's rule (``upgrade_to_float``: int8 -> float32, int32 -> float64), where numpy 2
    keeps the integer dtype; the two roundings keep their input's dtype."""

    float_expr = None

    def c_template(self, in_dtypes, out_dtypes):
        return self.float_expr if out_dtypes[0] in float_dtypes else "(%(x)s)"

    def grad(self, inputs, output_grads):
        return zero_grads(inputs)


def _rounding(name, nfunc, c, out=same_out):
    attrs = {"nfunc": staticmethod(nfunc), "float_expr": c, "__module__": __name__}
    cls = type(name.capitalize(), (_Rounding,), attrs)
    globals()[cls.__name__] = cls
    return cls(out, name=name)


# numpy has no complex floor, ceil or trunc: a complex input is refused when the graph is
# built (Theano's), not when numpy meets it.
floor = _rounding("floor", np.floor, "floor(%(x)s)", upgrade_to_float_no_complex)
ceil = _rounding("ceil", np.ceil, "ceil(%(x)s)", upgrade_to_float_no_complex)
trunc = _rounding("trunc", np.trunc, "trunc(%(x)s)", upgrade_to_float_no_complex)
# rint rounds half to even in the default rounding mode, as numpy.round does.
round_half_to_even = _rounding("round_half_to_even", np.round, "rint(%(x)s)")
round_half_away_from_zero = _rounding(
    "round_half_away_from_zero", round_half_away_from_zero_vec, "round(%(x)s)", same_out_no_complex
)


class ArcTan2(BinaryScalarOp):
    """``arctan2(y, x)``: the angle of the point (x, y)."""

    nfunc = staticmethod(np.arctan2)
    c_expr = "atan2(%(x)s, %(y)s)"

    def grad(self, inputs, output_grads):
        y, x = inputs
        (gz,) = output_grads
        # In the output's float: an integer's square wraps (uint8 128 * 128 is 0).
        out, t = upgrade_to_float(y.dtype, x.dtype)[0], _of(gz)
        y, x = (v if v.dtype == out else t.cast(v, out) for v in (y, x))
        r2 = x * x + y * y
        return [gz * x / r2, -gz * y / r2]


arctan2 = ArcTan2(upgrade_to_float_no_complex, name="arctan2")


def _scipy_chi2sf(x, k):
    # chi2.sf(x, k) is the regularized upper incomplete gamma Q(k / 2, x / 2).
    return _scipy_special("gammaincc")(k / 2.0, x / 2.0)


class Chi2SF(BinaryScalarOp):
    """``chi2sf(x, k)``: the survival function of the chi-squared law with ``k`` degrees of
    freedom at ``x`` (``scipy.stats.chi2.sf``); no gradient, as in Theano."""

    nfunc = staticmethod(_scipy_chi2sf)


class _Bessel2(BinaryScalarOp):
    """``f(v, x)`` of order ``v``; the gradient in ``x`` by the recurrence
    ``d/dx f(v, x) = (f(v - 1, x) + sign * f(v + 1, x)) / 2``, none in ``v`` (Theano's)."""

    sign = -1

    def grad(self, inputs, output_grads):
        v, x = inputs
        (gz,) = output_grads
        # the function by its own name: an in-place copy of the op is named iv_inplace
        f = getattr(_of(x), self.function)
        dx = (f(v - 1, x) + self.sign * f(v + 1, x)) / 2
        return [grad_not_implemented(self, 0, v), gz * dx]


class Jv(_Bessel2):
    """``jv(v, x)``: the Bessel function of the first kind of real order ``v``."""

    function = "jv"
    nfunc = staticmethod(lambda v, x: _scipy_special("jv")(v, x))


class Iv(_Bessel2):
    """``iv(v, x)``: the modified Bessel function of the first kind of real order ``v``."""

    function = "iv"
    nfunc = staticmethod(lambda v, x: _scipy_special("iv")(v, x))
    sign = 1


# float64 whatever the inputs, as Theano
chi2sf = Chi2SF(upgrade_to_float64_no_complex, name="chi2sf")
jv = Jv(upgrade_to_float_no_complex, name="jv")
iv = Iv(upgrade_to_float_no_complex, name="iv")


# -- complex numbers ---------------------------------------------------------------
# None of these is holomorphic, so each writes its gradient in the convention of
# ScalarOp.L_op (a complex value's gradient is dC/d(re) + 1j * dC/d(im)). Their
# complex values have no C form: the engines run them on the host.


def _is_complex(v) -> bool:
    return v.dtype.startswith("complex")


class Conj(UnaryScalarOp):
    """The complex conjugate; the value itself for real dtypes."""

    nfunc = staticmethod(np.conj)
    compute_in_output_dtype = False
    complex_grad = True

    def c_template(self, in_dtypes, out_dtypes):
        # Real dtypes only reach C (complex ones run numpy on the host).
        return "(%(x)s)"

    def grad(self, inputs, output_grads):
        return [_of(inputs[0]).conj(output_grads[0])]


class Real(UnaryScalarOp):
    """The real part of a complex number (the value itself for reals)."""

    # np.real of a real array is that array: a copy, as the output owns its memory.
    nfunc = staticmethod(lambda x: np.array(np.real(x)))
    compute_in_output_dtype = False
    complex_grad = True

    def c_template(self, in_dtypes, out_dtypes):
        return "(%(x)s)"  # real dtypes only, as Conj

    def grad(self, inputs, output_grads):
        (x,), (gz,) = inputs, output_grads
        if not _is_complex(x):
            return [gz]
        return [_of(gz).complex(gz, _of(gz).zeros_like(gz))]


class Imag(UnaryScalarOp):
    """The imaginary part of a complex number (zero for reals)."""

    nfunc = staticmethod(np.imag)
    compute_in_output_dtype = False
    complex_grad = True

    def c_template(self, in_dtypes, out_dtypes):
        return "((%(t)s)0)"  # real dtypes only, as Conj

    def grad(self, inputs, output_grads):
        (x,), (gz,) = inputs, output_grads
        if not _is_complex(x):
            return zero_grads(inputs)
        return [_of(gz).complex(_of(gz).zeros_like(gz), gz)]


class Angle(UnaryScalarOp):
    """The argument of a complex number, ``arctan2(imag, real)`` (0 or pi for reals), in
    float64 whatever the input (Theano's type)."""

    # in float64 (complex128), the output's precision: numpy's angle of a float32 -1 is
    # float32's pi, 1e-7 from float64's, which the C expression gives
    nfunc = staticmethod(lambda z: np.angle(np.asarray(z, np.result_type(z, np.float64))))
    compute_in_output_dtype = False
    complex_grad = True

    def c_template(self, in_dtypes, out_dtypes):
        # Real dtypes only reach C: numpy's angle of a real is arctan2(0, x) (pi for
        # negatives and -0.0, NaN for NaN).
        return "atan2((%(t)s)0, (%(t)s)(%(x)s))"

    def grad(self, inputs, output_grads):
        (z,), (gz,) = inputs, output_grads
        if not _is_complex(z):
            return zero_grads(inputs)
        t = _of(gz)
        # angle = arctan2(y, x): d/dx = -y / r**2, d/dy = x / r**2, so the gradient is
        # gz * 1j * z / |z|**2.
        x, y = t.real(z), t.imag(z)
        r2 = x * x + y * y
        return [t.cast(t.complex(-gz * y / r2, gz * x / r2), z.dtype)]


def _complex_of(*dtypes):
    """complex64 from float32 and small integers, complex128 from the rest (Theano's rule);
    complex inputs are refused."""
    for d in dtypes:
        if d.startswith("complex"):
            raise TypeError(f"expected real inputs, got {d}")
    return (np.result_type(upgrade_to_float(*dtypes)[0], np.complex64).name,)


class Complex(BinaryScalarOp):
    """``real + 1j * imag`` from two real numbers."""

    nfunc = staticmethod(lambda x, y: np.asarray(x) + 1j * np.asarray(y))
    compute_in_output_dtype = False
    complex_grad = True

    def grad(self, inputs, output_grads):
        (x, y), (gz,) = inputs, output_grads
        t = _of(gz)
        return [t.cast(t.real(gz), _float_of(x)), t.cast(t.imag(gz), _float_of(y))]


class ComplexFromPolar(BinaryScalarOp):
    """``r * (cos(theta) + 1j * sin(theta))``: the complex number of modulus ``r`` and
    angle ``theta`` (complex64 from float32, complex128 from float64 and integers)."""

    nfunc = staticmethod(lambda r, theta: r * np.cos(theta) + 1j * r * np.sin(theta))
    compute_in_output_dtype = False
    complex_grad = True

    def grad(self, inputs, output_grads):
        (r, theta), (gz,) = inputs, output_grads
        t = _of(gz)
        # z = r e^{i theta}: dz/dr = e^{i theta}, dz/dtheta = i z; a real input's
        # gradient is Re(g * conj(dz/dinput)).
        c, s = t.cos(theta), t.sin(theta)
        gx, gy = t.real(gz), t.imag(gz)
        g_r = gx * c + gy * s
        g_theta = r * (gy * c - gx * s)
        return [t.cast(g_r, _float_of(r)), t.cast(g_theta, _float_of(theta))]


def _float_of(x):
    return x.dtype if x.dtype in float_dtypes else upgrade_to_float(x.dtype)[0]


conj = Conj(same_out, name="conj")
real = Real(real_out, name="real")
imag = Imag(real_out, name="imag")


def _float64_out(*dtypes):
    """float64 whatever the inputs (Theano's type for ``angle``); a named function, so
    that an op holding it can be described for the persistent caches
    (``graph.op_key``), which a lambda cannot."""
    return ("float64",)


angle = Angle(_float64_out, name="angle")
complex = Complex(_complex_of, name="complex")  # noqa: A001 (Theano's name)
complex_from_polar = ComplexFromPolar(_complex_of, name="complex_from_polar")
