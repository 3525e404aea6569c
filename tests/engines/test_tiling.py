"""Row tiling in the CPU engine (theano_dag.engines.cpu.tiling): which nodes join the
tiled region, the graph it makes, and values against the reference engine."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.compile.sharedvalue import shared
from theano_dag.engines.cpu import CPULinker, tiling
from theano_dag.engines.cpu.plan.shapes import ShapeError
from theano_dag.engines.cpu.tiling import RowTiled, find_region, row_local
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor import nnet

REF = Mode(linker="py", optimizer=None)
rng = np.random.default_rng(11)


def tiled_nodes(f):
    return [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, RowTiled)]


def mlp(dtype, sizes=(20, 64, 64, 5)):
    x = tt.matrix("x", dtype=dtype)
    params = []
    h = x
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = shared((rng.standard_normal((a, b)) / np.sqrt(a)).astype(dtype), name=f"w{k}")
        bias = shared(rng.standard_normal(b).astype(dtype), name=f"b{k}")
        params += [w, bias]
        h = tt.dot(h, w) + bias
        if k < len(sizes) - 2:
            h = tt.maximum(h, 0)
    return x, h, params


@pytest.fixture
def small_tiles(monkeypatch):
    # Tiny thresholds, so that small test arrays are split into several tiles.
    monkeypatch.setattr(tiling, "TILE_BYTES", 4096)
    monkeypatch.setattr(tiling, "MIN_TILED_BYTES", 1024)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows", [0, 1, 15, 16, 100, 257])
def test_mlp_inference_is_tiled_and_matches_the_reference(small_tiles, dtype, rows):
    x, out, _ = mlp(dtype)
    f = function([x], out)
    (node,) = tiled_nodes(f)
    assert sum(node.op.tiled) == 1 and node.inputs[0] is f.maker.fgraph.inputs[0]
    ref = function([x], out, mode=REF)
    xv = rng.standard_normal((rows, 20)).astype(dtype)
    got = f(xv)
    want = ref(xv)
    assert got.shape == (rows, 5) and got.dtype == dtype
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_a_big_batch_runs_in_several_tiles(small_tiles, monkeypatch):
    monkeypatch.setattr(tiling, "TILE_BYTES", 65536)  # about 30 rows of this MLP
    x, out, _ = mlp("float64")
    f = function([x], out)
    (node,) = tiled_nodes(f)
    xv = rng.standard_normal((300, 20))
    calls = []
    inner = node.op._function()
    orig = inner.__call__

    class Spy:
        def __call__(self, *args):
            calls.append(args[0].shape[0])
            return orig(*args)

    node.op._fn = Spy()
    # (rtol: the C product and numpy's BLAS sum in different orders)
    np.testing.assert_allclose(f(xv), function([x], out, mode=REF)(xv), rtol=1e-10)
    # 16-row multiples, the last tile takes the rest
    assert len(calls) > 2 and sum(calls) == 300 and len(set(calls[:-1])) == 1
    assert calls[0] % 16 == 0 and calls[0] * 4 <= 300


def test_results_are_not_overwritten_by_the_next_call(small_tiles):
    x, out, _ = mlp("float64")
    f = function([x], out)
    a, b = rng.standard_normal((100, 20)), rng.standard_normal((100, 20))
    ra = f(a)
    keep = ra.copy()
    f(b)
    np.testing.assert_array_equal(ra, keep)


def test_no_tiling_when_the_region_keeps_nothing_to_itself():
    # A training step: the forward activations are read by the backward pass, so a
    # tiled forward pass would save no memory.
    x, out, params = mlp("float64")
    y = tt.dmatrix("y")
    cost = nnet.categorical_crossentropy(nnet.softmax(out), y).mean()
    grads = theano_dag.grad(cost, params)
    f = function([x, y], cost, updates=[(p, p - 0.1 * g) for p, g in zip(params, grads)])
    assert not tiled_nodes(f)


def test_no_tiling_without_a_product():
    x = tt.dmatrix("x")
    f = function([x], tt.tanh(tt.exp(x) * 2).sum(axis=1))
    assert not tiled_nodes(f)


def test_tiling_can_be_switched_off(small_tiles):
    x, out, _ = mlp("float64")
    f = function([x], out, mode=Mode(linker=CPULinker(tile=False), optimizer="fast_run"))
    assert not tiled_nodes(f)


def test_softmax_and_row_reductions_join_a_batch_mean_does_not(small_tiles):
    x = tt.dmatrix("x")
    w = shared(rng.standard_normal((6, 40)), name="w")
    w2 = shared(rng.standard_normal((6, 2)), name="w2")
    h = tt.tanh(tt.dot(x, w2))
    centred = h - h.mean(axis=0)  # needs every row: cannot run per tile
    out = [(nnet.softmax(tt.dot(x, w) * 2) * 3).sum(axis=1), centred]
    f = function([x], out)
    (node,) = tiled_nodes(f)
    inner_ops = {type(n.op).__name__ for n in node.op.inner.apply_nodes}
    assert {"Dot22", "Softmax"} <= inner_ops
    # the batch mean and what needs it run outside, on the tiled tanh's full result
    outer_ops = {type(n.op).__name__ for n in f.maker.fgraph.apply_nodes}
    assert "Softmax" not in outer_ops and node.outputs[1] in {
        v for n in f.maker.fgraph.apply_nodes if n is not node for v in n.inputs
    }
    xv = rng.standard_normal((200, 6))
    want = function([x], out, mode=REF)(xv)
    for g, r in zip(f(xv), want):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12)


def test_row_local_rules():
    x, w = tt.dmatrix("x"), tt.dmatrix("w")
    v = tt.dvector("v")
    assert row_local(tt.dot(x, w).owner, [True, False])
    assert not row_local(tt.dot(x, w).owner, [True, True])
    assert not row_local(tt.dot(w, x).owner, [False, True])
    add_row = (x + v).owner  # v is broadcast along rows: DimShuffle{x,0}(v)
    assert row_local(add_row, [True, False])
    assert not row_local((x + w).owner, [True, False])  # w has as many rows as x
    assert row_local(x.T.owner, [True]) is False
    assert row_local(x.sum(axis=1).owner, [True])
    assert not row_local(x.sum(axis=0).owner, [True])
    assert not row_local(x.sum().owner, [True])
    assert row_local(nnet.softmax(x).owner, [True])


def test_the_region_stays_convex():
    # x -> a = exp(x) (row-local) -> s = sum(a, axis=0) (not) -> b = a * s (row-local,
    # but it needs s, which needs the whole of a): b must stay out of the region.
    x = tt.dmatrix("x")
    w = tt.dmatrix("w")
    a = tt.dot(x, w)
    s = a.sum(axis=0)
    b = a * s
    fg = FunctionGraph([x, w], [b], clone=False)
    region = find_region(fg, fg.toposort(), [x])
    assert [n.op for n in region] == [a.owner.op]


def test_a_wrong_input_shape_is_reported_before_any_op_runs(small_tiles):
    x, out, _ = mlp("float64")
    f = function([x], out)
    assert tiled_nodes(f)
    with pytest.raises(ShapeError, match=r"Dot22: shapes \(100, 7\) and \(20, 64\) are not"):
        f(np.ones((100, 7)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_convnet_forward_is_tiled_image_by_image(small_tiles, dtype):
    # conv -> scale/shift -> relu -> spatial mean -> dense. The mean divides by H*W,
    # which comes from Shape_i of an activation: the same for every tile, so it is
    # computed inside the region instead of keeping the mean and the dense layer out.
    x = tt.tensor4("x", dtype=dtype)
    w = shared((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(dtype), name="w")
    s = shared(rng.standard_normal(4).astype(dtype), name="s")
    dense = shared(rng.standard_normal((4, 3)).astype(dtype), name="dense")
    h = nnet.conv2d(x, w, border_mode="half", filter_flip=False)
    h = tt.maximum(h * s.dimshuffle("x", 0, "x", "x"), 0)
    out = tt.dot(h.mean(axis=(2, 3)), dense)
    f = function([x], out)
    (node,) = tiled_nodes(f)
    inner_ops = {type(n.op).__name__ for n in node.op.inner.apply_nodes}
    assert {"AbstractConv2d", "Shape_i", "Dot22"} <= inner_ops
    assert [type(n.op).__name__ for n in f.maker.fgraph.toposort()][-1] == "RowTiled"
    xv = rng.standard_normal((37, 3, 6, 6)).astype(dtype)
    assert 0 < node.op.rows_per_tile([xv] + _whole_args(f, node)) < 37
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(f(xv), function([x], out, mode=REF)(xv), rtol=tol, atol=tol)


def _whole_args(f, node):
    """The values of ``node``'s untiled inputs (shared values and their DimShuffles)."""
    ref = function([], node.inputs[1:], mode=REF, on_unused_input="ignore")
    return list(ref())


