"""A small toy vocabulary (float scalars and a few ops) to test the optimizer framework
without the tensor library."""

from __future__ import annotations

import math

from theano_dag.graph.basic import Apply, Constant, Variable, io_toposort
from theano_dag.graph.op import Op
from theano_dag.graph.type import Type


class ToyType(Type):
    """Python floats (``kind='float'``) or ints (``kind='int'``)."""

    __props__ = ("kind",)

    def __init__(self, kind="float"):
        self.kind = kind

    def filter(self, data, strict=False, allow_downcast=None):
        py = float if self.kind == "float" else int
        if strict and type(data) is not py:
            raise TypeError(f"{self}: expected a {py.__name__}, got {data!r}")
        if not isinstance(data, (int, float)):
            raise TypeError(f"{self}: expected a number, got {data!r}")
        return py(data)


floatT = ToyType("float")
intT = ToyType("int")


def double(name=None):
    return floatT(name)


def const(value, name=None):
    return Constant(floatT, value, name=name)


def as_toy(x):
    return x if isinstance(x, Variable) else const(x)


class ToyBinary(Op):
    __props__ = ()
    fn = None

    def make_node(self, a, b):
        a, b = as_toy(a), as_toy(b)
        for v in (a, b):
            if v.type != floatT:
                raise TypeError(f"{self}: inputs must be {floatT}, got {v.type}")
        return Apply(self, [a, b], [floatT()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = type(self).fn(*inputs)


class ToyUnary(Op):
    __props__ = ()
    fn = None

    def make_node(self, a):
        a = as_toy(a)
        return Apply(self, [a], [floatT()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = type(self).fn(inputs[0])


class ToyAdd(ToyBinary):
    __props__ = ()
    fn = staticmethod(lambda a, b: a + b)


class ToyMul(ToyBinary):
    __props__ = ()
    fn = staticmethod(lambda a, b: a * b)


class ToyDiv(ToyBinary):
    __props__ = ()
    fn = staticmethod(lambda a, b: a / b)


class ToySub(ToyBinary):
    __props__ = ()
    fn = staticmethod(lambda a, b: a - b)


class ToyNeg(ToyUnary):
    __props__ = ()
    fn = staticmethod(lambda a: -a)


class ToyExp(ToyUnary):
    __props__ = ()
    fn = staticmethod(math.exp)


class ToyLog(ToyUnary):
    __props__ = ()
    fn = staticmethod(math.log)


class ToyIdentity(ToyUnary):
    __props__ = ()
    fn = staticmethod(lambda a: a)


class ToyScale(ToyUnary):
    """Multiply by a constant factor held in the op (a parametrised op)."""

    __props__ = ("factor",)

    def __init__(self, factor):
        self.factor = factor

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = self.factor * inputs[0]


class ToyToInt(ToyUnary):
    """Rounds to an int: its output has another type (for type-mismatch tests)."""

    __props__ = ()

    def make_node(self, a):
        return Apply(self, [as_toy(a)], [intT()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = int(round(inputs[0]))


class ToyPass(Op):
    """n inputs -> the same n values (for OpRemove on several outputs)."""

    __props__ = ()

    def make_node(self, *xs):
        xs = [as_toy(x) for x in xs]
        return Apply(self, xs, [x.type() for x in xs])

    def perform(self, node, inputs, output_storage, params=None):
        for cell, v in zip(output_storage, inputs):
            cell[0] = v


add, mul, div, sub = ToyAdd(), ToyMul(), ToyDiv(), ToySub()
neg, exp, log, identity, to_int = ToyNeg(), ToyExp(), ToyLog(), ToyIdentity(), ToyToInt()
toy_pass = ToyPass()


def evaluate(inputs, outputs, values):
    """Compute ``outputs`` from ``values`` of ``inputs`` with each op's ``perform``."""
    env = dict(zip(inputs, values))
    for node in io_toposort(inputs, outputs):
        args = []
        for v in node.inputs:
            args.append(v.data if isinstance(v, Constant) else env[v])
        cells = [[None] for _ in node.outputs]
        node.op.perform(node, args, cells)
        for o, c in zip(node.outputs, cells):
            env[o] = c[0]
    return [o.data if isinstance(o, Constant) else env[o] for o in outputs]


def fgraph_eval(fg, values):
    return evaluate(fg.inputs, fg.outputs, values)
