"""Shape ops (``theano.tensor.shape``): reading shapes (``Shape``, ``Shape_i``,
``MakeVector``), changing them (``Reshape``, ``flatten``), and shapes and broadcast patterns
stated by the user: ``specify_shape``, ``Rebroadcast`` (``addbroadcast`` / ``unbroadcast`` /
``patternbroadcast``), and padding with broadcastable dimensions (``shape_padleft``,
``shape_padright``, ``shape_padaxis``, ``expand_dims``).

A TensorType's static shape is a promise about values; ``SpecifyShape`` and ``Rebroadcast``
let a graph make that promise where it is known only to the user, and check it when the
graph runs, so a wrong promise is an error rather than a silently wrong broadcast.
"""

from __future__ import annotations

import numpy as np

# Ops of later modules that build on this one (basic, math) are reached through the
# package when called.
from theano_dag import tensor as _tensor
from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.comparison import equal_computations
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.scalar import Mul
from theano_dag.tensor.elemwise import DimShuffle
from theano_dag.tensor.type import TensorType, discrete_dtypes, int_dtypes, uint_dtypes
from theano_dag.tensor.variable import as_tensor_variable, constant

__all__ = [
    "Shape",
    "Shape_i",
    "ValueShape",
    "MakeVector",
    "Reshape",
    "shape",
    "shape_i",
    "make_vector",
    "reshape",
    "flatten",
    "as_int_vector",
    "Rebroadcast",
    "addbroadcast",
    "unbroadcast",
    "patternbroadcast",
    "SpecifyShape",
    "specify_shape",
    "LengthMismatchError",
    "EqualLengths",
    "equal_lengths",
    "checked_shape",
    "IndicesInBounds",
    "in_bounds_shape",
    "spread_length",
    "spread_compared",
    "broadcast_length",
    "broadcast_shapes",
    "shape_padleft",
    "shape_padright",
    "shape_padaxis",
    "expand_dims",
]


def _disconnected():
    return disconnected_type()


def _shaped(x):
    """``x`` as a tensor, or as it is when it is another variable with dimensions (a sparse
    matrix: its value has a ``.shape`` too, and its shape must not need a dense copy)."""
    try:
        return as_tensor_variable(x)
    except TypeError:
        if isinstance(x, Variable) and getattr(x.type, "ndim", None) is not None:
            return x
        raise


def _any_shaped(x):
    """``_shaped(x)``, or ``x`` itself when it is a variable of another kind (a typed
    list), whose shape ``ValueShape`` reads from its value."""
    try:
        return _shaped(x)
    except TypeError:
        if isinstance(x, Variable):
            return x
        raise


