"""Elementwise functions, reductions and ``dot`` (``theano.tensor`` math vocabulary).

Every elementwise function is an ``Elemwise(<scalar op>)`` instance; reductions are ``CAReduce``
subclasses plus ``Argmax``/``Argmin``; ``Dot`` covers vector/matrix products.
"""

from __future__ import annotations

import builtins

import numpy as np

from theano_dag import scalar as ts

# Ops of later modules that build on this one (basic, math) are reached through the
# package when called.
from theano_dag import tensor as _tensor
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.op import Op
from theano_dag.tensor.elemwise import (
    All,
    Any,
    CAReduce,
    DimShuffle,
    Elemwise,
    Max,
    Min,
    Prod,
    Sum,
    _norm_axis,
    reduce_grad_to,
)
from theano_dag.tensor.shape import reshape, shape_i
from theano_dag.tensor.type import TensorType, discrete_dtypes
from theano_dag.tensor.variable import as_tensor_variable, constant

__all__ = [
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
    "gammainc",
    "gammaincc",
    "conj",
    "real",
    "imag",
    "angle",
    "complex",
    "complex_from_polar",
    "ceil_intdiv",
    "isnan_",
    "isinf_",
    "is_flat",
    "cov",
    "add",
    "sub",
    "mul",
    "true_div",
    "int_div",
    "floor_div",
    "mod",
    "neg",
    "abs",
    "abs_",
    "sgn",
    "sign",
    "pow",
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "sqrt",
    "sqr",
    "square",
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
    "sigmoid",
    "softplus",
    "erf",
    "erfc",
    "gammaln",
    "gamma",
    "psi",
    "tri_gamma",
    "erfinv",
    "erfcinv",
    "erfcx",
    "erfcx_deriv",
    "log_erfc",
    "logaddexp",
    "log1mexp",
    "log1pexp",
    "betaln",
    "logsumexp",
    "maximum",
    "minimum",
    "clip",
    "floor",
    "ceil",
    "trunc",
    "round",
    "round_half_to_even",
    "round_half_away_from_zero",
    "iround",
    "lt",
    "gt",
    "le",
    "ge",
    "eq",
    "neq",
    "and_",
    "or_",
    "xor",
    "invert",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "switch",
    "where",
    "identity",
    "tensor_copy",
    "fma",
    "sum",
    "prod",
    "max",
    "min",
    "mean",
    "var",
    "std",
    "all",
    "any",
    "argmax",
    "argmin",
    "Argmax",
    "Argmin",
    "Dot",
    "dot",
    "outer",
]

_elemwise_cache: dict = {}


def _ew(scalar_op):
    if scalar_op not in _elemwise_cache:
        _elemwise_cache[scalar_op] = Elemwise(scalar_op)
    return _elemwise_cache[scalar_op]


# The docstrings of the elementwise ops below, by name. As in Theano, ``tt.add``,
# ``tt.mul``, ... are Elemwise Op *instances* (not functions), so that rewrites can say
# ``node.op == tt.true_div`` or ``PatternSub((tt.mul, "x", 1), "x")``. Each instance also
# carries its docstring; ``__test__`` makes doctest run the examples.
ELEMWISE_DOCS: dict = {}
__test__: dict = {}


def _make(scalar_op, name, doc, example=None):
    op = _ew(scalar_op)
    text = doc + (f"\n\n{example}" if example else "")
    ELEMWISE_DOCS[name] = text
    if example:
        __test__[name] = text
    if getattr(op, "__doc__", None) in (None, type(op).__doc__):
        op.__doc__ = text  # the first name an op gets (``abs`` before ``abs_``) documents it
    return op


_EX = """>>> from theano_dag import tensor as tt
>>> x = tt.dvector("x")
>>> {name}({args}).owner.op.scalar_op.name
'{op}'"""


def _unary(scalar_op, name, doc):
    return _make(scalar_op, name, doc, _EX.format(name=name, args="x", op=scalar_op.name))


def _binary(scalar_op, name, doc):
    return _make(scalar_op, name, doc, _EX.format(name=name, args="x, x", op=scalar_op.name))


