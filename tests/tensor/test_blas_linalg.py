"""Einsum / tensordot / batched_dot and the BLAS ops: values against numpy (float32 and
float64), ``infer_shape`` against the real shape, gradients by finite differences, and
the error messages of bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.function import function as _function
from theano_dag.compile.mode import Mode
from theano_dag.gradient import grad
from theano_dag.gradient import verify_grad as _verify_grad
from theano_dag.graph.basic import ancestors
from theano_dag.graph.utils import InconsistencyError
from theano_dag.tensor.blas import (
    Dot22,
    Gemm,
    Gemv,
    Ger,
    dot22,
    dot22scalar,
    gemm_inplace,
    gemm_no_inplace,
    gemv_inplace,
    gemv_no_inplace,
    ger,
    ger_destructive,
)
from theano_dag.tensor.contractions import Einsum, batched_dot, batched_tensordot, einsum, tensordot
from theano_dag.tensor.shape import shape_i

# Ops are checked on the reference engine (Op.perform in order, no rewrites): the
# ground truth that every other engine and rewrite is compared with.
MODE = Mode(linker="py", optimizer=None)


def function(inputs, outputs, **kwargs):
    return _function(inputs, outputs, mode=MODE, **kwargs)


def verify_grad(fun, pt, **kwargs):
    return _verify_grad(fun, pt, mode=MODE, **kwargs)


FLOATS = ("float32", "float64")
RTOL = {"float32": 1e-4, "float64": 1e-10}


def sym(value, name=None):
    """A symbolic input typed like ``value`` (length-1 dims broadcastable)."""
    value = np.asarray(value)
    return tt.TensorType(value.dtype, shape=tuple(1 if s == 1 else None for s in value.shape))(name)


def run(inputs, outputs, values):
    return function(inputs, outputs, on_unused_input="ignore")(*values)


def check_infer_shape(out, inputs, values):
    """``infer_shape`` of ``out``'s node, evaluated, equals the shape of the real output."""
    node = out.owner
    in_shapes = [tuple(shape_i(v, d) for d in range(v.ndim)) for v in node.inputs]
    shapes = node.op.infer_shape(None, node, in_shapes)
    real = run(inputs, list(node.outputs), values)
    for shp, val in zip(shapes, real):
        entries = [tt.as_tensor_variable(s) for s in shp]
        got = tuple(int(v) for v in run(inputs, entries, values)) if entries else ()
        assert got == np.shape(val)


def rand(rng, shape, dtype="float64"):
    return rng.standard_normal(shape).astype(dtype)


# -- einsum -------------------------------------------------------------------------------

EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ii->", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->ij", [(2, 3)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("i,j->ij", [(2,), (3,)]),
    ("i,i->", [(4,), (4,)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ij->", [(2, 3)]),
    ("ij->i", [(2, 3)]),
    ("ij,jk", [(2, 3), (3, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 2)]),
    ("...j,j", [(2, 3, 4), (4,)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("iij,j->ij", [(3, 3, 2), (2,)]),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("subscripts,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_value_and_shape(subscripts, shapes, dtype):
    rng = np.random.default_rng(0)
    vals = [rand(rng, s, dtype) for s in shapes]
    xs = [sym(v) for v in vals]
    out = einsum(subscripts, *xs)
    got = run(xs, out, vals)
    want = np.einsum(subscripts, *[v.astype("float64") for v in vals])
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=RTOL[dtype])
    check_infer_shape(out, xs, vals)


@pytest.mark.parametrize("subscripts,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_grad(subscripts, shapes):
    rng = np.random.default_rng(1)
    verify_grad(lambda *xs: einsum(subscripts, *xs), [rand(rng, s) for s in shapes], rng=rng)


def test_einsum_ints_and_upcast():
    a = np.arange(6, dtype="int32").reshape(2, 3)
    b = np.arange(3, dtype="int64")
    xa, xb = sym(a), sym(b)
    out = einsum("ij,j->i", xa, xb)
    assert out.dtype == "int64"
    np.testing.assert_array_equal(run([xa, xb], out, [a, b]), a @ b)
    f = sym(np.zeros(3, "float32"))
    assert einsum("ij,j->i", xa, f).dtype == "float64"  # int32 with float32 -> float64


def test_einsum_output_owns_its_data():
    x = np.arange(6.0).reshape(2, 3)
    xv = sym(x)
    node = einsum("ij->ji", xv).owner
    cell = [None]
    node.op.perform(node, [x], [cell])
    assert not np.shares_memory(cell[0], x)


def test_einsum_gradient_is_einsum():
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    ga = grad(einsum("ij,jk->ik", a, b).sum(), a)
    ops = [v.owner.op for v in ancestors([ga]) if v.owner is not None]
    assert Einsum("ik,jk->ij") in ops


def test_einsum_trace_gradient_is_identity():
    m = tt.dmatrix("m")
    g = grad(einsum("ii->", m), m)
    np.testing.assert_array_equal(run([m], g, [np.ones((3, 3))]), np.eye(3))


def test_einsum_diagonal_output_extension():
    v = tt.dvector("v")
    out = Einsum("i->ii")(v)
    np.testing.assert_array_equal(run([v], out, [np.array([1.0, 2.0])]), np.diag([1.0, 2.0]))


def test_einsum_rop():
    from theano_dag.gradient import Rop

    a, b, ea = tt.dmatrix("a"), tt.dmatrix("b"), tt.dmatrix("ea")
    out = Rop(einsum("ij,jk->ik", a, b), a, ea)
    rng = np.random.default_rng(2)
    av, bv, ev = rand(rng, (2, 3)), rand(rng, (3, 2)), rand(rng, (2, 3))
    np.testing.assert_allclose(run([a, b, ea], out, [av, bv, ev]), ev @ bv)


@pytest.mark.parametrize(
    "subscripts,shapes,exc,match",
    [
        ("ij,jk->ik", [(2, 3)], ValueError, "name 2 operand"),
        ("ijk,jk->ik", [(2, 3), (3, 2)], TypeError, "operand 0 has 2 dimension"),
        ("ij,jk->ik", [(2, 3), (4, 2)], ValueError, "'j' has different static lengths"),
        ("i1->i", [(2, 3)], ValueError, "invalid subscript character '1'"),
        ("ij->ii", [(2, 2)], ValueError, "repeat a letter"),
        ("ij->k", [(2, 2)], ValueError, r"\['k'\]"),
        ("ij->i->j", [(2, 2)], ValueError, "more than once"),
    ],
)
def test_einsum_errors(subscripts, shapes, exc, match):
    xs = [tt.TensorType("float64", shape=s)() for s in shapes]
    with pytest.raises(exc, match=match):
        einsum(subscripts, *xs)


def test_einsum_op_checks_ndim_and_runtime_lengths():
    with pytest.raises(TypeError, match=r"Einsum\{ij,jk->ik\}: operand 1 .* must have 2"):
        Einsum("ij,jk->ik")(tt.dmatrix(), tt.dvector())
    with pytest.raises(ValueError, match="canonical"):
        Einsum("ij,jk")
    a, b = tt.dmatrix("a"), tt.dmatrix("b")
    f = function([a, b], einsum("ij,jk->ik", a, b))
    with pytest.raises(ValueError, match="subscript 'j' has lengths"):
        f(np.ones((2, 3)), np.ones((4, 2)))


# -- tensordot / batched_dot -------------------------------------------------------------

TENSORDOT_CASES = [
    ((2, 3, 4), (3, 4, 5), 2),
    ((2, 3), (3, 4), 1),
    ((2, 3), (4,), 0),
    ((2, 3, 4), (4, 2), [[2], [0]]),
    ((2, 3, 4), (3, 2, 4), [[1, 2], [0, 2]]),
    ((2, 3, 4), (2, 4), [[-1, 0], [1, 0]]),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("sa,sb,axes", TENSORDOT_CASES)
def test_tensordot(sa, sb, axes, dtype):
    rng = np.random.default_rng(3)
    av, bv = rand(rng, sa, dtype), rand(rng, sb, dtype)
    a, b = sym(av), sym(bv)
    out = tensordot(a, b, axes)
    got = run([a, b], out, [av, bv])
    assert got.dtype == dtype
    np.testing.assert_allclose(
        got, np.tensordot(av.astype("float64"), bv, axes), rtol=RTOL[dtype], atol=RTOL[dtype]
    )
    check_infer_shape(out, [a, b], [av, bv])
    if dtype == "float64":
        verify_grad(lambda x, y: tensordot(x, y, axes), [av, bv], rng=rng)


@pytest.mark.parametrize(
    "axes,match",
    [
        (3, "out of range"),
        ([[0], [0, 1]], "name 1 axes"),
        ([[5], [0]], "axis 5 is out of range"),
        ([[0, 0], [0, 1]], "repeat an axis"),
        ("x", "int or a pair"),
    ],
)
def test_tensordot_errors(axes, match):
    with pytest.raises(ValueError, match=match):
        tensordot(tt.dmatrix(), tt.dmatrix(), axes)


def _ref_batched_dot(a, b):
    if a.ndim == 1 or b.ndim == 1:
        return np.stack([a[i] * b[i] for i in range(a.shape[0])])
    return np.stack([np.dot(a[i], b[i]) for i in range(a.shape[0])])


BATCHED_CASES = [
    ((3, 2, 4), (3, 4, 5)),
    ((3, 2, 4), (3, 4)),
    ((3, 4), (3, 4, 5)),
    ((3, 4), (3, 4)),
    ((3,), (3, 4, 2)),
    ((3, 4), (3,)),
    ((2, 2, 3, 4), (2, 4, 3)),
    ((2, 3, 4), (2, 2, 4, 3)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("sa,sb", BATCHED_CASES)
def test_batched_dot(sa, sb, dtype):
    rng = np.random.default_rng(4)
    av, bv = rand(rng, sa, dtype), rand(rng, sb, dtype)
    a, b = sym(av), sym(bv)
    out = batched_dot(a, b)
    got = run([a, b], out, [av, bv])
    np.testing.assert_allclose(
        got, _ref_batched_dot(av.astype("float64"), bv), rtol=RTOL[dtype], atol=RTOL[dtype]
    )
    check_infer_shape(out, [a, b], [av, bv])
    if dtype == "float64":
        verify_grad(batched_dot, [av, bv], rng=rng)


def test_batched_dot_errors():
    with pytest.raises(TypeError, match="a must have at least one"):
        batched_dot(tt.dscalar(), tt.dmatrix())
    with pytest.raises(TypeError, match="b must have at least one"):
        batched_dot(tt.dmatrix(), tt.dscalar())


@pytest.mark.parametrize(
    "sa,sb,axes",
    [
        ((2, 3, 4), (2, 4, 5), [[2], [1]]),
        ((2, 3, 4), (2, 3, 4), [[1, 2], [1, 2]]),
        ((2, 3, 4), (2, 4, 3), 1),
    ],
)
def test_batched_tensordot(sa, sb, axes):
    rng = np.random.default_rng(5)
    av, bv = rand(rng, sa), rand(rng, sb)
    a, b = sym(av), sym(bv)
    got = run([a, b], batched_tensordot(a, b, axes), [av, bv])
    if isinstance(axes, int):
        axes = [list(range(av.ndim - axes, av.ndim)), list(range(1, axes + 1))]
    ax = [[d - 1 for d in axes[0]], [d - 1 for d in axes[1]]]
    want = np.stack([np.tensordot(av[i], bv[i], ax) for i in range(av.shape[0])])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError, match="batch axis"):
        batched_tensordot(a, b, [[0], [0]])


# -- BLAS ---------------------------------------------------------------------------------


def _blas_cases(dtype, rng):
    z, x, y = rand(rng, (2, 4), dtype), rand(rng, (2, 3), dtype), rand(rng, (3, 4), dtype)
    a, b = np.asarray(1.5, dtype), np.asarray(-0.5, dtype)
    v3, v2, v4 = rand(rng, (3,), dtype), rand(rng, (2,), dtype), rand(rng, (4,), dtype)
    A = rand(rng, (2, 3), dtype)  # noqa: N806
    return [
        ("gemm", gemm_no_inplace, [z, a, x, y, b], b * z + a * (x @ y)),
        ("gemv", gemv_no_inplace, [v2, a, A, v3, b], b * v2 + a * (A @ v3)),
        ("ger", ger, [z, a, v2, v4], z + a * np.outer(v2, v4)),
        ("dot22", dot22, [x, y], x @ y),
        ("dot22scalar", dot22scalar, [x, y, a], a * (x @ y)),
    ]


BLAS_NAMES = ["gemm", "gemv", "ger", "dot22", "dot22scalar"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("k", range(len(BLAS_NAMES)), ids=BLAS_NAMES)
def test_blas_value_shape_grad(k, dtype):
    rng = np.random.default_rng(6)
    name, op, vals, want = _blas_cases(dtype, rng)[k]
    xs = [sym(v) for v in vals]
    out = op(*xs)
    assert out.dtype == dtype
    got = run(xs, out, vals)
    np.testing.assert_allclose(got, want, rtol=RTOL[dtype] * 10, atol=RTOL[dtype])
    check_infer_shape(out, xs, vals)
    if dtype == "float64":
        verify_grad(op, vals, rng=rng)


def test_gemm_beta_zero_ignores_z():
    z, x, y = tt.dmatrix("z"), tt.dmatrix("x"), tt.dmatrix("y")
    f = function([z, x, y], gemm_no_inplace(z, 2.0, x, y, 0.0))
    out = f(np.full((2, 2), np.nan), np.eye(2), np.ones((2, 2)))
    np.testing.assert_array_equal(out, np.full((2, 2), 2.0))


@pytest.mark.parametrize(
    "op,args,vals,dmap",
    [
        (
            gemm_inplace,
            "z a x y b",
            [np.ones((2, 2)), 2.0, np.eye(2), np.ones((2, 2)), 3.0],
            {0: [0]},
        ),
        (gemv_inplace, "y alpha A x beta", [np.ones(2), 2.0, np.eye(2), np.ones(2), 3.0], {0: [0]}),
        (ger_destructive, "A alpha x y", [np.ones((2, 2)), 2.0, np.ones(2), np.ones(2)], {0: [0]}),
    ],
)
def test_inplace_variants_overwrite_input0(op, args, vals, dmap):
    assert op.destroy_map == dmap
    xs = [tt.as_tensor_variable(np.asarray(v)) if np.ndim(v) == 0 else sym(v) for v in vals]
    node = op(*xs).owner
    arrays = [np.array(v, dtype="float64") for v in vals]
    target = arrays[0]
    before = target.copy()
    cell = [None]
    node.op.perform(node, arrays, [cell])
    assert cell[0] is target
    assert not np.array_equal(target, before)
    noinplace = type(op)(False)
    assert noinplace.destroy_map == {}
    arrays = [np.array(v, dtype="float64") for v in vals]
    keep = arrays[0].copy()
    noinplace.perform(node, arrays, [cell])
    np.testing.assert_array_equal(arrays[0], keep)


def test_blas_names_and_str():
    assert str(gemm_inplace) == "Gemm{inplace}" and str(gemm_no_inplace) == "Gemm{no_inplace}"
    assert str(gemv_no_inplace) == "Gemv{no_inplace}"
    assert str(ger) == "Ger{non-destructive}" and str(ger_destructive) == "Ger{destructive}"
    assert Gemm(True) == gemm_inplace and Gemm(False) != gemm_inplace
    assert isinstance(gemv_inplace, Gemv) and isinstance(ger, Ger) and isinstance(dot22, Dot22)


@pytest.mark.parametrize(
    "build,match",
    [
        (
            lambda: gemm_no_inplace(tt.dvector(), 1.0, tt.dmatrix(), tt.dmatrix(), 1.0),
            r"Gemm\{no_inplace\}: gemm only works for rank 2: argument z must be a matrix",
        ),
        (
            lambda: gemm_no_inplace(tt.dmatrix(), 1.0, tt.fmatrix(), tt.dmatrix(), 1.0),
            "argument x must have dtype float64",
        ),
        (
            lambda: gemm_no_inplace(tt.dmatrix(), tt.dvector(), tt.dmatrix(), tt.dmatrix(), 1.0),
            "argument a must be a scalar",
        ),
        (
            lambda: gemm_no_inplace(tt.lmatrix(), 1, tt.lmatrix(), tt.lmatrix(), 1),
            "argument z must be floating point",
        ),
        (
            lambda: gemv_no_inplace(tt.dvector(), 1.0, tt.dvector(), tt.dvector(), 1.0),
            r"Gemv\{no_inplace\}: argument A must be a matrix",
        ),
        (lambda: ger(tt.dmatrix(), 1.0, tt.dmatrix(), tt.dvector()), "argument x must be a vector"),
        (lambda: dot22(tt.dmatrix(), tt.dvector()), "Dot22: argument y must be a matrix"),
        (
            lambda: dot22scalar(tt.dmatrix(), tt.dmatrix(), tt.fscalar()),
            "argument a must have dtype float64",
        ),
    ],
)
def test_blas_type_errors(build, match):
    with pytest.raises(TypeError, match=match):
        build()


def test_blas_shape_errors():
    m = tt.TensorType("float64", shape=(2, 3))
    with pytest.raises(ValueError, match="incompatible shapes"):
        gemm_no_inplace(m(), 1.0, m(), m(), 1.0)
    z, x, y = tt.dmatrix("z"), tt.dmatrix("x"), tt.dmatrix("y")
    f = function([z, x, y], gemm_no_inplace(z, 1.0, x, y, 1.0))
    with pytest.raises(ValueError, match=r"z \(2, 2\), x \(2, 3\), y \(2, 2\)"):
        f(np.ones((2, 2)), np.ones((2, 3)), np.ones((2, 2)))


def test_gemm_inplace_refuses_aliased_z():
    # Theano's error and text (Gemm.E_z_uniq), which Theano's code matches.
    x = tt.dmatrix("x")
    with pytest.raises(InconsistencyError, match="^argument z aliased to x or y: Gemm"):
        gemm_inplace(x, 1.0, x, x, 1.0)
    with pytest.raises(InconsistencyError, match=Gemm.E_z_uniq):
        gemm_inplace(x, 1.0, tt.dmatrix("y"), x.T, 1.0)


def test_gemm_errors_start_with_theanos_texts():
    # Gemm.E_rank/E_mixed/E_float begin the messages (Theano's tests match them).
    m = tt.dmatrix("m")
    with pytest.raises(TypeError, match="^Gemm\\{no_inplace\\}: gemm only works for rank 2: arg"):
        gemm_no_inplace(tt.dvector("v"), 1.0, m, m, 1.0)
    with pytest.raises(TypeError, match=Gemm.E_mixed + ": argument y must have dtype float64"):
        gemm_no_inplace(m, 1.0, m, tt.fmatrix("f"), 1.0)
    with pytest.raises(TypeError, match=Gemm.E_float + ": argument z must be floating point"):
        gemm_no_inplace(tt.lmatrix("i"), 1.0, m, m, 1.0)


def test_gemm_inplace_in_a_function_overwrites_its_accumulator():
    z, x, y = tt.dmatrix("z"), tt.dmatrix("x"), tt.dmatrix("y")
    out = gemm_inplace(z, 1.0, x, y, 1.0)
    # The caller's own in-place op, accepted: z is overwritten, as in Theano (issue 16).
    g = function([z, x, y], out, accept_inplace=True)
    zv = np.zeros((2, 2))
    np.testing.assert_array_equal(g(zv, np.eye(2), np.ones((2, 2))), np.ones((2, 2)))
    np.testing.assert_array_equal(zv, np.ones((2, 2)))
    f = function([theano_dag.In(z, mutable=True), x, y], out, accept_inplace=True)
    zv = np.zeros((2, 2))
    np.testing.assert_array_equal(f(zv, np.eye(2), np.ones((2, 2))), np.ones((2, 2)))
    np.testing.assert_array_equal(zv, np.ones((2, 2)))  # declared mutable: overwritten
