"""abs through products: ``local_abs_lift`` (canonicalize), ``x / |x| -> sgn(x)`` in the
product canonizer, and ``local_abs_merge`` (specialize), as Theano does them."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import get_default_mode


def _mode():
    return get_default_mode().excluding("local_elemwise_fusion")


def _ops(f):
    return [n.op for n in f.maker.fgraph.toposort()]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_x_over_abs_x_is_sgn_and_finite_at_zero(dtype):
    x = tt.scalar("x", dtype=dtype)
    f = theano_dag.function([x], (4 * x) / abs(2 * x), mode=_mode())
    h = theano_dag.function([x], (4 * x) / abs(x / 2), mode=_mode())
    for v in [0.0, 0.1, -1.0, 3.0]:
        a, b = f(np.asarray(v, dtype=dtype)), h(np.asarray(v, dtype=dtype))
        assert a.dtype == dtype and b.dtype == dtype
        np.testing.assert_allclose([a, b], [2 * np.sign(v), 8 * np.sign(v)])
    assert [o.scalar_op for o in _ops(f)] == [tt.sgn.scalar_op, tt.mul.scalar_op]


def test_abs_of_a_product_stays_one_abs():
    # lifted in canonicalize, merged back in specialize
    x, y = tt.dvectors("x", "y")
    f = theano_dag.function([x, y], abs(x * y) * 2, mode=_mode())
    xv, yv = np.array([-1.5, 2.0, 0.0]), np.array([3.0, -4.0, 1.0])
    np.testing.assert_allclose(f(xv, yv), np.abs(xv * yv) * 2)
    abs_nodes = [o for o in _ops(f) if getattr(o, "scalar_op", None) == tt.abs.scalar_op]
    assert len(abs_nodes) == 1


def test_abs_of_a_shared_product_is_not_lifted():
    # x * y is used twice: lifting would compute two abs and a second product
    x, y = tt.dvectors("x", "y")
    p = x * y
    f = theano_dag.function([x, y], [abs(p), p], mode=_mode())
    xv, yv = np.array([-1.5, 2.0]), np.array([3.0, -4.0])
    a, b = f(xv, yv)
    np.testing.assert_allclose(a, np.abs(xv * yv))
    assert sum(getattr(o, "scalar_op", None) == tt.mul.scalar_op for o in _ops(f)) == 1


def test_excluding_local_abs_lift_keeps_the_quotient():
    x = tt.dscalar("x")
    f = theano_dag.function([x], (4 * x) / abs(2 * x), mode=_mode().excluding("local_abs_lift"))
    assert np.isnan(f(0.0))
    assert f(-2.0) == -2.0


def test_abs_used_elsewhere_is_not_merged():
    # |x| is an output too: merging |x| * |y| would add a product and an abs
    x, y = tt.dvectors("x", "y")
    ax = abs(x)
    f = theano_dag.function([x, y], [ax * abs(y), ax], mode=_mode())
    xv, yv = np.array([-1.5, 2.0]), np.array([3.0, -4.0])
    a, b = f(xv, yv)
    np.testing.assert_allclose(a, np.abs(xv) * np.abs(yv))
    np.testing.assert_allclose(b, np.abs(xv))
    assert sum(getattr(o, "scalar_op", None) == tt.abs.scalar_op for o in _ops(f)) == 2
    assert len(_ops(f)) == 3
