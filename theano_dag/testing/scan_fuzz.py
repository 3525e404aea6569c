"""A seeded differential fuzzer of ``scan`` loops: random loops on every engine against numpy.

A *recipe* (:class:`Recipe`) describes one ``scan`` call: its sequences (a vector or a
matrix each, with taps such as ``[-2, 0, 1]``), its outputs (per-step outputs, states
with taps ``[-1]`` or several, like ``[-3, -1]``), its non-sequences (a scalar, a
vector, a matrix, maybe of another dtype), how many steps (from the sequences, a
constant or a symbolic scalar, 0 included), ``go_backwards``, ``truncate_gradient``,
shared variables the step updates (a counter and an accumulator it also reads), and
which part of each output the compiled function returns (all of it, its last step only,
so that the memory rewrite drops the history, its last two steps, or its sum).

Each output of the step is an expression tree (:func:`gen_expr`) over the step's
arguments, drawn from elementwise maths, casts, dot, reductions, indexing, set and inc
of a subtensor, ``switch``, ``ifelse`` and a loop of its own (a scan inside the step).
One evaluator (:func:`evaluate`) reads a tree either as a graph or as numpy values, so
the graph and the reference come from the same recipe: the reference is a plain Python
loop (:func:`reference`) whose every intermediate takes the dtype of the graph's
node (the graph's dtype rules are :mod:`~theano_dag.testing.fuzz`'s business; the
outputs' dtypes are checked against the graph's declared types).

:func:`check` compiles a recipe on each engine of :data:`ENGINES` (the reference, the
reference with ``fast_compile``, the CPU engine with numpy kernels, with C kernels
and its C loop, OpenCL, Dask) and calls it twice (new values, new lengths where they
may change): each output against numpy (value, dtype, shape; integers exactly), the
shared variables after each call, the first call's outputs not overwritten by the
second, the inputs unmodified. :func:`check_grad` compares the gradient of a weighted
sum of the outputs wrt every float64 sequence, initial state and non-sequence with
central differences of the numpy loop (with ``truncate_gradient=k``, of the loop whose
steps before the last ``k`` read unperturbed inputs: what truncated backpropagation
through time computes).

Run it: ``python -m theano_dag.testing.scan_fuzz --n 200 --seed 0``.

>>> rec = generate(np.random.default_rng(0))
>>> check(rec, ["py"])
[]
"""

from __future__ import annotations

import argparse
import faulthandler
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
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import grad
from theano_dag.ifelse import ifelse
from theano_dag.scan import scan, scan_checkpoints
from theano_dag.testing.fuzz import LAYOUT_KINDS, _host, engine_context, laid_out

#: The graph fuzzer's layouts this fuzzer draws (its ``aliased`` is not one of them).
LAYOUTS = ("default", "mixed")

__all__ = [
    "Recipe",
    "generate",
    "build",
    "reference",
    "check",
    "check_grad",
    "shrink",
    "ENGINES",
    "available_engines",
    "run",
    "main",
]

#: Engine name -> (a function making its mode, config flags while compiling and calling,
#: the C kernels' build mode or None).
ENGINES = {
    "py": (lambda: Mode(linker="py", optimizer=None), {}, None),
    "fast_compile": (lambda: Mode(linker="py", optimizer="fast_compile"), {}, None),
    "cpu": (lambda: Mode(linker="cpu", optimizer="fast_run"), {"cxx": ""}, None),
    # C kernels built before the first call: a step of kernels runs in the C loop.
    "cpu_c": (lambda: Mode(linker="cpu", optimizer="fast_run"), {}, "sync"),
    # The C libraries loaded at points of the calls drawn from the loop's seed (as a
    # background build finishes mid-call: testing.late_loads).
    "cpu_late_c": (lambda: Mode(linker="cpu", optimizer="fast_run"), {}, "late"),
    "opencl": (lambda: Mode(linker="opencl", optimizer="fast_run"), {}, None),
    "dask": (lambda: Mode(linker="dask", optimizer="fast_run"), {}, None),
}

FLOAT_OPS = ("tanh", "sin", "sigmoid", "gauss", "sqr", "neg", "abs")
INT_OPS = ("neg", "abs", "sqr")
BINARY = ("add", "sub", "mul", "maximum", "minimum", "div")
INT_BINARY = ("add", "sub", "mul", "maximum", "minimum")
REDUCTIONS = ("sum", "max", "min", "prod", "mean")
#: What the function returns of each output: all its steps, the last one, the last two,
#: the sum over the steps, or nothing (an unused output).
SELECTIONS = ("all", "last", "last2", "sum", "none", "last+all", "last+sum")
#: The lengths: a row's and the sequences' (long enough, sometimes, for the C loop:
#: ``scan.op.C_LOOP_MIN_STEPS``).
ROW = (2, 3)
SEQ_LENGTHS = (3, 4, 5, 6, 10, 12)
#: The share of loops whose step is elementwise work only, over long sequences: those
#: the C loop replays.
SIMPLE_SHARE = 0.3
LONG_LENGTHS = (10, 12, 16, 20)


@dataclass
class Recipe:
    """One ``scan`` call and what the compiled function returns (see the module
    docstring). ``seqs``: (ndim, taps) each; ``outs``: ("nit"|"state", ndim, taps, expr)
    each; ``nonseqs``: (kind, dtype) each, kind "s", "v" or "m"; ``steps``: ("seqs",),
    ("const", k) or ("sym",); ``select``: one of :data:`SELECTIONS` per output;
    ``counter``/``acc``: the step updates a shared counter / a shared accumulator (the
    accumulator's expression is ``acc_expr``)."""

    dtype: str
    d: int
    seqs: list
    seq_dtypes: list
    outs: list
    nonseqs: list
    steps: tuple
    lengths: tuple  # the sequences' length in the two calls
    sym_steps: tuple  # the symbolic n_steps' value in the two calls
    go_backwards: bool
    truncate: int
    select: list
    counter: bool = False
    acc: bool = False
    acc_expr: object = None
    inner_mode: str = "same"
    seed: int = 0
    weights: list = field(default_factory=list)
    #: 0: ``scan``; N > 0: ``scan_checkpoints(..., save_every_N=N)``, whose outputs
    #: are the last step of each chunk of N steps.
    checkpoints: int = 0
    #: How the input arrays are laid out in memory (:data:`theano_dag.testing.fuzz.LAYOUTS`).
    layouts: str = "default"

    @property
    def is_int(self):
        return self.dtype.startswith("int")


