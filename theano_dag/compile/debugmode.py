"""``DebugMode``: a Mode that checks every rewrite and the engine against the reference.

While the graph is optimized, after every change a rewrite makes:

- ``fgraph.check_integrity()`` must pass (the graph's bookkeeping is consistent);
- the replaced variable and its replacement are evaluated with ``Op.perform`` (the
  reference engine) on random inputs, and must be equal within the type's tolerance;
  otherwise ``BadOptimization`` names the rewrite, both variables, both values and the
  difference.

When the function runs, every replacement a rewrite made is checked again on the call's
inputs, as Theano's DebugMode does: an assertion a rewrite removed
(``local_remove_all_assert``) still raises, and a replaced variable (its graph from
before the rewrite) whose value differs from its replacement's gives a
``BadOptimizationWarning`` (``check_calls="raise"``: ``BadOptimization``; on real values
the graph as written can be the inaccurate one). The reference
engine then runs the graph node by node on the same inputs, and each node's ``perform``
must keep its contract: it changes only the inputs its ``destroy_map`` names
(``BadDestroyMap``), its outputs share memory only with the inputs its
``view_map``/``destroy_map`` name, and not with each other when both are used further
(``BadViewMap``), and each output has its variable's dtype and rank, and no NaN or
infinity (``InvalidValueError``) when the inputs had none. The engine's outputs are then
compared with the reference's (``BadEngineOutput`` otherwise). ``profile=True`` prints, after
optimization, each rewrite's time and number of changes.

>>> import numpy as np
>>> import theano_dag
>>> import theano_dag.tensor as tt
>>> x = tt.dvector("x")
>>> f = theano_dag.function([x], tt.log(1 + x) * 2, mode=DebugMode())
>>> f(np.array([0.0, 1.0]))
array([0.        , 1.38629436])
"""

from __future__ import annotations

import copy
import itertools
import sys
import time
import warnings
import weakref
from collections import defaultdict

import numpy as np

from theano_dag.compile.mode import Mode, register_mode
from theano_dag.config import config
from theano_dag.engines.callspec import CallableThunk, as_thunk
from theano_dag.graph.basic import Constant
from theano_dag.graph.op import _C_RUNNER, COp
from theano_dag.graph.rewriting.basic import opt_name, print_profile
from theano_dag.graph.toolbox import BadOptimization, Feature, InputReorder
from theano_dag.printing import debugprint
from theano_dag.tensor.hints import Hint
from theano_dag.tensor.type import values_eq_approx_remove_inf_nan

__all__ = [
    "DebugMode",
    "DebugModeError",
    "BadDestroyMap",
    "BadViewMap",
    "InvalidValueError",
    "DebugOptimizer",
    "RewriteChecker",
    "BadEngineOutput",
    "BadThunkOutput",
    "BadOptimizationWarning",
    "StochasticOrder",
    "sample_value",
    "str_diagnostic",
]

# Lengths tried, in turn, for the dimensions whose length the types leave open, until
# the original graph can be evaluated (a reshape to (2, -1) needs an even size...).
TRIAL_LENGTHS = (3, 4, 2, 6, 5, 1)

# Each optimized graph's replacements (replaced variable, replacement, rewrite's name),
# checked again at each call on its inputs. Held beside the graph, not in it: a graph
# optimized without DebugMode, or unpickled, has none.
_REPLACEMENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _stats_line(label, a) -> str:
    a = np.asarray(a)
    if a.size == 0 or a.dtype.kind not in "biufc":
        return f"  {label}: {a.shape} {a.dtype}"
    return (
        f"  {label}: {a.shape} {a.dtype} {a.strides} {a.min()} {a.max()} "
        f"{int(np.isinf(a).sum())} {int(np.isnan(a).sum())}"
    )


def str_diagnostic(expected, value, rtol, atol) -> str:
    """Several lines saying how ``value`` differs from ``expected`` (Theano's helper of
    the same name, which its test tools import): shape, dtype, strides, min, max and
    counts of infinities and NaNs of each, both values, the absolute and relative
    differences, and the tolerances used (``None``: numpy's ``allclose`` defaults).

    >>> print(str_diagnostic(np.array([1.0, 2.0]), np.array([1.0, 2.5]), None, None))
    ... # doctest: +NORMALIZE_WHITESPACE
                : shape, dtype, strides, min, max, n_inf, n_nan:
      Expected : (2,) float64 (8,) 1.0 2.0 0 0
      Value    : (2,) float64 (8,) 1.0 2.5 0 0
      expected : [1. 2.]
      value    : [1.  2.5]
      Max Abs Diff: 0.5 Mean Abs Diff: 0.25 Median Abs Diff: 0.25 Std Abs Diff: 0.25
      Max Rel Diff: 0.25 Mean Rel Diff: 0.125 Median Rel Diff: 0.125 Std Rel Diff: 0.125
      rtol, atol: 1e-05 1e-08
      1 of 2 elements differ beyond the tolerances
    """
    rtol = 1e-05 if rtol is None else rtol
    atol = 1e-08 if atol is None else atol
    lines = [
        "            : shape, dtype, strides, min, max, n_inf, n_nan:",
        _stats_line("Expected ", expected),
        _stats_line("Value    ", value),
        f"  expected : {expected}",
        f"  value    : {value}",
    ]
    try:
        ov, nv = np.asarray(expected, dtype=float), np.asarray(value, dtype=float)
        absdiff = np.abs(nv - ov)
        with np.errstate(divide="ignore", invalid="ignore"):
            reldiff = absdiff / np.abs(ov)
        for name, d in (("Abs", absdiff), ("Rel", reldiff)):
            lines.append(
                f"  Max {name} Diff: {np.max(d):g} Mean {name} Diff: {np.mean(d):g} "
                f"Median {name} Diff: {np.median(d):g} Std {name} Diff: {np.std(d):g}"
            )
        bad = ~np.isclose(nv, ov, rtol=rtol, atol=atol)
        lines.append(f"  rtol, atol: {rtol:g} {atol:g}")
        lines.append(f"  {int(bad.sum())} of {bad.size} elements differ beyond the tolerances")
    except (TypeError, ValueError):  # shapes that do not broadcast, objects
        lines.append(f"  rtol, atol: {rtol:g} {atol:g}")
    return "\n".join(lines)


