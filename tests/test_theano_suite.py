"""tools/theano_suite.py (``make theano-suite``, ``make theano-graph-tests``) and the one
table it runs Theano's tests with, tools/theano_names.py: the import rewriting, the file
selections and what they leave out (with the reasons), the sampling, and the counts."""

import os
import subprocess
import sys
import time
from pathlib import Path

import theano_names as names
import theano_suite as suite

ROOT = Path(__file__).resolve().parent.parent


def test_modules_are_mapped_longest_prefix_first():
    src = (
        "import theano\n"
        "import theano.tensor as tt\n"
        "from theano.configdefaults import config\n"
        "from theano.graph.optdb import Query\n"
        "from theano.graph.opt import MergeOptimizer\n"
        "from theano.link.basic import Container\n"
        "from theano.link.c.basic import OpWiseCLinker\n"
        "from theano.tensor.opt import constant_folding\n"
        "from theano.compile.function.pfunc import pfunc\n"
        "from theano.compile.function import function\n"
        "from theano.utils import cmp\n"
        "x = theano.function([], theano.tensor.constant(1))\n"
        "# theano-pymc, THEANO_FLAGS, theano_dag and obj.theano stay\n"
    )
    assert names.rewrite(src) == (
        "import theano_dag\n"
        "import theano_dag.tensor as tt\n"
        "from theano_dag.config import config\n"
        "from theano_dag.graph.rewriting.db import Query\n"
        "from theano_dag.graph.rewriting import MergeOptimizer\n"
        "from theano_dag.engines.basic import Container\n"
        "from theano_dag.engines.theano_linkers import OpWiseCLinker\n"
        "from theano_dag.opt.tensor_opt import constant_folding\n"
        "from theano_dag.compile.function import pfunc\n"
        "from theano_dag.compile.function import function\n"
        "from theano_dag.utils import cmp\n"
        "x = theano_dag.function([], theano_dag.tensor.constant(1))\n"
        "# theano-pymc, THEANO_FLAGS, theano_dag and obj.theano stay\n"
    )


def test_c_backend_imports_are_rewritten_whole():
    out = names.rewrite("from theano.link.c.basic import DualLinker\n")
    assert out == "from theano_dag.engines.basic import PerformLinker as DualLinker\n"


def test_borrowed_modules_become_imports():
    src = "from theano.graph.opt import (\n    logging,\n    theano,\n    TopoOptimizer,\n)\n"
    out = names.rewrite(src)
    assert out.startswith("import logging\nimport theano_dag\n")
    assert "from theano_dag.graph.rewriting import (\n    TopoOptimizer,\n)" in out


def test_every_mapped_module_imports():
    for target in set(names.MODULES.values()):
        __import__(target)


def test_what_is_left_out_has_a_reason():
    for table in (names.LEFT_OUT, names.LEFT_ASIDE):
        assert table and all(why.strip() for why in table.values())
    assert all(" C " in f" {why} " or "CVM" in why for why in names.LEFT_ASIDE.values())


def test_left_aside_tests_leave_both_counts():
    outcomes = {
        "tests/link/test_vm.py::test_c_thunks": "failure",
        "tests/link/test_vm.py::test_VMLinker_make_vm_cvm[1]": "error",
        "tests/link/test_vm.py::test_callback": "passed",
    }
    assert suite.count(outcomes) == {
        "tests": 1,
        "passed": 1,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
        "left_aside": 2,
    }


