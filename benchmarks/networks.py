"""Owl's Figure 7, reproduced: real networks with and without a computation graph.

Cases (``theano_dag.models``, weights He-initialised from seed 0, float32 NCHW):
``resnet50_b1``/``resnet50_b8`` and ``inception_v3_b1``/``inception_v3_b8`` (inference on
299x299 images, batch 1 and 8) and ``mnist_train_b128`` (one SGD step of Owl's MNIST
convnet on 128 digits).

Engines, each case in its own fresh process (so its peak resident memory is its own):

* ``numpy_eager``: the same network as plain numpy calls (Owl's "without graph"); the
  MNIST step with its backward pass written by hand. Its first output is the reference.
* ``theano_dag``: the default mode (optimizer, CPU engine, memory planner).
* ``jax_jit``, ``torch_eager``, ``torch_compile`` (PyTorch on the CPU; ``torch.compile``
  where it works), ``onnxruntime`` (the theano_dag graph exported with
  ``theano_dag.formats.onnx``; inference only), and ``pytensor`` (which has no
  network convolution or pooling in PyTensor 3.0: reported as not applicable; its
  ``signal.convolve2d`` convolves one 2-d image with one kernel, through scipy).

Per engine: ``build_s`` (construction + optimisation + compilation + memory plan, up to
a callable; jit engines compile on the first call, so their first call is added),
``eval_ms`` (median of ``--repeats`` calls after one warm-up; ``eval_cpu_ms`` the median
CPU time of the process over the same calls: with one thread per engine, what a
machine shared with other work slows least), ``peak_mib`` (the process's
peak resident set, ``VmHWM``, as Owl measured it) and ``base_mib`` (resident after the
imports, before the network: the libraries' own share). Every engine's first output is
compared with numpy eager's before it is timed; one that disagrees reports an error, not
a time. The line of each case also carries Owl's published figures and ratios beside ours,
and for inference the network's GFLOP (``gflop``: its convolutions and dense layer),
each engine's GFLOP/s of CPU time and OpenBLAS's sgemm on a 2048^3 product measured in
the same run, in a process of the engines' environment (``sgemm_2048_gflops``).

Run: ``.venv/bin/python benchmarks/networks.py [--quick] [--repeats 30] [--cases ...]
[--engines ...] [--engine-repeats numpy_eager=5 ...] [--threads 1] [--render FILE ...]``.
``--quick`` runs small images (ResNet50 64x64, InceptionV3 75x75, batch 32 for MNIST)
and 3 repeats: a smoke run.
``--render FILE ...`` writes the networks section of ``docs/performance.md`` and
``docs/networks.png`` from the lines of one or more runs (a case's last line wins: a run
of some cases updates a table), with the timed calls of each engine.
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
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENGINES = [
    "numpy_eager",
    "theano_dag",
    "jax_jit",
    "torch_eager",
    "torch_compile",
    "onnxruntime",
    "pytensor",
]
# case -> (network, batch, image side, quick batch, quick side)
CASES = {
    "resnet50_b1": ("resnet50", 1, 299, 1, 64),
    "resnet50_b8": ("resnet50", 8, 299, 8, 64),
    "inception_v3_b1": ("inception_v3", 1, 299, 1, 75),
    "inception_v3_b8": ("inception_v3", 8, 299, 8, 75),
    "mnist_train_b128": ("mnist", 128, 28, 32, 28),
}
# Owl's Figure 7 (i5-6300HQ laptop): eval s without / with the graph, build s, MB w/o, w/
OWL = {
    "inception_v3": {
        "eval_wo": 0.5649,
        "build": 0.1066,
        "eval_w": 0.2275,
        "mb_wo": 625.76,
        "mb_w": 230.10,
    },
    "resnet50": {
        "eval_wo": 0.7933,
        "build": 0.1395,
        "eval_w": 0.6090,
        "mb_wo": 1309.9,
        "mb_w": 397.07,
    },
    "mnist": {
        "eval_wo": 20.422,
        "build": 0.1436,
        "eval_w": 10.920,
        "mb_wo": 3685.3,
        "mb_w": 895.32,
    },
}
LR = 0.01
RTOL = 2e-3  # float32 through ~100 layers, summed in different orders by each engine
START, END = "<!-- networks:start -->", "<!-- networks:end -->"


def _vm(key):
    # Not theano_dag.testing.procmem: importing theano_dag would add its modules to the
    # peers' peak memory, which this benchmark reports as is.
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) / 1024.0  # KiB -> MiB
    return float("nan")


# -- the layer vocabulary in JAX and PyTorch (theano_dag.models.layers' interface) -----


def jax_ops():
    import jax.numpy as jnp  # noqa: PLC0415 (a peer, imported in its worker only)
    from jax import lax  # noqa: PLC0415

    class JaxOps:
        def weight(self, array, name):
            return jnp.asarray(array)

        def conv(self, x, w, stride=1, pad=0):
            s = (stride, stride) if isinstance(stride, int) else tuple(stride)
            p = (pad, pad) if isinstance(pad, int) else tuple(pad)
            return lax.conv_general_dilated(x, w, s, [(p[0], p[0]), (p[1], p[1])])

        def bias(self, x, b):
            return x + b.reshape(1, -1, 1, 1)

        def bn(self, x, p):
            scale = (p.gamma / jnp.sqrt(p.var + p.eps)).reshape(1, -1, 1, 1)
            return (x - p.mean.reshape(1, -1, 1, 1)) * scale + p.beta.reshape(1, -1, 1, 1)

        def relu(self, x):
            return jnp.maximum(x, 0)

        def add(self, x, y):
            return x + y

        def concat(self, xs):
            return jnp.concatenate(xs, axis=1)

        def _pool(self, x, k, s, p, init, op):
            pads = [(0, 0), (0, 0), (p, p), (p, p)]
            return lax.reduce_window(x, init, op, (1, 1, k, k), (1, 1, s, s), pads)

        def max_pool(self, x, k, stride, pad=0):
            return self._pool(x, k, stride, pad, -jnp.inf, lax.max)

        def avg_pool(self, x, k, stride, pad=0):
            return self._pool(x, k, stride, pad, 0.0, lax.add) / (k * k)

        def mean_hw(self, x):
            return x.mean(axis=(2, 3))

        def flatten(self, x):
            return x.reshape(x.shape[0], -1)

        def dense(self, x, w, b):
            return x @ w + b

        def softmax(self, x):
            e = jnp.exp(x - x.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)

    return JaxOps()


def torch_ops():
    import torch  # noqa: PLC0415 (a peer, imported in its worker only)
    import torch.nn.functional as F  # noqa: N812, PLC0415

    class TorchOps:
        def weight(self, array, name):
            return torch.from_numpy(np.array(array))

        def conv(self, x, w, stride=1, pad=0):
            return F.conv2d(x, w, stride=stride, padding=pad)

        def bias(self, x, b):
            return x + b.reshape(1, -1, 1, 1)

        def bn(self, x, p):
            return F.batch_norm(x, p.mean, p.var, p.gamma, p.beta, False, 0.0, p.eps)

        def relu(self, x):
            return F.relu(x)

        def add(self, x, y):
            return x + y

        def concat(self, xs):
            return torch.cat(xs, dim=1)

        def max_pool(self, x, k, stride, pad=0):
            return F.max_pool2d(x, k, stride, pad)

        def avg_pool(self, x, k, stride, pad=0):
            return F.avg_pool2d(x, k, stride, pad, count_include_pad=True)

        def mean_hw(self, x):
            return x.mean(dim=(2, 3))

        def flatten(self, x):
            return x.reshape(x.shape[0], -1)

        def dense(self, x, w, b):
            return x @ w + b

        def softmax(self, x):
            return torch.softmax(x, dim=-1)

    return TorchOps()


# -- one engine on one case, in its own process -----------------------------------------


def _data(case, quick, dtype="float32"):
    from theano_dag.models import NETWORKS, init_params  # noqa: PLC0415 (worker only)

    name, batch, side, qbatch, qside = CASES[case]
    batch, side = (qbatch, qside) if quick else (batch, side)
    network, channels, _ = NETWORKS[name]
    params = init_params(network, (1, channels, side, side), dtype=dtype)
    rng = np.random.default_rng(1)
    images = rng.random((batch, channels, side, side), dtype=np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)] if name == "mnist" else None
    return name, network, params, images, labels


def _builders(engine, name, network, params, images, labels):
    """``build() -> call`` for the engine: build constructs (and compiles) the network,
    call runs it once and returns its output (the loss, for the training step)."""
    from theano_dag.models import Net, mnist_numpy_step  # noqa: PLC0415 (worker only)

    train = name == "mnist"
    if engine == "pytensor":
        raise NotImplementedError(
            "PyTensor 3.0 has no network convolution (channels, strides, padding) or "
            "pooling: only signal.convolve2d, one image by one kernel through scipy"
        )
    if engine == "numpy_eager":
        from theano_dag.models import NumpyOps  # noqa: PLC0415

        if train:
            return lambda: lambda: mnist_numpy_step(params, images, labels, LR)
        return lambda: lambda: network(Net(NumpyOps(), params), images)
    if engine in ("theano_dag", "onnxruntime"):
        import theano_dag  # noqa: PLC0415
        from theano_dag.models import (  # noqa: PLC0415
            TensorOps,
            mnist_training_step,
            tensor_forward,
        )

        if train:
            if engine == "onnxruntime":
                raise NotImplementedError("ONNX Runtime runs inference graphs here")

            def build():
                inputs, loss, updates = mnist_training_step(Net(TensorOps(), params), LR)
                fn = theano_dag.function(inputs, loss, updates=updates)
                return lambda: fn(images, labels)

            return build
        if engine == "theano_dag":

            def build():
                x, out = tensor_forward(network, params)
                fn = theano_dag.function([x], out)
                return lambda: fn(images)

            return build
        import onnxruntime as ort  # noqa: PLC0415

        from theano_dag.formats.onnx import to_onnx  # noqa: PLC0415

        def build():
            x, out = tensor_forward(network, params, weights="constant")
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = int(os.environ.get("OMP_NUM_THREADS", "0"))
            model = to_onnx([x], [out]).SerializeToString()
            sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
            feed = {sess.get_inputs()[0].name: images}
            return lambda: sess.run(None, feed)[0]

        return build
    if engine == "jax_jit":
        import jax  # noqa: PLC0415
        import jax.numpy as jnp  # noqa: PLC0415

        from theano_dag.models import Params  # noqa: PLC0415

        ops = jax_ops()

        def net_of(weights):
            p = Params()
            p.arrays = weights
            return Net(ops, p)

        def build():
            weights = {k: jnp.asarray(v) for k, v in params.arrays.items()}
            x = jnp.asarray(images)
            if not train:
                fn = jax.jit(lambda w, x: network(net_of(w), x))
                return lambda: np.asarray(fn(weights, x))
            y = jnp.asarray(labels)

            def loss(w, x, y):
                logits = network(net_of(w), x)
                return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), axis=1))

            @jax.jit
            def step(w, x, y):
                value, grads = jax.value_and_grad(loss)(w, x, y)
                return value, {k: w[k] - LR * grads[k] for k in w}

            state = {"w": weights}

            def call():
                value, state["w"] = step(state["w"], x, y)
                return float(value)

            return call

        return build
    if engine in ("torch_eager", "torch_compile"):
        import torch  # noqa: PLC0415

        ops = torch_ops()
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

        def build():
            net = Net(ops, params)
            # the weight tensors, made here rather than inside what torch.compile traces
            net.weights = {k: ops.weight(v, k) for k, v in params.arrays.items()}
            x = torch.from_numpy(images)
            if not train:
                fn = lambda: network(net, x)  # noqa: E731
                if engine == "torch_compile":
                    fn = torch.compile(fn)

                def call():
                    with torch.inference_mode():
                        return fn().numpy()

                return call
            weights = list(net.weights.values())
            for w in weights:
                w.requires_grad_(True)
            y = torch.from_numpy(labels)

            def loss():
                logits = network(net, x)
                return -(y * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()

            fn = torch.compile(loss) if engine == "torch_compile" else loss

            def call():
                value = fn()
                grads = torch.autograd.grad(value, weights)
                with torch.no_grad():
                    for w, g in zip(weights, grads):
                        w -= LR * g
                return float(value)

            return call

        return build
    raise ValueError(f"unknown engine {engine!r}")


def worker(case, engine, repeats, quick, reference):
    base = _vm("VmRSS")
    name, network, params, images, labels = _data(case, quick)
    row = {"case": case, "engine": engine}
    try:
        build = _builders(engine, name, network, params, images, labels)
    except (NotImplementedError, ImportError) as exc:
        return {**row, "skipped": str(exc)}
    t0 = time.perf_counter()
    call = build()
    t1 = time.perf_counter()
    out = np.asarray(call())  # the first call: jit engines compile here
    t2 = time.perf_counter()
    jit = engine in ("jax_jit", "torch_compile")
    row["build_s"] = (t2 - t0) if jit else (t1 - t0)
    row["first_call_s"] = t2 - t1
    if reference is None:
        np.save(os.environ["NETWORKS_REFERENCE"], out)
    else:
        want = np.load(reference)
        err = float(np.max(np.abs(out - want)))
        if out.shape != want.shape or not np.allclose(out, want, rtol=RTOL, atol=RTOL * 1e-2):
            return {**row, "error": f"output differs from numpy eager (max abs {err:.3g})"}
        row["max_abs_err"] = err
    call()  # warm-up (for the training step: the weights moved once more)
    times, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        call()
        cpu.append(time.process_time() - c)
        times.append(time.perf_counter() - t)
    row["eval_ms"] = statistics.median(times) * 1e3
    row["eval_cpu_ms"] = statistics.median(cpu) * 1e3
    row["peak_mib"] = _vm("VmHWM")
    row["base_mib"] = base
    return row


_SGEMM = """
import json, time, numpy as np
a, b = (np.random.default_rng(k).random((2048, 2048), dtype=np.float32) for k in (0, 1))
c = np.empty_like(a)
np.matmul(a, b, out=c)
ts = []
for _ in range(5):
    t = time.process_time()
    np.matmul(a, b, out=c)
    ts.append(time.process_time() - t)
