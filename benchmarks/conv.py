"""Convolution and pooling on ResNet50-sized layers (issue 21): the CPU engine beside its peers.

For each layer, the forward convolution and its two gradients (w.r.t. the filters and
w.r.t. the image, the given output gradient ``gy``), and pooling, in float32 and
float64. Engines, measured in turns within each round (a busy machine slows all alike):

- ``theano_dag``: ``function`` with the default mode (the CPU engine): the im2col
  emitters of ``theano_dag.engines.cpu.emit.conv``;
- ``numpy_eager``: the same computation as plain numpy calls (``sliding_window_view``
  + ``tensordot``, the Ops' ``perform``, which is what theano_dag ran before);
- ``jax_jit``: ``lax.conv_general_dilated`` (its ``vjp`` for the gradients),
  ``lax.reduce_window`` for pooling, under ``jax.jit``;
- ``torch``: PyTorch's CPU ``conv2d`` (oneDNN) and ``torch.nn.grad``, eager, when
  installed.

The ResNet basic block (``resnet-basic-block-b8``: two 3x3 64-channel convolutions at
56x56, batch 8, each with inference batch norm, relu after the first and after the
residual add; ``theano_dag.models``' layers in each engine) is one more case, whose
line also carries each engine's GFLOP/s (the two convolutions' 3.7 GFLOP, as direct
convolutions count them) beside OpenBLAS's sgemm on a 2048^3 product and on the
25088x576x64 product one of the convolutions is, timed in the same rounds in CPU time
of the process (``time.process_time``: what a shared machine slows least), with
the kernel OpenBLAS runs (``blas_core``); then again in wall time (the ``_cpu`` keys
are the CPU times). On two cores (``OPENBLAS_NUM_THREADS=2``, unpinned) the wall
times are the figures to read.

Every engine's result is compared with numpy eager's first (an engine that disagrees
prints an error instead of a time). One JSON line per case: median milliseconds of
``--repeats`` rounds, each engine's ratio to JAX jit and to the fastest peer.

Every engine gets as many threads as the process has cores: OpenBLAS (numpy eager and
theano_dag) is capped with ``threadpoolctl`` where installed, since by default it starts
a thread per core of the machine even when the process is pinned to fewer (two threads
on one core made the same products 1x to 5x slower, at random). Run pinned to one core
for comparable figures (the 2-core machine is shared):
``taskset -c 1 .venv/bin/python benchmarks/conv.py`` (``PYTHONPATH=.`` from another
checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.tensor import nnet
from theano_dag.tensor.nnet.abstract_conv import (
    AbstractConv2d,
    _conv_forward,
    _conv_grad_inputs,
    _conv_grad_weights,
)

# (name, image shape, filter shape, padding, stride, groups)
CONV_LAYERS = [
    ("resnet-conv1-7x7s2", (1, 3, 224, 224), (64, 3, 7, 7), 3, 2, 1),
    ("resnet-3x3-64@56", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1),
    ("resnet-3x3s2-128@56", (1, 128, 56, 56), (128, 128, 3, 3), 1, 2, 1),
    ("resnet-1x1-256to1024@14-b8", (8, 256, 14, 14), (1024, 256, 1, 1), 0, 1, 1),
    ("resnet-3x3-256@14-b8", (8, 256, 14, 14), (256, 256, 3, 3), 1, 1, 1),
    ("resnext-3x3-g32-128@28", (1, 128, 28, 28), (128, 4, 3, 3), 1, 1, 32),
]
# (name, image shape, window, stride, padding, mode)
POOL_LAYERS = [
    ("resnet-maxpool-3x3s2", (1, 64, 112, 112), (3, 3), (2, 2), (1, 1), "max"),
    ("resnet-avgpool-7x7-b8", (8, 2048, 7, 7), (7, 7), (7, 7), (0, 0), "average_inc_pad"),
]


def _time_all(fns, repeats, clock=time.perf_counter):
    """Median milliseconds per call of each callable, taking turns in each round."""
    for fn in fns.values():
        fn()
    runs = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = clock()
            fn()
            runs[name].append(clock() - t0)
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
    name, xs, ws, pad, stride, groups = layer
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(dtype)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(dtype)
    params = dict(border_mode=pad, subsample=stride, filter_flip=False, num_groups=groups)
    op = AbstractConv2d(**params)
    y0 = _conv_forward(op, x, w)
    gy = rng.standard_normal(y0.shape).astype(dtype)
    sx = tt.TensorType(dtype, shape=(None,) * 4)("x")
    sw = tt.TensorType(dtype, shape=(None, None) + ws[2:])("w")
    sg = tt.TensorType(dtype, shape=(None,) * 4)("gy")
    if kind == "forward":
        args = (x, w)
        f = function([sx, sw], nnet.conv2d(sx, sw, **params))
        eager = lambda: _conv_forward(op, x, w)  # noqa: E731
    elif kind == "grad_weights":
        args = (x, gy)
        f = function([sx, sg], nnet.conv2d_grad_wrt_weights(sx, sg, ws, **params))
        eager = lambda: _conv_grad_weights(op, x, gy, ws[2:])  # noqa: E731
    else:
        args = (w, gy)
        f = function([sw, sg], nnet.conv2d_grad_wrt_inputs(sg, sw, xs, **params))
        eager = lambda: _conv_grad_inputs(op, w, gy, xs[2:])  # noqa: E731
    fns = {"numpy_eager": eager, "theano_dag": lambda: f(*args)}
    if jax is not None:
        lax = jax.lax
        jargs = tuple(jax.device_put(a) for a in args)

        def jconv(a, b):
            return lax.conv_general_dilated(
                a, b, (stride, stride), [(pad, pad)] * 2, feature_group_count=groups
            )

        if kind == "forward":
            jf = jax.jit(jconv)
        elif kind == "grad_weights":
            jw = jax.device_put(w)
            jf = jax.jit(lambda a, g: jax.vjp(lambda b: jconv(a, b), jw)[1](g)[0])
        else:
            jx = jax.device_put(x)
            jf = jax.jit(lambda b, g: jax.vjp(lambda a: jconv(a, b), jx)[1](g)[0])
        fns["jax_jit"] = lambda: jf(*jargs).block_until_ready()
    if torch is not None:
        F = torch.nn.functional
        targs = tuple(torch.from_numpy(a) for a in args)
        kw = dict(stride=stride, padding=pad, groups=groups)
        if kind == "forward":
            fns["torch"] = lambda: F.conv2d(*targs, **kw)
        elif kind == "grad_weights":
            fns["torch"] = lambda: torch.nn.grad.conv2d_weight(targs[0], ws, targs[1], **kw)
        else:
            fns["torch"] = lambda: torch.nn.grad.conv2d_input(xs, targs[0], targs[1], **kw)
    return name, fns


def _pool_case(layer, dtype, jax, torch):
    name, xs, win, stride, pad, mode = layer
    x = np.random.default_rng(0).standard_normal(xs).astype(dtype)
    sx = tt.TensorType(dtype, shape=(None,) * 4)("x")
    f = function([sx], nnet.pool_2d(sx, win, ignore_border=True, stride=stride, pad=pad, mode=mode))

    def eager():
        fill = -np.inf if mode == "max" else 0
        xp = np.pad(x, ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2), constant_values=fill)
        v = sliding_window_view(xp, win, axis=(2, 3))[:, :, :: stride[0], :: stride[1]]
        return v.max(axis=(4, 5)) if mode == "max" else v.mean(axis=(4, 5))

    fns = {"numpy_eager": eager, "theano_dag": lambda: f(x)}
    if jax is not None:
        lax = jax.lax
        jx = jax.device_put(x)
        dims, strides = (1, 1) + win, (1, 1) + stride
        pads = ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2)
        if mode == "max":
            jf = jax.jit(lambda a: lax.reduce_window(a, -np.inf, lax.max, dims, strides, pads))
        else:
            n = float(np.prod(win))
            jf = jax.jit(lambda a: lax.reduce_window(a, 0.0, lax.add, dims, strides, pads) / n)
        fns["jax_jit"] = lambda: jf(jx).block_until_ready()
    if torch is not None:
        F = torch.nn.functional
        tx = torch.from_numpy(x)
        if mode == "max":
            fns["torch"] = lambda: F.max_pool2d(tx, win, stride, pad)
        else:
            fns["torch"] = lambda: F.avg_pool2d(tx, win, stride, pad)
    return name, fns


BLOCK = "resnet-basic-block-b8"
BLOCK_SHAPE = (8, 64, 56, 56)
# Two 3x3 convolutions of 64 to 64 channels on 8 images of 56x56: 2 * N*H*W*F * C*9 each.
BLOCK_GFLOP = 2 * 2 * 8 * 56 * 56 * 64 * 64 * 9 / 1e9


def _basic_block(net, x):
    """ResNet's basic block: conv-bn-relu, conv-bn, the input added back, relu."""
    y = net.conv_bn(x, "a", 64, 3, 1, 1, eps=1e-5)
    y = net.conv_bn(y, "b", 64, 3, 1, 1, eps=1e-5, act=False)
    return net.ops.relu(net.ops.add(y, x))


