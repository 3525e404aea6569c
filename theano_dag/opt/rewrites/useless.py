"""Useless-code removal: nodes that compute nothing new are replaced by their input.

These rules only remove work. They run early, in one pass (the ``useless`` TopoDB at
position 0.6), and again inside ``canonicalize``, where other rewrites create new
opportunities. Nodes nothing depends on any more are pruned by the FunctionGraph itself.
"""

from __future__ import annotations

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import Constant
from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import (
    client_length_sources,
    const_value,
    elemwise_of,
    fit,
    index_entries,
    index_in_range,
    length_sources,
    lengths_checked,
    scalar_op,
    sources_cover,
    value_computed,
)
from theano_dag.tensor import math as tm
from theano_dag.tensor.arrays import Assert, MaxAndArgmax
from theano_dag.tensor.basic import Alloc, Join, Tile, fill
from theano_dag.tensor.basic import cast as tcast
from theano_dag.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from theano_dag.tensor.math import Argmax
from theano_dag.tensor.shape import (
    EqualLengths,
    IndicesInBounds,
    LengthMismatchError,
    MakeVector,
    Reshape,
    Shape,
    Shape_i,
    equal_lengths,
    shape_i,
)
from theano_dag.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    IncSubtensor,
    Subtensor,
)
from theano_dag.tensor.type import all_dtypes

# Casts to every dtype (a cast to the dtype its input has does nothing).
CASTS = [elemwise_of(ts.convert_to(d)) for d in all_dtypes if d != "float16"]

__all__ = [
    "is_length_of",
    "local_remove_identity_op",
    "local_useless_equal_lengths",
    "local_useless_elemwise",
    "local_useless_dimshuffle",
    "local_useless_reshape",
    "local_useless_alloc",
    "local_useless_switch",
    "local_useless_reduce",
    "local_useless_fill",
    "local_fill_of_fill",
    "local_incsubtensor_of_zeros",
    "local_setsubtensor_of_constants",
    "local_remove_useless_assert",
    "local_remove_all_assert",
    "local_cast_cast",
    "local_useless_composite",
    "local_join_1",
    "local_useless_tile",
]


useless = RULES.useless  # each rule runs in the useless pass and in canonicalize


@useless()
@local_optimizer([ViewOp, DeepCopyOp, tm.identity], fit=fit)
def local_remove_identity_op(fgraph, node):
    """Identity ops go: ViewOp (and the gradient ops built on it: ZeroGrad, GradClip...),
    DeepCopyOp, Elemwise{identity}. ``function`` adds the copies its outputs need after
    optimization."""
    # view_op(x) -> x, deep_copy(x) -> x, zero_grad(x) -> x, identity(x) -> x
    op = node.op
    if isinstance(op, Elemwise):
        if not isinstance(scalar_op(node), ts.Identity):
            return False
    elif not isinstance(op, (ViewOp, DeepCopyOp)):
        return False
    return node.inputs[0]


@useless()
@local_optimizer([tm.add, tm.mul, tm.maximum, tm.minimum, tm.and_, tm.or_, *CASTS], fit=fit)
def local_useless_elemwise(fgraph, node):
    """Elemwise ops that return one of their inputs unchanged."""
    # add(x) -> x, mul(x) -> x, maximum(x, x) -> x, minimum(x, x) -> x, second(x, y) of
    # same-shaped x -> y, cast(x) -> x (same dtype)
    sop = scalar_op(node)
    if sop is None:
        return False
    out = node.outputs[0]
    ins = node.inputs
    if len(ins) == 1 and isinstance(sop, (ts.Add, ts.Mul)):
        new = ins[0]
    elif isinstance(sop, ts.Cast) and ins[0].dtype == sop.o_type:
        new = ins[0]
    elif isinstance(sop, (ts.Maximum, ts.Minimum)) and ins[0] is ins[1]:
        new = ins[0]
    elif isinstance(sop, (ts.AND, ts.OR)) and ins[0] is ins[1] and ins[0].dtype == "bool":
        new = ins[0]
    else:
        return False
    return fit(out, new, ins)


@useless()
@local_optimizer([DimShuffle], fit=fit)
def local_useless_dimshuffle(fgraph, node):
    """A DimShuffle that keeps every dimension in place."""
    # dimshuffle{0,1,...}(x) -> x
    op = node.op
    if op.new_order != tuple(range(len(op.input_broadcastable))):
        return False
    return node.inputs[0]


