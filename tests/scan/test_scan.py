"""``scan`` and its loops: values against numpy loops on every engine, Theano's argument
forms (taps, None outputs, n_steps, go_backwards, until, updates), errors, gradients."""

from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import DisconnectedInputError, verify_grad
from theano_dag.graph.basic import io_toposort
from theano_dag.graph.fg import MissingInputError
from theano_dag.sandbox.rng_mrg import MRG_RandomStreams
from theano_dag.scan import Scan, foldl, foldr, scan, until
from theano_dag.scan import map as scan_map
from theano_dag.scan import reduce as scan_reduce
from theano_dag.scan.rewriting import ScanMerge
from theano_dag.scan.utils import map_variables
from theano_dag.tensor.random.utils import RandomStream, RandomStreams
from theano_dag.testing.procmem import traced_peak

ENGINES = [
    pytest.param(Mode(linker="py", optimizer=None), id="py"),
    pytest.param(Mode(linker="cpu"), id="cpu"),
    pytest.param(
        Mode(linker="opencl"),
        id="opencl",
        marks=pytest.mark.skipif(not opencl_available()[0], reason="no OpenCL device"),
    ),
]
REF = Mode(linker="py", optimizer=None)
RNG = np.random.default_rng(42)


def run(inputs, outputs, values, mode, updates=None):
    f = theano_dag.function(inputs, outputs, mode=mode, updates=updates)
    return f(*values)


# -- values on every engine ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rnn_step_matches_numpy_loop(mode, dtype):
    x = tt.TensorType(dtype, shape=(None, None))("x")
    w = tt.TensorType(dtype, shape=(None, None))("w")
    h0 = tt.TensorType(dtype, shape=(None,))("h0")
    hs, updates = scan(
        lambda x_t, h, w: tt.tanh(tt.dot(h, w) + x_t),
        sequences=x,
        outputs_info=h0,
        non_sequences=w,
        mode=mode,
    )
    assert updates == OrderedDict()
    xv = RNG.normal(size=(7, 4)).astype(dtype)
    wv = (RNG.normal(size=(4, 4)) * 0.5).astype(dtype)
    h0v = RNG.normal(size=4).astype(dtype)
    got = run([x, w, h0], hs, [xv, wv, h0v], mode)
    h, want = h0v, []
    for t in range(7):
        h = np.tanh(h @ wv + xv[t])
        want.append(h)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, np.array(want), rtol=1e-5 if dtype == "float32" else 1e-12)
    np.testing.assert_allclose(got, run([x, w, h0], hs, [xv, wv, h0v], REF), rtol=1e-5)


@pytest.mark.parametrize("mode", ENGINES)
def test_taps_on_sequences_and_outputs(mode):
    # y[t] = x[t-2] + x[t+1] + y[t-1] * y[t-3] / 10
    x = tt.dvector("x")
    y0 = tt.dvector("y0")
    ys, _ = scan(
        lambda xm2, xp1, ym1, ym3: xm2 + xp1 + ym1 * ym3 / 10,
        sequences=dict(input=x, taps=[-2, 1]),
        outputs_info=dict(initial=y0, taps=[-1, -3]),
        mode=mode,
    )
    xv, y0v = RNG.normal(size=9), RNG.normal(size=3)
    got = run([x, y0], ys, [xv, y0v], mode)
    buf = list(y0v)
    for t in range(9 - 3):
        buf.append(xv[t] + xv[t + 3] + buf[-1] * buf[-3] / 10)
    np.testing.assert_allclose(got, buf[3:], rtol=1e-12)


@pytest.mark.parametrize("mode", ENGINES)
def test_go_backwards_multiple_outputs_and_none(mode):
    x = tt.dvector("x")
    (acc, double), _ = scan(
        lambda v, a: (a + v, v * 2),
        sequences=x,
        outputs_info=[np.float64(0.0), None],
        go_backwards=True,
        mode=mode,
    )
    xv = np.arange(1.0, 6.0)
    got_acc, got_double = run([x], [acc, double], [xv], mode)
    np.testing.assert_allclose(got_acc, np.cumsum(xv[::-1]))
    np.testing.assert_allclose(got_double, xv[::-1] * 2)


@pytest.mark.parametrize("mode", ENGINES)
def test_symbolic_and_constant_n_steps(mode):
    k = tt.iscalar("k")
    a = tt.dvector("a")
    powers, _ = scan(lambda p, a: p * a, outputs_info=tt.ones_like(a), non_sequences=a, n_steps=k)
    av = np.array([1.0, 2.0, 3.0])
    got = run([a, k], powers, [av, 4], mode)
    np.testing.assert_allclose(got, [av**i for i in range(1, 5)])
    assert run([a, k], powers, [av, 0], mode).shape == (0, 3)
    fixed, _ = scan(lambda p: p * 2, outputs_info=np.float64(1.0), n_steps=5)
    np.testing.assert_allclose(run([], fixed, [], mode), [2, 4, 8, 16, 32])


@pytest.mark.parametrize("mode", ENGINES)
def test_until_ends_the_loop(mode):
    # Doubles until the value passes 100 (Theano's doc example), at most 1000 steps.
    x = tt.dscalar("x")
    vals, _ = scan(lambda p: (p * 2, until(p * 2 > 100)), outputs_info=x, n_steps=1000)
    np.testing.assert_allclose(run([x], vals, [3.0], mode), [6, 12, 24, 48, 96, 192])


@pytest.mark.parametrize("mode", ENGINES)
def test_shared_variable_updates_inside_fn(mode):
    count = theano_dag.shared(np.float64(0.0), name="count")
    x = tt.dvector("x")
    out, updates = scan(lambda v: (v + count, {count: count + 1}), sequences=x)
    assert list(updates) == [count]
    f = theano_dag.function([x], out, updates=updates, mode=mode)
    np.testing.assert_allclose(f(np.zeros(3)), [0, 1, 2])
    assert count.get_value() == 3
    np.testing.assert_allclose(f(np.zeros(2)), [3, 4])
    assert count.get_value() == 5


def test_implicit_outer_variables_and_shared_reads():
    w = theano_dag.shared(np.array([1.0, 2.0]), name="w")
    c = tt.dscalar("c")
    x = tt.dmatrix("x")
    out, _ = scan(lambda row: row * w + c, sequences=x)
    node = out.owner
    assert isinstance(node.op, Scan)
    assert w in node.inputs and c in node.inputs
    xv = RNG.normal(size=(3, 2))
    np.testing.assert_allclose(theano_dag.function([x, c], out)(xv, 0.5), xv * [1, 2] + 0.5)


def test_return_list_and_only_updates():
    x = tt.dvector("x")
    (out,), _ = scan(lambda v: v + 1, sequences=x, return_list=True)
    np.testing.assert_allclose(out.eval({x: np.ones(2)}), [2, 2])
    s = theano_dag.shared(np.float64(0.0))
    none, updates = scan(lambda v: {s: s + v}, sequences=x)
    assert none is None
    f = theano_dag.function([x], [], updates=updates)
    f(np.array([1.0, 2.0, 3.0]))
    assert s.get_value() == 6.0


def test_views_map_reduce_foldl_foldr():
    x = tt.dvector("x")
    xv = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(scan_map(lambda v: v**2, x)[0].eval({x: xv}), xv**2)
    r, _ = scan_reduce(lambda v, a: a + v, x, np.float64(0.0))
    assert r.eval({x: xv}) == 6.0
    assert foldl(lambda v, a: a * 10 + v, x, np.float64(0.0))[0].eval({x: xv}) == 123.0
    assert foldr(lambda v, a: a * 10 + v, x, np.float64(0.0))[0].eval({x: xv}) == 321.0
    # Theano's top-level names.
    assert theano_dag.map is scan_map and theano_dag.reduce is scan_reduce
    assert theano_dag.scan is scan and theano_dag.scan_module.until is until