print(json.dumps(2 * 2048**3 / sorted(ts)[2] / 1e9))
"""


def _sgemm_gflops(env):
    """OpenBLAS's sgemm on a 2048^3 product (GFLOP/s of CPU time, median of 5) in a
    process of the engines' environment: the convolutions' yardstick."""
    proc = subprocess.run([sys.executable, "-c", _SGEMM], capture_output=True, text=True, env=env)
    return round(json.loads(proc.stdout), 1) if proc.returncode == 0 else None


def _gflop(case, quick):
    """Multiply-adds (x2) of the network's convolutions and dense layers for the case."""
    from theano_dag.models import NETWORKS, Net, ShapeOps, init_params  # noqa: PLC0415

    name, batch, side, qbatch, qside = CASES[case]
    batch, side = (qbatch, qside) if quick else (batch, side)
    network, channels, _ = NETWORKS[name]
    total = 0

    class Count(ShapeOps):
        def conv(self, x, w, stride=1, pad=0):
            nonlocal total
            y = super().conv(x, w, stride, pad)
            total += 2 * int(np.prod(y)) * int(np.prod(w[1:]))
            return y

        def dense(self, x, w, b):
            nonlocal total
            total += 2 * x[0] * w[0] * w[1]
            return super().dense(x, w, b)

    params = init_params(network, (1, channels, side, side))
    network(Net(Count(), params), (batch, channels, side, side))
    return total / 1e9


