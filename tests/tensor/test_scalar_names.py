"""Theano's names in ``theano.scalar`` (``InRange``, ``floats``, ``ints``, ``inv``, the
bitwise operators of scalar variables, ``scalar.sharedvar``): values against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.scalar as ts
import theano_dag.tensor as tt
from theano_dag.graph.fg import FunctionGraph
from theano_dag.scalar.basic import InRange, floats, ints
from theano_dag.scalar.sharedvar import ScalarSharedVariable, shared
from theano_dag.tensor.elemwise import Elemwise


@pytest.mark.parametrize("linker", ["py", "cpu"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("openlow, openhigh", [(True, True), (False, False), (True, False)])
def test_in_range_elementwise(linker, dtype, openlow, openhigh):
    x, lo, hi = tt.vector("x", dtype=dtype), tt.scalar("lo", dtype=dtype), tt.scalar(dtype=dtype)
    out = Elemwise(InRange(openlow, openhigh))(x, lo, hi)
    assert out.dtype == "bool"
    f = theano_dag.function([x, lo, hi], out, mode=theano_dag.Mode(linker=linker))
    xv = np.array([0.0, 1.0, 2.5, 5.0, 6.0], dtype=dtype)
    above = xv > 1 if openlow else xv >= 1
    below = xv < 5 if openhigh else xv <= 5
    np.testing.assert_array_equal(f(xv, 1, 5), above & below)
    g = tt.grad(tt.cast(out, dtype).sum(), x, disconnected_inputs="ignore")
    h = theano_dag.function([x, lo, hi], g, on_unused_input="ignore")
    np.testing.assert_array_equal(h(xv, 1, 5), 0 * xv)


def test_named_scalar_variables_and_inv():
    x, y, z = floats("xyz")
    assert [v.name for v in (x, y, z)] == ["x", "y", "z"] and x.type.dtype == "float64"
    (i,) = [ints("i")]
    assert i.name == "i" and i.type.dtype == "int64" and len(ints(3)) == 3
    assert ts.inv is ts.reciprocal and ts.basic.inv is ts.reciprocal
    assert ts.basic.InRange is InRange


def test_bitwise_operators_of_scalar_variables():
    a, b = ts.int32("a"), ts.int32("b")
    p, q = ts.bool_("p"), ts.bool_("q")
    outs = [a & b, a | b, a ^ b, ~a, p & q, p | q, p ^ q, ~p, 3 & a]
    fn = theano_dag.function([a, b, p, q], [ts.as_scalar(o) for o in outs])
    got = fn(12, 10, True, False)
    assert [int(v) for v in got] == [8, 14, 6, ~12, 0, 1, 1, 0, 0]
    assert FunctionGraph([a, b], [a & b]).outputs[0].owner.op == ts.and_


def test_scalar_shared_variable():
    s = shared(np.float32(1.5), name="s")
    assert isinstance(s, ScalarSharedVariable) and s.type.dtype == "float32"
    assert (s * 2).type.dtype == "float32"
    assert shared(3).type.dtype == "int64" and shared(2.0).type.dtype == "float64"
    with pytest.raises(TypeError, match="not a number"):
        shared([1.0])


def test_theanos_class_names_of_maximum_and_minimum():
    x, y = ts.float64("x"), ts.float64("y")
    assert isinstance(ts.maximum(x, y).owner.op, ts.ScalarMaximum)
    assert isinstance(ts.minimum(x, y).owner.op, ts.ScalarMinimum)
    assert ts.basic.ScalarMaximum is ts.ScalarMaximum


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_composite_applied_to_inputs_of_other_dtypes(dtype):
    """Theano's Composite.make_node takes inputs of any dtypes: the composite is remade
    for them, and computes in their dtypes (values against numpy)."""
    i0, i1, f = ts.int8(), ts.int8(), ts.float32()
    c = ts.Composite([i0, i1, f], [(i0 * i1) / f])
    x, y, z = ts.get_scalar_type(dtype)("x"), ts.int8("y"), ts.float32("z")
    node = c.make_node(x * z, y, z)
    assert node.op.in_dtypes == (dtype, "int8", "float32")
    assert node.outputs[0].type.dtype == dtype
    fn = theano_dag.function([x, y, z], node.outputs[0], mode="PerformOnly")
    xv, yv, zv = getattr(np, dtype)(1.5), np.int8(3), np.float32(0.25)
    expected = (xv * zv * yv) / zv
    assert fn(xv, yv, zv) == pytest.approx(expected) and np.asarray(fn(xv, yv, zv)).dtype == dtype
    # the composite's own dtypes: itself
    assert c.make_node(i0, i1, f).op is c
