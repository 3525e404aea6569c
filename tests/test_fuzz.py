"""The fuzzer's fixed-seed samples (issues 18 and 28): random graphs on every engine
against numpy, a share of them with NaN, infinities and extreme values, integers and
bools, large lengths; ``make fuzz N=...`` runs more. A failure prints its shrunk
reproducer; a difference that only a documented non-finite rewrite makes is classified
with its tag. The graphs the fuzzer found wrong are in test_fuzz_findings.py."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import hashlib
import io

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile import function_cache
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.cpu.plan.program import DEFAULT_MIN_PLAN_BYTES
from theano_dag.scalar import cast_array
from theano_dag.testing import fuzz

# The CPU engine's planning every value, and poisoning its blocks.
PLANNED = ["cpu_plan0", "cpu_poison"]


def _run_script(script):
    """Run a reproducer in a namespace of its own: its exit status and what it printed.
    What it sets for itself (config.cxx, numpy's error handling) is set back after."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), config.change_flags(cxx=config.cxx), np.errstate():
        try:
            exec(compile(script, "<reproducer>", "exec"), {"__name__": "__main__"})
        except SystemExit as e:
            return e.code, out.getvalue()
    return None, out.getvalue()


def test_fixed_seed_sample_agrees_with_numpy():
    out = io.StringIO()
    failures = fuzz.run(60, seed=2026, c_every=30, opencl_every=20, out=out)
    assert failures == [], out.getvalue()


def test_fixed_seed_sample_agrees_with_numpy_with_every_value_planned_and_poisoned():
    out = io.StringIO()
    failures = fuzz.run(30, seed=2028, engines=["cpu"] + PLANNED, out=out)
    assert failures == [], out.getvalue()


def test_fixed_seed_sample_agrees_with_numpy_on_fast_compile_dask_and_debugmode():
    # The engines a user picks by mode: FAST_COMPILE's few rewrites, the Dask engine
    # (2-element chunks, so every graph spans several), and DebugMode, which checks
    # every rewrite's values on the graph before and after it.
    out = io.StringIO()
    engines = ["py", "fast_compile", "dask", "debugmode"]
    failures = fuzz.run(24, seed=2030, engines=engines, out=out)
    assert failures == [], out.getvalue()


@functools.cache
def _recipes(n=400, seed=28):
    rng = np.random.default_rng(seed)
    return [fuzz.generate(rng) for _ in range(n)]


def _ops(rec, op):
    return [(k, n) for k, n in enumerate(rec.nodes) if n[0] == op]


def test_the_generator_makes_integer_and_bool_graphs_with_casts_in_every_direction():
    recs = _recipes()
    inputs = {n[2] for r in recs for n in r.nodes if n[0] == "input"}
    assert set(fuzz.INTS) | {"bool"} <= inputs
    casts = set()
    for r in recs:
        for k, (_, (a,), _) in _ops(r, "cast") + _ops(r, "cast_in_range") + _ops(r, "cast_grow"):
            src, dst = np.dtype(r.dtypes[a]), np.dtype(r.dtypes[k])
            casts.add((src.kind, dst.kind, "narrow" if dst.itemsize < src.itemsize else "wide"))
    for kinds in ["fi", "fu", "if", "uf", "ii", "ui", "iu", "bf", "fb", "ib", "bi"]:
        assert {c[:2] for c in casts} >= {tuple(kinds)}, kinds
    assert ("i", "i", "narrow") in casts and ("u", "i", "narrow") in casts
    # Floats cast to integers whatever their value (the engines' one rule), NaN, the
    # infinities and values out of range among them.
    out_of_range = set()
    for r in recs:
        for k, (_, (a,), p) in _ops(r, "cast") + _ops(r, "cast_grow"):
            if r.dtypes[a] in fuzz.FLOATS and r.dtypes[k] in fuzz.INTS:
                x = fuzz.reference(r, fuzz._values(r, 0))[a].astype("float64")
                with np.errstate(over="ignore"):  # 2**70 times a float64 near its maximum
                    x = x * p[0] if isinstance(p, tuple) else x
                lo, hi = np.iinfo(r.dtypes[k]).min, np.iinfo(r.dtypes[k]).max
                out_of_range.update({"nan"} if np.isnan(x).any() else set())
                out_of_range.update({"inf"} if np.isinf(x).any() else set())
                out_of_range.update({"out"} if ((x < lo - 1) | (x > hi + 1)).any() else set())
    assert out_of_range == {"nan", "inf", "out"}
    # Integer arithmetic, floor division and modulo, comparisons.
    int_ops = {
        n[0] for r in recs for k, n in enumerate(r.nodes) if r.dtypes[k] in fuzz.INTS and n[1]
    }
    assert {"add", "sub", "mul", "floordiv", "mod", "switch"} <= int_ops
    compared = {
        r.dtypes[n[1][0]] for r in recs for op in ("lt", "eq", "ge") for _, n in _ops(r, op)
    }
    assert compared & set(fuzz.INTS) and "bool" in compared


def test_the_generator_draws_every_op_of_its_vocabulary():
    # Each op has dims, params and operands of its own to find (a matrix for take1, a
    # value that fits the rows for adv_inc): one the generator never manages is not
    # fuzzed at all.
    drawn = {n[0] for r in _recipes() for n in r.nodes}
    default = set(fuzz.OPS) - fuzz.LAZY_OPS - fuzz.EXTRA_OPS
    assert default <= drawn, sorted(default - drawn)
    # Drawn with lazy=True or extra=True only: seeds keep their graphs.
    assert not drawn & (fuzz.LAZY_OPS | fuzz.EXTRA_OPS)
    rng = np.random.default_rng(28)
    extra = {n[0] for _ in range(600) for n in fuzz.generate(rng, extra=True).nodes}
    assert fuzz.EXTRA_OPS <= extra, sorted(fuzz.EXTRA_OPS - extra)


def test_the_generator_fills_and_allocs_operands_that_broadcast_against_each_other():
    seen = set()
    for r in _recipes():
        for op in ("fill", "second", "alloc"):
            for _, n in _ops(r, op):
                d0, d1 = (r.dims[a] for a in n[1])
                if d0 != d1 and 1 in d0 + d1:
                    seen.add(op)
                if fuzz._broadcast(d0, d1) not in (d0, d1) and {d0, d1} == {(1, "b"), ("a", 1)}:
                    seen.add(op + ": (1, n) with (m, 1)")
    assert {"fill", "second", "alloc", "fill: (1, n) with (m, 1)"} <= seen


def test_the_generator_switches_between_branches_of_different_dtypes():
    mixed = [
        (r.dtypes[n[1][1]], r.dtypes[n[1][2]])
        for r in _recipes()
        for _, n in _ops(r, "switch")
        if r.dtypes[n[1][1]] != r.dtypes[n[1][2]]
    ]
    assert any(a in fuzz.INTS and b in fuzz.FLOATS for a, b in mixed + [m[::-1] for m in mixed])


def test_the_generator_puts_nan_and_infinite_constants_in_graphs():
    values = {
        repr(n[2][0])
        for r in _recipes()
        for k, n in _ops(r, "const")
        if k in fuzz._refs(r) and r.dtypes[k] in fuzz.FLOATS
    }
    assert {"nan", "inf", "-inf"} <= values


def test_the_generator_makes_graphs_on_both_sides_of_the_planning_threshold():
    big = set()
    for r in _recipes():
        if r.sizes:
            for k, d in enumerate(r.dims):
                nbytes = fuzz._elements(d, r.sizes) * np.dtype(r.dtypes[k]).itemsize
                big.add(nbytes >= DEFAULT_MIN_PLAN_BYTES)
    assert big == {True, False}


def test_a_wrong_engine_is_caught_shrunk_and_reproduced(monkeypatch):
    # numpy's tanh swapped for sin: every graph with a tanh fails, and shrinks.
    monkeypatch.setitem(fuzz.OPS, "tanh", (1, "tt.tanh({0})", "ew(np.sin, '{d}', {0})"))
    rng = np.random.default_rng(3)
    rec = next(r for r in (fuzz.generate(rng) for _ in range(100)) if fuzz.check(r, ["py"]))
    small = fuzz.shrink(rec, lambda r: bool(fuzz.check(r, ["py"])))
    ops = [n[0] for n in small.nodes if n[0] not in ("input", "shared")]
    assert "tanh" in ops and len(small.outputs) == 1
    script = fuzz.reproducer(small, "py")
    assert "tt.tanh(" in script and "function([" in script and "testing" not in script
    code, printed = _run_script(script)
    assert code == 1 and "values differ" in printed


def test_a_reproducer_of_a_large_integer_graph_runs_alone_and_passes():
    rec = next(r for r in _recipes() if r.sizes and set(r.dtypes) & set(fuzz.INTS))
    for engine in ["cpu_c", "cpu_late_c"] + PLANNED:
        code, printed = _run_script(fuzz.reproducer(rec, engine))
        assert code == 0, printed


def test_a_reproducer_defines_the_helpers_its_numpy_values_pass_by_name():
    # numpy's sigmoid is an argument of ew(...), not called by name: the script must still
    # define it (it raised NameError).
    x = ("input", ("a",), "float64")
    rec = _recipe([x, ("sigmoid", (0,), None)], [("a",)] * 2)(5)
    script = fuzz.reproducer(rec, "py")
    assert "ew(sigmoid, " in script and "def sigmoid(" in script
    code, printed = _run_script(script)
    assert code == 0, printed


def test_fixed_seed_gradient_sample_agrees_with_finite_differences():
    out = io.StringIO()
    assert fuzz.run_grads(20, seed=2026, out=out) == [], out.getvalue()


def test_a_wrong_gradient_is_caught_and_reproduced(monkeypatch):
    # The reference's sqr made a cube: its finite differences disagree with grad(sqr).
    monkeypatch.setitem(fuzz.OPS, "sqr", (1, "tt.sqr({0})", "{0} ** 3"))
    rng = np.random.default_rng(4)
    recs = (fuzz.generate(rng, grad=True) for _ in range(300))
    rec = next(
        r
        for r in recs
        if fuzz.differentiable(r)
        and any(r.nodes[k][0] == "sqr" for k in r.outputs)
        and fuzz.check_grad(r)  # not left out for a kink
    )
    code, printed = _run_script(fuzz.grad_reproducer(rec))
    assert code == 1 and "values differ" in printed


def _recipe(nodes, dims, dtypes=None, nonfinite=True):
    return lambda seed: fuzz.Recipe(
        nodes=nodes,
        outputs=[len(nodes) - 1],
        seed=seed,
        dims=dims,
        dtypes=dtypes or ["float64"] * len(nodes),
        nonfinite=nonfinite,
    )


_x_minus_x = _recipe([("input", ("a",), "float64"), ("sub", (0, 0), None)], [("a",)] * 2)


def _with_nan_or_inf(seed):
    vals = fuzz._values(_x_minus_x(seed), 0)
    return not np.isfinite(vals[0]).all()


def test_a_share_of_graphs_gets_non_finite_inputs():
    rng = np.random.default_rng(5)
    recs = [fuzz.generate(rng) for _ in range(200)]
    share = sum(r.nonfinite for r in recs) / len(recs)
    assert 0.15 < share < 0.35
    seen = set()
    for rec in recs:
        if rec.nonfinite:
            for v in fuzz._values(rec, 0).values():
                if v.dtype.kind == "f":
                    seen.update({"nan"} if np.isnan(v).any() else set())
                    seen.update({"inf"} if np.isposinf(v).any() else set())
                    seen.update({"-inf"} if np.isneginf(v).any() else set())
                    seen.update({"huge"} if (np.abs(v[np.isfinite(v)]) > 1e30).any() else set())
                    seen.update({"-0"} if (np.signbit(v) & (v == 0)).any() else set())
                elif v.dtype.kind in "iu":
                    seen.update({"int extremes"} if (v == np.iinfo(v.dtype).max).any() else set())
    assert seen == {"nan", "inf", "-inf", "huge", "-0", "int extremes"}
    assert not any(fuzz.differentiable(r) for r in recs if r.nonfinite)


def test_integer_division_by_zero_and_overflow_follow_numpy_on_every_cpu_engine():
    # x // 0 and x % 0 are 0 for integers (numpy's, and the engines' promise); int8
    # arithmetic wraps.
    for op in ("floordiv", "mod", "mul", "add"):
        make = _recipe(
            [("input", ("a",), "int8"), ("input", ("a",), "int8"), (op, (0, 1), None)],
            [("a",)] * 3,
            ["int8"] * 3,
        )
        rec = next(
            r
            for r in map(make, range(300))
            if (fuzz._values(r, 0)[1] == 0).any() and (np.abs(fuzz._values(r, 0)[0]) > 100).any()
        )
        assert fuzz.check(rec, ["py", "cpu", "cpu_c"] + PLANNED) == [], op


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


def test_a_stabilized_overflow_is_classified_stabilize():
    # Found on the H200 (seed 411, graph 980): log(sigmoid(x)) at x = -huge is -inf in
    # numpy, and -softplus(-x) = x once stabilized (the true value).
    make = _recipe(
        [("input", ("a",), "float64"), ("sigmoid", (0,), None), ("log", (1,), None)],
        [("a",)] * 3,
    )
    rec = next(r for r in map(make, range(200)) if (fuzz._values(r, 0)[0] < -1e300).any())
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
        v = fuzz._values(r, 0)
        with np.errstate(all="ignore"):
            return np.isinf(np.dot(v[0], v[1]))

    rec = next(r for r in map(make, range(500)) if infinite_product(r))
    assert fuzz.check(rec, ["cpu"])
    assert fuzz.classify(rec, "cpu") == fuzz.DOT_NONFINITE


@pytest.mark.parametrize("dtype", fuzz.INTS)
def test_cast_in_range_keeps_floats_within_the_integer(dtype):
    lo, hi = fuzz.cast_bounds(dtype)
    info = np.iinfo(dtype)
    x = np.array([np.nan, np.inf, -np.inf, -0.75, 1e30, -1e30, 3.5], "float32")
    got = fuzz.cast_in_range(x, dtype)
    assert got.dtype == dtype and got[0] == 0 and got[3] == 0 and got[6] == 3
    assert info.min <= np.trunc(np.float64(lo)) and np.trunc(np.float64(hi)) <= info.max


def test_close_counts_non_finite_values_as_asked():
    want = np.array([np.nan, np.inf, 1.0, 2.0])
    assert fuzz.close(np.array([np.nan, np.inf, 1.0, 2.0]), want, 1e-9) is None
    assert fuzz.close(np.array([-np.inf, np.nan, 1.0, 2.0]), want, 1e-9)
    assert fuzz.close(np.array([-np.inf, np.nan, 1.0, 2.0]), want, 1e-9, "both") is None
    # "either": only where both sides are finite (a tagged rewrite's difference is there).
    assert fuzz.close(np.array([0.0, 5.0, 1.0, 2.0]), want, 1e-9, "both")
    assert fuzz.close(np.array([0.0, 5.0, 1.0, 2.0]), want, 1e-9, "either") is None
    assert fuzz.close(np.array([0.0, 5.0, 1.0, 3.0]), want, 1e-9, "either")
    # Integers exactly, with the first difference named.
    why = fuzz.close(np.array([1, 2, 4], "int8"), np.array([1, 2, 3], "int8"), 1e-9)
    assert "at 1 of 3 elements" in why and "flat index 2" in why


def test_integers_cast_from_floats_are_compared_within_the_float_tolerance():
    # Found with seed 28030, graph 1760: float32 tanh differs in its last bit between
    # numpy and C; times -3e9 and cast to uint64, 1057972416 beside numpy's 1057972480.
    got, want = np.array([1057972416, 0], "uint64"), np.array([1057972480, 0], "uint64")
    assert fuzz.close(got, want, 2e-4)
    assert fuzz.close(got, want, 2e-4, None, 2e-4) is None
    # Relative only: 0 and -1 stay apart, as do the cast rule's minimum and a value.
    assert fuzz.close(np.array([-1], "int16"), np.array([0], "int16"), 2e-4, None, 2e-4)
    make = _recipe(
        [
            ("input", ("a",), "float32"),
            ("cast_grow", (0,), (-3e9, "int64")),
            ("add", (1, 1), None),
            ("input", ("a",), "int64"),
            ("mul", (3, 3), None),
        ],
        [("a",)] * 5,
        ["float32", "int64", "int64", "int64", "int64"],
    )
    rec = make(0)
    assert fuzz._after_float_to_int(rec) == {1, 2}


def test_a_periodic_function_of_a_large_cast_integer_may_take_numpys_value_a_few_bits_away():
    # Found with seed 61128, graph 1824: sin(cast(2 * log(x) * -3e9, int32)) in float32.
    # The C kernel's log was one bit from numpy's, the product two float32 steps (32) away,
    # and the sin of the integer anything. The reference moved by whole units in the last
    # place of the cast's input gives that integer; moved by the relative tolerance (2e-4,
    # some 40,000 integers) it does not.
    rec = _recipe(
        [("input", ("a",), "float32"), ("cast_grow", (0,), (-3e9, "int32")), ("sin", (1,), None)],
        [("a",)] * 3,
        ["float32", "int32", "float64"],
        nonfinite=False,
    )(0)
    x = np.array([-0.07087775, -0.070877746], "float32")
    base = fuzz.reference(rec, {0: x})
    for u in (-1, 1, 3):
        moved = x.copy()
        for _ in range(abs(u)):
            moved = np.nextafter(moved, np.float32(np.copysign(np.inf, u)))
        nudged = fuzz.reference(rec, {0: x}, ulps=u)
        assert nudged[0].dtype == np.float32 and np.array_equal(nudged[0], x)  # input kept
        want = cast_array(moved * np.float32(-3e9), "int32")
        np.testing.assert_array_equal(nudged[1], want)
        assert not np.array_equal(nudged[1], base[1])
        np.testing.assert_array_equal(nudged[2], np.sin(want.astype("float64")))
    assert set(fuzz.NUDGE_ULPS) >= {-2, -1, 1, 2}


def test_a_sum_over_several_axes_may_round_as_the_reference_engine_adds():
    # Found with seed 61128, graph 8698: tanh(state + sum(v)) with +-4.5e307 and 0.88 in
    # one column of v. numpy adds the flattened array pairwise (0.61), the reference
    # engine one axis at a time as Theano (the column's 0.88 is lost: 0.0).
    rec = _recipe(
        [("input", ("a", "b"), "float64"), ("sum", (0,), None), ("tanh", (1,), None)],
        [("a", "b"), (), ()],
    )(0)
    big = np.finfo("float64").max / 4
    v = np.array([[big, -0.07, 1e-300, -0.0], [0.88, -0.1, -0.6, 0.9], [-big, 0.15, 0.96, -0.5]])
    flat, by_axes = fuzz.reference(rec, {0: v}), fuzz.reference(rec, {0: v}, sum_by_axes=True)
    assert flat[1] == np.sum(v) and by_axes[1] == np.sum(np.sum(v, axis=1), axis=0)
    assert abs(flat[1] - by_axes[1]) > 0.5
    assert fuzz._after_multi_axis_sum(rec) == {1, 2}
    f = theano_dag_function(rec)
    got = f(v)
    assert fuzz.close(got, flat[2], 1e-9)  # a failure without the alternative
    assert fuzz.close(got, flat[2], 1e-9, None, 0.0, [by_axes[2]]) is None
    # A sum over one axis has one order: no alternative.
    one = _recipe([("input", ("a", "b"), "float64"), ("sum", (0,), 1)], [("a", "b"), ("a",)])(0)
    assert fuzz._after_multi_axis_sum(one) == set()


def theano_dag_function(rec):
    """``rec``'s graph on the reference engine (its first output)."""
    inputs, _, syms = fuzz._build(rec)
    return function([syms[k] for k in inputs], syms[rec.outputs[0]], mode=Mode(linker="py"))


# -- the "wide" value distribution (--values wide) ---------------------------------------


def _digest(recipes):
    """A digest of ``recipes`` (all but their value distribution) and both calls' inputs."""
    h = hashlib.sha256()
    for r in recipes:
        fields = (r.nodes, r.outputs, r.update, r.seed, r.dims, r.dtypes, r.nonfinite, r.sizes)
        h.update(repr(fields).encode())
        for call in (0, 1):
            for k, v in sorted(fuzz._values(r, call).items()):
                h.update(f"{k}{v.dtype}{v.shape}".encode())
                h.update(v.tobytes())
    return h.hexdigest()


@pytest.mark.parametrize(
    "seed, n, digest",
    [
        (53, 40, "bfc0a74173384b48ef74fdeb624b3d2fc6b104fac57ba794feab323f92332fa8"),
        (2026, 60, "d4247e46022b5381c49cb38f120e08257f041e067858e4d986cb319a07f2c961"),
    ],
)
def test_the_default_draw_is_the_one_seeds_in_notes_mean(seed, n, digest):
    # The graphs and both calls' inputs of a seed, as the fuzzer drew them before the
    # wide distribution was added (the digests were taken then): a seed cited in notes
    # still names the same graphs.
    rng = np.random.default_rng(seed)
    recs = [fuzz.generate(rng) for _ in range(n)]
    assert {r.values for r in recs} == {"default"}
    assert _digest(recs) == digest


@functools.cache
def _wide_recipes(n=300, seed=53):
    rng = np.random.default_rng(seed)
    return [fuzz.generate(rng, values="wide") for _ in range(n)]


def test_wide_values_reach_where_each_integer_dtype_wraps():
    recs = _wide_recipes()
    assert {r.values for r in recs} == {"wide"}
    drawn = {}
    for r in recs:
        for v in fuzz._values(r, 0).values():
            drawn.setdefault(v.dtype.name, []).append(v.reshape(-1))
    drawn = {d: np.concatenate(vs) for d, vs in drawn.items()}
    assert set(fuzz.INTS) | {"bool"} <= set(drawn)
    for d in fuzz.INTS:
        v, info = drawn[d].astype(object), np.iinfo(d)
        # The extremes, values whose products wrap (int8 100 * 2, 12 * 12), small ones,
        # and values across the range (beyond the wrap table).
        assert {int(info.min), int(info.max), 0, 1} <= set(v), d
        assert any(abs(x) * 2 > info.max for x in v) and any(x * x > info.max for x in v)
        assert any(abs(x) < 10 for x in v) and len(set(v)) > 30, d
        if info.min < 0:
            assert any(x * x > info.max and x < 0 for x in v), d
    assert {100, -100, 12, 64} <= set(fuzz.wrap_values("int8"))
    assert {200, 16, 128} <= set(fuzz.wrap_values("uint8"))
    assert 182**2 > 32767 > 181**2 and 182 in fuzz.wrap_values("int16")
    root = fuzz.wrap_values("uint64")[6]
    assert root**2 > 2**64 - 1 >= (root - 1) ** 2
    # Integer constants from the wrap table, integer and bool graphs more often than
    # the default draw's, and integer operands mixed with floats.
    consts = {n[2][0] for r in recs for n in r.nodes if n[0] == "const" and n[2][1] == "int8"}
    assert consts & {100, -100, 64, -64, 12, -12}
    share = np.mean([n[2] not in fuzz.FLOATS for r in recs for n in r.nodes if n[0] == "input"])
    default = np.mean(
        [n[2] not in fuzz.FLOATS for r in _recipes() for n in r.nodes if n[0] == "input"]
    )
    assert share > default + 0.2
    mixed = [
        r
        for r in recs
        for n in r.nodes
        if n[0] in fuzz.BINARY and {r.dtypes[a] in fuzz.FLOATS for a in n[1]} == {True, False}
    ]
    assert mixed


def test_wide_integer_arithmetic_wraps_in_the_values_compared():
    # numpy wraps integers, and the engines must wrap where numpy does: the reference
    # values of a wide graph hold wrapped products (int8 x * x of 100 is 16).
    make = _recipe(
        [("input", ("a",), "int8"), ("mul", (0, 0), None)], [("a",)] * 2, ["int8"] * 2, False
    )
    rec = dataclasses.replace(make(0), values="wide")
    x = fuzz._values(rec, 0)[0]
    want = fuzz.reference(rec, {0: x})[1]
    assert (x.astype(int) ** 2 > 127).any()
    np.testing.assert_array_equal(want, (x.astype(int) ** 2).astype("int8"))
    assert fuzz.check(rec, ["py", "cpu", "cpu_c"] + PLANNED) == []


def test_fixed_seed_wide_sample_agrees_with_numpy():
    out = io.StringIO()
    failures = fuzz.run(40, seed=2053, c_every=10, opencl_every=40, out=out, values="wide")
    assert failures == [], out.getvalue()


def test_a_wide_reproducer_runs_alone_and_draws_the_same_inputs():
    rec = next(r for r in _wide_recipes() if set(r.dtypes) & set(fuzz.INTS) and not r.sizes)
    script = fuzz.reproducer(rec, "cpu_c")
    assert "values='wide'" in script and "def wrap_values(" in script
    code, printed = _run_script(script)
    assert code == 0, printed
    # The default's reproducer names no distribution.
    assert "values='wide'" not in fuzz.reproducer(_recipes()[0], "py")


def test_wide_gradients_take_integer_inputs_and_agree_with_finite_differences():
    out = io.StringIO()
    rng = np.random.default_rng(53)
    recs = [fuzz.generate(rng, grad=True, values="wide") for _ in range(60)]
    with_ints = [
        r
        for r in recs
        if fuzz.differentiable(r) and any(n[0] == "input" and n[2] in fuzz.INTS for n in r.nodes)
    ]
    assert len(with_ints) >= 5
    assert fuzz.run_grads(25, seed=53, out=out, values="wide") == [], out.getvalue()


def _scaled_input():
    # x * 2.5: the loaded graph holds the constant.
    return fuzz.Recipe(
        nodes=[
            ("input", ("a",), "float64"),
            ("const", (), (2.5, "float64")),
            ("mul", (0, 1), None),
        ],
        outputs=[2],
        update=None,
        seed=1,
        dims=[("a",), (), ("a",)],
        dtypes=["float64"] * 3,
    )


def test_the_function_cache_check_compares_loads_with_compiles_without_the_cache(
    monkeypatch, tmp_path
):
    monkeypatch.setattr(function_cache, "cache_dir", lambda: str(tmp_path))
    rec = _scaled_input()
    counts = collections.Counter()
    assert fuzz.check_function_cache(rec, ["cpu", "py"], counts) == []
    # Per engine: stored, then loaded from the entry on disk.
    assert counts == {"compiled": 4, "loaded": 2}
    rebuild = function_cache.Entry._rebuild

    def off(self, data):  # a load that gets a constant wrong
        data = list(data)
        data[4] = [(c[0], c[1], c[2] + 1, *c[3:]) for c in data[4]]
        return rebuild(self, tuple(data))

    monkeypatch.setattr(function_cache.Entry, "_rebuild", off)
    problems = fuzz.check_function_cache(rec, ["cpu"])
    assert ("cpu", "function cache (loaded, loaded=True): call 0: value 0 differs") in problems


def test_the_command_line_counts_what_the_function_cache_check_compiled(capsys, tmp_path):
    with config.change_flags(compiledir=str(tmp_path)):
        code = fuzz.main(
            ["--n", "3", "--seed", "5", "--engines", "py", "--grads", "0", "--function-cache"]
        )
    assert code == 0
    out = capsys.readouterr().out
    # (The suite runs without the cache: each graph stored once, then loaded once.)
    assert "function cache: 6 compiles with it, 3 loaded from its entries; 0 graphs" in out


def test_the_command_line_takes_a_value_distribution(capsys):
    code = fuzz.main(["--n", "3", "--seed", "5", "--engines", "py", "--values", "wide"])
    assert code == 0
    assert "3 wide graphs (seed 5" in capsys.readouterr().out
    with pytest.raises(ValueError, match="values must be one of"):
        fuzz.generate(np.random.default_rng(0), values="huge")


def test_the_command_line_runs_the_dask_engine_on_a_cluster_it_starts(capsys, monkeypatch):
    pytest.importorskip("distributed")
    seen = []
    real = fuzz.cluster_client
    monkeypatch.setattr(fuzz, "cluster_client", lambda: seen.append(real()) or seen[-1])
    code = fuzz.main(["--n", "2", "--seed", "5", "--engines", "py", "--dask-cluster", "1"])
    assert code == 0
    out = capsys.readouterr().out
    assert "2 default graphs (seed 5, 0 to 1), engines ['py', 'dask_cluster']: 0 failing" in out
    # every dask_cluster compile ran on the cluster's client, gone with it
    assert seen and all(c.status == "closed" for c in seen)
    with pytest.raises(RuntimeError, match="engine dask_cluster runs on the current distributed"):
        fuzz.cluster_client()


def test_a_nan_that_a_sort_moves_is_classified_with_the_cancelling_rewrite():
    # Found with seed 8, --values wide, graph 2601: (j / x) * x cancels to j
    # (nonfinite_unsafe), where x = 0 makes NaN; sorted, the NaN goes last and the finite
    # values move, so the finite values differ too: a sort discretizes.
    rec = fuzz.Recipe(
        nodes=[
            ("input", ("a", 1), "int8"),
            ("join", (0, 0), 1),
            ("true_div", (1, 0), None),
            ("mul", (2, 0), None),
            ("sort", (3,), 0),
        ],
        outputs=[4],
        update=None,
        seed=353388310,
        dims=[("a", 1), ("a", "(1+1)"), ("a", "(1+1)"), ("a", "(1+1)"), ("a", "(1+1)")],
        dtypes=["int8", "int8", "float64", "float64", "float64"],
        nonfinite=False,
        sizes=1,
        values="wide",
    )
    assert fuzz.check(rec, ["cpu"]) and fuzz._discretizes(rec)
    assert fuzz.classify(rec, "cpu") == "nonfinite_unsafe"


def test_an_infinity_a_saturating_op_makes_finite_is_classified_with_its_tag():
    # Found with seed 8102 wide, graph 73: (126 / x) / 0 is -inf where x < 0, and the
    # reassociated 126 / (x * 0) (nonfinite_unsafe, reassociate) is +inf; tanh makes both
    # finite, -1 and 1. Only an infinity's sign differs: no bug.
    rec = fuzz.Recipe(
        nodes=[
            ("input", ("a", 1), "int16"),
            ("const", (), (126, "int8")),
            ("const", (), (0, "uint16")),
            ("true_div", (1, 0), None),
            ("div", (3, 2), None),
            ("tanh", (4,), None),
        ],
        outputs=[5],
        update=None,
        seed=1605462217,
        dims=[("a", 1), (), (), ("a", 1), ("a", 1), ("a", 1)],
        dtypes=["int16", "int8", "uint16", "float64", "float64", "float64"],
        nonfinite=False,
        sizes=0,
        values="wide",
    )
    assert fuzz.check(rec, ["cpu"]) and not fuzz._discretizes(rec) and fuzz._saturates(rec)
    assert fuzz.classify(rec, "cpu") == "nonfinite_unsafe"
    finite = dataclasses.replace(
        rec, nodes=rec.nodes[:2] + [("const", (), (3, "uint16"))] + rec.nodes[3:]
    )
    assert not fuzz._saturates(finite)


def test_the_sign_of_a_zero_product_is_classified_as_the_kernels():
    # Found with seed 8, --values wide, graph 897: a uint8 0 (a float cast out of range)
    # times a float32 row, by tensordot(axes=0): numpy's BLAS gives +0.0, the engines'
    # elementwise product -0.0 for a negative factor, and 128 / it an infinity of the
    # other sign. On the reference engine too (its products are kernels as well).
    rec = fuzz.Recipe(
        nodes=[
            ("input", (1, "b"), "float32"),
            ("shared", (), "float64"),
            ("const", (), (128, "uint8")),
            ("cast_grow", (1,), (10000000000.0, "uint8")),
            ("tensordot", (3, 0), 0),
            ("ceil", (2,), None),
            ("div", (5, 4), None),
        ],
        outputs=[6],
        update=None,
        seed=764091545,
        dims=[(1, "b"), (), (), (), (1, "b"), (), (1, "b")],
        dtypes=["float32", "float64", "uint8", "uint8", "float32", "float32", "float32"],
        nonfinite=False,
        sizes=0,
        values="wide",
    )
    assert fuzz.check(rec, ["py"])
    assert fuzz.classify(rec, "py") == fuzz.classify(rec, "cpu") == fuzz.DOT_NONFINITE


def test_a_wide_gradient_reproducer_passes_the_integer_inputs_undifferentiated():
    rng = np.random.default_rng(53)
    recs = (fuzz.generate(rng, grad=True, values="wide") for _ in range(200))
    rec = next(
        r
        for r in recs
        if fuzz.differentiable(r)
        and r.nodes[0][2] in fuzz.INTS
        and any(n[0] == "input" and n[2] == "float64" for n in r.nodes)
    )
    assert fuzz.check_grad(rec) == []
    script = fuzz.grad_reproducer(rec)
    assert "values='wide'" in script
    code, printed = _run_script(script)
    assert code == 0, printed


def test_a_float_modulo_may_take_numpys_value_a_few_bits_away():
    # Found with seed 14, --values wide, graph 1502: a float64 product of int64 / float64
    # ratios (1e30 and beyond), modulo an int64 near 2**60: the reference engine's order
    # of multiplications rounds the product an ulp from numpy's, and the remainder moves
    # by as much as the divisor. Its dividend may move within the tolerance, as a cast's.
    rec = fuzz.Recipe(
        nodes=[
            ("input", (1, "b"), "int64"),
            ("input", ("a", 1), "float64"),
            ("true_div", (0, 1), None),
            ("prod", (2,), (None, True)),
            ("mod", (3, 0), None),
        ],
        outputs=[4],
        seed=1592280404,
        dims=[(1, "b"), ("a", 1), ("a", "b"), (1, 1), (1, "b")],
        dtypes=["int64", "float64", "float64", "float64", "float64"],
        values="wide",
    )
    assert fuzz._after_float_to_int(rec) == {4}
    assert fuzz.check(rec, ["py", "cpu"]) == []


def test_a_comparison_of_a_float_that_ties_may_take_numpys_value_a_bit_away():
    # Found with seed 57, graph 49: neq(sigmoid(sqr(x)), 0.5) in float32. numpy's
    # 1 / (1 + exp(-x)) of 1.2078809e-07 is 0.5, C's 0.50000006 (the true value,
    # 0.50000003020, rounded), so the comparison with 0.5 differed in that element.
    rec = fuzz.Recipe(
        nodes=[
            ("input", ("a",), "float32"),
            ("const", (), (0.5, "float64")),
            ("sigmoid", (0,), None),
            ("neq", (2, 1), None),
        ],
        outputs=[3],
        seed=1,
        dims=[("a",), (), ("a",), ("a",)],
        dtypes=["float32", "float64", "float32", "bool"],
    )
    assert fuzz._after_float_to_int(rec) == {3}
    x = np.array([1.2078809e-07, 0.25, 0.0], "float32")
    want = fuzz.reference(rec, {0: x})[3]
    assert want.tolist() == [False, True, False]
    engine = np.array([True, True, False])  # the correctly rounded sigmoid's
    assert fuzz.close(engine, want, 2e-4)
    alts = [fuzz.reference(rec, {0: x}, ulps=u)[3] for u in fuzz.NUDGE_ULPS]
    assert fuzz.close(engine, want, 2e-4, alternatives=alts) is None
    # where no operand ties, the comparison stays exact
    assert fuzz.close(np.array([True, False, False]), want, 2e-4, alternatives=alts)


def test_edge_lengths_call_the_same_graphs_with_lengths_of_one_and_zero():
    rec = fuzz.generate(np.random.default_rng(0))  # a small recipe
    edge = dataclasses.replace(rec, lengths="edge")
    assert edge.nodes == rec.nodes and rec.sizes == 0
    assert fuzz._call_sizes(edge) == [{"a": 1, "b": 3}, {"a": 0, "b": 1}]
    assert fuzz._call_sizes(rec) == list(fuzz.SIZE_SETS[0])
    # A large recipe keeps its large lengths.
    assert fuzz._call_sizes(dataclasses.replace(rec, sizes=1, lengths="edge")) == list(
        fuzz.SIZE_SETS[1]
    )


def _max_of_a_vector():
    # v0 (a vector of length "a"), v1 = max(v0); and v2 = v0 * 2, the only output.
    nodes = [("input", ("a",), "float64"), ("max", (0,), None), ("scale", (0,), 2.0)]
    dims, dtypes = [("a",), (), ("a",)], ["float64"] * 3
    return fuzz.Recipe(nodes, [1], None, 11, dims, dtypes, lengths="edge")


def test_where_numpy_refuses_an_empty_value_the_engine_must_raise_too(monkeypatch):
    rec = _max_of_a_vector()
    assert fuzz.check(rec, ["py", "cpu"]) == []  # both raise for max of a length-0 vector
    # An engine that returned a value where numpy raises is a failure.
    monkeypatch.setattr(fuzz, "_compile_recipe", lambda r, mode: _returns_zeros(r))
    (problem,) = fuzz.check(rec, ["cpu"])
    assert problem[1].startswith("call 1: numpy raises ValueError: zero-size array")
    assert problem[1].endswith("; the engine returned")


def _returns_zeros(rec):
    # numpy's max where there is one, else 0.0.
    def f(*args):
        return [np.asarray(args[0].max() if args[0].size else 0.0)]

    return f, [0], None


def test_a_node_the_outputs_do_not_need_is_not_computed_by_numpy():
    # max(v0) is refused by numpy at length 0, but only v0 * 2 is an output.
    rec = dataclasses.replace(_max_of_a_vector(), outputs=[2])
    assert fuzz._needed(rec) == {0, 2}
    assert fuzz.check(rec, ["py", "cpu"]) == []


def test_the_command_line_takes_edge_lengths(capsys):
    code = fuzz.main(["--n", "4", "--seed", "3", "--engines", "py,cpu", "--lengths", "edge"])
    assert code == 0
    assert "4 default graphs (seed 3, 0 to 3, edge lengths)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="lengths must be one of"):
        fuzz.run(1, lengths="huge")


def test_the_references_softmax_has_the_limit_at_plus_infinity():
    # The engines give a row whose maximum is +inf its limit (the mass shared by the
    # infinite entries, docs/reference/nnet.md); numpy's x - max(x) there is inf - inf.
    inf, nan = np.inf, np.nan
    x = np.array([[inf, 1.0, inf, -inf], [inf, nan, 0.0, 0.0], [-inf, -inf, 0.0, 0.0],
                  [0.0, np.log(3.0), 0.0, -inf]], dtype="float32")  # fmt: skip
    want = np.array([[0.5, 0, 0.5, 0], [nan] * 4, [0, 0, 0.5, 0.5], [0.2, 0.6, 0.2, 0]])
    np.testing.assert_allclose(fuzz.softmax(x), want, rtol=1e-6)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(fuzz.logsoftmax(x), np.log(want), rtol=1e-6)
    m = tt.fmatrix()
    f = function([m], [tt.nnet.softmax(m), tt.nnet.logsoftmax(m)], mode="FAST_RUN")
    for got, ref in zip(f(x), (fuzz.softmax(x), fuzz.logsoftmax(x))):
        np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_the_references_batched_dot_of_no_rows_is_empty():
    # --lengths edge draws batches of 0 rows: numpy's stack of no product raised (in the
    # classification of a graph that differed, which ended the run).
    x, y = np.zeros((0, 3, 4)), np.zeros((0, 4, 2))
    got = fuzz.bdot(x, y, "float32")
    assert got.shape == (0, 3, 2) and got.dtype == np.float32
    a, b = tt.dtensor3(), tt.dtensor3()
    assert function([a, b], tt.batched_dot(a, b))(x, y).shape == got.shape


def test_lazy_ifelse_graphs_agree_with_numpy_on_every_cpu_engine():
    # The generator's ifelse (lazy=True): branches compiled apart and taken on a
    # condition of the values (either branch among the draws of both calls).
    rng = np.random.default_rng(5)
    recs = []
    for _ in range(3000):
        rec = fuzz.generate(rng, lazy=True)
        if any(n[0] == "ifelse" for n in rec.nodes):
            recs.append(rec)
        if len(recs) == 6:
            break
    assert len(recs) == 6, "the generator drew fewer than 6 ifelse graphs in 3000"
    for rec in recs:
        assert fuzz.check(rec, ["py", "cpu", "cpu_c", "cpu_poison"]) == [], rec


def test_extra_op_graphs_agree_with_numpy_on_every_cpu_engine():
    # The generator's extra ops (extra=True): special functions against scipy's, axes
    # flipped, rolled and squeezed, triangles, logsumexp, diff, run-time lengths.
    rng = np.random.default_rng(12)
    recs = [fuzz.generate(rng, extra=True) for _ in range(60)]
    assert sum(any(n[0] in fuzz.EXTRA_OPS for n in r.nodes) for r in recs) >= 30
    out = io.StringIO()
    wanted = ("py", "cpu", "cpu_c", "cpu_poison", "opencl")
    engines = [e for e in fuzz.available_engines() if e in wanted]
    failures = fuzz.run(60, seed=12, engines=engines, c_every=2, out=out, extra=True)
    assert failures == [], out.getvalue()
    failures = fuzz.run_grads(20, seed=12, out=out, extra=True)
    assert failures == [], out.getvalue()


def test_a_gradient_check_skips_numpy_values_no_output_needs():
    # Seed 5's gradient graph 288: the log-softmax of an empty masked row, which no
    # output reads and numpy refuses (its max of nothing); the check raised there.
    rec = fuzz.Recipe(
        nodes=[("input", ("a", 1), "float64"), ("mask", (0,), 595924), ("second", (0, 1), None),
               ("mask", (0,), 798314), ("neg", (3,), None), ("switch", (4, 0, 3), None),
               ("trunc", (4,), None), ("expm1", (6,), None), ("logsoftmax", (5,), None)],
        outputs=[2], update=None, seed=1519211035,
        dims=[("a", 1), ("?595924:(a*1)",), ("a", "?595924:(a*1)"), ("?798314:(a*1)",),
              ("?798314:(a*1)",), ("a", "?798314:(a*1)"), ("?798314:(a*1)",),
              ("?798314:(a*1)",), ("a", "?798314:(a*1)")],
        dtypes=["float64"] * 9, nonfinite=False, sizes=0, values="default", lengths="default",
    )  # fmt: skip
    assert fuzz.check_grad(rec) == []


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "int64", "bool"])
@pytest.mark.parametrize("shape", [(), (1,), (5,), (0, 3), (2, 1, 3), (3, 4)])
def test_each_layout_holds_the_values_in_its_own_memory(dtype, shape):
    x = np.arange(int(np.prod(shape)) or 0).reshape(shape).astype(dtype)
    for how in fuzz.LAYOUT_KINDS:
        y = fuzz.laid_out(x, how)
        assert type(y) is np.ndarray and y.shape == x.shape and y.dtype == x.dtype, how
        assert np.array_equal(y, x) and not np.shares_memory(y, x), how
        assert y.flags.writeable == (how != "readonly"), how
    big = x.ndim >= 2 and x.size > 1
    assert fuzz.laid_out(x, "fortran").flags.f_contiguous
    assert not big or not fuzz.laid_out(x, "fortran").flags.c_contiguous
    assert not x.ndim or all(s <= 0 for s in fuzz.laid_out(x, "reversed").strides)
    if x.size > 1:
        assert not fuzz.laid_out(x, "strided").flags.c_contiguous
    if x.dtype.itemsize > 1 and x.size:
        assert not fuzz.laid_out(x, "unaligned").flags.aligned
    if x.ndim == 3:
        # (2, 1, 3) stored as (1, 3, 2): the first axis is the innermost
        assert fuzz.laid_out(x, "rotated").strides == (x.itemsize, 6 * x.itemsize, 2 * x.itemsize)
        assert fuzz.laid_out(x, "odd_unit_strides").strides[1] == 1 << 20


