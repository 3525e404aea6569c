"""Run Theano's deep-learning tutorials (lisa-lab/DeepLearningTutorials' ``code/``) on
theano-pymc 1.1.2 and on theano_dag through the ``theano`` import alias, and compare what
every compiled function returns, call by call (``make tutorials-suite``).

The tutorials are the programs Theano taught with: logistic regression by SGD and by
scipy's conjugate gradient, the MLP, LeNet, denoising and contractive autoencoders,
stacked denoising autoencoders, the DBN and the RBM (CD-k and PCD-k Gibbs chains in
``scan``), hybrid Monte Carlo, the LSTM sentiment classifier and the Elman network for slot
filling. Each runs as its own ``code/test.py`` runs it (fewer epochs), in a fresh process
per side.

Nothing can be downloaded here, so the data files are stand-ins written in the formats
the tutorials read (``write_data``): MNIST's ``mnist.pkl.gz`` (1,200/600/600 sparse
random images, labels from a fixed linear map), IMDB's ``imdb.pkl`` (random word-index
sentences, a label from their words) and ATIS's ``atis.fold3.pkl.gz`` (random sentences,
slot labels from their words). They are written by theano-pymc's Python (numpy 1.23),
whose pickles both sides read. The tutorials' ``six`` and Pillow are installed apart
(``--extra``, on both sides' path).

A start-up hook wraps ``theano.function``: every call of every compiled function writes
one line (the function's number, the call's, and per output its dtype, shape, sum and sum
of absolute values). The tutorials' numpy draws are seeded, and their draws from Theano's
MRG streams are MRG31k3p's on both sides, so each computes the same numbers on both: their
lines are compared with a relative tolerance (``--rtol``; 1e-6, and 1e-4 under
``floatX=float32``). theano-pymc runs its C mode where it can,
and Python mode (``cxx=``) for the tutorials with ``scan``, whose C extension does not
compile on Python 3.11.

One JSON line per tutorial in ``--out`` (``WORK/results.jsonl``)::

    python tools/tutorials_suite.py --src /path/to/DeepLearningTutorials \\
        --theano-python .venv-theano/bin/python --dag-python .venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name -> (the call, whether it runs scan)
TUTORIALS = {
    "logistic_sgd": (
        "import logistic_sgd; logistic_sgd.sgd_optimization_mnist(n_epochs=10)",
        False,
    ),
    "logistic_cg": (
        "import logistic_cg; logistic_cg.cg_optimization_mnist(n_epochs=10)",
        False,
    ),
    "mlp": ("import mlp; mlp.test_mlp(n_epochs=2)", False),
    "convolutional_mlp": (
        "import convolutional_mlp; convolutional_mlp.evaluate_lenet5(n_epochs=2, nkerns=[5, 5])",
        False,
    ),
    "cA": ("import cA; cA.test_cA(training_epochs=1, output_folder='plots')", False),
    "dA": ("import dA; dA.test_dA(training_epochs=1, output_folder='plots')", False),
    "SdA": (
        "import SdA; SdA.test_SdA(pretraining_epochs=1, training_epochs=1, batch_size=300)",
        False,
    ),
    "DBN": (
        "import DBN; DBN.test_DBN(pretraining_epochs=1, training_epochs=1, batch_size=300)",
        False,  # its scan has one step: no loop
    ),
    "rbm": (
        "import rbm; rbm.test_rbm(training_epochs=1, batch_size=300, n_chains=1,"
        " n_samples=1, n_hidden=20, output_folder='plots')",
        True,
    ),
    "hmc": (
        "sys.path.insert(0, os.path.join(CODE, 'hmc')); import test_hmc; test_hmc.test_hmc()",
        True,
    ),
    "lstm": (
        "import lstm; lstm.train_lstm(max_epochs=1, test_size=200, saveto='', use_dropout=False,"
        " validFreq=20, dispFreq=5, n_words=2000)",
        True,
    ),
    "rnnslu": (
        "import rnnslu; rnnslu.PREFIX = DATA; rnnslu.main({'fold': 3, 'data': 'atis',"
        " 'lr': 0.0970806646812754, 'verbose': 1, 'decay': True, 'win': 7, 'nhidden': 50,"
        " 'seed': 345, 'emb_dimension': 20, 'nepochs': 1, 'savemodel': False})",
        True,
    ),
}

# The process each side runs: the tutorial's call, from a scratch directory.
RUNNER = """\
import os, sys, time
CODE, DATA = sys.argv[1], sys.argv[2]
sys.path.insert(0, CODE)
os.chdir(sys.argv[3])
t0 = time.perf_counter()
{call}
print("SECONDS %.2f" % (time.perf_counter() - t0))
"""

# The start-up hook of both sides: every call of a compiled function, one line.
HOOK = """\
import os
import numpy as np
{prelude}
import theano

