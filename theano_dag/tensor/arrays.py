"""More of ``theano.tensor``'s numpy-like vocabulary: ``ptp``, ``roll``, ``swapaxes``,
``power``, the stacking helpers, ``nonzero``/``flatnonzero``/``nonzero_values``, ``choose``,
``mgrid``/``ogrid``, ``inverse_permutation``, ``permute_row_elements``, ``smallest``/
``largest``, ``default``, ``extract_constant``, and the ops ``Assert``, ``Choose``,
``Nonzero``, ``AllocEmpty``, ``ScalarFromTensor`` and ``TensorFromScalar``.

Most are compositions of existing ops (so every engine runs them and their gradients come
from their parts); the ops with data-dependent shapes run numpy on the host.
"""

from __future__ import annotations

import builtins

import numpy as np

from theano_dag import scalar as ts
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.elemwise import broadcast_static_shape, reduce_spread_grad_to
from theano_dag.tensor.shape import broadcast_shapes, shape_i
from theano_dag.tensor.sort import argsort
from theano_dag.tensor.type import TensorType, continuous_dtypes, int_dtypes, uint_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "ptp",
    "roll",
    "swapaxes",
    "power",
    "horizontal_stack",
    "vertical_stack",
    "stacklists",
    "smallest",
    "largest",
    "Default",
    "default",
    "extract_constant",
    "Nonzero",
    "nonzero",
    "flatnonzero",
    "nonzero_values",
    "Choose",
    "ChooseListed",
    "choose",
    "mgrid",
    "ogrid",
    "inverse_permutation",
    "PermuteRowElements",
    "permute_row_elements",
    "MaxAndArgmax",
    "Mean",
    "Tri",
    "Assert",
    "assert_op",
    "AllocEmpty",
    "ScalarFromTensor",
    "scalar_from_tensor",
    "TensorFromScalar",
    "tensor_from_scalar",
]


def ptp(a, axis=None):
    """``max(a, axis) - min(a, axis)`` (``numpy.ptp``).

    >>> import numpy as np
    >>> ptp(np.array([[1.0, 5.0], [2.0, -1.0]]), axis=0).eval()
    array([1., 6.])
    """
    a = as_tensor_variable(a)
    return tm.max(a, axis=axis) - tm.min(a, axis=axis)


def roll(x, shift, axis=None):
    """``numpy.roll``: the entries of ``x`` shifted by ``shift`` along ``axis`` (the flattened
    array when None), those pushed off the end coming back at the start.

    >>> import numpy as np
    >>> roll(np.arange(5.0), 2).eval()
    array([3., 4., 0., 1., 2.])
    """
    x = as_tensor_variable(x)
    if axis is None:
        return roll(x.flatten(), shift, axis=0).reshape(x.shape)
    axis = axis + x.ndim if axis < 0 else axis
    n = shape_i(x, axis)
    shift = as_tensor_variable(shift)
    # The start of the kept tail: (-shift) mod n, computed on int64 (mod follows Python).
    start = tm.mod(-tb.cast(shift, "int64"), tm.maximum(n, 1))
    head = [slice(None)] * axis + [slice(start, None)]
    tail = [slice(None)] * axis + [slice(0, start)]
    return tb.concatenate([x[tuple(head)], x[tuple(tail)]], axis=axis)


def swapaxes(y, axis1, axis2):
    """``y`` with ``axis1`` and ``axis2`` exchanged (``numpy.swapaxes``).

    >>> from theano_dag import tensor as tt
    >>> swapaxes(tt.dtensor3("t"), 0, 2).owner.op.new_order
    (2, 1, 0)
    """
    y = as_tensor_variable(y)
    order = list(range(y.ndim))
    order[axis1], order[axis2] = order[axis2], order[axis1]
    return y.dimshuffle(order)


def power(x, y):
    """``x ** y`` (Theano's and numpy's ``power``)."""
    return tm.pow(x, y)


def horizontal_stack(*args):
    """Matrices joined side by side (``numpy.hstack`` of 2-d arrays)."""
    if len(args) < 2:
        raise ValueError("horizontal_stack: give at least two matrices")
    for a in args:
        if as_tensor_variable(a).ndim != 2:
            raise TypeError("horizontal_stack: every argument must be a matrix")
    return tb.concatenate(args, axis=1)


