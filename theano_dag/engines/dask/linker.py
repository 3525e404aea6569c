"""``DaskLinker``: the Dask engine's linker (``Mode(linker="dask")``, ``mode="DASK"``).

The optdb pass ``dask_gather`` (tag ``dask``, which this engine's Modes include) has
marked with ``DaskGather`` the values that an op with no chunked form reads whole;
the Modes leave out the in-place rewrites (a chunk is shared by every task that
reads it, so no kernel may overwrite one) and the fused reductions (a reduction is
a dask tree reduction over the chunks of the fused elementwise kernel's output).
``accept(fgraph)`` only binds the linker; ``make_thunk()`` returns a
:class:`DaskThunk`.

Each call turns the graph into dask collections (``translate.build``): inputs given
as numpy arrays are chunked (``chunks``: one spec for every input, or a dict by input
name or position; ``"auto"`` lets dask choose), dask arrays are used as they are.
Then everything is computed in one go by ``scheduler``: a ``distributed.Client``,
a dask scheduler name (``"threads"``, ``"processes"``, ``"sync"``), or None: the
current client if there is one, else the threaded scheduler. Outputs come back as
numpy arrays, or as dask arrays (not computed) with ``return_dask=True``. Updates of
shared variables holding dask arrays (``DaskSharedVariable``) are persisted where
the scheduler keeps them (on the cluster's workers) and stay dask arrays.

A call's graph, optimized, is kept per chunk structure of the inputs (``engines.dask.
plan``: chunks and dtypes; a numpy input's shape and dtype) and reused by the next
call of the same structure, its keys renamed and the call's input chunks put in
(``reuse_graph=False``: built and optimized again at every call, as a graph whose
construction reads input values always is).
"""

from __future__ import annotations

import re
import sys
import threading
import warnings
import weakref

import numpy as np

from theano_dag.engines.basic import Container, Linker, io_storage_map
from theano_dag.engines.callspec import Thunk, refuse_none
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.dask import backend, cluster
from theano_dag.engines.dask.backend import current_client, is_dask_array, require
from theano_dag.engines.dask.errors import ClusterLostWarning, DaskTaskError, task_error
from theano_dag.engines.dask.fusion import optimize_arrays
from theano_dag.engines.dask.plan import make_plan, signature
from theano_dag.engines.dask.shared import DaskInputType
from theano_dag.engines.dask.translate import build, check_chunks
from theano_dag.sparse.type import SparseType
from theano_dag.tensor.type import TensorType

__all__ = ["DaskLinker", "DaskThunk", "MAX_PLANS"]

# Chunk structures whose graph a function keeps (the oldest one goes first).
MAX_PLANS = 8


class DaskLinker(Linker):
    """Run a FunctionGraph as a Dask task graph (see the module docstring).

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> from theano_dag.compile.function import function
    >>> from theano_dag.compile.mode import Mode
    >>> x = tt.dvector("x")
    >>> f = function([x], (tt.exp(x) * 2).sum(), mode=Mode(linker=DaskLinker(chunks=2)))
    >>> f(np.zeros(5))
    array(10.)
    """

    required_rewrites = ("dask",)
    incompatible_rewrites = ("inplace", "fused_reduce")

    def __init__(
        self,
        chunks="auto",
        scheduler=None,
        return_dask=False,
        rechunk=True,
        allow_gc=None,
        reuse_graph=True,
    ):
        super().__init__(allow_gc=allow_gc)
        self.chunks = chunks
        self.reuse_graph = bool(reuse_graph)
        self.rechunk = bool(rechunk)
        self.dask_scheduler = scheduler
        # The cluster of a Client given, named now: a closed client no longer knows it.
        self.cluster_name = cluster.describe(scheduler) if hasattr(scheduler, "status") else None
        self.return_dask = bool(return_dask)
        self.fgraph = None
        self.updates = {}

    def accept(self, fgraph, no_recycling=None, profile=None):
        """Bind to ``fgraph`` (left as it is: the ``dask_gather`` pass has lowered it)."""
        require()
        _refuse_sparse(fgraph)
        if self.fgraph is not None and self.fgraph is not fgraph:
            return self.clone().accept(fgraph, no_recycling, profile)
        self.fgraph = fgraph
        return self

    def accept_var_updates(self, updates):
        """``{shared input variable: update output variable}`` (from FunctionMaker)."""
        self.updates = dict(updates)

    def inner_linker(self):
        """The CPU engine's linker: an op with an inner graph (a scan, a lazy branch)
        runs as one task over its whole inputs, and its steps inside that task on the
        CPU engine, as under the default mode; each step as a dask graph of its own
        cost some 25 ms of dask's overhead. It is the task's worker's CPU engine (its
        kernels compiled there).

        >>> type(DaskLinker().inner_linker()).__name__
        'CPULinker'
        """
        return CPULinker()

    def make_thunk(self, input_storage=None, output_storage=None, storage_map=None):
        fg = self.fgraph
        if fg is None:
            raise ValueError("DaskLinker.make_thunk: call accept(fgraph) first")
        if input_storage is None:
            input_storage = [[None] for _ in fg.inputs]
        if output_storage is None:
            output_storage = [[None] for _ in fg.outputs]
        thunk = DaskThunk(self, input_storage, output_storage)
        thunk.given_cells = storage_map  # a copy's cells of the original (share_memory)
        ins = [
            Container(DaskInputType(v.type) if _is_tensor(v) else v, cell, name=v.name)
            for v, cell in zip(fg.inputs, input_storage)
        ]
        outs = [Container(v, cell, readonly=True) for v, cell in zip(fg.outputs, output_storage)]
        thunk.check_chunks()
        return thunk, ins, outs

    def chunks_for(self, k, var):
        """The chunk spec of input ``k`` (variable ``var``)."""
        spec = self.chunks
        if isinstance(spec, dict):
            for key in (var, var.name, k):
                if key is not None and key in spec:
                    return spec[key]
            return "auto"
        return spec


