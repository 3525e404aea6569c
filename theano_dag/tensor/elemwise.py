"""``Elemwise``, ``DimShuffle`` and ``CAReduce``: how scalar ops become array ops.

- ``Elemwise(scalar_op)`` applies a scalar op to every element, broadcasting like numpy
  (a dimension broadcasts only where its type says it is broadcastable, as in Theano);
- ``DimShuffle(input_broadcastable, new_order)`` permutes, adds (``'x'``) and drops
  (broadcastable) dimensions, returning a view;
- ``CAReduce(scalar_op, axis)`` reduces along axes with a commutative, associative op
  (``Sum``, ``Prod``, ``Max``, ``Min``, ``All``, ``Any``).
"""

from __future__ import annotations

import copy

import numpy as np

from theano_dag import scalar as ts

# Ops of later modules that build on this one (basic, math) are reached through the
# package when called.
from theano_dag import tensor as _tensor
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant, Variable, _node_of_fresh_output
from theano_dag.graph.null_type import (
    disconnected_type,
    grad_not_implemented,
    is_disconnected,
    is_null,
)
from theano_dag.graph.op import Op, compute_test_value
from theano_dag.scalar import Composite
from theano_dag.tensor.type import (
    TensorType,
    continuous_dtypes,
    discrete_dtypes,
    normalize_dtype,
    output_type,
)
from theano_dag.tensor.variable import TensorConstant, TensorVariable, as_tensor_variable, constant

# The most dimensions a numpy array may have (numpy 2 raised numpy 1's 32 to 64).
_MAX_DIMS = 64 if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else 32

__all__ = [
    "Elemwise",
    "DimShuffle",
    "CAReduce",
    "Sum",
    "Prod",
    "ProdWithoutZeros",
    "Max",
    "Min",
    "All",
    "Any",
    "Composite",
    "expand_composite_grad",
    "broadcast_static_shape",
    "broadcast_lengths",
    "check_runtime_broadcast",
    "SumToShape",
    "reduce_spread_grad_to",
]


def _is_discrete(v):
    return v.type.dtype in discrete_dtypes


def _zeros_like(x, dtype=None):
    return _tensor.basic.zeros_like(x, dtype=dtype)


# Classes of the inputs that Elemwise.make_node takes as they are (with a TensorType).
_PLAIN_TENSORS = frozenset((TensorVariable, TensorConstant))

# Elemwise.make_node's output types, per (ids of) the op and the input types, for scalar
# ops whose output dtypes follow from the input dtypes alone
# (ScalarOp.has_fixed_output_types): (output types, op, its scalar op and inplace items
# then, input types), the objects kept so that their ids, in the key, stay theirs.
# Bounded, as output_type's.
_OUT_TYPES: dict = {}
_OUT_TYPES_MAX = 4096

# DimShuffle ops that add leading broadcastable dimensions (Elemwise's lower-rank
# inputs), per (input broadcastable pattern, new order): one op for all such nodes.
_EXPANDERS: dict = {}


def _expand_dims(x, ndim):
    """``x`` with leading broadcastable dimensions up to ``ndim``, as
    ``DimShuffle(...)(x)`` makes it (the op shared by all such nodes)."""
    bcast = x.type.broadcastable
    order = ("x",) * (ndim - len(bcast)) + tuple(range(len(bcast)))
    op = _EXPANDERS.get((bcast, order))
    if op is None:
        if len(_EXPANDERS) >= _OUT_TYPES_MAX:
            _EXPANDERS.clear()
        op = _EXPANDERS[(bcast, order)] = DimShuffle(bcast, order)
    # Op.__call__'s steps but the user's stack, which DimShuffle.make_node records on
    # the output already (the same stack: the same user's frames).
    node = op.make_node(x)
    if config.compute_test_value != "off":
        compute_test_value(node)
    return node.outputs[0]


def broadcast_static_shape(shapes, who="Elemwise"):
    """The static output shape of broadcasting static shapes (``None`` = unknown),
    right-aligned as numpy's; ``who`` (anything printable: the op) names the caller in the
    error raised for shapes that do not broadcast.

    >>> broadcast_static_shape([(None, 1), (1, 3)])
    (None, 3)
    >>> broadcast_static_shape([(2, None), (5,)])
    (2, 5)
    """
    first = shapes[0] if shapes else ()
    if shapes.count(first) == len(shapes):
        return tuple(first)  # the common case: identical static shapes (compared in C)
    nd = max(len(s) for s in shapes)
    shapes = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
    out = []
    for d, dims in enumerate(zip(*shapes)):
        known = {s for s in dims if s is not None and s != 1}
        if len(known) > 1:
            raise ValueError(
                f"{who}: static shapes {list(shapes)} do not broadcast along "
                f"dimension {d} (lengths {sorted(known)})"
            )
        if known:
            out.append(known.pop())
        elif all(s == 1 for s in dims):
            out.append(1)
        else:
            out.append(None)
    return tuple(out)


# What a check of an elementwise op's lengths adds where one of them is 1.
BROADCAST_HINT = "a length 1 broadcasts only along a dimension declared broadcastable"


def broadcast_lengths(op, inputs, input_shapes, static, skip=()):
    """The shape of the result of elementwise ``op`` on ``inputs`` (with dimensions
    ``static``: the result's static shape), from the inputs' shapes: along each dimension
    the length the inputs not broadcastable there share, 1 where every input is. Where
    two or more give it and they are not known equal, a check that they are
    (``equal_lengths``): a shape computed without the value raises where the op would.
    The dimensions in ``skip`` (a reduction's) get None, with no check.

    >>> from theano_dag import tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> node = (x * y).owner
    >>> broadcast_lengths(node.op, node.inputs, [(3,), (3,)], (None,))
    (3,)
    """
    out = []
    for d, s in enumerate(static):
        if d in skip:
            out.append(None)
            continue
        ks = [k for k, x in enumerate(inputs) if not x.type.broadcastable[d]]
        if not ks:
            out.append(1 if s is None else s)
            continue
        lengths = [input_shapes[k][d] for k in ks]
        if s is not None:
            lengths.append(s)  # (a static length is an input's: known equal to it)

        def name_of(j, ks=ks):
            return str(inputs[ks[j]]) if j < len(ks) else "the static length"

        what = f"{op} along dimension {d}"
        out.append(_tensor.equal_lengths(lengths, what, name_of, hint=BROADCAST_HINT))
    return tuple(out)


