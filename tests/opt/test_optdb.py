"""The global optdb: its layout, the registration helpers and the modes that query it."""

import warnings

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import config
from theano_dag.compile import mode as mode_mod
from theano_dag.compile.mode import FAST_COMPILE, FAST_RUN, Mode, get_mode
from theano_dag.gradient.ops import grad_clip, zero_grad
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.identity_ops import deep_copy_op, view_op
from theano_dag.opt import (
    OptimizationWarning,
    Query,
    build_optdb,
    local_optimizer,
    optdb,
    register_canonicalize,
    register_specialize,
    register_stabilize,
    register_useless,
)
from theano_dag.opt.optdb import PIPELINE
from theano_dag.scalar import Composite
from theano_dag.tensor.elemwise import Elemwise

from .rewrite_helpers import count_calls, ops_of

PY_FAST_RUN = Mode(linker="py", optimizer="fast_run")
# The register_* helpers and the stage each puts a rule in.
REGISTER_HELPERS = [
    (register_canonicalize, "canonicalize"),
    (register_stabilize, "stabilize"),
    (register_specialize, "specialize"),
    (register_useless, "useless"),
]


def test_layout_reads_like_theanos():
    positions = optdb.positions()
    expected = {
        "merge1": 0,
        "canonicalize": 1,
        "stabilize": 1.5,
        "specialize": 2,
        "merge2": 49,
        "add_destroy_handler": 49.5,
        "merge3": 100,
    }
    assert {k: positions[k] for k in expected} == expected
    assert 2 < positions["elemwise_fusion"] < positions["merge2"]
    assert positions["insert_inplace"] >= 50
    assert [name for _, name, _, _ in PIPELINE] == sorted(positions, key=positions.get)


def test_fast_run_and_fast_compile_queries():
    fast_run = [o.name for o in optdb.query(Query(include=["fast_run"]))]
    # Every pass but the engines' lowering, which a Mode adds by its engine's tag.
    assert fast_run == [name for _, name, _, tags in PIPELINE if "lowering" not in tags]
    assert fast_run[-1] == "merge3"
    fast_compile = [o.name for o in optdb.query(Query(include=["fast_compile"]))]
    assert fast_compile == ["merge1", "useless", "canonicalize", "merge1.2", "lazy_branches"]
    canon = optdb.query(Query(include=["fast_compile"]))[2]
    names = {o.name for o in canon.local_optimizers}
    assert "local_add_zero" in names and "local_mul_canonizer" not in names


def test_every_rewrite_name_is_registered_once_per_db():
    db = build_optdb()
    with pytest.raises(ValueError, match="'merge1' is already the name"):
        db.register("merge1", optdb["merge1"].__class__(), 0)
    with pytest.raises(ValueError, match="'local_add_zero' is already the name"):
        register_canonicalize(
            local_optimizer(None)(lambda fg, n: False), name="local_add_zero", db=db
        )


def test_fresh_optdbs_are_independent():
    db1, db2 = build_optdb(), build_optdb()

    @register_specialize(db=db1)
    @local_optimizer([Elemwise])
    def local_only_in_db1(fgraph, node):
        return False

    assert "local_only_in_db1" in db1["specialize"]
    assert "local_only_in_db1" not in db2["specialize"]
    assert "local_only_in_db1" not in optdb["specialize"]


@pytest.mark.parametrize("register, stage", REGISTER_HELPERS)
def test_register_helpers_put_a_rule_where_function_uses_it(register, stage):
    db = build_optdb()

    # (a rule no standard rewrite undoes: expm1(x) + 1 would go back to exp(x))
    @register("my_tag", db=db)
    @local_optimizer([tt.sin])
    def local_sin_to_cos(fgraph, node):
        return [tt.cos(np.pi / 2 - node.inputs[0])]

    x = tt.dvector("x")
    fg = FunctionGraph([x], [tt.sin(x)])
    db.query(Query(include=[stage])).optimize(fg)
    assert "Elemwise{cos,no_inplace}" in ops_of(fg)
    if stage == "useless":  # a useless-code rule also runs in canonicalize
        assert "local_sin_to_cos" in db["canonicalize"]


@pytest.mark.parametrize("register, stage", REGISTER_HELPERS)
def test_a_users_rule_tracking_no_op_meets_every_node(register, stage):
    # A rule tracking no op (None) is tried on every node of its stage, whatever the
    # index of the others, and its replacement (one Variable) is made.
    db = build_optdb()
    met = []

    @register(db=db)
    @local_optimizer(None)
    def local_any_sin_to_cos(fgraph, node):
        met.append(node.op)
        if node.op == tt.sin:
            return tt.cos(np.pi / 2 - node.inputs[0])
        return None

    x = tt.dvector("x")
    fg = FunctionGraph([x], [tt.exp(tt.sin(x)) * 3])
    db.query(Query(include=[stage])).optimize(fg)
    assert "Elemwise{cos,no_inplace}" in ops_of(fg) and "Elemwise{sin,no_inplace}" not in ops_of(fg)
    assert {tt.sin, tt.exp, tt.mul} <= set(met)