class DaskThunk(Thunk):
    """One call: the graph as dask collections, computed (or handed out) at once."""

    def __init__(self, linker, input_storage, output_storage):
        self.linker = linker
        self.fgraph = fg = linker.fgraph
        self.order = linker.schedule(fg)
        self.input_storage = input_storage
        self.output_storage = output_storage
        in_idx = {v: k for k, v in enumerate(fg.inputs)}
        # output index -> input index of the shared variable it updates
        self.update_of = {
            j: in_idx[inp]
            for inp, out in linker.updates.items()
            for j, o in enumerate(fg.outputs)
            if o is out and inp in in_idx
        }
        # (input index, index among the computed values) of each input that an in-place
        # op of the graph destroys: its array gets that value after the call.
        self.targets = list(fg.outputs)
        self.writeback = []
        for k, final in _destroyed_inputs(fg):
            if final not in self.targets:
                self.targets.append(final)
            self.writeback.append((k, self.targets.index(final)))
        self.given_cells = None
        self._storage_map = None
        self.kernels: dict = {}  # elementwise node -> its ChunkKernel, made once
        # The last call's {layer name: node or input variable}, to name a failed task.
        self.owners: dict = {}
        # chunk structure -> its Plan (None: not reusable); the last call's layer
        # names as built -> as run.
        self.plans: dict = {}
        self.renamed: dict = {}
        # (a weak reference to, and the cluster of) the current client the last call ran
        # on, or None: a call that finds it closed, and no other, says once that it runs
        # locally now.
        self.client_seen = None

    @property
    def storage_map(self) -> dict:
        """Theano's ``fn.storage_map`` of the cells this engine has (made on first use):
        the inputs', the outputs' and the constants'. The values between them are dask
        tasks, which have no cells."""
        if self._storage_map is None:
            self._storage_map = io_storage_map(
                self.fgraph, self.input_storage, self.output_storage, self.given_cells
            )
        return self._storage_map

    def check_chunks(self):
        """Raise ChunkError now where an op cannot run on the chunks it will get, for
        the inputs whose chunks are known before the first call: shared variables
        (their current value), inputs of a fully static shape (with the linker's
        ``chunks``), scalars."""
        values = {}
        for k, (var, cell) in enumerate(zip(self.fgraph.inputs, self.input_storage)):
            if not _is_tensor(var):
                continue
            value = cell[0]
            if is_dask_array(value):
                values[var] = value
                continue
            shape = np.shape(value) if value is not None else var.type.shape
            if any(s is None for s in shape):
                continue
            try:
                chunks = backend.input_chunks(self.linker.chunks_for(k, var), shape, var.type.dtype)
                values[var] = backend.da.empty(shape, dtype=var.type.dtype, chunks=chunks)
            except Exception:  # noqa: S112 (a chunk spec that fits no such input: the call says)
                continue
        check_chunks(self.order, values, self.kernels, self.linker.rechunk)

    def scheduler(self):
        s = self.linker.dask_scheduler
        if s is None:
            s = current_client()
            seen, where = self.client_seen or (lambda: None, None)
            seen = seen()
            if s is None and seen is not None and seen.status == "closed":
                warnings.warn(
                    f"Dask engine: {where}, where this function's last call "
                    "ran, is gone (its client is closed): it runs on the local threaded "
                    "scheduler now",
                    ClusterLostWarning,
                    stacklevel=4,
                )
            if s is None:
                self.client_seen = None
            elif seen is not s:  # named once per client, not at every call
                self.client_seen = (weakref.ref(s), cluster.describe(s))
            return s or "threads"
        if hasattr(s, "status"):  # a distributed Client
            cluster.check_open(s, self.linker.cluster_name)
        return s

    def collections(self):
        """The dask value of every output for the inputs now in the cells (computes
        nothing but shapes and the small local values)."""
        return self._targets()[: len(self.fgraph.outputs)]

    def _targets(self):
        # The outputs' values, then those of the destroyed inputs' final contents.
        self.renamed = {}
        sig = None
        if self.linker.reuse_graph:
            sig = signature(self.fgraph, self.input_storage, self.linker.chunks_for)
        if sig is not None:
            if sig not in self.plans:
                if len(self.plans) >= MAX_PLANS:
                    del self.plans[next(iter(self.plans))]
                self.plans[sig] = make_plan(self.fgraph, sig, self._build, self.targets)
            plan = self.plans[sig]
            if plan is not None:
                return self._from_plan(plan, sig)
        return self._collections()

    def _build(self, values, owners):
        build(self.order, values, self.kernels, self.linker.rechunk, owners)

    def _from_plan(self, plan, sig):
        owners = self.owners = {}
        inputs = {}
        for k, (var, cell) in enumerate(zip(self.fgraph.inputs, self.input_storage)):
            value = cell[0]
            if not is_dask_array(value):
                # name=False: a random key, not a hash of the whole array.
                value = backend.da.from_array(np.asarray(value), chunks=sig[k][1], name=False)
            inputs[k] = value
            owners.update(dict.fromkeys(value.dask.layers, var))
        outs, self.renamed = plan.instantiate(inputs)
        for old, new in self.renamed.items():
            if old in plan.owners:
                owners[new] = plan.owners[old]
        return outs

    def _collections(self):
        fg = self.fgraph
        values = {}
        owners = self.owners = {}
        for k, (var, cell) in enumerate(zip(fg.inputs, self.input_storage)):
            value = cell[0]
            if _is_tensor(var) and not is_dask_array(value) and value is not None:
                # name=False: a random key, not a hash of the whole array.
                value = backend.from_numpy(np.asarray(value), self.linker.chunks_for(k, var))
            if is_dask_array(value):
                owners.update(dict.fromkeys(value.dask.layers, var))
            values[var] = value
        self._build(values, owners)
        outs = [values[o] if o in values else o.data for o in self.targets]
        # Optimized here, as a plan's graph is (engines.dask.fusion: dask's own linear
        # fusion can give two tasks one key); dask computes it as it is.
        lazy = [j for j, v in enumerate(outs) if is_dask_array(v)]
        for j, v in zip(lazy, optimize_arrays([outs[j] for j in lazy])):
            outs[j] = v
        return outs

    def __call__(self):
        fg = self.fgraph
        refuse_none("Dask engine", fg.inputs, self.input_storage)
        outs = self._targets()
        sched = self.scheduler()
        # Updates that stay where the scheduler keeps them: those of shared variables
        # whose value is a dask array already.
        keep = {
            j
            for j, k in self.update_of.items()
            if is_dask_array(self.input_storage[k][0]) and is_dask_array(outs[j])
        }
        if self.linker.return_dask:
            keep = {j for j, v in enumerate(outs) if is_dask_array(v)}
        try:
            self._run(outs, sched, keep)
        except DaskTaskError as exc:
            # One of the engine's own tasks, named where it ran by its key as built:
            # the key it had in this call instead.
            msg = str(exc)
            for old, new in self.renamed.items():
                msg = msg.replace(f"'{old}'", f"'{new}'")
            if msg == str(exc):
                raise
            raise task_error(msg, exc.error_type) from exc
        except Exception as exc:
            key = _failed_key(exc)
            if key is None:
                raise
            if type(exc).__name__ == "KilledWorker":
                raise DaskTaskError(
                    f"Dask engine: task {key!r} ({self._what(key)}) failed: KilledWorker: the "
                    f"workers running it died (more than {exc.allowed_failures} times)"
                ) from exc
            # A task of dask.array's own (a product, a tree reduction, a rechunk...).
            raise task_error(
                f"Dask engine: task {key!r} ({self._what(key, native=True)}) failed: "
                f"{type(exc).__name__}: {exc}",
                type(exc),
            ) from exc
        if not self.linker.return_dask:
            self._write_back(outs)
        placed = []
        for j, (var, value) in enumerate(zip(fg.outputs, outs)):
            if not is_dask_array(value) and hasattr(var.type, "dtype"):
                value = np.asarray(value, dtype=var.type.dtype)
                # Dask computes equal tasks once (two copies of one input have one
                # token), and a one-chunk result is that chunk itself: two outputs must
                # not be one array, or writing into one changes the other.
                if any(np.may_share_memory(value, p) for p in placed):
                    value = value.copy()
                placed.append(value)
                if not _is_tensor(var):
                    value = value[()]  # a scalar's value is a numpy scalar, as elsewhere
            self.output_storage[j][0] = value

    def _write_back(self, outs):
        """Put into each destroyed input's array (a numpy array the caller gave or a
        shared variable holds) the value the in-place ops left there on the other
        engines: the graph overwrote it (``In(x, mutable=True)``, or an in-place op
        of the caller's own), and the caller may read it."""
        for k, j in self.writeback:
            target = self.input_storage[k][0]
            value = np.asarray(outs[j])
            if not (
                isinstance(target, np.ndarray)
                and target.flags.writeable
                and target.shape == value.shape
            ):
                continue
            for i, out in enumerate(outs):
                # An output that is a view of the input's array keeps what it read.
                if isinstance(out, np.ndarray) and np.may_share_memory(out, target):
                    outs[i] = out.copy()
            np.copyto(target, np.asarray(outs[j]), casting="unsafe")

    def _what(self, key, native=False) -> str:
        """What the task of ``key`` was doing: the op of the node that made its layer;
        ``native``: a task of dask.array's own, named by its operation too."""
        name = key[0] if isinstance(key, tuple) else key
        owner = self.owners.get(name)
        if owner is None:
            return "a task of the call"
        if not hasattr(owner, "op"):
            return f"making input {owner.name or self.fgraph.inputs.index(owner)!r}"
        if native:
            # dask.array's layer names are the operation, then a token
            operation = re.sub(r"-[0-9a-f]{32}$", "", str(name))
            return f"dask.array's {operation} for {owner.op}"
        return f"running {owner.op}"

    def _run(self, outs, sched, keep):
        lazy = [j for j, v in enumerate(outs) if is_dask_array(v)]
        persist = [j for j in lazy if j in keep]
        compute = [j for j in lazy if j not in keep]
        if persist and not self.linker.return_dask:
            # One graph for both: the persisted updates and the computed outputs share
            # their common work (computed once), then the outputs are gathered.
            done = _persist([outs[j] for j in lazy], sched)
            for j, v in zip(lazy, done):
                outs[j] = v
        elif persist:
            done = _persist([outs[j] for j in persist], sched)
            for j, v in zip(persist, done):
                outs[j] = v
        if compute:
            done = _compute([outs[j] for j in compute], sched)
            for j, v in zip(compute, done):
                outs[j] = v


