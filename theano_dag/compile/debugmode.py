"""``DebugMode``: a Mode that checks every rewrite and the engine against the reference.

While the graph is optimized, after every change a rewrite makes:

- ``fgraph.check_integrity()`` must pass (the graph's bookkeeping is consistent);
- the replaced variable and its replacement are evaluated with ``Op.perform`` (the
  reference engine) on random inputs, and must be equal within the type's tolerance;
  otherwise ``BadOptimization`` names the rewrite, both variables, both values and the
  difference.

When the function runs, the engine's outputs are compared with the reference engine's
on the same inputs (``BadEngineOutput`` otherwise). ``profile=True`` prints, after
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
import sys
import time
import warnings
from collections import defaultdict

import numpy as np

from theano_dag.compile.mode import Mode, register_mode
from theano_dag.engines.basic import PerformLinker
from theano_dag.engines.callspec import CallableThunk, as_thunk
from theano_dag.graph.basic import Constant
from theano_dag.graph.rewriting.basic import opt_name, print_profile
from theano_dag.graph.toolbox import BadOptimization, Feature, InputReorder
from theano_dag.printing import debugprint

__all__ = [
    "DebugMode",
    "DebugOptimizer",
    "RewriteChecker",
    "BadEngineOutput",
    "sample_value",
    "str_diagnostic",
]

# Lengths tried, in turn, for the dimensions whose length the types leave open, until
# the original graph can be evaluated (a reshape to (2, -1) needs an even size...).
TRIAL_LENGTHS = (3, 4, 2, 6, 5, 1)


class BadEngineOutput(Exception):
    """An engine computed an output different from the reference engine's."""


def str_diagnostic(expected, value, rtol, atol):
    """A few lines comparing an array with the one expected (Theano's helper, which its
    tests print when two values differ): shapes, dtypes, ranges, non-finite counts and
    the largest absolute and relative differences.

    >>> print(str_diagnostic(np.array([1.0, 2.0]), np.array([1.0, 2.5]), 1e-5, 1e-8))
      expected: shape (2,) float64, min 1, max 2, 0 inf, 0 nan
      value   : shape (2,) float64, min 1, max 2.5, 0 inf, 0 nan
      largest differences: absolute 0.5, relative 0.2 (rtol 1e-05, atol 1e-08)
    """
    lines = []
    for name, arr in (("expected", expected), ("value   ", value)):
        a = np.asarray(arr)
        if a.size and a.dtype.kind in "biuf":
            info = (
                f"min {a.min():.6g}, max {a.max():.6g}, {int(np.isinf(a).sum())} inf, "
                f"{int(np.isnan(a).sum())} nan"
            )
        else:
            info = "no numbers"
        lines.append(f"  {name}: shape {a.shape} {a.dtype}, {info}")
    try:
        e, v = np.asarray(expected, dtype="float64"), np.asarray(value, dtype="float64")
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN difference is NaN
            diff = np.abs(e - v)
            rel = diff / np.maximum(np.abs(e), np.abs(v))
            largest = np.nanmax(diff), np.nanmax(rel)
        lines.append(
            f"  largest differences: absolute {largest[0]:.6g}, relative "
            f"{largest[1]:.6g} (rtol {rtol}, atol {atol})"
        )
    except (TypeError, ValueError):  # shapes that do not broadcast, or not numbers
        lines.append("  the values cannot be compared elementwise")
    return "\n".join(lines)


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
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            node.op.perform(node, args, storage)
        for out, (val,) in zip(node.outputs, storage):
            # Views (DimShuffle, Subtensor...) are copied: a later inplace op in the
            # reference evaluation must not change a memoized value.
            self.memo[out] = copy.deepcopy(val)


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
        for ev in self.evaluators:
            old = ev.value(r)
            try:
                new = ev.value(new_r)
            except KeyError:
                return  # the replacement uses a variable the graph did not have: unknown
            except Exception as e:
                raise BadOptimization(
                    r,
                    new_r,
                    old,
                    f"<error: {type(e).__name__}: {e}>",
                    reason=name,
                    old_graph=_graph_text(r),
                    new_graph=_graph_text(new_r),
                ) from e
            if not _values_equal(r, new_r, old, new):
                raise BadOptimization(
                    r,
                    new_r,
                    old,
                    new,
                    reason=name,
                    old_graph=_graph_text(r),
                    new_graph=_graph_text(new_r),
                )

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
        self.mode._report["last_optimizer_profile"] = (prof, checker)
        if self.mode.profile:
            stream = self.mode.stream or sys.stdout
            print(f"DebugMode: optimization took {elapsed:.4f}s (checks included)", file=stream)
            print_profile(prof, stream)
            checker.report(stream)
        return prof

    def __str__(self):
        return f"DebugOptimizer({self.inner})"


class _CheckedLinker:
    """Links with ``inner`` and with the reference engine; each call compares outputs."""

    def __init__(self, inner):
        self.inner = inner

    def accept(self, fgraph, no_recycling=None, profile=None):
        new = _CheckedLinker(self.inner.accept(fgraph, no_recycling=no_recycling, profile=profile))
        new.fgraph = fgraph
        new.reference = PerformLinker(allow_gc=False).accept(fgraph)
        return new

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def make_thunk(self, **kwargs):
        fn, ins, outs = self.inner.make_thunk(**kwargs)
        ref = self.reference.make_function(unpack_single=False)
        fgraph = self.fgraph

        def checked():
            args = [copy.deepcopy(c.data) for c in ins]
            fn()
            want = ref(*args)
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
    random ones); ``profile=True`` prints per-rewrite time and change counts to
    ``stream`` after optimization.
    """

    def __init__(
        self,
        linker=None,
        optimizer="default",
        check_integrity=True,
        check_values=True,
        check_engine=True,
        sample_inputs=None,
        profile=False,
        stream=None,
        seed=0,
    ):
        super().__init__(linker=linker, optimizer=optimizer)
        self.check_integrity = check_integrity
        self.check_values = check_values
        self.check_engine = check_engine
        self.sample_inputs = sample_inputs
        self.profile = profile
        self.stream = stream
        self.seed = seed
        # The one thing a DebugMode records (at compile time, never per call): what
        # its last optimization did. A Mode is immutable, so it lives in a dict.
        self._report = {"last_optimizer_profile": None}

    @property
    def last_optimizer_profile(self):
        """``(optimizer profile, checker)`` of the last graph this mode optimized."""
        return self._report["last_optimizer_profile"]

    @property
    def optimizer(self):
        return DebugOptimizer(Mode.optimizer.fget(self), self)

    @property
    def linker(self):
        lk = Mode.linker.fget(self)
        if not self.check_engine or type(lk) is PerformLinker:  # the reference itself
            return lk
        return _CheckedLinker(lk)


# ``function(..., mode="DebugMode")`` (and Theano's "DEBUG_MODE") make one when first used.
register_mode("DebugMode", DebugMode)
