"""A seeded differential fuzzer: random well-typed graphs run on every engine against numpy.

A *recipe* is a list of nodes: inputs (``("input", dims, dtype)``), at most one shared
variable (``("shared", dims, dtype)``) and ops (``(op, args, param)``, the args being
earlier nodes), plus the nodes returned as outputs and the node that updates the
shared variable. Each op of :data:`OPS` has two templates, one building the graph
(``tt``) and one computing numpy's value (``np``), so the graph, the reference and
the stand-alone reproducer all come from the same text.

Dimensions are tokens: ``"a"`` and ``"b"`` (lengths that change from call to call),
``1`` (a broadcastable axis) or a derived name (``"a[1:]"``) that only matches
itself; so every generated graph is well typed and the numpy values broadcast as
the graph's do. The ops cover elementwise maths with broadcasting, reductions, dot,
slices, an index, set/inc_subtensor, transposes, new axes, flatten, casts between
float32 and float64, 0-d values, a shared variable with an update, and several
outputs sharing nodes.

:func:`check` runs one recipe on each engine: two calls (the second with new
lengths, unless a shared variable fixes them), each against numpy (value, dtype,
shape); the inputs must come back unmodified, the first call's results must not be
overwritten by the second, outputs must not share memory with each other or with
the inputs, and the shared variable must hold numpy's state. :func:`shrink` reduces
a failing recipe to a small one and :func:`reproducer` prints it as a script.

Run it: ``python -m theano_dag.testing.fuzz --n 1000 --seed 0`` (``make fuzz N=1000``).

>>> rec = generate(np.random.default_rng(0))
>>> check(rec, ["py"])
[]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.compile.sharedvalue import shared
from theano_dag.config import config
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import grad

__all__ = ["Recipe", "generate", "check", "check_grad", "shrink", "reproducer", "ENGINES", "main"]

FLOATS = ("float32", "float64")
#: The share of graphs whose inputs hold non-finite and extreme values.
NONFINITE_SHARE = 0.25
#: What a non-finite graph's inputs hold besides uniform values in [-1, 1]: NaN, the
#: infinities, and values near the dtype's overflow and underflow (as fractions of its
#: largest finite value and of its smallest normal one).
SPECIAL = ("nan", "inf", "-inf", "huge", "-huge", "tiny", "-tiny", "zero")
#: The tags of the documented rewrites that change non-finite values (docs/optimization.md):
#: ``x * 0 -> 0`` and the like, and products reordered (an overflow in one order and not
#: in the other). A difference that disappears with the tag excluded is classified, not
#: a failure. ``stabilize``'s rewrites (``log(sigmoid(x)) -> -softplus(-x)`` and the like)
#: give the finite true value where the written graph overflows to an infinity.
NONFINITE_TAGS = ("nonfinite_unsafe", "reassociate", "stabilize")
#: The class of a difference that no rewrite makes: a matrix product whose terms
#: overflow or hold opposite infinities is NaN or an infinity by the kernel's order of
#: summation and its use of fused multiply-adds (OpenBLAS gives -inf where a plain sum
#: of products gives NaN; the OpenCL engine's kernel gives NaN).
DOT_NONFINITE = "dot_nonfinite"
BASE = ("a", "b", 1)
SIZES = ({"a": 3, "b": 4}, {"a": 5, "b": 2})


def _np_sigmoid(x):
    return (1 / (1 + np.exp(-x))).astype(x.dtype)


# name: (arity, graph template, numpy template). ``{0}``, ``{1}``: the args; ``{p}``:
# the op's parameter.
OPS = {
    "tanh": (1, "tt.tanh({0})", "np.tanh({0})"),
    "sin": (1, "tt.sin({0})", "np.sin({0})"),
    "neg": (1, "-{0}", "-{0}"),
    "abs": (1, "abs({0})", "np.abs({0})"),
    "sqr": (1, "tt.sqr({0})", "np.square({0})"),
    "exp": (1, "tt.exp({0})", "np.exp({0})"),
    "sigmoid": (1, "tt.sigmoid({0})", "sigmoid({0})"),
    "scale": (1, "{0} * {p!r}", "{0} * {p!r}"),
    "add": (2, "{0} + {1}", "{0} + {1}"),
    "sub": (2, "{0} - {1}", "{0} - {1}"),
    "mul": (2, "{0} * {1}", "{0} * {1}"),
    "maximum": (2, "tt.maximum({0}, {1})", "np.maximum({0}, {1})"),
    "minimum": (2, "tt.minimum({0}, {1})", "np.minimum({0}, {1})"),
    "sum": (1, "{0}.sum(axis={p})", "np.asarray({0}.sum(axis={p}))"),
    "max": (1, "{0}.max(axis={p})", "np.asarray({0}.max(axis={p}))"),
    "dot": (2, "tt.dot({0}, {1})", "np.asarray(np.dot({0}, {1}))"),
    "slice": (1, "{0}[{p}]", "{0}[{p}]"),
    "index0": (1, "{0}[0]", "np.asarray({0}[0])"),
    "set_sub": (2, "tt.set_subtensor({0}[{p}], {1})", "setsub({0}, '{p}', {1})"),
    "inc_sub": (2, "tt.inc_subtensor({0}[{p}], {1})", "incsub({0}, '{p}', {1})"),
    "T": (1, "{0}.T", "{0}.T"),
    "addaxis": (1, "{0}.dimshuffle({p})", "{0}[None]"),
    "flatten": (1, "{0}.flatten()", "{0}.reshape(-1)"),
    "cast": (1, "tt.cast({0}, '{p}')", "{0}.astype('{p}')"),
    # Ops whose non-finite values have rules of their own (NaN bounds, x // 0, log(-1)).
    "div": (2, "{0} / {1}", "{0} / {1}"),
    "floordiv": (2, "{0} // {1}", "{0} // {1}"),
    "clip": (2, "tt.clip({0}, {1}, {p!r})", "np.clip({0}, {1}, {p!r})"),
    "log": (1, "tt.log({0})", "np.log({0})"),
    "sqrt": (1, "tt.sqrt({0})", "np.sqrt({0})"),
}
#: Ops left out of gradient graphs: non-finite values or kinks in [-1, 1] (finite
#: differences are meaningless there).
NO_GRAD = frozenset({"div", "floordiv", "clip", "log", "sqrt"})


def _setsub(x, sl, y):
    r = x.copy()
    r[eval(f"np.s_[{sl}]")] = y
    return r


def _incsub(x, sl, y):
    r = x.copy()
    r[eval(f"np.s_[{sl}]")] += y
    return r


_NP_NS = {"np": np, "sigmoid": _np_sigmoid, "setsub": _setsub, "incsub": _incsub}


@dataclass
class Recipe:
    """A random graph: ``nodes`` (inputs, the shared variable, ops), ``outputs`` (node
    indices), ``update`` (the node giving the shared variable's next value, or None),
    the ``seed`` of the input values, and whether they include non-finite ones."""

    nodes: list
    outputs: list
    update: int | None = None
    seed: int = 0
    dims: list = field(default_factory=list)  # per node, for generation and shrinking
    dtypes: list = field(default_factory=list)
    nonfinite: bool = False  # the inputs hold NaN, infinities and extreme values

    @property
    def shared_index(self):
        return next((k for k, n in enumerate(self.nodes) if n[0] == "shared"), None)


def _name(k):
    return f"v{k}"


def _code(node, which):
    op, args, param = node
    _, gtmpl, ntmpl = OPS[op]
    return (gtmpl if which == "graph" else ntmpl).format(*[_name(a) for a in args], p=param)


def _input_type(dims, dtype):
    shape = tuple(1 if d == 1 else None for d in dims)
    return f"tt.TensorType({dtype!r}, shape={shape!r})"


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


def _result_dims(op, dims, dtypes, param):
    """The dims of ``op`` on args of ``dims`` and ``dtypes`` with ``param``; None when
    the op does not apply."""
    d0 = dims[0]
    if op in ("tanh", "sin", "neg", "abs", "sqr", "exp", "sigmoid", "scale", "log", "sqrt"):
        return d0
    if op in ("add", "sub", "mul", "maximum", "minimum", "div", "floordiv"):
        return _broadcast(d0, dims[1])
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
    if op in ("set_sub", "inc_sub"):
        if not d0 or d0[0] == 1 or dims[1] != ():
            return None
        if dtypes[1] == "float64" and dtypes[0] == "float32":
            return None  # a downcast, refused by the op
        return d0
    if op == "T":
        return d0[::-1] if len(d0) == 2 else None
    if op == "addaxis":
        return (1,) + d0 if len(d0) <= 2 else None
    if op == "flatten":
        return (f"({d0[0]}*{d0[1]})",) if len(d0) == 2 and 1 not in d0 else None
    if op == "cast":
        return d0
    raise KeyError(op)


def _param(op, rng, dims):
    if op == "scale":
        return float(rng.choice([0.5, -1.5, 2.0]))
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
        return str(rng.choice(FLOATS))
    return None


def generate(rng, max_ops=8) -> Recipe:
    """A random recipe: 1 to 3 inputs, up to ``max_ops`` ops, 1 to 3 outputs, in one
    graph of three a shared variable with an update, and in a :data:`NONFINITE_SHARE`
    of them inputs with NaN, infinities and extreme values."""
    nodes, dims, dtypes, syms = [], [], [], []
    shapes = [("a",), ("b",), ("a", "b"), (), (1, "b"), ("a", 1), ("b", "a")]

    def add(node, d, sym):
        nodes.append(node)
        dims.append(tuple(d))
        dtypes.append(sym.dtype)
        syms.append(sym)
        return len(nodes) - 1

    for _ in range(int(rng.integers(1, 4))):
        d = shapes[int(rng.integers(len(shapes)))]
        dt = str(rng.choice(FLOATS, p=[0.3, 0.7]))
        add(("input", d, dt), d, eval(_input_type(d, dt))())
    if rng.random() < 0.33:
        d = shapes[int(rng.integers(len(shapes)))]
        dt = str(rng.choice(FLOATS, p=[0.3, 0.7]))
        add(("shared", d, dt), d, eval(_input_type(d, dt))())
    names = list(OPS)
    # The ops that need matching operands are drawn more often, so they appear.
    weights = np.array([3.0 if op in ("dot", "set_sub", "inc_sub") else 1.0 for op in names])
    weights /= weights.sum()
    n_ops = int(rng.integers(1, max_ops + 1))
    tries = 0
    while sum(n[0] not in ("input", "shared") for n in nodes) < n_ops and tries < 200:
        tries += 1
        op = names[int(rng.choice(len(names), p=weights))]
        args = tuple(int(rng.integers(len(nodes))) for _ in range(OPS[op][0]))
        if op == "dot" and dims[args[0]]:
            fits = [k for k, d in enumerate(dims) if d and d[0] == dims[args[0]][-1]]
            args = (args[0], fits[int(rng.integers(len(fits)))]) if fits else args
        if op in ("set_sub", "inc_sub"):
            zero_d = [k for k, d in enumerate(dims) if d == ()]
            if not zero_d:
                continue
            args = (args[0], zero_d[int(rng.integers(len(zero_d)))])
        param = _param(op, rng, [dims[a] for a in args])
        d = _result_dims(op, [dims[a] for a in args], [dtypes[a] for a in args], param)
        if d is None:
            continue
        node = (op, args, param)
        ns = {"tt": tt, **{_name(a): syms[a] for a in args}}
        try:
            sym = eval(_code(node, "graph"), ns)
        except (TypeError, ValueError):
            continue  # the op refuses these types: not a graph to try
        add(node, d, sym)
    ops = [k for k, n in enumerate(nodes) if n[0] not in ("input", "shared")]
    pool = ops or list(range(len(nodes)))
    outputs = sorted({pool[int(rng.integers(len(pool)))] for _ in range(int(rng.integers(1, 4)))})
    update = None
    s = next((k for k, n in enumerate(nodes) if n[0] == "shared"), None)
    if s is not None:
        # s <- cast(tanh(s * 0.5 + c)) with c a 0-d value when there is one.
        zero_d = [k for k, d in enumerate(dims) if d == () and k != s]
        cur = add(("scale", (s,), 0.5), dims[s], syms[s] * 0.5)
        if zero_d:
            c = zero_d[int(rng.integers(len(zero_d)))]
            cur = add(("add", (cur, c), None), dims[s], syms[cur] + syms[c])
        cur = add(("tanh", (cur,), None), dims[s], tt.tanh(syms[cur]))
        update = add(("cast", (cur,), dtypes[s]), dims[s], tt.cast(syms[cur], dtypes[s]))
    seed = int(rng.integers(2**31))
    nonfinite = bool(rng.random() < NONFINITE_SHARE)
    return Recipe(nodes, outputs, update, seed, dims, dtypes, nonfinite)


# -- running ---------------------------------------------------------------------------


def _special(kind, dtype):
    info = np.finfo(dtype)
    sign = -1.0 if kind.startswith("-") else 1.0
    value = {"huge": float(info.max) / 4, "tiny": float(info.tiny) * 4, "zero": 0.0}.get(
        kind.lstrip("-"), kind.lstrip("-")
    )
    return np.asarray(sign * float(value), dtype)


def _values(rec, sizes, rng):
    vals = {}
    for k, node in enumerate(rec.nodes):
        if node[0] in ("input", "shared"):
            shape = tuple(1 if d == 1 else sizes[d] for d in node[1])
            vals[k] = rng.uniform(-1, 1, shape).astype(node[2])
            if rec.nonfinite and node[0] == "input":
                # About a third of the elements special; one in any input of one element.
                v = vals[k].reshape(-1)
                pick = rng.random(v.size) < 0.35
                kinds = rng.integers(len(SPECIAL), size=v.size)
                for i in np.flatnonzero(pick):
                    v[i] = _special(SPECIAL[kinds[i]], node[2])
    return vals


def reference(rec, values):
    """numpy's value of every node given the input/shared ``values``."""
    env = dict(values)
    with np.errstate(all="ignore"):
        for k, node in enumerate(rec.nodes):
            if k not in env:
                ns = {**_NP_NS, **{_name(a): env[a] for a in node[1]}}
                env[k] = np.asarray(eval(_code(node, "numpy"), ns))
    return env


def _build(rec):
    """The graph of ``rec``: (explicit inputs, shared variable or None, syms)."""
    syms, inputs, svar = {}, [], None
    for k, node in enumerate(rec.nodes):
        if node[0] == "input":
            syms[k] = eval(_input_type(node[1], node[2]), {"tt": tt})(_name(k))
            inputs.append(k)
        elif node[0] == "shared":
            shape = tuple(1 if d == 1 else SIZES[0][d] for d in node[1])
            broadcastable = tuple(d == 1 for d in node[1])
            svar = shared(np.zeros(shape, node[2]), name=_name(k), broadcastable=broadcastable)
            syms[k] = svar
        else:
            syms[k] = eval(_code(node, "graph"), {"tt": tt, **{_name(a): syms[a] for a in node[1]}})
    return inputs, svar, syms


def _cpu_safe():
    return Mode(linker="cpu", optimizer="fast_run").excluding("nonfinite_unsafe")


#: Engine name -> (mode factory, config flags while compiling and calling, C build mode).
ENGINES = {
    "py": (lambda: Mode(linker="py", optimizer=None), {}, None),
    "cpu": (lambda: Mode(linker="cpu", optimizer="fast_run"), {"cxx": ""}, None),
    "cpu_safe": (_cpu_safe, {"cxx": ""}, None),
    "cpu_c": (lambda: Mode(linker="cpu", optimizer="fast_run"), {}, "sync"),
    "opencl": (lambda: Mode(linker="opencl"), {}, None),
}


def available_engines():
    """The engines this machine runs (``opencl`` needs a device)."""
    names = ["py", "cpu", "cpu_safe", "cpu_c"]
    if opencl_available()[0]:
        names.append("opencl")
    return names


def _close(got, want, tol, nonfinite_equal=False):
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape}, numpy {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, numpy {want.dtype}"
    if nonfinite_equal:
        # NaN and the infinities count as one value where both sides hold one of them.
        both = ~np.isfinite(got) & ~np.isfinite(want)
        got, want = np.where(both, 0, got), np.where(both, 0, want)
    if not np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True):
        err = np.max(np.abs(got.astype(float) - want.astype(float)))
        return f"values differ (max abs error {err:.3g})"
    return None