# -- expressions ----------------------------------------------------------------------------


def gen_expr(rng, leaves, shape, depth, is_int, has_mat, simple=False):
    """A random expression tree of ``shape`` ("s" a scalar, "v" a row vector) over
    ``leaves`` (name -> shape)."""
    names = [n for n, s in leaves.items() if s == shape]
    if depth <= 0 or rng.random() < 0.25:
        if names and rng.random() < 0.85:
            return ("leaf", str(rng.choice(names)))
        c = int(rng.integers(-3, 4)) if is_int else float(np.round(rng.uniform(-1, 1), 2))
        if shape == "s":
            return ("const", c)
        v = gen_expr(rng, leaves, "s", 0, is_int, has_mat, simple)
        return ("alloc", v)

    def sub(s):
        return gen_expr(rng, leaves, s, depth - 1, is_int, has_mat, simple)

    kinds = ["un", "bin", "bin", "switch", "ifelse", "cast"]
    if simple:
        # elementwise work only: a step the CPU engine's C loop replays
        kinds = ["un", "bin", "bin", "switch", "cast"]
    elif shape == "v":
        kinds += ["nest", "rev", "roll", "setsub", "incsub", "alloc"]
        if has_mat:
            kinds += ["dot", "dot"]
    else:
        kinds += ["red", "red", "idx", "vdot", "nestlast"]
    kind = str(rng.choice(kinds))
    if kind == "un":
        return ("un", str(rng.choice(INT_OPS if is_int else FLOAT_OPS)), sub(shape))
    if kind == "bin":
        a, b = sub(shape), sub(str(rng.choice(["s", "v"])) if shape == "v" else "s")
        if rng.random() < 0.5:
            a, b = b, a
        return ("bin", str(rng.choice(INT_BINARY if is_int else BINARY)), a, b)
    if kind == "switch":
        return ("switch", sub(str(rng.choice(["s", shape]))), sub("s"), sub(shape), sub(shape))
    if kind == "ifelse":
        return ("ifelse", sub("s"), sub(shape), sub(shape))
    if kind == "cast":
        to = str(rng.choice(["int32", "int64"] if is_int else ["float32", "float64"]))
        return ("cast", to, sub(shape))
    if kind in ("nest", "nestlast"):
        # how: bit 0, backwards; bit 1, the inner step reads c from the outer step
        # (an implicit non-sequence) rather than as its argument
        return (kind, int(rng.random() < 0.3) + 2 * int(rng.random() < 0.4), sub("v"), sub("s"))
    if kind in ("rev", "roll"):
        return (kind, sub("v"))
    if kind in ("setsub", "incsub"):
        return (kind, sub("v"), sub("s"))
    if kind == "alloc":
        return ("alloc", sub("s"))
    if kind == "dot":
        m = [n for n, s in leaves.items() if s == "m"]
        return ("dot", sub("v"), ("leaf", str(rng.choice(m))))
    if kind == "red":
        ops = [r for r in REDUCTIONS if not (is_int and r == "mean")]
        return ("red", str(rng.choice(ops)), sub("v"))
    if kind == "idx":
        return ("idx", int(rng.choice([0, -1, 1])), sub("v"))
    assert kind == "vdot"
    return ("vdot", sub("v"), sub("v"))


def _upcast(*dtypes):
    return np.result_type(*[np.dtype(d) for d in dtypes]).name


class Evaluator:
    """Reads expression trees as graphs (``graph=True``, recording each node's dtype in
    ``dtypes``) or as numpy values (each intermediate cast to the recorded dtype).
    ``mode``: the inner loops' mode (a scan inside the step)."""

    def __init__(self, graph, dtypes, mode=None):
        self.graph = graph
        self.dtypes = dtypes
        self.mode = mode
        # numpy's side: how many kinks (ties of max/min/maximum/minimum, a switch's
        # operands equal) the values met, where finite differences tell nothing.
        self.kinks = 0

    def __call__(self, e, env):
        v = self._eval(e, env)
        if self.graph:
            self.dtypes.setdefault(e, v.dtype)
            return v
        return np.asarray(v).astype(self.dtypes[e])

    def _eval(self, e, env):  # noqa: C901 (one table of cases)
        g, kind = self.graph, e[0]
        if kind == "leaf":
            return env[e[1]]
        if kind == "const":
            c = np.asarray(e[1], dtype=env["__dtype__"])
            return tt.constant(c) if g else c
        args = [self(a, env) if isinstance(a, tuple) else a for a in e[1:]]
        if kind == "un":
            f, x = args
            if g:
                return {
                    "tanh": tt.tanh,
                    "sin": tt.sin,
                    "sigmoid": tt.sigmoid,
                    "gauss": lambda v: tt.exp(-tt.sqr(v)),
                    "sqr": tt.sqr,
                    "neg": lambda v: -v,
                    "abs": abs,
                }[f](x)
            return {
                "tanh": np.tanh,
                "sin": np.sin,
                "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
                "gauss": lambda v: np.exp(-np.square(v)),
                "sqr": np.square,
                "neg": np.negative,
                "abs": np.abs,
            }[f](x)
        if kind == "bin":
            f, a, b = args
            if f == "div":
                # a / (1 + b*b): never a division by 0
                return a / (1 + b * b) if g else a / (1 + b * b)
            if g:
                return {
                    "add": lambda: a + b,
                    "sub": lambda: a - b,
                    "mul": lambda: a * b,
                    "maximum": lambda: tt.maximum(a, b),
                    "minimum": lambda: tt.minimum(a, b),
                }[f]()
            if f in ("maximum", "minimum"):
                self.kinks += int(np.any(np.asarray(a) == np.asarray(b)))
            return {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                    "maximum": np.maximum, "minimum": np.minimum}[f](a, b)  # fmt: skip
        if kind == "switch":
            c1, c2, x, y = args
            self.kinks += 0 if g else int(np.any(np.asarray(c1) == np.asarray(c2)))
            return tt.switch(tt.gt(c1, c2), x, y) if g else np.where(c1 > c2, x, y)
        if kind == "ifelse":
            c, x, y = args
            if g:
                dt = _upcast(x.dtype, y.dtype)
                return ifelse(tt.gt(c, 0), tt.cast(x, dt), tt.cast(y, dt))
            return x if c > 0 else y
        if kind == "cast":
            to, x = args
            return tt.cast(x, to) if g else x.astype(to)
        if kind == "rev":
            return args[0][::-1]
        if kind == "roll":
            x = args[0]
            return tt.concatenate([x[1:], x[:1]]) if g else np.concatenate([x[1:], x[:1]])
        if kind in ("setsub", "incsub"):
            x, s = args
            if g:
                if kind == "setsub":
                    return tt.set_subtensor(x[0], s)
                return tt.inc_subtensor(x[1:], s)
            r = x.copy()
            if kind == "setsub":
                r[0] = s
            else:
                r[1:] += s.astype(r.dtype)
            return r
        if kind == "alloc":
            s = args[0]
            return tt.alloc(s, self.d_of(env)) if g else np.full(self.d_of(env), s)
        if kind == "dot":
            x, m = args
            return tt.dot(x, m) if g else np.dot(x, m)
        if kind == "vdot":
            x, y = args
            return tt.dot(x, y) if g else np.dot(x, y)
        if kind == "red":
            f, x = args
            if g:
                return getattr(x, f)()
            if f == "sum" or f == "prod" or f == "mean":
                acc = "float64" if x.dtype == "float32" else None
                return getattr(np, f)(x, dtype=acc)
            self.kinks += int(np.sum(x == getattr(np, f)(x)) > 1)
            return getattr(np, f)(x)
        if kind == "idx":
            i, x = args
            return x[i]
        if kind in ("nest", "nestlast"):
            back, x, c = args
            return self._nest(e, back, x, c, kind == "nestlast")
        raise ValueError(f"unknown expression {e!r}")

    def d_of(self, env):
        return env["__d__"]

    def _nest(self, e, how, x, c, last):
        # acc_t = acc_{t-1} * c + x_t over x's elements, from 0: a scan in the step.
        back = bool(how & 1)
        if self.graph:
            dt = self.dtypes.setdefault(("nest", e), (x * c).dtype)
            if how & 2:
                out, _ = scan(lambda xi, a: tt.cast(a * c + xi, dt), sequences=x,
                              outputs_info=tt.zeros((), dt), go_backwards=back,
                              mode=self.mode)  # fmt: skip
            else:
                out, _ = scan(lambda xi, a, cc: tt.cast(a * cc + xi, dt), sequences=x,
                              outputs_info=tt.zeros((), dt), non_sequences=c,
                              go_backwards=back, mode=self.mode)  # fmt: skip
            return out[-1] if last else out
        dt = self.dtypes[("nest", e)]
        acc, rows = np.zeros((), dt), []
        for xi in x[::-1] if back else x:
            acc = np.asarray(acc * c + xi).astype(dt)
            rows.append(acc)
        return rows[-1] if last else np.array(rows, dtype=dt)


