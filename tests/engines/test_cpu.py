"""The CPU engine (theano_dag.engines.cpu) against the reference engine (PerformLinker)."""

import os
import sys

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.io import In, Out
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.compile.sharedvalue import shared
from theano_dag.engines.cpu import CPULinker, CPUProfile
from theano_dag.engines.cpu.linker import CPUThunk
from theano_dag.engines.cpu.native.ckernel import SumKernel
from theano_dag.engines.memory import check_plan
from theano_dag.testing.procmem import traced_peak

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tensor"))
from op_table import TABLE, row_inputs  # noqa: E402

from theano_dag import scalar as ts
from theano_dag.config import config
from theano_dag.engines.cpu.emit import codegen
from theano_dag.tensor import blas
from theano_dag.tensor.elemwise import Sum
from theano_dag.tensor.fused import FusedReduce
from theano_dag.tensor.math import Dot
from theano_dag.tensor.shape import Reshape
from theano_dag.tensor.subtensor import IncSubtensor, Subtensor

REF = Mode(linker="py", optimizer=None)


def cpu(min_plan_bytes=0, optimizer=None, **kw):
    return Mode(linker=CPULinker(min_plan_bytes=min_plan_bytes, **kw), optimizer=optimizer)


def both(inputs, outputs, modes=None, **kw):
    """The same graph compiled by the reference engine and by the CPU engine(s)."""
    ref = function(inputs, outputs, mode=REF, on_unused_input="ignore", **kw)
    fns = [
        function(inputs, outputs, mode=m, on_unused_input="ignore", **kw)
        for m in (modes or [cpu()])
    ]
    return ref, fns


def assert_same(got, want, rtol=1e-6):
    got_l = got if isinstance(got, list) else [got]
    want_l = want if isinstance(want, list) else [want]
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


def plan_of(f):
    assert isinstance(f.fn, CPUThunk)
    return f.fn.current


# -- values: shapes, broadcasting, dtypes ---------------------------------------------

SHAPE_CASES = [
    ((5, 4), (5, 4)),  # same shape
    ((5, 4), (1, 4)),  # a row broadcasts
    ((5, 1), (1, 4)),  # a column and a row
    ((0, 4), (1, 4)),  # a size-0 axis
    ((1, 1), (1, 1)),  # all size 1
    ((300, 70), (1, 70)),  # big enough to be planned by default
]


