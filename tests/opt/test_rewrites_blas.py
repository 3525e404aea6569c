"""The BLAS rewrites as Theano makes them: a whole sum taken apart into one Gemm."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.blas import Gemm
from theano_dag.tensor.elemwise import DimShuffle

from .rewrite_helpers import apply_dbs, fgraph_values, reference_values

rng = np.random.default_rng(50)
TOL = {"float32": 2e-5, "float64": 1e-12}
FAST_RUN = get_mode("FAST_RUN")
FAST_RUN_PY = Mode(linker="py", optimizer="fast_run")


def _inputs(dtype):
    X, Y, Z, U = (tt.matrix(n, dtype=dtype) for n in "XYZU")
    a, b, c, d = (tt.scalar(n, dtype=dtype) for n in "abcd")
    return X, Y, Z, U, a, b, c, d


def _args(dtype):
    # its own generator: the module's one is shared by the tests a worker runs, in an
    # order that varies between runs (and a rare draw cancels to near 0 in float32)
    own = np.random.default_rng(51)
    shapes = [(4, 3), (3, 5), (4, 5), (4, 5), (), (), (), ()]
    vals = [own.normal(size=s) for s in shapes]
    return [np.asarray(v, dtype=dtype) for v in vals]


# Sums that Theano's gemm optimizer makes one Gemm of (``k``: a constant of their dtype).
SUMS = {
    "scaled difference": lambda X, Y, Z, a, b, c, d, k: k(0.01) * (tt.dot(X, Y) - k(1e-4) * Z),
    "decay": lambda X, Y, Z, a, b, c, d, k: Z - k(0.01) * (Z * k(2e-4) + tt.dot(X, Y)),
    "nested": lambda X, Y, Z, a, b, c, d, k: a * Z - b * (c * tt.dot(X, Y) + d * Z),
    "twice z": lambda X, Y, Z, a, b, c, d, k: Z + Z + tt.dot(X, Y),
    "twice the dot": lambda X, Y, Z, a, b, c, d, k: Z + tt.dot(X, Y) + tt.dot(X, Y),
    "products": lambda X, Y, Z, a, b, c, d, k: (b * b) * Z * a - (a * a) * tt.dot(X, Y) * b,
    "transposed": lambda X, Y, Z, a, b, c, d, k: b * Z - a * b * tt.dot(Y.T, X.T).T,
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", SUMS)
def test_a_sum_of_scaled_terms_is_one_gemm(name, dtype):
    ins = _inputs(dtype)
    X, Y, Z, U, a, b, c, d = ins
    out = SUMS[name](X, Y, Z, a, b, c, d, lambda v: tt.constant(np.asarray(v, dtype)))
    args = _args(dtype)
    want = reference_values(list(ins), [out], args)
    fg = FunctionGraph(list(ins), [out], clone=False)
    apply_dbs(fg, "canonicalize", "blas")
    # one Gemm; every other node works on scalars (its alpha and beta) or is a transpose
    gemms = [n for n in fg.apply_nodes if isinstance(n.op, Gemm)]
    assert len(gemms) == 1
    assert fg.outputs[0].owner is gemms[0]
    others = [n for n in fg.apply_nodes if n not in gemms and not isinstance(n.op, DimShuffle)]
    assert all(o.ndim == 0 for n in others for o in n.outputs)
    np.testing.assert_allclose(fgraph_values(fg, args)[0], want[0], rtol=TOL[dtype])


def test_the_scales_are_folded_into_the_gemm_constants():
    X, Y, Z = (tt.dmatrix(n) for n in "XYZ")
    fg = FunctionGraph([X, Y, Z], [Z - 0.01 * (Z * 2e-4 + tt.dot(X, Y))], clone=False)
    apply_dbs(fg, "blas")
    node = fg.outputs[0].owner
    z, alpha, x, y, beta = node.inputs
    assert isinstance(node.op, Gemm) and (z, x, y) == (Z, X, Y)
    assert float(alpha.data) == -0.01 and float(beta.data) == pytest.approx(1 - 2e-6)


def _decay(w, h, g, l2):
    # w <- w - lr * (dot(h.T, g) + l2 * w), Theano's factorised scalar: Gemm{inplace} alone
    return tt.dot(h.T, g) + l2 * w, 1


def _penalty_gradient(w, h, g, l2):
    # Theano's tutorials (mlp.py): cost + l2 * (w ** 2).sum(), differentiated, gives
    # l2 * 2 * w ** 1; canonicalize makes it l2 * 2 * w, whose w the gemm rule gathers
    # with the update's own w (it was Gemm{no_inplace}(w, ..., 1) plus a pass over w).
    cost = (tt.dot(h, w) * g).sum() + l2 * (w**2).sum()
    return theano_dag.grad(cost, w), 2


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("step", [_decay, _penalty_gradient], ids=["decay", "penalty gradient"])
def test_sgd_step_with_weight_decay_is_one_inplace_gemm(step, dtype):
    w0 = rng.normal(size=(5, 4)).astype(dtype)
    w = theano_dag.shared(w0.copy(), name="w")
    h, g = tt.matrix("h", dtype=dtype), tt.matrix("g", dtype=dtype)
    lr, l2 = np.asarray(0.01, dtype), np.asarray(1e-3, dtype)
    gw, times = step(w, h, g, l2)
    f = theano_dag.function([h, g], [], updates=[(w, w - lr * gw)])
    ops = [str(n.op) for n in f.maker.fgraph.toposort()]
    assert f.maker.fgraph.outputs[0].owner.op == Gemm(inplace=True)
    assert ops.count("Gemm{inplace}") == 1 and "Gemm{no_inplace}" not in ops
    if step is _decay:
        assert ops == ["InplaceDimShuffle{1,0}", "Gemm{inplace}"]
    hv, gv = rng.normal(size=(3, 5)).astype(dtype), rng.normal(size=(3, 4)).astype(dtype)
    f(hv, gv)
    want = w0 - lr * (hv.T @ gv + times * l2 * w0)
    np.testing.assert_allclose(w.get_value(), want, rtol=TOL[dtype] * 10)


def test_a_part_of_the_sum_used_elsewhere_is_not_taken_apart():
    X, Y, Z, U, a, b, c, d = _inputs("float64")
    inner = c * tt.dot(X, Y) + d * Z
    outs = [a * Z - b * inner, inner]
    args = _args("float64")
    want = reference_values([X, Y, Z, U, a, b, c, d], outs, args)
    fg = FunctionGraph([X, Y, Z, U, a, b, c, d], outs, clone=False)
    apply_dbs(fg, "canonicalize", "blas")
    # the inner sum is a Gemm (an output), the outer one reads it
    (gemm,) = [n for n in fg.apply_nodes if isinstance(n.op, Gemm)]
    assert fg.outputs[1].owner is gemm
    assert fg.outputs[0].owner is not gemm
    np.testing.assert_allclose(fgraph_values(fg, args), want, rtol=1e-12)


@pytest.mark.parametrize("mode", [FAST_RUN, FAST_RUN_PY], ids=["cpu", "py"])
def test_a_nested_sum_keeps_the_nan_of_z_where_its_scale_is_zero(mode):
    # a*Z - b*(dot + d*Z) at a = b*d: the scale of Z is a variable 0, which Gemm's beta
    # would drop; without nonfinite_unsafe z stays scaled in the graph (0 * nan is nan)
    X, Y, Z, U, a, b, c, d = _inputs("float64")
    out = a * Z - b * (tt.dot(X, Y) + d * Z)
    args = _args("float64")
    args[2] = np.full((4, 5), np.nan)
    args[4], args[5], args[7] = np.float64(1.0), np.float64(2.0), np.float64(0.5)
    safe = theano_dag.function([X, Y, Z, a, b, d], out, mode=mode.excluding("nonfinite_unsafe"))
    fast = theano_dag.function([X, Y, Z, a, b, d], out, mode=mode)
    call = [args[i] for i in (0, 1, 2, 4, 5, 7)]
    assert np.isnan(safe(*call)).all()
    # the default mode takes the scale into beta: BLAS never reads z at beta 0
    np.testing.assert_allclose(fast(*call), -2.0 * (args[0] @ args[1]), rtol=1e-12)


def test_two_products_in_one_sum_are_two_gemms_the_second_accumulating_the_first():
    # c*Z + a*dot(X, Y) + b*dot(R, S).T: the first product accumulates into Z (not into the
    # other product), the second into the first Gemm: no Dot22 and no elementwise left
    X, Y, Z, U, a, b, c, d = _inputs("float64")
    R, S = tt.dmatrix("R"), tt.dmatrix("S")
    out = c * Z + a * tt.dot(X, Y) + b * tt.dot(R, S).T
    ins = [X, Y, Z, a, b, c, R, S]
    args = _args("float64")[:3] + [np.float64(0.5), np.float64(-2.0), np.float64(3.0)]
    args += [rng.normal(size=(5, 2)), rng.normal(size=(2, 4))]
    want = reference_values(ins, [out], args)
    fg = FunctionGraph(ins, [out], clone=False)
    apply_dbs(fg, "canonicalize", "blas")
    outer = fg.outputs[0].owner
    assert isinstance(outer.op, Gemm) and isinstance(outer.inputs[0].owner.op, Gemm)
    assert outer.inputs[0].owner.inputs[0] is Z
    assert [n for n in fg.apply_nodes if not isinstance(n.op, (Gemm, DimShuffle))] == []
    np.testing.assert_allclose(fgraph_values(fg, args)[0], want[0], rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_vector_sum_inside_a_sum_stays_with_its_fused_loop(dtype):
    # A sampler's residual y - (a + dot(X, b)): the dot stays a product and the sum one
    # fused loop; Gemv over the inner sum broke that loop and made the call 2.4x slower.
    rng = np.random.default_rng(0)
    X = tt.constant(rng.normal(size=(100, 3)).astype(dtype))
    y = tt.constant(rng.normal(size=100).astype(dtype))
    b, a = tt.vector("b", dtype=dtype), tt.scalar("a", dtype=dtype)
    f = theano_dag.function([b, a], ((y - (a + tt.dot(X, b))) ** 2).sum())
    names = {type(n.op).__name__ for n in f.maker.fgraph.toposort()}
    assert "Gemv" not in names and "Dot" in names
    bv, av = np.arange(3, dtype=dtype), np.asarray(0.5, dtype=dtype)
    want = ((y.data - (av + X.data @ bv)) ** 2).sum()
    np.testing.assert_allclose(f(bv, av), want, rtol=1e-5)
    # a dot added to a vector directly is still one Gemv
    g = theano_dag.function([b], y - 2 * tt.dot(X, b))
    assert [type(n.op).__name__ for n in g.maker.fgraph.toposort()] == ["Gemv"]
    np.testing.assert_allclose(g(bv), y.data - 2 * X.data @ bv, rtol=1e-5)
