"""DebugMode's checks of ops with C code of their own (COps): the C code against the
op's Python ``perform``, the C code's view and destroy maps, and every op's handling of
output storage that holds a buffer already (``check_preallocated_output``)."""

import warnings

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import config
from theano_dag.compile.debugmode import (
    PREALLOCATED_KINDS,
    BadDestroyMap,
    BadEngineOutput,
    BadThunkOutput,
    BadViewMap,
    DebugMode,
)
from theano_dag.engines.cpu.native import cc
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import COp, Op

# The tests of C code need a compiler (config.cxx, empty in the run without one).
needs_c = pytest.mark.skipif(
    not (config.cxx and cc.get_toolchain(config.cxx)), reason="no C compiler (config.cxx)"
)

# Allocating the output unless the storage holds one of the right shape, as Theano's C
# ops do; %(z)s, %(a)s and %(fail)s substituted by each op.
_ALLOC_2D = """
if (!%(z)s || PyArray_NDIM(%(z)s) != 2
    || PyArray_DIMS(%(z)s)[0] != PyArray_DIMS(%(a)s)[0]
    || PyArray_DIMS(%(z)s)[1] != PyArray_DIMS(%(a)s)[1]) {
    Py_XDECREF(%(z)s);
    %(z)s = (PyArrayObject*)PyArray_SimpleNew(2, PyArray_DIMS(%(a)s),
                                              PyArray_TYPE(%(a)s));
    if (!%(z)s) %(fail)s;
}
"""


# The same, but reusing any buffer of enough values, whatever its shape (a bug).
_ALLOC_ANY = """
if (!%(z)s || PyArray_SIZE(%(z)s) < PyArray_SIZE(%(a)s)) {
    Py_XDECREF(%(z)s);
    %(z)s = (PyArrayObject*)PyArray_SimpleNew(2, PyArray_DIMS(%(a)s), NPY_FLOAT64);
    if (!%(z)s) %(fail)s;
}
"""


class Shifted(COp):
    """``a + shift`` of a float64 vector: ``py`` in its Python code, ``c`` in its C code
    (equal: a correct op; unequal: C and Python disagree)."""

    __props__ = ("py", "c")

    def __init__(self, py=0.0, c=0.0):
        self.py, self.c = py, c

    def make_node(self, a):
        a = tt.as_tensor_variable(a)
        return Apply(self, [a], [tt.dvector()])

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0] + self.py

    def c_code(self, node, name, inp, out, sub):
        a, z = inp[0], out[0]
        return f"""
        Py_XDECREF({z});
        {z} = (PyArrayObject*)PyArray_SimpleNew(1, PyArray_DIMS({a}), NPY_FLOAT64);
        if (!{z}) {sub["fail"]};
        for (npy_intp i = 0; i < PyArray_DIMS({a})[0]; ++i)
            *(double*)PyArray_GETPTR1({z}, i) = *(double*)PyArray_GETPTR1({a}, i) + {self.c!r};
        """

    def c_code_cache_version(self):
        return (1,)


class Doubled(COp):
    """``2 * a`` of a float64 matrix in C only (its Python code raises), reusing a
    preallocated output of the right shape; ``contiguous=True`` writes it as if it were
    C-contiguous (a bug of the kind the preallocated buffers find), ``reuse_any=True``
    reuses any buffer holding enough values (ignoring its shape)."""

    __props__ = ("contiguous", "reuse_any")

    def __init__(self, contiguous=False, reuse_any=False):
        self.contiguous, self.reuse_any = contiguous, reuse_any

    def make_node(self, a):
        a = tt.as_tensor_variable(a)
        return Apply(self, [a], [a.type()])

    def perform(self, node, inputs, out):
        raise NotImplementedError("C code only")

    def c_code(self, node, name, inp, out, sub):
        a, z = inp[0], out[0]
        subs = {"a": a, "z": z, "fail": sub["fail"]}
        if self.reuse_any:
            alloc = _ALLOC_ANY % subs
        else:
            alloc = _ALLOC_2D % subs
        if self.contiguous or self.reuse_any:
            loop = """
            npy_intp n = PyArray_DIMS(%(a)s)[0], m = PyArray_DIMS(%(a)s)[1];
            double* zp = (double*)PyArray_DATA(%(z)s);
            for (npy_intp i = 0; i < n; ++i)
                for (npy_intp j = 0; j < m; ++j)
                    zp[i * m + j] = 2 * *(double*)PyArray_GETPTR2(%(a)s, i, j);
            """
        else:
            loop = """
            for (npy_intp i = 0; i < PyArray_DIMS(%(a)s)[0]; ++i)
                for (npy_intp j = 0; j < PyArray_DIMS(%(a)s)[1]; ++j)
                    *(double*)PyArray_GETPTR2(%(z)s, i, j) =
                        2 * *(double*)PyArray_GETPTR2(%(a)s, i, j);
            """
        return alloc + loop % subs

    def c_code_cache_version(self):
        return (1,)


