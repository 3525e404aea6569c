"""Theano's shape rewrites and names (``theano.tensor.opt``): structure and values."""

import warnings

import numpy as np
import pytest
from engine_modes import ENGINES, rewritten_mode  # the engines, fast_run on each
from rewrite_helpers import count_calls

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.rewriting import TopoOptimizer, check_stack_trace, out2in
from theano_dag.opt.rewrites.utils import value_computed
from theano_dag.opt.tensor_opt import (
    ShapeFeature,
    local_add_specialize,
    local_add_specialize_float,
    local_canonicalize_alloc,
    local_dimshuffle_lift,
    local_greedy_distributor,
    local_merge_alloc,
    local_reshape_to_dimshuffle,
    local_useless_dimshuffle_in_reshape,
    mul_canonizer,
)
from theano_dag.tensor.basic import Join, Tile
from theano_dag.tensor.blas import Gemv, Ger
from theano_dag.tensor.blas_c import CGemv, CGer
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.shape import (
    EqualLengths,
    LengthMismatchError,
    MakeVector,
    Reshape,
    Shape_i,
    equal_lengths,
)
from theano_dag.tensor.type import (
    values_eq_approx_remove_inf,
    values_eq_approx_remove_inf_nan,
    values_eq_approx_remove_nan,
)

DTYPES = ["float32", "float64"]


def _run(inputs, outputs, values):
    f = theano_dag.function(inputs, outputs, mode="FAST_COMPILE")
    return f(*values)[0]


def _ops(fg):
    return [type(n.op) for n in fg.toposort()]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dimshuffle_lift_moves_below_elemwise_and_merges(dtype):
    x, y = tt.matrix("x", dtype=dtype), tt.matrix("y", dtype=dtype)
    out = tt.exp(x + y).T.T.dimshuffle("x", 1, 0)
    g = FunctionGraph([x, y], [out], clone=True)
    out2in(local_dimshuffle_lift).optimize(g)
    # every DimShuffle sits on an input; the elementwise ops sit above them
    for node in g.toposort():
        if isinstance(node.op, DimShuffle):
            assert node.inputs[0] in g.inputs
    assert _ops(g).count(DimShuffle) == 2
    rng = np.random.default_rng(0)
    vx, vy = rng.random((2, 3), dtype=dtype), rng.random((2, 3), dtype=dtype)
    got = _run(g.inputs, g.outputs, [vx, vy])
    np.testing.assert_allclose(got, np.exp(vx + vy).T[None], rtol=1e-6)


def test_dimshuffle_lift_removes_a_double_transpose():
    x = tt.dmatrix("x")
    g = FunctionGraph([x], [x.T.T])
    out2in(local_dimshuffle_lift).optimize(g)
    assert g.outputs[0] is g.inputs[0]


