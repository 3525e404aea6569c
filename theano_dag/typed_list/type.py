"""``TypedListType`` (``theano.typed_list.type``): the type of a Python list whose elements
are all values of one type.

>>> import theano_dag.tensor as tt
>>> t = TypedListType(tt.dvector().type)
>>> t, t.get_depth(), TypedListType(t).get_depth()
(TypedListType(TensorType(float64, vector)), 0, 1)
>>> TypedListType(tt.dvector().type, 2) == TypedListType(TypedListType(t))
True
"""

from __future__ import annotations

from theano_dag.graph.type import Type

__all__ = ["TypedListType"]


class TypedListType(Type):
    """Lists of values of ``ttype`` (a Type). ``depth`` > 0 wraps it ``depth`` more times:
    ``TypedListType(t, 2)`` is the type of lists of lists of lists of ``t`` values.
    Two list types are equal when their element types are."""

    __props__ = ("ttype",)

    def __init__(self, ttype, depth=0):
        if depth < 0:
            raise ValueError(f"TypedListType: depth must be 0 or more, got {depth}")
        if not isinstance(ttype, Type):
            raise TypeError(f"TypedListType: the element type must be a Type, got {ttype!r}")
        self.ttype = ttype if depth == 0 else TypedListType(ttype, depth - 1)

    def get_depth(self) -> int:
        """How many list types the element type nests (0: its elements are not lists)."""
        return self.ttype.get_depth() + 1 if isinstance(self.ttype, TypedListType) else 0

    def filter(self, data, strict=False, allow_downcast=None):
        if not isinstance(data, (list, tuple)) or (strict and not isinstance(data, list)):
            raise TypeError(f"{self} takes a list, got {type(data).__name__}")
        return [self.ttype.filter(x, strict=strict, allow_downcast=allow_downcast) for x in data]

    def values_eq(self, a, b) -> bool:
        return len(a) == len(b) and all(self.ttype.values_eq(x, y) for x, y in zip(a, b))

    def values_eq_approx(self, a, b) -> bool:
        return len(a) == len(b) and all(self.ttype.values_eq_approx(x, y) for x, y in zip(a, b))

    def may_share_memory(self, a, b) -> bool:
        if a is b:
            return True
        if not isinstance(a, list) or not isinstance(b, list):
            return False
        return any(self.ttype.may_share_memory(x, y) for x in a for y in b)

    def __str__(self):
        return f"TypedListType({self.ttype})"

    __repr__ = __str__
