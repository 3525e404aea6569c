"""``TensorType``: the type of n-dimensional numpy arrays (``theano.tensor.type``).

A TensorType is a dtype plus a static shape: one entry per dimension, an int where
the length is known at graph-build time and ``None`` where it is not. A dimension of
static length 1 is *broadcastable*, as in Theano.
"""

from __future__ import annotations

import functools

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Variable
from theano_dag.graph.type import Type

__all__ = [
    "TensorType",
    "ForeignArrayType",
    "tensor",
    "values_eq_approx_tolerances",
    "int_dtypes",
    "uint_dtypes",
    "float_dtypes",
    "complex_dtypes",
    "discrete_dtypes",
    "continuous_dtypes",
    "all_dtypes",
    "integer_dtypes",
    "values_eq_approx_remove_inf",
    "values_eq_approx_remove_nan",
    "values_eq_approx_remove_inf_nan",
    "values_eq_approx_always_true",
]

from theano_dag.scalar.basic import (  # noqa: E402 (the dtype families live with scalars)
    all_dtypes,
    complex_dtypes,
    continuous_dtypes,
    discrete_dtypes,
    float_dtypes,
    int_dtypes,
    uint_dtypes,
    values_eq_approx,
    values_eq_approx_tolerances,
)

integer_dtypes = int_dtypes + uint_dtypes  # Theano's name: signed and unsigned


# Theano's comparisons for a variable whose value a rewrite may change where the original
# gives inf or NaN (a stabilised expression): set as ``var.tag.values_eq_approx``.
def values_eq_approx_remove_inf(a, b) -> bool:
    """``values_eq_approx``, ignoring the places where either holds an infinity.

    >>> values_eq_approx_remove_inf(np.array([1.0, np.inf]), np.array([1.0, 5.0]))
    True
    """
    return values_eq_approx(a, b, allow_remove_inf=True)


def values_eq_approx_remove_nan(a, b) -> bool:
    """``values_eq_approx``, ignoring the places where either holds NaN.

    >>> values_eq_approx_remove_nan(np.array([1.0, np.nan]), np.array([1.0, 5.0]))
    True
    """
    return values_eq_approx(a, b, allow_remove_nan=True)


def values_eq_approx_remove_inf_nan(a, b) -> bool:
    """``values_eq_approx``, ignoring infinities and NaN in either."""
    return values_eq_approx(a, b, allow_remove_inf=True, allow_remove_nan=True)


def values_eq_approx_always_true(a, b) -> bool:
    """Any two values compare equal (for outputs whose value is not checked)."""
    return True


def normalize_dtype(dtype) -> str:
    """The name of the tensor dtype ``dtype`` (a name, a numpy dtype or scalar type), with
    ``"floatX"`` (and None) read as ``config.floatX``, as Theano reads a dtype anywhere
    one is given (``zeros_like(x, dtype="floatX")``, ``sum(x, dtype="floatX")``).

    >>> normalize_dtype(np.float32), normalize_dtype("floatX") == config.floatX
    ('float32', True)
    """
    if dtype.__class__ is str and dtype in _DTYPE_NAMES:
        return dtype  # the common case, without numpy's slow dtype.name
    if dtype == "floatX" or dtype is None:
        return config.floatX
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"TensorType: unsupported dtype {dtype!r}") from None
    if name not in all_dtypes:
        raise TypeError(f"TensorType: unsupported dtype {dtype!r}; expected one of {all_dtypes}")
    return name


_DTYPE_NAMES = frozenset(all_dtypes)


class _BroadcastablePattern:
    """``TensorType.broadcastable``: which dimensions have length 1, computed on first use
    and then kept in the instance (rewrites ask for it on every node they look at).

    Like ``functools.cached_property``, without its lock.
    """

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        pattern = obj.__dict__["broadcastable"] = tuple(s == 1 for s in obj.shape)
        return pattern


