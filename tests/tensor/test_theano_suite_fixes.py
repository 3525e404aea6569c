"""Behaviours found by running theano-pymc 1.1.2's own tensor tests in full against
theano_dag: each test here failed before its fix, values against numpy/scipy on every
engine (the reference, the CPU engine, OpenCL)."""

import copy
import pickle

import numpy as np
import pytest
from engine_modes import ENGINES, FLOATS, mode_of
from tensor_helpers import inferred_shapes

import theano_dag.scalar as ts
import theano_dag.tensor as tt
from theano_dag import function, shared
from theano_dag.gradient import grad
from theano_dag.gradient.verify import verify_grad
from theano_dag.graph.basic import Apply, clone_replace
from theano_dag.graph.op import Op
from theano_dag.tensor import extra_ops, linalg
from theano_dag.tensor.arrays import scalar_from_tensor, tensor_from_scalar
from theano_dag.tensor.basic import ARange
from theano_dag.tensor.sort import ArgSortOp, SortAlongOp, SortOp, argsort, sort
from theano_dag.tensor.subtensor import AdvancedSubtensor
from theano_dag.tensor.type_other import NoneConst, SliceConstant, make_slice, slicetype


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_nan_gradient_is_nan_everywhere(engine, dtype, lower):
    # on_error="nan": a matrix that is not positive definite has a NaN factor, and the
    # gradient through it is NaN in every entry (the triangle the factor does not reach
    # too); a positive definite one keeps its finite gradient.
    x = tt.matrix("x", dtype=dtype)
    chol = linalg.Cholesky(lower=lower, on_error="nan")
    f = function([x], grad(chol(x).sum(), x), mode=mode_of(engine))
    got = f(np.array([[1.0, 0.2], [0.2, -2.0]], dtype=dtype))
    assert got.dtype == dtype and got.shape == (2, 2) and np.isnan(got).all()
    spd = np.array([[4.0, 1.0], [1.0, 3.0]], dtype=dtype)
    ref = function([x], grad(linalg.Cholesky(lower=lower)(x).sum(), x), mode=mode_of("py"))
    np.testing.assert_allclose(f(spd), ref(spd), rtol=1e-5)
    assert np.isfinite(f(spd)).all()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ddof", [0, 1, 2])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_var_corrected_keeps_ddof(engine, dtype, ddof, axis):
    # corrected=True is the corrected two-pass algorithm (the squared sum of the
    # deviations subtracted), not ddof=1: numpy's value for every ddof.
    x = tt.matrix("x", dtype=dtype)
    val = (np.arange(20.0).reshape(4, 5) ** 1.5 + 100).astype(dtype)
    outs = [tt.var(x, axis=axis, ddof=ddof, corrected=c) for c in (False, True)]
    outs.append(tt.std(x, axis=axis, ddof=ddof, corrected=True))
    got = function([x], outs, mode=mode_of(engine))(val)
    want = np.var(val.astype("float64"), axis=axis, ddof=ddof)
    rtol = 1e-4 if dtype == "float32" else 1e-10
    for g, w in zip(got, [want, want, np.sqrt(want)]):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, rtol=rtol)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ddof", [1, 2])
@pytest.mark.parametrize("corrected", [False, True])
def test_var_with_no_more_values_than_ddof_is_nan(engine, dtype, ddof, corrected):
    # numpy divides by max(n - ddof, 0): over an empty axis, or with n <= ddof, the
    # variance is NaN. The rewrites cancel the n of mean * n / (n - ddof), which gave
    # 0 / -1 = -0.0 over an empty axis on the optimizing engines.
    x = tt.matrix("x", dtype=dtype)
    f = function([x], tt.var(x, axis=1, ddof=ddof, corrected=corrected), mode=mode_of(engine))
    for rows in (np.zeros((3, 0), dtype), np.ones((2, 1), dtype), np.ones((2, 2), dtype)):
        with np.errstate(all="ignore"):
            want = np.var(rows, axis=1, ddof=ddof)
        got = f(rows)
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)])


@pytest.mark.parametrize("engine", ENGINES)
def test_mean_of_float16_sums_in_float32(engine):
    # 100000 float16 ones: their sum (and the count) overflow float16 (65504); the mean
    # is taken in float32 and returned as float16.
    x = tt.vector("x", dtype="float16")
    m = tt.matrix("m", dtype="float16")
    f = function([x, m], [tt.mean(x), tt.mean(m, axis=0)], mode=mode_of(engine))
    mval = np.full((70000, 2), 3.0, dtype="float16")
    got, got_m = f(np.ones(100000, dtype="float16"), mval)
    assert got.dtype == "float16" and float(got) == 1.0
    assert got_m.dtype == "float16"
    np.testing.assert_array_equal(got_m, np.mean(mval, axis=0, dtype="float32"))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("start, stop, step", [(0, 4.9, 1), (5.1, 0, -0.5), (1, 5.1, 0.5)])
