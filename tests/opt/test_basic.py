"""The optimizer framework on toy ops: global/local optimizers, navigators, merge,
PatternSub, failure rollback, the loop guard and profiles."""

import io
import math
import threading
import warnings

import pytest

from theano_dag.config import config
from theano_dag.graph.basic import Constant, equal_computations, is_same_graph
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.rewriting.basic import opt_name
from theano_dag.graph.rewriting.merge import MergeFeature
from theano_dag.graph.rewriting.navigator import NavigatorOptimizer
from theano_dag.graph.toolbox import Feature, ReplaceValidate
from theano_dag.graph.utils import InconsistencyError
from theano_dag.opt import (
    ChangeLog,
    EquilibriumOptimizer,
    LocalOptGroup,
    LocalOptimizer,
    MaxUseRatioExceeded,
    MergeOptimizer,
    OpKeyOptimizer,
    OpRemove,
    OpSub,
    OptimizationAbort,
    OptimizationWarning,
    Optimizer,
    PatternSub,
    SeqOptimizer,
    TopoOptimizer,
    in2out,
    local_optimizer,
    merge_optimizer,
    optimizer,
    out2in,
    print_profile,
)

from .rewrite_helpers import count_calls
from .toy_ops import (
    ToyDiv,
    ToyMul,
    ToyNeg,
    ToyScale,
    add,
    const,
    div,
    double,
    exp,
    fgraph_eval,
    identity,
    log,
    mul,
    neg,
    sub,
    to_int,
    toy_pass,
)


@pytest.fixture
def xyz():
    return double("x"), double("y"), double("z")


def same(fg, expected, givens=None):
    """The single output of ``fg`` computes ``expected`` (built on fg's own inputs)."""
    fg.check_integrity()
    return is_same_graph(fg.outputs[0], expected, givens)


# ---------------------------------------------------------------------------
# The tutorial's rule, written three ways


class Simplify(Optimizer):
    def add_requirements(self, fgraph):
        fgraph.attach_feature(ReplaceValidate())

    def apply(self, fgraph):
        for node in fgraph.toposort():
            if node.op == div:
                x, y = node.inputs
                z = node.outputs[0]
                if x.owner and x.owner.op == mul:
                    a, b = x.owner.inputs
                    if y is a:
                        fgraph.replace_validate(z, b)
                    elif y is b:
                        fgraph.replace_validate(z, a)


class LocalSimplify(LocalOptimizer):
    """Written for Theano 1.0: transform(self, node) and tracks() returning []."""

    def transform(self, node):
        if node.op == div:
            x, y = node.inputs
            if x.owner and x.owner.op == mul:
                a, b = x.owner.inputs
                if y is a:
                    return [b]
                elif y is b:
                    return [a]
        return False

    def tracks(self):
        return []


def test_global_simplify(xyz):
    x, y, z = xyz
    fg = FunctionGraph([x, y, z], [add(z, mul(div(mul(y, x), y), div(z, x)))])
    Simplify().optimize(fg)
    X, Y, Z = fg.inputs
    assert same(fg, add(Z, mul(X, div(Z, X))))
    assert fgraph_eval(fg, [2.0, 3.0, 5.0]) == [5.0 + 2.0 * (5.0 / 2.0)]


def test_merge_then_simplify(xyz):
    x, y, z = xyz
    fg = FunctionGraph([x, y, z], [div(mul(add(y, z), x), add(y, z))])
    Simplify().optimize(fg)
    assert len(fg.apply_nodes) == 4  # add(y, z) is not add(y, z): nothing happens
    prof = merge_optimizer.optimize(fg)
    assert prof.merged == 1 and len(fg.apply_nodes) == 3
    assert str(fg) == "FunctionGraph(ToyDiv(ToyMul(*1 -> ToyAdd(y, z), x), *1))"
    Simplify().optimize(fg)
    assert fg.outputs[0] is fg.inputs[0]


def test_local_simplify_theano_1_signature(xyz):
    x, y, z = xyz
    fg = FunctionGraph([x, y, z], [add(z, mul(div(mul(y, x), y), div(z, x)))])
    lopt = LocalSimplify()
    assert lopt.transform(fg.outputs[0].owner) is False  # callable with the node only
    TopoOptimizer(lopt).optimize(fg)
    X, Y, Z = fg.inputs
    assert same(fg, add(Z, mul(X, div(Z, X))))


def test_local_optimizer_decorator_both_signatures(xyz):
    x, y, z = xyz

    @local_optimizer([ToyNeg])
    def local_neg_neg(fgraph, node):
        inner = node.inputs[0].owner
        if inner is not None and inner.op == neg:
            return [inner.inputs[0]]
        return False

    @local_optimizer([ToyNeg])
    def local_neg_neg_old(node):  # Theano 1.0 style: the node only
        return local_neg_neg.transform(None, node)

    for lopt in (local_neg_neg, local_neg_neg_old):
        fg = FunctionGraph([x], [exp(neg(neg(x)))])
        in2out(lopt).optimize(fg)
        assert same(fg, exp(fg.inputs[0]))
    assert local_neg_neg.tracks() == [ToyNeg]
    assert str(local_neg_neg) == "local_neg_neg"


def test_local_optimizer_decorator_checks_tracks():
    with pytest.raises(ValueError, match="use None instead of an empty list"):
        local_optimizer([])(lambda fgraph, node: False)
    with pytest.raises(ValueError, match="tracks must be Op classes or Op instances, got 3"):
        local_optimizer([3])(lambda fgraph, node: False)


def test_tracks_filter_and_subclasses(xyz):
    x, y, z = xyz
    seen = []

    @local_optimizer([ToyMul])
    def spy(fgraph, node):
        seen.append(node.op)
        return False

    fg = FunctionGraph([x, y], [add(mul(x, y), div(x, y))])
    TopoOptimizer(spy).optimize(fg)
    assert seen == [mul]

    class MyMul(ToyMul):  # a subclass of a tracked class is tracked too
        __props__ = ()

    seen.clear()
    fg = FunctionGraph([x, y], [MyMul()(x, y)])
    TopoOptimizer(spy).optimize(fg)
    assert len(seen) == 1