def _shape_entries(shp):
    """The entries of a shape vector as variables (or ints), or None when not known."""
    if isinstance(shp, Constant):
        return [int(v) for v in np.asarray(shp.data)]
    if shp.owner is not None and isinstance(shp.owner.op, MakeVector):
        return list(shp.owner.inputs)
    return None


def _entry_value(entry):
    """The int a shape entry is known to hold, else None."""
    if isinstance(entry, (int, np.integer)):
        return int(entry)
    v = const_value(entry)
    return None if v is None else int(v)


def is_length_of(entry, x, d) -> bool:
    """Whether the length ``entry`` (a scalar variable or an int) is known to be
    ``x.shape[d]``: ``Shape_i`` or ``shape(x)[d]`` of ``x``, or the constant of ``x``'s
    static length.

    >>> import theano_dag.tensor as tt
    >>> m = tt.dmatrix("m")
    >>> is_length_of(m.shape[1], m, 1), is_length_of(m.shape[1], m, 0)
    (True, False)
    """
    if isinstance(entry, (int, np.integer)):
        return x.type.shape[d] == entry
    v = const_value(entry)
    if v is not None:
        return x.type.shape[d] == int(v)
    owner = entry.owner
    if owner is None:
        return False
    if isinstance(owner.op, Shape_i):
        return owner.inputs[0] is x and owner.op.i == d
    if isinstance(owner.op, Subtensor) and owner.op.idx_list == (("int",),):  # shape(x)[d]
        shp, i = owner.inputs
        return (
            shp.owner is not None
            and isinstance(shp.owner.op, Shape)
            and shp.owner.inputs[0] is x
            and const_value(i) is not None
            and int(const_value(i)) == d
        )
    return False


@useless()
@local_optimizer([Reshape], fit=fit)
def local_useless_reshape(fgraph, node):
    """A reshape to the shape the input already has."""
    # reshape(x, shape(x)) -> x ; reshape(x, [shape_i(x, 0), ...]) -> x
    x, shp = node.inputs
    if x.ndim != node.op.ndim:
        return False
    if shp.owner is not None and isinstance(shp.owner.op, Shape) and shp.owner.inputs[0] is x:
        new = x
    else:
        entries = _shape_entries(shp)
        if entries is None or len(entries) != x.ndim:
            return False
        # Every length is x's own, but for at most one -1 (which is then the one left).
        unknown = [d for d, e in enumerate(entries) if not is_length_of(e, x, d)]
        if len(unknown) > 1 or unknown and _entry_value(entries[unknown[0]]) != -1:
            return False
        new = x
    return new


@useless()
@local_optimizer([Alloc], fit=fit)
def local_useless_alloc(fgraph, node):
    """An alloc of a value that already has the requested shape."""
    # alloc(x, x.shape[0], ..., x.shape[n-1]) -> x
    value, *shape = node.inputs
    out = node.outputs[0]
    if value.ndim != len(shape) or value.dtype != out.dtype:
        return False
    if not all(is_length_of(s, value, d) for d, s in enumerate(shape)):
        return False
    return value


@useless()
@local_optimizer([elemwise_of(ts.switch)], fit=fit)
def local_useless_switch(fgraph, node):
    """A switch whose condition is a constant, or whose branches are the same (one of
    them, maybe, passed on by checks of indices: the switch computes both branches, and
    so runs those checks, which the result keeps)."""
    # switch(1, a, b) -> a ; switch(0, a, b) -> b ; switch(c, a, a) -> a
    # switch(c, a, indices_in_bounds(a, i, n)) -> indices_in_bounds(a, i, n)
    if not isinstance(scalar_op(node), ts.Switch):
        return False
    cond, a, b = node.inputs
    out = node.outputs[0]
    same = _same_branch(a, b)
    if same is not None:
        new = fit(out, same, [cond])
        # the condition's lengths are checked against the branch's by the switch (numpy
        # raises where they differ): kept where nothing else checks them
        return new if new is not None and lengths_checked(out, new, fgraph) else False
    c = const_value(cond)
    if c is None:
        return None
    return fit(out, a if c else b, [cond, b if c else a])


def _same_branch(a, b):
    """The branch to keep where ``a`` and ``b`` are one value (one of them, maybe, that
    value passed on by checks of indices: that one), else None."""
    if a is b:
        return a
    for kept, other in ((a, b), (b, a)):
        inner = kept
        while inner.owner is not None and isinstance(inner.owner.op, IndicesInBounds):
            inner = inner.owner.inputs[0]
            if inner is other:
                return kept
    return None