def _host(v):
    return v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray) else np.asarray(v)


def _tol(rec):
    return 2e-4 if "float32" in rec.dtypes else 1e-9


def check(rec, engines=None) -> list:
    """Run ``rec`` on ``engines`` (default: all available); the problems found, as
    ``(engine, what)`` pairs (empty: every engine agrees with numpy)."""
    engines = engines or available_engines()
    problems = []
    for name in engines:
        for what in _check_engine(rec, name, _tol(rec)):
            problems.append((name, what))
    return problems


def classify(rec, engine):
    """The tag of :data:`NONFINITE_TAGS` whose rewrites make ``engine`` differ from
    numpy on ``rec``'s non-finite values (its inputs', or those that ``log``, ``sqrt``
    or a division make): the first with which excluded the engine agrees, else all of
    them together, joined by ``+``; :data:`DOT_NONFINITE` for a product's non-finite
    values that differ by kernel (None: not explained by either, a bug)."""
    if engine == "py":
        return None
    for tags in [(t,) for t in NONFINITE_TAGS] + [NONFINITE_TAGS] * (len(NONFINITE_TAGS) > 1):
        if not _check_engine(rec, engine, _tol(rec), exclude=tags):
            return "+".join(tags)
    if rec.nonfinite and any(n[0] == "dot" for n in rec.nodes):
        if not _check_engine(rec, engine, _tol(rec), nonfinite_equal=True):
            return DOT_NONFINITE
    return None


