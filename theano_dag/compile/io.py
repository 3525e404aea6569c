"""``In`` and ``Out``: how a symbolic input or output of a function behaves (``theano.compile.io``).

An ``In`` says where an input's value comes from (the caller, a default, a
shared variable's storage), whether the function may overwrite it
(``mutable``) or return it aliased (``borrow``), and what replaces it after
each call (``update``). An ``Out`` says whether the function may hand back its
internal storage (``borrow``).
"""

from __future__ import annotations

from theano_dag.graph.basic import Constant, Variable
from theano_dag.graph.shared import Container, SharedVariable

__all__ = [
    "In",
    "Out",
    "SymbolicInput",
    "SymbolicOutput",
    "convert_function_input",
    "update_type_fits",
]


def update_type_fits(var_type, update_type) -> bool:
    """True if a value of ``update_type`` may be stored into a variable of ``var_type``.

    The types are equal, or the update's is more specific (a static length where
    the variable has none): Theano, which had no static lengths, saw both as one type.
    A static length of 1 where the variable has none is refused, as Theano refuses a
    broadcastable dimension there: such an update would store a value of length 1 where
    the user most likely meant it to broadcast over the variable's length.

    >>> from theano_dag.tensor.type import TensorType
    >>> m = TensorType("float64", shape=(None, None))
    >>> [update_type_fits(m, TensorType("float64", shape=s)) for s in [(None, 3), (1, 1)]]
    [True, False]
    """
    if update_type == var_type:
        return True
    is_super = getattr(var_type, "is_super", None)
    if is_super is None or not is_super(update_type):
        return False
    return not any(v is None and u == 1 for v, u in zip(var_type.shape, update_type.shape))


class SymbolicInput:
    """An input of a compiled function; see :class:`In` for the parameters."""

    def __init__(
        self,
        variable,
        name=None,
        update=None,
        mutable=None,
        strict=False,
        allow_downcast=None,
        autoname=True,
        implicit=False,
    ):
        if not isinstance(variable, Variable):
            raise TypeError(
                f"In: variable must be a symbolic Variable, got {type(variable).__name__}: "
                f"{variable!r}"
            )
        self.variable = variable
        self.name = variable.name if (autoname and name is None) else name
        if self.name is not None and not isinstance(self.name, str):
            raise TypeError(f"In: name must be a string, got {self.name!r}")
        if update is not None:
            if not isinstance(update, Variable):
                update = variable.type.filter_variable(update)
            if not update_type_fits(variable.type, update.type):
                raise TypeError(
                    f"Variable '{variable}' has type {variable.type} but an update of type "
                    f"{update.type}. The type of the update should be the same as the type "
                    "of the variable"
                )
        self.update = update
        self.mutable = (update is not None) if mutable is None else bool(mutable)
        self.strict = strict
        self.allow_downcast = allow_downcast
        self.implicit = implicit

    def __str__(self):
        if self.update is not None:
            return f"In({self.variable} -> {self.update})"
        return f"In({self.variable})"

    __repr__ = __str__


class In(SymbolicInput):
    """A function input with options.

    Parameters
    ----------
    variable: the symbolic Variable the value is fed into.
    name: the keyword that sets it in a call (defaults to ``variable.name``).
    value: a default used when the caller gives none. With ``update`` the
        value is state that persists between calls.
    update: an expression whose value replaces this input's value after
        each call.
    mutable: the function may overwrite the value passed in (default:
        ``update is not None``). Otherwise the function never modifies it.
    borrow: an output may alias this input's value (default: ``mutable``).
    strict: the value must already have exactly the right type.
    allow_downcast: casting that loses precision is allowed (True), refused
        (False), or allowed only for Python floats into floatX (None).
    implicit: the caller may not give this input (shared variables).

    >>> from theano_dag.graph.type import Generic
    >>> i = In(Generic()("x"), value=3)
    >>> i.name, i.value, i.mutable, i.borrow
    ('x', 3, False, False)
    """

    def __init__(
        self,
        variable,
        name=None,
        value=None,
        update=None,
        mutable=None,
        strict=False,
        allow_downcast=None,
        autoname=True,
        implicit=None,
        borrow=None,
        shared=False,
    ):
        # A shared input's value lives in the shared variable's storage, not in
        # the function and not in the call.
        self.shared = shared
        mutable_flag = (update is not None) if mutable is None else bool(mutable)
        self.borrow = mutable_flag if borrow is None else bool(borrow)
        if mutable_flag and not self.borrow:
            raise ValueError(
                f"In({variable}): mutable=True with borrow=False is contradictory: a mutable "
                "input may be both overwritten and aliased by an output"
            )
        if implicit is None:
            implicit = isinstance(value, (Container, SharedVariable))
        super().__init__(
            variable,
            name=name,
            update=update,
            mutable=mutable,
            strict=strict,
            allow_downcast=allow_downcast,
            autoname=autoname,
            implicit=implicit,
        )
        self.value = value
        if self.implicit and value is None:
            raise TypeError(f"In({variable}): an implicit input must be given a default value")


