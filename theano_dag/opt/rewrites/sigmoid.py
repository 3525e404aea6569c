"""Sigmoid, softplus and binary cross-entropy in stable forms, forward and gradient.

``1 / (1 + exp(-x))`` overflows (``exp(-x)`` is inf for ``x < -709``), ``1 - sigmoid(x)``
rounds to 0 for ``x > 37``, ``log(sigmoid(x))`` is ``-inf`` for ``x < -745``. Their
gradients, built by ``grad`` from the formula as written, are worse: the gradient of
``log(sigmoid(x))`` is ``g / sigmoid(x) * sigmoid(x) * (1 - sigmoid(x))``, which is
``0 * inf`` = NaN as soon as ``sigmoid(x)`` underflows to 0 or rounds to 1.

The rewrites here recognise the sigmoid in its written forms (``1 / (1 + exp(-x))``,
``exp(x) / (1 + exp(x))``, ``1 - sigmoid(x)``, ``sigmoid(x) * exp(-x)``, also where
``1 + exp(x)`` is one factor among others of a product's denominator), take the
logarithms of sigmoids to softplus forms, and cancel a sigmoid that multiplies a sum
against the same sigmoid dividing the sum's terms (the ``s / s`` of a gradient):
``sigmoid(x)`` is never 0 nor 1 mathematically, only after rounding, so the cancelled
form is the exact limit of the written one.

Sigmoids are compared by what they compute: ``sigmoid(x)``, ``sigmoid(-(-x))`` and
``1 - sigmoid(-x)`` are all the sigmoid of ``+x`` (``sigmoid_key``).
"""

from __future__ import annotations

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.basic import Constant
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import (
    const_value,
    count_scalar_ops,
    fit,
    graph_holds,
    is_const,
    is_float,
    scalar_op,
    typed_constant,
)
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import cast
from theano_dag.tensor.nnet import nnet as nnet_ops
from theano_dag.tensor.nnet import sigm
from theano_dag.tensor.type import values_eq_approx

stabilize = RULES.stabilize

__all__ = [
    "sigmoid_key",
    "local_exp_over_1_plus_exp",
    "local_1msigmoid",
    "local_sigm_factor",
    "local_sigm_cancel",
    "local_log_sigmoid",
    "local_logit_sigmoid",
    "local_log_sigmoid_product",
    "local_sigmoid_logit",
    "local_exp_softplus",
    "local_bce_sigmoid",
    "local_bce_grad_sigmoid",
    "local_ultra_fast_sigmoid",
    "local_hard_sigmoid",
]


# ---- recognising the forms ----------------------------------------------------------


def _unneg(var):
    """``(base, negated)``: ``var`` with its negations stripped, and whether there was an
    odd number of them. Only a float's: the ``neg`` of an unsigned or boolean integer
    wraps around (``-uint8(1)`` is 255), it is no sign to move elsewhere."""
    negated = False
    while is_float(var) and isinstance(scalar_op(var.owner), ts.Neg):
        var = var.owner.inputs[0]
        negated = not negated
    return var, negated


def _signed(base, negated):
    """``-base`` when ``negated``: an integer base is cast first to the float its sigmoid
    computes in, so that ``1 - sigmoid(x)`` for a ``uint8`` ``x`` is ``sigmoid(-1.0 *
    x)``, not the sigmoid of the wrapped-around ``-x``."""
    if not negated:
        return base
    if not is_float(base):
        base = cast(base, ts.upgrade_to_float(base.dtype)[0])
    return tm.neg(base)


def _sigmoid(base, negated):
    return tm.sigmoid(_signed(base, negated))


def sigmoid_key(var):
    """``(x, negated)`` when ``var`` computes ``sigmoid(-x if negated else x)``, written
    ``sigmoid(±x)`` or ``1 - sigmoid(∓x)``; else None.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> sigmoid_key(1 - tt.sigmoid(-x)) == (x, False), sigmoid_key(x)
    (True, None)
    """
    node = var.owner
    sop = scalar_op(node)
    flip = False
    if isinstance(sop, ts.Sub):  # 1 - sigmoid(x)
        inner = node.inputs[1].owner
        if scalar_op(inner) != ts.sigmoid or not is_const(node.inputs[0], 1):
            return None
        node, sop, flip = inner, ts.sigmoid, True
    elif isinstance(sop, ts.Add) and len(node.inputs) == 2:  # 1 + -sigmoid(x)
        a, b = node.inputs
        for one, other in ((a, b), (b, a)):
            if isinstance(scalar_op(other.owner), ts.Neg):
                inner = other.owner.inputs[0].owner
                if scalar_op(inner) == ts.sigmoid and is_const(one, 1):
                    node, sop, flip = inner, ts.sigmoid, True
                    break
    if sop != ts.sigmoid:
        return None
    base, negated = _unneg(node.inputs[0])
    return base, negated ^ flip


