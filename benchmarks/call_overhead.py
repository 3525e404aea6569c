"""Call overhead (issue 5, case 1): ``f(x) = x + 1`` and a 10-op chain on a length-10 vector.

What a call costs when the arrays are tiny: the compiled function's own work
(input checks, dispatch, output handling) next to the numpy calls themselves.
Peers, measured in the same run: numpy eager always; PyTensor's C backend
(``mode="CVM"``) and JAX's jit only when importable. Each case prints one JSON
line: medians over ``--repeats`` rounds (the engines take turns within a round)
of ``--number`` calls, in microseconds per call, and each engine's ratio to
numpy eager.

Targets (issue 5, measured on the issue's 2-core machine where numpy eager took
0.9 us): at most 2 us for ``x + 1`` and 3 us for the 10-op chain. On another
machine compare the ratios to numpy eager (the target ratios are 2.2 and 3.3
times eager ``x + 1``).

Issue 14 asks for ``x + 1`` at most 1.2 times numpy eager's call (the row's
``theano_dag_vs_numpy``). What a call of ``x + 1`` runs is the CPU engine's generated
call (``f.fn.source()``), reached through ``Function``'s C-level ``__call__`` getter and
the context in which numpy ignores floating-point errors.

Run: ``.venv/bin/python benchmarks/call_overhead.py`` (it imports the installed
``theano_dag``; from another checkout, put that checkout first: ``PYTHONPATH=.``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import timeit

import numpy as np

import theano_dag.tensor as tt
from theano_dag.compile.function import function

N = 10


def _chain_np(a):
    # The same 10 ops as the symbolic chain below.
    y = a + 1.0
    y = y * 0.5
    y = np.exp(y)
    y = y - 2.0
    y = np.tanh(y)
    y = y * y
    y = y + a
    y = np.sin(y)
    y = y / 3.0
    return np.abs(y)


def _chain_sym(x, lib):
    y = x + 1.0
    y = y * 0.5
    y = lib.exp(y)
    y = y - 2.0
    y = lib.tanh(y)
    y = y * y
    y = y + x
    y = lib.sin(y)
    y = y / 3.0
    return abs(y)


def _time_all(fns, arg, number, repeats):
    """Median microseconds per call of each callable; the callables take turns in each
    round, so that a machine busy for a while slows all of them alike."""
    for fn in fns.values():
        fn(arg)  # warm: plans, compiles
    runs = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            runs[name].append(timeit.timeit(lambda fn=fn: fn(arg), number=number) / number)
    return {name: statistics.median(r) * 1e6 for name, r in runs.items()}


def _peers(case):
    """Callables of the peers that are installed: name -> f(x)."""
    out = {}
    try:
        import pytensor
        import pytensor.tensor as pt

        x = pt.dvector("x")
        y = x + 1.0 if case == "x+1" else _chain_sym(x, pt)
        out["pytensor_c"] = pytensor.function([x], y, mode="CVM")
    except Exception:  # not installed, or no C compiler for it
        pass
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        f = jax.jit((lambda a: a + 1.0) if case == "x+1" else (lambda a: _chain_sym(a, jnp)))

        def call(a, f=f):
            return f(a).block_until_ready()

        out["jax_jit"] = call
    except Exception:
        pass
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    a = np.linspace(0.0, 1.0, N)
    x = tt.dvector("x")
    cases = {
        "x+1": (x + 1.0, lambda v: v + 1.0),
        "10-op chain": (_chain_sym(x, tt), _chain_np),
    }
    eager_x1 = None
    for name, (sym, eager) in cases.items():
        f = function([x], sym)
        np.testing.assert_allclose(f(a), eager(a), rtol=1e-12)
        row = {"benchmark": "call_overhead", "case": name, "n": N, "dtype": "float64"}
        fns = {"numpy_eager": eager, "theano_dag": f, **_peers(name)}
        times = _time_all(fns, a, args.number, args.repeats)
        t_numpy = times["numpy_eager"]
        if eager_x1 is None:
            eager_x1 = t_numpy
        for key, t in times.items():
            row[f"{key}_us"] = round(t, 3)
        for key in times:
            if key != "numpy_eager":
                row[f"{key}_vs_numpy"] = round(times[key] / t_numpy, 2)
        # The targets, as multiples of eager ``x + 1`` on this machine.
        target = 2.0 if name == "x+1" else 3.0
        row["target_us_scaled"] = round(target / 0.9 * eager_x1, 3)
        row["meets_target"] = row["theano_dag_us"] <= row["target_us_scaled"]
        if name == "x+1":
            row["meets_issue14_ratio_1.2"] = row["theano_dag_vs_numpy"] <= 1.2
        row["machine"] = f"{platform.machine()} {platform.python_version()} numpy {np.__version__}"
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
