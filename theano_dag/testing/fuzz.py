"""A seeded differential fuzzer: random well-typed graphs run on every engine against numpy.

A *recipe* is a list of nodes: inputs (``("input", dims, dtype)``), at most one shared
variable (``("shared", dims, dtype)``) and ops (``(op, args, param)``, the args being
earlier nodes; a constant is an op of no args), plus the nodes returned as outputs and
the node that updates the shared variable. Each op of :data:`OPS` has two templates,
one building the graph (``tt``) and one computing numpy's value (``np``), so the graph,
the reference and the stand-alone reproducer all come from the same text.

Dimensions are tokens: ``"a"`` and ``"b"`` (lengths that change from call to call),
``1`` (a broadcastable axis) or a derived name (``"a[1:]"``) that only matches
itself; so every generated graph is well typed and the numpy values broadcast as
the graph's do. The lengths are small in most graphs and large in a
:data:`LARGE_SHARE` of them (:data:`SIZE_SETS`), so that values fall on both sides of
the CPU engine's planning threshold.

The dtypes are the floats, the signed and unsigned integers and bool, with casts in
every direction (a float to an integer out of range, NaN and the infinities included,
by the engines' one rule, ``theano_dag.scalar.cast_array``). The ops cover elementwise maths with
broadcasting (integer arithmetic that wraps, floor division and modulo, whose integer
division by zero gives 0 on every engine, as numpy's), comparisons and bitwise logic,
``switch`` with branches of different dtypes, ``fill``/``second``/``alloc`` of
operands that broadcast against each other, constants (NaN and the infinities among
them), reductions, dot, slices, an index, set/inc_subtensor, transposes, new axes,
flatten, 0-d values, a shared variable with an update, and several outputs sharing
nodes. Beyond those: more elementwise maths (powers of integers and floats, true
division of integers, log1p, expm1, the hyperbolic and inverse functions, erf, both
roundings of halves, floor/ceil/trunc of integers, sgn, isnan/isinf, softplus),
reductions over an axis (a negative one too) or all, keeping it or not (prod, mean,
var, std, min, max, argmax, argmin, all, any, a sum into a wider dtype), cumsum and
cumprod, sort and a stable argsort, concatenate/join/stack, reshape, repeat, tile,
rows set or incremented at repeated indices, columns taken by an index vector,
boolean masks (read, set, incremented: a length known only at run time, maybe 0),
``where``, outer, tensordot, batched_dot, diag and diagonal, softmax and logsoftmax.

:func:`check` runs one recipe on each engine (:data:`ENGINES`: the reference, the CPU
engine with and without C kernels, planning every value, poisoning its blocks, and
OpenCL): two calls (the second with new lengths, unless a shared variable fixes
them), each against numpy (value, dtype, shape; integers exactly); the inputs must
come back unmodified, the first call's results must not be overwritten by the second,
outputs must not share memory with each other or with the inputs, and the shared
variable must hold numpy's state. :func:`shrink` reduces a failing recipe to a small
one and :func:`reproducer` prints it as a script that runs alone and says which
outputs differ from numpy's.

Run it: ``python -m theano_dag.testing.fuzz --n 1000 --seed 0`` (``make fuzz N=1000``).
``--lengths edge`` calls the same graphs with lengths of 1 and 0 on axes not declared
broadcastable (:data:`EDGE_SIZES`); where numpy refuses the values the graph needs (the
max of an empty value, an index past its end), the engine must raise too.
``--function-cache`` also compiles each graph with the cache of optimized graphs, stored
and then loaded from disk, and requires the values of the compile without it, bit for bit
(:func:`check_function_cache`). ``--lazy`` draws lazy ``ifelse`` graphs too
(:data:`LAZY_OPS`: each branch compiled apart, run only when taken); they came after
seeds were cited, so a seed's graphs differ with it. So do ``--extra-ops`` graphs
(:data:`EXTRA_OPS`: cos, tan, the special functions against scipy's, arctan2,
log1mexp, squeeze, flip, roll, swapaxes, tril/triu, fill_diagonal, ptp, logsumexp,
diff, searchsorted, relu, elu, softsign, hard_sigmoid, var with ddof=1, isclose,
slices of negative steps set and incremented, a matrix read and incremented at pairs
of index vectors, arange, and the run-time lengths of flatnonzero, nonzero_values,
unique and bincount).

Integers are drawn in [-9, 9] by default, where int8 products rarely wrap; that draw
is what every cited seed means, and stays. ``--values wide`` (``values="wide"``) draws
them across each dtype's range, a third where its sums and products wrap
(:func:`wrap_values`), with more integer and bool graphs, mixed with floats, and longer
chains of arithmetic (:data:`WIDE_OP_FACTORS`, :data:`WIDE_CHAIN`). numpy's value of
the written graph is the reference, each op wrapping in its own output dtype; where C
leaves integers undefined the engines give numpy's values: ``x // 0`` and ``x % 0`` are
0, ``INT_MIN // -1`` is ``INT_MIN``, ``-x`` and ``abs(INT_MIN)`` wrap, a narrowing
integer cast wraps, and a float cast to an integer follows ``cast_array``.

>>> rec = generate(np.random.default_rng(0))
>>> check(rec, ["py"])
[]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import math
import re
import sys
import textwrap
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

import theano_dag.tensor as tt
from theano_dag.compile import function_cache
from theano_dag.compile.debugmode import DebugMode
from theano_dag.compile.function import function
from theano_dag.compile.io import Out
from theano_dag.compile.mode import Mode
from theano_dag.compile.sharedvalue import shared
from theano_dag.config import config
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.dask.backend import current_client
from theano_dag.engines.dask.linker import DaskLinker
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import grad
from theano_dag.ifelse import ifelse
from theano_dag.printing import debugprint
from theano_dag.scalar import cast_array
from theano_dag.testing.late_loads import late_loads

__all__ = [
    "engine_context",
    "Recipe",
    "generate",
    "check",
    "check_grad",
    "shrink",
    "reproducer",
    "grad_reproducer",
    "input_value",
    "ENGINES",
    "main",
]

FLOATS = ("float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES = FLOATS + INTS + ("bool",)
#: How often an input (or a constant) has each dtype: mostly floats, every integer and
#: bool; in an :data:`INTEGER_SHARE` of the graphs, integers and bools only.
DTYPE_WEIGHTS = (0.2, 0.35) + (0.05,) * len(INTS) + (0.05,)
INTEGER_WEIGHTS = (0.0, 0.0) + (0.1,) * len(INTS) + (0.2,)
INTEGER_SHARE = 0.3
#: The share of graphs (of more than one input) whose first two inputs are a row and
#: a column, shapes that broadcast against each other.
CROSSED_SHARE = 0.3
#: The share of graphs whose inputs hold non-finite and extreme values.
NONFINITE_SHARE = 0.25
#: What a non-finite graph's float inputs hold besides uniform values in [-1, 1]: NaN,
#: the infinities, values near the dtype's overflow and underflow (as fractions of its
#: largest finite value and of its smallest normal one) and both zeros. Its integer
#: inputs hold the dtype's extremes, 0 and +-1 (:func:`input_value`).
SPECIAL = ("nan", "inf", "-inf", "huge", "-huge", "tiny", "-tiny", "zero", "-zero")
#: The tags of the documented rewrites that change non-finite values (docs/optimization.md):
#: ``x * 0 -> 0`` and the like, and products reordered (an overflow in one order and not
#: in the other). A difference that disappears with the tag excluded is classified, not
#: a failure. ``stabilize``'s rewrites (``log(sigmoid(x)) -> -softplus(-x)`` and the like)
#: give the finite true value where the written graph overflows to an infinity.
NONFINITE_TAGS = ("nonfinite_unsafe", "reassociate", "stabilize")
#: The class of a difference that no rewrite makes: a matrix product whose terms
#: overflow or hold opposite infinities is NaN or an infinity by the kernel's order of
#: summation and its use of fused multiply-adds (OpenBLAS gives -inf where a plain sum
#: of products gives NaN; the OpenCL engine's kernel gives NaN). A zero product's sign
#: is the kernel's too (BLAS adds ``0 * -x`` to +0.0, an elementwise outer product
#: keeps -0.0), and a quotient by it an infinity of either sign.
DOT_NONFINITE = "dot_nonfinite"
BASE = ("a", "b", 1)
#: The lengths of ``"a"`` and ``"b"`` in a recipe's two calls: small, then two large
#: sets in which matrices, or vectors, reach the CPU engine's planning threshold
#: (``DEFAULT_MIN_PLAN_BYTES``, 16 KiB) in some dtypes and not in others.
SIZE_SETS = (
    ({"a": 3, "b": 4}, {"a": 5, "b": 2}),
    ({"a": 48, "b": 129}, {"a": 40, "b": 150}),
    ({"a": 2100, "b": 2}, {"a": 2200, "b": 3}),
)
SIZES = SIZE_SETS[0]
#: The share of graphs with large lengths (half with each large set).
LARGE_SHARE = 0.25
#: The most elements a node of a large graph may have (a product of two long vectors'
#: lengths is left out).
MAX_ELEMENTS = 20_000
#: Why generation turned ops down (op, reason): a diagnostic of the generator's reach.
REJECTED: Counter = Counter()


# -- numpy's side: helpers the numpy templates call (copied into reproducers) ----------


def ew(f, dtype, *xs):
    """``f`` computed in ``dtype``, the graph's output dtype: the array operands are
    cast to it first, as the engines compute an elementwise op (Python numbers stay
    weak, as they do in numpy)."""
    xs = [x if isinstance(x, (bool, int, float)) else np.asarray(x).astype(dtype) for x in xs]
    return np.asarray(f(*xs)).astype(dtype)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def clip(x, lo, hi):
    """Theano's clip: numpy's, but ``lo`` where ``x < lo`` and ``lo > hi``."""
    return np.where((x < lo) & (lo > hi), lo, np.clip(x, lo, hi))


def rsum(x, axis, dtype):
    """A sum as the engines compute it: float32 accumulates in float64, and a sum over
    no axis (of a 0-d value) is the value itself, -0.0 included (numpy adds it to +0.0)."""
    acc = "float64" if dtype == "float32" else dtype
    if np.ndim(x) == 0 or axis == ():
        return np.array(x, dtype=acc).astype(dtype)
    return np.asarray(np.sum(x, axis=axis, dtype=acc)).astype(dtype)


def rsum_by_axes(x, axis, dtype):
    """:func:`rsum` adding one axis at a time, the last first, as the reference engine
    does (Theano's order): where large terms cancel (``big - big + small``), another
    order of the same additions rounds to another value."""
    acc = "float64" if dtype == "float32" else dtype
    if np.ndim(x) == 0 or axis == ():
        return np.array(x, dtype=acc).astype(dtype)
    axes = range(np.ndim(x)) if axis is None else np.atleast_1d(axis) % np.ndim(x)
    r = np.asarray(x)
    for a in sorted(axes, reverse=True):
        r = np.sum(r, axis=a, dtype=acc)
    return np.asarray(r).astype(dtype)


def reduce_by_axes(f, x, p, dtype):
    """:func:`reduce` with the means of ``np.mean``, ``np.var`` and ``np.std`` added one
    axis at a time (:func:`rsum_by_axes`)."""
    if f not in (np.mean, np.var, np.std) or np.ndim(x) == 0:
        return reduce(f, x, p, dtype)
    axis, keepdims = p[:2]
    acc = "float64" if f is np.mean or dtype != "float32" else dtype
    x = np.asarray(x).astype(acc)
    n = x.size if axis is None else x.shape[axis]

    def mean(v, kd):
        s = np.asarray(rsum_by_axes(v, axis, "float64") / np.float64(n))  # n = 0: NaN
        return s.reshape(np.sum(v, axis=axis, keepdims=True).shape) if kd else s

    if f is np.mean:
        r = mean(x, keepdims)
    else:
        dev = x - mean(x, True).astype(acc)
        r = mean(np.square(dev), keepdims).astype(acc)
        r = np.sqrt(r) if f is np.std else r
    return np.asarray(r).astype(dtype)


def where(c, x, y, dtype):
    """``switch``: ``x`` where ``c`` is not 0 (NaN included), else ``y``, in ``dtype``."""
    return np.where(np.asarray(c) != 0, np.asarray(x).astype(dtype), np.asarray(y).astype(dtype))


def fill(x, y):
    """``fill(x, y)``/``second(x, y)``: ``y`` broadcast against ``x``, in ``y``'s dtype."""
    y = np.asarray(y)
    return np.broadcast_to(y, np.broadcast_shapes(np.shape(x), y.shape)).copy()


def cast(x, dtype):
    """``cast``: numpy's conversion, except a float to an integer: the engines' rule
    (``cast_array``: truncation in range, the integer's minimum for NaN, the infinities
    and values out of range)."""
    return cast_array(x, dtype)


def cast_bounds(dtype):
    """Bounds within which a float truncates into ``dtype``'s range, exact in float32."""
    info = np.iinfo(dtype)
    lo = -0.5 if info.min == 0 else None
    if info.bits <= 16:
        return (lo if lo is not None else info.min - 0.5), info.max + 0.5
    top = 2.0 ** min(info.bits - 2, 62)
    return (lo if lo is not None else -top), top


def cast_in_range(x, dtype):
    """A float cast to the integer ``dtype`` after NaN -> 0 and clipping into its range."""
    lo, hi = cast_bounds(dtype)
    x = np.asarray(x)
    return np.clip(np.where(np.isnan(x), 0, x), lo, hi).astype(x.dtype).astype(dtype)


def setsub(x, sl, y):
    r = x.copy()
    r[eval(f"np.s_[{sl}]")] = y
    return r


def incsub(x, sl, y):
    r = x.copy()
    r[eval(f"np.s_[{sl}]")] += y
    return r


def erf(x):
    """The error function, elementwise (math's, in float64)."""
    return np.vectorize(math.erf, otypes=["float64"])(x)


def erfc(x):
    return np.vectorize(math.erfc, otypes=["float64"])(x)


def round_away(x):
    """Rounding half away from zero, exactly (``floor(x + 0.5)`` rounds 0.49999999999999994
    up: the sum is 1.0)."""
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def softplus(x):
    """``log(1 + exp(x))`` without its overflow (the true value)."""
    return np.logaddexp(0, x)


def softmax(x):
    """Along the last axis, less its maximum; a row whose maximum is +inf has its limit
    (the mass shared by its infinite entries), a row holding NaN is NaN; rows of no
    entries an empty array, as ``exp(x) / sum(exp(x))`` is."""
    m = np.max(x, axis=-1, keepdims=True, initial=-np.inf)
    z = np.where((m == np.inf) & (x == np.inf), x.dtype.type(0), x - m)
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


def logsoftmax(x):
    """The log of :func:`softmax`: ``-log(k)`` at the k infinite entries of a row whose
    maximum is +inf, -inf at the others."""
    m = np.max(x, axis=-1, keepdims=True, initial=-np.inf)
    z = np.where((m == np.inf) & (x == np.inf), x.dtype.type(0), x - m)
    return z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))


def reduce(f, x, p, dtype):
    """``f`` (``np.prod``, ``np.mean``, ``np.min``, ...) over ``p = (axis, keepdims)`` in
    ``dtype``: float32 accumulates in float64 (as a sum does), integers and bools in the
    result's dtype (a product of int8 is int64, wrapping as numpy's int64 does)."""
    axis, keepdims = p[:2]
    x = np.asarray(x)
    if f is np.mean and x.ndim == 0:
        # The mean of one value is the value, -0.0 included (as rsum's sum of it; numpy
        # adds it to +0.0).
        return x.astype(dtype)
    if f in (np.var, np.std) and dtype == "float32":
        # As the graph computes it: deviations and their squares in float32 (they
        # overflow there), their sums in float64.
        x = x.astype(dtype)
        m = np.mean(x, axis=axis, keepdims=True, dtype="float64").astype(dtype)
        sq = np.square(x - m)
        v = np.mean(sq, axis=axis, keepdims=keepdims, dtype="float64").astype(dtype)
        return np.sqrt(v) if f is np.std else v
    if f in (np.prod, np.mean, np.var, np.std):
        acc = "float64" if dtype in ("float32", "float64") or f is not np.prod else dtype
        if f is np.prod:
            return np.asarray(f(x, axis=axis, dtype=acc, keepdims=keepdims)).astype(dtype)
        return np.asarray(f(x.astype(acc), axis=axis, keepdims=keepdims)).astype(dtype)
    return np.asarray(f(x, axis=axis, keepdims=keepdims)).astype(dtype)


def advinc(x, idx, y):
    """``inc_subtensor(x[idx], y)``: a repeated index adds each time (``np.add.at``)."""
    r = x.copy()
    np.add.at(r, idx, np.asarray(y).astype(r.dtype))  # y in x's dtype, then added
    return r


def advset(x, idx, y):
    r = x.copy()
    r[idx] = np.asarray(y).astype(r.dtype)
    return r


def maskset(x, y, inc):
    """``set_subtensor(x[x > 0], y)`` (``inc``: ``inc_subtensor``), ``y`` in ``x``'s
    dtype."""
    r = x.copy()
    m = x > 0
    y = np.asarray(y).astype(r.dtype)
    r[m] = r[m] + y if inc else y
    return r


def bdot(x, y, dtype):
    """``batched_dot``: one product per row of the first axis (vectors: their products)."""
    x, y = np.asarray(x).astype(dtype), np.asarray(y).astype(dtype)
    if x.ndim == 1 or y.ndim == 1:
        xs = x.reshape(x.shape + (1,) * (y.ndim - 1)) if x.ndim == 1 else x
        ys = y.reshape(y.shape + (1,) * (x.ndim - 1)) if y.ndim == 1 else y
        return (xs * ys).astype(dtype)
    if not len(x):  # no row: an empty stack of products of the rows' shape
        row = np.tensordot(np.zeros(x.shape[1:], dtype), np.zeros(y.shape[1:], dtype), axes=1)
        return np.zeros((0,) + row.shape, dtype)
    return np.stack([np.tensordot(a, b, axes=1) for a, b in zip(x, y)]).astype(dtype)


def special(name, x):
    """``scipy.special``'s ``name`` of ``x``, computed in float64 (then cast by :func:`ew`),
    but ``gammaln(-inf)``: +inf, C99's ``lgamma`` (scipy's is -inf), on every engine."""
    import scipy.special  # deferred: scipy is an extra, and only the extra ops need it

    x = np.asarray(x, dtype="float64")
    r = getattr(scipy.special, name)(x)
    return np.where(x == -np.inf, np.inf, r) if name == "gammaln" else r


def lse(x, p, dtype):
    """``log(sum(exp(x)))`` over ``p = (axis, keepdims)``, its true value in float64:
    +inf where an element is +inf, NaN where one is NaN (and none is +inf), -inf where
    every element is -inf, and of no element (the log of an empty sum, as scipy's)."""
    axis, keepdims = p
    x = np.asarray(x, dtype="float64")
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0.0)
    r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return np.asarray(r if keepdims else np.sum(r, axis=axis)).astype(dtype)


def var1(x, p, dtype):
    """``var(x, axis, ddof=1)`` over ``p = (axis, keepdims)`` as the graph computes it:
    float32 deviations and squares in float32, their sums in float64 (:func:`reduce`),
    divided by n - 1."""
    axis, keepdims = p
    acc = "float32" if dtype == "float32" else "float64"
    x = np.asarray(x).astype(acc)
    n = x.size if axis is None else x.shape[axis]
    m = np.mean(x, axis=axis, keepdims=True, dtype="float64").astype(acc)
    s = np.sum(np.square(x - m), axis=axis, keepdims=keepdims, dtype="float64")
    return np.asarray(s / np.float64(max(n - 1, 0))).astype(dtype)  # numpy's: none is NaN


