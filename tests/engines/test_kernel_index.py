"""The kernel index (engines/cpu/native/kindex.py): a process linking a function an earlier
process linked takes its kernels' C and its library's cache key from the index instead
of generating and hashing the C, gets the same C and the same library, and an index
entry that is damaged, or written under other flags or thresholds, gives nothing
wrong: at most one warning, and the C generated as without it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import theano_dag.scalar as ts
import theano_dag.tensor as tt
from theano_dag.config import config
from theano_dag.engines.cpu.emit import csource
from theano_dag.engines.cpu.native import cc, kindex
from theano_dag.scalar.composite import Composite
from theano_dag.tensor.elemwise import Elemwise

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
needs_cc = pytest.mark.skipif(cc.get_toolchain(config.cxx) is None, reason="no C compiler")
pytestmark = pytest.mark.usefixtures("no_kernel_builds_in_flight")


@pytest.fixture
def step_library_in_the_cache(tmp_path, step_library_loaded):
    """The step library copied into the test's new cache (with its checksum and C): the
    children then build their function's kernels only (the index is of kernels), not
    the step library again, 4 s each."""
    kernels = cc.kernel_dir(str(tmp_path))
    os.makedirs(kernels, exist_ok=True)
    base = step_library_loaded.path[: -len(".so")]
    for suffix in (".so", ".so.sum", ".c"):
        shutil.copy2(base + suffix, kernels)


# A function of two fused kernels and a plain one, linked in a process of its own; it
# prints the index's counters, how many kernels' C was generated, the library and the
# C's digest, after checking the values against numpy's.
CHILD = """
import hashlib, sys, warnings
sys.path.insert(0, {root!r})
warnings.simplefilter("always")
import numpy as np
import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.config import config
from theano_dag.engines.cpu.emit import csource
from theano_dag.engines.cpu.native import ckernel, kindex
config.compiledir = {cache!r}
{setup}
made = []
source = ckernel.kernel_source
ckernel.kernel_source = lambda *a: made.append(1) or source(*a)
x, y = tt.dvector("x"), tt.dmatrix("y")
with ckernel.compile_mode("sync"):
    f = function([x, y], [tt.tanh(x) * 3 + tt.exp(-x * x), (y * 2 - 1) ** 2 + x, tt.sin(y)])
    v, w = np.linspace(-2, 2, 50), np.linspace(0, 1, 150).reshape(3, 50)
    r = f(v, w)
