"""Run the examples of Theano 1.1.2's documentation on theano-pymc 1.1.2 and on theano_dag
through the ``theano`` import alias, and compare them example by example (``make
theano-docs``).

Theano's documentation (``doc/*.txt`` of theano-pymc's repository at ``--ref``,
``rel-1.1.2``) is full of examples with their output: ``>>>`` blocks, and ``testcode``
with ``testoutput`` blocks. Theano checked them with Sphinx's doctest builder
(``doc/scripts/docgen.py --test``); so does this tool, on each side, in the Lasagne
venv (``make venv-lasagne``: numpy 1.23, theano_dag with its alias, theano-pymc apart
in ``--theano-pymc``). Sphinx is installed here with ``pip install --target`` under
``WORK/sphinx``. The configuration (``CONF``) is the doctest builder alone, with numpy's
printing of Theano's time (``legacy='1.13'``: ``array(4.0)``, as the examples print), so
that neither side fails an example for numpy's newer spelling of the same numbers.
theano-pymc runs its C mode.

Each side's Sphinx writes ``output.txt``: the count of examples per document and every
failing one (its file, line, group, source, and what was expected and got). The result
is one JSON line per document in ``WORK/results.jsonl`` (examples, and failures on each
side), a total line, and ``--show`` lists the examples that fail on theano_dag only, with
the last line of what each side got.

    python tools/theano_docs.py --src /path/to/Theano-PyMC --show
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from client_suites import install_packages
from pymc3_suite import SITECUSTOMIZE, side_env
from theano_suite import export_tests

ROOT = Path(__file__).resolve().parent.parent

SPHINX = ("sphinx>=7.2,<8",)

# Sphinx's doctest builder over Theano's .txt sources; images, scripts and proposals hold
# no examples (Theano's own conf left them out too).
CONF = """\
extensions = ["sphinx.ext.doctest"]
source_suffix = {".txt": "restructuredtext"}
master_doc = "index"
exclude_patterns = ["images", "scripts", "proposals"]
doctest_global_setup = "import numpy as _np; _np.set_printoptions(legacy='1.13')"
"""

_DOCUMENT = re.compile(
    r"^Document: (\S+)\n-+\n(.*?)(?=^Document: |^Doctest summary|\Z)", re.M | re.S
)
_COUNT = re.compile(r"^(\d+) tests? in \d+ items?\.$", re.M)
_SETUP_FAILED = re.compile(r"^(\d+) failures? in setup code", re.M)
_FAILURE = re.compile(
    r'^File "([^"]+)", line (\d+), in (\S+)\nFailed example:\n(.*?)(?=^\*{20,}|\Z)', re.M | re.S
)
_EXCEPTION = re.compile(r"^\s+([\w.]+(?:Error|Exception|Warning|Exit)\b.*)$", re.M)


def parse_output(text: str) -> dict:
    """The doctest builder's ``output.txt``, per document: its number of examples and its
    failing ones, ``{"tests": n, "failures": {"file:line:group": what}}``; ``what`` is the
    last exception line of the failure, or ``"output differs"``.

    >>> text = (
    ...     "Document: a\\n-----------\\n"
    ...     "*" * 30 + '\\nFile "a.txt", line 3, in default\\nFailed example:\\n'
    ...     "    f(1)\\nException raised:\\n    Traceback (most recent call last):\\n"
    ...     "    TypeError: bad\\n" + "*" * 30 + "\\n1 tests in 1 items.\\n"
    ... )
    >>> parse_output(text)
    {'a': {'tests': 1, 'failures': {'a.txt:3:default': 'TypeError: bad'}}}
    """
    out = {}
    for doc, body in _DOCUMENT.findall(text):
        tests = sum(int(n) for n in _COUNT.findall(body))
        failures = {}
        for path, line, group, block in _FAILURE.findall(body):
            if "\nExpected:" in block and "Exception raised:" not in block:
                what = "output differs"
            else:
                raised = _EXCEPTION.findall(block)
                what = raised[-1].strip() if raised else "failed"
            failures[f"{path}:{line}:{group}"] = what[:200]
        setup = sum(int(n) for n in _SETUP_FAILED.findall(body))
        if setup:
            failures[f"{doc}:setup"] = f"{setup} failure(s) in setup code"
        out[doc] = {"tests": tests, "failures": failures}
    return out


def compare(sides: dict) -> list:
    """One row per document of ``sides`` (side -> ``parse_output``'s result): its examples,
    each side's failures, and the failures of theano_dag alone."""
    rows = []
    for doc in sorted(set().union(*sides.values())):
        got = {
            side: result.get(doc, {"tests": 0, "failures": {}}) for side, result in sides.items()
        }
        row = {"document": doc, "tests": max(g["tests"] for g in got.values())}
        for side, g in got.items():
            row[f"{side}_failed"] = len(g["failures"])
        if {"theano", "theano_dag"} <= set(got):
            theirs = got["theano"]["failures"]
            row["theano_dag_only"] = {
                k: v for k, v in got["theano_dag"]["failures"].items() if k not in theirs
            }
        rows.append(row)
    return rows


def run_side(python: str, doc: Path, conf: Path, out: Path, env: dict, timeout: int) -> str:
    """Sphinx's doctest builder over ``doc`` in ``env``; the text of its ``output.txt``."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [python, "-m", "sphinx", "-b", "doctest", "-q", "-E", "-c", str(conf), str(doc), str(out)]
    log = out.with_suffix(".log")
    with open(log, "w") as f:
        subprocess.run(cmd, cwd=doc, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
    report = out / "output.txt"
    if not report.exists():
        raise RuntimeError(f"Sphinx wrote no {report}; see {log}")
    return report.read_text()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=ROOT / "build" / "Theano-PyMC")
    ap.add_argument("--ref", default="rel-1.1.2")
    venv = ROOT / ".venv-lasagne"
    ap.add_argument("--python", type=os.path.abspath, default=str(venv / "bin" / "python"))
    ap.add_argument("--theano-pymc", type=Path, default=venv / "theano-pymc")
    ap.add_argument("--theano-dag", type=lambda p: Path(p).resolve(), default=None)
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "theano-docs")
    ap.add_argument("--side", choices=["both", "theano", "theano_dag"], default="both")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per side")
    ap.add_argument("--show", action="store_true", help="list theano_dag's own failures")
    args = ap.parse_args(argv)

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    install_packages(args.python, work / "sphinx", SPHINX, deps=True)
    shutil.rmtree(work / "theano", ignore_errors=True)
    export_tests(args.src.resolve(), args.ref, work / "theano", ("doc",))
    (work / "conf").mkdir(exist_ok=True)
    (work / "conf" / "conf.py").write_text(CONF)
    (work / "theano-side").mkdir(exist_ok=True)
    (work / "theano-side" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    sides = {}
    for side in ["theano", "theano_dag"] if args.side == "both" else [args.side]:
        tp, cache = args.theano_pymc.resolve(), work / "theano-cache"
        env = side_env(side, work, tp, 0, cache, args.theano_dag)
        env["PYTHONPATH"] += os.pathsep + str(work / "sphinx")
        text = run_side(
            args.python, work / "theano" / "doc", work / "conf", work / f"out-{side}", env,
            args.timeout,
        )  # fmt: skip
        sides[side] = parse_output(text)
    rows = compare(sides)
    total = {"document": "total", "tests": sum(r["tests"] for r in rows)}
    for side in sides:
        total[f"{side}_failed"] = sum(r[f"{side}_failed"] for r in rows)
    if len(sides) == 2:
        total["theano_dag_only"] = sum(len(r["theano_dag_only"]) for r in rows)
    with open(work / "results.jsonl", "w") as f:
        for row in [*rows, total]:
            f.write(json.dumps(row) + "\n")
    print(json.dumps(total))
    if args.show and len(sides) == 2:
        for row in rows:
            for where, what in row["theano_dag_only"].items():
                print(f"{where}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