def log1mexp(x, dtype):
    """``log(1 - exp(x))``, accurate at both ends (in float64, then ``dtype``: -2.6e-56
    at -128 is -0.0 in float32, not 0)."""
    x = np.asarray(x).astype("float64")
    near = x > -np.log(2.0)
    r = np.where(near, np.log(-np.expm1(np.where(near, x, -1.0))), np.log1p(-np.exp(x)))
    return r.astype(dtype)


def advinc2(x, i, j, y):
    """``inc_subtensor(x[i, j], y)``: a repeated pair adds each time (``np.add.at``)."""
    r = x.copy()
    np.add.at(r, (i, j), np.asarray(y).astype(r.dtype))
    return r


def filldiag(x, v):
    """``fill_diagonal``: a copy of ``x`` with its main diagonal set to ``v``."""
    r = np.array(x, copy=True)
    np.fill_diagonal(r, np.asarray(v).astype(r.dtype))
    return r


_NP_HELPERS = (ew, sigmoid, clip, rsum, where, fill, cast, cast_bounds, cast_in_range)
_NP_HELPERS += (setsub, incsub)
_NP_HELPERS += (erf, erfc, round_away, softplus, softmax, logsoftmax, reduce)
_NP_HELPERS += (advinc, advset, maskset, bdot, special, lse, filldiag, var1, advinc2)
_NP_HELPERS += (log1mexp,)
_NP_NS = {
    "np": np,
    "math": math,
    "nan": np.nan,
    "inf": np.inf,
    **{h.__name__: h for h in _NP_HELPERS},
}


#: The names the ops' graph templates use (and ``nan``, ``inf`` in constants' reprs).
_GRAPH_NS = {"tt": tt, "ifelse": ifelse, "np": np, "nan": np.nan, "inf": np.inf}


# -- the op table ----------------------------------------------------------------------


def _const_graph(names, p, d):
    return f"tt.constant(np.asarray({p[0]!r}, {p[1]!r}))"


def _const_numpy(names, p, d):
    return f"np.asarray({p[0]!r}, {p[1]!r})"


def _alloc_shape(names, p):
    # p: the target's broadcastable pattern; its other lengths are read from the target.
    return ", ".join("1" if b else f"{names[1]}.shape[{i}]" for i, b in enumerate(p))


def _alloc_graph(names, p, d):
    return f"tt.alloc({names[0]}, {_alloc_shape(names, p)})"


def _alloc_numpy(names, p, d):
    return f"np.broadcast_to({names[0]}, ({_alloc_shape(names, p)},)).copy()"


def _cast_in_range_graph(names, p, d):
    lo, hi = cast_bounds(p)
    x = names[0]
    return f"tt.cast(tt.clip(tt.switch(tt.isnan({x}), 0, {x}), {lo!r}, {hi!r}), {p!r})"


_RESHAPES = {
    # p -> (the graph's new shape, numpy's)
    "swap": ("({0}.shape[1], {0}.shape[0])", "({0}.shape[1], {0}.shape[0])"),
    "flat": ("(-1,)", "(-1,)"),
    "row": ("(1, -1)", "(1, -1)"),
    "col": ("(-1, 1)", "(-1, 1)"),
}


def _reshape_graph(names, p, d):
    return f"tt.reshape({names[0]}, {_RESHAPES[p][0].format(names[0])})"


def _reshape_numpy(names, p, d):
    return f"{names[0]}.reshape({_RESHAPES[p][1].format(names[0])})"


def _unary(f):
    return (1, f"tt.{f}({{0}})", f"ew(np.{f}, '{{d}}', {{0}})")


def _binary(graph, ufunc):
    return (2, graph, f"ew(np.{ufunc}, '{{d}}', {{0}}, {{1}})")


def _compare(name, ufunc):
    return (2, f"tt.{name}({{0}}, {{1}})", f"np.{ufunc}({{0}}, {{1}})")


_SET_SUB = (2, "tt.set_subtensor({0}[{p}], {1})", "setsub({0}, '{p}', {1})")
_INC_SUB = (2, "tt.inc_subtensor({0}[{p}], {1})", "incsub({0}, '{p}', {1})")


# name: (arity, graph template, numpy template). A template is a format string (``{0}``,
# ``{1}``: the args; ``{p}``: the op's parameter; ``{d}``: the node's dtype, numpy's side
# only) or a function of (arg names, parameter, dtype) giving the text.
OPS = {
    "const": (0, _const_graph, _const_numpy),
    "tanh": _unary("tanh"),
    "sin": _unary("sin"),
    "neg": (1, "-{0}", "ew(np.negative, '{d}', {0})"),
    "abs": (1, "abs({0})", "ew(np.abs, '{d}', {0})"),
    "sqr": (1, "tt.sqr({0})", "ew(np.square, '{d}', {0})"),
    "exp": _unary("exp"),
    "sigmoid": (1, "tt.sigmoid({0})", "ew(sigmoid, '{d}', {0})"),
    "scale": (1, "{0} * {p!r}", "ew(np.multiply, '{d}', {0}, {p!r})"),
    # Factors that take floats out of the small integers' range before a cast.
    "grow": (1, "{0} * {p!r}", "ew(np.multiply, '{d}', {0}, {p!r})"),
    "add": _binary("{0} + {1}", "add"),
    "sub": _binary("{0} - {1}", "subtract"),
    "mul": _binary("{0} * {1}", "multiply"),
    "maximum": _binary("tt.maximum({0}, {1})", "maximum"),
    "minimum": _binary("tt.minimum({0}, {1})", "minimum"),
    "lt": _compare("lt", "less"),
    "le": _compare("le", "less_equal"),
    "gt": _compare("gt", "greater"),
    "ge": _compare("ge", "greater_equal"),
    "eq": _compare("eq", "equal"),
    "neq": _compare("neq", "not_equal"),
    "and": _binary("tt.and_({0}, {1})", "bitwise_and"),
    "or": _binary("tt.or_({0}, {1})", "bitwise_or"),
    "xor": _binary("tt.xor({0}, {1})", "bitwise_xor"),
    "invert": (1, "tt.invert({0})", "ew(np.invert, '{d}', {0})"),
    "switch": (3, "tt.switch({0}, {1}, {2})", "where({0}, {1}, {2}, '{d}')"),
    "fill": (2, "tt.fill({0}, {1})", "fill({0}, {1})"),
    "second": (2, "tt.second({0}, {1})", "fill({0}, {1})"),
    "alloc": (2, _alloc_graph, _alloc_numpy),
    "sum": (1, "{0}.sum(axis={p})", "rsum({0}, {p}, '{d}')"),
    "max": (1, "{0}.max(axis={p})", "np.asarray({0}.max(axis={p}))"),
    "dot": (2, "tt.dot({0}, {1})", "np.asarray(np.dot({0}, {1}))"),
    "slice": (1, "{0}[{p}]", "{0}[{p}]"),
    "index0": (1, "{0}[0]", "np.asarray({0}[0])"),
    # Rows picked by an integer vector (kept in range by its modulo).
    "take": (2, "{0}[{1} % {0}.shape[0]]", "{0}[{1} % np.int64({0}.shape[0])]"),
    # Rows picked by a constant index (repeats and negative indices among them).
    "takec": (
        1,
        "{0}[tt.constant(np.array({p!r}, 'int64')) % {0}.shape[0]]",
        "{0}[np.array({p!r}, 'int64') % {0}.shape[0]]",
    ),
    "set_sub": _SET_SUB,
    "inc_sub": _INC_SUB,
    "T": (1, "{0}.T", "{0}.T"),
    "addaxis": (1, "{0}.dimshuffle({p})", "{0}[None]"),
    "flatten": (1, "{0}.flatten()", "{0}.reshape(-1)"),
    "cast": (1, "tt.cast({0}, {p!r})", "cast({0}, {p!r})"),
    "cast_in_range": (1, _cast_in_range_graph, "cast_in_range({0}, {p!r})"),
    # A float scaled (by a factor exact in float32) out of the integers' range, then cast.
    "cast_grow": (1, "tt.cast({0} * {p[0]!r}, {p[1]!r})", "cast({0} * {p[0]!r}, {p[1]!r})"),
    # Ops whose non-finite values have rules of their own (NaN bounds, x // 0, log(-1)).
    "div": _binary("{0} / {1}", "true_divide"),
    "floordiv": _binary("{0} // {1}", "floor_divide"),
    "mod": _binary("{0} % {1}", "mod"),
    "clip": (2, "tt.clip({0}, {1}, {p!r})", "ew(clip, '{d}', {0}, {1}, {p!r})"),
    "log": _unary("log"),
    "sqrt": _unary("sqrt"),
    # More elementwise maths: domains that give NaN (arccosh, log2 of negatives), integers
    # made floats (floor of an int8 is float32), roundings of halves, NaN tests.
    **{f: _unary(f) for f in ("log1p", "expm1", "exp2", "log2", "log10", "sinh", "cosh")},
    **{f: _unary(f) for f in ("arcsinh", "arccosh", "arctanh", "arcsin", "arccos", "arctan")},
    **{f: _unary(f) for f in ("floor", "ceil", "trunc")},
    "erf": (1, "tt.erf({0})", "ew(erf, '{d}', {0})"),
    "erfc": (1, "tt.erfc({0})", "ew(erfc, '{d}', {0})"),
    "round_even": (1, "tt.round({0}, mode='half_to_even')", "ew(np.round, '{d}', {0})"),
    "round_away": (1, "tt.round({0}, mode='half_away_from_zero')", "ew(round_away, '{d}', {0})"),
    "iround": (1, "tt.iround({0})", "cast(np.round({0}), 'int64')"),
    "sgn": (1, "tt.sgn({0})", "ew(np.sign, '{d}', {0})"),
    "isnan": (1, "tt.isnan({0})", "np.isnan({0})"),
    "isinf": (1, "tt.isinf({0})", "np.isinf({0})"),
    "inv": (1, "tt.inv({0})", "ew(np.reciprocal, '{d}', {0})"),
    "true_div": _binary("tt.true_div({0}, {1})", "true_divide"),
    # Powers: of floats (NaN for a negative base), of integers by a small exponent (kept
    # non-negative: numpy refuses an integer's negative power), by constants.
    "pow": _binary("{0} ** {1}", "power"),
    "ipow": (2, "{0} ** ({1} % 4)", "ew(np.power, '{d}', {0}, {1} % 4)"),
    "powc": (1, "{0} ** {p!r}", "ew(np.power, '{d}', {0}, {p!r})"),
    "powcf": (1, "{0} ** {p!r}", "ew(np.power, '{d}', {0}, {p!r})"),
    "softplus": (1, "tt.nnet.softplus({0})", "ew(softplus, '{d}', {0})"),
    "softmax": (1, "tt.nnet.softmax({0}, axis=-1)", "ew(softmax, '{d}', {0})"),
    "logsoftmax": (1, "tt.nnet.logsoftmax({0}, axis=-1)", "ew(logsoftmax, '{d}', {0})"),
    "where": (3, "tt.where({0}, {1}, {2})", "where({0}, {1}, {2}, '{d}')"),
    # A lazy ifelse (its branches compiled apart, each only when taken): whether any
    # element of the first is positive (exact, as a sum would not be) picks the second or
    # the third, each spread over both's shape and dtype so that the branches agree.
    "ifelse": (
        3,
        "ifelse(tt.any(tt.gt({0}, 0)), tt.second({2}, {1}) + tt.zeros_like({2}), "
        "tt.second({1}, {2}) + tt.zeros_like({1}))",
        "(fill({2}, {1}) + np.zeros_like({2}) if np.any({0} > 0) "
        "else fill({1}, {2}) + np.zeros_like({1}))",
    ),
    # Reductions over an axis (negative ones too) or all, keeping the reduced axes or not:
    # p = (axis, keepdims).
    **{
        r: (
            1,
            f"tt.{r}({{0}}, axis={{p[0]}}, keepdims={{p[1]}})",
            f"reduce(np.{r}, {{0}}, {{p}}, '{{d}}')",
        )
        for r in ("prod", "mean", "var", "std", "min", "argmax", "argmin", "all", "any")
    },
    "maxk": (1, "tt.max({0}, axis={p[0]}, keepdims={p[1]})", "reduce(np.max, {0}, {p}, '{d}')"),
    # A sum into a wider dtype: p = (axis, keepdims, dtype).
    "sumd": (
        1,
        "{0}.sum(axis={p[0]}, keepdims={p[1]}, dtype={p[2]!r})",
        "rsum({0}.astype({p[2]!r}), {p[0]}, '{d}')"
        ".reshape(np.sum({0}, axis={p[0]}, keepdims={p[1]}).shape)",
    ),
    # A sum accumulating in a given dtype (an int8 one wraps): p = (axis, keepdims, acc).
    "suma": (
        1,
        "{0}.sum(axis={p[0]}, keepdims={p[1]}, acc_dtype={p[2]!r})",
        "rsum({0}.astype({p[2]!r}), {p[0]}, {p[2]!r}).astype('{d}')"
        ".reshape(np.sum({0}, axis={p[0]}, keepdims={p[1]}).shape)",
    ),
    "cumsum": (1, "tt.cumsum({0}, axis={p})", "np.cumsum({0}, axis={p}, dtype='{d}')"),
    "cumprod": (1, "tt.cumprod({0}, axis={p})", "np.cumprod({0}, axis={p}, dtype='{d}')"),
    "sort": (1, "tt.sort({0}, axis={p})", "np.sort({0}, axis={p})"),
    # A stable order: numpy's quicksort orders ties as it likes.
    "argsort": (
        1,
        "tt.argsort({0}, axis={p}, kind='stable')",
        "np.argsort({0}, axis={p}, kind='stable')",
    ),
    "concat": (
        2,
        "tt.concatenate([{0}, {1}], axis={p})",
        "np.concatenate([{0}.astype('{d}'), {1}.astype('{d}')], axis={p})",
    ),
    "join": (
        2,
        "tt.join({p}, {0}, {1})",
        "np.concatenate([{0}.astype('{d}'), {1}.astype('{d}')], axis={p})",
    ),
    "stack": (
        2,
        "tt.stack([{0}, {1}], axis={p})",
        "np.stack([{0}.astype('{d}'), {1}.astype('{d}')], axis={p})",
    ),
    # p: "swap" (a matrix read as its transpose's shape), "flat", "row" (1, -1), "col".
    "reshape": (1, _reshape_graph, _reshape_numpy),
    "repeat": (1, "tt.repeat({0}, {p[0]}, axis={p[1]})", "np.repeat({0}, {p[0]}, axis={p[1]})"),
    "tile": (1, "tt.tile({0}, {p!r})", "np.tile({0}, {p!r})"),
    # Rows picked by a constant index, incremented (a repeated one adds twice) or set.
    "adv_inc": (
        2,
        "tt.inc_subtensor({0}[tt.constant(np.array({p!r}, 'int64')) % {0}.shape[0]], {1})",
        "advinc({0}, np.array({p!r}, 'int64') % {0}.shape[0], {1})",
    ),
    "adv_set": (
        2,
        "tt.set_subtensor({0}[tt.constant(np.array({p!r}, 'int64')) % {0}.shape[0]], {1})",
        "advset({0}, np.array({p!r}, 'int64') % {0}.shape[0], {1})",
    ),
    # Columns picked by an integer vector (a slice, then an index array).
    "take1": (2, "{0}[:, {1} % {0}.shape[1]]", "{0}[:, {1} % np.int64({0}.shape[1])]"),
    # A boolean mask of the positive elements: a length known only at run time (maybe 0).
    "mask": (1, "{0}[tt.gt({0}, 0)]", "{0}[{0} > 0]"),
    "mask_set": (2, "tt.set_subtensor({0}[tt.gt({0}, 0)], {1})", "maskset({0}, {1}, False)"),
    "mask_inc": (2, "tt.inc_subtensor({0}[tt.gt({0}, 0)], {1})", "maskset({0}, {1}, True)"),
    "outer": (2, "tt.outer({0}, {1})", "np.outer({0}.astype('{d}'), {1}.astype('{d}'))"),
    "tensordot": (
        2,
        "tt.tensordot({0}, {1}, axes={p!r})",
        "np.asarray(np.tensordot({0}.astype('{d}'), {1}.astype('{d}'), axes={p!r}))",
    ),
    "batched_dot": (2, "tt.batched_dot({0}, {1})", "bdot({0}, {1}, '{d}')"),
    "diag": (1, "tt.diag({0})", "np.diag({0})"),
    "diagonal": (1, "tt.diagonal({0}, offset={p})", "np.diagonal({0}, offset={p}).copy()"),
    # The extra ops (EXTRA_OPS, drawn with extra=True only): more trigonometry, the special
    # functions (scipy's values), log1mexp, arctan2; axes squeezed, flipped, rolled and
    # swapped; triangles, a diagonal set; ptp, logsumexp and diff along an axis; sorted
    # positions, and lengths known only at run time (nonzero positions, unique values,
    # counts).
    **{f: _unary(f) for f in ("cos", "tan", "deg2rad", "rad2deg")},
    **{
        f: (1, f"tt.{f}({{0}})", f"ew(lambda v: special({f!r}, v), '{{d}}', {{0}})")
        for f in ("gammaln", "psi", "gamma", "erfinv", "erfcinv", "i0", "i1", "j0", "j1")
    },
    "log1mexp": (1, "tt.log1mexp({0})", "log1mexp({0}, '{d}')"),
    # The activations of tensor.nnet: relu as Theano writes it, 0.5 * (x + |x|), NaN at
    # -inf, where FAST_RUN's stabilize rewrite gives the limit (classified by tag);
    # softsign an op of its own, its limits at +-inf.
    "relu": (1, "tt.nnet.relu({0})", "ew(lambda v: 0.5 * (v + np.abs(v)), '{d}', {0})"),
    "elu": (1, "tt.nnet.elu({0})", "ew(lambda v: np.where(v > 0, v, np.expm1(v)), '{d}', {0})"),
    "softsign": (
        1,
        "tt.nnet.softsign({0})",
        "ew(lambda v: np.where(np.isinf(v), np.sign(v), v / (1 + np.abs(v))), '{d}', {0})",
    ),
    "hard_sigmoid": (
        1,
        "tt.nnet.hard_sigmoid({0})",
        "ew(lambda v: np.clip(v * 0.2 + 0.5, 0, 1), '{d}', {0})",
    ),
    "arctan2": _binary("tt.arctan2({0}, {1})", "arctan2"),
    # p: the broadcastable axes (those squeeze removes; an axis of length 1 at run time
    # that is not declared broadcastable stays).
    "squeeze": (1, "tt.squeeze({0})", "np.squeeze({0}, axis={p!r})"),
    "flip": (1, "tt.flip({0}, axis={p})", "np.flip({0}, axis={p}).copy()"),
    "roll": (1, "tt.roll({0}, {p[0]}, axis={p[1]})", "np.roll({0}, {p[0]}, axis={p[1]})"),
    "swapaxes": (
        1,
        "tt.swapaxes({0}, {p[0]}, {p[1]})",
        "np.swapaxes({0}, {p[0]}, {p[1]}).copy()",
    ),
    "tril": (1, "tt.tril({0}, k={p})", "np.tril({0}, k={p})"),
    "triu": (1, "tt.triu({0}, k={p})", "np.triu({0}, k={p})"),
    "fill_diagonal": (2, "tt.fill_diagonal({0}, {1})", "filldiag({0}, {1})"),
    "ptp": (1, "tt.ptp({0}, axis={p})", "np.asarray(np.ptp({0}, axis={p}))"),
    "logsumexp": (
        1,
        "tt.logsumexp({0}, axis={p[0]}, keepdims={p[1]})",
        "lse({0}, {p!r}, '{d}')",
    ),
    "diff": (1, "tt.diff({0}, n={p[0]}, axis={p[1]})", "np.diff({0}, n={p[0]}, axis={p[1]})"),
    "searchsorted": (2, "tt.searchsorted(tt.sort({0}), {1})", "np.searchsorted(np.sort({0}), {1})"),
    "flatnonzero": (1, "tt.flatnonzero({0})", "np.flatnonzero({0})"),
    "unique": (1, "tt.unique({0})", "np.unique({0})"),
    "var1": (
        1,
        "tt.var({0}, axis={p[0]}, ddof=1, keepdims={p[1]})",
        "var1({0}, {p!r}, '{d}')",
    ),
    "isclose": (2, "tt.isclose({0}, {1})", "np.isclose({0}, {1})"),
    # Slices of negative steps set or incremented (by a 0-d value): set_sub's and
    # inc_sub's, under names of their own so that the default draw keeps its slices.
    "set_subr": _SET_SUB,
    "inc_subr": _INC_SUB,
    # A matrix read and incremented at pairs of index vectors (broadcast together; a
    # repeated pair adds twice).
    "adv2": (
        3,
        "{0}[{1} % {0}.shape[0], {2} % {0}.shape[1]]",
        "{0}[{1} % np.int64({0}.shape[0]), {2} % np.int64({0}.shape[1])]",
    ),
    "adv2_inc": (
        4,
        "tt.inc_subtensor({0}[{1} % {0}.shape[0], {2} % {0}.shape[1]], {3})",
        "advinc2({0}, {1} % np.int64({0}.shape[0]), {2} % np.int64({0}.shape[1]), {3})",
    ),
    "arange": (1, "tt.arange({0}.shape[0])", "np.arange({0}.shape[0])"),
    "nonzero_values": (1, "tt.nonzero_values({0})", "{0}.reshape(-1)[np.flatnonzero({0})]"),
    # Counts in the input's dtype, as Theano's (an alloc of its dtype incremented).
    "bincount": (1, "tt.bincount({0} % 5)", "np.bincount({0} % 5).astype('{d}')"),
}
#: Ops left out of gradient graphs: non-finite values or kinks in [-1, 1] (finite
#: differences are meaningless there), steps, or values that overflow.
NO_GRAD = frozenset(
    {"div", "floordiv", "mod", "clip", "log", "sqrt", "grow", "cast_grow", "true_div", "inv"}
    | {"pow", "powcf", "log1p", "log2", "log10", "arcsin", "arccos", "arctanh", "arccosh"}
    # The extra ops' poles and domains in [-1, 1] (gammaln, psi and gamma at 0 and -1,
    # erfinv at +-1), kinks at ties (ptp), and integer results of positions and counts.
    | {"gammaln", "psi", "gamma", "erfinv", "erfcinv", "log1mexp", "ptp", "searchsorted"}
    | {"flatnonzero", "unique", "bincount", "isclose", "arange", "nonzero_values"}
)
#: Elementwise ops of two operands that broadcast against each other.
BINARY = frozenset(
    {"add", "sub", "mul", "maximum", "minimum", "div", "floordiv", "mod", "fill", "second"}
    | {"lt", "le", "gt", "ge", "eq", "neq", "and", "or", "xor", "true_div", "pow", "ipow"}
    | {"arctan2"}
)
#: Elementwise ops of one operand (its dims kept).
UNARY = frozenset(
    {"tanh", "sin", "neg", "abs", "sqr", "exp", "sigmoid", "scale", "grow", "log", "sqrt"}
    | {"invert", "cast", "cast_in_range", "cast_grow", "log1p", "expm1", "exp2", "log2"}
    | {"log10", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "arcsin", "arccos", "arctan"}
    | {"floor", "ceil", "trunc", "erf", "erfc", "round_even", "round_away", "iround", "sgn"}
    | {"isnan", "isinf", "inv", "powc", "powcf", "softplus"}
    | {"cos", "tan", "deg2rad", "rad2deg", "gammaln", "psi", "gamma", "erfinv", "erfcinv"}
    | {"i0", "i1", "j0", "j1", "log1mexp", "relu", "elu", "softsign", "hard_sigmoid"}
)
#: Reductions of p = (axis, keepdims) (``sumd``: and a dtype).
REDUCTIONS = frozenset(
    {"prod", "mean", "var", "std", "min", "maxk", "argmax", "argmin", "all", "any", "sumd"}
    | {"suma", "logsumexp"}
)
#: Ops whose params are chosen from their operands' dims: none fits, no graph.
NEEDS_PARAM = frozenset(
    {"cast", "cast_in_range", "cast_grow", "alloc", "tensordot", "reshape", "diagonal", "concat"}
    | {"join", "sumd", "suma", "stack", "tile", "swapaxes", "tril", "triu", "diff"}
    | {"set_subr", "inc_subr", "var1"}
)
#: Products whose non-finite values depend on the kernel (:data:`DOT_NONFINITE`): numpy's
#: ``tensordot(0.0, [inf, 1], axes=0)`` is ``[0, 0]`` (BLAS skips a zero factor), an
#: elementwise product's ``[nan, 0]``.
PRODUCTS = frozenset({"dot", "tensordot", "batched_dot", "outer"})
#: Ops whose derivative is 0 but for steps (where finite differences measure the step).
STEPS = {
    "floor": 0.0,
    "ceil": 0.0,
    "trunc": 0.0,
    "round_even": 0.5,
    "round_away": 0.5,
    "iround": 0.5,
    "sgn": None,
    "mask": None,
    "mask_set": None,
    "mask_inc": None,
}
#: The dtypes of an index vector (whose modulo by a length stays an integer).
INDEX_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "bool")
#: How much more often than the others an op is drawn (those that need matching
#: operands, and the ones the issue-28 bugs hid in).
OP_WEIGHTS = {
    "dot": 3.0,
    "set_sub": 3.0,
    "inc_sub": 3.0,
    "switch": 2.5,
    "fill": 2.0,
    "second": 1.5,
    "alloc": 2.0,
    "cast": 3.0,
    "cast_in_range": 1.5,
    "cast_grow": 2.0,
    "take": 4.0,
    "takec": 1.5,
}
#: The fuzzer's first ops (arithmetic, comparisons, casts, switch, fill/alloc,
#: sum/max, dot, slices and indices): the rest of :data:`OPS` is drawn :data:`MORE_WEIGHT`
#: as often, so that these keep most of the draws (integer and cast graphs need them).
CORE_OPS = frozenset(
    {"const", "tanh", "sin", "neg", "abs", "sqr", "exp", "sigmoid", "scale", "grow", "add"}
    | {"sub", "mul", "maximum", "minimum", "lt", "le", "gt", "ge", "eq", "neq", "and", "or"}
    | {"xor", "invert", "switch", "fill", "second", "alloc", "sum", "max", "dot", "slice"}
    | {"index0", "take", "takec", "set_sub", "inc_sub", "T", "addaxis", "flatten", "cast"}
    | {"cast_in_range", "cast_grow", "div", "floordiv", "mod", "clip", "log", "sqrt"}
)
MORE_WEIGHT = 0.5
#: How often each of :data:`EXTRA_OPS` is drawn (with ``extra=True``), as often as the
#: core ops: they are what such a run is for.
EXTRA_WEIGHT = 1.0
#: What constants hold, by dtype kind; a share of the float ones non-finite.
CONST_FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e30, float("nan"), float("inf"), float("-inf"))
CONST_INTS = (0, 1, -1, 3, "min", "max")
#: The value distributions (``values`` of :func:`generate` and :func:`input_value`):
#: ``"default"``, small integers (the draw every seed cited in notes means), or
#: ``"wide"``, integers across each dtype's range where sums and products wrap.
VALUES = ("default", "wide")
#: Ops drawn only with ``lazy=True`` (``--lazy``): added after seeds were cited in notes,
#: whose graphs the default draw keeps.
LAZY_OPS = frozenset({"ifelse"})
#: Ops drawn only with ``extra=True`` (``--extra-ops``): added after seeds were cited in
#: notes, whose graphs the default draw keeps.
EXTRA_OPS = frozenset(
    {"cos", "tan", "deg2rad", "rad2deg", "gammaln", "psi", "gamma", "erfinv", "erfcinv"}
    | {"i0", "i1", "j0", "j1", "log1mexp", "arctan2", "squeeze", "flip", "roll", "swapaxes"}
    | {"tril", "triu", "fill_diagonal", "ptp", "logsumexp", "diff", "searchsorted"}
    | {"flatnonzero", "unique", "bincount", "relu", "elu", "softsign", "hard_sigmoid"}
    | {"var1", "isclose", "set_subr", "inc_subr", "adv2", "adv2_inc", "arange"}
    | {"nonzero_values"}
)
#: The lengths of a small recipe's two calls (``lengths`` of :func:`run`): ``"default"``,
#: :data:`SIZE_SETS`'s first set (what every cited seed means), or ``"edge"``,
#: :data:`EDGE_SIZES`.
LENGTHS = ("default", "edge")
#: The ``"edge"`` lengths: in the first call ``"a"`` is 1, in the second 0 and ``"b"`` is
#: 1, on axes not declared broadcastable (which an engine must not take for declared
#: ones), and empty values, whose reductions numpy refuses (the engine must raise too,
#: see :func:`_check_engine`) or gives their identities.
EDGE_SIZES = ({"a": 1, "b": 3}, {"a": 0, "b": 1})
#: The dtypes' weights of a ``"wide"`` graph: every integer and bool more often than
#: floats (whose operands mix with them); in an :data:`INTEGER_SHARE` of the graphs,
#: :data:`INTEGER_WEIGHTS`.
WIDE_WEIGHTS = (0.1, 0.1) + (0.08,) * len(INTS) + (0.16,)
#: How much more often a ``"wide"`` graph draws the ops where integers wrap or divide.
WIDE_OP_FACTORS = {
    **dict.fromkeys(("add", "sub", "mul", "div", "true_div", "floordiv", "mod"), 6.0),
    **dict.fromkeys(("neg", "abs", "sqr", "scale", "inv", "ipow", "powc", "sgn"), 3.0),
    **dict.fromkeys(("invert", "cast", "maximum", "minimum", "switch", "clip"), 2.0),
    **dict.fromkeys(("prod", "cumsum", "cumprod", "sumd", "suma", "mean", "sum"), 2.0),
}
#: The share of a ``"wide"`` graph's ops that take the last node as their first operand:
#: chains such as ``(x / y) * x``, which the product canonizer regrouped into an int8
#: ``x * x`` that wrapped.
WIDE_CHAIN = 0.5


