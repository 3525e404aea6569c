"""The fuzzer's graphs run on theano-pymc: where Theano 1.1.2 and theano_dag disagree.

``theano_dag.testing.fuzz`` checks every engine of theano_dag against numpy's values of
its random graphs. This tool runs the same graphs on the real Theano (its Python linker,
FAST_RUN rewrites), through the fuzzer's stand-alone reproducers with Theano's imports,
so that a difference of semantics (a dtype rule, a rewrite, an op's edge case) shows up
as a graph where Theano's value is not numpy's, while theano_dag's is (the fuzzer's own
runs say so). Each graph gets one of:

- ``agree``: Theano's outputs are numpy's (values, dtypes, shapes);
- ``differs``: Theano's differ; the reproducer is kept in ``--work`` to read;
- ``theano refuses``: Theano raises while building or compiling the graph (bitwise logic
  on mixed bool and integers, arithmetic negation of booleans: numpy refuses some too);
- ``theano raises``: Theano raises at the call (a float out of an integer's range cast,
  an integer division by zero).

What the differences were when this was written (seed 8, 2,000 graphs: 1,821 agree, 103
differ, 76 refused or raised): casts of floats out of the integer's range (undefined in
C; theano_dag has one rule), Theano's rewrites that assume finite values (``x // 1 -> x``
on floats, ``neq(x, x) -> False``, ``le(x, x) -> True``, which NaN breaks), ``clip`` with
``lo > hi`` and the remainder of booleans (docs/migrating.md, "Other differences"), and
Theano's fused loops in Python mode computing on Python's numbers (``~True`` is -2, an
``int32`` square or a negated ``uint64`` does not wrap as numpy's does).
None was a graph where theano_dag's value was the wrong one.

With the wider vocabulary of session 46 (seed 2, 1,000 graphs: 916 agree, 26 differ, 58
refused or raised), besides the above: Theano's ``softmax``/``logsoftmax`` of a vector
is a ``(1, n)`` row, its ``sqr`` of booleans is bool (numpy's and ours: int8), its
``x / x`` is 1 where ``x`` is NaN or infinite (a rewrite); it refuses ``round``,
``iround`` and ``sgn`` of integers or booleans and a ``sum`` whose ``acc_dtype`` is
narrower than the input, and its Python loops raise on ``(-2.0) ** 0.5`` (a complex
Python number). docs/migrating.md lists the differences.

Run: ``python tools/theano_fuzz.py .venv-theano/bin/python --n 500 --seed 1``
(``make theano-fuzz``); one line per graph that is not ``agree``, then the counts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from theano_dag.testing import fuzz

ROOT = Path(__file__).resolve().parent.parent

THEANO_IMPORTS = (
    "import theano\n"
    "import theano.tensor as tt\n"
    "from theano import config, function, shared\n"
    "from theano.compile.mode import Mode\n"
    "from theano.gradient import grad"
)

# Runs every reproducer of a folder in one Theano process (imports once), one JSON line
# each: its exit status, or the exception it raised and where (building or calling).
RUNNER = r"""
import contextlib, glob, io, json, logging, sys, warnings
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
import theano
for path in sorted(glob.glob(sys.argv[1] + "/g*.py")):
    out, res = io.StringIO(), {"file": path}
    ns = {"__name__": "__main__"}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(open(path).read(), path, "exec"), ns)
        res["rc"] = 0
    except SystemExit as e:
        res["rc"] = e.code
    except BaseException as e:
        res["rc"] = "raises" if "f" in ns else "refuses"
        res["error"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"[:200]
    res["out"] = out.getvalue()[-2000:]
    print(json.dumps(res), flush=True)
"""


def theano_script(text: str) -> str:
    """A fuzz reproducer (``fuzz.reproducer(rec, "py")``) rewritten for Theano 1.1.2: its
    imports, ``TensorType(dtype, shape=...)`` as ``broadcastable=...``, ``sigmoid`` from
    ``tensor.nnet``, and the Python linker with FAST_RUN's rewrites.

    >>> theano_script("v0 = tt.TensorType('int8', shape=(1, None))('v0')")
    "v0 = tt.TensorType('int8', broadcastable=(True, False))('v0')"
    """
    first, last = "import theano_dag.tensor as tt", "from theano_dag.gradient import grad"
    if first in text:
        a, b = text.index(first), text.index(last) + len(last)
        text = text[:a] + THEANO_IMPORTS + text[b:]

    def broadcastable(m):
        dims = [d.strip() for d in m.group(2).strip("()").split(",") if d.strip()]
        return f"tt.TensorType({m.group(1)}, broadcastable={tuple(d == '1' for d in dims)!r})"

    text = re.sub(r"tt\.TensorType\(('\w+'), shape=(\([^)]*\))\)", broadcastable, text)
    text = text.replace("tt.sigmoid(", "tt.nnet.sigmoid(")
    return text.replace(
        'Mode(linker="py", optimizer=None)', 'Mode(linker="py", optimizer="fast_run")'
    )


def classify(res: dict) -> str:
    """``agree``, ``differs``, ``theano refuses`` or ``theano raises``."""
    rc = res["rc"]
    if rc == 0:
        return "agree"
    if rc in ("refuses", "raises"):
        return f"theano {rc}"
    return "differs"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("theano_python", help="a Python with theano-pymc 1.1.2 (make venv-theano)")
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "theano-fuzz")
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    for old in a.work.glob("g*.py"):
        old.unlink()
    for k in range(a.start, a.start + a.n):
        rec = fuzz.generate(np.random.default_rng([a.seed, k]))
        (a.work / f"g{k:06d}.py").write_text(theano_script(fuzz.reproducer(rec, "py")))
    env = {k: v for k, v in os.environ.items() if k != "THEANO_DAG_FLAGS"}
    # Theano's C compiler is not needed (the Python linker) and its BLAS probe fails on
    # numpy builds without numpy.distutils' BLAS info: both off.
    env["THEANO_FLAGS"] = f"cxx=,blas__ldflags=,base_compiledir={a.work / 'compiledir'}"
    proc = subprocess.run(
        [a.theano_python, "-c", RUNNER, str(a.work)], capture_output=True, text=True, env=env
    )
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if len(results) != a.n:
        print(proc.stderr[-3000:], file=sys.stderr)
        print(f"theano_fuzz: {len(results)} of {a.n} graphs ran", file=sys.stderr)
        return 2
    counts = Counter()
    for res in results:
        kind = classify(res)
        counts[kind] += 1
        if kind == "agree":
            Path(res["file"]).unlink()
            continue
        first = next((x for x in res["out"].splitlines() if "differ" in x or "dtype" in x), "")
        print(f"{kind:15} {res['file']}  {res.get('error') or first.strip()}")
    print(json.dumps({"seed": a.seed, "start": a.start, "n": a.n, **counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
