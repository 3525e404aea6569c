"""config's Theano semantics: ``change_flags`` as Theano's class-based context manager
(restored by ``__exit__`` only, picklable, a decorator too) and ``THEANO_FLAGS`` /
``.theanorc`` read as Theano reads them (``load_config`` with and without the alias)."""

import gc
import pickle
import threading
import warnings

import pytest

from theano_dag import config
from theano_dag.config import ChangeFlags, Config, load_config

# A bound for a wait that would otherwise hang, never what a test checks.
HANG_S = 120


def test_change_flags_restores_on_exit_only_never_when_collected():
    assert not config.is_set("compute_test_value")
    ctx = config.change_flags(compute_test_value="raise")
    ctx.__enter__()
    try:
        del ctx
        gc.collect()  # a generator-based manager would run its finally here
        assert config.compute_test_value == "raise"
    finally:
        config._values.pop("compute_test_value", None)


def test_change_flags_reentered_as_pymc3_models_do():
    # PyMC3's `with model:` makes and enters a new change_flags on each entry, and exits
    # it at the block's end; the inner exit must give back the outer block's value.
    outer = config.change_flags(compute_test_value="raise")
    outer.__enter__()
    inner = config.change_flags(compute_test_value="raise")
    inner.__enter__()
    inner.__exit__(None, None, None)
    assert config.compute_test_value == "raise"
    outer.__exit__(None, None, None)
    assert config.compute_test_value == "off" and not config.is_set("compute_test_value")


def test_change_flags_restores_a_set_flag_and_only_its_own_flags():
    with config.change_flags(floatX="float32"):
        with config.change_flags(floatX="float64", on_opt_error="raise"):
            config.profile = True  # set inside the block by other code: stays
            assert (config.floatX, config.on_opt_error) == ("float64", "raise")
        assert (config.floatX, config.on_opt_error, config.profile) == ("float32", "warn", True)
    assert config.floatX == "float64" and not config.is_set("floatX")
    config._values.pop("profile")


def test_change_flags_checks_names_and_values_when_made():
    with pytest.raises(AttributeError, match="config has no flag 'floatx'"):
        config.change_flags(floatx="float32")
    with pytest.raises(ValueError, match="config.floatX: 'float8' is not one of"):
        config.change_flags({"floatX": "float8"})
    assert not config.is_set("floatX")


def test_change_flags_pickles_with_its_flags():
    ctx = config.change_flags({"floatX": "float32"}, compute_test_value="raise")
    ctx.__enter__()
    try:
        back = pickle.loads(pickle.dumps({"model_state": ctx}))["model_state"]
    finally:
        ctx.__exit__(None, None, None)
    assert isinstance(back, ChangeFlags)
    assert back.flags == {"floatX": "float32", "compute_test_value": "raise"}
    with back:  # it changes the global config
        assert (config.floatX, config.compute_test_value) == ("float32", "raise")
    assert config.floatX == "float64"


def test_change_flags_as_a_decorator_on_each_call():
    @config.change_flags(floatX="float32")
    def depth(n):
        return [config.floatX] if n == 0 else [config.floatX, *depth(n - 1)]

    assert depth(2) == ["float32"] * 3
    assert config.floatX == "float64" and not config.is_set("floatX")
    assert depth.__name__ == "depth"


def test_change_flags_restores_after_an_exception():
    with pytest.raises(KeyError):
        with config.change_flags(floatX="float32"):
            raise KeyError("x")
    assert config.floatX == "float64"


def _loaded(environ, theano):
    cfg = Config()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_config(cfg, environ, theano=theano)
    return cfg, [str(w.message) for w in caught]


def test_theano_flags_syntax(tmp_path):
    flags = "floatX=float32, traceback.limit=5,'optimizer_excluding=a:b',profile,floatX=float32"
    env = {"THEANO_FLAGS": flags, "HOME": str(tmp_path), "THEANORC": ""}
    cfg, msgs = _loaded(env, theano=True)
    assert (cfg.floatX, cfg.traceback__limit, cfg.optimizer_excluding) == ("float32", 5, "a:b")
    assert msgs == ["THEANO_FLAGS: 'profile' has no value, it is ignored"]
    assert not cfg.profile


def test_theanorc_interpolates_theanos_names_and_flags_win(tmp_path):
    rc = tmp_path / "rc"
    rc.write_text("[global]\ncompiledir = /tmp/%(USER)s/td\nfloatX = float32\n")
    env = {"THEANORC": str(rc), "THEANO_FLAGS": "floatX=float64", "USER": "ada"}
    cfg, msgs = _loaded(env, theano=True)
    assert (cfg.compiledir, cfg.floatX) == ("/tmp/ada/td", "float64")
    assert msgs == []


def test_without_the_alias_theano_flags_warn_and_are_not_read(tmp_path):
    rc = tmp_path / "rc"
    rc.write_text("[global]\nfloatX = float32\n")
    env = {"THEANORC": str(rc), "THEANO_FLAGS": "floatX=float32", "THEANO_DAGRC": ""}
    cfg, msgs = _loaded(env, theano=False)
    assert cfg.floatX == "float64" and not cfg.is_set("floatX")
    assert msgs == [
        "THEANO_FLAGS is set but theano_dag reads THEANO_DAG_FLAGS (THEANO_FLAGS only under "
        "the theano import alias: python -m theano_dag.compat install-theano-alias)"
    ]


def test_theano_dag_flags_stay_strict():
    with pytest.raises(ValueError, match="config.device: 'cuda' is not one of cpu, opencl"):
        _loaded({"THEANO_DAG_FLAGS": "device=cuda", "THEANO_DAGRC": ""}, theano=False)


def test_change_flags_exited_out_of_order_leave_the_flag_as_before_both():
    # Two functions compiling at once in two threads each enter and exit a block of
    # compute_test_value; the first to enter may exit first. The flag must then keep the
    # second block's value until it exits, and end as it was before both.
    first = config.change_flags(compute_test_value="raise")
    second = config.change_flags(compute_test_value="warn")
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert config.compute_test_value == "warn"
    second.__exit__(None, None, None)
    assert config.compute_test_value == "off" and not config.is_set("compute_test_value")


def test_change_flags_of_two_threads_interleaved_restore_the_flag():
    entered, exited = threading.Event(), threading.Event()
    seen = []

    def second():
        entered.wait(HANG_S)
        with config.change_flags(floatX="float16"):
            exited.set()  # the first block exits while this one is still open
            done.wait(HANG_S)
            seen.append(config.floatX)

    done = threading.Event()
    t = threading.Thread(target=second)
    t.start()
    with config.change_flags(floatX="float32"):
        entered.set()
        exited.wait(HANG_S)
    seen.append(config.floatX)  # the second block's value, while it is open
    done.set()
    t.join(HANG_S)
    assert seen == ["float16", "float16"]
    assert config.floatX == "float64" and not config.is_set("floatX")