@dataclass
class Recipe:
    """A random graph: ``nodes`` (inputs, the shared variable, ops), ``outputs`` (node
    indices), ``update`` (the node giving the shared variable's next value, or None),
    the ``seed`` of the input values, whether they include non-finite ones, which
    of :data:`SIZE_SETS` gives the lengths (``lengths``: :data:`EDGE_SIZES` instead of
    the first, :data:`LENGTHS`), the ``values`` distribution (:data:`VALUES`) of its
    integer inputs and constants, and how its inputs' arrays are laid out in memory
    (``layouts``, :data:`LAYOUTS`)."""

    nodes: list
    outputs: list
    update: int | None = None
    seed: int = 0
    dims: list = field(default_factory=list)  # per node, for generation and shrinking
    dtypes: list = field(default_factory=list)
    nonfinite: bool = False  # the inputs hold NaN, infinities and extreme values
    sizes: int = 0  # the index of the lengths in SIZE_SETS
    values: str = "default"  # the value distribution (VALUES)
    lengths: str = "default"  # a small recipe's lengths (LENGTHS)
    layouts: str = "default"  # the inputs' memory layouts (LAYOUTS)

    @property
    def shared_index(self):
        return next((k for k, n in enumerate(self.nodes) if n[0] == "shared"), None)


def _name(k):
    return f"v{k}"


def _code(node, which, dtype=None):
    op, args, param = node
    _, gtmpl, ntmpl = OPS[op]
    tmpl = gtmpl if which == "graph" else ntmpl
    names = [_name(a) for a in args]
    if callable(tmpl):
        return tmpl(names, param, dtype)
    return tmpl.format(*names, p=param, d=dtype)


def _input_type(dims, dtype):
    shape = tuple(1 if d == 1 else None for d in dims)
    return f"tt.TensorType({dtype!r}, shape={shape!r})"


def _is_leaf(node):
    return node[0] in ("input", "shared")


def _nonfinite_const(node):
    return node[0] == "const" and isinstance(node[2][0], float) and not np.isfinite(node[2][0])


# -- generation ----------------------------------------------------------------------


def _broadcast(d1, d2):
    n = max(len(d1), len(d2))
    d1, d2 = (1,) * (n - len(d1)) + tuple(d1), (1,) * (n - len(d2)) + tuple(d2)
    out = []
    for x, y in zip(d1, d2):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def _fits_into(d0, d1):
    """Whether a value of dims ``d0`` broadcasts to dims ``d1`` (as ``alloc`` needs)."""
    return len(d0) <= len(d1) and _broadcast(d0, d1) == tuple(d1)


def _result_dims(op, dims, dtypes, param):
    """The dims of ``op`` on args of ``dims`` and ``dtypes`` with ``param``; None when
    the op does not apply."""
    if op == "const":
        return ()
    d0 = dims[0]
    if op in UNARY:
        return d0
    if op == "pow" and not set(dtypes) & set(FLOATS):
        return None  # an integer's negative power: numpy refuses it
    if op == "ipow" and (set(dtypes) & set(FLOATS) or dtypes[1] == "uint64"):
        return None  # uint64 % 4 is float64 in the graph (the 4 an int8), uint64 in numpy
    if op in BINARY:
        return _broadcast(d0, dims[1])
    if op in ("switch", "where"):
        d = _broadcast(d0, dims[1])
        return None if d is None else _broadcast(d, dims[2])
    if op == "ifelse":  # the condition is reduced to one bool: only the branches broadcast
        return _broadcast(dims[1], dims[2])
    if op == "alloc":
        return tuple(dims[1]) if dims[1] and _fits_into(d0, dims[1]) else None
    if op == "clip":
        # The bounds broadcast to x's shape, as numpy's result has it.
        return d0 if _broadcast(d0, dims[1]) == tuple(d0) else None
    if op in ("sum", "max"):
        axes = range(len(d0)) if param is None else [param]
        if param is not None and param >= len(d0):
            return None
        if op == "max" and any(d0[a] not in BASE for a in axes):
            return None  # a sliced axis may be empty
        return () if param is None else d0[:param] + d0[param + 1 :]
    if op == "dot":
        d1 = dims[1]
        if not (1 <= len(d0) <= 2 and 1 <= len(d1) <= 2) or d0[-1] != d1[0]:
            return None
        return d0[:-1] + d1[1:]
    if op == "slice":
        if not d0 or d0[0] == 1:
            return None
        return ((d0[0] if param == "::-1" else f"{d0[0]}[{param}]"),) + d0[1:]
    if op == "index0":
        return d0[1:] if d0 and d0[0] in BASE else None
    if op == "take":
        if not d0 or len(dims[1]) != 1 or dtypes[1] not in INDEX_DTYPES:
            return None
        return tuple(dims[1]) + tuple(d0[1:])
    if op == "takec":
        # A length of its own: a token no other dims share ("#3": three rows).
        return (f"#{len(param)}",) + tuple(d0[1:]) if d0 else None
    if op in ("set_sub", "inc_sub", "set_subr", "inc_subr"):
        if not d0 or d0[0] == 1 or dims[1] != ():
            return None
        if np.dtype(dtypes[1]).itemsize > np.dtype(dtypes[0]).itemsize or (
            dtypes[1] in FLOATS and dtypes[0] not in FLOATS
        ):
            return None  # a downcast, refused by the op (or out of range)
        return d0
    if op == "T":
        return d0[::-1] if len(d0) == 2 else None
    if op == "addaxis":
        return (1,) + d0 if len(d0) <= 2 else None
    if op == "flatten":
        return (f"({d0[0]}*{d0[1]})",) if len(d0) == 2 and 1 not in d0 else None
    return _result_dims_more(op, dims, dtypes, param)


def _flat(d):
    """The token of a value of dims ``d`` flattened."""
    return d[0] if len(d) == 1 and d[0] != 1 else "(" + "*".join(str(t) for t in d) + ")"


def _reduced(d, axis, keepdims):
    axes = range(len(d)) if axis is None else [axis % len(d)]
    if keepdims:
        return tuple(1 if k in axes else t for k, t in enumerate(d))
    return tuple(t for k, t in enumerate(d) if k not in axes)


def _masked(d, axis):
    """Whether ``axis`` (None: every axis) of dims ``d`` is a masked length, which may be
    0: nothing for a max to take."""
    axes = range(len(d)) if axis is None else [axis % len(d)] if d else []
    return any("?" in str(d[a]) for a in axes)


def _tensordot_dims(d0, d1, axes):
    """The dims of ``tensordot`` with ``axes`` (an int or a pair of lists); None when
    the contracted lengths differ."""
    if isinstance(axes, int):
        if axes > min(len(d0), len(d1)):
            return None
        a0, a1 = list(range(len(d0) - axes, len(d0))), list(range(axes))
    else:
        a0, a1 = axes
    if any(d0[i] != d1[j] for i, j in zip(a0, a1)):
        return None
    keep = tuple(t for k, t in enumerate(d0) if k not in a0)
    return keep + tuple(t for k, t in enumerate(d1) if k not in a1)


def _can_downcast(to, frm):
    """Whether writing a ``frm`` value into a ``to`` array is a downcast the op refuses."""
    return np.dtype(frm).itemsize > np.dtype(to).itemsize or (frm in FLOATS and to not in FLOATS)


