"""Arithmetic, comparison, logic, ``switch`` and ``cast`` scalar ops.

Gradients here are written with tensor ops (``T`` = ``theano_dag.tensor.math``);
``Elemwise`` only asks for them on float inputs of float outputs, and sums the
result over broadcast dimensions itself.
"""

from __future__ import annotations

import numpy as np

from theano_dag.scalar.basic import (
    C_TYPES,
    BinaryScalarOp,
    ScalarOp,
    UnaryScalarOp,
    as_scalar,
    bool_out,
    discrete_dtypes,
    float_dtypes,
    get_scalar_type,
    real_out,
    same_out,
    specific_out,
    transfer_type,
    true_div_out,
    upcast,
    upcast_out,
    upcast_out_nobool,
    vocabulary,
    zero_grads,
)

__all__ = [
    "Add",
    "Sub",
    "Mul",
    "TrueDiv",
    "IntDiv",
    "Mod",
    "Neg",
    "Abs",
    "Sgn",
    "Pow",
    "Maximum",
    "Minimum",
    "Clip",
    "LT",
    "GT",
    "LE",
    "GE",
    "EQ",
    "NEQ",
    "AND",
    "OR",
    "XOR",
    "Invert",
    "Switch",
    "Cast",
    "Identity",
    "Second",
    "FMA",
    "IsNan",
    "IsInf",
    "add",
    "sub",
    "mul",
    "true_div",
    "int_div",
    "mod",
    "neg",
    "abs_",
    "sgn",
    "pow",
    "maximum",
    "minimum",
    "clip",
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
    "switch",
    "identity",
    "second",
    "fma",
    "isnan",
    "isinf",
    "cast",
    "convert_to",
]


def _is_float(dtype):
    return dtype in float_dtypes


# -- arithmetic ------------------------------------------------------------------


class Add(ScalarOp):
    nfunc = staticmethod(lambda *xs: _fold(np.add, xs))
    commutative = associative = True
    identity = 0
    c_infix = " + "

    def c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES):
        if out_dtypes[0] == "bool":  # numpy: bool + bool is logical or
            return ["(" + " || ".join(inputs) + ")"]
        return super().c_code(inputs, in_dtypes, out_dtypes, types)

    def grad(self, inputs, output_grads):
        return [output_grads[0]] * len(inputs)


class Mul(ScalarOp):
    nfunc = staticmethod(lambda *xs: _fold(np.multiply, xs))
    commutative = associative = True
    identity = 1
    c_infix = " * "

    def c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES):
        if out_dtypes[0] == "bool":
            return ["(" + " && ".join(inputs) + ")"]
        return super().c_code(inputs, in_dtypes, out_dtypes, types)

    def grad(self, inputs, output_grads):
        (gz,) = output_grads
        T = vocabulary(gz)
        out = []
        for i in range(len(inputs)):
            others = inputs[:i] + inputs[i + 1 :]
            if not others:
                out.append(gz)
            elif len(others) == 1:
                out.append(gz * others[0])
            else:
                out.append(gz * T.mul(*others))
        return out


def _fold(fn, xs):
    out = xs[0]
    for x in xs[1:]:
        out = fn(out, x)
    return out


class Sub(BinaryScalarOp):
    nfunc = staticmethod(np.subtract)
    c_expr = "(%(x)s - %(y)s)"

    def grad(self, inputs, output_grads):
        (gz,) = output_grads
        return [gz, -gz]


class TrueDiv(BinaryScalarOp):
    nfunc = staticmethod(np.true_divide)
    c_expr = "(%(x)s / %(y)s)"

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        return [gz / y, -gz * x / (y * y)]