# The scalar ops a sigmoid (``sigmoid_key``) or ``1 + exp(x)`` is computed by: a first
# look at a factor, which most factors the product rules meet fail.
_SIGMOID_ROOTS = (type(ts.sigmoid), ts.Sub, ts.Add)


def _is_sigmoid(var) -> bool:
    if not isinstance(scalar_op(var.owner), _SIGMOID_ROOTS):
        return False
    return sigmoid_key(var) is not None


def _maybe_sigmoid_or_1pexp(var) -> bool:
    """Whether ``var`` is a sigmoid (``sigmoid_key``) or ``1 + exp(x)``."""
    if not isinstance(scalar_op(var.owner), _SIGMOID_ROOTS):
        return False
    return sigmoid_key(var) is not None or _one_plus_exp_key(var) is not None


def _exp_key(var):
    """``(x, negated)`` when ``var`` is ``exp(±x)``."""
    node = var.owner
    if scalar_op(node) != ts.exp:
        return None
    return _unneg(node.inputs[0])


def _one_plus_exp_key(var):
    """``(x, negated)`` when ``var`` is ``1 + exp(±x)`` (in either order)."""
    node = var.owner
    if not isinstance(scalar_op(node), ts.Add) or len(node.inputs) != 2:
        return None
    a, b = node.inputs
    if is_const(a, 1):
        return _exp_key(b)
    if is_const(b, 1):
        return _exp_key(a)
    return None


def _same(k1, k2) -> bool:
    return k1 is not None and k2 is not None and k1[0] is k2[0] and k1[1] == k2[1]


def _flipped(k):
    return None if k is None else (k[0], not k[1])


def _small_int(var):
    """The integer ``var`` holds, when it is a constant integer in [-4, 4]."""
    c = const_value(var)
    if c is None:
        return None
    c = float(c)
    return int(c) if c.is_integer() and -4 <= c <= 4 else None


#: How many nested products ``_split`` looks through: a gradient's products sit a few
#: levels deep (``g / (1 / (1 + exp(-x)))``); a deeper walk would make the rules cost
#: more than the graph's size on a DAG of shared products.
_DEPTH = 4


def _descend(v, dtype):
    """How ``_split`` goes through ``v``: ``(inputs, which count up)`` or None (a leaf)."""
    node = v.owner
    sop = scalar_op(node)
    if sop is None:
        return None
    kind = _KINDS.get(type(sop))
    if kind is None:
        kind = _KINDS[type(sop)] = _kind(sop)
    if not kind or v.dtype != dtype:
        return None
    if kind == "product":
        return node.inputs, None
    if kind == "div":
        return node.inputs, (True, False)
    if sop == ts.reciprocal:
        return node.inputs, (False,)
    if sop == ts.sqr:
        return [node.inputs[0]] * 2, None
    if kind == "pow":
        k = _small_int(node.inputs[1])
        if k:
            return [node.inputs[0]] * abs(k), None if k > 0 else (False,) * abs(k)
    return None


# scalar op class -> what _split does with it ("" when a leaf): one isinstance per class
_KINDS: dict = {}


def _kind(sop):
    if isinstance(sop, (ts.Neg, ts.Mul)):
        return "product"
    if isinstance(sop, ts.TrueDiv):
        return "div"
    if isinstance(sop, ts.Pow):
        return "pow"
    if sop == ts.reciprocal or sop == ts.sqr:
        return "unary"
    return ""


def _any_factor(var, test) -> bool:
    """Whether a factor of ``var`` (as ``_split`` finds them) passes ``test``: the cheap
    first look of the product rules, which most products fail."""
    todo = [(var, 0)]
    while todo:
        v, depth = todo.pop()
        inner = _descend(v, var.dtype) if depth < _DEPTH else None
        if inner is not None:
            todo.extend((i, depth + 1) for i in inner[0])
        elif test(v):
            return True
    return False


def _split(var):
    """``(num, den, negated)``: ``var`` as ``±(n1 * n2 * ...) / (d1 * d2 * ...)`` through
    its ``mul``, ``true_div``, ``reciprocal``, ``neg``, ``sqr`` and small integer powers
    (the nodes of ``var``'s dtype, ``_DEPTH`` levels deep): the factors that
    ``1 + exp`` and sigmoids may be among, wherever a canonical product or a gradient
    put them."""
    num, den, negated = [], [], False
    todo = [(var, True, 0)]
    while todo:
        v, up, depth = todo.pop()
        inner = _descend(v, var.dtype) if depth < _DEPTH else None
        if inner is None:
            (num if up else den).append(v)
            continue
        inputs, ups = inner
        if isinstance(scalar_op(v.owner), ts.Neg):
            negated = not negated
        for k in reversed(range(len(inputs))):
            todo.append((inputs[k], up if ups is None or ups[k] else not up, depth + 1))
    return num, den, negated


