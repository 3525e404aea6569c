"""function() and shared() with tensors: input checking messages, updates, givens, borrow."""

import importlib.util

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import In, Out, function, shared
from theano_dag.compile import DuplicateInputError, Mode, UnusedInputError
from theano_dag.config import config
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.tensor import math as tm
from theano_dag.tensor.inplace import add_inplace
from theano_dag.tensor.sharedvar import TensorSharedVariable
from theano_dag.tensor.type import TensorType


def fvector(name):
    return TensorType("float32", shape=(None,))(name)


def dvector(name):
    return TensorType("float64", shape=(None,))(name)


def drow(name):
    return TensorType("float64", shape=(1, None))(name)


def dmatrix3(name):
    return TensorType("float64", shape=(None, 3))(name)


PRECISION = (
    "cannot store a value of dtype float64 without risking loss of precision. If you do not "
    "mind this loss, you can: 1) explicitly cast your data to float32, or 2) set "
    "allow_input_downcast=True when calling function."
)


@pytest.fixture
def f2():
    x, y = fvector("x"), drow("y")
    return function([x, y], x + y, name="f2")


def test_wrong_dtype(f2):
    with pytest.raises(TypeError) as info:
        f2(np.zeros(3), np.zeros((1, 3)))
    assert str(info.value) == (
        "Function 'f2': bad input 'x' (position 0): TensorType(float32, vector) " + PRECISION
    )


def test_wrong_dtype_allowed_with_downcast():
    x = fvector("x")
    f = function([x], x * 2, allow_input_downcast=True)
    out = f(np.array([0.5, 1.0]))
    assert out.dtype == np.float32 and out.tolist() == [1.0, 2.0]
    g = function([In(x, allow_downcast=True)], x * 2)
    assert g(np.array([1.0])).dtype == np.float32


def test_python_float_goes_into_floatx():
    with config.change_flags(floatX="float32"):
        x = TensorType("float32", shape=())("x")
        f = function([x], x + 1)
        assert f(0.5) == np.float32(1.5)


def test_wrong_ndim(f2):
    with pytest.raises(TypeError) as info:
        f2(np.zeros(3, dtype="float32"), np.zeros(3))
    assert str(info.value) == (
        "Function 'f2': bad input 'y' (position 1): TensorType(float64, row): wrong number of "
        "dimensions: expected 2, got 1 with shape (3,)."
    )


def test_non_unit_length_on_broadcastable_axis(f2):
    with pytest.raises(TypeError) as info:
        f2(np.zeros(3, dtype="float32"), np.zeros((2, 3)))
    assert str(info.value) == (
        "Function 'f2': bad input 'y' (position 1): TensorType(float64, row): non-unit value on "
        "shape on a broadcastable dimension: dimension 0 has length 2, expected 1 (shape (2, 3))."
    )


def test_static_length_mismatch_unnamed_function():
    m = dmatrix3("m")
    f = function([m], m + 1)
    with pytest.raises(TypeError) as info:
        f(np.zeros((2, 4)))
    assert str(info.value) == (
        "Function: bad input 'm' (position 0): TensorType(float64, shape=(?, 3)): dimension 1 "
        "has length 4, expected 3 (shape (2, 4))."
    )


def test_missing_extra_and_unknown_arguments(f2):
    x = np.zeros(3, dtype="float32")
    with pytest.raises(TypeError) as info:
        f2(x)
    assert str(info.value) == "Function 'f2' is missing a value for input 'y' (position 1)"
    with pytest.raises(TypeError) as info:
        f2(x, np.zeros((1, 3)), 5)
    assert str(info.value) == "Function 'f2' takes 2 inputs ('x', 'y') but 3 were given"
    with pytest.raises(TypeError) as info:
        f2(x, np.zeros((1, 3)), z=1)
    assert str(info.value) == (
        "Function 'f2' got an unexpected keyword argument 'z'; its inputs are 'x', 'y'"
    )
    with pytest.raises(TypeError) as info:
        f2(x, x=x)
    assert str(info.value) == "Function 'f2' got multiple values for input 'x' (position 0)"


