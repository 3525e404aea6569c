"""Rewrites of indexing: two Subtensors merged into one, a Subtensor lifted above the
elementwise op it reads, and indexing of what was just built or written.

Theano's names (``theano.tensor.opt``):

- ``local_subtensor_merge``: ``x[a:b][c]`` -> ``x[i]``, ``x[a:b][c:d]`` -> ``x[e:f:g]``:
  one view instead of two, and the rewrites after it see one index;
- ``local_subtensor_lift``: ``exp(x)[0]`` -> ``exp(x[0])``: the elementwise op computes
  only the part that is read (when nothing else reads all of it); also
  ``rebroadcast(x)[0]`` -> ``rebroadcast(x[0])``;
- ``local_subtensor_of_dot``: ``dot(a, b)[i]`` -> ``dot(a[i], b)``: only the rows read
  are computed (when nothing else reads the product);
- ``local_subtensor_make_vector``: ``make_vector(a, b, c)[1]`` -> ``b``;
- ``local_subtensor_inc_subtensor``: ``set_subtensor(x[i], v)[i]`` -> ``v`` (a fill of
  ``x[i]``, which checks ``i``, where ``i`` may lie out of range);
- ``local_adv_sub1_adv_inc_sub1``: the same for a row list (``AdvancedSubtensor1``);
- ``local_set_to_inc_subtensor``: ``set_subtensor(x[i], x[i] + y)`` -> ``inc_subtensor(x[i],
  y)`` for a row list naming each row once;
- ``local_useless_inc_subtensor``: ``set_subtensor(x[:], y)`` -> ``y`` when ``y`` has the
  shape of ``x``;
- ``local_subtensor_of_shape``: ``x.shape[1]`` -> ``Shape_i{1}(x)``;
- ``local_useless_inc_subtensor_alloc``: ``inc_subtensor(x[i], alloc(v, n))`` ->
  ``inc_subtensor(x[i], v)`` (the lengths checked);
- ``local_useless_subtensor``: ``x[0:]``, ``x[:x.shape[0]]``, ``x[arange(x.shape[0])]``
  -> ``x``;
- ``local_IncSubtensor_serialize``: ``inc(b, c, i) + inc(b, d, j)`` ->
  ``inc(inc(b + b, c, i), d, j)``: one array instead of two;
- ``local_useless_slice``: ``x[i, :]`` -> ``x[i]``;
- ``local_subtensor_remove_broadcastable_index``: ``col[:, 0]`` -> ``col.dimshuffle(0)``;
- ``local_reshape_lift``: ``exp(x).reshape(s)`` -> ``exp(x.reshape(s))``;
- ``local_subtensor_of_alloc``: ``alloc(v, n, m)[1:, 2]`` -> ``alloc(v[2], n - 1)`` (v's
  lengths known).

theano_dag's own, for what ``grad`` builds (a sampler's log-density gradient):

- ``local_subtensor_of_fill``: ``fill(x, c)[i]`` -> ``fill(x[i], c)``;
- ``local_inc_subtensor_of_reshape_grad``: ``inc(zeros_like(w)[i], reshape(g,
  shape(w[i])))`` -> ``inc(zeros_like(w)[i], g)`` (in the early useless pass too);
- ``local_reshape_of_unit_slice``: ``w[a:a+1].reshape(())`` -> ``w[a]``.

All in canonicalize. The index arithmetic they build is on int64 scalars, which constant
folding and the shape rewrites reduce to constants where the lengths are known.
"""

from __future__ import annotations

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import Constant
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.shapes import is_length_of
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import (
    const_value,
    fit,
    index_entries,
    index_in_range,
    keep_trace,
    scalar_op,
    single_client,
    spread_dims,
    typed_constant,
)
from theano_dag.tensor import math as tm
from theano_dag.tensor.arrays import assert_op
from theano_dag.tensor.basic import Alloc, ARange, alloc, cast, fill
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.extra_ops import broadcast_to
from theano_dag.tensor.shape import (
    EqualLengths,
    LengthMismatchError,
    MakeVector,
    Rebroadcast,
    Reshape,
    Shape,
    Shape_i,
    SpecifyShape,
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
    slice_length,
    writes_once,
)
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "local_subtensor_merge",
    "local_subtensor_lift",
    "local_subtensor_of_dot",
    "local_subtensor_make_vector",
    "local_subtensor_inc_subtensor",
    "local_adv_sub1_adv_inc_sub1",
    "local_set_to_inc_subtensor",
    "local_useless_inc_subtensor",
    "local_subtensor_of_shape",
    "local_useless_inc_subtensor_alloc",
    "local_useless_subtensor",
    "local_IncSubtensor_serialize",
    "local_useless_slice",
    "local_subtensor_remove_broadcastable_index",
    "local_reshape_lift",
    "local_subtensor_of_fill",
    "local_subtensor_of_alloc",
    "local_inc_subtensor_of_reshape_grad",
    "local_reshape_of_unit_slice",
]

canonicalize = RULES.canonicalize

FULL = slice(None, None, None)


def subtensor(x, entries):
    """``x[entries]`` as one Subtensor (trailing full slices dropped)."""
    entries = list(entries)
    while entries and entries[-1] == FULL:
        entries.pop()
    if not entries:
        return x
    return x[tuple(entries)]


def _sign(step):
    """+1 or -1 when the sign of ``step`` (None: 1) is known, else None."""
    if step is None:
        return 1
    v = const_value(step)
    if v is None:
        return None
    return 1 if v > 0 else -1


def _norm(v, lo, hi, n):
    # an index as numpy's slice.indices reads it: negatives count from the end, clipped
    return tm.clip(tm.switch(tm.lt(v, 0), v + n, v), lo, hi)


def _first_step_count(s, n):
    """The first index a slice ``s`` of a dimension of length ``n`` takes, its step and
    how many it takes: ``range(n)[s] == range(first, first + count * step, step)``."""
    step = as_tensor_variable(1) if s.step is None else s.step
    count = slice_length(n, s.start, s.stop, s.step)
    pos = as_tensor_variable(0) if s.start is None else _norm(s.start, 0, n, n)
    neg = n - 1 if s.start is None else _norm(s.start, -1, n - 1, n)
    sign = _sign(s.step)
    first = pos if sign == 1 else neg if sign == -1 else tm.switch(tm.gt(step, 0), pos, neg)
    return first, step, as_tensor_variable(count)


