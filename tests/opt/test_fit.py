"""The framework fits a replacement's type (``fit=``, PyTensor's ``allow_cast`` made
general) and normalises what a function rule returns; PatternSub's ``commutative``
option. Tested on the toy vocabulary (no tensor library): a ``ToyToFloat`` is the cast."""

from __future__ import annotations

import pytest

from theano_dag.graph.basic import Apply, is_same_graph
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.op import Op
from theano_dag.graph.rewriting.local import as_replacements
from theano_dag.opt import PatternSub, TopoOptimizer, local_optimizer

from .toy_ops import add, as_toy, const, double, fgraph_eval, floatT, intT, neg, to_int, toy_pass


class ToyToFloat(Op):
    """int -> float: the toy vocabulary's cast."""

    __props__ = ()

    def make_node(self, a):
        return Apply(self, [as_toy(a)], [floatT()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = float(inputs[0])


to_float = ToyToFloat()


def toy_fit(old, new, shape_sources):
    """Cast an int replacement to a float; decline anything else that differs."""
    if new.type == old.type:
        return new
    if old.type == floatT and new.type == intT:
        return to_float(new)
    return None


def refuse(old, new, shape_sources):
    return None


def rewrite(fg, lopt):
    failures = []
    TopoOptimizer(lopt, failure_callback=lambda exc, *a: failures.append(exc)).optimize(fg)
    return failures


def test_patternsub_fit_casts_a_replacement_of_another_type():
    x = double("x")
    i = to_int(x)  # an int
    fg = FunctionGraph([x], [neg(neg(i))], clone=False)  # neg of an int is a float
    rule = PatternSub((neg, (neg, "i")), "i", fit=toy_fit)
    assert rewrite(fg, rule) == []
    assert is_same_graph(fg.outputs[0], to_float(i))
    assert fgraph_eval(fg, [2.6]) == [3.0]


def test_patternsub_without_fit_reports_the_type_mismatch_and_leaves_the_graph():
    x = double("x")
    out = neg(neg(to_int(x)))
    fg = FunctionGraph([x], [out], clone=False)
    failures = rewrite(fg, PatternSub((neg, (neg, "i")), "i"))
    assert len(failures) == 1 and isinstance(failures[0], TypeError)
    assert fg.outputs[0] is out


def test_patternsub_declines_when_fit_cannot():
    x = double("x")
    out = neg(neg(to_int(x)))
    fg = FunctionGraph([x], [out], clone=False)
    assert rewrite(fg, PatternSub((neg, (neg, "i")), "i", fit=refuse)) == []
    assert fg.outputs[0] is out


def test_patternsub_fit_turns_a_number_of_the_output_pattern_into_a_constant():
    x = double("x")

    def number_fit(old, new, shape_sources):
        assert [str(v) for v in shape_sources] == ["x"]  # the matched variables
        return const(float(new)) if not hasattr(new, "type") else new

    fg = FunctionGraph([x], [add(neg(x), 1.0)], clone=False)
    rule = PatternSub((add, (neg, "x"), 1.0), 7, fit=number_fit)
    assert rewrite(fg, rule) == []
    assert fg.outputs[0].data == 7.0


def test_patternsub_commutative_matches_both_orders():
    x = double("x")
    zero_right = PatternSub((add, "x", 0.0), "x", commutative=True)
    fg = FunctionGraph([x], [neg(add(add(const(0.0), x), 0.0))], clone=False)
    rewrite(fg, zero_right)
    assert is_same_graph(fg.outputs[0], neg(x))
    plain = PatternSub((add, "x", 0.0), "x")
    out = add(const(0.0), x)
    fg = FunctionGraph([x], [out], clone=False)
    rewrite(fg, plain)
    assert fg.outputs[0] is out


def test_commutative_needs_a_binary_root():
    with pytest.raises(TypeError, match="two arguments"):
        PatternSub((neg, "x"), "x", commutative=True)


def test_a_function_rule_may_return_one_variable_fitted_by_the_framework():
    x = double("x")

    @local_optimizer([neg], fit=toy_fit)
    def local_neg_int(fgraph, node):
        # neg(to_int(y)) -> to_int(neg(y)): an int where a float stood
        inner = node.inputs[0].owner
        if inner is None or inner.op != to_int:
            return None
        return to_int(neg(inner.inputs[0]))

    fg = FunctionGraph([x], [neg(to_int(x))], clone=False)
    assert rewrite(fg, local_neg_int) == []
    assert is_same_graph(fg.outputs[0], to_float(to_int(neg(x))))
    assert fgraph_eval(fg, [2.6]) == [-3.0]


def test_a_function_rule_that_returns_none_or_false_changes_nothing():
    x = double("x")
    out = neg(x)

    @local_optimizer([neg], fit=toy_fit)
    def local_none(fgraph, node):
        return None

    fg = FunctionGraph([x], [out], clone=False)
    assert local_none.transform(fg, out.owner) is None
    assert rewrite(fg, local_none) == [] and fg.outputs[0] is out


def test_one_variable_for_a_node_of_several_outputs_is_an_error():
    x, y = double("x"), double("y")
    node = toy_pass(x, y)[0].owner
    with pytest.raises(ValueError, match="no default_output"):
        as_replacements(node, x)
    assert as_replacements(node, {node.outputs[1]: x}, fit=toy_fit) == {node.outputs[1]: x}
    assert as_replacements(node, [x, y], fit=refuse) is False


def test_a_local_rewrite_that_returns_true_is_reported_and_the_graph_left_as_it_was():
    """A local rewrite returns replacements; changing the graph itself is a global pass's
    job, so True (the old "changed in place") is refused with a message that says so."""
    x = double("x")
    out = neg(x)

    @local_optimizer([neg])
    def local_says_true(fgraph, node):
        return True

    fg = FunctionGraph([x], [out], clone=False)
    failures = rewrite(fg, local_says_true)
    assert len(failures) == 1 and isinstance(failures[0], TypeError)
    assert "returned True" in str(failures[0]) and "global pass" in str(failures[0])
    assert fg.outputs[0] is out
