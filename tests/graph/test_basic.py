"""Tests of theano_dag.graph.basic: Apply, Variable, Constant and the graph algorithms.

Built on small local toy types and ops (not on the tensor library).
"""

import pickle
import random
import re

import pytest

from theano_dag.graph.algorithms import post_order, toposort
from theano_dag.graph.basic import (
    Apply,
    Constant,
    Node,
    NoParams,
    Variable,
    ancestors,
    applys_between,
    as_string,
    clone,
    clone_get_equiv,
    clone_replace,
    equal_computations,
    general_toposort,
    graph_inputs,
    inputs,
    io_connection_pattern,
    io_toposort,
    is_in_ancestors,
    is_same_graph,
    list_of_nodes,
    nodes_constructed,
    op_as_string,
    ops,
    orphans,
    orphans_between,
    stack_search,
    variables,
    variables_and_orphans,
    vars_between,
    view_roots,
    walk,
)
from theano_dag.graph.op import Op
from theano_dag.graph.type import Type
from theano_dag.graph.utils import MethodNotDefined, TestValueError

# ---------------------------------------------------------------------------
# Toys


class MyType(Type):
    """Numbers, tagged with ``thingy`` so that two MyTypes can differ."""

    __props__ = ("thingy",)

    def __init__(self, thingy=0):
        self.thingy = thingy

    def filter(self, data, strict=False, allow_downcast=None):
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return data
        raise TypeError(f"{self} expects a number, got {type(data).__name__}")

    def convert_variable(self, var):
        # thingy -1 is a wildcard that converts to any MyType (to test the convert path).
        if isinstance(var.type, MyType) and var.type.thingy == -1:
            return ConvertOp(self)(var)
        return None

    def __str__(self):
        return f"MyType({self.thingy})"


def MyVariable(name=None, thingy=0):
    return Variable(MyType(thingy), None, None, name=name)


class MyOp(Op):
    """``name(*inputs)``: output ``k`` is ``sum(inputs) + k``; ``nout`` outputs."""

    __props__ = ("name", "nout")

    def __init__(self, name, nout=1):
        self.name = name
        self.nout = nout

    def make_node(self, *inputs):
        inputs = [MyType().filter_variable(x) if not isinstance(x, Variable) else x for x in inputs]
        for i, x in enumerate(inputs):
            if not isinstance(x.type, MyType):
                raise TypeError(f"{self}: input {i} must be a MyType variable, got {x.type}")
        thingy = inputs[0].type.thingy if inputs else 0
        return Apply(self, inputs, [MyType(thingy)() for _ in range(self.nout)])

    def perform(self, node, inputs, output_storage, params=None):
        for k, cell in enumerate(output_storage):
            cell[0] = sum(inputs) + k

    def __str__(self):
        return self.name


class ConvertOp(Op):
    __props__ = ("to",)

    def __init__(self, to):
        self.to = to

    def make_node(self, x):
        return Apply(self, [x], [self.to()])


class DefaultOutputOp(MyOp):
    default_output = 1


class ViewOp(MyOp):
    """Output 0 is a view of the inputs listed in ``view_map``."""

    __props__ = ("name", "nout", "viewed")

    def __init__(self, name, viewed=(0,)):
        super().__init__(name)
        self.viewed = tuple(viewed)
        self.view_map = {0: list(viewed)}


class PatternOp(MyOp):
    """Two inputs, two outputs: output 0 depends on input 0 only, output 1 on input 1 only."""

    def __init__(self):
        super().__init__("pattern", nout=2)

    def connection_pattern(self, node):
        return [[True, False], [False, True]]


class SubApply(Apply):
    """An Apply subclass: clones must keep the class."""


op1, op2, op3 = MyOp("op1"), MyOp("op2"), MyOp("op3")
split2 = MyOp("split2", nout=2)


def chain(n, start=None):
    """A chain ``op1(op1(...op1(x)))`` of ``n`` Apply nodes; returns (input, output)."""
    x = start if start is not None else MyVariable("x")
    out = x
    for _ in range(n):
        out = Apply(op1, [out], [MyType()()]).outputs[0]
    return x, out


def assert_topological(order, inputs_=()):
    """Every input of each node is a graph input, an ownerless variable or computed before."""
    computed = set(inputs_)
    for node in order:
        for i in node.inputs:
            assert i in computed or i.owner is None, f"{node} uses {i} before it is computed"
        computed.update(node.outputs)


# ---------------------------------------------------------------------------
# Apply


