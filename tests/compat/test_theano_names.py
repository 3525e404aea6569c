"""Names that Theano's clients (PyMC3 3.11) and Theano's own tests import, at Theano's
paths: the incomplete gamma functions (values against scipy on every engine, gradient by
finite differences), ``OrderedUpdates``, ``tensor.Constant``, ``advanced_set_subtensor1``,
``upgrade_to_float_no_complex``, ``scalar.basic_scipy``'s class names and the rewrite
registration decorators of ``tensor.opt``."""

from collections import OrderedDict

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.compile.pkl_utils import StripPickler, dump, load
from theano_dag.compile.sharedvalue import shared
from theano_dag.config import config
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gpuarray import dnn
from theano_dag.gradient.verify import verify_grad
from theano_dag.graph.basic import Constant
from theano_dag.opt import tensor_opt
from theano_dag.opt.optdb import build_optdb
from theano_dag.printing import Print
from theano_dag.scalar import basic_scipy
from theano_dag.scan import utils as scan_utils

sps = pytest.importorskip("scipy.special")

OCL_OK, OCL_WHY = opencl_available()
ENGINES = [
    "py",
    "cpu",
    "cpu-no-c",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]


def _mode(engine):
    if engine == "py":
        return Mode(linker="py", optimizer=None)
    if engine == "opencl":
        return Mode(linker="opencl")
    return Mode(linker=CPULinker(min_plan_bytes=0))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gammainc_and_gammaincc_against_scipy(engine, dtype):
    k, x = tt.vector("k", dtype=dtype), tt.vector("x", dtype=dtype)
    kv = np.array([0.5, 2.0, 7.0, 30.0], dtype=dtype)
    xv = np.array([0.3, 2.5, 4.0, 35.0], dtype=dtype)
    cxx = "" if engine == "cpu-no-c" else config.cxx
    with config.change_flags(cxx=cxx):
        f = function([k, x], [tt.gammainc(k, x), tt.gammaincc(k, x)], mode=_mode(engine))
        lower, upper = f(kv, xv)
    assert lower.dtype == upper.dtype == dtype
    tol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(lower, sps.gammainc(kv, xv), rtol=tol)
    np.testing.assert_allclose(upper, sps.gammaincc(kv, xv), rtol=tol)
    assert tt.gammainc(tt.ivector(), tt.ivector()).dtype == "float64"


@pytest.mark.parametrize("fn", [tt.gammainc, tt.gammaincc], ids=["gammainc", "gammaincc"])
def test_incomplete_gamma_gradient_in_x(fn):
    k = np.array([0.5, 2.0, 7.0])
    verify_grad(lambda x: fn(k, x), [np.array([0.3, 2.5, 4.0])], rng=np.random.default_rng(0))
    kk, xx = tt.dvectors("k", "x")
    with pytest.raises(theano_dag.gradient.NullTypeGradError):
        tt.grad(fn(kk, xx).sum(), kk)


def test_basic_scipy_names_are_theanos():
    assert basic_scipy.GammaLn is type(ts.gammaln) and basic_scipy.Psi is type(ts.psi)
    assert basic_scipy.TriGamma is type(ts.tri_gamma)
    assert ts.GammaLn is basic_scipy.GammaLn and ts.gammainc is basic_scipy.gammainc
    # PyMC3 makes its own gammaln op from the class
    own = basic_scipy.GammaLn(ts.upgrade_to_float, name="scalar_gammaln")
    x = tt.dvector("x")
    f = function([x], tt.elemwise.Elemwise(own)(x))
    np.testing.assert_allclose(f(np.array([0.5, 3.0])), sps.gammaln([0.5, 3.0]), rtol=1e-14)


def test_upgrade_to_float_no_complex():
    assert ts.upgrade_to_float_no_complex("int8") == ("float32",)
    assert ts.upgrade_to_float_no_complex("int64", "float32") == ("float64",)
    with pytest.raises(TypeError, match="complex128 input: this op is defined on real"):
        ts.upgrade_to_float_no_complex("float64", "complex128")


def test_ordered_updates():
    a, b = shared(np.float64(0.0), name="a"), shared(np.float64(1.0), name="b")
    ups = theano_dag.OrderedUpdates([(a, a + 1)])
    ups[b] = b * 2
    f = function([], [], updates=ups)
    f()
    assert (a.get_value(), b.get_value()) == (1.0, 2.0)
    with pytest.raises(TypeError, match="OrderedUpdates keys must be shared variables"):
        ups[tt.dscalar("x")] = 1.0
    same = ups + OrderedDict([(a, ups[a])])  # the same update twice is one update
    assert list(same) == [a, b]
    with pytest.raises(KeyError, match="Collision"):
        ups + OrderedDict([(a, a - 1)])
    with pytest.warns(UserWarning, match="plain dict of several updates"):
        theano_dag.OrderedUpdates({a: a + 1, b: b + 1})