class TensorType(Type):
    """The type of an ndarray of a given dtype and static shape.

    >>> t = TensorType("float64", shape=(None, 3))
    >>> t.ndim, t.broadcastable, t.shape
    (2, (False, False), (None, 3))
    >>> TensorType("float32", (True, False))
    TensorType(float32, row)
    >>> TensorType("float64", (False,)).filter([1, 2])
    array([1., 2.])
    """

    __props__ = ("dtype", "shape")

    # Theano's switch (a class attribute, off by default): when True, ``filter`` refuses
    # a value holding NaN or an infinity with a ValueError, so shared values and the
    # arguments of the functions made while it is on are checked as they come in (a
    # function made before keeps the CPU engine's generated call, which checks dtypes
    # and shapes only).
    filter_checks_isfinite = False

    def __init__(self, dtype, broadcastable=None, shape=None, name=None):
        self.dtype = normalize_dtype(dtype)
        if shape is None and broadcastable is None:
            raise TypeError("TensorType needs `broadcastable` or `shape`")
        if shape is not None:
            if broadcastable is not None:
                if len(broadcastable) != len(shape):
                    raise ValueError("TensorType: `broadcastable` and `shape` differ in length")
                shape = tuple(1 if b else s for b, s in zip(broadcastable, shape))
            norm = []
            for s in shape:
                if s is not None and (not isinstance(s, (int, np.integer)) or s < 0):
                    raise TypeError(
                        f"TensorType: static shape entries must be None or ints " f">= 0, got {s!r}"
                    )
                norm.append(None if s is None else int(s))
            self.shape = tuple(norm)
        else:
            if isinstance(broadcastable, (int, np.integer)) and not isinstance(broadcastable, bool):
                raise TypeError(
                    "TensorType: `broadcastable` must be a tuple of bools, "
                    f"got {broadcastable!r}"
                )
            self.shape = tuple(1 if bool(b) else None for b in broadcastable)
        self.name = name
        self.numpy_dtype = np.dtype(self.dtype)

    broadcastable = _BroadcastablePattern()

    @property
    def ndim(self):
        return len(self.shape)

    def clone(self, dtype=None, broadcastable=None, shape=None):
        """Return a TensorType like this one with ``dtype``/``shape`` replaced."""
        if shape is None and broadcastable is not None:
            shape = tuple(1 if b else None for b in broadcastable)
        return type(self)(dtype or self.dtype, shape=self.shape if shape is None else shape)

    # -- values --------------------------------------------------------------------

    def filter(self, data, strict=False, allow_downcast=None):
        """Return ``data`` as an ndarray of this type, or raise TypeError.

        ``strict``: ``data`` must already be an ndarray of exactly this dtype.
        ``allow_downcast``: convert to this dtype even when precision may be lost.
        Otherwise only safe conversions pass, plus a Python float into floatX.
        """
        if isinstance(data, Variable):
            raise TypeError(
                "Expected an array-like object, but found a Variable: maybe you are trying "
                "to call a function on a (possibly shared) variable instead of a numeric array?"
            )
        if type(data) is not np.ndarray and isinstance(data, np.ndarray):
            data = self._plain_array(data)
        if isinstance(data, np.ndarray) and data.dtype == self.numpy_dtype:
            pass
        elif strict:
            if not isinstance(data, np.ndarray):
                raise TypeError(f"{self} expected an ndarray object (got {type(data).__name__}).")
            raise TypeError(
                f"{self} expected an ndarray with dtype={self.dtype} " f"(got {data.dtype})."
            )
        elif allow_downcast:
            # Via asarray first: numpy refuses out-of-range Python ints but wraps arrays.
            with np.errstate(all="ignore"):
                data = np.asarray(data).astype(self.dtype)
        elif isinstance(data, np.ndarray):
            if np.result_type(self.numpy_dtype, data.dtype) != self.numpy_dtype:
                raise TypeError(
                    f"{self} cannot store a value of dtype {data.dtype} without risking loss "
                    f"of precision. If you do not mind this loss, you can: 1) explicitly cast "
                    f"your data to {self.dtype}, or 2) set allow_input_downcast=True when "
                    f"calling function."
                )
            data = np.asarray(data, dtype=self.dtype)
        elif (
            allow_downcast is None
            and isinstance(data, (float, np.floating))
            and self.dtype == config.floatX
        ):
            # Theano lets Python float literals into floatX even when that is float32.
            data = np.asarray(data, dtype=self.dtype)
        else:
            data = self._filter_lossless(data)
        if data.ndim != self.ndim:
            raise TypeError(
                f"{self}: wrong number of dimensions: expected {self.ndim}, "
                f"got {data.ndim} with shape {data.shape}."
            )
        for i, (s, d) in enumerate(zip(self.shape, data.shape)):
            if s is not None and s != d:
                if s == 1:
                    raise TypeError(
                        f"{self}: non-unit value on shape on a broadcastable dimension: "
                        f"dimension {i} has length {d}, expected 1 (shape {data.shape})."
                    )
                raise TypeError(
                    f"{self}: dimension {i} has length {d}, expected {s} " f"(shape {data.shape})."
                )
        if self.filter_checks_isfinite and not np.all(np.isfinite(data)):
            raise ValueError(f"{self}: non-finite elements not allowed (filter_checks_isfinite)")
        return data

    def value_zeros(self, shape):
        """An array of zeros of ``shape`` and this type's dtype (Theano's
        ``TensorType.value_zeros``).

        >>> TensorType("float32", shape=(None, None)).value_zeros((2, 3)).dtype
        dtype('float32')
        """
        return np.zeros(shape, dtype=self.dtype)

    def _plain_array(self, data):
        """An ndarray subclass as a plain ndarray (a view, no copy), so that every engine
        computes on, and returns, plain arrays. Refused: a masked array (its mask would
        be ignored, a silently wrong answer) and ``np.matrix`` (always 2-D, ``*`` is a
        matrix product)."""
        if isinstance(data, np.ma.MaskedArray):
            raise TypeError(
                f"{self} does not take a numpy masked array: its mask would be ignored. "
                "Pass np.ma.filled(x, fill_value) to choose the masked entries' values, "
                "or x.data to use the values under the mask."
            )
        if isinstance(data, np.matrix):
            raise TypeError(
                f"{self} does not take a numpy.matrix (always 2-D, its operators differ "
                "from an ndarray's); pass np.asarray(x)."
            )
        return data.view(np.ndarray)

    def _filter_lossless(self, data):
        try:
            original = np.asarray(data)
        except Exception as e:
            raise TypeError(
                f"{self} cannot convert {type(data).__name__} to an array: {e}"
            ) from None
        if original.dtype == object:
            raise TypeError(f"{self} cannot convert {data!r} to an array of {self.dtype}")
        with np.errstate(all="ignore"):
            try:
                converted = original.astype(self.dtype)
            except ValueError as e:  # a text that is no number: Theano's ValueError
                raise UnconvertibleValueError(f"{self} cannot convert {data!r}: {e}") from None
            except (TypeError, OverflowError) as e:
                raise TypeError(f"{self} cannot convert {data!r}: {e}") from None
            same = self.values_eq(original, converted, force_same_dtype=False)
        if not same:
            text = str(data)
            if len(text) > 80:
                text = text[:75] + "(...)"
            raise TypeError(
                f"{self} cannot store accurately value {text}, it would be represented as "
                f"{converted.tolist()}. If you do not mind this precision loss, you can: "
                f"1) explicitly convert your data to a numpy array of dtype {self.dtype}, "
                f"or 2) set allow_input_downcast=True when calling function."
            )
        return converted

    def value_validity_msg(self, data):
        try:
            self.filter(data, strict=True)
        except Exception as e:
            return str(e)
        return "value is valid"

    def is_valid_value(self, data) -> bool:
        return (
            isinstance(data, np.ndarray)
            and data.dtype == self.numpy_dtype
            and data.ndim == self.ndim
            and all(s is None or s == d for s, d in zip(self.shape, data.shape))
        )

    @staticmethod
    def values_eq(a, b, force_same_dtype=True) -> bool:
        """Exact equality, with NaN equal to NaN in the same positions."""
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or (force_same_dtype and a.dtype != b.dtype):
            return False
        if a.dtype.kind in "fc" or b.dtype.kind in "fc":
            return bool(np.array_equal(a, b, equal_nan=True))
        return bool(np.array_equal(a, b))

    values_eq_approx = staticmethod(values_eq_approx)

    def may_share_memory(self, a, b) -> bool:
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return bool(np.may_share_memory(a, b))
        return False

    def get_shape_info(self, obj):
        return obj.shape

    def get_size(self, shape_info):
        return int(np.prod(shape_info, dtype=np.int64)) * self.numpy_dtype.itemsize

    # -- relations between types --------------------------------------------------

    def in_same_class(self, other) -> bool:
        return (
            isinstance(other, TensorType) and other.dtype == self.dtype and other.ndim == self.ndim
        )

    def is_super(self, other) -> bool:
        """True if every value of ``other`` is a value of this type."""
        return self.in_same_class(other) and all(
            s is None or s == o for s, o in zip(self.shape, other.shape)
        )

    def convert_variable(self, var):
        """Return ``var`` when its type is at least as specific as this one, else None.

        A variable of static shape ``(1, 3)`` may stand where ``(None, 3)`` is expected.
        """
        if self.is_super(var.type):
            return var
        return None

    # -- making variables ---------------------------------------------------------

    # The classes of the variables and constants this type makes (Theano's attribute names);
    # ``theano_dag.tensor.variable`` sets them when it defines them.
    Variable: type = None
    Constant: type = None
    # The functions that build graphs of tensors (the ``theano_dag.tensor`` package, set
    # with the classes): scalar ops write their gradients with it (``scalar.vocabulary``).
    vocabulary = None

    def make_variable(self, name=None):
        return self.Variable(self, None, None, name)

    def make_constant(self, value, name=None):
        return self.Constant(self, value, name)

    def __repr__(self):
        return f"TensorType({self.dtype}, {self._shape_str()})"

    def __str__(self):
        if self.name:
            return self.name
        return repr(self)

    def _shape_str(self):
        named = {
            (): "scalar",
            (False,): "vector",
            (True,): "(True,)",
            (False, False): "matrix",
            (True, False): "row",
            (False, True): "col",
            (False,) * 3: "3D",
            (False,) * 4: "4D",
        }
        if all(s in (None, 1) for s in self.shape) and self.broadcastable in named:
            return named[self.broadcastable]
        return (
            "shape=("
            + ", ".join("?" if s is None else str(s) for s in self.shape)
            + ("," if len(self.shape) == 1 else "")
            + ")"
        )


