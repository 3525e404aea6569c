"""Inplace rewrites: only values nothing else needs are overwritten, through the
DestroyHandler, and never a caller's input unless declared mutable."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.io import In
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu import CPULinker
from theano_dag.engines.cpu.native import ckernel
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.graph.destroyhandler import DestroyHandler
from theano_dag.graph.fg import FunctionGraph, InconsistencyError
from theano_dag.graph.toolbox import Feature, Supervisor
from theano_dag.opt.rewrites.inplace import InplaceOptimizer
from theano_dag.tensor.subtensor import AdvancedIncSubtensor, AdvancedIncSubtensor1, IncSubtensor

from .rewrite_helpers import fgraph_values

rng = np.random.default_rng(5)
MODE = Mode(linker="py", optimizer="fast_run").excluding("fusion")
OCL_OK, OCL_WHY = opencl_available()


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


def test_an_input_made_more_specific_after_the_node_keeps_the_copy():
    # ``c - exp(x)`` was made when both were vectors of unknown length; a rewrite then
    # gave ``c`` a static shape (2,) (PyMC3 reshapes its free variables so). Made again,
    # the subtraction's output is (2,), which exp(x) is not: it may not overwrite it,
    # and the other changes are still made (the whole pass was rolled back, with an
    # OptimizationWarning, in PyMC3's test_step.py::TestNutsCheckTrace::test_linalg).
    a, x = tt.dvector("a"), tt.dvector("x")
    z = tt.cos(a) - tt.exp(x)
    fg = FunctionGraph([a, x], [tt.sin(z)])
    (sub,) = [n for n in fg.apply_nodes if n.op.scalar_op.name == "sub"]
    c = tt.reshape(fg.inputs[0] * 2, (2,))
    assert c.type.shape == (2,)
    fg.replace(sub.inputs[0], c)
    fg.attach_feature(DestroyHandler())
    fg.attach_feature(Supervisor(fg.inputs))
    prof = InplaceOptimizer().optimize(fg)
    assert [str(n.op) for n in destroyers(fg)] == ["Elemwise{sin,inplace}"]
    assert prof["inplace"] == 1
    av, xv = np.array([0.5, -1.0]), np.array([0.3, 0.2])
    got = fgraph_values(fg, [av, xv])[0]
    np.testing.assert_allclose(got, np.sin(av * 2 - np.exp(xv)))


# -- set/inc_subtensor ------------------------------------------------------------------

SUBTENSOR_ENGINES = {
    "py": (lambda: Mode(linker="py", optimizer="fast_run"), {}),
    "cpu_numpy": (lambda: Mode(linker="cpu", optimizer="fast_run"), {"cxx": ""}),
    "cpu_c": (lambda: Mode(linker="cpu", optimizer="fast_run"), {}),
    "cpu_poisoned": (
        lambda: Mode(linker=CPULinker(min_plan_bytes=0, poison=True), optimizer="fast_run"),
        {},
    ),
    "opencl": (lambda: Mode(linker="opencl", optimizer="fast_run"), {}),
}
SUBTENSOR_ENGINE_PARAMS = [
    "py",
    "cpu_numpy",
    "cpu_c",
    "cpu_poisoned",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]


def _compile(engine, inputs, outputs):
    mode, flags = SUBTENSOR_ENGINES[engine]
    with config.change_flags(**flags), ckernel.compile_mode("sync"):
        return theano_dag.function(inputs, outputs, mode=mode())


def _flat_gradient_chain():
    """A gradient wrt a flat vector unpacked into pieces, as a sampler's logp builds it:
    zeros, then set/inc_subtensor of each piece's gradient, one after the other."""
    q = tt.dvector("q")
    a, b, c = q[0], q[1:4], q[4]
    cost = tt.exp(a) * tt.sum(b**2) + tt.sin(c) * a + tt.sum(tt.cos(b) * c)
    return q, [cost, theano_dag.grad(cost, q)]


def _chain_reference(qv):
    a, b, c = qv[0], qv[1:4], qv[4]
    g = np.empty(5)
    g[0] = np.exp(a) * np.sum(b**2) + np.sin(c)
    g[1:4] = np.exp(a) * 2 * b - np.sin(b) * c
    g[4] = np.cos(c) * a + np.sum(np.cos(b))
    return np.exp(a) * np.sum(b**2) + np.sin(c) * a + np.sum(np.cos(b) * c), g


def _inc_nodes(fg):
    incs = (IncSubtensor, AdvancedIncSubtensor1, AdvancedIncSubtensor)
    return [n for n in fg.toposort() if isinstance(n.op, incs)]


