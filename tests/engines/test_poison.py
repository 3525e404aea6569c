"""The CPU engine's poisoned mode, its plan checker, and the wrong values they found.

A step's target (the array the plan gives it to write its output into) is a name bound
once before the step: three reproducers below returned uninitialised memory because an
allocating target was an expression that each reading evaluated again (the product
written into one fresh array, a second fresh one returned). They run on every CPU
configuration: the default, everything planned (``min_plan_bytes=0``), and poisoned.
"""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as T
from theano_dag.compile.mode import Mode
from theano_dag.config import FLAGS, config
from theano_dag.engines.cpu.emit.codegen import poison
from theano_dag.engines.cpu.emit.impls import IMPLS, Step, register_impl
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.cpu.plan.program import DEFAULT_MIN_PLAN_BYTES
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op

MODES = {
    "default": lambda: None,
    "plan_all": lambda: Mode(
        linker=CPULinker(min_plan_bytes=0, poison=False), optimizer="fast_run"
    ),
    "poisoned": lambda: Mode(linker=CPULinker(min_plan_bytes=0, poison=True), optimizer="fast_run"),
    "py": lambda: Mode(linker="py", optimizer="fast_run"),
}


@pytest.fixture(params=sorted(MODES))
def mode(request):
    return MODES[request.param]()


def _twice(f, *args):
    """Two calls: the second sees blocks that the first left behind."""
    first = [np.array(r, copy=True) for r in _as_list(f(*args))]
    second = _as_list(f(*args))
    return first, second


def _as_list(r):
    return list(r) if isinstance(r, list) else [r]


# --------------------------------------------------------------------------- reproducers


