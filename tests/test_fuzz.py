"""The fuzzer's fixed-seed sample (issue 18): random graphs on every engine against
numpy; ``make fuzz N=...`` runs more. A failure prints its shrunk reproducer."""

from __future__ import annotations

import io

import numpy as np

from theano_dag.testing import fuzz


def test_fixed_seed_sample_agrees_with_numpy():
    out = io.StringIO()
    failures = fuzz.run(60, seed=2026, c_every=30, opencl_every=20, out=out)
    assert failures == [], out.getvalue()


def test_a_wrong_engine_is_caught_shrunk_and_reproduced(monkeypatch):
    # numpy's tanh swapped for sin: every graph with a tanh fails, and shrinks.
    monkeypatch.setitem(fuzz.OPS, "tanh", (1, "tt.tanh({0})", "np.sin({0})"))
    rng = np.random.default_rng(3)
    rec = next(r for r in (fuzz.generate(rng) for _ in range(100)) if fuzz.check(r, ["py"]))
    small = fuzz.shrink(rec, lambda r: bool(fuzz.check(r, ["py"])))
    ops = [n[0] for n in small.nodes if n[0] not in ("input", "shared")]
    assert "tanh" in ops and len(small.outputs) == 1
    script = fuzz.reproducer(small, "py")
    assert "tt.tanh(" in script and "function([" in script
    exec(compile(script, "<reproducer>", "exec"), {"print": lambda *a: None})


def test_fixed_seed_gradient_sample_agrees_with_finite_differences():
    out = io.StringIO()
    assert fuzz.run_grads(20, seed=2026, out=out) == [], out.getvalue()


def test_a_wrong_gradient_is_caught(monkeypatch):
    # The reference's sqr made a cube: its finite differences disagree with grad(sqr).
    monkeypatch.setitem(fuzz.OPS, "sqr", (1, "tt.sqr({0})", "{0} ** 3"))
    rng = np.random.default_rng(4)
    recs = (fuzz.generate(rng) for _ in range(300))
    rec = next(
        r for r in recs if fuzz.differentiable(r) and any(r.nodes[k][0] == "sqr" for k in r.outputs)
    )
    assert fuzz.check_grad(rec)
