"""What the Dask engine's tests of task errors share: a dask array whose one chunk is
wrong."""

from __future__ import annotations

import dask.array as da


def one_chunk_flat():
    """A 4x4 dask array of ones in 2x2 chunks whose chunk (1, 0) comes back flat, so the
    task that reads it fails."""

    def ravel_one(b, block_id=None):
        return b.ravel() if block_id == (1, 0) else b

    return da.ones((4, 4), chunks=2).map_blocks(ravel_one, dtype="float64")