def _result_dims_more(op, dims, dtypes, param):
    d0 = dims[0]
    if op in PRODUCTS and len(dtypes) == 2 and not set(dtypes) <= set(FLOATS):
        wide = [d for d in dtypes if d in INTS and np.dtype(d).itemsize >= 4]
        if wide and np.result_type(*dtypes).kind == "f":
            # Sums of products of integers near 2**63, in float64: cancellation leaves
            # the order of additions' rounding, far beyond any relative tolerance.
            return None
    if op in ("softmax", "logsoftmax"):
        return d0 if 1 <= len(d0) <= 2 else None
    if op in REDUCTIONS:
        axis, keepdims = param[:2]
        if not d0 and axis is not None:
            return None
        if op in ("min", "maxk", "argmax", "argmin") and _masked(d0, axis):
            return None
        return _reduced(d0, axis, keepdims)
    if op in ("cumsum", "cumprod", "sort", "argsort"):
        if param is None:
            return (_flat(d0),) if d0 else ("#1",)
        return d0 if d0 and -len(d0) <= param < len(d0) else None
    if op in ("concat", "join"):
        d1 = dims[1]
        if not d0 or len(d0) != len(d1) or not 0 <= param < len(d0):
            return None
        if any(x != y for k, (x, y) in enumerate(zip(d0, d1)) if k != param):
            return None
        return d0[:param] + (f"({d0[param]}+{d1[param]})",) + d0[param + 1 :]
    if op == "stack":
        return d0[:param] + ("#2",) + d0[param:] if d0 == dims[1] and len(d0) <= 2 else None
    if op == "reshape":
        if param == "swap":
            return d0[::-1] if len(d0) == 2 else None
        if not d0:
            return None
        flat = _flat(d0)
        return {"flat": (flat,), "row": (1, flat), "col": (flat, 1)}[param]
    if op == "repeat":
        r, axis = param
        if axis is None:
            return (f"({_flat(d0)}*{r})",) if d0 else (f"#{r}",)
        return d0[:axis] + (f"({d0[axis]}*{r})",) + d0[axis + 1 :] if axis < len(d0) else None
    if op == "tile":
        if not d0 or len(d0) != len(param):
            return None
        return tuple(t if r == 1 else f"({t}*{r})" for t, r in zip(d0, param))
    if op in ("adv_inc", "adv_set"):
        if not d0 or not _fits_into(dims[1], d0[1:]) or _can_downcast(dtypes[0], dtypes[1]):
            return None
        return d0
    if op == "take1":
        if len(d0) != 2 or len(dims[1]) != 1 or dtypes[1] not in INDEX_DTYPES:
            return None
        return (d0[0], dims[1][0])
    if op in ("mask", "flatnonzero", "unique", "nonzero_values"):
        return (f"?{param}:{_flat(d0)}",) if d0 else None
    if op in ("mask_set", "mask_inc"):
        if not d0 or dims[1] != () or _can_downcast(dtypes[0], dtypes[1]):
            return None
        return d0
    if op == "outer":
        return (d0[0], dims[1][0]) if len(d0) == 1 and len(dims[1]) == 1 else None
    if op == "tensordot":
        out = _tensordot_dims(d0, dims[1], param)
        return out if out is not None and len(out) <= 3 else None
    if op == "batched_dot":
        d1 = dims[1]
        if not d0 or not d1 or d0[0] != d1[0] or (len(d0) == 1) != (len(d1) == 1):
            return None
        if len(d0) == 1:
            return d0
        if len(d0) > 3 or len(d1) > 3 or d0[-1] != d1[1]:
            return None
        return d0[:-1] + d1[2:]
    if op == "diag":
        if len(d0) == 1:
            return (d0[0], d0[0])
        return (f"min({d0[0]},{d0[1]})",) if len(d0) == 2 else None
    if op == "diagonal":
        return (f"dg({d0[0]},{d0[1]},{param})",) if len(d0) == 2 else None
    return _result_dims_extra(op, dims, dtypes, param)


def _result_dims_extra(op, dims, dtypes, param):
    """:func:`_result_dims` of the ops of :data:`EXTRA_OPS` that are not elementwise."""
    d0 = dims[0]
    if op == "squeeze":
        return tuple(t for t in d0 if t != 1)
    if op in ("flip", "roll"):
        return d0
    if op == "swapaxes":
        i, j = param
        d = list(d0)
        d[i], d[j] = d[j], d[i]
        return tuple(d)
    if op in ("tril", "triu"):
        return d0 if len(d0) == 2 else None
    if op == "fill_diagonal":
        if len(d0) != 2 or dims[1] != () or _can_downcast(dtypes[0], dtypes[1]):
            return None
        return d0
    if op == "ptp":
        if (not d0 and param is not None) or _masked(d0, param):
            return None
        return _reduced(d0, param, False)
    if op == "diff":
        n, axis = param
        return d0[:axis] + (f"df({d0[axis]},{n})",) + d0[axis + 1 :] if d0 else None
    if op == "searchsorted":
        return tuple(dims[1]) if len(d0) == 1 else None
    if op == "bincount":
        return (f"?{param}:#5",) if len(d0) == 1 and dtypes[0] in INTS else None
    if op == "var1":
        axis, keepdims = param
        if not d0 or (axis is not None and not -len(d0) <= axis < len(d0)):
            return None
        return _reduced(d0, axis, keepdims)
    if op == "isclose":
        return _broadcast(d0, dims[1]) if set(dtypes) <= set(FLOATS) else None
    if op in ("adv2", "adv2_inc"):
        if len(d0) != 2 or any(
            len(d) != 1 or dt not in INDEX_DTYPES for d, dt in zip(dims[1:3], dtypes[1:3])
        ):
            return None
        pairs = _broadcast(dims[1], dims[2])
        if op == "adv2":
            return pairs
        if pairs is None or dims[3] not in ((), pairs) or _can_downcast(dtypes[0], dtypes[3]):
            return None
        return d0
    if op == "arange":
        return (d0[0],) if d0 else None
    raise KeyError(op)


def _const_param(rng, dtype, values="default"):
    kind = np.dtype(dtype).kind
    if values == "wide" and kind in "iu":
        table = wrap_values(dtype)
        return (int(table[int(rng.integers(len(table)))]), dtype)
    if kind == "b":
        return (bool(rng.random() < 0.5), dtype)
    if kind == "f":
        # Non-finite in about a sixth of the constants.
        finite = [v for v in CONST_FLOATS if np.isfinite(v)]
        pool = CONST_FLOATS if rng.random() < 0.5 else finite
        return (float(pool[int(rng.integers(len(pool)))]), dtype)
    info = np.iinfo(dtype)
    v = CONST_INTS[int(rng.integers(len(CONST_INTS)))]
    v = {"min": info.min, "max": info.max}.get(v, v)
    if v < info.min:
        v = info.max
    return (int(v), dtype)


def _param(op, rng, dims, dtypes, values="default"):
    if op == "scale":
        return float(rng.choice([0.5, -1.5, 2.0]))
    if op == "grow":
        return float(rng.choice([7.5, -300.0, 65536.5, 3e9]))
    if op == "clip":
        return float(rng.choice([0.25, 0.75]))
    if op in ("sum", "max"):
        n = len(dims[0])
        return None if n == 0 or rng.random() < 0.4 else int(rng.integers(n))
    if op == "slice":
        return str(rng.choice(["1:", "::2", "::-1"]))
    if op in ("set_sub", "inc_sub"):
        return str(rng.choice(["1:", "::2", ":"]))
    if op == "addaxis":
        return ", ".join(["'x'"] + [str(k) for k in range(len(dims[0]))])
    if op == "cast":
        # The target's kind first (a float, an integer, bool), then its dtype.
        src = dtypes[0]
        kinds = [FLOATS, INTS, ("bool",)]
        choices = [d for d in kinds[int(rng.choice(3, p=[0.4, 0.45, 0.15]))] if d != src]
        return str(choices[int(rng.integers(len(choices)))]) if choices else None
    if op == "cast_in_range":
        return str(INTS[int(rng.integers(len(INTS)))]) if dtypes[0] in FLOATS else None
    if op == "cast_grow":
        if dtypes[0] not in FLOATS:
            return None
        factor = float(rng.choice([300.0, -3e9, 1e10, 2.0**70]))
        return (factor, str(INTS[int(rng.integers(len(INTS)))]))
    if op == "alloc":
        return tuple(d == 1 for d in dims[1])
    if op in ("takec", "adv_inc", "adv_set"):
        return tuple(int(i) for i in rng.integers(-3, 6, int(rng.integers(2, 6))))
    return _param_more(op, rng, dims, dtypes, values)


def _axis(rng, n, none_share=0.3):
    """An axis of ``n`` (a negative one in a share), or None."""
    if n == 0 or rng.random() < none_share:
        return None
    return int(rng.integers(-n, n)) if rng.random() < 0.25 else int(rng.integers(n))


def _param_more(op, rng, dims, dtypes, values="default"):
    n = len(dims[0])
    if op == "powc":
        return int(rng.choice([0, 1, 2, 3]))
    if op == "powcf":
        pool = [-1, -2, 0.5, -0.5, 1.5] if dtypes[0] in FLOATS else [0.5, -0.5, 1.5]
        return pool[int(rng.integers(len(pool)))]
    if op in REDUCTIONS:
        p = (_axis(rng, n), bool(rng.random() < 0.4))
        if op == "sumd":
            wider = {"float32": "float64", "float64": "float64", "bool": "int32"}
            wider.update({"uint64": "uint64"})
            r = rng.random()
            dt = wider.get(dtypes[0], "int64") if r < 0.6 else "float64"
            if values == "wide" and 0.6 <= r < 0.75 and dtypes[0] not in FLOATS:
                dt = "bool"  # integers summed to a bool: whether any is nonzero
            p += (dt,)
        if op == "suma":
            # Wider, or (integers) narrower: an int8 accumulator wraps; with wide values,
            # a bool one too (a logical or). The default draw is the one cited seeds mean.
            if dtypes[0] in FLOATS:
                return p + ("float64",)
            accs = ["int8", "int16", "int64", "uint32"] + ["bool"] * (values == "wide")
            return p + (str(rng.choice(accs)),)
        return p
    if op in ("cumsum", "cumprod", "sort", "argsort"):
        return _axis(rng, n)
    if op in ("concat", "join"):
        differ = [k for k, (x, y) in enumerate(zip(dims[0], dims[1])) if x != y]
        if len(dims[0]) != len(dims[1]) or len(differ) > 1 or n == 0:
            return None
        return differ[0] if differ else int(rng.integers(n))
    if op == "stack":
        return int(rng.integers(n + 1))
    if op == "reshape":
        choices = {0: [], 1: ["row", "col"], 2: ["swap", "flat", "row", "col"]}.get(n, [])
        return str(rng.choice(choices)) if choices else None
    if op == "repeat":
        return (int(rng.choice([2, 3])), _axis(rng, n, 0.3) if n else None)
    if op == "tile":
        return tuple(int(r) for r in rng.choice([1, 2, 3], n)) if n else None
    if op in ("mask", "flatnonzero", "unique", "nonzero_values", "bincount"):
        return int(rng.integers(1_000_000))  # names its length's token
    if op == "tensordot":
        d0, d1 = dims
        cands = [k for k in (0, 1, 2) if _tensordot_dims(d0, d1, k) is not None]
        cands += [[[i], [j]] for i in range(len(d0)) for j in range(len(d1)) if d0[i] == d1[j]]
        cands = [c for c in cands if len(_tensordot_dims(d0, d1, c)) <= 3]
        return cands[int(rng.integers(len(cands)))] if cands else None
    if op == "diagonal":
        return int(rng.choice([0, 1, -1]))
    return _param_extra(op, rng, dims)


def _param_extra(op, rng, dims):
    """:func:`_param` of the ops of :data:`EXTRA_OPS`."""
    d0 = dims[0]
    n = len(d0)
    if op == "squeeze":
        return tuple(k for k, t in enumerate(d0) if t == 1)
    if op in ("flip", "ptp"):
        return _axis(rng, n)
    if op == "roll":
        return (int(rng.integers(-3, 5)), _axis(rng, n))
    if op == "swapaxes":
        return tuple(int(k) for k in rng.choice(n, 2, replace=False)) if n >= 2 else None
    if op in ("tril", "triu"):
        return int(rng.choice([-1, 0, 1])) if n == 2 else None
    if op == "diff":
        return (int(rng.choice([1, 2])), _axis(rng, n, 0.0)) if n else None
    if op == "var1":
        return (_axis(rng, n), bool(rng.random() < 0.4)) if n else None
    if op in ("set_subr", "inc_subr"):
        return str(rng.choice(["::-1", "::-2", "-2::-1", "1:-1", "-1:"]))
    return None


def _length(token, sizes):
    """The length of the dims token ``token`` at ``sizes`` ("a[1:]", "(a*b)", ...)."""
    if token == 1:
        return 1

    class Len(int):
        def __getitem__(self, sl):
            return Len(len(range(self)[sl]))

        def __mul__(self, other):
            return Len(int(self) * int(other))

        def __add__(self, other):
            return Len(int(self) + int(other))

        __rmul__, __radd__ = __mul__, __add__

    def dg(n, m, offset):
        """The length of a diagonal at ``offset`` of an ``(n, m)`` matrix."""
        return Len(max(0, min(n - max(-offset, 0), m - max(offset, 0))))

    # "?7:(a*b)": a masked length, at most "(a*b)"; "#3": a constant length.
    text = re.sub(r"\?\d+:", "", str(token))
    text = re.sub(r"#(\d+)", r"Len(\1)", text)
    text = re.sub(r"(?<![\w.])(\d+)(?![\w.])", r"Len(\1)", text)

    def df(n, k):
        """The length of ``diff(..., n=k)`` along an axis of length ``n``."""
        return Len(max(0, n - k))

    env = {"a": Len(sizes["a"]), "b": Len(sizes["b"]), "Len": Len, "min": min, "dg": dg, "df": df}
    return int(eval(text, env))


def _elements(dims, sizes_index):
    return max(
        int(np.prod([_length(t, sz) for t in dims], dtype=np.int64))
        for sz in SIZE_SETS[sizes_index]
    )


def _sample(dims, dtype):
    """A small stand-in value for checking numpy's side of an op at generation."""
    shape = tuple(1 if d == 1 else _length(d, SIZES[0]) for d in dims)
    return np.full(shape, 2, dtype)


def _pick(rng, candidates):
    return candidates[int(rng.integers(len(candidates)))] if candidates else None


def _args(op, rng, nodes, dims, dtypes, chain=0.0):
    """Arguments for ``op`` among the ``nodes`` so far (of ``dims`` and ``dtypes``);
    None when none fit. Binary ops prefer operands of other dims that broadcast
    against the first (``(1, n)`` against ``(m, 1)``), switch branches of other dtypes.
    ``chain``: the share of ops whose first operand is the last node (long chains of
    ops, where a rewrite regroups the products and quotients of several)."""
    n = len(dims)
    arity = OPS[op][0]
    args = [int(rng.integers(n)) for _ in range(arity)]
    if chain and arity and rng.random() < chain:
        args[0] = n - 1
    if op in ("switch", "where"):
        # The condition: another switch's (switches of one condition merge), a bool, or
        # any value (not 0).
        conds = [node[1][0] for node in nodes if node[0] in ("switch", "where")]
        bools = [k for k in range(n) if dtypes[k] == "bool"]
        r = rng.random()
        if conds and r < 0.3:
            args[0] = _pick(rng, conds)
        elif bools and r < 0.7:
            args[0] = _pick(rng, bools)
    if op == "cast":
        # Integers and bools are fewer than floats: cast them as often.
        discrete = [k for k in range(n) if dtypes[k] not in FLOATS]
        args[0] = _pick(rng, discrete) if discrete and rng.random() < 0.75 else args[0]
    elif op in ("cast_in_range", "cast_grow"):
        floats = [k for k in range(n) if dtypes[k] in FLOATS]
        args[0] = _pick(rng, floats) if floats else args[0]
    elif op in ("take", "take1"):
        index = [k for k, d in enumerate(dims) if len(d) == 1 and dtypes[k] in INDEX_DTYPES]
        if not index:
            return None
        args[1] = _pick(rng, index)
        if op == "take1":
            args[0] = _pick(rng, [k for k, d in enumerate(dims) if len(d) == 2])
            if args[0] is None:
                return None
    elif op == "dot" and dims[args[0]]:
        fits = [k for k, d in enumerate(dims) if d and d[0] == dims[args[0]][-1]]
        args[1] = _pick(rng, fits) if fits else args[1]
    elif op in ("concat", "join", "stack"):
        d0 = dims[args[0]]
        fits = [
            k
            for k, d in enumerate(dims)
            if len(d) == len(d0) and sum(x != y for x, y in zip(d, d0)) <= (op != "stack")
        ]
        args[1] = _pick(rng, fits)
    elif op in ("outer", "tensordot", "batched_dot"):
        d0 = dims[args[0]]
        fits = [k for k, d in enumerate(dims) if set(d) & set(d0)]
        if op == "outer":
            fits = [k for k, d in enumerate(dims) if len(d) == 1]
        elif op == "batched_dot":
            fits = [k for k, d in enumerate(dims) if d and d0 and d[0] == d0[0]]
        args[1] = _pick(rng, fits) if fits and rng.random() < 0.8 else args[1]
    elif op in ("adv_inc", "adv_set"):
        d0 = dims[args[0]]
        fits = [k for k, d in enumerate(dims) if d0 and _fits_into(d, d0[1:])]
        if not fits:
            return None
        args[1] = _pick(rng, fits)
    elif op in ("set_sub", "inc_sub", "mask_set", "mask_inc", "set_subr", "inc_subr"):
        zero_d = [k for k, d in enumerate(dims) if d == ()]
        if not zero_d:
            return None
        args[1] = _pick(rng, zero_d)
    elif op == "searchsorted":
        args[0] = _pick(rng, [k for k, d in enumerate(dims) if len(d) == 1])
        if args[0] is None:
            return None
    elif op == "fill_diagonal":
        args[0] = _pick(rng, [k for k, d in enumerate(dims) if len(d) == 2])
        args[1] = _pick(rng, [k for k, d in enumerate(dims) if d == ()])
        if args[0] is None or args[1] is None:
            return None
    elif op in ("adv2", "adv2_inc"):
        args[0] = _pick(rng, [k for k, d in enumerate(dims) if len(d) == 2])
        index = [k for k, d in enumerate(dims) if len(d) == 1 and dtypes[k] in INDEX_DTYPES]
        if args[0] is None or not index:
            return None
        args[1] = _pick(rng, index)
        same = [k for k in index if _broadcast(dims[k], dims[args[1]]) is not None]
        args[2] = _pick(rng, same)
        if op == "adv2_inc":
            # A 0-d value, or one of the pairs' dims (one per pair).
            pairs = _broadcast(dims[args[1]], dims[args[2]])
            args[3] = _pick(rng, [k for k, d in enumerate(dims) if d in ((), pairs)])
            if args[3] is None:
                return None
    elif op == "isclose":
        floats = [k for k in range(n) if dtypes[k] in FLOATS]
        args[0] = _pick(rng, floats)
        if args[0] is None:
            return None
        fits = [k for k in floats if _broadcast(dims[k], dims[args[0]]) is not None]
        args[1] = _pick(rng, fits)
    elif op == "bincount":
        args[0] = _pick(rng, [k for k, d in enumerate(dims) if len(d) == 1 and dtypes[k] in INTS])
        if args[0] is None:
            return None
    elif op == "alloc":
        targets = [k for k, d in enumerate(dims) if d and _fits_into(dims[args[0]], d)]
        wider = [k for k in targets if dims[k] != dims[args[0]]]
        args[1] = _pick(rng, wider if wider and rng.random() < 0.8 else targets)
        if args[1] is None:
            return None
    elif op in BINARY or op in ("switch", "where"):
        switch = op in ("switch", "where")
        for j in range(1, arity):
            ok = [
                k
                for k, d in enumerate(dims)
                if _broadcast(dims[args[0]], d) is not None
                and (not switch or j == 1 or _broadcast(dims[args[1]], d) is not None)
            ]
            other = [k for k in ok if dims[k] != dims[args[0]]]
            # Operands that broadcast against each other: (1, n) with (m, 1).
            crossing = [
                k for k in ok if _broadcast(dims[args[0]], dims[k]) not in (dims[k], dims[args[0]])
            ]
            if crossing and rng.random() < 0.5:
                other = crossing
            if switch and j == 2:
                # Branches of different dtypes, most of the time.
                mixed = [k for k in ok if dtypes[k] != dtypes[args[1]]]
                other = mixed or other
            args[j] = _pick(rng, other if other and rng.random() < 0.6 else ok)
    return tuple(args)


def _op_weight(op):
    """An op's weight in the draw, but for :data:`OP_WEIGHTS`."""
    if op in CORE_OPS:
        return 1.0
    return EXTRA_WEIGHT if op in EXTRA_OPS else MORE_WEIGHT