def _merge_int(s1, i, n):
    """The index of ``x`` that ``x[s1][i]`` reads; an ``i`` out of the slice's range
    gives ``n``, out of ``x``'s range too, so that the merged index raises as the two
    did."""
    first, step, count = _first_step_count(s1, n)
    k = tm.switch(tm.lt(i, 0), i + count, i)
    inside = tm.and_(tm.ge(k, 0), tm.lt(k, count))
    return tm.switch(inside, first + k * step, n)


def _merge_slices(s1, s2, n):
    """The slice ``s`` with ``x[s] == x[s1][s2]`` along a dimension of length ``n``."""
    first1, step1, count1 = _first_step_count(s1, n)
    first2, step2, count = _first_step_count(s2, count1)
    first = first1 + first2 * step1
    step = step1 * step2
    stop = first + count * step
    sign1, sign2 = _sign(s1.step), _sign(s2.step)
    if sign1 is not None and sign2 is not None and sign1 * sign2 > 0:
        # Indices only grow: start and stop are in [0, n], an empty slice stays empty.
        return slice(first, stop, None if step is s1.step is s2.step is None else step)
    # A step going down ends below index 0 at -1, which a slice reads as n - 1: -n - 1
    # says "through index 0". An empty slice is 0:0 (its first index may be -1).
    stop = tm.switch(tm.lt(stop, 0), -n - 1, stop)
    nonempty = tm.gt(count, 0)
    return slice(tm.switch(nonempty, first, 0), tm.switch(nonempty, stop, 0), step)


def merge_indices(x, outer, inner):
    """The entries ``e`` with ``x[e] == x[outer][inner]`` (lists of ``index_entries``)."""
    merged = []
    rest = list(inner)
    for d in range(x.ndim):
        e1 = outer[d] if d < len(outer) else FULL
        if not isinstance(e1, slice):
            merged.append(e1)
            continue
        e2 = rest.pop(0) if rest else FULL
        if e2 == FULL:
            merged.append(e1)
        elif e1 == FULL:
            merged.append(e2)
        elif isinstance(e2, slice):
            merged.append(_merge_slices(e1, e2, shape_i(x, d)))
        else:
            merged.append(_merge_int(e1, e2, shape_i(x, d)))
    return merged


def _is_loop_buffer(x) -> bool:
    """Whether ``x`` is the buffer of a loop's state (``theano_dag.scan``'s ``Scan``,
    known by its ``store`` and ``mintaps``: the loop package builds on this one). Its
    reads ``buffer[m:][-j]`` are what the loop's save-memory rewrite (specialize) looks
    for to keep only the last rows; merged, the index would be arithmetic on the length
    and the loop would keep every step."""
    op = getattr(x.owner, "op", None)
    return hasattr(op, "store") and hasattr(op, "mintaps")


@canonicalize()
@local_optimizer([Subtensor])
def local_subtensor_merge(fgraph, node):
    """Two basic indexings in a row are one.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> local_subtensor_merge.transform(None, x[2:][::2].owner)[0].owner.op
    Subtensor{int64:int64:int64}
    """
    # x[a:b:c][d:e:f] -> x[g:h:k] ; x[a:b:c][i] -> x[j]
    u = node.inputs[0]
    if u.owner is None or not isinstance(u.owner.op, Subtensor):
        return False
    x = u.owner.inputs[0]
    if _is_loop_buffer(x):
        return False
    entries = merge_indices(x, index_entries(u.owner), index_entries(node))
    new = fit(node.outputs[0], subtensor(x, entries))
    if new is None:
        return False
    return [keep_trace(node.outputs[0], new, [x, *u.owner.inputs[1:], *node.inputs[1:]])]


def _scalar_like_for(i, out_ndim):
    """A broadcast-everywhere input of an elementwise op given ``out_ndim`` dimensions
    (any index of it reads the same one value)."""
    return i if i.ndim == out_ndim else DimShuffle(i.type.broadcastable, ["x"] * out_ndim)(i)


def _lift_over_rebroadcast(node):
    """``rebroadcast(x)[idx]`` -> ``rebroadcast(x[idx])``: the pattern of the dimensions
    the index keeps, renumbered; the view of a view becomes one view of ``x`` (and the
    rewrites that look through indexing see ``x``)."""
    u = node.inputs[0]
    entries = index_entries(node)
    axis, k = [], 0
    for d in range(u.ndim):
        if d < len(entries) and not isinstance(entries[d], slice):
            continue  # an integer index drops the dimension
        if d in u.owner.op.axis:
            axis.append((k, u.owner.op.axis[d]))
        k += 1
    x = u.owner.inputs[0]
    new = node.op(x, *node.inputs[1:])
    if axis:
        new = Rebroadcast(*axis)(new)
    new = fit(node.outputs[0], new)
    if new is None:
        return False
    return [keep_trace(node.outputs[0], new, [x, *node.inputs[1:]])]


def _cut_lengths_known_equal(ins, entries) -> bool:
    """Whether ``ins`` are known to have equal lengths along each dimension that the
    index ``entries`` cuts (an integer, a slice that is not ``:``)."""
    for d, e in enumerate(entries):
        if isinstance(e, slice) and _full(e):
            continue
        lengths = []
        for i in ins:
            n = known_lengths(i)[d]
            lengths.append(shape_i(i, d) if n is None else n)
        try:
            n = equal_lengths(lengths, "local_subtensor_lift")
        except LengthMismatchError:
            return False  # known to differ: the run raises
        owner = getattr(n, "owner", None)
        if owner is not None and isinstance(owner.op, EqualLengths):
            return False
    return True


