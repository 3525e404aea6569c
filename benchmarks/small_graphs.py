"""Small graphs called in a loop: a sampler's log-density and gradient, small networks' steps.

The graphs between a one-node function and a large fused network, where the time of a
call goes between nodes rather than in them (the cases are in ``_small_graph_cases.py``):

* ``linreg_logp_dlogp``: log-density + gradient of a Bayesian linear regression (100 rows
  x 3 features) as PyMC3 builds it: one flat parameter vector in, sliced into alpha, beta,
  log(sigma); Normal priors, a log-transformed HalfNormal scale, a Normal likelihood;
* ``mlp2_cost_grad``, ``mlp8_cost_grad``: a 2- and an 8-layer tanh MLP (batch 4 x width
  8), squared-error cost and the gradients wrt every weight and bias;
* ``gru_step``: one step of a GRU cell (batch 4 x width 8);
* ``mvnormal_chol_logp_grad``: a multivariate normal log-density through a Cholesky
  factor (20 rows in 4 dimensions), with its gradient wrt the mean and the factor;
* ``logreg_sgd_step``: one SGD step of a logistic regression on 32 rows (cost out,
  weights updated in shared variables).

Each is called with its inputs already numpy arrays, by: theano_dag (default mode);
PyTensor's C backend (``Mode(linker="cvm", optimizer="fast_run")``: PyTensor 3's
``FAST_RUN`` picks Numba when it is installed, so the C linker is named); PyTensor's Numba
mode when numba is installed; theano-pymc 1.1.2's C backend (cvm) when
``--theano-python`` names an interpreter that has it (it needs an older numpy than
theano_dag's venv, so it runs in a child process: ``make venv-theano`` builds one).
Every peer's first outputs are checked against theano_dag's before timing.

One JSON line per case: medians over ``--repeats`` rounds (the in-process engines take
turns within a round) of ``--number`` calls, in microseconds per call, and theano_dag's
ratio to each peer (``theano_dag_vs_<peer>`` below 1: theano_dag is faster). The first
line describes the machine and the BLAS each side loaded (threadpoolctl, where installed).
``OPENBLAS_CORETYPE`` is unset in the child, so that numpy picks its own kernel there.

Run: ``.venv/bin/python benchmarks/small_graphs.py [--theano-python
.venv-theano/bin/python] [--number 2000] [--repeats 7] [--cases linreg_logp_dlogp ...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag.engines.cpu.native.ckernel import wait_for_kernels
from theano_dag.tensor.slinalg import solve_lower_triangular

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _small_graph_cases import CASES, blas_info, make_data, time_calls  # noqa: E402

HERE = Path(__file__).resolve().parent
# Where ``make venv-theano`` builds theano-pymc's venv: used when --theano-python is not given.
THEANO_VENV_PYTHON = HERE.parent / ".venv-theano" / "bin" / "python"


def theano_dag_lib():
    return types.SimpleNamespace(
        name="theano_dag",
        tt=tt,
        grad=theano_dag.grad,
        shared=theano_dag.shared,
        sigmoid=tt.nnet.sigmoid,
        solve_lower=solve_lower_triangular,
        function=lambda i, o, u: theano_dag.function(i, o, updates=u),
    )


def pytensor_libs():
    """PyTensor's C mode, and its Numba mode when numba is installed; the names of the
    modes left out, with why."""
    libs, missing = [], {}
    try:
        import pytensor  # noqa: PLC0415 (optional peer: the bench extra)
        import pytensor.tensor as pt  # noqa: PLC0415
        from pytensor.compile.mode import Mode  # noqa: PLC0415
        from pytensor.tensor.linalg import solve_triangular  # noqa: PLC0415
    except ImportError as e:
        return libs, {"pytensor_c": f"pytensor not importable: {e}"}
    modes = {"pytensor_c": Mode(linker="cvm", optimizer="fast_run")}
    try:
        import numba  # noqa: F401, PLC0415 (optional: PyTensor's Numba mode)

        modes["pytensor_numba"] = Mode(linker="numba", optimizer="fast_run")
    except ImportError:
        missing["pytensor_numba"] = "numba not installed"
    for name, mode in modes.items():
        libs.append(
            types.SimpleNamespace(
                name=name,
                tt=pt,
                grad=pytensor.grad,
                shared=pytensor.shared,
                sigmoid=pt.sigmoid,
                solve_lower=lambda a, b: solve_triangular(a, b, lower=True),
                function=lambda i, o, u, mode=mode: pytensor.function(i, o, updates=u, mode=mode),
                compile=pytensor.function,  # in another mode (small_compile.py)
                version=pytensor.__version__,
                blas=pytensor.config.blas__ldflags or "NumPy C-API based BLAS (no ldflags)",
            )
        )
    return libs, missing


def _child_env():
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)  # numpy's own choice of kernel
    env.pop("PYTHONPATH", None)  # the child's venv has its own numpy
    # theano-pymc's BLAS probe fails with pip's numpy: its NumPy C-API BLAS, as `make test`.
    build = HERE.parent / "build" / "theano"
    env.setdefault("THEANO_FLAGS", f"blas__ldflags=,base_compiledir={build}")
    return env


class TheanoChild:
    """theano-pymc's C backend in a child process: the cases built there, their first
    outputs read back, each round's timing asked for in turn with the other engines'."""

    def __init__(self, python, data, cases, tmp):
        inp, self.out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(inp, **data)
        cmd = [python, str(HERE / "_small_graph_cases.py"), "--lib", "theano", "--data", inp,
               "--out", self.out, "--cases", *cases]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_child_env()
        )
        line = self.proc.stdout.readline()
        if not line.startswith("{"):
            self.proc.kill()
            raise RuntimeError(f"theano-pymc child failed (exit {self.proc.wait()})")
        self.head = json.loads(line)
        with np.load(self.out) as z:
            self.outputs = {k: z[k] for k in z.files}

    def timer(self, case):
        """A callable of no arguments: one timed batch, as ``timeit`` of ``number`` calls."""

        def run(number):
            self.proc.stdin.write(f"{case} {number}\n")
            self.proc.stdin.flush()
            return float(self.proc.stdout.readline()) * 1e-6 * number

        return run

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _first_outputs(f, args):
    return [np.asarray(v).copy() for v in f(*args)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument(
        "--theano-python",
        help="an interpreter with theano-pymc 1.1.2 (default: .venv-theano's, when built)",
    )
    a = ap.parse_args(argv)
    data = make_data()
    peers, missing = pytensor_libs()
    child = None
    if a.theano_python is None and THEANO_VENV_PYTHON.exists():
        a.theano_python = str(THEANO_VENV_PYTHON)
    tmp = tempfile.TemporaryDirectory(prefix="td_small_")
    if a.theano_python:
        child = TheanoChild(a.theano_python, data, a.cases, tmp.name)
    else:
        missing["theano_c"] = "no --theano-python given and no .venv-theano"
    print(
        json.dumps(
            {
                "benchmark": "small_graphs",
                "machine": f"{platform.machine()} {platform.python_version()} "
                f"numpy {np.__version__}",
                "cpus": os.cpu_count(),
                "blas": blas_info(),
                "pytensor": [{"mode": p.name, "version": p.version, "blas": p.blas} for p in peers],
                "theano_c": child.head if child else None,
                "left_out": missing,
            }
        ),
        flush=True,
    )
    mine = theano_dag_lib()
    for case in a.cases:
        fns = {}
        expected = None
        for lib in [mine, *peers]:
            ins, outs, ups, args = CASES[case](lib, data)
            f = lib.function(ins, outs, ups)
            got = _first_outputs(f, args)
            if expected is None:
                expected = got
            else:
                for e, g in zip(expected, got, strict=True):
                    np.testing.assert_allclose(g, e, rtol=1e-7, atol=1e-10, err_msg=lib.name)
            fns[lib.name] = (f, args)
        # The first calls run numpy while the C kernels compile: time the calls after.
        in_c = wait_for_kernels(fns["theano_dag"][0])
        if child:
            for i, e in enumerate(expected):
                np.testing.assert_allclose(child.outputs[f"{case}/{i}"], e, rtol=1e-7, atol=1e-10)
            fns["theano_c"] = (child.timer(case), None)
        times = time_calls(fns, a.number, a.repeats)
        n_nodes = len(fns["theano_dag"][0].maker.fgraph.apply_nodes)
        row = {"benchmark": "small_graphs", "case": case, "theano_dag_nodes": n_nodes}
        row["theano_dag_kernels_in_c"] = in_c
        for name, t in times.items():
            row[f"{name}_us"] = round(t, 2)
        for name, t in times.items():
            if name != "theano_dag":
                row[f"theano_dag_vs_{name}"] = round(times["theano_dag"] / t, 2)
        print(json.dumps(row), flush=True)
    if child:
        child.close()
    tmp.cleanup()


if __name__ == "__main__":
    main()
