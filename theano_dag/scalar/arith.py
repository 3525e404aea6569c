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
    int_dtypes,
    numpy_upcast,
    real_out,
    same_out,
    specific_out,
    transfer_type,
    true_div_out,
    upcast_out,
    upcast_out_no_complex,
    upcast_out_nobool,
    upcast_out_nobool_no_complex,
    vocabulary,
    zero_grads,
)

__all__ = [
    "InRange",
    "signed_with_uint64",
    "inopenrange",
    "inclosedrange",
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
    "ScalarMaximum",
    "ScalarMinimum",
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
    "cast_array",
    "cast_of_cast_is_one",
    "converts_exactly",
    "int_cast_bounds",
    "astype_keeps_rule",
]


def _is_float(dtype):
    return dtype in float_dtypes


# -- arithmetic ------------------------------------------------------------------


class Add(ScalarOp):
    nfunc = staticmethod(lambda *xs: _fold(np.add, xs))
    wraps_integers = True
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
    wraps_integers = True
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
    """``x - y``. Two booleans are refused, as numpy and Theano refuse them (their
    difference is no boolean; ``^`` is the boolean one).

    >>> sub.output_types(("bool", "bool"))
    Traceback (most recent call last):
    ...
    TypeError: sub: booleans are not subtracted (numpy and Theano refuse it): use a ^ b ...
    """

    nfunc = staticmethod(np.subtract)
    wraps_integers = True
    c_expr = "(%(x)s - %(y)s)"

    def output_types(self, dtypes) -> tuple:
        if len(dtypes) == 2 and all(d == "bool" for d in dtypes):
            raise TypeError(
                f"{self}: booleans are not subtracted (numpy and Theano refuse it): use "
                "a ^ b for their difference as booleans, or cast them to an integer dtype "
                "first"
            )
        return super().output_types(dtypes)

    def grad(self, inputs, output_grads):
        (gz,) = output_grads
        return [gz, -gz]


class TrueDiv(BinaryScalarOp):
    """``x / y``, computed as numpy divides (integers in float64) and then cast to the
    output dtype: Theano's value when integers divide to a float32 ``config.floatX``
    (integers above 2**24 are not exact in float32)."""

    nfunc = staticmethod(np.true_divide)
    compute_in_output_dtype = False

    def c_template(self, in_dtypes, out_dtypes):
        # Each operand cast to the dtype numpy divides in (double for integers), and only
        # where it differs: same-dtype operands stay as they are (the OpenCL engine runs
        # float32 divisions on float8 vectors, which a scalar cast would break).
        work = np.result_type(*in_dtypes)
        wide = work.kind in "biu" or work == np.float64
        work_dtype, t = ("float64", "double") if wide else (out_dtypes[0], "%(t)s")
        x, y = (
            f"(({t})({k}))" if d != work_dtype else k for k, d in zip(("%(x)s", "%(y)s"), in_dtypes)
        )
        return f"({x} / {y})"

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

    def c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES):
        """Floor division; ``x // -1`` of a signed integer is ``-x``, wrapping as numpy's.

        >>> print(int_div.c_code(["x", "y"], ["int32", "int32"], ["int32"])[0][:60])
        (y == -1 ? ((int)(0 - (unsigned int)(x))) : (y == 0 ? (int)0
        """
        return _by_minus_one_first(
            self,
            inputs,
            in_dtypes,
            out_dtypes,
            types,
            lambda x, d, ty: _wrapping_negation(x, d, ty),
        )

    def grad(self, inputs, output_grads):
        return zero_grads(inputs)


