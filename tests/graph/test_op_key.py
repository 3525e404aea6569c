"""The description of an op that the caches on disk key their entries by
(``theano_dag.graph.op_key``): equal ops have one description, in any process; ops
that differ in anything have different ones; what it cannot vouch for is refused."""

import os
import subprocess
import sys

import numpy as np
import pytest

import theano_dag.scalar as ts
import theano_dag.tensor as tt
from theano_dag.graph import op_key
from theano_dag.graph.op import Op
from theano_dag.graph.op_key import NotDescribable, describe
from theano_dag.graph.utils import MetaObject
from theano_dag.scalar.composite import Composite
from theano_dag.tensor.elemwise import CAReduce, DimShuffle, Elemwise, Sum
from theano_dag.tensor.type import TensorType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# This module's classes and functions go by name only where a test says so.
HERE = (__name__.split(".")[0], *op_key.TRUSTED_PACKAGES)


class Holder(MetaObject):
    """An op-like object holding any value as its one prop."""

    __props__ = ("value",)

    def __init__(self, value, name=None):
        self.value = value
        self.name = name


class Plain:
    """An object without props: described by its state."""

    def __init__(self, **state):
        self.__dict__.update(state)


class OwnEquality(Holder):
    def __eq__(self, other):  # compares less than the props: not the props' equality
        return type(other) is type(self)

    __hash__ = Holder.__hash__


def _user_function(x):
    return x


def _described(*objs, **kw):
    return [describe(o, trusted=HERE, **kw) for o in objs]


# Made in a child process and in this one: the same descriptions (the child's hash
# seed differs, which orders sets and dicts of strings otherwise).
OPS = """
import numpy as np
import theano_dag.scalar as ts
import theano_dag.tensor as tt
from theano_dag.tensor.elemwise import DimShuffle, Elemwise, Sum
ops = [
    Elemwise(ts.exp),
    Elemwise(ts.add, {0: 0}),
    Elemwise(ts.Cast(ts.float32)),
    Sum(axis=(0, 2)),
    Sum(axis=None, dtype="float32"),
    DimShuffle((False, True), [0]),
    ts.switch,
    tt.TensorType("float32", shape=(None, 1)),
    tt.dvector().type,
    (np.arange(6, dtype="int16").reshape(2, 3), np.float32(1.5), frozenset({"a", "b", "c"})),
    {"b": 1, "a": (2.0, None)},
]
"""
CHILD = """
import sys
sys.path.insert(0, {root!r})
from theano_dag.graph.op_key import describe
{ops}
for op in ops:
    print(describe(op, name=True))
"""


def test_equal_ops_have_one_description_in_any_process():
    here = {}
    exec(OPS, here)
    mine = [describe(op, name=True) for op in here["ops"]]
    again = {}
    exec(OPS, again)  # equal ops made apart
    assert [describe(op, name=True) for op in again["ops"]] == mine
    for seed in ("1", "2"):
        p = subprocess.run(
            [sys.executable, "-c", CHILD.format(root=ROOT, ops=OPS)],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, PYTHONHASHSEED=seed),
        )
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines() == mine
    assert len(set(mine)) == len(mine)


def test_ops_that_differ_in_any_prop_differ():
    x = tt.dmatrix()
    texts = [
        # The scalar op inside an Elemwise, its in-place pattern (a dict).
        *_described(Elemwise(ts.exp), Elemwise(ts.log), Elemwise(ts.add)),
        *_described(Elemwise(ts.add, {0: 0}), Elemwise(ts.add, {0: 1}), Elemwise(ts.add, {1: 0})),
        # Dtypes: a cast's, a type's, a reduction's accumulator.
        *_described(Elemwise(ts.Cast(ts.float32)), Elemwise(ts.Cast(ts.float64))),
        *_described(TensorType("float32", (None,)), TensorType("float64", (None,))),
        *_described(TensorType("float64", (1,)), TensorType("float64", (None, None))),
        *_described(Sum(axis=(0,), dtype="float32"), Sum(axis=(0,), dtype="float64")),
        # Axis tuples.
        *_described(Sum(axis=(1,)), Sum(axis=None), Sum(axis=(0, 1))),
        *_described(CAReduce(ts.maximum, axis=(0,)), DimShuffle((False, False), [1, 0])),
        describe(tt.max(x, axis=1).owner.op),
        # Nested ops and a class among the props.
        *_described(Holder(Holder(1)), Holder(Holder(2)), Holder(Holder((1,)))),
        *_described(Holder(Sum), Holder(CAReduce), Holder(np.float32), Holder(np.float64)),
        # numpy arrays: dtype, shape, bytes; numpy scalars; functions and ufuncs by name.
        *_described(Holder(np.zeros(2)), Holder(np.zeros(2, "float32")), Holder(np.zeros((1, 2)))),
        *_described(Holder(np.array([0.0, 1.0])), Holder(np.array([0.0, -0.0]))),
        *_described(Holder(np.float32(1)), Holder(np.float64(1)), Holder(np.int64(1))),
        *_described(Holder(np.add), Holder(np.multiply), Holder(ts.upcast_out), Holder(len)),
        # Plain values of one value but another type, and where separators could move.
        *_described(Holder(1), Holder(1.0), Holder(True), Holder("1"), Holder(b"1"), Holder(1j)),
        *_described(Holder((1,)), Holder([1]), Holder(None), Holder("None"), Holder(())),
        *_described(Holder(((1, 2), 3)), Holder((1, (2, 3))), Holder((1, 2, 3))),
        *_described(Holder(("a,b",)), Holder(("a", "b")), Holder(("a)", "b"))),
        *_described(Holder({1: 2}), Holder({2: 1}), Holder({1: 2, 3: 4})),
        *_described(Holder(frozenset({1, 2})), Holder({1, 2}), Holder(slice(1, None))),
        # An object without props, by its state.
        *_described(Plain(a=1), Plain(a=2), Plain(b=1), Plain(a=1, b=1)),
    ]
    assert None not in texts and len(set(texts)) == len(texts)


