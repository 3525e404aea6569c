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

from theano_dag import scalar as ts
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import fit, is_const, is_float, scalar_op
from theano_dag.tensor import math as tm

stabilize = RULES.stabilize

__all__ = [
    "sigmoid_key",
    "local_exp_over_1_plus_exp",
    "local_inv_1_plus_exp",
    "local_1msigmoid",
    "local_sigm_times_exp",
    "local_sigm_cancel",
    "local_log_sigmoid",
    "local_logit_sigmoid",
    "local_sigmoid_logit",
]


# ---- recognising the forms ----------------------------------------------------------


def _unneg(var):
    """``(base, negated)``: ``var`` with its negations stripped, and whether there was an
    odd number of them."""
    negated = False
    while isinstance(scalar_op(var.owner), ts.Neg):
        var = var.owner.inputs[0]
        negated = not negated
    return var, negated


def _signed(base, negated):
    return tm.neg(base) if negated else base


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
    if isinstance(sop, ts.Sub) and is_const(node.inputs[0], 1):
        node = node.inputs[1].owner
        sop = scalar_op(node)
        flip = True
    if sop != ts.sigmoid:
        return None
    base, negated = _unneg(node.inputs[0])
    return base, negated ^ flip


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


def _factors(var):
    """``(factors, negated)``: ``var`` as ``±(f1 * f2 * ...)`` through its ``mul`` and
    ``neg`` nodes (of ``var``'s dtype)."""
    out, negated, todo = [], False, [var]
    while todo:
        v = todo.pop()
        sop = scalar_op(v.owner)
        if isinstance(sop, ts.Neg) and v.dtype == var.dtype:
            negated = not negated
            todo.append(v.owner.inputs[0])
        elif isinstance(sop, ts.Mul) and v.dtype == var.dtype:
            todo.extend(reversed(v.owner.inputs))
        else:
            out.append(v)
    return out, negated


def _fraction(var):
    """``(num_factors, den_factors, negated)`` of ``var`` = ``±(n1 * ...) / (d1 * ...)``
    (one division deep); squares in the denominator count as two factors."""
    var, negated = _unneg(var)
    node = var.owner
    if isinstance(scalar_op(node), ts.TrueDiv) and var.dtype == node.inputs[0].dtype:
        num, num_neg = _factors(node.inputs[0])
        den, den_neg = _factors(node.inputs[1])
        return num, _squares_expanded(den), negated ^ num_neg ^ den_neg
    num, num_neg = _factors(var)
    return num, [], negated ^ num_neg


def _squares_expanded(factors):
    out = []
    for f in factors:
        node = f.owner
        sop = scalar_op(node)
        if sop == ts.sqr or (isinstance(sop, ts.Pow) and is_const(node.inputs[1], 2)):
            out += [node.inputs[0]] * 2
        else:
            out.append(f)
    return out


def _product(factors, like):
    """The product of ``factors`` (constant ones left out), 1 when there is none."""
    factors = [f for f in factors if not is_const(f, 1)]
    if not factors:
        return tm.ones_like(like)
    return factors[0] if len(factors) == 1 else tm.mul(*factors)


# ---- sigmoid recognised ---------------------------------------------------------------


@stabilize()
@local_optimizer([tm.true_div])
def local_exp_over_1_plus_exp(fgraph, node):
    """``1 + exp(x)`` in a denominator as a sigmoid: ``exp(x) / (1 + exp(x))`` is
    ``sigmoid(x)``, ``c / (1 + exp(x))`` is ``c * sigmoid(-x)``; each factor ``1 + exp``
    of a product's denominator, with the matching ``exp`` of its numerator if there is
    one (the gradient of ``1 / (1 + exp(-x))`` is ``g * exp(-x) / (1 + exp(-x))**2``:
    ``g * sigmoid(-x) * sigmoid(x)``). Not ``inf / inf`` for large ``x``."""
    # exp(x) / (1 + exp(x)) -> sigmoid(x) ; c / (1 + exp(x)) -> c * sigmoid(-x)
    # a * exp(x) / ((1 + exp(x)) * (1 + exp(-y)) * b) -> a * sigmoid(x) * sigmoid(y) / b
    out = node.outputs[0]
    if not isinstance(scalar_op(node), ts.TrueDiv) or not is_float(out):
        return False
    num, den = node.inputs
    den_f, den_neg = _factors(den)
    den_f = _squares_expanded(den_f)
    keys = [_one_plus_exp_key(f) for f in den_f]
    if not any(keys):
        return False
    num_f, num_neg = _factors(num)
    num_keys = [_exp_key(f) for f in num_f]
    sigmoids, rest_den = [], []
    for f, k in zip(den_f, keys):
        if k is None:
            rest_den.append(f)
            continue
        for i, nk in enumerate(num_keys):
            if _same(nk, k):  # exp(x) / (1 + exp(x))
                del num_f[i], num_keys[i]
                sigmoids.append(_sigmoid(*k))
                break
        else:  # 1 / (1 + exp(x))
            sigmoids.append(_sigmoid(k[0], not k[1]))
    new = _product(sigmoids + num_f, out)
    if rest_den:
        new = tm.true_div(new, _product(rest_den, out))
    if num_neg ^ den_neg:
        new = tm.neg(new)
    return fit(out, new, node.inputs)