def _by_minus_one_first(op, inputs, in_dtypes, out_dtypes, types, at_minus_one):
    """``op``'s C expression for a signed integer output, with ``y == -1`` taken first:
    ``INT_MIN / -1`` and ``INT_MIN % -1`` overflow, undefined in C and OpenCL C (x86
    traps; PoCL gave ``INT_MIN % -1 = -1``); numpy's are ``INT_MIN`` and 0.
    ``at_minus_one(x)`` is the value there."""
    (e,) = BinaryScalarOp.c_code(op, inputs, in_dtypes, out_dtypes, types)
    d = out_dtypes[0]
    if not d.startswith("int"):
        return [e]
    t = types[d]
    x, y = (a if ad == d else f"(({t})({a}))" for a, ad in zip(inputs, in_dtypes))
    return [f"({y} == -1 ? {at_minus_one(x, d, types)} : {e})"]


class Mod(BinaryScalarOp):
    """Python's ``%``: the result takes the sign of the divisor."""

    nfunc = staticmethod(np.mod)

    def c_template(self, in_dtypes, out_dtypes):
        if _is_float(out_dtypes[0]):
            # numpy's: a zero remainder takes the divisor's sign (-0.0 for y < 0).
            return (
                "(fmod(%(x)s, %(y)s) != 0 ? (fmod(%(x)s, %(y)s) + "
                "(((fmod(%(x)s, %(y)s) < 0) != (%(y)s < 0)) ? %(y)s : (%(t)s)0)) "
                ": copysign((%(t)s)0, %(y)s))"
            )
        return (
            "(%(y)s == 0 ? (%(t)s)0 : (%(t)s)((%(x)s %% %(y)s) + "
            "(((%(x)s %% %(y)s) != 0 && (((%(x)s %% %(y)s) < 0) != (%(y)s < 0))) "
            "? %(y)s : 0)))"
        )

    def c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES):
        """Python's ``%``; ``x % -1`` of a signed integer is 0.

        >>> print(mod.c_code(["x", "y"], ["int64", "int64"], ["int64"])[0][:24])
        (y == -1 ? (long long)0
        """
        return _by_minus_one_first(
            self, inputs, in_dtypes, out_dtypes, types, lambda x, d, ty: f"({ty[d]})0"
        )

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        return [gz, -gz * vocabulary(gz).int_div(x, y)]


def _wrapping_negation(e, dtype, types):
    """``-e`` for a signed integer ``e``, wrapping as numpy does (-INT_MIN is INT_MIN):
    negated as the unsigned type, where C and OpenCL C define the wrap. A signed overflow
    is undefined there, and a compiler that assumes it away (OpenCL C has no -fwrapv)
    turned abs(INT64_MIN) // INT64_MIN into -1."""
    return f"(({types[dtype]})(0 - ({types['u' + dtype]})({e})))"