def _check_engine(rec, name, tol, exclude=(), nonfinite_equal=False):
    factory, flags, build = ENGINES[name]
    rng = np.random.default_rng(rec.seed)
    s = rec.shared_index
    sizes = [SIZES[0], SIZES[0] if s is not None else SIZES[1]]
    vals = [_values(rec, sz, rng) for sz in sizes]
    build_ctx = ckernel.compile_mode(build) if build else contextlib.nullcontext()
    with config.change_flags(**flags), build_ctx, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            inputs, svar, syms = _build(rec)
            updates = [(svar, syms[rec.update])] if svar is not None and rec.update else []
            f = function(
                [syms[k] for k in inputs],
                [syms[k] for k in rec.outputs],
                updates=updates,
                mode=factory().excluding(*exclude) if exclude else factory(),
                on_unused_input="ignore",
            )
        except Exception as e:
            return [f"compile raised {type(e).__name__}: {e}"]
        state = vals[0][s].copy() if s is not None else None
        if svar is not None:
            svar.set_value(state.copy())
        kept, problems = [], []
        for call, v in enumerate(vals):
            if s is not None:
                v = {**v, s: state}
            want = reference(rec, v)
            args = [v[k].copy() for k in inputs]
            try:
                got = f(*args)
            except Exception as e:
                return problems + [f"call {call} raised {type(e).__name__}: {e}"]
            got = [_host(g) for g in got]
            for k, arg in zip(inputs, args):
                if not np.array_equal(arg, v[k], equal_nan=True):
                    problems.append(f"call {call}: input {_name(k)} modified")
            for j, (k, g) in enumerate(zip(rec.outputs, got)):
                why = _close(g, want[k], tol, nonfinite_equal)
                if why:
                    problems.append(f"call {call}: output {j} ({_name(k)}): {why}")
                for a in args:
                    if isinstance(g, np.ndarray) and np.shares_memory(g, a):
                        problems.append(f"call {call}: output {j} shares memory with an input")
            for j in range(len(got)):
                for i in range(j):
                    gi, gj = got[i], got[j]
                    if isinstance(gi, np.ndarray) and gi.size and np.shares_memory(gi, gj):
                        problems.append(f"call {call}: outputs {i} and {j} share memory")
            if s is not None and rec.update is not None:
                state = want[rec.update]
                why = _close(_host(svar.get_value(borrow=True)), state, tol)
                if why:
                    problems.append(f"call {call}: shared {_name(s)} after the update: {why}")
            for j, (obj, copy) in enumerate(kept):
                if not np.array_equal(_host(obj), copy, equal_nan=True):
                    problems.append(f"call {call}: the first call's output {j} was overwritten")
            if call == 0:
                kept = [(g, np.array(g, copy=True)) for g in got]
            if problems:
                return problems
    return []