def test_fast_compile_mode_skips_the_expensive_stages():
    x, y = tt.dvector("x"), tt.dvector("y")
    out = tt.exp(x) * y + 0
    f = theano_dag.function([x, y], out, mode="FAST_COMPILE")
    assert ops_of(f.maker.fgraph) == ["Elemwise{exp,no_inplace}", "Elemwise{mul,no_inplace}"]
    g = theano_dag.function([x, y], out, mode=PY_FAST_RUN)
    assert len(g.maker.fgraph.apply_nodes) == 1
    np.testing.assert_allclose(f(np.ones(2), np.ones(2)), g(np.ones(2), np.ones(2)))


def test_mode_including_excluding_requiring():
    x, y = tt.dvector("x"), tt.dvector("y")
    out = tt.exp(x) * y + 0

    def n_composites(mode):
        f = theano_dag.function([x, y], out, mode=mode)
        return sum(
            isinstance(n.op, Elemwise) and isinstance(n.op.scalar_op, Composite)
            for n in f.maker.fgraph.apply_nodes
        )

    assert n_composites(PY_FAST_RUN) == 1
    assert n_composites(PY_FAST_RUN.excluding("fusion")) == 0
    # FAST_COMPILE plus the fusion pass
    assert n_composites(Mode(linker="py", optimizer="fast_compile").including("fusion")) == 1
    # requiring 'merge': only the merges run, so the + 0 stays
    f = theano_dag.function([x, y], out, mode=PY_FAST_RUN.requiring("merge"))
    assert "Elemwise{add,no_inplace}" in ops_of(f.maker.fgraph)


def test_config_mode_is_the_default():
    x = tt.dvector("x")
    with config.change_flags(mode="FAST_COMPILE"):
        f = theano_dag.function([x], tt.exp(x) * 1)
    assert ops_of(f.maker.fgraph) == ["Elemwise{exp,no_inplace}"]
    assert get_mode("FAST_RUN") is FAST_RUN and get_mode("FAST_COMPILE") is FAST_COMPILE
    with config.change_flags(optimizer_excluding="fusion:inplace"):
        f = theano_dag.function([x], tt.exp(tt.sin(x)))
    assert ops_of(f.maker.fgraph) == ["Elemwise{sin,no_inplace}", "Elemwise{exp,no_inplace}"]


def test_standard_optimizer_names_query_the_optdb():
    assert mode_mod.get_optimizer("fast_run").include == {"fast_run": None}
    x = tt.dvector("x")
    f = theano_dag.function([x], tt.log(1 + x), mode=Mode(linker="py", optimizer="stabilize"))
    assert ops_of(f.maker.fgraph) == ["Elemwise{log1p,no_inplace}"]
    f = theano_dag.function([x], tt.log(1 + x * 1), mode=Mode(linker="py", optimizer="merge"))
    assert "Elemwise{mul,no_inplace}" in ops_of(f.maker.fgraph)


def test_identity_ops_are_removed():
    x = tt.dvector("x")
    outs = [tt.exp(view_op(x)), tt.exp(deep_copy_op(x)) * zero_grad(x), tt.sin(grad_clip(x, -1, 1))]
    f = theano_dag.function([x], outs, mode=PY_FAST_RUN)
    names = " ".join(ops_of(f.maker.fgraph))
    for gone in ("ViewOp", "DeepCopyOp", "ZeroGrad", "GradClip"):
        assert gone not in names
    a = np.array([0.5, -2.0])
    np.testing.assert_allclose(f(a)[1], np.exp(a) * a)


def test_a_failing_rewrite_is_reported_and_rolled_back():
    db = build_optdb()

    @register_canonicalize(db=db)
    @local_optimizer([tt.exp])
    def local_broken(fgraph, node):
        raise RuntimeError("broken on purpose")

    x = tt.dvector("x")
    fg = FunctionGraph([x], [tt.exp(x) * 1])
    with config.change_flags(on_opt_error="warn"), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        db.query(Query(include=["fast_run"])).optimize(fg)
    assert any(
        issubclass(m.category, OptimizationWarning) and "local_broken" in str(m.message) for m in w
    )
    assert "Elemwise{exp" in ops_of(fg)[0]  # the rest of the pipeline still ran
    with config.change_flags(on_opt_error="raise"), pytest.raises(RuntimeError, match="broken"):
        db.query(Query(include=["fast_run"])).optimize(FunctionGraph([x], [tt.exp(x)]))


def test_cxx_only_rewrites_need_a_compiler():
    db = build_optdb()

    @register_specialize("cxx_only", db=db)
    @local_optimizer([tt.exp])
    def local_needs_c(fgraph, node):
        return [tt.expm1(node.inputs[0]) + 1]

    x = tt.dvector("x")
    for cxx, present in (("", False), ("gcc", True)):
        with config.change_flags(cxx=cxx):
            fg = FunctionGraph([x], [tt.exp(x)])
            db.query(Query(include=["specialize"])).optimize(fg)
        assert ("Elemwise{expm1,no_inplace}" in ops_of(fg)) is present


def test_optimization_time_grows_linearly():
    # the same elementwise chain, 10x longer, must not take much more than 10x the work
    def opt_calls(n):
        xs = [tt.dvector(f"x{k}") for k in range(4)]
        out = xs[0]
        for k in range(n):
            out = tt.exp(out * xs[k % 4] + 0) if k % 3 else out * 1 + xs[(k + 1) % 4]
        fg = FunctionGraph(xs, [out])
        q = optdb.query(Query(include=["fast_run"]))
        return count_calls(q.optimize, fg)

    opt_calls(20)
    small, big = opt_calls(150), opt_calls(1500)
    assert big < 25 * small, (small, big)
