"""A call's task graph optimized: dask.array's blockwise fusion, culling, then linear
fusion whose fused tasks keep their own keys.

dask's linear fusion (``dask._task_spec.fuse_linear_task_spec``, which dask.array's
``optimize`` runs) names each fused task after the keys of its chain, and a name of
more than 115 characters is cut there and given four hex digits of Python's hash of
the whole: two chains of long keys (the engine's elementwise keys carry the op's
name, up to 40 characters, and a 32-digit token) can get one name, and then one
chain's task stands for both, its value read where the other's belongs (a wrong
value, or a chunk of another shape). Here a chain's fused task is stored under its
last key, the one its readers ask for, so no two tasks share a key.

The engine computes every graph it builds through :func:`optimize_arrays` (or
:func:`optimize_graph` for a plan's) and hands it to dask unoptimized.
"""

from __future__ import annotations

from theano_dag.engines.dask import backend

__all__ = ["fuse_linear", "optimize_graph", "optimize_arrays", "arrays_on"]


def fuse_linear(graph: dict, keys) -> dict:
    """``graph`` (``{key: GraphNode}``) with each chain of tasks (each one read only by
    the next, which reads nothing else) fused into one task, stored under the chain's
    last key; ``keys`` (the keys wanted) are never fused into a later task.

    >>> from dask._task_spec import Task, TaskRef, DataNode
    >>> g = {"a": DataNode("a", 1), "b": Task("b", abs, TaskRef("a")),
    ...      "c": Task("c", str, TaskRef("b"))}
    >>> fused = fuse_linear(g, ["c"])
    >>> list(fused), fused["c"]()
    (['c'], '1')
    """
    keep = set(keys)
    readers: dict = {k: [] for k in graph}
    for key, task in graph.items():
        for dep in task.dependencies:
            # (a persisted value's future becomes an alias of its own key)
            if dep in readers and dep != key:
                readers[dep].append(key)
    # key -> the one task it is fused into (its only reader, which reads only it)
    into = {}
    for key, task in graph.items():
        users = readers[key]
        if key in keep or len(users) != 1 or getattr(task, "block_fusion", False):
            continue
        nxt = graph[users[0]]
        if len(nxt.dependencies - {users[0]}) != 1 or getattr(nxt, "block_fusion", False):
            continue
        into[key] = users[0]
    fed_by = {v: k for k, v in into.items()}
    fused = {}
    for key, task in graph.items():
        if key in into:
            continue  # inside a chain: in its last task
        chain = [key]
        while chain[-1] in fed_by:
            chain.append(fed_by[chain[-1]])
        if len(chain) == 1:
            fused[key] = task
        else:
            fused[key] = backend.Task.fuse(*(graph[k] for k in reversed(chain)), key=key)
    return fused


def optimize_graph(hlg, keys, drop=()) -> dict:
    """The tasks ``keys`` (nested lists, as ``__dask_keys__``) need from ``hlg`` (a
    HighLevelGraph), blockwise layers fused, then linear chains (:func:`fuse_linear`);
    the keys ``drop`` are taken out before the linear fusion (which then leaves alone
    the tasks that read them)."""
    flat = list(backend.flatten(keys))
    hlg = backend.optimize_blockwise(hlg, keys=flat)
    # to_dict: dict(hlg) looks each key up layer by layer, O(keys x layers)
    graph = backend.convert_legacy_graph(hlg.cull(set(flat)).to_dict())
    for key in drop:
        graph.pop(key, None)
    return fuse_linear(graph, flat)


def optimize_arrays(arrays) -> list:
    """``arrays`` (dask arrays) on one optimized graph (:func:`optimize_graph`), to be
    computed with dask's own optimization off (``optimize_graph=False``).

    >>> import dask.array as da
    >>> x = da.ones(4, chunks=2)
    >>> y, = optimize_arrays([(x + 1) * 2])
    >>> len(y.dask), y.compute(optimize_graph=False).tolist()
    (2, [4.0, 4.0, 4.0, 4.0])
    """
    if not arrays:
        return []
    hlg = backend.HighLevelGraph.merge(*(a.__dask_graph__() for a in arrays))
    graph = optimize_graph(hlg, [a.__dask_keys__() for a in arrays])
    return arrays_on(graph, [(a.name, a.chunks, a._meta) for a in arrays])


def arrays_on(graph: dict, outputs) -> list:
    """Dask arrays, one per ``(name, chunks, meta)`` of ``outputs``, that all hold
    ``graph`` as one layer object: computed together, dask merges their graphs layer by
    layer and skips a layer it has seen (by identity), where a layer each (``da.Array``
    given the dict) copies the whole graph once per array.

    >>> import numpy as np
    >>> a, b = arrays_on({("a", 0): np.ones(2), ("b", 0): np.zeros(2)},
    ...                  [("a", ((2,),), np.ones(0)), ("b", ((2,),), np.ones(0))])
    >>> a.dask.layers["a"] is b.dask.layers["b"]
    True
    """
    layer = backend.MaterializedLayer(graph)
    return [
        backend.da.Array(
            backend.HighLevelGraph({name: layer}, {name: set()}), name, chunks, meta=meta
        )
        for name, chunks, meta in outputs
    ]
