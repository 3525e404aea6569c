"""Walk the table of sparse ops: each one's value against scipy.sparse (float32 and
float64, on the reference and CPU engines), its infer_shape against the real shape, and
its gradient by finite differences (``verify_grad_sparse``)."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_helpers import ENGINES, FLOATS, REF, Row, as_dense, inferred_shapes, run, sp

import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.gradient.verify import verify_grad_sparse


def _on_data(f):
    """scipy's reference for a structured function: ``f`` on the stored entries."""

    def ref(x, *args):
        # numpy's result dtype (an integer matrix's exp is float64, as the op's)
        return type(x)((f(x.data, *args), x.indices, x.indptr), shape=x.shape)

    return ref


def _through_canonical_parts(x):
    """``x`` rebuilt from ``CanonicalParts`` of its parts (what the CPU engine makes of
    ``csm_properties(CSM(parts))``)."""
    return S.CSM(x.format)(*S.CanonicalParts(x.format)(*S.csm_properties(x)))


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


TABLE = [
    Row("transpose", S.transpose, lambda x: x.T, ["csr"]),
    Row("transpose_csc", S.transpose, lambda x: x.T, ["csc"]),
    Row("neg", S.neg, lambda x: -x, ["csc"]),
    Row("neg_operator", lambda x: -x, lambda x: -x, ["csr"]),
    Row("cast", S.Cast("float64"), lambda x: x.astype("float64"), ["csr"]),
    Row("add_ss", S.add, lambda x, y: x + y, ["csr", "csr"]),
    Row("add_ss_mixed_formats", S.add, lambda x, y: x + y, ["csr", "csc"]),
    Row("add_sd", S.add, lambda x, y: x + y, ["csc", "dense"], structured=True),
    Row("add_ds_operator", lambda y, x: y + x, lambda y, x: y + x, ["dense", "csr"], True),
    Row("add_s_row", S.add, lambda x, v: x.toarray() + v, ["csr", "row"], structured=True),
    Row("sub_ss", S.sub, lambda x, y: x - y, ["csr", "csr"]),
    Row("sub_sd_operator", lambda x, y: x - y, lambda x, y: x - y, ["csr", "dense"], True),
    Row("sub_ds_operator", lambda y, x: y - x, lambda y, x: y - x, ["dense", "csc"], True),
    Row("mul_ss", S.mul, lambda x, y: x.multiply(y), ["csr", "csr"]),
    Row("mul_ss_mixed", S.mul, lambda x, y: x.multiply(y), ["csc", "csr"]),
    Row("mul_sd", S.mul, lambda x, y: x.multiply(y), ["csr", "dense"], structured=True),
    Row("mul_ds_operator", lambda y, x: y * x, lambda y, x: x.multiply(y), ["dense", "csc"]),
    Row("mul_s_scalar", S.mul, lambda x, a: x * a, ["csr", "scalar"], structured=True),
    Row("mul_s_row", S.mul, lambda x, v: x.multiply(v[None, :]), ["csc", "row"], True),
    Row("sp_sum", S.sp_sum, lambda x: x.sum(), ["csr"]),
    Row("sp_sum_0", lambda x: S.sp_sum(x, 0), lambda x: np.asarray(x.sum(0)).ravel(), ["csc"]),
    Row("sp_sum_1", lambda x: S.sp_sum(x, 1), lambda x: np.asarray(x.sum(1)).ravel(), ["csr"]),
    Row("sp_sum_s", lambda x: S.sp_sum(x, sparse_grad=True), lambda x: x.sum(), ["csr"], True),
    Row(
        "sp_sum_0_s",
        lambda x: S.sp_sum(x, 0, sparse_grad=True),
        lambda x: np.asarray(x.sum(0)).ravel(),
        ["csr"],
        True,
    ),
    Row(
        "sp_sum_1_s",
        lambda x: S.sp_sum(x, 1, sparse_grad=True),
        lambda x: np.asarray(x.sum(1)).ravel(),
        ["csc"],
        True,
    ),
    Row("col_scale", S.col_scale, lambda x, s: x.multiply(s[None, :]), ["csc", "row"], True),
    Row("col_scale_csr", S.col_scale, lambda x, s: x.multiply(s[None, :]), ["csr", "row"], True),
    Row("row_scale", S.row_scale, lambda x, s: x.multiply(s[:, None]), ["csr", "col"], True),
    Row("row_scale_csc", S.row_scale, lambda x, s: x.multiply(s[:, None]), ["csc", "col"], True),
    Row("structured_sigmoid", S.structured_sigmoid, _on_data(_sigmoid), ["csr"], True),
    Row("structured_exp", S.structured_exp, _on_data(np.exp), ["csc"], True),
    Row("structured_log", S.structured_log, _on_data(np.log), ["pos_csr"], True),
    Row(
        "structured_pow",
        lambda x: S.structured_pow(x, 3),
        _on_data(lambda v: v**3),
        ["csr"],
        True,
    ),
    Row(
        "structured_add",
        lambda x: S.structured_add(x, 1.5),
        _on_data(lambda v: v + 1.5),
        ["csr"],
        True,
    ),
    Row("sqr", S.sqr, lambda x: x.multiply(x), ["csr"], True),
    Row("sqrt", S.sqrt, lambda x: x.sqrt(), ["pos_csc"], True),
    Row("abs_", S.abs_, abs, ["csr"], True),
    Row("sin", S.sin, lambda x: x.sin(), ["csr"], True),
    Row("tanh", S.tanh, lambda x: x.tanh(), ["csc"], True),
    Row("expm1", S.expm1, lambda x: x.expm1(), ["csr"], True),
    Row("log1p", S.log1p, lambda x: x.log1p(), ["pos_csr"], True),
    Row("arctan", S.arctan, lambda x: x.arctan(), ["csr"], True),
    Row("floor", S.floor, lambda x: x.floor(), ["csr"], grad=False),
    Row("sgn", S.sgn, lambda x: x.sign(), ["csr"], grad=False),
    Row("dense_from_sparse", S.dense_from_sparse, lambda x: x.toarray(), ["csr"], True),
    Row("toarray", lambda x: x.toarray(), lambda x: x.toarray(), ["csc"], True),
    Row(
        "dense_from_sparse_regular",
        S.DenseFromSparse(structured=False),
        lambda x: x.toarray(),
        ["csr"],
    ),
    Row("canonical_parts", _through_canonical_parts, lambda x: x, ["csr"], structured=True),
    Row("canonical_parts_csc", _through_canonical_parts, lambda x: x, ["csc"], True),
    Row("csr_from_dense", S.csr_from_dense, sp.csr_matrix, ["dense"]),
    Row("csc_from_dense", S.csc_from_dense, sp.csc_matrix, ["dense"]),
]

