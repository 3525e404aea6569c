"""function(): calls, updates, givens, the memory contract, on toy types (no tensor library)."""

import contextlib
import gc
import pickle
import sys
import threading
import weakref

import numpy as np
import pytest
from compile_toys import add, add_inplace, exp, mul, neg, reuse, transpose, vec

from theano_dag.compile import (
    DeepCopyOp,
    In,
    Mode,
    Out,
    UnusedInputError,
    ViewOp,
    function,
    shared,
)
from theano_dag.compile.function import OutputKeyError, function_dump
from theano_dag.compile.sharedvalue import SharedVariable
from theano_dag.engines.basic import PerformLinker
from theano_dag.graph import utils as graph_utils
from theano_dag.graph.fg import InconsistencyError
from theano_dag.graph.type import Generic
from theano_dag.graph.utils import gc_as_set, gc_paused

PY = Mode(linker="py", optimizer=None)
PY_NOGC = Mode(linker=PerformLinker(allow_gc=False), optimizer=None)


def vshared(value, name):
    return SharedVariable(vec, np.asarray(value, dtype="float64"), name=name)


def test_positional_and_keyword_calls():
    x, y = vec("x"), vec("y")
    f = function([x, y], add(x, mul(x, y)), mode=PY)
    np.testing.assert_allclose(f([1.0, 2.0], [3.0, 4.0]), [4.0, 10.0])
    np.testing.assert_allclose(f(y=[3.0, 4.0], x=[1.0, 2.0]), [4.0, 10.0])
    np.testing.assert_allclose(f([1.0, 2.0], y=[0.0, 0.0]), [1.0, 2.0])


def test_single_output_list_output_and_none():
    x = vec("x")
    assert isinstance(function([x], neg(x), mode=PY)([1.0]), np.ndarray)
    res = function([x], [neg(x)], mode=PY)([1.0])
    assert isinstance(res, list) and len(res) == 1
    res = function([x], [neg(x), exp(x)], mode=PY)([0.0])
    assert [r.tolist() for r in res] == [[-0.0], [1.0]]
    s = vshared([1.0], "s")
    # No outputs (None or []): a call gives [], as Theano's and PyTensor's function
    assert function([], None, updates=[(s, neg(s))], mode=PY)() == []
    assert function([], updates=[(s, neg(s))])() == []
    assert function([], [], updates=[(s, neg(s))])() == []
    assert s.get_value().tolist() == [-1.0]
    assert s.get_value().tolist() == [-1.0]


def test_updates_swap():
    a, b = vshared([1.0], "a"), vshared([2.0], "b")
    f = function([], [], updates=[(a, b), (b, a)], mode=PY)
    f()
    assert (a.get_value()[0], b.get_value()[0]) == (2.0, 1.0)
    f()
    assert (a.get_value()[0], b.get_value()[0]) == (1.0, 2.0)


def test_updates_apply_after_all_outputs():
    s = vshared([1.0], "s")
    f = function([], [s, add(s, s)], updates=[(s, add(s, s))], mode=PY)
    old, doubled = f()
    assert old.tolist() == [1.0] and doubled.tolist() == [2.0]
    assert s.get_value().tolist() == [2.0]
    # The returned old value is not the new storage and was not changed.
    old2, _ = f()
    assert old.tolist() == [1.0] and old2.tolist() == [2.0]


def test_updates_dict_and_default_update():
    s = vshared([1.0], "s")
    t = vshared([5.0], "t")
    t.default_update = add(t, t)
    x = vec("x")
    f = function([x], add(x, t), updates={s: add(s, x)}, mode=PY)
    assert f([1.0]).tolist() == [6.0]
    assert s.get_value().tolist() == [2.0] and t.get_value().tolist() == [10.0]
    g = function([x], add(x, t), no_default_updates=True, mode=PY)
    g([0.0])
    assert t.get_value().tolist() == [10.0]
    h = function([x], add(x, t), no_default_updates=[t], mode=PY)
    h([0.0])
    assert t.get_value().tolist() == [10.0]


