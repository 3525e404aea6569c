"""Differential fuzzing of the graph formats: the fuzzer's random graphs
(:mod:`theano_dag.testing.fuzz`) exported, run by another library or imported back, and
compared with numpy.

Targets (:data:`TARGETS`):

- ``onnx``: :func:`~theano_dag.formats.to_onnx`, run by ONNX Runtime;
- ``onnx_back``: that model imported back (:func:`~theano_dag.formats.from_onnx`) and
  compiled by theano_dag;
- ``pytensor``: :func:`~theano_dag.formats.to_pytensor`, compiled by PyTensor (its
  Python linker, no rewrites: the graph as converted);
- ``pytensor_back``: that graph converted back (:func:`~theano_dag.formats.from_pytensor`)
  and compiled by theano_dag;
- ``tuple_dag``: the FunctionGraph through the tuple-dag format and back.

theano_dag compiles the graphs that come back with its reference engine and no rewrites,
so that a difference is the conversion's. A graph a target refuses with its documented
error (an op without a counterpart) counts as unsupported, not as a failure; any other
error, and any value, dtype or shape that is not numpy's, is a failure. Graphs with a
shared variable are left out (the formats take values as initializers, a test of its
own).

Run: ``python -m theano_dag.testing.format_fuzz --n 200 --seed 1`` (``--targets
onnx,pytensor``); the extras the targets need (``onnx``, ``onnxruntime``, ``pytensor``)
are checked first, and a missing one is named.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import traceback
import warnings
from collections import Counter

import numpy as np

from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.formats import (
    from_onnx,
    from_pytensor,
    to_onnx,
    to_pytensor,
    tuple_dag_to_fgraph,
)
from theano_dag.formats.fgraph import fgraph_to_tuple_dag
from theano_dag.formats.foreign import NoCounterpartError
from theano_dag.formats.onnx import OnnxExportError
from theano_dag.graph.fg import FunctionGraph
from theano_dag.testing import fuzz

__all__ = ["TARGETS", "check_formats", "run", "main"]

#: target -> the extras (importable modules) it needs
TARGETS = {
    "onnx": ("onnx", "onnxruntime"),
    "onnx_back": ("onnx",),
    "pytensor": ("pytensor",),
    "pytensor_back": ("pytensor",),
    "tuple_dag": (),
}

# The refusals a target documents: an op (or a dtype) it has no counterpart for.
UNSUPPORTED = (OnnxExportError, NoCounterpartError)

_REF = Mode(linker="py", optimizer=None)


def missing_extras(targets):
    """The modules ``targets`` need that this Python cannot import, by target."""
    return {
        t: [m for m in TARGETS[t] if importlib.util.find_spec(m) is None]
        for t in targets
        if any(importlib.util.find_spec(m) is None for m in TARGETS[t])
    }


def _ours(inputs, outputs):
    f = function(inputs, outputs, mode=_REF, on_unused_input="ignore")
    return lambda args: f(*args)


def _ort(model):
    import onnxruntime as ort  # an extra: imported where a target asks for it

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    # 0-d values as arrays: ONNX Runtime refuses numpy scalars
    return lambda args: sess.run(None, {n: np.asarray(a) for n, a in zip(names, args)})


def _pytensor(pfg):
    import pytensor  # an extra: imported where a target asks for it
    from pytensor.compile.mode import Mode as PMode  # the same extra

    f = pytensor.function(
        pfg.inputs,
        pfg.outputs,
        mode=PMode(linker="py", optimizer=None),
        on_unused_input="ignore",
    )
    return lambda args: f(*args)


def _compile(target, inputs, outputs):
    """A function of the inputs' values: what ``target`` computes of the graph, converted
    and compiled once for the calls of a recipe."""
    if target in ("onnx", "onnx_back"):
        model = to_onnx(inputs, outputs)
        return _ort(model) if target == "onnx" else _ours(*from_onnx(model))
    fg = FunctionGraph(inputs, outputs, clone=True)
    if target in ("pytensor", "pytensor_back"):
        pfg = to_pytensor(fg, strict=True)
        if target == "pytensor":
            return _pytensor(pfg)
        back = from_pytensor(pfg, strict=True)
        return _ours(back.inputs, back.outputs)
    if target == "tuple_dag":
        back = tuple_dag_to_fgraph(*fgraph_to_tuple_dag(fg))
        return _ours(list(back.inputs), list(back.outputs))
    raise ValueError(f"format_fuzz: unknown target {target!r}; expected one of {list(TARGETS)}")


def _pytensor_value_refusal(exc) -> bool:
    """Whether PyTensor's Python linker refused a value at run time, as its casts do
    under numpy 2 for a float out of an integer's range (``np.int8(536)`` raises): the
    peer's limit, not the conversion's; so is a dtype its numba kernels lack (its
    Einsum of uint16)."""
    if type(exc).__name__ == "TypingError":  # its numba kernels lack the dtype
        return True
    return isinstance(exc, (OverflowError, ValueError)) and any(
        s in str(exc) for s in ("out of bounds", "convert", "too large")
    )


def _nonfinite(target, want):
    """How :func:`fuzz.close` compares NaN and the infinities: as numpy's, except for
    PyTensor's float outputs, where only the values finite on both sides count (its
    kernels are not numpy's there: its log_softmax of a NaN row is -0.0). Integers and
    bools are always compared."""
    return "either" if target == "pytensor" and want.dtype.kind in "fc" else None


def check_formats(rec, targets):
    """Run ``rec`` through each of ``targets``: ``(problems, unsupported)``, the first
    a list of ``(target, what)`` pairs, the second the targets that refused the graph
    with their documented error, and why.

    >>> rng = np.random.default_rng(3)
    >>> recipes = [fuzz.generate(rng) for _ in range(5)]
    >>> [check_formats(rec, ["tuple_dag"])[0] for rec in recipes]
    [[], [], [], [], []]
    """
    problems, unsupported = [], {}
    if rec.shared_index is not None:
        return problems, {"all": "a shared variable"}
    tol = fuzz._tol(rec)
    int_rtols = fuzz._int_rtols(rec)
    vals = [fuzz._values(rec, call) for call in (0, 1)]
    wants = [fuzz.reference(rec, v) for v in vals]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        inputs, _, syms = fuzz._build(rec)
        ins, outs = [syms[k] for k in inputs], [syms[k] for k in rec.outputs]
        for target in targets:
            stage = "compile"
            try:
                f = _compile(target, ins, outs)
                for call, (v, want) in enumerate(zip(vals, wants)):
                    stage = f"call {call}"
                    got = f([v[k].copy() for k in inputs])
                    whys = [
                        f"call {call}: output {j} ({fuzz._name(k)}): {why}"
                        for j, (k, g) in enumerate(zip(rec.outputs, got))
                        if (
                            why := fuzz.close(
                                np.asarray(g), want[k], tol, _nonfinite(target, want[k]),
                                int_rtols[j],
                            )
                        )
                    ]  # fmt: skip
                    if whys:
                        problems.append((target, whys[0]))
                        break
            except UNSUPPORTED as e:
                unsupported[target] = f"{type(e).__name__}: {e}"
            except Exception as e:
                if target == "onnx" and "NOT_IMPLEMENTED" in str(e):
                    # A valid model with an operator or a dtype ONNX Runtime has no
                    # kernel for (ReduceSum of uint64): the runtime's gap, not ours.
                    unsupported[target] = f"ONNX Runtime: {e}"
                elif target == "pytensor" and _pytensor_value_refusal(e):
                    unsupported[target] = f"PyTensor's Python linker: {e}"
                else:
                    problems.append((target, f"{stage} raised {type(e).__name__}: {e}"))
    return problems, unsupported


def run(n, seed=0, targets=None, out=sys.stdout, start=0):
    """Check recipes ``start`` to ``n - 1`` of the fuzzer's ``seed`` on ``targets``
    (default: all of :data:`TARGETS`); the failures as ``(index, target, what, recipe)``
    and a Counter of the unsupported refusals by target.

    >>> failures, refused = run(5, seed=3, targets=["tuple_dag"])
    >>> failures
    []
    """
    targets = list(targets or TARGETS)
    missing = missing_extras(targets)
    if missing:
        raise ImportError(
            "format_fuzz: the targets "
            + ", ".join(f"{t} need {', '.join(m)}" for t, m in missing.items())
            + " (pip install 'theano_dag[onnx]' or pytensor)"
        )
    rng = np.random.default_rng(seed)
    failures, refused = [], Counter()
    for i in range(n):
        rec = fuzz.generate(rng)
        if i < start:
            continue
        try:
            problems, unsupported = check_formats(rec, targets)
        except Exception:  # numpy's side failed: a bug of the fuzzer, reported, not fatal
            print(f"# graph {i} (seed {seed}): the fuzzer raised: {rec!r}", file=out)
            traceback.print_exc(file=out)
            continue
        for target in unsupported:
            refused[target] += 1
        for target, what in problems:
            failures.append((i, target, what, rec))
            print(f"# graph {i} (seed {seed}): {target}: {what}", file=out)
            print(f"# recipe: {rec!r}", file=out, flush=True)
    return failures, refused


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Differential fuzzing of the graph formats.")
    ap.add_argument("--n", type=int, default=200, help="graphs to run")
    ap.add_argument("--start", type=int, default=0, help="skip the graphs before this one")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", default=None, help=f"comma-separated of {list(TARGETS)}")
    a = ap.parse_args(argv)
    targets = a.targets.split(",") if a.targets else list(TARGETS)
    t0 = time.perf_counter()
    failures, refused = run(a.n, a.seed, targets, start=a.start)
    per = Counter(t for _, t, _, _ in failures)
    print(
        f"{a.n - a.start} graphs (seed {a.seed}), targets {targets}: {len(failures)} failing "
        f"({dict(per)}); refused as unsupported: {dict(refused)}; "
        f"{time.perf_counter() - t0:.0f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
