"""Scalar types and the scalar-op framework (``theano.scalar.basic``).

A scalar op is the per-element computation of an ``Elemwise``. Each one knows:

- ``output_types_preference(*dtypes) -> tuple of dtypes``: its upcasting rule;
- ``nfunc``: a numpy function computing it elementwise over whole arrays;
- ``c_expr``: one C expression template, valid in C99 and OpenCL C alike, with
  ``%(x)s %(y)s %(z)s`` for inputs 0, 1, 2 and ``%(t)s`` for the output C type;
  ``c_code(...)`` fills it in (ops whose C form depends on dtype override it);
- ``L_op/grad``: its gradient, written with *tensor* ops: ``Elemwise`` calls it with
  the tensor inputs, outputs and output gradients of the node being differentiated.

Scalar graphs (``ScalarVariable``s joined by scalar ops) describe ``Composite`` ops,
which the fusion rewrite builds and the C/OpenCL engines compile.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import types
import warnings

import numpy as np

# The operators' ops (scalar.arith) build on this module: reached through the package.
from theano_dag import scalar as _scalar
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.null_type import grad_not_implemented
from theano_dag.graph.op import Op
from theano_dag.graph.type import Type

__all__ = [
    "constant",
    "floats",
    "ints",
    "Scalar",
    "ComplexError",
    "autocast_float",
    "autocast_float_as",
    "ScalarType",
    "ScalarVariable",
    "ScalarConstant",
    "get_scalar_type",
    "as_scalar",
    "upcast",
    "numpy_upcast",
    "upcast_out",
    "upcast_out_nobool",
    "upgrade_to_float",
    "upgrade_to_float_no_complex",
    "upgrade_to_float64",
    "upgrade_to_float64_no_complex",
    "true_div_out",
    "same_out",
    "same_out_no_complex",
    "bool_out",
    "real_out",
    "holomorphic_grads",
    "grad_on_scalars",
    "float_out",
    "transfer_type",
    "specific_out",
    "C_TYPES",
    "OPENCL_TYPES",
    "ScalarOp",
    "wrapping_c_code",
    "UnaryScalarOp",
    "BinaryScalarOp",
]

int_dtypes = ("int8", "int16", "int32", "int64")
uint_dtypes = ("uint8", "uint16", "uint32", "uint64")
float_dtypes = ("float16", "float32", "float64")
complex_dtypes = ("complex64", "complex128")
discrete_dtypes = ("bool",) + int_dtypes + uint_dtypes
continuous_dtypes = float_dtypes + complex_dtypes
all_dtypes = discrete_dtypes + continuous_dtypes

C_TYPES = {
    "bool": "unsigned char",
    "int8": "signed char",
    "int16": "short",
    "int32": "int",
    "int64": "long long",
    "uint8": "unsigned char",
    "uint16": "unsigned short",
    "uint32": "unsigned int",
    "uint64": "unsigned long long",
    "float32": "float",
    "float64": "double",
}
OPENCL_TYPES = {
    "bool": "uchar",
    "int8": "char",
    "int16": "short",
    "int32": "int",
    "int64": "long",
    "uint8": "uchar",
    "uint16": "ushort",
    "uint32": "uint",
    "uint64": "ulong",
    "float16": "half",
    "float32": "float",
    "float64": "double",
}


def vocabulary(v):
    """The functions that build graphs of ``v``'s kind, by name (``switch``, ``eq``, ``cast``,
    ``zeros_like``, ``constant``, ...): what scalar ops write their gradients with.

    ``Elemwise`` hands a scalar op's gradient tensors, so the gradient is built from
    tensor ops; the variable's Type names its vocabulary (``TensorType.vocabulary`` is
    the ``theano_dag.tensor`` package), so this floor does not import the one above it.
    """
    vocab = getattr(v.type, "vocabulary", None)
    if vocab is None:
        raise TypeError(
            f"{v} of type {v.type} names no vocabulary to build a gradient with: scalar ops "
            "are differentiated through Elemwise, on tensors"
        )
    return vocab


def round_half_away_from_zero_vec(x):
    """``x`` rounded to the nearest integer, halves away from zero (C's ``round``; numpy's
    ``round`` takes halves to even). Theano's name for the numpy reference.

    >>> round_half_away_from_zero_vec(np.array([-2.5, -0.5, 0.5, 1.5, 2.4]))
    array([-3., -1.,  1.,  2.,  2.])
    """
    x = np.asarray(x)
    if x.dtype.kind in "biu":  # already whole (and bool has no subtraction)
        return x.copy()
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


# -- upcasting rules --------------------------------------------------------------


def upcast(*dtypes) -> str:
    """The dtype numpy gives an operation on arrays of ``dtypes``; with
    ``cast_policy="numpy+floatX"``, a float wider than floatX (float32 or float16) where
    no input is that wide is floatX (Theano's rule: data stays in floatX unless a wider
    float is asked for, so that ``x * 2`` of a float32 ``x`` is not float64).

    >>> upcast("int8", "float32"), upcast("int32", "float32"), upcast("bool", "bool")
    ('float32', 'float64', 'bool')
    >>> with config.change_flags(cast_policy="numpy+floatX", floatX="float32"):
    ...     upcast("int64", "float32"), upcast("int64", "float64")
    ('float32', 'float64')
    """
    d = _upcast(dtypes)
    if (d == "float64" or d == "float32") and config.cast_policy == "numpy+floatX":
        floatx = config.floatX
        if floatx != "float64" and d != floatx and _narrower_floats_only(dtypes, floatx):
            return floatx
    return d


def _narrower_floats_only(dtypes, floatx) -> bool:
    """Whether no dtype of ``dtypes`` is a float wider than ``floatx``."""
    wider = ("float64",) if floatx == "float32" else ("float64", "float32")
    return not any(d in wider for d in dtypes)


def numpy_upcast(*dtypes) -> str:
    """The dtype numpy gives an operation on arrays of ``dtypes``, whatever the cast
    policy (what a comparison computes in).

    >>> numpy_upcast("int64", "float32"), numpy_upcast("int8", "uint8")
    ('float64', 'int16')
    """
    return _upcast(dtypes)


@functools.lru_cache(maxsize=4096)
def _upcast(dtypes) -> str:
    # Graph building calls this per node; numpy's result_type and dtype.name are slow.
    return np.result_type(*[np.dtype(d) for d in dtypes]).name


@functools.lru_cache(maxsize=256)
def _dtype_kind(d) -> str:
    return np.dtype(d).kind


def upcast_out(*dtypes):
    return (upcast(*dtypes),)


def upcast_out_nobool(*dtypes):
    """Like ``upcast_out`` but bool becomes int8 (``True - True`` is arithmetic)."""
    d = upcast(*dtypes)
    return ("int8" if d == "bool" else d,)


def _refuse_complex(dtypes, error, why):
    """Raise ``error`` for the first complex dtype of ``dtypes``, saying ``why``."""
    for d in dtypes:
        if d.startswith("complex"):
            raise error(f"{d} input: {why}")


def upcast_out_no_complex(*dtypes):
    """``upcast_out`` for ops that order their inputs (``clip``): a complex input raises.

    >>> upcast_out_no_complex("int8", "float32")
    ('float32',)
    """
    _refuse_complex(dtypes, TypeError, "complex numbers are not ordered")
    return upcast_out(*dtypes)


def upcast_out_nobool_no_complex(*dtypes):
    """``upcast_out_nobool`` for ``%`` and ``//``, which have no complex form (numpy
    refuses them): a complex input raises :class:`ComplexError` (Theano's)."""
    _refuse_complex(dtypes, ComplexError, "% and // are not defined on complex numbers")
    return upcast_out_nobool(*dtypes)


_FLOAT_OF = {
    "bool": "float32",
    "int8": "float32",
    "int16": "float32",
    "uint8": "float32",
    "uint16": "float32",
    "int32": "float64",
    "int64": "float64",
    "uint32": "float64",
    "uint64": "float64",
}


def upgrade_to_float(*dtypes):
    """Integers become the float that holds them exactly (Theano's rule).

    >>> upgrade_to_float("int8"), upgrade_to_float("int32"), upgrade_to_float("float32")
    (('float32',), ('float64',), ('float32',))
    """
    return (upcast(*[_FLOAT_OF.get(d, d) for d in dtypes]),)


def _reals_only(dtypes):
    _refuse_complex(dtypes, TypeError, "this op is defined on real numbers only")


def upgrade_to_float_no_complex(*dtypes):
    """``upgrade_to_float`` for ops defined on reals only: a complex input raises.

    >>> upgrade_to_float_no_complex("int16", "float32")
    ('float32',)
    >>> upgrade_to_float_no_complex("complex64")
    Traceback (most recent call last):
    TypeError: complex64 input: this op is defined on real numbers only
    """
    _reals_only(dtypes)
    return upgrade_to_float(*dtypes)


def upgrade_to_float64(*dtypes):
    """float64 whatever the inputs (Theano's rule for ``chi2sf``).

    >>> upgrade_to_float64("float32", "int8")
    ('float64',)
    """
    return ("float64",)


def upgrade_to_float64_no_complex(*dtypes):
    """``upgrade_to_float64`` for ops defined on reals only (``chi2sf``): a complex input
    raises.

    >>> upgrade_to_float64_no_complex("float32")
    ('float64',)
    """
    _reals_only(dtypes)
    return upgrade_to_float64(*dtypes)


def true_div_out(*dtypes):
    """Theano's rule for ``/``: integers (and bools) divide to ``config.floatX``, read when
    the node is built (``int64 / uint64`` too, though the two upcast to float64); an
    operand of another dtype upcasts as usual.

    >>> true_div_out("int64", "int8"), true_div_out("int32", "float32")
    (('float64',), ('float64',))
    >>> with config.change_flags(floatX="float32"):
    ...     true_div_out("int64", "uint64"), true_div_out("int16", "float32")
    (('float32',), ('float32',))
    """
    if all(d in discrete_dtypes for d in dtypes):
        return (config.floatX,)
    return (upcast(*dtypes),)


def same_out(*dtypes):
    return (dtypes[0],)


def same_out_no_complex(*dtypes):
    """``same_out`` for ops defined on reals only (rounding half away from zero): a
    complex input raises.

    >>> same_out_no_complex("int8")
    ('int8',)
    """
    _reals_only(dtypes)
    return same_out(*dtypes)


def bool_out(*dtypes):
    return ("bool",)


_REAL_OF = {"complex64": "float32", "complex128": "float64"}


def real_out(*dtypes):
    """The real dtype of a complex one (Theano's rule for ``real``, ``imag``, ``abs``);
    other dtypes stay.

    >>> real_out("complex64"), real_out("int32")
    (('float32',), ('int32',))
    """
    return (_REAL_OF.get(dtypes[0], dtypes[0]),)


def float_out(*dtypes):
    return (config.floatX,)


class specific_out:  # noqa: N801 (Theano's name)
    """Output dtypes fixed whatever the inputs (a cast's): ``spec`` holds their scalar
    types, as Theano's.

    >>> pref = specific_out(get_scalar_type("int32"))
    >>> pref("float64"), pref.spec[0].dtype
    (('int32',), 'int32')
    """

    def __init__(self, *spec):
        self.spec = spec

    def __call__(self, *dtypes):
        return tuple(t.dtype for t in self.spec)

    def __eq__(self, other):
        return type(other) is type(self) and other.spec == self.spec

    def __hash__(self):
        return hash((type(self), self.spec))

    def __repr__(self):
        return f"specific_out{tuple(t.dtype for t in self.spec)}"


class transfer_type:  # noqa: N801 (Theano's name)
    """Output dtype = upcast of the inputs at ``positions`` (e.g. switch's branches)."""

    def __init__(self, *positions):
        self.positions = positions

    def __call__(self, *dtypes):
        return (upcast(*[dtypes[i] for i in self.positions]),)

    def __eq__(self, other):
        return type(other) is type(self) and other.positions == self.positions

    def __hash__(self):
        return hash((type(self), self.positions))

    def __repr__(self):
        return f"transfer_type{self.positions}"


# The preferences whose dtypes follow from the input dtypes alone (no flag read, numpy's
# promotion rules): see ScalarOp.has_fixed_output_types. Not float_out nor true_div_out,
# which read floatX (integers divide to it).
_FIXED_PREFERENCES = frozenset(
    (
        upcast_out,
        upcast_out_nobool,
        upcast_out_no_complex,
        upcast_out_nobool_no_complex,
        upgrade_to_float,
        upgrade_to_float_no_complex,
        same_out,
        bool_out,
        real_out,
    )
)


# -- scalar types and variables --------------------------------------------------


class ScalarType(Type):
    """The type of one number of a given dtype (a 0-d numpy value).

    >>> f = ScalarType("float32")
    >>> f.filter(1.5), f.filter(3).dtype
    (np.float32(1.5), dtype('float32'))
    """

    __props__ = ("dtype",)

    def __init__(self, dtype):
        if dtype == "floatX":
            dtype = config.floatX
        dtype = np.dtype(dtype).name
        if dtype not in all_dtypes:
            raise TypeError(f"ScalarType: unsupported dtype {dtype!r}")
        self.dtype = dtype
        self.ndim = 0
        self.broadcastable = ()

    def filter(self, data, strict=False, allow_downcast=None):
        if isinstance(data, Variable):
            raise TypeError(f"{self}: expected a number, got the Variable {data}")
        if strict:
            if not isinstance(data, np.generic) or data.dtype.name != self.dtype:
                raise TypeError(
                    f"{self} expected a numpy scalar of dtype {self.dtype}, "
                    f"got {type(data).__name__}"
                )
            return data
        arr = np.asarray(data)
        if arr.ndim != 0:
            raise TypeError(f"{self} expected a scalar, got an array of shape {arr.shape}")
        converted = arr.astype(self.dtype)
        if not allow_downcast and arr.dtype != converted.dtype:
            lossless = np.array_equal(arr, converted, equal_nan=arr.dtype.kind in "fc")
            if not lossless and not (isinstance(data, float) and self.dtype == config.floatX):
                raise TypeError(f"{self} cannot store {data!r} without loss of precision")
        return converted[()]

    def values_eq_approx(self, a, b):
        return values_eq_approx(np.asarray(a), np.asarray(b))

    def make_variable(self, name=None):
        return ScalarVariable(self, None, None, name)

    def make_constant(self, value, name=None):
        return ScalarConstant(self, value, name)

    @property
    def Constant(self):  # noqa: N802
        return ScalarConstant

    def c_type(self, types=C_TYPES) -> str:
        return types[self.dtype]

    def __str__(self):
        return self.dtype

    def __repr__(self):
        return f"ScalarType({self.dtype})"


_scalar_types: dict = {}


def get_scalar_type(dtype) -> ScalarType:
    """The (cached) ScalarType of ``dtype``."""
    if dtype not in _scalar_types:
        _scalar_types[dtype] = ScalarType(dtype)
    return _scalar_types[dtype]


def _scalar_binop(name, reflected=False):
    def method(self, other):
        op = getattr(_scalar, name)
        return op(other, self) if reflected else op(self, other)

    return method


class _scalar_py_operators:  # noqa: N801
    """Operators on scalar variables, for writing scalar graphs (Composite bodies)."""

    __slots__ = ()
    __add__, __radd__ = _scalar_binop("add"), _scalar_binop("add", True)
    __sub__, __rsub__ = _scalar_binop("sub"), _scalar_binop("sub", True)
    __mul__, __rmul__ = _scalar_binop("mul"), _scalar_binop("mul", True)
    __truediv__, __rtruediv__ = _scalar_binop("true_div"), _scalar_binop("true_div", True)
    __floordiv__, __rfloordiv__ = _scalar_binop("int_div"), _scalar_binop("int_div", True)
    __mod__, __rmod__ = _scalar_binop("mod"), _scalar_binop("mod", True)
    __pow__, __rpow__ = _scalar_binop("pow"), _scalar_binop("pow", True)
    __lt__, __le__ = _scalar_binop("lt"), _scalar_binop("le")
    __gt__, __ge__ = _scalar_binop("gt"), _scalar_binop("ge")
    # Bitwise on integers, logical on bools (Theano's operators).
    __and__, __rand__ = _scalar_binop("and_"), _scalar_binop("and_", True)
    __or__, __ror__ = _scalar_binop("or_"), _scalar_binop("or_", True)
    __xor__, __rxor__ = _scalar_binop("xor"), _scalar_binop("xor", True)

    def __neg__(self):
        return _scalar.neg(self)

    def __invert__(self):
        return _scalar.invert(self)

    def astype(self, dtype):
        """This scalar cast to ``dtype`` (Theano's method).

        >>> import theano_dag.scalar as ts
        >>> ts.constant(3).astype("float32").dtype
        'float32'
        """
        return _scalar.cast(self, dtype)

    @property
    def dtype(self):
        return self.type.dtype

    @property
    def ndim(self):
        return 0


class ScalarVariable(_scalar_py_operators, Variable):
    """A symbolic scalar (node of a scalar graph, e.g. inside a Composite)."""


class ScalarConstant(_scalar_py_operators, Constant):
    """A constant scalar."""

    def signature(self):
        return (self.type, np.asarray(self.data).tobytes())


# Relative/absolute tolerances of ``values_eq_approx`` by dtype: float32 keeps about
# 7 digits, so comparing two float32 computations needs far looser bounds than float64.
# float64's are numpy's allclose defaults, as Theano's: a float64 result computed from
# float32 values (a float32 log times an int, upcast) carries float32 rounding, and two
# correct engines differ there by an ulp of float32 (6e-8 relative), which a tighter bound
# reports as a wrong value (DebugMode on Lasagne's hinge loss with floatX=float32).
values_eq_approx_tolerances = {
    "float16": (5e-3, 5e-3),
    "float32": (1e-4, 1e-5),
    "float64": (1e-5, 1e-8),
    "complex64": (1e-4, 1e-5),
    "complex128": (1e-5, 1e-8),
}


def values_eq_approx(
    a, b, allow_remove_inf=False, allow_remove_nan=False, rtol=None, atol=None
) -> bool:
    """``allclose`` with dtype-dependent tolerances; NaN and inf must match in place.

    >>> values_eq_approx(np.float32([1, np.nan]), np.float32([1.00001, np.nan]))
    True
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc":
        return bool(np.array_equal(a, b))
    dt = str(np.result_type(a.dtype, b.dtype)) if a.dtype.kind in "fc" else str(b.dtype)
    if b.dtype.kind in "fc" and a.dtype.kind in "fc":
        # The looser of the two precisions decides.
        dt = min((str(a.dtype), str(b.dtype)), key=lambda d: np.finfo(d).bits)
    r, t = values_eq_approx_tolerances.get(dt, (1e-5, 1e-8))
    rtol = r if rtol is None else rtol
    atol = t if atol is None else atol
    a64, b64 = (
        a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
        b.astype(np.complex128 if b.dtype.kind == "c" else np.float64),
    )
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    if allow_remove_nan:
        keep = ~(nan_a | nan_b)
    else:
        if not np.array_equal(nan_a, nan_b):
            return False
        keep = ~nan_a
    inf_a, inf_b = np.isinf(a64), np.isinf(b64)
    if allow_remove_inf:
        keep &= ~(inf_a | inf_b)
    else:
        if not np.array_equal(inf_a & keep, inf_b & keep) or not np.array_equal(
            a64[inf_a & keep], b64[inf_a & keep]
        ):
            return False
        keep &= ~inf_a
    return bool(np.allclose(a64[keep], b64[keep], rtol=rtol, atol=atol))


class _AutocastFloat:
    """Theano's ``autocast_float``: the dtypes a Python float constant may take, the first
    that holds it exactly (else the last); ``autocast_float_as`` changes them for a block.

    >>> autocast_float.dtypes
    ('float32', 'float64')
    >>> with autocast_float_as("float64"):
    ...     autocast_scalar(1.5).dtype
    dtype('float64')
    """

    default = ("float32", "float64")

    def __init__(self):
        self._stack = []

    @property
    def dtypes(self) -> tuple:
        return self._stack[-1] if self._stack else self.default


autocast_float = _AutocastFloat()


@contextlib.contextmanager
def autocast_float_as(*dtypes):
    """Python floats become constants of ``dtypes`` inside the block (Theano's context
    manager; ``"float32"`` alone makes ``fvector() + 1.1`` stay float32)."""
    for dt in dtypes:
        if dt not in ("float16", "float32", "float64"):
            raise ValueError(f"autocast_float_as: {dt!r} is not a float dtype")
    autocast_float._stack.append(tuple(dtypes))
    try:
        yield
    finally:
        autocast_float._stack.pop()


# The largest finite value of each float dtype: a Python float within it converts
# without overflow (autocast_scalar then needs no errstate, which costs more).
_FLOAT_MAX = {d: float(np.finfo(d).max) for d in ("float16", "float32", "float64")}


def autocast_scalar(x, dtype=None):
    """Numpy value of ``x`` with Theano's 'custom' dtype policy for Python numbers.

    Python ints take the smallest int dtype that holds them; Python floats take float32
    when that is exact (or when floatX is float32), else float64.

    >>> autocast_scalar(3).dtype, autocast_scalar(1.5).dtype, autocast_scalar(0.1).dtype
    (dtype('int8'), dtype('float32'), dtype('float64'))
    """
    if dtype is not None:
        if isinstance(dtype, str) and dtype == "floatX":
            dtype = config.floatX
        return np.asarray(x, dtype=dtype)
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        return np.asarray(x)
    if config.cast_policy == "numpy+floatX":
        arr = np.asarray(x)
        if isinstance(x, float) or (arr.dtype.kind == "f" and not hasattr(x, "dtype")):
            arr = arr.astype(config.floatX)
        return arr
    if isinstance(x, bool):
        return np.asarray(x)
    if isinstance(x, int):
        for dt in ("int8", "int16", "int32", "int64"):
            if np.iinfo(dt).min <= x <= np.iinfo(dt).max:
                return np.asarray(x, dtype=dt)
        return np.asarray(x, dtype="uint64")
    if isinstance(x, float):
        dtypes = autocast_float.dtypes
        if config.floatX == "float32" and "float32" in dtypes:
            return np.asarray(x, dtype="float32")
        for dt in dtypes[:-1]:
            big = _FLOAT_MAX.get(dt)
            if big is not None and -big <= x <= big:  # no overflow to hide (NaN is not)
                xd = np.asarray(x, dtype=dt)
            else:
                with np.errstate(over="ignore"):
                    xd = np.asarray(x, dtype=dt)
            if float(xd) == x or np.isnan(x):
                return xd
        return np.asarray(x, dtype=dtypes[-1])
    if isinstance(x, complex):
        return np.asarray(x)
    arr = np.asarray(x)
    if arr.size == 0 and arr.dtype == np.float64:
        arr = arr.astype(config.floatX)
    return arr


def as_scalar(x, name=None) -> ScalarVariable:
    """``x`` as a ScalarVariable; Python numbers become constants with autocast dtypes."""
    if isinstance(x, Variable):
        if not isinstance(x.type, ScalarType):
            raise TypeError(f"as_scalar: {x} has type {x.type}, expected a ScalarType")
        return x
    v = autocast_scalar(x)
    if v.ndim != 0:
        raise TypeError(f"as_scalar: expected a number, got {x!r}")
    return ScalarConstant(get_scalar_type(v.dtype.name), v[()], name=name)


def constant(x, name=None, dtype=None) -> ScalarConstant:
    """A scalar constant of ``x`` (its autocast dtype unless ``dtype`` is given).

    >>> constant(3).type.dtype, constant(3, dtype="float32").type.dtype
    ('int8', 'float32')
    """
    v = autocast_scalar(x, dtype)
    if v.ndim != 0:
        raise TypeError(f"scalar.constant: expected a number, got {x!r}")
    return ScalarConstant(get_scalar_type(v.dtype.name), v[()], name=name)


Scalar = ScalarType  # Theano's name of the type


class ComplexError(NotImplementedError):
    """An op that takes no complex input was given one (Theano's exception)."""


# -- scalar ops ------------------------------------------------------------------

_INPUT_KEYS = ("x", "y", "z")


def _is_theano_c_code(fn) -> bool:
    """Whether ``fn`` has Theano's ``c_code(self, node, name, inputs, outputs, sub)``
    signature (C statements writing the outputs) rather than this module's (one C
    expression per output): it requires five arguments besides ``self``."""
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.kind in kinds and p.default is p.empty]
    return len(required) == 5


_WARNED_THEANO_C_CODE: set = set()


def warn_theano_c_code(op, why):
    """Warn, once per class of ``op``, that its Theano-form ``c_code`` is not used and
    why (``why`` ends the sentence); the op then runs with its ``impl``."""
    cls = type(op)
    if cls not in _WARNED_THEANO_C_CODE:
        _WARNED_THEANO_C_CODE.add(cls)
        warnings.warn(
            f"{cls.__name__}.c_code has Theano's signature (node, name, inputs, outputs, "
            f"sub), {why}: {op} runs with its Python implementation (impl)",
            stacklevel=3,
        )


def _theano_c_code_adapter(theano_c_code):
    """``c_code`` for a user's scalar op written for Theano: called as Theano calls it
    (five arguments), the user's method. The CPU engine's C kernels take its statements
    (``ScalarOp.theano_c_code``); called by a kernel generator that wants one C
    expression per output (OpenCL's), NotImplementedError, so that engine computes the
    op with its ``impl`` (warned once per class)."""

    @functools.wraps(theano_c_code)
    def c_code(self, *args, **kwargs):
        if len(args) + len(kwargs) == 5:
            return theano_c_code(self, *args, **kwargs)
        warn_theano_c_code(self, "whose C statements the OpenCL kernels do not take")
        raise NotImplementedError(f"{self} has C code in Theano's form only")

    return c_code


class ScalarOp(Op):
    """Base class of scalar ops; see the module docstring for what a subclass gives.

    ``nin = -1`` means any number of inputs (``add`` and ``mul``).
    ``compute_in_output_dtype``: inputs are cast to the output dtype before computing
    (so ``int8 -> float32`` ops never compute in float16, and C sees one type).
    """

    nin = -1
    nout = 1
    nfunc = None
    c_expr = None
    # Whether an integer result can overflow (+, -, *, x * x): OpenCL C computes it in an
    # unsigned type and casts back (wrapping_c_code), as numpy wraps.
    wraps_integers = False
    commutative = False
    associative = False
    identity = None  # the value x with op(x, y) == y, for reductions
    c_infix = None  # variadic ops: the C operator joining all inputs
    input_kinds = None  # numpy dtype kinds the inputs must have (None: any)
    compute_in_output_dtype = True
    # True when ``grad`` is written for complex values too (an op that is not
    # holomorphic: real, imag, abs...); the others are holomorphic, see ``L_op``.
    complex_grad = False
    # What ``Elemwise`` hands ``grad``/``L_op``: False, the tensors of the Elemwise node
    # (theano_dag's ops, whose gradients build tensor ops through ``vocabulary``); True,
    # scalar variables, as Theano does (a gradient written for Theano applies scalar ops
    # to them), the scalar graph it returns then rebuilt with Elemwise ops. None: decided
    # by ``grad_on_scalars`` from the module that defines the op's gradient.
    grad_on_scalars = None
    __props__ = ("output_types_preference",)

    name = None  # a subclass whose __init__ skips this one's (Theano's tests do) has none
    # A user's op written for Theano: its own ``c_code(node, name, inputs, outputs, sub)``,
    # C statements assigning the outputs, which the CPU engine's kernels embed.
    theano_c_code = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        user_c_code = cls.__dict__.get("c_code")
        if user_c_code is not None and _is_theano_c_code(user_c_code):
            cls.theano_c_code = user_c_code
            cls.c_code = _theano_c_code_adapter(user_c_code)

    def commutes(self, out_dtype) -> bool:
        """Whether swapping the arguments gives the same bits for a result of
        ``out_dtype`` (what a rewrite sorting them may rely on): ``commutative``, unless
        the op says otherwise for some dtypes.

        >>> from theano_dag import scalar as ts
        >>> ts.add.commutes("float64"), ts.maximum.commutes("float64"), ts.maximum.commutes("int64")
        (True, False, True)
        """
        return self.commutative

    def __init__(self, output_types_preference=None, name=None):
        if output_types_preference is not None:
            self.output_types_preference = output_types_preference
        self.name = name or type(self).__name__.lower()

    def __str__(self):
        return self.name or type(self).__name__.lower()

    __repr__ = __str__

    def output_types(self, dtypes) -> tuple:
        """Output dtypes for input ``dtypes`` (a tuple of strings)."""
        if self.input_kinds is not None:
            for k, d in enumerate(dtypes):
                if _dtype_kind(d) not in self.input_kinds:
                    raise TypeError(
                        f"{self}: input {k} has dtype {d}, expected an integer or " "bool dtype"
                    )
        pref = getattr(self, "output_types_preference", None)
        if pref is None:
            raise NotImplementedError(f"{self} has no output_types_preference")
        out = pref(*dtypes)
        kinds = self.input_kinds
        if kinds is not None and any(_dtype_kind(d) not in kinds for d in out):
            # uint64 with a signed integer: numpy's ufunc has no loop for them (their
            # upcast is float64), so the op would fail at its first call on every engine.
            raise TypeError(
                f"{self}: inputs of dtypes {', '.join(dtypes)} have no common integer "
                f"dtype (they upcast to {', '.join(out)}); cast one of them first"
            )
        if len(out) != self.nout:
            raise TypeError(
                f"{self}: output_types_preference gave {len(out)} types, " f"expected {self.nout}"
            )
        return tuple(out)

    def has_fixed_output_types(self) -> bool:
        """Whether ``output_types`` gives the same dtypes for the same input dtypes
        whatever the flags: its preference is one of this module's that read none
        (``float_out`` reads floatX), so that ``Elemwise`` may keep what it gave per
        input types.

        >>> ScalarOp(upcast_out).has_fixed_output_types()
        True
        >>> ScalarOp(float_out).has_fixed_output_types()
        False
        """
        if type(self).output_types is not ScalarOp.output_types:
            return False
        pref = getattr(self, "output_types_preference", None)
        return type(pref) in (specific_out, transfer_type) or (
            type(pref) is types.FunctionType and pref in _FIXED_PREFERENCES
        )

    def check_nin(self, n, who=None):
        if self.nin != -1 and n != self.nin:
            raise TypeError(f"{who or self} expects {self.nin} inputs, got {n}")

    def make_node(self, *inputs):
        self.check_nin(len(inputs))
        inputs = [as_scalar(i) for i in inputs]
        outs = self.output_types(tuple(i.type.dtype for i in inputs))
        return Apply(self, inputs, [get_scalar_type(d)() for d in outs])

    def impl(self, *inputs):
        """Compute with numpy on scalars or arrays (no output casting)."""
        if self.nfunc is None:
            raise NotImplementedError(f"{self} has no nfunc")
        return self.nfunc(*inputs)

    def compute(self, inputs, out_dtypes):
        """Evaluate over numpy arrays, returning a list of arrays of ``out_dtypes``."""
        if self.compute_in_output_dtype and self.nout == 1:
            inputs = [np.asarray(i, dtype=out_dtypes[0]) for i in inputs]
        with np.errstate(all="ignore"):
            out = self.impl(*inputs)
        outs = [out] if self.nout == 1 else list(out)
        return [np.asarray(o, dtype=d) for o, d in zip(outs, out_dtypes)]

    def perform(self, node, inputs, output_storage, params=None):
        outs = self.compute(inputs, [o.type.dtype for o in node.outputs])
        for cell, o in zip(output_storage, outs):
            cell[0] = o[()]

    def c_template(self, in_dtypes, out_dtypes) -> str:
        """The C expression template for these dtypes (default: ``self.c_expr``)."""
        if self.c_expr is None:
            raise NotImplementedError(f"{self} has no C expression")
        return self.c_expr

    def c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES) -> list:
        """One C expression per output, given C expressions ``inputs`` for the inputs.

        >>> from theano_dag import scalar as ts
        >>> ts.exp.c_code(["a[i]"], ["int32"], ["float64"])
        ['exp(((double)(a[i])))']
        >>> ts.add.c_code(["a", "b", "c"], ["float32"] * 3, ["float32"])
        ['(a + b + c)']
        """
        if self.wraps_integers and types is OPENCL_TYPES:
            wrapped = wrapping_c_code(self, inputs, in_dtypes, out_dtypes, types)
            if wrapped is not None:
                return wrapped
        tname = types[out_dtypes[0]]
        names = {"t": tname}
        cast = self.compute_in_output_dtype
        args = [
            f"(({tname})({e}))" if cast and d != out_dtypes[0] else e
            for e, d in zip(inputs, in_dtypes)
        ]
        for k, e in zip(_INPUT_KEYS, args):
            names[k] = e
        if self.c_infix is not None:
            return ["(" + self.c_infix.join(args) + ")"]
        return [self.c_template(in_dtypes, out_dtypes) % names]

    def L_op(self, inputs, outputs, output_grads):
        return self.grad(inputs, output_grads)

    def elemwise_L_op(self, inputs, outputs, output_grads):
        """``L_op`` as ``Elemwise`` calls it: with complex values, in Theano's convention
        that a complex value's gradient is ``dC/d(re) + 1j * dC/d(im)`` (for a real cost
        ``C``, the direction of steepest ascent), and real inputs' gradients real.

        ``L_op`` and ``grad`` are written as for reals, ``g * f'(x)``; for a
        holomorphic op the convention asks ``g * conj(f'(x))``, which conjugating ``g``
        before and the result after gives (the formula is linear in ``g``). Ops that
        are not holomorphic (``real``, ``abs``, ``cast``...) set ``complex_grad`` and
        write the convention themselves.
        """
        if self.complex_grad:
            return self.L_op(inputs, outputs, output_grads)
        return holomorphic_grads(
            lambda gz: self.L_op(inputs, outputs, gz), inputs, outputs, output_grads
        )

    def grad(self, inputs, output_grads):
        return [grad_not_implemented(self, i, x) for i, x in enumerate(inputs)]


