"""Tests of theano_dag.graph.op: Op, __props__, thunks, as_op, test values."""

import pickle
import re
import sys
import textwrap

import pytest

from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant, Variable, equal_computations, is_same_graph
from theano_dag.graph.op import FromFunctionOp, Op, PureOp, as_op, compute_test_value
from theano_dag.graph.type import Generic, Type
from theano_dag.graph.utils import MetaObject, MethodNotDefined

# ---------------------------------------------------------------------------
# Toys


class NumType(Type):
    """Python numbers; ``kind`` tells two NumTypes apart."""

    __props__ = ("kind",)

    def __init__(self, kind="n"):
        self.kind = kind

    def filter(self, data, strict=False, allow_downcast=None):
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return data
        raise TypeError(f"{self} expects a number, got {type(data).__name__}")


num = NumType()


class Add(Op):
    __props__ = ()

    def make_node(self, *xs):
        return Apply(self, [num.filter_variable(x) for x in xs], [num()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = sum(inputs)


class Scale(Op):
    __props__ = ("factor",)

    def __init__(self, factor):
        self.factor = factor

    def make_node(self, x):
        return Apply(self, [x], [num()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = self.factor * inputs[0]


class Offset(Op):
    """Same props as Scale, different class."""

    __props__ = ("factor",)

    def __init__(self, factor):
        self.factor = factor

    def make_node(self, x):
        return Apply(self, [x], [num()])


class DivMod(Op):
    __props__ = ()

    def make_node(self, a, b):
        return Apply(self, [a, b], [num(), num()])

    def perform(self, node, inputs, output_storage, params=None):
        q, r = divmod(*inputs)
        output_storage[0][0] = q
        output_storage[1][0] = r


class DivModRemainder(DivMod):
    default_output = 1


class NoProps(Op):
    def make_node(self, x):
        return Apply(self, [x], [num()])


def run_node(node, values):
    """Run ``node`` through ``make_thunk`` on input ``values``; return (outputs, thunk, maps)."""
    storage = {v: [val] for v, val in zip(node.inputs, values)}
    storage.update({o: [None] for o in node.outputs})
    computed = {v: [True] for v in node.inputs}
    computed.update({o: [False] for o in node.outputs})
    thunk = node.op.make_thunk(node, storage, computed, no_recycling=[])
    thunk()
    return [storage[o][0] for o in node.outputs], thunk, storage, computed


# ---------------------------------------------------------------------------
# __call__


class TestCall:
    def test_single_output(self):
        x, y = num("x"), num("y")
        out = Add()(x, y)
        assert isinstance(out, Variable)
        assert out.owner.op == Add() and out.owner.inputs == [x, y]
        listed = Add()(x, return_list=True)
        assert isinstance(listed, list) and len(listed) == 1
        assert listed[0].owner.outputs == listed

    def test_multiple_outputs(self):
        a, b = num("a"), num("b")
        outs = DivMod()(a, b)
        assert isinstance(outs, list) and len(outs) == 2
        assert outs[0].owner is outs[1].owner
        assert [o.index for o in outs] == [0, 1]
        listed = DivMod()(a, b, return_list=True)
        assert isinstance(listed, list) and len(listed) == 2

    def test_default_output(self):
        a, b = num("a"), num("b")
        r = DivModRemainder()(a, b)
        assert isinstance(r, Variable) and r.index == 1
        assert r.owner.outputs[1] is r
        (r2,) = DivModRemainder()(a, b, return_list=True)
        assert r2.index == 1

    def test_kwargs_reach_make_node(self):
        class Kw(Op):
            def make_node(self, x, name=None):
                return Apply(self, [x], [num(name)])

        assert Kw()(num("x"), name="out").name == "out"

    def test_plain_values_become_constants(self):
        out = Add()(num("x"), 3)
        const = out.owner.inputs[1]
        assert isinstance(const, Constant) and const.data == 3 and const.type == num


# ---------------------------------------------------------------------------
# __props__


class TestProps:
    def test_eq_hash_str(self):
        assert Scale(2) == Scale(2) and hash(Scale(2)) == hash(Scale(2))
        assert Scale(2) != Scale(3)
        assert not (Scale(2) != Scale(2))
        assert Scale(2) != Offset(2)  # same props, other class
        assert str(Scale(2)) == repr(Scale(2)) == "Scale{factor=2}"
        assert str(Scale("a")) == "Scale{factor='a'}"
        assert str(Add()) == "Add" and Add() == Add()
        assert {Scale(2): "two"}[Scale(2)] == "two"
        assert Scale(2)._props() == (2,) and Scale(2)._props_dict() == {"factor": 2}

    def test_without_props_identity(self):
        a, b = NoProps(), NoProps()
        assert a != b and a == a
        assert len({a, b}) == 2
        assert re.fullmatch(r"<.*NoProps object at 0x[0-9a-f]+>", repr(a))

    def test_own_eq_is_kept(self):
        class Loose(Op):
            __props__ = ("v",)

            def __init__(self, v):
                self.v = v

            def __eq__(self, other):
                return isinstance(other, Loose)

            def __hash__(self):
                return 0

        assert Loose(1) == Loose(2)

    def test_bad_props(self):
        with pytest.raises(TypeError, match=r"^Bad\.__props__ must be a tuple of attribute names$"):

            class Bad(Op):
                __props__ = ["a"]

        with pytest.raises(TypeError, match=r"__props__ must contain only strings, got \(1,\)"):

            class Bad2(MetaObject):
                __props__ = (1,)

    def test_equal_ops_make_the_same_computation(self):
        x = num("x")
        first, second = Scale(2)(x), Scale(2)(x)
        assert first.owner is not second.owner
        assert equal_computations([first], [second])
        assert is_same_graph(first, second)
        assert not is_same_graph(first, Scale(3)(x))
        assert not is_same_graph(first, Offset(2)(x))


# ---------------------------------------------------------------------------
# make_node from itypes / otypes


class Typed(Op):
    __props__ = ()
    itypes = [num, num]
    otypes = [NumType("out")]

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0] - inputs[1]


class TestItypes:
    def test_make_node(self):
        x, y = num("x"), num("y")
        out = Typed()(x, y)
        assert out.type == NumType("out") and out.owner.inputs == [x, y]

    def test_count(self):
        with pytest.raises(ValueError, match=r"^Typed expects 2 inputs, got 1$"):
            Typed()(num("x"))

    def test_type(self):
        other = NumType("other")("o")
        msg = (
            "Typed: input 1 should be of type NumType{kind='n'}: Cannot convert Type "
            "NumType{kind='other'} (of Variable o) into Type NumType{kind='n'}."
        )
        with pytest.raises(TypeError, match=re.escape(msg)):
            Typed()(num("x"), other)

    def test_value_is_wrapped(self):
        out = Typed()(num("x"), 4)
        assert isinstance(out.owner.inputs[1], Constant) and out.owner.inputs[1].data == 4
        with pytest.raises(
            TypeError, match="input 1 should be of type .* expects a number, got str"
        ):
            Typed()(num("x"), "four")

    def test_no_make_node(self):
        class Nothing(Op):
            pass

        with pytest.raises(NotImplementedError, match="^Nothing must define make_node$"):
            Nothing()(num("x"))


# ---------------------------------------------------------------------------
# perform through make_thunk


class TestThunk:
    def test_single_output(self):
        node = Scale(3).make_node(num("x"))
        (res,), thunk, storage, computed = run_node(node, [5])
        assert res == 15
        assert computed[node.outputs[0]] == [True]
        assert thunk.inputs == [storage[node.inputs[0]]]
        assert thunk.outputs == [storage[node.outputs[0]]]
        assert thunk.lazy is False
        # Same storage cells, new input value.
        storage[node.inputs[0]][0] = 7
        thunk()
        assert storage[node.outputs[0]][0] == 21

    def test_multiple_outputs(self):
        node = DivMod().make_node(num("a"), num("b"))
        outs, *_ = run_node(node, [17, 5])
        assert outs == [3, 2]

    def test_params(self):
        seen = []

        class WithParams(Op):
            __props__ = ("k",)
            params_type = NumType("params")

            def __init__(self, k):
                self.k = k

            def make_node(self, x):
                return Apply(self, [x], [num()])

            def get_params(self, node):
                return self.k * 10

            def perform(self, node, inputs, output_storage, params=None):
                seen.append(params)
                output_storage[0][0] = inputs[0] + params

        node = WithParams(4).make_node(num("x"))
        (res,), *_ = run_node(node, [1])
        assert res == 41 and seen == [40]

    def test_params_filtered_by_params_type(self):
        class BadParams(Scale):
            params_type = NumType("params")

            def get_params(self, node):
                return "not a number"

        node = BadParams(1).make_node(num("x"))
        with pytest.raises(TypeError, match="expects a number, got str"):
            node.op.make_thunk(node, {node.inputs[0]: [1], node.outputs[0]: [None]}, None, [])

    def test_without_compute_map(self):
        node = Scale(2).make_node(num("x"))
        storage = {node.inputs[0]: [4], node.outputs[0]: [None]}
        node.op.make_thunk(node, storage, None, [])()
        assert storage[node.outputs[0]] == [8]

    def test_prepare_node_is_called(self):
        calls = []

        class Prepared(Scale):
            def prepare_node(self, node, storage_map, compute_map, impl):
                calls.append((node, impl))

        node = Prepared(2).make_node(num("x"))
        run_node(node, [1])
        assert calls == [(node, None)]


# ---------------------------------------------------------------------------
# Defaults and missing methods


class TestDefaults:
    def test_missing_methods(self):
        node = NoProps().make_node(num("x"))
        op = node.op
        cases = [
            (lambda: op.perform(node, [1], [[None]]), "NoProps.perform is not implemented"),
            (lambda: op.infer_shape(None, node, [()]), "NoProps.infer_shape is not implemented"),
            (lambda: op.grad([num()], [num()]), "NoProps.grad is not implemented"),
            (lambda: op.L_op([num()], [num()], [num()]), "NoProps.grad is not implemented"),
            (lambda: op.R_op([num()], [num()]), "NoProps.R_op is not implemented"),
            (lambda: op.get_params(node), "get_params"),
        ]
        for call, msg in cases:
            with pytest.raises(MethodNotDefined, match=f"^{re.escape(msg)}$"):
                call()
        # Code written for Theano's NotImplementedError catches it too.
        with pytest.raises(NotImplementedError):
            op.grad([num()], [num()])
        with pytest.raises(MethodNotDefined):
            run_node(node, [1])

    def test_l_op_defaults_to_grad(self):
        class WithGrad(Scale):
            def grad(self, inputs, output_grads):
                return [Scale(self.factor)(output_grads[0])]

        x, g = num("x"), num("g")
        y = WithGrad(3)(x)
        (gx,) = y.owner.op.L_op([x], [y], [g])
        assert gx.owner.op == Scale(3) and gx.owner.inputs == [g]

    def test_default_attributes(self):
        node = DivMod().make_node(num("a"), num("b"))
        op = node.op
        assert op.default_output is None
        assert op.destroy_map == {} and op.view_map == {}
        assert op.connection_pattern(node) == [[True, True], [True, True]]
        assert op.do_constant_folding(None, node) is True
        assert node.run_params() is not None  # NoParams sentinel, not None
        assert PureOp is Op


# ---------------------------------------------------------------------------
# as_op


@as_op([num, num], [num])
def hypot2(a, b):
    return a * a + b * b


class TestAsOp:
    def test_wraps_a_python_function(self):
        assert isinstance(hypot2, FromFunctionOp)
        assert str(hypot2) == "FromFunctionOp{hypot2}"
        x, y = num("x"), num("y")
        out = hypot2(x, y)
        assert out.owner.op is hypot2 and out.type == num
        (res,), *_ = run_node(out.owner, [3, 4])
        assert res == 25

    def test_input_types_checked(self):
        with pytest.raises(ValueError, match="expects 2 inputs, got 1"):
            hypot2(num("x"))
        with pytest.raises(TypeError, match="input 0 should be of type"):
            hypot2(NumType("z")("z"), num("y"))

    def test_multiple_outputs_and_single_type(self):
        @as_op(num, [num, num])
        def split(v):
            return v // 2, v % 2

        q, r = split(num("v"))
        outs, *_ = run_node(q.owner, [7])
        assert outs == [3, 1]

    def test_single_output_may_be_a_tuple(self):
        @as_op([Generic()], [Generic()])
        def pair(v):
            return (v, v)

        (res,), *_ = run_node(pair(Generic()("v")).owner, ["a"])
        assert res == ("a", "a")

    def test_bad_function_results(self):
        @as_op([num], [num, num])
        def only_one(v):
            return [v]

        with pytest.raises(ValueError, match=r"the function returned 1 outputs, expected 2"):
            run_node(only_one(num("v"))[0].owner, [1])

        @as_op([num], [num])
        def wrong_type(v):
            return "text"

        with pytest.raises(TypeError, match="expects a number, got str"):
            run_node(wrong_type(num("v")).owner, [1])

    def test_infer_shape(self):
        def shapes(fgraph, node, input_shapes):
            return [input_shapes[0]]

        @as_op([num], [num], infer_shape=shapes)
        def ident(v):
            return v

        node = ident(num("v")).owner
        assert ident.infer_shape(None, node, [(2, 3)]) == [(2, 3)]
        with pytest.raises(MethodNotDefined, match="was built by as_op without infer_shape"):
            hypot2.infer_shape(None, node, [()])

    def test_bad_arguments(self):
        with pytest.raises(TypeError, match=r"^as_op: itypes must be a list of Types, got 'x'$"):
            as_op(["x"], [num])
        with pytest.raises(TypeError, match=r"^as_op: otypes must be a list of Types, got 3$"):
            as_op([num], 3)
        with pytest.raises(TypeError, match="^as_op: infer_shape must be callable$"):
            as_op([num], [num], infer_shape=5)

    def test_equality(self):
        def f(v):
            return v

        assert as_op([num], [num])(f) == as_op([num], [num])(f)
        assert as_op([num], [num])(f) != as_op([Generic()], [Generic()])(f)

    def test_pickle(self, tmp_path, monkeypatch):
        (tmp_path / "asop_mod.py").write_text(
            textwrap.dedent(
                """
                from theano_dag.graph.op import as_op
                from theano_dag.graph.type import Generic

                @as_op([Generic()], [Generic()])
                def shout(s):
                    return s.upper()
                """
            )
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        import asop_mod

        try:
            assert pickle.loads(pickle.dumps(asop_mod.shout)) is asop_mod.shout
            out = asop_mod.shout(Generic()("s"))
            out2 = pickle.loads(pickle.dumps(out))
            assert out2.owner.op is asop_mod.shout
        finally:
            sys.modules.pop("asop_mod", None)

    def test_pickle_local_refused(self):
        @as_op([num], [num])
        def local(v):
            return v

        with pytest.raises(pickle.PicklingError, match="Can't pickle as_op\\(\\), not found as"):
            pickle.dumps(local)


# ---------------------------------------------------------------------------
# Test values


class TestComputeTestValue:
    def test_off_by_default(self):
        x = num("x")
        x.tag.test_value = 2
        y = Scale(3)(x)
        assert not hasattr(y.tag, "test_value")

    def test_values_propagate(self):
        x, y = num("x"), num("y")
        x.tag.test_value, y.tag.test_value = 2, 5
        with config.change_flags(compute_test_value="raise"):
            z = Add()(Scale(3)(x), y, 10)
            q, r = DivMod()(z, y)
        assert z.get_test_value() == 21
        assert (q.get_test_value(), r.get_test_value()) == (4, 1)

    def test_missing_raise(self):
        x = num("x")
        with config.change_flags(compute_test_value="raise"):
            msg = (
                "Cannot compute test value: input 0 (x) of Op Scale{factor=3} "
                "missing default value"
            )
            with pytest.raises(ValueError, match=f"^{re.escape(msg)}$"):
                Scale(3)(x)

    def test_missing_warn(self):
        x = num("x")
        with config.change_flags(compute_test_value="warn"):
            with pytest.warns(UserWarning, match=r"input 0 \(x\) of Op Scale\{factor=3\}"):
                y = Scale(3)(x)
        assert not hasattr(y.tag, "test_value")

    def test_direct_call(self):
        x = num("x")
        x.tag.test_value = 6
        node = Scale(2).make_node(x)
        compute_test_value(node)
        assert node.outputs[0].get_test_value() == 12
