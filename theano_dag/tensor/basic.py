"""Tensor construction and rearrangement: cast, alloc, zeros/ones, join/stack/split,
arange, eye, tile, repeat, transpose (``theano.tensor.basic``)."""

from __future__ import annotations

import warnings

import numpy as np

from theano_dag import scalar as ts
from theano_dag import tensor as _tensor
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp
from theano_dag.graph.null_type import disconnected_type, is_disconnected
from theano_dag.graph.op import Op
from theano_dag.tensor import math as tm
from theano_dag.tensor.elemwise import DimShuffle, Elemwise, reduce_grad_to, reduce_spread_grad_to
from theano_dag.tensor.math import sum as tsum
from theano_dag.tensor.shape import (
    MakeVector,
    Rebroadcast,
    Reshape,
    Shape,
    Shape_i,
    as_int_vector,
    checked_shape,
    equal_lengths,
    flatten,
    make_vector,
    reshape,
    shape,
    shape_i,
    spread_compared,
    spread_length,
)

# Theano's tensor.basic also held the type constructors (``from theano.tensor.basic import
# dmatrix``); this module's own names, defined below, come first.
from theano_dag.tensor.type import *  # noqa: F403
from theano_dag.tensor.type import (
    TensorType,
    continuous_dtypes,
    discrete_dtypes,
    int_dtypes,
    normalize_dtype,
)
from theano_dag.tensor.variable import AsTensorError, as_tensor_variable, constant

# numpy 2 keeps its exceptions in np.exceptions only; numpy 1.23 and 1.24 have no such module.
_AxisError = getattr(np, "exceptions", np).AxisError

# Tolerances of _allclose by the narrowest dtype compared (Theano's test defaults).
_TOLERANCES = {"float16": (1e-3, 1e-3), "float32": (1e-5, 1e-5), "complex64": (1e-5, 1e-5)}
_DEFAULT_TOLERANCE = (1e-8, 1e-5)  # (atol, rtol) of float64 and the rest


def _allclose(a, b, rtol=None, atol=None) -> bool:
    """``np.allclose`` with tolerances that follow the dtypes (Theano's test helper):
    float16 compares to 1e-3, float32 to 1e-5, float64 to numpy's defaults.

    >>> import numpy as np
    >>> _allclose(np.float32([0.0]), np.float32([5e-6])), _allclose([0.0], [5e-6])
    (True, False)
    """
    a, b = np.asarray(a), np.asarray(b)
    atol_, rtol_ = _DEFAULT_TOLERANCE
    for narrow in ("float16", "float32", "complex64"):
        if narrow in (str(a.dtype), str(b.dtype)):
            atol_, rtol_ = _TOLERANCES[narrow]
            break
    return bool(
        np.allclose(
            a, b, atol=atol_ if atol is None else atol, rtol=rtol_ if rtol is None else rtol
        )
    )


# Theano's tensor.basic._dot: the Dot op instance (of vectors and matrices), which
# theano_dag keeps with the other products in tensor.math.
_dot = tm._dot

__all__ = [
    "isnan",
    "isinf",
    "as_tensor_variable",
    "as_tensor",
    "constant",
    "AsTensorError",
    "cast",
    "fill",
    "second",
    "zeros_like",
    "ones_like",
    "Alloc",
    "alloc",
    "zeros",
    "ones",
    "full",
    "Join",
    "join",
    "join_",
    "concatenate",
    "stack",
    "Split",
    "split",
    "ARange",
    "arange",
    "Eye",
    "eye",
    "identity_like",
    "Tile",
    "tile",
    "Repeat",
    "repeat",
    "transpose",
    "dimshuffle",
    "squeeze",
    "shape",
    "shape_i",
    "reshape",
    "flatten",
    "make_vector",
    "MakeVector",
    "Shape",
    "Shape_i",
    "Reshape",
    "NotScalarConstantError",
    "EmptyConstantError",
    "get_scalar_constant_value",
    "get_vector_length",
    "disconnected",
]

as_tensor = as_tensor_variable


def disconnected():
    """A fresh "disconnected gradient" variable (see ``theano_dag.graph.null_type``)."""

    return disconnected_type()


def cast(x, dtype):
    """``x`` converted to ``dtype`` (``x`` itself when it already has it).

    >>> from theano_dag import tensor as tt
    >>> cast(tt.dvector("x"), "int32").dtype
    'int32'
    """
    x = as_tensor_variable(x)
    dtype = config.floatX if dtype == "floatX" else np.dtype(dtype).name
    if x.dtype == dtype:
        return x
    return Elemwise(ts.convert_to(dtype))(x)


# Theano's elementwise casts by dtype (tensor.basic._convert_to_<dtype>): ``cast``'s ops.
for _dt in discrete_dtypes + continuous_dtypes:
    globals()[f"_convert_to_{_dt}"] = Elemwise(ts.convert_to(_dt))
del _dt


# ``fill(model, value)``: ``value`` broadcast to the shape of ``model``. As in Theano,
# ``fill`` and ``second`` are the elementwise op itself, so a node's op compares equal.
fill = second = Elemwise(ts.second)


def zeros_like(x, dtype=None):
    """Zeros with the shape of ``x`` (and its dtype unless ``dtype`` is given)."""
    x = as_tensor_variable(x)
    return fill(x, constant(np.zeros((), dtype=normalize_dtype(dtype) if dtype else x.dtype)))


def ones_like(x, dtype=None):
    """Ones with the shape of ``x``."""
    x = as_tensor_variable(x)
    return fill(x, constant(np.ones((), dtype=normalize_dtype(dtype) if dtype else x.dtype)))