def _is_tensor(var) -> bool:
    """Whether ``var`` is an array input (chunked): a scalar (``ScalarType``, which has
    an ``ndim`` too) or another value is a local value."""
    return isinstance(var.type, TensorType)


def _destroyed_inputs(fgraph):
    """``(input index, variable)`` for each input of ``fgraph`` that an in-place op
    overwrites whole: the variable is the value the input's memory holds at the end
    (the last of a chain of in-place ops, each overwriting the one before)."""
    found = []
    for k, var in enumerate(fgraph.inputs):
        final = var
        while True:
            nxt = None
            for node, i in fgraph.clients.get(final, ()):
                if node == "output":
                    continue
                for o, ins in (getattr(node.op, "destroy_map", None) or {}).items():
                    if i in ins:
                        nxt = node.outputs[o]
            if nxt is None:
                break
            final = nxt
        if final is not var:
            found.append((k, final))
    return found


def _failed_key(exc):
    """The key of the task a scheduler's error is about, else None: distributed's
    KilledWorker carries it; ``cluster.compute`` notes it for a client, and
    ``_pack_exception`` for dask's threaded and synchronous schedulers."""
    if type(exc).__name__ == "KilledWorker":
        return getattr(exc, "task", None)
    return getattr(exc, "_theano_dag_key", None)