def test_names_are_part_of_it_when_asked():
    a, b = Holder(1, name="a"), Holder(1, name="b")
    assert a == b
    assert describe(a, trusted=HERE) == describe(b, trusted=HERE)
    assert describe(a, trusted=HERE, name=True) != describe(b, trusted=HERE, name=True)
    # A nested op's name too (an Elemwise's scalar op).
    assert "name=str:'exp'" in describe(Elemwise(ts.exp), name=True)
    assert "exp'" not in describe(Elemwise(ts.exp))


def test_equal_values_made_apart_have_one_description():
    assert _described(Holder({"b": 1, "a": 2}, name="x")) == _described(
        Holder({"a": 2, "b": 1}, name="y")
    )
    assert describe(frozenset(str(k) for k in range(50))) == describe(
        frozenset(str(k) for k in reversed(range(50)))
    )
    # (a node's Sum names its accumulator, as Theano's: float64 for a float64 input)
    made = Sum(axis=(0,), acc_dtype="float64")
    assert describe(made) == describe(tt.sum(tt.dmatrix(), axis=0).owner.op)


_a = ts.float64("a")


def _closure(k):
    return lambda x: x * k


@pytest.mark.parametrize(
    "obj, why",
    [
        (OwnEquality(1), "equality is not its props'"),
        (Holder(lambda x: x), "not found by its name"),
        (Holder(_closure(2)), "not found by its name"),
        (Holder(tt.dvector()), "a graph's piece"),
        (Holder(tt.exp(tt.dvector()).owner), "a graph's piece"),
        (Holder(np.array([None])), "of objects"),
        (Holder(np.zeros(1, dtype=[("a", "f8")])), "structured"),
        (Holder(np.frompyfunc(_user_function, 1, 1)), "not numpy's"),
        (Holder(np.random.default_rng(0)), "keeps state that is not its attributes"),
        (Holder(type(ts.angle)(lambda *d: ("float64",))), "not found by its name"),
        (Elemwise(Composite([_a], [_a + 1])), "equality"),
    ],
)
def test_what_it_cannot_vouch_for_is_refused(obj, why):
    with pytest.raises(NotDescribable, match=why):
        describe(obj, trusted=HERE)
    assert op_key.op_key(obj, trusted=HERE) is None


def test_a_users_function_among_the_props_is_refused():
    # theano_dag's op, the user's function: its code is not in the keys' code version.
    with pytest.raises(NotDescribable, match="_user_function is from .* keys do not hold"):
        describe(Elemwise(type(ts.exp)(_user_function)))


def test_closures_of_one_name_in_theano_dag_are_refused(monkeypatch):
    # Two closures of one function share a name but not what they compute: the cache of
    # optimized graphs once named them by their module and name alike.
    double, triple = _closure(2), _closure(3)
    for f in (double, triple):
        monkeypatch.setattr(f, "__module__", "theano_dag.scalar.basic")
    for f in (double, triple):
        with pytest.raises(NotDescribable, match="not found by its name"):
            describe(Holder(f), trusted=HERE)


def test_a_class_made_in_a_function_and_a_users_op_are_refused():
    def make():
        class Made(MetaObject):
            __props__ = ()

        return Made()

    with pytest.raises(NotDescribable, match="not found by its name"):
        describe(make(), trusted=HERE)

    class UserOp(Op):
        __props__ = ()

    with pytest.raises(NotDescribable, match="whose code the keys do not hold"):
        describe(UserOp())
    with pytest.raises(NotDescribable, match="whose code the keys do not hold"):
        describe(Holder(1))  # this module's: not trusted by default


def test_an_object_holding_itself_is_refused():
    p = Plain()
    p.me = p
    with pytest.raises(NotDescribable, match="holds itself"):
        describe(p, trusted=HERE)
    # Held twice, not in a cycle: fine.
    shared = Holder(1)
    assert describe(Holder((shared, shared)), trusted=HERE).count("Holder(int:1)") == 2