def vertical_stack(*args):
    """Matrices joined one above the other (``numpy.vstack`` of 2-d arrays)."""
    if len(args) < 2:
        raise ValueError("vertical_stack: give at least two matrices")
    for a in args:
        if as_tensor_variable(a).ndim != 2:
            raise TypeError("vertical_stack: every argument must be a matrix")
    return tb.concatenate(args, axis=0)


def stacklists(arg):
    """Nested lists of tensors (or scalars) stacked into one tensor, as ``numpy.array`` does.

    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dscalars("a", "b")
    >>> stacklists([[a, b], [b, a]]).eval({a: 1.0, b: 2.0})
    array([[1., 2.],
           [2., 1.]])
    """
    if isinstance(arg, (tuple, list)):
        return tb.stack([stacklists(a) for a in arg])
    return as_tensor_variable(arg)


def smallest(*args):
    """The elementwise minimum of all ``args``."""
    if len(args) == 2:
        a, b = args
        return tm.switch(tm.lt(a, b), a, b)
    return tm.min(tb.stack(args), axis=0)


def largest(*args):
    """The elementwise maximum of all ``args``."""
    if len(args) == 2:
        a, b = args
        return tm.switch(tm.gt(a, b), a, b)
    return tm.max(tb.stack(args), axis=0)


