"""The Dask engine's lowering: ``DaskGather`` on the inputs of ops with no chunked form.

Called by the optdb pass ``dask_gather`` (``opt.lowering.DaskGathering``); it warns
once per op, naming it, since such an op runs in one task that holds its whole
inputs (on one worker of a cluster).
"""

from __future__ import annotations

import warnings

from theano_dag.engines.dask.ops import DaskGather, dask_gather
from theano_dag.engines.dask.translate import has_chunked_form
from theano_dag.graph.basic import Constant

__all__ = ["insert_gathers", "GatherWarning"]


class GatherWarning(UserWarning):
    """An op with no chunked form runs on gathered arrays (Dask engine)."""


def insert_gathers(fgraph) -> list:
    """Put ``DaskGather`` on each array input (not constant, at least 1-d) of every node
    of ``fgraph`` with no chunked form; return those nodes' ops."""
    gathered = []
    for node in list(fgraph.toposort()):
        if has_chunked_form(node):
            continue
        arrays = [
            (i, v)
            for i, v in enumerate(node.inputs)
            if getattr(v.type, "ndim", 0) >= 1
            and not isinstance(v, Constant)
            and not (v.owner is not None and isinstance(v.owner.op, DaskGather))
        ]
        if not arrays:
            continue
        for i, v in arrays:
            fgraph.change_input(node, i, dask_gather(v), reason="dask_gather")
        gathered.append(node.op)
    for op in dict.fromkeys(str(op) for op in gathered):
        warnings.warn(
            f"Dask engine: {op} has no chunked form; it runs on its whole inputs "
            "gathered into one task",
            GatherWarning,
            stacklevel=2,
        )
    return gathered
