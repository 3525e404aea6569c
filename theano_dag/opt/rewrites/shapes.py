"""Rewrites of the ops that only move or spread data: DimShuffle, Reshape and Alloc.

Theano's names for them (``theano.tensor.opt``): ``local_dimshuffle_lift`` moves a
DimShuffle below the elementwise op it follows and merges DimShuffles, so that clusters of
elementwise ops hold no DimShuffle; ``local_reshape_to_dimshuffle`` turns a reshape that
only adds or drops length-1 dimensions into a DimShuffle; ``local_useless_dimshuffle_in_
reshape`` drops such a DimShuffle under a reshape; ``local_merge_alloc`` and
``local_canonicalize_alloc`` merge and simplify allocs.

Registered in canonicalize: the three that only remove nodes or merge two into one
(``local_useless_dimshuffle_in_reshape``, ``local_merge_alloc``,
``local_canonicalize_alloc``). ``local_dimshuffle_lift`` and
``local_reshape_to_dimshuffle`` are not: theano_dag's canonical form keeps a DimShuffle
above an elementwise op (fusion and the CPU engine's row tiling read it there), and they
are for a user's own passes (``out2in(local_dimshuffle_lift)``).

``local_join_split_constant_axis`` (canonicalize) gives a join or split whose axis input
became a constant that axis as its op's.
"""

from __future__ import annotations

import weakref

import numpy as np

from theano_dag.graph.algorithms import ancestors
from theano_dag.graph.basic import Constant, Variable
from theano_dag.graph.comparison import equal_computations
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.graph.toolbox import Feature
from theano_dag.opt.rewrites.algebra import local_alloc_alloc
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.useless import is_length_of, local_useless_alloc
from theano_dag.opt.rewrites.utils import (
    const_value,
    fit,
    keep_static_shape,
    keep_trace,
    may_spread,
    value_computed,
)
from theano_dag.tensor import math as tm
from theano_dag.tensor.arrays import Assert, ScalarFromTensor, TensorFromScalar, assert_op
from theano_dag.tensor.basic import Alloc, Join, Split, alloc, cast
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.shape import (
    EqualLengths,
    IndicesInBounds,
    MakeVector,
    Reshape,
    Shape,
    Shape_i,
    equal_lengths,
    make_vector,
    shape_i,
)
from theano_dag.tensor.type import TensorType, discrete_dtypes
from theano_dag.tensor.variable import TensorConstant, as_tensor_variable

__all__ = [
    "is_dimshuffle_useless",
    "local_dimshuffle_lift",
    "local_reshape_to_dimshuffle",
    "local_useless_dimshuffle_in_reshape",
    "local_merge_alloc",
    "local_canonicalize_alloc",
    "local_infer_shape",
    "ShapeFeature",
    "is_length_of",
    "local_elemwise_alloc",
    "local_useless_split",
    "local_join_empty",
    "local_join_split_constant_axis",
    "local_tensor_scalar_tensor",
    "local_scalar_tensor_scalar",
    "local_lift_transpose_through_dot",
]


def is_dimshuffle_useless(new_order, x) -> bool:
    """Whether ``x.dimshuffle(new_order)`` equals ``x``: each dimension stays in place,
    or a length-1 dimension is swapped for another length-1 one (added or dropped).

    >>> import theano_dag.tensor as tt
    >>> is_dimshuffle_useless((0, 1), tt.dmatrix()), is_dimshuffle_useless((1, 0), tt.dmatrix())
    (True, False)
    >>> is_dimshuffle_useless(("x", 1), tt.drow())
    True
    """
    if len(new_order) != x.ndim:
        return False
    ones = [i for i, b in enumerate(x.type.broadcastable) if b] + ["x"]
    return all(o == i or (i in ones and o in ones) for i, o in enumerate(new_order))


def _lift(fgraph, var):
    """``var`` (a DimShuffle's output) with the lift applied again below it."""
    node = var.owner
    new = local_dimshuffle_lift.transform(fgraph, node) if node is not None else None
    return new[0] if new else var


