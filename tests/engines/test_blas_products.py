"""Matrix products (Dot22, Dot, Dot22Scalar, Gemm) in the CPU engine against the reference.

They run in numpy's BLAS, which on a 16-core AVX-512 Xeon was faster than the
hand-written kernel it replaced on 8 of 10 product cases (docs/performance.md).
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from engine_modes import ENGINES, rewritten_mode  # the engines, fast_run on each

import theano_dag.tensor as tt
from theano_dag import In, grad
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.compile.sharedvalue import shared
from theano_dag.config import config
from theano_dag.engines.cpu.emit.csource import array_layout
from theano_dag.engines.cpu.native import cc
from theano_dag.tensor import blas

REF = Mode(linker="py", optimizer=None)


@pytest.fixture(scope="module")
def compiledir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("kernels"))


# -- in the engine -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_engine_runs_dot_and_gemm(dtype):
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


def test_engine_results_are_not_overwritten_by_the_next_call():
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    f = function([x, y], tt.dot(x, y) * 2, mode=get_mode(None))
    a, b = np.ones((16, 16)), np.eye(16)
    first = f(a, b)
    second = f(a * 3, b)
    np.testing.assert_array_equal(first, np.full((16, 16), 2.0))
    np.testing.assert_array_equal(second, np.full((16, 16), 6.0))


def test_engine_gemm_whose_output_reuses_an_operand():
    # dot(h, y) + h: a Gemm reading h as z and as x. When h dies there, the plan may put
    # the result in h's own block: the product goes to scratch first, then the sum.
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
def test_engine_dot22scalar(scalar):
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


@pytest.mark.parametrize("where", ["fresh", "planned", "inplace"])
def test_engine_gemm_with_variable_scales_as_blas(where):
    # gemm(z, a, x, y, b) with a and b inputs: b*z + a*dot(x, y), and at b = 0 z is not
    # read (its NaN dropped, as BLAS does), whether the result is a fresh array, a
    # planned block (z used after it) or z itself (the inplace op).
    z, x, y = tt.dmatrix("z"), tt.dmatrix("x"), tt.dmatrix("y")
    a, b = tt.dscalar("a"), tt.dscalar("b")
    op = blas.gemm_inplace if where == "inplace" else blas.gemm_no_inplace
    out = op(z, a, x, y, b)
    outs = [out, z.sum()] if where == "planned" else [out]
    ins = [In(z, mutable=where == "inplace"), x, y, a, b]
    f = function(ins, outs, mode=Mode(linker="cpu", optimizer=None), accept_inplace=True)
    rng = np.random.default_rng(7)
    xv, yv = rng.uniform(-1, 1, (6, 5)), rng.uniform(-1, 1, (5, 4))
    zv = rng.uniform(-1, 1, (6, 4))
    for av, bv in [(0.5, 2.0), (1.0, 1.0), (-3.0, 0.0)]:
        np.testing.assert_allclose(f(zv.copy(), xv, yv, av, bv)[0], bv * zv + av * (xv @ yv))
    got = f(np.full((6, 4), np.nan), xv, yv, 2.0, 0.0)[0]
    np.testing.assert_allclose(got, 2.0 * (xv @ yv))


FORK_SCRIPT = """
import os, sys
import numpy as np
import theano_dag, theano_dag.tensor as tt
from theano_dag.config import config
from theano_dag.engines.cpu.native import cc, ckernel

config.compiledir = sys.argv[1]
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
@pytest.mark.skipif(
    cc.get_toolchain(config.cxx) is None or array_layout() is None,
    reason="no C compiler (config.cxx) or an unknown ndarray layout",
)
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


# -- a transposed product accumulated -----------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_transposed_product_accumulated_is_one_gemm(engine, dtype):
    # b*z + a*dot(x, y).T is gemm(z, a, y.T, x.T, b) (Theano lifts the transpose through
    # the dot first): one BLAS call, no Dot22 and no elementwise pass; two such products
    # added to one accumulator are two Gemms
    X, Y, Z = (tt.matrix(n, dtype=dtype) for n in "XYZ")
    R, S = tt.matrix("R", dtype=dtype), tt.matrix("S", dtype=dtype)
    a, b, c = (tt.scalar(n, dtype=dtype) for n in "abc")
    cases = [
        ([X, Y, Z, a, b], b * Z + a * tt.dot(X, Y).T, [(5, 3), (3, 4), (4, 5)], 1),
        ([X, Y, Z, a, b], b * Z.T + a * b * tt.dot(X, Y).T, [(4, 3), (3, 5), (4, 5)], 1),
        ([X, Y, Z, a, b], b * Z - tt.dot(X, Y).T, [(5, 3), (3, 4), (4, 5)], 1),
        (
            [X, Y, Z, a, b, R, S, c],
            Z * c + a * tt.dot(X, Y) + b * tt.dot(R, S).T,
            [(4, 3), (3, 5), (4, 5), (5, 9), (9, 4)],
            2,
        ),
    ]
    rng = np.random.default_rng(9)
    for ins, out, mats, n_gemm in cases:
        f = function(ins, out, mode=rewritten_mode(engine), on_unused_input="ignore")
        ops = [n.op for n in f.maker.fgraph.apply_nodes]
        assert sum(isinstance(op, blas.Gemm) for op in ops) == n_gemm, ops
        assert not any(isinstance(op, (blas.Dot22, tt.Dot)) for op in ops), ops
        vals = [rng.normal(size=s).astype(dtype) for s in mats]
        scal = [np.asarray(v, dtype=dtype) for v in (0.5, -1.5, 2.0)]
        args = vals[:3] + scal[:2] + (vals[3:] + scal[2:] if len(ins) > 5 else [])
        want = function(ins, out, mode=REF, on_unused_input="ignore")(*args)
        got = f(*args)
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12)
