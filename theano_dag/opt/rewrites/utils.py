"""Small helpers the rewrites share: recognising ops and constants, keeping types.

A replacement must have the type of what it replaces (same dtype, a static shape at
least as specific). ``fit`` casts and re-broadcasts a candidate, or returns None when
it cannot, and the rewrite then does not apply: a rewrite never guesses. Rules hand
``fit`` to the framework (``local_optimizer(..., fit=fit)``, ``pattern``) rather than
call it themselves.
"""

from __future__ import annotations

import weakref

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import Constant, Variable
from theano_dag.graph.rewriting.pattern import PatternSub
from theano_dag.graph.rewriting.presence import OpPresence
from theano_dag.graph.utils import copy_stack_trace, get_stack_trace
from theano_dag.tensor.basic import Alloc, cast, fill
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.math import _ew
from theano_dag.tensor.shape import EqualLengths, IndicesInBounds, Shape, Shape_i, specify_shape
from theano_dag.tensor.subtensor import IncSubtensor, Subtensor
from theano_dag.tensor.type import TensorType, float_dtypes
from theano_dag.tensor.variable import TensorConstant, constant

__all__ = [
    "abs_arg",
    "scalar_op",
    "is_op",
    "const_value",
    "is_const",
    "is_scalar_like",
    "fit",
    "fit_keeping_lengths",
    "length_sources",
    "lengths_kept",
    "client_length_sources",
    "sources_cover",
    "may_spread",
    "spread_dims",
    "pattern",
    "const",
    "broadcast_fill",
    "typed_constant",
    "single_client",
    "is_float",
    "has_signed_zeros",
    "no_signed_zeros",
    "is_plus_zero",
    "index_entries",
    "index_in_range",
    "elemwise_of",
    "keep_trace",
    "count_scalar_ops",
    "graph_holds",
    "value_computed",
]


def scalar_op(node):
    """The scalar op of an Elemwise node that overwrites nothing, else None.

    >>> import theano_dag.tensor as tt
    >>> scalar_op(tt.exp(tt.dvector()).owner).name
    'exp'
    """
    if node is None or type(node) is str:  # no node, or the "output" marker
        return None
    op = node.op
    if type(op) is Elemwise and not op.inplace_items:
        return op.scalar_op
    return None


def is_op(var, scalar_cls):
    """Whether ``var`` is computed by a (non-inplace) Elemwise of scalar op class ``scalar_cls``.

    >>> import theano_dag.tensor as tt
    >>> is_op(tt.neg(tt.dvector()), ts.Neg), is_op(tt.dvector(), ts.Neg)
    (True, False)
    """
    return isinstance(scalar_op(var.owner), scalar_cls)


def elemwise_of(scalar):
    """The Elemwise op applying ``scalar`` (an existing instance from ``tensor.math`` when
    there is one, so that printed graphs and equality look the same)."""

    return _ew(scalar)


def const_value(var, elemwise=True):
    """The number every element of ``var`` is known to hold, else None.

    Sees through DimShuffle, Alloc, fill and cast of constants.

    >>> import theano_dag.tensor as tt
    >>> float(const_value(tt.constant(2.0).dimshuffle("x"))), const_value(tt.dvector())
    (2.0, None)
    """
    # A walk down to the constant first: most variables are not constants, and finding
    # that out must be cheap (rewrites ask this about every input they look at).
    v = var
    casts = []
    for _ in range(16):
        owner = v.owner
        if owner is None:
            break
        op = owner.op
        t = type(op)
        if t is DimShuffle or t is Alloc:
            v = owner.inputs[0]
        elif t is Elemwise and elemwise and not op.inplace_items:
            sop = type(op.scalar_op)
            if sop is ts.Second:
                v = owner.inputs[1]
            elif sop is ts.Cast:
                casts.append(op.scalar_op.o_type)
                v = owner.inputs[0]
            else:
                return None
        else:
            return None
    if not isinstance(v, TensorConstant):
        return None
    value = _uniform_value(v)
    if value is None:
        return None
    if casts:
        value = np.asarray(value)
        for dtype in reversed(casts):
            value = value.astype(dtype)
        return value[()]
    return value