def run_case(case, engines, repeats, quick, threads, timeout, engine_repeats=None):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    if threads == 1:  # XLA's CPU backend runs its Eigen kernels on one thread
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "reference.npy"
        env["NETWORKS_REFERENCE"] = str(ref)
        for engine in ["numpy_eager"] + [e for e in engines if e != "numpy_eager"]:
            n = (engine_repeats or {}).get(engine, repeats)
            cmd = [sys.executable, __file__, "--worker", case, engine, "--repeats", str(n)]
            cmd += ["--quick"] if quick else []
            cmd += ["--reference", str(ref)] if engine != "numpy_eager" else []
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
            except subprocess.TimeoutExpired:
                results[engine] = {"error": f"timed out after {timeout} s"}
                continue
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                tail = (proc.stderr or "").strip().splitlines()[-3:]
                results[engine] = {"error": f"exit {proc.returncode}: {' | '.join(tail)}"}
            else:
                results[engine] = json.loads(lines[-1])
                results[engine]["repeats"] = n
            if engine == "numpy_eager" and not ref.exists():
                break  # no reference: nothing else can be checked
        sgemm = _sgemm_gflops(env)
    line = _case_line(case, results, repeats, quick)
    if CASES[case][0] != "mnist":
        line["gflop"] = round(_gflop(case, quick), 3)
        line["sgemm_2048_gflops"] = sgemm
        # GFLOP/s of CPU time per engine, and theano_dag's share of sgemm's (same run)
        line["gflops"] = {
            e: round(line["gflop"] / t * 1e3, 1) for e, t in line["eval_cpu_ms"].items()
        }
        if sgemm and "theano_dag" in line["gflops"]:
            line["theano_dag_vs_sgemm"] = round(line["gflops"]["theano_dag"] / sgemm, 3)
    return line


