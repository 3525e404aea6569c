"""Run the own test suites of more Theano client libraries, Keras 2.3.1 (its Theano
backend), theanets, downhill, Blocks, TheanoLM, pymanopt, exoplanet, celerite2, pymc3-ext
and SymPy's Theano printer, on theano-pymc 1.1.2 in Python mode and on theano_dag through
the ``theano`` import alias, and count the passes of each (``make client-suites``).

The venv (``--python``) is the Lasagne suite's (``make venv-lasagne``: numpy 1.23, scipy
1.9, pytest 7, theano_dag with its alias, theano-pymc apart in ``--theano-pymc``); the few
packages the libraries need beyond it (``PACKAGES``) are installed here, with ``pip
install --target``, under ``WORK/packages``. Each library's tests come from its git
repository (``--keras``, ``--theanets``, ``--downhill``: a clone or a ``.git`` directory),
exported at ``LIBRARIES[name]["ref"]`` into ``WORK/<name>``, and run from there as its
own CI ran them, one pytest process per test file with a time limit (the same runner as
``tools/pymc3_suite.py``, every test of each file):

* Keras 2.3.1 with ``KERAS_BACKEND=theano`` (its ``keras.json`` in ``WORK/keras-home``,
  the defaults: float32, channels last); Keras reads ``collections.Iterable`` and
  friends, gone from Python 3.10, so both sides' start-up gives them back (``SHIM``);
* theanets and downhill (lmjohns3's master) under ``floatX=float32``, as their tests
  assume, downhill on theanets' ``sys.path``;
* Blocks (mila-udem's master, ``--blocks``) with Fuel (``--fuel``), its data streams, on
  its ``sys.path``; a conftest (``BLOCKS_CONFTEST``) runs its nose-style tests on pytest
  and Python 3.11;
* TheanoLM (senarvi's master, ``--theanolm``), its package, tests and word classes;
* pymanopt 0.2.5 (``--pymanopt``), the tests of its Theano backend;
* exoplanet 0.5.3 (``--exoplanet``), celerite2 0.2.1 (``--celerite2``) and pymc3-ext 0.1.0
  (``--pymc3-ext``), in the PyMC3 venv (``--pymc3-python``, theano-pymc from
  ``--pymc3-theano-pymc``), each with its own packages (``LIBRARIES[name]["packages"]``);
* SymPy 1.12's ``sympy.printing.tests.test_theanocode`` (SymPy's expressions printed as
  Theano graphs and compiled), from SymPy's wheel, its check of its own deprecation
  warning's stack level left out (``SYMPY_CONFTEST``).

theano-pymc 1.1.2 renamed or dropped Theano 1.0's names that the libraries import
(``MRG_RandomStreams``, and Blocks' ``theano.gof``, ``theano.scan_module.scan_op``...):
its side's start-up gives them back (``THEANO_1_0_NAMES``). It runs with ``cxx=`` (Python
mode): its C mode cannot compile ``scan`` on Python 3.11 here, which would fail every
recurrent test on its side for a reason of this machine's.

The result is one JSON line per test file and a total line per library in
``WORK/<name>.jsonl``; ``--table`` prints each library's table, ``--show`` the tests
that do not pass.

    python tools/client_suites.py --keras /path/to/keras --theanets /path/to/theanets \\
        --downhill /path/to/downhill --table
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lasagne_suite import SHIM_TEMPLATE
from pymc3_suite import (
    PLUGIN,
    SITECUSTOMIZE,
    common_arguments,
    run_side,
    show_not_passing,
    side_env,
    table,
)
from theano_suite import export_tests, summarise

ROOT = Path(__file__).resolve().parent.parent

#: name -> the git ref exported, its test files (globs relative to the export), the
#: THEANO_FLAGS both sides run under, the environment it needs and the other libraries
#: it imports (their exports put on sys.path).
LIBRARIES = {
    "keras": {
        "ref": "2.3.1",
        "tests": ("tests/keras/**/*_test.py", "tests/keras/**/test_*.py", "tests/test_*.py"),
        "flags": "",
        "env": {"KERAS_BACKEND": "theano"},
        "uses": (),
    },
    "theanets": {
        "ref": "HEAD",
        "tests": ("test/*_test.py",),
        "flags": "floatX=float32",
        "env": {},
        "uses": ("downhill",),
    },
    "downhill": {
        "ref": "HEAD",
        "tests": ("test/*_test.py",),
        "flags": "floatX=float32",
        "env": {},
        "uses": (),
    },
    "blocks": {
        "ref": "HEAD",
        "tests": ("tests/**/test_*.py", "tests/test_*.py"),
        "flags": "",
        "env": {},
        "uses": ("fuel",),
        "conftest": "BLOCKS_CONFTEST",
    },
    # Blocks' data streams (imported by it, its own tests not run here).
    "fuel": {"ref": "HEAD", "tests": (), "flags": "", "env": {}, "uses": ()},
    # TheanoLM (senarvi's master): its tests need its package and wordclasses beside them
    # (its recipes hold a file the repository's history lost: only these are exported).
    "theanolm": {
        "ref": "HEAD",
        "paths": ("theanolm", "tests", "wordclasses"),
        "tests": ("tests/theanolm/*_test.py", "tests/wordclasses/*_test.py"),
        "flags": "",
        "env": {},
        "uses": (),
    },
    # pymanopt 0.2.5, the last with a Theano backend (its costs' gradients and Hessian-vector
    # products, by R-op or by the gradient of a projection): the tests of that backend;
    # its manifolds' tests check them with autograd, no Theano in them.
    "pymanopt": {
        "ref": "0.2.5",
        "tests": ("tests/test_theano.py", "tests/test_problem.py"),
        "flags": "",
        "env": {},
        "uses": (),
    },
    # exoplanet 0.5.3 (PyMC3 models of planets' orbits and light curves, on exoplanet-core's
    # Ops), in the PyMC3 venv (``"venv"``) with its own packages (``"packages"``, from their
    # wheels and exoplanet-core's sdist, built here); its tests from its repository, its
    # package from the wheel (the repository's ``src`` lacks the generated version file).
    # Its pytest.ini sets its THEANO_FLAGS through pytest-env, not installed here: given.
    "exoplanet": {
        "ref": "v0.5.3",
        "paths": ("tests", "pytest.ini"),
        "tests": ("tests/*_test.py", "tests/orbits/*_test.py"),
        "flags": "floatX=float64,compute_test_value=off",
        "env": {},
        "uses": (),
        "venv": "pymc3",
        "packages": (
            "exoplanet==0.5.3",
            "exoplanet-core==0.1.2",
            "aesara-theano-fallback==0.1.0",
            "astropy==5.3.4",
            "pyerfa==2.0.0.3",
            "astropy-iers-data<0.2025",
            "pyyaml>=5,<7",
        ),
    },
    # Two more of exoplanet's family, on theano-pymc as it is: celerite2's Gaussian
    # processes as PyMC3 terms (its Ops' C++ built here from its sdist) and pymc3-ext's
    # samplers, optimizer and distributions.
    "celerite2": {
        "ref": "v0.2.1",
        "paths": ("python/test",),
        "tests": ("python/test/pymc3/test_*.py",),
        "flags": "",
        "env": {},
        "uses": (),
        "venv": "pymc3",
        "packages": ("celerite2==0.2.1", "aesara-theano-fallback==0.1.0"),
    },
    "pymc3-ext": {
        "ref": "v0.1.0",
        "tests": ("tests/*_test.py", "tests/*/*_test.py"),
        "flags": "",
        "env": {},
        "uses": (),
        "venv": "pymc3",
        "packages": ("pymc3-ext==0.1.0", "aesara-theano-fallback==0.1.0"),
    },
    # SymPy's printer of expressions as Theano graphs (sympy.printing.theanocode) and its
    # tests, from SymPy's wheel (which ships them): no repository to export.
    "sympy": {
        "ref": "1.12",
        "wheel": "sympy==1.12",
        "tests": ("sympy/printing/tests/test_theanocode.py",),
        "flags": "",
        "env": {},
        "uses": (),
        "conftest": "SYMPY_CONFTEST",
    },
}

# Blocks' tests were written for nose on Python 2.7 and 3.4: nose ran a test class's
# ``setUp``/``tearDown``, and Blocks reads ``collections.Sequence`` and friends and
# ``inspect.getargspec``, gone from Python 3.10 and 3.11; this conftest, written beside
# its tests, gives both sides all three.
BLOCKS_CONFTEST = """
import collections
import collections.abc
import inspect

