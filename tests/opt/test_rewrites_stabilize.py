"""Stabilization rewrites: structure and values, and the stability they buy."""

import mpmath
import numpy as np
from scipy import special

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.mode import Mode
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.elemwise import Elemwise

from .rewrite_helpers import apply_dbs, check, fgraph_values, ops_of

rng = np.random.default_rng(7)
FAST_RUN_PY = Mode(linker="py", optimizer="fast_run")


def stabilize(fg):
    return apply_dbs(fg, "canonicalize", "stabilize")


def test_log1p():
    x, y = tt.dvector("x"), tt.dvector("y")
    # (1 + y + x: the inner sum is used once, so canonicalize flattens it first)
    check(
        [x, y],
        [tt.log(1 + x), tt.log(x + 1), tt.log(1 - x), tt.log(1 + y + x)],
        [tt.log1p(x), tt.log1p(x), tt.log1p(-x), tt.log1p(x + y)],
        [rng.uniform(-0.4, 0.4, size=4), rng.uniform(-0.4, 0.4, size=4)],
        stabilize,
    )


def test_log1p_keeps_tiny_values():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.log(1 + x), mode=FAST_RUN_PY)
    assert f(np.array([1e-20]))[0] == 1e-20  # log(1 + 1e-20) would be exactly 0


def test_log_sigmoid():
    x = tt.dvector("x")
    check(
        [x],
        [tt.log(tt.sigmoid(x)), tt.log(1 - tt.sigmoid(x)), tt.log1p(-tt.sigmoid(x))],
        [-tt.softplus(-x), -tt.softplus(x), -tt.softplus(x)],
        [rng.normal(size=5)],
        stabilize,
    )
    f = theano_dag.function([x], tt.log(tt.sigmoid(x)), mode=FAST_RUN_PY)
    np.testing.assert_allclose(f(np.array([-1000.0, 1000.0])), [-1000.0, 0.0])


def test_stabilize_is_not_in_fast_compile():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.log(1 + x), mode="FAST_COMPILE")
    assert not any(n.op == tt.log1p for n in f.maker.fgraph.apply_nodes)
    assert fgraph_values(f.maker.fgraph, [np.array([1e-20])])[0][0] == 0.0


def test_log1p_exp_becomes_softplus_and_log1mexp():
    x = tt.dvector("x")
    check(
        [x],
        [tt.log(1 + tt.exp(x)), tt.log1p(tt.exp(x)), tt.log(1 - tt.exp(x)), tt.log(-tt.expm1(x))],
        [tt.softplus(x), tt.softplus(x), tt.log1mexp(x), tt.log1mexp(x)],
        [-rng.uniform(0.1, 3, size=4)],
        stabilize,
    )


def test_log1p_exp_at_extreme_values():
    x = tt.dvector("x")
    f = theano_dag.function([x], [tt.log(1 + tt.exp(x)), tt.log(1 - tt.exp(x))])
    big, tiny = f(np.array([1000.0, -1e-20]))
    assert big[0] == 1000.0  # exp(1000) overflowed to inf
    np.testing.assert_allclose(tiny[1], np.log(1e-20))  # 1 - exp(-1e-20) rounded to 0
    g = theano_dag.function([x], theano_dag.grad(tt.log(1 + tt.exp(x)).sum(), x))
    np.testing.assert_allclose(g(np.array([1000.0, -1000.0, 0.0])), [1.0, 0.0, 0.5])


def test_exp_over_1_plus_exp_is_sigmoid():
    x = tt.dvector("x")
    e = tt.exp(x)
    check([x], [e / (1 + e), e / (e + 1)], [tt.sigmoid(x)] * 2, [rng.normal(size=4)], stabilize)


# -- logarithms, exponentials and special functions -------------------------------------


def _all(fg):
    return stabilize(fg)


