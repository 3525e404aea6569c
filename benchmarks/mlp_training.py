"""MLP training step (issue 5, case 3): 784-512-512-10, ReLU, batch 256, float32, SGD.

One training step: forward pass, softmax cross-entropy averaged over the batch, the
gradient of every weight and bias, and the SGD update ``p <- p - lr * g`` of all six
parameters. Engines, measured in the same run from the same initial weights and the
same batch:

* ``theano_dag``: ``theano_dag.function([x, y], cost, updates=...)`` in the default
  mode (FAST_RUN, the CPU engine), parameters in shared variables;
* ``pytensor_c``: the same graph in PyTensor with ``mode="CVM"`` (its C backend);
* ``pytensor_numba``: the same graph in PyTensor's default mode (NUMBA);
* ``jax_jit``: a hand-written step function, ``jax.jit`` of ``jax.value_and_grad``,
  returning the loss and the new parameters (blocked on before the clock stops);
* ``numpy``: forward and backward written by hand in numpy, updates in place.

Before timing, each engine takes two steps from the initial weights and the losses
and the parameters after those steps are compared with the numpy ones (the
``*_loss_diff`` and ``*_param_diff`` fields, max abs difference). An engine whose
results disagree beyond float32 tolerance reports an error instead of a time: a
benchmark that computes something different is worthless.

Timing: ``--repeats`` rounds; in each round every engine runs ``--steps`` steps in
turn (interleaved, so load on a shared machine spreads over all of them); the
figure is the median over rounds of ms per step. One JSON line with every engine
side by side and the ratios of each to JAX and to numpy; a peer that cannot be
imported gets a ``{"skipped": ...}`` line and a ``*_skipped`` field.

Target (issue 5, 2-core machine: JAX jit 4.8 ms, PyTensor NUMBA 6.8 ms, numpy
8.3 ms, PyTensor C 13.2 ms): theano_dag at or below JAX.

Run: ``.venv/bin/python benchmarks/mlp_training.py [--steps 30] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

SIZES = (784, 512, 512, 10)
BATCH = 256
LR = np.float32(0.01)
# Agreement of float32 results computed in different orders (BLAS blocking, fused
# reductions): losses are O(1), parameters O(0.1).
LOSS_TOL = 1e-4
PARAM_TOL = 1e-5


def make_data(seed=0):
    """Initial parameters [w0, b0, w1, b1, w2, b2] (He init) and one batch (x, one-hot y)."""
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        params.append(rng.normal(0, np.sqrt(2.0 / n_in), (n_in, n_out)).astype("float32"))
        params.append(rng.normal(0, 0.01, n_out).astype("float32"))
    x = rng.random((BATCH, SIZES[0]), dtype="float32")
    y = np.eye(SIZES[-1], dtype="float32")[rng.integers(0, SIZES[-1], BATCH)]
    return params, x, y


# ---- engines: each builder returns (step, get_params, compile_s); step(x, y) -> loss


def build_numpy(init):
    p = [a.copy() for a in init]

    def step(x, y):
        w0, b0, w1, b1, w2, b2 = p
        z1 = x @ w0 + b0
        h1 = np.maximum(z1, 0)
        z2 = h1 @ w1 + b1
        h2 = np.maximum(z2, 0)
        z3 = h2 @ w2 + b2
        z3 -= z3.max(axis=1, keepdims=True)
        e = np.exp(z3)
        s = e.sum(axis=1, keepdims=True)
        prob = e / s
        loss = -np.mean(np.sum(y * (z3 - np.log(s)), axis=1))
        # d loss / d z3 for softmax + cross-entropy (rows of y need not sum to 1)
        dz3 = (prob * y.sum(axis=1, keepdims=True) - y) / np.float32(len(x))
        dh2 = dz3 @ w2.T
        dz2 = dh2 * (z2 > 0)
        dh1 = dz2 @ w1.T
        dz1 = dh1 * (z1 > 0)
        grads = (x.T @ dz1, dz1.sum(0), h1.T @ dz2, dz2.sum(0), h2.T @ dz3, dz3.sum(0))
        for a, g in zip(p, grads):
            a -= LR * g
        return loss

    return step, lambda: p, 0.0


def build_theano_dag(init, mode=None):
    import theano_dag
    import theano_dag.tensor as tt
    from theano_dag.tensor import nnet

    params = [theano_dag.shared(a.copy(), name=n) for a, n in zip(init, _names())]
    x, y = tt.fmatrix("x"), tt.fmatrix("y")
    h = x
    for k in (0, 2):
        h = nnet.relu(tt.dot(h, params[k]) + params[k + 1])
    prob = nnet.softmax(tt.dot(h, params[4]) + params[5])
    cost = nnet.categorical_crossentropy(prob, y).mean()
    grads = theano_dag.grad(cost, params)
    t0 = time.perf_counter()
    f = theano_dag.function(
        [x, y], cost, updates=[(p, p - LR * g) for p, g in zip(params, grads)], mode=mode
    )
    compile_s = time.perf_counter() - t0
    return f, lambda: [p.get_value() for p in params], compile_s


def build_pytensor(init, mode):
    import pytensor
    import pytensor.tensor as pt
    from pytensor.tensor.special import softmax

    params = [pytensor.shared(a.copy(), name=n) for a, n in zip(init, _names())]
    x, y = pt.fmatrix("x"), pt.fmatrix("y")
    h = x
    for k in (0, 2):
        h = pt.maximum(pt.dot(h, params[k]) + params[k + 1], 0)
    prob = softmax(pt.dot(h, params[4]) + params[5], axis=-1)
    cost = -pt.mean(pt.sum(y * pt.log(prob), axis=1))
    grads = pytensor.grad(cost, params)
    t0 = time.perf_counter()
    f = pytensor.function(
        [x, y], cost, updates=[(p, p - LR * g) for p, g in zip(params, grads)], mode=mode
    )
    compile_s = time.perf_counter() - t0
    return f, lambda: [p.get_value() for p in params], compile_s


def build_jax(init):
    import jax
    import jax.numpy as jnp

    def loss_fn(p, x, y):
        w0, b0, w1, b1, w2, b2 = p
        h = jax.nn.relu(x @ w0 + b0)
        h = jax.nn.relu(h @ w1 + b1)
        logp = jax.nn.log_softmax(h @ w2 + b2, axis=-1)
        return -jnp.mean(jnp.sum(y * logp, axis=1))

    @jax.jit
    def train_step(p, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return loss, tuple(a - LR * b for a, b in zip(p, g))

    state = {"p": tuple(jnp.asarray(a) for a in init)}

    def step(x, y):
        loss, state["p"] = train_step(state["p"], x, y)
        jax.block_until_ready(state["p"])
        return loss.block_until_ready()

    t0 = time.perf_counter()
    spec_x = jax.ShapeDtypeStruct((BATCH, SIZES[0]), jnp.float32)
    spec_y = jax.ShapeDtypeStruct((BATCH, SIZES[-1]), jnp.float32)
    # Compile ahead of time so that the compile cost is reported; the jit cache reuses it.
    train_step.lower(state["p"], spec_x, spec_y).compile()
    compile_s = time.perf_counter() - t0
    return step, lambda: [np.asarray(a) for a in state["p"]], compile_s


def _names():
    return ["w0", "b0", "w1", "b1", "w2", "b2"]


def engines():
    """name -> builder(init); peers only when importable (else name -> skip reason)."""
    out = {"theano_dag": build_theano_dag, "numpy": build_numpy}
    try:
        import pytensor  # noqa: F401

        out["pytensor_c"] = lambda init: build_pytensor(init, "CVM")
        out["pytensor_numba"] = lambda init: build_pytensor(init, None)
    except ImportError as e:
        out["pytensor_c"] = out["pytensor_numba"] = f"pytensor not importable: {e}"
    try:
        import jax  # noqa: F401

        out["jax_jit"] = build_jax
    except ImportError as e:
        out["jax_jit"] = f"jax not importable: {e}"
    return out


def check_agreement(name, built, reference, x, y):
    """Two steps from the initial weights; max abs differences to the numpy engine."""
    step, get_params, _ = built
    losses = [float(step(x, y)), float(step(x, y))]
    loss_diff = max(abs(a - b) for a, b in zip(losses, reference["losses"]))
    param_diff = max(
        float(np.max(np.abs(np.asarray(a) - b))) for a, b in zip(get_params(), reference["params"])
    )
    ok = loss_diff <= LOSS_TOL and param_diff <= PARAM_TOL
    return losses, loss_diff, param_diff, ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30, help="steps per timed round")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds (median taken)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps before the rounds")
    args = ap.parse_args(argv)
    init, x, y = make_data()

    ref_step, ref_params, _ = build_numpy(init)
    reference = {"losses": [float(ref_step(x, y)), float(ref_step(x, y))]}
    reference["params"] = [a.copy() for a in ref_params()]

    row = {
        "benchmark": "mlp_training",
        "case": "784-512-512-10 relu b256 float32 sgd",
        "unit": "ms/step",
        "numpy_loss_step1": round(reference["losses"][0], 6),
    }
    steps = {}
    for name, builder in engines().items():
        if isinstance(builder, str):
            row[f"{name}_skipped"] = builder
            print(json.dumps({"benchmark": "mlp_training", "skipped": f"{name}: {builder}"}))
            continue
        try:
            built = builder(init)
            losses, loss_diff, param_diff, ok = check_agreement(name, built, reference, x, y)
        except Exception as e:  # a peer that cannot build this graph is reported, not fatal
            row[f"{name}_error"] = f"{type(e).__name__}: {e}"[:300]
            continue
        if name != "numpy":  # the reference itself
            row[f"{name}_compile_s"] = round(built[2], 3)
            row[f"{name}_loss_diff"] = float(f"{loss_diff:.3g}")
            row[f"{name}_param_diff"] = float(f"{param_diff:.3g}")
        if not ok:
            row[f"{name}_error"] = (
                f"disagrees with numpy: loss diff {loss_diff:.3g}, param diff {param_diff:.3g}"
            )
            continue
        for _ in range(args.warmup):
            built[0](x, y)
        steps[name] = built[0]

    times = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step(x, y)
            times[name].append((time.perf_counter() - t0) / args.steps * 1e3)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    for name, ms in med.items():
        row[f"{name}_ms"] = round(ms, 3)
    for name, ms in med.items():
        for peer in ("jax_jit", "numpy"):
            if peer in med and peer != name:
                row[f"{name}_vs_{peer}"] = round(ms / med[peer], 3)
    row["target"] = "theano_dag_ms <= jax_jit_ms"
    if "theano_dag" in med and "jax_jit" in med:
        row["meets_target"] = med["theano_dag"] <= med["jax_jit"]
    row["machine"] = f"{platform.machine()} {os.cpu_count()} cpus numpy {np.__version__}"
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
