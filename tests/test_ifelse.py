"""``ifelse``: values, lists of outputs, types, errors, gradients, shapes, and its lazy
evaluation (a compiled function computes only the branch taken) on every engine."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.ifelse import IfElse, LazyIfElse, ifelse
from theano_dag.testing import fuzz

needs_opencl = pytest.mark.skipif(not opencl_available()[0], reason="no OpenCL device")
try:
    import dask  # noqa: F401  (only whether the Dask engine can run)

    HAVE_DASK = True
except ImportError:  # the [dask] extra is not installed
    HAVE_DASK = False

MODES = ["PerformOnly", None, "FAST_COMPILE"]


@pytest.mark.parametrize("mode", MODES)
def test_picks_a_branch(mode):
    a, b = tt.dscalars("a", "b")
    x, y = tt.dvectors("x", "y")
    f = theano_dag.function([a, b, x, y], ifelse(tt.lt(a, b), x * 2, y + 1), mode=mode)
    xv, yv = np.array([1.0, 2.0]), np.array([5.0, 6.0, 7.0])
    np.testing.assert_array_equal(f(1.0, 2.0, xv, yv), xv * 2)
    np.testing.assert_array_equal(f(3.0, 2.0, xv, yv), yv + 1)  # another shape


@pytest.mark.parametrize("cond", [0, 1, -3, 2.5, True])
def test_condition_nonzero_means_then(cond):
    c = tt.as_tensor_variable(np.asarray(cond))
    x = tt.dvector("x")
    got = theano_dag.function([x], ifelse(c, x, -x))(np.ones(2))
    np.testing.assert_array_equal(got, np.ones(2) if cond else -np.ones(2))


def test_lists_and_tuples():
    c = tt.lscalar("c")
    x, y = tt.dvector("x"), tt.dmatrix("y")
    outs = ifelse(c, [x, y], [x * 2, y.T])
    assert isinstance(outs, list) and len(outs) == 2
    assert isinstance(ifelse(c, (x, y), (x, y)), tuple)
    assert all(o.owner is outs[0].owner for o in outs)  # one node, two outputs
    f = theano_dag.function([c, x, y], outs)
    yv = np.arange(6.0).reshape(2, 3)
    got_x, got_y = f(0, np.ones(2), yv)
    np.testing.assert_array_equal(got_x, 2 * np.ones(2))
    np.testing.assert_array_equal(got_y, yv.T)
    got_x, got_y = f(1, np.ones(2), yv)
    np.testing.assert_array_equal(got_y, yv)


def test_output_types():
    c = tt.bscalar("c")
    three = tt.TensorType("float64", shape=(3, None))("three")
    four = tt.TensorType("float64", shape=(4, None))("four")
    assert ifelse(c, three, three).type == three.type
    assert ifelse(c, three, four).type == tt.TensorType("float64", shape=(None, None))
    assert ifelse(c, 1.0, tt.dscalar("s")).dtype == "float64"


def test_errors():
    c = tt.lscalar("c")
    x = tt.dvector("x")
    with pytest.raises(TypeError, match="should have the same type.*float32"):
        ifelse(c, x, tt.fvector("f"))
    with pytest.raises(TypeError, match="should have the same type"):
        ifelse(c, x, tt.dmatrix("m"))
    with pytest.raises(TypeError, match="the condition must be a scalar"):
        ifelse(tt.lvector("v"), x, x)
    with pytest.raises(ValueError, match="then branch has 2 values and the else branch 1"):
        ifelse(c, [x, x], [x])
    with pytest.raises(TypeError, match="expected a condition and 2 branch values"):
        IfElse(1)(c, x)
    with pytest.raises(TypeError, match="n_outs must be a positive int"):
        IfElse(0)


def test_output_is_a_copy():
    c = tt.lscalar("c")
    x = tt.dvector("x")
    value = np.ones(3)
    out = theano_dag.function([c, x], ifelse(c, x, x), mode="PerformOnly")(1, value)
    assert not np.shares_memory(out, value)


@pytest.mark.parametrize("mode", [None, "FAST_COMPILE"])
def test_only_the_branch_taken_is_computed(mode):
    """As on Theano's lazy VM: an error in the branch not taken does not raise."""
    c = tt.lscalar("c")
    x = tt.dvector("x")
    bad = tt.specify_shape(x, (5,)) * 2  # wrong for the values given below
    f = theano_dag.function([c, x], ifelse(c, x, bad), mode=mode)
    np.testing.assert_array_equal(f(1, np.ones(3)), np.ones(3))
    with pytest.raises(ValueError, match=r"expected shape \(5,\)"):
        f(0, np.ones(3))
    np.testing.assert_array_equal(f(0, np.ones(5)), np.full(5, 2.0))


