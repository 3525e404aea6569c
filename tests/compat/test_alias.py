"""The ``theano`` import alias (theano_dag.compat): installed by its command into a
temporary site directory, used in fresh interpreters (so this test process never sees a
``theano``), with Theano's flags and rc files; its refusal next to a real Theano; and the
table docs/migrating.md shows."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from theano_dag.compat import install, theano_names

ROOT = Path(__file__).resolve().parent.parent.parent


def _env(tmp_path, **extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("THEANO_FLAGS", "THEANORC", "THEANO_DAGRC", "PYTHONPATH")
    }
    env["PYTHONPATH"] = str(ROOT)
    env["HOME"] = str(tmp_path / "home")  # no ~/.theanorc of the machine
    (tmp_path / "home").mkdir(exist_ok=True)
    env.update(extra)
    return env


def _python(code, env, site_dir=None, flags=()):
    """Run ``code`` in a fresh interpreter; with ``site_dir``, its .pth files are processed
    first, as site does for site-packages at start-up."""
    prelude = f"import site; site.addsitedir({str(site_dir)!r})\n" if site_dir else ""
    return subprocess.run(
        [sys.executable, *flags, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture()
def site_dir(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "theano_dag.compat", "install-theano-alias", "--site-dir", site],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"installed the theano alias: {site / install.PTH_NAME}"
    return site


def test_unchanged_theano_program_runs_on_theano_dag(site_dir, tmp_path):
    proc = _python(
        """
        import sys
        assert "theano_dag" not in sys.modules  # start-up did not import it
        import numpy as np
        import theano
        import theano.tensor as tt
        from theano.graph.basic import Apply
        from theano.link.c.basic import VMLinker
        from theano.compile.function.pfunc import rebuild_collect_shared
        from theano.tensor.nnet import sigmoid
        import theano.compile.ops
        from theano.scalar.basic_scipy import GammaLn
        import theano_dag, theano_dag.graph.basic, theano_dag.engines.theano_linkers

        assert tt is theano_dag.tensor and theano.tensor is theano_dag.tensor
        assert Apply is theano_dag.graph.basic.Apply
        assert VMLinker is theano_dag.engines.theano_linkers.VMLinker
        assert sys.modules["theano.graph.opt"] is sys.modules["theano_dag.graph.rewriting"]
        assert theano.tensor.opt.register_canonicalize is not None
        assert theano.compile.ops.as_op is theano_dag.compile.ops.as_op
        # theano_dag's own modules keep their names and specs
        assert theano_dag.tensor.__spec__.name == "theano_dag.tensor"
        # theano.compile.function.pfunc's module left theano_dag's functions in place
        assert theano_dag.compile.function.__name__ == "function"
        assert sys.modules["theano_dag.compile.function"].pfunc.__name__ == "pfunc"
        x = tt.dvector("x")
        assert isinstance(x, theano_dag.tensor.TensorVariable)
        f = theano.function([x], theano.grad((sigmoid(x) ** 2).sum(), x))
        s = 1 / (1 + np.exp(-np.array([0.5])))
        assert np.allclose(f(np.array([0.5])), 2 * s * s * (1 - s))
        print(theano.__version__)
        """,
        _env(tmp_path),
        site_dir,
    )
    assert proc.returncode == 0, proc.stderr
    version = proc.stdout.strip()
    # PyMC3 3.11 checks semver's VersionInfo.parse(theano.__version__).match(">=1.1.2"): a
    # semver with a build label (compared without it) and a PEP 440 local version.
    assert re.fullmatch(r"1\.1\.2\+theano-dag\.\d+\.\d+\.\d+", version)


def test_deleted_version_is_gone(site_dir, tmp_path):
    # PyMC3's check of a broken Theano: `del theano.__version__`, then reading it raises
    # (theano_dag's own __version__ is not read through in its place).
    proc = _python(
        """
        import theano
        version = theano.__version__
        del theano.__version__
        try:
            theano.__version__
        except AttributeError as err:
            print(err)
        theano.__version__ = version
        print(theano.__version__ == version, theano.function is not None)
        """,
        _env(tmp_path),
        site_dir,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "module 'theano' has no attribute '__version__'",
        "True True",
    ]


def test_missing_theano_module_is_module_not_found(site_dir, tmp_path):
    proc = _python(
        """
        import theano
        try:
            import theano.no_such_module
        except ModuleNotFoundError as err:
            print(err)
        """,
        _env(tmp_path),
        site_dir,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "No module named 'theano.no_such_module'"


def test_theano_flags_and_theanorc_are_read_under_the_alias(site_dir, tmp_path):
    rc = tmp_path / "theanorc"
    rc.write_text("[global]\nfloatX = float64\non_opt_error = raise\n[traceback]\nlimit = 3\n")
    env = _env(tmp_path, THEANO_FLAGS="floatX=float32,device=cuda", THEANORC=str(rc))
    proc = _python(
        """
        import warnings
        warnings.simplefilter("always")
        import theano, theano.tensor as tt
        c = theano.config
        print(c.floatX, tt.scalar().dtype, c.on_opt_error, c.traceback__limit, c.device)
        """,
        env,
        site_dir,
    )
    assert proc.returncode == 0, proc.stderr
    # THEANO_FLAGS wins over .theanorc; device=cuda is refused with a warning
    assert proc.stdout.split() == ["float32", "float32", "raise", "3", "cpu"]
    assert "THEANO_FLAGS: config.device: 'cuda' is not one of cpu, opencl" in proc.stderr


def test_theano_dag_flags_win_over_theano_flags(site_dir, tmp_path):
    env = _env(
        tmp_path,
        THEANO_FLAGS="floatX=float32,profile=True",
        THEANO_DAG_FLAGS=os.environ.get("THEANO_DAG_FLAGS", "") + ",floatX=float64",
    )
    code = "import theano; print(theano.config.floatX, theano.config.profile)"
    proc = _python(code, env, site_dir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["float64", "True"]


def test_theano_flags_without_the_alias_warn_once_and_are_not_read(tmp_path):
    env = _env(tmp_path, THEANO_FLAGS="floatX=float32")
    code = "import theano_dag, theano_dag.config as c; print(theano_dag.config.floatX)"
    proc = _python(code, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "float64"
    assert proc.stderr.count("THEANO_FLAGS is set but theano_dag reads THEANO_DAG_FLAGS") == 1


def test_install_refuses_where_a_real_theano_is_importable(tmp_path):
    fake = tmp_path / "elsewhere" / "theano"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '1.1.2'\n")
    site = tmp_path / "site"
    site.mkdir()
    env = _env(tmp_path)
    env["PYTHONPATH"] += os.pathsep + str(fake.parent)
    cmd = [sys.executable, "-m", "theano_dag.compat", "install-theano-alias", "--site-dir", site]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: a real Theano is importable here ({fake}): the theano")
    assert not list(site.iterdir())


def test_alias_refuses_to_shadow_a_real_theano_installed_later(site_dir, tmp_path):
    fake = tmp_path / "elsewhere" / "theano"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    env = _env(tmp_path)
    env["PYTHONPATH"] += os.pathsep + str(fake.parent)
    proc = _python("import theano", env, site_dir)
    assert proc.returncode == 1
    assert (
        "ImportError: the theano import alias of theano_dag is installed, and a real Theano "
        f"is importable too (from {fake})" in proc.stderr
    )


def test_uninstall_removes_the_alias(site_dir, tmp_path):
    cmd = [sys.executable, "-m", "theano_dag.compat", "uninstall-theano-alias"]
    proc = subprocess.run(
        [*cmd, "--site-dir", site_dir], capture_output=True, text=True, env=_env(tmp_path)
    )
    assert proc.stdout.strip() == f"removed {site_dir / install.PTH_NAME}"
    proc = _python("import theano", _env(tmp_path), site_dir)
    assert "ModuleNotFoundError: No module named 'theano'" in proc.stderr
    proc = subprocess.run(
        [*cmd, "--site-dir", site_dir], capture_output=True, text=True, env=_env(tmp_path)
    )
    assert proc.stdout.strip() == "the theano alias was not installed here"


def test_pth_does_nothing_where_theano_dag_is_gone(site_dir, tmp_path):
    code = "import sys; print([getattr(f, '__name__', type(f).__name__) for f in sys.meta_path])"
    # -I -S: neither PYTHONPATH nor site-packages, so theano_dag is not importable
    proc = _python(code, _env(tmp_path), site_dir, flags=("-I", "-S"))
    assert proc.returncode == 0 and proc.stderr == ""
    assert "TheanoAliasFinder" not in proc.stdout and "PathFinder" in proc.stdout
    proc = _python(code, _env(tmp_path), site_dir)  # and with theano_dag importable
    assert "'TheanoAliasFinder'" in proc.stdout


def test_default_site_dir_is_this_environments_site_packages():
    import sysconfig

    assert install.default_site_dir() == sysconfig.get_paths()["purelib"]


def test_migrating_md_lists_the_package_table():
    text = (ROOT / "docs" / "migrating.md").read_text()
    section = text.split("## Running Theano programs unchanged", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(theano[\w.]*)` \| `(theano_dag[\w.]*)` \|", section, re.M)
    assert dict(rows) == theano_names.MODULES
    assert len(rows) == len(theano_names.MODULES)


def test_theano_change_flags_is_config_change_flags_deprecated(site_dir, tmp_path):
    # Theano 1.1 kept ``theano.change_flags`` (PyMC3's tests use it), warning that it
    # is deprecated; it changes the flags as ``theano.config.change_flags`` does.
    proc = _python(
        """
        import warnings
        import theano
        warnings.simplefilter("always")
        before = theano.config.compute_test_value
        with warnings.catch_warnings(record=True) as got:
            with theano.change_flags(compute_test_value="ignore"):
                print(theano.config.compute_test_value)
        print(theano.config.compute_test_value == before)
        print([(w.category.__name__, str(w.message)) for w in got])
        """,
        _env(tmp_path),
        site_dir,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "ignore",
        "True",
        "[('DeprecationWarning', 'theano.change_flags is deprecated: use "
        "theano.config.change_flags instead')]",
    ]


def test_theano_1_0_names_lasagne_writes_are_given(site_dir, tmp_path):
    # Lasagne (written for Theano 1.0) reaches the graph framework by theano.gof and
    # theano.Variable, and scan's helpers by theano.scan_module.scan_utils: theano-pymc 1.1
    # renamed them all. Under the alias they are theano_dag's objects, and they work.
    proc = _python(
        """
        import theano
        import theano.tensor as tt
        from theano.scan_module.scan_utils import equal_computations
        import theano.gof.opt
        import theano_dag
        from theano_dag.graph import basic, rewriting

        assert theano.Variable is theano.gof.Variable is basic.Variable
        assert theano.gof.graph is basic and theano.gof.opt is rewriting
        assert theano.gof.local_optimizer is rewriting.local_optimizer
        assert theano.Op is theano_dag.graph.op.Op and theano.Apply is basic.Apply
        assert theano.utils is theano_dag.utils  # theano_dag's own name wins
        assert "Variable" in dir(theano)
        v = theano.Variable("myvariable")  # Lasagne's test_helper: a type-less variable
        assert isinstance(v, theano.gof.Variable) and v.owner is None
        x, y = tt.vector("x"), tt.vector("y")
        w = theano.shared(1.0, name="w")
        # Lasagne's collect_shared_vars: the graph's inputs, constants among them
        found = theano.gof.graph.inputs([x * w + 2])
        assert {getattr(v, "name", None) for v in found} == {"x", "w", None}
        assert len(found) == 3
        assert theano.gof.graph.is_same_graph(x.mean(), x.mean())
        assert not theano.gof.graph.is_same_graph(x.mean(), x.sum())
        assert equal_computations([x + 1], [x + 1]) and not equal_computations([x + 1], [y + 1])
        try:
            theano.NoSuchName
        except AttributeError as err:
            print(err)
        """,
        _env(tmp_path),
        site_dir,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "module 'theano' has no attribute 'NoSuchName'"


def test_theano_1_0_names_blocks_writes_are_given(site_dir, tmp_path):
    # Blocks (written for Theano 1.0) imports Scan from theano.scan_module.scan_op, tells
    # random-state shared variables apart by theano.tensor.shared_randomstreams'
    # RandomStateSharedVariable, and converts with theano._asarray.
    proc = _python(
        """
        import numpy as np
        import theano
        from theano.scan_module import scan, scan_op
        from theano.scan_module.scan_op import Scan
        from theano.scan_module.scan_views import map as scan_map
        from theano.tensor.shared_randomstreams import RandomStateSharedVariable
        import theano.tensor as tt
        from theano_dag.scan import basic, op, views

        assert Scan is op.Scan and scan_op is op
        # Theano 1.0's package put the function over its module's name, as theano_dag's
        assert scan is basic.scan and scan_map is views.map
        out, _ = scan(lambda v: v * 2, sequences=[tt.dvector("x")])
        owners = [v.owner for v in theano.gof.graph.ancestors([out]) if v.owner]
        assert any(isinstance(n.op, Scan) for n in owners)
        rng = theano.shared(np.random.RandomState(0))
        assert isinstance(rng, RandomStateSharedVariable)
        assert not isinstance(theano.shared(np.zeros(2)), RandomStateSharedVariable)
        a = theano._asarray([1, 2], dtype="float32")
        print(a.dtype, a.tolist())
        """,
        _env(tmp_path),
        site_dir,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "float32 [1.0, 2.0]"


def test_star_imports_give_what_theanos_gave(site_dir, tmp_path):
    # Theano's packages had no __all__: a star import gave their submodules and the
    # functions they imported. aesara-theano-fallback (exoplanet, starry, celerite2) writes
    # `from theano.graph import *` and then uses `basic` and `op`; old scripts write
    # `from theano.tensor import *` and call `grad`.
    proc = _python(
        """
        import numpy as np

        ns = {}
        exec("from theano.graph import *", ns)
        import theano_dag.graph.basic, theano_dag.graph.op, theano_dag.graph.rewriting
        assert ns["basic"] is theano_dag.graph.basic and ns["op"] is theano_dag.graph.op
        assert ns["opt"] is theano_dag.graph.rewriting and ns["Apply"] is ns["basic"].Apply
        exec("from theano.tensor import *", ns)
        exec("from theano import *", ns)
        import theano_dag
        assert ns["tensor"] is theano_dag.tensor and ns["graph"] is theano_dag.graph
        assert ns["grad"] is theano_dag.grad and ns["function"] is theano_dag.function
        x = ns["dscalar"]("x")
        f = ns["function"]([x], ns["grad"](ns["exp"](2 * x), x))
        exec("from theano.tensor.nnet import *", ns)
        exec("from theano.scan import *", ns)
        exec("from theano.compile import *", ns)
        print(float(f(0.5)), ns["sigm"].__name__, ns["views"].__name__, ns["mode"].__name__)
        """,
        _env(tmp_path),
        site_dir,
    )
    assert proc.returncode == 0, proc.stderr
    two_e = 2 * np.exp(1.0)
    value, *names = proc.stdout.split()
    assert abs(float(value) - two_e) < 1e-12
    assert names == [
        "theano_dag.tensor.nnet.sigm",
        "theano_dag.scan.views",
        "theano_dag.compile.mode",
    ]


def test_theano_configparser_change_flags_is_config_change_flags_deprecated(site_dir, tmp_path):
    # exoplanet's and pymc3-ext's test configuration enter it for the whole package.
    proc = _python(
        """
        import warnings
        import theano
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with theano.configparser.change_flags(compute_test_value="raise"):
                inside = theano.config.compute_test_value
        print(inside, theano.config.compute_test_value)
        print([str(w.message) for w in caught if w.category is DeprecationWarning])
        """,
        _env(tmp_path),
        site_dir,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "raise off",
        "['change_flags is deprecated: use config.change_flags']",
    ]
