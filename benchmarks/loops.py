"""Loops (issue 15): ``scan`` per step, against a numpy loop, PyTensor's scan and JAX.

Cases, each one JSON line:

- ``rnn_forward``: ``h = tanh(h * w + x_t)`` on a length-8 state over ``--steps`` steps
  (the issue's per-iteration overhead case);
- ``rnn_forward_backward``: the same loop's cost ``sum(h[-1])`` and its gradient with
  respect to ``w`` (backpropagation through time);
- ``cumsum``: ``acc + x_t`` over ``--steps`` scalars.

Each engine's figure is the median over ``--repeats`` rounds (the engines take turns in
each round) of one call, in microseconds per step, with its ratio to the numpy loop.
Peers, when importable: PyTensor's scan (``mode="CVM"``, its C scan) and JAX's
``lax.scan`` under ``jit``. Targets (issue 15): ``rnn_forward`` at most a third of
PyTensor's per step, and below JAX.

Run: ``.venv/bin/python benchmarks/loops.py [--steps 10000] [--repeats 5]``.
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


def _time(fns, args, repeats):
    for f in fns.values():
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
    args = ap.parse_args(argv)
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


if __name__ == "__main__":
    main()
