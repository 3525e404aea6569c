"""Theano's ``tensor.blas`` namespace (``opt.tensor_blas``): the gemm helpers and the
Dot22Scalar rewrite, by structure and value."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.config import config
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.rewriting import in2out
from theano_dag.opt.tensor_blas import (
    Dot22,
    Dot22Scalar,
    Ger,
    _as_scalar,
    _factor_canonicalized,
    _gemm_canonicalize,
    _is_real_matrix,
    _is_real_vector,
    local_dot22_to_dot22scalar,
    res_is_a,
)
from theano_dag.tensor.blas import dot22
from theano_dag.tensor.blas_scipy import ScipyGer


def test_as_scalar():
    a = tt.dscalar("a")
    assert _as_scalar(a) is a
    assert _as_scalar(a.dimshuffle("x", "x")) is a
    assert _as_scalar(tt.dmatrix()) is None
    assert _as_scalar(tt.constant(np.ones(5))) is None
    i = tt.iscalar("i")
    assert _as_scalar(i, "float64").dtype == "float64"
    assert _as_scalar(tt.lscalar(), "float32") is None  # int64 -> float32 would lose


def test_real_matrix_and_vector():
    assert _is_real_matrix(tt.fmatrix()) and not _is_real_matrix(tt.imatrix())
    assert not _is_real_matrix(tt.dcol()) and _is_real_vector(tt.dvector())


def test_gemm_canonicalize_and_factor():
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    a = tt.dscalar("a")
    e = x - a * y + x
    g = FunctionGraph([x, y, a], [e], clone=False)
    terms = _gemm_canonicalize(g, e, 1.0, [], 0)
    assert [t[1] for t in terms] == [x, y, x]
    merged = _factor_canonicalized(terms)
    assert len(merged) == 2 and merged[0][0] == 2.0
    assert res_is_a(g, e, tt.add) and not res_is_a(g, e, tt.sub)


def test_gemm_canonicalize_scales_a_product_of_scalars_as_theano():
    # b*Z*c under a minus: the first scalar takes the minus (a negation), then the next
    # one multiplies it, as Theano's helper builds the scales
    X, Y, Z = (tt.dmatrix(n) for n in "XYZ")
    a, b, c = (tt.dscalar(n) for n in "abc")
    e = a * X + Y - b * Z * c
    g = FunctionGraph([a, X, Y, b, Z, c], [e], clone=False)
    terms = _gemm_canonicalize(g, e, 1.0, [], 0)
    assert terms[0] == (a, X) and terms[1] == (1.0, Y) and terms[2][1] is Z
    scale = terms[2][0]
    assert scale.owner.op == tt.mul and scale.owner.inputs[1] is b
    assert scale.owner.inputs[0].owner.op == tt.neg and scale.owner.inputs[0].owner.inputs == [c]
    f = theano_dag.function([b, c], scale)
    assert f(2.0, 3.0) == -6.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dot22_to_dot22scalar(dtype):
    x, y = tt.matrix("x", dtype=dtype), tt.matrix("y", dtype=dtype)
    a = tt.scalar("a", dtype=dtype)
    g = FunctionGraph([x, y, a], [a * dot22(x, y)], clone=True)
    in2out(local_dot22_to_dot22scalar).optimize(g)
    assert isinstance(g.outputs[0].owner.op, Dot22Scalar)
    f = theano_dag.function([x, y, a], a * tt.dot(x, y))
    assert any(isinstance(n.op, Dot22Scalar) for n in f.maker.fgraph.toposort())
    rng = np.random.default_rng(0)
    xv, yv = rng.random((3, 4)).astype(dtype), rng.random((4, 2)).astype(dtype)
    np.testing.assert_allclose(f(xv, yv, 0.5), 0.5 * xv @ yv, rtol=1e-5)
    # a product without a scalar factor stays a Dot22
    f = theano_dag.function([x, y], tt.dot(x, y) * x[:, :2].T.T)
    assert any(isinstance(n.op, Dot22) for n in f.maker.fgraph.toposort())


@pytest.mark.parametrize(("dtype", "int_dtype"), [("float64", "int64"), ("float32", "int16")])
def test_an_integer_scalar_times_a_product_is_dot22scalar_of_its_cast(dtype, int_dtype):
    # an integer that fits the product's dtype is cast to it (Theano's gh-1507 cast)
    A, i = tt.matrix("A", dtype=dtype), tt.scalar("i", dtype=int_dtype)
    f = theano_dag.function([A, i], tt.dot(A, A) * i)
    ops = [n.op for n in f.maker.fgraph.toposort()]
    assert any(isinstance(op, Dot22Scalar) for op in ops)
    assert not any(isinstance(op, Dot22) for op in ops)
    av = np.random.default_rng(1).random((3, 3)).astype(dtype)
    got = f(av, 3)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, (av @ av) * 3, rtol=1e-6)


def test_an_integer_wider_than_the_product_leaves_dot22():
    # int32 * float32 is float64: the float32 product stays a Dot22, the mul upcasts
    A, i = tt.fmatrix("A"), tt.iscalar("i")
    f = theano_dag.function([A, i], tt.dot(A, A) * i)
    ops = [n.op for n in f.maker.fgraph.toposort()]
    assert any(isinstance(op, Dot22) for op in ops)
    assert not any(isinstance(op, Dot22Scalar) for op in ops)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_a_product_of_complex_matrices_is_dot22(dtype):
    a, b = tt.matrix("a", dtype=dtype), tt.matrix("b", dtype=dtype)
    f = theano_dag.function([a, b], tt.dot(a, b))
    assert [type(n.op) for n in f.maker.fgraph.toposort()] == [Dot22]
    rng = np.random.default_rng(2)
    av = (rng.random((3, 4)) + 1j * rng.random((3, 4))).astype(dtype)
    bv = (rng.random((4, 2)) + 1j * rng.random((4, 2))).astype(dtype)
    np.testing.assert_allclose(f(av, bv), av @ bv, rtol=1e-5)


def test_blas_scipy_and_change_flags_dict():
    assert ScipyGer is Ger
    with config.change_flags({"on_opt_error": "raise"}):
        assert config.on_opt_error == "raise"
    assert config.on_opt_error != "raise" or config.is_set("on_opt_error")