@canonicalize()
@local_optimizer([Subtensor])
def local_subtensor_lift(fgraph, node):
    """An indexing of an elementwise result nothing else reads moves to the inputs: the
    elementwise op computes only the part that is read. Where two inputs give a length
    the index cuts, they must be known equal (the same variable's, the same static
    length): ``(x * y)[0]`` of two vectors stays, and raises when their lengths differ.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> local_subtensor_lift.transform(None, tt.exp(x)[0].owner)[0].owner.op
    Elemwise{exp,no_inplace}
    """
    # exp(x)[i] -> exp(x[i]) ; (x + s)[i] -> x[i] + s (s broadcast everywhere)
    # rebroadcast(x)[i] -> rebroadcast(x[i]) (the axes that stay, renumbered)
    u = node.inputs[0]
    un = u.owner
    if un is not None and isinstance(un.op, Rebroadcast):
        return _lift_over_rebroadcast(node)
    if un is None or type(un.op) is not Elemwise or len(un.outputs) != 1:
        return False
    if fgraph is not None and len(fgraph.clients.get(u, ())) != 1:
        return False
    idx = node.inputs[1:]
    out = node.outputs[0]
    ins = un.inputs
    full = [i for i in ins if not any(i.type.broadcastable)]
    scalar_like = [i for i in ins if all(i.type.broadcastable) and i.ndim == u.ndim]
    if len(ins) > 1 and len(full) + len(scalar_like) != len(ins):
        return False  # an input broadcast along some dimensions only: not lifted
    if len(full) > 1 and not _cut_lengths_known_equal(full, index_entries(node)):
        # The op checks the lengths the index cuts; the parts of its inputs would not
        # (a check kept with them cost more per call than the whole op on small arrays).
        return False
    new_ins = [
        node.op(i, *idx)
        if (len(ins) == 1 or not any(i.type.broadcastable))
        else _scalar_like_for(i, out.ndim)
        for i in ins
    ]
    new = fit(out, un.op(*new_ins))
    if new is None:
        return False
    return [keep_trace(out, new, [*ins, *idx])]


@canonicalize()
@local_optimizer([Subtensor], needs=[tm.Dot])
def local_subtensor_of_dot(fgraph, node):
    """An indexing of a product nothing else reads indexes its operands: only the rows
    (and columns) read are computed.

    >>> import theano_dag.tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.dmatrix("b")
    >>> new = local_subtensor_of_dot.transform(None, tt.dot(a, b)[1].owner)[0]
    >>> [v.ndim for v in new.owner.inputs]
    [1, 2]
    """
    # dot(a, b)[i] -> dot(a[i], b) ; dot(a, b)[i:j, k] -> dot(a[i:j], b[:, k])
    # (n-d: a's leading dims take the first entries, b's the others, its summed axis kept)
    d = node.inputs[0]
    if d.owner is None or not isinstance(d.owner.op, tm.Dot):
        return False
    if fgraph is not None and not single_client(fgraph, d):
        return False  # the whole product is needed anyway
    a, b = d.owner.inputs
    if a.ndim == 0 or b.ndim == 0:
        return False
    entries = index_entries(node)
    n_a = min(a.ndim - 1, len(entries))
    a_entries, b_entries = entries[:n_a], entries[n_a:]
    if b.ndim > 1 and len(b_entries) >= b.ndim - 1:
        b_entries = b_entries[: b.ndim - 2] + [FULL] + b_entries[b.ndim - 2 :]
    out = node.outputs[0]
    new = fit(out, tm.dot(subtensor(a, a_entries), subtensor(b, b_entries)))
    if new is None:
        return False
    return [keep_trace(out, new, [a, b, *node.inputs[1:]])]


def _const_index(v):
    c = const_value(v) if isinstance(v, Constant) else None
    return None if c is None else int(c)


@canonicalize()
@local_optimizer([Subtensor, AdvancedSubtensor1])
def local_subtensor_make_vector(fgraph, node):
    """Indexing a vector just built from scalars picks the scalars.

    >>> import theano_dag.tensor as tt
    >>> a, b = tt.lscalar("a"), tt.lscalar("b")
    >>> from theano_dag.tensor.shape import make_vector
    >>> local_subtensor_make_vector.transform(None, make_vector(a, b)[1].owner)
    [b]
    """
    # make_vector(a, b, c)[1] -> b ; [1:] -> make_vector(b, c) ; [[0, 2]] -> make_vector(a, c)
    v = node.inputs[0]
    if v.owner is None or not isinstance(v.owner.op, MakeVector):
        return False
    scalars = v.owner.inputs
    out = node.outputs[0]
    if isinstance(node.op, AdvancedSubtensor1):
        ilist = node.inputs[1]
        if not isinstance(ilist, Constant):
            return False
        picks = np.asarray(ilist.data).ravel().tolist()
        if any(not -len(scalars) <= p < len(scalars) for p in picks):
            return False
        new = v.owner.op(*[scalars[p] for p in picks]) if picks else None
    else:
        (entry,) = index_entries(node)
        if isinstance(entry, slice):
            parts = [
                None if p is None else _const_index(p)
                for p in (entry.start, entry.stop, entry.step)
            ]
            if any(
                c is None and p is not None
                for c, p in zip(parts, (entry.start, entry.stop, entry.step))
            ):
                return False
            picked = scalars[slice(*parts)]
            new = v.owner.op(*picked) if picked else None
        else:
            p = _const_index(entry)
            if p is None or not -len(scalars) <= p < len(scalars):
                return False
            new = scalars[p]
    if new is None:
        return False
    new = fit(out, new)
    return [new] if new is not None else False


def _same_index(a, b) -> bool:
    """Whether two index entries are the same (the same variables, or equal constants)."""
    if isinstance(a, slice) != isinstance(b, slice):
        return False
    if isinstance(a, slice):
        return all(
            _same_index(p, q) for p, q in zip((a.start, a.stop, a.step), (b.start, b.stop, b.step))
        )
    if a is None or b is None:
        return a is b
    if a is b:
        return True
    ca, cb = _const_index(a), _const_index(b)
    return ca is not None and ca == cb


def _filled(value, region, out, in_range=True, fgraph=None):
    """``value`` (cast to ``out``'s dtype) spread to the shape of ``region`` (an
    expression of the indexed part) where it has fewer dimensions or broadcasts along
    one that ``out`` does not, or where numpy may have spread it when the function runs
    (a length 1 its type does not declare: a view, ``broadcast_to``). Where the index may
    lie out of range (not ``in_range``), a fill of ``region``, which checks it as the
    written write does (numpy's IndexError; ``local_useless_fill`` keeps the fill unless
    the part is computed anyway)."""
    if value.dtype != out.dtype:
        value = cast(value, out.dtype)
    if value.type.broadcastable == out.type.broadcastable:
        if spread_dims(value, out, fgraph):
            value = broadcast_to(value, [shape_i(region, d) for d in range(region.ndim)])
        new = fit(out, value)
    else:
        new = fit(out, alloc(value, *[shape_i(region, d) for d in range(region.ndim)]))
    return new if new is None or in_range else fit(out, fill(region, new))