# -- generation -------------------------------------------------------------------------------


def generate(rng) -> Recipe:
    """A random :class:`Recipe`."""
    seed = int(rng.integers(2**31))
    r = np.random.default_rng(seed)
    dtype = str(r.choice(["float64", "float32", "float64", "int64", "int32"]))
    is_int = dtype.startswith("int")
    d = int(r.choice(ROW))
    seqs, seq_dtypes = [], []
    for _ in range(int(r.choice([0, 1, 1, 2]))):
        taps = sorted({int(t) for t in r.choice([-2, -1, 0, 1], size=int(r.integers(1, 4)))})
        if r.random() < 0.5:
            taps = [0]
        seqs.append((int(r.choice([1, 2])), taps))
        other = "int32" if not is_int else "int64"
        seq_dtypes.append(other if r.random() < 0.15 else dtype)
    nonseqs = []
    for _ in range(int(r.integers(0, 3))):
        kind = str(r.choice(["s", "v", "m", "m"]))
        other = {"float64": "float32", "float32": "float64"}.get(dtype, "int32")
        nonseqs.append((kind, other if r.random() < 0.15 else dtype))
    n_outs = int(r.integers(1, 4))
    out_kinds = []
    for _ in range(n_outs):
        kind = str(r.choice(["nit", "state", "state"]))
        ndim = int(r.choice([0, 1]))
        taps = None
        if kind == "state":
            taps = [-1] if r.random() < 0.6 else sorted({-1, int(r.choice([-2, -3]))})
            if r.random() < 0.15:
                taps = [int(r.choice([-2, -3]))]
        out_kinds.append((kind, ndim, taps))
    # The steps: from the sequences, a constant or a symbolic value (0 sometimes).
    simple = bool(r.random() < SIMPLE_SHARE)
    lengths = (int(r.choice(SEQ_LENGTHS)), int(r.choice(SEQ_LENGTHS)))
    if simple:
        lengths = (int(r.choice(LONG_LENGTHS)), int(r.choice(LONG_LENGTHS)))
    reach = max((max(max(t), 0) - min(min(t), 0) for _, t in seqs), default=0)
    lengths = tuple(max(n, reach + 1) for n in lengths)
    avail = [n - reach for n in lengths] if seqs else [12, 12]
    choices = (["seqs"] if seqs else []) + ["const", "sym"]
    how = str(r.choice(choices))
    sym_steps = (0, 0)
    if how == "seqs":
        steps = ("seqs",)
    elif how == "const":
        k = (
            int(r.integers(0, min(avail) + 1))
            if r.random() < 0.1
            else int(r.integers(1, min(avail) + 1))
        )
        steps = ("const", k)
    else:
        steps = ("sym",)
        sym_steps = tuple(
            int(r.integers(0, a + 1)) if r.random() < 0.15 else int(r.integers(1, a + 1))
            for a in avail
        )
    counter, acc = bool(r.random() < 0.2), bool(r.random() < 0.2)
    # The step's arguments, Theano's order: sequence taps, state taps, non-sequences.
    leaves = {}
    for i, (nd, taps) in enumerate(seqs):
        for t in taps:
            leaves[f"s{i}t{t}"] = "v" if nd == 2 else "s"
    for k, (kind, nd, taps) in enumerate(out_kinds):
        if kind == "state":
            for t in taps:
                leaves[f"o{k}t{-t}"] = "v" if nd == 1 else "s"
    for j, (kind, _) in enumerate(nonseqs):
        leaves[f"n{j}"] = kind
    if acc:
        leaves["acc"] = "v"
    if counter:
        leaves["cnt"] = "s"
    has_mat = any(k == "m" for k, _ in nonseqs)
    outs = []
    for kind, nd, taps in out_kinds:
        e = gen_expr(
            r, leaves, "v" if nd == 1 else "s", int(r.integers(1, 4)), is_int, has_mat, simple
        )
        outs.append((kind, nd, taps, e))
    acc_expr = gen_expr(r, leaves, "v", 2, is_int, has_mat, simple) if acc else None
    n_max = max(avail) if steps[0] != "const" else steps[1]
    truncate = -1
    if r.random() < 0.2:
        truncate = int(r.integers(1, max(n_max, 1) + 2))
    zero_possible = steps == ("const", 0) or (steps == ("sym",) and 0 in sym_steps)
    select = []
    for _ in outs:
        sel = str(r.choice(SELECTIONS))
        if zero_possible and "last" in sel:
            sel = "sum"
        select.append(sel)
    if all(s == "none" for s in select):
        select[int(r.integers(len(select)))] = "all"
    weights = [float(w) for w in r.uniform(0.5, 1.5, size=len(outs))]
    go_backwards = bool(r.random() < 0.3)
    checkpoints = 0
    if (
        all(o[2] in (None, [-1]) for o in outs)
        and all(t == [0] for _, t in seqs)
        and not (go_backwards or counter or acc or zero_possible or truncate > 0)
        and r.random() < 0.6
    ):
        checkpoints = int(r.integers(1, 6))
    return Recipe(
        dtype=dtype,
        d=d,
        seqs=seqs,
        seq_dtypes=seq_dtypes,
        outs=outs,
        nonseqs=nonseqs,
        steps=steps,
        lengths=lengths,
        sym_steps=sym_steps,
        go_backwards=go_backwards,
        truncate=truncate,
        select=select,
        counter=counter,
        acc=acc,
        acc_expr=acc_expr,
        inner_mode=str(r.choice(["same", "same", "none"])),
        seed=seed,
        weights=weights,
        checkpoints=checkpoints,
    )


