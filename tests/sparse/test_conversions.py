"""Taking a matrix apart and putting it together (``csm_properties``, ``CSM``,
``CSMGrad``), and the dense conversions' gradients."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_helpers import ENGINES, FLOATS, random_sparse, run, sp

import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.gradient.verify import verify_grad_sparse


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("format", ["csr", "csc"])
def test_csm_properties_and_csm_round_trip(format, dtype, engine):
    value = random_sparse(np.random.default_rng(1), format, dtype)
    x = S.matrix(format, "x", dtype=dtype)
    data, indices, indptr, shape = S.csm_properties(x)
    back = S.CSM(format)(data * 2, indices, indptr, shape)
    got = run([x], [data, indices, indptr, shape, back], [value], ENGINES[engine])
    np.testing.assert_array_equal(got[0], value.data)
    np.testing.assert_array_equal(got[1], value.indices)
    np.testing.assert_array_equal(got[2], value.indptr)
    np.testing.assert_array_equal(got[3], value.shape)
    assert [g.dtype for g in got[:4]] == [dtype, "int32", "int32", "int32"]
    assert got[4].format == format and got[4].dtype == dtype
    np.testing.assert_array_equal(got[4].toarray(), 2 * value.toarray())


def test_csm_refuses_inconsistent_parts():
    d = tt.dvector("d")
    m = S.CSR(d, [0, 1], [0, 1, 2], [2, 2])
    with pytest.raises(ValueError, match="must have the same length"):
        run([d], [S.dense_from_sparse(m)], [np.ones(3)], ENGINES["py"])


def test_csm_gradient_reads_the_gradient_matrix_on_the_pattern():
    # d/d data of sum(W * CSR(data, ...)) is W at the stored places.
    d = tt.dvector("d")
    m = S.CSR(d, [2, 0], [0, 1, 2], [2, 3])
    w = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    cost = S.sp_sum(S.mul(m, w), sparse_grad=True)
    (g,) = run([d], [tt.grad(cost, d)], [np.array([0.5, -1.0])], ENGINES["cpu"])
    np.testing.assert_allclose(g, [3.0, 4.0])


@pytest.mark.parametrize("format", ["csr", "csc"])
def test_csm_gradient_by_finite_differences(format):
    value = random_sparse(np.random.default_rng(4), format, "float64")

    def build(data):
        return S.CSM(format)(data, value.indices, value.indptr, value.shape)

    verify_grad_sparse(lambda d: S.dense_from_sparse(build(d)), [value.data])
    verify_grad_sparse(lambda d: S.csm_data(S.structured_exp(build(d))), [value.data])


def test_csm_grad_sums_duplicates_and_ignores_places_x_does_not_store():
    x_data, x_indices, x_indptr = np.ones(2), np.array([0, 1]), np.array([0, 1, 2])
    g = sp.csr_matrix((np.array([1.0, 2.0, 7.0]), np.array([0, 0, 0]), np.array([0, 2, 3])))
    g._shape = (2, 2)
    ins = [tt.as_tensor_variable(np.asarray(v)) for v in (x_data, x_indices, x_indptr)]
    ins.append(tt.as_tensor_variable(np.array([2, 2])))
    ins += [tt.as_tensor_variable(v) for v in (g.data, g.indices, g.indptr, np.array([2, 2]))]
    (got,) = run([], [S.csm_grad(*ins)], [], ENGINES["py"])
    # x stores (0, 0) and (1, 1); g stores (0, 0) twice (1 + 2) and (1, 0).
    np.testing.assert_array_equal(got, [3.0, 0.0])


def test_dense_conversions_round_trip_and_gradients():
    d = tt.dmatrix("d")
    value = np.array([[0.0, 1.5], [-2.0, 0.0]])
    for conv, fmt in ((S.csr_from_dense, "csr"), (S.csc_from_dense, "csc")):
        (m,) = run([d], [conv(d)], [value], ENGINES["cpu"])
        assert m.format == fmt and m.nnz == 2
        np.testing.assert_array_equal(m.toarray(), value)
    v = tt.dvector("v")
    assert S.csr_from_dense(v).type == S.csr_dmatrix  # a vector is one row
    with pytest.raises(TypeError, match="sparse matrices have 2 dimensions"):
        S.csr_from_dense(tt.dtensor3("t"))
