"""topk, argtopk, topk_and_argtopk (Theano's TopKOp): values against numpy, both signs
of k, axes, sorted and partition order, infer_shape, the gradient, the errors."""

import numpy as np
import pytest

import theano_dag
from theano_dag import tensor as tt
from theano_dag.gradient.verify import verify_grad
from theano_dag.tensor.sort import TopKOp, argtopk, topk, topk_and_argtopk

rng = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("k, axis", [(2, -1), (-3, -1), (1, 0), (4, 1), (-1, 0)])
def test_values_and_indices(dtype, k, axis):
    x = tt.tensor(dtype, shape=(None, None))
    v = rng.permutation(30).reshape(5, 6).astype(dtype)
    vals, idx = theano_dag.function([x], list(topk_and_argtopk(x, k, axis=axis)))(v)
    n = v.shape[axis]
    want = np.sort(v, axis=axis)
    want = np.take(want, np.arange(n - k, n) if k > 0 else np.arange(-k), axis=axis)
    if k > 0:
        want = np.flip(want, axis=axis)  # sorted: the largest first
    np.testing.assert_array_equal(vals, want)
    np.testing.assert_array_equal(np.take_along_axis(v, idx, axis), vals)
    assert vals.dtype == dtype and idx.dtype == np.int64
    unsorted = theano_dag.function([x], topk(x, k, axis=axis, sorted=False))(v)
    np.testing.assert_array_equal(np.sort(unsorted, axis=axis), np.sort(want, axis=axis))


def test_axis_none_symbolic_k_and_infer_shape():
    x, k = tt.dmatrix("x"), tt.lscalar("k")
    v = rng.standard_normal((3, 4))
    out = argtopk(x, k, axis=None)
    got = theano_dag.function([x, k], [out, out.shape])(v, 3)
    np.testing.assert_array_equal(np.sort(v.ravel()[got[0]]), np.sort(v.ravel())[-3:])
    assert tuple(got[1]) == (3,)
    assert topk(x, 2).type.shape == (None, 2)
    node = topk(x, k, axis=0).owner
    shape = node.op.infer_shape(None, node, [(x.shape[0], x.shape[1]), ()])[0]
    f = theano_dag.function([x, k], list(shape), on_unused_input="ignore")
    assert [int(s) for s in f(v, -2)] == [2, 4]


def test_grad():
    v = rng.permutation(20).reshape(4, 5).astype("float64") / 7
    verify_grad(lambda x: topk(x, 2, axis=1), [v], rng=np.random.default_rng(0))
    verify_grad(lambda x: topk(x, -3, axis=0, sorted=False), [v], rng=np.random.default_rng(1))
    x = tt.dvector("x")
    g = theano_dag.grad(topk(x, 1).sum(), x)
    np.testing.assert_array_equal(g.eval({x: np.array([1.0, 9.0, 3.0])}), [0.0, 1.0, 0.0])


def test_the_gradient_through_the_indices_alone_keeps_a_float32_dtype():
    # A node whose values nobody reads gives x zeros of x's dtype, not floatX: summed
    # with the values' gradient of another node, a float32 x's gradient became float64.
    x = tt.fmatrix("x")
    values = topk_and_argtopk(x, 2)[0]
    indices = topk_and_argtopk(x, 2)[1]
    g = theano_dag.grad((values * tt.cast(indices, "float32")).sum(), x)
    assert g.dtype == "float32"
    assert theano_dag.grad(tt.cast(argtopk(x, 2), "float32").sum(), x).dtype == "float32"
    xv = np.array([[3.0, 1.0, 2.0, 5.0]], "float32")
    got = theano_dag.function([x], g)(xv)
    np.testing.assert_array_equal(got, [[0.0, 0.0, 0.0, 3.0]])  # 5 at 3, 3 at 0


def test_errors():
    x = tt.dmatrix("x")
    with pytest.raises(IndexError, match="axis 2 is out of range"):
        topk(x, 1, axis=2)
    with pytest.raises(TypeError, match="k must be an integer scalar"):
        TopKOp()(x, 1.5)
    with pytest.raises(ValueError, match="return_values or return_indices"):
        TopKOp(return_values=False, return_indices=False)
    with pytest.raises(ValueError, match="k=5 is out of range for an axis of length 3"):
        topk(x, 5).eval({x: np.ones((2, 3))})
    assert "uint8" in tt.integer_dtypes and "int64" in tt.integer_dtypes
