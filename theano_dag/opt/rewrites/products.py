"""Canonical products: chains of ``*``, ``/`` and unary ``-`` become ``coef * num / den``.

``MulCanonizer`` collects the factors of a product through nested ``mul``, ``true_div``
and ``neg`` nodes (those used only there, of the same dtype), multiplies the constant
factors into one coefficient and rebuilds the product in one canonical form::

    neg?( true_div( mul(num..., coef), mul(den...) ) )

with the factors in the canonical order of ``commutative_key``. Two instances are
registered in canonicalize: ``local_mul_canonizer`` (no cancellation: exact) and
``local_mul_cancel``, which also cancels a factor found in both the numerator and the
denominator (``x * y / y -> x``, ``x / x -> 1``); the latter is exact for finite,
non-zero values only, hence tagged ``nonfinite_unsafe``. Both produce the same canonical
form, so they never undo each other.

Two limits, because floating-point products are not associative at the ends of the
range. A product with an infinite or NaN constant factor is left as written: its value
depends on the order (``x / (inf / x)`` is 0 for finite ``x``, but ``sqr(x) / inf`` is
NaN once ``sqr(x)`` overflows: float32 ``x = -1e30``). And the canonical order of the
other factors may overflow or underflow where the written order does not (float32
``x * (x * 1e-30)`` at ``x = 1e30``); the canonizers are also tagged ``reassociate``
(as is the flattening of nested products), and ``mode.excluding("reassociate")``
computes products as written.
"""

from __future__ import annotations

import weakref

import numpy as np

from theano_dag import scalar as ts
from theano_dag.graph.rewriting.local import LocalOptimizer, local_optimizer
from theano_dag.graph.rewriting.navigator import in2out
from theano_dag.opt.rewrites.algebra import NONFINITE_UNSAFE, REASSOCIATE, commutative_key
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import (
    abs_arg,
    const_value,
    fit,
    is_float,
    is_scalar_like,
    scalar_op,
    single_client,
    typed_constant,
)
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import cast
from theano_dag.tensor.elemwise import Elemwise, broadcast_static_shape
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.variable import TensorConstant

__all__ = [
    "MulCanonizer",
    "local_mul_canonizer",
    "local_mul_cancel",
    "mul_canonizer",
    "local_greedy_distributor",
]

_COLLECTED = (ts.Mul, ts.TrueDiv, ts.Neg)


