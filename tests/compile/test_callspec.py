"""One call path: the frozen CallSpec, the plain call over it, the CPU engine's generated
call checked against the plain one (every op of the op table, every call feature), the
Thunk protocol of every engine, and immutable Modes."""

import copy
import dataclasses
import os
import shutil
import sys
import threading

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.io import In, Out
from theano_dag.compile.mode import FAST_RUN, Mode, get_mode
from theano_dag.compile.sharedvalue import shared
from theano_dag.engines import callspec
from theano_dag.engines.basic import PerformLinker, WrapLinker
from theano_dag.engines.callspec import CallPath, CallSpec, PlainCall, Thunk
from theano_dag.engines.cpu import CPULinker
from theano_dag.engines.cpu import linker as cpu_linker
from theano_dag.engines.cpu.linker import CPUCall
from theano_dag.graph.fg import FunctionGraph

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tensor"))
from op_table import TABLE, row_inputs  # noqa: E402

PY = Mode(linker="py", optimizer=None)


def cpu(**kw):
    return Mode(linker=CPULinker(min_plan_bytes=0, **kw), optimizer=None)


def plain_of(f):
    """The plain call over ``f``'s own spec and thunk (what the generated call specialises)."""
    return PlainCall(f.spec, f.fn)


def outcome(call, *args, **kwargs):
    """What a call gives: ``("ok", value)`` or ``("raised", type, message)``. The value
    is copied at once: a borrowed output may be overwritten by the next call."""
    try:
        return ("ok", copy.deepcopy(call(*args, **kwargs)))
    except Exception as e:
        return ("raised", type(e), str(e))


def assert_same_outcome(got, want):
    assert got[0] == want[0], (got, want)
    if got[0] == "raised":
        assert got[1:] == want[1:]
        return
    g, w = got[1], want[1]
    if isinstance(w, dict):
        assert list(g) == list(w)
        g, w = list(g.values()), list(w.values())
    if isinstance(w, list):
        assert isinstance(g, list) and len(g) == len(w)
    else:
        g, w = [g], [w]
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


# -- the generated call against the plain one, over the op table -----------------------

CASES = [(row, dt) for row in TABLE for dt in row.dtypes]


@pytest.fixture(params=["guarded", "python"])
def call_half(request, monkeypatch):
    """Both forms of the generated call: the body of a Guard checked in C (when the C
    half is built), and the Python function that checks its inputs itself."""
    if request.param == "guarded" and not callspec.NATIVE_CALL:
        pytest.skip("the C half of the call (engines/callstub.c) is not built")
    if request.param == "python":
        monkeypatch.setattr(cpu_linker, "NATIVE_CALL", False)
    return request.param


@pytest.mark.parametrize("row,dtype", CASES, ids=[f"{r}-{d}" for r, d in CASES])
def test_generated_call_matches_the_plain_call_on_every_op(
    row, dtype, call_half, kernels_at_first_call
):
    # (kernels_at_first_call: the calls compared run the same kernels; a library that
    # loaded between two of them changed the last bit of sigmoid's, an op with a C kernel)
    syms, values = row_inputs(row, dtype, np.random.default_rng(7))
    f = function(syms, row.build(*syms), mode=cpu(), on_unused_input="ignore")
    assert isinstance(f._path, CPUCall)
    plain = plain_of(f)
    want = outcome(plain, *values)
    assert want[0] == "ok"
    for _ in range(2):  # the first call generates the code, the second runs it
        assert_same_outcome(outcome(f, *values), want)
    assert f._path.generated, "the generated call never ran"
    assert f._guarded == (call_half == "guarded")
    # Values the generated call hands to the plain one, and bad ones: same result or error.
    bad_calls = [
        ([v.tolist() for v in values], {}),
        (["abc", *values[1:]], {}),
        ([values[0][None], *values[1:]], {}),
        ([*values, values[0]], {}),
        (values[:-1], {}),
        (values, {"nope": 1}),
        (values[1:], {"i0": values[0]}),
    ]
    for args, kwargs in bad_calls:
        assert_same_outcome(outcome(f, *args, **kwargs), outcome(plain, *args, **kwargs))
    assert_same_outcome(outcome(f, *values), want)  # and back on the generated code