def test_infer_shape_of_states():
    x0 = tt.dvector("x0")
    k = tt.lscalar("k")
    out, _ = scan(lambda p: p + 1, outputs_info=x0, n_steps=k)
    buf = out.owner.inputs[0]  # out is a slice of the buffer
    node = buf.owner
    shapes = node.op.infer_shape(None, node, [(), (1, x0.shape[0])])
    assert len(shapes) == 1 and len(shapes[0]) == 2


@pytest.mark.parametrize("mode", ENGINES[:2])
def test_infer_shape_of_per_step_outputs(mode):
    xs, w = tt.dmatrix("xs"), tt.dvector("w")
    (acc, ys), _ = scan(lambda x, a, w: (a + x, tt.outer(x, w)), sequences=xs,
                        outputs_info=[tt.zeros((xs.shape[1],)), None], non_sequences=w)  # fmt: skip
    node = ys.owner
    shapes = node.op.infer_shape(None, node, [tuple(i.shape[d] for d in range(i.ndim))
                                              for i in node.inputs])  # fmt: skip
    dims = [tt.as_tensor_variable(d) for shp in shapes for d in shp]
    f = theano_dag.function([xs, w], [*dims, acc, ys], mode=mode, on_unused_input="ignore")
    for steps in (5, 0):
        *got, acc_v, ys_v = f(RNG.normal(size=(steps, 3)), RNG.normal(size=4))
        # The state's buffer holds its initial row, then one row per step.
        assert [int(d) for d in got] == [acc_v.shape[0] + 1, *acc_v.shape[1:], *ys_v.shape]
        assert ys_v.shape == (steps, 3, 4)  # no step ran: rows of the inferred shape


def test_infer_shape_of_rows_that_depend_on_values_is_not_defined():
    from theano_dag.graph.utils import MethodNotDefined

    v = tt.lvector("v")
    ys, _ = scan(lambda k: tt.arange(k), sequences=v)
    node = ys.owner
    with pytest.raises(MethodNotDefined, match="depends on the step's values"):
        node.op.infer_shape(None, node, [(), (v.shape[0],)])


def test_strict_wants_every_shared_variable_passed():
    # As Theano: strict=True refuses a shared variable the step reads but nobody passed;
    # another outer variable (an input, Lasagne's mocked layers) is an implicit non-sequence.
    w = tt.dscalar("w")
    x = tt.dvector("x")
    s = theano_dag.shared(2.0, name="s")
    with pytest.raises(ValueError, match=r"strict=True\): the step function uses \[s\]"):
        scan(lambda v: v * s * w, sequences=x, strict=True)
    with pytest.raises(MissingInputError):  # Theano's error type
        scan(lambda v: v * s * w, sequences=x, strict=True)
    out, _ = scan(lambda v: v * w, sequences=x, strict=True)
    np.testing.assert_allclose(out.eval({x: np.array([1.0, 2.0]), w: 3.0}), [3, 6])
    out, _ = scan(lambda v, s: v * s * w, sequences=x, non_sequences=s, strict=True)
    np.testing.assert_allclose(out.eval({x: np.array([1.0, 2.0]), w: 3.0}), [6, 12])


@pytest.mark.parametrize("mode", ENGINES)
def test_strict_accepts_a_non_sequence_read_through_a_closure(mode):
    # Lasagne's recurrent layers: the weights, computed from shared variables, are
    # passed as non_sequences and read by the step through a closure. fn gets the
    # variable itself (as in Theano), so the step reads what was passed.
    w1 = theano_dag.shared(np.array([[0.5, -0.2], [0.1, 0.4]]), name="w1")
    w2 = theano_dag.shared(np.array([[0.3, 0.0], [-0.1, 0.2]]), name="w2")
    w = tt.concatenate([w1, w2], axis=1)
    x = tt.dmatrix("x")
    got_args = []

    def step(x_t, h, *args):
        got_args.extend(args)
        return tt.tanh(tt.dot(h, w)[:2] + tt.dot(h, w)[2:] + x_t)

    hs, _ = scan(
        step, sequences=x, outputs_info=tt.zeros(2, "float64"), non_sequences=[w], strict=True
    )
    assert got_args == [w]
    gw1 = theano_dag.grad((hs**2).sum(), w1)
    f = theano_dag.function([x], [hs, gw1], mode=mode)
    xv = RNG.normal(size=(4, 2))

    def numpy_cost(w1v):
        wv = np.concatenate([w1v, w2.get_value()], axis=1)
        h, out = np.zeros(2), []
        for row in xv:
            h = np.tanh((h @ wv)[:2] + (h @ wv)[2:] + row)
            out.append(h)
        return np.array(out)

    got_hs, got_g = f(xv)
    np.testing.assert_allclose(got_hs, numpy_cost(w1.get_value()), rtol=1e-12)
    eps, w1v, want_g = 1e-6, w1.get_value(), np.zeros((2, 2))
    for i, j in np.ndindex(2, 2):
        d = np.zeros((2, 2))
        d[i, j] = eps
        hi, lo = numpy_cost(w1v + d), numpy_cost(w1v - d)
        want_g[i, j] = ((hi**2).sum() - (lo**2).sum()) / (2 * eps)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-6)
    # A shared variable the step reads but nobody passed is still refused.
    with pytest.raises(ValueError, match=r"strict=True\): the step function uses \[w1\]"):
        scan(
            lambda x_t, h, w: tt.dot(h, w1) + x_t,
            sequences=x,
            outputs_info=tt.zeros(2, "float64"),
            non_sequences=[w],
            strict=True,
        )


# -- errors --------------------------------------------------------------------------------


def test_output_type_differs_from_initial_state():
    x = tt.dvector("x")
    with pytest.raises(TypeError, match=r"float64, scalar.*float32, scalar"):
        scan(lambda v, a: a + v, sequences=x, outputs_info=np.float32(0))
    with pytest.raises(TypeError, match=r"output 0 .*vector.*scalar"):
        scan(lambda v, a: a + x, sequences=x, outputs_info=np.float64(0))


def test_too_few_initial_steps_for_taps():
    y0 = tt.dvector("y0")
    ys, _ = scan(lambda a, b: a + b, outputs_info=dict(initial=y0, taps=[-1, -3]), n_steps=3)
    f = theano_dag.function([y0], ys, mode=REF)
    with pytest.raises(ValueError, match=r"taps \[-1, -3\] and needs 3 initial steps.*has 2"):
        f(np.zeros(2))


def test_n_steps_longer_than_sequence():
    x = tt.dvector("x")
    out, _ = scan(lambda v: v, sequences=x, n_steps=5)
    f = theano_dag.function([x], out, mode=REF)
    with pytest.raises(ValueError, match=r"sequence 0 has 3 steps, fewer than the 5 steps"):
        f(np.zeros(3))


def test_until_must_be_scalar():
    with pytest.raises(TypeError, match=r"until: the condition must be a scalar"):
        until(tt.dvector("v") > 0)


def test_no_steps_information():
    with pytest.raises(ValueError, match="no information about the number of steps"):
        scan(lambda p: p, outputs_info=np.float64(0))


def test_positive_output_taps_refused():
    with pytest.raises(ValueError, match="taps must be negative"):
        scan(lambda p: p, outputs_info=dict(initial=tt.dvector(), taps=[1]), n_steps=2)


