"""Focused tests of the Theano names added in plural.py, shape.py, extra_ops.py and
sort.py: what the op table (values, shapes, gradients) cannot say, such as errors, static
types, run-time checks and Theano's quirks."""

from __future__ import annotations

import numpy as np
import pytest
from tensor_helpers import evaluate

import theano_dag
import theano_dag.tensor as tt
from theano_dag.tensor.extra_ops import AllocDiag, CumOp, ExtractDiag
from theano_dag.tensor.shape import EqualLengths, LengthMismatchError, Rebroadcast, SpecifyShape
from theano_dag.tensor.sort import ArgSortOp, SortOp
from theano_dag.testing.procmem import traced_peak

NEW_NAMES = """
scalars vectors matrices rows cols tensor3s tensor4s tensor5s fscalars dscalars iscalars
lscalars fvectors dvectors ivectors lvectors fmatrices dmatrices imatrices lmatrices
shape_padleft shape_padright shape_padaxis addbroadcast unbroadcast patternbroadcast
Rebroadcast specify_shape SpecifyShape max_and_argmax cumsum cumprod sort argsort diag
diagonal tri tril triu isclose allclose squeeze expand_dims flip random
""".split()


@pytest.mark.parametrize("name", NEW_NAMES)
def test_exported_from_tensor(name):
    assert hasattr(tt, name), name
    assert name in tt.__all__


# -- plural constructors ------------------------------------------------------------------


def test_plural_names():
    x, y = tt.dscalars("x", "y")
    assert (x.name, y.name) == ("x", "y")
    assert x.type == tt.TensorType("float64", shape=())
    a, b = tt.fmatrices(["a", "b"])
    assert a.type == tt.TensorType("float32", shape=(None, None)) and b.name == "b"


def test_plural_count():
    vs = tt.ivectors(3)
    assert len(vs) == 3 and all(v.type == tt.TensorType("int32", shape=(None,)) for v in vs)
    assert len({id(v) for v in vs}) == 3
    assert all(v.name is None for v in vs)


def test_plural_theano_quirks():
    single = tt.lscalars("x")  # one name: the variable itself, not a list
    assert single.type == tt.TensorType("int64", shape=()) and single.name == "x"
    chars = tt.drows("uv")  # one string of several letters: one variable per letter
    assert [c.name for c in chars] == ["u", "v"]
    assert chars[0].broadcastable == (True, False)
    assert tt.tensor3s(2)[0].ndim == 3 and tt.matrices(1)[0].dtype == theano_dag.config.floatX


def test_plural_bad_arguments():
    with pytest.raises(TypeError, match="dscalars: names must be strings"):
        tt.dscalars("x", 3)
    with pytest.raises(TypeError, match="dvectors: give a count or at least one name"):
        tt.dvectors()


# -- Rebroadcast ---------------------------------------------------------------------------


def test_addbroadcast_types_and_identity():
    x = tt.dmatrix("x")
    y = tt.addbroadcast(x, 0)
    assert y.broadcastable == (True, False)
    assert isinstance(y.owner.op, Rebroadcast) and y.owner.op.axis == {0: True}
    assert tt.addbroadcast(y, 0) is y  # nothing to change: no new node
    assert tt.unbroadcast(y, 0).broadcastable == (False, False)
    assert tt.patternbroadcast(x, (False, True)).broadcastable == (False, True)
    assert tt.addbroadcast(x, -1).broadcastable == (False, True)


def test_addbroadcast_runtime_check():
    x = tt.dmatrix("x")
    f = theano_dag.function([x], tt.addbroadcast(x, 0) + 1)
    np.testing.assert_array_equal(f(np.zeros((1, 3))), np.ones((1, 3)))
    with pytest.raises(ValueError, match="dimension 0 of the input has length 2, expected 1"):
        f(np.zeros((2, 3)))