# -- the call features ------------------------------------------------------------------


def _features():
    """(name, build) pairs: build() -> (inputs, outputs, kwargs of function, calls)."""
    x, y = tt.dvector("x"), tt.dvector("y")
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([0.5, -1.0, 4.0])

    def one_output():
        return [x, y], x * y + 1, {}, [((a, b), {}), ((), {"x": a, "y": b}), ((a,), {"y": b})]

    def list_and_subset():
        calls = [((a, b), {}), ((a, b), {"output_subset": [1]})]
        return [x, y], [x + y, x - y], {}, calls

    def dict_outputs():
        return [x, y], {"s": x + y, "d": x - y}, {}, [((a, b), {})]

    def default_and_name():
        ins = [x, In(y, value=np.array([1.0, 1.0, 1.0]), name="why")]
        calls = [((a,), {}), ((a, b), {}), ((a,), {"why": b}), ((), {"x": a})]
        return ins, tt.exp(x) * y, {}, calls

    def updates_and_borrow():
        s = shared(np.zeros(3), name="s")
        calls = [((a,), {}), ((b,), {}), ((a,), {})]
        return [x], [Out(s + x, borrow=True)], {"updates": [(s, s + x)]}, calls

    def swap_updates():
        p, q = shared(np.ones(3), name="p"), shared(np.full(3, 2.0), name="q")
        return [x], p * x, {"updates": [(p, q), (q, p)]}, [((a,), {}), ((a,), {})]

    def no_outputs():
        s = shared(np.zeros(3), name="t")
        return [x], None, {"updates": [(s, s + x)]}, [((a,), {}), ((b,), {})]

    def state_input():
        st = tt.dvector("st")
        ins = [x, In(st, value=np.zeros(3), update=st + x, implicit=False)]
        return ins, st * 2, {}, [((a,), {}), ((a,), {}), ((a, b), {})]

    def bad_inputs():
        calls = [
            ((a, b, a), {}),
            ((a,), {}),
            ((a, "zz"), {}),
            ((a, np.zeros((2, 2))), {}),
            ((a, b), {"x": a}),
            ((a, b), {"zz": 1}),
            ((a, np.array([1, 2, 3], dtype="int64")), {}),
            ((a, np.array([1, 2, 3], dtype="float32")), {}),
        ]
        return [x, y], x + y, {}, calls

    return {
        f.__name__: f
        for f in (
            one_output,
            list_and_subset,
            dict_outputs,
            default_and_name,
            updates_and_borrow,
            swap_updates,
            no_outputs,
            state_input,
            bad_inputs,
        )
    }


FEATURES = _features()


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_generated_call_matches_the_plain_call_and_the_reference_engine(name, call_half):
    """The same calls through three functions of one graph: the CPU engine's generated
    call, the plain call over the same kind of spec (a second CPU function), and the
    reference engine. Each function has its own copy of the shared state."""
    results = []
    for mode, plain in ((cpu(), False), (cpu(), True), (PY, True)):
        ins, outs, kw, calls = FEATURES[name]()  # fresh shared variables each time
        f = function(ins, outs, mode=mode, **kw)
        call = plain_of(f) if plain else f
        # Copies: a mutable input may be overwritten by the call.
        calls = copy.deepcopy(calls)
        results.append([outcome(call, *args, **kwargs) for args, kwargs in calls])
    generated, plain, reference = results
    for g, p, r in zip(generated, plain, reference):
        assert_same_outcome(g, p)
        assert_same_outcome(p, r)


def test_a_bad_call_leaves_no_trace_in_the_generated_call():
    x = tt.dvector("x")
    s = shared(np.zeros(2), name="s")
    f = function([x], s + x, mode=cpu(), updates=[(s, s + x)])
    f(np.ones(2))
    with pytest.raises(TypeError, match="bad input 'x'"):
        f("abc")
    np.testing.assert_array_equal(s.get_value(), [1.0, 1.0])
    np.testing.assert_array_equal(f(np.ones(2)), [2.0, 2.0])