class Aliasing(COp):
    """C code that returns its input (``"view"``) or doubles it in place
    (``"destroy"``), with no view_map or destroy_map saying so."""

    __props__ = ("how",)

    def __init__(self, how):
        self.how = how

    def make_node(self, a):
        a = tt.as_tensor_variable(a)
        return Apply(self, [a], [a.type()])

    def c_code(self, node, name, inp, out, sub):
        a, z = inp[0], out[0]
        double = (
            f"for (npy_intp i = 0; i < PyArray_DIMS({a})[0]; ++i)"
            f" *(double*)PyArray_GETPTR1({a}, i) *= 2;"
            if self.how == "destroy"
            else ""
        )
        return f"Py_XDECREF({z}); Py_INCREF({a}); {z} = {a}; {double}"

    def c_code_cache_version(self):
        return (1,)


class Fortran(COp):
    """``a + 1`` of a float64 matrix: its Python code returns a C-ordered array, its C
    code a Fortran-ordered one (equal values, other strides)."""

    __props__ = ()

    def make_node(self, a):
        a = tt.as_tensor_variable(a)
        return Apply(self, [a], [a.type()])

    def perform(self, node, inputs, out):
        out[0][0] = np.ascontiguousarray(inputs[0] + 1)

    def c_code(self, node, name, inp, out, sub):
        a, z = inp[0], out[0]
        return f"""
        Py_XDECREF({z});
        {z} = (PyArrayObject*)PyArray_NewLikeArray({a}, NPY_FORTRANORDER, NULL, 0);
        if (!{z}) {sub["fail"]};
        for (npy_intp i = 0; i < PyArray_DIMS({a})[0]; ++i)
            for (npy_intp j = 0; j < PyArray_DIMS({a})[1]; ++j)
                *(double*)PyArray_GETPTR2({z}, i, j) = *(double*)PyArray_GETPTR2({a}, i, j) + 1;
        """

    def c_code_cache_version(self):
        return (1,)


class RavelReuse(Op):
    """Python code that writes ``2 * a`` into a preallocated output of the right shape
    through ``ravel()`` (a copy where the buffer is not C-contiguous: the write is lost)."""

    __props__ = ()

    def make_node(self, a):
        a = tt.as_tensor_variable(a)
        return Apply(self, [a], [a.type()])

    def perform(self, node, inputs, out):
        (a,) = inputs
        z = out[0][0]
        if z is None or z.shape != a.shape:
            out[0][0] = 2 * a
        else:
            z.ravel()[...] = (2 * a).ravel()


def _matrix():
    return np.arange(12.0).reshape(3, 4)


@needs_c
def test_c_code_and_perform_that_agree_pass():
    x = tt.dvector("x")
    f = theano_dag.function([x], Shifted(0.5, 0.5)(x), mode=DebugMode())
    np.testing.assert_allclose(f(np.array([1.0, 2.0])), [1.5, 2.5])


