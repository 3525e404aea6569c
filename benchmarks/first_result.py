"""Time to first result (issue 5, case 5): build + compile + first call of big graphs.

Graphs, the same for every engine (a seeded recipe):

* ``dag-N``: a random elementwise DAG of N nodes over 4 input vectors (length
  1000). Node k applies a random unary op (sin, cos, tanh, neg, abs, sqr) to node
  k-1, or a random binary op (mul, maximum, minimum, average, half difference) to
  node k-1 and a random earlier node; values stay in [-1, 1]. The output is the
  last node, so every node is computed.
* ``chain-N``: N unary ops in a row (no graph algorithm may recurse per node).

Each measurement runs in a fresh process (imports are not timed): the clock runs
from building the symbolic graph to the first result. ``cold`` uses an empty
compile cache, ``warm`` runs again over the cache the cold run left. theano_dag runs
under Python's default recursion limit; the peers get a raised one (they recurse
per node), and for the chain the report says whether they pass the default. Engines:
theano_dag (default mode; fused kernels compile in the background while the
first calls run numpy, so ``kernels_ready_s`` is reported too), PyTensor in each
mode of ``--pytensor-modes`` (the best is reported as ``pytensor_best``), JAX's
jit (its compile cache is per process: cold and warm are alike). A run that fails
(a RecursionError, a timeout) reports its error instead of a time.

One JSON line per graph. Target (issue 5): at most a tenth of PyTensor's best
mode, warm and cold.

Each figure is the median of ``--repeats`` fresh processes for theano_dag (a fresh
cache each, then a warm run over it); the peers take seconds to minutes per run, so
they run ``--peer-repeats`` times (default once).

Run: ``.venv/bin/python benchmarks/first_result.py [--sizes 1000 5000] [--timeout 600]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_INPUTS = 4
LENGTH = 1000
UNARY = ("sin", "cos", "tanh", "neg", "abs", "sqr")
# Peers recurse per node: they get this limit (theano_dag keeps Python's default, 1000).
PEER_RECURSION_LIMIT = 200_000
BINARY = ("mul", "maximum", "minimum", "avg", "halfdiff")


def recipe(kind, n, seed=0):
    """The graph as data: a list of (op, operand indices); indices < 0 are inputs."""
    rng = random.Random(seed)
    steps = []
    for k in range(n):
        prev = k - 1 if k else -1
        if kind == "chain" or k == 0 or rng.random() < 0.4:
            steps.append((UNARY[k % len(UNARY)] if kind == "chain" else rng.choice(UNARY), (prev,)))
        else:
            other = rng.randrange(-N_INPUTS, k - 1)
            steps.append((rng.choice(BINARY), (prev, other)))
    return steps


def build(lib, inputs, steps, ops):
    vals = []

    def get(i):
        return inputs[-i - 1] if i < 0 else vals[i]

    for op, args in steps:
        vals.append(ops[op](*[get(i) for i in args]))
    return vals[-1]


def op_table(lib, numpy_like=True):
    abs_ = abs if not numpy_like else lib.abs
    return {
        "sin": lib.sin, "cos": lib.cos, "tanh": lib.tanh, "neg": lambda a: -a,
        "abs": abs_, "sqr": lambda a: a * a, "mul": lambda a, b: a * b,
        "maximum": lib.maximum, "minimum": lib.minimum,
        "avg": lambda a, b: (a + b) * 0.5, "halfdiff": lambda a, b: (a - b) * 0.5,
    }  # fmt: skip


def input_values():
    import numpy as np

    rng = np.random.default_rng(0)
    return [rng.uniform(-1, 1, LENGTH) for _ in range(N_INPUTS)]


# -- workers (one per fresh process) ----------------------------------------------------


def run_theano_dag(steps, compiledir, _mode, _limit):
    sys.path.insert(0, ROOT)
    import theano_dag
    import theano_dag.tensor as tt
    from theano_dag.config import config
    from theano_dag.engines.cpu.native import ckernel

    config.compiledir = compiledir
    ckernel.register()
    xs = input_values()
    sys.setrecursionlimit(1000)  # Python's default: deep graphs must not need more
    t0 = time.perf_counter()
    inputs = [tt.dvector(f"x{k}") for k in range(N_INPUTS)]
    out = build(tt, inputs, steps, op_table(tt, numpy_like=False))
    t1 = time.perf_counter()
    f = theano_dag.function(inputs, out, on_unused_input="ignore")
    t2 = time.perf_counter()
    r = f(*xs)
    t3 = time.perf_counter()
    in_c = ckernel.wait_for_kernels(f)
    t4 = time.perf_counter()
    return {"s": t3 - t0, "build_s": t1 - t0, "function_s": t2 - t1, "first_call_s": t3 - t2,
            "kernels_ready_s": t4 - t0, "in_c": in_c, "checksum": float(r.sum())}  # fmt: skip


def run_pytensor(steps, compiledir, mode, limit):
    os.environ["PYTENSOR_FLAGS"] = f"compiledir={compiledir}"
    import pytensor
    import pytensor.tensor as pt

    sys.setrecursionlimit(limit)
    xs = input_values()
    t0 = time.perf_counter()
    inputs = [pt.dvector(f"x{k}") for k in range(N_INPUTS)]
    out = build(pt, inputs, steps, op_table(pt, numpy_like=False))
    f = pytensor.function(inputs, out, mode=mode, on_unused_input="ignore")
    r = f(*xs)
    return {"s": time.perf_counter() - t0, "checksum": float(r.sum())}


def run_jax(steps, compiledir, _mode, limit):
    import jax
    import jax.numpy as jnp

    sys.setrecursionlimit(limit)
    jax.config.update("jax_enable_x64", True)
    xs = input_values()
    t0 = time.perf_counter()

    def fn(*inputs):
        return build(jnp, list(inputs), steps, op_table(jnp))

    r = jax.jit(fn)(*xs).block_until_ready()
    return {"s": time.perf_counter() - t0, "checksum": float(r.sum())}


WORKERS = {"theano_dag": run_theano_dag, "pytensor": run_pytensor, "jax": run_jax}


def worker(argv):
    engine, kind, n, compiledir, mode, limit = argv
    steps = recipe(kind, int(n))
    try:
        res = WORKERS[engine](steps, compiledir, mode, int(limit))
    except RecursionError as e:
        res = {"error": f"RecursionError: {e}"}
    except Exception as e:
        res = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    print("RESULT " + json.dumps(res), flush=True)


def measure(engine, kind, n, compiledir, mode, timeout, limit=PEER_RECURSION_LIMIT):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", engine, kind, str(n),
           compiledir, mode or "-", str(limit)]  # fmt: skip
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 5000])
    ap.add_argument("--chain", type=int, default=5000)
    ap.add_argument("--pytensor-modes", default="FAST_COMPILE,CVM,NUMBA")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=5, help="theano_dag runs (median taken)")
    ap.add_argument(
        "--peer-repeats", type=int, default=1, help="runs of each peer (seconds each: one)"
    )
    args = ap.parse_args(argv)
    cases = [("dag", n) for n in args.sizes] + ([("chain", args.chain)] if args.chain else [])
    for kind, n in cases:
        row = {"benchmark": "first_result", "case": f"{kind}-{n}", "nodes": n}
        peers = (
            []
            if args.no_peers
            else ([("pytensor", m) for m in args.pytensor_modes.split(",") if m] + [("jax", None)])
        )
        best = {}
        for engine, mode in [("theano_dag", None), *peers]:
            name = engine if mode is None else f"{engine}_{mode}"
            repeats = args.repeats if engine == "theano_dag" else args.peer_repeats
            runs = {"cold": [], "warm": []}
            for _ in range(max(1, repeats)):
                cache = tempfile.mkdtemp(prefix=f"first_result_{name}_")
                for temp in ("cold", "warm"):
                    if engine == "jax" and temp == "warm":
                        continue  # no cache across processes: warm is cold
                    runs[temp].append(measure(engine, kind, n, cache, mode, args.timeout))
            for temp, results in runs.items():
                if not results:
                    continue
                label = name if engine == "jax" else f"{name}_{temp}"
                ok = sorted((r for r in results if "error" not in r), key=lambda r: r["s"])
                if not ok:
                    row[f"{label}_error"] = results[0]["error"]
                    continue
                res = ok[(len(ok) - 1) // 2]  # the median run (the lower one of two)
                row[f"{label}_s"] = round(res["s"], 3)
                if len(results) > 1:
                    row[f"{label}_runs"] = len(ok)
                parts = ("build_s", "function_s", "first_call_s")
                if all(p in res for p in parts):  # where theano_dag's time goes
                    row[f"{label}_split"] = {p: round(res[p], 3) for p in parts}
                if "kernels_ready_s" in res:
                    row[f"{label}_kernels_ready_s"] = round(res["kernels_ready_s"], 3)
                if "in_c" in res:
                    row[f"{label}_in_c"] = res["in_c"]
                if engine == "pytensor":
                    best[temp] = min(best.get(temp, float("inf")), res["s"])
            if kind == "chain" and engine != "theano_dag":
                # Do the peers survive Python's default recursion limit?
                res = measure(engine, kind, n, cache, mode, args.timeout, limit=1000)
                row[f"{name}_default_recursion_limit"] = res.get("error", "ok")[:60]
        for temp, s in best.items():
            row[f"pytensor_best_{temp}_s"] = round(s, 3)
            ours = row.get(f"theano_dag_{temp}_s")
            if ours is not None:
                row[f"theano_dag_vs_pytensor_best_{temp}"] = round(ours / s, 3)
        row["target_vs_pytensor_best"] = 0.1
        row["machine"] = f"{platform.machine()} {os.cpu_count()} cpus"
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2:])
    else:
        main()