def test_unnamed_input_is_named_by_position():
    v = TensorType("float64", shape=(None,))()
    f = function([v], v * 2)
    with pytest.raises(TypeError) as info:
        f()
    assert str(info.value) == (
        "Function is missing a value for input at position 0 (unnamed, "
        "TensorType(float64, vector))"
    )
    with pytest.raises(TypeError, match=r"takes 1 input \(<unnamed 0>\) but 2 were given"):
        f([1.0], [2.0])


def test_shared_variable_is_not_a_keyword():
    s = shared(np.zeros(2), name="s")
    x = dvector("x")
    f = function([x], x + s)
    with pytest.raises(TypeError) as info:
        f(np.ones(2), s=np.ones(2))
    assert str(info.value) == (
        "Function: input 's' is implicit (a shared variable or a stored state) and cannot be "
        "given in a call; use set_value instead"
    )


def test_bad_input_runs_no_op_and_keeps_state():
    s = shared(np.zeros(2), name="s")
    x = dvector("x")
    f = function([x], x, updates=[(s, s + x)])
    with pytest.raises(TypeError):
        f(np.ones((2, 2)))
    assert s.get_value().tolist() == [0.0, 0.0]
    f(np.ones(2))
    assert s.get_value().tolist() == [1.0, 1.0]


def test_keyword_calls_and_defaults():
    x, y = dvector("x"), dvector("y")
    f = function([x, In(y, value=np.array([10.0, 20.0]))], x * y)
    assert f(np.ones(2)).tolist() == [10.0, 20.0]
    assert f(y=np.ones(2), x=np.full(2, 3.0)).tolist() == [3.0, 3.0]
    assert f(x=np.ones(2)).tolist() == [10.0, 20.0]
    g = function([In(x, name="alpha")], x + 1)
    assert g(alpha=np.zeros(1)).tolist() == [1.0]


def test_updates_swap_shared_arrays():
    a, b = shared(np.array([1.0, 2.0]), name="a"), shared(np.array([3.0, 4.0]), name="b")
    f = function([], [a, b], updates=[(a, b), (b, a)])
    va, vb = f()
    assert va.tolist() == [1.0, 2.0] and vb.tolist() == [3.0, 4.0]
    assert a.get_value().tolist() == [3.0, 4.0] and b.get_value().tolist() == [1.0, 2.0]
    f()
    assert a.get_value().tolist() == [1.0, 2.0] and b.get_value().tolist() == [3.0, 4.0]


def test_sgd_step_with_updates():
    w = shared(np.array([1.0, -2.0]), name="w")
    x = dvector("x")
    loss = tm.sum((w * x) ** 2)
    step = function([x], loss, updates=[(w, w - 0.1 * 2 * w * x * x)])
    first = step(np.ones(2))
    second = step(np.ones(2))
    assert first == pytest.approx(5.0) and second == pytest.approx(0.64 * 5.0)


@pytest.mark.parametrize(
    "linker",
    [
        "py",
        "cpu",
        pytest.param(
            "opencl",
            marks=pytest.mark.skipif(not opencl_available()[0], reason="no OpenCL device"),
        ),
    ],
)
def test_update_of_a_more_specific_type_is_accepted(linker):
    # ``s - ones(4)`` knows its length; ``s`` does not. Every value of the update is a
    # value of ``s`` (PyMC3's ADVI writes such updates), so it is stored as is.
    s = shared(np.arange(4.0), name="s")
    upd = s - tt.ones(4)
    assert upd.type.shape == (4,) and s.type.shape == (None,)
    f = function([], s * 2, updates=[(s, upd)], mode=Mode(linker=linker))
    assert f().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert s.get_value().tolist() == [-1.0, 0.0, 1.0, 2.0]
    f()
    assert s.get_value().tolist() == [-2.0, -1.0, 0.0, 1.0]
    # A row (static length 1) into a matrix, and an input's own update (``In``).
    m = shared(np.zeros((1, 3)), name="m")
    g = function([], [], updates=[(m, m + tt.ones((1, 3)))], mode=Mode(linker=linker))
    g()
    assert m.get_value().tolist() == [[1.0, 1.0, 1.0]]
    x = dvector("x")
    h = function([In(x, value=np.zeros(2), update=x + tt.ones(2))], x * 3, mode=Mode(linker=linker))
    assert h().tolist() == [0.0, 0.0] and h().tolist() == [3.0, 3.0]


