"""The Dask engine (issue 20) against the same expressions written with dask.array.

Two cases, on a ``distributed.LocalCluster`` of worker processes (loopback only,
one thread each), the input made chunk by chunk on the workers and persisted there:

* ``chain40``: 40 elementwise ops and a final sum over a float64 vector. theano_dag
  runs the 40 ops as one fused C kernel per chunk; dask.array runs one numpy call
  per op per chunk (its blockwise fusion merges the tasks, not the loops).
* ``logreg_step``: one gradient step of logistic regression (cost, gradient of w
  and b, the new w and b) on an (n, 10) matrix. theano_dag runs the row work and
  its sums over the rows as one task per chunk of rows (a ``RowChunked`` node: the
  CPU engine's kernels on the chunk, its partial sums out), then one tree of the
  partials; dask.array runs its blocked products, elementwise tasks and tree sums.

Each (case, workers) runs on one cluster: the two engines' calls alternate (the
machine may be shared: both see the same load), then each engine's peak memory per
worker (VmHWM, reset before) is read after two calls of its own, and one more
call each is split into its tasks' compute time on the workers and the rest. A
row per case and worker count: medians over ``--repeats`` calls in seconds, the
ratio dask.array / theano_dag (above 1: theano_dag is faster), the peak memory per
worker of each, one call's split (``*_tasks``, ``*_worker_compute_s``: the tasks'
compute summed, ``*_task_span_s``: first start to last end, ``*_call_s``), and with
2 workers the scaling from 1 worker (time with 1 / time with 2) for each engine.

``--issue`` runs instead the chain's case at 2*10^7 float64 values in 20 chunks on 2
workers, ``--runs`` times (3), each run on a cluster of its own: one row per run with
every call's time of both engines (alternating: dask.array, then ours and ours with its
graph rebuilt at every call, each of them first in turn), their medians and ratios, and the
client's share of a call (medians): ``*_client_build_s`` (making the call's graph:
theano_dag's collections, or the dask.array expression), ``*_client_submit_s``
(``Client.compute``: packing and sending the graph), and one call's split as above.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/dask_engine.py [--n 40000000]``,
``PYTHONPATH=. .venv/bin/python benchmarks/dask_engine.py --issue``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import dask
import dask.array as da
import distributed
import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.engines.dask import DaskLinker
from theano_dag.engines.dask.linker import DaskThunk
from theano_dag.testing import procmem

D = 10


def chain(x, lib, n=40):
    y = x
    for k in range(n // 4):
        y = lib.maximum(y * 0.999 + 0.01, -3.0)
        y = lib.tanh(y) if k % 3 == 0 else abs(y) - 0.5
    return y


def _chain_case(n, chunk):
    def data():
        return da.random.default_rng(0).standard_normal(n, chunks=chunk).persist()

    x = tt.dvector("x")
    f = theano_dag.function([x], chain(x, tt).sum(), mode="DASK")

    def ours(xd):
        return f(xd)

    def peer(xd):
        return chain(xd, da).sum().compute()

    return data, ours, peer


def _logreg_case(n, chunk):
    def data():
        rng = da.random.default_rng(1)
        xd = rng.standard_normal((n, D), chunks=(chunk // D, D))
        yd = (xd @ np.linspace(-1, 1, D) > 0).astype("float64")
        return dask.persist(xd, yd)

    x, y = tt.dmatrix("x"), tt.dvector("y")
    w, b = tt.dvector("w"), tt.dscalar("b")
    p = tt.nnet.sigmoid(tt.dot(x, w) + b)
    cost = tt.nnet.binary_crossentropy(p, y).mean()
    gw, gb = theano_dag.grad(cost, [w, b])
    f = theano_dag.function([x, y, w, b], [cost, w - 0.5 * gw, b - 0.5 * gb], mode="DASK")
    w0, b0 = np.zeros(D), np.float64(0.0)

    def ours(data):
        return f(data[0], data[1], w0, b0)

    def peer(data):
        xd, yd = data
        q = 1 / (1 + da.exp(-(xd @ w0 + b0)))
        c = -(yd * da.log(q) + (1 - yd) * da.log1p(-q)).mean()
        g = q - yd
        return dask.compute(c, w0 - 0.5 * (xd.T @ g) / n, b0 - 0.5 * g.mean())

    return data, ours, peer


CASES = {"chain40": _chain_case, "logreg_step": _logreg_case}


def _reset_peak():
    """Start the worker's peak memory again from what it holds now (the persisted input):
    freed memory back to the system, then Linux's VmHWM reset (``clear_refs``: 5)."""
    try:
        procmem.reset_peak(release=True)
    except OSError:  # not Linux/glibc: the peak is the process's since it started
        pass