class TestApply:
    def test_links_outputs_to_node(self):
        x, y = MyVariable("x"), MyVariable("y")
        a, b = MyType()(), MyType()()
        node = Apply(split2, [x, y], [a, b])
        assert node.op is split2
        assert node.inputs == [x, y] and node.outputs == [a, b]
        assert (a.owner, a.index, b.owner, b.index) == (node, 0, node, 1)
        assert (node.nin, node.nout) == (2, 2)
        assert node.get_parents() == [x, y]
        assert node.get_parents() is not node.inputs  # a copy
        assert isinstance(node, Node)

    def test_inputs_copied_into_a_list(self):
        x = MyVariable("x")
        ins = (x,)
        node = Apply(op1, ins, [MyType()()])
        assert node.inputs == [x] and isinstance(node.inputs, list)

    def test_non_variable_input_names_position_and_op(self):
        x = MyVariable("x")
        with pytest.raises(
            TypeError, match=r"^Input 1 of Apply\(op1\) must be a Variable, got int: 3$"
        ):
            Apply(op1, [x, 3], [MyType()()])

    def test_inputs_must_be_a_list(self):
        with pytest.raises(TypeError, match=r"inputs of Apply\(op1\) must be a list or tuple"):
            Apply(op1, MyVariable("x"), [MyType()()])
        with pytest.raises(TypeError, match=r"outputs of Apply\(op1\) must be a list or tuple"):
            Apply(op1, [MyVariable("x")], MyType()())

    def test_non_variable_output(self):
        with pytest.raises(
            TypeError, match=r"Output 0 of Apply\(op1\) must be a Variable, got str"
        ):
            Apply(op1, [MyVariable("x")], ["y"])

    def test_output_owned_by_another_node(self):
        x = MyVariable("x")
        y = op1(x)
        with pytest.raises(
            ValueError,
            match=r"^Output 0 of Apply\(op2\) \(op1\.0\) already belongs to another Apply node$",
        ):
            Apply(op2, [x], [y])
        # The same output at another index of its own node is refused too.
        a, b = MyType()(), MyType()()
        node = Apply(split2, [x], [a, b])
        with pytest.raises(ValueError, match="already belongs to another Apply node"):
            Apply.__init__(node, split2, [x], [b, a])

    def test_refused_node_links_no_output(self):
        x = MyVariable("x")
        fresh, taken = MyType()(), op1(x)
        with pytest.raises(ValueError, match="already belongs to another Apply node"):
            Apply(split2, [x], [fresh, taken])
        assert fresh.owner is None and fresh.index is None
        dup = MyType()()
        with pytest.raises(ValueError, match=r"^Output 1 of Apply\(split2\) .* already belongs"):
            Apply(split2, [x], [dup, dup])
        assert dup.owner is None

    def test_default_output_single(self):
        y = op1(MyVariable("x"))
        assert y.owner.default_output() is y
        assert y.owner.out is y

    def test_default_output_from_op(self):
        outs = DefaultOutputOp("d", nout=3).make_node(MyVariable("x")).outputs
        assert outs[0].owner.default_output() is outs[1]
        assert outs[0].owner.out is outs[1]

    def test_default_output_errors(self):
        node = split2.make_node(MyVariable("x"))
        with pytest.raises(ValueError, match=r"^split2\.default_output should be an output index"):
            node.default_output()
        for bad, msg in [(5, "out of range"), (-1, "out of range"), ("1", "should be an int")]:
            op = DefaultOutputOp("d", nout=2)
            op.default_output = bad
            with pytest.raises(ValueError, match=msg):
                op.make_node(MyVariable("x")).default_output()

    def test_str(self):
        x, y = MyVariable("x"), MyVariable("y")
        assert str(op1(x, op2(y)).owner) == "op1(x, op2.0)"
        assert repr(op1(x).owner) == "op1(x)"

    def test_clone(self):
        x = MyVariable("x")
        node = split2.make_node(x)
        node.tag.note = "hello"
        node.outputs[0].name = "first"
        cp = node.clone()
        assert cp is not node and cp.op is node.op
        assert cp.inputs == [x] and cp.inputs is not node.inputs
        assert all(a is not b for a, b in zip(cp.outputs, node.outputs))
        assert [o.owner for o in cp.outputs] == [cp, cp]
        assert [o.index for o in cp.outputs] == [0, 1]
        assert cp.outputs[0].name == "first"
        assert cp.tag.note == "hello" and cp.tag is not node.tag

    def test_clone_keeps_subclass(self):
        node = SubApply(op1, [MyVariable("x")], [MyType()()])
        assert type(node.clone()) is SubApply
        assert type(node.clone_with_new_inputs([MyVariable("z")])) is SubApply

    def test_clone_with_new_inputs_same_type(self):
        x, z = MyVariable("x"), MyVariable("z")
        node = op1(x).owner
        new = node.clone_with_new_inputs([z])
        assert new.inputs == [z] and new.op is op1
        assert new.outputs[0] is not node.outputs[0]
        assert node.inputs == [x]  # the original is untouched

    def test_clone_with_new_inputs_strict_converts(self):
        node = op1(MyVariable("x")).owner
        wild = MyVariable("w", thingy=-1)
        new = node.clone_with_new_inputs([wild])
        assert new.inputs[0].owner.op == ConvertOp(MyType(0))
        assert new.inputs[0].owner.inputs == [wild]
        assert new.outputs[0].type == MyType(0)

    def test_clone_with_new_inputs_strict_refuses_other_type(self):
        node = op1(MyVariable("x")).owner
        other = MyVariable("o", thingy=7)
        msg = (
            "Cannot convert Type MyType(7) (of Variable o) into Type MyType(0). "
            "You can try to manually convert o into a MyType(0)."
        )
        with pytest.raises(TypeError, match=re.escape(msg)):
            node.clone_with_new_inputs([other])

    def test_clone_with_new_inputs_not_strict_remakes(self):
        node = op1(MyVariable("x")).owner
        node.tag.note = 1
        new = node.clone_with_new_inputs([MyVariable("o", thingy=7)], strict=False)
        # make_node ran again: the output type follows the new input.
        assert new.outputs[0].type == MyType(7)
        assert new.tag.note == 1

    def test_clone_with_new_inputs_value_becomes_constant(self):
        node = op1(MyVariable("x")).owner
        new = node.clone_with_new_inputs([4])
        assert isinstance(new.inputs[0], Constant) and new.inputs[0].data == 4

    def test_clone_with_new_inputs_wrong_count(self):
        node = op1(MyVariable("x")).owner
        with pytest.raises(
            ValueError, match=r"^clone_with_new_inputs of op1: expected 1 inputs, got 2$"
        ):
            node.clone_with_new_inputs([MyVariable("a"), MyVariable("b")])

    def test_params(self):
        node = op1(MyVariable("x")).owner
        assert node.run_params() is NoParams
        assert node.params_type is None

        class ParamOp(MyOp):
            params_type = MyType(3)

            def get_params(self, node):
                return 42

        pnode = ParamOp("p").make_node(MyVariable("x"))
        assert pnode.run_params() == 42
        assert pnode.params_type == MyType(3)
        # An op without get_params at all (not an Op subclass) has no params either.
        assert Apply("plain", [], [MyType()()]).run_params() is NoParams

    def test_pickle_round_trip(self):
        x = MyVariable("x")
        y = split2(op1(x, 2), x)[1]
        y.owner.tag.note = "kept"
        y2 = pickle.loads(pickle.dumps(y))
        assert y2 is not y
        assert y2.owner.tag.note == "kept"
        assert y2.owner.outputs[1] is y2 and y2.index == 1
        (x2,) = graph_inputs([y2])[:1]
        assert x2.name == "x"
        # Same structure, with the unpickled x standing for x and the constant equal.
        const2 = y2.owner.inputs[0].owner.inputs[1]
        assert isinstance(const2, Constant) and const2.data == 2 and const2.owner is None
        assert equal_computations([y2], [y], in_xs=[x2], in_ys=[x])


