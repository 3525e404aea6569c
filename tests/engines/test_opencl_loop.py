"""``Scan`` on the OpenCL engine (engines.opencl.loop): the loop's state stays on the device.

Values against the reference engine (and numpy loops) for float32 and float64, the
transfers of a call (a constant count, whatever the number of steps), and the visible
fallbacks (a step with host ops warns; a loop carrying random generators runs on the host).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from theano_dag.engines.opencl.context import opencl_available

OK, WHY = opencl_available()
if not OK:
    pytest.skip(f"no OpenCL platform/device available: {WHY}", allow_module_level=True)

import theano_dag  # noqa: E402
import theano_dag.engines.opencl as ocl  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag.compile.io import Out  # noqa: E402
from theano_dag.compile.mode import Mode  # noqa: E402
from theano_dag.engines.opencl.context import get_context  # noqa: E402
from theano_dag.engines.opencl.loop import HostStepWarning, ScanImpl  # noqa: E402
from theano_dag.gradient import verify_grad  # noqa: E402
from theano_dag.scan import Scan, scan, until  # noqa: E402
from theano_dag.scan import map as scan_map  # noqa: E402
from theano_dag.tensor.random.utils import RandomStream  # noqa: E402

CTX = get_context()
OCL = Mode(linker="opencl")
REF = Mode(linker="py", optimizer=None)
DTYPES = [
    "float32",
    pytest.param(
        "float64", marks=pytest.mark.skipif(not CTX.has_fp64, reason="the device has no fp64")
    ),
]
TOL = {"float32": 1e-5, "float64": 1e-12}


def scan_impls(f):
    """The device implementations of the Scan nodes of ``f`` (one per node run there)."""
    runner = f.fn
    return [runner.impls[n] for n in runner.order if isinstance(n.op, Scan) and n in runner.impls]


def host_scans(f):
    runner = f.fn
    return [n for n in runner.order if isinstance(n.op, Scan) and runner.where[n] == "host"]


def both(inputs, outputs, values, **kw):
    """The outputs on the OpenCL engine (asserting each Scan ran on the device) and on the
    reference engine."""
    f = theano_dag.function(inputs, outputs, mode=OCL, **kw)
    assert scan_impls(f) and not host_scans(f)
    got = f(*values)
    want = theano_dag.function(inputs, outputs, mode=REF, **kw)(*values)
    return f, got, want


def rnn(dtype, n=None, go_backwards=False):
    x = tt.TensorType(dtype, shape=(None, None))("x")
    w = tt.TensorType(dtype, shape=(None, None))("w")
    h0 = tt.TensorType(dtype, shape=(None,))("h0")
    hs, _ = scan(
        lambda x_t, h, w: tt.tanh(tt.dot(h, w) + x_t),
        sequences=x,
        outputs_info=h0,
        non_sequences=w,
        n_steps=n,
        go_backwards=go_backwards,
        mode=OCL,
    )
    return [x, w, h0], hs


def rnn_values(dtype, steps, width=8, seed=0):
    rng = np.random.default_rng(seed)
    return [
        rng.normal(size=(steps, width)).astype(dtype),
        (rng.normal(size=(width, width)) * 0.3).astype(dtype),
        rng.normal(size=width).astype(dtype),
    ]


def numpy_rnn(xv, wv, h0v):
    h, out = h0v, []
    for x_t in xv:
        h = np.tanh(h @ wv + x_t)
        out.append(h)
    return np.array(out)


# -- values -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_rnn_runs_on_the_device_and_matches_the_reference(dtype):
    ins, hs = rnn(dtype)
    vals = rnn_values(dtype, 12)
    f, got, want = both(ins, hs, vals)
    assert got.dtype == dtype and got.shape == (12, 8)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_allclose(got, numpy_rnn(*vals), rtol=TOL[dtype], atol=TOL[dtype])
    # The step was compiled for the device, its outputs left there.
    (impl,) = scan_impls(f)
    assert isinstance(impl, ScanImpl) and impl.fn is not None
    assert impl.fn.thunk.linker.return_device_arrays
    assert "loop Scan{1 seqs, 1 states, 0 outputs}: state on the device, step of" in (
        ocl.opencl_profile(f)
    )


def lstm_style(dtype, hid=6, steps=20, nin=5):
    """An LSTM-style loop: h[t] = o * tanh(c[t]) from gates of x[t], h[t-1] and h[t-3];
    c[t] from c[t-1]. Returns (inputs, (hs, cs), values)."""
    x = tt.TensorType(dtype, shape=(None, None))("x")
    w = tt.TensorType(dtype, shape=(None, None))("w")
    u1 = tt.TensorType(dtype, shape=(None, None))("u1")
    u3 = tt.TensorType(dtype, shape=(None, None))("u3")
    h0 = tt.TensorType(dtype, shape=(None, None))("h0")
    c0 = tt.TensorType(dtype, shape=(None,))("c0")

    def step(x_t, h1, h3, c1, w, u1, u3):
        z = tt.dot(x_t, w) + tt.dot(h1, u1) + tt.dot(h3, u3)
        i, f, o, g = (z[k * hid : (k + 1) * hid] for k in range(4))
        c = tt.nnet.sigmoid(f) * c1 + tt.nnet.sigmoid(i) * tt.tanh(g)
        return tt.nnet.sigmoid(o) * tt.tanh(c), c

    outs, _ = scan(
        step,
        sequences=x,
        outputs_info=[dict(initial=h0, taps=[-1, -3]), c0],
        non_sequences=[w, u1, u3],
        mode=OCL,
    )
    rng = np.random.default_rng(3)
    vals = [
        rng.normal(size=(steps, nin)).astype(dtype),
        (rng.normal(size=(nin, 4 * hid)) * 0.4).astype(dtype),
        (rng.normal(size=(hid, 4 * hid)) * 0.4).astype(dtype),
        (rng.normal(size=(hid, 4 * hid)) * 0.4).astype(dtype),
        rng.normal(size=(3, hid)).astype(dtype),
        rng.normal(size=hid).astype(dtype),
    ]
    return [x, w, u1, u3, h0, c0], outs, vals


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstm_style_loop_with_taps_minus_one_and_minus_three(dtype):
    ins, (hs, cs), vals = lstm_style(dtype)
    _, got, want = both(ins, [hs, cs], vals)
    tol = 1e-4 if dtype == "float32" else 1e-12
    for g, r in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)
    assert got[0].shape == (20, 6) and got[1].shape == (20, 6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstm_style_gradient_runs_all_on_the_device(dtype):
    ins, (hs, cs), vals = lstm_style(dtype, steps=12)
    grads = theano_dag.grad((hs**2).sum() + cs[-1].sum(), ins)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HostStepWarning)
        f, got, want = both(ins, grads, vals)
    assert len(scan_impls(f)) == 2 and not f.fn.placement.fallbacks
    tol = 2e-3 if dtype == "float32" else 1e-10
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_go_backwards(dtype):
    ins, hs = rnn(dtype, go_backwards=True)
    vals = rnn_values(dtype, 9, seed=1)
    _, got, want = both(ins, hs, vals)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_allclose(
        got, numpy_rnn(vals[0][::-1], *vals[1:]), rtol=TOL[dtype], atol=TOL[dtype]
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_until_stops_the_loop_on_the_device(dtype):
    # Double a value until it passes a bound: the per-step outputs keep the steps run.
    x0 = tt.TensorType(dtype, shape=())("x0")
    bound = tt.TensorType(dtype, shape=())("bound")

    def step(x, bound):
        y = x * 2
        return y, until(y > bound)

    ys, _ = scan(step, outputs_info=x0, non_sequences=bound, n_steps=50, mode=OCL)
    vals = [np.asarray(1.5, dtype), np.asarray(100.0, dtype)]
    _, got, want = both([x0, bound], ys, vals)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, 1.5 * 2.0 ** np.arange(1, 8, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_per_step_outputs_and_a_non_contiguous_initial_state(dtype):
    # map: per-step outputs only; a state whose initial rows are a transposed view.
    x = tt.TensorType(dtype, shape=(None, None))("x")
    m = tt.TensorType(dtype, shape=(None, None))("m")
    sq, _ = scan_map(lambda r: tt.exp(r) * 2, sequences=x, mode=OCL)
    acc, _ = scan(lambda r, a: a + r.sum(), sequences=x, outputs_info=m.T[0], mode=OCL)
    rng = np.random.default_rng(2)
    vals = [rng.normal(size=(7, 3)).astype(dtype), rng.normal(size=(4, 5)).astype(dtype)]
    _, got, want = both([x, m], [sq, acc], vals)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=TOL[dtype], atol=TOL[dtype])


def test_a_loop_given_no_mode_runs_its_step_on_the_device():
    x, h0 = tt.dvector("x"), tt.dscalar("h0")
    hs, _ = scan(lambda r, h: r * h + 1, sequences=x, outputs_info=h0)
    assert hs.owner.inputs[0].owner.op.mode is None
    xv = np.linspace(0.5, 1.5, 6)
    f, got, want = both([x, h0], hs, [xv, 0.25])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    (impl,) = scan_impls(f)
    assert isinstance(impl.fn.thunk.linker, type(f.fn.linker))


def test_circular_buffer_of_the_last_steps():
    # store=4 for taps [-1, -2]: four rows of history, the output the last four, oldest first.
    x = tt.dvector("x")
    y0 = tt.dvector("y0")
    a, b, r = tt.dscalar("a"), tt.dscalar("b"), tt.dscalar("r")
    small = Scan([r, a, b], [a * 0.5 + b + r], 1, [(-2, -1)], 0, store=(4,), mode=OCL)
    op = Scan([r, a, b], [a * 0.5 + b + r], 1, [(-2, -1)], 0, mode=OCL)
    xv, y0v = np.arange(11.0), np.array([1.0, 2.0])
    n = tt.as_tensor_variable(np.int64(11))
    full = theano_dag.function([x, y0], op(n, x, y0), mode=OCL)(xv, y0v)
    f = theano_dag.function([x, y0], small(n, x, y0), mode=OCL)
    assert scan_impls(f)
    np.testing.assert_allclose(f(xv, y0v), full[-4:])
    np.testing.assert_allclose(full, theano_dag.function([x, y0], op(n, x, y0), mode=REF)(xv, y0v))


def test_no_steps():
    ins, hs = rnn("float64", n=0)
    f = theano_dag.function(ins, hs, mode=OCL)
    got = f(*rnn_values("float64", 4))
    assert got.shape == (0, 8)


# -- gradients --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_through_scan(dtype):
    ins, hs = rnn(dtype)
    cost = (hs**2).sum()
    grads = theano_dag.grad(cost, ins)
    vals = rnn_values(dtype, 10, width=5, seed=4)
    f, got, want = both(ins, grads, vals)
    # The backward loop runs on the device too.
    assert len(scan_impls(f)) == 2
    tol = 1e-4 if dtype == "float32" else 1e-10
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)


def test_gradient_through_scan_by_finite_differences():
    def cost(x, w, h0):
        hs, _ = scan(
            lambda x_t, h, w: tt.tanh(tt.dot(h, w) + x_t),
            sequences=x,
            outputs_info=h0,
            non_sequences=w,
            mode=OCL,
        )
        return (hs[-1] * hs.sum(axis=0)).sum()

    verify_grad(cost, rnn_values("float64", 6, width=4, seed=5), mode=OCL, rng=np.random)


# -- the state stays on the device -------------------------------------------------------


def transfers_of_one_call(f, vals):
    f(*vals)  # the first call compiles and plans
    before = CTX.transfers.snapshot()
    out = f(*vals)
    return CTX.transfers - before, out


def test_a_thousand_steps_cost_the_transfers_of_ten():
    ins, hs = rnn("float32")
    f = theano_dag.function(ins, hs[-1], mode=OCL)
    assert scan_impls(f)
    short, _ = transfers_of_one_call(f, rnn_values("float32", 10))
    long, last = transfers_of_one_call(f, rnn_values("float32", 1000))
    # Three inputs up, the one result down: nothing per step.
    assert (long.h2d, long.d2h) == (short.h2d, short.d2h) == (3, 1)
    assert long.d2h_bytes == 8 * 4
    np.testing.assert_allclose(last, numpy_rnn(*rnn_values("float32", 1000))[-1], rtol=1e-4)


def test_until_reads_one_scalar_a_step():
    x0 = tt.dscalar("x0")
    n = tt.iscalar("n")
    ys, _ = scan(lambda x: (x + 1, until(x > 1e9)), outputs_info=x0, n_steps=n, mode=OCL)
    f = theano_dag.function([x0, n], ys, mode=OCL)
    t100, _ = transfers_of_one_call(f, [0.0, 100])
    t200, got = transfers_of_one_call(f, [0.0, 200])
    np.testing.assert_array_equal(got, np.arange(1.0, 201.0))
    # A hundred more steps: a hundred more conditions (one byte each) and the result's
    # hundred more rows, in the one download of the result; no row of the state per step.
    assert t200.d2h - t100.d2h == 100
    assert t200.d2h_bytes - t100.d2h_bytes == 100 * 1 + 100 * 8
    assert t200.h2d == t100.h2d


def test_device_arrays_in_and_out_never_touch_the_host():
    ins, hs = rnn("float32")
    f = theano_dag.function(ins, Out(hs, borrow=True), mode=OCL)
    vals = [ocl.to_device(v) for v in rnn_values("float32", 50)]
    f(*vals)
    before = CTX.transfers.snapshot()
    out = f(*vals)
    t = CTX.transfers - before
    assert (t.h2d, t.d2h) == (0, 0)
    assert type(out).__module__.startswith("pyopencl")
    np.testing.assert_allclose(out.get(), numpy_rnn(*rnn_values("float32", 50)), rtol=1e-4)


# -- visible fallbacks -------------------------------------------------------------------


def test_a_step_with_host_ops_warns_and_still_matches():
    x = tt.dmatrix("x")
    h0 = tt.dvector("h0")
    hs, _ = scan(lambda r, h: tt.sort(r) + h, sequences=x, outputs_info=h0, mode=OCL)
    f = theano_dag.function([x, h0], hs, mode=OCL)
    vals = [np.random.default_rng(6).normal(size=(5, 4)), np.zeros(4)]
    with pytest.warns(HostStepWarning, match="on the host"):
        got = f(*vals)
    assert "(SortOp{quicksort, axis=-1} on the host)" in ocl.opencl_profile(f)
    np.testing.assert_allclose(got, np.cumsum(np.sort(vals[0], axis=1), axis=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", HostStepWarning)
        f(*vals)  # once per compiled step


def test_a_step_compiled_for_another_engine_runs_on_the_host_visibly():
    x, h0 = tt.dvector("x"), tt.dscalar("h0")
    hs, _ = scan(lambda r, h: r + h, sequences=x, outputs_info=h0, mode=REF)
    f = theano_dag.function([x, h0], hs, mode=OCL)
    assert not scan_impls(f) and host_scans(f)
    assert "Scan" in ocl.opencl_profile(f).split("on the host:")[1]


def test_a_loop_carrying_a_random_generator_runs_on_the_host_and_matches():
    # Its step, compiled for the OpenCL engine and run by the host's loop, returns the
    # generator's update as an output: the step's runner tried to hand it out as a
    # device array ("object arrays on the compute device are not allowed").
    outs = {}
    for name, mode in (("ocl", OCL), ("cpu", Mode(linker="cpu"))):
        x = tt.dscalar("x")
        srng = RandomStream(0)
        hs, _ = scan(
            lambda h, srng=srng: (h + srng.uniform(), until(h > 5)),
            outputs_info=x,
            n_steps=10,
            mode=mode,
        )
        f = theano_dag.function([x], [hs, theano_dag.grad(hs.sum(), x)], mode=mode)
        if name == "ocl":
            assert host_scans(f)
        outs[name] = [f(v) for v in (-2.0, 3.0)]
    for got, want in zip(outs["ocl"], outs["cpu"]):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        assert got[1] == want[1] == len(want[0])


def test_gradient_through_taps_minus_one_and_minus_three():
    # The backward loop of a state with taps [-1, -3] shifts a window of cotangents
    # (concatenate, inc_subtensor): those run on the device too, nothing warns.
    x = tt.dvector("x")
    y0 = tt.dvector("y0")
    a = tt.dscalar("a")
    ys, _ = scan(
        lambda x_t, y1, y3, a: tt.tanh(a * y1 + 0.5 * y3 + x_t),
        sequences=x,
        outputs_info=dict(initial=y0, taps=[-1, -3]),
        non_sequences=a,
        mode=OCL,
    )
    cost = (ys**2).sum()
    grads = theano_dag.grad(cost, [x, y0, a])
    rng = np.random.default_rng(7)
    vals = [rng.normal(size=8), rng.normal(size=3), 0.7]
    with warnings.catch_warnings():
        warnings.simplefilter("error", HostStepWarning)
        f, got, want = both([x, y0, a], grads, vals)
    assert len(scan_impls(f)) == 2
    assert all(not impl.fn.thunk.placement.fallbacks for impl in scan_impls(f))
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)


# -- the writes a loop's gradient makes: IncSubtensor and Join on the device --------------


def device_and_reference(inputs, output, values):
    f = theano_dag.function(inputs, output, mode=OCL)
    assert not f.fn.placement.fallbacks, f.fn.placement.fallbacks
    return f(*values), theano_dag.function(inputs, output, mode=REF)(*values)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "index",
    [
        lambda x: x[1],
        lambda x: x[1:3],
        lambda x: x[::-2, 1],
        lambda x: x[:, 2:],
        lambda x: x[-1, -2],
    ],
    ids=["row", "rows", "reversed-step-col", "cols", "element"],
)
@pytest.mark.parametrize("setting", [False, True], ids=["inc", "set"])
def test_inc_and_set_subtensor(dtype, index, setting):
    x = tt.TensorType(dtype, shape=(None, None))("x")
    y = tt.TensorType(dtype, shape=(None,))("y")
    part = index(x)
    yb = y if part.ndim == 1 else y.sum()  # broadcast along the view's missing dims
    fn = tt.set_subtensor if setting else tt.inc_subtensor
    rng = np.random.default_rng(8)
    xv = rng.normal(size=(5, 4)).astype(dtype)
    yv = rng.normal(size=index(xv).shape[-1:] if np.ndim(index(xv)) else 3).astype(dtype)
    got, want = device_and_reference([x, y], fn(part, yb) * 2, [xv, yv])
    np.testing.assert_allclose(got, want, rtol=TOL[dtype])


def test_inc_subtensor_of_a_scalar_and_another_dtype():
    x = tt.fmatrix("x")
    got, want = device_and_reference(
        [x], tt.inc_subtensor(x[1:, :1], np.float64(0.5)) + 1, [np.ones((3, 2), "float32")]
    )
    np.testing.assert_array_equal(got, want)


def test_inc_subtensor_of_a_shape_that_does_not_broadcast():
    x, y = tt.dmatrix("x"), tt.dvector("y")
    f = theano_dag.function([x, y], tt.inc_subtensor(x[1:], y) * 2, mode=OCL)
    with pytest.raises(ValueError, match="cannot broadcast shape"):
        f(np.ones((3, 4)), np.ones(3))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_join(dtype, axis):
    a = tt.TensorType(dtype, shape=(None, None))("a")
    b = tt.TensorType(dtype, shape=(None, None))("b")
    rng = np.random.default_rng(9)
    av = rng.normal(size=(3, 2)).astype(dtype)
    bv = rng.normal(size=(3, 2) if axis else (1, 2)).astype(dtype)
    got, want = device_and_reference([a, b], tt.concatenate([a.T.T, b * 2], axis=axis), [av, bv])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.concatenate([av, bv * 2], axis=axis))


def test_join_of_shapes_that_do_not_fit():
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    f = theano_dag.function([a, b], tt.concatenate([a, b * 2], axis=0), mode=OCL)
    with pytest.raises(ValueError, match="cannot join shapes"):
        f(np.ones((2, 3)), np.ones((2, 4)))
