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
from theano_dag.tensor.shape import Shape, Shape_i
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
    "pattern",
    "const",
    "broadcast_fill",
    "typed_constant",
    "single_client",
    "is_float",
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


def pattern(name, in_pattern, out_pattern, **options):
    """A ``PatternSub`` rule named ``name`` whose replacement is fitted to the type of
    what it replaces (``fit``): one line of a rule table.

    >>> import theano_dag.tensor as tt
    >>> str(pattern("local_neg_neg", (tt.neg, (tt.neg, "x")), "x"))
    'local_neg_neg'
    """
    return PatternSub(in_pattern, out_pattern, name=name, fit=fit, **options)


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
# output.
_SHAPE_OPS = (Shape, Shape_i)
VALUE_COMPUTED_SEARCH = 64


def value_computed(fgraph, v) -> bool:
    """Whether the function computes ``v`` (not only its shape): a path leads from it to
    an output through nodes that read values (not ``Shape``/``Shape_i``, not an
    ``IfElse`` that may leave a branch uncomputed), found within
    ``VALUE_COMPUTED_SEARCH`` values."""
    if fgraph is None:
        return False
    seen, stack = {v}, [v]
    while stack:
        for client, _ in fgraph.clients.get(stack.pop(), ()):
            if client == "output":
                return True
            op = client.op
            if isinstance(op, _SHAPE_OPS) or getattr(op, "lazy_inputs", False):
                continue
            for o in client.outputs:
                if o not in seen:
                    if len(seen) >= VALUE_COMPUTED_SEARCH:
                        return False
                    seen.add(o)
                    stack.append(o)
    return False