class _Product:
    """The factors of one product: numerator, denominator, constant coefficient."""

    def __init__(self, dtype, ndim):
        self.dtype = dtype
        self.ndim = ndim
        self.num: list = []
        self.den: list = []
        self.leaves: list = []  # every factor met, constants included (shape sources)
        # The constant factors met, in order ((value, up), or None for a negation): the
        # coefficient is only computed if asked for (most products tried change nothing).
        self._coef_steps: list = []
        self._coef = None
        self.n_consts = 0
        self.n_inner = 0  # nested nodes absorbed
        self.nonfinite = False  # an infinite or NaN constant factor met

    @property
    def coef(self):
        """The product of the constant factors (numerator over denominator), float64."""
        if self._coef is None:
            coef = np.array(1.0, dtype="float64")
            steps = self._coef_steps
            if len(steps) == 1 and steps[0] is not None and steps[0][1]:
                # One finite constant factor (collect keeps no other): 1 * c neither
                # overflows nor is invalid, no errstate to enter (most products).
                self._coef = coef = coef * steps[0][0]
                return coef
            with np.errstate(all="ignore"):
                for step in self._coef_steps:
                    if step is None:
                        coef = -coef
                    else:
                        c, up = step
                        coef = coef * c if up else coef / c
            self._coef = coef
        return self._coef

    def collect(self, fgraph, node):
        stack = [(v, True) for v in _factors(node)]
        if isinstance(scalar_op(node), ts.TrueDiv):
            stack = [(node.inputs[0], True), (node.inputs[1], False)]
        elif isinstance(scalar_op(node), ts.Neg):
            self._coef_steps.append(None)
        while stack:
            var, up = stack.pop()
            inner = var.owner
            sop = scalar_op(inner)
            if (
                isinstance(sop, _COLLECTED)
                and var.dtype == self.dtype
                and single_client(fgraph, var)
            ):
                self.n_inner += 1
                if isinstance(sop, ts.TrueDiv):
                    stack.append((inner.inputs[0], up))
                    stack.append((inner.inputs[1], not up))
                else:
                    if isinstance(sop, ts.Neg):
                        self._coef_steps.append(None)
                    stack.extend((v, up) for v in inner.inputs)
                continue
            self.leaves.append(var)
            c = const_value(var) if is_scalar_like(var) else None
            if c is not None and not np.isfinite(c):
                self.nonfinite = True
            if c is not None and np.isfinite(c) and (up or c != 0):
                self.n_consts += 1
                self._coef_steps.append((c, up))
                continue
            (self.num if up else self.den).append(var)

    def cancel(self) -> int:
        """Remove factors found in both the numerator and the denominator."""
        n = 0
        for v in list(self.den):
            for k, u in enumerate(self.num):
                if u is v:
                    del self.num[k]
                    self.den.remove(v)
                    n += 1
                    break
        # x / |x| -> sgn(x)   (Theano's simplifier of its canonizer: 0 at x = 0, where
        # the quotient is NaN; real x only, a complex x / |x| is no sign)
        for v in list(self.den):
            x = abs_arg(v)
            if x is None:
                continue
            for k, u in enumerate(self.num):
                if u is x:
                    self.num[k] = tm.sgn(x)
                    self.den.remove(v)
                    n += 1
                    break
        return n

    def build(self):
        """The canonical expression of the product (None if it cannot be built)."""
        coef = self.coef
        if not np.isfinite(coef) or coef == 0:
            return None
        negate = bool(coef < 0)
        coef = abs(float(coef))
        span = _SPAN.get(self.dtype)
        if span is not None and not span[0] <= coef <= span[1]:
            # Finite in float64, not in the product's dtype: float32 x * 1e30 * 1e30 would
            # be x * inf, infinite for every x, where (x * 1e30) * 1e30 / 1e30 written out
            # (and canonicalized as a whole, coefficient 1e30) is finite.
            return None
        num = sorted(self._in_dtype(self.num, with_coef=coef != 1), key=commutative_key)
        den = sorted(self._in_dtype(self.den), key=commutative_key)
        if coef != 1:
            # Sorted with the other factors, not appended: a constant factor that is no
            # coefficient (a vector of weights) sorts among the constants as
            # CommutativeSort orders them, which would otherwise undo this order.
            num = sorted([*num, typed_constant(coef, self.dtype, self.ndim)], key=commutative_key)
        top = _product(num) if num else typed_constant(1, self.dtype, self.ndim)
        expr = tm.true_div(top, _product(den)) if den else top
        return tm.neg(expr) if negate else expr

    def _in_dtype(self, factors, with_coef=False):
        """``factors``, cast to the product's dtype when none of them has it. The leaves of
        a quotient may be narrower than it (int8 ``x / (abs(x) + 1)`` is float64): their
        product alone would be computed, and wrap, in their dtype (``x * x`` of int8),
        where the graph it replaces multiplied in the product's. One factor of the
        product's dtype (or the coefficient, a constant of it) makes the one ``mul``
        compute in it."""
        if with_coef or not factors or any(f.dtype == self.dtype for f in factors):
            return factors
        return [f if f.dtype == self.dtype else cast(f, self.dtype) for f in factors]


def _factors(node):
    sop = scalar_op(node)
    if isinstance(sop, (ts.Mul, ts.Neg)):
        return list(node.inputs)
    return []


def _product(factors):
    return factors[0] if len(factors) == 1 else tm.mul(*factors)


def _same_structure(a, b) -> bool:
    """Whether ``a`` and ``b`` are the same expression, down to shared variables."""
    todo = [(a, b)]
    while todo:
        x, y = todo.pop()
        if x is y:
            continue
        xo, yo = x.owner, y.owner
        if xo is None or yo is None:
            if not (hasattr(x, "equals") and hasattr(y, "equals") and x.type == y.type):
                return False
            try:
                if not x.equals(y):
                    return False
            except Exception:
                return False
            continue
        if (
            xo.op != yo.op
            or x.index != y.index
            or len(xo.inputs) != len(yo.inputs)
            or x.type != y.type
        ):
            return False
        todo.extend(zip(xo.inputs, yo.inputs))
    return True


# float dtype -> the (smallest normal, largest finite) magnitudes of a coefficient that
# keeps its value in it; float64 holds every finite coefficient (computed in float64).
_SPAN = {d: (float(np.finfo(d).tiny), float(np.finfo(d).max)) for d in ("float16", "float32")}


# (coefficient, dtype, ndim) -> the signature of the constant ``build`` makes for it.
_COEF_SIGNATURES: dict = {}


def _coef_signature(coef, dtype, ndim):
    key = (coef, dtype, ndim)
    sig = _COEF_SIGNATURES.get(key)
    if sig is None:
        if len(_COEF_SIGNATURES) > 1024:
            _COEF_SIGNATURES.clear()
        sig = _COEF_SIGNATURES[key] = typed_constant(coef, dtype, ndim).signature()
    return sig


