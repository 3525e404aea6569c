"""Rewrites of increments into zeros and products with zeros (Theano's names)."""

import warnings

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.tensor.subtensor import AdvancedIncSubtensor1, IncSubtensor

DTYPES = ["float32", "float64"]


def _ops(f):
    return [n.op for n in f.maker.fgraph.toposort()]


@pytest.mark.parametrize("dtype", DTYPES)
def test_increment_by_zeros_goes(dtype):
    x, y = tt.matrix("x", dtype=dtype), tt.matrix("y", dtype=dtype)
    i = tt.lvector("i")
    for z in (tt.inc_subtensor(x[:2], tt.zeros_like(y)), tt.inc_subtensor(x[i], tt.zeros_like(y))):
        f = theano_dag.function([x, y, i], z, on_unused_input="ignore")
        assert not any(isinstance(op, (IncSubtensor, AdvancedIncSubtensor1)) for op in _ops(f))
        v = np.arange(12, dtype=dtype).reshape(4, 3)
        np.testing.assert_array_equal(f(v, np.ones((2, 3), dtype), [0, 1]), v)


@pytest.mark.parametrize("dtype", DTYPES)
def test_setting_the_constant_a_value_holds_goes(dtype):
    x, y = tt.matrix("x", dtype=dtype), tt.matrix("y", dtype=dtype)
    z = tt.set_subtensor(tt.zeros_like(x)[:2], tt.zeros_like(y))
    f = theano_dag.function([x, y], z)
    assert not any(isinstance(op, IncSubtensor) for op in _ops(f))
    out = f(np.ones((4, 3), dtype), np.ones((2, 3), dtype))
    np.testing.assert_array_equal(out, np.zeros((4, 3), dtype))
    # a different constant is a real set
    z = tt.set_subtensor(tt.zeros_like(x)[:2], tt.ones_like(y))
    f = theano_dag.function([x, y], z)
    assert f(np.ones((4, 3), dtype), np.ones((2, 3), dtype)).sum() == 6


@pytest.mark.parametrize("dtype", DTYPES)
def test_increment_into_zeros_is_a_set(dtype):
    y = tt.matrix("y", dtype=dtype)
    z = tt.inc_subtensor(tt.constant(np.zeros((4, 4), dtype))[:2], y)
    f = theano_dag.function([y], z)
    incs = [op for op in _ops(f) if isinstance(op, IncSubtensor)]
    assert len(incs) == 1 and incs[0].set_instead_of_inc
    v = np.arange(8, dtype=dtype).reshape(2, 4)
    np.testing.assert_array_equal(f(v)[:2], v)


@pytest.mark.parametrize("dtype", DTYPES)
def test_product_with_zeros(dtype):
    x, y = tt.matrix("x", dtype=dtype), tt.matrix("y", dtype=dtype)
    f = theano_dag.function([x, y], tt.dot(tt.zeros_like(x), y))
    assert not any(isinstance(op, tt.Dot) or "Dot22" in str(op) for op in _ops(f))
    out = f(np.ones((2, 3), dtype), np.ones((3, 5), dtype))
    np.testing.assert_array_equal(out, np.zeros((2, 5), dtype))
    with pytest.raises((AssertionError, ValueError)):
        f(np.ones((2, 3), dtype), np.ones((4, 5), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_product_with_zeros_of_a_column_or_row_type(dtype):
    # The product of zeros and a column is a column: the zeros replacing it keep that
    # type (they were a matrix, and the rewrite was rolled back with a warning).
    x, n = tt.vector("x", dtype=dtype), tt.lscalar("n")
    cases = [
        (tt.dot(tt.alloc(np.asarray(0, dtype), n, 3), x.dimshuffle(0, "x")), (2, 1)),
        (tt.dot(x.dimshuffle("x", 0), tt.alloc(np.asarray(0, dtype), 3, n)), (1, 2)),
    ]
    for z, shape in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            f = theano_dag.function([n, x], z)
        assert not any(isinstance(op, tt.Dot) or "Dot22" in str(op) for op in _ops(f))
        out = f(2, np.arange(3, dtype=dtype))
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, np.zeros(shape, dtype))
        with pytest.raises((AssertionError, ValueError)):
            f(2, np.arange(4, dtype=dtype))


@pytest.mark.parametrize("mode", ["FAST_RUN", theano_dag.compile.mode.Mode(linker="cpu")])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_of_scalars_and_slices_of_a_flat_vector_is_one_chain(dtype, mode):
    """A flat vector unpacked into scalars and two slices (a sampler's parameters): the
    gradient's increments into zeros are one chain written into one array, not one
    array per piece summed (two slices among scalars do not tile the vector: no join)."""
    q = tt.vector("q", dtype=dtype)
    mu, a, s, b, e = q[0], q[1:5], q[5], q[6:10], q[10]
    cost = mu**2 + (a**2).sum() + tt.exp(s) + ((mu + tt.exp(s) * a) * b).sum() + 3 * e
    f = theano_dag.function([q], theano_dag.grad(cost, q), mode=mode)
    nodes = f.maker.fgraph.toposort()
    incs = [n for n in nodes if isinstance(n.op, IncSubtensor)]
    assert len(incs) == 5
    # each increment writes into the one before it; none is an input of an addition
    out = f.maker.fgraph.outputs[0]
    assert isinstance(out.owner.op, IncSubtensor)
    chain, v = [], out
    while v.owner is not None and isinstance(v.owner.op, IncSubtensor):
        chain.append(v.owner)
        v = v.owner.inputs[0]
    assert len(chain) == 5
    adds = [n for n in nodes if getattr(getattr(n.op, "scalar_op", None), "name", "") == "add"]
    assert not any(isinstance(i.owner.op, IncSubtensor) for n in adds for i in n.inputs if i.owner)
    qv = np.linspace(-0.5, 0.5, 11).astype(dtype)
    py = theano_dag.compile.mode.Mode(linker="py", optimizer=None)
    ref = theano_dag.function([q], theano_dag.grad(cost, q), mode=py)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(f(qv), ref(qv), rtol=tol, atol=tol)
    ex = np.exp(qv[5])
    want = np.zeros(11)
    want[0] = 2 * qv[0] + qv[6:10].sum()
    want[1:5] = 2 * qv[1:5] + ex * qv[6:10]
    want[5] = ex + ex * (qv[1:5] * qv[6:10]).sum()
    want[6:10] = qv[0] + ex * qv[1:5]
    want[10] = 3
    np.testing.assert_allclose(f(qv), want, rtol=10 * tol, atol=10 * tol)
