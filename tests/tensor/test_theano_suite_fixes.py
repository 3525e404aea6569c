"""Behaviours found by running theano-pymc 1.1.2's own tensor tests in full against
theano_dag: each test here failed before its fix, values against numpy/scipy on every
engine (the reference, the CPU engine, OpenCL)."""

import numpy as np
import pytest
from engine_modes import ENGINES, FLOATS, mode_of

import theano_dag.tensor as tt
from theano_dag import function
from theano_dag.gradient import grad
from theano_dag.tensor import linalg


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_nan_gradient_is_nan_everywhere(engine, dtype, lower):
    # on_error="nan": a matrix that is not positive definite has a NaN factor, and the
    # gradient through it is NaN in every entry (the triangle the factor does not reach
    # too); a positive definite one keeps its finite gradient.
    x = tt.matrix("x", dtype=dtype)
    chol = linalg.Cholesky(lower=lower, on_error="nan")
    f = function([x], grad(chol(x).sum(), x), mode=mode_of(engine))
    got = f(np.array([[1.0, 0.2], [0.2, -2.0]], dtype=dtype))
    assert got.dtype == dtype and got.shape == (2, 2) and np.isnan(got).all()
    spd = np.array([[4.0, 1.0], [1.0, 3.0]], dtype=dtype)
    ref = function([x], grad(linalg.Cholesky(lower=lower)(x).sum(), x), mode=mode_of("py"))
    np.testing.assert_allclose(f(spd), ref(spd), rtol=1e-5)
    assert np.isfinite(f(spd)).all()
