"""Rewrites of increments into zeros and products with zeros (Theano's names)."""

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
