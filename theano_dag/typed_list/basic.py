"""The ops of Theano's typed lists (``theano.typed_list.basic``) and the variables they
build: a list variable has Python's list methods (``l[i]``, ``l[1:]``, ``l.append(x)``,
``l.extend(m)``, ``l.insert(i, x)``, ``l.remove(x)``, ``l.reverse()``, ``l.ind(x)``,
``l.count(x)``, ``l.__len__()``), each a new symbolic list or value. The ops copy what
they return; their ``inplace=True`` forms (made by the ``typed_list_inplace_opt``
rewrite of :mod:`theano_dag.typed_list.opt`) change their first input instead.

>>> import numpy as np
>>> import theano_dag, theano_dag.tensor as tt
>>> a, b = tt.dvectors("a", "b")
>>> lst = make_list([a, b])
>>> f = theano_dag.function([a, b], [lst.append(a * 2)[2], lst.count(b), lst[::-1][0]])
>>> third, n, last = f(np.ones(2), np.zeros(2))
>>> third.tolist(), int(n), last.tolist()
([2.0, 2.0], 1, [0.0, 0.0])
"""

from __future__ import annotations

import numpy as np

from theano_dag import tensor as tt
from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.op import Op
from theano_dag.tensor.type_other import SliceType, slicetype
from theano_dag.typed_list.type import TypedListType

__all__ = [
    "Append",
    "Count",
    "Extend",
    "GetItem",
    "Index",
    "Insert",
    "Length",
    "MakeList",
    "Remove",
    "Reverse",
    "TypedListVariable",
    "append",
    "count",
    "extend",
    "getitem",
    "index_",
    "insert",
    "length",
    "make_list",
    "remove",
    "reverse",
]


def _copy(value):
    """A copy of a list element, so that a new list never shares an element's memory."""
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value.copy() if hasattr(value, "copy") else value


def _as_element(lst, x):
    """``x`` as a variable of ``lst``'s element type."""
    if not isinstance(x, Variable):
        x = tt.as_tensor_variable(x)
    return lst.type.ttype.filter_variable(x)


def _as_index(i, what):
    i = i if isinstance(i, Variable) else tt.as_tensor_variable(i)
    if getattr(i.type, "ndim", None) != 0 or not str(i.type.dtype).startswith(("int", "uint")):
        raise TypeError(f"{what}: the index must be an integer scalar, got {i.type}")
    return i


def _check_list(lst, what):
    if not isinstance(getattr(lst, "type", None), TypedListType):
        raise TypeError(f"{what}: expected a typed list variable, got {lst!r}")
    return lst


class _ListOp(Op):
    """An op returning a new list made from its first input, a list: with ``inplace`` it
    changes that list and returns it (``destroy_map``), else it works on a copy."""

    __props__ = ("inplace",)

    def __init__(self, inplace=False):
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def _start(self, lst):
        return lst if self.inplace else [_copy(v) for v in lst]

    def __str__(self):
        return f"{type(self).__name__}{{inplace}}" if self.inplace else type(self).__name__


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
        output_storage[0][0] = [_copy(x) for x in inputs]