class Neg(UnaryScalarOp):
    """``-x``. A boolean is refused, as numpy and Theano refuse it (``~`` negates one).

    >>> neg.output_types(("bool",))
    Traceback (most recent call last):
    ...
    TypeError: neg: a boolean is not negated with - (numpy and Theano refuse it): use ~x ...
    """

    nfunc = staticmethod(np.negative)
    c_expr = "(-%(x)s)"

    def output_types(self, dtypes) -> tuple:
        if tuple(dtypes) == ("bool",):
            raise TypeError(
                f"{self}: a boolean is not negated with - (numpy and Theano refuse it): use "
                "~x for its logical negation, or cast it to an integer dtype first"
            )
        return super().output_types(dtypes)

    def c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES):
        """``-x``; a signed integer wraps, as numpy's.

        >>> print(neg.c_code(["x"], ["int64"], ["int64"])[0])
        ((long long)(0 - (unsigned long long)(x)))
        """
        d = out_dtypes[0]
        if d.startswith("int") and in_dtypes[0] == d:
            return [_wrapping_negation(inputs[0], d, types)]
        return super().c_code(inputs, in_dtypes, out_dtypes, types)

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

    def c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES):
        """``|x|``; for a signed integer the negation wraps, as numpy's (|INT_MIN| is INT_MIN).

        >>> print(abs_.c_code(["x"], ["int32"], ["int32"])[0])
        (x < 0 ? ((int)(0 - (unsigned int)(x))) : x)
        """
        d = out_dtypes[0]
        if d.startswith("int") and in_dtypes[0] == d:
            x = inputs[0]
            return [f"({x} < 0 ? {_wrapping_negation(x, d, types)} : {x})"]
        return super().c_code(inputs, in_dtypes, out_dtypes, types)

    def grad(self, inputs, output_grads):
        (x,), (gz,) = inputs, output_grads
        if x.dtype.startswith("complex"):
            # d|z|/d(re) + 1j d|z|/d(im) = z / |z|; at z = 0, where that is 0/0, 0 (the
            # real abs's sign(0), as JAX takes it): abs(complex(r, 0)) has r's gradient.
            T = vocabulary(gz)
            m = abs(x)
            return [gz * x / T.switch(T.eq(m, 0), T.ones_like(m), m)]
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
        # numpy raises on an integer's negative power and wraps a large one; a C
        # expression can do neither (through double, OpenCL gave 2 ** -1 = 0, and
        # 3 ** 39 in int64 lost its low bits): numpy computes integer powers.
        raise NotImplementedError("pow of integers has no C expression (numpy computes it)")

    def L_op(self, inputs, outputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        T = vocabulary(gz)
        out = outputs[0].dtype
        # An integer exponent of a float base: y - 1 in the output's float (int8's
        # -128 - 1 wraps to 127, uint8's 0 - 1 to 255); a constant above its dtype's
        # minimum as written.
        yf = y
        if _is_float(out) and y.dtype in discrete_dtypes:
            data = getattr(y, "data", None)
            if data is None or y.dtype == "bool" or np.any(data == np.iinfo(y.dtype).min):
                yf = T.cast(y, out)
        gx = gz * yf * T.pow(x, yf - 1)
        try:
            zero_exponent = T.get_scalar_constant_value(y) == 0
        except T.NotScalarConstantError:
            zero_exponent = True  # not known: it may be
        if zero_exponent:
            # x ** 0 is 1 for every x: its derivative 0, where 0 * x ** -1 is NaN at
            # x == 0 (as JAX takes it). Only there: elsewhere the formula is finite and
            # its own derivative in y (x ** -1 at y == 0) is the Hessian's. A nonzero
            # constant exponent, the usual case, needs no switch.
            gx = T.switch(T.and_(T.eq(y, 0), T.eq(x, 0)), 0, gx)
        # d/dy x**y = log(x) x**y, taken as 0 at x == 0 (where x**y is 0 for y > 0).
        gy = T.switch(T.eq(x, 0), 0, gz * T.log(x) * outputs[0])
        return [gx, gy]


class Maximum(BinaryScalarOp):
    """Elementwise max; NaN propagates, as in numpy."""

    nfunc = staticmethod(np.maximum)
    commutative = associative = True
    identity = -np.inf

    def commutes(self, out_dtype) -> bool:
        # At a tie the second argument (numpy's and the C templates' rule), which tells
        # -0.0 from 0.0: maximum(-0.0, 0.0) is 0.0, maximum(0.0, -0.0) is -0.0.
        return not _is_float(out_dtype)

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


def _clip_values(x, lo, hi):
    """Theano's clip on numpy values: numpy's ``minimum(maximum(x, lo), hi)``, except
    ``lo`` where ``x < lo`` and ``lo > hi`` (numpy gives ``hi`` there)."""
    return np.where((x < lo) & (lo > hi), lo, np.minimum(np.maximum(x, lo), hi))


class Clip(ScalarOp):
    """``clip(x, lo, hi)``: ``lo`` where ``x < lo``, else ``hi`` where ``x > hi``, else
    ``x``, as Theano computes it; a NaN argument gives NaN, as numpy's ``clip``. Where
    ``lo <= hi`` this is ``numpy.clip``; where ``lo > hi`` numpy gives ``hi`` everywhere,
    Theano ``lo`` below ``lo`` (and ``hi`` elsewhere): Theano users' programs get
    Theano's answer.

    >>> import numpy as np
    >>> clip.impl(np.array([0.0, 2.0, 5.0]), 3.0, 1.0)
    array([3., 3., 1.])
    """

    nin = 3
    nfunc = staticmethod(_clip_values)
    # maximum then minimum, NaN-propagating as numpy's (a NaN argument gives NaN) ...
    _m = "((%(x)s > %(y)s || %(x)s != %(x)s) ? %(x)s : %(y)s)"
    _numpy = f"(({_m} < %(z)s || {_m} != {_m}) ? {_m} : %(z)s)"
    # ... but lo where x < lo > hi (both comparisons false for a NaN)
    c_expr = f"((%(x)s < %(y)s && %(y)s > %(z)s) ? %(y)s : {_numpy})"

    def grad(self, inputs, output_grads):
        x, lo, hi = inputs
        (gz,) = output_grads
        T = vocabulary(gz)
        inside = T.and_(T.ge(x, lo), T.le(x, hi))
        # The bound the forward rule picks gets the gradient, also when lo > hi: lo
        # where x < lo, hi where x >= lo and x > hi (so clip(x, 0, x) is 0 where x < 0).
        lo_wins = T.lt(x, lo)
        hi_wins = T.and_(T.ge(x, lo), T.gt(x, hi))
        return [T.switch(inside, gz, 0), T.switch(lo_wins, gz, 0), T.switch(hi_wins, gz, 0)]


# -- comparisons and logic ----------------------------------------------------------


class _Compare(BinaryScalarOp):
    compute_in_output_dtype = False

    def __init__(self, output_types_preference=bool_out, name=None):
        super().__init__(output_types_preference, name)

    def compute(self, inputs, out_dtypes):
        arrays = [np.asarray(i) for i in inputs]
        if signed_with_uint64(*[a.dtype.name for a in arrays]):
            # Exactly, as numpy 2 does (their common dtype, float64, would round both
            # past 2**53: uint64 2**63 > int64 2**63 - 1 would be False): a negative
            # value is below any unsigned one; else both are compared as uint64.
            x, y = arrays
            fn = self.nfunc
            same = fn(x.astype(np.uint64), y.astype(np.uint64))
            x_neg = x < 0 if x.dtype.kind == "i" else False
            y_neg = y < 0 if y.dtype.kind == "i" else False
            out = np.where(x_neg, fn(-1, 0), np.where(y_neg, fn(0, -1), same))
            return [out.astype(out_dtypes[0])]
        # Compare in the common dtype, numpy's whatever the cast policy.
        d = numpy_upcast(*[a.dtype.name for a in arrays])
        return super().compute([a.astype(d, copy=False) for a in arrays], out_dtypes)

    def c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES):
        """In the inputs' common dtype, numpy's: C would compare a signed integer with an
        unsigned one of its width (or wider) as unsigned, -1 as the largest value. A
        signed integer and a uint64 (common dtype float64, which rounds both) are compared
        exactly, as numpy 2 does.

        >>> print(lt.c_code(["u", "i"], ["uint32", "int32"], ["bool"])[0])
        (((long long)(u)) < ((long long)(i)))
        >>> print(gt.c_code(["u", "i"], ["uint64", "int64"], ["bool"])[0])
        ((i) < 0 ? 1 : (((unsigned long long)(u)) > ((unsigned long long)(i))))
        """
        if signed_with_uint64(*in_dtypes):
            u = types["uint64"]
            x, y = inputs
            same = self.c_expr % {"x": f"(({u})({x}))", "y": f"(({u})({y}))"}
            if in_dtypes[0] in int_dtypes:
                return [f"(({x}) < 0 ? {int(self.nfunc(-1, 0))} : {same})"]
            return [f"(({y}) < 0 ? {int(self.nfunc(0, -1))} : {same})"]
        common = numpy_upcast(*in_dtypes)
        args = [
            e if d == common else f"(({types[common]})({e}))" for e, d in zip(inputs, in_dtypes)
        ]
        return super().c_code(args, [common] * len(args), out_dtypes, types)

    def grad(self, inputs, output_grads):
        return zero_grads(inputs)


