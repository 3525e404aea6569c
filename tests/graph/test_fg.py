"""FunctionGraph: construction, clients, import/prune, replace, toposort, clone, pickling."""

import pickle
import random
import warnings

import pytest
from graphcheck import assert_valid, cached_clients, snapshot
from toy import MyConstant, MyOp, MyType, MyVar, MyVariable, op1, op2, op3, op4, op_multi

from theano_dag.graph.algorithms import _clone_in_order
from theano_dag.graph.basic import Apply, ancestors, graph_inputs, io_toposort
from theano_dag.graph.fg import (
    FunctionGraph,
    InconsistencyError,
    InputReorder,
    IntegrityError,
    MissingInputError,
)
from theano_dag.graph.toolbox import Feature, NodeFinder, PreserveNames
from theano_dag.graph.utils import get_stack_trace

# check_integrity runs after every mutation of every FunctionGraph in this module.
pytestmark = pytest.mark.usefixtures("checked_fgraph")


def xyz():
    return MyVar("x"), MyVar("y"), MyVar("z")


class Recorder(Feature):
    """Records every event it gets."""

    def __init__(self):
        self.events = []

    def on_attach(self, fgraph):
        self.events.append(("attach",))

    def on_detach(self, fgraph):
        self.events.append(("detach",))

    def on_import(self, fgraph, node, reason):
        self.events.append(("import", node, reason))

    def on_prune(self, fgraph, node, reason):
        self.events.append(("prune", node, reason))

    def on_change_input(self, fgraph, node, i, var, new_var, reason=None):
        self.events.append(("change", node, i, var, new_var, reason))


# ---------------------------------------------------------------------------
# Construction


def test_integrity_is_checked_after_every_mutation(checked_fgraph):
    fg, (x, y, z, a, b, e) = build_abc()
    n = checked_fgraph["n"]
    assert n >= 1  # construction (its inner add_input/attach_feature calls count too)
    fg.replace(a, op4(x))
    assert checked_fgraph["n"] == n + 1
    with pytest.raises(InconsistencyError):
        fg.replace(z, e)
    assert checked_fgraph["n"] == n + 2


def test_construction_without_clone_tracks_everything():
    x, y, z = xyz()
    a = op1(x, y)
    b = op2(a, z)
    e = op3(b, a)
    fg = FunctionGraph([x, y, z], [e], clone=False)
    assert_valid(fg)
    assert fg.apply_nodes == {a.owner, b.owner, e.owner}
    assert fg.variables == {x, y, z, a, b, e}
    assert fg.clients[a] == [(b.owner, 0), (e.owner, 1)]
    assert fg.clients[e] == [("output", 0)]
    assert fg.get_clients(x) == [(a.owner, 0)]
    assert fg.inputs == [x, y, z] and fg.outputs == [e]
    assert a in fg and a.owner in fg and MyVar("w") not in fg
    with pytest.raises(TypeError, match="contains Variables and Apply nodes"):
        "a" in fg  # noqa: B015


def test_construction_clones_by_default():
    x, y, z = xyz()
    e = op1(op2(x, y), z)
    fg = FunctionGraph([x, y, z], [e])
    assert_valid(fg)
    assert not set(fg.inputs) & {x, y, z}
    assert [v.name for v in fg.inputs] == ["x", "y", "z"]
    assert fg.outputs[0] is not e
    assert repr(fg) == "FunctionGraph(op1(op2(x, y), z))"
    # Rewriting the copy leaves the user's graph alone.
    fg.replace(fg.inputs[0], fg.inputs[1])
    assert e.owner.inputs[0].owner.inputs == [x, y]


def test_unused_input_and_constant():
    x, y, _ = xyz()
    c = MyConstant(MyType(), 3, name="c")
    fg = FunctionGraph([x, y], [op1(x, c)], clone=False)
    assert_valid(fg)
    assert y in fg.variables and fg.clients[y] == []
    assert c in fg.variables and c not in fg.inputs


def test_output_can_be_an_input_and_repeated():
    x, y, _ = xyz()
    a = op1(x)
    fg = FunctionGraph([x, y], [a, x, a], clone=False)
    assert_valid(fg)
    assert fg.clients[a] == [("output", 0), ("output", 2)]
    assert fg.clients[x] == [(a.owner, 0), ("output", 1)]


def test_input_given_twice():
    x, y, _ = xyz()
    with pytest.raises(ValueError, match=r"Input x \(position 2\) is given more than once"):
        FunctionGraph([x, y, x], [op1(x, y)])


def test_input_with_owner_is_refused_without_clone():
    x, _, _ = xyz()
    a = op1(x)
    a.name = "a"
    with pytest.raises(ValueError, match=r"Input a \(position 0\) is the output of op1\(x\)"):
        FunctionGraph([a], [op2(a)], clone=False)
    with pytest.raises(ValueError, match=r"is the output of op1\(x\)"):
        FunctionGraph([a], [op2(a)], copy_inputs=False)


