"""Small dense linear algebra as steps of a segment (``native/linalg_driver.c``): the
Cholesky factor, its gradient, triangular solves and diagonal matrices, in C once the
library is loaded, through the ops' ``perform`` (LAPACK) before it and wherever C refuses
an operand; values against numpy/scipy, errors LAPACK's."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu.emit import csource
from theano_dag.engines.cpu.emit.csource import array_layout
from theano_dag.engines.cpu.native import cc, ckernel, segment
from theano_dag.engines.cpu.native.ckernel import LinalgKernel, kernel_calls
from theano_dag.gradient import grad
from theano_dag.tensor.extra_ops import AllocDiag
from theano_dag.tensor.linalg import Cholesky, CholeskyGrad, Solve
from theano_dag.tensor.type import TensorType

pytestmark = [
    pytest.mark.skipif(
        cc.get_toolchain(config.cxx) is None or array_layout() is None,
        reason="no C compiler (config.cxx) or an unknown ndarray layout",
    ),
    pytest.mark.skipif(
        not segment.available(), reason="the C half of the call has no Segment (not rebuilt)"
    ),
    pytest.mark.usefixtures("no_kernel_builds_in_flight"),
]

# float32 operands are computed in double by C and in float32 by LAPACK
RTOL = {"float32": 2e-4, "float64": 1e-11}


def _mat(dtype, shape=(None, None)):
    return TensorType(dtype, shape)()


def _nodes(dtype):
    """One node of each kind a LinalgKernel runs, by kind."""
    A, b, v = _mat(dtype), _mat(dtype), TensorType(dtype, (None,))()
    return {
        "chol": Cholesky(lower=True)(A).owner,
        "cholnan": Cholesky(lower=True, on_error="nan")(A).owner,
        "trsl": Solve("lower_triangular", lower=True)(A, b).owner,
        "trsu": Solve("upper_triangular")(A, b).owner,
        "trsl1": Solve("lower_triangular", lower=True, unit_diagonal=True)(A, b).owner,
        "trsu1": Solve("upper_triangular", unit_diagonal=True)(A, b).owner,
        "cholgrad": CholeskyGrad()(A, _mat(dtype), b).owner,
        "allocdiag": AllocDiag(offset=0)(v).owner,
    }


def _loaded(tmp_path, dtype):
    """LinalgKernels of every kind, built and loaded, and their numpy twins (no library)."""
    lib = ckernel.kernel_library(compiledir=str(tmp_path), mode="sync")
    nodes = _nodes(dtype)
    ks = {kind: lib.add_linalg(node, dtype, kind) for kind, node in nodes.items()}
    assert lib.wait() and all(k.ready for k in ks.values())
    return ks, {kind: LinalgKernel(node, dtype, kind) for kind, node in nodes.items()}


def _spd(rng, n, dtype):
    m = rng.standard_normal((n, n))
    return (m @ m.T / max(n, 1) + np.eye(n)).astype(dtype)


def _layouts(a):
    """``a``, the same values strided (a view of a larger array), Fortran-ordered."""
    big = np.zeros(tuple(2 * n + 1 for n in a.shape), a.dtype)
    view = big[tuple(slice(1, None, 2) for _ in a.shape)]
    view[...] = a
    return [a, view, np.asfortranarray(a)]


def _triangle(a, kind):
    t = np.tril(a) if kind.startswith("trsl") else np.triu(a)
    if kind.endswith("1"):
        np.fill_diagonal(t, 1)
    return t


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cholesky_and_solve_steps_are_lapacks(tmp_path, dtype):
    ks, numpy_ks = _loaded(tmp_path, dtype)
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 40, 128):
        A = _spd(rng, n, dtype)
        # the upper triangle is not read: garbage there changes nothing
        A_low = np.tril(A) + np.triu(np.full((n, n), 1e3, dtype), 1)
        want_l = np.linalg.cholesky(A.astype("float64"))
        for As in _layouts(A) + _layouts(A_low):
            for kind in ("chol", "cholnan"):
                for k in (ks[kind], numpy_ks[kind]):
                    out = np.full((n, n), 7.0, dtype)
                    assert not k.c(As, out), (k, n)
                    np.testing.assert_allclose(out, want_l, rtol=RTOL[dtype], atol=RTOL[dtype])
                    assert (np.triu(out, 1) == 0).all()
        L = want_l.astype(dtype)
        T = (L + 0.1 * np.triu(rng.standard_normal((n, n)), 1)).astype(dtype)
        for bshape in [(n,), (n, 1), (n, 5), (n, 0)]:
            b = rng.standard_normal(bshape).astype(dtype)
            for kind in ("trsl", "trsu", "trsl1", "trsu1"):
                M = L if kind.startswith("trsl") else T
                want = np.linalg.solve(_triangle(M.astype("float64"), kind), b.astype("float64"))
                scale = np.abs(want).max(initial=1.0)
                for Ms in _layouts(M):
                    for bs in _layouts(b):
                        for k in (ks[kind], numpy_ks[kind]):
                            out = np.full(bshape, 7.0, dtype)
                            assert not k.c(Ms, bs, out), (k, n, bshape)
                            np.testing.assert_allclose(
                                out, want, rtol=RTOL[dtype], atol=RTOL[dtype] * scale
                            )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cholesky_grad_and_allocdiag_steps_are_performs(tmp_path, dtype):
    ks, numpy_ks = _loaded(tmp_path, dtype)
    rng = np.random.default_rng(1)
    for n in (1, 3, 40, 128):
        A = _spd(rng, n, dtype)
        L = np.linalg.cholesky(A)
        dL = np.tril(rng.standard_normal((n, n))).astype(dtype)
        want = np.full((n, n), np.nan, dtype)
        numpy_ks["cholgrad"].c(A, L, dL, want)  # the op's perform
        assert not np.isnan(want).any()
        assert (np.triu(want, 1) == 0).all()
        for Ls in _layouts(L):
            for dLs in _layouts(dL):
                out = np.full((n, n), 7.0, dtype)
                assert not ks["cholgrad"].c(A, Ls, dLs, out)
                scale = np.abs(want).max()
                np.testing.assert_allclose(out, want, rtol=RTOL[dtype], atol=RTOL[dtype] * scale)
        v = rng.standard_normal(n).astype(dtype)
        for offset in (0, 2, -3):
            want = np.diag(v.astype("float64"), offset)
            for vs in _layouts(v)[:2]:
                # the numpy twin's node has offset 0; C reads the offset operand
                for k in (ks["allocdiag"], numpy_ks["allocdiag"])[: 2 if offset == 0 else 1]:
                    out = np.full(want.shape, 7.0, dtype)
                    assert not k.c(vs, np.array(offset, np.int64), out)
                    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linalg_steps_refuse_what_lapack_refuses_and_numpy_raises(tmp_path, dtype):
    ks, _ = _loaded(tmp_path, dtype)
    not_pd = np.array([[1.0, 2.0], [2.0, 1.0]], dtype)
    # on_error="raise": nothing written, then numpy's LinAlgError
    out = np.full((2, 2), 7.0, dtype)
    assert ks["chol"].c(not_pd, out) and (out == 7).all()
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        ks["chol"].fail(not_pd, out)
    # on_error="nan": NaNs, as the op's perform gives them
    assert not ks["cholnan"].c(not_pd, out) and np.isnan(out).all()
    nan_pivot = np.array([[np.nan, 0.0], [0.0, 1.0]], dtype)
    assert ks["chol"].c(nan_pivot, np.empty((2, 2), dtype))
    # a zero on the triangle's diagonal: scipy's (or numpy's) singular-matrix error
    singular = np.array([[1.0, 0.0], [3.0, 0.0]], dtype)
    b, out = np.ones(2, dtype), np.full(2, 7.0, dtype)
    assert ks["trsl"].c(singular, b, out) and (out == 7).all()
    with pytest.raises(np.linalg.LinAlgError, match="[Ss]ingular"):
        ks["trsl"].fail(singular, b, out)
    assert ks["cholgrad"].c(singular, singular, np.ones((2, 2), dtype), np.empty((2, 2), dtype))
    # with a unit diagonal the zero is not read
    assert not ks["trsl1"].c(singular, b, out)
    np.testing.assert_array_equal(out, [1.0, -2.0])
    # more rows than the C loops take: LAPACK's answer through fail
    rng = np.random.default_rng(2)
    big = _spd(rng, 129, dtype)
    out = np.full((129, 129), 7.0, dtype)
    assert ks["chol"].c(big, out) and (out == 7).all()
    ks["chol"].fail(big, out)
    np.testing.assert_allclose(out, np.linalg.cholesky(big), rtol=RTOL[dtype] * 10)
    # shapes that do not fit, another dtype, memory shared with the output: refused
    assert ks["trsl"].c(np.eye(3, dtype=dtype), np.ones(2, dtype), np.empty(2, dtype))
    with pytest.raises(ValueError):
        ks["trsl"].fail(np.eye(3, dtype=dtype), np.ones(2, dtype), np.empty(2, dtype))
    assert ks["chol"].c(np.ones((2, 3), dtype), np.empty((2, 3), dtype))
    other = "float32" if dtype == "float64" else "float64"
    assert ks["chol"].c(np.eye(2, dtype=other), np.empty((2, 2), dtype))
    a = np.eye(3, dtype=dtype)
    assert ks["chol"].c(a, a)
    np.testing.assert_array_equal(a, np.eye(3))


def _gp_graph(dtype):
    """A Gaussian process's log marginal likelihood in ``log_s`` (its noise) and the
    covariance ``K``, with its gradient: every kind of step but the unit diagonals."""
    K, y = TensorType(dtype, (None, None))("K"), TensorType(dtype, (None,))("y")
    log_s = TensorType(dtype, ())("log_s")
    n = K.shape[0]
    C = K + AllocDiag()(tt.alloc(tt.exp(2 * log_s), n))
    L = Cholesky(lower=True, on_error="nan")(C)
    a = Solve("lower_triangular", lower=True)(L, y)
    logp = -0.5 * tt.sum(a**2) - tt.sum(tt.log(tt.diagonal(L)))
    return [K, y, log_s], [logp, *grad(logp, [K, log_s])]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("poisoned", [False, True])
def test_gp_graph_runs_its_linear_algebra_as_steps(tmp_path, dtype, poisoned):
    ins, outs = _gp_graph(dtype)
    ref = function(ins, outs, mode=Mode(linker="py", optimizer=None))
    with config.change_flags(cxx=""):  # the engine's numpy path, on the same graph
        numpy_path = function(ins, outs)
    x = np.linspace(0, 5, 30)
    Kv = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2).astype(dtype)
    yv = np.sin(x).astype(dtype)
    sv = np.asarray(-1.0, dtype)
    with (
        config.change_flags(compiledir=str(tmp_path), cpu__poison=poisoned),
        ckernel.compile_mode("sync"),
    ):
        f = function(ins, outs)
        f(Kv, yv, sv)
        assert ckernel.wait_for_kernels(f)
        kinds = {k.kind for k in kernel_calls(f) if isinstance(k, LinalgKernel)}
        assert {"cholnan", "trsl", "trsu", "cholgrad", "allocdiag"} <= kinds, kinds
        keep = [Kv.copy(), yv.copy()]
        first = f(Kv, yv, sv)
        held = [np.array(a) for a in first]
        for args in [(Kv, yv, sv), (np.asfortranarray(Kv), yv[::-1].copy()[::-1], sv)]:
            got, want, same = f(*args), ref(*args), numpy_path(*args)
            for g, w, s in zip(got, want, same):
                assert g.dtype == w.dtype and g.shape == w.shape
                scale = np.abs(w).max()
                np.testing.assert_allclose(g, w, rtol=RTOL[dtype], atol=RTOL[dtype] * scale)
                np.testing.assert_allclose(g, s, rtol=RTOL[dtype], atol=RTOL[dtype] * scale)
        # not positive definite: NaNs (on_error="nan"), as the reference gives them
        bad = -np.eye(30, dtype=dtype)
        for g, w in zip(
            f(bad, yv, np.asarray(-30.0, dtype)), ref(bad, yv, np.asarray(-30.0, dtype))
        ):
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_array_equal(Kv, keep[0])
    np.testing.assert_array_equal(yv, keep[1])
    for a, h in zip(first, held):
        np.testing.assert_array_equal(a, h)


def test_the_steps_c_is_in_the_step_library_not_in_the_kernel_libraries():
    # The fixed C of the steps (three quarters of a small kernel library's compile time)
    # is built once, in the step library; a kernel library holds its kernels alone.
    x = tt.dvector("x")
    lib = ckernel.KernelLibrary()
    lib.add(tt.exp(x).owner)
    lib.add_linalg(_nodes("float64")["chol"], "float64", "chol")
    lib.add_sum(tt.sum(x).owner, "float64", None)
    steps = csource.steps_source(*ckernel._layout_and_simd(None))
    for entry in ("TD_LA_ENTRIES(double, f64)", "int td_sum_f64_v(", "TD_MV_ENTRIES(double, f64)"):
        assert entry in steps
        assert entry not in lib.source()
    assert "int k0(" in lib.source() and "int k0(" not in steps