def test_dimshuffle_lift_keeps_a_shared_elemwise():
    # exp(x) is used twice: lifting would compute it twice
    x = tt.dmatrix("x")
    e = tt.exp(x)
    g = FunctionGraph([x], [e.T, e])
    out2in(local_dimshuffle_lift).optimize(g)
    assert sum(isinstance(n.op, Elemwise) for n in g.toposort()) == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_to_dimshuffle(dtype):
    x = tt.matrix("x", dtype=dtype)
    r = x.reshape((1, x.shape[0], 1, x.shape[1]))
    g = FunctionGraph([x], [r], clone=True)
    out2in(local_reshape_to_dimshuffle).optimize(g)
    top = g.outputs[0].owner
    assert isinstance(top.op, DimShuffle) and top.op.new_order == ("x", 0, "x", 1)
    assert isinstance(top.inputs[0].owner.op, Reshape) and top.inputs[0].ndim == 2
    v = np.arange(6, dtype=dtype).reshape(2, 3)
    np.testing.assert_array_equal(_run(g.inputs, g.outputs, [v]), v.reshape(1, 2, 1, 3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_useless_dimshuffle_in_reshape(dtype):
    v = tt.vector("v", dtype=dtype)
    r = v.dimshuffle("x", 0).reshape((v.shape[0],))
    g = FunctionGraph([v], [r], clone=True)
    out2in(local_useless_dimshuffle_in_reshape).optimize(g)
    assert DimShuffle not in _ops(g)
    np.testing.assert_array_equal(_run(g.inputs, g.outputs, [np.arange(3, dtype=dtype)]), [0, 1, 2])
    # a transpose under the reshape changes the order: kept
    m = tt.matrix("m", dtype=dtype)
    g = FunctionGraph([m], [m.T.reshape((m.size,))], clone=True)
    out2in(local_useless_dimshuffle_in_reshape).optimize(g)
    assert DimShuffle in _ops(g)


@pytest.mark.parametrize("dtype", DTYPES)
def test_merge_alloc(dtype):
    m = tt.scalar("m", dtype=dtype)
    x, y = tt.lscalar("x"), tt.lscalar("y")
    out = tt.alloc(tt.alloc(m, x, y), 2, x, y)
    g = FunctionGraph([m, x, y], [out], clone=True)
    out2in(local_merge_alloc).optimize(g)
    assert len(g.toposort()) == 1
    got = _run(g.inputs, g.outputs, [np.asarray(1.5, dtype=dtype), 3, 4])
    np.testing.assert_array_equal(got, np.full((2, 3, 4), 1.5, dtype=dtype))
    # the inner alloc fixes a length the outer one only repeats: merged, with its check
    out = tt.alloc(tt.alloc(m, 3), x)
    g = FunctionGraph([m, x], [out], clone=True)
    out2in(local_merge_alloc).optimize(g)
    assert sum(isinstance(n.op, tt.Alloc) for n in g.toposort()) == 1
    f = theano_dag.function(g.inputs, g.outputs, mode="FAST_COMPILE")
    np.testing.assert_array_equal(f(np.asarray(2.0, dtype=dtype), 3)[0], np.full(3, 2.0))
    with pytest.raises(AssertionError, match="lengths differ"):
        f(np.asarray(2.0, dtype=dtype), 4)
    # two constant lengths that differ: left alone (the inner alloc raises)
    out = tt.alloc(tt.alloc(m, 3), 4)
    g = FunctionGraph([m], [out], clone=True)
    out2in(local_merge_alloc).optimize(g)
    assert sum(isinstance(n.op, tt.Alloc) for n in g.toposort()) == 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_canonicalize_alloc(dtype):
    v = tt.vector("v", dtype=dtype)
    n = tt.lscalar("n")
    out = tt.alloc(v, 1, n, v.shape[0])
    g = FunctionGraph([v, n], [out], clone=True)
    out2in(local_canonicalize_alloc).optimize(g)
    top = g.outputs[0].owner
    assert isinstance(top.op, DimShuffle) and top.op.new_order == ("x", 0, 1)
    vals = np.arange(3, dtype=dtype)
    np.testing.assert_array_equal(_run(g.inputs, g.outputs, [vals, 2]), np.tile(vals, (1, 2, 1)))


def test_add_specialize():
    a = tt.vector("a")
    s = tt.add(tt.zeros_like(a))
    assert local_add_specialize.transform(None, s.owner)[0].type == s.type
    x, i = tt.dvector("x"), tt.ivector("i")
    s = tt.add(i, tt.zeros_like(i), 0)
    (new,) = local_add_specialize.transform(None, s.owner)
    assert new is i
    # Beside a float term a +0 goes in local_add_specialize_float (nonfinite_unsafe: the
    # sign of a zero), a -0.0 here (x + -0.0 is x, -0.0 included).
    s = tt.add(x, tt.zeros_like(x), 0)
    assert not local_add_specialize.transform(None, s.owner)
    (new,) = local_add_specialize_float.transform(None, s.owner)
    assert new is x
    s = tt.add(x, tt.constant(-0.0))
    (new,) = local_add_specialize.transform(None, s.owner)
    assert new is x and not local_add_specialize_float.transform(None, s.owner)
    c = tt.constant(0, dtype="int64") + tt.constant(1, dtype="int32")
    (new,) = local_add_specialize.transform(None, c.owner)
    assert new.type == c.type and int(new.eval()) == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_greedy_distributor(dtype):
    a, b, x, z = (tt.matrix(n, dtype=dtype) for n in "abxz")
    e = (a / z + b / x) * x * z
    g = FunctionGraph([a, b, x, z], [e], clone=True)
    mul_canonizer.optimize(g)
    TopoOptimizer(local_greedy_distributor, order="out_to_in").optimize(g)
    # a*x + b*z: no division left
    names = [n.op.scalar_op.name for n in g.toposort() if isinstance(n.op, Elemwise)]
    assert sorted(names) == ["add", "mul", "mul"]
    rng = np.random.default_rng(1)
    vals = [rng.random((2, 2), dtype=dtype) + 0.5 for _ in range(4)]
    va, vb, vx, vz = vals
    got = _run(g.inputs, g.outputs, vals)
    np.testing.assert_allclose(got, va * vx + vb * vz, rtol=1e-5)


def test_greedy_distributor_leaves_what_does_not_cancel():
    a, b, x = tt.dmatrices("a", "b", "x")
    e = (a + b) * x
    g = FunctionGraph([a, b, x], [e], clone=True)
    TopoOptimizer(local_greedy_distributor).optimize(g)
    assert [n.op.scalar_op.name for n in g.toposort()] == ["add", "mul"]


def test_check_stack_trace():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.exp(x) * 2)
    assert check_stack_trace(f, ops_to_check="all")
    assert check_stack_trace(f, ops_to_check=Elemwise)
    assert check_stack_trace(f.maker.fgraph, ops_to_check="last")
    g = FunctionGraph([x], [tt.exp(x)], clone=True)
    g.outputs[0].tag.trace = []
    assert not check_stack_trace(g)
    with pytest.raises(Exception, match="not in the graph"):
        check_stack_trace(f, ops_to_check=Reshape)
    assert check_stack_trace(f, ops_to_check=Reshape, bug_print="ignore")
    with pytest.raises(ValueError, match="not 'last' or 'all'"):
        check_stack_trace(f, ops_to_check="some")


def test_values_eq_approx_variants():
    a = np.array([1.0, np.nan, np.inf])
    b = np.array([1.0, 2.0, 3.0])
    assert not values_eq_approx_remove_nan(a, b)
    assert not values_eq_approx_remove_inf(a, b)
    assert values_eq_approx_remove_inf_nan(a, b)
    assert values_eq_approx_remove_nan(a[:2], b[:2])


def test_blas_c_names_are_the_blas_ops():
    assert CGemv is Gemv and CGer is Ger
    assert theano_dag.pprint is theano_dag.printing.pprint


@pytest.mark.parametrize("dtype", DTYPES)
def test_infer_shape_rewrite_needs_no_value(dtype):
    x = tt.matrix("x", dtype=dtype)
    y = tt.exp(x).T[1:]
    f = theano_dag.function([x], y.shape)
    nodes = f.maker.fgraph.toposort()
    # only the input's shape is read: no exp, no transpose
    assert not any("exp" in str(n.op) or isinstance(n.op, DimShuffle) for n in nodes)
    assert list(f(np.zeros((3, 5), dtype=dtype))) == [4, 3]
    g = theano_dag.function(
        [x], y.shape, mode=theano_dag.compile.get_default_mode().excluding("ShapeOpt")
    )
    assert any("exp" in str(n.op) for n in g.maker.fgraph.toposort())


def test_infer_shape_rewrite_declines_without_infer_shape():
    from theano_dag.graph.basic import Apply
    from theano_dag.graph.op import Op

    class NoShape(Op):
        __props__ = ()

        def make_node(self, x):
            return Apply(self, [x], [x.type()])

        def perform(self, node, inputs, out, params=None):
            out[0][0] = inputs[0] * 2

    x = tt.dvector("x")
    f = theano_dag.function([x], NoShape()(x).shape)
    assert any(isinstance(n.op, NoShape) for n in f.maker.fgraph.toposort())
    assert list(f(np.zeros(4))) == [4]


class _CountedShift(theano_dag.graph.op.Op):
    """``x + 1`` with an ``infer_shape`` that counts its calls."""

    __props__ = ()
    calls = 0

    def make_node(self, x):
        return theano_dag.graph.basic.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out, params=None):
        out[0][0] = inputs[0] + 1

    def infer_shape(self, fgraph, node, shapes):
        type(self).calls += 1
        return [shapes[0]]