def _blas_core():
    """The kernel set numpy's OpenBLAS runs (``openblas_get_corename``), or None."""
    import ctypes  # noqa: PLC0415 (only here)
    import glob  # noqa: PLC0415

    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*")
    for path in glob.glob(libs):
        lib = ctypes.CDLL(path)
        for name in (
            "scipy_openblas_get_corename64_",
            "openblas_get_corename64_",
            "scipy_openblas_get_corename",
            "openblas_get_corename",
        ):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return None


def _block_case(jax, torch):
    """``fns`` of the basic block in each engine and the two BLAS references."""
    from theano_dag.models import Net, NumpyOps, TensorOps, init_params  # noqa: PLC0415

    params = init_params(_basic_block, (1,) + BLOCK_SHAPE[1:])
    x = np.random.default_rng(1).random(BLOCK_SHAPE, dtype=np.float32)
    sx = tt.TensorType("float32", shape=(None, 64, None, None))("x")
    f = function([sx], _basic_block(Net(TensorOps(), params), sx))
    fns = {
        "numpy_eager": lambda: _basic_block(Net(NumpyOps(), params), x),
        "theano_dag": lambda: f(x),
    }
    if jax is not None or torch is not None:
        import networks  # noqa: PLC0415 (the peers' layers: benchmarks/networks.py)
    if jax is not None:
        jf = jax.jit(lambda a: _basic_block(Net(networks.jax_ops(), params), a))
        jx = jax.device_put(x)
        fns["jax_jit"] = lambda: jf(jx).block_until_ready()
    if torch is not None:
        tnet, tx = Net(networks.torch_ops(), params), torch.from_numpy(x)
        fns["torch"] = lambda: _basic_block(tnet, tx)
    rng = np.random.default_rng(2)
    a, b = (rng.random((2048, 2048), dtype=np.float32) for _ in range(2))
    c = np.empty_like(a)
    p, q = rng.random((25088, 576), dtype=np.float32), rng.random((576, 64), dtype=np.float32)
    r = np.empty((25088, 64), np.float32)
    blas = {
        "sgemm_2048": lambda: np.matmul(a, b, out=c),
        "sgemm_25088x576x64": lambda: np.matmul(p, q, out=r),
    }
    return fns, blas


