"""COp: an Op with only C code (Theano's tutorial ops), compiled by the CPU engine's
compiler and cache and run by every engine; Theano's linker names."""

import os
import pickle

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compat import gof as compat_gof
from theano_dag.compile.mode import Mode, get_linker
from theano_dag.engines.cpu import CPULinker
from theano_dag.engines.cpu.native import cc
from theano_dag.engines.cpu.native.cop import c_source
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import COp, Op
from theano_dag.graph.utils import MethodNotDefined

pytestmark = pytest.mark.skipif(not cc.get_toolchain("gcc"), reason="no C compiler")


class Fibby(COp):
    """Theano's tutorial op: y[i] = y[i-1] * y[i-2] + x[i], with no perform."""

    __props__ = ()

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        assert x.ndim == 1
        return Apply(self, [x], [x.type()])

    def c_code(self, node, name, inames, onames, sub):
        (x,) = inames
        (y,) = onames
        fail = sub["fail"]
        return """
            Py_XDECREF(%(y)s);
            %(y)s = (PyArrayObject*)PyArray_FromArray(%(x)s, 0, NPY_ARRAY_ENSURECOPY);
            if (!%(y)s)
              %(fail)s;
            {
              dtype_%(y)s * y = (dtype_%(y)s*)PyArray_DATA(%(y)s);
              dtype_%(x)s * x = (dtype_%(x)s*)PyArray_DATA(%(x)s);
              for (int i = 2; i < PyArray_DIMS(%(x)s)[0]; ++i)
                y[i] = y[i-1] * y[i-2] + x[i];
            }
            """ % locals()  # noqa: UP031 (Theano's substitution style, as users write it)

    def c_code_cache_version(self):
        return (1,)


class ScaledNorm(COp):
    """Support code, a header and a scale from __props__; raises a Python error."""

    __props__ = ("scale",)

    def __init__(self, scale):
        self.scale = scale

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        return Apply(self, [x], [tt.TensorType(x.dtype, ())()])

    def c_headers(self, **kwargs):
        return ["<math.h>"]

    def c_support_code(self, **kwargs):
        return "static double td_sq(double v) { return v * v; }"

    def c_code(self, node, name, inp, out, sub):
        return """
        if (PyArray_NDIM(%(x)s) != 1 || PyArray_DIMS(%(x)s)[0] == 0) {
            PyErr_SetString(PyExc_ValueError, "ScaledNorm: an empty or not 1-d input");
            %(fail)s
        }
        Py_XDECREF(%(z)s);
        %(z)s = (PyArrayObject*)PyArray_ZEROS(0, NULL, type_num_%(x)s, 0);
        {
            double acc = 0;
            for (npy_intp i = 0; i < PyArray_DIMS(%(x)s)[0]; ++i)
                acc += td_sq(*(dtype_%(x)s*)PyArray_GETPTR1(%(x)s, i));
            *(dtype_%(z)s*)PyArray_DATA(%(z)s) = (dtype_%(z)s)(%(scale)s * sqrt(acc));
        }
        """ % dict(x=inp[0], z=out[0], fail=sub["fail"], scale=repr(float(self.scale)))  # noqa: UP031


def fibby_ref(x):
    y = np.array(x, copy=True)
    for i in range(2, len(y)):
        y[i] = y[i - 1] * y[i - 2] + x[i]
    return y


MODES = ["FAST_RUN", "FAST_COMPILE", Mode(linker="c"), Mode(linker="cvm"), Mode(linker="c|py")]


@pytest.mark.parametrize("mode", MODES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_c_only_op_runs_in_every_mode(mode, dtype):
    x = tt.vector("x", dtype=dtype)
    f = theano_dag.function([x], Fibby()(x) * 2, mode=mode)
    xv = np.array([1.0, 2.0, 0.5, 1.5, -1.0], dtype=dtype)
    got = f(xv)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, 2 * fibby_ref(xv), rtol=1e-6)
    np.testing.assert_array_equal(xv, [1.0, 2.0, 0.5, 1.5, -1.0])  # input untouched


def test_support_code_headers_props_strides_and_python_errors():
    x = tt.dvector("x")
    f = theano_dag.function([x], ScaledNorm(2.0)(x))
    xv = np.arange(10.0)[::3]  # strided: the op reads through PyArray_GETPTR1
    np.testing.assert_allclose(f(xv), 2.0 * np.linalg.norm(xv))
    with pytest.raises(ValueError, match="ScaledNorm: an empty or not 1-d input") as info:
        f(np.zeros(0))
    assert "Apply node that caused the error: ScaledNorm" in str(info.value)