def test_the_shapes_of_a_deep_chain_are_inferred_once_per_layer():
    # Every layer's shape asked: each is inferred from the layer below, which was
    # inferred before; making and rewriting the lower layers' Shape_i again for each
    # layer above was quadratic in the depth (a network's compile: 10x slower).
    x = tt.dmatrix("x")
    layers = [x]
    for _ in range(40):
        layers.append(_CountedShift()(layers[-1]))
    _CountedShift.calls = 0
    f = theano_dag.function([x], [v.shape for v in layers[1:]])
    assert _CountedShift.calls <= 2 * 40
    assert not any(isinstance(n.op, _CountedShift) for n in f.maker.fgraph.apply_nodes)
    assert [tuple(s) for s in f(np.zeros((3, 5)))] == [(3, 5)] * 40


class _CountedCheckedAdd(theano_dag.graph.op.Op):
    """``x + y`` of two vectors, whose ``infer_shape`` checks their lengths (an
    ``EqualLengths``, as an elementwise op's) and counts its calls."""

    __props__ = ()
    calls = 0

    def make_node(self, x, y):
        return theano_dag.graph.basic.Apply(self, [x, y], [x.type()])

    def perform(self, node, inputs, out, params=None):
        out[0][0] = inputs[0] + inputs[1]

    def infer_shape(self, fgraph, node, shapes):
        type(self).calls += 1
        return [
            (equal_lengths([shapes[0][0], shapes[1][0]], "checked add", ["x", "y"].__getitem__),)
        ]


