"""Every row of the sparse op tables (test_ops, test_more_ops, test_products,
test_specialized) on the inputs a random 4 x 5 matrix never is: empty shapes, one row or
column, no stored entries, stored zeros, unsorted and duplicate indices, inf and nan,
huge and tiny values, the other format, scipy's sparse arrays, integer dtypes, dense
operands that are not C-contiguous. Each value is checked against scipy's on the same
matrices made canonical (duplicates summed: the matrix's value), and each result for the
invariants a caller relies on: a valid scipy matrix of the type's format and dtype
(sorted indices where the inputs' and scipy's are), the inputs unchanged, and a second
call leaving the first call's result alone."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import test_more_ops
import test_ops
import test_products
import test_specialized
from sparse_helpers import ENGINES, SHAPE, as_dense, run, sp

import theano_dag
import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.gradient.verify import verify_grad, verify_grad_sparse

TABLES = {
    "ops": test_ops.TABLE,
    "more": test_more_ops.TABLE,
    "products": test_products.TABLE,
    "specialized": test_specialized.TABLE,
}
ROWS = [(t, row) for t, rows in TABLES.items() for row in rows]


# -- the edge cases: each changes the sparse inputs, the dense ones, or the shape ---------


def _rebuild(m, data, indices, indptr):
    cls = sp.csr_matrix if m.format == "csr" else sp.csc_matrix
    return cls((data, indices, indptr), shape=m.shape)


def _slices(m):
    return [slice(m.indptr[i], m.indptr[i + 1]) for i in range(len(m.indptr) - 1)]


def stored_zeros(m):
    """``m`` with an explicit 0 stored in each major slice where there is room."""
    data, indices, indptr = [], [], [0]
    minor = m.shape[1] if m.format == "csr" else m.shape[0]
    for s in _slices(m):
        idx, d = list(m.indices[s]), list(m.data[s])
        free = sorted(set(range(minor)) - set(idx))
        if free:
            idx.insert(0, free[0]), d.insert(0, 0)
            idx, d = zip(*sorted(zip(idx, d)))
        indices += idx
        data += d
        indptr.append(len(indices))
    return _rebuild(m, np.array(data, m.dtype), np.array(indices, "int32"), np.array(indptr))


def unsorted(m):
    """``m`` with each major slice's entries in reverse order."""
    order = np.concatenate([np.arange(s.start, s.stop)[::-1] for s in _slices(m)] + [[]])
    order = order.astype(int)
    return _rebuild(m, m.data[order], m.indices[order], m.indptr.copy())


def duplicates(m):
    """``m`` with each stored entry split in two entries at the same place (a quarter and
    three quarters of it, the second ones in reverse order): the same matrix."""
    data, indices, indptr = [], [], [0]
    for s in _slices(m):
        d = m.data[s]
        part = d // 4 if m.dtype.kind in "iu" else d / 4
        data += [part, (d - part)[::-1]]
        indices += [m.indices[s], m.indices[s][::-1]]
        indptr.append(indptr[-1] + 2 * len(d))
    data = np.concatenate(data + [np.zeros(0, m.dtype)]).astype(m.dtype)
    indices = np.concatenate(indices + [np.zeros(0, "int32")]).astype("int32")
    return _rebuild(m, data, indices, np.array(indptr))


def no_entries(m):
    return _rebuild(m, np.zeros(0, m.dtype), np.zeros(0, "int32"), np.zeros_like(m.indptr))


def nonfinite(m):
    """``m`` with inf, nan and -inf stored in its first entries."""
    data = m.data.copy()
    data[:3] = [np.inf, np.nan, -np.inf][: len(data)]
    return _rebuild(m, data, m.indices.copy(), m.indptr.copy())


def scaled(factor):
    def scale(m):
        return _rebuild(m, (m.data * factor).astype(m.dtype), m.indices.copy(), m.indptr.copy())

    return scale


def other_format(m):
    return m.tocsc() if m.format == "csr" else m.tocsr()


def sparse_array(m):
    """``m`` as a scipy sparse array (``csr_array``, ``csc_array``)."""
    return sp.csr_array(m) if m.format == "csr" else sp.csc_array(m)


def not_contiguous(a):
    """``a`` as a view that is not C-contiguous: a transposed copy's transpose (matrices),
    every other entry of an array twice as long (vectors)."""
    if a.ndim == 2:
        return a.T.copy().T
    if a.ndim == 1:
        return np.repeat(a, 2)[::2]
    return a