def _exact_narrower(c, coef, dtype) -> bool:
    """Whether constant ``c`` holds exactly ``coef`` in a float dtype that ``dtype``
    holds exactly too. Python's ``0.5`` becomes a float32 constant (autocast): ``x * 0.5``
    of a float64 ``x`` is then left as it is instead of being rebuilt around a float64
    0.5 (the value and the type of the product are the same; on a random 1,000-node
    DAG this skipped 261 rebuilds, a fifth of ``function``'s time)."""
    data = c.data
    d = getattr(data, "dtype", None)
    if d is None or d.kind != "f" or np.size(data) != 1:
        return False
    key = (d, dtype)
    narrower = _NARROWER.get(key)
    if narrower is None:
        narrower = _NARROWER[key] = d != np.dtype(dtype) and np.can_cast(d, dtype, "safe")
    if not narrower:
        return False
    return float(np.asarray(data).reshape(())) == float(coef)


# (constant's dtype, product's dtype name) -> whether the first is another float dtype
# the second holds exactly: a few pairs, asked about every product with a constant.
_NARROWER: dict = {}


def _canonical_with_coef(node, prod) -> bool:
    """Whether ``node`` is already ``mul(x..., c)``: the sorted factors and the constant
    coefficient, exactly what ``prod.build()`` would make.

    A product with a constant is visited again and again during canonicalize; this
    answers without building (and throwing away) a new product each time. False
    means "not sure": ``transform`` then builds the product and compares.
    """
    ins = node.inputs
    last = ins[-1]
    if (
        prod.den
        or prod.n_consts != 1
        or last.owner is not None
        or len(ins) != len(prod.num) + 1
        or node.op != tm.mul
        or not isinstance(last, TensorConstant)
    ):
        return False
    out = node.outputs[0]
    ndim = out.ndim
    if any(v.ndim != ndim for v in ins):
        return False  # build() would add a DimShuffle
    num = sorted(prod.num, key=commutative_key)
    if any(a is not b for a, b in zip(num, ins)):
        return False
    coef = prod.coef
    if np.asarray(coef).dtype != np.float64 or not (np.isfinite(coef) and coef > 0):
        return False
    if coef == 1:
        return False
    # _same_structure compares constants with ``equals``: their signatures.
    if last.signature() != _coef_signature(float(coef), prod.dtype, prod.ndim):
        if not _exact_narrower(last, coef, prod.dtype):
            return False
    return _typed_as_made(node)


def _typed_as_made(node) -> bool:
    """Whether ``node``'s output has the type its Elemwise's ``make_node`` gives inputs
    of these types, no broadcast added: what a rebuilt node on the same inputs has."""
    out = node.outputs[0]
    ins = node.inputs
    ndim = out.ndim
    if any(v.ndim != ndim for v in ins):
        return False  # make_node would add a DimShuffle
    t = out.type
    try:
        (dtype,) = node.op.scalar_op.output_types(tuple(v.dtype for v in ins))
        shape = broadcast_static_shape([v.type.shape for v in ins])
    except (TypeError, ValueError):
        return False
    return type(t) is TensorType and t.dtype == dtype and t.shape == shape


def _is_built_product(var, factors) -> bool:
    """Whether ``var`` is what ``_product(factors)`` makes: the factor itself, or a
    ``mul`` of exactly these variables, in this order, typed as ``make_node`` types it."""
    if len(factors) == 1:
        return var is factors[0]
    node = var.owner
    return (
        node is not None
        and node.op == tm.mul
        and len(node.inputs) == len(factors)
        and all(a is b for a, b in zip(node.inputs, factors))
        and _typed_as_made(node)
    )


def _canonical_without_coef(node, prod) -> bool:
    """Whether ``node`` is already what ``prod.build()`` makes for a product without
    constant factors, nested products absorbed: ``neg?(true_div(mul(num...),
    mul(den...)))`` with the sorted factors (a product of one factor being the factor).

    Such a product is collected again at every visit of canonicalize (its inner
    ``mul`` nodes are used only there, so they are absorbed); without this test each
    visit builds the same expression again to compare it. False means "not sure".
    """
    if prod.n_consts or not prod.num:
        return False
    num = sorted(prod.num, key=commutative_key)
    den = sorted(prod.den, key=commutative_key)
    var = node.outputs[0]
    if len(prod._coef_steps) % 2:  # an odd number of negations: the coefficient is -1
        if node.op != tm.neg or not _typed_as_made(node):
            return False
        var = node.inputs[0]
    if not den:
        return _is_built_product(var, num)
    div = var.owner
    return (
        div is not None
        and div.op == tm.true_div
        and _typed_as_made(div)
        and _is_built_product(div.inputs[0], num)
        and _is_built_product(div.inputs[1], den)
    )


