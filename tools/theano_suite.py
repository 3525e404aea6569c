"""Run theano-pymc 1.1.2's own tests against theano_dag, imports changed, and against
theano-pymc itself, and count the passes of each (``make theano-suite``; with
``--selection graph-link``, Theano's graph and link tests, ``make theano-graph-tests``;
with ``--selection sparse``, Theano's tests/sparse, ``make theano-sparse-tests``; with
``--selection rest``, the rest of its CPU tests: nnet, signal, random, scan, scalar,
typed_list, misc and the top-level files, ``make theano-rest-tests``).

The tests come from a Theano-PyMC git repository (``--src``: a clone or its ``.git``
directory; ``--ref``, default ``rel-1.1.2``). Two copies are made under ``--work``:

* ``theano/``: the tests as they are, run by ``--theano-python`` (a venv with
  theano-pymc 1.1.2, the project's ``.venv-theano``);
* ``theano_dag/``: the same tests with their imports changed by ``tools/theano_names.py``
  (the one table of Theano's module names and theano_dag's), run by ``--dag-python``
  with this checkout first on ``sys.path``.

Both sides run the same selection (``theano_names.SELECTIONS``): the files of the
selection not in ``theano_names.LEFT_OUT`` (Theano's C-backend internals, MPI), every
``--every``-th test of each (the same tests on both sides: the selection is by position
in the collected order), tests marked ``slow`` skipped as Theano's own conftest does.
The single tests of ``theano_names.LEFT_ASIDE`` run like the others and are left out of
both sides' counts afterwards, so that leaving one aside changes neither which tests
run nor a count reused from an earlier run. ``tests/tensor/test_sharedvar.py`` imports
``theano.sparse`` and is counted (it fails to import on the theano_dag side).

Each file runs in its own pytest process with a time limit. The result is one JSON line
per file and a total line, in ``--out``, and both counts with their ratio on the
terminal. Each side also appends a file's row (its counts and each test's outcome) to
``WORK/partial-<side>.jsonl`` as soon as it is counted: theano-pymc compiles C for
minutes per file, and ``--reuse`` takes its counts from such a file instead of running
it again.

``--flags`` sets configuration flags on both sides (``floatX=float32``, as Theano's
``THEANO_FLAGS`` writes them): theano-pymc reads them in ``THEANO_FLAGS``, after the
tool's own ``base_compiledir`` and ``blas__ldflags``; theano_dag, which the rewritten
imports load without the ``theano`` alias and so reads only ``THEANO_DAG_FLAGS``, in
``THEANO_DAG_FLAGS``, after any the environment already sets (the later value of a flag
wins on both sides).

    python tools/theano_suite.py --src /path/to/Theano-PyMC --every 3
    python tools/theano_suite.py --src /path/to/Theano-PyMC --flags floatX=float32
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This checkout's table of module names (theano_dag.compat.theano_names), whichever
# theano_dag the running Python has installed: the tests are rewritten with the table of
# the theano_dag they run against.
sys.path.insert(0, str(ROOT))

from theano_names import (  # noqa: E402
    LEFT_ASIDE,
    LEFT_OUT,
    SELECTIONS,
    left_aside,
    left_out,
    rewrite,
)

CONFTEST = '''"""Written by tools/theano_suite.py: Theano's "slow" marker and the sampling."""

import os

import numpy as np
import pytest

EVERY = int(os.environ.get("THEANO_SUITE_EVERY", "1"))

if not hasattr(np, "find_common_type"):
    # Theano 1.1.2's test helpers call numpy 1's find_common_type, which numpy 2 removed
    # (theano-pymc's venv has numpy 1, theano_dag's may not): numpy 1's rule, for the
    # tests only: the scalar types count when their kind is above the arrays' kind.
    _KINDS = "buifc"

    def _find_common_type(array_types, scalar_types):
        arrays = np.result_type(*array_types) if len(array_types) else None
        scalars = np.result_type(*scalar_types) if len(scalar_types) else None
        if arrays is None or scalars is None:
            return arrays if scalars is None else scalars
        if _KINDS.find(scalars.kind) > _KINDS.find(arrays.kind):
            return np.result_type(scalars, arrays)
        return arrays

    np.find_common_type = _find_common_type

