"""A call's graph on a ``distributed.Client``: from inside a worker's task too, and what
becomes of a call whose cluster is lost.

From a worker's task (the step of a scan given a Dask Mode, ``scan(...,
mode=get_mode("DASK"))``; a Dask-linked function that an op's ``perform`` calls) the
current client is the worker's own, and the call's tasks want a thread of a worker's
pool while the calling task holds one and waits for them: on a worker of one thread
they never ran. While it waits, the calling task leaves its worker's pool and takes a
thread again after (``distributed.worker_client()``, distributed's documented way for
a task that launches tasks: it secedes, and rejoins on leaving), so the call's tasks
run on the cluster as any call's do. Running them in the calling thread instead, as a
nested graph of the threaded scheduler is run, would hold the whole step in one
worker's memory on one core: a step given a Dask Mode is one large enough to want
chunks spread over the cluster.

A cluster lost during a call (its client closed, its scheduler gone, or no worker
left for ``NO_WORKERS_S`` seconds, or distributed's ``no-workers-timeout`` where set,
while the call waits: distributed would wait for ever) does not hang it: its tasks
there are cancelled and the call runs on the local threaded scheduler with one
:class:`ClusterLostWarning`, or, where its inputs live on that cluster (persisted dask
arrays), raises :class:`DaskClusterError` naming it. A dying worker is no such loss:
the scheduler runs its tasks again on the others (distributed's ``allowed-failures``),
and a task that killed that many workers is a ``DaskTaskError`` (``KilledWorker``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import warnings

from theano_dag.engines.dask import backend
from theano_dag.engines.dask.errors import ClusterLostWarning, DaskClusterError

__all__ = ["NO_WORKERS_S", "in_worker_task", "describe", "check_open", "compute"]

# How long a call waits on a cluster that has no worker before it gives the cluster up
# (a nanny restarts a dead worker in a few seconds), unless distributed's
# ``distributed.scheduler.no-workers-timeout`` says (a cluster whose workers come from a
# batch queue may want minutes); and how often a waiting call looks.
NO_WORKERS_S = 30.0
POLL_S = 1.0


def in_worker_task() -> bool:
    """Whether this thread runs a task of a ``distributed`` worker (never imports
    distributed: a process with workers has).

    >>> in_worker_task()
    False
    """
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return False
    try:
        distributed.get_worker()
    except ValueError:
        return False
    return True


def describe(client) -> str:
    """``client``'s cluster for a message: its scheduler's address, where known."""
    try:
        address = client.scheduler.address
    except AttributeError:  # a client closed before it connected
        address = None
    return f"the cluster at {address}" if address else f"the cluster of {client!r}"


def check_open(client, where):
    """Raise :class:`DaskClusterError` if ``client``, the scheduler a linker was given,
    is closed: it runs nothing, and the engine does not move a call it was told to run
    there elsewhere (its data may not fit here). ``where``: its cluster, as
    :func:`describe` named it while it was open."""
    if client.status in ("closing", "closed"):
        raise DaskClusterError(
            f"Dask engine: the distributed.Client given as DaskLinker(scheduler=...) is "
            f"{client.status} ({where}): compile the function with a Client that "
            "is connected, or with scheduler=None (the current client, else the local "
            "threaded scheduler)"
        )


def compute(arrays, client, local):
    """``arrays`` (dask arrays) computed on ``client``'s cluster, as a list of values;
    ``local(arrays)`` computes them on this machine where that cluster is lost."""
    where = describe(client)
    distributed = sys.modules["distributed"]
    if not arrays:
        return []
    try:
        futures = client.compute(arrays, optimize_graph=False)
    except Exception:
        why = _trouble(client, workers=False)
        if why is None:
            raise
        return _elsewhere(arrays, (), client, where, why, local)
    with _out_of_pool():
        try:
            why = _wait(client, futures)
            if why is None:
                return client.gather(futures)
        except distributed.CancelledError:
            # Tasks of the call's own, cancelled: by a client that lost its scheduler.
            why = _trouble(client, workers=False) or "cancelled the call's tasks"
        except Exception as exc:
            _note_failed_key(exc, client, futures)
            raise
    return _elsewhere(arrays, futures, client, where, why, local)


def _out_of_pool():
    """A context in which this thread has left its worker's pool, if it runs a task."""
    stack = contextlib.ExitStack()
    if in_worker_task():
        stack.enter_context(sys.modules["distributed"].worker_client())
    return stack


