"""None (numpy.newaxis) mixed with advanced indexing: ``x[None, idx]``, ``x[i, None, j]``,
masks beside new axes... read, set_subtensor and inc_subtensor against numpy (numpy's rule
for where the advanced dimensions go), infer_shape, static shapes, gradients by finite
differences, on the py, CPU and OpenCL engines; and index forms drawn by Hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensor_helpers import inferred_node_shapes

import theano_dag
from theano_dag import tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import verify_grad
from theano_dag.tensor.subtensor import AdvancedIncSubtensor, AdvancedSubtensor
from theano_dag.tensor.type_other import NoneConst

ENGINES = [
    pytest.param("py", id="py"),
    pytest.param("cpu", id="cpu"),
    pytest.param(
        "opencl",
        id="opencl",
        marks=pytest.mark.skipif(not opencl_available()[0], reason="no OpenCL device"),
    ),
]

I3 = np.array([0, 2, 1])
COL = np.array([[1], [2]])
MASK4 = np.array([True, False, True, True])
MASK3 = np.array([False, True, True])
MASK45 = np.arange(20).reshape(4, 5) % 3 == 0

# Index forms for an x of shape (3, 4, 5); each mixes None with an advanced index.
FORMS = {
    "none_first": np.index_exp[None, I3],
    "none_after": np.index_exp[I3, None],
    "slice_none_adv": np.index_exp[:, None, I3],
    "adv_none_adv": np.index_exp[I3, None, I3],
    "none_adv_adv_none": np.index_exp[None, I3, I3, None],
    "col_none_vec_none": np.index_exp[COL, None, I3, None],
    "int_none_adv": np.index_exp[0, None, I3],
    "none_slice_adv_slice": np.index_exp[None, :, I3, :],
    "ellipsis_none_list": np.index_exp[..., None, [1, 2]],
    "mask_first_none": np.index_exp[None, MASK3],
    "slice_mask_none": np.index_exp[:, MASK4, None],
    "none_slice_mask": np.index_exp[None, 1:, MASK4],
    "mask2d_none": np.index_exp[None, :, MASK45],
    "two_nones_adv": np.index_exp[None, None, I3, 1:],
}


def _x(dtype):
    return np.random.default_rng(7).uniform(-2, 2, size=(3, 4, 5)).astype(dtype)


def _numpy_inc(x, idx, y):
    out = x.copy()
    np.add.at(out, idx, y)
    return out


def _numpy_set(x, idx, y):
    out = x.copy()
    out[idx] = y
    return out


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(FORMS))
def test_read_set_inc_match_numpy(name, dtype, engine):
    idx = FORMS[name]
    xv = _x(dtype)
    want = xv[idx]
    yv = np.random.default_rng(3).uniform(-1, 1, size=want.shape).astype(dtype)
    x = tt.tensor3("x", dtype=dtype)
    y = tt.TensorType(dtype, shape=(None,) * want.ndim)("y")
    sub = x[idx]
    assert isinstance(sub.owner.op, AdvancedSubtensor)
    assert sub.ndim == want.ndim
    f = theano_dag.function(
        [x, y],
        [sub, tt.set_subtensor(sub, y), tt.inc_subtensor(sub, y), tt.exp(sub) * 2],
        mode=Mode(linker=engine),
    )
    got, got_set, got_inc, got_exp = f(xv, yv)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_set, _numpy_set(xv, idx, yv))
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got_inc, _numpy_inc(xv, idx, yv), rtol=tol, atol=tol)
    np.testing.assert_allclose(got_exp, np.exp(want) * 2, rtol=tol)


@pytest.mark.parametrize("name", list(FORMS))
def test_infer_shape_and_static_shape(name):
    idx = FORMS[name]
    xv = _x("float64")
    want = xv[idx].shape
    x = tt.dtensor3("x")
    sub = x[idx]
    assert inferred_node_shapes(sub.owner, {x: xv}) == [want]
    # A new axis is statically of length 1 (broadcastable); no static length is wrong.
    assert all(s is None or s == w for s, w in zip(sub.type.shape, want))
    f = theano_dag.function([x], sub.shape)
    assert tuple(f(xv)) == want


def test_new_axes_are_broadcastable_and_static_lengths_known():
    x = tt.TensorType("float64", shape=(3, None, 5))("x")
    i = tt.TensorType("int64", shape=(2,))("i")
    assert x[None, i].type.shape == (1, 2, None, 5)
    assert x[:, None, i].type.shape == (3, 1, 2, 5)
    assert x[i, None, i].type.shape == (2, 1, 5)
    assert x[None, :, tt.lvector("j")].type.shape == (1, 3, None, 5)


@pytest.mark.parametrize("name", list(FORMS))
def test_gradients_by_finite_differences(name):
    idx = FORMS[name]
    xv = _x("float64")
    yv = np.random.default_rng(5).uniform(-1, 1, size=xv[idx].shape)
    rng = np.random.RandomState(11)
    verify_grad(lambda a: a[idx], [xv], rng=rng)
    verify_grad(lambda a, b: tt.set_subtensor(a[idx], b), [xv, yv], rng=rng)
    verify_grad(lambda a, b: tt.inc_subtensor(a[idx], b), [xv, yv], rng=rng)


def test_inc_broadcasts_the_value_and_accumulates_repeats():
    x = tt.dmatrix("x")
    xv = np.zeros((3, 4))
    out = tt.inc_subtensor(x[[0, 0, 2], None, [1, 1, 3]], 1.5)
    assert isinstance(out.owner.op, AdvancedIncSubtensor)
    want = xv.copy()
    np.add.at(want, ([0, 0, 2], None, [1, 1, 3]), 1.5)
    np.testing.assert_array_equal(out.eval({x: xv}), want)
    assert want[0, 1] == 3.0


def test_theano_advanced_subtensor_takes_none_constants():
    # Theano's AdvancedSubtensor() receives None as NoneConst among its inputs.
    x = tt.dmatrix("x")
    xv = np.arange(12.0).reshape(3, 4)
    out = AdvancedSubtensor()(x, NoneConst, tt.constant(np.array([2, 0])))
    np.testing.assert_array_equal(out.eval({x: xv}), xv[None, [2, 0]])


def test_too_many_indices_with_new_axes_is_an_index_error():
    x = tt.dmatrix("x")
    with pytest.raises(IndexError, match="too many indices"):
        x[None, [0], 1, 2]


# -- index forms drawn by Hypothesis ----------------------------------------------------


@st.composite
def index_forms(draw):
    """An x shape and an index mixing None, slices, integers, int arrays and at most one
    mask (alone among the advanced entries: its length is its count of True), with one
    advanced entry and one None at least."""
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    # Every int array's shape is a suffix of this one, so that they broadcast.
    adv_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))

    def array(n):
        sub = adv_shape[draw(st.integers(0, len(adv_shape))) :]
        size = int(np.prod(sub))
        values = draw(st.lists(st.integers(-n, n - 1), min_size=size, max_size=size))
        return np.array(values, dtype="int64").reshape(sub)

    entries, has_mask = [], False  # one entry per indexed dimension of x
    for n in shape[: draw(st.integers(1, ndim))]:
        kind = draw(st.sampled_from(["slice", "int", "array", "mask"]))
        is_array = [isinstance(e, np.ndarray) for e in entries]
        if kind == "int":
            entries.append(draw(st.integers(-n, n - 1)))
        elif kind == "array" and not has_mask:
            entries.append(array(n))
        elif kind == "mask" and not any(is_array):
            entries.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
            has_mask = True
        else:
            start = draw(st.one_of(st.none(), st.integers(-n, n)))
            stop = draw(st.one_of(st.none(), st.integers(-n, n)))
            step = draw(st.one_of(st.none(), st.sampled_from([-2, -1, 1, 2])))
            entries.append(slice(start, stop, step))
    if not any(isinstance(e, np.ndarray) for e in entries):
        k = draw(st.integers(0, len(entries) - 1))
        entries[k] = array(shape[k])
    for _ in range(draw(st.integers(1, 2))):
        entries.insert(draw(st.integers(0, len(entries))), None)
    return shape, tuple(entries)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(index_forms(), st.sampled_from(["float32", "float64"]))
def test_generated_index_forms_match_numpy(form, dtype):
    shape, idx = form
    xv = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
    want = xv[idx]
    x = tt.TensorType(dtype, shape=(None,) * len(shape))("x")
    sub = x[idx]
    assert all(s is None or s == w for s, w in zip(sub.type.shape, want.shape))
    yv = np.full(want.shape, 0.5, dtype=dtype)
    f = theano_dag.function(
        [x], [sub, sub.shape, tt.inc_subtensor(sub, yv)], mode=Mode(linker="py")
    )
    got, got_shape, got_inc = f(xv)
    np.testing.assert_array_equal(got, want)
    assert tuple(got_shape) == want.shape
    np.testing.assert_array_equal(got_inc, _numpy_inc(xv, idx, yv))