# -- values -------------------------------------------------------------------------------


def _value(r, shape, dtype):
    if dtype.startswith("int"):
        return np.asarray(r.integers(-3, 4, size=shape)).astype(dtype)
    return np.asarray(r.uniform(-1, 1, size=shape)).astype(dtype)


def input_values(rec, call):
    """The inputs' values of call 0 or 1, by name (``"seq0"``, ``"init1"``, ``"ns0"``,
    ``"n_steps"``)."""
    r = np.random.default_rng([rec.seed, call])
    vals = {}
    n = rec.lengths[call]
    for i, ((nd, _), dt) in enumerate(zip(rec.seqs, rec.seq_dtypes)):
        vals[f"seq{i}"] = _value(r, (n, rec.d) if nd == 2 else (n,), dt)
    for k, (kind, nd, taps, _) in enumerate(rec.outs):
        if kind == "state":
            row = (rec.d,) if nd == 1 else ()
            shape = row if taps == [-1] else (-min(taps), *row)
            v = _value(r, shape, rec.dtype)
            if not rec.is_int:
                v = np.asarray(np.tanh(v)).astype(rec.dtype)
            vals[f"init{k}"] = v
    for j, (kind, dt) in enumerate(rec.nonseqs):
        shape = {"s": (), "v": (rec.d,), "m": (rec.d, rec.d)}[kind]
        v = _value(r, shape, dt)
        vals[f"ns{j}"] = v * (0.6 if kind == "m" and not dt.startswith("int") else 1)
        vals[f"ns{j}"] = np.asarray(vals[f"ns{j}"]).astype(dt)
    if rec.steps == ("sym",):
        vals["n_steps"] = np.asarray(rec.sym_steps[call], dtype="int64")
    return vals


def _args(rec, call, vals, names):
    """The arrays of call ``call``'s inputs ``names``: copies of ``vals``, laid out in
    memory as ``rec.layouts`` says (one of :data:`~theano_dag.testing.fuzz.LAYOUT_KINDS`
    per input, drawn from the recipe's seed, with ``"mixed"``)."""
    if rec.layouts == "default":
        return [vals[n].copy() for n in names]
    r = np.random.default_rng([rec.seed, call, 17])
    return [laid_out(vals[n], LAYOUT_KINDS[int(r.integers(len(LAYOUT_KINDS)))]) for n in names]


def _squash(x, dtype, is_int, graph, e=None):
    """What a state's new value goes through so that the loop stays bounded (a value
    read as it is, ``e`` a leaf, is only cast: a step that returns its input)."""
    if e is not None and e[0] == "leaf":
        return tt.cast(x, dtype) if graph else np.asarray(x).astype(dtype)
    if is_int:
        return tt.cast(x % 11, dtype) if graph else (x % 11).astype(dtype)
    return tt.cast(tt.tanh(x), dtype) if graph else np.tanh(x).astype(dtype)


def _to_shape(x, nd, d, graph):
    if x.ndim == nd:
        return x
    if nd == 0:
        return x.sum()
    return tt.alloc(x, d) if graph else np.full(d, x)


# -- the graph ----------------------------------------------------------------------------


@dataclass
class Built:
    inputs: list
    names: list
    outputs: list
    updates: object
    shared: dict
    dtypes: dict
    out_types: list


