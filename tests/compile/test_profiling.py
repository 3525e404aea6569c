"""``profile=True`` and ``config.profile`` give a ProfileStats on every engine."""

import os
import subprocess
import sys

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile import profiling
from theano_dag.compile.mode import Mode
from theano_dag.compile.profiling import ProfileStats
from theano_dag.config import config
from theano_dag.engines.opencl.context import opencl_available

OCL_OK, OCL_WHY = opencl_available()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ENGINES = [
    pytest.param("FAST_RUN", "CPU engine", id="cpu"),
    pytest.param("FAST_COMPILE", "reference engine", id="FAST_COMPILE"),
    pytest.param(Mode(linker="py", optimizer=None), "reference engine", id="py-no-rewrites"),
    pytest.param(
        Mode(linker="opencl"),
        "OpenCL engine",
        id="opencl",
        marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL device: {OCL_WHY}"),
    ),
]


def _graph():
    x = tt.dmatrix("x")
    return x, tt.dot(tt.exp(x), x.T).sum() + tt.tanh(x).max()


@pytest.mark.parametrize("mode, engine", ENGINES)
def test_profile_true_gives_per_op_and_per_node_summary(mode, engine):
    x, y = _graph()
    f = theano_dag.function([x], y, mode=mode, profile=True, name="prof")
    xv = np.linspace(0, 1, 16).reshape(4, 4)
    for _ in range(3):
        f(xv)
    prof = f.profile
    assert isinstance(prof, ProfileStats)
    assert prof.calls == 3 and prof.call_time > 0
    assert prof.nodes and all(c == 3 for c in prof.node_calls)
    assert sum(prof.node_time) <= prof.call_time
    assert prof.optimizer_time > 0 or mode == ENGINES[2].values[0]
    text = prof.summary()
    assert text.splitlines()[0] == f"Function profile: prof ({engine})"
    for part in ["calls: 3", "per op type:", "per op:", "per node (top"]:
        assert part in text, part
    # One row per node in the per-node table, and the op table names each op.
    for node in prof.nodes:
        assert str(node.op) in text
    np.testing.assert_allclose(f(xv), theano_dag.function([x], y, mode="PerformOnly")(xv))


@pytest.fixture
def no_exit_report():
    """Profiles made under config.profile here are not printed when pytest exits."""
    saved = list(profiling._AT_EXIT)
    yield
    profiling._AT_EXIT[:] = saved


@pytest.mark.parametrize("mode, engine", ENGINES[:3])
def test_config_profile_profiles_every_function(mode, engine, no_exit_report):
    x, y = _graph()
    with config.change_flags(profile=True):
        f = theano_dag.function([x], y, mode=mode)
    f(np.ones((2, 2)))
    assert isinstance(f.profile, ProfileStats) and f.profile.calls == 1
    assert f.profile.engine == engine
    assert any(p is f.profile for p in profiling._AT_EXIT)
    g = theano_dag.function([x], y, mode=mode)
    assert not isinstance(g.profile, ProfileStats)


def test_profile_summaries_are_printed_at_exit_when_config_profile_is_set():
    code = (
        "import numpy as np, theano_dag, theano_dag.tensor as tt\n"
        "x = tt.dvector('x')\n"
        "f = theano_dag.function([x], tt.exp(x).sum(), name='at_exit')\n"
        "f(np.ones(3)); f(np.ones(3))\n"
        "g = theano_dag.function([x], x * 2, mode='FAST_COMPILE', name='at_exit_py')\n"
        "g(np.ones(3))\n"
    )
    env = dict(os.environ, THEANO_DAG_FLAGS="profile=True")
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert "Function profile: at_exit (CPU engine)\n  calls: 2" in res.stderr
    assert "Function profile: at_exit_py (reference engine)\n  calls: 1" in res.stderr
    env["THEANO_DAG_FLAGS"] = ""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "Function profile" not in res.stderr