def test_addbroadcast_allows_broadcasting():
    x, y = tt.dmatrices("x", "y")
    f = theano_dag.function([x, y], tt.addbroadcast(x, 0) * y)
    np.testing.assert_array_equal(f(np.full((1, 2), 2.0), np.ones((3, 2))), np.full((3, 2), 2.0))


def test_rebroadcast_errors():
    with pytest.raises(ValueError, match="there is no dimension 2"):
        tt.addbroadcast(tt.dmatrix("x"), 2)
    with pytest.raises(ValueError, match="static length 3, so it cannot be declared"):
        Rebroadcast((0, True))(tt.TensorType("float64", shape=(3,))("x"))
    with pytest.raises(TypeError, match=r"expected \(axis, bool\) pairs"):
        Rebroadcast(0)
    with pytest.raises(ValueError, match="the pattern .* has 1 entries, .* has 2 dimensions"):
        tt.patternbroadcast(tt.dmatrix("x"), (True,))


def test_rebroadcast_output_is_a_view_declared_in_view_map():
    x = tt.dmatrix("x")
    y = tt.addbroadcast(x, 0)
    value = np.zeros((1, 3))
    out = evaluate(y, {x: value})
    assert np.shares_memory(out, value) and y.owner.op.view_map == {0: [0]}


# -- specify_shape ---------------------------------------------------------------------------


def test_specify_shape_static_type():
    x = tt.dtensor3("x")
    y = tt.specify_shape(x, (2, None, 4))
    assert y.type == tt.TensorType("float64", shape=(2, None, 4))
    assert isinstance(y.owner.op, SpecifyShape)
    n = tt.lscalar("n")
    assert tt.specify_shape(x, (n, 3, None)).type.shape == (None, 3, None)


def test_specify_shape_runtime_error_names_both_shapes():
    x = tt.dmatrix("x")
    f = theano_dag.function([x], tt.specify_shape(x, (2, None)) * 2)
    assert f(np.ones((2, 5))).shape == (2, 5)
    with pytest.raises(ValueError, match=r"expected shape \(2, None\).*got shape \(3, 5\)"):
        f(np.ones((3, 5)))


def test_specify_shape_symbolic():
    x, y = tt.dmatrices("x", "y")
    f = theano_dag.function([x, y], tt.specify_shape(x, y.shape).sum(), mode="PerformOnly")
    assert f(np.ones((2, 3)), np.ones((2, 3))) == 6.0
    with pytest.raises(ValueError, match=r"expected shape \(2, 4\).*got shape \(2, 3\)"):
        f(np.ones((2, 3)), np.ones((2, 4)))


def test_specify_shape_build_errors():
    x = tt.dmatrix("x")
    with pytest.raises(TypeError, match=r"specify_shape: the shape \(3,\) has 1 entries"):
        tt.specify_shape(x, (3,))
    with pytest.raises(TypeError, match="SpecifyShape: the shape has 3 entries, expected 2"):
        tt.specify_shape(x, tt.constant(np.array([1, 2, 3])))
    with pytest.raises(TypeError, match="must be an integer scalar"):
        tt.specify_shape(x, (2.5, None))
    fixed = tt.TensorType("float64", shape=(3,))("f")
    with pytest.raises(ValueError, match="static length 3, but 4 was specified"):
        tt.specify_shape(fixed, (4,))


def test_specify_shape_infer_shape_uses_known_entries():
    x = tt.dmatrix("x")
    y = tt.specify_shape(x, (2, None))
    inferred = y.owner.op.infer_shape(None, y.owner, [(tt.shape_i(x, 0), tt.shape_i(x, 1))])
    # the entry given passes, checked against x's length as perform checks it
    check = inferred[0][0].owner
    assert isinstance(check.op, EqualLengths) and check.inputs[0].data == 2
    assert check.inputs[1].owner.inputs[0] is x and inferred[0][1].owner.inputs[0] is x
    f = theano_dag.function([x], y.shape)
    assert f(np.ones((2, 5))).tolist() == [2, 5]
    with pytest.raises(LengthMismatchError, match=r"\(the length specified: 2, x's length: 3\)"):
        f(np.ones((3, 5)))


