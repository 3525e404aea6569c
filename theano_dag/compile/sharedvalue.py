"""Shared variables: symbolic variables with a value that persists between calls.

``shared(value)`` makes a :class:`SharedVariable` that every function using it
reads implicitly (it is never a positional argument), and that ``updates``
may overwrite after a call. For numpy arrays and numbers the result is a
:class:`TensorSharedVariable`, which has the tensor operators (``W * x``,
``W.T``, ``W.sum()``...).
"""

from __future__ import annotations

import copy as _copy

import numpy as np

from theano_dag.config import config
from theano_dag.engines.basic import Container
from theano_dag.graph.basic import Variable
from theano_dag.graph.type import generic

__all__ = ["SharedVariable", "shared", "shared_constructor"]


class SharedVariable(Variable):
    """A Variable whose value is kept in a Container shared by every function using it.

    ``default_update``, when set to an expression, is the update every
    function applies unless given one explicitly (or ``no_default_updates``).

    >>> from theano_dag.graph.type import Generic
    >>> s = SharedVariable(Generic(), value=[1, 2], name="s")
    >>> s.get_value()
    [1, 2]
    >>> s.set_value([3]); s.get_value()
    [3]
    """

    def __init__(self, type, value, strict=False, allow_downcast=None, container=None, name=None):
        super().__init__(type=type, name=name, owner=None, index=None)
        if container is not None:
            self.container = container
            if value is not None or strict:
                raise TypeError(
                    "SharedVariable: give either a container or a value (with strict), not both"
                )
        else:
            self.container = Container(
                self,
                storage=[type.filter(value, strict=strict, allow_downcast=allow_downcast)],
                readonly=False,
                strict=strict,
                allow_downcast=allow_downcast,
            )

    def get_value(self, borrow=False, return_internal_type=False):
        """Return the value. ``borrow=True`` returns the internal object itself (no copy):
        changing it in place changes the shared value."""
        value = self.container.value
        return value if borrow else _copy.deepcopy(value)

    def set_value(self, new_value, borrow=False):
        """Set the value (filtered through the type). ``borrow=True`` keeps ``new_value``
        itself when the type allows, so later changes to it are seen by the functions."""
        if not borrow:
            new_value = _copy.deepcopy(new_value)
        self.container.value = new_value

    def zero(self, borrow=False):
        """Set the value to zeros of the same shape (numeric values only)."""
        value = self.container.value
        if borrow:
            value[...] = 0
        else:
            self.container.value = 0 * value

    def clone(self):
        """A new SharedVariable sharing this one's container (the same storage)."""
        cp = self.__class__(
            name=self.name, type=self.type, value=None, strict=None, container=self.container
        )
        cp.tag = _copy.copy(self.tag)
        return cp

    @property
    def default_update(self):
        return getattr(self.tag, "default_update", None)

    @default_update.setter
    def default_update(self, value):
        if value is None:
            if hasattr(self.tag, "default_update"):
                del self.tag.default_update
            return
        self.tag.default_update = value

    @property
    def value(self):
        raise AttributeError("SharedVariable has no .value: use get_value() or set_value() instead")

    def __getitem__(self, item):
        raise TypeError(
            f"The generic SharedVariable {self} is not subscriptable: it holds a "
            f"{type(self.container.value).__name__}, not a numpy array"
        )


def shared_constructor(ctor, remove=False):
    """Register (or with ``remove`` unregister) a constructor tried by :func:`shared`.

    A constructor is ``ctor(value, name=, strict=, allow_downcast=, **kwargs)``
    that returns a SharedVariable or raises TypeError to pass. The newest
    registered constructor is tried first.
    """
    if remove:
        _CONSTRUCTORS.remove(ctor)
    else:
        _CONSTRUCTORS.append(ctor)
    return ctor


def shared(value, name=None, strict=False, allow_downcast=None, **kwargs):
    """Return a SharedVariable holding ``value`` (a copy unless ``borrow=True``).

    numpy arrays and Python or numpy numbers become tensors whose every axis
    may change length (none broadcastable unless ``broadcastable=`` says so);
    other objects become Generic shared variables.

    >>> import numpy as np
    >>> w = shared(np.zeros(3), name="w")
    >>> w.type, w.get_value()
    (TensorType(float64, vector), array([0., 0., 0.]))
    """
    if isinstance(value, Variable):
        raise TypeError(
            "shared() needs a value (a numpy array, a number...), not a symbolic Variable: "
            f"got {value}"
        )
    if config.device == "opencl":
        # Registers the device shared-variable constructor (tried first).
        import theano_dag.engines.opencl  # noqa: F401

    # Constructors added last are the most specific; the generic one is first.
    for ctor in reversed(_CONSTRUCTORS):
        try:
            return ctor(value, name=name, strict=strict, allow_downcast=allow_downcast, **kwargs)
        except TypeError:
            continue
    raise TypeError(
        f"No shared variable constructor accepts value={value!r} with options {kwargs}; "
        "numpy arrays and numbers accept borrow= and broadcastable=/shape=, other objects "
        "accept no options"
    )


_CONSTRUCTORS: list = []
shared.constructors = _CONSTRUCTORS


@shared_constructor
def generic_constructor(value, name=None, strict=False, allow_downcast=None):
    """Shared variable of any Python object (the fallback)."""
    return SharedVariable(
        type=generic, value=value, name=name, strict=strict, allow_downcast=allow_downcast
    )


@shared_constructor
def tensor_constructor(
    value,
    name=None,
    strict=False,
    allow_downcast=None,
    borrow=False,
    broadcastable=None,
    shape=None,
):
    """Shared tensor of a numpy array or a Python/numpy number."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise TypeError(f"shared: arrays of dtype {value.dtype} are not tensors")
        array = value if borrow else value.copy()
    elif isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
        # Python numbers: int64 / float64 / complex128, like Theano's scalar constructor.
        array = np.asarray(value)
    else:
        raise TypeError(f"shared tensors hold numpy arrays or numbers, not {type(value)}")
    from theano_dag.compile.sharedvar_tensor import TensorSharedVariable, tensor_type_for

    ttype = tensor_type_for(array, broadcastable=broadcastable, shape=shape)
    return TensorSharedVariable(
        type=ttype, value=array, name=name, strict=strict, allow_downcast=allow_downcast
    )