def build(rec, mode, dtypes=None) -> Built:
    """The graph of ``rec``: a ``scan`` whose loops compile with ``mode`` (or the default
    mode when ``rec.inner_mode`` is "none"), the selections of its outputs."""
    dtypes = {} if dtypes is None else dtypes
    inner = mode if rec.inner_mode == "same" else None
    ev = Evaluator(True, dtypes, inner)
    ins, names = [], []
    seq_vars = []
    for i, ((nd, taps), dt) in enumerate(zip(rec.seqs, rec.seq_dtypes)):
        v = tt.TensorType(dt, shape=(None,) * nd)(f"seq{i}")
        ins.append(v)
        names.append(f"seq{i}")
        seq_vars.append({"input": v, "taps": taps} if taps != [0] else v)
    outs_info = []
    for k, (kind, nd, taps, _) in enumerate(rec.outs):
        if kind == "nit":
            outs_info.append(None)
            continue
        shape = (None,) * (nd + (0 if taps == [-1] else 1))
        v = tt.TensorType(rec.dtype, shape=shape)(f"init{k}")
        ins.append(v)
        names.append(f"init{k}")
        outs_info.append(v if taps == [-1] else {"initial": v, "taps": taps})
    ns_vars = []
    for j, (kind, dt) in enumerate(rec.nonseqs):
        nd = {"s": 0, "v": 1, "m": 2}[kind]
        v = tt.TensorType(dt, shape=(None,) * nd)(f"ns{j}")
        ins.append(v)
        names.append(f"ns{j}")
        ns_vars.append(v)
    n_steps = None
    if rec.steps[0] == "const":
        n_steps = rec.steps[1]
    elif rec.steps == ("sym",):
        n_steps = tt.lscalar("n_steps")
        ins.append(n_steps)
        names.append("n_steps")
    svars = {}
    if rec.counter:
        svars["cnt"] = shared(np.asarray(0, dtype="int64"), name="cnt")
    if rec.acc:
        svars["acc"] = shared(np.zeros(rec.d, dtype=rec.dtype), name="acc")
    leaf_names = _leaf_names(rec)

    def step(*args):
        env = dict(zip(leaf_names, args))
        env.update(svars)
        env["__d__"] = rec.d
        env["__dtype__"] = rec.dtype
        results = []
        for kind, nd, _, e in rec.outs:
            x = _to_shape(ev(e, env), nd, rec.d, True)
            results.append(_squash(x, rec.dtype, rec.is_int, True, e) if kind == "state" else x)
        ups = {}
        if rec.counter:
            ups[svars["cnt"]] = svars["cnt"] + 1
        if rec.acc:
            ups[svars["acc"]] = svars["acc"] + _squash(ev(rec.acc_expr, env), rec.dtype,
                                                       rec.is_int, True)  # fmt: skip
        return (results, ups) if ups else results

    if rec.checkpoints:
        res, updates = scan_checkpoints(step, sequences=seq_vars, outputs_info=outs_info,
                                        non_sequences=ns_vars, n_steps=n_steps,
                                        save_every_N=rec.checkpoints)  # fmt: skip
        if not isinstance(res, list):
            res = [res]
    else:
        res, updates = scan(
            step,
            sequences=seq_vars,
            outputs_info=outs_info,
            non_sequences=ns_vars,
            n_steps=n_steps,
            go_backwards=rec.go_backwards,
            truncate_gradient=rec.truncate,
            mode=inner,
            return_list=True,
        )
    outputs, out_types = [], []
    for k, (r, sel) in enumerate(zip(res, rec.select)):
        out_types.append(r.dtype)
        dtypes[("out", k)] = r.dtype
        for part, one in enumerate(_parts(sel)):
            outputs.append(_select(r, one, True))
            dtypes[("sel", k, part)] = outputs[-1].dtype
    return Built(ins, names, outputs, updates, svars, dtypes, out_types)


def _leaf_names(rec):
    names = []
    for i, (_, taps) in enumerate(rec.seqs):
        names += [f"s{i}t{t}" for t in taps]
    for k, (kind, _, taps, _) in enumerate(rec.outs):
        if kind == "state":
            names += [f"o{k}t{-t}" for t in taps]
    names += [f"n{j}" for j in range(len(rec.nonseqs))]
    return names


def _parts(sel):
    """The pieces of one output the function returns (several: it has several clients)."""
    return [] if sel == "none" else sel.split("+")


def _used_weights(rec):
    """The cost's weight of each returned piece."""
    return [w for w, sel in zip(rec.weights, rec.select) for _ in _parts(sel)]


def _select(r, sel, graph):
    if sel == "all":
        return r
    if sel == "last":
        return r[-1]
    if sel == "last2":
        return r[-2:]
    if graph:
        return r.sum(axis=0)
    return np.asarray(np.sum(r, axis=0, dtype="float64" if r.dtype == "float32" else None))


#: What a loop of 0 steps says when it cannot know its per-step outputs' shapes.
NO_STEP_REFUSAL = "the loop ran no step"


def _steps(rec, vals):
    """The number of steps of ``rec`` with inputs ``vals``."""
    if rec.steps == ("seqs",):
        return min(
            v.shape[0] - (max(max(t), 0) - min(min(t), 0))
            for v, (_, t) in zip([vals[f"seq{i}"] for i in range(len(rec.seqs))], rec.seqs)
        )
    if rec.steps[0] == "const":
        return rec.steps[1]
    return int(vals["n_steps"])


# -- the numpy loop -------------------------------------------------------------------------


def reference(rec, vals, dtypes, state=None, frozen=None, grad_steps=None, kinks=None):
    """numpy's outputs of ``rec`` (the selected ones), and the shared variables' values
    after the call (``state``: their values before it). ``frozen``/``grad_steps``: the
    steps before the last ``grad_steps`` read the inputs of ``frozen`` (truncated
    backpropagation's view of the loop). ``kinks``: a list, given, gets the number of
    kinks the loop met."""
    ev = Evaluator(False, dtypes)
    n = _steps(rec, vals)
    state = dict(state or {})

    def initial_rows(v, k):
        init, taps = v[f"init{k}"], rec.outs[k][2]
        return [init] if taps == [-1] else list(init[: -min(taps)])

    hist, late_init = {}, {}
    first_late = 0 if frozen is None or grad_steps is None else n - grad_steps
    for k, (kind, *_) in enumerate(rec.outs):
        if kind == "state":
            # The early steps read the frozen initial rows, the late ones the real ones.
            hist[k] = initial_rows(frozen if first_late > 0 else vals, k)
            late_init[k] = initial_rows(vals, k)
    per_step = {k: [] for k in range(len(rec.outs))}
    for t in range(n):
        use = vals
        if frozen is not None and grad_steps is not None and t < n - grad_steps:
            use = frozen
        env = {"__d__": rec.d, "__dtype__": rec.dtype}
        for i, (_, taps) in enumerate(rec.seqs):
            s = use[f"seq{i}"]
            lo, hi = min(min(taps), 0), max(max(taps), 0)
            for tap in taps:
                sl = s[tap - lo : s.shape[0] - (hi - tap)]
                if rec.go_backwards:
                    sl = sl[::-1]
                env[f"s{i}t{tap}"] = sl[t]
        for k, (kind, _, taps, _) in enumerate(rec.outs):
            if kind == "state":
                for tap in taps:
                    p = len(hist[k]) + tap
                    late = t >= first_late and p < len(late_init[k])
                    env[f"o{k}t{-tap}"] = late_init[k][p] if late else hist[k][p]
        for j in range(len(rec.nonseqs)):
            env[f"n{j}"] = use[f"ns{j}"]
        env.update(state)
        new = []
        for kind, nd, _, e in rec.outs:
            x = _to_shape(ev(e, env), nd, rec.d, False)
            new.append(_squash(x, rec.dtype, rec.is_int, False, e) if kind == "state" else x)
        for k, x in enumerate(new):
            if rec.outs[k][0] == "state":
                hist[k].append(x)
            per_step[k].append(x)
        if rec.counter:
            state["cnt"] = np.asarray(state["cnt"] + 1, dtype="int64")
        if rec.acc:
            inc = _squash(ev(rec.acc_expr, env), rec.dtype, rec.is_int, False)
            state["acc"] = (state["acc"] + inc).astype(rec.dtype)
    outputs = []
    for k, ((_, nd, _, _), sel) in enumerate(zip(rec.outs, rec.select)):
        row = (rec.d,) if nd == 1 else ()
        stack = np.array(per_step[k], dtype=dtypes[("out", k)]).reshape((n, *row))
        if rec.checkpoints:
            stack = stack[[min(c + rec.checkpoints, n) - 1 for c in range(0, n, rec.checkpoints)]]
        for part, one in enumerate(_parts(sel)):
            outputs.append(_select(stack, one, False).astype(dtypes[("sel", k, part)]))
    if kinks is not None:
        kinks.append(ev.kinks)
    return outputs, state


