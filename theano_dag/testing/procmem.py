"""The process's resident memory as Linux reports it in ``/proc/self``: what the memory
tests and the benchmarks read (the resident set, its peak, and a reset of the peak); and
the bytes one call allocates at its peak, as ``tracemalloc`` traces them (numpy's arrays
included), for a test of what a compiled function allocates per call.

Not ``resource``'s ``ru_maxrss`` where ``/proc`` exists: Linux carries it across
``exec``, so a process spawned by a big one (a Dask worker started by pytest after
thousands of tests) would start with its parent's peak; ``VmHWM`` belongs to the
process's own address space.

>>> s = status()
>>> 0 < s["VmRSS"] <= s["VmHWM"]
True
>>> peak_bytes() >= s["VmRSS"] * 1024
True
>>> import numpy as np
>>> out, peak = traced_peak(np.ones, 1000)
>>> peak >= out.nbytes
True
"""

from __future__ import annotations

import ctypes
import gc
import resource
import tracemalloc

__all__ = ["status", "peak_bytes", "reset_peak", "traced_peak"]


def status() -> dict:
    """``{"VmRSS": KiB, "VmHWM": KiB}``: the resident set now and its peak."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, val = line.split(":")
                out[key] = int(val.split()[0])
    return out


def peak_bytes() -> int:
    """The peak resident set in bytes (``ru_maxrss`` where there is no ``/proc``)."""
    try:
        return status()["VmHWM"] * 1024
    except OSError:  # not Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak(release: bool = False) -> None:
    """Start the peak again from the resident set now (``clear_refs``: 5). With
    ``release``, first collect garbage and hand freed heap memory back to the system
    (glibc's ``malloc_trim``), so that the new peak starts from what is live."""
    if release:
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def traced_peak(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), peak)``: the call's result and the most bytes it held
    allocated at once, as ``tracemalloc`` traces them (Python's and numpy's allocations;
    memory a C library allocates itself is not seen).

    >>> import numpy as np
    >>> _, peak = traced_peak(lambda: np.zeros(10**6).sum())
    >>> peak >= 8 * 10**6
    True
    """
    tracemalloc.start()
    try:
        result = fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak
