"""The C compile of small functions from an empty cache: theano_dag's kernel library, the
step library, the layout before the step library, and PyTensor's C mode.

For each graph of ``small_graphs.py`` (a regression's log-density and gradient, MLPs of 2
and 8 layers with their gradients, a GRU step, a multivariate normal through a Cholesky
factor, a logistic regression's SGD step), the C source of its kernel library is made
as the CPU engine makes it, then compiled with the engine's compiler and flags into an
empty folder:

- ``kernels``: the library the engine builds for the function (the preamble and the
  function's generated kernels);
- ``kernels_with_steps``: the same kernels in one source with the step library's C (the
  strided loop, the sums, the small products, the linear algebra, the softmaxes), as
  every function's library carried that C before the step library;
- ``step_library``: the step library alone, built once for each compiler and cache (one
  line, ``case`` ``"step_library"``).

With ``--before-tree PATH`` (a checkout of theano_dag before the step library), also
``before``: the library that tree makes for the same function (its source made by a child
process with that tree on ``PYTHONPATH``), compiled here.

Beside them, PyTensor's C mode (``Mode(linker="cvm", optimizer="fast_run")``) compiles
the same graph in a fresh process with an empty ``compiledir`` (``pytensor_c_cold``:
``pytensor.function``'s wall time, its rewrites included, as its C modules are most of
it), when PyTensor is installed.

One JSON line per case, seconds, medians over ``--repeats`` compiles (PyTensor's over
``--pytensor-repeats``), with the ratios ``kernels_with_steps / kernels`` and
``pytensor_c_cold / (kernels + step_library)`` (a first function on a new machine pays
both of theano_dag's). The compiler runs at the priority it has in the engine (niced).

Run: ``.venv/bin/python benchmarks/kernel_compile.py [--repeats 3] [--pytensor-repeats 1]
[--cases linreg_logp_dlogp ...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from theano_dag.config import config
from theano_dag.engines.cpu.emit import csource
from theano_dag.engines.cpu.native import cc, ckernel

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _small_graph_cases import CASES  # noqa: E402

PYTENSOR_CHILD = """
import os, sys, tempfile, time, types
os.environ["PYTENSOR_FLAGS"] = "compiledir=" + tempfile.mkdtemp()
sys.path.insert(0, {here!r})
import pytensor, pytensor.tensor as pt
from pytensor.compile.mode import Mode
from pytensor.tensor.linalg import solve_triangular
from _small_graph_cases import CASES, make_data
mode = Mode(linker="cvm", optimizer="fast_run")
lib = types.SimpleNamespace(
    tt=pt, grad=pytensor.grad, shared=pytensor.shared, sigmoid=pt.sigmoid,
    solve_lower=lambda a, b: solve_triangular(a, b, lower=True),
    function=lambda i, o, u: pytensor.function(i, o, updates=u, mode=mode),
)
ins, outs, updates, args = CASES[{case!r}](lib, make_data())
t = time.perf_counter()
f = lib.function(ins, outs, updates)
print(time.perf_counter() - t)
"""


def _compile_seconds(tc, source):
    """Seconds of one compile of ``source`` into an empty folder."""
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        cc.compile_library(tc, source, d)
        return time.perf_counter() - t


SOURCE_CHILD = """
import sys, tempfile
sys.path.insert(0, {here!r})
import theano_dag
from theano_dag.config import config
from theano_dag.engines.cpu.native import ckernel
from _small_graph_cases import CASES, make_data
from small_graphs import theano_dag_lib
with config.change_flags(compiledir=tempfile.mkdtemp()), ckernel.compile_mode("never"):
    ins, outs, updates, args = CASES[{case!r}](theano_dag_lib(), make_data())
    f = theano_dag.function(ins, outs, updates=updates)
    f(*args)
sys.stdout.write(f.fn.program.ckernels.source())
"""


def _library_source(case, tree=HERE.parent):
    """The kernel library's source of ``case``'s function as the theano_dag at ``tree``
    makes it (in a child process with ``tree`` on its path; the kernels not built)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, "-c", SOURCE_CHILD.format(here=str(HERE), case=case)],
        capture_output=True, text=True, timeout=900, env=env, cwd=str(tree),
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return out.stdout


def _library_sources(case, tc):
    """The kernel library's source of ``case``'s function, the same kernels after the step
    library's C, and how many kernels it has."""
    layout, simd = ckernel._layout_and_simd(tc)
    kernels = _library_source(case)
    templates = kernels[len(csource.preamble(layout, simd)) :]
    n = len(re.findall(r"^int k\d+_v\(", templates, re.M))
    return kernels, csource.steps_source(layout, simd) + templates, n


def _pytensor_seconds(case):
    out = subprocess.run(
        [sys.executable, "-c", PYTENSOR_CHILD.format(here=str(HERE), case=case)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return float(out.stdout.split()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--pytensor-repeats", type=int, default=1)
    p.add_argument("--cases", nargs="*", default=list(CASES))
    p.add_argument("--before-tree", help="a theano_dag checkout to compile the library of")
    a = p.parse_args(argv)
    tc = cc.get_toolchain(config.cxx)
    if tc is None:
        print(json.dumps({"skipped": "no C compiler (config.cxx)"}))
        return
    try:
        import pytensor  # noqa: F401, PLC0415 (optional peer: the bench extra)

        have_pytensor = True
    except ImportError:
        have_pytensor = False
    layout, simd = ckernel._layout_and_simd(tc)
    steps = csource.steps_source(layout, simd)
    step_s = statistics.median(_compile_seconds(tc, steps) for _ in range(a.repeats))
    print(json.dumps({"case": "step_library", "seconds": round(step_s, 3),
                      "source_bytes": len(steps), "compiler": tc.cxx,
                      "flags": " ".join(tc.flags)}), flush=True)  # fmt: skip
    for case in a.cases:
        kernels, with_steps, n = _library_sources(case, tc)
        k = statistics.median(_compile_seconds(tc, kernels) for _ in range(a.repeats))
        ks = statistics.median(_compile_seconds(tc, with_steps) for _ in range(a.repeats))
        row = {"case": case, "kernels_in_library": n, "kernels": round(k, 3),
               "kernels_with_steps": round(ks, 3),
               "with_steps_over_kernels": round(ks / k, 2)}  # fmt: skip
        if a.before_tree:
            before = _library_source(case, a.before_tree)
            b = statistics.median(_compile_seconds(tc, before) for _ in range(a.repeats))
            row["before"] = round(b, 3)
            row["before_over_kernels"] = round(b / k, 2)
        if have_pytensor:
            pt = statistics.median(_pytensor_seconds(case) for _ in range(a.pytensor_repeats))
            row["pytensor_c_cold"] = round(pt, 2)
            row["pytensor_over_kernels_and_steps"] = round(pt / (k + step_s), 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
