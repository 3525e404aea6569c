"""Real-input FFTs (issue 16): ``rfft`` then ``irfft`` of a batch of signals, and the
gradient of a spectral energy, next to numpy eager and PyTensor's ``tensor.fft``.

The transforms run numpy's pocketfft on every engine, so what this measures is what
a compiled function adds around them (the real/imaginary packing, the normalisation,
the gradient's halving of the inner frequencies). One JSON line per case: medians
over ``--repeats`` rounds (the engines take turns in each round) of ``--number``
calls, milliseconds per call (``<engine>_ms``), and each engine's ratio to numpy eager
(``<engine>_vs_numpy``).

Run: ``.venv/bin/python benchmarks/fft.py`` (``PYTHONPATH=.`` for another checkout).
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
from theano_dag.gradient import grad
from theano_dag.tensor import fft


def _numpy_roundtrip(a):
    s = np.fft.rfft(a, axis=1)
    packed = np.stack([s.real, s.imag], axis=-1)
    return np.fft.irfft(packed[..., 0] + 1j * packed[..., 1], n=a.shape[1], axis=1)


def _numpy_energy_grad(a):
    # d/da of sum |rfft(a)|^2 (the one-sided spectrum): 2 * S, the inner frequencies
    # (standing for their negatives too) halved, through the unnormalized inverse.
    s = np.fft.rfft(a, axis=1)
    n = a.shape[1]
    h = np.full(s.shape[1], 0.5)
    h[0] = 1.0
    if n % 2 == 0:
        h[-1] = 1.0
    return np.fft.irfft(2 * s * h, n=n, axis=1) * n


def _time_all(fns, arg, number, repeats):
    for fn in fns.values():
        fn(arg)
    runs = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            runs[name].append(timeit.timeit(lambda fn=fn: fn(arg), number=number) / number)
    return {name: statistics.median(r) * 1e3 for name, r in runs.items()}


def _pytensor(case):
    try:
        import pytensor  # a peer, measured when installed
        import pytensor.tensor as pt
        from pytensor.tensor import fft as pfft
    except ImportError:
        return {}
    x = pt.matrix("x", dtype="float64")
    spectrum = pfft.rfft(x)
    if case == "roundtrip":
        out = pfft.irfft(spectrum)
    else:
        out = pytensor.grad((spectrum**2).sum(), x)
    return {"pytensor": pytensor.function([x], out)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--number", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    a = np.random.default_rng(0).standard_normal((args.batch, args.length))
    x = tt.dmatrix("x")
    spectrum = fft.rfft(x)
    cases = {
        "roundtrip": (fft.irfft(spectrum), _numpy_roundtrip),
        "energy_grad": (grad((spectrum**2).sum(), x), _numpy_energy_grad),
    }
    for case, (out, eager) in cases.items():
        fns = {"numpy": eager, "theano_dag": function([x], out), **_pytensor(case)}
        ref = fns["theano_dag"](a)
        for name, fn in fns.items():
            assert np.allclose(fn(a), ref), (case, name)
        ms = _time_all(fns, a, args.number, args.repeats)
        row = {"case": case, "shape": [args.batch, args.length], "arch": platform.machine()}
        row.update({f"{k}_ms": round(v, 4) for k, v in ms.items()})
        row.update(
            {f"{k}_vs_numpy": round(v / ms["numpy"], 2) for k, v in ms.items() if k != "numpy"}
        )
        print(json.dumps(row))


if __name__ == "__main__":
    main()