def _sym(shape, dtype, name):
    return tt.TensorType(dtype, shape=tuple(1 if s == 1 else None for s in shape))(name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sx,sy", SHAPE_CASES)
def test_elementwise_graphs_match_the_reference(sx, sy, dtype):
    rng = np.random.default_rng(0)
    x, y = _sym(sx, dtype, "x"), _sym(sy, dtype, "y")
    outs = [
        tt.exp(-x * x) * tt.sin(x) + 0.5 * x * x * x - tt.tanh(y),
        (x - y) / (abs(y) + 1),
        tt.maximum(x, 0) * y,
        tt.sum(x * y, axis=0),
        tt.max(x + y, axis=1) if sx[1] and sy[1] and max(sx[0], sy[0]) else x + y,
    ]
    xv = rng.standard_normal(sx).astype(dtype)
    yv = rng.standard_normal(sy).astype(dtype)
    modes = [cpu(0), cpu(DEFAULT := 16384), cpu(0, "fast_run"), get_mode(None)]
    ref, fns = both([x, y], outs, modes)
    want = ref(xv, yv)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for f in fns:
        for _ in range(2):  # the first call plans, the second runs the plan
            assert_same(f(xv, yv), want, rtol)
    assert DEFAULT == 16384


CASES = [(row, dt) for row in TABLE for dt in row.dtypes]


@pytest.mark.parametrize("row,dtype", CASES, ids=[f"{r}-{d}" for r, d in CASES])
def test_every_op_table_row_matches_the_reference(row, dtype):
    rng = np.random.default_rng(1234)
    syms, values = row_inputs(row, dtype, rng)
    out = row.build(*syms)
    copies = [v.copy() for v in values]
    ref, fns = both(syms, out, [cpu(0), cpu(0, "fast_run"), cpu(1 << 30)])
    want = ref(*values)
    for f in fns:
        assert_same(f(*values), want, 1e-5 if dtype == "float32" else 1e-10)
        assert_same(f(*values), want, 1e-5 if dtype == "float32" else 1e-10)
    for v, before in zip(values, copies):
        np.testing.assert_array_equal(v, before, err_msg=f"{row} modified its input")


def test_integer_and_mixed_dtypes():
    i8, f32, i64 = tt.bvector("a"), tt.fvector("b"), tt.lvector("c")
    outs = [i8 + 1, i8 * f32, f32 / i64, (i8 < f32), tt.exp(i8), i64 // 3, -i8, i8 + i8]
    ref, fns = both([i8, f32, i64], outs, [cpu(0), cpu(0, "fast_run")])
    vals = (
        np.array([120, -3, 5, 127], "int8"),
        np.array([1.5, -2, 0.25, 3], "float32"),
        np.array([7, -2, 3, 1], "int64"),
    )
    want = ref(*vals)
    for f in fns:
        assert_same(f(*vals), want)


def test_dot_gemm_and_reductions():
    a, b, v = tt.dmatrix("a"), tt.dmatrix("b"), tt.dvector("v")
    outs = [
        tt.dot(a, b),
        tt.dot(a, v),
        tt.dot(v, a.T),
        tt.dot(v, v),
        tt.sum(a, axis=1),
        tt.prod(a),
        tt.all(a > 0, axis=0),
        tt.any(a > 0),
        a + 0.5 * tt.dot(a, b),
    ]
    rng = np.random.default_rng(2)
    av, bv, vv = rng.random((6, 6)), rng.random((6, 6)), rng.random(6)
    ref, fns = both([a, b, v], outs, [cpu(0), cpu(0, "fast_run"), cpu()])
    for f in fns:
        assert_same(f(av, bv, vv), ref(av, bv, vv), 1e-12)
    with pytest.raises(ValueError, match="not aligned"):
        fns[0](av, rng.random((5, 6)), vv)


# -- the memory contract ----------------------------------------------------------------


def test_outputs_are_not_overwritten_by_later_calls():
    x = tt.dvector("x")
    y = tt.exp(x) * 2
    for mode in [cpu(0), cpu(0, "fast_run"), get_mode(None)]:
        f = function([x], [y, y + 1], mode=mode)
        r1 = f(np.ones(5000))
        keep = [r.copy() for r in r1]
        r2 = f(np.zeros(5000))
        for r, k in zip(r1, keep):
            np.testing.assert_array_equal(r, k)
        assert not np.shares_memory(r1[0], r2[0]) and not np.shares_memory(r1[1], r2[1])


def test_borrowed_output_may_be_reused_between_calls():
    x = tt.dvector("x")
    f = function([x], Out(tt.exp(x) * 2, borrow=True), mode=cpu(0))
    r1 = f(np.ones(100))
    r2 = f(np.zeros(100))
    assert r1 is r2  # the plan's own buffer
    np.testing.assert_array_equal(r2, 2 * np.ones(100))


def test_inputs_are_not_modified():
    x, y = tt.dvector("x"), tt.dvector("y")
    out = tt.exp(x + y) * (x - 1) + y
    xv, yv = np.linspace(-1, 1, 5000), np.linspace(2, 3, 5000)
    for mode in [cpu(0), cpu(0, "fast_run"), get_mode(None)]:
        xc, yc = xv.copy(), yv.copy()
        function([x, y], out, mode=mode)(xc, yc)
        np.testing.assert_array_equal(xc, xv)
        np.testing.assert_array_equal(yc, yv)


def test_mutable_input_may_be_overwritten_only_when_declared():
    x = tt.dvector("x")
    f = function([In(x, mutable=True)], tt.exp(x) + 1, mode=get_mode(None))
    xv = np.zeros(3)
    np.testing.assert_array_equal(f(xv), np.full(3, 2.0))


# -- plans per signature ----------------------------------------------------------------


def test_plan_cache_replans_once_per_signature():
    x = tt.dmatrix("x")
    f = function([x], tt.exp(x) * x + 1, mode=cpu(0))
    made = []
    plan = f.fn.program.plan
    f.fn.program.plan = lambda sig: made.append(sig) or plan(sig)
    for _ in range(3):
        f(np.ones((4, 5)))
    assert made == [((4, 5),)]
    for _ in range(3):
        f(np.ones((2, 7)))
    f(np.ones((4, 5)))
    assert made == [((4, 5),), ((2, 7),)]
    np.testing.assert_allclose(f(np.zeros((2, 7))), np.ones((2, 7)))


def test_memory_plan_of_a_50_op_chain_uses_a_constant_number_of_blocks():
    x = tt.dvector("x")
    y = x
    for k in range(50):
        y = tt.exp(y) * 0.5 if k % 2 else y + 1.0
    f = function([x], y, mode=cpu(0))
    xv = np.linspace(0, 1, 1000)
    np.testing.assert_allclose(f(xv), function([x], y, mode=REF)(xv))
    plan = f.memory_plan()
    assert plan.n_blocks <= 2
    assert plan.planned_bytes <= 2 * (8000 + 64)
    assert plan.eager_peak_bytes >= 40 * 8000
    assert plan.live_peak_bytes <= plan.planned_bytes <= plan.eager_peak_bytes
    # The plan is valid for the engine's own description of the run.
    assert f.memory_plan(shapes=[(10,)]).n_blocks <= 2
    assert "block" in plan.summary()


def test_memory_plan_is_safe_on_a_branchy_graph():
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    a = tt.exp(x)
    b = a * y
    c = tt.dot(a, b) + a
    d = (c - b).T * 2
    f = function([x, y], [d, c.sum()], mode=cpu(0))
    xv, yv = np.random.default_rng(0).random((2, 20, 20))
    assert_same(f(xv, yv), function([x, y], [d, c.sum()], mode=REF)(xv, yv), 1e-12)
    cur = plan_of(f)
    assert cur.memory.n_blocks >= 1
    check_plan(*cur.plan_input, cur.memory)


def test_memory_plan_before_any_call_needs_shapes():
    x = tt.dvector("x")
    f = function([x], x + 1, mode=cpu(0))
    with pytest.raises(ValueError, match="no call yet"):
        f.memory_plan()
    # x + 1 is the output: one block, that each call allocates afresh.
    plan = f.memory_plan(shapes=[(100,)])
    assert plan.blocks == [832] and plan.eager_peak_bytes == 832
    with pytest.raises(ValueError, match="1 inputs"):
        f.memory_plan(shapes=[(1,), (2,)])


def test_mlp_inference_plans_at_the_live_floor():
    rng = np.random.default_rng(0)
    x = tt.fmatrix("x")
    # Weights scaled by 1/sqrt(fan-in) keep activations O(1), as in training: float32
    # sums over 784 terms in another order (the C product vs numpy's BLAS) then agree
    # to the tolerance below.
    params = [
        shared((rng.standard_normal(s) / np.sqrt(s[0])).astype("float32"))
        for s in [(784, 512), (512,), (512, 512), (512,), (512, 10), (10,)]
    ]
    h = x
    for k in range(3):
        w, b = params[2 * k], params[2 * k + 1]
        h = tt.dot(h, w) + b
        if k < 2:
            h = tt.maximum(h, 0)
    f = function([x], h, mode=get_mode(None))
    xv = rng.standard_normal((64, 784)).astype("float32")
    assert_same(f(xv), function([x], h, mode=REF)(xv), 1e-4)
    plan = f.memory_plan()
    # Two hidden layers are alive at once (a dot reads one while writing the next); fusion
    # and in-place bias adds leave nothing else, so the plan is at that floor and never
    # above keeping every intermediate.
    assert plan.planned_bytes <= 2 * 64 * 512 * 4 + 128
    assert plan.planned_bytes == plan.live_peak_bytes
    assert plan.planned_bytes <= plan.eager_peak_bytes


# -- errors ---------------------------------------------------------------------------


def test_shape_errors_name_the_node():
    x, y = tt.dvector("x"), tt.dvector("y")
    f = function([x, y], tt.exp(x) + y, mode=cpu(0))
    with pytest.raises(ValueError) as info:
        f(np.zeros(2), np.zeros(3))
    msg = str(info.value)
    assert "Apply node that caused the error: Elemwise{add" in msg
    assert "Inputs shapes and dtypes: [(2,) float64, (3,) float64]" in msg


def test_runtime_errors_name_the_node():
    x = tt.dvector("x")
    f = function([x], tt.max(tt.exp(x)), mode=cpu(0))
    with pytest.raises(ValueError) as info:
        f(np.zeros(0))
    assert "Apply node that caused the error" in str(info.value)
    assert "(0,) float64" in str(info.value)


def test_bad_inputs_give_the_function_errors():
    x = tt.dvector("x")
    f = function([x], x * 2, mode=get_mode(None))
    np.testing.assert_array_equal(f([1, 2]), [2.0, 4.0])  # lists are converted
    with pytest.raises(TypeError, match="takes 1 input"):
        f(np.zeros(2), np.zeros(2))
    with pytest.raises(TypeError, match="wrong number of dimensions"):
        f(np.zeros((2, 2)))
    np.testing.assert_array_equal(f(x=np.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(f(np.ones(3, dtype="float32")), [2.0, 2.0, 2.0])


# -- updates ----------------------------------------------------------------------------


def test_update_lands_in_the_shared_storage_without_a_copy():
    rng = np.random.default_rng(3)
    w0 = rng.random((300, 100))
    x = tt.dmatrix("x")
    xv = rng.random((7, 300))
    results = []
    for mode in [REF, get_mode(None), cpu(0)]:
        w = shared(w0.copy(), name="W")
        g = tt.dot(x.T, x[:, :100])
        f = function([x], (w * 2).sum(), updates=[(w, w - 0.1 * g)], mode=mode)
        storage = w.get_value(borrow=True)
        r = [f(xv), f(xv)]
        results.append((r, w.get_value()))
        if mode is not REF:
            assert w.get_value(borrow=True) is storage  # written in place
            # either the Gemm itself overwrites W (inplace pass), or the plan writes the
            # update's result into W's storage
            fg = f.maker.fgraph
            w_in = fg.inputs[-1]
            gemm_on_w = [n for n in fg.apply_nodes if n.op.destroy_map and n.inputs[0] is w_in]
            assert plan_of(f).update_inplace or gemm_on_w
    # The C product sums in another order than numpy's BLAS: float64 rounding apart.
    for r, wv in results[1:]:
        np.testing.assert_allclose(r, results[0][0], rtol=1e-10)
        np.testing.assert_allclose(wv, results[0][1], rtol=1e-10)


def test_update_in_place_copes_with_aliased_shared_values():
    base = np.ones((50, 50))
    a = shared(base, borrow=True)
    b = shared(base, borrow=True)  # the same memory
    f = function([], [], updates=[(a, a * 2 + b)], mode=cpu(0))
    f()
    np.testing.assert_array_equal(a.get_value(), np.full((50, 50), 3.0))
    np.testing.assert_array_equal(b.get_value(), np.ones((50, 50)))


@pytest.mark.parametrize(
    "mode", ["cpu0", "FAST_RUN", "py_fast_run"], ids=["planned", "default", "reference"]
)
def test_an_input_that_is_a_shared_value_overwritten_in_place_is_read_as_given(mode):
    # A caller passes a shared variable's own array (get_value(borrow=True)), or a row of
    # it, as an explicit input, and the call overwrites that shared value in place (an
    # in-place add into it, its update written into its storage): the input must be
    # read as it was given. The generated call read it after the overwrite ([2, 4, 6]
    # for the update where [1, 2, 3] was given).
    mode = {"cpu0": cpu(0), "py_fast_run": Mode(linker="py", optimizer="fast_run")}.get(mode, mode)
    z = tt.dvector("z")
    s = shared(np.array([1.0, 2.0, 3.0]))
    f = function([z], z + s, updates=[(s, s * 0 + z)], mode=mode)
    for _ in range(2):  # the first call, then the generated call of these shapes
        s.set_value(np.array([1.0, 2.0, 3.0]))
        np.testing.assert_array_equal(f(s.get_value(borrow=True)), [2.0, 4.0, 6.0])
        np.testing.assert_array_equal(s.get_value(), [1.0, 2.0, 3.0])
    m = shared(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    g = function([z], (z + m).sum(), updates=[(m, m * 0 + z)], mode=mode)
    row = m.get_value(borrow=True)[1]
    assert g(row) == 51.0  # z = [4, 5, 6] added to both rows: 21 + 30
    np.testing.assert_array_equal(m.get_value(), [[4.0, 5.0, 6.0]] * 2)
    # Arrays that do not share memory with it are not copied.
    a = np.array([7.0, 8.0, 9.0])
    h = function([z], z + s, updates=[(s, s * 0 + z)], mode=mode)
    np.testing.assert_array_equal(h(a), [8.0, 10.0, 12.0])


@pytest.mark.parametrize("poison", [False, True])
@pytest.mark.parametrize("optimizer", [None, "fast_run"])
def test_a_borrowed_output_fed_back_as_an_input_is_read_as_given(optimizer, poison):
    # y = f(x) with Out(borrow=True) hands out the buffer the plan keeps for y; f(y)
    # then wrote its new output there while reading y (the reversed read saw the new
    # values; with poisoned blocks, NaN).
    x = tt.dvector("x")
    mode = Mode(linker=CPULinker(min_plan_bytes=0, poison=poison), optimizer=optimizer)
    f = function(
        [x], [Out(tt.exp(x) * 0.5 + x[::-1], borrow=True), Out(x * 2, borrow=True)], mode=mode
    )
    v = np.linspace(-1.0, 1.0, 16)
    for _ in range(3):  # the first call of these shapes, then the generated call
        y, _ = f(v)
        want = [np.exp(y) * 0.5 + y[::-1], y * 2]
        np.testing.assert_allclose([a.copy() for a in f(y)], want, rtol=1e-15)
        _, y2 = f(v)
        want = [np.exp(y2) * 0.5 + y2[::-1], y2 * 2]
        got = [a.copy() for a in f(y2[::-1][::-1])]  # a view of the kept buffer
        np.testing.assert_allclose(got, want, rtol=1e-15)
    # An input given by keyword takes the plain call: the same.
    y, _ = f(v)
    want = np.exp(y) * 0.5 + y[::-1]
    np.testing.assert_allclose(f(x=y)[0], want, rtol=1e-15)


def test_swapping_updates_and_returned_old_value():
    a, b = shared(np.arange(4000.0)), shared(-np.arange(4000.0))
    f = function([], a, updates=[(a, b), (b, a * 1.0)], mode=cpu(0))
    old = f()
    np.testing.assert_array_equal(old, np.arange(4000.0))
    np.testing.assert_array_equal(a.get_value(), -np.arange(4000.0))
    np.testing.assert_array_equal(b.get_value(), np.arange(4000.0))
    old2 = f()
    np.testing.assert_array_equal(old, np.arange(4000.0))  # the first result is intact
    np.testing.assert_array_equal(old2, -np.arange(4000.0))


# -- incremental ------------------------------------------------------------------------


def test_incremental_recomputes_only_downstream_of_changed_inputs():
    x, y = tt.dvector("x"), tt.dvector("y")
    a = tt.exp(x) * 3  # depends on x only: 2 nodes
    b = tt.sin(y)  # y only: 1 node
    out = a + b  # both: 1 node
    f = function([x, y], out, mode=cpu(0, incremental=True))
    xv, yv = np.linspace(0, 1, 10), np.linspace(1, 2, 10)
    want = np.exp(xv) * 3 + np.sin(yv)
    np.testing.assert_allclose(f(xv, yv), want)
    # Every node ran (the constant's DimShuffle was folded when linking).
    assert f.fn.nodes_run == len(f.fn.program.node_steps) == 4
    r = f(xv, yv)
    assert f.fn.nodes_run == 0
    np.testing.assert_allclose(r, want)
    r[:] = 0  # the caller's copy: the kept value is intact
    np.testing.assert_allclose(f(xv, yv), want)
    y2 = yv + 1
    np.testing.assert_allclose(f(xv, y2), np.exp(xv) * 3 + np.sin(y2))
    assert f.fn.nodes_run == 2  # sin and the final add
    xv[0] = 5.0  # mutated in place: detected
    np.testing.assert_allclose(f(xv, y2), np.exp(xv) * 3 + np.sin(y2))
    assert f.fn.nodes_run == 3  # everything but sin(y)


def test_incremental_with_profile_reports_nodes_run():
    x, y = tt.dvector("x"), tt.dvector("y")
    f = function([x, y], tt.exp(x) + y, mode=cpu(0, incremental=True), profile=True)
    xv, yv = np.ones(3), np.zeros(3)
    f(xv, yv)
    f(xv, yv + 1)
    s = str(f.profile)
    assert "incremental: last call ran 1 of 2 nodes; 3 node runs in all" in s


# -- profile ----------------------------------------------------------------------------


def test_profile_summary():
    x = tt.dmatrix("x")
    y = tt.dot(tt.exp(x), x.T).sum() + tt.tanh(x).max()
    f = function([x], y, mode=cpu(0), profile=True, name="prof")
    xv = np.random.default_rng(0).random((30, 30))
    for _ in range(3):
        f(xv)
    prof = f.profile
    assert isinstance(prof, CPUProfile)
    assert prof.calls == 3 and all(c == 3 for c in prof.node_calls)
    s = str(prof)
    assert s.splitlines()[0] == "Function profile: prof (CPU engine)"
    for text in [
        "calls: 3",
        "compile time: optimize",
        "plan",
        "codegen",
        "C compile",
        "memory:",
        "planned",
        "eager (keep-all)",
        "per op type:",
        "Dot",
        "Elemwise",
        "per node (top",
    ]:
        assert text in s, text
    assert prof.op_totals()["Dot"][1] == 3
    np.testing.assert_allclose(f(xv), function([x], y, mode=REF)(xv))


# -- deep graphs and generated code ------------------------------------------------------


def test_a_5000_op_chain_compiles_and_runs():
    x = tt.dvector("x")
    y = x
    for _ in range(5000):
        y = y * 1.0001 if _ % 2 else y + 0.0001
    f = function([x], y, mode=cpu(0))
    xv = np.ones(7)
    want = xv.copy()
    for k in range(5000):
        want = want * 1.0001 if k % 2 else want + 0.0001
    np.testing.assert_allclose(f(xv), want, rtol=1e-10)
    assert f.memory_plan().n_blocks <= 2


def test_generated_source_is_straight_line_numpy():
    x = tt.dvector("x")
    f = function([x], tt.exp(x) * 2, mode=cpu(0))
    f(np.zeros(4))
    src = f.fn.source()
    # With the C half of the call the body takes exactly the inputs it checked in C.
    head = "def fast(x0):" if f._guarded else "def fast(x0=_NA, *_rest, **_kw):"
    assert src.startswith(head)
    assert "_exp" in src and "out=b" in src


def test_fast_path_falls_back_for_unusual_calls():
    x, y = tt.dvector("x"), tt.dscalar("y")
    f = function([x, In(y, value=2.0)], x * y, mode=get_mode(None))
    np.testing.assert_array_equal(f(np.ones(2)), [2.0, 2.0])  # default value
    np.testing.assert_array_equal(f(np.ones(2), 3.0), [3.0, 3.0])
    np.testing.assert_array_equal(f(np.ones(2), y=4.0), [4.0, 4.0])
    sub = np.ones(3).view(np.ndarray)[::2]  # a non-contiguous view is fine
    np.testing.assert_array_equal(f(sub, 3.0), [3.0, 3.0])
    assert f.fn.current is not None


def test_fused_reduce_runs_planned_and_matches_the_reference():
    x, y = tt.dmatrix("x"), tt.drow("y")
    a, b = ts.float64("a"), ts.float64("b")
    outs = [
        FusedReduce(Sum(axis=(1,)), ts.sqr)(x),
        # The scalar graph ignores y, yet the reduced value has the broadcast shape (a
        # row declared broadcastable: a length 1 spreads only there, as in Elemwise).
        FusedReduce(Sum(axis=(0,)), ts.Composite([a, b], [ts.exp(a) * 2]))(
            x[0].dimshuffle("x", 0), y * 0 + x
        ),
    ]
    xv, yv = np.random.default_rng(5).random((2, 30, 40))
    yv = yv[:1]
    ref, fns = both([x, y], outs, [cpu(0), cpu()])
    for f in fns:
        assert_same(f(xv, yv), ref(xv, yv), 1e-12)
    # Both run as steps (the elementwise part, then the reduction: numpy's, by
    # reduce_last_axis over a last axis, or a C sum kernel where C kernels are built),
    # not perform.
    steps = [st for _k, st in fns[0].fn.current.steps if type(st.node.op) is FusedReduce]
    assert steps and all(st.kind == "out" for st in steps)
    lib = getattr(fns[0].fn.program, "ckernels", None)
    in_c = sum(isinstance(k, SumKernel) for k in lib.kernels) if lib else 0
    source = fns[0].fn.source()
    assert source.count("add_reduce(") + source.count("reduce_last(") + in_c == 2


def test_function_incremental_keyword():
    x, y = tt.dvector("x"), tt.dvector("y")
    mode = Mode(linker="cpu", optimizer=None)
    f = function([x, y], tt.exp(x) + y, mode=mode, incremental=True)
    xv = np.ones(3)
    f(xv, np.zeros(3))
    np.testing.assert_allclose(f(xv, np.ones(3)), np.e + 1)
    assert f.fn.nodes_run == 1
    g = function([x, y], tt.exp(x) + y, mode=mode)  # the Mode is unchanged
    assert not g.fn.program.incremental
    with pytest.raises(ValueError, match="incremental=True needs an engine"):
        function([x, y], x + y, mode=REF, incremental=True)


def test_floating_point_errors_are_ignored_as_in_perform():
    import warnings

    x = tt.dvector("x")
    for mode in [get_mode(None), cpu(0, profile=None, incremental=True)]:
        f = function([x], tt.log(x) / x, mode=mode)
        before = np.geterr()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = f(np.zeros(3))
            r = f(np.zeros(3))
        assert np.geterr() == before
        assert np.all(np.isneginf(r))


def test_generated_code_cached_on_disk(tmp_path, monkeypatch):
    # A long generated source is compiled once; a new process (here: an emptied
    # in-memory cache) loads its code object from <compiledir>/pycode, and a
    # damaged file there is compiled again.

    monkeypatch.setattr(codegen, "CODE_CACHE", {})
    source = "".join(f"v{k} = {k} * 2\n" for k in range(codegen.DISK_CACHE_MIN_CHARS // 8))
    source += "def f():\n    return v3 + 1\n"
    with config.change_flags(compiledir=str(tmp_path)):
        _check_disk_cache(codegen, source, tmp_path, monkeypatch)


def _entries(folder):
    """A cache folder's entries: not the bound's marker (misc.cache_eviction)."""
    return [p for p in folder.iterdir() if not p.name.startswith(".")]


def _check_disk_cache(codegen, source, tmp_path, monkeypatch):
    code = codegen._compile(source, "test")
    (cached,) = _entries(tmp_path / "pycode")
    ns: dict = {}
    exec(code, ns)
    assert ns["f"]() == 7
    monkeypatch.setattr(codegen, "CODE_CACHE", {})
    with monkeypatch.context() as m:
        m.setattr(codegen, "compile", None, raising=False)  # must not be called
        again = codegen._compile(source, "test")
    assert again == code and again.co_filename == code.co_filename
    cached.write_bytes(b"not marshal data")
    monkeypatch.setattr(codegen, "CODE_CACHE", {})
    ns = {}
    exec(codegen._compile(source, "test"), ns)
    assert ns["f"]() == 7
    assert [p.name for p in _entries(tmp_path / "pycode")] == [cached.name]


def test_generated_code_folder_is_bounded(tmp_path, monkeypatch):
    # <compiledir>/pycode keeps PYCODE_MAX_ENTRIES code objects, the least recently
    # used out first: one read again (dated then) outlives an older one.
    monkeypatch.setattr(codegen, "PYCODE_MAX_ENTRIES", 2)
    monkeypatch.setattr(codegen, "PYCODE_EVICT_EVERY", 0.0)
    filler = "".join(f"v{k} = {k}\n" for k in range(codegen.DISK_CACHE_MIN_CHARS // 6))
    sources = [filler + f"r = {i}\n" for i in range(3)]
    folder = tmp_path / "pycode"
    with config.change_flags(compiledir=str(tmp_path)):
        for i, src in enumerate(sources[:2]):
            monkeypatch.setattr(codegen, "CODE_CACHE", {})
            codegen._compile(src, "test")
            (new,) = [p for p in _entries(folder) if p.stat().st_mtime > 1e6]
            os.utime(new, (1000 + i, 1000 + i))  # source 0 the oldest
        first, second = sorted(_entries(folder), key=lambda p: p.stat().st_mtime)
        monkeypatch.setattr(codegen, "CODE_CACHE", {})
        codegen._compile(sources[0], "test")  # read from disk: dated now
        monkeypatch.setattr(codegen, "CODE_CACHE", {})
        ns: dict = {}
        exec(codegen._compile(sources[2], "test"), ns)
    assert ns["r"] == 2
    left = {p.name for p in _entries(folder)}
    assert len(left) == 2 and first.name in left and second.name not in left


# -- indexing, writes and reshapes by known indices: inline numpy, no perform ----------


def _indexing_graph(dtype):
    x = tt.TensorType(dtype, shape=(None, None))("x")
    v = tt.TensorType(dtype, shape=(None,))("v")
    i8 = tt.bvector("i8")
    e = tt.exp(x) if dtype.startswith("float") else x * 2
    outs = [
        x[1],  # a row: a view
        x[-1, 2],  # 0-d: an array, not a numpy scalar
        x[::2, 1:-1],
        x[2:0:-1, ::-2],
        v[1:4].reshape((3,)),
        v.reshape((2, -1)),
        tt.set_subtensor(e[0, 1:], v[:2]),
        tt.inc_subtensor(e[1:, -1], 3),  # a constant, cast to x's dtype
        tt.inc_subtensor(tt.set_subtensor(e[2], v[1:4])[0], i8[0]),  # int8 into its dtype
        tt.inc_subtensor(x[1:3], 1),  # x is the caller's: into a copy
    ]
    return [x, v, i8], outs


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
@pytest.mark.parametrize(
    "mode,optimized",
    [
        pytest.param(lambda: cpu(optimizer="fast_run"), True, id="fast_run"),
        pytest.param(lambda: cpu(poison=True, optimizer="fast_run"), True, id="poisoned"),
        pytest.param(lambda: cpu(0, optimizer=None), False, id="unoptimized"),
    ],
)
def test_known_indexing_runs_inline_and_matches_the_reference(dtype, mode, optimized):
    inputs, outs = _indexing_graph(dtype)
    ref = function(inputs, outs, mode=REF)
    f = function(inputs, outs, mode=mode())
    rng = np.random.default_rng(3)
    xv = rng.integers(-3, 4, (4, 3)).astype(dtype)
    vv = rng.integers(-3, 4, 6).astype(dtype)
    iv = np.array([-2, 1], dtype="int8")
    for _ in range(2):
        args = [xv.copy(), vv.copy(), iv.copy()]
        got = f(*args)
        assert_same(got, ref(xv, vv, iv), rtol=1e-6)
        for a, b in zip(args, [xv, vv, iv]):
            np.testing.assert_array_equal(a, b)
        assert all(type(g) is np.ndarray for g in got)
        assert not any(np.shares_memory(g, a) for g in got for a in args)
    # Each of these nodes is one inline line, not a call of its perform.
    inline = (Subtensor, IncSubtensor, Reshape)
    steps = [st for _k, st in f.fn.current.steps if isinstance(st.node.op, inline)]
    assert steps
    if optimized:  # the chain's second write is inplace
        assert any(isinstance(st.node.op, IncSubtensor) and st.node.op.inplace for st in steps)
    for st in steps:
        src = "\n".join(st.emit([f"i{j}" for j in range(len(st.inputs))], ["o"], None))
        assert "_F(" not in src, (st.node, src)


def test_known_indexing_errors_name_the_node():
    x = tt.dvector("x")
    f = function([x], [x[5], x.reshape((2, 2))], mode=cpu())
    with pytest.raises(IndexError, match="index 5 is out of bounds"):
        f(np.zeros(4))
    with pytest.raises(ValueError, match=r"cannot reshape an array of shape \(6,\) into"):
        f(np.zeros(6))


def test_a_reshape_the_input_cannot_fill_is_the_error_not_the_next_node():
    # Theano's Reshape raises; the plan used to take the asked shape (1, 3) on trust and
    # the add's shape check fired first, naming the add.
    v, m = tt.dvector("v"), tt.dmatrix("m")
    f = function([v, m], v.reshape((1, 3)) + m, mode=cpu(optimizer="fast_run"))
    with pytest.raises(ValueError, match=r"Reshape\{2\}: cannot reshape an array of shape \(2,\)"):
        f(np.ones(2), np.ones((1, 2)))
    np.testing.assert_array_equal(f(np.arange(3.0), np.ones((1, 3))), [[1.0, 2.0, 3.0]])


@pytest.mark.parametrize("poisoned", [False, True])
def test_products_with_a_constant_operand_run_as_blas_steps(poisoned):
    rng = np.random.default_rng(4)
    C = tt.constant(rng.standard_normal((5, 3)))
    v, z, w = tt.dvector("v"), tt.dvector("z"), tt.dvector("w")
    outs = [tt.dot(C, v), z - 0.5 * tt.dot(C, tt.exp(v)), tt.dot(w, C)]
    ref = function([v, z, w], outs, mode=REF)
    f = function([v, z, w], outs, mode=cpu(poison=poisoned, optimizer="fast_run"))
    ops = (Dot, blas.Gemv, blas.Dot22)
    nodes = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, ops)]
    assert any(isinstance(n.op, blas.Gemv) for n in nodes)
    args = rng.standard_normal(3), rng.standard_normal(5), rng.standard_normal(5)
    for _ in range(2):
        assert_same(f(*args), ref(*args), rtol=1e-12)
    steps = [st for _k, st in f.fn.current.steps if isinstance(st.node.op, ops)]
    assert steps and all(st.kind != "call" for st in steps)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    "alpha,beta", [(1.0, 1.0), (-0.01, 1.0), (1.0, -0.5), (2.0, 3.0), (2.0, 0.0)]
)
@pytest.mark.parametrize("poisoned", [False, True])
def test_gemv_with_known_scalars_matches_the_reference(dtype, alpha, beta, poisoned):
    A, x, z = tt.matrix("A", dtype=dtype), tt.vector("x", dtype=dtype), tt.vector("z", dtype=dtype)
    a, b = tt.constant(np.asarray(alpha, dtype)), tt.constant(np.asarray(beta, dtype))
    outs = [blas.gemv_no_inplace(z, a, A, x, b), blas.gemv_no_inplace(tt.exp(z), a, A, x, b)]
    rng = np.random.default_rng(8)
    args = [rng.standard_normal(s).astype(dtype) for s in [(4, 3), (3,), (4,)]]
    args[2][0] = np.inf  # b*z + a*p, not a*p + b*z: inf*0 stays out where b = 0
    z_before = args[2].copy()
    ref = function([A, x, z], outs, mode=REF)
    for mode in (cpu(poison=poisoned), cpu(poison=poisoned, min_plan_bytes=10**9)):
        f = function([A, x, z], outs, mode=mode)
        for _ in range(2):
            assert_same(f(*args), ref(*args), rtol=1e-5 if dtype == "float32" else 1e-12)
            np.testing.assert_array_equal(args[2], z_before)  # z is the caller's


def test_keyword_calls_run_the_generated_code_of_their_shapes(monkeypatch):
    # f(**point) (PyMC3's point functions): every input named once runs the code
    # generated for those shapes, as a call by position does, not the plain call.
    x, y = tt.dvector("x"), tt.dmatrix("y")
    f = function([x, y], [tt.exp(x) + y.sum(axis=0), x * 2])
    path = f._path
    plain = []
    real_slow = path.slow
    monkeypatch.setattr(path, "slow", lambda *a, **k: plain.append(1) or real_slow(*a, **k))
    xv, yv = np.linspace(0, 1, 3), np.arange(6.0).reshape(2, 3)
    want = [np.exp(xv) + yv.sum(axis=0), xv * 2]
    for call in (
        lambda: f(x=xv, y=yv),
        lambda: f(y=yv, x=xv),
        lambda: f(xv, y=yv),
        lambda: f(xv, yv),
    ):
        for g, w in zip(call(), want):
            np.testing.assert_allclose(g, w)
    # (without the C half of the call, THEANO_DAG_PY_CALL=1, keywords take the plain call)
    assert len(path.generated) == 1 and (not plain or not path.guarded)
    # another shape by keyword: its own code
    got = f(y=np.ones((1, 4)), x=np.zeros(4))
    np.testing.assert_allclose(got[0], np.full(4, 2.0))
    if not path.guarded:
        return
    assert not plain and len(path.generated) == 2
    # anything else takes the plain call, with its errors
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        f(x=xv, z=yv)
    with pytest.raises(TypeError, match="got multiple values for input"):
        f(xv, x=xv)
    with pytest.raises(TypeError, match="missing a value for input"):
        f(x=xv)
    assert len(plain) == 3
    np.testing.assert_allclose(f(x=[0.0, 1.0, 2.0], y=yv)[1], [0.0, 2.0, 4.0])  # a list: filtered
    assert len(plain) == 4


# -- what a link and a plan make only when asked ------------------------------------------


def test_plan_readers_are_made_when_asked_and_list_each_values_reading_steps():
    x, y = tt.dvector("x"), tt.dvector("y")
    a = tt.exp(x)
    f = function([x, y], [tt.dot(a, y), a * y], mode=Mode(linker="cpu", optimizer=None))
    f(np.ones(3), np.arange(3.0))
    plan, program = plan_of(f), f.fn.program
    # No update to write in place: nothing asked for them while planning.
    assert "readers" not in plan.__dict__
    x, y = program.inputs  # the function's own copies
    (exp,) = [n for n, _s, _c in program.node_steps if "exp" in str(n.op)]
    a = exp.outputs[0]
    assert plan.readers[x] == [0]  # the exp, first
    assert plan.readers[a] == plan.readers[y] and len(plan.readers[a]) == 2  # dot, mul
    assert plan.readers == {
        v: [idx for idx, (_k, st) in enumerate(plan.steps) if v in st.inputs]
        for _k, st in plan.steps
        for v in st.inputs
    }


def test_shape_error_names_the_nodes_position_in_the_run_order():
    x, y = tt.dvector("x"), tt.dvector("y")
    f = function([x, y], tt.exp(x) + tt.log(y), mode=Mode(linker="cpu", optimizer=None))
    program = f.fn.program
    assert "node_index" not in program.__dict__  # made by the error, not by the link
    with pytest.raises(ValueError) as info:
        f(np.ones(3), np.ones(4))
    (add,) = [n for n, _s, _c in program.node_steps if "add" in str(n.op)]
    position = [n for n, _s, _c in program.node_steps].index(add)
    assert info.value.node is add
    assert info.value.position == program.node_index[add] == position
    assert f"Toposort index: {position}" in str(info.value)


@pytest.mark.parametrize(
    "dtype,build",
    [
        ("uint8", lambda x: tt.sum(x)),  # accumulates in uint64
        ("int16", lambda x: tt.prod(x, dtype="int64")),
        ("bool", lambda x: tt.sum(x)),
        ("float32", lambda x: tt.sum(x, dtype="float64")),
        ("uint8", lambda x: tt.mean(x * 3 + 1)),  # a FusedReduce's reduction
        ("int8", lambda x: tt.sum(x.reshape((256, -1)), axis=0)),
    ],
)
def test_a_reduction_into_a_wider_accumulator_makes_no_converted_copy(dtype, build):
    # The reduction converts as it goes (numpy's reduce with dtype=), as the reference
    # engine's perform does: a copy of the input converted first, an int64 copy of a
    # uint8 image, took eight times the input's memory at every call.
    x = tt.vector("x", dtype=dtype)
    out = build(x)
    f = function([x], out, mode=get_mode("FAST_RUN"))
    ref = function([x], out, mode=REF)
    v = (np.arange(1 << 18) % 3).astype(dtype)
    f(v)
    got, peak = traced_peak(f, v)
    want = ref(v)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # Less than a byte a value (the converted copy is 8: every accumulator here is
    # 64-bit). Without a C compiler the elementwise part of ``x * 3 + 1`` computes in
    # int16 too: its ufunc converts the uint8 blocks as it goes (a converted int16 copy
    # of the input, twice its bytes, was made first).
    assert peak < v.size, f"peak {peak / v.size:.2f} bytes a value"
