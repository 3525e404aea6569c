"""Canonicalization: algebraic identities, broadcasts and a canonical argument order.

Simple identities are a table of patterns, one line each; rules that need code are
functions. Each rule keeps the type of what it replaces (dtype and broadcast pattern:
``x * 0`` becomes zeros of the shape ``x * 0`` had, not a scalar 0): the framework fits
the replacement (``fit``), the rules do not. Rules tagged
``nonfinite_unsafe`` are exact for finite numbers but not for inf and NaN
(``inf - inf`` is NaN, not 0: ``x - x -> 0``, ``x * 0 -> 0``); FAST_RUN uses them, as
Theano does, and ``mode.excluding("nonfinite_unsafe")`` leaves them out.
"""

from __future__ import annotations

import weakref

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.rewriting.basic import GlobalOptimizer
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.graph.toolbox import AlreadyThere, Feature, InputReorder, ReplaceValidate
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import (
    client_length_sources,
    const,
    const_value,
    elemwise_of,
    fit,
    has_signed_zeros,
    is_const,
    is_float,
    length_sources,
    no_signed_zeros,
    pattern,
    scalar_op,
    single_client,
    sources_cover,
    spread_dims,
    typed_constant,
)
from theano_dag.tensor import math as tm
from theano_dag.tensor.arrays import Assert
from theano_dag.tensor.basic import Alloc, alloc, cast, fill
from theano_dag.tensor.blas import Dot22
from theano_dag.tensor.elemwise import DimShuffle, Elemwise, Sum
from theano_dag.tensor.math import Dot
from theano_dag.tensor.shape import MakeVector, Reshape, shape_i

__all__ = [
    "NONFINITE_UNSAFE",
    "REASSOCIATE",
    "commutative_key",
    "local_add_zero",
    "local_add_zero_float",
    "local_mul_one",
    "local_mul_zero",
    "local_zero_div",
    "local_zero_int_div",
    "local_div_one",
    "local_int_div_one",
    "local_intdiv_by_one",
    "local_sub_zero",
    "local_zero_sub",
    "local_zero_sub_float",
    "local_sub_self",
    "local_neg_neg",
    "local_abs_neg",
    "local_abs_lift",
    "local_log_exp",
    "local_exp_log",
    "local_dimshuffle_dimshuffle",
    "local_reshape_reshape",
    "local_alloc_alloc",
    "local_elemwise_drop_broadcast",
    "local_commutative_flatten",
    "CommutativeSort",
    "commutative_sort",
    "local_0_dot_x",
    "local_sum_make_vector",
    "local_add_of_zeros",
]

# Tag of rewrites that are exact for finite values only.
NONFINITE_UNSAFE = "nonfinite_unsafe"
# Tag of rewrites that reorder the terms of a sum or the factors of a product: exact in
# real arithmetic, not where an intermediate overflows or underflows in one order and
# not in the other (float32 x * (x * 1e-30) at x = 1e30 is 1e30; (x * x) * 1e-30 is inf).
REASSOCIATE = "reassociate"

# The elementwise ops whose arguments may be reordered (tracked by instance, so that a
# rule only meets the nodes it can change).
COMMUTATIVE_OPS = [tm.add, tm.mul, tm.maximum, tm.minimum, tm.eq, tm.neq, tm.and_, tm.or_, tm.xor]


def _not_float(var):
    return not is_float(var)


ZERO, ONE = const(0), const(1)


def _signed(v) -> bool:
    return np.dtype(v.type.dtype).kind in "ifc"


_F = {"pattern": "x", "constraint": is_float}  # x, a float (neg of a bool is an int8)
canonicalize = RULES.canonicalize

# -- the pattern table: one rule a line -------------------------------------------------
# The framework fits each replacement to the type of what it replaces (``fit``: cast,
# broadcast over the matched variables), so ``x * 0 -> 0`` gives zeros of the product's
# shape and dtype. ``commutative=True``: ``0 + x`` matches ``x + 0`` too.
_FAST = "fast_compile"