# -- gradients -------------------------------------------------------------------------------


def test_grad_rnn_by_finite_differences():
    rng = np.random.default_rng(0)

    def cost(x, w, h0):
        hs, _ = scan(
            lambda x_t, h, w: tt.tanh(tt.dot(h, w) + x_t),
            sequences=x,
            outputs_info=h0,
            non_sequences=w,
        )
        return (hs**2).sum() + hs[-1].sum()

    verify_grad(
        cost, [rng.normal(size=(5, 3)), rng.normal(size=(3, 3)) * 0.5, rng.normal(size=3)], rng=rng
    )


def test_grad_several_taps_by_finite_differences():
    rng = np.random.default_rng(1)

    def cost(x, y0, c):
        ys, _ = scan(
            lambda xm2, xp1, ym1, ym3, c: xm2 * xp1 + tt.sin(ym1) * ym3 * c,
            sequences=dict(input=x, taps=[-2, 1]),
            outputs_info=dict(initial=y0, taps=[-1, -3]),
            non_sequences=c,
        )
        return (ys * tt.arange(ys.shape[0])).sum()

    verify_grad(cost, [rng.normal(size=8), rng.normal(size=4), np.array(0.7)], rng=rng)


def test_grad_go_backwards_and_nitsot_by_finite_differences():
    rng = np.random.default_rng(2)

    def cost(x, a0):
        (acc, y), _ = scan(
            lambda v, a: (a * tt.cos(v) + v, a * v),
            sequences=x,
            outputs_info=[a0, None],
            go_backwards=True,
        )
        return acc.sum() + (y**2).sum()

    verify_grad(cost, [rng.normal(size=(4, 2)), rng.normal(size=2)], rng=rng)


def test_truncate_gradient_stops_the_flow():
    x = tt.dvector("x")
    h0 = tt.dscalar("h0")
    hs, _ = scan(lambda v, h: h * 0.5 + v, sequences=x, outputs_info=h0, truncate_gradient=2)
    gx, gh0 = theano_dag.grad(hs[-1], [x, h0])
    f = theano_dag.function([x, h0], [gx, gh0])
    got_x, got_h0 = f(np.ones(5), 1.0)
    # Only the last two steps pass a gradient back.
    np.testing.assert_allclose(got_x, [0, 0, 0, 0.5, 1.0])
    assert got_h0 == 0.0
    full, _ = scan(lambda v, h: h * 0.5 + v, sequences=x, outputs_info=h0)
    got_x, got_h0 = theano_dag.function([x, h0], theano_dag.grad(full[-1], [x, h0]))(
        np.ones(5), 1.0
    )
    np.testing.assert_allclose(got_x, 0.5 ** np.arange(4, -1, -1))
    assert got_h0 == 0.5**5


@pytest.mark.parametrize("mode", ENGINES)
def test_grad_float32_on_every_engine(mode):
    x = tt.fmatrix("x")
    w = tt.fmatrix("w")
    hs, _ = scan(
        lambda x_t, h, w: tt.tanh(tt.dot(h, w) + x_t),
        sequences=x,
        outputs_info=tt.zeros_like(x[0]),
        non_sequences=w,
    )
    gw = theano_dag.grad(hs.sum(), w)
    xv = RNG.normal(size=(6, 3)).astype("float32")
    wv = RNG.normal(size=(3, 3)).astype("float32")
    got = run([x, w], gw, [xv, wv], mode)
    want = run([x, w], gw, [xv, wv], REF)
    assert got.dtype == "float32"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_jacobian_of_loop_output():
    x = tt.dvector("x")
    ys, _ = scan(lambda v, a: a * v, sequences=x, outputs_info=np.float64(1.0))
    j = theano_dag.jacobian(ys, x)
    xv = np.array([2.0, 3.0, 4.0])
    got = j.eval({x: xv})
    prods = np.cumprod(xv)
    want = np.array([[prods[i] / xv[k] if k <= i else 0 for k in range(3)] for i in range(3)])
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("mode", ENGINES[:2])
def test_grad_through_until(mode):
    # 2.6, 5.2, 10.4, 20.8: the step after p = 10.4 is the last; the sum is 30x.
    x = tt.dscalar("x")
    vals, _ = scan(lambda p: (p * 2, until(p > 10)), outputs_info=x, n_steps=10, mode=mode)
    g = theano_dag.function([x], theano_dag.grad(vals.sum(), x), mode=mode)
    assert float(g(1.3)) == pytest.approx(30.0)


def test_grad_through_until_by_finite_differences():
    def f(xs, w, h0):
        def step(x, acc, w):
            new = acc + tt.tanh(x * w) ** 2
            return new, until(new.sum() > 2.0)

        sums, _ = scan(step, sequences=xs, outputs_info=h0, non_sequences=w)
        ys, _ = scan(lambda x, w: (x * w, until(x.sum() > 1.5)), sequences=xs, non_sequences=w)
        return (sums**2).sum() + ys.sum()

    rng = np.random.default_rng(11)
    xs = rng.uniform(0.3, 0.6, size=(12, 2))
    verify_grad(f, [xs, np.array([0.9, 1.1]), np.array([0.05, -0.1])], rng=rng)


def test_grad_when_an_output_feeds_another():
    # The step returns h and h * 3: the gradient reaches x through both.
    rng = np.random.default_rng(4)

    def cost(x):
        (hs, ts), _ = scan(
            lambda v, h: [tt.sin(h) + v, (tt.sin(h) + v) * 3],
            sequences=x,
            outputs_info=[np.float64(0.2), None],
        )
        return (hs**2).sum() + ts.sum()

    verify_grad(cost, [rng.normal(size=4)], rng=rng)


