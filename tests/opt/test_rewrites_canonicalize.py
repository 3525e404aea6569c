"""Canonicalization rewrites: each checked for structure (is_same_graph with the expected
graph) and for values (reference engine before and after)."""

import warnings

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.graph.fg import FunctionGraph
from theano_dag.opt.rewrites import algebra as alg
from theano_dag.opt.rewrites.constant_folding import ConstantFolding, local_shape_i_static
from theano_dag.opt.rewrites.products import local_mul_cancel, local_mul_canonizer
from theano_dag.tensor.shape import Shape_i

from .rewrite_helpers import apply_dbs, apply_rules, check, fgraph_values, reference_values

rng = np.random.default_rng(42)
OCL_OK, OCL_WHY = opencl_available()
f64 = np.float64


def c64(v):
    """A float64 constant (``tt.constant(0.0)`` would be autocast to float32)."""
    return tt.constant(np.asarray(v, dtype="float64"))


def vec(*names):
    return [tt.dvector(n) for n in names]


def vals(n=4, k=1, lo=-2.0, hi=2.0):
    return [rng.uniform(lo, hi, size=n) for _ in range(k)]


def rules(*rs, fold=False):
    return lambda fg: apply_rules(fg, *rs, fold=fold)


# -- identities ------------------------------------------------------------------------


def test_add_zero_and_mul_one():
    x, y = vec("x", "y")
    check(
        [x, y],
        [x + 0, (x * 1) * y, 0 + x + 0],
        [x, x * y, x],
        vals(k=2),
        rules(alg.local_add_zero, alg.local_add_zero_float, alg.local_mul_one),
    )


def test_add_zero_keeps_the_broadcast_shape():
    # r + zeros((3, 4)): dropping the zeros must keep the (3, 4) shape
    r = tt.drow("r")
    z = tt.zeros((3, 4))
    out = r + z
    fg = check(
        [r], [out], [tt.fill(z, r)], [rng.normal(size=(1, 4))], rules(alg.local_add_zero_float)
    )
    assert fg.outputs[0].type == out.type


def test_add_zero_upcasts_like_the_original():
    i = tt.ivector("i")
    check(
        [i],
        [i + 0.0],
        [tt.cast(i, "float64")],
        [np.array([1, -2], dtype="int32")],
        rules(alg.local_add_zero),
    )


def test_mul_zero_gives_zeros_of_the_product_shape():
    x, m = tt.dvector("x"), tt.dmatrix("m")
    zeros = tt.fill(x, c64(0))
    # m * zeros_like(x): zeros of m's shape would drop the check of x's length against
    # m's rows' (the product raises for lengths that differ): it stays.
    fg = check(
        [x, m],
        [x * 0, m * (x * 0)],
        [zeros, m * zeros.dimshuffle("x", 0)],
        [rng.normal(size=3), rng.normal(size=(2, 3))],
        rules(alg.local_mul_zero),
    )
    f = theano_dag.function([x, m], fg.outputs[1], mode=Mode(linker="py"))
    with pytest.raises(ValueError, match="do not match along dimension 1"):
        f(np.ones(4), np.ones((2, 3)))
    # the same variable's lengths: zeros of the product's shape
    check([m], [m * (m * 0)], [tt.fill(m, c64(0))], [np.ones((2, 3))], rules(alg.local_mul_zero))


def test_mul_zero_is_tagged_nonfinite_unsafe():
    # nan * 0 is nan; the rewrite gives 0. FAST_RUN.excluding("nonfinite_unsafe") keeps nan.
    x = tt.dvector("x")
    fg = apply_dbs(FunctionGraph([x], [x * 0]), "canonicalize", exclude=["nonfinite_unsafe"])
    assert np.isnan(fgraph_values(fg, [np.array([np.nan, 1.0])])[0][0])
    fg = apply_dbs(FunctionGraph([x], [x * 0]), "canonicalize")
    np.testing.assert_array_equal(fgraph_values(fg, [np.array([np.nan, 1.0])])[0], [0.0, 0.0])


