"""Loops with matrix products: the gradient reads the forward step's products stored
(``local_scan_subsume`` keeps one forward loop), the input projection is one product
before the loop, the weights' gradient sums one product after it. Structure of each
rewrite, and values against numpy and the reference engine, gradients by finite
differences."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.gradient import verify_grad
from theano_dag.graph.basic import io_toposort
from theano_dag.scan import Scan, scan, until
from theano_dag.tensor.math import Dot

REF = Mode(linker="py", optimizer=None)
CPU = Mode(linker="cpu")
RNG = np.random.default_rng(7)
HIDDEN = 3


def _scans(f):
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Scan)]


def _products(op):
    """The matrix products in a Scan op's step (as the rewrites left it)."""
    nodes = io_toposort(list(op.inner_inputs), list(op.inner_outputs))
    return [n for n in nodes if isinstance(n.op, Dot)]


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _lstm(dtype):
    """An LSTM's cost and its weights' gradients: ``(inputs, [cost, dW, dU, db])``."""
    xs = tt.TensorType(dtype, shape=(None, None, None))("xs")
    y = tt.TensorType(dtype, shape=(None, None))("y")
    W = tt.TensorType(dtype, shape=(None, None))("W")
    U = tt.TensorType(dtype, shape=(None, None))("U")
    b = tt.TensorType(dtype, shape=(None,))("b")
    H = HIDDEN

    def step(x_t, h, c, W, U, b):
        z = tt.dot(x_t, W) + tt.dot(h, U) + b
        i, f = tt.sigmoid(z[:, :H]), tt.sigmoid(z[:, H : 2 * H])
        o, g = tt.sigmoid(z[:, 2 * H : 3 * H]), tt.tanh(z[:, 3 * H :])
        c_new = f * c + i * g
        return o * tt.tanh(c_new), c_new

    zeros = tt.zeros((xs.shape[1], H), dtype=dtype)
    (hs, _), _ = scan(step, sequences=xs, outputs_info=[zeros, zeros], non_sequences=[W, U, b])
    cost = (hs[-1] * y).sum()
    return [xs, y, W, U, b], [cost, *theano_dag.grad(cost, [W, U, b])]


def _numpy_lstm(xs, y, W, U, b):
    """The cost and the weights' gradients, written by hand."""
    H = U.shape[0]
    h, c = np.zeros((xs.shape[1], H), xs.dtype), np.zeros((xs.shape[1], H), xs.dtype)
    hs, cs, gates = [h], [c], []
    for x_t in xs:
        z = x_t @ W + h @ U + b
        i, f, o, g = (_sigmoid(z[:, k * H : (k + 1) * H]) for k in range(3)), None, None, None
        i, f, o = list(i)
        g = np.tanh(z[:, 3 * H :])
        c = f * c + i * g
        h = o * np.tanh(c)
        hs.append(h)
        cs.append(c)
        gates.append((i, f, o, g))
    dW, dU, db = np.zeros_like(W), np.zeros_like(U), np.zeros_like(b)
    dh, dc = y, np.zeros_like(c)
    for t in range(len(xs) - 1, -1, -1):
        i, f, o, g = gates[t]
        tc = np.tanh(cs[t + 1])
        dc = dc + dh * o * (1 - tc * tc)
        dz = np.concatenate(
            [dc * g * i * (1 - i), dc * cs[t] * f * (1 - f), dh * tc * o * (1 - o),
             dc * i * (1 - g * g)], axis=1)  # fmt: skip
        dW += xs[t].T @ dz
        dU += hs[t].T @ dz
        db += dz.sum(0)
        dh = dz @ U.T
        dc = dc * f
    return (h * y).sum(), dW, dU, db