def _cluster(workers, args):
    # A loaded machine starts worker processes slowly: wait for them longer than the
    # default 30 s before giving up.
    with dask.config.set({"distributed.comm.timeouts.connect": "180s"}):
        return _start(workers, args)


def _start(workers, args):
    cluster = distributed.LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        memory_limit=args.memory_limit,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )
    return cluster, distributed.Client(cluster)


def _run(case, workers, args):
    """Both engines on one cluster: timings interleaved call by call (the machine is
    shared: both sides see the same load), then each engine's peak memory per worker
    over two calls of its own, from the worker's peak reset before them."""
    cluster, client = _cluster(workers, args)
    try:
        data, ours, peer = CASES[case](args.n, args.chunk)
        fns = {"theano_dag": ours, "dask_array": peer}
        values = data()
        for fn in fns.values():
            fn(values)  # warm: the workers compile the kernels, import what they need
        times = {e: [] for e in fns}
        for r in range(args.repeats):
            for e in sorted(fns, reverse=bool(r % 2)):
                t0 = time.perf_counter()
                fns[e](values)
                times[e].append(time.perf_counter() - t0)
        peaks = {}
        for e, fn in fns.items():
            client.run(_reset_peak)
            fn(values)
            fn(values)
            peaks[e] = max(client.run(procmem.peak_bytes).values())
        split = {e: _breakdown(fn, values) for e, fn in fns.items()}
        return {e: (statistics.median(times[e]), peaks[e], split[e]) for e in fns}
    finally:
        client.close()
        cluster.close()


def _breakdown(fn, values):
    """Where one call's time goes: its tasks, their compute time on the workers (summed),
    and the span from the first task's start to the last one's end; the rest of the
    call's time is the client's (building and sending the graph, gathering) and the
    scheduler's."""
    with distributed.get_task_stream() as stream:
        t0 = time.perf_counter()
        fn(values)
        wall = time.perf_counter() - t0
    spans = [s for r in stream.data for s in r["startstops"]]
    compute = sum(s["stop"] - s["start"] for s in spans if s["action"] == "compute")
    span = max(s["stop"] for s in spans) - min(s["start"] for s in spans) if spans else 0.0
    return {
        "tasks": len(stream.data),
        "worker_compute_s": round(compute, 4),
        "task_span_s": round(span, 4),
        "call_s": round(wall, 4),
    }


class _ClientClock:
    """Time spent on the client building a call's graph and submitting it: wraps
    the Dask engine's ``DaskThunk.collections`` and ``Client.compute`` while active."""

    def __init__(self):
        self.build = self.submit = 0.0

    def __enter__(self):
        self._saved = [(DaskThunk, "collections"), (distributed.Client, "compute")]
        self._orig = [getattr(c, n) for c, n in self._saved]
        clock = self

        def collections(thunk):
            t0 = time.perf_counter()
            try:
                return self._orig[0](thunk)
            finally:
                clock.build += time.perf_counter() - t0

        def compute(client, *a, **k):
            t0 = time.perf_counter()
            try:
                return self._orig[1](client, *a, **k)
            finally:
                clock.submit += time.perf_counter() - t0

        DaskThunk.collections, distributed.Client.compute = collections, compute
        return self

    def __exit__(self, *exc):
        for (c, n), f in zip(self._saved, self._orig):
            setattr(c, n, f)


