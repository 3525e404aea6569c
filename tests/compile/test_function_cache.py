"""The cache on disk of optimized graphs (``theano_dag.compile.function_cache``): a hit
gives the graph, the values and the generated code of a miss; graphs that differ in
anything the optimized graph depends on get different keys; what the cache cannot vouch
for is compiled as before; damaged entries are dropped with a warning."""

import io
import os
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import config, shared
from theano_dag import scalar as ts
from theano_dag.breakpoint import PdbBreakpoint
from theano_dag.compile import function_cache, function_module
from theano_dag.compile.debugmode import DebugMode
from theano_dag.compile.function_module import FunctionMaker, UnusedInputError
from theano_dag.compile.io import In, Out
from theano_dag.compile.mode import FAST_COMPILE, FAST_RUN, Mode, get_mode
from theano_dag.graph.basic import Apply
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.op import Op, as_op
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.graph.rewriting.merge import MergeOptimizer
from theano_dag.opt import optdb
from theano_dag.printing import debugprint
from theano_dag.scalar import float64
from theano_dag.scalar.composite import Composite
from theano_dag.scalar.math import Angle
from theano_dag.tensor.elemwise import Elemwise
from theano_dag.tensor.nnet.pool import pool_2d
from theano_dag.testing import fuzz

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def function_cache_on(tmp_path, monkeypatch):
    """The cache on (tests/conftest.py turns it off for the rest of the suite), in a
    directory of this test's own."""
    directory = str(tmp_path / "functions")
    monkeypatch.setattr(function_cache, "cache_dir", lambda: directory)
    with config.change_flags(function_cache=True):
        yield directory


def _delta(before):
    now = function_cache.stats()
    return {k: now[k] - before[k] for k in ("hits", "misses", "stores", "ineligible", "damaged")}


def _compile(build, **kw):
    before = function_cache.stats()
    inputs, outputs = build()
    f = theano_dag.function(inputs, outputs, **kw)
    return f, _delta(before)


def _printed(f):
    out = io.StringIO()
    debugprint(f.maker.fgraph, file=out, print_type=True)
    return out.getvalue()


def _topo(f):
    """The optimized graph's toposort as text, each input named by its producer's place."""
    fgraph = f.maker.fgraph
    order = fgraph.toposort()
    where = {v: f"in{k}" for k, v in enumerate(fgraph.inputs)}
    for k, node in enumerate(order):
        for j, o in enumerate(node.outputs):
            where[o] = f"n{k}.{j}"
    return [(str(n.op), [where.get(i, str(i)) for i in n.inputs]) for n in order]


def _key(inputs, outputs, mode=None, accept_inplace=False):
    ins = [FunctionMaker.wrap_in(i) for i in inputs]
    outs = [FunctionMaker.wrap_out(o) for o in outputs]
    entry = function_cache.entry_for(ins, outs, get_mode(mode), accept_inplace, None)
    return None if entry is None else entry.digest


def _mlpish():
    x = tt.dmatrix("x")
    w = tt.dmatrix("w")
    b = tt.dvector("b")
    h = tt.tanh(tt.dot(x, w) + b)
    return [x, w, b], [tt.sum(h**2, axis=1) * 0.5 + tt.exp(-h).mean(), h.T]


def _values(rng):
    return [rng.normal(size=(4, 3)), rng.normal(size=(3, 5)), rng.normal(size=5)]


@pytest.mark.parametrize("mode", [None, "FAST_COMPILE"])
def test_a_hit_gives_the_graph_values_and_code_of_the_miss(mode):
    f, miss = _compile(_mlpish, mode=mode)
    g, hit = _compile(_mlpish, mode=mode)
    assert miss["misses"] == 1 and miss["stores"] == 1
    assert hit["hits"] == 1 and hit["stores"] == 0
    assert _printed(g) == _printed(f)
    assert _topo(g) == _topo(f)
    assert [type(x) for x in g.maker.fgraph._features] == [
        type(x) for x in f.maker.fgraph._features
    ]
    assert g.maker.fgraph.update_mapping == f.maker.fgraph.update_mapping
    vals = _values(np.random.default_rng(0))
    ref = theano_dag.function(*_mlpish(), mode=Mode(linker="py", optimizer=None))(*vals)
    for got, want, r in zip(g(*vals), f(*vals), ref):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(got, r, rtol=1e-12)
    if mode is None:  # the CPU engine: the same generated first call
        assert g.fn.source() == f.fn.source()


def test_the_loaded_graph_keeps_the_protection_of_the_inputs():
    def build():
        x = tt.dvector("x")
        return [x], tt.exp(x) + 1

    f, _ = _compile(build)
    g, hit = _compile(build)
    assert hit["hits"] == 1
    (sup_f,) = [s for s in f.maker.fgraph._features if type(s).__name__ == "Supervisor"]
    (sup_g,) = [s for s in g.maker.fgraph._features if type(s).__name__ == "Supervisor"]
    assert [g.maker.fgraph.inputs.index(v) for v in sup_g.protected] == [
        f.maker.fgraph.inputs.index(v) for v in sup_f.protected
    ]
    value = np.arange(3.0)
    # (The miss's value, not numpy's: once the fused kernel's C library is in the kernel
    # cache, its exp may differ from numpy's in the last bit.)
    np.testing.assert_array_equal(g(value), f(np.arange(3.0)))
    np.testing.assert_allclose(g(value), np.exp(np.arange(3.0)) + 1, rtol=1e-15)
    np.testing.assert_array_equal(value, np.arange(3.0))  # not overwritten


def _graph(dtype="float64", value=2.0, shape=(), scalar="add", order=(1, 0), axis=0):
    def build():
        x = tt.matrix("x", dtype=dtype)
        c = tt.constant(np.full(shape, value, dtype="float64"))
        y = getattr(tt, scalar)(x.dimshuffle(*order), c)
        return [x], [tt.sum(y, axis=axis)]

    return build


def test_keys_differ_for_constants_ops_and_inputs():
    base = _key(*_graph()())
    assert base is not None and base == _key(*_graph()())
    x = tt.dmatrix("x")
    variants = [
        _graph(dtype="float32")(),  # an input's dtype
        _graph(value=3.0)(),  # a constant's value
        _graph(shape=(1,))(),  # a constant's shape
        _graph(scalar="mul")(),  # an Elemwise's scalar op
        _graph(order=(0, 1))(),  # a DimShuffle's order
        _graph(axis=1)(),  # a CAReduce's axis
    ]
    keys = [_key(*v) for v in variants]
    # A constant's dtype (same value).
    keys.append(_key([x], [tt.sum(x.T + tt.constant(np.float32(2.0)), axis=0)]))
    assert None not in keys
    assert len({base, *keys}) == len(keys) + 1
    # An input's broadcastable pattern, and the order of the inputs.
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    r = tt.TensorType("float64", shape=(1, None))("a")
    ks = [_key([a, b], [a - b]), _key([b, a], [a - b]), _key([r, b], [r - b])]
    assert len(set(ks)) == 3


def test_the_digest_tells_apart_parts_cut_differently():
    # A constant's raw bytes are one part of the key: moving a boundary between two
    # parts must change the digest.
    assert function_cache._digest(b"m", [b"ab", b"c"]) != function_cache._digest(
        b"m", [b"a", b"bc"]
    )
    assert function_cache._digest(b"m", [b"a"]) != function_cache._digest(b"ma", [])


def test_keys_differ_for_in_and_out_specs_and_shared_variables():
    x, y = tt.dvector("x"), tt.dvector("y")
    s = shared(np.zeros(3), name="x")
    out = tt.exp(x) * 2
    keys = [
        _key([x], [out]),
        _key([x], [Out(out, borrow=True)]),
        _key([In(x, mutable=True)], [out]),
        _key([In(x, update=x + 1)], [out]),
        _key([y], [tt.exp(y) * 2]),  # only a name differs
    ]
    assert None not in keys and len(set(keys)) == len(keys)
    # A shared variable (an implicit input) where an explicit input was: a miss.
    theano_dag.function([x], out)
    before = function_cache.stats()
    f = theano_dag.function([], tt.exp(s) * 2)
    assert _delta(before)["stores"] == 1
    np.testing.assert_array_equal(f(), 2 * np.ones(3))


def test_keys_differ_for_flags_and_modes():
    x = tt.dvector("x")
    out = [tt.exp(x) * 2 + tt.log(x)]
    keys = [_key([x], out)]
    other_float = "float64" if config.floatX == "float32" else "float32"
    for flags in (
        {"floatX": other_float},
        {"cpu__poison": not config.cpu__poison},
        {"optimizer_excluding": "fma"},
    ):
        with config.change_flags(**flags):
            keys.append(_key([x], out))
    for mode in (FAST_RUN, FAST_COMPILE, FAST_RUN.excluding("fusion")):
        keys.append(_key([x], out, mode=mode))
    assert None not in keys
    # FAST_RUN is the default mode: the same key, nothing else alike.
    assert keys[4] == keys[0]
    del keys[4]
    assert len(set(keys)) == len(keys)


class _UserOp(Op):
    __props__ = ()

    def make_node(self, x):
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = inputs[0] * 3


def test_a_user_op_is_compiled_and_not_cached():
    def build():
        x = tt.dvector("x")
        return [x], _UserOp()(tt.exp(x))

    for _ in range(2):
        f, d = _compile(build)
        assert d["hits"] == 0 and d["stores"] == 0 and d["ineligible"] == 1
        np.testing.assert_allclose(f(np.array([0.0, 1.0])), 3 * np.exp([0.0, 1.0]))


def test_debug_mode_and_profiling_are_not_cached():
    def build():
        x = tt.dvector("x")
        return [x], tt.exp(x) + 1

    for _ in range(2):
        f, d = _compile(build, mode=DebugMode())
        assert d == {"hits": 0, "misses": 0, "stores": 0, "ineligible": 1, "damaged": 0}
        np.testing.assert_allclose(f(np.zeros(2)), [2.0, 2.0])
    _, d = _compile(build, profile=True)
    assert d["hits"] == d["stores"] == 0


def test_the_flag_switches_the_cache_off():
    def build():
        x = tt.dvector("x")
        return [x], tt.exp(x) + 1

    with config.change_flags(function_cache=False):
        for _ in range(2):
            _, d = _compile(build)
            assert d == {"hits": 0, "misses": 0, "stores": 0, "ineligible": 0, "damaged": 0}