class IntDiv(BinaryScalarOp):
    """Floor division, as Python's ``//`` (C's ``/`` truncates, so ints need care)."""

    nfunc = staticmethod(np.floor_divide)

    def c_template(self, in_dtypes, out_dtypes):
        if _is_float(out_dtypes[0]):
            # numpy's divmod algorithm, inline (floor(x / y) differs: 1 // 0.1 is 9 and
            # inf // 2 is NaN in numpy): d = (x - fmod(x, y)) / y, one less where the
            # remainder's sign is not the divisor's, then rounded to the nearest integer.
            m = "fmod(%(x)s, %(y)s)"
            d = (
                f"((%(x)s - {m}) / %(y)s - (({m} != 0 && ((%(y)s < 0) != ({m} < 0))) "
                "? (%(t)s)1 : (%(t)s)0))"
            )
            return (
                f"(%(y)s == 0 ? %(x)s / %(y)s : ({d} != 0 ? floor({d}) + "
                f"({d} - floor({d}) > (%(t)s)0.5 ? (%(t)s)1 : (%(t)s)0) : "
                "copysign((%(t)s)0, %(x)s / %(y)s)))"
            )
        return (
            "(%(y)s == 0 ? (%(t)s)0 : (%(t)s)(%(x)s / %(y)s - "
            "((%(x)s %% %(y)s != 0) && ((%(x)s < 0) != (%(y)s < 0)))))"
        )

    def grad(self, inputs, output_grads):
        return zero_grads(inputs)


class Mod(BinaryScalarOp):
    """Python's ``%``: the result takes the sign of the divisor."""

    nfunc = staticmethod(np.mod)

    def c_template(self, in_dtypes, out_dtypes):
        if _is_float(out_dtypes[0]):
            return (
                "(fmod(%(x)s, %(y)s) + ((fmod(%(x)s, %(y)s) != 0 && "
                "((fmod(%(x)s, %(y)s) < 0) != (%(y)s < 0))) ? %(y)s : (%(t)s)0))"
            )
        return (
            "(%(y)s == 0 ? (%(t)s)0 : (%(t)s)((%(x)s %% %(y)s) + "
            "(((%(x)s %% %(y)s) != 0 && (((%(x)s %% %(y)s) < 0) != (%(y)s < 0))) "
            "? %(y)s : 0)))"
        )

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        return [gz, -gz * vocabulary(gz).int_div(x, y)]


class Neg(UnaryScalarOp):
    nfunc = staticmethod(np.negative)
    c_expr = "(-%(x)s)"

    def grad(self, inputs, output_grads):
        return [-output_grads[0]]


class Abs(UnaryScalarOp):
    """``|x|``; the modulus of a complex ``x``, real (float32 of complex64, as Theano)."""

    nfunc = staticmethod(np.abs)
    complex_grad = True
    compute_in_output_dtype = False

    def c_template(self, in_dtypes, out_dtypes):
        d = out_dtypes[0]
        if _is_float(d):
            return "fabs(%(x)s)"
        if d == "bool" or d.startswith("uint"):
            return "(%(x)s)"
        return "(%(x)s < 0 ? -%(x)s : %(x)s)"

    def grad(self, inputs, output_grads):
        (x,), (gz,) = inputs, output_grads
        if x.dtype.startswith("complex"):
            # d|z|/d(re) + 1j d|z|/d(im) = z / |z|
            return [gz * x / abs(x)]
        return [gz * vocabulary(gz).sgn(x)]


class Sgn(UnaryScalarOp):
    nfunc = staticmethod(np.sign)

    def c_template(self, in_dtypes, out_dtypes):
        if _is_float(out_dtypes[0]):  # sign(nan) is nan, as in numpy
            return "(%(x)s != %(x)s ? %(x)s : (%(t)s)((%(x)s > 0) - (%(x)s < 0)))"
        return "(%(t)s)((%(x)s > 0) - (%(x)s < 0))"

    def grad(self, inputs, output_grads):
        return zero_grads(inputs)


