"""``theano_dag.sparse_grad(x[ilist])``: the gradient of reading rows of a dense matrix
as a sparse (CSC) matrix of the rows read (Theano's ``theano.sparse_grad``), its values
against the dense gradient on every engine, and its errors."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_helpers import ENGINES, FLOATS, REF, run, sp

import theano_dag
import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.gradient.verify import verify_grad_sparse
from theano_dag.tensor.subtensor import AdvancedIncSubtensor1, AdvancedSubtensor1


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("dtype", FLOATS)
def test_the_sparse_gradient_holds_the_dense_gradients_values(dtype, engine):
    m, i = tt.matrix("m", dtype=dtype), tt.lvector("i")
    w = tt.matrix("w", dtype=dtype)
    cost = (theano_dag.sparse_grad(m[i]) * w).sum()
    g = theano_dag.grad(cost, m)
    assert isinstance(g.owner.op, S.ConstructSparseFromList)
    assert g.type == S.SparseType("csc", dtype)
    dense = theano_dag.grad((m[i] * w).sum(), m)
    assert isinstance(dense.owner.op, AdvancedIncSubtensor1)
    rng = np.random.default_rng(0)
    mv = rng.standard_normal((6, 3)).astype(dtype)
    iv = np.array([4, 1, 4, -1])  # a repeated row accumulates; -1 is the last row
    wv = rng.standard_normal((4, 3)).astype(dtype)
    got, want = run([m, i, w], [g, dense], [mv, iv, wv], ENGINES[engine])
    assert sp.issparse(got) and got.format == "csc" and got.dtype == dtype
    assert got.shape == (6, 3) and got.nnz <= 4 * 3  # only the rows read are stored
    np.testing.assert_allclose(got.toarray(), want, rtol=1e-6)
    expected = np.zeros((6, 3))
    np.add.at(expected, iv, wv)
    np.testing.assert_allclose(got.toarray(), expected, rtol=1e-6)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_the_sparse_gradient_by_finite_differences(engine):
    rng = np.random.default_rng(1)
    rows = theano_dag.shared(np.array([0, 3, 3, 1]))
    verify_grad_sparse(
        lambda m: tt.tanh(theano_dag.sparse_grad(m[rows])),
        [rng.standard_normal((5, 4))],
        rng=rng,
        mode=ENGINES[engine],
    )


def test_the_op_interface_and_the_default():
    m, i = tt.dmatrix("m"), tt.ivector("i")
    op = AdvancedSubtensor1(sparse_grad=True)
    assert op.sparse_grad and not AdvancedSubtensor1().sparse_grad
    # As in Theano the flag changes the gradient only: the ops are equal.
    assert op == AdvancedSubtensor1() and hash(op) == hash(AdvancedSubtensor1())
    g = theano_dag.grad(op(m, i).sum(), m)
    assert isinstance(g.owner.op, S.ConstructSparseFromList)
    assert theano_dag.sparse_grad(m[i]).owner.op is not m[i].owner.op
    (value,) = run([m, i], [g], [np.ones((3, 2)), np.array([2, 0], "int32")], REF)
    np.testing.assert_array_equal(value.toarray(), [[1, 1], [0, 0], [1, 1]])


@pytest.mark.parametrize("ndim", [1, 3])
def test_a_tensor_that_is_not_a_matrix_has_no_sparse_gradient(ndim):
    t, i = tt.TensorType("float64", shape=(None,) * ndim)("t"), tt.ivector("i")
    sub = theano_dag.sparse_grad(t[i])
    with pytest.raises(TypeError, match=f"needs a matrix .* has {ndim}"):
        theano_dag.grad(sub.sum(), t)


def test_only_rows_read_by_a_vector_have_a_sparse_gradient():
    m = tt.dmatrix("m")
    with pytest.raises(TypeError, match="only x\\[ilist\\]"):
        theano_dag.sparse_grad(m[1:])
    with pytest.raises(TypeError, match="only x\\[ilist\\]"):
        theano_dag.sparse_grad(m)