# ---------------------------------------------------------------------------
# Variable


class TestVariable:
    def test_members(self):
        t = MyType(1)
        v = Variable(t, name="v")
        assert (v.type, v.owner, v.index, v.name) == (t, None, None, "v")
        assert v.get_parents() == []
        y = op1(v)
        assert y.get_parents() == [y.owner]

    def test_bad_arguments(self):
        with pytest.raises(TypeError, match="owner must be an Apply instance, got 'x'"):
            Variable(MyType(), owner="x")
        with pytest.raises(TypeError, match="index must be an int, got '0'"):
            Variable(MyType(), index="0")
        with pytest.raises(TypeError, match="name must be a string, got 3"):
            Variable(MyType(), name=3)

    def test_auto_name_is_unique_and_increasing(self):
        a, b = MyVariable(), MyVariable()
        na = re.fullmatch(r"auto_(\d+)", a.auto_name)
        nb = re.fullmatch(r"auto_(\d+)", b.auto_name)
        assert na and nb
        assert int(nb.group(1)) > int(na.group(1))
        assert a.clone().auto_name != a.auto_name

    def test_str(self):
        x = MyVariable("x")
        assert str(x) == repr(x) == "x"
        assert str(MyVariable(thingy=4)) == "<MyType(4)>"
        a, b = split2(x)
        assert (str(a), str(b)) == ("split2.0", "split2.1")
        outs = DefaultOutputOp("d", nout=2)(x, return_list=True)
        assert str(outs[0]) == "d.out"  # the default output (index 1) prints as .out
        other = outs[0].owner.outputs[0]
        assert str(other) == "d.0"
        b.name = "named"
        assert str(b) == "named"

    def test_clone(self):
        x = MyVariable("x")
        x.tag.note = [1]
        cp = x.clone()
        assert cp is not x and type(cp) is Variable
        assert (cp.type, cp.name, cp.owner, cp.index) == (x.type, "x", None, None)
        assert cp.tag.note == [1] and cp.tag is not x.tag
        y = op1(x)
        yc = y.clone()
        assert yc.owner is None and yc.index is None and yc.type == y.type

    def test_test_value_is_filtered(self):
        x = MyVariable("x")
        with pytest.raises(TestValueError, match="x has no test value"):
            x.get_test_value()
        x.tag.test_value = 3
        assert x.get_test_value() == 3
        with pytest.raises(TypeError, match=r"MyType\(0\) expects a number, got str"):
            x.tag.test_value = "three"

    def test_no_ordering(self):
        a, b = MyVariable("a"), MyVariable("b")
        for cmp in (lambda: a < b, lambda: a <= b, lambda: a > b, lambda: a >= b):
            with pytest.raises(NotImplementedError, match="Subclasses of Variable must provide"):
                cmp()

    def test_equality_and_hash_are_identity(self):
        a, b = MyVariable("a"), MyVariable("a")
        assert a != b and a == a
        assert len({a, b, a}) == 2

    def test_construction_observers(self):
        seen = []
        Variable.append_construction_observer(seen.append)
        try:
            v = MyVariable("v")
        finally:
            Variable.remove_construction_observer(seen.append)
        MyVariable("after")
        assert seen == [v]

    def test_pickle(self):
        x = MyVariable("x")
        x.tag.test_value = 5
        x2 = pickle.loads(pickle.dumps(x))
        assert (x2.name, x2.type, x2.auto_name, x2.tag.test_value) == ("x", x.type, x.auto_name, 5)
        # The test-value filter survives.
        with pytest.raises(TypeError):
            x2.tag.test_value = "bad"


# ---------------------------------------------------------------------------
# Constant


