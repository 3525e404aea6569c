"""A call's task graph, built once per chunk structure of the inputs and reused.

Building a call's dask collections (``translate.build``) and optimizing their graph
(``fusion.optimize_graph``: blockwise fusion, then linear fusion) costs the client a
few ms per call, the same for every call whose inputs have the same chunks. :func:`make_plan`
builds that graph once on *placeholder* inputs (dask arrays of the inputs' chunks
whose tasks are never run) and optimizes it; :meth:`Plan.instantiate` then makes a
call's graph from it by renaming its keys (every layer's token is replaced by a new
one, so that no key of a call is one a result of an earlier call still holds on a
cluster: a persisted update, a returned dask array) and pointing the placeholders'
keys at the call's inputs' own chunks.

A graph is reusable only when it depends on the inputs' chunks, shapes and dtypes
alone. A build that reads an input's values (an op whose output shape depends on
them, a shape given as a tensor input) computes a placeholder's task, which raises:
such a function is built again at every call, as before.
"""

from __future__ import annotations

import copy
import itertools
import re
import secrets

import numpy as np

from theano_dag.engines.dask import backend
from theano_dag.engines.dask.backend import is_dask_array
from theano_dag.engines.dask.fusion import arrays_on, optimize_graph
from theano_dag.tensor.type import TensorType

__all__ = ["Plan", "make_plan", "signature", "PlaceholderRead"]

_TOKEN = re.compile(r"[0-9a-f]{32}")


class PlaceholderRead(RuntimeError):
    """A build read the values of an input (its graph cannot be reused)."""


def _placeholder_task(name):
    raise PlaceholderRead(f"the values of input {name!r} were read while building")


def signature(fgraph, input_storage, chunks_for):
    """The chunk structure of the inputs now in the cells, or None when a graph made
    for it could not be reused (an input that is not an array, a dask input made by a
    graph of several layers, which dask's optimization would fuse into the call's, or
    of chunks unknown until computed)."""
    sig = []
    for k, (var, cell) in enumerate(zip(fgraph.inputs, input_storage)):
        value = cell[0]
        if not isinstance(var.type, TensorType) or value is None:
            return None
        if is_dask_array(value):
            if len(value.dask.layers) != 1 or any(np.isnan(c).any() for c in value.chunks):
                return None  # several layers, or chunks not known before computing
            sig.append(("dask", value.chunks, value.dtype.str))
        else:
            value = np.asarray(value)
            spec = chunks_for(k, var)
            try:
                chunks = backend.input_chunks(spec, value.shape, value.dtype)
            except Exception:  # noqa: BLE001 (a spec that fits no such input: the call says)
                return None
            sig.append(("numpy", chunks, value.dtype.str))
    return tuple(sig)


class Plan:
    """One optimized task graph of a function's call, for one chunk structure."""

    def __init__(self, graph, holders, outputs, owners):
        self.graph = graph  # {key: GraphNode}, placeholders' keys left out
        self.holders = holders  # input index -> placeholder layer name
        self.outputs = outputs  # per output: (name, chunks, meta) or ("local", value)
        self.owners = owners  # {layer name as built: node or input variable}
        self.tokens = sorted({t for key in graph for t in _TOKEN.findall(_name(key))})

    def instantiate(self, inputs):
        """The outputs (dask arrays, or local values copied) for ``inputs`` (index ->
        the call's dask array of input ``k``); returns ``(outputs, renamed)``, where
        ``renamed`` maps each layer name as built to the call's."""
        fresh = secrets.token_hex(16)
        salt = int(fresh, 16)
        new = {t: f"{int(t, 16) ^ salt:032x}" for t in self.tokens}

        def rename(name):
            if not _TOKEN.search(name):  # a name of no token (a uuid's): one added
                return f"{name}-{fresh}"
            return _TOKEN.sub(lambda m: new[m.group()], name)

        subs = {}
        dsk = {}
        for k, name in self.holders.items():
            arr = inputs[k]
            for idx in itertools.product(*(range(n) for n in arr.numblocks)):
                subs[(name, *idx)] = (arr.name, *idx)
            dsk.update(arr.__dask_graph__())
        names = {}
        for key in self.graph:
            old = _name(key)
            nm = names.get(old)
            if nm is None:
                nm = names[old] = rename(old)
            subs[key] = (nm, *key[1:]) if isinstance(key, tuple) else nm
        for key, task in self.graph.items():
            dsk[subs[key]] = task.substitute(subs, key=subs[key])
        lazy = [(names[o[0]], o[1], o[2]) for o in self.outputs if o[0] != "local"]
        arrays = iter(arrays_on(dsk, lazy))
        outs = [_fresh(o[1]) if o[0] == "local" else next(arrays) for o in self.outputs]
        return outs, names