def _case_line(case, results, repeats, quick):
    name, batch, side, qbatch, qside = CASES[case]
    line = {
        "benchmark": "networks",
        "case": case,
        "network": name,
        "batch": qbatch if quick else batch,
        "image": qside if quick else side,
        "repeats": repeats,
        "quick": quick,
    }
    # the timed calls of each engine (--engine-repeats gives some engines fewer)
    line["repeats_by_engine"] = {e: r["repeats"] for e, r in results.items() if "eval_ms" in r}
    for metric in ("build_s", "eval_ms", "eval_cpu_ms", "peak_mib", "base_mib"):
        line[metric] = {e: r[metric] for e, r in results.items() if metric in r}
    line["not_run"] = {
        e: r.get("error") or r.get("skipped") for e, r in results.items() if "eval_ms" not in r
    }
    ours, eager = results.get("theano_dag", {}), results.get("numpy_eager", {})
    if "eval_ms" in ours and "eval_ms" in eager:
        # CPU time: each engine runs at its own moment, which a shared machine slows unevenly
        line["eager_vs_theano_dag_time"] = eager["eval_cpu_ms"] / ours["eval_cpu_ms"]
        line["eager_vs_theano_dag_memory"] = eager["peak_mib"] / ours["peak_mib"]
    owl = OWL[name]
    line["owl"] = {
        "eval_ms_without_graph": owl["eval_wo"] * 1e3,
        "eval_ms_with_graph": owl["eval_w"] * 1e3,
        "build_s": owl["build"],
        "peak_mib_without_graph": owl["mb_wo"],
        "peak_mib_with_graph": owl["mb_w"],
        "time_ratio": owl["eval_wo"] / owl["eval_w"],
        "memory_ratio": owl["mb_wo"] / owl["mb_w"],
    }
    return line