for _alias, _builtin in {
    "float": float, "int": int, "bool": bool, "object": object, "complex": complex
}.items():
    # numpy 1's aliases of the builtins (np.float...), which Theano's tests use and numpy
    # 1.24 removed.
    if _alias not in np.__dict__:
        setattr(np, _alias, _builtin)

for _old, _new in {"product": "prod", "cumproduct": "cumprod", "alltrue": "all"}.items():
    # numpy 1's aliases of prod, cumprod and all, which numpy 2 removed.
    if _old not in np.__dict__:
        setattr(np, _old, getattr(np, _new))

if not hasattr(np, "in1d"):
    # numpy 1's in1d (flattened membership), which numpy 2.4 removed for isin.
    def _in1d(ar1, ar2, assume_unique=False, invert=False):
        return np.isin(np.ravel(ar1), ar2, assume_unique=assume_unique, invert=invert)

    np.in1d = _in1d

if not hasattr(np, "cast"):
    # numpy 1's np.cast[dtype](x), which Theano's tests call and numpy 2 removed.
    class _Cast:
        def __getitem__(self, dtype):
            return lambda x: np.asarray(x).astype(dtype)

    np.cast = _Cast()

if not hasattr(np, "MAXDIMS"):
    # numpy 1's largest number of dimensions (32), which Theano's tests read and numpy 2
    # removed (its limit is 64).
    np.MAXDIMS = 64 if int(np.__version__.split(".")[0]) >= 2 else 32

try:
    import scipy.linalg as _linalg

    if not hasattr(_linalg, "kron"):
        # scipy.linalg.kron, which Theano's tests compare with and newer scipy removed:
        # its product (not numpy's kron beyond 2-D): the outer product, of shape
        # a.shape + b.shape, joined twice along axis 1.
        def _kron(a, b):
            outer = np.multiply.outer(np.asarray(a), np.asarray(b))
            return np.concatenate(np.concatenate(outer, axis=1), axis=1)

        _linalg.kron = _kron
except ImportError:
    pass


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a slow test (skipped, as Theano's conftest does)")


def pytest_collection_modifyitems(config, items):
    kept = [item for k, item in enumerate(items) if k % EVERY == 0]
    items[:] = kept
    for item in kept:
        if "slow" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="slow (Theano skips it without --runslow)"))
