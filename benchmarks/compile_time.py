"""Benchmark: FAST_RUN optimization time of theano_dag, next to PyTensor's, on big graphs.

Graphs (built identically in both libraries from one seeded recipe):

- random DAGs of 1,000 / 10,000 / 50,000 elementwise nodes over 16 float vectors: unary
  (exp, tanh, sin, neg, sqr, abs) and binary (add, mul, sub, maximum, true_div) ops whose
  arguments come from the 64 most recent variables, some with constants (x*1, x+0, x*2)
  and about 5% exact duplicates of an earlier node (work for merge); every variable
  nobody uses is an output;
- a 200-layer MLP (tanh layers of width 32), forward pass plus the gradient of a squared
  error with respect to every weight and bias.

With ``--first-result``, also the time to first result of each random DAG: the CPU time
of building the graph, ``function`` in the library's default mode and the first call (on
vectors of 1,000 values), each run in a fresh Python process (imports not timed; the
kernel caches on disk warm: a first run fills them and is not counted; theano_dag's
without PyTensor loaded), median of ``--repeats`` runs; PyTensor's in each of
``--pytensor-modes``, the best of them reported as ``pytensor_best``, and the ratio to it.
theano_dag's runs twice: with all its caches warm, including the cache of optimized graphs
(the warm-up run stores the graph, so ``function`` loads it instead of rewriting), and with
that cache off (``function_cache=False``: the rewrites run, the kernel cache stays warm).

With ``--networks``, the same for the networks of ``theano_dag.models``: ResNet50 and
InceptionV3 inference (images of 32 and 75 pixels, size and batch left free) and
ResNet50's weight gradients, whose shapes are those of convolutions and pools layer after
layer; PyTensor compiles the same graph, converted (``formats.to_pytensor``, the weights
as inputs); theano_dag's time is the median of ``--repeats`` compiles of the graph.

With ``--stages``, where the time to first result of each random DAG goes: wall ms per
stage in this (warm) process, medians of ``--repeats`` runs: building the graph, the
function's copy of it, the rewrite passes (grouped as ``docs/performance.md`` lists them),
the link and the first call; one JSON line per graph.

For each graph: the number of nodes, theano_dag's optimization time (``FAST_RUN``: merge,
canonicalize, stabilize, specialize, fusion, inplace) and time per node (the JSON line
also has the whole ``function`` call, ``theano_dag_function_s``, and PyTensor's,
``pytensor_function_s``), then PyTensor's
FAST_RUN rewriting time for the same graph (its ``total_graph_rewrite_time`` counter,
measured around ``pytensor.function(..., mode=Mode(linker="py", optimizer="fast_run"))``
so that no C compilation is counted) and the ratio. Per-node times that stay flat as the
graphs grow mean linear scaling.

Run: ``.venv/bin/python benchmarks/compile_time.py`` (``--sizes 1000,10000``,
``--no-pytensor``, ``--pytensor-max 10000`` to skip PyTensor on bigger graphs). PyTensor
runs in a child process stopped after ``--pytensor-timeout`` seconds (default 1800);
a graph it did not finish shows ``>1800`` and a lower bound of the ratio.
PyTensor is optional (``pip install pytensor``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time

import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag import models
from theano_dag.compile.function_module import FunctionMaker, insert_deepcopy, std_fgraph
from theano_dag.compile.io import In, SymbolicOutput
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.engines.cpu.native import ckernel
from theano_dag.formats.pytensor_interop import to_pytensor
from theano_dag.graph.basic import Constant, applys_between, graph_inputs
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.utils import gc_paused

# A first-result worker of theano_dag runs without PyTensor loaded, as a user's process
# would (a bigger heap makes the garbage collector's passes longer).
_NO_PYTENSOR = os.environ.get("COMPILE_TIME_NO_PYTENSOR") == "1"
try:
    if _NO_PYTENSOR:
        raise ImportError("COMPILE_TIME_NO_PYTENSOR")
    import pytensor
    import pytensor.tensor as pt
    from pytensor.compile.debug import profiling as pt_profiling
except ImportError:  # optional: the benchmark then reports theano_dag alone
    pytensor = None

UNARY = ("exp", "tanh", "sin", "neg", "sqr", "abs")
BINARY = ("add", "mul", "sub", "maximum", "true_div")
CONST_OPS = (("mul", 1.0), ("add", 0.0), ("mul", 2.0), ("add", 0.5))
N_INPUTS = 16
WINDOW = 64


def dag_recipe(n_nodes, seed=0):
    """A list of ``(op name, argument indices, constant or None)``; variable ``k`` is
    input ``k`` for ``k < N_INPUTS``, else the output of recipe entry ``k - N_INPUTS``."""
    rng = random.Random(seed)
    recipe = []
    for _ in range(n_nodes):
        n_vars = N_INPUTS + len(recipe)
        lo = max(0, n_vars - WINDOW)
        if recipe and rng.random() < 0.05:
            recipe.append(recipe[rng.randrange(max(0, len(recipe) - WINDOW), len(recipe))])
            continue
        r = rng.random()
        if r < 0.35:
            recipe.append((rng.choice(UNARY), (rng.randrange(lo, n_vars),), None))
        elif r < 0.9:
            args = (rng.randrange(lo, n_vars), rng.randrange(lo, n_vars))
            recipe.append((rng.choice(BINARY), args, None))
        else:
            op, c = rng.choice(CONST_OPS)
            recipe.append((op, (rng.randrange(lo, n_vars),), c))
    return recipe


def build_dag(lib, recipe):
    """``(inputs, outputs)`` of the recipe's graph in ``lib`` (theano_dag.tensor or
    pytensor.tensor)."""
    inputs = [lib.dvector(f"x{k}") for k in range(N_INPUTS)]
    variables = list(inputs)
    used = [False] * (N_INPUTS + len(recipe))
    for op, args, c in recipe:
        fn = getattr(lib, op)
        xs = [variables[a] for a in args]
        for a in args:
            used[a] = True
        variables.append(fn(*xs, c) if c is not None else fn(*xs))
    outputs = [v for v, u in zip(variables[N_INPUTS:], used[N_INPUTS:]) if not u]
    return inputs, outputs


def build_mlp(lib, grad, n_layers=200, width=32, seed=0):
    """``(inputs, outputs)``: an MLP's cost and its gradients w.r.t. all parameters."""
    x, y = lib.dmatrix("x"), lib.dmatrix("y")
    params = []
    h = x
    for k in range(n_layers):
        w, b = lib.dmatrix(f"W{k}"), lib.dvector(f"b{k}")
        params += [w, b]
        h = lib.tanh(lib.dot(h, w) + b)
    cost = lib.mean(lib.sqr(h - y))
    grads = grad(cost, params)
    return [x, y, *params], [cost, *grads]


