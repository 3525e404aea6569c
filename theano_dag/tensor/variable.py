"""``TensorVariable`` and ``TensorConstant``: symbolic arrays with numpy-like operators.

``x + y``, ``x[1:, 0]``, ``x.sum(axis=0)``, ``x.T`` all build graph nodes. ``==`` is
identity (Theano semantics: Variables are dict keys); use ``tt.eq`` for elementwise
equality.
"""

from __future__ import annotations

import pdb
import warnings

import numpy as np

# The ops behind the operators (tensor.math, .basic, .subtensor) build on this module's
# classes: they are reached through the package when called.
from theano_dag import scalar as ts
from theano_dag import tensor as _tensor
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.utils import user_stacklevel
from theano_dag.scalar.basic import ScalarType, autocast_scalar
from theano_dag.tensor.type import TensorType, all_dtypes, output_type

__all__ = [
    "TensorVariable",
    "TensorConstant",
    "AsTensorError",
    "as_tensor_variable",
    "as_tensor",
    "constant",
    "autocast_scalar",
]


# The scalar ops whose elementwise results refuse ``bool()`` (lt, gt, le, ge, eq, neq).
_COMPARISONS = tuple({type(op) for op in (ts.lt, ts.gt, ts.le, ts.ge, ts.eq, ts.neq)})


class AsTensorError(TypeError):
    """Raised when an object cannot be turned into a tensor variable."""


def _binop(fn_name, reflected=False):
    def method(self, other):
        try:
            other = as_tensor_variable(other)
        except (AsTensorError, TypeError, NotImplementedError):
            return NotImplemented
        # (matmul is of the contractions, the package's top level)
        fn = getattr(_tensor.math, fn_name, None) or getattr(_tensor, fn_name)
        return fn(other, self) if reflected else fn(self, other)

    method.__name__ = f"__{'r' if reflected else ''}{fn_name}__"
    return method


