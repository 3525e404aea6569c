"""Mode, the optimizer/linker registries, and get_mode."""

import numpy as np
import pytest
from compile_toys import neg, vec

import theano_dag.tensor as tt
from theano_dag.compile import function
from theano_dag.compile import mode as mode_mod
from theano_dag.compile.mode import (
    FAST_COMPILE,
    FAST_RUN,
    Mode,
    PerformOnly,
    get_linker,
    get_mode,
    register_linker,
    register_mode,
    register_optimizer,
)
from theano_dag.config import config
from theano_dag.engines.basic import PerformLinker
from theano_dag.graph.rewriting.basic import GlobalOptimizer
from theano_dag.graph.rewriting.db import Query
from theano_dag.opt import local_optimizer
from theano_dag.opt.optdb import build_optdb, register_canonicalize


@pytest.fixture
def registries(monkeypatch):
    """Fresh copies of the registries, so tests do not leak registrations."""
    monkeypatch.setattr(mode_mod, "predefined_linkers", dict(mode_mod.predefined_linkers))
    monkeypatch.setattr(mode_mod, "predefined_optimizers", dict(mode_mod.predefined_optimizers))
    monkeypatch.setattr(mode_mod, "predefined_modes", dict(mode_mod.predefined_modes))
    monkeypatch.setattr(mode_mod, "_OPTDB", [])


class FakeQuery:
    """What the optimizer database's Query looks like to Mode."""

    def __init__(self, include=(), exclude=()):
        self.include, self.exclude = tuple(include), tuple(exclude)

    def including(self, *tags):
        return FakeQuery(self.include + tags, self.exclude)

    def excluding(self, *tags):
        return FakeQuery(self.include, self.exclude + tags)

    def requiring(self, *tags):
        return FakeQuery(self.include + tuple(f"req:{t}" for t in tags), self.exclude)


class FakeDB:
    def __init__(self):
        self.queries = []

    def query(self, q):
        self.queries.append(q)
        db = self

        class Opt:
            def optimize(self, fgraph):
                db.ran = (q.include, q.exclude, len(fgraph.apply_nodes))

        return Opt()


def test_predefined_modes():
    assert get_mode("PerformOnly") is PerformOnly
    assert get_mode("FAST_RUN") is FAST_RUN and get_mode("FAST_COMPILE") is FAST_COMPILE
    assert PerformOnly.optimizer is None
    assert isinstance(PerformOnly.linker, PerformLinker)
    # Each access gives a fresh linker: functions never share one.
    assert PerformOnly.linker is not PerformOnly.linker


def test_get_mode_errors():
    with pytest.raises(ValueError, match="Unknown mode 'FASTEST'; registered modes: "):
        get_mode("FASTEST")
    with pytest.raises(TypeError, match="mode must be a Mode or a mode name, got int: 3"):
        get_mode(3)


def test_default_linker_follows_config():
    m = Mode(optimizer=None)
    with config.change_flags(linker="py"):
        assert isinstance(m.linker, PerformLinker)
    assert str(m) == "Mode(linker=None, optimizer=None)"


def test_unknown_linker(registries):
    with pytest.raises(ValueError, match="Unknown linker 'warp'; registered linkers: "):
        _ = Mode(linker="warp", optimizer=None).linker


def test_register_linker(registries):
    register_linker("test_nogc", lambda: PerformLinker(allow_gc=False))
    assert get_linker("test_nogc").allow_gc is False
    with pytest.raises(ValueError, match="Linker name already taken: 'test_nogc'"):
        register_linker("test_nogc", PerformLinker)
    register_linker("test_nogc", PerformLinker(allow_gc=True), override=True)
    lk = get_linker("test_nogc")
    assert lk.allow_gc is True and lk is not mode_mod.predefined_linkers["test_nogc"]


def test_py_nogc_is_predefined():
    assert get_linker("py_nogc").allow_gc is False and get_linker("py").allow_gc is config.allow_gc


def test_optimizer_registry_and_tags(registries):
    db = FakeDB()
    mode_mod.register_optdb(db)
    register_optimizer("fast_run", FakeQuery(include=["fast_run"]), override=True)
    m = Mode(linker="py", optimizer="fast_run")
    m2 = m.excluding("fusion").including("fast_compile")
    assert m.provided_optimizer == "fast_run"  # the original is unchanged
    assert m2.provided_optimizer.include == ("fast_run", "fast_compile")
    assert m2.provided_optimizer.exclude == ("fusion",)
    x = vec("x")
    f = function([x], neg(x), mode=m2)
    assert db.ran == (("fast_run", "fast_compile"), ("fusion",), 1)
    assert f([1.0]).tolist() == [-1.0]
    assert m.requiring("stable").provided_optimizer.include == ("fast_run", "req:stable")


def test_optimizer_name_errors(registries):
    with pytest.raises(ValueError, match="Unknown optimizer 'turbo'; registered optimizers: "):
        _ = Mode(linker="py", optimizer="turbo").optimizer
    with pytest.raises(ValueError, match="Optimizer name already taken: 'mine'"):
        register_optimizer("mine", None)
        register_optimizer("mine", None)