def convert_function_input(spec):
    """The ``In`` that Theano's tuple shorthand for a function input stands for.

    ``x`` gives ``In(x)``; ``(x, value)`` a default value; ``((x, update), value)`` a value
    that ``update`` replaces after each call (state kept by the function); a name may come
    first: ``(name, x, value)`` or ``(name, (x, update), value)``; ``(In(...), value)``
    sets an ``In``'s default.

    >>> from theano_dag.graph.type import Generic
    >>> s = Generic()("s")
    >>> i = convert_function_input(("total", (s, s), 0))
    >>> i.name, i.value, i.update is s, i.mutable
    ('total', 0, True, True)
    """
    if isinstance(spec, SymbolicInput):
        return spec
    if isinstance(spec, Constant):
        raise TypeError(f"Constants are not allowed as function inputs: {spec}")
    if isinstance(spec, Variable):
        return In(spec)
    if not isinstance(spec, (list, tuple)):
        raise TypeError(
            f"function input {spec!r} ({type(spec).__name__}) is not a Variable, an In, or "
            "Theano's tuple shorthand (x, value), ((x, update), value) or (name, x, value)"
        )
    rest, name = list(spec), None
    if rest and isinstance(rest[0], str):
        name, rest = rest[0], rest[1:]
    bad = TypeError(
        f"Invalid input syntax: {spec!r}: expected (x, value), ((x, update), value), "
        "(name, x, value) or (name, (x, update), value), x a Variable"
    )
    if not rest:
        raise bad
    head, update, value = rest[0], None, None
    if isinstance(head, SymbolicInput):
        if len(rest) != 2:
            raise bad
        if name is not None:
            head.name = name
        head.value = rest[1]
        return head
    if isinstance(head, (list, tuple)):
        if len(head) != 2 or len(rest) != 2:
            raise bad
        (head, update), value = head, rest[1]
    elif len(rest) == 2:
        value = rest[1]
    elif len(rest) != 1:
        raise bad
    if not isinstance(head, Variable):
        raise bad
    if update is not None and not isinstance(update, Variable):
        raise TypeError(f"Invalid input syntax: {spec!r}: the update {update!r} is no Variable")
    if isinstance(value, (Variable, SymbolicInput)):
        raise TypeError(
            f"Invalid input syntax: {spec!r}: the value of input {head} must be a value, not "
            f"the symbolic {value}"
        )
    return In(head, name=name, value=value, update=update)


class SymbolicOutput:
    """A function output; ``borrow=True`` lets the function return its internal storage.

    A borrowed output may be overwritten by the next call; a non-borrowed one
    is the caller's for good.

    >>> from theano_dag.graph.type import Generic
    >>> Out(Generic()("y"), borrow=True)
    Out(y, borrow=True)
    """

    def __init__(self, variable, borrow=False):
        if not isinstance(variable, Variable):
            raise TypeError(
                f"Out: variable must be a symbolic Variable, got {type(variable).__name__}: "
                f"{variable!r}"
            )
        self.variable = variable
        self.borrow = bool(borrow)

    def __str__(self):
        return f"Out({self.variable}, borrow={self.borrow})"

    __repr__ = __str__


Out = SymbolicOutput