# x + 0 -> x
local_add_zero = canonicalize(_FAST)(
    pattern(
        "local_add_zero",
        (tm.add, {"pattern": "x", "constraint": no_signed_zeros}, ZERO),
        "x",
        commutative=True,
    )
)
# The same of a float x: exact but for the sign of a zero (-0.0 + 0.0 is 0.0, the rewrite
# keeps -0.0; 1 / x tells them apart), which excluding nonfinite_unsafe keeps.
local_add_zero_float = canonicalize(_FAST, NONFINITE_UNSAFE)(
    pattern(
        "local_add_zero_float",
        (tm.add, {"pattern": "x", "constraint": has_signed_zeros}, ZERO),
        "x",
        commutative=True,
    )
)
# x * 1 -> x
local_mul_one = canonicalize(_FAST)(
    pattern("local_mul_one", (tm.mul, "x", ONE), "x", commutative=True)
)
# x * 0 -> 0   (NaN * 0 is NaN: nonfinite_unsafe)
local_mul_zero = canonicalize(NONFINITE_UNSAFE)(
    pattern("local_mul_zero", (tm.mul, "x", ZERO), 0, commutative=True)
)
# 0 / x -> 0 ; 0 // x -> 0   (0 / 0 is NaN: nonfinite_unsafe; Theano's local_zero_div)
local_zero_div = canonicalize(NONFINITE_UNSAFE)(
    pattern("local_zero_div", (tm.true_div, ZERO, "x"), 0)
)
local_zero_int_div = canonicalize(NONFINITE_UNSAFE)(
    pattern("local_zero_int_div", (tm.int_div, ZERO, "x"), 0)
)
# x / 1 -> x
local_div_one = canonicalize(_FAST)(pattern("local_div_one", (tm.true_div, "x", ONE), "x"))
# x // 1 -> x   (integers: x // 1 is floor(x) for floats)
local_int_div_one = canonicalize(_FAST)(
    pattern(
        "local_int_div_one",
        {"pattern": (tm.int_div, "x", ONE), "constraint": _not_float},
        "x",
    )
)
# x // 1 -> floor(x)   (floats; inf // 1 is NaN in numpy, floor(inf) is inf:
# nonfinite_unsafe; Theano's local_intdiv_by_one gives x, wrong for 2.5 // 1)
local_intdiv_by_one = canonicalize(NONFINITE_UNSAFE)(
    pattern(
        "local_intdiv_by_one",
        {"pattern": (tm.int_div, "x", ONE), "constraint": is_float},
        (tm.floor, "x"),
    )
)
# x - 0 -> x
local_sub_zero = canonicalize()(pattern("local_sub_zero", (tm.sub, "x", ZERO), "x"))
# x - x -> 0   (inf - inf is NaN: nonfinite_unsafe)
local_sub_self = canonicalize(NONFINITE_UNSAFE)(pattern("local_sub_self", (tm.sub, "x", "x"), 0))
# --x -> x   (floats)
local_neg_neg = canonicalize(_FAST)(pattern("local_neg_neg", (tm.neg, (tm.neg, _F)), "x"))
# |-x| -> |x|   (exact for signed values, integers' most negative value included: its
# negation wraps to itself; not for unsigned ones, where -5 wraps to 2**n - 5)
local_abs_neg = canonicalize(_FAST)(
    pattern(
        "local_abs_neg",
        (tm.abs, (tm.neg, {"pattern": "x", "constraint": _signed})),
        (tm.abs, "x"),
    )
)
# log(exp(x)) -> x
# (where exp(x) overflows, the written graph gives inf and the rewrite x: nonfinite_unsafe;
# exp(x) may have other uses, as in the gradient of log(exp(x)): the rewrite still holds;
# in stabilize too, where log(1 + expm1(x)) becomes log(exp(x)))
local_log_exp = RULES.stabilize(NONFINITE_UNSAFE)(
    canonicalize(NONFINITE_UNSAFE, "stabilize")(
        pattern("local_log_exp", (tm.log, (tm.exp, _F)), "x", allow_multiple_clients=True)
    )
)


def _nan_below_zero(x):
    """``x`` where ``x >= 0``, NaN elsewhere (what ``exp(log(x))`` computes)."""
    return tm.switch(tm.ge(x, 0), x, typed_constant(np.nan, x.dtype, x.ndim))