def test_input_with_owner_is_cut_when_cloned():
    # Theano's contract: the clone of an owned input is a fresh input, so the graph
    # above it is not part of the FunctionGraph (and x is not needed).
    x, _, _ = xyz()
    a = op1(x)
    a.name = "a"
    out = op2(a)
    fg = FunctionGraph([a], [out])
    (new_a,) = fg.inputs
    assert new_a is not a and new_a.owner is None and new_a.name == "a"
    assert fg.outputs[0].owner.inputs == [new_a]
    assert len(fg.apply_nodes) == 1
    assert a.owner is not None and out.owner.inputs[0] is a  # the user's graph is untouched
    fg.check_integrity()


def test_non_variable_inputs_and_outputs():
    x, _, _ = xyz()
    with pytest.raises(TypeError, match=r"Input 1 of the FunctionGraph must be a Variable, got"):
        FunctionGraph([x, 3], [op1(x)])
    with pytest.raises(TypeError, match="outputs of a FunctionGraph must be a list"):
        FunctionGraph([x], op1(x))
    with pytest.raises(TypeError, match="Output 0 of the FunctionGraph must be a Variable"):
        FunctionGraph([x], ["a"])


@pytest.mark.parametrize("clone", [False, True])
def test_missing_input_names_variable_and_output(clone):
    x, y, z = xyz()
    out0 = op1(x)
    out1 = op2(op3(x, z), y)
    with pytest.raises(MissingInputError) as info:
        FunctionGraph([x, y], [out0, out1], clone=clone)
    msg = str(info.value)
    assert "Undeclared input: z" in msg
    assert "input 1 of op3(x, z)" in msg
    assert "output 1" in msg
    assert info.value.variable.name == "z"


def test_output_that_is_an_undeclared_input():
    x, y, _ = xyz()
    with pytest.raises(MissingInputError, match="Undeclared input: y .* output 1 "):
        FunctionGraph([x], [op1(x), y], clone=False)


def test_features_given_at_construction_see_every_import():
    x, y, _ = xyz()
    a = op1(x, y)
    e = op2(a, a)
    rec = Recorder()
    fg = FunctionGraph([x, y], [e], features=[rec], clone=False)
    assert rec.events == [("attach",), ("import", a.owner, "init"), ("import", e.owner, "init")]
    assert a.owner.tag.imported_by == ["init"]
    assert fg._features[0] is rec


@pytest.mark.parametrize("seed", range(6))
def test_a_copy_imports_its_nodes_in_the_order_of_the_graph_it_copies(seed):
    # A copied graph is imported in the order of the copy (no walk of its own): the same
    # order, node for node, as the import of the graph itself, which features see and
    # the nodes' levels follow.
    rng = random.Random(seed)
    x, y, z = xyz()
    pool = [x, y, z, MyConstant(MyType(), 1, name="one")]
    for _ in range(40):
        op = rng.choice([op1, op2, op3])
        pool.append(op(*rng.sample(pool, rng.randint(1, 3))))
    outputs = rng.sample(pool[4:], 5) + [pool[-1], pool[5]]
    cut = pool[6] if seed % 2 else None  # an owned input: the copy is cut there
    inputs = [x, y, z] + ([cut] if cut is not None else [])
    plain_rec, copy_rec = Recorder(), Recorder()
    if cut is None:
        plain = FunctionGraph(inputs, outputs, features=[plain_rec], clone=False)
    else:
        plain = FunctionGraph(inputs, outputs, features=[plain_rec], clone=True)
        plain_rec.events.clear()
        plain = FunctionGraph(plain.inputs, plain.outputs, features=[plain_rec], clone=False)
    copy = FunctionGraph(inputs, outputs, features=[copy_rec])
    names = {}

    def label(node, graph):
        # A node by its op and, for each input, the position of the node or graph input
        # that computes it (the two graphs share no node).
        ins = []
        for v in node.inputs:
            if v.owner is not None:
                ins.append(("node", names[graph][v.owner], v.index))
            elif v in graph.inputs:
                ins.append(("input", graph.inputs.index(v)))
            else:
                ins.append(("orphan", str(v)))
        return (str(node.op), tuple(ins))

    orders = []
    for graph, rec in ((plain, plain_rec), (copy, copy_rec)):
        names[graph] = {}
        order = []
        for event in rec.events:
            if event[0] == "import":
                names[graph][event[1]] = len(order)
                order.append(label(event[1], graph))
        orders.append(order)
        assert len(order) == len(graph.apply_nodes)
    assert orders[0] == orders[1]
    assert [plain._level[n] for n in names[plain]] == [copy._level[n] for n in names[copy]]


def _copied_node_by_node(inputs, outputs):
    """The copy a FunctionGraph makes of ``outputs`` as it made it before it made and
    imported each node in one walk: the whole graph copied, then imported in the
    copy's order."""
    equiv, order = _clone_in_order(inputs, outputs)
    return FunctionGraph(
        [equiv[i] for i in inputs],
        [equiv[o] for o in outputs],
        clone=False,
        _import_order=[equiv[n] for n in order],
    )