# -- gradients ---------------------------------------------------------------------------


def differentiable(rec) -> bool:
    """Whether :func:`check_grad` applies: float64 throughout, no shared variable, finite
    inputs, none of the ops of :data:`NO_GRAD`."""
    return (
        rec.shared_index is None
        and not rec.nonfinite
        and all(d == "float64" for d in rec.dtypes)
        and not any(n[0] in NO_GRAD for n in rec.nodes)
    )


def _max_ties(rec, vals) -> bool:
    """Whether a ``max`` of ``rec`` reaches its maximum at more than one element."""
    env = reference(rec, vals)
    for node in rec.nodes:
        if node[0] == "max":
            x, axis = env[node[1][0]], node[2]
            m = x.max(axis=axis, keepdims=True)
            if np.any((x == m).sum(axis=axis) > 1):
                return True
    return False


def check_grad(rec, mode=None, eps=1e-6, tol=1e-5) -> list:
    """The gradient of ``sum_j w_j * sum(output_j)`` with respect to every input, by
    :func:`~theano_dag.gradient.grad` compiled in ``mode``, against central differences
    of numpy's value of the same cost; the problems found (empty: it agrees)."""
    if not differentiable(rec):
        return []
    inputs, _, syms = _build(rec)
    weights = [1.0 + 0.37 * j for j in range(len(rec.outputs))]
    cost = sum(w * syms[k].sum() for w, k in zip(weights, rec.outputs))
    wrt = [syms[k] for k in inputs]
    try:
        gs = grad(cost, wrt, disconnected_inputs="ignore")
        f = function(wrt, gs, mode=mode, on_unused_input="ignore")
    except Exception as e:
        return [f"grad raised {type(e).__name__}: {e}"]
    vals = _values(rec, SIZES[0], np.random.default_rng(rec.seed))

    def numpy_cost(v):
        env = reference(rec, v)
        return sum(w * float(np.sum(env[k])) for w, k in zip(weights, rec.outputs))

    if _max_ties(rec, vals):
        # max's gradient goes to every element equal to the maximum (Theano's and
        # PyTensor's convention); finite differences count one. A broadcast row makes
        # such ties: the graph is left out, not reported.
        return []
    got = f(*[vals[k] for k in inputs])
    problems = []
    for k, g in zip(inputs, got):
        num = np.zeros_like(vals[k])
        for i in np.ndindex(vals[k].shape):
            v = {j: a.copy() for j, a in vals.items()}
            v[k][i] += eps
            up = numpy_cost(v)
            v[k][i] -= 2 * eps
            num[i] = (up - numpy_cost(v)) / (2 * eps)
        if not np.allclose(np.asarray(g), num, rtol=tol, atol=tol):
            err = np.max(np.abs(np.asarray(g) - num))
            problems.append(f"gradient wrt {_name(k)} differs (max abs error {err:.3g})")
    return problems


