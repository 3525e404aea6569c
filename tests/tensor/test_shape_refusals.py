"""An op's shape computed without its value raises where the value raises: for each
case, values that the op refuses (its perform raises) make ``f(out.shape)`` raise too, and
values it takes give the value's shape. The cases are the ops whose perform checks a
relation between its inputs' lengths, or its indices against them; ``HOLES`` lists those
whose shape still returns a length (each with the reason), strict xfails that fail once
fixed."""

import numpy as np
import pytest
from engine_modes import ENGINES, rewritten_mode  # the engines, fast_run on each

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode, get_mode
from theano_dag.engines.cpu.native import ckernel
from theano_dag.tensor import linalg as la
from theano_dag.tensor import nnet
from theano_dag.tensor.basic import Repeat
from theano_dag.tensor.nnet.abstract_conv import (
    AbstractConv2d_gradInputs,
    AbstractConv2d_gradWeights,
)
from theano_dag.tensor.nnet.nnet import (
    CrossentropySoftmax1HotWithBiasDx,
    SoftmaxGrad,
    SoftmaxWithBias,
)
from theano_dag.tensor.shape import EqualLengths, LengthMismatchError

v, w, u = tt.dvector("v"), tt.dvector("w"), tt.dvector("u")
m, n = tt.dmatrix("m"), tt.dmatrix("n")
t, s = tt.dtensor3("t"), tt.dtensor3("s")
i, j = tt.lvector("i"), tt.lvector("j")
k = tt.lscalar("k")
t4, f4 = tt.dtensor4("t4"), tt.dtensor4("f4")
t5, f5, u6 = tt.dtensor5("t5"), tt.dtensor5("f5"), tt.dtensor6("u6")
ones = np.ones

