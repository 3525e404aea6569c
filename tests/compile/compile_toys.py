"""Toy types and ops for testing compile/ without the tensor library.

``Vec`` holds 1-d float64 numpy arrays; its filter refuses other ndims and
dtypes that would lose precision (like TensorType, with a short message).
"""

import numpy as np

from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.graph.type import Type


class Vec(Type):
    __props__ = ()

    def filter(self, data, strict=False, allow_downcast=None):
        if strict and not (isinstance(data, np.ndarray) and data.dtype == np.float64):
            raise TypeError("Vec expected a float64 ndarray")
        a = np.asarray(data)
        if a.ndim != 1:
            raise TypeError(f"Vec expected 1 dimension, got {a.ndim}")
        if a.dtype != np.float64 and not allow_downcast and not np.can_cast(a.dtype, "float64"):
            raise TypeError(f"Vec cannot store {a.dtype} without loss")
        return a.astype("float64", copy=False)

    def may_share_memory(self, a, b):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.may_share_memory(a, b)

    def __str__(self):
        return "Vec"


vec = Vec()


class Elem(Op):
    """Elementwise numpy function of any arity; allocates a fresh output."""

    __props__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __str__(self):
        return self.fn.__name__

    def make_node(self, *xs):
        return Apply(self, list(xs), [xs[0].type()])

    def perform(self, node, inputs, out):
        out[0][0] = np.asarray(self.fn(*inputs))

    def infer_shape(self, fgraph, node, shapes):
        return [shapes[0]]


class Reuse(Op):
    """Doubles its input, writing into its previous output buffer when it can."""

    __props__ = ()

    def make_node(self, a):
        return Apply(self, [a], [a.type()])

    def perform(self, node, inputs, out):
        x = inputs[0]
        if out[0][0] is None or out[0][0].shape != x.shape:
            out[0][0] = np.empty_like(x)
        np.multiply(x, 2, out=out[0][0])


class AddInplace(Op):
    """a += b, returning a: destroys its first input."""

    __props__ = ()
    destroy_map = {0: [0]}

    def make_node(self, a, b):
        return Apply(self, [a, b], [a.type()])

    def perform(self, node, inputs, out):
        a, b = inputs
        a += b
        out[0][0] = a


class Transpose(Op):
    """A view of its input (returns the input object itself for 1-d)."""

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, a):
        return Apply(self, [a], [a.type()])

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0].T


add = Elem(np.add)
mul = Elem(np.multiply)
neg = Elem(np.negative)
exp = Elem(np.exp)
reuse = Reuse()
add_inplace = AddInplace()
transpose = Transpose()
