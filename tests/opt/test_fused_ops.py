"""The ops the optimizer introduces (``Adagrad``, ``FusedReduce``): values against numpy,
``infer_shape`` against the real shapes, gradients against finite differences."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.mode import Mode
from theano_dag.gradient.verify import verify_grad
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.elemwise import Max, Sum
from theano_dag.tensor.fused import Adagrad, FusedReduce
from theano_dag.tensor.shape import shape_i

rng = np.random.default_rng(9)
PY = Mode(linker="py", optimizer=None)


def inferred_shapes(node):
    """Evaluate ``node.op.infer_shape`` on the node's inputs: one tuple per output."""
    ins = [tuple(shape_i(v, d) for d in range(v.ndim)) for v in node.inputs]
    shapes = node.op.infer_shape(FunctionGraph(node.inputs, node.outputs, clone=False), node, ins)
    flat = [s for shp in shapes for s in shp]
    f = theano_dag.function(
        node.inputs, [tt.as_tensor_variable(s) for s in flat], mode=PY, on_unused_input="ignore"
    )
    return f, [len(s) for s in shapes]


def test_adagrad_values_shapes_and_gradient():
    acc, g = tt.dmatrix("acc"), tt.drow("g")
    new_acc, step = Adagrad(1e-6)(acc, g)
    a, b = rng.uniform(0, 1, size=(3, 2)), rng.normal(size=(1, 2))
    got = theano_dag.function([acc, g], [new_acc, step], mode=PY)(a, b)
    np.testing.assert_allclose(got[0], a + b * b)
    np.testing.assert_allclose(got[1], b / np.sqrt(a + b * b + 1e-6))
    f, lens = inferred_shapes(new_acc.owner)
    assert [int(v) for v in f(a, b)] == [3, 2, 3, 2] and lens == [2, 2]
    verify_grad(
        lambda x, y: Adagrad(1e-6)(x, y)[1] + Adagrad(1e-6)(x, y)[0],
        [a, rng.normal(size=(3, 2))],
        rng=np.random.default_rng(0),
    )


def test_adagrad_checks_its_arguments():
    with pytest.raises(TypeError, match="acc must be a float tensor"):
        Adagrad(1e-8)(tt.ivector(), tt.dvector())
    with pytest.raises(TypeError, match="same dtype and number of dimensions"):
        Adagrad(1e-8)(tt.fvector(), tt.dvector())
    with pytest.raises(ValueError, match="eps must be a number >= 0"):
        Adagrad(-1.0)


@pytest.mark.parametrize("reduce_op", [Sum(axis=(1,)), Sum(), Max(axis=(0,))])
def test_fused_reduce_matches_the_unfused_expression(reduce_op):
    x, y = tt.dmatrix("x"), tt.drow("y")
    comp_x, comp_y = ts.float64("a"), ts.float64("b")
    comp = ts.Composite([comp_x, comp_y], [ts.exp(comp_x) * comp_y])
    fused = FusedReduce(reduce_op, comp)(x, y)
    plain = reduce_op(tt.exp(x) * y)
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(1, 4))
    f = theano_dag.function([x, y], [fused, plain], mode=PY)
    got, want = f(a, b)
    np.testing.assert_allclose(got, want)
    assert fused.type == plain.type
    shp, _ = inferred_shapes(fused.owner)
    assert tuple(int(v) for v in shp(a, b)) == np.shape(want)
    if isinstance(reduce_op, Sum):
        verify_grad(
            lambda u, v: FusedReduce(reduce_op, comp)(u, v), [a, b], rng=np.random.default_rng(1)
        )


def test_fused_reduce_needs_a_careduce():
    with pytest.raises(TypeError, match="reduce_op must be a CAReduce"):
        FusedReduce(tt.exp, ts.exp)