# -- checks -------------------------------------------------------------------------------


def _tol(rec, dtypes):
    """float32 anywhere (an input, a cast in the step): float32's tolerance."""
    f32 = "float32" in (rec.dtype, *rec.seq_dtypes, *(d for _, d in rec.nonseqs))
    return 5e-4 if f32 or any(str(d) == "float32" for d in dtypes.values()) else 1e-9


def close(got, want, tol):
    """Why ``got`` is not ``want`` (shape, dtype, values), or None."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape}, numpy {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, numpy {want.dtype}"
    if want.dtype.kind in "biu":
        if not np.array_equal(got, want):
            return f"values differ: {got.ravel()[:8]} numpy {want.ravel()[:8]}"
        return None
    if not np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True):
        err = np.max(np.abs(got.astype(float) - want.astype(float)))
        return f"values differ (max abs error {err:.3g})"
    return None


def _dtypes(rec):
    dtypes = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build(rec, ENGINES["py"][0](), dtypes)
    return dtypes


def _initial_state(rec):
    st = {}
    if rec.counter:
        st["cnt"] = np.asarray(0, dtype="int64")
    if rec.acc:
        st["acc"] = np.zeros(rec.d, dtype=rec.dtype)
    return st


def check(rec, engines):
    """The problems of ``rec`` on each engine: ``[(engine, problem), ...]`` (empty: all
    agree with numpy)."""
    dtypes = _dtypes(rec)
    problems = []
    for name in engines:
        problems += [(name, p) for p in _check_engine(rec, name, dtypes)]
    return problems


def _engine_context(name, rec):
    _, flags, build_mode = ENGINES[name]
    stack = engine_context(flags, build_mode, rec)
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


def _check_engine(rec, name, dtypes):
    tol = _tol(rec, dtypes)
    with _engine_context(name, rec):
        try:
            b = build(rec, ENGINES[name][0]())
            f = function(b.inputs, b.outputs, updates=b.updates, mode=ENGINES[name][0](),
                         on_unused_input="ignore")  # fmt: skip
        except Exception as e:
            return [f"compile raised {type(e).__name__}: {e}"]
        state = _initial_state(rec)
        kept, problems = [], []
        for call in (0, 1):
            vals = input_values(rec, call)
            want, new_state = reference(rec, vals, dtypes, state)
            args = _args(rec, call, vals, b.names)
            try:
                got = [_host(g) for g in f(*args)]
            except ValueError as e:
                if NO_STEP_REFUSAL in str(e) and _steps(rec, vals) == 0:
                    continue  # Theano refuses every loop of 0 steps; this one too
                return problems + [f"call {call} raised {type(e).__name__}: {e}"]
            except Exception as e:
                return problems + [f"call {call} raised {type(e).__name__}: {e}"]
            for nm, a in zip(b.names, args):
                if not np.array_equal(a, vals[nm]):
                    problems.append(f"call {call}: input {nm} modified")
            for j, (g, w) in enumerate(zip(got, want)):
                why = close(g, w, tol)
                if why:
                    problems.append(f"call {call}: output {j}: {why}")
            for key, svar in b.shared.items():
                why = close(_host(svar.get_value()), new_state[key], tol)
                if why:
                    problems.append(f"call {call}: shared {key}: {why}")
                new_state[key] = np.array(_host(svar.get_value()))
            for j, (obj, copy) in enumerate(kept):
                if not np.array_equal(_host(obj), copy, equal_nan=True):
                    problems.append(f"call {call}: the first call's output {j} was overwritten")
            if call == 0:
                kept = [(g, np.array(g, copy=True)) for g in got]
            state = new_state
            if problems:
                return problems
    return []


# -- gradients -----------------------------------------------------------------------------


def differentiable(rec):
    """Whether :func:`check_grad` applies: a float program with steps, no shared
    variables, some input of its dtype to differentiate."""
    return (
        rec.dtype in ("float32", "float64")
        and not rec.counter
        and not rec.acc
        and _grad_names(rec)
        and not _zero_steps_possible(rec)
    )


def _zero_steps_possible(rec):
    return rec.steps == ("const", 0) or (rec.steps == ("sym",) and 0 in rec.sym_steps)


def _grad_names(rec):
    names = [f"seq{i}" for i, dt in enumerate(rec.seq_dtypes) if dt == rec.dtype]
    names += [f"init{k}" for k, o in enumerate(rec.outs) if o[0] == "state"]
    names += [f"ns{j}" for j, (_, dt) in enumerate(rec.nonseqs) if dt == rec.dtype]
    return names


def _cost_np(rec, vals, dtypes, frozen=None, grad_steps=None):
    outs, _ = reference(rec, vals, dtypes, {}, frozen, grad_steps)
    used = _used_weights(rec)
    return sum(w * float(np.sum(o)) for w, o in zip(used, outs))


def numeric_grad(rec, vals, dtypes, eps=1e-6):
    """Central differences of the numpy loop's cost wrt each input of :func:`_grad_names`."""
    grad_steps = rec.truncate if rec.truncate > 0 else None
    out = {}
    for nm in _grad_names(rec):
        x = vals[nm]
        g = np.zeros(x.shape)
        for i in np.ndindex(*x.shape):
            hi, lo = dict(vals), dict(vals)
            hi[nm], lo[nm] = x.copy(), x.copy()
            hi[nm][i] += eps
            lo[nm][i] -= eps
            fr = vals if grad_steps else None
            g[i] = (_cost_np(rec, hi, dtypes, fr, grad_steps)
                    - _cost_np(rec, lo, dtypes, fr, grad_steps)) / (2 * eps)  # fmt: skip
        out[nm] = g
    return out


