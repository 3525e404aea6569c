"""The floors of docs/architecture.md, checked by import-linter as `make lint` does.

The contract lives in pyproject.toml; these tests run it on the tree and on a copy with one
upward import added, so a broken contract is seen to fail and not only assumed to.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(
    not LINT_IMPORTS.exists(), reason="import-linter is not installed (the dev extra has it)"
)


def _lint_imports(tree: Path):
    # import-linter finds the package on sys.path: put the tree to check first.
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )


def _copy_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT / "theano_dag", tree / "theano_dag", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_floors_hold_on_the_tree(tmp_path):
    out = _lint_imports(_copy_tree(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 2 kept, 0 broken." in out.stdout


@pytest.mark.parametrize(
    "module, line, message",
    [
        (
            "graph/type.py",
            "from theano_dag.compile.function import function  # upward",
            "theano_dag.graph is not allowed to import theano_dag.compile",
        ),
        (
            "tensor/sort.py",
            "import theano_dag.opt  # upward",
            "theano_dag.tensor is not allowed to import theano_dag.opt",
        ),
        (
            # Deferred imports count: a function body is no way around the floors.
            "scalar/math.py",
            "def _late():\n    from theano_dag.tensor import nnet  # upward\n",
            "theano_dag.scalar is not allowed to import theano_dag.tensor",
        ),
        (
            "graph/fg.py",
            "from theano_dag.graph.rewriting import basic  # upward inside graph",
            "theano_dag.graph.fg is not allowed to import theano_dag.graph.rewriting",
        ),
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path, module, line, message):
    tree = _copy_tree(tmp_path)
    path = tree / "theano_dag" / module
    path.write_text(path.read_text() + "\n" + line + "\n")
    out = _lint_imports(tree)
    assert out.returncode == 1, out.stdout + out.stderr
    assert message in out.stdout
