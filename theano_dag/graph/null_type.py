"""Special gradient values: disconnected, undefined and not-implemented gradients.

An Op's ``grad``/``L_op`` returns, for an input it cannot differentiate:

- ``disconnected_type()``: the output does not depend on that input at all;
- ``grad_undefined(op, i, x)``: the gradient does not exist mathematically;
- ``grad_not_implemented(op, i, x)``: it exists but this op does not compute it.

The last two are Variables of a ``NullType``; ``theano_dag.grad`` raises with their
message only if such a gradient is actually needed.
"""

from __future__ import annotations

from theano_dag.graph.basic import Variable
from theano_dag.graph.type import Type

__all__ = [
    "DisconnectedType",
    "NullType",
    "disconnected_type",
    "grad_undefined",
    "grad_not_implemented",
    "is_null",
    "is_disconnected",
]


class DisconnectedType(Type):
    """The type of a gradient that is disconnected: the cost does not depend on it.

    >>> v = disconnected_type()
    >>> is_disconnected(v), str(v.type)
    (True, 'DisconnectedType')
    """

    __props__ = ()

    def filter(self, data, strict=False, allow_downcast=None):
        raise AssertionError(
            "If you are seeing this error, a disconnected gradient was computed; "
            "it has no value."
        )

    def __str__(self):
        return "DisconnectedType"


class NullType(Type):
    """The type of a gradient that cannot be computed; ``why_null`` says why.

    >>> from theano_dag.graph.type import Generic
    >>> g = grad_undefined("Floor", 0, Generic()("x"), "it jumps")
    >>> is_null(g), g.type.why_null
    (True, 'Floor.grad: gradient with respect to input 0 (x) is undefined: it jumps')
    """

    __props__ = ("why_null",)

    def __init__(self, why_null="(no explanation given)"):
        self.why_null = why_null

    def filter(self, data, strict=False, allow_downcast=None):
        raise ValueError(f"No values may be assigned to a NullType: {self.why_null}")

    def __str__(self):
        return "NullType"


def disconnected_type() -> Variable:
    """A fresh Variable meaning "this gradient is disconnected".

    >>> disconnected_type().type
    DisconnectedType
    """
    return DisconnectedType()()


def grad_undefined(op, x_pos, x, comment="") -> Variable:
    """A NullType Variable: the gradient of ``op`` wrt input ``x_pos`` is undefined.

    >>> grad_undefined("Argmax", 0, "x", "discrete").type.why_null
    'Argmax.grad: gradient with respect to input 0 (x) is undefined: discrete'
    """
    msg = f"{op}.grad: gradient with respect to input {x_pos} ({x}) is undefined"
    if comment:
        msg += f": {comment}"
    return NullType(msg)()


def grad_not_implemented(op, x_pos, x, comment="") -> Variable:
    """A NullType Variable: ``op`` does not implement the gradient wrt input ``x_pos``.

    >>> grad_not_implemented("MyOp", 1, "y").type.why_null
    'MyOp.grad: gradient with respect to input 1 (y) is not implemented'
    """
    msg = f"{op}.grad: gradient with respect to input {x_pos} ({x}) is not implemented"
    if comment:
        msg += f": {comment}"
    return NullType(msg)()


def is_null(v) -> bool:
    return isinstance(getattr(v, "type", None), NullType)


def is_disconnected(v) -> bool:
    return isinstance(getattr(v, "type", None), DisconnectedType)