class DebugModeError(Exception):
    """What DebugMode found wrong when a function ran (Theano's base class)."""


class BadEngineOutput(DebugModeError):
    """An engine computed an output different from the reference engine's."""


class BadThunkOutput(DebugModeError):
    """Two runs of one node gave different values for its output ``r`` (Theano's
    exception): an op's C code and its Python ``perform`` disagree, or one of them gives
    another value when its output storage holds a buffer already
    (``check_preallocated_output``). ``thunk1``/``val1`` and ``thunk2``/``val2`` name the
    runs and their values, ``inputs_val`` the node's input values."""

    def __init__(self, r, thunk1, val1, thunk2, val2, inputs_val=()):
        self.r = r
        self.thunk1, self.val1 = thunk1, val1
        self.thunk2, self.val2 = thunk2, val2
        self.inputs_val = list(inputs_val)
        super().__init__(self.str_diagnostic())

    def offending_op(self):
        """The class of the op whose two runs disagree."""
        return type(self.r.owner.op)

    def str_diagnostic(self) -> str:
        """What differs, on several lines: the node, its types and shapes, both values."""
        node = self.r.owner
        lines = [
            "BadThunkOutput",
            f"  Apply   : {node}",
            f"  op      : {self.offending_op().__name__}",
            f"  Outputs Type: {self.r.type}",
            f"  Outputs Shape: {getattr(self.val1, 'shape', None)}",
            f"  Outputs Strides: {getattr(self.val1, 'strides', None)}",
            f"  Inputs Type : {[i.type for i in node.inputs]}",
            f"  Inputs Shape: {[getattr(v, 'shape', None) for v in self.inputs_val]}",
            f"  Inputs Strides: {[getattr(v, 'strides', None) for v in self.inputs_val]}",
            f"  {self.thunk1} : {self.val1!r}",
            f"  {self.thunk2} : {self.val2!r}",
        ]
        try:
            lines.append(str_diagnostic(self.val1, self.val2, None, None))
        except Exception:  # a diagnostic must never hide the error
            pass
        return "\n".join(lines)


class StochasticOrder(DebugModeError):
    """Optimizing the same graph again gave another graph (``DebugMode(stability_patience=
    n)`` optimizes it ``n`` times): a rewrite depends on something other than the graph,
    such as the order of a set or the memory addresses of objects."""


class BadDestroyMap(DebugModeError):
    """An op's ``perform`` changed an input its ``destroy_map`` does not name."""


class BadViewMap(DebugModeError):
    """An op's output shares memory with an input its ``view_map`` does not name, or with
    another output while both are used further."""


class InvalidValueError(DebugModeError):
    """An op's output is not a value of its variable's type (dtype, rank), or holds a NaN
    or an infinity its inputs did not have."""


def _arrays(value):
    return value if isinstance(value, np.ndarray) else None


def _non_finite(value) -> bool:
    a = _arrays(value)
    return a is not None and a.dtype.kind in "fc" and not np.isfinite(a).all()


def _check_node(fgraph, node, inputs, before, outputs, check_isfinite=True):
    """The contract of one ``perform`` call (see the module's docstring)."""
    op = node.op
    destroy_map = getattr(op, "destroy_map", {}) or {}
    view_map = getattr(op, "view_map", {}) or {}
    destroyed = {i for idxs in destroy_map.values() for i in idxs}
    for i, (now, was) in enumerate(zip(inputs, before)):
        a, b = _arrays(now), _arrays(was)
        if i in destroyed or a is None or b is None:
            continue
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            raise BadDestroyMap(
                f"DebugMode: {op} changed its input {i} ({node.inputs[i]}), which its "
                f"destroy_map {destroy_map} does not name\n  before: {b!r}\n  after:  {a!r}"
            )
    for k, out in enumerate(outputs):
        a = _arrays(out)
        if a is None:
            continue
        allowed = set(view_map.get(k, ())) | set(destroy_map.get(k, ()))
        declared = [_arrays(inputs[j]) for j in allowed if j < len(inputs)]
        for i, inp in enumerate(inputs):
            b = _arrays(inp)
            if i not in allowed and b is not None and np.may_share_memory(a, b):
                if any(d is not None and np.may_share_memory(b, d) for d in declared):
                    # the input is (a view of) an input the output may alias: one value
                    # given twice, as EqualLengths(n, n) once merge made both lengths one
                    continue
                raise BadViewMap(
                    f"DebugMode: output {k} of {op} shares memory with input {i} "
                    f"({node.inputs[i]}), which its view_map {view_map} does not name"
                )
        var = node.outputs[k]
        ndim, dtype = getattr(var.type, "ndim", None), getattr(var.type, "dtype", None)
        if ndim is not None and (a.ndim != ndim or str(a.dtype) != dtype):
            raise InvalidValueError(
                f"DebugMode: output {k} of {op} is a {a.dtype} array of rank {a.ndim}; "
                f"its type is {var.type}"
            )
    # Two outputs in one buffer are safe only if neither is changed in place later: both
    # views of one input (declared), or one of them not used by another node.
    used = [any(c != "output" for c, _ in fgraph.clients.get(v, [])) for v in node.outputs]
    for k1, o1 in enumerate(outputs):
        for k2 in range(k1 + 1, len(outputs)):
            a, b = _arrays(o1), _arrays(outputs[k2])
            if a is None or b is None or not (used[k1] and used[k2]):
                continue
            shared_input = (set(view_map.get(k1, ())) | set(destroy_map.get(k1, ()))) & (
                set(view_map.get(k2, ())) | set(destroy_map.get(k2, ()))
            )
            if np.may_share_memory(a, b) and not shared_input:
                raise BadViewMap(
                    f"DebugMode: outputs {k1} and {k2} of {op} share memory and both are "
                    "used further, and its view_map does not make them views of one input"
                )
    if check_isfinite and not any(_non_finite(v) for v in inputs):
        for k, out in enumerate(outputs):
            if _non_finite(out):
                raise InvalidValueError(
                    f"DebugMode: output {k} of {op} holds a NaN or an infinity, and its "
                    f"inputs do not\n  {out!r}"
                )


