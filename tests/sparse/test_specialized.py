"""The ops on a matrix's parts under the names of Theano's C specialisations (MulSDCSC,
MulSDCSR, MulSVCSR, StructuredAddSVCSR, SamplingDotCSR) and the rewrites that make them:
values against scipy (float32 and float64, every engine), infer_shape, gradients by
finite differences, the rewritten graphs' structure."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_helpers import CPU, ENGINES, FLOATS, REF, Row, as_dense, inferred_shapes, run, sp

import theano_dag
import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.gradient.verify import verify_grad, verify_grad_sparse
from theano_dag.sparse import opt
from theano_dag.sparse.specialized import (
    mul_s_d_csc,
    mul_s_d_csr,
    mul_s_v_csr,
    sampling_dot_csr,
    structured_add_s_v_csr,
)


def _on_parts(op, x, dense, with_shape=True):
    """``CSx(op(parts of x, dense[, shape]), indices, indptr, shape)``."""
    data, indices, indptr, shape = S.csm_properties(x)
    extra = [shape] if with_shape else []
    return S.CSM(x.type.format)(op(data, indices, indptr, dense, *extra), indices, indptr, shape)


def _sampled(x, y, p):
    data, indices, indptr, shape = S.csm_properties(p)
    z_data, z_ind, z_ptr = sampling_dot_csr(x, y, data, indices, indptr, shape[1])
    return S.CSR(z_data, z_ind, z_ptr, shape)


def _sampling_ref(x, y, p):
    return p.multiply(x @ y.T).tocsr()


TABLE = [
    Row(
        "mul_s_d_csr",
        lambda x, b: _on_parts(mul_s_d_csr, x, b),
        lambda x, b: x.multiply(b).tocsr(),
        ["csr", "dense"],
        structured=True,
        parts=True,
    ),
    Row(
        "mul_s_d_csc",
        lambda x, b: _on_parts(mul_s_d_csc, x, b),
        lambda x, b: x.multiply(b).tocsc(),
        ["csc", "dense"],
        structured=True,
        parts=True,
    ),
    Row(
        "mul_s_d_csc_theano_signature",
        lambda x, b: _on_parts(mul_s_d_csc, x, b, with_shape=False),
        lambda x, b: x.multiply(b).tocsc(),
        ["csc", "dense"],
        structured=True,
        parts=True,
    ),
    Row(
        "mul_s_d_csr_broadcast_row",
        lambda x, v: _on_parts(mul_s_d_csr, x, v.dimshuffle("x", 0)),
        lambda x, v: x.multiply(v[None, :]).tocsr(),
        ["csr", "row"],
        structured=True,
        parts=True,
    ),
    Row(
        "mul_s_v_csr",
        lambda x, v: _on_parts(mul_s_v_csr, x, v),
        lambda x, v: x.multiply(v[None, :]).tocsr(),
        ["csr", "row"],
        structured=True,
        parts=True,
    ),
    Row(
        "mul_s_v_csr_theano_signature",
        lambda x, v: _on_parts(mul_s_v_csr, x, v, with_shape=False),
        lambda x, v: x.multiply(v[None, :]).tocsr(),
        ["csr", "row"],
        structured=True,
        parts=True,
    ),
    Row(
        "structured_add_s_v_csr",
        lambda x, v: _on_parts(structured_add_s_v_csr, x, v),
        lambda x, v: sp.csr_matrix((x.data + v[x.indices], x.indices, x.indptr), shape=x.shape),
        ["csr", "row"],
        structured=True,
        parts=True,
    ),
    Row(
        "sampling_dot_csr",
        _sampled,
        _sampling_ref,
        ["out", "right_t", "csr"],
        structured=True,
        parts=True,
    ),
]
CASES = [(row, dt, eng) for row in TABLE for dt in FLOATS for eng in ENGINES]


def _values(row, rng, dtype):
    """The row's values; ``right_t`` is a 5 x 3 matrix (``y`` of ``sampling_dot``)."""
    kinds = row.kinds
    out = Row(row.name, row.build, row.ref, ["right" if k == "right_t" else k for k in kinds])
    return out.values(rng, dtype)


def _tolerance(dtype):
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("row,dtype,engine", CASES, ids=[f"{r.name}-{d}-{e}" for r, d, e in CASES])
def test_value_against_scipy(row, dtype, engine):
    values = _values(row, np.random.default_rng(31), dtype)
    syms = row.variables(values)
    out = row.build(*syms)
    copies = [v.copy() for v in values]
    (got,) = run(syms, [out], values, ENGINES[engine])
    want = row.ref(*copies)
    assert sp.issparse(got) and got.format == out.type.format and got.dtype == dtype
    assert got.shape == want.shape
    np.testing.assert_allclose(as_dense(got), as_dense(want), **_tolerance(dtype))
    for v, c in zip(values, copies):  # inputs are never changed
        np.testing.assert_array_equal(as_dense(v), as_dense(c))


