"""Run every benchmark in ``benchmarks/`` and collect their JSON lines into one file.

Each ``benchmarks/*.py`` script (except this one and ``plot_results.py``) runs in its
own subprocess (a fresh interpreter: no state leaks from one benchmark into the next)
with a wall-clock timeout. Every line a script prints that parses as a JSON object
is kept, tagged with ``"script"``; a script that exits non-zero or times out is
recorded too (``"error"``, the exit status and the tail of its stderr), with the
lines it printed before it stopped. The first line of the output file describes
the machine: CPU model, cores, Python, numpy, the peers' versions, the C compiler,
the git commit and the date.

Output: ``benchmarks/results/latest.jsonl`` (``--out`` to change). Then
``benchmarks/plot_results.py`` turns it into ``docs/performance.png`` and the tables
of ``docs/performance.md``; ``make bench`` runs both.

Run: ``.venv/bin/python benchmarks/run_all.py [--only mlp_training call_overhead]
[--skip first_result] [--timeout 1800] [--quick] [--args NAME='ARGS' ...]``.
``--quick`` passes smaller sizes to the scripts that take them (a smoke run, not
figures to publish); ``--args`` gives one script its own arguments.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXCLUDED = {"run_all.py", "plot_results.py"}
DEFAULT_OUT = HERE / "results" / "latest.jsonl"
PEERS = ("pytensor", "jax", "jaxlib", "numba", "pyopencl", "matplotlib", "torch")

# Smaller workloads for a smoke run. A script that no longer accepts these arguments
# (argparse exits with status 2) is run again with none.
QUICK_ARGS = {
    "call_overhead": ["--number", "2000", "--repeats", "3"],
    "conv": ["--repeats", "3", "--dtypes", "float32"],
    "conv3d": ["--repeats", "3", "--dtypes", "float32"],
    "compile_time": ["--sizes", "1000,10000", "--mlp-layers", "50"],
    "dask_engine": ["--n", "4000000", "--repeats", "3"],
    "fft": ["--number", "5", "--repeats", "3"],
    "first_result": ["--sizes", "1000", "--chain", "1000", "--timeout", "120"],
    "fused_elementwise": ["--n", "1000000", "--rounds", "5"],
    "graph_core": ["--sizes", "1000,10000"],
    "loops": ["--steps", "1000", "--repeats", "3", "--hidden", "128", "--lstm-steps", "20"],
    "memory_peak": ["--repeats", "1"],
    "mlp_training": ["--steps", "10", "--repeats", "3"],
    "opencl": ["--runs", "3", "--size", "1000000"],
    "networks": ["--quick"],
    "small_graphs": ["--number", "200", "--repeats", "3"],
    "sparse": ["--quick"],
    "pymc3": ["--repeats", "1", "--tune", "100", "--draws", "100", "--calls", "200"],
}
# Scripts that need longer than --timeout: the networks at 299x299 through numpy eager,
# 30 calls per engine and case, each engine compiling in its own process; the sparse
# products and GCN steps at 10^7 stored entries, with a child process per engine and case
# for the peak memory (25 minutes on 2 shared cores).
TIMEOUTS = {"networks": 6 * 3600, "sparse": 3600}


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0] if out.returncode == 0 and lines else None


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info():
    """What the figures were measured on, as one JSON-able dict."""
    import numpy as np

    return {
        "machine": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "arch": platform.machine(),
            "os": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "peers": {p: _version(p) for p in PEERS},
            "cc": _first_line([os.environ.get("CC", "cc"), "--version"]),
            "git_commit": _first_line(["git", "rev-parse", "--short", "HEAD"]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    }


def discover(only=None, skip=()):
    """The benchmark scripts to run, by name (file stem), in alphabetical order."""
    # Files starting with "_" are helpers the scripts import, not benchmarks.
    names = sorted(
        p.stem for p in HERE.glob("*.py") if p.name not in EXCLUDED and not p.name.startswith("_")
    )
    unknown = [n for n in list(only or []) + list(skip) if n not in names]
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; available: {names}")
    return [n for n in names if (not only or n in only) and n not in skip]


def _json_lines(text):
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def run_script(name, args, timeout):
    """Run one script; return (rows, failure-or-None, seconds)."""
    cmd = [sys.executable, str(HERE / f"{name}.py"), *args]
    t0 = time.perf_counter()
    # Its own session, so that a timeout also ends the processes the script started.
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        failure = None if proc.returncode == 0 else f"exit status {proc.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        failure = f"timed out after {timeout} s"
    seconds = time.perf_counter() - t0
    rows = _json_lines(out or "")
    if failure:
        failure = {
            "error": failure,
            "returncode": proc.returncode,
            "stderr_tail": (err or "")[-2000:],
        }
    return rows, failure, seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", help="run only these benchmarks (file stems)")
    ap.add_argument("--skip", nargs="+", default=[], help="benchmarks to leave out")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per script")
    ap.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    ap.add_argument(
        "--args",
        nargs="+",
        default=[],
        metavar="NAME=ARGS",
        help="arguments for one script, e.g. compile_time='--sizes 1000,10000'",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--strict", action="store_true", help="exit 1 when a script fails (else it is recorded)"
    )
    args = ap.parse_args(argv)
    names = discover(args.only, args.skip)
    given = {}
    for item in args.args:
        name, sep, text = item.partition("=")
        if not sep or name not in names:
            raise SystemExit(f"--args expects NAME=ARGS with NAME one of {names}, got {item!r}")
        given[name] = shlex.split(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".partial")
    failures = 0
    with open(tmp, "w") as fh:
        fh.write(json.dumps(machine_info()) + "\n")
        for name in names:
            extra = given.get(name, QUICK_ARGS.get(name, []) if args.quick else [])
            print(f"[run_all] {name} {' '.join(extra)}".rstrip(), file=sys.stderr, flush=True)
            timeout = max(args.timeout, TIMEOUTS.get(name, 0))
            rows, failure, seconds = run_script(name, extra, timeout)
            if failure and extra and failure["returncode"] == 2 and not rows:
                rows, failure, seconds = run_script(name, [], timeout)
            for row in rows:
                fh.write(json.dumps({"script": name, **row}) + "\n")
                print(json.dumps(row), flush=True)
            if failure:
                failures += 1
                fh.write(json.dumps({"script": name, **failure}) + "\n")
                print(f"[run_all] {name} FAILED: {failure['error']}", file=sys.stderr)
            summary = {"script": name, "seconds": round(seconds, 1), "rows": len(rows)}
            fh.write(json.dumps({**summary, "status": "failed" if failure else "ok"}) + "\n")
            fh.flush()
    # Replace the previous results only once this run is complete.
    os.replace(tmp, args.out)
    print(f"[run_all] {len(names)} scripts, {failures} failed -> {args.out}", file=sys.stderr)
    return 1 if failures and args.strict else 0


if __name__ == "__main__":
    raise SystemExit(main())