def _describe(fg):
    """Everything a copy sets, with nodes and variables named by where they sit (two
    copies share no object): per node in import order its op, inputs, level, notes and
    outputs (name, type, trace, tag, order of creation); the clients in their order."""
    node_k = {node: k for k, node in enumerate(fg._level)}
    created = sorted(fg.variables, key=lambda v: v.creation_index)
    rank = {v: k for k, v in enumerate(created)}

    def label(v):
        if v.owner is not None:
            return ("node", node_k[v.owner], v.index)
        if v in fg.inputs:
            return ("input", fg.inputs.index(v))
        return ("orphan", str(v), rank[v])

    nodes = []
    for node in fg._level:
        tag = node._tag
        notes = node._imported_by if tag is None else tag.__dict__
        outs = [(o.name, o.type, get_stack_trace(o), rank[o], type(o)) for o in node.outputs]
        assert all(o.owner is node and node.outputs[o.index] is o for o in node.outputs)
        ins = [label(v) for v in node.inputs]
        nodes.append((str(node.op), ins, fg._level[node], notes, outs, type(node)))
    clients = [(label(v), [(node_k.get(n, n), i) for n, i in cl]) for v, cl in fg.clients.items()]
    return (
        nodes,
        clients,
        [label(v) for v in fg.inputs],
        [label(v) for v in fg.outputs],
        fg._version,
        len(fg.apply_nodes),
        len(fg.variables),
    )


class _Noted(Apply):
    """An Apply of its own class: copied by its clone_with_new_inputs."""


@pytest.mark.parametrize("seed", range(8))
def test_a_copy_made_in_one_walk_is_the_copy_made_node_by_node(seed):
    # FunctionGraph copies a graph and imports each copy as it makes it; the graph is
    # the one the copy of the whole graph then its import made, down to the order of
    # the clients, the levels, the notes, the traces and the order of creation. Some
    # nodes take the constructors' way (notes, a tag, a class of their own).
    rng = random.Random(seed)
    x, y, z = xyz()
    pool = [x, y, z, MyConstant(MyType(), 1, name="one"), MyConstant(MyType("u"), 2)]
    for k in range(60):
        op = rng.choice([op1, op2, op3, op_multi])
        args = rng.sample(pool, rng.randint(1, 3))
        if k == 3:
            args = [pool[-1]] * 40  # many clients of one variable: indexed
        out = op(*args)
        if op is op_multi:
            out = out[rng.randrange(2)]
        if rng.random() < 0.1:
            out.name = f"v{k}"
        if rng.random() < 0.1:
            out.tag.note = k
        if rng.random() < 0.1:
            out.owner.tag.mine = k
        pool.append(out)
        if k == 10 and seed % 2:  # a node of a class of its own
            pool.append(_Noted(op4, pool[-3:], [MyVariable(MyType(), name="noted")]).outputs[0])
    if seed % 2:  # nodes noted by a graph they were imported into
        FunctionGraph([x, y, z], [pool[20]], clone=False)
    outputs = rng.sample(pool[5:], 6) + [pool[-1], pool[4], x]
    cut = pool[8] if seed % 4 == 3 else None  # an owned input: the copy is cut there
    inputs = [x, y, z] + ([cut] if cut is not None else [])
    one_walk = FunctionGraph(inputs, outputs)
    node_by_node = _copied_node_by_node(inputs, outputs)
    assert _describe(one_walk) == _describe(node_by_node)
    assert_valid(one_walk)
    kept = one_walk.toposort()  # the order of the copy, kept: not walked again
    one_walk._toposort_cache = None
    assert one_walk.toposort() == kept
    with pytest.raises(MissingInputError) as walk_info:
        FunctionGraph([x, y], outputs)
    with pytest.raises(MissingInputError) as node_info:
        _copied_node_by_node([x, y], outputs)
    assert str(walk_info.value) == str(node_info.value)
    assert walk_info.value.variable.name == "z"


def test_a_copy_of_variables_of_a_class_of_its_own_uses_their_clone():
    class Counted(MyVariable):
        clones = 0

        def clone(self):
            Counted.clones += 1
            return super().clone()

    class Retyped(MyVariable):  # its copy has an equal type, not the same object
        def clone(self):
            return Retyped(MyType(self.type.thingy), name=self.name)

    x = MyVar("x")
    a = Apply(op1, [x], [Counted(MyType(), name="a")]).outputs[0]
    b = op2(a, x)
    fg = FunctionGraph([x], [b])
    assert Counted.clones == 1
    assert _describe(fg) == _describe(_copied_node_by_node([x], [b]))
    r = Retyped(MyType(), name="r")
    c = op3(op1(r), b)
    fg = FunctionGraph([x, r], [c])
    assert fg.inputs[1].type is not r.type and fg.outputs[0].owner.inputs[0].owner.inputs == [
        fg.inputs[1]
    ]
    assert _describe(fg) == _describe(_copied_node_by_node([x, r], [c]))


# ---------------------------------------------------------------------------
# Replace