_function = theano.function
_log = open(os.environ["TUTORIALS_CALLS"], "w")
_made = [0]


def _summary(v):
    a = np.asarray(v)
    if a.dtype.kind not in "fiub":
        return "%s%s" % (a.dtype, a.shape)
    w = a.astype("float64")
    return "%s%s s=%.12g a=%.12g" % (a.dtype, a.shape, w.sum(), np.abs(w).sum())


def function(*args, **kwargs):
    f = _function(*args, **kwargs)
    k, calls = _made[0], [0]
    _made[0] += 1

    def call(*a, **kw):
        out = f(*a, **kw)
        outs = out if isinstance(out, (list, tuple)) else [out]
        _log.write("f%d c%d %s\\n" % (k, calls[0], " | ".join(_summary(o) for o in outs)))
        _log.flush()
        calls[0] += 1
        return out

    return call


theano.function = function
"""

# theano-pymc 1.1.2 renamed Theano 1.0's MRG_RandomStreams; theano_dag's alias has both.
THEANO_PRELUDE = (
    "import theano.sandbox.rng_mrg as _mrg\n"
    "_mrg.MRG_RandomStreams = getattr(_mrg, 'MRG_RandomStreams', _mrg.MRG_RandomStream)"
)
DAG_PRELUDE = "import theano_dag.compat.alias as _alias\n_alias.install()"

_NUMBER = re.compile(r"[sa]=(\S+)")


def write_data(dest: Path, python: str) -> None:
    """The stand-in data files, pickled by ``python`` (numpy 1.23's pickles load on
    numpy 2; numpy 2's do not load on numpy 1.23)."""
    dest.mkdir(parents=True, exist_ok=True)
    script = f"""
import gzip, pickle, numpy as np
d = {str(dest)!r}
rng = np.random.RandomState(0)
W = rng.randn(784, 10)
def images(n):
    x = (rng.rand(n, 784) * (rng.rand(n, 784) < 0.2)).astype("float32")
    y = np.argmax(x @ W + 0.5 * rng.randn(n, 10), axis=1).astype("int64")
    return x, y
with gzip.open(d + "/mnist.pkl.gz", "wb") as f:
    pickle.dump((images(1200), images(600), images(600)), f, protocol=2)
def reviews(n):
    xs, ys = [], []
    for _ in range(n):
        x = rng.randint(2, 2000, size=rng.randint(5, 60))
        xs.append([int(v) for v in x]); ys.append(int((x % 7 == 0).sum() > len(x) / 7.0))
    return xs, ys
with open(d + "/imdb.pkl", "wb") as f:
    pickle.dump(reviews(800), f, protocol=2); pickle.dump(reviews(400), f, protocol=2)
labels = ["O", "B-city", "I-city", "B-date", "I-date", "B-time"]
def slots(ws):
    out, prev = [], 0
    for w in ws:
        cur = (1 if prev not in (1, 2) else 2) if w % 11 == 0 else (
            (3 if prev not in (3, 4) else 4) if w % 13 == 0 else (5 if w % 17 == 0 else 0))
        out.append(cur); prev = cur
    return np.array(out, dtype="int32")
def sentences(n):
    lex, ne, y = [], [], []
    for _ in range(n):
        ws = rng.randint(0, 300, size=rng.randint(3, 15)).astype("int32")
        lex.append(ws); ne.append(np.zeros(len(ws), dtype="int32")); y.append(slots(ws))
    return lex, ne, y
dicts = {{"words2idx": {{"w%d" % i: i for i in range(300)}},
         "labels2idx": {{l: i for i, l in enumerate(labels)}}}}
with gzip.open(d + "/atis.fold3.pkl.gz", "wb") as f:
    pickle.dump((sentences(150), sentences(40), sentences(40), dicts), f, protocol=2)
"""
    subprocess.run([python, "-c", script], check=True)


def prepare(src: Path, work: Path) -> Path:
    """A copy of the tutorials' ``code/`` under ``work`` (they write into their own
    folder), with its ``data/`` beside it, as the tutorials look for it."""
    dest = work / "tutorials"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if (src / "HEAD").exists() or src.name.endswith(".git"):
        clone = work / "clone"
        if not clone.exists():
            subprocess.run(
                ["git", "clone", "-q", "--no-checkout", str(src), str(clone)], check=True
            )
            subprocess.run(
                ["git", "-C", str(clone), "checkout", "-q", "HEAD", "--", "code"], check=True
            )
        src = clone
    shutil.copytree(src / "code", dest / "code")
    return dest


def _close(x: float, y: float, rtol: float) -> bool:
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y or abs(x - y) <= rtol * max(1.0, abs(x), abs(y))


def compare(theano_lines: list, dag_lines: list, rtol: float):
    """``(differing lines, the first difference)``: each line's text without its numbers
    equal, and its numbers within ``rtol`` (relative to at least 1)."""
    differ, first = 0, None
    for a, b in zip(theano_lines, dag_lines):
        same = _NUMBER.sub("", a) == _NUMBER.sub("", b)
        if same:
            for p, q in zip(_NUMBER.findall(a), _NUMBER.findall(b)):
                same = same and _close(float(p), float(q), rtol)
        if not same:
            differ += 1
            first = first or {"theano": a, "theano_dag": b}
    if len(theano_lines) != len(dag_lines):
        differ += abs(len(theano_lines) - len(dag_lines))
    return differ, first


def run_side(side, python, name, work, extra, flags, timeout):
    """Run one tutorial on one side: its exit status, seconds, lines and log's tail."""
    call, uses_scan = TUTORIALS[name]
    side_dir = work / side
    site = side_dir / "site"
    site.mkdir(parents=True, exist_ok=True)
    prelude = THEANO_PRELUDE if side == "theano" else DAG_PRELUDE
    (site / "sitecustomize.py").write_text(HOOK.format(prelude=prelude))
    runner = side_dir / "run_tutorial.py"
    run_dir = side_dir / name
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    calls = side_dir / f"{name}.calls"
    env = dict(os.environ, TUTORIALS_CALLS=str(calls))
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(extra)])
    if side == "theano":
        theano_flags = [f"base_compiledir={work / 'theano-cache'}", "blas__ldflags="]
        if uses_scan:
            theano_flags.append("cxx=")
        env["THEANO_FLAGS"] = ",".join(theano_flags + ([flags] if flags else []))
    else:
        env["THEANO_DAG_FLAGS"] = flags
    code = work / "tutorials" / "code"
    data = work / "tutorials" / "data"
    runner.write_text(RUNNER.format(call=call))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [python, str(runner), str(code), str(data), str(run_dir)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        rc, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", (e.stdout or b"").decode(errors="replace")
    seconds = round(time.perf_counter() - t0, 1)
    lines = calls.read_text().splitlines() if calls.exists() else []
    return {"rc": rc, "seconds": seconds, "calls": len(lines), "tail": out[-600:]}, lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--src", type=Path, required=True, help="DeepLearningTutorials checkout or .git"
    )
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "tutorials-suite")
    ap.add_argument("--theano-python", default=str(ROOT / ".venv-theano" / "bin" / "python"))
    ap.add_argument("--dag-python", default=sys.executable)
    ap.add_argument("--tutorials", nargs="*", default=list(TUTORIALS))
    ap.add_argument("--flags", default="", help="THEANO_FLAGS of both sides (floatX=float32)")
    ap.add_argument("--rtol", type=float, default=None)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per tutorial and side")
    ap.add_argument("--extra", type=Path, default=None, help="six and Pillow (installed here)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    unknown = sorted(set(args.tutorials) - set(TUTORIALS))
    if unknown:
        ap.error(f"unknown tutorials {unknown}; known: {sorted(TUTORIALS)}")
    rtol = args.rtol or (1e-4 if "float32" in args.flags else 1e-6)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    root = prepare(args.src.resolve(), work)
    write_data(root / "data", args.theano_python)
    extra = (args.extra or work / "extra").resolve()
    if not (extra / "six.py").exists():
        subprocess.run(
            [
                args.dag_python,
                "-m",
                "pip",
                "install",
                "-q",
                "--target",
                str(extra),
                "six",
                "pillow",
            ],
            check=True,
        )
    out_path = args.out or work / "results.jsonl"
    failures = 0
    with open(out_path, "w") as out:
        for name in args.tutorials:
            row = {"tutorial": name}
            lines = {}
            for side, python in (("theano", args.theano_python), ("theano_dag", args.dag_python)):
                row[side], lines[side] = run_side(
                    side, python, name, work, extra, args.flags, args.timeout
                )
            row["differ"], row["first_difference"] = compare(
                lines["theano"], lines["theano_dag"], rtol
            )
            ok = row["theano_dag"]["rc"] == 0 and (row["differ"] == 0 or row["theano"]["rc"] != 0)
            failures += not ok
            for side in ("theano", "theano_dag"):
                if row[side]["rc"] == 0:
                    row[side].pop("tail")
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(
                f"{name:18} theano rc={row['theano']['rc']} calls={row['theano']['calls']:4} "
                f"{row['theano']['seconds']:7.1f}s | theano_dag rc={row['theano_dag']['rc']} "
                f"calls={row['theano_dag']['calls']:4} {row['theano_dag']['seconds']:7.1f}s"
                + f" | differ {row['differ']}"
            )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