def _block_row(jax, torch, repeats):
    fns, blas = _block_case(jax, torch)
    want = np.asarray(fns["numpy_eager"]())
    row = {"benchmark": "conv", "case": BLOCK, "op": "block", "dtype": "float32"}
    for key, fn in list(fns.items()):
        got = np.asarray(fn())
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-3, atol=1e-3):
            row[f"{key}_error"] = "disagrees with numpy eager"
            del fns[key]
    flops = {"sgemm_2048": 2 * 2048**3 / 1e9, "sgemm_25088x576x64": 2 * 25088 * 576 * 64 / 1e9}
    # CPU time (what a shared machine slows least), then wall time (what two threads
    # of OpenBLAS on two cores save shows only there)
    for clock, tag in ((time.process_time, "cpu_"), (time.perf_counter, "")):
        times = _time_all({**fns, **blas}, repeats, clock=clock)
        for key, t in times.items():
            row[f"{key}_{tag}ms"] = round(t, 3)
            row[f"{key}_{tag}gflops"] = round(flops.get(key, BLOCK_GFLOP) / t * 1e3, 1)
        ref = row[f"sgemm_2048_{tag}gflops"]
        for key in fns:
            row[f"{key}_{tag}vs_sgemm"] = round(row[f"{key}_{tag}gflops"] / ref, 3)
    row["blas_core"] = _blas_core()
    row["OPENBLAS_CORETYPE"] = os.environ.get("OPENBLAS_CORETYPE")
    row["cores"] = len(os.sched_getaffinity(0))
    row["machine"] = f"{platform.machine()} {platform.python_version()} numpy {np.__version__}"
    print(json.dumps(row), flush=True)
    return row