def test_bad_updates():
    s = vshared([1.0], "s")
    x = vec("x")
    with pytest.raises(TypeError, match=r"update target must be a SharedVariable, got Variable: x"):
        function([x], x, updates=[(x, neg(x))], mode=PY)
    with pytest.raises(ValueError, match="The updates parameter must be a dict or a list of"):
        function([], s, updates=[s, neg(s)], mode=PY)
    with pytest.raises(ValueError, match="the shared variable s has two update expressions"):
        function([], s, updates=[(s, neg(s)), (s, exp(s))], mode=PY)
    from theano_dag.graph.type import Generic

    with pytest.raises(TypeError) as info:
        function([], s, updates=[(s, Generic()("z"))], mode=PY)
    assert str(info.value) == (
        "An update must have the same type as the shared variable it updates: s has type "
        "Vec, its update z has type Generic"
    )


def test_givens_substitute():
    x, y, z = vec("x"), vec("y"), vec("z")
    f = function([y], add(x, x), givens={x: mul(y, y)}, mode=PY)
    assert f([3.0]).tolist() == [18.0]
    s = vshared([10.0], "s")
    f = function([z], add(x, z), givens=[(x, s)], mode=PY)
    assert f([1.0]).tolist() == [11.0]
    # The user's graph is untouched.
    assert add(x, x).owner.inputs[0] is x


def test_givens_errors():
    x, y = vec("x"), vec("y")
    with pytest.raises(ValueError, match="givens tries to replace 'x', which is an input"):
        function([x], neg(x), givens={x: y}, mode=PY)
    from theano_dag.graph.type import Generic

    with pytest.raises(TypeError) as info:
        function([y], neg(x), givens={x: Generic()("w")}, mode=PY)
    assert str(info.value) == (
        "givens: cannot replace x (type Vec) by w (type Generic): the types must match"
    )


def test_unused_input():
    x, y = vec("x"), vec("y")
    with pytest.raises(UnusedInputError) as info:
        function([x, y], neg(x), mode=PY)
    assert str(info.value) == (
        "function was asked to compute outputs from input 'y' (position 1), but that input is "
        "not part of the computational graph needed to compute the outputs. Pass "
        "on_unused_input='warn' to make this a warning, or 'ignore'."
    )
    with pytest.warns(UserWarning, match="input 'y' \\(position 1\\)"):
        function([x, y], neg(x), mode=PY, on_unused_input="warn")
    f = function([x, y], neg(x), mode=PY, on_unused_input="ignore")
    assert f([1.0], [2.0]).tolist() == [-1.0]
    with pytest.raises(ValueError, match="Invalid value for on_unused_input: 'loud'"):
        function([x], neg(x), mode=PY, on_unused_input="loud")


def test_bad_function_arguments():
    x = vec("x")
    with pytest.raises(TypeError, match="first argument must be a list of input variables"):
        function(x, neg(x))
    with pytest.raises(ValueError, match="Variable x is given twice in the inputs of function"):
        function([x, x], neg(x), mode=PY)
    s = vshared([1.0], "s")
    with pytest.raises(TypeError, match="Cannot use a shared variable \\(s\\) as explicit"):
        function([s], neg(s), mode=PY)
    with pytest.raises(TypeError, match="Outputs must be Variables or Out instances, got int"):
        function([x], [neg(x), 3], mode=PY)


def test_outputs_not_overwritten_by_later_call():
    x = vec("x")
    f = function([x], reuse(x), mode=PY_NOGC)
    r1 = f(np.ones(2))
    r2 = f(np.full(2, 3.0))
    assert r1.tolist() == [2.0, 2.0] and r2.tolist() == [6.0, 6.0]
    assert r1 is not r2


def test_borrowed_output_may_be_overwritten():
    x = vec("x")
    f = function([x], Out(reuse(x), borrow=True), mode=PY_NOGC)
    r1 = f(np.ones(2))
    f(np.full(2, 3.0))
    # borrow=True hands back internal storage: the next call writes into it.
    assert r1.tolist() == [6.0, 6.0]


