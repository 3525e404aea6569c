"""The optional ``dask`` extra, imported once: ``dask`` and ``dask.array`` or None.

Importing the Dask engine needs no dask (``compile.mode`` registers its linker
always); compiling a function for it does, and :func:`require` says so clearly.
"""

from __future__ import annotations

import sys

try:
    import dask
    import dask.array as da
    from dask.base import tokenize
except ImportError:  # the extra is optional: the engine reports it when used
    dask = da = tokenize = None

__all__ = ["dask", "da", "tokenize", "require", "is_dask_array", "current_client"]


def require(who: str = "the Dask engine"):
    """Raise ImportError naming the extra when dask is not installed."""
    if da is None:
        raise ImportError(f"{who} needs dask: pip install 'theano_dag[dask]'")


def is_dask_array(value) -> bool:
    """True for a ``dask.array.Array``.

    >>> import numpy as np
    >>> is_dask_array(np.zeros(2))
    False
    """
    return da is not None and isinstance(value, da.Array)


def current_client():
    """The current ``distributed.Client``, or None (no client, or distributed never imported:
    a user with a client has imported it, so this never imports it itself)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        return distributed.get_client()
    except ValueError:
        return None