# name -> (inputs, output, values the op refuses, values it takes)
CASES = {
    "adv_read_arrays": (
        [m, i, j],
        lambda: m[i, j],
        [ones((4, 5)), [0, 1], [1, 2, 3]],
        [ones((4, 5)), [1], [1, 2, 3]],
    ),
    "adv_read_mask": (
        [m, v],
        lambda: m[tt.gt(v, 0)],
        [ones((2, 3)), ones(3)],
        [ones((2, 3)), [1.0, -1.0]],
    ),
    "adv_inc": (
        [m, v, i, j],
        lambda: tt.inc_subtensor(m[i, j], v),
        [ones((4, 5)), ones(3), [0, 1], [1, 2]],
        [ones((4, 5)), ones(1), [0, 1], [1, 2]],
    ),
    "adv_set_arrays": (
        [m, i, j],
        lambda: tt.set_subtensor(m[i, j], 0.0),
        [ones((4, 5)), [0, 1], [1, 2, 3]],
        [ones((4, 5)), [0, 1, 2], [1]],
    ),
    "adv_inc1": (
        [m, n, i],
        lambda: tt.inc_subtensor(m[i], n),
        [ones((4, 5)), ones((3, 5)), [0, 1]],
        [ones((4, 5)), ones((2, 1)), [0, 1]],
    ),
    "split_sum": ([v, i], lambda: tt.split(v, i, 2)[0], [ones(5), [2, 2]], [ones(5), [2, 3]]),
    "split_count": ([v, i], lambda: tt.split(v, i, 2)[1], [ones(5), [2, 2, 1]], [ones(5), [4, 1]]),
    "split_negative": ([v, i], lambda: tt.split(v, i, 2)[1], [ones(5), [-1, 6]], [ones(5), [0, 5]]),
    "split_symbolic_axis": (
        [m, i, k],
        lambda: tt.split(m, i, 2, axis=k)[0],
        [ones((5, 2)), [2, 3], 1],
        [ones((5, 2)), [2, 3], -2],
    ),
    "repeat_counts": ([v, i], lambda: Repeat(0)(v, i), [ones(3), [1, 2]], [ones(3), [2]]),
    "repeat_flat": (
        [m, i],
        lambda: Repeat(None)(m, i),
        [ones((2, 3)), [1, 2]],
        [ones((2, 3)), [1, 2, 0, 1, 1, 3]],
    ),
    "batched_dot_batch": (
        [t, s],
        lambda: tt.batched_dot(t, s),
        [ones((2, 3, 4)), ones((3, 4, 5))],
        [ones((2, 3, 4)), ones((2, 4, 5))],
    ),
    "batched_dot_inner": (
        [m, n],
        lambda: tt.batched_dot(m, n),
        [ones((2, 3)), ones((2, 4))],
        [ones((2, 3)), ones((2, 3))],
    ),
    "tensordot": (
        [t, m],
        lambda: tt.tensordot(t, m, axes=[[2], [0]]),
        [ones((2, 3, 4)), ones((5, 6))],
        [ones((2, 3, 4)), ones((4, 6))],
    ),
    "batched_tensordot": (
        [t, s],
        lambda: tt.batched_tensordot(t, s, axes=[[2], [1]]),
        [ones((2, 3, 4)), ones((2, 5, 6))],
        [ones((2, 3, 4)), ones((2, 4, 6))],
    ),
    "specify_shape": ([m], lambda: tt.specify_shape(m, (None, 3)), [ones((2, 4))], [ones((2, 3))]),
    "specify_shape_symbolic": (
        [v, k],
        lambda: tt.specify_shape(v, (k,)),
        [ones(3), 4],
        [ones(3), -1],
    ),
    "solve_rows": (
        [m, n],
        lambda: la.solve(m, n),
        [np.eye(3), ones((4, 2))],
        [np.eye(3), ones((3, 2))],
    ),
    "solve_square": ([m, v], lambda: la.solve(m, v), [ones((3, 4)), ones(3)], [np.eye(3), ones(3)]),
    "solve_triangular": (
        [m, n],
        lambda: la.solve_triangular(m, n, lower=True),
        [np.eye(3), ones((4, 2))],
        [np.eye(3), ones((3, 2))],
    ),
    "inverse": ([m], lambda: la.matrix_inverse(m), [ones((3, 4))], [np.eye(3)]),
    "cholesky": ([m], lambda: la.cholesky(m), [ones((3, 4))], [np.eye(3)]),
    "eigh": ([m], lambda: la.eigh(m)[1], [ones((3, 4))], [np.eye(3)]),
    "expm": ([m], lambda: la.expm(m), [ones((2, 3))], [np.eye(2)]),
    "generalized_eigh": (
        [m, n],
        lambda: la.generalized_eigh(m, n)[0],
        [np.eye(3), np.eye(2)],
        [np.eye(3), np.eye(3)],
    ),
    "xent_1hot": (
        [m, i],
        lambda: nnet.crossentropy_categorical_1hot(m, i),
        [ones((2, 3)) / 3, [0, 1, 2]],
        [ones((2, 3)) / 3, [0, 1]],
    ),
    "xent_softmax_bias": (
        [m, v, i],
        lambda: nnet.crossentropy_softmax_1hot_with_bias(m, v, i)[0],
        [ones((2, 3)), ones(4), [0, 1]],
        [ones((2, 3)), ones(3), [0, 1]],
    ),
    "xent_softmax_rows": (
        [m, v, i],
        lambda: nnet.crossentropy_softmax_1hot_with_bias(m, v, i)[1],
        [ones((2, 3)), ones(3), [0, 1, 1]],
        [ones((2, 3)), ones(3), [0, 1]],
    ),
    "xent_dx": (
        [v, m, i],
        lambda: CrossentropySoftmax1HotWithBiasDx()(v, m, i),
        [ones(3), ones((2, 3)), [0, 1]],
        [ones(2), ones((2, 3)) / 3, [0, 1]],
    ),
    "softmax_grad": (
        [m, n],
        lambda: SoftmaxGrad(-1)(m, n),
        [ones((2, 3)), ones((2, 4))],
        [ones((2, 3)), ones((2, 3))],
    ),
    "softmax_with_bias": (
        [m, v],
        lambda: SoftmaxWithBias()(m, v),
        [ones((2, 3)), ones(4)],
        [ones((2, 3)), ones(3)],
    ),
    # already checked before this audit (guards against a regression)
    "switch_3": (
        [v, w, u],
        lambda: tt.switch(tt.gt(v, 0), w, u),
        [ones(3), ones(3), ones(4)],
        [ones(3), ones(3), ones(3)],
    ),
    "elemwise_3": (
        [v, w, u],
        lambda: v * w + u,
        [ones(3), ones(3), ones(4)],
        [ones(3), ones(3), ones(3)],
    ),
    "stack": ([v, w], lambda: tt.stack([v, w], axis=1), [ones(3), ones(4)], [ones(3), ones(3)]),
    "concatenate": (
        [m, n],
        lambda: tt.concatenate([m, n], axis=1),
        [ones((2, 3)), ones((4, 3))],
        [ones((2, 3)), ones((2, 5))],
    ),
    "batch_normalization": (
        [m, v, w, u],
        lambda: nnet.batch_normalization(m, v, w, u, u),
        [ones((2, 3)), ones(4), ones(3), ones(3)],
        [ones((2, 3)), ones(3), ones(3), ones(3)],
    ),
    "choose": (
        [i, m],
        lambda: tt.choose(i, m),
        [[0, 1, 0], ones((2, 4))],
        [[0, 1, 0], ones((2, 3))],
    ),
    "ravel_multi_index": (
        [i, j],
        lambda: tt.ravel_multi_index((i, j), (3, 4)),
        [[0, 1], [1, 2, 3]],
        [[0, 1], [1, 2]],
    ),
    "broadcast_to": ([v, k], lambda: tt.broadcast_to(v, (2, k)), [ones(3), 4], [ones(3), 3]),
    "broadcast_to_spread": ([v, k], lambda: tt.broadcast_to(v, (2, k)), [ones(0), 4], [ones(1), 4]),
    "choose_empty": (  # a length 0 with a 1 is 0 (the largest was taken: 1)
        [i, m],
        lambda: tt.choose(i, m),
        [[0, 1, 0], ones((2, 2))],
        [np.zeros(0, dtype="int64"), ones((2, 1))],
    ),
    "tensorsolve": (
        [m, v],
        lambda: la.tensorsolve(m, v),
        [np.eye(3), ones(4)],
        [np.eye(3), ones(3)],
    ),
    "tensorsolve_sizes": (  # numpy compares the sizes only: (2, 3) equations for b (3, 2)
        [t, m],
        lambda: la.tensorsolve(t, m),
        [np.eye(6).reshape(2, 3, 6), ones((2, 2))],
        [np.eye(6).reshape(2, 3, 6), ones((3, 2))],
    ),
    "reshape_size": ([v, k], lambda: tt.reshape(v, (k, 2)), [ones(5), 2], [ones(6), 3]),
    "reshape_minus1": ([v, k], lambda: tt.reshape(v, (k, -1)), [ones(5), 2], [ones(6), 3]),
    # convolutions: the channels, filters larger than the image, the gradients' checks
    "conv2d_channels": (
        [t4, f4],
        lambda: nnet.conv2d(t4, f4),
        [ones((1, 2, 5, 5)), ones((3, 3, 2, 2))],
        [ones((1, 2, 5, 5)), ones((3, 2, 2, 2))],
    ),
    "conv2d_filter_larger": (
        [t4, f4],
        lambda: nnet.conv2d(t4, f4),
        [ones((1, 2, 5, 5)), ones((3, 2, 6, 6))],
        [ones((1, 2, 5, 5)), ones((3, 2, 5, 5))],
    ),
    "conv2d_filter_larger_dilated": (  # rows padded to 7 take 6; columns 5 take 3 dilated
        [t4, f4],
        lambda: nnet.conv2d(t4, f4, border_mode=(1, 0), filter_dilation=(1, 2)),
        [ones((1, 2, 5, 5)), ones((3, 2, 6, 4))],
        [ones((1, 2, 5, 5)), ones((3, 2, 6, 3))],
    ),
    "conv3d_filter_larger": (
        [t5, f5],
        lambda: nnet.conv3d(t5, f5),
        [ones((1, 1, 3, 4, 4)), ones((1, 1, 2, 5, 2))],
        [ones((1, 1, 3, 4, 4)), ones((1, 1, 2, 4, 2))],
    ),
    "conv_grad_weights_batch": (
        [t4, f4],
        lambda: AbstractConv2d_gradWeights()(t4, f4, (2, 2)),
        [ones((2, 1, 5, 5)), ones((3, 4, 4, 4))],
        [ones((2, 1, 5, 5)), ones((2, 4, 4, 4))],
    ),
    "conv_grad_weights_spatial": (
        [t4, f4],
        lambda: AbstractConv2d_gradWeights(subsample=(2, 1))(t4, f4, (2, 2)),
        [ones((2, 1, 5, 5)), ones((2, 4, 4, 4))],
        [ones((2, 1, 5, 5)), ones((2, 4, 2, 4))],
    ),
    "conv_grad_weights_larger": (
        [t4, f4, i],
        lambda: AbstractConv2d_gradWeights()(t4, f4, i),
        [ones((2, 1, 5, 5)), ones((2, 4, 0, 4)), [6, 2]],
        [ones((2, 1, 5, 5)), ones((2, 4, 1, 4)), [5, 2]],
    ),
    "conv_grad_inputs_filters": (
        [t4, f4],
        lambda: AbstractConv2d_gradInputs()(t4, f4, (5, 5)),
        [ones((3, 1, 2, 2)), ones((2, 4, 4, 4))],
        [ones((4, 1, 2, 2)), ones((2, 4, 4, 4))],
    ),
    "conv_grad_inputs_spatial": (
        [t4, f4, i],
        lambda: AbstractConv2d_gradInputs(border_mode="half")(t4, f4, i),
        [ones((4, 1, 3, 3)), ones((2, 4, 4, 4)), [5, 4]],
        [ones((4, 1, 3, 3)), ones((2, 4, 4, 4)), [4, 4]],
    ),
    "conv_grad_inputs_unshared_grid": (
        [u6, f4],
        lambda: AbstractConv2d_gradInputs(unshared=True)(u6, f4, (5, 5)),
        [ones((4, 3, 4, 1, 2, 2)), ones((2, 4, 4, 4))],
        [ones((4, 4, 4, 1, 2, 2)), ones((2, 4, 4, 4))],
    ),
    "dot_vectors": ([v, w], lambda: tt.dot(v, w), [ones(3), ones(4)], [ones(3), ones(3)]),
    "sum_of_product": (
        [m, n],
        lambda: (m * n).sum(axis=1),
        [ones((2, 3)), ones((2, 4))],
        [ones((2, 3)), ones((2, 3))],
    ),
    # a check that no length of the result carries: a 0-d result's, a dropped length's
    "sum_all_of_product": (
        [m, n],
        lambda: (m * n).sum(),
        [ones((2, 3)), ones((3, 3))],
        [ones((2, 3)), ones((2, 3))],
    ),
    "dot_plus_one": ([v, w], lambda: tt.dot(v, w) + 1, [ones(3), ones(4)], [ones(3), ones(3)]),
    "row_of_product": (
        [m, n],
        lambda: (m * n)[0],
        [ones((2, 3)), ones((3, 3))],
        [ones((2, 3)), ones((2, 3))],
    ),
    "sum_of_sum": (
        [t, s],
        lambda: (t + s).sum(axis=2).sum(axis=0),
        [ones((2, 3, 4)), ones((2, 3, 5))],
        [ones((2, 3, 4)), ones((2, 3, 4))],
    ),
    "take_out_of_range": (
        [m, i],
        lambda: tt.take(m, i, axis=1),
        [ones((2, 3)), [0, 5]],
        [ones((2, 3)), [0, 2]],
    ),
    "index_out_of_range": ([v, i], lambda: v[i], [ones(3), [5]], [ones(3), [2]]),
    "index_below_range": ([m, i], lambda: m[i], [ones((2, 3)), [0, -3]], [ones((2, 3)), [-2, 1]]),
    "arrays_out_of_range": (
        [m, i, j],
        lambda: m[i, j],
        [ones((4, 5)), [0, 1], [1, 5]],
        [ones((4, 5)), [0, 3], [1, -5]],
    ),
    "scalar_out_of_range": ([v, k], lambda: v[k], [ones(3), 3], [ones(3), -3]),
    "row_out_of_range": ([m, k], lambda: m[k, 1:], [ones((2, 3)), -3], [ones((2, 3)), 1]),
    "take_then_sum": (
        [m, i],
        lambda: tt.take(m, i, axis=1).sum(axis=1),
        [ones((2, 3)), [0, 3]],
        [ones((2, 3)), [0, 2]],
    ),
}