def _product(factors, like):
    """The product of ``factors`` (constant ones left out), 1 when there is none."""
    factors = [f for f in factors if not is_const(f, 1)]
    if not factors:
        return typed_constant(1, like.dtype, like.ndim)  # fit spreads it to like's shape
    return factors[0] if len(factors) == 1 else tm.mul(*factors)


def _fraction(num, den, negated, like):
    new = _product(num, like)
    if any(not is_const(d, 1) for d in den):
        new = tm.true_div(new, _product(den, like))
    return tm.neg(new) if negated else new


class _Factor:
    """A factor of a product and what it is: ``1 + exp(±x)``, ``exp(±x)``, a sigmoid."""

    __slots__ = ("var", "one_plus_exp", "exp", "sigmoid")

    def __init__(self, var, sigmoid=None):
        self.var = var
        self.one_plus_exp = _one_plus_exp_key(var)
        self.exp = None if self.one_plus_exp else _exp_key(var)
        self.sigmoid = sigmoid or (None if self.one_plus_exp or self.exp else sigmoid_key(var))


def _take(factors, attr, key):
    """Remove and return the first factor of ``factors`` whose ``attr`` is ``key``."""
    for i, f in enumerate(factors):
        if _same(getattr(f, attr), key):
            return factors.pop(i)
    return None


def _new_sigmoid(key):
    return _Factor(_sigmoid(*key), sigmoid=key)


# ---- sigmoid recognised ---------------------------------------------------------------


@stabilize()
@local_optimizer(
    [tm.true_div, tm.mul, tm.reciprocal, tm.pow],
    requirements=(count_scalar_ops,),
    needs=[type(ts.exp), type(ts.sigmoid)],
)
def local_exp_over_1_plus_exp(fgraph, node):
    """Sigmoids in a product: each factor ``1 + exp(x)`` of the denominator as a
    sigmoid, with the matching ``exp`` of the numerator if there is one
    (``exp(x) / (1 + exp(x))`` is ``sigmoid(x)``, ``c / (1 + exp(x))`` is
    ``c * sigmoid(-x)``; the gradient of ``1 / (1 + exp(-x))``,
    ``g * exp(-x) / (1 + exp(-x))**2``, is ``g * sigmoid(-x) * sigmoid(x)``);
    ``exp(x) * sigmoid(-x)`` as ``sigmoid(x)``; and a sigmoid (or ``1 + exp``) found in
    both the numerator and the denominator cancelled, also where they are written
    differently (``sigmoid(x) / (1 - sigmoid(-x))``). Neither ``inf / inf`` nor
    ``0 / 0`` where ``exp`` overflows or the sigmoid rounds."""
    # exp(x) / (1 + exp(x)) -> sigmoid(x) ; c / (1 + exp(x)) -> c * sigmoid(-x)
    # a * exp(x) / ((1 + exp(x)) * (1 + exp(-y)) * b) -> a * sigmoid(x) * sigmoid(y) / b
    # reciprocal(1 + exp(x)) -> sigmoid(-x) ; (1 + exp(x)) ** -1 -> sigmoid(-x)
    # exp(x) * sigmoid(-x) -> sigmoid(x) ; exp(-x) * sigmoid(x) -> sigmoid(-x)
    # a * sigmoid(x) / (b * (1 - sigmoid(-x))) -> a / b
    if not graph_holds(fgraph, ts.exp, ts.sigmoid):
        return False
    out = node.outputs[0]
    if not is_float(out) or len(node.outputs) != 1:
        return False
    sop = scalar_op(node)
    if isinstance(sop, ts.Pow) and _small_int(node.inputs[1]) is None:
        return False
    if isinstance(sop, ts.Mul) and not graph_holds(fgraph, ts.sigmoid):
        # Without a sigmoid, only a 1 + exp(x) in a denominator matters, and the
        # true_div, reciprocal or power that puts it there is visited itself.
        return False
    if sop is None or not _any_factor(out, _maybe_sigmoid_or_1pexp):
        return False
    num, den, negated = _split(out)
    num = [_Factor(f) for f in num]
    den = [_Factor(f) for f in den]
    if not any(f.one_plus_exp or f.sigmoid for f in num + den):
        return False
    changed = False
    # 1 + exp(x) above and below
    for f in [f for f in den if f.one_plus_exp]:
        if _take(num, "one_plus_exp", f.one_plus_exp):
            den.remove(f)
            changed = True
    # 1 / (1 + exp(x)) = sigmoid(-x) ; exp(x) / (1 + exp(x)) = sigmoid(x)
    for f in [f for f in den if f.one_plus_exp]:
        den.remove(f)
        k = f.one_plus_exp
        num.append(_new_sigmoid(k if _take(num, "exp", k) else _flipped(k)))
        changed = True
    # (1 + exp(x)) * sigmoid(-x) = 1 ; exp(x) * sigmoid(-x) = sigmoid(x)
    for side in (num, den):
        for f in [f for f in side if f.one_plus_exp or f.exp]:
            k = f.one_plus_exp or f.exp
            if _take(side, "sigmoid", _flipped(k)):
                side.remove(f)
                if f.exp:
                    side.append(_new_sigmoid(k))
                changed = True
    # sigmoid(x) above and below
    for f in [f for f in den if f.sigmoid]:
        if _take(num, "sigmoid", f.sigmoid):
            den.remove(f)
            changed = True
    if not changed:
        return False
    new = _fraction([f.var for f in num], [f.var for f in den], negated, out)
    return fit(out, new, node.inputs)


