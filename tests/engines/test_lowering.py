"""Engine lowering as optdb passes (theano_dag.opt.lowering), linkers that only link, and
the one entry point for inner graphs (theano_dag.engines.inner.compile_inner)."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile import function_module
from theano_dag.compile.debugmode import BadOptimization, DebugMode
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode, engine_query, get_optimizer
from theano_dag.compile.sharedvalue import shared
from theano_dag.engines import inner
from theano_dag.engines.basic import PerformLinker
from theano_dag.engines.cpu import CPULinker, tiling
from theano_dag.engines.cpu.tiling import RowTiled
from theano_dag.engines.inner import InnerMode, compile_inner
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import row_loop
from theano_dag.graph.basic import graph_inputs
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.rewriting.db import Query
from theano_dag.opt import optdb

OCL_OK, OCL_WHY = opencl_available()
needs_opencl = pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL device: {OCL_WHY}")

REF = Mode(linker="py", optimizer=None)
rng = np.random.default_rng(5)


def mlp(dtype="float64", sizes=(20, 64, 64, 5)):
    x = tt.matrix("x", dtype=dtype)
    h = x
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = shared((rng.standard_normal((a, b)) / np.sqrt(a)).astype(dtype), name=f"w{k}")
        h = tt.dot(h, w) + shared(rng.standard_normal(b).astype(dtype), name=f"b{k}")
        if k < len(sizes) - 2:
            h = tt.maximum(h, 0)
    return x, h


@pytest.fixture
def small_tiles(monkeypatch):
    # Tiny thresholds, so that small test arrays are split into several tiles.
    monkeypatch.setattr(tiling, "TILE_BYTES", 4096)
    monkeypatch.setattr(tiling, "MIN_TILED_BYTES", 1024)


def tiled_nodes(fgraph):
    return [n for n in fgraph.apply_nodes if isinstance(n.op, RowTiled)]


def pass_names(mode):
    return [getattr(o, "name", None) for o in mode.optimizer]


def fingerprint(fgraph):
    """The graph's structure, by identity: nodes in order with their inputs and outputs."""
    nodes = [
        (n.op, tuple(id(v) for v in n.inputs), tuple(id(v) for v in n.outputs))
        for n in fgraph.toposort()
    ]
    return nodes, [id(v) for v in fgraph.inputs], [id(v) for v in fgraph.outputs]


# -- the passes in the optdb and the Modes' queries ------------------------------------


def test_query_of_each_engine_lists_its_lowering_passes():
    cpu = pass_names(Mode(linker="cpu"))
    assert cpu[-2:] == ["merge3", "cpu_row_tiling"]
    assert "opencl_device_placement" not in cpu
    ocl = pass_names(Mode(linker="opencl"))
    assert ocl[-2:] == ["merge3", "opencl_device_placement"]
    assert "cpu_row_tiling" not in ocl
    dask = pass_names(Mode(linker="dask"))
    assert dask[-4:] == ["merge3", "dask_row_chunks", "dask_inline_elementwise", "dask_gathering"]
    assert "cpu_row_tiling" not in dask and "insert_inplace" not in dask
    py = pass_names(Mode(linker="py"))
    assert py[-1] == "merge3"
    # The global optdb lists them under their tags, lowering last.
    assert [o.name for o in optdb.query(Query(include=["lowering"]))] == [
        "cpu_row_tiling",
        "opencl_device_placement",
        "dask_row_chunks",
        "dask_inline_elementwise",
        "dask_gathering",
    ]


def test_excluding_turns_a_lowering_pass_off(small_tiles):
    x, out = mlp()
    assert "cpu_row_tiling" not in pass_names(Mode(linker="cpu").excluding("row_tiling"))
    assert "opencl_device_placement" not in pass_names(
        Mode(linker="opencl").excluding("device_placement")
    )
    tiled = function([x], out)
    untiled = function([x], out, mode=Mode(linker="cpu").excluding("row_tiling"))
    assert len(tiled_nodes(tiled.maker.fgraph)) == 1
    assert tiled_nodes(untiled.maker.fgraph) == []
    xv = rng.standard_normal((100, 20))
    want = function([x], out, mode=REF)(xv)
    np.testing.assert_allclose(tiled(xv), want, rtol=1e-12)
    np.testing.assert_allclose(untiled(xv), want, rtol=1e-12)