def test_update_of_another_type_is_refused():
    s = shared(np.zeros(4), name="s")
    for bad, bad_type in [
        (tt.ones((4, 1)), "TensorType(float64, shape=(4, 1))"),
        (tt.ones(4, dtype="float32"), "TensorType(float32, shape=(4,))"),
    ]:
        with pytest.raises(TypeError) as info:
            function([], [], updates=[(s, bad)])
        assert str(info.value) == (
            "An update must have the same type as the shared variable it updates: s has "
            f"type TensorType(float64, vector), its update {bad} has type {bad_type}"
        )
    # A less specific type is refused too: the variable's static length is a promise.
    r = shared(np.zeros((1, 3)), name="r", shape=(1, 3))
    with pytest.raises(TypeError, match="An update must have the same type"):
        function([], [], updates=[(r, tt.matrix("x", dtype="float64"))])


def test_update_of_length_one_where_the_variable_has_none_is_refused():
    # Theano's test_update_err_broadcast: a (1, 1) update of a matrix would be stored as
    # a (1, 1) value, not broadcast; Theano refuses its broadcastable dimensions.
    s = shared(np.ones((3, 3)), name="s")
    upd = s.sum().dimshuffle("x", "x")
    with pytest.raises(TypeError) as info:
        function([], [], updates={s: upd})
    assert str(info.value) == (
        "An update must have the same type as the shared variable it updates: s has type "
        f"TensorType(float64, matrix), its update {upd} has type TensorType(float64, "
        "shape=(1, 1)): it has length 1 where the shared variable's length is not known, "
        "and an update is stored as it is, never broadcast (broadcast it explicitly, e.g. "
        "tt.zeros_like(s) + update, as Theano asks)"
    )
    with pytest.raises(TypeError, match="type of the update should be the same"):
        function([In(dvector("x"), value=np.zeros(2), update=tt.ones(1))], [])
    # Broadcast explicitly, it is stored; a variable of static length 1 takes length 1.
    function([], [], updates={s: tt.zeros_like(s) + upd})()
    np.testing.assert_array_equal(s.get_value(), np.full((3, 3), 9.0))
    r = shared(np.zeros((1, 3)), name="r", shape=(1, 3))
    function([], [], updates={r: r + tt.ones((1, 3))})()
    np.testing.assert_array_equal(r.get_value(), np.ones((1, 3)))


def test_givens_with_tensors():
    x, y = dvector("x"), dvector("y")
    z = tm.exp(x) + y
    f = function([y], z, givens={x: y * 2})
    np.testing.assert_allclose(f(np.array([0.0, 1.0])), np.exp([0.0, 2.0]) + [0.0, 1.0])
    data = shared(np.array([5.0, 6.0]), name="data")
    g = function([], x * 2, givens=[(x, data)])
    assert g().tolist() == [10.0, 12.0]


def test_outputs_not_overwritten_and_inputs_not_modified():
    x = dvector("x")
    f = function([x], [x * 2, x + 1])
    a = np.array([1.0, 2.0])
    o1 = f(a)
    o2 = f(np.array([5.0, 5.0]))
    assert [o.tolist() for o in o1] == [[2.0, 4.0], [2.0, 3.0]]
    assert [o.tolist() for o in o2] == [[10.0, 10.0], [6.0, 6.0]]
    assert a.tolist() == [1.0, 2.0]
    ident = function([x], x)
    out = ident(a)
    out[0] = 99.0
    assert a.tolist() == [1.0, 2.0]


def test_shared_get_set_borrow():
    v = np.array([1.0, 2.0])
    s = shared(v, name="s")
    assert isinstance(s, TensorSharedVariable)
    v[0] = 100.0
    assert s.get_value()[0] == 1.0  # shared() copied
    got = s.get_value()
    got[1] = -1.0
    assert s.get_value()[1] == 2.0  # get_value() copies
    inner = s.get_value(borrow=True)
    inner[1] = 7.0
    assert s.get_value()[1] == 7.0  # borrow=True is the internal array
    w = np.zeros(2)
    s.set_value(w, borrow=True)
    w[0] = 3.0
    assert s.get_value()[0] == 3.0
    u = np.zeros(2)
    s.set_value(u)
    u[0] = 4.0
    assert s.get_value()[0] == 0.0
    b = shared(v, borrow=True)
    v[1] = 42.0
    assert b.get_value()[1] == 42.0