def test_grad_under_compute_test_value_raise():
    # PyMC3 builds every model under compute_test_value="raise": the backward loop's
    # inner graph has no test values of its own, the outer graph gets them all.
    rng = np.random.default_rng(5)
    xv, wv, h0v, cv = rng.normal(size=(5, 3)), rng.normal(size=(3, 3)), rng.normal(size=3), 0.7
    x, w, h0, c = tt.dmatrix("x"), tt.dmatrix("w"), tt.dvector("h0"), tt.dscalar("c")

    def build():
        hs, _ = scan(  # tanh(h @ w): the backward loop reads stored products
            lambda x_t, h, w: tt.tanh(tt.dot(h, w) + x_t),
            sequences=x,
            outputs_info=h0,
            non_sequences=w,
        )
        ys, _ = scan(  # several taps
            lambda xm2, xp1, ym1, ym3, c: xm2 * xp1 + tt.sin(ym1) * ym3 * c,
            sequences=dict(input=x[:, 0], taps=[-2, 1]),
            outputs_info=dict(initial=h0[:3] + c, taps=[-1, -3]),
            non_sequences=c,
        )
        (acc, y), _ = scan(  # a per-step output, backwards
            lambda v, a: (a * tt.cos(v) + v, a * v),
            sequences=x,
            outputs_info=[h0, None],
            go_backwards=True,
        )
        cost = (hs**2).sum() + ys.sum() + acc.sum() + (y**2).sum()
        return theano_dag.grad(cost, [x, w, h0, c])

    expected = theano_dag.function([x, w, h0, c], build())(xv, wv, h0v, cv)
    for var, value in zip([x, w, h0, c], [xv, wv, h0v, np.array(cv)]):
        var.tag.test_value = value
    # Computing the test values compiles the loops; their rewrites run without test
    # values (compute_test_value_opt), so none fails and is rolled back with a warning.
    with theano_dag.config.change_flags(compute_test_value="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        grads = build()
    for g, want in zip(grads, expected):
        np.testing.assert_allclose(g.tag.test_value, want, rtol=1e-12)


def test_rop_and_second_order_through_scan():
    x, v, c = tt.dvector("x"), tt.dvector("v"), tt.dscalar("c")
    ys, _ = scan(
        lambda xt, a, c: tt.sin(a) * c + xt,
        sequences=x,
        outputs_info=np.float64(0.3),
        non_sequences=c,
    )

    def numpy_loop(xv, cv):
        a, out = 0.3, []
        for t in range(len(xv)):
            a = np.sin(a) * cv + xv[t]
            out.append(a)
        return np.array(out)

    xv, vv, eps = np.array([0.1, 0.2, 0.3, 0.4]), np.array([1.0, -2.0, 0.5, 3.0]), 1e-6
    want = (numpy_loop(xv + eps * vv, 0.7) - numpy_loop(xv - eps * vv, 0.7)) / (2 * eps)
    got = theano_dag.Rop(ys, x, v).eval({x: xv, v: vv, c: 0.7})
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # The Hessian of the loop's sum (a loop over the gradient of a loop).
    hess = theano_dag.hessian(ys.sum(), x).eval({x: xv, c: 0.7})
    g = theano_dag.function([x], theano_dag.grad(ys.sum(), x), givens={c: tt.constant(0.7)})
    num = np.array([(g(xv + eps * e) - g(xv - eps * e)) / (2 * eps) for e in np.eye(4)])
    np.testing.assert_allclose(hess, num, rtol=1e-5, atol=1e-8)
    # d2/dc2 by finite differences of the first derivative.
    rng = np.random.default_rng(5)
    verify_grad(
        lambda cc: theano_dag.grad(
            scan(
                lambda xt, a, c: tt.sin(a) * c + xt,
                sequences=tt.constant(xv),
                outputs_info=np.float64(0.3),
                non_sequences=cc,
            )[0].sum(),
            cc,
        ),
        [np.array(0.7)],
        rng=rng,
    )


# -- rewrites ------------------------------------------------------------------------------


def _scan_nodes(f):
    return [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Scan)]


@pytest.mark.parametrize("mode", ENGINES[1:])
def test_loop_invariant_work_is_hoisted(mode):
    x, w, h0 = tt.dmatrix("x"), tt.dmatrix("w"), tt.dvector("h0")
    hs, _ = scan(
        lambda x_t, h, w: tt.tanh(tt.dot(h, tt.exp(w).T * 2) + x_t),
        sequences=x,
        outputs_info=h0,
        non_sequences=w,
    )
    f = theano_dag.function([x, w, h0], hs, mode=mode)
    (node,) = _scan_nodes(f)
    inner = io_toposort(list(node.op.inner_inputs), list(node.op.inner_outputs))
    # exp(w).T * 2 is computed once, outside: the step is the product, add and tanh.
    assert not any("exp" in str(n.op).lower() for n in inner), [str(n.op) for n in inner]
    assert any("exp" in str(n.op).lower() for n in f.maker.fgraph.apply_nodes)
    xv, wv, h0v = RNG.normal(size=(5, 3)), RNG.normal(size=(3, 3)) * 0.3, RNG.normal(size=3)
    want = run([x, w, h0], hs, [xv, wv, h0v], REF)
    np.testing.assert_allclose(f(xv, wv, h0v), want, rtol=1e-12)
    excluded = theano_dag.function(
        [x, w, h0], hs, mode=mode.excluding("local_scan_hoist_invariants")
    )
    (node,) = _scan_nodes(excluded)
    inner = io_toposort(list(node.op.inner_inputs), list(node.op.inner_outputs))
    assert any("exp" in str(n.op).lower() for n in inner)


def test_debugprint_shows_the_inner_graph():
    x = tt.dvector("x")
    s, _ = scan(lambda v, acc: acc + v * 2, sequences=x, outputs_info=np.float64(0))
    text = theano_dag.printing.debugprint(s, file="str")
    outer, inner = text.split("\nInner graphs:\n")
    assert "Scan{1 seqs, 1 states, 0 outputs} [id B]" in outer
    assert inner.strip().splitlines() == [
        "Scan{1 seqs, 1 states, 0 outputs} [id B]",
        " >Elemwise{add,no_inplace} [id P]",
        " > |<TensorType(float64, scalar)> [id Q] -> [id L]",
        " > |Elemwise{mul,no_inplace} [id R]",
        " >   |x[t] [id S] -> [id I]",
        " >   |2 [id T]",
    ]


@pytest.mark.parametrize("mode", ENGINES[1:])
def test_only_the_last_state_is_kept(mode):
    # h[-1] alone is read: the loop keeps a circular buffer of 2 rows, not 1 + n_steps.
    x, h0 = tt.dmatrix("x"), tt.dvector("h0")
    hs, _ = scan(lambda x_t, h: tt.tanh(h * 0.9 + x_t), sequences=x, outputs_info=h0)
    f = theano_dag.function([x, h0], hs[-1], mode=mode)
    (node,) = _scan_nodes(f)
    assert node.op.store == (2,)
    xv, h0v = RNG.normal(size=(7, 3)), RNG.normal(size=3)
    np.testing.assert_allclose(f(xv, h0v), run([x, h0], hs, [xv, h0v], REF)[-1], rtol=1e-12)
    np.testing.assert_allclose(f(xv[:1], h0v), np.tanh(h0v * 0.9 + xv[0]), rtol=1e-12)
    # Reading the whole output keeps everything.
    g = theano_dag.function([x, h0], [hs[-1], hs], mode=mode)
    (node,) = _scan_nodes(g)
    assert node.op.store == (0,)