@local_optimizer([DimShuffle])
def local_dimshuffle_lift(fgraph, node):
    """DimShuffles move below elementwise ops and merge.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.graph.rewriting import out2in
    >>> x, y = tt.dmatrix("x"), tt.dmatrix("y")
    >>> g = FunctionGraph([x, y], [(x + y).T.T.dimshuffle("x", 1, 0)])
    >>> _ = out2in(local_dimshuffle_lift).optimize(g)
    >>> out = g.outputs[0].owner
    >>> out.op, [str(v.owner) for v in out.inputs]
    (Elemwise{add,no_inplace}, ['InplaceDimShuffle{x,1,0}(x)', 'InplaceDimShuffle{x,1,0}(y)'])
    """
    # dimshuffle(elemwise(x, y)) -> elemwise(dimshuffle(x), dimshuffle(y))
    # dimshuffle(dimshuffle(x)) -> dimshuffle(x) ; dimshuffle{0,1,...}(x) -> x
    op = node.op
    if not isinstance(op, DimShuffle):
        return False
    x = node.inputs[0]
    inode = x.owner
    if (
        inode is not None
        and type(inode.op) is Elemwise
        and fgraph is not None
        and len(fgraph.clients.get(x, ())) == 1
    ):
        ins = [
            _lift(fgraph, DimShuffle(i.type.broadcastable, op.new_order)(i)) for i in inode.inputs
        ]
        outs = inode.op(*ins, return_list=True)
        return [keep_trace(node.outputs[0], o, inode.inputs) for o in outs]
    order = op.new_order
    if inode is not None and isinstance(inode.op, DimShuffle):
        order = tuple("x" if o == "x" else inode.op.new_order[o] for o in order)
        x = inode.inputs[0]
        if is_dimshuffle_useless(order, x):
            return [x]
        return [_lift(fgraph, DimShuffle(x.type.broadcastable, order)(x))]
    if is_dimshuffle_useless(order, x):
        return [x]
    return False


@local_optimizer([Reshape])
def local_reshape_to_dimshuffle(fgraph, node):
    """A reshape that only adds or drops length-1 dimensions becomes a reshape to the
    other dimensions and a DimShuffle, which the other rewrites see through.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> r = x.reshape((1, x.shape[0], 1, x.shape[1]))
    >>> local_reshape_to_dimshuffle.transform(None, r.owner)[0].owner.op
    InplaceDimShuffle{x,0,x,1}
    """
    # reshape(x, (1, n, 1, m)) -> dimshuffle{x,0,x,1}(reshape(x, (n, m)))
    x, shp = node.inputs
    out = node.outputs[0]
    if shp.owner is None or not isinstance(shp.owner.op, MakeVector):
        return False
    entries = list(shp.owner.inputs)
    order, kept = [], []
    for e in entries:
        v = const_value(e)
        if v is not None and int(v) == 1:
            order.append("x")
        else:
            order.append(len(kept))
            kept.append(e)
    if len(kept) == len(entries):
        return False
    inner = Reshape(len(kept))(x, make_vector(*kept) if kept else ())
    new = fit(out, DimShuffle(inner.type.broadcastable, order)(inner))
    return [new] if new is not None else False


@RULES.canonicalize()
@local_optimizer([Reshape])
def local_useless_dimshuffle_in_reshape(fgraph, node):
    """A DimShuffle under a reshape that only adds or drops length-1 dimensions (the
    order of the others kept) changes nothing the reshape sees.

    >>> import theano_dag.tensor as tt
    >>> v = tt.dvector("v")
    >>> r = v.dimshuffle("x", 0).reshape((v.shape[0],))
    >>> local_useless_dimshuffle_in_reshape.transform(None, r.owner)[0].owner.inputs[0] is v
    True
    """
    # reshape(dimshuffle{x,0}(v), shp) -> reshape(v, shp)
    x, shp = node.inputs
    if x.owner is None or not isinstance(x.owner.op, DimShuffle):
        return False
    order = x.owner.op.new_order
    kept = [o for o, b in zip(order, x.type.broadcastable) if not b]
    if any(a == "x" or b == "x" or a > b for a, b in zip(kept, kept[1:])):
        return False
    return [Reshape(node.op.ndim)(x.owner.inputs[0], shp)]


# Theano's name of the alloc merge (algebra's local_alloc_alloc, tagged with it).
local_merge_alloc = local_alloc_alloc


