"""Compile time of small graphs: build + ``function`` + first call, in a warm process.

A program that compiles many small functions (PyMC3 compiles the model's log-density,
its gradient, point functions, a trace's functions; a training script its steps) pays
each one's compile. This benchmark times the six graphs of ``small_graphs.py``
(``_small_graph_cases.py``): CPU time from building the graph to the first result, in a
process that compiled them once before (imports, registries and the caches on disk
warm), medians of ``--repeats`` rounds, the engines taking turns within a round:

* ``theano_dag``: the default mode with the cache of optimized graphs off
  (``function_cache=False``), the graph copied and rewritten as for a graph compiled
  the first time; ``theano_dag_cached``: with that cache on (the graph was compiled
  before, so ``function`` loads its optimized form);
* PyTensor's C backend (``Mode(linker="cvm", optimizer="fast_run")``) and its
  ``FAST_COMPILE`` mode, compile cache warm, when PyTensor is installed.

One JSON line per case, in milliseconds, with theano_dag's ratio to each peer
(``<peer>_over_theano_dag`` above 1: theano_dag compiles faster). Every peer's first
outputs are checked against theano_dag's.

Run: ``.venv/bin/python benchmarks/small_compile.py [--repeats 15] [--cases linreg_logp_dlogp
...]`` (pin it for steadier figures: ``taskset -c 1``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

import theano_dag
from theano_dag.engines.cpu.native.ckernel import wait_for_kernels

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _small_graph_cases import CASES, make_data  # noqa: E402
from small_graphs import pytensor_libs, theano_dag_lib  # noqa: E402


def compile_once(lib, case, data, flags=None):
    """``(CPU seconds from building the graph to the first result, first outputs, f)``."""
    t0 = time.process_time()
    with theano_dag.config.change_flags(**(flags or {})):
        ins, outs, ups, args = CASES[case](lib, data)
        f = lib.function(ins, outs, ups)
        first = f(*args)
    seconds = time.process_time() - t0
    return seconds, [np.asarray(v).copy() for v in first], f


def engines():
    """``[(name, lib, theano_dag flags or None)]`` and the peers left out, with why."""
    ours = theano_dag_lib()
    found = [("theano_dag", ours, {"function_cache": False}), ("theano_dag_cached", ours, {})]
    peers, missing = pytensor_libs()
    for lib in peers:
        if lib.name == "pytensor_c":
            found.append(("pytensor_c", lib, None))
            fast = types.SimpleNamespace(**vars(lib))
            fast.function = lambda i, o, u, c=lib.compile: c(i, o, updates=u, mode="FAST_COMPILE")
            fast.name = "pytensor_fast_compile"
            found.append(("pytensor_fast_compile", fast, None))
    missing.pop("pytensor_numba", None)  # numba's compile is not what is compared here
    return found, missing


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    args = ap.parse_args(argv)
    data = make_data()
    found, missing = engines()
    head = {
        "benchmark": "small_compile",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "theano_dag": theano_dag.__version__,
        "pytensor": next((lib.version for n, lib, _f in found if n == "pytensor_c"), None),
        "missing": missing,
    }
    print(json.dumps(head), flush=True)
    for case in args.cases:
        reference = None
        for name, lib, flags in found:  # warm-up: fills the caches, checks the values
            _s, first, f = compile_once(lib, case, data, flags)
            if name.startswith("theano_dag"):
                wait_for_kernels(f)
            if reference is None:
                reference = first
            else:
                for a, b in zip(reference, first):
                    np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-9, err_msg=f"{name} {case}")
        times: dict = {name: [] for name, _l, _f in found}
        for _ in range(args.repeats):
            for name, lib, flags in found:
                times[name].append(compile_once(lib, case, data, flags)[0])
        row = {"case": case, "unit": "ms", "repeats": args.repeats}
        for name in times:
            row[name] = round(1e3 * statistics.median(times[name]), 3)
        for name in times:
            if not name.startswith("theano_dag"):
                row[f"{name}_over_theano_dag"] = round(row[name] / row["theano_dag"], 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