def generate(rng, max_ops=8, grad=False, values="default", lazy=False, extra=False) -> Recipe:
    """A random recipe: 1 to 3 inputs, maybe constants, up to ``max_ops`` ops, 1 to 3
    outputs, in one graph of three a shared variable with an update, in a
    :data:`NONFINITE_SHARE` of them inputs with NaN, infinities and extreme values, in a
    :data:`LARGE_SHARE` of them large lengths. ``grad``: a recipe for
    :func:`check_grad` (float64 inputs, small lengths, finite values). ``values``: one
    of :data:`VALUES`; ``"wide"`` draws integers and bools more often
    (:data:`WIDE_WEIGHTS`), integer constants where arithmetic wraps
    (:func:`wrap_values`), the ops where it wraps more often (:data:`WIDE_OP_FACTORS`),
    and its recipe's integer inputs across their range (:func:`input_value`); with
    ``grad``, integer and bool inputs beside the float64 ones (not differentiated).
    ``lazy``: the ops of :data:`LAZY_OPS` (a lazy ``ifelse``) are drawn too; ``extra``:
    the ops of :data:`EXTRA_OPS`; without them the draw of a seed is the one cited seeds
    mean.

    >>> rec = generate(np.random.default_rng(1), values="wide")
    >>> rec.values
    'wide'
    """
    if values not in VALUES:
        raise ValueError(f"values must be one of {VALUES}, not {values!r}")
    wide = values == "wide"
    nodes, dims, dtypes, syms, samples = [], [], [], [], []
    shapes = [("a",), ("b",), ("a", "b"), (), (1, "b"), ("a", 1), ("b", "a")]
    sizes = 0
    if not grad and rng.random() < LARGE_SHARE:
        sizes = 1 + int(rng.integers(len(SIZE_SETS) - 1))

    def add(node, d, sym, sample):
        nodes.append(node)
        dims.append(tuple(d))
        dtypes.append(sym.dtype)
        syms.append(sym)
        samples.append(sample)
        return len(nodes) - 1

    dtype_weights = DTYPE_WEIGHTS if grad or rng.random() >= INTEGER_SHARE else INTEGER_WEIGHTS
    if wide and dtype_weights is DTYPE_WEIGHTS:
        dtype_weights = WIDE_WEIGHTS

    def dtype():
        if grad:
            # Wide: an integer or a bool input in a share, beside the float64 ones.
            if wide and rng.random() < 0.4:
                return str(rng.choice(INTS + ("bool",)))
            return "float64"
        return str(rng.choice(DTYPES, p=np.array(dtype_weights) / sum(dtype_weights)))

    n_inputs = int(rng.integers(1, 4))
    # A row and a column (they broadcast against each other) in a share of the graphs.
    crossed = [(1, "b"), ("a", 1)] if n_inputs > 1 and rng.random() < CROSSED_SHARE else []
    for j in range(n_inputs):
        d = crossed[j] if j < len(crossed) else shapes[int(rng.integers(len(shapes)))]
        dt = dtype()
        add(("input", d, dt), d, eval(_input_type(d, dt))(), _sample(d, dt))
    if not grad and rng.random() < 0.33:
        d = shapes[int(rng.integers(len(shapes)))]
        dt = str(rng.choice(FLOATS, p=[0.3, 0.7]))
        add(("shared", d, dt), d, eval(_input_type(d, dt))(), _sample(d, dt))
    for _ in range(int(rng.integers(1, 4) if rng.random() < 0.7 else 0)):
        param = _const_param(rng, dtype(), values)
        if grad and not (abs(param[0]) <= 2 or (wide and param[1] in INTS)):
            continue  # NaN, infinities and 1e30 leave nothing for finite differences
        node = ("const", (), param)
        add(node, (), eval(_code(node, "graph"), dict(_GRAPH_NS)), None)
        samples[-1] = np.asarray(param[0], param[1])
    names = [
        op
        for op in OPS
        if op != "const" and (lazy or op not in LAZY_OPS) and (extra or op not in EXTRA_OPS)
    ]
    if grad:
        names = [op for op in names if op not in NO_GRAD]
    weights = np.array([OP_WEIGHTS.get(op, _op_weight(op)) for op in names])
    if wide:
        weights *= np.array([WIDE_OP_FACTORS.get(op, 1.0) for op in names])
    weights /= weights.sum()
    n_ops = int(rng.integers(1, max_ops + 1))
    tries = 0
    while sum(not _is_leaf(n) for n in nodes) < n_ops and tries < 300:
        tries += 1
        op = names[int(rng.choice(len(names), p=weights))]
        args = _args(op, rng, nodes, dims, dtypes, WIDE_CHAIN if wide else 0.0)
        if args is None:
            REJECTED[op, "args"] += 1
            continue
        param = _param(op, rng, [dims[a] for a in args], [dtypes[a] for a in args], values)
        if op in NEEDS_PARAM and param is None:
            REJECTED[op, "param"] += 1
            continue
        d = _result_dims(op, [dims[a] for a in args], [dtypes[a] for a in args], param)
        if d is None or (sizes and _elements(d, sizes) > MAX_ELEMENTS):
            REJECTED[op, "dims"] += 1
            continue
        node = (op, args, param)
        ns = {**_GRAPH_NS, **{_name(a): syms[a] for a in args}}
        try:
            sym = eval(_code(node, "graph"), ns)
        except (TypeError, ValueError, NotImplementedError):
            REJECTED[op, "graph"] += 1
            continue  # the op refuses these types: not a graph to try
        if grad and sym.dtype not in ("float64", "bool"):
            # Wide: an integer made of integers and bools only (no float's step in it).
            if not (wide and sym.dtype in INTS and all(dtypes[a] not in FLOATS for a in args)):
                REJECTED[op, "grad dtype"] += 1
                continue
        # numpy's side must give the graph's dtype and broadcasting on these types.
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ns = {**_NP_NS, **{_name(a): samples[a] for a in args}}
                sample = np.asarray(eval(_code(node, "numpy", sym.dtype), ns))
        except Exception:
            REJECTED[op, "numpy"] += 1
            continue
        if op in EXTRA_OPS:
            # A length 1 the op's type does not declare broadcastable (tril's product
            # with its mask, roll's concatenation): a length of its own.
            d = tuple("#1" if t == 1 and not b else t for t, b in zip(d, sym.type.broadcastable))
        if sample.dtype != sym.dtype or sym.type.broadcastable != tuple(x == 1 for x in d):
            REJECTED[op, "types"] += 1
            continue
        if op in ("isnan", "isinf") and dtypes[args[0]] not in FLOATS and 1 in d:
            # Refused as when an integer's isnan (an alloc of its shape) lost its length-1
            # dimensions: the draw of the seeds that notes cite (tests/test_fuzz.py).
            REJECTED[op, "types"] += 1
            continue
        add(node, d, sym, sample)
    ops = [k for k, n in enumerate(nodes) if not _is_leaf(n) and n[0] != "const"]
    pool = ops or list(range(len(nodes)))
    outputs = sorted({pool[int(rng.integers(len(pool)))] for _ in range(int(rng.integers(1, 4)))})
    update = None
    s = next((k for k, n in enumerate(nodes) if n[0] == "shared"), None)
    if s is not None:
        # s <- cast(tanh(s * 0.5 + c)) with c a float 0-d value when there is one.
        zero_d = [k for k, d in enumerate(dims) if d == () and k != s and dtypes[k] in FLOATS]
        cur = add(("scale", (s,), 0.5), dims[s], syms[s] * 0.5, None)
        if zero_d:
            c = zero_d[int(rng.integers(len(zero_d)))]
            cur = add(("add", (cur, c), None), dims[s], syms[cur] + syms[c], None)
        cur = add(("tanh", (cur,), None), dims[s], tt.tanh(syms[cur]), None)
        update = add(("cast", (cur,), dtypes[s]), dims[s], tt.cast(syms[cur], dtypes[s]), None)
    seed = int(rng.integers(2**31))
    nonfinite = bool(not grad and rng.random() < NONFINITE_SHARE)
    return Recipe(nodes, outputs, update, seed, dims, dtypes, nonfinite, sizes, values)


# -- running ---------------------------------------------------------------------------