def tensor(dtype=None, broadcastable=None, name=None, shape=None):
    """Return a new symbolic tensor: ``tensor('float32', (False, True), 'x')``.

    The Theano call order ``tensor(dtype, broadcastable, name)`` works; so do
    keywords ``shape=`` and a default dtype of floatX.

    >>> x = tensor("float32", (False, True), name="x")
    >>> x.type, x.name
    (TensorType(float32, col), 'x')
    """
    if broadcastable is None and shape is None:
        raise TypeError("tensor() needs `broadcastable` or `shape`")
    return TensorType(dtype, broadcastable=broadcastable, shape=shape)(name)


def _make_constructor(ndim_bcast, dtype, kind):
    def constructor(name=None, dtype=dtype, shape=None):
        if shape is not None:
            if len(shape) != len(ndim_bcast):
                raise TypeError(
                    f"{kind}: shape {shape} has {len(shape)} dimensions, "
                    f"expected {len(ndim_bcast)}"
                )
            t = TensorType(dtype, broadcastable=ndim_bcast, shape=shape)
        else:
            t = TensorType(dtype, broadcastable=ndim_bcast)
        return t(name)

    constructor.__name__ = kind
    what = {
        0: "scalar",
        1: "vector",
        2: "matrix",
        3: "3-d tensor",
        4: "4-d tensor",
        5: "5-d tensor",
        6: "6-d tensor",
        7: "7-d tensor",
    }
    d = "floatX" if dtype is None else dtype
    constructor.__doc__ = f"Return a symbolic {what[len(ndim_bcast)]} of dtype {d}."
    return constructor