def test_last_steps_of_a_tapped_state():
    # taps [-1, -3] and y[-2] read: 4 rows kept (3 taps back, and the step written).
    y0 = tt.dvector("y0")
    ys, _ = scan(lambda a, b: a * 0.5 + b, outputs_info=dict(initial=y0, taps=[-3, -1]), n_steps=9)
    f = theano_dag.function([y0], [ys[-2], ys[-1]])
    (node,) = _scan_nodes(f)
    assert node.op.store == (4,)
    want = run([y0], ys, [np.array([1.0, 2.0, 3.0])], REF)
    got = f(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(got, [want[-2], want[-1]], rtol=1e-12)


def test_long_loop_keeps_constant_memory(no_kernel_builds_in_flight, kernels_at_first_call):
    x0 = tt.dvector("x0")
    k = tt.lscalar("k")
    out, _ = scan(lambda p: p * 0.5 + 1.0, outputs_info=x0, n_steps=k)
    f = theano_dag.function([x0, k], out[-1])
    # A warm-up as long as the C loop's threshold, so that its driver is built and the
    # step's kernels loaded before the traced call (a cold kernel cache compiles them in
    # it, not in the background): the traced call runs the C loop whatever the machine's
    # speed, and no library loads while it is traced.
    f(np.zeros(100), 20)
    got, peak = traced_peak(f, np.zeros(100), 100_000)
    np.testing.assert_allclose(got, np.full(100, 2.0))
    # All 100,000 steps of 100 floats would be 80 MB. Here it peaks under 1 MB; on the
    # H200 machine (Python 3.12, numpy 2.5) at 1.1 MB, hence the margin.
    assert peak < 2_000_000, peak


def test_save_memory_then_until():
    x = tt.dscalar("x")
    vals, _ = scan(lambda p: (p * 2, until(p * 2 > 100)), outputs_info=x, n_steps=1000)
    f = theano_dag.function([x], vals[-1])
    (node,) = _scan_nodes(f)
    assert node.op.store == (2,)
    assert f(3.0) == 192.0


def test_unused_sequences_are_dropped():
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    # (a sum: elementwise work on the rows alone would leave no loop at all)
    out, _ = scan(lambda a, b: a.sum(), sequences=[x, y])
    assert len(out.owner.inputs) == 3  # n_steps and the two sequences, as built
    f = theano_dag.function([x, y], out)
    (node,) = _scan_nodes(f)
    assert node.op.n_seqs == 1
    # y still bounds the number of steps (the shortest sequence), outside the loop.
    xv = np.arange(8.0).reshape(4, 2)
    np.testing.assert_allclose(f(xv, np.zeros((2, 2))), [1.0, 5.0])


@pytest.mark.parametrize("stream", [RandomStream, RandomStreams], ids=lambda c: c.__name__)
def test_random_streams_inside_the_step(stream):
    # Theano 1.1.2's numpy-like stream and Theano 1.0's size-first one (size by keyword
    # reads the same in both)
    srng = stream(seed=7)
    n = tt.lscalar("n")
    draws, updates = scan(lambda: srng.normal(size=(2,)), n_steps=n)
    assert len(updates) == 1  # the generator, carried through the loop
    f = theano_dag.function([n], draws, updates=updates)
    first, second = f(3), f(3)
    assert first.shape == (3, 2)
    assert not np.allclose(first[0], first[1]) and not np.allclose(first, second)
    # The same draws as three calls of a function drawing once, from the same seed.
    srng2 = stream(seed=7)
    once = theano_dag.function([], srng2.normal(size=(2,)))
    np.testing.assert_allclose(first, [once() for _ in range(3)])
    # A gradient that does not need the draws.
    x = tt.dvector("x")
    shifted, _ = scan(lambda v: v + srng.normal(size=()), sequences=x)
    np.testing.assert_allclose(theano_dag.grad(shifted.sum(), x).eval({x: np.ones(3)}), 1.0)


@pytest.mark.parametrize("pass_updates", [True, False])
def test_one_step_draws_from_the_initial_state_and_updates_the_generator(pass_updates):
    # CD-1 of Theano's deep-learning tutorials (DBN.py): one Gibbs step (n_steps=1, no
    # loop) draws from a generator made in the step, with probabilities read from the
    # initial state. As in Theano, scan gives no updates and the generator's default
    # update is valid outside the step, whether or not the caller passes scan's updates.
    srng = MRG_RandomStreams(seed=5)
    x = tt.dmatrix("x")
    w = theano_dag.shared(np.full((3, 2), 0.1), name="w")

    def step(h):
        p = tt.nnet.sigmoid(tt.dot(h, w.T))
        return srng.binomial(size=(h.shape[0], 3), n=1, p=p, dtype="float64")

    h0 = srng.binomial(size=(x.shape[0], 2), n=1, p=tt.nnet.sigmoid(tt.dot(x, w)), dtype="float64")
    vs, updates = scan(step, outputs_info=[h0], n_steps=1)
    assert len(updates) == 0
    data = theano_dag.shared(np.random.default_rng(0).random((10, 3)))
    i = tt.lscalar("i")
    f = theano_dag.function(
        [i], vs[-1], updates=updates if pass_updates else None, givens={x: data[i * 2 : i * 2 + 5]}
    )
    draws = np.array([f(0) for _ in range(20)])
    assert draws.shape == (20, 5, 3) and set(np.unique(draws)) <= {0.0, 1.0}
    assert len({d.tobytes() for d in draws}) > 1  # the generator moves between calls


@pytest.mark.parametrize("n_steps", [None, 1])
def test_scan_returns_ordered_updates_that_join(n_steps):
    # Theano's scan (and map, reduce, foldl...) returns OrderedUpdates: theanets joins a
    # forward and a backward loop's updates with +
    srng = RandomStreams(seed=2)
    x = tt.dmatrix("x")

    def step(r):
        return r * srng.binomial(r.shape, p=0.5, dtype="float64")

    fw, fupd = scan(step, sequences=x, n_steps=n_steps)
    bw, bupd = scan(step, sequences=x, go_backwards=True, n_steps=n_steps)
    _, mupd = scan_map(lambda r: r + 1, sequences=x)
    assert all(isinstance(u, theano_dag.OrderedUpdates) for u in (fupd, bupd, mupd))
    # one step builds no loop and gives no updates (the draws' default updates serve)
    assert len(fupd) == len(bupd) == (1 if n_steps is None else 0)
    joined = fupd + bupd + mupd
    assert isinstance(joined, theano_dag.OrderedUpdates)
    assert list(joined) == [*fupd, *bupd]
    f = theano_dag.function([x], [fw, bw], updates=joined)
    a, b = f(np.ones((3, 4)))
    assert a.shape == b.shape == (3 if n_steps is None else 1, 4)
    assert set(np.unique(a)) <= {0.0, 1.0}
    if n_steps is None:  # two different updates of one generator refuse to join
        (rng, _), (_, other) = *fupd.items(), *bupd.items()
        with pytest.raises(KeyError, match="Collision"):
            fupd + OrderedDict([(rng, other)])


def test_draws_in_a_loop_without_scan_updates_name_them():
    # With more than one step, the generator's default update made in the step reads the
    # step's own variables: as in Theano, a function not given scan's updates cannot be
    # built, and the error says why and what to pass.
    srng = RandomStreams(seed=3)
    x = tt.dvector("x")
    out, updates = scan(lambda h: h + srng.normal(h.shape), outputs_info=[x], n_steps=3)
    with pytest.raises(MissingInputError) as info:
        theano_dag.function([x], out[-1])
    msg = str(info.value)
    assert msg.startswith("Undeclared input: x[t-1] (of type TensorType(float64, vector))")
    assert "x[t-1] is a variable of a scan step's graph, and the update of an unnamed " in msg
    assert "shared RandomGeneratorType reads it" in msg
    assert msg.endswith("`function(..., updates=updates)`")
    assert info.value.variable.name == "x[t-1]"
    f = theano_dag.function([x], out[-1], updates=updates)
    a, b = f(np.zeros(2)), f(np.zeros(2))
    assert a.shape == (2,) and not np.array_equal(a, b)
    # An undeclared input that is not the step's keeps the plain message.
    y = tt.dvector("y")
    with pytest.raises(MissingInputError, match=r"declare it as an input$"):
        theano_dag.function([x], out[-1] + y, updates=updates)


@pytest.mark.parametrize("mode", ["FAST_RUN", "FAST_COMPILE"])
@pytest.mark.parametrize("stream", [RandomStream, RandomStreams], ids=lambda c: c.__name__)
def test_a_gradient_through_the_draws_of_a_step_reads_the_forward_draws(stream, mode):
    # Each step draws anew from the carried generator; the backward loop cannot draw
    # step t's numbers again, so the forward loop stores them (Theano's MRG stream keeps
    # its state, a tensor, per step, for the same result). PyMC3's SVGD over a
    # Minibatch model differentiates such a loop.
    srng = stream(seed=3)
    x, w = tt.dvector("x"), tt.dscalar("w")
    noisy, updates = scan(lambda v: v * srng.normal(size=()), sequences=x)
    f = theano_dag.function([x], [noisy, theano_dag.grad(noisy.sum(), x)], mode=mode)
    out, g = f(np.ones(4))
    assert len(set(out.tolist())) == 4  # a draw per step
    np.testing.assert_array_equal(g, out)  # d(v * z_t)/dv = z_t, the forward's z_t
    if mode == "FAST_RUN":  # the gradient's stored draws come from the cost's own loop
        assert len(_scan_nodes(f)) == 2  # forward and backward

    # A recurrence: h_t = tanh(w h_{t-1} + z_t), z_t drawn in the step.
    def step(h):
        z = srng.normal(size=(2,))
        return tt.tanh(w * h + z), z

    (hs, zs), updates = scan(step, outputs_info=[tt.ones(2, dtype="float64"), None], n_steps=5)
    f = theano_dag.function([w], [zs, theano_dag.grad(hs.sum(), w)], updates=updates, mode=mode)

    def cost(wv, draws):
        h, total = np.ones(2), 0.0
        for z in draws:
            h = np.tanh(wv * h + z)
            total += h.sum()
        return total

    for _ in range(2):  # the generator advances between calls; each call is consistent
        draws, gw = f(0.7)
        eps = 1e-6
        numeric = (cost(0.7 + eps, draws) - cost(0.7 - eps, draws)) / (2 * eps)
        np.testing.assert_allclose(gw, numeric, rtol=1e-6)


def test_loops_over_the_same_steps_are_merged():
    x = tt.dvector("x")
    sums, _ = scan(lambda v, a: a + v, sequences=x, outputs_info=np.float64(0))
    prods, _ = scan(lambda v, a: a * v, sequences=x, outputs_info=np.float64(1))
    squares, _ = scan(lambda v: v * v, sequences=x)
    f = theano_dag.function([x], [sums, prods, squares])
    (node,) = _scan_nodes(f)
    # (the squares need no loop: they are computed on all of x at once)
    assert node.op.n_states == 2 and node.op.n_nitsot == 0
    xv = np.array([1.0, 2.0, 3.0, 4.0])
    got = f(xv)
    np.testing.assert_allclose(got[0], np.cumsum(xv))
    np.testing.assert_allclose(got[1], np.cumprod(xv))
    np.testing.assert_allclose(got[2], xv**2)
    # A loop that reads the other's result stays apart.
    after, _ = scan(lambda v, a: a + v, sequences=sums, outputs_info=np.float64(0))
    g = theano_dag.function([x], [sums, after])
    assert len(_scan_nodes(g)) == 2
    np.testing.assert_allclose(g(xv)[1], np.cumsum(np.cumsum(xv)))


def test_a_loop_and_its_clone_are_merged():
    # theano.clone of a graph with a loop gives a second loop node holding the same inner
    # graph; merging them must give the merged loop inner inputs of its own.
    x, w = tt.dvector("x"), tt.dscalar("w")
    sums, _ = scan(lambda v, a: a + v * w, sequences=x, outputs_info=np.float64(0))
    cost = sums.sum()
    cost2 = theano_dag.clone(cost, replace={w: 2 * w})
    f = theano_dag.function([x, w], [cost, cost2])
    (node,) = _scan_nodes(f)
    assert len(set(node.op.inner_inputs)) == len(node.op.inner_inputs)
    xv = np.array([1.0, 2.0, 3.0])
    got = f(xv, 0.5)
    np.testing.assert_allclose(got, [np.cumsum(xv * 0.5).sum(), np.cumsum(xv * 1.0).sum()])


def test_scan_merge_groups_loops_over_equal_steps():
    x = tt.dvector("x")
    a, _ = scan(lambda v, s: s * v, sequences=x, outputs_info=np.float64(1), n_steps=3)
    b, _ = scan(lambda v, s: (s + v, until(v > 0)), sequences=x, outputs_info=np.float64(0))
    c, _ = scan(lambda v: v + 1, sequences=x, n_steps=3)
    merge = ScanMerge()
    assert merge.belongs_to_set(a.owner.inputs[0].owner, [c.owner])
    assert not merge.belongs_to_set(a.owner.inputs[0].owner, [b.owner.inputs[0].owner])
    # Theano's names of the inner graph's inputs and outputs.
    assert c.owner.op.inputs == list(c.owner.op.inner_inputs)
    assert c.owner.op.outputs == list(c.owner.op.inner_outputs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_step_is_the_step_itself(dtype):
    # As Theano: n_steps=1 builds no loop; the output has the step's dtype (int8 + int32
    # is int32), a leading axis of 1, and the taps read the initial rows.
    seq = tt.ivector("seq")
    rs, _ = scan(lambda s, p: p + s, sequences=dict(input=seq, taps=[2]), outputs_info=0, n_steps=1)
    assert rs.dtype == "int32" and not _scan_nodes(theano_dag.function([seq], rs))
    np.testing.assert_array_equal(theano_dag.function([seq], rs)(np.arange(5, dtype="int32")), [2])
    x = tt.matrix("x", dtype=dtype)
    rs, _ = scan(
        lambda s, p1, p3: p1 * 2 + s + p3,
        sequences=x,
        outputs_info=dict(initial=x, taps=[-1, -3]),
        n_steps=1,
    )
    xv = np.arange(8, dtype=dtype).reshape(4, 2)
    got = theano_dag.function([x], rs)(xv)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, [xv[2] * 2 + xv[0] + xv[0]])


def test_a_single_tap_may_be_an_int():
    u, x0 = tt.dvector("u"), tt.dvector("x0")
    out, _ = scan(
        lambda u_tm2, x_tm1, x_tm2: u_tm2 + x_tm1 * 0.5 + x_tm2,
        sequences=dict(input=u, taps=-2),
        outputs_info=dict(initial=x0, taps=[-1, -2]),
    )
    uv, x0v = np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0])
    want = np.zeros(2)
    want[0] = uv[0] + x0v[1] * 0.5 + x0v[0]
    want[1] = uv[1] + want[0] * 0.5 + x0v[1]
    np.testing.assert_allclose(theano_dag.function([u, x0], out)(uv, x0v), want)