class Alloc(Op):
    """``alloc(value, *shape)``: a new array of ``shape`` filled with ``value``.

    >>> from theano_dag import tensor as tt
    >>> alloc(tt.dscalar("v"), 3, tt.lscalar("n")).type
    TensorType(float64, shape=(3, ?))
    """

    __props__ = ()

    def make_node(self, value, *shape):
        v = as_tensor_variable(value)
        sh = [as_tensor_variable(s) for s in shape]
        for k, s in enumerate(sh):
            if s.ndim != 0 or s.dtype not in int_dtypes + ("uint8", "uint16", "uint32"):
                raise TypeError(
                    f"Alloc: shape entry {k} ({s}) must be an integer scalar, " f"got {s.type}"
                )
        if v.ndim > len(sh):
            raise TypeError(
                f"Alloc: the value has {v.ndim} dimensions, more than the "
                f"{len(sh)} of the requested shape"
            )
        # A length known at build time, not only a constant: Theano reads x.shape[i] of a
        # broadcastable x as 1, so alloc(v, *x.shape) keeps x's broadcastable dimensions.
        static = [_known_int(s) for s in sh]
        return Apply(self, [v, *sh], [TensorType(v.dtype, shape=tuple(static))()])

    def perform(self, node, inputs, output_storage, params=None):
        v, *sh = inputs
        out = np.empty(tuple(int(s) for s in sh), dtype=node.outputs[0].dtype)
        try:
            out[...] = v
        except ValueError:
            raise ValueError(
                f"Alloc: a value of shape {np.shape(v)} cannot fill the shape " f"{out.shape}"
            ) from None
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        # Each length asked, checked against the value's length there unless that is 1
        # (numpy spreads a length 1; perform refuses any other that differs).
        value, dims = node.inputs[0], node.inputs[1:]
        vshape = input_shapes[0]
        out = []
        for d, n in enumerate(dims):
            k = d - (len(dims) - value.ndim)
            if k >= 0 and not value.type.broadcastable[k]:
                n = spread_length(n, vshape[k], f"{self} along dimension {d}")
            out.append(n)
        return [tuple(out)]

    def do_constant_folding(self, fgraph, node):
        # As Theano: an Alloc that a function returns, or that an increment writes into,
        # stays an Alloc. Folded, it would be a constant the function hands out (that the
        # caller may change) or that the increment must copy every call.
        if fgraph is None:
            return True
        sub = _tensor.subtensor
        writers = (sub.IncSubtensor, sub.AdvancedIncSubtensor1, sub.AdvancedIncSubtensor)
        for client, i in fgraph.clients.get(node.outputs[0], ()):
            if client == "output" or (i == 0 and isinstance(client.op, writers)):
                return False
        return True

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def L_op(self, inputs, outputs, output_grads):
        v = inputs[0]
        (gz,) = output_grads
        lead = outputs[0].ndim - v.ndim
        g = tsum(gz, axis=list(range(lead))) if lead else gz
        if v.dtype in discrete_dtypes:
            g = zeros_like(v, config.floatX)
        else:
            g = reduce_spread_grad_to(g, v)
        return [g] + [disconnected() for _ in inputs[1:]]


_alloc = Alloc()


def _never_for_integers(elemwise, name):
    def test(x):
        x = as_tensor_variable(x)
        if x.dtype in discrete_dtypes:
            # An integer or a bool is never NaN nor infinite: known False of x's shape (an
            # Alloc, as Theano builds it), which constant folding and shape rewrites see.
            return alloc(np.asarray(False), *[x.shape[i] for i in range(x.ndim)])
        return elemwise(x)

    test.__name__ = test.__qualname__ = name
    test.__doc__ = f"""True where ``x`` is {"NaN" if name == "isnan" else "infinite"}; an
    Alloc of False for integer and bool ``x`` (Theano's), ``{name}_`` for the Elemwise.

    >>> import theano_dag.tensor as tt
    >>> {name}(tt.dvector()).owner.op, {name}(tt.ivector()).owner.op
    (Elemwise{{{name},no_inplace}}, Alloc)
    """
    return test


isnan = _never_for_integers(tm.isnan, "isnan")
isinf = _never_for_integers(tm.isinf, "isinf")


def alloc(value, *shape):
    """A new array of ``shape`` filled with ``value`` (broadcast). A Python number takes
    the dtype a constant of it takes (Theano's rule: ``alloc(1.5, 3)`` is float32, which
    holds 1.5 exactly; ``alloc(0.1, 3)`` is floatX).

    >>> alloc(1.5, 3).dtype, alloc(0.1, 3).dtype
    ('float32', 'float64')
    """
    return _alloc(value, *shape)


def _shape_args(shape):
    if isinstance(shape, (list, tuple)):
        return list(shape)
    s = as_tensor_variable(shape)
    if s.ndim == 0:
        return [s]
    n = get_vector_length(s)
    return [s[i] for i in range(n)]


def zeros(shape, dtype=None):
    """Zeros of ``shape`` (a tuple of ints/int scalars); dtype floatX by default."""
    return _alloc(np.zeros((), dtype=normalize_dtype(dtype)), *_shape_args(shape))


def ones(shape, dtype=None):
    """Ones of ``shape``."""
    return _alloc(np.ones((), dtype=normalize_dtype(dtype)), *_shape_args(shape))


def full(shape, fill_value, dtype=None):
    """``fill_value`` everywhere in an array of ``shape``."""
    v = as_tensor_variable(fill_value)
    if dtype is not None:
        v = cast(v, dtype)
    return _alloc(v, *_shape_args(shape))


# -- join / stack / split ------------------------------------------------------------


def _is_axis_argument(a):
    """Whether ``a`` can be the axis of Theano's ``Join()(axis, *tensors)``: an integer
    (a Python or numpy int, or a 0-d integer tensor; tensors are never 0-d)."""
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        return True
    a = a if isinstance(a, Variable) else None
    return a is not None and a.ndim == 0 and a.dtype in int_dtypes + ("uint8", "uint16")


def _known_int(value):
    """The integer scalar ``value`` (an axis, a length) as a Python int when it is known
    when the graph is built, else ``None``."""
    try:
        return int(get_scalar_constant_value(value))
    except NotScalarConstantError:
        return None


def _along(axis, ndim, along, other):
    """Per dimension ``d`` of an ``ndim``-d result, ``along(d)`` where ``d`` is the
    symbolic ``axis`` (negative counts from the end) and ``other(d)`` elsewhere: the
    shape of a join or a split whose axis is only known when the function runs."""
    axis = tm.switch(tm.lt(axis, 0), axis + ndim, axis)
    return tuple(tm.switch(tm.eq(axis, d), along(d), other(d)) for d in range(ndim))


def _run_axis(axis, ndim, op):
    """The axis of ``op`` (given, or its input read at run time), checked against
    ``ndim`` dimensions, as a non-negative index."""
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise _AxisError(f"{op}: axis {axis} is out of range for {ndim}-d inputs")
    return axis % ndim