_KINDS = {
    "scalar": (),
    "vector": (False,),
    "matrix": (False, False),
    "row": (True, False),
    "col": (False, True),
    "tensor3": (False,) * 3,
    "tensor4": (False,) * 4,
    "tensor5": (False,) * 5,
    "tensor6": (False,) * 6,
    "tensor7": (False,) * 7,
}
_PREFIXES = {
    "": None,
    "b": "int8",
    "w": "int16",
    "i": "int32",
    "l": "int64",
    "f": "float32",
    "d": "float64",
    "c": "complex64",
    "z": "complex128",
}


class UnconvertibleValueError(TypeError, ValueError):
    """A value numpy cannot convert to the type's dtype (``"abc"`` for a float): a
    TypeError as the type's other refusals, and the ValueError Theano raised."""


class TypeConstructor(TensorType):
    """A tensor type of fixed dtype that is also its variables' constructor, as Theano's
    ``dmatrix``, ``lscalar``...: ``dmatrix("x")`` makes a variable (of a plain
    ``TensorType``), ``dmatrix == TensorType("float64", (False, False))``, and it is a
    Type where one is expected (``as_op([dmatrix], dvector)``). ``shape=`` gives the
    variable static lengths.

    >>> dmatrix("x").type == dmatrix, dmatrix(shape=(2, None)).type.shape
    (True, (2, None))
    """

    def __init__(self, dtype, broadcastable, kind):
        super().__init__(dtype, broadcastable=broadcastable)
        self.kind = self.__name__ = kind  # named as the constructor function it replaces
        self.__doc__ = f"A symbolic {kind} of dtype {self.dtype}: ``{kind}(name)``."

    def __call__(self, name=None, dtype=None, shape=None):
        if shape is not None and len(shape) != self.ndim:
            raise TypeError(
                f"{self.kind}: shape {shape} has {len(shape)} dimensions, expected {self.ndim}"
            )
        plain = TensorType(dtype or self.dtype, shape=self.shape if shape is None else shape)
        return plain(name)

    # Equal to (and hashed as) the plain TensorType: a subclass's __eq__ is asked first.
    def __eq__(self, other):
        return isinstance(other, TensorType) and (
            type(other) in (TensorType, TypeConstructor) and self._props() == other._props()
        )

    def __hash__(self):
        return hash((TensorType, self._props()))

    def clone(self, dtype=None, broadcastable=None, shape=None):
        plain = TensorType(self.dtype, shape=self.shape)
        return plain.clone(dtype=dtype, broadcastable=broadcastable, shape=shape)

    def __reduce__(self):
        return (TypeConstructor, (self.dtype, self.broadcastable, self.kind))


