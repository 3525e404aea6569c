"""Flags, the rc file, THEANO_DAG_FLAGS, and the flags Theano users set."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import get_mode
from theano_dag.config import (
    FLAGS,
    BoolParam,
    Config,
    ConfigParam,
    DeviceParam,
    EnumStr,
    FloatParam,
    IntParam,
    StrParam,
    config,
    short_platform,
)
from theano_dag.graph.fg import FunctionGraph

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _import_in_fresh_process(env_updates, code):
    env = {k: v for k, v in os.environ.items() if k not in ("THEANO_DAG_FLAGS", "THEANO_DAGRC")}
    env.update(env_updates)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, env=env
    )


def test_misspelt_flag_in_env_warns_with_close_matches_and_import_goes_on():
    res = _import_in_fresh_process(
        {"THEANO_DAG_FLAGS": "floatx=float32,profil=True,mode=FAST_COMPILE"},
        "import theano_dag; print(theano_dag.config.mode, theano_dag.config.floatX)",
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "FAST_COMPILE float64"
    assert "no flag 'floatx', it is ignored; did you mean 'floatX'?" in res.stderr
    assert "no flag 'profil'" in res.stderr and "'profile'" in res.stderr


def test_rc_file_read_at_import_and_env_flags_win(tmp_path):
    rc = tmp_path / "rc"
    rc.write_text("[global]\nfloatX = float32\nmode = FAST_COMPILE\n[traceback]\nlimit = 3\n")
    res = _import_in_fresh_process(
        {"THEANO_DAGRC": str(rc), "THEANO_DAG_FLAGS": "mode=FAST_RUN"},
        "from theano_dag import config as c; print(c.floatX, c.mode, c.traceback__limit)",
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["float32", "FAST_RUN", "3"]


def test_default_rc_file_is_in_home(tmp_path):
    (tmp_path / ".theano_dagrc").write_text("[global]\nfloatX = float32\n")
    res = _import_in_fresh_process(
        {"HOME": str(tmp_path)}, "from theano_dag import config; print(config.floatX)"
    )
    assert res.stdout.strip() == "float32", res.stderr


def test_rc_file_unknown_flag_warns_naming_the_file(tmp_path):
    rc = tmp_path / "rc"
    rc.write_text("[global]\ncycle_detect = fast\n")
    cfg = Config()
    with pytest.warns(UserWarning, match="no flag 'cycle_detect'.*'cycle_detection'") as w:
        cfg.load_rc([str(rc), str(tmp_path / "missing")])
    assert str(rc) in str(w[0].message)


def test_print_config_lists_every_flag_and_value():
    with config.change_flags(floatX="float32"):
        text = str(config)
    for name in FLAGS:
        assert f"\n{name}" in "\n" + text
    assert "floatX (float64, float32, float16)\n    Doc:" in text
    assert "Value:  float32" in text
    assert repr(Config()) == "Config()"


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match="exception_verbosity: 'loud' is not one of low, high"):
        config.exception_verbosity = "loud"
    with pytest.raises(ValueError, match="traceback__limit: expected an integer"):
        config.traceback__limit = "many"


def test_optimizer_flag_sets_the_default_modes_rewrites():
    x = tt.dvector("x")
    y = tt.log(tt.exp(x)) * 1
    with config.change_flags(optimizer=None):
        assert get_mode().provided_optimizer == "None"
        f = theano_dag.function([x], y)
        assert len(f.maker.fgraph.apply_nodes) >= 3  # nothing rewritten
    with config.change_flags(optimizer="fast_compile"):
        assert get_mode().provided_optimizer == "fast_compile"
    f = theano_dag.function([x], y)
    assert len(f.maker.fgraph.apply_nodes) < 3
    np.testing.assert_allclose(f([1.0, 2.0]), [1.0, 2.0])
    with config.change_flags(optimizer="fast_run"):  # a named mode keeps its own optimizer
        assert get_mode("FAST_COMPILE").provided_optimizer == "fast_compile"


@pytest.mark.parametrize("algo", ["regular", "fast"])
def test_cycle_detection_flag_reaches_the_destroy_handler(algo):
    x = tt.dvector("x")
    with config.change_flags(cycle_detection=algo):
        f = theano_dag.function([x], tt.exp(x) + 1)
    handlers = [ft for ft in f.maker.fgraph._features if type(ft).__name__ == "DestroyHandler"]
    assert [h.algo for h in handlers] in ([algo], [])
    np.testing.assert_allclose(f([0.0]), [2.0])


def test_warn_float64_names_the_users_line():
    with config.change_flags(warn_float64="warn"):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            tt.dvector("v")
            tt.fvector("f")
    assert len(w) == 1 and w[0].filename == __file__
    with config.change_flags(warn_float64="raise"):
        with pytest.raises(TypeError, match="float64 dtype"):
            tt.exp(tt.fvector("f")) + np.float64(1.5) * tt.dscalar()


def test_warn_float64_flags_the_variables_a_function_copies():
    # The copy of the graph makes its float64 variables through their class, as
    # Theano's clone does: each warns when the flag is on (and none when it is off).
    x = tt.dvector("x")
    y = tt.exp(x) + tt.sin(x)
    for flag, expected in (("ignore", 0), ("warn", 4)):
        with config.change_flags(warn_float64=flag):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                fg = FunctionGraph([x], [y])
        assert len(w) == expected and len(fg.apply_nodes) == 3
    with config.change_flags(warn_float64="raise"):
        with pytest.raises(TypeError, match="float64 dtype"):
            FunctionGraph([x], [y])


@pytest.mark.parametrize("action", ["ignore", "warn", "raise"])
def test_get_test_values_follows_compute_test_value(action):
    from theano_dag.graph.op import get_test_values
    from theano_dag.graph.utils import TestValueError

    x, y = tt.dvector("x"), tt.dvector("y")
    x.tag.test_value = np.zeros(4)
    assert get_test_values(x) == []  # off
    with config.change_flags(compute_test_value=action):
        ((xv, other),) = get_test_values(x, np.ones(2))
        assert xv.shape == (4,) and other.shape == (2,)
        if action == "raise":
            with pytest.raises(TestValueError, match="Argument 0 .* has no test value"):
                get_test_values(y)
        elif action == "warn":
            with pytest.warns(UserWarning, match="has no test value"):
                assert get_test_values(y) == []
        else:
            assert get_test_values(y) == []


def test_theanos_no_effect_flags_are_accepted_and_typed():
    # Theano's tests set these (e.g. change_flags(warn__sum_div_dimshuffle_bug=False)).
    assert config.warn__sum_div_dimshuffle_bug is False
    with config.change_flags(warn__sum_div_dimshuffle_bug="true", DebugMode__patience="3"):
        assert config.warn__sum_div_dimshuffle_bug is True
        assert config.DebugMode__patience == 3
    assert "no effect" in FLAGS["blas__ldflags"].doc
    # Theano's tests read vm__lazy (None, True or False, from text too)
    assert config.vm__lazy is None
    with config.change_flags(vm__lazy="False"):
        assert config.vm__lazy is False
    with pytest.raises(ValueError, match="vm__lazy: expected None, True or False"):
        config.vm__lazy = "maybe"
    with pytest.raises(ValueError, match="deterministic"):
        with config.change_flags(deterministic="always"):
            pass


def test_a_flag_read_follows_every_way_of_changing_it():
    # A flag read is kept as a plain attribute until the flags change: each way of
    # changing them (attribute, change_flags, the values dict itself) is seen at once.
    cfg = Config()
    assert cfg.floatX == "float64" and cfg.floatX == "float64"
    cfg.floatX = "float32"
    assert cfg.floatX == "float32"
    with cfg.change_flags(floatX="float64", on_opt_error="raise"):
        assert (cfg.floatX, cfg.on_opt_error) == ("float64", "raise")
    assert (cfg.floatX, cfg.on_opt_error) == ("float32", FLAGS["on_opt_error"].default)
    cfg._values.pop("floatX")
    assert cfg.floatX == "float64"
    cfg._values["floatX"] = "float16"
    assert cfg.floatX == "float16"
    cfg._values = {"floatX": "float32"}
    assert cfg.floatX == "float32"
    cfg._values.clear()
    assert cfg.floatX == "float64"
    # The global config too, as graph building reads it.
    with config.change_flags(floatX="float32"):
        assert tt.scalar().dtype == "float32"
    assert tt.scalar().dtype == config.floatX


def test_default_compiler_is_found_on_the_current_path(tmp_path, monkeypatch):
    # The default of ``cxx`` follows PATH as it is at each read (it is remembered per
    # PATH, not once for the process).
    empty = tmp_path / "empty"
    empty.mkdir()
    tools = tmp_path / "tools"
    tools.mkdir()
    gcc = tools / "gcc"
    gcc.write_text("#!/bin/sh\n")
    gcc.chmod(0o755)
    # The default (the config forgets its copy of a flag on any change; undone after).
    monkeypatch.delitem(config._values, "cxx", raising=False)
    monkeypatch.setenv("PATH", str(empty))
    assert config.cxx == ""
    monkeypatch.setenv("PATH", str(tools))
    assert config.cxx == str(gcc)
    monkeypatch.setenv("PATH", str(empty))
    assert config.cxx == ""


def test_theano_top_level_names_of_the_flags():
    # `from theano import configdefaults, change_flags` (Theano's top-level names).
    assert theano_dag.configdefaults.config is theano_dag.config
    before = config.floatX
    other = "float32" if before == "float64" else "float64"
    with pytest.warns(DeprecationWarning, match="config.change_flags"):
        with theano_dag.change_flags(floatX=other):
            assert config.floatX == other
    assert config.floatX == before


def test_theano_tensor_opt_is_loaded_with_the_package():
    # Theano code reads theano.tensor.opt.assert_ after `import theano` alone.
    x = tt.dvector("x")
    out = theano_dag.opt.tensor_opt.assert_(x, tt.all(tt.ge(x, 0)))
    f = theano_dag.function([x], out)
    np.testing.assert_array_equal(f(np.array([1.0, 2.0])), [1.0, 2.0])
    with pytest.raises(AssertionError):
        f(np.array([-1.0]))


def test_config_add_and_theanos_parameter_classes():
    """Theano's config.add(name, doc, ConfigParam) and its parameter classes, for a
    library's own flags: values parsed and checked, defaults checked, names refused."""

    names = ["s51test__level", "s51test__color", "s51test__on", "s51test__rate", "s51test__tag"]
    try:
        config.add(names[0], "a level", IntParam(2, lambda v: v >= 0))
        config.add(names[1], "a color", EnumStr("blue", ["red"]))
        config.add(names[2], "a switch", BoolParam(False))
        config.add(names[3], "a rate", FloatParam(0.5))
        config.add(names[4], "a tag", StrParam("x"))
        assert (config.s51test__level, config.s51test__color, config.s51test__on) == (
            2,
            "blue",
            False,
        )
        with config.change_flags(s51test__level="7", s51test__on="true", s51test__rate="2"):
            assert (config.s51test__level, config.s51test__on, config.s51test__rate) == (
                7,
                True,
                2.0,
            )
        assert config.s51test__level == 2 and config.s51test__tag == "x"
        with pytest.raises(ValueError, match=r"Invalid value \(-1\)"):
            config.s51test__level = -1
        with pytest.raises(ValueError, match=r"Invalid value \('green'\)"):
            config.s51test__color = "green"
        with pytest.raises(AttributeError, match="already registered"):
            config.add(names[0], "again", IntParam(1))
        with pytest.raises(ValueError, match="Dot-based"):
            config.add("s51test.dotted", "dotted", ConfigParam(1))
        with pytest.raises(ValueError, match="Invalid value"):
            config.add("s51test__bad", "bad default", ConfigParam(1, validate=lambda v: v > 1))
        assert "s51test__bad" not in FLAGS
        assert "s51test__color" in str(config)
    finally:
        for name in names:
            FLAGS.pop(name, None)
        config._values.clear()
    param = ConfigParam("A", apply=str.lower, mutable=False)
    param.__set__(None, "B")
    assert param.val == "b"
    with pytest.raises(Exception, match="Can't change"):
        param.__set__(None, "C")
    with pytest.raises(ValueError, match="Non-str value"):
        EnumStr("red", ["red", 12])
    device = DeviceParam("cpu")
    assert device.apply("cuda1") == "cuda1" and device.apply("opencl0:0") == "opencl0:0"
    with pytest.raises(ValueError, match="old GPU back-end"):
        device.apply("gpu0")
    assert short_platform("3.2.0-70.1-generic", "Linux-3.2.0-70.1-generic-x86_64") == (
        "Linux-3.2--generic-x86_64"
    )


def test_print_test_value_puts_a_variables_test_value_under_its_name():
    # Theano's flag, as its debugging FAQ uses it.
    x, y = tt.dscalar("x"), tt.dvector("y")
    x.tag.test_value = 42
    assert repr(x) == "x" and config.print_test_value is False
    with config.change_flags(print_test_value=True):
        assert repr(x) == f"x\n{np.asarray(42.0)!r}"
        assert repr(y) == "y"  # no test value: the name alone
        with config.change_flags(compute_test_value="raise"):
            z = x + 1  # computed on build, as its test value
        assert repr(z) == f"{z}\n{np.asarray(43.0)!r}"
    assert repr(x) == "x"
