"""Inner graphs under the Dask engine as the default mode (``linker=dask``): a scan, a
lazy ``ifelse`` branch, an OpFromGraph and a jacobian's row run as one task each, and
their inner graphs, given no mode of their own, on the CPU engine inside it (its
``inner_linker``), not as a dask graph per step; a mode given to ``scan`` is kept."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag import config  # noqa: E402
from theano_dag.compile.builders import OpFromGraph  # noqa: E402
from theano_dag.compile.mode import Mode, get_mode  # noqa: E402
from theano_dag.engines.basic import PerformLinker  # noqa: E402
from theano_dag.engines.cpu import CPULinker  # noqa: E402
from theano_dag.engines.cpu.native.ckernel import compile_mode  # noqa: E402
from theano_dag.engines.dask import DaskLinker, GatherWarning  # noqa: E402
from theano_dag.engines.inner import inner_mode  # noqa: E402
from theano_dag.gradient.row_loop import MapOverIndex  # noqa: E402
from theano_dag.ifelse import LazyIfElse, ifelse  # noqa: E402
from theano_dag.scan import scan  # noqa: E402
from theano_dag.scan.op import Scan  # noqa: E402

REF = Mode(linker="py", optimizer=None)


def _inner_functions(fgraph):
    """``(op, compiled inner function)`` of every inner graph that ran, in ``fgraph``
    and, recursively, in those inner graphs (a second gradient's scans hold scans)."""
    found = []
    for node in fgraph.apply_nodes:
        op = node.op
        fns = [getattr(op, "_fn", None)] + list(getattr(op, "_fns", None) or [])
        for fn in fns:
            if fn is not None:
                found.append((op, fn))
                found += _inner_functions(fn.fgraph)
    return found


def _loop(mode=None):
    """A scan with a state of one tap (h), one of two taps (m) and a per-step output (y),
    its outputs, the gradient of a cost with respect to all four inputs, and the
    second gradient with respect to w; built anew for each function, so that no two
    functions share a Scan op (each compiles its step once, on its first run)."""
    x, w = tt.dvector("x"), tt.dscalar("w")
    m0, h0 = tt.dvector("m0"), tt.dscalar("h0")

    def step(x_t, m_2, m_1, h_1, w):
        m_t = m_1 * 0.5 + m_2 * w + x_t
        h_t = tt.tanh(h_1 * w + x_t)
        return m_t, h_t, m_t * h_t

    (m, h, y), _ = scan(
        step,
        sequences=x,
        outputs_info=[dict(initial=m0, taps=[-2, -1]), h0, None],
        non_sequences=w,
        mode=mode,
    )
    cost = y.sum() + h[-1] + (m**2).sum()
    grads = theano_dag.grad(cost, [x, w, m0, h0])
    second = theano_dag.grad(grads[1], w)
    return [x, w, m0, h0], [m, h, y, *grads, second]


def _values():
    rng = np.random.default_rng(0)
    return rng.random(7), 0.3, rng.random(2), 0.1


def _reference(build):
    # The reference engine, its steps too (they follow the default mode).
    with config.change_flags(linker="py"):
        inputs, outputs = build()
        return theano_dag.function(inputs, outputs, mode=REF)(*_values())


def _check(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_inner_mode_of_the_dask_default_mode_is_the_cpu_engine_with_its_lowering():
    with config.change_flags(linker="dask"):
        mode = inner_mode()
        assert isinstance(mode.linker, CPULinker)
        names = [opt.name for opt in mode.optimizer]
        # the CPU engine's query: its row tiling in, the Dask engine's gathering out
        assert "cpu_row_tiling" in names and "dask_gather" not in names
        mine = get_mode("DASK")  # names its linker: kept
        assert inner_mode(mine) is mine
        # FAST_RUN's linker is the flag's: it follows the default mode
        assert isinstance(inner_mode(get_mode("FAST_RUN")).linker, CPULinker)
    with config.change_flags(linker="py"):
        assert isinstance(inner_mode().linker, PerformLinker)


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_scan_steps_and_gradients_run_on_the_cpu_engine_under_dask(scheduler):
    # Each step was a dask graph of its own (DaskLinker): some 25 ms of dask per step.
    want = _reference(_loop)
    with config.change_flags(linker="dask"), compile_mode("sync"), warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        inputs, outputs = _loop()
        mode = get_mode(None).clone(linker=DaskLinker(scheduler=scheduler))
        f = theano_dag.function(inputs, outputs, mode=mode)
        for _ in range(2):
            _check(f(*_values()), want)
    inner = _inner_functions(f.maker.fgraph)
    scans = [op for op, _ in inner if isinstance(op, Scan)]
    # the loop, its gradient's loop, and the second gradient's loops (and theirs)
    assert len(scans) >= 3, len(scans)
    assert {type(fn.linker) for _, fn in inner} == {CPULinker}


def test_a_lazy_branch_runs_on_the_cpu_engine_under_dask():
    def build():
        c, x = tt.dscalar("c"), tt.dvector("x")
        return [c, x], [ifelse(tt.gt(c, 0), tt.exp(x).sum() * 2, tt.log(x).sum())]

    values = [(1.0, np.arange(1.0, 4.0)), (-1.0, np.arange(1.0, 4.0))]
    with config.change_flags(linker="py"):
        ref = theano_dag.function(*build(), mode=REF)
    with config.change_flags(linker="dask"), warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        f = theano_dag.function(*build())
        assert isinstance(f.maker.linker, DaskLinker)
        for v in values:
            np.testing.assert_allclose(f(*v), ref(*v), rtol=1e-12)
    inner = _inner_functions(f.maker.fgraph)
    assert [type(op) for op, _ in inner] == [LazyIfElse, LazyIfElse]  # both branches ran
    assert {type(fn.linker) for _, fn in inner} == {CPULinker}


def test_an_op_from_graph_and_a_jacobian_row_run_on_the_cpu_engine_under_dask():
    def build():
        x = tt.dvector("x")
        a, b = tt.dvectors("a", "b")
        op = OpFromGraph([a, b], [tt.exp(a) * b + a])
        y = op(x, x[::-1])
        return [x], [y, theano_dag.gradient.jacobian(tt.tanh(x) * x.sum(), x)]

    v = np.linspace(-1, 1, 4)
    with config.change_flags(linker="py"):
        want = theano_dag.function(*build(), mode=REF)(v)
    with config.change_flags(linker="dask"), warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        f = theano_dag.function(*build())
        _check(f(v), want)
    inner = _inner_functions(f.maker.fgraph)
    assert {type(op) for op, _ in inner} == {OpFromGraph, MapOverIndex}
    assert {type(fn.linker) for _, fn in inner} == {CPULinker}


@pytest.mark.parametrize(
    ("given", "linker"),
    [(REF, PerformLinker), (get_mode("DASK"), DaskLinker), (get_mode("FAST_RUN"), CPULinker)],
    ids=["py", "dask", "fast_run"],
)
def test_a_mode_given_to_scan_compiles_its_step(given, linker):
    # scan(mode=...) is the step's mode, as in Theano. One that names its linker is kept:
    # a Dask one makes each step a dask graph (a step large enough to want chunks), run
    # inside the loop's task. FAST_RUN's linker is the flag's, and takes the Dask
    # engine's inner linker (Theano's tests give scan and function one such mode).
    with config.change_flags(linker="py"):
        want = theano_dag.function(*_loop(), mode=REF)(*_values())
    with config.change_flags(linker="dask"), warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        inputs, outputs = _loop(mode=given)
        f = theano_dag.function(inputs, outputs[:3])
        _check(f(*_values()), want[:3])
    inner = _inner_functions(f.maker.fgraph)
    assert inner and {type(fn.linker) for _, fn in inner} == {linker}