def wrap_values(dtype):
    """The integers of ``dtype`` where its arithmetic wraps: its extremes and their
    neighbours, 0 and +-1, and (negated too, for a signed dtype) the smallest value
    whose square overflows, half the maximum (doubled, it overflows) and about 78% of
    it (int8 100, uint8 200, int16 25600), of which a product by 2 or more wraps.

    >>> wrap_values("int8")
    [-128, 127, -127, 126, 0, 1, -1, 12, -12, 64, -64, 100, -100]
    >>> wrap_values("uint8")
    [0, 255, 1, 254, 0, 1, 16, 128, 200]
    """
    info = np.iinfo(dtype)
    top = int(info.max)
    root = int(np.sqrt(float(top))) + 1
    while (root - 1) * (root - 1) > top:  # float's square root of 2**64 - 1 rounds up
        root -= 1
    wraps = [root, top // 2 + 1, (top + 1) * 100 // 128]
    if info.min < 0:
        return [int(info.min), top, int(info.min) + 1, top - 1, 0, 1, -1] + [
            v * s for v in wraps for s in (1, -1)
        ]
    return [0, top, 1, top - 1, 0, 1] + wraps


def input_value(seed, shape, dtype, special, values="default"):
    """An input's value: uniform in [-1, 1] for floats, integers in [-9, 9] (unsigned:
    [0, 9]), random bools; with ``special``, about a third of the elements NaN, the
    infinities, values near overflow and underflow, signed zeros (floats), or the
    extremes, 0 and +-1 (integers). ``values="wide"``: integers a third small, a third
    where the dtype's sums and products wrap (:func:`wrap_values`), a third uniform
    over the dtype's whole range."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu" and values == "wide":
        info = np.iinfo(dt)
        small = rng.integers(-9 if dt.kind == "i" else 0, 10, shape).astype(dt)
        wraps = np.array(wrap_values(dtype), dtype=object).astype(dt)
        wrapping = wraps[rng.integers(len(wraps), size=shape)]
        anywhere = rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
        which = rng.integers(3, size=shape)
        v = np.asarray(np.where(which == 0, small, np.where(which == 1, wrapping, anywhere)))
        v = v.astype(dt)
        table = [info.min, info.max, 0, 1, info.max - 1] + ([-1, info.min + 1] * (dt.kind == "i"))
    elif dt.kind in "iu":
        v = rng.integers(-9 if dt.kind == "i" else 0, 10, shape).astype(dt)
        info = np.iinfo(dt)
        table = [info.min, info.max, 0, 1, info.max - 1] + ([-1, info.min + 1] * (dt.kind == "i"))
    else:
        v = rng.uniform(-1, 1, shape).astype(dt)
        info = np.finfo(dt)
        big, small = float(info.max) / 4, float(info.tiny) * 4
        table = [np.nan, np.inf, -np.inf, big, -big, small, -small, 0.0, -0.0]
    if special:
        flat = v.reshape(-1)
        pick = rng.random(flat.size) < 0.35
        kinds = rng.integers(len(table), size=flat.size)
        flat[pick] = np.array(table, dtype=object)[kinds[pick]].astype(dt)
    return v


#: How a recipe's input arrays are laid out: ``"default"``, C order (what every cited
#: seed means); ``"mixed"``, each input of each call in one of :data:`LAYOUT_KINDS`,
#: drawn from its value's seed (:func:`laid_out`); ``"aliased"``, C order, the outputs
#: declared ``Out(borrow=True)``, and in the second call each input given an array the
#: function holds where one fits (:func:`aliases`): the shared variable's own array,
#: as ``f(s.get_value(borrow=True))`` gives it, or an output of the first call, fed back.
LAYOUTS = ("default", "mixed", "aliased")
LAYOUT_KINDS = (
    "c",
    "fortran",
    "reversed",
    "strided",
    "rotated",
    "readonly",
    "unaligned",
    "odd_unit_strides",
)


def laid_out(x, how):
    """A new array of ``x``'s values, laid out in memory as ``how`` says: ``"c"``, C
    order; ``"fortran"``; ``"reversed"``, every stride negative; ``"strided"``, every
    other element of each axis of a larger array (the gaps hold a value that shows if
    read: NaN, or the dtype's max); ``"rotated"``, the first axis stored last;
    ``"readonly"``, not writeable; ``"unaligned"``, at an odd address; and
    ``"odd_unit_strides"``, its axes of length 1 (and all of an empty array's) with
    strides no contiguous layout has (0, and a large one), as numpy's broadcasts and
    slices make them.

    >>> y = laid_out(np.arange(6.0).reshape(2, 3), "reversed")
    >>> y.strides, y.tolist()
    ((-24, -8), [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    """
    x = np.asarray(x)
    if x.ndim == 0 and how in ("fortran", "strided"):  # (numpy's would make it 1-d, or a scalar)
        return x.copy()
    if how == "fortran":
        return np.asfortranarray(x.copy())
    if how == "reversed":
        return np.flip(np.flip(x).copy()) if x.ndim else x.copy()
    if how == "strided":
        fill = (
            np.nan
            if x.dtype.kind in "fc"
            else (True if x.dtype.kind == "b" else np.iinfo(x.dtype).max)
        )
        big = np.full(tuple(2 * n for n in x.shape), fill, x.dtype)
        y = big[(slice(None, None, 2),) * x.ndim]
        y[...] = x
        return y
    if how == "rotated":
        return np.moveaxis(np.moveaxis(x, 0, -1).copy(order="C"), -1, 0) if x.ndim else x.copy()
    if how == "readonly":
        y = x.copy()
        y.flags.writeable = False
        return y
    if how == "unaligned":
        buf = np.zeros(x.nbytes + x.itemsize + 1, np.uint8)
        y = buf[1 : 1 + x.nbytes].view(x.dtype).reshape(x.shape)
        y[...] = x
        return y
    if how == "odd_unit_strides":
        y = x.copy()
        odd = [
            (1 << 20 if j % 2 else 0) if n == 1 or y.size == 0 else s
            for j, (n, s) in enumerate(zip(y.shape, y.strides))
        ]
        return np.lib.stride_tricks.as_strided(y, y.shape, odd)
    return x.copy()


def _layout_of(rec, call, k):
    """The layout (:data:`LAYOUT_KINDS`) of input ``k``'s array in call ``call``."""
    if rec.layouts != "mixed":
        return "c"
    rng = np.random.default_rng([_seed_of(rec, call, k), 17])
    return LAYOUT_KINDS[int(rng.integers(len(LAYOUT_KINDS)))]


def aliases(rec) -> dict:
    """Under ``layouts="aliased"``, what the second call gives input ``k`` (a dict):
    ``("shared",)``, the shared variable's own array (the input's value is then the
    shared variable's), or ``("output", j)``, output ``j`` of the first call (a buffer
    the function keeps, ``Out(borrow=True)``), the input's value written into it. The
    first that has the input's dtype and shape, each output at most once; a call checks
    the arrays themselves too (:func:`aliased_arg`).

    >>> rec = Recipe(nodes=[("input", [1], "float64"), ("exp", [0], None)], outputs=[1],
    ...              dims=[[1], [1]], dtypes=["float64", "float64"], layouts="aliased")
    >>> aliases(rec)  # (a length 1 in both calls: the second call's others differ)
    {0: ('output', 0)}
    """
    if rec.layouts != "aliased":
        return {}
    first, second = _call_sizes(rec)
    s = rec.shared_index
    found, used = {}, set()
    for k, node in enumerate(rec.nodes):
        if node[0] != "input":
            continue
        want, dtype = _shape(node[1], second), node[2]
        if s is not None and rec.dtypes[s] == dtype and _shape(rec.nodes[s][1], first) == want:
            found[k] = ("shared",)
            continue
        for j, o in enumerate(rec.outputs):
            if j not in used and rec.dtypes[o] == dtype and _shape(rec.dims[o], first) == want:
                used.add(j)
                found[k] = ("output", j)
                break
    return found


def aliased_arg(held, value, write=True):
    """``held`` (an array the function holds) as the argument of an input whose value is
    ``value``'s, or None where it cannot be (another dtype or shape, read-only, not a
    numpy array: a device array). ``write``: ``value`` is written into it first (an
    output fed back); else the input's value becomes ``held``'s (the shared variable's).

    >>> buf = np.zeros(2)
    >>> aliased_arg(buf, np.ones(2)) is buf, buf.tolist()
    (True, [1.0, 1.0])
    >>> aliased_arg(buf, np.ones(3), write=False) is None
    True
    """
    if (
        type(held) is not np.ndarray
        or held.dtype != value.dtype
        or held.shape != value.shape
        or not held.flags.writeable
    ):
        return None
    if write:
        held[...] = value
    return held


def _seed_of(rec, call, k):
    """The seed of node ``k``'s value in call ``call`` of ``rec``."""
    return (rec.seed * 1_000_003 + call * 7_919 + k) % 2**32


def _shape(dims, sizes):
    """The shape of dims tokens at ``sizes``: an input's plain names, or a value's derived
    lengths (``_length``; a masked length is its bound, which a call's check refuses)."""
    return tuple(1 if d == 1 else sizes[d] if d in sizes else int(_length(d, sizes)) for d in dims)


def _call_sizes(rec):
    """The lengths of the two calls: the second's change, unless a shared variable
    fixes them."""
    first, second = EDGE_SIZES if rec.lengths == "edge" and rec.sizes == 0 else SIZE_SETS[rec.sizes]
    return [first, first if rec.shared_index is not None else second]


def _values(rec, call):
    """The inputs' and the shared variable's values in call ``call`` of ``rec``."""
    sizes = _call_sizes(rec)[call]
    return {
        k: input_value(
            _seed_of(rec, call, k),
            _shape(node[1], sizes),
            node[2],
            rec.nonfinite and node[0] == "input",
            rec.values,
        )
        for k, node in enumerate(rec.nodes)
        if _is_leaf(node)
    }


#: The ops that cast a float to an integer.
FLOAT_TO_INT = ("cast", "cast_grow", "cast_in_range", "iround")
#: The float ops as discontinuous as a cast, where the dividend crosses a multiple of the
#: divisor: a float64 product of 1e30 one ulp apart, modulo an int64 of 2**60, differs by
#: as much as the divisor (fuzz --values wide, seed 14, graph 1502).
#: And the functions with poles at the integers 0, -1, -2, ...: a float32 gamma(4) one
#: ulp above 6, times -11265, is beside the pole at -67590 (gamma -0.0, not NaN). And
#: the periodic functions of floats whose ulp is beyond their period: the cos of
#: gammaln(5.86e18), 2.47e20 in scipy and one ulp (32768) apart in C's lgamma, is 0.89
#: in one and -0.09 in the other.
FLOAT_STEPS = ("mod", "floordiv", "gamma", "gammaln", "psi", "sin", "cos", "tan")
#: Comparisons are steps too where a float operand ties: numpy's float32 sigmoid of
#: 1.2078809e-07, 1 / (1 + exp(-x)), is 0.5, the correctly rounded one (C's) 0.50000006,
#: so ``neq`` of them and 0.5 differ (seed 57, graph 49).
FLOAT_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "neq")
#: The moves, in units in the last place, of a float cast to an integer that an engine's
#: last bits may make (one bit of a float32 ``log`` upstream moves its product by two).
NUDGE_ULPS = (-4, -3, -2, -1, 1, 2, 3, 4)


def reference(rec, values, nudge=0.0, ulps=0, sum_by_axes=False, only=None):
    """numpy's value of every node given the input/shared ``values``. ``nudge``: each
    float cast to an integer (or the first operand of a step, :data:`FLOAT_STEPS` and
    :data:`FLOAT_COMPARISONS`) is moved by that much first (relatively, or absolutely
    below 1), to see where a float within its tolerance truncates to another integer.
    ``ulps``: each such float is moved by that many units in its last place instead (a
    float32 ``log`` one bit apart, times 3e9, is two float32 steps apart, so the
    integers differ by 32, and a ``sin`` of them by anything). ``sum_by_axes``: sums
    add one axis at a time (:func:`rsum_by_axes`). ``only``: the nodes to compute (a
    set; the default, every node)."""
    env = dict(values)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, node in enumerate(rec.nodes):
            if k not in env and (only is None or k in only):
                args = {_name(a): env[a] for a in node[1]}
                stepped = node[0] in FLOAT_TO_INT and rec.dtypes[k] in INTS
                stepped = stepped or (node[0] in FLOAT_STEPS and rec.dtypes[k] in FLOATS)
                stepped = stepped or node[0] in FLOAT_COMPARISONS
                if (nudge or ulps) and stepped:
                    x = env[node[1][0]]
                    if x.dtype.kind == "f":
                        moved = x + nudge * np.maximum(1, np.abs(x))
                        toward = np.asarray(np.copysign(np.inf, ulps), x.dtype)
                        for _ in range(abs(ulps)):
                            moved = np.nextafter(moved, toward)  # in x's own dtype
                        args[_name(node[1][0])] = moved.astype(x.dtype)
                ns = {**_NP_NS, **args}
                if sum_by_axes:
                    ns["rsum"], ns["reduce"] = rsum_by_axes, reduce_by_axes
                env[k] = np.asarray(eval(_code(node, "numpy", rec.dtypes[k]), ns))
    return env


def _build(rec):
    """The graph of ``rec``: (explicit inputs, shared variable or None, syms)."""
    syms, inputs, svar = {}, [], None
    for k, node in enumerate(rec.nodes):
        if node[0] == "input":
            syms[k] = eval(_input_type(node[1], node[2]), {"tt": tt})(_name(k))
            inputs.append(k)
        elif node[0] == "shared":
            shape = _shape(node[1], _call_sizes(rec)[0])
            broadcastable = tuple(d == 1 for d in node[1])
            svar = shared(np.zeros(shape, node[2]), name=_name(k), broadcastable=broadcastable)
            syms[k] = svar
        else:
            ns = {**_GRAPH_NS, **{_name(a): syms[a] for a in node[1]}}
            syms[k] = eval(_code(node, "graph"), ns)
    return inputs, svar, syms


#: Engine name -> (the mode, as the text of an expression; config flags while compiling
#: and calling; the C kernels' build mode). The reproducer prints the same text.
ENGINES = {
    "py": ('Mode(linker="py", optimizer=None)', {}, None),
    "cpu": ('Mode(linker="cpu", optimizer="fast_run")', {"cxx": ""}, None),
    "cpu_safe": (
        'Mode(linker="cpu", optimizer="fast_run").excluding("nonfinite_unsafe")',
        {"cxx": ""},
        None,
    ),
    "cpu_c": ('Mode(linker="cpu", optimizer="fast_run")', {}, "sync"),
    # Every value planned in blocks, however small.
    "cpu_plan0": (
        'Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run")',
        {"cxx": ""},
        None,
    ),
    # Every block and kernel output filled with a sentinel before its step writes it.
    "cpu_poison": (
        'Mode(linker=CPULinker(min_plan_bytes=0, poison=True), optimizer="fast_run")',
        {"cxx": ""},
        None,
    ),
    "cpu_poison_c": (
        'Mode(linker=CPULinker(min_plan_bytes=0, poison=True), optimizer="fast_run")',
        {},
        "sync",
    ),
    # C kernels whose libraries load late: the kernel library and the step library at
    # points of the calls drawn from the graph's seed (testing.late_loads), as a
    # background build finishes mid-call on a cold cache.
    "cpu_late_c": ('Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run")', {}, "late"),
    # C kernels whose library is never built: the calls after a kernel's first run its
    # numpy steps, on values planned in blocks (an output over an input it reads).
    "cpu_fallback": ('Mode(linker=CPULinker(min_plan_bytes=0), optimizer="fast_run")', {}, "never"),
    "opencl": ('Mode(linker="opencl")', {}, None),
    # Not in available_engines(): asked for by name (--engines).
    "fast_compile": ('Mode(linker="cpu", optimizer="fast_compile")', {"cxx": ""}, None),
    "dask": ('Mode(linker=DaskLinker(chunks=2, scheduler="sync"))', {}, None),
    # The Dask engine on the current distributed client (--dask-cluster N starts one).
    "dask_cluster": ("Mode(linker=DaskLinker(chunks=2, scheduler=cluster_client()))", {}, None),
    # Every rewrite's values checked on the graph before and after it.
    "debugmode": ("DebugMode(check_isfinite=False)", {"cxx": ""}, None),
}


def available_engines():
    """The engines this machine runs (``opencl`` needs a device)."""
    names = ["py", "cpu", "cpu_safe", "cpu_c", "cpu_plan0", "cpu_poison", "cpu_poison_c",
             "cpu_late_c"]  # fmt: skip
    if opencl_available()[0]:
        names.append("opencl")
    return names


def cluster_client():
    """The current ``distributed.Client``, which engine ``dask_cluster`` runs on."""
    client = current_client()
    if client is None:
        raise RuntimeError(
            "engine dask_cluster runs on the current distributed.Client, and there is none: "
            "start a cluster with --dask-cluster N (or connect a Client before run())"
        )
    return client


def _mode(name):
    return eval(
        ENGINES[name][0],
        {
            "Mode": Mode,
            "CPULinker": CPULinker,
            "DaskLinker": DaskLinker,
            "DebugMode": DebugMode,
            "cluster_client": cluster_client,
        },
    )


def close(got, want, tol, nonfinite=None, int_rtol=0.0, alternatives=()):
    """Why ``got`` is not numpy's ``want`` (shape, dtype, values), or None. Integers and
    bools must be equal (integers within ``int_rtol`` of numpy's, relatively, when
    given); floats within ``tol``, NaN equal to NaN. ``nonfinite``: ``"both"``, NaN and
    the infinities count as one value; ``"either"``, only the floats that are finite on
    both sides count (and integers and bools not at all). ``alternatives``: other values
    of numpy's that an element may equal instead (:func:`reference`'s ``nudge``)."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape}, numpy {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, numpy {want.dtype}"
    if want.dtype.kind in "biu":
        differ = got.reshape(-1) != want.reshape(-1)
        if int_rtol and want.dtype.kind != "b":
            w = want.reshape(-1).astype("float64")
            differ &= np.abs(got.reshape(-1).astype("float64") - w) > int_rtol * np.abs(w)
        for alt in alternatives:
            differ &= got.reshape(-1) != np.asarray(alt).reshape(-1)
        if nonfinite != "either" and differ.any():
            bad = np.flatnonzero(differ)
            i = int(bad[0])
            return (
                f"values differ at {bad.size} of {want.size} elements (first at flat index "
                f"{i}: {got.reshape(-1)[i]!r}, numpy {want.reshape(-1)[i]!r})"
            )
        return None
    if nonfinite:
        # NaN and the infinities count as one value where both sides (or either) hold one.
        both = ~np.isfinite(got) & ~np.isfinite(want)
        if nonfinite == "either":
            both = ~np.isfinite(got) | ~np.isfinite(want)
        got, want = np.where(both, 0, got), np.where(both, 0, want)
    bad = ~np.isclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    for alt in alternatives:
        bad &= ~np.isclose(got, np.asarray(alt), rtol=tol, atol=tol, equal_nan=True)
    if bad.any():
        err = np.max(np.abs(got.astype(float) - want.astype(float)))
        return f"values differ (max abs error {err:.3g}, at {int(bad.sum())} of {want.size})"
    return None


def _reached(rec, starts):
    """The nodes of ``rec`` for which ``starts(k, node)`` holds, and every node they
    reach."""
    reached = set()
    for k, node in enumerate(rec.nodes):
        if not _is_leaf(node) and (starts(k, node) or any(x in reached for x in node[1])):
            reached.add(k)
    return reached


def _after_float_to_int(rec):
    """The nodes of ``rec`` that a float cast to an integer reaches: a float rounded one
    way or the other within the tolerance (numpy's float32 ``tanh`` and C's differ in
    the last bit) truncates to integers that differ by as much, relatively (the float32
    ``tanh(x) * -3e9`` of 1057972480 beside 1057972416), or to the next integer (1 beside
    a ``tanh(9)`` of 0.99999994); and those a float's modulo or floor division reaches
    (:data:`FLOAT_STEPS`), or a comparison of floats (:data:`FLOAT_COMPARISONS`)."""
    return _reached(
        rec,
        lambda k, node: (
            (node[0] in FLOAT_TO_INT and rec.dtypes[k] in INTS or node[0] in FLOAT_STEPS)
            and rec.dtypes[k] in INTS + FLOATS
            or node[0] in FLOAT_COMPARISONS
        )
        and rec.dtypes[node[1][0]] in FLOATS,
    )


def _after_multi_axis_sum(rec):
    """The nodes of ``rec`` that a sum over several axes reaches: its order of additions
    is the engine's (numpy's pairwise over the flattened array, the reference engine's
    one axis at a time), and where large terms cancel the orders round apart (seed
    61128, graph 8698: ``4.5e307 + 0.88 - 4.5e307`` is 0.0 by columns, 0.6 flattened)."""

    def multi(k, node):
        if node[0] not in ("sum", "sumd", "suma", "mean", "var", "std"):
            return False
        if len(rec.dims[node[1][0]]) < 2:
            return False
        axis = node[2] if node[0] == "sum" else node[2][0]
        return axis is None or len(np.atleast_1d(axis)) >= 2

    return _reached(rec, multi)


def _alternatives(rec, v, k, tol, loose, summed):
    """Other values of numpy's that node ``k`` may equal: a float cast to an integer
    moved within its tolerance or by a few units in the last place (``loose``), sums
    added one axis at a time (``summed``)."""
    alts, only = [], _needed(rec)
    if k in loose:
        alts += [reference(rec, v, n, only=only)[k] for n in (-tol, tol)]
        alts += [reference(rec, v, ulps=u, only=only)[k] for u in NUDGE_ULPS]
    if k in summed:
        alts.append(reference(rec, v, sum_by_axes=True, only=only)[k])
    return alts


def _int_rtols(rec):
    """Per output of ``rec``: the relative tolerance of its integers (0: exact)."""
    reached = _after_float_to_int(rec)
    return [_tol(rec) if k in reached and rec.dtypes[k] in INTS else 0.0 for k in rec.outputs]


def _host(v):
    return v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray) else np.asarray(v)


def _tol(rec):
    tol = 2e-4 if "float32" in rec.dtypes else 1e-9
    # Long sums and products round more (float32 accumulates in float64, but a float32
    # product and an engine's float32 kernels round per element).
    return tol * 25 if rec.sizes else tol


def check(rec, engines=None) -> list:
    """Run ``rec`` on ``engines`` (default: all available); the problems found, as
    ``(engine, what)`` pairs (empty: every engine agrees with numpy)."""
    engines = engines or available_engines()
    problems = []
    for name in engines:
        for what in _check_engine(rec, name, _tol(rec)):
            problems.append((name, what))
    return problems


def check_function_cache(rec, engines=None, counts=None) -> list:
    """Compile ``rec`` on each of ``engines`` (default: all available) three times: with
    the cache of optimized graphs off, on (the graph stored, or loaded if an earlier run
    stored it), and on again after the process forgot what it stored
    (``function_cache.forget``: the entry read from disk and its ops unpickled, as a
    fresh process loads it); the problems where a function compiled with the cache prints
    another optimized graph, or gives other outputs or shared state in either call, bit
    for bit, than the one compiled without it, as ``(engine, what)`` pairs. ``counts``
    (a Counter, when given) adds up the ``compiled`` engine runs and those ``loaded``.

    >>> check_function_cache(generate(np.random.default_rng(0)), ["cpu"])
    []
    """
    engines = engines or available_engines()
    problems = []
    for name in engines:
        want = _cache_run(rec, name, cache=False)
        for what in ("stored", "loaded"):
            if what == "loaded":
                function_cache.forget()
            hits = function_cache.stats()["hits"]
            got = _cache_run(rec, name, cache=True)
            loaded = function_cache.stats()["hits"] > hits
            if counts is not None:
                counts["compiled"] += 1
                counts["loaded"] += loaded
            for why in _cache_differences(want, got):
                problems.append((name, f"function cache ({what}, loaded={loaded}): {why}"))
    return problems


def _cache_run(rec, name, cache):
    """``rec`` compiled on engine ``name`` with the function cache on or off: its optimized
    graph printed and, per call, its outputs and the shared variable's state (or what
    raised)."""
    _, flags, build = ENGINES[name]
    vals = [_values(rec, call) for call in (0, 1)]
    with (
        engine_context(flags, build, rec),
        config.change_flags(function_cache=cache),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        try:
            f, inputs, svar = _compile_recipe(rec, _mode(name))
        except Exception as e:
            return f"compile raised {type(e).__name__}: {e}", []
        text = io.StringIO()
        debugprint(f.maker.fgraph, file=text)
        if svar is not None:
            svar.set_value(vals[0][rec.shared_index].copy())
        calls = []
        for v in vals:
            try:
                got = [np.array(_host(g), copy=True) for g in f(*[v[k].copy() for k in inputs])]
            except Exception as e:
                calls.append(f"raised {type(e).__name__}: {e}")
                continue
            if svar is not None:
                got.append(np.array(_host(svar.get_value(borrow=True)), copy=True))
            calls.append(got)
    return text.getvalue(), calls


def _cache_differences(want, got):
    """How ``got`` (a ``_cache_run``) differs from ``want``: the graph, then per call each
    value by dtype, shape and bytes (a NaN's payload and a zero's sign count)."""
    if got[0] != want[0]:
        yield "the optimized graph differs"
    for call, (w, g) in enumerate(zip(want[1], got[1])):
        if isinstance(w, str) or isinstance(g, str):
            if w != g:
                yield f"call {call}: {g if isinstance(g, str) else 'ran'}, not {w}"
            continue
        for j, (a, b) in enumerate(zip(w, g)):
            if (a.dtype, a.shape) != (b.dtype, b.shape) or a.tobytes() != b.tobytes():
                yield f"call {call}: value {j} differs"


def _reference_envs(rec):
    """numpy's value of every node of ``rec`` in each of its two calls (a call whose
    values numpy refuses, as the engine must, is left out)."""
    for call in (0, 1):
        try:
            yield reference(rec, _values(rec, call))
        except (ValueError, IndexError):
            continue


def _dot_sees_nonfinite(rec):
    """Whether a dot of ``rec`` reads or makes a non-finite value in either call, or
    makes a float zero (whose sign is the kernel's, :data:`DOT_NONFINITE`)."""
    dots = [k for k, n in enumerate(rec.nodes) if n[0] in PRODUCTS]
    if not dots:
        return False
    for env in _reference_envs(rec):
        for k in dots:
            for v in [env[k]] + [env[a] for a in rec.nodes[k][1]]:
                if v.dtype.kind == "f" and not np.isfinite(v).all():
                    return True
            if env[k].dtype.kind == "f" and (env[k] == 0).any():
                return True
    return False


# Ops whose finite value can come from a non-finite argument: tanh(-inf) = -1,
# exp(-inf) = 0, 1 / inf = 0, softplus(-inf) = 0...
SATURATING = frozenset(
    {"tanh", "sigmoid", "exp", "erf", "erfc", "inv", "div", "true_div", "floordiv", "mod"}
    | {"softplus", "softmax", "logsoftmax", "clip", "pow", "powc", "powcf", "minimum"}
    | {"maximum", "sgn"}
)


def _saturates(rec):
    """Whether an op of :data:`SATURATING` in ``rec`` reads a non-finite float in either
    call of the reference (a rewrite that changes an infinity's sign then changes a
    finite value: ``tanh(126 / x / 0)``, seed 8102 wide, graph 73)."""
    nodes = [k for k, n in enumerate(rec.nodes) if n[0] in SATURATING]
    if not nodes:
        return False
    for env in _reference_envs(rec):
        for k in nodes:
            for a in rec.nodes[k][1]:
                v = np.asarray(env[a]) if isinstance(a, int) else None
                if v is not None and v.dtype.kind == "f" and not np.isfinite(v).all():
                    return True
    return False


def _discretizes(rec):
    """Whether a float of ``rec`` becomes an integer, a bool, a switch's choice or a
    place in a sort (where NaN and the infinities turn into finite values)."""
    for k, node in enumerate(rec.nodes):
        args = [] if _is_leaf(node) else node[1]
        floats_in = any(rec.dtypes[a] in FLOATS for a in args)
        if floats_in and rec.dtypes[k] not in FLOATS:
            return True
        if node[0] == "sort" and rec.dtypes[k] in FLOATS:
            return True  # a NaN sorts last: the finite values move (seed 8 wide, graph 2601)
        if node[0] in ("switch", "where", "mask", "mask_set", "mask_inc"):
            if rec.dtypes[args[0]] in FLOATS:
                return True
            return True
    return False


def classify(rec, engine):
    """The tag of :data:`NONFINITE_TAGS` whose rewrites make ``engine`` differ from
    numpy on ``rec``'s non-finite values (its inputs', its constants', or those that
    ``log``, ``sqrt``, a division or an overflow make): the first with which excluded
    the engine agrees, else all of them together, joined by ``+``;
    :data:`DOT_NONFINITE` for a product's non-finite values that differ by kernel
    (None: not explained by either, a bug). The reference engine runs no rewrites: only
    its products' kernels are classified."""
    tag_sets = [(t,) for t in NONFINITE_TAGS] + [NONFINITE_TAGS] * (len(NONFINITE_TAGS) > 1)
    for tags in tag_sets if engine != "py" else []:
        if not _check_engine(rec, engine, _tol(rec), exclude=tags):
            if (
                tags == ("nonfinite_unsafe",)
                and not _discretizes(rec)
                and not _saturates(rec)
                # DebugMode refuses such a rewrite when it compiles (BadOptimization):
                # the same rewrites' finite values are checked on the CPU engine.
                and _check_engine(
                    rec, "cpu" if engine == "debugmode" else engine, _tol(rec), nonfinite="either"
                )
            ):
                # Those rewrites are exact for finite values: a float that differs
                # where both sides are finite, and no comparison, cast or switch made
                # it from a non-finite one, is a bug of one of them.
                return None
            return "+".join(tags)
    if _dot_sees_nonfinite(rec):
        # NaN against inf, or (a zero factor that BLAS skips, numpy's tensordot(0.0,
        # [inf], axes=0) beside an elementwise product's 0 * inf) NaN against 0.
        for nonfinite in ("both", "either"):
            if not _check_engine(rec, engine, _tol(rec), nonfinite=nonfinite):
                return DOT_NONFINITE
    return None


def late_points(rec) -> tuple:
    """The points of :func:`~theano_dag.testing.late_loads.late_loads` at which engine
    ``cpu_late_c`` loads ``rec``'s libraries: drawn from its seed, in a graph's first
    calls (where a kernel library and its step library finish loading in a cold cache).

    >>> late_points(Recipe([], [], seed=3)) == late_points(Recipe([], [], seed=3))
    True
    """
    rng = np.random.default_rng([rec.seed, 0x1A7E])
    first = 1 + int(rng.integers(8))
    return (first, first + int(rng.integers(12)))


def engine_context(flags, build, rec=None):
    """The context an engine compiles and runs under: its config ``flags`` (a dict) and
    its C kernels' ``build`` mode (None: the default), as :data:`ENGINES` gives them;
    ``"late"``: libraries loaded at the points :func:`late_points` draws for ``rec``.

    >>> _, flags, build = ENGINES["cpu_c"]
    >>> with engine_context(flags, build):
    ...     pass
    """
    stack = contextlib.ExitStack()
    # A rewrite that fails (rolled back with a warning otherwise) is a bug to report.
    stack.enter_context(config.change_flags(on_opt_error="raise"))
    stack.enter_context(config.change_flags(**flags))
    if build == "late":
        stack.enter_context(late_loads(late_points(rec)))
    elif build:
        stack.enter_context(ckernel.compile_mode(build))
    return stack


def _compile_recipe(rec, mode):
    """``(f, inputs, svar)``: ``rec`` built and compiled with ``mode``, the indices of
    its inputs, and its shared variable (None without one)."""
    inputs, svar, syms = _build(rec)
    updates = [(svar, syms[rec.update])] if svar is not None and rec.update else []
    outputs = [syms[k] for k in rec.outputs]
    if rec.layouts == "aliased":  # buffers the function keeps, fed back (aliases)
        outputs = [Out(o, borrow=True) for o in outputs]
    f = function(
        [syms[k] for k in inputs],
        outputs,
        updates=updates,
        mode=mode,
        on_unused_input="ignore",
    )
    return f, inputs, svar


def _check_engine(rec, name, tol, exclude=(), nonfinite=None):
    _, flags, build = ENGINES[name]
    s = rec.shared_index
    int_rtols = _int_rtols(rec)
    loose = _after_float_to_int(rec)
    summed = _after_multi_axis_sum(rec)
    needed = _needed(rec)
    vals = [_values(rec, call) for call in (0, 1)]
    with engine_context(flags, build, rec), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            mode = _mode(name).excluding(*exclude) if exclude else _mode(name)
            f, inputs, svar = _compile_recipe(rec, mode)
        except Exception as e:
            return [f"compile raised {type(e).__name__}: {e}"]
        state = vals[0][s].copy() if s is not None else None
        if svar is not None:
            svar.set_value(state.copy())
        kept, problems = [], []
        fed_back = aliases(rec)
        prev = []
        for call, v in enumerate(vals):
            if s is not None:
                v = {**v, s: state}
            args = [laid_out(v[k], _layout_of(rec, call, k)) for k in inputs]
            fed = set()  # the positions given an array the function holds
            if call == 1 and fed_back:
                v = dict(v)
                for pos, k in enumerate(inputs):
                    how = fed_back.get(k)
                    if how == ("shared",):
                        arg = aliased_arg(svar.get_value(borrow=True), v[k], write=False)
                        if arg is not None:
                            v[k] = arg.copy()  # the input's value is the shared variable's
                    elif how is not None and not any(
                        np.shares_memory(prev[how[1]], args[p]) for p in fed
                    ):
                        arg = aliased_arg(prev[how[1]], v[k])
                    else:
                        arg = None
                    if arg is not None:
                        args[pos] = arg
                        fed.add(pos)
            try:
                want = reference(rec, v, only=needed)
            except (ValueError, IndexError) as e:  # an empty value's max, an index past it
                try:
                    f(*args)
                except Exception:  # numpy refuses these values, and so does the engine
                    return problems
                refused = f"{type(e).__name__}: {e}"
                return problems + [f"call {call}: numpy raises {refused}; the engine returned"]
            try:
                prev = f(*args)
            except Exception as e:
                return problems + [f"call {call} raised {type(e).__name__}: {e}"]
            got = [_host(g) for g in prev]
            for pos, (k, arg) in enumerate(zip(inputs, args)):
                if pos in fed:
                    continue  # the function's own array: an update or an output may follow
                if not np.array_equal(arg, v[k], equal_nan=arg.dtype.kind in "fc"):
                    problems.append(f"call {call}: input {_name(k)} modified")
            for j, (k, g) in enumerate(zip(rec.outputs, got)):
                why = close(g, want[k], tol, nonfinite, int_rtols[j])
                if why and (k in loose or k in summed):
                    alts = _alternatives(rec, v, k, tol, loose, summed)
                    why = close(g, want[k], tol, nonfinite, int_rtols[j], alts)
                if why:
                    problems.append(f"call {call}: output {j} ({_name(k)}): {why}")
                for pos, a in enumerate(args):
                    if pos in fed:
                        continue  # a kept buffer fed back may be this output's again
                    if isinstance(g, np.ndarray) and np.shares_memory(g, a):
                        problems.append(f"call {call}: output {j} shares memory with an input")
            for j in range(len(got) if rec.layouts != "aliased" else 0):  # (borrowed: may)
                for i in range(j):
                    gi, gj = got[i], got[j]
                    if isinstance(gi, np.ndarray) and gi.size and np.shares_memory(gi, gj):
                        problems.append(f"call {call}: outputs {i} and {j} share memory")
            if s is not None and rec.update is not None:
                state = _host(svar.get_value(borrow=True))
                why = close(state, want[rec.update], tol, nonfinite)
                u = rec.update
                if why and (u in loose or u in summed):
                    alts = _alternatives(rec, v, u, tol, loose, summed)
                    why = close(state, want[u], tol, nonfinite, 0.0, alts)
                if why:
                    problems.append(f"call {call}: shared {_name(s)} after the update: {why}")
                # The next call's numpy values from the engine's state (within the
                # tolerance of numpy's): its last bits are not amplified into a difference.
                state = state.copy()
            for j, (obj, copy) in enumerate(kept):
                eq_nan = copy.dtype.kind in "fc"
                if not np.array_equal(_host(obj), copy, equal_nan=eq_nan):
                    problems.append(f"call {call}: the first call's output {j} was overwritten")
            if call == 0 and rec.layouts != "aliased":  # (borrowed outputs may change)
                kept = [(g, np.array(g, copy=True)) for g in got]
            if problems:
                return problems
    return []


def _needed(rec) -> set:
    """The nodes of ``rec`` that its outputs and update need: the graph's. numpy's value
    of another node is never compared, and may be refused where the graph's are not (an
    empty value's max, at :data:`EDGE_SIZES`)."""
    needed, stack = set(), [*rec.outputs, *([rec.update] if rec.update is not None else [])]
    while stack:
        k = stack.pop()
        if k not in needed:
            needed.add(k)
            stack.extend(() if _is_leaf(rec.nodes[k]) else rec.nodes[k][1])
    return needed


# -- gradients ---------------------------------------------------------------------------


def differentiable(rec) -> bool:
    """Whether :func:`check_grad` applies: float64 inputs and values (bool conditions
    allowed), small lengths, no shared variable, finite inputs and constants, none of
    the ops of :data:`NO_GRAD`. A ``"wide"`` recipe may also have integer and bool
    inputs, and integers computed from integers and bools only (constant in the
    float64 inputs, which are the ones differentiated)."""
    if rec.values == "wide":
        typed = all(
            d in ("float64", "bool")
            or (d in INTS and (_is_leaf(n) or all(rec.dtypes[a] not in FLOATS for a in n[1])))
            for n, d in zip(rec.nodes, rec.dtypes)
        )
        typed = typed and any(n[0] == "input" and n[2] == "float64" for n in rec.nodes)
    else:
        typed = all(d in ("float64", "bool") for d in rec.dtypes) and all(
            n[2] == "float64" for n in rec.nodes if _is_leaf(n)
        )
    return (
        rec.shared_index is None
        and not rec.nonfinite
        and rec.sizes == 0
        and typed
        and not any(n[0] in NO_GRAD or _nonfinite_const(n) for n in rec.nodes)
    )


def _wrt(rec):
    """The inputs of ``rec`` that :func:`check_grad` differentiates (its float64 ones)."""
    return [k for k, n in enumerate(rec.nodes) if n[0] == "input" and n[2] == "float64"]


def _rounding_scale(rec, env, k):
    """How far rounding may move numpy's cost where input ``k`` moves (a float times an
    integer of 2**62 rounds by hundreds): the magnitudes of the values it reaches, in
    units of float64's epsilon; 0 but for a ``"wide"`` recipe (the default's values are
    near 1, as its tolerance assumes)."""
    if rec.values != "wide":
        return 0.0
    reached = _reached(rec, lambda j, node: k in node[1]) | {k}
    total = sum(float(np.sum(np.abs(env[j].astype("float64")))) for j in reached if j in env)
    return 16 * np.finfo("float64").eps * total


def _kinks(rec, env, needed) -> bool:
    """Whether ``rec`` meets a kink at the values ``env`` (numpy's of the nodes
    ``needed``: :func:`reference`): a ``max`` or ``min`` reaching its extreme at more
    than one element, ``maximum``/``minimum`` of equal operands, a comparison of
    operands closer than finite differences can tell apart, ties in a sort, a ``std`` of
    equal elements, a step (:data:`STEPS`) within reach. Only the nodes the outputs need
    count (numpy may refuse another: the max of an empty row)."""
    for k, node in enumerate(rec.nodes):
        if k not in needed:
            continue
        op = node[0]
        x = env[node[1][0]] if not _is_leaf(node) and node[1] else None
        if op in ("max", "maxk", "min"):
            axis = node[2][0] if op != "max" else node[2]
            m = x.max(axis=axis, keepdims=True) if op != "min" else x.min(axis, keepdims=True)
            if np.any((x == m).sum(axis=axis) > 1):
                return True
        elif op in ("sort", "argsort"):
            s = np.sort(x, axis=node[2])  # axis None: flattened
            if s.size and np.any(np.abs(np.diff(s, axis=0 if node[2] is None else node[2])) < 1e-4):
                return True
        elif op == "std":
            if np.any(reduce(np.var, x, node[2], "float64") < 1e-8):
                return True
        elif op in STEPS:
            # A step within finite differences' reach: at integers, halves, or 0.
            step = STEPS[op]
            frac = np.abs(x - np.round(x - step) - step) if step is not None else np.abs(x)
            if np.any(frac < 1e-4):
                return True
        elif node[0] in ("maximum", "minimum", "lt", "le", "gt", "ge", "eq", "neq"):
            x, y = (env[a].astype(float) for a in node[1])
            if np.any(np.abs(x - y) <= 1e-4 * (1 + np.abs(x))):
                return True
    return False


def check_grad(rec, mode=None, eps=1e-6, tol=1e-5) -> list:
    """The gradient of ``sum_j w_j * sum(output_j)`` with respect to every input, by
    :func:`~theano_dag.gradient.grad` compiled in ``mode``, against central differences
    of numpy's value of the same cost; the problems found (empty: it agrees)."""
    if not differentiable(rec):
        return []
    _, _, syms = _build(rec)
    inputs = _wrt(rec)
    given = [k for k, n in enumerate(rec.nodes) if n[0] == "input" and k not in inputs]
    weights = [1.0 + 0.37 * j for j in range(len(rec.outputs))]
    cost = sum(w * syms[k].sum() for w, k in zip(weights, rec.outputs))
    wrt = [syms[k] for k in inputs]
    try:
        gs = grad(cost, wrt, disconnected_inputs="ignore")
        f = function(wrt + [syms[k] for k in given], gs, mode=mode, on_unused_input="ignore")
    except Exception as e:
        return [f"grad raised {type(e).__name__}: {e}"]
    vals = _values(rec, 0)
    needed = _needed(rec)

    def costs(env):
        # Per output: one that the moved input does not reach differs by exactly 0 (an
        # int64 output of 2**62 added to the cost would round the difference away).
        return np.array([w * float(np.sum(env[k])) for w, k in zip(weights, rec.outputs)])

    def numpy_costs(v):
        return costs(reference(rec, v, only=needed))

    env = reference(rec, vals, only=needed)
    if _kinks(rec, env, needed):
        # max's gradient goes to every element equal to the maximum (Theano's and
        # PyTensor's convention); finite differences count one, and a step across a
        # kink measures neither side. A broadcast row makes such ties: the graph is
        # left out, not reported.
        return []
    if not np.isfinite(costs(env)).all():
        return []  # a wide integer made an infinity (exp2 of 2**64 - 2): nothing to measure
    got = f(*[laid_out(vals[k], _layout_of(rec, 0, k)) for k in inputs + given])
    problems = []
    for k, g in zip(inputs, got):
        # Central differences of large terms round by as much (over eps).
        atol = tol + _rounding_scale(rec, env, k) / eps
        num = np.zeros_like(vals[k])
        for i in np.ndindex(vals[k].shape):
            v = {j: a.copy() for j, a in vals.items()}
            v[k][i] += eps
            up = numpy_costs(v)
            v[k][i] -= 2 * eps
            num[i] = np.sum(up - numpy_costs(v)) / (2 * eps)
        if not np.allclose(np.asarray(g), num, rtol=tol, atol=atol):
            err = np.max(np.abs(np.asarray(g) - num))
            problems.append(f"gradient wrt {_name(k)} differs (max abs error {err:.3g})")
    return problems


# -- shrinking and reproducing -------------------------------------------------------


def _refs(rec):
    used = set(rec.outputs)
    if rec.update is not None:
        used.add(rec.update)
    for node in rec.nodes:
        if not _is_leaf(node):
            used.update(node[1])
    return used


def _without(rec, k):
    """``rec`` without node ``k`` (which nothing uses)."""

    def m(i):
        return i - (i > k)

    nodes = []
    for j, node in enumerate(rec.nodes):
        if j == k:
            continue
        if _is_leaf(node):
            nodes.append(node)
        else:
            nodes.append((node[0], tuple(m(a) for a in node[1]), node[2]))
    dims = rec.dims[:k] + rec.dims[k + 1 :]
    dtypes = rec.dtypes[:k] + rec.dtypes[k + 1 :]
    upd = None if rec.update is None else m(rec.update)
    return replace(
        rec, nodes=nodes, outputs=[m(o) for o in rec.outputs], update=upd, dims=dims, dtypes=dtypes
    )


def _bypass(rec, k, a):
    """``rec`` with every use of node ``k`` reading node ``a`` instead."""

    def m(i):
        return a if i == k else i

    nodes = [n if _is_leaf(n) else (n[0], tuple(m(x) for x in n[1]), n[2]) for n in rec.nodes]
    outs = sorted({m(o) for o in rec.outputs})
    return replace(rec, nodes=nodes, outputs=outs)


def shrink(rec, fails, budget=200) -> Recipe:
    """A smaller recipe for which ``fails(recipe)`` still holds: small lengths, finite
    inputs, outputs dropped or moved to an argument of theirs, the update dropped, ops
    bypassed, unused nodes removed."""
    changed = True
    while changed and budget > 0:
        changed = False
        rec = _prune(rec)
        candidates = []
        if rec.sizes:
            candidates.append(replace(rec, sizes=0))
        if rec.nonfinite:
            candidates.append(replace(rec, nonfinite=False))
        if len(rec.outputs) > 1:
            for j in range(len(rec.outputs)):
                candidates.append(replace(rec, outputs=rec.outputs[:j] + rec.outputs[j + 1 :]))
        if rec.update is not None:
            candidates.append(replace(rec, update=None))
        for j, o in enumerate(rec.outputs):
            node = rec.nodes[o]
            if not _is_leaf(node):
                for a in node[1]:
                    outs = sorted(set(rec.outputs[:j] + [a] + rec.outputs[j + 1 :]))
                    candidates.append(replace(rec, outputs=outs))
        # Bypass an op: its users read one of its args of the same type instead.
        for k, node in enumerate(rec.nodes):
            if _is_leaf(node) or k == rec.update:
                continue
            for a in node[1]:
                if rec.dims[a] == rec.dims[k] and rec.dtypes[a] == rec.dtypes[k]:
                    candidates.append(_bypass(rec, k, a))
        for cand in candidates:
            budget -= 1
            if fails(cand):
                rec, changed = cand, True
                break
        if changed:
            continue
        # An unused input changes the function's signature: asked.
        used = _refs(rec)
        for k in reversed(range(len(rec.nodes))):
            if k not in used:
                cand = _without(rec, k)
                budget -= 1
                if fails(cand):
                    rec, changed = cand, True
                    break
    return _prune(rec)


def _prune(rec):
    """``rec`` without the ops nothing uses (they change nothing the graph computes)."""
    while True:
        used = _refs(rec)
        unused = [k for k, n in enumerate(rec.nodes) if k not in used and not _is_leaf(n)]
        if not unused:
            return rec
        rec = _without(rec, unused[-1])


def _report(call, got, want, tol, int_rtols):
    """Print each output against numpy's; the number that differ."""
    bad = 0
    for j, (g, w) in enumerate(zip(got, want)):
        why = close(np.asarray(g), np.asarray(w), tol, None, (int_rtols + [0.0] * len(got))[j])
        bad += why is not None
        print(f"call {call}, output {j}: {why or 'ok'}")
        if why:
            print(
                "  got:  ",
                np.asarray(g).reshape(-1)[:8],
                "\n  numpy:",
                np.asarray(w).reshape(-1)[:8],
            )
    return bad


def _script_head(rec, title, flags):
    """The common part of a reproducer: imports, flags, the helpers it calls, the graph
    (as ``v0``, ``v1``, ...) and ``numpy_values``, numpy's values of the outputs and of
    the shared variable's update."""
    lines = [
        f"# theano_dag fuzz reproducer: {title}, recipe seed {rec.seed}",
        "import math",
        "import sys",
        "",
        "import numpy as np",
        "",
        "import theano_dag.tensor as tt",
        "from theano_dag.compile.debugmode import DebugMode",
        "from theano_dag.compile.function import function",
        "from theano_dag.compile.io import Out",
        "from theano_dag.compile.mode import Mode",
        "from theano_dag.compile.sharedvalue import shared",
        "from theano_dag.config import config",
        "from theano_dag.engines.cpu.linker import CPULinker",
        "from theano_dag.engines.cpu.native import ckernel",
        "from theano_dag.engines.dask.linker import DaskLinker",
        "from theano_dag.gradient import grad",
        "from theano_dag.ifelse import ifelse",
        "",
        "nan, inf = np.nan, np.inf",
        "np.seterr(all=\"ignore\")  # numpy's values hold NaN and overflows as the graph's do",
    ]
    for flag, value in flags.items():
        lines.append(f"config.{flag} = {value!r}" + ("  # numpy only" if flag == "cxx" else ""))
    text = " ".join(_code(n, "numpy", d) for n, d in zip(rec.nodes, rec.dtypes) if not _is_leaf(n))
    # By name, not by "name(": ``ew(sigmoid, ...)`` passes a helper without calling it.
    helpers = [h for h in _NP_HELPERS if re.search(rf"\b{h.__name__}\b", text)]
    if cast_in_range in helpers:
        helpers.insert(0, cast_bounds)
    if cast in helpers:
        lines.append("from theano_dag.scalar import cast_array")
    wide = [wrap_values] if rec.values != "default" else []
    wide += [laid_out] if rec.layouts != "default" else []
    wide += [aliased_arg] if rec.layouts == "aliased" else []
    for h in wide + [input_value, close, _report] + helpers:
        lines += ["", "", _SOURCES[h.__name__]]
    lines += ["", ""]
    s = rec.shared_index
    for k, node in enumerate(rec.nodes):
        if node[0] == "input":
            lines.append(f"{_name(k)} = {_input_type(node[1], node[2])}({_name(k)!r})")
        elif node[0] == "shared":
            bc = tuple(d == 1 for d in node[1])
            shape = _shape(node[1], _call_sizes(rec)[0])
            value = f"input_value({_seed_of(rec, 0, k)}, {shape}, {node[2]!r}, False)"
            lines.append(f"{_name(k)} = shared({value}, name={_name(k)!r}, broadcastable={bc!r})")
        else:
            lines.append(f"{_name(k)} = {_code(node, 'graph')}")
    # numpy's values, in a function of the inputs (and the shared variable's state).
    inputs = [k for k, n in enumerate(rec.nodes) if n[0] == "input"]
    params = ", ".join(_name(k) for k in inputs + ([s] if s is not None else []))
    lines += ["", "", f"def numpy_values({params}):"]
    for k, node in enumerate(rec.nodes):
        if not _is_leaf(node):
            lines.append(f"    {_name(k)} = {_code(node, 'numpy', rec.dtypes[k])}")
    outs = ", ".join(_name(k) for k in rec.outputs)
    new_state = _name(rec.update) if rec.update is not None else "None"
    lines += [f"    return [{outs}], {new_state}", "", ""]
    return lines


# The helpers' text, read once: a run outlives edits of this file.
_SOURCES = {
    h.__name__: textwrap.dedent(inspect.getsource(h)).rstrip()
    for h in (wrap_values, laid_out, aliased_arg, input_value, close, _report) + _NP_HELPERS
}


def _input_values(rec, call, inputs):
    return [
        f"{_name(k)}_value = input_value({_seed_of(rec, call, k)}, "
        f"{_shape(rec.nodes[k][1], _call_sizes(rec)[call])}, {rec.nodes[k][2]!r}, "
        f"{rec.nonfinite}{', values=' + repr(rec.values) if rec.values != 'default' else ''})"
        for k in inputs
    ]


def _aliasing_lines(rec, inputs, fed_back):
    """A reproducer's second call under ``layouts="aliased"``: what :func:`aliases` gives
    each input, as ``_check_engine`` gives it."""
    lines, fed = [], []
    s = rec.shared_index
    for pos, k in enumerate(inputs):
        how = fed_back.get(k)
        if how is None:
            continue
        nm = f"{_name(k)}_value"
        if how == ("shared",):
            lines += [
                f"# {_name(k)}: the shared variable's own array (its value then {_name(k)}'s)",
                f"_held = aliased_arg({_name(s)}.get_value(borrow=True), {nm}, write=False)",
                "if _held is not None:",
                f"    {nm}, args[{pos}] = _held.copy(), _held",
            ]
        else:
            j = how[1]
            unshared = " and ".join(
                [f"not np.shares_memory(prev[{j}], args[{p}])" for p in fed] or ["True"]
            )
            lines += [
                f"# {_name(k)}: output {j} of the first call fed back, {_name(k)}'s value in it",
                f"if {unshared} and aliased_arg(prev[{j}], {nm}) is not None:",
                f"    args[{pos}] = prev[{j}]",
            ]
        fed.append(pos)
    return lines


def reproducer(rec, engine) -> str:
    """A stand-alone script running ``rec`` on ``engine``: the two calls of :func:`check`,
    each output printed beside numpy's value (it needs theano_dag and numpy, not this
    module); it exits with 1 when an output differs."""
    mode, flags, build = ENGINES[engine]
    lines = _script_head(rec, f"engine {engine}", flags)
    inputs, s = [k for k, n in enumerate(rec.nodes) if n[0] == "input"], rec.shared_index
    upd = f", updates=[({_name(s)}, {_name(rec.update)})]" if rec.update is not None else ""
    ins = ", ".join(_name(k) for k in inputs)
    outs = ", ".join(_name(k) for k in rec.outputs)
    fed_back = aliases(rec)
    if fed_back:
        outs = ", ".join(f"Out({_name(k)}, borrow=True)" for k in rec.outputs)
    body = [f"f = function([{ins}], [{outs}]{upd}, mode={mode}, on_unused_input='ignore')"]
    if s is not None:
        body.append(f"state = {_name(s)}.get_value()")
    body.append("bad = 0")
    for call in (0, 1):
        body.append(f"# call {call}: lengths {_call_sizes(rec)[call]}")
        body += _input_values(rec, call, inputs)
        args = [f"{_name(k)}_value" for k in inputs]
        laid = [
            f"{a}.copy()"
            if rec.layouts in ("default", "aliased")
            else f"laid_out({a}, {_layout_of(rec, call, k)!r})"
            for a, k in zip(args, inputs)
        ]
        body.append(f"args = [{', '.join(laid)}]")
        if call == 1:
            body += _aliasing_lines(rec, inputs, fed_back)
        body.append("got = f(*args)")
        if call == 0 and fed_back:
            body.append("prev = list(got)  # the buffers the function keeps (borrowed)")
        state_arg = ["state"] if s is not None else []
        body.append(f"want, new_state = numpy_values({', '.join(args + state_arg)})")
        if s is not None and rec.update is not None:
            body.append(f"got, want = got + [{_name(s)}.get_value()], want + [new_state]")
            body.append(f"state = {_name(s)}.get_value()  # the engine's, for the next call")
        body.append(f"bad += _report({call}, got, want, {_tol(rec)!r}, {_int_rtols(rec)!r})")
    body.append("sys.exit(1 if bad else 0)")
    if build == "late":
        lines.append("from theano_dag.testing.late_loads import late_loads  # noqa: E402")
        lines.append(f"with late_loads({late_points(rec)!r}):  # C libraries loaded there")
        lines += ["    " + b for b in body]
    elif build:
        lines.append(f"with ckernel.compile_mode({build!r}):  # C kernels from the first call")
        lines += ["    " + b for b in body]
    else:
        lines += body
    return "\n".join(lines) + "\n"


def grad_reproducer(rec, eps=1e-6, tol=1e-5) -> str:
    """A stand-alone script for a :func:`check_grad` failure: the gradient, compiled in
    the default mode, beside central differences of numpy's cost; it exits with 1 when
    they differ."""
    lines = _script_head(rec, "gradient, default mode", {})
    inputs = [k for k, n in enumerate(rec.nodes) if n[0] == "input"]
    wrt = _wrt(rec)
    inputs = wrt + [k for k in inputs if k not in wrt]  # the differentiated ones first
    ins = ", ".join(_name(k) for k in inputs)
    wrt_names = ", ".join(_name(k) for k in wrt)
    order = [inputs.index(k) for k in sorted(inputs)]  # numpy_values takes node order
    weights = [1.0 + 0.37 * j for j in range(len(rec.outputs))]
    cost = " + ".join(f"{w!r} * {_name(k)}.sum()" for w, k in zip(weights, rec.outputs))
    lines += [
        f"cost = {cost}",
        f"f = function([{ins}], grad(cost, [{wrt_names}], disconnected_inputs='ignore'),",
        "             on_unused_input='ignore')",
        "",
        "",
        "def numpy_costs(values):",
        f"    outs, _ = numpy_values(*[values[j] for j in {order!r}])",
        f"    return np.array([w * float(np.sum(o)) for w, o in zip({weights!r}, outs)])",
        "",
        "",
    ]
    lines += _input_values(rec, 0, inputs)
    args = "[v.copy() for v in values]"
    if rec.layouts != "default":
        hows = [_layout_of(rec, 0, k) for k in inputs]
        args = f"[laid_out(v, how) for v, how in zip(values, {hows!r})]"
    lines += [
        f"values = [{', '.join(_name(k) + '_value' for k in inputs)}]",
        "bad = 0",
        f"for k, g in enumerate(f(*{args})):",
        "    num = np.zeros_like(values[k])",
        "    for i in np.ndindex(values[k].shape):",
        "        up = [v.copy() for v in values]",
        f"        up[k][i] += {eps!r}",
        "        down = [v.copy() for v in values]",
        f"        down[k][i] -= {eps!r}",
        f"        num[i] = np.sum(numpy_costs(up) - numpy_costs(down)) / {2 * eps!r}",
        f"    why = close(np.asarray(g), num, {tol!r})",
        "    bad += why is not None",
        "    print(f'gradient wrt input {k}: {why or \"ok\"}')",
        "    if why:",
        "        print('  grad:   ', np.asarray(g).reshape(-1)[:8])",
        "        print('  numeric:', num.reshape(-1)[:8])",
        "sys.exit(1 if bad else 0)",
    ]
    return "\n".join(lines) + "\n"


# -- command line ----------------------------------------------------------------------


def _check_grad_on(rec, engine):
    """:func:`check_grad` in ``engine``'s mode, flags and C build mode (None: the
    default mode)."""
    if engine is None:
        return check_grad(rec)
    _, flags, build = ENGINES[engine]
    with engine_context(flags, build, rec):
        return check_grad(rec, mode=_mode(engine))


def run_grads(
    n,
    seed=0,
    out=sys.stdout,
    engines=None,
    values="default",
    lazy=False,
    extra=False,
    layouts="default",
):
    """Check the gradients of ``n`` differentiable recipes from ``seed`` on each of
    ``engines`` (names of :data:`ENGINES`; default: the default mode only), drawn with
    ``values`` (:data:`VALUES`), their inputs laid out as ``layouts`` says
    (:data:`LAYOUTS`); the failures as ``(index, "grad" or "grad:<engine>",
    problems, recipe)``."""
    rng = np.random.default_rng(seed)
    failures, done = [], 0
    while done < n:
        if done and done % 100 == 0:
            print(f"# {done} gradient graphs, {len(failures)} failing", file=out, flush=True)
        rec = replace(
            generate(rng, grad=True, values=values, lazy=lazy, extra=extra), layouts=layouts
        )
        if not differentiable(rec):
            continue
        for engine in engines or [None]:
            problems = _check_grad_on(rec, engine)
            if not problems:
                continue
            small = shrink(
                rec, lambda r, e=engine: differentiable(r) and bool(_check_grad_on(r, e))
            )
            tag = "grad" if engine is None else f"grad:{engine}"
            failures.append((done, tag, problems, small))
            print(f"# gradient graph {done} (seed {seed}, {tag}): {problems[0]}", file=out)
            print(f"# shrunk: {small!r}", file=out)
            print(grad_reproducer(small), file=out, flush=True)
        done += 1
    return failures


def _engines_for(i, engines, c_every, opencl_every):
    """The engines graph ``i`` runs on: C kernels every ``c_every``-th (the poisoned C
    engine half-way between), OpenCL every ``opencl_every``-th."""
    names = []
    for e in engines:
        if e == "cpu_c" and i % c_every != 0:
            continue
        if e == "cpu_poison_c" and i % c_every != c_every // 2:
            continue
        if e == "cpu_late_c" and i % c_every != 0:
            continue
        if e == "opencl" and i % opencl_every != 0:
            continue
        names.append(e)
    return names


def run(
    n,
    seed=0,
    engines=None,
    c_every=10,
    opencl_every=10,
    out=sys.stdout,
    shrink_failures=True,
    classified=None,
    start=0,
    trace=False,
    values="default",
    function_cache_counts=None,
    lengths="default",
    lazy=False,
    extra=False,
    layouts="default",
):
    """Check recipes ``start`` to ``n - 1`` from ``seed``; the C engines on every
    ``c_every``-th graph and OpenCL on every ``opencl_every``-th (each compiles a
    program). Returns the failures as ``(index, engine, problems, recipe)``. A graph on
    which an engine differs only through a documented rewrite (:func:`classify`) is no
    failure: it is appended to ``classified`` (a list, when given) as ``(index, engine,
    tag, problems)`` and printed as one line. ``trace``: print each graph's index
    before running it (to find the graph that ends the process). ``values``: the value
    distribution (:data:`VALUES`; ``"wide"``: integers where their arithmetic wraps).
    ``lengths``: the small recipes' lengths (:data:`LENGTHS`; ``"edge"``:
    :data:`EDGE_SIZES`, the same graphs as the default's). ``layouts``: the inputs'
    memory layouts (:data:`LAYOUTS`; ``"mixed"``: the same graphs and values, each input
    array in a layout of :data:`LAYOUT_KINDS`).
    ``function_cache_counts`` (a Counter, when given): each graph is also compiled with
    the cache of optimized graphs and compared with its compile without it
    (:func:`check_function_cache`, whose counts it adds up); a difference is a failure
    of engine ``cache:<engine>``, never classified."""
    if lengths not in LENGTHS:
        raise ValueError(f"lengths must be one of {LENGTHS}, not {lengths!r}")
    if layouts not in LAYOUTS:
        raise ValueError(f"layouts must be one of {LAYOUTS}, not {layouts!r}")
    engines = engines or available_engines()
    rng = np.random.default_rng(seed)
    failures = []
    for i in range(n):
        rec = generate(rng, values=values, lazy=lazy, extra=extra)
        rec = replace(rec, lengths=lengths, layouts=layouts)
        if i < start:
            continue
        if i > start and i % 100 == 0:
            n_cls = "" if classified is None else f", {len(classified)} classified"
            print(f"# {i} graphs, {len(failures)} failing{n_cls}", file=out, flush=True)
        if trace:
            print(f"# graph {i}", file=out, flush=True)
        names = _engines_for(i, engines, c_every, opencl_every)
        try:
            problems = check(rec, names)
        except Exception:  # numpy's side failed: a bug of the fuzzer, reported, not fatal
            print(f"# graph {i} (seed {seed}): the fuzzer raised: {rec!r}", file=out)
            traceback.print_exc(file=out)
            failures.append((i, "fuzzer", [("fuzzer", traceback.format_exc())], rec))
            continue
        if function_cache_counts is not None:
            # (After check: the graphs drawn and the calls to numpy are the same as without.)
            cached = check_function_cache(rec, names, function_cache_counts)
            for engine in dict.fromkeys(e for e, _ in cached):
                what = [w for e, w in cached if e == engine]

                def fails(r, e=engine):
                    return bool(check_function_cache(r, [e]))

                small = shrink(rec, fails) if shrink_failures else rec
                failures.append((i, f"cache:{engine}", [(engine, w) for w in what], small))
                print(f"# graph {i} (seed {seed}): cache:{engine}: {what[0]}", file=out)
                print(f"# shrunk: {small!r}", file=out, flush=True)
        failing = []
        for engine in dict.fromkeys(e for e, _ in problems):
            what = [w for e, w in problems if e == engine]
            tag = classify(rec, engine)
            if tag is None:
                failing.append(engine)
                continue
            if classified is not None:
                classified.append((i, engine, tag, what))
            print(f"# graph {i} (seed {seed}): {engine}: classified {tag}: {what[0]}", file=out)
        if failing:
            engine = failing[0]
            small = rec
            if shrink_failures:

                def fails(r, e=engine):
                    return bool(check(r, [e])) and classify(r, e) is None

                small = shrink(rec, fails)
            failures.append((i, engine, [p for p in problems if p[0] in failing], small))
            for e in failing:
                what = next(w for x, w in problems if x == e)
                print(f"# graph {i} (seed {seed}): {e}: {what}", file=out)
            print(f"# shrunk on {engine}: {small!r}", file=out)
            print(reproducer(small, engine), file=out, flush=True)
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description="Differential fuzzing of theano_dag's engines.")
    ap.add_argument("--n", type=int, default=200, help="graphs to run")
    ap.add_argument("--start", type=int, default=0, help="skip the graphs before this one")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default=None, help="comma-separated (default: all here)")
    ap.add_argument("--c-every", type=int, default=10, help="C kernels on every k-th graph")
    ap.add_argument("--opencl-every", type=int, default=10)
    ap.add_argument("--grads", type=int, default=None, help="gradient graphs (default N/5)")
    ap.add_argument("--grad-seed", type=int, default=None, help="default: --seed")
    ap.add_argument(
        "--grad-engines", default=None, help="comma-separated (default: the default mode)"
    )
    ap.add_argument("--trace", action="store_true", help="print each graph's index first")
    ap.add_argument(
        "--function-cache",
        action="store_true",
        help="also compile each graph with the cache of optimized graphs (stored, then "
        "loaded as a fresh process loads it) and require the values of the compile "
        "without it, bit for bit",
    )
    ap.add_argument(
        "--values",
        choices=VALUES,
        default="default",
        help="default: small integers (what cited seeds mean); wide: integers across each "
        "dtype's range where sums and products wrap, more integer and bool graphs",
    )
    ap.add_argument(
        "--lazy",
        action="store_true",
        help="draw lazy ifelse graphs too (LAZY_OPS; other graphs than a seed's default)",
    )
    ap.add_argument(
        "--extra-ops",
        action="store_true",
        help="draw the extra ops too (EXTRA_OPS: special functions, flips, rolls, "
        "triangles, logsumexp, diff, unique...; other graphs than a seed's default)",
    )
    ap.add_argument(
        "--lengths",
        choices=LENGTHS,
        default="default",
        help="default: the small graphs' lengths every cited seed means; edge: lengths of 1 "
        "and 0 on axes not declared broadcastable (EDGE_SIZES), where the engines must "
        "give numpy's values, or raise where numpy raises",
    )
    ap.add_argument(
        "--layouts",
        choices=LAYOUTS,
        default="default",
        help="default: C-ordered input arrays; mixed: each input of each call Fortran-"
        "ordered, reversed, strided, rotated, read-only, unaligned or with odd strides on "
        "its unit axes (LAYOUT_KINDS; the same graphs and values); aliased: the outputs "
        "borrowed, and the second call given the function's own arrays where they fit "
        "(the shared variable's, an output of the first call fed back)",
    )
    ap.add_argument(
        "--dask-cluster",
        type=int,
        default=0,
        metavar="N",
        help="start a distributed LocalCluster of N worker processes (one thread each) "
        "and run engine dask_cluster on it, the Dask engine as a cluster runs it (added "
        "to --engines and --grad-engines)",
    )
    a = ap.parse_args(argv)
    if not a.dask_cluster:
        return _fuzz(a)
    with _local_cluster(a.dask_cluster):
        return _fuzz(a)