_HUGE = {"float32": 1e18, "float64": 1e150}
_TINY = {"float32": 1e-18, "float64": 1e-150}
# name: (what it does to a sparse input, to a dense input, the shape, the dtypes)
EDGES = {
    "shape_0x5": (None, None, (0, 5)),
    "shape_4x0": (None, None, (4, 0)),
    "shape_0x0": (None, None, (0, 0)),
    "shape_1x1": (None, None, (1, 1)),
    "shape_1x5": (None, None, (1, 5)),
    "shape_4x1": (None, None, (4, 1)),
    "no_entries": (no_entries, None, SHAPE),
    "stored_zeros": (stored_zeros, None, SHAPE),
    "unsorted": (unsorted, None, SHAPE),
    "duplicates": (duplicates, None, SHAPE),
    "unsorted_duplicates": (lambda m: unsorted(duplicates(m)), None, SHAPE),
    "nonfinite": (nonfinite, None, SHAPE),
    "huge": ("huge", None, SHAPE),
    "tiny": ("tiny", None, SHAPE),
    "other_format": (other_format, None, SHAPE),
    "sparse_array": (sparse_array, None, SHAPE),
    "not_contiguous": (None, not_contiguous, SHAPE),
    "plain": (None, None, SHAPE),  # (the integer dtypes' own row)
}


def _edge_values(row, edge, dtype, seed=0):
    on_sparse, on_dense, shape = EDGES[edge]
    if on_sparse in ("huge", "tiny"):
        on_sparse = scaled((_HUGE if on_sparse == "huge" else _TINY)[dtype])
    values = row.values(np.random.default_rng(seed), dtype, shape=shape)
    out = []
    for v in values:
        if sp.issparse(v) and on_sparse is not None:
            v = on_sparse(v)
        elif not sp.issparse(v) and on_dense is not None:
            v = on_dense(v)
        out.append(v)
    return out


def _canonical(v):
    if sp.issparse(v):
        v = v.copy()
        v.sum_duplicates()
    return v.copy()


def _snapshot(v):
    """What must not change: a sparse value's arrays, a dense value's entries."""
    if sp.issparse(v):
        return (v.format, v.shape, v.data.copy(), v.indices.copy(), v.indptr.copy())
    return (np.array(v, copy=True),)


def _same(a, b):
    return len(a) == len(b) and all(
        x == y if not isinstance(x, np.ndarray) else np.array_equal(x, y, equal_nan=True)
        for x, y in zip(a, b)
    )


def _tolerance(dtype, edge):
    tol = {"float32": 1e-5}.get(dtype, 1e-12)
    scale = {"huge": _HUGE, "tiny": _TINY}.get(edge)
    # The products of scaled entries are scaled twice: an absolute tolerance of the scale.
    atol = tol * (scale[dtype] if scale else 1)
    return {"rtol": tol, "atol": 0 if edge == "tiny" else atol}


def _compiled(row, values, mode, cache):
    """``row``'s graph for inputs of ``values``' types, compiled once per types (the
    shapes are not in the types: one function serves every edge case of a dtype)."""
    syms = row.variables(values)
    key = tuple(s.type for s in syms)
    if key not in cache:
        out = row.build(*syms)
        cache[key] = out, theano_dag.function(syms, out, mode=mode, on_unused_input="ignore")
    return cache[key]