def _note_key(exc):
    """Note on ``exc`` the key of the task that raised it: called from dask.local's
    ``execute_task``, whose ``key`` is that task's (two frames up)."""
    caller = sys._getframe(2)
    if caller.f_code.co_name == "execute_task":
        try:
            exc._theano_dag_key = caller.f_locals.get("key")
        except AttributeError:  # an exception type without a __dict__
            pass


def _pack_and_raise(exc, dumps):
    # dask.local's pack_exception hook for its synchronous scheduler (raises, as its own)
    _note_key(exc)
    raise exc


def _pack_and_return(exc, dumps):
    # the hook for the threaded scheduler (returns the exception, as dask.threaded's)
    _note_key(exc)
    return exc, exc.__traceback__


_POOL = []  # the threads of _threads_get, made on first use
# Their names' prefix: how a task tells it runs in one of them. (The executor adds a
# thread to its ``_threads`` after starting it, so a task its first thread runs may not
# find that thread there yet, and a nested graph then waited for the busy pool.)
_POOL_PREFIX = "theano_dag-dask"


def _threads_get(dsk, keys, **kwargs):
    """dask's threaded scheduler (``dask.threaded.get``) with the hook that names a
    failed task's key."""
    if not _POOL:
        threaded = backend.threaded
        _POOL.append(
            threaded.ContextAwareThreadPoolExecutor(
                threaded.CPU_COUNT, thread_name_prefix=_POOL_PREFIX
            )
        )
    pool = _POOL[0]
    for name in ("num_workers", "pool"):  # dask.threaded.get's own: the pool is ours
        kwargs.pop(name, None)
    if threading.current_thread().name.startswith(_POOL_PREFIX + "_"):
        # A task of this pool computing a graph of its own (the step of a scan given a
        # Dask Mode, scan(..., mode=get_mode("DASK")); a step given no mode runs on the
        # CPU engine, see inner_linker): its tasks would wait for threads that all wait
        # on them. They run in this thread, in order.
        return backend.local.get_sync(dsk, keys, pack_exception=_pack_and_raise, **kwargs)
    return backend.local.get_async(
        pool.submit, pool._max_workers, dsk, keys, pack_exception=_pack_and_return, **kwargs
    )


