"""SparseType, sparse variables and constants, shared sparse matrices, and what a user
without scipy gets."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest
from sparse_helpers import CPU, REF, run, sp

import theano_dag
import theano_dag.tensor as tt
from theano_dag import sparse as S

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_format_and_dtype_are_the_type():
    x = S.csr_matrix("x", dtype="float32")
    assert x.type == S.SparseType("csr", "float32") == S.csr_fmatrix
    assert x.type != S.csc_fmatrix and x.type != S.csr_dmatrix
    assert (x.format, x.dtype, x.ndim) == ("csr", "float32", 2)
    assert S.csc_matrix("y").dtype == theano_dag.config.floatX
    with pytest.raises(NotImplementedError, match="format 'coo' is not supported"):
        S.SparseType("coo", "float64")


def test_filter_strict_and_converting():
    t = S.SparseType("csr", "float64")
    m = sp.csr_matrix(np.eye(3))
    assert t.filter(m, strict=True) is m
    with pytest.raises(TypeError, match="expected a csr matrix of dtype float64, got a csc"):
        t.filter(m.tocsc(), strict=True)
    converted = t.filter(m.tocsc())
    assert converted.format == "csr" and (converted != m).nnz == 0
    assert t.filter(sp.csr_matrix(np.eye(2, dtype="float32"))).dtype == "float64"
    with pytest.raises(TypeError, match="without risking loss of precision"):
        S.SparseType("csr", "float32").filter(m)
    assert S.SparseType("csr", "float32").filter(m, allow_downcast=True).dtype == "float32"
    with pytest.raises(TypeError, match="expected a scipy.sparse matrix"):
        t.filter([1.0, 2.0])


def test_a_function_refuses_an_input_of_the_wrong_format():
    x = S.csr_matrix("x", dtype="float64")
    f = theano_dag.function([x], S.sp_sum(x), mode=REF)
    np.testing.assert_allclose(f(sp.csc_matrix(np.eye(2))), 2.0)  # converted, as Theano
    with pytest.raises(TypeError, match="dtype"):
        f(sp.csr_matrix(np.eye(2, dtype="complex128")))


def test_values_eq_approx_and_may_share_memory():
    t = S.csr_dmatrix
    a = sp.csr_matrix(np.array([[0.0, 1.0], [2.0, 0.0]]))
    b = a.copy()
    b.data[0] += 1e-12
    assert t.values_eq_approx(a, b) and not t.values_eq(a, b) and t.values_eq(a, a.copy())
    assert not t.values_eq_approx(a, a * 2)
    assert t.may_share_memory(a, a.data) and not t.may_share_memory(a, a.copy())


def test_as_sparse_variable_and_constants():
    m = sp.csc_matrix(np.array([[0.0, 3.0], [4.0, 0.0]]))
    c = S.as_sparse_variable(m)
    assert isinstance(c, S.SparseConstant) and c.type == S.csc_dmatrix
    assert c.equals(S.as_sparse_variable(m.copy()))
    assert not c.equals(S.as_sparse_variable(m * 2))
    x = S.csr_matrix("x")
    assert S.as_sparse_variable(x) is x
    with pytest.raises(TypeError, match="not a sparse type"):
        S.as_sparse_variable(tt.dmatrix("d"))
    with pytest.raises(tt.AsTensorError):
        tt.as_tensor_variable(x)  # never densified behind the user's back
    got = run([], [S.dense_from_sparse(c)], [], REF)[0]
    np.testing.assert_array_equal(got, m.toarray())


def test_shape_of_a_sparse_variable_needs_no_dense_copy():
    x = S.csr_matrix("x", dtype="float64")
    f = theano_dag.function([x], x.shape, mode=CPU)
    np.testing.assert_array_equal(f(sp.csr_matrix((7, 3))), [7, 3])
    assert not any(isinstance(n.op, S.DenseFromSparse) for n in f.maker.fgraph.apply_nodes)


@pytest.mark.parametrize("mode", [REF, CPU], ids=["py", "cpu"])
def test_shared_sparse_matrix_with_a_gradient_update(mode):
    value = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    w = theano_dag.shared(value, name="w")
    assert isinstance(w, S.SparseTensorSharedVariable) and w.type == S.csr_dmatrix
    value.data[:] = 0  # shared() copied it
    b = tt.dmatrix("b")
    cost = tt.sqr(S.structured_dot(w, b)).sum()
    gw = tt.grad(cost, w)
    step = theano_dag.function([b], cost, updates=[(w, w - gw * 0.01)], mode=mode)
    bv = np.array([[1.0], [2.0]])
    w0 = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    np.testing.assert_allclose(step(bv), ((w0 @ bv) ** 2).sum())
    new = w.get_value()
    assert sp.issparse(new) and new.format == "csr"
    want = w0.toarray() - 0.01 * (w0.toarray() != 0) * (2 * (w0 @ bv) @ bv.T)
    np.testing.assert_allclose(new.toarray(), want, rtol=1e-14)
    assert S.shared is S.sparse_constructor


def test_import_takes_no_scipy_and_sparse_without_scipy_names_the_extra():
    code = (
        "import sys; sys.modules['scipy'] = None\n"
        "import theano_dag, theano_dag.sparse as S\n"
        "print(S.enable_sparse)\n"
        "try:\n"
        "    S.csr_matrix('x')\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    flag, message = out.stdout.strip().splitlines()
    assert flag == "False"
    assert "scipy is not installed" in message and "pip install 'theano_dag[scipy]'" in message