def _fresh(value):
    """A copy of a local output (never the same object twice): a number or an array as a
    numpy array, another value (a typed list's list of arrays) as a deep copy of it."""
    if isinstance(value, (np.ndarray, np.generic, int, float, complex)):
        return np.array(value, copy=True)
    return copy.deepcopy(value)


def _reads_placeholder(obj, depth=0) -> bool:
    """Whether a placeholder's task is inside ``obj`` (a task, its arguments, a fused
    task's subgraph...): a graph optimized while it was built (a rule that hands dask a
    whole array's graph to optimize) may hold one inlined, where no key points to it."""
    if obj is _placeholder_task:
        return True
    if depth > 50:
        return True  # too deep to tell: not reused
    if isinstance(obj, dict):
        items = obj.values()
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = obj
    else:
        items = [getattr(obj, a, None) for a in ("func", "args", "kwargs", "value")]
        items = [x for x in items if x is not None and x is not obj]
        if not items or isinstance(obj, (str, bytes, np.ndarray)):
            return False
    return any(_reads_placeholder(x, depth + 1) for x in items)


def _name(key):
    return key[0] if isinstance(key, tuple) else key


def make_plan(fgraph, sig, build_values, outputs=None):
    """Build the graph of ``outputs`` (default: ``fgraph``'s outputs) on placeholder
    inputs of chunk structure ``sig`` (``build_values(values, owners)`` runs the
    engine's build) and optimize it; None when it cannot be reused."""
    values, holders, holder_keys = {}, {}, []
    for k, (var, (_, chunks, dtype)) in enumerate(zip(fgraph.inputs, sig)):
        name = f"theano_dag-input{k}-{secrets.token_hex(8)}"
        numblocks = [len(c) for c in chunks]
        dsk = {}
        for idx in itertools.product(*(range(n) for n in numblocks)):
            key = (name, *idx)
            dsk[key] = backend.Task(key, _placeholder_task, name)
            holder_keys.append(key)
        values[var] = backend.da.Array(
            dsk, name, chunks, meta=np.empty((0,) * len(chunks), dtype=np.dtype(dtype))
        )
        holders[k] = name
    owners = {}
    try:
        # A build that reads values computes here, at once: under a current distributed
        # client a placeholder's task went to a worker to fail there (a logged error).
        with backend.dask.config.set(scheduler="sync"):
            build_values(values, owners)
    except Exception:  # noqa: BLE001 (PlaceholderRead, or an error the call's own build says)
        return None
    outputs = fgraph.outputs if outputs is None else outputs
    outs = [values[o] if o in values else o.data for o in outputs]
    lazy = [o for o in outs if is_dask_array(o)]
    graph = {}
    if lazy:
        hlg = backend.HighLevelGraph.merge(*(o.__dask_graph__() for o in lazy))
        # The placeholders out before the linear fusion, so that none is fused into
        # its reader: the call's inputs' chunks take their keys.
        graph = optimize_graph(hlg, [o.__dask_keys__() for o in lazy], drop=holder_keys)
        if any(_reads_placeholder(task) for task in graph.values()):
            return None  # pragma: no cover (a fusion that took a placeholder in)
    plan_outs = []
    for o in outs:
        if is_dask_array(o):
            if o.name not in {_name(k) for k in graph}:
                return None  # an output that is an input as it came
            plan_outs.append((o.name, o.chunks, o._meta))
        else:
            plan_outs.append(("local", o))
    return Plan(graph, holders, plan_outs, owners)
