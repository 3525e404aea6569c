"""The reference engine (theano_dag.engines.basic) on toy ops, without the tensor library."""

import numpy as np
import pytest

from theano_dag.engines.basic import (
    Container,
    PerformLinker,
    WrapLinker,
    describe_value,
    map_storage,
)
from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.op import Op
from theano_dag.graph.type import Generic, Type

g = Generic()


class Arr(Type):
    """Float64 arrays; refuses anything else (to test Container filtering)."""

    __props__ = ()

    def filter(self, data, strict=False, allow_downcast=None):
        if strict and not isinstance(data, np.ndarray):
            raise TypeError("Arr: strict needs an ndarray")
        arr = np.asarray(data)
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"Arr: cannot hold dtype {arr.dtype}")
        return arr.astype("float64", copy=False)


arr = Arr()


class Binary(Op):
    __props__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __str__(self):
        return self.fn.__name__

    def make_node(self, a, b):
        return Apply(self, [a, b], [a.type()])

    def perform(self, node, inputs, out):
        out[0][0] = self.fn(*inputs)


class Unary(Op):
    __props__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __str__(self):
        return self.fn.__name__

    def make_node(self, a):
        return Apply(self, [a], [a.type()])

    def perform(self, node, inputs, out):
        out[0][0] = self.fn(inputs[0])


def concat(a, b):
    return a + b


def boom(a):
    raise ValueError("boom")


