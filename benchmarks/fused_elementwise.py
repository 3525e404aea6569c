"""Fused elementwise (issue 5, case 2): ``exp(-x*x)*sin(x) + 0.5*x*x*x - tanh(x)`` on 10^7 values.

theano_dag fuses the expression into one ``Elemwise{Composite}`` that runs as one
generated C loop (OpenMP threads, glibc's libmvec vector math). Measured in the
same run, in rounds that call each engine once in a shuffled order (the machine
may be shared; medians are used):

* ``theano_dag``: ``f(x)``, a fresh output array per call, as a user calls it;
* ``theano_dag_borrow``: the same with ``Out(borrow=True)``: the output buffer is
  reused from call to call, as the hand-written loop's is;
* ``numpy_eager``: the expression in numpy;
* ``pytensor_c``: PyTensor's C backend (``mode="CVM"``), when importable;
* ``jax_jit``: ``jax.jit``, when importable;
* ``hand_c``: a C loop written by hand (``#pragma omp parallel for simd``, libmvec
  through ``simd`` declarations, ``-O3 -march=native -fopenmp -fno-math-errno``)
  that this script compiles itself, writing into a preallocated output;
  ``hand_c_alloc``: the same loop writing into a fresh ``np.empty`` per call.

A fresh 10^7-element output costs its page faults (first touch) on every call;
compare ``theano_dag`` with ``hand_c_alloc`` and ``theano_dag_borrow`` with
``hand_c`` (same work). One JSON line per dtype with the medians (ms) and the
ratios. Target (issue 5): theano_dag within 1.25x of the hand-written loop.

Run: ``.venv/bin/python benchmarks/fused_elementwise.py [--n 10000000] [--rounds 15]``
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag.compile.io import Out  # noqa: E402
from theano_dag.config import config  # noqa: E402
from theano_dag.engines.cpu.native import ckernel  # noqa: E402

HAND_C = r"""
#include <math.h>
#define SIMD __attribute__((simd("notinbranch")))
SIMD double exp(double); SIMD double sin(double); SIMD double tanh(double);
SIMD float expf(float); SIMD float sinf(float); SIMD float tanhf(float);
void hand_f64(long n, const double *restrict x, double *restrict out)
{
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        double v = x[i];
        out[i] = exp(-v * v) * sin(v) + 0.5 * v * v * v - tanh(v);
    }
}
void hand_f32(long n, const float *restrict x, float *restrict out)
{
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        float v = x[i];
        out[i] = expf(-v * v) * sinf(v) + 0.5f * v * v * v - tanhf(v);
    }
}
"""
HAND_FLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fPIC", "-shared"]


def expr(x, lib):
    return lib.exp(-x * x) * lib.sin(x) + 0.5 * x * x * x - lib.tanh(x)


def hand_loop(workdir):
    """The hand-written loop, compiled with its own flags: dtype -> f(x, out)."""
    cxx = config.cxx or "gcc"
    src = os.path.join(workdir, "hand.c")
    lib = os.path.join(workdir, "hand.so")
    with open(src, "w") as f:
        f.write(HAND_C)
    subprocess.run([cxx, *HAND_FLAGS, src, "-o", lib, "-lmvec", "-lm"], check=True)
    dll = ctypes.CDLL(lib)
    fns = {}
    for dt, name in (("float32", "hand_f32"), ("float64", "hand_f64")):
        fn = getattr(dll, name)
        fn.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        fn.restype = None

        def call(x, out, fn=fn):
            fn(x.size, x.ctypes.data, out.ctypes.data)
            return out

        fns[dt] = call
    return fns


def peers(dtype):
    out = {}
    try:
        import pytensor
        import pytensor.tensor as pt

        x = pt.vector("x", dtype=dtype)
        out["pytensor_c"] = pytensor.function([x], expr(x, pt), mode="CVM")
    except Exception as e:  # not installed, or it cannot compile here
        print(f"# pytensor_c skipped: {e}", file=sys.stderr)
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        f = jax.jit(lambda a: expr(a, jnp))

        def call(a, f=f):
            return f(a).block_until_ready()

        out["jax_jit"] = call
    except Exception as e:
        print(f"# jax_jit skipped: {e}", file=sys.stderr)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args(argv)
    ckernel.register()  # the engine's C kernels (a no-op once the engine registers them)
    workdir = tempfile.mkdtemp(prefix="theano_dag_bench_")
    hand = hand_loop(workdir)
    for dtype in ("float32", "float64"):
        xv = np.random.default_rng(0).standard_normal(args.n).astype(dtype)
        x = tt.TensorType(dtype, (False,))("x")
        y = expr(x, tt)
        f = theano_dag.function([x], y)
        fb = theano_dag.function([x], Out(y, borrow=True))
        t0 = time.perf_counter()
        f(xv)
        fb(xv)
        in_c = ckernel.wait_for_kernels(f) and ckernel.wait_for_kernels(fb)
        build_s = time.perf_counter() - t0
        hand_out = np.empty_like(xv)
        with np.errstate(all="ignore"):
            want = expr(xv, np)
        engines = {
            "theano_dag": f,
            "theano_dag_borrow": fb,
            "numpy_eager": lambda a: expr(a, np),
            "hand_c": lambda a, h=hand[dtype], o=hand_out: h(a, o),
            "hand_c_alloc": lambda a, h=hand[dtype]: h(a, np.empty_like(a)),
            **peers(dtype),
        }
        tol = 1e-5 if dtype == "float32" else 1e-12
        for name, fn in engines.items():
            got = np.asarray(fn(xv))
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)
        times = {name: [] for name in engines}
        order = list(engines)
        rng = random.Random(0)
        for _ in range(args.rounds):
            rng.shuffle(order)  # no engine always runs right after the same other one
            for name in order:
                fn = engines[name]
                t = time.perf_counter()
                fn(xv)
                times[name].append(time.perf_counter() - t)
        row = {"benchmark": "fused_elementwise", "case": "exp(-x*x)*sin(x)+0.5*x*x*x-tanh(x)",
               "n": args.n, "dtype": dtype, "kernels_in_c": bool(in_c),
               "first_build_s": round(build_s, 3)}  # fmt: skip
        med = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
        for name, ms in med.items():
            row[f"{name}_ms"] = round(ms, 2)
        for name, ms in med.items():
            if name not in ("hand_c", "hand_c_alloc"):
                row[f"{name}_vs_hand_c"] = round(ms / med["hand_c"], 2)
        row["theano_dag_vs_hand_c_alloc"] = round(med["theano_dag"] / med["hand_c_alloc"], 2)
        row["target_vs_hand_c"] = 1.25
        row["machine"] = f"{platform.machine()} {os.cpu_count()} cpus"
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
