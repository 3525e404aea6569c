"""The Dask engine on a ``distributed.LocalCluster`` in this process (one worker of one
thread): a graph computed from inside a task (a scan's step given a Dask Mode, a
Dask-linked function called in a task) runs on the cluster instead of waiting for ever
for the thread it holds, and a call whose cluster is lost (its last worker gone, its
scheduler gone during the call, its client closed between calls) gives the right
values with one warning, or an error naming the cluster; never a hang.

Each call that could hang runs in a thread joined with ``HANG_S``: a bound for a
regression, never what a test checks.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
import warnings

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag.compile.mode import Mode, get_mode  # noqa: E402
from theano_dag.engines.dask import (  # noqa: E402
    ClusterLostWarning,
    DaskClusterError,
    DaskLinker,
    dask_shared,
    plan,
)
from theano_dag.engines.dask import cluster as dask_cluster  # noqa: E402

HANG_S = 120


@contextlib.contextmanager
def one_worker(set_as_default=False):
    """A cluster in this process: one worker with one thread, and a client of it."""
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0"
    )
    client = distributed.Client(cluster, set_as_default=set_as_default)
    try:
        yield cluster, client
    finally:
        client.close()
        # (a bound: the workers of a cluster whose scheduler a test closed wait for it)
        with contextlib.suppress(TimeoutError):
            cluster.close(timeout=5)


def bounded(fn):
    """``fn()`` in a thread, with the warnings it gave: ``(value or error, warnings)``;
    fails the test if it has not returned after ``HANG_S``."""
    result = {}

    def call():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result["value"] = fn()
            except Exception as e:  # noqa: BLE001 (the error is what the test checks)
                result["value"] = e
        result["warnings"] = [w for w in caught if issubclass(w.category, ClusterLostWarning)]

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(HANG_S)
    assert not t.is_alive(), "the call hangs"
    return result["value"], result["warnings"]


def _address(cluster):
    return cluster.scheduler.address


def _halves(v):
    want = np.zeros(len(v))
    for t in range(len(v)):
        want[t] = (want[t - 1] if t else 0.0) * 0.5 + v[t]
    return want


def test_a_scan_given_a_dask_mode_runs_its_steps_from_a_worker_of_one_thread():
    # The step's graph is computed from inside the scan's task, on the worker's client:
    # its tasks wanted the one thread that task held, and the call never ended.
    with one_worker() as (_, c):
        x = tt.dvector("x")
        acc, _ = theano_dag.scan(
            lambda v, a: a * 0.5 + v,
            sequences=x,
            outputs_info=np.float64(0.0),
            mode=get_mode("DASK"),
        )
        f = theano_dag.function([x], acc, mode=Mode(linker=DaskLinker(scheduler=c)))
        v = np.linspace(0.0, 1.0, 5)
        got, lost = bounded(lambda: f(v))
        np.testing.assert_allclose(got, _halves(v), rtol=1e-12)
        assert lost == []


def test_a_dask_function_called_in_a_task_of_the_cluster():
    with one_worker() as (_, c):
        x = tt.dvector("x")
        f = theano_dag.function([x], (tt.exp(x) * 2).sum(), mode="DASK")
        # the function, pickled to the worker, runs there on the worker's client
        future = c.submit(lambda f, v: f(v), f, np.zeros(6), pure=False)
        assert future.result(timeout=HANG_S) == 12.0


def _leave_worker(b):
    """On a worker, have it leave the cluster (the task ends); elsewhere, nothing."""
    try:
        worker = distributed.get_worker()
    except ValueError:  # run locally
        return b
    if b.size:
        worker.loop.add_callback(worker.close)
    return b


@pytest.mark.parametrize("told", ["engine", "distributed"])
def test_a_call_whose_last_worker_leaves_runs_locally_with_one_warning(monkeypatch, told):
    # Distributed waits for ever for a worker to run the call's tasks; the call waits
    # NO_WORKERS_S for one, or distributed's no-workers-timeout where set (0 here), then
    # runs them here.
    if told == "engine":
        monkeypatch.setattr(dask_cluster, "NO_WORKERS_S", 0.0)
    with one_worker() as (cl, c):
        address = _address(cl)
        x = tt.dvector("x")
        f = theano_dag.function([x], (x * 2).sum(), mode=Mode(linker=DaskLinker(scheduler=c)))
        xd = da.ones(4, chunks=2).map_blocks(_leave_worker, dtype="float64")
        # (set once the scheduler started, which reads it at its start)
        with dask.config.set(
            {"distributed.scheduler.no-workers-timeout": "0s"} if told != "engine" else {}
        ):
            got, lost = bounded(lambda: f(xd))
        assert got == 8.0
        (w,) = lost
        assert str(w.message) == (
            f"Dask engine: the cluster at {address} has had no worker for 0 s: the call runs "
            "on the local threaded scheduler instead (the same values, with this machine's "
            "cores and memory)"
        )


def test_a_call_whose_inputs_live_on_a_cluster_with_no_worker_left_names_it(monkeypatch):
    monkeypatch.setattr(dask_cluster, "NO_WORKERS_S", 0.0)
    with one_worker() as (cl, c):
        address = _address(cl)
        x = tt.dvector("x")
        w = dask_shared(c.persist(da.ones(4, chunks=2)), name="w")
        f = theano_dag.function(
            [x], (x * w).sum(), mode=Mode(linker=DaskLinker(scheduler=c, reuse_graph=False))
        )
        xd = da.ones(4, chunks=2).map_blocks(_leave_worker, dtype="float64")
        err, lost = bounded(lambda: f(xd))
        assert isinstance(err, DaskClusterError), err
        assert str(err) == (
            f"Dask engine: the cluster at {address} has had no worker for 0 s, and the call's "
            "inputs are held there (persisted dask arrays): it cannot run elsewhere. Make "
            "them again on a running cluster, or give them as numpy arrays."
        )
        assert lost == []


def test_a_call_whose_scheduler_goes_away_runs_locally_with_one_warning():
    tag = uuid.uuid4().hex

    def hold(b):  # on the worker: say it started, then wait for the test (or its end)
        try:
            distributed.get_worker()
        except ValueError:  # run locally
            return b
        if b.size:
            distributed.Event(f"started-{tag}").set()
            with contextlib.suppress(Exception):  # the scheduler gone: the wait ends
                distributed.Event(f"release-{tag}").wait(HANG_S)
        return b

    with one_worker() as (cl, c):
        address = _address(cl)
        x = tt.dvector("x")
        f = theano_dag.function([x], (x * 2).sum(), mode=Mode(linker=DaskLinker(scheduler=c)))
        xd = da.ones(4, chunks=2).map_blocks(hold, dtype="float64")
        started = distributed.Event(f"started-{tag}", client=c)
        result = {}
        t = threading.Thread(target=lambda: result.update(value=bounded(lambda: f(xd))))
        t.start()
        assert started.wait(HANG_S), "the task never started"
        cl.sync(cl.scheduler.close)  # ... during the call
        t.join(HANG_S)
        assert not t.is_alive()
        got, lost = result["value"]
        assert got == 8.0, got
        (w,) = lost
        assert str(w.message).startswith(f"Dask engine: the cluster at {address} is gone (its")
        assert str(w.message).endswith(
            ": the call runs on the local threaded scheduler instead (the same values, with "
            "this machine's cores and memory)"
        )


def test_a_function_whose_current_client_closed_says_once_it_runs_locally():
    # (Calls from one thread: a function called from another runs a copy of its own.)
    x = tt.dvector("x")
    f = theano_dag.function([x], (x * 2).sum(), mode="DASK")
    with one_worker(set_as_default=True) as (cl, c):
        address = _address(cl)
        assert f(np.ones(4)) == 8.0
        assert f.fn.client_seen[0]() is c  # ran there
    for k in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert f(np.ones(4)) == 8.0
        lost = [w for w in caught if issubclass(w.category, ClusterLostWarning)]
        if k:
            assert lost == []  # once
            continue
        (w,) = lost
        assert str(w.message) == (
            f"Dask engine: the cluster at {address}, where this function's last call ran, is "
            "gone (its client is closed): it runs on the local threaded scheduler now"
        )


def test_a_closed_client_given_as_the_scheduler_is_named():
    with one_worker() as (cl, c):
        address = _address(cl)
        x = tt.dvector("x")
        f = theano_dag.function([x], (x * 2).sum(), mode=Mode(linker=DaskLinker(scheduler=c)))
        assert f(np.ones(4)) == 8.0
    err, lost = bounded(lambda: f(np.ones(4)))
    assert isinstance(err, DaskClusterError), err
    assert str(err) == (
        "Dask engine: the distributed.Client given as DaskLinker(scheduler=...) is closed "
        f"(the cluster at {address}): compile the function with a Client that is connected, "
        "or with scheduler=None (the current client, else the local threaded scheduler)"
    )


def test_a_build_that_reads_input_values_is_found_without_the_cluster(monkeypatch):
    # A graph whose construction reads values (a boolean mask's length) is not reused:
    # building it once on placeholders finds that here, not on a worker of the current
    # client (where the placeholder's task failed, logged as a task error).
    ran_on_worker = []
    real = plan._placeholder_task

    def placeholder(name):
        ran_on_worker.append(dask_cluster.in_worker_task())
        return real(name)

    monkeypatch.setattr(plan, "_placeholder_task", placeholder)
    with one_worker(set_as_default=True):
        x = tt.dvector("x")
        f = theano_dag.function([x], x[x > 2].sum(), mode="DASK")
        v = np.arange(6.0)
        got, lost = bounded(lambda: f(v))
        assert got == 12.0 and lost == []
        assert ran_on_worker == [False]