def test_tensor_constant_and_advanced_set_subtensor1():
    c = tt.constant(np.ones(2))
    assert tt.Constant is tt.TensorConstant and isinstance(c, tt.Constant)
    assert isinstance(c, Constant)
    x, v = tt.dmatrix("x"), tt.dmatrix("v")
    idx = tt.lvector("idx")
    f = function([x, v, idx], tt.advanced_set_subtensor1(x, v, idx))
    got = f(np.zeros((3, 2)), np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([2, 0]))
    np.testing.assert_array_equal(got, [[3.0, 4.0], [0.0, 0.0], [1.0, 2.0]])
    g = function([x, idx], tt.advanced_inc_subtensor1(x, tt.ones((2, 2)), idx))
    np.testing.assert_array_equal(g(np.zeros((2, 2)), np.array([1, 1])), [[0, 0], [2, 2]])


def test_tensor_opt_registers_rewrites():
    db = build_optdb()
    for register, name in [
        (tensor_opt.register_canonicalize, "canonicalize"),
        (tensor_opt.register_specialize, "specialize"),
        (tensor_opt.register_stabilize, "stabilize"),
    ]:

        @register(db=db, name=f"local_mine_{name}")
        @tensor_opt.local_optimizer(None)
        def local_mine(fgraph, node):
            return False

        assert f"local_mine_{name}" in db[name]
    assert tensor_opt.MakeVector is tt.opt.MakeVector


@pytest.mark.parametrize("engine", ["py", "cpu", ENGINES[-1]])
def test_print_passes_values_through_and_prints_each_call(engine, capsys):
    x = tt.dvector("x")
    seen = []
    shown = Print("x:", attrs=("shape", "sum"))(x)
    quiet = Print("c", global_fn=lambda op, v: seen.append((op.message, v.tolist())))
    y = shown * 2 + quiet(tt.constant(np.array([1.0, 1.0])))
    f = function([x], [y, tt.grad(y.sum(), x)], mode=_mode(engine))
    for _ in range(2):
        value, g = f(np.array([1.0, 2.0]))
        np.testing.assert_array_equal(value, [3.0, 5.0])
        np.testing.assert_array_equal(g, [2.0, 2.0])
    assert capsys.readouterr().out == "x: shape = (2,)\nx: sum = 3.0\n" * 2
    assert seen == [("c", [1.0, 1.0])] * 2  # never folded as a constant


def test_pkl_utils_dump_and_load(tmp_path):
    foo = [shared(np.int64(i), name="foo") for i in range(3)]
    path = tmp_path / "model.zip"
    with open(path, "wb") as f:
        dump((*foo, np.array(3), foo[0]), f)
    with np.load(path) as npz:  # Theano's layout: the arrays by name, then the pickle
        assert list(npz.keys()) == ["foo", "foo_2", "foo_3", "array_0", "pkl"]
        assert npz["foo_3"] == 2
    with open(path, "rb") as f:
        a, b, c, arr, a_again = load(f)
    assert [v.get_value() for v in (a, b, c)] == [0, 1, 2] and arr == 3
    assert a_again is a and a.name == "foo"

    m = tt.dmatrix("m")
    m.tag.trace, m.tag.note = ["here"], "kept"
    with open(tmp_path / "m.pkl", "wb") as f:
        StripPickler(f, protocol=-1, extra_tag_to_remove=["note"]).dump(m)
    back = __import__("pickle").loads((tmp_path / "m.pkl").read_bytes())
    assert back.type == m.type and not hasattr(back.tag, "trace")
    assert not hasattr(back.tag, "note") and m.tag.note == "kept"


def test_scan_utils_path_holds_equal_computations_and_clone():
    # Theano 1.1's theano.scan.utils (Lasagne's tests compare penalties with
    # equal_computations from there).

    x, y = tt.dvector("x"), tt.dvector("y")
    assert scan_utils.equal_computations([tt.sqr(x).sum()], [tt.sqr(x).sum()])
    assert not scan_utils.equal_computations([tt.sqr(x).sum()], [tt.sqr(y).sum()])
    replaced = scan_utils.clone(x * 2 + 1, replace={x: y})
    assert scan_utils.equal_computations([replaced], [y * 2 + 1])
    np.testing.assert_array_equal(replaced.eval({y: np.array([1.0, 2.0])}), [3.0, 5.0])


def test_gpuarray_dnn_checks_say_no_cudnn():
    # Code probing for cuDNN (Lasagne's dnn layers) must take its CPU path, by an
    # ImportError of its own, not fail on a missing attribute.

    assert theano_dag.gpuarray.pygpu_activated is False
    assert dnn.dnn_present() is False and dnn.dnn_available("dev0") is False
    assert dnn.dnn_present.msg == dnn.dnn_available.msg == "PyGPU not available"
    assert dnn.dnn_present.avail is False