def test_a_strided_layout_leaves_gaps_that_show_when_read():
    y = fuzz.laid_out(np.arange(3.0), "strided")
    base = np.lib.stride_tricks.as_strided(y, (6,), (8,))
    assert np.isnan(base[1::2]).all()


def test_mixed_layouts_call_the_same_graphs_with_other_arrays():
    rng = np.random.default_rng(4)
    rec = dataclasses.replace(fuzz.generate(rng), layouts="mixed")
    inputs = [k for k, n in enumerate(rec.nodes) if n[0] == "input"]
    drawn = {fuzz._layout_of(rec, call, k) for call in (0, 1) for k in inputs}
    assert drawn <= set(fuzz.LAYOUT_KINDS) and len(drawn) >= 2
    assert fuzz._layout_of(dataclasses.replace(rec, layouts="default"), 0, inputs[0]) == "c"
    with pytest.raises(ValueError, match="layouts must be one of"):
        fuzz.run(1, layouts="diagonal")


def test_mixed_layout_graphs_agree_with_numpy_on_every_engine():
    # Each input given Fortran-ordered, reversed, strided, rotated, read-only, unaligned
    # or with odd strides on its unit axes: the C kernels, the planned and poisoned
    # blocks and OpenCL's uploads read them as numpy does, and never write them.
    out = io.StringIO()
    engines = [e for e in fuzz.available_engines() if e not in ("cpu_safe", "cpu_late_c")]
    failures = fuzz.run(
        40, seed=103, engines=engines, c_every=2, opencl_every=4, out=out, layouts="mixed"
    )
    assert failures == [], out.getvalue()
    failures = fuzz.run(30, seed=104, engines=["py", "cpu_c"], c_every=1, out=out,
                        layouts="mixed", extra=True, values="wide")  # fmt: skip
    assert failures == [], out.getvalue()
    assert fuzz.run_grads(12, seed=103, out=out, layouts="mixed") == [], out.getvalue()