assert np.allclose(r[0], np.tanh(v) * 3 + np.exp(-v * v), rtol=1e-12, atol=0)
assert np.allclose(r[1], (w * 2 - 1) ** 2 + v, rtol=1e-12, atol=0)
assert np.allclose(r[2], np.sin(w), rtol=1e-12, atol=0)
assert ckernel.wait_for_kernels(f, timeout=0)
lib = f.fn.program.ckernels
c = hashlib.sha256(lib.source().encode()).hexdigest()
s = kindex.stats
print("ok", s["hits"], s["misses"], s["writes"], len(made), lib.path, c)
"""


def _child(cache, setup=""):
    p = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=ROOT, cache=str(cache), setup=setup)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    _ok, hits, misses, writes, made, path, c = p.stdout.split()
    return [int(hits), int(misses), int(writes), int(made)], path, c, p.stderr


def _entries(cache):
    d = kindex.index_dir(str(cache))  # (dot files are the folder's marker, not entries)
    return [os.path.join(d, n) for n in sorted(os.listdir(d)) if not n.startswith(".")]


@pytest.mark.usefixtures("step_library_in_the_cache")
@needs_cc
def test_a_second_process_takes_the_c_from_the_index(tmp_path):
    counts, path, c, err = _child(tmp_path)
    assert counts[1] > 0 and counts[0] == 0 and counts[2] == 1 and counts[3] > 0, counts
    assert len(_entries(tmp_path)) == 1
    counts2, path2, c2, err2 = _child(tmp_path)
    # Every kernel's C from the index, nothing generated, nothing written; the same
    # library, and the same C when it is asked for.
    assert counts2 == [counts[1], 0, 0, 0], counts2
    assert (path2, c2) == (path, c)
    assert "damaged" not in err + err2


@pytest.mark.usefixtures("step_library_in_the_cache")
@needs_cc
@pytest.mark.parametrize("damage", ["truncate", "overwrite", "garbage"])
def test_a_damaged_entry_warns_once_and_the_c_is_generated(tmp_path, damage):
    counts, path, c, _ = _child(tmp_path)
    (entry,) = _entries(tmp_path)
    size = os.path.getsize(entry)
    if damage == "truncate":
        os.truncate(entry, size // 2)
    elif damage == "overwrite":
        with open(entry, "r+b") as fh:
            fh.seek(size // 2)
            fh.write(b"\xff" * 16)
    else:
        with open(entry, "wb") as fh:
            fh.write(b"not an entry")
    counts2, path2, c2, err = _child(tmp_path)
    assert err.count("kernel index entry") == 1 and "is damaged" in err, err
    assert counts2[0] == 0 and counts2[2] == 1 and counts2[3] == counts[3], counts2
    assert (path2, c2) == (path, c)
    counts3, _, _, err3 = _child(tmp_path)  # written again
    assert counts3 == [counts[1], 0, 0, 0] and "damaged" not in err3


@pytest.mark.usefixtures("step_library_in_the_cache")
@needs_cc
@pytest.mark.parametrize(
    "setup",
    [
        "csource.PARALLEL_WORK = 1 << 14",  # other thresholds: other C
        "config.cpu__poison = not config.cpu__poison",  # any other flag
    ],
)
def test_an_entry_of_other_settings_gives_nothing(tmp_path, setup):
    counts, path, c, _ = _child(tmp_path, setup)
    counts2, path2, c2, _ = _child(tmp_path)
    assert counts2[0] == 0 and counts2[3] == counts[3], counts2
    if setup.startswith("csource"):
        assert c2 != c and path2 != path  # the thresholds are in the C
    assert len(_entries(tmp_path)) == 2


def _key(op, ins=(("float64", (False,)),), consts=()):
    return (op, ins, (("float64", (False,)),), tuple(range(len(ins))), consts)


def test_kernel_text_tells_apart_what_the_c_depends_on():
    x = ts.float64("x")
    i8, i16 = np.int8(100), np.int16(100)
    a = Composite([x], [x * 2])
    texts = [
        kindex.kernel_text(_key(Elemwise(a))),
        kindex.kernel_text(_key(Elemwise(Composite([x], [x * np.float32(2)])))),
        kindex.kernel_text(_key(Elemwise(Composite([x], [x + ts.constant(i8)])))),
        kindex.kernel_text(_key(Elemwise(Composite([x], [x + ts.constant(i16)])))),
        kindex.kernel_text(_key(Elemwise(ts.exp))),
        kindex.kernel_text(_key(Elemwise(ts.exp), (("float32", (False,)),))),
        kindex.kernel_text(_key(Elemwise(ts.exp), (("float64", (True,)),))),
        kindex.kernel_text(_key(Elemwise(ts.exp, {0: 0}))),
        kindex.kernel_text(_key(Elemwise(ts.add), (("float64", (False,)),) * 2)),
        *[
            kindex.kernel_text(
                (
                    Elemwise(ts.add),
                    (("float64", (False,)),) * 2,
                    (("float64", (False,)),),
                    (0,),
                    ((1, "<f8", np.float64(c).tobytes()),),
                )  # fmt: skip
            )
            for c in (1.0, 2.0)  # kernels of other constants
        ],
    ]
    y = ts.float64("y")
    two = (("float64", (False,)),) * 2
    texts += [
        kindex.kernel_text(_key(Elemwise(Composite([x, y], [x - y])), two)),
        kindex.kernel_text(_key(Elemwise(Composite([x, y], [y - x])), two)),
        kindex.kernel_text(_key(Elemwise(Composite([x, y], [ts.exp(x) - y])), two)),
        kindex.kernel_text(_key(Elemwise(Composite([x, y], [ts.exp(x - y)])), two)),
    ]
    assert None not in texts and len(set(texts)) == len(texts)
    # Equal ops made apart have one text.
    assert kindex.kernel_text(_key(Elemwise(Composite([x], [x * 2])))) == texts[0]


def test_ops_without_a_faithful_text_have_none():
    class Local(ts.UnaryScalarOp):  # a class inside a function: not named by its name
        c_expr = "x"

    assert kindex.kernel_text(_key(Elemwise(Local(ts.upcast_out)))) is None
    # A prop that is a lambda: its name does not say what it does.
    assert kindex.kernel_text(_key(Elemwise(type(ts.exp)(lambda *d: d)))) is None
    # Not an Elemwise: kernel_source is not what makes its C.
    assert kindex.kernel_text(_key(tt.sum(tt.dvector()).owner.op)) is None


def test_the_environment_has_the_flags_and_thresholds(monkeypatch):
    env = kindex.environment()
    with config.change_flags(cpu__poison=not config.cpu__poison):
        assert kindex.environment() != env
    monkeypatch.setattr(csource, "MIN_PARALLEL", csource.MIN_PARALLEL * 2)
    assert kindex.environment() != env


class _UserScalar(ts.UnaryScalarOp):  # a user's op, at a module's top: found by its name
    c_expr = "(%(x)s * 2)"


def test_a_users_scalar_op_has_no_text():
    # Its code is not in the code version: the same name may have other C next time.
    assert kindex.kernel_text(_key(Elemwise(_UserScalar(ts.upgrade_to_float)))) is None


# A user's module whose scalar op's C changes between two processes, its name the same.
USER_MODULE = """
import theano_dag.scalar as ts