@pytest.mark.parametrize("row", TABLE, ids=[r.name for r in TABLE])
def test_infer_shape_is_the_real_shape(row):
    values = _values(row, np.random.default_rng(3), "float64")
    syms = row.variables(values)
    out = row.build(*syms)
    data_node = out.owner.inputs[0].owner  # the op on the parts
    got = run(syms, data_node.outputs, values, REF)
    assert inferred_shapes(data_node, syms, values) == [np.shape(g) for g in got]


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("row", TABLE, ids=[r.name for r in TABLE])
def test_gradient_by_finite_differences(row, engine):
    rng = np.random.default_rng(17)
    values = _values(row, rng, "float64")
    verify_grad_sparse(row.build, values, structured=row.structured, rng=rng, mode=ENGINES[engine])


@pytest.mark.parametrize("engine", list(ENGINES))
def test_gradient_of_the_data_vector_itself(engine):
    # The ops' inputs are dense vectors: the plain checker on each op alone.
    rng = np.random.default_rng(5)
    ind, ptr = np.array([1, 3, 0, 2], "int32"), np.array([0, 2, 2, 4], "int32")
    shape = np.array([3, 4], "int32")
    data = rng.uniform(0.5, 2, 4)
    mode = ENGINES[engine]
    b, v = rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, 4)
    verify_grad(lambda d, m: mul_s_d_csr(d, ind, ptr, m, shape), [data, b], rng=rng, mode=mode)
    verify_grad(lambda d, m: mul_s_d_csc(d, ind, ptr, m.T), [data, b], rng=rng, mode=mode)
    verify_grad(lambda d, w: mul_s_v_csr(d, ind, ptr, w), [data, v], rng=rng, mode=mode)
    verify_grad(lambda d, w: structured_add_s_v_csr(d, ind, ptr, w), [data, v], rng=rng, mode=mode)
    x, y = rng.uniform(-2, 2, (3, 2)), rng.uniform(-2, 2, (4, 2))
    verify_grad(
        lambda a, c, d: sampling_dot_csr(a, c, d, ind, ptr, 4)[0], [x, y, data], rng=rng, mode=mode
    )


def test_a_dense_operand_of_another_shape_is_an_error():
    d, b, v = tt.dvector("d"), tt.dmatrix("b"), tt.dvector("v")
    ind, ptr = np.array([1, 0], "int32"), np.array([0, 1, 2], "int32")
    f = theano_dag.function([d, b], mul_s_d_csr(d, ind, ptr, b, [2, 2]), mode=REF)
    np.testing.assert_array_equal(f([2.0, 3.0], np.arange(4.0).reshape(2, 2)), [2.0, 6.0])
    with pytest.raises(ValueError, match=r"MulSDCSR: a dense operand of shape \(3, 3\)"):
        f([2.0, 3.0], np.ones((3, 3)))
    g = theano_dag.function([d, v], mul_s_v_csr(d, ind, ptr, v, [2, 2]), mode=REF)
    with pytest.raises(ValueError, match="MulSVCSR: a vector of 3 entries"):
        g([2.0, 3.0], np.ones(3))
    with pytest.raises(ValueError, match="an indptr of 3 entries for a csr matrix of shape"):
        theano_dag.function([d, b], mul_s_d_csr(d, ind, ptr, b, [3, 2]), mode=REF)(
            [2.0, 3.0], np.ones((3, 2))
        )
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    h = theano_dag.function([x, y, d], sampling_dot_csr(x, y, d, ind, ptr, 2)[0], mode=REF)
    with pytest.raises(ValueError, match="SamplingDotCSR: shapes x"):
        h(np.ones((2, 3)), np.ones((3, 3)), [1.0, 1.0])


def test_the_ops_refuse_operands_of_the_wrong_kind():
    d = tt.dvector("d")
    with pytest.raises(TypeError, match="MulSDCSR: the dense operand must be a matrix"):
        mul_s_d_csr(d, [0], [0, 1], tt.dvector("v"))
    with pytest.raises(TypeError, match="MulSVCSR: the dense operand must be a vector"):
        mul_s_v_csr(d, [0], [0, 1], tt.dmatrix("m"))
    with pytest.raises(TypeError, match="indices must be a vector of integers"):
        mul_s_v_csr(d, tt.dvector("i"), [0, 1], tt.dvector("v"))


# -- the rewrites ------------------------------------------------------------------------


def _ops(outputs, inputs, mode):
    f = theano_dag.function(inputs, outputs, mode=mode)
    return f, [type(n.op).__name__ for n in f.maker.fgraph.toposort()]


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("format", ["csr", "csc"])
def test_mul_s_d_by_a_matrix_becomes_mul_s_d_csx(format, engine):
    x, b = S.matrix(format, "x", dtype="float32"), tt.dmatrix("b")
    y = S.mul_s_d(x, b)
    mode = Mode(linker="py", optimizer="fast_run") if engine == "py" else ENGINES[engine]
    f, ops = _ops(y, [x, b], mode)
    name = "MulSDCSR" if format == "csr" else "MulSDCSC"
    assert name in ops and "MulSD" not in ops, ops
    _, before = _ops(y, [x, b], CPU.excluding("local_mul_s_d"))
    assert "MulSD" in before and name not in before
    rng = np.random.default_rng(2)
    xv = sp.random(4, 5, density=0.5, format=format, dtype="float32", random_state=3)
    bv = rng.standard_normal((4, 5))
    got = f(xv, bv)
    assert got.format == format and got.dtype == "float64"
    np.testing.assert_allclose(got.toarray(), xv.multiply(bv).toarray(), rtol=1e-7)


