"""Run Lasagne's own tests (``lasagne/tests``, every file, every test) on theano-pymc
1.1.2 in Python mode and on theano_dag through the ``theano`` import alias, and count the
passes of each (``make lasagne-suite``).

Lasagne (``--lasagne``: a checkout of Lasagne/Lasagne) is written for Theano 1.0. The
Theano 1.0 names it uses that theano-pymc 1.1 renamed or dropped (``LASAGNE_NAMES``:
``theano.gof``, ``theano.scan_module``, ``theano.Variable``, ``MRG_RandomStreams``...)
are given on theano-pymc's side by a start-up shim written here, each pointing at its
theano-pymc 1.1.2 name; theano_dag's side runs Lasagne as it is, its alias giving those
names itself. The venv
(``--python``) holds both, as ``tools/pymc3_suite.py`` sets them up: theano_dag with its
alias, and theano-pymc installed apart (``--theano-pymc``, ``pip install --target``).
theano-pymc runs with ``cxx=`` (Python mode): its C mode cannot compile ``scan`` on
Python 3.11 here.

The tests run as Lasagne's own CI ran them (``py.test --runslow`` with its setup.cfg's
``--doctest-modules lasagne/``): every test file with ``--runslow``, so its two examples
run (``examples/mnist.py`` on the stand-in MNIST files ``write_mnist`` makes, as nothing
can be downloaded here), and the docstring examples of Lasagne's modules as one more entry,
``DOCTESTS``. ``--flags`` sets ``THEANO_FLAGS`` on both sides (``floatX=float32``,
``mode=FAST_COMPILE``...).

Each entry runs in its own pytest process with a time limit; the result is one JSON line
per entry and a total line in ``--out`` (``WORK/results.jsonl``), and ``--table`` prints
the README's table.

    python tools/lasagne_suite.py --python /path/to/venv/bin/python \\
        --theano-pymc /path/to/venv/theano-pymc --lasagne /path/to/Lasagne --table
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
from pathlib import Path

import numpy as np
from pymc3_suite import (
    PLUGIN,
    SITECUSTOMIZE,
    common_arguments,
    run_side,
    show_not_passing,
    side_env,
    start_side,
    table,
)
from theano_suite import summarise

ROOT = Path(__file__).resolve().parent.parent

# Lasagne's Theano 1.0 name -> its theano-pymc 1.1.2 name (module:attribute).
LASAGNE_NAMES = {
    "theano.Variable": "theano.graph.basic:Variable",
    "theano.TensorType": "theano.tensor:TensorType",
    "theano.gof.Variable": "theano.graph.basic:Variable",
    "theano.gof.graph.Variable": "theano.graph.basic:Variable",
    "theano.gof.graph.inputs": "theano.graph.basic:graph_inputs",
    "theano.gof.graph.is_same_graph": "theano.graph.toolbox:is_same_graph",
    "theano.scan_module.scan_utils.equal_computations": "theano.scan.utils:equal_computations",
    "theano.sandbox.rng_mrg.MRG_RandomStreams": "theano.sandbox.rng_mrg:MRG_RandomStream",
}

# A start-up module giving Theano 1.0's names NAMES (old -> "module:attribute") on
# theano-pymc's side once ``theano`` is imported (client_suites.py uses it too).
SHIM_TEMPLATE = '''"""Written by tools/lasagne_suite.py: Theano 1.0's names, after import."""

import importlib
import importlib.abc
import sys
import types

NAMES = __NAMES__


def _give_names(theano):
    for old, new in NAMES.items():
        module, _, attr = new.partition(":")
        value = getattr(importlib.import_module(module), attr)
        parts = old.split(".")
        holder = theano
        for k in range(1, len(parts) - 1):
            name = ".".join(parts[: k + 1])
            child = getattr(holder, parts[k], None)
            if child is None:
                child = sys.modules.get(name) or types.ModuleType(name)
                child.__path__ = []
                sys.modules[name] = child
                setattr(holder, parts[k], child)
            holder = child
        if getattr(holder, parts[-1], None) is None:
            setattr(holder, parts[-1], value)


