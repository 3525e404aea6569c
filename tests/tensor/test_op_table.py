"""Walk the op table: values vs numpy, infer_shape vs real shapes, gradients vs finite
differences, for every row."""

from __future__ import annotations

import numpy as np
import pytest
from op_audit import assert_every_class_covered, op_classes
from op_table import TABLE
from tensor_helpers import check_grad, evaluate, evaluate_all, inferred_node_shapes, same_shapes

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.gradient import NullTypeGradError, Rop, grad
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
        if not all(isinstance(o.type, tt.TensorType) for o in node.outputs):
            continue  # a typed list, a slice, a scalar: no shape to infer
        inferred = inferred_node_shapes(node, givens)
        real = [storage[o].shape for o in node.outputs]
        assert same_shapes(inferred, real), f"{row}: {node.op} infers {inferred}, real {real}"


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


def _grad_graph(row, syms, values):
    """The gradients test_grad checks, of the sum of the row's output."""
    diff = row.grad_inputs
    if diff is None:
        diff = tuple(k for k, v in enumerate(values) if v.dtype.kind == "f")
    out = row.build(*syms)
    return grad(out.sum(), [syms[k] for k in diff], disconnected_inputs="ignore")


@pytest.mark.parametrize("row", GRAD_ROWS, ids=str)
def test_grad_graph_infer_shape(row):
    """Every node of the gradient's graph (SoftmaxGrad, CholeskyGrad, MaxPoolGrad...)
    infers the shape its value really has."""
    syms, values = _inputs(row, "float64", np.random.default_rng(SEED))
    grads = _grad_graph(row, syms, values)
    givens = dict(zip(syms, values))
    storage = evaluate_all(grads, givens)
    for node in io_toposort(syms, grads):
        if not all(isinstance(o.type, tt.TensorType) for o in node.outputs):
            continue
        inferred = inferred_node_shapes(node, givens)
        real = [storage[o].shape for o in node.outputs]
        assert same_shapes(inferred, real), f"{row}: {node.op} infers {inferred}, real {real}"


@pytest.mark.parametrize("legacy", [False, True], ids=["pullback", "r_op"])
@pytest.mark.parametrize("row", GRAD_ROWS, ids=str)
def test_rop(row, legacy):
    """The Jacobian-vector product (``Rop``, by the pullback and by the ops' ``R_op``)
    against central differences along a random direction: the pullback dropped a term
    where one input's cotangent is computed from another's (``a - b``), the R_op path
    counted twice a path through a node reading x and a function of x (``x + abs(x)``)."""
    rng = np.random.default_rng(SEED)
    syms, values = _inputs(row, "float64", rng)
    diff = row.grad_inputs
    if diff is None:
        diff = tuple(k for k, v in enumerate(values) if v.dtype.kind == "f")
    outs = row.build(*syms)
    outs = [o for o in (outs if isinstance(outs, list | tuple) else [outs]) if o.dtype == "float64"]
    if not outs or not diff:
        pytest.skip("no float output or input")
    wrt = [syms[k] for k in diff]
    points = [w.type() for w in wrt]
    try:
        jv = Rop(outs, wrt, points, disconnected_outputs="ignore", use_op_rop_implementation=legacy)
    except (NullTypeGradError, NotImplementedError) as e:
        pytest.skip(f"no R-operator: {e}")
    directions = [rng.normal(size=values[k].shape) for k in diff]
    got = function(syms + points, jv, on_unused_input="ignore")(*values, *directions)
    f = function(syms, outs, on_unused_input="ignore")

    def moved(t):
        vals = list(values)
        for k, d in zip(diff, directions):
            vals[k] = values[k] + t * d
        return f(*vals)

    eps = 1e-6
    for g, plus, minus in zip(got, moved(eps), moved(-eps)):
        np.testing.assert_allclose(g, (plus - minus) / (2 * eps), rtol=1e-4, atol=1e-5)


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
    if row.check_dtype:
        assert got.dtype == want.dtype, f"{row}: dtype {got.dtype}, numpy gives {want.dtype}"
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=row.rtol64 if dtype == "float64" else 1e-4)
    else:
        np.testing.assert_array_equal(got, want)


# -- the audit: every Op class of tensor and scalar has a row, or says where it is tested --

