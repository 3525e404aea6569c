"""``scan_checkpoints``: values against ``scan`` and a numpy loop (a state and a per-step
output, padding or not), its gradient by finite differences, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.gradient import verify_grad
from theano_dag.scan import scan, scan_checkpoints
from theano_dag.scan_module import scan_checkpoints as from_scan_module

MODES = [
    pytest.param(Mode(linker="py", optimizer=None), id="py"),
    pytest.param(Mode(linker="cpu"), id="cpu"),
]
RNG = np.random.default_rng(5)


def rnn(x, h, w):
    return tt.tanh(h * w + x)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("steps, every, padding", [(10, 3, True), (12, 4, False), (5, 8, True)])
def test_checkpoints_are_every_nth_state(mode, dtype, steps, every, padding):
    xs, w, h0 = tt.matrix("xs", dtype), tt.vector("w", dtype), tt.vector("h0", dtype)
    hs, _ = scan_checkpoints(rnn, sequences=xs, outputs_info=h0, non_sequences=w,
                             save_every_N=every, padding=padding)  # fmt: skip
    full, _ = scan(rnn, sequences=xs, outputs_info=h0, non_sequences=w)
    f = theano_dag.function([xs, w, h0], [hs, full], mode=mode)
    xv = RNG.normal(size=(steps, 3)).astype(dtype)
    wv, h0v = RNG.normal(size=3).astype(dtype), RNG.normal(size=3).astype(dtype)
    got, everything = f(xv, wv, h0v)
    h, loop = h0v, []
    for x in xv:
        h = np.tanh(h * wv + x)
        loop.append(h)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(everything, np.array(loop), rtol=tol, atol=tol)
    # Each chunk's last step: rows every-1, 2*every-1, ..., and the last row.
    want = [loop[min(k + every, steps) - 1] for k in range(0, steps, every)]
    np.testing.assert_allclose(got, np.array(want), rtol=tol, atol=tol)
    assert got.dtype == dtype


def test_per_step_outputs_keep_their_place():
    # outputs_info [None, h0]: the step's first output is not fed back.
    v, h0 = tt.dvector("v"), tt.dscalar("h0")
    (sq, acc), _ = scan_checkpoints(lambda x, a: (x * x, a + x), sequences=v,
                                    outputs_info=[None, h0], save_every_N=2)  # fmt: skip
    vv = np.arange(1.0, 6.0)
    got_sq, got_acc = theano_dag.function([v, h0], [sq, acc])(vv, 0.5)
    np.testing.assert_allclose(got_sq, [4.0, 16.0, 25.0])
    np.testing.assert_allclose(got_acc, 0.5 + np.cumsum(vv)[[1, 3, 4]])
    assert from_scan_module is scan_checkpoints


def test_gradient_by_finite_differences():
    def f(xs, w, h0):
        hs, _ = scan_checkpoints(rnn, sequences=xs, outputs_info=h0, non_sequences=w,
                                 save_every_N=3)  # fmt: skip
        return (hs[-1] ** 2).sum() + hs.sum()

    verify_grad(f, [RNG.normal(size=(7, 2)), RNG.normal(size=2), RNG.normal(size=2)], rng=RNG)


def test_taps_and_bad_chunk_sizes_are_refused():
    h0 = tt.dvector("h0")
    with pytest.raises(ValueError, match="last step only"):
        scan_checkpoints(lambda a, b: a + b, outputs_info=dict(initial=h0, taps=[-2, -1]),
                         n_steps=4)  # fmt: skip
    with pytest.raises(RuntimeError, match="last step only"):  # Theano's error type
        scan_checkpoints(lambda a: a, outputs_info=dict(initial=h0, taps=[-2]), n_steps=4)
    with pytest.raises(ValueError, match="save_every_N must be positive"):
        scan_checkpoints(lambda a: a, outputs_info=h0, n_steps=4, save_every_N=0)
    with pytest.raises(ValueError, match="sequences or n_steps"):
        scan_checkpoints(lambda a: a, outputs_info=h0)