def test_the_checked_shapes_of_a_deep_chain_are_inferred_once_per_layer():
    # Each layer's length is its input's behind a check (a residual network's channels
    # are so): the check may not be taken into the next layer's (it names another op),
    # but the Shape_i made for it again is given the length inferred before. It was
    # inferred again through every layer below: with constant weights, ResNet-50's
    # canonicalize stopped at 4,000 rewrites (an OptimizationWarning), unfinished.
    x, y = tt.dvector("x"), tt.dvector("y")
    layers = [x]
    for _ in range(40):
        layers.append(_CountedCheckedAdd()(layers[-1], y))
    _CountedCheckedAdd.calls = 0
    f = theano_dag.function([x, y], [v.shape for v in layers[1:]])
    assert _CountedCheckedAdd.calls <= 2 * 40
    assert not any(isinstance(n.op, _CountedCheckedAdd) for n in f.maker.fgraph.apply_nodes)
    assert [tuple(s) for s in f(np.zeros(3), np.ones(3))] == [(3,)] * 40
    with pytest.raises(LengthMismatchError, match=r"checked add: .*\(x: 3, y: 4\)"):
        f(np.zeros(3), np.ones(4))


def test_a_deep_network_that_computes_its_layers_checks_none_of_their_shapes():
    # The mean's count is the last layer's lengths, inferred through every layer. The
    # function computes each layer, whose op checks its lengths then: their shapes need
    # no check of their own. The search for an output stopped after 64 values, so the
    # layers more than a few below the last counted as not computed: 68 checks were left
    # in the graph (run at every call), and its canonicalize stopped unfinished.
    x, w = tt.tensor4("x"), tt.tensor4("w")
    h = x
    for _ in range(30):
        h = tt.nnet.relu(tt.nnet.conv2d(h, w, border_mode=(1, 1)) + h)
    f = theano_dag.function([x, w], h.mean())
    ops = [n.op for n in f.maker.fgraph.apply_nodes]
    assert not any(isinstance(op, EqualLengths) for op in ops)
    assert sum(isinstance(op, Shape_i) for op in ops) <= 6
    rng = np.random.default_rng(0)
    xv, wv = rng.normal(size=(2, 3, 5, 5)), rng.normal(size=(3, 3, 3, 3)) / 9
    reference = theano_dag.function([x, w], h.mean(), mode=Mode(linker="py", optimizer=None))
    np.testing.assert_allclose(f(xv, wv), reference(xv, wv), rtol=1e-12)
    with pytest.raises(ValueError):  # the convolution's own check of the channels
        f(xv, rng.normal(size=(3, 2, 3, 3)))


def _residual_chain(blocks):
    x, w = tt.tensor4("x"), tt.tensor4("w")
    h = x
    for _ in range(blocks):
        h = tt.nnet.relu(tt.nnet.conv2d(h, w, border_mode=(1, 1)) + h)
    return [x, w], h