class _tensor_py_operators:  # noqa: N801 (Theano's name)
    """Operators and numpy-like methods shared by tensor variables and constants."""

    __slots__ = ()
    __array_priority__ = 1000  # so ndarray + TensorVariable calls our __radd__

    __add__, __radd__ = _binop("add"), _binop("add", True)
    __sub__, __rsub__ = _binop("sub"), _binop("sub", True)
    __mul__, __rmul__ = _binop("mul"), _binop("mul", True)
    __truediv__, __rtruediv__ = _binop("true_div"), _binop("true_div", True)
    __floordiv__, __rfloordiv__ = _binop("int_div"), _binop("int_div", True)
    __mod__, __rmod__ = _binop("mod"), _binop("mod", True)
    __pow__, __rpow__ = _binop("pow"), _binop("pow", True)
    # numpy's matmul (tt.matmul), not Theano's dot beyond two dimensions
    __matmul__, __rmatmul__ = _binop("matmul"), _binop("matmul", True)
    __lt__, __le__ = _binop("lt"), _binop("le")
    __gt__, __ge__ = _binop("gt"), _binop("ge")
    __and__, __rand__ = _binop("and_"), _binop("and_", True)
    __or__, __ror__ = _binop("or_"), _binop("or_", True)
    __xor__, __rxor__ = _binop("xor"), _binop("xor", True)

    def __divmod__(self, other):
        """``divmod(x, y)``: ``(x // y, x % y)``, as Python's divmod for numbers (Theano's).

        >>> import theano_dag.tensor as tt
        >>> x, y = tt.dscalars("x", "y")
        >>> [float(v.eval({x: -7.0, y: 2.0})) for v in divmod(x, y)]
        [-4.0, 1.0]
        """
        return self // other, self % other

    def __rdivmod__(self, other):
        return other // self, other % self

    def __neg__(self):
        return _tensor.math.neg(self)

    def __abs__(self):
        return _tensor.math.abs(self)

    def __invert__(self):
        return _tensor.math.invert(self)

    def __bool__(self):
        # ``if var:`` asks whether there is a variable (PyMC3 writes it), as in Theano:
        # true. A comparison's result has no truth value until run: ``a < b < c`` (which
        # Python runs as ``(a < b) and (b < c)``) or ``if x > 0:`` is refused.
        scalar_op = getattr(getattr(self.owner, "op", None), "scalar_op", None)
        if isinstance(scalar_op, _COMPARISONS):
            raise TypeError(
                "Variables do not support boolean operations: a symbolic comparison has no "
                "truth value. Use tt.switch / tt.and_ / tt.or_ to build conditions."
            )
        return True

    # No __len__, as in Theano and PyTensor: len(x) raises Python's own TypeError, and a
    # tensor is not Sized, so pandas and numpy take it as one object, not a sequence
    # (PyMC3 builds a DataFrame from a dict of tensors only where that holds).

    def __iter__(self):
        try:
            n = _tensor.basic.get_vector_length(self)
        except (TypeError, ValueError):
            raise TypeError(
                "TensorType does not support iteration: the length of this tensor is not "
                "fixed. Maybe you are using builtins.sum instead of tt.sum?"
            ) from None
        for i in range(n):
            yield self[i]

    # -- type information ---------------------------------------------------------

    @property
    def ndim(self):
        return self.type.ndim

    @property
    def dtype(self):
        return self.type.dtype

    @property
    def broadcastable(self):
        return self.type.broadcastable

    @property
    def shape(self):
        return _tensor.basic.shape(self)

    @property
    def size(self):
        return _tensor.math.prod(self.shape)

    @property
    def T(self):  # noqa: N802
        return _tensor.basic.transpose(self)

    # -- methods ------------------------------------------------------------------

    def __getitem__(self, args):
        return _tensor.subtensor.getitem(self, args)

    def sum(self, axis=None, dtype=None, keepdims=False, acc_dtype=None):
        return _tensor.math.sum(
            self, axis=axis, dtype=dtype, keepdims=keepdims, acc_dtype=acc_dtype
        )

    def prod(self, axis=None, dtype=None, keepdims=False, acc_dtype=None):
        return _tensor.math.prod(
            self, axis=axis, dtype=dtype, keepdims=keepdims, acc_dtype=acc_dtype
        )

    def mean(self, axis=None, dtype=None, keepdims=False, acc_dtype=None):
        return _tensor.math.mean(
            self, axis=axis, dtype=dtype, keepdims=keepdims, acc_dtype=acc_dtype
        )

    def var(self, axis=None, ddof=0, keepdims=False, corrected=False):
        return _tensor.math.var(self, axis=axis, ddof=ddof, keepdims=keepdims, corrected=corrected)

    def std(self, axis=None, ddof=0, keepdims=False, corrected=False):
        return _tensor.math.std(self, axis=axis, ddof=ddof, keepdims=keepdims, corrected=corrected)

    def max(self, axis=None, keepdims=False):
        return _tensor.math.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False):
        return _tensor.math.min(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis=None, keepdims=False):
        return _tensor.math.argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis=None, keepdims=False):
        return _tensor.math.argmin(self, axis=axis, keepdims=keepdims)

    def all(self, axis=None, keepdims=False):
        return _tensor.math.all(self, axis=axis, keepdims=keepdims)

    def any(self, axis=None, keepdims=False):
        return _tensor.math.any(self, axis=axis, keepdims=keepdims)

    def reshape(self, shape, *more, ndim=None):
        if more:
            shape = (shape,) + more
        return _tensor.basic.reshape(self, shape, ndim=ndim)

    def dimshuffle(self, *pattern):
        if len(pattern) == 1 and isinstance(pattern[0], (list, tuple)):
            pattern = pattern[0]
        return _tensor.basic.dimshuffle(self, pattern)

    def flatten(self, ndim=1):
        return _tensor.basic.flatten(self, ndim)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = axes[0]
        return _tensor.basic.transpose(self, axes or None)

    def astype(self, dtype):
        return _tensor.basic.cast(self, dtype)

    def dot(self, other):
        return _tensor.math.dot(self, other)

    def clip(self, a_min, a_max):
        return _tensor.math.clip(self, a_min, a_max)

    def round(self, mode=None):
        return _tensor.math.round(self, mode)

    def zeros_like(self, dtype=None):
        return _tensor.basic.zeros_like(self, dtype=dtype)

    def ones_like(self, dtype=None):
        return _tensor.basic.ones_like(self, dtype=dtype)

    def squeeze(self):
        return _tensor.basic.squeeze(self)

    def fill(self, value):
        """``value`` broadcast to this variable's shape (Theano's ``x.fill(value)``)."""
        return _tensor.basic.fill(self, value)

    def copy(self, name=None):
        out = _tensor.math.identity(self)
        out.name = name
        return out

    def repeat(self, repeats, axis=None):
        return _tensor.basic.repeat(self, repeats, axis)

    # numpy's array methods that Theano's variables have too.
    def ravel(self):
        return _tensor.basic.flatten(self)

    def sort(self, axis=-1, kind="quicksort", order=None):
        """``sort(self, axis, kind, order)``: a sorted copy (not in place, as Theano's).

        >>> import numpy as np
        >>> import theano_dag.tensor as tt
        >>> x = tt.dvector("x")
        >>> x.sort().eval({x: np.array([3.0, 1.0, 2.0])})
        array([1., 2., 3.])
        """
        return _tensor.sort(self, axis, kind, order)

    def argsort(self, axis=-1, kind="quicksort", order=None):
        return _tensor.argsort(self, axis, kind, order)

    def compress(self, a, axis=None):
        """Theano's method: ``compress(self, a, axis)``, this variable the condition and
        ``a`` the array it selects from (the other way round from numpy's method).

        >>> import numpy as np
        >>> import theano_dag.tensor as tt
        >>> c, a = tt.bvector("c"), tt.dvector("a")
        >>> c.compress(a).eval({c: np.array([1, 0, 1], "int8"), a: np.array([4.0, 5.0, 6.0])})
        array([4., 6.])
        """
        return _tensor.compress(self, a, axis=axis)

    def get_scalar_constant_value(self):
        """The constant scalar this variable is known to be (``NotScalarConstantError``
        otherwise): ``tt.get_scalar_constant_value(self)``."""
        return _tensor.get_scalar_constant_value(self)

    def transfer(self, target):
        """Theano's transfer to a device: ``'cpu'`` (the only target of a tensor here; the
        engine that runs a function places its values) gives this variable."""
        if target != "cpu":
            raise ValueError(
                f"transfer: a tensor's only target is 'cpu' (engines place values on their "
                f"devices themselves), got {target!r}"
            )
        return self

    def cumsum(self, axis=None):
        return _tensor.cumsum(self, axis)

    def cumprod(self, axis=None):
        return _tensor.cumprod(self, axis)

    def conj(self):
        return _tensor.math.conj(self)

    conjugate = conj

    @property
    def real(self):
        """The real part (``tensor.real``), as numpy's ``a.real``."""
        return _tensor.math.real(self)

    @property
    def imag(self):
        """The imaginary part (``tensor.imag``), as numpy's ``a.imag``."""
        return _tensor.math.imag(self)

    def ptp(self, axis=None):
        return _tensor.ptp(self, axis)

    def swapaxes(self, axis1, axis2):
        return _tensor.swapaxes(self, axis1, axis2)

    def nonzero(self, return_matrix=False):
        return _tensor.nonzero(self, return_matrix)

    def nonzero_values(self):
        return _tensor.nonzero_values(self)

    def take(self, indices, axis=None, mode="raise"):
        return _tensor.subtensor.take(self, indices, axis, mode)

    def searchsorted(self, v, side="left", sorter=None):
        return _tensor.extra_ops.searchsorted(self, v, side, sorter)

    def choose(self, choices, out=None, mode="raise"):
        return _tensor.arrays.choose(self, choices, out=out, mode=mode)

    def trace(self):
        return _tensor.linalg.trace(self)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        return _tensor.extra_ops.diagonal(self, offset, axis1, axis2)

    def norm(self, L, axis=None, keepdims=False):  # noqa: N803 (Theano's name)
        """``sum(abs(x) ** L) ** (1 / L)`` over ``axis`` (Theano's; L neither 0 nor inf);
        ``keepdims`` keeps the reduced axes with length 1."""
        if L == 0 or np.isinf(L):
            raise NotImplementedError(f"norm: L={L} is not supported (Theano's limit)")
        return (abs(self) ** L).sum(axis=axis, keepdims=keepdims) ** (1.0 / L)