@stabilize()
@local_optimizer([tm.reciprocal])
def local_inv_1_plus_exp(fgraph, node):
    """``1 / (1 + exp(x))`` written with ``reciprocal``, as ``sigmoid(-x)``."""
    # reciprocal(1 + exp(x)) -> sigmoid(-x)
    if scalar_op(node) != ts.reciprocal or not is_float(node.outputs[0]):
        return False
    k = _one_plus_exp_key(node.inputs[0])
    if k is None:
        return False
    return fit(node.outputs[0], _sigmoid(k[0], not k[1]), node.inputs[0].owner.inputs)


@stabilize()
@local_optimizer([tm.sub])
def local_1msigmoid(fgraph, node):
    """``1 - sigmoid(x)`` as ``sigmoid(-x)``, which does not round to 0 for ``x > 37``
    (float64; ``x > 17`` in float32)."""
    # 1 - sigmoid(x) -> sigmoid(-x)
    if not isinstance(scalar_op(node), ts.Sub) or not is_float(node.outputs[0]):
        return False
    k = sigmoid_key(node.outputs[0])
    if k is None:
        return False
    return fit(node.outputs[0], _sigmoid(*k), node.inputs)


@stabilize()
@local_optimizer([tm.mul])
def local_sigm_times_exp(fgraph, node):
    """A product of ``exp(x)`` and ``sigmoid(-x)`` as ``sigmoid(x)`` (their product):
    ``exp(x)`` alone overflows for large ``x``."""
    # exp(x) * sigmoid(-x) -> sigmoid(x) ; exp(-x) * sigmoid(x) -> sigmoid(-x)
    out = node.outputs[0]
    if not isinstance(scalar_op(node), ts.Mul) or not is_float(out):
        return False
    factors, negated = _factors(out)
    exps = [(i, k) for i, f in enumerate(factors) if (k := _exp_key(f)) is not None]
    if not exps:
        return False
    sigs = {i: k for i, f in enumerate(factors) if (k := sigmoid_key(f)) is not None}
    new, done = list(factors), False
    for i, (base, negated_e) in exps:
        for j, (sbase, negated_s) in list(sigs.items()):
            if sbase is base and negated_s != negated_e:
                new[i], new[j] = None, _sigmoid(base, negated_e)
                del sigs[j]
                done = True
                break
    if not done:
        return False
    prod = _product([f for f in new if f is not None], out)
    return fit(out, tm.neg(prod) if negated else prod, factors)


@stabilize()
@local_optimizer([tm.mul])
def local_sigm_cancel(fgraph, node):
    """A product of sigmoids and of a sum whose terms divide by those sigmoids,
    distributed over the sum so that they cancel: the gradient of a cross-entropy of a
    sigmoid, ``s * (1 - s) * (a / s - b / (1 - s))``, is then ``a * (1 - s) - b * s``,
    not ``0 * inf`` where ``s`` rounds to 0 or 1. (``1 + exp(x)`` in a term's numerator
    divides it by ``sigmoid(-x)``.)"""
    # sigmoid(x) * sigmoid(-x) * (a / sigmoid(x) + b / sigmoid(-x))
    #   -> a * sigmoid(-x) + b * sigmoid(x)
    # sigmoid(x) * (a / sigmoid(x) + b) -> a + b * sigmoid(x)
    out = node.outputs[0]
    if not isinstance(scalar_op(node), ts.Mul) or not is_float(out):
        return False
    # Cheap test first: a sum among the factors (most products have none).
    if not any(isinstance(scalar_op(i.owner), ts.Add) for i in node.inputs):
        return False
    factors, negated = _factors(out)
    keys = [sigmoid_key(f) for f in factors]
    if not any(keys):
        return False
    for a, add in enumerate(factors):
        if not isinstance(scalar_op(add.owner), ts.Add) or add.dtype != out.dtype:
            continue
        others = [(f, k) for i, (f, k) in enumerate(zip(factors, keys)) if i != a]
        terms, n_cancelled = [], 0
        for t in add.owner.inputs:
            num, den, t_neg = _fraction(t)
            pool = list(others)
            keep_den = []
            for d in den:
                j = _find(pool, sigmoid_key(d))
                if j is None:
                    keep_den.append(d)
                else:
                    del pool[j]
                    n_cancelled += 1
            keep_num = []
            for m in num:
                k = _one_plus_exp_key(m)  # 1 + exp(x) = 1 / sigmoid(-x)
                j = None if k is None else _find(pool, (k[0], not k[1]))
                if j is None:
                    keep_num.append(m)
                else:
                    del pool[j]
                    n_cancelled += 1
            term = _product(keep_num + [f for f, _ in pool], out)
            if keep_den:
                term = tm.true_div(term, _product(keep_den, out))
            terms.append(tm.neg(term) if t_neg else term)
        if n_cancelled:
            new = tm.add(*terms)
            return fit(out, tm.neg(new) if negated else new, factors + list(add.owner.inputs))
    return False


def _find(pool, key):
    """The index of the first ``(factor, sigmoid key)`` of ``pool`` with ``key``."""
    if key is None:
        return None
    for j, (_, k) in enumerate(pool):
        if _same(k, key):
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
    base, negated = k
    return fit(node.outputs[0], tm.neg(tm.softplus(_signed(base, not negated))), arg.owner.inputs)


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
