"""Specialization rewrites: powers, squares, Adagrad and FMA fusion (Owl), BLAS calls."""

import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.graph.fg import FunctionGraph
from theano_dag.printing import debugprint
from theano_dag.tensor.blas import dot22, gemm_no_inplace, gemv_no_inplace, ger
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
        [x ** f64(2), x ** f64(-1), x ** f64(1), x ** f64(3), x ** f64(0.5), x ** f64(-0.5)],
        [
            tt.sqr(x),
            tt.reciprocal(x),
            x,
            x ** tt.constant(np.array([3.0])),
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
    check([z, x, y], [tt.dot(x, y) - z], [gemm_no_inplace(z, one, x, y, -one)], args, blas)
    check([z, x, y], [2.0 * z + tt.dot(x, y) * 0.5], None, args, blas)
    fg = check([z, x, y], [z - 3.0 * tt.dot(x, y)], None, args, blas)
    assert ops_of(fg)[-1] == "Gemm{no_inplace}"


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
