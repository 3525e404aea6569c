"""Behaviour Theano 1.1.2's own graph tests check (make theano-graph-tests runs them):
test values through shared variables, destroying ops and scan; FunctionGraph's
replacement errors; COps on C scalars and COps with only a ``perform``."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar
from theano_dag.compile import Mode
from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.null_type import NullType
from theano_dag.graph.op import COp, Op
from theano_dag.graph.rewriting import pre_constant_merge, pre_greedy_local_optimizer
from theano_dag.graph.toolbox import BadOptimization
from theano_dag.graph.type import Type
from theano_dag.opt.tensor_opt import constant_folding


class _Any(Type):
    def filter(self, data, strict=False, allow_downcast=None):
        return data

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))


class _Other(_Any):
    pass


class _F(Op):
    __props__ = ()

    def make_node(self, *xs):
        return Apply(self, list(xs), [_Any()()])

    def perform(self, node, inputs, out):
        out[0][0] = sum(inputs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_shared_variable_test_value_is_its_value(dtype):
    x = tt.matrix("x", dtype=dtype)
    x.tag.test_value = np.ones((2, 3), dtype=dtype)
    w = theano_dag.shared(np.arange(12, dtype=dtype).reshape(3, 4))
    with config.change_flags(compute_test_value="raise"):
        out = tt.dot(x, w)
    np.testing.assert_allclose(out.tag.test_value, np.ones((2, 3)) @ w.get_value())
    assert out.tag.test_value.dtype == dtype


def test_destroying_op_gets_a_copy_of_the_test_value():
    class Inplace(Op):
        __props__ = ()
        destroy_map = {0: [0]}

        def make_node(self, x):
            return Apply(self, [x], [x.type()])

        def perform(self, node, inputs, out):
            inputs[0][0] = -1
            out[0][0] = inputs[0]

    x = tt.dvector("x")
    x.tag.test_value = np.array([1.0, 2.0])
    with config.change_flags(compute_test_value="raise"):
        y = Inplace()(x)
    np.testing.assert_array_equal(x.tag.test_value, [1.0, 2.0])
    np.testing.assert_array_equal(y.tag.test_value, [-1.0, 2.0])


def test_scan_step_gets_test_values():
    k = tt.iscalar("k")
    a = tt.dvector("a")
    k.tag.test_value = 3
    a.tag.test_value = np.array([1.0, 2.0, 3.0])
    seen = {}

    def step(row, prior, a):
        seen["row"], seen["prior"], seen["a"] = (
            row.tag.test_value,
            prior.tag.test_value,
            a.tag.test_value,
        )
        return prior * a + row

    m = tt.dmatrix("m")
    m.tag.test_value = np.arange(6.0).reshape(2, 3)
    with config.change_flags(compute_test_value="raise"):
        result, _ = theano_dag.scan(
            step, sequences=m, outputs_info=tt.ones_like(a), non_sequences=a
        )
    np.testing.assert_array_equal(seen["row"], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(seen["prior"], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(seen["a"], [1.0, 2.0, 3.0])
    f = theano_dag.function([m, a], result)
    np.testing.assert_allclose(f(m.tag.test_value, a.tag.test_value), result.tag.test_value)


def test_replace_by_another_type_is_bad_optimization_and_type_error():
    x, y = _Any()("x"), _Other()("y")
    out = _F()(x)
    fg = FunctionGraph([x], [out], clone=False)
    with pytest.raises(BadOptimization, match="The type of the replacement must be the same"):
        fg.replace(out, y)
    with pytest.raises(TypeError):
        fg.replace(out, y)


def test_replace_checks_test_value_shapes():
    x = tt.dvector("x")
    x.tag.test_value = np.zeros(3)
    with config.change_flags(compute_test_value="raise"):
        a = x + 1
        b = tt.dvector("b")
        b.tag.test_value = np.zeros(4)
        fg = FunctionGraph([x, b], [a], clone=False)
        with pytest.raises(AssertionError, match=r"Original: \(3,\), new: \(4,\)"):
            fg.replace(a, b)


def test_importing_a_null_gradient_says_why():
    x = _Any()("x")
    fg = FunctionGraph([x], [_F()(x)], clone=False)
    with pytest.raises(TypeError, match="^Computation graph contains a NaN. no gradient here$"):
        fg.import_var(NullType("no gradient here")(), "test")


def test_itypes_may_be_tensor_constructors():
    class Double(Op):
        __props__ = ()
        itypes = [tt.dmatrix]
        otypes = [tt.dmatrix]

        def perform(self, node, inputs, out):
            out[0][0] = inputs[0] * 2

    x = tt.dmatrix("x")
    y = Double()(x)
    assert y.type == x.type
    v = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(theano_dag.function([x], y)(v), v * 2)


class _IncOneC(COp):
    __props__ = ()

    def make_node(self, x):
        x = scalar.as_scalar(x)
        return Apply(self, [x], [x.type()])

    def c_code(self, node, name, inputs, outputs, sub):
        return f"{outputs[0]} = {inputs[0]} + 1;"

    def c_code_cache_version(self):
        return (1,)


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_cop_on_scalars_gets_c_values(dtype):
    i = scalar.ScalarType(dtype)("i")
    # Scalar-typed (not tensor) inputs run on the reference engine; the C code is compiled
    # by the CPU engine's compiler all the same.
    f = theano_dag.function([i], _IncOneC()(i), mode=Mode(linker="py"))
    out = f(np.asarray(3, dtype=dtype))
    assert out == 4 and np.asarray(out).dtype == dtype


def test_cop_test_value_runs_its_c_code():
    i = scalar.int32("i")
    i.tag.test_value = 3
    with config.change_flags(compute_test_value="raise"):
        o = _IncOneC()(i)
    assert o.tag.test_value == 4


def test_cop_without_c_code_runs_its_perform():
    class PyOnly(COp):
        __props__ = ()

        def make_node(self, x):
            x = scalar.as_scalar(x)
            return Apply(self, [x], [x.type()])

        def perform(self, node, inputs, out):
            out[0][0] = inputs[0] + 1

    i = scalar.int32("i")
    o = PyOnly()(i)
    with pytest.raises(NotImplementedError):
        o.owner.op.c_code(o.owner, "o", ["x"], ["z"], {"fail": ""})
    storage = {i: [np.int32(3)], o: [None]}
    computed = {i: [True], o: [False]}
    thunk = o.owner.op.make_thunk(o.owner, storage, computed, no_recycling=[])
    thunk()
    assert storage[o][0] == 4 and computed[o][0]


def test_pre_constant_merge_keeps_the_first_constant_depth_first():
    x, y = _Any()("x"), _Any()("y")
    c1, c2 = Constant(_Any(), 1, "c1"), Constant(_Any(), 1, "c1")
    inner = _F()(c1, x)
    out = _F()(inner, y, c2)
    # The first input's graph is searched before the later inputs, as Theano recurses.
    assert pre_constant_merge(FunctionGraph([], []), out) == [out]
    assert out.owner.inputs[2] is c1


def test_constant_folding_passes_a_copy_of_the_cell_list():
    class Rebinds(Op):
        # Rebinds the cell instead of filling it: the output is left None, as in Theano.
        __props__ = ()

        def make_node(self, *xs):
            return Apply(self, list(xs), [_Any()()])

        def perform(self, node, inputs, out):
            out[0] = [sum(inputs)]

    c1, c2 = Constant(_Any(), 1), Constant(_Any(), 2)
    folded = pre_greedy_local_optimizer(
        FunctionGraph([], []), [constant_folding], Rebinds()(c1, c2)
    )
    assert folded.owner is None and folded.data is None
