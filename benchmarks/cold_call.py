"""The first call with an empty kernel cache against a warm one (issue 18, point 1).

A chain of ``OPS`` elementwise ops on ``N`` float64 values (1e6 and 1e7 values, 10
and 40 ops) is fused by FAST_RUN into one C kernel. With an empty cache the kernel
compiles in the background while the first calls run numpy; those calls must stay
at the memory floor of numpy evaluating the chain eagerly, one temporary at a time,
and take no longer than it.

Each measurement runs in a fresh Python process (the first call of a process is the
cold one), with its own empty cache directory (``config.compiledir``). The process
builds the input and compiles the function, then resets the kernel's peak-RSS
counter (``VmHWM``, by writing 5 to ``/proc/self/clear_refs``), runs one call and
reads the peak: the figure is peak RSS minus RSS before the call, in MiB, and the
call's wall time, in seconds. Engines:

* ``cold``: the default mode, empty cache: the first call (C compiling meanwhile);
* ``warm``: the kernel already in the cache: the first call of a function that loads it;
* ``no_cxx``: ``config.cxx=''`` (no compiler at all): the first call;
* ``numpy_eager``: the chain written in numpy, one call.

One JSON line per case: medians over ``--repeats`` processes, and the ratios of
``cold`` to ``numpy_eager`` (targets: at most 1.5 in both peak and time). The first
line describes the machine: CPU count, and the BLAS kernel ``threadpoolctl`` reports
(the children run with ``OPENBLAS_CORETYPE`` unset, so numpy picks its own kernel).

While the C library compiles, the first calls run the kernel's numpy steps in place,
block by block (``ckernel.FALLBACK_BLOCK`` elements: the scratch values stay in the
cache), with the compiler niced in the background.

Run: ``.venv/bin/python benchmarks/cold_call.py [--quick] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ENGINES = ["cold", "warm", "no_cxx", "numpy_eager"]
MIB = 1024.0


def _status():
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS", "VmHWM")):
                key, val = line.split(":")
                out[key] = int(val.split()[0])  # KiB
    return out


def chain(y, lib, ops):
    """``ops`` elementwise ops that keep the values in a tame range."""
    x = y
    for k in range(ops):
        r = k % 5
        if r == 0:
            y = y * 0.999
        elif r == 1:
            y = y + 0.5
        elif r == 2:
            y = lib.sin(y)
        elif r == 3:
            y = lib.tanh(y) + x
        else:
            y = abs(y)
    return y


def child(engine, n, ops, cachedir):
    """Measure one call in this (fresh) process; print ``{"mib": .., "s": ..}``."""
    arg = np.linspace(-1.0, 1.0, n)
    if engine == "numpy_eager":
        call = lambda a: chain(a, np, ops)  # noqa: E731
    else:
        # Imported here: the numpy_eager process must not pay for theano_dag.
        import theano_dag.tensor as tt
        from theano_dag.compile.function import function
        from theano_dag.config import config
        from theano_dag.engines.cpu.native.ckernel import wait_for_kernels

        config.compiledir = cachedir
        if engine == "no_cxx":
            config.cxx = ""
        x = tt.dvector("x")
        call = function([x], chain(x, tt, ops))
        if engine == "warm":
            # The kernel built into the cache; the measured call is the first one of a
            # second function of the same graph, which loads it from there.
            call(arg[:10])
            wait_for_kernels(call)
            call = function([x], chain(x, tt, ops))
    before = _status()["VmRSS"]
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    t0 = time.perf_counter()
    out = call(arg)
    dt = time.perf_counter() - t0
    peak = _status()["VmHWM"]
    assert np.isfinite(out).all()
    print(json.dumps({"mib": (peak - before) / MIB, "s": dt}))


def _env():
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    env.pop("OPENBLAS_CORETYPE", None)  # numpy's own choice of kernel
    return env


def machine():
    """CPU count and the BLAS numpy runs (as threadpoolctl reports it, in a child
    process with the benchmark's environment)."""
    code = (
        "import json, numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "keep = ('internal_api', 'version', 'architecture', 'num_threads')\n"
        "print(json.dumps([{k: p.get(k) for k in keep} for p in threadpool_info()]))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    blas = json.loads(res.stdout) if res.returncode == 0 else res.stderr.strip()[-200:]
    return {"machine": True, "cpus": os.cpu_count(), "blas": blas}


def measure(engine, n, ops):
    with tempfile.TemporaryDirectory(prefix="td_cold_") as d:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", engine, str(n), str(ops), d]
        env = _env()
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if res.returncode:
        raise RuntimeError(f"{engine} {n} x {ops}: {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1e6 values only")
    ap.add_argument("--child", nargs=4, metavar=("ENGINE", "N", "OPS", "DIR"))
    a = ap.parse_args()
    if a.child:
        engine, n, ops, d = a.child
        child(engine, int(n), int(ops), d)
        return
    sizes = [10**6] if a.quick else [10**6, 10**7]
    repeats = a.repeats
    print(json.dumps(machine()), flush=True)
    for n in sizes:
        for ops in (10, 40):
            runs = {e: [] for e in ENGINES}
            for _ in range(repeats):  # interleaved rounds: load spreads over all engines
                for e in ENGINES:
                    runs[e].append(measure(e, n, ops))
            line = {"case": f"chain{ops}", "n": n, "repeats": repeats}
            for e in ENGINES:
                line[f"{e}_mib"] = round(statistics.median(r["mib"] for r in runs[e]), 1)
                line[f"{e}_s"] = round(statistics.median(r["s"] for r in runs[e]), 4)
            eager_mib = max(line["numpy_eager_mib"], 1e-9)
            line["cold_vs_eager_mib"] = round(line["cold_mib"] / eager_mib, 2)
            line["cold_vs_eager_s"] = round(line["cold_s"] / line["numpy_eager_s"], 2)
            line["no_cxx_vs_eager_s"] = round(line["no_cxx_s"] / line["numpy_eager_s"], 2)
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