def grad_on_scalars(op) -> bool:
    """Whether ``Elemwise`` differentiates the scalar op ``op`` on scalar variables (the
    op's ``grad_on_scalars`` when it sets one). By default a gradient written in
    theano_dag's packages gets tensors, and one written elsewhere, as Theano's clients
    write theirs (``gz * sgn(x)`` with ``theano.scalar`` ops), gets scalars.

    >>> from theano_dag import scalar as ts
    >>> grad_on_scalars(ts.exp)
    False
    >>> class Twice(ts.UnaryScalarOp):
    ...     def grad(self, inputs, output_grads):
    ...         return [output_grads[0] * 2]
    >>> Twice.__module__ = "user_code"  # as when defined in a user's module
    >>> grad_on_scalars(Twice(ts.upgrade_to_float))
    True
    """
    flag = getattr(op, "grad_on_scalars", None)
    if flag is not None:
        return bool(flag)
    for cls in type(op).__mro__:
        if "L_op" in cls.__dict__ or "grad" in cls.__dict__:
            module = cls.__module__ or ""
            return not (module == "theano_dag" or module.startswith("theano_dag."))
    return False


def holomorphic_grads(formula, inputs, outputs, output_grads) -> list:
    """The input gradients of a holomorphic op (complex-differentiable in each input:
    arithmetic, ``dot``, ``prod``...) in the complex convention of
    ``ScalarOp.elemwise_L_op``, from ``formula(output_grads)``, its gradients written as
    for reals (``g * f'(x)``): conjugated around it when a value is complex, a real
    input's gradient then its real part. Without complex values, ``formula`` itself.
    """
    if not any(_is_complex(v) for v in (*inputs, *outputs, *output_grads)):
        return formula(output_grads)
    grads = formula([_conj(g) for g in output_grads])
    return [_real_for(x, _conj(g)) for x, g in zip(inputs, grads)]