@stabilize()
@local_optimizer([tm.sub, tm.add], requirements=(count_scalar_ops,), needs=[type(ts.sigmoid)])
def local_1msigmoid(fgraph, node):
    """``1 - sigmoid(x)`` as ``sigmoid(-x)``, which does not round to 0 for ``x > 37``
    (float64; ``x > 17`` in float32)."""
    # 1 - sigmoid(x) -> sigmoid(-x) ; 1 + -sigmoid(x) -> sigmoid(-x)
    if not graph_holds(fgraph, ts.sigmoid):
        return False
    if not isinstance(scalar_op(node), (ts.Sub, ts.Add)) or not is_float(node.outputs[0]):
        return False
    k = sigmoid_key(node.outputs[0])  # op checks first, constants last: cheap
    if k is None:
        return False
    return fit(node.outputs[0], _sigmoid(*k), node.inputs)


def _same_factors(a, b) -> bool:
    """Whether the lists of variables ``a`` and ``b`` hold the same ones (as multisets)."""
    if len(a) != len(b):
        return False
    rest = list(b)
    for v in a:
        for i, u in enumerate(rest):
            if _same_var(u, v):
                del rest[i]
                break
        else:
            return False
    return True


def _same_var(u, v) -> bool:
    """Whether ``u`` and ``v`` compute the same: the same variable, equal constants, or
    the same op of the same inputs (stabilize does not merge the sigmoids its rewrites
    make, and ``sigmoid(x)`` may be there twice)."""
    if u is v:
        return True
    if u.type != v.type:
        return False
    a, b = u.owner, v.owner
    if a is None or b is None:
        if a is None and b is None:
            cu, cv = const_value(u), const_value(v)
            return cu is not None and cv is not None and bool(cu == cv)
        return False
    if (
        a.op == b.op
        and u.index == v.index
        and len(a.inputs) == len(b.inputs)
        and all(i is j for i, j in zip(a.inputs, b.inputs))
    ):
        return True
    return _same(sigmoid_key(u), sigmoid_key(v))


@stabilize()
@local_optimizer([tm.add, tm.sub], requirements=(count_scalar_ops,), needs=[type(ts.sigmoid)])
def local_sigm_factor(fgraph, node):
    """``a - a * sigmoid(x)`` as ``a * sigmoid(-x)``: the difference of two products
    that differ by a sigmoid factor (the gradient of ``exp(x) / (1 + exp(x))`` is
    ``sigmoid(x) - sigmoid(x)**2``), which cancels to 0 where the sigmoid rounds to 1."""
    # a - a * sigmoid(x) -> a * sigmoid(-x) ; -a + a * sigmoid(x) -> -(a * sigmoid(-x))
    if not graph_holds(fgraph, ts.sigmoid):
        return False
    out = node.outputs[0]
    sop = scalar_op(node)
    if not isinstance(sop, (ts.Add, ts.Sub)) or len(node.inputs) != 2 or not is_float(out):
        return False
    p, q = node.inputs
    if p.dtype != out.dtype or q.dtype != out.dtype:
        return False
    # Quick exit: one of the two terms must be a product.
    if not any(isinstance(scalar_op(v.owner), _PRODUCT_OPS) for v in (p, q)):
        return False
    if not (_any_factor(p, _is_sigmoid) or _any_factor(q, _is_sigmoid)):
        return False
    terms = [_split(p), _split(q)]
    if isinstance(sop, ts.Sub):
        terms[1] = (*terms[1][:2], not terms[1][2])
    (n1, d1, neg1), (n2, d2, neg2) = terms
    if len(n1) > len(n2):  # the product with the sigmoid second
        (n1, d1, neg1), (n2, d2, neg2) = (n2, d2, neg2), (n1, d1, neg1)
    if len(n2) != len(n1) + 1 or len(d1) != len(d2):
        return False
    c1, n1v, d1v = _constants_apart(n1, d1, neg1)
    c2, n2v, d2v = _constants_apart(n2, d2, neg2)
    if c1 is None or c2 is None or not _same_factors(d1v, d2v):
        return False
    with np.errstate(all="ignore"):
        opposite = c1.shape == c2.shape and bool(np.all(c1 == -c2)) and bool(np.all(c1 != 0))
    if not opposite:
        return False
    for i, f in enumerate(n2v):
        k = sigmoid_key(f)
        if k is not None and _same_factors(n1v, n2v[:i] + n2v[i + 1 :]):
            new = _fraction([*n1, _sigmoid(*_flipped(k))], d1, neg1, out)
            return fit(out, new, node.inputs)
    return False


