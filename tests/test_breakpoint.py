"""``PdbBreakpoint``: values pass through unchanged, shapes, gradients, and the stop."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.breakpoint import PdbBreakpoint
from theano_dag.graph.null_type import DisconnectedType


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_monitored_values_pass_through_with_their_gradients(dtype):
    x, s = tt.matrix("x", dtype=dtype), tt.scalar("s", dtype=dtype)
    out = tt.dot(x - s, (x - s).T)
    bx, bs, bout = PdbBreakpoint("big")(tt.gt(out.sum(), 1e9), x, s, out)
    xv = np.arange(6, dtype=dtype).reshape(2, 3)
    sv = np.asarray(1.5, dtype=dtype)
    f = theano_dag.function([x, s], [bx * 2, bs + 1, bout, bout.shape])
    got = f(xv, sv)
    np.testing.assert_allclose(got[0], xv * 2)
    np.testing.assert_allclose(got[1], sv + 1)
    np.testing.assert_allclose(got[2], (xv - sv) @ (xv - sv).T, rtol=1e-6)
    assert got[0].dtype == dtype and tuple(got[3]) == (2, 2)
    gx, gs = tt.grad(bx.sum() + 3 * bs, [x, s])
    g = theano_dag.function([x, s], [gx, gs, bx])(xv, sv)
    np.testing.assert_allclose(g[0], np.ones((2, 3)))
    np.testing.assert_allclose(g[1], 3.0)
    node = bout.owner
    assert node.op.connection_pattern(node) == [
        [False, False, False],
        [True, False, False],
        [False, True, False],
        [False, False, True],
    ]
    assert node.op.view_map == {0: [1], 1: [2], 2: [3]}
    assert isinstance(node.op.grad(node.inputs, [bx, bs, bout])[0].type, DisconnectedType)


def test_a_true_condition_stops_in_pdb(monkeypatch):
    stops = []
    monkeypatch.setattr("pdb.set_trace", lambda *a, **k: stops.append(True))
    x = tt.dvector("x")
    checked = PdbBreakpoint("positive sum")(tt.gt(x.sum(), 0), x)
    f = theano_dag.function([x], checked + 1)
    np.testing.assert_allclose(f(np.array([-1.0, -2.0])), [0.0, -1.0])
    assert stops == []
    np.testing.assert_allclose(f(np.array([1.0, 2.0])), [2.0, 3.0])
    assert stops == [True]


def test_errors():
    x = tt.dvector("x")
    with pytest.raises(TypeError, match="condition must be a scalar"):
        PdbBreakpoint("b")(x, x)
    with pytest.raises(TypeError, match="at least one variable"):
        PdbBreakpoint("b")(x.sum())
