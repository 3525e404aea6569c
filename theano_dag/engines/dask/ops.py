"""The Dask engine's own op: ``DaskGather``, where an op with no chunked form reads a value.

The lowering pass ``dask_gather`` (``opt.lowering.DaskGathering``) puts one on each
array input of a node that the engine cannot run chunk by chunk, so the place where
a whole array is gathered into one task is visible in the graph (``debugprint``),
as the OpenCL engine's transfers are. Everywhere else it is the identity.
"""

from __future__ import annotations

from theano_dag.graph.identity_ops import ViewOp

__all__ = ["DaskGather", "dask_gather"]


class DaskGather(ViewOp):
    """The identity; on the Dask engine, its input gathered into one chunk.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> dask_gather(x).eval({x: np.ones(2)})
    array([1., 1.])
    """

    __props__ = ()

    def __str__(self):
        return "DaskGather"

    __repr__ = __str__


dask_gather = DaskGather()