@useless("local_cut_useless_reduce")  # Theano's name for it, as a tag: excluding() takes it
@local_optimizer([CAReduce], fit=fit)
def local_useless_reduce(fgraph, node):
    """A reduction over no axis, or only over dimensions of length 1."""
    # sum(x, axis=()) -> x ; max(x_col, axis=1) -> x_col.dimshuffle(0)
    x = node.inputs[0]
    axes = node.op._axes(x.ndim)
    if any(not x.type.broadcastable[a] for a in axes):
        return False
    kept = [d for d in range(x.ndim) if d not in axes]
    new = DimShuffle(x.broadcastable, kept)(x) if axes else x
    if isinstance(node.op.scalar_op, (ts.AND, ts.OR)) and x.dtype != "bool":
        new = tm.neq(new, 0)  # all/any of one number: whether it is nonzero
    acc = node.op.acc_dtype_for(x.dtype)
    if not ts.converts_exactly(x.dtype, acc):
        # The one element passes through the accumulator, as the op computes it: an int32
        # summed with acc_dtype="int16" wraps there (100000 -> -31072), then widens.
        new = tcast(new, acc)
    return new


@useless()
@local_optimizer([elemwise_of(ts.second)], fit=fit)
def local_useless_fill(fgraph, node):
    """``fill(x, y)`` when ``y`` already has the shape of the result, with lengths known
    equal to ``x``'s (``length_sources``: else the fill checks them).

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> local_useless_fill.transform(None, tt.fill(tt.exp(y), y).owner)
    [y]
    >>> local_useless_fill.transform(None, tt.fill(x, y).owner)
    False
    """
    # fill(x, y) -> y   when x broadcasts along every dimension y varies along
    if not isinstance(scalar_op(node), ts.Second):
        return False
    x, y = node.inputs
    out = node.outputs[0]
    if y.ndim != out.ndim:
        return False
    if any(not xb and yb for xb, yb in zip(x.broadcastable, y.broadcastable)):
        return False
    memo: dict = {}
    for d, xb in enumerate(x.broadcastable):
        if xb:
            continue
        given = length_sources(y, d, fgraph, _memo=memo)
        given |= client_length_sources(fgraph, out, d, memo)
        if not sources_cover(length_sources(out, d, fgraph, _memo=memo), given):
            return False  # the fill checks x's length against y's
    raising = _may_raise(x)
    if raising is not None and not value_computed(fgraph, raising, besides=node):
        return False  # x's value may not exist (the max of nothing): the fill raises then
    return y


def _may_raise(var):
    """The value under ``var``'s broadcasts whose node may raise on values of its inputs'
    types (an integer or advanced index out of range, the max, min or argmax of what may
    be empty, a check of indices), or None. A fill whose model is such a value raises
    where the value does, as numpy's broadcast of it would (``fill(x[0], y)`` of an empty
    ``x``), so it is kept where nothing else computes the value."""
    while var.owner is not None and isinstance(var.owner.op, DimShuffle):
        var = var.owner.inputs[0]
    node = var.owner
    if node is None:
        return None
    op = node.op
    if isinstance(op, Subtensor):
        may = any(entry[0] == "int" for entry in op.idx_list)
    elif isinstance(op, CAReduce):
        # (a Max with empty_identity, a log-sum-exp's shift, has a value of nothing)
        may = isinstance(op.scalar_op, (ts.Maximum, ts.Minimum)) and (
            op.initial_for(var.dtype) is None
        )
    else:
        may = isinstance(
            op, (AdvancedSubtensor1, AdvancedSubtensor, Argmax, MaxAndArgmax, IndicesInBounds)
        )
    return var if may else None


@useless()
@local_optimizer([elemwise_of(ts.second)], fit=fit)
def local_fill_of_fill(fgraph, node):
    """A fill of a fill that kept its first argument's shape: only the outer value
    counts (the zeros of a gradient built as ``fill(fill(x, 1), 0)``).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> new = local_fill_of_fill.transform(None, tt.fill(tt.fill(x, 1.0), 0.0).owner)[0]
    >>> new.owner.inputs[0] is x
    True
    """
    # fill(fill(x, a), b) -> fill(x, b)   when fill(x, a) has x's shape
    if not isinstance(scalar_op(node), ts.Second):
        return False
    inner, value = node.inputs
    if inner.owner is None or not isinstance(scalar_op(inner.owner), ts.Second):
        return False
    x = inner.owner.inputs[0]
    if x.type.broadcastable != inner.type.broadcastable:
        return False  # a widened x's shape: the inner fill decides the result's
    return node.op(x, value)


_INC_SUBTENSORS = (IncSubtensor, AdvancedIncSubtensor1, AdvancedIncSubtensor)