# TensorConstant -> the value all its elements hold (None if they differ). A constant's
# data never changes (it is read-only), and rewrites ask about the same few constants
# on every node they visit.
_UNIFORM_VALUES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NOT_UNIFORM = object()


def _uniform_value(c):
    try:
        value = _UNIFORM_VALUES[c]
    except (KeyError, TypeError):
        value = _compute_uniform_value(c)
        try:
            _UNIFORM_VALUES[c] = _NOT_UNIFORM if value is None else value
        except TypeError:  # not weakly referable: just not cached
            pass
        return value
    return None if value is _NOT_UNIFORM else value


def _compute_uniform_value(c):
    data = np.asarray(c.data)
    if data.size == 0:
        return None
    first = data.flat[0]
    if data.size > 1:
        with np.errstate(invalid="ignore"):
            same = data == first
        if not (same.all() or (np.isnan(first) and np.isnan(data).all())):
            return None
    return np.asarray(first)[()]


def is_const(var, value) -> bool:
    """Whether every element of ``var`` is the constant ``value``.

    >>> import theano_dag.tensor as tt
    >>> is_const(tt.constant([1.0, 1.0]), 1), is_const(tt.constant(0), 1)
    (True, False)
    """
    v = const_value(var)
    if v is None:
        return False
    with np.errstate(invalid="ignore"):
        return bool(v == value)


def is_scalar_like(var) -> bool:
    """Whether ``var`` broadcasts along every dimension (a scalar in array clothing)."""
    return all(var.type.broadcastable)


def is_float(var) -> bool:
    return var.type.dtype in float_dtypes


def has_signed_zeros(var) -> bool:
    """Whether ``var``'s dtype has a -0.0 beside 0.0 (a float or a complex): where
    ``-0.0 + 0.0`` is ``0.0`` and ``0.0 - 0.0`` is not ``-(0.0)``, so dropping a zero term
    or negating for a subtraction from zero changes the sign of a zero, which ``1 / x``,
    ``arctan2`` and a pole of ``gamma`` tell apart.

    >>> import theano_dag.tensor as tt
    >>> has_signed_zeros(tt.dvector()), has_signed_zeros(tt.ivector())
    (True, False)
    """
    return np.dtype(var.type.dtype).kind in "fc"


def no_signed_zeros(var) -> bool:
    """``not has_signed_zeros(var)``: a pattern's constraint."""
    return not has_signed_zeros(var)


has_signed_zeros.side_effect_free = no_signed_zeros.side_effect_free = True


def is_plus_zero(var) -> bool:
    """Whether ``var`` is a constant zero some element of which is ``+0`` (an integer 0
    too: it converts to ``0.0``), as opposed to ``-0.0``, which leaves every ``x + -0.0``
    exactly ``x``.

    >>> import theano_dag.tensor as tt
    >>> is_plus_zero(tt.constant(0.0)), is_plus_zero(tt.constant(-0.0))
    (True, False)
    """
    v = const_value(var)
    return v is not None and bool(np.all(v == 0)) and not bool(np.all(np.signbit(v)))


def index_entries(node):
    """The index of a Subtensor (or IncSubtensor) node, one entry per indexed dimension:
    an int scalar variable, or a ``slice`` of int scalar variables (None for a part left
    out).

    >>> import theano_dag.tensor as tt
    >>> x, i = tt.dmatrix("x"), tt.lscalar("i")
    >>> index_entries(x[1:, i].owner)
    [slice(1, None, None), i]
    """
    skip = 2 if isinstance(node.op, IncSubtensor) else 1
    it = iter(node.inputs[skip:])
    out = []
    for entry in node.op.idx_list:
        if entry[0] == "int":
            out.append(next(it))
        else:
            out.append(slice(*(next(it) if present else None for present in entry[1:])))
    return out


def index_in_range(index, length) -> bool:
    """Whether ``index`` (an integer, or an integer array) is known, with ``length`` (an
    int, a variable, or None: unknown), to read elements only.

    >>> import theano_dag.tensor as tt
    >>> index_in_range(tt.constant(2), 3), index_in_range(tt.constant(-4), 3)
    (True, False)
    """
    # (a constant array's own entries: const_value knows a uniform one only)
    i = index.data if isinstance(index, TensorConstant) else const_value(index)
    n = length if length is None or isinstance(length, int) else const_value(length)
    if i is None or n is None:
        return False
    return bool(((-int(n) <= np.asarray(i)) & (np.asarray(i) < int(n))).all())