def test_tile_false_and_incremental_leave_the_tiling_out(small_tiles):
    assert "cpu_row_tiling" not in pass_names(Mode(linker=CPULinker(tile=False)))
    assert "cpu_row_tiling" not in pass_names(Mode(linker=CPULinker(incremental=True)))
    q = engine_query(get_optimizer("fast_run"), CPULinker(tile=False))
    assert "cpu" in q.include and "row_tiling" in q.exclude
    x, out = mlp()
    f = function([x], out, incremental=True)
    assert tiled_nodes(f.maker.fgraph) == []
    xv = rng.standard_normal((50, 20))
    np.testing.assert_allclose(f(xv), function([x], out, mode=REF)(xv), rtol=1e-12)


def test_no_rewrites_still_lower():
    # optimizer=None runs the engine's lowering alone (PyTensor's OPT_NONE), as the
    # linkers' accept did before.
    assert pass_names(Mode(linker="cpu", optimizer=None)) == ["cpu_row_tiling"]
    assert pass_names(Mode(linker="opencl", optimizer=None)) == ["opencl_device_placement"]
    assert Mode(linker="py", optimizer=None).optimizer is None


def test_debugmode_checks_the_tiling_pass(small_tiles):
    x, out = mlp()
    mode = DebugMode(linker="cpu")
    f = function([x], out, mode=mode)
    assert len(tiled_nodes(f.maker.fgraph)) == 1
    _prof, checker = mode.last_optimizer_profile
    assert checker.counts["row_tiling"] >= 1  # the replacement went through the checker
    xv = rng.standard_normal((40, 20))
    np.testing.assert_allclose(f(xv), function([x], out, mode=REF)(xv), rtol=1e-12)


def test_debugmode_catches_a_wrong_tiling(small_tiles, monkeypatch):
    def wrong(self, node, inputs, output_storage, params=None):
        good(self, node, inputs, output_storage, params)
        output_storage[0][0] = output_storage[0][0] + 1

    good = RowTiled.perform
    monkeypatch.setattr(RowTiled, "perform", wrong)
    x, out = mlp()
    with pytest.raises(BadOptimization, match="row_tiling"):
        function([x], out, mode=DebugMode(linker="cpu"))


def test_outputs_of_a_tiled_graph_are_not_overwritten_by_the_next_call(small_tiles):
    x, out = mlp()
    f = function([x], [out, out * 2])
    assert len(tiled_nodes(f.maker.fgraph)) == 1
    a, b = rng.standard_normal((60, 20)), rng.standard_normal((60, 20))
    first = f(a)
    kept = [np.array(v, copy=True) for v in first]
    f(b)
    for v, k in zip(first, kept):
        np.testing.assert_array_equal(v, k)


# -- accept leaves the graph as it is, for every engine ---------------------------------


def lowered_graph(mode, x, out):
    """A copy of ``out``'s graph (inputs: ``x`` then the shared variables), rewritten by
    ``mode``, and the shared variables' values."""
    params = [v for v in graph_inputs([out]) if hasattr(v, "get_value")]
    fgraph = FunctionGraph([x, *params], [out], clone=True)
    mode.optimizer.optimize(fgraph)
    return fgraph, [p.get_value() for p in params]


@pytest.mark.parametrize(
    "linker",
    ["py", "cpu", pytest.param("opencl", marks=needs_opencl)],
)
def test_accept_leaves_the_graph_unchanged(linker, small_tiles):
    dtype = "float32" if linker == "opencl" else "float64"
    x, out = mlp(dtype)
    xv = rng.standard_normal((30, 20)).astype(dtype)
    want = function([x], out, mode=REF)(xv)
    mode = Mode(linker=linker)
    fgraph, values = lowered_graph(mode, x, out)
    if linker == "cpu":
        assert len(tiled_nodes(fgraph)) == 1  # lowered: something accept could touch
    before = fingerprint(fgraph)
    lk = mode.linker.accept(fgraph, no_recycling=list(fgraph.outputs))
    assert fingerprint(fgraph) == before
    fn, ins, outs = lk.make_thunk()
    for c, v in zip(ins, [xv, *values]):
        c.data = v
    fn()
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(np.asarray(outs[0].data), want, rtol=tol, atol=tol)


