"""Rewrites of comparisons, logic and switches whose answer the graph already tells.

Theano's names (``theano.tensor.opt``):

- ``local_useless_elemwise_comparison``: ``x < x`` is false, ``x <= x`` true, a length is
  never negative (``x.shape[0] >= 0`` is true, ``maximum(x.shape[0], 0)`` is the length);
- not ``x <= x`` or ``x != x`` of a float, which Theano's FAST_RUN makes true and false:
  ``x != x`` is how one asks whether ``x`` is NaN, and there the rewrite is wrong;
- ``local_useless_and_or``: ``and(x, 0)`` is 0, ``or(x, 0)`` is ``x`` (and ``and(b, True)``
  is ``b``, ``or(b, True)`` true for a boolean ``b``);
- ``local_merge_switch_same_cond``: ``op(switch(c, a, b), switch(c, x, y))`` ->
  ``switch(c, op(a, x), op(b, y))``: one switch;
- ``local_mul_switch_sink``, ``local_div_switch_sink``: ``switch(c, 0, x) * y`` ->
  ``switch(c, 0, x * y)``: an inf or nan of the branch not taken stays out (gradients
  of ``switch``);
- ``local_elemwise_sub_zeros``: ``x - x`` -> zeros of ``x``'s shape (in specialize, for
  graphs that skip canonicalize's ``local_sub_self``).

All in canonicalize but the last.
"""

from __future__ import annotations

import math

from theano_dag import scalar as ts
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.algebra import NONFINITE_UNSAFE
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import const_value, fit, scalar_op, typed_constant
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import Join, cast, fill
from theano_dag.tensor.elemwise import Elemwise
from theano_dag.tensor.shape import MakeVector, Shape, Shape_i
from theano_dag.tensor.subtensor import Subtensor
from theano_dag.tensor.type import discrete_dtypes

__all__ = [
    "local_useless_elemwise_comparison",
    "local_useless_and_or",
    "local_merge_switch_same_cond",
    "local_elemwise_sub_zeros",
    "local_mul_switch_sink",
    "local_div_switch_sink",
]

canonicalize = RULES.canonicalize

_COMPARISONS = (ts.LT, ts.GT, ts.LE, ts.GE, ts.EQ, ts.NEQ)
_HANDLED = (*_COMPARISONS, ts.Maximum, ts.Minimum, ts.XOR)


def _is_length(var, depth=4) -> bool:
    """Whether ``var`` is known never to be negative: a length (``Shape_i``, ``Shape``,
    and vectors picked, joined or made of lengths), a cast of one, or a sum or product
    of such values and non-negative constants (as Theano, an int64 overflow is not
    considered)."""
    owner = var.owner
    if owner is None:
        v = const_value(var)
        return v is not None and v >= 0
    op = owner.op
    if isinstance(op, (Shape_i, Shape)):
        return True
    # vectors of lengths: picked from (x.shape[1:]), joined, or made of lengths
    if depth and isinstance(op, Subtensor):
        return _is_length(owner.inputs[0], depth - 1)
    if depth and isinstance(op, (Join, MakeVector)):
        parts = owner.inputs[1:] if isinstance(op, Join) else owner.inputs
        return all(_is_length(i, depth - 1) for i in parts)
    sop = scalar_op(owner)
    if depth and isinstance(sop, (ts.Cast, ts.Add, ts.Mul)):
        if isinstance(sop, ts.Cast) and var.dtype not in ("int64", "float32", "float64"):
            return False  # a narrower int could wrap a long length to a negative
        return all(_is_length(i, depth - 1) for i in owner.inputs)
    return False


# length OP c for a constant c: the answer when c == 0 and when c < 0 (None: unknown).
_LENGTH_VS_ZERO = {ts.LT: False, ts.GE: True}
_LENGTH_VS_NEGATIVE = {
    ts.LT: False,
    ts.LE: False,
    ts.EQ: False,
    ts.GT: True,
    ts.GE: True,
    ts.NEQ: True,
}
# c OP length is length OP' c:
_FLIPPED = {ts.LT: ts.GT, ts.GT: ts.LT, ts.LE: ts.GE, ts.GE: ts.LE, ts.EQ: ts.EQ, ts.NEQ: ts.NEQ}


def _length_answer(cls, c):
    """The value of ``length OP c`` (``OP`` the scalar op class ``cls``) for every
    length, else None."""
    if c == 0:
        return _LENGTH_VS_ZERO.get(cls)
    if c < 0:
        return _LENGTH_VS_NEGATIVE.get(cls)
    return None


def _constant_like(node, value):
    out = node.outputs[0]
    return fit(out, typed_constant(value, out.dtype), node.inputs)


