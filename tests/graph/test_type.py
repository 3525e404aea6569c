"""Tests of theano_dag.graph.type: Type and Generic."""

import re

import pytest

from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.op import Op
from theano_dag.graph.type import Generic, Type, generic
from theano_dag.graph.utils import MethodNotDefined


class IntType(Type):
    """Python ints of at most ``bits`` bits; non-strict filtering converts integral floats."""

    __props__ = ("bits",)

    def __init__(self, bits=8):
        self.bits = bits

    def filter(self, data, strict=False, allow_downcast=None):
        if not strict and isinstance(data, float) and data.is_integer():
            data = int(data)
        if not isinstance(data, int) or isinstance(data, bool):
            raise TypeError(f"{self} expects an int, got {type(data).__name__}")
        if data.bit_length() >= self.bits:
            raise ValueError(f"{data} does not fit in {self.bits} bits")
        return data

    def convert_variable(self, var):
        # A narrower int converts safely into a wider one.
        if isinstance(var.type, IntType) and var.type.bits < self.bits:
            return Widen(self)(var)
        return None


class Widen(Op):
    __props__ = ("to",)

    def __init__(self, to):
        self.to = to

    def make_node(self, x):
        return Apply(self, [x], [self.to()])


class IntVariable(Variable):
    pass


class IntConstant(Constant):
    pass


class TypedInt(IntType):
    Variable = IntVariable
    Constant = IntConstant


i8, i16 = IntType(8), IntType(16)


class TestType:
    def test_filter_must_be_implemented(self):
        class Bare(Type):
            __props__ = ()

        with pytest.raises(MethodNotDefined, match=r"^Bare\.filter is not implemented$"):
            Bare().filter(1)
        with pytest.raises(NotImplementedError):
            Bare().filter_inplace(1, None)
        with pytest.raises(MethodNotDefined):
            Bare().is_valid_value(1)  # no filter: neither valid nor invalid

    def test_filter(self):
        assert i8.filter(3) == 3
        assert i8.filter(3.0) == 3 and isinstance(i8.filter(3.0), int)
        with pytest.raises(TypeError, match=r"^IntType\{bits=8\} expects an int, got float$"):
            i8.filter(3.0, strict=True)
        with pytest.raises(ValueError, match="^300 does not fit in 8 bits$"):
            i8.filter(300)

    def test_is_valid_value_is_strict(self):
        assert i8.is_valid_value(5)
        assert not i8.is_valid_value(5.0)  # filter would convert it: not valid as it is
        assert not i8.is_valid_value(300)
        assert not i8.is_valid_value("5")
        assert i8.value_validity_msg(5) == "none"

    def test_values_eq(self):
        assert i8.values_eq(3, 3) and not i8.values_eq(3, 4)
        assert i8.values_eq_approx(3, 3) and not i8.values_eq_approx(3, 4)

        class Tolerant(IntType):
            @classmethod
            def values_eq(cls, a, b):
                return abs(a - b) <= 1

        assert Tolerant().values_eq_approx(3, 4)  # approx defaults to values_eq

    def test_make_variable_and_call(self):
        v = i8.make_variable("v")
        assert type(v) is Variable
        assert (v.type, v.name, v.owner, v.index) == (i8, "v", None, None)
        w = i8("w")
        assert w.type is i8 and w.name == "w" and w is not v
        assert i8().name is None

    def test_variable_and_constant_classes(self):
        t = TypedInt()
        assert type(t("x")) is IntVariable
        c = t.make_constant(3, name="three")
        assert type(c) is IntConstant and c.data == 3 and c.name == "three"
        assert type(t.filter_variable(4)) is IntConstant

    def test_make_constant_filters(self):
        assert i8.make_constant(2.0).data == 2
        with pytest.raises(TypeError, match="expects an int, got str"):
            i8.make_constant("2")

    def test_equality_by_props(self):
        assert IntType(8) == IntType(8) and hash(IntType(8)) == hash(IntType(8))
        assert IntType(8) != IntType(16)
        assert {IntType(8): "byte"}[IntType(8)] == "byte"
        assert str(i8) == repr(i8) == "IntType{bits=8}"

    def test_may_share_memory(self):
        a = [1]
        assert i8.may_share_memory(a, a) and not i8.may_share_memory(a, [1])


class TestFilterVariable:
    def test_same_type_is_returned_as_is(self):
        x = i8("x")
        assert i8.filter_variable(x) is x
        assert i8.filter_variable(IntType(8)("y")).type == i8

    def test_value_becomes_constant(self):
        c = i8.filter_variable(5.0)
        assert isinstance(c, Constant) and c.data == 5 and c.type == i8
        with pytest.raises(TypeError, match="expects an int, got str"):
            i8.filter_variable("five")

    def test_other_type_refused_with_message(self):
        x = i16("x")
        msg = (
            "Cannot convert Type IntType{bits=16} (of Variable x) into Type IntType{bits=8}. "
            "You can try to manually convert x into a IntType{bits=8}."
        )
        with pytest.raises(TypeError, match=f"^{re.escape(msg)}$"):
            i8.filter_variable(x)

    def test_convert_variable(self):
        x = i8("x")
        wide = i16.filter_variable(x)
        assert wide.type == i16 and wide.owner.op == Widen(i16) and wide.owner.inputs == [x]
        with pytest.raises(TypeError, match="Cannot convert Type IntType{bits=8}"):
            i16.filter_variable(x, allow_convert=False)


class TestGeneric:
    def test_accepts_anything(self):
        g = Generic()
        obj = object()
        assert g.filter(obj) is obj
        assert g.filter([1, 2], strict=True) == [1, 2]
        assert g.is_valid_value(obj) and g.is_valid_value(None)

    def test_equality_and_str(self):
        assert Generic() == Generic() == generic
        assert hash(Generic()) == hash(generic)
        assert Generic() != i8
        assert str(generic) == repr(generic) == "Generic"

    def test_variables_and_constants(self):
        v = generic("v")
        assert v.type == generic and str(v) == "v"
        c = generic.filter_variable({"a": 1})
        assert isinstance(c, Constant) and c.data == {"a": 1}
        assert generic.filter_variable(v) is v
        assert str(generic()) == "<Generic>"