@RULES.canonicalize()
@local_optimizer([Alloc])
def local_canonicalize_alloc(fgraph, node):
    """An alloc whose leading lengths are the constant 1 is an alloc of the others and a
    DimShuffle adding the length-1 dimensions; one that adds nothing goes.

    >>> import theano_dag.tensor as tt
    >>> v = tt.dvector("v")
    >>> a = tt.alloc(v, 1, v.shape[0])
    >>> local_canonicalize_alloc.transform(None, a.owner)[0].owner.op
    InplaceDimShuffle{x,0}
    """
    # alloc(x, 1, 1, n) -> dimshuffle{x,x,0}(alloc(x, n)) ; alloc(v, 1, v.shape[0]) -> v[None]
    value, *shape = node.inputs
    out = node.outputs[0]
    if fgraph is not None and any(
        type(c) is not str and isinstance(c.op, Alloc) for c, _ in fgraph.clients.get(out, ())
    ):
        return False  # local_merge_alloc first
    ones = 0
    for s in shape[: len(shape) - value.ndim]:
        v = const_value(s)
        if v is None or int(v) != 1:
            break
        ones += 1
    if not ones:
        return False
    rest = shape[ones:]
    inner = alloc(value, *rest) if rest or value.ndim else value
    if inner.owner is not None and isinstance(inner.owner.op, Alloc):
        inner = local_useless_alloc.transform(fgraph, inner.owner) or [inner]
        inner = inner[0]
    new = DimShuffle(inner.type.broadcastable, ["x"] * ones + list(range(inner.ndim)))(inner)
    new = fit(out, new)
    return [new] if new is not None else False


def _input_shapes(node, fgraph=None):
    """The symbolic shape of each input of ``node``: a tuple of lengths for a tensor,
    ``()`` for a scalar of another type, None for what has no shape (a slice...). A
    length this rewrite has already given ``fgraph`` for that input is reused
    (:func:`_known_length`)."""
    shapes = []
    for i in node.inputs:
        ndim = getattr(i.type, "ndim", None)
        if isinstance(i.type, TensorType):
            shapes.append(tuple(_known_length(fgraph, i, d) for d in range(ndim)))
        elif ndim == 0 or getattr(i.type, "dtype", None) is not None:
            shapes.append(())
        else:
            shapes.append(None)
    return shapes


class _GraphTable(dict):
    """A rewrite's table for one graph, keyed ``(value, ...)``, whose entries may hold
    variables of the graph (``_held``): the entries of values, or holding variables, no
    longer in the graph are swept as the table doubles, so that a compiled function keeps
    no rewritten-away subgraph (and its constants) alive. ``of(fgraph)`` is the graph's
    table, gone with the graph."""

    sweep_at = 64

    @classmethod
    def of(cls, fgraph):
        table = cls._TABLES.get(fgraph)
        if table is None:
            table = cls._TABLES[fgraph] = cls()
        return table

    @staticmethod
    def _held(entry):
        return ()

    def sweep(self, fgraph):
        if len(self) < self.sweep_at:
            return
        for key in [
            k
            for k, e in self.items()
            if not all(_in_graph(fgraph, v) for v in (k[0], *self._held(e)))
        ]:
            del self[key]
        self.sweep_at = 2 * len(self) + 64


class _InferredLengths(_GraphTable):
    """The lengths ``local_infer_shape`` gave one graph, ``(v, d) -> (length, unchecked)``
    (``unchecked``: its checks were dropped because ``v`` is computed), each used while
    its node is still in the graph and ``v`` is computed or not as it was (which decides
    the checks). Not kept: a constant (which a shape may hold for another length too).

    ``get_length(..., checked=False)`` gives an op's ``infer_shape`` the inputs' lengths
    that have no check (a check would be taken into the asking op's, named for another
    op: ``Shape_i`` then); ``local_infer_shape`` gives a ``Shape_i`` it meets again the
    length it gave before, checks and all. Without that, a chain of layers whose every
    length is checked (a ResNet's channels with constant weights) had each layer's
    lengths inferred again through all the layers below it, and its canonicalize stopped
    at 4,000 rewrites."""

    _TABLES = weakref.WeakKeyDictionary()

    @staticmethod
    def _held(entry):
        return entry[:1]

    def get_length(self, fgraph, v, d, checked=False):
        known = self.get((v, d))
        if known is None:
            return None
        length, unchecked = known
        has_checks = _unchecked(length) is not length
        if (has_checks and not checked) or not _in_graph(fgraph, length):
            return None
        if (unchecked or has_checks) and value_computed(fgraph, v) != unchecked:
            return None  # inferred again, its checks dropped or kept as v is now
        return length

    def put(self, fgraph, v, d, length, unchecked):
        if isinstance(length, Constant):
            return
        self[(v, d)] = (length, unchecked)
        self.sweep(fgraph)


def _in_graph(fgraph, v):
    return v.owner is None or v.owner in fgraph.apply_nodes


def _known_length(fgraph, v, d):
    """``shape_i(v, d)``, or the length ``local_infer_shape`` rewrote it to in ``fgraph``
    before (:class:`_InferredLengths`). Without it, the batch length of a deep network's
    last layer is asked of each layer in turn, and a ``Shape_i`` of every earlier layer
    is made and rewritten again for each later one: quadratic in the depth (InceptionV3:
    11,000 of them for 360 nodes, 10 s of its 11 s compile)."""
    known = _given_length(fgraph, v, d)
    return known if known is not None else shape_i(v, d)