class Join(Op):
    """Concatenate tensors of equal ndim along ``axis``.

    Theano's form, ``Join()(axis, *tensors)`` with the axis as the first input, makes the
    node of ``Join(axis)`` when the axis is a constant, and of ``Join(None)``, whose first
    input is the axis, when it is only known when the function runs. ``view=k``
    (Theano's) lets the output be input ``k`` itself when every other input is empty
    along the axis.

    >>> from theano_dag import tensor as tt
    >>> join(0, tt.dmatrix("a"), tt.fmatrix("b")).type
    TensorType(float64, matrix)
    >>> Join()(1, tt.dmatrix("a"), tt.dmatrix("b")).owner.op
    Join{axis=1}
    >>> Join()(tt.lscalar("k"), tt.dmatrix("a"), tt.dmatrix("b")).owner.op
    Join
    """

    __props__ = ("axis", "view")

    def __init__(self, axis=0, view=-1):
        self.axis = None if axis is None else int(axis)
        self.view = int(view)
        if self.view != -1:
            # the view's input index among the node's inputs (after the axis, if one)
            self.view_map = {0: [self.view + (self.axis is None)]}

    def __str__(self):
        view = "" if self.view == -1 else f", view={self.view}"
        if self.axis is None:
            return f"Join{{{view[2:]}}}" if view else "Join"
        return f"Join{{axis={self.axis}{view}}}"

    __repr__ = __str__

    def joined(self, node):
        """The tensors ``node`` joins: its inputs after the axis, when the axis is one."""
        return node.inputs if self.axis is not None else node.inputs[1:]

    def make_node(self, *tensors):
        axis_in = []
        if len(tensors) > 1 and _is_axis_argument(tensors[0]):
            axis, *tensors = tensors
            known = _known_int(axis)
            if known is not None:
                return Join(known, self.view).make_node(*tensors)
            axis_in = [as_tensor_variable(axis)]
        elif self.axis is None:
            raise TypeError("Join(None): the first input must be the axis (an integer scalar)")
        if not tensors:
            raise ValueError("Join: nothing to join")
        ts_ = [as_tensor_variable(t) for t in tensors]
        ndim = ts_[0].ndim
        if ndim == 0:
            raise TypeError("Join: cannot join scalars (0-d tensors); use stack")
        for k, t in enumerate(ts_):
            if t.ndim != ndim:
                raise TypeError(
                    f"Join: input {k} ({t}) has {t.ndim} dimensions, expected "
                    f"{ndim} like input 0"
                )
        if not -1 <= self.view < len(ts_):
            raise ValueError(f"Join: view={self.view} is not one of the {len(ts_)} inputs")
        dtype = ts.upcast(*[t.dtype for t in ts_])
        if axis_in:
            op = self if self.axis is None else Join(None, self.view)
            # Any dimension may be the axis: no length is known (Theano's rule too).
            out = TensorType(dtype, shape=(None,) * ndim)()
            return Apply(op, axis_in + ts_, [out])
        axis = _run_axis(self.axis, ndim, "Join")
        shape = []
        for d in range(ndim):
            dims = [t.type.shape[d] for t in ts_]
            if d == axis:
                shape.append(None if None in dims else sum(dims))
            else:
                known = {s for s in dims if s is not None}
                if len(known) > 1:
                    raise ValueError(
                        f"Join: inputs have different lengths {sorted(known)} "
                        f"along dimension {d}"
                    )
                shape.append(known.pop() if known else None)
        return Apply(self, ts_, [TensorType(dtype, shape=tuple(shape))()])

    def perform(self, node, inputs, output_storage, params=None):
        dtype = node.outputs[0].dtype
        if self.axis is None:
            axis, *inputs = inputs
            axis = _run_axis(axis, inputs[0].ndim, self)
        else:
            axis = self.axis % inputs[0].ndim
        if self.view != -1 and inputs[self.view].dtype == dtype:
            kept = inputs[self.view]
            rest = [d for k, d in enumerate(kept.shape) if k != axis]
            others = [x for k, x in enumerate(inputs) if k != self.view]
            if all(
                x.shape[axis] == 0 and [d for k, d in enumerate(x.shape) if k != axis] == rest
                for x in others
            ):
                output_storage[0][0] = inputs[self.view]
                return
        try:
            out = np.concatenate(inputs, axis=axis)
        except ValueError as e:
            raise ValueError(
                f"{self}: cannot join shapes {[x.shape for x in inputs]}: {e}"
            ) from None
        output_storage[0][0] = np.asarray(out, dtype=dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        if self.axis is None:
            shapes = input_shapes[1:]
            ndim = len(shapes[0])
            axis = tm.switch(tm.lt(node.inputs[0], 0), node.inputs[0] + ndim, node.inputs[0])

            def total(d):
                out = shapes[0][d]
                for s in shapes[1:]:
                    out = out + s[d]
                return out

            def other(d):
                # The parts' lengths along a dimension that is not the axis agree: each
                # compared with the first's, which along the axis is compared with itself.
                lengths = [shapes[0][d]]
                lengths += [tm.switch(tm.eq(axis, d), shapes[0][d], s[d]) for s in shapes[1:]]
                return equal_lengths(
                    lengths, f"{self} along dimension {d}", lambda k: str(node.inputs[k + 1])
                )

            return [_along(node.inputs[0], ndim, total, other)]
        axis = self.axis % node.inputs[0].ndim
        out = []
        for d in range(node.inputs[0].ndim):
            if d == axis:
                total = input_shapes[0][axis]
                for s in input_shapes[1:]:
                    total = total + s[axis]
                out.append(total)
                continue

            # The parts' other lengths: equal, as numpy's concatenate needs them.
            def name_of(k):
                return str(node.inputs[k])

            lengths = [s[d] for s in input_shapes]
            out.append(equal_lengths(lengths, f"{self} along dimension {d}", name_of))
        return [tuple(out)]

    def connection_pattern(self, node):
        # the axis input picks where the values go; it has no gradient
        if self.axis is None:
            return [[False]] + [[True]] * (len(node.inputs) - 1)
        return [[True]] * len(node.inputs)

    def L_op(self, inputs, outputs, output_grads):
        (gz,) = output_grads
        parts_in = inputs if self.axis is not None else inputs[1:]
        if self.axis is None:
            axis = inputs[0]
            lead = [disconnected()]
        else:
            axis = self.axis % gz.ndim
            lead = []
        if len(parts_in) == 1:
            parts = [gz]
        elif self.axis is None:
            sizes = make_vector(*[shape(x)[axis] for x in parts_in])
            parts = Split(len(parts_in))(gz, axis, sizes, return_list=True)
        else:
            sizes = make_vector(*[shape_i(x, axis) for x in parts_in])
            parts = Split(len(parts_in), axis)(gz, sizes, return_list=True)
        out = []
        for x, g in zip(parts_in, parts):
            if x.dtype in discrete_dtypes:
                out.append(zeros_like(x, config.floatX))
            else:
                out.append(reduce_grad_to(g, x))
        return lead + out


# Theano's module-level Join op (``node.op == tt.join_`` recognises a join along axis 0).
join_ = Join()


def join(axis, *tensors):
    """Concatenate ``tensors`` along ``axis`` (Theano's argument order); the axis may be
    a symbolic integer scalar, known only when the function runs.

    >>> import numpy as np
    >>> from theano_dag import function, tensor as tt
    >>> k = tt.lscalar("k")
    >>> f = function([k], join(k, np.ones((1, 2)), np.zeros((1, 2))))
    >>> f(0).shape, f(1).shape
    ((2, 2), (1, 4))
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if len(tensors) == 1:
        # Joining one tensor is that tensor (as in Theano: no node, nothing to copy).
        return as_tensor_variable(tensors[0])
    if isinstance(axis, Variable):
        # Theano's form with the axis an input: a constant axis makes Join(axis), any
        # other Join(None) with the axis as its first input.
        return Join()(axis, *tensors)
    return Join(axis)(*tensors)


def concatenate(tensor_list, axis=0):
    """``numpy.concatenate``."""
    if not isinstance(tensor_list, (list, tuple)):
        raise TypeError("concatenate: the first argument must be a list or tuple of tensors")
    return join(axis, *tensor_list)


def stack(*tensors, **kwargs):
    """Join tensors of equal shape along a new ``axis``: ``stack(tensors, axis=0)``.

    Theano's first form, ``stack(a, b, ...)`` (the tensors as arguments, axis 0), still
    works and warns that it is deprecated, as Theano's does. An axis out of range raises
    numpy's ``AxisError`` (both an ``IndexError``, as in Theano, and a ``ValueError``).

    >>> from theano_dag import tensor as tt
    >>> stack([tt.dvector("a"), tt.dvector("b")], axis=1).ndim
    2
    """
    unknown = sorted(set(kwargs) - {"tensors", "axis"})
    if unknown:
        raise TypeError(f"stack: unexpected keyword arguments {unknown}")
    axis = kwargs.get("axis", 0)
    if "tensors" in kwargs:
        if tensors:
            raise TypeError("stack: the tensors are given both by position and as 'tensors'")
        tensors = kwargs["tensors"]
    elif tensors and isinstance(tensors[0], (list, tuple)):
        if len(tensors) > 2 or (len(tensors) == 2 and "axis" in kwargs):
            raise TypeError("stack: expected stack(tensors, axis=0)")
        if len(tensors) == 2:
            axis = tensors[1]
        tensors = tensors[0]
    elif tensors:
        warnings.warn(
            "stack(a, b, ...) is deprecated: use stack([a, b, ...], axis=0)",
            DeprecationWarning,
            stacklevel=2,
        )
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise TypeError("stack: expected a non-empty list of tensors")
    ts_ = [as_tensor_variable(t) for t in tensors]
    ndim = ts_[0].ndim
    if not -(ndim + 1) <= axis <= ndim:
        raise _AxisError(f"stack: axis {axis} is out of range for {ndim}-d inputs")
    axis = axis % (ndim + 1)
    if ndim == 0 and all(isinstance(t, Variable) for t in ts_):
        dtype = ts.upcast(*[t.dtype for t in ts_])
        return MakeVector(dtype)(*[cast(t, dtype) for t in ts_])
    parts = []
    for t in ts_:
        order = list(range(t.ndim))
        order.insert(axis, "x")
        parts.append(DimShuffle(t.broadcastable, order)(t))
    return Join(axis)(*parts)


class Split(Op):
    """Split ``x`` along ``axis`` into ``len_splits`` parts of the given sizes; Theano's
    form ``Split(n)(x, axis, splits)`` makes the node of ``Split(n, axis)`` when the axis
    is a constant, and of ``Split(n, None)``, whose inputs are ``(x, axis, splits)``, when
    it is only known when the function runs.

    >>> from theano_dag import tensor as tt
    >>> Split(2)(tt.dmatrix("m"), 1, [1, 2])[0].owner.op
    Split{len_splits=2, axis=1}
    >>> Split(2)(tt.dmatrix("m"), tt.lscalar("k"), [1, 2])[0].owner.op
    Split{len_splits=2, axis=None}
    """

    __props__ = ("len_splits", "axis")

    def __init__(self, len_splits, axis=0):
        self.len_splits = int(len_splits)
        self.axis = None if axis is None else int(axis)

    def make_node(self, x, *args):
        x = as_tensor_variable(x)
        axis_in = []
        if len(args) == 2:  # Theano's form, Split(n)(x, axis, splits)
            axis, splits = args
            known = _known_int(axis)
            if known is not None:
                return Split(self.len_splits, known).make_node(x, splits)
            axis = as_tensor_variable(axis)
            if not _is_axis_argument(axis):
                raise TypeError(f"Split: the axis must be an integer scalar, got {axis.type}")
            axis_in = [axis]
        elif self.axis is None:
            raise TypeError("Split(n, None): the inputs must be (x, axis, splits)")
        else:
            (splits,) = args
        splits = as_int_vector(splits, "Split")
        if axis_in:
            # Any dimension may be the axis: no length is known.
            shape = (None,) * x.ndim
            op = self if self.axis is None else Split(self.len_splits, None)
        else:
            if not -x.ndim <= self.axis < x.ndim:
                raise ValueError(f"Split: axis {self.axis} is out of range for the {x.ndim}-d {x}")
            shape = list(x.type.shape)
            shape[self.axis % x.ndim] = None
            op = self
        outs = [TensorType(x.dtype, shape=tuple(shape))() for _ in range(self.len_splits)]
        return Apply(op, [x, *axis_in, splits], outs)

    def perform(self, node, inputs, output_storage, params=None):
        if self.axis is None:
            x, axis, splits = inputs
            axis = _run_axis(axis, x.ndim, self)
        else:
            x, splits = inputs
            axis = self.axis % x.ndim
        # The sizes as Python ints and the parts as slices: numpy's sum, any, cumsum and
        # split of a few sizes took about 20 us a call, the whole of a small graph's step.
        sizes = splits.tolist()
        if len(sizes) != self.len_splits:
            raise ValueError(f"Split: got {len(sizes)} sizes, expected {self.len_splits}")
        if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
            raise ValueError(
                f"Split: sizes {sizes} do not add up to the length "
                f"{x.shape[axis]} of axis {axis}"
            )
        lead = (slice(None),) * axis
        start = 0
        for cell, size in zip(output_storage, sizes):
            # a copy: Theano's parts are not views of x
            cell[0] = x[(*lead, slice(start, start + size))].copy()
            start += size

    def infer_shape(self, fgraph, node, input_shapes):
        xshape = input_shapes[0]
        splits = node.inputs[-1]
        if self.axis is None:
            axis = node.inputs[1]
            out = [
                _along(axis, len(xshape), lambda d, i=i: splits[i], lambda d: xshape[d])
                for i in range(self.len_splits)
            ]
            length = 0
            for n in _along(axis, len(xshape), xshape.__getitem__, lambda d: 0):
                length = length + n
        else:
            axis = self.axis % node.inputs[0].ndim
            out = []
            for i in range(self.len_splits):
                s = list(xshape)
                s[axis] = splits[i]
                out.append(tuple(s))
            length = xshape[axis]
        # As perform refuses them: as many sizes as parts, and sizes that add up to the
        # axis's length, none negative (their magnitudes then add up to it too).
        checks = [
            ([self.len_splits, input_shapes[-1][0]], ("the parts", "the sizes given")),
            (
                [length, tm.sum(splits), tm.sum(abs(splits))],
                ("the axis's length", "the sizes' sum", "the sum of their magnitudes"),
            ),
        ]
        for lengths, names in checks:
            out = [checked_shape(o, lengths, str(self), names) for o in out]
        return out

    def connection_pattern(self, node):
        rest = [[False] * self.len_splits] * (len(node.inputs) - 1)
        return [[True] * self.len_splits] + rest

    def L_op(self, inputs, outputs, output_grads):
        gs = [zeros_like(o) if is_disconnected(g) else g for g, o in zip(output_grads, outputs)]
        rest = [disconnected() for _ in inputs[1:]]
        if self.axis is None:
            return [Join()(inputs[1], *gs) if len(gs) > 1 else gs[0], *rest]
        return [join(self.axis, *gs), *rest]


def split(x, splits_size, n_splits, axis=0):
    """Split ``x`` along ``axis`` (an int or a symbolic integer scalar) into ``n_splits``
    parts of sizes ``splits_size``.

    >>> from theano_dag import tensor as tt
    >>> [p.ndim for p in split(tt.dmatrix("m"), [1, 2], 2, axis=tt.lscalar("k"))]
    [2, 2]
    """
    if isinstance(axis, Variable):
        return Split(n_splits)(x, axis, splits_size, return_list=True)
    return Split(n_splits, axis)(x, splits_size, return_list=True)


# -- ranges and patterns ----------------------------------------------------------


class ARange(Op):
    """``numpy.arange(start, stop, step)`` for scalar inputs. One instance per dtype
    (``arange`` reuses it, as Theano's does).

    >>> ARange("int64") is ARange("int64")
    True
    """

    __props__ = ("dtype",)
    _instances: dict = {}

    def __new__(cls, dtype):
        key = (cls, normalize_dtype(dtype))
        if key not in ARange._instances:
            ARange._instances[key] = super().__new__(cls)
        return ARange._instances[key]

    def __getnewargs__(self):  # pickle and copy make it through __new__ too
        return (self.dtype,)

    def __init__(self, dtype):
        self.dtype = normalize_dtype(dtype)

    def make_node(self, start, stop, step):
        ins = [as_tensor_variable(v) for v in (start, stop, step)]
        for name, v in zip(("start", "stop", "step"), ins):
            if v.ndim != 0:
                raise TypeError(f"ARange: {name} must be a scalar, got {v.type}")
        return Apply(self, ins, [TensorType(self.dtype, shape=(None,))()])

    def perform(self, node, inputs, output_storage, params=None):
        # Python numbers: numpy would compute stop - start in the inputs' dtype, and
        # arange(int8(-64), int8(64)) overflowed to an empty array.
        start, stop, step = (np.asarray(v).item() for v in inputs)
        if step == 0:
            raise ValueError("ARange: step must not be 0")
        output_storage[0][0] = np.arange(start, stop, step, dtype=self.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        # In int64 (exact) or float64, never in the inputs' dtype, whose difference
        # may overflow (int8 -64 to 64).
        start, stop, step = node.inputs
        if all(v.dtype in discrete_dtypes for v in node.inputs):
            start, stop, step = (cast(v, "int64") for v in node.inputs)
            n = -((start - stop) // step)  # ceil((stop - start) / step), exactly
        else:
            start, stop, step = (cast(v, "float64") for v in node.inputs)
            n = tm.ceil((stop - start) / step)
        return [(cast(tm.maximum(n, 0), "int64"),)]

    def connection_pattern(self, node):
        # out[i] = start + i * step: the values depend on start and step; stop only
        # decides their number (piecewise constant, no gradient).
        return [[True], [False], [True]]

    def L_op(self, inputs, outputs, output_grads):
        start, _stop, step = inputs
        (gz,) = output_grads
        if self.dtype in discrete_dtypes:
            # integer values do not move with start and step
            zeros = [zeros_like(v, dtype=config.floatX) for v in (start, step)]
            return [zeros[0], disconnected(), zeros[1]]
        gz = cast(gz, self.dtype)
        taken = arange(shape_i(outputs[0], 0), dtype=self.dtype)
        g_start = cast(tsum(gz), start.dtype) if start.dtype in continuous_dtypes else None
        g_step = cast(tsum(gz * taken), step.dtype) if step.dtype in continuous_dtypes else None
        return [
            zeros_like(start, dtype=config.floatX) if g_start is None else g_start,
            disconnected(),
            zeros_like(step, dtype=config.floatX) if g_step is None else g_step,
        ]


def arange(start, stop=None, step=1, dtype=None):
    """``numpy.arange``; the dtype is the upcast of the arguments unless given.

    Python float bounds give a float64 range, or floatX's with ``floatX=float32``:

    >>> arange(5).dtype, arange(0.0, 1.0, 0.25).dtype
    ('int64', 'float64')
    >>> with config.change_flags(floatX="float32"):
    ...     arange(0.0, 1.0, 0.25).dtype
    'float32'
    """
    if stop is None:
        start, stop = 0, start
    ins = [as_tensor_variable(v) for v in (start, stop, step)]
    if dtype is None:
        dtype = ts.upcast(*[v.dtype for v in ins])
        if dtype in int_dtypes:
            dtype = "int64"
        elif (
            dtype == "float32"
            and config.floatX == "float64"
            and all(isinstance(v, Constant) for v in ins)
        ):
            # Python float literals, autocast to float32 when exact, range as numpy's
            # float64; with floatX=float32 they stand for floatX and the range is float32
            # (a float64 range would upcast every float32 graph it enters).
            dtype = "float64"
    return ARange(dtype)(*ins)


class Eye(Op):
    """``numpy.eye(n, m, k)`` with scalar inputs."""

    __props__ = ("dtype",)
    takes_none = True  # an M of None is N, as numpy reads it

    def __init__(self, dtype=None):
        self.dtype = normalize_dtype(dtype)

    def make_node(self, n, m, k):
        ins = [as_tensor_variable(v) for v in (n, m, k)]
        for name, v in zip("nmk", ins):
            if v.ndim != 0 or v.dtype not in int_dtypes:
                raise TypeError(f"Eye: {name} must be an integer scalar, got {v.type}")
        static = tuple(int(v.data) if isinstance(v, Constant) else None for v in ins[:2])
        return Apply(self, ins, [TensorType(self.dtype, shape=static)()])

    def perform(self, node, inputs, output_storage, params=None):
        n, m, k = inputs
        # m given as None (Theano lets a function's input be None) is numpy's: m = n
        m = None if m is None else int(m)
        output_storage[0][0] = np.eye(int(n), m, int(k), dtype=self.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [(node.inputs[0], node.inputs[1])]

    def connection_pattern(self, node):
        return [[False]] * 3

    def L_op(self, inputs, outputs, output_grads):
        return [disconnected() for _ in inputs]


def eye(n, m=None, k=0, dtype=None):
    """An ``n x m`` matrix with ones on diagonal ``k``."""
    return Eye(dtype)(n, n if m is None else m, k)


def identity_like(x, dtype=None):
    """An identity matrix with the shape of ``x``."""
    x = as_tensor_variable(x)
    return eye(shape_i(x, 0), shape_i(x, 1), 0, dtype or x.dtype)


class Tile(Op):
    """``numpy.tile`` with a static tuple of repetitions (len(reps) == ndim).

    Theano's deprecated form, ``Tile(ndim)(x, reps)`` with the repetitions an input,
    makes the node of ``Tile(reps)`` when they are constants (``tile`` takes symbolic
    ones).

    >>> from theano_dag import tensor as tt
    >>> Tile(2)(tt.dmatrix("m"), [2, 3]).owner.op
    Tile{reps=(2, 3)}
    """

    __props__ = ("reps",)

    def __init__(self, reps):
        if isinstance(reps, (int, np.integer)):  # Theano's Tile(ndim): reps come later
            self.reps, self.ndim = None, int(reps)
        else:
            self.reps = tuple(int(r) for r in reps)

    def make_node(self, x, *reps):
        x = as_tensor_variable(x)
        if self.reps is None:
            return self._theano_form(x, *reps)
        if reps:
            raise TypeError(f"{self}: the repetitions are the op's, not an input")
        if len(self.reps) != x.ndim:
            raise TypeError(
                f"Tile: reps {self.reps} must have one entry per dimension of " f"{x} ({x.ndim})"
            )
        shape = tuple(None if s is None else s * r for s, r in zip(x.type.shape, self.reps))
        return Apply(self, [x], [TensorType(x.dtype, shape=shape)()])

    def _theano_form(self, x, reps):
        reps = as_tensor_variable(reps)
        if not isinstance(reps, Constant) or reps.ndim != 1:
            raise NotImplementedError(
                f"Tile({self.ndim}): the repetitions must be a constant vector; "
                "use tile() for symbolic ones"
            )
        if len(reps.data) != self.ndim or x.ndim != self.ndim:
            raise ValueError(
                f"Tile({self.ndim}): {len(reps.data)} repetitions for the {x.ndim}-d {x}"
            )
        return Tile(reps.data.tolist()).make_node(x)

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.tile(inputs[0], self.reps)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(s * r for s, r in zip(input_shapes[0], self.reps))]

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        (gz,) = output_grads
        if not x.ndim:
            return [gz]
        # Each output dim d is (reps[d], len_d): split it in two and sum the reps part.
        parts = []
        for d, r in enumerate(self.reps):
            parts += [r, shape_i(x, d)]
        g = reshape(gz, parts, ndim=2 * x.ndim)
        return [tsum(g, axis=list(range(0, 2 * x.ndim, 2)))]


def _tile_reps(x, reps, ndim):
    """Theano's ``reps`` as a list of ints and int scalars, one per output dimension."""
    if ndim is not None and ndim < x.ndim:
        raise ValueError(f"tile: ndim={ndim} is less than the {x.ndim} dimensions of {x}")
    if isinstance(reps, (list, tuple)):
        reps = list(reps)
        if ndim is not None and len(reps) > ndim:
            raise ValueError(f"tile: {len(reps)} reps for ndim={ndim}: at most ndim are allowed")
        for r in reps:
            is_int = isinstance(r, (int, np.integer)) and not isinstance(r, bool)
            if not is_int and not (
                isinstance(r, Variable) and r.ndim == 0 and r.dtype in discrete_dtypes
            ):
                raise ValueError(f"tile: reps must be integers or integer scalars, got {r!r}")
    else:
        r = as_tensor_variable(reps)
        if r.dtype not in discrete_dtypes:
            raise ValueError(f"tile: reps must be integers, got {reps!r} of type {r.type}")
        if r.ndim == 0:
            reps = [int(reps) if isinstance(reps, (int, np.integer)) else r]
        elif r.ndim == 1:
            if ndim is None:
                raise ValueError("tile: give ndim when reps is a vector (its length is unknown)")
            # reps padded on the left with ones to ndim entries, at run time
            offset = ndim - shape_i(r, 0)
            offset = _tensor.arrays.Assert("tile: reps has more entries than ndim")(
                offset, tm.ge(offset, 0)
            )
            reps = [
                tm.switch(tm.lt(i, offset), 1, r[tm.maximum(i - offset, 0)]) for i in range(ndim)
            ]
        else:
            raise ValueError(f"tile: reps must be a scalar or a vector, got {r.ndim} dimensions")
    nd = max(len(reps), x.ndim) if ndim is None else ndim
    return [1] * (nd - len(reps)) + reps


def tile(x, reps, ndim=None):
    """``numpy.tile``: ``x`` repeated ``reps[d]`` times along each dimension (Theano's).

    ``reps`` is an int, a list of ints and int scalars, an int scalar, or an int vector
    (then ``ndim`` is needed). A shorter ``reps`` pads on the left with ones, and ``x``
    gets new leading dimensions up to ``ndim`` (default: ``max(x.ndim, len(reps))``).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, k = tt.dvector("x"), tt.iscalar("k")
    >>> tile(x, [2, k]).eval({x: np.array([1.0, 2.0]), k: 2}).tolist()
    [[1.0, 2.0, 1.0, 2.0], [1.0, 2.0, 1.0, 2.0]]
    """
    x = as_tensor_variable(x)
    reps = _tile_reps(x, reps, ndim)
    nd = len(reps)
    if all(isinstance(r, (int, np.integer)) for r in reps):
        if x.ndim < nd:
            x = DimShuffle(x.broadcastable, ["x"] * (nd - x.ndim) + list(range(x.ndim)))(x)
        return Tile(reps)(x)
    # Symbolic reps: x broadcast to (r_0, .., r_n-1, s_0, .., s_n-1), the dimensions
    # interleaved to (r_0, s_0, r_1, s_1, ..) and merged in pairs: r_d copies of x along d.
    shape = [1] * (nd - x.ndim) + [shape_i(x, d) for d in range(x.ndim)]
    y = alloc(x, *reps, *shape)
    y = y.dimshuffle(*[k for d in range(nd) for k in (d, nd + d)])
    return reshape(y, [r * s for r, s in zip(reps, shape)], ndim=nd)


# The dtypes of repeat counts numpy takes (uint64 it refuses to cast to its index type).
_REPEAT_COUNTS = int_dtypes + ("uint8", "uint16", "uint32")


class Repeat(Op):
    """``numpy.repeat(x, repeats, axis)``; ``repeats`` an int scalar or vector input."""

    __props__ = ("axis",)

    def __init__(self, axis=None):
        self.axis = axis

    def make_node(self, x, repeats):
        x, repeats = as_tensor_variable(x), as_tensor_variable(repeats)
        if repeats.dtype not in _REPEAT_COUNTS or repeats.ndim > 1:
            raise TypeError(
                f"Repeat: repeats must be an integer scalar or vector (not uint64: numpy "
                f"cannot take it), got {repeats.type}"
            )
        # A constant count repeats a known length into a known length (1 stays 1: a
        # broadcastable dimension repeated once stays broadcastable, as Theano's).
        count = int(repeats.data) if isinstance(repeats, Constant) and repeats.ndim == 0 else None
        if self.axis is None:
            size = None if None in x.type.shape else int(np.prod(x.type.shape, dtype="int64"))
            shape = (None if size is None or count is None else size * count,)
        else:
            shape = list(x.type.shape)
            n = shape[self.axis]
            shape[self.axis] = None if n is None or count is None else n * count
            shape = tuple(shape)
        return Apply(self, [x, repeats], [TensorType(x.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, r = inputs
        output_storage[0][0] = np.repeat(x, r, axis=self.axis)

    def infer_shape(self, fgraph, node, input_shapes):
        x, r = node.inputs
        xs = input_shapes[0]
        if r.ndim == 0 and r.dtype != "int64":
            # Lengths are int64: a count of a small dtype times a length the caller
            # gives as a Python int (a constant of the smallest dtype holding it) was
            # computed in that dtype (int8: 100 * 3 made 44).
            r = cast(r, "int64")
        if self.axis is None:
            n = 1
            for s in xs:
                n = n * s
            out = [None]
            d = 0
        else:
            out = list(xs)
            d = self.axis
            n = xs[d]
        out[d] = n * r if r.ndim == 0 else self._counted(r, input_shapes[1][0], n)
        return [tuple(out)]

    def _counted(self, r, count, n):
        """The length ``n`` repeated by the ``count`` counts ``r``: their sum, where numpy
        takes one count for each element (the counts' length checked equal to ``n``),
        or ``n`` times the one count where there is one (numpy spreads it)."""
        total = tsum(r)
        if r.type.shape[0] == 1:
            return total * n
        what = f"{self}: the counts"
        spread = spread_compared(n, count, what, ("the length repeated", "the counts' length"))
        if spread is None:  # known equal
            return total
        total = _tensor.switch(_tensor.eq(count, 1), total * n, total)
        return equal_lengths(
            [n, spread],
            what,
            ("the length repeated", "the counts' length").__getitem__,
            guard=total,
        )

    def connection_pattern(self, node):
        return [[True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        x, r = inputs
        (gz,) = output_grads
        if r.ndim != 0:
            return [self._segment_sums(x, r, gz), disconnected()]
        if self.axis is None:
            x_flat = flatten(x)
            g = tsum(reshape(gz, [shape_i(x_flat, 0), r]), axis=1)
            return [reshape(g, shape(x), ndim=x.ndim), disconnected()]
        axis = self.axis % x.ndim  # the repeats go right after it, for a negative axis too
        dims = [shape_i(x, d) for d in range(x.ndim)]
        dims.insert(axis + 1, r)
        g = tsum(reshape(gz, dims, ndim=x.ndim + 1), axis=axis + 1)
        return [g, disconnected()]

    def _segment_sums(self, x, r, gz):
        """The gradient for a vector of counts: each element of ``x`` gets the sum of
        the ``gz`` entries its copies became, by an increment at the repeated positions
        (``repeat(arange(n), r)``: counts of 0 give 0, one count is spread as numpy
        spreads it). Theano left it unimplemented; PyTensor computes it so."""
        if self.axis is None:
            flat = flatten(x)
            at = Repeat(0)(arange(shape_i(flat, 0)), r)
            g = _tensor.subtensor.inc_subtensor(zeros_like(flat)[at], gz)
            return reshape(g, shape(x), ndim=x.ndim)
        axis = self.axis % x.ndim
        front = [axis] + [d for d in range(x.ndim) if d != axis]  # the axis first
        back = [front.index(d) for d in range(x.ndim)]
        at = Repeat(0)(arange(shape_i(x, axis)), r)
        g = _tensor.subtensor.inc_subtensor(
            zeros_like(x).dimshuffle(front)[at], gz.dimshuffle(front)
        )
        return g.dimshuffle(back)


def repeat(x, repeats, axis=None):
    """``numpy.repeat``. One count (a scalar, or a list of one) is a broadcast and a
    reshape, as in Theano (no Repeat node); a vector of counts is a ``Repeat``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> m = tt.dmatrix("m")
    >>> repeat(m, 2, axis=1).eval({m: np.array([[1.0, 2.0]])}).tolist()
    [[1.0, 1.0, 2.0, 2.0]]
    """
    x, r = as_tensor_variable(x), as_tensor_variable(repeats)
    if r.ndim == 1 and r.type.shape[0] == 1:
        r = r[0]
    if r.ndim != 0 or r.dtype not in _REPEAT_COUNTS:
        return Repeat(axis)(x, repeats)  # a vector of counts, or Repeat's own error
    if axis is None:
        x, axis = flatten(x), 0
    if not -x.ndim <= axis < x.ndim:
        raise _AxisError(f"repeat: axis {axis} is out of range for {x}")
    axis %= x.ndim
    # x with a new axis after `axis`, broadcast to r there, the two merged
    shape = [shape_i(x, d) for d in range(x.ndim)]
    y = x.dimshuffle(*range(axis + 1), "x", *range(axis + 1, x.ndim))
    y = alloc(y, *shape[: axis + 1], r, *shape[axis + 1 :])
    shape[axis] = shape[axis] * r
    return reshape(y, shape, ndim=x.ndim)


# -- views ------------------------------------------------------------------------------


def transpose(x, axes=None):
    """Permute dimensions (reverse them by default).

    >>> from theano_dag import tensor as tt
    >>> transpose(tt.dtensor3("x"), (1, 0, 2)).owner.op
    InplaceDimShuffle{1,0,2}
    >>> transpose(tt.dmatrix("m")).name  # the reversal of a named x is named x.T
    'm.T'
    """
    x = as_tensor_variable(x)
    if axes is None:
        axes = list(range(x.ndim))[::-1]
    axes = [a % x.ndim if isinstance(a, (int, np.integer)) else a for a in axes]
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(
            f"transpose: axes {list(axes)} are not a permutation of the "
            f"{x.ndim} dimensions of {x}"
        )
    out = DimShuffle(x.broadcastable, axes)(x)
    if x.name and axes == list(range(x.ndim))[::-1]:
        out.name = f"{x.name}.T"
    return out


def dimshuffle(x, pattern):
    """``x.dimshuffle(pattern)``: see ``DimShuffle``."""
    x = as_tensor_variable(x)
    return DimShuffle(x.broadcastable, list(pattern))(x)


def squeeze(x):
    """Drop the broadcastable (length-1) dimensions of ``x``."""
    x = as_tensor_variable(x)
    return DimShuffle(x.broadcastable, [d for d in range(x.ndim) if not x.broadcastable[d]])(x)


# -- constant introspection -----------------------------------------------------------


class NotScalarConstantError(Exception):
    """Raised by ``get_scalar_constant_value`` when the value is not a known constant."""


class EmptyConstantError(NotScalarConstantError):
    """Raised by ``get_scalar_constant_value`` for a constant with no elements."""


# The scalar ops whose value on constant inputs get_scalar_constant_value computes
# (Theano's list: the arithmetic and comparisons that shape graphs are made of).
_FOLDED_SCALAR_OPS = (
    ts.Cast,
    ts.Switch,
    ts.NEQ,
    ts.EQ,
    ts.LT,
    ts.GT,
    ts.LE,
    ts.GE,
    ts.Sub,
    ts.Add,
    ts.Mod,
    ts.Mul,
    ts.IntDiv,
    ts.TrueDiv,
    ts.Maximum,  # and Minimum, its subclass
)


def _single_value(data):
    """The one value of an array whose elements are all equal."""
    arr = np.asarray(data)
    if arr.size == 0:
        raise EmptyConstantError(f"{data!r} has no elements: it has no scalar value")
    if arr.ndim and not (arr == arr.flat[0]).all():
        raise NotScalarConstantError(f"{data!r} is not a scalar constant: its elements differ")
    return arr.flat[0].copy() if arr.ndim else arr[()]


def _shape_value(x, i):
    """``x.shape[i]`` as a 0-d array when it is known at graph-build time, else None."""
    if isinstance(x, Constant):
        return np.asarray(np.shape(x.data)[i], dtype="int64")
    if x.type.shape[i] is not None:
        return np.asarray(x.type.shape[i], dtype="int64")
    return None


def _subtensor_scalar(v, max_recur):
    """For a 0-d ``v = base[idx]``: ``(value, None)`` when its value is known, ``(None,
    next)`` when the value is that of the variable ``next``, ``(None, None)`` otherwise."""
    node = v.owner
    base = node.inputs[0]
    try:
        idx = node.op.get_constant_idx(node.inputs)
    except NotScalarConstantError:
        return None, None
    if isinstance(base, Constant):
        return np.asarray(base.data[idx]).copy(), None
    if base.owner is None or len(idx) != 1:
        return None, None
    (k,) = idx
    op = base.owner.op
    if isinstance(op, MakeVector):
        inner = get_scalar_constant_value(base.owner.inputs[k], max_recur=max_recur)
        return np.asarray(inner, dtype=v.dtype), None
    if isinstance(op, Shape):
        return _shape_value(base.owner.inputs[0], k), None
    if isinstance(op, Join) and op.axis == 0 and base.ndim == 1:
        # the k-th element of a vector join: the element of the joined vector holding it
        k = k % sum(get_vector_length(j) for j in base.owner.inputs)
        for joined in base.owner.inputs:
            n = get_vector_length(joined)
            if k < n:
                return None, joined[k]
            k -= n
    if isinstance(op, DimShuffle) and base.owner.inputs[0].ndim == 0:
        return None, base.owner.inputs[0]  # a new axis over a scalar: the scalar itself
    return None, None


def get_scalar_constant_value(v, elemwise=True, only_process_constants=False, max_recur=10):
    """The number ``v`` is known to be at graph-build time, else NotScalarConstantError.

    Sees through DimShuffles, Allocs, ``fill``/``second``, Rebroadcasts, copies, views,
    scalar/tensor conversions and Asserts whose conditions are known true; reads shapes
    known statically (``Shape_i``, ``x.shape[i]``), an element of a constant, of a
    MakeVector or of a join of vectors; and, when ``elemwise``, computes casts, arithmetic
    and comparisons of constants. ``only_process_constants`` looks at constants only.
    (Theano's function, with its signature.)

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> int(get_scalar_constant_value(tt.constant(3).dimshuffle("x", "x")))
    3
    >>> int(get_scalar_constant_value(9 + tt.as_tensor([1.0, 2.0]).shape[0]))
    11
    >>> get_scalar_constant_value(tt.dvector("v")) # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    NotScalarConstantError: v is not a scalar constant
    """
    arrays = _tensor.arrays  # above this module: reached through the package at call time
    see_through = (
        Alloc,
        DimShuffle,
        Rebroadcast,
        DeepCopyOp,
        ViewOp,
        arrays.ScalarFromTensor,
        arrays.TensorFromScalar,
    )
    while True:
        if v is None:
            raise NotScalarConstantError("None is not a scalar constant")
        if isinstance(v, (bool, int, float, np.bool_, np.number)):
            return np.asarray(v)
        if isinstance(v, np.ndarray):
            return _single_value(v)
        if isinstance(v, Constant):
            if not isinstance(v.data, (bool, int, float, np.bool_, np.number, np.ndarray)):
                raise NotScalarConstantError(f"{v} is not a numeric constant")
            return _single_value(v.data)
        owner = getattr(v, "owner", None)
        if owner is None or only_process_constants or max_recur <= 0:
            break
        max_recur -= 1
        op = owner.op
        scalar_op = op.scalar_op if isinstance(op, Elemwise) else op
        if isinstance(op, see_through):
            v = owner.inputs[0]
        elif isinstance(scalar_op, ts.Second):
            v = owner.inputs[1]  # fill(shape_of, value): the value, whatever the shape
        elif isinstance(scalar_op, _FOLDED_SCALAR_OPS) and (elemwise or op is scalar_op):
            values = [get_scalar_constant_value(i, max_recur=max_recur) for i in owner.inputs]
            out_dtype = owner.outputs[0].type.dtype
            return scalar_op.compute([np.asarray(x) for x in values], [out_dtype])[0]
        elif isinstance(op, Shape_i):
            value = _shape_value(owner.inputs[0], op.i)
            if value is None:
                break
            return value
        elif isinstance(op, arrays.Assert):
            conds = [get_scalar_constant_value(c, max_recur=max_recur) for c in owner.inputs[1:]]
            if not all(np.ndim(c) == 0 and c != 0 for c in conds):
                break
            v = owner.inputs[0]
        elif isinstance(op, _tensor.subtensor.Subtensor) and v.ndim == 0:
            value, v_next = _subtensor_scalar(v, max_recur)
            if value is not None:
                return value
            if v_next is None:
                break
            v = v_next
        else:
            break
    raise NotScalarConstantError(f"{v} is not a scalar constant")


def get_vector_length(v) -> int:
    """The static length of the vector ``v``, or ValueError when it is not known. A shared
    vector's length is not static (``set_value`` may change it): a ValueError, where
    Theano took its current value's length and a later ``set_value`` of another length
    then gave wrong values.

    >>> from theano_dag import tensor as tt
    >>> get_vector_length(tt.dmatrix("x").shape), get_vector_length(tt.constant([1, 2, 3]))
    (2, 3)
    """
    v = as_tensor_variable(v)
    if v.ndim != 1:
        raise TypeError(f"get_vector_length: {v} must be a vector, got {v.ndim} dimensions")
    if v.type.shape[0] is not None:
        return v.type.shape[0]
    if isinstance(v, Constant):
        return len(v.data)
    if v.owner is not None and isinstance(v.owner.op, (MakeVector,)):
        return len(v.owner.inputs)
    if v.owner is not None and isinstance(v.owner.op, Shape):
        return v.owner.inputs[0].ndim
    if v.owner is not None and isinstance(v.owner.op, Join):
        return sum(get_vector_length(j) for j in v.owner.inputs)
    raise ValueError(f"get_vector_length: the length of {v} is not known statically")


_ = continuous_dtypes


def batched_dot(a, b):
    """``dot(a[i], b[i])`` for each ``i`` of the first (batch) axis: Theano's
    ``tensor.basic.batched_dot``. It is an einsum, built by
    ``theano_dag.tensor.contractions.batched_dot``; contractions sits on this module, so
    this name reaches it through the package at call time.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.dmatrix("b")
    >>> batched_dot(a, b).eval({a: np.ones((2, 3)), b: np.ones((2, 3))})
    array([3., 3.])
    """
    return _tensor.contractions.batched_dot(a, b)