class Length(Op):
    """The number of elements of a list (an int64 scalar)."""

    __props__ = ()

    def make_node(self, lst):
        return Apply(self, [_check_list(lst, "Length")], [tt.lscalar()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(len(inputs[0]), dtype="int64")


class GetItem(Op):
    """Element ``i`` of a list (``i`` an integer scalar; the element itself, a view), or
    the list of the elements a slice picks (``i`` a slice)."""

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, lst, i):
        _check_list(lst, "GetItem")
        if isinstance(i, slice):
            i = slicetype.make_constant(i)
        if isinstance(getattr(i, "type", None), SliceType):
            return Apply(self, [lst, i], [lst.type()])
        i = _as_index(i, "GetItem")
        return Apply(self, [lst, i], [lst.type.ttype()])

    def perform(self, node, inputs, output_storage, params=None):
        lst, i = inputs
        output_storage[0][0] = lst[i] if isinstance(i, slice) else lst[int(i)]


class Append(_ListOp):
    """The list with ``x`` at its end."""

    def make_node(self, lst, x):
        _check_list(lst, "Append")
        return Apply(self, [lst, _as_element(lst, x)], [lst.type()])

    def perform(self, node, inputs, output_storage, params=None):
        out = self._start(inputs[0])
        out.append(_copy(inputs[1]))
        output_storage[0][0] = out


class Extend(_ListOp):
    """The list with the elements of another list of its type at its end."""

    def make_node(self, lst, other):
        _check_list(lst, "Extend")
        other = lst.type.filter_variable(other)
        return Apply(self, [lst, other], [lst.type()])

    def perform(self, node, inputs, output_storage, params=None):
        out = self._start(inputs[0])
        out.extend(_copy(v) for v in inputs[1])
        output_storage[0][0] = out


class Insert(_ListOp):
    """The list with ``x`` inserted before position ``i`` (Python's ``list.insert``)."""

    def make_node(self, lst, i, x):
        _check_list(lst, "Insert")
        return Apply(self, [lst, _as_index(i, "Insert"), _as_element(lst, x)], [lst.type()])

    def perform(self, node, inputs, output_storage, params=None):
        out = self._start(inputs[0])
        out.insert(int(inputs[1]), _copy(inputs[2]))
        output_storage[0][0] = out


class Remove(_ListOp):
    """The list without its first element equal to ``x`` (unchanged if none is)."""

    def make_node(self, lst, x):
        _check_list(lst, "Remove")
        return Apply(self, [lst, _as_element(lst, x)], [lst.type()])

    def perform(self, node, inputs, output_storage, params=None):
        out = self._start(inputs[0])
        eq = node.inputs[0].type.ttype.values_eq
        for k, v in enumerate(out):
            if eq(v, inputs[1]):
                del out[k]
                break
        output_storage[0][0] = out


class Reverse(_ListOp):
    """The list in reverse order."""

    def make_node(self, lst):
        return Apply(self, [_check_list(lst, "Reverse")], [lst.type()])

    def perform(self, node, inputs, output_storage, params=None):
        out = self._start(inputs[0])
        out.reverse()
        output_storage[0][0] = out


def _matches(node, lst, x):
    eq = node.inputs[0].type.ttype.values_eq
    return [k for k, v in enumerate(lst) if _same_layout(v, x) and eq(v, x)]


def _same_layout(a, b):
    """Whether two elements can be compared (arrays of one shape, lists of one length)."""
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
    return getattr(a, "shape", None) == getattr(b, "shape", None)


class Index(Op):
    """The position of the first element equal to ``x`` (int64; ValueError if none is)."""

    __props__ = ()

    def make_node(self, lst, x):
        _check_list(lst, "Index")
        return Apply(self, [lst, _as_element(lst, x)], [tt.lscalar()])

    def perform(self, node, inputs, output_storage, params=None):
        found = _matches(node, *inputs)
        if not found:
            raise ValueError("Index: the value is not in the list")
        output_storage[0][0] = np.asarray(found[0], dtype="int64")


class Count(Op):
    """How many elements are equal to ``x`` (int64)."""

    __props__ = ()

    def make_node(self, lst, x):
        _check_list(lst, "Count")
        return Apply(self, [lst, _as_element(lst, x)], [tt.lscalar()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(len(_matches(node, *inputs)), dtype="int64")


def make_list(items):
    """The list of the variables ``items`` (all of one type) as one variable."""
    return MakeList()(*items)


def length(lst):
    """The length of the list variable ``lst``."""
    return Length()(lst)


def getitem(lst, i):
    """Element ``i`` of the list variable ``lst`` (a list when ``i`` is a slice)."""
    return GetItem()(lst, i)


def append(lst, x):
    """``lst`` with ``x`` appended (a new list; ``lst`` is not changed)."""
    return Append()(lst, x)


def extend(lst, other):
    """``lst`` followed by the elements of ``other``."""
    return Extend()(lst, other)


def insert(lst, i, x):
    """``lst`` with ``x`` inserted before position ``i``."""
    return Insert()(lst, i, x)


def remove(lst, x):
    """``lst`` without its first element equal to ``x``."""
    return Remove()(lst, x)


def reverse(lst):
    """``lst`` in reverse order."""
    return Reverse()(lst)


def index_(lst, x):
    """The position of the first element of ``lst`` equal to ``x``."""
    return Index()(lst, x)


def count(lst, x):
    """How many elements of ``lst`` are equal to ``x``."""
    return Count()(lst, x)


class TypedListVariable(Variable):
    """A variable of a :class:`TypedListType`, with Python's list methods as graph ops
    (``ind`` is ``list.index``: Theano's name, ``index`` being a Variable attribute)."""

    def __getitem__(self, i):
        return getitem(self, i)

    def __len__(self):
        # Python's len() needs an int; the symbolic length is the method call itself.
        return length(self)

    def append(self, x):
        return append(self, x)

    def extend(self, other):
        return extend(self, other)

    def insert(self, i, x):
        return insert(self, i, x)

    def remove(self, x):
        return remove(self, x)

    def reverse(self):
        return reverse(self)

    def ind(self, x):
        return index_(self, x)

    def count(self, x):
        return count(self, x)


# The variables of a list type are list variables (the class needs the ops above, which
# need the type: it is given to the type here).
TypedListType.Variable = TypedListVariable