def test_erf_complements():
    x = tt.dvector("x")
    check(
        [x],
        [1 - tt.erf(x), 1 + tt.erf(x), tt.erf(x) - 1, 1 - tt.erfc(x), tt.erfc(x) - 1],
        [tt.erfc(x), tt.erfc(-x), -tt.erfc(x), tt.erf(x), -tt.erf(x)],
        [rng.normal(size=4)],
        _all,
    )
    check(
        [x], [tt.erfc(-x) - 1, 1 + -tt.erf(x)], [tt.erf(x), tt.erfc(x)], [rng.normal(size=4)], _all
    )
    # 1 + erfc(x) cancels nothing: left alone
    fg = stabilize(FunctionGraph([x], [1 + tt.erfc(x)]))
    assert "erf" not in " ".join(str(n.op) for n in fg.apply_nodes).replace("erfc", "")


def test_expm1():
    x, y = tt.dvector("x"), tt.dvector("y")
    check(
        [x, y],
        [tt.exp(x) - 1, -1 + tt.exp(x), tt.exp(x) + y - 1, 1 - tt.exp(x)],
        [tt.expm1(x), tt.expm1(x), y + tt.expm1(x), -tt.expm1(x)],
        [rng.normal(size=3), rng.normal(size=3)],
        _all,
    )
    check([x], [1 + tt.expm1(x)], [tt.exp(x)], [rng.normal(size=3)], _all)


def test_log_erfc_and_its_gradient():
    x = tt.dvector("x")
    check(
        [x],
        [tt.log(tt.erfc(x)), tt.log(1 - tt.erf(x)), tt.log1p(-tt.erf(x))],
        [tt.log_erfc(x)] * 3,
        [rng.normal(size=4)],
        _all,
    )
    g = theano_dag.grad(tt.log(tt.erfc(x)).sum(), x)
    fg = stabilize(FunctionGraph([x], [g]))
    ops = ops_of(fg)
    # 1 / erfcx(x) from 0 up; below 0 the quotient as written, with erfc(x) as
    # 2 - erfc(-x), finite there where erfcx overflows (and its derivative with it)
    assert "Elemwise{erfcx,no_inplace}" in ops and "Elemwise{switch,no_inplace}" in ops
    big = np.array([-800.0, -30.0, -1.0, 0.0, 1.0, 30.0, 800.0])
    want = -2 / np.sqrt(np.pi) / special.erfcx(big)
    np.testing.assert_allclose(theano_dag.function([x], g)(big), want, rtol=1e-13)
    # erfc(-x), erfc(x / sqrt(2)): the squares the gradient builds are recognised too
    for arg in (-x, x / np.sqrt(2.0)):
        g = theano_dag.grad(tt.log(tt.erfc(arg)).sum(), x)
        assert "Elemwise{erfcx,no_inplace}" in ops_of(stabilize(FunctionGraph([x], [g])))


def test_log_erfc_in_float32_far_in_the_tail():
    # PyTensor's log(erfc) rewrite builds float64 constants into a float32 graph and is
    # rolled back; here the value and the gradient are float32 and finite
    x = tt.fvector("x")
    cost = tt.log(tt.erfc(x))
    f = theano_dag.function([x], [cost, theano_dag.grad(cost.sum(), x)])
    points = [30.0, 1000.0]
    v, g = f(np.array(points, dtype="float32"))
    assert v.dtype == g.dtype == "float32"
    want = [float(mpmath.log(mpmath.erfc(p))) for p in points]
    want_g = [float(mpmath.diff(lambda t: mpmath.log(mpmath.erfc(t)), p)) for p in points]
    np.testing.assert_allclose(v, want, rtol=1e-6)
    np.testing.assert_allclose(g, want_g, rtol=1e-5)


def test_log_add_exp_and_log_diff_exp():
    x, y, z = tt.dvector("x"), tt.dvector("y"), tt.dvector("z")
    args = [rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)]
    check([x, y], [tt.log(tt.exp(x) + tt.exp(y))], [tt.logaddexp(x, y)], args[:2], _all)
    fg = check([x, y, z], [tt.log(tt.exp(x) + tt.exp(y) + tt.exp(z))], None, args, _all)
    assert ops_of(fg).count("Elemwise{logaddexp,no_inplace}") == 2
    assert "Elemwise{exp,no_inplace}" not in ops_of(fg)
    fg = check(
        [x, y],
        [tt.log(tt.exp(x) - tt.exp(y))],
        None,
        [rng.uniform(1, 2, size=3), rng.uniform(-2, 0, size=3)],
        _all,
    )
    assert ops_of(fg) == [
        "Elemwise{eq,no_inplace}",
        "Elemwise{sub,no_inplace}",
        "Elemwise{log1mexp,no_inplace}",
        "Elemwise{add,no_inplace}",
        "Elemwise{switch,no_inplace}",
    ]