# -- shrinking and reproducing -------------------------------------------------------


def _refs(rec):
    used = set(rec.outputs)
    if rec.update is not None:
        used.add(rec.update)
    for node in rec.nodes:
        if node[0] not in ("input", "shared"):
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
        if node[0] in ("input", "shared"):
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

    nodes = [
        n if n[0] in ("input", "shared") else (n[0], tuple(m(x) for x in n[1]), n[2])
        for n in rec.nodes
    ]
    outs = sorted({m(o) for o in rec.outputs})
    return replace(rec, nodes=nodes, outputs=outs)


def shrink(rec, fails, budget=200) -> Recipe:
    """A smaller recipe for which ``fails(recipe)`` still holds: outputs dropped or
    moved to an argument of theirs, the update dropped, ops bypassed, unused nodes
    removed."""
    changed = True
    while changed and budget > 0:
        changed = False
        candidates = []
        if len(rec.outputs) > 1:
            for j in range(len(rec.outputs)):
                candidates.append(replace(rec, outputs=rec.outputs[:j] + rec.outputs[j + 1 :]))
        if rec.update is not None:
            candidates.append(replace(rec, update=None))
        for j, o in enumerate(rec.outputs):
            node = rec.nodes[o]
            if node[0] not in ("input", "shared"):
                for a in node[1]:
                    outs = sorted(set(rec.outputs[:j] + [a] + rec.outputs[j + 1 :]))
                    candidates.append(replace(rec, outputs=outs))
        # Bypass an op: its users read one of its args of the same type instead.
        for k, node in enumerate(rec.nodes):
            if node[0] in ("input", "shared") or k == rec.update:
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
        # Unused nodes go without asking (they change nothing the graph computes, but
        # an unused input changes the function's signature: asked too).
        used = _refs(rec)
        for k in reversed(range(len(rec.nodes))):
            if k not in used:
                cand = _without(rec, k)
                budget -= 1
                if rec.nodes[k][0] not in ("input", "shared") or fails(cand):
                    rec, changed = cand, True
                    break
    return rec