# The kinds of output buffers ``check_preallocated_output`` gives a node (Theano's
# names); "ALL" is all of them.
PREALLOCATED_KINDS = (
    "initial",
    "previous",
    "c_contiguous",
    "f_contiguous",
    "strided",
    "wrong_size",
)


class _Checks:
    """What the reference run checks at each node, read from a DebugMode (or the
    defaults: the node's contract and finite values only)."""

    def __init__(self, mode=None):
        get = (lambda name, default: getattr(mode, name, default)) if mode else (lambda n, d: d)
        self.check_isfinite = get("check_isfinite", True)
        self.check_c = get("check_c_code", True) not in (False, "", 0)
        self.check_py = get("check_py_code", True)
        self.strides = get("require_matching_strides", 0)
        self.prealloc = get("check_preallocated_output", ())
        self.prealloc_ndim = get("check_preallocated_output_ndim", 4)


def _has_own_c_code(op) -> bool:
    """Whether the engines run C code of ``op``'s own: a ``COp``'s ``c_code``, built by
    the CPU engine's compiler (a COp with a thunk of its own, such as ``mrg_uniform``,
    chooses in its ``perform``)."""
    return (
        isinstance(op, COp)
        and op._has_c_code()
        and type(op).make_py_thunk is COp.make_py_thunk
        and _C_RUNNER[0] is not None
        and bool(config.cxx)
    )


def _run_c_code(node, inputs, storage):
    _C_RUNNER[0](node.op, node)(inputs, storage)


def _run_perform(node, inputs, storage):
    node.op.perform(node, inputs, storage)


def _copies(values):
    return [np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in values]


def _run_node(node, run, inputs):
    storage = [[None] for _ in node.outputs]
    with np.errstate(all="ignore"):
        run(node, inputs, storage)
    return [cell[0] for cell in storage]


def _compare_runs(node, name1, vals1, name2, vals2, inputs, strides=0):
    """``BadThunkOutput`` where two runs of ``node`` disagree on an output (and, with
    ``strides``, on its strides: 1 warns, 2 raises)."""
    for var, a, b in zip(node.outputs, vals1, vals2):
        if not _values_equal(var, var, a, b):
            raise BadThunkOutput(var, name1, a, name2, b, inputs)
        sa, sb = getattr(a, "strides", None), getattr(b, "strides", None)
        if strides and sa != sb and getattr(a, "size", 0) > 1:
            if strides >= 2:
                raise BadThunkOutput(var, name1, a, name2, b, inputs)
            warnings.warn(
                f"DebugMode: {name1} and {name2} of {node.op} give output strides {sa} and "
                f"{sb}",
                stacklevel=2,
            )


def _prealloc_fill(dtype):
    """What a preallocated buffer holds before the op writes it: NaN for floats (a value
    read before it is written shows), a large odd number for integers."""
    kind = np.dtype(dtype).kind
    if kind in "fc":
        return np.nan
    if kind == "b":
        return True
    return np.iinfo(dtype).max // 3


