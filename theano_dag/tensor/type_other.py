"""Symbolic slices and ``None`` (``theano.tensor.type_other``).

A ``slice`` built from symbolic bounds is a Variable of type ``slicetype``, made by
``MakeSlice``; a constant one is a ``SliceConstant``, whose signature compares the
bounds (slices are not hashable in the Pythons Theano supported). ``NoneConst`` is
the constant ``None`` of ``NoneTypeT``.

>>> import theano_dag.tensor as tt
>>> i = tt.iscalar("i")
>>> s = MakeSlice()(1, i)
>>> s.type
SliceType
>>> import theano_dag
>>> theano_dag.function([i], s, mode=theano_dag.compile.Mode(linker="py"))(5)
slice(1, 5, None)
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.graph.type import Generic, Type
from theano_dag.tensor.basic import as_tensor_variable

__all__ = [
    "MakeSlice",
    "make_slice",
    "SliceType",
    "slicetype",
    "SliceConstant",
    "NoneTypeT",
    "none_type_t",
    "NoneConst",
    "as_int_none_variable",
]


class NoneTypeT(Generic):
    """The type whose only value is ``None``."""

    def filter(self, x, strict=False, allow_downcast=None):
        if x is None:
            return x
        raise TypeError(f"Expected None, got {x!r}")

    @staticmethod
    def may_share_memory(a, b):
        return False

    def __str__(self):
        return "NoneTypeT"


none_type_t = NoneTypeT()

NoneConst = Constant(none_type_t, None, name="NoneConst")


def as_int_none_variable(x):
    """``x`` as an integer scalar variable, or ``NoneConst`` for ``None``.

    >>> as_int_none_variable(None) is NoneConst, as_int_none_variable(3).type.dtype
    (True, 'int8')
    """
    if x is None or (isinstance(x, Constant) and x.data is None):
        return NoneConst
    x = as_tensor_variable(x, ndim=0)
    if x.type.dtype not in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"):
        raise TypeError(f"a slice bound must be an integer scalar or None, got {x.type}")
    return x


class SliceType(Type):
    """The type of a Python ``slice``."""

    def filter(self, x, strict=False, allow_downcast=None):
        if isinstance(x, slice):
            return x
        raise TypeError(f"Expected a slice, got {x!r}")

    def make_constant(self, value, name=None):
        return SliceConstant(self, value, name=name)

    def __str__(self):
        return "SliceType"

    def __repr__(self):
        return "SliceType"

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))

    @staticmethod
    def may_share_memory(a, b):
        return False


slicetype = SliceType()


def _bound(v):
    return int(v) if isinstance(v, (np.integer, int)) and not isinstance(v, bool) else v


class SliceConstant(Constant):
    """A constant slice; its bounds (numpy integers made ints) are its signature."""

    def __init__(self, type, data, name=None):
        if isinstance(data, slice):
            data = slice(_bound(data.start), _bound(data.stop), _bound(data.step))
        super().__init__(type, data, name)

    def signature(self):
        return (SliceConstant, self.data.start, self.data.stop, self.data.step)

    def __str__(self):
        if self.name is not None:
            return self.name
        return f"{type(self).__name__}{{{self.data.start}, {self.data.stop}, {self.data.step}}}"


class MakeSlice(Op):
    """``slice(start, stop, step)`` from symbolic bounds (each an integer scalar or None).

    ``MakeSlice()(s)`` with a Python slice takes its bounds.
    """

    __props__ = ()

    def make_node(self, slc, stop=None, step=None):
        if isinstance(slc, slice):
            bounds = [slc.start, slc.stop, slc.step]
        else:
            bounds = [slc, stop, step]
        return Apply(self, [as_int_none_variable(b) for b in bounds], [slicetype()])

    def perform(self, node, inputs, out):
        out[0][0] = slice(*(None if b is None else int(b) for b in inputs))

    def grad(self, inputs, grads):
        return [disconnected_type() for _ in inputs]


make_slice = MakeSlice()