def reproducer(rec, engine) -> str:
    """A stand-alone script running ``rec`` on ``engine``: the two calls of :func:`check`."""
    rng = np.random.default_rng(rec.seed)
    vals = _values(rec, SIZES[0], rng)
    lines = [
        "import numpy as np",
        "import theano_dag.tensor as tt",
        "from theano_dag.compile.function import function",
        "from theano_dag.compile.mode import Mode",
        "from theano_dag.compile.sharedvalue import shared",
        "",
    ]
    if rec.nonfinite:
        lines += ["nan, inf = np.nan, np.inf", ""]
    if engine in ("cpu", "cpu_safe"):
        lines += ["from theano_dag.config import config", "config.cxx = ''  # numpy only", ""]
    inputs, s = [], None
    for k, node in enumerate(rec.nodes):
        if node[0] == "input":
            lines.append(f"{_name(k)} = {_input_type(node[1], node[2])}({_name(k)!r})")
            inputs.append(k)
        elif node[0] == "shared":
            bc = tuple(d == 1 for d in node[1])
            value = np.array2string(vals[k], separator=", ", precision=17)
            lines.append(
                f"{_name(k)} = shared(np.array({value}, {node[2]!r}), name={_name(k)!r}, "
                f"broadcastable={bc!r})"
            )
            s = k
        else:
            lines.append(f"{_name(k)} = {_code(node, 'graph')}")
    upd = f", updates=[({_name(s)}, {_name(rec.update)})]" if rec.update is not None else ""
    mode = {
        "py": 'Mode(linker="py", optimizer=None)',
        "cpu": 'Mode(linker="cpu", optimizer="fast_run")',
        "cpu_safe": 'Mode(linker="cpu", optimizer="fast_run").excluding("nonfinite_unsafe")',
        "cpu_c": 'Mode(linker="cpu", optimizer="fast_run")',
        "opencl": 'Mode(linker="opencl")',
    }[engine]
    ins = ", ".join(_name(k) for k in inputs)
    outs = ", ".join(_name(k) for k in rec.outputs)
    lines.append(f"f = function([{ins}], [{outs}]{upd}, mode={mode}, on_unused_input='ignore')")
    # The two calls of check(): the second with new lengths unless a shared variable
    # fixes them.
    second = _values(rec, SIZES[0] if s is not None else SIZES[1], rng)
    for call, vs in enumerate((vals, second)):
        for k in inputs:
            value = np.array2string(vs[k], separator=", ", precision=17)
            lines.append(f"{_name(k)}_value = np.array({value}, {rec.nodes[k][2]!r})")
        lines.append(f"print(f({', '.join(_name(k) + '_value' for k in inputs)}))  # call {call}")
    return "\n".join(lines) + "\n"


