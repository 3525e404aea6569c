"""``theano.tensor.nnet.sigm``: the sigmoid family, its approximations, and the
multiplication trees that the sigmoid rewrites reason about.

``ultra_fast_sigmoid`` (an elementwise op) and ``hard_sigmoid`` (a clipped line) trade
accuracy for speed; the rewrites ``local_ultra_fast_sigmoid`` and ``local_hard_sigmoid``
(in ``theano_dag.opt.rewrites.sigmoid``) put them in place of ``sigmoid`` when a mode
asks for them by name. A *multiplication tree* (``parse_mul_tree``) is a product seen as
``[negated, leaf]`` or ``[negated, [subtrees]]``.

>>> import numpy as np
>>> import theano_dag.tensor as tt
>>> x = tt.dvector("x")
>>> float(softplus(x).eval({x: np.array([0.0])})[0]) == float(np.log(2.0))
True
>>> hard_sigmoid(x).eval({x: np.array([-5.0, 0.0, 1.0])})
array([0. , 0.5, 0.7])
"""

from __future__ import annotations

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import Constant
from theano_dag.scalar.math import FloatUnaryOp, Softplus
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.inplace import sigmoid_inplace
from theano_dag.tensor.math import sigmoid, softplus

__all__ = [
    "sigmoid",
    "sigmoid_inplace",
    "softplus",
    "ScalarSoftplus",
    "ultra_fast_sigmoid",
    "ultra_fast_sigmoid_inplace",
    "hard_sigmoid",
    "is_1pexp",
    "is_exp",
    "is_neg",
    "parse_mul_tree",
    "simplify_mul",
    "compute_mul",
    "perform_sigm_times_exp",
    "register_local_1msigmoid",
]

# Theano's name for the scalar softplus op's class.
ScalarSoftplus = Softplus

# Theano keeps its ``1 - sigmoid(x) -> sigmoid(-x)`` canonicalization off; ours
# (``local_1msigmoid``, a stabilize rewrite) is always on, and this flag says that
# Theano's canonicalize-time variant is not registered.
register_local_1msigmoid = False


def _ultra_fast(x):
    # sigmoid(x) = (1 + tanh(x / 2)) / 2, with tanh(u) replaced by its [3/2] Pade
    # approximant u (27 + u^2) / (27 + 9 u^2), exact at 0 and reaching 1 at |u| = 3
    # (held there): at most 0.012 away from the sigmoid. (1 + that) / 2 is computed as
    # (u + 3)^3 / (2 (27 + 9 u^2)), which does not cancel where the value is near 0. u
    # is clipped first, since u * u overflows (inf / inf) for |u| > 1.3e154 in float64
    # and 9.2e18 in float32; the clips keep a NaN, as the sigmoid does.
    u = np.clip(np.asarray(x) * 0.5, -3, 3)
    v = u + 3
    return np.minimum(0.5 * (v * v * v) / (27 + 9 * (u * u)), 1)


def _clamp_c(expr, lo, hi):
    """``expr`` clamped to ``[lo, hi]`` in C (None: no bound), a NaN kept (``fmin`` and
    ``fmax`` would give a bound for a NaN)."""
    out = f"({expr})"
    if hi is not None:
        out = f"({out} > (%(t)s){hi} ? (%(t)s){hi} : {out})"
    if lo is not None:
        out = f"(({expr}) < (%(t)s){lo} ? (%(t)s){lo} : {out})"
    return out


# _ultra_fast in C: u = x / 2 clamped to [-3, 3], then (u + 3)^3 / (2 (27 + 9 u^2)).
_U_C = _clamp_c("(%(t)s)0.5 * %(x)s", -3, 3)
_UFS_C = _clamp_c(
    f"(%(t)s)0.5 * (({_U_C} + (%(t)s)3) * ({_U_C} + (%(t)s)3) * ({_U_C} + (%(t)s)3))"
    f" / ((%(t)s)27 + (%(t)s)9 * ({_U_C} * {_U_C}))",
    None,
    1,
)


class UltraFastSigmoid(FloatUnaryOp):
    """A rational approximation of the sigmoid (within 0.012), without ``exp``. Its
    gradient is the sigmoid's, ``out * (1 - out)`` (Theano's op had none)."""

    nfunc = staticmethod(_ultra_fast)
    c_expr = _UFS_C

    @staticmethod
    def deriv(x, out):
        return out * (1 - out)


