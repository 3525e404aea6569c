"""theano_dag <-> PyTensor: real PyTensor graphs, values computed by both frameworks."""

import sys

import numpy as np
import pytest
from hypothesis import given, settings

pytensor = pytest.importorskip("pytensor")
pt = pytest.importorskip("pytensor.tensor")
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:np.dot\(\) is faster"),  # numba, on transposed inputs
    pytest.mark.filterwarnings("ignore:Numba will use object mode"),  # a wrapped op's perform
]

from compound_cases import COMPOUND, ERFC_TAIL, check_formula_conversion  # noqa: E402
from pytensor.compile.mode import Mode as PMode  # noqa: E402
from pytensor.graph.basic import equal_computations as p_equal  # noqa: E402
from pytensor.graph.fg import FunctionGraph as PFunctionGraph  # noqa: E402
from random_graphs import random_args, tensor_graphs  # noqa: E402

from theano_dag import function  # noqa: E402
from theano_dag import tensor as tt  # noqa: E402
from theano_dag.formats import (  # noqa: E402
    NoCounterpartError,
    convert,
    detect_format,
    from_pytensor,
    to_pytensor,
)
from theano_dag.formats.foreign import ForeignOp, to_foreign  # noqa: E402
from theano_dag.formats.pytensor_interop import PyTensorFlavor  # noqa: E402
from theano_dag.gradient import grad  # noqa: E402
from theano_dag.graph.basic import equal_computations  # noqa: E402
from theano_dag.graph.fg import FunctionGraph  # noqa: E402
from theano_dag.tensor.contractions import einsum  # noqa: E402
from theano_dag.tensor.linalg import cholesky, eigh  # noqa: E402
from theano_dag.tensor.nnet import (  # noqa: E402
    SoftmaxGrad,
    batch_normalization_train,
    log_softmax,
    softmax,
)

rng = np.random.default_rng(7)
PY = PMode(linker="py", optimizer=None)  # PyTensor's reference linker: nothing to compile


def ours(fg, args):
    return function(fg.inputs, fg.outputs, on_unused_input="ignore")(*args)


def theirs(pfg, args, mode=None):
    f = pytensor.function(pfg.inputs, pfg.outputs, on_unused_input="ignore", mode=mode)
    return f(*args)


def assert_close(xs, ys):
    assert len(xs) == len(ys)
    for a, b in zip(xs, ys):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


def check_round_trip(fg, args, mode=None):
    """theano_dag -> PyTensor -> theano_dag: same values everywhere, same graph back."""
    pfg = to_pytensor(fg)
    assert [v.name for v in pfg.inputs] == [v.name for v in fg.inputs]
    for a, b in zip(fg.inputs, pfg.inputs):
        assert (a.type.dtype, a.type.shape) == (b.type.dtype, b.type.shape)
    want = ours(fg, args)
    assert_close(want, theirs(pfg, args, mode))
    back = from_pytensor(pfg)
    assert equal_computations(fg.outputs, back.outputs, fg.inputs, back.inputs)
    assert_close(want, ours(back, args))
    return pfg


X, V, S = rng.random((3, 3)), rng.random(3), np.float64(0.7)


def graph(*outs):
    x, v, s = tt.dmatrix("x"), tt.dvector("v"), tt.dscalar("s")
    return FunctionGraph([x, v, s], [f(x, v, s) for f in outs], clone=False)


HAND_MADE = {
    "elementwise": lambda x, v, s: tt.exp(x) * v + tt.sigmoid(s) - abs(x) ** 2,
    "compare_switch": lambda x, v, s: tt.switch(x > v, x, tt.maximum(v, s)),
    "reductions": lambda x, v, s: x.sum(axis=0) + x.max(axis=1) + x.prod() * x.min(),
    "mean_and_argmax": lambda x, v, s: tt.argmax(x, axis=1) + tt.mean(x),
    "dot": lambda x, v, s: tt.dot(x, x.T) + tt.dot(x, tt.dot(x, x)),
    "dimshuffle": lambda x, v, s: x.dimshuffle(1, "x", 0) + v.dimshuffle("x", "x", 0),
    "subtensor": lambda x, v, s: x[1:, 0].sum() + x[::-1, 2] + v[1],
    "set_inc_subtensor": lambda x, v, s: tt.set_subtensor(x[0], v) + tt.inc_subtensor(x[1:], 1.0),
    "softmax": lambda x, v, s: softmax(x) + log_softmax(x, axis=0),
    "cast": lambda x, v, s: tt.cast(x * 100, "int32") + tt.cast(v, "float32"),
    # eigenvectors are known up to their sign: PyTensor's may differ from numpy's
    "linalg": lambda x, v, s: cholesky(tt.dot(x, x.T) + 3 * tt.eye(3)) + eigh(x + x.T)[0],
    "reshape_join": lambda x, v, s: tt.join(0, x.reshape((9,)), v),
}


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_hand_made_round_trips(name):
    check_round_trip(graph(HAND_MADE[name]), [X, V, S])