add = _make(
    ts.add,
    "add",
    "Elementwise sum of any number of tensors.",
    _EX.format(name="add", args="x, x, 1", op="add"),
)
mul = _make(
    ts.mul,
    "mul",
    "Elementwise product of any number of tensors.",
    _EX.format(name="mul", args="x, 2", op="mul"),
)
sub = _binary(ts.sub, "sub", "``x - y``.")
true_div = _binary(
    ts.true_div, "true_div", "``x / y`` (integers divide to ``config.floatX``, as in Theano)."
)
int_div = _binary(ts.int_div, "int_div", "``x // y`` (floor division).")
floor_div = int_div
mod = _binary(ts.mod, "mod", "``x % y`` with the sign of ``y``, as Python.")
neg = _unary(ts.neg, "neg", "``-x``.")
abs = _unary(ts.abs_, "abs", "``|x|``.")  # noqa: A001 (Theano's name)
abs_ = abs
sgn = _unary(ts.sgn, "sgn", "The sign of ``x``: -1, 0 or 1.")
sign = sgn
pow = _binary(ts.pow, "pow", "``x ** y``.")  # noqa: A001
maximum = _binary(ts.maximum, "maximum", "Elementwise maximum (NaN propagates).")
minimum = _binary(ts.minimum, "minimum", "Elementwise minimum (NaN propagates).")
lt = _binary(ts.lt, "lt", "``x < y`` (bool).")
gt = _binary(ts.gt, "gt", "``x > y`` (bool).")
le = _binary(ts.le, "le", "``x <= y`` (bool).")
ge = _binary(ts.ge, "ge", "``x >= y`` (bool).")
eq = _binary(ts.eq, "eq", "``x == y`` elementwise (bool); Variables' ``==`` is identity.")
neq = _binary(ts.neq, "neq", "``x != y`` elementwise (bool).")
and_ = _make(ts.and_, "and_", "Bitwise and (logical and on bools).")
or_ = _make(ts.or_, "or_", "Bitwise or (logical or on bools).")
xor = _make(ts.xor, "xor", "Bitwise xor.")
invert = _make(ts.invert, "invert", "Bitwise not (logical not on bools).")
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = and_, or_, xor, invert
isnan = _unary(ts.isnan, "isnan", "True where ``x`` is NaN.")
isinf = _unary(ts.isinf, "isinf", "True where ``x`` is infinite.")
identity = _unary(ts.identity, "identity", "A copy of ``x``.")
tensor_copy = identity
fma = _make(ts.fma, "fma", "``x * y + z`` (one op, one rounding in C).")
arctan2 = _binary(ts.arctan2, "arctan2", "The angle of the point ``(x=b, y=a)``.")


def _u(name):
    """The tensor function of the unary scalar op ``name`` (doc from the scalar op)."""
    op = getattr(ts, name)
    return _unary(op, name, f"Elementwise {op.__doc__ or name}.")