HOLES: dict = {}  # name -> the reason its shape still returns a length (none left)


SHAPE_MODES = {
    "py": lambda: Mode(linker="py"),
    "FAST_RUN": lambda: get_mode("FAST_RUN"),
    "FAST_COMPILE": lambda: get_mode("FAST_COMPILE"),
    "dask": lambda: Mode(linker="dask"),
}


def _params():
    for name in CASES:
        marks = [pytest.mark.xfail(reason=HOLES[name], strict=True)] if name in HOLES else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("mode", SHAPE_MODES)
@pytest.mark.parametrize("name", _params())
def test_a_shape_raises_where_the_value_raises(name, mode):
    if mode == "dask":
        pytest.importorskip("dask")
    ins, build, bad, good = CASES[name]
    out = build()
    value = theano_dag.function(ins, out, mode=Mode(linker="py"), on_unused_input="ignore")
    want = np.shape(value(*good))
    with pytest.raises((ValueError, IndexError, AssertionError, np.linalg.LinAlgError)):
        value(*bad)
    with ckernel.compile_mode("sync"):
        f = theano_dag.function(ins, out.shape, mode=SHAPE_MODES[mode](), on_unused_input="ignore")
        assert tuple(f(*good)) == want
        with pytest.raises((ValueError, IndexError, AssertionError)):
            f(*bad)


