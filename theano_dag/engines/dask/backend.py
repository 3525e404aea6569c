"""The optional ``dask`` extra, imported once: ``dask`` and ``dask.array`` or None.

Importing the Dask engine needs no dask (``compile.mode`` registers its linker
always); compiling a function for it does, and :func:`require` says so clearly.
"""

from __future__ import annotations

import importlib
import re
import sys

from theano_dag.graph.utils import gc_as_set

# dask, da, tokenize, BlockIdDep, local, threaded and the graph helpers of _LAZY are
# read as attributes (see __getattr__).
__all__ = ["require", "is_dask_array", "current_client", "input_chunks", "from_numpy"]

_LAZY = {
    "dask": ("dask", None),
    "da": ("dask.array", None),
    "tokenize": ("dask.base", "tokenize"),
    "BlockIdDep": ("dask.layers", "ArrayBlockIdDep"),
    "local": ("dask.local", None),
    "threaded": ("dask.threaded", None),
    "Task": ("dask._task_spec", "Task"),
    "TaskRef": ("dask._task_spec", "TaskRef"),
    "DataNode": ("dask._task_spec", "DataNode"),
    "Alias": ("dask._task_spec", "Alias"),
    "convert_legacy_graph": ("dask._task_spec", "convert_legacy_graph"),
    "optimize_blockwise": ("dask.blockwise", "optimize_blockwise"),
    "HighLevelGraph": ("dask.highlevelgraph", "HighLevelGraph"),
    "MaterializedLayer": ("dask.highlevelgraph", "MaterializedLayer"),
    "flatten": ("dask.core", "flatten"),
}


def __getattr__(name):
    # dask (and dask.array, which imports scipy) load on first use, not with theano_dag:
    # ``backend.da`` is read when a function is compiled or run for the Dask engine.
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _LAZY[name]
    try:
        # Usually first read while ``function`` pauses the collector: dask.array records
        # at import whether it is on, and would otherwise turn it off for good.
        with gc_as_set():
            value = importlib.import_module(module)
    except ImportError:  # the extra is optional: the engine reports it when used
        value = None
    if value is not None and attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def _module(name):
    # A lazy name read from inside this module (its __getattr__ serves other modules).
    return globals()[name] if name in globals() else __getattr__(name)


# The oldest dask the engine runs on (its task spec and dask.threaded's
# ContextAwareThreadPoolExecutor); pyproject's bound of the ``dask`` extra says the same.
MIN_DASK = (2026, 3)


def _release(version: str) -> tuple:
    # "2026.3.0", "2026.3.0+12.gabcdef": the year and the month.
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


def require(who: str = "the Dask engine"):
    """Raise ImportError naming the extra when dask is not installed, or too old."""
    da = _module("da")
    if da is None:
        raise ImportError(f"{who} needs dask: pip install 'theano_dag[dask]'")
    version = getattr(_module("dask"), "__version__", "0")
    if _release(version) < MIN_DASK:
        raise ImportError(
            f"{who} needs dask >= {MIN_DASK[0]}.{MIN_DASK[1]} (dask {version} is installed): "
            "pip install -U 'theano_dag[dask]'"
        )


def is_dask_array(value) -> bool:
    """True for a ``dask.array.Array`` (never imports dask: a user holding one has).

    >>> import numpy as np
    >>> is_dask_array(np.zeros(2))
    False
    """
    da = sys.modules.get("dask.array")
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


def input_chunks(spec, shape, dtype):
    """The chunks (normalized) of a numpy input of ``shape`` and ``dtype`` for the chunk
    ``spec``. An empty array is one chunk: dask's ``"auto"`` divides by the size of the
    other axes and raised ZeroDivisionError for a shape like ``(0, 20_000_000)``.

    >>> input_chunks(2, (5,), "float64"), input_chunks("auto", (0, 20_000_000), "float64")
    (((2, 2, 1),), ((0,), (20000000,)))
    """
    if 0 in tuple(shape):
        return tuple((int(n),) for n in shape)
    return _module("da").core.normalize_chunks(spec, tuple(shape), dtype=dtype)


def from_numpy(value, spec):
    """``value`` (a numpy array) as a dask array of the chunks ``spec`` makes of it; its
    key is random (``name=False``), not a hash of the whole array."""
    chunks = input_chunks(spec, value.shape, value.dtype)
    return _module("da").from_array(value, chunks=chunks, name=False)
