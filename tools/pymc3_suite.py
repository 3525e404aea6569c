"""Run PyMC3 3.11.6's own tests (``pymc3/tests``, shipped in its wheel) on theano-pymc
1.1.2 and on theano_dag through the ``theano`` import alias, and count the passes of each
(``make pymc3-suite``).

One venv holds both sides (``--python``, the project's ``.venv-pymc3``): PyMC3 and its
dependencies, theano_dag installed with its ``theano`` alias (``python -m theano_dag.compat
install-theano-alias``, the documented step), and theano-pymc installed apart, in
``--theano-pymc`` (``pip install --target``), off ``sys.path``. So the two sides run the
same files of the same packages and differ only in what ``import theano`` gives:

* ``theano``: ``--theano-pymc`` on ``PYTHONPATH``, and a ``sitecustomize`` that takes the
  alias's finder off ``sys.meta_path`` (the alias refuses to hide a real Theano);
* ``theano_dag``: the venv as it is, ``import theano`` giving theano_dag.

Every file of ``pymc3/tests`` runs in its own pytest process with a time limit, on a fixed
sample of its tests: at most ``--per-file`` of them, evenly spaced in the collected order
(every ``ceil(n / per_file)``-th), the same tests on both sides. A pytest plugin written
here picks them and logs each test's outcome as it ends, so a file stopped at its time
limit keeps the counts of the tests it finished. The result is one JSON line per file and
a total line in ``--out`` (``WORK/results.jsonl``), and ``--table`` prints the README's
table of them. ``--flags`` sets ``THEANO_FLAGS`` on both sides (``floatX=float32``): after
the compile directory and ``blas__ldflags`` the tool gives theano-pymc; theano_dag reads
``THEANO_FLAGS`` under the alias.

    python tools/pymc3_suite.py --python .venv-pymc3/bin/python \\
        --theano-pymc .venv-pymc3/theano-pymc --per-file 10
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from theano_suite import _side_row, count, load_side, run_group, summarise

ROOT = Path(__file__).resolve().parent.parent

PLUGIN = '''"""Written by tools/pymc3_suite.py: the sample of a file's tests, and their outcomes."""

import json
import math
import os

PER_FILE = int(os.environ["PYMC3_SUITE_PER_FILE"])
LOG = os.environ["PYMC3_SUITE_LOG"]


def _log(row):
    with open(LOG, "a") as f:
        f.write(json.dumps(row) + "\\n")


def pytest_collection_modifyitems(config, items):
    collected = len(items)
    step = max(1, math.ceil(collected / PER_FILE)) if PER_FILE > 0 else 1
    items[:] = [item for k, item in enumerate(items) if k % step == 0]
    _log({"collected": collected, "sampled": len(items)})


def pytest_runtest_logreport(report):
    # A later phase's outcome overrides an earlier one (a teardown error after a pass).
    if report.when == "call":
        outcome = "skipped" if report.skipped else "passed" if report.passed else "failure"
    elif report.failed:
        outcome = "error"
    elif report.skipped:
        outcome = "skipped"
    else:
        return
    _log({"test": report.nodeid, "outcome": outcome})


def pytest_collectreport(report):
    if report.failed:  # the file does not import: one error stands for it
        _log({"test": report.nodeid or "collection", "outcome": "error"})
'''

# Theano's side: the alias's finder off sys.meta_path, so that the real Theano imports.
SITECUSTOMIZE = '''"""Written by tools/pymc3_suite.py: theano-pymc's side, without the alias."""

import sys

sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "theano_dag_theano_alias", 0)]
'''

# A file that cannot run here at all, and why (each side would count it as errors only).
LEFT_OUT = {}


def site_packages(python: str) -> Path:
    """The directory holding ``pymc3`` in ``python``'s environment (without importing it)."""
    out = subprocess.run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('pymc3').origin)"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
    ).stdout.strip()
    return Path(out).parent.parent


def test_files(site: Path) -> list:
    """PyMC3's test files (relative to ``site``), ``LEFT_OUT`` left out."""
    files = sorted(p.relative_to(site).as_posix() for p in (site / "pymc3/tests").glob("test_*.py"))
    return [f for f in files if f not in LEFT_OUT]


def side_env(
    side: str,
    work: Path,
    theano_pymc: Path,
    per_file: int,
    compiledir: Path,
    theano_dag: Path | None = None,
) -> dict:
    """The environment of one side's pytest processes (``compiledir``: theano-pymc's;
    ``theano_dag``: a theano_dag source tree the theano_dag side imports instead of the
    venv's own install)."""
    env = dict(os.environ)
    paths = [str(work / "plugin")]
    if side == "theano_dag" and theano_dag is not None:
        # First on sys.path, ahead of the venv's (editable) install; the alias's .pth
        # finds theano_dag through sys.path, so it installs this tree's alias.
        paths.insert(0, str(theano_dag))
    if side == "theano":
        paths = [str(work / "theano-side"), str(theano_pymc), *paths]
        env["THEANO_FLAGS"] = f"base_compiledir={compiledir},blas__ldflags="
    else:
        env.pop("THEANO_FLAGS", None)  # theano_dag under the alias would read it
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYMC3_SUITE_PER_FILE"] = str(per_file)
    env.setdefault("MPLBACKEND", "Agg")
    return env


def run_file(
    python: str, site: Path, rel: str, env: dict, timeout: int, logs: Path, args=()
) -> dict:
    """Run the sample of one test file (``args``: more pytest arguments); its counts from
    the plugin's log."""
    log = logs / (rel.replace("/", "__") + ".jsonl")
    log.unlink(missing_ok=True)
    env = {**env, "PYMC3_SUITE_LOG": str(log)}
    cmd = [python, "-m", "pytest", rel, "-q", "-p", "no:cacheprovider", "-p", "pymc3_suite_plugin"]
    cmd += ["-c", os.devnull, f"--rootdir={site}", "-W", "ignore::DeprecationWarning", *args]
    status, out = run_group(cmd, site, env, timeout)
    tail = out[-400:]
    outcomes, sampled = {}, None
    if log.exists():
        for line in log.read_text().splitlines():
            row = json.loads(line)
            if "test" in row:
                outcomes[row["test"]] = row["outcome"]
            else:
                sampled = row.get("sampled")
    counts = count(outcomes)
    if status != "ran" and sampled is not None:
        counts["tests"] = sampled  # the tests it did not reach count as not passed
    tail = tail if not counts["passed"] else ""
    return {"file": rel, "status": status, **counts, "outcomes": outcomes, "tail": tail}


def run_side(side, python, site, files, env, timeout, jobs, logs, partial, pytest_args=None):
    """Run ``files`` on one side; each file's row goes to ``partial`` when counted.
    ``pytest_args(file)``: more pytest arguments for that file (default: none)."""
    lock = threading.Lock()
    logs.mkdir(parents=True, exist_ok=True)

    def one(f):
        r = run_file(python, site, f, env, timeout, logs, pytest_args(f) if pytest_args else ())
        with lock, open(partial, "a") as out:
            out.write(json.dumps({"file": f, side: _side_row(r, outcomes=True)}) + "\n")
            print(f"{side}: {f}: {r['passed']}/{r['tests']} {r['status']}", flush=True)
        return r

    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(one, files))
    return {r["file"]: {"side": side, **r} for r in results}


def table(results_path: Path, what: str = "PyMC3 test file", label=None) -> str:
    """The README's table (Markdown) of a results file: passed/run per file and side;
    ``label(file)``: a row's name (default: the file's name, as code)."""
    rows = [json.loads(line) for line in results_path.read_text().splitlines()]
    out = [f"| {what} | theano-pymc 1.1.2 | theano_dag (alias) |", "|---|---:|---:|"]
    label = label or (lambda f: f"`{f.split('/')[-1]}`")
    for row in rows:
        name = "**total**" if row["file"] == "TOTAL" else label(row["file"])
        cells = []
        for side in ("theano", "theano_dag"):
            c = row.get(side)
            cell = "not run" if c is None else f"{c['passed']} / {c['tests']}"
            if c is not None and c.get("status") == "not run":
                cell = "not run"
            elif c is not None and c.get("status", "ran") != "ran":
                cell += " (timed out)" if "timed out" in c["status"] else f" ({c['status']})"
            cells.append(f"**{cell}**" if row["file"] == "TOTAL" else cell)
        out.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return "\n".join(out)


def show_not_passing(files, results, what: str = "") -> None:
    """Print, per side, the tests of ``files`` that did not pass or skip (``what``: a
    prefix naming the suite)."""
    for side, res in results.items():
        print(f"\n{what}not passing on the {side} side:")
        for f in files:
            for test, outcome in res.get(f, {}).get("outcomes", {}).items():
                if outcome not in ("passed", "skipped"):
                    print(f"  {outcome.upper():<8} {test}")


def common_arguments(ap, venv: str, work: str, timeout: int) -> None:
    """The options both client suites (PyMC3's, Lasagne's) take, with their defaults."""
    # Absolute (its links kept: a venv's python is one): the tests run from another directory.
    ap.add_argument("--python", type=os.path.abspath, default=str(ROOT / venv / "bin" / "python"))
    ap.add_argument("--theano-pymc", type=Path, default=ROOT / venv / "theano-pymc")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / work)
    ap.add_argument("--timeout", type=int, default=timeout, help="seconds per file")
    ap.add_argument("--jobs", type=int, default=2, help="files run at once")
    ap.add_argument("--side", choices=["both", "theano", "theano_dag"], default="both")
    ap.add_argument(
        "--theano-dag",
        type=lambda p: Path(p).resolve(),
        default=None,
        help="a theano_dag source tree the theano_dag side imports (default: the venv's)",
    )
    ap.add_argument(
        "--reuse",
        type=Path,
        default=None,
        help="take the theano-pymc side's counts from this earlier results/partial file",
    )
    ap.add_argument("--out", type=Path, default=None, help="default: WORK/results.jsonl")
    ap.add_argument("--table", action="store_true", help="print the README's table at the end")
    ap.add_argument("--show", action="store_true", help="list the tests that do not pass")


def start_side(args, work: Path, side: str) -> tuple:
    """``(reused counts, partial file)`` of one side: the counts ``--reuse`` gives the
    theano-pymc side, written first to the partial file the run appends to."""
    reused = load_side(args.reuse, side) if args.reuse and side == "theano" else {}
    partial = work / f"partial-{side}.jsonl"
    partial.write_text(
        "".join(
            json.dumps({"file": f, side: _side_row(r, outcomes=True)}) + "\n"
            for f, r in reused.items()
        )
    )
    return reused, partial


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(ap, ".venv-pymc3", "pymc3-suite", 600)
    ap.add_argument(
        "--theano-compiledir", type=Path, default=None, help="default: WORK/theano-cache"
    )
    ap.add_argument("--per-file", type=int, default=10, help="tests run per file, at most")
    ap.add_argument("--files", nargs="*", help="test files, as pymc3/tests/test_x.py")
    ap.add_argument("--flags", default="", help="THEANO_FLAGS of both sides")
    args = ap.parse_args(argv)

    work = args.work.resolve()
    for sub, name, text in (
        ("plugin", "pymc3_suite_plugin.py", PLUGIN),
        ("theano-side", "sitecustomize.py", SITECUSTOMIZE),
    ):
        (work / sub).mkdir(parents=True, exist_ok=True)
        (work / sub / name).write_text(text)
    site = site_packages(args.python)
    files = args.files or test_files(site)
    wanted = ["theano", "theano_dag"] if args.side == "both" else [args.side]
    if args.reuse is not None and "theano" not in wanted:
        wanted.insert(0, "theano")
    results = {}
    for side in wanted:
        reused, partial = start_side(args, work, side)
        todo = [f for f in files if f not in reused]
        if side == "theano" and args.reuse is not None and args.side == "theano_dag":
            todo = []
        compiledir = args.theano_compiledir or work / "theano-cache"
        env = side_env(
            side, work, args.theano_pymc.resolve(), args.per_file, compiledir, args.theano_dag
        )
        if args.flags:
            env["THEANO_FLAGS"] = ",".join(filter(None, [env.get("THEANO_FLAGS"), args.flags]))
        ran = run_side(
            side,
            args.python,
            site,
            todo,
            env,
            args.timeout,
            args.jobs,
            work / "logs" / side,
            partial,
        )
        results[side] = {**reused, **ran}
    out = args.out or work / "results.jsonl"
    header = {"per_file": args.per_file, "pymc3": "3.11.6"}
    if args.flags:
        header["flags"] = args.flags
    summarise(files, results, out, header)
    if LEFT_OUT:
        print("\nleft out (files), and why:")
        for what, why in LEFT_OUT.items():
            print(f"  {what}: {why}")
    if args.show:
        show_not_passing(files, results)
    if args.table:
        print("\n" + table(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
