"""The CPU engine's C loop (``engines.cpu.loop``): a step made of fused kernels is recorded
once and replayed from C. Values against numpy loops and the reference engine, in float32
and float64, for each loop form the C loop handles (sequences, taps, circular buffers,
per-step outputs, ``go_backwards``, ``until``, gradients), and the steps it left to Python.
"""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu import loop as cloop
from theano_dag.engines.cpu.native.ckernel import compile_mode
from theano_dag.graph.basic import io_toposort
from theano_dag.scalar import Composite
from theano_dag.scan import Scan, scan, until
from theano_dag.scan.rewriting import local_elemwise_as_kernel
from theano_dag.tensor.elemwise import Elemwise

CPU = Mode(linker="cpu")
REF = Mode(linker="py", optimizer=None)
RNG = np.random.default_rng(7)

pytestmark = pytest.mark.skipif(cloop.loop_library() is None, reason="no C compiler")


@pytest.fixture
def c_steps(monkeypatch):
    """The steps each C loop ran, in order (a list that the test reads)."""
    ran = []
    real = cloop.KernelLoop.run

    def run(self, t0, n):
        done, status = real(self, t0, n)
        ran.append(done - t0)
        return done, status

    monkeypatch.setattr(cloop.KernelLoop, "run", run)
    return ran


def both(build, values):
    """The outputs of ``build(mode) -> (inputs, outputs)`` on the CPU engine (kernels built
    before the call) and on the reference engine (its loops' steps too)."""
    with compile_mode("sync"):
        got = theano_dag.function(*build(CPU), mode=CPU)(*values)
    want = theano_dag.function(*build(REF), mode=REF)(*values)
    return got, want


def close(dtype):
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 0}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elementwise_rnn_runs_in_c(dtype, c_steps):
    def build(mode):
        xs, w, h0 = tt.matrix("xs", dtype), tt.vector("w", dtype), tt.vector("h0", dtype)
        hs, _ = scan(lambda x, h, w: tt.tanh(h * w + x), sequences=xs, outputs_info=h0,
                     non_sequences=w, mode=mode)  # fmt: skip
        return [xs, w, h0], hs

    xv = (RNG.normal(size=(40, 5)) * 0.5).astype(dtype)
    wv, h0v = RNG.normal(size=5).astype(dtype), RNG.normal(size=5).astype(dtype)
    got, want = both(build, [xv, wv, h0v])
    h, loop = h0v, []
    for x in xv:
        h = np.tanh(h * wv + x)
        loop.append(h)
    np.testing.assert_allclose(got, np.array(loop), **close(dtype))
    np.testing.assert_allclose(got, want, **close(dtype))
    assert got.dtype == dtype
    assert c_steps == [39]  # the first step was recorded in Python


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_taps_per_step_outputs_and_go_backwards_in_c(dtype, c_steps):
    def step(x_prev, x_next, a3, a1):
        new = a1 * 0.5 + a3 * 0.25 + x_prev * x_next
        return new, tt.exp(-abs(new))

    def build(mode):
        xs = tt.vector("xs", dtype)
        init = tt.vector("init", dtype)
        (acc, side), _ = scan(
            step,
            sequences=dict(input=xs, taps=[-1, 1]),
            outputs_info=[dict(initial=init, taps=[-3, -1]), None],
            go_backwards=True,
            mode=mode,
        )
        return [xs, init], [acc, side]

    xv = RNG.normal(size=30).astype(dtype)
    iv = RNG.normal(size=3).astype(dtype)
    got, want = both(build, [xv, iv])
    # numpy: go_backwards walks xs reversed; taps -1 and 1 read around each row.
    r = xv[::-1]
    hist, sides = list(iv), []
    for t in range(1, len(r) - 1):
        new = hist[-1] * 0.5 + hist[-3] * 0.25 + r[t - 1] * r[t + 1]
        hist.append(new)
        sides.append(np.exp(-abs(new)))
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, **close(dtype))
    np.testing.assert_allclose(got[0], np.array(hist[3:], dtype=dtype), **close(dtype))
    np.testing.assert_allclose(got[1], np.array(sides, dtype=dtype), **close(dtype))
    assert c_steps == [len(r) - 3]


