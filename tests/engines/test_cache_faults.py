"""The kernel cache under faults (issue 18, point 3), each made to happen: a truncated
or overwritten library, a compiler that fails, hangs or is missing, a cache directory
that cannot be written, two processes compiling the same library at once. In every
case the function keeps giving numpy's values, with one warning naming the cause."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.config import config
from theano_dag.engines.cpu.native import cc, ckernel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GCC = cc.get_toolchain(config.cxx)
needs_cc = pytest.mark.skipif(GCC is None, reason="no C compiler")
# A kernel library of an earlier test still building in the background (a cold cache, a
# busy machine) would run under this module's faults (a 1 s timeout, a fake compiler)
# and its warning would join the ones a test counts: each test waits for them first.
pytestmark = pytest.mark.usefixtures("no_kernel_builds_in_flight")


def _graph():
    x = tt.dvector("x")
    return x, tt.tanh(x) * 3 + tt.exp(-x * x)


def _want(v):
    return np.tanh(v) * 3 + np.exp(-v * v)


def _run_sync(**flags):
    """Compile and call the graph with the build in the caller's thread; the result
    and the warnings it gave."""
    v = np.linspace(-2, 2, 50)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with config.change_flags(**flags), ckernel.compile_mode("sync"):
            x, y = _graph()
            f = function([x], y)
            r = f(v)
            r2 = f(v)
    np.testing.assert_allclose(r, _want(v), rtol=1e-12)
    np.testing.assert_allclose(r2, _want(v), rtol=1e-12)
    return f, [w for w in got if issubclass(w.category, RuntimeWarning)]


def _fake_compiler(tmp_path, body):
    path = tmp_path / "fake-cc"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_failing_compiler_runs_numpy_with_one_warning(tmp_path):
    cxx = _fake_compiler(tmp_path, 'echo "fake-cc: internal error" >&2; exit 3')
    f, got = _run_sync(cxx=cxx, compiledir=str(tmp_path / "cache"))
    assert len(got) == 1, [str(w.message) for w in got]
    msg = str(got[0].message)
    assert "C compiler failed (exit 3)" in msg and "fake-cc: internal error" in msg
    assert not ckernel.wait_for_kernels(f, timeout=0)


def test_hanging_compiler_is_killed_after_the_timeout(tmp_path, monkeypatch):
    marker = tmp_path / "still-running"
    cxx = _fake_compiler(tmp_path, f"sleep 30; touch {marker}")
    monkeypatch.setattr(cc, "COMPILE_TIMEOUT_S", 1.0)
    f, got = _run_sync(cxx=cxx, compiledir=str(tmp_path / "cache"))
    assert len(got) == 1 and "timed out after 1 s" in str(got[0].message)
    assert isinstance(f.fn.program.ckernels.error, cc.CompileTimeout)
    out = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert out.stdout.strip() == "", "the compiler's session was killed"


def test_missing_compiler_says_so_once(tmp_path):
    missing = str(tmp_path / "no-such-cc")
    _, got = _run_sync(cxx=missing, compiledir=str(tmp_path / "cache"))
    assert len(got) == 1 and "no-such-cc" in str(got[0].message)
    assert "not found" in str(got[0].message)
    _, again = _run_sync(cxx=missing, compiledir=str(tmp_path / "cache"))
    assert again == []


def _read_only_dir(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.access(ro, os.W_OK):  # root writes anyway: /sys takes no new folders
        ro = "/sys"
        try:
            os.makedirs(cc.kernel_dir(ro))
        except OSError:
            return ro
        pytest.skip("no read-only directory to try")
    return str(ro)


@needs_cc
def test_read_only_cache_runs_numpy_with_one_warning(tmp_path):
    ro = _read_only_dir(tmp_path)
    _, got = _run_sync(compiledir=ro)
    assert len(got) == 1, [str(w.message) for w in got]
    msg = str(got[0].message)
    assert "cannot be written" in msg and ro in msg


CHILD = """
import sys, warnings
sys.path.insert(0, {root!r})
warnings.simplefilter("always")
import numpy as np
import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.config import config
from theano_dag.engines.cpu.native import cc, ckernel
config.compiledir = {cache!r}
x = tt.dvector("x")
with ckernel.compile_mode("sync"):
    f = function([x], tt.tanh(x) * 3 + tt.exp(-x * x))
    v = np.linspace(-2, 2, 50)
    r = f(v)
