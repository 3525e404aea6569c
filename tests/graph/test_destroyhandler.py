"""DestroyHandler: legal in-place graphs are accepted and ordered, illegal ones refused."""

import pickle

import pytest
from graphcheck import assert_valid, snapshot
from toy import MyConstant, MyOp, MyType, MyVar, op1, op2, op3, op_d, op_d_same, op_v

from theano_dag.graph.destroyhandler import DestroyHandler, ProtocolError, fast_inplace_check
from theano_dag.graph.fg import FunctionGraph, InconsistencyError
from theano_dag.graph.toolbox import Supervisor

# check_integrity runs after every mutation of every FunctionGraph in this module.
pytestmark = pytest.mark.usefixtures("checked_fgraph")


def make(inputs, outputs, *features):
    fg = FunctionGraph(inputs, outputs, features=[DestroyHandler(), *features], clone=False)
    assert_valid(fg)
    return fg


def refused(fg, match):
    assert not fg.consistent()
    with pytest.raises(InconsistencyError, match=match):
        fg.validate()


def position(order):
    return {n: k for k, n in enumerate(order)}


# ---------------------------------------------------------------------------
# Legal graphs


def test_destroying_an_intermediate_value():
    x = MyVar("x")
    a = op1(x)
    d = op_d(a)
    fg = make([x], [d])
    assert fg.validate() is True
    assert fg.destroyers(a) == [d.owner]
    assert fg.destroyers(x) == [] and fg.destroyers(d) == []
    assert fg.has_destroyers([a]) and not fg.has_destroyers([x, d])
    assert fg.destroy_handler.orderings(fg) == {}


def test_destroying_an_input_is_allowed_without_supervisor():
    x = MyVar("x")
    fg = make([x], [op_d(x)])
    assert fg.consistent()
    assert fg.has_destroyers([x])


def test_destroyer_runs_after_the_other_readers():
    x = MyVar("x")
    a = op1(x)
    d = op_d(a)
    r = op2(a)
    e = op3(d, r)  # a plain depth-first order would run op_d before op2
    fg = make([x], [e])
    assert fg.consistent()
    assert fg.orderings() == {d.owner: [r.owner]}
    pos = position(fg.toposort())
    assert pos[r.owner] < pos[d.owner] < pos[e.owner]


def test_readers_of_views_run_before_the_destroyer():
    x = MyVar("x")
    a = op1(x)
    v = op_v(a)
    w = op_v(v)
    rv = op2(v)
    rw = op3(w)
    d = op_d(a)
    fg = make([x], [op1(d, rv, rw)])
    assert fg.consistent()
    ords = fg.orderings()[d.owner]
    assert set(ords) == {v.owner, w.owner, rv.owner, rw.owner}
    pos = position(fg.toposort())
    for reader in ords:
        assert pos[reader] < pos[d.owner]
    assert fg.destroyers(w) == [d.owner]  # destroying a destroys its views
    dh = fg.destroy_handler
    droot, impact, root_destroyer = dh.refresh_droot_impact()
    assert impact[a] == [a, v, w] and droot[w] is a and root_destroyer[a] is d.owner


def test_destroying_through_a_view():
    x = MyVar("x")
    a = op1(x)
    v = op_v(a)
    d = op_d(v)
    r = op2(a)
    fg = make([x], [op3(d, r)])
    assert fg.consistent()
    assert fg.destroyers(a) == [d.owner]
    # The view op reads a too, so it also runs before the destroyer.
    assert fg.orderings() == {d.owner: [v.owner, r.owner]}


def test_destroying_the_result_of_a_destroyer():
    x = MyVar("x")
    d1 = op_d(op1(x))
    d2 = op_d(d1)
    fg = make([x], [d2])
    assert fg.consistent()
    assert fg.destroyers(d1) == [d2.owner]


def test_tolerated_aliasing():
    x = MyVar("x")
    a = op1(x)
    fg = make([x], [op_d_same(a, a)])
    assert fg.consistent()
    aliased = MyOp("op_d_alias", destroy_map={0: [0]})
    aliased.destroyhandler_tolerate_aliased = [(0, 1)]
    fg = make([x], [aliased(a, op_v(a))])
    assert fg.consistent()


# ---------------------------------------------------------------------------
# Illegal graphs


def test_destroyed_twice():
    x = MyVar("x")
    a = op1(x)
    fg = make([x], [op2(op_d(a), op_d(a))])
    refused(fg, "Multiple destroyers of op1")
    assert fg.destroyers(a) == []  # the question has no answer in a broken graph


def test_destroyed_twice_through_a_view():
    x = MyVar("x")
    a = op1(x)
    a.name = "a"
    fg = make([x], [op2(op_d(a), op_d(op_v(a)))])
    refused(fg, "Multiple destroyers of a")


def test_destroyed_and_needed_afterwards():
    x = MyVar("x")
    a = op1(x)
    a.name = "a"
    d = op_d(a)
    fg = make([x], [op2(d, a)])
    refused(fg, r"op_d\(a\) destroys a, which is still needed after it runs")


def test_view_of_destroyed_value_needed_afterwards():
    x = MyVar("x")
    a = op1(x)
    a.name = "a"
    v = op_v(a)
    fg = make([x], [op2(op_d(a), v)])
    refused(fg, "destroys a, which is still needed")


def test_destroying_a_constant_or_an_indestructible_variable():
    x = MyVar("x")
    c = MyConstant(MyType(), 7, name="seven")
    fg = make([x], [op_d(c)])
    refused(fg, r"destroy indestructible variables: \[seven\]")
    y = MyVar("y")
    y.tag.indestructible = True
    fg = make([y], [op_d(op_v(y))])
    refused(fg, r"destroy indestructible variables: \[y")