CASES = [(row, dt, eng) for row in TABLE for dt in FLOATS for eng in ENGINES]


def _tolerance(dtype):
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("row,dtype,engine", CASES, ids=[f"{r.name}-{d}-{e}" for r, d, e in CASES])
def test_value_against_scipy(row, dtype, engine):
    rng = np.random.default_rng(7)
    values = row.values(rng, dtype)
    syms = row.variables(values)
    out = row.build(*syms)
    copies = [v.copy() for v in values]
    (got,) = run(syms, [out], values, ENGINES[engine])
    want = row.ref(*copies)
    # The kind of value the type promises: a scipy matrix of its format, or an array.
    if isinstance(out.type, S.SparseType):
        assert sp.issparse(got) and got.format == out.type.format, type(got)
        assert got.dtype == out.type.dtype
    else:
        assert isinstance(got, np.ndarray) and got.dtype == out.type.dtype
    assert got.shape == want.shape
    np.testing.assert_allclose(as_dense(got), as_dense(want), **_tolerance(dtype))
    for v, c in zip(values, copies):  # inputs are never changed
        np.testing.assert_array_equal(as_dense(v), as_dense(c))


@pytest.mark.parametrize("row", TABLE, ids=[r.name for r in TABLE])
def test_infer_shape_is_the_real_shape(row):
    rng = np.random.default_rng(3)
    values = row.values(rng, "float64")
    syms = row.variables(values)
    out = row.build(*syms)
    (got,) = run(syms, [out], values, REF)
    assert inferred_shapes(out.owner, syms, values) == [got.shape]


GRAD_ROWS = [r for r in TABLE if r.grad]


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("row", GRAD_ROWS, ids=[r.name for r in GRAD_ROWS])
def test_gradient_by_finite_differences(row, engine):
    rng = np.random.default_rng(11)
    values = row.values(rng, "float64")
    verify_grad_sparse(row.build, values, structured=row.structured, rng=rng, mode=ENGINES[engine])


def test_a_structured_gradient_is_zero_off_the_pattern():
    # d/dx sum(structured_exp(x)) lives on x's stored entries: exp(x) there, and the
    # gradient is a sparse matrix with exactly x's pattern.
    x = S.csr_matrix("x", dtype="float64")
    g = tt.grad(S.sp_sum(S.structured_exp(x), sparse_grad=True), x)
    value = sp.csr_matrix(np.array([[0.0, 1.0, 0.0], [2.0, 0.0, -1.0]]))
    (got,) = run([x], [g], [value], ENGINES["cpu"])
    assert sp.issparse(got) and got.format == "csr"
    np.testing.assert_array_equal(got.indices, value.indices)
    np.testing.assert_array_equal(got.indptr, value.indptr)
    np.testing.assert_allclose(got.data, np.exp(value.data), rtol=1e-15)


def test_a_regular_sum_gradient_stores_every_entry():
    x = S.csc_matrix("x", dtype="float64")
    g = tt.grad(S.sp_sum(x, sparse_grad=False), x)
    value = sp.csc_matrix(np.array([[0.0, 1.0], [0.0, 0.0]]))
    (got,) = run([x], [g], [value], REF)
    assert got.format == "csc"
    np.testing.assert_array_equal(got.toarray(), np.ones((2, 2)))