def test_aliased_layouts_give_the_second_call_the_functions_own_arrays():
    # An input of an output's dtype and shape is given that output of the first call
    # (borrowed, fed back); one of the shared variable's, the shared variable's array.
    rec = fuzz.Recipe(
        nodes=[("input", [1, "a"], "float64"), ("input", ["b"], "int32"), ("exp", [0], None)],
        outputs=[2],
        dims=[[1, "a"], ["b"], [1, "a"]],
        dtypes=["float64", "int32", "float64"],
        layouts="aliased",
    )
    assert fuzz.aliases(rec) == {}  # the second call's lengths are others
    rec = dataclasses.replace(rec, nodes=[("input", [1], "float64"), *rec.nodes[1:]])
    rec = dataclasses.replace(rec, dims=[[1], ["b"], [1]])
    assert fuzz.aliases(rec) == {0: ("output", 0)}
    assert fuzz.aliases(dataclasses.replace(rec, layouts="mixed")) == {}
    rec = fuzz.Recipe(
        nodes=[("input", ["a"], "float64"), ("shared", ["a"], "float64"), ("add", [0, 1], None)],
        outputs=[2],
        update=2,
        dims=[["a"], ["a"], ["a"]],
        dtypes=["float64"] * 3,
        layouts="aliased",
    )
    assert fuzz.aliases(rec) == {0: ("shared",)}
    assert fuzz.check(rec, ["py", "cpu", "cpu_c"]) == []
    held = np.zeros(3)
    assert fuzz.aliased_arg(held, np.arange(3.0)) is held and held.tolist() == [0, 1, 2]
    assert fuzz.aliased_arg(held, np.arange(4.0)) is None  # another shape
    assert fuzz.aliased_arg(np.zeros(3, "float32"), np.arange(3.0)) is None