@contextlib.contextmanager
def _local_cluster(n):
    """A ``distributed.LocalCluster`` of ``n`` worker processes of one thread each on
    the loopback interface, and its client as the current one."""
    import distributed  # (deferred: the dask extra is optional, and only this flag needs it)

    with (
        distributed.LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def _fuzz(a):
    """``main``'s run, with the arguments it parsed."""
    engines = a.engines.split(",") if a.engines else None
    grad_engines = a.grad_engines.split(",") if a.grad_engines else None
    if a.dask_cluster:
        engines = [*(engines or available_engines()), "dask_cluster"]
        grad_engines = [*(grad_engines or [None]), "dask_cluster"]
    n_grads = (a.n - a.start) // 5 if a.grads is None else a.grads
    grad_seed = a.seed if a.grad_seed is None else a.grad_seed
    t0 = time.perf_counter()
    classified = []
    counts = Counter() if a.function_cache else None
    try:
        failures = run(
            a.n,
            a.seed,
            engines,
            a.c_every,
            a.opencl_every,
            classified=classified,
            start=a.start,
            trace=a.trace,
            values=a.values,
            function_cache_counts=counts,
            lengths=a.lengths,
            lazy=a.lazy,
            extra=a.extra_ops,
            layouts=a.layouts,
        )
        t1 = time.perf_counter()
        grad_failures = run_grads(
            n_grads,
            grad_seed,
            engines=grad_engines,
            values=a.values,
            lazy=a.lazy,
            extra=a.extra_ops,
            layouts=a.layouts,
        )
    except Exception:
        traceback.print_exc()
        return 2
    t2 = time.perf_counter()
    print(
        f"{a.n - a.start} {a.values}{' lazy' if a.lazy else ''}"
        f"{' extra' if a.extra_ops else ''} graphs (seed {a.seed}, "
        f"{a.start} to {a.n - 1}"
        f"{', edge lengths' if a.lengths == 'edge' else ''}"
        f"{'' if a.layouts == 'default' else f', {a.layouts} layouts'}), engines "
        f"{engines or available_engines()}: {len(failures)} failing, {len(classified)} "
        f"classified by tag ({', '.join(sorted({c[2] for c in classified})) or 'none'}); "
        f"{t1 - t0:.0f} s; {n_grads} gradient graphs (seed {grad_seed}): "
        f"{len(grad_failures)} failing; {t2 - t1:.0f} s"
    )
    if counts is not None:
        differing = sum(1 for f in failures if f[1].startswith("cache:"))
        print(
            f"function cache: {counts['compiled']} compiles with it, {counts['loaded']} "
            f"loaded from its entries; {differing} graphs differing from the compile "
            "without it"
        )
    return 1 if failures or grad_failures else 0


if __name__ == "__main__":
    sys.exit(main())