# -- command line ----------------------------------------------------------------------


def run_grads(n, seed=0, out=sys.stdout):
    """Check the gradients of ``n`` differentiable recipes from ``seed`` (default mode);
    the failures as ``(index, "grad", problems, recipe)``."""
    rng = np.random.default_rng(seed)
    failures, done = [], 0
    while done < n:
        rec = generate(rng)
        if not differentiable(rec):
            continue
        problems = check_grad(rec)
        if problems:
            small = shrink(rec, lambda r: differentiable(r) and bool(check_grad(r)))
            failures.append((done, "grad", problems, small))
            print(f"# gradient graph {done} (seed {seed}): {problems[0]}", file=out)
            print(reproducer(small, "cpu_c"), file=out)
        done += 1
    return failures


def run(
    n,
    seed=0,
    engines=None,
    c_every=20,
    opencl_every=10,
    out=sys.stdout,
    shrink_failures=True,
    classified=None,
):
    """Check ``n`` recipes from ``seed``; the C engine on every ``c_every``-th graph and
    OpenCL on every ``opencl_every``-th (each compiles a program). Returns the failures
    as ``(index, engine, problems, recipe)``. A non-finite graph on which an engine
    differs only through a documented rewrite (:func:`classify`) is no failure: it is
    appended to ``classified`` (a list, when given) as ``(index, engine, tag, problems)``
    and printed as one line."""
    engines = engines or available_engines()
    rng = np.random.default_rng(seed)
    failures = []
    for i in range(n):
        if i and i % 100 == 0:
            n_cls = "" if classified is None else f", {len(classified)} classified"
            print(f"# {i} graphs, {len(failures)} failing{n_cls}", file=out, flush=True)
        rec = generate(rng)
        names = [
            e
            for e in engines
            if (e != "cpu_c" or i % c_every == 0) and (e != "opencl" or i % opencl_every == 0)
        ]
        problems = check(rec, names)
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
            what = next(w for e, w in problems if e == engine)
            print(f"# graph {i} (seed {seed}): {engine}: {what}", file=out)
            print(reproducer(small, engine), file=out)
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description="Differential fuzzing of theano_dag's engines.")
    ap.add_argument("--n", type=int, default=200, help="graphs to run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default=None, help="comma-separated (default: all here)")
    ap.add_argument("--c-every", type=int, default=20, help="C kernels on every k-th graph")
    ap.add_argument("--opencl-every", type=int, default=10)
    ap.add_argument("--grads", type=int, default=None, help="gradient graphs (default N/5)")
    a = ap.parse_args(argv)
    engines = a.engines.split(",") if a.engines else None
    n_grads = a.n // 5 if a.grads is None else a.grads
    t0 = time.perf_counter()
    classified = []
    try:
        failures = run(a.n, a.seed, engines, a.c_every, a.opencl_every, classified=classified)
        grad_failures = run_grads(n_grads, a.seed)
    except Exception:
        traceback.print_exc()
        return 2
    print(
        f"{a.n} graphs, seed {a.seed}, engines {engines or available_engines()}: "
        f"{len(failures)} failing, {len(classified)} classified by tag "
        f"({', '.join(sorted({c[2] for c in classified})) or 'none'}); "
        f"{n_grads} gradient graphs: {len(grad_failures)} failing; "
        f"{time.perf_counter() - t0:.0f} s"
    )
    return 1 if failures or grad_failures else 0


if __name__ == "__main__":
    sys.exit(main())