def typed_constant(value, dtype, ndim=0):
    """A constant of ``dtype`` holding ``value``, with ``ndim`` broadcastable dimensions."""
    return constant(np.asarray(value, dtype=dtype).reshape((1,) * ndim))


def _add_leading_dims(var, ndim):
    if var.ndim >= ndim:
        return var
    return DimShuffle(var.broadcastable, ["x"] * (ndim - var.ndim) + list(range(var.ndim)))(var)


def broadcast_fill(new, shape_sources, out_type):
    """``new`` broadcast (with ``fill``) over ``shape_sources`` until its static shape is as
    broadcast as ``out_type``'s; the variables used are those whose shape the original
    expression depended on."""
    new = _add_leading_dims(new, out_type.ndim)
    for src in shape_sources:
        if _covers(new.type, out_type):
            break
        if src.ndim > out_type.ndim or isinstance(src, Constant) and all(src.broadcastable):
            continue
        src = _add_leading_dims(src, out_type.ndim)
        if any(
            nb and not sb for nb, sb in zip(new.type.broadcastable, src.type.broadcastable)
        ):  # src varies along a dimension new lacks: spread new over src's shape
            new = fill(src, new)
    return new


def _covers(t, out_type) -> bool:
    """Whether a value of type ``t`` has (statically) the dimensions ``out_type`` has."""
    return all(not (tb and not ob) for tb, ob in zip(t.broadcastable, out_type.broadcastable))


def fit(old, new, shape_sources=()):
    """``new`` made to have ``old``'s type, or None when that cannot be done.

    The dtype is cast; missing dimensions are added; ``shape_sources`` (variables of the
    original expression) are used to spread ``new`` over dimensions it lacks. A number
    becomes a constant of ``old``'s dtype first (the ``0`` of a pattern ``x * 0 -> 0``).

    >>> import theano_dag.tensor as tt
    >>> x, r = tt.dmatrix("x"), tt.drow("r")
    >>> fit(x + r, r, [x]).type == (x + r).type
    True
    >>> fit(tt.ivector("i") + 0.5, tt.ivector("i")).dtype
    'float64'
    """
    if new is None:
        return None
    ot = old.type
    if not isinstance(new, Variable):
        if not isinstance(ot, TensorType):
            return None
        new = typed_constant(new, ot.dtype)
    if new.type == ot:
        return new
    if not isinstance(ot, TensorType) or not isinstance(new.type, TensorType):
        return None
    if new.ndim > ot.ndim:
        return None
    new = _add_leading_dims(new, ot.ndim)
    if not _covers(new.type, ot):
        new = broadcast_fill(new, shape_sources, ot)
    if new.dtype != ot.dtype:
        new = cast(new, ot.dtype)
    if new.type == ot or ot.is_super(new.type):
        return new
    return None


def keep_static_shape(new, old):
    """``new``, with the static lengths ``old``'s type has and ``new``'s lacks stated by
    ``specify_shape`` (a replacement built from variables of unknown lengths, where the
    graph knew them: the graph takes no variable of a less specific type in its place).

    >>> import theano_dag.tensor as tt
    >>> old = tt.TensorType("float64", shape=(3,))("old")
    >>> keep_static_shape(tt.dvector("new"), old).type.shape
    (3,)
    """
    if any(n is None and o is not None for n, o in zip(new.type.shape, old.type.shape)):
        return specify_shape(new, old.type.shape)
    return new


# How many ops above a variable length_sources walks (a length further up is the
# variable's own).
LENGTH_SOURCES_DEPTH = 24


