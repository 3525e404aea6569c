"""Run theano-pymc 1.1.2's own graph and link tests against theano_dag.

The tests are taken from a Theano-PyMC checkout (tag ``rel-1.1.2``), copied to a
temporary folder with their imports changed (``theano.X`` -> the theano_dag module
that holds Theano's names, by the table below, else ``theano_dag.X``), and run with
pytest; the script prints pytest's summary and the count per file.

    python tools/run_theano_tests.py /path/to/Theano-PyMC [pytest args...]

The path may be a git directory (``.../repo/.git``): the tests are then read from the
tag ``rel-1.1.2`` with ``git archive``. Tests of Theano's C backend internals
(``tests/link/c``, the C code of ``tests/graph/c_code``) are left out, as the issue
that asked for this script says.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "rel-1.1.2"
FILES = ["tests/__init__.py", "tests/unittest_tools.py", "tests/graph", "tests/link"]
LEFT_OUT = ["tests/link/c"]

# Theano module -> the theano_dag module with the same names (the longest prefix wins).
MODULES = {
    "theano.configdefaults": "theano_dag.config",
    "theano.graph.opt": "theano_dag.graph.rewriting",
    "theano.graph.optdb": "theano_dag.graph.rewriting.db",
    "theano.graph.opt_utils": "theano_dag.graph.rewriting",
    "theano.link.basic": "theano_dag.engines.basic",
    "theano.link.c.basic": "theano_dag.engines.theano_linkers",
    "theano.link.c.exceptions": "theano_dag.engines.theano_linkers",
    "theano.link.vm": "theano_dag.engines.theano_linkers",
    "theano.graph.sched": "theano_dag.graph.sched",
    "theano.utils": "theano_dag.graph.utils",
    "theano.link.utils": "theano_dag.engines.basic",
    "theano.tensor.opt": "theano_dag.opt.tensor_opt",
    "theano.tensor.var": "theano_dag.tensor.variable",
    "theano.tensor.type_other": "theano_dag.tensor.type_other",
    "theano.gradient": "theano_dag.gradient",
    "theano": "theano_dag",
}
_PATTERN = re.compile(
    r"\b(" + "|".join(re.escape(m) for m in sorted(MODULES, key=len, reverse=True)) + r")\b"
)


# Modules that Theano's tests import by name from another module's namespace (``from
# theano.graph.opt import logging, theano``): imported as modules instead.
_BORROWED_MODULES = ("theano_dag", "logging")
_BORROWED = re.compile(r"^[ \t]+(" + "|".join(_BORROWED_MODULES) + r"),[ \t]*\n", re.M)


def rewrite(text: str) -> str:
    """``text`` with its Theano module names changed to theano_dag's (in imports and in
    dotted uses alike, as ``theano.tensor.dvector`` or ``theano.config``).

    >>> rewrite("from theano.graph.opt import LocalOptimizer\\nimport theano.tensor as tt")
    'from theano_dag.graph.rewriting import LocalOptimizer\\nimport theano_dag.tensor as tt'
    """
    text = _PATTERN.sub(lambda m: MODULES[m.group(1)], text)
    borrowed = _BORROWED.findall(text)
    if borrowed:
        text = _BORROWED.sub("", text)
        text = "".join(f"import {name}\n" for name in dict.fromkeys(borrowed)) + text
    return text


def _copy_tests(source: str, dest: str):
    if source.rstrip("/").endswith(".git"):
        archive = subprocess.run(
            ["git", "--git-dir", source, "archive", "--format=tar", TAG, *FILES],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "xf", "-", "-C", dest], input=archive, check=True)
    else:
        for f in FILES:
            src = os.path.join(source, f)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(dest, f))
            else:
                os.makedirs(os.path.dirname(os.path.join(dest, f)), exist_ok=True)
                shutil.copy(src, os.path.join(dest, f))
    for f in LEFT_OUT:
        shutil.rmtree(os.path.join(dest, f), ignore_errors=True)
    for folder, _dirs, names in os.walk(dest):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path) as fh:
                    text = fh.read()
                with open(path, "w") as fh:
                    fh.write(rewrite(text))


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    source, extra = argv[0], argv[1:]
    with tempfile.TemporaryDirectory(prefix="theano_tests_") as dest:
        _copy_tests(source, dest)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, dest]))
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "tests/graph",
            "tests/link",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rfE",
            "--rootdir",
            dest,
            "-o",
            "addopts=",
            "--continue-on-collection-errors",
            *extra,
        ]
        proc = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True)
        out = proc.stdout + proc.stderr
        print(out)
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