def _preallocated_buffers(node, outputs, kinds, max_ndim):
    """``(name, {output index: buffer})`` for each kind of output storage in ``kinds``:
    buffers of the reference outputs' shape and dtype, filled with ``_prealloc_fill``,
    C- or Fortran-ordered, strided views (steps of 1 and 2, both signs, over the last
    ``max_ndim`` dimensions) and one dimension a length too short or too long. Outputs
    that alias an input (``view_map``/``destroy_map``) get none, as in Theano."""
    aliased = {*getattr(node.op, "view_map", {}), *getattr(node.op, "destroy_map", {})}
    outs = {
        k: v
        for k, v in enumerate(outputs)
        if k not in aliased and isinstance(v, np.ndarray) and v.dtype.kind in "biufc"
    }
    if not outs:
        return
    kinds = set(PREALLOCATED_KINDS if "ALL" in kinds else kinds)

    def filled(shape, dtype, order="C"):
        buf = np.empty(shape, dtype=dtype, order=order)
        buf[...] = _prealloc_fill(dtype)
        return buf

    if "previous" in kinds:  # a buffer laid out as the op's own last output
        prev = {k: np.empty_like(v) for k, v in outs.items()}
        for v in prev.values():
            v[...] = _prealloc_fill(v.dtype)
        yield "previous", prev
    if "c_contiguous" in kinds:
        yield "c_contiguous", {k: filled(v.shape, v.dtype) for k, v in outs.items()}
    if "f_contiguous" in kinds:
        yield "f_contiguous", {k: filled(v.shape, v.dtype, "F") for k, v in outs.items()}
    ndim = max(v.ndim for v in outs.values())
    if "strided" in kinds and ndim:
        n = min(ndim, max_ndim)
        for signs in itertools.product((1, -1), repeat=n):
            for step in (1, 2):
                steps = (1,) * (ndim - n) + tuple(s * step for s in signs)
                if all(s == 1 for s in steps):
                    continue  # c_contiguous's buffer
                bufs = {}
                for k, v in outs.items():
                    st = steps[ndim - v.ndim :]
                    big = filled([d * abs(s) for d, s in zip(v.shape, st)], v.dtype)
                    bufs[k] = big[tuple(slice(None, None, s) for s in st)]
                yield f"strided{steps}", bufs
    if "wrong_size" in kinds:
        for d in range(ndim):
            for diff in (-1, 1):
                bufs = {}
                for k, v in outs.items():
                    if d >= v.ndim:
                        continue
                    shape = list(v.shape)
                    shape[d] = max(shape[d] + diff, 0)
                    bufs[k] = filled(shape, v.dtype)
                if bufs:
                    shape_diff = [0] * ndim
                    shape_diff[d] = diff
                    yield f"wrong_size{tuple(shape_diff)}", bufs


def _check_preallocated(fgraph, node, run, run_name, before, want, checks):
    """Run ``node`` again with each kind of preallocated output storage: each output
    must be a value of its type and equal the reference's (``BadThunkOutput``), and the
    node's contract must hold."""
    for name, bufs in _preallocated_buffers(node, want, checks.prealloc, checks.prealloc_ndim):
        inputs = _copies(before)
        storage = [[bufs.get(k)] for k in range(len(node.outputs))]
        with np.errstate(all="ignore"):
            run(node, inputs, storage)
        got = [cell[0] for cell in storage]
        _check_node(fgraph, node, inputs, before, got, check_isfinite=False)
        _compare_runs(node, "Reference value", want, f"{run_name} with {name} output", got, before)


def _reference_run(fgraph, args, checks=None):
    """The outputs of ``fgraph`` on ``args``, node by node, each node's contract checked
    (``_check_node``). A node runs what the engines run: its op's own C code where it
    has some (compared with its Python ``perform`` where it has one of its own too, as
    Theano's DebugMode does), else ``perform``; ``checks`` (``_Checks``) says what else
    is checked."""
    checks = checks or _Checks()
    memo = dict(zip(fgraph.inputs, args))
    for k, (var, value) in enumerate(zip(fgraph.inputs, args)):
        if checks.check_isfinite and _non_finite(value):
            raise InvalidValueError(f"DebugMode: input {k} ({var}) holds a NaN or an infinity")

    def value_of(v):
        return v.data if isinstance(v, Constant) else memo[v]

    for node in fgraph.toposort():
        inputs = [value_of(v) for v in node.inputs]
        before = _copies(inputs)
        op = node.op
        run, run_name = _run_perform, "perform"
        py_outputs = None
        if checks.check_c and _has_own_c_code(op):
            run, run_name = _run_c_code, "c_code"
            if checks.check_py and type(op).perform is not COp.perform:
                try:
                    py_outputs = _run_node(node, _run_perform, _copies(before))
                except NotImplementedError:  # MethodNotDefined too: C code only
                    py_outputs = None
        outputs = _run_node(node, run, inputs)
        _check_node(fgraph, node, inputs, before, outputs, checks.check_isfinite)
        if py_outputs is not None:
            _compare_runs(node, "perform", py_outputs, "c_code", outputs, before, checks.strides)
        if checks.prealloc:
            _check_preallocated(fgraph, node, run, run_name, before, outputs, checks)
        memo.update(zip(node.outputs, outputs))
    return [value_of(o) for o in fgraph.outputs]


def sample_value(var, length, rng, signed):
    """A random value of ``var``'s type: unknown dimensions get ``length``.

    Floats are uniform in [-1, 1) when ``signed``, else in [0.1, 1.1); integers in
    [0, 3) (valid indices along any dimension of length >= 3); bools random.

    >>> rng = np.random.default_rng(0)
    >>> import theano_dag.tensor as tt
    >>> sample_value(tt.dmatrix(), 3, rng, True).shape, sample_value(tt.lscalar(), 3, rng, True) < 3
    ((3, 3), np.True_)
    """
    t = var.type
    shape = tuple(length if s is None else s for s in getattr(t, "shape", ()))
    dtype = np.dtype(getattr(t, "dtype", "float64"))
    if dtype.kind == "f":
        lo, hi = (-1.0, 1.0) if signed else (0.1, 1.1)
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(size=shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 3, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(-1, 1, size=shape) + 1j * rng.uniform(-1, 1, size=shape)).astype(dtype)
    raise TypeError(f"DebugMode: cannot make a random value of type {t} for {var}")