# exp(log(x)) -> switch(x >= 0, x, nan)
local_exp_log = canonicalize("stabilize")(
    pattern(
        "local_exp_log",
        (tm.exp, (tm.log, _F)),
        (_nan_below_zero, "x"),
        allow_multiple_clients=True,
    )
)


# -- rules that need code ---------------------------------------------------------------


def _real_float(var) -> bool:
    return var.type.dtype.startswith("float")


def _abs_is_exact(var) -> bool:
    """Whether ``|var|`` is the magnitude of every value: real floats, unsigned integers
    and known numbers (a signed integer's most negative value is its own ``abs``)."""
    kind = np.dtype(var.type.dtype).kind
    if kind in "fub":
        return True
    c = const_value(var) if kind == "i" else None
    return c is not None and c != np.iinfo(var.type.dtype).min


@canonicalize()
@local_optimizer([tm.abs], fit=fit)
def local_abs_lift(fgraph, node):
    """``|x * y|`` becomes ``|x| * |y|`` and ``|x / y|`` becomes ``|x| / |y|`` (Theano's
    ``local_abs_lift``), so that the product canonizer meets ``x / |x|`` as such and
    makes it ``sgn(x)``: ``(4 * x) / |2 * x|`` is ``2 * sgn(x)``, 0 at ``x = 0`` where
    the written quotient is NaN. Real floats only, of factors whose ``abs`` is exact,
    and only a product used nowhere else, which then goes away; specialize's
    ``local_abs_merge`` joins what is left into one ``abs`` again.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.opt import in2out
    >>> x, y = tt.dvectors("x", "y")
    >>> fg = FunctionGraph([x, y], [abs(x * y)])
    >>> _ = in2out(local_abs_lift).optimize(fg)
    >>> [n.op for n in fg.toposort()]
    [Elemwise{abs,no_inplace}, Elemwise{abs,no_inplace}, Elemwise{mul,no_inplace}]
    """
    # |x * y| -> |x| * |y| ; |x / y| -> |x| / |y|
    inner = node.inputs[0]
    sop = scalar_op(inner.owner)
    if not isinstance(sop, (ts.Mul, ts.TrueDiv)) or not _real_float(inner):
        return None
    if not single_client(fgraph, inner):
        return None
    args = inner.owner.inputs
    if not all(_abs_is_exact(a) for a in args):
        return None
    return inner.owner.op(*[tm.abs(a) for a in args])


@canonicalize()
@local_optimizer([tm.sub], fit=fit)
def local_zero_sub(fgraph, node):
    """Subtracting from zero negates (in the result's dtype: ``0 - u`` of a uint8 ``u``
    is an int16, and must not wrap around)."""
    # 0 - x -> -x
    if not isinstance(scalar_op(node), ts.Sub) or has_signed_zeros(node.outputs[0]):
        return None
    return _negated(node)


@canonicalize(NONFINITE_UNSAFE)
@local_optimizer([tm.sub], fit=fit)
def local_zero_sub_float(fgraph, node):
    """``0 - x -> -x`` in a float dtype: exact but for the sign of a zero (``0.0 - 0.0``
    is ``0.0``, ``-0.0`` negated; ``1 / x`` tells them apart), an integer or bool ``x``'s
    zero included (it converts to ``0.0``)."""
    if not isinstance(scalar_op(node), ts.Sub) or not has_signed_zeros(node.outputs[0]):
        return None
    return _negated(node)


def _negated(node):
    """``-x`` for the node ``0 - x`` (None if it is not one), of its output's type."""
    zero, x = node.inputs
    out = node.outputs[0]
    if not is_const(zero, 0) or out.dtype == "bool":
        return None
    neg = tm.neg(cast(x, out.dtype))
    pad = (True,) * (out.ndim - x.ndim)
    if pad + tuple(x.broadcastable) != tuple(out.broadcastable):
        # The zeros (x - x's fill, say) may be larger than x: keep their shape, which
        # fitting the type alone does not (found by the fuzzer: (n, 1) - (n, 1) - (4,)
        # gave shape (1, 4)).
        return fill(zero, neg)
    return neg


