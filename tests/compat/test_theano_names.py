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


# -- names Theano's own tensor, compile and gradient tests use (make theano-suite) --------


def _diag_reference(x, offset, axis1, axis2):
    """numpy's diagonals of the rows of ``x`` (each ``np.diag(row, offset)``), the two new
    axes moved to ``axis1`` and ``axis2`` (in increasing order)."""
    rows = x.reshape(-1, x.shape[-1])
    stacked = np.stack([np.diag(r, offset) for r in rows])
    stacked = stacked.reshape(x.shape[:-1] + stacked.shape[-2:])
    a1, a2 = sorted((axis1, axis2))
    return np.moveaxis(stacked, (-2, -1), (a1, a2))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "offset, axis1, axis2", [(0, 0, 1), (1, 0, 2), (-2, 2, 0), (0, 1, 2), (2, -1, 0)]
)
def test_alloc_diag_axes_against_numpy(engine, dtype, offset, axis1, axis2):
    from theano_dag.tensor.extra_ops import AllocDiag

    x = tt.matrix("x", dtype=dtype)
    xv = (np.arange(6, dtype=dtype) + 1).reshape(2, 3)
    out = AllocDiag(offset, axis1, axis2)(x)
    f = function([x], [out, out.shape], mode=_mode(engine))
    got, shape = f(xv)
    want = _diag_reference(xv, offset, axis1 % 3, axis2 % 3)
    assert got.dtype == dtype and got.shape == want.shape == tuple(shape)
    np.testing.assert_array_equal(got, want)
    a1, a2 = sorted((axis1 % 3, axis2 % 3))
    np.testing.assert_array_equal(np.diagonal(got, offset, a1, a2), xv)


def test_alloc_diag_axes_shape_and_gradient():
    from theano_dag.tensor.extra_ops import AllocDiag

    x = tt.TensorType("float64", shape=(2, 3))("x")
    op = AllocDiag(-1, 2, 0)
    assert op(x).type.shape == (4, 2, 4)
    # The shape graph needs no AllocDiag (infer_shape), and gives numpy's shape.
    f = function([x], op(x).shape)
    assert not any(isinstance(n.op, AllocDiag) for n in f.maker.fgraph.apply_nodes)
    assert tuple(f(np.ones((2, 3)))) == (4, 2, 4)
    rng = np.random.default_rng(3)
    verify_grad(lambda v: (AllocDiag(1, 0, 2)(v) ** 2).sum(), [rng.normal(size=(2, 3))], rng=rng)


def test_gemm_error_texts_are_class_attributes():
    from theano_dag.tensor.blas import Gemm

    assert Gemm.E_rank == "gemm only works for rank 2"
    assert Gemm.E_z_uniq == "argument z aliased to x or y"


def test_tensor_basic_dot_op_checks_ranks_and_computes_numpy_dot():
    from theano_dag.tensor import basic

    v, m = tt.dvector("v"), tt.dmatrix("m")
    with pytest.raises(TypeError):
        basic._dot(tt.dscalar("s"), v)
    with pytest.raises(TypeError):
        basic._dot(v, tt.dtensor3("t"))
    vv, mv = np.array([1.0, 2.0]), np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(basic._dot(v, m).eval({v: vv, m: mv}), np.dot(vv, mv))


def test_tensor_namespace_holds_reduction_classes_and_slicetype():
    from theano_dag.tensor.type_other import make_slice

    x = tt.dmatrix("x")
    assert isinstance(x.sum().owner.op, tt.Sum)
    assert isinstance(tt.max(x).owner.op, tt.Max)
    assert isinstance(tt.min(x).owner.op, tt.Min)
    assert make_slice(tt.iscalar("i"), None, None).type == tt.slicetype
    assert isinstance(tt.slicetype, tt.SliceType)


def test_scalar_basic_finds_math_op_classes_by_theanos_names():
    assert ts.basic.Expm1 is type(ts.math.expm1)
    x = tt.dvector("x")
    assert isinstance(tt.inv(x).owner.op.scalar_op, ts.basic.Inv)
    assert float(tt.inv(x).eval({x: np.array([4.0])})[0]) == 0.25
    with pytest.raises(AttributeError, match="no attribute 'NoSuchOp'"):
        ts.basic.NoSuchOp  # noqa: B018
    assert basic_scipy.imported_scipy_special is True  # scipy is installed (importorskip)


def test_transpose_inplace_is_a_view_with_the_axes_reversed():
    from theano_dag.tensor.inplace import transpose_inplace

    t = tt.dtensor3("t")
    out = transpose_inplace(t)
    assert out.owner.op.view_map == {0: [0]}
    tv = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(out.eval({t: tv}), tv.T)


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_divmod_of_variables_is_pythons(dtype):
    a, b = tt.scalar("a", dtype=dtype), tt.scalar("b", dtype=dtype)
    f = function([a, b], list(divmod(a, b)))
    for pair in [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3)]:
        got = [v.item() for v in f(*pair)]
        assert got == list(divmod(*pair)), pair
    assert [float(v.eval({b: -2})) for v in divmod(3, b)] == [-2.0, -1.0]


