"""The bound on a cache's folder on disk: at most so many entries and so many bytes, the
oldest (by modification time: a cache touches an entry it reads) removed first.

The caches that outlive a process (the cache of optimized graphs, the CPU engine's kernel
index, its compiled libraries and its generated code objects) call :func:`evict_if_due`
after they write an entry. Sizing a folder lists it, so it is done at most once every
``every`` seconds, by whichever process writes when it is due: a marker file in the
folder (``.sized``) says by its time when it was last done. A marker that is missing,
dated in the future, or not a plain file is taken as due and made again, so a damaged
one costs one sizing, never the bound.

Files whose names start with a dot are not entries: the marker and the temporary files
(:data:`TMP_PREFIX`) that a cache writes an entry to before renaming it into place, which
are removed when a process that died while writing left them (an hour old).

>>> import os, tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     for k in range(5):
...         with open(os.path.join(d, f"entry{k}"), "wb") as f:
...             _ = f.write(b"x" * 10)
...         os.utime(os.path.join(d, f"entry{k}"), (k, k))  # entry0 is the oldest
...     removed = evict_if_due(d, max_entries=3, max_bytes=1000, every=600)
...     removed, sorted(n for n in os.listdir(d) if not n.startswith("."))
(2, ['entry2', 'entry3', 'entry4'])
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time

__all__: list = []  # for theano_dag's caches, not a user's function

MARKER = ".sized"
# The prefix of a cache's temporary files (written, then renamed into place).
TMP_PREFIX = ".tmp-"
# A temporary file older than this (seconds) was left by a process that died writing it.
STALE_TMP = 3600.0


def evict_if_due(
    directory: str, max_entries: int, max_bytes: int, every: float, entry_of=None
) -> int | None:
    """Keep ``directory`` under ``max_entries`` entries and ``max_bytes`` bytes, oldest out
    first, if it was not sized in the last ``every`` seconds (its marker's time); the
    number of entries removed, or None when it was not due (or could not be listed).

    ``entry_of`` maps a file's name to the name of the entry it belongs to, for a cache
    whose entry is several files (a kernel library, its checksum, its source and its
    lock): an entry's files go together, its time is its newest file's and its size
    their sum. Without it each file is an entry."""
    marker = os.path.join(directory, MARKER)
    now = time.time()
    try:
        st = os.lstat(marker)
        # (A marker in the future, by a clock set back or a damaged file: due.)
        if stat.S_ISREG(st.st_mode) and 0 <= now - st.st_mtime < every:
            return None
    except OSError:
        pass
    _touch(marker)
    entries = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                if e.name.startswith("."):
                    if e.name.startswith(TMP_PREFIX):
                        with contextlib.suppress(OSError):
                            if now - e.stat(follow_symlinks=False).st_mtime > STALE_TMP:
                                os.remove(e.path)
                    continue
                with contextlib.suppress(OSError):  # (removed meanwhile by another process)
                    if e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        name = e.name if entry_of is None else entry_of(e.name)
                        entries.append((name, st.st_mtime, st.st_size, e.path))
    except OSError:
        return None
    groups: dict = {}
    for name, mtime, size, path in entries:
        g = groups.get(name)
        if g is None:
            groups[name] = [mtime, size, [path]]
        else:
            g[0] = max(g[0], mtime)
            g[1] += size
            g[2].append(path)
    order = sorted(groups.values(), key=lambda g: g[0])
    total = sum(g[1] for g in order)
    count = len(order)
    removed = 0
    for _mtime, size, paths in order:
        if count <= max_entries and total <= max_bytes:
            break
        gone = False
        for path in paths:
            with contextlib.suppress(OSError):
                os.remove(path)
                gone = True
        removed += gone
        count -= 1
        total -= size
    return removed


def _touch(marker: str):
    """Date the marker now; one that is not a plain file (a folder, a link) is replaced."""
    for _ in range(2):
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            try:
                os.utime(fd)
            finally:
                os.close(fd)
            return
        except OSError:
            with contextlib.suppress(OSError):
                if os.path.isdir(marker) and not os.path.islink(marker):
                    shutil.rmtree(marker)
                else:
                    os.remove(marker)
