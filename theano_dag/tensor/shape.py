"""Shape ops: ``Shape``, ``Shape_i``, ``MakeVector``, ``Reshape`` (``theano.tensor.shape``)."""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.tensor.type import TensorType, discrete_dtypes, int_dtypes, uint_dtypes
from theano_dag.tensor.var import as_tensor_variable, constant

__all__ = [
    "Shape",
    "Shape_i",
    "MakeVector",
    "Reshape",
    "shape",
    "shape_i",
    "make_vector",
    "reshape",
    "flatten",
    "as_int_vector",
]


def _disconnected():
    return disconnected_type()


class Shape(Op):
    """The shape of a tensor, as an int64 vector.

    >>> from theano_dag import tensor as tt
    >>> shape(tt.dmatrix("x")).type
    TensorType(int64, shape=(2,))
    """

    __props__ = ()

    def make_node(self, x):
        x = as_tensor_variable(x)
        return Apply(self, [x], [TensorType("int64", shape=(x.ndim,))()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(inputs[0].shape, dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        return [(node.inputs[0].ndim,)]

    def connection_pattern(self, node):
        return [[False]]

    def L_op(self, inputs, outputs, output_grads):
        return [_disconnected()]


class Shape_i(Op):  # noqa: N801 (Theano's name)
    """The length of dimension ``i`` of a tensor, as an int64 scalar.

    >>> from theano_dag import tensor as tt
    >>> shape_i(tt.dmatrix("x"), 1).owner.op
    Shape_i{1}
    """

    __props__ = ("i",)

    def __init__(self, i):
        self.i = int(i)

    def __str__(self):
        return f"Shape_i{{{self.i}}}"

    __repr__ = __str__

    def make_node(self, x):
        x = as_tensor_variable(x)
        if not 0 <= self.i < x.ndim:
            raise TypeError(
                f"{self}: {x} has {x.ndim} dimensions, there is no dimension " f"{self.i}"
            )
        return Apply(self, [x], [TensorType("int64", shape=())()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(inputs[0].shape[self.i], dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]

    def connection_pattern(self, node):
        return [[False]]

    def L_op(self, inputs, outputs, output_grads):
        return [_disconnected()]


def shape(x):
    """The symbolic shape of ``x`` (an int64 vector)."""
    return Shape()(x)


def shape_i(x, i):
    """The symbolic length of dimension ``i`` of ``x``; a constant when statically known.

    >>> from theano_dag import tensor as tt
    >>> shape_i(tt.TensorType("float64", shape=(None, 3))("x"), 1)
    3
    """
    x = as_tensor_variable(x)
    if not -x.ndim <= i < x.ndim:
        raise ValueError(f"shape_i: {x} has {x.ndim} dimensions, there is no dimension {i}")
    s = x.type.shape[i]
    if s is not None:
        return constant(np.int64(s))
    return Shape_i(i % x.ndim)(x)


class MakeVector(Op):
    """Build a vector from scalars of one dtype.

    >>> from theano_dag import tensor as tt
    >>> make_vector(tt.lscalar("a"), 3).type
    TensorType(int64, shape=(2,))
    """

    __props__ = ("dtype",)

    def __init__(self, dtype="int64"):
        self.dtype = np.dtype(dtype).name

    def make_node(self, *inputs):
        inputs = [as_tensor_variable(i) for i in inputs]
        for k, i in enumerate(inputs):
            if i.ndim != 0:
                raise TypeError(
                    f"{self}: input {k} ({i}) must be a scalar, got {i.ndim} " "dimensions"
                )
            if np.result_type(i.dtype, self.dtype).name != self.dtype and not (
                isinstance(i, Constant) and np.asarray(i.data, self.dtype) == i.data
            ):
                raise TypeError(
                    f"{self}: input {k} ({i}) has dtype {i.dtype}, which cannot "
                    f"be stored in {self.dtype} without loss"
                )
        return Apply(self, inputs, [TensorType(self.dtype, shape=(len(inputs),))()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(inputs, dtype=self.dtype).reshape(len(inputs))

    def infer_shape(self, fgraph, node, input_shapes):
        return [(len(node.inputs),)]

    def L_op(self, inputs, outputs, output_grads):
        from theano_dag.tensor.basic import zeros_like

        if self.dtype in discrete_dtypes:
            return [_disconnected() for _ in inputs]
        (gz,) = output_grads
        return [
            gz[k] if i.dtype not in discrete_dtypes else zeros_like(i) for k, i in enumerate(inputs)
        ]


def make_vector(*scalars, dtype="int64"):
    """A vector built from ``scalars``."""
    return MakeVector(dtype)(*scalars)


def as_int_vector(values, who):
    """A tuple/list of ints and int scalars, or an int vector, as an int64 vector."""
    if isinstance(values, (list, tuple)):
        parts = [as_tensor_variable(v) for v in values]
        for k, p in enumerate(parts):
            if p.ndim != 0 or p.dtype not in int_dtypes + uint_dtypes:
                raise TypeError(
                    f"{who}: entry {k} of the shape ({p}) must be an integer "
                    f"scalar, got {p.type}"
                )
        if all(isinstance(p, Constant) for p in parts):
            return constant(np.asarray([p.data for p in parts], dtype="int64").reshape(-1))
        return make_vector(*parts)
    v = as_tensor_variable(values)
    if v.ndim == 0:
        return as_int_vector([v], who)
    if v.ndim != 1 or v.dtype not in int_dtypes + uint_dtypes:
        raise TypeError(f"{who}: the shape must be an integer vector, got {v.type}")
    return v


def _const_entries(shp):
    """Known entries of a shape vector (None where symbolic)."""
    if isinstance(shp, Constant):
        return [int(v) for v in shp.data]
    if shp.owner is not None and isinstance(shp.owner.op, MakeVector):
        return [int(i.data) if isinstance(i, Constant) else None for i in shp.owner.inputs]
    return [None] * (shp.type.shape[0] or 0)


class Reshape(Op):
    """Reshape to the shape given by an int vector input; one entry may be -1.

    >>> from theano_dag import tensor as tt
    >>> reshape(tt.dvector("x"), (2, -1)).type
    TensorType(float64, shape=(2, ?))
    >>> reshape(tt.dvector("x"), (1, 3)).type
    TensorType(float64, shape=(1, 3))
    """

    __props__ = ("ndim",)
    view_map = {0: [0]}

    def __init__(self, ndim):
        self.ndim = int(ndim)

    def __str__(self):
        return f"Reshape{{{self.ndim}}}"

    __repr__ = __str__

    def make_node(self, x, shp):
        x = as_tensor_variable(x)
        shp = as_int_vector(shp, str(self))
        if shp.type.shape[0] is not None and shp.type.shape[0] != self.ndim:
            raise ValueError(
                f"{self}: the shape has {shp.type.shape[0]} entries, expected " f"{self.ndim}"
            )
        known = _const_entries(shp)
        if len(known) != self.ndim:
            known = [None] * self.ndim
        if sum(1 for k in known if k is not None and k < 0) > 1 or any(
            k is not None and k < -1 for k in known
        ):
            raise ValueError(
                f"{self}: invalid shape {known}: at most one -1 and no other " "negative entries"
            )
        static = [k if k is not None and k >= 0 else None for k in known]
        if None not in x.type.shape and static.count(None) == 1 and -1 in known:
            total = int(np.prod(x.type.shape))
            rest = int(np.prod([s for s in static if s is not None]))
            if rest and total % rest == 0:
                static[static.index(None)] = total // rest
        return Apply(self, [x, shp], [TensorType(x.dtype, shape=tuple(static))()])

    def perform(self, node, inputs, output_storage, params=None):
        x, shp = inputs
        if len(shp) != self.ndim:
            raise ValueError(
                f"{self}: the shape {tuple(shp)} has {len(shp)} entries, " f"expected {self.ndim}"
            )
        try:
            out = np.reshape(x, tuple(int(s) for s in shp))
        except ValueError as e:
            raise ValueError(
                f"{self}: cannot reshape an array of shape {x.shape} into shape "
                f"{tuple(int(s) for s in shp)}: {e}"
            ) from None
        for d, s in enumerate(node.outputs[0].type.shape):
            if s is not None and out.shape[d] != s:
                raise ValueError(
                    f"{self}: output shape {out.shape} differs from the static "
                    f"shape {node.outputs[0].type.shape}"
                )
        output_storage[0][0] = out

    def connection_pattern(self, node):
        return [[True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        x, _ = inputs
        return [reshape(output_grads[0], shape(x), ndim=x.ndim), _disconnected()]

    def infer_shape(self, fgraph, node, input_shapes):
        from theano_dag.tensor import math as tm

        x, shp = node.inputs
        known = _const_entries(shp)
        entries = [k if k is not None else shp[i] for i, k in enumerate(known)]
        if len(known) != self.ndim:
            entries = [shp[i] for i in range(self.ndim)]
        total = None
        for s in input_shapes[0]:
            total = s if total is None else total * s
        total = 1 if total is None else total
        out = []
        for i, e in enumerate(entries):
            if isinstance(e, int) and e >= 0:
                out.append(e)
                continue
            others = [entries[j] for j in range(self.ndim) if j != i]
            rest = 1
            for o in others:
                rest = rest * o
            # A -1 entry stands for the size left over; the product of the others is
            # negative then (exactly one -1), so undo that sign.
            inferred = tm.int_div(total, tm.abs(rest)) if others else total
            out.append(inferred if e == -1 else tm.switch(tm.eq(e, -1), inferred, e))
        return [tuple(out)]


def reshape(x, newshape, ndim=None):
    """Reshape ``x`` to ``newshape`` (ints, int scalars, or an int vector)."""
    x = as_tensor_variable(x)
    if ndim is None:
        if isinstance(newshape, (list, tuple)):
            ndim = len(newshape)
        else:
            n = as_tensor_variable(newshape)
            if n.ndim == 0:
                ndim = 1
            elif n.type.shape[0] is None:
                raise ValueError("reshape: the length of the new shape is not known; pass ndim")
            else:
                ndim = n.type.shape[0]
    return Reshape(ndim)(x, newshape)


def flatten(x, ndim=1):
    """Keep the first ``ndim - 1`` dimensions and merge the rest into one.

    >>> from theano_dag import tensor as tt
    >>> flatten(tt.dtensor3("x"), 2).ndim
    2
    """
    x = as_tensor_variable(x)
    if not 1 <= ndim <= max(x.ndim, 1):
        raise ValueError(f"flatten: ndim={ndim} is out of range for a {x.ndim}-d input")
    if x.ndim == ndim:
        return x
    return reshape(x, [shape_i(x, i) for i in range(ndim - 1)] + [-1], ndim=ndim)