class TestConstant:
    def test_data_and_value(self):
        c = Constant(MyType(), 2.5)
        assert c.data == 2.5 and c.value == 2.5 and c.get_test_value() == 2.5
        assert c.owner is None and c.index is None

    def test_data_is_filtered(self):
        with pytest.raises(TypeError, match=r"MyType\(0\) expects a number, got str"):
            Constant(MyType(), "x")

    def test_owner_refused(self):
        c = Constant(MyType(), 1)
        with pytest.raises(ValueError, match="^Constant instances cannot have an owner.$"):
            c.owner = op1(MyVariable()).owner
        c.owner = None  # setting None is allowed
        with pytest.raises(ValueError, match="cannot have an owner"):
            Apply(op1, [MyVariable()], [c])

    def test_clone_keeps_data(self):
        data = 10**30  # a fresh big int: identity shows the data is shared, not copied
        c = Constant(MyType(2), data, name="big")
        c.tag.note = "n"
        cp = c.clone()
        assert type(cp) is Constant and cp is not c
        assert cp.data is c.data
        assert (cp.type, cp.name, cp.tag.note) == (c.type, "big", "n")

    def test_str(self):
        assert str(Constant(MyType(), 5)) == "Constant{5}"
        assert str(Constant(MyType(), 5, name="five")) == "five"
        long = Constant(MyType(), 1234567890123456789012345)
        assert str(long) == "Constant{1234567890...6789012345}"

    def test_equals_and_signature(self):
        a, b, c = Constant(MyType(), 1), Constant(MyType(), 1), Constant(MyType(), 2)
        d = Constant(MyType(1), 1)
        assert a.equals(b) and not a.equals(c) and not a.equals(d)
        assert not a.equals(MyVariable())
        assert a.signature() == (MyType(), 1) == a.merge_signature()
        assert a != b  # == stays identity

    def test_pickle(self):
        c = Constant(MyType(3), 7, name="seven")
        c2 = pickle.loads(pickle.dumps(c))
        assert (c2.data, c2.type, c2.name, c2.owner) == (7, MyType(3), "seven", None)
        with pytest.raises(ValueError):
            c2.owner = op1(MyVariable()).owner


# ---------------------------------------------------------------------------
# Walking and sub-graph queries


def small_graph():
    """x, y inputs; c a constant orphan; out = op1(op2(x, c), op3(y)) and a second output."""
    x, y = MyVariable("x"), MyVariable("y")
    c = Constant(MyType(), 3, name="c")
    a = op2(x, c)
    b = op3(y)
    out = op1(a, b)
    return x, y, c, a, b, out


class TestWalk:
    GRAPH = {1: [2, 3], 2: [4], 3: [4, 5], 4: [], 5: [1]}

    def test_bfs_and_dfs(self):
        assert list(walk([1], self.GRAPH.get)) == [1, 2, 3, 4, 5]
        assert list(walk([1], self.GRAPH.get, bfs=False)) == [1, 3, 5, 4, 2]

    def test_each_node_once_and_return_children(self):
        res = list(walk([1, 1], self.GRAPH.get, return_children=True))
        assert res == [(1, [2, 3]), (2, [4]), (3, [4, 5]), (4, []), (5, [1])]

    def test_children_iterator_is_not_consumed_twice(self):
        # expand returns a one-shot iterator; reading the children must not starve the walk.
        res = []
        for node, children in walk([1], lambda n: iter(self.GRAPH[n]), return_children=True):
            res.append((node, list(children)))
        assert [n for n, _ in res] == [1, 2, 3, 4, 5]

    def test_hash_fn(self):
        # Nodes equal under hash_fn count as one.
        assert list(
            walk([1], lambda n: [n + 10] if n < 30 else None, hash_fn=lambda n: n % 20)
        ) == [
            1,
            11,
        ]

    def test_stack_search(self):
        assert stack_search([1], self.GRAPH.get) == [1, 2, 3, 4, 5]
        assert stack_search([1], self.GRAPH.get, mode="dfs") == [1, 3, 5, 4, 2]
        nodes, inv = stack_search([1], self.GRAPH.get, build_inv=True)
        assert nodes == [1, 2, 3, 4, 5]
        assert inv == {2: [1], 3: [1], 4: [2, 3], 5: [3], 1: [5]}
        with pytest.raises(ValueError, match="mode should be 'bfs' or 'dfs', got 'xfs'"):
            stack_search([1], self.GRAPH.get, mode="xfs")


class TestQueries:
    def test_ancestors(self):
        x, y, c, a, b, out = small_graph()
        assert list(ancestors([out])) == [out, a, x, c, b, y]
        assert list(ancestors([out], blockers=[a])) == [out, a, b, y]
        assert list(ancestors([x])) == [x]

    def test_graph_inputs(self):
        x, y, c, a, b, out = small_graph()
        assert graph_inputs([out]) == [x, c, y]
        assert inputs is graph_inputs
        # A blocker stops the search; one with an owner is not an input (as in Theano).
        assert graph_inputs([out], blockers=[a]) == [y]
        assert graph_inputs([out], blockers=[a, y]) == [y]
        assert graph_inputs([out, a]) == [x, c, y]

    def test_vars_between(self):
        x, y, c, a, b, out = small_graph()
        between = list(vars_between([x, y], [out]))
        assert set(between) == {out, a, b, x, c, y}
        assert len(between) == 6
        assert variables([x, y], [out]) == between
        # From a, only what lies above it.
        assert set(vars_between([a], [out])) == {out, a, b, y}

    def test_vars_between_includes_all_outputs_of_a_node(self):
        x = MyVariable("x")
        first, second = split2(x)
        out = op1(first)
        assert set(vars_between([x], [out])) == {out, first, second, x}

    def test_orphans(self):
        x, y, c, a, b, out = small_graph()
        assert orphans_between([x, y], [out]) == [c]
        assert orphans([x], [out]) == [y, c]  # breadth first from the output
        assert orphans_between([x, y, c], [out]) == []

    def test_applys_between_and_ops(self):
        x, y, c, a, b, out = small_graph()
        nodes = applys_between([x, y], [out])
        assert nodes == [out.owner, b.owner, a.owner]  # breadth first from the output
        assert applys_between([a], [out]) == [out.owner, b.owner]
        assert ops([x, y], [out]) == {out.owner, a.owner, b.owner}

    def test_variables_and_orphans(self):
        x, y, c, a, b, out = small_graph()
        vs, orph = variables_and_orphans([x], [out])
        assert vs == variables([x], [out])
        assert orph == [y, c]

    def test_list_of_nodes(self):
        x, y, c, a, b, out = small_graph()
        assert set(list_of_nodes([x, y], [out])) == {out.owner, a.owner, b.owner}
        # Nodes whose outputs are among the inputs are not included, nor anything above them.
        assert set(list_of_nodes([a], [out])) == {out.owner, b.owner}
        assert list_of_nodes([x], [x]) == []

    def test_is_in_ancestors(self):
        x, y, c, a, b, out = small_graph()
        assert is_in_ancestors(out.owner, a.owner)
        assert is_in_ancestors(out.owner, out.owner)
        assert not is_in_ancestors(a.owner, b.owner)
        assert not is_in_ancestors(a.owner, out.owner)