def _lstm_values(dtype, steps=5, batch=2, n_in=4):
    H = HIDDEN
    return [
        RNG.normal(size=(steps, batch, n_in)).astype(dtype),
        RNG.normal(size=(batch, H)).astype(dtype),
        (RNG.normal(size=(n_in, 4 * H)) * 0.5).astype(dtype),
        (RNG.normal(size=(H, 4 * H)) * 0.5).astype(dtype),
        (RNG.normal(size=4 * H) * 0.1).astype(dtype),
    ]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lstm_gradient_runs_one_forward_loop_and_no_product_twice(dtype):
    ins, outs = _lstm(dtype)
    f = theano_dag.function(ins, outs, mode=CPU)
    forward, backward = _scans(f)
    # The forward step keeps h @ U (x_t @ W is one product before the loop); the backward
    # step computes dz @ U.T alone (no product of the forward step again, the weights'
    # gradients are products after the loop).
    assert forward.op.n_states == 2 and backward.op.name == "grad_of_scan"
    # The backward loop carries h's and c's cotangents only: the weights' and the bias's
    # gradients are sums after it.
    assert backward.op.n_states == 2
    assert len(_products(forward.op)) == 1
    assert len(_products(backward.op)) == 1
    values = _lstm_values(dtype)
    got = f(*values)
    want_ref = theano_dag.function(ins, outs, mode=REF)(*values)
    want_np = _numpy_lstm(*values)
    tol = 1e-4 if dtype == "float32" else 1e-10
    for g, r, n in zip(got, want_ref, want_np):
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)
        np.testing.assert_allclose(g, n, rtol=tol, atol=tol)


def test_lstm_gradient_by_finite_differences():
    x0, y0, *_ = _lstm_values("float64", steps=4)
    w0 = _lstm_values("float64")[2:]

    def cost(W, U, b):
        xs, y = tt.constant(x0), tt.constant(y0)
        H = HIDDEN

        def step(x_t, h, c, W, U, b):
            z = tt.dot(x_t, W) + tt.dot(h, U) + b
            i, f = tt.sigmoid(z[:, :H]), tt.sigmoid(z[:, H : 2 * H])
            o, g = tt.sigmoid(z[:, 2 * H : 3 * H]), tt.tanh(z[:, 3 * H :])
            c_new = f * c + i * g
            return o * tt.tanh(c_new), c_new

        zeros = tt.zeros((x0.shape[1], H), dtype="float64")
        (hs, _), _ = scan(step, sequences=xs, outputs_info=[zeros, zeros], non_sequences=[W, U, b])
        return (hs[-1] * y).sum()

    verify_grad(cost, w0, rng=RNG)


def _residual_loop():
    x, w, h0 = tt.dmatrix("x"), tt.dmatrix("w"), tt.dvector("h0")
    hs, _ = scan(
        # sin's derivative reads the product: the backward step reads it stored.
        lambda x_t, h, w: tt.tanh(tt.sin(tt.dot(h, w)) + x_t),
        sequences=x,
        outputs_info=h0,
        non_sequences=w,
    )
    cost = (hs**2).sum()
    return [x, w, h0], [cost, theano_dag.grad(cost, w)]