#: name -> (network, image side, gradients of the weights)
NETWORKS = {
    "ResNet50 inference": ("resnet50", 32, False),
    "InceptionV3 inference": ("inception_v3", 75, False),
    "ResNet50 weight gradients": ("resnet50", 32, True),
}


def build_network(name, side, gradient=False):
    """``(inputs, outputs)`` of a network of ``theano_dag.models`` (its weights shared
    variables): the logits, or the gradients of their sum with respect to the weights."""
    network, channels, _ = models.NETWORKS[name]
    params = models.init_params(network, (1, channels, side, side))
    x = models.tensor_forward(network, params)[0]
    net = models.Net(models.TensorOps(), params)
    logits = network(net, x, logits=True)
    if not gradient:
        return [x], [logits]
    return [x], theano_dag.grad(logits.sum(), list(net.weights.values()))


def _pytensor_network(spec):
    """The graph of ``build_network(*spec)`` in PyTensor, its weights inputs."""
    ins, outs = build_network(*spec)
    graph_ins = [v for v in graph_inputs(outs) if not isinstance(v, Constant)]
    pfg = to_pytensor(FunctionGraph(graph_ins, outs, clone=True))
    return pfg.inputs, pfg.outputs


def count_nodes(outputs):
    return len(applys_between(list(graph_inputs(outputs)), outputs))


def time_ours(inputs, outputs):
    mode = Mode(linker="py", optimizer="fast_run")
    gc.collect()
    # The rewrites' own time: with the cache of optimized graphs off, so that a graph
    # compiled before (the warm-up, an earlier run) is rewritten again, not loaded.
    with theano_dag.config.change_flags(function_cache=False):
        t0 = time.perf_counter()
        f = theano_dag.function(inputs, outputs, mode=mode, on_unused_input="ignore")
        total = time.perf_counter() - t0
    return f.maker.optimizer_time, total, len(f.maker.fgraph.apply_nodes)