def test_applys_between_multi_output_once():
    x = MyVariable("x")
    first, second = split2(x)
    out = op1(first, second)
    assert applys_between([x], [out]) == [out.owner, first.owner]


# ---------------------------------------------------------------------------
# Cloning


class TestClone:
    def test_clone_copies_everything(self):
        x, y, c, a, b, out = small_graph()
        (x2, y2), (out2,) = clone([x, y], [out])
        assert x2 is not x and y2 is not y and x2.name == "x"
        new_nodes = applys_between([x2, y2], [out2])
        old_nodes = applys_between([x, y], [out])
        assert len(new_nodes) == 3 and not set(new_nodes) & set(old_nodes)
        # copy_orphans follows copy_inputs: the constant is copied too.
        c2 = out2.owner.inputs[0].owner.inputs[1]
        assert c2 is not c and isinstance(c2, Constant) and c2.data == 3
        assert equal_computations([out2], [out], in_xs=[x2, y2], in_ys=[x, y])
        # The original graph is untouched.
        assert graph_inputs([out]) == [x, c, y]

    def test_clone_without_copying_inputs(self):
        x, y, c, a, b, out = small_graph()
        (x2, y2), (out2,) = clone([x, y], [out], copy_inputs=False)
        assert (x2, y2) == (x, y)
        assert out2 is not out and out2.owner is not out.owner
        assert graph_inputs([out2]) == [x, c, y]  # constant shared too
        assert equal_computations([out2], [out])

    def test_clone_orphans_independently(self):
        x, y, c, a, b, out = small_graph()
        (x2,), (out2,) = clone([x], [out], copy_inputs=False, copy_orphans=True)
        x_, c2, y2 = graph_inputs([out2])
        assert x_ is x and c2 is not c and y2 is not y and y2.name == "y"
        (x3,), (out3,) = clone([x], [out], copy_inputs=True, copy_orphans=False)
        x3_, c3, y3 = graph_inputs([out3])
        assert x3_ is x3 is not x and c3 is c and y3 is y

    def test_clone_get_equiv_maps_every_node(self):
        x, y, c, a, b, out = small_graph()
        equiv = clone_get_equiv([x, y], [out])
        old = set(vars_between([x, y], [out])) | set(applys_between([x, y], [out]))
        assert set(equiv) == old
        for k, v in equiv.items():
            assert v is not k and type(v) is type(k)
        assert equiv[a].owner is equiv[a.owner]
        assert equiv[out].owner.inputs == [equiv[a], equiv[b]]
        assert equiv[a.owner].inputs == [equiv[x], equiv[c]]

    def test_clone_get_equiv_without_copies(self):
        x, y, c, a, b, out = small_graph()
        equiv = clone_get_equiv([x], [out], copy_inputs=False, copy_orphans=False)
        assert equiv[x] is x and equiv[y] is y and equiv[c] is c
        assert equiv[out] is not out
        equiv = clone_get_equiv([x], [out], copy_inputs=True, copy_orphans=False)
        assert equiv[x] is not x and equiv[y] is y and equiv[c] is c
        equiv = clone_get_equiv([x], [out], copy_inputs=False, copy_orphans=True)
        assert equiv[x] is x and equiv[y] is not y and equiv[c] is not c

    def test_clone_get_equiv_memo(self):
        x, y, c, a, b, out = small_graph()
        z = MyVariable("z")
        memo = {x: z}
        res = clone_get_equiv([x, y], [out], memo=memo)
        assert res is memo
        assert res[x] is z  # a given mapping wins
        assert res[a].owner.inputs[0] is z

    def test_clone_get_equiv_multi_output_and_unused_output(self):
        x = MyVariable("x")
        first, second = split2(x)
        out = op1(first)
        equiv = clone_get_equiv([x], [out, second])
        assert equiv[second].owner is equiv[first].owner is equiv[first.owner]
        assert equiv[second].index == 1

    def test_clone_ownerless_output(self):
        x, free = MyVariable("x"), MyVariable("free")
        (x2,), (free2,) = clone([x], [free], copy_inputs=False, copy_orphans=False)
        # An output no node computes is always cloned (as Theano does).
        assert x2 is x and free2 is not free and free2.name == "free"
        (x3,), (same,) = clone([x], [x])
        assert x3 is same and x3 is not x