def _given_length(fgraph, v, d, checked=False):
    """The length ``local_infer_shape`` gave ``v`` along ``d`` in ``fgraph`` that is
    still good (:meth:`_InferredLengths.get_length`), else None."""
    table = _InferredLengths._TABLES.get(fgraph) if fgraph is not None else None
    return table.get_length(fgraph, v, d, checked) if table is not None else None


def _as_length(entry):
    """A length from ``infer_shape`` as an int64 scalar variable."""
    v = as_tensor_variable(entry)
    if v.ndim != 0 or v.dtype not in discrete_dtypes:
        return None
    return v if v.dtype == "int64" else cast(v, "int64")


# The ops that pass their first input on once a check holds, made by infer_shapes
# (EqualLengths first: it may compare its first input too).
_GUARDS = (EqualLengths, IndicesInBounds, Assert)


def _unchecked(length):
    """``length`` without the checks at its top (``_GUARDS``: the length they pass)."""
    while length.owner is not None and isinstance(length.owner.op, _GUARDS):
        length = length.owner.inputs[0]
    return length


@RULES.canonicalize("fast_compile", "ShapeOpt")
@local_optimizer([Shape_i, Shape])
def local_infer_shape(fgraph, node):
    """The shape of a computed variable is its op's ``infer_shape`` of the shapes of the
    op's inputs (Theano's ``ShapeOpt``): asking for a shape then needs no computation
    of the value, and the lengths end up as the inputs' lengths.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> s = tt.exp(x).shape[0]
    >>> local_infer_shape.transform(None, s.owner.inputs[0].owner)  # doctest: +SKIP

    The checks the value makes that no length of the shape carries (a 0-d result's, the
    lengths of its inputs a reduction drops) guard each length (the empty shape of a 0-d
    value), where the function does not compute the value anyway.
    """
    # shape_i(op(x...), i) -> op.infer_shape(shapes of x...)[i]
    # shape(op(x...)) -> make_vector(*op.infer_shape(shapes of x...))
    if fgraph is None:
        return _inferred_shape(fgraph, node, LENGTH_CHECKS_DEPTH, {})
    searched = _Searched.of(fgraph)
    new = _inferred_shape(fgraph, node, LENGTH_CHECKS_DEPTH, searched)
    searched.sweep(fgraph)
    return new


class _Searched(_GraphTable):
    """``_length_checks``' results in one graph, ``(v, d, depth) -> checks``: kept across
    the rewrite's calls (each layer of a network searched the layers below it again, a
    network's compile 4x longer)."""

    _TABLES = weakref.WeakKeyDictionary()


def _inferred_shape(fgraph, node, depth, memo):
    """``local_infer_shape``'s replacement of ``node``, the inputs' lengths the result
    drops searched for checks through ``depth`` ops (``memo``: those searched)."""
    x = node.inputs[0]
    owner = x.owner
    infer = getattr(owner.op, "infer_shape", None) if owner is not None else None
    if infer is None:
        return False
    if isinstance(node.op, Shape_i) and depth == LENGTH_CHECKS_DEPTH:
        known = _given_length(fgraph, x, node.op.i, checked=True)
        if known is not None:
            return [known]
    ins = _input_shapes(owner, fgraph)
    try:
        shapes = infer(fgraph, owner, ins)
    except Exception:  # an op that cannot tell (ShapeError, NotImplementedError...)
        return False
    shp = shapes[owner.outputs.index(x)] if shapes is not None else None
    if shp is None or len(shp) != x.ndim:
        return False
    entries = [shp[node.op.i]] if isinstance(node.op, Shape_i) else list(shp)
    lengths = [_as_length(e) if e is not None else None for e in entries]
    if any(length is None for length in lengths):
        return False
    # infer_shape asked for the output's own shape? (The walk stops at the node's inputs
    # and the lengths it was given, which x cannot be above: the whole graph below was
    # walked for each shape, a third of a network's gradient's compile.)
    given = [n for shp in ins if shp for n in shp if isinstance(n, Variable)]
    if x in ancestors(lengths, blockers=[*owner.inputs, *given]):
        return False
    # The checks x's value makes that no length of x carries: a 0-d result's (its shape
    # has no length), and those of the lengths of its inputs x drops (a reduction's).
    checks = list(getattr(shp, "checks", ()))
    dropped = _dropped_lengths(owner, shapes, ins) if depth > 0 else []
    checked = any(_unchecked(length) is not length for length in lengths)
    unchecked = False
    # (asked only where it matters: most shapes have no check)
    if (checked or checks or dropped) and value_computed(fgraph, x):
        # The op checks the lengths its inputs share when it computes x, which the
        # function does: the shape need not check them again (a gradient's shapes of
        # the forward values it also computes).
        lengths = [_unchecked(length) for length in lengths]
        checks, dropped = [], []
        unchecked = checked
    for i, d in dropped:
        if value_computed(fgraph, i):
            continue  # computed anyway, with its checks
        checks += _length_checks(fgraph, i, d, depth, memo)
    checks = list(dict.fromkeys(checks))
    lengths = [_guarded(n, checks) for n in lengths]
    if fgraph is not None and depth == LENGTH_CHECKS_DEPTH:  # (not a search's shapes)
        known = _InferredLengths.of(fgraph)
        dims = [node.op.i] if isinstance(node.op, Shape_i) else range(x.ndim)
        for d, length in zip(dims, lengths):
            known.put(fgraph, x, d, length, unchecked)
    if isinstance(node.op, Shape_i):
        return [lengths[0]]
    if not lengths:
        empty = TensorConstant(node.outputs[0].type, np.zeros(0, dtype="int64"))
        return [fit(node.outputs[0], _guarded(empty, checks))]
    return [fit(node.outputs[0], make_vector(*lengths))]