@needs_opencl
def test_opencl_accept_refuses_a_graph_not_placed():
    from theano_dag.engines.opencl.placement import NotPlaced

    x = tt.fvector("x")
    y = tt.exp(tt.sort(x) * 2)  # sort runs on the host: values cross sides
    with theano_dag.config.change_flags(opencl__host_fallback=True):
        mode = Mode(linker="opencl").excluding("device_placement")
        fgraph, _ = lowered_graph(mode, x, y)
        before = fingerprint(fgraph)
        with pytest.raises(NotPlaced, match="'device_placement' did not run"):
            mode.linker.accept(fgraph)
        assert fingerprint(fgraph) == before
        f = function([x], y, mode=Mode(linker="opencl"))
    names = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert "GpuFromHost" in names  # the pass placed the sorted values on the device
    xv = np.array([3, 1, 2], dtype="float32")
    np.testing.assert_allclose(f(xv), np.exp(np.sort(xv) * 2), rtol=1e-6)


@needs_opencl
def test_debugmode_checks_the_placement_pass():
    x = tt.fvector("x")
    y = tt.exp(tt.sort(x) * 2)  # sort runs on the host: its result is copied over
    mode = DebugMode(linker="opencl")
    with theano_dag.config.change_flags(opencl__host_fallback=True):
        f = function([x], y, mode=mode)
    _prof, checker = mode.last_optimizer_profile
    assert checker.counts["opencl_transfer"] >= 1  # each transfer went through the checker
    xv = np.array([3, 1, 2], dtype="float32")
    np.testing.assert_allclose(f(xv), np.exp(np.sort(xv) * 2), rtol=1e-6)


# -- compile_inner: the one entry point for inner graphs --------------------------------


def test_compile_inner_of_variables_and_of_a_fgraph():
    x, y = tt.dvector("x"), tt.dvector("y")
    f = compile_inner([x, y], [x * y + 1, x], InnerMode(CPULinker()))
    got = f(np.arange(3.0), np.full(3, 2.0))
    np.testing.assert_array_equal(got[0], [1.0, 3.0, 5.0])
    np.testing.assert_array_equal(got[1], [0.0, 1.0, 2.0])
    fg = FunctionGraph([x], [tt.exp(x)], clone=True)
    g = compile_inner(fg, mode=InnerMode(PerformLinker()))
    assert g.fgraph is fg  # no optimizer: linked as it is
    np.testing.assert_allclose(g(np.zeros(2))[0], [1.0, 1.0])
    with pytest.raises(TypeError, match="2 inputs called with 1 values"):
        f(np.zeros(3))


@pytest.mark.parametrize("linker", ["py", "cpu"])
def test_inner_function_filters_what_does_not_fit(linker):
    x = tt.TensorType("float64", shape=(None, 2))("x")
    f = compile_inner([x], [x * 2], InnerMode(Mode(linker=linker).linker))
    np.testing.assert_array_equal(f([[1, 2]])[0], [[2.0, 4.0]])  # a list, converted
    np.testing.assert_array_equal(f(np.ones((3, 2), "int32"))[0], np.full((3, 2), 2.0))
    np.testing.assert_array_equal(f(np.ones((3, 2)))[0], np.full((3, 2), 2.0))  # remembered
    with pytest.raises(TypeError, match="dimension 1 has length 3, expected 2"):
        f(np.ones((2, 3)))
    with pytest.raises(TypeError, match="without risking loss of precision"):
        f(np.ones((1, 2), "complex128"))


@pytest.mark.parametrize("linker", ["cpu", pytest.param("opencl", marks=needs_opencl)])
def test_compile_inner_outputs_kept_by_the_caller(linker):
    x = tt.fmatrix("x")
    f = compile_inner([x], [tt.exp(x) + 1], Mode(linker=linker), borrow=False)
    a = f(np.zeros((4, 4), "float32"))[0]
    b = f(np.ones((4, 4), "float32"))[0]
    assert type(a) is np.ndarray and a is not b
    np.testing.assert_allclose(a, np.full((4, 4), 2.0), rtol=1e-6)
    np.testing.assert_allclose(b, np.full((4, 4), np.e + 1), rtol=1e-6)


