"""Features: Bookkeeper, History, Validator, ReplaceValidate, NodeFinder and friends."""

import numpy as np
import pytest
from graphcheck import assert_valid, snapshot
from toy import MyVar, op1, op2, op3, op4, op_d

from theano_dag.graph import basic
from theano_dag.graph.destroyhandler import DestroyHandler
from theano_dag.graph.fg import FunctionGraph, InconsistencyError, MissingInputError
from theano_dag.graph.toolbox import (
    AlreadyThere,
    BadOptimization,
    Bookkeeper,
    Feature,
    History,
    NodeFinder,
    NoOutputFromInplace,
    PreserveNames,
    PreserveVariableAttributes,
    PrintListener,
    ReplacementDidNotRemoveError,
    ReplaceValidate,
    Supervisor,
    Validator,
    is_same_graph,
)

# check_integrity runs after every mutation of every FunctionGraph in this module.
pytestmark = pytest.mark.usefixtures("checked_fgraph")


def build():
    x, y, z = MyVar("x"), MyVar("y"), MyVar("z")
    a = op1(x, y)
    a.name = "a"
    b = op2(a, z)
    b.name = "b"
    e = op3(b, a)
    e.name = "e"
    fg = FunctionGraph([x, y, z], [e], clone=False)
    return fg, (x, y, z, a, b, e)


class Veto(Feature):
    """Refuses graphs that contain an op4 node."""

    def validate(self, fgraph):
        if any(n.op == op4 for n in fgraph.apply_nodes):
            raise InconsistencyError("op4 is not allowed")


class BookRecorder(Bookkeeper):
    def __init__(self):
        self.seen = []

    def on_import(self, fgraph, node, reason):
        self.seen.append(("import", node, reason))

    def on_prune(self, fgraph, node, reason):
        self.seen.append(("prune", node, reason))


def test_feature_defaults_do_nothing():
    f = Feature()
    fg, _ = build()
    assert f.orderings(fg) == {}
    assert f.clone() is f
    assert f.on_attach(fg) is None and f.on_import(fg, None, None) is None


def test_bookkeeper_replays_the_graph_on_attach_and_detach():
    fg, (x, y, z, a, b, e) = build()
    book = BookRecorder()
    fg.attach_feature(book)
    assert book.seen == [("import", n, "on_attach") for n in (a.owner, b.owner, e.owner)]
    book.seen.clear()
    fg.remove_feature(book)
    assert book.seen == [("prune", n, "Bookkeeper.detach") for n in (a.owner, b.owner, e.owner)]


# ---------------------------------------------------------------------------
# History


def test_history_revert_restores_the_graph_exactly():
    fg, (x, y, z, a, b, e) = build()
    before = snapshot(fg)
    chk = fg.checkpoint()
    fg.replace(a, op4(x))
    fg.replace(z, x)
    fg.replace(e, op1(b))
    assert_valid(fg)
    assert snapshot(fg) != before
    fg.revert(chk)
    assert_valid(fg)
    assert snapshot(fg) == before
    assert e.owner.inputs == [b, a] and b.owner.inputs == [a, z]


def test_history_only_keeps_changes_since_the_checkpoint():
    fg, (x, y, z, a, b, e) = build()
    fg.replace(z, x)
    after_first = snapshot(fg)
    chk = fg.checkpoint()
    fg.replace(a, op4(y))
    fg.revert(chk)
    assert snapshot(fg) == after_first
    assert_valid(fg)
    with pytest.raises(ValueError, match="latest checkpoint"):
        fg.revert(chk - 1)


def test_history_as_a_separate_feature():
    x = MyVar("x")
    hist = History()
    fg = FunctionGraph([x], [op1(x)], clone=False)
    # ReplaceValidate already installed checkpoint/revert: another History is refused.
    fg.attach_feature(hist)
    assert hist not in fg._features
    fg.remove_feature(next(f for f in fg._features if isinstance(f, ReplaceValidate)))
    assert not hasattr(fg, "checkpoint")
    fg.attach_feature(hist)
    chk = fg.checkpoint()
    before = snapshot(fg)
    fg.replace(fg.outputs[0], op2(x))
    assert len(hist.history[fg]) == 1
    fg.revert(chk)
    assert snapshot(fg) == before and hist.history[fg] == []
    assert isinstance(hist.clone(), History) and hist.clone() is not hist


# ---------------------------------------------------------------------------
# Validator / ReplaceValidate


def test_validate_and_consistent():
    fg, (x, *_rest) = build()
    assert fg.validate() is True and fg.consistent()
    fg.attach_feature(Veto())
    fg.replace(fg.outputs[0], op4(x))
    assert not fg.consistent()
    with pytest.raises(InconsistencyError, match="op4 is not allowed"):
        fg.validate()