class _Evaluator:
    """Values of variables on one set of input values, computed with ``perform``, memoized.

    A variable's value is computed once: a correct rewrite never changes it, and an
    incorrect one is caught when it is made.
    """

    def __init__(self, inputs, values):
        self.memo = dict(zip(inputs, values))

    def value(self, var):
        memo = self.memo
        if var in memo:
            return memo[var]
        stack = [var]
        while stack:
            v = stack[-1]
            if v in memo:
                stack.pop()
                continue
            if isinstance(v, Constant):
                memo[v] = v.data
                stack.pop()
                continue
            node = v.owner
            if node is None:
                raise KeyError(f"{v} is not an input of the graph being checked")
            missing = [i for i in node.inputs if i not in memo]
            if missing:
                stack.extend(missing)
                continue
            self._run(node)
            stack.pop()
        return memo[var]

    def _run(self, node):
        destroyed = {i for idxs in getattr(node.op, "destroy_map", {}).values() for i in idxs}
        args = [
            copy.deepcopy(self.memo[v]) if k in destroyed else self.memo[v]
            for k, v in enumerate(node.inputs)
        ]
        storage = [[None] for _ in node.outputs]
        # What the engines run: an op's own C code where it has some.
        run = _run_c_code if _has_own_c_code(node.op) else _run_perform
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run(node, args, storage)
        for out, (val,) in zip(node.outputs, storage):
            # Views (DimShuffle, Subtensor...) are copied: a later inplace op in the
            # reference evaluation must not change a memoized value.
            self.memo[out] = copy.deepcopy(val)


def _keep_input_hints(fgraph, values):
    """Random inputs break the promises of hints (a psd matrix, a symmetric one) that
    rewrites rely on: an input a :class:`Hint` marks gets a value that keeps them."""
    where = {v: k for k, v in enumerate(fgraph.inputs)}
    for node in fgraph.apply_nodes:
        if isinstance(node.op, Hint) and node.inputs[0] in where:
            k = where[node.inputs[0]]
            values[k] = _keeping_hints(values[k], dict(node.op.hints))


def _keeping_hints(value, given) -> np.ndarray:
    """``value`` made to keep the promises of the hints ``given``: positive values,
    symmetric matrices (of the last two axes), positive semi-definite ones (``v v^T``
    plus ``n`` times the identity, for ``n x n`` matrices). A value that keeps them
    already is kept.

    >>> v = np.array([[1.0, 2.0], [0.0, 1.0]])
    >>> _keeping_hints(v, {"symmetric": True})
    array([[1., 1.],
           [1., 1.]])
    >>> bool(np.all(np.linalg.eigvalsh(_keeping_hints(v, {"psd": True})) > 0))
    True
    """
    v = np.asarray(value)
    if given.get("positive") and v.dtype.kind in "fi" and (v < 0).any():
        v = np.abs(v)
    if v.ndim < 2 or v.shape[-1] != v.shape[-2] or v.dtype.kind not in "fc":
        return v
    vt = np.swapaxes(v, -1, -2).conj()
    if given.get("psd"):
        symmetric = np.allclose(v, vt)
        if not (symmetric and np.all(np.linalg.eigvalsh(v) >= 0)):
            v = (v @ vt + v.shape[-1] * np.eye(v.shape[-1], dtype=v.dtype)).astype(v.dtype)
    elif given.get("symmetric") and not np.allclose(v, vt):
        v = ((v + vt) / 2).astype(v.dtype)
    return v


def _reason_name(reason) -> str:
    if reason is None:
        return "(no reason given)"
    return reason if isinstance(reason, str) else opt_name(reason)


def _graph_text(var) -> str:
    try:
        return debugprint(var, file="str")
    except Exception as e:  # printing must never hide the real error
        return f"<cannot print the graph: {e}>"


def _values_equal(old_var, new_var, old, new) -> bool:
    check = getattr(new_var.tag, "values_eq_approx", None) or getattr(
        old_var.type, "values_eq_approx", None
    )
    if check is None:
        return bool(old_var.type.values_eq(old, new))
    return bool(check(old, new))


def _bad_optimization(r, new_r, old, new, name) -> BadOptimization:
    """The error naming rewrite ``name``, its two variables, their values and graphs."""
    return BadOptimization(
        r,
        new_r,
        old,
        new,
        reason=name,
        old_graph=_graph_text(r),
        new_graph=_graph_text(new_r),
    )


class BadOptimizationWarning(UserWarning):
    """A rewrite's replacement differed from the graph before it on a call's inputs."""


def _equal_at_call(r, new_r, old, new) -> bool:
    """Equal within the replacement's tolerance, or once the places where the graph
    before the rewrite overflowed or made NaN are set aside (there the rewrites that
    stabilise or reorder give the finite value the written graph lost)."""
    if _values_equal(r, new_r, old, new):
        return True
    if isinstance(old, np.ndarray) and isinstance(new, np.ndarray) and old.dtype.kind in "fc":
        return bool(values_eq_approx_remove_inf_nan(old, new))
    return False