def test_shared_types():
    assert shared(np.zeros((2, 3), dtype="float32")).type == TensorType(
        "float32", shape=(None, None)
    )
    assert shared(3).type == TensorType("int64", shape=())
    assert shared(2.5).type == TensorType("float64", shape=())
    assert shared(np.zeros((1, 3)), broadcastable=(True, False)).type.broadcastable == (True, False)
    with pytest.raises(ValueError, match=r"shared: shape=\(3,\) has 1 entries for a value with 2"):
        shared(np.zeros((1, 3)), shape=(3,))
    with pytest.raises(TypeError, match="shared\\(\\) needs a value"):
        shared(dvector("x"))
    with pytest.raises(TypeError, match="No shared variable constructor accepts value='abc'"):
        shared("abc", borrow=True)


def test_shared_set_value_is_checked():
    s = shared(np.zeros(2), name="s")
    with pytest.raises(TypeError, match="wrong number of dimensions: expected 1, got 2"):
        s.set_value(np.zeros((2, 2)))
    assert s.get_value().tolist() == [0.0, 0.0]


def test_borrowed_output_is_internal_storage_without_gc():
    from theano_dag.engines.basic import PerformLinker

    s = shared(np.array([1.0, 2.0]), name="s")
    f = function(
        [], Out(s, borrow=True), mode=Mode(linker=PerformLinker(allow_gc=False), optimizer=None)
    )
    assert f() is s.get_value(borrow=True)
    g = function([], s)
    assert g() is not s.get_value(borrow=True)


def test_eval():
    x = dvector("x")
    assert (x * 3).eval({x: np.array([1.0, 2.0])}).tolist() == [3.0, 6.0]


@pytest.mark.parametrize("mode", [Mode(linker="py", optimizer=None), None], ids=["py", "default"])
def test_runtime_error_from_a_tensor_op(mode):
    x, y = dvector("x"), dvector("y")
    f = function([x, y], tm.exp(x) + y, name="f", mode=mode)
    with pytest.raises(ValueError) as info:
        f(np.zeros(2), np.zeros(3))
    msg = str(info.value)
    # Unoptimized, the failing node is the add; under FAST_RUN fusion made it a Composite.
    expected = "Elemwise{add" if mode is not None else "Elemwise{Composite{add(i1, exp(i0))}"
    assert f"Apply node that caused the error: {expected}" in msg
    assert "Inputs shapes and dtypes: [(2,) float64, (3,) float64]" in msg
    if mode is not None:
        assert "Toposort index: 1" in msg
    assert isinstance(info.value.__cause__, ValueError)


def test_no_input_function_called_with_one_argument():
    f = function([], shared(np.ones(1), name="s") * 2, name="g")
    with pytest.raises(TypeError) as info:
        f(1)
    assert str(info.value) == "Function 'g' takes 0 inputs (no inputs) but 1 was given"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_givens_of_another_type_need_rebuild_strict_false(dtype):
    # Theano's rebuild_strict=False: the graph above a replacement takes its new type.
    w = tt.matrix("w", dtype=dtype)
    x, y = tt.vector("x", dtype=dtype), tt.vector("y", dtype=dtype)
    with pytest.raises(TypeError, match="the types must match"):
        theano_dag.function([w, y], x * y, givens=[(x, w)])
    f = theano_dag.function([w, y], x * y, givens=[(x, w)], rebuild_strict=False)
    wv, yv = np.ones((3, 5), dtype), np.arange(5, dtype=dtype)
    out = f(wv, yv)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, wv * yv)


def test_an_input_given_twice_is_a_duplicate_input_error():
    x = tt.lscalar("x")
    for inputs in ([x, x], [x, tt.lscalar("y"), In(x)]):
        with pytest.raises(DuplicateInputError) as info:
            theano_dag.function(inputs, x)
        assert str(info.value) == (
            f"Variable x is given twice in the inputs of function, at positions 0 and "
            f"{len(inputs) - 1}: a call would ignore one of the two values given for it. "
            "List each input once."
        )
        # Theano raises an UnusedInputError there: code that catches it still does.
        assert isinstance(info.value, UnusedInputError)
    with pytest.raises(DuplicateInputError):
        theano_dag.function([x, x], x, on_unused_input="ignore")