def build_abc():
    x, y, z = xyz()
    a = op1(x, y)
    a.name = "a"
    b = op2(a, z)
    b.name = "b"
    e = op3(b, a)
    e.name = "e"
    fg = FunctionGraph([x, y, z], [e], clone=False)
    return fg, (x, y, z, a, b, e)


def test_replace_rewires_clients_and_prunes():
    fg, (x, y, z, a, b, e) = build_abc()
    rec = Recorder()
    fg.attach_feature(rec)
    new_b = op4(z, x)
    fg.replace(b, new_b, reason="test")
    assert_valid(fg)
    assert e.owner.inputs == [new_b, a]
    assert b.owner not in fg.apply_nodes and b not in fg.variables and b not in fg.clients
    assert fg.clients[a] == [(e.owner, 1)]
    assert ("import", new_b.owner, "test") in rec.events
    assert ("prune", b.owner, "test") in rec.events
    assert ("change", e.owner, 0, b, new_b, "test") in rec.events
    assert b.owner.tag.removed_by == ["test"]


def test_import_and_prune_notes_wait_outside_the_tag():
    # imported_by / removed_by are kept aside until the node's tag is made, then found
    # in it; a node that already has a tag gets them there directly.

    fg, (x, y, z, a, b, e) = build_abc()
    assert a.owner._tag is None and a.owner._imported_by == ["init"]
    c = a.owner.clone()
    assert c._tag is None and c.tag.imported_by == ["init"]
    e.owner.tag.note = "mine"  # a tag made before the next change
    new_b = op4(z, x)
    fg.replace(b, new_b, reason="why")
    assert b.owner._tag is None and b.owner._removed_by == ["why"]
    assert pickle.loads(pickle.dumps(b.owner)).tag.removed_by == ["why"]
    assert b.owner.tag.removed_by == ["why"] and b.owner._removed_by is None
    assert new_b.owner.tag.imported_by == ["why"]
    fg.replace(new_b, op1(z, x), reason="again")
    assert new_b.owner.tag.removed_by == ["again"] and new_b.owner.tag.imported_by == ["why"]
    assert e.owner.tag.imported_by == ["init"] and e.owner.tag.note == "mine"
    assert_valid(fg)


def test_replace_output():
    fg, (x, y, z, a, b, e) = build_abc()
    new = op4(a)
    fg.replace(e, new)
    assert_valid(fg)
    assert fg.outputs == [new]
    assert fg.apply_nodes == {a.owner, new.owner}
    assert e not in fg and b not in fg and z in fg  # inputs stay even when unused
    assert fg.clients[z] == []


def test_replace_with_existing_variable_and_chain_of_replaces():
    fg, (x, y, z, a, b, e) = build_abc()
    fg.replace(a, x)
    assert_valid(fg)
    assert b.owner.inputs == [x, z] and e.owner.inputs == [b, x]
    assert a not in fg and fg.clients[y] == []
    fg.replace(b, op1(op2(x), y))
    assert_valid(fg)
    fg.replace(x, z)
    assert_valid(fg)
    assert repr(fg) == "FunctionGraph(e(op1(op2(z), y), z))".replace("e(", "op3(")


def test_replace_var_by_itself_is_a_no_op():
    fg, (x, y, z, a, b, e) = build_abc()
    before = snapshot(fg)
    fg.replace(a, a)
    assert snapshot(fg) == before


def test_replace_variable_not_in_graph():
    fg, (x, *_rest) = build_abc()
    stranger = MyVar("stranger")
    with pytest.raises(ValueError, match="Cannot replace stranger: it does not belong to this"):
        fg.replace(stranger, x)


def test_replace_type_mismatch_names_both_types():
    fg, (x, y, z, a, b, e) = build_abc()
    before = snapshot(fg)
    other = MyVar("w", thingy="other")
    fg.add_input(other)
    before = snapshot(fg)
    with pytest.raises(
        TypeError,
        match=r"replace a of type MyType\{thingy='t'\} by w of type " r"MyType\{thingy='other'\}",
    ):
        fg.replace(a, other)
    assert snapshot(fg) == before
    assert_valid(fg)
    with pytest.raises(TypeError, match="must be a Variable"):
        fg.replace(a, 3)


def test_replace_uses_convert_variable():
    class Loose(MyType):
        def convert_variable(self, var):
            if isinstance(var.type, MyType):
                return op1.__class__("convert", otype=self)(var)
            return None

    x = MyVar("x", thingy="loose")
    x.type = Loose("loose")
    a = MyOp("f", otype=Loose("loose"))(x)
    fg = FunctionGraph([x], [op1(a)], clone=False)
    y = MyVar("y")
    fg.add_input(y)
    fg.replace(a, y)
    assert_valid(fg)
    assert str(fg) == "FunctionGraph(op1(convert(y)))"


