"""Sparse graphs on each engine: the Dask engine refuses them by name; OpenCL runs the
sparse ops on the host with the transfers in the graph; the CPU engine plans the dense
values around them. And the gradient checker itself catches a wrong gradient."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_helpers import CPU, ENGINES, REF, random_sparse, run, sp

import theano_dag
import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.gradient.verify import GradientError, verify_grad_sparse
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op


def test_dask_engine_refuses_sparse_values_by_name():
    pytest.importorskip("dask.array")
    x, b = S.csr_matrix("x", dtype="float64"), tt.dmatrix("b")
    with pytest.raises(NotImplementedError, match=r"The Dask engine cannot run sparse matrices: x"):
        theano_dag.function(
            [x, b], tt.exp(S.structured_dot(x, b)), mode=theano_dag.Mode(linker="dask")
        )


@pytest.mark.skipif("opencl" not in ENGINES, reason="no OpenCL platform")
def test_opencl_runs_sparse_ops_on_the_host_with_transfers():
    x, b = S.csr_matrix("x", dtype="float64"), tt.dmatrix("b")
    f = theano_dag.function([x, b], tt.exp(S.structured_dot(x, b)), mode=ENGINES["opencl"])
    names = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert "StructuredDot" in names and "GpuFromHost" in names
    xv = random_sparse(np.random.default_rng(0), "csr", "float64")
    bv = np.random.default_rng(1).standard_normal((5, 2))
    np.testing.assert_allclose(f(xv, bv), np.exp(xv @ bv), rtol=1e-12)


def test_cpu_engine_plans_the_dense_values_after_a_sparse_op():
    x, b = S.csr_matrix("x", dtype="float64"), tt.dmatrix("b")
    y = tt.tanh(S.structured_dot(x, b)) * 2 + 1
    f = theano_dag.function([x, b], y, mode=CPU)
    xv = random_sparse(np.random.default_rng(2), "csc", "float64").tocsr()
    bv = np.random.default_rng(3).standard_normal((5, 40))
    for _ in range(2):  # the second call reuses the plan of this signature
        np.testing.assert_allclose(f(xv, bv), np.tanh(xv @ bv) * 2 + 1, rtol=1e-14)
    # The sparse input's shape is in the plan's signature, so the dense values after the
    # sparse op have known shapes (here the elementwise result reuses the product's
    # memory); no sparse value is ever given planned memory.
    plan = f.fn.current
    assert plan.shapes[f.maker.fgraph.inputs[0]] == (4, 5)
    out = f.maker.fgraph.outputs[0]
    assert plan.shapes[out] == (4, 40) and plan.cat[out] == "view"
    assert all(c == "fresh" for v, c in plan.cat.items() if isinstance(v.type, S.SparseType))


def test_poisoned_cpu_memory_gives_the_same_values():
    mode = theano_dag.Mode(linker=CPULinker(min_plan_bytes=0, poison=True))
    x, b = S.csc_matrix("x", dtype="float32"), tt.fmatrix("b")
    cost = tt.sqr(S.structured_dot(S.structured_exp(x), b)).sum()
    outs = [cost, *tt.grad(cost, [x, b])]
    xv = random_sparse(np.random.default_rng(4), "csc", "float32")
    bv = np.random.default_rng(5).standard_normal((5, 3)).astype("float32")
    got, want = run([x, b], outs, [xv, bv], mode), run([x, b], outs, [xv, bv], REF)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1].toarray(), want[1].toarray(), rtol=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5)


class _WrongNeg(Op):
    """``-x`` whose gradient forgets the sign."""

    __props__ = ()

    def make_node(self, x):
        x = S.as_sparse_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = -inputs[0]

    def grad(self, inputs, output_grads):
        return [output_grads[0]]


def test_verify_grad_sparse_catches_a_wrong_gradient():
    value = sp.csr_matrix(np.array([[0.0, 2.0], [3.0, 0.0]]))
    verify_grad_sparse(S.neg, [value])
    with pytest.raises(GradientError):
        verify_grad_sparse(_WrongNeg(), [value])
    with pytest.raises(GradientError):
        verify_grad_sparse(_WrongNeg(), [value], structured=True)
