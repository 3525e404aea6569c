"""Steps of a segment other than fused elementwise kernels (``engines.cpu.native``):
small matrix-vector products (Dot of a matrix and a vector, Gemv) and in-place
set/inc_subtensor at known indices, in C once the library is loaded, through numpy
before (and where C refuses an operand); values against numpy, errors numpy's."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu import CPULinker
from theano_dag.engines.cpu.emit.csource import array_layout
from theano_dag.engines.cpu.native import cc, ckernel, segment
from theano_dag.engines.cpu.native.ckernel import (
    MatVecKernel,
    SubtensorKernel,
    index_code,
    kernel_calls,
)
from theano_dag.tensor import blas
from theano_dag.tensor.elemwise import Elemwise
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

RTOL = {"float32": 1e-5, "float64": 1e-13}


def _loaded(tmp_path, add):
    """A library of the kernels ``add(lib)`` makes, built and loaded; the kernels."""
    lib = ckernel.kernel_library(compiledir=str(tmp_path), mode="sync")
    ks = add(lib)
    assert lib.wait() and all(k.ready for k in ks)
    return ks


def _layouts(a):
    """``a`` as it is, and the same values in a strided array (a view of a larger one)."""
    big = np.zeros(tuple(2 * n + 1 for n in a.shape), a.dtype)
    view = big[tuple(slice(1, None, 2) for _ in a.shape)]
    view[...] = a
    return [a, view]


# -- matrix-vector products ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matvec_steps_are_numpys_products(tmp_path, dtype):
    M, v = TensorType(dtype, (None, None))(), TensorType(dtype, (None,))()
    s = TensorType(dtype, ())()
    nodes = {
        "mv": tt.dot(M, v).owner,
        "vm": tt.dot(v, M).owner,
        "gemv": blas.gemv_no_inplace(v, s, M, v, s).owner,
    }
    ks = _loaded(tmp_path, lambda lib: [lib.add_matvec(n, dtype, k) for k, n in nodes.items()])
    numpy_ks = [MatVecKernel(n, dtype, k) for k, n in nodes.items()]  # no library
    rng = np.random.default_rng(0)
    for m, n in [(100, 3), (3, 100), (1, 1), (7, 0), (0, 5), (64, 256)]:
        A = rng.standard_normal((m, n)).astype(dtype)
        x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(m).astype(dtype)
        for a, b in [(1.0, -0.01), (0.5, 1.0), (-2.0, 0.0), (1.0, 1.0)]:
            sa, sb = np.asarray(a, dtype), np.asarray(b, dtype)
            want_gemv = np.asarray(b, dtype) * y + np.asarray(a, dtype) * (A @ x)
            # Sums in another order: off by a few roundings of the largest partial sum.
            scale = (np.abs(A) @ np.abs(x)).max(initial=0) + np.abs(y).max(initial=0)
            tol = 4 * np.finfo(dtype).eps * max(n, 1) * scale
            for As in _layouts(A) + [np.asfortranarray(A)]:
                for xs, ys in zip(_layouts(x), _layouts(y)):
                    cases = [
                        (0, (As, xs), A @ x),
                        (1, (ys, As), y @ A),
                        (2, (ys, sa, As, xs, sb), want_gemv),
                    ]
                    for j, args, want in cases:
                        for k in (ks[j], numpy_ks[j]):
                            out = np.full(want.shape, np.nan, dtype)
                            assert not k.c(*args, out), (k, m, n)
                            assert out.dtype == want.dtype
                            np.testing.assert_allclose(out, want, rtol=RTOL[dtype], atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matvec_step_refuses_what_it_does_not_run_and_numpy_takes_it(tmp_path, dtype):
    M, v = TensorType(dtype, (None, None))(), TensorType(dtype, (None,))()
    (k,) = _loaded(tmp_path, lambda lib: [lib.add_matvec(tt.dot(M, v).owner, dtype, "mv")])
    rng = np.random.default_rng(1)
    # More values than the C loop takes: numpy's product (BLAS) instead.
    A, x = rng.standard_normal((200, 100)).astype(dtype), rng.standard_normal(100).astype(dtype)
    out = np.full(200, np.nan, dtype)
    assert k.c(A, x, out) and np.isnan(out).all()
    k.fail(A, x, out)
    np.testing.assert_allclose(out, A @ x, rtol=RTOL[dtype] * 10)
    # Shapes that do not fit: nothing written, then numpy's own error.
    A, x, out = np.ones((3, 4), dtype), np.ones(5, dtype), np.full(3, np.nan, dtype)
    assert k.c(A, x, out) and np.isnan(out).all()
    with pytest.raises(ValueError, match=re.escape("shapes (3,4) and (5,) not aligned")):
        k.fail(A, x, out)
    # Another dtype or a list: refused too.
    other = "float32" if dtype == "float64" else "float64"
    assert k.c(np.ones((3, 4), other), np.ones(4, dtype), out)
    assert k.c([[1.0]], np.ones(1, dtype), np.empty(1, dtype))


def _gemv_graph(dtype):
    q = TensorType(dtype, (None,))("q")
    X = TensorType(dtype, (None, None))("X")
    w = q[1:4]
    mu = tt.dot(X, w) + q[0]
    r = tt.exp(mu) - 1
    return [q, X], [tt.sum(r * r), tt.grad(tt.sum(r * r), q)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dot_gemv_and_inc_subtensor_nodes_run_as_steps(tmp_path, dtype):
    ins, outs = _gemv_graph(dtype)
    ref = function(ins, outs, mode=Mode(linker="py", optimizer=None))
    with config.change_flags(cxx=""):  # the engine's numpy path, on the same graph
        numpy_path = function(ins, outs)
    rng = np.random.default_rng(2)
    qv = (0.3 * rng.standard_normal(5)).astype(dtype)
    Xv = (0.3 * rng.standard_normal((20, 3))).astype(dtype)
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function(ins, outs)
        f(qv, Xv)
        assert ckernel.wait_for_kernels(f)
    steps = [k for k in kernel_calls(f) if isinstance(k, (MatVecKernel, SubtensorKernel))]
    kinds = {k.name.split("_")[1] for k in steps}
    assert {"mv", "incsub"} <= kinds, kinds
    assert all(k.ready for k in steps)
    keep_q, keep_X = qv.copy(), Xv.copy()
    first = f(qv, Xv)
    held = [np.array(a) for a in first]
    for qs, Xs in [(qv, Xv), (qv[::-1].copy()[::-1], np.asfortranarray(Xv))]:
        got, want, same = f(qs, Xs), ref(qs, Xs), numpy_path(qs, Xs)
        for g, w, s in zip(got, want, same):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=RTOL[dtype] * 100, atol=1e-6)
            np.testing.assert_allclose(g, s, rtol=RTOL[dtype] * 100, atol=1e-6)
    # User arrays untouched, results of an earlier call not overwritten.
    np.testing.assert_array_equal(qv, keep_q)
    np.testing.assert_array_equal(Xv, keep_X)
    for a, h in zip(first, held):
        np.testing.assert_array_equal(a, h)


def test_steps_on_a_failing_compiler_run_numpy(tmp_path):
    cc_path = tmp_path / "fake-cc"
    cc_path.write_text('#!/bin/sh\necho "fake-cc: broken" >&2; exit 3\n')
    cc_path.chmod(0o755)
    ins, outs = _gemv_graph("float64")
    ref = function(ins, outs, mode=Mode(linker="py", optimizer=None))
    qv, Xv = np.linspace(-0.5, 0.5, 5), np.linspace(-1, 1, 60).reshape(20, 3)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with (
            config.change_flags(cxx=str(cc_path), compiledir=str(tmp_path / "c")),
            ckernel.compile_mode("sync"),
        ):
            f = function(ins, outs)
            results = [f(qv, Xv) for _ in range(3)]
    msgs = [str(w.message) for w in got if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1 and "fake-cc: broken" in msgs[0], msgs
    assert not any(k.ready for k in kernel_calls(f))
    for r in results:
        for g, w in zip(r, ref(qv, Xv)):
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)


def test_wrong_shape_at_a_dot_step_names_its_node(tmp_path):
    ins, outs = _gemv_graph("float64")
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function(ins, outs)
        f(np.zeros(5), np.zeros((20, 3)))
        assert ckernel.wait_for_kernels(f)
    with pytest.raises(ValueError) as info:
        f(np.zeros(5), np.zeros((20, 4)))
    assert "not aligned" in str(info.value) or "Shape mismatch" in str(info.value)
    assert "Apply node that caused the error: " in str(info.value)
    assert "Dot" in str(info.value) or "Gemv" in str(info.value)


# -- set/inc_subtensor ------------------------------------------------------------------

INDICES = [
    (0,),
    (-1,),
    (slice(1, 4),),
    (slice(None, None, -2),),
    (slice(-3, None),),
    (slice(5, 1, -1),),
    (slice(2, 2),),
    (slice(None, 100),),
    (2, slice(1, None, 2)),
    (-2, 1),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["set", "inc"])
def test_subtensor_steps_are_numpys_assignments(tmp_path, dtype, kind):
    x = TensorType(dtype, (None, None))()
    node = tt.set_subtensor(x[0], x[1]).owner  # any node: only its name shows in errors
    rng = np.random.default_rng(3)
    for index in INDICES:
        (k,) = _loaded(
            tmp_path, lambda lib, index=index: [lib.add_subtensor(node, dtype, kind, index)]
        )
        numpy_k = SubtensorKernel(node, dtype, kind, index)
        code = index_code(index)
        base = rng.standard_normal((6, 5)).astype(dtype)
        region = base[index].shape
        ys = [rng.standard_normal(region).astype(dtype), np.asarray(1.5, dtype)]
        if len(region) == 2:
            ys.append(rng.standard_normal(region[1:]).astype(dtype))  # broadcast rows
            ys.append(rng.standard_normal((1, region[1])).astype(dtype))
        for xs in _layouts(base):
            for y in ys:
                for yl in _layouts(y) if y.ndim else [y]:
                    want = base.copy()
                    if kind == "set":
                        want[index] = y
                    else:
                        want[index] += y
                    for kk in (k, numpy_k):
                        got = xs.copy() if xs.flags.c_contiguous else _layouts(base)[1]
                        assert not kk.c(got, yl, code), (index, kk)
                        assert np.array_equal(got, want), (index, y.shape, kk)


@pytest.mark.parametrize("kind", ["set", "inc"])
def test_subtensor_step_refuses_and_numpy_raises_its_error(tmp_path, kind):
    x = TensorType("float64", (None,))()
    node = tt.set_subtensor(x[0], x[1]).owner
    (k,) = _loaded(tmp_path, lambda lib: [lib.add_subtensor(node, "float64", kind, (7,))])
    a = np.arange(5.0)
    assert k.c(a, np.asarray(1.0), index_code((7,)))
    np.testing.assert_array_equal(a, np.arange(5.0))  # nothing written
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 0 with size 5"):
        k.fail(a, np.asarray(1.0), index_code((7,)))
    (k,) = _loaded(tmp_path, lambda lib: [lib.add_subtensor(node, "float64", kind, (slice(0, 3),))])
    code = index_code((slice(0, 3),))
    assert k.c(a, np.ones(2), code)
    np.testing.assert_array_equal(a, np.arange(5.0))
    msg = "could not broadcast input array from shape (2,) into shape (3,)"
    if kind == "inc":
        msg = "operands could not be broadcast together with shapes (3,) (2,) (3,)"
    with pytest.raises(ValueError, match=re.escape(msg)):
        k.fail(a, np.ones(2), code)
    # y a view of x: numpy's assignment, which reads y before it writes.
    a = np.arange(5.0)
    assert k.c(a, a[1:4], code)
    k.fail(a, a[1:4], code)
    want = np.arange(5.0)
    if kind == "set":
        want[0:3] = np.arange(1.0, 4.0)
    else:
        want[0:3] += np.arange(1.0, 4.0)
    np.testing.assert_array_equal(a, want)


def test_index_code():
    assert index_code((3, slice(None, -1, 2))).tolist() == [
        0,
        3,
        1,
        np.iinfo(np.int64).min,
        -1,
        2,
    ]


# -- views inside a segment ---------------------------------------------------------------


def _composite(fn, nin):
    ss = [ts.float64(f"s{j}") for j in range(nin)]
    return Elemwise(ts.Composite(ss, [fn(*ss)]))


@pytest.mark.parametrize("poisoned", [False, True])
def test_views_between_kernels_join_their_segment(tmp_path, poisoned):
    x, m = tt.dvector("x"), tt.dmatrix("m")
    a = _composite(lambda s: ts.exp(s) * 2, 1)(x)
    c = _composite(lambda s, t: s * t + 1, 2)(a.dimshuffle("x", 0), m)  # a view of a result
    d = _composite(lambda s, t: ts.tanh(s) - t, 2)(x[1:], a[:-1])  # views of x and of a
    # A reshape of a kernel's result is no view numpy promises: it stays after the kernel.
    e = _composite(lambda s: s + 1, 1)(a.reshape((2, -1)))
    outs = [c, d, e]
    ref = function([x, m], outs, mode=Mode(linker="py", optimizer=None))
    mode = Mode(linker=CPULinker(poison=poisoned, min_plan_bytes=0), optimizer=None)
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function([x, m], outs, mode=mode)
        f(np.zeros(6), np.zeros((3, 6)))
        assert ckernel.wait_for_kernels(f)
    rng = np.random.default_rng(4)
    for n in (6, 6, 10):
        xv, mv = rng.standard_normal(n), rng.standard_normal((3, n))
        for g, w in zip(f(xv, mv), ref(xv, mv)):
            np.testing.assert_allclose(g, w, rtol=1e-13)
    src = f.fn.source()
    if poisoned:  # each step alone, checked
        assert "_SEG" not in src
        return
    lines = [line.strip() for line in src.splitlines()]
    segs = [j for j, line in enumerate(lines) if "_SEG" in line]
    reshape = next(j for j, line in enumerate(lines) if "_reshape(" in line)
    # The kernels of a, c and d in the first segment (their views above it), e's after
    # the reshape.
    assert len(segs) == 2 and segs[0] < reshape < segs[1], src


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemv_step_in_place_over_y(tmp_path, dtype):
    # Gemv{inplace} writes over y: the product goes through a buffer then; a y that only
    # overlaps the output is refused, and numpy's steps run.
    M, v, s = (
        TensorType(dtype, (None, None))(),
        TensorType(dtype, (None,))(),
        TensorType(dtype, ())(),
    )
    node = blas.gemv_inplace(v, s, M, v, s).owner
    (k,) = _loaded(tmp_path, lambda lib: [lib.add_matvec(node, dtype, "gemv")])
    rng = np.random.default_rng(6)
    A = rng.standard_normal((6, 6)).astype(dtype)
    a, b = np.asarray(0.5, dtype), np.asarray(-2.0, dtype)
    y = rng.standard_normal(6).astype(dtype)
    want = b * y + a * (A @ y)
    got = y.copy()
    assert not k.c(got, a, A, got, b, got)  # y, x and the output: one array
    np.testing.assert_allclose(got, want, rtol=RTOL[dtype])
    big = rng.standard_normal(7).astype(dtype)
    yv, out = big[:6], big[1:]
    want = b * yv + a * (A @ np.ones(6, dtype))
    assert k.c(yv, a, A, np.ones(6, dtype), b, out)
    k.fail(yv, a, A, np.ones(6, dtype), b, out)
    np.testing.assert_allclose(out, want, rtol=RTOL[dtype])


# -- rows at an index vector (AdvancedSubtensor1, AdvancedIncSubtensor1) -------------------

ROW_INDICES = [[3, 0, 5], [5, 5, 1, 5], [-1, -6, 2, -3], [], [0]]


def _rows_nodes(dtype, ndim):
    x = TensorType(dtype, (None,) * ndim)()
    i = tt.lvector()
    y = TensorType(dtype, (None,) * ndim)()
    return {
        "take": x[i].owner,
        "set": tt.set_subtensor(x[i], y, inplace=True).owner,
        "inc": tt.inc_subtensor(x[i], y, inplace=True).owner,
    }


def _rows_want(kind, base, i, y):
    want = base.copy()
    if kind == "set":
        want[i] = y
    else:
        np.add.at(want, i, y)
    return want


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ndim", [1, 2])
def test_rows_steps_are_numpys_indexing(tmp_path, dtype, ndim):
    nodes = _rows_nodes(dtype, ndim)
    ks = _loaded(tmp_path, lambda lib: [lib.add_rows(n, dtype, k) for k, n in nodes.items()])
    numpy_ks = [ckernel.RowsKernel(n, dtype, k) for k, n in nodes.items()]  # no library
    assert [k.name for k in ks] == [f"td_{n}_{dtype[0]}{dtype[-2:]}" for n in
                                    ("take", "setrows", "incrows")]  # fmt: skip
    rng = np.random.default_rng(7)
    base = rng.standard_normal((6, 4)[:ndim]).astype(dtype)
    for il in ROW_INDICES:
        i = np.array(il, dtype=np.int64)
        want_take = base[i]
        region = want_take.shape
        ys = [rng.standard_normal(region).astype(dtype), np.asarray(1.5, dtype)]
        if ndim == 2:
            ys += [rng.standard_normal(region[1:]).astype(dtype)]  # one row for all
            ys += [rng.standard_normal((1, region[1])).astype(dtype)]
            ys += [rng.standard_normal((region[0], 1)).astype(dtype)]
        for xs in _layouts(base):
            for iv in _layouts(i):
                for take, numpy_take in [(ks[0], numpy_ks[0])]:
                    for k in (take, numpy_take):
                        for out in _layouts(np.full(region, np.nan, dtype)):
                            assert not k.c(xs, iv, out), (k, il)
                            assert np.array_equal(out, want_take), (k, il)
                for j, kind in ((1, "set"), (2, "inc")):
                    for y in ys:
                        want = _rows_want(kind, base, i, y)
                        for yl in _layouts(y) if y.ndim else [y]:
                            for k in (ks[j], numpy_ks[j]):
                                got = _layouts(base)[1] if not xs.flags.c_contiguous else xs.copy()
                                assert not k.c(got, yl, iv), (k, il, y.shape)
                                # inc: the same additions in the same order as add.at
                                assert np.array_equal(got, want), (k, il, y.shape)


@pytest.mark.parametrize("kind", ["take", "set", "inc"])
@pytest.mark.parametrize("bad", [6, -7])
def test_rows_step_refuses_an_index_out_of_range_and_numpy_raises(tmp_path, kind, bad):
    nodes = _rows_nodes("float64", 1)
    (k,) = _loaded(tmp_path, lambda lib: [lib.add_rows(nodes[kind], "float64", kind)])
    x = np.arange(6.0)
    i = np.array([1, 2, bad, 3], dtype=np.int64)  # rows before it: still nothing written
    args = (x, i, np.full(4, np.nan)) if kind == "take" else (x, np.ones(4), i)
    assert k.c(*args)
    np.testing.assert_array_equal(x, np.arange(6.0))
    if kind == "take":
        assert np.isnan(args[2]).all()
    msg = f"index {bad} is out of bounds for axis 0 with size 6"
    with pytest.raises(IndexError, match=re.escape(msg)):
        k.fail(*args)
    np.testing.assert_array_equal(x, np.arange(6.0))


def test_rows_step_refuses_other_operands_and_numpy_takes_them(tmp_path):
    nodes = _rows_nodes("float64", 1)
    take, inc = _loaded(
        tmp_path,
        lambda lib: [lib.add_rows(nodes["take"], "float64", "take"),
                     lib.add_rows(nodes["inc"], "float64", "inc")],
    )  # fmt: skip
    x = np.arange(6.0)
    for i in (np.array([1, 1], np.int32), np.array([[1, 1]])):  # another dtype, rank
        out = np.full(i.shape, np.nan)
        assert take.c(x, i, out) and np.isnan(out).all()
        take.fail(x, i, out)
        np.testing.assert_array_equal(out, x[i])
    out = np.full(2, np.nan, np.float32)  # another output dtype
    assert take.c(x, np.array([1, 2]), out)
    # y a view of x: numpy's add.at, which reads y before it writes.
    a, i = np.arange(6.0), np.array([0, 0, 1])
    assert inc.c(a, a[3:6], i)
    np.testing.assert_array_equal(a, np.arange(6.0))
    inc.fail(a, a[3:6], i)
    want = np.arange(6.0)
    np.add.at(want, i, np.arange(3.0, 6.0))
    np.testing.assert_array_equal(a, want)
    # A y that does not broadcast: nothing written, numpy's error.
    assert inc.c(a, np.ones(2), i)
    with pytest.raises(ValueError, match="array is not broadcastable to correct shape"):
        inc.fail(a, np.ones(2), i)


def _glm_graph(dtype):
    q = TensorType(dtype, (None,))("q")
    xv = TensorType(dtype, (None,))("xv")
    grp = tt.lvector("grp")
    group = np.arange(30) % 4
    a = q[0] + tt.exp(q[1]) * q[2:6]
    b = q[6:10]
    # a at a known index (the constant path), b at a variable one
    mu = a[group] + b[grp] * xv
    logp = tt.sum(-0.5 * (xv * 2 - mu) ** 2) + tt.sum(-0.5 * q**2)
    return [q, xv, grp], [logp, tt.grad(logp, q)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("poisoned", [False, True])
def test_rows_nodes_run_as_steps_of_the_segment(tmp_path, dtype, poisoned):
    ins, outs = _glm_graph(dtype)
    ref = function(ins, outs, mode=Mode(linker="py", optimizer=None))
    mode = Mode(linker=CPULinker(poison=poisoned))
    with config.change_flags(compiledir=str(tmp_path)), ckernel.compile_mode("sync"):
        f = function(ins, outs, mode=mode)
        rng = np.random.default_rng(8)
        qv = (0.3 * rng.standard_normal(10)).astype(dtype)
        xv = rng.standard_normal(30).astype(dtype)
        gv = rng.integers(-4, 4, 30)
        f(qv, xv, gv)
        assert ckernel.wait_for_kernels(f)
    steps = [k for k in kernel_calls(f) if isinstance(k, ckernel.RowsKernel)]
    assert sorted(k.name.split("_")[1] for k in steps) == ["incrows"] * 2 + ["take"] * 2
    assert all(k.ready for k in steps)
    src = f.fn.source()
    plan = f.fn.current
    code = plan.fast if plan.fast is not None else plan.core
    segs = [code.__globals__[n] for n in set(re.findall(r"(_SEG\d+)\.c\(", src))]
    in_segs = [k for s in segs for k in s.kernels if isinstance(k, ckernel.RowsKernel)]
    if poisoned:  # each step alone, checked
        assert not segs
    else:  # every one of them a step of a segment, no Python line of its own
        assert sorted(map(id, in_segs)) == sorted(map(id, steps)), src
    for qs, xs, gs in [(qv, xv, gv), (qv[::-1].copy()[::-1], xv, gv[::-1].copy())]:
        for g, w in zip(f(qs, xs, gs), ref(qs, xs, gs)):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=RTOL[dtype] * 100, atol=1e-5)
    # An index out of range: numpy's IndexError, the node named; nothing else changed.
    bad = gv.copy()
    bad[7] = 4
    with pytest.raises(IndexError) as info:
        f(qv, xv, bad)
    assert "index 4 is out of bounds for axis 0 with size 4" in str(info.value)
    assert "Apply node that caused the error: AdvancedSubtensor1" in str(info.value)
    for g, w in zip(f(qv, xv, gv), ref(qv, xv, gv)):
        np.testing.assert_allclose(g, w, rtol=RTOL[dtype] * 100, atol=1e-5)


def test_rows_steps_on_a_failing_compiler_run_numpy(tmp_path):
    cc_path = tmp_path / "fake-cc"
    cc_path.write_text('#!/bin/sh\necho "fake-cc: broken" >&2; exit 3\n')
    cc_path.chmod(0o755)
    ins, outs = _glm_graph("float64")
    ref = function(ins, outs, mode=Mode(linker="py", optimizer=None))
    rng = np.random.default_rng(9)
    qv, xv, gv = rng.standard_normal(10), rng.standard_normal(30), rng.integers(-4, 4, 30)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with (
            config.change_flags(cxx=str(cc_path), compiledir=str(tmp_path / "c")),
            ckernel.compile_mode("sync"),
        ):
            f = function(ins, outs)
            results = [f(qv, xv, gv) for _ in range(3)]
            bad = gv.copy()
            bad[3] = -5
            with pytest.raises(IndexError) as info:
                f(qv, xv, bad)
    steps = [k for k in kernel_calls(f) if isinstance(k, ckernel.RowsKernel)]
    assert len(steps) == 4 and not any(k.ready for k in steps)
    for r in results:
        for g, w in zip(r, ref(qv, xv, gv)):
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)
    assert "index -5 is out of bounds for axis 0 with size 4" in str(info.value)
    assert "Apply node that caused the error: AdvancedSubtensor1" in str(info.value)
