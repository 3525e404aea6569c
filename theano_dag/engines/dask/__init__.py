"""The Dask engine: the same graphs on chunked arrays, a laptop's threads or a cluster.

``Mode(linker="dask")`` (or ``mode="DASK"``) lowers an optimized FunctionGraph onto
``dask.array``: fused elementwise subgraphs run as one task per chunk with the CPU
engine's compiled kernel, reductions and products are dask's blocked algorithms,
and ops with no chunked form run on their gathered inputs (a ``DaskGather`` in the
graph marks where, and compiling warns naming the op). Inputs may be numpy or dask
arrays, and shared variables may hold dask arrays whose updates stay persisted on
the cluster (:func:`dask_shared`). Importing this package needs no dask; compiling
for it does (``pip install 'theano_dag[dask]'``).

>>> from theano_dag.compile.mode import get_linker
>>> type(get_linker("dask")).__name__
'DaskLinker'
"""

from __future__ import annotations

from theano_dag.engines import register_linker
from theano_dag.engines.dask.backend import is_dask_array
from theano_dag.engines.dask.errors import ClusterLostWarning, DaskClusterError
from theano_dag.engines.dask.linker import DaskLinker, DaskThunk
from theano_dag.engines.dask.lower import GatherWarning, insert_gathers
from theano_dag.engines.dask.ops import DaskGather, dask_gather
from theano_dag.engines.dask.rows import RowChunked, fuse_row_chunks
from theano_dag.engines.dask.shared import (
    DaskInputType,
    DaskSharedVariable,
    dask_shared,
    dask_shared_constructor,
)
from theano_dag.engines.dask.translate import (
    RULES,
    ChunkError,
    ChunkKernel,
    DaskTaskError,
    KeyedTask,
    has_chunked_form,
)
from theano_dag.graph.shared import shared_constructor

__all__ = [
    "DaskLinker",
    "DaskThunk",
    "DaskGather",
    "dask_gather",
    "RowChunked",
    "fuse_row_chunks",
    "DaskInputType",
    "DaskSharedVariable",
    "dask_shared",
    "ChunkKernel",
    "ChunkError",
    "DaskTaskError",
    "DaskClusterError",
    "ClusterLostWarning",
    "KeyedTask",
    "GatherWarning",
    "RULES",
    "has_chunked_form",
    "insert_gathers",
    "is_dask_array",
    "dask_collections",
    "dask_task_graph",
]


def _thunk_of(f) -> DaskThunk:
    fn = getattr(f, "fn", f)
    if not isinstance(fn, DaskThunk):
        raise TypeError(f"{f!r} was not compiled with the Dask engine (Mode(linker='dask'))")
    return fn


def dask_collections(f, *args) -> list:
    """The dask arrays a compiled function's outputs would be for ``args`` (nothing is
    computed): the graph one call hands to the scheduler.

    >>> import numpy as np
    >>> import theano_dag, theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> f = theano_dag.function([x], tt.exp(x) + 1, mode="DASK")
    >>> out, = dask_collections(f, np.zeros(4))
    >>> out.compute()
    array([2., 2., 2., 2.])
    """
    thunk = _thunk_of(f)
    spec = f.spec
    for k, a in zip(spec.explicit, args):
        thunk.input_storage[k][0] = spec.filter(k, a)
    try:
        return thunk.collections()
    finally:
        for k in spec.explicit:
            if spec.inputs[k].required:
                thunk.input_storage[k][0] = None


def dask_task_graph(f, *args) -> dict:
    """The task graph (``{key: task}``, the "dag" format's shape) of one call of ``f``
    on ``args``, its outputs' keys under ``"__outputs__"``."""
    outs = [o for o in dask_collections(f, *args) if is_dask_array(o)]
    graph = {}
    for o in outs:
        graph.update(dict(o.__dask_graph__()))
    graph["__outputs__"] = [o.__dask_keys__() for o in outs]
    return graph


register_linker("dask", DaskLinker, override=True)
shared_constructor(dask_shared_constructor)