class _PlainProduct:
    """What ``_Product.collect`` finds at a node whose inputs are all plain factors
    (``_plain_factors``): the inputs themselves, no constant, nothing absorbed. Only
    what ``_nothing_to_cancel`` reads."""

    __slots__ = ("num", "den")

    def __init__(self, num, den):
        self.num = num
        self.den = den


def _plain_factors(fgraph, inputs, dtype) -> bool:
    """Whether ``_Product.collect`` would keep every one of ``inputs`` as a factor as it
    is: none is a product of ``dtype`` used only there (to absorb), none holds a known
    number (a coefficient, or an infinite factor). Most products canonicalize visits are
    such; telling it costs a fraction of collecting them."""
    clients = fgraph.clients
    for v in inputs:
        owner = v.owner
        if owner is not None:
            op = owner.op
            # scalar_op(owner) and single_client(fgraph, v) written out
            if (
                type(op) is Elemwise
                and not op.inplace_items
                and isinstance(op.scalar_op, _COLLECTED)
                and v.type.dtype == dtype
            ):
                cl = clients.get(v, ())
                if len(cl) == 1 and type(cl[0][0]) is not str:
                    return False
        if all(v.type.broadcastable) and const_value(v) is not None:
            return False
    return True


# The last product the canonizer collected without changing the graph: (fgraph, node,
# graph version, _Product). local_mul_cancel runs on the same node right after it.
_LAST_COLLECTED: list = [None, None, None, None]


def _remember_collected(fgraph, node, prod):
    version = getattr(fgraph, "_version", None)
    try:
        refs = [weakref.ref(fgraph), weakref.ref(node)] if version is not None else None
    except TypeError:  # not weakly referable (a stand-in graph): remember nothing
        refs = None
    _LAST_COLLECTED[:] = [*refs, version, prod] if refs else [None, None, None, None]


def _nothing_to_cancel(fgraph, node) -> bool:
    """Whether the product the canonizer just collected at ``node`` (the graph unchanged
    since) has no factor in both its numerator and its denominator."""
    graph_ref, node_ref, version, prod = _LAST_COLLECTED
    if graph_ref is None or graph_ref() is not fgraph or node_ref() is not node:
        return False
    if version is None or version != getattr(fgraph, "_version", None):
        return False
    if not prod.den:
        return True
    # a factor in both, or x over |x| (which cancel makes sgn(x))
    den = {id(v) for v in prod.den}
    den.update(id(x) for x in map(abs_arg, prod.den) if x is not None)
    return not any(id(u) in den for u in prod.num)


class MulCanonizer(LocalOptimizer):
    """Rewrite a product into its canonical form (see the module docstring).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.opt import in2out
    >>> x, y = tt.dvector("x"), tt.dvector("y")
    >>> fg = FunctionGraph([x, y], [(x * 2) * (y * 3) / y])
    >>> _ = in2out(MulCanonizer(cancel=True)).optimize(fg)
    >>> fg
    FunctionGraph(Elemwise{mul,no_inplace}(x, [6.]))
    """

    def __init__(self, cancel=False, name=None):
        self.cancel = cancel
        self.__name__ = name or ("local_mul_cancel" if cancel else "local_mul_canonizer")

    def tracks(self):
        return [tm.mul, tm.true_div, tm.neg]

    def transform(self, fgraph, node):
        sop = scalar_op(node)
        if not isinstance(sop, _COLLECTED):
            return False
        out = node.outputs[0]
        if not is_float(out) or len(node.outputs) != 1:
            return False
        if self.cancel:
            if _nothing_to_cancel(fgraph, node):
                return False
        elif _plain_factors(fgraph, node.inputs, out.type.dtype):
            # What collect and _obviously_canonical would find, without a _Product: a
            # quotient or a negation of plain factors is canonical, a product is when
            # its factors are in order.
            if isinstance(sop, ts.TrueDiv):
                _remember_collected(fgraph, node, _PlainProduct([node.inputs[0]], [node.inputs[1]]))
                return False
            _remember_collected(fgraph, node, _PlainProduct(node.inputs, ()))
            if isinstance(sop, ts.Neg):
                return False
            keys = [commutative_key(v) for v in node.inputs]
            if keys == sorted(keys):
                return False
        prod = _Product(out.dtype, out.ndim)
        prod.collect(fgraph, node)
        if prod.nonfinite:
            # x / (inf / x) -> sqr(x) / inf is NaN where sqr(x) overflows: as written.
            return False
        if not self.cancel:
            _remember_collected(fgraph, node, prod)
        n_cancelled = prod.cancel() if self.cancel else 0
        if self.cancel and not n_cancelled:
            return False
        if not n_cancelled and self._obviously_canonical(node, prod):
            return False
        new = prod.build()
        if new is None or new.dtype != out.dtype:
            return False
        if _same_structure(new, out):
            return False
        new = fit(out, new, prod.leaves)
        return [new] if new is not None else False  # a class: transform returns a list

    @staticmethod
    def _obviously_canonical(node, prod) -> bool:
        """Cheap test for the common cases, to avoid building a product to compare.

        True only when ``prod.build()`` would give None or an expression of the same
        structure as ``node``'s output (what ``transform`` then ignores).
        """
        if prod.n_inner:
            return _canonical_without_coef(node, prod)
        if prod.n_consts:
            return _canonical_with_coef(node, prod)
        sop = scalar_op(node)
        if isinstance(sop, ts.TrueDiv) or isinstance(sop, ts.Neg):
            return True  # x / y and -x with plain x, y
        keys = [commutative_key(v) for v in node.inputs]
        return keys == sorted(keys)

    def __str__(self):
        return self.__name__