def signed_with_uint64(*dtypes) -> bool:
    """Whether ``dtypes`` are a signed integer and a uint64, in either order: the pair
    whose common dtype (float64) cannot hold both, which comparisons treat apart.

    >>> signed_with_uint64("int8", "uint64"), signed_with_uint64("uint32", "int64")
    (True, False)
    """
    return len(dtypes) == 2 and (
        (dtypes[0] == "uint64" and dtypes[1] in int_dtypes)
        or (dtypes[1] == "uint64" and dtypes[0] in int_dtypes)
    )


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

    def c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES):
        """Each branch converted to the output's type first: C's ``?:`` would bring a
        signed branch to an unsigned one's type (-5 as 2**64 - 5) before the result.

        >>> print(switch.c_code(["c", "i", "u"], ["bool", "int32", "uint64"], ["float64"])[0])
        ((c) != 0 ? ((double)(i)) : ((double)(u)))
        """
        t, out = types[out_dtypes[0]], out_dtypes[0]
        args = list(inputs[:1])
        args += [e if d == out else f"(({t})({e}))" for e, d in zip(inputs[1:], in_dtypes[1:])]
        return super().c_code(args, [in_dtypes[0], out, out], out_dtypes, types)

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


# -- the cast rule: a float to an integer ------------------------------------------------
#
# C leaves a conversion undefined when the truncated value does not fit the integer: x86
# gives the 32- or 64-bit minimum and keeps its low bits for a narrower type (numpy there:
# uint8(-1.0) = 255), ARM saturates, NVIDIA's OpenCL saturated, and GCC with
# -fno-trapping-math folds (double)(signed char)x into trunc(x) (which made int8(-0.5)
# -0.0 and uint8(-1.0) -1.0 in a fused kernel). The engines give one answer instead:
# truncation toward zero in range, and the integer's minimum for NaN, the infinities and
# out-of-range values (x86's answer for int32 and int64). Written once: the bounds below
# serve the numpy helper and the C expression that the C and OpenCL kernels share.