def _wait(client, futures):
    """Wait for ``futures`` to end (in a result, an error, or cancelled): None, or why
    the cluster was given up first. (``distributed.wait(timeout=...)`` did not return
    once the scheduler was gone.)"""
    ended = threading.Event()
    left = [len(futures)]
    lock = threading.Lock()

    def one_ended(_future):
        with lock:
            left[0] -= 1
            if left[0] <= 0:
                ended.set()

    for f in futures:
        f.add_done_callback(one_ended)
    since = None
    while not ended.wait(POLL_S):
        why = _trouble(client)
        if why is None:
            since = None
            continue
        if client.status != "running":
            return why
        now = time.monotonic()
        since = now if since is None else since
        if now - since >= _no_workers_s():
            return why
    return None


def _no_workers_s() -> float:
    """How long a call waits for a worker: distributed's ``no-workers-timeout`` where
    it is set (how long its scheduler lets a task wait for one), else NO_WORKERS_S."""
    dask = sys.modules["dask"]
    given = dask.config.get("distributed.scheduler.no-workers-timeout", None)
    return NO_WORKERS_S if given is None else dask.utils.parse_timedelta(given, "s")


def _trouble(client, workers=True):
    """Why ``client``'s cluster cannot run a call now, else None; ``workers``: a
    cluster with no worker is one (a call would wait for one)."""
    if client.status in ("closing", "closed"):
        return f"is gone (its client is {client.status})"
    if client.status != "running":
        return "is gone (its client lost the connection to its scheduler)"
    if not workers:
        return None
    try:
        nthreads = client.nthreads()
    except Exception:  # noqa: BLE001 (any failure to ask: the scheduler does not answer)
        return "is gone (its scheduler does not answer)"
    if not nthreads:
        return f"has had no worker for {_no_workers_s():g} s"
    return None


def _elsewhere(arrays, futures, client, where, why, local):
    """The call whose cluster was given up, on this machine (with one warning), or an
    error naming that cluster where its inputs live there."""
    with contextlib.suppress(Exception):  # a client that is gone cancels nothing
        client.cancel(list(futures))
    if not _whole(arrays):
        raise DaskClusterError(
            f"Dask engine: {where} {why}, and the call's inputs are held there (persisted "
            "dask arrays): it cannot run elsewhere. Make them again on a running cluster, "
            "or give them as numpy arrays."
        )
    warnings.warn(
        f"Dask engine: {where} {why}: the call runs on the local threaded scheduler "
        "instead (the same values, with this machine's cores and memory)",
        ClusterLostWarning,
        stacklevel=5,
    )
    return local(arrays)


def _whole(arrays) -> bool:
    """Whether the graph of ``arrays`` holds every task it needs: not a persisted
    array's chunks, which only the cluster holds (as futures, or as keys the graph
    names and the engine's optimization left out)."""
    if sys.modules["distributed"].futures_of(arrays):
        return False
    graph = {}
    for a in arrays:
        graph.update(a.__dask_graph__())
    graph = backend.convert_legacy_graph(graph)
    return all(dep in graph for node in graph.values() for dep in node.dependencies)


def _note_failed_key(exc, client, futures):
    """Ask the scheduler which task the error comes from (it blames one: the task
    that raised, for every task that needed it)."""
    errored = [f.key for f in futures if f.status == "error"]
    try:
        key = client.sync(client.scheduler.get_error_cause, keys=errored) if errored else None
    except Exception:  # the scheduler gone: the error as it came
        return
    if key is not None:
        try:
            exc._theano_dag_key = key
        except AttributeError:  # an exception type without a __dict__
            pass