@pytest.mark.parametrize("linker", ["py", "cpu", pytest.param("opencl", marks=needs_opencl)])
@pytest.mark.parametrize("runner", [False, True])
def test_compile_inner_borrow_false_outputs_share_no_memory(linker, runner):
    # borrow=False: an output that is an input, a view of one, or a value given for two
    # outputs is the caller's own array (every value planned, so reuse would show).
    x = tt.dvector("x")
    e = tt.exp(x)
    outs = [x, x[1:], x.T, e * 2, e * 2, e[1:], e[:2]]
    lk = CPULinker(min_plan_bytes=0) if linker == "cpu" else Mode(linker=linker).linker
    f = compile_inner([x], outs, InnerMode(lk, Mode(linker=linker).optimizer), borrow=False)
    a = np.arange(4.0)
    call = f.checked_runner([a]) if runner else (lambda v: f(*v))
    got = list(call([a]))
    kept = [g.copy() for g in got]
    for k, g in enumerate(got):
        assert type(g) is np.ndarray and not np.may_share_memory(g, a), k
        assert not any(np.may_share_memory(g, h) for h in got[:k]), k
    call([a + 10])
    want = [a, a[1:], a, np.exp(a) * 2, np.exp(a) * 2, np.exp(a)[1:], np.exp(a)[:2]]
    for g, k, w in zip(got, kept, want):
        np.testing.assert_array_equal(g, k)  # not overwritten by the next call
        np.testing.assert_allclose(g, w)
    np.testing.assert_array_equal(a, np.arange(4.0))


