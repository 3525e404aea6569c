"""Shared values: a storage cell (``Container``) and the variables that own one.

``shared(value)`` makes a :class:`SharedVariable` that every function using it
reads implicitly (it is never a positional argument), and that ``updates``
may overwrite after a call. The constructors :func:`shared` tries are registered
by the floors that know the values: the tensor package registers numpy arrays
and numbers (``theano_dag.tensor.sharedvar``), an engine its device arrays.
"""

from __future__ import annotations

import copy as _copy
from contextlib import contextmanager
from copy import deepcopy

from theano_dag.graph.basic import Variable
from theano_dag.graph.type import Type, generic

__all__ = ["Container", "SharedVariable", "shared", "shared_constructor"]


class Container:
    """Join a Variable (or a Type) with a storage cell holding its value.

    Setting ``.data`` (alias ``.value``) filters the new value through the
    type; a ``readonly`` container refuses it.

    >>> from theano_dag.graph.type import Generic
    >>> c = Container(Generic()("x"), [None])
    >>> c.data = [1, 2]
    >>> c.storage, c.name
    ([[1, 2]], 'x')
    """

    def __init__(self, r, storage, *, readonly=False, strict=False, allow_downcast=None, name=None):
        if not isinstance(storage, list) or len(storage) < 1:
            raise TypeError(
                f"Container storage must be a list of length at least one, got {storage!r}"
            )
        self.type = r if isinstance(r, Type) else r.type
        self.name = getattr(r, "name", None) if name is None else name
        self.storage = storage
        self.readonly = readonly
        self.strict = strict
        self.allow_downcast = allow_downcast

    def __get__(self):
        return self.storage[0]

    def __set__(self, value):
        try:
            self.store(value)
        except Exception as e:
            # Theano's way: the container's name as one more argument of the error.
            e.args = e.args + (f'Container name "{self.name}"',)
            raise

    def store(self, value):
        """Set the value through the type's filter; its errors pass unchanged."""
        if self.readonly:
            raise ValueError(f"Cannot set readonly storage: {self.name}")
        if value is None:
            self.storage[0] = None
            return
        kwargs = {}
        if self.strict:
            kwargs["strict"] = True
        if self.allow_downcast is not None:
            kwargs["allow_downcast"] = self.allow_downcast
        try:
            # Reuse the old buffer when the type knows how to.
            self.storage[0] = self.type.filter_inplace(value, self.storage[0], **kwargs)
        except NotImplementedError:
            self.storage[0] = self.type.filter(value, **kwargs)

    data = property(__get__, __set__)
    value = property(__get__, __set__)

    def __str__(self):
        return f"<{self.storage[0]}>"

    def __repr__(self):
        return f"<{self.storage[0]!r}>"

    def __deepcopy__(self, memo):
        return type(self)(
            deepcopy(self.type, memo),
            deepcopy(self.storage, memo),
            readonly=self.readonly,
            strict=self.strict,
            allow_downcast=self.allow_downcast,
            name=self.name,
        )


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

    def get_test_value(self):
        """The test value of a shared variable is its value (a copy), unless a
        ``tag.test_value`` was set: ``compute_test_value`` needs no tag on it."""
        if self._tag is not None and hasattr(self._tag, "test_value"):
            return self._tag.test_value
        return self.get_value(borrow=False)

    def set_value(self, new_value, borrow=False):
        """Set the value (filtered through the type). ``borrow=True`` keeps ``new_value``
        itself when the type allows, so later changes to it are seen by the functions."""
        if not borrow:
            new_value = _copy.deepcopy(new_value)
        with self.naming_errors():
            self.container.store(new_value)

    @contextmanager
    def naming_errors(self):
        """Reword a TypeError or ValueError raised inside (a value the type refuses) as
        one sentence naming this variable: ``set_value`` and its engine variants use it.

        >>> import numpy as np
        >>> from theano_dag.tensor.sharedvar import tensor_constructor
        >>> w = tensor_constructor(np.zeros(3), name="w")
        >>> w.set_value(np.zeros((2, 2)))
        Traceback (most recent call last):
        ...
        TypeError: Cannot set the value of shared variable 'w': ...wrong number of dimensions...
        """
        try:
            yield
        except (TypeError, ValueError) as e:
            name = "(unnamed)" if self.name is None else repr(self.name)
            msg = f"Cannot set the value of shared variable {name}: {e}"
            try:
                new = type(e)(msg)
            except Exception:
                new = None
            if new is None or str(new) != msg:
                new = (TypeError if isinstance(e, TypeError) else ValueError)(msg)
            raise new from e

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

    @default_update.deleter
    def default_update(self):  # ``del x.default_update`` (Theano code writes it)
        self.default_update = None

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


def check_cpu_target(target, who):
    """Theano's ``target`` (the device a value lives on): ``"cpu"``, the only one here; a
    GPU context's name is refused with a ``TypeError`` naming ``who``, as Theano without
    that context refused it (its users catch the ``TypeError``).

    >>> check_cpu_target("cpu", "shared: target")
    >>> check_cpu_target(None, "shared: target")
    Traceback (most recent call last):
    TypeError: shared: target=None: theano_dag's values live on the CPU (target='cpu'); ...
    """
    if target != "cpu":
        raise TypeError(
            f"{who}={target!r}: theano_dag's values live on the CPU (target='cpu'); "
            "there is no GPU context"
        )


def shared(value, name=None, strict=False, allow_downcast=None, **kwargs):
    """Return a SharedVariable holding ``value`` (a copy unless ``borrow=True``).

    numpy arrays and Python or numpy numbers become tensors whose every axis
    may change length (none broadcastable unless ``broadcastable=`` says so);
    other objects become Generic shared variables.

    >>> import numpy as np
    >>> w = shared(np.zeros(3), name="w")
    >>> w.type, w.get_value()
    (TensorType(float64, vector), array([0., 0., 0.]))
    >>> shared(np.zeros(3), name="w", target="cpu").type  # Theano's device: the CPU only
    TensorType(float64, vector)
    """
    if isinstance(value, Variable):
        raise TypeError(
            "shared() needs a value (a numpy array, a number...), not a symbolic Variable: "
            f"got {value}"
        )
    if "target" in kwargs:
        check_cpu_target(kwargs.pop("target"), "shared: target")
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