# How many ops above an input's length _length_checks infers shapes through.
LENGTH_CHECKS_DEPTH = 8


def _dropped_lengths(node, shapes, ins):
    """``(input, dimension)`` of each length of ``node``'s computed inputs that its
    outputs' ``shapes`` (``infer_shape``'s of the input shapes ``ins``) do not hold (a
    reduced dimension; ``None``: a 0-d input's whole shape), whose checks computing the
    value would make."""
    kept = [n for shp in shapes if shp is not None for n in shp if isinstance(n, Variable)]
    above = set(ancestors(kept, blockers=node.inputs))
    used = {
        (v.owner.inputs[0], v.owner.op.i)
        for v in above
        if v.owner is not None and isinstance(v.owner.op, Shape_i)
    }
    # (a length given from _known_length is used where the shapes hold it)
    used.update(
        (i, d)
        for i, given in zip(node.inputs, ins)
        for d, n in enumerate(given or ())
        if n in above and not isinstance(n, Constant)
    )
    out = []
    for i in node.inputs:
        if i.owner is None or not isinstance(i.type, TensorType):
            continue
        dims = [d for d in range(i.ndim) if (i, d) not in used and not i.type.broadcastable[d]]
        out += [(i, d) for d in dims or ([None] if i.ndim == 0 else [])]
    return out


def _length_checks(fgraph, v, d, depth, memo):
    """The checks (outputs of ``_GUARDS``) in ``v``'s length along ``d`` (its whole
    shape where None) as its op's ``infer_shape`` gives it, through ``depth`` ops."""
    key = (v, d, depth)  # (a shallower search finds fewer: its own entry)
    if key in memo:
        return memo[key]
    memo[key] = []
    if depth <= 0 or v.owner is None:
        return []
    # (not shape_i: a static length is a constant, and may hold only where checked)
    asked = Shape()(v) if d is None else Shape_i(d)(v)
    new = _inferred_shape(fgraph, asked.owner, depth - 1, memo)
    if not new:
        return []
    found, seen, stack = [], set(), [new[0]]
    while stack:
        n = stack.pop()
        owner = n.owner
        if owner is None or n in seen:
            continue
        seen.add(n)
        op = owner.op
        if isinstance(op, _GUARDS):
            found.append(n)
            if not isinstance(op, EqualLengths) or op.guard:
                stack.append(owner.inputs[0])  # the length passed on may hold checks
        elif isinstance(op, (Shape_i, Shape)):
            i = op.i if isinstance(op, Shape_i) else None
            found += _length_checks(fgraph, owner.inputs[0], i, depth - 1, memo)
        else:
            # (lengths and shapes only: not the values a length is computed from)
            stack += [k for k in owner.inputs if _is_int_vector_or_scalar(k)]
    memo[key] = found
    return found


def _is_int_vector_or_scalar(v) -> bool:
    return getattr(v.type, "ndim", 2) <= 1 and getattr(v.type, "dtype", "") in discrete_dtypes