class NeedsTwo(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


def fails_oddly(a):
    raise NeedsTwo("first", "second")


class Reuse(Op):
    """Writes into its previous output buffer when the shape matches (like Theano's ops)."""

    __props__ = ()

    def make_node(self, a):
        return Apply(self, [a], [a.type()])

    def perform(self, node, inputs, out):
        x = inputs[0]
        if out[0][0] is None or out[0][0].shape != x.shape:
            out[0][0] = np.empty_like(x)
        np.multiply(x, 2, out=out[0][0])


cat = Binary(concat)
twice = Reuse()


def test_perform_linker_runs_in_topological_order():
    a, b = g("a"), g("b")
    fg = FunctionGraph([a, b], [cat(cat(a, b), cat(b, a))])
    f = PerformLinker().accept(fg).make_function()
    assert f("x", "y") == "xyyx"
    assert f("1", "2") == "1221"


def test_make_thunk_containers():
    a, b = g("a"), g("b")
    fg = FunctionGraph([a, b], [cat(a, b), b])
    fn, ins, outs = PerformLinker().accept(fg).make_thunk()
    ins[0].data, ins[1].data = "p", "q"
    fn()
    assert [o.data for o in outs] == ["pq", "q"]
    with pytest.raises(ValueError, match="Cannot set readonly storage"):
        outs[0].data = "z"


def test_constants_get_their_own_cells():
    a = g("a")
    c = Constant(g, "!")
    fg = FunctionGraph([a], [cat(a, c)], clone=False)
    f = PerformLinker().accept(fg).make_function()
    assert f("hi") == "hi!"


def test_allow_gc_frees_intermediates_but_not_outputs():
    a = arr("a")
    mid = Unary(np.negative)(a)
    out = Unary(np.exp)(mid)
    fg = FunctionGraph([a], [out], clone=False)
    for allow_gc, expect_kept in ((True, False), (False, True)):
        fn, ins, outs = PerformLinker(allow_gc=allow_gc).accept(fg).make_thunk()
        ins[0].data = [0.0, 1.0]
        fn()
        np.testing.assert_allclose(outs[0].data, np.exp([0.0, -1.0]))
        assert (fn.storage_map[mid][0] is not None) == expect_kept
        assert fn.allow_gc == allow_gc


def test_no_recycling_cells_are_emptied_before_each_run():
    a = arr("a")
    out = twice(a)
    fg = FunctionGraph([a], [out], clone=False)
    # Without no_recycling the op reuses its buffer: the first result is overwritten.
    f = PerformLinker(allow_gc=False).accept(fg).make_function()
    r1 = f(np.ones(3))
    f(np.full(3, 5.0))
    assert r1.tolist() == [10.0, 10.0, 10.0]
    # With the output in no_recycling, each run allocates anew.
    f = PerformLinker(allow_gc=False).accept(fg, no_recycling=[out]).make_function()
    r1 = f(np.ones(3))
    r2 = f(np.full(3, 5.0))
    assert r1.tolist() == [2.0, 2.0, 2.0] and r2.tolist() == [10.0, 10.0, 10.0]


def test_runtime_error_names_op_position_shapes_and_keeps_type():
    a, b = arr("a"), arr("b")
    s = Binary(np.add)(a, b)
    bad = Unary(boom)(s)
    fg = FunctionGraph([a, b], [Binary(np.multiply)(bad, a)], clone=False)
    f = PerformLinker().accept(fg).make_function()
    with pytest.raises(ValueError) as info:
        f(np.zeros((2, 3)), np.ones((2, 3)))
    err = info.value
    assert str(err).startswith(
        "boom\n"
        "Apply node that caused the error: boom(add.0)\n"
        "Toposort index: 1\n"
        "Inputs types: [Arr]\n"
        "Inputs shapes and dtypes: [(2, 3) float64]\n"
        "Backtrace when the node is created"  # then the user's line (issue 17)
    )
    assert "    bad = Unary(boom)(s)\n" in str(err)
    assert isinstance(err.__cause__, ValueError) and str(err.__cause__) == "boom"
    assert err.node is bad.owner and err.position == 1


def test_runtime_error_of_a_type_that_cannot_be_rebuilt_is_annotated():
    a = g("a")
    fg = FunctionGraph([a], [Unary(fails_oddly)(a)], clone=False)
    f = PerformLinker().accept(fg).make_function()
    with pytest.raises(NeedsTwo) as info:
        f([1, 2])
    assert info.value.args[:2] == ("first", "second")
    assert "Apply node that caused the error: fails_oddly(a)" in info.value.args[2]
    assert "Inputs shapes and dtypes: [list]" in info.value.args[2]


def test_deep_chain_runs_without_recursion():
    a = g("a")
    v = a
    for _ in range(5000):
        v = cat(v, a)
    fg = FunctionGraph([a], [v], clone=False)
    f = PerformLinker().accept(fg).make_function()
    assert f("x") == "x" * 5001


def test_make_function_checks_argument_count():
    a, b = g("a"), g("b")
    f = PerformLinker().accept(FunctionGraph([a, b], [cat(a, b)])).make_function()
    with pytest.raises(TypeError, match=r"Function call takes exactly 2 args \(1 given\)"):
        f("x")


def test_accept_other_graph_returns_new_linker():
    a = g("a")
    fg1 = FunctionGraph([a], [cat(a, a)])
    fg2 = FunctionGraph([a], [cat(cat(a, a), a)])
    lk = PerformLinker().accept(fg1)
    lk2 = lk.accept(fg2)
    assert lk2 is not lk and lk.fgraph is fg1 and lk2.fgraph is fg2
    assert lk2.make_function()("z") == "zzz"


def test_wrap_linker_runs_each_node_through_the_wrapper():
    a, b = g("a"), g("b")
    fg = FunctionGraph([a, b], [cat(cat(a, b), a)])
    seen = []

    def wrapper(fgraph, i, node, *thunks):
        seen.append((i, str(node.op), len(thunks)))
        for t in thunks:
            t()

    lk = WrapLinker([PerformLinker(), PerformLinker()], wrapper).accept(fg)
    f = lk.make_function()
    assert f("p", "q") == "pqp"
    assert seen == [(0, "concat", 2), (1, "concat", 2)]


def test_wrap_linker_reports_failing_node():
    a = arr("a")
    fg = FunctionGraph([a], [Unary(boom)(Unary(np.negative)(a))], clone=False)

    def wrapper(fgraph, i, node, *thunks):
        for t in thunks:
            t()

    f = WrapLinker([PerformLinker()], wrapper).accept(fg).make_function()
    with pytest.raises(ValueError, match="Toposort index: 1") as info:
        f(np.zeros(2))
    assert "Apply node that caused the error: boom(negative.0)" in str(info.value)


def test_container_filters_and_refuses():
    c = Container(arr("x"), [None])
    c.data = [1, 2]
    assert c.data.dtype == np.float64
    with pytest.raises(TypeError, match="Arr: cannot hold dtype <U1") as info:
        c.data = ["a"]
    assert info.value.args[-1] == 'Container name "x"'
    strict = Container(arr("y"), [None], strict=True)
    with pytest.raises(TypeError, match="strict needs an ndarray"):
        strict.data = [1.0]
    with pytest.raises(TypeError, match="storage must be a list of length at least one"):
        Container(arr, [])


def test_map_storage_rejects_mismatched_storage():
    a = g("a")
    fg = FunctionGraph([a], [cat(a, a)])
    with pytest.raises(ValueError, match="input_storage has 2 cells, the graph has 1 inputs"):
        map_storage(fg, fg.toposort(), [[None], [None]], None)


def test_describe_value():
    assert describe_value(np.zeros((2, 1), dtype="int32")) == "(2, 1) int32"
    assert describe_value("abc") == "str"
    assert describe_value(None) == "None (not computed)"