class Shape(Op):
    """The shape of a tensor, as an int64 vector.

    >>> from theano_dag import tensor as tt
    >>> shape(tt.dmatrix("x")).type
    TensorType(int64, shape=(2,))
    """

    __props__ = ()

    def make_node(self, x):
        x = _shaped(x)
        return Apply(self, [x], [TensorType("int64", shape=(x.ndim,))()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(inputs[0].shape, dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        return [(node.inputs[0].ndim,)]

    def connection_pattern(self, node):
        return [[False]]

    def L_op(self, inputs, outputs, output_grads):
        return [_disconnected()]


class ValueShape(Op):
    """``numpy.shape`` of the value of a variable that is not a tensor (a typed list of
    equally shaped arrays: its length first), as an int64 vector whose length is known
    when the function runs. Theano's ``Shape`` took any variable; ``shape`` makes this op
    for those that are not tensors, and the rewrites of ``Shape`` leave it alone.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> from theano_dag.typed_list import make_list
    >>> a = tt.dmatrix("a")
    >>> shape(make_list([a, a])).eval({a: np.zeros((2, 3))})
    array([2, 2, 3])
    """

    __props__ = ()

    def make_node(self, x):
        if not isinstance(x, Variable):
            raise TypeError(f"ValueShape: expected a variable, got {type(x).__name__}")
        return Apply(self, [x], [TensorType("int64", shape=(None,))()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(np.shape(inputs[0]), dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        # a typed list of tensors: its length, then the tensors' dimensions; else unknown
        ndim = getattr(getattr(node.inputs[0].type, "ttype", None), "ndim", None)
        return [(ndim + 1 if isinstance(ndim, int) else None,)]

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
        x = _shaped(x)
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
    """The symbolic shape of ``x`` (an int64 vector); of a variable that is not a tensor
    (a typed list), ``ValueShape``."""
    x = _any_shaped(x)
    if getattr(x.type, "ndim", None) is None:
        return ValueShape()(x)
    return Shape()(x)


def shape_i(x, i, fgraph=None):
    """The symbolic length of dimension ``i`` of ``x``; a constant when statically known.
    With ``fgraph`` (Theano's argument), the length its ``ShapeFeature`` knows, if any.

    >>> from theano_dag import tensor as tt
    >>> shape_i(tt.TensorType("float64", shape=(None, 3))("x"), 1)
    3
    """
    feature = getattr(fgraph, "shape_feature", None)
    known = feature.shape_tuple(x) if feature is not None else None
    if known is not None:
        return known[i]
    x = _any_shaped(x)
    ndim = getattr(x.type, "ndim", None)
    if ndim is None:
        return ValueShape()(x)[i]  # a typed list: its value's numpy.shape, indexed
    if not -ndim <= i < ndim:
        raise ValueError(f"shape_i: {x} has {ndim} dimensions, there is no dimension {i}")
    s = getattr(x.type, "shape", (None,) * ndim)[i]
    if s is not None:
        return constant(np.int64(s))
    return Shape_i(i % ndim)(x)


class LossyInputError(TypeError, AssertionError):
    """An input whose dtype the op's output cannot hold without loss: a TypeError, and
    an AssertionError too, which is what Theano's MakeVector raised for it."""


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
                raise LossyInputError(
                    f"{self}: input {k} ({i}) has dtype {i.dtype}, which cannot "
                    f"be stored in {self.dtype} without loss"
                )
        return Apply(self, inputs, [TensorType(self.dtype, shape=(len(inputs),))()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = np.asarray(inputs, dtype=self.dtype).reshape(len(inputs))

    def infer_shape(self, fgraph, node, input_shapes):
        return [(len(node.inputs),)]

    def connection_pattern(self, node):
        # An integer or bool vector passes no gradient: said here, so that ``grad`` does
        # not warn of a disconnected gradient from an input it took as connected.
        return [[self.dtype not in discrete_dtypes] for _ in node.inputs]

    def L_op(self, inputs, outputs, output_grads):
        if self.dtype in discrete_dtypes:
            return [_disconnected() for _ in inputs]
        (gz,) = output_grads
        return [
            # an integer input gets a float zero gradient (gradients are never integers)
            gz[k] if i.dtype not in discrete_dtypes else _tensor.basic.zeros_like(i, gz.dtype)
            for k, i in enumerate(inputs)
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
        self._check_entries(shp)
        try:
            out = np.reshape(x, tuple(int(s) for s in shp))
        except ValueError as e:
            raise self._cannot(x.shape, shp, e) from None
        self._check_static(node, out.shape)
        output_storage[0][0] = out

    def target_shape(self, node, x_shape, shp) -> tuple:
        """The shape ``perform`` gives an array of shape ``x_shape`` for ``shp``, by
        numpy's rules (one negative entry takes what the others leave), or the
        ``ValueError`` it raises: for an engine whose arrays reshape by other rules (a
        dask array reads a second -1 as one more unknown length).

        >>> import theano_dag.tensor as tt
        >>> node = tt.dmatrix().reshape(tt.lvector(), ndim=2).owner
        >>> node.op.target_shape(node, (3, 4), [-1, 6])
        (2, 6)
        """
        self._check_entries(shp)
        shp = [int(s) for s in shp]
        size = int(np.prod(x_shape))
        unknown = [k for k, s in enumerate(shp) if s < 0]
        known = int(np.prod([s for s in shp if s >= 0]))
        if len(unknown) > 1:
            raise self._cannot(x_shape, shp, "can only specify one unknown dimension")
        if (unknown and (known == 0 or size % known)) or (not unknown and known != size):
            raise self._cannot(x_shape, shp, f"cannot reshape array of size {size}")
        if unknown:
            shp[unknown[0]] = size // known
        self._check_static(node, tuple(shp))
        return tuple(shp)

    def _check_entries(self, shp):
        if len(shp) != self.ndim:
            raise ValueError(
                f"{self}: the shape {tuple(shp)} has {len(shp)} entries, expected {self.ndim}"
            )

    def _cannot(self, x_shape, shp, why) -> ValueError:
        return ValueError(
            f"{self}: cannot reshape an array of shape {tuple(x_shape)} into shape "
            f"{tuple(int(s) for s in shp)}: {why}"
        )

    def _check_static(self, node, shape):
        for d, s in enumerate(node.outputs[0].type.shape):
            if s is not None and shape[d] != s:
                raise ValueError(
                    f"{self}: output shape {shape} differs from the static "
                    f"shape {node.outputs[0].type.shape}"
                )

    def connection_pattern(self, node):
        return [[True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        x, _ = inputs
        return [reshape(output_grads[0], shape(x), ndim=x.ndim), _disconnected()]

    def infer_shape(self, fgraph, node, input_shapes):
        tm = _tensor.math
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
        # the lengths' product the input's size, as perform refuses another (a -1 entry's
        # length, rounded down, makes a smaller product where the others do not divide),
        # unless the lengths asked are known to fit (a flatten's, of the input's lengths)
        given = (
            shp.owner.inputs
            if shp.owner is not None and isinstance(shp.owner.op, MakeVector)
            else None
        )
        if given is not None and len(given) == self.ndim and _fits(input_shapes[0], given, known):
            return [tuple(out)]
        size = 1
        for n in out:
            size = size * n
        names = ("the input's size", "the size asked")
        return [checked_shape(tuple(out), [total, size], str(self), names)]


def _factors(lengths):
    """The product of ``lengths`` as the int of its known factors and the keys
    (``_length_key``) of the others, reading through products of lengths."""
    const, keys = 1, []
    todo = list(lengths)
    while todo:
        n = todo.pop()
        owner = getattr(n, "owner", None)
        op = getattr(owner, "op", None)
        if isinstance(getattr(op, "scalar_op", None), Mul):
            todo.extend(owner.inputs)
            continue
        key = _length_key(n)
        if isinstance(key, int):
            const *= key
        else:
            keys.append(key)
    return const, keys


def _fits(shape, given, known):
    """Whether the lengths ``given`` (a reshape's entries, ``known`` where constant) are
    known to hold ``shape``'s element count: the same factors, or with one -1 among them,
    factors of it (its length then divides the rest exactly)."""
    minus = [k for k in known if k is not None and k < 0]
    if minus not in ([], [-1]):
        return False
    const, keys = _factors(shape)
    given_const, given_keys = _factors([n for n, k in zip(given, known) if k != -1])
    for key in given_keys:
        if key not in keys:
            return False
        keys.remove(key)
    if minus:  # the -1's length is what is left over
        return given_const > 0 and const % given_const == 0
    return not keys and const == given_const


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
    # Always a Reshape, even of ndim dimensions (as Theano: its tests look for the op);
    # local_useless_reshape removes the one that changes nothing.
    # Lengths the input's type knows are constants, so that the output's type knows them
    # too (a merged length of 1 stays broadcastable, as Theano's).
    static = x.type.shape
    lead = [shape_i(x, i) if static[i] is None else static[i] for i in range(ndim - 1)]
    rest = static[ndim - 1 :]
    if None not in rest:
        last = int(np.prod(rest, dtype=np.int64))
    elif ndim == 1:
        last = -1
    else:
        # the product, not -1: with a lead length of 0, -1 is any length (numpy refuses it)
        lengths = [shape_i(x, i) if n is None else n for i, n in enumerate(rest, ndim - 1)]
        last = lengths[0]
        for n in lengths[1:]:
            last = last * n
    return reshape(x, lead + [last], ndim=ndim)


class RebroadcastAxes(dict):
    """``Rebroadcast.axis``: ``{dimension: broadcastable}``, a dict as Theano's, read-only
    and hashable (it is the op's prop: equal ops hash alike).

    >>> RebroadcastAxes({0: True}) == {0: True}, hash(RebroadcastAxes({0: True})) == hash(
    ...     RebroadcastAxes([(0, True)]))
    (True, True)
    """

    def __hash__(self):
        return hash(tuple(sorted(self.items())))

    def __reduce__(self):
        # pickle and copy would set the items one by one, which is refused
        return (RebroadcastAxes, (list(self.items()),))

    def _read_only(self, *args, **kwargs):
        raise TypeError("Rebroadcast.axis is read-only: make a new Rebroadcast")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _read_only


class Rebroadcast(Op):
    """Declare dimensions of a tensor broadcastable (length 1) or not.

    ``Rebroadcast((0, True), (2, False))`` makes dimension 0 broadcastable and dimension 2
    not. The output is a view of the input; at run time a dimension declared broadcastable
    must have length 1 (ValueError otherwise).

    >>> from theano_dag import tensor as tt
    >>> Rebroadcast((1, True))(tt.dmatrix("x")).type
    TensorType(float64, col)
    """

    __props__ = ("axis",)
    view_map = {0: [0]}

    def __init__(self, *axis):
        pairs = {}
        for item in axis:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise TypeError(f"Rebroadcast: expected (axis, bool) pairs, got {item!r}")
            a, b = item
            if not isinstance(a, (int, np.integer)) or isinstance(a, bool) or a < 0:
                raise TypeError(f"Rebroadcast: axis must be a non-negative int, got {a!r}")
            pairs[int(a)] = bool(b)
        self.axis = RebroadcastAxes(sorted(pairs.items()))

    def __str__(self):
        return "Rebroadcast{" + ",".join(f"({a},{b})" for a, b in self.axis.items()) + "}"

    __repr__ = __str__

    def make_node(self, x):
        x = as_tensor_variable(x)
        shape = list(x.type.shape)
        for a, b in self.axis.items():
            if a >= x.ndim:
                raise ValueError(f"{self}: {x} has {x.ndim} dimensions, there is no dimension {a}")
            if b:
                if shape[a] not in (None, 1):
                    raise ValueError(
                        f"{self}: dimension {a} of {x} has static length {shape[a]}, "
                        "so it cannot be declared broadcastable (length 1)"
                    )
                shape[a] = 1
            else:
                # Not broadcastable: any length, also where the input's is known, as
                # PyTensor's Unbroadcast (and Theano's types, which had no lengths):
                # PyMC3 checks ``unbroadcast(as_tensor_variable([a, b]), 0).type == vector``.
                shape[a] = None
        return Apply(self, [x], [TensorType(x.dtype, shape=tuple(shape))()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        for a, b in self.axis.items():
            if b and x.shape[a] != 1:
                raise ValueError(
                    f"{self}: dimension {a} of the input has length {x.shape[a]}, expected 1 "
                    f"(it was declared broadcastable; the input's shape is {x.shape})"
                )
        output_storage[0][0] = x.view()

    def infer_shape(self, fgraph, node, input_shapes):
        out = list(input_shapes[0])
        for a, b in self.axis.items():
            if b:
                out[a] = 1
        return [tuple(out)]

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        (gz,) = output_grads
        # Back to the input's pattern on the dims this op changed.
        back = Rebroadcast(*[(a, x.type.broadcastable[a]) for a in self.axis])
        return [back(gz)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return self(*eval_points, return_list=True)


def _declared(ttype, axis, broadcastable):
    """Whether ``ttype`` already has what Rebroadcast would declare of ``axis``: length 1,
    or (not broadcastable) no static length."""
    return ttype.shape[axis] == 1 if broadcastable else ttype.shape[axis] is None


def _rebroadcast(x, pairs):
    x = as_tensor_variable(x)
    for a, _ in pairs:
        if not isinstance(a, (int, np.integer)) or not -x.ndim <= a < x.ndim:
            raise ValueError(f"{x} has {x.ndim} dimensions, there is no dimension {a!r}")
    pairs = [(int(a) % x.ndim, b) for a, b in pairs]
    if all(_declared(x.type, a, b) for a, b in pairs):
        return x  # nothing changes: no node (Theano's apply_rebroadcast_opt)
    if x.owner is not None and isinstance(x.owner.op, Rebroadcast):
        # two Rebroadcasts in a row are one, or none when they cancel out
        base = x.owner.inputs[0]
        merged = {**x.owner.op.axis, **dict(pairs)}
        changed = [(a, b) for a, b in merged.items() if not _declared(base.type, a, b)]
        return Rebroadcast(*changed)(base) if changed else base
    return Rebroadcast(*pairs)(x)


def addbroadcast(x, *axes):
    """Declare ``axes`` of ``x`` broadcastable (length 1, checked at run time).

    >>> from theano_dag import tensor as tt
    >>> addbroadcast(tt.dmatrix("x"), 0).broadcastable
    (True, False)
    """
    return _rebroadcast(x, [(a, True) for a in axes])


def unbroadcast(x, *axes):
    """Declare ``axes`` of ``x`` not broadcastable (they may then have any length).

    >>> from theano_dag import tensor as tt
    >>> unbroadcast(tt.row("r"), 0).broadcastable
    (False, False)
    """
    return _rebroadcast(x, [(a, False) for a in axes])


def patternbroadcast(x, broadcastable):
    """Give ``x`` the broadcastable pattern ``broadcastable`` (one bool per dimension; an
    empty one, as a scalar's ``broadcastable``, leaves ``x`` as it is, as Theano's).

    >>> from theano_dag import tensor as tt
    >>> patternbroadcast(tt.dmatrix("x"), (False, True)).type
    TensorType(float64, col)
    >>> m = tt.dmatrix("m")
    >>> patternbroadcast(m, ()) is m
    True
    """
    x = as_tensor_variable(x)
    broadcastable = tuple(broadcastable)
    if not broadcastable:
        return x
    if len(broadcastable) != x.ndim:
        raise ValueError(
            f"patternbroadcast: the pattern {broadcastable} has {len(broadcastable)} entries, "
            f"{x} has {x.ndim} dimensions"
        )
    return _rebroadcast(x, list(enumerate(bool(b) for b in broadcastable)))


class ShapeMismatchError(ValueError, AssertionError):
    """A value whose shape is not the one specified (Theano raised AssertionError)."""


class SpecifyShapeLengthError(TypeError, AssertionError):
    """A specified shape without one entry per dimension (Theano raised AssertionError)."""


class SpecifyShape(Op):
    """``specify_shape(x, shape)``: ``x`` itself, with its shape checked at run time.

    Inputs: ``x`` and an int64 vector with one entry per dimension; a negative entry
    (``None`` in ``specify_shape``) leaves that dimension unchecked. Constant entries
    become the output's static shape. A shape vector of unknown length is checked when the
    graph runs. A value of another shape raises ``ShapeMismatchError`` (a ValueError, and
    the AssertionError Theano raised) naming the expected and the actual shape; a shape
    with the wrong number of entries, a ``SpecifyShapeLengthError`` (a TypeError, and
    Theano's AssertionError).

    >>> from theano_dag import tensor as tt
    >>> specify_shape(tt.dmatrix("x"), (None, 3)).type
    TensorType(float64, shape=(?, 3))
    """

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x, shape):
        x = _as_shaped(x)
        shape = as_int_vector(shape, "SpecifyShape")
        n = shape.type.shape[0]
        known = _shape_entries(shape)
        if n is None and known is not None:
            n = len(known)
        if n is None or not isinstance(x.type, TensorType):
            # A symbolic vector: its length is checked when the graph runs. A value of
            # another type (a sparse matrix) keeps its type, which holds no lengths.
            return Apply(self, [x, shape], [x.type()])
        if n != x.ndim:
            raise SpecifyShapeLengthError(
                f"SpecifyShape: the shape has {n} entries, expected {x.ndim} (one per "
                f"dimension of {x})"
            )
        static = list(x.type.shape)
        for d, k in enumerate(known or [None] * n):
            if k is None or k < 0:
                continue
            if static[d] is not None and static[d] != k:
                raise ValueError(
                    f"SpecifyShape: dimension {d} of {x} has static length {static[d]}, "
                    f"but {k} was specified"
                )
            static[d] = k
        return Apply(self, [x, shape], [TensorType(x.dtype, shape=tuple(static))()])

    def perform(self, node, inputs, output_storage, params=None):
        x, shape = inputs
        if len(shape) != x.ndim or any(s >= 0 and s != d for s, d in zip(shape, x.shape)):
            expected = tuple(int(s) if s >= 0 else None for s in shape)
            raise ShapeMismatchError(
                f"SpecifyShape: expected shape {expected} (None: any length), "
                f"got shape {x.shape}"
            )
        output_storage[0][0] = x.view() if isinstance(x, np.ndarray) else x

    def infer_shape(self, fgraph, node, input_shapes):
        x, shape = node.inputs
        known = _shape_entries(shape) or [None] * x.ndim
        # Each length specified, checked equal to the input's as perform checks them: a
        # negative entry (any length) gives the input's own.
        out = []
        for d, k in enumerate(known):
            n = input_shapes[0][d]
            if k is not None and k < 0:
                out.append(n)
                continue
            what = f"{self} along dimension {d}"
            if k is None:  # the input's length passed, checked unless the entry is negative
                k = _tensor.switch(_tensor.lt(shape[d], 0), n, shape[d])
                names = (f"{x}'s length", "the length specified")
                out.append(equal_lengths([n, k], what, names.__getitem__))
            else:  # the constant passed
                names = ("the length specified", f"{x}'s length")
                out.append(equal_lengths([k, n], what, names.__getitem__))
        return [tuple(out)]

    def connection_pattern(self, node):
        return [[True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        x, shape = inputs
        (gz,) = output_grads
        return [specify_shape(gz, shape), _disconnected()]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return [specify_shape(eval_points[0], inputs[1])]


def _shape_entries(shape):
    """The entries of a shape vector known at build time (None where symbolic)."""

    if isinstance(shape, Constant):
        return [int(v) for v in np.asarray(shape.data).reshape(-1)]
    if shape.owner is not None and isinstance(shape.owner.op, MakeVector):
        return [int(i.data) if isinstance(i, Constant) else None for i in shape.owner.inputs]
    return None


def _as_shaped(x):
    """``x`` as a tensor, or itself when it is a variable of another type with
    dimensions (a sparse matrix: its shape can be specified too, as in Theano)."""
    if isinstance(x, Variable) and not isinstance(x.type, TensorType) and hasattr(x, "ndim"):
        return x
    return as_tensor_variable(x)


def specify_shape(x, shape):
    """``x`` with its shape promised to be ``shape`` (checked at run time).

    ``shape`` is a tuple of ints, int scalars and ``None`` (any length), or an int vector
    (for instance another tensor's ``.shape``).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> y = specify_shape(x, (3,))
    >>> y.type, y.eval({x: np.ones(3)}).shape
    (TensorType(float64, shape=(3,)), (3,))
    """
    x = _as_shaped(x)
    if isinstance(shape, (list, tuple)):
        if len(shape) != x.ndim:
            raise TypeError(
                f"specify_shape: the shape {tuple(shape)} has {len(shape)} entries, expected "
                f"{x.ndim} (one per dimension of {x})"
            )
        shape = [constant(np.int64(-1)) if s is None else s for s in shape]
        if not shape:
            shape = constant(np.zeros(0, dtype="int64"))
    return SpecifyShape()(x, shape)


class LengthMismatchError(ValueError, AssertionError):
    """Lengths that an op needs equal (the lengths its inputs share along a dimension)
    differ when the graph runs: numpy refuses such values (a ValueError); PyTensor's
    shape graphs raise AssertionError."""


class _LengthCheck(Op):
    """A check in a shape computation: its first input passed on, shaped as it is, with
    no gradient (what it checks is lengths and indices, not values)."""

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[False] for _ in node.inputs]

    def L_op(self, inputs, outputs, output_grads):
        return [_disconnected() for _ in inputs]


class EqualLengths(_LengthCheck):
    """``EqualLengths(what, names)(n, *others)``: the length ``n``, once every length of
    the node equals it; else ``LengthMismatchError`` naming ``what`` (the op and the
    dimension that need them equal), each length by its name in ``names`` and its value,
    and ``hint`` where one of them is 1 (an elementwise op's rule of broadcasting).

    A shape computed without the value (``(x * y).shape``) takes one input's length
    where the op would check that they agree: this keeps the check. ``guard=True``: the
    first input is a length passed through unchecked, and the others are the lengths
    compared (the inner lengths of a product, which are no length of its result); it may
    be the empty shape of a 0-d value (an int vector), which has no length to carry the
    check. Made by :func:`equal_lengths`, which leaves out the lengths known equal.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> n = EqualLengths("add along dimension 0", ("x", "y"))(x.shape[0], y.shape[0])
    >>> int(n.eval({x: np.ones(3), y: np.ones(3)}))
    3
    """

    __props__ = ("what", "names", "guard", "hint")
    view_map = {0: [0]}

    def __init__(self, what, names, guard=False, hint=""):
        self.what = what
        self.names = tuple(names)
        self.guard = bool(guard)
        self.hint = hint

    def __str__(self):
        return "EqualLengths{guard}" if self.guard else "EqualLengths"

    def make_node(self, *lengths):
        lengths = [as_tensor_variable(n) for n in lengths]
        for k, n in enumerate(lengths):
            # (the guard may be a 0-d value's shape: the empty int vector)
            ndims = (0, 1) if self.guard and k == 0 else (0,)
            if n.ndim not in ndims or n.dtype not in discrete_dtypes:
                raise TypeError(f"EqualLengths: each length must be an int scalar, got {n.type}")
        if len(lengths) - self.guard != len(self.names):
            raise TypeError(
                f"EqualLengths: {len(self.names)} names for "
                f"{len(lengths) - self.guard} lengths compared"
            )
        return Apply(self, lengths, [lengths[0].type()])

    def perform(self, node, inputs, output_storage, params=None):
        compared = inputs[1:] if self.guard else inputs
        first = compared[0]
        for n in compared[1:]:
            if n != first:
                raise LengthMismatchError(self.message(compared))
        output_storage[0][0] = inputs[0]

    def message(self, lengths):
        """The error of lengths that differ, naming each."""
        lengths = [int(n) for n in lengths]
        listed = ", ".join(f"{name}: {n}" for name, n in zip(self.names, lengths))
        msg = f"{self.what}: lengths that must be equal differ ({listed})"
        if self.hint and 1 in lengths:
            msg += f" ({self.hint})"
        return msg


def _length_key(n):
    """What identifies a length known equal to another: its value when known (an int, a
    constant), the input and dimension of a ``Shape_i``, else the variable."""
    if isinstance(n, (int, np.integer)):
        return int(n)
    if isinstance(n, Constant):
        v = np.asarray(n.data)
        return int(v) if v.ndim == 0 and v.dtype.kind in "iub" else n
    owner = n.owner
    if owner is not None and isinstance(owner.op, Shape_i):
        return (owner.inputs[0], owner.op.i)
    return n


def equal_lengths(lengths, what, name_of=None, guard=None, hint="", nested=True):
    """The one length of ``lengths`` (ints, int scalar variables), which must all be
    equal: ``lengths[0]`` when they are known equal (the same int or constant, the same
    variable's length), else an :class:`EqualLengths` node that checks them when the graph
    runs. Ints that differ raise :class:`LengthMismatchError` now. ``what`` names the op
    and the dimension that need them equal; ``name_of(k)`` names ``lengths[k]`` (called
    only when a check is made); ``hint`` follows the lengths in the error where one is 1.
    With ``guard`` (a length), ``guard`` itself is returned, checked by the lengths'
    agreement. A length that is a check's gives that check's lengths instead, where
    ``nested`` (a bool, or a function of the check's output) says so: a caller that
    knows the check is read elsewhere (it then stays) keeps it as one length.

    >>> from theano_dag import tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> equal_lengths([3, 3], "add"), equal_lengths([shape_i(x, 0), shape_i(x, 0)], "add")
    (3, Shape_i{0}.0)
    >>> n = equal_lengths([shape_i(x, 0), shape_i(y, 0)], "add", ["x", "y"].__getitem__)
    >>> n.owner.op.names
    ('x', 'y')
    >>> equal_lengths([3, 4], "add")
    Traceback (most recent call last):
    ...
    theano_dag.tensor.shape.LengthMismatchError: add: lengths that must be equal differ ...
    """
    if name_of is None:
        name_of = "length {}".format
    # (lengths, names) of the lengths to compare, one of each group known equal; a check
    # met among them (a shape made of shapes) gives its own lengths.
    # A length known equal to one kept but passed on by its own checks of indices (an
    # index read's, IndicesInBounds): those checks guard the result.
    kept, names, keys, inners, bounded = [], [], [], [], []
    for k, n in enumerate(lengths):
        owner = getattr(_bounds_passed(n), "owner", None)
        if (
            owner is not None
            and isinstance(owner.op, EqualLengths)
            and not owner.op.guard
            and (nested(owner.outputs[0]) if callable(nested) else nested)
        ):
            parts = list(zip(owner.inputs, owner.op.names))
            if owner.outputs[0] is not n:
                bounded.append(n)
        else:
            parts = [(n, None)]
        for part, name in parts:
            if any(part is other for other in kept):
                continue
            inner = _bounds_passed(part)
            key = _length_key(inner)
            if key in keys or (
                isinstance(key, Variable)
                and any(
                    isinstance(other, Variable) and equal_computations([inner], [other])
                    for other in inners
                )
            ):
                if inner is not part:
                    bounded.append(part)
                continue
            kept.append(part)
            names.append(name if name is not None else k)
            keys.append(key)
            inners.append(inner)
    if len(kept) <= 1:
        return _rebound(guard if guard is not None else lengths[0], bounded)
    known = [(key, name) for key, name in zip(keys, names) if type(key) is int]
    if len(known) > 1:  # lengths known now to differ (equal ones were kept once)
        check = EqualLengths(what, [_name(name_of, name) for _, name in known], hint=hint)
        raise LengthMismatchError(check.message([key for key, _ in known]))
    names = tuple(_name(name_of, name) for name in names)
    if guard is not None:
        return _rebound(EqualLengths(what, names, guard=True, hint=hint)(guard, *kept), bounded)
    return _rebound(EqualLengths(what, names, hint=hint)(*kept), bounded)


def _bounds_passed(n):
    """``n`` without the checks of indices (``IndicesInBounds``) at its top."""
    while isinstance(getattr(n, "owner", None), Apply) and isinstance(n.owner.op, IndicesInBounds):
        n = n.owner.inputs[0]
    return n


def _rebound(n, bounded):
    """``n`` passed on by the checks of indices at the top of each of ``bounded``."""
    for b in bounded:
        checks = []
        while b is not _bounds_passed(b):
            checks.append(b.owner)
            b = b.owner.inputs[0]
        for node in reversed(checks):
            n = node.op(n, *node.inputs[1:])
    return n


class _CheckedEmptyShape(tuple):
    """The shape ``()`` of a 0-d result, with ``checks``: the checks its op makes
    (``EqualLengths`` and ``IndicesInBounds`` outputs), which the shape graph keeps (it
    has no length to guard)."""

    checks = ()


class IndicesInBounds(_LengthCheck):
    """``IndicesInBounds(what)(n, indices, length)``: ``n`` (a length, or a 0-d value's
    empty shape), once every entry of ``indices`` (an int scalar or array) lies in
    ``[-length, length)``, numpy's bounds for an index into a dimension of that length;
    else IndexError naming ``what`` (the op and what it indexes), the index and the
    length. A shape computed without the value of an index read (``v[i].shape``) keeps
    the read's refusal of an index out of range so (:func:`in_bounds_shape`).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> v, i = tt.dvector("v"), tt.lvector("i")
    >>> n = IndicesInBounds("v[i]")(i.shape[0], i, v.shape[0])
    >>> int(n.eval({v: np.ones(3), i: [0, -3, 2]}))
    3
    >>> try:
    ...     n.eval({v: np.ones(3), i: [0, 5]})
    ... except IndexError as err:
    ...     print(str(err).splitlines()[0])
    v[i]: index 5 is out of bounds for a length of 3 (an index lies in [-3, 3))
    """

    __props__ = ("what",)
    view_map = {0: [0]}

    def __init__(self, what):
        self.what = what

    def __str__(self):
        return "IndicesInBounds"

    def make_node(self, n, indices, length):
        n, indices, length = (as_tensor_variable(x) for x in (n, indices, length))
        for x, ndims, asked in [
            (n, (0, 1), "a length or a shape"),
            (indices, range(indices.ndim + 1), "int indices"),
            (length, (0,), "a length"),
        ]:
            if x.ndim not in ndims or x.dtype not in discrete_dtypes:
                raise TypeError(f"IndicesInBounds: expected {asked} (ints), got {x.type}")
        return Apply(self, [n, indices, length], [n.type()])

    def perform(self, node, inputs, output_storage, params=None):
        n, indices, length = inputs
        indices, length = np.asarray(indices), int(length)
        if indices.size:
            low, high = int(indices.min()), int(indices.max())
            if low < -length or high >= length:
                raise IndexError(self.message(high if high >= length else low, length))
        output_storage[0][0] = n

    def message(self, index, length):
        """The error of ``index`` out of bounds for ``length``."""
        return (
            f"{self.what}: index {index} is out of bounds for a length of {length} "
            f"(an index lies in [-{length}, {length}))"
        )


def in_bounds_shape(shape, indexed, what):
    """``shape`` (an index read's result's lengths) with each length passed on once each
    ``(indices, length, name)`` of ``indexed`` holds indices in bounds for that length
    (:class:`IndicesInBounds`, ``what`` naming the op, ``name`` what it indexes); for an
    empty ``shape`` (a 0-d result's), ``()`` carrying them as its ``checks``. Indices and
    a length known now are checked now (IndexError); a length given as an int (an
    engine planning a run, which computes the value and its checks) is not checked.

    >>> from theano_dag import tensor as tt
    >>> v, i = tt.dvector("v"), tt.lvector("i")
    >>> (n,) = in_bounds_shape((shape_i(i, 0),), [(i, shape_i(v, 0), "v")], "v[i]")
    >>> n.owner.op, n.owner.op.what
    (IndicesInBounds, 'v[i]: v')
    >>> in_bounds_shape((4,), [(2, 3, "v")], "v[2]")
    (4,)
    """
    checks = []
    for indices, length, name in indexed:
        if not isinstance(length, Variable):
            continue
        op = IndicesInBounds(f"{what}: {name}")
        known, n = _const_ints(indices), _length_key(length)
        if known is not None and isinstance(n, int):
            bad = [k for k in known.ravel() if not -n <= k < n]
            if bad:
                raise IndexError(op.message(int(bad[0]), n))
            continue
        checks.append(op(length, indices, length))
    if not shape:
        out = _CheckedEmptyShape()
        out.checks = tuple(checks)
        return out
    out = []
    for n in shape:
        for c in checks:
            n = c.owner.op(n, *c.owner.inputs[1:])
        out.append(n)
    return tuple(out)


def _const_ints(x):
    """The ints of ``x`` (an int, an array, a constant) when known now, else None."""
    if isinstance(x, Constant):
        x = x.data
    if isinstance(x, Variable):
        return None
    return np.asarray(x, dtype="int64")


def spread_length(n, length, what):
    """``n``, a length asked of a value of length ``length`` along that dimension (an
    alloc's, a write into a part of ``n``): checked equal to ``length`` unless ``length``
    is 1, which numpy spreads (:func:`equal_lengths`; ``what`` names the op and the
    dimension).

    >>> from theano_dag import tensor as tt
    >>> spread_length(4, 1, "alloc"), spread_length(4, 4, "alloc")
    (4, 4)
    >>> n = spread_length(tt.lscalar("n"), shape_i(tt.dvector("v"), 0), "alloc")
    >>> n.owner.op.names
    ('the length asked', "the value's length")
    """
    spread = spread_compared(n, length, what)
    if spread is None:
        return n
    return equal_lengths([n, spread], what, SPREAD_NAMES.__getitem__)


# The names of the lengths spread_length compares.
SPREAD_NAMES = ("the length asked", "the value's length")


def spread_compared(n, length, what, names=SPREAD_NAMES):
    """What ``spread_length`` compares with ``n``: None where ``length`` is known to be 1
    or ``n``, else ``length``, or ``n`` where it is 1 at run time (ints that differ, 1
    aside, raise ``LengthMismatchError`` now, naming them by ``names``)."""
    try:
        checked = equal_lengths([n, length], what, names.__getitem__)
    except LengthMismatchError:
        if int(_length_key(length)) == 1:
            return None
        raise
    if checked is n or getattr(checked, "owner", None) is None:
        return None  # known equal
    if _bounds_passed(checked) is n:
        # known equal, ``length`` passed on by checks of indices (a value read by
        # index): nothing to compare; those checks are the value's own
        return None
    if _length_key(length) == 1:
        return None
    return _tensor.switch(_tensor.eq(length, 1), n, length)


def broadcast_length(lengths, what, names):
    """numpy's broadcast of ``lengths``, the lengths of arrays broadcast together along
    one dimension (index arrays are, whatever their types declare): a length 1 spreads,
    and two others must be equal, checked where they may differ (:func:`equal_lengths`,
    one check for each length met, naming it by ``names[k]`` and the lengths before it
    by the broadcast of theirs: one of them may be 1); 1 where every length is.

    >>> from theano_dag import tensor as tt
    >>> broadcast_length([1, 3, 3], "index", ("i", "j", "k"))
    3
    >>> i, j = tt.lvector("i"), tt.lvector("j")
    >>> n = broadcast_length([shape_i(i, 0), shape_i(j, 0)], "index", ("i", "j"))
    >>> n.owner.op.names, int(n.eval({i: [0, 1], j: [2]}))
    (('i', 'j'), 2)
    """
    out, out_names = None, []
    for n, name in zip(lengths, names):
        if _length_key(n) == 1:
            continue
        if out is None:
            out, out_names = n, [name]
            continue
        out_name = out_names[0]
        if len(out_names) > 1:  # (the length of their broadcast: one may be 1)
            out_name = f"the broadcast of {', '.join(out_names[:-1])} and {out_names[-1]}"
        # ints that differ raise here; lengths known equal give out itself
        checked = equal_lengths([out, n], what, (out_name, name).__getitem__)
        if checked is out or getattr(checked, "owner", None) is None:
            continue
        if _bounds_passed(checked) is out:  # known equal, n's checks of indices kept
            out = checked
            continue
        # out, or n where out is 1, compared with n, or with out where n is 1
        if not isinstance(_length_key(out), int):
            out = _tensor.switch(_tensor.eq(out, 1), n, out)
        spread = n if isinstance(_length_key(n), int) else _tensor.switch(_tensor.eq(n, 1), out, n)
        out = equal_lengths([out, spread], what, (out_name, name).__getitem__)
        out_names.append(name)
    return 1 if out is None else out


def broadcast_shapes(shapes, what, names):
    """numpy's broadcast of arrays of shapes ``shapes`` (tuples of lengths, right-aligned):
    :func:`broadcast_length` along each dimension ``k`` of the result, its check named
    ``f"{what} broadcast along dimension {k}"`` and the arrays by ``names``.

    >>> broadcast_shapes([(3, 1), (4,)], "x and y", ("x", "y"))
    [3, 4]
    """
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(nd):
        lengths, named = [], []
        for s, name in zip(shapes, names):
            if len(s) - nd + k >= 0:
                lengths.append(s[len(s) - nd + k])
                named.append(name)
        out.append(broadcast_length(lengths, f"{what} broadcast along dimension {k}", named))
    return out


def checked_shape(shape, lengths, what, names):
    """``shape`` (a result's lengths), each length checked by the agreement of
    ``lengths``: lengths that must be equal and are no length of the result (a product's
    inner lengths), named by ``names``; see :func:`equal_lengths`. An empty ``shape``
    (a 0-d result's) is ``()`` carrying the check as its ``checks``, which the shape
    graph keeps.

    >>> from theano_dag import tensor as tt
    >>> m, v = tt.dmatrix("m"), tt.dvector("v")
    >>> (n,) = checked_shape((shape_i(m, 0),), [shape_i(m, 1), shape_i(v, 0)], "dot", ("m", "v"))
    >>> n.owner.op.guard, n.owner.inputs[0].owner.op
    (True, Shape_i{0})
    """
    if not shape:
        out = _CheckedEmptyShape()
        check = equal_lengths(lengths, what, names.__getitem__)
        if isinstance(getattr(check, "owner", None), Apply) and isinstance(
            check.owner.op, EqualLengths
        ):
            out.checks = (check,)
        return out
    return tuple(equal_lengths(lengths, what, names.__getitem__, guard=n) for n in shape)


def _name(name_of, x):
    return x if isinstance(x, str) else name_of(x)


def shape_padleft(t, n_ones=1):
    """``t`` with ``n_ones`` broadcastable dimensions added on the left.

    >>> from theano_dag import tensor as tt
    >>> shape_padleft(tt.dvector("v"), 2).broadcastable
    (True, True, False)
    """
    t = as_tensor_variable(t)
    return DimShuffle(t.broadcastable, ["x"] * n_ones + list(range(t.ndim)))(t)


def shape_padright(t, n_ones=1):
    """``t`` with ``n_ones`` broadcastable dimensions added on the right.

    >>> from theano_dag import tensor as tt
    >>> shape_padright(tt.dvector("v")).broadcastable
    (False, True)
    """
    t = as_tensor_variable(t)
    return DimShuffle(t.broadcastable, list(range(t.ndim)) + ["x"] * n_ones)(t)


def shape_padaxis(t, axis):
    """``t`` with a broadcastable dimension inserted at ``axis`` (negative counts from the
    end of the result, as ``numpy.expand_dims``).

    >>> from theano_dag import tensor as tt
    >>> shape_padaxis(tt.dmatrix("m"), -1).broadcastable
    (False, False, True)
    """
    t = as_tensor_variable(t)
    if not isinstance(axis, (int, np.integer)) or not -t.ndim - 1 <= axis <= t.ndim:
        raise IndexError(
            f"shape_padaxis: axis {axis!r} is out of range [{-t.ndim - 1}, {t.ndim}] for "
            f"the {t.ndim}-d {t}"
        )
    order = list(range(t.ndim))
    order.insert(int(axis) % (t.ndim + 1), "x")
    return DimShuffle(t.broadcastable, order)(t)


def expand_dims(a, axis):
    """``numpy.expand_dims``: insert broadcastable dimensions at ``axis`` (an int or a
    tuple of ints, positions in the result).

    >>> from theano_dag import tensor as tt
    >>> expand_dims(tt.dvector("v"), (0, 2)).type
    TensorType(float64, shape=(1, ?, 1))
    """
    a = as_tensor_variable(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out_ndim = a.ndim + len(axes)
    norm = []
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or not -out_ndim <= ax < out_ndim:
            raise ValueError(f"expand_dims: axis {ax!r} is out of range for a {out_ndim}-d result")
        norm.append(int(ax) % out_ndim)
    if len(set(norm)) != len(norm):
        raise ValueError(f"expand_dims: repeated axis in {axis}")
    dims = iter(range(a.ndim))
    order = ["x" if d in norm else next(dims) for d in range(out_ndim)]
    return DimShuffle(a.broadcastable, order)(a)
