"""Indexing: ``x[...]``, ``set_subtensor``, ``inc_subtensor`` (``theano.tensor.subtensor``).

- ``Subtensor``: basic indexing (integers and slices); a view of the input;
- ``AdvancedSubtensor1``: ``x[int_vector]`` along the first axis (``take``);
- ``AdvancedSubtensor``: any other numpy fancy indexing (int arrays, bool masks);
- their ``Inc`` counterparts write or add a value into a copy (or, inplace, the input).

The op stores the *structure* of the index (``idx_list``); the integer values are
inputs, so a symbolic ``x[i:j]`` and a constant ``x[1:3]`` use the same op class.
"""

from __future__ import annotations

import copy as _copy

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import (
    alloc,
    arange,
    get_scalar_constant_value,
    get_vector_length,
    zeros_like,
)
from theano_dag.tensor.elemwise import DimShuffle, reduce_spread_grad_to
from theano_dag.tensor.math import sum as tsum
from theano_dag.tensor.shape import (
    EqualLengths,
    Reshape,
    broadcast_shapes,
    checked_shape,
    in_bounds_shape,
    reshape,
    shape_i,
    spread_compared,
)
from theano_dag.tensor.type import TensorType, discrete_dtypes, int_dtypes, uint_dtypes
from theano_dag.tensor.type_other import MakeSlice, NoneConst, SliceConstant, SliceType
from theano_dag.tensor.variable import as_tensor_variable, constant

__all__ = [
    "Subtensor",
    "IncSubtensor",
    "AdvancedSubtensor1",
    "AdvancedIncSubtensor1",
    "AdvancedSubtensor",
    "AdvancedIncSubtensor",
    "getitem",
    "set_subtensor",
    "inc_subtensor",
    "take",
    "slice_length",
    "advanced_inc_subtensor",
    "advanced_inc_subtensor1",
    "advanced_set_subtensor",
    "advanced_set_subtensor1",
    "get_canonical_form_slice",
    "basic_shape",
    "indexed_result_shape",
]

_INTS = int_dtypes + uint_dtypes


def _disc():
    return disconnected_type()


def _int_scalar(v, what):
    if isinstance(v, (int, np.integer)) and not -(2**63) <= int(v) < 2**63:
        # Theano casts Python ints to int64: a bound beyond it is an error, not clipped
        raise ValueError(f"{what}: the index {v} does not fit in int64")
    v = as_tensor_variable(v)
    if v.ndim != 0 or v.dtype not in _INTS:
        raise TypeError(
            f"{what}: indices must be integers (or integer scalars), got {v} of " f"type {v.type}"
        )
    return v


def _split_index(args, who):
    """``(idx_list, inputs)`` for a basic index made of ints and slices."""
    idx_list, inputs = [], []
    for a in args:
        if isinstance(a, slice):
            entry = ["slice"]
            for part in (a.start, a.stop, a.step):
                if part is None:
                    entry.append(False)
                else:
                    entry.append(True)
                    inputs.append(_int_scalar(part, who))
            idx_list.append(tuple(entry))
        else:
            idx_list.append(("int",))
            inputs.append(_int_scalar(a, who))
    return tuple(idx_list), inputs


def _rebuild(idx_list, values):
    """The numpy index tuple from ``idx_list`` and the runtime input values."""
    it = iter(values)
    out = []
    for entry in idx_list:
        kind = entry[0]
        if kind == "int":
            out.append(int(next(it)))
        elif kind == "slice":
            parts = [int(next(it)) if present else None for present in entry[1:]]
            out.append(slice(*parts))
        elif kind == "none":
            out.append(None)
        elif kind == "slicevar":  # a slice given when the function runs
            out.append(next(it))
        else:  # "tensor"
            out.append(np.asarray(next(it)))
    return tuple(out)


def index_is_basic(index) -> bool:
    """Whether numpy's ``x[index]`` is basic indexing, a view of ``x``: an index of ints,
    slices, None and 0-d integer arrays only (an AdvancedSubtensor given a symbolic slice,
    or a 0-d index, must copy what numpy gives it, since the op declares no view).

    >>> index_is_basic((slice(1, 3), np.array(0))), index_is_basic((np.array([0, 1]),))
    (True, False)
    """
    return not any(isinstance(i, np.ndarray) and (i.ndim > 0 or i.dtype == bool) for i in index)


def _idx_str(idx_list):
    parts = []
    for e in idx_list:
        if e[0] == "int":
            parts.append("int64")
        elif e[0] == "slice":
            parts.append(":".join("int64" if p else "" for p in e[1:]))
        elif e[0] == "none":
            parts.append("newaxis")
        elif e[0] == "slicevar":
            parts.append("slice")
        else:
            parts.append("array")
    return ", ".join(parts)


def _const_int(v):
    if isinstance(v, Constant):
        return int(v.data)
    return None


def slice_length(n, start, stop, step):
    """Symbolic ``len(range(n)[start:stop:step])``; parts may be None, ints or scalars.

    >>> int(slice_length(10, 2, None, 3))
    3
    """

    vals = [_const_int(v) if isinstance(v, Variable) else v for v in (n, start, stop, step)]
    if (
        all(v is not None or p is None for v, p in zip(vals, (n, start, stop, step)))
        and vals[0] is not None
    ):
        return len(range(vals[0])[slice(*vals[1:])])
    step = 1 if step is None else step

    def norm(v, lo, hi):
        v = as_tensor_variable(v)
        return tm.clip(tm.switch(tm.lt(v, 0), v + n, v), lo, hi)

    def positive():
        a = 0 if start is None else norm(start, 0, n)
        b = n if stop is None else norm(stop, 0, n)
        return tm.maximum(tm.int_div(b - a + step - 1, step), 0)

    def negative():
        a = n - 1 if start is None else norm(start, -1, n - 1)
        b = -1 if stop is None else norm(stop, -1, n - 1)
        return tm.maximum(tm.int_div(a - b - step - 1, -step), 0)

    s = _const_int(step) if isinstance(step, Variable) else step
    if s is not None:
        if s == 0:
            raise ValueError("slice step cannot be zero")
        return positive() if s > 0 else negative()
    return tm.switch(tm.gt(step, 0), positive(), negative())