exp = _u("exp")
exp2 = _u("exp2")
log = _u("log")
log2 = _u("log2")
log10 = _u("log10")
log1p = _u("log1p")
expm1 = _u("expm1")
sqrt = _u("sqrt")
sqr = _u("sqr")
reciprocal = _u("reciprocal")
sin = _u("sin")
cos = _u("cos")
tan = _u("tan")
arcsin = _u("arcsin")
arccos = _u("arccos")
arctan = _u("arctan")
sinh = _u("sinh")
cosh = _u("cosh")
tanh = _u("tanh")
sech2 = _u("sech2")
arcsinh = _u("arcsinh")
arccosh = _u("arccosh")
arctanh = _u("arctanh")
deg2rad = _u("deg2rad")
rad2deg = _u("rad2deg")
j0 = _u("j0")
j1 = _u("j1")
i0 = _u("i0")
i1 = _u("i1")
jv = _binary(ts.jv, "jv", "The Bessel function of the first kind of order ``v``: ``jv(v, x)``.")
iv = _binary(ts.iv, "iv", "The modified Bessel function of the first kind: ``iv(v, x)``.")
conj = _unary(ts.conj, "conj", "The complex conjugate (the value itself for reals).")
complex_from_polar = _binary(
    ts.complex_from_polar, "complex_from_polar", "``r * exp(1j * theta)`` from ``r, theta``."
)
_CX = """>>> import numpy as np
>>> from theano_dag import function, tensor as tt
>>> z = tt.zvector("z")
>>> f = function([z], [tt.real(z), tt.imag(z), tt.angle(z), abs(z)])
>>> [v.tolist() for v in f(np.array([3 + 4j, -1j]))]
[[3.0, -0.0], [4.0, -1.0], [0.9272952180016122, -1.5707963267948966], [5.0, 1.0]]
>>> tt.complex(tt.fvector(), tt.fvector()).type == tt.cvector
True"""
real = _make(
    ts.real, "real", "The real part of a complex tensor (the tensor itself for reals).", _CX
)
imag = _make(ts.imag, "imag", "The imaginary part of a complex tensor (zeros for reals).", _CX)
angle = _make(ts.angle, "angle", "The argument of a complex tensor, in float64 (Theano's).", _CX)
complex = _make(  # noqa: A001 (Theano's name)
    ts.complex,
    "complex",
    "``real + 1j * imag`` from two real tensors (complex64 from float32, else complex128).",
    _CX,
)
chi2sf = _binary(ts.chi2sf, "chi2sf", "The chi-squared survival function ``chi2sf(x, k)``.")
gammainc = _binary(
    ts.gammainc, "gammainc", "The regularized lower incomplete gamma function ``P(k, x)``."
)
gammaincc = _binary(
    ts.gammaincc, "gammaincc", "The regularized upper incomplete gamma function ``Q(k, x)``."
)
sigmoid = _u("sigmoid")
softplus = _u("softplus")
erf = _u("erf")
erfc = _u("erfc")
floor = _u("floor")
ceil = _u("ceil")
trunc = _u("trunc")
round_half_to_even = _u("round_half_to_even")
round_half_away_from_zero = _u("round_half_away_from_zero")
square, inv = sqr, reciprocal
gammaln = _u("gammaln")
gamma = _u("gamma")
psi = _u("psi")
tri_gamma = _u("tri_gamma")
erfinv = _u("erfinv")
erfcinv = _u("erfcinv")
erfcx = _u("erfcx")
log_erfc = _u("log_erfc")


def erfcx_deriv(x, order=1):
    """The ``order``-th derivative of :func:`erfcx` (its gradient): ``2 x erfcx(x) -
    2/sqrt(pi)`` for ``order=1``, computed without that form's cancellation for large
    ``x``, where the derivative is about ``-1 / (sqrt(pi) x**2)``.

    >>> import numpy as np
    >>> x = np.array([1.0, 1e6])
    >>> print(erfcx_deriv(x).eval())
    [-2.73212015e-01 -5.64189584e-13]
    >>> print(erfcx_deriv(x, order=2).eval())
    [3.08743123e-01 1.12837917e-18]
    """
    return _ew(ts.ErfcxDeriv(order))(x)


_logaddexp2 = _binary(ts.logaddexp, "logaddexp", "``log(exp(x) + exp(y))``.")


def logaddexp(*xs):
    """``log(exp(x1) + exp(x2) + ...)`` elementwise, without overflow or lost digits
    (``numpy.logaddexp`` for two arguments; more are added one at a time).

    >>> import numpy as np
    >>> print(f"{float(logaddexp(np.float64(1000.0), np.float64(1000.0)).eval()):.4f}")
    1000.6931
    """
    if len(xs) < 2:
        raise TypeError(f"logaddexp needs at least two arguments, got {len(xs)}")
    out = _logaddexp2(xs[0], xs[1])
    for x in xs[2:]:
        out = _logaddexp2(out, x)
    return out


log1mexp = _u("log1mexp")
log1pexp = softplus  # PyTensor's name
# xlogx and xlogy0 are reached as tensor.xlogx.xlogx, Theano's path (tensor.xlogx is
# the module there, so they are left out of __all__).
xlogx = _u("xlogx")
xlogy0 = _binary(ts.xlogy0, "xlogy0", "``x * log(y)``, 0 where ``x`` is 0.")


# Theano's names of the ops behind isnan and isinf (tensor.basic's isnan and isinf give
# known False for integers, without a node to run)
isnan_ = isnan
isinf_ = isinf