def length_sources(v, d, fgraph=None, depth=LENGTH_SOURCES_DEPTH, _memo=None) -> frozenset:
    """The lengths the graph checks equal to ``v``'s along dimension ``d`` (and so knows
    equal to it), each as an int (a static length) or ``(variable, dimension)``: an
    elementwise op's result, the lengths of its inputs that do not broadcast there (the
    op checks that they agree); a DimShuffle's, its input's; an alloc's, the length asked
    (a ``Shape_i``'s variable's, a constant, the lengths an ``EqualLengths`` checks) and
    its value's. Any other variable's length is its own (or its static length). With
    ``fgraph``, the model ``m`` of a ``fill(m, v)`` that the function computes anyway
    (``value_computed``) gives one source ``("checked", sources of m)``: its op checks
    them equal, and one of them is enough (``sources_cover``).

    A rewrite that replaces ``old`` by ``new`` keeps every check of ``old``'s lengths
    when each source of ``old``'s length is one of ``new``'s (``lengths_kept``).

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> sorted(str(v) for v, _ in length_sources(tt.exp(x * y), 0))
    ['x', 'y']
    >>> length_sources(tt.alloc(0.0, x.shape[0]) + 1, 0) == length_sources(x, 0)
    True
    """
    memo = {} if _memo is None else _memo
    key = (v, d)
    if key in memo:
        return memo[key]
    static = v.type.shape[d]
    out = None
    owner = v.owner
    if v.type.broadcastable[d]:
        out = frozenset((1,))
    elif owner is not None and depth > 0:
        op = owner.op
        if isinstance(op, DimShuffle):
            out = length_sources(owner.inputs[0], op.new_order[d], fgraph, depth - 1, memo)
        elif isinstance(op, Elemwise):
            found = frozenset()
            model = fgraph is not None and isinstance(op.scalar_op, ts.Second)
            for k, i in enumerate(owner.inputs):
                if i.ndim == v.ndim and not i.type.broadcastable[d]:
                    inner = length_sources(i, d, fgraph, depth - 1, memo)
                    if model and k == 0 and value_computed(fgraph, i, besides=owner):
                        inner = frozenset((("checked", _flat(inner)),))
                    found |= inner
            out = found or None
        elif isinstance(op, Alloc):
            val, dims = owner.inputs[0], owner.inputs[1:]
            out = _length_var_sources(dims[d], fgraph, depth - 1, memo)
            k = d - (len(dims) - val.ndim)
            # The value's own length there, unless numpy may spread it: a length 1 its
            # type does not declare broadcastable fills any length asked.
            if k >= 0 and not may_spread(val, k):
                out |= length_sources(val, k, fgraph, depth - 1, memo)
    if out is None:
        out = frozenset((static if static is not None else key,))
    memo[key] = out
    return out


def may_spread(value, k) -> bool:
    """Whether numpy may spread ``value`` along its dimension ``k`` when the function
    runs, where an op writes it into a larger part (``alloc``, ``set_subtensor``,
    ``broadcast_to``): its type declares neither broadcastable nor a static length there,
    so a length 1 may fill any length.

    >>> import theano_dag.tensor as tt
    >>> may_spread(tt.dmatrix("v"), 0), may_spread(tt.drow("r"), 0)
    (True, False)
    """
    return value.type.shape[k] is None


def spread_dims(value, target, fgraph=None) -> list:
    """The dimensions of ``target`` (right-aligned with ``value``'s) along which numpy
    may spread ``value`` written into it (``may_spread``) and nothing in the graph
    checks their lengths equal (``length_sources``).

    >>> import theano_dag.tensor as tt
    >>> v, m = tt.dmatrix("v"), tt.dmatrix("m")
    >>> spread_dims(v, m), spread_dims(v, tt.exp(v)), spread_dims(tt.drow("r"), m)
    ([0, 1], [], [1])
    """
    off = target.ndim - value.ndim
    out = []
    memo: dict = {}
    for k in range(value.ndim):
        d = k + off
        if not may_spread(value, k) or target.type.shape[d] == 1:
            continue
        have = length_sources(target, d, fgraph, _memo=memo)
        if not sources_cover(length_sources(value, k, fgraph, _memo=memo), have):
            out.append(d)
    return out