def test_batch_normalization_in_training_mode_converts_to_plain_ops():
    # Its output's gradient identity has no counterpart: PyTensor gets the value's graph
    # and differentiates it itself, to the same gradient.
    x, g = tt.dmatrix("x"), tt.dvector("g")
    out, mean, invstd = batch_normalization_train(x, g, tt.zeros_like(g), epsilon=1e-3)
    fg = FunctionGraph([x, g], [out, mean, invstd], clone=False)
    pfg = to_pytensor(fg)
    assert not any("TheanoDag" in type(n.op).__name__ for n in pfg.apply_nodes)
    args = [rng.standard_normal((5, 3)), rng.standard_normal(3)]
    assert_close(ours(fg, args), theirs(pfg, args))
    w = rng.standard_normal((5, 3))
    want = function([x, g], grad((out * w).sum(), [x, g]))(*args)
    p_out = pfg.outputs[0]
    got = pytensor.function(pfg.inputs, pytensor.grad((p_out * w).sum(), pfg.inputs))(*args)
    assert_close(want, got)


def test_types_names_and_constants_are_kept():
    x = tt.TensorType("float32", shape=(2, None, 1))("x")
    c = tt.constant(np.arange(2, dtype="int16").reshape(2, 1, 1), name="c")
    fg = FunctionGraph([x], [x * c], clone=False)
    pfg = to_pytensor(fg)
    px = pfg.inputs[0]
    assert (px.name, px.type.dtype, px.type.shape, px.type.broadcastable) == (
        "x", "float32", (2, None, 1), (False, False, True)
    )  # fmt: skip
    (pc,) = [v for v in pfg.variables if isinstance(v, pytensor.graph.basic.Constant)]
    assert pc.name == "c" and pc.type.dtype == "int16" and pc.type.shape == (2, 1, 1)
    np.testing.assert_array_equal(pc.data, c.data)
    back = from_pytensor(pfg)
    assert back.inputs[0].type == x.type
    assert equal_computations(fg.outputs, back.outputs, fg.inputs, back.inputs)


def test_einsum_maps_to_pytensor_einsum():
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    fg = FunctionGraph([a, b], [einsum("ij,jk->ki", a, b)], clone=False)
    pfg = to_pytensor(fg)
    assert [type(n.op).__name__ for n in pfg.toposort()] == ["Einsum"]
    assert_close(ours(fg, [X, X.T]), theirs(pfg, [X, X.T]))
    back = from_pytensor(pfg)
    assert equal_computations(fg.outputs, back.outputs, fg.inputs, back.inputs)


# -- graphs made by PyTensor ----------------------------------------------------------------------


def pytensor_graphs():
    x, v = pt.dmatrix("x"), pt.dvector("v")
    i = pt.lscalar("i")
    return {
        "elementwise": ([x, v], [pt.exp(x) / (1 + v) - pt.log1p(x**2)]),
        "reductions": ([x], [x.sum(axis=1), x.max(axis=0), pt.argmax(x, axis=0), x.mean()]),
        "dot": ([x, v], [pt.dot(x, x), pt.dot(x, v), x.T @ x]),
        "subtensor": ([x, i], [x[i], x[1:, i], x[::2, -1]]),
        "softmax": ([x], [pt.special.softmax(x, axis=1), pt.special.log_softmax(x, axis=0)]),
        "linalg": ([x], [pt.linalg.cholesky(x @ x.T + 3 * pt.eye(3))]),
        "composite": ([x], [pt.sigmoid(x) * pt.tanh(x) + 1]),
    }