class TestCloneReplace:
    def test_replace_an_input(self):
        x, y, c, a, b, out = small_graph()
        z = MyVariable("z")
        new = clone_replace(out, {x: z})
        assert graph_inputs([new]) == [z, c, y]
        assert equal_computations([new], [out], in_xs=[z], in_ys=[x])
        assert graph_inputs([out]) == [x, c, y]  # original untouched

    def test_every_node_is_cloned_inputs_shared(self):
        x, y, c, a, b, out = small_graph()
        new = clone_replace(out)
        assert new is not out
        assert not set(applys_between([x, y], [new])) & set(applys_between([x, y], [out]))
        assert graph_inputs([new]) == [x, c, y]
        assert equal_computations([new], [out])

    def test_share_inputs_false_clones_inputs_and_constants(self):
        x, y, c, a, b, out = small_graph()
        z = MyVariable("z")
        new = clone_replace([out], [(y, z)], share_inputs=False)[0]
        x2, c2, z2 = graph_inputs([new])
        assert x2 is not x and x2.name == "x" and c2 is not c and c2.data == 3
        # As in Theano, the replacement's inputs are copied too (theano.clone's tests).
        assert z2 is not z and z2.name == "z"
        assert equal_computations(
            [new], [clone_replace([out], [(y, z)])[0]], [x2, c2, z2], [x, c, z]
        )

    def test_share_inputs_false_copies_an_input_once_in_the_replacements_too(self):
        x, y, c, a, b, out = small_graph()
        # x is in the graph and in the replacement of y: both read the one copy of x.
        new = clone_replace([out], [(y, op3(x))], share_inputs=False)[0]
        ins = graph_inputs([new])
        assert len(ins) == 2 and all(i is not x and i is not c for i in ins)
        assert equal_computations([new], [clone_replace([out], [(y, op3(x))])[0]], ins, [x, c])

    def test_replace_an_intermediate(self):
        x, y, c, a, b, out = small_graph()
        z = MyVariable("z")
        new = clone_replace([out], [(a, z)])
        assert isinstance(new, list) and len(new) == 1
        assert new[0].owner.inputs[0] is z
        assert graph_inputs(new) == [z, y]

    def test_replacement_graph_may_use_the_replaced_variable(self):
        x = MyVariable("x")
        out = op1(op2(x))
        twice = op3(x, x)  # x -> op3(x, x): x inside the replacement stays x
        new = clone_replace(out, {x: twice})
        assert new.owner.inputs[0].owner.inputs == [twice]
        assert twice.owner.inputs == [x, x]

    def test_replace_output_itself(self):
        x = MyVariable("x")
        out = op1(x)
        z = MyVariable("z")
        assert clone_replace(out, {out: z}) is z

    def test_bad_replace(self):
        x = MyVariable("x")
        out = op1(x)
        with pytest.raises(ValueError, match="replace must be a dict, a list of"):
            clone_replace(out, x)
        with pytest.raises(TypeError, match="the key 3 to replace must be a Variable"):
            clone_replace(out, {3: x})
        other = MyVariable("o", thingy=5)
        with pytest.raises(
            TypeError, match=re.escape("Cannot convert Type MyType(5) (of Variable o)")
        ):
            clone_replace(out, {x: other})
        # Not strict: the node is rebuilt by make_node.
        new = clone_replace(out, {x: other}, strict=False)
        assert new.type == MyType(5)

    def test_replace_by_value(self):
        x = MyVariable("x")
        new = clone_replace(op1(x), {x: 7})
        const = new.owner.inputs[0]
        assert isinstance(const, Constant) and const.data == 7 and const.type == x.type


# ---------------------------------------------------------------------------
# Ordering


class TestGeneralToposort:
    def test_dependencies_first(self):
        deps = {"d": ["b", "c"], "c": ["a"], "b": ["a"], "a": []}
        order = general_toposort(["d"], deps.get)
        assert order[0] == "a" and order[-1] == "d" and sorted(order) == ["a", "b", "c", "d"]

    def test_cycle(self):
        deps = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
        with pytest.raises(ValueError, match="^graph contains cycles"):
            general_toposort(["d"], deps.get)

    def test_nondeterministic_deps_refused(self):
        with pytest.raises(
            TypeError, match="returned a set: its iteration order is not deterministic"
        ):
            general_toposort(["a"], lambda n: {"b"} if n == "a" else [])

    def test_clients_and_cache(self):
        deps = {"c": ["a", "b"], "b": ["a"], "a": []}
        clients, cache = {}, {}
        general_toposort(["c"], deps.get, deps_cache=cache, clients=clients)
        assert {k: sorted(v) for k, v in clients.items()} == {"a": ["b", "c"], "b": ["c"]}
        assert cache["c"] == ["a", "b"]

    def test_compute_deps_cache_needs_deps_cache(self):
        with pytest.raises(ValueError, match="deps_cache must be given with compute_deps_cache"):
            general_toposort(["a"], None, compute_deps_cache=lambda n: [])

    def test_utils_toposort(self):
        assert toposort({"b": ["a"], "c": ["b"], "a": []}) == ["a", "b", "c"]