_PRODUCT_OPS = (ts.Mul, ts.TrueDiv, ts.Neg)


def _constants_apart(num, den, negated):
    """``(coef, num, den)``: the constant factors of ``±num / den`` multiplied into one
    array (None if one is not a plain constant array), the other factors apart."""
    coef = np.array(-1.0 if negated else 1.0)
    rest_num, rest_den = [], []
    with np.errstate(all="ignore"):
        for factors, up, rest in ((num, True, rest_num), (den, False, rest_den)):
            for f in factors:
                if not isinstance(f, Constant):
                    rest.append(f)
                    continue
                data = np.asarray(f.data, dtype="float64")
                try:
                    coef = coef * data if up else coef / data
                except ValueError:
                    return None, None, None
    return coef, rest_num, rest_den


@stabilize()
@local_optimizer([tm.mul, tm.true_div], requirements=(count_scalar_ops,), needs=[type(ts.sigmoid)])
def local_sigm_cancel(fgraph, node):
    """A product of sigmoids (or exps) and of a sum whose terms divide by those sigmoids
    (or hold the sigmoid an exp cancels), or a sum divided by sigmoids its terms hold,
    distributed over the sum so that they cancel:
    the gradient of a cross-entropy of a sigmoid, ``s * (1 - s) * (a / s - b / (1 - s))``,
    is then ``a * (1 - s) - b * s``, not ``0 * inf`` where ``s`` rounds to 0 or 1; the
    second derivative of ``log1p(exp(x))``, ``exp(x) * (sigmoid(x) - 1) * sigmoid(-x)``,
    is ``(sigmoid(x) - 1) * sigmoid(x)``, not ``inf * 0`` where ``exp(x)`` overflows.
    (``1 + exp(x)`` in a term's numerator divides it by ``sigmoid(-x)``; a term that is a
    fill of 0, which the gradient leaves, is dropped rather than multiplied by an inf.)"""
    # sigmoid(x) * sigmoid(-x) * (a / sigmoid(x) + b / sigmoid(-x))
    #   -> a * sigmoid(-x) + b * sigmoid(x)
    # sigmoid(x) * (a / sigmoid(x) + b) -> a + b * sigmoid(x)
    # exp(x) * (a * sigmoid(-x) + b * sigmoid(-x) + zeros) -> a * sigmoid(x) + b * sigmoid(x)
    # (a * sigmoid(x) + b * sigmoid(x)) / sigmoid(x) -> a + b
    if not graph_holds(fgraph, ts.sigmoid):
        return False
    out = node.outputs[0]
    if not isinstance(scalar_op(node), (ts.Mul, ts.TrueDiv)) or not is_float(out):
        return False
    # Cheap tests first: a sum among the factors (most products have none).
    if not _any_factor(out, _is_sum) or not _any_factor(out, _is_sigmoid_or_exp):
        return False
    num, den, negated = _split(out)
    keys = [(sigmoid_key(f), _exp_key(f)) for f in num]
    den_keys = [sigmoid_key(f) for f in den]
    if not any(k or e for k, e in keys) and not any(den_keys):
        return False
    # the sigmoids of the denominator go into each term, to cancel those of its numerator
    below = [(f, k, None) for f, k in zip(den, den_keys) if k is not None]
    den = [f for f, k in zip(den, den_keys) if k is None]
    for a, add in enumerate(num):
        sum_op = scalar_op(add.owner)
        if not isinstance(sum_op, _SUM_OPS) or add.dtype != out.dtype:
            continue
        others = [(f, k, e) for i, (f, (k, e)) in enumerate(zip(num, keys)) if i != a]
        terms, n_cancelled = [], 0
        for t, t_sign in _signed_terms(add, out.dtype):
            t_num, t_den, t_neg = _split(t)
            if any(_is_zero_fill(f) for f in t_num):
                continue
            t_neg ^= t_sign
            pool = list(others)
            keep_den = []
            for d in t_den:
                j = _find(pool, sigmoid_key(d))
                if j is None:
                    keep_den.append(d)
                else:
                    del pool[j]
                    n_cancelled += 1
            keep_num, pool_below = [], list(below)
            for m in t_num:
                j = _find(pool_below, sigmoid_key(m))
                if j is not None:
                    del pool_below[j]
                    n_cancelled += 1
                    continue
                j = _find(pool, _flipped(_one_plus_exp_key(m)))  # 1 + exp(x) = 1 / sigmoid(-x)
                if j is not None:
                    del pool[j]
                    n_cancelled += 1
                    continue
                k = sigmoid_key(m)
                j = _find(pool, _flipped(k), slot=2)  # exp(x) * sigmoid(-x) = sigmoid(x)
                if j is None:
                    keep_num.append(m)
                else:
                    del pool[j]
                    keep_num.append(_sigmoid(*_flipped(k)))
                    n_cancelled += 1
            keep_den += [f for f, _, _ in pool_below]
            terms.append(_fraction(keep_num + [f for f, _, _ in pool], keep_den, t_neg, out))
        if n_cancelled:
            new = _fraction([tm.add(*terms)], den, negated, out)
            return fit(out, new, num + den + list(add.owner.inputs))
    return False


