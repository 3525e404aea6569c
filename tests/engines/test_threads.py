"""Threads (issue 18, point 4): one compiled function called from 8 threads at once,
1,000 calls each, gives every caller the result the sequential calls give, on every
engine; functions compile in several threads at once."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.builders import OpFromGraph
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.compile.sharedvalue import shared
from theano_dag.config import config
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.ifelse import ifelse
from theano_dag.scan.basic import scan

THREADS, CALLS = 8, 1000
OPENCL, _WHY = opencl_available()

ENGINES = [
    pytest.param(lambda: None, id="cpu"),
    pytest.param("no_c", id="cpu_without_c"),
    pytest.param(lambda: Mode(linker="py", optimizer=None), id="py"),
    pytest.param(
        lambda: Mode(linker="opencl"),
        id="opencl",
        marks=pytest.mark.skipif(not OPENCL, reason=f"no OpenCL device: {_WHY}"),
    ),
]


def _in_threads(work, n=THREADS):
    """Run ``work(k)`` in ``n`` threads started together; the exceptions raised."""
    barrier, errors = threading.Barrier(n), []

    def run(k):
        try:
            barrier.wait()
            work(k)
        except BaseException as e:  # reported to the test
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.parametrize("engine", ENGINES)
def test_one_function_from_eight_threads(engine, kernels_at_first_call):
    # (kernels_at_first_call: the sequential calls and the threads' run the same kernels,
    # not numpy before a library that loads among the threads' calls and C after it)
    flags = {"cxx": ""} if engine == "no_c" else {}
    mode = None if engine == "no_c" else engine()
    with config.change_flags(**flags):
        x = tt.dvector("x")
        w = shared(np.linspace(0, 1, 16), name="w")
        f = function([x], [tt.tanh(x) * w + x.sum(), (x * w).max()], mode=mode)
        rng = np.random.default_rng(0)
        ins = [rng.standard_normal(16) + k for k in range(THREADS)]
        kept = [v.copy() for v in ins]
        want = [[np.asarray(o).copy() for o in f(v)] for v in ins]
        wrong = []

        def work(k):
            for _ in range(CALLS):
                got = f(ins[k])
                for g, e in zip(got, want[k]):
                    if not np.array_equal(np.asarray(g), e):
                        wrong.append(k)

        errors = _in_threads(work)
    assert errors == [] and wrong == []
    for v, k in zip(ins, kept):
        np.testing.assert_array_equal(v, k)  # inputs intact


def test_functions_compile_in_eight_threads_at_once():
    results = {}

    def work(k):
        x = tt.dvector("x")
        f = function([x], tt.exp(x * (k + 1)) - tt.sin(x) / (k + 2))
        v = np.linspace(-1, 1, 50)
        results[k] = (f(v), np.exp(v * (k + 1)) - np.sin(v) / (k + 2))

    assert _in_threads(work) == []
    for k in range(THREADS):
        np.testing.assert_allclose(*results[k], rtol=1e-12)


def test_the_owning_thread_calls_directly_others_get_copies():
    x = tt.dvector("x")
    f = function([x], x * 2)
    np.testing.assert_array_equal(f(np.ones(2)), [2.0, 2.0])
    assert getattr(f._copies, "function", None) is None  # the owner: f's own storage
    seen = []

    def work(k):
        np.testing.assert_array_equal(f(np.full(2, k)), [2.0 * k, 2.0 * k])
        seen.append(f._copies.function)

    assert _in_threads(work, n=2) == []
    assert all(c is not f for c in seen) and seen[0] is not seen[1]


@pytest.mark.parametrize("engine", ENGINES)
def test_ops_with_inner_graphs_from_eight_threads(engine, kernels_at_first_call, request):
    # A scan's step, an OpFromGraph and a lazy ifelse's branch are inner functions that a
    # function's thread copies share through their op: each thread links its own (their
    # steps' planned buffers were shared, and threads read each other's sums).
    # (OpenCL on PoCL launches each of the loop's steps: 300 of them keep the threads'
    # calls overlapping, where 3,000 took 100 s.)
    steps = 300 if request.node.callspec.id == "opencl" else 3000
    flags = {"cxx": ""} if engine == "no_c" else {}
    mode = None if engine == "no_c" else engine()
    with config.change_flags(**flags):
        x, c = tt.dvector("x"), tt.lscalar("c")
        res, _ = scan(
            lambda xi, acc: acc + tt.exp(xi) * 2,
            sequences=x,
            outputs_info=tt.constant(0.0, dtype="float64"),
        )
        a = tt.dvector("a")
        ofg = OpFromGraph([a], [(tt.tanh(a) * 3).sum()])
        outs = [res[-1], ofg(x), ifelse(c, (tt.exp(x) * 3).sum(), tt.log1p(x * x).sum())]
        f = function([c, x], outs, mode=mode)
        rng = np.random.default_rng(1)
        ins = [rng.uniform(0, 1, steps) + k for k in range(THREADS)]
        want = [[np.asarray(o).copy() for o in f(k % 2, v)] for k, v in enumerate(ins)]
        wrong = []

        def work(k):
            for _ in range(CALLS // 20):
                for g, e in zip(f(k % 2, ins[k]), want[k]):
                    if not np.array_equal(np.asarray(g), e):
                        wrong.append(k)

        errors = _in_threads(work)
    assert errors == [] and wrong == []
