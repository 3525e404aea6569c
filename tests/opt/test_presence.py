"""Rewrites that say what they need (``local_optimizer(..., needs=...)``): the graph's
op counts (``OpPresence``) and the navigator skipping a rewrite while the graph holds
none of what it needs, with the same result as trying it everywhere."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.graph.basic import is_same_graph
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.rewriting.local import LocalOptGroup, TrackIndex
from theano_dag.graph.rewriting.navigator import TopoOptimizer
from theano_dag.graph.rewriting.presence import OpPresence, needs_of, presence_keys
from theano_dag.opt import EquilibriumOptimizer, PatternSub, in2out, local_optimizer
from theano_dag.tensor.elemwise import Elemwise

from .toy_ops import (
    ToyBinary,
    ToyExp,
    ToyLog,
    ToyMul,
    ToyNeg,
    ToyUnary,
    add,
    double,
    exp,
    log,
    mul,
    neg,
)


def test_presence_counts_follow_the_graph():
    x, y = double("x"), double("y")
    fg = FunctionGraph([x, y], [add(exp(x), y)], features=[OpPresence()])
    p = fg.op_presence
    assert p.holds((ToyExp,)) and not p.holds((ToyLog,))
    assert p.holds((ToyBinary,))  # a subclass held counts for its base class
    assert p.holds((ToyLog, ToyExp))  # any of the needs
    gen = p.generation
    X, Y = fg.inputs
    fg.replace(fg.outputs[0], add(log(X), Y))
    assert p.holds((ToyLog,)) and not p.holds((ToyExp,))
    assert p.counts[ToyExp] == 0 and p.counts[ToyLog] == 1
    assert p.generation == gen + 1  # a class appeared


def test_presence_keys_of_an_elemwise_name_its_scalar_op():
    node = tt.exp(tt.dvector()).owner
    assert presence_keys(node) == (Elemwise, type(ts.exp))
    x = tt.dvector("x")
    fg = FunctionGraph([x], [tt.exp(x) * 2], features=[OpPresence()])
    assert fg.op_presence.holds((ts.Mul,)) and not fg.op_presence.holds((type(ts.sigmoid),))


def test_needs_of():
    @local_optimizer(None, needs=[ToyLog])
    def local_needs_log(fgraph, node):
        return False

    @local_optimizer(None)
    def local_needs_nothing(fgraph, node):
        return False

    assert needs_of(local_needs_log) == (ToyLog,)
    assert needs_of(local_needs_nothing) is None
    assert needs_of(PatternSub((neg, (neg, "x")), "x")) is None


def _spy(needs, calls):
    """A rewrite tracking every node that records the nodes it is tried on; it
    rewrites ``neg(log(a))`` into ``log(neg(a))``, which needs a log in the graph."""

    @local_optimizer(None, needs=needs)
    def local_spy(fgraph, node):
        calls.append(node)
        if isinstance(node.op, type(neg)) and node.inputs[0].owner is not None:
            inner = node.inputs[0].owner
            if isinstance(inner.op, ToyLog):
                return [log(neg(inner.inputs[0]))]
        return False

    return local_spy


def test_a_rewrite_is_not_tried_on_a_graph_without_what_it_needs():
    x = double("x")
    calls = []
    fg = FunctionGraph([x], [neg(exp(mul(x, x)))])
    EquilibriumOptimizer([_spy([ToyLog], calls)], max_use_ratio=4).optimize(fg)
    assert calls == []
    # Without needs it is tried on every node, and changes nothing either.
    fg2 = FunctionGraph([x], [neg(exp(mul(x, x)))])
    EquilibriumOptimizer([_spy(None, calls)], max_use_ratio=4).optimize(fg2)
    assert len(calls) == 3
    assert is_same_graph(fg.outputs[0], fg2.outputs[0], givens={fg2.inputs[0]: fg.inputs[0]})


def test_a_rewrite_becomes_active_when_another_adds_what_it_needs():
    # exp(x) -> log(x) (a toy rule) makes the log that the spy's rule needs, in the
    # same pass: the result is that of trying the spy everywhere. The product, visited
    # before, met no log.
    def run(needs):
        x = double("x")
        fg = FunctionGraph([x], [neg(exp(mul(x, x)))])
        to_log = PatternSub((exp, "x"), (log, "x"), name="exp_to_log")
        calls = []
        EquilibriumOptimizer([to_log, _spy(needs, calls)], max_use_ratio=4).optimize(fg)
        return fg, calls

    gated, gated_calls = run([ToyLog])
    plain, plain_calls = run(None)
    X = gated.inputs[0]
    assert is_same_graph(gated.outputs[0], log(neg(mul(X, X))))
    assert is_same_graph(gated.outputs[0], plain.outputs[0], givens={plain.inputs[0]: X})
    assert 0 < len(gated_calls) < len(plain_calls)


def test_optimized_functions_keep_their_values_and_graph():
    # The gated rules of the standard optdb (here: alloc and switch rules) still
    # apply where the graph holds what they need.
    x, y = tt.dvector("x"), tt.dvector("y")
    c = x > 0
    out = tt.switch(c, x, y) + tt.switch(c, y, x) + tt.alloc(2.0, x.shape[0])
    f = theano_dag.function([x, y], out)
    ops = [type(getattr(n.op, "scalar_op", n.op)).__name__ for n in f.maker.fgraph.toposort()]
    assert "Alloc" not in ops  # local_elemwise_alloc / drop_broadcast applied
    a, b = np.array([1.0, -2.0, 3.0]), np.array([0.5, 4.0, -1.0])
    np.testing.assert_allclose(
        f(a, b), np.where(a > 0, a, b) + np.where(a > 0, b, a) + 2.0, rtol=1e-12
    )


def test_a_pass_of_rewrites_none_of_which_can_apply_visits_nothing():
    x = double("x")
    calls = []
    fg = FunctionGraph([x], [neg(exp(mul(x, x)))])
    prof = EquilibriumOptimizer([_spy([ToyLog], calls)], max_use_ratio=4).optimize(fg)
    assert calls == [] and prof.visited == 0 and prof.changes == 0
    # With a rule that may apply anywhere beside it, the pass runs (and the gated one
    # still is not tried).
    to_neg = PatternSub((neg, (neg, "x")), "x", name="neg_neg")
    prof = EquilibriumOptimizer([to_neg, _spy([ToyLog], calls)], max_use_ratio=4).optimize(fg)
    assert calls == [] and prof.visited == 3


def _tracking_spy(tracks, calls):
    """A rewrite tracking ``tracks`` that records the nodes it is tried on and
    changes nothing."""

    @local_optimizer(tracks)
    def local_tracking_spy(fgraph, node):
        calls.append(node)
        return False

    return local_tracking_spy


def test_track_index_can_meet_classes_and_instances():
    tracks_log = _tracking_spy([ToyLog], [])
    tracks_exp_instance = _tracking_spy([exp], [])
    tracks_all = _tracking_spy(None, [])
    assert TrackIndex([tracks_log]).can_meet([ToyExp, ToyLog])
    assert not TrackIndex([tracks_log]).can_meet([ToyExp, ToyBinary])
    # A class tracked matches its subclasses; an instance matches the class of the op.
    assert TrackIndex([_tracking_spy([ToyUnary], [])]).can_meet([ToyLog])
    assert TrackIndex([tracks_exp_instance]).can_meet([ToyExp])
    assert not TrackIndex([tracks_exp_instance]).can_meet([ToyLog])
    # A rewrite with no tracks meets every node, but no node means nothing to meet.
    assert TrackIndex([tracks_log, tracks_all]).can_meet([ToyExp])
    assert not TrackIndex([tracks_all]).can_meet([])


def test_a_pass_of_an_empty_group_meets_no_node():
    # A pass whose rewrites are registered by a module not imported (ifelse's
    # lazy_branches) is an empty group: it meets nothing, and its pass sorts nothing.
    assert not TrackIndex([LocalOptGroup()]).can_meet([ToyExp])
    x = double("x")
    fg = FunctionGraph([x], [neg(exp(x))], features=[OpPresence()])
    sorts = []
    toposort = fg.toposort
    fg.toposort = lambda: sorts.append(1) or toposort()
    prof = TopoOptimizer(LocalOptGroup()).optimize(fg)
    assert prof.visited == 0 and sorts == []


@pytest.mark.parametrize("navigator", ["topo", "equilibrium"])
def test_a_pass_whose_rewrites_track_no_op_of_the_graph_is_skipped(navigator):
    # A graph of exp, mul and neg: a rewrite tracking log would meet no node, and the
    # pass returns at once, without sorting the graph.
    def run(rewrite):
        x = double("x")
        fg = FunctionGraph([x], [neg(exp(mul(x, x)))], features=[OpPresence()])
        sorts = []
        toposort = fg.toposort
        fg.toposort = lambda: sorts.append(1) or toposort()
        if navigator == "topo":
            prof = in2out(rewrite).optimize(fg)
        else:
            prof = EquilibriumOptimizer([rewrite], max_use_ratio=4).optimize(fg)
        return prof, len(sorts)

    calls = []
    prof, sorts = run(_tracking_spy([ToyLog], calls))
    assert calls == [] and prof.visited == 0 and sorts == 0
    # Tracking an op the graph holds, the rewrite is tried on those nodes only.
    prof, sorts = run(_tracking_spy([ToyExp], calls))
    assert [type(n.op) for n in calls] == [ToyExp] and prof.visited == 1 and sorts == 1
    # A user's rewrite without tracks still sees every node.
    calls.clear()
    prof, sorts = run(_tracking_spy(None, calls))
    assert {type(n.op) for n in calls} == {ToyMul, ToyExp, ToyNeg} and prof.visited == 3


def test_a_skipped_pass_still_runs_once_a_rewrite_adds_what_it_tracks():
    # A rule on log nodes meets nothing in neg(exp(x)); once another pass made the log,
    # the same rule's pass runs and applies.
    @local_optimizer([ToyLog])
    def local_log_to_neg(fgraph, node):
        return [neg(node.inputs[0])]

    x = double("x")
    fg = FunctionGraph([x], [neg(exp(x))], features=[OpPresence()])
    prof = in2out(local_log_to_neg).optimize(fg)
    assert prof.visited == 0 and prof.changes == 0
    in2out(PatternSub((exp, "x"), (log, "x"), name="exp_to_log")).optimize(fg)
    prof = in2out(local_log_to_neg).optimize(fg)
    assert prof.visited == 1 and prof.changes == 1
    assert is_same_graph(fg.outputs[0], neg(neg(fg.inputs[0])))