def test_div_one_and_int_div_one():
    x = tt.dvector("x")
    i = tt.lvector("i")
    check(
        [x, i],
        [x / 1, i // 1, x // 1],
        [x, i, x // 1],
        [rng.normal(size=3), np.array([3, -7, 0])],
        rules(alg.local_div_one, alg.local_int_div_one),
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_int_div_by_one_is_floor(dtype):
    x = tt.vector("x", dtype=dtype)
    ones = np.ones((2, 3), dtype=dtype)
    check(
        [x],
        [x // 1, x // ones],
        [tt.floor(x), tt.fill(ones, tt.floor(x.dimshuffle("x", 0)))],
        [np.array([2.5, -2.5, 0.0], dtype=dtype)],
        rules(alg.local_intdiv_by_one),
    )


def test_sub_zero_and_zero_sub():
    x = tt.dvector("x")
    check(
        [x],
        [x - 0, 0 - x],
        [x, -x],
        vals(),
        rules(alg.local_sub_zero, alg.local_zero_sub, alg.local_zero_sub_float),
    )


def test_zero_sub_of_unsigned_ints_negates_in_the_output_dtype():
    u = tt.vector("u", dtype="uint8")
    out = 0 - u  # int16: 0 - 200 is -200, not (uint8) 56
    check(
        [u],
        [out],
        [-tt.cast(u, "int16")],
        [np.array([200, 3], dtype="uint8")],
        rules(alg.local_zero_sub),
    )


def test_sub_self():
    x, m = tt.dvector("x"), tt.dmatrix("m")
    check(
        [x, m],
        [x - x, m - m],
        [tt.fill(x, c64(0)), tt.fill(m, c64(0))],
        [rng.normal(size=3), rng.normal(size=(2, 3))],
        rules(alg.local_sub_self),
    )


def test_neg_neg():
    x = tt.dvector("x")
    check([x], [tt.neg(tt.neg(x))], [x], [rng.normal(size=3)], rules(alg.local_neg_neg))


def test_log_exp_and_exp_log():
    x = tt.dvector("x")
    expected_exp_log = tt.switch(tt.ge(x, 0), x, tt.constant(np.array([np.nan])))
    check(
        [x],
        [tt.log(tt.exp(x)), tt.exp(tt.log(x))],
        [x, expected_exp_log],
        [np.array([-1.0, 0.0, 2.5, np.inf])],
        rules(alg.local_log_exp, alg.local_exp_log),
    )


# -- dimshuffles, reshapes, broadcasts -------------------------------------------------


def test_double_transpose_disappears():
    m = tt.dmatrix("m")
    from theano_dag.opt.rewrites.useless import local_useless_dimshuffle

    check(
        [m],
        [m.T.T, m.dimshuffle("x", 1, 0).dimshuffle(2, 1)],
        [m, m],
        [rng.normal(size=(2, 3))],
        rules(alg.local_dimshuffle_dimshuffle, local_useless_dimshuffle),
    )


def test_dimshuffle_dimshuffle_composes():
    m = tt.dmatrix("m")
    out = m.T.dimshuffle("x", 0, 1)
    check(
        [m],
        [out],
        [m.dimshuffle("x", 1, 0)],
        [rng.normal(size=(2, 3))],
        rules(alg.local_dimshuffle_dimshuffle),
    )


def test_reshape_reshape():
    m = tt.dmatrix("m")
    out = tt.reshape(tt.reshape(m, (6,)), (3, 2))
    check(
        [m],
        [out],
        [tt.reshape(m, (3, 2))],
        [rng.normal(size=(2, 3))],
        rules(alg.local_reshape_reshape),
    )


def test_alloc_alloc():
    x = tt.dvector("x")
    out = tt.alloc(tt.alloc(x, 3, 4), 2, 3, 4)
    check([x], [out], [tt.alloc(x, 2, 3, 4)], [rng.normal(size=4)], rules(alg.local_alloc_alloc))


def test_elemwise_drops_a_repeated_broadcast():
    m, y = tt.dmatrix("m"), tt.dvector("y")
    n, x = tt.TensorType("float64", shape=(2, 3))("n"), tt.TensorType("float64", shape=(3,))("x")
    check(
        [m, n, x, y],
        [m * tt.fill(m, y), n + tt.alloc(x, 2, 3)],
        [m * y, n + x],
        [rng.normal(size=(2, 3)), rng.normal(size=(2, 3)), rng.normal(size=3), rng.normal(size=3)],
        rules(alg.local_elemwise_drop_broadcast),
    )


def test_broadcast_kept_where_the_alloc_may_spread_its_value():
    # alloc(z, 2, 3) of a z of length 1 fills the rows; n + z would refuse the length 1
    n, z = tt.TensorType("float64", shape=(2, 3))("n"), tt.dvector("z")
    out = n + tt.alloc(z, 2, 3)
    fg = FunctionGraph([n, z], [out], clone=False)
    apply_rules(fg, alg.local_elemwise_drop_broadcast, fold=False)
    assert fg.outputs[0] is out


def test_broadcast_kept_when_it_gives_the_shape():
    x, y = tt.dvector("x"), tt.dvector("y")
    out = tt.fill(tt.dmatrix("m"), y) + x  # the fill gives the matrix shape: keep it
    fg = FunctionGraph(list(out.owner.inputs[0].owner.inputs[:1]) + [x, y], [out], clone=False)
    apply_rules(fg, alg.local_elemwise_drop_broadcast, fold=False)
    assert fg.outputs[0] is out


# -- canonical order and products -------------------------------------------------------


def test_commutative_arguments_are_sorted_and_flattened():
    x, y, z = vec("x", "y", "z")
    check(
        [x, y, z],
        [y + x, (y + x) + z, tt.eq(z, x), tt.maximum(y, x) * 2],
        # a float maximum keeps its order (below)
        [x + y, tt.add(x, y, z), tt.eq(x, z), tt.mul(tt.maximum(y, x), 2)],
        vals(k=3),
        rules(alg.local_commutative_flatten, alg.CommutativeSort()),
    )


def test_an_integer_maximum_is_sorted():
    i, j, k = (tt.lvector(n) for n in "ijk")
    check(
        [i, j, k],
        [tt.maximum(j, i), tt.minimum(tt.minimum(k, j), i)],
        [tt.maximum(i, j), tt.minimum(i, tt.minimum(j, k))],
        [np.array([3, -1, 0, 7]), np.array([2, 5, 0, -7]), np.array([3, 4, -2, 0])],
        rules(alg.local_commutative_flatten, alg.CommutativeSort()),
    )


@pytest.mark.parametrize(
    "linker",
    [
        "py",
        "cpu",
        "c",
        "dask",
        pytest.param(
            "opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")
        ),
    ],
)
def test_a_float_maximum_keeps_its_argument_order_for_signed_zeros(linker):
    # At a tie numpy's maximum and minimum give their second argument, so that
    # maximum(-0.0, 0.0) is 0.0 and maximum(0.0, -0.0) is -0.0, which a quotient by it
    # tells apart (inf, -inf): swapping the arguments into the canonical order (or
    # the nested ones) changed the sign of an infinity.
    x, y, z = vec("x", "y", "z")
    u = tt.vector("u", dtype="uint16")
    neg0 = c64(-0.0)
    outs = [
        1.0 / tt.maximum(neg0, u),
        1.0 / tt.maximum(y, x),
        1.0 / tt.minimum(z, tt.minimum(y, x)),
        1.0 / tt.maximum(tt.maximum(z, y), x),
        1.0 / tt.maximum(z, tt.maximum(y, x)),
    ]
    xv, yv, zv = np.array([0.0, -0.0, 1.0]), np.array([-0.0, 0.0, -0.0]), np.array([0.0, -0.0, 0.0])
    uv = np.array([0, 3, 0], dtype="uint16")
    with np.errstate(divide="ignore"):
        want = [
            1.0 / np.maximum(-0.0, uv.astype("float64")),
            1.0 / np.maximum(yv, xv),
            1.0 / np.minimum(zv, np.minimum(yv, xv)),
            1.0 / np.maximum(np.maximum(zv, yv), xv),
            1.0 / np.maximum(zv, np.maximum(yv, xv)),
        ]
    mode = Mode(linker="cpu" if linker == "c" else linker, optimizer="fast_run")
    with config.change_flags(cxx="" if linker == "cpu" else config.cxx):
        f = theano_dag.function([x, y, z, u], outs, mode=mode)
        got = f(xv, yv, zv, uv)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)  # the infinities' signs included


def test_sorting_moves_arguments_in_place_and_a_failed_pass_undoes_it():
    """Same-typed arguments are sorted in the node itself (no new node, clients kept);
    arguments of different types (broadcasting) need a new node. A pass that fails
    after sorting is rolled back to the old order, without pruning anything.

    (The sort is a global pass since issue 14, no longer a local rewrite that changed
    the graph itself: the rollback is the EquilibriumOptimizer's, of a global pass.)"""
    from theano_dag.graph.toolbox import Feature
    from theano_dag.opt import EquilibriumOptimizer

    x, y = vec("x", "y")
    m, row = tt.dmatrix("m"), tt.drow("row")  # creation order sorts x, y, m, row
    same, mixed = y * x, tt.add(row, m)
    fg = FunctionGraph([x, y, m, row], [same, mixed], clone=False)
    node_same, node_mixed = same.owner, mixed.owner
    alg.CommutativeSort().optimize(fg)
    assert fg.outputs[0] is same and node_same.inputs == [x, y]
    assert (node_same, 0) in fg.clients[x] and (node_same, 1) in fg.clients[y]
    new_mixed = fg.outputs[1].owner  # a new node: a row and a matrix differ in type
    assert new_mixed is not node_mixed and new_mixed.inputs == [m, row]

    class SortThenFail(alg.CommutativeSort):
        def apply(self, fgraph):
            super().apply(fgraph)
            raise RuntimeError("failed after sorting")

    a, b = tt.exp(x), tt.exp(y)
    out = b * a
    fg = FunctionGraph([x, y], [out], clone=False)

    class Prunes(Feature):
        seen: list = []

        def on_prune(self, fgraph, node, reason):
            self.seen.append(node)

    fg.attach_feature(Prunes())
    failures = []
    EquilibriumOptimizer(
        [SortThenFail()], failure_callback=lambda *args: failures.append(args[0])
    ).optimize(fg)
    assert [str(e) for e in failures] == ["failed after sorting"]
    assert out.owner.inputs == [b, a]  # rolled back
    fg.check_integrity()
    assert {n.op for n in fg.apply_nodes} == {tt.exp, tt.mul} and len(fg.apply_nodes) == 3
    assert Prunes.seen == []


def test_sort_visits_only_what_changed_since_its_last_run():
    x, y, z = vec("x", "y", "z")
    fg = FunctionGraph([x, y, z], [tt.exp(y * x)], clone=False)
    sort = alg.CommutativeSort()
    sort.optimize(fg)
    pending = fg.unsorted_commutative_nodes
    assert not pending.nodes
    # A new input: the node is looked at again (and sorted: z was made after x).
    mul = fg.outputs[0].owner.inputs[0].owner
    fg.change_input(mul, 0, z)
    assert list(pending.nodes) == [mul]
    sort.optimize(fg)
    assert mul.inputs == [y, z] and not pending.nodes


def test_sorting_in_place_passes_debugmode():
    import theano_dag
    from theano_dag.compile.debugmode import DebugMode

    x, y = vec("x", "y")
    f = theano_dag.function([x, y], tt.exp(y * x) + tt.exp(x * y), mode=DebugMode(linker="py"))
    a, b = vals(k=2)
    np.testing.assert_allclose(f(a, b), 2 * np.exp(a * b))
    assert sum(1 for n in f.maker.fgraph.toposort() if "exp" in str(n.op)) <= 1


def test_flattening_keeps_shared_and_narrower_sums():
    x, y, z = vec("x", "y", "z")
    s = x + y
    i8 = tt.vector("i", dtype="int8")
    out = (s + z) * s  # s is used twice: not flattened into the outer sum
    out2 = (i8 + i8) + x  # int8 sum wraps around: not flattened into a float sum
    # (arguments sort in creation order: z was made before s)
    check(
        [x, y, z, i8],
        [out, out2],
        [s * (z + s), x + (i8 + i8)],
        vals(k=3) + [np.array([100, 100, 1, 2], dtype="int8")],
        rules(alg.local_commutative_flatten, alg.CommutativeSort()),
    )


def test_merge_finds_swapped_sums_after_canonicalize():
    x, y = vec("x", "y")
    fg = apply_dbs(
        FunctionGraph([x, y], [tt.exp(x + y) * tt.exp(y + x)]), "merge1", "canonicalize", "merge1.2"
    )
    assert sum(1 for n in fg.apply_nodes if n.op == tt.exp) == 1


def test_mul_canonizer_collects_constants_and_factors():
    x, y = vec("x", "y")
    six = tt.constant(np.array([6.0]))
    check(
        [x, y],
        [(x * 2) * (y * 3), (x / 2) / y, -(x * -y)],
        [tt.mul(x, y, six), tt.true_div(tt.mul(x, tt.constant(np.array([0.5]))), y), x * y],
        vals(k=2),
        rules(local_mul_canonizer),
    )


def test_mul_canonizer_leaves_canonical_products_alone():
    x, y, z = vec("x", "y", "z")
    out = tt.true_div(tt.mul(x, y), z)
    fg = FunctionGraph([x, y, z], [out], clone=False)
    apply_rules(fg, local_mul_canonizer, fold=False)
    assert fg.outputs[0] is out


def test_mul_canonizer_keeps_an_exact_narrower_constant():
    # 0.5 autocasts to a float32 constant; x * 0.5 of a float64 x is already canonical:
    # rebuilding it around a float64 0.5 would give the same values and type.
    x = tt.dvector("x")
    half = tt.constant(np.array([0.5], dtype="float32"))
    out = tt.mul(x, half)
    fg = FunctionGraph([x], [out], clone=False)
    apply_rules(fg, local_mul_canonizer, fold=False)
    assert fg.outputs[0] is out
    # Two constants still fold into one coefficient of the product's dtype.
    fg = check(
        [x],
        [tt.mul(x, half, half)],
        [tt.mul(x, c64([0.25]))],
        vals(),
        rules(local_mul_canonizer),
    )
    assert fg.outputs[0].owner.inputs[1].dtype == "float64"


def test_mul_canonizer_leaves_a_coefficient_its_dtype_cannot_hold_as_written():
    # float32 x * 1e30 * 1e30: the coefficient 1e60 (float64) was made an inf float32
    # constant, and (x * 1e30) * 1e30 / 1e30, canonicalized inner product first, was
    # x * inf / 1e30: inf for every x. Left as written, the whole quotient is
    # canonicalized in one go (coefficient 1e30), as theano-pymc's canonizer does.
    x = tt.fvector("x")
    with config.change_flags(floatX="float32"):  # Python floats are float32 constants
        inner = tt.mul(x, 1e30, 1e30)
        outs = [(x * 1e30) * 1e30 / 1e30, x * 1e20 * 1e20 / 1e20 / 1e20, x * 1e-30 * 1e-30 * 1e30]
    fg = FunctionGraph([x], [inner], clone=False)
    apply_rules(fg, local_mul_canonizer, fold=False)
    assert fg.outputs[0] is inner
    xv = np.array([1.5, -2.0, 1e-30, 0.0], dtype="float32")
    fg = FunctionGraph([x], outs, clone=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no float32 overflow in a constant either
        apply_dbs(fg, "canonicalize")
    got = fgraph_values(fg, [xv])
    assert all(g.dtype == np.float32 for g in got)
    np.testing.assert_allclose(got[0], xv * np.float32(1e30), rtol=1e-6)
    np.testing.assert_allclose(got[1], xv, rtol=1e-6)
    np.testing.assert_allclose(got[2], xv * np.float32(1e-30), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_mul_canonizer_multiplies_narrow_leaves_in_the_products_dtype(dtype):
    # (x / d) * x of integers is a float64 product; its leaves x, x and d are narrower.
    # Regrouped as (x * x) / d, the integers' product alone wrapped in their dtype
    # (int8 13 * 13 = -87): each group without a factor of the product's dtype is cast.
    x, y = tt.vector("x", dtype=dtype), tt.vector("y", dtype=dtype)
    d = abs(y) + 1
    outs = [(x / d) * x, x / d / y, (x / (abs(x) + 1)) * x * 2.0]
    fg = FunctionGraph([x, y], outs, clone=True)
    apply_rules(fg, local_mul_canonizer, fold=False)
    assert all(o.dtype == "float64" for o in fg.outputs)
    hi = 100 if dtype != "int16" else 300
    xv = np.array([-1, 13, hi, 16, 17] if dtype != "uint8" else [1, 13, hi, 16, 17], dtype)
    yv = np.array([3, 7, 11, hi, 2], dtype)
    want = reference_values([x, y], outs, [xv, yv])
    for got, w in zip(fgraph_values(fg, [xv, yv]), want):
        np.testing.assert_allclose(got, w, rtol=1e-12)
    xf = xv.astype("float64")
    np.testing.assert_allclose(want[0], xf / (np.abs(yv.astype("float64")) + 1) * xf)


def test_mul_cancel():
    x, y = vec("x", "y")
    m = tt.dmatrix("m")
    outs = [(x * y) / y, x / x, (x * m) / m]  # in the last, m still gives the shape
    args = [rng.uniform(1, 2, size=4), rng.uniform(1, 2, size=4), rng.uniform(1, 2, size=(2, 4))]
    want = reference_values([x, y, m], outs, args)
    fg = FunctionGraph([x, y, m], outs, clone=False)
    apply_rules(fg, local_mul_cancel, fold=False)
    assert fg.outputs[0] is x
    assert "true_div" not in " ".join(str(n.op) for n in fg.toposort())
    got = fgraph_values(fg, args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)
    assert got[2].shape == (2, 4)


def test_canonicalize_db_reaches_a_fixed_point_without_looping():
    x, y, z = vec("x", "y", "z")
    out = ((x * y) / (z * 2)) * (2 * z) / y + (tt.neg(tt.neg(x))) * 1 + 0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fg = check(
            [x, y, z],
            [out],
            [x + x],
            [rng.uniform(1, 2, size=4)] * 3,
            lambda fg: apply_dbs(fg, "canonicalize", "merge1.2"),
        )
    assert len(fg.apply_nodes) == 1


# -- constant folding -------------------------------------------------------------------


def test_constant_folding():
    x = tt.dvector("x")
    two = tt.exp(c64(0.0)) * 2
    fg = check([x], [x + two], [x + tt.constant(np.array([2.0]))], vals(), rules(ConstantFolding()))
    assert all(n.op == tt.add for n in fg.apply_nodes)


def test_constant_folding_size_limit():
    # The allocs feed a product: an Alloc that is an output itself stays (Theano's rule,
    # issue 16), whatever its size.
    x = tt.dscalar("x")
    small = tt.alloc(c64(1.0), 10, 10)
    big = tt.alloc(c64(1.0), 400, 400)
    fg = FunctionGraph([x], [small * x, big * x], clone=False)
    apply_rules(fg, ConstantFolding(max_size=1000), fold=False)
    folded = fg.outputs[0].owner.inputs[0]
    assert folded.owner is None and folded.data.shape == (10, 10)
    assert fg.outputs[1].owner.inputs[0] is big


def test_constant_folding_keeps_run_time_errors():
    bad = tt.alloc(tt.constant(np.ones(3)), 2, 5)  # cannot fill (2, 5) with 3 values
    fg = FunctionGraph([], [bad], clone=False)
    apply_rules(fg, ConstantFolding(), fold=False)
    assert fg.outputs[0] is bad


def test_static_shape_i_is_a_constant():
    x = tt.TensorType("float64", shape=(3, None))("x")
    out = Shape_i(0)(x) + Shape_i(1)(x)
    fg = FunctionGraph([x], [out], clone=False)
    apply_rules(fg, local_shape_i_static, fold=False)
    assert not any(isinstance(n.op, Shape_i) and n.op.i == 0 for n in fg.apply_nodes)
    assert fgraph_values(fg, [np.zeros((3, 5))])[0] == 8


@pytest.mark.parametrize(
    "build", [lambda x: x * (tt.exp(c64(0.0)) * 1), lambda x: x + tt.exp(c64(0.0)) * 0]
)
def test_fast_compile_canonicalize_folds_and_simplifies(build):
    from theano_dag.opt import Query, optdb

    x = tt.dvector("x")
    fg = FunctionGraph([x], [build(x)])
    optdb.query(Query(include=["fast_compile"])).optimize(fg)
    assert fg.outputs[0] is fg.inputs[0]


def test_canonical_product_with_a_coefficient_is_left_alone():
    # mul(x, [2.]) is what the canonizer builds: visiting it again changes nothing.
    x = tt.dvector("x")
    fg = FunctionGraph([x], [x * 2.0], clone=False)
    apply_rules(fg, local_mul_canonizer, fold=False)
    node = fg.outputs[0].owner
    assert local_mul_canonizer.transform(fg, node) is False
    # ... but a product whose factors are out of order still is rewritten.
    y = tt.dvector("y")
    fg2 = FunctionGraph([x, y], [tt.mul(y, x, tt.constant([3.0]))], clone=False)
    assert local_mul_canonizer.transform(fg2, fg2.outputs[0].owner)


def test_mul_cancel_after_the_canonizer_still_cancels():
    x, y = tt.dvector("x"), tt.dvector("y")
    fg = FunctionGraph([x, y], [(x * y) / y], clone=False)
    node = fg.outputs[0].owner
    assert local_mul_canonizer.transform(fg, node) is False  # already canonical
    assert local_mul_cancel.transform(fg, node)  # and x * y / y still cancels


def test_canonicalize_takes_the_graphs_constants():
    # The 0.5 that the canonizer builds is the graph's own constant, not a copy.
    x, y = tt.dvector("x"), tt.dvector("y")
    fg = FunctionGraph([x, y], [(x + y) * 0.5, (x - y) * 0.5], clone=False)
    apply_dbs(fg, "merge", "canonicalize")
    halves = {
        id(i)
        for out in fg.outputs
        for i in out.owner.inputs
        if isinstance(i, tt.TensorConstant) and float(i.data.flat[0]) == 0.5
    }
    assert len(halves) == 1


def test_a_copy_of_the_graph_gets_its_own_set_of_unsorted_nodes():
    x, y = vec("x", "y")
    fg = FunctionGraph([x, y], [tt.exp(y * x)], clone=False)
    alg.CommutativeSort().optimize(fg)
    copy = fg.clone()
    assert copy.unsorted_commutative_nodes is not fg.unsorted_commutative_nodes
    assert not fg.unsorted_commutative_nodes.nodes  # the copy did not refill the original
    mul = copy.outputs[0].owner.inputs[0].owner
    assert list(copy.unsorted_commutative_nodes.nodes) == [mul]  # all nodes, at first


def test_a_product_with_a_constant_vector_and_a_coefficient_reaches_a_fixed_point():
    # The coefficient was appended after a vector of constant weights, which
    # CommutativeSort puts after it again: canonicalize looped until max_use_ratio.

    x = tt.dvector("x")
    w = np.array([1.0, 1.25, 1.5])
    out = tt.exp(-x * x) * (-1.12837917) * w
    fg = FunctionGraph([x], [out])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        apply_dbs(fg, "canonicalize")
    xv = np.array([-0.5, 0.25, 2.0])
    np.testing.assert_allclose(
        fgraph_values(fg, [xv])[0], np.exp(-xv * xv) * -1.12837917 * w, rtol=1e-15
    )


def _canonical_nested_products():
    x, y, z, w = vec("x", "y", "z", "w")
    return [x, y, z, w], [
        tt.true_div(tt.mul(x, y), tt.mul(z, w)),
        tt.neg(tt.true_div(tt.mul(x, y), z)),
        tt.neg(tt.mul(x, y, z)),
        tt.true_div(x, tt.mul(y, z)),
    ]


@pytest.mark.parametrize("k", range(4))
def test_canonical_nested_product_is_left_alone_without_rebuilding(k, monkeypatch):
    # neg?(true_div(mul(num...), mul(den...))) with sorted factors is what the canonizer
    # builds: a visit answers from the structure, without building it again.
    from theano_dag.opt.rewrites import products

    inputs, outs = _canonical_nested_products()
    out = outs[k]
    fg = FunctionGraph(inputs, [out], clone=False)
    built = []
    build = products._Product.build
    monkeypatch.setattr(products._Product, "build", lambda self: built.append(1) or build(self))
    assert local_mul_canonizer.transform(fg, out.owner) is False
    assert not built
    apply_rules(fg, local_mul_canonizer, fold=False)
    assert fg.outputs[0] is out


@pytest.mark.parametrize(
    "make, want",
    [
        # factors out of order in the numerator, in the denominator
        (lambda x, y, z: tt.true_div(tt.mul(y, x), z), lambda x, y, z: tt.mul(x, y) / z),
        (lambda x, y, z: tt.true_div(x, tt.mul(z, y)), lambda x, y, z: x / tt.mul(y, z)),
        # a double negation inside a product: the coefficient is 1
        (
            lambda x, y, z: tt.neg(tt.true_div(tt.neg(tt.mul(x, y)), z)),
            lambda x, y, z: tt.mul(x, y) / z,
        ),
        # one negation, written inside
        (
            lambda x, y, z: tt.true_div(tt.mul(x, tt.neg(y)), z),
            lambda x, y, z: tt.neg(tt.mul(x, y) / z),
        ),
    ],
)
def test_nested_product_not_in_canonical_form_is_rewritten(make, want):
    x, y, z = vec("x", "y", "z")
    check(
        [x, y, z],
        [make(x, y, z)],
        [want(x, y, z)],
        [rng.uniform(1, 2, size=4)] * 3,
        rules(local_mul_canonizer),
    )


def test_nested_product_typed_unlike_make_node_is_rebuilt():
    # The inner product's output lost its static length (a graph cloned with a
    # replacement keeps such nodes): the canonical product rebuilt has it again.
    from theano_dag.graph.basic import Apply

    x, y, z = (tt.TensorType("float64", shape=(4,))(n) for n in "xyz")
    loose = Apply(tt.mul, [x, y], [tt.dvector()]).outputs[0]
    out = tt.true_div(loose, z)
    fg = FunctionGraph([x, y, z], [out], clone=False)
    new = local_mul_canonizer.transform(fg, out.owner)
    assert new
    assert new[0].owner.inputs[0].owner.inputs == [x, y]
    assert new[0].owner.inputs[0].type.shape == (4,)
    args = [rng.uniform(1, 2, size=4) for _ in range(3)]
    fg2 = FunctionGraph([x, y, z], [new[0]], clone=False)
    np.testing.assert_allclose(fgraph_values(fg2, args)[0], args[0] * args[1] / args[2])


def test_canonicalize_drops_its_unsorted_node_tracker_and_a_later_run_sorts_again():
    # The tracker of unsorted commutative nodes serves canonicalize alone: it is
    # detached when the pass ends (later passes do not feed it), and a later
    # canonicalize starts again from every commutative node.
    x, y, z = vec("x", "y", "z")
    fg = FunctionGraph([x, y, z], [tt.exp(y * x)], clone=False)
    apply_dbs(fg, "canonicalize")
    mul = fg.outputs[0].owner.inputs[0].owner
    assert mul.inputs == [x, y] and not hasattr(fg, "unsorted_commutative_nodes")
    assert not any(isinstance(f, alg._UnsortedNodes) for f in fg._features)
    fg.change_input(mul, 0, z)  # seen by no tracker
    assert mul.inputs == [z, y]
    apply_dbs(fg, "canonicalize")
    assert mul.inputs == [y, z] and not hasattr(fg, "unsorted_commutative_nodes")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_powers_one_and_zero_leave_canonicalize_as_x_and_ones(dtype):
    # Theano's local_pow_canonicalize: x ** 1 -> x, x ** 0 -> ones of x's shape, before
    # the passes that read x (the gemm rule); pow(nan, 0) is 1, as numpy's.
    x = tt.matrix("x", dtype=dtype)
    outs = [x**1, x**0, x ** np.asarray(1.0, dtype)]
    fg = FunctionGraph([x], outs, clone=False)
    apply_dbs(fg, "canonicalize")
    assert fg.outputs[0] is x and fg.outputs[2] is x
    assert all(o.dtype == dtype for o in fg.outputs)
    assert not any(n.op == tt.pow for n in fg.apply_nodes)
    xv = np.array([[np.nan, -2.0, 0.0], [np.inf, 3.0, -0.5]], dtype=dtype)
    got = fgraph_values(fg, [xv])
    want = [xv**1, xv**0, xv**1]
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, w)