@pytest.mark.parametrize("name", sorted(pytensor_graphs()))
def test_from_pytensor_runs_like_pytensor(name):
    ins, outs = pytensor_graphs()[name]
    pfg = PFunctionGraph(ins, outs)
    args = [X, V, 1][: len(ins)] if name != "subtensor" else [X, 1]
    fg = from_pytensor(pfg, strict=True)
    assert not any(isinstance(n.op, ForeignOp) for n in fg.apply_nodes)
    assert_close(theirs(pfg, args), ours(fg, args))
    again = to_pytensor(fg)
    assert_close(theirs(pfg, args), theirs(again, args))


def test_pytensor_round_trip_is_exact_on_its_own_graphs():
    x = pt.dmatrix("x")
    outs = [pt.exp(x).sum(axis=1), x[1:, 0], pt.dot(x, x).T, pt.special.softmax(x, axis=1)]
    pfg = PFunctionGraph([x], outs, clone=False)
    again = to_pytensor(from_pytensor(pfg))
    assert p_equal(pfg.outputs, again.outputs, pfg.inputs, again.inputs)


def test_optimized_pytensor_graph_converts():
    x = pt.dmatrix("x")
    f = pytensor.function([x], pt.exp(x) * 2 + pt.tanh(x).sum())
    fg = from_pytensor(f.maker.fgraph)  # fused Composite, inplace ops, DeepCopyOp
    assert_close([f(X)], ours(fg, [X]))


# -- ops without counterpart ----------------------------------------------------------------------


def test_our_op_without_counterpart_is_wrapped_or_refused():
    dy, sm = tt.dmatrix("dy"), tt.dmatrix("sm")
    fg = FunctionGraph([dy, sm], [SoftmaxGrad(1)(dy, sm) * 2], clone=False)
    pfg = to_pytensor(fg)
    assert "TheanoDag{SoftmaxGrad{axis=1}}" in [str(n.op) for n in pfg.toposort()]
    assert_close(ours(fg, [X, X.T]), theirs(pfg, [X, X.T]))
    back = from_pytensor(pfg)
    assert equal_computations(fg.outputs, back.outputs, fg.inputs, back.inputs)
    with pytest.raises(NoCounterpartError, match=r"to_pytensor: the theano_dag op SoftmaxGrad"
                       r"\{axis=1\} has no counterpart in pytensor \(strict=True"):  # fmt: skip
        to_pytensor(fg, strict=True)


def test_pytensor_op_without_counterpart_is_wrapped_or_refused():
    x = pt.dvector("x")
    pfg = PFunctionGraph([x], [pt.cumsum(x) * 2, pt.sort(x)])
    fg = from_pytensor(pfg)
    wrapped = [n.op for n in fg.apply_nodes if isinstance(n.op, ForeignOp)]
    assert sorted(type(op.fop).__name__ for op in wrapped) == ["CumOp", "SortOp"]
    assert_close(theirs(pfg, [V]), ours(fg, [V]))
    again = to_pytensor(fg)  # a wrapped op goes back to the op it wraps
    assert p_equal(pfg.outputs, again.outputs, pfg.inputs, again.inputs)
    with pytest.raises(NoCounterpartError, match="from_pytensor: the pytensor op (Cum|Sort)Op"):
        from_pytensor(pfg, strict=True)


# -- convert(), errors ----------------------------------------------------------------------------


def test_convert_knows_pytensor_graphs():
    x = pt.dvector("x")
    pfg = PFunctionGraph([x], [pt.exp(x)])
    assert detect_format(pfg) == "pytensor_fgraph"
    dag = convert(pfg, to="dag")
    assert [str(e["fn"]) for e in dag.values()] == ["Elemwise{exp,no_inplace}"]
    fg = convert(pfg, to="fgraph")
    assert isinstance(convert(fg, to="pytensor_fgraph"), PFunctionGraph)


def test_errors():
    with pytest.raises(TypeError, match="to_pytensor needs a theano_dag FunctionGraph, got"):
        to_pytensor(pt.dvector())
    x = tt.dvector("x")
    with pytest.raises(TypeError, match="from_pytensor needs a pytensor FunctionGraph, got Func"):
        from_pytensor(FunctionGraph([x], [x], clone=False))