@canonicalize()
@local_optimizer([tm.lt, tm.gt, tm.le, tm.ge, tm.eq, tm.neq, tm.maximum, tm.minimum, tm.xor])
def local_useless_elemwise_comparison(fgraph, node):
    """Comparisons of a value with itself, and of a length with 0, are constants;
    ``maximum(length, 0)`` is the length and ``minimum(length, 0)`` is 0.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> local_useless_elemwise_comparison.transform(None, tt.lt(x, x).owner)[0].eval({x: [1.0]})
    array([False])
    """
    # x < x -> False ; x <= x -> True (x not float) ; shape_i(x) >= 0 -> True
    # maximum(shape_i(x), 0) -> shape_i(x) ; minimum(shape_i(x), 0) -> 0
    sop = scalar_op(node)
    if len(node.inputs) != 2 or not isinstance(
        sop, (*_COMPARISONS, ts.Maximum, ts.Minimum, ts.XOR)
    ):
        return False
    a, b = node.inputs
    if a is b and isinstance(sop, _COMPARISONS):
        if isinstance(sop, (ts.LT, ts.GT)):
            new = _constant_like(node, False)
        elif a.dtype in discrete_dtypes:  # a float may be nan, unequal to itself
            new = _constant_like(node, not isinstance(sop, ts.NEQ))
        else:
            return False
        return [new] if new is not None else False
    if isinstance(sop, ts.XOR):  # xor(length, c) is no constant for any c
        return [_constant_like(node, 0)] if a is b and a.dtype in discrete_dtypes else False
    if a is b and isinstance(sop, (ts.Maximum, ts.Minimum)):
        return [fit(node.outputs[0], a, node.inputs)]  # NaN too: max(nan, nan) is nan
    # A length (never negative) against a constant that is not positive.
    ca, cb = const_value(a), const_value(b)
    if cb is not None and _is_length(a):
        length, c, flip = a, cb, False
    elif ca is not None and _is_length(b):
        length, c, flip = b, ca, True
    else:
        return False
    if c > 0:
        return False
    if c == 0 and math.copysign(1.0, c) < 0 and isinstance(sop, ts.Maximum):
        # At a tie maximum and minimum give their second argument: at a length of 0,
        # maximum(length, -0.0) is -0.0 (not the length) and minimum(-0.0, length) 0.0.
        if flip is isinstance(sop, ts.Minimum):
            return False
    if isinstance(sop, ts.Minimum):  # before Maximum: Minimum may subclass it
        new = _constant_like(node, c)
    elif isinstance(sop, ts.Maximum):
        new = fit(node.outputs[0], length, node.inputs)
    else:
        answer = _length_answer(_FLIPPED[type(sop)] if flip else type(sop), c)
        if answer is None:
            return False
        new = _constant_like(node, answer)
    return [new] if new is not None else False


@canonicalize()
@local_optimizer([tm.and_, tm.or_])
def local_useless_and_or(fgraph, node):
    """``and``/``or`` with a constant operand: ``and(x, 0)`` is 0 and ``or(x, 0)`` is
    ``x``; for a boolean ``x``, ``and(x, True)`` is ``x`` and ``or(x, True)`` is True
    (for integers these are bitwise: ``and(5, 1)`` is 1, not 5).

    >>> import theano_dag.tensor as tt
    >>> b = tt.bscalar("b")
    >>> local_useless_and_or.transform(None, tt.or_(b, 0).owner)
    [b]
    """
    # and(x, 0) -> 0 ; or(x, 0) -> x ; and(b, True) -> b ; or(b, True) -> True
    sop = scalar_op(node)
    if not isinstance(sop, (ts.AND, ts.OR)) or len(node.inputs) != 2:
        return False
    out = node.outputs[0]
    for x, c in (node.inputs, node.inputs[::-1]):
        v = const_value(c)
        if v is None:
            continue
        is_and = isinstance(sop, ts.AND)
        if v == 0:
            new = _constant_like(node, 0) if is_and else fit(out, x, [c])
        elif out.dtype == "bool" and x.dtype == "bool" and bool(v):
            new = fit(out, x, [c]) if is_and else _constant_like(node, True)
        else:
            continue
        return [new] if new is not None else False
    return False


def _switch_parts(var):
    """``(cond, ift, iff)`` when ``var`` is a switch, each branch cast to ``var``'s dtype
    (an op moved into a branch must compute in the dtype it computed in on the switch:
    ``switch(c, i, d) * ...`` with ``i`` int64 and ``d`` float64 multiplies float64s),
    else None."""
    owner = var.owner
    if owner is not None and isinstance(scalar_op(owner), ts.Switch):
        cond, ift, iff = owner.inputs
        return cond, cast(ift, var.dtype), cast(iff, var.dtype)
    return None