def time_pytensor(inputs, outputs):
    mode = pytensor.compile.mode.Mode(linker="py", optimizer="fast_run")
    gc.collect()
    before = pt_profiling.total_graph_rewrite_time
    t0 = time.perf_counter()
    f = pytensor.function(inputs, outputs, mode=mode, on_unused_input="ignore")
    total = time.perf_counter() - t0
    rewrite = pt_profiling.total_graph_rewrite_time - before
    return rewrite, total, len(f.maker.fgraph.apply_nodes)


def time_pytensor_with_timeout(build, timeout):
    """``time_pytensor`` of the graph ``build(pt)`` makes, in a child process that is
    stopped after ``timeout`` seconds (None then: PyTensor did not finish)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)

    def work():
        ins, outs = build(pt)
        child.send(time_pytensor(ins, outs))

    proc = ctx.Process(target=work, daemon=True)
    proc.start()
    ready = parent.poll(timeout)
    result = parent.recv() if ready else None
    proc.kill()
    proc.join()
    return result


def first_result(lib_name, recipe, mode=None):
    """CPU seconds from building ``recipe``'s graph to the first result (see the module
    docstring), in this process."""
    values = [np.random.default_rng(k).uniform(-1, 1, 1000) for k in range(N_INPUTS)]
    t0 = time.process_time()
    if lib_name == "theano_dag":
        inputs, outputs = build_dag(tt, recipe)
        f = theano_dag.function(inputs, outputs, on_unused_input="ignore")
    else:
        inputs, outputs = build_dag(pt, recipe)
        f = pytensor.function(inputs, outputs, mode=mode, on_unused_input="ignore")
    f(*values)
    seconds = time.process_time() - t0
    if lib_name == "theano_dag":
        ckernel.wait_for_kernels(f)  # the warm-up run leaves its kernels in the cache
    return seconds


# The rewrite passes of the default mode, grouped as docs/performance.md's stage table.
STAGE_OF_PASS = {
    "merge1": "merge",
    "useless": "useless",
    "canonicalize": "canonicalize",
    "stabilize": "stabilize, specialize, fma",
    "specialize": "stabilize, specialize, fma",
    "fma": "stabilize, specialize, fma",
    "elemwise_fusion": "fusion",
    "fused_reduce": "fusion",
    "add_destroy_handler": "in-place",
    "insert_inplace": "in-place",
}
STAGES = ("build", "copy", "merge", "useless", "canonicalize", "stabilize, specialize, fma",
          "fusion", "in-place", "other passes", "link", "first call")  # fmt: skip


def stage_times(recipe):
    """Wall seconds of each stage of ``recipe``'s time to first result, in this process:
    the steps of ``function`` (its copy of the graph, the default mode's rewrite passes,
    the link) made one by one, with the garbage collector paused as ``function`` pauses
    it; the graph is built by the user's code, with it running."""
    values = [np.random.default_rng(k).uniform(-1, 1, 1000) for k in range(N_INPUTS)]
    mode = get_mode(None)
    times = dict.fromkeys(STAGES, 0.0)
    t0 = time.perf_counter()
    inputs, outputs = build_dag(tt, recipe)
    t1 = time.perf_counter()
    times["build"] = t1 - t0
    with gc_paused(promote=True):
        ins, outs = [In(v) for v in inputs], [SymbolicOutput(o) for o in outputs]
        fgraph, _updates = std_fgraph(ins, outs)
        t2 = time.perf_counter()
        times["copy"] = t2 - t1
        prof = mode.optimizer.optimize(fgraph)
        t3 = time.perf_counter()
        for row in prof.rows:
            times[STAGE_OF_PASS.get(row[0], "other passes")] += row[2]
        times["other passes"] += (t3 - t2) - sum(r[2] for r in prof.rows)
        insert_deepcopy(fgraph, ins, outs)
        f = FunctionMaker(ins, outs, mode=mode, fgraph=fgraph).create()
        t4 = time.perf_counter()
        times["link"] = t4 - t3
    f(*values)
    times["first call"] = time.perf_counter() - t4
    return times, f, count_nodes(outputs)


