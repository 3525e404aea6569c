"""Peak memory of one call (issue 5, case 4): peak RSS minus RSS before the call.

Each measurement runs in a fresh Python process: it builds the inputs and
compiles the function, runs one small BLAS product (BLAS allocates its buffers
on first use, whatever the engine), resets the kernel's peak-RSS counter (``VmHWM``, by
writing 5 to ``/proc/self/clear_refs``), calls the function once and reads the
peak. The first call is the one measured, so the CPU engine's planning and its
blocks are counted. Values are medians over ``--repeats`` processes, in MiB.

Cases:

* ``chain50``: a 50-op elementwise chain on 10^7 float64 (76.3 MiB per vector).
  A compiled engine needs one output vector; eager numpy about three; an
  interpreter that keeps every intermediate, fifty.
* ``mlp_inference``: 784-512-512-10 ReLU MLP on a batch of 4096 float32
  (weights and input exist before the call).
* ``resnet_inference``: a small ResNet-style convnet forward (Owl's convnet case):
  a 3x3 conv to 16 channels, an identity block (two 3x3 convs and a skip), a
  downsampling block (3x3 stride-2 convs to 32 channels, a 1x1 stride-2 projection
  shortcut), batch norm folded into per-channel scale and shift, global average
  pooling and a dense layer, on 128 float32 images 3x32x32 (one 16-channel
  activation is 8 MiB). PyTensor 3 has no batched 2-d convolution, so it is not
  among the peers here; numpy eager convolves tap by tap.

Engines: ``theano_dag`` (default mode: optimizer and CPU engine), ``theano_dag_py``
(the reference engine, which frees each value after its last reader),
``numpy_eager``, and ``pytensor_c`` (``mode="CVM"``) and ``jax_jit`` when
importable. One JSON line per case with every engine side by side, and the
ratio of each to numpy eager.

Run: ``.venv/bin/python benchmarks/memory_peak.py``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

CHAIN_N = 10**7
BATCH = 4096
LAYERS = (784, 512, 512, 10)
ENGINES = ["theano_dag", "theano_dag_py", "numpy_eager", "pytensor_c", "jax_jit"]
MIB = 1024.0


def _status():
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS", "VmHWM")):
                key, val = line.split(":")
                out[key] = int(val.split()[0])  # KiB
    return out


def chain_ops(y, lib, absolute):
    """50 elementwise ops that keep values in a tame range."""
    x = y
    for k in range(50):
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
            y = absolute(y)
    return y


def mlp_ops(x, ws, lib, dot, relu):
    h = x
    for k in range(3):
        h = dot(h, ws[2 * k]) + ws[2 * k + 1]
        if k < 2:
            h = relu(h)
    return h


RESNET_BATCH = 128


def resnet_ops(x, p, conv, channel, relu, mean_hw, dot):
    """The convnet; ``conv(h, w, stride)`` is a 'half'-padded cross-correlation,
    ``channel(v)`` shapes a per-channel vector to broadcast over (N, C, H, W)."""

    def affine(h, k):
        return h * channel(p[f"s{k}"]) + channel(p[f"b{k}"])

    h = relu(affine(conv(x, p["w0"], 1), 0))
    r = relu(affine(conv(h, p["w1"], 1), 1))
    h = relu(affine(conv(r, p["w2"], 1), 2) + h)
    r = relu(affine(conv(h, p["w3"], 2), 3))
    h = relu(affine(conv(r, p["w4"], 1), 4) + conv(h, p["wsc"], 2))
    return dot(mean_hw(h), p["dense_w"]) + p["dense_b"]


def _resnet_params(dtype="float32"):
    rng = np.random.default_rng(0)
    shapes = {"w0": (16, 3, 3), "w1": (16, 16, 3), "w2": (16, 16, 3), "w3": (32, 16, 3)}
    shapes.update({"w4": (32, 32, 3), "wsc": (32, 16, 1)})
    p = {}
    for k, (f, c, ks) in shapes.items():
        p[k] = (rng.standard_normal((f, c, ks, ks)) * np.sqrt(2.0 / (c * ks * ks))).astype(dtype)
    for k, c in enumerate((16, 16, 16, 32, 32)):
        p[f"s{k}"] = (1 + 0.1 * rng.standard_normal(c)).astype(dtype)
        p[f"b{k}"] = (0.1 * rng.standard_normal(c)).astype(dtype)
    p["dense_w"] = (rng.standard_normal((32, 10)) * 0.3).astype(dtype)
    p["dense_b"] = np.zeros(10, dtype)
    x = rng.standard_normal((RESNET_BATCH, 3, 32, 32)).astype(dtype)
    return x, p


def np_conv_half(x, w, stride):
    """Cross-correlation with 'half' padding, tap by tap (as numpy code would do it)."""
    k = w.shape[2]
    pad = k // 2
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else x
    oh = (x.shape[2] + 2 * pad - k) // stride + 1
    ow = (x.shape[3] + 2 * pad - k) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow), x.dtype)
    for i in range(k):
        for j in range(k):
            patch = xp[
                :, :, i : i + stride * (oh - 1) + 1 : stride, j : j + stride * (ow - 1) + 1 : stride
            ]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
    return out


def _mlp_params(dtype="float32"):
    rng = np.random.default_rng(0)
    ps = []
    for a, b in zip(LAYERS[:-1], LAYERS[1:]):
        ps.append((rng.standard_normal((a, b)) / np.sqrt(a)).astype(dtype))
        ps.append(np.zeros(b, dtype))
    x = rng.standard_normal((BATCH, LAYERS[0])).astype(dtype)
    return x, ps


def build(case, engine):
    """``(call, arg)``: a compiled one-argument callable and its input, both ready."""
    if case == "chain50":
        arg = np.linspace(-1.0, 1.0, CHAIN_N)
        if engine == "numpy_eager":
            return (lambda a: chain_ops(a, np, np.abs)), arg
        if engine.startswith("theano_dag"):
            import theano_dag.tensor as tt
            from theano_dag.compile.function import function
            from theano_dag.compile.mode import Mode

            x = tt.dvector("x")
            mode = None if engine == "theano_dag" else Mode(linker="py", optimizer=None)
            return function([x], chain_ops(x, tt, abs), mode=mode), arg
        if engine == "pytensor_c":
            import pytensor
            import pytensor.tensor as pt

            x = pt.dvector("x")
            return pytensor.function([x], chain_ops(x, pt, abs), mode="CVM"), arg
        if engine == "jax_jit":
            import jax
            import jax.numpy as jnp

            jax.config.update("jax_enable_x64", True)
            fn = jax.jit(lambda a: chain_ops(a, jnp, jnp.abs))
            compiled = fn.lower(arg).compile()
            return (lambda a: compiled(a).block_until_ready()), arg
    if case == "mlp_inference":
        arg, ps = _mlp_params()
        if engine == "numpy_eager":
            return (lambda a: mlp_ops(a, ps, np, np.dot, lambda h: np.maximum(h, 0))), arg
        if engine.startswith("theano_dag"):
            import theano_dag.tensor as tt
            from theano_dag.compile.function import function
            from theano_dag.compile.mode import Mode
            from theano_dag.compile.sharedvalue import shared

            x = tt.fmatrix("x")
            ws = [shared(p, borrow=True) for p in ps]
            out = mlp_ops(x, ws, tt, tt.dot, lambda h: tt.maximum(h, 0))
            mode = None if engine == "theano_dag" else Mode(linker="py", optimizer=None)
            return function([x], out, mode=mode), arg
        if engine == "pytensor_c":
            import pytensor
            import pytensor.tensor as pt

            x = pt.fmatrix("x")
            ws = [pytensor.shared(p, borrow=True) for p in ps]
            out = mlp_ops(x, ws, pt, pt.dot, lambda h: pt.maximum(h, 0))
            return pytensor.function([x], out, mode="CVM"), arg
        if engine == "jax_jit":
            import jax
            import jax.numpy as jnp

            wj = [jnp.asarray(p) for p in ps]
            fn = jax.jit(lambda a, w: mlp_ops(a, w, jnp, jnp.dot, lambda h: jnp.maximum(h, 0)))
            xa = jnp.asarray(arg)
            compiled = fn.lower(xa, wj).compile()
            return (lambda a: compiled(a, wj).block_until_ready()), xa
    if case == "resnet_inference":
        arg, p = _resnet_params()
        if engine == "numpy_eager":

            def np_forward(a):
                return resnet_ops(
                    a,
                    p,
                    np_conv_half,
                    lambda v: v[None, :, None, None],
                    lambda h: np.maximum(h, 0),
                    lambda h: h.mean(axis=(2, 3)),
                    np.dot,
                )

            return np_forward, arg
        if engine.startswith("theano_dag"):
            import theano_dag.tensor as tt
            from theano_dag.compile.function import function
            from theano_dag.compile.mode import Mode
            from theano_dag.compile.sharedvalue import shared
            from theano_dag.tensor import nnet

            x = tt.ftensor4("x")
            ps = {k: shared(v, borrow=True, name=k) for k, v in p.items()}

            def conv(h, w, stride):
                return nnet.conv2d(
                    h, w, border_mode="half", subsample=(stride, stride), filter_flip=False
                )

            out = resnet_ops(
                x,
                ps,
                conv,
                lambda v: v.dimshuffle("x", 0, "x", "x"),
                lambda h: tt.maximum(h, 0),
                lambda h: h.mean(axis=(2, 3)),
                tt.dot,
            )
            mode = None if engine == "theano_dag" else Mode(linker="py", optimizer=None)
            return function([x], out, mode=mode), arg
        if engine == "jax_jit":
            import jax
            import jax.numpy as jnp

            def conv(h, w, stride):
                pad = w.shape[2] // 2
                return jax.lax.conv_general_dilated(
                    h, w, (stride, stride), [(pad, pad), (pad, pad)]
                )

            pj = {k: jnp.asarray(v) for k, v in p.items()}
            fn = jax.jit(
                lambda a, q: resnet_ops(
                    a,
                    q,
                    conv,
                    lambda v: v[None, :, None, None],
                    lambda h: jnp.maximum(h, 0),
                    lambda h: h.mean(axis=(2, 3)),
                    jnp.dot,
                )
            )
            xa = jnp.asarray(arg)
            compiled = fn.lower(xa, pj).compile()
            return (lambda a: compiled(a, pj).block_until_ready()), xa
        raise ImportError(f"{engine} has no batched 2-d convolution in this benchmark")
    raise ValueError(f"unknown case/engine {case}/{engine}")


def child(case, engine):
    """Measure one call in this (fresh) process; print one JSON object."""
    try:
        call, arg = build(case, engine)
    except ImportError as e:
        print(json.dumps({"skipped": f"{engine}: {e}"}))
        return
    # BLAS allocates its work buffers on its first product: do that before measuring,
    # for every engine alike, so that the number is the function's own memory.
    for dt in ("float32", "float64"):
        np.dot(np.ones((256, 256), dt), np.ones((256, 256), dt))
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # peak RSS := current RSS
    before = _status()["VmRSS"]
    out = call(arg)
    after = _status()
    del out
    print(json.dumps({"peak_mib": (after["VmHWM"] - before) / MIB}))


def measure(case, engine, repeats):
    vals = []
    for _ in range(repeats):
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", case, engine],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            return None, (proc.stderr.strip().splitlines() or ["failed"])[-1]
        res = json.loads(lines[-1])
        if "skipped" in res:
            return None, res["skipped"]
        vals.append(res["peak_mib"])
    return statistics.median(vals), None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", default="chain50,mlp_inference,resnet_inference")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "ENGINE"))
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    for case in args.cases.split(","):
        row = {"benchmark": "memory_peak", "case": case, "unit": "MiB"}
        if case == "chain50":
            row["one_vector_mib"] = round(CHAIN_N * 8 / MIB / MIB, 1)
        notes = {}
        for engine in ENGINES:
            val, why = measure(case, engine, args.repeats)
            if val is None:
                notes[engine] = why
                continue
            row[f"{engine}_mib"] = round(val, 1)
        base = row.get("numpy_eager_mib")
        if base:
            for engine in ENGINES:
                if f"{engine}_mib" in row and engine != "numpy_eager":
                    row[f"{engine}_vs_numpy"] = round(row[f"{engine}_mib"] / base, 2)
        if notes:
            row["not_measured"] = notes
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