def test_replace_that_would_create_a_cycle_is_refused():
    fg, (x, y, z, a, b, e) = build_abc()
    before = snapshot(fg)
    # b is computed from a, so a cannot be replaced by something that needs b.
    with pytest.raises(
        InconsistencyError,
        match=r"Replacing a by op4\.0 would create a cycle: " r"op4\.0 depends on .*which uses a",
    ):
        fg.replace(a, op4(b))
    assert snapshot(fg) == before
    assert_valid(fg)
    with pytest.raises(InconsistencyError, match="would create a cycle"):
        fg.replace(a, e)
    assert snapshot(fg) == before


def test_replace_by_expression_of_itself_is_not_a_cycle():
    fg, (x, y, z, a, b, e) = build_abc()
    new = op4(a)  # depends on a itself, but not on a's clients
    fg.replace(a, new)
    assert_valid(fg)
    assert b.owner.inputs[0] is new and new.owner.inputs[0] is a
    fg.replace(e, op1(e))  # an output replaced by a function of itself
    assert_valid(fg)
    assert fg.outputs[0].owner.inputs[0] is e


def test_replace_needing_an_undeclared_input():
    fg, (x, y, z, a, b, e) = build_abc()
    before = snapshot(fg)
    w = MyVar("w")
    with pytest.raises(MissingInputError, match="Undeclared input: w .* the replacement"):
        fg.replace(b, op1(w, x))
    assert snapshot(fg) == before
    fg.replace(b, op1(w, x), import_missing=True)
    assert_valid(fg)
    assert fg.inputs[-1] is w


def test_replace_all_and_multi_output_nodes():
    x, y, _ = xyz()
    m0, m1 = op_multi(x, y)
    fg = FunctionGraph([x, y], [op1(m0), op2(m1)], clone=False)
    assert_valid(fg)
    fg.replace(m0, op3(x))
    assert_valid(fg)
    assert m0.owner in fg.apply_nodes  # m1 still uses the node
    assert m0 in fg.variables and fg.clients[m0] == []
    fg.replace_all([(m1, op4(y)), (x, y)])
    assert_valid(fg)
    assert m0.owner not in fg.apply_nodes and m0 not in fg.variables
    with pytest.raises(ValueError, match="Cannot replace op_multi.0: it does not belong"):
        fg.replace_all([(y, x), (m0, x)])
    assert fg.inputs[1] in fg.variables and fg.clients[y]  # nothing was replaced


def test_replace_all_skips_outputs_of_a_node_pruned_by_an_earlier_pair():
    x, y, _ = xyz()
    m0, m1 = op_multi(x, y)
    fg = FunctionGraph([x, y], [op1(m0)], clone=False)
    # m1 is unused: replacing m0 prunes the node and m1 with it.
    fg.replace_all([(m0, op2(x)), (m1, op3(x))])
    assert_valid(fg)
    assert repr(fg) == "FunctionGraph(op1(op2(x)))"


def test_change_input_directly():
    fg, (x, y, z, a, b, e) = build_abc()
    fg.change_input(b.owner, 1, x)
    assert_valid(fg)
    assert fg.clients[z] == []
    fg.change_input("output", 0, b)
    assert_valid(fg)
    assert fg.outputs == [b] and e not in fg
    before = snapshot(fg)
    with pytest.raises(InconsistencyError, match="would create a cycle"):
        fg.change_input(a.owner, 0, op1(b))
    assert snapshot(fg) == before
    with pytest.raises(TypeError, match="must be the same"):
        fg.change_input(a.owner, 0, MyVar("q", "other"))
    assert snapshot(fg) == before


def test_reorder_inputs_moves_arguments_in_place():
    """The node and its outputs stay; clients follow; features hear one change per
    moved position, with an InputReorder reason holding the old order."""
    x, y, z = xyz()
    a = op1(x, y)  # x is used once, y twice: y's client list changes only in place
    out = op2(op3(a, y), x, z)
    fg = FunctionGraph([x, y, z], [out], clone=False)
    node = out.owner
    rec = Recorder()
    fg.attach_feature(rec)
    fg.attach_feature(PreserveNames())  # a move is no replacement: no name is passed on
    rec.events.clear()
    fg.reorder_inputs(node, [x, node.inputs[0], z], reason="mine")
    assert node.inputs[1].name is None and x.name == "x"
    assert_valid(fg)
    assert fg.outputs[0] is out and out.owner is node and node in fg.apply_nodes
    assert [str(v) for v in node.inputs] == ["x", str(out.owner.inputs[1]), "z"]
    assert (node, 0) in fg.clients[x] and (node, 1) not in fg.clients[x]
    assert [e[:3] for e in rec.events] == [("change", node, 0), ("change", node, 1)]
    reason = rec.events[0][5]
    assert isinstance(reason, InputReorder) and str(reason) == "mine"
    assert reason.old_inputs[1] is x and reason.old_inputs[2] is z
    assert not [e for e in rec.events if e[0] in ("prune", "import")]
    # the same order again changes nothing and says nothing
    rec.events.clear()
    fg.reorder_inputs(node, list(node.inputs))
    assert rec.events == []


