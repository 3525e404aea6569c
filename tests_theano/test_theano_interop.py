"""theano_dag <-> Theano (theano-pymc 1.1.2): real Theano graphs, values computed by both."""

import numpy as np
import pytest
from hypothesis import given, settings

theano = pytest.importorskip("theano")
T = pytest.importorskip("theano.tensor")
pytest.importorskip("theano.tensor.extra_ops")  # loaded for T.extra_ops and T.slinalg
pytest.importorskip("theano.tensor.slinalg")

from compound_cases import COMPOUND, ERFC_TAIL, check_formula_conversion  # noqa: E402
from random_graphs import random_args, tensor_graphs  # noqa: E402
from theano.graph.basic import equal_computations as t_equal  # noqa: E402
from theano.graph.fg import FunctionGraph as TFunctionGraph  # noqa: E402

from theano_dag import function  # noqa: E402
from theano_dag import tensor as tt  # noqa: E402
from theano_dag.compile.mode import Mode  # noqa: E402
from theano_dag.engines.opencl.context import opencl_available  # noqa: E402
from theano_dag.formats import (  # noqa: E402
    NoCounterpartError,
    convert,
    detect_format,
    from_theano,
    to_theano,
)
from theano_dag.formats.foreign import ForeignOp  # noqa: E402
from theano_dag.graph.basic import equal_computations  # noqa: E402
from theano_dag.graph.fg import FunctionGraph  # noqa: E402
from theano_dag.tensor.contractions import einsum  # noqa: E402
from theano_dag.tensor.linalg import cholesky, eigh  # noqa: E402
from theano_dag.tensor.nnet import log_softmax, softmax  # noqa: E402

rng = np.random.default_rng(11)
X, V, S = rng.random((3, 3)), rng.random(3), np.float64(0.7)
# Theano's Python VM: no C compilation, so many small graphs stay fast
FAST = "FAST_COMPILE"
OPENCL, _WHY = opencl_available()


def ours(fg, args):
    return function(fg.inputs, fg.outputs, on_unused_input="ignore")(*args)


def theirs(tfg, args, mode=FAST):
    f = theano.function(tfg.inputs, tfg.outputs, on_unused_input="ignore", mode=mode)
    return f(*args)


def assert_close(xs, ys):
    assert len(xs) == len(ys)
    for a, b in zip(xs, ys):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


def check_round_trip(fg, args, mode=FAST):
    """theano_dag -> Theano -> theano_dag: same values everywhere, the same graph back."""
    tfg = to_theano(fg)
    assert [v.name for v in tfg.inputs] == [v.name for v in fg.inputs]
    for a, b in zip(fg.inputs, tfg.inputs):
        assert (a.type.dtype, a.type.broadcastable) == (b.type.dtype, b.type.broadcastable)
    want = ours(fg, args)
    assert_close(want, theirs(tfg, args, mode))
    back = from_theano(tfg)
    assert equal_computations(fg.outputs, back.outputs, fg.inputs, back.inputs)
    assert_close(want, ours(back, args))
    return tfg


def graph(*outs):
    x, v, s = tt.dmatrix("x"), tt.dvector("v"), tt.dscalar("s")
    return FunctionGraph([x, v, s], [f(x, v, s) for f in outs], clone=False)


HAND_MADE = {
    "elementwise": lambda x, v, s: tt.exp(x) * v + tt.sigmoid(s) - abs(x) ** 2,
    "compare_switch": lambda x, v, s: tt.switch(x > v, x, tt.maximum(v, s)),
    "reductions": lambda x, v, s: x.sum(axis=0) + x.max(axis=1) + x.prod() * x.min(),
    "mean_and_argmax": lambda x, v, s: tt.argmax(x, axis=1) + tt.mean(x),
    "dot": lambda x, v, s: tt.dot(x, x.T) + tt.dot(x, v) + tt.dot(v, v),
    "dimshuffle": lambda x, v, s: x.dimshuffle(1, "x", 0) + v.dimshuffle("x", "x", 0),
    "subtensor": lambda x, v, s: x[1:, 0].sum() + x[::-1, 2] + v[1],
    "set_inc_subtensor": lambda x, v, s: tt.set_subtensor(x[0], v) + tt.inc_subtensor(x[1:], 1.0),
    "softmax": lambda x, v, s: softmax(x) + log_softmax(x),
    "cast": lambda x, v, s: tt.cast(x * 100, "int32") + tt.cast(v, "float32"),
    "linalg": lambda x, v, s: cholesky(tt.dot(x, x.T) + 3 * tt.eye(3)) + eigh(x + x.T)[1],
    "reshape_join": lambda x, v, s: tt.join(0, x.reshape((9,)), v),
}


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_hand_made_round_trips(name):
    check_round_trip(graph(HAND_MADE[name]), [X, V, S])