@pytest.mark.parametrize("linker", ["py", "cpu", pytest.param("opencl", marks=needs_opencl)])
@pytest.mark.parametrize("runner", [False, True])
def test_compile_inner_borrow_false_outputs_of_constants_are_the_callers(linker, runner):
    # An output the rewrites fold into a constant (or a view of one) is the constant's
    # read-only array: with borrow=False the caller gets a writeable copy, which it may
    # destroy without changing the constant (a lazy ifelse's branch of a constant, read
    # by an in-place add, wrote into it).
    x = tt.dvector("x")
    c = tt.constant(np.full(3, 2.0))
    outs = [c * 3.0, (c * 3.0)[1:], c, x + 1]
    lk = CPULinker(min_plan_bytes=0) if linker == "cpu" else Mode(linker=linker).linker
    f = compile_inner([x], outs, InnerMode(lk, Mode(linker=linker).optimizer), borrow=False)
    call = f.checked_runner([np.zeros(3)]) if runner else (lambda v: f(*v))
    for _ in range(2):
        got = list(call([np.zeros(3)]))
        for k, g in enumerate(got):
            assert type(g) is np.ndarray and g.flags.writeable, k
            assert not np.may_share_memory(g, c.data), k
            g += 100.0  # the caller's to change
    want = [np.full(3, 6.0), np.full(2, 6.0), np.full(3, 2.0), np.ones(3)]
    for g, w in zip(call([np.zeros(3)]), want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(c.data, np.full(3, 2.0))


def test_compile_inner_with_a_mode_optimizes_a_copy_and_keeps_the_inputs():
    x = tt.dvector("x")
    fg = FunctionGraph([x], [tt.exp(x) * 2 + 1], clone=True)
    before = fingerprint(fg)
    f = compile_inner(fg, mode=Mode(linker="cpu"))
    assert f.fgraph is not fg and fingerprint(fg) == before
    xv = np.array([0.0, 1.0])
    np.testing.assert_allclose(f(xv)[0], np.exp([0.0, 1.0]) * 2 + 1)
    np.testing.assert_array_equal(xv, [0.0, 1.0])  # no in-place rewrite reached the input
    with pytest.raises(ValueError, match="no mode given and no default mode"):
        saved = inner._default_mode[0]
        inner.set_default_mode(None)
        try:
            compile_inner([x], [x])
        finally:
            inner.set_default_mode(saved)


@pytest.fixture
def no_function_maker(monkeypatch):
    """Fail any FunctionMaker made from now on (inner graphs must not make one)."""

    def refuse(*args, **kwargs):
        raise AssertionError("an inner graph was compiled through FunctionMaker")

    def arm():
        monkeypatch.setattr(function_module.FunctionMaker, "__init__", refuse)

    return arm


@pytest.fixture
def inner_calls(monkeypatch):
    """Count the calls of compile_inner made by RowTiled and MapOverIndex."""
    calls = []

    def spy(*args, **kwargs):
        calls.append(args)
        return compile_inner(*args, **kwargs)

    monkeypatch.setattr(tiling, "compile_inner", spy)
    monkeypatch.setattr(row_loop, "compile_inner", spy)
    return calls


def test_row_tiled_compiles_its_tile_through_compile_inner(
    small_tiles, inner_calls, no_function_maker
):
    x, out = mlp()
    f = function([x], out)
    (node,) = tiled_nodes(f.maker.fgraph)
    xv = rng.standard_normal((100, 20))
    want = function([x], out, mode=REF)(xv)
    no_function_maker()
    got = f(xv)
    assert len(inner_calls) == 1 and inner_calls[0][0] is node.op.inner
    # tiles of rows sum in BLAS's order, not the whole product's: a last bit apart where
    # a value is the difference of larger ones (the weights depend on the tests run before)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_map_over_index_compiles_its_row_through_compile_inner(inner_calls, no_function_maker):
    x = tt.dvector("x")
    jac = theano_dag.jacobian(tt.exp(x) * x.sum(), x)
    f = function([x], jac)
    ref = function([x], jac, mode=REF)
    no_function_maker()
    xv = np.array([0.5, -1.0, 2.0])
    got = f(xv)
    assert len(inner_calls) == 1
    e = np.exp(xv)
    want = np.diag(e * xv.sum()) + e[:, None]  # d/dx_j of exp(x_i) * sum(x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(ref(xv), want, rtol=1e-12)


def test_map_over_index_with_no_rows_and_a_hoisted_output():
    i, x = tt.lscalar("i"), tt.dvector("x")
    rows, same = row_loop.map_over_index(i, x.shape[0], [x * i, x * 2])
    f = function([x], [rows, same])
    got_rows, got_same = f(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(got_rows, [[0.0, 0.0], [1.0, 2.0]])
    np.testing.assert_array_equal(got_same, [[2.0, 4.0], [2.0, 4.0]])
    empty_rows, empty_same = f(np.zeros(0))
    assert empty_rows.shape[0] == 0 and empty_same.shape[0] == 0


# -- the engines stand below compile ----------------------------------------------------

ENGINES = pathlib.Path(theano_dag.__file__).parent / "engines"


def test_engines_import_nothing_of_compile():
    """The engines sit below compile (the floors contract checks the same, in make lint)."""
    found = set()
    for path in ENGINES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "theano_dag.compile"
            ):
                found.add((path.relative_to(ENGINES).as_posix(), node.module))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("theano_dag.compile"):
                        found.add((path.relative_to(ENGINES).as_posix(), alias.name))
    assert not found, sorted(found)


def test_importing_the_engines_loads_no_pyopencl():
    code = (
        "import sys, theano_dag, theano_dag.engines.opencl as ocl\n"
        "assert ocl.OpenCLLinker.required_rewrites == ('opencl',)\n"
        "assert 'pyopencl' not in sys.modules, 'pyopencl imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ENGINES.parent.parent)


def test_the_stabilize_optimizer_keeps_the_engines_lowering_passes():
    """OPT_STABILIZE stops after stabilize by leaving the later fast_run passes out by name:
    a position cutoff would also drop the device placement the OpenCL engine needs."""
    names = [o.name for o in Mode(linker="opencl", optimizer="stabilize").optimizer]
    assert names == ["merge1", "useless", "canonicalize", "merge1.2", "stabilize"] + [
        "lazy_branches",  # an ifelse computes only its branch taken, in every mode
        "opencl_device_placement",
    ]
    assert [o.name for o in Mode(linker="py", optimizer="stabilize").optimizer] == names[:-1]