def _signed_terms(var, dtype, negated=False, depth=0):
    """``(term, negated)`` for the terms of the sum ``var``, through the sums and
    negations of its terms (of ``dtype``, ``_DEPTH`` levels deep): a gradient nests them."""
    owner = var.owner
    sop = scalar_op(owner)
    if depth < _DEPTH and var.dtype == dtype and isinstance(sop, (*_SUM_OPS, ts.Neg)):
        for i, t in enumerate(owner.inputs):
            flip = isinstance(sop, ts.Neg) or (i == 1 and isinstance(sop, ts.Sub))
            yield from _signed_terms(t, dtype, negated ^ flip, depth + 1)
        return
    yield var, negated


def _is_sum(var) -> bool:
    return isinstance(scalar_op(var.owner), _SUM_OPS)


def _is_sigmoid_or_exp(var) -> bool:
    return _is_sigmoid(var) or _exp_key(var) is not None


def _is_zero_fill(var) -> bool:
    """Whether ``var`` is the constant 0 or a fill of it (``zeros_like``)."""
    if is_const(var, 0):
        return True
    owner = var.owner
    return isinstance(scalar_op(owner), ts.Second) and is_const(owner.inputs[1], 0)


_SUM_OPS = (ts.Add, ts.Sub)


def _find(pool, key, slot=1):
    """The index of the first entry ``(factor, sigmoid key, exp key)`` of ``pool`` whose
    key in ``slot`` is ``key``."""
    if key is None:
        return None
    for j, entry in enumerate(pool):
        if _same(entry[slot], key):
            return j
    return None


# ---- logarithms of sigmoids -------------------------------------------------------------


# Registered before log1p (stabilize.py), which would turn log(1 - sigmoid(x)) into
# log1p(-sigmoid(x)) (also rewritten here, but one step later).
@stabilize()
@local_optimizer([tm.log, tm.log1p])
def local_log_sigmoid(fgraph, node):
    """``log(sigmoid(x))`` as ``-softplus(-x)``, finite for every finite ``x``; also
    ``log(1 - sigmoid(x))`` and ``log1p(-sigmoid(x))`` as ``-softplus(x)``."""
    # log(sigmoid(x)) -> -softplus(-x) ; log(1 - sigmoid(x)) -> -softplus(x)
    # log1p(-sigmoid(x)) -> -softplus(x)
    (arg,) = node.inputs
    sop = scalar_op(node)
    if sop == ts.log:
        k = sigmoid_key(arg)
    elif sop == ts.log1p and isinstance(scalar_op(arg.owner), ts.Neg):
        k = sigmoid_key(arg.owner.inputs[0])
        k = None if k is None else (k[0], not k[1])  # 1 - sigmoid(x) = sigmoid(-x)
    else:
        return False
    if k is None or not is_float(k[0]):
        return False
    return fit(node.outputs[0], _log_sigmoid(k), arg.owner.inputs)


def _log_sigmoid(k):
    """``log(sigmoid(±x))`` as ``-softplus(∓x)`` for the ``sigmoid_key`` ``k``."""
    base, negated = k
    return tm.neg(tm.softplus(_signed(base, not negated)))