def test_output_aliasing_an_input_is_copied():
    x = vec("x")
    f = function([x], x, mode=PY)
    a = np.ones(2)
    out = f(a)
    assert out is not a and not np.shares_memory(out, a)
    assert isinstance(f.maker.fgraph.outputs[0].owner.op, DeepCopyOp)
    g = function([x], transpose(x), mode=PY)
    assert not np.shares_memory(g(a), a)
    h = function([In(x, borrow=True)], Out(transpose(x), borrow=True), mode=PY)
    assert isinstance(h.maker.fgraph.outputs[0].owner.op, ViewOp)
    assert np.shares_memory(h(a), a)


def test_borrowed_outputs_that_are_an_input_not_borrowed_are_copies():
    # An output that is also a later output was wrapped in a view when both were
    # borrowed, whatever it viewed: the caller's own input array came back (Theano's
    # insert_deepcopy does the same). Two borrowed outputs may share memory, but the
    # input is not borrowed.
    x = vec("x")
    f = function([x], [Out(x, borrow=True), Out(x, borrow=True)], mode=PY)
    a = np.ones(2)
    r = f(a)
    assert not np.shares_memory(r[0], a) and not np.shares_memory(r[1], a)
    g = function([In(x, borrow=True)], [Out(x, borrow=True), Out(x, borrow=True)], mode=PY)
    assert np.shares_memory(g(a)[0], a)  # borrowed on both sides: a view


def test_duplicate_outputs_do_not_alias():
    x = vec("x")
    y = neg(x)
    o1, o2 = function([x], [y, y], mode=PY)([1.0])
    assert o1 is not o2
    o1[0] = 7.0
    assert o2.tolist() == [-1.0]


def test_shared_output_is_a_copy():
    s = vshared([1.0, 2.0], "s")
    v = function([], s, mode=PY)()
    v[0] = 100.0
    assert s.get_value().tolist() == [1.0, 2.0]


def test_inplace_graph_refused_unless_accepted():
    x, y = vec("x"), vec("y")
    with pytest.raises(TypeError, match="Graph must not contain inplace operations"):
        function([x, y], add_inplace(x, y), mode=PY)
    # Accepted, the caller's own in-place op overwrites its input, as in Theano (issue 16:
    # Theano's tests of in-place ops rely on it); the other input is kept.
    f = function([x, y], add_inplace(x, y), mode=PY, accept_inplace=True)
    a, b = np.ones(2), np.full(2, 2.0)
    assert f(a, b).tolist() == [3.0, 3.0]
    assert a.tolist() == [3.0, 3.0] and b.tolist() == [2.0, 2.0]


def test_a_rewrite_never_destroys_an_input_the_caller_did_not_give_up():
    x, y = vec("x"), vec("y")
    f = function([x, y], add(neg(add_inplace(x, y)), y), accept_inplace=True)
    a, b = np.ones(2), np.full(2, 2.0)
    assert f(a, b).tolist() == [-1.0, -1.0]
    assert b.tolist() == [2.0, 2.0]


def test_mutable_input_may_be_destroyed_others_not():
    x, y = vec("x"), vec("y")
    f = function([In(x, mutable=True), y], add_inplace(x, y), mode=PY, accept_inplace=True)
    a, b = np.ones(2), np.full(2, 2.0)
    out = f(a, b)
    assert out.tolist() == [3.0, 3.0]
    assert a.tolist() == [3.0, 3.0]  # declared mutable: overwritten
    assert b.tolist() == [2.0, 2.0]


def test_an_argument_sharing_a_mutable_ones_memory_is_copied_first():
    # x is overwritten by x - x; y + (x - x) runs after it, so y given the same array
    # reads zeros unless the call copied it. The input of another type between them
    # is not compared.
    x, y = vec("x"), vec("y")
    g = Generic()("g")
    zeros = add_inplace(x, neg(x))
    f = function(
        [In(x, mutable=True), g, y],
        [zeros, add(y, zeros)],
        mode=PY,
        accept_inplace=True,
        on_unused_input="ignore",
    )
    a = np.array([1.0, 2.0])
    z, same = f(a, a, a)
    assert z.tolist() == [0.0, 0.0] and same.tolist() == [1.0, 2.0]
    assert a.tolist() == [0.0, 0.0]  # declared mutable: overwritten