def check_runtime_broadcast(op, variables, values):
    """Raise ValueError where ``values`` (of the inputs ``variables`` of elementwise ``op``,
    all of one ndim) do not broadcast as the op allows: their lengths along a dimension
    must agree, a length 1 broadcasting only along a dimension its variable declares
    broadcastable (numpy would broadcast it anyway).

    >>> from theano_dag import tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> check_runtime_broadcast((x * y).owner.op, [x, y], [np.ones(3), np.ones(4)])
    Traceback (most recent call last):
    ...
    ValueError: Elemwise{mul,no_inplace}: input shapes [(3,), (4,)] do not match along dimension 0
    """
    shapes = [np.shape(x) for x in values]
    for d in range(len(shapes[0]) if shapes else 0):
        lengths = {s[d] for s in shapes}
        if len(lengths) <= 1:
            continue
        for k, (x, s) in enumerate(zip(variables, shapes)):
            if s[d] == 1 and not x.type.broadcastable[d]:
                raise ValueError(
                    f"{op}: input shapes {shapes} differ along dimension {d}, and input "
                    f"{k} ({x}) has length 1 there but is not declared "
                    f"broadcastable. Declare it broadcastable (e.g. tt.row/tt.col or "
                    f"x.dimshuffle('x', 0)) to broadcast it."
                )
        if len(lengths - {1}) > 1:
            raise ValueError(f"{op}: input shapes {shapes} do not match along dimension {d}")


class Elemwise(Op):
    """Apply ``scalar_op`` elementwise; ``inplace_pattern={out: in}`` overwrites an input.

    >>> from theano_dag import tensor as tt
    >>> x, y = tt.dmatrix("x"), tt.drow("y")
    >>> z = Elemwise(ts.add)(x, y)
    >>> z.type, str(z.owner.op)
    (TensorType(float64, matrix), 'Elemwise{add,no_inplace}')
    >>> Elemwise(ts.add, {0: 0}).destroy_map
    {0: [0]}
    """

    __props__ = ("scalar_op", "inplace_items")

    def __init__(self, scalar_op, inplace_pattern=None, name=None):
        self.scalar_op = scalar_op
        self.inplace_items = tuple(sorted((inplace_pattern or {}).items()))
        self.destroy_map = {o: [i] for o, i in self.inplace_items}
        self.name = name

    @property
    def inplace_pattern(self):
        return dict(self.inplace_items)

    def __str__(self):
        if self.name:
            return self.name
        tag = "inplace" if self.inplace_items else "no_inplace"
        if len(self.inplace_items) > 1 or (self.inplace_items and self.inplace_items[0] != (0, 0)):
            tag = "inplace" + str(list(self.inplace_items))
        return f"Elemwise{{{self.scalar_op},{tag}}}"

    __repr__ = __str__

    def make_node(self, *inputs):
        # Every elementwise node of a graph is made here (by the user and by the
        # rewrites): each input's type is read once.
        op = self.scalar_op
        if op.nin != -1 and len(inputs) != op.nin:
            raise TypeError(f"{self} expects {op.nin} inputs, got {len(inputs)}")
        # One loop over the inputs (no comprehension frames): a tensor variable or
        # constant of a plain TensorType is what as_tensor_variable returns as it is.
        checked = []
        types = []
        ndim = -1
        mixed = False
        for i in inputs:
            if i.__class__ not in _PLAIN_TENSORS or i.type.__class__ is not TensorType:
                i = as_tensor_variable(i)
            t = i.type
            checked.append(i)
            types.append(t)
            n = len(t.shape)
            if n != ndim:
                if ndim >= 0:
                    mixed = True
                if n > ndim:
                    ndim = n
        inputs = checked
        if mixed:
            # Lower-rank inputs get leading broadcastable dimensions, as in numpy.
            inputs = [i if i.type.ndim == ndim else _expand_dims(i, ndim) for i in inputs]
            types = [i.type for i in inputs]  # the dtypes stay
        # The output types of this op on these input types, when it is known that they
        # are always the same (see _OUT_TYPES): the key holds ids, the entry the objects.
        n = len(types)
        if n == 2:
            key = (id(self), id(types[0]), id(types[1]))
        elif n == 1:
            key = (id(self), id(types[0]))
        else:
            key = (id(self), *map(id, types))
        entry = _OUT_TYPES.get(key)
        if entry is not None and entry[2] is op and entry[3] is self.inplace_items:
            out_types = entry[0]
        else:
            try:
                out_dtypes = op.output_types(tuple(t.dtype for t in types))
            except TypeError as e:
                if isinstance(op, Composite) and len(types) == op.nin:
                    # A composite built for other dtypes is made again for these
                    # (Theano's).
                    retyped = copy.copy(self)
                    retyped.scalar_op = op.retyped([t.dtype for t in types])
                    return retyped.make_node(*inputs)
                raise TypeError(f"{self}: {e}") from None
            # ``self`` names the op in an error only: formatting it for every node is
            # slow.
            shape = broadcast_static_shape([t.shape for t in types], self)
            for o, i in self.inplace_items:
                if i >= len(inputs) or types[i].shape != shape or types[i].dtype != out_dtypes[o]:
                    raise TypeError(
                        f"{self}: output {o} cannot overwrite input {i}: it needs "
                        f"dtype {out_dtypes[o]} and static shape {shape}"
                    )
            out_types = tuple(output_type(d, shape) for d in out_dtypes)
            fixed = getattr(op, "has_fixed_output_types", None)  # (a ScalarOp's)
            if fixed is not None and fixed():
                if len(_OUT_TYPES) >= _OUT_TYPES_MAX:
                    _OUT_TYPES.clear()
                _OUT_TYPES[key] = (out_types, self, op, self.inplace_items, types)
        # The type's Variable class (make_variable's), not the type called: that would
        # record the user's stack, which Op.__call__ records on the node's outputs.
        if len(out_types) == 1:
            t = out_types[0]
            if (
                t.Variable is TensorVariable
                and config.warn_float64 == "ignore"
                and not Variable.construction_observers
            ):
                # What the next line makes, without its constructors' checks and calls
                # (the inputs are tensors, the output new, its class's constructor
                # adds nothing while the float64 flag is off).
                return _node_of_fresh_output(self, inputs, t, TensorVariable)
            return Apply(self, inputs, [t.Variable(t, None, None, None)])
        return Apply(self, inputs, [t.Variable(t, None, None, None) for t in out_types])

    def perform(self, node, inputs, output_storage, params=None):
        for k, x in enumerate(inputs):
            # A function passes a caller's None through, as Theano does; numpy would read
            # it (or an array of objects an op made of it) as NaN.
            if x is None or (isinstance(x, np.ndarray) and x.dtype.kind == "O"):
                what = "None" if x is None else "an array of Python objects"
                raise TypeError(
                    f"{self}: input {k} is {what}, not an array of {node.inputs[k].type.dtype}"
                )
        self._check_runtime_broadcast(node, inputs)
        out_dtypes = [o.type.dtype for o in node.outputs]
        outs = self.scalar_op.compute(inputs, out_dtypes)
        destroy = dict(self.inplace_items)
        for k, (cell, val) in enumerate(zip(output_storage, outs)):
            if k in destroy:
                target = inputs[destroy[k]]
                np.copyto(target, val)
                cell[0] = target
                continue
            if (
                not val.flags.writeable
                or not val.flags.owndata
                or any(np.may_share_memory(val, x) for x in inputs if isinstance(x, np.ndarray))
            ):
                val = np.array(val)
            cell[0] = val

    def _check_runtime_broadcast(self, node, inputs):
        check_runtime_broadcast(self, node.inputs, inputs)

    def infer_shape(self, fgraph, node, input_shapes):
        shape = broadcast_lengths(self, node.inputs, input_shapes, node.outputs[0].type.shape)
        return [shape] * len(node.outputs)

    def L_op(self, inputs, outputs, output_grads):
        if all(_is_discrete(o) for o in outputs):
            return [_zeros_like(x, _float_of(x)) for x in inputs]
        ograds = [
            _zeros_like(o) if is_disconnected(g) else g for g, o in zip(output_grads, outputs)
        ]
        if ts.grad_on_scalars(self.scalar_op):
            sgrads = scalar_graph_grads(self.scalar_op, list(inputs), list(outputs), ograds)
        else:
            sgrads = self.scalar_op.elemwise_L_op(list(inputs), list(outputs), ograds)
        result = []
        for x, g in zip(inputs, sgrads):
            if g is None or is_null(g) or is_disconnected(g):
                result.append(g)
            else:
                result.append(reduce_grad_to(as_tensor_variable(g), x))
        return result

    def grad(self, inputs, output_grads):
        return self.L_op(inputs, self.make_node(*inputs).outputs, output_grads)