@stabilize()
@local_optimizer([tm.log])
def local_logit_sigmoid(fgraph, node):
    """``log(sigmoid(x) / (1 - sigmoid(x)))`` (the logit of a sigmoid) as ``x``: the
    written form is ``log(1 / 0)`` = inf for ``x > 37``."""
    # log(sigmoid(x) / (1 - sigmoid(x))) -> x
    if scalar_op(node) != ts.log:
        return False
    div = node.inputs[0].owner
    if not isinstance(scalar_op(div), ts.TrueDiv):
        return False
    k_num, k_den = sigmoid_key(div.inputs[0]), sigmoid_key(div.inputs[1])
    if k_num is None or k_den is None or k_num[0] is not k_den[0] or k_num[1] == k_den[1]:
        return False
    return fit(node.outputs[0], _signed(*k_num), div.inputs)


def _stable_log_of_factor(var):
    """``log(var)`` without its overflow, where ``var`` is a sigmoid (``-softplus(-x)``),
    an ``exp`` (its float argument) or a positive constant; else None."""
    k = sigmoid_key(var)
    if k is not None and is_float(k[0]):
        return _log_sigmoid(k)
    if scalar_op(var.owner) == ts.exp and is_float(var.owner.inputs[0]):
        return var.owner.inputs[0]
    c = const_value(var)
    if c is not None and np.asarray(c).dtype.kind in "iuf" and np.all(np.asarray(c) > 0):
        return tm.log(var)
    return None


@stabilize()
@local_optimizer([tm.log])
def local_log_sigmoid_product(fgraph, node):
    """``log(sigmoid(x) * sigmoid(-x))`` as ``-softplus(-x) - softplus(x)``: the log of a
    product of sigmoids, exps and positive constants (one sigmoid at least) as the sum
    of their logs, each without overflow. The written product is 0 for ``|x| > 745``
    (``log`` of it -inf, where the value is ``-|x|``). Only factors that are never
    negative: ``log(a * b)`` of two negatives is not ``log(a) + log(b)``."""
    # log(sigmoid(x) * sigmoid(y)) -> -softplus(-x) - softplus(-y) ; also with exp(z): + z
    if scalar_op(node) != ts.log or not is_float(node.outputs[0]):
        return False
    prod = node.inputs[0]
    if not isinstance(scalar_op(prod.owner), ts.Mul):
        return False
    if not _any_factor(prod, lambda v: sigmoid_key(v) is not None):
        return False
    factors, den, negated = _split(prod)  # (through nested products: a gradient's)
    if den or negated:
        return False
    terms = [_stable_log_of_factor(f) for f in factors]
    if any(t is None for t in terms):
        return False
    od = node.outputs[0].dtype
    total = None
    for t in terms:
        t = t if t.dtype == od else cast(t, od)
        total = t if total is None else total + t
    return fit(node.outputs[0], total, factors)


@stabilize()
@local_optimizer([tm.sigmoid])
def local_sigmoid_logit(fgraph, node):
    """``sigmoid(log(p / (1 - p)))`` (the sigmoid of a logit) as ``p``, exactly."""
    # sigmoid(log(p / (1 - p))) -> p
    if scalar_op(node) != ts.sigmoid:
        return False
    log = node.inputs[0].owner
    if scalar_op(log) != ts.log:
        return False
    div = log.inputs[0].owner
    if not isinstance(scalar_op(div), ts.TrueDiv):
        return False
    p, q = div.inputs
    sub = q.owner
    if not isinstance(scalar_op(sub), ts.Sub) or sub.inputs[1] is not p:
        return False
    if not is_const(sub.inputs[0], 1) or not is_float(p):
        return False
    return fit(node.outputs[0], p, div.inputs)


# ---- cross-entropies of sigmoids -------------------------------------------------------


@stabilize()
@local_optimizer([nnet_ops._bce])
def local_bce_sigmoid(fgraph, node):
    """``binary_crossentropy(sigmoid(z), t)`` as ``sigmoid_binary_crossentropy(z, t)``:
    finite for every finite ``z`` where ``log(sigmoid(z))`` is ``-inf`` from
    ``z = -745``."""
    # binary_crossentropy(sigmoid(z), t) -> sigmoid_binary_crossentropy(z, t)
    if scalar_op(node) != ts.binary_crossentropy:
        return False
    o, t = node.inputs
    k = sigmoid_key(o)
    if k is None or not is_float(k[0]):
        return False
    new = nnet_ops.sigmoid_binary_crossentropy(_signed(*k), t)
    return fit(node.outputs[0], new, node.inputs)