def test_inputs_not_modified_by_a_plain_function():
    x = vec("x")
    f = function([x], neg(add(x, x)), mode=PY)
    a = np.array([1.0, 2.0])
    f(a)
    assert a.tolist() == [1.0, 2.0]


def test_in_value_defaults_and_state():
    x, y = vec("x"), vec("y")
    f = function([x, In(y, value=[10.0])], add(x, y), mode=PY)
    assert f([1.0]).tolist() == [11.0]
    assert f([1.0], [1.0]).tolist() == [2.0]
    assert f([1.0]).tolist() == [11.0]  # the default is refed
    assert f["y"].tolist() == [10.0]
    f["y"] = [0.5]
    assert f([1.0]).tolist() == [1.5]
    # An In with a value and an update is state kept by the function.
    acc = vec("acc")
    g = function([x, In(acc, value=[0.0], update=add(acc, x))], acc, mode=PY)
    assert g([1.0]).tolist() == [0.0]
    assert g([2.0]).tolist() == [1.0]
    assert g["acc"].tolist() == [3.0]


def test_copy_has_own_storage_and_shares_shared():
    s = vshared([0.0], "s")
    x = vec("x")
    f = function([x], s, updates=[(s, add(s, x))], mode=PY, name="f")
    g = f.copy()
    assert g.name == "f copy" and g.maker.fgraph is not f.maker.fgraph
    f([1.0])
    g([2.0])
    assert s.get_value().tolist() == [3.0]
    h = f.copy(delete_updates=True)
    h([5.0])
    assert s.get_value().tolist() == [3.0]
    t = vshared([100.0], "t")
    k = f.copy(swap={s: t})
    k([1.0])
    assert t.get_value().tolist() == [101.0] and s.get_value().tolist() == [3.0]


def test_runtime_error_through_function():
    from compile_toys import Elem

    def bad(a):
        raise FloatingPointError("overflow here")

    x = vec("x")
    f = function([x], Elem(bad)(neg(x)), mode=PY, name="f")
    with pytest.raises(FloatingPointError) as info:
        f(np.zeros(3))
    text = str(info.value)
    assert text.startswith(
        "overflow here\n"
        "Apply node that caused the error: bad(negative.0)\n"
        "Toposort index: 1\n"
        "Inputs types: [Vec]\n"
        "Inputs shapes and dtypes: [(3,) float64]\n"
        "Backtrace when the node is created (use the flag traceback__limit=N to make it "
        "longer):\n"
    )
    # The user's line where the failing node was made (issue 17), then the hint.
    assert '    f = function([x], Elem(bad)(neg(x)), mode=PY, name="f")\n' in text
    assert text.endswith(
        "HINT: Use the flag exception_verbosity=high for the values of the node's inputs."
    )
    # The function still works after an error.
    g = function([x], neg(x), mode=PY)
    assert g([1.0]).tolist() == [-1.0]


def test_deep_chain_compiles_and_runs():
    x = vec("x")
    v = x
    for _ in range(5000):
        v = add(v, x)
    f = function([x], v, mode=PY)
    assert f([1.0]).tolist() == [5001.0]


def test_optimizer_is_called_with_the_fgraph():
    seen = []

    class Recorder:
        def optimize(self, fgraph):
            seen.append(len(fgraph.apply_nodes))

    x = vec("x")
    f = function([x], neg(neg(x)), mode=Mode(linker="py", optimizer=Recorder()))
    assert seen == [2] and f([1.0]).tolist() == [1.0]


def test_shared_generic_value():
    s = shared({"a": 1}, name="s")
    got = s.get_value()
    got["a"] = 2
    assert s.get_value() == {"a": 1}
    s.get_value(borrow=True)["a"] = 3
    assert s.get_value() == {"a": 3}