def scalar_graph_grads(scalar_op, inputs, outputs, output_grads) -> list:
    """The gradients of ``Elemwise(scalar_op)`` as Theano computes them: ``scalar_op``'s
    ``L_op`` called with scalar variables standing for the node's tensors, and the scalar
    graph it returns rebuilt with ``Elemwise`` ops on the tensors (for ops whose gradient
    is written for scalars: ``ts.grad_on_scalars``).

    >>> from theano_dag import tensor as tt
    >>> class Cube(ts.UnaryScalarOp):  # a gradient as a Theano client writes it
    ...     def impl(self, x):
    ...         return x**3
    ...     def grad(self, inputs, output_grads):
    ...         (x,), (gz,) = inputs, output_grads
    ...         return [gz * ts.constant(3.0) * ts.sqr(x)]
    >>> x = tt.dvector("x")
    >>> (g,) = scalar_graph_grads(Cube(ts.upgrade_to_float), [x], [x**3], [tt.ones_like(x)])
    >>> g.eval({x: [1.0, 2.0]})
    array([ 3., 12.])
    """
    # The scalar graph needs no test values: the Elemwise graph built from it gets them.
    with config.change_flags(compute_test_value="off"):
        s_inputs = [_scalar_stand_in(x) for x in inputs]
        s_outputs = scalar_op.make_node(*s_inputs).outputs
        s_grads = [_scalar_stand_in(g) for g in output_grads]
        s_igrads = scalar_op.L_op(s_inputs, s_outputs, s_grads)
    if not isinstance(s_igrads, (list, tuple)):
        raise TypeError(f"{scalar_op}.grad returned {type(s_igrads).__name__}, not a list")
    known = {}
    for scalars, tensors in ((s_inputs, inputs), (s_outputs, outputs), (s_grads, output_grads)):
        known.update((s, t) for s, t in zip(scalars, tensors) if s is not t)

    def rebuild(v):
        if v in known:
            return known[v]
        if is_null(v) or is_disconnected(v):
            out = v
        elif isinstance(v, Constant):
            out = constant(np.asarray(v.data, dtype=v.type.dtype))
        elif v.owner is not None and isinstance(v.owner.op, ts.ScalarOp):
            args = [rebuild(i) for i in v.owner.inputs]
            outs = Elemwise(v.owner.op)(*args, return_list=True)
            known.update(zip(v.owner.outputs, outs))
            out = outs[v.owner.outputs.index(v)]
        else:
            raise TypeError(
                f"the gradient of {scalar_op} (written for scalar variables) holds {v} of "
                f"type {v.type}, which is not made by scalar ops from its inputs"
            )
        known[v] = out
        return out

    return [None if g is None else rebuild(g) for g in s_igrads]


