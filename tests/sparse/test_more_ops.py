"""The second part of Theano's sparse vocabulary: indexing, joins, the diagonal, storage
ops, comparisons, the row-vector ops, ``sampling_dot`` and ``usmm``. Each op's value
against scipy (float32 and float64, every engine), its infer_shape against the real
shape, and its gradient by finite differences where it has one."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sparse_helpers import (
    ENGINES,
    FLOATS,
    REF,
    Row,
    as_dense,
    inferred_shapes,
    random_sparse,
    run,
    sp,
)

import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.gradient.verify import verify_grad_sparse
from theano_dag.sparse import basic, compare, indexing, join, products, structure
from theano_dag.sparse.opt import (
    AddSD_ccode,
    CSMGradC,
    StructuredDotCSC,
    StructuredDotCSR,
    UsmmCscDense,
)


def _cmp(f):
    """scipy's (numpy's) comparison as uint8, without scipy's efficiency warnings."""

    def ref(x, y):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = f(x, y)
        return r.astype("uint8") if sp.issparse(r) else np.asarray(r, dtype="uint8")

    return ref


def _dense_cmp(f, swap=False):
    def ref(a, b):
        a, b = (b, a) if swap else (a, b)
        return f(as_dense(a), as_dense(b)).astype("uint8")

    return ref


def _add_on_stored(x, v):
    """``v[j]`` added to each stored entry ``(i, j)`` of ``x`` (a stored zero included,
    as Theano's StructuredAddSVCSR and every structured op here), duplicates summed."""
    x = x.copy()
    x.sum_duplicates()
    cols = x.indices if x.format == "csr" else np.repeat(np.arange(x.shape[1]), np.diff(x.indptr))
    return type(x)((x.data + v[cols], x.indices, x.indptr), shape=x.shape)


_ILIST = np.array([2, 0, 2, -1])


def _rows_added(x, v):
    """A matrix like ``x`` with the rows of ``v`` added to its rows ``_ILIST``."""
    out = np.zeros(x.shape)
    np.add.at(out, _ILIST, v)
    return sp.csc_matrix(out)


def _parts(x):
    return S.csm_properties(x)


def _at_stored(x, m):
    """The entries of the dense ``m`` at the stored places of ``x``, in ``x``'s order."""
    c = x.tocoo()
    return np.asarray(m)[c.row, c.col]


def _diag_matrix(d):
    return sp.csc_matrix(np.diag(d))