@canonicalize(_FAST)
@local_optimizer([DimShuffle], fit=fit)
def local_dimshuffle_dimshuffle(fgraph, node):
    """Two DimShuffles in a row are one (``x.T.T`` becomes ``x``, once the identity
    DimShuffle left is removed)."""
    # dimshuffle{o2}(dimshuffle{o1}(x)) -> dimshuffle{o1[o2]}(x)
    inner = node.inputs[0].owner
    if inner is None or not isinstance(inner.op, DimShuffle):
        return None
    order1 = inner.op.new_order
    order = [o if o == "x" else order1[o] for o in node.op.new_order]
    x = inner.inputs[0]
    try:
        return DimShuffle(x.broadcastable, order)(x)
    except ValueError:
        return None


@canonicalize()
@local_optimizer([Reshape], fit=fit)
def local_reshape_reshape(fgraph, node):
    """Only the last of two reshapes matters."""
    # reshape(reshape(x, s1), s2) -> reshape(x, s2)
    inner = node.inputs[0].owner
    if inner is None or not isinstance(inner.op, Reshape):
        return None
    return node.op(inner.inputs[0], node.inputs[1])


@canonicalize("local_merge_alloc")  # Theano's name, as a tag
@local_optimizer([Alloc], fit=fit)
def local_alloc_alloc(fgraph, node):
    """An alloc of an alloc is one alloc of the inner value (the outer shape wins; where
    both give a length, they must agree: an Assert keeps the check the inner alloc made).

    >>> import theano_dag.tensor as tt
    >>> m, x, y = tt.dscalar("m"), tt.lscalar("x"), tt.lscalar("y")
    >>> a = tt.alloc(tt.alloc(m, x, y), 2, x, y)
    >>> local_alloc_alloc.transform(None, a.owner)[0].owner.inputs[0] is m
    True
    """
    # alloc(alloc(m, x, y), 1, x, y) -> alloc(m, 1, x, y)
    inner = node.inputs[0]
    if inner.owner is None or not isinstance(inner.owner.op, Alloc):
        return False
    value, *inner_shape = inner.owner.inputs
    shape = list(node.inputs[1:])
    offset = len(shape) - len(inner_shape)
    for d, s in enumerate(inner_shape):
        outer = shape[offset + d]
        a, b = const_value(s), const_value(outer)
        if s is outer or (a is not None and int(a) == 1):
            continue
        if a is not None and b is not None:
            if int(a) != int(b):
                return False  # the inner alloc fixes a length the outer one repeats
            continue
        # two symbolic lengths: the merged alloc keeps the inner alloc's check
        check = Assert("alloc: the lengths differ")
        shape[offset + d] = check(outer, tm.eq(s, outer))
    return alloc(value, *shape)


def _broadcast_source(var):
    """``v`` when ``var`` is ``alloc(v, ...)`` or ``fill(m, v)`` (a broadcast of ``v``)."""
    owner = var.owner
    if owner is None:
        return None
    if isinstance(owner.op, Alloc):
        return owner.inputs[0]
    if isinstance(scalar_op(owner), ts.Second):
        return owner.inputs[1]
    return None


