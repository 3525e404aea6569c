"""The rewrites of sparse graphs: the rewritten graph's structure (with the rewrite and
without it) and its values against scipy, on every engine."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_helpers import CPU, ENGINES, random_sparse, run, sp

import theano_dag
import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.compile.mode import Mode
from theano_dag.misc.may_share_memory import may_share_memory
from theano_dag.opt.optdb import optdb
from theano_dag.sparse.opt import AddSD_ccode


def _ops(outputs, inputs, mode):
    f = theano_dag.function(inputs, outputs, mode=mode, on_unused_input="ignore")
    return f, [type(n.op).__name__ for n in f.maker.fgraph.toposort()]


def test_the_rewrites_are_in_the_optdb_with_the_sparse_tag():
    assert "local_csm_properties_csm" in optdb["canonicalize"]
    for name in ("local_csm_properties_csm", "local_mul_s_d", "local_usmm"):
        assert name in optdb["specialize"]
    # Excluding the tag leaves the sparse graph as built.
    x, v = S.csr_matrix("x", dtype="float64"), tt.dvector("v")
    _, ops = _ops(S.mul(x, v), [x, v], CPU.excluding("sparse"))
    assert "MulSD" in ops and "MulSV" not in ops


@pytest.mark.parametrize("engine", list(ENGINES))
def test_csm_properties_of_csm_reads_the_parts_back(engine):
    x = S.csc_matrix("x", dtype="float64")
    y = S.structured_exp(S.structured_sigmoid(x))
    mode = ENGINES[engine]
    if engine == "py":
        mode = Mode(linker="py", optimizer="fast_run")
    f, ops = _ops(y, [x], mode)
    assert ops.count("CSM") == 1 and ops.count("CSMProperties") == 1, ops
    _, before = _ops(y, [x], mode.excluding("local_csm_properties_csm"))
    assert before.count("CSM") == 2 and before.count("CSMProperties") == 2, before
    value = random_sparse(np.random.default_rng(0), "csc", "float64")
    got = f(value)
    want = value.copy()
    want.data = np.exp(1 / (1 + np.exp(-value.data)))
    assert got.format == "csc"
    np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=1e-14)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mul_s_d_by_a_broadcast_row_becomes_mul_s_v(dtype):
    x, v = S.csr_matrix("x", dtype=dtype), tt.vector("v", dtype=dtype)
    y = S.mul(x, v)  # a vector multiplies each row: mul_s_d(x, v[None, :])
    f, ops = _ops(y, [x, v], CPU.excluding("local_mul_s_v"))
    assert ops == ["MulSV"], ops
    _, before = _ops(y, [x, v], CPU.excluding("local_mul_s_d"))
    assert "MulSD" in before and "MulSV" not in before
    rng = np.random.default_rng(1)
    xv = random_sparse(rng, "csr", dtype)
    vv = rng.standard_normal(5).astype(dtype)
    got = f(xv, vv)
    assert got.dtype == dtype and got.format == "csr"
    np.testing.assert_allclose(got.toarray(), xv.multiply(vv[None, :]).toarray(), rtol=1e-6)
    # A column broadcast (each row scaled) is left alone.
    _, col = _ops(S.mul_s_d(x, v.dimshuffle(0, "x")), [x, v], CPU)
    assert "MulSV" not in col


def _usmm_case(build, engine, dtype="float64"):
    a, z, b = tt.scalar("a", dtype=dtype), tt.matrix("z", dtype=dtype), tt.matrix("b", dtype=dtype)
    x = S.csr_matrix("x", dtype=dtype)
    out = build(a, x, b, z)
    mode = ENGINES[engine]
    f, ops = _ops(out, [a, x, b, z], mode)
    rng = np.random.default_rng(2)
    xv = random_sparse(rng, "csr", dtype)
    bv, zv = rng.standard_normal((5, 3)).astype(dtype), rng.standard_normal((4, 3)).astype(dtype)
    return f, ops, (np.asarray(1.5, dtype=dtype), xv, bv, zv)


USMM_CASES = {
    "z + a*dot": (lambda a, x, b, z: z + a * S.dot(x, b), lambda a, x, b, z: z + a * (x @ b)),
    "a*structured_dot + z": (
        lambda a, x, b, z: a * S.structured_dot(x, b) + z,
        lambda a, x, b, z: a * (x @ b) + z,
    ),
    "z - a*dot": (lambda a, x, b, z: z - a * S.dot(x, b), lambda a, x, b, z: z - a * (x @ b)),
    "z + dot": (lambda a, x, b, z: z + S.dot(x, b), lambda a, x, b, z: z + x @ b),
}


@pytest.mark.parametrize("engine", ["cpu"] + (["opencl"] if "opencl" in ENGINES else []))
@pytest.mark.parametrize("case", list(USMM_CASES))
def test_scaled_sparse_product_plus_a_matrix_becomes_usmm(case, engine):
    build, ref = USMM_CASES[case]
    f, ops, values = _usmm_case(build, engine)
    assert "Usmm" in ops and "Dot" not in ops and "StructuredDot" not in ops, ops
    np.testing.assert_allclose(f(*values), ref(*values), rtol=1e-12)


def test_usmm_is_left_out_when_the_product_is_used_twice():
    def build(a, x, b, z):
        d = S.dot(x, b)
        return [z + a * d, d]

    f, ops, values = _usmm_case(build, "cpu")
    assert "Usmm" not in ops
    got = f(*values)
    a, x, b, z = values
    np.testing.assert_allclose(got[0], z + a * (x @ b), rtol=1e-12)


def test_usmm_keeps_float32():
    build, ref = USMM_CASES["z + a*dot"]
    f, ops, values = _usmm_case(build, "cpu", dtype="float32")
    assert "Usmm" in ops
    got = f(*values)
    assert got.dtype == "float32"
    np.testing.assert_allclose(got, ref(*values), rtol=1e-5)


def test_usmm_gradient_matches_the_unfused_graph():
    a, b, z = tt.dscalar("a"), tt.dmatrix("b"), tt.dmatrix("z")
    x = S.csr_matrix("x", dtype="float64")
    cost = tt.sqr(S.usmm(a, x, b, z)).sum()
    ref_cost = tt.sqr(z + a * S.dot(x, b)).sum()
    rng = np.random.default_rng(3)
    values = [np.asarray(0.7), random_sparse(rng, "csr", "float64"), rng.standard_normal((5, 3))]
    values.append(rng.standard_normal((4, 3)))
    got = run([a, x, b, z], tt.grad(cost, [a, x, b, z]), values, CPU)
    want = run([a, x, b, z], tt.grad(ref_cost, [a, x, b, z]), values, CPU.excluding("local_usmm"))
    for g, w in zip(got, want):
        g, w = (v.toarray() if sp.issparse(v) else v for v in (g, w))
        np.testing.assert_allclose(g, w, rtol=1e-12)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_the_shape_of_a_sparse_result_is_its_ops_infer_shape(engine):
    x, b = S.csr_matrix("x", dtype="float64"), tt.dmatrix("b")
    y = S.true_dot(S.hstack([x, -x]), b)
    mode = ENGINES[engine] if engine != "py" else Mode(linker="py", optimizer="fast_run")
    f, ops = _ops(y.shape, [x, b], mode)
    # Neither the product nor the join runs: the lengths come from the inputs.
    assert "TrueDot" not in ops and "HStack" not in ops and "Neg" not in ops, ops
    _, before = _ops(y.shape, [x, b], mode.excluding("local_sparse_shape"))
    assert "TrueDot" in before
    xv = random_sparse(np.random.default_rng(4), "csr", "float64")
    np.testing.assert_array_equal(f(xv, np.ones((10, 7))), [4, 7])


def test_remove0_overwrites_an_input_nothing_else_needs():
    x = S.csr_matrix("x", dtype="float64")
    f = theano_dag.function([theano_dag.In(x, mutable=True)], S.remove0(x * 2.0), mode=CPU)
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, S.Remove0)]
    assert node.op.inplace and node.op.destroy_map == {0: [0]}
    value = sp.csr_matrix((np.array([1.0, 0.0, 3.0]), np.array([0, 1, 0]), np.array([0, 2, 3])))
    got = f(value)
    assert got.nnz == 2
    np.testing.assert_array_equal(got.toarray(), 2 * value.toarray())
    # A caller's input is not overwritten unless declared mutable.
    g = theano_dag.function([x], S.remove0(x), mode=CPU)
    assert not any(getattr(n.op, "inplace", False) for n in g.maker.fgraph.toposort())
    g(value)
    assert value.nnz == 3


def test_the_shape_of_a_sparse_input_is_its_two_lengths():
    x = S.csc_matrix("x", dtype="float32")
    f, ops = _ops(x.shape, [x], CPU)
    assert ops == ["Shape_i", "Shape_i", "MakeVector"], ops
    g, ops_1 = _ops(x.shape[1], [x], CPU)
    assert ops_1 == ["Shape_i"], ops_1
    value = sp.csc_matrix(np.ones((3, 7), dtype="float32"))
    np.testing.assert_array_equal(f(value), [3, 7])
    assert g(value) == 7


def test_a_dense_matrix_made_sparse_and_back_is_the_matrix():
    m = tt.dmatrix("m")
    for to_sparse in (S.csr_from_dense, S.csc_from_dense):
        out = S.dense_from_sparse(to_sparse(m))
        f, ops = _ops(out, [m], CPU)
        assert "SparseFromDense" not in ops and "DenseFromSparse" not in ops, ops
        _, before = _ops(out, [m], CPU.excluding("local_dense_from_sparse_sparse_from_dense"))
        assert "SparseFromDense" in before
        value = np.array([[0.0, 2.0], [3.0, 0.0]])
        np.testing.assert_array_equal(f(value), value)


def test_may_share_memory_compares_the_stored_arrays():
    a = sp.csr_matrix(np.eye(3))
    b = a.copy()
    assert may_share_memory(a, a) and not may_share_memory(a, b)
    assert may_share_memory(a, a.data) and may_share_memory(a.T, a)
    assert S.SparseType.may_share_memory(a, a) and not S.SparseType.may_share_memory(a, b)


def test_specify_shape_of_a_sparse_matrix_checks_and_tells_its_shape():
    x = S.csr_matrix("x", dtype="float64")
    y = tt.specify_shape(x, (3, 2))
    assert y.type == x.type
    f, ops = _ops([y, y.shape], [x], CPU)
    value = sp.csr_matrix(np.ones((3, 2)))
    got, shape = f(value)
    np.testing.assert_array_equal(got.toarray(), value.toarray())
    np.testing.assert_array_equal(shape, [3, 2])
    with pytest.raises(Exception, match="expected shape"):
        f(sp.csr_matrix(np.ones((2, 2))))


def test_theano_add_sd_ccode_name_adds():
    x, y = S.csc_matrix("x", dtype="float64"), tt.dmatrix("y")
    xv = random_sparse(np.random.default_rng(5), "csc", "float64")
    yv = np.ones((4, 5))
    (got,) = run([x, y], [AddSD_ccode("csc")(x, y)], [xv, yv], CPU)
    np.testing.assert_allclose(got, xv.toarray() + 1)