# Op classes with no row, each with the reason and the place that tests it instead.
_BASES = "a base class; its subclasses have rows"
EXEMPT = {
    # bases: never built as such
    "theano_dag.scalar.basic.ScalarOp": _BASES,
    "theano_dag.scalar.basic.UnaryScalarOp": _BASES,
    "theano_dag.scalar.basic.BinaryScalarOp": _BASES,
    "theano_dag.scalar.math.FloatUnaryOp": _BASES,
    "theano_dag.scalar.math._Rounding": _BASES,
    "theano_dag.scalar.math._Bessel2": _BASES,
    "theano_dag.scalar.arith._Bitwise": _BASES,
    "theano_dag.scalar.arith._Compare": _BASES,
    "theano_dag.tensor.elemwise._BoolReduce": _BASES,
    "theano_dag.tensor.shape._LengthCheck": _BASES,
    "theano_dag.tensor.elemwise._DtypeReduce": _BASES,
    "theano_dag.tensor.blas._Destructive": _BASES,
    "theano_dag.tensor.nnet.nnet._AxisOp": _BASES,
    "theano_dag.tensor.nnet.bn._AbstractBatchNorm": _BASES,
    # Theano's names: calling one builds elementwise ops, never a node of its own
    **{
        f"theano_dag.tensor.nnet.bn.AbstractBatchNorm{k}": "never built: test_nnet_theano_names.py"
        for k in ("Train", "Inference", "TrainGrad")
    },
    # the node of batch_normalization_train's output: test_nnet.py's bn_train rows (value,
    # infer_shape, gradient) and its second-order tests
    "theano_dag.tensor.nnet.bn.BatchNormTrainGradient": "test_nnet.py: bn_train rows",
    "theano_dag.tensor.nnet.pool._PoolBase": _BASES,
    "theano_dag.tensor.nnet.abstract_conv.BaseAbstractConv": _BASES,
    "theano_dag.tensor.random.basic._VectorParamRV": _BASES,
    "theano_dag.tensor.nnet.abstract_conv.AbstractConv": _BASES,
    "theano_dag.tensor.nnet.abstract_conv.AbstractConv_gradInputs": _BASES,
    "theano_dag.tensor.nnet.abstract_conv.AbstractConv_gradWeights": _BASES,
    "theano_dag.gradient.ops._GradIdentity": _BASES,
    # reads a file (numpy's .npy) named by the op: tests/tensor/test_theano_behaviours.py
    "theano_dag.tensor.io.LoadFromDisk": "reads a file: tests/tensor/test_theano_behaviours.py",
    # its value is a Python slice; indexing takes its bounds when the graph is built (the
    # rows make_slice*), so no node remains: tests/tensor/test_type_other.py runs it
    "theano_dag.tensor.type_other.MakeSlice": "a slice, not an array: test_type_other.py",
    # Theano's three-input comparison low < x < high (its bounds open or closed)
    "theano_dag.scalar.arith.InRange": "tests/tensor/test_scalar_names.py (py, cpu vs numpy)",
    # made by the rewrite lazy_branches from an IfElse, not by users: tests/test_ifelse.py
    # checks it on every engine in float32, float64 and int64
    "theano_dag.ifelse.LazyIfElse": "made by a rewrite: tests/test_ifelse.py (every engine)",
    # a check of lengths that shape rewrites make: tests/opt/test_rewrites_equal_lengths.py
    # runs it on py, cpu (C kernels) and dask, its error and its value
    "theano_dag.tensor.shape.EqualLengths": "made by shapes: test_rewrites_equal_lengths.py",
    "theano_dag.tensor.shape.IndicesInBounds": "made by shapes: test_shape_refusals.py",
}
# Random variables: a value is a draw, not a function of the inputs; tests/tensor/
# test_random.py and test_random_distributions.py check them against numpy's Generator
# with the same seed, their moments, and their shapes.
EXEMPT.update(
    {
        f"theano_dag.tensor.random.{m}": "random draws: tests/tensor/test_random*.py"
        for m in [
            "op.RandomVariable",
            "op.Observed",
            *[
                f"basic.{c}RV"
                for c in (
                    "Bernoulli BetaBinomial Beta Binomial Categorical Cauchy Choice Dirichlet "
                    "Exponential Gamma HalfCauchy HalfNormal Integers InvGamma Multinomial "
                    "MvNormal NegBinomial Normal Permutation Poisson PolyaGamma TruncatedNormal "
                    "TruncExponential Uniform"
                ).split()
            ],
        ]
    }
)

# the array vocabulary, and the graph-level ops a user applies to arrays (sparse, scan,
# typed lists have tables and tests of their own)
_OP_PACKAGES = (
    "theano_dag.tensor",
    "theano_dag.scalar",
    "theano_dag.gradient",
    "theano_dag.graph.identity_ops",
    "theano_dag.ifelse",
)


def _add_op(op, seen):
    seen.add(type(op))
    if getattr(op, "scalar_op", None) is not None:
        _add_op(op.scalar_op, seen)
    inner = getattr(op, "fgraph", None)  # a Composite's scalar graph
    for node in getattr(inner, "apply_nodes", ()):
        _add_op(node.op, seen)


def _covered_op_classes():
    """The op classes in the rows' graphs, and in their gradients' graphs where the row
    checks the gradient (finite differences check those ops' values,
    test_grad_graph_infer_shape their shapes)."""
    seen = set()
    for row in TABLE:
        syms, values = _inputs(row, row.dtypes[-1], np.random.default_rng(SEED))
        out = row.build(*syms)
        outs = [out, *(_grad_graph(row, syms, values) if row.grad else [])]
        for node in io_toposort(syms, outs):
            _add_op(node.op, seen)
    return seen


def test_every_op_class_has_a_row_or_says_where_it_is_tested():
    assert_every_class_covered(
        op_classes(_OP_PACKAGES), _covered_op_classes(), EXEMPT, "op classes"
    )