@canonicalize()
@local_optimizer([Subtensor])
def local_subtensor_inc_subtensor(fgraph, node):
    """Reading back the part just set is the value set.

    Unlike Theano's, the rewrite spreads the value to the part's shape where numpy may
    have spread it there when the function runs (a length 1 along a dimension its type
    does not declare broadcastable: a ``broadcast_to`` view), and an integer index not
    known in range is still checked, as the written write checks it: the value is a
    fill of the part ``x[i]`` (a view).

    >>> import theano_dag.tensor as tt
    >>> x, v, i = tt.TensorType("float64", shape=(3, 4))("x"), tt.dvector("v"), tt.lscalar("i")
    >>> local_subtensor_inc_subtensor.transform(None, tt.set_subtensor(x[1], v)[1].owner)
    [BroadcastTo.0]
    >>> w = tt.TensorType("float64", shape=(4,))("w")
    >>> local_subtensor_inc_subtensor.transform(None, tt.set_subtensor(x[1], w)[1].owner)
    [w]
    >>> new = local_subtensor_inc_subtensor.transform(None, tt.set_subtensor(x[i], w)[i].owner)
    >>> new[0].owner.op.scalar_op.name, new[0].owner.inputs[1] is w
    ('second', True)
    """
    # set_subtensor(x[idx], v)[idx] -> v (spread to the shape of x[idx])
    u = node.inputs[0]
    un = u.owner
    if un is None or not isinstance(un.op, IncSubtensor) or not un.op.set_instead_of_inc:
        return False
    if un.op.idx_list != node.op.idx_list:
        return False
    outer, inner = index_entries(un), index_entries(node)
    if not all(_same_index(a, b) for a, b in zip(outer, inner)):
        return False
    x, value = un.inputs[:2]
    in_range = all(
        isinstance(e, slice) or index_in_range(e, n) for e, n in zip(inner, known_lengths(x))
    )
    new = _filled(value, subtensor(x, inner), node.outputs[0], in_range, fgraph)
    if new is None:
        return False
    return [keep_trace(node.outputs[0], new, [x, value, *node.inputs[1:]])]


@canonicalize()
@local_optimizer([AdvancedSubtensor1])
def local_adv_sub1_adv_inc_sub1(fgraph, node):
    """Reading back the rows just set (one row list) is the value set.

    >>> import theano_dag.tensor as tt
    >>> x = tt.TensorType("float64", shape=(3, 4))("x")
    >>> y = tt.TensorType("float64", shape=(2, 4))("y")
    >>> i = tt.constant([0, 2])
    >>> local_adv_sub1_adv_inc_sub1.transform(None, tt.set_subtensor(x[i], y)[i].owner)
    [y]

    A value of one row, which numpy spread over the rows it was set to, reads back
    spread (a view):

    >>> z = tt.dmatrix("z")
    >>> local_adv_sub1_adv_inc_sub1.transform(None, tt.set_subtensor(x[i], z)[i].owner)
    [BroadcastTo.0]
    """
    # advanced_set_subtensor1(x, y, i)[i] -> y
    u = node.inputs[0]
    un = u.owner
    if un is None or not isinstance(un.op, AdvancedIncSubtensor1) or not un.op.set_instead_of_inc:
        return False
    x, value, ilist = un.inputs
    if ilist is not node.inputs[1]:
        return False
    # A row listed twice holds the last value written there: y then differs from the
    # read-back unless y's rows are alike; only a list known to name each row once
    # qualifies (Theano asserts it at run time).
    if not writes_once([ilist]):
        return False
    in_range = index_in_range(ilist, known_lengths(x)[0])
    new = _filled(value, x[ilist], node.outputs[0], in_range, fgraph)
    return [new] if new is not None else False


@canonicalize()
@local_optimizer([AdvancedIncSubtensor1])
def local_set_to_inc_subtensor(fgraph, node):
    """Setting rows to what they hold plus ``y`` is adding ``y`` to them: no read of
    the rows (when each row is named once; a repeated row would be added to twice).

    >>> import theano_dag.tensor as tt
    >>> x, y, i = tt.dmatrix("x"), tt.dmatrix("y"), tt.constant([2, 0])
    >>> new = local_set_to_inc_subtensor.transform(None, tt.set_subtensor(x[i], x[i] + y).owner)
    >>> new[0].owner.op
    AdvancedIncSubtensor1{inplace=False, set_instead_of_inc=False}
    """
    # advanced_set_subtensor1(x, x[i] + y, i) -> advanced_inc_subtensor1(x, y, i)
    if not node.op.set_instead_of_inc:
        return False
    x, value, ilist = node.inputs
    if node.op.inplace or value.dtype != x.dtype or not writes_once([ilist]):
        return False
    if not isinstance(scalar_op(value.owner), ts.Add):
        return False
    terms = value.owner.inputs
    read = [
        k
        for k, t in enumerate(terms)
        if t.owner is not None
        and isinstance(t.owner.op, AdvancedSubtensor1)
        and t.owner.inputs[0] is x
        and t.owner.inputs[1] is ilist
    ]
    if not read:
        return False
    rest = [t for k, t in enumerate(terms) if k != read[0]]
    y = rest[0] if len(rest) == 1 else tm.add(*rest)
    new = fit(node.outputs[0], AdvancedIncSubtensor1()(x, y, ilist))
    return [keep_trace(node.outputs[0], new, node.inputs)] if new is not None else False


def _same_shape(a, b) -> bool:
    """Whether ``a`` and ``b`` are known to have the same shape: ``a`` is a
    ``specify_shape`` to ``b``'s shape (or the other way), or both shapes are static."""
    if a.ndim != b.ndim:
        return False
    if None not in a.type.shape and a.type.shape == b.type.shape:
        return True
    for p, q in ((a, b), (b, a)):
        if p.owner is not None and isinstance(p.owner.op, SpecifyShape):
            shp = p.owner.inputs[1]
            if (
                shp.owner is not None
                and isinstance(shp.owner.op, Shape)
                and shp.owner.inputs[0] is q
            ):
                return True
            if shp.owner is not None and isinstance(shp.owner.op, MakeVector):
                if all(
                    e.owner is not None
                    and getattr(e.owner.op, "i", None) == d
                    and e.owner.inputs[0] is q
                    for d, e in enumerate(shp.owner.inputs)
                ):
                    return True
    return False