def _local_kwargs(sched):
    """How dask.compute/persist is told to use ``sched`` (a name or a callable)."""
    if sched in ("sync", "synchronous", "single-threaded"):
        return {"scheduler": sched, "pack_exception": _pack_and_raise}
    if sched in ("threads", "threading"):
        return {"scheduler": _threads_get}
    return {"scheduler": sched}


def _persist(arrays, sched):
    # The engine's graphs are optimized when built (engines.dask.fusion).
    if hasattr(sched, "persist"):  # a distributed Client: the chunks stay on the workers
        return sched.persist(arrays, optimize_graph=False)
    return backend.dask.persist(*arrays, optimize_graph=False, **_local_kwargs(sched))


def _compute(arrays, sched):
    if hasattr(sched, "compute"):  # a distributed Client
        return cluster.compute(arrays, sched, lambda lost: _compute(lost, "threads"))
    return backend.dask.compute(*arrays, optimize_graph=False, **_local_kwargs(sched))


def _refuse_sparse(fgraph):
    """Sparse matrices have no dask.array form: say which value is one, and where to go."""
    for node in fgraph.toposort():
        for v in (*node.inputs, *node.outputs):
            if isinstance(v.type, SparseType):
                raise NotImplementedError(
                    f"The Dask engine cannot run sparse matrices: {v} ({v.type}) of node "
                    f"{node.op} is one. It runs dense tensors (dask.array chunks) only; "
                    "run sparse graphs with the cpu or py engine (mode='FAST_RUN')."
                )