def test_the_c_half_of_the_call_is_built_where_a_compiler_is():
    # CI installs with gcc: a silent fall back to the Python half would hide a slower call.
    if shutil.which(os.environ.get("CC", "gcc")) is None:
        pytest.skip("no C compiler: the package installs without the C half")
    if os.environ.get("THEANO_DAG_PY_CALL"):
        pytest.skip("THEANO_DAG_PY_CALL chooses the Python half")
    assert callspec.NATIVE_CALL and callspec.CallBase is not callspec._PyCallBase
    x = tt.dvector("x")
    f = function([x], x + 1.0)
    assert isinstance(f, callspec.CallBase)
    f(np.ones(3))
    assert f._guarded
    # Called through vectorcall (no argument tuple), also where Python 3.11 would not
    # give a heap subclass the flag: Py_TPFLAGS_HAVE_VECTORCALL is 1 << 11.
    assert type(f).__flags__ & (1 << 11)


@pytest.mark.parametrize("threads_call", ["guarded", "python"])
def test_calls_from_many_threads_each_get_their_own_result(threads_call, monkeypatch):
    # One Context shared by the calls could be entered by one thread only ("cannot
    # enter context ... is already entered" before); the C half falls back to setting
    # numpy's error state in the calling thread's own context.
    if threads_call == "guarded" and not callspec.NATIVE_CALL:
        pytest.skip("the C half of the call is not built")
    if threads_call == "python":
        monkeypatch.setattr(cpu_linker, "NATIVE_CALL", False)
    x = tt.dvector("x")
    f = function([x], tt.exp(x) * 2 - tt.log(x), mode=cpu())
    errors, wrong = [], []

    wants = {k: f(np.full(4 + k % 2, 1.0 + k)).copy() for k in range(8)}  # sequential

    def work(k):
        v = np.full(4 + k % 2, 1.0 + k)
        want = wants[k]
        try:
            for _ in range(300):
                got = f(v)
                if not np.array_equal(got, want):
                    wrong.append((k, got))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and wrong == []


def test_the_python_half_reads_the_entry_and_ignores_the_guard():
    class F(callspec._PyCallBase):
        pass

    f = F()
    f._set_owner(threading.get_ident(), lambda *a: ("other thread", a))
    f._set_guard(lambda *a: ("entry", a), None, np.ndarray, (), (), None, None, None, None)
    assert f(1, 2) == ("entry", (1, 2))
    f._set_entry(lambda: "other")
    assert f() == "other" and not f._guarded
    seen = []
    t = threading.Thread(target=lambda: seen.append(f(3)))
    t.start()
    t.join()
    assert seen == [("other thread", (3,))]


# -- the spec is frozen, changes give a new spec and a new call path ---------------------


def test_the_spec_is_frozen_and_describes_the_call():
    x, y = tt.dvector("x"), tt.dvector("y")
    s = shared(np.zeros(2), name="s")
    f = function(
        [x, In(y, value=np.ones(2))], Out(x + y + s, borrow=True), updates=[(s, s + x)], name="g"
    )
    spec = f.spec
    assert isinstance(spec, CallSpec)
    assert [i.name for i in spec.inputs] == ["x", "y", "s"]
    assert spec.explicit == (0, 1)
    assert [i.position for i in spec.inputs] == [0, 1, None]
    assert [i.required for i in spec.inputs] == [True, False, False]
    assert spec.inputs[1].refeed and spec.inputs[2].shared and spec.inputs[2].mutable
    assert spec.updates == ((2, 1),)
    assert spec.borrow == (True, False) and spec.n_returned == 1 and spec.unpack_single
    assert spec.label == "Function 'g'"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.trust_input = True
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.inputs[0].required = False