def test_gradients_of_log_add_exp_and_log_diff_exp_have_no_exp_ratio():
    x, y = tt.dvector("x"), tt.dvector("y")
    for f in (tt.log(tt.exp(x) + tt.exp(y)), tt.log(tt.exp(x) - tt.exp(y))):
        gs = theano_dag.grad(f.sum(), [x, y])
        fg = stabilize(FunctionGraph([x, y], gs))
        assert not any(
            isinstance(n.op.scalar_op, ts.TrueDiv)
            for n in fg.apply_nodes
            if hasattr(n.op, "scalar_op")
        ), ops_of(fg)
    f = theano_dag.function([x, y], theano_dag.grad(tt.log(tt.exp(x) + tt.exp(y)).sum(), [x, y]))
    gx, gy = f(np.array([1000.0, 0.0]), np.array([1000.0, -np.log(3.0)]))
    np.testing.assert_allclose(gx, [0.5, 0.75])
    np.testing.assert_allclose(gy, [0.5, 0.25])


def test_log_div_and_div_by_reciprocal():
    x, a = tt.dvector("x"), tt.dvector("a")
    check(
        [x],
        [tt.log(1 / x), tt.log(tt.reciprocal(x))],
        [-tt.log(x), -tt.log(x)],
        [rng.uniform(0.1, 3, size=3)],
        _all,
        rtol=1e-12,
    )
    check(
        [x, a],
        [a / (1 / x), 1 / (1 / x)],
        [x * a, x],
        [rng.uniform(1, 2, 3), rng.normal(size=3)],
        _all,
    )


def test_div_by_reciprocal_of_integers_multiplies_in_the_quotients_dtype():
    # uint16 x / (1 / x) is a float quotient: a / (1 / x) -> a * x must multiply in its
    # dtype, not in uint16 where 65535 * 65535 wraps to 1 (fuzz --values wide, seed 10,
    # graph 262); int8 and int64 likewise. Against the graph unrewritten.
    for dtype, big in (("uint16", 65535), ("int8", -128), ("int64", 2**40 + 3)):
        x, a = tt.vector("x", dtype=dtype), tt.vector("a", dtype=dtype)
        outs = [x / (1 / x), a / tt.reciprocal(x)]
        v = np.array([big, 3, 0, 7], dtype)
        w = np.array([big, -1 if dtype[0] == "i" else 2, 5, 7], dtype)
        want = theano_dag.function([x, a], outs, mode=Mode(linker="py", optimizer=None))(v, w)
        assert abs(float(want[0][0])) > 1e4  # the product that wraps in dtype
        for mode in (Mode(linker="py", optimizer="fast_run"), Mode(linker="cpu")):
            got = theano_dag.function([x, a], outs, mode=mode)(v, w)
            for g, r in zip(got, want):
                assert g.dtype == r.dtype
                np.testing.assert_allclose(g, r, rtol=1e-6)


def test_sqrt_sqr():
    x = tt.dvector("x")
    check([x], [tt.sqrt(tt.sqr(x)), tt.sqrt(x * x)], [abs(x), abs(x)], [rng.normal(size=5)], _all)
    fg = check([x], [tt.sqr(tt.sqrt(x))], None, [rng.normal(size=5)], _all)
    assert ops_of(fg) == ["Elemwise{ge,no_inplace}", "Elemwise{switch,no_inplace}"]