def _scalar_stand_in(v):
    """A scalar variable of ``v``'s dtype (a null or disconnected gradient as it is)."""
    if is_null(v) or is_disconnected(v):
        return v
    return ts.get_scalar_type(v.type.dtype)()


def _float_of(x):
    return x.dtype if x.dtype in continuous_dtypes else config.floatX


def reduce_grad_to(g, x):
    """Sum ``g`` over the dimensions where ``x`` was broadcast; give it ``x``'s dtype (an
    integer ``x`` keeps ``g``'s float dtype: gradients are never integers)."""
    if g.ndim < x.ndim:
        g = DimShuffle(g.broadcastable, ["x"] * (x.ndim - g.ndim) + list(range(g.ndim)))(g)
    axes = [d for d in range(x.ndim) if x.broadcastable[d] and not g.broadcastable[d]]
    if axes:
        g = _tensor.math.sum(g, axis=axes, keepdims=True)
    if any(gb and not xb for gb, xb in zip(g.broadcastable, x.broadcastable)):
        g = Elemwise(ts.second)(x, g)  # a gradient constant along a dim: spread it out
    if g.dtype != x.dtype and not _is_discrete(x):
        g = _tensor.basic.cast(g, x.dtype)
    return g


class SumToShape(Op):
    """``g`` summed along each dimension of ``axes`` where ``like`` (inputs ``g, like``)
    has length 1 and ``g`` has not: the gradient of a value ``like`` that numpy spread
    when the function ran, along a dimension its type does not declare broadcastable
    (``set_subtensor(x[:3], v)`` or ``alloc(v, 3, 2)`` of a ``v`` of one row). Where
    nothing was spread, the result is ``g`` itself (a view). Only ``like``'s shape is read.

    >>> from theano_dag import tensor as tt
    >>> g, v = tt.dmatrix("g"), tt.dmatrix("v")
    >>> s = SumToShape((0,))(g, v)
    >>> s.eval({g: np.ones((3, 2)), v: np.zeros((1, 2))})
    array([[3., 3.]])
    >>> s.eval({g: np.ones((3, 2)), v: np.zeros((3, 2))}).shape
    (3, 2)
    """

    __props__ = ("axes",)
    view_map = {0: [0]}

    def __init__(self, axes):
        self.axes = tuple(int(a) for a in axes)

    def make_node(self, g, like):
        g, like = as_tensor_variable(g), as_tensor_variable(like)
        if like.ndim != g.ndim or any(not 0 <= a < g.ndim for a in self.axes):
            raise ValueError(
                f"{self}: the axes {self.axes} of a {g.ndim}-d gradient and a value of as "
                f"many dimensions, got a {like.ndim}-d value"
            )
        shape = list(g.type.shape)
        for a in self.axes:
            shape[a] = like.type.shape[a]
        return Apply(self, [g, like], [TensorType(g.dtype, shape=tuple(shape))()])

    def perform(self, node, inputs, output_storage, params=None):
        g, like = inputs
        want = np.shape(like)
        spread = tuple(a for a in self.axes if want[a] == 1 and g.shape[a] != 1)
        out = g.sum(axis=spread, keepdims=True, dtype=g.dtype) if spread else g
        for a in self.axes:
            if out.shape[a] != want[a]:
                raise ValueError(
                    f"{self}: the gradient has length {g.shape[a]} along dimension {a}, "
                    f"which does not sum to the value's length {want[a]}"
                )
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        shape = list(input_shapes[0])
        for a in self.axes:
            shape[a] = input_shapes[1][a]
        return [tuple(shape)]

    def connection_pattern(self, node):
        return [[True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        # Spread back where the sum gathered: the gradient of the sum is a broadcast.
        g = inputs[0]
        spread = _tensor.extra_ops.broadcast_to(output_grads[0], g.shape)
        return [spread, disconnected_type()]


def reduce_spread_grad_to(g, x):
    """``reduce_grad_to(g, x)`` for a value ``x`` that numpy may also have spread at run
    time (the value written by ``set_subtensor``, ``alloc``'s, ``broadcast_to``'s): a
    length 1 of ``x`` where its type says neither 1 nor broadcastable sums ``g`` there
    when the function runs (``SumToShape``)."""
    g = reduce_grad_to(g, x)
    axes = [d for d in range(x.ndim) if x.type.shape[d] is None and g.type.shape[d] != 1]
    if not axes or _is_discrete(x):
        return g
    return SumToShape(axes)(g, x)


def expand_composite_grad(comp, inputs, output_grads):
    """Gradients of ``Elemwise(comp)``: rebuild its scalar graph with Elemwise ops and
    walk it backwards, each node using its own scalar op's gradient."""

    env = dict(zip(comp.inputs, inputs))
    applies = []
    for node in comp.nodes:
        args = [
            constant(np.asarray(v.data, dtype=v.type.dtype)) if isinstance(v, Constant) else env[v]
            for v in node.inputs
        ]
        outs = Elemwise(node.op)(*args, return_list=True)
        env.update(zip(node.outputs, outs))
        applies.append((node, outs[0].owner))
    grads = {}
    for o, g in zip(comp.outputs, output_grads):
        if not is_disconnected(g):
            grads[o] = grads[o] + g if o in grads else g
    for node, app in reversed(applies):
        gz = [grads.get(o) for o in node.outputs]
        if all(g is None for g in gz):
            continue
        gz = [_zeros_like(t) if g is None else g for g, t in zip(gz, app.outputs)]
        for v, g in zip(node.inputs, app.op.L_op(app.inputs, app.outputs, gz)):
            if isinstance(v, Constant) or g is None or is_null(g) or is_disconnected(g):
                continue
            grads[v] = grads[v] + g if v in grads else g
    return [grads[v] if v in grads else _zeros_like(x) for v, x in zip(comp.inputs, inputs)]


class DimShuffle(Op):
    """Reorder dimensions: ``new_order`` lists input dims, ``'x'`` inserts a length-1 one.

    Dims left out must be broadcastable. The output is a view of the input.

    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> DimShuffle((False, False), ["x", 1, 0])(x).type
    TensorType(float64, shape=(1, ?, ?))
    >>> DimShuffle((False, False), ["x", 1, 0])(x).broadcastable
    (True, False, False)
    """

    __props__ = ("input_broadcastable", "new_order")
    view_map = {0: [0]}

    def __init__(self, input_broadcastable, new_order, inplace=True):
        self.input_broadcastable = tuple(bool(b) for b in input_broadcastable)
        order = []
        for o in new_order:
            if o == "x":
                order.append("x")
            elif isinstance(o, (int, np.integer)) and 0 <= o < len(self.input_broadcastable):
                order.append(int(o))
            else:
                raise ValueError(
                    f"DimShuffle: invalid entry {o!r} in new_order {new_order} "
                    f"for an input of {len(self.input_broadcastable)} dimensions "
                    "(expected dimension indices or 'x')"
                )
        self.new_order = tuple(order)
        kept = [o for o in order if o != "x"]
        if len(set(kept)) != len(kept):
            raise ValueError(
                f"DimShuffle: new_order {new_order} repeats a dimension (a dimension may "
                "not appear twice)"
            )
        if len(order) > _MAX_DIMS:
            # numpy's limit: past it, the engines' views fail when the function runs
            raise ValueError(
                f"DimShuffle: {len(order)} output dimensions, more than numpy's {_MAX_DIMS}"
            )
        self.drop = [i for i in range(len(self.input_broadcastable)) if i not in kept]
        for i in self.drop:
            if not self.input_broadcastable[i]:
                raise ValueError(
                    f"DimShuffle: cannot drop the non-broadcastable dimension {i} "
                    f"(input broadcastable {self.input_broadcastable}, new_order "
                    f"{self.new_order})"
                )
        self.shuffle = kept
        self.augment = [k for k, o in enumerate(order) if o == "x"]
        self.inplace = inplace

    def __str__(self):
        # Theano's name: a DimShuffle made by ``x.dimshuffle`` returns a view of its input.
        name = "InplaceDimShuffle{" if self.inplace else "DimShuffle{"
        return name + ",".join(str(o) for o in self.new_order) + "}"

    __repr__ = __str__

    def make_node(self, x):
        if x.__class__ not in _PLAIN_TENSORS or x.type.__class__ is not TensorType:
            x = as_tensor_variable(x)  # (what it returns a plain tensor as it is)
        if x.type.broadcastable != self.input_broadcastable:
            if x.ndim != len(self.input_broadcastable) or any(
                b and not xb for b, xb in zip(self.input_broadcastable, x.broadcastable)
            ):
                raise TypeError(
                    f"{self}: expected an input with broadcastable pattern "
                    f"{self.input_broadcastable}, got {x.type.broadcastable} ({x})"
                )
        xshape = x.type.shape
        shape = tuple(1 if o == "x" else xshape[o] for o in self.new_order)
        # The type shared by the outputs of its dtype and shape (a TensorType made per
        # node costs more than the node), called: the output keeps the user's stack.
        return Apply(self, [x], [output_type(x.type.dtype, shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        if x is None:  # (a caller's None, which np.transpose would make an array)
            raise TypeError(f"{self}: input 0 is None, not an array of {node.inputs[0].type.dtype}")
        res = np.transpose(x, self.shuffle + self.drop)
        res = res.reshape(res.shape[: len(self.shuffle)])  # drops trailing 1s: still a view
        if self.augment:
            res = np.expand_dims(res, self.augment)
        output_storage[0][0] = res if isinstance(res, np.ndarray) else np.asarray(res)

    def infer_shape(self, fgraph, node, input_shapes):
        (ishape,) = input_shapes
        return [tuple(1 if o == "x" else ishape[o] for o in self.new_order)]

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        (gz,) = output_grads
        gz = as_tensor_variable(gz)
        added = [k for k, o in enumerate(self.new_order) if o == "x" and not gz.broadcastable[k]]
        if added:  # a gradient that varies along an added dim: sum it there first
            gz = _tensor.math.sum(gz, axis=added, keepdims=True)
        order = [self.new_order.index(i) if i in self.new_order else "x" for i in range(x.ndim)]
        g = DimShuffle(gz.broadcastable, order)(gz)
        if _is_discrete(x):
            return [_zeros_like(x, config.floatX)]
        return [reduce_grad_to(g, x)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return self(*eval_points, return_list=True)


# Reductions ------------------------------------------------------------------------

_UFUNCS = {
    ts.Add: np.add,
    ts.Mul: np.multiply,
    ts.Maximum: np.maximum,
    ts.Minimum: np.minimum,
    ts.AND: np.bitwise_and,
    ts.OR: np.bitwise_or,
    ts.XOR: np.bitwise_xor,
}


def _norm_axis(axis, ndim, who):
    if axis is None:
        return None
    if isinstance(axis, np.ndarray):  # an array of axes, or one axis as a 0-d array
        axis = axis.tolist()
    if isinstance(axis, (int, np.integer)):
        axis = [axis]
    out = []
    for a in axis:
        if isinstance(a, np.ndarray) and a.ndim == 0:
            a = a.item()
        if not isinstance(a, (int, np.integer)):
            raise TypeError(f"{who}: axis must be an int or a list of ints, got {a!r}")
        if not -ndim <= a < ndim:
            raise ValueError(f"{who}: axis {a} is out of range for a {ndim}-d input")
        out.append(int(a) % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{who}: repeated axis in {axis}")
    return tuple(sorted(out))


# The longest last axis reduce_last_axis reduces by whole columns: numpy's add.reduce sums
# fewer than 8 values of a contiguous row in order from 0 (its pairwise sum's base case);
# its float maximum and minimum of a longer row take SIMD lanes, which pick another of
# two signed zeros (or NaNs) than a pass in order.
_SHORT_AXIS = 7
_SHORT_SELECT = 4
# The fewest rows for which the columns win (numpy's row loops cost about 20 ns a row for a
# sum and 60 for a maximum, a column's ufunc call 0.4 us): measured on (rows, n) float64
# arrays, a sum by columns is slower up to 120 rows of 2 values and 240 of 7, a maximum
# up to 24 rows of 2 and 44 of 4; a last axis of 1 is never faster by columns.
_ROWS_PER_VALUE, _ROWS_BASE = 32, 64
_ROWS_PER_VALUE_SELECT = 12


def reduce_last_axis(ufunc, x, out=None, keepdims=False, initial=None):
    """``ufunc.reduce(x, axis=-1, out=out, keepdims=keepdims)`` for ``numpy.add`` (of a
    float array), ``numpy.maximum`` or ``numpy.minimum``, value for value; a short last
    axis of a C-contiguous array of enough rows is reduced by a few ufunc calls over its
    columns: numpy reduces each row in its own inner loop, about 50 ns a row (24 us for
    the ``(500, 2)`` of a two-component mixture's log-sum-exp, against 2 us by columns),
    and a few rows in less time than a call per column. ``initial`` (not None): numpy's,
    the value of a row of no elements (a ``Max`` with ``empty_identity``).

    >>> import numpy as np
    >>> x = np.array([[1.0, 5.0], [-0.0, -0.0], [np.nan, 2.0]])
    >>> reduce_last_axis(np.maximum, x)
    array([ 5., -0., nan])
    >>> reduce_last_axis(np.add, x, keepdims=True)
    array([[ 6.],
           [ 0.],
           [nan]])
    """
    n = x.shape[-1] if x.ndim else 0
    if ufunc is np.add:
        limit, min_rows = _SHORT_AXIS, _ROWS_PER_VALUE * n + _ROWS_BASE
    else:
        limit = _SHORT_SELECT if x.dtype.kind in "fc" else _SHORT_AXIS
        min_rows = _ROWS_PER_VALUE_SELECT * n
    short = x.ndim >= 2 and 2 <= n <= limit and x.size >= min_rows * n and x.flags.c_contiguous
    # (numpy sums float16 and integers in a wider type; the dtype's char, as its name
    # took 5 us to read)
    if (
        not short
        or (ufunc is np.add and x.dtype.char not in ("f", "d"))
        or (keepdims and out is not None)
    ):
        kw = {} if initial is None else {"initial": initial}  # (numpy's: no identity)
        return ufunc.reduce(x, axis=-1, out=out, keepdims=keepdims, **kw)
    if keepdims:
        # by columns of the other axes (numpy loops slowly over a trailing axis of 1)
        return reduce_last_axis(ufunc, x)[..., None]
    cols = [x[..., j] for j in range(n)]
    if ufunc is np.add:
        # 0 first, as numpy's sum: -0.0 + -0.0 sums to 0.0 there
        out = np.add(cols[0], 0, out=out)
    else:
        out = ufunc(cols[0], cols[1], out=out)
        cols = cols[1:]
    for c in cols[1:]:
        ufunc(out, c, out=out)
    return out


def _to_output_dtype(r, node):
    """A reduction's accumulated ``r`` as the output's dtype: by the engines' cast rule
    (``cast_array``) where a float accumulator meets an integer output (a sum of int8 in
    float64, of uint64 in float64), whose value out of range is the integer's minimum
    on every engine, not the low bits x86's conversion leaves."""
    r = np.asarray(r)
    dtype = node.outputs[0].dtype
    return r if r.dtype == dtype else ts.cast_array(r, dtype)


class CAReduce(Op):
    """Reduce along ``axis`` (None: all) with a commutative, associative scalar op.

    >>> from theano_dag import tensor as tt
    >>> x = tt.dtensor3("x")
    >>> r = CAReduce(ts.maximum, axis=(0, 2))(x)
    >>> r.type, str(r.owner.op)
    (TensorType(float64, vector), 'CAReduce{maximum, axis=(0, 2)}')
    """

    __props__ = ("scalar_op", "axis")

    def __init__(self, scalar_op, axis=None):
        if type(scalar_op) not in _UFUNCS:
            raise TypeError(
                f"CAReduce: cannot reduce with {scalar_op} (it needs a "
                "commutative and associative binary op)"
            )
        self.scalar_op = scalar_op
        if isinstance(axis, (int, np.integer)):
            axis = (int(axis),)
        self.axis = None if axis is None else tuple(sorted(int(a) for a in axis))
        self.ufunc = _UFUNCS[type(scalar_op)]

    def __str__(self):
        name = type(self).__name__
        head = name if name != "CAReduce" else f"CAReduce{{{self.scalar_op}, "
        if name != "CAReduce":
            return f"{name}{{axis={self.axis}}}" if self.axis is not None else f"{name}"
        return head + (f"axis={self.axis}}}" if self.axis is not None else "axis=None}")

    __repr__ = __str__

    def _axes(self, ndim):
        return tuple(range(ndim)) if self.axis is None else self.axis

    def output_dtype(self, in_dtype):
        return in_dtype

    def acc_dtype_for(self, in_dtype):
        return self.output_dtype(in_dtype)

    def initial_for(self, dtype):
        """The value a reduction of no elements gives, numpy's ``initial``, where the op
        gives one instead of numpy's error (a max of nothing); None: numpy's reduce."""
        return None

    def make_node(self, x):
        x = as_tensor_variable(x)
        if self.axis is not None and any(a < 0 for a in self.axis):
            # A negative axis counts from the end: the node's op holds it from the start.
            if any(a < -x.ndim for a in self.axis):
                raise ValueError(f"{self}: an axis is out of range for the {x.ndim}-d input {x}")
            op = copy.copy(self)
            op.axis = tuple(sorted(a % x.ndim for a in self.axis))
            return op.make_node(x)
        for a in self._axes(x.ndim):
            if a >= x.ndim:
                raise ValueError(
                    f"{self}: axis {a} is out of range for the {x.ndim}-d " f"input {x}"
                )
        axes = self._axes(x.ndim)
        shape = tuple(s for d, s in enumerate(x.type.shape) if d not in axes)
        return Apply(self, [x], [TensorType(self.output_dtype(x.dtype), shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        axes = self._axes(x.ndim)
        acc = self.acc_dtype_for(x.dtype.name)
        with np.errstate(all="ignore"):
            if not axes:
                r = np.array(x, dtype=acc, copy=True)
            else:
                # One axis at a time, the last first, as Theano's perform: the same order
                # of additions, so the same rounding, as Theano's reference results.
                r = x if self.ufunc in (np.add, np.multiply) else x.astype(acc, copy=False)
                kw = {} if (ini := self.initial_for(acc)) is None else {"initial": ini}
                for axis in sorted(axes, reverse=True):
                    r = self.ufunc.reduce(r, axis=axis, dtype=acc, **kw)  # accumulates in acc
        output_storage[0][0] = _to_output_dtype(r, node)

    def infer_shape(self, fgraph, node, input_shapes):
        axes = self._axes(node.inputs[0].ndim)
        return [tuple(s for d, s in enumerate(input_shapes[0]) if d not in axes)]

    def _expand(self, v, x):
        """``v`` (reduced) with length-1 dims put back where ``x`` was reduced."""
        axes = self._axes(x.ndim)
        order, k = [], 0
        for d in range(x.ndim):
            if d in axes:
                order.append("x")
            else:
                order.append(k)
                k += 1
        return DimShuffle(v.broadcastable, order)(v)

    def L_op(self, inputs, outputs, output_grads):
        return [grad_not_implemented(self, 0, inputs[0])]


class _DtypeReduce(CAReduce):
    """Sum/Prod: integers accumulate in 64 bits (as numpy), ``dtype`` sets the output."""

    __props__ = ("axis", "dtype", "acc_dtype")
    __str__ = __repr__ = CAReduce.__str__

    def __init__(self, axis=None, dtype=None, acc_dtype=None):
        super().__init__(self._scalar_op, axis)
        # "floatX" is the floatX of the graph being built (a name resolved once, here)
        self.dtype = None if dtype is None else normalize_dtype(dtype)
        self.acc_dtype = None if acc_dtype is None else normalize_dtype(acc_dtype)

    def output_dtype(self, in_dtype):
        if self.dtype is not None:
            return np.dtype(self.dtype).name
        if in_dtype == "bool" or in_dtype.startswith("int"):
            return "int64"
        if in_dtype.startswith("uint"):
            return "uint64"
        return in_dtype

    def acc_dtype_for(self, in_dtype):
        if self.acc_dtype is not None:
            acc = np.dtype(self.acc_dtype).name
            if in_dtype in continuous_dtypes and ts.upcast(in_dtype, acc) != acc:
                raise TypeError(
                    f"{self}: an accumulator of dtype {acc} would lose the "
                    f"precision of the {in_dtype} input; use at least "
                    f"{ts.upcast(in_dtype, acc)}"
                )
            return acc
        up = {"float16": "float32", "float32": "float64", "complex64": "complex128"}
        out = self.output_dtype(in_dtype)
        # As Theano: low-precision floats accumulate in the next precision up.
        acc = up.get(out, out)
        if in_dtype.startswith("float") and ts.upcast(in_dtype, acc) != acc:
            # A float input summed to integers or a narrower float (sum(dtype="int32")
            # of floats): as Theano, in the input's accumulator, cast at the end.
            acc = ts.upcast(acc, up.get(in_dtype, in_dtype))
        return acc

    def make_node(self, x):
        node = super().make_node(x)
        acc = self.acc_dtype_for(node.inputs[0].dtype)  # rejects a lossy acc_dtype
        if self.acc_dtype is None:
            # The node's op names its accumulator, as Theano's does (x.sum().owner.op.acc_dtype).
            props = {p: getattr(node.op, p) for p in self.__props__ if p != "acc_dtype"}
            op = type(self)(acc_dtype=acc, **props)
            node = Apply(op, node.inputs, [o.type() for o in node.outputs])
        return node


class Sum(_DtypeReduce):
    """Sum along ``axis``; its gradient spreads the output gradient back."""

    _scalar_op = ts.add

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        if _is_discrete(outputs[0]):  # an integer sum is piecewise constant
            return [_zeros_like(x, config.floatX)]
        g = self._expand(as_tensor_variable(output_grads[0]), x)
        return [reduce_grad_to(Elemwise(ts.second)(x, g), x)]


class Prod(_DtypeReduce):
    """Product along ``axis``; the gradient handles zeros in the input exactly.

    ``no_zeros_in_input`` is Theano's promise that the input has no zero, which let its
    gradient skip the zero cases; accepted so that Theano code runs, and not a property:
    the gradient here is exact with or without zeros, so the promise changes nothing.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> Prod(no_zeros_in_input=True)(x).eval({x: np.array([2.0, 3.0])})
    array(6.)
    """

    _scalar_op = ts.mul

    def __init__(self, axis=None, dtype=None, acc_dtype=None, no_zeros_in_input=False):
        super().__init__(axis, dtype, acc_dtype)
        self.no_zeros_in_input = no_zeros_in_input

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        if _is_discrete(outputs[0]):  # an integer product is piecewise constant
            return [_zeros_like(x, config.floatX)]
        # A product is holomorphic: complex values conjugate around the real formula.
        return ts.holomorphic_grads(
            lambda grads: self._real_L_op(x, grads[0]), inputs, outputs, output_grads
        )

    def _real_L_op(self, x, gz):
        tm = _tensor.math
        gz = self._expand(as_tensor_variable(gz), x)
        is_zero = tm.eq(x, 0)
        n_zeros = self._expand(Sum(self.axis, dtype="int64")(is_zero), x)
        prod_nz = self._expand(Prod(self.axis)(tm.switch(is_zero, 1, x)), x)
        # The sum of the zeros: 0, but with a derivative of 1 along each of them.
        zeros = self._expand(Sum(self.axis)(tm.switch(is_zero, x, 0)), x)
        # No zero: prod / x. One zero: it gets the product of the others, the others 0.
        # Two: each zero gets 0. More: 0 everywhere. The zeros are written as factors
        # (``zeros``, ``zeros - x``: the other zero) so that the gradient of the gradient
        # is exact too (the Hessian of prod([0, 2, 3]) has 3 and 2 in its first column;
        # constant zeros there gave a Hessian of zeros off its first row).
        no_zero = gz * prod_nz / tm.switch(is_zero, 1, x)
        one_zero = tm.switch(is_zero, gz * prod_nz, no_zero * zeros)
        two_zeros = tm.switch(is_zero, gz * prod_nz * (zeros - x), 0)
        g = tm.switch(
            tm.eq(n_zeros, 0),
            no_zero,
            tm.switch(tm.eq(n_zeros, 1), one_zero, tm.switch(tm.eq(n_zeros, 2), two_zeros, 0)),
        )
        return [reduce_grad_to(g, x)]


class ProdWithoutZeros(Op):
    """The product along ``axis`` of the nonzero elements (Theano's op behind
    ``prod(x, no_zeros_in_input=...)``'s gradient). Not a ``CAReduce``: the engines'
    reductions multiply every element, so it runs its own ``perform``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> ProdWithoutZeros(axis=1)(x).eval({x: np.array([[0.0, 2.0, 3.0], [1.0, 0.0, 0.0]])})
    array([6., 1.])
    """

    __props__ = ("axis", "dtype", "acc_dtype")
    _axes = CAReduce._axes
    _expand = CAReduce._expand
    output_dtype = _DtypeReduce.output_dtype
    acc_dtype_for = _DtypeReduce.acc_dtype_for
    infer_shape = CAReduce.infer_shape

    def __init__(self, axis=None, dtype=None, acc_dtype=None):
        if isinstance(axis, (int, np.integer)):
            axis = (int(axis),)
        self.axis = None if axis is None else tuple(sorted(int(a) for a in axis))
        self.dtype = dtype
        self.acc_dtype = acc_dtype

    def __str__(self):
        return f"ProdWithoutZeros{{axis={self.axis}}}" if self.axis else "ProdWithoutZeros"

    def make_node(self, x):
        x = as_tensor_variable(x)
        axes = self._axes(x.ndim)
        if any(a >= x.ndim for a in axes):
            raise ValueError(f"{self}: an axis is out of range for the {x.ndim}-d input {x}")
        acc = self.acc_dtype_for(x.dtype)  # rejects a lossy acc_dtype at build time
        # The node's op names its accumulator, as Theano's does.
        op = self if self.acc_dtype is not None else type(self)(self.axis, self.dtype, acc)
        shape = tuple(s for d, s in enumerate(x.type.shape) if d not in axes)
        return Apply(op, [x], [TensorType(self.output_dtype(x.dtype), shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        acc = self.acc_dtype_for(x.dtype.name)
        nonzero = np.where(x == 0, np.ones((), dtype=x.dtype), x)
        with np.errstate(all="ignore"):
            r = np.multiply.reduce(nonzero, axis=self._axes(x.ndim), dtype=acc)
        output_storage[0][0] = _to_output_dtype(r, node)

    def L_op(self, inputs, outputs, output_grads):
        return [
            grad_not_implemented(
                self, 0, inputs[0], "the product without zeros has no gradient here"
            )
        ]


class Max(CAReduce):
    """Maximum along ``axis``; ties all receive the gradient (as in Theano).

    Over an axis of length 0 it raises numpy's error, as numpy's and Theano's max do;
    with ``empty_identity=True`` it gives the maximum's identity there, -inf (the
    integer's least value, False), as numpy's ``initial``: the shift of a log-sum-exp,
    whose value over no elements is -inf.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> Max(axis=1, empty_identity=True)(x).eval({x: np.zeros((2, 0))})
    array([-inf, -inf])
    """

    def __init__(self, axis=None, empty_identity=False):
        super().__init__(ts.maximum, axis)
        self.empty_identity = bool(empty_identity)

    __props__ = ("axis", "empty_identity")

    #: (a class default too: an op pickled before the parameter existed unpickles)
    empty_identity = False

    def __str__(self):
        parts = [] if self.axis is None else [f"axis={self.axis}"]
        if self.empty_identity:
            parts.append("empty=identity")
        return type(self).__name__ + (f"{{{', '.join(parts)}}}" if parts else "")

    __repr__ = __str__

    def initial_for(self, dtype):
        if not self.empty_identity:
            return None
        dt = np.dtype(dtype)
        lowest = self.ufunc is np.maximum
        if dt.kind == "b":
            return not lowest
        if dt.kind in "iu":
            info = np.iinfo(dt)
            return info.min if lowest else info.max
        return -np.inf if lowest else np.inf

    def L_op(self, inputs, outputs, output_grads):
        tm = _tensor.math
        (x,) = inputs
        if _is_discrete(x):
            return [_zeros_like(x, config.floatX)]
        gz = self._expand(as_tensor_variable(output_grads[0]), x)
        hit = tm.eq(x, self._expand(outputs[0], x))
        return [reduce_grad_to(gz * hit, x)]


class Min(Max):
    """Minimum along ``axis``."""

    def __init__(self, axis=None, empty_identity=False):
        CAReduce.__init__(self, ts.minimum, axis)
        self.empty_identity = bool(empty_identity)


class _BoolReduce(CAReduce):
    __props__ = ("axis",)
    __str__ = __repr__ = CAReduce.__str__

    def __init__(self, axis=None):
        super().__init__(self._scalar_op, axis)

    def output_dtype(self, in_dtype):
        return "bool"

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        fn = np.all if self._scalar_op is ts.and_ else np.any
        output_storage[0][0] = np.asarray(fn(x, axis=self._axes(x.ndim)), dtype="bool")

    def L_op(self, inputs, outputs, output_grads):
        return [_zeros_like(inputs[0], _float_of(inputs[0]))]


class All(_BoolReduce):
    """True where every element along ``axis`` is nonzero."""

    _scalar_op = ts.and_


class Any(_BoolReduce):
    """True where some element along ``axis`` is nonzero."""

    _scalar_op = ts.or_