def test_replace_validate_reverts_and_reraises():
    fg, (x, y, z, a, b, e) = build()
    fg.attach_feature(Veto())
    before = snapshot(fg)
    with pytest.raises(InconsistencyError, match="op4 is not allowed"):
        fg.replace_validate(a, op4(x), reason="bad")
    assert snapshot(fg) == before
    assert_valid(fg)
    fg.replace_validate(a, op1(x), reason="good")
    assert_valid(fg)
    assert b.owner.inputs[0].owner.inputs == [x]


def test_replace_all_validate_reverts_every_pair_on_failure():
    fg, (x, y, z, a, b, e) = build()
    fg.attach_feature(Veto())
    before = snapshot(fg)
    with pytest.raises(InconsistencyError):
        fg.replace_all_validate([(z, x), (a, op4(y))])
    assert snapshot(fg) == before
    # A failure inside replace itself (a cycle) is reverted too.
    with pytest.raises(InconsistencyError, match="cycle"):
        fg.replace_all_validate([(z, x), (a, op1(b))])
    assert snapshot(fg) == before
    with pytest.raises(MissingInputError):
        fg.replace_all_validate([(z, x), (a, op1(MyVar("w")))])
    assert snapshot(fg) == before
    assert_valid(fg)
    chk = fg.replace_all_validate([(z, x), (a, op1(y))])
    assert_valid(fg)
    assert isinstance(chk, int)


def test_replace_all_validate_checks_membership_first_and_skips_pruned():
    fg, (x, y, z, a, b, e) = build()
    before = snapshot(fg)
    with pytest.raises(ValueError, match="Cannot replace w: it does not belong"):
        fg.replace_all_validate([(z, x), (MyVar("w"), x)])
    assert snapshot(fg) == before
    # Replacing e prunes b; the pair for b is then skipped rather than refused.
    fg.replace_all_validate([(e, op1(a)), (b, op2(x))])
    assert_valid(fg)
    assert b not in fg and repr(fg) == "FunctionGraph(op1(op1(x, y)))"


def test_replace_all_validate_remove():
    fg, (x, y, z, a, b, e) = build()
    before = snapshot(fg)
    with pytest.warns(UserWarning, match="did not remove"):
        with pytest.raises(ReplacementDidNotRemoveError, match="wanted to remove"):
            fg.replace_all_validate_remove([(b, op2(a, x))], remove=[a.owner])
    assert snapshot(fg) == before
    with pytest.raises(ReplacementDidNotRemoveError):
        fg.replace_all_validate_remove([(b, op2(a, x))], remove=[a], warn=False)
    fg.replace_all_validate_remove([(e, op1(x))], remove=[b.owner, a])
    assert_valid(fg)
    # Bringing a removed node back is refused by validate.
    with pytest.raises(InconsistencyError, match="reintroduce a removed node"):
        fg.replace_validate(fg.outputs[0], b)
    assert repr(fg) == "FunctionGraph(op1(x))"


def test_replace_validate_is_attached_once():
    fg, _ = build()
    assert sum(isinstance(f, ReplaceValidate) for f in fg._features) == 1
    fg.attach_feature(ReplaceValidate())
    assert sum(isinstance(f, ReplaceValidate) for f in fg._features) == 1
    fg.attach_feature(Validator())
    assert not any(type(f) is Validator for f in fg._features)


# ---------------------------------------------------------------------------
# NodeFinder


def test_node_finder_follows_the_graph():
    fg, (x, y, z, a, b, e) = build()
    finder = NodeFinder()
    fg.attach_feature(finder)
    assert fg.get_nodes(op1) == [a.owner]
    assert fg.get_nodes(op4) == []
    new = op4(op4(x))
    fg.replace(b, new)
    assert set(fg.get_nodes(op4)) == {new.owner, new.owner.inputs[0].owner}
    assert fg.get_nodes(op2) == []
    with pytest.raises(ValueError, match="only serve one"):
        FunctionGraph([x], [op1(x)], features=[finder])
    fg.attach_feature(NodeFinder())  # a second finder is refused quietly
    assert sum(isinstance(f, NodeFinder) for f in fg._features) == 1
    fg.remove_feature(finder)
    assert not hasattr(fg, "get_nodes") and finder.fgraph is None
    with pytest.raises(ValueError, match="not attached"):
        finder.on_detach(fg)


def test_already_there_is_an_exception():
    assert issubclass(AlreadyThere, Exception)


# ---------------------------------------------------------------------------
# Listeners