def test_specify_shape_grad_keeps_the_check():
    x = tt.dvector("x")
    g = theano_dag.grad(tt.specify_shape(x, (3,)).sum(), x)
    np.testing.assert_array_equal(g.eval({x: np.ones(3)}), np.ones(3))


# -- padding ----------------------------------------------------------------------------------


def test_padding_patterns():
    v = tt.dvector("v")
    assert tt.shape_padleft(v).broadcastable == (True, False)
    assert tt.shape_padright(v, 2).broadcastable == (False, True, True)
    assert tt.shape_padaxis(v, 0).broadcastable == (True, False)
    assert tt.shape_padaxis(v, 1).broadcastable == (False, True)
    assert tt.shape_padaxis(v, -2).broadcastable == (True, False)
    with pytest.raises(IndexError, match=r"axis 2 is out of range \[-2, 1\]"):
        tt.shape_padaxis(v, 2)
    assert tt.expand_dims(v, -1).broadcastable == (False, True)
    with pytest.raises(ValueError, match="expand_dims: axis 3 is out of range"):
        tt.expand_dims(v, 3)
    with pytest.raises(ValueError, match="repeated axis"):
        tt.expand_dims(v, (0, -3))


# -- cumulative ops -----------------------------------------------------------------------


def test_cumsum_types():
    assert tt.cumsum(tt.imatrix("m")).type == tt.TensorType("int64", shape=(None,))
    assert tt.cumsum(tt.TensorType("float32", shape=(2, 3))("x")).type.shape == (6,)
    assert tt.cumprod(tt.fmatrix("m"), axis=0).type == tt.TensorType("float32", (False, False))
    assert str(tt.cumsum(tt.dvector("x")).owner.op) == "CumSum{axis=None}"


def test_cum_errors():
    with pytest.raises(ValueError, match="mode must be 'add' or 'mul'"):
        CumOp(mode="max")
    with pytest.raises(TypeError, match="axis must be an int or None"):
        CumOp(axis=1.5)
    with pytest.raises(ValueError, match="axis 2 is out of range for a 2-d input"):
        tt.cumsum(tt.dmatrix("m"), axis=2)