def _check_replacements(fgraph, args, on_mismatch):
    """Each replacement the rewrites made to ``fgraph``, checked on one call's inputs, as
    Theano's DebugMode does at each call. An assertion a rewrite removed still raises its
    ``AssertionError``. A replacement whose value differs from the graph before it gives
    a ``BadOptimizationWarning`` (once per replacement), or with ``on_mismatch="raise"``
    a ``BadOptimization``: on a call's values the graph as written may be the inaccurate
    one (``1 - sigmoid(x)`` at large ``x``), where the random inputs of the compile-time
    check keep every graph well within its range."""
    entry = _REPLACEMENTS.get(fgraph)
    if not entry:
        return
    replacements, warned = entry
    ev = _Evaluator(fgraph.inputs, args)
    for k, (r, new_r, name) in enumerate(replacements):
        try:
            old = ev.value(r)
        except AssertionError:
            raise  # an Assert of the graph before the rewrites: Theano's DebugMode runs it
        except Exception:
            # The graph before the rewrite fails on these values in another way (or reads
            # a variable outside the function's inputs): nothing to compare with.
            continue
        if k in warned and on_mismatch != "raise":
            continue
        try:
            new = ev.value(new_r)
        except KeyError:
            continue
        except Exception as e:
            new, error = f"<error: {type(e).__name__}: {e}>", e
        else:
            if _equal_at_call(r, new_r, old, new):
                continue
            error = None
        bad = _bad_optimization(r, new_r, old, new, name)
        if on_mismatch == "raise":
            raise bad from error
        warned.add(k)
        warnings.warn(
            f"DebugMode: on this call's inputs, the replacement {name} made differs from "
            "the graph before it. Where the graph as written loses precision or "
            "overflows on these values, the rewrite may give the better value; "
            'DebugMode(check_calls="raise") makes this an error.\n' + str(bad),
            BadOptimizationWarning,
            stacklevel=2,
        )


class RewriteChecker(Feature):
    """Checks each change made to a graph: integrity, and equal values before and after.

    ``sample_inputs``: a list of input value lists to evaluate on (default: random
    values, one positive and one signed set). ``counts`` and ``changes`` record, per
    rewrite, the number of changes it made.
    """

    def __init__(self, check_integrity=True, check_values=True, sample_inputs=None, seed=0):
        self.check_integrity = check_integrity
        self.check_values = check_values
        self.sample_inputs = sample_inputs
        self.seed = seed
        self.evaluators: list = []
        self.checked: set = set()
        self.counts: dict = defaultdict(int)
        self.replacements: list = []
        self.values_off_reason = None

    def on_attach(self, fgraph):
        self.fgraph = fgraph
        if self.check_values:
            self.evaluators = self._make_evaluators(fgraph)

    def _make_evaluators(self, fgraph):
        if self.sample_inputs is not None:
            evs = [_Evaluator(fgraph.inputs, list(vals)) for vals in self.sample_inputs]
            for ev in evs:
                for out in fgraph.outputs:
                    ev.value(out)
            return evs
        last_error = None
        for length in TRIAL_LENGTHS:
            evs = []
            try:
                for signed in (False, True):
                    rng = np.random.default_rng(self.seed)
                    vals = [sample_value(v, length, rng, signed) for v in fgraph.inputs]
                    _keep_input_hints(fgraph, vals)
                    ev = _Evaluator(fgraph.inputs, vals)
                    for out in fgraph.outputs:
                        ev.value(out)
                    evs.append(ev)
                return evs
            except Exception as e:  # this length does not suit the graph: try another
                last_error = e
        self.values_off_reason = f"{type(last_error).__name__}: {last_error}"
        warnings.warn(
            "DebugMode: the graph could not be evaluated on random inputs "
            f"({self.values_off_reason}); rewrites are checked for integrity only. "
            "Pass DebugMode(sample_inputs=[[value, ...]]) to check values too.",
            stacklevel=2,
        )
        return []

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        # A reorder moves inputs of an op blind to their order: r and new_r need not be
        # equal, so only the graph's integrity is checked.
        reordered = isinstance(reason, InputReorder)
        if reordered:
            reason = reason.reason
        if reason == "rollback" or (isinstance(reason, tuple) and reason[:1] == ("Revert",)):
            return  # an undo restores what was checked before
        name = _reason_name(reason)
        self.counts[name] += 1
        if self.check_integrity:
            try:
                fgraph.check_integrity()
            except Exception as e:
                raise BadOptimization(
                    f"BadOptimization: after a change made by {name} ({r} -> {new_r}) the "
                    f"graph is inconsistent: {type(e).__name__}: {e}"
                ) from e
        if reordered:
            return
        key = (id(r), id(new_r))
        if key in self.checked:
            return
        self.checked.add(key)
        if self.check_values:
            self.replacements.append((r, new_r, name))
        for ev in self.evaluators:
            old = ev.value(r)
            try:
                new = ev.value(new_r)
            except KeyError:
                return  # the replacement uses a variable the graph did not have: unknown
            except Exception as e:
                error = f"<error: {type(e).__name__}: {e}>"
                raise _bad_optimization(r, new_r, old, error, name) from e
            if not _values_equal(r, new_r, old, new):
                raise _bad_optimization(r, new_r, old, new, name)

    def report(self, stream=sys.stdout):
        """Print the number of changes each rewrite made."""
        print("Changes per rewrite (DebugMode):", file=stream)
        for name, n in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {n:6d}  {name}", file=stream)