def test_the_shape_alone_of_a_residual_chain_is_compiled_in_linear_work():
    # Only the shape is asked, so the checks of lengths stay in the graph. Each block's
    # check of its spatial lengths reads the one below, which its convolution's output
    # length reads too: the check below stays. local_useless_equal_lengths took its
    # lengths into the block's check all the same, so block k checked every length
    # below it again, and was rewritten again whenever a check below it was: 4.7x the
    # work for 2x the blocks, 58 s to compile 48 blocks. A check read elsewhere now
    # stays as it is.
    work = {}
    for blocks in (8, 16):
        inputs, h = _residual_chain(blocks)
        work[blocks] = count_calls(theano_dag.function, inputs, h.shape)
    assert work[16] < 3 * work[8], work
    inputs, h = _residual_chain(16)
    f = theano_dag.function(inputs, h.shape)
    checks = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, EqualLengths)]
    assert checks and max(len(n.inputs) for n in checks) <= 3  # 18 before
    assert tuple(f(np.zeros((2, 3, 5, 5)), np.zeros((3, 3, 3, 3)))) == (2, 3, 5, 5)
    with pytest.raises(ValueError):  # the channels' check, in the shape's graph
        f(np.zeros((2, 3, 5, 5)), np.zeros((3, 2, 3, 3)))
    with pytest.raises(ValueError):  # the spatial lengths' (filters of 5: 3 shorter)
        f(np.zeros((2, 3, 5, 5)), np.zeros((3, 3, 5, 5)))


class _SelfShaped(theano_dag.graph.op.Op):
    """``x + 1`` whose ``infer_shape`` gives its output's own length, over a length of
    its input (as an op that cannot tell better may)."""

    __props__ = ()

    def make_node(self, x):
        return theano_dag.graph.basic.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out, params=None):
        out[0][0] = inputs[0] + 1

    def infer_shape(self, fgraph, node, shapes):
        return [(tt.maximum(node.outputs[0].shape[0], shapes[0][0]),)]


def test_a_shape_given_by_the_output_itself_is_left_to_the_value():
    x = tt.dvector("x")
    y = _SelfShaped()(tt.exp(x))
    f = theano_dag.function([x], [y.shape[0] * 2])
    # the length read from the value: infer_shape's, made of it, is not taken
    (read,) = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Shape_i)]
    assert isinstance(read.inputs[0].owner.op, _SelfShaped)
    assert int(f(np.zeros(3))[0]) == 6


def test_clinker_is_the_cpu_engine():
    from theano_dag.engines.theano_linkers import CLinker

    assert CLinker is CPULinker
    x = tt.dmatrix("x")
    f = CLinker().accept(FunctionGraph([x], [tt.exp(x)])).make_function()
    np.testing.assert_allclose(f(np.zeros((2, 2))), np.ones((2, 2)))


def test_shape_feature_same_shape():
    x, y = tt.dvector("x"), tt.dvector("y")
    o = tt.exp(x) + y
    g = FunctionGraph([x, y], [o], clone=False)
    feature = ShapeFeature()
    g.attach_feature(feature)
    assert feature.same_shape(x, o) and feature.same_shape(x, o, 0, 0)
    # The sum's length is checked equal to both x's and y's (the graph raises if not).
    assert feature.same_shape(y, o)
    assert not feature.same_shape(x, tt.dvector("z"))
    assert len(feature.shape_of[o]) == 1
    m = tt.dmatrix("m")
    g = FunctionGraph([m], [m.T], clone=False)
    feature = ShapeFeature()
    g.attach_feature(feature)
    assert feature.same_shape(m, g.outputs[0], 0, 1) and not feature.same_shape(m, g.outputs[0])


def test_shape_feature_takes_a_length_known_only_from_the_value():
    # Nonzero infers (ndim, None): the count of nonzeros is known when it runs
    m = tt.dmatrix("m")
    out = tt.nonzero(m, return_matrix=True)
    g = FunctionGraph([m], [out], clone=False)
    feature = ShapeFeature()
    g.attach_feature(feature)
    rows, count = feature.shape_of[out]
    assert isinstance(count.owner.op, Shape_i) and count.owner.inputs[0] is out
    f = theano_dag.function([m], [rows, count])
    assert [int(v) for v in f(np.eye(3))] == [2, 3]