@canonicalize()
@local_optimizer([IncSubtensor])
def local_useless_inc_subtensor(fgraph, node):
    """Setting all of ``x`` (``x[:]`` or ``x[::-1]`` along each dimension) to a ``y`` of
    ``x``'s shape is ``y`` (reversed where the index reverses).

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dmatrix("x"), tt.dmatrix("y")
    >>> o = tt.set_subtensor(x[:, ::-1], tt.specify_shape(y, x.shape))
    >>> local_useless_inc_subtensor.transform(None, o.owner)[0].owner.op
    Subtensor{::, ::int64}
    """
    # set_subtensor(x[:, ::-1], y) -> y[:, ::-1]   when y.shape == x.shape
    if not node.op.set_instead_of_inc or node.op.inplace:
        return False
    x, y = node.inputs[:2]
    entries = index_entries(node)
    if len(entries) != x.ndim or y.ndim != x.ndim:
        return False
    for e in entries:
        if not isinstance(e, slice) or e.start is not None or e.stop is not None:
            return False
        if e.step is not None and _const_index(e.step) not in (1, -1):
            return False
    if not _same_shape(y, x):
        return False
    new = fit(node.outputs[0], subtensor(y, entries))
    return [new] if new is not None else False


@canonicalize("local_shape_to_shape_i")  # Theano's name of the rewrite it stands for
@local_optimizer([Subtensor])
def local_subtensor_of_shape(fgraph, node):
    """An entry of a shape is that length (``Shape_i``): it needs neither the whole
    shape vector nor an indexing of it.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> local_subtensor_of_shape.transform(None, x.shape[-1].owner)[0].owner.op
    Shape_i{1}
    """
    # shape(x)[i] -> shape_i(x, i)
    shp = node.inputs[0]
    if shp.owner is None or not isinstance(shp.owner.op, Shape):
        return False
    x = shp.owner.inputs[0]
    (entry,) = index_entries(node) if len(node.op.idx_list) == 1 else (None,)
    if entry is None or isinstance(entry, slice):
        return False
    i = _const_index(entry)
    if i is None or not -x.ndim <= i < x.ndim:
        return False
    # (Shape_i itself, not shape_i's constant of a static length: local_shape_i_static
    # decides whether that length needs a check.)
    new = fit(node.outputs[0], Shape_i(i % x.ndim)(x))
    return [new] if new is not None else False


def _region(node):
    """The part of ``x`` an increment node writes, as an expression (for its shape)."""
    x = node.inputs[0]
    if isinstance(node.op, IncSubtensor):
        return subtensor(x, index_entries(node))
    if isinstance(node.op, AdvancedIncSubtensor):
        return AdvancedSubtensor(node.op.idx_list)(x, *node.inputs[2:])
    return x[node.inputs[2]] if isinstance(node.op, AdvancedIncSubtensor1) else None


@canonicalize()
@local_optimizer([IncSubtensor, AdvancedIncSubtensor1, AdvancedIncSubtensor])
def local_useless_inc_subtensor_alloc(fgraph, node):
    """An increment (or set) by an alloc of a value is the increment by the value: the
    increment spreads it over the part itself. An Assert keeps the check of the lengths
    the alloc asked for against the part's.

    >>> import theano_dag.tensor as tt
    >>> x, y, i = tt.dvector("x"), tt.dscalar("y"), tt.lscalar("i")
    >>> z = tt.inc_subtensor(x[:i], tt.alloc(y, i))
    >>> local_useless_inc_subtensor_alloc.transform(None, z.owner)[0].owner.inputs[1].owner.op
    Assert{msg='Theano Assert failed!'}
    """
    # inc_subtensor(x[idx], alloc(v, *shape))
    #   -> inc_subtensor(x[idx], assert(v, shape == x[idx].shape))
    if node.op.inplace:
        return False
    x, y = node.inputs[:2]
    if y.owner is None or not isinstance(y.owner.op, Alloc):
        return False
    value, *lengths = y.owner.inputs
    region = _region(node)
    if region is None or value.dtype != y.dtype:
        return False
    offset = region.ndim - y.ndim
    conds = [
        tm.eq(n, shape_i(region, offset + k))
        for k, n in enumerate(lengths)
        if not (const_value(n) is not None and int(const_value(n)) == 1)
    ]
    new_y = assert_op(value, *conds) if conds else value
    new = node.op(x, new_y, *node.inputs[2:])
    new = fit(node.outputs[0], new)
    return [keep_trace(node.outputs[0], new, node.inputs)] if new is not None else False


def _covers_dim(s, x, d) -> bool:
    """Whether the slice ``s`` takes all of dimension ``d`` of ``x``, in order."""
    if not isinstance(s, slice):
        return False
    if s.start is not None and _const_index(s.start) != 0:
        return False
    if s.step is not None and _const_index(s.step) != 1:
        return False
    if s.stop is None:
        return True
    stop = _const_index(s.stop)
    if stop is not None:
        return x.type.shape[d] is not None and stop >= x.type.shape[d]
    return is_length_of(s.stop, x, d)


def _all_rows_in_order(ilist, x) -> bool:
    """Whether the row list ``ilist`` is ``0, 1, ..., len(x) - 1``: a constant (or an
    ``arange``) of ``x``'s known length, or ``arange(x.shape[0])``."""
    n = known_lengths(x)[0]
    if isinstance(ilist, Constant):
        a = np.asarray(ilist.data)
        return n is not None and a.shape == (n,) and bool((a == np.arange(n)).all())
    o = ilist.owner
    if o is None or not isinstance(o.op, ARange):
        return False
    start, stop, step = o.inputs
    if const_value(start) != 0 or const_value(step) != 1:
        return False
    stop_value = const_value(stop)
    return is_length_of(stop, x, 0) or (stop_value is not None and stop_value == n)


@canonicalize()
@local_optimizer([Subtensor, AdvancedSubtensor1])
def local_useless_subtensor(fgraph, node):
    """An indexing that takes all of every dimension it indexes is its input.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> local_useless_subtensor.transform(None, x[0:, : x.shape[1]].owner)
    [x]
    >>> local_useless_subtensor.transform(None, x[tt.arange(x.shape[0])].owner)
    [x]
    """
    # x[0:] -> x ; x[:x.shape[0]] -> x ; x[0:n] -> x when x's static length is n
    # x[[0, 1, .., n - 1]] -> x ; x[arange(x.shape[0])] -> x
    x = node.inputs[0]
    if isinstance(node.op, AdvancedSubtensor1):
        if not _all_rows_in_order(node.inputs[1], x):
            return False
        new = fit(node.outputs[0], x)  # x's static length, which the copy's type lacks
        return [new] if new is not None else False
    else:
        entries = index_entries(node)
        if not all(_covers_dim(s, x, d) for d, s in enumerate(entries)):
            return False
    return [x] if x.type == node.outputs[0].type else False