# numpy calls the method of an object's name when a ufunc meets it (``np.cos(x)`` calls
# ``x.cos()``), so a variable with these methods works in numpy code (PyMC users write it).
_UFUNC_METHODS = (
    "arccos arccosh arcsin arcsinh arctan arctanh ceil cos cosh deg2rad exp exp2 expm1 "
    "floor log log10 log1p log2 rad2deg sin sinh sqrt tan tanh trunc"
).split()


def _ufunc_method(name):
    def method(self):
        return getattr(_tensor.math, name)(self)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``{name}`` of this variable (what ``numpy.{name}(x)`` calls)."
    return method


for _name in _UFUNC_METHODS:
    setattr(_tensor_py_operators, _name, _ufunc_method(_name))


class TensorVariable(_tensor_py_operators, Variable):
    """A symbolic n-dimensional array (the output of an op, or a graph input).

    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> y = (x + 1).sum(axis=0)
    >>> y.ndim, y.dtype, isinstance(y, TensorVariable)
    (1, 'float64', True)

    ``config.warn_float64`` (``warn``, ``raise``, ``pdb``) flags each float64 variable
    made, at the user's line, to find what keeps a float32 program in float64:

    >>> with config.change_flags(warn_float64="raise"):
    ...     tt.dvector("v")
    Traceback (most recent call last):
    ...
    TypeError: You are creating a TensorVariable with float64 dtype (flag warn_float64=raise)
    """

    def __init__(self, type, owner=None, index=None, name=None):
        Variable.__init__(self, type, owner, index, name)  # positional: made per node
        action = config.warn_float64
        if action != "ignore" and type.dtype == "float64":
            _float64_created(action)

    @classmethod
    def _plain_copy(cls) -> bool:
        # The float64 check is all this constructor adds: nothing while it is off.
        return (
            cls.__init__ is TensorVariable.__init__
            and cls.clone is Variable.clone
            and config.warn_float64 == "ignore"
            and not Variable.construction_observers
        )


