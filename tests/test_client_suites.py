"""tools/client_suites.py (``make client-suites``): the test files it finds per library,
each side's environment (start-up directory, packages, the libraries a library imports,
THEANO_FLAGS), the start-up shims, and a library exported from git and run file by file."""

import os
import subprocess
import sys

import client_suites
import pymc3_suite


def _one_test_passes(tree):
    """pytest run on ``tree`` (its conftest and one test file) passes its one test."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tree)],
        capture_output=True,
        text=True,
        cwd=tree,
    )
    assert "1 passed" in out.stdout, out.stdout


def _commit(repo):
    """``repo``'s files committed as a new git repository's HEAD."""
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "t"], check=True)


def test_test_files_follow_each_librarys_patterns(tmp_path):
    for rel in (
        "tests/keras/backend/backend_test.py",
        "tests/keras/layers/test_a.py",
        "tests/test_model_saving.py",
        "tests/keras/helpers.py",
        "tests/conftest.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert client_suites.test_files(tmp_path, client_suites.LIBRARIES["keras"]["tests"]) == [
        "tests/keras/backend/backend_test.py",
        "tests/keras/layers/test_a.py",
        "tests/test_model_saving.py",
    ]
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "graph_test.py").write_text("")
    (tmp_path / "test" / "util.py").write_text("")
    assert client_suites.test_files(tmp_path, client_suites.LIBRARIES["theanets"]["tests"]) == [
        "test/graph_test.py"
    ]


def test_each_side_gets_its_startup_packages_used_libraries_and_flags(tmp_path):
    sep = os.pathsep
    base = pymc3_suite.side_env("theano", tmp_path, tmp_path / "tp", 0, tmp_path / "cache")
    env = client_suites.library_env(base, "theano", "theanets", tmp_path, "mode=FAST_RUN")
    assert env["PYTHONPATH"].split(sep) == [
        str(tmp_path / "theano-side"),  # its sitecustomize: THEANO_SITE
        str(tmp_path / "tp"),
        str(tmp_path / "plugin"),
        str(tmp_path / "downhill"),
        str(tmp_path / "packages"),
    ]
    assert env["THEANO_FLAGS"] == (
        f"base_compiledir={tmp_path / 'cache'},blas__ldflags=,cxx=,floatX=float32,mode=FAST_RUN"
    )
    base = pymc3_suite.side_env("theano_dag", tmp_path, tmp_path / "tp", 0, tmp_path / "cache")
    env = client_suites.library_env(base, "theano_dag", "keras", tmp_path, "")
    assert env["PYTHONPATH"].split(sep) == [
        str(tmp_path / "dag-side"),  # its sitecustomize: SHIM
        str(tmp_path / "plugin"),
        str(tmp_path / "packages"),
    ]
    assert "THEANO_FLAGS" not in env  # theano_dag under the alias reads it
    assert env["KERAS_BACKEND"] == "theano" and env["KERAS_HOME"] == str(tmp_path / "keras-home")
    env = client_suites.library_env(base, "theano_dag", "downhill", tmp_path, "")
    assert env["THEANO_FLAGS"] == "floatX=float32"


def test_a_pymc3_library_runs_with_its_own_packages_not_the_lasagne_venvs(tmp_path):
    spec = client_suites.LIBRARIES["exoplanet"]
    assert spec["venv"] == "pymc3" and "exoplanet-core==0.1.2" in spec["packages"]
    base = pymc3_suite.side_env("theano_dag", tmp_path, tmp_path / "tp", 0, tmp_path / "cache")
    env = client_suites.library_env(base, "theano_dag", "exoplanet", tmp_path, "")
    assert env["PYTHONPATH"].split(os.pathsep) == [
        str(tmp_path / "dag-side"),
        str(tmp_path / "plugin"),
        str(tmp_path / "packages-exoplanet"),  # not PACKAGES' (pandas 1.5, Keras's...)
    ]
    assert env["THEANO_FLAGS"] == "floatX=float64,compute_test_value=off"  # its pytest.ini's
    base = pymc3_suite.side_env("theano", tmp_path, tmp_path / "tp", 0, tmp_path / "cache")
    env = client_suites.library_env(base, "theano", "exoplanet", tmp_path, "")
    assert env["PYTHONPATH"].split(os.pathsep) == [
        str(tmp_path / "theano-side-plain"),  # the alias off, no Theano 1.0 names
        str(tmp_path / "tp"),
        str(tmp_path / "plugin"),
        str(tmp_path / "packages-exoplanet"),
    ]


def test_the_shims_give_back_what_the_libraries_import():
    code = client_suites.SHIM + "\nimport collections\nprint(collections.Iterable.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "Iterable"
    # theano-pymc's side: the alias's finder off sys.meta_path, the shim, Theano 1.0's names
    assert client_suites.THEANO_SITE.startswith(pymc3_suite.SITECUSTOMIZE)
    assert client_suites.SHIM in client_suites.THEANO_SITE
    assert "import theano_1_0_names" in client_suites.THEANO_SITE


def test_theano_1_0_names_are_given_once_theano_is_imported(tmp_path):
    # A stand-in theano holding the theano-pymc 1.1.2 names each old name points at.
    modules = {}
    for new in client_suites.THEANO_1_0_NAMES.values():
        module, _, attr = new.partition(":")
        modules.setdefault(module, []).append(attr)
    for module, attrs in modules.items():
        path = tmp_path.joinpath(*module.split("."))
        path.mkdir(parents=True, exist_ok=True)
        text = "".join(f"class {a}:\n    pass\n" for a in attrs)
        (path / "__init__.py").write_text(text)
        for k in range(1, len(module.split("."))):  # the packages above it
            init = tmp_path.joinpath(*module.split(".")[:k]) / "__init__.py"
            if not init.exists():
                init.write_text("")
    (tmp_path / "theano_1_0_names.py").write_text(client_suites.NAMES_MODULE)
    code = (
        "import theano_1_0_names, theano\n"
        "from theano.gof.graph import inputs, io_toposort\n"
        "from theano.scan_module.scan_op import Scan\n"
        "from theano.tensor.shared_randomstreams import RandomStateSharedVariable\n"
        "import theano.sandbox.rng_mrg as m\n"
        "print(m.MRG_RandomStreams is m.MRG_RandomStream, inputs.__name__, Scan.__name__,\n"
        "      theano._asarray.__name__, RandomStateSharedVariable.__module__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert out.stdout.split() == [
        "True", "graph_inputs", "Scan", "_asarray", "theano.tensor.random.var"
    ]  # fmt: skip


def test_blocks_runs_with_fuel_and_its_nose_style_conftest(tmp_path):
    assert client_suites.LIBRARIES["blocks"]["uses"] == ("fuel",)
    assert not client_suites.LIBRARIES["fuel"]["tests"]  # imported by Blocks, not run
    (tmp_path / "conftest.py").write_text(client_suites.BLOCKS_CONFTEST)
    (tmp_path / "test_nose.py").write_text(
        "import collections, inspect\n\n"
        "class TestThing:\n"
        "    def setUp(self):\n"
        "        self.value = inspect.getargspec(lambda a, b=1: a).args\n\n"
        "    def test_it(self):\n"
        "        assert self.value == ['a', 'b']\n"
        "        assert collections.Sequence is collections.abc.Sequence\n"
    )
    _one_test_passes(tmp_path)


def test_a_library_exported_from_git_runs_file_by_file(tmp_path):
    repo = tmp_path / "repo"
    (repo / "test").mkdir(parents=True)
    (repo / "lib.py").write_text("def one():\n    return 1\n")
    (repo / "test" / "lib_test.py").write_text(
        "import lib\n\ndef test_one():\n    assert lib.one() == 1\n\n"
        "def test_two():\n    assert lib.one() == 2\n"
    )
    _commit(repo)
    tree = tmp_path / "work" / "lib"
    client_suites.export_tests(repo, "HEAD", tree, ())
    assert (tree / "lib.py").exists()  # the whole tree, not only its tests
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "pymc3_suite_plugin.py").write_text(pymc3_suite.PLUGIN)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "plugin"), "PYMC3_SUITE_PER_FILE": "0"}
    partial = tmp_path / "partial.jsonl"
    files = client_suites.test_files(tree, ("test/*_test.py",))
    ran = pymc3_suite.run_side(
        "theano_dag", sys.executable, tree, files, env, 120, 1, tmp_path / "logs", partial
    )
    row = ran["test/lib_test.py"]
    assert (row["tests"], row["passed"], row["failed"]) == (2, 1, 1)
    assert row["outcomes"]["test/lib_test.py::test_two"] == "failure"


def test_sympy_comes_from_its_wheel_with_its_stacklevel_check_left_out(tmp_path):
    spec = client_suites.LIBRARIES["sympy"]
    assert spec["wheel"] == "sympy==1.12"
    assert spec["tests"] == ("sympy/printing/tests/test_theanocode.py",)
    assert any(p.startswith("mpmath") for p in client_suites.PACKAGES)  # SymPy's dependency
    # A stand-in for sympy.testing.pytest's warns, which checks the stack level unless told
    stand_in = tmp_path / "sympy" / "testing"
    stand_in.mkdir(parents=True)
    (tmp_path / "sympy" / "__init__.py").write_text("")
    (stand_in / "__init__.py").write_text("")
    (stand_in / "pytest.py").write_text(
        "def warns(cls, test_stacklevel=True):\n    return test_stacklevel\n\n"
        "def warns_deprecated_sympy():\n    return warns(DeprecationWarning)\n"
    )
    (tmp_path / "conftest.py").write_text(client_suites.SYMPY_CONFTEST)
    (tmp_path / "test_warns.py").write_text(
        "from sympy.testing.pytest import warns_deprecated_sympy\n\n"
        "def test_it():\n    assert warns_deprecated_sympy() is False\n"
    )
    _one_test_passes(tmp_path)


def test_theanolm_exports_its_package_tests_and_word_classes_only(tmp_path):
    spec = client_suites.LIBRARIES["theanolm"]
    assert spec["paths"] == ("theanolm", "tests", "wordclasses")
    repo = tmp_path / "repo"
    for rel in ("theanolm/__init__.py", "tests/theanolm/a_test.py", "wordclasses/__init__.py",
                "recipes/big.classes"):  # fmt: skip
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("")
    _commit(repo)
    tree = tmp_path / "theanolm-export"
    client_suites.export_tests(repo, spec["ref"], tree, spec["paths"])
    assert sorted(p.name for p in tree.iterdir()) == ["tests", "theanolm", "wordclasses"]
    assert client_suites.test_files(tree, spec["tests"]) == ["tests/theanolm/a_test.py"]
    assert client_suites.THEANO_1_0_NAMES["theano.gof.MissingInputError"] == (
        "theano.graph.fg:MissingInputError"
    )