@needs_c
def test_c_code_that_disagrees_with_perform_raises_bad_thunk_output():
    x = tt.dvector("x")
    op = Shifted(py=0.0, c=0.5)
    # Summed: the op's output is not the function's, so only the node's check sees it.
    f = theano_dag.function([x], Shifted()(op(x)).sum(), mode=DebugMode())
    with pytest.raises(BadThunkOutput) as info:
        f(np.array([1.0, 2.0, 3.0]))
    err = info.value
    assert err.r.owner.op == op and err.offending_op() is Shifted
    assert (err.thunk1, err.thunk2) == ("perform", "c_code")
    np.testing.assert_array_equal(err.val1, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(err.val2, [1.5, 2.5, 3.5])
    np.testing.assert_array_equal(err.inputs_val[0], [1.0, 2.0, 3.0])
    assert "BadThunkOutput" in str(err) and "Shifted" in str(err)


@needs_c
def test_check_py_code_false_runs_the_c_code_alone():
    x = tt.dmatrix("x")
    op = Doubled()
    # Its perform raises: the default check of the Python code skips it as missing...
    f = theano_dag.function([x], op(x), mode=DebugMode())
    np.testing.assert_array_equal(f(_matrix()), 2 * _matrix())
    # ...and check_py_code=False does not run it at all, even where it disagrees.
    mode = DebugMode(check_py_code=False)
    g = theano_dag.function([x], Shifted()(Shifted(0.0, 0.5)(x[0])), mode=mode)
    np.testing.assert_array_equal(g(_matrix()), _matrix()[0] + 0.5)


@needs_c
def test_check_c_code_false_makes_perform_the_reference():
    # The engine still runs the C code, so the function's output is then the mismatch.
    x = tt.dvector("x")
    f = theano_dag.function([x], Shifted(0.0, 0.5)(x), mode=DebugMode(check_c_code=False))
    with pytest.raises(BadEngineOutput):
        f(np.array([1.0]))


@needs_c
def test_c_code_that_views_or_destroys_an_undeclared_input_is_caught():
    x = tt.dvector("x")
    mode = DebugMode(check_py_code=False)
    with pytest.raises(BadViewMap):
        theano_dag.function([x], Aliasing("view")(x) * 2, mode=mode)(np.array([1.0, 2.0]))
    with pytest.raises(BadDestroyMap):
        theano_dag.function([x], Aliasing("destroy")(x), mode=mode)(np.array([1.0, 2.0]))


@needs_c
@pytest.mark.parametrize(
    "kinds, fails",
    [
        (["c_contiguous"], False),
        (["previous"], False),
        (["f_contiguous"], True),
        (["strided"], True),
        (["ALL"], True),
    ],
)
@pytest.mark.parametrize("as_output", [False, True])
def test_c_code_assuming_a_contiguous_output_buffer_is_found(kinds, fails, as_output):
    x = tt.dmatrix("x")
    y = Doubled(contiguous=True)(x)
    out = y if as_output else tt.dot(y, np.eye(4))
    f = theano_dag.function([x], out, mode=DebugMode(check_preallocated_output=kinds))
    if fails:
        with pytest.raises(BadThunkOutput) as info:
            f(_matrix())
        assert info.value.thunk1 == "Reference value"
        assert info.value.thunk2.startswith("c_code with ")
        np.testing.assert_array_equal(info.value.val1, 2 * _matrix())
    else:
        np.testing.assert_array_equal(f(_matrix()) @ np.eye(4), 2 * _matrix())


@needs_c
def test_c_code_handling_every_buffer_passes_all_kinds():
    x = tt.dmatrix("x")
    f = theano_dag.function([x], Doubled()(x), mode=DebugMode(check_preallocated_output=["ALL"]))
    np.testing.assert_array_equal(f(_matrix()), 2 * _matrix())


@needs_c
def test_a_buffer_of_the_wrong_shape_reused_is_found():
    x = tt.dmatrix("x")
    op = Doubled(reuse_any=True)
    f = theano_dag.function([x], op(x), mode=DebugMode(check_preallocated_output=["wrong_size"]))
    with pytest.raises(BadThunkOutput) as info:
        f(_matrix())
    # (a row fewer: the buffer is too small and replaced; a row more: reused as it is)
    assert info.value.thunk2 == "c_code with wrong_size(1, 0) output"
    assert info.value.val2.shape == (4, 4)


def test_python_code_losing_its_write_to_a_preallocated_buffer_is_found():
    x = tt.dmatrix("x")
    f = theano_dag.function(
        [x], RavelReuse()(x), mode=DebugMode(check_preallocated_output=["c_contiguous"])
    )
    np.testing.assert_array_equal(f(_matrix()), 2 * _matrix())
    f = theano_dag.function(
        [x], RavelReuse()(x), mode=DebugMode(check_preallocated_output=["f_contiguous"])
    )
    with pytest.raises(BadThunkOutput) as info:
        f(_matrix())
    assert info.value.thunk2 == "perform with f_contiguous output"
    assert np.isnan(info.value.val2).all()  # the buffer as DebugMode filled it


def test_the_packages_own_ops_handle_every_preallocated_buffer():
    x, y = tt.dmatrix("x"), tt.dvector("y")
    i = tt.lscalar("i")
    outs = [
        tt.dot(x, x.T) + y[:3],
        x[1:, ::2].sum(axis=0) * tt.exp(y[:2]),
        tt.set_subtensor(x[i], y),
        tt.concatenate([x, x * 2]).reshape((4, 6)).max(axis=1),
        tt.nnet.softmax(x),
        tt.sort(x, axis=1)[:, ::-1],
        tt.cumsum(x, axis=0).T,
    ]
    xv, yv = _matrix() / 10, np.linspace(-1.0, 1.0, 4)
    mode = DebugMode(check_preallocated_output=["ALL"], sample_inputs=[[xv, yv, 1]])
    f = theano_dag.function([x, y, i], outs, mode=mode)
    ref = theano_dag.function([x, y, i], outs, mode="FAST_COMPILE")(xv, yv, 1)
    for got, want in zip(f(xv, yv, 1), ref):
        np.testing.assert_allclose(got, want)


@needs_c
@pytest.mark.parametrize("level", [0, 1, 2])
def test_require_matching_strides(level):
    x = tt.dmatrix("x")
    f = theano_dag.function([x], Fortran()(x) * 1, mode=DebugMode(require_matching_strides=level))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if level == 2:
            with pytest.raises(BadThunkOutput):
                f(_matrix())
            return
        np.testing.assert_array_equal(f(_matrix()), _matrix() + 1)
    strides = [w for w in seen if "output strides" in str(w.message)]
    assert len(strides) == (1 if level == 1 else 0)


def test_the_defaults_are_theanos_flags_and_bad_settings_are_refused():
    with config.change_flags(
        DebugMode__check_preallocated_output="f_contiguous:strided",
        DebugMode__check_py=False,
        DebugMode__check_strides=1,
    ):
        mode = DebugMode()
    assert mode.check_preallocated_output == ["f_contiguous", "strided"]
    assert mode.check_py_code is False and mode.require_matching_strides == 1
    assert DebugMode().check_preallocated_output == []
    assert set(PREALLOCATED_KINDS) >= {"previous", "c_contiguous", "f_contiguous", "strided"}
    with pytest.raises(ValueError, match=r"unknown kinds of preallocated output \['fortran'\]"):
        DebugMode(check_preallocated_output=["fortran"])
    with pytest.raises(ValueError, match="check_c_code and check_py_code cannot both be off"):
        DebugMode(check_c_code=False, check_py_code=False)
    with pytest.raises(ValueError, match="require_matching_strides must be 0, 1 or 2"):
        DebugMode(require_matching_strides=3)


@needs_c
def test_rewrites_are_checked_on_values_through_c_code_only_ops():
    # The rewrite checker evaluates graphs as the engines run them: an op whose perform
    # raises is run by its C code, so the values of rewrites around it are checked.
    x = tt.dmatrix("x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = theano_dag.function([x], Doubled()(x * 1.0) + 0, mode=DebugMode())
    np.testing.assert_array_equal(f(_matrix()), 2 * _matrix())
