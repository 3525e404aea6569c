"""Optimizer databases: registration, tags, Query include/require/exclude/subquery,
SequenceDB positions, EquilibriumDB, LocalGroupDB and the cxx_only tag."""

import math

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode, optdb
from theano_dag.config import config
from theano_dag.graph.basic import is_same_graph
from theano_dag.graph.fg import FunctionGraph
from theano_dag.opt import (
    DB,
    EquilibriumDB,
    EquilibriumOptimizer,
    LocalGroupDB,
    LocalOptGroup,
    MergeOptimizer,
    PatternSub,
    ProxyDB,
    Query,
    SeqOptimizer,
    SequenceDB,
    TopoDB,
    TopoOptimizer,
    optimizer,
)

from .toy_ops import add, double, exp, log, mul, neg


def nop(name="nop"):
    @optimizer
    def f(fgraph):
        pass

    f.__name__ = name
    return f


def names(opts):
    return [o.name for o in opts]


def test_register_and_lookup():
    db = DB()
    a, b = nop(), nop()
    db.register("a", a, "fast_run", "stable")
    db.register("b", b, "fast_run")
    assert "a" in db and "stable" in db and "missing" not in db
    assert db["a"] is a and a.name == "a"
    assert db.names() == ["a", "b"]
    assert set(db.tags_of("a")) >= {"a", "fast_run", "stable"}
    with pytest.raises(KeyError, match="Nothing registered as 'missing'"):
        db["missing"]
    with pytest.raises(ValueError, match="'fast_run' is a tag of 2 objects; use query"):
        db["fast_run"]


def test_register_errors():
    db = DB()
    db.register("merge1", nop(), "fast_run")
    with pytest.raises(
        ValueError, match="^The name 'merge1' is already the name of another registered"
    ):
        db.register("merge1", nop())
    with pytest.raises(ValueError, match="'fast_run' is already a tag"):
        db.register("fast_run", nop())
    with pytest.raises(
        ValueError,
        match="The tag 'merge1' given to register\\('other'\\) is the name of a registered",
    ):
        db.register("other", nop(), "merge1")
    with pytest.raises(TypeError, match="is not an optimizer, local optimizer or DB"):
        db.register("x", lambda fg: None)
    with pytest.raises(TypeError, match="tags must be strings"):
        db.register("y", nop(), 3)
    same = nop()
    db.register("first", same)
    with pytest.raises(ValueError, match="already registered as 'first'"):
        db.register("second", same)


def test_query_include_require_exclude():
    db = DB()
    for name, tags in [
        ("a", ("fast_run", "stable")),
        ("b", ("fast_run", "inplace")),
        ("c", ("fast_compile", "stable")),
        ("d", ("fast_run", "stable", "inplace")),
    ]:
        db.register(name, nop(), *tags)
    assert names(db.query(Query(include=["fast_run"]))) == ["a", "b", "d"]
    assert names(db.query(Query(include=["fast_run", "fast_compile"]))) == ["a", "b", "d", "c"]
    assert names(db.query(Query(include=["fast_run"], require=["stable"]))) == ["a", "d"]
    assert names(db.query(Query(include=["fast_run"], exclude=["inplace"]))) == ["a"]
    assert names(db.query("+fast_run", "&stable", "-inplace")) == ["a"]
    assert names(db.query("+c", "+a")) == ["c", "a"]  # a name works as a tag
    with pytest.raises(ValueError, match=r"must start with '\+' \(include\)"):
        db.query("fast_run")
    with pytest.raises(TypeError, match="either one Query or tag strings"):
        db.query(Query(["fast_run"]), "+a")


def test_query_methods_make_new_queries():
    q = Query(include="fast_run")
    q2 = q.excluding("inplace").requiring("stable").including("fast_compile")
    assert list(q.include) == ["fast_run"] and not q.exclude and not q.require
    assert list(q2.include) == ["fast_run", "fast_compile"]
    assert list(q2.exclude) == ["inplace"] and list(q2.require) == ["stable"]
    assert q2 == Query(["fast_run", "fast_compile"], ["stable"], ["inplace"])
    assert q.position_cutoff == math.inf
    with pytest.raises(TypeError, match=r"include tags must be strings \(or None\), got 1"):
        Query(include=[1])


