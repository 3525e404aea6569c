"""What a function and a shared variable accept as a value, the same on every engine: an
ndarray subclass whose meaning an engine would drop (a masked array's mask, a matrix's
2-D semantics) is refused with a message naming the input; other subclasses (a memmap)
are read as plain arrays, and a refused ``set_value`` says which variable refused it."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

import theano_dag
import theano_dag.engines.dask
import theano_dag.engines.opencl
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.graph.op import as_op

OPENCL, _WHY = opencl_available()
# np.matrix is what some tests give on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
DASK = importlib.util.find_spec("dask") is not None

ENGINES = [
    pytest.param(lambda: None, id="cpu"),
    pytest.param("no_c", id="cpu_without_c"),
    pytest.param(lambda: "FAST_COMPILE", id="fast_compile"),
    pytest.param(lambda: Mode(linker="py", optimizer=None), id="py"),
    pytest.param(
        lambda: Mode(linker="opencl"),
        id="opencl",
        marks=pytest.mark.skipif(not OPENCL, reason=f"no OpenCL device: {_WHY}"),
    ),
    pytest.param(
        lambda: Mode(linker="dask"),
        id="dask",
        marks=pytest.mark.skipif(not DASK, reason="dask is not installed"),
    ),
]


def _compile(engine, inputs, output):
    flags = {"cxx": ""} if engine == "no_c" else {}
    mode = None if engine == "no_c" else engine()
    with config.change_flags(**flags):
        return theano_dag.function(inputs, output, mode=mode)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_masked_array_is_refused_before_and_after_the_fast_path(engine):
    v = tt.dvector("v")
    f = _compile(engine, [v], tt.log(v).sum())
    masked = np.ma.array([1.0, 2.0], mask=[0, 1])
    msg = (
        "Function: bad input 'v' (position 0): TensorType(float64, vector) does not take a "
        "numpy masked array: its mask would be ignored. Pass np.ma.filled(x, fill_value) to "
        "choose the masked entries' values, or x.data to use the values under the mask."
    )
    with pytest.raises(TypeError, match=re.escape(msg)):
        f(masked)
    # Once plain calls have installed the engine's fast call, the same refusal.
    for _ in range(3):
        assert f(np.array([1.0, 2.0])) == pytest.approx(np.log(2.0))
    with pytest.raises(TypeError, match=re.escape(msg)):
        f(masked)
    with pytest.raises(TypeError, match=re.escape(msg)):
        f(v=masked)
    # The documented ways round it give the answers they say.
    assert f(np.ma.filled(masked, 1.0)) == pytest.approx(0.0)
    assert f(masked.data) == pytest.approx(np.log(2.0))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_matrix_is_refused_and_a_memmap_comes_back_as_an_ndarray(engine, tmp_path):
    m = tt.dmatrix("m")
    f = _compile(engine, [m], m * m)
    for _ in range(3):
        f(np.ones((2, 2)))
    with pytest.raises(TypeError, match=re.escape("does not take a numpy.matrix")) as info:
        f(np.matrix([[1.0, 2.0], [3.0, 4.0]]))
    assert "bad input 'm' (position 0)" in str(info.value)
    mm = np.memmap(tmp_path / "m.bin", dtype="float64", mode="w+", shape=(2, 2))
    mm[:] = [[1.0, 2.0], [3.0, 4.0]]
    out = f(mm)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, [[1.0, 4.0], [9.0, 16.0]])


def test_shared_refuses_a_masked_array_and_a_matrix():
    with pytest.raises(ValueError, match=re.escape("shared: a numpy masked array is not a")):
        theano_dag.shared(np.ma.array([1.0, 2.0], mask=[0, 1]))
    with pytest.raises(ValueError, match=re.escape("shared: a numpy.matrix is not a tensor")):
        theano_dag.shared(np.matrix([[1.0]]))
    w = theano_dag.shared(np.zeros(2), name="w")
    with pytest.raises(TypeError, match="shared variable 'w': .* does not take a numpy masked"):
        w.set_value(np.ma.array([1.0, 2.0], mask=[0, 1]))
    np.testing.assert_array_equal(w.get_value(), [0.0, 0.0])


SHARED = [
    pytest.param(theano_dag.shared, id="numpy"),
    pytest.param(
        lambda v, name: theano_dag.engines.opencl.opencl_shared(v, name=name),
        id="opencl",
        marks=pytest.mark.skipif(not OPENCL, reason=f"no OpenCL device: {_WHY}"),
    ),
    pytest.param(
        lambda v, name: theano_dag.engines.dask.dask_shared(v, name=name),
        id="dask",
        marks=pytest.mark.skipif(not DASK, reason="dask is not installed"),
    ),
]


@pytest.mark.parametrize("make", SHARED)
def test_set_value_of_the_wrong_rank_or_dtype_says_so_in_one_sentence(make):
    w = make(np.zeros(3), name="w")
    with pytest.raises(TypeError) as info:
        w.set_value(np.zeros((2, 2)))
    assert str(info.value) == (
        "Cannot set the value of shared variable 'w': TensorType(float64, vector): wrong "
        "number of dimensions: expected 1, got 2 with shape (2, 2)."
    )
    with pytest.raises(TypeError) as info:
        w.set_value(np.zeros(3, dtype=np.complex128))
    assert str(info.value).startswith(
        "Cannot set the value of shared variable 'w': TensorType(float64, vector) cannot "
        "store a value of dtype complex128 without risking loss of precision."
    )
    np.testing.assert_array_equal(w.get_value(), np.zeros(3))
    unnamed = make(np.zeros(3), name=None)
    with pytest.raises(TypeError, match=r"^Cannot set the value of shared variable \(unnamed\)"):
        unnamed.set_value(np.zeros((1, 1)))


NONE_ENGINES = [
    pytest.param(lambda: None, id="cpu"),
    pytest.param("no_c", id="cpu_without_c"),
    pytest.param(lambda: "FAST_COMPILE", id="fast_compile"),
    pytest.param(lambda: Mode(linker="py", optimizer=None), id="py"),
]


@pytest.mark.parametrize("engine", NONE_ENGINES)
def test_none_given_for_an_array_input_reaches_the_ops_that_read_it(engine):
    # Theano passes None through to the ops: Default picks its second input, Eye and Tri
    # read a missing M as numpy does (M = N). The CPU engine runs such a call on the ops'
    # perform (None has no shape to plan), then its planned code again.
    x, y = tt.dscalars("x", "y")
    f = _compile(engine, [x, y], tt.default(x, y))
    assert f(1.0, 2.0) == 1.0
    assert f(None, 2.0) == 2.0
    assert f(1.0, None) == 1.0
    assert f(3.0, 2.0) == 3.0
    n, m, k = tt.iscalars("n", "m", "k")
    for build, ref in ((tt.eye, np.eye), (tt.tri, np.tri)):
        for dtype in ("float32", "float64", "int8"):
            g = _compile(engine, [n, m, k], build(n, m, k, dtype=dtype))
            for args in ((3, None, 0), (3, 5, 1), (4, None, -1), (5, 3, 0)):
                out = g(*args)
                assert out.dtype == np.dtype(dtype)
                np.testing.assert_array_equal(out, ref(*args, dtype=dtype))


@pytest.mark.parametrize("engine", NONE_ENGINES)
def test_a_state_set_to_none_takes_the_default_of_the_graph(engine):
    # Theano's test_default_state: a state input whose value is set to None reads as
    # Default's second input, and the update stores a number again.
    x, y = tt.dscalars("x", "y")
    new_x = y + tt.default(x, 3.8)
    f = _compile(engine, [y, theano_dag.In(x, update=new_x, value=12.0)], new_x)
    assert f(3.0) == 15.0
    f["x"] = None
    assert f["x"] is None
    assert f(1.0) == pytest.approx(4.8)
    assert f(2.2) == pytest.approx(7.0)
    assert f["x"] == pytest.approx(7.0)


@pytest.mark.parametrize("engine", NONE_ENGINES)
def test_none_given_to_an_op_that_needs_a_value_is_refused_naming_the_input(engine):
    # A None passes only to the ops that read one (Op.takes_none): for any other reader
    # the call is refused, naming the input and the op. With trust_input the op itself
    # refuses it, and the node's inputs say the value was the caller's None, not a value
    # the engine left uncomputed.
    x = tt.fvector("x")
    f = _compile(engine, [x], x.sum() * 2)
    want = (
        r"^Function: bad input 'x' \(position 0\): None, where TensorType\(float32, vector\) "
        r"is read by .*, which takes a value"
    )
    with pytest.raises(TypeError, match=want):
        f(None)
    assert f(np.ones(3, "float32")) == 6.0
    f.trust_input = True
    with pytest.raises(Exception) as info:
        f(None)
    msg = str(info.value)
    assert "Inputs shapes and dtypes: [None (given as the input's value)" in msg
    assert "not computed" not in msg
    assert f(np.ones(3, "float32")) == 6.0


@pytest.mark.parametrize("engine", NONE_ENGINES)
def test_none_given_to_an_elementwise_op_raises_and_is_never_read_as_nan(engine):
    # numpy reads None as NaN when it converts it to a float: x * y + 1 returned [nan],
    # exp(x * y) nan, cumsum(x) [nan] and alloc(x, 3, 2) a matrix of NaN for f(None, ...).
    # The call refuses it; with trust_input an elementwise op and a DimShuffle do.
    x, y = tt.dvector("x"), tt.dscalar("y")
    cases = [
        (x * y + 1, lambda a, b: a * b + 1),
        (tt.exp(x * y), lambda a, b: np.exp(a * b)),
        (tt.cast(x * y, "int32"), lambda a, b: (a * b).astype("int32")),
        (tt.cumsum(x) * y, lambda a, b: np.cumsum(a) * b),
        (tt.alloc(x, 3, 2) * y, lambda a, b: np.broadcast_to(a, (3, 2)) * b),
    ]
    for out, ref in cases:
        f = _compile(engine, [x, y], out)
        with pytest.raises(TypeError, match=r"bad input 'x' \(position 0\): None, where "):
            f(None, 1.0)
        with pytest.raises(TypeError, match=r"bad input 'y' \(position 1\): None, where "):
            f(np.ones(2), None)
        np.testing.assert_array_equal(f(np.arange(2.0), 3.0), ref(np.arange(2.0), 3.0))
    f = _compile(engine, [x, y], x * y + 1)
    f.trust_input = True
    with pytest.raises(TypeError, match=r"input 0 is None, not an array of float64"):
        f(None, np.asarray(1.0))
    with pytest.raises(TypeError, match=r"input 0 is None, not an array of float64"):
        f(np.ones(2), None)  # (at the DimShuffle that makes y a row)


@pytest.mark.parametrize("engine", [p for p in ENGINES if p.id == "dask"])
def test_the_dask_engine_refuses_none_naming_the_input(engine):
    # It read a None given to default(x, z) as NaN (it gave nan, not z): it computes on
    # arrays only. (The OpenCL engine runs default on the host: test_opencl.py.)
    x, z = tt.dvector("x"), tt.dvector("z")
    f = _compile(engine, [x, z], tt.default(x, z))
    with pytest.raises(TypeError, match=r" engine: input 'x' is None, not a value of "):
        f(None, np.ones(2))
    np.testing.assert_array_equal(f(np.full(2, 2.0), np.ones(2)), [2.0, 2.0])


@as_op([tt.dvector], [tt.dvector])
def _same(v):
    return v  # the caller's array itself


@as_op([tt.dvector], [tt.dvector, tt.dvector])
def _reversed_twice(v):
    r = v[::-1]
    return r, r  # a view of the input, twice


@pytest.mark.parametrize("engine", ENGINES)
def test_an_as_op_returning_its_input_leaves_the_callers_array_alone(engine):
    # The function declares no view, so its output was taken for a fresh array: exp and
    # the product wrote in place into it, which was the caller's array (PyMC3's
    # simple_arbitrary_det model returns its input so).
    v = tt.dvector("v")
    r1, r2 = _reversed_twice(v)
    out = tt.exp(_same(v)) + _same(v) * 2 + tt.exp(r1) * r2
    f = _compile(engine, [v], [out, _same(v)])
    a = np.array([1.0, 2.0, 3.0])
    want = np.exp(a) + a * 2 + np.exp(a[::-1]) * a[::-1]
    for _ in range(2):
        got, same = f(a)
        np.testing.assert_allclose(got, want)
        np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])
        assert not np.shares_memory(same, a)
        np.testing.assert_array_equal(same, a)
