"""The fuzzer's fixed-seed sample (issue 18): random graphs on every engine against
numpy, a share of them with NaN, infinities and extreme values; ``make fuzz N=...`` runs
more. A failure prints its shrunk reproducer; a difference that only a documented
non-finite rewrite makes is classified with its tag."""

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


def _x_minus_x(seed):
    return fuzz.Recipe(
        nodes=[("input", ("a",), "float64"), ("sub", (0, 0), None)],
        outputs=[1],
        seed=seed,
        dims=[("a",), ("a",)],
        dtypes=["float64", "float64"],
        nonfinite=True,
    )


def _with_nan_or_inf(seed):
    vals = fuzz._values(_x_minus_x(seed), fuzz.SIZES[0], np.random.default_rng(seed))
    return not np.isfinite(vals[0]).all()


def test_a_share_of_graphs_gets_non_finite_inputs():
    rng = np.random.default_rng(5)
    recs = [fuzz.generate(rng) for _ in range(200)]
    share = sum(r.nonfinite for r in recs) / len(recs)
    assert 0.15 < share < 0.35
    seen = set()
    for rec in recs:
        if rec.nonfinite:
            for v in fuzz._values(rec, fuzz.SIZES[0], np.random.default_rng(rec.seed)).values():
                seen.update({"nan"} if np.isnan(v).any() else set())
                seen.update({"inf"} if np.isposinf(v).any() else set())
                seen.update({"-inf"} if np.isneginf(v).any() else set())
                seen.update({"huge"} if (np.abs(v[np.isfinite(v)]) > 1e30).any() else set())
    assert seen == {"nan", "inf", "-inf", "huge"}
    assert not any(fuzz.differentiable(r) for r in recs if r.nonfinite)


def test_a_difference_from_a_tagged_rewrite_is_classified_with_its_tag():
    # x - x -> 0 (nonfinite_unsafe) where x holds NaN or inf: numpy gives NaN.
    seed = next(s for s in range(100) if _with_nan_or_inf(s))
    rec = _x_minus_x(seed)
    assert fuzz.check(rec, ["py", "cpu_safe"]) == []
    assert fuzz.check(rec, ["cpu"])
    assert fuzz.classify(rec, "cpu") == "nonfinite_unsafe"


def test_a_difference_no_tag_explains_is_a_failure(monkeypatch):
    # numpy's x - x made x - x + 1: no excluded rewrite makes the engine agree.
    monkeypatch.setitem(fuzz.OPS, "sub", (2, "{0} - {1}", "{0} - {1} + 1"))
    rec = _x_minus_x(next(s for s in range(100) if _with_nan_or_inf(s)))
    assert fuzz.check(rec, ["cpu"]) and fuzz.classify(rec, "cpu") is None


def _recipe(nodes, dims):
    return lambda seed: fuzz.Recipe(
        nodes=nodes,
        outputs=[len(nodes) - 1],
        seed=seed,
        dims=dims,
        dtypes=["float64"] * len(nodes),
        nonfinite=True,
    )


def test_a_stabilized_overflow_is_classified_stabilize():
    # Found on the H200 (seed 411, graph 980): log(sigmoid(x)) at x = -huge is -inf in
    # numpy, and -softplus(-x) = x once stabilized (the true value).
    make = _recipe(
        [("input", ("a",), "float64"), ("sigmoid", (0,), None), ("log", (1,), None)],
        [("a",)] * 3,
    )
    rec = next(
        r
        for r in map(make, range(200))
        if (fuzz._values(r, fuzz.SIZES[0], np.random.default_rng(r.seed))[0] < -1e300).any()
    )
    assert fuzz.check(rec, ["cpu"])
    assert fuzz.classify(rec, "cpu") == "stabilize"


def test_a_product_that_differs_only_in_non_finite_values_is_classified(monkeypatch):
    # Found on the H200 (seed 421, graph 905): OpenBLAS's fused multiply-adds give
    # -inf where the OpenCL kernel's plain sum of products gives NaN. Here numpy's
    # product is made NaN wherever it is not finite, so the CPU engine's infinities
    # differ from it there and only there.
    monkeypatch.setitem(
        fuzz.OPS,
        "dot",
        (
            2,
            "tt.dot({0}, {1})",
            "np.asarray(np.dot({0}, {1})) * np.where(np.isfinite(np.dot({0}, {1})), 1, np.nan)",
        ),
    )
    make = _recipe(
        [("input", ("a",), "float64"), ("input", ("a",), "float64"), ("dot", (0, 1), None)],
        [("a",), ("a",), ()],
    )

    def infinite_product(r):
        v = fuzz._values(r, fuzz.SIZES[0], np.random.default_rng(r.seed))
        with np.errstate(all="ignore"):
            return np.isinf(np.dot(v[0], v[1]))

    rec = next(r for r in map(make, range(500)) if infinite_product(r))
    assert fuzz.check(rec, ["cpu"])
    assert fuzz.classify(rec, "cpu") == fuzz.DOT_NONFINITE