def test_query_including_none_selects_nothing():
    # Theano's tests write Query(include=[None]) for a mode without rewrites.
    db = SequenceDB()
    db.register("o1", nop(), 0, "fast_run")
    q = Query(include=[None], exclude=["cxx_only", "BlasOpt"])
    assert list(db.query(q)) == [] and list(optdb.query(q)) == []
    x = tt.dvector("x")
    y = tt.exp(x) * 1.0
    f = theano_dag.function([x], y, mode=Mode("cpu", q))
    # mul(exp(x), 1) is left as written: no rewrite ran.
    ops = [n.op.scalar_op for n in f.maker.fgraph.toposort() if hasattr(n.op, "scalar_op")]
    assert [type(op).__name__ for op in ops] == ["Exp", "Mul"]
    np.testing.assert_allclose(f(np.array([0.0, 1.0])), np.exp([0.0, 1.0]))


def test_subquery_reaches_sub_db():
    inner = DB()
    inner.register("i1", nop(), "fast_run", "inplace")
    inner.register("i2", nop(), "fast_run")
    outer = SequenceDB()
    outer.register("inner", inner, 1, "fast_run")
    outer.register("o1", nop(), 0, "fast_run")
    seq = outer.query(Query(include=["fast_run"]))
    assert isinstance(seq, SeqOptimizer)
    assert [getattr(o, "name", None) for o in seq] == ["o1", "inner"]
    sub = seq[1]
    assert names(sub) == ["i1", "i2"]
    seq = outer.query(
        Query(include=["fast_run"], subquery={"inner": Query(["fast_run"], exclude=["inplace"])})
    )
    assert names(seq[1]) == ["i2"]
    # Without a subquery, the outer query goes down unchanged: exclusion applies inside.
    seq = outer.query(Query(include=["fast_run"], exclude=["inplace"]))
    assert names(seq[1]) == ["i2"]


def test_sequence_db_positions():
    db = SequenceDB()
    db.register("merge3", nop(), 100, "fast_run")
    db.register("merge1", nop(), 0, "fast_run")
    db.register("special", nop(), 2, "fast_run")
    db.register("canon", nop(), "fast_run", position=1)
    db.register("tail", nop(), "last", "fast_run")
    assert db.positions() == {"merge3": 100, "merge1": 0, "special": 2, "canon": 1, "tail": 101}
    assert names(db.query("+fast_run")) == ["merge1", "canon", "special", "merge3", "tail"]
    assert names(db.query(Query(["fast_run"], position_cutoff=2))) == ["merge1", "canon"]
    assert names(db.query("+fast_run", position_cutoff=1.5)) == ["merge1", "canon"]
    with pytest.raises(TypeError, match="missing the position"):
        db.register("nopos", nop())
    with pytest.raises(TypeError, match="position must be a number or 'last'"):
        db.register("badpos", nop(), "fast_run")
    text = str(db)
    assert text.index("merge1") < text.index("canon") < text.index("merge3")


def test_sequence_db_extra_optimizations():
    db = SequenceDB()
    db.register("a", nop(), 1, "fast_run")
    extra = nop("extra")
    seq = db.query(Query(["fast_run"]).register((extra, 0.5)))
    assert list(seq) == [extra, db["a"]]


def test_sequence_db_runs_and_reports(xyz=None):
    x = double("x")
    db = SequenceDB()
    db.register("merge", MergeOptimizer(), 0, "fast_run")
    eq = EquilibriumDB()
    db.register("canonicalize", eq, 1, "fast_run")
    eq.register("neg_neg", PatternSub((neg, (neg, "x")), "x"), "fast_run")
    eq.register("log_exp", PatternSub((log, (exp, "x")), "x"), "fast_run", "stable")
    fg = FunctionGraph([x], [add(neg(neg(x)), log(exp(neg(neg(x)))))])
    opt = db.query("+fast_run")
    assert isinstance(opt[1], EquilibriumOptimizer)
    assert opt[1].name == "canonicalize"
    opt.optimize(fg)
    (X,) = fg.inputs
    assert is_same_graph(fg.outputs[0], add(X, X))
    # Everything registered in an EquilibriumDB also carries the DB's name as a tag.
    assert "canonicalize" in eq.tags_of("neg_neg")
    fg = FunctionGraph([x], [log(exp(neg(neg(x))))])
    db.query("+fast_run", canonicalize=Query(["stable"])).optimize(fg)
    assert is_same_graph(fg.outputs[0], neg(neg(fg.inputs[0])))