@pytest.mark.parametrize("linker", ["py", "cpu"])
@pytest.mark.parametrize("dtype", ["int16", "bool", "uint8", "float32"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cum_ops_of_narrow_dtypes_in_one_converted_copy(linker, dtype, axis):
    # numpy's values (a narrow integer accumulates in 64 bits) for C- and F-ordered
    # inputs; the output, converted once and accumulated in place, is all a call
    # allocates (accumulate with a cast held the converted input beside the output).
    x = tt.TensorType(dtype, shape=(None, None))("x")
    mode = theano_dag.Mode(linker=linker, optimizer=None)
    fs = [theano_dag.function([x], fn(x, axis=axis), mode=mode) for fn in (tt.cumsum, tt.cumprod)]
    v = (np.arange(4096 * 8).reshape(4096, 8) % 3).astype(dtype)
    for vv in (v, np.asfortranarray(v), v[::-1]):
        for f, ref in zip(fs, (np.cumsum, np.cumprod)):
            got, peak = traced_peak(f, vv)
            want = ref(vv, axis=axis)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            assert peak < 1.5 * got.nbytes, f"peak {peak / got.nbytes:.2f} times the output"


def test_cumsum_grad_of_integers_is_zero():
    x = tt.dvector("x")
    cost = tt.cast(tt.cumsum(tt.cast(x, "int64")), "float64").sum() + x.sum()
    np.testing.assert_array_equal(theano_dag.grad(cost, x).eval({x: np.ones(3)}), np.ones(3))


def _cumprod_grad_by_terms(x, w, axis):
    """d sum(w * cumprod(x, axis)) / dx, each term a product of x without x_i (no
    division), slice by slice."""
    if axis is None:
        return _cumprod_grad_by_terms(x.reshape(-1), w.reshape(-1), 0).reshape(x.shape)
    xs, ws = np.moveaxis(x, axis, -1), np.moveaxis(w, axis, -1)
    g = np.zeros_like(xs)
    for idx in np.ndindex(xs.shape[:-1]):
        row, wr = xs[idx], ws[idx]
        for i in range(row.size):
            g[idx + (i,)] = sum(
                wr[j] * np.prod(np.delete(row[: j + 1], i)) for j in range(i, row.size)
            )
    return np.moveaxis(g, -1, axis)


@pytest.mark.parametrize("mode", ["FAST_RUN", "FAST_COMPILE", "py"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cumprod_grad_with_zeros_is_the_products_without_each_factor(mode, axis):
    # Theano's out_j / x_i is 0/0 at a zero and after it; the gradient there is finite:
    # at a slice's first zero the products of the other factors, after it 0.
    x, w = tt.dmatrix("x"), tt.dmatrix("w")
    c = tt.cumprod(x, axis=axis)
    cost = (c * (w.flatten() if axis is None else w)).sum()
    mode = theano_dag.Mode(linker="py") if mode == "py" else mode
    f = theano_dag.function([x, w], theano_dag.grad(cost, x), mode=mode)
    rng = np.random.default_rng(7)
    xv = rng.uniform(-2, 2, (4, 5))
    xv[[0, 0, 1, 2, 2, 3], [1, 3, 0, 4, 2, 2]] = 0.0  # first, later and repeated zeros
    wv = rng.normal(size=(4, 5))
    for v in (xv, np.zeros((4, 5)), np.ones((4, 5))):
        want = _cumprod_grad_by_terms(v, wv, axis)
        np.testing.assert_allclose(f(v, wv), want, rtol=1e-12, atol=1e-12)


def _cumprod_hessian_by_terms(row, w):
    """d2 sum(w * cumprod(row)) / dx_i dx_k: each term a product of row without x_i and
    x_k (no division), 0 on the diagonal."""
    n = row.size
    h = np.zeros((n, n))
    for i in range(n):
        for k in range(n):
            if i != k:
                h[i, k] = sum(
                    w[j] * np.prod(np.delete(row[: j + 1], [i, k])) for j in range(max(i, k), n)
                )
    return h


@pytest.mark.parametrize("mode", ["FAST_RUN", "py"])
def test_cumprod_hessian_at_zeros_is_the_products_without_two_factors(mode):
    # The gradient's quotient out_j / x_i, taken only before a slice's first zero, gave
    # NaN in the Hessian at any zero (0 times the quotient's infinite derivative), and the
    # branches after the first zero were constant zeros where the second derivative is
    # not: d2 / dx_f dx_i at the first zero f and a later i is a product without both.
    v = tt.dvector("v")
    w = np.array([1.0, -2.0, 0.5, 3.0, 1.5, 0.25])
    cost = (tt.cumprod(v) * w).sum()
    mode = theano_dag.Mode(linker="py") if mode == "py" else mode
    h = theano_dag.function([v], theano_dag.gradient.hessian(cost, v), mode=mode)
    rows = ([2, 0, 3, 0, 1.5, 2], [1, 2, 0, 4, 5, 3], [0, 0, 2, 3, 1, 2], [1, 2, 3, 4, 5, 0])
    for row in map(np.array, rows + ([0, 2, 0, 3, 0, 1], [1.2, 2, 3, 0.4, 0.7, 2])):
        np.testing.assert_allclose(
            h(row), _cumprod_hessian_by_terms(row, w), atol=1e-12, err_msg=str(row)
        )


# -- sort -----------------------------------------------------------------------------------


def test_sort_types_and_kinds():
    m = tt.dmatrix("m")
    assert tt.sort(m, axis=None).type == tt.TensorType("float64", shape=(None,))
    assert tt.argsort(m).type == tt.TensorType("int64", shape=(None, None))
    values = np.array([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]])
    for kind in ("quicksort", "mergesort", "heapsort", "stable"):
        got = evaluate(tt.sort(m, axis=1, kind=kind), {m: values})
        np.testing.assert_array_equal(got, np.sort(values, axis=1))


def test_sort_errors():
    with pytest.raises(ValueError, match="kind must be one of"):
        tt.sort(tt.dvector("v"), kind="bubble")
    with pytest.raises(TypeError, match="axis must be an int or None"):
        SortOp("quicksort", tt.lscalar("a"))
    with pytest.raises(ValueError, match="axis 2 is out of range for the 2-d"):
        tt.sort(tt.dmatrix("m"), axis=2)
    with pytest.raises(ValueError, match="order= applies to structured arrays"):
        tt.argsort(tt.dvector("v"), order="f")
    with pytest.raises(ValueError, match="out of range"):
        ArgSortOp()(tt.dscalar("s"))


def test_argsort_gradient_is_zero():
    x = tt.dvector("x")
    cost = (tt.cast(tt.argsort(x), "float64") * x).sum()
    g = theano_dag.grad(cost, x).eval({x: np.array([3.0, 1.0, 2.0])})
    np.testing.assert_array_equal(g, [1.0, 2.0, 0.0])  # argsort(x): only the direct x term


# -- diagonals and triangles ----------------------------------------------------------------


def test_diag_static_shapes():
    assert tt.diag(tt.TensorType("float64", shape=(3,))("v"), 2).type.shape == (5, 5)
    assert tt.diag(tt.TensorType("float64", shape=(3, 5))("m"), 3).type.shape == (2,)
    assert tt.diag(tt.TensorType("float64", shape=(3, 5))("m"), 9).type.shape == (0,)
    assert tt.diagonal(tt.dtensor3("t"), 0, 2, 0).ndim == 2


def test_diag_errors():
    with pytest.raises(ValueError, match="diag: the input must have 1 or more dimensions"):
        tt.diag(tt.dscalar("s"))
    with pytest.raises(TypeError, match="AllocDiag.*1 or more dimensions"):
        AllocDiag()(tt.dscalar("s"))
    with pytest.raises(ValueError, match="AllocDiag.*axis1 and axis2 must differ"):
        AllocDiag(0, 1, -2)(tt.dmatrix("m"))
    with pytest.raises(ValueError, match="AllocDiag.*axis 3 is out of range"):
        AllocDiag(0, 0, 3)(tt.dmatrix("m"))
    with pytest.raises(TypeError, match="ExtractDiag.*2 or more dimensions"):
        ExtractDiag()(tt.dvector("v"))
    with pytest.raises(ValueError, match="axis1 and axis2 must differ"):
        tt.diagonal(tt.dmatrix("m"), 0, 1, -1)
    with pytest.raises(TypeError, match="offset must be an int"):
        AllocDiag(0.5)


def test_extract_diag_output_is_writable_copy():
    m = tt.dmatrix("m")
    value = np.arange(4.0).reshape(2, 2)
    out = evaluate(tt.diag(m), {m: value})
    assert out.flags.writeable and not np.shares_memory(out, value)


def test_tril_keeps_inf_outside_out():
    m = tt.dmatrix("m")
    value = np.full((2, 2), np.inf)
    np.testing.assert_array_equal(evaluate(tt.tril(m), {m: value}), np.tril(value))
    with pytest.raises(TypeError, match="tril: the input must have 2 or more dimensions"):
        tt.tril(tt.dvector("v"))


def test_tril_symbolic_k():
    m, k = tt.dmatrix("m"), tt.lscalar("k")
    f = theano_dag.function([m, k], tt.triu(m, k))
    value = np.arange(12.0).reshape(3, 4)
    for kv in (-1, 0, 2):
        np.testing.assert_array_equal(f(value, kv), np.triu(value, kv))


def test_tri_defaults_to_floatx():
    assert tt.tri(3).dtype == theano_dag.config.floatX
    np.testing.assert_array_equal(tt.tri(2, 3, dtype="int8").eval(), np.tri(2, 3, dtype="int8"))


# -- isclose, max_and_argmax, squeeze, flip -------------------------------------------------


def test_isclose_dtypes_and_tolerances():
    a, b = tt.dvectors("a", "b")
    assert tt.isclose(a, b).dtype == "bool" and tt.allclose(a, b).ndim == 0
    f = theano_dag.function([a, b], tt.isclose(a, b, rtol=0.1, atol=0.0))
    av, bv = np.array([1.0, 1.0, np.nan]), np.array([1.05, 1.2, np.nan])
    np.testing.assert_array_equal(f(av, bv), np.isclose(av, bv, rtol=0.1, atol=0.0))


def test_max_and_argmax():
    m = tt.dmatrix("m")
    out = tt.max_and_argmax(m, axis=0)
    assert isinstance(out, list) and [o.dtype for o in out] == ["float64", "int64"]
    value = np.array([[1.0, 5.0], [3.0, 2.0]])
    mx, idx = theano_dag.function([m], out)(value)
    np.testing.assert_array_equal(mx, [3.0, 5.0])
    np.testing.assert_array_equal(idx, [1, 0])
    with pytest.raises(ValueError, match="max_and_argmax: axis 2 is out of range"):
        tt.max_and_argmax(m, axis=2)


def test_squeeze_axis_checks_length_at_run_time():
    m = tt.dmatrix("m")
    s = tt.squeeze(m, axis=1)
    assert s.type == tt.TensorType("float64", shape=(None,))
    f = theano_dag.function([m], s)
    np.testing.assert_array_equal(f(np.ones((3, 1))), np.ones(3))
    with pytest.raises(ValueError, match=r"expected shape \(None, 1\).*got shape \(3, 2\)"):
        f(np.ones((3, 2)))
    t = tt.TensorType("float64", shape=(1, None, 1))("t")
    assert tt.squeeze(t).ndim == 1 and tt.squeeze(t, axis=-1).type.shape == (1, None)


def test_flip_scalar_and_axes():
    s = tt.dscalar("s")
    assert tt.flip(s) is s
    t = tt.dtensor3("t")
    value = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(evaluate(tt.flip(t, (0, 2)), {t: value}), np.flip(value, (0, 2)))


# -- through the default engine and DebugMode -------------------------------------------------


@pytest.mark.parametrize("mode", [None, "FAST_COMPILE", "DebugMode"])
def test_extras_compiled(mode):
    m = tt.dmatrix("m")
    outs = [tt.cumsum(m, 1), tt.sort(m, 0), tt.diag(tt.tril(m)), tt.flip(m)]
    f = theano_dag.function([m], outs, mode=mode)
    value = np.random.default_rng(0).normal(size=(3, 3))
    want = [np.cumsum(value, 1), np.sort(value, 0), np.diag(np.tril(value)), np.flip(value)]
    for got, w in zip(f(value), want):
        np.testing.assert_allclose(got, w)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_specify_shape_with_a_symbolic_shape_vector_checks_when_run(dtype):
    # Theano accepts a shape vector of unknown length; its errors were AssertionErrors.
    x, shp = tt.vector("x", dtype=dtype), tt.ivector("shp")
    y = SpecifyShape()(x, shp)
    assert y.type == x.type
    f = theano_dag.function([x, shp], y * 2)
    np.testing.assert_allclose(f(np.ones(3, dtype=dtype), [3]), 2.0)
    for bad in ([], [3, 3], [2]):
        with pytest.raises(AssertionError, match="expected shape"):
            f(np.ones(3, dtype=dtype), bad)
        with pytest.raises(ValueError):
            f(np.ones(3, dtype=dtype), bad)
    with pytest.raises(AssertionError, match="the shape has 2 entries, expected 1"):
        SpecifyShape()(x, [2, 2])