TABLE = [
    # indexing
    Row("slice_2d", lambda x: x[1:3, 0:4], lambda x: x[1:3, 0:4], ["csr"]),
    Row("slice_rows", lambda x: x[1:], lambda x: x[1:], ["csc"]),
    Row("slice_step", lambda x: x[::2, 4:0:-2], lambda x: x[::2, 4:0:-2], ["csr"]),
    Row("row_list", lambda x: x[[2, 0, 2]], lambda x: x[[2, 0, 2]], ["csr"]),
    Row("row_list_csc", lambda x: x[[-1, 1]], lambda x: x[[-1, 1]], ["csc"]),
    Row(
        "two_lists",
        lambda x: x[[0, 3, 0], [1, 4, 1]],
        lambda x: np.asarray(x[[0, 3, 0], [1, 4, 1]]).ravel(),
        ["csr"],
    ),
    Row("scalar_entry", lambda x: x[0, 0], lambda x: np.asarray(x[0, 0]), ["csc"]),
    # joins
    Row(
        "hstack",
        lambda x, y: S.hstack([x, y]),
        lambda x, y: sp.hstack([x, y], "csc"),
        ["csr", "csc"],
    ),
    Row(
        "hstack_csr",
        lambda x, y: S.hstack([x, y], format="csr"),
        lambda x, y: sp.hstack([x, y], "csr"),
        ["csc", "csc"],
    ),
    Row(
        "vstack",
        lambda x, y: S.vstack([x, y]),
        lambda x, y: sp.vstack([x, y], "csc"),
        ["csr", "csr"],
    ),
    Row(
        "vstack_csr",
        lambda x, y: S.vstack([x, y], format="csr"),
        lambda x, y: sp.vstack([x, y], "csr"),
        ["csc", "csr"],
    ),
    Row(
        "block_diag",
        S.sparse_block_diag,
        lambda x, y: sp.block_diag([x, y], "csc"),
        ["csr", "csc"],
    ),
    Row(
        "block_diag_csr_3",
        lambda x, y, z: S.sparse_block_diag(x, y, z, format="csr"),
        lambda x, y, z: sp.block_diag([x, y, z], "csr"),
        ["csr", "sq_csc", "csc"],
    ),
    # the diagonal, storage
    Row("diag", S.diag, lambda x: x.diagonal(), ["sq_csr"]),
    Row("diag_csc", S.diag, lambda x: x.diagonal(), ["sq_csc"]),
    Row("square_diagonal", S.square_diagonal, _diag_matrix, ["row"]),
    Row("remove0", S.remove0, lambda x: x, ["csr"]),
    Row("ensure_sorted_indices", S.ensure_sorted_indices, lambda x: x, ["csc"]),
    Row("clean", S.clean, lambda x: x, ["csr"]),
    # the row-vector ops and AddSSData
    Row("mul_s_v", S.mul_s_v, lambda x, v: x.multiply(v[None, :]), ["csr", "row"], True),
    Row("mul_s_v_csc", S.mul_s_v, lambda x, v: x.multiply(v[None, :]), ["csc", "row"], True),
    Row(
        "structured_add_s_v",
        S.structured_add_s_v,
        _add_on_stored,
        ["csr", "row"],
        True,
    ),
    Row(
        "structured_add_s_v_csc",
        S.structured_add_s_v,
        _add_on_stored,
        ["csc", "row"],
        True,
    ),
    Row(
        "add_s_s_data",
        lambda x: S.add_s_s_data(x, S.sqr(x)),
        lambda x: x + x.multiply(x),
        ["csr"],
        True,
    ),
    # products
    Row(
        "sampling_dot",
        lambda a, b, p: S.sampling_dot(a.T, b, p),
        lambda a, b, p: p.multiply(a.T @ b.T),
        ["left", "right", "csr"],
        grad=False,  # none for p: checked below with p fixed
    ),
    Row(
        "sampling_dot_csc",
        lambda a, b, p: S.sampling_dot(a.T, b, p),
        lambda a, b, p: p.multiply(a.T @ b.T),
        ["left", "right", "csc"],
        grad=False,
    ),
    Row(
        "usmm",
        lambda a, x, y, z: S.usmm(a, x, y, z),
        lambda a, x, y, z: a * (x @ y) + z,
        ["scalar", "csr", "right", "out"],
    ),
    Row(
        "usmm_dense_left",
        lambda a, y, x, z: S.usmm(a, y, x, z.T),
        lambda a, y, x, z: a * (y @ x) + z.T,
        ["scalar", "left", "csr", "right"],
    ),
    Row(
        "construct_sparse_from_list",
        lambda x, v: S.construct_sparse_from_list(x, v, _ILIST),
        _rows_added,
        ["dense", "dense"],
        grad=False,  # none for x (its shape only): values' below
    ),
    # Theano's names of its C forms, on a matrix's parts (no rewrite makes them)
    Row(
        "structured_dot_csc_parts",
        lambda a, b: StructuredDotCSC()(*_parts(a)[:3], S.csm_shape(a)[0], b),
        lambda a, b: a @ b,
        ["csc", "right"],
        grad=False,
        parts=True,
    ),
    Row(
        "structured_dot_csr_parts",
        lambda a, b: StructuredDotCSR()(*_parts(a)[:3], b),
        lambda a, b: a @ b,
        ["csr", "right"],
        grad=False,
        parts=True,
    ),
    Row(
        "usmm_csc_dense",
        lambda a, x, y, z: UsmmCscDense(inplace=False)(a, *_parts(x)[:3], S.csm_shape(x)[0], y, z),
        lambda a, x, y, z: a * (x @ y) + z,
        ["scalar", "csc", "right", "out"],
        grad=False,
        parts=True,
    ),
    Row(
        "structured_dot_grad",
        lambda a, b, g: products.StructuredDotGrad("csr")(*_parts(a)[1:3], b, g),
        lambda a, b, g: _at_stored(a, g @ b.T),
        ["csr", "right", "out"],
        grad=False,
        parts=True,
    ),
    Row(
        "csm_grad_c",
        lambda x, g: CSMGradC()(*_parts(x), *_parts(g)),
        lambda x, g: _at_stored(x, g.toarray()),
        ["csr", "csr"],
        grad=False,
    ),
    Row("add_sd_ccode", AddSD_ccode("csr"), lambda x, y: x + y, ["csr", "dense"], True),
    # comparisons (no gradient)
    Row("eq_ss", S.eq, _cmp(lambda x, y: x == y), ["csr", "csr"], grad=False),
    Row("neq_ss", S.neq, _cmp(lambda x, y: x != y), ["csc", "csc"], grad=False),
    Row("lt_ss", S.lt, _cmp(lambda x, y: x < y), ["csr", "csr"], grad=False),
    Row("gt_ss", S.gt, _cmp(lambda x, y: x > y), ["csc", "csc"], grad=False),
    Row("le_ss", S.le, _cmp(lambda x, y: x <= y), ["csr", "csr"], grad=False),
    Row("ge_ss", S.ge, _cmp(lambda x, y: x >= y), ["csr", "csr"], grad=False),
    Row("eq_sd", S.eq, _dense_cmp(np.equal), ["csr", "dense"], grad=False),
    Row("neq_sd", S.neq, _dense_cmp(np.not_equal), ["csc", "dense"], grad=False),
    Row("lt_sd", S.lt, _dense_cmp(np.less), ["csr", "dense"], grad=False),
    Row("gt_ds", S.gt, _dense_cmp(np.greater), ["dense", "csr"], grad=False),
    Row("le_ds", S.le, _dense_cmp(np.less_equal), ["dense", "csc"], grad=False),
    Row("ge_sd", S.ge, _dense_cmp(np.greater_equal), ["csr", "dense"], grad=False),
    Row("gt_sd", S.gt, _dense_cmp(np.greater), ["csr", "dense"], grad=False),
    Row("le_sd", S.le, _dense_cmp(np.less_equal), ["csc", "dense"], grad=False),
    Row("lt_operator", lambda x, y: x < y, _cmp(lambda x, y: x < y), ["csr", "csr"], grad=False),
    Row(
        "ge_operator",
        lambda x, y: x >= y,
        _dense_cmp(np.greater_equal),
        ["csc", "dense"],
        grad=False,
    ),
]
# Rows whose value is not made by the float types alone (comparisons are uint8).
CASES = [(row, dt, eng) for row in TABLE for dt in FLOATS for eng in ENGINES]