def test_the_gradient_builds_the_forward_loop_with_its_products():
    ins, (cost, g_w) = _residual_loop()
    forwards = {
        n for n in theano_dag.graph.basic.io_toposort(ins, [cost, g_w]) if isinstance(n.op, Scan)
    }
    # As built: the cost's loop, the same loop with h @ w stored, and the backward loop.
    assert sorted(n.op.n_nitsot for n in forwards if n.op.name is None) == [0, 1]
    f = theano_dag.function(ins, [cost, g_w], mode=CPU)
    assert len(_scans(f)) == 2  # local_scan_subsume: one forward loop
    # Without it (nor the merge of loops over the same steps) the forward loop runs twice.
    apart = CPU.excluding("local_scan_subsume", "local_scan_merge")
    g = theano_dag.function(ins, [cost, g_w], mode=apart)
    assert len(_scans(g)) == 3
    values = [RNG.normal(size=(6, 3)), RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=3)]
    want = theano_dag.function(ins, [cost, g_w], mode=REF)(*values)
    for fn in (f, g):
        for got, w_ in zip(fn(*values), want):
            np.testing.assert_allclose(got, w_, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows", [1, 2])
def test_input_projection_is_one_product_before_the_loop(dtype, rows):
    # x_t @ w with x_t a vector (rows=1) or a matrix (rows=2) of a sequence.
    x = tt.TensorType(dtype, shape=(None,) * (rows + 1))("x")
    w = tt.TensorType(dtype, shape=(None, None))("w")
    h0 = tt.TensorType(dtype, shape=(None,) * rows)("h0")
    hs, _ = scan(
        lambda x_t, h, w: tt.tanh(tt.dot(x_t, w) + h), sequences=x, outputs_info=h0, non_sequences=w
    )
    f = theano_dag.function([x, w, h0], hs, mode=CPU)
    (node,) = _scans(f)
    assert not _products(node.op)  # the step reads x_t @ w as a sequence's row
    outer_dots = [n for n in f.maker.fgraph.toposort() if "Dot" in type(n.op).__name__]
    assert len(outer_dots) == 1
    shape = (6, 2, 3)[: rows + 1] if rows == 2 else (6, 3)
    xv = RNG.normal(size=shape).astype(dtype)
    wv = (RNG.normal(size=(3, 3)) * 0.5).astype(dtype)
    h0v = RNG.normal(size=shape[1:]).astype(dtype)
    got = f(xv, wv, h0v)
    h, want = h0v, []
    for x_t in xv:
        h = np.tanh(x_t @ wv + h)
        want.append(h)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    want_ref = theano_dag.function([x, w, h0], hs, mode=REF)(xv, wv, h0v)
    np.testing.assert_allclose(got, want_ref, rtol=tol, atol=tol)
    # n_steps shorter than the sequence: only its first rows are projected.
    k = tt.lscalar("k")
    short, _ = scan(
        lambda x_t, h, w: tt.tanh(tt.dot(x_t, w) + h),
        sequences=x,
        outputs_info=h0,
        non_sequences=w,
        n_steps=k,
    )
    g = theano_dag.function([x, w, h0, k], short, mode=CPU)
    np.testing.assert_allclose(g(xv, wv, h0v, 2), got[:2], rtol=tol, atol=tol)


def _accumulating_loop():
    a, b = tt.dtensor3("a"), tt.dtensor3("b")
    acc0 = tt.dmatrix("acc0")
    accs, _ = scan(
        lambda a_t, b_t, acc: acc + tt.dot(tt.tanh(a_t).T, b_t * 2),
        sequences=[a, b],
        outputs_info=acc0,
    )
    return [a, b, acc0], accs


def test_accumulated_products_become_one_product_after_the_loop():
    ins, accs = _accumulating_loop()
    f = theano_dag.function(ins, accs[-1], mode=CPU)
    # The state is gone, and with it the loop: tanh(a) and b * 2 are computed on all the
    # steps' rows at once (local_scan_push_out_seq), then one product.
    assert not _scans(f)
    av, bv = RNG.normal(size=(5, 4, 3)), RNG.normal(size=(5, 4, 2))
    acc0 = RNG.normal(size=(1, 3, 2))[0]
    want = acc0 + sum(np.tanh(av[t]).T @ (bv[t] * 2) for t in range(5))
    np.testing.assert_allclose(f(av, bv, acc0), want, rtol=1e-12)
    np.testing.assert_allclose(f(av[:0], bv[:0], acc0), acc0)  # no step: the initial value
    # Read whole, the accumulator stays a state.
    g = theano_dag.function(ins, accs, mode=CPU)
    (node,) = _scans(g)
    assert node.op.n_states == 1
    np.testing.assert_allclose(g(av, bv, acc0)[-1], want, rtol=1e-12)


def test_a_sum_of_products_of_sequence_rows_reads_the_sequences():
    a, b = tt.dtensor3("a"), tt.dtensor3("b")
    accs, _ = scan(
        lambda a_t, b_t, acc: acc + tt.dot(a_t.T, b_t),
        sequences=[a, b],
        outputs_info=tt.zeros((3, 2), dtype="float64"),
    )
    f = theano_dag.function([a, b], accs[-1], mode=CPU)
    assert not _scans(f)  # nothing left for a loop to do
    av, bv = RNG.normal(size=(5, 4, 3)), RNG.normal(size=(5, 4, 2))
    np.testing.assert_allclose(f(av, bv), np.einsum("tki,tkj->ij", av, bv), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_accumulated_row_sums_become_one_sum_after_the_loop(dtype):
    g = tt.TensorType(dtype, shape=(None, None, None))("g")
    acc0 = tt.TensorType(dtype, shape=(None,))("acc0")
    # A bias's gradient: acc + the sum over the batch of each step's rows (the LSTM's
    # gradient has the sum under DimShuffles, test_lstm_gradient_runs_one_forward_loop...).
    accs, _ = scan(
        lambda g_t, acc: acc + tt.exp(g_t).sum(axis=0),
        sequences=g,
        outputs_info=acc0,
    )
    f = theano_dag.function([g, acc0], accs[-1], mode=CPU)
    assert not _scans(f)  # exp(g) on all the rows at once, then one sum
    gv, a0 = RNG.normal(size=(4, 3, 2)).astype(dtype), RNG.normal(size=2).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(f(gv, a0), a0 + np.exp(gv).sum(axis=(0, 1)), rtol=tol)
    want = theano_dag.function([g, acc0], accs[-1], mode=REF)(gv, a0)
    np.testing.assert_allclose(f(gv, a0), want, rtol=tol)


def test_row_sums_of_a_state_of_known_length_become_one_sum_of_that_length():
    # A step's term has a known length (2, from the ones), and with it the state; the
    # sum of all the steps' rows is known only to be a vector, and the rewrite's
    # replacement was refused (a TypeError, rolled back with a warning; Theano's
    # TestGaussNewton::test_batch).
    g = tt.dtensor3("g")
    acc0 = tt.TensorType("float64", shape=(2,))("acc0")
    accs, _ = scan(
        lambda g_t, acc: acc + (tt.exp(g_t) * tt.ones((2,))).sum(axis=0),
        sequences=g,
        outputs_info=acc0,
    )
    with config.change_flags(on_opt_error="raise"):
        f = theano_dag.function([g, acc0], accs[-1], mode=CPU)
    assert not _scans(f)
    gv, a0 = RNG.normal(size=(4, 3, 2)), RNG.normal(size=2)
    np.testing.assert_allclose(f(gv, a0), a0 + np.exp(gv).sum(axis=(0, 1)), rtol=1e-12)


def test_unused_per_step_outputs_are_not_computed():
    x = tt.dmatrix("x")
    (total, prod), _ = scan(lambda v: (v.sum(), v.prod()), sequences=x)
    f = theano_dag.function([x], total, mode=CPU)
    (node,) = _scans(f)
    assert node.op.n_nitsot == 1
    xv = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(f(xv), xv.sum(axis=1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradient_of_slices_tiling_an_axis_is_a_join(dtype):
    z = tt.TensorType(dtype, shape=(None, None))("z")
    # The gates of an LSTM: four slices of z along axis 1, each through its own function.
    cost = tt.sigmoid(z[:, :2]).sum() + (tt.tanh(z[:, 2:5]) ** 2).sum() + (z[:, 5:] * 3).sum()
    g = theano_dag.grad(cost, z)
    f = theano_dag.function([z], g, mode=CPU)
    ops = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert "Join" in ops and "IncSubtensor" not in ops, ops
    zv = RNG.normal(size=(3, 7)).astype(dtype)
    s = _sigmoid(zv[:, :2])
    want = np.concatenate(
        [s * (1 - s), 2 * np.tanh(zv[:, 2:5]) * (1 - np.tanh(zv[:, 2:5]) ** 2),
         np.full((3, 2), 3.0)], axis=1)  # fmt: skip
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(f(zv), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(f(zv), theano_dag.function([z], g, mode=REF)(zv), rtol=tol)


def test_slices_that_do_not_tile_the_axis_stay_increments():
    z = tt.dmatrix("z")
    # Columns 2:3 are read by no slice: the gradient there is zero, no join of the others.
    g = theano_dag.grad(tt.sin(z[:, :2]).sum() + tt.cos(z[:, 3:]).sum(), z)
    f = theano_dag.function([z], g, mode=CPU)
    assert "Join" not in [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    zv = RNG.normal(size=(2, 5))
    want = np.concatenate([np.cos(zv[:, :2]), np.zeros((2, 1)), -np.sin(zv[:, 3:])], axis=1)
    np.testing.assert_allclose(f(zv), want, rtol=1e-12)
    verify_grad(lambda z: tt.sin(z[:, :2]).sum() + tt.cos(z[:, 2:]).sum(), [zv], rng=RNG)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [False, True], ids=["vector", "batch"])
def test_output_projection_is_one_product_after_the_loop(dtype, batch):
    # Theano's PushOutScanOutput: y_t = h_t @ V, h_t the state, is rows(H) @ V after the
    # loop; y_t = g_t @ V of a value the loop does not return makes g a per-step output.
    t3 = tt.TensorType(dtype, shape=(None,) * (3 if batch else 2))
    x, h0 = t3("x"), tt.TensorType(dtype, shape=(None,) * (2 if batch else 1))("h0")
    w, v = (
        tt.TensorType(dtype, shape=(None, None))("W"),
        tt.TensorType(dtype, shape=(None, None))("V"),
    )

    def step(x_t, h, w, v):
        h_new = tt.tanh(x_t + tt.dot(h, w))
        return h_new, tt.dot(h_new, v), tt.dot(h_new * h, v)

    (hs, ys, zs), _ = scan(step, sequences=x, outputs_info=[h0, None, None], non_sequences=[w, v])
    f = theano_dag.function([x, h0, w, v], [hs, ys, zs], mode=CPU)
    (node,) = _scans(f)
    inner = io_toposort(list(node.op.inner_inputs), list(node.op.inner_outputs))
    # h @ W stays (it is the recurrence); the two products by V are after the loop, and
    # the loop gives h_new * h per step for the second.
    assert sum(isinstance(n.op, Dot) for n in inner) == 1 and node.op.n_nitsot == 1
    shape = (6, 2, 3) if batch else (6, 3)
    xv = RNG.normal(size=shape).astype(dtype)
    h0v = RNG.normal(size=shape[1:]).astype(dtype)
    wv, vv = RNG.normal(size=(3, 3)).astype(dtype), RNG.normal(size=(3, 4)).astype(dtype)
    h, want = h0v, ([], [], [])
    for x_t in xv:
        h_new = np.tanh(x_t + h @ wv)
        for acc, val in zip(want, (h_new, h_new @ vv, (h_new * h) @ vv)):
            acc.append(val)
        h = h_new
    tol = 1e-5 if dtype == "float32" else 1e-12
    got = f(xv, h0v, wv, vv)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=tol, atol=tol)
    ref = theano_dag.function([x, h0, w, v], [hs, ys, zs], mode=REF)(xv, h0v, wv, vv)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)
    # No step: empty stacks of the right shapes.
    empty = f(xv[:0], h0v, wv, vv)
    assert [e.shape for e in empty] == [(0, *shape[1:]), (0, *shape[1:-1], 4), (0, *shape[1:-1], 4)]
    # Excluded by Theano's name, the products stay in the step.
    g = theano_dag.function(
        [x, h0, w, v], [hs, ys, zs], mode=CPU.excluding("scanOp_pushout_output")
    )
    (node,) = _scans(g)
    inner = io_toposort(list(node.op.inner_inputs), list(node.op.inner_outputs))
    assert sum(isinstance(n.op, Dot) for n in inner) == 3


def test_output_projection_of_a_loop_with_until_reads_the_steps_run():
    x, h0, v = tt.dmatrix("x"), tt.dvector("h0"), tt.dmatrix("V")

    def step(x_t, h, v):
        h_new = h + x_t
        return (h_new, tt.dot(h_new, v)), until(h_new.sum() > 4)

    (hs, ys), _ = scan(step, sequences=x, outputs_info=[h0, None], non_sequences=v)
    f = theano_dag.function([x, h0, v], [hs, ys], mode=CPU)
    (node,) = _scans(f)
    assert node.op.has_until and node.op.n_nitsot == 0
    xv, vv = np.ones((10, 2)), RNG.normal(size=(2, 3))
    got = f(xv, np.zeros(2), vv)
    hs_want = np.cumsum(xv, axis=0)[:3]  # the sums 2, 4, 6: stops after the third step
    np.testing.assert_allclose(got[0], hs_want)
    np.testing.assert_allclose(got[1], hs_want @ vv, rtol=1e-12)
