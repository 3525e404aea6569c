"""Digests of what the CPU engine generates and computes for a few graphs, one line each.

A change to the engine's link or first call that must not change what runs (a faster
planner, fewer objects per kernel) is checked by running this before and after it and
comparing the two outputs with ``diff``: for each graph, the digest of the generated Python
of the first call (the numpy path while the kernels load), of the Python once the C kernels
are loaded, of the C source of the kernels, and of the values returned by both calls (and
of the shared variables an update wrote). Run it with the same flags both times
(``THEANO_DAG_FLAGS=cpu__poison=True`` checks the poisoned code too).

The graphs: the random DAGs of ``benchmarks/compile_time.py`` at 1,000 and 3,000 nodes on
vectors of 1,000 values and of 7 (values under the planning threshold), an MLP of 30 layers
with its gradient, and an SGD step of a 4-layer network whose updates go to shared variables.
Usage: ``PYTHONPATH=. python tools/codegen_digest.py [--sources DIR]`` (``DIR``: write the
sources themselves there too, to read a difference).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import compile_time as ct  # noqa: E402

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag.engines.cpu.native import ckernel  # noqa: E402


def _digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()[:16]


def _values_digest(values) -> str:
    h = hashlib.sha1()
    for v in values:
        a = np.ascontiguousarray(v)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def graph_digests(name, f, values, sources=None, shared=()):
    """One line: ``name`` and the digests of ``f``'s generated code and results on
    ``values`` (before and after its C kernels load; ``shared``: variables whose values
    the calls update)."""
    first = f(*values)
    py_first = f.fn.source()
    ckernel.wait_for_kernels(f)
    second = f(*values)
    py_loaded = f.fn.source()
    c_src = ckernel.c_code(f)
    results = [r for out in (first, second) for r in (out if isinstance(out, list) else [out])]
    results += [s.get_value() for s in shared]
    if sources is not None:
        for tag, text in (("first.py", py_first), ("loaded.py", py_loaded), ("c", c_src)):
            with open(os.path.join(sources, f"{name}.{tag}"), "w") as fh:
                fh.write(text)
    py, loaded, c = (_digest(s.encode()) for s in (py_first, py_loaded, c_src))
    return f"{name} py {py} py_loaded {loaded} c {c} values {_values_digest(results)}"


def _dag(n, length):
    ins, outs = ct.build_dag(tt, ct.dag_recipe(n))
    f = theano_dag.function(ins, outs, on_unused_input="ignore")
    values = [np.random.default_rng(k).uniform(-1, 1, length) for k in range(ct.N_INPUTS)]
    return f, values, ()


def _mlp():
    ins, outs = ct.build_mlp(tt, theano_dag.grad, n_layers=30, width=16)
    f = theano_dag.function(ins, outs, on_unused_input="ignore")
    rng = np.random.default_rng(0)
    values = [rng.standard_normal((8, 16)), rng.standard_normal((8, 16))]
    for _ in range(30):
        values += [rng.standard_normal((16, 16)) * 0.3, rng.standard_normal(16) * 0.1]
    return f, values, ()


def _sgd():
    rng = np.random.default_rng(1)
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    ws = [theano_dag.shared(rng.standard_normal((64, 64)) * 0.1, name=f"w{k}") for k in range(4)]
    h = x
    for w in ws:
        h = tt.tanh(tt.dot(h, w))
    cost = tt.mean(tt.sqr(h - y))
    grads = theano_dag.grad(cost, ws)
    f = theano_dag.function([x, y], cost, updates=[(w, w - 0.1 * g) for w, g in zip(ws, grads)])
    return f, [rng.standard_normal((32, 64)), rng.standard_normal((32, 64))], ws


GRAPHS = {
    "dag1000": lambda: _dag(1000, 1000),
    "dag1000_small": lambda: _dag(1000, 7),
    "dag3000": lambda: _dag(3000, 1000),
    "dag3000_small": lambda: _dag(3000, 7),
    "mlp30_grad": _mlp,
    "sgd_step": _sgd,
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", help="also write the generated sources to this folder")
    args = parser.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    np.seterr(all="ignore")
    if args.sources:
        os.makedirs(args.sources, exist_ok=True)
    for name, make in GRAPHS.items():
        f, values, shared = make()
        print(graph_digests(name, f, values, args.sources, shared), flush=True)


if __name__ == "__main__":
    main()