@pytest.mark.parametrize("engine", SUBTENSOR_ENGINE_PARAMS)
def test_a_gradient_s_set_inc_subtensor_chain_writes_one_array(engine):
    q, outs = _flat_gradient_chain()
    f = _compile(engine, [q], outs)
    incs = _inc_nodes(f.maker.fgraph)
    assert len(incs) >= 2 and all(n.op.inplace for n in incs), [str(n.op) for n in incs]
    assert all(n.op.destroy_map == {0: [0]} for n in incs)
    # Each link writes into the previous link's result, which nothing else reads.
    for n in incs:
        assert len(f.maker.fgraph.clients[n.inputs[0]]) == 1
    qv = np.array([0.3, -1.2, 0.7, 2.0, -0.4])
    before = qv.copy()
    for _ in range(3):  # the writes do not leak from one call into the next
        cost, g = f(qv)
        want_cost, want_g = _chain_reference(before)
        np.testing.assert_allclose(cost, want_cost, rtol=1e-12)
        np.testing.assert_allclose(g, want_g, rtol=1e-12)
        np.testing.assert_array_equal(qv, before)  # the caller's input is never written
    if engine.startswith("cpu"):
        assert not np.shares_memory(f(qv)[1], f(qv)[1])


@pytest.mark.parametrize("engine", SUBTENSOR_ENGINE_PARAMS)
def test_inc_subtensor_kinds_become_inplace_on_intermediates_only(engine):
    x, y, i = tt.dvector("x"), tt.dvector("y"), tt.lvector("i")
    m = tt.dmatrix("m")
    e = tt.exp(x)
    outs = [
        tt.inc_subtensor(tt.tanh(x)[1:3], y[:2]),  # basic: writes into tanh(x)
        tt.inc_subtensor(tt.sin(x)[i], y[: i.shape[0]]),  # AdvancedIncSubtensor1, repeats
        tt.set_subtensor(tt.cos(m)[i, i], y[: i.shape[0]]),  # AdvancedIncSubtensor
        tt.inc_subtensor(x[:2], y[:2]),  # x is the caller's: copied, not written
        tt.set_subtensor(e[:1], y[:1]) + e,  # e is read again: copied
    ]
    f = _compile(engine, [x, y, i, m], outs)
    inplace = sorted(type(n.op).__name__ for n in _inc_nodes(f.maker.fgraph) if n.op.inplace)
    assert inplace == ["AdvancedIncSubtensor", "AdvancedIncSubtensor1", "IncSubtensor"]
    for n in _inc_nodes(f.maker.fgraph):
        if n.op.inplace:
            assert n.inputs[0].owner is not None and n.inputs[0] not in f.maker.fgraph.inputs
    xv, yv = rng.normal(size=5), rng.normal(size=5)
    iv, mv = np.array([3, 0, 3]), rng.normal(size=(4, 4))
    args = [xv.copy(), yv.copy(), iv.copy(), mv.copy()]
    got = f(*args)
    ev = np.exp(xv)
    w0 = np.tanh(xv)
    w0[1:3] += yv[:2]
    w1 = np.sin(xv)
    np.add.at(w1, iv, yv[:3])
    w2 = np.cos(mv)
    w2[iv, iv] = yv[:3]
    w3 = xv.copy()
    w3[:2] += yv[:2]
    w4 = ev.copy()
    w4[:1] = yv[:1]
    for g, w in zip(got, [w0, w1, w2, w3, w4 + ev]):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    for a, b in zip(args, [xv, yv, iv, mv]):
        np.testing.assert_array_equal(a, b)


def test_inc_subtensor_into_a_view_stays_a_copy():
    x, y = tt.dvector("x"), tt.dscalar("y")
    e = tt.exp(x)
    view = e[::-1]  # overwriting the view would write into exp(x)
    inc = tt.inc_subtensor(view[:2], y)
    fg = FunctionGraph([x, y], [inc, tt.set_subtensor(tt.sin(x)[1:], y)])
    fg.attach_feature(DestroyHandler())
    fg.attach_feature(Supervisor(fg.inputs))
    prof = InplaceOptimizer().optimize(fg)
    assert prof["inplace"] == 1
    (kept, made) = _inc_nodes(fg)
    assert not kept.op.inplace and str(kept.inputs[0].owner.op) == "Subtensor{::int64}"
    assert made.op.inplace and made.op.set_instead_of_inc
    assert str(made.inputs[0].owner.op) == "Elemwise{sin,no_inplace}"
    xv = rng.normal(size=4)
    got = fgraph_values(fg, [xv, np.array(1.5)])
    np.testing.assert_allclose(got[0], np.exp(xv)[::-1] + np.array([1.5, 1.5, 0, 0]))
    np.testing.assert_allclose(got[1], np.r_[np.sin(xv[0]), 1.5, 1.5, 1.5])