class TestIoToposort:
    def test_order(self):
        x, y, c, a, b, out = small_graph()
        order = io_toposort([x, y], [out])
        assert order == [a.owner, b.owner, out.owner]
        assert_topological(order, [x, y])

    def test_inputs_cut_the_graph(self):
        x, y, c, a, b, out = small_graph()
        assert io_toposort([a, y], [out]) == [b.owner, out.owner]
        assert io_toposort([out], [out]) == []

    def test_multiple_outputs_and_shared_nodes(self):
        x = MyVariable("x")
        s = op1(x)
        u, v = op2(s), op3(s)
        order = io_toposort([x], [u, v])
        assert order == [s.owner, u.owner, v.owner]

    def test_custom_orderings(self):
        x = MyVariable("x")
        u, v = op2(x), op3(x)
        out = op1(u, v)
        assert io_toposort([x], [out]) == [u.owner, v.owner, out.owner]
        # Ask for v's node to run before u's.
        order = io_toposort([x], [out], orderings={u.owner: [v.owner]})
        assert order == [v.owner, u.owner, out.owner]
        assert_topological(order, [x])

    def test_ownerless_inputs_give_post_orders_order(self):
        # Graphs whose inputs are all ownerless (a FunctionGraph's) are sorted by a
        # walk of their own: the same order as post_order's, node for node, on a random
        # DAG with shared nodes, repeated arguments and several outputs.

        rng = random.Random(3)
        xs = [MyVariable(f"x{k}") for k in range(4)]
        pool = list(xs)
        for _ in range(300):
            op = rng.choice([op1, op2, op3])
            pool.append(op(*[rng.choice(pool[-20:]) for _ in range(rng.randint(1, 3))]))
        outs = [pool[-1], pool[-7], pool[150], xs[0]]
        order = io_toposort(xs, outs)
        assert order == post_order(outs, set(xs)) and len(order) == len(set(order))
        assert_topological(order, xs)
        # A cycle made by hand is still found.
        a = op1(xs[0])
        b = op2(a)
        a.owner.inputs[0] = b
        with pytest.raises(ValueError, match="^graph contains cycles"):
            io_toposort(xs, [b])

    def test_orderings_cycle(self):
        x = MyVariable("x")
        u = op2(x)
        out = op1(u)
        with pytest.raises(ValueError, match="graph contains cycles"):
            io_toposort([x], [out], orderings={u.owner: [out.owner]})

    def test_clients(self):
        x = MyVariable("x")
        u = op2(x)
        out = op1(u, u)
        clients = {}
        io_toposort([x], [out], clients=clients)
        assert clients[u] == [out.owner, out.owner]  # one entry per use, as in Theano
        assert clients[u.owner] == [u]
        assert clients[x] == [u.owner]

    def test_cycle_in_fast_path(self):
        x = MyVariable("x")
        u = op2(x)
        out = op1(u)
        u.owner.inputs[0] = out  # wire a cycle by hand
        with pytest.raises(ValueError, match="graph contains cycles"):
            io_toposort([x], [out])

    def test_generic_graph_is_topological(self):
        rng = random.Random(0)
        vs = [MyVariable(f"i{k}") for k in range(5)]
        for _ in range(300):
            picks = rng.sample(vs, k=rng.randint(1, 3))
            if rng.random() < 0.2:
                vs.extend(split2(*picks))
            else:
                vs.append(op1(*picks))
        outs = vs[-10:]
        order = io_toposort(vs[:5], outs)
        assert_topological(order, vs[:5])
        assert len(order) == len(set(order)) == len(applys_between(vs[:5], outs))
        order2 = io_toposort(vs[:5], outs, orderings={order[-1]: [order[0]]})
        assert_topological(order2, vs[:5])
        assert set(order2) == set(order)


def test_io_connection_pattern():
    x, y, z = MyVariable("x"), MyVariable("y"), MyVariable("z")
    p0, p1 = PatternOp()(x, y)
    o0 = op1(p0)
    o1 = op2(p1, z)
    assert io_connection_pattern([x, y, z], [o0, o1]) == [
        [True, False],
        [False, True],
        [False, True],
    ]
    # An output that is an input is connected to itself only; a disconnected output to none.
    free = MyVariable("free")
    assert io_connection_pattern([x, y], [x, op1(free)]) == [[True, False], [False, False]]


# ---------------------------------------------------------------------------
# Comparison


class TestEqualComputations:
    def test_same_and_different(self):
        x, y = MyVariable("x"), MyVariable("y")
        assert equal_computations([op1(x, y)], [op1(x, y)])
        assert not equal_computations([op1(x, y)], [op1(y, x)])
        assert not equal_computations([op1(x)], [op2(x)])
        assert not equal_computations([op1(x)], [op1(x, x)])
        assert equal_computations([x], [x])
        assert not equal_computations([x], [y])
        assert not equal_computations([op1(x)], [x])

    def test_equal_ops_by_props(self):
        x = MyVariable("x")
        assert equal_computations([MyOp("f")(x)], [MyOp("f")(x)])
        assert not equal_computations([MyOp("f")(x)], [MyOp("g")(x)])

    def test_constants(self):
        x = MyVariable("x")
        one, one_b, two = (Constant(MyType(), v) for v in (1, 1, 2))
        assert equal_computations([op1(x, one)], [op1(x, one_b)])
        assert not equal_computations([op1(x, one)], [op1(x, two)])
        assert equal_computations([one], [one_b])
        assert not equal_computations([one], [MyVariable()])

    def test_in_xs_in_ys(self):
        x, y = MyVariable("x"), MyVariable("y")
        assert equal_computations([op1(op2(x))], [op1(op2(y))], in_xs=[x], in_ys=[y])
        assert not equal_computations([op1(op2(x))], [op1(op2(y))], in_xs=[y], in_ys=[x])
        # Types of the declared pairs must match.
        w = MyVariable("w", thingy=3)
        assert not equal_computations([op1(x)], [op1(w)], in_xs=[x], in_ys=[w])
        assert not equal_computations([x], [y], in_xs=[x], in_ys=[])

    def test_in_xs_on_intermediates(self):
        x, y = MyVariable("x"), MyVariable("y")
        gx, gy = op2(x), op3(y)
        assert equal_computations([op1(gx)], [op1(gy)], in_xs=[gx], in_ys=[gy])

    def test_output_index(self):
        x = MyVariable("x")
        a0, a1 = split2(x)
        b0, b1 = split2(x)
        assert equal_computations([a1], [b1])
        assert not equal_computations([a0], [b1])
        assert not equal_computations([op1(a0)], [op1(b1)])

    def test_types(self):
        x = MyVariable("x")
        assert not equal_computations([ConvertOp(MyType(1))(x)], [ConvertOp(MyType(2))(x)])

    def test_values(self):
        c = Constant(MyType(), 3)
        assert equal_computations([3], [3]) and not equal_computations([3], [4])
        assert equal_computations([3], [c]) and equal_computations([c], [3])
        assert not equal_computations([3], [MyVariable()])

    def test_length_mismatch(self):
        with pytest.raises(ValueError, match="The number of graphs/variables in each argument"):
            equal_computations([MyVariable()], [])


