"""bsr (block) matrices, Theano's third sparse format: a type whose values the products
read (structured_dot, dot, usmm, with scipy's product), against scipy in float32 and
float64 on every engine; every other op, and the products' gradients, refuse them
naming the variable."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_helpers import CPU, ENGINES, FLOATS, REF, inferred_shapes, run, sp

import theano_dag
import theano_dag.tensor as tt
from theano_dag import sparse as S


def _bsr(rng, shape, dtype, block=(2, 2)):
    dense = np.where(rng.random(shape) < 0.4, rng.uniform(0.5, 2, shape), 0.0).astype(dtype)
    return sp.bsr_matrix(dense, blocksize=block)


def _as_dense(v):
    return v.toarray() if sp.issparse(v) else np.asarray(v)


CASES = [
    # name, build, the other operand's kind
    ("structured_dot_bsr_dense", lambda a, b: S.structured_dot(a, b), "dense"),
    ("tt_dot_bsr_csr", lambda a, b: tt.dot(a, b), "csr"),
    ("tt_dot_bsr_bsr", lambda a, b: tt.dot(a, b), "bsr"),
    ("sparse_dot_bsr_dense", lambda a, b: S.dot(a, b), "dense"),
    ("usmm_bsr_dense", lambda a, b: S.usmm(2.0, a, b, tt.ones((4, 6), dtype=b.dtype)), "dense"),
]


def _operands(kind, dtype):
    rng = np.random.default_rng(3)
    a = _bsr(rng, (4, 6), dtype)
    if kind == "dense":
        b = rng.standard_normal((6, 6)).astype(dtype)
    elif kind == "csr":
        b = sp.csr_matrix(_as_dense(_bsr(rng, (6, 6), dtype)))
    else:
        b = _bsr(rng, (6, 6), dtype, block=(3, 2))
    return a, b


def _variables(a, b):
    x = S.SparseType("bsr", a.dtype)("a")
    y = S.SparseType(b.format, b.dtype)("b") if sp.issparse(b) else tt.matrix("b", dtype=b.dtype)
    return x, y


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_products_of_a_bsr_matrix_against_scipy(case, dtype, engine):
    name, build, kind = case
    a, b = _operands(kind, dtype)
    x, y = _variables(a, b)
    out = build(x, y)
    (got,) = run([x, y], [out], [a, b], ENGINES[engine])
    want = a @ b
    if name.startswith("usmm"):
        want = 2 * want + 1
    if isinstance(out.type, S.SparseType):
        assert sp.issparse(got) and got.format == out.type.format == "bsr"
    assert got.dtype == dtype
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(_as_dense(got), _as_dense(want), rtol=tol, atol=tol)


def test_a_bsr_input_takes_a_csr_value_as_theano_does():
    # Theano's own test feeds CSR values to bsr inputs: the input converts them.
    x, y = S.SparseType("bsr", "float64")("x"), tt.dmatrix("y")
    f = theano_dag.function([x, y], S.structured_dot(x, y), mode=CPU)
    a = sp.random(4, 6, density=0.5, format="csr", random_state=1)
    np.testing.assert_allclose(f(a, np.eye(6)), a.toarray())
    assert S.SparseType("bsr", "float64").filter(a).format == "bsr"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_infer_shape_of_the_products(case):
    _, build, kind = case
    a, b = _operands(kind, "float64")
    x, y = _variables(a, b)
    out = build(x, y)
    (got,) = run([x, y], [out], [a, b], REF)
    assert inferred_shapes(out.owner, [x, y], [a, b]) == [got.shape]


def test_no_gradient_through_a_bsr_matrix():
    x, y = S.SparseType("bsr", "float64")("blocks"), tt.dmatrix("y")
    for out in (S.structured_dot(x, y), S.dot(x, y)):
        with pytest.raises(NotImplementedError, match="no gradient through the bsr matrix blocks"):
            theano_dag.grad(out.sum(), y)


def test_the_other_ops_refuse_a_bsr_matrix_naming_it():
    x = S.SparseType("bsr", "float64")("blocks")
    for build in (
        S.transpose,
        S.csm_properties,
        S.dense_from_sparse,
        lambda v: S.mul(v, 2.0),
        lambda v: S.add(v, v),
        S.sp_sum,
        lambda v: S.structured_dot(tt.dmatrix("m"), v),  # goes through transpose(v)
    ):
        with pytest.raises(NotImplementedError, match=r"blocks is a bsr matrix \(Sparse"):
            build(x)
    # A bsr constant is stored as CSR: every op takes it.
    c = S.as_sparse_variable(sp.bsr_matrix(np.eye(2)))
    assert c.type == S.SparseType("csr", "float64")
