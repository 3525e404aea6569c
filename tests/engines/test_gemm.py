"""Matrix products in C (theano_dag.engines.cpu.native.gemm) against numpy, and in the engine.

The kernel is forced on with ``config.cpu_gemm="c"`` so that these tests run it on any
machine with a compiler, AVX-512 or not (``"auto"`` takes it only on AVX-512).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag import grad
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.compile.sharedvalue import shared
from theano_dag.config import config
from theano_dag.engines.cpu.emit.csource import array_layout
from theano_dag.engines.cpu.native import cc
from theano_dag.engines.cpu.native import gemm as G
from theano_dag.tensor import blas

pytestmark = pytest.mark.skipif(
    cc.get_toolchain(config.cxx) is None or array_layout() is None,
    reason="no C compiler (config.cxx) or an unknown ndarray layout",
)

REF = Mode(linker="py", optimizer=None)
TOL = {"float32": 2e-6, "float64": 1e-14}


@pytest.fixture(scope="module")
def compiledir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("gemm"))


@pytest.fixture
def c_gemm(compiledir):
    """The C products loaded (compiled synchronously into a fresh cache)."""
    with config.change_flags(cpu_gemm="c", compiledir=compiledir):
        assert G.load(wait=True), G._STATE["error"]
        yield
    G.load()  # back to what the flags say outside


@pytest.fixture
def no_numpy(monkeypatch):
    """Fail a test whose product falls back to numpy."""

    def refuse(*args):
        raise AssertionError("the product ran in numpy, not in C")

    monkeypatch.setattr(G, "_numpy_gemm", refuse)


def expected(a, b, c0, alpha, beta):
    """alpha * a @ b + beta * c0 in long double, rounded to the dtype."""
    p = a.astype(np.longdouble) @ b.astype(np.longdouble)
    r = alpha * p if beta == 0 else alpha * p + beta * c0.astype(np.longdouble)
    return r.astype(a.dtype)


def operand(rng, shape, dtype, layout):
    """A random matrix of ``shape`` in memory laid out as ``layout``."""
    if layout == "C":
        return rng.uniform(-1, 1, shape).astype(dtype)
    if layout == "F":
        return np.asfortranarray(rng.uniform(-1, 1, shape).astype(dtype))
    if layout == "strided":
        return rng.uniform(-1, 1, (shape[0], 2 * shape[1])).astype(dtype)[:, ::2]
    assert layout == "reversed"
    return rng.uniform(-1, 1, shape).astype(dtype)[::-1]


# m, k, n: edge tiles (not multiples of 12 rows or 16/32 columns), several k blocks
# (k > 256), several m blocks (m > 192), skinny outputs (the transposed path), and sizes
# big enough to split over threads.
SHAPES = [(8, 8, 8), (13, 7, 33), (37, 300, 41), (200, 600, 9), (9, 40, 500), (250, 130, 70)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_products_match_numpy(c_gemm, no_numpy, m, k, n, dtype):
    rng = np.random.default_rng(m * 1000 + n)
    a, b = operand(rng, (m, k), dtype, "C"), operand(rng, (k, n), dtype, "C")
    c0 = rng.uniform(-1, 1, (m, n)).astype(dtype)
    for alpha, beta in [(1.0, 0.0), (-0.01, 1.0), (0.5, 2.0)]:
        c = c0.copy()
        assert G.gemm(a, b, c, alpha, beta) is c
        tol = TOL[dtype] * k
        np.testing.assert_allclose(c, expected(a, b, c0, alpha, beta), rtol=tol, atol=tol)


@pytest.mark.parametrize("la", ["C", "F", "strided", "reversed"])
@pytest.mark.parametrize("lb", ["C", "F", "strided"])
@pytest.mark.parametrize("lc", ["C", "F", "strided"])
@pytest.mark.parametrize("n", [50, 20])  # 20: one panel of B, A read in place
def test_any_strides(c_gemm, no_numpy, la, lb, lc, n):
    rng = np.random.default_rng(1)
    m, k = 45, 70
    a, b = operand(rng, (m, k), "float64", la), operand(rng, (k, n), "float64", lb)
    c = operand(rng, (m, n), "float64", lc)
    c0 = c.copy()
    G.gemm(a, b, c, 1.5, -1.0)
    np.testing.assert_allclose(c, expected(a, b, c0, 1.5, -1.0), rtol=1e-13, atol=1e-13)


def test_beta_zero_ignores_what_c_held(c_gemm, no_numpy):
    a, b = np.ones((20, 30)), np.ones((30, 40))
    c = np.full((20, 40), np.nan)
    G.gemm(a, b, c, 2.0, 0.0)
    np.testing.assert_array_equal(c, np.full((20, 40), 60.0))


def test_nonfinite_values_propagate_as_in_numpy(c_gemm, no_numpy):
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (24, 16))
    b = rng.uniform(-1, 1, (16, 40))
    a[3, 5] = np.inf
    a[7, 2] = np.nan
    b[4, 9] = -np.inf
    c = np.empty((24, 40))
    G.gemm(a, b, c, 1.0, 0.0)
    with np.errstate(invalid="ignore"):
        want = a @ b
    np.testing.assert_array_equal(np.isnan(c), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(c), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(c[fin], want[fin], rtol=1e-13, atol=1e-13)


def test_declined_products_run_in_numpy(c_gemm):
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (30, 30))
    # The output overlaps an input (the C kernel would read what it wrote).
    want = a @ a
    G.gemm(a, a.copy(), a, 1.0, 0.0)
    np.testing.assert_allclose(a, want, rtol=1e-13)
    # A side below MIN_DIM, integers and complex: numpy's answer.
    for x, y in [
        (np.ones((3, 50)), np.ones((50, 40))),
        (np.arange(200).reshape(10, 20), np.arange(200).reshape(20, 10)),
        (np.ones((10, 10), complex) * 1j, np.ones((10, 10), complex)),
    ]:
        out = np.empty((x.shape[0], y.shape[1]), x.dtype)
        np.testing.assert_array_equal(G.gemm(x, y, out, 1, 0), x @ y)


def test_mismatched_shapes_raise_numpys_error(c_gemm):
    with pytest.raises(ValueError, match="not aligned|mismatch"):
        G.gemm(np.ones((20, 30)), np.ones((31, 20)), np.empty((20, 20)), 1.0, 0.0)


def test_numpy_flag_turns_the_kernel_off(compiledir):
    with config.change_flags(cpu_gemm="numpy", compiledir=compiledir):
        assert not G.wanted()
        assert not G.load()
        assert not G.ready()
    G.load()


# -- in the engine -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_engine_runs_dot_and_gemm_in_c(c_gemm, no_numpy, dtype):
    rng = np.random.default_rng(4)
    x = tt.matrix("x", dtype=dtype)
    w = shared(rng.uniform(-1, 1, (40, 30)).astype(dtype), name="w")
    v = shared(rng.uniform(-1, 1, (30, 20)).astype(dtype), name="v")
    h = tt.dot(tt.dot(x, w), v)  # Dot22
    cost = (h**2).sum()
    gw, gv = grad(cost, [w, v])
    lr = np.asarray(0.01, dtype)
    updates = [(w, w - lr * gw), (v, v - lr * gv)]
    f = function([x], cost, updates=updates, mode=get_mode(None))
    assert any(isinstance(n.op, blas.Gemm) for n in f.maker.fgraph.apply_nodes)
    w_ref = shared(w.get_value(), name="w")
    v_ref = shared(v.get_value(), name="v")
    h_ref = tt.dot(tt.dot(x, w_ref), v_ref)
    c_ref = (h_ref**2).sum()
    gw_r, gv_r = grad(c_ref, [w_ref, v_ref])
    upd_ref = [(w_ref, w_ref - lr * gw_r), (v_ref, v_ref - lr * gv_r)]
    g = function([x], c_ref, updates=upd_ref, mode=REF)
    xv = rng.uniform(-1, 1, (50, 40)).astype(dtype)
    tol = 1e-4 if dtype == "float32" else 1e-12
    for _ in range(2):
        np.testing.assert_allclose(f(xv), g(xv), rtol=tol)
    # float32 sums in another order than numpy's: errors scale with the largest value
    for got, want in [(w.get_value(), w_ref.get_value()), (v.get_value(), v_ref.get_value())]:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_engine_results_are_not_overwritten_by_the_next_call(c_gemm):
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    f = function([x, y], tt.dot(x, y) * 2, mode=get_mode(None))
    a, b = np.ones((16, 16)), np.eye(16)
    first = f(a, b)
    second = f(a * 3, b)
    np.testing.assert_array_equal(first, np.full((16, 16), 2.0))
    np.testing.assert_array_equal(second, np.full((16, 16), 6.0))


def test_engine_gemm_whose_output_reuses_an_operand(c_gemm):
    # dot(h, y) + h: a Gemm reading h as z and as x. When h dies there, the plan may put
    # the result in h's own block; the C kernel then sees its output overlap an input,
    # declines, and numpy computes it (the product first, then the sum).
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    h = tt.exp(x)
    out = tt.dot(h, y) + h
    f = function([x, y], out, mode=get_mode(None))
    assert any(isinstance(n.op, blas.Gemm) for n in f.maker.fgraph.apply_nodes)
    rng = np.random.default_rng(5)
    xv, yv = rng.uniform(-1, 1, (30, 30)), rng.uniform(-1, 1, (30, 30))
    want = np.exp(xv) @ yv + np.exp(xv)
    for _ in range(2):
        np.testing.assert_allclose(f(xv, yv), want, rtol=1e-12)


@pytest.mark.parametrize("scalar", ["constant", "variable"])
def test_engine_dot22scalar(c_gemm, no_numpy, scalar):
    x, y, s = tt.fmatrix("x"), tt.fmatrix("y"), tt.fscalar("s")
    a = np.float32(0.25) if scalar == "constant" else s
    out = blas.dot22scalar(x, y, a)
    f = function([x, y, s], out, mode=Mode(linker="cpu", optimizer=None), on_unused_input="ignore")
    rng = np.random.default_rng(6)
    xv = rng.uniform(-1, 1, (20, 30)).astype("float32")
    yv = rng.uniform(-1, 1, (30, 40)).astype("float32")
    got = f(xv, yv, np.float32(0.25))
    want = function([x, y, s], out, mode=REF, on_unused_input="ignore")(xv, yv, np.float32(0.25))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_read_only_output_gets_numpys_error(c_gemm):
    c = np.zeros((16, 16))
    c.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        G.gemm(np.ones((16, 16)), np.ones((16, 16)), c, 1.0, 1.0)
    with pytest.raises(ValueError, match="not acceptable"):  # np.dot's words for it
        G.gemm(np.ones((16, 16)), np.ones((16, 16)), c, 1.0, 0.0)
    assert not c.any()


FORK_SCRIPT = """
import os, sys
import numpy as np
import theano_dag, theano_dag.tensor as tt
from theano_dag.config import config
from theano_dag.engines.cpu.native import cc, ckernel, gemm

config.compiledir = sys.argv[1]
config.cpu_gemm = "c"
assert gemm.load(wait=True)
x, y = tt.fmatrix("x"), tt.fmatrix("y")
f = theano_dag.function([x, y], tt.exp(tt.dot(x, y)) * 2 + 1)
a = np.full((600, 600), 1e-3, np.float32)
want = f(a, a)
assert ckernel.wait_for_kernels(f)
np.testing.assert_allclose(f(a, a), want, rtol=1e-5)  # C, threads: parallel loops ran
pid = os.fork()
if pid == 0:  # the child: its OpenMP threads are gone
    ok = cc.forked() and np.allclose(f(a, a), want, rtol=1e-5)
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_runs_the_kernels_on_one_thread(compiledir):
    # Before the fix the child waited forever for the parent's OpenMP threads.
    proc = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT, compiledir],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "child exit 0" in proc.stdout
