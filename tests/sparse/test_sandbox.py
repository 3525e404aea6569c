"""Theano's sparse sampling ops (``sparse.sandbox.sp2``): the kind, shape and pattern of
their draws, draws that are certain, and means over many draws."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_helpers import ENGINES, run, sp

import theano_dag
import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.sparse.sandbox.sp2 import Binomial, multinomial, poisson


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("format", ["csr", "csc"])
def test_poisson_draws_on_the_stored_entries(format, engine):
    x = S.matrix(format, "x", dtype="float64")
    value = sp.csr_matrix(np.array([[0.0, 400.0, 0.0], [9.0, 0.0, 0.0]])).asformat(format)
    np.random.seed(0)
    (got,) = run([x], [poisson(x)], [value], ENGINES[engine])
    assert got.format == format and got.dtype == "float64"
    np.testing.assert_array_equal(got.indices, value.indices)
    np.testing.assert_array_equal(got.data, np.floor(got.data))
    assert abs(got[0, 1] - 400) < 5 * np.sqrt(400)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("format", ["csr", "csc"])
def test_binomial_shape_kind_and_certain_draws(format, dtype):
    n, p, shape = tt.lscalar("n"), tt.dscalar("p"), tt.lvector("shape")
    out = Binomial(format, dtype)(n, p, shape)
    got = run([n, p, shape], [out], [5, 1.0, np.array([3, 4])], ENGINES["cpu"])[0]
    assert got.format == format and got.dtype == dtype and got.shape == (3, 4)
    np.testing.assert_array_equal(got.toarray(), np.full((3, 4), 5.0))
    (none,) = run([n, p, shape], [out], [5, 0.0, np.array([2, 2])], ENGINES["cpu"])
    assert none.nnz == 0


def test_multinomial_puts_all_trials_where_the_probability_is_one():
    p, n = S.csr_matrix("p", dtype="float64"), tt.lvector("n")
    probs = sp.csr_matrix(np.array([[0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    np.random.seed(1)
    (got,) = run([p, n], [multinomial(n, p)], [probs, np.array([6, 2, 3])], ENGINES["cpu"])
    np.testing.assert_array_equal(got.toarray()[1:], [[0, 2, 0], [3, 0, 0]])
    assert got[0].sum() == 6 and got[0, 0] == 0


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("format", ["csr", "csc"])
def test_draws_on_empty_matrices_and_a_place_stored_twice(format, engine):
    # The edge cases of test_edge_cases.py for the draws: the result is a valid matrix of
    # the input's shape, format and dtype; the input is left as it was.
    x = S.matrix(format, "x", dtype="float32")
    f = theano_dag.function([x], poisson(x), mode=ENGINES[engine])
    twice = sp.csr_matrix(
        (np.array([3.0, 4.0], "float32"), np.array([1, 1]), np.array([0, 2, 2])), shape=(2, 2)
    )
    for value in [
        sp.csr_matrix((0, 5), dtype="float32"),
        sp.csr_matrix((3, 4), dtype="float32"),
        twice,
    ]:
        value = value.asformat(format)
        before = value.data.copy(), value.indices.copy()
        got = f(value)
        got.check_format(full_check=True)
        assert (got.format, got.dtype, got.shape) == (format, "float32", value.shape)
        np.testing.assert_array_equal(value.data, before[0])
        np.testing.assert_array_equal(value.indices, before[1])
    n, p, shape = tt.lscalar("n"), tt.dscalar("p"), tt.lvector("shape")
    g = theano_dag.function([n, p, shape], Binomial("csc", "float32")(n, p, shape))
    for s in [(0, 5), (5, 0), (1, 1)]:
        got = g(3, 0.5, np.array(s))
        assert (got.format, got.dtype, got.shape) == ("csc", "float32", s)
    probs, trials = S.csr_matrix("p", dtype="float64"), tt.lvector("n")
    h = theano_dag.function([trials, probs], multinomial(trials, probs))
    assert h(np.zeros(0, "int64"), sp.csr_matrix((0, 3))).shape == (0, 3)
    assert h(np.array([3, 4]), sp.csr_matrix((2, 3))).nnz == 0