@local_optimizer(None)
def _user_rewrite(fgraph, node):
    return False


def test_a_user_rewrite_makes_graphs_uncached_even_once_removed():
    def build():
        x = tt.dvector("x")
        return [x], tt.exp(x) + 1

    canonicalize = optdb["canonicalize"]
    pristine, _fingerprint = function_cache._optdb_state()
    assert pristine
    canonicalize.register("user_rewrite_for_the_cache_test", _user_rewrite, "fast_run")
    try:
        _, d = _compile(build)
        assert d["ineligible"] == 1 and d["stores"] == 0
    finally:
        canonicalize.remove_tags("user_rewrite_for_the_cache_test", "fast_run", "canonicalize")
    # Still a change made by code outside theano_dag: the graphs stay uncached.
    _, d = _compile(build)
    assert d["ineligible"] == 1 and d["stores"] == 0
    # (Undone for the other tests of this process.)
    canonicalize.foreign_changes = 0
    function_cache._optdb_checked[0] = None


def test_a_setting_of_a_db_changed_after_a_store_changes_the_key(monkeypatch):
    # A query reads a DB's settings (max_use_ratio, ignore_newtrees, positions...): a
    # graph stored before one changed is not the graph the changed DB makes.
    def build():
        x = tt.dvector("x")
        return [x], (x * 2 + x * 3) / x - tt.exp(tt.log(x))

    _, d = _compile(build)
    assert d["stores"] == 1
    canonicalize = next(iter(optdb.__db__["canonicalize"]))
    monkeypatch.setattr(canonicalize, "max_use_ratio", 1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the rewrites stop early and say so)
        with config.change_flags(function_cache=False):
            expected = _topo(theano_dag.function(*build()))
        f, d = _compile(build)
    assert d["misses"] == 1 and d["hits"] == 0
    assert _topo(f) == expected


def test_a_hit_holds_the_users_own_ops_not_equal_ones_of_other_graphs():
    # PdbBreakpoint's view_map (one view per monitored variable) is no prop: two of one
    # name compare equal. A hit must hold the op of the graph compiled, not the first
    # equal one this process saw (another graph's, whose view_map covers one output).
    def build(n):
        x = tt.dvector("x")
        y = tt.dvector("y")
        outs = PdbBreakpoint("bp")(tt.sum(x) > 1e9, *[x * 2, y][:n], return_list=True)
        return [x, y], [o + 1 for o in outs], outs[0].owner.op

    def compile_(n):
        inputs, outputs, op = build(n)
        return theano_dag.function(inputs, outputs, on_unused_input="ignore"), op

    compile_(1)  # the first op of that name this process sees
    compile_(2)
    f, op = compile_(2)
    assert function_cache.stats()["hits"] > 0
    (loaded,) = [n.op for n in f.maker.fgraph.apply_nodes if isinstance(n.op, PdbBreakpoint)]
    assert loaded.view_map == {0: [1], 1: [2]}
    assert loaded is op