def test_use_db_name_as_tag():
    eq = EquilibriumDB()
    seq = SequenceDB()
    seq.register("canonicalize", eq, 1, "fast_run")
    eq.register("r1", PatternSub((neg, (neg, "x")), "x"))
    eq.register("r2", PatternSub((log, (exp, "x")), "x"), use_db_name_as_tag=False)
    assert names(eq.query("+canonicalize").get_local_optimizers()) == ["r1"]
    with pytest.raises(TypeError, match="unexpected arguments"):
        eq.register("r3", PatternSub((exp, (log, "x")), "x"), color="red")


def test_equilibrium_db_final_and_cleanup():
    eq = EquilibriumDB(max_use_ratio=3)
    merge = MergeOptimizer()
    eq.register("merge", merge, "fast_run", cleanup=True)
    final = nop("final")
    eq.register("final", final, "fast_run", final_opt=True)
    eq.register("rule", PatternSub((neg, (neg, "x")), "x"), "fast_run")
    opt = eq.query("+fast_run")
    assert opt.cleanup_optimizers == [merge] and opt.final_optimizers == [final]
    assert opt.max_use_ratio == 3
    with pytest.raises(ValueError, match="both final_opt and cleanup"):
        eq.register("both", nop(), final_opt=True, cleanup=True)


def test_local_group_db_order():
    group = LocalGroupDB()
    r1 = PatternSub((neg, (neg, "x")), "x")
    r2 = PatternSub((log, (exp, "x")), "x")
    r3 = PatternSub((exp, (log, "x")), "x")
    group.register("r1", r1, "fast_run", position=2)
    group.register("r2", r2, "fast_run", position=1)
    group.register("r3", r3, "fast_run")  # 'last'
    got = group.query("+fast_run")
    assert isinstance(got, LocalOptGroup) and list(got.opts) == [r2, r1, r3]
    with pytest.raises(TypeError, match="is not a local optimizer"):
        group.register("g", nop())


def test_topo_db_and_proxy_db():
    group = LocalGroupDB()
    group.register("neg_neg", PatternSub((neg, (neg, "x")), "x"), "fast_run")
    topo = TopoDB(group, order="out_to_in")
    nav = topo.query("+fast_run")
    assert isinstance(nav, TopoOptimizer) and nav.order == "out_to_in"
    x = double("x")
    fg = FunctionGraph([x], [mul(neg(neg(x)), x)])
    nav.optimize(fg)
    (X,) = fg.inputs
    assert is_same_graph(fg.outputs[0], mul(X, X))
    proxy = ProxyDB(group)
    assert list(proxy.query("+fast_run").opts) == list(group.query("+fast_run").opts)
    seq = SequenceDB()
    seq.register("twice_a", ProxyDB(topo), 0, "fast_run")
    seq.register("twice_b", ProxyDB(topo), 1, "fast_run")
    assert len(seq.query("+fast_run")) == 2
    with pytest.raises(TypeError, match="expected a DB"):
        ProxyDB(group.query("+fast_run"))


def test_cxx_only_left_out_without_compiler():
    db = SequenceDB()
    db.register("py", nop(), 0, "fast_run")
    db.register("c_kernel", nop(), 1, "fast_run", "cxx_only")
    with config.change_flags(cxx=""):
        assert names(db.query("+fast_run")) == ["py"]
    with config.change_flags(cxx="/usr/bin/gcc"):
        assert names(db.query("+fast_run")) == ["py", "c_kernel"]


def test_registries_are_independent():
    a, b = SequenceDB(), SequenceDB()
    a.register("merge1", MergeOptimizer(), 0, "fast_run")
    b.register("merge1", MergeOptimizer(), 0, "fast_run")  # same name, other registry
    assert a["merge1"] is not b["merge1"]
    assert "merge1" not in DB()