class _Loader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _give_names(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "theano":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


sys.meta_path.insert(0, _Finder())
'''
SHIM = SHIM_TEMPLATE.replace("__NAMES__", repr(LASAGNE_NAMES))

# The sitecustomize of theano-pymc's side: the alias's finder off sys.meta_path
# (pymc3_suite's), then Lasagne's names. theano_dag's side has none: Lasagne runs on it as
# it is, the alias giving Theano 1.0's names itself (theano_dag.compat.gof...).
THEANO_SITE = SITECUSTOMIZE + "\nimport lasagne_names  # noqa\n"


# Lasagne's code for older numpy: its test helpers index arrays with a list of slices, which
# numpy 1.23 refuses, and its thin-plate-spline layer gives np.linspace a float count (the
# same edits on both sides, made in the copy under WORK): file -> (old, new) pairs.
PATCHES = {
    "lasagne/tests/layers/test_conv.py": [
        ("output = output[slices]", "output = output[tuple(slices)]"),
        (
            "output[[slice(None, None, factor) for factor in factors]]",
            "output[tuple(slice(None, None, factor) for factor in factors)]",
        ),
    ],
    # np.linspace wants an int count since numpy 1.18.
    "lasagne/layers/special.py": [
        ("= np.sqrt(num_control_points)", "= int(np.sqrt(num_control_points))")
    ],
}


# The docstring examples of Lasagne's modules (its setup.cfg's --doctest-modules lasagne/):
# one entry, run from the copy's root. Its test files' tests are the other entries': a
# python_files pattern no file matches leaves them out (pytest 7's --ignore does not reach
# into a package's subfolder).
DOCTESTS = "lasagne"
DOCTEST_ARGS = ["--doctest-modules", "-o", "python_files=no_test_files"]

# examples/mnist.py reads MNIST's four files from the directory it runs in, and downloads
# the ones missing: the names, and the idx format's magic numbers (images, labels).
MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
IDX_IMAGES, IDX_LABELS = 2051, 2049


def write_mnist(dest: Path, train: int = 12000, test: int = 1000, seed: int = 0) -> None:
    """Stand-in MNIST files in ``dest``, in MNIST's idx format (gzipped): 28x28 ``uint8``
    images whose digit ``k`` is a bright band at rows ``2k+4`` to ``2k+6`` over weak noise,
    so a model can learn them. mnist.py keeps the last 10000 training images for
    validation: ``train`` must exceed that for an epoch to train on some."""
    rng = np.random.default_rng(seed)
    for split, n in (("train", train), ("test", test)):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = rng.integers(0, 64, (n, 28, 28)).astype(np.uint8)
        for k in range(10):
            images[labels == k, 2 * k + 4 : 2 * k + 7, 4:24] = 255
        images_name, labels_name = MNIST_FILES[split]
        head = np.array([IDX_IMAGES, n, 28, 28], ">i4").tobytes()
        (dest / images_name).write_bytes(gzip.compress(head + images.tobytes()))
        head = np.array([IDX_LABELS, n], ">i4").tobytes()
        (dest / labels_name).write_bytes(gzip.compress(head + labels.tobytes()))


def pytest_args(entry: str) -> list:
    """The pytest arguments of one entry beyond the file: ``--runslow`` for a test file
    (Lasagne's conftest, which defines it, is not loaded for the doctests' entry)."""
    return DOCTEST_ARGS if entry == DOCTESTS else ["--runslow"]


def label(entry: str) -> str:
    """An entry's name in the README's table."""
    return "doctests of `lasagne/`" if entry == DOCTESTS else f"`{entry.split('/')[-1]}`"


def prepare(src: Path, dest: Path) -> Path:
    """A copy of the Lasagne checkout ``src`` at ``dest`` with ``PATCHES`` made."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", "docs"))
    for rel, edits in PATCHES.items():
        path = dest / rel
        text = path.read_text()
        for old, new in edits:
            if old not in text:
                raise SystemExit(f"{rel}: {old!r} not found: update PATCHES")
            text = text.replace(old, new)
        path.write_text(text)
    return dest


def test_files(lasagne: Path) -> list:
    """Lasagne's test files, relative to its checkout, then ``DOCTESTS``."""
    files = (lasagne / "lasagne/tests").rglob("test_*.py")
    return sorted(p.relative_to(lasagne).as_posix() for p in files) + [DOCTESTS]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(ap, ".venv-lasagne", "lasagne-suite", 900)
    ap.add_argument("--lasagne", type=Path, default=ROOT / "build" / "Lasagne")
    ap.add_argument(
        "--files", nargs="*", help=f"test files, as lasagne/tests/test_x.py, or {DOCTESTS}"
    )
    ap.add_argument("--flags", default="", help="THEANO_FLAGS of both sides")
    args = ap.parse_args(argv)

    work = args.work.resolve()
    lasagne = prepare(args.lasagne.resolve(), work / "lasagne")
    write_mnist(lasagne)
    (work / "plugin").mkdir(parents=True, exist_ok=True)
    (work / "plugin" / "pymc3_suite_plugin.py").write_text(PLUGIN)
    (work / "plugin" / "lasagne_names.py").write_text(SHIM)
    files = args.files or test_files(lasagne)
    wanted = ["theano", "theano_dag"] if args.side == "both" else [args.side]
    results = {}
    for side in wanted:
        reused, partial = start_side(args, work, side)
        compiledir = work / "theano-cache"
        env = side_env(side, work, args.theano_pymc.resolve(), 0, compiledir, args.theano_dag)
        if side == "theano":
            # pymc3_suite's theano-side directory, its sitecustomize with Lasagne's names
            site_dir = Path(env["PYTHONPATH"].split(os.pathsep)[0])
            site_dir.mkdir(parents=True, exist_ok=True)
            (site_dir / "sitecustomize.py").write_text(THEANO_SITE)
            env["THEANO_FLAGS"] += ",cxx=" + (f",{args.flags}" if args.flags else "")
        elif args.flags:
            env["THEANO_FLAGS"] = args.flags
        todo = [f for f in files if f not in reused]
        ran = run_side(
            side,
            args.python,
            lasagne,
            todo,
            env,
            args.timeout,
            args.jobs,
            work / "logs" / side,
            partial,
            pytest_args,
        )
        results[side] = {**reused, **ran}
    out = args.out or work / "results.jsonl"
    header = {"lasagne": "Lasagne/Lasagne master", "flags": args.flags}
    summarise(files, results, out, header)
    if args.show:
        show_not_passing(files, results)
    if args.table:
        print("\n" + table(out, "Lasagne test file", label))
    return 0


if __name__ == "__main__":
    sys.exit(main())