def _guarded(n, checks):
    """``n`` (a length, or a 0-d value's empty shape) passed on once each check of
    ``checks`` (outputs of ``_GUARDS``) holds."""
    for c in checks:
        op = c.owner.op
        if not isinstance(op, EqualLengths):
            n = op(n, *c.owner.inputs[1:])
            continue
        compared = c.owner.inputs[1:] if op.guard else c.owner.inputs
        n = equal_lengths(compared, op.what, op.names.__getitem__, guard=n, hint=op.hint)
    return n


class ShapeFeature(Feature):
    """The symbolic shape of every tensor variable of a FunctionGraph (Theano's
    ``ShapeFeature``): ``shape_of[v]`` is a tuple of int64 scalars built from the graph's
    inputs' lengths by each op's ``infer_shape``, kept up to date as nodes come in. The
    rewrites here compute shapes node by node (``local_infer_shape``); this is for code
    that asks a whole graph, as Theano's does.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> g = FunctionGraph([x, y], [tt.exp(x) + y], clone=False)
    >>> feature = ShapeFeature()
    >>> g.attach_feature(feature)
    >>> feature.same_shape(x, g.outputs[0])
    True
    """

    def on_attach(self, fgraph):
        self.fgraph = fgraph
        self.shape_of: dict = {}
        fgraph.shape_feature = self
        for node in fgraph.toposort():
            self.on_import(fgraph, node, "on_attach")

    def on_detach(self, fgraph):
        self.shape_of = {}
        if getattr(fgraph, "shape_feature", None) is self:
            del fgraph.shape_feature

    def shape_tuple(self, v):
        """``v``'s shape, built from its own lengths when nothing better is known."""
        if v not in self.shape_of:
            if not isinstance(v.type, TensorType):
                return None
            self.shape_of[v] = tuple(shape_i(v, d) for d in range(v.ndim))
        return self.shape_of[v]

    def on_import(self, fgraph, node, reason):
        ins = [self.shape_tuple(i) for i in node.inputs]
        try:
            shapes = node.op.infer_shape(fgraph, node, ins)
        except Exception:  # no infer_shape, or one that cannot tell: the outputs' own
            shapes = [None] * len(node.outputs)
        for out, shp in zip(node.outputs, shapes):
            if isinstance(out.type, TensorType) and shp is not None and len(shp) == out.ndim:
                # a None length: known from the value only (local_infer_shape's rule)
                lengths = [_as_length(e) if e is not None else None for e in shp]
                if all(length is not None for length in lengths):
                    self.shape_of[out] = tuple(lengths)
                    continue
            self.shape_of.pop(out, None)
            self.shape_tuple(out)

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        if new_r not in self.shape_of and r in self.shape_of:
            self.shape_of[new_r] = self.shape_of[r]

    def same_shape(self, x, y, dim_x=None, dim_y=None) -> bool:
        """Whether ``x`` and ``y`` are known to have the same shape (or the same length
        along ``dim_x`` and ``dim_y``): their shape expressions are the same graph, or
        one is a check (``EqualLengths``) that the other is equal to the lengths it
        compares (the graph raises where they are not)."""
        sx, sy = self.shape_tuple(x), self.shape_tuple(y)
        if dim_x is not None:
            sx = (sx[dim_x],)
        if dim_y is not None:
            sy = (sy[dim_y],)
        if len(sx) != len(sy):
            return False
        return all(_same_length(a, b) for a, b in zip(sx, sy))


def _checked_lengths(length):
    """``length``, and the lengths it is checked equal to when it is an ``EqualLengths``
    (the length another guard passes on, when it is one)."""
    owner = length.owner
    if owner is not None and isinstance(owner.op, _GUARDS[1:]):
        return [length, *_checked_lengths(owner.inputs[0])]
    if owner is None or not isinstance(owner.op, EqualLengths):
        return [length]
    return [length, *(owner.inputs[1:] if owner.op.guard else owner.inputs)]


def _same_length(a, b) -> bool:
    return any(
        u is v or equal_computations([u], [v])
        for u in _checked_lengths(a)
        for v in _checked_lengths(b)
    )


def _alloc_under(var):
    """``(alloc node, order)`` when ``var`` is an alloc, or a DimShuffle of one that
    only adds dimensions (``order`` the DimShuffle's, None for a bare alloc)."""
    owner = var.owner
    if owner is None:
        return None
    if isinstance(owner.op, Alloc):
        return owner, None
    if isinstance(owner.op, DimShuffle):
        inner = owner.inputs[0].owner
        order = owner.op.new_order
        if inner is not None and isinstance(inner.op, Alloc):
            if [o for o in order if o != "x"] == list(range(inner.outputs[0].ndim)):
                return inner, order
    return None