def test_reorder_inputs_refuses_what_is_not_a_permutation_and_leaves_the_graph():
    x, y, z = xyz()
    q = MyVar("q", "other")
    out = op1(x, y, q)
    fg = FunctionGraph([x, y, q, z], [out], clone=False)
    node = out.owner
    before = snapshot(fg)
    with pytest.raises(ValueError, match="is not a permutation of the inputs"):
        fg.reorder_inputs(node, [x, z, q])
    with pytest.raises(ValueError, match="is not a permutation of the inputs"):
        fg.reorder_inputs(node, [x, y])
    with pytest.raises(TypeError, match="input 1 of op1.* has type MyType.*; moving q of type"):
        fg.reorder_inputs(node, [x, q, y])
    with pytest.raises(ValueError, match="is not in this FunctionGraph"):
        fg.reorder_inputs(op1(y, x).owner, [x, y])
    assert snapshot(fg) == before


def test_cycle_check_matches_brute_force_on_random_graphs():
    """Random graphs, random replacements by existing variables: every refusal must be
    a real cycle, every acceptance must leave a valid graph."""
    for seed in range(30):
        rng = random.Random(seed)
        ins = [MyVar(f"i{k}") for k in range(3)]
        pool = list(ins)
        for _ in range(25):
            op = [op1, op2, op3, op4][rng.randrange(4)]
            pool.append(op(*rng.sample(pool, rng.choice([1, 2]))))
        fg = FunctionGraph(ins, pool[-3:], clone=False)
        for _ in range(15):
            live = [v for v in fg.variables]
            live.sort(key=lambda v: v.auto_name)
            var = rng.choice(live)
            new = rng.choice(live + [op1(rng.choice(live))])
            apply_clients = [c for c, _ in fg.clients[var] if c != "output"]
            needed = {v.owner for v in ancestors([new], blockers=fg.inputs) if v.owner}
            cyclic = new is not var and any(c in needed for c in apply_clients)
            before = snapshot(fg)
            if cyclic:
                with pytest.raises(InconsistencyError):
                    fg.replace(var, new)
                assert snapshot(fg) == before
            else:
                fg.replace(var, new)
            assert_valid(fg)


# ---------------------------------------------------------------------------
# Features and callbacks


def test_attach_and_remove_feature():
    fg, _ = build_abc()
    rec = Recorder()
    fg.attach_feature(rec)
    fg.attach_feature(rec)  # the same instance is attached once
    assert [f for f in fg._features if f is rec] == [rec]
    assert rec.events == [("attach",)]
    fg.remove_feature(rec)
    assert rec.events == [("attach",), ("detach",)]
    assert rec not in fg._features
    fg.remove_feature(rec)  # unknown features are ignored
    assert rec.events[-1] == ("detach",)


def test_execute_and_collect_callbacks():
    class Echo(Feature):
        def ping(self, fgraph, value):
            fgraph.pings.append(value)

        def answer(self, value):
            return value * 2

    fg, _ = build_abc()
    fg.pings = []
    echo = Echo()
    fg.attach_feature(echo)
    fg.execute_callbacks("ping", 5)
    assert fg.pings == [5]
    assert fg.collect_callbacks("answer", 4) == {echo: 8}
    assert fg.execute_callbacks_times[echo] >= 0


# ---------------------------------------------------------------------------
# Toposort


class FixedOrder(Feature):
    def __init__(self, ords):
        self.ords = ords

    def orderings(self, fgraph):
        return self.ords


def test_toposort_respects_dependencies():
    fg, (x, y, z, a, b, e) = build_abc()
    order = fg.toposort()
    assert order == [a.owner, b.owner, e.owner]
    pos = {n: k for k, n in enumerate(order)}
    for n in order:
        for i in n.inputs:
            if i.owner is not None:
                assert pos[i.owner] < pos[n]


def test_toposort_with_custom_orderings():
    x, y, _ = xyz()
    p = op1(x)
    q = op2(y)
    e = op3(p, q)
    fg = FunctionGraph([x, y], [e], clone=False)
    assert fg.toposort() == [p.owner, q.owner, e.owner]
    fg.attach_feature(FixedOrder({p.owner: [q.owner]}))
    assert fg.orderings() == {p.owner: [q.owner]}
    assert fg.toposort() == [q.owner, p.owner, e.owner]


def test_orderings_of_two_features_are_combined_and_checked():
    x, y, z = xyz()
    p, q, r = op1(x), op2(y), op3(z)
    fg = FunctionGraph([x, y, z], [op4(p, q, r)], clone=False)
    fg.attach_feature(FixedOrder({p.owner: [r.owner]}))
    fg.attach_feature(FixedOrder({p.owner: [q.owner], q.owner: [r.owner]}))
    assert fg.orderings() == {p.owner: [r.owner, q.owner], q.owner: [r.owner]}
    assert fg.toposort()[:3] == [r.owner, q.owner, p.owner]
    bad = FixedOrder({p.owner: {q.owner}})
    fg.attach_feature(bad)
    with pytest.raises(TypeError, match="use an ordered collection"):
        fg.toposort()
    fg.remove_feature(bad)
    fg.attach_feature(FixedOrder([1]))
    with pytest.raises(TypeError, match="must return a dict"):
        fg.orderings()