def test_without_rewrites_both_branches_are_computed():
    # optimizer=None runs the graph as built: the ifelse's inputs are computed before it.
    c = tt.lscalar("c")
    x = tt.dvector("x")
    f = theano_dag.function([c, x], ifelse(c, x, tt.specify_shape(x, (5,))), mode="PerformOnly")
    with pytest.raises(ValueError, match=r"expected shape \(5,\)"):
        f(1, np.ones(3))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lazy_branches_give_ifelse_values(dtype):
    n = tt.lscalar("n")
    x = tt.vector("x", dtype=dtype)
    y = tt.matrix("y", dtype=dtype)
    shared_part = tt.exp(x).sum()  # needed by both branches: computed before
    outs = ifelse(
        tt.gt(n, 0),
        [x[n - 1] * shared_part, tt.dot(y, y).sum(axis=0)],
        [shared_part, x * 2],
    )
    f = theano_dag.function([n, x, y], outs)
    lazy = [nd for nd in f.maker.fgraph.toposort() if isinstance(nd.op, LazyIfElse)]
    assert len(lazy) == 1 and not any(isinstance(nd.op, IfElse) for nd in f.maker.fgraph.toposort())
    # The shared sum is an input of the lazy node, not in a branch graph.
    xv = np.array([0.5, -1.0, 2.0], dtype=dtype)
    yv = np.arange(9, dtype=dtype).reshape(3, 3)
    s = np.exp(xv).sum()
    got = f(2, xv, yv)
    np.testing.assert_allclose(got[0], xv[1] * s, rtol=1e-6)
    np.testing.assert_allclose(got[1], (yv @ yv).sum(axis=0), rtol=1e-6)
    assert got[0].dtype == dtype and got[1].dtype == dtype
    got = f(0, np.zeros(0, dtype=dtype), yv)  # x[-1] of an empty vector is not computed
    np.testing.assert_allclose(got[0], 0.0)
    assert got[1].shape == (0,)
    # Values returned are the caller's: a later call does not overwrite them.
    first = f(1, xv, yv)
    kept = [v.copy() for v in first]
    f(3, xv * 3, yv * 2)
    for a, b in zip(first, kept):
        np.testing.assert_array_equal(a, b)


def test_lazy_branch_inputs_returned():
    c = tt.lscalar("c")
    x, y = tt.dvectors("x", "y")
    f = theano_dag.function([c, x, y], ifelse(c, [x * 2, y], [tt.exp(x), x]))
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, LazyIfElse)]
    # cond_make_inplace's view: the then-value y is returned as it is, declared.
    assert node.op.as_view and str(node.op) == "lazy_if{inplace}"
    assert node.op.view_map == {1: [1 + node.op.branches[0][0].index(node.op.branches[0][1][1])]}
    xv, yv = np.ones(3), np.arange(3.0)
    a, b = f(1, xv, yv)
    np.testing.assert_allclose(a, 2 * xv)
    np.testing.assert_allclose(b, yv)
    assert not np.shares_memory(b, yv)  # the function copies an output that is its input
    a, b = f(0, xv, yv)
    np.testing.assert_allclose(a, np.exp(xv))
    np.testing.assert_allclose(b, xv)
    assert not np.shares_memory(b, xv)


def test_nested_lazy_ifelse_and_gradient():
    a, b = tt.dscalars("a", "b")
    x = tt.dvector("x")
    inner = ifelse(tt.gt(b, 0), tt.log(x).sum(), tt.sqrt(x).sum())
    out = ifelse(tt.gt(a, 0), inner * 2, (x**2).sum())
    f = theano_dag.function([a, b, x], [out, theano_dag.grad(out, x)])
    xv = np.array([1.0, 4.0])
    np.testing.assert_allclose(f(1, 1, xv)[0], 2 * np.log(xv).sum())
    np.testing.assert_allclose(f(1, 1, xv)[1], 2 / xv)
    np.testing.assert_allclose(f(1, -1, xv)[0], 2 * np.sqrt(xv).sum())
    np.testing.assert_allclose(f(-1, 1, xv)[1], 2 * xv)
    # log of a negative value is not taken when its branch is not
    with np.errstate(all="raise"):
        np.testing.assert_allclose(f(-1, 1, -xv)[0], (xv**2).sum())


