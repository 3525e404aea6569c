"""Matrix products: numpy's BLAS as the CPU engine calls it, beside the alternatives.

Side by side in one run, on the products alone and on the MLP training step of
``mlp_training.py`` (784-512-512-10, batch 256, float32):

* ``numpy``: numpy's BLAS as shipped (OpenBLAS in the PyPI wheels, one thread per core),
  which the CPU engine calls;
* ``numpy_1t``: the same, capped to one thread with ``threadpoolctl`` (so that it cannot
  fight the engine's OpenMP loops for the cores);
* ``blis``: the ``blis`` package (BLIS, single-threaded and re-entrant), products only;
* on the MLP step also numpy written by hand (``numpy_eager``) and ``jax.jit``.

The hand-written AVX-512 kernel these replaced was measured against OpenBLAS with the
script kept in ``results/gemm_kernel_vs_openblas.txt`` (docs/performance.md, "Matrix
products").

Products: (m, k, n) = the MLP's (256, 784, 512), squares 512 and 1024, and two skinny
ones, in float32 and float64; every result is checked against a float64 product first.
The figure is the median over ``--repeats`` interleaved rounds; GFLOP/s = 2mkn / time.
The first line describes the machine: CPU flags, ``OPENBLAS_CORETYPE``, and which
OpenBLAS kernel (``architecture``) and how many threads ``threadpoolctl`` reports.

Run: ``.venv/bin/python benchmarks/gemm.py [--repeats 7] [--quick]``; for numpy's own
kernel choice run it with ``OPENBLAS_CORETYPE`` unset (``env -u OPENBLAS_CORETYPE``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mlp_training  # noqa: E402

SHAPES = [(256, 784, 512), (512, 512, 512), (1024, 1024, 1024), (4096, 256, 16), (16, 4096, 512)]
QUICK_SHAPES = [(256, 784, 512), (4096, 256, 16)]


def cpu_flags():
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    flags = set()
    model = ""
    for line in text.splitlines():
        if line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
        if line.startswith("model name") and not model:
            model = line.split(":", 1)[1].strip()
    return {"model": model, "avx2": "avx2" in flags, "avx512f": "avx512f" in flags}


def blas_info():
    try:
        from threadpoolctl import threadpool_info
    except ImportError as e:
        return {"error": f"threadpoolctl not importable: {e}"}
    keep = ("internal_api", "version", "architecture", "num_threads", "threading_layer")
    return [{k: p.get(k) for k in keep} for p in threadpool_info()]


def blis_gemm():
    """``fn(a, b, c, alpha, beta) -> 0``: ``c = alpha * a @ b + beta * c`` with blis."""
    from blis.py import gemm as bgemm

    def operand(x):
        if x.flags.c_contiguous:
            return x, False
        if x.flags.f_contiguous:
            return x.T, True  # a transposed view: BLIS reads it transposed, no copy
        return np.ascontiguousarray(x), False

    def fn(a, b, c, alpha, beta):
        if not c.flags.c_contiguous:
            raise ValueError("blis writes C-contiguous outputs only")
        (a, ta), (b, tb) = operand(a), operand(b)
        bgemm(a, b, out=c, trans1=ta, trans2=tb, alpha=float(alpha), beta=float(beta))
        return 0

    return fn


def engines():
    """name -> (product(a, b, c), context manager factory); the absent ones -> reason."""
    import contextlib

    out, skipped = {}, {}
    out["numpy"] = (lambda a, b, c: np.dot(a, b, out=c), contextlib.nullcontext)
    try:
        from threadpoolctl import threadpool_limits

        out["numpy_1t"] = (
            lambda a, b, c: np.dot(a, b, out=c),
            lambda: threadpool_limits(1, user_api="blas"),
        )
    except ImportError as e:
        skipped["numpy_1t"] = str(e)
    try:
        fn = blis_gemm()
        out["blis"] = (lambda a, b, c: fn(a, b, c, 1.0, 0.0), contextlib.nullcontext)
    except ImportError as e:
        skipped["blis"] = str(e)
    return out, skipped


def time_products(shape, dtype, engs, repeats, min_s=0.02):
    m, k, n = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    ref = a.astype("float64") @ b.astype("float64")
    scale = np.sqrt(k) * (1e-5 if dtype == "float32" else 1e-12)
    row = {"benchmark": "gemm", "case": f"{m}x{k}x{n} {dtype}", "unit": "ms"}
    calls = {}
    for name, (prod, ctx) in engs.items():
        c = np.empty((m, n), dtype)
        with ctx():
            prod(a, b, c)  # also the first call, which starts the threads
            err = float(np.abs(c - ref).max())
            if err > 10 * scale:
                row[f"{name}_error"] = f"max abs error {err:.3g} (allowed {10 * scale:.3g})"
                continue
            t0 = time.perf_counter()
            prod(a, b, c)
            calls[name] = max(1, int(min_s / max(time.perf_counter() - t0, 1e-7)))
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name in calls:
            prod, ctx = engs[name]
            c = np.empty((m, n), dtype)
            with ctx():
                t0 = time.perf_counter()
                for _ in range(calls[name]):
                    prod(a, b, c)
                times[name].append((time.perf_counter() - t0) / calls[name])
    for name, ts in times.items():
        s = statistics.median(ts)
        row[f"{name}_ms"] = round(s * 1e3, 4)
        row[f"{name}_gflops"] = round(2 * m * k * n / s / 1e9, 1)
    if "numpy_ms" in row:
        for name in times:
            if name != "numpy":
                row[f"{name}_vs_numpy"] = round(row[f"{name}_ms"] / row["numpy_ms"], 3)
    return row


def time_mlp(engs, repeats, steps):
    """The MLP step: theano_dag (numpy's BLAS as shipped, then capped), numpy, JAX."""
    import contextlib

    from theano_dag.engines.cpu.native.ckernel import compile_mode

    init, x, y = mlp_training.make_data()
    ref_step, ref_params, _ = mlp_training.build_numpy(init)
    reference = {"losses": [float(ref_step(x, y)), float(ref_step(x, y))]}
    reference["params"] = [p.copy() for p in ref_params()]
    row = {"benchmark": "gemm", "case": "mlp step 784-512-512-10 b256 float32", "unit": "ms/step"}
    variants = {}  # name -> (builder, context)
    variants["theano_dag"] = (mlp_training.build_theano_dag, contextlib.nullcontext)
    if "numpy_1t" in engs:
        variants["theano_dag_1t"] = (mlp_training.build_theano_dag, engs["numpy_1t"][1])
    variants["numpy_eager"] = (mlp_training.build_numpy, contextlib.nullcontext)
    variants["jax_jit"] = (mlp_training.build_jax, contextlib.nullcontext)
    ready = {}
    for name, (builder, ctx) in variants.items():
        try:
            with ctx(), compile_mode("sync"):  # time the C kernels, not numpy while they build
                built = builder(init)
                _, loss_diff, param_diff, ok = mlp_training.check_agreement(
                    name, built, reference, x, y
                )
        except ImportError as e:
            row[f"{name}_skipped"] = str(e)
            continue
        if not ok:
            row[f"{name}_error"] = f"disagrees: loss {loss_diff:.3g}, param {param_diff:.3g}"
            continue
        ready[name] = (built[0], ctx)
    times = {name: [] for name in ready}
    for _ in range(repeats):
        for name, (step, ctx) in ready.items():
            with ctx():
                step(x, y)
                t0 = time.perf_counter()
                for _ in range(steps):
                    step(x, y)
                times[name].append((time.perf_counter() - t0) / steps * 1e3)
    for name, ts in times.items():
        row[f"{name}_ms"] = round(statistics.median(ts), 3)
    if "jax_jit_ms" in row:
        for name in ready:
            if name != "jax_jit":
                row[f"{name}_vs_jax_jit"] = round(row[f"{name}_ms"] / row["jax_jit_ms"], 3)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7, help="interleaved rounds (median)")
    ap.add_argument("--steps", type=int, default=20, help="MLP steps per round")
    ap.add_argument("--quick", action="store_true", help="two shapes, three rounds")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats = 3
    engs, skipped = engines()
    head = {
        "benchmark": "gemm",
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, numpy {np.__version__}",
        "cpu": cpu_flags(),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "blas": blas_info(),
        "skipped": skipped,
    }
    print(json.dumps(head), flush=True)
    for shape in QUICK_SHAPES if args.quick else SHAPES:
        for dtype in ("float32", "float64"):
            print(json.dumps(time_products(shape, dtype, engs, args.repeats)), flush=True)
    print(json.dumps(time_mlp(engs, args.repeats, args.steps)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
