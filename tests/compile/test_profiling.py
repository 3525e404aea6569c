"""``profile=True`` and ``config.profile`` give a ProfileStats on every engine."""

import io
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
    text = str(prof)
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


@pytest.mark.parametrize("mode, engine", ENGINES + [pytest.param("DASK", "", id="dask")])
def test_summary_prints_to_stderr_or_file_as_theano_does(mode, engine, capsys):
    if mode == "DASK":
        pytest.importorskip("dask")
        mode = Mode(linker="dask")
    x, y = _graph()
    f = theano_dag.function([x], y, mode=mode, profile=True, name="prof")
    f(np.ones((2, 2)))
    assert f.profile.summary() is None
    out, err = capsys.readouterr()
    assert out == "" and err == str(f.profile) + "\n"
    assert "calls: 1" in err
    buf = io.StringIO()
    f.profile.summary(file=sys.stdout)
    f.profile.summary(file=buf, n_ops_to_print=1, n_apply_to_print=1)
    out, err = capsys.readouterr()
    assert out == str(f.profile) + "\n" and err == ""
    if engine:  # the engines' ProfileStats: one row per table under the counts
        assert "per node (top 1)" in buf.getvalue()
        assert len(buf.getvalue().splitlines()) < len(out.splitlines())


def _run_at_exit(code, flags):
    env = dict(os.environ, THEANO_DAG_FLAGS=flags)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    return res.stderr


def test_at_exit_theano_rule_config_profile_at_exit_and_called_functions_only():
    head = "import numpy as np, theano_dag, theano_dag.tensor as tt\nx = tt.dvector('x')\n"
    called = head + (
        "f = theano_dag.function([x], tt.exp(x).sum(), name='asked', profile=True)\n"
        "f(np.ones(3))\n"
        "g = theano_dag.function([x], x * 2, name='never_called', profile=True)\n"
    )
    # profile=True alone: nothing at exit (Theano prints only under config.profile).
    assert "Function profile" not in _run_at_exit(called, "")
    # With config.profile: the called ones, profile=True or not; not the uncalled.
    err = _run_at_exit(called, "profile=True")
    assert "Function profile: asked (CPU engine)\n  calls: 1" in err
    assert "never_called" not in err
    # The flag is read at exit: set after compiling, the profiled function is printed.
    late = called + "theano_dag.config.profile = True\n"
    assert "Function profile: asked (CPU engine)\n  calls: 1" in _run_at_exit(late, "")


@pytest.mark.parametrize("mode,engine", ENGINES)
def test_theanos_names_of_the_call_counters(mode, engine):
    # PyMC3's Model.profile reads fct_callcount and fct_call_time, as Theano names them.
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.exp(x).sum(), mode=mode, profile=True)
    assert f.profile.fct_callcount == 0 and f.profile.fct_call_time == 0.0
    for _ in range(5):
        f(np.ones(4))
    p = f.profile
    assert p.fct_callcount == p.calls == 5
    assert p.fct_call_time == p.call_time > 0.0
    assert p.linker_time == p.link_time