@useless()
@local_optimizer(list(_INC_SUBTENSORS), fit=fit)
def local_incsubtensor_of_zeros(fgraph, node):
    """Adding zeros to a part of ``x`` leaves ``x`` (Theano's name)."""
    # inc_subtensor(x[idx], zeros) -> x
    op = node.op
    if op.inplace or op.set_instead_of_inc:
        return False
    x, y = node.inputs[:2]
    v = const_value(y)
    if v is None or v != 0:
        return False
    return _with_indices_checked(node, x)


def _with_indices_checked(node, x):
    """``x`` (what ``node``, an increment or set of a part, gives where it changes
    nothing) with the check of ``node``'s indices kept: numpy raises IndexError where an
    index lies out of range, and so does ``fill(n, x)`` of a length ``n`` that
    ``IndicesInBounds`` passes on once the indices are in bounds (a fill
    ``local_useless_fill`` keeps). ``x`` itself where no index may lie out of range (a
    slice, a constant within a length known statically); False (the node stays) where
    an index is a boolean mask."""
    op = node.op
    if isinstance(op, IncSubtensor):
        entries = index_entries(node)
        indexed = [(e, d) for d, e in enumerate(entries) if not isinstance(e, slice)]
    elif isinstance(op, AdvancedIncSubtensor1):
        indexed = [(node.inputs[2], 0)]
    else:
        entries, _ = AdvancedSubtensor(op.idx_list).walk(x, node.inputs[2:])
        if any(kind == "adv" and vals[0].dtype == "bool" for kind, _, vals in entries):
            return False
        indexed = [(vals[0], d) for kind, d, vals in entries if kind == "adv"]
    n = None
    for i, d in indexed:
        if index_in_range(i, x.type.shape[d]):
            continue
        what = f"{op}: dimension {d}"
        n = IndicesInBounds(what)(shape_i(x, d) if n is None else n, i, shape_i(x, d))
    return x if n is None else fill(n, x)


@useless()
@local_optimizer(list(_INC_SUBTENSORS), fit=fit)
def local_setsubtensor_of_constants(fgraph, node):
    """Setting a part of ``x`` to the constant ``x`` already holds everywhere leaves
    ``x`` (Theano's name)."""
    # set_subtensor(fill(x, c)[idx], c) -> fill(x, c)
    op = node.op
    if op.inplace or not op.set_instead_of_inc:
        return False
    x, y = node.inputs[:2]
    vx, vy = const_value(x), const_value(y)
    if vx is None or vy is None or vx != vy or np.isnan(vx):
        return False
    return _with_indices_checked(node, x)


@useless()
@local_optimizer([Assert])
def local_remove_useless_assert(fgraph, node):
    """The conditions of an Assert known to be true go; with none left, so does the
    Assert. A condition known false stays (it raises when run).

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dscalar("x"), tt.dscalar("y")
    >>> a = Assert()(x, y, tt.constant(1))  # a constant 1 built into the node by hand
    >>> local_remove_useless_assert.transform(None, a.owner)[0].owner.inputs
    [x, y]
    """
    # assert(x, 1, c) -> assert(x, c) ; assert(x, 1) -> x
    value, *conds = node.inputs
    kept = []
    for c in conds:
        v = const_value(c)
        if v is None or not bool(v):
            kept.append(c)
    if len(kept) == len(conds):
        return False
    return [node.op(value, *kept)] if kept else [value]


@useless()
@local_optimizer([EqualLengths])
def local_useless_equal_lengths(fgraph, node):
    """The lengths of a check known equal (the same constant, the same variable's
    length) are checked once; a check of a check that nothing else reads checks its
    lengths; with one length left, the check goes.

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> n = EqualLengths("add", ("x", "y", "x again"))(x.shape[0], y.shape[0], x.shape[0])
    >>> local_useless_equal_lengths.transform(None, n.owner)[0].owner.op.names
    ('x', 'y')
    """
    # equal_lengths(a, b, a) -> equal_lengths(a, b) ; equal_lengths(a, a) -> a
    # equal_lengths(equal_lengths(a, b), c) -> equal_lengths(a, b, c), the inner one read
    # here only
    op = node.op
    lengths = node.inputs[1:] if op.guard else node.inputs
    guard = node.inputs[0] if op.guard else None

    # A check this one alone reads gives its lengths; one read elsewhere stays in the
    # graph, so its lengths taken in too would be checked twice (a residual chain's
    # shapes: each block's check took every block's below it, and was rewritten again
    # whenever one of them was, cubic time).
    def nested(check):
        return fgraph is None or len(fgraph.clients.get(check, ())) <= 1

    try:
        new = equal_lengths(
            lengths, op.what, op.names.__getitem__, guard=guard, hint=op.hint, nested=nested
        )
    except LengthMismatchError:  # constants that differ: the check raises when it runs
        return False
    if new.owner is not None and new.owner.op == op and new.owner.inputs == node.inputs:
        return False
    new = fit(node.outputs[0], new)
    return [new] if new is not None else False