def test_mul_s_v_and_structured_add_s_v_of_csr_become_the_csr_ops():
    x, v = S.csr_matrix("x", dtype="float64"), tt.dvector("v")
    rng = np.random.default_rng(4)
    xv, vv = sp.random(4, 5, density=0.5, format="csr", random_state=5), rng.standard_normal(5)
    for build, name, rewrite, ref in [
        (S.mul_s_v, "MulSVCSR", "local_mul_s_v", xv.multiply(vv[None, :]).toarray()),
        (
            S.structured_add_s_v,
            "StructuredAddSVCSR",
            "local_structured_add_s_v",
            sp.csr_matrix(
                (xv.data + vv[xv.indices], xv.indices, xv.indptr), shape=(4, 5)
            ).toarray(),
        ),
    ]:
        f, ops = _ops(build(x, v), [x, v], CPU)
        assert ops == ["CSMProperties", name, "CSM"], ops
        _, before = _ops(build(x, v), [x, v], CPU.excluding(rewrite))
        assert name not in before
        np.testing.assert_allclose(f(xv, vv).toarray(), ref, rtol=1e-14)
    # Theano has no CSC form of them: a CSC matrix keeps the general op.
    w = tt.dvector("w")
    _, ops = _ops(S.mul_s_v(S.transpose(x), w), [x, w], CPU)
    assert "MulSV" in ops and "MulSVCSR" not in ops


def test_a_chain_of_row_vector_ops_shares_one_pattern():
    x, v, w = S.csr_matrix("x", dtype="float64"), tt.dvector("v"), tt.dvector("w")
    y = S.structured_add_s_v(S.mul_s_v(x, v), w)
    f, ops = _ops(y, [x, v, w], CPU)
    # The shape read from x goes through unchanged (no SpecifyShape of a known length).
    assert ops == ["CSMProperties", "MulSVCSR", "StructuredAddSVCSR", "CSM"], ops
    xv = sp.random(4, 5, density=0.5, format="csr", random_state=6)
    vv, wv = np.arange(5.0), np.ones(5)
    want = xv.multiply(vv[None, :]).tocsr()
    want.data += 1.0
    np.testing.assert_allclose(f(xv, vv, wv).toarray(), want.toarray(), rtol=1e-14)


@pytest.mark.parametrize("ldflags", ["", "-lblas"])
def test_sampling_dot_csr_is_made_when_blas_flags_are_set_as_in_theano(ldflags):
    x, y, p = tt.dmatrix("x"), tt.dmatrix("y"), S.csr_matrix("p", dtype="float64")
    with config.change_flags(blas__ldflags=ldflags):
        f, ops = _ops(S.sampling_dot(x, y, p), [x, y, p], CPU)
    assert ("SamplingDotCSR" in ops) == bool(ldflags), ops
    assert ("SamplingDot" in ops) != bool(ldflags), ops
    rng = np.random.default_rng(7)
    xv, yv = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    pv = sp.random(4, 5, density=0.5, format="csr", random_state=8)
    np.testing.assert_allclose(f(xv, yv, pv).toarray(), _sampling_ref(xv, yv, pv).toarray())


def test_gradients_through_the_rewritten_graph_match_the_general_ops():
    x, b, v = S.csr_matrix("x", dtype="float64"), tt.dmatrix("b"), tt.dvector("v")
    cost = S.sp_sum(S.sqr(S.structured_add_s_v(S.mul_s_d(x, b), v)), sparse_grad=True)
    outs = [cost, *theano_dag.grad(cost, [x, b, v])]
    xv = sp.random(4, 5, density=0.5, format="csr", random_state=9)
    rng = np.random.default_rng(10)
    vals = [xv, rng.standard_normal((4, 5)), rng.standard_normal(5)]
    _, ops = _ops(outs, [x, b, v], CPU)
    assert "MulSDCSR" in ops and "StructuredAddSVCSR" in ops, ops
    got, want = run([x, b, v], outs, vals, CPU), run([x, b, v], outs, vals, REF)
    for g, w in zip(got, want):
        np.testing.assert_allclose(as_dense(g), as_dense(w), rtol=1e-12)


def test_theanos_paths_hold_the_ops():
    for name in ("MulSDCSC", "MulSDCSR", "MulSVCSR", "StructuredAddSVCSR", "SamplingDotCSR"):
        assert name in opt.__all__ and getattr(opt, name).__name__ == name
    assert opt.mul_s_d_csr is mul_s_d_csr and opt.sampling_dot_csr is sampling_dot_csr