@stabilize()
@local_optimizer(
    [tm.mul, tm.true_div],
    requirements=(count_scalar_ops,),
    needs=[type(ts.binary_crossentropy_grad)],
)
def local_bce_grad_sigmoid(fgraph, node):
    """The gradient of ``binary_crossentropy(sigmoid(z), t)`` in ``z``, the derivative
    in ``o`` times the sigmoid's, ``binary_crossentropy_grad(s, t) * s * (1 - s)``, as
    ``sigmoid(z) - t``: not ``inf * 0`` where ``s`` rounds to 0 or 1."""
    # binary_crossentropy_grad(sigmoid(z), t) * sigmoid(z) * sigmoid(-z)
    #   -> switch(z > 0, 1 - t - sigmoid(-z), sigmoid(z) - t)
    out = node.outputs[0]
    if not isinstance(scalar_op(node), (ts.Mul, ts.TrueDiv)) or not is_float(out):
        return False
    if not _any_factor(out, lambda v: scalar_op(v.owner) == ts.binary_crossentropy_grad):
        return False
    num, den, negated = _split(out)
    for i, f in enumerate(num):
        if scalar_op(f.owner) != ts.binary_crossentropy_grad:
            continue
        o, t = f.owner.inputs
        k = sigmoid_key(o)
        if k is None or not is_float(k[0]):
            continue
        rest = [(g, sigmoid_key(g)) for j, g in enumerate(num) if j != i]
        a = _find(rest, k)
        if a is None:
            continue
        del rest[a]
        b = _find(rest, _flipped(k))
        if b is None:
            continue
        del rest[b]
        d_z = ts.SigmoidBinaryCrossentropy.d_logit(_signed(*k), t)
        new = _fraction([g for g, _ in rest] + [d_z], den, negated, out)
        return fit(out, new, node.inputs)
    return False


# ---- softplus inverted ------------------------------------------------------------------


@stabilize()
@local_optimizer([tm.exp, tm.expm1, tm.softplus])
def local_exp_softplus(fgraph, node):
    """Softplus undone: ``exp(softplus(x))`` as ``1 + exp(x)``, ``expm1(softplus(x))`` as
    ``exp(x)`` (without the rounding of ``softplus(x)``, magnified by ``exp``), and
    ``softplus(log(p))`` as ``log1p(p)`` (NaN for ``p < 0``, as ``log`` gives)."""
    # exp(softplus(x)) -> 1 + exp(x) ; expm1(softplus(x)) -> exp(x)
    # softplus(log(p)) -> switch(p >= 0, log1p(p), nan)
    out = node.outputs[0]
    sop = scalar_op(node)
    inner = node.inputs[0].owner
    isop = scalar_op(inner)
    if isop not in (ts.softplus, ts.log) or not is_float(out):
        return False
    (x,) = inner.inputs
    if not is_float(x):
        return False
    if isop == ts.softplus and sop == ts.exp:
        new = 1 + tm.exp(x)
    elif isop == ts.softplus and sop == ts.expm1:
        new = tm.exp(x)
    elif isop == ts.log and sop == ts.softplus:
        new = tm.switch(tm.ge(x, 0), tm.log1p(x), np.asarray(np.nan, dtype=out.dtype))
    else:
        return False
    return fit(out, new, inner.inputs)


# ---- approximations, when asked for ----------------------------------------------------


@RULES.uncanonicalize(opt_in=True)
@local_optimizer([tm.sigmoid])
def local_ultra_fast_sigmoid(fgraph, node):
    """``sigmoid(x)`` as ``ultra_fast_sigmoid(x)`` (within 0.012, no ``exp``); off unless
    a mode names it (``mode.including("local_ultra_fast_sigmoid")``), as in Theano."""
    # sigmoid(x) -> ultra_fast_sigmoid(x)
    if scalar_op(node) != ts.sigmoid:
        return False
    out = sigm.ultra_fast_sigmoid(node.inputs[0])
    # An approximation by choice: DebugMode compares it with the sigmoid within its error.
    out.tag.values_eq_approx = _within(0.02)
    return [out]


@RULES.uncanonicalize(opt_in=True)
@local_optimizer([tm.sigmoid])
def local_hard_sigmoid(fgraph, node):
    """``sigmoid(x)`` as ``hard_sigmoid(x)`` (``clip(0.2 * x + 0.5, 0, 1)``); off unless a
    mode names it, as in Theano."""
    # sigmoid(x) -> clip(0.2 * x + 0.5, 0, 1)
    if scalar_op(node) != ts.sigmoid:
        return False
    out = sigm.hard_sigmoid(node.inputs[0])
    out.tag.values_eq_approx = _within(0.1)  # at most 0.08 from the sigmoid
    return [out] if out.type == node.outputs[0].type else False


def _within(atol):
    """A comparison of values within ``atol`` (for ``tag.values_eq_approx``: what
    DebugMode uses to check an approximating rewrite)."""

    def values_eq_within(a, b):
        return values_eq_approx(a, b, atol=atol, rtol=0)

    return values_eq_within