def _length_var_sources(n, fgraph, depth, memo) -> frozenset:
    """``length_sources`` of a length itself (an int scalar variable)."""
    c = const_value(n, elemwise=False) if isinstance(n, Variable) else n
    if c is not None:
        return frozenset((int(c),))
    owner = n.owner
    if owner is not None and depth > 0:
        if isinstance(owner.op, Shape_i):
            return length_sources(owner.inputs[0], owner.op.i, fgraph, depth, memo)
        shape = owner.inputs[0].owner if owner.inputs else None
        if (
            isinstance(owner.op, Subtensor)
            and owner.op.idx_list == (("int",),)
            and shape is not None
            and isinstance(shape.op, Shape)
        ):  # x.shape[i]
            i = const_value(owner.inputs[1], elemwise=False)
            x = shape.inputs[0]
            if i is not None and -x.ndim <= int(i) < x.ndim:
                return length_sources(x, int(i) % x.ndim, fgraph, depth, memo)
        if isinstance(owner.op, IndicesInBounds):  # the first passes, its indices checked
            return _length_var_sources(owner.inputs[0], fgraph, depth - 1, memo)
        if isinstance(owner.op, EqualLengths):
            if owner.op.guard:  # the first passes unchecked; the others, no length of it
                return _length_var_sources(owner.inputs[0], fgraph, depth - 1, memo)
            found = frozenset()
            for i in owner.inputs:
                found |= _length_var_sources(i, fgraph, depth - 1, memo)
            return found
    return frozenset(((n, None),))


# How many elementwise ops after a variable client_length_sources walks.
CLIENT_LENGTHS_DEPTH = 8


def client_length_sources(fgraph, v, d, _memo=None, depth=CLIENT_LENGTHS_DEPTH) -> frozenset:
    """The sources (``length_sources``) of lengths that the elementwise ops reading ``v``
    (and those reading their results, along the same dimension), whose results the
    function computes, check equal to ``v``'s along dimension ``d``: what a rewrite of
    ``v`` keeps checked by the ops after it.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> e = tt.exp(x)
    >>> g = FunctionGraph([x, y], [e * y], clone=False)
    >>> client_length_sources(g, e, 0) == {(y, 0)}
    True
    """
    found = frozenset()
    if fgraph is None or v.type.broadcastable[d] or depth <= 0:
        return found
    for client, k in fgraph.clients.get(v, ()):
        if type(client) is str or type(client.op) is not Elemwise:
            continue
        out = client.outputs[0]
        if not value_computed(fgraph, out):
            continue
        for j, i in enumerate(client.inputs):
            if j != k and i.ndim == v.ndim and not i.type.broadcastable[d]:
                found |= length_sources(i, d, fgraph, _memo=_memo)
        found |= client_length_sources(fgraph, out, d, _memo, depth - 1)
    return found


def _flat(sources) -> frozenset:
    """``sources`` with each group of checked ones (``("checked", group)``) opened."""
    out = set()
    for e in sources:
        if type(e) is tuple and e[0] == "checked":
            out |= e[1]
        else:
            out.add(e)
    return frozenset(out)


def sources_cover(need, given) -> bool:
    """Whether lengths of sources ``given`` (``length_sources``) are known equal to each
    of ``need``: each source of ``need`` is one of ``given``, and a group the function
    checks anyway shares one.

    >>> sources_cover(frozenset({("checked", frozenset({1, 2}))}), frozenset({2}))
    True
    """
    flat = _flat(given)
    for e in need:
        if type(e) is tuple and e[0] == "checked":
            if not e[1] & flat:
                return False
        elif e not in flat:
            return False
    return True


def _may_drop_lengths(node) -> bool:
    """Whether an input of ``node`` is a broadcast (alloc, fill, a constant array) that
    a rewrite could drop with lengths of its own: ``lengths_kept``'s quick answer."""
    for i in node.inputs:
        v = i
        while v.owner is not None and (
            type(v.owner.op) is DimShuffle or isinstance(scalar_op(v.owner), ts.Cast)
        ):
            v = v.owner.inputs[0]
        if isinstance(v, Constant):
            if not all(v.type.broadcastable):
                return True
        elif v.owner is not None and (
            type(v.owner.op) is Alloc or isinstance(scalar_op(v.owner), ts.Second)
        ):
            return True
    return False


def lengths_kept(old, new, fgraph=None) -> bool:
    """Whether ``new`` (of ``old``'s type) still checks every length ``old``'s computation
    checks equal: each source of each length of ``old`` (``length_sources``) is one of
    ``new``'s, or of those the ops reading ``old`` in ``fgraph`` check. A rewrite that
    drops a broadcast (``x * fill(x * y, 1) -> x``) would otherwise give a value where
    the original raises.

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> lengths_kept(x * tt.fill(x * y, 1.0), x), lengths_kept(x * tt.fill(x, 1.0), x)
    (False, True)
    """
    node = old.owner
    if node is None or not isinstance(old.type, TensorType) or not _may_drop_lengths(node):
        return True
    return lengths_checked(old, new, fgraph)


