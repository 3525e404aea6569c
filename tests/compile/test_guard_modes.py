"""NanGuardMode and MonitorMode (Theano's debugging modes)."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.monitormode import MonitorMode, detect_nan
from theano_dag.compile.nanguardmode import BIG_VALUE, NanGuardMode


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nanguard_gives_the_same_values_and_updates(dtype):
    x = tt.matrix("x", dtype=dtype)
    w = theano_dag.shared(np.ones((3, 2), dtype=dtype), name="w")
    y = tt.tanh(tt.dot(x, w)).sum(axis=1) + tt.log(x + 1).mean()
    f = theano_dag.function([x], y, mode=NanGuardMode(), updates=[(w, w * 0.5)])
    ref = theano_dag.function([x], y, mode="FAST_COMPILE")
    xv = np.linspace(0, 1, 6).reshape(2, 3).astype(dtype)
    expected = ref(xv)
    got = f(xv)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    np.testing.assert_allclose(w.get_value(), 0.5)


@pytest.mark.parametrize(
    "value, what, flag",
    [
        (-1.0, "NaN", "nan_is_error"),
        (0.0, "Inf", "inf_is_error"),
        (1e-12, "a big value", "big_is_error"),
    ],
)
def test_nanguard_names_the_problem_the_node_and_the_users_line(value, what, flag):
    x = tt.dvector("x")
    y = tt.log(x) / x  # the guarded line
    f = theano_dag.function([x], y, mode=NanGuardMode(optimizer=None))
    np.testing.assert_allclose(f(np.array([1.0, np.e])), [0.0, 1 / np.e])
    with pytest.raises(AssertionError) as info:
        f(np.array([value]))
    text = str(info.value)
    assert text.startswith(f"NanGuardMode: {what}")
    assert " in output 0 of Elemwise{" in text.splitlines()[0]
    assert "Backtrace when the node is created" in text
    assert "y = tt.log(x) / x  # the guarded line" in text
    # Turned off, the same value goes through.
    off = theano_dag.function([x], y, mode=NanGuardMode(**{flag: False}, optimizer=None))
    if what != "NaN":  # log(0) = -inf, then -inf / 0 = -inf: only the Inf check sees it
        with np.errstate(all="ignore"):
            off(np.array([value]))


def test_nanguard_checks_the_inputs_and_ignores_integers():
    x, i = tt.dvector("x"), tt.lvector("i")
    f = theano_dag.function([x, i], x[i] * 2, mode=NanGuardMode())
    assert f(np.array([1.0, 2.0]), np.array([10**11 % 2])).tolist() == [2.0]
    with pytest.raises(AssertionError, match=r"NanGuardMode: NaN in input 0 \(x\) of the function"):
        f(np.array([np.nan]), np.array([0]))
    big = np.array([BIG_VALUE * 10])
    with pytest.raises(AssertionError, match="a big value"):
        f(big, np.array([0]))
    assert theano_dag.function([x], x, mode=NanGuardMode(big_is_error=False))(big)[0] == big[0]


def test_nanguard_is_a_registered_mode_name():
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.sqrt(x), mode="NanGuardMode")
    with pytest.raises(AssertionError, match="NaN"):
        f(np.array([-1.0]))


def test_monitor_mode_calls_pre_and_post_around_every_node():
    calls = []

    def pre(fgraph, i, node, fn):
        calls.append(("pre", i, fn.outputs[0][0] is None))

    def post(fgraph, i, node, fn):
        assert node in fgraph.apply_nodes
        calls.append(("post", i, np.asarray(fn.outputs[0][0]).tolist()))

    x = tt.dvector("x")
    y = tt.exp(x) * 2 + 1
    f = theano_dag.function([x], y, mode=MonitorMode(pre, post, optimizer=None))
    np.testing.assert_allclose(f(np.zeros(2)), [3.0, 3.0])
    n = len(f.maker.fgraph.apply_nodes)
    assert [c[:2] for c in calls] == [(k, i) for i in range(n) for k in ("pre", "post")]
    assert all(c[2] for c in calls if c[0] == "pre")
    assert calls[-1] == ("post", n - 1, [3.0, 3.0])


def test_detect_nan_prints_the_node(capsys):
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.log(x), mode=MonitorMode(post_func=detect_nan))
    with np.errstate(invalid="ignore"):
        f(np.array([-1.0]))
    out = capsys.readouterr().out
    assert "*** NaN detected ***" in out and "log" in out


def test_theano_import_paths_of_its_test_helpers():
    from theano_dag.compile.debugmode import str_diagnostic
    from theano_dag.compile.ops import as_op

    text = str_diagnostic(np.array([1.0, 2.0]), np.array([1.0, 2.5]), None, None)
    assert "Max Abs Diff: 0.5" in text and "1 of 2 elements differ" in text
    assert "float32" in str_diagnostic(np.float32([1]), np.float32([1]), 1e-3, 1e-3)

    x = tt.dvector("x")

    @as_op(itypes=[x.type], otypes=[x.type])
    def twice(a):
        return 2 * a

    assert theano_dag.function([x], twice(x))(np.ones(2)).tolist() == [2.0, 2.0]
