"""Rewrites that say what they need (``local_optimizer(..., needs=...)``): the graph's
op counts (``OpPresence``) and the navigator skipping a rewrite while the graph holds
none of what it needs, with the same result as trying it everywhere."""

import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.graph.basic import is_same_graph
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.rewriting.presence import OpPresence, needs_of, presence_keys
from theano_dag.opt import EquilibriumOptimizer, PatternSub, local_optimizer
from theano_dag.tensor.elemwise import Elemwise

from .toy_ops import ToyBinary, ToyExp, ToyLog, add, double, exp, log, mul, neg


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
