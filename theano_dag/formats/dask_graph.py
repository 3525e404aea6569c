"""A Dask task graph in the dag format, and the one a compiled function runs.

Dask's graph is ``{key: task}`` with tuple keys such as ``("add-3bb3", 0)``; the
dag format reserves tuples for multi-output jobs, so each key becomes its string.
A job's ``fn`` is a :class:`DaskTask`: called with the values of its ``args`` (the
task's dependencies, in order) it runs the task, so ``formats.interpret`` can run
the dag by itself and ``convert`` takes it along the chain (unidag, index-dag ...).

>>> import numpy as np
>>> import theano_dag, theano_dag.tensor as tt
>>> from theano_dag.compile.mode import Mode
>>> from theano_dag.engines.dask import DaskLinker
>>> from theano_dag.formats import interpret
>>> x = tt.dvector("x")
>>> f = theano_dag.function([x], (x * 2).sum(), mode=Mode(linker=DaskLinker(chunks=2)))
>>> dag, outputs = function_to_dag(f, np.arange(4.0))
>>> len(dag)  # 2 chunks of x, 2 tasks each computing its chunk's sum of x * 2, the total
5
>>> values = interpret(dag, {}, lambda fn, args: (fn(*args),))
>>> float(values[outputs[0]])
12.0
"""

from __future__ import annotations

from theano_dag.engines.dask import dask_collections, is_dask_array

__all__ = ["DaskTask", "dask_to_dag", "function_to_dag"]


class DaskTask:
    """One Dask task as the ``fn`` of a dag job: ``fn(*dependency values)``."""

    def __init__(self, node, deps):
        self.node = node
        self.deps = deps

    def __call__(self, *values):
        return self.node(dict(zip(self.deps, values)))

    def __repr__(self):
        return f"DaskTask({self.node!r})"


def _name(key) -> str:
    return key if isinstance(key, str) else str(key)


def dask_to_dag(graph) -> dict:
    """The dag of a dask graph (a mapping ``{key: task}`` or a dask collection)."""
    # The task-spec module is private to dask; the optional extra pins its versions.
    from dask._task_spec import convert_legacy_graph  # optional extra: dask

    if hasattr(graph, "__dask_graph__"):
        graph = graph.__dask_graph__()
    nodes = convert_legacy_graph(dict(graph))
    dag = {}
    for key, node in nodes.items():
        deps = sorted(node.dependencies, key=str)
        dag[_name(key)] = {"fn": DaskTask(node, deps), "args": tuple(_name(d) for d in deps)}
    return dag


def function_to_dag(f, *args) -> tuple[dict, list]:
    """The dag of one call of ``f`` (compiled with ``Mode(linker="dask")``) on ``args``,
    and the keys (strings) of its outputs' chunks, in order."""
    outs = [o for o in dask_collections(f, *args) if is_dask_array(o)]
    dag: dict = {}
    keys = []
    for o in outs:
        dag.update(dask_to_dag(o))
        keys += [_name(k) for k in _flat(o.__dask_keys__())]
    return dag, keys


def _flat(keys):
    for k in keys:
        if isinstance(k, list):
            yield from _flat(k)
        else:
            yield k