def _float64_created(action: str):
    msg = f"You are creating a TensorVariable with float64 dtype (flag warn_float64={action})"
    if action == "warn":
        warnings.warn(msg, stacklevel=user_stacklevel())
    elif action == "raise":
        raise TypeError(msg)
    else:
        pdb.set_trace()


class TensorConstant(_tensor_py_operators, Constant):
    """A tensor with a fixed value. Two constants with equal data have equal signatures.

    >>> a, b = constant([1.0, 2.0]), constant([1.0, 2.0])
    >>> a is b, a.signature() == b.signature(), a.equals(b)
    (False, True, True)
    """

    def __init__(self, type, data, name=None):
        super().__init__(type, data, name)
        self.data.setflags(write=False)

    def signature(self):
        # Bytes, dtype and shape identify the value exactly (NaN payloads included).
        d = self.data
        return (self.type, d.dtype.str, d.shape, d.tobytes())

    def __str__(self):
        if self.name is not None:
            return self.name
        d = self.data
        s = str(d) if d.size <= 8 else f"{{{d.dtype} array of shape {d.shape}}}"
        return s if len(s) <= 40 else s[:30] + "..." + s[-5:]

    def get_scalar_value(self):
        """The single value of a constant whose every element is equal."""
        return _tensor.basic.get_scalar_constant_value(self)