def _in_float64(rec):
    """``rec`` with its float32 loop state, sequences and non-sequences in float64."""
    f64 = {"float32": "float64"}
    return replace(
        rec,
        dtype=f64.get(rec.dtype, rec.dtype),
        seq_dtypes=[f64.get(d, d) for d in rec.seq_dtypes],
        nonseqs=[(kind, f64.get(d, d)) for kind, d in rec.nonseqs],
    )


def check_grad(rec, engines):
    """The gradient problems of ``rec`` on each engine, as :func:`check`'s. A float32
    program's gradient is compared with differences of the loop computed in float64
    (loosely): its value, and its dtype exactly (the input's).

    >>> rng = np.random.default_rng(0)
    >>> rec = next(r for r in iter(lambda: generate(rng), None) if differentiable(r))
    >>> check_grad(rec, ["py"])
    []
    """
    dtypes = _dtypes(rec)
    vals = input_values(rec, 0)
    tol = (1e-4, 1e-5) if rec.dtype == "float64" else (3e-2, 3e-3)
    # numpy's side in float64: float32 differences of 1e-6 steps would be noise
    dtypes64 = {k: np.dtype("float64") if str(v) == "float32" else v for k, v in dtypes.items()}
    vals64 = {k: v.astype("float64") if v.dtype == "float32" else v for k, v in vals.items()}
    # ... and its states kept in float64 too: squashed to float32 at each step, a change
    # of 1e-6 in an input is lost where the state's derivative is small (a float32 loop's
    # differences said 0 where the gradient is -0.0039: seed 9001, program 1).
    rec64 = _in_float64(rec)
    kinks = []
    reference(rec64, vals64, dtypes64, kinks=kinks)
    if kinks[0]:
        return []  # a tie at the point: the gradient is a convention there
    want = numeric_grad(rec64, vals64, dtypes64)
    want2 = None
    problems = []
    for name in engines:
        with _engine_context(name, rec):
            try:
                b = build(rec, ENGINES[name][0]())
                used = _used_weights(rec)
                cost = sum(w * o.sum() for w, o in zip(used, b.outputs))
                wrt = [b.inputs[b.names.index(nm)] for nm in want]
                # A one-step loop is no loop (as in Theano): an initial state its step
                # ignores is then disconnected, and its gradient zero, as numpy's.
                gs = grad(cost, wrt, disconnected_inputs="ignore")
                f = function(b.inputs, gs, mode=ENGINES[name][0](), on_unused_input="ignore")
                got = [_host(g) for g in f(*_args(rec, 0, vals, b.names))]
            except Exception as e:
                problems.append((name, f"grad raised {type(e).__name__}: {e}"))
                continue
        for nm, g in zip(want, got):
            w = want[nm]
            if g.dtype != vals[nm].dtype:
                problems.append((name, f"grad wrt {nm}: dtype {g.dtype}, input {vals[nm].dtype}"))
            elif g.shape != w.shape or not np.allclose(g, w, rtol=tol[0], atol=tol[1]):
                # A kink (max, switch, ...) near the point: differences of two step
                # sizes disagree there; those are not counted.
                if want2 is None:
                    want2 = numeric_grad(rec64, vals64, dtypes64, eps=1e-8)
                if not np.allclose(want2[nm], w, rtol=1e-3, atol=1e-4):
                    continue
                err = np.max(np.abs(g - w)) if g.shape == w.shape else f"shape {g.shape}"
                problems.append((name, f"grad wrt {nm}: max error {err}"))
    return problems


# -- shrinking -------------------------------------------------------------------------------


def _shape(e, leaves):
    kind = e[0]
    if kind == "leaf":
        return leaves[e[1]]
    if kind in ("const", "nestlast", "red", "idx", "vdot"):
        return "s"
    if kind in ("nest", "rev", "roll", "setsub", "incsub", "alloc", "dot"):
        return "v"
    if kind == "bin":
        return "v" if "v" in (_shape(e[2], leaves), _shape(e[3], leaves)) else "s"
    return _shape(e[-1], leaves)  # un, cast, switch, ifelse: their last operand's


def _subtrees(e, path=()):
    yield path, e
    for i, a in enumerate(e):
        if isinstance(a, tuple) and a and isinstance(a[0], str) and i > 0:
            yield from _subtrees(a, (*path, i))


def _put(e, path, new):
    if not path:
        return new
    i = path[0]
    return (*e[:i], _put(e[i], path[1:], new), *e[i + 1 :])


def _leaves(rec):
    leaves = {}
    for i, (nd, taps) in enumerate(rec.seqs):
        for t in taps:
            leaves[f"s{i}t{t}"] = "v" if nd == 2 else "s"
    for k, (kind, nd, taps, _) in enumerate(rec.outs):
        if kind == "state":
            for t in taps:
                leaves[f"o{k}t{-t}"] = "v" if nd == 1 else "s"
    for j, (kind, _) in enumerate(rec.nonseqs):
        leaves[f"n{j}"] = kind
    if rec.acc:
        leaves["acc"] = "v"
    if rec.counter:
        leaves["cnt"] = "s"
    return leaves


def _simpler_trees(e, leaves):
    """Smaller trees of ``e``'s shape: a subtree replaced by one of its operands of the
    same shape, or by a constant."""
    for path, sub in _subtrees(e):
        if sub[0] in ("leaf", "const"):
            continue
        shape = _shape(sub, leaves)
        const = ("const", 1) if shape == "s" else ("alloc", ("const", 1))
        yield _put(e, path, const)
        for _, child in _subtrees(sub):
            if child is not sub and _shape(child, leaves) == shape:
                yield _put(e, path, child)


def _uses(rec, name):
    trees = [o[3] for o in rec.outs] + ([rec.acc_expr] if rec.acc else [])
    return any(t == ("leaf", name) for e in trees for _, t in _subtrees(e))


