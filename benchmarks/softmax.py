"""A softmax, a log-softmax and the softmax's gradient alone, per call, against numpy and
PyTensor.

One function per case: ``softmax(x)``, ``log_softmax(x)`` or the gradient of
``sum(softmax(x) * w)`` wrt ``x`` (a SoftmaxGrad), along the last axis of an input of
``(500, 2)`` (a two-component mixture's weights per observation, as PyMC3's
NormalMixture has them), ``(256, 10)`` (a classifier's batch) and ``(64, 1000)``, in float32
and float64. Timed: theano_dag's default mode (C steps once its kernels are loaded),
numpy's stable expression (the max subtracted, as the ops' ``perform`` computes it), and
PyTensor's C backend (``Mode(linker="cvm", optimizer="fast_run")``) when it is installed.
The callables take turns in each round (``time_calls``), so a machine busy for a while
slows all of them alike. Every peer's values are checked against numpy's first.

One JSON line per case: medians over ``--repeats`` rounds of ``--number`` calls, in
microseconds per call. Run with ``PYTHONPATH`` set to another tree to time that tree's
theano_dag (the before of a change).

Run: ``.venv/bin/python benchmarks/softmax.py [--number 500] [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag.engines.cpu.native.ckernel import wait_for_kernels
from theano_dag.tensor.nnet import nnet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _small_graph_cases import time_calls  # noqa: E402

SHAPES = [(500, 2), (256, 10), (64, 1000)]
OPS = ["softmax", "log_softmax", "softmax_grad"]


def _numpy(op, w):
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    if op == "softmax":
        return softmax
    if op == "log_softmax":
        return lambda x: (z := x - x.max(axis=-1, keepdims=True)) - np.log(
            np.exp(z).sum(axis=-1, keepdims=True)
        )

    def grad(x):
        sm = softmax(x)
        return sm * (w - (w * sm).sum(axis=-1, keepdims=True))

    return grad


def _graph(lib, op, x, w):
    """``op`` of ``x`` in library ``lib`` (``tt`` and ``grad`` of theano_dag or PyTensor)."""
    if op == "softmax":
        return lib.softmax(x, axis=-1)
    if op == "log_softmax":
        return lib.log_softmax(x, axis=-1)
    return lib.grad((lib.softmax(x, axis=-1) * w).sum(), x)


def _theano_dag():
    return types.SimpleNamespace(
        softmax=nnet.softmax,
        log_softmax=nnet.log_softmax,
        grad=theano_dag.grad,
        function=lambda i, o: theano_dag.function(i, o),
        tensor=lambda d: tt.matrix("x", dtype=d),
    )


def _pytensor():
    try:
        import pytensor  # noqa: PLC0415 (optional peer: the bench extra)
        import pytensor.tensor as pt  # noqa: PLC0415
        from pytensor.compile.mode import Mode  # noqa: PLC0415
        from pytensor.tensor.special import log_softmax, softmax  # noqa: PLC0415
    except ImportError:
        return None
    mode = Mode(linker="cvm", optimizer="fast_run")
    return types.SimpleNamespace(
        softmax=softmax,
        log_softmax=log_softmax,
        grad=pytensor.grad,
        function=lambda i, o: pytensor.function(i, o, mode=mode),
        tensor=lambda d: pt.matrix("x", dtype=d),
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args(argv)
    libs = {"theano_dag": _theano_dag()}
    pt_lib = _pytensor()
    if pt_lib is not None:
        libs["pytensor_c"] = pt_lib
    print(json.dumps({"benchmark": "softmax", "theano_dag": theano_dag.__file__}), flush=True)
    rng = np.random.default_rng(0)
    for dtype in ("float64", "float32"):
        for shape in SHAPES:
            xv = (rng.standard_normal(shape) * 3).astype(dtype)
            wv = rng.standard_normal(shape).astype(dtype)
            for op in OPS:
                ref = _numpy(op, wv)
                fns = {"numpy": (ref, (xv,))}
                tol = 1e-4 if dtype == "float32" else 1e-10
                for name, lib in libs.items():
                    x = lib.tensor(dtype)
                    f = lib.function([x], _graph(lib, op, x, wv))
                    np.testing.assert_allclose(f(xv), ref(xv), rtol=tol, atol=tol, err_msg=name)
                    if name == "theano_dag":
                        wait_for_kernels(f)
                    fns[name] = (f, (xv,))
                times = time_calls(fns, a.number, a.repeats)
                row = {"case": f"{op} {shape} {dtype}"}
                row.update({f"{k}_us": round(v, 2) for k, v in times.items()})
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