def test_orderings_that_make_a_cycle():
    x, _, _ = xyz()
    p = op1(x)
    q = op2(p)
    fg = FunctionGraph([x], [q], clone=False, features=[FixedOrder({p.owner: [q.owner]})])
    with pytest.raises(ValueError, match="cycles"):
        fg.toposort()


def test_toposort_cache_follows_changes():
    fg, (x, y, z, a, b, e) = build_abc()
    first = fg.toposort()
    first.append("junk")  # callers get a copy
    assert fg.toposort() == [a.owner, b.owner, e.owner]
    new = op4(x)
    fg.replace(a, new)
    assert fg.toposort() == [new.owner, b.owner, e.owner]


# ---------------------------------------------------------------------------
# Integrity checking itself


def test_check_integrity_detects_corruption():
    fg, (x, y, z, a, b, e) = build_abc()
    fg.clients[a].append((b.owner, 1))
    with pytest.raises(IntegrityError, match="Inconsistent clients list: a"):
        fg.check_integrity()
    fg, (x, y, z, a, b, e) = build_abc()
    fg.apply_nodes.discard(b.owner)
    with pytest.raises(IntegrityError, match="nodes are inappropriately cached"):
        fg.check_integrity()
    fg, (x, y, z, a, b, e) = build_abc()
    b.owner.inputs[1] = MyVar("ghost")  # changed behind the graph's back
    with pytest.raises(IntegrityError):
        fg.check_integrity()


# ---------------------------------------------------------------------------
# Clone


def test_clone_get_equiv_copies_everything():
    x, y, _ = xyz()
    c = MyConstant(MyType(), 2, name="two")
    e = op1(op2(x, c), y)
    fg = FunctionGraph([x, y], [e], clone=False)
    fg2, equiv = fg.clone_get_equiv()
    assert_valid(fg2)
    assert fg2.inputs == [equiv[x], equiv[y]] and equiv[x] is not x
    assert fg2.outputs == [equiv[e]]
    assert equiv[c] is not c and equiv[c].data == 2
    assert {equiv[n] for n in fg.apply_nodes} == fg2.apply_nodes
    assert not fg.variables & fg2.variables
    assert repr(fg2) == repr(fg)
    fg2.replace(equiv[x], equiv[y])
    assert_valid(fg) and assert_valid(fg2)
    assert e.owner.inputs[0].owner.inputs[0] is x


def test_clone_get_equiv_keeping_inputs_and_orphans():
    x, y, _ = xyz()
    c = MyConstant(MyType(), 2, name="two")
    e = op1(op2(x, c), y)
    fg = FunctionGraph([x, y], [e], clone=False)
    fg2, equiv = fg.clone_get_equiv(copy_inputs=False, copy_orphans=False)
    assert_valid(fg2)
    assert fg2.inputs == [x, y] and equiv[c] is c
    assert fg2.outputs[0] is not e and fg2.apply_nodes.isdisjoint(fg.apply_nodes)
    fg3, equiv3 = fg.clone_get_equiv(copy_inputs=False, copy_orphans=True)
    assert fg3.inputs == [x, y] and equiv3[c] is not c


def test_clone_copies_features():
    x, _, _ = xyz()
    finder = NodeFinder()
    fg = FunctionGraph([x], [op1(op1(x))], features=[finder], clone=False)
    fg2 = fg.clone()
    assert_valid(fg2)
    finders = [f for f in fg2._features if isinstance(f, NodeFinder)]
    assert len(finders) == 1 and finders[0] is not finder
    assert set(fg2.get_nodes(op1)) == fg2.apply_nodes
    fg3, _ = fg.clone_get_equiv(attach_feature=False)
    assert not hasattr(fg3, "get_nodes")


def test_clone_with_constructor_kwargs():
    x, _, _ = xyz()
    e = op1(x)
    fg = FunctionGraph([x], [e], copy_inputs=False)
    assert fg.inputs == [x] and fg.outputs[0] is not e


# ---------------------------------------------------------------------------
# Pickling


def test_pickle_round_trip():
    fg, (x, y, z, a, b, e) = build_abc()
    fg.attach_feature(NodeFinder())
    fg.update_mapping = {0: 1}
    fg2 = pickle.loads(pickle.dumps(fg))
    assert_valid(fg2)
    assert repr(fg2) == repr(fg)
    assert [v.name for v in fg2.inputs] == ["x", "y", "z"]
    assert fg2.update_mapping == {0: 1}
    assert len(fg2.apply_nodes) == 3 and not fg2.apply_nodes & fg.apply_nodes
    assert len(fg2.get_nodes(op1)) == 1
    # The features are live again: replace, validate and revert all work.
    a2 = fg2.outputs[0].owner.inputs[1]
    chk = fg2.checkpoint()
    fg2.replace(a2, fg2.inputs[0])
    fg2.validate()
    assert_valid(fg2)
    assert fg2.get_nodes(op1) == []
    fg2.revert(chk)
    assert_valid(fg2)
    assert repr(fg2) == repr(fg)


