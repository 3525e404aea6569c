"""3-D convolution and pooling (issue 16, ``nnet.conv3d`` / ``pool_3d``): theano_dag's CPU
engine beside its peers on C3D-sized layers.

For each layer, the forward convolution and its two gradients (w.r.t. the filters and
w.r.t. the image, for a given output gradient ``gy``), and 3-D max and average pooling
with their gradients, in float32 and float64. Engines, measured in turns within each
round (a busy machine slows all alike):

- ``theano_dag``: ``function`` with the default mode (the CPU engine), which runs the
  3-D Ops' ``perform``: numpy im2col (``sliding_window_view`` + one ``tensordot``) for the
  convolutions, one strided slice per window offset for pooling;
- ``jax_jit``: ``lax.conv_general_dilated`` (its ``vjp`` for the gradients) and
  ``lax.reduce_window`` (its ``vjp``) under ``jax.jit``, when installed;
- ``torch``: PyTorch's CPU ``conv3d`` and ``torch.nn.grad.conv3d_*``, ``max_pool3d`` /
  ``avg_pool3d`` and their backward, eager, when installed.

Every result is compared with theano_dag's reference engine (``py``) first; an engine
that disagrees prints an error instead of a time. One JSON line per case: median
milliseconds of ``--repeats`` rounds and theano_dag's ratio to each peer. Run pinned to
one core for comparable figures: ``taskset -c 1 .venv/bin/python benchmarks/conv3d.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.gradient import grad
from theano_dag.tensor import nnet

REF = Mode(linker="py", optimizer=None)

# (name, image shape, filter shape, padding, stride)
CONV_LAYERS = [
    ("c3d-conv1-3x3x3-3to32@16x56", (1, 3, 16, 56, 56), (32, 3, 3, 3, 3), 1, 1),
    ("c3d-3x3x3-32@8x28-b2", (2, 32, 8, 28, 28), (32, 32, 3, 3, 3), 1, 1),
    ("3x3x3s2-16to32@16x32-b2", (2, 16, 16, 32, 32), (32, 16, 3, 3, 3), 1, 2),
]
# (name, image shape, window, mode)
POOL_LAYERS = [
    ("c3d-maxpool-2x2x2", (2, 32, 16, 28, 28), (2, 2, 2), "max"),
    ("avgpool-2x2x2", (2, 32, 16, 28, 28), (2, 2, 2), "average_inc_pad"),
]


def _time_all(fns, repeats):
    """Median milliseconds per call of each callable, taking turns in each round."""
    for fn in fns.values():
        fn()
    runs = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - t0)
    return {name: statistics.median(r) * 1e3 for name, r in runs.items()}


def _jax():
    try:
        import jax  # noqa: PLC0415 (an optional peer)

        jax.config.update("jax_enable_x64", True)
        return jax
    except ImportError:
        return None


def _torch():
    try:
        import torch  # noqa: PLC0415 (an optional peer)

        return torch
    except ImportError:
        return None


def _conv_case(kind, layer, dtype, jax, torch):
    name, xs, ws, pad, stride = layer
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(dtype)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(dtype)
    params = dict(border_mode=pad, subsample=stride, filter_flip=False)
    T5 = tt.TensorType(dtype, shape=(None,) * 5)
    sx, sw, sg = T5("x"), T5("w"), T5("gy")
    y = nnet.conv3d(sx, sw, **params)
    gy = rng.standard_normal(function([sx, sw], y.shape, mode=REF)(x, w)).astype(dtype)
    if kind == "forward":
        ins, out, args = [sx, sw], y, (x, w)
    elif kind == "grad_weights":
        ins, out, args = [sx, sw, sg], grad((y * sg).sum(), sw), (x, w, gy)
    else:
        ins, out, args = [sx, sw, sg], grad((y * sg).sum(), sx), (x, w, gy)
    f = function(ins, out)
    fns = {"theano_dag": lambda: f(*args)}
    want = function(ins, out, mode=REF)(*args)
    if jax is not None:
        lax = jax.lax

        def jconv(a, b):
            return lax.conv_general_dilated(a, b, (stride,) * 3, [(pad, pad)] * 3)

        jx, jw, jg = (jax.device_put(a) for a in (x, w, gy))
        if kind == "forward":
            jf = jax.jit(jconv)
            fns["jax_jit"] = lambda: jf(jx, jw).block_until_ready()
        elif kind == "grad_weights":
            jf = jax.jit(lambda a, b, g: jax.vjp(lambda v: jconv(a, v), b)[1](g)[0])
            fns["jax_jit"] = lambda: jf(jx, jw, jg).block_until_ready()
        else:
            jf = jax.jit(lambda a, b, g: jax.vjp(lambda v: jconv(v, b), a)[1](g)[0])
            fns["jax_jit"] = lambda: jf(jx, jw, jg).block_until_ready()
    if torch is not None:
        F = torch.nn.functional
        tx, tw, tg = (torch.from_numpy(a) for a in (x, w, gy))
        kw = dict(stride=stride, padding=pad)
        if kind == "forward":
            fns["torch"] = lambda: F.conv3d(tx, tw, **kw)
        elif kind == "grad_weights":
            fns["torch"] = lambda: torch.nn.grad.conv3d_weight(tx, ws, tg, **kw)
        else:
            fns["torch"] = lambda: torch.nn.grad.conv3d_input(xs, tw, tg, **kw)
    return name, want, fns


def _pool_case(kind, layer, dtype, jax, torch):
    name, xs, win, mode = layer
    rng = np.random.default_rng(0)
    x = rng.permutation(int(np.prod(xs))).reshape(xs).astype(dtype)  # no ties
    sx, sg = tt.TensorType(dtype, shape=(None,) * 5)("x"), tt.TensorType(dtype, shape=(None,) * 5)()
    y = nnet.pool_3d(sx, win, ignore_border=True, mode=mode)
    gy = rng.standard_normal(function([sx], y.shape, mode=REF)(x)).astype(dtype)
    ins, out, args = (
        ([sx], y, (x,)) if kind == "pool" else ([sx, sg], grad((y * sg).sum(), sx), (x, gy))
    )
    f = function(ins, out)
    fns = {"theano_dag": lambda: f(*args)}
    want = function(ins, out, mode=REF)(*args)
    if jax is not None:
        lax = jax.lax
        dims = (1, 1) + win
        if mode == "max":

            def jpool(a):
                return lax.reduce_window(a, -np.inf, lax.max, dims, dims, "VALID")

        else:

            def jpool(a):
                return lax.reduce_window(a, 0.0, lax.add, dims, dims, "VALID") / np.prod(win)

        jx, jg = jax.device_put(x), jax.device_put(gy)
        if kind == "pool":
            jf = jax.jit(jpool)
            fns["jax_jit"] = lambda: jf(jx).block_until_ready()
        else:
            jf = jax.jit(lambda a, g: jax.vjp(jpool, a)[1](g)[0])
            fns["jax_jit"] = lambda: jf(jx, jg).block_until_ready()
    if torch is not None:
        F = torch.nn.functional
        pool = F.max_pool3d if mode == "max" else F.avg_pool3d
        tx, tg = torch.from_numpy(x), torch.from_numpy(gy)
        if kind == "pool":
            fns["torch"] = lambda: pool(tx, win)
        else:
            txg = tx.clone().requires_grad_(True)

            def tback():
                (g,) = torch.autograd.grad(pool(txg, win), txg, tg)
                return g

            fns["torch"] = tback
    return name, want, fns


def _row(case, kind, dtype, want, fns, repeats):
    tol = 1e-3 if dtype == "float32" else 1e-9
    row = {"benchmark": "conv3d", "case": case, "op": kind, "dtype": dtype}
    scale = max(1.0, float(np.abs(want).max()))
    for key, fn in list(fns.items()):
        got = fn()
        got = np.asarray(got.detach() if hasattr(got, "detach") else got)
        if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol * scale):
            row[f"{key}_error"] = "disagrees with the reference engine"
            del fns[key]
    times = _time_all(fns, repeats)
    for key, t in times.items():
        row[f"{key}_ms"] = round(t, 3)
    if "theano_dag" in times:
        for peer in ("jax_jit", "torch"):
            if peer in times:
                row[f"theano_dag_vs_{peer}"] = round(times["theano_dag"] / times[peer], 2)
    row["machine"] = f"{platform.machine()} {platform.python_version()} numpy {np.__version__}"
    print(json.dumps(row), flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-jax", action="store_true")
    args = ap.parse_args(argv)
    jax = None if args.no_jax else _jax()
    torch = None if args.no_torch else _torch()
    cores = max(1, len(os.sched_getaffinity(0)))
    if torch is not None:
        torch.set_num_threads(cores)
    try:
        import threadpoolctl  # noqa: PLC0415 (optional: the bench extra)

        threadpoolctl.threadpool_limits(cores, user_api="blas")
    except ImportError:
        pass
    for dtype in args.dtypes.split(","):
        for layer in CONV_LAYERS:
            for kind in ("forward", "grad_weights", "grad_inputs"):
                _row(
                    layer[0],
                    kind,
                    dtype,
                    *_conv_case(kind, layer, dtype, jax, torch)[1:],
                    args.repeats,
                )
        for layer in POOL_LAYERS:
            for kind in ("pool", "pool_grad"):
                _row(
                    layer[0],
                    kind,
                    dtype,
                    *_pool_case(kind, layer, dtype, jax, torch)[1:],
                    args.repeats,
                )


if __name__ == "__main__":
    main()