class InplaceRewrite:
    """An optimizer that tries to replace ``neg(x)`` by ``x += x * x``, done in place."""

    def __init__(self):
        self.refused = None

    def optimize(self, fgraph):
        from theano_dag.graph.destroyhandler import DestroyHandler

        fgraph.attach_feature(DestroyHandler())
        node = next(n for n in fgraph.toposort() if n.op is neg)
        x = node.inputs[0]
        try:
            fgraph.replace_validate(node.outputs[0], add_inplace(x, mul(x, x)), reason="inplace")
        except InconsistencyError as e:
            self.refused = str(e)


def test_rewrite_cannot_destroy_an_immutable_input():
    x = vec("x")
    opt = InplaceRewrite()
    f = function([x], exp(neg(x)), mode=Mode(linker="py", optimizer=opt))
    assert opt.refused.startswith("Trying to destroy a protected Variable: x")
    assert [str(n.op) for n in f.maker.fgraph.toposort()] == ["negative", "exp"]
    a = np.array([1.0])
    f(a)
    assert a.tolist() == [1.0]


def test_rewrite_may_destroy_a_mutable_input():
    x = vec("x")
    opt = InplaceRewrite()
    f = function([In(x, mutable=True)], exp(neg(x)), mode=Mode(linker="py", optimizer=opt))
    assert opt.refused is None
    a = np.array([1.0])
    np.testing.assert_allclose(f(a), np.exp([2.0]))
    assert a.tolist() == [2.0]


def test_dict_outputs_and_output_subset():
    x = vec("x")
    f = function([x], {"b": neg(x), "a": exp(x)}, mode=PY)
    res = f([0.0])
    assert sorted(res) == ["a", "b"] and res["a"].tolist() == [1.0]
    assert res["b"].tolist() == [-0.0]
    assert f.copy()([0.0])["a"].tolist() == [1.0]
    g = function([x], [neg(x), exp(x)], mode=PY)
    assert [r.tolist() for r in g([0.0], output_subset=[1])] == [[1.0]]


def test_dict_outputs_need_string_keys():
    x = vec("x")
    for outputs in ({1.0: x}, {1.0: x, "a": exp(x)}, {("a",): x}):
        with pytest.raises(OutputKeyError, match="must be strings, got") as info:
            function([x], outputs, mode=PY)
        # a TypeError, and the AssertionError Theano raised
        assert isinstance(info.value, TypeError) and isinstance(info.value, AssertionError)


def test_output_subset_of_dict_outputs_names_keys():
    # Theano's contract: with dict outputs the subset lists keys and a dict comes back.
    x = vec("x")
    f = function([x], {"b": neg(x), "a": exp(x)}, mode=PY)
    sub = f([0.0], output_subset=["a"])
    assert list(sub) == ["a"] and sub["a"].tolist() == [1.0]
    assert f([1.0], output_subset=["a", "b"])["b"].tolist() == [-1.0]


def test_function_dump_pickles_a_call_that_compiles_the_same(tmp_path):
    x = vec("x")
    s = shared(np.array([1.0, 2.0]), "s")
    path = str(tmp_path / "dump.pkl")
    assert function_dump(path, [x], add(x, s), mode=PY) is None
    with open(path, "rb") as f:
        args = pickle.load(f)
    assert args["mode"] is not None and args["accept_inplace"] is False
    f2 = function(**args)
    assert f2(np.array([10.0, 20.0])).tolist() == [11.0, 22.0]
    with pytest.raises(TypeError, match="filename"):
        function_dump(tmp_path, [x], x)


def test_many_outputs_aliasing_each_other_and_inputs():
    # Which outputs get a copy, a view or nothing: an output is wrapped when a later
    # output is one of its views (with the first such output's borrow flag), else when
    # it views an input.
    x = vec("x")
    y = neg(x)
    t = transpose(x)
    outs = [
        Out(y, borrow=True),  # y again at 1 (borrowed): a view
        Out(y, borrow=True),  # y again at 2, not borrowed: a copy
        Out(y, borrow=False),  # last y, no input below it: as is
        t,  # views x, which output 4 is: a copy (t is not borrowed)
        Out(x, borrow=True),  # the input itself, borrowed on both sides: a view
        neg(y),
    ]
    f = function([In(x, borrow=True)], outs, mode=PY)
    ops = [type(o.owner.op).__name__ for o in f.maker.fgraph.outputs]
    assert ops == ["ViewOp", "DeepCopyOp", "Elem", "DeepCopyOp", "ViewOp", "Elem"]
    a = np.array([1.0, 2.0])
    r = f(a)
    np.testing.assert_array_equal(r[0], -a)
    np.testing.assert_array_equal(r[4], a)
    np.testing.assert_array_equal(r[5], a)