def int_cast_bounds(src, dst) -> tuple:
    """``(lo, hi)``, values of the float dtype ``src``: a float ``x`` converts to the
    integer dtype ``dst`` by truncation when ``lo < x < hi``, else it gives ``dst``'s
    minimum (NaN fails both tests). Both are exact in ``src``; ``lo`` is the largest
    ``src`` value at or below ``dst``'s minimum minus 1, ``hi`` the smallest at or above
    its maximum plus 1.

    >>> [float(b) for b in int_cast_bounds("float64", "int8")]
    [-129.0, 128.0]
    >>> [float(b) for b in int_cast_bounds("float32", "int32")]  # -2**31 - 1 is no float32
    [-2147483904.0, 2147483648.0]
    >>> [float(b) for b in int_cast_bounds("float64", "uint64")]
    [-1.0, 1.8446744073709552e+19]
    """
    key = (np.dtype(src), np.dtype(dst))
    bounds = _CAST_BOUNDS.get(key)
    if bounds is None:
        ft = key[0].type
        info = np.iinfo(dst)
        lo, hi = int(info.min) - 1, int(info.max) + 1
        with np.errstate(over="ignore"):
            flo, fhi = ft(lo), ft(hi)  # the nearest floats (inf past float16's range)
        # Python compares a float with an int exactly.
        if float(flo) > lo:
            flo = np.nextafter(flo, ft(-np.inf))
        if float(fhi) < hi:
            fhi = np.nextafter(fhi, ft(np.inf))
        bounds = _CAST_BOUNDS[key] = (flo, fhi)
    return bounds


_CAST_BOUNDS: dict = {}