def test_deleting_a_default_update():
    s = theano_dag.shared(0)
    s.default_update = s + 1
    f = theano_dag.function([], s)
    f()
    assert s.get_value() == 1
    del s.default_update
    assert s.default_update is None
    theano_dag.function([], s)()
    assert s.get_value() == 1


COPY_MODES = [
    pytest.param("FAST_RUN", id="cpu"),
    pytest.param("FAST_COMPILE", id="fast_compile"),
    pytest.param(Mode(linker="py"), id="py"),
    pytest.param(
        "DASK",
        id="dask",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("dask") is None, reason="dask is not installed"
        ),
    ),
]


@pytest.mark.parametrize("mode", COPY_MODES)
def test_copy_swaps_shared_variables_and_shares_memory(mode):
    # Theano's test_swap_SharedVariable and test_copy_share_memory: a copy reads and
    # updates the swapped-in shared variables, the original its own, and every engine
    # shows its cells in fn.storage_map: the swapped variable's cell is its container's.
    i = tt.iscalar("i")
    xs = shared(np.arange(10.0), name="xs")
    y, z, m = shared(1.0, name="y"), shared(2.0, name="z"), shared(0.0, name="m")
    y2, z2 = shared(3.0, name="y2"), shared(4.0, name="z2")
    out = xs[i] + y + z + m
    f = function([i], out, mode=mode, updates=[(z, z + 1), (m, m + 2)])
    g = f.copy(swap={y: y2, z: z2})
    assert f(1) == 1 + 1 + 2 + 0
    assert g(1) == [1 + 3 + 4 + 2]
    assert g(2) == [2 + 3 + 5 + 4]
    assert (m.get_value(), z.get_value(), z2.get_value(), y2.get_value()) == (6, 3, 6, 3)
    cells = {v.name: cell for v, cell in g.fn.storage_map.items() if v.name}
    assert cells["y2"] is y2.container.storage and cells["z2"] is z2.container.storage
    # share_memory: the copy's constants' (and intermediates') cells are the original's.
    c = tt.constant(np.array([0.5, 1.5]), name="c")
    h = function([i], (xs[i] * c).sum(), mode=mode)
    k = h.copy(share_memory=True)
    assert k(3) == h(3) == 6.0
    io = set(k.maker.fgraph.inputs) | set(k.maker.fgraph.outputs)
    originals = [id(cell) for cell in h.fn.storage_map.values()]
    shared_cells = [cell for v, cell in k.fn.storage_map.items() if v not in io]
    assert shared_cells and all(id(cell) in originals for cell in shared_cells)
    for (spec, _, specs), here, there in zip(h.indices, h.input_storage, k.input_storage):
        assert specs == [spec] and here.data is there.data


def test_free_drops_the_cpu_engines_plans_and_keeps_the_values():
    x = tt.dvector("x")
    s = shared(np.ones(3), name="s")
    f = function([x], tt.exp(x) * s * 2, mode="FAST_RUN")
    np.testing.assert_allclose(f(np.zeros(3)), [2.0, 2.0, 2.0])
    assert f.fn.plans
    f.free()
    assert not f.fn.plans and f.fn.current is None
    np.testing.assert_allclose(s.get_value(), np.ones(3))  # shared values stay
    for _ in range(3):  # the planned call is made again, then its fast path
        np.testing.assert_allclose(f(np.zeros(3)), [2.0, 2.0, 2.0])
    assert len(f.fn.plans) == 1


@pytest.mark.parametrize("linker", ["py", "cpu"])
def test_a_read_beside_the_callers_inplace_op_is_rewritten_without_a_loop(linker):
    # Dropping the ``* 1`` would make the output a view of x, which add_inplace
    # overwrites: the graph refuses it. Canonicalize used to try that replacement
    # again after each refusal, until its loop guard warned.
    x, y = tt.vector("x"), tt.vector("y")
    with config.change_flags(on_opt_error="raise"):
        f = function(
            [x, y], [add_inplace(x, y), x[0] * 1], accept_inplace=True, mode=Mode(linker=linker)
        )
    a = np.array([1.0, 2.0, 3.0])
    total, first = f(a, np.ones(3))
    assert total.tolist() == [2.0, 3.0, 4.0]
    assert first == 1.0  # read before the in-place add