@RULES.canonicalize("unsafe", opt_in=True)
@local_optimizer([Assert, EqualLengths, IndicesInBounds])
def local_remove_all_assert(fgraph, node):
    """Every Assert goes, its conditions unchecked, and so does every check of lengths
    that must be equal (``EqualLengths``) or of indices in bounds (``IndicesInBounds``):
    faster, and unsafe (a wrong shape or index then gives a wrong result instead of an
    error). Only a mode that names it runs it: ``mode.including("local_remove_all_assert")``.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dscalar("x")
    >>> local_remove_all_assert.transform(None, Assert()(x, x > 0).owner)
    [x]
    """
    # assert(x, c...) -> x
    return [node.inputs[0]]


@RULES.canonicalize()
@local_optimizer(CASTS)
def local_cast_cast(fgraph, node):
    """A cast of a cast that lost nothing (to a dtype holding every value of the first
    one's input) is one cast; back to the input's dtype, none.

    >>> import theano_dag.tensor as tt
    >>> x = tt.fvector("x")
    >>> local_cast_cast.transform(None, tt.cast(tt.cast(x, "float64"), "float32").owner)
    [x]
    """
    # cast(cast(x, wider), t) -> cast(x, t) ; cast(cast(x, wider), x.dtype) -> x
    sop = scalar_op(node)
    inner = node.inputs[0]
    isop = scalar_op(inner.owner)
    if not isinstance(sop, ts.Cast) or not isinstance(isop, ts.Cast):
        return False
    x = inner.owner.inputs[0]
    out = node.outputs[0]
    if not ts.cast_of_cast_is_one(x.dtype, inner.dtype, out.dtype):
        # The first cast rounds or wraps (int64 to float64 too: the second sees its
        # result), or makes a float of an integer that the second makes an integer out
        # of range: the float's minimum, where an integer cast wraps.
        return False
    new = x if x.dtype == out.dtype else node.op(x)
    return [fit(out, new)]


@useless()
@local_optimizer([Elemwise], needs=[ts.Composite])
def local_useless_composite(fgraph, node):
    """The outputs of an elementwise composite that nothing reads are not computed: the
    composite is made again with the read ones only.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> s = ts.float64("s")
    >>> x = tt.dvector("x")
    >>> both = Elemwise(ts.Composite([s], [s + 1, s - 1]))(x)
    >>> fg = FunctionGraph([x], [both[1]], clone=False)
    >>> local_useless_composite.transform(fg, both[1].owner)[both[1]].owner.op
    Elemwise{Composite{sub(i0, 1)},no_inplace}
    """
    # Elemwise{Composite{f(i0), g(i0)}}(x) with output 0 unused -> Elemwise{Composite{g(i0)}}(x)
    comp = node.op.scalar_op
    if fgraph is None or not isinstance(comp, ts.Composite) or node.op.inplace_items:
        return False
    used = [k for k, out in enumerate(node.outputs) if fgraph.clients.get(out)]
    if not used or len(used) == len(node.outputs):
        return False
    kept = ts.Composite(comp.inputs, [comp.outputs[k] for k in used])
    new = Elemwise(kept)(*node.inputs, return_list=True)
    return {node.outputs[k]: v for k, v in zip(used, new)}


@useless()
@local_optimizer([Join], fit=fit)
def local_join_1(fgraph, node):
    """A join of one tensor is that tensor (no copy).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> local_join_1.transform(None, tt.stack([x]).owner)
    [InplaceDimShuffle{x,0}.0]
    """
    # join(axis, x) -> x
    parts = node.op.joined(node)
    return parts[0] if len(parts) == 1 else False


@useless()
@local_optimizer([Tile], fit=fit)
def local_useless_tile(fgraph, node):
    """``tile(x, reps)`` with every repetition 1 is ``x`` (no copy).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> local_useless_tile.transform(None, Tile((1, 1))(x).owner)
    [x]
    """
    # tile(x, (1, 1)) -> x
    return node.inputs[0] if all(r == 1 for r in node.op.reps) else False