assert np.allclose(r, np.tanh(v) * 3 + np.exp(-v * v), rtol=1e-12, atol=0)
assert ckernel.wait_for_kernels(f, timeout=0)
print("ok", cc.stats["compiles"], cc.stats["cache_hits"], f.fn.program.ckernels.path)
"""


def _child(cache):
    p = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=ROOT, cache=str(cache))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return p


@needs_cc
@pytest.mark.parametrize("damage", ["truncate", "overwrite", "no_sum"])
def test_damaged_library_is_detected_and_built_again(tmp_path, damage):
    # A truncated library used to kill every later process with a bus error (it is
    # mapped, then read past its end); an overwritten one loaded garbage.
    # (Two libraries in a new cache: the function's kernels and the step library.)
    first = _child(tmp_path)
    assert first.returncode == 0, first.stderr
    _, compiles, _, path = first.stdout.split()
    assert compiles == "2" and os.path.exists(path + ".sum")
    size = os.path.getsize(path)
    if damage == "truncate":
        os.truncate(path, size // 3)
    elif damage == "overwrite":
        with open(path, "r+b") as fh:
            fh.seek(size // 2)
            fh.write(b"\xff" * 64)
    else:
        os.unlink(path + ".sum")
    second = _child(tmp_path)
    assert second.returncode == 0, second.stderr  # not -7 (SIGBUS)
    assert second.stdout.split()[1] == "1", "built again"
    assert second.stderr.count("is damaged") == 1, second.stderr
    third = _child(tmp_path)
    assert third.returncode == 0 and third.stdout.split()[1:3] == ["0", "2"], third.stdout
    assert "damaged" not in third.stderr


@needs_cc
def test_damage_after_the_status_was_recorded_is_detected(tmp_path):
    # A library found intact has its file status written under its checksum, and later
    # processes trust it without reading it through while the status is the same: a
    # library overwritten after that (same size) is still found, since its change time
    # moved. (Recorded at once here, not only for a library 2 s old.)
    child = CHILD.replace("config.compiledir =", "cc.STAMP_AFTER_S = 0.0\nconfig.compiledir =")
    for _ in range(2):  # built, then found in the cache (its status recorded)
        run = subprocess.run(
            [sys.executable, "-c", child.format(root=ROOT, cache=str(tmp_path))],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr
    assert run.stdout.split()[1:3] == ["0", "2"], run.stdout  # kernels and steps
    path = run.stdout.split()[3]
    with open(path + ".sum") as fh:
        digest, status = fh.read().splitlines()
    st = os.stat(path)
    assert digest == cc._digest(path)
    assert status.split() == ["status", *map(str, (st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                                   st.st_ino, st.st_dev))]  # fmt: skip
    with open(path, "r+b") as fh:
        fh.seek(st.st_size // 2)
        fh.write(b"\xff" * 64)
    second = _child(tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split()[1] == "1", "built again"
    assert second.stderr.count("is damaged (checksum mismatch") == 1, second.stderr


def test_recorded_status_spares_reading_the_library(tmp_path, monkeypatch):
    # The checksum is computed once: after that, the status recorded beside it (or the
    # process's own memory of it) vouches for the file until it changes.
    path = str(tmp_path / "lib.so")
    with open(path, "wb") as fh:
        fh.write(os.urandom(4096))
    with open(path + ".sum", "w") as fh:
        fh.write(cc._digest(path) + "\n")
    reads = []
    digest = cc._digest
    monkeypatch.setattr(cc, "_digest", lambda p: reads.append(p) or digest(p))
    monkeypatch.setattr(cc, "STAMP_AFTER_S", 0.0)
    monkeypatch.setattr(cc, "_INTACT", {})
    assert cc._damage(path) is None and len(reads) == 1
    assert cc._damage(path) is None and len(reads) == 1  # this process remembers it
    monkeypatch.setattr(cc, "_INTACT", {})
    assert cc._damage(path) is None and len(reads) == 1  # another process: the record
    os.truncate(path, 1000)
    assert cc._damage(path) == "checksum mismatch (1000 bytes)" and len(reads) == 2


@needs_cc
def test_two_processes_compile_one_library_once(tmp_path):
    # Started together: the file lock makes the second wait for the first's library.
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD.format(root=ROOT, cache=str(tmp_path))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    compiles = sum(int(out.split()[1]) for out, _ in outs)
    assert compiles == 2  # the function's kernels and the step library, once each
    # (".sized": the folder bound's marker, see misc.cache_eviction.)
    names = [n for n in os.listdir(cc.kernel_dir(str(tmp_path))) if n != ".sized"]
    suffixes = sorted(n.split(".", 1)[1] for n in names)
    assert suffixes == sorted(["c", "lock", "so", "so.sum"] * 2), names


@needs_cc
def test_kernel_folder_is_bounded_a_library_going_whole(tmp_path, monkeypatch):
    # The folder keeps at most MAX_LIBRARIES libraries, the least recently used out
    # first: a library goes with its checksum, source and lock; one loaded lately (its
    # lock dated) outlives an older one; one removed is built again when asked for.
    monkeypatch.setattr(cc, "MAX_LIBRARIES", 2)
    monkeypatch.setattr(cc, "EVICT_EVERY", 0.0)
    monkeypatch.setattr(cc, "_USED", set())
    d = str(tmp_path)
    srcs = [f"int k{i}(void) {{ return {i}; }}\n" for i in range(3)]
    a = cc.compile_library(GCC, srcs[0], d)
    b = cc.compile_library(GCC, srcs[1], d)
    for path, t in ((a, 1000), (b, 2000)):  # a older than b
        for ext in (".so", ".so.sum", ".c", ".lock"):
            f = path[: -len(".so")] + ext
            os.utime(f, (t, t))
    assert cc.cached_library(GCC, srcs[0], d) == a  # a loaded now: dated through its lock
    c = cc.compile_library(GCC, srcs[2], d)
    left = sorted(os.listdir(d))
    key_of = {p: os.path.basename(p)[: -len(".so")] for p in (a, b, c)}
    assert [n for n in left if n.startswith(key_of[b])] == []  # b went, every file of it
    for p in (a, c):
        assert {n[len(key_of[p]) :] for n in left if n.startswith(key_of[p])} == {
            ".so", ".so.sum", ".c", ".lock"}  # fmt: skip
    before = cc.stats["compiles"]
    assert cc.compile_library(GCC, srcs[1], d) == b and os.path.exists(b)
    assert cc.stats["compiles"] == before + 1
    lib = ctypes.CDLL(b)
    assert lib.k1() == 1


@needs_cc
def test_a_step_library_that_fails_leaves_steps_and_strided_calls_on_numpy(tmp_path, monkeypatch):
    # The function's kernels build; the step library does not (its C made not to compile):
    # the kernels run in C on contiguous operands, numpy runs the sum and the kernel's call
    # on a transposed operand, with one warning for the process.
    monkeypatch.setattr(ckernel, "steps_source", lambda *a: "#error the steps are broken\n")
    monkeypatch.setattr(ckernel, "_STEP_LIBRARIES", {})  # none loaded: this one is built
    x, v = tt.dmatrix("x"), tt.dvector("v")
    xv = np.linspace(-1, 1, 12).reshape(3, 4)
    vv = np.linspace(0, 1, 3)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
            f = function([x, v], [tt.exp(x) * 2 + 1, tt.tanh(x.T) - v, tt.sum(x * 3)])
            results = [f(xv, vv) for _ in range(2)]
            g = function([x], tt.sum(tt.exp(x)))  # the same step library: no second warning
            gr = g(xv)
    msgs = [str(w.message) for w in got if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1, msgs
    assert "the C steps are unavailable" in msgs[0] and "the steps are broken" in msgs[0]
    for r in results:
        np.testing.assert_allclose(r[0], np.exp(xv) * 2 + 1, rtol=1e-13)
        np.testing.assert_allclose(r[1], np.tanh(xv.T) - vv, rtol=1e-13)
        np.testing.assert_allclose(r[2], np.sum(xv * 3), rtol=1e-13)
    np.testing.assert_allclose(gr, np.sum(np.exp(xv)), rtol=1e-13)
    assert ckernel.wait_for_kernels(f, timeout=0)  # the kernels run in C
    ready = {k.name: k.ready for k in ckernel.kernel_calls(f)}
    assert ready.pop("td_sum_f64") is False and ready and all(ready.values()), ready