def test_updates_and_givens_work_on_a_hit():
    state = shared(np.zeros(3), name="state")

    def build():
        x = tt.dvector("x")
        y = tt.dvector("y")
        return x, y

    fs = []
    for _ in range(2):
        x, y = build()
        before = function_cache.stats()
        f = theano_dag.function([x], tt.sum(state), updates=[(state, state + x)], givens={y: x})
        fs.append((f, _delta(before)))
    (f, miss), (g, hit) = fs
    assert miss["stores"] == 1 and hit["hits"] == 1
    assert float(f(np.ones(3))) == 0.0
    assert float(g(np.ones(3))) == 3.0  # the hit updates the user's shared variable
    np.testing.assert_array_equal(state.get_value(), 2 * np.ones(3))

    def with_givens():
        a, b = tt.dvector("a"), tt.dvector("b")
        return theano_dag.function([a], tt.exp(b) * 2, givens={b: a + 1})

    before = function_cache.stats()
    r1 = with_givens()(np.zeros(2))
    r2 = with_givens()(np.zeros(2))
    assert _delta(before)["hits"] == 1
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_allclose(r2, 2 * np.exp([1.0, 1.0]))


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_hit_and_give_the_same_values(seed):
    rec = fuzz.generate(np.random.default_rng(seed))
    values = fuzz._values(rec, 0)
    results, deltas, fns = [], [], []
    for _ in range(2):
        inputs, svar, syms = fuzz._build(rec)
        before = function_cache.stats()
        updates = [(svar, syms[rec.update])] if svar is not None else []
        if svar is not None:
            svar.set_value(values[rec.shared_index])
        f = theano_dag.function(
            [syms[k] for k in inputs],
            [syms[k] for k in rec.outputs],
            updates=updates,
            on_unused_input="ignore",
        )
        deltas.append(_delta(before))
        fns.append(f)
        out = f(*[values[k] for k in inputs])
        results.append([np.asarray(o) for o in out])
        if svar is not None:
            results[-1].append(svar.get_value())
    if deltas[0]["ineligible"]:
        pytest.skip("a graph the cache does not take")
    assert deltas[0]["stores"] == 1 and deltas[1]["hits"] == 1
    f, g = fns
    assert _printed(g) == _printed(f)
    assert _topo(g) == _topo(f)
    assert g.fn.source() == f.fn.source()
    for a, b in zip(*results):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def _damage(path, how):
    raw = open(path, "rb").read()
    if how == "truncated":
        raw = raw[: len(raw) // 2]
    elif how == "garbage":
        raw = raw[:60] + os.urandom(len(raw) - 60)
    else:  # the digest of another key in the header
        raw = raw[:8] + bytes(32) + raw[40:]
    with open(path, "wb") as fh:
        fh.write(raw)


@pytest.mark.parametrize("how", ["truncated", "garbage", "digest"])
def test_a_damaged_entry_warns_is_removed_and_the_graph_compiles(how, function_cache_on):
    def build():
        x = tt.dvector("x")
        return [x], tt.exp(x) * 3

    f, d = _compile(build)
    assert d["stores"] == 1
    (name,) = [n for n in os.listdir(function_cache_on) if not n.startswith(".")]
    path = os.path.join(function_cache_on, name)
    _damage(path, how)
    with pytest.warns(UserWarning, match=f"entry {path} is damaged"):
        g, d = _compile(build)
    assert d["damaged"] == 1 and d["hits"] == 0 and d["stores"] == 1
    np.testing.assert_allclose(g(np.ones(2)), 3 * np.exp([1.0, 1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, d = _compile(build)  # stored again by the compile after the damage
    assert d["hits"] == 1


def test_the_directory_is_kept_under_its_bounds(function_cache_on, monkeypatch):
    monkeypatch.setattr(function_cache, "MAX_ENTRIES", 3)
    for k in range(6):
        x = tt.dvector("x")
        theano_dag.function([x], tt.exp(x) * (k + 10.0))
        marker = os.path.join(function_cache_on, ".sized")
        if os.path.exists(marker):
            os.utime(marker, (0, 0))  # due again at the next store
    entries = [n for n in os.listdir(function_cache_on) if not n.startswith(".")]
    assert len(entries) == 3


def test_a_fresh_process_loads_what_another_stored(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        import theano_dag, theano_dag.tensor as tt
        from theano_dag.compile import function_cache
        x, y = tt.dvector("x"), tt.dvector("y")
        f = theano_dag.function([x, y], [tt.exp(x) * y + 1.5, tt.sum(tt.tanh(x - y))])
        out = f(np.linspace(-1, 1, 5), np.arange(5.0))
        s = function_cache.stats()
        print(s["hits"], s["stores"], repr([o.tolist() for o in out]))
        """
    )
    env = dict(
        os.environ,
        PYTHONPATH=ROOT,
        THEANO_DAG_FLAGS=f"compiledir={tmp_path},cxx=,opencl__platform=NoSuchPlatform",
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
        )
        for _ in range(2)
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr
    a, b = (r.stdout.split(None, 2) for r in runs)
    assert a[:2] == ["0", "1"] and b[:2] == ["1", "0"]
    assert a[2] == b[2]
    assert os.listdir(tmp_path / "functions")


def test_graphs_with_inner_graphs_are_not_cached():
    a = ts.float64("a")
    composite = Elemwise(Composite([a], [ts.exp(a) + 1]))
    for _ in range(2):
        x = tt.dvector("x")
        before = function_cache.stats()
        f = theano_dag.function([x], composite(x) * 2)
        assert _delta(before)["ineligible"] == 1
        np.testing.assert_allclose(f(np.zeros(2)), [4.0, 4.0])


def test_a_graph_that_does_not_load_back_is_marked_and_compiled(monkeypatch):
    def build():
        x = tt.dvector("x")
        return [x], tt.exp(x) * 5

    _, d = _compile(build)
    assert d["stores"] == 1

    def fails(self, data):
        raise pickle.UnpicklingError("an op's class is gone")

    with monkeypatch.context() as m:
        m.setattr(function_cache.Entry, "_rebuild", fails)
        with pytest.warns(UserWarning, match="does not load back"):
            f, d = _compile(build)
    assert d["damaged"] == 1 and d["stores"] == 0
    np.testing.assert_allclose(f(np.zeros(1)), [5.0])
    # The entry now says so: compiled as always, silently, and not stored again.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f, d = _compile(build)
    assert d == {"hits": 0, "misses": 0, "stores": 0, "ineligible": 1, "damaged": 0}
    np.testing.assert_allclose(f(np.zeros(1)), [5.0])


def test_a_theano_dag_op_holding_a_user_function_is_not_cached():
    @as_op([tt.dvector], [tt.dvector])
    def triple(v):
        return v * 3

    for _ in range(2):
        x = tt.dvector("x")
        before = function_cache.stats()
        f = theano_dag.function([x], triple(tt.exp(x)))
        assert _delta(before)["ineligible"] == 1
        np.testing.assert_allclose(f(np.zeros(2)), [3.0, 3.0])


def test_a_loaded_function_copies_and_pickles():
    def build():
        x = tt.dvector("x")
        return [x], tt.tanh(x) * 2 + 1

    f, _ = _compile(build)
    g, d = _compile(build)
    assert d["hits"] == 1
    value = np.linspace(-1, 1, 4)
    np.testing.assert_array_equal(g.copy()(value), f.copy()(value))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(g))(value), f(value))


def test_a_graph_with_the_users_in_place_op_hits_and_overwrites_as_the_miss():
    add_inplace = Elemwise(ts.add, {0: 0})

    def compile_once():
        x = tt.dvector("x")
        before = function_cache.stats()
        f = theano_dag.function(
            [In(x, mutable=True)], add_inplace(x, tt.constant(1.0)) * 2, accept_inplace=True
        )
        return f, _delta(before)

    (f, miss), (g, hit) = compile_once(), compile_once()
    assert miss["stores"] == 1 and hit["hits"] == 1
    assert _printed(g) == _printed(f)
    assert [type(x).__name__ for x in g.maker.fgraph._features] == [
        type(x).__name__ for x in f.maker.fgraph._features
    ]
    a, b = np.arange(3.0), np.arange(3.0)
    np.testing.assert_array_equal(g(b), f(a))
    np.testing.assert_array_equal(b, a)  # overwritten alike


def _composites(f):
    return [
        n.op.scalar_op
        for n in f.maker.fgraph.toposort()
        if type(getattr(n.op, "scalar_op", None)).__name__ == "Composite"
    ]


def test_fused_kernels_load_from_their_tables_as_the_miss_made_them(monkeypatch):
    def build():
        x, y = tt.dvector("x"), tt.bvector("y")
        a = tt.exp(x) * 2 + tt.log1p(x**2)
        b = (y + np.int8(100)) * 3  # the constant's dtype decides the wrap-around
        return [x, y], [tt.sum(a), a * b, tt.sqrt(tt.abs(x)) + b]

    f, miss = _compile(build)
    function_cache._op_lists.clear()  # as in a fresh process: the entry's ops unpickled
    built = []  # (the name the entry holds, looked up as it loads)
    from_tables = Composite._from_tables
    monkeypatch.setattr(
        Composite, "_from_tables", staticmethod(lambda *a: built.append(1) or from_tables(*a))
    )
    g, hit = _compile(build)
    assert miss["stores"] == 1 and hit["hits"] == 1
    cf, cg = _composites(f), _composites(g)
    assert len(cf) >= 2 and len(cg) == len(cf) and len(built) >= len(cg)
    for a, b in zip(cf, cg):
        assert a is not b
        assert a == b and hash(a) == hash(b) and str(a) == str(b)
        assert a._structure() == b._structure()
        assert a.c_code_statements([f"in{k}" for k in range(a.nin)]) == b.c_code_statements(
            [f"in{k}" for k in range(b.nin)]
        )
        assert [(v.name, v.owner is None) for v in a.inputs] == [
            (v.name, v.owner is None) for v in b.inputs
        ]
        assert [n.tag.imported_by if n._tag else n._imported_by for n in a.nodes] == [
            n.tag.imported_by if n._tag else n._imported_by for n in b.nodes
        ]
    vals = [np.linspace(-2, 2, 7), np.arange(-3, 4, dtype="int8")]
    for got, want in zip(g(*vals), f(*vals)):
        np.testing.assert_array_equal(got, want)
    assert g.fn.source() == f.fn.source()


def test_a_composite_with_notes_its_tables_do_not_carry_pickles_whole():
    x = ts.float64("x")
    c = Composite([x], [ts.exp(x) + np.float32(1.5)])
    assert c._tables() is not None
    c.nodes[0].outputs[0].tag.note = "kept"  # a tag: not in the tables
    assert c._tables() is None
    d = pickle.loads(function_cache._real_pickle(c))
    assert d == c and d.nodes[0].outputs[0].tag.note == "kept"
    c2 = Composite([x], [ts.exp(x) * 2])
    c2.extra = 1  # an attribute set after __init__
    assert c2._tables() is None
    # A name and a trace of an inner variable do travel.
    c3 = Composite([x], [ts.exp(x) * 2])
    c3.nodes[0].outputs[0].name = "e"
    c3.inputs[0]._trace = [("file.py", 1, "f", "line")]
    build, args = c3._tables()
    d3 = build(*args)
    assert d3 == c3 and d3.nodes[0].outputs[0].name == "e"
    assert d3.inputs[0]._trace == [("file.py", 1, "f", "line")]
    assert d3.nodes[1].inputs[0] is d3.nodes[0].outputs[0]
    assert d3.outputs[0] is d3.nodes[1].outputs[0]


def test_a_hit_indexes_its_graph_for_merging_only_when_rewritten_again():
    f, _ = _compile(_mlpish)
    g, hit = _compile(_mlpish)
    assert hit["hits"] == 1
    feature = g.maker.fgraph.merge_feature
    assert feature.deferred and "key_node" not in vars(feature)
    printed = _printed(g)
    # A user's rewrite of the loaded graph: the index is made then, as for the miss's.
    assert len(feature.scheduled) == len(f.maker.fgraph.merge_feature.scheduled) == 0
    MergeOptimizer().optimize(g.maker.fgraph)
    assert _printed(g) == printed
    assert len(feature.node_key) == len(g.maker.fgraph.apply_nodes)
    vals = _values(np.random.default_rng(1))
    for got, want in zip(g(*vals), f(*vals)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", [3, 7])
def test_a_loaded_graph_is_imported_in_the_order_of_the_imports_own_walk(seed):
    rec = fuzz.generate(np.random.default_rng(seed))
    for _ in range(2):
        inputs, svar, syms = fuzz._build(rec)
        before = function_cache.stats()
        f = theano_dag.function(
            [syms[k] for k in inputs], [syms[k] for k in rec.outputs], on_unused_input="ignore"
        )
    if _delta(before)["hits"] != 1:
        pytest.skip("a graph the cache does not take")
    fg = f.maker.fgraph
    # The same nodes imported again by the walk: the same clients lists, the same levels.
    again = FunctionGraph(fg.inputs, fg.outputs, clone=False)
    assert again.clients == fg.clients
    assert again._level == fg._level
    assert again.toposort() == fg.toposort()


def test_equal_fused_kernels_load_as_one_op_and_the_same_code():
    def build():
        x, y, z = tt.dvector("x"), tt.dvector("y"), tt.dvector("z")
        p = tt.exp(x) * 2 + 1  # the same kernel twice (on x and on y) ...
        q = tt.exp(y) * 2 + 1
        r = tt.exp(z) * 2.5 + 1  # ... and a kernel that differs in a constant
        return [x, y, z], [p, q, r]

    f, _ = _compile(build)
    function_cache._op_lists.clear()  # as in a fresh process: the entry's ops unpickled
    g, hit = _compile(build)
    assert hit["hits"] == 1
    cf, cg = _composites(f), _composites(g)
    assert len(cf) == len(cg) == 3
    assert len({id(c) for c in cf}) == 3  # the rewrites made one op per kernel
    assert len({id(c) for c in cg}) == 2  # equal ones load as one
    assert [str(c) for c in cg] == [str(c) for c in cf]
    assert [c._structure() for c in cg] == [c._structure() for c in cf]
    vals = [np.linspace(-1, 1, 5), np.linspace(0, 2, 5), np.linspace(2, 3, 5)]
    for got, want in zip(g(*vals), f(*vals)):
        np.testing.assert_array_equal(got, want)
    assert g.fn.source() == f.fn.source()
    assert _printed(g) == _printed(f)
    # A composite named otherwise is another op: it is not shared.

    def plain(c):  # no names and no user stacks inside, as fusion makes them
        for v in c.inputs + [o for n in c.nodes for o in n.outputs]:
            v.name = v._trace = None
        return c

    x = float64()
    c1, c2, c3 = (plain(Composite([x], [x * 2], name=n)) for n in (None, None, "twice"))
    loaded = pickle.loads(function_cache._real_pickle([c1, c2, c3]))
    assert loaded[0] is loaded[1] and loaded[2] is not loaded[0]
    assert loaded[2].name == "twice" and loaded[2] == loaded[0]
    # Nor is one whose inner variables carry a name (which equality does not compare).
    c4 = plain(Composite([x], [x * 2]))
    c4.nodes[0].outputs[0].name = "doubled"
    loaded = pickle.loads(function_cache._real_pickle([c1, c4]))
    assert loaded[1] is not loaded[0] and loaded[1] == loaded[0]
    assert loaded[1].nodes[0].outputs[0].name == "doubled"
    assert loaded[0].nodes[0].outputs[0].name is None


@pytest.mark.parametrize("cache", [True, False])
def test_unused_inputs_are_found_by_the_keys_walk_as_without_the_cache(cache, monkeypatch):
    if cache:  # no walk of its own: the key's walk told which inputs are used

        def no_walk(*args, **kw):
            raise AssertionError("walked again")

        monkeypatch.setattr(function_module, "ancestors", no_walk)

    def build():
        x, y, z, w = tt.dvector("x"), tt.dvector("y"), tt.dvector("z"), tt.dvector("w")
        return [x, y, z, w], [tt.exp(x) + 1, w]  # y and z unused; w is an output itself

    with config.change_flags(function_cache=cache):
        before = function_cache.stats()
        with pytest.raises(UnusedInputError, match=r"input 'y' \(position 1\)"):
            theano_dag.function(*build())
        with pytest.warns(UserWarning) as record:
            f = theano_dag.function(*build(), on_unused_input="warn")
        messages = [
            str(r.message)
            for r in record
            if "not part of the computational graph" in str(r.message)
        ]
        assert len(messages) == 2
        assert "input 'y' (position 1)" in messages[0] and "'z' (position 2)" in messages[1]
        g = theano_dag.function(*build(), on_unused_input="ignore")
        if cache:
            assert _delta(before)["hits"] >= 1
        vals = [np.arange(3.0) + k for k in range(4)]
        for got, want in zip(g(*vals), f(*vals)):
            np.testing.assert_array_equal(got, want)
        # An input needed by an update only is used.
        s = shared(np.zeros(2), name="s")
        a = tt.dvector("a")
        h = theano_dag.function([a], tt.sum(s), updates=[(s, s + a)])
        h(np.ones(2))
        np.testing.assert_array_equal(s.get_value(), np.ones(2))


def test_an_op_with_a_class_among_its_props_is_cached():
    # SymbolicWindowPool's ``base`` prop is an op class: a class, keyed by its name (it
    # has __props__ and _props itself, which once made the key call _props on it).
    def build():
        x, w = tt.dmatrix("x"), tt.lvector("w")
        return [x, w], pool_2d(x, ws=w, ignore_border=True)

    f, miss = _compile(build)
    g, hit = _compile(build)
    assert (miss["stores"], hit["hits"]) == (1, 1)
    x = np.arange(16.0).reshape(4, 4)
    np.testing.assert_array_equal(g(x, [2, 2]), [[5.0, 7.0], [13.0, 15.0]])
    np.testing.assert_array_equal(f(x, [2, 2]), g(x, [2, 2]))


def test_a_key_that_cannot_be_made_warns_once_and_compiles(monkeypatch):
    def broken(*args):
        raise RuntimeError("no key for this graph")

    monkeypatch.setattr(function_cache, "_walk", broken)
    monkeypatch.setattr(function_cache, "_key_failures", [])
    x = tt.dvector("x")
    before = function_cache.stats()
    with pytest.warns(UserWarning, match="a graph's key could not be made") as record:
        f = theano_dag.function([x], tt.exp(x) * 3)
        g = theano_dag.function([x], tt.exp(x) * 4)
    assert len([w for w in record if "function cache" in str(w.message)]) == 1
    assert _delta(before)["ineligible"] == 2
    np.testing.assert_allclose(f([0.0, 1.0]), 3 * np.exp([0.0, 1.0]))
    np.testing.assert_allclose(g([0.0]), [4.0])


def test_an_op_with_a_lambda_among_its_props_is_not_cached():
    # A lambda has a name that does not find it (every lambda of a module has the same
    # one), so graph.op_key gives an op holding one no key; the graph is refused at its
    # key (once it was refused only when its store's pickle of the lambda failed).
    angle64 = Elemwise(Angle(lambda *dtypes: ("float64",), name="angle64"))
    for _ in range(2):
        z = tt.zvector("z")
        before = function_cache.stats()
        f = theano_dag.function([z], angle64(z) * 2)
        assert _delta(before) == {
            "hits": 0, "misses": 0, "stores": 0, "ineligible": 1, "damaged": 0
        }  # fmt: skip
        np.testing.assert_allclose(f(np.array([1j, -1.0])), [np.pi, 2 * np.pi])


def test_angle_is_cached():
    # theano_dag's own angle names its output type by a module function, found by its
    # name: a graph of it is stored, then found.
    deltas = []
    for _ in range(2):
        z = tt.zvector("z")
        before = function_cache.stats()
        f = theano_dag.function([z], tt.angle(z) * 2)
        deltas.append(_delta(before))
        np.testing.assert_allclose(f(np.array([1j, -1.0])), [np.pi, 2 * np.pi])
    assert [(d["misses"], d["stores"], d["hits"]) for d in deltas] == [(1, 1, 0), (0, 0, 1)]


# Test values (compute_test_value, on while a PyMC3 model is active): rewrites and the
# copies of the outputs run under compute_test_value_opt ("off"), so the optimized graph
# does not depend on them and a hit is the miss's graph, carrying the same test values.


def _with_test_values(n):
    """A graph whose variables get test values of length ``n`` as it is built."""

    def build():
        x = tt.dvector("x")
        x.tag.test_value = np.linspace(1.0, 2.0, n)
        w = tt.dmatrix("w")
        w.tag.test_value = np.eye(n) * 0.5
        z = tt.log(x)
        cost = tt.sum(tt.exp(tt.dot(w, x)) * 2 + z) ** 2
        return [x, w], [cost, z, tt.exp(z), *theano_dag.grad(cost, [x, w])]

    return build


def _test_values_in_order(f):
    """The optimized graph's variables' test values (None where none): inputs, then per
    node of the toposort its constant inputs and its outputs."""
    fgraph = f.maker.fgraph
    seen = set(fgraph.inputs)
    found = list(fgraph.inputs)
    for node in fgraph.toposort():
        for v in node.inputs:
            if v.owner is None and v not in seen:
                seen.add(v)
                found.append(v)
        found += node.outputs
    return [None if v._tag is None else getattr(v._tag, "test_value", None) for v in found]


@pytest.mark.parametrize("action", ["raise", "warn"])
def test_a_graph_with_test_values_hits_as_the_miss(action):
    with config.change_flags(compute_test_value=action), warnings.catch_warnings():
        warnings.simplefilter("error")  # neither path warns
        f, miss = _compile(_with_test_values(2))
        # The same graph with other test values (another length): the same entry.
        g, hit = _compile(_with_test_values(3))
        assert (miss["stores"], hit["hits"], hit["stores"]) == (1, 1, 0)
        assert _printed(g) == _printed(f)
        assert _topo(g) == _topo(f)
        vals = [np.array([0.5, 1.5]), np.array([[0.1, 0.2], [0.3, -0.4]])]
        for got, want in zip(g(*vals), f(*vals)):
            np.testing.assert_array_equal(got, want)
        ref = theano_dag.function(*_with_test_values(2)(), mode=Mode(linker="py", optimizer=None))
        for got, want in zip(g(*vals), ref(*vals)):
            np.testing.assert_allclose(got, want, rtol=1e-12)
        # The hit's variables hold the test values a miss of that graph holds: the very
        # objects of the user's variables they were copied from, not the first graph's.
        inputs, outputs = _with_test_values(3)()
        with config.change_flags(function_cache=False):
            m = theano_dag.function(inputs, outputs)
        h = theano_dag.function(inputs, outputs)
        got, want = _test_values_in_order(h), _test_values_in_order(m)
        assert len(got) == len(want) and any(v is not None for v in want)
        assert all(a is b for a, b in zip(got, want))
        assert {np.shape(v) for v in got if v is not None} >= {(3,), (3, 3)}


def test_test_values_do_not_change_the_optimized_graph():
    # The cache keys graphs without their test values: the rewrites never read them.
    printed = []
    for n, action in ((2, "raise"), (5, "raise"), (2, "warn"), (2, "off")):
        with config.change_flags(compute_test_value=action, function_cache=False):
            inputs, outputs = _with_test_values(n)()
            printed.append((_printed(f := theano_dag.function(inputs, outputs)), _topo(f)))
    assert all(p == printed[0] for p in printed[1:])


def test_keys_ignore_test_values_but_not_which_variables_hold_one():
    def key(n, tag_z=None):
        inputs, outputs = _with_test_values(n)()
        if tag_z is not None:
            outputs[1].tag.test_value = tag_z(inputs)
        return _key(inputs, outputs)

    with config.change_flags(compute_test_value="raise"):
        base = key(2)
        assert base is not None and key(7) == base
        # The second output's value taken away, or made the input's own object.
        keys = [key(2, lambda ins: np.zeros(2)), key(2, lambda ins: ins[0].tag.test_value)]
        del_tag = _with_test_values(2)()
        del del_tag[1][1].tag.test_value
        keys.append(_key(*del_tag))
    assert base == keys[0]  # another object of its own: the same classes
    assert len({base, keys[1], keys[2]}) == 3
    with config.change_flags(compute_test_value="warn"):  # a flag: another key
        assert key(2) not in (base, *keys)


def test_an_output_copied_twice_compiles_under_raise_on_both_paths():
    # insert_deepcopy wraps an output returned twice in a copy of a rewritten variable,
    # which has no test value: under compute_test_value_opt, as in Theano, no error.
    def build():
        x = tt.dvector("x")
        x.tag.test_value = np.ones(2)
        y = tt.exp(x) * 2
        return [x], [y, y, x]

    with config.change_flags(compute_test_value="raise"):
        f, miss = _compile(build)
        g, hit = _compile(build)
    assert (miss["stores"], hit["hits"]) == (1, 1)
    assert _topo(g) == _topo(f)
    for h in (f, g):
        a, b, c = h(np.array([0.0, 1.0]))
        np.testing.assert_allclose(a, 2 * np.exp([0.0, 1.0]))
        assert a is not b and not np.shares_memory(a, b)
        np.testing.assert_array_equal(c, [0.0, 1.0])


def test_a_test_value_that_no_longer_fits_is_carried_as_the_miss_carries_it():
    # A test value set by hand after the graph was built (of another shape than its
    # consumers' values): nothing in function reads it, on either path.
    def build():
        inputs, outputs = _with_test_values(2)()
        inputs[0].tag.test_value = np.arange(4.0)
        return inputs, outputs

    with config.change_flags(compute_test_value="raise"):
        f, miss = _compile(build)
        g, hit = _compile(build)
        assert (miss["stores"], hit["hits"]) == (1, 1)
        assert _test_values_in_order(g)[0].shape == (4,)
        assert [np.shape(v) for v in _test_values_in_order(g)] == [
            np.shape(v) for v in _test_values_in_order(f)
        ]


@pytest.mark.parametrize("flags", [{"compute_test_value_opt": "raise"}, {"warn_float64": "warn"}])
def test_rewrites_that_compute_test_values_or_warn_are_not_cached(flags):
    # Under these flags the rewrites compute test values (which may fail) or warn of the
    # float64 variables they make: a load, which skips them, would not.
    with config.change_flags(compute_test_value="raise", **flags), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            f, d = _compile(_with_test_values(2))
            assert d == {"hits": 0, "misses": 0, "stores": 0, "ineligible": 0, "damaged": 0}
    np.testing.assert_allclose(f([1.0, 1.0], np.eye(2))[1], [0.0, 0.0])


class _UsersVariable(tt.TensorVariable):
    """A variable class of the user's (as PyMC3's random variables are)."""

    def __str__(self):
        return f"users {self.name}"


def test_a_graph_with_a_variable_of_the_users_class_is_not_cached():
    # The user's class may change what the rewrites do with its variables (its methods,
    # which the key does not cover): compiled as always.
    def build():
        x = tt.dvector("x")
        y = _UsersVariable(x.type, None, None, "y")
        Apply(theano_dag.compile.view_op, [tt.exp(x)], [y])
        return [x], y * 2

    for _ in range(2):
        f, d = _compile(build)
        assert d["hits"] == 0 and d["stores"] == 0 and d["ineligible"] == 1
        np.testing.assert_allclose(f(np.array([0.0, 1.0])), 2 * np.exp([0.0, 1.0]))
