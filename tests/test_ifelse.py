"""``ifelse``: values, lists of outputs, types, errors, gradients, shapes, and the
documented difference from Theano (both branches are computed)."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.ifelse import IfElse, ifelse

MODES = ["PerformOnly", None, "FAST_COMPILE"]


@pytest.mark.parametrize("mode", MODES)
def test_picks_a_branch(mode):
    a, b = tt.dscalars("a", "b")
    x, y = tt.dvectors("x", "y")
    f = theano_dag.function([a, b, x, y], ifelse(tt.lt(a, b), x * 2, y + 1), mode=mode)
    xv, yv = np.array([1.0, 2.0]), np.array([5.0, 6.0, 7.0])
    np.testing.assert_array_equal(f(1.0, 2.0, xv, yv), xv * 2)
    np.testing.assert_array_equal(f(3.0, 2.0, xv, yv), yv + 1)  # another shape


@pytest.mark.parametrize("cond", [0, 1, -3, 2.5, True])
def test_condition_nonzero_means_then(cond):
    c = tt.as_tensor_variable(np.asarray(cond))
    x = tt.dvector("x")
    got = theano_dag.function([x], ifelse(c, x, -x))(np.ones(2))
    np.testing.assert_array_equal(got, np.ones(2) if cond else -np.ones(2))


def test_lists_and_tuples():
    c = tt.lscalar("c")
    x, y = tt.dvector("x"), tt.dmatrix("y")
    outs = ifelse(c, [x, y], [x * 2, y.T])
    assert isinstance(outs, list) and len(outs) == 2
    assert isinstance(ifelse(c, (x, y), (x, y)), tuple)
    assert all(o.owner is outs[0].owner for o in outs)  # one node, two outputs
    f = theano_dag.function([c, x, y], outs)
    yv = np.arange(6.0).reshape(2, 3)
    got_x, got_y = f(0, np.ones(2), yv)
    np.testing.assert_array_equal(got_x, 2 * np.ones(2))
    np.testing.assert_array_equal(got_y, yv.T)
    got_x, got_y = f(1, np.ones(2), yv)
    np.testing.assert_array_equal(got_y, yv)


def test_output_types():
    c = tt.bscalar("c")
    three = tt.TensorType("float64", shape=(3, None))("three")
    four = tt.TensorType("float64", shape=(4, None))("four")
    assert ifelse(c, three, three).type == three.type
    assert ifelse(c, three, four).type == tt.TensorType("float64", shape=(None, None))
    assert ifelse(c, 1.0, tt.dscalar("s")).dtype == "float64"


def test_errors():
    c = tt.lscalar("c")
    x = tt.dvector("x")
    with pytest.raises(TypeError, match="should have the same type.*float32"):
        ifelse(c, x, tt.fvector("f"))
    with pytest.raises(TypeError, match="should have the same type"):
        ifelse(c, x, tt.dmatrix("m"))
    with pytest.raises(TypeError, match="the condition must be a scalar"):
        ifelse(tt.lvector("v"), x, x)
    with pytest.raises(ValueError, match="then branch has 2 values and the else branch 1"):
        ifelse(c, [x, x], [x])
    with pytest.raises(TypeError, match="expected a condition and 2 branch values"):
        IfElse(1)(c, x)
    with pytest.raises(TypeError, match="n_outs must be a positive int"):
        IfElse(0)


def test_output_is_a_copy():
    c = tt.lscalar("c")
    x = tt.dvector("x")
    value = np.ones(3)
    out = theano_dag.function([c, x], ifelse(c, x, x), mode="PerformOnly")(1, value)
    assert not np.shares_memory(out, value)


def test_both_branches_are_computed():
    """Unlike Theano's lazy VM, an error in the branch not taken still raises."""
    c = tt.lscalar("c")
    x = tt.dvector("x")
    bad = tt.specify_shape(x, (5,))  # wrong for the values given below
    f = theano_dag.function([c, x], ifelse(c, x, bad))
    with pytest.raises(ValueError, match=r"expected shape \(5,\)"):
        f(1, np.ones(3))


def test_infer_shape_follows_the_condition():
    c = tt.lscalar("c")
    x, y = tt.dmatrices("x", "y")
    out = ifelse(c, x, y)
    f = theano_dag.function([c, x, y], out.shape, mode="PerformOnly")
    assert f(1, np.ones((2, 3)), np.ones((4, 5))).tolist() == [2, 3]
    assert f(0, np.ones((2, 3)), np.ones((4, 5))).tolist() == [4, 5]
    node = out.owner
    same = node.op.infer_shape(None, node, [(), (2, 3), (2, 3)])
    assert same == [(2, 3)]  # equal lengths need no switch