ultra_fast_scalar_sigmoid = UltraFastSigmoid(ts.upgrade_to_float, name="ultra_fast_sigmoid")
ultra_fast_sigmoid = Elemwise(ultra_fast_scalar_sigmoid, name="ultra_fast_sigmoid")
ultra_fast_sigmoid_inplace = Elemwise(
    UltraFastSigmoid(ts.transfer_type(0), name="ultra_fast_sigmoid_inplace"), {0: 0}
)


def hard_sigmoid(x):
    """The sigmoid approximated by three lines: 0, ``0.2 * x + 0.5``, 1, in the float
    dtype of ``x`` (integers upgraded as for ``sigmoid``).

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.fvector("x")
    >>> y = hard_sigmoid(x)
    >>> y.dtype, y.eval({x: np.array([-1.0, 3.0], dtype="float32")})
    ('float32', array([0.3, 1. ], dtype=float32))
    """
    x = tb.as_tensor_variable(x)
    dtype = ts.upgrade_to_float(x.dtype)[0]
    slope = tb.constant(0.2, dtype=dtype)
    shift = tb.constant(0.5, dtype=dtype)
    return tm.clip(x * slope + shift, 0, 1)


# ---- multiplication trees -----------------------------------------------------------


def _is_minus_one(var) -> bool:
    return isinstance(var, Constant) and np.all(np.asarray(var.data) == -1)


def is_neg(var):
    """``x`` when ``var`` is ``-x`` (a negation, or a product with the constant -1 as one
    factor), else None.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> is_neg(-x) is x, is_neg(x)
    (True, None)
    """
    node = var.owner
    if node is None:
        return None
    if node.op == tm.neg:
        return node.inputs[0]
    if node.op == tm.mul and len(node.inputs) >= 2:
        for i, inp in enumerate(node.inputs):
            if _is_minus_one(inp):
                rest = node.inputs[:i] + node.inputs[i + 1 :]
                return rest[0] if len(rest) == 1 else tm.mul(*rest)
    return None


def is_exp(var):
    """``(negated, x)`` when ``var`` is ``exp(x)`` or ``-exp(x)``, else None.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> is_exp(-tt.exp(x)) == (True, x)
    True
    """
    negated = False
    inner = is_neg(var)
    if inner is not None:
        negated, var = True, inner
    if var.owner is not None and var.owner.op == tm.exp:
        return negated, var.owner.inputs[0]
    return None


def _scalar_constant(var):
    """The value of ``var`` when it is a constant holding one number (possibly
    broadcast), else None."""
    while var.owner is not None and isinstance(var.owner.op, DimShuffle):
        var = var.owner.inputs[0]
    if isinstance(var, Constant):
        data = np.asarray(var.data)
        if data.size and np.all(data == data.flat[0]):
            return data.flat[0]
    return None


def is_1pexp(t, only_process_constants=True):
    """``(False, x)`` when ``t`` is ``1 + exp(x)`` (the constant terms summing to 1),
    else None. ``only_process_constants`` is Theano's parameter; only constants count as
    the ``1`` here either way.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> is_1pexp(1 + tt.exp(x)) == (False, x), is_1pexp(2 + tt.exp(x))
    (True, None)
    """
    node = t.owner
    if node is None or node.op != tm.add:
        return None
    total, others = 0.0, []
    for inp in node.inputs:
        value = _scalar_constant(inp)
        if value is None:
            others.append(inp)
        else:
            total += value
    if len(others) == 1 and len(others) < len(node.inputs) and np.isclose(total, 1):
        rest = others[0]
        if rest.owner is not None and rest.owner.op == tm.exp:
            return False, rest.owner.inputs[0]
    return None


def parse_mul_tree(root):
    """The multiplication tree of ``root``: ``[negated, [subtrees]]`` for a product,
    ``[negated, var]`` for anything else; negations are folded into the flag.

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dvectors("x", "y")
    >>> parse_mul_tree(-(x * y)) == [True, [[False, x], [False, y]]]
    True
    """
    node = root.owner
    if node is not None and node.op == tm.mul:
        return [False, [parse_mul_tree(i) for i in node.inputs]]
    if node is not None and node.op == tm.neg:
        negated, inner = parse_mul_tree(node.inputs[0])
        return [not negated, inner]
    return [False, root]