class Pow(BinaryScalarOp):
    nfunc = staticmethod(np.power)

    def c_template(self, in_dtypes, out_dtypes):
        if _is_float(out_dtypes[0]):
            return "pow(%(x)s, %(y)s)"
        # Rounded, not truncated: a device's pow may land one ulp below an exact integer
        # power (NVIDIA's OpenCL gave -6858.99... for (-19)**3, truncated to -6858).
        return "(%(t)s)rint(pow((double)%(x)s, (double)%(y)s))"

    def L_op(self, inputs, outputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        T = vocabulary(gz)
        gx = gz * y * T.pow(x, y - 1)
        # d/dy x**y = log(x) x**y, taken as 0 at x == 0 (where x**y is 0 for y > 0).
        gy = T.switch(T.eq(x, 0), 0, gz * T.log(x) * outputs[0])
        return [gx, gy]


class Maximum(BinaryScalarOp):
    """Elementwise max; NaN propagates, as in numpy."""

    nfunc = staticmethod(np.maximum)
    commutative = associative = True
    identity = -np.inf

    def c_template(self, in_dtypes, out_dtypes):
        if _is_float(out_dtypes[0]):
            # NaN-propagating with one comparison per branch: GCC if-converts (and so
            # vectorizes) a loop holding these and a libmvec call; with ``a || b`` in
            # one condition it kept branches once a loop had three, and the whole
            # fused loop ran scalar (the 40-op chain of benchmarks/dask_engine.py:
            # 3.4x slower).
            return "((%(y)s != %(y)s) ? %(y)s : (!(%(x)s <= %(y)s) ? %(x)s : %(y)s))"
        return "(%(x)s > %(y)s ? %(x)s : %(y)s)"

    def L_op(self, inputs, outputs, output_grads):
        # At a tie the first input equal to the result takes the whole gradient and
        # the others none (Theano's and PyTensor's convention), so that
        # grad(maximum(x, x)) is 1, as finite differences say, not 2. The last input
        # takes what no earlier one took (also the NaN case, as theirs do).
        (gz,) = output_grads
        T = vocabulary(gz)
        grads, free = [], None
        for x in inputs[:-1]:
            tie = T.eq(outputs[0], x)
            grads.append(gz * (tie if free is None else T.and_(free, tie)))
            free = T.invert(tie) if free is None else T.and_(free, T.invert(tie))
        grads.append(gz * free)
        return grads


class Minimum(Maximum):
    nfunc = staticmethod(np.minimum)
    identity = np.inf

    def c_template(self, in_dtypes, out_dtypes):
        if _is_float(out_dtypes[0]):
            return "((%(y)s != %(y)s) ? %(y)s : (!(%(x)s >= %(y)s) ? %(x)s : %(y)s))"
        return "(%(x)s < %(y)s ? %(x)s : %(y)s)"


class Clip(ScalarOp):
    """``clip(x, lo, hi)`` = ``minimum(maximum(x, lo), hi)``, as numpy computes it."""

    nin = 3
    nfunc = staticmethod(lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi))
    # maximum then minimum, NaN-propagating as numpy's (a NaN bound gives NaN).
    _m = "((%(x)s > %(y)s || %(x)s != %(x)s) ? %(x)s : %(y)s)"
    c_expr = f"(({_m} < %(z)s || {_m} != {_m}) ? {_m} : %(z)s)"

    def grad(self, inputs, output_grads):
        x, lo, hi = inputs
        (gz,) = output_grads
        T = vocabulary(gz)
        inside = T.and_(T.ge(x, lo), T.le(x, hi))
        # The bound numpy's order picks gets the gradient, also when lo > hi (then hi wins,
        # so clip(x, 0, x) is x everywhere): lo when x < lo <= hi, hi when max(x, lo) > hi.
        lo_wins = T.and_(T.lt(x, lo), T.le(lo, hi))
        hi_wins = T.gt(T.maximum(x, lo), hi)
        return [T.switch(inside, gz, 0), T.switch(lo_wins, gz, 0), T.switch(hi_wins, gz, 0)]


# -- comparisons and logic ----------------------------------------------------------


class _Compare(BinaryScalarOp):
    compute_in_output_dtype = False

    def __init__(self, output_types_preference=bool_out, name=None):
        super().__init__(output_types_preference, name)

    def compute(self, inputs, out_dtypes):
        # Compare in the common dtype, as numpy and C both do.
        d = upcast(*[np.asarray(i).dtype for i in inputs])
        return super().compute([np.asarray(i, dtype=d) for i in inputs], out_dtypes)

    def grad(self, inputs, output_grads):
        return zero_grads(inputs)


def _compare(name, fn, sym):
    cls = type(
        name,
        (_Compare,),
        {
            "nfunc": staticmethod(fn),
            "c_expr": f"(%(x)s {sym} %(y)s)",
            "__doc__": f"``x {sym} y`` elementwise (bool output).",
            "__module__": __name__,
        },
    )
    return cls