def _issue_run(args, run):
    """One run of the issue's case: its own cluster, both engines' calls alternating."""
    cluster, client = _cluster(2, args)
    try:
        n, chunk = 20_000_000, 1_000_000
        xd = da.random.default_rng(0).standard_normal(n, chunks=chunk).persist()
        distributed.wait(xd)
        x = tt.dvector("x")
        f = theano_dag.function([x], chain(x, tt).sum(), mode="DASK")
        # the same, its graph built and optimized again at every call
        g = theano_dag.function(
            [x], chain(x, tt).sum(), mode=Mode(linker=DaskLinker(reuse_graph=False))
        )

        def peer_build():
            return chain(xd, da).sum()

        fns = {
            "theano_dag": lambda: f(xd),
            "theano_dag_rebuilt": lambda: g(xd),
            "dask_array": lambda: client.compute(peer_build()).result(),
        }
        want = fns["dask_array"]()
        for e in ("theano_dag", "theano_dag_rebuilt"):
            np.testing.assert_allclose(fns[e](), want, rtol=1e-9)  # and warm
        times = {e: [] for e in fns}
        build = {e: [] for e in fns}
        submit = {e: [] for e in fns}
        ours = ["theano_dag", "theano_dag_rebuilt"]
        for r in range(args.repeats):
            # dask.array first, then ours in turn just after it (a dask.array call
            # leaves the workers' memory churned: the call after it is slower)
            for e in ["dask_array", *(ours if r % 2 == 0 else ours[::-1])]:
                with _ClientClock() as clock:
                    t0 = time.perf_counter()
                    if e == "dask_array":
                        expr = peer_build()
                        clock.build += time.perf_counter() - t0
                        client.compute(expr).result()
                    else:
                        fns[e]()
                    times[e].append(time.perf_counter() - t0)
                build[e].append(clock.build)
                submit[e].append(clock.submit)
        med = {e: statistics.median(v) for e, v in times.items()}
        row = {
            "case": "chain40_issue",
            "run": run,
            "workers": 2,
            "n": n,
            "chunks": n // chunk,
            "load_avg_1m": round(_loadavg(), 2),
        }
        for e in fns:
            row[f"{e}_calls_s"] = [round(t, 4) for t in times[e]]
        for e in fns:
            row[f"{e}_s"] = round(med[e], 4)
        row["dask_array_over_theano_dag"] = round(med["dask_array"] / med["theano_dag"], 2)
        row["dask_array_over_theano_dag_rebuilt"] = round(
            med["dask_array"] / med["theano_dag_rebuilt"], 2
        )
        for e in fns:
            row[f"{e}_client_build_s"] = round(statistics.median(build[e]), 5)
            row[f"{e}_client_submit_s"] = round(statistics.median(submit[e]), 5)
        for e, fn in fns.items():
            for k, v in _breakdown(lambda _v, fn=fn: fn(), None).items():
                row[f"{e}_{k}"] = v
        row["load_avg_1m_end"] = round(_loadavg(), 2)
        return row
    finally:
        client.close()
        cluster.close()


def _loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000_000, help="elements of the input")
    ap.add_argument("--chunk", type=int, default=1 << 20, help="elements per chunk")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--memory-limit", default="1GB", help="per worker")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--issue", action="store_true", help="the 2*10^7, 20 chunks case")
    ap.add_argument("--runs", type=int, default=3, help="runs of --issue")
    args = ap.parse_args()
    if args.issue:
        for run in range(args.runs):
            print(json.dumps(_issue_run(args, run)), flush=True)
        return
    counts = [int(w) for w in args.workers.split(",")]
    by_workers: dict = {}
    for case in args.cases.split(","):
        for workers in counts:
            res = _run(case, workers, args)
            by_workers[(case, workers)] = res
            row = {
                "case": case,
                "workers": workers,
                "n": args.n,
                "chunk": args.chunk,
                "theano_dag_s": round(res["theano_dag"][0], 4),
                "dask_array_s": round(res["dask_array"][0], 4),
                "dask_array_over_theano_dag": round(res["dask_array"][0] / res["theano_dag"][0], 2),
                "theano_dag_peak_mb_per_worker": round(res["theano_dag"][1] / 1e6),
                "dask_array_peak_mb_per_worker": round(res["dask_array"][1] / 1e6),
                "machine": platform.machine(),
            }
            for e in ("theano_dag", "dask_array"):
                for k, v in res[e][2].items():
                    row[f"{e}_{k}"] = v
            one = by_workers.get((case, 1))
            if workers > 1 and one is not None:
                for e in ("theano_dag", "dask_array"):
                    row[f"{e}_scaling_from_1"] = round(one[e][0] / res[e][0], 2)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