def test_two_batches_of_different_lengths_run_whole(small_tiles):
    xa, xb = tt.dmatrix("xa"), tt.dmatrix("xb")
    w = shared(rng.standard_normal((20, 64)), name="w")
    v = shared(rng.standard_normal((64, 2)), name="v")
    outs = [tt.dot(tt.tanh(tt.dot(xa, w)), v), tt.dot(tt.tanh(tt.dot(xb, w)), v)]
    f = function([xa, xb], outs)
    (node,) = tiled_nodes(f)
    assert sum(node.op.tiled) == 2
    a, b = rng.standard_normal((100, 20)), rng.standard_normal((30, 20))
    want = function([xa, xb], outs, mode=REF)(a, b)
    for got, ref in zip(f(a, b), want):
        np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_borrowed_outputs_and_updates_around_a_tiled_region(small_tiles):
    x = tt.dmatrix("x")
    w = shared(rng.standard_normal((20, 64)), name="w")
    v = shared(rng.standard_normal((64, 2)), name="v")
    total = shared(np.zeros(2), name="total")
    logits = tt.dot(tt.tanh(tt.dot(x, w)), v)
    f = function(
        [x],
        theano_dag.Out(logits, borrow=True),
        updates=[(total, total + logits.sum(axis=0))],
    )
    assert tiled_nodes(f)
    a = rng.standard_normal((100, 20))
    want = np.tanh(a @ w.get_value()) @ v.get_value()
    np.testing.assert_allclose(f(a), want, rtol=1e-12)
    f(a)
    np.testing.assert_allclose(total.get_value(), 2 * want.sum(axis=0), rtol=1e-12)