def test_graph_link_selection(tmp_path):
    for rel in ["tests/graph/test_fg.py", "tests/graph/test_types.py", "tests/link/c/test_x.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert suite.select_files(tmp_path, "graph-link") == ["tests/graph/test_fg.py"]


def test_selection_leaves_out_the_c_backend_files(tmp_path):
    for rel in [
        "tests/tensor/test_basic.py",
        "tests/tensor/test_blas_c.py",
        "tests/tensor/utils.py",
        "tests/compile/function/test_types.py",
        "tests/test_gradient.py",
        "tests/test_ifelse.py",
    ]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert suite.select_files(tmp_path) == [
        "tests/compile/function/test_types.py",
        "tests/tensor/test_basic.py",
        "tests/test_gradient.py",
    ]


def test_every_nth_test_runs_and_slow_ones_skip(tmp_path):
    (tmp_path / "conftest.py").write_text(suite.CONFTEST)
    body = "".join(f"def test_{k}():\n    pass\n" for k in range(7))
    body += "import pytest\n@pytest.mark.slow\ndef test_z():\n    pass\n"
    (tmp_path / "test_x.py").write_text(body)
    env = {"THEANO_SUITE_EVERY": "3", "PATH": ""}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_x.py",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "-rs",
            "-q",
            "--rootdir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert "3 passed" in out.stdout  # tests 0, 3 and 6 of the 8 collected
    env["THEANO_SUITE_EVERY"] = "1"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_x.py",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "-q",
            "--rootdir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert "7 passed, 1 skipped" in out.stdout


def test_an_earlier_sides_counts_are_read_back(tmp_path):
    path = tmp_path / "partial.jsonl"
    path.write_text(
        '{"file": "tests/a.py", "theano": {"tests": 3, "passed": 2, "failed": 1, '
        '"errors": 0, "skipped": 0}}\n'
        '{"file": "tests/b.py", "theano_dag": {"tests": 1, "passed": 1, "failed": 0, '
        '"errors": 0, "skipped": 0}}\n'
        '{"file": "TOTAL", "theano": {"tests": 3, "passed": 2}}\n'
    )
    rows = suite.load_side(path, "theano")
    assert list(rows) == ["tests/a.py"]
    assert rows["tests/a.py"]["passed"] == 2 and rows["tests/a.py"]["status"] == "ran"


def test_reused_outcomes_are_counted_again(tmp_path):
    # A row written before a test was left aside: its counts follow today's LEFT_ASIDE.
    path = tmp_path / "partial.jsonl"
    path.write_text(
        '{"file": "tests/link/test_vm.py", "theano": {"tests": 2, "passed": 2, "failed": 0, '
        '"errors": 0, "skipped": 0, "outcomes": {"tests/link/test_vm.py::test_c_thunks": '
        '"passed", "tests/link/test_vm.py::test_callback": "passed"}}}\n'
    )
    row = suite.load_side(path, "theano")["tests/link/test_vm.py"]
    assert (row["tests"], row["passed"], row["left_aside"]) == (1, 1, 1)


def test_a_timed_out_files_unreached_tests_stay_counted(tmp_path):
    # Stopped at its time limit after 2 of its 4 sampled tests: 4 run, 1 passed.
    path = tmp_path / "partial.jsonl"
    path.write_text(
        '{"file": "tests/a.py", "theano": {"tests": 4, "passed": 1, "failed": 1, '
        '"errors": 0, "skipped": 0, "status": "timed out after 420s", "outcomes": '
        '{"tests/a.py::t1": "passed", "tests/a.py::t2": "failure"}}}\n'
    )
    row = suite.load_side(path, "theano")["tests/a.py"]
    assert (row["tests"], row["passed"], row["failed"]) == (4, 1, 1)
    assert row["status"] == "timed out after 420s"


def test_a_file_past_its_time_limit_leaves_no_process_behind(tmp_path):
    # The child sleeps in the background, as a sampler's worker process runs.
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    status, out = suite.run_group([sys.executable, "-c", script], tmp_path, None, 3)
    assert (status, out) == ("timed out after 3s", "")
    child = int(pid_file.read_text())
    # Killed: gone, or a zombie its (killed) parent left to init. SIGKILL is delivered
    # when the kernel next schedules the process, so on a busy machine it can still show
    # as running for a moment after killpg returns: wait for that, within a bound.
    stat = Path(f"/proc/{child}/stat")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state = stat.read_text().split(")")[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            state = "gone"
        if state in ("gone", "Z", "X"):
            break
        time.sleep(0.05)
    assert state in ("gone", "Z", "X")


def test_a_file_within_its_time_limit_gives_its_output(tmp_path):
    cmd = [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"]
    assert suite.run_group(cmd, tmp_path, None, 60) == ("ran", "out\n")


def test_a_relative_python_is_made_absolute_as_given(tmp_path, monkeypatch):
    # make pymc3-suite passes .venv-pymc3/bin/python; each file's pytest runs from PyMC3's
    # site-packages, where that relative path names nothing. The venv's link is kept.
    import argparse

    import pymc3_suite

    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    ap = argparse.ArgumentParser()
    pymc3_suite.common_arguments(ap, ".venv-pymc3", "pymc3-suite", 600)
    args = ap.parse_args(["--python", "venv/bin/python"])
    assert args.python == str(tmp_path / "venv" / "bin" / "python")


def test_relative_interpreters_of_the_theano_suite_are_made_absolute(tmp_path, monkeypatch):
    # make theano-suite passes .venv/bin/python; each file runs with its converted tree as
    # the working directory, where that relative path names nothing.
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    args = suite.parser().parse_args(
        ["--src", "x", "--dag-python", "venv/bin/python", "--theano-python", "venv/bin/python"]
    )
    assert args.dag_python == args.theano_python == str(tmp_path / "venv" / "bin" / "python")


def test_a_theano_dag_tree_goes_first_on_its_side_only(tmp_path):
    # --theano-dag: a worktree's theano_dag ahead of the venv's editable install, on the
    # theano_dag side's path alone (theano-pymc's side never imports theano_dag).
    import pymc3_suite

    tree, work = tmp_path / "tree", tmp_path / "work"
    mine = pymc3_suite.side_env("theano_dag", work, tmp_path / "tp", 10, tmp_path / "c", tree)
    assert mine["PYTHONPATH"].split(":") == [str(tree), str(work / "plugin")]
    venv = pymc3_suite.side_env("theano_dag", work, tmp_path / "tp", 10, tmp_path / "c")
    assert venv["PYTHONPATH"].split(":") == [str(work / "plugin")]
    theirs = pymc3_suite.side_env("theano", work, tmp_path / "tp", 10, tmp_path / "c", tree)
    assert str(tree) not in theirs["PYTHONPATH"].split(":")


def test_flags_reach_both_sides(tmp_path, monkeypatch):
    # --flags: theano_dag's side reads them in THEANO_DAG_FLAGS (its config is float32),
    # theano-pymc's in THEANO_FLAGS after the tool's compile directory.
    (tmp_path / "conftest.py").write_text(suite.CONFTEST)
    (tmp_path / "test_x.py").write_text(
        "import os\n"
        "def test_dag():\n"
        "    from theano_dag.config import config\n"
        "    assert config.floatX == 'float32' and 'THEANO_FLAGS' not in os.environ\n"
        "def test_theano():\n"
        "    flags = os.environ['THEANO_FLAGS'].split(',')\n"
        "    assert flags[0].startswith('base_compiledir=') and flags[-1] == 'floatX=float32'\n"
    )
    monkeypatch.delenv("THEANO_FLAGS", raising=False)
    monkeypatch.setenv("THEANO_DAG_FLAGS", "opencl__platform=NoSuchPlatform")
    for side in ("theano_dag", "theano"):
        r = suite.run_side(
            side, sys.executable, tmp_path, ["test_x.py"], 1, 120, 1, [str(ROOT)], None,
            "floatX=float32",
        )  # fmt: skip
        test = "test_dag" if side == "theano_dag" else "test_theano"
        assert r["test_x.py"]["outcomes"][f"test_x.py::{test}"] == "passed"


def test_sandbox_selection_and_its_package_data(tmp_path):
    repo = tmp_path / "repo"
    for rel in [
        "tests/sandbox/test_rng_mrg.py",
        "tests/sandbox/linalg/test_linalg.py",
        "tests/sandbox/helpers.py",
        "theano/sandbox/samples_MRG31k3p_12_7_5.txt",
    ]:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("1 2 3\n")
    # the test reads L'Ecuyer's samples from beside Theano's modules
    (repo / "tests/sandbox/test_rng_mrg.py").write_text(
        "import os\nimport theano\nimport numpy as np\n"
        'path = os.path.join(os.path.split(theano.__file__)[0], "sandbox", '
        '"samples_MRG31k3p_12_7_5.txt")\n'
        "def test_in1d():\n    assert np.in1d([[1, 5]], [1, 2]).tolist() == [True, False]\n"
    )
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "t"], check=True)
    subprocess.run([*git, "tag", "rel"], check=True)
    sides = suite.prepare(repo, "rel", tmp_path / "work")
    assert suite.select_files(sides["theano_dag"], "sandbox") == [
        "tests/sandbox/linalg/test_linalg.py",
        "tests/sandbox/test_rng_mrg.py",
    ]
    text = (sides["theano_dag"] / "tests/sandbox/test_rng_mrg.py").read_text()
    data = sides["theano_dag"] / "package-data/theano/sandbox/samples_MRG31k3p_12_7_5.txt"
    assert data.read_text() == "1 2 3\n" and repr(str(data)) in text
    # numpy 1's in1d, for the tests, where numpy 2.4 removed it
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "in1d",
         "tests/sandbox/test_rng_mrg.py"],
        cwd=sides["theano_dag"], capture_output=True, text=True,
    )  # fmt: skip
    assert "1 passed" in out.stdout, out.stdout + out.stderr


def test_a_work_tree_outside_the_checkout_gets_its_pytest_settings(tmp_path):
    # A rewrite that fails is an error in the checkout's settings (pyproject.toml), which
    # pytest would not find from a tree outside it: the results would depend on --work.
    (tmp_path / "test_w.py").write_text(
        "import warnings\n"
        "from theano_dag.graph.rewriting.basic import OptimizationWarning\n"
        "def test_w():\n"
        "    warnings.warn('a rewrite failed', OptimizationWarning)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(suite.ROOT))
    got = suite.run_file(sys.executable, tmp_path, "test_w.py", env, 120)
    assert (got["passed"], got["failed"]) == (0, 1), got
