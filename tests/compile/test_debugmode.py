"""DebugMode: every rewrite checked (integrity, values), the engine checked, profiles."""

import io
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.debugmode import (
    BadDestroyMap,
    BadEngineOutput,
    BadOptimizationWarning,
    BadViewMap,
    DebugMode,
    InvalidValueError,
    StochasticOrder,
    sample_value,
)
from theano_dag.compile.mode import get_mode, predefined_modes
from theano_dag.engines.basic import PerformLinker
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.graph.rewriting.db import EquilibriumDB
from theano_dag.graph.toolbox import BadOptimization
from theano_dag.opt import (
    Query,
    build_optdb,
    local_optimizer,
    optimizer,
    register_canonicalize,
)
from theano_dag.sparse.sandbox import sp2
from theano_dag.tensor import hints
from theano_dag.tensor import slinalg as la
from theano_dag.tensor.elemwise import DimShuffle

rng = np.random.default_rng(0)


def mode_with(db, **kwargs):
    """A DebugMode running the FAST_RUN query of ``db`` (instead of the global optdb)."""
    return DebugMode(linker="py", optimizer=db.query(Query(include=["fast_run"])), **kwargs)


def test_good_rewrites_pass_and_values_are_right():
    x, y = tt.dvector("x"), tt.dvector("y")
    out = tt.log(1 + x * 1) * (y * 2) / y + tt.exp(x) * y
    f = theano_dag.function([x, y], out, mode=DebugMode(linker="py"))
    a, b = rng.uniform(0.1, 1, size=3), rng.uniform(0.1, 1, size=3)
    np.testing.assert_allclose(f(a, b), np.log1p(a) * 2 + np.exp(a) * b)


def test_debugmode_is_a_registered_mode():
    assert isinstance(get_mode("DebugMode"), DebugMode)
    assert isinstance(get_mode("DEBUG_MODE"), DebugMode)


def test_a_wrong_rewrite_raises_bad_optimization_naming_it():
    db = build_optdb()

    @register_canonicalize(db=db)
    @local_optimizer([tt.exp])
    def local_wrong_exp(fgraph, node):
        return [tt.expm1(node.inputs[0])]  # off by one

    x = tt.dvector("x")
    with pytest.raises(BadOptimization) as info:
        theano_dag.function([x], tt.exp(x) * 2, mode=mode_with(db))
    msg = str(info.value)
    assert "Reason:  local_wrong_exp" in msg
    assert "Elemwise{exp,no_inplace}" in msg and "Elemwise{expm1,no_inplace}" in msg
    assert "Max Abs Diff:  1.0" in msg  # exp(x) - expm1(x) is exactly 1
    assert info.value.reason == "local_wrong_exp"


def test_a_refused_rewrite_after_others_in_its_pass_is_undone_and_reported():
    # lt(x, x) becomes zeros (canonicalize) before 0 / z -> 0 (local_zero_div) meets
    # 0 / 0 on DebugMode's samples: its BadOptimization used to end in a KeyError, the
    # pass's undo missing the refused change. local_zero_div is one of the rewrites
    # documented as unsafe for non-finite values; without them the value is NaN.
    x = tt.TensorType("int8", shape=(None, None))("x")
    z = tt.lt(x, x)
    with pytest.raises(BadOptimization) as info:
        theano_dag.function([x], z / z, mode=DebugMode(check_isfinite=False))
    assert info.value.reason == "local_zero_div"
    mode = DebugMode(check_isfinite=False).excluding("nonfinite_unsafe")
    f = theano_dag.function([x], z / z, mode=mode)
    assert np.isnan(f(np.ones((2, 3), "int8"))).all()


def test_a_rewrite_that_breaks_the_graph_bookkeeping_is_caught():
    @optimizer
    def corrupt(fgraph):
        node = fgraph.outputs[0].owner
        node.inputs[0] = node.inputs[1]  # behind the FunctionGraph's back
        fgraph.replace(fgraph.outputs[0], node.op(*node.inputs), reason="corrupt")

    x, y = tt.dvector("x"), tt.dvector("y")
    with pytest.raises(BadOptimization, match="after a change made by corrupt.*inconsistent"):
        theano_dag.function([x, y], x + y, mode=DebugMode(linker="py", optimizer=corrupt))