def _candidates(rec):
    """Smaller recipes than ``rec``, the biggest cuts first."""
    leaves = _leaves(rec)
    for k in range(len(rec.outs)):
        if len(rec.outs) > 1 and not any(
            _uses(rec, nm) for nm in leaves if nm.startswith(f"o{k}t")
        ):
            rest = [j for j in range(len(rec.outs)) if j != k]
            names = {f"o{j}t": f"o{rest.index(j)}t" for j in rest}

            def rename(e, names=names):
                if e[0] == "leaf" and e[1][:3] in names:
                    return ("leaf", names[e[1][:3]] + e[1][3:])
                return (e[0], *(rename(a) if isinstance(a, tuple) else a for a in e[1:]))

            outs = [(*rec.outs[j][:3], rename(rec.outs[j][3])) for j in rest]
            sel = [rec.select[j] for j in rest]
            if any(x != "none" for x in sel):
                yield replace(rec, outs=outs, select=sel,
                              weights=[rec.weights[j] for j in rest],
                              acc_expr=rename(rec.acc_expr) if rec.acc else None)  # fmt: skip
    for flag in ("counter", "acc"):
        if getattr(rec, flag) and not _uses(rec, "cnt" if flag == "counter" else "acc"):
            yield replace(rec, **{flag: False}, acc_expr=None if flag == "acc" else rec.acc_expr)
    for j in range(len(rec.nonseqs)):
        if not _uses(rec, f"n{j}") and j == len(rec.nonseqs) - 1:
            yield replace(rec, nonseqs=rec.nonseqs[:-1])
    i = len(rec.seqs) - 1
    if i >= 0 and not any(_uses(rec, nm) for nm in leaves if nm.startswith(f"s{i}t")):
        if rec.steps != ("seqs",) or i > 0:
            yield replace(rec, seqs=rec.seqs[:-1], seq_dtypes=rec.seq_dtypes[:-1])
    for k, (kind, nd, taps, e) in enumerate(rec.outs):
        for small in _simpler_trees(e, leaves):
            yield replace(rec, outs=[*rec.outs[:k], (kind, nd, taps, small), *rec.outs[k + 1 :]])
        if rec.select[k] not in ("all", "none"):
            yield replace(rec, select=[*rec.select[:k], "all", *rec.select[k + 1 :]])
    if rec.acc:
        for small in _simpler_trees(rec.acc_expr, leaves):
            yield replace(rec, acc_expr=small)
    for flag, off in (("go_backwards", False), ("truncate", -1), ("inner_mode", "same")):
        if getattr(rec, flag) != off:
            yield replace(rec, **{flag: off})


def shrink(rec, fails, budget=300):
    """A smaller recipe for which ``fails(recipe)`` still holds (greedy, first cut that
    keeps the failure, until none does or ``budget`` tries are spent).

    >>> rec = generate(np.random.default_rng(0))
    >>> small = shrink(rec, lambda r: len(r.outs) >= 1)
    >>> len(small.outs) <= len(rec.outs)
    True
    """
    tries = 0
    progress = True
    while progress and tries < budget:
        progress = False
        for cand in _candidates(rec):
            tries += 1
            try:
                ok = fails(cand)
            except Exception:
                ok = False
            if ok:
                rec, progress = cand, True
                break
            if tries >= budget:
                break
    return rec


# -- the driver ------------------------------------------------------------------------------


def available_engines():
    """The engines this machine runs (``opencl`` needs a device, ``dask`` the package)."""
    names = ["py", "fast_compile", "cpu", "cpu_c", "cpu_late_c"]
    if opencl_available()[0]:
        names.append("opencl")
    try:
        import dask.array  # noqa: F401  (an optional extra)

        names.append("dask")
    except ImportError:
        pass
    return names


def run(
    n,
    seed=0,
    engines=None,
    opencl_every=10,
    grads=True,
    out=sys.stdout,
    start=0,
    hang_after=0,
    layouts="default",
):
    """Check recipes ``start`` to ``n - 1`` of ``seed`` (OpenCL on every
    ``opencl_every``-th); the failures as ``(index, problems, recipe)``, and the counts
    of programs run per engine. ``hang_after``: seconds after which one program counts
    as hung (every thread's stack is printed and the process ends; 0: never).
    ``layouts``: the input arrays' memory layouts (``"mixed"``: the same programs and
    values, each array in one of :data:`~theano_dag.testing.fuzz.LAYOUT_KINDS`)."""
    if layouts not in LAYOUTS:
        raise ValueError(f"layouts must be one of {LAYOUTS}, not {layouts!r}")
    engines = engines or available_engines()
    rng = np.random.default_rng(seed)
    failures, counts = [], {e: 0 for e in engines}
    counts["grad"] = 0
    for i in range(n):
        rec = replace(generate(rng), layouts=layouts)
        if i < start:
            continue
        if i > start and i % 25 == 0:
            print(f"# {i} programs, {len(failures)} failing", file=out, flush=True)
        names = [e for e in engines if e != "opencl" or i % opencl_every == 0]
        if hang_after:
            faulthandler.dump_traceback_later(hang_after, exit=True, file=out)
        try:
            problems = check(rec, names)
            for e in names:
                counts[e] += 1
            if grads and names and differentiable(rec):
                counts["grad"] += 1
                problems += [(e, f"[grad] {p}") for e, p in check_grad(rec, names)]
        except Exception:
            problems = [("fuzzer", traceback.format_exc())]
        if problems:
            failures.append((i, problems, rec))
            print(f"# program {i} (seed {seed}): {rec!r}", file=out)
            for e, p in problems:
                print(f"#   {e}: {p}", file=out)
            out.flush()
    if hang_after:
        faulthandler.cancel_dump_traceback_later()
    return failures, counts


def main(argv=None):
    ap = argparse.ArgumentParser(description="Differential fuzzing of theano_dag's scan.")
    ap.add_argument("--n", type=int, default=100, help="programs to run")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default=None, help="comma-separated (default: all here)")
    ap.add_argument("--opencl-every", type=int, default=10)
    ap.add_argument("--no-grads", action="store_true")
    ap.add_argument("--hang-after", type=int, default=600, help="seconds for one program")
    ap.add_argument(
        "--layouts",
        choices=LAYOUTS,
        default="default",
        help="mixed: each input array Fortran-ordered, reversed, strided, read-only, "
        "unaligned... (the same programs and values)",
    )
    a = ap.parse_args(argv)
    engines = a.engines.split(",") if a.engines else None
    t0 = time.perf_counter()
    failures, counts = run(
        a.n,
        a.seed,
        engines,
        a.opencl_every,
        not a.no_grads,
        start=a.start,
        hang_after=a.hang_after,
        layouts=a.layouts,
    )
    print(
        f"{a.n - a.start} programs (seed {a.seed}): {len(failures)} failing; runs per "
        f"engine {counts}; {time.perf_counter() - t0:.0f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