import pytest

for _name in collections.abc.__all__:
    if not hasattr(collections, _name):
        setattr(collections, _name, getattr(collections.abc, _name))
if not hasattr(inspect, "getargspec"):
    _ArgSpec = collections.namedtuple("ArgSpec", "args varargs keywords defaults")
    inspect.getargspec = lambda f: _ArgSpec(*inspect.getfullargspec(f)[:4])


@pytest.fixture(autouse=True)
def _nose_setup(request):
    inst = request.instance
    if inst is not None and hasattr(inst, "setUp"):
        inst.setUp()
    yield
    if inst is not None and hasattr(inst, "tearDown"):
        inst.tearDown()
"""

# SymPy 1.12 deprecated theanocode with a warning whose stack level points into its own
# module when theano_function calls theano_code, and its tests' check of the stack level
# then fails them on every Theano (SymPy's CI has no Theano): the check is left out.
SYMPY_CONFTEST = """
import sympy.testing.pytest as _sympy_pytest

_warns = _sympy_pytest.warns


def _warns_without_stacklevel_check(*args, **kwargs):
    kwargs["test_stacklevel"] = False
    return _warns(*args, **kwargs)


_sympy_pytest.warns = _warns_without_stacklevel_check
"""

#: What the libraries import that the Lasagne venv lacks (pip install --target, no deps):
#: Keras's two companion packages, its yaml and six, h5py (its saving; 3.9 is built for
#: numpy 1.23, and Keras 2.3.1 predates h5py 3, so its saving of whole models fails on
#: both sides alike), its tests' flaky and pandas (with pandas's two dependencies; 1.5 is
#: built for numpy 1.23); theanets' click.
PACKAGES = (
    "keras-applications==1.0.8",
    "keras-preprocessing==1.1.2",
    "pyyaml>=5,<7",
    "six>=1.16",
    "h5py>=3.8,<3.10",
    "flaky>=3.7,<4",
    "pandas>=1.5,<2",
    "python-dateutil>=2.8",
    "pytz>=2020.1",
    "click>=7,<9",
    # Blocks and Fuel: their iterators, progress bars and nose (Blocks' tests use its
    # tools), Fuel's HDF5 datasets (h5py above, PyTables with its numexpr and cpuinfo) and
    # its streams' zmq and its image transformers' Pillow.
    "picklable-itertools==0.1.1",
    "progressbar2>=4,<5",
    "python-utils>=3.8,<5",
    "toolz>=0.10",
    "nose==1.3.7",
    "tables==3.8.0",
    "numexpr>=2.8,<2.9",
    "py-cpuinfo>=9",
    "packaging>=21",
    "pyzmq>=25,<28",
    "pillow>=10,<12",
    # SymPy's arbitrary-precision numbers
    "mpmath>=1.1,<1.4",
)

# Both sides' start-up: the ABCs Keras 2.3.1 reads from collections (Python < 3.10).
SHIM = """
import collections as _collections
import collections.abc as _abc