def test_a_product_returned_beside_a_reduction(mode):
    X, Y = T.dmatrix("X"), T.dmatrix("Y")
    f = theano_dag.function([X, Y], [T.sum(T.exp(Y), axis=1), T.dot(X, X.T)], mode=mode)
    a = np.random.default_rng(0).standard_normal((48, 129))
    for got in _twice(f, a, a):
        np.testing.assert_allclose(got[0], np.exp(a).sum(axis=1), rtol=1e-12)
        np.testing.assert_allclose(got[1], a @ a.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fill_of_operands_broadcasting_against_each_other(mode, dtype):
    a = T.TensorType(dtype, shape=(1, None))("a")
    b = T.TensorType(dtype, shape=(None, 1))("b")
    f = theano_dag.function([a, b], T.fill(a, b), mode=mode)
    av, bv = np.ones((1, 8), dtype), np.full((40, 1), 7.0, dtype)
    for (got,) in _twice(f, av, bv):
        assert got.dtype == dtype and got.shape == (40, 8)
        np.testing.assert_array_equal(got, np.full((40, 8), 7.0, dtype))


def test_a_narrowing_cast_of_a_planned_value(mode):
    X, i = T.dmatrix("X"), T.lvector("i")
    f = theano_dag.function([X, i], T.cast(T.sum(X, axis=0)[i], "int32"), mode=mode)
    v = np.random.default_rng(0).standard_normal((2, 4100)) * 100
    idx = np.arange(4100)[::-1].copy()
    for (got,) in _twice(f, v, idx):
        np.testing.assert_array_equal(got, v.sum(axis=0)[idx].astype("int32"))


@pytest.mark.parametrize("n", [33, 67])
def test_a_cast_of_a_set_subtensor_of_a_cast(mode, n):
    c = T.fmatrix("c")
    out = T.cast(T.set_subtensor(T.cast(c, "float64")[:, ::2], np.nan), "float32")
    f = theano_dag.function([c], out, mode=mode)
    cv = np.random.default_rng(1).standard_normal((n, n)).astype("float32")
    want = cv.astype("float64")
    want[:, ::2] = np.nan
    for (got,) in _twice(f, cv):
        np.testing.assert_array_equal(got, want.astype("float32"))


# --------------------------------------------------------------------------- the mode


@pytest.mark.parametrize(
    "dtype, want",
    [
        ("float64", np.nan),
        ("float32", np.nan),
        ("complex64", complex(np.nan, np.nan)),
        ("int16", -23131),
        ("uint8", 0xA5),
        ("int64", int.from_bytes(b"\xa5" * 8, "little", signed=True)),
    ],
)
def test_poison_fills_floats_with_nan_and_integers_with_a_pattern(dtype, want):
    for arr in (np.zeros((3, 4), dtype), np.zeros((3, 4), dtype)[:, ::2], np.zeros((), dtype)):
        poison(arr)
        np.testing.assert_array_equal(arr, np.full(arr.shape, want, dtype))


def test_poison_defaults_to_the_flag():
    x = T.dvector("x")
    with config.change_flags(cpu__poison=True):
        f = theano_dag.function([x], T.exp(x) * 2)
    f(np.zeros(5000))
    assert "_poison(" in f.fn.source()
    with config.change_flags(cpu__poison=False):
        g = theano_dag.function([x], T.exp(x) * 2)
    g(np.zeros(5000))
    assert "_poison(" not in g.fn.source()
    h = theano_dag.function([x], T.exp(x) * 2, mode=Mode(linker=CPULinker(poison=False)))
    with config.change_flags(cpu__poison=True):
        h(np.zeros(5000))
    assert "_poison(" not in h.fn.source()


def test_min_plan_bytes_defaults_to_the_flag():
    # A 3x3 product (72 bytes) read by the sum: left to numpy under the engine's default
    # threshold, given a block of the plan under the flag's 0; a linker's own value wins.
    x = T.dmatrix("x")
    a = np.arange(9.0).reshape(3, 3)

    def compiled(linker="cpu"):
        f = theano_dag.function([x], T.dot(x, x).sum(), mode=Mode(linker=linker, optimizer=None))
        assert f(a) == (a @ a).sum()
        return f

    assert FLAGS["cpu__min_plan_bytes"].default == DEFAULT_MIN_PLAN_BYTES
    with config.change_flags(cpu__min_plan_bytes=DEFAULT_MIN_PLAN_BYTES):
        default = compiled()
        own = compiled(CPULinker(min_plan_bytes=0))
    with config.change_flags(cpu__min_plan_bytes=0):
        planned = compiled()
        own_default = compiled(CPULinker(min_plan_bytes=DEFAULT_MIN_PLAN_BYTES))
    assert default.fn.program.min_plan_bytes == DEFAULT_MIN_PLAN_BYTES
    assert planned.fn.program.min_plan_bytes == 0
    assert own.fn.program.min_plan_bytes == 0
    assert own_default.fn.program.min_plan_bytes == DEFAULT_MIN_PLAN_BYTES
    assert default.fn.memory_plan().assignment == {}
    assert own_default.fn.memory_plan().assignment == {}
    for f in (planned, own):
        ((product, where),) = f.fn.memory_plan().assignment.items()
        assert product.owner.op == T.dot(x, x).owner.op and where == (0, 0)


@pytest.mark.parametrize("bad", [-1, "-5", "many", True])
def test_min_plan_bytes_flag_refuses_what_is_not_a_count_of_bytes(bad):
    with pytest.raises(ValueError, match=r"config\.cpu__min_plan_bytes: expected an integer"):
        config.cpu__min_plan_bytes = bad
    assert config.cpu__min_plan_bytes >= 0
    with pytest.raises(ValueError, match="CPULinker: min_plan_bytes must be an int >= 0"):
        CPULinker(min_plan_bytes=-1 if bad == "-5" else bad)


class _HalfExp(Op):
    """exp(x), whose CPU emitter (below) is broken on purpose in one of two ways."""

    __props__ = ("broken",)

    def __init__(self, broken):
        self.broken = broken

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = np.exp(inputs[0])

    def infer_shape(self, fgraph, node, shapes):
        return [shapes[0]]


@pytest.fixture
def broken_emitter():
    def steps(node, ctx):
        exp = ctx.glob(np.exp, "exp")
        half = node.op.broken == "half"

        def emit(ins, outs, target):
            if target is None:
                return [f"{outs[0]} = {exp}({ins[0]})"]
            if half:  # writes only the first half of its target
                n = f"{ins[0]}.shape[0] // 2"
                return [f"{exp}({ins[0]}[:{n}], out={target}[:{n}])", f"{outs[0]} = {target}"]
            return [f"{outs[0]} = {exp}({ins[0]})"]  # ignores its target

        return [Step(node, node.outputs, node.inputs, emit, elementwise=True)]

    register_impl(_HalfExp)(steps)
    yield
    del IMPLS[_HalfExp]


def test_poisoned_mode_shows_what_a_step_leaves_unwritten(broken_emitter):
    x = T.dvector("x")
    y = _HalfExp("half")(x) + 1  # a planned intermediate, then read
    poisoned = Mode(linker=CPULinker(min_plan_bytes=0, poison=True), optimizer=None)
    f = theano_dag.function([x], y, mode=poisoned)
    xv = np.zeros(10)
    for _ in range(2):
        got = f(xv)
        np.testing.assert_array_equal(got[:5], 2.0)
        assert np.isnan(got[5:]).all()


def test_poisoned_mode_refuses_an_output_left_outside_its_target(broken_emitter):
    x = T.dvector("x")
    y = _HalfExp("ignores_target")(x) + 1
    plain = Mode(linker=CPULinker(min_plan_bytes=0, poison=False), optimizer=None)
    np.testing.assert_array_equal(theano_dag.function([x], y, mode=plain)(np.zeros(4)), 2.0)
    poisoned = Mode(linker=CPULinker(min_plan_bytes=0, poison=True), optimizer=None)
    f = theano_dag.function([x], y, mode=poisoned)
    with pytest.raises(AssertionError, match=r"poisoned mode\): step 0 of _HalfExp.* left its "):
        f(np.zeros(4))


def test_the_plan_check_refuses_an_array_away_from_its_block():
    x = T.dvector("x")
    f = theano_dag.function(
        [x],
        T.exp(T.exp(x)) + T.exp(x),
        mode=Mode(linker=CPULinker(min_plan_bytes=0), optimizer=None),
    )
    f(np.zeros(8))
    plan = f.fn.current
    plan.check()  # a plan as made passes
    v, (b, _off) = next(
        (v, a) for v, a in plan.memory.assignment.items() if plan.cat[v] == "pooled"
    )
    name = plan.slots[v]
    if name in plan.slot_values:  # a block kept from call to call
        plan.slot_values[name] = np.empty_like(plan.slot_values[name])
    else:  # a block each call allocates: the value's place in it
        lo, hi, shape = plan.slot_values[f"{name}s"]
        plan.slot_values[f"{name}s"] = (lo + 64, hi + 64, shape)
    with pytest.raises(ValueError, match=rf"value .*: its array .*block {b}"):
        plan.check()


def test_the_plan_check_refuses_two_live_values_in_one_block():
    x = T.dvector("x")
    y = T.exp(x)
    f = theano_dag.function(
        [x], T.exp(y) * T.sin(y), mode=Mode(linker=CPULinker(min_plan_bytes=0), optimizer=None)
    )
    f(np.zeros(8))
    plan = f.fn.current
    pooled = [v for v in plan.memory.assignment if plan.cat[v] == "pooled"]
    assert len({plan.memory.assignment[v][0] for v in pooled}) >= 2
    first = plan.memory.assignment[pooled[0]]
    for v in pooled[1:]:
        plan.memory.assignment[v] = first
    with pytest.raises(ValueError, match="share bytes of block .* while both are live"):
        plan.check()
