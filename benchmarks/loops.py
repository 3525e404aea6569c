"""Loops (issue 15): ``scan`` per step, against a numpy loop, PyTensor's scan and JAX.

Cases, each one JSON line:

- ``rnn_forward``: ``h = tanh(h * w + x_t)`` on a length-8 state over ``--steps`` steps
  (the issue's per-iteration overhead case);
- ``rnn_forward_backward``: the same loop's cost ``sum(h[-1])`` and its gradient with
  respect to ``w`` (backpropagation through time);
- ``cumsum``: ``acc + x_t`` over ``--steps`` scalars;
- ``lstm_train``: one training step of an LSTM (hidden ``--hidden``, batch ``--batch``,
  ``--lstm-steps`` steps, float32): forward, backpropagation through time, SGD on the
  weights; milliseconds per training step, each library's time to first result (building
  and compiling the function and its first call, which compiles the rest: all of it for
  JAX) and its compile time (that less one step's median). The numpy peer is the
  hand-written forward and backward pass.

Each engine's figure is the median over ``--repeats`` rounds (the engines take turns in
each round) of one call, in microseconds per step, with its ratio to the numpy loop.
Peers, when importable: PyTensor's scan (``mode="CVM"``, its C scan) and JAX's
``lax.scan`` under ``jit``. Targets (issue 15): ``rnn_forward`` at most a third of
PyTensor's per step, and below JAX; ``lstm_train`` at or below JAX, compiled at least 10x
faster than PyTensor.

Run: ``.venv/bin/python benchmarks/loops.py [--steps 10000] [--repeats 5] [--hidden 256]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag.engines.cpu.native.ckernel import compile_mode

STATE = 8


def _numpy_cases():
    def rnn(xs, w, h0):
        h = h0
        for x_t in xs:
            h = np.tanh(h * w + x_t)
        return h

    def rnn_grad(xs, w, h0):
        hs = [h0]
        for x_t in xs:
            hs.append(np.tanh(hs[-1] * w + x_t))
        g_h, g_w = np.ones_like(h0), np.zeros_like(w)
        for t in range(len(xs), 0, -1):
            g_pre = g_h * (1 - hs[t] ** 2)
            g_w += g_pre * hs[t - 1]
            g_h = g_pre * w
        return hs[-1].sum(), g_w

    def cumsum(xs):
        acc, out = 0.0, np.empty(len(xs))
        for t, v in enumerate(xs):
            acc = acc + v
            out[t] = acc
        return out

    return {"rnn_forward": rnn, "rnn_forward_backward": rnn_grad, "cumsum": cumsum}


def _symbolic(lib, scan):
    """The three cases built with a Theano-like library (theano_dag or PyTensor)."""
    xs, w, h0 = lib.dmatrix("xs"), lib.dvector("w"), lib.dvector("h0")
    hs, _ = scan(
        lambda x_t, h, w: lib.tanh(h * w + x_t), sequences=xs, outputs_info=h0, non_sequences=w
    )
    cost = hs[-1].sum()
    v = lib.dvector("v")
    sums, _ = scan(
        lambda x_t, acc: acc + x_t, sequences=v, outputs_info=lib.as_tensor_variable(np.float64(0))
    )
    return {
        "rnn_forward": ([xs, w, h0], hs[-1]),
        "rnn_forward_backward": ([xs, w, h0], None, cost, w),
        "cumsum": ([v], sums),
    }


def _theano_dag_fns():
    cases = _symbolic(tt, theano_dag.scan)
    out = {}
    for name, spec in cases.items():
        if name == "rnn_forward_backward":
            ins, _, cost, w = spec
            out[name] = theano_dag.function(ins, [cost, theano_dag.grad(cost, w)])
        else:
            out[name] = theano_dag.function(*spec)
    return out


def _pytensor_fns():
    try:
        import pytensor
        import pytensor.tensor as pt
    except Exception:  # not installed
        return {}
    cases = _symbolic(pt, pytensor.scan)
    out = {}
    for name, spec in cases.items():
        if name == "rnn_forward_backward":
            ins, _, cost, w = spec
            out[name] = pytensor.function(ins, [cost, pytensor.grad(cost, w)], mode="CVM")
        else:
            out[name] = pytensor.function(*spec, mode="CVM")
    return out


def _jax_fns():
    try:
        import jax
        import jax.numpy as jnp
    except Exception:  # not installed
        return {}
    jax.config.update("jax_enable_x64", True)

    def rnn(xs, w, h0):
        h, _ = jax.lax.scan(lambda h, x_t: (jnp.tanh(h * w + x_t), None), h0, xs)
        return h

    def cost(xs, w, h0):
        return rnn(xs, w, h0).sum()

    def cumsum(v):
        _, out = jax.lax.scan(lambda acc, x: (acc + x, acc + x), 0.0, v)
        return out

    fns = {
        "rnn_forward": jax.jit(rnn),
        "rnn_forward_backward": jax.jit(jax.value_and_grad(cost, argnums=1)),
        "cumsum": jax.jit(cumsum),
    }

    def blocking(f):
        return lambda *a: jax.block_until_ready(f(*a))

    return {k: blocking(f) for k, f in fns.items()}


# -- the LSTM training step ------------------------------------------------------------


def _lstm_params(rng, n_in, hidden):
    scale = 1.0 / np.sqrt(hidden)
    return {
        "W": (rng.normal(size=(n_in, 4 * hidden)) * scale).astype("float32"),
        "U": (rng.normal(size=(hidden, 4 * hidden)) * scale).astype("float32"),
        "b": np.zeros(4 * hidden, dtype="float32"),
    }


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _numpy_lstm(params, lr):
    """A training step written by hand: forward, backpropagation through time, SGD."""
    W, U, b = params["W"], params["U"], params["b"]
    H = U.shape[0]

    def step(xs, y):
        T, B = xs.shape[0], xs.shape[1]
        h, c = np.zeros((B, H), "float32"), np.zeros((B, H), "float32")
        hs, cs, gates = [h], [c], []
        for t in range(T):
            z = xs[t] @ W + h @ U + b
            i, f, o = _sigmoid(z[:, :H]), _sigmoid(z[:, H : 2 * H]), _sigmoid(z[:, 2 * H : 3 * H])
            g = np.tanh(z[:, 3 * H :])
            c = f * c + i * g
            h = o * np.tanh(c)
            hs.append(h)
            cs.append(c)
            gates.append((i, f, o, g))
        cost = float((h * y).sum())
        dW, dU, db = np.zeros_like(W), np.zeros_like(U), np.zeros_like(b)
        dh, dc = y, np.zeros_like(c)
        for t in range(T - 1, -1, -1):
            i, f, o, g = gates[t]
            tc = np.tanh(cs[t + 1])
            do = dh * tc
            dc = dc + dh * o * (1 - tc * tc)
            dz = np.concatenate(
                [dc * g * i * (1 - i), dc * cs[t] * f * (1 - f), do * o * (1 - o),
                 dc * i * (1 - g * g)], axis=1)  # fmt: skip
            dW += xs[t].T @ dz
            dU += hs[t].T @ dz
            db += dz.sum(0)
            dh = dz @ U.T
            dc = dc * f
        for p, d in ((W, dW), (U, dU), (b, db)):
            p -= np.float32(lr) * d
        return cost

    return step


def _lstm_symbolic(lib, scan, shared, grad, params, lr):
    """The training step with a Theano-like library: ``(inputs, cost, updates)``."""
    W, U, b = (shared(params[k].copy(), name=k) for k in ("W", "U", "b"))
    H = params["U"].shape[0]
    xs, y = lib.tensor3("xs", dtype="float32"), lib.matrix("y", dtype="float32")

    def step(x_t, h, c, W, U, b):
        z = lib.dot(x_t, W) + lib.dot(h, U) + b
        i, f = lib.sigmoid(z[:, :H]), lib.sigmoid(z[:, H : 2 * H])
        o, g = lib.sigmoid(z[:, 2 * H : 3 * H]), lib.tanh(z[:, 3 * H :])
        c_new = f * c + i * g
        return o * lib.tanh(c_new), c_new

    zeros = lib.zeros((xs.shape[1], H), dtype="float32")
    (hs, _), _ = scan(step, sequences=xs, outputs_info=[zeros, zeros], non_sequences=[W, U, b])
    cost = (hs[-1] * y).sum()
    grads = grad(cost, [W, U, b])
    return [xs, y], cost, [(p, p - np.float32(lr) * g) for p, g in zip((W, U, b), grads)]


def _lstm_fns(params, lr):
    """``{engine: (training step, compile seconds)}`` for every library importable."""
    out = {"numpy_loop": (_numpy_lstm({k: v.copy() for k, v in params.items()}, lr), 0.0)}
    t0 = time.perf_counter()
    lib = (tt, theano_dag.scan, theano_dag.shared, theano_dag.grad)
    ins, cost, updates = _lstm_symbolic(*lib, params, lr)
    f = theano_dag.function(ins, cost, updates=updates)
    out["theano_dag"] = (f, time.perf_counter() - t0)
    try:
        import pytensor
        import pytensor.tensor as pt
    except Exception:  # not installed
        pytensor = None
    if pytensor is not None:
        t0 = time.perf_counter()
        lib = (pt, pytensor.scan, pytensor.shared, pytensor.grad)
        ins, cost, updates = _lstm_symbolic(*lib, params, lr)
        f = pytensor.function(ins, cost, updates=updates, mode="CVM")
        out["pytensor_scan_c"] = (f, time.perf_counter() - t0)
    jax_step = _jax_lstm(params, lr)
    if jax_step is not None:
        out["jax_lax_scan_jit"] = (jax_step, 0.0)  # compiled on the first call
    return out


def _jax_lstm(params, lr):
    try:
        import jax
        import jax.numpy as jnp
    except Exception:  # not installed
        return None
    H = params["U"].shape[0]

    def cost(p, xs, y):
        def step(carry, x_t):
            h, c = carry
            z = x_t @ p["W"] + h @ p["U"] + p["b"]
            i, f = jax.nn.sigmoid(z[:, :H]), jax.nn.sigmoid(z[:, H : 2 * H])
            o, g = jax.nn.sigmoid(z[:, 2 * H : 3 * H]), jnp.tanh(z[:, 3 * H :])
            c = f * c + i * g
            return (o * jnp.tanh(c), c), None

        zeros = jnp.zeros((xs.shape[1], H), jnp.float32)
        (h, _), _ = jax.lax.scan(step, (zeros, zeros), xs)
        return (h * y).sum()

    @jax.jit
    def train(p, xs, y):
        value, grads = jax.value_and_grad(cost)(p, xs, y)
        return value, jax.tree_util.tree_map(lambda w, g: w - lr * g, p, grads)

    state = {"p": {k: jnp.asarray(v) for k, v in params.items()}}

    def step(xs, y):
        value, state["p"] = train(state["p"], xs, y)
        return float(jax.block_until_ready(value))

    return step


def lstm_case(args):
    """One JSON row: the LSTM training step, milliseconds per step and compile seconds."""
    rng = np.random.default_rng(1)
    params = _lstm_params(rng, args.hidden, args.hidden)
    lr = 1e-3
    xs = rng.normal(size=(args.lstm_steps, args.batch, args.hidden)).astype("float32")
    y = rng.normal(size=(args.batch, args.hidden)).astype("float32")
    fns = _lstm_fns(params, lr)
    # Every library starts from the same weights: its first step's cost is the same. The
    # first call compiles what is left (JAX all of it; the inner graphs, kernels): it
    # counts in the compile time, "time to first result".
    costs = {}
    for k, (f, build_s) in fns.items():
        t0 = time.perf_counter()
        costs[k] = float(f(xs, y))
        fns[k] = (f, build_s + time.perf_counter() - t0)
    times = _time({k: f for k, (f, _) in fns.items()}, (xs, y), args.repeats, warm=False)
    row = {
        "benchmark": "loops",
        "case": "lstm_train",
        "steps": args.lstm_steps,
        "hidden": args.hidden,
        "batch": args.batch,
        "dtype": "float32",
    }
    for k, t in times.items():
        row[f"{k}_ms_per_train_step"] = round(t * 1e3, 2)
    for k, t in times.items():
        if k != "numpy_loop":
            row[f"{k}_vs_numpy"] = round(t / times["numpy_loop"], 3)
    for peer in ("pytensor_scan_c", "jax_lax_scan_jit"):
        if peer in times:
            row[f"theano_dag_vs_{peer}"] = round(times["theano_dag"] / times[peer], 3)
    for k, (_, compile_s) in fns.items():
        if k != "numpy_loop":
            row[f"{k}_first_result_s"] = round(compile_s, 2)
    # Compile time: the time to first result less one step's median, which the first
    # result includes (the call that finishes compiling also trains once).
    compile_s = {k: c - times[k] for k, (_, c) in fns.items() if k != "numpy_loop"}
    for k, c in compile_s.items():
        row[f"{k}_compile_s"] = round(c, 2)
    if "pytensor_scan_c" in fns:
        row["pytensor_first_result_vs_theano_dag"] = round(
            fns["pytensor_scan_c"][1] / fns["theano_dag"][1], 1
        )
        row["pytensor_compile_vs_theano_dag"] = round(
            compile_s["pytensor_scan_c"] / compile_s["theano_dag"], 1
        )
    row["machine"] = f"{platform.machine()} {platform.python_version()} numpy {np.__version__}"
    print(json.dumps(row), flush=True)


def _time(fns, args, repeats, warm=True):
    for f in fns.values() if warm else ():
        f(*args)  # warm: compiles
    runs = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f(*args)
            runs[k].append(time.perf_counter() - t0)
    return {k: statistics.median(r) for k, r in runs.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=256, help="the LSTM's hidden size")
    ap.add_argument("--batch", type=int, default=32, help="the LSTM's batch")
    ap.add_argument("--lstm-steps", type=int, default=100, help="the LSTM's steps")
    args = ap.parse_args(argv)
    # Kernels are built before the first call returns (not in the background while numpy
    # runs the first calls): the timed calls run the C kernels.
    with compile_mode("sync"):
        _run(args)


def _run(args):
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(args.steps, STATE)) * 0.1
    w, h0 = rng.normal(size=STATE) * 0.5, np.zeros(STATE)
    v = rng.normal(size=args.steps)
    inputs = {"rnn_forward": (xs, w, h0), "rnn_forward_backward": (xs, w, h0), "cumsum": (v,)}
    engines = {
        "numpy_loop": _numpy_cases(),
        "theano_dag": _theano_dag_fns(),
        "pytensor_scan_c": _pytensor_fns(),
        "jax_lax_scan_jit": _jax_fns(),
    }
    for case, case_args in inputs.items():
        fns = {e: table[case] for e, table in engines.items() if case in table}
        ref = fns["numpy_loop"](*case_args)
        got = fns["theano_dag"](*case_args)
        for a, b in zip(
            np.atleast_1d(ref) if case != "rnn_forward_backward" else ref,
            np.atleast_1d(got) if case != "rnn_forward_backward" else got,
        ):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        times = _time(fns, case_args, args.repeats)
        row = {
            "benchmark": "loops",
            "case": case,
            "steps": args.steps,
            "state": STATE,
            "dtype": "float64",
        }
        for k, t in times.items():
            row[f"{k}_us_per_step"] = round(t / args.steps * 1e6, 3)
        for k, t in times.items():
            if k != "numpy_loop":
                row[f"{k}_vs_numpy"] = round(t / times["numpy_loop"], 3)
        for peer in ("pytensor_scan_c", "jax_lax_scan_jit"):
            if peer in times:
                row[f"theano_dag_vs_{peer}"] = round(times["theano_dag"] / times[peer], 3)
        row["machine"] = f"{platform.machine()} {platform.python_version()} numpy {np.__version__}"
        print(json.dumps(row), flush=True)
    lstm_case(args)


if __name__ == "__main__":
    main()