def test_print_listener(capsys):
    fg, (x, y, z, a, b, e) = build()
    listener = PrintListener()
    fg.attach_feature(listener)
    fg.replace(b, op4(x), reason="demo")
    fg.remove_feature(listener)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "-- attaching to:  FunctionGraph(op3(op2(*1 -> op1(x, y), z), *1))"
    assert "-- importing: op4(x), reason: demo" in out
    assert "-- changing (op3(op4.0, a).inputs[0]) from b to op4.0" in out
    assert "-- pruning: op2(a, z), reason: demo" in out
    assert out[-1].startswith("-- detaching from: ")
    quiet = PrintListener(active=False)
    fg.attach_feature(quiet)
    fg.replace(a, op1(y))
    assert capsys.readouterr().out == ""


def test_preserve_names():
    fg, (x, y, z, a, b, e) = build()
    fg.attach_feature(PreserveNames())
    new = op4(x)
    fg.replace(b, new)
    assert new.name == "b"
    named = op1(y)
    named.name = "kept"
    fg.replace(a, named)
    assert named.name == "kept"


def test_preserve_variable_attributes():
    fg, (x, y, z, a, b, e) = build()
    fg.attach_feature(PreserveVariableAttributes())
    b.tag.nan_guard_mode_check = True
    new = op4(x)
    fg.replace(b, new)
    assert new.name == "b" and new.tag.nan_guard_mode_check is True


def test_no_output_from_inplace():
    x, y = MyVar("x"), MyVar("y")
    a = op1(x)
    fg = FunctionGraph(
        [x, y], [op2(a), y], features=[DestroyHandler(), NoOutputFromInplace(0, 1)], clone=False
    )
    before = snapshot(fg)
    with pytest.raises(InconsistencyError, match="may not be computed in place"):
        fg.replace_validate(fg.outputs[0], op_d(a))
    assert snapshot(fg) == before
    # Outputs outside the protected range may be computed in place.
    fg.replace_validate(y, op_d(op1(x)))
    assert_valid(fg)
    clone = NoOutputFromInplace(0, 1).clone()
    assert (clone.first_idx, clone.last_idx) == (0, 1)


def test_supervisor_protects_variables():
    x, y = MyVar("x"), MyVar("y")
    fg = FunctionGraph(
        [x, y], [op1(x, y)], features=[DestroyHandler(), Supervisor([x])], clone=False
    )
    before = snapshot(fg)
    with pytest.raises(InconsistencyError, match="Trying to destroy a protected Variable: x"):
        fg.replace_validate(fg.outputs[0], op_d(x))
    assert snapshot(fg) == before
    fg.replace_validate(fg.outputs[0], op_d(y))  # y is not protected
    assert_valid(fg)
    # Without a DestroyHandler the Supervisor has nothing to check.
    assert Supervisor([x]).validate(FunctionGraph([x], [op_d(x)])) is True


# ---------------------------------------------------------------------------
# BadOptimization, is_same_graph


def test_bad_optimization_reports_values_and_difference():
    x = MyVar("x")
    old, new = op1(x), op2(x)
    err = BadOptimization(
        old,
        new,
        np.array([1.0, 2.0, 3.0]),
        np.array([1.0, 2.0, 4.5]),
        reason="local_bad",
        old_graph="G1",
        new_graph="G2",
    )
    assert err.old_r is old and err.new_r is new and err.reason == "local_bad"
    text = str(err)
    assert "Max Abs Diff:  1.5" in text
    assert "Value at Max Diff:  (4.5, 3.0)" in text
    assert "Reason:  local_bad" in text and "G1" in text and "G2" in text
    assert "Old Value shape, dtype: (3,) float64" in text
    assert str(BadOptimization("just a message")) == "just a message"
    # Values that cannot be compared numerically still give a message.
    assert "Old Value:  abc" in str(BadOptimization(old, new, "abc", "abd"))


def test_is_same_graph_is_the_basic_one():
    assert is_same_graph is basic.is_same_graph
    x, y = MyVar("x"), MyVar("y")
    assert is_same_graph(op1(x), op1(x))
    assert not is_same_graph(op1(x), op1(y))
    assert is_same_graph(op1(x), op1(y), givens={x: y})


def test_failed_remove_does_not_poison_later_validation():
    fg, (x, y, z, a, b, e) = build()
    before = snapshot(fg)
    # b's node is removed by the replacement but a's is not: undone, and b's node
    # comes back through the undo; that must not count as a reintroduction.
    with pytest.raises(ReplacementDidNotRemoveError):
        fg.replace_all_validate_remove([(b, op2(a, x))], remove=[b.owner, a.owner], warn=False)
    assert snapshot(fg) == before
    fg.replace_validate(z, x)
    assert_valid(fg)