def test_missing_pytensor_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pytensor", None)
    x = tt.dvector("x")
    fg = FunctionGraph([x], [tt.exp(x)], clone=False)
    want = (
        r"to_pytensor needs pytensor, an optional extra: "
        r"pip install 'pytensor>=3\.0\.7,<3\.1' .*pip install '\.\[pytensor\]'"
    )
    with pytest.raises(ImportError, match=want):
        to_foreign(fg, PyTensorFlavor(), who="to_pytensor")


# -- random graphs ---------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(tensor_graphs())
def test_random_graphs_round_trip(fg):
    check_round_trip(fg, random_args(rng), mode=PY)


def test_scalar_op_pytensor_lacks_becomes_a_composite():
    x, y, z = tt.dvector("x"), tt.dvector("y"), tt.dvector("z")
    fg = FunctionGraph([x, y, z], [tt.fma(x, y, z)], clone=False)
    pfg = to_pytensor(fg, strict=True)  # fma is mul then add: no wrapper needed
    (node,) = pfg.toposort()
    assert type(node.op.scalar_op).__name__ == "Composite"
    assert_close(ours(fg, [V, V, V]), theirs(pfg, [V, V, V]))


def test_clip_keeps_each_sides_rule_where_an_argument_is_nan():
    # Both give lo where x < lo, hi where x > hi (lo > hi included: Theano's rule); a NaN
    # bound gives NaN in theano_dag's clip (numpy's), PyTensor's ignores it. Each side's
    # clip is written in the other's ops.
    x, lo, hi = tt.dvector("x"), tt.dscalar("lo"), tt.dscalar("hi")
    fg = FunctionGraph([x, lo, hi], [tt.clip(x, lo, hi)], clone=False)
    px, plo, phi = pt.dvector("x"), pt.dscalar("lo"), pt.dscalar("hi")
    pfg = PFunctionGraph([px, plo, phi], [pt.clip(px, plo, phi)])
    xv = np.array([0.0, 2.0, 5.0, np.nan])
    for bounds, want, want_theirs in (
        ((3.0, 1.0), [3.0, 3.0, 1.0, np.nan], [3.0, 3.0, 1.0, np.nan]),
        ((np.nan, 4.0), [np.nan] * 4, [0.0, 2.0, 4.0, np.nan]),
        ((1.0, np.nan), [np.nan] * 4, [1.0, 2.0, 5.0, np.nan]),
    ):
        args = [xv, *(np.float64(b) for b in bounds)]
        got = ours(fg, args)
        np.testing.assert_array_equal(got[0], want)
        assert_close(got, theirs(to_pytensor(fg, strict=True), args))
        theirs_clip = theirs(pfg, args)
        np.testing.assert_array_equal(theirs_clip[0], want_theirs)
        assert_close(theirs_clip, ours(from_pytensor(pfg, strict=True), args))


def test_an_op_pytensor_refuses_for_these_dtypes_is_wrapped_or_named():
    # PyTensor's sign refuses a bool (TypeError): the node has no counterpart for those
    # types; wrapped, it runs theano_dag's own perform.
    b = tt.vector("b", dtype="bool")
    fg = FunctionGraph([b], [tt.sgn(b)], clone=False)
    with pytest.raises(NoCounterpartError, match=r"sgn.*for inputs of types.*bool.*TypeError"):
        to_pytensor(fg, strict=True)
    args = [np.array([True, False])]
    got = theirs(to_pytensor(fg), args)
    assert_close(ours(fg, args), got)


def test_a_float_function_of_bools_computes_in_the_output_float():
    # softplus of a bool is float32; PyTensor's Python kernel computed it in numpy's
    # float for a bool, float16, and cast: the inputs go over in float32 first.
    b = tt.matrix("b", dtype="bool")
    fg = FunctionGraph([b], [tt.softplus(b), tt.exp(b)], clone=False)
    args = [np.array([[True, False]])]
    want = ours(fg, args)
    got = theirs(to_pytensor(fg, strict=True), args, PY)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == "float32"
        np.testing.assert_allclose(g, w, rtol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted([*COMPOUND, *ERFC_TAIL]))
def test_compound_scalar_ops_convert_as_their_formulas(name, dtype):
    # PyTensor has log1mexp of these as one op: the others go over as its elementwise ops
    # of their formulas (strict or not), never wrapped, with our values at their edges.
    runs = (theirs, lambda pfg, values: theirs(pfg, values, PY))
    check_formula_conversion(name, dtype, ours, to_pytensor, from_pytensor, runs)