def test_profile_stats_takes_theanos_arguments(capsys):
    from theano_dag.compile.profiling import _AT_EXIT, print_profiles

    p = theano_dag.ProfileStats(False, gpu_checks=False)
    assert p.atexit_print is False and p.name is None and p.gpu_checks is False
    assert theano_dag.compile.ProfileStats is theano_dag.ProfileStats
    # A name of its own, so that the exit report's other profiles (other tests' functions)
    # cannot be taken for it.
    p = theano_dag.ProfileStats(False, gpu_checks=False, message="kept out of the report")
    x = tt.dvector("x")
    f = function([x], (x * 2).sum(), profile=p)
    f(np.ones(3))
    f(np.ones(3))
    # The given object collects the calls; atexit_print=False keeps it out of the exit report.
    assert f.profile is p and p.calls == 2
    assert not any(q is p for q in _AT_EXIT)
    print_profiles(force=True)
    assert "kept out of the report" not in capsys.readouterr().err
    named = theano_dag.ProfileStats(message="my function")
    assert named.name == "my function" and named.atexit_print is True
    assert str(named).startswith("Function profile: my function")


def test_config_profile_memory_is_accepted():
    assert config.profile_memory is False
    with config.change_flags(profile_memory=True):
        assert config.profile_memory is True
    assert config.profile_memory is False


def test_tensor_type_filter_checks_isfinite(monkeypatch):
    from theano_dag.tensor.type import TensorType

    assert TensorType.filter_checks_isfinite is False
    x = tt.dvector("x")
    np.testing.assert_array_equal(function([x], x * 2)(np.array([1.0, np.nan])), [2.0, np.nan])
    monkeypatch.setattr(TensorType, "filter_checks_isfinite", True)
    for engine in ("py", "cpu"):
        f = function([x], x * 2, mode=_mode(engine))
        # Good values pass (twice: a second call of one signature too), bad ones never.
        for _ in range(2):
            np.testing.assert_array_equal(f(np.array([1.0, 2.0])), [2.0, 4.0])
            for bad in (np.array([1.0, np.nan]), [np.inf, 1.0]):
                with pytest.raises(ValueError, match="non-finite elements not allowed"):
                    f(bad)
    with pytest.raises(ValueError, match="non-finite elements not allowed"):
        shared(np.array([-np.inf]))


def test_tensor_type_value_zeros():
    from theano_dag.tensor.type import TensorType

    z = TensorType("float32", shape=(None, None)).value_zeros((2, 3))
    assert z.dtype == np.float32 and z.shape == (2, 3) and not z.any()


def test_function_outputs_and_check_for_aliased_inputs():
    x = tt.dvector("x")
    s1, s2 = shared(np.zeros(2)), shared(np.zeros(2))
    y = x + 1
    f = function([x], [y, s1 * 2], updates=[(s2, s2 + 3)])
    assert [o.variable for o in f.outputs][0] is y
    # Theano's rule: explicit inputs declared borrowed or mutable; shared ones never.
    assert not f._check_for_aliased_inputs
    assert not function([], [s1 + 1], updates=[(s2, s2 + 3)])._check_for_aliased_inputs
    for spec in (
        theano_dag.In(x, borrow=True),
        theano_dag.In(x, mutable=True),
        theano_dag.In(x, borrow=True, mutable=True),
    ):
        g = function([spec], x + 1, updates=[(s2, s2 + 3)])
        assert g._check_for_aliased_inputs
        np.testing.assert_array_equal(g(np.ones(2)), [2.0, 2.0])


def test_mode_optimizer_query_is_readable_and_tunable_in_place():
    x = tt.dvector("x")
    base = Mode(linker="py", optimizer="fast_run").excluding("fusion")
    assert base._optimizer.include == Mode(linker="py")._query().include
    # position_cutoff changes the query in place: specialize (x**2 -> sqr, at 2) is cut.
    full = function([x], x**2, mode=base)
    cut = base.excluding()
    cut._optimizer.position_cutoff = 1.50001
    stable = function([x], x**2, mode=cut)
    assert [n.op.scalar_op.name for n in full.maker.fgraph.apply_nodes] == ["sqr"]
    assert [n.op.scalar_op.name for n in stable.maker.fgraph.apply_nodes] == ["pow"]
    np.testing.assert_array_equal(stable(np.array([3.0])), full(np.array([3.0])))
    with pytest.raises(AttributeError, match="immutable"):
        base._optimizer = None
    assert theano_dag.compile.ops.DeepCopyOp is theano_dag.compile.DeepCopyOp


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_scalar_astype_casts(dtype):
    from theano_dag.engines.basic import PerformLinker
    from theano_dag.graph.fg import FunctionGraph

    x = ts.float64("x")
    y = x.astype(dtype)
    assert y.dtype == dtype
    fn = PerformLinker().accept(FunctionGraph([x], [y])).make_function()
    assert fn(2.75) == np.asarray(2.75).astype(dtype)
    assert ts.constant(3).astype(dtype).dtype == dtype


def test_tensor_opt_holds_the_constant_readers_rewrites_use():
    # Theano's documentation writes rewrites with these, imported from tensor.opt.
    assert float(tensor_opt.get_scalar_constant_value(tt.constant(3.0) + 1)) == 4.0
    with pytest.raises(tensor_opt.NotScalarConstantError):
        tensor_opt.get_scalar_constant_value(tt.dscalar("x"))
    assert tensor_opt.get_scalar_constant_value is tt.get_scalar_constant_value
    x = tt.dscalar("x")
    assert tensor_opt.extract_constant(x) is x