@canonicalize()
@local_optimizer([Elemwise], fit=fit, needs=[Alloc, ts.Second])
def local_elemwise_drop_broadcast(fgraph, node):
    """An Elemwise broadcasts its inputs itself: an input that is only a broadcast of a
    smaller value (alloc or fill) is replaced by that value when the other inputs give
    the result its shape anyway (Owl: "repeating the input of an operation supporting
    broadcasting"), with lengths known equal to the broadcast's (``length_sources``):
    ``y * fill(x * y, 1)``, the gradient of ``sum(x * y)``, keeps the fill, which checks
    ``x``'s length against ``y``'s.

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> local_elemwise_drop_broadcast.transform(None, (y * tt.fill(y, 2.0)).owner)
    [Elemwise{mul,no_inplace}.0]
    >>> local_elemwise_drop_broadcast.transform(None, (y * tt.fill(x * y, 2.0)).owner)
    """
    # add(x, alloc(y, *x.shape)) -> add(x, y) ; mul(x, fill(x, y)) -> mul(x, y)
    sop = scalar_op(node)
    if sop is None or isinstance(sop, ts.Second) or len(node.inputs) < 2:
        return None
    # _broadcast_source's test first, on every input at once: most nodes have no input
    # an alloc or a fill computes.
    for inp in node.inputs:
        owner = inp.owner
        if owner is not None and (
            isinstance(owner.op, Alloc) or isinstance(scalar_op(owner), ts.Second)
        ):
            break
    else:
        return None
    out = node.outputs[0]
    ins = list(node.inputs)
    changed = False
    memo: dict = {}
    for k, inp in enumerate(ins):
        src = _broadcast_source(inp)
        if src is None or src.ndim > out.ndim or src.dtype != inp.dtype:
            continue
        if isinstance(inp.owner.op, Alloc) and spread_dims(src, inp, fgraph):
            continue  # the alloc may spread a length 1 that the Elemwise would refuse
        trial = ins[:k] + [src] + ins[k + 1 :]
        others = [i for j, i in enumerate(trial) if j != k]
        if _broadcast_of(others, out.ndim) != out.type.broadcastable:
            continue
        if not _lengths_given(fgraph, inp, trial, out, memo):
            continue  # the broadcast's lengths are checked against the others' here only
        ins = trial
        changed = True
    if not changed:
        return None
    try:
        return node.op(*ins)
    except (TypeError, ValueError):
        return None


def _lengths_given(fgraph, inp, ins, out, memo) -> bool:
    """Whether the lengths of ``inp`` (an input of an elementwise op, ``inp.ndim`` its
    result ``out``'s) are known equal to those ``ins`` give, or the ops reading ``out``
    check, along each dimension it does not broadcast (``length_sources``): dropping it
    drops no check."""
    for d, b in enumerate(inp.type.broadcastable):
        if b:
            continue
        given = client_length_sources(fgraph, out, d, memo)
        for i in ins:
            off = inp.ndim - i.ndim
            if d >= off and not i.type.broadcastable[d - off]:
                given |= length_sources(i, d - off, fgraph, _memo=memo)
        if not sources_cover(length_sources(inp, d, fgraph, _memo=memo), given):
            return False
    return True


def _broadcast_of(variables, ndim):
    pattern = [True] * ndim
    for v in variables:
        off = ndim - v.ndim
        for d, b in enumerate(v.broadcastable):
            if not b:
                pattern[off + d] = False
    return tuple(pattern)


# -- canonical argument order -----------------------------------------------------------


def commutative_key(var):
    """Sort key of the arguments of commutative ops: variables in creation order (so two
    orders of the same arguments sort alike and merge finds them), constants last.

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> sorted([tt.constant(2.0), y, x], key=commutative_key)[:2] == [x, y]
    True
    """
    base = var
    owner = var.owner
    if owner is not None and type(owner.op) is DimShuffle:
        base = owner.inputs[0]  # a broadcast constant sorts as the constant
    if isinstance(base, Constant):
        return (*_constant_key(base), var.ndim)
    return (0, var.creation_index)


# Constant -> the start of its sort key (its data never changes; dtype names are slow).
_CONSTANT_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _constant_key(c):
    try:
        return _CONSTANT_KEYS[c]
    except (KeyError, TypeError):
        data = np.asarray(c.data)
        key = (1, str(data.dtype), data.shape, data.tobytes())
        try:
            _CONSTANT_KEYS[c] = key
        except TypeError:  # not weakly referable: just not cached
            pass
        return key


def _canonical_order(inputs):
    """``inputs`` sorted by ``commutative_key``, or None when they already are."""
    if len(inputs) == 2:  # the common case, without sorted() (a stable sort keeps ties)
        a, b = inputs
        return None if commutative_key(a) <= commutative_key(b) else [b, a]
    order = sorted(inputs, key=commutative_key)
    return None if all(a is b for a, b in zip(order, inputs)) else order


_COMMUTATIVE_SCALARS = frozenset(type(op.scalar_op) for op in COMMUTATIVE_OPS)


def _is_commutative(node) -> bool:
    sop = scalar_op(node)
    return (
        type(sop) in _COMMUTATIVE_SCALARS
        and len(node.outputs) == 1
        and sop.commutes(node.outputs[0].dtype)
    )


