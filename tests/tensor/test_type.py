"""TensorType: constructors, static shapes, filtering (with its error messages), equality."""

import pickle

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.config import config
from theano_dag.graph.op import as_op
from theano_dag.tensor.type import TensorType


@pytest.mark.parametrize(
    "name,dtype,bcast",
    [
        ("bscalar", "int8", ()),
        ("ivector", "int32", (False,)),
        ("lmatrix", "int64", (False, False)),
        ("frow", "float32", (True, False)),
        ("dcol", "float64", (False, True)),
        ("ftensor3", "float32", (False,) * 3),
        ("dtensor4", "float64", (False,) * 4),
        ("wvector", "int16", (False,)),
    ],
)
def test_constructors(name, dtype, bcast):
    v = getattr(tt, name)("v")
    assert (v.name, v.dtype, v.broadcastable, v.ndim) == ("v", dtype, bcast, len(bcast))
    assert isinstance(v, tt.TensorVariable)


def test_unprefixed_constructors_follow_floatx():
    assert tt.matrix().dtype == "float64"
    with config.change_flags(floatX="float32"):
        assert tt.matrix().dtype == "float32"
        assert tt.tensor3().dtype == "float32"
    assert tt.vector(dtype="int8").dtype == "int8"


def test_static_shape():
    t = TensorType("float64", shape=(None, 3, 1))
    assert t.shape == (None, 3, 1)
    assert t.broadcastable == (False, False, True)
    assert t.ndim == 3
    assert TensorType("float64", (True, False)).shape == (1, None)
    assert tt.dmatrix(shape=(2, None)).type.shape == (2, None)
    with pytest.raises(TypeError, match="static shape entries must be None or ints >= 0"):
        TensorType("float64", shape=(-1,))
    with pytest.raises(TypeError, match="unsupported dtype 'foo'"):
        TensorType("foo", (False,))
    with pytest.raises(TypeError, match="needs `broadcastable` or `shape`"):
        TensorType("float64")


def test_equality_and_hash():
    a = TensorType("float32", (False, True))
    b = TensorType("float32", shape=(None, 1))
    assert a == b and hash(a) == hash(b)
    assert a != TensorType("float64", (False, True))
    assert a != TensorType("float32", (False, False))
    assert TensorType("float64", shape=(None, 3)) != TensorType("float64", (False, False))


def test_tensor_function():
    x = tt.tensor("int16", (False, True, False), name="x")
    assert x.type == TensorType("int16", shape=(None, 1, None)) and x.name == "x"
    assert tt.tensor(dtype="float32", shape=(2, 3)).type.shape == (2, 3)


# -- filter ------------------------------------------------------------------------


def test_filter_passes_exact_arrays_through():
    a = np.zeros((2, 3), dtype="float32")
    assert tt.fmatrix().type.filter(a) is a


def test_filter_safe_casts():
    t = tt.dvector().type
    out = t.filter(np.array([1, 2], dtype="int32"))
    assert out.dtype == np.float64 and out.tolist() == [1.0, 2.0]
    assert t.filter([1, 2.5]).tolist() == [1.0, 2.5]
    assert tt.ivector().type.filter([3, 4]).dtype == np.int32


def test_filter_unsafe_array_cast_message():
    with pytest.raises(TypeError) as e:
        tt.fvector().type.filter(np.array([1.5]))
    assert str(e.value) == (
        "TensorType(float32, vector) cannot store a value of dtype float64 without risking "
        "loss of precision. If you do not mind this loss, you can: 1) explicitly cast your "
        "data to float32, or 2) set allow_input_downcast=True when calling function."
    )


def test_filter_lossy_list_message():
    with pytest.raises(TypeError) as e:
        tt.bvector().type.filter([300])
    assert str(e.value).startswith(
        "TensorType(int8, vector) cannot store accurately value [300], it would be "
        "represented as [44]."
    )


def test_filter_python_float_into_floatx():
    with config.change_flags(floatX="float32"):
        v = tt.fscalar().type.filter(0.1)
        assert v.dtype == np.float32 and v.shape == ()
    with pytest.raises(TypeError, match="cannot store accurately value 0.1"):
        tt.fscalar().type.filter(0.1)  # floatX is float64 here: 0.1 is not exact in float32
    assert tt.fscalar().type.filter(0.5).dtype == np.float32  # exact values pass anyway


def test_filter_allow_downcast():
    out = tt.fvector().type.filter(np.array([1.1]), allow_downcast=True)
    assert out.dtype == np.float32 and out[0] == np.float32(1.1)
    assert tt.bvector().type.filter([300], allow_downcast=True)[0] == 44


def test_filter_strict():
    with pytest.raises(TypeError, match=r"expected an ndarray with dtype=float32 \(got float64\)"):
        tt.fvector().type.filter(np.zeros(2), strict=True)
    with pytest.raises(TypeError, match=r"expected an ndarray object \(got list\)"):
        tt.fvector().type.filter([1.0], strict=True)