def test_pickle_drops_unpicklable_features_with_a_warning():
    class Holder(Feature):
        def __init__(self):
            self.fn = lambda v: v  # lambdas cannot be pickled

    fg, _ = build_abc()
    fg.attach_feature(Holder())
    fg.helper = lambda: 1
    with pytest.warns(UserWarning) as record:
        data = pickle.dumps(fg)
    messages = sorted(str(w.message) for w in record)
    assert len(messages) == 2
    assert "dropping attribute 'helper'" in messages[0]
    assert "dropping feature" in messages[1] and "Holder" in messages[1]
    fg2 = pickle.loads(data)
    assert_valid(fg2)
    assert not any(type(f).__name__ == "Holder" for f in fg2._features)
    assert not hasattr(fg2, "helper")


def test_pickle_deep_chain():
    x = MyVar("x")
    v = x
    for _ in range(5000):
        v = op1(v)
    fg = FunctionGraph([x], [v], clone=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fg2 = pickle.loads(pickle.dumps(fg))
    assert len(fg2.apply_nodes) == 5000
    assert_valid(fg2)


# ---------------------------------------------------------------------------
# Big and deep graphs (no recursion, linear work)


def test_deep_chain_all_operations():
    n = 10000  # far deeper than the recursion limit
    x = MyVar("x")
    v = x
    for _ in range(n):
        v = op1(v)
    fg = FunctionGraph([x], [v])
    assert len(fg.apply_nodes) == n
    order = fg.toposort()
    assert order[0].inputs[0] is fg.inputs[0] and order[-1].outputs[0] is fg.outputs[0]
    fg.check_integrity()
    mid = order[n // 2].outputs[0]
    fg.replace(mid, op2(mid))
    fg.replace(order[10].outputs[0], fg.inputs[0])  # prunes the 11 bottom nodes
    assert len(fg.apply_nodes) == n + 1 - 11
    fg.check_integrity()
    fg2 = fg.clone()
    assert len(fg2.apply_nodes) == len(fg.apply_nodes)
    fg.replace(fg.outputs[0], fg.inputs[0])  # prunes everything, iteratively
    assert fg.apply_nodes == set() and fg.variables == {fg.inputs[0]}
    assert_valid(fg)


# ---------------------------------------------------------------------------
# Misc API


def test_add_input_and_disown():
    fg, (x, *_rest) = build_abc()
    w = MyVar("w")
    fg.add_input(w)
    fg.add_input(w)  # already there: ignored
    assert fg.inputs.count(w) == 1 and fg.clients[w] == []
    assert_valid(fg)
    with pytest.raises(ValueError, match="is the output of"):
        fg.add_input(op1(w))
    rec = Recorder()
    fg.attach_feature(rec)
    fg.disown()
    assert rec.events[-1] == ("detach",)
    assert fg.inputs is None and fg.apply_nodes == set()


def test_import_node_and_import_var():
    fg, (x, y, z, a, b, e) = build_abc()
    extra = op4(op1(z), a)
    fg.import_var(extra, reason="manual")
    assert extra in fg.variables and extra.owner in fg.apply_nodes
    assert extra.owner.tag.imported_by == ["manual"]
    # Imported but not yet used by anything the outputs need: not a valid graph yet.
    with pytest.raises(IntegrityError, match="nodes are inappropriately cached"):
        fg.check_integrity()
    fg.change_input(e.owner, 0, extra)
    assert_valid(fg)
    assert extra.owner.tag.imported_by == ["manual"]  # not imported a second time
    with pytest.raises(TypeError, match="expects an Apply"):
        fg.import_node(extra)
    w = MyVar("w")
    with pytest.raises(MissingInputError, match="Undeclared input: w"):
        fg.import_node(op1(w).owner)
    fg.import_node(op1(w).owner, import_missing=True)
    assert w in fg.inputs


def test_setup_node_checks_view_and_destroy_maps():
    x = MyVar("x")
    bad = MyOp("bad")
    bad.view_map = {0: 0}
    with pytest.raises(TypeError, match="bad view_map"):
        FunctionGraph([x], [bad(x)])


def test_graph_inputs_of_fgraph_outputs_are_declared():
    fg, (x, y, z, *_rest) = build_abc()
    assert set(graph_inputs(fg.outputs)) <= set(fg.inputs)
    assert io_toposort(fg.inputs, fg.outputs) == fg.toposort()
    assert isinstance(fg.outputs[0].owner, Apply)
    assert cached_clients(fg)[x]


def test_toposort_cache_survives_attaching_features():
    fg, _ = build_abc()
    order = fg.toposort()
    cache = fg._toposort_cache
    fg.attach_feature(NodeFinder())
    assert fg.toposort() == order and fg._toposort_cache is cache
    # A change of the graph still refreshes it.
    fg.replace(fg.outputs[0], fg.inputs[0])
    assert fg.toposort() == io_toposort(fg.inputs, fg.outputs)