class Subtensor(Op):
    """Basic indexing ``x[idx]`` with integers and slices; the output is a view.

    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> y = x[1:, 0]
    >>> str(y.owner.op), y.type
    ('Subtensor{int64::, int64}', TensorType(float64, vector))
    """

    __props__ = ("idx_list",)
    view_map = {0: [0]}

    def __init__(self, idx_list):
        self.idx_list = tuple(tuple(e) for e in idx_list)

    def __str__(self):
        return f"{type(self).__name__}{{{_idx_str(self.idx_list)}}}"

    __repr__ = __str__

    def _out_shape(self, x, idx_inputs):
        if len(self.idx_list) > x.ndim:
            raise IndexError(
                f"{self}: too many indices for {x}: it has {x.ndim} dimensions "
                f"but {len(self.idx_list)} were indexed"
            )
        it = iter(idx_inputs)
        shape = []
        for d, entry in enumerate(self.idx_list):
            if entry[0] == "int":
                next(it)
                continue
            parts = [next(it) if present else None for present in entry[1:]]
            n = x.type.shape[d]
            if all(p is None for p in parts):
                shape.append(n)
                continue
            consts = [None if p is None else _const_int(p) for p in parts]
            if n is not None and all(c is not None or p is None for c, p in zip(consts, parts)):
                shape.append(len(range(n)[slice(*consts)]))
            else:
                shape.append(None)
        shape.extend(x.type.shape[len(self.idx_list) :])
        return tuple(shape)

    def make_node(self, x, *idx_inputs):
        x = as_tensor_variable(x)
        idx_inputs = [_int_scalar(i, str(self)) for i in idx_inputs]
        return Apply(
            self, [x, *idx_inputs], [TensorType(x.dtype, shape=self._out_shape(x, idx_inputs))()]
        )

    def get_constant_idx(self, inputs):
        """The numpy index of a node with ``inputs`` (``[x, *index values]``) when every
        index value is known at graph-build time, else NotScalarConstantError (Theano's).

        >>> from theano_dag import tensor as tt
        >>> y = tt.dmatrix("x")[1:, tt.constant(2) + 1]
        >>> y.owner.op.get_constant_idx(y.owner.inputs)
        (slice(1, None, None), 3)
        """
        values = [int(get_scalar_constant_value(i)) for i in inputs[1:]]
        return _rebuild(self.idx_list, values)

    def perform(self, node, inputs, output_storage, params=None):
        x, *vals = inputs
        out = x[_rebuild(self.idx_list, vals)]
        output_storage[0][0] = out if isinstance(out, np.ndarray) else np.asarray(out)

    def infer_shape(self, fgraph, node, input_shapes):
        x, *idx = node.inputs
        it = iter(idx)
        out, indexed = [], []
        for d, entry in enumerate(self.idx_list):
            if entry[0] == "int":
                indexed.append((next(it), input_shapes[0][d], f"{x} along dimension {d}"))
                continue
            parts = [next(it) if present else None for present in entry[1:]]
            if all(p is None for p in parts):
                out.append(input_shapes[0][d])
            else:
                out.append(slice_length(input_shapes[0][d], *parts))
        out.extend(input_shapes[0][len(self.idx_list) :])
        return [in_bounds_shape(tuple(out), indexed, str(self))]

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def L_op(self, inputs, outputs, output_grads):
        x, *idx = inputs
        (gz,) = output_grads
        if x.dtype in discrete_dtypes:
            return [zeros_like(x, config.floatX)] + [_disc() for _ in idx]
        gx = IncSubtensor(self.idx_list)(zeros_like(x), gz, *idx)
        return [gx] + [_disc() for _ in idx]


class ValueDimensionsError(ValueError, TypeError):
    """The value set into (or added to) an indexed result has more dimensions than it: a
    ValueError, and the TypeError Theano raised."""


def _y_to_result(y, result_type, who):
    y = as_tensor_variable(y)
    if y.ndim > result_type.ndim:
        raise ValueDimensionsError(
            f"{who}: the value {y} has {y.ndim} dimensions, more than the "
            f"{result_type.ndim} of the indexed result"
        )
    return y


def _reduce_y_grad(g, y):
    """The gradient wrt ``y`` from the gradient of the indexed region.

    An integer ``y`` (``set_subtensor(v[1:], 0)``) gets a float zero, as in Theano: a
    gradient is never integer-valued, and an integer cannot move infinitesimally.
    """
    if y.dtype in discrete_dtypes:
        return zeros_like(y, config.floatX)
    lead = g.ndim - y.ndim
    if lead:
        g = tsum(g, axis=list(range(lead)))
    return reduce_spread_grad_to(g, y)


def _last_writes(take, put, x):
    """Where the indexed region's each element is the one ``x`` keeps after a set: with
    repeated indices only the last write of a position stays (numpy's rule, which every
    engine follows), so only it passes ``y``'s gradient. ``take(v)`` is ``v[index]``,
    ``put(v, w)`` is ``set_subtensor(v[index], w)``."""
    region = take(x)
    n = tm.prod(region.shape)
    pos = reshape(arange(n, dtype="int64"), region.shape, ndim=region.ndim)
    last = put(alloc(constant(np.int64(-1)), *[shape_i(x, k) for k in range(x.ndim)]), pos)
    return tm.eq(take(last), pos)


def writes_once(idx):
    """Whether the advanced index ``idx`` (the index inputs of a node) is known, when the
    graph is built, to name each position at most once: boolean masks, or one constant
    integer array of distinct entries of one sign (0 and -3 are one row of 3 rows). Then
    every write of a set is the one that stays: its read-back is the value set, and its
    gradient needs no :func:`_last_writes` mask.

    >>> from theano_dag import tensor as tt
    >>> writes_once([tt.constant([2, 0])]), writes_once([tt.constant([0, -3])])
    (True, False)
    """
    arrays = [v for v in idx if isinstance(v, Variable) and getattr(v.type, "ndim", 0) > 0]
    if all(v.dtype == "bool" for v in arrays):
        return True
    if len(arrays) != 1 or not isinstance(arrays[0], Constant):
        return False
    a = np.asarray(arrays[0].data)
    return bool(
        a.dtype.kind in "iu" and np.unique(a).size == a.size and ((a >= 0).all() or (a < 0).all())
    )


def _discrete_inc_grads(x, y, idx):
    """An integer result carries no gradient: float zeros for ``x`` and ``y``."""
    gy = zeros_like(y, config.floatX if y.dtype in discrete_dtypes else None)
    return [zeros_like(x, config.floatX), gy] + [_disc() for _ in idx]


# The lengths an IncSubtensor's shape compares: the part of x written and y's.
_PART_NAMES = ("the part's length", "the value's length")


def _checked_write(who, out, part, y, y_shape):
    """``out`` (the shape of x written), checked where ``y`` (of shape ``y_shape``) does
    not fit the part of x it is written into, of shape ``part``: numpy broadcasts y to
    the part (a length 1 of y spreads, missing dimensions go first) and refuses any other
    length that differs. ``who`` names the op in the error. Also the dimensions of the
    part compared (a check among the part's lengths is carried along with them)."""
    compared = set()
    for k, (b, length) in enumerate(zip(y.type.broadcastable, y_shape)):
        d = len(part) - y.ndim + k
        if b or d < 0:
            continue
        what = f"{who} along dimension {d} of the part written"
        spread = spread_compared(part[d], length, what, _PART_NAMES)
        if spread is not None:
            out = checked_shape(out, [part[d], spread], what, _PART_NAMES)
            compared.add(d)
    return out, compared