def test_shared_variables_become_inputs_in_the_order_the_outputs_meet_them():
    x = vec("x")
    s1, s2, s3 = vshared([1.0], "s1"), vshared([2.0], "s2"), vshared([3.0], "s3")
    f = function([x], [add(x, s2), add(x, s1), add(s3, s2)], mode=PY)
    assert [i.variable for i in f.maker.inputs[1:]] == [s2, s1, s3]
    np.testing.assert_array_equal(f([10.0])[2], [5.0])


def test_function_work_grows_linearly_with_the_number_of_outputs():
    # Outputs are rebuilt one after the other and checked for aliasing pairwise: both
    # once grew with the square of the number of outputs.
    def calls(n):
        x = vec("x")
        outs = [neg(x)]
        for _ in range(n - 1):
            outs.append(neg(outs[-1]))
        count = 0

        def profile(frame, event, arg):
            nonlocal count
            if event in ("call", "c_call"):
                count += 1

        sys.setprofile(profile)
        try:
            function([x], outs, mode=PY)
        finally:
            sys.setprofile(None)
        return count

    small, big = calls(150), calls(1200)
    assert big < 12 * small, (small, big)  # 8x the outputs; quadratic would be ~64x


class _Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self):
        self.me = self


def test_function_leaves_the_collector_as_it_found_it():
    x = vec("x")
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            f = function([x], neg(x), mode=PY)
            assert gc.isenabled() is enabled
            np.testing.assert_array_equal(f([1.0, -2.0]), [-1.0, 2.0])
    finally:
        (gc.enable if was else gc.disable)()


@contextlib.contextmanager
def _collector_on(*thresholds):
    """The collector on with ``thresholds``; its settings, and the pauses' counts of
    promoted objects (graph.utils), restored after."""
    was, before = gc.isenabled(), gc.get_threshold()
    saved = graph_utils._blocks_at_full, graph_utils._promoted
    gc.enable()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        (gc.enable if was else gc.disable)()
        graph_utils._blocks_at_full, graph_utils._promoted = saved


@pytest.fixture
def quiet_collector():
    """The collector on, but no automatic collection during the test (which would move
    objects between generations at random points)."""
    with _collector_on(10**9):
        yield


def _in_generation(obj, generation):
    return any(o is obj for o in gc.get_objects(generation=generation))


def test_gc_paused_promote_moves_the_new_objects_to_the_oldest_generation(quiet_collector):
    with gc_paused(promote=True):
        assert not gc.isenabled()
        kept = _Cycle()
        dropped = weakref.ref(_Cycle())
    assert gc.isenabled()
    assert _in_generation(kept, 2)
    assert not _in_generation(kept, 0) and not _in_generation(kept, 1)
    assert gc.get_freeze_count() == 0
    # The cycle dropped in the block is garbage still, freed by a full collection.
    assert dropped() is not None
    gc.collect()
    assert dropped() is None


def test_gc_paused_promote_leaves_frozen_objects_and_a_disabled_collector_alone(
    quiet_collector,
):
    frozen = _Cycle()
    gc.freeze()
    try:
        n_frozen = gc.get_freeze_count()
        with gc_paused(promote=True):
            fresh = _Cycle()
        assert gc.get_freeze_count() == n_frozen  # the program's frozen objects stay
        assert _in_generation(fresh, 0)  # and nothing was moved
    finally:
        gc.unfreeze()
    gc.disable()
    with gc_paused(promote=True):
        fresh = _Cycle()
    assert not gc.isenabled()
    assert _in_generation(fresh, 0)
    del frozen