def ceil_intdiv(a, b):
    """``a // b`` rounded up: ``(a // b) + (a % b != 0)``.

    >>> import numpy as np
    >>> ceil_intdiv(np.array([7, -7, 6]), np.array([2, 2, 3])).eval()
    array([ 4, -3,  2])
    """
    div = int_div(a, b)
    return div + _tensor.basic.cast(neq(mod(a, b), 0), div.dtype)


def is_flat(var, ndim=None, outdim=None):
    """Whether ``var`` has ``ndim`` dimensions (1 by default; ``outdim`` is Theano's older
    name of the argument).

    >>> from theano_dag import tensor as tt
    >>> is_flat(tt.dvector()), is_flat(tt.dmatrix()), is_flat(tt.dmatrix(), ndim=2)
    (True, False, True)
    """
    if ndim is None:
        ndim = 1 if outdim is None else outdim
    return as_tensor_variable(var).ndim == ndim


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None):
    """The covariance matrix of the variables in ``m`` (``numpy.cov``; without weights).

    >>> import numpy as np
    >>> x = np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.5]])
    >>> np.allclose(cov(x).eval(), np.cov(x))
    True
    """
    if fweights is not None or aweights is not None:
        raise NotImplementedError("cov: fweights and aweights are not supported")
    m = as_tensor_variable(m)
    if m.ndim == 1:
        m = m.dimshuffle("x", 0)
    if not rowvar and m.ndim == 2:
        m = m.T
    if y is not None:
        y = as_tensor_variable(y)
        if y.ndim == 1:
            y = y.dimshuffle("x", 0)
        if not rowvar:
            y = y.T
        m = _tensor.basic.concatenate([m, y], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    n = _tensor.basic.cast(shape_i(m, 1), "float64")
    centred = m - mean(m, axis=1, keepdims=True)
    c = dot(centred, centred.T) / (n - ddof)
    return c


def betaln(a, b):
    """``log(B(a, b)) = gammaln(a) + gammaln(b) - gammaln(a + b)``.

    >>> import numpy as np
    >>> print(f"{float(betaln(np.float64(2.0), np.float64(3.0)).eval()):.6f}")
    -2.484907
    """
    return gammaln(a) + gammaln(b) - gammaln(a + b)


def logsumexp(x, axis=None, keepdims=False):
    """``log(sum(exp(x), axis))`` without overflow: the max ``m`` is taken out first,
    ``m + log(sum(exp(x - m)))``: inf where ``x`` has a +inf, with the softmax's limit
    as its gradient (the mass shared among the +inf), -inf for a slice of -inf alone and
    over an axis of length 0 (the log of an empty sum).

    >>> import numpy as np
    >>> print(f"{float(logsumexp(np.array([1000.0, 1000.0])).eval()):.4f}")
    1000.6931
    """
    x = as_tensor_variable(x)
    axis = _norm_axis(axis, x.ndim, "logsumexp")
    if x.dtype in discrete_dtypes:
        # In the float exp gives them (int8: float32), as log(sum(exp(x))) computes: the
        # shift's -inf test has no integer to compare with.
        x = _tensor.basic.cast(x, ts.upgrade_to_float(x.dtype)[0])
    terms, m = _log_sum_exp_terms(x, axis)
    return _keep(log(sum(terms, axis=axis)) + m, x, axis, keepdims)


def _log_sum_exp_terms(x, axis):
    """``(exp(x - m), m)``, the terms and the shift of a stable log-sum-exp ``m +
    log(sum(exp(x - m), axis))``: ``m`` the max over ``axis``, or 0 where that is -inf (a
    slice of -inf alone, whose terms are then 0: the value -inf). A +inf max stays: the
    terms (``ExpSub``, 1 where ``x == m``) are 1 at each +inf, 0 elsewhere, so that the
    value is inf and its gradient, ``terms / sum``, the softmax's limit.

    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> terms, m = _log_sum_exp_terms(x, (1,))
    >>> terms.eval({x: np.array([[np.inf, 0.0], [0.0, np.log(3.0)], [-np.inf, -np.inf]])})
    array([[1.        , 0.        ],
           [0.33333333, 1.        ],
           [0.        , 0.        ]])
    """
    # Over an axis of length 0 the shift is -inf (then 0 below), not numpy's error for
    # a max of nothing: the value there is log(0) = -inf, as log(sum(exp(x))) gives.
    m = Max(axis=axis, empty_identity=True)(x)
    # -inf - -inf would be NaN
    m = switch(
        eq(m, constant(np.asarray(-np.inf, dtype=m.dtype))),
        constant(np.asarray(0, dtype=m.dtype)),
        m,
    )
    return _ew(ts.exp_sub)(x, _keep(m, x, axis, True)), m


def clip(x, a_min, a_max):
    """Limit ``x`` to ``[a_min, a_max]`` (as ``numpy.clip``).

    >>> from theano_dag import tensor as tt
    >>> clip(tt.dvector("x"), 0, 1).owner.op.scalar_op.name
    'clip'
    """
    return _ew(ts.clip)(x, a_min, a_max)


# An op, as Theano's (``node.op == tt.switch`` is how its users recognise a switch).
switch = _make(
    ts.switch,
    "switch",
    "``ift`` where ``cond`` is nonzero, else ``iff`` (``numpy.where``): "
    "``switch(cond, ift, iff)``.",
    """>>> from theano_dag import tensor as tt
>>> x = tt.dvector("x")
>>> y = switch(x > 0, x, 0)
>>> y.dtype, y.owner.op == switch
('float64', True)""",
)


def where(cond, ift=None, iff=None):
    """``numpy.where`` with three arguments (an alias of ``switch``)."""
    if ift is None or iff is None:
        raise TypeError(
            "where: the one-argument form (nonzero) is not supported; " "pass where(cond, ift, iff)"
        )
    return switch(cond, ift, iff)


def round(a, mode=None):  # noqa: A001 (Theano's name)
    """Round: ``mode`` is 'half_to_even' (default, as numpy) or 'half_away_from_zero'."""
    if mode in (None, "half_to_even"):
        return round_half_to_even(a)
    if mode == "half_away_from_zero":
        return round_half_away_from_zero(a)
    raise ValueError(
        f"round: mode must be 'half_to_even' or 'half_away_from_zero', " f"got {mode!r}"
    )


def iround(a, mode=None):
    """Round then cast to int64."""
    return _tensor.basic.cast(round(a, mode), "int64")


# -- reductions -------------------------------------------------------------------


def _keep(out, x, axis, keepdims):
    if not keepdims:
        return out
    axes = range(x.ndim) if axis is None else axis
    order, k = [], 0
    for d in range(x.ndim):
        if d in axes:
            order.append("x")
        else:
            order.append(k)
            k += 1
    return DimShuffle(out.broadcastable, order)(out)


def _reduce(op_cls, x, axis, keepdims, **kw):
    x = as_tensor_variable(x)
    axis = _norm_axis(axis, x.ndim, op_cls.__name__.lower())
    out = op_cls(axis=axis, **kw)(x)
    return _keep(out, x, axis, keepdims)


def sum(x, axis=None, dtype=None, keepdims=False, acc_dtype=None):  # noqa: A001
    """Sum over ``axis`` (None: all); integers sum in int64 as in numpy.

    >>> from theano_dag import tensor as tt
    >>> x = tt.fmatrix("x")
    >>> sum(x, axis=0).type, sum(x, axis=1, keepdims=True).broadcastable
    (TensorType(float32, vector), (False, True))
    """
    return _reduce(Sum, x, axis, keepdims, dtype=dtype, acc_dtype=acc_dtype)


def prod(x, axis=None, dtype=None, keepdims=False, acc_dtype=None, no_zeros_in_input=False):
    """Product over ``axis``. ``no_zeros_in_input``: Theano's promise that ``x`` has no
    zero; accepted, and it changes nothing (the gradient is exact with zeros too).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> prod(x, axis=1, no_zeros_in_input=True).eval({x: np.array([[2.0, 3.0], [4.0, 5.0]])})
    array([ 6., 20.])
    """
    return _reduce(Prod, x, axis, keepdims, dtype=dtype, acc_dtype=acc_dtype)


def max(x, axis=None, keepdims=False):  # noqa: A001
    """Maximum over ``axis``."""
    return _reduce(Max, x, axis, keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    """Minimum over ``axis``."""
    return _reduce(Min, x, axis, keepdims)


def all(x, axis=None, keepdims=False):  # noqa: A001
    """True where every element over ``axis`` is nonzero."""
    return _reduce(All, x, axis, keepdims)


def any(x, axis=None, keepdims=False):  # noqa: A001
    """True where some element over ``axis`` is nonzero."""
    return _reduce(Any, x, axis, keepdims)


def _count(x, axis):
    axes = range(x.ndim) if axis is None else axis
    n = None
    for a in axes:
        s = shape_i(x, a)
        n = s if n is None else n * s
    return n


def mean(x, axis=None, dtype=None, keepdims=False, acc_dtype=None):
    """Mean over ``axis``; integer inputs give float64 (as numpy).

    >>> from theano_dag import tensor as tt
    >>> mean(tt.fvector("x")).dtype, mean(tt.ivector("i")).dtype
    ('float32', 'float64')
    """
    cast = _tensor.basic.cast
    x = as_tensor_variable(x)
    axis = _norm_axis(axis, x.ndim, "mean")
    # float16 sums and counts overflow past 65504: they are taken in float32 and the
    # mean cast back to float16 (Theano's).
    half = dtype is None and x.dtype == "float16"
    if dtype is None and acc_dtype is None and x.dtype in discrete_dtypes:
        # Integers add up in float64, as numpy's mean does: an int64 sum wraps (Theano's
        # mean of [2**62, 2**62] was -2**62).
        dtype = "float64"
    s = sum(x, axis=axis, dtype="float32" if half else dtype, acc_dtype=acc_dtype)
    if s.dtype in discrete_dtypes:
        s = cast(s, "float64")
    n = _count(x, axis)
    if n is not None:
        s = s / cast(n, s.dtype)
    if half:
        s = cast(s, "float16")
    return _keep(s, x, axis, keepdims)


def var(x, axis=None, ddof=0, keepdims=False, corrected=False):
    """Variance over ``axis`` with ``ddof`` delta degrees of freedom (the sum of the
    squared deviations divided by the count less ``ddof``, as numpy's).

    ``corrected=True`` is the corrected two-pass algorithm (Chan, Golub and LeVeque,
    1983): the square of the deviations' own sum, which is zero in exact arithmetic,
    is subtracted (divided by ``n (n - ddof)``) to cancel the rounding error of the
    mean. It leaves ``ddof`` as it is and changes the value only by rounding.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> print(f"{float(var(x, ddof=1, corrected=True).eval({x: np.array([1.0, 2.0, 4.0])})):.6f}")
    2.333333
    """
    cast = _tensor.basic.cast
    x = as_tensor_variable(x)
    axis = _norm_axis(axis, x.ndim, "var")
    if x.dtype in discrete_dtypes:
        x = cast(x, "float64")
    centered = x - mean(x, axis=axis, keepdims=True)
    v = mean(sqr(centered), axis=axis)
    if ddof or corrected:
        n = cast(_count(x, axis), v.dtype)
    if ddof:
        # numpy's divisor is max(n - ddof, 0): with no more values than ddof the variance
        # is 0 / 0, NaN. With n - ddof, the rewrites' cancelling of n turned the variance
        # over an empty axis into 0 / -1, -0.0.
        d = maximum(n - ddof, 0)
        v = v * n / d
    if corrected:
        v = v - sqr(sum(centered, axis=axis)) / (n * (d if ddof else n))
    return _keep(v, x, axis, keepdims)


def std(x, axis=None, ddof=0, keepdims=False, corrected=False):
    """Standard deviation over ``axis``."""
    return sqrt(var(x, axis=axis, ddof=ddof, keepdims=keepdims, corrected=corrected))


class Argmax(Op):
    """Index of the maximum along ``axis`` (None: of the flattened input), as int64."""

    __props__ = ("axis",)
    _fn = staticmethod(np.argmax)

    def __init__(self, axis=None):
        self.axis = axis

    def make_node(self, x):
        x = as_tensor_variable(x)
        if self.axis is not None and not -x.ndim <= self.axis < builtins.max(x.ndim, 1):
            raise ValueError(
                f"{type(self).__name__}: axis {self.axis} is out of range for "
                f"the {x.ndim}-d input {x}"
            )
        shape = (
            ()
            if self.axis is None
            else tuple(s for d, s in enumerate(x.type.shape) if d != self.axis % x.ndim)
        )
        return Apply(self, [x], [TensorType("int64", shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(self._fn(inputs[0], axis=self.axis), dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        if self.axis is None:
            return [()]
        a = self.axis % node.inputs[0].ndim
        return [tuple(s for d, s in enumerate(input_shapes[0]) if d != a)]

    def L_op(self, inputs, outputs, output_grads):
        x = inputs[0]
        return [
            _tensor.basic.zeros_like(
                x, dtype=x.dtype if x.dtype not in discrete_dtypes else config.floatX
            )
        ]


class Argmin(Argmax):
    """Index of the minimum along ``axis``."""

    _fn = staticmethod(np.argmin)


def argmax(x, axis=None, keepdims=False):
    """Index of the maximum along ``axis`` (int64).

    >>> from theano_dag import tensor as tt
    >>> argmax(tt.dmatrix("x"), axis=1).type
    TensorType(int64, vector)
    """
    return _arg(Argmax, x, axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    """Index of the minimum along ``axis`` (int64)."""
    return _arg(Argmin, x, axis, keepdims)


def _arg(cls, x, axis, keepdims):
    x = as_tensor_variable(x)
    if isinstance(axis, (list, tuple)) and len(axis) > 1:
        # Several axes (Theano's argmax): the index into those axes flattened, in order.
        axes = sorted(set(_norm_axis(list(axis), x.ndim, cls.__name__.lower())))
        kept = [d for d in range(x.ndim) if d not in axes]
        moved = x.dimshuffle(kept + axes)
        flat = reshape(moved, [shape_i(x, d) for d in kept] + [-1], ndim=len(kept) + 1)
        out = cls(len(kept))(flat)
        return _keep(out, x, axes, keepdims)
    if isinstance(axis, (list, tuple)):
        if not axis:
            raise ValueError(f"{cls.__name__.lower()}: axis must not be empty")
        axis = axis[0]
    if axis is not None:
        axis = _norm_axis(axis, x.ndim, cls.__name__.lower())[0]
    out = cls(axis)(x)
    return _keep(out, x, None if axis is None else (axis,), keepdims)


# -- dot ----------------------------------------------------------------------------


def dot_shape(op, node, input_shapes):
    """The shape of a product ``op(x, y, ...)`` (``Dot``, ``Dot22``...) from the
    shapes of ``x`` and ``y``: ``x``'s lengths but the last, then ``y``'s but the first;
    each checks that the inner lengths (``x``'s last, ``y``'s first) agree where they are
    not known to, as the product would (``checked_shape``).

    >>> from theano_dag import tensor as tt
    >>> m, v = tt.dmatrix("m"), tt.dvector("v")
    >>> node = dot(m, v).owner
    >>> dot_shape(node.op, node, [(2, 4), (4,)])
    (2,)
    """
    xs, ys = input_shapes[0], input_shapes[1]
    out = tuple(xs[:-1]) + tuple(ys[1:])
    if not xs or not ys:
        return out  # a scalar operand: no inner length
    x, y = node.inputs[0], node.inputs[1]
    names = (f"{x} along dimension {x.ndim - 1}", f"{y} along dimension 0")
    return _tensor.checked_shape(out, [xs[-1], ys[0]], f"{op}: the inner lengths", names)


class Dot(Op):
    """Matrix/vector product of two tensors of 1 or 2 dimensions (numpy.dot).

    >>> from theano_dag import tensor as tt
    >>> Dot()(tt.dmatrix("a"), tt.dvector("v")).type
    TensorType(float64, vector)
    """

    __props__ = ()

    def make_node(self, x, y):
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        for k, v in enumerate((x, y)):
            if v.ndim not in (1, 2):
                raise TypeError(
                    f"Dot: input {k} ({v}) must be a vector or a matrix, got "
                    f"{v.ndim} dimensions (use tensordot for more)"
                )
        kx, ky = x.type.shape[-1], y.type.shape[0]
        if kx is not None and ky is not None and kx != ky:
            raise ValueError(f"Dot: shapes {x.type.shape} and {y.type.shape} are not aligned")
        shape = x.type.shape[:-1] + y.type.shape[1:]
        dtype = ts.upcast(x.dtype, y.dtype)
        return Apply(self, [x, y], [TensorType(dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y = inputs
        if x.shape[-1] != y.shape[0]:
            raise ValueError(
                f"Dot: shapes {x.shape} and {y.shape} are not aligned "
                f"({x.shape[-1]} != {y.shape[0]})"
            )
        output_storage[0][0] = np.asarray(np.dot(x, y), dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [dot_shape(self, node, input_shapes)]

    def L_op(self, inputs, outputs, output_grads):
        x, y = inputs
        # An integer product is piecewise constant: zero gradients, in the gradient's
        # float dtype (before any product is built for it).
        if outputs[0].dtype in discrete_dtypes:
            return [_tensor.basic.zeros_like(v, dtype=output_grads[0].dtype) for v in (x, y)]

        def formula(grads):
            (gz,) = grads
            if x.ndim == 2 and y.ndim == 2:
                return [dot(gz, y.T), dot(x.T, gz)]
            if x.ndim == 1 and y.ndim == 2:
                return [dot(y, gz), outer(x, gz)]
            if x.ndim == 2 and y.ndim == 1:
                return [outer(gz, y), dot(x.T, gz)]
            return [gz * y, gz * x]

        # Complex operands: conj(y) and conj(x) in the products (ts.holomorphic_grads).
        gx, gy = ts.holomorphic_grads(formula, inputs, outputs, output_grads)
        # An integer operand of a float product gets the gradient as if it were real
        # (Theano's), in that float dtype (reduce_grad_to keeps it).
        return [reduce_grad_to(g, v) for g, v in ((gx, x), (gy, y))]

    def R_op(self, inputs, eval_points):
        x, y = inputs
        ex, ey = eval_points
        terms = []
        if ex is not None:
            terms.append(dot(ex, y))
        if ey is not None:
            terms.append(dot(x, ey))
        return [add(*terms) if len(terms) > 1 else terms[0]] if terms else [None]


_dot = Dot()


def _foreign(v):
    """Whether ``v`` is a variable whose type is not a tensor's (a sparse matrix)."""
    return isinstance(v, Variable) and not isinstance(v.type, TensorType)


def dot(a, b):
    """``numpy.dot``: scalars, vectors, matrices, and tensors of more dimensions (the
    last axis of ``a`` with the second-to-last of ``b``, as numpy and Theano do).

    >>> from theano_dag import tensor as tt
    >>> dot(tt.dvector("u"), tt.dvector("v")).ndim, dot(2, tt.dmatrix("m")).ndim
    (0, 2)
    >>> dot(tt.dtensor3("x"), tt.dmatrix("w")).ndim  # a recurrent layer's inputs
    3
    """
    # A variable of another type (a sparse matrix) brings its own product, as in Theano.
    for v, method, other in ((a, "__dot__", b), (b, "__rdot__", a)):
        if _foreign(v) and hasattr(v, method):
            return getattr(v, method)(other)
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.ndim == 0 or b.ndim == 0:
        return mul(a, b)
    if b.ndim <= 2 < a.ndim:
        # (..., k) by (k,) or (k, n): one matrix product over all the rows of a, so the
        # engines run it as the BLAS product they plan, not as a general contraction.
        rows = _dot(reshape(a, (-1, shape_i(a, a.ndim - 1)), ndim=2), b)
        lead = [shape_i(a, d) for d in range(a.ndim - 1)]
        tail = [shape_i(b, 1)] if b.ndim == 2 else []
        return reshape(rows, lead + tail, ndim=a.ndim + b.ndim - 2)
    if a.ndim > 2 or b.ndim > 2:
        # the module, not an import: tensor.contractions is built on this one
        return _tensor.contractions.tensordot(a, b, [[a.ndim - 1], [b.ndim - 2]])
    return _dot(a, b)


def outer(x, y):
    """Outer product of two vectors (flattened first if they are not vectors).

    >>> from theano_dag import tensor as tt
    >>> outer(tt.dvector("u"), tt.dvector("v")).ndim
    2
    """
    x, y = as_tensor_variable(x), as_tensor_variable(y)
    if x.ndim != 1:
        x = x.flatten()
    if y.ndim != 1:
        y = y.flatten()
    return dot(x.dimshuffle(0, "x"), y.dimshuffle("x", 0))


# CAReduce is re-exported so `tt.math.CAReduce` works as in PyTensor.
_ = CAReduce