def test_an_initial_state_the_steps_never_read_is_disconnected():
    # As Theano: z's step reads x's previous value, never its own, so z0 does not reach
    # the outputs; x0 and y0 do.
    x0, y0, z0 = tt.dvector("x0"), tt.dvector("y0"), tt.dvector("z0")
    [x, y, z], _ = scan(
        lambda xp, yp, zp: (xp**2, yp, xp + 1), outputs_info=[x0, y0, z0], n_steps=3
    )
    cost = (x + y + z).sum()
    gx, gy = tt.grad(cost, [x0, y0])
    v = np.array([0.5, -1.0])
    # x_3 = x0**8, z_t = x_{t-1} + 1: d/dx0 of sum(x_t + z_t) over t = 1..3
    want = (2 * v + 4 * v**3 + 8 * v**7) + (1 + 2 * v + 4 * v**3)
    f = theano_dag.function([x0, y0, z0], [gx, gy], on_unused_input="ignore")
    got = f(v, v, v)
    np.testing.assert_allclose(got[0], want)
    np.testing.assert_allclose(got[1], [3.0, 3.0])
    with pytest.raises(DisconnectedInputError):
        tt.grad(cost, z0)
    with pytest.raises(DisconnectedInputError):
        tt.grad(x.sum(), y0)
    g = tt.grad(cost, z0, disconnected_inputs="ignore")
    f = theano_dag.function([x0, y0, z0], g, on_unused_input="ignore")
    np.testing.assert_array_equal(f(v, v, v), [0.0, 0.0])