def test_aliased_layout_graphs_agree_with_numpy_on_the_cpu_engine():
    # Before the CPU engine copied such arguments, graphs 9, 42 and 45 of this seed gave
    # NaN or values of the call's own output: it wrote a borrowed output's buffer, or a
    # shared value in place, before it had read the input given in it.
    out = io.StringIO()
    engines = ["py", "cpu", "cpu_plan0", "cpu_poison", "cpu_c"]
    failures = fuzz.run(50, seed=200, engines=engines, c_every=3, out=out, layouts="aliased")
    assert failures == [], out.getvalue()


def test_an_aliased_layout_reproducer_feeds_the_arrays_back_and_runs_alone():
    rng = np.random.default_rng(200)
    rec = next(
        r
        for r in (dataclasses.replace(fuzz.generate(rng), layouts="aliased") for _ in range(50))
        if any(how[0] == "output" for how in fuzz.aliases(r).values())
    )
    script = fuzz.reproducer(rec, "cpu_poison")
    assert "Out(v" in script and "prev = list(got)" in script and "= prev[" in script
    code, printed = _run_script(script)
    assert code == 0, printed


def test_a_mixed_layout_reproducer_lays_its_arrays_out_and_runs_alone():
    rng = np.random.default_rng(9)
    rec = dataclasses.replace(fuzz.generate(rng), layouts="mixed")
    script = fuzz.reproducer(rec, "cpu_c")
    assert "def laid_out(" in script and "args = [laid_out(" in script
    code, printed = _run_script(script)
    assert code == 0, printed
    grec = next(
        r
        for r in (
            dataclasses.replace(fuzz.generate(rng, grad=True), layouts="mixed") for _ in range(50)
        )
        if fuzz.differentiable(r)
    )
    script = fuzz.grad_reproducer(grec)
    assert "laid_out(v, how) for v, how in zip(values, [" in script
    code, printed = _run_script(script)
    assert code == 0, printed