def test_profile_reports_time_and_changes_per_rewrite():
    out = io.StringIO()
    x, y = tt.dvector("x"), tt.dvector("y")
    mode = DebugMode(linker="py", profile=True, stream=out)
    theano_dag.function([x, y], (x * 1 + 0) * y + x * y, mode=mode)
    text = out.getvalue()
    assert "DebugMode: optimization took" in text
    assert "time - applied - tried" in text and "local_mul_one" in text
    assert "Changes per rewrite (DebugMode):" in text
    prof, checker = mode.last_optimizer_profile
    assert checker.counts["local_mul_one"] >= 1 and checker.counts["local_add_zero_float"] >= 1


class _WrongLinker(PerformLinker):
    """The reference engine, but every output is off by one."""

    def make_all(self, **kwargs):
        fn, ins, outs, thunks, order = super().make_all(**kwargs)

        def wrong():
            fn()
            for c in outs:
                c.storage[0] = c.storage[0] + 1

        return wrong, ins, outs, thunks, order


def test_an_engine_that_computes_wrong_values_is_caught():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.exp(x), mode=DebugMode(linker=_WrongLinker()))
    with pytest.raises(BadEngineOutput, match="output 0 .* differs from the reference"):
        f(np.zeros(2))
    good = theano_dag.function([x], tt.exp(x), mode=DebugMode(linker="py"))
    np.testing.assert_allclose(good(np.zeros(2)), [1.0, 1.0])