def _tolerance(dtype):
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("row,dtype,engine", CASES, ids=[f"{r.name}-{d}-{e}" for r, d, e in CASES])
def test_value_against_scipy(row, dtype, engine):
    rng = np.random.default_rng(13)
    values = row.values(rng, dtype)
    syms = row.variables(values)
    out = row.build(*syms)
    copies = [v.copy() for v in values]
    (got,) = run(syms, [out], values, ENGINES[engine])
    want = row.ref(*copies)
    if isinstance(out.type, S.SparseType):
        assert sp.issparse(got) and got.format == out.type.format, type(got)
    else:
        assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == out.type.dtype
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(as_dense(got), as_dense(want), **_tolerance(dtype))
    for v, c in zip(values, copies):  # inputs are never changed
        np.testing.assert_array_equal(as_dense(v), as_dense(c))


@pytest.mark.parametrize("row", TABLE, ids=[r.name for r in TABLE])
def test_infer_shape_is_the_real_shape(row):
    values = row.values(np.random.default_rng(3), "float64")
    syms = row.variables(values)
    out = row.build(*syms)
    (got,) = run(syms, [out], values, REF)
    assert inferred_shapes(out.owner, syms, values) == [np.shape(got)]


GRAD_ROWS = [r for r in TABLE if r.grad]


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("row", GRAD_ROWS, ids=[r.name for r in GRAD_ROWS])
def test_gradient_by_finite_differences(row, engine):
    rng = np.random.default_rng(17)
    values = row.values(rng, "float64")
    verify_grad_sparse(row.build, values, structured=row.structured, rng=rng, mode=ENGINES[engine])


# -- what the table does not show -------------------------------------------------------


def test_theano_basic_holds_the_products_and_the_other_ops():
    for module in (products, indexing, join, compare, structure):
        for name in module.__all__:
            assert getattr(basic, name) is getattr(module, name), name
            assert getattr(S, name) is getattr(module, name), name
    assert basic.dot is products.dot and basic.structured_dot is products.structured_dot