def test_updates_of_a_nested_loop_are_returned_through_the_outer_one():
    # The inner loop's draws advance a generator: the outer step returns that update (a
    # generator, not a tensor), which the outer loop carries.
    srng = RandomStream(1)
    x = tt.dmatrix("x")

    def row(i):
        inner, up = scan(lambda j: x[i, j] + srng.uniform(0, 0.001), sequences=tt.arange(2))
        return inner, up

    out, updates = scan(row, sequences=tt.arange(3))
    f = theano_dag.function([x], out, updates=updates)
    xv = np.arange(6.0).reshape(3, 2)
    a, b = f(xv), f(xv)
    assert a.shape == (3, 2) and np.all((a - xv >= 0) & (a - xv < 0.001))
    assert not np.array_equal(a, b)


def test_loops_with_the_same_stopping_condition_are_merged():
    # Theano's ScanMerge merges loops with an until when the conditions are the same.
    x = tt.dvector("x")
    sums, _ = scan(lambda v, s: (s + v, until(v > 3)), sequences=x, outputs_info=np.float64(0))
    prods, _ = scan(lambda v, p: (p * v, until(v > 3)), sequences=x, outputs_info=np.float64(1))
    other, _ = scan(lambda v, s: (s - v, until(v > 2)), sequences=x, outputs_info=np.float64(0))
    f = theano_dag.function([x], [sums, prods])
    (node,) = _scan_nodes(f)
    assert node.op.has_until and node.op.n_states == 2
    xv = np.array([1.0, 2.0, 5.0, 1.0, 1.0])
    got = f(xv)
    np.testing.assert_allclose(got[0], np.cumsum(xv)[:3])
    np.testing.assert_allclose(got[1], np.cumprod(xv)[:3])
    # Another condition: the loops stop after other steps and stay apart.
    g = theano_dag.function([x], [sums, other])
    assert len(_scan_nodes(g)) == 2
    got = g(np.array([1.0, 3.0, 5.0, 1.0]))
    np.testing.assert_allclose(got[0], [1.0, 4.0, 9.0])
    np.testing.assert_allclose(got[1], [-1.0, -4.0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elementwise_outputs_of_sequence_rows_are_computed_before_the_loop(dtype):
    # Theano's PushOutSeqScan: the per-step output exp(x_t) * w is one exp and one
    # product on all of x; the work the step reads (tanh(h + x_t)) stays in it.
    x = tt.TensorType(dtype, shape=(None, None))("x")
    w = tt.TensorType(dtype, shape=(None,))("w")
    h0 = tt.TensorType(dtype, shape=(None,))("h0")
    (hs, ys), _ = scan(
        lambda x_t, h, w: (tt.tanh(h + tt.sqrt(abs(x_t))), tt.exp(x_t) * w),
        sequences=x,
        outputs_info=[h0, None],
        non_sequences=w,
    )
    f = theano_dag.function([x, w, h0], [hs, ys])
    (node,) = _scan_nodes(f)
    assert node.op.n_states == 1 and node.op.n_nitsot == 0

    def inner_ops(node):
        nodes = io_toposort(list(node.op.inner_inputs), list(node.op.inner_outputs))
        return " ".join(str(n.op) for n in nodes)

    assert "exp" not in inner_ops(node) and "sqrt" in inner_ops(node)
    assert any("exp" in str(n.op) for n in f.maker.fgraph.apply_nodes)
    xv = RNG.normal(size=(5, 3)).astype(dtype)
    wv, h0v = RNG.normal(size=3).astype(dtype), RNG.normal(size=3).astype(dtype)
    h, want = h0v, []
    for x_t in xv:
        h = np.tanh(h + np.sqrt(np.abs(x_t)))
        want.append(h)
    tol = 1e-5 if dtype == "float32" else 1e-12
    got = f(xv, wv, h0v)
    np.testing.assert_allclose(got[0], want, rtol=tol, atol=tol)
    np.testing.assert_allclose(got[1], np.exp(xv) * wv, rtol=tol, atol=tol)
    # Excluded by Theano's name, the work stays in the step, with the same values.
    mode = theano_dag.compile.mode.get_default_mode().excluding("scanOp_pushout_seqs_ops")
    g = theano_dag.function([x, w, h0], [hs, ys], mode=mode)
    (node,) = _scan_nodes(g)
    assert node.op.n_nitsot == 1 and "exp" in inner_ops(node)
    for a, b in zip(g(xv, wv, h0v), got):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    # A loop whose outputs are all such work is no loop.
    zs, _ = scan(lambda x_t: x_t * 2 + 1, sequences=x)
    k = theano_dag.function([x], zs)
    assert not _scan_nodes(k)
    np.testing.assert_allclose(k(xv), xv * 2 + 1, rtol=tol)


def test_loops_with_the_same_inner_computation_are_equal_ops():
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    a, _ = scan(lambda v: v.sum() + 1, sequences=x)
    b, _ = scan(lambda v: v.sum() + 1, sequences=y)
    c, _ = scan(lambda v: v.sum() + 2, sequences=x)
    assert a.owner.op == b.owner.op and hash(a.owner.op) == hash(b.owner.op)
    assert a.owner.op != c.owner.op
    # Two such loops over the same input are computed once.
    d, _ = scan(lambda v: v.sum() + 1, sequences=x)
    f = theano_dag.function([x], [a, d])
    assert len(_scan_nodes(f)) == 1
    got = f(np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_allclose(got[0], [4.0, 8.0])
    np.testing.assert_allclose(got[1], [4.0, 8.0])


def test_an_output_tap_given_twice_is_refused():
    x, y = tt.dvector("x"), tt.dvector("y")
    with pytest.raises(ValueError, match=r"taps \[-1, -1\], one of them twice"):
        scan(lambda v, a, b: a + v, sequences=x, outputs_info=dict(initial=y, taps=[-1, -1]))


def test_a_step_may_return_an_empty_tuple_of_updates():
    x = tt.dvector("x")
    out, _ = scan(lambda v: ([v * 2], (), until(v > 1)), sequences=x)
    np.testing.assert_allclose(out.eval({x: np.array([0.5, 1.5, 3.0])}), [1.0, 3.0])


def test_map_variables_replaces_inside_a_loop_step():
    # The replacement brings outer variables into the step: they become non-sequences.
    x, outer = tt.dvector("x"), tt.dscalar("outer")
    w = theano_dag.shared(np.float64(1.0), name="w")
    z = outer * (w + 1)

    def step(v, acc):
        r = acc + v
        r.tag.replacement = z * (acc - v)
        return r

    s, _ = scan(step, sequences=x, outputs_info=np.float64(0))
    (s2,) = map_variables(lambda v: getattr(v.tag, "replacement", v), [z * s])
    f = theano_dag.function([x, outer], [z * s, s2])
    got = f(np.array([1.0, 2.0, 3.0]), 0.5)
    np.testing.assert_allclose(got, [[1.0, 3.0, 6.0], [-1.0, -3.0, -6.0]])  # z is 1
    counter = theano_dag.shared(0, name="counter")
    counter.default_update = counter + 1

    def step2(v, acc):
        r = acc + v
        r.tag.replacement = counter * (acc - v)
        return r

    s3, _ = scan(step2, sequences=x, outputs_info=np.float64(0))
    with pytest.raises(NotImplementedError, match="has an update"):
        map_variables(lambda v: getattr(v.tag, "replacement", v), [s3])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_loop_whose_step_is_all_invariant_is_an_alloc(dtype):
    # Theano's pushout of a whole invariant step: the loop goes, its value is repeated.
    h = tt.vector("h", dtype=dtype)
    w1, w2 = tt.matrix("w1", dtype=dtype), tt.matrix("w2", dtype=dtype)
    o, _ = scan(lambda h, a, b: tt.dot(h, a + b), non_sequences=[h, w1, w2], n_steps=5)
    f = theano_dag.function([h, w1, w2], o)
    assert not _scan_nodes(f)
    assert any(isinstance(n.op, tt.Alloc) for n in f.maker.fgraph.toposort())
    rng = np.random.default_rng(0)
    hv = rng.random(2).astype(dtype)
    av, bv = rng.random((2, 2)).astype(dtype), rng.random((2, 2)).astype(dtype)
    got = f(hv, av, bv)
    assert got.dtype == dtype and got.shape == (5, 2)
    np.testing.assert_allclose(got, np.tile(hv @ (av + bv), (5, 1)), rtol=1e-5)


def test_unused_and_repeated_non_sequences_leave_one_input():
    # Theano's layout helpers name the parts: one sequence and one non-sequence remain.
    w, v = tt.dmatrix("w"), tt.lvector("v")
    y, _ = scan(lambda i, a, b, c: b[i], sequences=v, non_sequences=[w[0], w, w[0]])
    f = theano_dag.function([w, v], y)
    (node,) = _scan_nodes(f)
    op = node.op
    assert len(op.inner_seqs(op.inputs)) == 1 and len(op.outer_seqs(node)) == 1
    assert len(op.inner_non_seqs(op.inputs)) == 1
    assert [x.name for x in op.outer_non_seqs(node)] == ["w"]
    wv = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(f(wv, [2, 0]), wv[[2, 0]])


def test_var_mappings_index_the_layout_of_the_loop():
    # Theano's Scan.var_mappings, on this op's layout: outer inputs n_steps, sequence,
    # two states' initial values, the carried generator, the non-sequence; inner inputs
    # the row, the taps (-3, -1), (-1), the generator, the non-sequence; outputs the
    # states, the per-step output, the generator.
    srng = RandomStream(3)
    x, a0, b0, w = tt.dvector("x"), tt.dvector("a0"), tt.dscalar("b0"), tt.dscalar("w")

    def step(v, a3, a1, b, w):
        total = v + a3 + a1 + b + w + srng.uniform(size=())
        return total, total, total

    outs, _ = scan(
        step,
        sequences=x,
        outputs_info=[dict(initial=a0, taps=[-3, -1]), b0, None],
        non_sequences=w,
    )
    node = outs[0].owner.inputs[0].owner
    op = node.op
    assert (op.n_seqs, op.n_states, op.n_nitsot, op.n_carry, op.n_nonseqs) == (1, 2, 1, 1, 1)
    m = op.var_mappings
    assert m["inner_inp_from_outer_inp"] == {0: [], 1: [0], 2: [1, 2], 3: [3], 4: [4], 5: [5]}
    assert m["outer_out_from_outer_inp"] == {0: -1, 1: -1, 2: 0, 3: 1, 4: 3, 5: -1}
    assert m["outer_inp_from_outer_out"] == {0: 2, 1: 3, 2: -1, 3: 4}
    assert m["outer_inp_from_inner_inp"] == {0: 1, 1: 2, 2: 2, 3: 3, 4: 4, 5: 5}
    assert m["inner_out_from_inner_inp"] == {0: [], 1: [0], 2: [0], 3: [1], 4: [3], 5: []}
    assert m["inner_inp_from_inner_out"] == {0: [1, 2], 1: [3], 2: [], 3: [4]}
    assert m["outer_out_from_inner_out"] == {0: 0, 1: 1, 2: 2, 3: 3}
    # The indices are the node's: the outer inputs and the inner ones they feed match.
    assert node.inputs[m["outer_inp_from_inner_inp"][4]].type == op.inner_inputs[4].type
    assert len(node.inputs) == 6 and len(node.outputs) == 4


def test_theano_scan_prealloc_flag_is_accepted_and_changes_no_value():
    # Theano's scan__allow_output_prealloc: the loop here copies each step's rows (False).
    assert theano_dag.config.scan__allow_output_prealloc is False
    x = tt.dvector("x")
    sums, _ = scan(lambda v, a: a + v, sequences=x, outputs_info=np.float64(0))
    with theano_dag.config.change_flags(scan__allow_output_prealloc=True):
        f = theano_dag.function([x], sums)
        np.testing.assert_allclose(f(np.arange(4.0)), [0.0, 1.0, 3.0, 6.0])


def test_fn_is_the_compiled_step_with_its_rewritten_graph():
    # Theano's Scan.fn: the compiled step; fn.maker.fgraph shows what the rewrites left in
    # it (here the invariant W1 + W2 is computed before the loop, no elementwise op stays).
    h0, w1, w2 = tt.dvector("h0"), tt.dmatrix("W1"), tt.dmatrix("W2")
    hs, _ = scan(
        lambda h, a, b: tt.dot(h, a + b), outputs_info=h0, non_sequences=[w1, w2], n_steps=3
    )
    f = theano_dag.function([h0, w1, w2], hs)
    (node,) = _scan_nodes(f)
    step = node.op.fn
    assert not any(isinstance(n.op, tt.Elemwise) for n in step.maker.fgraph.apply_nodes)
    hv, wv = RNG.normal(size=2), RNG.normal(size=(2, 2))
    got = step(hv, wv)  # the step's inputs: the state's tap, then the hoisted sum
    np.testing.assert_allclose(got[0], hv @ wv, rtol=1e-12)
    again = step(wv[0], wv)
    np.testing.assert_allclose(got[0], hv @ wv, rtol=1e-12)  # the first result is kept
    np.testing.assert_allclose(again[0], wv[0] @ wv, rtol=1e-12)


@pytest.mark.parametrize("error", [TypeError, ValueError])
def test_a_step_output_of_another_dtype_than_its_state_is_refused(error):
    # Theano raises ValueError here; TypeError says what is wrong: both catch it.
    x = tt.dvector("x")
    with pytest.raises(error, match=r"output 0 .* has type TensorType\(float64, scalar\), but"):
        scan(lambda v, a: a + v, sequences=x, outputs_info=tt.constant(np.float32(0)))
    with pytest.raises(error, match=r"make them agree"):
        scan(lambda v, a: (a + v).sum(), sequences=x, outputs_info=tt.dvector("v0"))


@pytest.mark.parametrize("mode", ENGINES)
def test_no_step_gives_the_empty_stack_of_rows_whose_length_is_a_graph(mode):
    # A loop of 0 steps whose rows' length is a graph (h[i, :D], with D = X.shape[1])
    # refused to give its empty stack. Theano's test_pushout_seqs met such a loop under
    # DebugMode, made by local_scan_push_out_dot_sum in a gradient's loop from a running
    # sum that gave zeros. That length reads only the non-sequences: it is known without
    # a step. (Here the stack is written as such; the sum is taken after the loop.)
    X, h, n = tt.dmatrix("X"), tt.dmatrix("h"), tt.lscalar("n")

    def step(i, X, h):
        return X.dot(tt.diag(h[i, : X.shape[1]]))

    out, _ = scan(step, sequences=tt.arange(n), non_sequences=[X, h])
    f = theano_dag.function([X, h, n], [out, out.sum(axis=0)], mode=mode)
    f_sum = theano_dag.function([X, h, n], out.sum(axis=0), mode=mode)
    xv, hv = RNG.normal(size=(4, 3)), RNG.normal(size=(5, 7))
    for steps in (2, 0):
        stack, total = f(xv, hv, steps)
        want = np.array([xv @ np.diag(hv[i, :3]) for i in range(steps)]).reshape(steps, 4, 3)
        np.testing.assert_allclose(stack, want)
        np.testing.assert_allclose(total, want.sum(axis=0))
        np.testing.assert_allclose(f_sum(xv, hv, steps), want.sum(axis=0))
