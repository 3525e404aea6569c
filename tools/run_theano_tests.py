"""Run theano-pymc 1.1.2's own graph and link tests against theano_dag.

The tests are taken from a Theano-PyMC checkout (tag ``rel-1.1.2``), copied to a
temporary folder with their imports changed (``tools/theano_names.py``: ``theano.X`` ->
the theano_dag module that holds Theano's names, else ``theano_dag.X``), and run with
pytest; the script prints pytest's summary, then the count per file and the tests left
out with their reasons.

    python tools/run_theano_tests.py /path/to/Theano-PyMC [pytest args...]

The path may be a git directory (``.../repo/.git``): the tests are then read from the
tag ``rel-1.1.2`` with ``git archive``. Only tests of Theano's C backend internals are
left out (``theano_names.LEFT_OUT`` and ``theano_names.DESELECTED`` say which and why).
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

from theano_names import DESELECTED, GRAPH_LINK_FILES, GRAPH_LINK_RUN, LEFT_OUT, rewrite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "rel-1.1.2"

__all__ = ["rewrite", "main"]

_RESULT = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+?)(?:::| |$)", re.M)


def _copy_tests(source: str, dest: str):
    if source.rstrip("/").endswith(".git"):
        archive = subprocess.run(
            ["git", "--git-dir", source, "archive", "--format=tar", TAG, *GRAPH_LINK_FILES],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "xf", "-", "-C", dest], input=archive, check=True)
    else:
        for f in GRAPH_LINK_FILES:
            src = os.path.join(source, f)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(dest, f))
            else:
                os.makedirs(os.path.dirname(os.path.join(dest, f)), exist_ok=True)
                shutil.copy(src, os.path.join(dest, f))
    for f in LEFT_OUT:
        path = os.path.join(dest, f)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    for folder, _dirs, names in os.walk(dest):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path) as fh:
                    text = fh.read()
                with open(path, "w") as fh:
                    fh.write(rewrite(text))


def per_file(report: str) -> dict:
    """``{file: Counter(outcome)}`` from pytest's ``-rA`` short summary.

    >>> dict(per_file("PASSED tests/a.py::t1\\nFAILED tests/a.py::t2 - boom\\n")["tests/a.py"])
    {'PASSED': 1, 'FAILED': 1}
    """
    counts: dict = collections.defaultdict(collections.Counter)
    for outcome, where in _RESULT.findall(report):
        counts[where.split("::")[0]][outcome] += 1
    return counts


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    source, extra = argv[0], argv[1:]
    with tempfile.TemporaryDirectory(prefix="theano_tests_") as dest:
        _copy_tests(source, dest)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, dest]))
        cmd = [sys.executable, "-m", "pytest", *GRAPH_LINK_RUN, "-p", "no:cacheprovider"]
        cmd += ["-q", "-rA", "--tb=no", "--rootdir", dest, "-o", "addopts="]
        cmd += ["--continue-on-collection-errors"]
        cmd += [f"--deselect={t}" for t in DESELECTED]
        proc = subprocess.run([*cmd, *extra], cwd=dest, env=env, capture_output=True, text=True)
        out = proc.stdout + proc.stderr
        print(out.rstrip().splitlines()[-1] if out.strip() else "(no output)")
        counts = per_file(out)
        total: collections.Counter = collections.Counter()
        print(f"\n{'file':<42} {'passed':>6} {'failed':>6} {'error':>6} {'other':>6}")
        for f in sorted(counts):
            c = counts[f]
            total.update(c)
            other = sum(c.values()) - c["PASSED"] - c["FAILED"] - c["ERROR"]
            print(f"{f:<42} {c['PASSED']:>6} {c['FAILED']:>6} {c['ERROR']:>6} {other:>6}")
        other = sum(total.values()) - total["PASSED"] - total["FAILED"] - total["ERROR"]
        print(
            f"{'total':<42} {total['PASSED']:>6} {total['FAILED']:>6} {total['ERROR']:>6} "
            f"{other:>6}"
        )
        print("\nleft out (Theano's C backend internals):")
        for what, why in {**LEFT_OUT, **DESELECTED}.items():
            print(f"  {what}: {why}")
        if "-v" in extra or "--verbose" in extra:
            print(out)
        else:
            print("\nnot passing:")
            for line in out.splitlines():
                if line.startswith(("FAILED", "ERROR")):
                    print(f"  {line}")
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
