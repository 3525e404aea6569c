"""What identifies the code that made a cached result: caches on disk that outlive a
process (the cache of optimized graphs, the CPU engine's kernels) put it in their keys, so
that an entry made by other code is never taken for this code's.

It is a digest of the names, sizes and modification times of theano_dag's own source
files (``.py`` and ``.c``), numpy's version and Python's, computed once per process (a
stat of each file: about a millisecond).

>>> code_version() == code_version(), len(code_version())
(True, 64)
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys

import numpy as np

__all__: list = []  # for theano_dag's caches, not a user's function

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # theano_dag/


@functools.cache
def code_version() -> bytes:
    """The digest (64 bytes) of theano_dag's source files' names, sizes and modification
    times, numpy's version and Python's."""
    files = []
    todo = [_ROOT]
    while todo:
        with os.scandir(todo.pop()) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    if e.name != "__pycache__":
                        todo.append(e.path)
                elif e.name.endswith((".py", ".c")):
                    st = e.stat()
                    files.append(f"{e.path[len(_ROOT) :]}:{st.st_size}:{st.st_mtime_ns}")
    parts = [np.__version__, sys.version, *sorted(files)]
    return hashlib.blake2b("\n".join(parts).encode()).digest()