LT = _compare("LT", np.less, "<")
GT = _compare("GT", np.greater, ">")
LE = _compare("LE", np.less_equal, "<=")
GE = _compare("GE", np.greater_equal, ">=")
EQ = _compare("EQ", np.equal, "==")
NEQ = _compare("NEQ", np.not_equal, "!=")
EQ.commutative = NEQ.commutative = True


class _Bitwise(BinaryScalarOp):
    commutative = associative = True
    input_kinds = "biu"

    def grad(self, inputs, output_grads):
        return zero_grads(inputs)


class AND(_Bitwise):
    nfunc = staticmethod(np.bitwise_and)
    c_expr = "(%(x)s & %(y)s)"
    identity = True


class OR(_Bitwise):
    nfunc = staticmethod(np.bitwise_or)
    c_expr = "(%(x)s | %(y)s)"
    identity = False


class XOR(_Bitwise):
    nfunc = staticmethod(np.bitwise_xor)
    c_expr = "(%(x)s ^ %(y)s)"
    identity = False


class Invert(UnaryScalarOp):
    """Bitwise not; logical not on bools."""

    nfunc = staticmethod(np.invert)
    input_kinds = "biu"

    def c_template(self, in_dtypes, out_dtypes):
        return "(!%(x)s)" if out_dtypes[0] == "bool" else "(~%(x)s)"

    def grad(self, inputs, output_grads):
        return zero_grads(inputs)


class IsNan(UnaryScalarOp):
    nfunc = staticmethod(np.isnan)
    compute_in_output_dtype = False

    def c_template(self, in_dtypes, out_dtypes):
        return "(%(x)s != %(x)s)" if _is_float(in_dtypes[0]) else "0"

    def grad(self, inputs, output_grads):
        return zero_grads(inputs)


class IsInf(IsNan):
    nfunc = staticmethod(np.isinf)

    def c_template(self, in_dtypes, out_dtypes):
        return "(isinf(%(x)s) != 0)" if _is_float(in_dtypes[0]) else "0"


# -- switch, cast, identity, fma ------------------------------------------------


class Switch(ScalarOp):
    """``switch(cond, a, b)``: ``a`` where ``cond`` is nonzero, else ``b`` (numpy.where)."""

    nin = 3
    compute_in_output_dtype = False
    nfunc = staticmethod(np.where)
    # "!= 0" because OpenCL C refuses a floating-point condition in "?:".
    c_expr = "((%(x)s) != 0 ? %(y)s : %(z)s)"

    def __init__(self, output_types_preference=None, name=None):
        super().__init__(output_types_preference or transfer_type(1, 2), name)

    def grad(self, inputs, output_grads):
        cond = inputs[0]
        (gz,) = output_grads
        T = vocabulary(gz)
        zero = T.zeros_like(gz)
        return [zero_grads([cond])[0], T.switch(cond, gz, zero), T.switch(cond, zero, gz)]


class _cast_out(specific_out):  # noqa: N801 (a specific_out, as Theano's casts have)
    """A cast's output dtype, refusing complex to real: which part to keep is ambiguous.

    >>> _cast_out(get_scalar_type("float32"))("complex64")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: Casting from complex (complex64) to real (float32) is ambiguous: ...
    """

    def __call__(self, *dtypes):
        (out,) = super().__call__(*dtypes)
        if dtypes[0].startswith("complex") and not out.startswith("complex"):
            raise TypeError(
                f"Casting from complex ({dtypes[0]}) to real ({out}) is ambiguous: "
                "consider real(), imag(), angle() or abs()"
            )
        return (out,)