_INCS = (IncSubtensor, AdvancedIncSubtensor1, AdvancedIncSubtensor)


def _slices_of_zeros(incs) -> int:
    """How many of ``incs`` write slices (no integer index) into zeros: the pieces
    ``theano_dag.scan.rewriting.local_add_of_slices_to_join`` joins (an LSTM's gates'
    gradients), better than a chain of increments."""
    return sum(
        isinstance(v.owner.op, IncSubtensor)
        and all(e[0] == "slice" for e in v.owner.op.idx_list)
        and const_value(v.owner.inputs[0]) == 0
        for v in incs
    )


@canonicalize()
@local_optimizer([tm.add], needs=_INCS)
def local_IncSubtensor_serialize(fgraph, node):  # noqa: N802 (Theano's name)
    """A sum of increments (the gradient of several indexings of one tensor) is a chain
    of increments of the sum of what they increment: one array of the result's size
    instead of one per increment, and each increment can then write in place.

    >>> import theano_dag.tensor as tt
    >>> x, b, c, d = tt.dvector("x"), tt.dvector("b"), tt.dscalar("c"), tt.dscalar("d")
    >>> s = tt.add(x, tt.inc_subtensor(b[0], c), tt.inc_subtensor(b[1], d))
    >>> new = local_IncSubtensor_serialize.transform(None, s.owner)[0]
    >>> new.owner.op, new.owner.inputs[0].owner.op
    (IncSubtensor{int64}, IncSubtensor{int64})
    """
    # add(x, inc(b, c, i), inc(e, d, j)) -> inc(inc(add(x, b, e), c, i), d, j)
    if scalar_op(node) is None or not isinstance(scalar_op(node), ts.Add):
        return False
    out = node.outputs[0]

    def movable(v):
        o = v.owner
        return (
            o is not None
            and isinstance(o.op, _INCS)
            and not o.op.set_instead_of_inc
            and not o.op.inplace
            and v.type == out.type
            and (fgraph is None or single_client(fgraph, v))
        )

    moved = [i for i in node.inputs if movable(i)]
    slices = _slices_of_zeros(moved)
    if not moved or slices == len(moved) >= 2:
        # none, or only slices of zeros, which may tile an axis: they join instead. Among
        # other increments (PyMC3's gradient of a flat vector unpacked into scalars and
        # slices) they do not tile it, and the chain writes them all into one array.
        return False
    rest = [i for i in node.inputs if not movable(i)] + [m.owner.inputs[0] for m in moved]
    tip = rest[0] if len(rest) == 1 else tm.add(*rest)
    tip = fit(out, tip)
    if tip is None:
        return False
    for m in moved:
        tip = m.owner.op(tip, *m.owner.inputs[1:])
    return [keep_trace(out, tip, node.inputs)]


def _full(s) -> bool:
    """Whether the slice ``s`` is ``:`` (or ``0:``, ``::1``): every element, in order."""
    return (
        isinstance(s, slice)
        and s.stop is None
        and (s.start is None or _const_index(s.start) == 0)
        and (s.step is None or _const_index(s.step) == 1)
    )


@canonicalize()
@local_optimizer([Subtensor])
def local_useless_slice(fgraph, node):
    """Trailing ``:`` entries of an index say nothing: ``x[1, :]`` is ``x[1]`` (and two
    spellings of one indexing merge).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> local_useless_slice.transform(None, x[1, 0:].owner)[0].owner.op
    Subtensor{int64}
    """
    # x[i, :, 0:] -> x[i]
    entries = index_entries(node)
    k = len(entries)
    while k and _full(entries[k - 1]):
        k -= 1
    if k == len(entries) or k == 0:
        return False  # nothing to drop, or all of it (local_useless_subtensor)
    new = fit(node.outputs[0], subtensor(node.inputs[0], entries[:k]))
    return [new] if new is not None else False


@canonicalize()
@local_optimizer([Subtensor])
def local_subtensor_remove_broadcastable_index(fgraph, node):
    """Indexing a length-1 dimension at 0 (or -1), the other dimensions taken whole, is
    dropping that dimension: a DimShuffle.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dcol("x")
    >>> local_subtensor_remove_broadcastable_index.transform(None, x[:, 0].owner)[0].owner.op
    InplaceDimShuffle{0}
    """
    # x[:, 0] with x.shape[1] == 1 -> x.dimshuffle(0)
    x = node.inputs[0]
    kept = []
    for d, e in enumerate(index_entries(node)):
        if isinstance(e, slice):
            if not _full(e):
                return False
            kept.append(d)
        elif not x.type.broadcastable[d] or _const_index(e) not in (0, -1):
            return False
    kept += list(range(len(node.op.idx_list), x.ndim))
    if len(kept) == x.ndim:
        return False  # no dimension dropped: x[:] is local_useless_subtensor's
    new = fit(node.outputs[0], DimShuffle(x.type.broadcastable, kept)(x))
    return [new] if new is not None else False


@canonicalize()
@local_optimizer([Reshape])
def local_reshape_lift(fgraph, node):
    """A reshape of a unary elementwise result nothing else reads moves to its input:
    ``exp(x).reshape(s)`` -> ``exp(x.reshape(s))`` (a reshape then meets the reshapes and
    indexings below it).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> local_reshape_lift.transform(None, tt.exp(x).flatten().owner)[0].owner.op
    Elemwise{exp,no_inplace}
    """
    # reshape(f(x), s) -> f(reshape(x, s))
    u = node.inputs[0]
    un = u.owner
    if un is None or type(un.op) is not Elemwise or len(un.inputs) != 1:
        return False
    if fgraph is not None and not single_client(fgraph, u):
        return False
    new = fit(node.outputs[0], un.op(node.op(un.inputs[0], node.inputs[1])))
    return (
        [keep_trace(node.outputs[0], new, [un.inputs[0], node.inputs[1]])]
        if new is not None
        else False
    )