def converts_exactly(src, dst) -> bool:
    """Whether every value of dtype ``src`` converts to dtype ``dst`` unchanged: numpy's
    ``can_cast(src, dst, "safe")``, less the integers wider than the float's mantissa
    (numpy calls int64 to float64 safe, but 2**53 + 1 rounds to 2**53).

    >>> converts_exactly("int32", "float64"), converts_exactly("int64", "float64")
    (True, False)
    >>> converts_exactly("uint8", "float16"), converts_exactly("int16", "int32")
    (True, True)
    """
    s, d = np.dtype(src), np.dtype(dst)
    if not np.can_cast(s, d, "safe"):
        return False
    if s.kind in "iu" and d.kind in "fc":
        return 8 * s.itemsize - (s.kind == "i") <= np.finfo(d).nmant + 1
    return True


def cast_of_cast_is_one(src, mid, dst) -> bool:
    """Whether converting dtype ``src`` to ``mid`` then to ``dst`` gives, for every value,
    what converting it to ``dst`` at once gives (by the engines' cast rule): the first
    step loses nothing, and where it makes integers floats that the second step makes
    integers again, ``dst`` holds every value of ``src`` (a float out of range gives the
    integer's minimum, where an integer wraps: ``uint8(float32(int8(-1)))`` is 0, not 255).

    >>> one = cast_of_cast_is_one
    >>> one("int8", "float32", "int16"), one("int8", "float32", "uint8")
    (True, False)
    >>> cast_of_cast_is_one("int64", "float64", "int64")  # 2**53 + 1 rounds
    False
    """
    if not converts_exactly(src, mid):
        return False
    s, m, d = np.dtype(src), np.dtype(mid), np.dtype(dst)
    if s.kind in "iu" and m.kind in "fc" and d.kind in "iu":
        return converts_exactly(s, d)
    return True


# The ufuncs' reductions: cheaper than x.min() on small arrays (no method dispatch).
_smallest, _largest = np.minimum.reduce, np.maximum.reduce


def cast_array(x, dtype, out=None):
    """``x`` (an array or a number) converted to ``dtype`` by the engines' cast rule: numpy's
    ``astype``, except that a float to an integer gives the integer's minimum (0 when
    unsigned) for NaN, the infinities and values whose truncation is out of range.
    With ``out`` (an array of ``dtype`` that ``x`` broadcasts to), written there.

    >>> cast_array(np.array([2.7, -0.5, -1.0, 300.0, np.nan]), "uint8")
    array([2, 0, 0, 0, 0], dtype=uint8)
    >>> cast_array(np.array([-2.7, 1e10, -np.inf]), "int32")
    array([         -2, -2147483648, -2147483648], dtype=int32)
    >>> cast_array(np.array([np.nan, 0.0]), "bool")
    array([ True, False])
    """
    x = np.asarray(x)
    dtype = np.dtype(dtype)
    if (
        x.dtype.kind == "f"
        and dtype.kind in "iu"
        and x.size
        and not astype_keeps_rule(x.dtype, dtype)
    ):
        lo, hi = int_cast_bounds(x.dtype, dtype)
        # The common case costs two reductions beside the conversion (NaN fails them).
        if not (_smallest(x, None) > lo and _largest(x, None) < hi):
            return _cast_with_minimum(x, dtype, lo, hi, out)
    if out is None:
        return x.astype(dtype)
    np.copyto(out, x, casting="unsafe")
    return out


def astype_keeps_rule(src, dst) -> bool:
    """Whether numpy's own conversion of the float dtype ``src`` to the integer dtype
    ``dst`` already follows the rule on this machine, so that :func:`cast_array` (and
    the CPU engine) may skip the range test: probed once per pair, on values inside and
    outside the range, NaN and the infinities among them, at lengths and strides that
    reach numpy's scalar and vector loops. Only ever true for int32 and int64, whose
    minimum is x86's answer to any conversion out of range (ARM saturates: false there).

    >>> astype_keeps_rule("float64", "uint8")  # x86 keeps the low bits: 255 for -1.0
    False
    """
    key = (np.dtype(src), np.dtype(dst))
    ok = _ASTYPE_KEEPS.get(key)
    if ok is None:
        ok = _ASTYPE_KEEPS[key] = key[1] in _WIDE_SIGNED and _probe_astype(*key)
    return ok