def test_make_vector_of_ints_has_float_gradients_and_checks_dtypes():
    from theano_dag.tensor.shape import LossyInputError, MakeVector

    b, d = tt.bscalar("b"), tt.dscalar("d")
    mv = MakeVector("float64")(b, d)
    gb, gd = theano_dag.grad(mv.sum(), [b, d])
    f = theano_dag.function([b, d], [gb, gd], on_unused_input="ignore")
    assert gb.dtype == "float64" and [float(v) for v in f(2, 0.5)] == [0.0, 1.0]
    with pytest.raises(TypeError, match="without loss"):
        MakeVector("int8")(b, tt.iscalar())
    assert issubclass(LossyInputError, AssertionError)  # Theano's class for it


def test_a_bool_make_vector_passes_no_gradient_and_grad_does_not_warn():
    # PyMC3's bounds checks build bool vectors of comparisons of its free variables; each
    # logp gradient warned of an undeclared disconnected gradient until MakeVector said
    # that a discrete vector is not connected to its inputs.
    x, y = tt.dscalar("x"), tt.dscalar("y")
    b = MakeVector("bool")(x > 0, y > 0)
    assert b.owner.op.connection_pattern(b.owner) == [[False], [False]]
    cost = tt.switch(b.all(), x * y, -1.0) + tt.cast(b, "float64").sum() * x
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gx, gy = theano_dag.grad(cost, [x, y])
    f = theano_dag.function([x, y], [gx, gy])
    assert [float(v) for v in f(2.0, 3.0)] == [5.0, 2.0]
    assert [float(v) for v in f(-2.0, 3.0)] == [1.0, 0.0]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_join_of_one_tensor_and_a_tile_by_ones_copy_nothing(engine, dtype):
    # local_join_1: stack([a]) and Join of one tensor are that tensor; local_useless_tile:
    # tile(x, (1, 1)) is x. A join of two, or a tile by 2, stays.
    a = tt.vector("a", dtype=dtype)
    m = tt.matrix("m", dtype=dtype)
    av = np.array([1.5, -2.0, 3.0], dtype=dtype)
    mv = np.arange(6, dtype=dtype).reshape(2, 3)
    mode = rewritten_mode(engine)
    for ins, out, want in [
        ([a], tt.stack([a]), av[None]),
        ([m], Join(1)(m), mv),
        ([m], Tile((1, 1))(m), mv),
        ([m], tt.tile(m, (1, 1)), mv),
    ]:
        f = theano_dag.function(ins, out, mode=mode)
        assert not any(isinstance(n.op, (Join, Tile)) for n in f.maker.fgraph.apply_nodes)
        got = f(*[av if i is a else mv for i in ins])
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)
    for out, want in [
        (Join(1)(m, m), np.concatenate([mv, mv], 1)),
        (Tile((2, 1))(m), np.tile(mv, (2, 1))),
    ]:
        f = theano_dag.function([m], out, mode=mode)
        assert any(isinstance(n.op, (Join, Tile)) for n in f.maker.fgraph.apply_nodes)
        np.testing.assert_array_equal(f(mv), want)


def _reshape_chain(levels):
    x = tt.dmatrix("x")
    h = x
    for _ in range(levels):
        h = tt.reshape(tt.flatten(h), h.shape) + 1
    return x, h


def test_the_shape_alone_of_a_reshape_chain_is_compiled_in_near_linear_work():
    # Where only a shape is asked, the rewrites ask value_computed about each value of
    # the chain again and again, and each search visited every value above it: 3x the
    # work for 2x the levels. Its answers are kept until the graph changes now.
    work = {}
    with config.change_flags(function_cache=False):
        for levels in (16, 32):
            x, h = _reshape_chain(levels)
            work[levels] = count_calls(theano_dag.function, [x], h.shape)
        x, h = _reshape_chain(32)
        f = theano_dag.function([x], h.shape)
    assert work[32] < 2.5 * work[16], work
    assert tuple(f(np.zeros((3, 4)))) == (3, 4)


def test_value_computed_answers_again_after_the_graph_changes():
    x = tt.dvector("x")
    y = tt.exp(x)
    z = y * 2
    fg = FunctionGraph([x], [z.shape[0], x], clone=False)
    assert not value_computed(fg, y) and not value_computed(fg, z)
    fg.change_input("output", 1, z)  # now its value is an output, and y's is computed
    assert value_computed(fg, z) and value_computed(fg, y)
    fg.change_input("output", 1, x)  # and no more
    assert not value_computed(fg, y) and not value_computed(fg, z)
    assert value_computed(fg, x)