# The gradient's cleanup: what ``grad`` builds for an indexing and a reshape, and for a
# sum of several terms, written the way it runs best (fewer nodes, scalars kept scalars).


@canonicalize()
@local_optimizer([Subtensor])
def local_subtensor_of_fill(fgraph, node):
    """Indexing an array filled with one constant is that constant spread over the part
    read (the gradient of ``sum(stack([a, b]))`` read back one term at a time).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> new = local_subtensor_of_fill.transform(None, tt.fill(x, 1.0)[0].owner)[0]
    >>> new.owner.op, new.owner.inputs[0].owner.op, float(const_value(new.owner.inputs[1]))
    (Elemwise{second,no_inplace}, Subtensor{int64}, 1.0)
    """
    # fill(x, c)[idx] -> fill(x[idx], c)   (c a constant of one value, kept a scalar)
    u = node.inputs[0]
    if u.owner is None or not isinstance(scalar_op(u.owner), ts.Second):
        return False
    x, c = u.owner.inputs
    value = const_value(c)
    out = node.outputs[0]
    if value is None or x.type.broadcastable != u.type.broadcastable:
        return False  # not one constant, or c (not x) decides a length of the result
    part = node.op(x, *node.inputs[1:])
    new = fit(out, fill(part, typed_constant(value, out.dtype)))
    return [keep_trace(out, new, [x, *node.inputs[1:]])] if new is not None else False


@canonicalize()
@local_optimizer([Subtensor], needs=[Alloc])
def local_subtensor_of_alloc(fgraph, node):
    """An indexing of an alloc is the alloc of the value's part read, at the lengths
    read: only the result's size is written. An integer index on a dimension the alloc
    spreads is checked by nothing after the rewrite (Theano's returns a value for an
    index out of range), so there it must be a constant known to be in range.

    A dimension of the value of unknown length is left alone: it may be 1, spread by
    the alloc at run time, or the full length, and the part to read differs. One the
    index cuts, of a known length other than 1, is checked against the alloc's (the alloc
    checks that they agree; their parts might): a length of the result passes the check
    (``EqualLengths``), and with none to carry it the lengths must be known equal. An alloc
    seen through a DimShuffle that inserts length-1 axes counts as an alloc too.

    >>> import theano_dag.tensor as tt
    >>> v, n = tt.dscalar("v"), tt.lscalar("n")
    >>> local_subtensor_of_alloc.transform(None, tt.alloc(v, n, 5)[1:, 2].owner)[0].owner.op
    Alloc
    """
    # alloc(v, *shape)[idx] -> alloc(v[idx on v's dims], *lengths read)
    u = node.inputs[0]
    a = u.owner
    if a is not None and isinstance(a.op, DimShuffle) and not a.op.drop:
        # alloc(v, m).dimshuffle("x", 0) (canonical for alloc(v, 1, m)): length-1 axes
        # inserted in order are an alloc of 1 along them
        if a.op.shuffle != sorted(a.op.shuffle):
            return False
        inner = a.inputs[0].owner
        if inner is None or not isinstance(inner.op, Alloc):
            return False
        val, *inner_dims = inner.inputs
        dims = [1 if o == "x" else inner_dims[o] for o in a.op.new_order]
    elif a is not None and isinstance(a.op, Alloc):
        val, *dims = a.inputs
    else:
        return False
    entries = index_entries(node)
    added = u.ndim - val.ndim
    val_entries, lengths, cut = [], [], []
    val_lengths = known_lengths(val)
    for d, e in enumerate(entries):
        n = val_lengths[d - added] if d >= added else 1
        if n is None:
            return False
        if not isinstance(e, slice) and n == 1 and not index_in_range(e, dims[d]):
            return False
        if n != 1 and not (isinstance(e, slice) and _full(e)):
            cut.append((d, n))  # the alloc checks n against dims[d]; the parts might not
        if d >= added:
            # a length-1 dimension of the value is spread: every index reads its element
            val_entries.append(e if n != 1 else (FULL if isinstance(e, slice) else 0))
        if isinstance(e, slice):
            lengths.append(dims[d] if _full(e) else slice_length(dims[d], e.start, e.stop, e.step))
    lengths += dims[len(entries) :]
    new_val = subtensor(val, val_entries)
    if new_val.ndim > len(lengths):
        return False
    out = node.outputs[0]
    # a length the result's type fixes (a dimension of x.shape that is 1) as a constant
    lengths = [n if n is not None else m for n, m in zip(out.type.shape, lengths)]
    for d, n in cut:
        # One length of the result not fixed by its type passes the check of the cut one.
        k = next((k for k, s in enumerate(out.type.shape) if s is None), None)
        try:
            checked = equal_lengths(
                [n, dims[d]],
                f"{a.op} along dimension {d}",
                ("the value's length", "the length asked").__getitem__,
                guard=None if k is None else lengths[k],
            )
        except LengthMismatchError:
            return False  # known to differ: the run raises
        if k is None:
            if checked is not n:
                return False  # not known equal, and no length to check them with
            continue
        lengths[k] = checked
    new = fit(out, alloc(new_val, *lengths))
    return [keep_trace(out, new, [val, *dims, *node.inputs[1:]])] if new is not None else False


def _reshape_to_shape_of(y):
    """``(g, s)`` when ``y`` is ``reshape(g, shape(s))``, else None."""
    if y.owner is None or not isinstance(y.owner.op, Reshape):
        return None
    g, shp = y.owner.inputs
    if shp.owner is None or not isinstance(shp.owner.op, Shape):
        return None
    return g, shp.owner.inputs[0]