@RULES.canonicalize()
@local_optimizer([Elemwise], needs=[Alloc])
def local_elemwise_alloc(fgraph, node):
    """An alloc feeding an elementwise op with another input of the result's shape
    goes: the elementwise op broadcasts the allocated value itself. Where the lengths
    the alloc asked for are not known to be that input's, an Assert checks them (the
    error the alloc's shape would have raised). An alloc that may spread a length 1 of
    its value along a dimension the value's type does not declare (which the
    elementwise op would refuse) stays.

    >>> import theano_dag.tensor as tt
    >>> v, m = tt.TensorType("float64", shape=(3,))("v"), tt.dmatrix("m")
    >>> new = local_elemwise_alloc.transform(None, (tt.alloc(v, *m.shape) + m).owner)[0]
    >>> new.owner.inputs[0].owner.op
    InplaceDimShuffle{x,0}
    >>> local_elemwise_alloc.transform(None, (tt.alloc(tt.dvector("u"), *m.shape) + m).owner)
    False
    """
    # alloc(v, *m.shape) + m -> v[None] + m
    # alloc(v, 2, 2) + m -> v[None] + assert(m, m.shape == (2, 2))
    if len(node.inputs) < 2:
        return False
    # This rule sees every elementwise node: most have no alloc input and stop here.
    if not any(
        i.owner is not None and type(i.owner.op) in (Alloc, DimShuffle) for i in node.inputs
    ):
        return False
    out = node.outputs[0]
    allocs = [_alloc_under(i) for i in node.inputs]
    if not any(allocs):
        return False
    # The input that gives the result its shape and stays: one that is no alloc if
    # there is one, else one of the allocs (the others go).
    shaped = [
        k for k, i in enumerate(node.inputs) if i.type.broadcastable == out.type.broadcastable
    ]
    k_ref = min(shaped, key=lambda k: allocs[k] is not None, default=None)
    if k_ref is None or allocs[k_ref] is not None and sum(a is not None for a in allocs) < 2:
        return False  # no other input gives the result its shape
    ref = node.inputs[k_ref]
    allocs[k_ref] = None
    conds, new_ins = [], []
    for i, found in zip(node.inputs, allocs):
        if found is None:
            new_ins.append(i)
            continue
        anode, order = found
        value, *lengths = anode.inputs
        a = anode.outputs[0]
        order = list(range(a.ndim)) if order is None else list(order)
        lead = a.ndim - value.ndim
        vb = (True,) * lead + value.type.broadcastable
        for j, o in enumerate(order):
            if o == "x":
                continue
            if a.type.broadcastable[o] and not vb[o]:
                return False  # a length-1 dimension of the value not declared so
            k = o - lead
            if k >= 0 and may_spread(value, k) and not is_length_of(lengths[o], value, k):
                return False  # the alloc may spread a length 1 the Elemwise would refuse
            if not a.type.broadcastable[o] and not is_length_of(lengths[o], ref, j):
                conds.append(tm.eq(lengths[o], shape_i(ref, j)))
        v = DimShuffle(value.type.broadcastable, ["x"] * lead + list(range(value.ndim)))(value)
        if order != list(range(a.ndim)):
            v = DimShuffle(v.type.broadcastable, order)(v)
        new_ins.append(v)
    if conds:
        checked = assert_op(ref, *conds)
        new_ins = [checked if i is ref else i for i in new_ins]
    new = node.op(*new_ins)
    new = keep_static_shape(new, out)  # the alloc's constant lengths made the static shape
    new = fit(out, new)
    return [new] if new is not None else False


@RULES.canonicalize()
@local_optimizer([Split])
def local_useless_split(fgraph, node):
    """A split into one part is its input, the sizes checked (an Assert: one size, the
    length of the axis).

    >>> import theano_dag.tensor as tt
    >>> x, s = tt.dmatrix("x"), tt.lvector("s")
    >>> local_useless_split.transform(None, tt.split(x, s, 1)[0].owner)[0].owner.op
    Assert{msg='Theano Assert failed!'}
    """
    # split(x, sizes, 1) -> assert(x, len(sizes) == 1, sizes[0] == x.shape[axis])
    if node.op.len_splits != 1 or node.op.axis is None:
        return False
    x, sizes = node.inputs
    axis = node.op.axis % x.ndim
    new = assert_op(x, tm.eq(shape_i(sizes, 0), 1), tm.eq(sizes[0], shape_i(x, axis)))
    new = fit(node.outputs[0], new)
    return [new] if new is not None else False


def _empty_along(var, axis) -> bool:
    """Whether ``var`` is known to have length 0 along ``axis``."""
    if isinstance(var, TensorConstant):
        return np.shape(var.data)[axis] == 0
    return var.type.shape[axis] == 0