class Default(Op):
    """``x``, or a copy of ``default`` when ``x``'s value is None (Theano's ``Default``):
    both inputs have one type, the choice is made when the function runs (a call given
    None for an array runs on the ops' ``perform``, on the CPU engine too).

    >>> import theano_dag
    >>> from theano_dag import tensor as tt
    >>> x, y = tt.dscalars("x", "y")
    >>> f = theano_dag.function([x, y], default(x, y))
    >>> float(f(1.0, 2.0)), float(f(None, 2.0))
    (1.0, 2.0)
    """

    __props__ = ()
    view_map = {0: [0]}
    takes_none = True

    def make_node(self, x, default):
        x, default = as_tensor_variable(x), as_tensor_variable(default)
        if x.type != default.type:
            raise TypeError(
                f"default: both arguments must have one type, got {x.type} and {default.type}"
            )
        return Apply(self, [x, default], [default.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, default = inputs
        # The output is declared a view of x only: of default it is a copy.
        output_storage[0][0] = default.copy() if x is None else x

    def infer_shape(self, fgraph, node, input_shapes):
        # The shape of x: a call given None (whose shape is unknown) runs on the ops'
        # perform, which plans no shapes.
        return [input_shapes[0]]


def default(x, default):
    """``x``, or ``default`` when ``x`` is None: a Python None chooses ``default`` when the
    graph is built, a variable makes a ``Default`` node that chooses when the function
    runs (Theano's ``default``).

    >>> from theano_dag import tensor as tt
    >>> y = tt.dvector("y")
    >>> default(None, y) is y, default(tt.dvector("x"), y).owner.op
    (True, Default)
    """
    if x is None:
        return as_tensor_variable(default)
    return Default()(x, default)


def extract_constant(x, elemwise=True, only_process_constants=False):
    """``x``'s value (a numpy scalar or 0-d array) when it is known at graph-build time
    (``get_scalar_constant_value``), else ``x`` itself; a scalar (``theano.scalar``)
    variable comes back as a 0-d tensor (Theano's contract). The value is a copy: changing
    it leaves the constant as it was.

    >>> from theano_dag import tensor as tt
    >>> int(extract_constant(tt.constant(3).dimshuffle("x")))
    3
    """
    try:
        x = tb.get_scalar_constant_value(x, elemwise, only_process_constants)
    except tb.NotScalarConstantError:
        pass
    if isinstance(getattr(x, "type", None), ts.ScalarType):
        owner = x.owner
        x = (
            owner.inputs[0]
            if owner and isinstance(owner.op, ScalarFromTensor)
            else TensorFromScalar()(x)
        )
    return x


class Nonzero(Op):
    """The indices of the nonzero entries of ``a``, one int64 vector per dimension stacked
    in a matrix (``numpy.nonzero``); no gradient (the indices are integers)."""

    __props__ = ()

    def make_node(self, a):
        a = as_tensor_variable(a)
        if a.ndim == 0:
            raise ValueError("Nonzero: the input must have at least one dimension")
        return Apply(self, [a], [TensorType("int64", shape=(a.ndim, None))()])

    def perform(self, node, inputs, output_storage, params=None):
        (a,) = inputs
        output_storage[0][0] = np.asarray(np.nonzero(a), dtype="int64").reshape(a.ndim, -1)

    def infer_shape(self, fgraph, node, input_shapes):
        # one row per dimension; the count of nonzeros is known only from the value
        return [(node.inputs[0].ndim, None)]

    def L_op(self, inputs, outputs, output_grads):
        return [tb.zeros_like(inputs[0])]


def nonzero(a, return_matrix=False):
    """The indices of ``a``'s nonzero entries: a tuple of vectors (``numpy.nonzero``), or
    their matrix with ``return_matrix``.

    >>> import numpy as np
    >>> [v.eval().tolist() for v in nonzero(np.array([[0, 3], [4, 0]]))]
    [[0, 1], [1, 0]]
    """
    a = as_tensor_variable(a)
    matrix = Nonzero()(a)
    if return_matrix:
        return matrix
    return tuple(matrix[k] for k in range(a.ndim))


def flatnonzero(a):
    """The indices of the nonzero entries of ``a`` flattened (``numpy.flatnonzero``)."""
    a = as_tensor_variable(a)
    if a.ndim == 0:
        raise ValueError("flatnonzero: the input must have at least one dimension")
    return nonzero(a.flatten(), return_matrix=True)[0]


def nonzero_values(a):
    """The nonzero entries of ``a``, flattened (``a[numpy.nonzero(a)]``)."""
    a = as_tensor_variable(a)
    flat = a.flatten()
    return flat[flatnonzero(flat)]


class Choose(Op):
    """``numpy.choose(a, choices, mode)``: entry ``i`` from ``choices[a[i]]``.

    ``choices`` is one array (its first dimension lists the choices) or a list of arrays,
    broadcast against each other and ``a`` as numpy broadcasts them (the node's inputs
    are then ``a`` and each choice).
    """

    __props__ = ("mode",)
    listed = False  # the inputs: a and one array of choices (ChooseListed: each choice)

    def __init__(self, mode="raise"):
        if mode not in ("raise", "wrap", "clip"):
            raise ValueError(f"Choose: mode must be raise, wrap or clip, got {mode!r}")
        self.mode = mode

    def make_node(self, a, choices):
        a = as_tensor_variable(a)
        if a.dtype not in int_dtypes + uint_dtypes:
            raise TypeError(f"choose: the index array must be of integers, got {a.type}")
        if isinstance(choices, (list, tuple)):
            operands = [as_tensor_variable(c) for c in choices]
            if not operands:
                raise ValueError("choose: at least one choice is needed")
            shapes = [c.type.shape for c in operands]
            dtype = ts.upcast(*[c.dtype for c in operands])
            operands = [tb.cast(c, dtype) for c in operands]
        else:
            choices = as_tensor_variable(choices)
            if choices.ndim == 0:
                raise TypeError(f"choose: choices must have a dimension, got {choices.type}")
            operands = [choices]
            shapes = [choices.type.shape[1:]]
            dtype = choices.dtype
        shape = broadcast_static_shape([a.type.shape, *shapes], "choose")
        # A list of choices is another op (one choice listed and one array of choices
        # are different computations on the same inputs).
        op = ChooseListed(self.mode) if isinstance(choices, (list, tuple)) else self
        return Apply(op, [a, *operands], [TensorType(dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        a, *choices = inputs
        if not self.listed:
            choices = choices[0]
        out = np.choose(a, choices, mode=self.mode)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        # The broadcast of a's shape with the choices' (an array's without its first
        # dimension), right-aligned; a dimension known to be 1 takes the others' length.
        # Lengths that do not broadcast raise, as numpy's choose does (broadcast_shapes;
        # the largest would be 1 for a 0 and a 1, where numpy gives 0).
        a, *choices = node.inputs
        operands = [(input_shapes[0], a.type.shape, str(a))]
        if self.listed:
            operands += [
                (sh, c.type.shape, f"choice {k}")
                for k, (sh, c) in enumerate(zip(input_shapes[1:], choices))
            ]
        else:
            operands.append((input_shapes[1][1:], choices[0].type.shape[1:], "a choice"))
        shapes = [
            tuple(1 if st == 1 else n for n, st in zip(sym, static)) for sym, static, _ in operands
        ]
        names = [name for _, _, name in operands]
        return [tuple(broadcast_shapes(shapes, f"{self}: a and the choices", names))]

    def L_op(self, inputs, outputs, output_grads):
        # Each output entry is one entry of the choice its index names: that choice gets
        # the output gradient there (summed where it was broadcast), the others nothing.
        a, *choices = inputs
        (gz,) = output_grads
        n = len(choices) if self.listed else shape_i(choices[0], 0)
        # a spread to the output's shape, as numpy spread it (a length 1 along a
        # dimension its type does not declare broadcastable, which an Elemwise refuses)
        out = outputs[0]
        idx = tb.alloc(a, *[shape_i(out, d) for d in range(out.ndim)]) if a.ndim else a
        if self.mode == "wrap":
            idx = tm.mod(a, n)
        elif self.mode == "clip":
            idx = tm.clip(a, 0, n - 1)
        grads = [tb.zeros_like(a, dtype=config.floatX)]
        if self.listed:
            for k, c in enumerate(choices):
                g = tm.switch(tm.eq(idx, k), gz, tb.zeros_like(gz))
                grads.append(_reduce_to(g, c))
            return grads
        c = choices[0]
        nd = outputs[0].ndim
        ks = tb.arange(n).dimshuffle(0, *["x"] * nd)
        picked = tm.eq(idx.dimshuffle("x", *range(idx.ndim)), ks)
        g = tm.switch(picked, gz.dimshuffle("x", *range(nd)), tb.zeros_like(gz))
        return [*grads, _reduce_to(g, c, keep_first=True)]


def _reduce_to(g, x, keep_first=False):
    """``g`` summed down to ``x``'s shape, right-aligned (over the leading dimensions ``x``
    lacks, and where ``x`` was broadcast); ``keep_first``: its first dimension is
    ``x``'s own."""
    first = 1 if keep_first else 0
    lead = list(range(first, first + g.ndim - x.ndim))
    if lead:
        g = tm.sum(g, axis=lead)
    if x.dtype not in continuous_dtypes:
        return tb.zeros_like(x, dtype=config.floatX)
    return reduce_spread_grad_to(g, x)  # (numpy's choose spreads a length 1 at run time)


class ChooseListed(Choose):
    """:class:`Choose` of a list of choices, each one an input (``choose`` makes it)."""

    listed = True


def choose(a, choices, out=None, mode="raise"):
    """``numpy.choose``: each entry from the choice its index names.

    >>> import numpy as np
    >>> choose(np.array([0, 1, 0]), [np.array([1.0, 2, 3]), np.array([10.0, 20, 30])]).eval()
    array([ 1., 20.,  3.])
    """
    if out is not None:
        raise ValueError("choose: out= is not supported (graphs have no output buffers)")
    return Choose(mode)(a, choices)


class _Grid:
    """``mgrid``/``ogrid``: ``grid[0:3, 0:2]`` gives one tensor per slice, as numpy's."""

    def __init__(self, sparse):
        self.sparse = sparse

    def __getitem__(self, key):
        if not isinstance(key, tuple):  # one slice: its range itself, as numpy's
            return self[(key,)][0]
        ranges = []
        for k in key:
            if not isinstance(k, slice):
                raise TypeError("mgrid/ogrid take slices, as mgrid[0:3, 0:2]")
            step = 1 if k.step is None else k.step
            ranges.append(tb.arange(0 if k.start is None else k.start, k.stop, step))
        n = len(ranges)
        out = []
        for i, r in enumerate(ranges):
            pattern = ["x"] * n
            pattern[i] = 0
            v = r.dimshuffle(pattern)
            if not self.sparse:
                v = v * tb.ones_like(ranges[0].dimshuffle([0 if j == 0 else "x" for j in range(n)]))
                for j in range(1, n):
                    pat = ["x"] * n
                    pat[j] = 0
                    v = v * tb.ones_like(ranges[j].dimshuffle(pat))
            out.append(v)
        return out


mgrid = _Grid(sparse=False)
ogrid = _Grid(sparse=True)


def inverse_permutation(perm):
    """The permutation that undoes ``perm`` (its argsort), along the last axis.

    >>> import numpy as np
    >>> inverse_permutation(np.array([2, 0, 1])).eval()
    array([1, 2, 0])
    """
    perm = as_tensor_variable(perm)
    if perm.dtype not in int_dtypes + uint_dtypes:
        raise TypeError(f"inverse_permutation: expected integers, got {perm.type}")
    return tb.cast(argsort(perm, axis=-1), perm.dtype)


class PermuteRowElements(Op):
    """``PermuteRowElements()(x, y, inverse)``: each row (last axis) of ``x`` permuted by
    the matching row of ``y`` (``out[..., i] = x[..., y[..., i]]``; with ``inverse``,
    ``out[..., y[..., i]] = x[..., i]``). The leading dimensions broadcast as in Elemwise."""

    __props__ = ()

    def make_node(self, x, y, inverse):
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        inverse = as_tensor_variable(inverse)
        if y.dtype not in int_dtypes + uint_dtypes:
            raise TypeError(f"PermuteRowElements: y must be integers, got {y.type}")
        if inverse.ndim != 0:
            raise TypeError("PermuteRowElements: inverse must be a scalar")
        nd = builtins.max(x.ndim, y.ndim)
        bx = (True,) * (nd - x.ndim) + x.broadcastable
        by = (True,) * (nd - y.ndim) + y.broadcastable
        bcast = tuple(a and b for a, b in zip(bx[:-1], by[:-1])) + (bx[-1] and by[-1],)
        out = TensorType(x.dtype, shape=tuple(1 if b else None for b in bcast))()
        return Apply(self, [x, y, inverse], [out])

    def perform(self, node, inputs, output_storage, params=None):
        x, y, inverse = inputs
        nd = builtins.max(x.ndim, y.ndim)
        x = x.reshape((1,) * (nd - x.ndim) + x.shape)
        y = y.reshape((1,) * (nd - y.ndim) + y.shape)
        lead = np.broadcast_shapes(x.shape[:-1], y.shape[:-1])
        if x.shape[-1] != y.shape[-1] and 1 not in (x.shape[-1], y.shape[-1]):
            raise ValueError(
                f"PermuteRowElements: rows of length {x.shape[-1]} and {y.shape[-1]} differ"
            )
        n = builtins.max(x.shape[-1], y.shape[-1])
        xb = np.broadcast_to(x, lead + (n,))
        yb = np.broadcast_to(y, lead + (n,))
        if inverse:
            # zeros where no entry lands: a row of y that repeats an index (no
            # permutation) leaves places unwritten, which were whatever memory held
            out = np.zeros(lead + (n,), dtype=x.dtype)
            np.put_along_axis(out, yb, xb, axis=-1)
        else:
            out = np.take_along_axis(xb, yb, axis=-1)
        output_storage[0][0] = np.ascontiguousarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        sx, sy = (tuple(s) for s in input_shapes[:2])
        nd = node.outputs[0].ndim
        sx = (1,) * (nd - len(sx)) + sx
        sy = (1,) * (nd - len(sy)) + sy
        # numpy's broadcasting, run-time 1s included: a length 1 takes the other one
        return [tuple(tm.switch(tm.eq(a, 1), b, a) for a, b in zip(sx, sy))]

    def L_op(self, inputs, outputs, output_grads):
        x, y, inverse = inputs
        (gz,) = output_grads
        # The gradient goes back through the opposite permutation, then is summed over
        # the dimensions x was broadcast along.
        gx = PermuteRowElements()(gz, y, tm.eq(inverse, 0))
        nd_lead = gx.ndim - x.ndim
        if nd_lead:
            gx = tm.sum(gx, axis=list(range(nd_lead)))
        axes = [d for d in range(x.ndim) if x.broadcastable[d] and not gx.broadcastable[d]]
        if axes:
            gx = tm.sum(gx, axis=axes, keepdims=True)
        return [gx, disconnected_type(), disconnected_type()]

    def connection_pattern(self, node):
        return [[True], [False], [False]]


def permute_row_elements(x, y, inverse=0):
    """Each row of ``x`` permuted by the matching row of ``y`` (``PermuteRowElements``).

    >>> import numpy as np
    >>> x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    >>> permute_row_elements(x, np.array([[2, 0, 1], [0, 2, 1]])).eval()
    array([[3., 1., 2.],
           [4., 6., 5.]])
    """
    return PermuteRowElements()(x, y, int(inverse) if isinstance(inverse, bool) else inverse)


class Assert(Op):
    """``Assert()(value, *conditions)``: ``value`` itself (a view), once every condition is
    true at run time; else ``AssertionError`` with ``msg``. A constant true condition is
    dropped when the graph is built, as in Theano.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> Assert("x must be positive")(x, tt.all(x > 0)).eval({x: np.ones(2)})
    array([1., 1.])
    """

    __props__ = ("msg",)
    view_map = {0: [0]}

    def __init__(self, msg="Theano Assert failed!"):
        self.msg = msg

    def make_node(self, value, *conds):
        value = as_tensor_variable(value)
        conds = [as_tensor_variable(c) for c in conds]
        for c in conds:
            if c.ndim != 0:
                raise TypeError(f"Assert: each condition must be a scalar, got {c.type}")
        return Apply(self, [value, *conds], [value.type()])

    def perform(self, node, inputs, output_storage, params=None):
        value, *conds = inputs
        if not builtins.all(bool(c) for c in conds):
            raise AssertionError(self.msg)
        output_storage[0][0] = value

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def L_op(self, inputs, outputs, output_grads):
        return [output_grads[0]] + [disconnected_type() for _ in inputs[1:]]


assert_op = Assert()


class AllocEmpty(Op):
    """An array of ``dtype`` and the given shape whose values are not set (``numpy.empty``):
    for a buffer that is written before it is read."""

    __props__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = np.dtype(config.floatX if dtype == "floatX" else dtype).name

    def make_node(self, *shape):
        dims = [as_tensor_variable(s) for s in shape]
        for d in dims:
            if d.ndim != 0 or d.dtype not in int_dtypes + uint_dtypes:
                raise TypeError(f"AllocEmpty: each dimension must be an int scalar, got {d.type}")
        static = tuple(int(d.data) if isinstance(d, Constant) else None for d in dims)
        return Apply(self, dims, [TensorType(self.dtype, shape=static)()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.empty(tuple(int(s) for s in inputs), dtype=self.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(node.inputs)]

    def connection_pattern(self, node):
        return [[False] for _ in node.inputs]

    def L_op(self, inputs, outputs, output_grads):
        return [disconnected_type() for _ in inputs]


class TensorFromScalar(Op):
    """A 0-d tensor holding a scalar (``theano.scalar``) variable's value."""

    __props__ = ()

    def make_node(self, s):
        s = ts.as_scalar(s)
        return Apply(self, [s], [TensorType(s.type.dtype, shape=())()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(inputs[0], dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]

    def grad(self, inputs, output_grads):
        # The output's gradient as a scalar; an integer scalar's gradient is a zero of
        # floatX (Theano's), as for every integer input.
        (s,) = inputs
        if s.type.dtype in continuous_dtypes:
            return [scalar_from_tensor(output_grads[0])]
        return [ts.constant(0, dtype=config.floatX)]


class ScalarFromTensor(Op):
    """The scalar (``theano.scalar``) variable of a 0-d tensor's value."""

    __props__ = ()

    def make_node(self, t):
        t = as_tensor_variable(t)
        if t.ndim != 0:
            raise TypeError(f"ScalarFromTensor: expected a 0-d tensor, got {t.type}")
        return Apply(self, [t], [ts.get_scalar_type(t.dtype)()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(inputs[0]).flatten()[0]

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]

    def grad(self, inputs, output_grads):
        # The scalar's gradient as a 0-d tensor; an integer tensor's gradient is zero.
        (t,) = inputs
        if t.type.dtype in continuous_dtypes:
            return [tensor_from_scalar(output_grads[0])]
        return [tb.zeros_like(t, dtype=config.floatX)]


tensor_from_scalar = TensorFromScalar()
scalar_from_tensor = ScalarFromTensor()


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axis = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    return tuple(sorted(int(a) % builtins.max(ndim, 1) for a in axis))


class MaxAndArgmax(Op):
    """The maximum over ``axis`` (a tuple of axes; None: all) and where it is, as one op
    with two outputs (Theano's); the index is into the reduced axes flattened in order.
    ``max_and_argmax`` builds the same values from ``max`` and ``argmax``."""

    __props__ = ("axis",)

    def __init__(self, axis=None):
        self.axis = None if axis is None else tuple(axis)

    def make_node(self, x):
        x = as_tensor_variable(x)
        axes = _axes(self.axis, x.ndim)
        shape = tuple(s for d, s in enumerate(x.type.shape) if d not in axes)
        return Apply(
            self, [x], [TensorType(x.dtype, shape=shape)(), TensorType("int64", shape=shape)()]
        )

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        axes = _axes(self.axis, x.ndim)
        keep = [d for d in range(x.ndim) if d not in axes]
        moved = np.transpose(x, keep + list(axes))
        # the reduced length spelled out: -1 cannot be solved when a kept axis is empty
        reduced = int(np.prod(moved.shape[len(keep) :]))
        flat = moved.reshape(moved.shape[: len(keep)] + (reduced,))
        output_storage[0][0] = np.asarray(np.max(flat, axis=-1), dtype=x.dtype)
        output_storage[1][0] = np.asarray(np.argmax(flat, axis=-1), dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        axes = _axes(self.axis, node.inputs[0].ndim)
        shape = tuple(s for d, s in enumerate(input_shapes[0]) if d not in axes)
        return [shape, shape]

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        g_max = output_grads[0]
        axes = _axes(self.axis, x.ndim)
        pattern = []
        k = 0
        for d in range(x.ndim):
            if d in axes:
                pattern.append("x")
            else:
                pattern.append(k)
                k += 1
        if isinstance(g_max.type, TensorType):
            mx = outputs[0].dimshuffle(pattern)
            return [tm.eq(x, mx) * g_max.dimshuffle(pattern)]
        return [tb.zeros_like(x)]


class Mean(Op):
    """The mean over ``axis`` (None: all entries) as one op, in float64 for integer input
    as numpy does; the gradient is spread evenly over the averaged entries."""

    __props__ = ("axis",)

    def __init__(self, axis=None):
        self.axis = None if axis is None else tuple(np.atleast_1d(axis).tolist())

    def make_node(self, x):
        x = as_tensor_variable(x)
        axes = _axes(self.axis, x.ndim)
        shape = tuple(s for d, s in enumerate(x.type.shape) if d not in axes)
        dtype = x.dtype if x.dtype.startswith("float") else "float64"
        return Apply(self, [x], [TensorType(dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        out = np.mean(x, axis=_axes(self.axis, x.ndim), dtype=node.outputs[0].dtype)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        axes = _axes(self.axis, node.inputs[0].ndim)
        return [tuple(s for d, s in enumerate(input_shapes[0]) if d not in axes)]

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        axes = _axes(self.axis, x.ndim)
        count = tm.prod([shape_i(x, a) for a in axes]) if axes else tb.constant(1)
        pattern, k = [], 0
        for d in range(x.ndim):
            if d in axes:
                pattern.append("x")
            else:
                pattern.append(k)
                k += 1
        g = output_grads[0].dimshuffle(pattern) / tb.cast(count, output_grads[0].dtype)
        return [tb.cast(g * tb.ones_like(x, dtype=g.dtype), x.dtype)]


class Tri(Op):
    """``numpy.tri(N, M, k)``: ones on and below diagonal ``k`` of an ``N x M`` matrix, with
    symbolic ``N``, ``M`` and ``k`` (``extra_ops.tri`` builds the same from ``arange``)."""

    __props__ = ("dtype",)
    takes_none = True  # an M of None is N, as numpy reads it

    def __init__(self, dtype=None):
        self.dtype = np.dtype(dtype or config.floatX).name

    def make_node(self, n, m, k):
        ins = [as_tensor_variable(v) for v in (n, m, k)]
        for name, v in zip("NMk", ins):
            if v.ndim != 0 or v.dtype not in int_dtypes + uint_dtypes:
                raise TypeError(f"Tri: {name} must be an integer scalar, got {v.type}")
        return Apply(self, ins, [TensorType(self.dtype, shape=(None, None))()])

    def perform(self, node, inputs, output_storage, params=None):
        n, m, k = inputs
        # m given as None (Theano lets a function's input be None) is numpy's: m = n
        m = None if m is None else int(m)
        output_storage[0][0] = np.tri(int(n), m, int(k), dtype=self.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [(node.inputs[0], node.inputs[1])]

    def connection_pattern(self, node):
        return [[False]] * 3

    def L_op(self, inputs, outputs, output_grads):
        return [disconnected_type() for _ in inputs]
