"""tools/theano_suite.py (``make theano-suite``): the import rewriting, the file
selection and the sampling it runs Theano's tests with."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("theano_suite", ROOT / "tools" / "theano_suite.py")
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)


def test_imports_are_changed_and_other_words_are_not():
    src = (
        "import theano\n"
        "import theano.tensor as tt\n"
        "from theano.configdefaults import config\n"
        "from theano.link.basic import Container\n"
        "x = theano.function([], theano.tensor.constant(1))\n"
        "# theano-pymc, THEANO_FLAGS and theano_dag stay\n"
    )
    assert suite.to_theano_dag(src) == (
        "import theano_dag\n"
        "import theano_dag.tensor as tt\n"
        "from theano_dag.config import config\n"
        "from theano_dag.engines.basic import Container\n"
        "x = theano_dag.function([], theano_dag.tensor.constant(1))\n"
        "# theano-pymc, THEANO_FLAGS and theano_dag stay\n"
    )


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