class DebugOptimizer:
    """Runs ``inner`` (an optimizer) with a ``RewriteChecker`` on the graph."""

    def __init__(self, inner, mode):
        self.inner = inner
        self.mode = mode
        self.profile = None
        self.checker = None

    def optimize(self, fgraph, *args, **kwargs):
        if self.inner is not None and self.mode.stability_patience > 1:
            self._check_stability(fgraph)
        checker = RewriteChecker(
            self.mode.check_integrity,
            self.mode.check_values,
            self.mode.sample_inputs,
            self.mode.seed,
        )
        fgraph.attach_feature(checker)
        t0 = time.perf_counter()
        try:
            prof = self.inner.optimize(fgraph, *args, **kwargs) if self.inner else None
        finally:
            fgraph.remove_feature(checker)
        elapsed = time.perf_counter() - t0
        if self.mode.check_integrity:
            fgraph.check_integrity()
        self.profile, self.checker = prof, checker
        _REPLACEMENTS[fgraph] = (checker.replacements, set())
        self.mode._report["last_optimizer_profile"] = (prof, checker)
        if self.mode.profile:
            stream = self.mode.stream or sys.stdout
            print(f"DebugMode: optimization took {elapsed:.4f}s (checks included)", file=stream)
            print_profile(prof, stream)
            checker.report(stream)
        return prof

    def _check_stability(self, fgraph):
        """Optimize ``stability_patience`` copies of ``fgraph``; raise StochasticOrder when
        one comes out different from the first."""
        first = None
        for k in range(self.mode.stability_patience):
            copy_k = fgraph.clone(check_integrity=False)
            self.inner.optimize(copy_k)
            listing = _graph_listing(copy_k)
            if first is None:
                first = listing
            elif listing != first:
                lines = [f"  1st: {a}\n  {k + 1}th: {b}" for a, b in zip(first, listing) if a != b]
                raise StochasticOrder(
                    f"DebugMode: optimizing the same graph again gave another graph (try 1 "
                    f"and try {k + 1} of {self.mode.stability_patience}):\n"
                    + "\n".join(lines[:3] or [f"  {len(first)} nodes, then {len(listing)}"])
                )

    def __str__(self):
        return f"DebugOptimizer({self.inner})"


def _graph_listing(fgraph) -> list:
    """``fgraph``'s nodes in order, each as its op and where its inputs come from (an
    input's position, a node's output by the node's rank, a constant's value): equal for
    graphs of the same structure."""
    where = {v: f"in{k}" for k, v in enumerate(fgraph.inputs)}
    listing = []
    for rank, node in enumerate(fgraph.toposort()):
        args = [
            where.get(v) or (repr(v.data) if isinstance(v, Constant) else "?") for v in node.inputs
        ]
        listing.append(f"{node.op}({', '.join(args)})")
        for j, out in enumerate(node.outputs):
            where[out] = f"n{rank}.{j}"
    listing.append(f"outputs {[where.get(o, '?') for o in fgraph.outputs]}")
    return listing


def _global_state_differs(a, b) -> bool:
    """Whether two states of numpy's global generator differ."""
    return a[0] != b[0] or a[2:] != b[2:] or not np.array_equal(a[1], b[1])


class _CheckedLinker:
    """Links with ``inner`` and with the reference engine; each call compares outputs.

    ``mode``'s ``check_isfinite`` is read at each call: Theano's code switches it on a
    mode whose functions exist (``predefined_modes["DEBUG_MODE"].check_isfinite``)."""

    def __init__(self, inner, mode):
        self.inner = inner
        self.mode = mode

    @property
    def check_isfinite(self):
        return self.mode.check_isfinite

    def accept(self, fgraph, no_recycling=None, profile=None):
        inner = self.inner.accept(fgraph, no_recycling=no_recycling, profile=profile)
        new = _CheckedLinker(inner, self.mode)
        new.fgraph = fgraph
        return new

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def make_thunk(self, **kwargs):
        fn, ins, outs = self.inner.make_thunk(**kwargs)
        fgraph = self.fgraph

        def checked():
            args = [copy.deepcopy(c.data) for c in ins]
            # Ops that draw from numpy's global generator (Theano's sparse poisson,
            # binomial...) draw the same values in both runs; the call leaves the
            # generator where the engine left it.
            # A DebugMode pickled before check_calls existed checks as the default.
            check_calls = getattr(self.mode, "check_calls", "warn")
            # The reference run may destroy args: the calls' check reads its own copy.
            replaced_args = copy.deepcopy(args) if check_calls else None
            before = np.random.get_state()
            fn()
            after = np.random.get_state()
            np.random.set_state(before)
            try:
                want = _reference_run(fgraph, args, _Checks(self.mode))
                if _global_state_differs(after, np.random.get_state()):
                    return  # the two runs drew differently: no values to compare
                if check_calls:
                    np.random.set_state(before)
                    _check_replacements(fgraph, replaced_args, check_calls)
            finally:
                np.random.set_state(after)
            for k, (out, c, w) in enumerate(zip(fgraph.outputs, outs, want)):
                if not _values_equal(out, out, w, c.data):
                    raise BadEngineOutput(
                        f"DebugMode: output {k} ({out}) of the engine "
                        f"{type(self.inner).__name__} differs from the reference engine's:\n"
                        f"  engine:    {c.data!r}\n  reference: {w!r}"
                    )

        return CallableThunk(checked, storage_map=as_thunk(fn).storage_map), ins, outs