def test_last_steps_in_a_circular_buffer_in_c(c_steps):
    # Only the last state is read: the memory rewrite keeps a few rows, the C loop walks
    # them modulo their count.
    def build(mode):
        x0, x1 = tt.dscalar("x0"), tt.dscalar("x1")
        init = tt.stack([x0, x1])
        fib, _ = scan(lambda a2, a1: a1 + a2, outputs_info=dict(initial=init, taps=[-2, -1]),
                      n_steps=60, mode=mode)  # fmt: skip
        return [x0, x1], fib[-1]

    got, want = both(build, [0.0, 1.0])
    a, b = 0.0, 1.0
    for _ in range(60):
        a, b = b, a + b
    assert float(got) == b == float(want)
    with compile_mode("sync"):
        f = theano_dag.function(*build(CPU), mode=CPU)
    (node,) = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Scan)]
    assert node.op.store != (0,)
    assert c_steps == [59]


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_until_stops_the_c_loop(dtype, c_steps):
    def step(x, acc, limit):
        new = acc + x
        return new, until(new > limit)

    def build(mode):
        v = tt.vector("v", dtype)
        limit = tt.scalar("limit", dtype)
        sums, _ = scan(step, sequences=v, outputs_info=tt.zeros((), dtype=dtype),
                       non_sequences=limit, mode=mode)  # fmt: skip
        return [v, limit], sums

    vv = np.arange(1, 101).astype(dtype)
    got, want = both(build, [vv, np.asarray(50, dtype=dtype)])
    cum = np.cumsum(vv)
    stop = int(np.argmax(cum > 50)) + 1
    np.testing.assert_array_equal(got, cum[:stop])
    np.testing.assert_array_equal(got, want)
    assert c_steps == [stop - 1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradient_loops_run_in_c(dtype, c_steps):
    def build(mode):
        xs, w, h0 = tt.matrix("xs", dtype), tt.vector("w", dtype), tt.vector("h0", dtype)
        hs, _ = scan(lambda x, h, w: tt.tanh(h * w + x), sequences=xs, outputs_info=h0,
                     non_sequences=w, mode=mode)  # fmt: skip
        cost = hs[-1].sum()
        return [xs, w, h0], [cost, theano_dag.grad(cost, w)]

    xv = (RNG.normal(size=(25, 4)) * 0.3).astype(dtype)
    wv, h0v = RNG.normal(size=4).astype(dtype), np.zeros(4, dtype=dtype)
    got, want = both(build, [xv, wv, h0v])
    # numpy: backpropagation through time.
    hs_np = [h0v]
    for x in xv:
        hs_np.append(np.tanh(hs_np[-1] * wv + x))
    g_h, g_w = np.ones_like(h0v), np.zeros_like(wv)
    for t in range(len(xv), 0, -1):
        g_pre = g_h * (1 - hs_np[t] ** 2)
        g_w += g_pre * hs_np[t - 1]
        g_h = g_pre * wv
    np.testing.assert_allclose(got[1], g_w, **close(dtype))
    np.testing.assert_allclose(got[0], hs_np[-1].sum(), **close(dtype))
    np.testing.assert_allclose(got[1], want[1], **close(dtype))
    assert c_steps == [24, 24]  # the forward loop and the gradient's


def test_step_with_a_matrix_product_stays_in_python(c_steps):
    def build(mode):
        xs, w, h0 = tt.dmatrix("xs"), tt.dmatrix("w"), tt.dvector("h0")
        hs, _ = scan(lambda x, h, w: tt.tanh(tt.dot(h, w) + x), sequences=xs,
                     outputs_info=h0, non_sequences=w, mode=mode)  # fmt: skip
        return [xs, w, h0], hs

    xv, wv, h0v = RNG.normal(size=(20, 3)), RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=3)
    got, want = both(build, [xv, wv, h0v])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert c_steps == []


def test_short_loops_and_no_compiler_stay_in_python(c_steps):
    def build(mode):
        v = tt.dvector("v")
        sums, _ = scan(lambda x, acc: acc + x, sequences=v,
                       outputs_info=tt.zeros((), "float64"), mode=mode)  # fmt: skip
        return [v], sums

    short = RNG.normal(size=5)
    got, _ = both(build, [short])
    np.testing.assert_allclose(got, np.cumsum(short))
    assert c_steps == []
    with config.change_flags(cxx=""):
        f = theano_dag.function(*build(CPU), mode=CPU)
        long = RNG.normal(size=50)
        np.testing.assert_allclose(f(long), np.cumsum(long))
    assert c_steps == []


def test_step_kernels_rewrite_makes_every_elementwise_node_a_composite():
    # In the step's graph (the mode includes the tag): mul, add -> Elemwise{Composite}.
    xs, w = tt.dmatrix("xs"), tt.dvector("w")
    h0 = tt.dvector("h0")

    def step(x, h, w):
        a = h * w  # used twice: fusion leaves it a node of its own
        return a + x, a * 2

    (hs, ys), _ = scan(step, sequences=xs, outputs_info=[h0, None], non_sequences=w)
    with compile_mode("sync"):
        f = theano_dag.function([xs, w, h0], [hs, ys], mode=CPU)
        xv, wv, h0v = RNG.normal(size=(12, 2)), RNG.normal(size=2), RNG.normal(size=2)
        got = f(xv, wv, h0v)
    (node,) = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Scan)]
    inner = node.op._function().fgraph
    ops = [n.op for n in io_toposort(inner.inputs, inner.outputs)]
    assert ops and all(isinstance(op, Elemwise) for op in ops)
    assert all(isinstance(op.scalar_op, Composite) for op in ops)
    want = theano_dag.function([xs, w, h0], [hs, ys], mode=REF)(xv, wv, h0v)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-12)
    # Outside a loop's step the rewrite is not in the default query.
    x = tt.dvector("x")
    g = theano_dag.function([x], [x * 2, (x * 2) + 1], mode=CPU)
    assert any(
        isinstance(n.op, Elemwise) and not isinstance(n.op.scalar_op, Composite)
        for n in g.maker.fgraph.apply_nodes
    )
    assert local_elemwise_as_kernel.transform(None, (x * 2).owner) is not None