def test_indexing_dispatches_as_theano():
    x = S.csr_matrix("x", dtype="float64")
    i = tt.iscalar("i")
    assert isinstance(x[1:2].owner.op, S.GetItem2d)
    assert isinstance(x[1:2, i : i + 2].owner.op, S.GetItem2d)
    assert isinstance(x[[0, 1]].owner.op, S.GetItemList)
    assert isinstance(x[tt.ivector("r")].owner.op, S.GetItemList)
    assert isinstance(x[[0], [1]].owner.op, S.GetItem2Lists)
    assert isinstance(x[0, i].owner.op, S.GetItemScalar)
    assert x[0, i].type == tt.TensorType("float64", shape=())
    with pytest.raises(NotImplementedError, match="no sparse vector"):
        x[0]
    with pytest.raises(NotImplementedError, match="no sparse vector"):
        x[0:2, 1]
    with pytest.raises(ValueError, match="Argument not supported"):
        x[1:2, [0, 1]]


def test_symbolic_slice_bounds_and_their_gradient():
    x = S.csc_matrix("x", dtype="float64")
    a, b = tt.lscalar("a"), tt.lscalar("b")
    y = x[a:b, a:]
    value = sp.csc_matrix(np.arange(20.0).reshape(4, 5))
    (got,) = run([x, a, b], [y], [value, 1, 3], REF)
    np.testing.assert_array_equal(got.toarray(), value[1:3, 1:].toarray())
    g = tt.grad(S.sp_sum(S.sqr(y), sparse_grad=True), x)
    (gv,) = run([x, a, b], [g], [value, 1, 3], ENGINES["cpu"])
    want = np.zeros((4, 5))
    want[1:3, 1:] = 2 * value.toarray()[1:3, 1:]
    assert gv.format == "csc"
    np.testing.assert_allclose(gv.toarray(), want)


def test_row_list_gradient_sums_repeated_rows():
    x = S.csr_matrix("x", dtype="float64")
    g = tt.grad(S.sp_sum(x[[1, 1, 0]], sparse_grad=False), x)
    value = sp.csr_matrix(np.ones((3, 2)))
    (gv,) = run([x], [g], [value], REF)
    np.testing.assert_array_equal(gv.toarray(), [[1, 1], [2, 2], [0, 0]])


def _unclean():
    """A 2x3 CSR matrix with unsorted column indices and a stored zero."""
    data, indices, indptr = np.array([3.0, 0.0, 1.0]), np.array([2, 0, 1]), np.array([0, 3, 3])
    return sp.csr_matrix((data, indices, indptr), shape=(2, 3))


@pytest.mark.parametrize("engine", list(ENGINES))
def test_remove0_sort_and_clean_change_the_storage_only(engine):
    x = S.csr_matrix("x", dtype="float64")
    value = _unclean()
    assert not value.has_sorted_indices
    r0, srt, cl = run(
        [x], [S.remove0(x), S.ensure_sorted_indices(x), S.clean(x)], [value], ENGINES[engine]
    )
    assert r0.nnz == 2 and 0.0 not in r0.data
    np.testing.assert_array_equal(srt.indices, [0, 1, 2])
    np.testing.assert_array_equal(srt.data, [0.0, 1.0, 3.0])
    np.testing.assert_array_equal(cl.indices, [1, 2])
    np.testing.assert_array_equal(cl.data, [1.0, 3.0])
    for m in (r0, srt, cl):
        np.testing.assert_array_equal(m.toarray(), value.toarray())
    # The input keeps its stored zero and its order.
    np.testing.assert_array_equal(value.indices, [2, 0, 1])