# -- the table and the plot for docs/performance.md ---------------------------------------


def _fmt(v, digits=3):
    if v is None:
        return "-"
    if v < 1e-3:
        return "0"  # numpy eager builds nothing
    return f"{v:.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"


def _cpu_time_ratio(line):
    """numpy eager's CPU time over theano_dag's (a run without it: the wall times')."""
    cpu = line.get("eval_cpu_ms", {})
    if "numpy_eager" in cpu and "theano_dag" in cpu:
        line["eager_vs_theano_dag_time"] = cpu["numpy_eager"] / cpu["theano_dag"]
    return line


def render(lines, png_name):
    engines = [e for e in ENGINES if any(e in ln["eval_ms"] or e in ln["not_run"] for ln in lines)]
    out = []
    for metric, title in (
        ("eval_ms", "evaluation, ms (median)"),
        ("eval_cpu_ms", "evaluation, CPU ms of the process (median)"),
        ("peak_mib", "peak resident memory, MiB"),
        ("build_s", "build, s"),
    ):
        out += [
            f"**{title}**",
            "",
            "| case | " + " | ".join(engines) + " |",
            "|---" * (len(engines) + 1) + "|",
        ]
        for ln in lines:
            cells = []
            for e in engines:
                v = ln.get(metric, {}).get(e)
                cells.append(_fmt(v) if v is not None else ("n/a" if e in ln["not_run"] else "-"))
            size = f"{ln['batch']}x{ln['image']}x{ln['image']}"
            out.append(f"| {ln['case']} ({size}) | " + " | ".join(cells) + " |")
        out.append("")
    out += [
        "**timed calls per engine (the medians above are of these)**",
        "",
        "| case | " + " | ".join(engines) + " |",
        "|---" * (len(engines) + 1) + "|",
    ]
    for ln in lines:
        calls = ln.get("repeats_by_engine") or {e: ln["repeats"] for e in ln["eval_ms"]}
        cells = [str(calls[e]) if e in calls else "-" for e in engines]
        out.append(f"| {ln['case']} | " + " | ".join(cells) + " |")
    out += [
        "",
        "**numpy eager / theano_dag (CPU time, peak memory), beside Owl's without / with"
        " graph**",
        "",
        "| case | time: ours | time: Owl | memory: ours | memory: Owl |",
        "|---|---|---|---|---|",
    ]
    for ln in lines:
        owl = ln["owl"]
        out.append(
            f"| {ln['case']} | {_fmt(ln.get('eager_vs_theano_dag_time'))}x | "
            f"{owl['time_ratio']:.2f}x | {_fmt(ln.get('eager_vs_theano_dag_memory'))}x | "
            f"{owl['memory_ratio']:.2f}x |"
        )
    notes = sorted({f"{e}: {why}" for ln in lines for e, why in ln["not_run"].items() if why})
    if notes:
        out += ["", "Not run: " + "; ".join(notes) + "."]
    out += ["", f"![numpy eager / theano_dag, ours and Owl's]({png_name})", ""]
    return "\n".join(out)