class DebugMode(Mode):
    """A Mode that checks every rewrite (integrity and values) and the engine.

    ``optimizer`` and ``linker`` are as for ``Mode`` (default: FAST_RUN's rewrites and
    ``config.linker``). ``check_integrity``/``check_values``/``check_engine`` switch the
    checks; ``sample_inputs`` gives input value lists to evaluate rewrites on (default:
    random ones); ``check_calls`` is what a call does with each replacement checked again
    on its inputs: ``"warn"`` (a ``BadOptimizationWarning`` when one differs, once per
    replacement), ``"raise"`` (``BadOptimization``) or ``False`` (no check; the assertions
    a rewrite removed then do not run either); ``check_isfinite=False`` lets the nodes
    make NaNs and infinities;
    ``profile=True`` prints per-rewrite time and change counts to
    ``stream`` after optimization; ``stability_patience=n`` optimizes each graph ``n``
    times and raises ``StochasticOrder`` when the results differ (Theano's check, here
    off unless asked for).

    An op with C code of its own (a ``COp``), which the engines run, is checked as
    Theano checks it: where it has a Python ``perform`` of its own too, both run and
    must agree (``BadThunkOutput``; ``check_py_code=False`` runs the C code only,
    ``check_c_code=False`` the Python code only; ``require_matching_strides`` 1 warns
    and 2 raises where their outputs' strides differ). ``check_preallocated_output``, a
    list of Theano's kinds (``"previous"``, ``"c_contiguous"``, ``"f_contiguous"``,
    ``"strided"``, ``"wrong_size"``, ``"initial"``, or ``"ALL"``), runs every node again
    with its output storage holding a buffer of that kind, filled with NaN (code that
    reuses an output buffer must handle any layout and size), up to
    ``check_preallocated_output_ndim`` strided dimensions. The defaults are Theano's
    flags ``DebugMode__check_c``, ``DebugMode__check_py``, ``DebugMode__check_finite``,
    ``DebugMode__check_strides``, ``DebugMode__check_preallocated_output`` (kinds
    separated by ``:``) and ``DebugMode__check_preallocated_output_ndim``.
    """

    def __init__(
        self,
        linker=None,
        optimizer="default",
        check_integrity=True,
        check_values=True,
        check_engine=True,
        sample_inputs=None,
        check_calls="warn",
        profile=False,
        stream=None,
        seed=0,
        check_isfinite=None,
        stability_patience=None,
        check_c_code=None,
        check_py_code=None,
        check_preallocated_output=None,
        check_preallocated_output_ndim=None,
        require_matching_strides=None,
    ):
        super().__init__(linker=linker, optimizer=optimizer)
        # Theano's: optimize each graph this many times, and raise StochasticOrder when
        # the results differ (None: once, no check; Theano's default is 10).
        self.stability_patience = 1 if stability_patience is None else int(stability_patience)
        self.check_c_code = config.DebugMode__check_c if check_c_code is None else check_c_code
        self.check_py_code = config.DebugMode__check_py if check_py_code is None else check_py_code
        if not (self.check_c_code or self.check_py_code):
            raise ValueError("DebugMode: check_c_code and check_py_code cannot both be off")
        if check_preallocated_output is None:
            check_preallocated_output = config.DebugMode__check_preallocated_output
        if isinstance(check_preallocated_output, str):
            check_preallocated_output = [k for k in check_preallocated_output.split(":") if k]
        unknown = set(check_preallocated_output) - {*PREALLOCATED_KINDS, "ALL"}
        if unknown:
            raise ValueError(
                f"DebugMode: unknown kinds of preallocated output {sorted(unknown)}; "
                f"the kinds are {', '.join((*PREALLOCATED_KINDS, 'ALL'))}"
            )
        self.check_preallocated_output = list(check_preallocated_output)
        self.check_preallocated_output_ndim = (
            config.DebugMode__check_preallocated_output_ndim
            if check_preallocated_output_ndim is None
            else int(check_preallocated_output_ndim)
        )
        if require_matching_strides is None:
            require_matching_strides = config.DebugMode__check_strides
        if require_matching_strides not in (0, 1, 2):
            raise ValueError(
                f"DebugMode: require_matching_strides must be 0, 1 or 2, got "
                f"{require_matching_strides!r}"
            )
        self.require_matching_strides = require_matching_strides
        self.check_integrity = check_integrity
        self.check_values = check_values
        self.check_engine = check_engine
        if check_calls not in ("warn", "raise", False, None):
            raise ValueError(
                f'DebugMode: check_calls must be "warn", "raise" or False, got {check_calls!r}'
            )
        self.check_calls = check_calls or False
        self.sample_inputs = sample_inputs
        self.profile = profile
        self.stream = stream
        self.seed = seed
        self.check_isfinite = (
            config.DebugMode__check_finite if check_isfinite is None else check_isfinite
        )
        # The one thing a DebugMode records (at compile time, never per call): what
        # its last optimization did. A Mode is immutable, so it lives in a dict.
        self._report = {"last_optimizer_profile": None}

    @property
    def last_optimizer_profile(self):
        """``(optimizer profile, checker)`` of the last graph this mode optimized."""
        return self._report["last_optimizer_profile"]

    def __getstate__(self):
        # The report is of a compile in this process, and holds the rewrites' functions,
        # which do not pickle: a pickled function's mode starts without one.
        state = dict(self.__dict__)
        state["_report"] = {"last_optimizer_profile": None}
        return state

    @property
    def optimizer(self):
        return DebugOptimizer(Mode.optimizer.fget(self), self)

    @property
    def linker(self):
        lk = Mode.linker.fget(self)
        # The reference engine too: the checks of each node's perform (destroy and view
        # maps, finite values) are made by the checking run, not by the engine.
        if not self.check_engine:
            return lk
        return _CheckedLinker(lk, self)


# ``function(..., mode="DebugMode")`` makes one when first used; Theano's "DEBUG_MODE" is
# an instance from the start, as Theano's code reads and sets its fields
# (``predefined_modes["DEBUG_MODE"].check_isfinite = False``).
register_mode("DebugMode", DebugMode)
register_mode("DEBUG_MODE", DebugMode())