def test_errors_name_the_problem():
    x, y = S.csr_matrix("x", dtype="float64"), S.csc_matrix("y", dtype="float64")
    with pytest.raises(ValueError, match="square matrix"):
        run([x], [S.diag(x)], [sp.csr_matrix(np.ones((2, 3)))], REF)
    with pytest.raises(ValueError, match="output dtype must be specified"):
        S.HStack(format="csr")
    with pytest.raises(NotImplementedError, match="AddSSData"):
        S.add_s_s_data(x, y)
    with pytest.raises(ValueError, match="pattern"):
        z = S.csr_matrix("z", dtype="float64")
        a, b = sp.csr_matrix(np.eye(2)), sp.csr_matrix(np.ones((2, 2)))
        run([x, z], [S.add_s_s_data(x, z)], [a, b], REF)
    with pytest.raises(TypeError, match="pattern p must be sparse"):
        S.sampling_dot(tt.dmatrix(), tt.dmatrix(), tt.dmatrix())
    with pytest.raises(TypeError, match="x or y must be sparse"):
        S.usmm(tt.dscalar(), tt.dmatrix(), tt.dmatrix(), tt.dmatrix())
    with pytest.raises(TypeError, match="needs a sparse operand"):
        S.lt(tt.dmatrix(), tt.dmatrix())


def test_sampling_dot_reads_only_the_sampled_entries():
    # x and y with a NaN outside the sampled rows: a dense x @ y.T would carry it into
    # no sampled entry either, but a wrong row/column pairing would.
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    p = S.csr_matrix("p", dtype="float64")
    xv, yv = np.ones((3, 2)), np.ones((4, 2))
    xv[2] = np.nan
    pv = sp.csr_matrix(np.array([[1.0, 0, 0, 2.0], [0, 3.0, 0, 0], [0, 0, 0, 0]]))
    (got,) = run([x, y, p], [S.sampling_dot(x, y, p)], [xv, yv, pv], ENGINES["cpu"])
    np.testing.assert_array_equal(got.toarray(), 2 * pv.toarray())
    np.testing.assert_array_equal(got.indices, pv.indices)


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("format", ["csr", "csc"])
def test_sampling_dot_gradient_by_finite_differences(format, engine):
    rng = np.random.default_rng(19)
    pattern = S.as_sparse_variable(random_sparse(rng, format, "float64"))
    xv, yv = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    verify_grad_sparse(
        lambda x, y: S.sampling_dot(x, y, pattern), [xv, yv], rng=rng, mode=ENGINES[engine]
    )


@pytest.mark.parametrize("engine", list(ENGINES))
def test_construct_sparse_from_list_adds_rows_and_its_gradient(engine):
    x, values, ilist = tt.dmatrix("x"), tt.dmatrix("values"), tt.lvector("ilist")
    out = S.construct_sparse_from_list(x, values, ilist)
    assert out.type == S.SparseType("csc", "float64")
    rng = np.random.default_rng(23)
    xv, vv, iv = np.zeros((4, 3)), rng.standard_normal((3, 3)), np.array([2, 0, 2])
    (got,) = run([x, values, ilist], [out], [xv, vv, iv], ENGINES[engine])
    want = np.zeros((4, 3))
    np.add.at(want, iv, vv)
    assert got.format == "csc"
    np.testing.assert_allclose(got.toarray(), want, rtol=1e-15)
    verify_grad_sparse(
        lambda v: S.construct_sparse_from_list(xv, v, iv), [vv], rng=rng, mode=ENGINES[engine]
    )


def test_theano_names_of_the_c_specialisations_compute_the_same():
    rng = np.random.default_rng(29)
    a = random_sparse(rng, "csc", "float64")
    b, z = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    c = a.tocsr()
    got = StructuredDotCSC()(a.data, a.indices, a.indptr, a.shape[0], b).eval()
    np.testing.assert_allclose(got, a @ b, rtol=1e-14)
    got = StructuredDotCSR()(c.data, c.indices, c.indptr, b).eval()
    np.testing.assert_allclose(got, a @ b, rtol=1e-14)
    got = UsmmCscDense(inplace=False)(0.5, a.data, a.indices, a.indptr, a.shape[0], b, z).eval()
    np.testing.assert_allclose(got, z + 0.5 * (a @ b), rtol=1e-14)
    parts = (a.data, a.indices, a.indptr, np.array(a.shape))
    np.testing.assert_array_equal(CSMGradC()(*parts, *parts).eval(), a.data)
    assert isinstance(S.sdg_csc, S.StructuredDotGradCSC) and S.sdg_csr.format == "csr"
    assert basic._mtypes == [sp.csc_matrix, sp.csr_matrix]
    assert basic._is_sparse(a) and not basic._is_sparse(b)
    assert basic._is_dense_variable(tt.dmatrix()) and not basic._is_dense_variable(S.csr_matrix())