def test_setting_a_default_or_trust_input_makes_a_new_spec():
    x, y = tt.dvector("x"), tt.dvector("y")
    f = function([x, In(y, value=np.ones(2))], x * y, mode=cpu())
    first = f.spec
    f["y"] = [3.0, 3.0]
    assert f.spec is not first and first.inputs[1].default.tolist() == [1.0, 1.0]
    np.testing.assert_array_equal(f(np.ones(2)), [3.0, 3.0])
    f.trust_input = True
    assert f.spec.trust_input and f.trust_input
    np.testing.assert_array_equal(f(np.ones(2), np.full(2, 2.0)), [2.0, 2.0])


# -- the Thunk protocol -----------------------------------------------------------------


@pytest.mark.parametrize(
    "linker",
    [PerformLinker(), PerformLinker(allow_gc=False), CPULinker(), CPULinker(incremental=True)],
    ids=["py", "py_nogc", "cpu", "cpu_incremental"],
)
def test_every_engine_makes_a_thunk_and_a_call_path(linker):
    x = tt.dvector("x")
    f = function([x], tt.exp(x) + 1, mode=Mode(linker=linker, optimizer=None))
    assert isinstance(f.fn, Thunk)
    assert isinstance(f._path, CallPath) and f._path.spec is f.spec
    np.testing.assert_allclose(f(np.zeros(2)), [2.0, 2.0])


def test_a_wrap_linker_thunk_and_memory_plans():
    x = tt.dvector("x")
    fg = FunctionGraph([x], [tt.exp(x)])
    thunk, ins, outs = (
        WrapLinker([PerformLinker()], lambda fg, i, node, th: th()).accept(fg).make_thunk()
    )
    assert isinstance(thunk, Thunk) and thunk.storage_map is not None
    f = function([x], tt.exp(x), mode=PY)
    with pytest.raises(NotImplementedError, match="does not plan memory"):
        f.memory_plan()


# -- immutable Modes --------------------------------------------------------------------


def test_a_mode_is_immutable_and_its_copies_are_new_modes():
    m = Mode(linker="py", optimizer=None)
    with pytest.raises(AttributeError, match="Mode is immutable: cannot set 'provided_linker'"):
        m.provided_linker = "cpu"
    with pytest.raises(AttributeError, match="immutable"):
        m.anything = 1
    with pytest.raises(AttributeError, match="immutable"):
        del m.provided_optimizer
    c = m.clone(linker="cpu")
    assert (c.provided_linker, m.provided_linker) == ("cpu", "py")
    assert m.excluding("fusion") is not m


def test_check_isfinite_is_the_one_settable_field_as_in_theano():
    # Theano's test tools copy the default mode and set DebugMode's flag on the copy.
    m = copy.copy(Mode(linker="py", optimizer=None))
    assert m.check_isfinite is True
    m.check_isfinite = False
    assert m.check_isfinite is False and Mode.check_isfinite is True
    x = tt.dvector("x")
    f = function([x], tt.log(x), mode=m)
    np.testing.assert_allclose(f(np.array([0.0, 1.0])), [-np.inf, 0.0])


def test_calls_write_nothing_to_the_shared_mode():
    before = dict(vars(FAST_RUN))
    x = tt.dvector("x")
    for f in (function([x], x + 1), function([x], x + 1, mode=get_mode("FAST_RUN"))):
        for _ in range(3):
            f(np.zeros(2))
        f(x=np.zeros(2))
    assert dict(vars(FAST_RUN)) == before


def test_profile_counts_calls_on_the_function_not_the_mode():
    x = tt.dvector("x")
    f = function([x], x + 1, mode=PY, profile=True)
    for _ in range(3):
        f(np.zeros(2))
    assert f.profile.calls == 3 and f.profile.call_time > 0
    assert "calls: 3" in str(f.profile)


def test_compiling_leaves_a_modes_linker_instance_unbound():
    lk = CPULinker()
    mode = Mode(linker=lk, optimizer=None)
    x = tt.dvector("x")
    f, g = function([x], x + 1, mode=mode), function([x], x * 2, mode=mode)
    assert lk.fgraph is None and mode.provided_linker is lk
    assert f.maker.linker is not lk and f.maker.linker is not g.maker.linker
    np.testing.assert_array_equal(f(np.ones(2)) + g(np.ones(2)), [4.0, 4.0])