def simplify_mul(tree):
    """``tree`` without its leaves ``[flag, None]`` (products by +-1, whose signs move
    to the parent) and without products of fewer than two factors.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> simplify_mul([False, [[True, None], [False, x]]]) == [True, x]
    True
    """
    negated, inputs = tree
    if not isinstance(inputs, list):
        return tree
    kept = []
    for sub in (simplify_mul(i) for i in inputs):
        if sub[1] is None:
            negated ^= sub[0]
        else:
            kept.append(sub)
    if not kept:
        return [negated, None]
    if len(kept) == 1:
        return [kept[0][0] ^ negated, kept[0][1]]
    return [negated, kept]


def compute_mul(tree):
    """The variable that multiplication tree ``tree`` computes (``parse_mul_tree``'s
    inverse); a ``None`` leaf is an error (call ``simplify_mul`` first).

    >>> import theano_dag.tensor as tt
    >>> x, y = tt.dvectors("x", "y")
    >>> compute_mul([True, [[False, x], [False, y]]]).owner.op == tm.neg
    True
    """
    negated, inputs = tree
    if inputs is None:
        raise AssertionError(
            "compute_mul: the tree has an empty leaf; simplify it first (simplify_mul)"
        )
    out = tm.mul(*[compute_mul(i) for i in inputs]) if isinstance(inputs, list) else inputs
    return -out if negated else out


def _pair(arg, seen, done, make, flip):
    """Pair a leaf with argument ``arg`` against an earlier leaf of ``seen``: the
    earlier leaf becomes ``make(arg)`` (its sign flipped by ``flip``) and moves to
    ``done``. True when a partner was found."""
    for i, (x, leaf) in enumerate(seen):
        if x == arg:
            leaf[0] ^= flip
            leaf[1] = make(arg)
            done.append(seen.pop(i))
            return True
    return False


def _sigmoid_of_neg(x):
    return sigmoid(-x)


def perform_sigm_times_exp(tree, _seen=None):
    """Cancel, in place, the pairs ``exp(x) * sigmoid(-x)`` (to ``sigmoid(x)``) and
    ``exp(-x) * sigmoid(x)`` (to ``sigmoid(-x)``) of multiplication tree ``tree``; the
    first leaf of a pair takes the result, the second becomes ``[sign, None]``
    (``simplify_mul`` removes it). True when something changed.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> t = parse_mul_tree(sigmoid(x) * tt.exp(-x))
    >>> perform_sigm_times_exp(t), simplify_mul(t)[1].owner.inputs[0].owner.op == tm.neg
    (True, True)
    """
    # Leaves seen so far, by kind: (argument, leaf) for exp(x), exp(-x), sigmoid(x),
    # sigmoid(-x).
    seen = _seen if _seen is not None else {"ex": [], "emx": [], "sx": [], "smx": []}
    negated, inputs = tree
    if not isinstance(inputs, list):
        return False
    changed = False
    for idx, sub in enumerate(inputs):
        if isinstance(sub[1], list):
            changed |= perform_sigm_times_exp(sub, seen)
            continue
        var = sub[1]
        if var is None:
            continue
        flip = sub[0]
        found = None
        exp_info = is_exp(var)
        if exp_info is not None:
            flip ^= exp_info[0]
            arg = exp_info[1]
            inner = is_neg(arg)
            if inner is None:
                found = _pair(arg, seen["smx"], seen["sx"], sigmoid, flip)
                key, keep = "ex", arg
            else:
                found = _pair(inner, seen["sx"], seen["smx"], _sigmoid_of_neg, flip)
                key, keep = "emx", inner
        elif var.owner is not None and var.owner.op == tm.sigmoid:
            arg = var.owner.inputs[0]
            inner = is_neg(arg)
            if inner is None:
                found = _pair(arg, seen["emx"], seen["smx"], _sigmoid_of_neg, flip)
                key, keep = "sx", arg
            else:
                found = _pair(inner, seen["ex"], seen["sx"], sigmoid, flip)
                key, keep = "smx", inner
        else:
            continue
        if found:
            inputs[idx] = [False, None]
            changed = True
        else:
            seen[key].append((keep, sub))
    return changed