@canonicalize(REASSOCIATE)
@local_optimizer([op for op in COMMUTATIVE_OPS if op.scalar_op.nin == -1], fit=fit)
def local_commutative_flatten(fgraph, node):
    """Nested ``add``/``mul`` of the same dtype become one node (its arguments in the
    canonical order), so that merge finds more common subexpressions."""
    # add(add(a, b), c) -> add(a, b, c)
    sop = scalar_op(node)
    if sop is None or not sop.associative or len(node.outputs) != 1:
        return None
    out = node.outputs[0]
    flat = []
    flattened = False
    for i in node.inputs:
        inner = i.owner
        if scalar_op(inner) == sop and i.dtype == out.dtype and single_client(fgraph, i):
            flat.extend(inner.inputs)
            flattened = True
        else:
            flat.append(i)
    if not flattened:
        return None
    return elemwise_of(sop)(*sorted(flat, key=commutative_key))


class _UnsortedNodes(Feature):
    """The nodes of commutative ops whose arguments may be out of the canonical order:
    all at first, then those imported or given a new input since (an ordered set)."""

    def on_attach(self, fgraph):
        if hasattr(fgraph, "unsorted_commutative_nodes"):
            raise AlreadyThere()
        fgraph.unsorted_commutative_nodes = self
        self.nodes = dict.fromkeys(n for n in fgraph.toposort() if _is_commutative(n))

    def on_detach(self, fgraph):
        del fgraph.unsorted_commutative_nodes

    def clone(self):
        return type(self)()  # a copy of the graph gets its own set

    def on_import(self, fgraph, node, reason):
        if _is_commutative(node):
            self.nodes[node] = None

    def on_change_input(self, fgraph, node, i, var, new_var, reason=None):
        # A reorder leaves the node sorted; a new input may sort elsewhere.
        if type(node) is not str and type(reason) is not InputReorder and _is_commutative(node):
            self.nodes[node] = None

    def on_prune(self, fgraph, node, reason):
        self.nodes.pop(node, None)


class CommutativeSort(GlobalOptimizer):
    """Arguments of commutative ops in the canonical order of ``commutative_key``
    (``mul(y, x) -> mul(x, y)``, ``eq(y, x) -> eq(x, y)``), so that merge finds the same
    computation written twice.

    A global pass, run by canonicalize after every change (a ``cleanup``): it visits
    only the nodes made or changed since its last run (``_UnsortedNodes``), and moves
    the arguments in the node itself (``FunctionGraph.reorder_inputs``: no new node, no
    client to rewire) unless a moved argument would change type (broadcasting), where
    a new node replaces the old.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> fg = FunctionGraph([x, y], [y * x], clone=False)
    >>> CommutativeSort().optimize(fg)
    >>> fg
    FunctionGraph(Elemwise{mul,no_inplace}(x, y))
    """

    def add_requirements(self, fgraph):
        if not hasattr(fgraph, "replace_all_validate"):
            fgraph.attach_feature(ReplaceValidate())
        if not hasattr(fgraph, "unsorted_commutative_nodes"):
            fgraph.attach_feature(_UnsortedNodes())

    def release(self, fgraph):
        """Stop tracking the unsorted nodes (the EquilibriumOptimizer running this pass
        is done): attached again, the tracker starts from every commutative node, which
        the ones sorted since are among."""
        feature = getattr(fgraph, "unsorted_commutative_nodes", None)
        if feature is not None:
            fgraph.remove_feature(feature)

    def apply(self, fgraph):
        pending = fgraph.unsorted_commutative_nodes
        apply_nodes = fgraph.apply_nodes
        while pending.nodes:  # a replacement re-marks the clients of what it replaced
            batch, pending.nodes = pending.nodes, {}
            for node in batch:
                if node not in apply_nodes:
                    continue
                order = _canonical_order(node.inputs)
                if order is None:
                    continue
                if _reorderable(node, order):
                    fgraph.reorder_inputs(node, order, reason=self)
                else:
                    # A permutation of a commutative op's arguments gives the same output
                    # type: build the node directly (make_node's type inference is the
                    # costly part).
                    (out,) = node.outputs
                    new = Apply(node.op, order, [out.type()]).outputs[0]
                    fgraph.replace_all_validate([(out, new)], reason=self)

    def __str__(self):
        return "commutative_sort"


