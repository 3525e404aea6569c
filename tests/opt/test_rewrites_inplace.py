"""Inplace rewrites: only values nothing else needs are overwritten, through the
DestroyHandler, and never a caller's input unless declared mutable."""

import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.io import In
from theano_dag.compile.mode import Mode
from theano_dag.graph.destroyhandler import DestroyHandler
from theano_dag.graph.fg import FunctionGraph, InconsistencyError
from theano_dag.graph.toolbox import Feature, Supervisor
from theano_dag.opt.rewrites.inplace import InplaceOptimizer

from .rewrite_helpers import fgraph_values

rng = np.random.default_rng(5)
MODE = Mode(linker="py", optimizer="fast_run").excluding("fusion")


def destroyers(fg):
    return [n for n in fg.toposort() if getattr(n.op, "destroy_map", None)]


def test_intermediate_results_are_overwritten_inputs_are_not():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.sin(tt.exp(x)), mode=MODE)
    (d,) = destroyers(f.maker.fgraph)
    assert str(d.op) == "Elemwise{sin,inplace}"
    a = rng.normal(size=4)
    before = a.copy()
    np.testing.assert_allclose(f(a), np.sin(np.exp(before)))
    np.testing.assert_array_equal(a, before)
    g = theano_dag.function([x], tt.exp(x), mode=MODE)
    assert not destroyers(g.maker.fgraph)


def test_a_value_read_twice_is_not_overwritten():
    x = tt.dvector("x")
    e = tt.exp(x)
    f = theano_dag.function([x], [tt.sin(e), tt.cos(e)], mode=MODE)
    assert not destroyers(f.maker.fgraph)
    a = rng.normal(size=3)
    got = f(a)
    np.testing.assert_allclose(got[0], np.sin(np.exp(a)))
    np.testing.assert_allclose(got[1], np.cos(np.exp(a)))


def test_views_are_not_overwritten():
    m = tt.dmatrix("m")
    e = tt.exp(m)
    f = theano_dag.function([m], [tt.sin(e.T), e[0]], mode=MODE)
    assert all(
        n.inputs[0].owner is None or "DimShuffle" not in str(n.inputs[0].owner.op)
        for n in destroyers(f.maker.fgraph)
    )
    a = rng.normal(size=(2, 3))
    out0, out1 = f(a)
    np.testing.assert_allclose(out1, np.exp(a)[0])


def test_mutable_inputs_may_be_overwritten():
    x = tt.dvector("x")
    f = theano_dag.function([In(x, mutable=True)], tt.exp(x), mode=MODE)
    (d,) = destroyers(f.maker.fgraph)
    assert d.inputs[0] is f.maker.fgraph.inputs[0]
    a = np.zeros(3)
    out = f(a)
    np.testing.assert_allclose(out, np.ones(3))


def test_outputs_are_never_overwritten():
    x = tt.dvector("x")
    e = tt.exp(x)
    f = theano_dag.function([x], [e, e + 1], mode=MODE)
    assert not destroyers(f.maker.fgraph)


def test_gemm_becomes_inplace_on_an_intermediate():
    z, x, y = (tt.dmatrix(n) for n in "zxy")
    f = theano_dag.function([z, x, y], tt.exp(z) + tt.dot(x, y), mode=MODE)
    assert [str(n.op) for n in destroyers(f.maker.fgraph)] == ["Gemm{inplace}"]


def test_shared_variable_updates_run_in_place():
    w = theano_dag.shared(np.ones(3), name="w")
    g = tt.dvector("g")
    f = theano_dag.function([g], [], updates={w: w - 0.5 * g}, mode=MODE)
    assert destroyers(f.maker.fgraph)
    f(np.ones(3))
    np.testing.assert_allclose(w.get_value(), [0.5, 0.5, 0.5])


def test_a_weight_read_by_the_forward_pass_is_updated_by_gemm_in_place():
    # w <- w - lr * dot(x.T, g): the forward pass reads w (and its transpose) first, so
    # the Gemm may overwrite w only after those readers; the DestroyHandler orders them.
    w = theano_dag.shared(rng.normal(size=(4, 3)), name="w")
    x = tt.dmatrix("x")
    h = tt.dot(x, w)
    back = tt.dot(h, w.T)
    g = h * 2.0
    f = theano_dag.function([x], [back.sum()], updates={w: w - 0.1 * tt.dot(x.T, g)}, mode=MODE)
    fg = f.maker.fgraph
    gemms = [n for n in destroyers(fg) if str(n.op) == "Gemm{inplace}"]
    assert len(gemms) == 1 and gemms[0].inputs[0] is fg.inputs[-1]
    order = fg.toposort()
    readers = [n for n, _ in fg.clients[fg.inputs[-1]] if n is not gemms[0]]
    assert readers and all(order.index(n) < order.index(gemms[0]) for n in readers)
    w0, xv = w.get_value(), rng.normal(size=(5, 4))
    (got,) = f(xv)
    hv = xv @ w0
    np.testing.assert_allclose(got, (hv @ w0.T).sum())
    np.testing.assert_allclose(w.get_value(), w0 - 0.1 * xv.T @ (2 * hv))


def test_values_with_and_without_inplace_agree():
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    outs = [tt.exp(x * y) - tt.sin(x) * 2, tt.sqrt(tt.abs(x + y)) / 3]
    args = [rng.normal(size=(3, 3)), rng.normal(size=(3, 3))]
    a = theano_dag.function([x, y], outs, mode=MODE)(*args)
    b = theano_dag.function([x, y], outs, mode=MODE.excluding("inplace"))(*args)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v)


class _VetoFirstValidation(Feature):
    """Refuses the first validation: the batch of inplace changes must be undone and the
    changes made one at a time."""

    def __init__(self):
        self.calls = 0

    def validate(self, fgraph):
        self.calls += 1
        if self.calls == 1:
            raise InconsistencyError("no")
        return True


def test_a_refused_batch_is_retried_one_change_at_a_time():
    x = tt.dvector("x")
    fg = FunctionGraph([x], [tt.sin(tt.exp(tt.cos(x)))])
    veto = _VetoFirstValidation()
    fg.attach_feature(DestroyHandler())
    fg.attach_feature(Supervisor(fg.inputs))  # x is the caller's: cos must not overwrite it
    fg.attach_feature(veto)
    prof = InplaceOptimizer().optimize(fg)
    assert prof["inplace"] == 2 and veto.calls >= 3
    assert len(destroyers(fg)) == 2
    np.testing.assert_allclose(fgraph_values(fg, [np.zeros(2)])[0], np.sin(np.exp(1.0)))
