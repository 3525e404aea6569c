"""Benchmark of the graph core: build, clone, toposort and FunctionGraph on 10k and 100k nodes.

Two graph shapes per size: a random DAG of a toy op (fan-in 1 to 3, some two-output
nodes, every variable reused by later nodes: fan-out) and a deep chain (depth = size).
Each operation is timed 3 times; the median is reported as one JSON line per
(operation, graph, size), then one line per (operation, graph) comparing the time per
node at 100k with the time per node at 10k: a ratio near 1 means linear scaling.

Times are CPU seconds of this process (``time.process_time``), so that other work on
a shared machine does not blur them. Garbage from the previous step is collected
before each timed step. Every step runs twice: with Python's garbage collector on (what
a user sees) and off (the core's own work). The collector's full passes walk the whole
heap each time it has grown by a quarter, so their cost per node rises with the graph
until the graph dominates the heap: the ``gc: false`` ratios show the core's scaling.

Run: ``.venv/bin/python benchmarks/graph_core.py`` (``--sizes 1000,10000`` to change sizes).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time

from theano_dag.graph.basic import Apply, clone_get_equiv, io_toposort
from theano_dag.graph.op import Op
from theano_dag.graph.type import Type

try:
    from theano_dag.graph.fg import FunctionGraph
except ImportError as e:  # written by another part of the project; may be missing
    FunctionGraph = None
    FG_MISSING = f"theano_dag.graph.fg.FunctionGraph is missing ({e}); fgraph not timed"
else:
    FG_MISSING = ""

REPEATS = 3
FAN_WINDOW = 64  # new nodes read from the last FAN_WINDOW variables: fan-out and some depth


class ToyType(Type):
    __props__ = ()

    def filter(self, data, strict=False, allow_downcast=None):
        return data


class ToyOp(Op):
    __props__ = ("nout",)

    def __init__(self, nout=1):
        self.nout = nout

    def make_node(self, *inputs):
        return Apply(self, list(inputs), [ToyType()() for _ in range(self.nout)])


ONE, TWO = ToyOp(1), ToyOp(2)


def build_random_dag(n_nodes: int, seed: int = 0):
    """``n_nodes`` Apply nodes; returns (inputs, outputs) with outputs = the unused variables."""
    rng = random.Random(seed)
    inputs = [ToyType()(f"in{k}") for k in range(max(2, n_nodes // 100))]
    pool = list(inputs)
    used = set()
    for _ in range(n_nodes):
        window = pool[-FAN_WINDOW:]
        args = rng.sample(window, k=min(len(window), rng.randint(1, 3)))
        used.update(args)
        op = TWO if rng.random() < 0.1 else ONE
        pool.extend(op.make_node(*args).outputs)
    outputs = [v for v in pool[len(inputs) :] if v not in used]
    return inputs, outputs


def build_chain(n_nodes: int):
    x = ToyType()("x")
    out = x
    for _ in range(n_nodes):
        out = ONE.make_node(out).outputs[0]
    return [x], [out]


BUILDERS = {"random_dag": build_random_dag, "chain": build_chain}


def timed(fn, *args, use_gc=True):
    gc.collect()  # Apply <-> Variable links are cycles: old graphs die only in a collection
    if not use_gc:
        gc.disable()
    try:
        t0 = time.process_time()
        res = fn(*args)
        return time.process_time() - t0, res
    finally:
        gc.enable()


def operations():
    ops = {
        "build": None,  # handled apart: it makes the graph the others use
        "clone_get_equiv": lambda i, o: clone_get_equiv(i, o),
        "io_toposort": lambda i, o: io_toposort(i, o),
    }
    if FunctionGraph is not None:
        ops["fgraph"] = lambda i, o: FunctionGraph(i, o, clone=False)
        ops["fgraph_clone"] = lambda i, o: FunctionGraph(i, o, clone=True)
    return ops


def run(sizes, gc_modes=(True, False)):
    results = {}
    if FG_MISSING:
        print(json.dumps({"note": FG_MISSING}), flush=True)
    for use_gc in gc_modes:
        for graph, builder in BUILDERS.items():
            for n in sizes:
                times = {name: [] for name in operations()}
                for _ in range(REPEATS):
                    t, (ins, outs) = timed(builder, n, use_gc=use_gc)
                    times["build"].append(t)
                    for name, fn in operations().items():
                        if fn is not None:
                            times[name].append(timed(fn, ins, outs, use_gc=use_gc)[0])
                    del ins, outs
                for name, ts in times.items():
                    med = statistics.median(ts)
                    results[(use_gc, name, graph, n)] = med
                    row = {
                        "op": name,
                        "graph": graph,
                        "nodes": n,
                        "gc": use_gc,
                        "median_s": round(med, 4),
                        "nodes_per_s": round(n / med),
                        "us_per_node": round(med / n * 1e6, 3),
                    }
                    print(json.dumps(row), flush=True)
    small, large = min(sizes), max(sizes)
    if small == large:
        return
    for use_gc in gc_modes:
        ratios = {
            f"{name}/{graph}": round(
                (results[(use_gc, name, graph, large)] / large)
                / (results[(use_gc, name, graph, small)] / small),
                2,
            )
            for (g, name, graph, n) in results
            if n == large and g == use_gc
        }
        line = {
            "scaling": f"time per node at {large} / time per node at {small}",
            "gc": use_gc,
            "ratios": ratios,
            "worst": max(ratios.values()),
        }
        print(json.dumps(line), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated node counts")
    parser.add_argument(
        "--gc", choices=("both", "on", "off"), default="both", help="garbage collector modes"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = {"both": (True, False), "on": (True,), "off": (False,)}[args.gc]
    run(sizes, modes)


if __name__ == "__main__":
    sys.exit(main())