def test_converted_graph_compiles_with_the_default_mode():
    # FAST_RUN: Theano's rewrites and its C code (cached under build/theano)
    fg = graph(HAND_MADE["elementwise"], HAND_MADE["dot"], HAND_MADE["softmax"])
    tfg = to_theano(fg)
    assert_close(ours(fg, [X, V, S]), theirs(tfg, [X, V, S], mode=None))


def test_types_names_and_constants_are_kept():
    x = tt.TensorType("float32", shape=(None, None, 1))("x")
    c = tt.constant(np.arange(2, dtype="int16").reshape(2, 1, 1), name="c")
    fg = FunctionGraph([x], [x * c], clone=False)
    tfg = to_theano(fg)
    tx = tfg.inputs[0]
    assert (tx.name, tx.type.dtype, tx.type.broadcastable) == (
        "x",
        "float32",
        (False,) * 2 + (True,),
    )
    (tc,) = [v for v in tfg.variables if isinstance(v, theano.graph.basic.Constant)]
    assert tc.name == "c" and tc.type.dtype == "int16"
    assert tc.type.broadcastable == (False, True, True)
    np.testing.assert_array_equal(tc.data, c.data)
    back = from_theano(tfg)
    assert back.inputs[0].type == x.type
    assert equal_computations(fg.outputs, back.outputs, fg.inputs, back.inputs)


# -- graphs made by Theano ------------------------------------------------------------------------


def theano_graphs():
    x, v, i = T.dmatrix("x"), T.dvector("v"), T.lscalar("i")
    return {
        "elementwise": ([x, v], [T.exp(x) / (1 + v) - T.log1p(x**2), T.nnet.sigmoid(x)]),
        "reductions": ([x], [x.sum(axis=1), T.max(x, axis=0), T.argmax(x, axis=0), x.mean()]),
        "dot": ([x, v], [T.dot(x, x), T.dot(x, v), T.dot(v, x)]),
        "subtensor": ([x, i], [x[i], x[1:, i], x[::2, -1]]),
        "softmax": ([x], [T.nnet.softmax(x), T.nnet.logsoftmax(x)]),
        "linalg": ([x], [T.slinalg.cholesky(T.dot(x, x.T) + 3 * T.eye(3))]),
        "relu_softplus": ([x], [T.nnet.relu(x - 0.5), T.nnet.softplus(x)]),
    }


@pytest.mark.parametrize("name", sorted(theano_graphs()))
def test_from_theano_runs_like_theano(name):
    ins, outs = theano_graphs()[name]
    tfg = TFunctionGraph(ins, outs)
    args = [X, V][: len(ins)] if name != "subtensor" else [X, 1]
    fg = from_theano(tfg, strict=True)
    assert not any(isinstance(n.op, ForeignOp) for n in fg.apply_nodes)
    assert_close(theirs(tfg, args), ours(fg, args))
    again = to_theano(fg)
    assert_close(theirs(tfg, args), theirs(again, args))


def test_theano_round_trip_is_exact_on_its_own_graphs():
    x, v = T.dmatrix("x"), T.dvector("v")
    outs = [T.exp(x).sum(axis=1), x[1:, 0], T.dot(x, x).T, T.nnet.softmax(x), T.dot(x, v)]
    tfg = TFunctionGraph([x, v], outs, clone=False)
    again = to_theano(from_theano(tfg))
    assert t_equal(tfg.outputs, again.outputs, tfg.inputs, again.inputs)


def test_optimized_theano_graph_converts():
    x = T.dmatrix("x")
    f = theano.function([x], T.exp(x) * 2 + T.tanh(x).sum())
    fg = from_theano(f.maker.fgraph)  # fused Composite, inplace ops, DeepCopyOp
    assert_close([f(X)], ours(fg, [X]))


# -- ops without counterpart ----------------------------------------------------------------------