for _name in ("Iterable", "Mapping", "Sequence", "MutableMapping", "Callable"):
    if not hasattr(_collections, _name):
        setattr(_collections, _name, getattr(_abc, _name))
"""

# Theano 1.0's names that theano-pymc 1.1.2 renamed or dropped and the libraries use, on
# theano-pymc's side (old -> "module:attribute"): the MRG streams' old name (Keras,
# theanets, Blocks, TheanoLM), Blocks' graph framework, Scan, random-state shared
# variables and ``_asarray``, TheanoLM's ``gof.MissingInputError``. theano_dag's side runs
# them as they are, its alias giving these names.
THEANO_1_0_NAMES = {
    "theano.sandbox.rng_mrg.MRG_RandomStreams": "theano.sandbox.rng_mrg:MRG_RandomStream",
    "theano.Variable": "theano.graph.basic:Variable",
    "theano.gof.Variable": "theano.graph.basic:Variable",
    "theano.gof.graph.Constant": "theano.graph.basic:Constant",
    "theano.gof.graph.inputs": "theano.graph.basic:graph_inputs",
    "theano.gof.graph.io_toposort": "theano.graph.basic:io_toposort",
    "theano.gof.graph.is_same_graph": "theano.graph.toolbox:is_same_graph",
    "theano.scan_module.scan_op.Scan": "theano.scan.op:Scan",
    "theano.tensor.shared_randomstreams.RandomStateSharedVariable": (
        "theano.tensor.random.var:RandomStateSharedVariable"
    ),
    "theano._asarray": "theano.misc.safe_asarray:_asarray",
    "theano.gof.MissingInputError": "theano.graph.fg:MissingInputError",
}

# theano-pymc's side: the alias off sys.meta_path (pymc3_suite's), the shim, and the
# module giving THEANO_1_0_NAMES once theano is imported.
THEANO_SITE = SITECUSTOMIZE + SHIM + "\nimport theano_1_0_names  # noqa\n"
NAMES_MODULE = SHIM_TEMPLATE.replace("__NAMES__", repr(THEANO_1_0_NAMES))


def test_files(tree: Path, patterns) -> list:
    """The test files of an exported library matching ``patterns``, relative to ``tree``."""
    found = {p.relative_to(tree).as_posix() for pat in patterns for p in tree.glob(pat)}
    return sorted(found)


def install_packages(python: str, dest: Path, packages=PACKAGES, deps: bool = False) -> None:
    """``packages`` into ``dest`` with ``python``'s pip, without their dependencies unless
    ``deps`` (once: a marker file records them)."""
    marker = dest / ".installed"
    if marker.exists() and marker.read_text() == "\n".join(packages):
        return
    cmd = [python, "-m", "pip", "install", "-q", "--upgrade", "--target", str(dest)]
    subprocess.run([*cmd, *([] if deps else ["--no-deps"]), *packages], check=True)
    marker.write_text("\n".join(packages))


def in_pymc3_venv(name: str) -> bool:
    """Whether library ``name`` runs in the PyMC3 venv (``"venv": "pymc3"``)."""
    return LIBRARIES[name].get("venv") == "pymc3"


def packages_dir(work: Path, name: str) -> Path:
    """Where library ``name``'s packages are: its own (``"packages"``), or ``PACKAGES``'."""
    return work / f"packages-{name}" if "packages" in LIBRARIES[name] else work / "packages"


def library_env(base: dict, side: str, name: str, work: Path, flags: str) -> dict:
    """One side's environment for library ``name``: ``base`` (pymc3_suite's side_env)
    with the start-up directory, the packages and the libraries it uses on
    ``PYTHONPATH``, its own environment, and its THEANO_FLAGS with ``flags``."""
    spec = LIBRARIES[name]
    env = {**base, **spec["env"], "KERAS_HOME": str(work / "keras-home")}
    paths = env["PYTHONPATH"].split(os.pathsep)
    extra = [str(work / u) for u in spec["uses"]] + [str(packages_dir(work, name))]
    if side == "theano":
        # pymc3_suite's theano-side directory is first: its sitecustomize is THEANO_SITE,
        # or for a library of theano-pymc's own time (PyMC3's), only the alias taken off
        # (Theano 1.0's theano.gof there would make ArviZ take theano-pymc for Theano 1.0)
        if in_pymc3_venv(name):
            paths = [str(work / "theano-side-plain") if p == str(work / "theano-side") else p
                     for p in paths]  # fmt: skip
        paths = [*paths, *extra]
    else:
        paths = [str(work / "dag-side"), *paths, *extra]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    wanted = ",".join(f for f in (spec["flags"], flags) if f)
    if side == "theano":
        env["THEANO_FLAGS"] += ",cxx=" + (f",{wanted}" if wanted else "")
    elif wanted:
        env["THEANO_FLAGS"] = wanted
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(ap, ".venv-lasagne", "client-suites", 1200)
    for name, spec in LIBRARIES.items():
        if "wheel" not in spec:  # a repository to export the library from
            ap.add_argument(f"--{name}", type=Path, default=ROOT / "build" / name)
    ap.add_argument(
        "--libraries",
        nargs="*",
        choices=sorted(LIBRARIES),
        default=[n for n, spec in LIBRARIES.items() if spec["tests"]],
    )
    ap.add_argument("--files", nargs="*", help="test files (one library), as its repo names them")
    ap.add_argument("--flags", default="", help="more THEANO_FLAGS of both sides")
    venv = ROOT / ".venv-pymc3"  # the libraries of PyMC3's ("venv": "pymc3")
    ap.add_argument("--pymc3-python", type=os.path.abspath, default=str(venv / "bin" / "python"))
    ap.add_argument("--pymc3-theano-pymc", type=Path, default=venv / "theano-pymc")
    args = ap.parse_args(argv)
    if args.reuse is not None:
        ap.error("--reuse: each library's theano-pymc side runs again here")

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    if not all(map(in_pymc3_venv, args.libraries)):
        install_packages(args.python, work / "packages")
    for sub, name, text in (
        ("plugin", "pymc3_suite_plugin.py", PLUGIN),
        ("theano-side", "sitecustomize.py", THEANO_SITE),
        ("theano-side", "theano_1_0_names.py", NAMES_MODULE),
        ("theano-side-plain", "sitecustomize.py", SITECUSTOMIZE),
        ("dag-side", "sitecustomize.py", SHIM),
    ):
        (work / sub).mkdir(parents=True, exist_ok=True)
        (work / sub / name).write_text(text)
    for name in LIBRARIES:  # the ones run, and the ones they import
        if name in args.libraries or any(name in LIBRARIES[n]["uses"] for n in args.libraries):
            shutil.rmtree(work / name, ignore_errors=True)
            if "wheel" in LIBRARIES[name]:
                install_packages(args.python, work / name, (LIBRARIES[name]["wheel"],))
            else:
                spec = LIBRARIES[name]
                src = getattr(args, name.replace("-", "_")).resolve()
                export_tests(src, spec["ref"], work / name, spec.get("paths", ()))
            if "packages" in LIBRARIES[name]:
                python = args.pymc3_python if in_pymc3_venv(name) else args.python
                install_packages(python, packages_dir(work, name), LIBRARIES[name]["packages"])
            conftest = LIBRARIES[name].get("conftest")
            if conftest:
                (work / name / "conftest.py").write_text(globals()[conftest])
    wanted = ["theano", "theano_dag"] if args.side == "both" else [args.side]
    for name in args.libraries:
        tree = work / name
        files = args.files or test_files(tree, LIBRARIES[name]["tests"])
        results = {}
        pymc3 = in_pymc3_venv(name)
        python = args.pymc3_python if pymc3 else args.python
        tp = (args.pymc3_theano_pymc if pymc3 else args.theano_pymc).resolve()
        for side in wanted:
            partial = work / f"partial-{name}-{side}.jsonl"
            partial.write_text("")
            base = side_env(side, work, tp, 0, work / "theano-cache", args.theano_dag)
            env = library_env(base, side, name, work, args.flags)
            logs = work / "logs" / name / side
            results[side] = run_side(
                side, python, tree, files, env, args.timeout, args.jobs, logs, partial
            )
        out = work / f"{name}.jsonl"
        spec = LIBRARIES[name]
        summarise(files, results, out, {"library": name, "ref": spec["ref"], "flags": args.flags})
        if args.show:
            show_not_passing(files, results, f"{name}: ")
        if args.table:
            print("\n" + table(out, f"{name} test file"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