class Cast(UnaryScalarOp):
    """Convert to ``o_type`` (a dtype string, or a scalar type as Theano's
    ``Cast(Scalar("float64"))``) with C's/numpy's conversion."""

    __props__ = ("o_type",)
    compute_in_output_dtype = False
    complex_grad = True

    def __init__(self, o_type, name=None):
        self.o_type = np.dtype(getattr(o_type, "dtype", o_type)).name
        super().__init__(
            _cast_out(get_scalar_type(self.o_type)), name or f"convert_to_{self.o_type}"
        )

    def __str__(self):
        return self.name

    def impl(self, x):
        return np.asarray(x).astype(self.o_type)

    def c_template(self, in_dtypes, out_dtypes):
        if self.o_type == "bool":
            return "(%(x)s != 0)"
        if _is_float(in_dtypes[0]) and self.o_type in ("int32", "int64"):
            # C leaves a NaN or out-of-range conversion undefined: x86 gives the type's
            # minimum (as numpy does there), NVIDIA's OpenCL saturates. Say it once.
            bits = 31 if self.o_type == "int32" else 63
            lo, hi = f"-{2**bits}.0f", f"{2**bits}.0f"  # powers of two: exact as floats
            low = f"(%(t)s)({-(2**bits) + 1} - 1)"  # the minimum, as a literal C accepts
            return f"((%(x)s >= {lo} && %(x)s < {hi}) ? (%(t)s)(%(x)s) : {low})"
        return "((%(t)s)(%(x)s))"

    def grad(self, inputs, output_grads):
        (x,) = inputs
        if x.dtype in discrete_dtypes:
            return zero_grads(inputs)
        (gz,) = output_grads
        if gz.dtype.startswith("complex") and not x.dtype.startswith("complex"):
            gz = vocabulary(gz).real(gz)  # a real input moves along the real axis only
        return [vocabulary(gz).cast(gz, x.dtype)]


class Identity(UnaryScalarOp):
    nfunc = staticmethod(lambda x: np.array(x, copy=True))
    c_expr = "(%(x)s)"

    def grad(self, inputs, output_grads):
        return [output_grads[0]]


class Second(BinaryScalarOp):
    """``second(x, y)`` = ``y`` broadcast to the shape of ``x`` (Theano's ``fill``)."""

    compute_in_output_dtype = False
    c_expr = "(%(y)s)"

    def impl(self, x, y):
        return np.broadcast_to(y, np.broadcast_shapes(np.shape(x), np.shape(y)))

    def grad(self, inputs, output_grads):
        return [zero_grads(inputs[:1])[0], output_grads[0]]


class FMA(ScalarOp):
    """``x * y + z`` (rounded once in C via ``fma`` for floats)."""

    nin = 3
    nfunc = staticmethod(lambda x, y, z: x * y + z)

    def c_template(self, in_dtypes, out_dtypes):
        if _is_float(out_dtypes[0]):
            return "fma(%(x)s, %(y)s, %(z)s)"
        return "(%(x)s * %(y)s + %(z)s)"

    def grad(self, inputs, output_grads):
        x, y, _ = inputs
        (gz,) = output_grads
        return [gz * y, gz * x, gz]


add = Add(upcast_out, name="add")
sub = Sub(upcast_out_nobool, name="sub")
mul = Mul(upcast_out, name="mul")
true_div = TrueDiv(true_div_out, name="true_div")
int_div = IntDiv(upcast_out_nobool, name="int_div")
mod = Mod(upcast_out_nobool, name="mod")
neg = Neg(upcast_out_nobool, name="neg")
abs_ = Abs(real_out, name="abs")
sgn = Sgn(upcast_out_nobool, name="sgn")
pow = Pow(upcast_out_nobool, name="pow")
maximum = Maximum(upcast_out, name="maximum")
minimum = Minimum(upcast_out, name="minimum")
clip = Clip(upcast_out, name="clip")
lt, gt, le, ge = LT(name="lt"), GT(name="gt"), LE(name="le"), GE(name="ge")
eq, neq = EQ(name="eq"), NEQ(name="neq")
and_ = AND(upcast_out, name="and_")
or_ = OR(upcast_out, name="or_")
xor = XOR(upcast_out, name="xor")
invert = Invert(same_out, name="invert")
isnan = IsNan(bool_out, name="isnan")
isinf = IsInf(bool_out, name="isinf")
switch = Switch(name="switch")
identity = Identity(same_out, name="identity")
second = Second(transfer_type(1), name="second")
fma = FMA(upcast_out, name="fma")

_casts: dict = {}


def convert_to(dtype) -> Cast:
    """The (cached) Cast op to ``dtype``."""
    dtype = np.dtype(dtype).name
    if dtype not in _casts:
        _casts[dtype] = Cast(dtype)
    return _casts[dtype]


def cast(x, dtype):
    """Cast the scalar variable ``x`` to ``dtype`` (no-op when it already has it)."""

    x = as_scalar(x)
    if x.dtype == np.dtype(dtype).name:
        return x
    return convert_to(dtype)(x)