@RULES.canonicalize()
@local_optimizer([Join])
def local_join_empty(fgraph, node):
    """The parts of a join known to be empty along its axis go.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> a = tt.dvector("a")
    >>> j = tt.join(0, a, np.zeros(0), a)
    >>> local_join_empty.transform(None, j.owner)[0].owner.inputs
    [a, a]
    """
    # join(0, a, [], b) -> join(0, a, b)
    if node.op.axis is None:  # the axis is known only when the function runs
        return False
    parts = node.inputs
    axis = node.op.axis % node.outputs[0].ndim
    kept = [p for p in parts if not _empty_along(p, axis)]
    if len(kept) == len(parts) or not kept:
        return False
    out = node.outputs[0]
    new = kept[0] if len(kept) == 1 else Join(node.op.axis)(*kept)
    # The empty parts fixed lengths the others must have (the join checked them).
    new = keep_static_shape(new, out)
    new = fit(out, new)
    return [new] if new is not None else False


@RULES.canonicalize()
@local_optimizer([Join, Split])
def local_join_split_constant_axis(fgraph, node):
    """A join or split whose axis input became a constant (a ``givens``, a folded
    expression) takes it as its op's axis, which the other rewrites and the engines read.

    >>> import theano_dag.tensor as tt
    >>> a, b, k = tt.dmatrix("a"), tt.dmatrix("b"), tt.lscalar("k")
    >>> j = tt.join(k, a, b)
    >>> folded = j.owner.clone_with_new_inputs([tt.constant(1, dtype="int64"), a, b])
    >>> local_join_split_constant_axis.transform(None, folded)[0].owner.op
    Join{axis=1}
    """
    # Join(None)(1, a, b) -> Join(1)(a, b) ; Split(n, None)(x, 1, s) -> Split(n, 1)(x, s)
    op = node.op
    if op.axis is None:
        is_join = isinstance(op, Join)
        axis = const_value(node.inputs[0 if is_join else 1])
        if axis is None:
            return False
        if is_join:
            new = Join(int(axis), op.view)(*node.inputs[1:], return_list=True)
        else:
            x, _, sizes = node.inputs
            new = Split(op.len_splits, int(axis))(x, sizes, return_list=True)
        new = [fit(o, n) for o, n in zip(node.outputs, new)]
        return new if all(n is not None for n in new) else False
    return False


@RULES.canonicalize()
@local_optimizer([TensorFromScalar, ScalarFromTensor])
def local_tensor_scalar_tensor(fgraph, node):
    """A 0-d tensor made a scalar and back (or a scalar made a tensor and back) is
    itself (Theano's ``local_tensor_scalar_tensor`` and ``local_scalar_tensor_scalar``).

    >>> import theano_dag.tensor as tt
    >>> t = tt.dscalar("t")
    >>> back = tt.tensor_from_scalar(tt.scalar_from_tensor(t))
    >>> local_tensor_scalar_tensor.transform(None, back.owner)
    [t]
    """
    # tensor_from_scalar(scalar_from_tensor(t)) -> t ; and the other way
    inner = node.inputs[0].owner
    back = ScalarFromTensor if isinstance(node.op, TensorFromScalar) else TensorFromScalar
    if inner is None or not isinstance(inner.op, back):
        return False
    x = inner.inputs[0]
    return [x] if x.type == node.outputs[0].type else False


local_scalar_tensor_scalar = local_tensor_scalar_tensor


@local_optimizer([DimShuffle])
def local_lift_transpose_through_dot(fgraph, node):
    """The transpose of a matrix product is the product of the transposes, swapped:
    ``dot(x, y).T`` -> ``dot(y.T, x.T)`` (the transposes are views of the inputs). Not
    in the standard passes (the BLAS rewrites read a product's operands as written);
    for a user's own, as in Theano's tests: ``out2in(local_lift_transpose_through_dot)``.

    >>> import theano_dag.tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.dmatrix("b")
    >>> local_lift_transpose_through_dot.transform(None, tt.dot(a, b).T.owner)[0].owner.inputs
    [b.T, a.T]
    """
    # dot(x, y).T -> dot(y.T, x.T)
    if node.op.new_order != (1, 0):
        return False
    d = node.inputs[0].owner
    if d is None or not isinstance(d.op, tm.Dot) or any(i.ndim != 2 for i in d.inputs):
        return False
    x, y = d.inputs
    new = tm.dot(y.T, x.T)
    new = fit(node.outputs[0], new)
    return [keep_trace(node.outputs[0], new, d.inputs)] if new is not None else False