def test_filter_ndim_and_broadcast_messages():
    with pytest.raises(TypeError) as e:
        tt.dmatrix().type.filter(np.zeros(3))
    assert str(e.value) == (
        "TensorType(float64, matrix): wrong number of dimensions: expected 2, got 1 with "
        "shape (3,)."
    )
    with pytest.raises(TypeError) as e:
        tt.drow().type.filter(np.zeros((2, 3)))
    assert str(e.value) == (
        "TensorType(float64, row): non-unit value on shape on a broadcastable dimension: "
        "dimension 0 has length 2, expected 1 (shape (2, 3))."
    )
    with pytest.raises(TypeError, match=r"dimension 1 has length 4, expected 3"):
        TensorType("float64", shape=(None, 3)).filter(np.zeros((2, 4)))


def test_filter_rejects_variables():
    with pytest.raises(TypeError, match="Expected an array-like object, but found a Variable"):
        tt.dvector().type.filter(tt.dvector())


def test_is_valid_value():
    t = tt.dmatrix().type
    assert t.is_valid_value(np.zeros((2, 2)))
    assert not t.is_valid_value(np.zeros((2, 2), dtype="float32"))
    assert not t.is_valid_value(np.zeros(2))


# -- values_eq ---------------------------------------------------------------------


def test_values_eq_nan_aware():
    a = np.array([1.0, np.nan])
    assert TensorType.values_eq(a, a.copy())
    assert not TensorType.values_eq(a, np.array([1.0, 2.0]))
    assert not TensorType.values_eq(a, a.astype("float32"))
    assert TensorType.values_eq(a, a.astype("float32"), force_same_dtype=False)


def test_values_eq_approx_tolerances_by_dtype():
    x32 = np.float32([1.0, 2.0])
    assert TensorType.values_eq_approx(x32, x32 * np.float32(1 + 2e-5))
    x64 = x32.astype("float64")
    assert not TensorType.values_eq_approx(x64, x64 * (1 + 2e-5))
    assert TensorType.values_eq_approx(x64, x64 * (1 + 1e-10))
    # float64's bounds are numpy's allclose defaults, as Theano's: an ulp of float32 passes
    assert TensorType.values_eq_approx(x64, x64 * (1 + 6e-8))
    assert tt.values_eq_approx_tolerances["float64"] == (1e-5, 1e-8)
    assert not TensorType.values_eq_approx(np.array([np.inf]), np.array([-np.inf]))
    assert not TensorType.values_eq_approx(np.array([np.nan]), np.array([1.0]))
    assert TensorType.values_eq_approx(
        np.array([np.nan, 1.0]), np.array([5.0, 1.0]), allow_remove_nan=True
    )
    assert not TensorType.values_eq_approx(np.zeros(2), np.zeros(3))


# -- variables of compatible types ----------------------------------------------------


def test_convert_variable_accepts_more_specific_types():
    general = TensorType("float64", shape=(None, 3))
    specific = TensorType("float64", shape=(1, 3))("s")
    assert general.filter_variable(specific) is specific
    assert tt.dmatrix().type.filter_variable(tt.drow("r")).name == "r"
    with pytest.raises(TypeError, match="Cannot convert Type TensorType"):
        tt.drow().type.filter_variable(tt.dmatrix())
    with pytest.raises(TypeError, match="Cannot convert Type"):
        tt.dmatrix().type.filter_variable(tt.fmatrix())


def test_filter_variable_wraps_values_as_constants():
    c = tt.dvector().type.filter_variable([1.0, 2.0])
    assert isinstance(c, tt.TensorConstant) and c.data.tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    "name, dtype, ndim", [("fmatrix", "float32", 2), ("dvector", "float64", 1)]
)
def test_typed_constructors_are_tensor_types(name, dtype, ndim):
    # Theano's dmatrix, lscalar... are TensorTypes: equal to the plain type (both ways,
    # with one hash), usable as as_op's types, and callable to make variables.
    ctor = getattr(tt, name)
    plain = TensorType(dtype, shape=(None,) * ndim)
    assert ctor == plain and plain == ctor and hash(ctor) == hash(plain)
    assert {plain: 1}[ctor] == 1 and pickle.loads(pickle.dumps(ctor)) == ctor
    x = ctor("x")
    assert type(x.type) is TensorType and x.type == ctor and x.name == "x"
    assert ctor.clone(dtype="int32") == TensorType("int32", shape=(None,) * ndim)

    @as_op([ctor], [ctor])
    def twice(v):
        return v * 2

    data = np.ones((2,) * ndim, dtype=dtype)
    out = theano_dag.function([x], twice(x))(data)
    np.testing.assert_array_equal(out, data * 2)
    assert out.dtype == dtype


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_text_that_is_no_number_is_a_value_error_too(dtype):
    t = TensorType(dtype, shape=(None,))
    for error in (TypeError, ValueError):
        with pytest.raises(error, match="cannot convert"):
            t.filter("adsf")
    s = theano_dag.shared(np.zeros(2, dtype=dtype))
    with pytest.raises(ValueError):
        s.set_value("adsf")