def _checks(f):
    return [nd for nd in f.maker.fgraph.toposort() if isinstance(nd.op, EqualLengths)]


# name -> (inputs, output, checks left: 0 where the lengths are known to agree)
KNOWN = {
    "reshape_flat": ([m], lambda: tt.reshape(m, (m.shape[0] * m.shape[1],)), 0),
    "reshape_minus1": ([m], lambda: tt.reshape(m, (-1,)), 0),
    "flatten": ([t], lambda: tt.flatten(t, 2), 0),
    "reshape_back": ([m], lambda: tt.reshape(tt.reshape(m, (-1,)), m.shape), 0),
    "batched_dot_own": ([t], lambda: tt.batched_dot(t, t.dimshuffle(0, 2, 1)), 0),
    "tensordot_own": ([m], lambda: tt.tensordot(m, m.T, axes=1), 0),
    "specify_own": ([v], lambda: tt.specify_shape(v, v.shape), 0),
    "repeat_own": ([v], lambda: Repeat(0)(v, tt.ones_like(v, dtype="int64")), 0),
    "broadcast_to_own": ([v], lambda: tt.broadcast_to(v, (2, v.shape[0])), 0),
    "adv_read_same": ([m, i], lambda: m[i, i], 0),
    # lengths that may differ: one check, guarding each length of the shape
    "reshape_halves": ([m], lambda: tt.reshape(m, (m.shape[0], 2, m.shape[1] // 2)), 3),
    "inverse": ([m], lambda: la.matrix_inverse(m), 2),
}


@pytest.mark.parametrize("name", KNOWN)
def test_no_check_where_the_lengths_are_known_to_agree(name):
    ins, build, count = KNOWN[name]
    out = build()
    f = theano_dag.function(ins, out.shape)
    assert len(_checks(f)) == count
    value = theano_dag.function(ins, out, mode=Mode(linker="py"))
    good = {"m": np.eye(4), "t": np.ones((2, 3, 4)), "v": np.ones(3), "i": [0, 1]}
    args = [good[x.name] for x in ins]
    assert tuple(f(*args)) == value(*args).shape


def test_broadcast_shape_of_lengths_known_when_run_is_numpys():
    # a 0 with a 1 is 0 (the largest, 1, was checked against the 0 and refused)
    a, b = tt.dvector("a"), tt.dvector("b")
    g = theano_dag.function([a, b], list(tt.broadcast_shape(a, b)))
    for la_, lb in [(0, 1), (1, 0), (3, 1), (3, 3)]:
        want = np.broadcast_shapes((la_,), (lb,))
        assert tuple(int(q) for q in g(ones(la_), ones(lb))) == want
    with pytest.raises(LengthMismatchError, match=r"\(array 0: 2, array 1: 3\)"):
        g(ones(2), ones(3))


def test_ravel_multi_index_type_is_the_index_arrays_broadcast():
    # a first index array of static length 1 broadcast to the others' length
    one = tt.TensorType("int64", shape=(1,))("one")
    out = tt.ravel_multi_index((one, j), (3, 4))
    assert out.type.shape == (None,)
    f = theano_dag.function([one, j], out)
    np.testing.assert_array_equal(f([1], [0, 1, 2]), np.ravel_multi_index(([1], [0, 1, 2]), (3, 4)))


def test_a_0d_shape_names_the_lengths_its_value_checks():
    # dot(v, w) is 0-d: its shape () keeps the check of the inner lengths, named
    f = theano_dag.function([v, w], tt.dot(v, w).shape)
    assert f(ones(3), ones(3)).shape == (0,)
    with pytest.raises(LengthMismatchError, match=r"inner lengths: .*\(v along .*: 3, w .*: 4\)"):
        f(ones(3), ones(4))


def test_a_reduction_shape_names_the_dropped_lengths():
    f = theano_dag.function([m, n], (m * n).sum(axis=1).shape)
    with pytest.raises(LengthMismatchError, match=r"dimension 1.*\(m: 3, n: 4\)"):
        f(ones((2, 3)), ones((2, 4)))
    # computed anyway, the value checks them: the shape adds no check
    g = theano_dag.function([m, n], [(m * n).sum(axis=1), (m * n).sum(axis=1).shape])
    assert len(_checks(g)) == 0


def test_an_index_read_shape_names_the_index_out_of_bounds():
    f = theano_dag.function([m, i], m[i].shape)
    assert tuple(f(ones((2, 3)), [-2, 1, 1])) == (3, 3)
    msg = r"AdvancedSubtensor1: m along dimension 0: index -3 is out of bounds for a length of 2"
    with pytest.raises(IndexError, match=msg):
        f(ones((2, 3)), [0, -3])
    # 0-d: the shape () keeps the check
    g = theano_dag.function([v, k], v[k].shape)
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for a length of 3"):
        g(ones(3), 3)
    # computed anyway, the value checks its indices: the shape adds no check
    h = theano_dag.function([m, i], [m[i], m[i].shape])
    assert not [nd for nd in h.maker.fgraph.toposort() if type(nd.op).__name__ == "IndicesInBounds"]


def test_three_index_arrays_name_the_broadcast_of_the_first_ones():
    # i of length 1 spreads to j's 3: the length compared with k's is their broadcast's
    x = tt.dtensor3("x")
    f = theano_dag.function([x, i, j, u], x[i, j, tt.cast(u, "int64")].shape)
    msg = r"\(the broadcast of index array 0 \(i\) and index array 1 \(j\): 3, index array 2: 2\)"
    with pytest.raises(LengthMismatchError, match=msg):
        f(ones((4, 4, 4)), [0], [0, 1, 2], [0.0, 1.0])


def test_checks_of_indices_add_no_check_of_lengths_known_equal():
    # y = m[i] * 2 has the part's rows (i's length) under its check of i: no EqualLengths,
    # and the check of i stays
    f = theano_dag.function([m, i], tt.inc_subtensor(m[i], m[i] * 2).shape)
    assert _checks(f) == []
    assert tuple(f(ones((2, 3)), [1, 1, 0])) == (2, 3)
    with pytest.raises(IndexError, match="index 2 is out of bounds for a length of 2"):
        f(ones((2, 3)), [0, 2])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fused", [False, True], ids=["conv", "conv_bias_relu"])
def test_filters_larger_than_the_image_raise_on_every_engine(engine, fused):
    # One position short (6x6 filters on a 5x5 image): the output lengths would be 0, and
    # the CPU engine's convolution returned an empty result where perform raises.
    x, w, b = tt.tensor4("x"), tt.tensor4("w"), tt.dvector("b")
    out = nnet.conv2d(x, w)
    if fused:
        out = nnet.relu(out + b.dimshuffle("x", 0, "x", "x"))
    f = theano_dag.function([x, w, b], out, mode=rewritten_mode(engine), on_unused_input="ignore")
    bv = np.ones(3)
    assert f(ones((1, 2, 5, 5)), ones((3, 2, 5, 5)), bv).shape == (1, 3, 1, 1)
    with pytest.raises(ValueError, match=r"filters \(6x6.* larger than the padded image \(5x5\)"):
        f(ones((1, 2, 5, 5)), ones((3, 2, 6, 6)), bv)


@pytest.mark.parametrize("engine", ENGINES)
def test_convolution_gradients_refuse_what_perform_refuses_on_every_engine(engine):
    # The CPU engine's gradient loops took an output gradient of another batch or spatial
    # shape than the convolution gives (reading part of the image), or of none.
    x, gy, w = tt.tensor4("x"), tt.tensor4("gy"), tt.tensor4("w")
    gw = AbstractConv2d_gradWeights()(x, gy, tt.as_tensor_variable([3, 3]))
    gi = AbstractConv2d_gradInputs()(w, gy, tt.as_tensor_variable([5, 5]))
    mode = rewritten_mode(engine)
    f_gw = theano_dag.function([x, gy], gw, mode=mode)
    f_gi = theano_dag.function([w, gy], gi, mode=mode)
    assert f_gw(ones((2, 2, 5, 5)), ones((2, 3, 3, 3))).shape == (3, 2, 3, 3)
    assert f_gi(ones((3, 2, 3, 3)), ones((2, 3, 3, 3))).shape == (2, 2, 5, 5)
    for bad in [(2, 3, 2, 2), (1, 3, 3, 3)]:  # spatial lengths, batch
        with pytest.raises(ValueError):
            f_gw(ones((2, 2, 5, 5)), ones(bad))
    with pytest.raises(ValueError):
        f_gi(ones((3, 2, 3, 3)), ones((2, 3, 2, 2)))
    f_gw6 = theano_dag.function(
        [x, gy], AbstractConv2d_gradWeights()(x, gy, tt.as_tensor_variable([6, 6])), mode=mode
    )
    f_gi6 = theano_dag.function(
        [w, gy], AbstractConv2d_gradInputs()(w, gy, tt.as_tensor_variable([5, 5])), mode=mode
    )
    with pytest.raises(ValueError, match=r"filters \(6x6.* larger than the padded image"):
        f_gw6(ones((1, 2, 5, 5)), ones((1, 3, 0, 0)))
    with pytest.raises(ValueError, match=r"filters \(6x6.* larger than the padded image"):
        f_gi6(ones((3, 2, 6, 6)), ones((1, 3, 0, 0)))