def test_arange_gradient_through_start_and_step(engine, dtype, start, stop, step):
    # out[i] = start + i * step: d/dstart = sum(g), d/dstep = sum(g * i); stop only sets
    # the length (no gradient). Values and finite differences.
    a, b, c = (tt.scalar(n, dtype=dtype) for n in "abc")
    out = ARange(dtype)(a, b, c)
    cost = (out**2).sum()
    f = function([a, b, c], [out, *grad(cost, [a, c])], mode=mode_of(engine))
    vals = [np.asarray(v, dtype=dtype) for v in (start, stop, step)]
    got, g_start, g_step = f(*vals)
    want = np.arange(*vals, dtype=dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    rank = np.arange(len(want))
    assert g_start.dtype == g_step.dtype == dtype
    np.testing.assert_allclose(g_start, (2 * want).sum(), rtol=1e-5)
    np.testing.assert_allclose(g_step, (2 * want * rank).sum(), rtol=1e-5)
    with pytest.raises(Exception, match="not part of the computational graph"):
        grad(cost, b)
    if dtype == "float64":
        verify_grad(lambda s, t, u: ARange(dtype)(s, t, u), vals, mode=mode_of(engine))


@pytest.mark.parametrize("engine", ENGINES)
def test_integer_arange_has_zero_gradient(engine):
    i, j = tt.lscalar("i"), tt.lscalar("j")
    cost = tt.cast(tt.arange(i, 10, j), "float64").sum()
    g_i, g_j = function([i, j], grad(cost, [i, j]), mode=mode_of(engine))(2, 3)
    assert float(g_i) == 0.0 and float(g_j) == 0.0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["int8", "uint16", "float32", "float64", "complex64"])