def _is_complex(v) -> bool:
    return str(getattr(v.type, "dtype", "")).startswith("complex")


def _conj(g):
    return vocabulary(g).conj(g) if _is_complex(g) else g


def _real_for(x, g):
    """``g``, the gradient of a real input ``x``, as a real value: the part of a complex
    gradient along the real axis (a real input moves only along it)."""
    if _is_complex(g) and not _is_complex(x):
        return vocabulary(g).real(g)
    return g


def wrapping_c_code(op, inputs, in_dtypes, out_dtypes, types):
    """``op``'s C expression (an op with ``wraps_integers``: ``x + y``, ``x * y``, ``x - y``,
    ``x * x``, ``x * y + z``) for an integer output in OpenCL C, computed in an unsigned
    type and cast back, so that it wraps as numpy's; None where no change is needed
    (another output, or the C kernels' ``types``). OpenCL C has no ``-fwrapv``: a signed
    overflow is undefined there (PoCL computed an int32 ``-127 * x`` in 64 bits, never
    wrapped, before a floor division),
    and operands narrower than ``int`` are promoted to ``int`` (``uint16 * uint16``
    overflows it). The C kernels build with ``-fwrapv`` (``cc.BASE_FLAGS``): the promoted
    arithmetic wraps, and the cast back keeps numpy's bits.

    >>> from theano_dag import scalar as ts
    >>> wrapping_c_code(ts.mul, ["x", "y"], ["int32"] * 2, ["int32"], OPENCL_TYPES)
    ['((int)((((uint)(x)) * ((uint)(y)))))']
    >>> wrapping_c_code(ts.mul, ["x", "y"], ["int32"] * 2, ["int32"], C_TYPES) is None
    True
    """
    d = out_dtypes[0]
    if types is not OPENCL_TYPES or d not in int_dtypes + ("uint8", "uint16"):
        return None
    w = "uint64" if d in ("int64",) else "uint32"
    args = [f"(({types[w]})({e}))" for e in inputs]
    (e,) = ScalarOp.c_code(op, args, [w] * len(args), [w], types)
    return [f"(({types[d]})({e}))"]