class Scaled(ts.UnaryScalarOp):
    nfunc = staticmethod(lambda x: x * {k})
    c_expr = "(%(x)s * {k})"

scaled = Scaled(ts.upgrade_to_float)
"""

USER_CHILD = """
import sys
sys.path[:0] = [{root!r}, {mod!r}]
import numpy as np
import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.config import config
from theano_dag.engines.cpu.native import ckernel, kindex
from theano_dag.tensor.elemwise import Elemwise
import usermod
config.compiledir = {cache!r}
x = tt.dvector("x")
with ckernel.compile_mode("sync"):
    f = function([x], Elemwise(usermod.scaled)(tt.exp(x)) + 1)
    print(f(np.zeros(3))[0], kindex.stats["hits"])
"""


@pytest.mark.usefixtures("step_library_in_the_cache")
@needs_cc
def test_a_users_scalar_op_edited_between_processes_gives_its_new_values(tmp_path):
    # The index once named a user's op by its class's name: the second process took the
    # first one's C and returned 3.0 where its op computes 4.0.
    mod = tmp_path / "mod"
    mod.mkdir()
    got = []
    for k in (2, 3):
        (mod / "usermod.py").write_text(USER_MODULE.format(k=k))
        child = USER_CHILD.format(root=ROOT, mod=str(mod), cache=str(tmp_path))
        p = subprocess.run(
            [sys.executable, "-c", child], capture_output=True, text=True, timeout=300
        )
        assert p.returncode == 0, p.stderr
        value, hits = p.stdout.split()
        got.append((float(value), int(hits)))
    assert got == [(3.0, 0), (4.0, 0)]  # exp(0) * k + 1, no C from the index


def test_the_index_folder_is_kept_under_its_bounds(tmp_path, monkeypatch):
    monkeypatch.setattr(kindex, "MAX_ENTRIES", 2)
    names = [bytes([k]) * 32 for k in range(4)]
    folder = kindex.index_dir(str(tmp_path))
    for k, name in enumerate(names):
        entry = kindex.Entry(str(tmp_path), name)
        entry.write({name: f"template {k}"}, {name: f"key {k}"})
        os.utime(entry.path, (1000 + k, 1000 + k))  # written in this order
        os.utime(os.path.join(folder, ".sized"), (0, 0))  # sized again at the next write
    # The two written last are kept, and read back whole.
    assert [os.path.basename(p) for p in _entries(tmp_path)] == [n.hex()[:40] for n in names[2:]]
    entry = kindex.Entry(str(tmp_path), names[3])
    entry.read()
    assert entry.templates == {names[3]: "template 3"} and entry.keys == {names[3]: "key 3"}
