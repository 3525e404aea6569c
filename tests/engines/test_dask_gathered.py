"""The Dask engine's gathered nodes (an op with no chunked form, in one task over its
whole inputs): each runs once per call, however many gathered nodes read its value,
and a scan's first and second gradients (scans read by scans) give the reference
engine's values."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag.compile.mode import Mode  # noqa: E402
from theano_dag.engines.dask import DaskLinker, GatherWarning  # noqa: E402
from theano_dag.scan import scan  # noqa: E402
from theano_dag.scan.op import Scan  # noqa: E402
from theano_dag.tensor.sort import SortOp  # noqa: E402

REF = Mode(linker="py", optimizer=None)


@pytest.fixture
def performs(monkeypatch):
    """Count the runs of ``op_type.perform``: ``performs(op_type)`` returns a list that
    gets one entry per run (from any thread)."""
    lock = threading.Lock()

    def counting(op_type):
        runs = []
        real = op_type.perform

        def perform(self, *args, **kwargs):
            with lock:
                runs.append(1)
            return real(self, *args, **kwargs)

        monkeypatch.setattr(op_type, "perform", perform)
        return runs

    return counting


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_gathered_node_runs_once_however_many_gathered_nodes_read_it(performs, scheduler):
    # Each level's two sorts read the level before's sorts. Made with dask.delayed,
    # each gathered task carried its own copy of the graph above it (dask renames a
    # delayed argument's keys), so the sorts above ran again for each reader: the
    # runs doubled per level.
    x = tt.dvector("x")
    y = x
    for _ in range(5):
        y = tt.sort(y) + tt.sort(y * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        f = theano_dag.function([x], y, mode=Mode(linker=DaskLinker(chunks=2, scheduler=scheduler)))
        ref = theano_dag.function([x], y, mode=REF)
    sorts = sum(isinstance(n.op, SortOp) for n in f.maker.fgraph.apply_nodes)
    assert sorts == 10
    v = np.random.default_rng(0).random(5)
    want = ref(v)
    runs = performs(SortOp)
    for call in range(2):  # the first call's graph, then the reused one
        np.testing.assert_allclose(f(v), want, rtol=1e-12)
        assert len(runs) == sorts * (call + 1)


def _inner(mitsot_m2, sitsot):
    out = (mitsot_m2 + sitsot) ** 1.02
    return out, out


def _sum_of_grads(a, b):
    """A scan with a state read two steps back (a) and one read one step back (b); the
    sum of the gradients of its outputs' sums with respect to each initial value."""
    outs, _ = scan(_inner, outputs_info=[dict(initial=a, taps=[-2]), b], n_steps=3)
    ga = theano_dag.grad(outs[0].sum(), a)
    gb = theano_dag.grad(outs[1].sum(), b)
    return ga, gb


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_second_gradient_of_a_scan_with_a_two_step_tap_matches_the_reference(performs, scheduler):
    # Theano's test_verify_second_grad_mitsot1 on the Dask engine: 284 nodes, 5 scans
    # and 113 gathered values. Each call took 30-40 s (every gathered node's copy of
    # the graph above it: 71,000 tasks), and about one call in five failed: dask's
    # linear fusion names a fused task by a key cut to 115 characters plus 4 hex
    # digits of a hash, and two chains of those long copied keys got one name, so an
    # add read a (1, 3) chunk in place of a (2, 3) one.
    a, b = tt.dmatrix("a"), tt.dvector("b")
    ga, gb = _sum_of_grads(a, b)
    c = ga.sum() + gb.sum()
    gga, ggb = theano_dag.grad(c, [a, b])
    outs = [ga, gb, c, gga, ggb]
    mode = Mode(linker=DaskLinker(scheduler=scheduler))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GatherWarning)
        ref = theano_dag.function([a, b], outs, mode=REF)
        f = theano_dag.function([a, b], outs, mode=mode)
    scans = sum(isinstance(n.op, Scan) for n in f.maker.fgraph.apply_nodes)
    rng = np.random.default_rng(0)
    values = [(rng.random((2, 3)), rng.random(3)) for _ in range(3)]
    wants = [ref(*v) for v in values]
    runs = performs(Scan)
    for call, (v, want) in enumerate(zip(values, wants)):
        got = f(*v)
        for g, w in zip(got, want):
            assert np.shape(g) == np.shape(w)
            np.testing.assert_allclose(g, w, rtol=1e-10)
        assert len(runs) == scans * (call + 1), len(runs)