def plot(lines, png):
    try:
        import matplotlib  # noqa: PLC0415 (the plot extra)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("matplotlib is not installed (pip install '.[plot]'): no plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    labels = [ln["case"] for ln in lines]
    xs = np.arange(len(lines))
    for ax, kind, title in (
        (axes[0], "time", "evaluation time"),
        (axes[1], "memory", "peak memory"),
    ):
        ours = [ln.get(f"eager_vs_theano_dag_{kind}") or 0 for ln in lines]
        owl = [ln["owl"][f"{kind}_ratio"] for ln in lines]
        ax.bar(xs - 0.2, ours, 0.4, label="numpy eager / theano_dag")
        ax.bar(xs + 0.2, owl, 0.4, label="Owl: without / with graph")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_yscale("log")
        ax.set_xticks(xs, labels, rotation=20, fontsize=8)
        ax.set_title(f"{title}: gain of the graph (above 1: the graph wins)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return True


def update_doc(doc, text):
    src = doc.read_text()
    if START not in src or END not in src:
        raise SystemExit(f"{doc}: expected the markers {START} and {END} around the networks")
    head, rest = src.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None, help="timed calls (30; 3 with --quick)")
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--engines", nargs="*", default=ENGINES, choices=ENGINES)
    ap.add_argument("--threads", type=int, default=1, help="threads per engine (the box is shared)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per engine and case")
    ap.add_argument("--worker", nargs=2, metavar=("CASE", "ENGINE"), help=argparse.SUPPRESS)
    ap.add_argument("--reference", default=None, help=argparse.SUPPRESS)
    ap.add_argument(
        "--engine-repeats",
        nargs="*",
        default=[],
        metavar="ENGINE=N",
        help="timed calls for these engines instead of --repeats (a run that must fit a time)",
    )
    ap.add_argument(
        "--render",
        type=Path,
        nargs="+",
        default=None,
        help="runs' JSON lines -> the docs (a case's last line among the files wins)",
    )
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "performance.md")
    ap.add_argument("--png", type=Path, default=ROOT / "docs" / "networks.png")
    args = ap.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 30)
    if args.worker:
        print(json.dumps(worker(*args.worker, repeats, args.quick, args.reference)), flush=True)
        return 0
    if args.render:
        by_case = {}
        for path in args.render:
            for ln in path.read_text().splitlines():
                row = json.loads(ln) if ln.startswith("{") else {}
                if row.get("benchmark") == "networks":
                    by_case[row["case"]] = _cpu_time_ratio(row)
        rows = sorted(by_case.values(), key=lambda r: list(CASES).index(r["case"]))
        plot(rows, args.png)
        update_doc(args.doc, render(rows, args.png.name))
        return 0
    engine_repeats = {}
    for item in args.engine_repeats:
        engine, _, n = item.partition("=")
        if engine not in ENGINES or not n.isdigit():
            ap.error(f"--engine-repeats: expected ENGINE=N with ENGINE in {ENGINES}, got {item}")
        engine_repeats[engine] = int(n)
    for case in args.cases:
        line = run_case(
            case, args.engines, repeats, args.quick, args.threads, args.timeout, engine_repeats
        )
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