def _check(row, edge, dtype, mode, cache=None):
    """The list of what is wrong with ``row`` on ``edge`` (empty when all is right)."""
    values = _edge_values(row, edge, dtype)
    out, f = _compiled(row, values, mode, {} if cache is None else cache)
    before = [_snapshot(v) for v in values]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's efficiency warnings, nan comparisons
        try:
            want = row.ref(*[_canonical(v) for v in values])
        except Exception as e:  # noqa: BLE001 (scipy refuses: so must we)
            want = e
        try:
            got = f(*values)
        except Exception as e:  # noqa: BLE001 (the failure is the finding)
            if isinstance(want, Exception):
                return []
            return [f"raised {type(e).__name__}: {e}"]
    if isinstance(want, Exception):
        return [f"scipy raised {type(want).__name__}: {want}; we returned a value"]
    problems = []
    if isinstance(out.type, S.SparseType):
        if not (isinstance(got, sp.spmatrix) and got.format == out.type.format):
            return [f"a {type(got).__name__} for a {out.type}"]
        try:
            got.check_format(full_check=True)
        except ValueError as e:
            problems.append(f"invalid matrix: {e}")
        inputs_sorted = all(v.has_sorted_indices for v in values if sp.issparse(v))
        if inputs_sorted and getattr(want, "has_sorted_indices", False):
            if not got.has_sorted_indices or (
                got.nnz and not all(np.all(np.diff(got.indices[s]) > 0) for s in _slices(got))
            ):
                problems.append("unsorted indices where scipy's are sorted")
    elif not isinstance(got, np.ndarray):
        return [f"a {type(got).__name__} for a {out.type}"]
    if got.dtype != out.type.dtype:
        problems.append(f"dtype {got.dtype}, the type says {out.type.dtype}")
    if np.shape(got) != np.shape(want):
        return [*problems, f"shape {np.shape(got)}, scipy's {np.shape(want)}"]
    try:
        np.testing.assert_allclose(
            as_dense(got).astype("float64"),
            as_dense(want).astype("float64"),
            **_tolerance(dtype, edge),
        )
    except AssertionError as e:
        problems.append(f"values differ from scipy's: {str(e).strip().splitlines()[:6]}")
    if not all(_same(b, _snapshot(v)) for b, v in zip(before, values)):
        problems.append("an input was changed")
    kept = _snapshot(got)
    other = _edge_values(row, edge, dtype, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(*other)
    if not _same(kept, _snapshot(got)):
        problems.append("a second call changed the first call's result")
    return problems


# The integer dtypes on the edges where they differ from floats (scipy's result dtype
# rules: an integer matrix's exp or mean is float64).
INT_EDGES = ("plain", "duplicates", "no_entries", "shape_0x5")
FLOAT_EDGES = [e for e in EDGES if e != "plain"]
CASES = [(t, row, eng) for t, row in ROWS for eng in ENGINES]


@pytest.mark.parametrize("table,row,engine", CASES, ids=[f"{t}-{r.name}-{e}" for t, r, e in CASES])
def test_edge_cases_against_scipy(table, row, engine):
    failures, cache = {}, {}
    cases = [(e, d) for e in FLOAT_EDGES for d in ("float64", "float32")]
    cases += [(e, d) for e in INT_EDGES for d in ("int32", "int64")]
    for edge, dtype in cases:
        if edge == "other_format" and row.parts:
            continue
        problems = _check(row, edge, dtype, ENGINES[engine], cache)
        if problems:
            failures[f"{edge}/{dtype}"] = problems
    assert not failures, failures


# -- what the edge cases found ---------------------------------------------------------


def _dup_unsorted():
    """A 2 x 3 CSR matrix storing 1 and 3 at (0, 2) (so 4 there), 2 at (0, 0), in that
    order, and 5 at (1, 1): [[2, 0, 4], [0, 5, 0]]."""
    return sp.csr_matrix(
        (np.array([1.0, 2.0, 3.0, 5.0]), np.array([2, 0, 2, 1]), np.array([0, 3, 4])),
        shape=(2, 3),
    )


@pytest.mark.parametrize("engine", list(ENGINES))
def test_sp_sum_leaves_an_unsorted_input_as_it_is(engine):
    # scipy's x.sum() sums the duplicates of x in place; the op read it on the caller's
    # matrix, which came back sorted and with 3 entries.
    x = S.csr_matrix("x", dtype="float64")
    value = _dup_unsorted()
    (got,) = run([x], [S.sp_sum(x)], [value], ENGINES[engine])
    assert got == 11.0
    np.testing.assert_array_equal(value.indices, [2, 0, 2, 1])
    np.testing.assert_array_equal(value.data, [1.0, 2.0, 3.0, 5.0])


@pytest.mark.parametrize("engine", list(ENGINES))
def test_functions_of_the_stored_entries_read_duplicates_summed(engine):
    # The matrix is 4 at (0, 2): sqrt gives 2 there (scipy's x.sqrt()), not
    # sqrt(1) + sqrt(3); the structured ops and the parts follow the same value.
    x = S.csr_matrix("x", dtype="float64")
    value = _dup_unsorted()
    outs = [S.sqrt(x), S.structured_exp(x), S.structured_add(x, 1.0), *S.csm_properties(x)]
    sq, ex, ad, data, indices, indptr, _shape = run([x], outs, [value], ENGINES[engine])
    np.testing.assert_allclose(sq.toarray(), [[np.sqrt(2), 0, 2], [0, np.sqrt(5), 0]])
    np.testing.assert_allclose(ex.toarray(), [[np.exp(2), 0, np.exp(4)], [0, np.exp(5), 0]])
    np.testing.assert_array_equal(ad.toarray(), [[3, 0, 5], [0, 6, 0]])
    np.testing.assert_array_equal(data, [2.0, 4.0, 5.0])
    np.testing.assert_array_equal(indices, [0, 2, 1])
    np.testing.assert_array_equal(indptr, [0, 2, 3])
    np.testing.assert_array_equal(value.indices, [2, 0, 2, 1])  # the input as it was


@pytest.mark.parametrize("engine", list(ENGINES))
def test_row_vector_ops_and_add_s_s_data_read_duplicates_summed(engine):
    # structured_add_s_v added v[2] to each of the two entries at (0, 2): 4 + 2 v[2];
    # add_s_s_data added the data of an unsorted matrix to a sorted one's, entry by entry.
    x, v = S.csr_matrix("x", dtype="float64"), tt.dvector("v")
    value, vv = _dup_unsorted(), np.array([10.0, 20.0, 30.0])
    outs = [S.structured_add_s_v(x, v), S.mul_s_v(x, v), S.add_s_s_data(x, S.sqr(x))]
    add, mul, dd = run([x, v], outs, [value, vv], ENGINES[engine])
    np.testing.assert_array_equal(add.toarray(), [[12, 0, 34], [0, 25, 0]])
    np.testing.assert_array_equal(mul.toarray(), [[20, 0, 120], [0, 100, 0]])
    np.testing.assert_array_equal(dd.toarray(), [[6, 0, 20], [0, 30, 0]])


def test_construct_sparse_from_list_refuses_rows_it_cannot_place():
    # Row 7 of a 4-row matrix went to row 3 (the index taken modulo 4), and rows of 2
    # values filled 2 of 3 columns; numpy's x[ilist] += values refuses both.
    x, v, il = tt.dmatrix("x"), tt.dmatrix("v"), tt.lvector("il")
    f = theano_dag.function([x, v, il], S.construct_sparse_from_list(x, v, il))
    zeros = np.zeros((4, 3))
    with pytest.raises(IndexError, match="index 7 is out of bounds for a matrix of 4 rows"):
        f(zeros, np.ones((2, 3)), np.array([7, 0]))
    with pytest.raises(IndexError, match="index -5 is out of bounds"):
        f(zeros, np.ones((1, 3)), np.array([-5]))
    with pytest.raises(ValueError, match=r"rows of 2 values for a matrix of shape \(4, 3\)"):
        f(zeros, np.ones((2, 2)), np.array([1, 0]))
    got = f(zeros, np.ones((2, 3)), np.array([-4, 0]))  # -4 is row 0, as in numpy
    np.testing.assert_array_equal(got.toarray(), [[2, 2, 2], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
    assert f(np.zeros((0, 3)), np.ones((0, 3)), np.zeros(0, "int64")).shape == (0, 3)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_matrix_built_with_a_place_stored_twice_reads_summed_on_every_engine(engine):
    # The CPU engine's rewrite of csm_properties(CSM(parts)) into the parts skipped the
    # summing, so structured_exp gave exp(1) + exp(3) at (0, 2) there, exp(4) elsewhere.
    d = tt.dvector("d")
    m = S.CSR(d, [2, 0, 2], [0, 3, 3], [2, 3])
    y = S.dense_from_sparse(S.structured_exp(m))
    (got,) = run([d], [y], [np.array([1.0, 2.0, 3.0])], ENGINES[engine])
    np.testing.assert_allclose(got, [[np.exp(2), 0, np.exp(4)], [0, 0, 0]], rtol=1e-15)


GRAD_EDGES = ("shape_0x5", "unsorted_duplicates")
GRAD_CASES = [(t, row, eng) for t, row in ROWS if row.grad for eng in ENGINES]


@pytest.mark.parametrize(
    "table,row,engine", GRAD_CASES, ids=[f"{t}-{r.name}-{e}" for t, r, e in GRAD_CASES]
)
def test_gradients_on_edge_cases_by_finite_differences(table, row, engine):
    for edge in GRAD_EDGES:
        values = _edge_values(row, edge, "float64")
        try:
            row.ref(*[_canonical(v) for v in values])
        except IndexError:  # a row reading fixed places of a 4 x 5 matrix
            continue
        rng = np.random.default_rng(3)
        verify_grad_sparse(
            row.build, values, structured=row.structured, rng=rng, mode=ENGINES[engine]
        )


@pytest.mark.parametrize("engine", list(ENGINES))
def test_two_lists_broadcast_as_numpys_and_may_be_empty(engine):
    # x[[1], [0, 2, 3]] has 3 entries (numpy's broadcast): its inferred shape said 1 and
    # its gradient raised; x[[], [1]] raised (scipy answers a sparse matrix there).
    x, a, b = S.csr_matrix("x", dtype="float64"), tt.lvector("a"), tt.lvector("b")
    y = x[a, b]
    g = tt.grad((y * y).sum(), x)
    f = theano_dag.function([x, a, b], [y, y.shape, g], mode=ENGINES[engine])
    value = sp.csr_matrix(np.arange(12.0).reshape(3, 4))
    dense = value.toarray()
    for rows, cols in [([1], [0, 2, 3]), ([0, 1, 2], [3]), ([], [1]), ([1], []), ([], [])]:
        rows, cols = np.array(rows, "int64"), np.array(cols, "int64")
        got, shape, grad = f(value, rows, cols)
        want = dense[rows, cols]
        np.testing.assert_array_equal(got, want)
        assert tuple(shape) == want.shape
        want_grad = np.zeros((3, 4))
        np.add.at(want_grad, tuple(np.broadcast_arrays(rows, cols)), 2 * want)
        np.testing.assert_array_equal(grad.toarray(), want_grad)
    with pytest.raises(IndexError, match="could not be broadcast together"):
        f(value, np.array([0, 1]), np.array([1, 2, 3]))


@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_sparse_array_input_gives_matrices_as_every_other_input(engine):
    # A csr_array went through the type unchanged: transpose, neg, sums of two matrices,
    # slices, joins... answered csr_array / csc_array (whose * is elementwise), the
    # other ops a matrix.
    x = S.csr_matrix("x", dtype="float64")
    outs = [S.transpose(x), -x, x + x, x[0:1], S.hstack([x, x]), S.structured_exp(x)]
    value = sp.csr_array(np.array([[0.0, 2.0], [3.0, 0.0]]))
    for got in run([x], outs, [value], ENGINES[engine]):
        assert isinstance(got, sp.spmatrix), type(got)
    assert np.shares_memory(S.csr_matrix().type.filter(value).data, value.data)  # no copy


@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_dense_operand_broadcasts_only_along_an_axis_declared_so(engine):
    # x * b and x + b took a (2, 1) value of a dmatrix b as a column to broadcast, while
    # b's gradient (b's type has no broadcastable axis) came back (2, 3); the dense
    # elementwise ops refuse that value. A declared column broadcasts, its gradient summed.
    x, b = S.csr_matrix("x", dtype="float64"), tt.dmatrix("b")
    col = tt.TensorType("float64", shape=(None, 1))("col")
    value = sp.csr_matrix(np.array([[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]]))
    column = np.array([[7.0], [8.0]])
    for out in (S.mul(x, b), x + b):
        f = theano_dag.function([x, b], out, mode=ENGINES[engine])
        with pytest.raises(ValueError, match="broadcasts along an axis of length 1 only"):
            f(value, column)
    prod, total = S.mul(x, col), x + col
    outs = [prod, total, tt.grad(S.sp_sum(prod), col), tt.grad(total.sum(), col)]
    got = run([x, col], outs, [value, column], ENGINES[engine])
    np.testing.assert_array_equal(got[0].toarray(), value.multiply(column).toarray())
    np.testing.assert_array_equal(got[1], value.toarray() + column)
    np.testing.assert_array_equal(got[2], value.sum(axis=1))
    np.testing.assert_array_equal(got[3], [[3.0], [3.0]])


@pytest.mark.parametrize("engine", list(ENGINES))
def test_canonical_parts_sum_a_place_stored_twice_and_pass_its_gradient(engine):
    d = tt.dvector("d")
    parts = S.CanonicalParts("csr")(d, np.array([2, 0, 2]), np.array([0, 3, 3]), [2, 3])
    data = np.array([1.0, 2.0, 3.0])
    got = run([d], list(parts), [data], ENGINES[engine])
    for g, want in zip(got, [[2.0, 4.0], [0, 2], [0, 2, 2], [2, 3]]):
        np.testing.assert_array_equal(g, want)
    # Each stored value's gradient is its place's: d/d data of sum(w * canonical data).
    w = np.array([10.0, 100.0])
    (grad,) = run([d], [tt.grad((parts[0] * w).sum(), d)], [data], ENGINES[engine])
    np.testing.assert_array_equal(grad, [100.0, 10.0, 100.0])
    verify_grad(
        lambda v: S.CanonicalParts("csc")(v, [1, 1, 0], [0, 2, 3], [2, 2])[0] ** 2,
        [data],
        rng=np.random.default_rng(0),
        mode=ENGINES[engine],
    )
