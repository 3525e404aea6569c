"""Walk the op table: values vs numpy, infer_shape vs real shapes, gradients vs finite
differences, for every row."""

from __future__ import annotations

import numpy as np
import pytest
from op_table import TABLE
from tensor_helpers import check_grad, evaluate, evaluate_all, inferred_node_shapes

import theano_dag.tensor as tt
from theano_dag.graph.basic import io_toposort

SEED = 1234


def _inputs(row, dtype, rng):
    values = [gen(rng, dtype) for gen in row.gens]
    values = [np.asarray(v) for v in values]
    # Length-1 dims are declared broadcastable so that row/column inputs broadcast.
    syms = [
        tt.TensorType(v.dtype, shape=tuple(1 if s == 1 else None for s in v.shape))(f"in{k}")
        for k, v in enumerate(values)
    ]
    return syms, values


CASES = [(row, dt) for row in TABLE for dt in row.dtypes]


@pytest.mark.parametrize("row,dtype", CASES, ids=[f"{r}-{d}" for r, d in CASES])
def test_value(row, dtype):
    rng = np.random.default_rng(SEED)
    syms, values = _inputs(row, dtype, rng)
    out = row.build(*syms)
    copies = [v.copy() for v in values]
    got = evaluate(out, dict(zip(syms, values)))
    with np.errstate(all="ignore"):
        want = np.asarray(row.ref(*[v.copy() for v in values]))
    assert got.shape == want.shape, f"{row}: shape {got.shape}, numpy gives {want.shape}"
    if row.check_dtype:
        assert got.dtype == want.dtype, f"{row}: dtype {got.dtype}, numpy gives {want.dtype}"
    if want.dtype.kind in "fc":
        rtol = row.rtol32 if got.dtype == np.float32 or dtype == "float32" else row.rtol64
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(got, want)
    for v, before in zip(values, copies):
        np.testing.assert_array_equal(v, before, err_msg="an op modified its input")


@pytest.mark.parametrize("row", TABLE, ids=str)
def test_infer_shape(row):
    """Every node of the row's graph infers the shape its value really has."""
    rng = np.random.default_rng(SEED)
    syms, values = _inputs(row, row.dtypes[-1], rng)
    out = row.build(*syms)
    givens = dict(zip(syms, values))
    storage = evaluate_all(out, givens)
    nodes = io_toposort(syms, [out])
    assert nodes, f"{row}: nothing was built"
    for node in nodes:
        inferred = inferred_node_shapes(node, givens)
        real = [storage[o].shape for o in node.outputs]
        assert inferred == real, f"{row}: {node.op} infers {inferred}, real {real}"


GRAD_ROWS = [row for row in TABLE if row.grad]


@pytest.mark.parametrize("row", GRAD_ROWS, ids=str)
def test_grad(row):
    rng = np.random.default_rng(SEED)
    values = [np.asarray(gen(rng, "float64")) for gen in row.gens]
    diff = row.grad_inputs
    if diff is None:
        diff = tuple(k for k, v in enumerate(values) if v.dtype.kind == "f")
    fixed = {k: tt.constant(v) for k, v in enumerate(values) if k not in diff}

    def build(*xs):
        it = iter(xs)
        return row.build(*[fixed[k] if k in fixed else next(it) for k in range(len(values))])

    try:
        from theano_dag.gradient.verify import verify_grad
    except ImportError:  # the project's checker is not there: use the local one
        check_grad(build, [values[k] for k in diff], rng)
        return
    # The reference engine: this checks the ops; the engines have their own tests.
    verify_grad(build, [values[k] for k in diff], rng=rng, mode="PerformOnly")


@pytest.mark.parametrize("mode", ["PerformOnly", None])
@pytest.mark.parametrize("row", TABLE, ids=str)
def test_value_through_function(row, mode):
    """The rows compiled by ``theano_dag.function`` (reference engine, then the default
    mode with its rewrites and engine) agree with numpy."""
    from theano_dag.compile.function import function

    rng = np.random.default_rng(SEED)
    dtype = row.dtypes[-1]
    syms, values = _inputs(row, dtype, rng)
    f = function(syms, row.build(*syms), mode=mode, on_unused_input="ignore")
    got = np.asarray(f(*values))
    with np.errstate(all="ignore"):
        want = np.asarray(row.ref(*[v.copy() for v in values]))
    assert got.shape == want.shape
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=row.rtol64 if dtype == "float64" else 1e-4)
    else:
        np.testing.assert_array_equal(got, want)