def test_scalar_type_inputs_run(engine, dtype):
    # An input of a theano.scalar type: its value is a numpy scalar, not an array; the
    # engines take it (the CPU engine refused it, "has no array value").
    s = ts.Scalar(dtype=dtype)("s")
    x = tt.dvector("x")
    back = tt.scalar_from_tensor(tt.tensor_from_scalar(s))
    f = function([s, x], [back, x * tt.tensor_from_scalar(s)], mode=mode_of(engine))
    got_s, got_x = f(3, np.arange(3.0))
    assert got_s == 3 and np.asarray(got_s).dtype == dtype and np.ndim(got_s) == 0
    np.testing.assert_array_equal(got_x, np.arange(3.0) * np.asarray(3, dtype=dtype))
    assert got_x.dtype == np.result_type(dtype, "float64")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_input_returned_as_is(engine, dtype):
    # The output is the input (a copy of it): OpenCL has no complex copy kernel and copies
    # it on the host (it raised KeyError when the function was built).
    c = tt.vector("c", dtype=dtype)
    val = np.array([1 + 2j, -3j], dtype=dtype)
    got = function([c], c, mode=mode_of(engine))(val)
    assert got.dtype == dtype and got is not val
    np.testing.assert_array_equal(got, val)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_empty_list_index_picks_nothing(engine, dtype):
    # x[[]] and x[:, ()] as numpy: an empty integer index (it became a float vector,
    # refused as an index).
    x = tt.matrix("x", dtype=dtype)
    outs = [x[[]], x[:, []], x[:, ()], x[[], 1:]]
    val = np.arange(6, dtype=dtype).reshape(2, 3)
    got = function([x], outs, mode=mode_of(engine))(val)
    for g, w in zip(got, [val[[]], val[:, []], val[:, ()], val[[], 1:]]):
        assert g.dtype == dtype and g.shape == w.shape


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_j1_and_i1_gradients(engine, dtype):
    # d/dx j1 = (j0 - j2) / 2 and d/dx i1 = (i0 + i2) / 2, against scipy's derivatives and
    # finite differences (they had no gradient).
    sp = pytest.importorskip("scipy.special")
    x = tt.vector("x", dtype=dtype)
    f = function([x], [grad(tt.j1(x).sum(), x), grad(tt.i1(x).sum(), x)], mode=mode_of(engine))
    val = np.array([-2.5, 0.0, 0.5, 3.0], dtype=dtype)
    gj, gi = f(val)
    rtol = 1e-5 if dtype == "float32" else 1e-10
    assert gj.dtype == gi.dtype == dtype
    np.testing.assert_allclose(gj, sp.jvp(1, val.astype("float64")), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(gi, sp.ivp(1, val.astype("float64")), rtol=rtol, atol=rtol)
    if dtype == "float64":
        for op in (tt.j1, tt.i1):
            verify_grad(op, [val], mode=mode_of(engine))


def test_dimshuffle_refuses_more_dimensions_than_numpy_when_built():
    # Past numpy's limit the engines' views fail at run time (IndexError); the op says so
    # when it is made, with ValueError as Theano's (numpy 1's) did.
    limit = 64 if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else 32
    x = tt.dscalar("x")
    assert x.dimshuffle(("x",) * limit).ndim == limit
    with pytest.raises(ValueError, match=f"more than numpy's {limit}"):
        x.dimshuffle(("x",) * (limit + 1))
    with pytest.raises(ValueError, match="may not appear twice"):
        tt.dmatrix().dimshuffle(0, 0)


@pytest.mark.parametrize("engine", ENGINES)
def test_transpose_names_the_reversal(engine):
    x1, x3 = tt.dvector("x1"), tt.dtensor3("x3")
    assert tt.transpose(x1).name == "x1.T" and x3.T.name == "x3.T"
    assert tt.transpose(x3, (0, 2, 1)).name is None and tt.transpose(tt.dmatrix()).name is None
    val = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(function([x3], x3.T, mode=mode_of(engine))(val), val.T)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis_dtype", ["int64", "float64"])
def test_sort_and_argsort_along_a_symbolic_axis(engine, dtype, axis_dtype):
    # sort(a, axis) with axis a symbolic scalar (Theano's tests give a float one): the
    # axis is known when the function runs; values, indices, shapes and the gradient.
    a = tt.tensor3("a", dtype=dtype)
    ax = tt.scalar("ax", dtype=axis_dtype)
    w = np.arange(24, dtype=dtype).reshape(2, 3, 4)
    s, i = sort(a, ax, "mergesort"), argsort(a, ax)
    assert isinstance(s.owner.op, SortAlongOp) and s.type == a.type
    assert i.dtype == "int64" and i.ndim == 3
    f = function([a, ax], [s, i, grad((s * w).sum(), a)], mode=mode_of(engine))
    val = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(dtype)
    for axis in (0, 1, 2, -1, -3):
        got_s, got_i, got_g = f(val, axis)
        np.testing.assert_array_equal(got_s, np.sort(val, axis=axis))
        np.testing.assert_array_equal(got_i, np.argsort(val, axis=axis, kind="stable"))
        assert got_s.dtype == dtype and got_g.dtype == dtype
        # the gradient of sum(sort(a) * w): w put back where each element came from
        want_g = np.empty_like(val)
        np.put_along_axis(want_g, np.argsort(val, axis=axis, kind="stable"), w, axis=axis)
        np.testing.assert_array_equal(got_g, want_g)
        assert inferred_shapes(s, {a: val, ax: axis}) == [val.shape]
    with pytest.raises(ValueError, match="not an axis"):
        f(val, 3)
    if dtype == "float64":
        g = function([a, ax], grad((sort(a, ax) * w).sum(), a), mode=mode_of(engine))
        eps, k = 1e-6, (1, 2, 3)
        bumped = val.copy()
        bumped[k] += eps
        cost = function([a, ax], (sort(a, ax) * w).sum(), mode=mode_of(engine))
        num = (cost(bumped, 1) - cost(val, 1)) / eps
        np.testing.assert_allclose(g(val, 1)[k], num, rtol=1e-4)
    # a constant axis still makes the static-axis op
    assert not isinstance(sort(a, tt.constant(1)).owner.op, SortAlongOp)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_generalized_eigvalsh_reads_lower_triangles_and_has_a_gradient(engine, dtype):
    # eigvalsh(a, b) as scipy's eigh(a, b): the lower triangles of both (a's upper one was
    # read too), a gradient (it raised 'not implemented'), and b=NoneConst as b=None.
    sl = pytest.importorskip("scipy.linalg")
    rng = np.random.default_rng(5)
    a_val = rng.standard_normal((4, 4)).astype(dtype)  # not symmetric on purpose
    b_val = (6 * np.eye(4) + rng.standard_normal((4, 4))).astype(dtype)
    a, b = tt.matrix("a", dtype=dtype), tt.matrix("b", dtype=dtype)
    weights = np.arange(1.0, 5.0).astype(dtype)
    w = linalg.eigvalsh(a, b)
    f = function(
        [a, b],
        [w, *grad(tt.dot(w, weights), [a, b]), linalg.eigvalsh(a, NoneConst)],
        mode=mode_of(engine),
    )
    got_w, ga, gb, plain = f(a_val, b_val)
    rtol = 1e-4 if dtype == "float32" else 1e-10
    assert got_w.dtype == ga.dtype == gb.dtype == dtype
    np.testing.assert_allclose(got_w, sl.eigvalsh(a_val, b_val), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(plain, sl.eigvalsh(a_val), rtol=rtol, atol=rtol)
    # the gradients: v diag(g) v^T and -v diag(g w) v^T, on the lower triangles
    ws, vs = sl.eigh(a_val.astype("float64"), b_val.astype("float64"))
    for got, m in ((ga, (vs * weights) @ vs.T), (gb, -(vs * (weights * ws)) @ vs.T)):
        np.testing.assert_allclose(got, np.tril(m) + np.triu(m, 1).T, rtol=10 * rtol, atol=rtol)
    if dtype == "float64":
        sym = a_val + a_val.T
        verify_grad(
            lambda x, y: tt.dot(linalg.eigvalsh(x, y), weights),
            [sym, b_val],
            mode=mode_of(engine),
        )


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_choose_broadcasts_its_choices(engine, dtype, mode):
    # numpy.choose broadcasts the index and a list of choices of different shapes (the
    # list was stacked, which needs equal shapes); the output keeps a length known to be 1.
    a = tt.tensor3("a", dtype="int32")
    b, c = tt.tensor3("b", dtype=dtype), tt.tensor3("c", dtype=dtype)
    av = np.array([0, 1, 3]).reshape(3, 1, 1).astype("int32")
    bv = np.arange(6, dtype=dtype).reshape(1, 6, 1)
    cv = -np.arange(5, dtype=dtype).reshape(1, 1, 5)
    s, col = tt.iscalar("s"), tt.col("col", dtype=dtype)
    outs = [tt.choose(a, [b, c], mode=m) for m in ("wrap", "clip")]
    if mode != "raise":
        outs.append(tt.choose(a, (b, c), mode=mode))
    outs.append(tt.choose(s, col, mode=mode))
    assert outs[-1].broadcastable == (True,)
    f = function([a, b, c, s, col], outs, mode=mode_of(engine))
    colv = np.arange(4, dtype=dtype).reshape(4, 1)
    got = f(av, bv, cv, 3, colv)
    want = [np.choose(av, [bv, cv], mode=m) for m in ("wrap", "clip")]
    if mode != "raise":
        want.append(np.choose(av, (bv, cv), mode=mode))
    want.append(np.choose(3, colv, mode=mode))
    for g, w in zip(got, want):
        assert g.dtype == dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    node = outs[0].owner
    assert inferred_shapes(outs[0], {a: av, b: bv, c: cv}) == [(3, 6, 5)]
    assert type(node.op).__name__ == "ChooseListed"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_choose_gradient_reaches_the_chosen_entries(engine, dtype, mode):
    # The gradient of choose with respect to its choices is the output gradient where
    # each was chosen (summed where broadcast); it was zero.
    av = np.array([[0, 1, 2], [2, 0, 1]], dtype="int32")
    if mode != "raise":
        av = av + np.array([[3], [-3]], dtype="int32")  # out of range on purpose
    a = tt.imatrix("a")
    arr = tt.tensor3("arr", dtype=dtype)
    b, c, d = tt.matrix("b", dtype=dtype), tt.row("c", dtype=dtype), tt.scalar("d", dtype=dtype)
    w = np.arange(1.0, 7.0).reshape(2, 3).astype(dtype)
    cost_arr = (tt.choose(a, arr, mode=mode) * w).sum()
    cost_list = (tt.choose(a, [b, c, d], mode=mode) * w).sum()
    f = function(
        [a, arr, b, c, d], [grad(cost_arr, arr), *grad(cost_list, [b, c, d])], mode=mode_of(engine)
    )
    rng = np.random.default_rng(2)
    vals = [rng.standard_normal(s).astype(dtype) for s in [(3, 2, 3), (2, 3), (1, 3), ()]]
    g_arr, g_b, g_c, g_d = f(av, *vals)
    idx = {"raise": av, "wrap": av % 3, "clip": np.clip(av, 0, 2)}[mode]
    want_arr = np.stack([np.where(idx == k, w, 0) for k in range(3)])
    np.testing.assert_allclose(g_arr, want_arr)
    np.testing.assert_allclose(g_b, np.where(idx == 0, w, 0))
    np.testing.assert_allclose(g_c, np.where(idx == 1, w, 0).sum(axis=0, keepdims=True))
    np.testing.assert_allclose(g_d, np.where(idx == 2, w, 0).sum())
    assert {g.dtype.name for g in (g_arr, g_b, g_c, g_d)} == {dtype}
    if dtype == "float64":
        verify_grad(lambda x: tt.choose(av, x, mode=mode), [vals[0]], mode=mode_of(engine))


@pytest.mark.parametrize("engine", ENGINES)
def test_flatten_keeps_a_merged_length_of_one_broadcastable(engine):
    # The merged dimensions' lengths, when the type knows them, make the output's: all 1
    # gives a broadcastable dimension (it was unknown).
    x = tt.TensorType("float64", shape=(None, 1, 1, 1))("x")
    y = tt.TensorType("float64", shape=(1, None, 1, 1))("y")
    fx, fy = tt.flatten(x, 2), tt.flatten(y, 3)
    assert fx.broadcastable == (False, True) and fy.broadcastable == (True, False, True)
    assert tt.flatten(tt.dtensor4("z"), 2).broadcastable == (False, False)
    xv, yv = np.arange(3.0).reshape(3, 1, 1, 1), np.arange(4.0).reshape(1, 4, 1, 1)
    got = function([x, y], [fx, fy, fx + np.ones((3, 5))], mode=mode_of(engine))(xv, yv)
    for g, w in zip(got, [xv.reshape(3, 1), yv.reshape(1, 4, 1), xv.reshape(3, 1) + 1]):
        np.testing.assert_array_equal(g, np.broadcast_to(w, g.shape))
        assert g.shape == w.shape or g.shape == (3, 5)
    assert got[2].shape == (3, 5)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_flatten_of_an_empty_input_merges_the_lengths(engine, dtype):
    # x.reshape((n, -1)) is ambiguous when n is 0 (numpy refuses it): flatten multiplies
    # the merged lengths instead, and its shape and gradient follow.
    x = tt.tensor4("x", dtype=dtype)
    w = np.arange(12, dtype=dtype).reshape(12, 1)
    flat = tt.flatten(x, 2)
    cost = tt.sum(tt.dot(flat, w))
    f = function([x], [flat, flat.shape, grad(cost, x)], mode=mode_of(engine))
    for xv in (np.zeros((0, 3, 2, 2), dtype), np.ones((2, 3, 2, 2), dtype)):
        got, shape, g = f(xv)
        assert got.shape == tuple(shape) == xv.reshape(len(xv), 12).shape
        np.testing.assert_array_equal(got, xv.reshape(len(xv), 12))
        np.testing.assert_array_equal(g, np.broadcast_to(w[:, 0].reshape(3, 2, 2), xv.shape))
    assert function([x], tt.flatten(x, 3))(np.zeros((2, 0, 4, 5), dtype)).shape == (2, 0, 20)


def test_error_classes_theano_programs_catch():
    # Still ValueErrors, and also the classes Theano raised (which Theano programs catch).
    a, x = tt.dmatrix("a"), tt.dscalar("x")
    for make in (tt.set_subtensor, tt.inc_subtensor):
        with pytest.raises(TypeError, match="more than the 1 of the indexed result"):
            make(a[0], tt.dmatrix("v"))
        with pytest.raises(ValueError, match="more than the 1 of the indexed result"):
            make(a[0], tt.dmatrix("v"))
    for cls in (ValueError, RuntimeError):
        with pytest.raises(cls, match="givens tries to replace 'x'"):
            function([x], x * 2, givens={x: x + 1})


def test_patternbroadcast_with_an_empty_pattern():
    # Theano's: an empty pattern (a scalar's broadcastable) changes nothing; a pattern of
    # another length than the dimensions is still refused.
    m, s = tt.dmatrix("m"), tt.dscalar("s")
    assert tt.patternbroadcast(m, s.broadcastable) is m
    assert tt.patternbroadcast(s, s.broadcastable) is s
    for bad in [(False,), (False,) * 3]:
        with pytest.raises(ValueError, match=f"has {len(bad)} entries"):
            tt.patternbroadcast(m, bad)


def test_an_untrusted_value_under_trust_input_raises_value_error():
    # trust_input skips the conversion: the CPU engine refuses a Python float with an
    # error that is a TypeError and the ValueError Theano programs catch.
    x = tt.dscalar("x")
    f = function([x], x * 2, mode=mode_of("cpu"))
    f.trust_input = True
    assert float(f(np.asarray(2.0))) == 4.0
    for cls in (TypeError, ValueError):
        with pytest.raises(cls, match="has no array value"):
            f(2.0)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_inputs_refused_when_the_graph_is_built(dtype):
    # numpy has no complex floor/ceil/trunc/%/// (it raised when the function ran) and
    # orders complex numbers only lexicographically (clip gave that); Theano refuses
    # them when the graph is built: TypeError, and ComplexError for % and //.
    c = tt.vector("c", dtype=dtype)
    for op in (tt.floor, tt.ceil, tt.trunc):
        with pytest.raises(TypeError, match="defined on real numbers only"):
            op(c)
    with pytest.raises(TypeError, match="complex numbers are not ordered"):
        tt.clip(c, 0, 1)
    for make in (lambda: c % 5, lambda: c // 2):
        with pytest.raises(ts.ComplexError, match="not defined on complex numbers"):
            make()
    # real inputs are as before
    assert tt.ceil(tt.bvector()).dtype == "float32" and (tt.dvector() % 5).dtype == "float64"
    assert tt.clip(tt.ivector(), 0, 1).dtype == "int32"


class _TwoOutputs(Op):
    """x + 1 and x * 2, with a default_output given at construction."""

    __props__ = ("default_output",)

    def __init__(self, default_output=None):
        self.default_output = default_output

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        return Apply(self, [x], [x.type(), x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0] + 1
        output_storage[1][0] = inputs[0] * 2


@pytest.mark.parametrize("engine", ENGINES)
def test_as_tensor_variable_of_a_node_is_its_default_output(engine):
    # Theano's: a node stands for its op's default_output, or its only output; other
    # default_outputs (negative, out of range, a list) and none of several are refused.
    x = tt.dvector("x")
    out = tt.as_tensor_variable(_TwoOutputs(1).make_node(x))
    single = tt.as_tensor_variable((x * 3).owner)
    got = function([x], [out, single], mode=mode_of(engine))(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(got[0], [2.0, 4.0])
    np.testing.assert_array_equal(got[1], [3.0, 6.0])
    for bad in (None, -1, 2, [0, 1]):
        with pytest.raises(ValueError, match="outputs"):
            tt.as_tensor_variable(_TwoOutputs(bad).make_node(x))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("op_class", [SortOp, ArgSortOp])
def test_sort_op_takes_theanos_empty_order(engine, op_class):
    # Theano's SortOp(kind, order): an empty order (a list) is no order, the op sorts
    # along the last axis; a non-empty one names fields tensors do not have.
    a, b = op_class("mergesort", []), op_class("quicksort", [])
    assert a != b and a == op_class("mergesort", []) and a == op_class("mergesort")
    m = tt.dmatrix("m")
    val = np.array([[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]])
    ref = np.sort if op_class is SortOp else np.argsort
    np.testing.assert_array_equal(function([m], a(m), mode=mode_of(engine))(val), ref(val, -1))
    with pytest.raises(ValueError, match="structured"):
        op_class("mergesort", ["f0"])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_gradients_through_tensor_from_scalar_and_back(engine, dtype):
    # TensorFromScalar and ScalarFromTensor pass the gradient through (they raised 'not
    # implemented'); an integer input's gradient is zero (Theano's test_TensorFromScalar)
    # (scalar ops on scalar variables have no gradient of their own: the tensor ops
    # around the conversions carry it)
    t = tt.scalar("t", dtype=dtype)
    cost = tt.exp(tensor_from_scalar(scalar_from_tensor(t))) * 3
    g = grad(cost, t)
    assert g.dtype == dtype and g.ndim == 0
    x = ts.get_scalar_type(dtype)("x")
    gx = grad(tt.sqr(tensor_from_scalar(x)) * 2, x)
    assert gx.type == x.type
    f = function([t, x], [g, tensor_from_scalar(gx)], mode=mode_of(engine))
    got_g, got_gx = f(np.asarray(0.5, dtype=dtype), np.asarray(1.5, dtype=dtype))
    rtol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got_g, 3 * np.exp(0.5), rtol=rtol)
    np.testing.assert_allclose(got_gx, 6.0, rtol=rtol)
    assert got_g.dtype == dtype and got_gx.dtype == dtype
    c56 = ts.constant(56)
    zero = grad(tensor_from_scalar(c56), c56)
    assert float(function([], zero, mode=mode_of(engine))()) == 0.0
    i = tt.lscalar("i")
    zi = grad(tensor_from_scalar(scalar_from_tensor(i)).sum() * 1.0, i)
    assert float(function([i], zi, mode=mode_of(engine))(5)) == 0.0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_a_slice_variable_indexes_as_its_bounds(engine, dtype):
    # x[make_slice(a, b)] (a MakeSlice output, or a SliceConstant) is x[a:b]: it raised
    # AttributeError; a slice that is an input of the function (tt.slicetype()) indexes
    # through AdvancedSubtensor, as in Theano
    x = tt.matrix("x", dtype=dtype)
    i = tt.lscalar("i")
    outs = [
        x[make_slice(1, i)],
        x[:, make_slice(None, None, i)],
        x[make_slice(i, None), 1],
        x[SliceConstant(slicetype, slice(0, 2))],
    ]
    val = np.arange(12, dtype=dtype).reshape(3, 4)
    got = function([x, i], outs, mode=mode_of(engine))(val, -1)
    for g, w in zip(got, [val[1:-1], val[:, ::-1], val[-1:, 1], val[0:2]]):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, w)
    s = slicetype()
    assert isinstance(x[s].owner.op, AdvancedSubtensor)
    f = function([x, s], [x[s], tt.inc_subtensor(x[s], 1), x[s, 1]], mode=mode_of(engine))
    for sv in (slice(1, 3), slice(None, None, -1), slice(-2, None), slice(5, 9)):
        inc = val.copy()
        inc[sv] += 1
        for g, w in zip(f(val, sv), [val[sv], inc, val[sv, 1]]):
            assert g.dtype == dtype
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_slice_variable_gives_its_own_array_not_a_view_of_the_shared_value(engine):
    # x[s] with a slice input is numpy's basic indexing, a view; AdvancedSubtensor declares
    # none, so the caller got the shared variable's own memory: writing into the result
    # changed the shared value (DebugMode: BadViewMap, Theano's test_adv_sub_slice).
    var = shared(np.arange(9.0).reshape(3, 3))
    s = slicetype()
    f = function([s], [var[s], var[s, 1]], mode=mode_of(engine))
    rows, col = f(slice(0, 2))
    assert not np.may_share_memory(rows, var.get_value(borrow=True))
    rows[:] = -5.0
    np.testing.assert_array_equal(var.get_value(), np.arange(9.0).reshape(3, 3))
    np.testing.assert_array_equal(col, [1.0, 4.0])
    g = function([s], var[s] * 2, mode="DebugMode")
    np.testing.assert_array_equal(g(slice(1, None)), np.arange(3.0, 9.0).reshape(2, 3) * 2)
    # the slice a constant once its variable is replaced: the CPU engine indexes inline
    known = clone_replace(var[s], {s: SliceConstant(slicetype, slice(0, 2))})
    assert isinstance(known.owner.op, AdvancedSubtensor)
    rows = function([], known, mode=mode_of(engine))()
    rows[:] = -5.0
    np.testing.assert_array_equal(var.get_value(), np.arange(9.0).reshape(3, 3))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS + ("int32",))
def test_a_composite_applies_to_inputs_of_other_dtypes(engine, dtype):
    # Elemwise(Composite built on float32 scalars) applied to a tensor of another dtype is
    # the same graph made again for that dtype (Theano's); it raised TypeError. Nested
    # composites are made again too, and the values are computed in the new dtype.
    a, b = ts.float32("a"), ts.float32("b")
    inner = ts.Composite([a, b], [a * b])
    s = ts.float32("s")
    outer = ts.Composite([s], [inner(s, s) + 1, s - 1])
    X = tt.matrix("X", dtype=dtype)
    y0, y1 = tt.Elemwise(outer)(X)
    want_dtype = "float32" if dtype == "float32" else "float64"
    assert y0.dtype == dtype or y0.dtype == want_dtype
    val = (np.array([[1.0 + 2.0**-30, 3.0], [-2.0, 0.5]]) * (4 if dtype == "int32" else 1)).astype(
        dtype
    )
    got0, got1 = function([X], [y0, y1], mode=mode_of(engine))(val)
    v = val.astype(y0.dtype)
    assert got0.dtype == y0.dtype and got1.dtype == y1.dtype
    np.testing.assert_array_equal(got0, v * v + 1)
    np.testing.assert_array_equal(got1, val.astype(y1.dtype) - 1)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_list_of_constants_is_a_constant(engine):
    # as_tensor_variable of a list whose elements are constants (tensor or scalar ones)
    # is a TensorConstant, as Theano's (it was a MakeVector of them), of the dtype the
    # stack of them has; a list with a variable in it stays a stack
    cases = [
        ([tt.as_tensor(1), tt.as_tensor(2)], np.array([1, 2], dtype="int8")),
        ([ts.constant(1), ts.constant(2)], np.array([1, 2], dtype="int8")),
        ([tt.as_tensor(1), 2.5], np.array([1.0, 2.5], dtype="float32")),
        ([tt.constant([1.0, 2.0]), [3, 4]], np.array([[1.0, 2.0], [3.0, 4.0]])),
    ]
    for x, want in cases:
        a = tt.as_tensor_variable(x)
        assert isinstance(a, tt.TensorConstant)
        assert a.dtype == want.dtype
        np.testing.assert_array_equal(a.data, want)
        got = function([], a * 2, mode=mode_of(engine))()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want * 2)
    i = tt.iscalar("i")
    v = tt.as_tensor_variable([tt.as_tensor(1), i])
    assert not isinstance(v, tt.TensorConstant)
    np.testing.assert_array_equal(function([i], v, mode=mode_of(engine))(7), [1, 7])


@pytest.mark.parametrize("engine", ENGINES)
def test_broadcast_shape_refuses_lengths_that_do_not_broadcast(engine):
    # broadcast_shape of arrays whose lengths are known only when run: each length is 1
    # or the largest, else AssertionError (it returned the largest silently: (3, 3) for a
    # (2, 3) and a (3, 3) array); lengths known when built that differ raise at once
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    f = function([a, b], list(extra_ops.broadcast_shape(a, b)), mode=mode_of(engine))
    for sa, sb in [((2, 3), (1, 3)), ((2, 3), (2, 1)), ((1, 1), (4, 5)), ((3, 3), (3, 3))]:
        got = [int(v) for v in f(np.zeros(sa), np.zeros(sb))]
        assert got == list(np.broadcast_shapes(sa, sb))
    with pytest.raises(AssertionError, match="dimension 0 cannot broadcast"):
        f(np.zeros((2, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"lengths \[2, 3\] of dimension 0"):
        extra_ops.broadcast_shape((2, 4), (3, 1), arrays_are_shapes=True)
    assert extra_ops.broadcast_shape((3, 4), (3, 1), arrays_are_shapes=True) == (3, 4)


@pytest.mark.parametrize("engine", ENGINES)
def test_broadcast_shape_of_arrays_gives_variables(engine):
    # Theano's contract: every length of the broadcast shape of arrays is a variable, a
    # known one an int64 constant (it was the int 1, which has no .value nor .eval)
    x_tt = tt.as_tensor_variable(np.empty((1, 2, 3)))
    y_tt = tt.as_tensor_variable(np.array(1.0))
    b = extra_ops.broadcast_shape(x_tt, y_tt)
    assert isinstance(b[0], tt.TensorConstant) and b[0].dtype == "int64"
    assert int(b[0].data) == 1
    got = function([], list(b), mode=mode_of(engine))()
    assert [int(v) for v in got] == [1, 2, 3]
    # shapes given as variables, some lengths ints: the ints become constants too
    b = extra_ops.broadcast_shape((1, x_tt.shape[1]), (4, 1), arrays_are_shapes=True)
    assert [int(v.eval()) for v in b] == [4, 2]


@pytest.mark.parametrize("engine", ENGINES)
def test_unravel_index_dims_from_a_shared_vector(engine):
    # unravel_index takes its dims from a shared vector, one output per entry its value
    # has when the graph is built (Theano's rule); a value of another length set later is
    # an error at the call, not outputs dropped. get_vector_length itself refuses a shared
    # vector (its length is not static). An int vector of unknown length is a ValueError
    # (Theano's), a dims that is not a vector a TypeError.
    dims = shared(np.array([3, 4, 5]))
    with pytest.raises(ValueError, match="length"):
        tt.get_vector_length(dims)
    idx = np.array([0, 7, 59])
    f = function([], list(extra_ops.unravel_index(idx, dims)), mode=mode_of(engine))
    for g, w in zip(f(), np.unravel_index(idx, (3, 4, 5))):
        np.testing.assert_array_equal(g, w)
    dims.set_value(np.array([4, 15]))
    with pytest.raises(ValueError, match="dims has 2 entries, but the graph was built for 3"):
        f()
    with pytest.raises(ValueError, match="dims must be a vector of known length"):
        extra_ops.unravel_index(tt.ivector(), tt.ivector())
    with pytest.raises(TypeError, match="dims must be a vector"):
        extra_ops.unravel_index((3, 4), 3)


def test_join_axis_given_as_a_variable():
    # join(axis, ...) with the axis a constant variable makes Join(axis); any other axis
    # variable makes Join(None), the axis its first input (it was a TypeError from int())
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    out = tt.join(tt.constant(1), a, b)
    assert out.owner.op.axis == 1
    va, vb = np.ones((2, 3)), np.zeros((2, 2))
    np.testing.assert_array_equal(out.eval({a: va, b: vb}), np.concatenate([va, vb], 1))
    ax = tt.lscalar("ax")
    out = tt.join(ax, a, b)
    assert out.owner.op.axis is None and out.owner.inputs == [ax, a, b]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "float32"])
def test_arange_of_small_dtypes_does_not_overflow(engine, dtype):
    # arange(-64, 64) was empty: its value and its inferred length computed stop - start
    # in the inputs' dtype (int8), which overflowed; both now match numpy
    assert tt.arange(-64, 64).shape.eval().tolist() == [128]
    start, stop, step = (tt.scalar(n, dtype=dtype) for n in ("start", "stop", "step"))
    out = tt.arange(start, stop, step)
    f = function([start, stop, step], [out, out.shape], mode=mode_of(engine))
    signed = dtype != "uint8"
    cases = [(0, 120, 3), (5, 5, 1), (10, 2, 1)]
    cases += [(-64, 64, 1), (-100, 100, 3), (100, -100, -7), (-128, 127, 1)] if signed else []
    cases += [(0, 250, 3), (10, 255, 7)] if dtype == "uint8" else []
    for args in cases:
        got, shape = f(*[np.asarray(a, dtype=dtype) for a in args])
        want = np.arange(*[int(a) for a in args], dtype=out.dtype)
        assert got.dtype == want.dtype and shape.tolist() == [len(want)]
        np.testing.assert_array_equal(got, want)


def test_rebroadcast_axis_is_a_dict():
    # Theano's Rebroadcast.axis is {dimension: broadcastable}; equal ops hash alike, the
    # mapping is read-only and survives pickling
    x = tt.dmatrix("x")
    op = tt.addbroadcast(x, 0).owner.op
    assert op.axis == {0: True}
    assert op == tt.Rebroadcast((0, True)) and hash(op) == hash(tt.Rebroadcast((0, True)))
    assert tt.Rebroadcast((1, False), (0, True)).axis == {0: True, 1: False}
    with pytest.raises(TypeError, match="read-only"):
        op.axis[1] = True
    assert pickle.loads(pickle.dumps(op)) == op and copy.deepcopy(op).axis == {0: True}


@pytest.mark.parametrize("engine", ENGINES)
def test_default_of_two_variables_chooses_when_run(engine):
    # default(x, y) of two variables was x alone, so function([x, y], default(x, y))
    # refused y as unused (UnusedInputError); it is Theano's Default node now, which
    # returns x, or a copy of y when x's value is None (on the py engine: the others
    # refuse None for an array)
    x, y = tt.dvectors("x", "y")
    out = tt.default(x, y)
    assert isinstance(out.owner.op, tt.Default)
    f = function([x, y], out, mode=mode_of(engine))
    xv, yv = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    got = f(xv, yv)
    np.testing.assert_array_equal(got, xv)
    got[0] = 9.0
    assert xv[0] == 1.0  # the input is protected
    if engine == "py":
        got = f(None, yv)
        np.testing.assert_array_equal(got, yv)
        assert not np.shares_memory(got, yv)
    assert tt.default(None, y) is y
    with pytest.raises(TypeError, match="both arguments must have one type"):
        tt.default(x, tt.fvector("z"))