def _builds_in(directory, monkeypatch):
    """Compiles and cache hits of libraries in ``directory`` alone, counted as they happen:
    ``cc.stats`` counts the whole process's, where libraries of earlier tests may still be
    building in the background (a cold cache, longer on a busy machine)."""
    counts = {"compiles": 0, "cache_hits": 0}
    compile_, cached = cc._compile, cc._cached

    def spy_compile(tc, source, where, final):
        if where == directory:
            counts["compiles"] += 1
        return compile_(tc, source, where, final)

    def spy_cached(final):
        hit = cached(final)
        if hit and os.path.dirname(final) == directory:
            counts["cache_hits"] += 1
        return hit

    monkeypatch.setattr(cc, "_compile", spy_compile)
    monkeypatch.setattr(cc, "_cached", spy_cached)
    return counts


def test_the_library_comes_from_the_cache_the_second_time(tmp_path, monkeypatch):
    x = tt.dvector("x")
    with theano_dag.config.change_flags(compiledir=str(tmp_path)):
        from theano_dag.engines.cpu.native import cop

        counts = _builds_in(cc.kernel_dir(str(tmp_path)), monkeypatch)
        cop._RUNNERS.clear()
        theano_dag.function([x], Fibby()(x))(np.ones(3))
        assert counts == {"compiles": 1, "cache_hits": 0}
        cop._RUNNERS.clear()  # as a new process would start
        theano_dag.function([x], Fibby()(x))(np.ones(3))
        assert counts["compiles"] == 1 and counts["cache_hits"] >= 1


def test_source_has_theanos_substitutions():
    x = tt.fvector("x")
    src = c_source(Fibby(), Fibby()(x).owner)
    assert "typedef npy_float32 dtype_V1;" in src and "(c_code_cache_version (1,))" in src
    assert "goto td_done" in src


def test_function_with_a_cop_pickles():
    x = tt.dvector("x")
    f = theano_dag.function([x], Fibby()(x))
    g = pickle.loads(pickle.dumps(f))
    np.testing.assert_allclose(g(np.array([1.0, 2.0, 3.0])), [1.0, 2.0, 5.0])


@pytest.mark.parametrize("name", ["c", "cvm", "vm", "c|py", "cvm_nogc", "vm_nogc", "c|py_nogc"])
def test_theano_linker_names_map_to_the_cpu_engine(name):
    lk = get_linker(name)
    assert isinstance(lk, CPULinker)
    assert lk.allow_gc is (False if name.endswith("_nogc") else None)


class FibbyWithPerform(Fibby):
    """Theano 1.1.2's Op wants a perform: C ops give one that raises; engines use C."""

    def perform(self, node, inputs, output_storage, params=None):
        raise NotImplementedError("C only")


@pytest.mark.parametrize("mode", ["FAST_RUN", "FAST_COMPILE", "NanGuardMode"])
def test_engines_run_the_c_code_even_when_perform_exists(mode):
    x = tt.dvector("x")
    f = theano_dag.function([x], FibbyWithPerform()(x), mode=mode)
    xv = np.array([1.0, 2.0, 3.0, 0.5])
    np.testing.assert_allclose(f(xv), fibby_ref(xv))


class PlainFibby(Op):
    """Fibby on a plain ``Op`` (Theano 1.0's ``gof.Op``, which had the C hooks): C code
    and no ``perform``, none of the other hooks."""

    __props__ = ()
    make_node = Fibby.make_node
    c_code = Fibby.c_code


class Neither(Op):
    __props__ = ()
    make_node = Fibby.make_node


@pytest.mark.parametrize("mode", [*MODES, "PerformOnly", "DebugMode"], ids=str)
def test_a_plain_op_with_c_code_only_runs_it(mode):
    x = tt.dvector("x")
    f = theano_dag.function([x], PlainFibby()(x) * 2, mode=mode)
    xv = np.array([1.0, 2.0, 0.5, 1.5, -1.0])
    np.testing.assert_allclose(f(xv), 2 * fibby_ref(xv))
    assert compat_gof.Op is Op  # the name Theano 1.0's programs subclass
    with pytest.raises(MethodNotDefined, match=r"^Neither\.perform is not implemented"):
        theano_dag.function([x], Neither()(x), mode=mode)(xv)


def test_c_code_only_without_a_compiler_says_so():
    x = tt.bvector("x")  # input types of their own: no library built for them earlier
    with theano_dag.config.change_flags(cxx=""):
        f = theano_dag.function([x], PlainFibby()(x), mode="PerformOnly")
        with pytest.raises(RuntimeError, match="PlainFibby has C code to run and no C compiler"):
            f(np.ones(3, dtype="int8"))
