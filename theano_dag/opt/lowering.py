"""Engine lowering: the graph changes an engine needs, as passes of the optdb.

Each pass carries its engine's tag and a name of its own, as PyTensor's JAX and Numba
rewrites carry ``jax``/``numba``: a Mode includes the engine's tag when its linker
lists it in ``required_rewrites``, so ``optdb.query`` shows the passes, DebugMode checks
them like any rewrite, and ``Mode.excluding(name)`` leaves one out. Linkers then only
link: their ``accept`` reads the graph and never changes it.

==================  ================================  ==========================
pass                what                              tags
==================  ================================  ==========================
row_tiling          the row-local part of a batch     cpu row_tiling lowering
                    graph -> one RowTiled node
device_placement    GpuFromHost/HostFromGpu where     opencl device_placement
                    values cross device and host      lowering
dask_row_chunks     a batch graph's row work and its  dask dask_rows
                    sums over rows -> one RowChunked  lowering
                    node (one task per row chunk)
==================  ================================  ==========================
"""

from __future__ import annotations

from theano_dag.engines.cpu.tiling import tile_rows
from theano_dag.engines.dask.lower import inline_shared_elementwise, insert_gathers
from theano_dag.engines.dask.rows import fuse_row_chunks
from theano_dag.engines.opencl.context import get_context
from theano_dag.engines.opencl.placement import place
from theano_dag.graph.rewriting.basic import GlobalOptimizer

__all__ = [
    "RowTiling",
    "DevicePlacement",
    "DaskGathering",
    "DaskInlineElementwise",
    "DaskRowChunks",
    "ROW_TILING_TAGS",
    "DEVICE_PLACEMENT_TAGS",
    "DASK_GATHER_TAGS",
    "DASK_INLINE_TAGS",
    "DASK_ROW_CHUNKS_TAGS",
]

ROW_TILING_TAGS = ("cpu", "row_tiling", "lowering")
DEVICE_PLACEMENT_TAGS = ("opencl", "device_placement", "lowering")
DASK_GATHER_TAGS = ("dask", "dask_gather", "lowering")
DASK_INLINE_TAGS = ("dask", "dask_inline", "lowering")
DASK_ROW_CHUNKS_TAGS = ("dask", "dask_rows", "lowering")


class RowTiling(GlobalOptimizer):
    """The CPU engine's row tiling (``engines.cpu.tiling.tile_rows``) as a pass.

    Shared variables under update are no batch: they never seed the tiled region.
    """

    def apply(self, fgraph):
        mapping = getattr(fgraph, "update_mapping", None) or {}
        tile_rows(fgraph, {fgraph.inputs[i] for i in mapping.values()})

    def __str__(self):
        return getattr(self, "name", None) or "RowTiling"


class DevicePlacement(GlobalOptimizer):
    """The OpenCL engine's device placement (``engines.opencl.placement.place``) as a pass.

    Ops without a kernel are placed on the host, with transfers around them; whether
    that is allowed (``config.opencl__host_fallback``, ``OpenCLLinker(host_fallback=)``)
    is the linker's to say, and its ``accept`` raises naming the op when it is not.
    """

    def apply(self, fgraph):
        try:
            place(fgraph, get_context(), host_fallback=True)
        except TypeError:
            # A node the device cannot run at all (float64 without cl_khr_fp64): the
            # linker's accept meets it again and raises the same message, so the pass
            # stops here rather than warn of a failed (and rolled back) rewrite.
            return

    def __str__(self):
        return getattr(self, "name", None) or "DevicePlacement"


class DaskGathering(GlobalOptimizer):
    """The Dask engine's lowering (``engines.dask.lower.insert_gathers``) as a pass:
    a ``DaskGather`` on each array an op with no chunked form reads, with a warning
    naming the op (it runs in one task holding its whole inputs)."""

    def apply(self, fgraph):
        insert_gathers(fgraph)

    def __str__(self):
        return getattr(self, "name", None) or "DaskGathering"


class DaskInlineElementwise(GlobalOptimizer):
    """The Dask engine's ``engines.dask.lower.inline_shared_elementwise`` as a pass: a
    small elementwise value read by several elementwise nodes is computed in each of
    them (one fused task per chunk each, none for it, and no chunk of it stored)."""

    def apply(self, fgraph):
        return {"inlined": inline_shared_elementwise(fgraph)}

    def __str__(self):
        return getattr(self, "name", None) or "DaskInlineElementwise"


class DaskRowChunks(GlobalOptimizer):
    """The Dask engine's ``engines.dask.rows.fuse_row_chunks`` as a pass: the row-local
    part of a batch graph and its reductions over the batch become one ``RowChunked``
    node, one task per row chunk returning the chunk's partial sums."""

    def apply(self, fgraph):
        return {"fused": int(fuse_row_chunks(fgraph) is not None)}

    def __str__(self):
        return getattr(self, "name", None) or "DaskRowChunks"