def lengths_checked(old, new, fgraph=None) -> bool:
    """:func:`lengths_kept` without its quick answer: for a rewrite that drops an input
    of any kind (``switch(c, a, a) -> a`` drops ``c``, whose lengths the switch checks).

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> lengths_checked(tt.switch(x > 0, y, y), y), lengths_checked(tt.switch(y > 0, y, y), y)
    (False, True)
    """
    if old.owner is None or not isinstance(old.type, TensorType):
        return True
    if getattr(new.type, "ndim", None) != old.ndim:
        return True  # (not a replacement fit gives)
    memo: dict = {}
    for d in range(old.ndim):
        if not old.type.broadcastable[d]:
            need = length_sources(old, d, fgraph, _memo=memo)
            given = length_sources(new, d, fgraph, _memo=memo)
            if not sources_cover(need, given | client_length_sources(fgraph, old, d, memo)):
                return False
    return True


def fit_keeping_lengths(old, new, shape_sources=(), fgraph=None):
    """``fit``, declining a replacement that drops a check of lengths ``old`` makes
    (``lengths_kept``, with what ``fgraph`` computes): the fit of the pattern rules."""
    new = fit(old, new, shape_sources)
    if new is None or not isinstance(new, Variable) or not lengths_kept(old, new, fgraph):
        return None
    return new


fit_keeping_lengths.uses_fgraph = True  # PatternSub hands it the graph


def pattern(name, in_pattern, out_pattern, **options):
    """A ``PatternSub`` rule named ``name`` whose replacement is fitted to the type of
    what it replaces (``fit_keeping_lengths``): one line of a rule table.

    >>> import theano_dag.tensor as tt
    >>> str(pattern("local_neg_neg", (tt.neg, (tt.neg, "x")), "x"))
    'local_neg_neg'
    """
    return PatternSub(in_pattern, out_pattern, name=name, fit=fit_keeping_lengths, **options)


def const(value):
    """An input pattern matching a Variable every element of which is ``value`` (a
    constant, seen through broadcasts and casts: ``is_const``); it binds the name
    ``"const_<value>"``.

    >>> const(0)["pattern"]
    'const_0'
    """

    def constraint(var):
        return is_const(var, value)

    constraint.__name__ = f"is_const_{value}"
    constraint.side_effect_free = True  # PatternSub may ask it before matching
    return {"pattern": f"const_{value}", "constraint": constraint}


def abs_arg(var):
    """``x`` when ``var`` is ``abs(x)`` of a real float ``x``, else None.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> abs_arg(abs(x)) is x, abs_arg(x)
    (True, None)
    """
    owner = var.owner
    if owner is None or not isinstance(getattr(owner.op, "scalar_op", None), ts.Abs):
        return None
    x = owner.inputs[0]
    return x if x.type.dtype.startswith("float") else None


def single_client(fgraph, var) -> bool:
    """Whether exactly one node (at one position) uses ``var`` and it is not an output."""
    clients = fgraph.clients.get(var, ())
    # The "output" marker is the only client that is a str (and Apply's != is slow).
    return len(clients) == 1 and type(clients[0][0]) is not str


def keep_trace(old, new, inputs):
    """``new`` with the stack of ``old`` on each variable the rewrite made (those between
    ``new`` and ``inputs``) that has none, as Theano's rewrites copy it: an error in a
    node a rewrite made names the user's line of what it replaced.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> old = tt.exp(x)
    >>> old.tag.trace = [["line"]]
    >>> inner = x.dimshuffle("x", 0)
    >>> inner.tag.trace = []
    >>> new = keep_trace(old, tt.exp(inner), [x])
    >>> inner.tag.trace
    [['line']]
    """
    stop = set(inputs)
    todo, seen = [new], set()
    while todo:
        v = todo.pop()
        if v in seen or v in stop or v.owner is None:
            continue
        seen.add(v)
        if not get_stack_trace(v):
            copy_stack_trace(old, v)
        todo.extend(v.owner.inputs)
    return new