def test_optimizer_factory_is_called_once(registries):
    calls = []

    class Opt:
        def optimize(self, fgraph):
            pass

    def factory():
        calls.append(1)
        return Opt()

    register_optimizer("lazy", factory)
    m = Mode(linker="py", optimizer="lazy")
    assert isinstance(m.optimizer, Opt) and isinstance(m.optimizer, Opt)
    assert calls == [1]


def test_tags_on_a_non_query_optimizer(registries):
    class Opt:
        def optimize(self, fgraph):
            pass

    with pytest.raises(TypeError, match="Mode.including: the optimizer .* is not a query"):
        Mode(linker="py", optimizer=Opt()).including("fast_run")
    # With no optimizer there is nothing to exclude: same mode back.
    assert PerformOnly.excluding("x").optimizer is None


def test_including_on_no_optimizer_starts_from_the_empty_query():
    # As in Theano (whose optimizer=None is the empty query): Theano's tests build
    # ``get_default_mode().including("canonicalize")`` and expect canonicalize to run
    # with the flag optimizer=None too.
    mode = Mode(linker="py", optimizer=None).including("canonicalize")
    assert mode.provided_optimizer == Query(include=["canonicalize"])
    x = tt.dvector("x")
    f = function([x], (x * 2) / 2, mode=mode)
    assert [type(n.op).__name__ for n in f.maker.fgraph.toposort()] == ["DeepCopyOp"]
    assert f(np.array([1.5, -2.0])).tolist() == [1.5, -2.0]
    plain = function([x], (x * 2) / 2, mode=Mode(linker="py", optimizer=None))
    assert len(plain.maker.fgraph.apply_nodes) == 4  # two dimshuffles, mul, div


def test_register_mode_and_default_mode_flags(registries):
    seen = []

    class Opt:
        def __init__(self, tags=()):
            self.tags = tags

        def including(self, *t):
            seen.append(("in", t))
            return Opt(self.tags + t)

        def excluding(self, *t):
            seen.append(("ex", t))
            return Opt(self.tags + t)

    register_mode("MINE", Mode(linker="py", optimizer=Opt()))
    with pytest.raises(ValueError, match="Mode name already taken: 'MINE'"):
        register_mode("MINE", PerformOnly)
    # config.mode only takes the standard names: stand one in for the test.
    register_mode("PerformOnly", mode_mod.predefined_modes["MINE"], override=True)
    with config.change_flags(
        mode="PerformOnly", optimizer_excluding="a:b", optimizer_including="c"
    ):
        m = get_mode(None)
    assert seen == [("ex", ("a", "b")), ("in", ("c",))]
    assert m.provided_optimizer.tags == ("a", "b", "c")


def _passes(opt):
    return {o.name: o for o in opt.data}


def test_the_optdb_is_queried_once_per_query_db_state_and_flags(monkeypatch):
    db = build_optdb()
    monkeypatch.setattr(mode_mod, "_OPTDB", [db])
    mode = Mode(linker="py", optimizer="fast_run")
    first = mode.optimizer
    # The same query, the DBs and flags unchanged: the same optimizer (no query made).
    assert mode.optimizer is first
    assert Mode(linker="py", optimizer="fast_run").optimizer is first
    assert mode.excluding("fusion").optimizer is not first
    canon = _passes(first)["canonicalize"]
    # A flag an optimizer's constructor reads gives another optimizer while it is set.
    with config.change_flags(on_opt_error="raise"):
        assert mode.optimizer is not first
    assert mode.optimizer is first
    # An attribute of a DB that a query reads.
    db["canonicalize"].max_use_ratio = 3.5
    changed = mode.optimizer
    assert changed is not first
    assert _passes(changed)["canonicalize"].max_use_ratio == 3.5
    assert canon.max_use_ratio != 3.5
    # A rewrite registered after the first compile takes part in the next one.
    x = tt.dvector("x")

    @local_optimizer([tt.sinh])
    def local_sinh_to_cosh(fgraph, node):
        return [tt.cosh(node.inputs[0])]

    f = function([x], tt.sinh(x), mode=mode)
    assert "sinh" in str(f.maker.fgraph.outputs[0].owner.op)
    register_canonicalize(local_sinh_to_cosh, db=db)
    g = function([x], tt.sinh(x), mode=mode)
    assert "cosh" in str(g.maker.fgraph.outputs[0].owner.op)
    assert mode.optimizer is not changed


def test_a_query_with_optimizers_of_its_own_is_not_kept(monkeypatch):
    class Nothing(GlobalOptimizer):
        def apply(self, fgraph):
            pass

    db = build_optdb()
    monkeypatch.setattr(mode_mod, "_OPTDB", [db])
    mode = Mode(linker="py", optimizer=FAST_RUN._optimizer.register((Nothing(), 99)))
    assert mode.optimizer is not mode.optimizer