def _row(bench, case, kind, dtype, fns, repeats):
    tol = 1e-3 if dtype == "float32" else 1e-9
    want = np.asarray(fns["numpy_eager"]())
    row = {"benchmark": "conv", "case": case, "op": kind, "dtype": dtype}
    for key, fn in list(fns.items()):
        got = np.asarray(fn())
        scale = max(1.0, float(np.abs(want).max()))
        if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol * scale):
            row[f"{key}_error"] = "disagrees with numpy eager"
            del fns[key]
    times = _time_all(fns, repeats)
    for key, t in times.items():
        row[f"{key}_ms"] = round(t, 3)
    peers = {k: t for k, t in times.items() if k != "theano_dag"}
    if "theano_dag" in times:
        if "jax_jit" in times:
            row["theano_dag_vs_jax"] = round(times["theano_dag"] / times["jax_jit"], 2)
        fastest = min(peers, key=peers.get)
        row["fastest_peer"] = fastest
        row["theano_dag_vs_fastest"] = round(times["theano_dag"] / peers[fastest], 2)
        row["theano_dag_vs_numpy"] = round(times["theano_dag"] / times["numpy_eager"], 2)
    row["machine"] = f"{platform.machine()} {platform.python_version()} numpy {np.__version__}"
    print(json.dumps(row), flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    jax = _jax()
    torch = None if args.no_torch else _torch()
    cores = max(1, len(os.sched_getaffinity(0)))
    if torch is not None:
        torch.set_num_threads(cores)
    try:
        import threadpoolctl  # noqa: PLC0415 (optional: the bench extra)

        threadpoolctl.threadpool_limits(cores, user_api="blas")
    except ImportError:
        pass
    only = set(filter(None, args.cases.split(",")))
    if not only or BLOCK in only:
        _block_row(jax, torch, args.repeats)
    for dtype in args.dtypes.split(","):
        for layer in CONV_LAYERS:
            if only and layer[0] not in only:
                continue
            for kind in ("forward", "grad_weights", "grad_inputs"):
                name, fns = _conv_case(kind, layer, dtype, jax, torch)
                _row("conv", name, kind, dtype, fns, args.repeats)
        for layer in POOL_LAYERS:
            if only and layer[0] not in only:
                continue
            name, fns = _pool_case(layer, dtype, jax, torch)
            _row("conv", name, "pool", dtype, fns, args.repeats)


if __name__ == "__main__":
    main()
