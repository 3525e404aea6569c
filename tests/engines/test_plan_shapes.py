"""The CPU engine's plan-time shapes (``engines.cpu.plan.shapes``) against numpy."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar as ts
from theano_dag.engines.cpu.plan import shapes as plan_shapes
from theano_dag.graph.basic import io_toposort
from theano_dag.scalar import Composite, int64
from theano_dag.tensor.elemwise import Elemwise, Sum
from theano_dag.tensor.fused import FusedReduce
from theano_dag.tensor.random import RandomStreams, RandomVariable

SLICES = [
    (slice(1, None), 0),
    (slice(None, None, -1),),
    (slice(-3, None, 2), slice(None, 1)),
    (slice(7, 2, -2),),
    (slice(-100, 100),),
    (slice(5, 1),),
    (-1, slice(None, None, -3)),
    (2,),
]


@pytest.mark.parametrize("idx", SLICES, ids=str)
def test_subtensor_rule_gives_numpys_shape(idx):
    x = tt.dtensor3("x")
    y = x[idx]
    value = np.zeros((9, 4, 3))
    shapes, _ = plan_shapes.infer_shapes(None, io_toposort([x], [y]), {x: value.shape})
    assert shapes[y] == value[idx].shape
    # the rule answers without Subtensor's symbolic infer_shape, and agrees with it
    node = y.owner
    assert type(node.op) in plan_shapes.KNOWN_RULES
    in_shapes = [value.shape] + [()] * (len(node.inputs) - 1)
    generic = plan_shapes._generic(None, node, in_shapes, {})
    assert generic == [value[idx].shape]


def test_subtensor_rule_with_an_index_known_only_at_run_time_is_unplanned():
    x, n = tt.dmatrix("x"), tt.lscalar("n")
    y = x[:n]
    shapes, _ = plan_shapes.infer_shapes(None, io_toposort([x, n], [y]), {x: (5, 2), n: ()})
    assert shapes[y] is None


def test_subtensor_rule_reads_indices_computed_from_shapes():
    x = tt.dmatrix("x")
    y = x[x.shape[0] // 2 :: 2]
    shapes, _ = plan_shapes.infer_shapes(None, io_toposort([x], [y]), {x: (9, 2)})
    assert shapes[y] == np.zeros((9, 2))[4::2].shape


def test_subtensor_rule_leaves_an_out_of_range_integer_to_the_run():
    x = tt.dmatrix("x")
    y = x[7]
    shapes, _ = plan_shapes.infer_shapes(None, io_toposort([x], [y]), {x: (5, 2)})
    assert shapes[y] is None


def test_an_inplace_op_in_a_shape_expression_leaves_known_values_as_they_were():
    # (n - 1) * 2 fused in place on a known length: evaluating it twice gave 10, then 18,
    # because the first evaluation wrote into the known value (an irfft's output length).
    n = tt.lscalar("n")
    i = int64("i")
    double = Elemwise(Composite([i], [(i - 1) * 2]), inplace_pattern={0: 0})(n)
    known = {n: np.asarray(4, dtype="int64")}
    assert int(plan_shapes.evaluate_expression(double, known)) == 6
    assert int(plan_shapes.evaluate_expression(double, known)) == 6
    assert int(known[n]) == 4


def test_a_reshape_that_cannot_hold_its_input_is_left_to_the_run():
    # Reshape's infer_shape gives the asked shape unchecked; planned, a 2-vector taken
    # to (1, 3) made the next node's check blame itself (PyMC3's test_ode::test_gradients).
    v, m = tt.dvector("v"), tt.dmatrix("m")
    bad, good = v.reshape((1, 3)), v.reshape((-1, 2))
    z = bad + m
    shapes, _ = plan_shapes.infer_shapes(None, io_toposort([v, m], [z, good]), {v: (2,), m: (1, 2)})
    assert shapes[bad] is None and shapes[z] is None
    assert shapes[good] == np.zeros(2).reshape((-1, 2)).shape


def test_a_random_draw_has_its_shape_planned_beside_its_generator():
    # The generator input has no shape; it left the draws, and everything computed from
    # them, unplanned: PyMC3's ADVI step (a normal draw feeding the whole gradient) ran
    # every node through its op's perform, 10x theano-pymc's time per step.
    srng = RandomStreams(seed=1)
    u = srng.normal((3, 4))
    x = tt.dmatrix("x")
    y = tt.exp(u) * x + u.sum()
    order = io_toposort([u.rng, x], [y])
    shapes, _ = plan_shapes.infer_shapes(None, order, {u.rng: None, x: (3, 4)})
    assert shapes[u] == (3, 4) and shapes[y] == (3, 4)
    assert shapes[u.owner.outputs[0]] is None  # the new generator: not an array

    f = theano_dag.function([x], [y, u])
    xv = np.arange(12.0).reshape(3, 4)
    draws = []
    for _ in range(2):
        yv, uv = f(xv)
        np.testing.assert_allclose(yv, np.exp(uv) * xv + uv.sum(), rtol=1e-12)
        draws.append(uv)
    assert not np.array_equal(*draws)  # fresh draws per call
    plan = f.fn.current
    (draw_step,) = [st for _k, st in plan.steps if st.kind == "call"]  # the draw alone
    assert isinstance(draw_step.node.op, RandomVariable)
    unplanned = {v for v, c in plan.cat.items() if c == "fresh"}
    assert unplanned == {draw_step.node.outputs[1]}


def test_a_value_after_a_data_dependent_index_is_planned_as_its_type_allows():
    # x[nonzero(x > 0)] has a length known only when it runs: what its type fixes (a
    # scalar, a vector of 2) is planned all the same; the vector of unknown length is not.
    x, s = tt.dvector("x"), tt.dscalar("s")
    y = x[tt.nonzero(x > 0)[0]]
    total = y.sum()
    scalar = tt.tanh(total * s)
    pair = tt.stack([total, s])
    double = y * 2
    order = io_toposort([x, s], [scalar, pair, double])
    shapes, _ = plan_shapes.infer_shapes(None, order, {x: (5,), s: ()})
    assert shapes[y] is None and shapes[double] is None
    assert shapes[total] == () and shapes[scalar] == () and shapes[pair] == (2,)


def test_c_kernels_run_on_values_whose_length_is_known_only_at_run_time():
    # After a data-dependent index (exoplanet's light curve keeps the points in transit)
    # every node ran through its op's perform: 20x theano-pymc's time per call. The C
    # kernels allocate their results when they run; the scalars are planned.
    x, s = tt.dvector("x"), tt.dscalar("s")
    y = x[tt.nonzero(x > 0)[0]]
    z = tt.exp(y) * s + y**2
    t = (tt.log1p(y) * s).sum()
    u = tt.tanh(s * 2 + 1) * t + z.sum()
    f = theano_dag.function([x, s], [z, u])
    for xv in (np.array([1.0, -2.0, 3.0]), np.linspace(-1, 2, 50), np.array([-1.0])):
        zv, uv = f(xv, 0.5)
        yv = xv[xv > 0]
        zr = np.exp(yv) * 0.5 + yv**2
        np.testing.assert_allclose(zv, zr, rtol=1e-13)
        ur = np.tanh(2.0) * (np.log1p(yv) * 0.5).sum() + zr.sum()
        np.testing.assert_allclose(uv, ur, rtol=1e-13)
    plan = f.fn.current
    kinds = {type(st.node.op).__name__: st.kind for _k, st in plan.steps}
    if theano_dag.config.cxx:  # (without a compiler: numpy's steps and performs)
        assert kinds["Elemwise"] != "call" and kinds["FusedReduce"] == "out"
        assert [type(st.node.op).__name__ for _k, st in plan.steps if st.kind == "call"] == [
            "Nonzero",
            "AdvancedSubtensor1",
        ]


def test_reductions_and_products_of_values_known_only_at_run_time_skip_perform():
    # A sum, a maximum over the last axis and a product of a value whose length depends
    # on data allocate their own results (no planned block), in the output's dtype.
    x, w = tt.dmatrix("x"), tt.dvector("w")
    rows = x[tt.nonzero(x[:, 0] > 0)[0]]
    outs = [rows.sum(axis=0), rows.max(axis=1), tt.dot(rows, w), (rows * 2).sum(axis=1)]
    f = theano_dag.function([x, w], outs)
    rng = np.random.default_rng(0)
    for n in (7, 1, 30):
        xv, wv = rng.normal(size=(n, 3)), rng.normal(size=3)
        kept = xv[xv[:, 0] > 0]
        want = [kept.sum(axis=0), kept.max(axis=1), kept @ wv, (kept * 2).sum(axis=1)]
        for got, ref in zip(f(xv, wv), want, strict=True):
            assert got.dtype == ref.dtype and got.shape == ref.shape
            np.testing.assert_allclose(got, ref, rtol=1e-13)
    plan = f.fn.current
    called = sorted(type(st.node.op).__name__ for _k, st in plan.steps if st.kind == "call")
    # (without a compiler the fused sum's numpy steps need a planned scratch value)
    extra = [] if theano_dag.config.cxx else ["FusedReduce"]
    assert called == sorted(["AdvancedSubtensor1", "Nonzero", *extra])


def test_a_fused_reduction_of_a_value_known_only_at_run_time_refuses_what_it_refuses():
    # Its kernel's node takes every input as broadcastable; unplanned, its result checks
    # what a planned shape checked: a length 1 the type does not declare broadcastable.
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    rows = x[tt.nonzero(x[:, 0] > 0)[0]]
    f = theano_dag.function([x, y], FusedReduce(Sum(axis=(0,)), ts.add)(rows, y))
    xv = np.ones((4, 3))
    np.testing.assert_array_equal(f(xv, np.full((4, 3), 2.0)), np.full(3, 12.0))
    with pytest.raises(ValueError, match="not declared broadcastable"):
        f(xv, np.ones((1, 3)))
    with pytest.raises(ValueError, match="do not match along dimension 0"):
        f(xv, np.ones((2, 3)))


def _kernels_called_alone(f):
    """The C kernels the generated call runs by their own line (not in a segment)."""
    import re

    return re.findall(r"= (_g\d+_K\d+)\(", f.fn.source())


@pytest.mark.skipif(not theano_dag.config.cxx, reason="C kernels need a compiler")
def test_kernels_after_a_data_dependent_index_run_in_segments_on_arrays_of_their_shape():
    # The values after x[nonzero(...)] have a length known only when the function runs:
    # each kernel allocated its result through its Python wrapper (2 us a kernel, 30 of
    # them in exoplanet's light curve). The plan binds an array of the shape the inputs
    # give before the step ("dyn"), and a segment runs the kernels in one C call.
    x, y, m = tt.dvector("x"), tt.dvector("y"), tt.dmatrix("m")
    keep = tt.nonzero(x > 0.5)[0]
    a, b, rows = x[keep], y[keep], m[keep]
    c = tt.exp(a) * b + tt.sin(a)
    d = tt.tanh(c) * a - tt.cos(b)
    e = tt.exp(rows) * a.dimshuffle(0, "x")  # its shape from two inputs' lengths
    outs = [c, d, e, (c * d).sum(), (tt.tanh(rows) + b.dimshuffle(0, "x")).sum(axis=1)]
    f = theano_dag.function([x, y, m], outs)
    rng = np.random.default_rng(3)
    previous = None
    for n in (9, 1, 0, 40):
        xv, yv, mv = rng.uniform(size=n), rng.uniform(size=n), rng.uniform(size=(n, 3))
        got = f(xv, yv, mv)
        k = xv > 0.5
        av, bv, rv = xv[k], yv[k], mv[k]
        cv = np.exp(av) * bv + np.sin(av)
        dv = np.tanh(cv) * av - np.cos(bv)
        want = [cv, dv, np.exp(rv) * av[:, None], (cv * dv).sum(),
                (np.tanh(rv) + bv[:, None]).sum(axis=1)]  # fmt: skip
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)
        if previous is not None:  # a result returned before is not written again
            np.testing.assert_array_equal(previous[0], previous[1])
        previous = (got[0], got[0].copy())
    plan = f.fn.current
    dyn = [v for v, cat in plan.cat.items() if cat == "dyn"]
    assert len(dyn) >= 4
    if not theano_dag.config.cpu__poison:  # (poisoned, each step runs alone)
        assert _kernels_called_alone(f) == []
        assert "_SEG" in f.fn.source()


@pytest.mark.parametrize(
    "ys, message",
    [
        ((0.9, 0.8, 0.1, 0.1), "input shapes .* do not match along dimension 0"),
        ((0.9, 0.1, 0.1, 0.1), "has length 1 there but is not declared broadcastable"),
    ],
)
def test_kernels_in_segments_refuse_lengths_known_only_at_run_time_that_do_not_match(ys, message):
    # An array of the first input's shape is bound before the kernel: an input of
    # another length (or of length 1, not declared broadcastable) is refused by the
    # kernel, with the reference Elemwise's error, and nothing is returned.
    x, y = tt.dvector("x"), tt.dvector("y")
    a, b = x[tt.nonzero(x > 0.5)[0]], y[tt.nonzero(y > 0.5)[0]]
    f = theano_dag.function([x, y], [tt.exp(a) * b + tt.sin(a), a, b])
    xv = np.array([0.9, 0.1, 0.7, 0.8])
    np.testing.assert_allclose(
        f(xv, xv)[0], np.exp(xv[xv > 0.5]) * xv[xv > 0.5] + np.sin(xv[xv > 0.5])
    )
    for _ in range(2):  # (the second call: the kernels' library loaded)
        with pytest.raises(ValueError, match=message):
            f(xv, np.array(ys))
        with pytest.raises(ValueError, match=message):
            f(np.array(ys), xv)  # the short one first: the bound array has its length