def known_lengths(v, depth=8, _memo=None) -> tuple:
    """``v``'s lengths where the graph fixes them: its type's static shape, completed by
    what the ops above it fix: a constant's shape, a DimShuffle's input's lengths, and
    for an elementwise op, a length other than 1 of any input that does not broadcast
    there (the inputs agree on every length but 1, so that one is the result's). None
    where nothing within ``depth`` ops fixes a length.

    A graph cloned with a replacement (as PyMC3 builds its log-density) keeps the types
    its nodes had, so a length the replacement fixes is known only from the ops above:

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.basic import clone_replace
    >>> w, x, z = tt.dvector("w"), tt.dvector("x"), tt.dvector("z")
    >>> y = clone_replace(tt.exp(w) * z, {w: x.reshape((3,))})
    >>> y.type.shape, known_lengths(y)
    ((None,), (3,))
    """
    memo = {} if _memo is None else _memo
    if v in memo:
        return memo[v]
    shape = list(getattr(v.type, "shape", ()))
    owner = v.owner
    if isinstance(v, Constant) and isinstance(v.data, np.ndarray) and v.data.ndim == len(shape):
        shape = list(v.data.shape)
    elif None in shape and depth > 0 and owner is not None:
        if isinstance(owner.op, DimShuffle):
            inner = known_lengths(owner.inputs[0], depth - 1, memo)
            for d, o in enumerate(owner.op.new_order):
                if o != "x" and shape[d] is None:
                    shape[d] = inner[o]
        elif isinstance(owner.op, Elemwise):
            for i in owner.inputs:
                if None not in shape:
                    break
                if getattr(i.type, "ndim", None) != len(shape):
                    continue
                for d, n in enumerate(known_lengths(i, depth - 1, memo)):
                    if shape[d] is None and n is not None and n != 1:
                        shape[d] = n
    memo[v] = tuple(shape)
    return memo[v]


def _shaped_like(x, w) -> bool:
    """Whether ``x`` is known to have ``w``'s shape: ``w`` itself, or ``w`` filled with
    something that broadcasts into it (``zeros_like(w)``)."""
    if x is w:
        return True
    return (
        x.owner is not None
        and isinstance(scalar_op(x.owner), ts.Second)
        and x.owner.inputs[0] is w
        and x.type.broadcastable == w.type.broadcastable
    )


def _unit_slice_start(entry):
    """``a`` when ``entry`` is the constant slice ``a:a+1`` (``a >= 0``, no step)."""
    if not isinstance(entry, slice) or entry.step is not None:
        return None
    if entry.start is None or entry.stop is None:
        return None
    a, b = _const_index(entry.start), _const_index(entry.stop)
    return a if a is not None and b is not None and a >= 0 and b == a + 1 else None


@RULES.useless()  # early: before the shape rewrites replace shape(s) by its arithmetic
@local_optimizer([IncSubtensor])
def local_inc_subtensor_of_reshape_grad(fgraph, node):
    """Writing into ``x[idx]`` a value reshaped to the shape of ``w[idx]``, with ``x`` of
    ``w``'s shape (the gradient of ``w[idx].reshape(...)``), needs no reshape when the
    value is known to have that shape already, or is a vector of a known length other
    than 1 (the increment then checks its length as the reshape did), nor when it is
    one number going into a one-element slice (written at that element instead).

    >>> import theano_dag.tensor as tt
    >>> w, g = tt.dvector("w"), tt.dscalar("g")
    >>> y = g.reshape(w[2:3].shape)
    >>> new = local_inc_subtensor_of_reshape_grad.transform(
    ...     None, tt.inc_subtensor(tt.zeros_like(w)[2:3], y).owner)[0]
    >>> new.owner.op, new.owner.inputs[1]
    (IncSubtensor{int64}, g)
    """
    # inc_subtensor(zeros_like(w)[idx], reshape(g, shape(w[idx]))) -> inc_subtensor(.., g)
    #   when g has w[idx]'s dimensions and lengths no run-time broadcast can change ;
    # inc_subtensor(zeros_like(w)[a:a+1], reshape(g0, shape(w[a:a+1]))) -> ..[a], g0
    if node.op.inplace:
        return False
    x, y = node.inputs[:2]
    found = _reshape_to_shape_of(y)
    if found is None:
        return False
    g, s = found
    if s.owner is None or not isinstance(s.owner.op, Subtensor):
        return False
    w = s.owner.inputs[0]
    entries = index_entries(node)
    if s.owner.op.idx_list != node.op.idx_list or not _shaped_like(x, w):
        return False
    if not all(_same_index(a, b) for a, b in zip(entries, index_entries(s.owner))):
        return False
    out = node.outputs[0]
    op = node.op
    if g.ndim == s.ndim:
        # The reshape checks only the number of elements, the increment every length: they
        # agree where g has one dimension and no length 1 unless s's is too (no broadcast can
        # hide a mismatch), or where g's lengths are known to be s's. A reshape of (2, 2)
        # to (1, 4) is not a no-op. (The lengths the graph fixes: the gradient of a
        # parameter of known length is often elementwise ops on it, which keep no static
        # shape in their type.)
        lengths = known_lengths(g)
        if g.ndim <= 1:
            known = all(n is not None and (n != 1 or m == 1) for n, m in zip(lengths, s.type.shape))
        else:
            known = None not in lengths and lengths == known_lengths(s)
        if not known or g.dtype != y.dtype:
            return False
        new = op(x, g, *node.inputs[2:])
    elif g.ndim == 0 and w.ndim == 1 and len(entries) == 1:
        a = _unit_slice_start(entries[0])
        if a is None:
            return False
        # w[a:a+1] holds one element when w has more than a (and then so does x), none
        # otherwise, where the reshape of one number raised: x[a] raises there too.
        new = IncSubtensor((("int",),), set_instead_of_inc=op.set_instead_of_inc)(
            x, g, typed_constant(a, "int64")
        )
    else:
        return False
    new = fit(out, new)
    return [keep_trace(out, new, [x, g, *node.inputs[2:]])] if new is not None else False


@canonicalize()
@local_optimizer([Reshape])
def local_reshape_of_unit_slice(fgraph, node):
    """One element sliced out of a vector and reshaped to a number is that element (as
    PyMC3 unpacks a scalar parameter from its flat vector): one indexing, no reshape.

    >>> import theano_dag.tensor as tt
    >>> q = tt.dvector("q")
    >>> local_reshape_of_unit_slice.transform(None, q[4:5].reshape(()).owner)[0].owner.op
    Subtensor{int64}
    """
    # reshape(w[a:a+1], ()) -> w[a]   (both raise when w has no element a)
    s = node.inputs[0]
    out = node.outputs[0]
    if out.ndim != 0 or s.owner is None or not isinstance(s.owner.op, Subtensor):
        return False
    w = s.owner.inputs[0]
    entries = index_entries(s.owner)
    if w.ndim != 1 or len(entries) != 1:
        return False
    a = _unit_slice_start(entries[0])
    if a is None:
        return False
    new = fit(out, Subtensor((("int",),))(w, typed_constant(a, "int64")))
    return [keep_trace(out, new, [w])] if new is not None else False