@canonicalize()
@local_optimizer([Elemwise], needs=[ts.Switch])
def local_merge_switch_same_cond(fgraph, node):
    """An elementwise op of switches on one condition is one switch of the op applied
    to each branch.

    >>> import theano_dag.tensor as tt
    >>> c, a, b, x, y = tt.dmatrices("cabxy")
    >>> new = local_merge_switch_same_cond.transform(
    ...     None, (tt.switch(c, a, b) + tt.switch(c, x, y)).owner)[0]
    >>> new.owner.op
    Elemwise{switch,no_inplace}
    """
    # op(switch(c, a, b), switch(c, x, y)) -> switch(c, op(a, x), op(b, y))
    first = node.inputs[0].owner
    if first is None or type(first.op) is not Elemwise or type(first.op.scalar_op) is not ts.Switch:
        return False  # most nodes stop here: this rule sees every elementwise node
    sop = scalar_op(node)
    if sop is None or isinstance(sop, ts.Switch) or len(node.inputs) < 2 or len(node.outputs) != 1:
        return False
    parts = [_switch_parts(i) for i in node.inputs]
    if any(p is None for p in parts):
        return False
    cond = parts[0][0]
    if any(p[0] is not cond for p in parts):
        return False
    new = tm.switch(cond, node.op(*[p[1] for p in parts]), node.op(*[p[2] for p in parts]))
    new = fit(node.outputs[0], new)
    return [new] if new is not None else False


@RULES.specialize(NONFINITE_UNSAFE)  # inf - inf is nan, not 0
@local_optimizer([tm.sub])
def local_elemwise_sub_zeros(fgraph, node):
    """``x - x`` is zeros of ``x``'s shape (``fill(x, 0)``).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> local_elemwise_sub_zeros.transform(None, (x - x).owner)[0].owner.op
    Elemwise{second,no_inplace}
    """
    # x - x -> fill(x, 0)
    if not isinstance(scalar_op(node), ts.Sub):
        return False
    a, b = node.inputs
    if a is not b:
        return False
    out = node.outputs[0]
    new = fit(out, fill(a, typed_constant(0, out.dtype)))
    return [new] if new is not None else False


def _is_zero(var) -> bool:
    v = const_value(var)
    return v is not None and v == 0


def _zero_branch(var):
    """``(cond, zero_is_first, zero, other)`` when ``var`` is a switch one of whose
    branches is known to be 0 everywhere, else None."""
    parts = _switch_parts(var)
    if parts is None:
        return None
    c, a, b = parts
    if _is_zero(a):
        return c, True, a, b
    if _is_zero(b):
        return c, False, b, a
    return None


def _sunk(node, k, factor):
    """``node``'s output with input ``k`` (a switch with a zero branch) sunk:
    ``switch(c, zero, factor(other branch))``."""
    c, zero_first, zero, other = _zero_branch(node.inputs[k])
    rest = factor(other)
    new = tm.switch(c, zero, rest) if zero_first else tm.switch(c, rest, zero)
    return fit(node.outputs[0], new, node.inputs)


@canonicalize(NONFINITE_UNSAFE)  # the branch not taken may be inf or nan: 0 * nan is now 0
@local_optimizer([tm.mul], needs=[ts.Switch])
def local_mul_switch_sink(fgraph, node):
    """A product with a switch one branch of which is 0 is the switch of 0 and the
    product with the other branch: where the switch is 0 the other factors are not
    multiplied in, so that an inf or nan there (the gradient of the branch not taken,
    ``sqrt`` below 0...) does not make the product nan (as Theano's).

    >>> import theano_dag.tensor as tt
    >>> c, x, z = tt.dvector("c"), tt.dvector("x"), tt.dvector("z")
    >>> new = local_mul_switch_sink.transform(None, (tt.switch(c, 0.0, x) * z).owner)[0]
    >>> new.owner.op
    Elemwise{switch,no_inplace}
    """
    # switch(c, 0, x) * z -> switch(c, 0, x * z)
    if not isinstance(scalar_op(node), ts.Mul):
        return False
    for k, i in enumerate(node.inputs):
        if _zero_branch(i) is not None:
            others = node.inputs[:k] + node.inputs[k + 1 :]
            new = _sunk(node, k, lambda b, others=others: tm.mul(*others, b))
            if new is not None:
                return [new]
    return False


@canonicalize(NONFINITE_UNSAFE)  # as local_mul_switch_sink: 0 / 0 is now 0
@local_optimizer([tm.true_div, tm.int_div], needs=[ts.Switch])
def local_div_switch_sink(fgraph, node):
    """A quotient whose numerator is a switch with a 0 branch is the switch of 0 and the
    quotient of the other branch (as Theano's).

    >>> import theano_dag.tensor as tt
    >>> c, x, z = tt.dvector("c"), tt.dvector("x"), tt.dvector("z")
    >>> new = local_div_switch_sink.transform(None, (tt.switch(c, 0.0, x) / z).owner)[0]
    >>> new.owner.op
    Elemwise{switch,no_inplace}
    """
    # switch(c, 0, x) / z -> switch(c, 0, x / z)
    if not isinstance(scalar_op(node), (ts.TrueDiv, ts.IntDiv)):
        return False
    if _zero_branch(node.inputs[0]) is None:
        return False
    new = _sunk(node, 0, lambda b: node.op(b, node.inputs[1]))
    return [new] if new is not None else False