@pytest.mark.parametrize(
    "engine",
    [
        "cpu",
        "fast_compile",
        pytest.param("opencl", marks=needs_opencl),
        pytest.param("dask", marks=pytest.mark.skipif(not HAVE_DASK, reason="no dask")),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_lazy_ifelse_on_every_engine(engine, dtype):
    modes = {
        "cpu": None,
        "fast_compile": "FAST_COMPILE",
        "opencl": Mode(linker="opencl"),
        "dask": "DASK",
    }
    n = tt.lscalar("n")
    x = tt.vector("x", dtype=dtype)
    total = x.sum()  # read by both branches: computed before the ifelse
    outs = ifelse(tt.gt(n, 0), [x[n - 1] + total, x * 2], [total, x[::-1]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the Dask engine's note on gathered inputs
        f = theano_dag.function([n, x], outs, mode=modes[engine])
    assert any(isinstance(nd.op, LazyIfElse) for nd in f.maker.fgraph.toposort())
    xv = np.array([3, -1, 4, 1], dtype=dtype)
    for k in (0, 1, 4):
        got = [np.asarray(v) for v in f(k, xv)]
        want = [xv[k - 1] + xv.sum(), xv * 2] if k > 0 else [xv.sum(), xv[::-1]]
        for g, w in zip(got, want):
            assert g.dtype == dtype
            np.testing.assert_allclose(g, w, rtol=1e-6)
    empty = np.zeros(0, dtype=dtype)
    got = [np.asarray(v) for v in f(0, empty)]  # x[-1] is not computed
    assert got[0] == 0 and got[1].shape == (0,)


def test_a_value_given_twice_by_a_branch_is_two_arrays():
    c = tt.lscalar("c")
    x = tt.dvector("x")
    e = tt.exp(x)
    a, b = theano_dag.function([c, x], ifelse(c, [e, e], [x, x]))(1, np.zeros(2))
    np.testing.assert_array_equal(a, [1.0, 1.0])
    assert not np.shares_memory(a, b)


def test_a_branch_view_of_a_value_computed_before_is_a_copy():
    # x ** 0 is read by both branches (computed before); the then-branch's x[1:] of it is
    # a view, which the planner would overwrite once the ifelse read its input.
    c = tt.lscalar("c")
    v = tt.ivector("v")
    p = v**2
    mode = theano_dag.Mode(linker=CPULinker(min_plan_bytes=0, poison=True))
    f = theano_dag.function([c, v], [ifelse(c, p[1:], p[:-1]), tt.exp2(v)], mode=mode)
    vv = np.arange(3000, dtype="int32") % 7
    got = f(1, vv)
    np.testing.assert_array_equal(got[0], (vv**2)[1:])
    np.testing.assert_array_equal(f(0, vv)[0], (vv**2)[:-1])


def test_node_needed_by_another_output_stays_outside():
    c = tt.lscalar("c")
    x = tt.dvector("x")
    e = tt.exp(x)
    f = theano_dag.function([c, x], [ifelse(c, e.sum(), x.sum()), e])
    lazy = [nd for nd in f.maker.fgraph.toposort() if isinstance(nd.op, LazyIfElse)]
    # exp(x) is an output too: computed before the ifelse, an input of its node.
    for nd in lazy:
        for inputs, outputs in nd.op.branches:
            for node in theano_dag.graph.basic.io_toposort(inputs, outputs):
                assert "exp" not in str(node.op)
    np.testing.assert_allclose(f(1, np.zeros(2))[0], 2.0)


def test_infer_shape_follows_the_condition():
    c = tt.lscalar("c")
    x, y = tt.dmatrices("x", "y")
    out = ifelse(c, x, y)
    f = theano_dag.function([c, x, y], out.shape, mode="PerformOnly")
    assert f(1, np.ones((2, 3)), np.ones((4, 5))).tolist() == [2, 3]
    assert f(0, np.ones((2, 3)), np.ones((4, 5))).tolist() == [4, 5]
    node = out.owner
    same = node.op.infer_shape(None, node, [(), (2, 3), (2, 3)])
    assert same == [(2, 3)]  # equal lengths need no switch


@pytest.mark.parametrize("cond", [0, 1])
def test_grad_masks_the_branch_not_taken(cond):
    c = tt.lscalar("c")
    x, y = tt.dvectors("x", "y")
    cost = (ifelse(c, x**2, y * 3) * tt.constant(np.array([1.0, 2.0]))).sum()
    gx, gy, gc = theano_dag.grad(cost, [x, y, c])
    f = theano_dag.function([c, x, y], [gx, gy, gc])
    xv, yv = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    got_x, got_y, got_c = f(cond, xv, yv)
    np.testing.assert_allclose(got_x, 2 * xv * [1, 2] if cond else 0)
    np.testing.assert_allclose(got_y, 0 if cond else np.array([3.0, 6.0]))
    assert float(got_c) == 0.0


def test_grad_of_one_output_of_many():
    c = tt.lscalar("c")
    x, y = tt.dvectors("x", "y")
    a, b = ifelse(c, [x, y], [y, x])
    gx = theano_dag.grad(a.sum(), x)  # b is unused: its gradients are disconnected
    f = theano_dag.function([c, x, y], gx)
    np.testing.assert_array_equal(f(1, np.ones(2), np.ones(2)), np.ones(2))
    np.testing.assert_array_equal(f(0, np.ones(2), np.ones(2)), np.zeros(2))


def test_r_op():
    c = tt.lscalar("c")
    x = tt.dvector("x")
    v = tt.dvector("v")
    jv = theano_dag.Rop(ifelse(c, x**2, x * 3), x, v)
    f = theano_dag.function([c, x, v], jv)
    xv, vv = np.array([1.0, 2.0]), np.array([1.0, 1.0])
    np.testing.assert_allclose(f(1, xv, vv), 2 * xv)
    np.testing.assert_allclose(f(0, xv, vv), [3.0, 3.0])


def test_generic_values():
    from theano_dag.graph.type import Generic

    c = tt.lscalar("c")
    a, b = Generic()("a"), Generic()("b")
    out = ifelse(c, a, b)
    f = theano_dag.function([c, a, b], out, mode="PerformOnly")
    assert f(1, [1, 2], "no") == [1, 2] and f(0, [1, 2], "no") == "no"


def test_numbers_take_the_other_branch_dtype():
    c = tt.lscalar("c")
    x, i = tt.fvector("x"), tt.ivector("i")
    assert ifelse(c, 0.5, x.sum()).dtype == "float32"
    assert ifelse(c, i, np.arange(2)).dtype == "int32"
    with pytest.raises(TypeError, match="should have the same type"):
        ifelse(c, i.sum(), 0.5)  # 0.5 is not an int32


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fast_run_returns_the_then_values_as_views(dtype):
    # Theano's cond_make_inplace: in FAST_RUN the IfElse is IfElse(n, as_view=True), which
    # returns the then-value without a copy (the else-value is still copied).
    c = tt.iscalar("c")
    x, y = tt.vector("x", dtype=dtype), tt.vector("y", dtype=dtype)
    i1, i2 = tt.ivector("i1"), tt.ivector("i2")
    # (Without the lazy branches, which would move x * 2 and i1 + 1 into a branch graph.)
    default = theano_dag.compile.mode.get_default_mode().excluding("lazy_branches")
    f = theano_dag.function([c, x, y, i1, i2], ifelse(c, (x * 2, i1 + 1), (y, i2)), mode=default)
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, IfElse)]
    assert node.op == IfElse(2, as_view=True) and str(node.op) == "if{inplace}"
    assert node.op.view_map == {0: [1], 1: [2]}
    xv, yv = np.array([1, 2], dtype=dtype), np.array([3, 4, 5], dtype=dtype)
    iv, jv = np.array([1, 2], dtype="int32"), np.array([7], dtype="int32")
    a, b = f(1, xv, yv, iv, jv)
    assert a.dtype == dtype and b.dtype == "int32"
    np.testing.assert_allclose(a, xv * 2)
    np.testing.assert_array_equal(b, iv + 1)
    a, b = f(0, xv, yv, iv, jv)
    np.testing.assert_allclose(a, yv)
    np.testing.assert_array_equal(b, jv)
    assert not np.shares_memory(a, yv)
    g = theano_dag.function(
        [c, x, y, i1, i2],
        ifelse(c, (x * 2, i1 + 1), (y, i2)),
        mode=default.excluding("inplace"),
    )
    (node,) = [n for n in g.maker.fgraph.toposort() if isinstance(n.op, IfElse)]
    assert not node.op.as_view and str(node.op) == "if{}"
    assert IfElse(1, name="pick", as_view=True).__str__() == "if{pick,inplace}"


def _fuzz_ifelse_cases(first_seed, n_cases):
    """Graphs of the fuzzer with an ifelse over two of their values of one type (and,
    every other one, one of their outputs beside it): (inputs, outputs, values)."""
    seed = first_seed
    while n_cases:
        rng = np.random.default_rng(seed)
        rec = fuzz.generate(rng, max_ops=8)
        seed += 1
        if rec.shared_index is not None:
            continue
        inputs, _svar, syms = fuzz._build(rec)
        values = [v for k, v in syms.items() if k not in inputs]
        pairs = [
            (a, b)
            for a in values
            for b in values
            if a is not b and a.dtype == b.dtype and a.ndim == b.ndim
        ]
        if not pairs:
            continue
        a, b = pairs[rng.integers(len(pairs))]
        c = tt.lscalar("c")
        outs = [ifelse(c, a, b)] + ([syms[rec.outputs[0]]] if n_cases % 2 else [])
        vals = fuzz._values(rec, 0)
        yield [c] + [syms[k] for k in inputs], outs, [vals[k] for k in inputs]
        n_cases -= 1


@pytest.mark.parametrize("mode", [None, "FAST_COMPILE"])
def test_lazy_ifelse_of_fuzz_graphs_gives_the_eager_values(mode):
    # The eager reference: the graph as built, on the reference engine.
    lazy_nodes = 0
    for ins, outs, args in _fuzz_ifelse_cases(1000, 12):
        eager = theano_dag.function(ins, outs, mode="PerformOnly", on_unused_input="ignore")
        f = theano_dag.function(ins, outs, mode=mode, on_unused_input="ignore")
        lazy_nodes += sum(isinstance(n.op, LazyIfElse) for n in f.maker.fgraph.apply_nodes)
        for c in (0, 1):
            with np.errstate(all="ignore"):
                want, got = eager(c, *args), f(c, *args)
            for g, w in zip(got, want):
                g, w = np.asarray(g), np.asarray(w)
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True)
    assert lazy_nodes >= 6  # most cases have a branch of their own


@pytest.mark.parametrize("mode", [None, "FAST_COMPILE"])
def test_a_constant_condition_leaves_the_branch_it_picks(mode):
    # exoplanet's in_transit: ifelse(all(eq(flag, 0)), arange(n)[mask], arange(n)) with a
    # constant flag. The condition folds to True: no ifelse is left (it ran its branch
    # as a graph of its own, a tenth of the function's call time).
    x = tt.dvector("x")
    flag = tt.as_tensor_variable(np.zeros(3))
    n = x.shape[0]
    keep = ifelse(tt.all(tt.eq(flag, 0)), tt.arange(n)[x > 0], tt.arange(n))
    drop = ifelse(tt.any(tt.eq(flag, 1)), tt.arange(n)[x > 0], tt.arange(n))
    f = theano_dag.function([x], [keep, drop, x[keep].sum()], mode=mode)
    ops = {type(node.op) for node in f.maker.fgraph.apply_nodes}
    assert IfElse not in ops and LazyIfElse not in ops
    for xv in (np.array([1.0, -2.0, 3.0]), np.array([-1.0]), np.linspace(-1, 1, 9)):
        got_keep, got_drop, total = f(xv)
        np.testing.assert_array_equal(got_keep, np.arange(len(xv))[xv > 0])
        np.testing.assert_array_equal(got_drop, np.arange(len(xv)))
        np.testing.assert_allclose(total, xv[xv > 0].sum())


def test_a_constant_condition_keeps_the_ifelse_type_and_gradient():
    three = tt.TensorType("float64", shape=(3, None))("three")
    four = tt.TensorType("float64", shape=(4, None))("four")
    out = ifelse(tt.constant(1), three * 2, four)
    assert out.type == tt.TensorType("float64", shape=(None, None))
    g = theano_dag.grad((ifelse(tt.constant(0), three, three**2) ** 2).sum(), three)
    f = theano_dag.function([three, four], [out, g], on_unused_input="ignore")
    tv = np.arange(6.0).reshape(3, 2)
    got, grad = f(tv, np.zeros((4, 2)))
    np.testing.assert_array_equal(got, tv * 2)
    np.testing.assert_allclose(grad, 4 * tv**3)
    assert not any(isinstance(n.op, (IfElse, LazyIfElse)) for n in f.maker.fgraph.apply_nodes)