def test_destroying_an_output():
    x = MyVar("x")
    a = op1(x)
    a.name = "a"
    fg = make([x], [a, op_d(a)])
    refused(fg, r"destroys a, but it is an output of the graph")
    fg = make([x], [op_v(a), op_d(a)])
    refused(fg, r"destroys a, but op_v\.0, a view of it, is an output")
    fg = make([x], [x, op_d(x)])
    refused(fg, "destroys x, but it is an output")


def test_input_aliasing():
    x = MyVar("x")
    a = op1(x)
    a.name = "a"
    fg = make([x], [op_d(a, a)])
    refused(fg, r"Input aliasing: .* destroys its input 0 \(a\) while its input 1 \(a\)")
    fg = make([x], [op_d_same(a, op_v(a))])  # tolerate_same is for the very same variable
    refused(fg, "Input aliasing")


def test_views_of_several_inputs_are_not_supported():
    x, y = MyVar("x"), MyVar("y")
    two = MyOp("two_views", view_map={0: [0, 1]})
    with pytest.raises(NotImplementedError, match="views inputs \\[0, 1\\]"):
        make([x, y], [two(x, y)])


# ---------------------------------------------------------------------------
# Changes through replace_validate


def test_illegal_replacement_is_reverted():
    x = MyVar("x")
    a = op1(x)
    r = op2(a)
    fg = make([x], [op3(op1(a), r)])
    before = snapshot(fg)
    # Destroying a while op2 still reads it is fine (op2 runs first)...
    chk = fg.replace_all_validate([(fg.outputs[0].owner.inputs[0], op_d(a))])
    assert_valid(fg)
    fg.revert(chk)
    assert snapshot(fg) == before
    # ...but not when the reader depends on the destroyer's result.
    d = op_d(a)
    with pytest.raises(InconsistencyError, match="still needed"):
        fg.replace_validate(r, op2(d, a))
    assert snapshot(fg) == before
    assert fg.destroy_handler.destroyers == {}
    assert fg.validate()


def test_replacement_updates_views_and_destroyers():
    x, y = MyVar("x"), MyVar("y")
    a = op1(x)
    v = op_v(a)
    d = op_d(v)
    fg = make([x, y], [d])
    dh = fg.destroy_handler
    assert dh.view_i[v] is a and fg.destroyers(a) == [d.owner]
    b = op2(y)
    fg.replace_validate(a, b)
    assert_valid(fg)
    assert dh.view_i[v] is b and dh.view_o == {b: {v: None}}
    assert fg.destroyers(b) == [d.owner] and fg.destroyers(a) == []
    fg.replace_validate(d, op1(y))  # the destroyer and the view are pruned
    assert dh.destroyers == {} and dh.view_i == {} and dh.view_o == {}
    assert not fg.has_destroyers([b, y])


# ---------------------------------------------------------------------------
# Attaching, cloning, pickling


def test_attach_rules():
    x = MyVar("x")
    dh = DestroyHandler()
    fg = FunctionGraph([x], [op_d(op1(x))], clone=False)
    fg.attach_feature(dh)  # after construction: it imports the existing nodes
    assert fg.destroyers(fg.outputs[0].owner.inputs[0]) == [fg.outputs[0].owner]
    other = DestroyHandler()
    fg.attach_feature(other)  # a second handler is refused quietly
    assert fg.destroy_handler is dh and other not in fg._features
    with pytest.raises(ValueError, match="only serve one"):
        FunctionGraph([x], [op1(x)], features=[dh])
    fg.remove_feature(dh)
    assert not hasattr(fg, "destroyers") and not hasattr(fg, "destroy_handler")
    with pytest.raises(ValueError, match="'regular' or 'fast'"):
        DestroyHandler(algo="slow")
    assert DestroyHandler(algo="fast").algo == "fast"


def test_protocol_errors():
    x = MyVar("x")
    fg = make([x], [op1(x)])
    node = fg.outputs[0].owner
    with pytest.raises(ProtocolError, match="imported twice"):
        fg.destroy_handler.on_import(fg, node, "again")
    with pytest.raises(ProtocolError, match="never imported"):
        fg.destroy_handler.on_change_input(fg, op2(x).owner, 0, x, x)


def test_clone_and_pickle_keep_a_working_handler():
    x = MyVar("x")
    a = op1(x)
    fg = make([x], [op3(op_d(a), op2(a))])
    fg2, equiv = fg.clone_get_equiv()
    assert fg2.destroy_handler is not fg.destroy_handler
    assert fg2.destroyers(equiv[a]) == [equiv[fg.outputs[0].owner.inputs[0].owner]]
    fg3 = pickle.loads(pickle.dumps(fg))
    assert_valid(fg3)
    a3 = fg3.outputs[0].owner.inputs[1].owner.inputs[0]
    assert [n.op for n in fg3.destroyers(a3)] == [op_d]
    order = [n.op for n in fg3.toposort()]
    assert order.index(op2) < order.index(op_d)
    with pytest.raises(InconsistencyError, match="still needed"):
        d3, r3 = fg3.outputs[0].owner.inputs
        fg3.replace_validate(r3, op2(d3, a3))


def test_supervisor_and_fast_inplace_check():
    x, y, z = MyVar("x"), MyVar("y"), MyVar("z")
    c = MyConstant(MyType(), 1, name="one")
    a = op1(x, y, z, c)
    d = op_d(z)
    fg = make([x, y, z], [a, d], Supervisor([x]))
    assert fg.consistent()
    assert fast_inplace_check(fg, [x, y, z, c, a]) == [y]
    before = snapshot(fg)
    with pytest.raises(InconsistencyError, match="protected Variable: x"):
        fg.replace_validate(a, op1(op_d(x), y, z, c))
    assert snapshot(fg) == before
