"""The Dask engine on a ``distributed.LocalCluster`` of 2 worker processes (loopback only),
each limited to far less memory than the input, which is made chunk by chunk on the
workers: a 40-op elementwise chain with a reduction, a logistic-regression training
loop with updates, and a worker killed during a call.

``THEANO_DAG_DASK_TEST_GB`` sets the input size (default 0.85 GB of float64, just
over the two workers' limits together, so the suite stays short; the issue's figure
is 2).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import uuid

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag.compile.mode import Mode  # noqa: E402
from theano_dag.engines.dask import (  # noqa: E402
    DaskLinker,  # noqa: E402
    DaskTaskError,
    dask_shared,
)
from theano_dag.engines.dask import linker as dask_linker  # noqa: E402
from theano_dag.testing import procmem  # noqa: E402

# the shared helpers live next to this file; --import-mode=importlib does not put it on sys.path
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dask_helpers import one_chunk_flat  # noqa: E402

MEMORY_LIMIT = 400e6


@contextlib.contextmanager
def _one_fragile_worker():
    """A client of its own cluster of one worker process, where the scheduler gives up
    on a task at the first worker it kills."""
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            memory_limit=MEMORY_LIMIT,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        )
    c = distributed.Client(cluster, set_as_default=False)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


GB = float(os.environ.get("THEANO_DAG_DASK_TEST_GB", "0.85"))
CHUNK = 1 << 20  # elements: 8 MB of float64
# An upper bound for what would otherwise hang (a worker that never comes back), never
# the thing a test checks: far above what a loaded machine takes.
HANG_S = 600


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        memory_limit=MEMORY_LIMIT,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def chain(x, n=40):
    """40 elementwise ops: cheap ones mostly, with a few transcendental."""
    y = x
    for k in range(n // 4):
        y = tt.maximum(y * 0.999 + 0.01, -3.0)
        y = tt.tanh(y) if k % 3 == 0 else abs(y) - 0.5
    return y


def chain_numpy(x, n=40):
    y = x
    for k in range(n // 4):
        y = np.maximum(y * 0.999 + 0.01, -3.0)
        y = np.tanh(y) if k % 3 == 0 else abs(y) - 0.5
    return y


def test_chain_of_40_ops_on_input_larger_than_workers(client):
    n = int(GB * 1e9 / 8) // CHUNK * CHUNK
    assert n * 8 > 2 * MEMORY_LIMIT
    x = tt.dvector("x")
    y = chain(x)
    f = theano_dag.function([x], [y.sum(), y[:CHUNK].sum(), y[:1000]], mode="DASK")
    elementwise = [n for n in f.maker.fgraph.apply_nodes if "Composite" in str(n.op)]
    assert len(elementwise) == 1  # the 40 ops are one kernel
    xd = da.random.default_rng(0).standard_normal(n, chunks=CHUNK)
    workers = set(client.scheduler_info()["workers"])
    total, first_sum, head = f(xd)
    sample = xd[:CHUNK].compute()
    np.testing.assert_allclose(head, chain_numpy(sample[:1000]), rtol=1e-12)
    np.testing.assert_allclose(first_sum, chain_numpy(sample).sum(), rtol=1e-9)
    # Every element of the chain lies in [-0.5, 1]: the total is bounded by that.
    assert np.isfinite(total) and -0.5 * n <= total <= n
    assert set(client.scheduler_info()["workers"]) == workers  # no worker restarted
    peaks = client.run(procmem.peak_bytes)
    print("peak RSS per worker (MB):", [round(p / 1e6) for p in peaks.values()])
    assert all(p < MEMORY_LIMIT for p in peaks.values()), peaks


def test_logistic_regression_training_loop_with_updates(client):
    n, d = 400_000, 10
    rng = da.random.default_rng(1)
    xd = rng.standard_normal((n, d), chunks=(50_000, d)).persist()
    wt = np.linspace(-1, 1, d)
    yd = (xd @ wt > 0).astype("float64").persist()
    x, y = tt.dmatrix("x"), tt.dvector("y")
    w = dask_shared(np.zeros(d), name="w")
    b = dask_shared(np.zeros(()), name="b")
    p = tt.nnet.sigmoid(tt.dot(x, w) + b)
    cost = tt.nnet.binary_crossentropy(p, y).mean()
    gw, gb = theano_dag.grad(cost, [w, b])
    train = theano_dag.function(
        [x, y], cost, updates=[(w, w - 0.5 * gw), (b, b - 0.5 * gb)], mode="DASK"
    )
    costs = [float(train(xd, yd)) for _ in range(5)]
    # The updates stay on the cluster: persisted futures, not numpy arrays.
    wv = w.get_value(return_internal_type=True)
    assert isinstance(wv, da.Array)
    assert all(distributed.futures_of(wv))
    xv, yv = xd.compute(), yd.compute()
    w_np, b_np = np.zeros(d), 0.0
    for _ in range(5):
        q = 1 / (1 + np.exp(-(xv @ w_np + b_np)))
        w_np, b_np = w_np - 0.5 * xv.T @ (q - yv) / n, b_np - 0.5 * (q - yv).mean()
    np.testing.assert_allclose(w.get_value(), w_np, rtol=1e-8)
    np.testing.assert_allclose(b.get_value(), b_np, rtol=1e-8, atol=1e-12)
    assert costs == sorted(costs, reverse=True)


def held_at_first_chunk(xd, tag):
    """``xd`` whose first chunk's task, on a worker, says where it runs (the
    ``distributed.Variable`` ``where-<tag>``), sets the Event ``started-<tag>`` and
    then waits for the Event ``release-<tag>``, which the test sets: until then the
    call cannot end, however fast or slow the machine is."""

    def hold(b, block_id=None):
        if block_id == (0,):
            distributed.Variable(f"where-{tag}").set(distributed.get_worker().address)
            distributed.Event(f"started-{tag}").set()
            # a bound for a test that died before releasing it, not a timing
            distributed.Event(f"release-{tag}").wait(HANG_S)
        return b

    return xd.map_blocks(hold, meta=np.empty(0, xd.dtype))


def test_a_worker_killed_during_a_call(client):
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.exp(tt.sin(x) * 0.5).sum(), mode="DASK")
    n = 24 * CHUNK
    plain = da.random.default_rng(2).standard_normal(n, chunks=CHUNK)
    want = np.exp(np.sin(plain) * 0.5).sum().compute()
    tag = uuid.uuid4().hex
    xd = held_at_first_chunk(plain, tag)
    started = distributed.Event(f"started-{tag}", client=client)
    release = distributed.Event(f"release-{tag}", client=client)
    result = {}

    def call():
        try:
            result["value"] = f(xd)
        except Exception as e:  # noqa: BLE001 (the error is what the test checks)
            result["error"] = e

    t = threading.Thread(target=call)
    t.start()
    try:
        assert started.wait(HANG_S), "the first chunk's task never started"
        victim = distributed.Variable(f"where-{tag}", client=client).get(timeout=HANG_S)
        assert t.is_alive()  # the call is running when the worker dies: its task is held
        try:
            client.run(os._exit, 1, workers=[victim])
        except (OSError, distributed.comm.CommClosedError):
            pass  # the worker died before it could answer: what was asked
    finally:
        release.set()  # the task, run again elsewhere, goes on
    t.join(HANG_S)
    assert not t.is_alive()
    if "value" in result:  # Dask recomputed what the dead worker held
        np.testing.assert_allclose(result["value"], want, rtol=1e-9)
    else:  # or it gave up, naming the task
        err = result["error"]
        assert isinstance(err, DaskTaskError) and "KilledWorker" in str(err), err
    client.wait_for_workers(2, timeout=HANG_S)
    assert victim not in client.scheduler_info()["workers"]  # the nanny started a new one
    np.testing.assert_allclose(f(xd), want, rtol=1e-9)


def test_an_error_in_a_task_on_a_worker_names_its_key_and_op(client):
    x = tt.dmatrix("x")
    f = theano_dag.function([x], tt.exp(x), mode="DASK")

    bad = one_chunk_flat()
    with pytest.raises(DaskTaskError) as err:
        f(bad)
    assert re.fullmatch(
        r"Dask engine: task \('exp-[0-9a-f]{32}', 1, 0\) \(running Elemwise\{exp,no_inplace\}\) "
        r"failed: TypeError: .*wrong number of dimensions: expected 2, got 1 with shape \(4,\).*",
        str(err.value),
    ), str(err.value)
    # pickled back from the worker, it is of the task's error type still
    assert isinstance(err.value, TypeError)
    np.testing.assert_allclose(f(da.zeros((4, 4), chunks=2)), np.ones((4, 4)))


def test_an_error_in_a_task_of_dask_arrays_own_on_a_worker_is_named(client):
    x = tt.dmatrix("x")
    f = theano_dag.function([x], x.sum(axis=0), mode="DASK")

    bad = one_chunk_flat()
    with pytest.raises(DaskTaskError) as err:
        f(bad)
    # the task the scheduler blames: dask's tree reduction, on a worker
    assert re.fullmatch(
        r"Dask engine: task \('sum-aggregate-[0-9a-f]{32}', 0\) \(dask.array's sum-aggregate "
        r"for Sum\{axis=\(0,\)\}\) failed: ValueError: all the input arrays must have same "
        r"number of dimensions, .*",
        str(err.value),
    ), str(err.value)
    assert isinstance(err.value, ValueError)
    np.testing.assert_allclose(f(da.ones((4, 4), chunks=2)), np.full(4, 4.0))


def test_a_task_whose_workers_die_is_named_with_its_op():
    # Its own cluster: the scheduler gives up on a task at the first worker it kills.
    with _one_fragile_worker() as c:
        x = tt.dvector("x")
        f = theano_dag.function([x], (x * 2).sum(), mode=Mode(linker=DaskLinker(scheduler=c)))
        # (dask calls the function on an empty array for its type: that one returns)
        deadly = da.ones(4, chunks=2).map_blocks(
            lambda b: os._exit(1) if b.size else b, dtype="float64"
        )
        with pytest.raises(DaskTaskError) as err:
            f(deadly)
        assert re.fullmatch(
            # Dask fused the input's task, the kernel's and the partial sum's into one,
            # which has the sum's key: the key and op of the task that ran.
            r"Dask engine: task \('sum-[0-9a-f]{32}', [01]\) \(running Sum\) failed: "
            r"KilledWorker: the workers running it died \(more than 0 times\)",
            str(err.value),
        ), str(err.value)
        c.wait_for_workers(1, timeout=HANG_S)
        assert f(da.ones(4, chunks=2)) == 8.0  # the next call works


def test_a_reused_graph_keeps_each_call_s_updates_on_the_cluster(client, monkeypatch):
    # Every call runs the graph built for the first (same chunks), under keys of its
    # own: the update a shared variable holds from one call is never taken for the next's.

    builds = []
    real = dask_linker.build
    monkeypatch.setattr(dask_linker, "build", lambda *a, **k: builds.append(1) or real(*a, **k))
    xd = da.random.default_rng(4).standard_normal(8 * 1000, chunks=1000).persist()
    w = dask_shared(da.zeros(8000, chunks=1000).persist(), name="w")
    x = tt.dvector("x")
    f = theano_dag.function([x], (x * w).sum(), updates=[(w, w * 0.5 + x)], mode="DASK")
    xv, w_np = xd.compute(), np.zeros(8000)
    held = []
    for _ in range(4):
        np.testing.assert_allclose(f(xd), (xv * w_np).sum(), rtol=1e-12)
        w_np = w_np * 0.5 + xv
        held.append(w.get_value(return_internal_type=True))
        assert all(distributed.futures_of(held[-1]))
    assert len(builds) == 1
    assert len({a.name for a in held}) == 4
    for k, a in enumerate(held):  # the earlier calls' updates, still held, unchanged
        np.testing.assert_allclose(a.compute(), xv * (2 - 0.5**k), rtol=1e-12)


def test_a_task_of_a_reused_graph_whose_workers_die_is_named():
    with _one_fragile_worker() as c:
        x = tt.dvector("x")
        f = theano_dag.function([x], (x * 2).sum(), mode=Mode(linker=DaskLinker(scheduler=c)))

        def one_layer(chunk):  # an input of one layer, as a persisted one is: reused
            name = f"given-{uuid.uuid4().hex}"
            return da.Array({(name, i): (chunk, 2) for i in range(2)}, name, ((2, 2),), "f8")

        assert f(one_layer(np.ones)) == 8.0  # builds the graph
        with pytest.raises(DaskTaskError) as err:
            f(one_layer(os._exit))
        assert re.fullmatch(
            r"Dask engine: task \('given-[0-9a-f]{32}', [01]\) \(making input 'x'\) failed: "
            r"KilledWorker: the workers running it died \(more than 0 times\)",
            str(err.value),
        ), str(err.value)
        c.wait_for_workers(1, timeout=HANG_S)
        assert f(one_layer(np.ones)) == 8.0  # the next call works
        assert len(f.fn.plans) == 1


def test_a_scan_s_steps_run_on_its_worker_s_cpu_engine():
    # A worker whose default mode is the Dask engine (its THEANO_DAG_FLAGS): the loop's
    # task runs there, and each step on that worker's CPU engine (its kernels compiled
    # there), not as a dask graph sent back to the cluster from inside the task.
    flags = ",".join(filter(None, [os.environ.get("THEANO_DAG_FLAGS", ""), "linker=dask"]))
    cluster = distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=2,  # a nested graph's tasks have a thread to run on
        processes=True,
        memory_limit=MEMORY_LIMIT,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        env={"THEANO_DAG_FLAGS": flags},
    )
    c = distributed.Client(cluster, set_as_default=False)

    def record_linkers():  # on the worker: note the linker of each function compiled there
        from theano_dag.engines import inner

        seen = inner._linkers_seen = []
        real = inner.InnerFunction.__init__

        def init(self, fgraph, linker, *args, **kwargs):
            seen.append(type(linker).__name__)
            real(self, fgraph, linker, *args, **kwargs)

        inner.InnerFunction.__init__ = init

    def linkers_seen():
        from theano_dag.engines import inner

        return list(inner._linkers_seen)

    try:
        c.run(record_linkers)
        x = tt.dvector("x")
        acc, _ = theano_dag.scan(
            lambda v, a: a * 0.5 + v, sequences=x, outputs_info=np.float64(0.0)
        )
        f = theano_dag.function([x], acc, mode=Mode(linker=DaskLinker(scheduler=c)))
        v = np.linspace(0.0, 1.0, 20)
        want = np.zeros(20)
        for t in range(20):
            want[t] = (want[t - 1] if t else 0.0) * 0.5 + v[t]
        np.testing.assert_allclose(f(v), want, rtol=1e-12)
        (seen,) = c.run(linkers_seen).values()
        assert seen and set(seen) == {"CPULinker"}, seen
    finally:
        c.close()
        cluster.close()