_ASTYPE_KEEPS: dict = {}
_WIDE_SIGNED = (np.dtype("int32"), np.dtype("int64"))


def _probe_astype(src, dst) -> bool:
    info = np.iinfo(dst)
    special = [np.nan, np.inf, -np.inf, -0.0, -0.5, 0.5, 1e30, -1e30, 2.5, -7.0]
    special += [float(info.max) + 1, float(info.min) - 1, float(info.max) * 2, 2.0**70]
    with np.errstate(all="ignore"):
        base = np.array(special, dtype=np.float64).astype(src)
    lo, hi = int_cast_bounds(src, dst)
    for n in (*range(1, 18), 31, 64, 257, 1031):
        for shift in (0, 5, 11):
            x = np.roll(np.resize(base, n + 1), shift)
            for view in (x[:n], x[1:], x[::2], x[::-1]):
                want = _cast_with_minimum(view, dst, lo, hi, None)
                with np.errstate(all="ignore"):
                    got = view.astype(dst)
                    into = np.empty(view.shape, dst)
                    np.copyto(into, view, casting="unsafe")
                if not (np.array_equal(got, want) and np.array_equal(into, want)):
                    return False
    for v in base:  # 0-d arrays and numpy scalars take other paths
        want = _cast_with_minimum(np.asarray(v), dst, lo, hi, None)
        with np.errstate(all="ignore"):
            if np.asarray(v).astype(dst) != want or np.asarray(v.astype(dst)) != want:
                return False
    return True


def _cast_with_minimum(x, dtype, lo, hi, out):
    bad = ~((x > lo) & (x < hi))
    with np.errstate(invalid="ignore"):  # numpy warns of the values replaced below
        if out is None:
            out = x.astype(dtype)
        else:
            np.copyto(out, x, casting="unsafe")
    np.copyto(out, np.iinfo(dtype).min, where=bad)
    return out


class Cast(UnaryScalarOp):
    """Convert to ``o_type`` (a dtype string, or a scalar type as Theano's
    ``Cast(Scalar("float64"))``) with numpy's conversion, except a float to an integer:
    see :func:`cast_array`, the rule of every engine (docs/engines.md, "Casts")."""

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
        return cast_array(x, self.o_type)

    def c_template(self, in_dtypes, out_dtypes):
        """The C (and OpenCL) form of :func:`cast_array`'s rule.

        >>> e = convert_to("int8").c_code(["x"], ["float32"], ["int8"])[0]
        >>> print(e.replace(" : ", "\\n  : "))
        ((x > -129.0f && x < 128.0f) ? ((x > -1.0f && x < 1.0f) ? (signed char)0
          : (signed char)(x))
          : (signed char)(-127 - 1))
        """
        if self.o_type == "bool":
            return "(%(x)s != 0)"
        src = in_dtypes[0]
        if not (_is_float(src) and np.dtype(self.o_type).kind in "iu"):
            return "((%(t)s)(%(x)s))"
        lo, hi = int_cast_bounds(src, self.o_type)
        suffix = "f" if src == "float32" else ""

        def literal(b):  # an integer, written in full: exact in any C compiler
            if np.isinf(b):  # past float16's range
                return "INFINITY" if b > 0 else "(-INFINITY)"
            return f"{int(b)}.0{suffix}"

        lo_c, hi_c = literal(lo), literal(hi)
        low = int(np.iinfo(self.o_type).min)
        # The minimum as a literal C accepts (-2**63 is no literal); 0 for unsigned.
        low_c = f"(%(t)s)({low + 1} - 1)" if low else "(%(t)s)0"
        one = f"1.0{suffix}"
        # Under the range test the conversion is defined C. GCC (12, -fno-trapping-math)
        # folds a conversion back to the float type, (double)(int)x, into trunc(x),
        # which keeps the sign of -0.0: (-1, 1) gives a literal 0 instead.
        return (
            f"((%(x)s > {lo_c} && %(x)s < {hi_c}) ? "
            f"((%(x)s > -{one} && %(x)s < {one}) ? (%(t)s)0 : (%(t)s)(%(x)s)) : {low_c})"
        )

    def grad(self, inputs, output_grads):
        (x,) = inputs
        if self.o_type in discrete_dtypes:
            return zero_grads(inputs)
        (gz,) = output_grads
        if gz.dtype.startswith("complex") and not x.dtype.startswith("complex"):
            gz = vocabulary(gz).real(gz)  # a real input moves along the real axis only
        if x.dtype in discrete_dtypes:
            # An integer cast to a float: the gradient as if it were real (Theano's),
            # in the float type the gradient has.
            return [gz]
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
    """``x * y + z``, rounded twice as numpy computes it: C's ``fma`` rounds once, which
    differs in the last bit, and where ``x * y`` overflows (``fma(2, FLT_MAX, -inf)`` is
    ``-inf``, numpy's NaN). The C kernels and OpenCL build without contraction."""

    nin = 3
    nfunc = staticmethod(lambda x, y, z: x * y + z)
    wraps_integers = True
    c_expr = "(%(x)s * %(y)s + %(z)s)"

    def grad(self, inputs, output_grads):
        x, y, _ = inputs
        (gz,) = output_grads
        return [gz * y, gz * x, gz]