def test_our_op_without_counterpart_is_wrapped_or_refused():
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    fg = FunctionGraph([a, b], [einsum("ij,jk->ki", a, b) + 1], clone=False)
    tfg = to_theano(fg)
    assert "TheanoDag{Einsum{ij,jk->ki}}" in [str(n.op) for n in tfg.toposort()]
    assert_close(ours(fg, [X, X.T]), theirs(tfg, [X, X.T], mode=None))
    back = from_theano(tfg)  # the wrapper gives back the op it wraps
    assert equal_computations(fg.outputs, back.outputs, fg.inputs, back.inputs)
    with pytest.raises(NoCounterpartError, match=r"to_theano: the theano_dag op Einsum"
                       r"\{ij,jk->ki\} has no counterpart in theano \(strict=True"):  # fmt: skip
        to_theano(fg, strict=True)


def test_theano_op_without_counterpart_is_wrapped_or_refused():
    x = T.dvector("x")
    tfg = TFunctionGraph([x], [T.extra_ops.cumsum(x) * 2])
    fg = from_theano(tfg)
    (wrapped,) = [n.op for n in fg.apply_nodes if isinstance(n.op, ForeignOp)]
    assert type(wrapped.fop).__name__ == "CumOp"
    assert_close(theirs(tfg, [V]), ours(fg, [V]))
    again = to_theano(fg)
    assert t_equal(tfg.outputs, again.outputs, tfg.inputs, again.inputs)
    with pytest.raises(NoCounterpartError, match="from_theano: the theano op CumOp"):
        from_theano(tfg, strict=True)


def _theano_scan_graph():
    """A Theano scan (a sequence, a carried state, a constant and a per-step output) and
    what it computes, in numpy."""
    x, w = T.dvector("x"), T.dscalar("w")

    def step(xi, acc, w):
        new = acc * w + xi
        return new, T.sqr(new)

    (accs, squares), _ = theano.scan(
        step, sequences=[x], outputs_info=[T.constant(0.0, dtype="float64"), None],
        non_sequences=[w],
    )  # fmt: skip

    def want(xv, wv):
        acc, accs = 0.0, []
        for xi in xv:
            acc = acc * wv + xi
            accs.append(acc)
        return [np.array(accs), np.array(accs) ** 2]

    return TFunctionGraph([x, w], [accs, squares]), want


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param(None, id="cpu"),
        pytest.param("FAST_COMPILE", id="fast_compile"),
        pytest.param(Mode(linker="py", optimizer=None), id="py"),
        pytest.param(
            Mode(linker="opencl"),
            id="opencl",
            marks=pytest.mark.skipif(not OPENCL, reason=f"no OpenCL device: {_WHY}"),
        ),
    ],
)
def test_a_wrapped_theano_scan_runs_like_theano(mode):
    tfg, want = _theano_scan_graph()
    fg = from_theano(tfg)
    (wrapped,) = [n.op for n in fg.apply_nodes if isinstance(n.op, ForeignOp)
                  and type(n.op.fop).__name__ == "Scan"]  # fmt: skip
    f = function(fg.inputs, fg.outputs, mode=mode)
    first = f(V, S)
    assert_close(theirs(tfg, [V, S]), first)
    assert_close(want(V, S), first)
    kept = [a.copy() for a in first]
    longer = rng.random(5)
    assert_close(want(longer, 0.5), f(longer, np.float64(0.5)))
    assert_close(kept, first)  # the second call wrote into no array the first returned


def test_convert_knows_theano_graphs():
    x = T.dvector("x")
    tfg = TFunctionGraph([x], [T.exp(x)])
    assert detect_format(tfg) == "theano_fgraph"
    dag = convert(tfg, to="dag")
    assert [str(e["fn"]) for e in dag.values()] == ["Elemwise{exp,no_inplace}"]
    assert isinstance(convert(convert(tfg, to="fgraph"), to="theano_fgraph"), TFunctionGraph)


def test_errors():
    x = tt.dvector("x")
    with pytest.raises(TypeError, match="from_theano needs a theano FunctionGraph, got Func"):
        from_theano(FunctionGraph([x], [x], clone=False))
    with pytest.raises(TypeError, match="to_theano needs a theano_dag FunctionGraph, got"):
        to_theano(T.dvector())


# -- random graphs ---------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(tensor_graphs())
def test_random_graphs_round_trip(fg):
    check_round_trip(fg, random_args(rng))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted([*COMPOUND, *ERFC_TAIL]))
def test_compound_scalar_ops_convert_as_their_formulas(name, dtype):
    # Theano has none of these as one op: each goes over as its elementwise ops of the
    # formula (strict or not), never wrapped, with our values at the edges of its rules.
    runs = (theirs, lambda tfg, values: theirs(tfg, values, "FAST_RUN"))
    check_formula_conversion(name, dtype, ours, to_theano, from_theano, runs)