def _print_stages(args):
    """The stage breakdown of each random DAG (``--stages``)."""
    time_ours(*build_dag(tt, dag_recipe(50, seed=1)))  # warm: imports, registries
    print(f"\nstages of the time to first result, wall ms (median of {args.repeats} runs)")
    for n in (int(s) for s in args.sizes.split(",") if s):
        recipe = dag_recipe(n)
        ckernel.wait_for_kernels(stage_times(recipe)[1])  # not counted: fills the caches
        runs = [stage_times(recipe) for _ in range(args.repeats)]
        after = len(runs[0][1].maker.fgraph.apply_nodes)
        row = {"benchmark": "compile_time_stages", "case": f"random DAG {n}", "unit": "ms",
               "nodes": runs[0][2], "nodes_after": after}  # fmt: skip
        for stage in STAGES:
            row[stage] = round(1e3 * statistics.median(r[0][stage] for r in runs), 2)
        row["total"] = round(1e3 * statistics.median(sum(r[0].values()) for r in runs), 2)
        print("  ".join(f"{k} {row[k]}" for k in ("case", *STAGES, "total")), flush=True)
        print(json.dumps(row), flush=True)


def first_result_median(lib_name, n, mode, repeats, timeout, flags=""):
    """Median of ``repeats`` runs of ``first_result`` on ``dag_recipe(n)``, each in a fresh
    Python process (imports not timed), after a warm-up run that fills the kernel caches
    (None if one did not finish). ``flags``: theano_dag flags added for these runs."""
    env = dict(os.environ)
    if lib_name == "theano_dag":
        env["COMPILE_TIME_NO_PYTENSOR"] = "1"
        if flags:
            env["THEANO_DAG_FLAGS"] = ",".join(f for f in (env.get("THEANO_DAG_FLAGS"), flags) if f)
    cmd = [sys.executable, os.path.abspath(__file__), "--first-result-worker",
           lib_name, str(n), mode or "-"]  # fmt: skip
    runs = []
    for k in range(repeats + 1):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return None
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("FIRST_RESULT ")]
        if not lines:
            print(f"first result of {lib_name} failed: {p.stderr.strip()[-300:]}", file=sys.stderr)
            return None
        if k:
            runs.append(float(lines[-1].split()[1]))
    return statistics.median(runs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--no-pytensor", action="store_true")
    parser.add_argument("--pytensor-max", type=int, default=10**9)
    parser.add_argument("--mlp-layers", type=int, default=200)
    parser.add_argument(
        "--first-result",
        action="store_true",
        help="also time build + function + first call of the random DAGs (CPU time)",
    )
    parser.add_argument(
        "--stages",
        action="store_true",
        help="only the stage breakdown of each random DAG's time to first result",
    )
    parser.add_argument("--repeats", type=int, default=3, help="first-result runs (median)")
    parser.add_argument("--pytensor-modes", default="FAST_COMPILE,FAST_RUN")
    parser.add_argument(
        "--pytensor-timeout",
        type=float,
        default=1800.0,
        help="seconds PyTensor may take on one graph before it is stopped",
    )
    parser.add_argument(
        "--networks",
        action="store_true",
        help="the networks of theano_dag.models instead of the random DAGs and the MLP",
    )
    args = parser.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    if args.stages:
        _print_stages(args)
        return
    use_pt = pytensor is not None and not args.no_pytensor
    if pytensor is None and not args.no_pytensor:
        print("pytensor is not installed: timing theano_dag only (pip install pytensor)")

    cases = []
    for n in (int(s) for s in args.sizes.split(",") if s and not args.networks):
        recipe = dag_recipe(n)
        cases.append((f"random DAG {n}", lambda lib, r=recipe: build_dag(lib, r), n))
    if args.networks:
        for name, spec in NETWORKS.items():
            cases.append(
                (
                    name,
                    lambda lib, s=spec: build_network(*s) if lib is tt else _pytensor_network(s),
                    None,
                )
            )
    else:
        cases.append(
            (
                f"MLP {args.mlp_layers} layers + grad",
                lambda lib: build_mlp(lib, _grad_of(lib), n_layers=args.mlp_layers),
                None,
            )
        )

    # Warm up both libraries (imports, registries, caches) on a small graph: the times
    # below are those of optimizing, not of loading code.
    time_ours(*build_dag(tt, dag_recipe(50, seed=1)))
    if use_pt:
        time_pytensor(*build_dag(pt, dag_recipe(50, seed=1)))

    header = (
        f"{'graph':<26} {'nodes':>7} {'ours opt s':>11} {'us/node':>8} {'after':>6}"
        f" {'pytensor s':>11} {'us/node':>8} {'after':>6} {'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, build, size in cases:
        ins, outs = build(tt)
        n_nodes = count_nodes(outs)
        # (a network's compile: the median of --repeats, the graph compiled again)
        runs = [time_ours(ins, outs) for _ in range(args.repeats if args.networks else 1)]
        ours, total, after = sorted(runs)[len(runs) // 2]
        line = f"{name:<26} {n_nodes:>7} {ours:>11.3f} {1e6 * ours / n_nodes:>8.1f} {after:>6}"
        row = {"benchmark": "compile_time", "case": name, "unit": "s", "nodes": n_nodes,
               "theano_dag_s": round(ours, 4), "theano_dag_nodes_after": after,
               "theano_dag_function_s": round(total, 4),
               "theano_dag_function_us_per_node": round(1e6 * total / n_nodes, 1)}  # fmt: skip
        if use_pt and (size is None or size <= args.pytensor_max):
            result = time_pytensor_with_timeout(build, args.pytensor_timeout)
            if result is None:  # the ratio is then at least timeout / ours
                t = args.pytensor_timeout
                bound, ratio = f">{t:.0f}", f">{t / ours:.0f}"
                line += f" {bound:>11} {'':>8} {'':>6} {ratio:>6}x"
                row["pytensor_error"] = f"timeout after {t:.0f} s"
            else:
                theirs, p_total, p_after = result
                line += (
                    f" {theirs:>11.3f} {1e6 * theirs / n_nodes:>8.1f} {p_after:>6}"
                    f" {theirs / ours:>6.1f}x"
                )
                row.update(pytensor_s=round(theirs, 4), pytensor_nodes_after=p_after)
                row["pytensor_function_s"] = round(p_total, 4)
                row["pytensor_vs_theano_dag"] = round(theirs / ours, 1)
        print(line, flush=True)
        print(json.dumps(row), flush=True)
    if args.first_result and not args.networks:
        _print_first_results(args, use_pt)


def _print_first_results(args, use_pt):
    """Time to first result of each random DAG (``--first-result``): one line and one
    JSON line per graph."""
    modes = [m for m in args.pytensor_modes.split(",") if m] if use_pt else []
    print(f"\ntime to first result, CPU s (median of {args.repeats} fresh processes, warm caches)")
    for n in (int(s) for s in args.sizes.split(",") if s):
        row = {"benchmark": "compile_time_first_result", "case": f"random DAG {n}", "unit": "s"}
        ours = first_result_median("theano_dag", n, None, args.repeats, args.pytensor_timeout)
        cold = first_result_median(
            "theano_dag", n, None, args.repeats, args.pytensor_timeout, "function_cache=False"
        )
        row["theano_dag_s"] = None if ours is None else round(ours, 4)
        row["theano_dag_no_function_cache_s"] = None if cold is None else round(cold, 4)
        line = f"random DAG {n:<8} theano_dag {ours if ours is None else round(ours, 3)}"
        line += f"  (function cache off {cold if cold is None else round(cold, 3)})"
        best = None
        if use_pt and n <= args.pytensor_max:
            for mode in modes:
                t = first_result_median("pytensor", n, mode, 1, args.pytensor_timeout)
                row[f"pytensor_{mode}_s"] = None if t is None else round(t, 3)
                line += f"  pytensor {mode} {t if t is None else round(t, 3)}"
                if t is not None and (best is None or t < best[1]):
                    best = (mode, t)
        if best is not None and ours:
            row.update(pytensor_best=best[0], pytensor_best_s=round(best[1], 3))
            row["pytensor_best_vs_theano_dag"] = round(best[1] / ours, 1)
            line += f"  best/ours {best[1] / ours:.1f}x"
            if cold:
                row["pytensor_best_vs_theano_dag_no_function_cache"] = round(best[1] / cold, 1)
                line += f" ({best[1] / cold:.1f}x with the function cache off)"
        print(line, flush=True)
        print(json.dumps(row), flush=True)


def _grad_of(lib):
    if lib is tt:
        return theano_dag.grad
    return pytensor.grad


if __name__ == "__main__":
    np.seterr(all="ignore")
    if sys.argv[1:2] == ["--first-result-worker"]:  # lib, n, mode: one timed run
        lib_name, n, mode = sys.argv[2:5]
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
        seconds = first_result(lib_name, dag_recipe(int(n)), None if mode == "-" else mode)
        print(f"FIRST_RESULT {seconds}", flush=True)
    else:
        main()
