"""A function's C libraries loading at any moment of its calls (``testing.late_loads``):
the values of every call, at every point the kernel library or the step library can
finish loading, against the reference engine. Graphs with what those moments touch:
broadcast operands (the strided loop is the step library's), kernels in segments that
update an operand in place, step kernels (sums, small products, softmax, subtensor
writes), a shared variable's update, a scan's C loop."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.compile.sharedvalue import shared
from theano_dag.engines.cpu import CPULinker
from theano_dag.engines.cpu.native import ckernel, segment
from theano_dag.scan import scan
from theano_dag.tensor.nnet import softmax
from theano_dag.testing.late_loads import late_loads

pytestmark = pytest.mark.skipif(
    ckernel.kernel_library() is None, reason="no C compiler (nothing loads late)"
)

MODES = {
    # Every value planned: the kernels in a row run as one segment.
    "segments": Mode(linker=CPULinker(min_plan_bytes=0, poison=False), optimizer="fast_run"),
    # And poisoned before its step writes it (a step that reads what a late load left
    # unwritten reads NaN); each kernel then runs alone.
    "poisoned": Mode(linker=CPULinker(min_plan_bytes=0, poison=True), optimizer="fast_run"),
}
REF = Mode(linker="py", optimizer=None)
RNG = np.random.default_rng(11)


def normal_logp(mode):
    # PyMC3's Normal: its scale and mean are scalars broadcast against the data
    # (DimShuffle{x}), so the fused kernel takes the step library's strided loop.
    x, mu, tau = tt.dvector("x"), tt.dscalar("mu"), tt.dscalar("tau")
    logp = tt.switch(tau > 0, (-tau * (x - mu) ** 2 + tt.log(tau / (2 * np.pi))) * 0.5, -np.inf)
    return [x, mu, tau], [logp, theano_dag.grad(logp.sum(), mu)]


def normal_values(k):
    return [RNG.normal(size=50), np.float64(0.3 * k), np.float64(1.0 + k)]


def inplace_chain(mode):
    # A chain of kernels, in place where the plan allows, over rows broadcast against a
    # matrix, and a column's sum: a segment holds several of them.
    x, r = tt.dmatrix("x"), tt.drow("r")
    a = tt.exp(x) * 2
    b = tt.tanh(a) - r
    c = b * b + a
    d = tt.sqrt(abs(c)) * r + x
    return [x, r], [d, c.sum(axis=0), d[:, :2].sum()]


def inplace_values(k):
    return [RNG.normal(size=(6, 4)), RNG.normal(size=(1, 4)) + k]


def inplace_then_broadcast(mode):
    # A segment whose first kernel updates a product's buffer in place (tanh(d) + 1 over
    # d) and whose second broadcasts a row: the second takes the strided loop, which a
    # call made while the step library was loading refused; its fail must not run the
    # first kernel again (tanh(tanh(d) + 1) + 1).
    x, r = tt.dmatrix("x"), tt.drow("r")
    e = tt.tanh(tt.dot(tt.exp(x), tt.ones((4, 4)))) + 1
    return [x, r], [e, e * r + x]


def step_kernels(mode):
    a, v = tt.dmatrix("a"), tt.dvector("v")
    p = tt.dot(a, v) * 2 + 1
    s = softmax(a * v)
    w = tt.inc_subtensor(a[1:3], 0.5 * v)
    return [a, v], [p, s, w, (a * v).sum(), tt.max(a, axis=-1)]


def step_values(k):
    return [RNG.normal(size=(5, 3)), RNG.normal(size=3) * (k + 1)]


def state_update(mode):
    # An update of shared state: a call that ran a kernel twice would move it twice.
    x = tt.dvector("x")
    s = shared(np.zeros(4), name="s")
    new = s * 0.5 + tt.exp(x)
    return [x], [new.sum(), new * x], [(s, new)]


def state_values(k):
    return [RNG.normal(size=4)]


def rnn(mode):
    xs, w, h0 = tt.dmatrix("xs"), tt.dvector("w"), tt.dvector("h0")
    hs, _ = scan(
        lambda x, h, w: tt.tanh(h * w + x), sequences=xs, outputs_info=h0, non_sequences=w,
        mode=mode,
    )  # fmt: skip
    return [xs, w, h0], [hs, hs[-1].sum()]


def rnn_values(k):
    return [RNG.normal(size=(4, 5)) * 0.5, RNG.normal(size=5), RNG.normal(size=5) + k]


CASES = {
    "normal_logp": (normal_logp, normal_values),
    "inplace_chain": (inplace_chain, inplace_values),
    "inplace_then_broadcast": (inplace_then_broadcast, inplace_values),
    "step_kernels": (step_kernels, step_values),
    "state_update": (state_update, state_values),
    "rnn": (rnn, rnn_values),
}
CALLS = 3


def run(build, values, mode, at=None):
    """The outputs of ``CALLS`` calls (as returned: a later call must not overwrite an
    earlier one's), each call's values ``values[k]``; with ``at``, the libraries load
    late at those points. Returns ``(outputs, points)``."""
    made = build(mode)
    inputs, outputs = made[:2]
    updates = made[2] if len(made) > 2 else []
    context = late_loads(at) if at is not None else ckernel.compile_mode("sync")
    with context as points:
        f = theano_dag.function(inputs, outputs, updates=updates, mode=mode)
        got = [f(*[np.copy(v) for v in vs]) for vs in values]
        state = [u[0].get_value() for u in updates]
    return (got, state), points


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_wherever_the_libraries_finish_loading(case, mode):
    build, make_values = CASES[case]
    mode = MODES[mode]
    values = [make_values(k) for k in range(CALLS)]
    want, _ = run(build, values, REF)
    # The points the calls meet while nothing loads, then every pair of points for the
    # first load and the second (or the second never during the calls).
    (_, _), points = run(build, values, mode, at=())
    n = points.count
    assert n >= CALLS  # the calls met libraries not loaded
    schedules = [(i, j) for i in range(1, n + 1) for j in range(i, n + 2)]
    for at in schedules:
        (got, state), seen = run(build, values, mode, at=at)
        assert seen.fired, (at, seen)  # a load was made during the calls
        for k, (g_call, w_call) in enumerate(zip(got, want[0])):
            for g, w in zip(g_call, w_call):
                np.testing.assert_allclose(
                    g, w, rtol=1e-12, atol=1e-12, err_msg=f"loads at {at}, call {k}"
                )
        for g, w in zip(state, want[1]):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=f"loads at {at}")


def test_loads_made_at_the_first_point_leave_the_function_in_c():
    # Both loads at the first point (the first kernel's call): from there on the kernels
    # run their C entries, the segments are bound, and nothing waits.
    build, make_values = CASES["inplace_chain"]
    mode = MODES["segments"]
    made = build(mode)
    with late_loads(at=(1, 1)) as points:
        f = theano_dag.function(*made[:2], mode=mode)
        for k in range(CALLS):
            f(*make_values(k))
        assert not points.waiting and points.fired == [1, 1]
    plan = f.fn.current
    code = plan.fast if plan.fast is not None else plan.core
    segs = [v for k, v in code.__globals__.items() if k.startswith("_SEG")]
    assert segs and all(k.ready for s in segs for k in s.kernels)
    assert all(s.native for s in segs) or not segment.available()
