"""The CPU engine's steps for the small-array ops of a sampler's logp and gradient
(PyMC3's models): Split, MakeVector, Join, Reshape to a computed shape, All/Any of a
bool array, and max/min/sum over a short last axis (reduce_last_axis, also under
Softmax and LogSoftmax). Values, dtypes, copies and errors against numpy and the
reference engine, on every engine mode; the steps' source against the op's perform; the
ops of the LKJ Cholesky prior: CumOp, Alloc, ExtractDiag, advanced indexing and its
set/inc."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from step_modes import MODES, compile_in

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.emit.impls import make_call
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.tensor.basic import Join, Split, alloc
from theano_dag.tensor.elemwise import reduce_last_axis
from theano_dag.tensor.extra_ops import CumOp, ExtractDiag
from theano_dag.tensor.nnet import nnet
from theano_dag.tensor.shape import MakeVector, Reshape


def _cpu_source(ins, outs, args):
    f = function(ins, outs, mode=Mode(linker=CPULinker(min_plan_bytes=0), optimizer=None))
    f(*args)
    return f.fn.source()


def _same(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# -- reduce_last_axis ----------------------------------------------------------------

_SPECIAL = [-0.0, 0.0, 1.0, -1.5, np.nan, np.inf, -np.inf]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8])
@pytest.mark.parametrize("ufunc", [np.add, np.maximum, np.minimum])
def test_reduce_last_axis_is_numpys_reduce_bit_for_bit(ufunc, n, dtype):
    # every combination of signed zeros, NaN and infinities in rows of n (at most 3)
    k = min(n, 3)
    rows = np.array(list(itertools.product(_SPECIAL, repeat=k)), dtype=dtype)
    rows = np.concatenate([rows, np.ones((len(rows), n - k), dtype)], axis=1)
    # (enough rows that the columns are summed; the first few alone, numpy's rows)
    rows = np.concatenate([rows] * -(-400 // len(rows)))
    with np.errstate(all="ignore"):
        _same(reduce_last_axis(ufunc, rows[:5]), ufunc.reduce(rows[:5], axis=-1))
        _same(reduce_last_axis(ufunc, rows), ufunc.reduce(rows, axis=-1))
        _same(
            reduce_last_axis(ufunc, rows, keepdims=True),
            ufunc.reduce(rows, axis=-1, keepdims=True),
        )
        out = np.empty(len(rows), dtype)
        assert reduce_last_axis(ufunc, rows, out=out) is out
        _same(out, ufunc.reduce(rows, axis=-1))
        big = np.random.default_rng(0).standard_normal((30, 4, n)).astype(dtype) * 1e5
        _same(reduce_last_axis(ufunc, big), ufunc.reduce(big, axis=-1))


@pytest.mark.parametrize(
    "x",
    [
        np.arange(24.0).reshape(3, 8),  # a long axis: numpy's reduce
        np.arange(12.0).reshape(3, 4).T,  # not C-contiguous
        np.arange(6, dtype="int8").reshape(3, 2),  # numpy sums int8 into int64
        np.arange(6, dtype="float16").reshape(3, 2),  # and float16 in float32
        np.arange(3.0),  # one axis
    ],
)
@pytest.mark.parametrize("ufunc", [np.add, np.maximum])
def test_reduce_last_axis_falls_back_to_numpy(ufunc, x):
    _same(reduce_last_axis(ufunc, x), ufunc.reduce(x, axis=-1))


# -- the ops in functions, on every engine --------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_split_parts_are_copies_of_numpys_split(mode, dtype):
    x = tt.matrix("x", dtype=dtype)
    parts = Split(3, 1)(x, np.array([1, 0, 2]))
    f = compile_in([x], parts, mode)
    xv = np.arange(6, dtype=dtype).reshape(2, 3)
    got = f(xv)
    for g, w in zip(got, np.split(xv, [1, 1], axis=1)):
        _same(g, w)
        assert not np.shares_memory(g, xv)
    with pytest.raises(
        ValueError, match=r"Split: sizes \[1, 0, 2\] do not add up to the length 4 of axis 1"
    ):
        f(np.zeros((2, 4), dtype))


@pytest.mark.parametrize("mode", MODES)
def test_split_of_run_time_sizes(mode):
    x, s = tt.dvector("x"), tt.lvector("s")
    f = compile_in([x, s], Split(2, 0)(x, s), mode)
    a, b = f(np.arange(3.0), np.array([2, 1]))
    _same(a, np.array([0.0, 1.0]))
    _same(b, np.array([2.0]))
    with pytest.raises(ValueError, match=r"Split: sizes \[4, -1\] do not add up"):
        f(np.arange(3.0), np.array([4, -1]))
    with pytest.raises(ValueError, match="Split: got 3 sizes, expected 2"):
        f(np.arange(3.0), np.array([1, 1, 1]))


@pytest.mark.parametrize("mode", MODES)
def test_make_vector_of_scalars(mode):
    a, b = tt.bscalar("a"), tt.lscalar("b")
    c, d = tt.scalar("c", dtype="bool"), tt.scalar("d", dtype="bool")
    f = compile_in(
        [a, b, c, d], [MakeVector("int64")(a, b, 7), MakeVector("bool")(c, d, np.array(True))], mode
    )
    v, w = f(np.int8(-3), 5, True, False)
    _same(v, np.array([-3, 5, 7], dtype="int64"))
    _same(w, np.array([True, False, True]))


@pytest.mark.parametrize("mode", MODES)
def test_join_of_vectors_and_a_constant(mode):
    x, y = tt.dvector("x"), tt.dvector("y")
    f = compile_in([x, y], [Join(0)(x, -y), Join(0)(x, tt.constant(np.array([0.0])))], mode)
    got = f(np.array([1.0, 2.0]), np.array([3.0]))
    _same(got[0], np.array([1.0, 2.0, -3.0]))
    _same(got[1], np.array([1.0, 2.0, 0.0]))
    m = tt.dmatrix("m")
    g = compile_in([m, x], Join(0)(m, x.dimshuffle("x", 0)), mode)
    _same(g(np.ones((1, 2)), np.zeros(2)), np.array([[1.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(
        ValueError, match=r"Join\{axis=0\}: cannot join shapes \[\(1, 2\), \(1, 3\)\]"
    ):
        g(np.ones((1, 2)), np.zeros(3))


@pytest.mark.parametrize("mode", MODES)
def test_reshape_to_a_computed_shape(mode):
    x, n = tt.dmatrix("x"), tt.lscalar("n")
    f = compile_in([x, n], Reshape(1)(x, MakeVector("int64")(n)), mode)
    _same(f(np.arange(6.0).reshape(2, 3), 6), np.arange(6.0))
    _same(f(np.arange(6.0).reshape(2, 3), -1), np.arange(6.0))
    with pytest.raises(
        ValueError,
        match=r"Reshape\{1\}: cannot reshape an array of shape \(2, 3\) into shape \(5,\)",
    ):
        f(np.zeros((2, 3)), 5)
    # a static length of the output with a computed one
    k = tt.lscalar("k")
    g = compile_in([x, k], Reshape(2)(x, MakeVector("int64")(3, k)), mode)
    _same(g(np.arange(6.0).reshape(2, 3), 2), np.arange(6.0).reshape(3, 2))
    _same(g(np.arange(6.0).reshape(2, 3), -1), np.arange(6.0).reshape(3, 2))
    with pytest.raises(ValueError, match=r"Reshape\{2\}: cannot reshape an array of shape"):
        g(np.arange(6.0).reshape(3, 2), 3)


@pytest.mark.parametrize("mode", MODES)
def test_all_and_any_of_a_bool_vector(mode):
    x, m = tt.dvector("x"), tt.bmatrix("m")
    outs = [tt.all(tt.ge(x, 0)), tt.any(tt.lt(x, 0)), tt.all(x), tt.any(m, axis=1), tt.all(m)]
    f = compile_in([x, m], outs, mode)
    mv = np.array([[0, 0], [0, -3], [2, 1]], dtype="int8")
    for xv in (np.array([1.0, 2.0]), np.array([1.0, -2.0]), np.array([]), np.array([0.0, np.nan])):
        got = f(xv, mv)
        _same(got[0], np.asarray((xv >= 0).all()))
        _same(got[1], np.asarray((xv < 0).any()))
        _same(got[2], np.asarray(xv.all()))
        _same(got[3], mv.any(axis=1))
        _same(got[4], np.asarray(mv.all()))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_max_min_sum_over_a_short_last_axis(mode, dtype):
    x = tt.matrix("x", dtype=dtype)
    outs = [tt.max(x, axis=1), tt.min(x, axis=1), tt.sum(x, axis=1), tt.max(x, axis=0)]
    f = compile_in([x], outs, mode)
    rng = np.random.default_rng(1)
    xv = (rng.standard_normal((40, 2)) * 100).astype(dtype)
    if dtype != "int64":
        xv[:4] = [[-0.0, 0.0], [np.nan, 1.0], [1.0, np.nan], [-0.0, -0.0]]
    with np.errstate(all="ignore"):
        want = [xv.max(axis=1), xv.min(axis=1), xv.sum(axis=1, dtype=outs[2].dtype), xv.max(0)]
        for g, w in zip(f(xv), want):
            _same(g, w)


@pytest.mark.parametrize("mode", MODES)
def test_softmax_and_log_softmax_of_a_short_last_axis(mode):
    x = tt.dmatrix("x")
    sm, lsm = nnet.Softmax(-1)(x), nnet.LogSoftmax(-1)(x)
    gx = tt.grad(tt.sum(sm * np.arange(2.0)), x)
    f = compile_in([x], [sm, lsm, gx], mode)
    xv = np.random.default_rng(2).standard_normal((50, 2)) * 10
    xv[0] = [np.inf, 1.0]
    got = f(xv)
    with np.errstate(invalid="ignore"):  # inf - inf: the softmax's limit, set below
        z = xv - xv.max(axis=-1, keepdims=True)
    z[0] = [0.0, -np.inf]
    e = np.exp(z)
    want_sm = e / e.sum(axis=-1, keepdims=True)
    want_lsm = z - np.log(e.sum(axis=-1, keepdims=True))
    if mode in ("py", "FAST_COMPILE"):  # the ops' own perform: numpy's values exactly
        _same(got[0], want_sm)
        _same(got[1], want_lsm)
    np.testing.assert_allclose(got[0], want_sm, rtol=1e-13)
    np.testing.assert_allclose(got[1], want_lsm, rtol=1e-13)
    dy = np.broadcast_to(np.arange(2.0), xv.shape)
    want_g = want_sm * (dy - (dy * want_sm).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(got[2], want_g, rtol=1e-12, atol=1e-15)


# -- the steps, not perform ------------------------------------------------------------


def test_the_cpu_engine_runs_these_ops_without_their_perform():
    x, v, n = tt.dvector("x"), tt.dmatrix("v"), tt.lscalar("n")
    b = tt.scalar("b", dtype="bool")
    outs = [
        *Split(2, 0)(x, np.array([1, 1])),
        MakeVector("bool")(b, np.array(True)),
        Join(0)(x, x),
        Reshape(1)(v, MakeVector("int64")(n)),
        tt.all(tt.ge(x, 0)),
        tt.max(v, axis=1),
    ]
    src = _cpu_source([x, v, n, b], outs, (np.ones(2), np.ones((3, 2)), 6, True))
    lines = [ln.strip() for ln in src.splitlines()]
    calls = [ln for ln in lines if "_F(" in ln]
    # only the guard of Split's length calls its perform (to raise its message)
    assert calls and all(ln.startswith("if ") and ln.endswith("# raises") for ln in calls), src
    for piece in (
        ".copy()",
        "_array((",
        "_join(",
        "_reshape(",
        "logical_and_reduce(",
    ):
        assert piece in src, (piece, src)
    # the max: numpy's columns, or a C step (test_segments), alone or in a segment (with
    # the comparison's kernel, where that library was loaded when the call was planned)
    assert "_reduce_last(" in src or "_SEG" in src or "_SUM.c(" in src, src


# -- the ops of the LKJ Cholesky prior's logp ------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float64", "int8", "bool"])
def test_cumsum_and_cumprod(mode, dtype):
    x = tt.matrix("x", dtype=dtype)
    outs = [CumOp(None)(x), CumOp(1)(x), CumOp(0, "mul")(x), CumOp(None, "mul")(x)]
    f = compile_in([x], outs, mode)
    xv = (np.arange(6).reshape(2, 3) % 3).astype(dtype)
    want = [np.cumsum(xv), np.cumsum(xv, axis=1), np.cumprod(xv, axis=0), np.cumprod(xv)]
    for g, w in zip(f(xv), want):
        _same(g, w)


@pytest.mark.parametrize("mode", MODES)
def test_alloc_of_a_known_shape(mode):
    v = tt.dvector("v")
    a, b = alloc(np.float64(-1.5), 2, 3), alloc(v, 2, 3)
    f = compile_in([v], [a, b, a * 2], mode)
    got = f(np.array([1.0, 2.0, 3.0]))
    _same(got[0], np.full((2, 3), -1.5))
    _same(got[1], np.array([[1.0, 2.0, 3.0]] * 2))
    got[0][0, 0] = 7.0  # a fresh array each call, not the filled constant
    _same(f(np.zeros(3))[0], np.full((2, 3), -1.5))
    with pytest.raises(
        ValueError, match=r"Alloc: a value of shape \(2,\) cannot fill the shape \(2, 3\)"
    ):
        f(np.zeros(2))
    # a large known one is filled at each call, not kept filled
    g = compile_in([v], alloc(np.float64(2.0), 100, 100) + v[0], mode)
    _same(g(np.ones(1)), np.full((100, 100), 3.0))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int8"])
def test_extract_diag_is_a_copy_of_numpys_diagonal(mode, dtype):
    x, m = tt.tensor3("x", dtype=dtype), tt.matrix("m", dtype=dtype)
    args = [(0, 0, 1), (1, 2, 0), (-2, 1, 2), (9, 0, 1)]  # the last one is empty
    outs = [ExtractDiag(*a)(x) for a in args] + [ExtractDiag()(m) * 2]
    f = compile_in([x, m], outs, mode)
    xv = np.arange(60).reshape(3, 4, 5).astype(dtype)
    mv = np.arange(9).reshape(3, 3).astype(dtype)
    got = f(xv, mv)
    for g, a in zip(got, args):
        _same(g, np.diagonal(xv, *a))
        assert g.flags.writeable and not np.shares_memory(g, xv)
    _same(got[-1], np.diagonal(mv) * np.asarray(2, dtype))
    np.testing.assert_array_equal(mv, np.arange(9).reshape(3, 3))  # not written


def test_extract_diag_runs_without_its_perform():
    m = tt.dmatrix("m")
    src = _cpu_source([m], [ExtractDiag(1)(m)], (np.ones((3, 3)),))
    assert ".diagonal(1, 0, 1).copy()" in src and "_F(" not in src, src


_ROWS = np.array([0, 1, 1, 2])
_COLS = np.array([0, 0, 1, 1])


@pytest.mark.parametrize("mode", MODES)
def test_advanced_indexing_at_known_index_arrays(mode):
    x, y, s = tt.dmatrix("x"), tt.dvector("y"), tt.dscalar("s")
    outs = [
        x[_ROWS, _COLS],
        x[np.array(2), np.array(1)],  # 0-d: an array, not numpy's scalar
        tt.set_subtensor(x[_ROWS, _COLS], y),
        tt.inc_subtensor(x[_ROWS, _ROWS[::-1] % 2], y),
        tt.inc_subtensor(x[_ROWS, _COLS], 1.0) * 2,
        tt.set_subtensor(x[np.array([2, 0, 2])], s),
        tt.set_subtensor(y[tt.lvector("i")], 0.0),
    ]
    i = outs[-1].owner.inputs[-1]
    f = compile_in([x, y, s, i], outs, mode)
    xv = np.arange(6.0).reshape(3, 2)
    yv = np.array([1.0, 2.0, 3.0, 4.0])
    got = f(xv, yv, 9.0, np.array([3, -1, 0]))
    w = xv[_ROWS, _COLS]
    _same(got[0], w)
    _same(got[1], np.asarray(xv[2, 1]))
    w2 = xv.copy()
    w2[_ROWS, _COLS] = yv
    _same(got[2], w2)
    w3 = xv.copy()
    np.add.at(w3, (_ROWS, _ROWS[::-1] % 2), yv)
    _same(got[3], w3)
    w4 = xv.copy()
    np.add.at(w4, (_ROWS, _COLS), 1.0)
    _same(got[4], w4 * 2)
    w5 = xv.copy()
    w5[[2, 0, 2]] = 9.0
    _same(got[5], w5)
    _same(got[6], np.array([0.0, 2.0, 3.0, 0.0]))
    _same(xv, np.arange(6.0).reshape(3, 2))  # the inputs are left as they were
    _same(yv, np.array([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(IndexError):
        f(np.zeros((2, 2)), yv, 9.0, np.array([0]))


def test_perform_runs_without_the_thunks_cells():
    x = tt.dvector("x")
    call = make_call(Split(2, 0)(x, np.array([1, 1]))[0].owner)
    assert call.__qualname__.startswith("_direct_perform")
    a, b = call(np.array([1.0, 2.0]), np.array([1, 1]))
    _same(a, np.array([1.0]))
    _same(b, np.array([2.0]))
    with pytest.raises(ValueError, match="Split: got 1 sizes, expected 2"):
        call(np.array([1.0, 2.0]), np.array([2]))


def test_the_cpu_engine_runs_the_lkj_ops_without_their_perform():
    x, y, i = tt.dmatrix("x"), tt.dvector("y"), tt.lvector("i")
    outs = [
        CumOp(None)(x),
        alloc(0.0, 3),
        alloc(y, 2, 4),
        x[_ROWS, _COLS],
        tt.set_subtensor(x[_ROWS, _COLS], y),
        tt.inc_subtensor(x[_ROWS, _COLS], y),
        tt.set_subtensor(y[i], 0.0),
    ]
    src = _cpu_source([x, y, i], outs, (np.ones((3, 2)), np.ones(4), np.array([0])))
    assert "_F(" not in src, src
    for piece in ("add_accumulate(", "_filled.copy()", "_alloc(", "_add_at("):
        assert piece in src, (piece, src)
