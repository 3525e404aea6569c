"""Specialization rewrites: powers, squares, Adagrad and FMA fusion (Owl), BLAS calls."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.native import ckernel
from theano_dag.graph.fg import FunctionGraph
from theano_dag.printing import debugprint
from theano_dag.tensor.blas import Gemm, Gemv, dot22, gemm_no_inplace, gemv_no_inplace, ger
from theano_dag.tensor.fused import Adagrad

from .rewrite_helpers import apply_dbs, check, ops_of

rng = np.random.default_rng(3)
FAST_RUN_PY = Mode(linker="py", optimizer="fast_run")


def f64(v):
    return tt.constant(np.float64(v))


def specialize(fg):
    return apply_dbs(fg, "specialize")


def test_powers_become_cheaper_ops():
    x = tt.dvector("x")
    check(
        [x],
        [x ** f64(2), x ** f64(-1), x ** f64(1), x ** f64(2.5), x ** f64(0.5), x ** f64(-0.5)],
        [
            tt.sqr(x),
            tt.reciprocal(x),
            x,
            x ** tt.constant(np.array([2.5])),  # integers >= 3: products (below)
            tt.sqrt(x),
            tt.reciprocal(tt.sqrt(x)),
        ],
        [rng.uniform(0.5, 2, size=4)],
        specialize,
    )


def test_power_zero_is_ones_of_the_shape():
    x = tt.dmatrix("x")
    fg = check([x], [x ** f64(0)], None, [rng.normal(size=(2, 3))], specialize)
    assert "pow" not in " ".join(ops_of(fg))


def test_integer_powers_stay_integers():
    i = tt.lvector("i")
    two = tt.constant(np.array([2], dtype="int8"))
    fg = check([i], [i**2], [i**two], [np.array([3, -4])], specialize)
    assert fg.outputs[0].dtype == "int64"


def test_sqrt_rewrite_is_nonfinite_unsafe():
    # pow(-inf, 0.5) is inf, sqrt(-inf) is NaN: excluding nonfinite_unsafe keeps pow
    x = tt.dvector("x")
    fg = apply_dbs(FunctionGraph([x], [x ** f64(0.5)]), "specialize", exclude=["nonfinite_unsafe"])
    assert ops_of(fg) == ["Elemwise{pow,no_inplace}"]


def test_mul_self_is_sqr():
    x = tt.dvector("x")
    check([x], [x * x], [tt.sqr(x)], [rng.normal(size=3)], specialize)


def adagrad_graph():
    acc, g, w = tt.dvector("acc"), tt.dvector("g"), tt.dvector("w")
    new_acc = acc + g * g
    new_w = w - 0.1 * g / tt.sqrt(new_acc + 1e-8)
    return [acc, g, w], [new_w, new_acc]


def test_adagrad_update_is_one_fused_node():
    inputs, outputs = adagrad_graph()
    acc, g, w = inputs
    args = [rng.uniform(0, 1, size=5), rng.normal(size=5), rng.normal(size=5)]
    fg = check(inputs, outputs, None, args, lambda fg: apply_dbs(fg, "canonicalize", "specialize"))
    ada = [n for n in fg.apply_nodes if isinstance(n.op, Adagrad)]
    assert len(ada) == 1 and ada[0].op.eps == 1e-8
    assert ada[0].inputs == [acc, g]
    assert fg.outputs[1] is ada[0].outputs[0]  # the accumulator update comes from it too
    assert not any(n.op == tt.sqrt for n in fg.apply_nodes)


def test_adagrad_with_the_square_written_inline_and_in_a_function():
    acc, g = tt.dvector("acc"), tt.dvector("g")
    step = g / tt.sqrt(acc + tt.sqr(g) + 1e-6)
    fg = check(
        [acc, g],
        [step],
        [Adagrad(1e-6)(acc, g)[1]],
        [rng.uniform(0, 1, size=4), rng.normal(size=4)],
        lambda fg: apply_dbs(fg, "canonicalize", "specialize"),
    )
    # through function() and FAST_RUN: the same node, and the same values
    f = theano_dag.function([acc, g], step, mode=FAST_RUN_PY)
    assert any(isinstance(n.op, Adagrad) for n in f.maker.fgraph.apply_nodes)
    assert fg is not None


def test_not_adagrad_when_the_numerator_is_another_gradient():
    acc, g, h = tt.dvector("acc"), tt.dvector("g"), tt.dvector("h")
    fg = apply_dbs(FunctionGraph([acc, g, h], [h / tt.sqrt(acc + g * g + 1e-8)]), "specialize")
    assert not any(isinstance(n.op, Adagrad) for n in fg.apply_nodes)


def test_fma():
    a, b, c, d = (tt.dvector(n) for n in "abcd")
    check(
        [a, b, c, d],
        [a * b + c, a * b * d + c, c + a * b + d, c + d + b * a],
        [tt.fma(a, b, c), tt.fma(a * b, d, c), tt.fma(a, b, c) + d, tt.fma(b, a, c + d)],
        [rng.normal(size=3) for _ in range(4)],
        lambda fg: apply_dbs(fg, "fma"),
    )


def test_fma_leaves_shared_products_and_mixed_dtypes():
    a, b, c = (tt.dvector(n) for n in "abc")
    i = tt.ivector("i")
    p = a * b
    fg = apply_dbs(FunctionGraph([a, b, c, i], [p + c, p, i * i + c]), "fma")
    assert not any(n.op == tt.fma for n in fg.apply_nodes)


def test_fast_run_golden_debugprint():
    # a*b + c fused into FMA, then into one elementwise loop with the exp
    a, b, c = (tt.dvector(n) for n in "abc")
    f = theano_dag.function([a, b, c], tt.exp(a * b + c), mode=FAST_RUN_PY)
    assert debugprint(f.maker.fgraph, file="str") == (
        "Elemwise{Composite{exp(fma(i0, i1, i2))},no_inplace} [id A] 0\n"
        " |a [id B]\n"
        " |b [id C]\n"
        " |c [id D]"
    )


# -- BLAS ----------------------------------------------------------------------------


def blas(fg):
    return apply_dbs(fg, "blas")


def mats(*names):
    return [tt.dmatrix(n) for n in names]


def test_gemm_forms():
    z, x, y = mats("z", "x", "y")
    args = [rng.normal(size=(2, 3)), rng.normal(size=(2, 4)), rng.normal(size=(4, 3))]
    one = tt.constant(np.float64(1))
    check([z, x, y], [z + tt.dot(x, y)], [gemm_no_inplace(z, one, x, y, one)], args, blas)
    minus_one = tt.constant(np.float64(-1))  # the scales are folded into constants
    check([z, x, y], [tt.dot(x, y) - z], [gemm_no_inplace(z, one, x, y, minus_one)], args, blas)
    check([z, x, y], [2.0 * z + tt.dot(x, y) * 0.5], None, args, blas)
    fg = check([z, x, y], [z - 3.0 * tt.dot(x, y)], None, args, blas)
    assert ops_of(fg)[-1] == "Gemm{no_inplace}"


# A Gemm or Gemv whose b is 0 never reads z (as BLAS): b*z taken into b is nonfinite_unsafe.
SAFE_MODES = {
    "fast_run": get_mode("FAST_RUN").excluding("nonfinite_unsafe"),
    "py": FAST_RUN_PY.excluding("nonfinite_unsafe"),
}


def _blas_nodes(f, cls):
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, cls)]


def _nonfinite_z(shape):
    z = np.full(shape, np.nan)
    z.flat[0], z.flat[1] = np.inf, -np.inf
    return z


@pytest.mark.parametrize("mode", SAFE_MODES)
def test_zero_times_z_plus_a_dot_keeps_the_nan_of_z_without_nonfinite_unsafe(mode):
    # issue 28, case 6: 0 * z + a * dot(x, y) became Gemm(z, a, x, y, 0), which never
    # reads z: an inf or NaN there gave a finite number, numpy NaN.
    z, x, y = mats("z", "x", "y")
    a = tt.dscalar("a")
    out = 0 * z + a * tt.dot(x, y)
    zv, xv, yv = _nonfinite_z((3, 4)), rng.normal(size=(3, 5)), rng.normal(size=(5, 4))
    with np.errstate(invalid="ignore"):
        want = 0 * zv + 2.0 * (xv @ yv)
    assert np.isnan(want).all()
    f = theano_dag.function([z, a, x, y], out, mode=SAFE_MODES[mode])
    np.testing.assert_array_equal(f(zv, 2.0, xv, yv), want)
    # still one Gemm: 0 * z is its accumulator, with b = 1
    (gemm,) = _blas_nodes(f, Gemm)
    assert tt.get_scalar_constant_value(gemm.inputs[4]) == 1
    zf = np.ones((3, 4))
    np.testing.assert_allclose(f(zf, 2.0, xv, yv), 2.0 * (xv @ yv))


def test_zero_times_z_plus_a_dot_is_a_gemm_with_b_zero_in_fast_run():
    # The rule stays in the default mode: there x * 0 -> 0 (nonfinite_unsafe too) goes
    # first, and without it the gemm rules make Gemm(z, a, x, y, 0).
    z, x, y = mats("z", "x", "y")
    a = tt.dscalar("a")
    out = 0 * z + a * tt.dot(x, y)
    zv, xv, yv = _nonfinite_z((3, 4)), rng.normal(size=(3, 5)), rng.normal(size=(5, 4))
    for mode in (None, FAST_RUN_PY):
        f = theano_dag.function([z, a, x, y], out, mode=mode)
        np.testing.assert_allclose(f(zv, 2.0, xv, yv), 2.0 * (xv @ yv))
    f = theano_dag.function(
        [z, a, x, y], out, mode=get_mode("FAST_RUN").excluding("local_mul_zero")
    )
    (gemm,) = _blas_nodes(f, Gemm)
    assert gemm.inputs[0] is f.maker.fgraph.inputs[0]
    assert tt.get_scalar_constant_value(gemm.inputs[4]) == 0
    np.testing.assert_allclose(f(zv, 2.0, xv, yv), 2.0 * (xv @ yv))


@pytest.mark.parametrize("mode", SAFE_MODES)
def test_a_variable_b_of_a_gemm_or_gemv_keeps_the_nan_of_z_without_nonfinite_unsafe(mode):
    # b * z + a * dot(x, y) at b = 0 is NaN where z is; Gemm(z, a, x, y, b) drops it.
    z, x, y = mats("z", "x", "y")
    v, w = tt.dvector("v"), tt.dvector("w")
    a, b = tt.dscalar("a"), tt.dscalar("b")
    outs = [b * z + a * tt.dot(x, y), a * tt.dot(x, w) - b * v]
    zv, xv, yv = _nonfinite_z((3, 4)), rng.normal(size=(3, 5)), rng.normal(size=(5, 4))
    vv, wv = _nonfinite_z(3), rng.normal(size=5)
    args = (zv, xv, yv, vv, wv, 2.0, 0.0)
    ins = [z, x, y, v, w, a, b]
    with np.errstate(invalid="ignore"):
        want = [0.0 * zv + 2.0 * (xv @ yv), 2.0 * (xv @ wv) - 0.0 * vv]
    safe = theano_dag.function(ins, outs, mode=SAFE_MODES[mode])
    for g, wnt in zip(safe(*args), want):
        np.testing.assert_array_equal(g, wnt)
    assert len(_blas_nodes(safe, Gemm)) == 1 and len(_blas_nodes(safe, Gemv)) == 1
    # the default mode takes b into the calls (and gives the finite a * dot there)
    fast = theano_dag.function(ins, outs, mode=None if mode == "fast_run" else FAST_RUN_PY)
    (gemm,) = _blas_nodes(fast, Gemm)
    (gemv,) = _blas_nodes(fast, Gemv)
    fz, fv = fast.maker.fgraph.inputs[0], fast.maker.fgraph.inputs[3]
    assert gemm.inputs[0] is fz and gemv.inputs[0] is fv
    got = fast(*args)
    np.testing.assert_allclose(got[0], 2.0 * (xv @ yv))
    np.testing.assert_allclose(got[1], 2.0 * (xv @ wv))
    np.testing.assert_allclose(fast(zv, xv, yv, vv, wv, 2.0, 0.5)[0], 0.5 * zv + 2.0 * (xv @ yv))


def test_gemm_takes_in_a_constant_b_but_not_zero_without_nonfinite_unsafe():
    z, x, y = mats("z", "x", "y")
    args = [rng.normal(size=(2, 3)), rng.normal(size=(2, 4)), rng.normal(size=(4, 3))]
    one = tt.constant(np.float64(1))

    def safe_blas(fg):
        return apply_dbs(fg, "blas", exclude=["nonfinite_unsafe"])

    three, zero = tt.constant(np.float64(3)), tt.constant(np.float64(0))
    check(
        [z, x, y], [3.0 * z + tt.dot(x, y)], [gemm_no_inplace(z, one, x, y, three)], args, safe_blas
    )
    zz = zero * z
    check([z, x, y], [zz + tt.dot(x, y)], [gemm_no_inplace(zz, one, x, y, one)], args, safe_blas)
    check([z, x, y], [zero * z + tt.dot(x, y)], [gemm_no_inplace(z, one, x, y, zero)], args, blas)


def test_gemv_and_ger():
    x = tt.dmatrix("x")
    v, w, u = tt.dvector("v"), tt.dvector("w"), tt.dvector("u")
    one = tt.constant(np.float64(1))
    args = [rng.normal(size=(3, 4)), rng.normal(size=3), rng.normal(size=4), rng.normal(size=4)]
    check(
        [x, v, w, u],
        [v + tt.dot(x, w), u + tt.dot(v, x)],
        [gemv_no_inplace(v, one, x, w, one), gemv_no_inplace(u, one, x.T, v, one)],
        args,
        blas,
    )
    half = tt.constant(np.float64(0.5))
    check([x, v, w], [x + 0.5 * tt.outer(v, w)], [ger(x, half, v, w)], args[:3], blas)


def test_plain_dot_becomes_dot22():
    x, y = mats("x", "y")
    check(
        [x, y],
        [tt.dot(x, y)],
        [dot22(x, y)],
        [rng.normal(size=(2, 3)), rng.normal(size=(3, 2))],
        blas,
    )


def test_no_gemm_when_the_dot_is_used_elsewhere_or_shapes_differ():
    z, x, y = mats("z", "x", "y")
    r = tt.drow("r")
    d = tt.dot(x, y)
    fg = apply_dbs(FunctionGraph([z, x, y, r], [z + d, d * 2, r + tt.dot(x, y)]), "blas")
    assert "Gemm{no_inplace}" not in ops_of(fg)


def test_gemm_through_fast_run_with_inplace_on_an_intermediate():
    z, x, y = mats("z", "x", "y")
    out = tt.exp(z) + tt.dot(x, y)
    args = [rng.normal(size=(2, 3)), rng.normal(size=(2, 4)), rng.normal(size=(4, 3))]
    f = theano_dag.function([z, x, y], out, mode=FAST_RUN_PY)
    assert "Gemm{inplace}" in ops_of(f.maker.fgraph)
    np.testing.assert_allclose(f(*args), np.exp(args[0]) + args[1] @ args[2])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("linker", ["py", "cpu"])
def test_integer_powers_become_products_of_squares(dtype, linker):
    # local_pow_specialize_device: 3 <= |n| <= 512, one Composite (and a reciprocal)
    x = tt.vector("x", dtype=dtype)
    xv = np.array([-2.0, 0.5, 3.0, np.nan, np.inf, -np.inf, -0.0, 1.25, -1.0], dtype=dtype)
    mode = Mode(
        linker="py" if linker == "py" else CPULinker(min_plan_bytes=0), optimizer="fast_run"
    ).excluding("fusion")
    for n, n_ops in ((3, 2), (15, 6), (16, 4), (-15, 6), (-4, 2), (512, 9), (7, 4)):
        with ckernel.compile_mode("sync"):  # the C kernel from the first call
            f = theano_dag.function([x], x**n, mode=mode)
        nodes = f.maker.fgraph.toposort()
        comp = nodes[0].op.scalar_op
        assert isinstance(comp, theano_dag.scalar.Composite)
        assert len(comp.nodes) == n_ops
        assert len(nodes) == (2 if n < 0 else 1)
        with np.errstate(all="ignore"):
            want = np.power(xv.astype("float64"), float(n)).astype(dtype)
        for _ in range(2):
            got = f(xv)
            assert got.dtype == dtype
            np.testing.assert_allclose(got, want, rtol=3e-6 if dtype == "float32" else 1e-13)
    for p in (2.5, 2, -1, 513):  # left to pow, or to local_pow_specialize
        f = theano_dag.function([x], x**p, mode=mode)
        assert not any(
            isinstance(getattr(n.op, "scalar_op", None), theano_dag.scalar.Composite)
            for n in f.maker.fgraph.toposort()
        )
    excluded = mode.excluding("local_pow_specialize_device")
    f = theano_dag.function([x], x**15, mode=excluded)
    assert [str(n.op) for n in f.maker.fgraph.toposort()] == ["Elemwise{pow,no_inplace}"]
