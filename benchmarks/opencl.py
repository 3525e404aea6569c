"""Benchmark of the OpenCL engine beside the CPU engine: a fused elementwise expression and
an MLP training step, each with and without host<->device transfers.

Workloads:

* ``fused_elementwise``: ``exp(-x*x)*sin(x) + 0.5*x*x*x - tanh(x)`` on 10^7 float32
  values (one fused kernel on the device). ``numpy`` is the same expression evaluated
  by numpy, for scale.
* ``mlp_step``: one SGD step of a 784-512-512-10 ReLU network with softmax and
  cross-entropy, batch 256, float32 (forward, gradients and the four updates).
* ``scan_rnn``: ``h = tanh(h * w + x_t)`` on a length-8 float32 state over
  ``--scan-steps`` steps, the last state returned (issue 15's loop), in microseconds per
  step: ``numpy`` (a Python loop), ``cpu``, ``opencl`` with ``loop: "device"`` (the
  loop's state in device buffers, ``engines.opencl.loop``) and ``loop: "host"`` (the
  ``Scan`` node run on the host, its step on the device: every step copies its inputs
  up and its outputs down; what the engine did before the device loop).

Cases per workload: ``cpu`` (the CPU engine, ``Mode(linker='cpu')``); ``opencl`` with
``transfer: true`` (numpy inputs, numpy outputs, parameters in ordinary shared
variables: everything crosses to the device and back every call) and with
``transfer: false`` (inputs already device arrays, outputs kept on the device,
parameters in OpenCL shared variables). One JSON line per case with the median time
of ``--runs`` calls after a warm-up call, and the host<->device copies per call.

Run: ``.venv/bin/python benchmarks/opencl.py`` (``--runs 5 --size 1000000`` to shorten;
``--only scan --scan-steps 10000`` for the loop alone).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.io import Out
from theano_dag.compile.mode import Mode
from theano_dag.engines.opencl.impl import IMPLS  # no pyopencl needed to import it
from theano_dag.scan import Scan, scan
from theano_dag.tensor import nnet


def median_time(fn, runs, sync=None):
    fn()  # warm-up: compiles kernels the driver builds lazily, plans memory
    if sync:
        sync()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def emit(**row):
    print(json.dumps(row), flush=True)


def fused(size, runs, ocl, ctx):
    rng = np.random.default_rng(0)
    a = rng.uniform(-2, 2, size).astype("float32")
    x = tt.fvector("x")
    expr = tt.exp(-x * x) * tt.sin(x) + 0.5 * x * x * x - tt.tanh(x)
    base = dict(workload="fused_elementwise", n=size, dtype="float32")

    def np_expr():
        return np.exp(-a * a) * np.sin(a) + np.float32(0.5) * a * a * a - np.tanh(a)

    emit(**base, engine="numpy", transfer=False, median_s=median_time(np_expr, runs))
    f_cpu = theano_dag.function([x], expr, mode=Mode(linker="cpu"))
    emit(**base, engine="cpu", transfer=False, median_s=median_time(lambda: f_cpu(a), runs))
    want = np_expr()
    if ocl is None:
        return
    f_host = theano_dag.function([x], expr, mode=Mode(linker="opencl"))
    np.testing.assert_allclose(f_host(a), want, rtol=1e-4, atol=1e-5)
    t = median_time(lambda: f_host(a), runs)
    emit(
        **base,
        engine="opencl",
        transfer=True,
        median_s=t,
        device=ctx.device.name,
        **per_call(ctx, lambda: f_host(a)),
    )
    f_dev = theano_dag.function([x], Out(expr, borrow=True), mode=Mode(linker="opencl"))
    da = ocl.to_device(a)
    t = median_time(lambda: f_dev(da), runs, sync=ctx.queue.finish)
    emit(
        **base,
        engine="opencl",
        transfer=False,
        median_s=t,
        device=ctx.device.name,
        **per_call(ctx, lambda: f_dev(da)),
    )


def per_call(ctx, fn):
    before = ctx.transfers.snapshot()
    fn()
    ctx.queue.finish()
    d = ctx.transfers - before
    return {
        "h2d_per_call": d.h2d,
        "d2h_per_call": d.d2h,
        "bytes_moved_per_call": d.h2d_bytes + d.d2h_bytes,
    }


def mlp_step(make_shared, mode, batch=256, sizes=(784, 512, 512, 10)):
    rng = np.random.default_rng(1)
    params = []
    for k, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = rng.normal(0, np.sqrt(2.0 / n_in), (n_in, n_out)).astype("float32")
        params += [make_shared(w, f"w{k}"), make_shared(np.zeros(n_out, "float32"), f"b{k}")]
    x, y = tt.fmatrix("x"), tt.fmatrix("y")
    h = x
    for k in range(0, len(params) - 2, 2):
        h = nnet.relu(tt.dot(h, params[k]) + params[k + 1])
    probs = nnet.softmax(tt.dot(h, params[-2]) + params[-1])
    cost = nnet.categorical_crossentropy(probs, y).mean()
    grads = theano_dag.grad(cost, params)
    lr = np.float32(0.01)
    step = theano_dag.function(
        [x, y], cost, updates=[(p, p - lr * g) for p, g in zip(params, grads)], mode=mode
    )
    xb = rng.random((batch, sizes[0])).astype("float32")
    yb = np.eye(sizes[-1], dtype="float32")[rng.integers(0, sizes[-1], batch)]
    return step, xb, yb


def mlp(runs, ocl, ctx):
    base = dict(workload="mlp_step", layers="784-512-512-10", batch=256, dtype="float32")
    step, xb, yb = mlp_step(lambda v, n: theano_dag.shared(v, name=n), Mode(linker="cpu"))
    emit(**base, engine="cpu", transfer=False, median_s=median_time(lambda: step(xb, yb), runs))
    if ocl is None:
        return
    step, xb, yb = mlp_step(lambda v, n: theano_dag.shared(v, name=n), Mode(linker="opencl"))
    t = median_time(lambda: step(xb, yb), runs)
    emit(
        **base,
        engine="opencl",
        transfer=True,
        median_s=t,
        device=ctx.device.name,
        **per_call(ctx, lambda: step(xb, yb)),
    )
    step, xb, yb = mlp_step(lambda v, n: ocl.opencl_shared(v, name=n), Mode(linker="opencl_device"))
    dx, dy = ocl.to_device(xb), ocl.to_device(yb)
    t = median_time(lambda: step(dx, dy), runs, sync=ctx.queue.finish)
    emit(
        **base,
        engine="opencl",
        transfer=False,
        median_s=t,
        device=ctx.device.name,
        **per_call(ctx, lambda: step(dx, dy)),
    )


def scan_rnn(steps, runs, ocl, ctx):
    rng = np.random.default_rng(2)
    xs = rng.normal(size=(steps, 8)).astype("float32")
    wv = (rng.normal(size=8) * 0.5).astype("float32")
    h0v = np.zeros(8, "float32")
    base = dict(workload="scan_rnn", steps=steps, state=8, dtype="float32")

    def np_loop():
        h = h0v
        for x_t in xs:
            h = np.tanh(h * wv + x_t)
        return h

    def compile_for(mode):
        x, w, h0 = tt.fmatrix("x"), tt.fvector("w"), tt.fvector("h0")
        hs, _ = scan(
            lambda x_t, h, w: tt.tanh(h * w + x_t),
            sequences=x,
            outputs_info=h0,
            non_sequences=w,
            mode=mode,
        )
        return theano_dag.function([x, w, h0], hs[-1], mode=mode)

    def us_per_step(fn, sync=None):
        return 1e6 * median_time(fn, runs, sync) / steps

    want = np_loop()
    emit(**base, engine="numpy", us_per_step=us_per_step(np_loop))
    f_cpu = compile_for(Mode(linker="cpu"))
    emit(**base, engine="cpu", us_per_step=us_per_step(lambda: f_cpu(xs, wv, h0v)))
    if ocl is None:
        return
    cases = [("device", compile_for(Mode(linker="opencl")))]
    saved = IMPLS.pop(Scan)  # without the device loop: the engine as it was before it
    try:
        cases.append(("host", compile_for(Mode(linker="opencl"))))
    finally:
        IMPLS[Scan] = saved
    for loop, f in cases:
        np.testing.assert_allclose(f(xs, wv, h0v), want, rtol=1e-4, atol=1e-5)
        emit(
            **base,
            engine="opencl",
            loop=loop,
            us_per_step=us_per_step(lambda f=f: f(xs, wv, h0v), sync=ctx.queue.finish),
            device=ctx.device.name,
            **per_call(ctx, lambda f=f: f(xs, wv, h0v)),
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="timed calls per case")
    parser.add_argument("--size", type=int, default=10**7, help="elements of the fused case")
    parser.add_argument("--scan-steps", type=int, default=1000, help="steps of the scan case")
    parser.add_argument(
        "--only", choices=["fused", "mlp", "scan"], help="run one workload (default: all)"
    )
    args = parser.parse_args(argv)
    try:
        import theano_dag.engines.opencl as ocl

        ctx = ocl.get_context()
    except ImportError as e:  # pyopencl missing, or no platform: the CPU rows only
        emit(note=f"OpenCL engine unavailable: {e}")
        ocl = ctx = None
    if args.only in (None, "fused"):
        fused(args.size, args.runs, ocl, ctx)
    if args.only in (None, "mlp"):
        mlp(args.runs, ocl, ctx)
    if args.only in (None, "scan"):
        scan_rnn(args.scan_steps, args.runs, ocl, ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