add = Add(upcast_out, name="add")
sub = Sub(upcast_out_nobool, name="sub")
mul = Mul(upcast_out, name="mul")
true_div = TrueDiv(true_div_out, name="true_div")
int_div = IntDiv(upcast_out_nobool_no_complex, name="int_div")
mod = Mod(upcast_out_nobool_no_complex, name="mod")
neg = Neg(upcast_out_nobool, name="neg")
abs_ = Abs(real_out, name="abs")
sgn = Sgn(upcast_out_nobool, name="sgn")
pow = Pow(upcast_out_nobool, name="pow")
maximum = Maximum(upcast_out, name="maximum")
minimum = Minimum(upcast_out, name="minimum")
# Theano 1.1.2's class names of the two.
ScalarMaximum, ScalarMinimum = Maximum, Minimum
clip = Clip(upcast_out_no_complex, name="clip")
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


class InRange(_Compare):
    """``low < x < high`` (bounds ``openlow``/``openhigh`` left out) or with ``<=`` where
    a bound is closed (Theano's ``InRange``); a bool, its gradient zero everywhere.

    >>> import numpy as np
    >>> [bool(inclosedrange.impl(v, 1.0, 5.0)) for v in (0.5, 1.0, 5.0)]
    [False, True, True]
    >>> print(inopenrange.c_code(["x", "lo", "hi"], ["float64"] * 3, ["bool"])[0])
    ((x > lo) && (x < hi))
    """

    nin = 3
    __props__ = ("openlow", "openhigh")

    def __init__(self, openlow, openhigh, name=None):
        self.openlow, self.openhigh = bool(openlow), bool(openhigh)
        super().__init__(bool_out, name or "inrange")

    def impl(self, x, low, high):
        above = np.greater(x, low) if self.openlow else np.greater_equal(x, low)
        below = np.less(x, high) if self.openhigh else np.less_equal(x, high)
        return np.logical_and(above, below)

    def c_template(self, in_dtypes, out_dtypes):
        lo = ">" if self.openlow else ">="
        hi = "<" if self.openhigh else "<="
        return f"((%(x)s {lo} %(y)s) && (%(x)s {hi} %(z)s))"


inopenrange = InRange(True, True)
inclosedrange = InRange(False, False)
