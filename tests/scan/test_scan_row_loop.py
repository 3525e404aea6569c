"""``MapOverIndex`` (the row loop of ``jacobian``/``hessian``): its gradient when one of
its rows is also an intermediate of another (the known-gradient bug ``scan`` had)."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.gradient import verify_grad
from theano_dag.gradient.row_loop import map_over_index


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_grad_when_a_row_feeds_another(dtype):
    i, x = tt.lscalar("i"), tt.vector("x", dtype)
    a = x * tt.cast(i + 1, dtype)
    b = a**2  # a is both an output and an intermediate of b
    ra, rb = map_over_index(i, 3, [a, b])
    g = theano_dag.grad(ra.sum() + rb.sum(), x)
    xv = np.array([0.5, -1.0], dtype=dtype)
    # d/dx_j sum_i (x_j (i+1) + x_j^2 (i+1)^2) = sum_i (i+1) + 2 x_j (i+1)^2
    want = sum((k + 1) + 2 * xv * (k + 1) ** 2 for k in range(3))
    np.testing.assert_allclose(g.eval({x: xv}), want, rtol=1e-6)


def test_grad_of_two_rows_by_finite_differences():
    def f(x):
        i = tt.lscalar("i")
        a = tt.tanh(x * tt.cast(i + 1, "float64"))
        ra, rb = map_over_index(i, 4, [a, a * x + a**3])
        return (ra * 0.5).sum() + (rb**2).sum()

    verify_grad(f, [np.random.default_rng(3).normal(size=3)])