def ones_or_zeros_like(old, value, shape_sources):
    """A variable of ``old``'s type holding ``value`` everywhere, shaped by
    ``shape_sources`` (None if that is not possible)."""
    c = typed_constant(value, old.type.dtype)
    return fit(old, c, shape_sources)


_ = ts  # scalar op classes are looked up through this module by the rewrite modules


def count_scalar_ops(fgraph):
    """A rule's requirement: ``OpPresence`` attached to ``fgraph`` (its counts of the
    graph's nodes by op and scalar op class are what ``graph_holds`` reads)."""
    if not hasattr(fgraph, "op_presence"):
        fgraph.attach_feature(OpPresence())


def graph_holds(fgraph, *sops) -> bool:
    """Whether ``fgraph`` may hold an Elemwise node of one of the scalar ops ``sops``
    (of their classes; True when nothing counts them: a rule called outside an
    optimizer runs as before). A rule whose pattern needs a scalar op the graph does not
    hold (no sigmoid anywhere) returns at once, instead of walking the products of every
    ``add`` and ``mul`` to find none.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x = tt.dvector("x")
    >>> fg = FunctionGraph([x], [tt.exp(x) + 1], features=[OpPresence()])
    >>> graph_holds(fg, ts.exp), graph_holds(fg, ts.sigmoid)
    (True, False)
    """
    presence = getattr(fgraph, "op_presence", None)
    if presence is None:
        return True
    counts = presence.counts
    for s in sops:
        if counts.get(type(s)):
            return True
    return False


# The ops that read only their input's shape, and how far value_computed looks for an
# output. Past it, it answers no, which keeps checks the value's op makes anyway: 64
# values (a search of a few layers) kept 30-40 such checks in ResNet-50's and
# InceptionV3's graphs, computed at every call, and made the shape rewrites search the
# layers below for more (their compile twice as long). A search costs what it visits:
# the path to an output where the value is computed; the values computed from it where
# it is not (a graph that asks only shapes, until the rewrites drop those values).
_SHAPE_OPS = (Shape, Shape_i)
VALUE_COMPUTED_SEARCH = 1 << 16


# value_computed's answers (without ``besides``) per graph, for its current version:
# every rewrite of a graph that asks only shapes asks again about values the last search
# visited (a 64-level chain: 10,186 searches, most of its compile time).
_COMPUTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def value_computed(fgraph, v, besides=None) -> bool:
    """Whether the function computes ``v`` (not only its shape): a path leads from it to
    an output through nodes that read values (not ``Shape``/``Shape_i``, not an
    ``IfElse`` that may leave a branch uncomputed), found within
    ``VALUE_COMPUTED_SEARCH`` values. With ``besides`` (a node), a path through it does
    not count, nor one through a ``fill`` that reads ``v`` as its model (such fills may
    all be dropped).

    Answers without ``besides`` are kept until the graph changes: where no path is
    found, none leads from any value the search visited either (each is reached from
    ``v`` by the same rules), so they are all known not computed.
    """
    if fgraph is None:
        return False
    known = None
    version = getattr(fgraph, "_version", None)  # (a graph of ours: its changes count)
    if besides is None and version is not None:
        memo = _COMPUTED.get(fgraph)
        if memo is None or memo[0] != version:
            memo = _COMPUTED[fgraph] = (version, {})
        known = memo[1]
        answer = known.get(v)
        if answer is not None:
            return answer
    seen, stack = {v}, [v]
    while stack:
        var = stack.pop()
        for client, i in fgraph.clients.get(var, ()):
            if client == "output":
                if known is not None:
                    known[v] = True
                return True
            op = client.op
            if isinstance(op, _SHAPE_OPS) or getattr(op, "lazy_inputs", False):
                continue
            if besides is not None and (
                client is besides or (i == 0 and isinstance(scalar_op(client), ts.Second))
            ):
                continue
            for o in client.outputs:
                if o not in seen:
                    if known is not None:
                        answer = known.get(o)
                        if answer:
                            known[v] = True
                            return True
                        if answer is False:  # nothing it reaches is computed
                            seen.add(o)
                            continue
                    if len(seen) >= VALUE_COMPUTED_SEARCH:
                        return False
                    seen.add(o)
                    stack.append(o)
    if known is not None:
        for s in seen:
            known[s] = False
    return False