local_mul_canonizer = RULES.canonicalize(REASSOCIATE)(MulCanonizer(cancel=False))
local_mul_cancel = RULES.canonicalize(NONFINITE_UNSAFE, REASSOCIATE)(MulCanonizer(cancel=True))


# Theano's name for the canonizer pass: the product canonizer over a whole graph.
mul_canonizer = in2out(local_mul_canonizer, name="mul_canonizer")


def _split(var):
    """The numerator and denominator factors of ``var`` through ``mul`` and ``true_div``."""
    num, den, todo = [], [], [(var, True)]
    while todo:
        v, up = todo.pop()
        sop = scalar_op(v.owner)
        if isinstance(sop, ts.Mul) and v.dtype == var.dtype:
            todo.extend((i, up) for i in reversed(v.owner.inputs))
        elif isinstance(sop, ts.TrueDiv) and v.dtype == var.dtype:
            todo.extend([(v.owner.inputs[1], not up), (v.owner.inputs[0], up)])
        else:
            (num if up else den).append(v)
    return num, den


def _cancelled(num, den):
    """``num`` / ``den`` with the factors found in both removed (by identity)."""
    num, den = list(num), list(den)
    for v in list(den):
        if any(v is n for n in num):
            num.pop(next(i for i, n in enumerate(num) if n is v))
            den.pop(next(i for i, d in enumerate(den) if d is v))
    return num, den


def _cost(num, den) -> int:
    """Multiplications and divisions computing ``num`` / ``den``; a division weighs two."""
    return max(len(num) - 1, 0) + 2 * len(den)


@local_optimizer([tm.mul, tm.true_div])
def local_greedy_distributor(fgraph, node):
    """A product of a sum distributed over the sum's terms when the factors then cancel
    (fewer multiplications and divisions; divisions weigh more), Theano's greedy
    distributor:

    ``(a/x + b/y) * x * y -> a*y + b*x`` and ``(a/x + b) * x -> a + b*x``.

    It cancels ``x / x`` to 1, exact only for finite non-zero ``x``, so it is not in the
    default pipeline; a pass of a user's own runs it (``in2out(local_greedy_distributor)``).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.printing import pprint
    >>> a, b, x = tt.dmatrices("a", "b", "x")
    >>> g = FunctionGraph([a, b, x], [(a / x + b) * x])
    >>> _ = in2out(local_greedy_distributor).optimize(g)
    >>> pprint(g.outputs[0])
    'a + b * x'
    """
    out = node.outputs[0]
    if not is_float(out):
        return False
    num, den = _split(out)
    for k, factor in enumerate(num):
        if not isinstance(scalar_op(factor.owner), ts.Add) or factor.dtype != out.dtype:
            continue
        rest = num[:k] + num[k + 1 :]
        before = _cost(num, den) + sum(_cost(*_split(t)) for t in factor.owner.inputs)
        terms, after = [], len(factor.owner.inputs) - 1
        for t in factor.owner.inputs:
            tn, td = _split(t)
            tn, td = _cancelled(tn + rest, td + den)
            after += _cost(tn, td)
            top = _product(tn) if tn else typed_constant(1, out.dtype, out.ndim)
            terms.append(tm.true_div(top, _product(td)) if td else top)
        if after < before:
            new = fit(out, tm.add(*terms), num + den)
            if new is not None:
                return [new]
    return False