def test_is_same_graph():
    # The table of Theano's docstring.
    x, y = MyVariable("x"), MyVariable("y")
    one = Constant(MyType(), 1)
    assert is_same_graph(op1(x, one), op1(x, one))
    assert not is_same_graph(op1(x, one), op1(y, one))
    assert is_same_graph(op1(x, one), op1(y, one), givens={x: y})
    assert is_same_graph(op1(x, one), op1(y, one), givens=[(y, x)])
    assert not is_same_graph(op2(x), op1(y), givens={x: y})
    # Structure matters: op1(x, op1(y, z)) vs op1(op1(x, y), z).
    z = MyVariable("z")
    assert not is_same_graph(op1(x, op1(y, z)), op1(op1(x, y), z))
    # Single variables.
    assert is_same_graph(x, x) and not is_same_graph(x, y)
    assert is_same_graph(x, y, givens={x: y})
    # Givens substitute in both graphs.
    assert is_same_graph(op1(x, y), op1(y, y), givens={x: y})


# ---------------------------------------------------------------------------
# Printing, views, construction tracking


class TestAsString:
    def test_shared_node_is_labelled(self):
        x, y = MyVariable("x"), MyVariable("y")
        s = op2(x, y)
        out = op1(s, op3(s))
        assert as_string([x, y], [out]) == ["op1(*1 -> op2(x, y), op3(*1))"]

    def test_multiple_outputs_and_labels(self):
        x = MyVariable("x")
        a, b = split2(x)
        s = op2(x)
        assert as_string([x], [op1(a, b), op3(s, s)]) == [
            "op1(*1 -> split2(x)::0, *1::1)",
            "op3(*2 -> op2(x), *2)",
        ]

    def test_inputs_are_leaves(self):
        x, y, c, a, b, out = small_graph()
        assert as_string([x, y], [out]) == ["op1(op2(x, c), op3(y))"]
        assert as_string([a], [out]) == ["op1(op2.0, op3(y))"]

    def test_formatters(self):
        x, y, c, a, b, out = small_graph()
        res = as_string(
            [x, y],
            [out],
            leaf_formatter=lambda v: v.name.upper(),
            node_formatter=lambda node, args: f"[{node.op} {' '.join(args)}]",
        )
        assert res == ["[op1 [op2 X C] [op3 Y]]"]

    def test_op_as_string(self):
        x, y, c, a, b, out = small_graph()
        assert op_as_string([x, y], out.owner) == "op1(op2(x, c), op3(y))"
        assert op_as_string([a, b], out.owner) == "op1(op2.0, op3.0)"

    def test_deep_chain_no_recursion(self):
        x, out = chain(3000)
        (s,) = as_string([x], [out])
        assert s == "op1(" * 3000 + "x" + ")" * 3000


def test_view_roots():
    x, y = MyVariable("x"), MyVariable("y")
    v1 = ViewOp("v1")(x)
    v2 = ViewOp("v2", viewed=(1, 0))(y, v1)
    assert view_roots(v1) == [x]
    assert view_roots(v2) == [x, y]
    assert view_roots(x) == [x]
    not_view = op1(v1)
    assert view_roots(not_view) == [not_view]
    # An output that is not in the view_map is its own root.
    two = DefaultOutputOp("d", nout=2).make_node(x).outputs
    assert view_roots(two[1]) == [two[1]]


def test_nodes_constructed():
    x = MyVariable("x")
    with nodes_constructed() as new:
        y = op1(x)
        z = MyVariable("z")
    MyVariable("later")
    assert new == [y, z]
    assert Variable.construction_observers == []


# ---------------------------------------------------------------------------
# Depth: nothing recursive


DEPTH = 100_000


@pytest.fixture(scope="module")
def deep():
    return chain(DEPTH)


class TestDeepChain:
    def test_ancestors_and_inputs(self, deep):
        x, out = deep
        assert graph_inputs([out]) == [x]
        assert sum(1 for _ in ancestors([out])) == DEPTH + 1

    def test_toposort(self, deep):
        x, out = deep
        order = io_toposort([x], [out])
        assert len(order) == DEPTH and order[0].inputs == [x] and order[-1] is out.owner
        # The general path (orderings) is iterative too.
        order2 = io_toposort([x], [out], orderings={out.owner: [order[0]]})
        assert order2 == order

    def test_clone_and_compare(self, deep):
        x, out = deep
        equiv = clone_get_equiv([x], [out])
        assert len(equiv) == 2 * DEPTH + 1
        assert equal_computations([equiv[out]], [out], in_xs=[equiv[x]], in_ys=[x])

    def test_is_same_graph_deep(self):
        x, out = chain(5000)
        assert is_same_graph(out, clone_replace(out))
        assert not equal_computations([clone([x], [out])[1][0]], [out])  # the cloned x differs
        y = MyVariable("y")
        assert is_same_graph(out, chain(5000, start=y)[1], givens={x: y})

    def test_queries(self, deep):
        x, out = deep
        assert len(applys_between([x], [out])) == DEPTH
        assert len(list_of_nodes([x], [out])) == DEPTH
        assert is_in_ancestors(out.owner, applys_between([x], [out])[-1])
        assert io_connection_pattern([x], [out]) == [[True]]
        assert str(out.owner).startswith("op1(op1.0")

    def test_replace_near_the_output(self, deep):
        x, out = deep
        mid = out.owner.inputs[0].owner.inputs[0]
        new = clone_replace(out, {mid: MyVariable("m")})
        assert len(applys_between([], [new])) == 2


def test_method_not_defined_is_not_implemented():
    assert issubclass(MethodNotDefined, NotImplementedError)