class _ScaledLinker(PerformLinker):
    """The reference engine, but every output scaled by ``factor``."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def make_all(self, **kwargs):
        fn, ins, outs, thunks, order = super().make_all(**kwargs)

        def scaled():
            fn()
            for c in outs:
                c.storage[0] = c.storage[0] * self.factor

        return scaled, ins, outs, thunks, order


# Lasagne's binary_hinge_loss(log_odds=False) with floatX=float32: the log of float32
# predictions times int targets, a float64 result carrying float32 rounding.
def _hinge(p, t):
    return tt.maximum(0, 1 - tt.log(p / (1 - p)) * (2 * t - 1))


def test_float32_rounding_in_a_float64_output_is_not_a_wrong_value():
    # Two correct engines may round a float32 step an ulp apart (6e-8 relative); Theano's
    # DebugMode compares float64 with numpy's allclose bounds, and so does this one.
    p, t = tt.fvector("p"), tt.ivector("t")
    draw = np.random.default_rng(7)
    pv = draw.uniform(0.01, 0.99, 200).astype("float32")
    tv = draw.integers(0, 2, 200).astype("int32")
    lo = np.log(pv / (np.float32(1) - pv))  # float32, as the graph's log
    want = np.maximum(0, 1 - lo * (2 * tv - 1))
    # 1 - lo cancels near lo = 1: a float32 ulp of lo (1.2e-7) is the absolute bound there
    close = {"rtol": 1e-6, "atol": 2.4e-7}
    ulp = theano_dag.function([p, t], _hinge(p, t), mode=DebugMode(linker=_ScaledLinker(1 + 6e-8)))
    assert ulp.maker.fgraph.outputs[0].dtype == "float64"
    np.testing.assert_allclose(ulp(pv, tv), want, **close)
    wrong = theano_dag.function(
        [p, t], _hinge(p, t), mode=DebugMode(linker=_ScaledLinker(1 + 1e-4))
    )
    with pytest.raises(BadEngineOutput, match="differs from the reference"):
        wrong(pv, tv)
    # the CPU engine's C kernel, checked against the reference on the same graph
    cpu = theano_dag.function([p, t], _hinge(p, t), mode=DebugMode(linker="cpu"))
    np.testing.assert_allclose(cpu(pv, tv), want, **close)


def test_sample_inputs_and_graphs_random_inputs_cannot_run():
    x = tt.dvector("x")
    out = tt.reshape(x, (5, 7)) * 1  # random vectors of length 3, 4, 2, 6, 5, 1 do not fit
    with pytest.warns(UserWarning, match="could not be evaluated on random inputs"):
        theano_dag.function([x], out, mode=DebugMode(linker="py"))
    f = theano_dag.function([x], out, mode=DebugMode(linker="py", sample_inputs=[[np.ones(35)]]))
    assert f(np.arange(35.0)).shape == (5, 7)


def test_sample_value_types():
    assert sample_value(tt.fmatrix(), 3, rng, True).dtype == np.float32
    assert sample_value(tt.bvector(), 3, rng, True).dtype == np.int8
    assert sample_value(tt.TensorType("float64", shape=(2, None))(), 4, rng, False).shape == (2, 4)
    v = sample_value(tt.dvector(), 50, rng, False)
    assert (v >= 0.1).all() and (v < 1.1).all()


class _Perform(Op):
    """An op whose ``perform`` is the function given (to break its contract on purpose)."""

    __props__ = ("fn", "n_out")

    def __init__(self, fn, n_out=1, view_map=None):
        self.fn, self.n_out = fn, n_out
        if view_map:
            self.view_map = view_map

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(i) for i in inputs]
        return Apply(self, inputs, [inputs[0].type() for _ in range(self.n_out)])

    def perform(self, node, inputs, outputs):
        for cell, value in zip(outputs, self.fn(*inputs)):
            cell[0] = value


def _adds_in_place(a, b):
    a += b
    return [a]


def _overlapping_outputs(a, b):
    r = a * 1
    return [r[:-1], r[1:]]


@pytest.mark.parametrize(
    "fn, n_out, view_map, error",
    [
        (_adds_in_place, 1, None, BadDestroyMap),  # changes x, no destroy_map
        (lambda a, b: [b[1:]], 1, None, BadViewMap),  # a view of y, no view_map
        (_overlapping_outputs, 2, None, BadViewMap),  # outputs overlap, both used
        (lambda a, b: [(a + b).astype("float32")], 1, None, InvalidValueError),  # dtype
        (lambda a, b: [np.log(a - a)], 1, None, InvalidValueError),  # -inf from finite inputs
    ],
)
@pytest.mark.parametrize("linker", [None, "py"])
def test_debugmode_checks_each_perform(fn, n_out, view_map, error, linker):
    # On the reference engine too (linker=py, or THEANO_DAG_FLAGS=linker=py): it was run
    # unchecked, and DebugMode let a perform that changes its input pass.
    x, y = tt.dvector("x"), tt.dvector("y")
    outs = _Perform(fn, n_out, view_map)(x, y)
    out = sum(o * 2 for o in outs) if n_out > 1 else outs
    f = theano_dag.function([x, y], out, mode=DebugMode(linker=linker, optimizer=None))
    with pytest.raises(error, match="DebugMode: "):
        f(np.array([1.0, 2.0, 3.0]), np.array([3.0, 4.0, 5.0]))


def test_debugmode_accepts_declared_views_and_unchecked_infinities():
    x, y = tt.dvector("x"), tt.dvector("y")
    view = _Perform(lambda a, b: [b[1:]], view_map={0: [1]})(x, y)
    f = theano_dag.function([x, y], view * 2, mode=DebugMode(optimizer=None))
    np.testing.assert_allclose(f(np.ones(3), np.arange(3.0)), [2.0, 4.0])
    g = theano_dag.function([x], tt.log(x), mode=DebugMode(check_isfinite=False))
    assert np.isneginf(g(np.zeros(1))[0])


def test_a_declared_view_of_a_value_given_twice_is_no_bad_view():
    # EqualLengths(n, n) once merge made both lengths one variable: its output, a declared
    # view of input 0, is then also input 1's memory. Theano's DebugMode accepts an
    # undeclared alias that a declared one explains; this one raised BadViewMap.
    x = tt.dvector("x")
    twice = _Perform(lambda a, b: [a[1:]], view_map={0: [0]})(x, x)
    f = theano_dag.function([x], twice * 2, mode=DebugMode(optimizer=None))
    np.testing.assert_allclose(f(np.arange(3.0)), [2.0, 4.0])
    y = tt.dvector("y")
    other = _Perform(lambda a, b: [b[1:]], view_map={0: [0]})(x, y)
    g = theano_dag.function([x, y], other * 2, mode=DebugMode(optimizer=None))
    with pytest.raises(BadViewMap, match="shares memory with input 1"):
        g(np.arange(3.0), np.arange(3.0))


def test_a_function_compiled_in_debugmode_pickles():
    # The mode's report of its last compile holds the rewrites' functions, which do not
    # pickle; Theano's test_pickle failed under THEANO_DAG_FLAGS=mode=DebugMode.
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.exp(x) * 2 + 0, mode="DebugMode")
    assert f.maker.mode.last_optimizer_profile is not None
    g = pickle.loads(pickle.dumps(f))
    np.testing.assert_allclose(g(np.arange(3.0)), 2 * np.exp(np.arange(3.0)))
    assert isinstance(g.maker.mode, DebugMode)


def test_ops_drawing_from_numpys_global_generator_draw_once_per_call():
    # Theano's sparse poisson/binomial draw from np.random: the engine's and the reference
    # engine's runs drew different values (BadEngineOutput, Theano's test_sp2.py under
    # mode=DebugMode). Both draw the same now, and the generator moves as without DebugMode.
    x = theano_dag.sparse.csr_matrix("x")
    out = sp2.poisson(x)
    value = scipy.sparse.csr_matrix(np.array([[0.0, 2.0, 5.0], [1.0, 0.0, 3.0]]))
    results = []
    for mode in (DebugMode(), "FAST_RUN"):
        f = theano_dag.function([x], out, mode=mode)
        np.random.seed(3)
        results.append((f(value).toarray(), np.random.get_state()[1].copy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_stability_patience_finds_a_rewrite_that_changes_its_mind():
    flips = [False]

    @local_optimizer([tt.add])
    def local_sometimes_neg(fgraph, node):
        # A rewrite whose result depends on how often it ran before, not on the graph.
        if node.op == tt.add:
            flips[0] = not flips[0]
            if flips[0]:
                return [tt.sub(*node.inputs)]
        return False

    db = EquilibriumDB()
    db.register("local_sometimes_neg", local_sometimes_neg, "all")
    a, b = tt.dvector("a"), tt.dvector("b")
    with pytest.raises(StochasticOrder, match="optimizing the same graph again gave another"):
        theano_dag.function(
            [a, b], a + b, mode=DebugMode(optimizer=db.query("+all"), stability_patience=3)
        )
    # A rewrite that depends on the graph only passes the check, and the function runs.
    f = theano_dag.function([a, b], a + b, mode=DebugMode(stability_patience=3, check_c_code=True))
    np.testing.assert_array_equal(f([1.0, 2.0], [3.0, 4.0]), [4.0, 6.0])


def test_debug_mode_instance_and_its_live_check_isfinite():
    mode = predefined_modes["DEBUG_MODE"]
    assert isinstance(mode, DebugMode) and get_mode("DEBUG_MODE") is mode
    x = tt.dvector("x")
    f = theano_dag.function([x], (x + 2) * 5, mode="DEBUG_MODE")
    with pytest.raises(InvalidValueError, match="holds a NaN or an infinity"):
        f(np.array([1.0, np.inf]))
    try:
        mode.check_isfinite = False  # read at each call of the functions made with it
        np.testing.assert_array_equal(f(np.array([1.0, np.inf])), [15.0, np.inf])
    finally:
        mode.check_isfinite = True
    with pytest.raises(InvalidValueError):
        f(np.array([np.nan, 1.0]))


def test_a_rewrite_wrong_only_on_the_calls_values_is_reported_at_the_call():
    # Right on DebugMode's random inputs (all within [-1, 1.1)), wrong where x > 2: the
    # call's values check each replacement again, as Theano's DebugMode does.
    db = build_optdb()

    @register_canonicalize(db=db)
    @local_optimizer([tt.minimum])
    def local_wrong_minimum(fgraph, node):
        return [node.inputs[0]]  # minimum(x, 2) -> x: right while x <= 2

    x = tt.dvector("x")
    f = theano_dag.function([x], tt.minimum(x, 2.0) * 3, mode=mode_with(db))
    assert not any(n.op == tt.minimum for n in f.maker.fgraph.apply_nodes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(f(np.array([0.5, 1.0])), [1.5, 3.0])
    with pytest.warns(
        BadOptimizationWarning, match="the replacement local_wrong_minimum made"
    ) as w:
        f(np.array([0.5, 5.0]))
    assert len(w) == 1 and "Max Abs Diff:  3.0" in str(w[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per replacement
        f(np.array([0.5, 5.0]))

    strict = theano_dag.function(
        [x], tt.minimum(x, 2.0) * 3, mode=mode_with(db, check_calls="raise")
    )
    with pytest.raises(BadOptimization) as info:
        strict(np.array([0.5, 5.0]))
    assert info.value.reason == "local_wrong_minimum"
    assert "Max Abs Diff:  3.0" in str(info.value)
    quiet = theano_dag.function([x], tt.minimum(x, 2.0) * 3, mode=mode_with(db, check_calls=False))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(quiet(np.array([0.5, 5.0])), [1.5, 15.0])
    with pytest.raises(ValueError, match='check_calls must be "warn", "raise" or False, got'):
        DebugMode(check_calls="yes")


def test_a_stabilised_value_where_the_written_graph_overflows_is_no_mismatch():
    # log(softmax(x)) -> log_softmax(x): -inf where written, finite after the rewrite.
    x = tt.dmatrix("x")
    f = theano_dag.function(
        [x], tt.log(tt.nnet.softmax(x)), mode=DebugMode(check_calls="raise", check_isfinite=False)
    )
    big = np.array([[0.0, 2000.0, -3000.0]])
    np.testing.assert_allclose(f(big), [[-2000.0, 0.0, -5000.0]])


def test_an_assertion_a_rewrite_removed_still_raises_at_the_call():
    # Theano's DebugMode runs the graph from before local_remove_all_assert too.
    x = tt.dscalar("x")
    checked = tt.opt.assert_op(x, tt.gt(x, 0)) * 2
    mode = DebugMode(linker="py").including("local_remove_all_assert")
    f = theano_dag.function([x], checked, mode=mode)
    assert not any(type(n.op).__name__ == "Assert" for n in f.maker.fgraph.apply_nodes)
    assert f(1.5) == 3.0
    with pytest.raises(AssertionError):
        f(-1.0)
    # Without DebugMode the assertion is gone, as asked.
    fast = theano_dag.function(
        [x], checked, mode=get_mode("FAST_RUN").including("local_remove_all_assert")
    )
    assert fast(-1.0) == -2.0


def test_rewrites_that_read_a_hint_are_checked_on_inputs_that_keep_it():
    # The rewrites of a psd solve (through the Cholesky factor) and of the transpose of
    # a symmetric matrix hold for values that keep the hint; the random inputs of the
    # compile-time check did not (a BadOptimization for a correct rewrite). An input a
    # hint marks now gets a value that keeps it.
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    h = hints.psd(a)
    x = la.solve(h, b)
    outs = [x, h.T * 2, theano_dag.grad(x.sum(), b)]
    f = theano_dag.function([a, b], outs, mode=DebugMode(check_isfinite=False))
    av = np.array([[4.0, 1.0], [1.0, 3.0]])
    bv = np.array([[1.0], [2.0]])
    got = f(av, bv)
    np.testing.assert_allclose(got[0], np.linalg.solve(av, bv))
    np.testing.assert_allclose(got[1], 2 * av.T)
    # a wrong rewrite of a hinted graph is still caught: the transpose of a matrix
    # marked only positive (not symmetric) is not the matrix
    db = build_optdb()

    @register_canonicalize(db=db)
    @local_optimizer([DimShuffle])
    def local_wrong_transpose(fgraph, node):
        x = node.inputs[0]
        if node.op.new_order == (1, 0) and hints.hints(x):
            return [x]
        return False

    with pytest.raises(BadOptimization, match="local_wrong_transpose"):
        theano_dag.function([a], hints.Hint(positive=True)(a).T * 2, mode=mode_with(db))
