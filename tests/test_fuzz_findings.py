"""What the fuzzer found (issue 28's generators: integers, casts, switch, fill/alloc,
constants, large lengths, planned and poisoned values), each shrunk to its smallest graph:
one test per finding, naming the seed and graph that found it and the bug it was. A
finding not yet fixed is marked xfail (strict, so that the test says so once the fix
lands) with the bug in the reason. Issue 28's own reproducers (cases 0 to 6) are tested
beside the code they fix."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import grad
from theano_dag.graph.basic import io_toposort
from theano_dag.testing.fuzz import rsum

needs_opencl = pytest.mark.skipif(not opencl_available()[0], reason="no OpenCL device")

FAST_RUN = Mode(linker="cpu", optimizer="fast_run")
FAST_COMPILE = Mode(linker="cpu", optimizer="fast_compile")


@pytest.mark.parametrize("mode", [FAST_RUN, FAST_COMPILE], ids=["fast_run", "fast_compile"])
def test_abs_of_a_negated_unsigned_integer_wraps_as_numpy(mode):
    # Seed 2, graph 671, shrunk to Recipe(nodes=[("input", ("a", 1), "uint16"),
    # ("neg", (0,), None), ("abs", (1,), None)], ...): numpy's |-5| in uint16 is 65531
    # (-5 wraps); the rewrite local_abs_neg (|-x| -> |x|) gave 5.
    x = tt.TensorType("uint16", shape=(None,))("x")
    f = function([x], abs(-x), mode=mode)
    v = np.array([5, 0, 1], "uint16")
    np.testing.assert_array_equal(f(v), np.abs(-v))


@needs_opencl
@pytest.mark.parametrize(
    "unsigned, signed", [("uint32", "int32"), ("uint64", "int64"), ("uint32", "int8")]
)
def test_opencl_compares_signed_and_unsigned_integers_in_their_common_dtype(unsigned, signed):
    # Seed 77, graph 19 (uint32 < int32(-1) was True) and seed 28028, graphs 9770, 12460,
    # 12530, 15520 (uint32 or uint64 against int8 or int16): OpenCL compared in C's
    # unsigned type, not in the inputs' common dtype (numpy's).
    u = tt.TensorType(unsigned, shape=(None,))("u")
    i = tt.TensorType(signed, shape=(None,))("i")
    f = function([u, i], [tt.lt(u, i), tt.eq(u, i), tt.gt(u, i)], mode=Mode(linker="opencl"))
    uv = np.array([0, 1, np.iinfo(unsigned).max], unsigned)
    iv = np.array([-1, -1, -1], signed)
    got = [np.asarray(g) for g in f(uv, iv)]
    want = [np.less(uv, iv), np.equal(uv, iv), np.greater(uv, iv)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    "engine", ["py", "cpu", "cpu_c", pytest.param("opencl", marks=needs_opencl)]
)
@pytest.mark.parametrize("optimizer", ["fast_run", None])
@pytest.mark.parametrize("signed", ["int64", "int8"])
def test_a_signed_integer_and_a_uint64_compare_exactly(engine, optimizer, signed):
    # fuzz --values wide, seed 15, graph 2210: uint64 2**63 > int64 2**63 - 1 was False.
    # Their common dtype is float64, which rounds both to 2**63; numpy 2 compares them
    # exactly, and so does every engine now (Python's integers are the reference).
    u = tt.TensorType("uint64", shape=(None,))("u")
    i = tt.TensorType(signed, shape=(None,))("i")
    top = np.iinfo(signed).max
    uv = np.array([top + 1, 5, 2**64 - 1, 0, 7, top], "uint64")
    iv = np.array([top, -1, -1, 0, 7, top], signed)
    ops = ["lt", "gt", "le", "ge", "eq", "neq"]
    outs = [getattr(tt, o)(u, i) for o in ops] + [getattr(tt, o)(i, u) for o in ops]
    linker = {"py": "py", "cpu": "cpu", "cpu_c": "cpu", "opencl": "opencl"}[engine]
    with ckernel.compile_mode("sync" if engine == "cpu_c" else "never"):
        f = function([u, i], outs, mode=Mode(linker=linker, optimizer=optimizer))
        got = [np.asarray(g).tolist() for g in f(uv, iv)]
    pairs = [(int(a), int(b)) for a, b in zip(uv, iv)]
    py_ops = {
        "lt": lambda a, b: a < b,
        "gt": lambda a, b: a > b,
        "le": lambda a, b: a <= b,
        "ge": lambda a, b: a >= b,
        "eq": lambda a, b: a == b,
        "neq": lambda a, b: a != b,
    }
    want = [[py_ops[o](a, b) for a, b in pairs] for o in ops]
    want += [[py_ops[o](b, a) for a, b in pairs] for o in ops]
    assert got == want


@pytest.mark.parametrize("engine", ["cpu_c", pytest.param("opencl", marks=needs_opencl)])
@pytest.mark.parametrize("signed, unsigned", [("int32", "uint64"), ("int8", "uint32")])
def test_switch_of_a_signed_and_an_unsigned_branch_keeps_the_signed_values(
    engine, signed, unsigned
):
    # Seed 7, graph 260 (switch(c, int32, uint64) is float64) and seed 28028, graphs 5485,
    # 8000, 8490, 14180 (switch(c, int8, uint32) is int64): Switch's C expression
    # (c ? x : y) converted the signed branch to the unsigned one's type by C's rules
    # before the result's dtype, in the C kernels and OpenCL: -5 -> 2**64 - 5.
    c = tt.TensorType("bool", shape=(None,))("c")
    i = tt.TensorType(signed, shape=(None,))("i")
    u = tt.TensorType(unsigned, shape=(None,))("u")
    mode = Mode(linker="opencl") if engine == "opencl" else FAST_RUN
    cv = np.array([1, 0, 1], bool)
    iv, uv = np.array([-5, 3, 7], signed), np.arange(3, dtype=unsigned)
    with ckernel.compile_mode("sync"):
        f = function([c, i, u], tt.switch(c, i, u), mode=mode)
        got = np.asarray(f(cv, iv, uv))
    np.testing.assert_array_equal(got, np.where(cv, iv, uv))  # [-5, 1, 7]


@needs_opencl
def test_opencl_inc_subtensor_of_bools_stays_bool():
    # Seed 7, graph 800 (maximum(l, inc_subtensor(b[1:], s)) read a 2): OpenCL's
    # IncSubtensor of a bool array added as integers, True += True stored 2.
    b = tt.TensorType("bool", shape=(None,))("b")
    s = tt.TensorType("bool", shape=())("s")
    f = function([b, s], tt.inc_subtensor(b[1:], s) + 0, mode=Mode(linker="opencl"))
    bv = np.array([True, True, False])
    want = bv.copy()
    want[1:] += True
    np.testing.assert_array_equal(np.asarray(f(bv, np.array(True))), want.astype("int8"))


@needs_opencl
def test_opencl_float32_tanh_of_an_infinity_is_one():
    # Seed 28028, graph 17830: a shared float32 updated to tanh(x + sum(log(b))) =
    # tanh(-inf), then cast to int16: numpy -1, OpenCL 0, as PoCL's float32 tanh gave
    # +-0.99999994 at +-inf (the OpenCL C spec's edge case says +-1).
    x = tt.fvector("x")
    f = function([x], [tt.tanh(x), tt.cast(tt.tanh(x), "int16")], mode=Mode(linker="opencl"))
    xv = np.array([-np.inf, np.inf], "float32")
    got, as_int = (np.asarray(g) for g in f(xv))
    np.testing.assert_array_equal(got, [-1.0, 1.0])
    np.testing.assert_array_equal(as_int, [-1, 1])


@needs_opencl
def test_opencl_float_modulo_of_zero_keeps_the_divisors_sign():
    # Seed 28030, graph 4630 (shrunk: cast(x * 300, int32) / (x % x)).
    x = tt.dvector("x")
    f = function([x], [x % x, 1 / (x % x)], mode=Mode(linker="opencl"))
    xv = np.array([-0.5, 0.5, -3.0, 2.0])
    got = [np.asarray(g) for g in f(xv)]
    np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(np.mod(xv, xv)))
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(got[1], 1 / np.mod(xv, xv))


@needs_opencl
def test_opencl_abs_of_the_most_negative_int64_wraps_as_numpy():
    # Seed 28030, graph 7540 (shrunk: abs(x) // x, x int64 with its extremes).
    x = tt.lvector("x")
    f = function([x], abs(x) // x, mode=Mode(linker="opencl"))
    info = np.iinfo("int64")
    xv = np.array([info.min, info.max, -7, 7])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.asarray(f(xv)), np.abs(xv) // xv)  # [1, 1, -1, 1]


def test_a_sum_over_no_axis_keeps_a_negative_zero_on_every_engine():
    # Seed 52525, graph 111, shrunk to v0 / sum(-0.0): every engine keeps the sum of a
    # 0-d -0.0 as -0.0 (True / -0.0 is -inf); the fuzzer's reference took numpy's
    # np.sum, which adds it to +0.0. The engines' rule is the reference's now.
    assert np.signbit(rsum(np.asarray(-0.0), None, "float64"))
    v = tt.TensorType("bool", shape=(1, None))("v")
    out = v / tt.constant(np.asarray(-0.0, "float64")).sum()
    want = np.array([[True, False]]) / rsum(np.asarray(-0.0), None, "float64")
    for mode in (Mode(linker="py", optimizer=None), FAST_RUN):
        with np.errstate(all="ignore"):
            got = function([v], out, mode=mode)(np.array([[True, False]]))
        np.testing.assert_array_equal(got, want)


ENGINE_MODES = {
    "py": Mode(linker="py", optimizer=None),
    "cpu": FAST_RUN,
    "cpu_c": FAST_RUN,
    "opencl": Mode(linker="opencl"),
}
EVERY_ENGINE = ["py", "cpu", "cpu_c", pytest.param("opencl", marks=needs_opencl)]


def _compiled(engine, inputs, outputs):
    """``function(inputs, outputs)`` on ``engine`` (``cpu_c``: its C kernels built first)."""
    if engine == "cpu_c":
        with ckernel.compile_mode("sync"):
            return function(inputs, outputs, mode=FAST_RUN)
    return function(inputs, outputs, mode=ENGINE_MODES[engine])


@pytest.mark.parametrize("engine", EVERY_ENGINE)
def test_integer_powers_wrap_as_numpy_and_a_negative_exponent_raises_on_every_engine(engine):
    # Found by the fuzzer's ipow: OpenCL computed an integer power through double
    # and cast it back: 3 ** 39 in int64 lost its low bits (...256 for ...267), (2**62)**2
    # gave the minimum, not numpy's wrapped 0, and 0 ** -1 gave a value where numpy and
    # the CPU engine raise. Integer powers are numpy's on every engine now.
    x, y = tt.lvector("x"), tt.lvector("y")
    f = _compiled(engine, [x, y], [x**y, (x + 1) ** 2])
    xv = np.array([3, 2**62, -19, 7, 100], "int64")
    yv = np.array([39, 2, 3, 22, 0], "int64")
    got = [np.asarray(g) for g in f(xv, yv)]
    np.testing.assert_array_equal(got[0], xv**yv)
    np.testing.assert_array_equal(got[1], (xv + 1) ** 2)
    with pytest.raises(ValueError, match="negative integer powers"):
        f(np.array([2, 0], "int64"), np.array([1, -1], "int64"))


@pytest.mark.parametrize("engine", EVERY_ENGINE)
def test_a_sum_or_product_into_a_small_integer_dtype_wraps_in_it_on_every_engine(engine):
    # Found by the fuzzer's sumd: sum(b, axis=1, dtype="int32") of a bool matrix
    # was int64 on the CPU engine (its step called numpy's add.reduce, which sums int8
    # and int32 arrays into int64), and sum(x, dtype="int8") of four int8 100s was 400, not
    # numpy's wrapped -112.
    x = tt.TensorType("int8", shape=(None, None))("x")
    b = tt.TensorType("bool", shape=(None, None))("b")
    outs = [
        x.sum(axis=1, dtype="int8"),
        b.sum(axis=1, dtype="int32"),
        tt.prod(x, axis=0, dtype="int8"),
        (x * 2).sum(axis=1, dtype="int8"),
        x.sum(axis=1, dtype="int32"),
    ]
    xv, bv = np.full((3, 4), 100, "int8"), np.ones((3, 4), bool)
    want = [
        xv.sum(axis=1, dtype="int8"),
        bv.sum(axis=1, dtype="int32"),
        np.prod(xv, axis=0, dtype="int8"),
        (xv * 2).sum(axis=1, dtype="int8"),
        xv.sum(axis=1, dtype="int32"),
    ]
    for g, w in zip(_compiled(engine, [x, b], outs)(xv, bv), want):
        assert np.asarray(g).dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), w)


@pytest.mark.parametrize("engine", EVERY_ENGINE)
def test_the_mean_of_large_integers_adds_them_in_float64_on_every_engine(engine):
    # Found by the fuzzer's mean: the mean of int64 or uint64 values near their
    # extremes summed them in the integer (Theano's mean), which wrapped: the mean of
    # [2**62, 2**62] was -2**62. numpy's mean adds integers in float64; so does ours.
    x = tt.lmatrix("x")
    u = tt.TensorType("uint64", shape=(None,))("u")
    f = _compiled(engine, [x, u], [tt.mean(x), tt.mean(x, axis=0), tt.mean(u)])
    xv = np.array([[2**62, 2**62], [2**62, -(2**62)], [3, 2**63 - 1]], "int64")
    uv = np.array([2**64 - 1, 2**63, 5], "uint64")
    got = [np.asarray(g) for g in f(xv, uv)]
    for g, w in zip(got, [np.mean(xv), np.mean(xv, axis=0), np.mean(uv)]):
        assert g.dtype == "float64"
        np.testing.assert_allclose(g, w, rtol=1e-12)


def _numeric_grad(f, values, k, eps=1e-6):
    """Central differences of the scalar ``f(*values)`` with respect to ``values[k]``."""
    v = np.array(values[k], dtype="float64")
    num = np.zeros_like(v)
    for i in np.ndindex(v.shape):
        up = [np.array(a, dtype="float64") for a in values]
        down = [np.array(a, dtype="float64") for a in values]
        up[k][i] += eps
        down[k][i] -= eps
        num[i] = (f(*up) - f(*down)) / (2 * eps)
    return num


@pytest.mark.parametrize("index", ["rows", "rows_and_columns"])
def test_the_gradient_of_a_set_at_repeated_indices_counts_each_position_once(index):
    # Seed 3, gradient graph 50, shrunk to set_subtensor(x[[4, 0, 4, 0, -2] % len(x)],
    # sum(x)): the gradient wrt the value set was the sum of the output gradient over
    # every index, repeats included (Theano's); a repeated position holds the value once
    # (the last write), so only that one carries its gradient.
    m, y, v = tt.dmatrix("m"), tt.dscalar("y"), tt.dvector("v")
    rows = tt.constant(np.array([4, 0, 4, 0, -2]))
    if index == "rows":
        out = tt.set_subtensor(m[rows], y) + tt.set_subtensor(m[rows[:3]], v[:3, None])
    else:
        cols = tt.constant(np.array([1, 1, 0, 1, 2]))
        out = tt.set_subtensor(m[rows, cols], y) + tt.set_subtensor(m[rows, cols], v)
    cost = (out**2 * np.arange(1.0, 4.0)).sum()
    values = [np.linspace(-1, 1, 15).reshape(5, 3), 0.7, np.array([0.5, -2.0, 1.5, 3.0, 1.0])]
    f = function([m, y, v], cost)
    got = function([m, y, v], grad(cost, [m, y, v]))(*values)
    for k, g in enumerate(got):
        np.testing.assert_allclose(g, _numeric_grad(f, values, k), rtol=1e-6, atol=1e-6)


def test_the_gradient_through_a_product_of_booleans_is_zero():
    # Seed 3, gradient graphs 3 and 56: tensordot and batched_dot of bool values (x <=
    # 0.5, isnan(m)) raised TypeError: Einsum's zero gradient for a bool input was cast
    # to bool.
    x, m = tt.dvector("x"), tt.dmatrix("m")
    b = tt.le(x, 0.5)
    cost = (
        tt.tensordot(b, b, axes=[[0], [0]])
        + tt.batched_dot(tt.isnan(m), tt.isnan(m)).sum()
        + tt.tensordot(b, x, axes=1)
    )
    gx, gm = function([x, m], grad(cost, [x, m]))(np.array([0.1, 0.9, 0.3]), np.ones((2, 3)))
    np.testing.assert_array_equal(gx, [1.0, 0.0, 1.0])  # d/dx of b . x is b
    np.testing.assert_array_equal(gm, np.zeros((2, 3)))


@pytest.mark.parametrize("engine", EVERY_ENGINE)
def test_a_sum_over_length_one_axes_passes_through_a_narrower_accumulator(engine):
    # Found by the fuzzer's suma: sum(x, axis=0, acc_dtype="int16") of a (1, n)
    # int32 x, and the sum of a 0-d int64 with acc_dtype="uint32", were x itself once
    # local_useless_reduce dropped the reduction; the reference engine wraps the one
    # element in the accumulator first (100000 -> -31072, -9 -> 4294967287).
    row = tt.TensorType("int32", shape=(1, None))("row")
    s = tt.lscalar("s")
    outs = [
        row.sum(axis=0, acc_dtype="int16"),
        s.sum(acc_dtype="uint32"),
        row.sum(acc_dtype="int8"),
    ]
    rv, sv = np.array([[100000, -7, 300]], "int32"), np.int64(-9)
    want = [
        np.sum(rv, axis=0, dtype="int16").astype("int64"),
        np.asarray(sv).astype("uint32").astype("int64"),
        np.asarray(np.sum(rv, dtype="int8")).astype("int64"),
    ]
    for g, w in zip(_compiled(engine, [row, s], outs)(rv, sv), want):
        assert np.asarray(g).dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), w)


@pytest.mark.parametrize("engine", EVERY_ENGINE)
@pytest.mark.parametrize(
    "build, shape",
    [
        (lambda m: tt.max(m, axis=0), (0, 3)),
        (lambda m: tt.min(m), (0, 0)),
        (lambda m: tt.max(m, axis=1), (3, 0)),
    ],
    ids=["max", "min", "max-rows"],
)
def test_a_maximum_over_an_empty_axis_raises_on_every_engine(engine, build, shape):
    # Found by probing the fuzzer's new reductions with empty values: OpenCL gave
    # the kernel's identity (-inf) as max over a length-0 axis, where numpy and the
    # other engines raise.
    m = tt.dmatrix("m")
    f = _compiled(engine, [m], build(m))
    with pytest.raises(ValueError, match="zero-size array"):
        f(np.zeros(shape))


@pytest.mark.parametrize("engine", EVERY_ENGINE)
def test_labels_out_of_range_of_a_cross_entropy_raise_numpys_and_theanos_error(engine):
    # Found by a probe of rewrites against the written form: -log(softmax(x))[rows, y]
    # with a label past the last class raises numpy's IndexError as written, but the
    # fused cross-entropy op it is rewritten to raised a ValueError (Theano's). The
    # error is now both. A label below 0 is refused as in Theano (numpy's indexing would
    # read -1 as the last class: a label of -1 often marks an example to leave out).
    x, y = tt.dmatrix("x"), tt.lvector("y")
    rows = tt.arange(y.shape[0])
    nll = -tt.log(tt.nnet.softmax(x))[rows, y]
    cce = tt.nnet.categorical_crossentropy(tt.nnet.softmax(x), y)
    g = grad(tt.sum(nll), x)
    xv = np.random.default_rng(3).standard_normal((3, 4))
    ref = function([x, y], [nll, cce, g], mode=Mode(linker="py", optimizer=None))
    f = _compiled(engine, [x, y], [nll, cce, g])
    for got, want in zip(f(xv, np.array([0, 3, 2])), ref(xv, np.array([0, 3, 2]))):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # (the reference engine runs the written indexing itself: numpy's semantics)
    for out in (cce,) if engine == "py" else (nll, cce, g):
        h = _compiled(engine, [x, y], out)
        for bad in (np.array([0, 4, 1]), np.array([0, -1, 1])):
            for error in (IndexError, ValueError):
                with pytest.raises(error, match=r"out of (range|bounds)"):
                    h(xv, bad)


@pytest.mark.parametrize("engine", EVERY_ENGINE)
def test_the_fused_cross_entropy_ops_refuse_negative_labels_as_theanos(engine):
    # Theano's own tests (test_nnet.py's test_neg_idx): the fused ops, called directly,
    # raise ValueError for a label below 0; only the rewrites count it from the end.
    x, b, y, dy = tt.dmatrix("x"), tt.dvector("b"), tt.lvector("y"), tt.dvector("dy")
    xv, bv, yv = np.random.default_rng(4).random((3, 5)), np.zeros(5), np.array([0, -1, 2])
    smv = np.exp(xv) / np.exp(xv).sum(axis=1, keepdims=True)
    f = _compiled(engine, [x, b, y], tt.nnet.CrossentropySoftmaxArgmax1HotWithBias()(x, b, y))
    g = _compiled(engine, [dy, x, y], tt.nnet.CrossentropySoftmax1HotWithBiasDx()(dy, x, y))
    with pytest.raises(ValueError, match=r"class index out of range \[0, 5\)"):
        f(xv, bv, yv)
    with pytest.raises(ValueError, match=r"class index out of range \[0, 5\)"):
        g(np.ones(3), smv, yv)


def _lse_np(v, axis, keepdims=False):
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(v), axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("engine", EVERY_ENGINE)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (0, 0), (1000, 0)])
def test_stable_forms_over_an_empty_axis_give_what_the_written_form_gives(engine, dtype, shape):
    # Found by a probe of the stabilize rewrites with empty values: log(sum(exp(x)))
    # over an axis of length 0 is -inf in numpy, but its stable form took the max of
    # nothing and raised; exp(x) / sum(exp(x)) of rows of no entries is an empty array,
    # but the softmax it is rewritten to raised too. The shift is a Max with
    # empty_identity now, and the softmaxes of empty lanes are empty.
    m = tt.matrix("m", dtype=dtype)
    e = tt.exp(m)
    outs = [
        tt.log(tt.sum(e, axis=1)),
        tt.log(tt.sum(e, axis=0, keepdims=True)),
        tt.log(tt.sum(e)),
        tt.logsumexp(m, axis=1),
        e / tt.sum(e, axis=1, keepdims=True),
        m - tt.log(tt.sum(e, axis=1, keepdims=True)),
        tt.nnet.softmax(m),
        tt.nnet.logsoftmax(m),
        grad(tt.sum(tt.logsumexp(m, axis=1)), m),
    ]
    v = np.zeros(shape, dtype)
    with np.errstate(invalid="ignore"):
        want = [
            _lse_np(v, 1),
            _lse_np(v, 0, True),
            _lse_np(v, None),
            _lse_np(v, 1),
            v / np.sum(v, axis=1, keepdims=True),
            v - _lse_np(v, 1, True),
            v.copy(),
            v.copy(),
            v.copy(),
        ]
    for k, (g, w) in enumerate(zip(_compiled(engine, [m], outs)(v), want)):
        assert g.dtype == w.dtype and g.shape == w.shape, k
        np.testing.assert_array_equal(g, w, err_msg=str(k))


@pytest.mark.parametrize("engine", EVERY_ENGINE)
def test_reading_back_rows_set_at_indices_of_both_signs_gives_the_last_writes(engine):
    # local_adv_sub1_adv_inc_sub1 made set_subtensor(x[i], y)[i] into y for a constant
    # i of distinct entries; 0 and -3 are distinct but name one row of a 3-row x, which
    # holds the last write, so the read-back is not y (found checking the gradient
    # above at i = [0, -3]).
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    rows = tt.constant(np.array([0, -3]))
    f = _compiled(engine, [x, y], tt.set_subtensor(x[rows], y)[rows])
    xv, yv = np.zeros((3, 3)), np.arange(6.0).reshape(2, 3)
    want = xv.copy()
    want[[0, -3]] = yv
    np.testing.assert_array_equal(f(xv, yv), want[[0, -3]])


@pytest.mark.parametrize(
    "index", [[2, 0], [0, -3], "mask", "tril"], ids=["distinct", "signs", "mask", "tril"]
)
def test_the_gradient_of_a_set_at_indices_known_distinct_needs_no_mask(index):
    # Constant rows of one sign, all distinct, and boolean masks name each position once:
    # the gradient wrt the value set is the read-back of the output gradient, with no
    # graph of last writes; other constant indices (0 and -3 of 3 rows: one row) keep it.
    x = tt.dmatrix("x")
    if index == "mask":
        y = tt.dvector("y")
        out = tt.set_subtensor(x[x > 0], y)
    elif index == "tril":
        y = tt.dvector("y")
        out = tt.set_subtensor(x[np.tril_indices(3)], y)
    else:
        y = tt.dmatrix("y")
        out = tt.set_subtensor(x[tt.constant(np.array(index))], y)
    cost = (out * np.arange(1.0, 10.0).reshape(3, 3)).sum()
    g = grad(cost, y)
    ops = {type(n.op).__name__ for n in io_toposort([x, y], [g])}
    assert ("Alloc" in ops) == (index in ([0, -3], "tril")), ops
    xv = np.array([[1.0, -1.0, 2.0], [-2.0, 3.0, -3.0], [4.0, -4.0, 5.0]])
    if index in ("mask", "tril"):
        yv = np.linspace(-1, 1, 5 if index == "mask" else 6)
    else:
        yv = np.linspace(-1, 1, 6).reshape(2, 3)
    f = function([x, y], cost)
    got = function([x, y], g)(xv, yv)
    np.testing.assert_allclose(got, _numeric_grad(f, [xv, yv], 1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("optimizer", [None, "fast_run"])
def test_a_numpy_step_keeps_a_constant_of_another_dtype_typed(optimizer):
    # Seed 52, graph 78, shrunk to Recipe(nodes=[("input", (1, "b"), "float64"),
    # ("const", (), (0, "uint16")), ("const", (), (-1.0, "float32")), ("fill", (0, 1)),
    # ("true_div", (2, 3))], ...): without a C compiler, the numpy step passed the float32
    # constant as a Python float, which over uint16 integers divides in float64 (NEP 50):
    # the function returned float64 where the graph says float32. A one-element constant
    # is a Python number now only where every input computes in one dtype.
    u = tt.TensorType("uint16", shape=(1, None))("u")
    x = tt.TensorType("float64", shape=(1, None))("x")
    cases = [
        ([u], tt.true_div(tt.constant(np.float32(-1.0)), u)),
        ([x], tt.true_div(tt.constant(np.float32(-1.0)), tt.fill(x, np.uint16(0)))),
        ([u], tt.neg(tt.true_div(tt.constant(np.float32(1.0)), u))),
        ([u], tt.lt(u, tt.constant(np.int64(300)))),
    ]
    value = {"uint16": np.array([[0, 1, 2, 3, 65535]], "uint16"), "float64": np.zeros((1, 5))}
    with theano_dag.config.change_flags(cxx=""):
        for ins, out in cases:
            f = function(ins, out, mode=Mode(linker="cpu", optimizer=optimizer))
            v = value[ins[0].dtype]
            got = f(v)
            ref = function(ins, out, mode=Mode(linker="py", optimizer=None))(v)
            assert got.dtype == out.dtype == ref.dtype, (out, got.dtype)
            np.testing.assert_array_equal(got, ref)
