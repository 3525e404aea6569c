"""A compiled call's floating-point error state on numpy 1.x (this environment's 1.23).

numpy 1.x keeps the error state in a per-thread object, not in a ContextVar: the CPU
engine sets that object itself around each call (a mask ignoring every error) and puts
the caller's back after it, whatever the caller had set.
"""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.engines.cpu.emit import codegen

pytestmark = pytest.mark.skipif(
    not hasattr(np, "seterrobj"), reason="numpy 2 keeps the error state in a ContextVar"
)


def test_a_call_ignores_errors_inside_and_gives_the_callers_state_back():
    x = tt.dvector("x")
    f = theano_dag.function([x], [tt.log(x) / x, tt.exp(x * 1000.0)])
    calls = []
    old_call = np.seterrcall(lambda kind, flag: calls.append(kind))
    old = np.seterr(divide="raise", invalid="call", over="warn", under="ignore")
    try:
        before = np.geterrobj()
        logs, exps = f(np.array([0.0, -1.0, 2.0]))
        assert np.geterrobj() == before
        assert calls == []  # nothing reached the caller's handler from inside the call
        with pytest.raises(FloatingPointError):
            np.log(np.array([0.0]))  # the caller's "raise" is back
        np.sqrt(np.array([-1.0]))
        assert calls == ["invalid value"]  # and its "call", with its handler
    finally:
        np.seterr(**old)
        np.seterrcall(old_call)
    np.testing.assert_array_equal(logs[[0, 2]], [-np.inf, np.log(2.0) / 2])
    assert np.isnan(logs[1]) and exps[2] == np.inf


def test_the_hooks_set_the_error_object_directly():
    off, on = codegen.err_off, codegen.err_on
    before = np.geterrobj()
    token = off()
    assert np.geterrobj()[1] == 0 and np.geterr() == dict.fromkeys(np.geterr(), "ignore")
    on(token)
    assert np.geterrobj() == before
