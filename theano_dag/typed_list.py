"""Theano's ``theano.typed_list``: a Python list of values of one type as a graph value.

``make_list([a, b])`` is a variable of ``TypedListType(a.type)``; ``length(l)`` its
length, ``getitem(l, i)`` its element ``i``, ``append(l, x)`` a new list with ``x`` at
its end. The list ops run on the reference engine (``perform``); the CPU engine runs
them as it runs any op without C code.

>>> import numpy as np
>>> import theano_dag, theano_dag.tensor as tt
>>> a, b = tt.dvectors("a", "b")
>>> l = make_list([a, b])
>>> f = theano_dag.function([a, b], [length(l), getitem(append(l, a * 2), 2)])
>>> n, third = f(np.ones(2), np.zeros(2))
>>> int(n), third.tolist()
(2, [2.0, 2.0])
"""

from __future__ import annotations

import numpy as np

from theano_dag import tensor as tt
from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.op import Op
from theano_dag.graph.type import Type

__all__ = ["TypedListType", "MakeList", "make_list", "length", "getitem", "append"]


class TypedListType(Type):
    """Lists whose elements are values of ``ttype`` (``depth`` > 1: lists of such lists)."""

    __props__ = ("ttype", "depth")

    def __init__(self, ttype, depth=0):
        if depth < 0:
            raise ValueError("TypedListType: depth must be 0 or more")
        self.ttype = ttype if depth == 0 else TypedListType(ttype, depth - 1)
        self.depth = depth

    def filter(self, data, strict=False, allow_downcast=None):
        if not isinstance(data, (list, tuple)):
            raise TypeError(f"{self} takes a list, got {type(data).__name__}")
        if strict and not isinstance(data, list):
            raise TypeError(f"{self} takes a list, got {type(data).__name__} (strict)")
        return [self.ttype.filter(x, strict=strict, allow_downcast=allow_downcast) for x in data]

    def values_eq(self, a, b) -> bool:
        return len(a) == len(b) and all(self.ttype.values_eq(x, y) for x, y in zip(a, b))

    def values_eq_approx(self, a, b) -> bool:
        return len(a) == len(b) and all(self.ttype.values_eq_approx(x, y) for x, y in zip(a, b))

    def may_share_memory(self, a, b) -> bool:
        return any(self.ttype.may_share_memory(x, y) for x in a for y in b)

    def __str__(self):
        return f"TypedListType({self.ttype})"


class MakeList(Op):
    """``[x0, x1, ...]``: its inputs (all of one type) as a list."""

    __props__ = ()

    def make_node(self, *items):
        items = [x if isinstance(x, Variable) else tt.as_tensor_variable(x) for x in items]
        if not items:
            raise ValueError("make_list: give at least one element (its type is the list's)")
        ttype = items[0].type
        for k, x in enumerate(items):
            if x.type != ttype:
                raise TypeError(f"make_list: element {k} has type {x.type}, element 0 {ttype}")
        return Apply(self, items, [TypedListType(ttype)()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = [np.array(x, copy=True) for x in inputs]


class Length(Op):
    """The number of elements of a list (an int64 scalar)."""

    __props__ = ()

    def make_node(self, lst):
        return Apply(self, [lst], [tt.lscalar()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(len(inputs[0]), dtype="int64")


class GetItem(Op):
    """Element ``i`` of a list (``i`` an integer scalar)."""

    __props__ = ()

    def make_node(self, lst, i):
        i = tt.as_tensor_variable(i)
        if i.ndim != 0 or not i.dtype.startswith(("int", "uint")):
            raise TypeError(f"getitem: the index must be an integer scalar, got {i.type}")
        return Apply(self, [lst, i], [lst.type.ttype()])

    def perform(self, node, inputs, output_storage, params=None):
        lst, i = inputs
        output_storage[0][0] = lst[int(i)]


class Append(Op):
    """A new list: ``lst`` with ``x`` at its end."""

    __props__ = ()

    def make_node(self, lst, x):
        x = lst.type.ttype.filter_variable(x)
        return Apply(self, [lst, x], [lst.type()])

    def perform(self, node, inputs, output_storage, params=None):
        lst, x = inputs
        output_storage[0][0] = [*lst, np.array(x, copy=True)]


def make_list(items):
    """The list of the variables ``items`` (all of one type) as one variable."""
    return MakeList()(*items)


def length(lst):
    """The length of the list variable ``lst``."""
    return Length()(lst)


def getitem(lst, i):
    """Element ``i`` of the list variable ``lst``."""
    return GetItem()(lst, i)


def append(lst, x):
    """``lst`` with ``x`` appended (a new list; ``lst`` is not changed)."""
    return Append()(lst, x)