@functools.lru_cache(maxsize=4096)  # bounded: the shapes of a long session's graphs
def output_type(dtype: str, shape: tuple) -> TensorType:
    """The TensorType of ``dtype`` (a dtype name) and static ``shape`` (a tuple of None
    and ints), one instance for all the nodes that ask for it (Elemwise's outputs):
    a node's output then adds no object of its own for its type.

    >>> output_type("float64", (None,)) is output_type("float64", (None,))
    True
    """
    return TensorType(dtype, shape=shape)


__all__ += ["TypeConstructor", "UnconvertibleValueError"]
for _kind, _bc in _KINDS.items():
    for _p, _dt in _PREFIXES.items():
        _name = _p + _kind
        if _dt is None:  # floatX, read when called: a function
            globals()[_name] = _make_constructor(_bc, _dt, _name)
        else:
            globals()[_name] = TypeConstructor(_dt, _bc, _name)
        __all__.append(_name)
del _kind, _bc, _p, _dt, _name

# Theano's tuples of the typed constructors, by family and rank.
int_types = int_scalar_types = (bscalar, wscalar, iscalar, lscalar)  # noqa: F821
float_types = float_scalar_types = (fscalar, dscalar)  # noqa: F821
complex_types = complex_scalar_types = (cscalar, zscalar)  # noqa: F821
int_vector_types = (bvector, wvector, ivector, lvector)  # noqa: F821
float_vector_types = (fvector, dvector)  # noqa: F821
complex_vector_types = (cvector, zvector)  # noqa: F821
int_matrix_types = (bmatrix, wmatrix, imatrix, lmatrix)  # noqa: F821
float_matrix_types = (fmatrix, dmatrix)  # noqa: F821
complex_matrix_types = (cmatrix, zmatrix)  # noqa: F821
__all__ += [
    f"{family}{rank}_types"
    for family in ("int", "float", "complex")
    for rank in ("", "_scalar", "_vector", "_matrix")
]