def constant(x, name=None, ndim=None, dtype=None):
    """Return a TensorConstant holding ``x`` (Python numbers auto-cast as in Theano).

    >>> c = constant([[1, 2, 3]])
    >>> c.type, c.data.dtype
    (TensorType(int64, row), dtype('int64'))
    >>> constant(2.0, ndim=2).broadcastable
    (True, True)
    """
    if isinstance(x, TensorConstant):
        if (
            (name is None or x.name == name)
            and (ndim is None or x.ndim == ndim)
            and (dtype is None or x.dtype == dtype)
        ):
            return x
        x = x.data
    if isinstance(x, Variable):
        raise AsTensorError(f"constant: {x} is a symbolic Variable, not a value")
    try:
        data = autocast_scalar(x, dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise AsTensorError(f"Could not convert {x!r} to a tensor constant: {e}") from None
    dtype_name = _dtype_name(data.dtype)
    if dtype_name is None:
        raise AsTensorError(
            f"Could not convert {type(x).__name__} {x!r} to a tensor constant "
            f"(numpy gives dtype {data.dtype})"
        )
    if ndim is not None:
        if data.ndim < ndim:
            data = data.reshape((1,) * (ndim - data.ndim) + data.shape)
        elif data.ndim > ndim:
            extra = data.shape[: data.ndim - ndim]
            if any(s != 1 for s in extra):
                raise ValueError(
                    f"constant: the value of shape {data.shape} cannot be made {ndim}-dimensional"
                )
            data = data.reshape(data.shape[data.ndim - ndim :])
    # The type shared by the constants of this dtype and broadcastable pattern.
    ttype = output_type(dtype_name, tuple(1 if s == 1 else None for s in data.shape))
    return TensorConstant(ttype, np.array(data), name=name)


def _dtype_name(dtype) -> str | None:
    """The name of numpy ``dtype`` when it is one of a tensor's (None otherwise): numpy's
    ``dtype.name`` is slow, and constants ask per node."""
    name = _DTYPE_NAME_OF.get(dtype, False)
    if name is False:
        name = None if dtype.kind == "O" or dtype.name not in all_dtypes else dtype.name
        if len(_DTYPE_NAME_OF) >= 256:  # (structured dtypes are many)
            _DTYPE_NAME_OF.clear()
        _DTYPE_NAME_OF[dtype] = name
    return name


_DTYPE_NAME_OF: dict = {}  # numpy dtype -> _dtype_name's answer


def as_tensor_variable(x, name=None, ndim=None, dtype=None):
    """Return ``x`` as a TensorVariable: variables pass through, values become constants.

    With ``ndim``, leading broadcastable dimensions are added or dropped to match.

    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> as_tensor_variable(x) is x, as_tensor_variable(3).dtype
    (True, 'int8')
    >>> as_tensor_variable([x, x]).type
    TensorType(float64, shape=(2, ?))
    """
    if isinstance(x, Apply):
        x = x.default_output()  # the output that stands for the node (Theano's)
    if isinstance(x, Variable):
        if hasattr(x, "_as_TensorVariable"):
            x = x._as_TensorVariable()
        if isinstance(x.type, ScalarType):  # a scalar of the scalar floor: a 0-d tensor
            x = _tensor.arrays.tensor_from_scalar(x)
        if not isinstance(x.type, TensorType):
            raise AsTensorError(f"Cannot convert {x} of type {x.type} to a tensor variable")
        if ndim is not None and x.ndim != ndim:
            if x.ndim > ndim:
                drop = [i for i in range(x.ndim - ndim)]
                if not all(x.broadcastable[i] for i in drop):
                    raise ValueError(
                        f"as_tensor_variable: {x} has {x.ndim} dimensions and cannot be made "
                        f"{ndim}-dimensional (its leading dimensions are not broadcastable)"
                    )
                x = x.dimshuffle(list(range(x.ndim - ndim, x.ndim)))
            else:
                x = x.dimshuffle(["x"] * (ndim - x.ndim) + list(range(x.ndim)))
        return x
    if isinstance(x, bool):
        # As Theano: a Python bool is most often ``v == w`` of two variables, which
        # compares them as objects; a constant from it would silently be wrong.
        raise AsTensorError(
            f"Cannot convert {x} to a tensor variable: a Python bool is refused, as it is "
            "most likely the result of == or != between variables, which compares the "
            "objects (use tt.eq(v, w) or tt.neq(v, w)); for a constant use np.array(True) "
            "or np.array(False)"
        )
    if isinstance(x, (tuple, list)) and any(isinstance(e, Variable) for e in _flat(x)):
        elems = [
            constant(np.asarray(e.data, dtype=e.type.dtype))
            if isinstance(e, Constant) and isinstance(e.type, ScalarType)
            else as_tensor_variable(e)
            for e in x
        ]
        stacked = _tensor.basic.stack(elems)
        if all(isinstance(e, TensorConstant) for e in elems):
            # constants only: a constant, as Theano's (of the dtype the stack has)
            data = np.stack([e.data for e in elems]).astype(stacked.dtype)
            return constant(data, name=name)
        return stacked
    try:
        return constant(x, name=name, ndim=ndim, dtype=dtype)
    except AsTensorError:
        raise
    except TypeError as e:
        raise AsTensorError(f"Cannot convert {x!r} to a tensor variable: {e}") from None


def _flat(seq):
    for e in seq:
        if isinstance(e, (list, tuple)):
            yield from _flat(e)
        else:
            yield e


as_tensor = as_tensor_variable


# TensorType makes its variables and constants with these classes.
TensorType.Variable = TensorVariable
TensorType.Constant = TensorConstant
TensorType.vocabulary = _tensor
