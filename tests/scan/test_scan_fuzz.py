"""The scan fuzzer (``theano_dag.testing.scan_fuzz``): a fixed seeded sample of random
loops on the reference and CPU engines, and the loops it found wrong, minimized, each
checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.scan import scan
from theano_dag.testing import scan_fuzz

REF = Mode(linker="py", optimizer=None)
try:
    import dask.array  # noqa: F401  (the Dask engine compiles only where dask is installed)

    DASK_OK = True
except ImportError:
    DASK_OK = False
#: The fixed sample: recipes of seed 0, on engines that compile fast.
SAMPLE = 10


def _recipes():
    rng = np.random.default_rng(0)
    return [scan_fuzz.generate(rng) for _ in range(SAMPLE)]


@pytest.mark.parametrize("index", range(SAMPLE))
def test_sample_agrees_with_numpy(index):
    rec = _recipes()[index]
    assert scan_fuzz.check(rec, ["py", "fast_compile", "cpu"]) == []
    if scan_fuzz.differentiable(rec):
        assert scan_fuzz.check_grad(rec, ["py", "cpu"]) == []


def test_shrink_keeps_the_failure():
    rec = _recipes()[0]
    # a stand-in failure: "the recipe has a state"; the smallest recipe keeps one
    small = scan_fuzz.shrink(rec, lambda r: any(o[0] == "state" for o in r.outs))
    assert any(o[0] == "state" for o in small.outs)
    assert len(small.outs) <= len(rec.outs)


# -- regressions -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [REF, Mode(linker="cpu")], ids=["py", "cpu"])
def test_grad_through_a_loop_with_an_integer_output(mode):
    # An integer per-step output next to a float one: its gradient (float zeros) was
    # given to the backward loop as a sequence of integer rows, a TypeError.
    x, w = tt.ivector("x"), tt.dvector("w")
    (ints, floats), _ = scan(lambda a, w: (tt.alloc(a, 3), a * w), sequences=x,
                             non_sequences=w)  # fmt: skip
    cost = ints.sum() * 1.5 + (floats**2).sum()
    f = theano_dag.function([x, w], theano_dag.grad(cost, w), mode=mode)
    xv, wv = np.arange(5, dtype="int32"), np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(f(xv, wv), 2 * wv * np.sum(xv.astype(float) ** 2))


@pytest.mark.parametrize("mode", [REF, Mode(linker="cpu")], ids=["py", "cpu"])
def test_grad_through_a_loop_with_an_integer_state(mode):
    x, h0 = tt.dvector("x"), tt.lscalar("h0")
    (count, total), _ = scan(lambda v, c, s: (c + 1, s * 0.5 + v), sequences=x,
                             outputs_info=[h0, np.float64(0.0)])  # fmt: skip
    f = theano_dag.function([x, h0], theano_dag.grad(total[-1] + count.sum(), x), mode=mode)
    np.testing.assert_allclose(f(np.ones(4), 2), 0.5 ** np.arange(3, -1, -1))


@pytest.mark.skipif(not DASK_OK, reason="no dask")
def test_nested_loop_on_dask_does_not_wait_for_itself():
    # A scan in a scan's step on the Dask engine: each step computes a graph from a task
    # of the engine's thread pool, the inner loop's step one more; every thread waited
    # for a task that no free thread could run (a hang).
    dask_mode = Mode(linker="dask", optimizer="fast_run")
    xs = tt.dmatrix("xs")

    def row_sums(r):
        acc, _ = scan(lambda e, a: a * 0.5 + e, sequences=r, outputs_info=np.float64(0.0),
                      mode=dask_mode)  # fmt: skip
        return acc[-1]

    out, _ = scan(row_sums, sequences=xs, mode=dask_mode)
    xv = np.arange(12.0).reshape(4, 3)
    got = theano_dag.function([xs], out, mode=dask_mode)(xv)
    want = [sum(e * 0.5 ** (len(r) - 1 - i) for i, e in enumerate(r)) for r in xv]
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("mode", [REF, Mode(linker="cpu")], ids=["py", "cpu"])
def test_truncated_gradient_reaches_initial_rows_read_by_the_kept_steps(mode):
    # taps [-3, -1], 4 steps: step 1 reads initial row 1, step 2 initial row 2. With
    # truncate_gradient=3 (steps 1..3 kept) those reads pass their gradient, as in Theano
    # (h3 = 2 h0 + 3 h2, h2 = 2 init[2] + 3 h1, h1 = 2 init[1] + 3 h0, h0 held fixed);
    # the initial rows got none.
    h0 = tt.dvector("h0")
    want = {-1: [58.0, 18.0, 93.0], 3: [0.0, 18.0, 6.0], 2: [0.0, 0.0, 6.0], 1: [0.0, 0.0, 0.0]}
    for trunc, expected in want.items():
        hs, _ = scan(lambda a, b: a * 2.0 + b * 3.0, n_steps=4, truncate_gradient=trunc,
                     outputs_info=dict(initial=h0, taps=[-3, -1]))  # fmt: skip
        f = theano_dag.function([h0], theano_dag.grad(hs[-1].sum(), h0), mode=mode)
        np.testing.assert_allclose(f(np.ones(3)), expected)


def test_no_step_gives_rows_whose_shape_the_non_sequences_give():
    # A loop of 0 steps whose per-step rows come from a loop of their own over a
    # non-sequence. It returned a stack of rows of shape (0,) ((0, 0) instead of (0, 3)),
    # and so a sum over the steps of shape (0,), not (3,); then it refused. The inner
    # loop's length is a graph of the non-sequence alone, computed without a step.
    k, v = tt.lscalar("k"), tt.dvector("v")

    def step():
        inner, _ = scan(lambda e, a: a * 0.5 + e, sequences=v, outputs_info=np.float64(0.0))
        return inner

    ys, _ = scan(step, n_steps=k, outputs_info=[None])
    f = theano_dag.function([k, v], [ys, ys.sum(axis=0)], mode=REF)
    np.testing.assert_allclose(f(2, np.ones(3))[1], [2.0, 3.0, 3.5])
    stack, total = f(0, np.ones(3))
    assert stack.shape == (0, 3)
    np.testing.assert_array_equal(total, np.zeros(3))


def test_no_step_with_rows_whose_shape_a_step_gives_is_refused():
    # Each row's length is a sequence's entry: without a step there is none to read.
    v = tt.lvector("v")
    ys, _ = scan(lambda n: tt.zeros((n,)), sequences=v)
    f = theano_dag.function([v], ys.sum(axis=0), mode=REF)
    np.testing.assert_allclose(f(np.array([3, 3])), np.zeros(3))
    with pytest.raises(ValueError, match="ran no step, and the shape of the rows of its per"):
        f(np.array([], dtype="int64"))


def test_gradient_through_a_lazy_branch_of_a_constant_keeps_the_constant():
    # Seed 211946, program 13, shrunk: a state chosen by nested ifelses. In the backward
    # loop a lazy ifelse's branch computed a constant (folded when the branch compiled),
    # whose read-only array the branch's function handed out as the caller's own; an
    # in-place add then wrote into it: "output array is read-only" on the Python and
    # numpy paths, and, through the C kernels (which do not read the flag), the constant
    # changed under later steps: a gradient 397 off on cpu_c and Dask.
    rec = scan_fuzz.Recipe(
        dtype="float64", d=3, seqs=[], seq_dtypes=[],
        outs=[("state", 0, [-1], ("ifelse", ("const", 1), ("leaf", "o1t1"),
                                  ("ifelse", ("leaf", "o1t1"), ("leaf", "o1t1"),
                                   ("const", -0.79)))),
              ("state", 0, [-3, -1], ("const", 1))],
        nonseqs=[], steps=("const", 7), lengths=(4, 12), sym_steps=(0, 0),
        go_backwards=False, truncate=-1, select=["all", "all"], counter=False, acc=False,
        acc_expr=None, inner_mode="same", seed=341831346,
        weights=[1.12776288039684, 1.3398308385808995], checkpoints=0,
    )  # fmt: skip
    engines = [e for e in scan_fuzz.available_engines() if e != "opencl"]
    assert scan_fuzz.check(rec, engines) == []
    assert scan_fuzz.check_grad(rec, engines) == []


def test_a_float32_loops_finite_differences_are_taken_in_float64():
    # Seed 9001, program 1: a float32 loop whose gradient wrt a sequence is -0.0039. Its
    # differences were taken with the loop's state squashed to float32 at each step,
    # where a change of 1e-6 in the input is lost: they said 0, and every engine failed.
    rec = scan_fuzz.Recipe(
        dtype="float32", d=3, seqs=[(1, [0])], seq_dtypes=["float32"],
        outs=[("state", 0, [-1], ("un", "sigmoid", ("nestlast", 3, ("leaf", "n1"),
                                                    ("bin", "div", ("const", -0.32),
                                                     ("leaf", "s0t0")))))],
        nonseqs=[("m", "float32"), ("v", "float32")], steps=("sym",), lengths=(3, 10),
        sym_steps=(3, 2), go_backwards=False, truncate=-1, select=["last2"], counter=False,
        acc=False, acc_expr=None, inner_mode="same", seed=1345804073,
        weights=[1.0120208436243727], checkpoints=3,
    )  # fmt: skip
    wide = scan_fuzz._in_float64(rec)
    assert (wide.dtype, wide.seq_dtypes, wide.nonseqs) == (
        "float64",
        ["float64"],
        [("m", "float64"), ("v", "float64")],
    )
    assert scan_fuzz.check_grad(rec, ["py", "cpu"]) == []


def test_mixed_layouts_give_loops_arrays_of_other_layouts_with_numpys_values():
    rng = np.random.default_rng(3)
    recs = [scan_fuzz.generate(rng) for _ in range(4)]
    for rec in recs:
        mixed = scan_fuzz.replace(rec, layouts="mixed")
        vals = scan_fuzz.input_values(mixed, 0)
        names = sorted(vals)
        args = scan_fuzz._args(mixed, 0, vals, names)
        assert all(np.array_equal(a, vals[n]) for a, n in zip(args, names))
        assert scan_fuzz.check(mixed, ["py", "cpu"]) == []
        if scan_fuzz.differentiable(mixed):
            assert scan_fuzz.check_grad(mixed, ["cpu"]) == []
    with pytest.raises(ValueError, match="layouts must be one of"):
        scan_fuzz.run(1, layouts="diagonal")