class ForeignArrayType(Type):
    """A tensor type that also takes arrays an engine keeps elsewhere (an OpenCL device
    array, a dask array) of the same dtype, rank and known lengths, unconverted; other
    values go through ``tensor_type``'s filter. Subclasses say which arrays
    (``is_foreign``), how to name them (``kind``, ``label``) and whether two may share
    memory.

    >>> class Listy(ForeignArrayType):
    ...     kind, label = "list", "Listy"
    ...     @staticmethod
    ...     def is_foreign(data):
    ...         return False
    >>> Listy(TensorType("float64", shape=(None,))).filter([1, 2]).dtype
    dtype('float64')
    """

    __props__ = ("tensor_type",)
    kind = "foreign"  # in messages: "a <kind> array"
    label = "Foreign"  # in str(): "<label>(TensorType(...))"

    def __init__(self, tensor_type):
        self.tensor_type = tensor_type

    @staticmethod
    def is_foreign(data) -> bool:
        raise NotImplementedError

    def filter(self, data, strict=False, allow_downcast=None):
        if not self.is_foreign(data):
            return self.tensor_type.filter(data, strict=strict, allow_downcast=allow_downcast)
        tt, kind = self.tensor_type, self.kind
        if data.dtype != np.dtype(tt.dtype):
            raise TypeError(
                f"{tt} expected a {kind} array of dtype {tt.dtype}, got one of dtype "
                f"{data.dtype} ({kind} arrays are not converted)"
            )
        if data.ndim != tt.ndim:
            raise TypeError(
                f"{tt} expected a {kind} array of {tt.ndim} dimensions, got shape {data.shape}"
            )
        for d, (want, got) in enumerate(zip(tt.shape, data.shape)):
            if want is not None and want != got:
                raise TypeError(
                    f"{tt} expected length {want} along dimension {d}, got a {kind} "
                    f"array of shape {data.shape}"
                )
        return data

    def is_valid_value(self, data) -> bool:
        try:
            self.filter(data, strict=True)
            return True
        except (TypeError, ValueError):
            return False

    def may_share_memory(self, a, b) -> bool:
        return self.tensor_type.may_share_memory(a, b)

    def values_eq_approx(self, a, b):
        return self.tensor_type.values_eq_approx(a, b)

    def __str__(self):
        return f"{self.label}({self.tensor_type})"