class IncSubtensor(Op):
    """``x`` with ``x[idx]`` replaced by (``set_instead_of_inc``) or incremented by ``y``."""

    __props__ = ("idx_list", "inplace", "set_instead_of_inc")

    def __init__(self, idx_list, inplace=False, set_instead_of_inc=False):
        self.idx_list = tuple(tuple(e) for e in idx_list)
        self.inplace = inplace
        self.set_instead_of_inc = set_instead_of_inc
        self.destroy_map = {0: [0]} if inplace else {}

    def __str__(self):
        name = "SetSubtensor" if self.set_instead_of_inc else "IncSubtensor"
        return f"{name}{{{'inplace, ' if self.inplace else ''}{_idx_str(self.idx_list)}}}"

    __repr__ = __str__

    def make_node(self, x, y, *idx_inputs):
        x = as_tensor_variable(x)
        idx_inputs = [_int_scalar(i, str(self)) for i in idx_inputs]
        sub_type = Subtensor(self.idx_list).make_node(x, *idx_inputs).outputs[0].type
        y = _y_to_result(y, sub_type, str(self))
        return Apply(self, [x, y, *idx_inputs], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y, *vals = inputs
        out = x if self.inplace else x.copy()
        idx = _rebuild(self.idx_list, vals)
        if self.set_instead_of_inc:
            out[idx] = y
        else:
            out[idx] += np.asarray(y, dtype=out.dtype) if out.dtype != np.asarray(y).dtype else y
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        # x's shape, checked where y does not fit the part x[idx] it is written into (a
        # length 1 of y spreads; numpy refuses any other that differs).
        x, y, *idx = node.inputs
        out = tuple(input_shapes[0])
        if not y.ndim or all(y.type.broadcastable):
            return [out]
        part = Subtensor(self.idx_list).infer_shape(fgraph, Apply(None, [x, *idx], []), [out])[0]
        return [_checked_write(str(self), out, part, y, input_shapes[1])[0]]

    def connection_pattern(self, node):
        return [[True], [True]] + [[False]] * (len(node.inputs) - 2)

    def L_op(self, inputs, outputs, output_grads):
        x, y, *idx = inputs
        (gz,) = output_grads
        if x.dtype in discrete_dtypes:
            return _discrete_inc_grads(x, y, idx)
        gx = gz
        if self.set_instead_of_inc:
            gx = IncSubtensor(self.idx_list, set_instead_of_inc=True)(gz, 0, *idx)
        gy = _reduce_y_grad(Subtensor(self.idx_list)(gz, *idx), y)
        return [gx, gy] + [_disc() for _ in idx]


# The sparse gradient of reading rows (``AdvancedSubtensor1(sparse_grad=True)``): the
# sparse floor, above this one, registers its ``construct_sparse_from_list`` here when it
# is imported (``import theano_dag`` imports it).
SPARSE_ROWS_GRAD = []


class AdvancedSubtensor1(Op):
    """``x[ilist]`` for an integer vector ``ilist`` (rows of ``x``; ``numpy.take`` axis 0).

    With ``sparse_grad=True`` (Theano's ``theano.sparse_grad(x[ilist])``) the gradient
    with respect to a matrix ``x`` is a sparse (CSC) matrix holding only the rows read,
    instead of a dense matrix of zeros elsewhere. As in Theano the flag is not one of the
    op's properties: it changes the gradient only, not the value.

    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> x[tt.lvector("i")].owner.op
    AdvancedSubtensor1
    """

    __props__ = ()

    def __init__(self, sparse_grad=False):
        self.sparse_grad = bool(sparse_grad)

    def make_node(self, x, ilist):
        x, ilist = as_tensor_variable(x), as_tensor_variable(ilist)
        if ilist.ndim != 1 or ilist.dtype not in _INTS:
            raise TypeError(
                f"AdvancedSubtensor1: the index must be an integer vector, got " f"{ilist.type}"
            )
        if x.ndim == 0:
            raise IndexError(f"AdvancedSubtensor1: cannot index {x}, a 0-d tensor")
        shape = (ilist.type.shape[0],) + x.type.shape[1:]
        return Apply(self, [x, ilist], [TensorType(x.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        x, i = inputs
        output_storage[0][0] = x[i]

    def infer_shape(self, fgraph, node, input_shapes):
        x, ilist = node.inputs
        out = (input_shapes[1][0],) + tuple(input_shapes[0][1:])
        indexed = [(ilist, input_shapes[0][0], f"{x} along dimension 0")]
        return [in_bounds_shape(out, indexed, str(self))]

    def connection_pattern(self, node):
        return [[True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        x, i = inputs
        if self.sparse_grad:
            if x.ndim != 2:
                raise TypeError(
                    "AdvancedSubtensor1: a sparse gradient needs a matrix (sparse matrices "
                    f"have 2 dimensions), but {x} has {x.ndim}"
                )
            if x.dtype in discrete_dtypes:
                raise TypeError(f"AdvancedSubtensor1: no sparse gradient for {x.type}")
            if not SPARSE_ROWS_GRAD:
                raise NotImplementedError(
                    "AdvancedSubtensor1: the sparse gradient needs theano_dag.sparse "
                    "(import theano_dag)"
                )
            return [SPARSE_ROWS_GRAD[0](x, output_grads[0], i), _disc()]
        if x.dtype in discrete_dtypes:
            return [zeros_like(x, config.floatX), _disc()]
        return [AdvancedIncSubtensor1()(zeros_like(x), output_grads[0], i), _disc()]


def sparse_grad(var):
    """``var`` (``x[ilist]``, an ``AdvancedSubtensor1`` of a matrix) made again with a
    sparse gradient (Theano's ``theano.sparse_grad``): the gradient with respect to ``x``
    is a CSC matrix holding the rows read, not a dense matrix of zeros elsewhere.

    >>> import numpy as np, theano_dag
    >>> from theano_dag import tensor as tt
    >>> m, i = tt.dmatrix("m"), tt.lvector("i")
    >>> g = theano_dag.grad(sparse_grad(m[i]).sum(), m)
    >>> g.type, type(g.owner.op).__name__
    (Sparse[float64, csc], 'ConstructSparseFromList')
    >>> g.eval({m: np.zeros((3, 2)), i: [2, 2]}).toarray()
    array([[0., 0.],
           [0., 0.],
           [2., 2.]])
    """
    owner = getattr(var, "owner", None)
    if owner is None or not isinstance(owner.op, AdvancedSubtensor1):
        raise TypeError(
            "sparse_grad: only x[ilist] (AdvancedSubtensor1, rows read by an integer vector) "
            f"has a sparse gradient, got {var}"
        )
    return type(owner.op)(sparse_grad=True)(*owner.inputs)


# numpy 1.25 gave ``ufunc.at`` a fast loop; before it ``np.add.at`` on a few hundred
# values takes about 7 us where ``np.bincount`` and two bounds checks take 3.
_ADD_AT_SLOW = np.lib.NumpyVersion(np.__version__) < "1.25.0"


def _add_counts(out, i, y) -> bool:
    """``out[i] += y`` with repeated entries of ``i`` accumulating, for a float vector
    ``out``, through ``numpy.bincount``, on the numpy versions whose ``np.add.at`` is
    slow (the gradient of ``a[group]`` in a hierarchical model pays it on every call).
    False, with ``out`` untouched, where that does not apply: a numpy with a fast
    ``np.add.at``, another rank or dtype, an empty, negative or out-of-range index
    (``np.add.at`` then wraps or raises).
    """
    if not _ADD_AT_SLOW:
        return False
    if out.ndim != 1 or out.dtype.kind != "f" or i.ndim != 1 or i.dtype.kind not in "iu":
        return False
    if getattr(y, "shape", None) != i.shape:
        if np.ndim(y) > 1:
            return False
        y = np.broadcast_to(y, i.shape)
    n = out.shape[0]
    # bounds first: bincount would make room for the largest index, however large
    if i.size == 0 or _MIN(i) < 0 or _MAX(i) >= n:
        return False
    try:
        sums = np.bincount(i, y, n)  # weights read as float64
    except (ValueError, TypeError):  # an index or weight dtype bincount does not take
        return False
    out += sums.astype(out.dtype, copy=False)
    return True


_MIN, _MAX = np.minimum.reduce, np.maximum.reduce  # the ufuncs, without ndarray.min's wrapper


class AdvancedIncSubtensor1(Op):
    """Add ``y`` into (or set) the rows ``ilist`` of ``x``; repeated rows accumulate."""

    __props__ = ("inplace", "set_instead_of_inc")

    def __init__(self, inplace=False, set_instead_of_inc=False):
        self.inplace = inplace
        self.set_instead_of_inc = set_instead_of_inc
        self.destroy_map = {0: [0]} if inplace else {}

    def make_node(self, x, y, ilist):
        x, ilist = as_tensor_variable(x), as_tensor_variable(ilist)
        node = AdvancedSubtensor1().make_node(x, ilist)
        y = _y_to_result(y, node.outputs[0].type, str(self))
        return Apply(self, [x, y, ilist], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y, i = inputs
        out = x if self.inplace else x.copy()
        if self.set_instead_of_inc:
            out[i] = y
        elif not _add_counts(out, i, y):
            np.add.at(out, i, np.asarray(y, dtype=out.dtype))
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        # x's shape, checked where y does not fit the rows written (as IncSubtensor's)
        x_shape, y_shape, i_shape = input_shapes
        out = tuple(x_shape)
        part = (i_shape[0], *out[1:])
        who = f"{_adv_name(self)}1"
        return [_checked_write(who, out, part, node.inputs[1], y_shape)[0]]

    def connection_pattern(self, node):
        return [[True], [True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        x, y, i = inputs
        (gz,) = output_grads
        if x.dtype in discrete_dtypes:
            return _discrete_inc_grads(x, y, [i])
        if not self.set_instead_of_inc:
            return [gz, _reduce_y_grad(AdvancedSubtensor1()(gz, i), y), _disc()]
        gx = AdvancedIncSubtensor1(set_instead_of_inc=True)(gz, 0, i)
        gy = AdvancedSubtensor1()(gz, i)
        if not writes_once([i]):
            # A repeated row holds y once: it has y's gradient once (Theano counted it
            # each time: grad(set_subtensor(x[[0, 0]], y).sum(), y) was 2).
            gy = gy * _last_writes(
                lambda v: AdvancedSubtensor1()(v, i),
                lambda v, w: AdvancedIncSubtensor1(set_instead_of_inc=True)(v, w, i),
                x,
            )
        return [gx, _reduce_y_grad(gy, y), _disc()]


def _adv_name(op):
    """The name of an advanced increment (or set) in its shape's errors."""
    return "AdvancedSetSubtensor" if op.set_instead_of_inc else "AdvancedIncSubtensor"


def _is_slice_variable(a) -> bool:
    """Whether ``a`` is a slice known only when the function runs (``tt.slicetype()``)."""
    return isinstance(a, Variable) and isinstance(a.type, SliceType)


def _adv_split(args, who):
    """``(idx_list, inputs)`` for an advanced index: arrays, slices and None (newaxis)."""
    idx_list, inputs = [], []
    for a in args:
        if isinstance(a, slice):
            sub, ins = _split_index([a], who)
            idx_list.extend(sub)
            inputs.extend(ins)
        elif a is None or a is NoneConst:
            idx_list.append(("none",))
        elif _is_slice_variable(a):
            idx_list.append(("slicevar",))
            inputs.append(a)
        else:
            v = as_tensor_variable(a)
            if v.dtype not in _INTS and v.dtype != "bool":
                raise TypeError(f"{who}: index arrays must be integer or bool, got {v.type}")
            idx_list.append(("tensor",))
            inputs.append(v)
    return tuple(idx_list), inputs


def _static_slice_length(n, parts):
    """The length of ``range(n)[slice(*parts)]`` when ``n`` and the parts are constants."""
    if all(p is None for p in parts):
        return n
    consts = [None if p is None else _const_int(p) for p in parts]
    if n is None or any(c is None and p is not None for c, p in zip(consts, parts)):
        return None
    return len(range(n)[slice(*consts)])


def _static_broadcast(shapes):
    """numpy's broadcast of static shapes (None: unknown), right-aligned."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(nd):
        dims = {s[len(s) - nd + k] for s in shapes if len(s) - nd + k >= 0} - {1}
        out.append(dims.pop() if len(dims) == 1 and None not in dims else (1 if not dims else None))
    return tuple(out)


class AdvancedSubtensor(Op):
    """numpy fancy indexing: integer arrays and bool masks mixed with slices and None.

    The result's dimensions follow numpy's rules: the broadcast dimensions of the advanced
    indices take the place of the first of them when they are adjacent, and go first when
    a slice or a None (a new axis) separates them.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> y = x[[0, 2], None, [1, 1]]
    >>> y.owner.op
    AdvancedSubtensor{array, newaxis, array}
    >>> v = np.arange(12.0).reshape(3, 4)
    >>> y.eval({x: v}).tolist() == v[[0, 2], None, [1, 1]].tolist()
    True
    """

    __props__ = ("idx_list",)

    def __init__(self, idx_list=None):
        # None: Theano's ``AdvancedSubtensor()``, whose make_node reads the index kinds
        # from its arguments (a constant slice among them) and makes the node of the op
        # with that idx_list.
        self.idx_list = None if idx_list is None else tuple(tuple(e) for e in idx_list)

    def __str__(self):
        if self.idx_list is None:
            return "AdvancedSubtensor"
        return f"AdvancedSubtensor{{{_idx_str(self.idx_list)}}}"

    __repr__ = __str__

    def walk(self, x, idx_inputs):
        """``[(kind, dim, value_inputs)]`` per index entry (kind: adv, slice or new) and
        the number of ``x``'s dimensions the index consumes."""
        it = iter(idx_inputs)
        dim = 0
        entries = []
        for entry in self.idx_list:
            if entry[0] == "tensor":
                v = next(it)
                entries.append(("adv", dim, [v]))
                dim += v.ndim if v.dtype == "bool" else 1
            elif entry[0] == "none":
                entries.append(("new", dim, []))
            elif entry[0] == "slicevar":  # bounds known at run time only
                entries.append(("slice", dim, None))
                next(it)
                dim += 1
            else:
                parts = [next(it) if present else None for present in entry[1:]]
                entries.append(("slice", dim, parts))
                dim += 1
        if dim > x.ndim:
            raise IndexError(f"{self}: too many indices for {x} ({x.ndim} dimensions)")
        return entries, dim

    def _slots(self, x, idx_inputs):
        """The result's dimensions in order, by numpy's rules, and the advanced indices.

        A slot is ``("adv", None)`` once for the broadcast dimensions of all advanced
        indices, ``("slice", (dim, parts))``, ``("new", None)`` for a None, or
        ``("rest", dim)`` for a dimension of ``x`` left unindexed. The advanced group
        replaces the first advanced index when the advanced indices are adjacent in the
        index; a slice or a None between them sends it to the front.
        """
        entries, consumed = self.walk(x, idx_inputs)
        adv = [k for k, e in enumerate(entries) if e[0] == "adv"]
        adjacent = adv == list(range(adv[0], adv[-1] + 1)) if adv else True
        slots = [] if adjacent or not adv else [("adv", None)]
        for k, (kind, dim, vals) in enumerate(entries):
            if kind == "adv":
                if adjacent and k == adv[0]:
                    slots.append(("adv", None))
            elif kind == "slice":
                slots.append(("slice", (dim, vals)))
            else:
                slots.append(("new", None))
        slots.extend(("rest", d) for d in range(consumed, x.ndim))
        return slots, [entries[k][2][0] for k in adv]

    @staticmethod
    def _static_adv_shape(indices):
        shapes = [
            (None,) if v.dtype == "bool" else tuple(v.type.shape) for v in indices
        ]  # a mask selects as many elements as it has True: unknown statically
        return _static_broadcast(shapes)

    def make_node(self, x, *idx_inputs):
        if self.idx_list is None:
            args = [
                a.data if isinstance(a, Constant) and isinstance(a.data, slice) else a
                for a in idx_inputs
            ]
            idx_list, inputs = _adv_split(args, "AdvancedSubtensor")
            return AdvancedSubtensor(idx_list).make_node(x, *inputs)
        x = as_tensor_variable(x)
        idx_inputs = [i if _is_slice_variable(i) else as_tensor_variable(i) for i in idx_inputs]
        slots, indices = self._slots(x, idx_inputs)
        shape = []
        for kind, what in slots:
            if kind == "adv":
                shape.extend(self._static_adv_shape(indices))
            elif kind == "slice":
                dim, parts = what
                shape.append(
                    None if parts is None else _static_slice_length(x.type.shape[dim], parts)
                )
            elif kind == "new":
                shape.append(1)
            else:
                shape.append(x.type.shape[what])
        return Apply(self, [x, *idx_inputs], [TensorType(x.dtype, shape=tuple(shape))()])

    def perform(self, node, inputs, output_storage, params=None):
        x, *vals = inputs
        index = _rebuild(self.idx_list, vals)
        out = x[index]
        # numpy's basic indexing gives a view of x: the output must be its own array
        output_storage[0][0] = np.array(out) if index_is_basic(index) else np.asarray(out)

    def infer_shape(self, fgraph, node, input_shapes):
        x, *idx = node.inputs
        out = self._shape(x, idx, input_shapes[0], input_shapes[1:], str(self))[0]
        # each int index array, within the length of the dimension of x it indexes
        indexed = [
            (vals[0], input_shapes[0][dim], f"{x} along dimension {dim}")
            for kind, dim, vals in self.walk(x, idx)[0]
            if kind == "adv" and vals[0].dtype != "bool"
        ]
        return [in_bounds_shape(out, indexed, str(self))]

    def _shape(self, x, idx, xs, idx_shapes, who):
        """The result's shape (``x`` of shape ``xs`` indexed by ``idx``, of shapes
        ``idx_shapes``) and the positions of the dimensions of the index arrays broadcast
        together, each length checked where the arrays' lengths may differ
        (``broadcast_shapes``; numpy refuses arrays that do not broadcast). ``who`` names
        the op in the error. (The lengths given, ints when the CPU engine plans the node.)"""
        slots, indices = self._slots(x, idx)
        shape_of = {}
        for v, shp in zip(idx, idx_shapes):
            shape_of.setdefault(v, shp)
        starts = [dim for kind, dim, _ in self.walk(x, idx)[0] if kind == "adv"]
        adv_shapes, names = [], []
        for k, (v, start) in enumerate(zip(indices, starts)):
            if v.dtype == "bool":  # a mask selects as many elements as it has True
                # of the dimensions it indexes, whose lengths it must have (numpy)
                n = tm.sum(v, dtype="int64")
                for e in range(v.ndim):
                    what = f"{who}: the mask of index array {k}"
                    mask_names = (f"{x} along dimension {start + e}", f"the mask along {e}")
                    lengths = [xs[start + e], shape_of[v][e]]
                    (n,) = checked_shape((n,), lengths, what, mask_names)
                adv_shapes.append((n,))
            else:
                adv_shapes.append(tuple(shape_of[v]))
            names.append(f"index array {k}" if v.name is None else f"index array {k} ({v.name})")
        nd = max((len(s) for s in adv_shapes), default=0)
        # the index shapes broadcast (right-aligned), 1 spreading
        bshape = broadcast_shapes(adv_shapes, f"{who}: the index arrays", names)
        shape, adv = [], []
        for kind, what in slots:
            if kind == "adv":
                adv.extend(range(len(shape), len(shape) + nd))
                shape.extend(bshape)
            elif kind == "slice":
                dim, parts = what
                if parts is None:
                    raise NotImplementedError(
                        f"{self}: a slice variable's length is known at run time"
                    )
                full = all(p is None for p in parts)
                shape.append(xs[dim] if full else slice_length(xs[dim], *parts))
            elif kind == "new":
                shape.append(1)
            else:
                shape.append(xs[what])
        return tuple(shape), adv

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def L_op(self, inputs, outputs, output_grads):
        x, *idx = inputs
        if x.dtype in discrete_dtypes:
            return [zeros_like(x, config.floatX)] + [_disc() for _ in idx]
        gx = AdvancedIncSubtensor(self.idx_list)(zeros_like(x), output_grads[0], *idx)
        return [gx] + [_disc() for _ in idx]


class AdvancedIncSubtensor(Op):
    """Add ``y`` into (or set) ``x[fancy index]``; repeated positions accumulate."""

    __props__ = ("idx_list", "inplace", "set_instead_of_inc")

    def __init__(self, idx_list, inplace=False, set_instead_of_inc=False):
        self.idx_list = tuple(tuple(e) for e in idx_list)
        self.inplace = inplace
        self.set_instead_of_inc = set_instead_of_inc
        self.destroy_map = {0: [0]} if inplace else {}

    def make_node(self, x, y, *idx_inputs):
        x = as_tensor_variable(x)
        node = AdvancedSubtensor(self.idx_list).make_node(x, *idx_inputs)
        y = _y_to_result(y, node.outputs[0].type, "AdvancedIncSubtensor")
        return Apply(self, [x, y, *node.inputs[1:]], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, y, *vals = inputs
        out = x if self.inplace else x.copy()
        idx = _rebuild(self.idx_list, vals)
        if self.set_instead_of_inc:
            out[idx] = y
        else:
            np.add.at(out, idx, np.asarray(y, dtype=out.dtype))
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        # x's shape, checked where y does not fit the part written (as IncSubtensor's);
        # the part's shape checks the index arrays' lengths (AdvancedSubtensor's)
        x, y, *idx = node.inputs
        out = tuple(input_shapes[0])
        who = f"{_adv_name(self)}{{{_idx_str(self.idx_list)}}}"
        # (the index arrays' check named as the read x[idx]'s: the same check as that of
        # a value y read there, which merges with it)
        sub = AdvancedSubtensor(self.idx_list)
        part, adv = sub._shape(x, idx, out, input_shapes[2:], str(sub))
        out, compared = _checked_write(who, out, part, y, input_shapes[1])
        # The index arrays' check (numpy refuses arrays that do not broadcast together,
        # whatever y is), where no comparison with y's lengths carries it.
        for d in adv:
            owner = getattr(part[d], "owner", None)
            if d not in compared and owner is not None and isinstance(owner.op, EqualLengths):
                out = checked_shape(out, owner.inputs, owner.op.what, owner.op.names)
        return [out]

    def connection_pattern(self, node):
        return [[True], [True]] + [[False]] * (len(node.inputs) - 2)

    def L_op(self, inputs, outputs, output_grads):
        x, y, *idx = inputs
        (gz,) = output_grads
        if x.dtype in discrete_dtypes:
            return _discrete_inc_grads(x, y, idx)
        gy = AdvancedSubtensor(self.idx_list)(gz, *idx)
        gx = gz
        if self.set_instead_of_inc:
            gx = AdvancedIncSubtensor(self.idx_list, set_instead_of_inc=True)(gz, 0, *idx)
        if self.set_instead_of_inc and not writes_once(idx):
            # A repeated position holds y once (see AdvancedIncSubtensor1.L_op).
            gy = gy * _last_writes(
                lambda v: AdvancedSubtensor(self.idx_list)(v, *idx),
                lambda v, w: AdvancedIncSubtensor(self.idx_list, set_instead_of_inc=True)(
                    v, w, *idx
                ),
                x,
            )
        return [gx, _reduce_y_grad(gy, y)] + [_disc() for _ in idx]


def _is_advanced(a):
    if isinstance(a, (slice, type(None))) or a is Ellipsis or _is_slice_variable(a):
        return False
    if isinstance(a, Variable):
        return a.ndim > 0 or a.dtype == "bool"
    if isinstance(a, (list, np.ndarray)):
        return np.asarray(a).ndim > 0 or np.asarray(a).dtype == bool
    return isinstance(a, (bool, np.bool_))


def _dims_indexed(a):
    """How many dimensions of ``x`` the index entry ``a`` consumes (a mask: its ndim)."""
    if a is None or a is Ellipsis:
        return 0
    if isinstance(a, slice) or _is_slice_variable(a):
        return 1
    if isinstance(a, Variable):
        return a.ndim if a.dtype == "bool" else 1
    arr = np.asarray(a)
    return arr.ndim if arr.dtype == bool else 1


def _holds_python_bool(a) -> bool:
    """Whether the index entry ``a`` is, or (a Python sequence) holds, a bool: a Python
    or numpy bool, or a bool array or variable inside a list."""
    if isinstance(a, (bool, np.bool_)):
        return True
    if isinstance(a, (list, tuple)):
        return any(getattr(e, "dtype", None) == "bool" or _holds_python_bool(e) for e in a)
    return False


def _refuse_python_bools(args):
    """Theano's rule: a Python bool (``x[True]``) or bools inside a Python list
    (``x[[True, False]]``) are refused; a numpy bool array or a bool tensor is a mask."""
    if any(_holds_python_bool(a) for a in args):
        raise TypeError(
            "TensorType does not support Python bools for indexing, such as "
            "tensor[[True, False]]. To use a boolean mask, convert the mask to a NumPy "
            "array first, e.g., tensor[numpy.array([True, False])]."
        )


def _is_full(a) -> bool:
    return isinstance(a, slice) and a.start is None and a.stop is None and a.step is None


def _new_axes(x, args):
    """``x[args]`` for a basic index holding None (numpy.newaxis): ``x`` indexed by the
    other entries, then a DimShuffle inserts the new axes. As in Theano, the DimShuffle
    alone when every other entry is a full slice (``x[None]``, ``x[..., None]``)."""
    real = [a for a in args if a is not None]
    out = x
    if not all(_is_full(a) for a in real):
        idx_list, inputs = _split_index(real, "Subtensor")
        out = Subtensor(idx_list)(x, *inputs)
    # Insert the new axes: count the output dims that each real entry keeps.
    order, k = [], 0
    for a in args:
        if a is None:
            order.append("x")
        elif isinstance(a, slice):
            order.append(k)
            k += 1
    order.extend(range(k, out.ndim))
    return DimShuffle(out.broadcastable, order)(out)


def getitem(x, args):
    """``x[args]``: the op behind ``TensorVariable.__getitem__``, the ops chosen as
    Theano's ``__getitem__`` chooses them: ``Subtensor`` for integers and slices (and
    a ``DimShuffle`` for new axes), ``take`` (``AdvancedSubtensor1``, between two
    DimShuffles off the first axis) for one integer vector among full slices, and
    ``AdvancedSubtensor`` for any other index (masks, several arrays, a slice variable).

    A list holding a slice is a tuple of indices, as in Theano (and numpy before 1.23):
    ``x[[slice(1, -1)] * 2]`` is ``x[1:-1, 1:-1]``. Python bools are refused (TypeError),
    as in Theano: a mask is a numpy bool array or a bool tensor.

    >>> from theano_dag import tensor as tt
    >>> x, i = tt.dmatrix("x"), tt.lvector("i")
    >>> x[1:].owner.op, x[..., None].owner.op, x[i].owner.op, x[:, i].owner.op
    (Subtensor{int64::}, InplaceDimShuffle{0,1,x}, AdvancedSubtensor1, InplaceDimShuffle{1,0})
    """
    if isinstance(args, list) and any(isinstance(a, slice) for a in args):
        args = tuple(args)
    if not isinstance(args, tuple):
        args = (args,)
    _refuse_python_bools(args)
    # An empty list or tuple picks nothing, an integer index (numpy's x[[]], x[:, ()]),
    # where as_tensor_variable would make it a float vector.
    args = tuple(
        np.zeros(0, dtype="int64") if isinstance(a, (list, tuple)) and not a else a for a in args
    )
    # A slice variable (MakeSlice's output, a SliceConstant) indexes as its bounds do;
    # one known only when the function runs (a slicetype input) goes to AdvancedSubtensor.
    args = tuple(_as_python_slice(a) for a in args)
    used = sum(_dims_indexed(a) for a in args)
    if used > x.ndim:
        what = "a 0-d tensor" if x.ndim == 0 else f"it has {x.ndim} dimensions"
        raise IndexError(f"too many indices for {x}: {what} but {used} were indexed")
    n_ell = sum(1 for a in args if a is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_ell:
        k = next(i for i, a in enumerate(args) if a is Ellipsis)
        args = args[:k] + (slice(None),) * (x.ndim - used) + args[k + 1 :]
    adv = [k for k, a in enumerate(args) if _is_advanced(a) or _is_slice_variable(a)]
    if adv:
        if len(adv) == 1 and all(_is_full(a) for k, a in enumerate(args) if k != adv[0]):
            first = args[adv[0]]
            first = None if _is_slice_variable(first) else as_tensor_variable(first)
            if first is not None and first.ndim == 1 and first.dtype in _INTS:
                return take(x, first, axis=adv[0])
        idx_list, inputs = _adv_split(args, "AdvancedSubtensor")
        return AdvancedSubtensor(idx_list)(x, *inputs)
    real = [a for a in args if a is not None]
    if len(real) < len(args):
        return _new_axes(x, args)
    # x[:] too is a Subtensor (as in Theano): inc_subtensor(x[1:][:], y) then updates
    # x[1:], not x (rewrites remove a useless one); so is x[()], with no index at all.
    idx_list, inputs = _split_index(real, "Subtensor")
    return Subtensor(idx_list)(x, *inputs)


def _is_permutation(op) -> bool:
    """Whether the DimShuffle ``op`` only reorders its input's axes (no new, no dropped)."""
    return "x" not in op.new_order and not op.drop


def _is_indexed(v) -> bool:
    """Whether ``v`` is the result of indexing, maybe with its axes reordered, new axes, or
    reshaped."""
    owner = v.owner
    if owner is None:
        return False
    if isinstance(owner.op, (Subtensor, AdvancedSubtensor1, AdvancedSubtensor)):
        return True
    return isinstance(owner.op, (DimShuffle, Reshape)) and _is_indexed(owner.inputs[0])


def _inc_or_set(x_sub, y, set_instead_of_inc, who):
    x_sub = as_tensor_variable(x_sub)
    node = x_sub.owner
    if node is None:
        raise TypeError(
            f"{who}: the first argument must be an indexed tensor like x[1:], " f"got {x_sub}"
        )
    op = node.op
    if isinstance(op, Subtensor):
        return IncSubtensor(op.idx_list, set_instead_of_inc=set_instead_of_inc)(
            node.inputs[0], y, *node.inputs[1:]
        )
    if isinstance(op, AdvancedSubtensor1):
        return AdvancedIncSubtensor1(set_instead_of_inc=set_instead_of_inc)(
            node.inputs[0], y, node.inputs[1]
        )
    if isinstance(op, AdvancedSubtensor):
        return AdvancedIncSubtensor(op.idx_list, set_instead_of_inc=set_instead_of_inc)(
            node.inputs[0], y, *node.inputs[1:]
        )

    if isinstance(op, DimShuffle) and _is_permutation(op) and _is_indexed(node.inputs[0]):
        # x_sub is an indexed tensor with its axes permuted (x[:, ::2].T, or take(x, i,
        # axis) = swap(x)[i] swapped back): y permuted back goes into that indexed tensor,
        # and the updated base comes out permuted as x_sub is, as in Theano; for take,
        # whose base is swap(x), that is x's own layout.
        base = node.inputs[0]
        y = as_tensor_variable(y)
        y = DimShuffle(y.broadcastable, ["x"] * (x_sub.ndim - y.ndim) + list(range(y.ndim)))(y)
        inverse = [op.new_order.index(k) for k in range(x_sub.ndim)]
        done = _inc_or_set(base, y.dimshuffle(inverse), set_instead_of_inc, who)
        if done.ndim != x_sub.ndim:
            raise TypeError(
                f"{who}: cannot write through {op} of {base}: the tensor it indexes has "
                f"{done.ndim} dimensions, {op} permutes {x_sub.ndim}; index a permuted "
                f"tensor instead (x.T[i] rather than x[i].T)"
            )
        return done.dimshuffle(op.new_order)
    if isinstance(op, Reshape) and _is_indexed(node.inputs[0]):
        # x_sub is an indexed tensor reshaped (x[1:].reshape((2, 2))): y spread to x_sub's
        # shape and reshaped back goes into that indexed tensor, as in Theano
        base = node.inputs[0]
        y = _y_to_result(y, x_sub.type, who)
        full = alloc(y, *[shape_i(x_sub, i) for i in range(x_sub.ndim)])
        return _inc_or_set(base, reshape(full, base.shape, ndim=base.ndim), set_instead_of_inc, who)
    if (
        isinstance(op, DimShuffle)
        and "x" in op.new_order
        and not op.drop
        and op.shuffle == sorted(op.shuffle)
    ):
        # new axes inserted (x[None, 1:], x[..., None]): the region of what they were
        # inserted into, y without them
        y = as_tensor_variable(y)
        if y.ndim == x_sub.ndim:
            keep = [k for k, o in enumerate(op.new_order) if o != "x"]
            y = DimShuffle(y.broadcastable, keep)(y)
        base = node.inputs[0]
        if base.owner is not None and isinstance(
            base.owner.op, (Subtensor, AdvancedSubtensor1, AdvancedSubtensor, DimShuffle)
        ):
            return _inc_or_set(base, y, set_instead_of_inc, who)
        # x[None, :] is a DimShuffle of x alone: its region is all of x
        return IncSubtensor((), set_instead_of_inc=set_instead_of_inc)(base, y)
    raise TypeError(
        f"{who}: the first argument must be the result of indexing, got "
        f"{x_sub} computed by {op}"
    )


def set_subtensor(x, y, inplace=False, tolerate_inplace_aliasing=False):
    """A copy of the indexed tensor's base with ``x``'s region set to ``y``.

    Written through permuted axes (``x[:, ::2].T``, ``take(x, i, axis=1)``), the base
    comes out permuted as ``x`` is, as in Theano: ``set_subtensor(m[:, ::2].T, y)`` is
    ``m.T`` with ``m.T[::2]`` set to ``y``. Written through a reshape of an indexed
    tensor (``m[1:].reshape((4, 2))``), ``y`` spread to ``x``'s shape goes into that
    tensor reshaped to its shape.

    ``inplace=True`` (Theano's) writes into the base itself: the graph then destroys
    it, which a function accepts with ``accept_inplace=True``. ``tolerate_inplace_aliasing``
    is accepted for Theano's signature.

    >>> from theano_dag import tensor as tt
    >>> v = tt.dvector("v")
    >>> set_subtensor(v[1:], 0.0).owner.op
    SetSubtensor{int64::}
    """
    return inc_subtensor(x, y, inplace, True, tolerate_inplace_aliasing)


def inc_subtensor(x, y, inplace=False, set_instead_of_inc=False, tolerate_inplace_aliasing=False):
    """A copy of the indexed tensor's base with ``y`` added to ``x``'s region (or set to
    ``y``: ``set_instead_of_inc``); ``inplace`` as in :func:`set_subtensor`."""
    who = "set_subtensor" if set_instead_of_inc else "inc_subtensor"
    out = _inc_or_set(x, y, set_instead_of_inc, who)
    if inplace:
        node, outer = out.owner, []
        while isinstance(node.op, DimShuffle):  # a write through permuted axes
            outer.append(node.op)
            node = node.inputs[0].owner
        op = _copy.copy(node.op)
        op.inplace = True
        op.destroy_map = {0: [0]}
        out = op(*node.inputs)
        for shuffle in reversed(outer):
            out = shuffle(out)
    return out


def take(a, indices, axis=None, mode="raise"):
    """``numpy.take``: elements of ``a`` at ``indices`` along ``axis``; ``mode`` wrap or
    clip brings out-of-range indices back into range, as numpy's.

    >>> import numpy as np
    >>> take(np.arange(5.0), [-7, 6], mode="wrap").eval().tolist()
    [3.0, 1.0]
    """
    a, indices = as_tensor_variable(a), as_tensor_variable(indices)
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"take: mode must be raise, wrap or clip, got {mode!r}")
    if axis is None:
        return take(a.flatten(), indices, 0, mode)
    if a.ndim == 0:
        raise IndexError(f"take: cannot index {a}, a 0-d tensor")
    if mode != "raise":
        n = shape_i(a, axis % a.ndim)
        indices = indices % n if mode == "wrap" else tm.clip(indices, 0, n - 1)
    axis %= a.ndim
    if indices.ndim == 1 and indices.dtype in _INTS:
        if axis == 0:
            return AdvancedSubtensor1()(a, indices)
        # Theano's: the axis swapped with the first, AdvancedSubtensor1, swapped back
        swap = list(range(a.ndim))
        swap[0], swap[axis] = axis, 0
        return AdvancedSubtensor1()(a.dimshuffle(swap), indices).dimshuffle(swap)
    idx_list, inputs = _adv_split([slice(None)] * axis + [indices], "take")
    return AdvancedSubtensor(idx_list)(a, *inputs)


_ = constant


def advanced_inc_subtensor1(x, y, ilist):
    """``x`` with ``y`` added at the rows ``ilist`` (repeats accumulate): Theano's name."""
    return AdvancedIncSubtensor1()(x, y, ilist)


def advanced_set_subtensor1(x, y, ilist):
    """``x`` with the rows ``ilist`` set to ``y``: Theano's name."""
    return AdvancedIncSubtensor1(set_instead_of_inc=True)(x, y, ilist)


def advanced_inc_subtensor(x, y, *index):
    """``x`` with ``y`` added at ``x[index]`` (any advanced index; repeats accumulate).

    >>> import numpy as np
    >>> advanced_inc_subtensor(np.zeros((2, 3)), 1.0, [0, 0], [1, 1]).eval()
    array([[0., 2., 0.],
           [0., 0., 0.]])
    """
    x = as_tensor_variable(x)
    return inc_subtensor(x[tuple(index)], y)


def advanced_set_subtensor(x, y, *index):
    """``x`` with ``x[index]`` set to ``y`` (any advanced index)."""
    x = as_tensor_variable(x)
    return set_subtensor(x[tuple(index)], y)


def get_canonical_form_slice(theslice, length):
    """``(slice(start, stop, step), direction)`` with ``step > 0`` such that
    ``x[theslice] == x[start:stop:step][::direction]`` for ``len(x) == length``; the parts
    are symbolic when ``theslice`` or ``length`` are (Theano's contract). An int index is
    returned as a non-negative index with direction 1.

    >>> import numpy as np
    >>> canon, direction = get_canonical_form_slice(slice(None, None, -2), 7)
    >>> [int(v.eval()) for v in (canon.start, canon.stop, canon.step, direction)]
    [0, 7, 2, -1]
    >>> np.arange(7)[0:7:2][::-1].tolist() == np.arange(7)[::-2].tolist()
    True
    """
    length = as_tensor_variable(length)
    if not isinstance(theslice, slice):
        i = as_tensor_variable(theslice)
        return tm.switch(tm.lt(i, 0), i + length, i), 1
    start, stop, step = theslice.start, theslice.stop, theslice.step
    step = as_tensor_variable(1 if step is None else step)
    n = length

    def norm(v, lo, hi):
        v = as_tensor_variable(v)
        return tm.clip(tm.switch(tm.lt(v, 0), v + n, v), lo, hi)

    # numpy's slice.indices, for each sign of the step
    a_pos = as_tensor_variable(0) if start is None else norm(start, 0, n)
    b_pos = n if stop is None else norm(stop, 0, n)
    a_neg = n - 1 if start is None else norm(start, -1, n - 1)
    count = slice_length(n, start, stop, step)
    positive = tm.gt(step, 0)
    # Negative step: the elements are a_neg, a_neg + step, ..., the last of them first.
    last = a_neg + (count - 1) * step
    c_start = tm.switch(positive, a_pos, tm.switch(tm.gt(count, 0), last, 0))
    c_stop = tm.switch(positive, tm.maximum(b_pos, a_pos), tm.switch(tm.gt(count, 0), a_neg + 1, 0))
    c_step = tm.abs(step)
    direction = tm.switch(positive, 1, -1)
    return slice(c_start, c_stop, c_step), direction


def _as_python_slice(idx):
    # Theano's index lists may hold a slice variable (MakeSlice's output or a
    # SliceConstant); its bounds are what the length needs.
    if isinstance(idx, SliceConstant):
        return idx.data
    if getattr(idx, "owner", None) is not None and isinstance(idx.owner.op, MakeSlice):
        return slice(*(None if b is NoneConst else b for b in idx.owner.inputs))
    return idx


def basic_shape(shape, indices):
    """The lengths that the basic ``indices`` (slices, None for a new axis) give the
    dimensions they index of an ``x`` of ``shape``, one entry per index (Theano's: the
    dimensions left unindexed are not listed).

    >>> [int(d.eval()) if hasattr(d, "eval") else d for d in basic_shape((5, 4), (slice(1, 3),))]
    [2]
    """
    out = []
    dims = list(shape)
    k = 0
    for idx in indices:
        if idx is None:
            out.append(1)
            continue
        idx = _as_python_slice(idx)
        if not isinstance(idx, slice):
            raise TypeError(f"basic_shape: {idx!r} is not a basic index (a slice or None)")
        out.append(slice_length(dims[k], idx.start, idx.stop, idx.step))
        k += 1
    return tuple(out)


def indexed_result_shape(array_shape, indices, indices_are_shapes=False):
    """The shape of ``x[indices]`` for an ``x`` of ``array_shape`` (any numpy index), as a
    tuple of symbolic dimensions; with ``indices_are_shapes``, ``indices`` holds the
    shapes of the index arrays (and the slices and Nones themselves).

    >>> s = indexed_result_shape((5, 6, 7), [(2, 1), slice(None), (3,)], indices_are_shapes=True)
    >>> [int(d.eval()) for d in s]
    [2, 3, 6]
    """
    if indices_are_shapes:
        # An index of each shape stands in for the index (its values do not matter);
        # a length given as 1 broadcasts, as Theano asks of the shapes.
        indices = [
            i if i is None or i is Ellipsis or isinstance(i, slice) else alloc(np.int64(0), *i)
            for i in indices
        ]
    dims = [array_shape[k] for k in range(_vector_len(array_shape))]
    x = alloc(np.float64(0), *dims)
    out = x[tuple(indices)]
    return tuple(out.shape[k] for k in range(out.ndim))


def _vector_len(shape):
    if isinstance(shape, (tuple, list)):
        return len(shape)
    return get_vector_length(shape)