@pytest.mark.parametrize("cond", [0, 1])
def test_grad_masks_the_branch_not_taken(cond):
    c = tt.lscalar("c")
    x, y = tt.dvectors("x", "y")
    cost = (ifelse(c, x**2, y * 3) * tt.constant(np.array([1.0, 2.0]))).sum()
    gx, gy, gc = theano_dag.grad(cost, [x, y, c])
    f = theano_dag.function([c, x, y], [gx, gy, gc])
    xv, yv = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    got_x, got_y, got_c = f(cond, xv, yv)
    np.testing.assert_allclose(got_x, 2 * xv * [1, 2] if cond else 0)
    np.testing.assert_allclose(got_y, 0 if cond else np.array([3.0, 6.0]))
    assert float(got_c) == 0.0


def test_grad_of_one_output_of_many():
    c = tt.lscalar("c")
    x, y = tt.dvectors("x", "y")
    a, b = ifelse(c, [x, y], [y, x])
    gx = theano_dag.grad(a.sum(), x)  # b is unused: its gradients are disconnected
    f = theano_dag.function([c, x, y], gx)
    np.testing.assert_array_equal(f(1, np.ones(2), np.ones(2)), np.ones(2))
    np.testing.assert_array_equal(f(0, np.ones(2), np.ones(2)), np.zeros(2))


def test_r_op():
    c = tt.lscalar("c")
    x = tt.dvector("x")
    v = tt.dvector("v")
    jv = theano_dag.Rop(ifelse(c, x**2, x * 3), x, v)
    f = theano_dag.function([c, x, v], jv)
    xv, vv = np.array([1.0, 2.0]), np.array([1.0, 1.0])
    np.testing.assert_allclose(f(1, xv, vv), 2 * xv)
    np.testing.assert_allclose(f(0, xv, vv), [3.0, 3.0])


def test_generic_values():
    from theano_dag.graph.type import Generic

    c = tt.lscalar("c")
    a, b = Generic()("a"), Generic()("b")
    out = ifelse(c, a, b)
    f = theano_dag.function([c, a, b], out, mode="PerformOnly")
    assert f(1, [1, 2], "no") == [1, 2] and f(0, [1, 2], "no") == "no"


def test_numbers_take_the_other_branch_dtype():
    c = tt.lscalar("c")
    x, i = tt.fvector("x"), tt.ivector("i")
    assert ifelse(c, 0.5, x.sum()).dtype == "float32"
    assert ifelse(c, i, np.arange(2)).dtype == "int32"
    with pytest.raises(TypeError, match="should have the same type"):
        ifelse(c, i.sum(), 0.5)  # 0.5 is not an int32


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fast_run_returns_the_then_values_as_views(dtype):
    # Theano's cond_make_inplace: in FAST_RUN the IfElse is IfElse(n, as_view=True), which
    # returns the then-value without a copy (the else-value is still copied).
    c = tt.iscalar("c")
    x, y = tt.vector("x", dtype=dtype), tt.vector("y", dtype=dtype)
    i1, i2 = tt.ivector("i1"), tt.ivector("i2")
    f = theano_dag.function([c, x, y, i1, i2], ifelse(c, (x * 2, i1 + 1), (y, i2)))
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, IfElse)]
    assert node.op == IfElse(2, as_view=True) and str(node.op) == "if{inplace}"
    assert node.op.view_map == {0: [1], 1: [2]}
    xv, yv = np.array([1, 2], dtype=dtype), np.array([3, 4, 5], dtype=dtype)
    iv, jv = np.array([1, 2], dtype="int32"), np.array([7], dtype="int32")
    a, b = f(1, xv, yv, iv, jv)
    assert a.dtype == dtype and b.dtype == "int32"
    np.testing.assert_allclose(a, xv * 2)
    np.testing.assert_array_equal(b, iv + 1)
    a, b = f(0, xv, yv, iv, jv)
    np.testing.assert_allclose(a, yv)
    np.testing.assert_array_equal(b, jv)
    assert not np.shares_memory(a, yv)
    g = theano_dag.function(
        [c, x, y, i1, i2],
        ifelse(c, (x * 2, i1 + 1), (y, i2)),
        mode=theano_dag.compile.mode.get_default_mode().excluding("inplace"),
    )
    (node,) = [n for n in g.maker.fgraph.toposort() if isinstance(n.op, IfElse)]
    assert not node.op.as_view and str(node.op) == "if{}"
    assert IfElse(1, name="pick", as_view=True).__str__() == "if{pick,inplace}"