def test_gc_paused_in_two_threads_keeps_the_collector_off_until_the_last_block_ends(
    quiet_collector,
):
    entered, release = threading.Event(), threading.Event()

    def worker():
        with gc_paused():
            entered.set()
            release.wait(30)

    t = threading.Thread(target=worker)
    t.start()
    assert entered.wait(30)
    with gc_paused(promote=True):
        release.set()
        t.join(30)
        assert not gc.isenabled()  # the worker's block ended, this one has not
    assert gc.isenabled()
    # The other order: this thread's block ends first.
    entered.clear(), release.clear()
    with gc_paused():
        t = threading.Thread(target=worker)
        t.start()
        assert entered.wait(30)
    assert not gc.isenabled()
    release.set()
    t.join(30)
    assert gc.isenabled()


class _SlowSwitch:
    """``gc`` as graph.utils sees it, whose ``isenabled`` lets another thread run a whole
    block between a block's reading of the switch and its turning it off."""

    def __init__(self, on_read):
        self.on_read = on_read

    def __getattr__(self, name):
        return getattr(gc, name)

    def isenabled(self):
        value = gc.isenabled()
        self.on_read()
        return value


def test_gc_paused_blocks_ending_between_anothers_read_and_pause_leave_the_collector_on(
    quiet_collector, monkeypatch
):
    # Thread A pauses; thread B reads the switch (off: A's pause); A's block ends and
    # turns the collector on; B turns it off. Unless B took "off" for the program's own
    # choice, B's end turns it on again.
    a_in, b_reading, a_out = threading.Event(), threading.Event(), threading.Event()
    in_b = threading.local()

    def on_read():
        if getattr(in_b, "first_read", False):
            in_b.first_read = False
            b_reading.set()
            a_out.wait(1)  # A cannot end while B holds the pauses' lock: it waits here

    def a():
        with gc_paused():
            a_in.set()
            b_reading.wait(30)
        a_out.set()

    def b():
        in_b.first_read = True
        with gc_paused():  # reads the switch only when no other block runs
            pass
        b_reading.set()

    monkeypatch.setattr(graph_utils, "gc", _SlowSwitch(on_read))
    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start()
    assert a_in.wait(30)
    tb.start()
    ta.join(30), tb.join(30)
    assert gc.isenabled()


def test_gc_as_set_turns_the_collector_on_within_a_pause_only_when_the_program_had_it_on(
    quiet_collector,
):
    with gc_paused():
        with gc_as_set():
            assert gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with gc_paused(), gc_as_set():
        assert not gc.isenabled()
    assert not gc.isenabled()
    with gc_as_set():  # no pause of ours: nothing to do
        assert not gc.isenabled()


@pytest.fixture
def automatic_collections():
    """The collector on with CPython's default thresholds."""
    with _collector_on(700, 10, 10):
        yield


def test_functions_dropped_in_a_loop_are_freed_without_a_collection_asked_for(
    automatic_collections,
):
    # A compile moves its objects to the oldest generation (promote), which CPython's
    # rule for full collections does not count: a loop compiling and dropping functions
    # never had one, and kept every function (in reference cycles) for good.
    x = vec()
    graph_utils._blocks_at_full, graph_utils._promoted = 10**9, 0  # none due
    f = function([x], exp(neg(x)))
    made = graph_utils._promoted
    assert made > 100  # the compile's objects, counted as promoted
    dropped = weakref.ref(f)
    del f
    assert dropped() is not None  # in cycles, in the oldest generation
    g = function([x], neg(x))  # (none due yet)
    # As after a loop of such compiles: more promoted than the 70,000 objects CPython's
    # thresholds allow between two full collections, and the heap grown by a third.
    blocks = sys.getallocatedblocks()
    graph_utils._blocks_at_full, graph_utils._promoted = blocks * 3 // 4, 70_001
    h = function([x], exp(x))  # its pause starts with the full collection now due
    assert dropped() is None
    assert graph_utils._blocks_at_full is None  # measured again before the next one
    np.testing.assert_allclose(g([0.5]), -0.5)
    np.testing.assert_allclose(h([0.5]), np.exp(0.5))
