"""Theano's sparse sampling ops (``sparse.sandbox.sp2``): the kind, shape and pattern of
their draws, draws that are certain, and means over many draws."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_helpers import ENGINES, run, sp

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