def test_topo_order(xyz):
    x, y, z = xyz
    order = []

    @local_optimizer(None)
    def spy(fgraph, node):
        order.append(str(node.op))
        return False

    fg = FunctionGraph([x], [log(exp(neg(x)))])
    TopoOptimizer(spy, order="in_to_out").optimize(fg)
    assert order == ["ToyNeg", "ToyExp", "ToyLog"]
    order.clear()
    TopoOptimizer(spy, order="out_to_in").optimize(fg)
    assert order == ["ToyLog", "ToyExp", "ToyNeg"]
    with pytest.raises(ValueError, match="order must be 'out_to_in' or 'in_to_out'"):
        TopoOptimizer(spy, order="sideways")


def test_topo_visits_new_nodes_unless_ignore_newtrees(xyz):
    x, y, z = xyz

    # scale(2k)(x) -> scale(2)(scale(k)(x)): a rule that matches a node it creates.
    @local_optimizer([ToyScale])
    def halve(fgraph, node):
        f = node.op.factor
        if f > 2 and f % 2 == 0:
            return [ToyScale(2)(ToyScale(f // 2)(node.inputs[0]))]
        return False

    fg = FunctionGraph([x], [ToyScale(16)(x)])
    TopoOptimizer(halve, ignore_newtrees=False).optimize(fg)
    assert len(fg.apply_nodes) == 4 and fgraph_eval(fg, [1.0]) == [16.0]
    fg = FunctionGraph([x], [ToyScale(16)(x)])
    TopoOptimizer(halve, ignore_newtrees=True).optimize(fg)
    assert len(fg.apply_nodes) == 2 and fgraph_eval(fg, [1.0]) == [16.0]


def test_navigator_helpers_group(xyz):
    x, y, z = xyz
    neg_neg = PatternSub((neg, (neg, "x")), "x")
    mul_one = PatternSub((mul, "x", 1.0), "x")
    nav = out2in(neg_neg, mul_one, name="simplify_stuff")
    assert isinstance(nav.local_opt, LocalOptGroup) and nav.order == "out_to_in"
    assert str(nav) == "simplify_stuff"
    fg = FunctionGraph([x], [exp(mul(neg(neg(x)), 1.0))])
    nav.optimize(fg)
    assert same(fg, exp(fg.inputs[0]))
    assert str(in2out(neg_neg)) == str(neg_neg)


def test_opsub_opremove(xyz):
    x, y, z = xyz
    fg = FunctionGraph([x, y], [div(add(x, y), add(y, x))])
    TopoOptimizer(OpSub(add, mul)).optimize(fg)
    X, Y = fg.inputs
    assert same(fg, div(mul(X, Y), mul(Y, X)))

    fg = FunctionGraph([x], [exp(identity(identity(x)))])
    TopoOptimizer(OpRemove(identity)).optimize(fg)
    assert same(fg, exp(fg.inputs[0]))

    a, b = toy_pass(x, y)
    fg = FunctionGraph([x, y], [sub(a, b)])
    TopoOptimizer(OpRemove(toy_pass)).optimize(fg)
    X, Y = fg.inputs
    assert same(fg, sub(X, Y))
    assert fgraph_eval(fg, [5.0, 3.0]) == [2.0]


def test_opkey_optimizer(xyz):
    x, y, z = xyz
    fg = FunctionGraph([x, y], [add(identity(x), identity(mul(x, y)))])
    OpKeyOptimizer(OpRemove(identity)).optimize(fg)
    X, Y = fg.inputs
    assert same(fg, add(X, mul(X, Y)))
    with pytest.raises(TypeError, match="op_key"):
        OpKeyOptimizer(local_optimizer(None)(lambda fg, node: False))


def test_local_opt_group_first_wins_and_apply_all(xyz):
    x, y, z = xyz
    r1 = PatternSub((ToyScale(4), "x"), (ToyScale(2), (ToyScale(2), "x")), name="four")
    r2 = PatternSub((ToyScale(2), "x"), (add, "x", "x"), name="two")
    group = LocalOptGroup(r1, r2)
    fg = FunctionGraph([x], [ToyScale(4)(x)])
    out = group.transform(fg, fg.outputs[0].owner)
    assert out[0].owner.op == ToyScale(2)  # r1 applied, then the group returned
    group_all = LocalOptGroup(r1, r2, apply_all_opts=True)
    out = group_all.transform(fg, fg.outputs[0].owner)
    assert out[0].owner.op == add  # r1, then r2 on the node r1 made
    with pytest.raises(TypeError, match="is not a LocalOptimizer"):
        LocalOptGroup(r1, "r2")


def test_dict_and_none_replacements(xyz):
    x, y, z = xyz
    a, b = toy_pass(x, y)

    @local_optimizer([type(toy_pass)])
    def first_only(fgraph, node):
        # Output 1 is unused: it may be dropped with None.
        return [node.inputs[0], None]

    fg = FunctionGraph([x, y], [exp(a)])
    TopoOptimizer(first_only).optimize(fg)
    assert same(fg, exp(fg.inputs[0]))

    @local_optimizer([type(toy_pass)])
    def second_by_dict(fgraph, node):
        return {node.outputs[1]: node.inputs[1]}

    fg = FunctionGraph([x, y], [add(a, b)])
    TopoOptimizer(second_by_dict).optimize(fg)
    A = fg.outputs[0].owner.inputs[0]
    assert A.owner.op == toy_pass and fg.outputs[0].owner.inputs[1] is fg.inputs[1]


# ---------------------------------------------------------------------------
# PatternSub


def test_patternsub_tutorial_rules(xyz):
    x, y, z = xyz
    s1 = PatternSub((div, (mul, "x", "y"), "y"), "x")
    s2 = PatternSub((div, (mul, "x", "y"), "x"), "y")
    fg = FunctionGraph([x, y, z], [add(div(mul(x, y), y), div(mul(z, y), z))])
    TopoOptimizer(LocalOptGroup(s1, s2)).optimize(fg)
    X, Y, Z = fg.inputs
    assert same(fg, add(X, Y))
    assert str(s1) == "ToyDiv(ToyMul(x, y), y) -> x"


def test_patternsub_repeated_variable_must_match_same(xyz):
    x, y, z = xyz
    s1 = PatternSub((div, (mul, "x", "y"), "y"), "x")
    fg = FunctionGraph([x, y, z], [div(mul(x, y), z)])
    TopoOptimizer(s1).optimize(fg)
    X, Y, Z = fg.inputs
    assert same(fg, div(mul(X, Y), Z))  # y != z: no match


def test_patternsub_nested_and_output_ops(xyz):
    x, y, z = xyz
    # exp(log(x) + log(y)) -> x * y
    rule = PatternSub((exp, (add, (log, "a"), (log, "b"))), (mul, "a", "b"))
    fg = FunctionGraph([x, y], [neg(exp(add(log(x), log(y))))])
    TopoOptimizer(rule).optimize(fg)
    X, Y = fg.inputs
    assert same(fg, neg(mul(X, Y)))
    assert fgraph_eval(fg, [2.0, 3.0]) == [-6.0]


def test_patternsub_constraint(xyz):
    x, y, z = xyz
    positive = {"pattern": "c", "constraint": lambda v: isinstance(v, Constant) and v.data > 0}
    rule = PatternSub((log, (mul, positive, "x")), (add, (log, "c"), (log, "x")))
    fg = FunctionGraph([x], [add(log(mul(const(2.0), x)), log(mul(const(-2.0), x)))])
    TopoOptimizer(rule).optimize(fg)
    (X,) = fg.inputs
    out = fg.outputs[0].owner
    assert is_same_graph(out.inputs[0], add(log(const(2.0)), log(X)))
    assert is_same_graph(out.inputs[1], log(mul(const(-2.0), X)))

    seen = []

    def two_args(fgraph, v):  # the (fgraph, expr) form of a constraint
        seen.append(fgraph)
        return True

    rule2 = PatternSub((neg, {"pattern": "x", "constraint": two_args}), "x")
    fg = FunctionGraph([x], [exp(neg(x))])
    TopoOptimizer(rule2).optimize(fg)
    assert seen == [fg] and same(fg, exp(fg.inputs[0]))


def test_patternsub_multiple_clients(xyz):
    x, y, z = xyz
    m = mul(x, y)
    outs = [div(m, y), exp(m)]  # mul(x, y) has two clients
    rule = PatternSub((div, (mul, "x", "y"), "y"), "x")
    fg = FunctionGraph([x, y], outs)
    TopoOptimizer(rule).optimize(fg)
    assert fg.outputs[0].owner.op == div
    rule_mc = PatternSub((div, (mul, "x", "y"), "y"), "x", allow_multiple_clients=True)
    fg = FunctionGraph([x, y], outs)
    TopoOptimizer(rule_mc).optimize(fg)
    assert fg.outputs[0] is fg.inputs[0]
    # A dict sub-pattern can allow it for one place only.
    rule_dict = PatternSub(
        (div, {"pattern": (mul, "x", "y"), "allow_multiple_clients": True}, "y"), "x"
    )
    fg = FunctionGraph([x, y], outs)
    TopoOptimizer(rule_dict).optimize(fg)
    assert fg.outputs[0] is fg.inputs[0]


def test_patternsub_constants(xyz):
    x, y, z = xyz
    times_one = PatternSub((mul, "x", 1), "x")
    times_zero = PatternSub((mul, "x", const(0.0)), const(0.0))
    fg = FunctionGraph([x], [add(mul(x, 1.0), mul(exp(x), 0.0))])
    TopoOptimizer(LocalOptGroup(times_one, times_zero)).optimize(fg)
    out = fg.outputs[0].owner
    assert out.inputs[0] is fg.inputs[0]
    assert isinstance(out.inputs[1], Constant) and out.inputs[1].data == 0.0
    fg = FunctionGraph([x], [mul(x, 2.0)])
    TopoOptimizer(times_one).optimize(fg)
    assert fg.outputs[0].owner.op == mul
    # A number as the whole output pattern becomes a constant of the output type.
    zero = PatternSub((sub, "x", "x"), 0.0)
    fg = FunctionGraph([x], [exp(sub(x, x))])
    TopoOptimizer(zero).optimize(fg)
    c = fg.outputs[0].owner.inputs[0]
    assert isinstance(c, Constant) and c.data == 0.0


def test_patternsub_skip_identities(xyz):
    x, y, z = xyz

    def skip(v):
        return v.owner.inputs[0] if v.owner is not None and v.owner.op == identity else None

    rule = PatternSub((neg, (neg, "x")), "x", skip_identities_fn=skip)
    fg = FunctionGraph([x], [exp(neg(identity(neg(x))))])
    TopoOptimizer(rule).optimize(fg)
    assert same(fg, exp(fg.inputs[0]))


@pytest.mark.parametrize(
    "in_pattern, out_pattern, error, match",
    [
        ("x", "x", TypeError, "must start with an Op"),
        ((div, "x"), "y", ValueError, r"uses \['y'\], which the input pattern does not define"),
        ({"pat": (div, "x")}, "x", TypeError, "expected key 'pattern'"),
        ((div, [1, 2]), "x", TypeError, "must start with an Op"),
        ((div, "x", object()), "x", TypeError, "is not a tuple, dict, string"),
        ((div, "x", "y"), {"pattern": "x"}, TypeError, "output pattern cannot contain a dict"),
        ((lambda a: a, "x"), "x", TypeError, "must start with an Op instance, got <function"),
    ],
)
def test_patternsub_bad_patterns(in_pattern, out_pattern, error, match):
    with pytest.raises(error, match=match):
        PatternSub(in_pattern, out_pattern)


# ---------------------------------------------------------------------------
# Merge


def test_merge_identical_constants(xyz):
    x, y, z = xyz
    fg = FunctionGraph([x], [add(mul(x, const(2.0)), div(x, const(2.0)))])
    consts = {v for v in fg.variables if isinstance(v, Constant)}
    assert len(consts) == 2
    prof = MergeOptimizer().optimize(fg)
    consts = {v for v in fg.variables if isinstance(v, Constant)}
    assert len(consts) == 1 and prof.constants == 1
    fg.check_integrity()
    assert fgraph_eval(fg, [4.0]) == [4.0 * 2 + 4.0 / 2]


def test_merge_cascades_and_keeps_different_ops(xyz):
    x, y, z = xyz
    # Two copies of exp(x * 2) + y merge completely; exp vs log do not.
    a = add(exp(mul(x, const(2.0))), y)
    b = add(exp(mul(x, const(2.0))), y)
    c = add(log(mul(x, const(2.0))), y)
    fg = FunctionGraph([x, y], [a, b, c])
    merge_optimizer.optimize(fg)
    assert fg.outputs[0] is fg.outputs[1]
    assert fg.outputs[2] is not fg.outputs[0]
    assert len(fg.apply_nodes) == 5  # mul, exp, add, log, add
    fg.check_integrity()
    # Ops with different props are different computations.
    fg = FunctionGraph([x], [add(ToyScale(2)(x), ToyScale(3)(x))])
    merge_optimizer.optimize(fg)
    assert len(fg.apply_nodes) == 3


def test_a_deferred_merge_feature_indexes_the_graph_when_first_asked(xyz):
    x, y, z = xyz

    def build():
        a = add(exp(mul(x, const(2.0))), y)
        b = add(exp(mul(x, const(2.0))), y)
        return [a, b, add(log(mul(x, const(2.0))), y)]

    eager = FunctionGraph([x, y], build(), features=[MergeFeature()])
    feature = MergeFeature(deferred=True)
    fg = FunctionGraph([x, y], build(), features=[feature])
    assert fg.merge_feature is feature and "key_node" not in vars(feature)
    # A change while no index is made: the index made later sees the graph as it is.
    for g in (fg, eager):  # y replaced by x throughout
        g.replace(g.outputs[2].owner.inputs[1], g.inputs[0], reason="test")
    assert "key_node" not in vars(feature)
    assert len(feature.scheduled) == len(eager.merge_feature.scheduled) > 0
    merge_optimizer.optimize(fg)
    merge_optimizer.optimize(eager)
    assert fg.outputs[0] is fg.outputs[1]
    assert len(fg.apply_nodes) == len(eager.apply_nodes) == 5
    assert fgraph_eval(fg, [1.5, 0.25]) == fgraph_eval(eager, [1.5, 0.25])
    fg.check_integrity()
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        getattr(feature, "nothing")  # noqa: B009 (the attribute lookup is the test)


def test_merge_wide(xyz):
    x, y, z = xyz
    n = 500
    outs = [add(ToyScale(i)(x), y) for i in range(n)]
    outs += [add(ToyScale(i)(x), y) for i in range(n)]
    fg = FunctionGraph([x, y], outs)
    merge_optimizer.optimize(fg)
    assert len(fg.apply_nodes) == 2 * n
    assert all(fg.outputs[i] is fg.outputs[i + n] for i in range(n))


def test_merge_is_linear():
    # Two copies of a chain of n nodes collapse node by node: the merges cascade
    # through the feature's index, with no rescan of the graph per merge. (Each level
    # reads its own input: removing a client from a variable with thousands of clients
    # is the FunctionGraph's cost, not merge's.)
    def build(n):
        x = double("x")
        ys = [double(f"y{i}") for i in range(n)]
        a, b = x, x
        for i in range(n):
            a = ToyScale(i)(mul(a, ys[i]))
            b = ToyScale(i)(mul(b, ys[i]))
        return FunctionGraph([x, *ys], [a, b], clone=False)

    calls = {}
    for n in (500, 4000):
        fg = build(n)
        calls[n] = count_calls(merge_optimizer.optimize, fg)
        assert fg.outputs[0] is fg.outputs[1]
        assert len(fg.apply_nodes) == 2 * n
    # 8x the nodes: linear is ~8x the calls; quadratic would be ~64x.
    assert calls[4000] < 16 * calls[500], calls


# ---------------------------------------------------------------------------
# EquilibriumOptimizer


def test_equilibrium_reaches_fixpoint(xyz):
    x, y, z = xyz
    rules = [
        PatternSub((neg, (neg, "x")), "x", name="neg_neg"),
        PatternSub((mul, "x", 1.0), "x", name="mul_one"),
        PatternSub((log, (exp, "x")), "x", name="log_exp"),
    ]
    e = x
    for _ in range(30):
        e = log(exp(neg(neg(mul(e, 1.0)))))
    fg = FunctionGraph([x, y], [add(e, y)])
    before = fgraph_eval(fg, [1.5, 2.0])
    prof = EquilibriumOptimizer(rules, max_use_ratio=4).optimize(fg)
    X, Y = fg.inputs
    assert same(fg, add(X, Y))
    assert fgraph_eval(fg, [1.5, 2.0]) == before
    assert prof.changes == 90
    out = io.StringIO()
    print_profile(prof, out)
    text = out.getvalue()
    assert "neg_neg" in text and "mul_one" in text and "log_exp" in text
    assert "- 30 -" in text  # each rule applied 30 times


def test_equilibrium_with_global_and_cleanup(xyz):
    x, y, z = xyz
    rule = PatternSub((div, (mul, "x", "y"), "x"), "y")
    fg = FunctionGraph([x, y, z], [div(mul(add(y, z), x), add(y, z))])
    EquilibriumOptimizer([rule], max_use_ratio=4, cleanup_optimizers=[MergeOptimizer()]).optimize(
        fg
    )
    assert fg.outputs[0] is fg.inputs[0]
    fg = FunctionGraph([x, y, z], [div(mul(add(y, z), x), add(y, z))])
    EquilibriumOptimizer([rule, MergeOptimizer()], max_use_ratio=4).optimize(fg)
    assert fg.outputs[0] is fg.inputs[0]


def test_equilibrium_only_revisits_what_changed():
    # 2000 independent exp(x_i) nodes and one neg(neg(x)): after the first pass only
    # the rewritten corner is visited again.
    xs = [double(f"x{i}") for i in range(2000)]
    outs = [exp(v) for v in xs] + [neg(neg(xs[0]))]
    fg = FunctionGraph(xs, outs, clone=False)
    calls = []

    @local_optimizer(None)
    def spy(fgraph, node):
        calls.append(node)
        return False

    rule = PatternSub((neg, (neg, "x")), "x")
    prof = EquilibriumOptimizer([rule, spy], max_use_ratio=2).optimize(fg)
    assert fg.outputs[-1] is xs[0]
    # The first round goes inputs first: spy saw the inner neg before the rule, at the
    # outer one, removed both; the exp nodes were seen once (a navigator that re-walks
    # the graph each round would have called spy 4000 times).
    assert len(calls) == 2001 and len(set(calls)) == 2001
    assert prof.rounds == 2


def test_equilibrium_revisits_only_nodes_visited_before_a_change():
    """A node whose inputs changed before its visit saw the change: no second visit.
    One visited before a change is visited again, with its clients (two levels)."""
    x = double("x")

    def make_chain():
        chain = [neg(neg(x))]
        for _ in range(50):
            chain.append(exp(chain[-1]))
        return chain

    calls = []

    @local_optimizer(None)
    def spy(fgraph, node):
        calls.append(node)
        return False

    # The rule removes the negs during the first round, inputs first: the exp they fed
    # is visited after that, once (the inner neg is seen by spy, the outer one is not).
    chain = make_chain()
    fg = FunctionGraph([x], [chain[-1]], clone=False)
    rule = PatternSub((neg, (neg, "x")), "x")
    prof = EquilibriumOptimizer([rule, spy], max_use_ratio=2).optimize(fg)
    assert fg.outputs[0].owner.inputs[0] is not chain[0]
    assert len(calls) == 51 and len(set(calls)) == 51 and prof.rounds == 2

    # A global optimizer removes them after the first round: the three exp nodes
    # nearest to the change are visited again in the second.
    @optimizer
    def drop_negs(fgraph):
        for node in list(fgraph.apply_nodes):
            inner = node.inputs[0].owner
            if node.op == neg and inner is not None and inner.op == neg:
                fgraph.replace(node.outputs[0], inner.inputs[0], reason="drop_negs")

    calls.clear()
    chain = make_chain()
    fg = FunctionGraph([x], [chain[-1]], clone=False)
    EquilibriumOptimizer([spy], max_use_ratio=2, final_optimizers=[drop_negs]).optimize(fg)
    assert len(calls) == 52 + 3
    assert set(calls[52:]) == {c.owner for c in chain[1:4]}


@local_optimizer([type(add)])
def commute(fgraph, node):
    a, b = node.inputs
    return [add(b, a)]


def test_equilibrium_loop_guard_reports_rule(xyz):
    x, y, z = xyz
    fg = FunctionGraph([x, y], [exp(add(x, y))])
    eq = EquilibriumOptimizer([commute], max_use_ratio=3)
    with config.change_flags(on_opt_error="warn"):
        with pytest.warns(OptimizationWarning, match="rule 'commute' was applied 7 times"):
            prof = eq.optimize(fg)
    assert "commute" in prof.looped
    fg.check_integrity()
    assert fgraph_eval(fg, [1.0, 2.0]) == fgraph_eval(
        FunctionGraph([x, y], [exp(add(x, y))]), [1.0, 2.0]
    )
    with config.change_flags(on_opt_error="raise"):
        with pytest.raises(MaxUseRatioExceeded, match="'commute'.*probably loops"):
            eq.optimize(FunctionGraph([x, y], [exp(add(x, y))]))
    with config.change_flags(on_opt_error="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        eq.optimize(FunctionGraph([x, y], [exp(add(x, y))]))


class _RefuseAsOutput(Feature):
    """Refuses, at validation, a graph whose output is ``var`` (as the destroy handler
    refuses an output that views an input destroyed in place)."""

    def __init__(self, var):
        self.var = var

    def validate(self, fgraph):
        if self.var in fgraph.outputs:
            raise InconsistencyError("refused")


def test_equilibrium_does_not_retry_a_refused_rewrite_on_the_same_graph(xyz):
    # Two rules whose replacement the graph refuses. Each rollback is a change, which
    # revisits the node; trying a rule again on the graph it was refused on used to
    # alternate the two until max_use_ratio reported a loop.
    x, y, z = xyz
    fg = FunctionGraph([x], [neg(x)], clone=False)
    fg.attach_feature(ReplaceValidate())
    fg.attach_feature(_RefuseAsOutput(x))
    tries = {"a": 0, "b": 0}

    def rule(name):
        @local_optimizer([ToyNeg])
        def drop_neg(fgraph, node):
            tries[name] += 1
            return [node.inputs[0]]

        drop_neg.__name__ = f"drop_neg_{name}"
        return drop_neg

    eq = EquilibriumOptimizer(
        [rule("a"), rule("b")],
        max_use_ratio=4,
        failure_callback=NavigatorOptimizer.warn_inplace,
    )
    with config.change_flags(on_opt_error="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        prof = eq.optimize(fg)
    assert prof.looped is None
    assert tries == {"a": 1, "b": 1}
    assert same(fg, neg(x))


class _RefuseWhileExp(Feature):
    """Refuses, at validation, a graph holding an ``exp`` node with ``var`` an output."""

    def __init__(self, var):
        self.var = var

    def validate(self, fgraph):
        if self.var in fgraph.outputs and any(n.op == exp for n in fgraph.apply_nodes):
            raise InconsistencyError("refused")


def test_equilibrium_retries_a_refused_rewrite_once_the_graph_changed(xyz):
    x, y, z = xyz
    # neg(x) is seen first (the first round goes inputs first, outputs in order): its
    # rewrite is refused while exp(y) is there; once exp(y) became log(y) it is tried
    # again and kept.
    fg = FunctionGraph([x, y], [neg(x), exp(y)], clone=False)
    fg.attach_feature(ReplaceValidate())
    fg.attach_feature(_RefuseWhileExp(x))
    seen = []

    @local_optimizer([ToyNeg])
    def drop_neg(fgraph, node):
        seen.append("neg")
        return [node.inputs[0]]

    @local_optimizer(None)
    def exp_to_log(fgraph, node):
        if node.op == exp:
            seen.append("exp")
            return [log(node.inputs[0])]
        return False

    eq = EquilibriumOptimizer(
        [drop_neg, exp_to_log], max_use_ratio=4, failure_callback=NavigatorOptimizer.warn_inplace
    )
    prof = eq.optimize(fg)
    assert prof.looped is None
    assert seen == ["neg", "exp", "neg"]
    assert fg.outputs[0] is x
    assert fg.outputs[1].owner.op == log and fg.outputs[1].owner.inputs[0] is y


def test_equilibrium_rejects_bad_ratio():
    with pytest.raises(ValueError, match="max_use_ratio must be > 0"):
        EquilibriumOptimizer([commute], max_use_ratio=0)


# ---------------------------------------------------------------------------
# Failures are reported and rolled back


@optimizer
def half_done_then_fail(fgraph):
    """Replaces one node, then raises: the replacement must be undone."""
    node = next(n for n in fgraph.toposort() if n.op == mul)
    fgraph.replace(node.outputs[0], node.inputs[0])
    raise RuntimeError("boom in the middle")


def test_failing_global_optimizer_is_rolled_back(xyz):
    x, y, z = xyz
    fg = FunctionGraph([x, y], [exp(mul(x, y))])
    expected = fg.outputs[0]
    original = [exp(mul(*fg.inputs))]
    seq = SeqOptimizer(half_done_then_fail, merge_optimizer)
    with config.change_flags(on_opt_error="warn"):
        with pytest.warns(
            OptimizationWarning,
            match="Optimization half_done_then_fail failed and was rolled back: "
            "RuntimeError: boom in the middle",
        ):
            prof = seq.optimize(fg)
    fg.check_integrity()
    assert fg.outputs[0] is expected
    assert equal_computations(fg.outputs, original)
    assert any(row[0] == "half_done_then_fail" and row[-1] for row in prof.rows)
    assert any(row[0] == "MergeOptimizer" for row in prof.rows)  # the next one still ran

    with config.change_flags(on_opt_error="raise"):
        with pytest.raises(RuntimeError, match="boom in the middle"):
            seq.optimize(fg)
    fg.check_integrity()
    assert equal_computations(fg.outputs, original)

    with config.change_flags(on_opt_error="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        seq.optimize(fg)
    assert equal_computations(fg.outputs, original)


def test_optimization_abort_always_propagates(xyz):
    x, y, z = xyz

    @optimizer
    def abort(fgraph):
        raise OptimizationAbort("stop everything")

    fg = FunctionGraph([x], [exp(x)])
    with config.change_flags(on_opt_error="ignore"):
        with pytest.raises(OptimizationAbort):
            SeqOptimizer(abort).optimize(fg)


def test_failing_local_optimizer_is_reported_others_apply(xyz):
    x, y, z = xyz

    @local_optimizer([ToyDiv])
    def broken(fgraph, node):
        raise ZeroDivisionError("bad rule")

    good = PatternSub((neg, (neg, "x")), "x", name="neg_neg")
    fg = FunctionGraph([x, y], [div(neg(neg(x)), y)])
    with config.change_flags(on_opt_error="warn"):
        with pytest.warns(OptimizationWarning, match=r"broken failed on node ToyDiv.*bad rule"):
            EquilibriumOptimizer([broken, good], max_use_ratio=4).optimize(fg)
    X, Y = fg.inputs
    assert same(fg, div(X, Y))
    with config.change_flags(on_opt_error="raise"):
        with pytest.raises(ZeroDivisionError):
            TopoOptimizer(broken).optimize(FunctionGraph([x, y], [div(x, y)]))


def test_wrong_replacements_are_rolled_back(xyz):
    x, y, z = xyz

    @local_optimizer([ToyNeg])
    def wrong_type(fgraph, node):
        return [to_int(node.inputs[0])]

    @local_optimizer([ToyNeg])
    def wrong_count(fgraph, node):
        return [node.inputs[0], node.inputs[0]]

    @local_optimizer([ToyNeg])
    def replace_then_fail(fgraph, node):
        fgraph.replace(node.inputs[0], exp(node.inputs[0]))
        raise RuntimeError("after a replace")

    for lopt, match in [
        (wrong_type, "The type of the replacement must be the same"),
        (wrong_count, "returned 2 replacements for a node with 1 outputs"),
        (replace_then_fail, "after a replace"),
    ]:
        fg = FunctionGraph([x], [exp(neg(x))])
        with config.change_flags(on_opt_error="warn"):
            with pytest.warns(OptimizationWarning, match=match):
                TopoOptimizer(lopt).optimize(fg)
        fg.check_integrity()
        assert same(fg, exp(neg(fg.inputs[0])))


def test_failure_callback_is_used(xyz):
    x, y, z = xyz
    got = []

    @local_optimizer([ToyNeg])
    def broken(fgraph, node):
        raise KeyError("k")

    fg = FunctionGraph([x], [neg(x)])
    TopoOptimizer(
        broken,
        failure_callback=lambda exc, nav, pairs, lopt, node: got.append((type(exc), lopt, node.op)),
    ).optimize(fg)
    assert got == [(KeyError, broken, neg)]


def test_change_log_nested_checkpoints(xyz):
    x, y, z = xyz
    fg = FunctionGraph([x, y], [add(mul(x, y), exp(x))])
    log_ = ChangeLog.attach(fg)
    assert ChangeLog.attach(fg) is log_
    X, Y = fg.inputs
    outer = log_.begin()
    fg.replace(fg.outputs[0].owner.inputs[0], X)
    inner = log_.begin()
    fg.replace(fg.outputs[0].owner.inputs[1], Y)
    log_.revert(fg, inner)
    log_.end(inner)
    assert same(fg, add(X, exp(X)))
    log_.revert(fg, outer)
    log_.end(outer)
    assert same(fg, add(mul(X, Y), exp(X)))
    assert log_.log == []


class _RaiseOnChangeTo(Feature):
    """Raises when an input becomes ``target``, after the graph has changed (as
    DebugMode's checker does on a change whose values differ)."""

    def __init__(self, target):
        self.target = target

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        if new_r is self.target:
            raise RuntimeError("refused")


def test_change_log_undoes_a_change_that_a_feature_attached_first_refused(xyz):
    # The feature that refused the change was attached before the log: the log still
    # hears of the change (recorders are called first), so the undo restores the graph.
    x, y, z = xyz
    fg = FunctionGraph([x, y], [add(mul(x, y), exp(x))], clone=False)
    fg.attach_feature(_RaiseOnChangeTo(y))
    log_ = ChangeLog.attach(fg)
    token = log_.begin()
    fg.replace(fg.outputs[0].owner.inputs[0], x)
    with pytest.raises(RuntimeError, match="refused"):
        fg.replace(fg.outputs[0].owner.inputs[1], y)
    log_.revert(fg, token)
    log_.end(token)
    assert same(fg, add(mul(x, y), exp(x)))


def test_seq_optimizer_profile_and_checks(xyz):
    x, y, z = xyz
    with pytest.raises(TypeError, match="is not an optimizer"):
        SeqOptimizer(merge_optimizer, 3)
    fg = FunctionGraph([x], [add(exp(x), exp(x))])
    prof = SeqOptimizer([merge_optimizer], name="my_seq").optimize(fg)
    out = io.StringIO()
    print_profile(prof, out)
    text = out.getvalue()
    assert "SeqOptimizer my_seq" in text and "3/2 nodes" in text
    assert "merged 1 nodes" in text


def test_equilibrium_global_failure_rolled_back(xyz):
    x, y, z = xyz
    rule = PatternSub((neg, (neg, "x")), "x", name="neg_neg")
    fg = FunctionGraph([x, y], [exp(neg(neg(mul(x, y))))])
    with config.change_flags(on_opt_error="warn"):
        with pytest.warns(OptimizationWarning, match="half_done_then_fail failed"):
            EquilibriumOptimizer([rule, half_done_then_fail], max_use_ratio=4).optimize(fg)
    X, Y = fg.inputs
    assert same(fg, exp(mul(X, Y)))  # the rule applied; the global's change was undone


def test_remove_key_refuses_replacement_that_keeps_node(xyz):
    x, y, z = xyz

    @local_optimizer([type(exp)])
    def exp_of_neg(fgraph, node):
        # exp(neg(x)) -> exp(x), claiming it removes the neg node; neg(x) has another
        # client, so the neg node stays and the rewrite must be undone.
        inner = node.inputs[0].owner
        if inner is not None and inner.op == neg:
            return {node.outputs[0]: exp(inner.inputs[0]), "remove": [inner]}
        return False

    fg = FunctionGraph([x], [exp(neg(x)), log(neg(x))])
    merge_optimizer.optimize(fg)
    with config.change_flags(on_opt_error="warn"), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        TopoOptimizer(exp_of_neg).optimize(fg)
    assert any("ReplacementDidNotRemoveError" in str(m.message) for m in w)
    (X,) = fg.inputs
    assert same(fg, exp(neg(X)))
    fg = FunctionGraph([x], [exp(neg(x))])
    TopoOptimizer(exp_of_neg).optimize(fg)
    assert same(fg, exp(fg.inputs[0]))


def test_equilibrium_uses_a_subclass_process_node(xyz):
    # EquilibriumOptimizer tries its rules without a call to process_node per rule; a
    # subclass that overrides process_node still gets every try.
    x, y, z = xyz
    tried = []

    class Counting(EquilibriumOptimizer):
        def process_node(self, fgraph, node, lopt=None):
            tried.append((node.op, opt_name(lopt)))
            return super().process_node(fgraph, node, lopt)

    neg_neg = PatternSub((neg, (neg, "x")), "x", name="neg_neg")
    fg = FunctionGraph([x], [exp(neg(neg(x)))])
    prof = Counting([neg_neg], max_use_ratio=4).optimize(fg)
    assert same(fg, exp(fg.inputs[0])) and prof.changes == 1
    assert tried and {name for _, name in tried} == {"neg_neg"}
    assert sum(prof.stats.tried.values()) == len(tried)


class _Runaway(BaseException):
    """Raised by a rule tried far too often: ends a test that would otherwise hang."""


def test_rule_that_changes_the_graph_then_raises_is_rolled_back_and_not_retried_forever():
    # Its rollback is itself a change that the next round revisits; the rule is not
    # tried again on the graph it failed on (and each failure counts as a use of it, for
    # max_use_ratio), and the rest of the rewriting still happens.
    tries = []

    @local_optimizer([ToyMul])
    def changes_then_raises(fgraph, node):
        tries.append(node)
        if len(tries) > 1000:
            raise _Runaway
        fgraph.replace(node.outputs[0], node.inputs[0])
        raise RuntimeError("boom after a change")

    x, y = double("x"), double("y")
    fg = FunctionGraph([x, y], [neg(neg(mul(x, y)))])
    neg_neg = PatternSub((neg, (neg, "x")), "x", name="neg_neg")
    with config.change_flags(on_opt_error="ignore"):
        prof = EquilibriumOptimizer([changes_then_raises, neg_neg], max_use_ratio=4).optimize(fg)
    assert str(fg) == "FunctionGraph(ToyMul(x, y))"  # the rollback kept the product
    # tried on the first graph, and again once neg_neg had changed it
    assert len(tries) == 2 and prof.looped is None
    with config.change_flags(on_opt_error="raise"):
        fg = FunctionGraph([x, y], [mul(x, y)])
        with pytest.raises(RuntimeError, match="boom after a change"):
            EquilibriumOptimizer([changes_then_raises], max_use_ratio=4).optimize(fg)

    # the same through a subclass's own process_node
    class Own(EquilibriumOptimizer):
        def process_node(self, fgraph, node, lopt=None):
            return super().process_node(fgraph, node, lopt)

    tries.clear()
    fg = FunctionGraph([x, y], [mul(x, y)])
    with config.change_flags(on_opt_error="ignore"):
        prof = Own([changes_then_raises], max_use_ratio=4).optimize(fg)
    assert str(fg) == "FunctionGraph(ToyMul(x, y))"
    assert len(tries) == 1 and prof.looped is None


def test_equilibrium_calls_function_rules_as_their_transform_would(xyz):
    # EquilibriumOptimizer calls a plain function rule itself (no transform call per
    # try): a rule tracking no op still meets every node, a single Variable returned
    # is the node's replacement, and a transform replaced on the instance is honoured.
    x, y, z = xyz
    seen = []

    @local_optimizer(None)
    def any_neg_neg(fgraph, node):
        seen.append(node.op)
        if node.op == neg and node.inputs[0].owner is not None:
            if node.inputs[0].owner.op == neg:
                return node.inputs[0].owner.inputs[0]  # one Variable, not a list
        return None

    fg = FunctionGraph([x, y], [exp(neg(neg(x))), add(x, y)])
    prof = EquilibriumOptimizer([any_neg_neg], max_use_ratio=4).optimize(fg)
    X, Y = fg.inputs
    assert is_same_graph(fg.outputs[0], exp(X)) and is_same_graph(fg.outputs[1], add(X, Y))
    assert {exp, add, neg} <= set(seen) and prof.changes == 1

    @local_optimizer([exp])
    def never(fgraph, node):
        raise AssertionError("the instance's own transform is the one called")

    patched = []
    never.transform = lambda fgraph, node: patched.append(node) or [log(node.inputs[0])]
    fg = FunctionGraph([x], [exp(x)])
    EquilibriumOptimizer([never], max_use_ratio=4).optimize(fg)
    assert patched and same(fg, log(fg.inputs[0]))


def test_topo_groups_call_function_rules_as_their_transform_would(xyz):
    # The same in a TopoOptimizer over a LocalOptGroup (the useless pass's layout):
    # rules tracking no op meet every node, a single Variable is the replacement, a
    # transform replaced on the instance after the group was made is the one called.
    x, y, z = xyz
    seen = []

    @local_optimizer(None)
    def drop_neg_neg(fgraph, node):
        seen.append(node.op)
        inner = node.inputs[0].owner if node.inputs else None
        if node.op == neg and inner is not None and inner.op == neg:
            return inner.inputs[0]
        return None

    @local_optimizer([exp])
    def exp_to_log(fgraph, node):
        raise AssertionError("replaced on the instance below")

    group = LocalOptGroup(drop_neg_neg, exp_to_log, apply_all_opts=True)
    exp_to_log.transform = lambda fgraph, node: [log(node.inputs[0])]
    fg = FunctionGraph([x, y], [exp(neg(neg(x))), add(x, y)])
    TopoOptimizer(group).optimize(fg)
    X, Y = fg.inputs
    assert is_same_graph(fg.outputs[0], log(X)) and is_same_graph(fg.outputs[1], add(X, Y))
    assert {add, neg, exp} <= set(seen)


def test_patternsub_first_look_at_the_inputs(xyz):
    # Before matching, a pattern looks at the node's inputs where it needs a constant,
    # a computed variable, or a constraint marked side_effect_free (both orders of a
    # commutative pattern): a node failing that is not matched at all; the others are
    # matched as before (the constraint asked again there).
    x, y, z = xyz
    asked = []

    def is_two(v):
        asked.append(v)
        return isinstance(v, Constant) and v.data == 2.0

    is_two.side_effect_free = True
    rule = PatternSub(
        (mul, "x", {"pattern": "c", "constraint": is_two}), (add, "x", "x"), commutative=True
    )
    three = const(3.0)
    fg = FunctionGraph([x, y], [exp(mul(x, y)), log(mul(const(2.0), y)), neg(mul(x, three))])
    TopoOptimizer(rule).optimize(fg)
    X, Y = fg.inputs
    assert is_same_graph(fg.outputs[0], exp(mul(X, Y)))
    assert is_same_graph(fg.outputs[1], log(add(Y, Y)))
    assert is_same_graph(fg.outputs[2], neg(mul(X, three)))
    assert fgraph_eval(fg, [1.5, 4.0]) == pytest.approx([math.exp(6.0), math.log(8.0), -4.5])
    # mul(x, y) alone: each order looked at once (no constant there), never matched.
    asked.clear()
    fg = FunctionGraph([x, y], [mul(x, y)])
    TopoOptimizer(rule).optimize(fg)
    assert asked == [fg.inputs[1], fg.inputs[0]] and fg.outputs[0].owner.op == mul
    unmarked = []
    plain = PatternSub(
        (mul, "x", {"pattern": "c", "constraint": lambda v: unmarked.append(v) or False}),
        "x",
    )
    fg = FunctionGraph([x, y], [mul(x, y)])
    TopoOptimizer(plain).optimize(fg)
    assert unmarked == [fg.inputs[1]]  # asked once, by the match


def test_patternsub_constant_arguments_need_constant_inputs(xyz):
    x, y, z = xyz
    rule = PatternSub((mul, "x", const(1.0)), "x")
    fg = FunctionGraph([x, y], [mul(x, y), mul(y, const(1.0))])
    TopoOptimizer(rule).optimize(fg)
    X, Y = fg.inputs
    assert is_same_graph(fg.outputs[0], mul(X, Y)) and fg.outputs[1] is Y


def test_a_groups_applied_rewrite_is_the_one_of_its_own_thread(xyz):
    # Functions compiled with one mode share its optimizers, from any thread: what a
    # group reports as applied (a replacement's reason) is this thread's last change.
    x, _y, _z = xyz
    neg_neg = PatternSub((neg, (neg, "x")), "x", name="neg_neg")
    exp_log = PatternSub((exp, (log, "x")), "x", name="exp_log")
    group = LocalOptGroup(neg_neg, exp_log)
    fg_a = FunctionGraph([x], [neg(neg(x))])
    fg_b = FunctionGraph([x], [exp(log(x))])
    a_done, b_done = threading.Event(), threading.Event()
    seen = {}

    def in_a():
        assert group.transform(fg_a, fg_a.outputs[0].owner)
        a_done.set()
        b_done.wait(10)
        seen["a"] = group.applied_rewrite()

    def in_b():
        a_done.wait(10)
        assert group.transform(fg_b, fg_b.outputs[0].owner)
        seen["b"] = group.applied_rewrite()
        b_done.set()

    threads = [threading.Thread(target=in_a), threading.Thread(target=in_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == {"a": neg_neg, "b": exp_log}
    # A thread that applied nothing through the group has nothing to report.
    assert group.applied_rewrite() is None
