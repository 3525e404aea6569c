"""The products: ``structured_dot``, ``dot`` and ``true_dot`` against scipy (float32 and
float64, reference and CPU engines), their shapes and gradients; and a product of a
10^6 x 10^6 matrix, differentiated, that could not run if anything were made dense."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_helpers import ENGINES, FLOATS, REF, Row, as_dense, inferred_shapes, run, sp

import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.gradient.verify import verify_grad_sparse

TABLE = [
    Row("structured_dot", S.structured_dot, lambda a, b: a @ b, ["csr", "right"], True),
    Row("structured_dot_csc", S.structured_dot, lambda a, b: a @ b, ["csc", "right"], True),
    Row("method_dot", lambda a, b: a.dot(b), lambda a, b: a @ b, ["csc", "right"], True),
    Row("structured_dot_dense_left", S.structured_dot, lambda b, a: b @ a, ["left", "csr"], True),
    Row("dot", S.dot, lambda a, b: a @ b, ["csr", "right"]),
    Row("dot_csc", S.dot, lambda a, b: a @ b, ["csc", "right"]),
    Row("dot_dense_left", S.dot, lambda b, a: b @ a, ["left", "csc"]),
    Row("dot_vector", S.dot, lambda a, v: a @ v, ["csr", "row"]),
    Row("dot_vector_left", S.dot, lambda v, a: v @ a, ["col", "csr"]),
    Row("dot_ss", lambda a, b: S.dot(a, b.T), lambda a, b: (a @ b.T).toarray(), ["csr", "csc"]),
    Row("true_dot_sd", S.true_dot, lambda a, b: sp.csr_matrix(a @ b), ["csr", "right"]),
    Row("true_dot_ss", lambda a, b: S.true_dot(a, b.T), lambda a, b: a @ b.T, ["csc", "csr"]),
    Row("true_dot_ds", S.true_dot, lambda b, a: sp.csr_matrix(b @ a), ["left", "csr"]),
]
CASES = [(row, dt, eng) for row in TABLE for dt in FLOATS for eng in ENGINES]


@pytest.mark.parametrize("row,dtype,engine", CASES, ids=[f"{r.name}-{d}-{e}" for r, d, e in CASES])
def test_value_against_scipy(row, dtype, engine):
    rng = np.random.default_rng(5)
    values = row.values(rng, dtype)
    syms = row.variables(values)
    out = row.build(*syms)
    (got,) = run(syms, [out], values, ENGINES[engine])
    want = row.ref(*values)
    assert sp.issparse(got) == isinstance(out.type, S.SparseType)
    assert got.dtype == out.type.dtype and got.shape == want.shape
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(as_dense(got), as_dense(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("row", TABLE, ids=[r.name for r in TABLE])
def test_infer_shape_is_the_real_shape(row):
    values = row.values(np.random.default_rng(2), "float64")
    syms = row.variables(values)
    out = row.build(*syms)
    (got,) = run(syms, [out], values, REF)
    # Built around a transpose (dense operand on the left): the product's own node.
    node = out.owner
    while not hasattr(node.op, "infer_shape") or type(node.op).__name__ == "Transpose":
        node = node.inputs[0].owner
    shapes = inferred_shapes(node, syms, values)
    assert sorted(shapes[0]) == sorted(got.shape)


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("row", TABLE, ids=[r.name for r in TABLE])
def test_gradient_by_finite_differences(row, engine):
    rng = np.random.default_rng(13)
    values = row.values(rng, "float64")
    verify_grad_sparse(row.build, values, structured=row.structured, rng=rng, mode=ENGINES[engine])


def test_structured_dot_gradient_keeps_the_pattern():
    a, b = S.csc_matrix("a", dtype="float64"), tt.dmatrix("b")
    ga, gb = tt.grad(S.structured_dot(a, b).sum(), [a, b])
    av = sp.csc_matrix(np.array([[0.0, 2.0], [1.0, 0.0], [0.0, 3.0]]))
    bv = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    got_a, got_b = run([a, b], [ga, gb], [av, bv], ENGINES["cpu"])
    # d sum(a @ b) / d a[i, j] = sum_k b[j, k], on a's stored entries only.
    assert got_a.format == "csc"
    np.testing.assert_array_equal(got_a.indices, av.indices)
    np.testing.assert_array_equal(got_a.indptr, av.indptr)
    np.testing.assert_allclose(got_a.toarray(), (av != 0).toarray() * bv.sum(axis=1)[None, :])
    np.testing.assert_allclose(got_b, av.T @ np.ones((3, 3)))


def test_a_huge_matrix_is_never_made_dense():
    # 10^6 x 10^6 (8 TB dense) with 10^5 stored entries: the product, its gradient with
    # respect to both operands and an update of the dense one run in megabytes.
    n, nnz, k = 10**6, 10**5, 2
    rng = np.random.default_rng(0)
    a = sp.csr_matrix(
        (rng.standard_normal(nnz), (rng.integers(0, n, nnz), rng.integers(0, n, nnz))),
        shape=(n, n),
    )
    b = rng.standard_normal((n, k))
    av, bv = S.csr_matrix("a", dtype="float64"), tt.dmatrix("b")
    cost = tt.sqr(S.structured_dot(av, bv)).sum()
    ga, gb = tt.grad(cost, [av, bv])
    got_cost, got_ga, got_gb = run([av, bv], [cost, ga, gb], [a, b], ENGINES["cpu"])
    prod = a @ b
    np.testing.assert_allclose(got_cost, (prod**2).sum(), rtol=1e-12)
    np.testing.assert_allclose(got_gb, a.T @ (2 * prod), rtol=1e-12, atol=1e-12)
    assert sp.issparse(got_ga) and got_ga.nnz == a.nnz
    rows, cols = a.nonzero()
    want_ga = np.einsum("ij,ij->i", 2 * prod[rows], b[cols])
    np.testing.assert_allclose(np.asarray(got_ga[rows, cols]).ravel(), want_ga, rtol=1e-12)


def test_tensor_dot_with_a_sparse_operand_is_the_sparse_product():
    # As in Theano: tensor.dot hands a sparse operand to its own product (structured).
    x, b = S.csr_matrix("x", dtype="float64"), tt.dmatrix("b")
    assert isinstance(tt.dot(x, b).owner.op, S.StructuredDot)
    rng = np.random.default_rng(9)
    xv, bv = sp.random(4, 5, density=0.5, format="csr", random_state=1), rng.random((5, 3))
    cv = rng.random((3, 4))
    got = run([x, b], [tt.dot(x, b), tt.dot(cv, x)], [xv, bv], REF)
    np.testing.assert_allclose(got[0], xv @ bv, rtol=1e-14)
    np.testing.assert_allclose(got[1], cv @ xv.toarray(), rtol=1e-14)


def test_a_column_operand_gives_a_column_and_its_gradient():
    x, c = S.csc_matrix("x", dtype="float64"), tt.col("c", dtype="float64")
    y = S.structured_dot(x, c)
    assert y.broadcastable == tt.dot(tt.dmatrix(), c).broadcastable == (False, True)
    rng = np.random.default_rng(12)
    xv = sp.random(4, 5, density=0.5, format="csc", random_state=2)
    cv = rng.random((5, 1))
    (got,) = run([x, c], [y], [xv, cv], ENGINES["cpu"])
    np.testing.assert_allclose(got, xv @ cv, rtol=1e-14)
    verify_grad_sparse(lambda m: S.structured_dot(xv, m), [cv], rng=rng)