class UnaryScalarOp(ScalarOp):
    nin = 1


class BinaryScalarOp(ScalarOp):
    nin = 2


def zero_grads(inputs):
    """Zero gradients (floatX for discrete inputs), for piecewise-constant ops."""
    out = []
    for x in inputs:
        dt = x.dtype if x.dtype in continuous_dtypes else config.floatX
        out.append(vocabulary(x).zeros_like(x, dtype=dt))
    return out


def _named_variables(dtype, names):
    """Scalar variables of ``dtype``: one per name (a string gives one per character, a
    single name one variable), or ``names`` unnamed ones when it is an int."""
    make = get_scalar_type(dtype)
    if isinstance(names, int):
        return make() if names == 1 else [make() for _ in range(names)]
    if isinstance(names, tuple) and len(names) == 1:
        names = names[0]
    if len(names) == 1:
        return make(names[0] if isinstance(names, (list, tuple)) else names)
    return [make(n) for n in names]


def floats(names):
    """float64 scalar variables named ``names`` (Theano's ``scalar.floats``).

    >>> x, y = floats("xy")
    >>> x.name, x.type, floats("z").name
    ('x', ScalarType(float64), 'z')
    """
    return _named_variables("float64", names)


def ints(names):
    """int64 scalar variables named ``names`` (Theano's ``scalar.ints``).

    >>> [v.type.dtype for v in ints(("i", "j"))]
    ['int64', 'int64']
    """
    return _named_variables("int64", names)


def is_discrete(v) -> bool:
    return v.dtype in discrete_dtypes


def const_like(value, like):
    """A constant of ``value`` with the float dtype of ``like`` (keeps float32 graphs 32)."""
    dt = like.dtype if like.dtype in continuous_dtypes else config.floatX
    return vocabulary(like).constant(np.asarray(value, dtype=dt))


def __getattr__(name):
    """Theano's ``scalar.basic`` held every scalar op; theano_dag keeps them by family
    (``arith``, ``math``, ``composite``), so a name not defined here is the package's.

    The op classes of ``math`` (``Exp``, ``Expm1``, ``Inv``...) are found there too.

    >>> import theano_dag.scalar as ts
    >>> ts.basic.Composite is ts.Composite
    True
    >>> ts.basic.Expm1 is type(ts.math.expm1)
    True
    """
    if name in getattr(_scalar, "__all__", ()):
        return getattr(_scalar, name)
    found = getattr(_scalar.math, name, None)
    if isinstance(found, type) and issubclass(found, ScalarOp):
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
