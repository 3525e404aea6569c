"""The bound on a cache's folder (``theano_dag.misc.cache_eviction``): entries and bytes
kept under their limits, the newest kept, sized at most once per period, and a damaged
marker costs one sizing, never the bound."""

import os
import time

import pytest

from theano_dag.misc import cache_eviction
from theano_dag.misc.cache_eviction import MARKER, TMP_PREFIX, evict_if_due


def _fill(d, n, size=100, start=1000):
    """``n`` entries of ``size`` bytes, entry k dated ``start + k`` (entry0 the oldest)."""
    for k in range(n):
        path = os.path.join(d, f"entry{k}")
        with open(path, "wb") as f:
            f.write(b"x" * size)
        os.utime(path, (start + k, start + k))


def _entries(d):
    names = [n for n in os.listdir(d) if n.startswith("entry")]
    return sorted(names, key=lambda n: int(n[5:]))


def test_the_entry_bound_holds_and_the_newest_survive(tmp_path):
    _fill(tmp_path, 10)
    assert evict_if_due(str(tmp_path), max_entries=4, max_bytes=10**6, every=600) == 6
    assert _entries(tmp_path) == ["entry6", "entry7", "entry8", "entry9"]


def test_the_byte_bound_holds_and_the_newest_survive(tmp_path):
    _fill(tmp_path, 10, size=100)
    assert evict_if_due(str(tmp_path), max_entries=100, max_bytes=350, every=600) == 7
    assert _entries(tmp_path) == ["entry7", "entry8", "entry9"]


def test_an_entry_used_lately_survives(tmp_path):
    _fill(tmp_path, 5)
    os.utime(tmp_path / "entry0")  # read now: the newest
    evict_if_due(str(tmp_path), max_entries=2, max_bytes=10**6, every=600)
    assert _entries(tmp_path) == ["entry0", "entry4"]


def test_sized_at_most_once_per_period(tmp_path):
    _fill(tmp_path, 5)
    assert evict_if_due(str(tmp_path), max_entries=10, max_bytes=10**6, every=600) == 0
    _fill(tmp_path, 20)
    # Not due: the marker was dated by the sizing just now.
    assert evict_if_due(str(tmp_path), max_entries=10, max_bytes=10**6, every=600) is None
    assert len(_entries(tmp_path)) == 20
    old = time.time() - 601
    os.utime(tmp_path / MARKER, (old, old))
    assert evict_if_due(str(tmp_path), max_entries=10, max_bytes=10**6, every=600) == 10
    assert len(_entries(tmp_path)) == 10


@pytest.mark.parametrize("damage", ["garbage", "future", "folder", "link"])
def test_a_damaged_marker_is_harmless(tmp_path, damage):
    d = tmp_path / "cache"
    d.mkdir()
    _fill(d, 6)
    marker = d / MARKER
    outside = tmp_path / "outside"
    outside.write_bytes(b"not the cache's")
    if damage == "garbage":  # its contents are never read
        marker.write_bytes(b"\xff" * 64)
        old = time.time() - 601
        os.utime(marker, (old, old))
    elif damage == "future":  # dated in a year: taken as due, not as sized a year ahead
        marker.write_bytes(b"")
        later = time.time() + 365 * 86400
        os.utime(marker, (later, later))
    elif damage == "folder":
        (marker / "inside").mkdir(parents=True)
    else:  # a link to a file elsewhere: replaced, the file untouched
        marker.symlink_to(outside)
    assert evict_if_due(str(d), max_entries=3, max_bytes=10**6, every=600) == 3
    assert _entries(d) == ["entry3", "entry4", "entry5"]
    assert marker.is_file() and not marker.is_symlink()
    assert outside.read_bytes() == b"not the cache's"
    # And the marker works again: not due now.
    _fill(d, 6)
    assert evict_if_due(str(d), max_entries=3, max_bytes=10**6, every=600) is None


def test_temporary_files_are_not_entries_and_stale_ones_are_removed(tmp_path):
    _fill(tmp_path, 3)
    fresh, stale = tmp_path / f"{TMP_PREFIX}fresh", tmp_path / f"{TMP_PREFIX}stale"
    fresh.write_bytes(b"y" * 1000)
    stale.write_bytes(b"y" * 1000)
    old = time.time() - cache_eviction.STALE_TMP - 10
    os.utime(stale, (old, old))
    (tmp_path / "a_folder").mkdir()  # not an entry either
    assert evict_if_due(str(tmp_path), max_entries=3, max_bytes=300, every=600) == 0
    assert fresh.exists() and not stale.exists() and (tmp_path / "a_folder").is_dir()
    assert _entries(tmp_path) == ["entry0", "entry1", "entry2"]


def test_a_missing_folder_is_not_sized(tmp_path):
    assert evict_if_due(str(tmp_path / "none"), 1, 1, 600) is None


def test_an_entry_of_several_files_goes_whole_dated_by_its_newest(tmp_path):
    # entry_of groups files into entries (a kernel library with its checksum and
    # source): a group's time is its newest file's, its size the sum of its files'.
    for k, (t_lib, t_lock) in enumerate([(1000, 5000), (2000, 2000), (3000, 3000)]):
        for ext, t, size in ((".so", t_lib, 300), (".so.sum", t_lib, 10), (".lock", t_lock, 0)):
            path = tmp_path / f"key{k}{ext}"
            path.write_bytes(b"x" * size)
            os.utime(path, (t, t))
    removed = evict_if_due(
        str(tmp_path), 2, 10**6, every=600, entry_of=lambda n: n.split(".", 1)[0]
    )
    # key0's lock was dated last (a load): key1 is the least recently used.
    assert removed == 1
    left = sorted(n for n in os.listdir(tmp_path) if not n.startswith("."))
    assert left == [f"key{k}{e}" for k in (0, 2) for e in (".lock", ".so", ".so.sum")]
    # The byte bound counts a group's files together: 310 bytes each.
    (tmp_path / MARKER).unlink()
    assert evict_if_due(str(tmp_path), 10, 400, every=600, entry_of=lambda n: n[:4]) == 1
    assert sorted(n for n in os.listdir(tmp_path) if not n.startswith(".")) == [
        "key0.lock", "key0.so", "key0.so.sum"]  # fmt: skip