'''


def export_tests(src: Path, ref: str, dest: Path, paths=("tests",)) -> None:
    """The ``paths`` of ``ref`` (default: its ``tests`` tree; ``()``: all of it) in the
    repository ``src`` (a clone or a ``.git`` directory), written under ``dest``."""
    git_dir = src if (src / "HEAD").exists() and not (src / ".git").exists() else src / ".git"
    data = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", "--format=tar", ref, *paths],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


# Data files of Theano's package that its tests read from beside its modules (L'Ecuyer's
# MRG31k3p samples), and the path expression that reads each once the imports are
# rewritten: theano_dag's side reads the file exported from the same ref into its tree.
PACKAGE_DATA = {
    "theano/sandbox/samples_MRG31k3p_12_7_5.txt": (
        'os.path.split(theano_dag.__file__)[0], "sandbox", "samples_MRG31k3p_12_7_5.txt"'
    ),
}


def prepare(src: Path, ref: str, work: Path) -> dict:
    """The two copies of the tests (``theano`` and ``theano_dag``) under ``work``."""
    sides = {"theano": work / "theano", "theano_dag": work / "theano_dag"}
    for side, path in sides.items():
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        export_tests(src, ref, path)
        (path / "conftest.py").write_text(CONFTEST)
        if side == "theano_dag":
            export_tests(src, ref, path / "package-data", tuple(PACKAGE_DATA))
            for f in path.rglob("*.py"):
                text = rewrite(f.read_text())
                for data, expression in PACKAGE_DATA.items():
                    text = text.replace(expression, repr(str(path / "package-data" / data)))
                f.write_text(text)
    return sides


def select_files(tree: Path, selection: str = "suite") -> list:
    """The test files of ``selection`` under ``tree``, ``LEFT_OUT`` left out."""
    patterns = SELECTIONS[selection]["files"]
    files = sorted({p.relative_to(tree).as_posix() for pat in patterns for p in tree.glob(pat)})
    other = SELECTIONS[selection].get("except", ())
    return [f for f in files if not left_out(f) and f not in other]


def run_group(cmd: list, cwd, env: dict, timeout: int) -> tuple:
    """Run ``cmd`` in its own process group: ``("ran", its stdout)``, or, past ``timeout``
    seconds, the whole group killed and ``("timed out after ...", "")``. The group, not only
    the process, because a test that samples on several cores (PyMC3's) leaves its worker
    processes running when only pytest is killed."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, _err = proc.communicate(timeout=timeout)
        return "ran", out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return f"timed out after {timeout}s", ""


def run_file(python: str, tree: Path, rel: str, env: dict, timeout: int) -> dict:
    """Run one test file; the counts from its JUnit XML report."""
    report = tree / "reports" / (rel.replace("/", "__") + ".xml")
    report.parent.mkdir(exist_ok=True)
    cmd = [python, "-m", "pytest", rel, "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    # theano_dag's pytest settings (a rewrite that fails, or a deprecated name of ours
    # used, is an error) wherever --work is: pytest finds them by itself only in a work
    # tree under the checkout.
    cmd += ["-c", str(ROOT / "pyproject.toml")]
    cmd += [f"--junitxml={report}", f"--rootdir={tree}"]
    status, out = run_group(cmd, tree, env, timeout)
    tail = out[-400:]
    outcomes = {}
    if report.exists():
        root = ET.parse(report).getroot()
        for case in root.iter("testcase"):
            kinds = {child.tag for child in case}
            outcome = next((k for k in ("error", "failure", "skipped") if k in kinds), "passed")
            outcomes[node_id(rel, case.get("classname", ""), case.get("name", ""))] = outcome
        report.unlink()
    counts = count(outcomes)
    tail = tail if not counts["passed"] else ""
    return {"file": rel, "status": status, **counts, "outcomes": outcomes, "tail": tail}


def node_id(rel: str, classname: str, name: str) -> str:
    """pytest's id of a test from its JUnit ``classname`` and ``name``.

    >>> node_id("tests/a/test_b.py", "tests.a.test_b.TestC", "test_d[1]")
    'tests/a/test_b.py::TestC::test_d[1]'
    >>> node_id("tests/a/test_b.py", "tests.a.test_b", "test_e")
    'tests/a/test_b.py::test_e'
    """
    module = rel[: -len(".py")].replace("/", ".")
    classes = classname[len(module) :].strip(".") if classname.startswith(module) else ""
    return "::".join([rel, *filter(None, classes.split(".")), name])


_KIND = {"passed": "passed", "failure": "failed", "error": "errors", "skipped": "skipped"}


def count(outcomes: dict) -> dict:
    """The counts of a file's ``{test id: outcome}``, the tests of ``LEFT_ASIDE`` aside.

    >>> count({"tests/link/test_vm.py::test_c_thunks": "failure", "tests/a.py::t": "passed"})
    {'tests': 1, 'passed': 1, 'failed': 0, 'errors': 0, 'skipped': 0, 'left_aside': 1}
    """
    counts = dict.fromkeys(COUNTS, 0)
    counts["left_aside"] = 0
    for test, outcome in outcomes.items():
        if left_aside(test):
            counts["left_aside"] += 1
            continue
        counts["tests"] += 1
        counts[_KIND[outcome]] += 1
    return counts


def side_flags(side: str, env: dict, flags: str, cache: Path) -> dict:
    """The flag variables of one side's environment ``env`` (changed in place and returned),
    ``flags`` (``--flags``) last so that they win: theano-pymc's ``THEANO_FLAGS`` (its
    compile directory under ``cache`` and no BLAS unless the environment sets its own),
    theano_dag's ``THEANO_DAG_FLAGS`` (the tests import theano_dag without the alias, which
    warns of a ``THEANO_FLAGS`` it does not read).

    >>> side_flags("theano", {}, "floatX=float32", Path("/c"))
    {'THEANO_FLAGS': 'base_compiledir=/c,blas__ldflags=,floatX=float32'}
    >>> env = {"THEANO_FLAGS": "x=1", "THEANO_DAG_FLAGS": "opencl__platform=No"}
    >>> side_flags("theano_dag", env, "floatX=float32", Path("/c"))
    {'THEANO_DAG_FLAGS': 'opencl__platform=No,floatX=float32'}
    """
    if side == "theano":
        name = "THEANO_FLAGS"
        env.setdefault(name, f"base_compiledir={cache},blas__ldflags=")
    else:
        name = "THEANO_DAG_FLAGS"
        env.pop("THEANO_FLAGS", None)
    if flags:
        env[name] = ",".join(filter(None, [env.get(name, ""), flags]))
    return env


def run_side(side, python, tree, files, every, timeout, jobs, extra_path, partial=None, flags=""):
    """Run ``files`` on one side (``flags``: ``--flags``, see ``side_flags``); each file's
    row is appended to ``partial`` (a JSON-lines path) as soon as it is counted, so that a
    long run (theano-pymc compiles C for minutes per file) leaves its counts behind even
    when stopped, for ``--reuse``."""
    env = dict(os.environ)
    env["THEANO_SUITE_EVERY"] = str(every)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *extra_path])
    side_flags(side, env, flags, tree.parent / "theano-cache")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    lock = threading.Lock()

    def one(f):
        r = run_file(python, tree, f, env, timeout)
        if partial is not None:
            row = {"file": f, side: _side_row(r, outcomes=True)}
            with lock, open(partial, "a") as out:
                out.write(json.dumps(row) + "\n")
        return r

    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(one, files))
    return {r["file"]: {"side": side, **r} for r in results}


COUNTS = ("tests", "passed", "failed", "errors", "skipped", "left_aside")


def load_side(path: Path, side: str) -> dict:
    """The per-file counts of ``side`` in an earlier results or partial JSON-lines file."""
    rows = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("file") != "TOTAL" and side in row:
            r = {"side": side, "file": row["file"], "status": "ran", **row[side]}
            r["status"] = row[side].get("status", "ran")
            if "outcomes" in r:  # counted again: LEFT_ASIDE may have changed since
                r.update(count(r["outcomes"]))
                # A file stopped at its time limit counted the tests it did not reach as
                # run and not passed; they stay so.
                unreached = row[side].get("tests", 0) - len(r["outcomes"])
                if r["status"] != "ran" and unreached > 0:
                    r["tests"] += unreached
            rows[row["file"]] = r
    return rows


def _side_row(r: dict, outcomes: bool = False) -> dict:
    """One side's counts of one file as a results row holds them (its status when it did not
    run to the end; its tests' outcomes in the partial files)."""
    row = {k: r.get(k, 0) for k in COUNTS}
    if r.get("status", "ran") != "ran":
        row["status"] = r["status"]
    if outcomes and "outcomes" in r:
        row["outcomes"] = r["outcomes"]
    return row


def summarise(files, results, out, header) -> dict:
    """Write each file's counts per side and a total line (``header`` added to it) as JSON
    lines into ``out``, print them side by side, and return the total line. With both
    sides, the total holds the ratio of theano_dag's passes to theano-pymc's, and that
    ratio over the files both sides ran to the end (``both_ran``)."""
    not_run = dict.fromkeys(COUNTS, 0)
    lines = []
    for f in files:
        row = {"file": f}
        for side, res in results.items():
            r = res.get(f, {**not_run, "status": "not run"})
            row[side] = _side_row(r)
        lines.append(row)
    totals = {"file": "TOTAL", **header, "files": len(files)}
    for side in results:
        totals[side] = {k: sum(row[side][k] for row in lines) for k in COUNTS}
    if len(results) == 2 and totals["theano"]["passed"]:
        totals["ratio"] = round(totals["theano_dag"]["passed"] / totals["theano"]["passed"], 3)
        # The ratio over the files both sides ran (a reused theano-pymc run may lack some).
        both = [
            row
            for row in lines
            if "status" not in row["theano"] and "status" not in row["theano_dag"]
        ]
        pair = {side: sum(row[side]["passed"] for row in both) for side in results}
        totals["both_ran"] = {"files": len(both), **pair}
        if pair["theano"]:
            totals["both_ran"]["ratio"] = round(pair["theano_dag"] / pair["theano"], 3)
    lines.append(totals)
    out.write_text("".join(json.dumps(row) + "\n" for row in lines))
    for row in lines:
        cells = [f"{row['file']:<48}"]
        for side in results:
            c = row[side]
            cells.append(f"{side}: {c['passed']:>4}/{c['tests']:<4}")
        print("  ".join(cells))
    if "ratio" in totals:
        t, d = totals["theano"], totals["theano_dag"]
        print(f"theano-pymc: {t['passed']} passed of {t['tests']} run")
        print(f"theano_dag: {d['passed']} passed of {d['tests']} run")
        print(f"theano_dag passes {totals['ratio']:.1%} as often as theano-pymc ({out})")
        b = totals["both_ran"]
        if b["files"] < len(files):
            print(
                f"(theano-pymc was counted on {b['files']} of the {len(files)} files: the ratio "
                "above compares unequal selections; the one below, the same files)"
            )
        if "ratio" in b:
            print(
                f"on the {b['files']} files both sides ran: theano-pymc {b['theano']}, "
                f"theano_dag {b['theano_dag']} ({b['ratio']:.1%})"
            )
    return totals


def parser() -> argparse.ArgumentParser:
    """The command line's options."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True, type=Path, help="a Theano-PyMC clone or .git dir")
    ap.add_argument("--ref", default="rel-1.1.2")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "theano-suite")
    ap.add_argument("--selection", choices=sorted(SELECTIONS), default="suite")
    ap.add_argument(
        "--every",
        type=int,
        default=None,
        help="run every N-th test of each file "
        "(default: the selection's, 3 for suite, 1 for graph-link)",
    )
    ap.add_argument("--timeout", type=int, default=900, help="seconds per file")
    ap.add_argument("--jobs", type=int, default=2, help="files run at once")
    # (absolute: each file runs with its tree as the working directory)
    ap.add_argument(
        "--theano-python",
        type=os.path.abspath,
        default=str(ROOT / ".venv-theano" / "bin" / "python"),
    )
    ap.add_argument("--dag-python", type=os.path.abspath, default=sys.executable)
    ap.add_argument("--side", choices=["both", "theano", "theano_dag"], default="both")
    ap.add_argument("--files", nargs="*", help="test files (default: the selection)")
    ap.add_argument(
        "--reuse",
        type=Path,
        default=None,
        help="take the theano-pymc side's counts from this earlier results/partial file "
        "(its files are not run again; the others are)",
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="JSON lines (default: WORK/results.jsonl)"
    )
    ap.add_argument("--show", action="store_true", help="list the tests that do not pass, per side")
    ap.add_argument(
        "--flags",
        default="",
        help="flags of both sides, name=value,... (THEANO_FLAGS of theano-pymc, "
        "THEANO_DAG_FLAGS of theano_dag), e.g. floatX=float32",
    )
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.every is None:
        args.every = SELECTIONS[args.selection]["every"]

    # Absolute: each file runs with the tree as its working directory.
    args.work = args.work.resolve()
    sides = prepare(args.src, args.ref, args.work)
    files = args.files or select_files(sides["theano"], args.selection)
    pythons = {"theano": args.theano_python, "theano_dag": args.dag_python}
    extra = {"theano": [], "theano_dag": [str(ROOT)]}
    results = {}
    wanted = ["theano", "theano_dag"] if args.side == "both" else [args.side]
    if args.reuse is not None and "theano" not in wanted:
        wanted.insert(0, "theano")
    for side in wanted:
        reused = load_side(args.reuse, side) if args.reuse and side == "theano" else {}
        partial = args.work / f"partial-{side}.jsonl"
        partial.unlink(missing_ok=True)
        if reused:  # the partial file starts with them, so that it is whole again
            partial.write_text(
                "".join(
                    json.dumps({"file": f, side: _side_row(r, outcomes=True)}) + "\n"
                    for f, r in reused.items()
                )
            )
        todo = [f for f in files if f not in reused]
        if side == "theano" and args.reuse is not None and args.side == "theano_dag":
            todo = []  # only the reused counts: the files it lacks count as not run
        ran = run_side(
            side,
            pythons[side],
            sides[side],
            todo,
            args.every,
            args.timeout,
            args.jobs,
            extra[side],
            partial,
            args.flags,
        )
        results[side] = {**reused, **ran}
    out = args.out or args.work / "results.jsonl"
    header = {"every": args.every, "ref": args.ref}
    if args.flags:
        header["flags"] = args.flags
    summarise(files, results, out, header)
    print("\nleft out (files), and why:")
    for what, why in LEFT_OUT.items():
        print(f"  {what}: {why}")
    print("left aside (single tests, run and not counted on either side), and why:")
    for what, why in LEFT_ASIDE.items():
        print(f"  {what}: {why}")
    if args.show:
        for side, res in results.items():
            print(f"\nnot passing on the {side} side:")
            for f in files:
                for test, outcome in res.get(f, {}).get("outcomes", {}).items():
                    if outcome not in ("passed", "skipped") and not left_aside(test):
                        print(f"  {outcome.upper():<8} {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
