"""A 10^6 x 10^6 sparse matrix with 10^6 stored entries (8 TB as a dense float64 array)
through a product and the gradients of a cost, on every engine: the values against
scipy's, and the memory the call takes in proportion to the stored entries, never to the
matrix's shape."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from sparse_helpers import ENGINES, sp

import theano_dag
import theano_dag.tensor as tt
from theano_dag import sparse as S

N, NNZ, K = 10**6, 10**6, 3
MIB = 2**20


@pytest.fixture(scope="module")
def problem():
    """The matrix (CSR, float64, about 10^6 distinct positions), the dense parameter
    (N x K) and the target."""
    rng = np.random.default_rng(0)
    keys = np.unique(rng.integers(0, N * N, NNZ, dtype=np.int64))
    a = sp.csr_matrix((rng.standard_normal(keys.size), (keys // N, keys % N)), shape=(N, N))
    w = rng.standard_normal((N, K))
    target = rng.standard_normal((N, K))
    return a, w, target


def _cost_and_gradients():
    a, w, target = S.csr_matrix("a", dtype="float64"), tt.dmatrix("w"), tt.dmatrix("target")
    residual = S.structured_dot(a, w) - target
    cost = 0.5 * tt.sum(residual**2)
    g_a, g_w = theano_dag.grad(cost, [a, w])
    return [a, w, target], [cost, g_w, g_a]


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_gradients_through_a_1e6_square_product_match_scipy(problem, engine):
    a, w, target = problem
    assert a.shape == (N, N) and a.nnz > 0.999 * NNZ
    inputs, outputs = _cost_and_gradients()
    f = theano_dag.function(inputs, outputs, mode=ENGINES[engine])
    cost, g_w, g_a = f(a, w, target)
    r = a @ w - target
    np.testing.assert_allclose(cost, 0.5 * np.sum(r**2), rtol=1e-12)
    np.testing.assert_allclose(g_w, a.T @ r, rtol=1e-10, atol=1e-12)
    # the gradient in the matrix is structured: a CSR matrix of a's pattern
    assert sp.issparse(g_a) and g_a.format == "csr" and g_a.shape == (N, N)
    rows = np.repeat(np.arange(N), np.diff(a.indptr))
    want = sp.csr_matrix(
        (np.einsum("ik,ik->i", r[rows], w[a.indices]), a.indices, a.indptr), shape=(N, N)
    )
    assert g_a.nnz == a.nnz
    assert abs(g_a - want).max() <= 1e-10 * abs(want).max()


# The measurement runs in a fresh process: in the test suite's own, collecting its
# garbage and trimming its heap first (to start the peak from what is live) took 37 s.
_MEASURE = """
import json, sys
sys.path.insert(0, {here!r})
import test_large as t
from theano_dag.testing import procmem
a, w, target = t.problem.__wrapped__()
inputs, outputs = t._cost_and_gradients()
try:
    procmem.reset_peak(release=True)
except OSError:
    print(json.dumps(None)); sys.exit()
before = procmem.status()["VmRSS"] * 1024
f = t.theano_dag.function(inputs, outputs)
f(a, w, target)
held = a.data.nbytes + a.indices.nbytes + a.indptr.nbytes + w.nbytes + target.nbytes
print(json.dumps([procmem.peak_bytes() - before, held]))
"""


def test_the_gradients_memory_follows_the_entries_not_the_shape():
    """Compiling and calling the cost and its gradients adds to the process's peak
    resident set a few times what the inputs take (a's arrays, w, the target:
    64 MiB), not the 8 TB of a dense 10^6 x 10^6 matrix nor any dense N x N part."""
    code = _MEASURE.format(here=str(pathlib.Path(__file__).parent))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    if measured is None:
        pytest.skip("the peak resident set cannot be reset here (Linux's /proc only)")
    added, held = measured
    assert held < 64 * MIB
    assert added < 4 * held, f"the call's peak added {added / MIB:.0f} MiB"