def test_sqrt_of_an_integer_square_keeps_its_wrap():
    # uint8 x * x wraps (200 * 200 is 64): sqrt of it is 8, not |x| = 200. A float
    # square of the same integers is |x| still.
    for dtype in ("uint8", "int8", "int16", "int32", "int64"):
        x = tt.vector("x", dtype=dtype)
        info = np.iinfo(dtype)
        v = np.array([info.max, info.min, 3, 0, info.max // 2 + 7], dtype)
        outs = [tt.sqrt(x * x), tt.sqrt(tt.sqr(x)), tt.sqrt(tt.sqr(tt.cast(x, "float64")))]
        want = theano_dag.function([x], outs, mode=Mode(linker="py", optimizer=None))(v)
        assert not np.allclose(want[0], np.abs(v.astype(float)))  # the wrap shows
        for mode in (Mode(linker="py", optimizer="fast_run"), Mode(linker="cpu")):
            f = theano_dag.function([x], outs, mode=mode)
            for g, r in zip(f(v), want):
                assert g.dtype == r.dtype
                np.testing.assert_allclose(g, r, rtol=1e-6)
        fg = FunctionGraph([x], [tt.sqrt(tt.sqr(tt.cast(x, "float64")))])
        assert "Elemwise{abs,no_inplace}" in ops_of(stabilize(fg))


def test_exp_log_inverse_pairs():
    x = tt.dvector("x")
    specialize = lambda fg: apply_dbs(fg, "specialize")  # noqa: E731
    args = [rng.uniform(-0.5, 2, size=4)]
    for out in (tt.exp(tt.log1p(x)), tt.expm1(tt.log1p(x)), tt.expm1(tt.log(x + 1))):
        fg = check([x], [out], None, args, specialize)
        assert "Elemwise{switch,no_inplace}" in ops_of(fg)
        assert not {"Elemwise{log1p,no_inplace}", "Elemwise{log,no_inplace}"} & set(ops_of(fg))
    fg = check([x], [tt.exp(tt.softplus(x))], None, args, specialize)
    assert ops_of(fg) == ["Elemwise{exp,no_inplace}", "Elemwise{add,no_inplace}"]
    check([x], [tt.expm1(tt.softplus(x))], [tt.exp(x)], args, specialize)
    neg = [-rng.uniform(0.1, 2, size=4)]
    fg = check([x], [tt.exp(tt.log1mexp(x)), tt.log1mexp(tt.log1mexp(x))], None, neg, specialize)
    assert "Elemwise{log1mexp,no_inplace}" not in ops_of(fg)
    check([x], [tt.log1p(tt.expm1(x))], [x], [rng.normal(size=3)], stabilize)
    excluded = FunctionGraph([x], [tt.log1p(tt.expm1(x))])
    apply_dbs(excluded, "canonicalize", exclude=["nonfinite_unsafe"])
    assert "Elemwise{expm1,no_inplace}" in ops_of(excluded)


def test_special_rewrites_are_tagged_stabilize():
    x = tt.dvector("x")
    mode = FAST_RUN_PY.excluding("stabilize")
    f = theano_dag.function([x], tt.log(tt.erfc(x)), mode=mode)
    assert "log_erfc" not in " ".join(str(n.op) for n in f.maker.fgraph.apply_nodes)
    f = theano_dag.function([x], tt.log(tt.erfc(x)), mode=FAST_RUN_PY)
    assert np.isfinite(f(np.array([40.0]))).all()


def test_func_inv_mul_exp_and_log_erf_structure():
    x, y = tt.dvector("x"), tt.dvector("y")
    # arccosh(cosh(x)) is |x|, not x (Theano's rule gave x)
    f = theano_dag.function([x], tt.arccosh(tt.cosh(x)), mode=FAST_RUN_PY)
    assert "cosh" not in " ".join(str(n.op.scalar_op) for n in _elemwise(f))
    np.testing.assert_array_equal(f(np.array([-800.0, 2.0])), [800.0, 2.0])
    # a quotient of exponentials is one exponential
    f = theano_dag.function([x, y], tt.exp(x) / tt.exp(y), mode=FAST_RUN_PY)
    assert " ".join(str(n.op.scalar_op) for n in _elemwise(f)).count("exp") == 1
    np.testing.assert_allclose(f(np.array([800.0]), np.array([799.0])), [np.e])
    # log(erf(x)) keeps erfc's digits where erf(x) rounds to 1
    f = theano_dag.function([x], tt.log(tt.erf(x)), mode=FAST_RUN_PY)
    np.testing.assert_allclose(f(np.array([6.0]))[0], -2.1519736712498913e-17, rtol=1e-14)


def _elemwise(f):
    return [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Elemwise)]