def _reorderable(node, order) -> bool:
    """Can ``node`` take the argument order ``order`` in place (``reorder_inputs``)?

    Not when an argument would change type at its position (broadcasting), nor for an
    op whose destroy or view map names input positions.
    """
    op = node.op
    if getattr(op, "destroy_map", None) or getattr(op, "view_map", None):
        return False
    return all(a is b or a.type == b.type for a, b in zip(order, node.inputs))


commutative_sort = canonicalize(cleanup=True)(CommutativeSort())


@canonicalize(NONFINITE_UNSAFE)
@local_optimizer([Dot, Dot22])
def local_0_dot_x(fgraph, node):
    """A product with a matrix or vector of zeros is zeros of the product's shape (exact
    for finite values only: ``0 * inf`` is NaN; Theano's name)."""
    # dot(zeros, y) -> alloc(0, *shape) ; dot(x, zeros) -> alloc(0, *shape)
    x, y = node.inputs
    zero = any(const_value(v) is not None and const_value(v) == 0 for v in (x, y))
    if not zero:
        return False
    out = node.outputs[0]
    shapes = [tuple(shape_i(v, d) for d in range(v.ndim)) for v in (x, y)]
    (shape,) = node.op.infer_shape(fgraph, node, shapes)
    # A length the product's type knows (a column's width of 1) is given as the number,
    # so that the zeros have the product's type (``shape_i`` gives a symbolic length).
    shape = [s if n is None else n for s, n in zip(shape, out.type.shape)]
    zeros = alloc(typed_constant(0, out.dtype), *shape)
    if x.ndim and y.ndim and not shape:
        # The product's own check of the inner lengths stays (the lengths of a result
        # with dimensions check them: Dot's infer_shape).
        inner = tm.eq(shapes[0][-1], shapes[1][0])
        zeros = Assert("dot: the inner dimensions of the operands differ")(zeros, inner)
    return [zeros]


@canonicalize(REASSOCIATE)
@local_optimizer([Sum])
def local_sum_make_vector(fgraph, node):
    """The sum of a vector just built from numbers is their sum as numbers (PyMC3's
    log-density: ``sum(stack([sum(f) for f in factors]))``): one elementwise sum the
    fusion joins with what surrounds it, no vector.

    >>> import theano_dag.tensor as tt
    >>> a, b = tt.dscalar("a"), tt.dscalar("b")
    >>> local_sum_make_vector.transform(None, tt.sum(tt.stack([a, b])).owner)[0].owner.op
    Elemwise{add,no_inplace}
    """
    # sum(make_vector(a, b, c)) -> add(a, b, c)   (in the order numpy sums a short vector)
    v = node.inputs[0]
    out = node.outputs[0]
    if v.owner is None or not isinstance(v.owner.op, MakeVector) or out.ndim != 0:
        return False
    if node.op.acc_dtype_for(v.dtype) != out.dtype or v.dtype != out.dtype:
        return False  # the sum accumulates in another precision than an add would
    terms = v.owner.inputs
    if len(terms) < 2:
        return False  # a sum of one number (or none) is left to the other rules
    new = fit(out, tm.add(*terms))
    return [new] if new is not None else False


@canonicalize(_FAST)
@local_optimizer([tm.add])
def local_add_of_zeros(fgraph, node):
    """A sum of zeros is the one of them that has the result's shape (what a sum of
    increments into zeros leaves, once the increments moved out of it).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> zeros = tt.zeros_like(x)
    >>> local_add_of_zeros.transform(None, tt.add(zeros, tt.constant([0.0])).owner) == [zeros]
    True
    """
    # add(fill(x, 0), 0, ...) -> fill(x, 0)
    if not isinstance(scalar_op(node), ts.Add):
        return False
    out = node.outputs[0]
    if any(const_value(i) != 0 for i in node.inputs):
        return False
    for i in node.inputs:
        if i.type == out.type:
            return [i]
    return False
