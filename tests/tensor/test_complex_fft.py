"""Complex tensors and Fourier transforms (Theano's tensor.fft, tensor.fourier, complex
dtypes and real/imag/angle/complex/complex_from_polar/conj/abs): values against numpy in
float32/float64 and complex64/complex128 on the reference, CPU and OpenCL engines (complex
values run on the host: no C kernel, a visible OpenCL fallback), types, infer_shape against
the real shapes, gradients by finite differences (real costs through complex values)."""

import numpy as np
import pytest
import scipy.special

from theano_dag import function
from theano_dag import tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.native.ckernel import c_code
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient import grad
from theano_dag.gradient.verify import verify_grad
from theano_dag.tensor import fft, inplace
from theano_dag.tensor.contractions import batched_dot, einsum, tensordot
from theano_dag.tensor.fourier import Fourier, FourierAdjoint
from theano_dag.tensor.fourier import fft as cfft

LINKERS = ["py", "cpu", "opencl"]
RNG = np.random.default_rng(0)
TOL = {"float32": 1e-5, "complex64": 1e-5, "float64": 1e-12, "complex128": 1e-12}


def _mode(linker):
    if linker == "opencl":
        pytest.importorskip("pyopencl")
        ok, why = opencl_available()
        if not ok:
            pytest.skip(f"no OpenCL device: {why}")
    return Mode(linker=linker)


def _complex_values(dtype, shape):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


# -- complex elementwise ops: (name, function of z and w, numpy's) ---------------------

COMPLEX_OPS = [
    ("real", lambda z, w: tt.real(z), lambda z, w: z.real),
    ("imag", lambda z, w: tt.imag(z), lambda z, w: z.imag),
    ("attr_real_imag", lambda z, w: z.real - z.imag, lambda z, w: z.real - z.imag),
    ("angle", lambda z, w: tt.angle(z), lambda z, w: np.angle(z).astype("float64")),
    ("abs", lambda z, w: abs(z), lambda z, w: np.abs(z)),
    ("conj", lambda z, w: tt.conj(z), lambda z, w: np.conj(z)),
    ("add", lambda z, w: z + w, lambda z, w: z + w),
    ("sub", lambda z, w: z - w, lambda z, w: z - w),
    ("mul", lambda z, w: z * w, lambda z, w: z * w),
    ("div", lambda z, w: z / w, lambda z, w: z / w),
    ("pow", lambda z, w: z**2, lambda z, w: z**2),
    ("exp_log", lambda z, w: tt.exp(z) + tt.log(w), lambda z, w: np.exp(z) + np.log(w)),
    ("sqrt", lambda z, w: tt.sqrt(z), lambda z, w: np.sqrt(z)),
    ("sum", lambda z, w: (z * w).sum(axis=0), lambda z, w: (z * w).sum(axis=0)),
    ("fused", lambda z, w: abs(tt.exp(z) * w + 1) - 2, lambda z, w: abs(np.exp(z) * w + 1) - 2),
    # The functions with a complex form in numpy or scipy: their values, in z's dtype.
    *[
        (f, lambda z, w, f=f: getattr(tt, f)(z), lambda z, w, r=r: r(z).astype(z.dtype))
        for f, r in [
            ("sin", np.sin), ("cosh", np.cosh), ("tanh", np.tanh), ("arcsinh", np.arcsinh),
            ("arctan", np.arctan), ("expm1", np.expm1), ("log1p", np.log1p),
            ("erf", scipy.special.erf), ("erfc", scipy.special.erfc),
            ("erfcx", scipy.special.erfcx), ("gamma", scipy.special.gamma),
            ("psi", scipy.special.psi), ("log_erfc", lambda v: np.log(scipy.special.erfc(v))),
            ("sech2", lambda v: 1 / np.cosh(v) ** 2),
        ]
    ],
    ("softsign", lambda z, w: tt.nnet.softsign(z), lambda z, w: z / (1 + abs(z))),
]  # fmt: skip


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name, build, ref", COMPLEX_OPS, ids=[c[0] for c in COMPLEX_OPS])
def test_complex_elementwise_ops_match_numpy(name, build, ref, dtype, linker):
    z, w = tt.matrix("z", dtype=dtype), tt.matrix("w", dtype=dtype)
    vz, vw = _complex_values(dtype, (3, 4)), _complex_values(dtype, (3, 4))
    out = build(z, w)
    got = function([z, w], out, mode=_mode(linker), on_unused_input="ignore")(vz, vw)
    want = np.asarray(ref(vz, vw))
    assert got.dtype == out.dtype == want.dtype, (got.dtype, out.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)


# The ops defined on reals only: their stable forms compare with 0 (sigmoid's numpy form
# dropped the imaginary part: a wrong value), or numpy and scipy have no complex loop
# (they raised only when the function ran).
REAL_ONLY = [
    ("sigmoid", lambda z: tt.nnet.sigmoid(z)),
    ("softplus", lambda z: tt.nnet.softplus(z)),
    ("log1pexp", lambda z: tt.log1pexp(z)),
    ("sigmoid_binary_crossentropy", lambda z: tt.nnet.sigmoid_binary_crossentropy(z, z)),
    ("arctan2", lambda z: tt.arctan2(z, z)),
    ("logaddexp", lambda z: tt.logaddexp(z, z)),
    ("chi2sf", lambda z: tt.chi2sf(z, z)),
    ("gammainc", lambda z: tt.gammainc(z, z)),
    ("gammaincc", lambda z: tt.gammaincc(z, z)),
    ("jv", lambda z: tt.jv(z, z)),
    ("iv", lambda z: tt.iv(z, z)),
    ("round_half_away_from_zero", lambda z: tt.round_half_away_from_zero(z)),
    *[
        (f, lambda z, f=f: getattr(tt, f)(z))
        for f in ("deg2rad", "rad2deg", "gammaln", "tri_gamma", "erfinv", "erfcinv",
                  "j0", "j1", "i0", "i1", "log1mexp")
    ],
]  # fmt: skip


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name, build", REAL_ONLY, ids=[c[0] for c in REAL_ONLY])
def test_ops_defined_on_reals_refuse_complex_inputs_when_built(name, build, dtype):
    z = tt.vector("z", dtype=dtype)
    with pytest.raises(TypeError, match=f"{dtype} input: this op is defined on real numbers only"):
        build(z)
    x = tt.vector("x", dtype=dtype.replace("complex", "float").replace("128", "64"))
    assert build(x).dtype.startswith("float")  # real inputs as before


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_complex_from_real_parts_and_polar_match_numpy(dtype, linker):
    x, y = tt.vector("x", dtype=dtype), tt.vector("y", dtype=dtype)
    vx, vy = RNG.standard_normal(5).astype(dtype), RNG.standard_normal(5).astype(dtype)
    c, p = tt.complex(x, y), tt.complex_from_polar(abs(x), y)
    f = function([x, y], [c, p, tt.real(x), tt.imag(x)], mode=_mode(linker))
    gc, gp, re, im = f(vx, vy)
    cdtype = "complex64" if dtype == "float32" else "complex128"
    assert gc.dtype == gp.dtype == cdtype and re.dtype == im.dtype == dtype
    np.testing.assert_allclose(gc, vx + 1j * vy, rtol=TOL[dtype])
    np.testing.assert_allclose(gp, np.abs(vx) * np.exp(1j * vy), rtol=TOL[dtype] * 10)
    np.testing.assert_array_equal(re, vx)
    np.testing.assert_array_equal(im, np.zeros(5, dtype))


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_real_imag_angle_of_real_tensors_match_numpy(dtype, linker):
    # On real dtypes they are C expressions: fused with the rest into the CPU kernel.
    x = tt.vector("x", dtype=dtype)
    out = tt.exp(tt.real(x) * 2 + tt.imag(x) + abs(x)) + tt.angle(x)
    f = function([x], out, mode=_mode(linker))
    if linker == "cpu":
        assert "atan2(" in c_code(f)
    special = [-0.0, 0.0, np.nan, 0.5] if dtype != "int32" else [0, 2, 3, 4]
    v = np.array([-1, *special, 2], dtype=dtype)
    want = np.exp(v.real * 2 + v.imag + abs(v)) + np.angle(v)
    got = f(v)
    assert got.dtype == "float64"
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_complex_types_are_theanos():
    m = tt.fmatrix()
    c = tt.complex(m[0], m[1])
    assert c.type == tt.cvector and tt.complex(tt.dvector(), tt.dvector()).type == tt.zvector
    assert tt.real(c).type == tt.fvector and tt.imag(c).type == tt.fvector
    assert abs(tt.zmatrix()).type == tt.dmatrix and abs(c).type == tt.fvector
    assert tt.angle(c).type == tt.dvector  # float64 whatever the input, as in Theano
    assert tt.real(tt.imatrix()).type == tt.imatrix
    assert (tt.cvector() * tt.dvector()).type == tt.zvector
    with pytest.raises(TypeError, match="Casting from complex .* is ambiguous"):
        tt.cast(tt.zvector(), "int32")
    with pytest.raises(TypeError, match="expected real inputs"):
        tt.complex(tt.zvector(), tt.dvector())


def test_theanos_complex_type_names():
    assert [t.dtype for t in tt.complex_types] == ["complex64", "complex128"]
    assert tt.complex_scalar_types == tt.complex_types == (tt.cscalar, tt.zscalar)
    assert tt.complex_vector_types == (tt.cvector, tt.zvector)
    assert tt.complex_matrix_types == (tt.cmatrix, tt.zmatrix)
    assert tt.float_matrix_types == (tt.fmatrix, tt.dmatrix) and len(tt.int_types) == 4
    assert tt.ztensor7("z").type == tt.TensorType("complex128", (False,) * 7)
    assert tt.ctensor6.ndim == 6 and tt.tensor7("x").ndim == 7


@pytest.mark.parametrize("linker", ["py", "cpu"])
def test_conj_inplace_conjugates_complex_values(linker):
    z, x = tt.zvector("z"), tt.dvector("x")
    outs = [inplace.conj_inplace(z * 2), inplace.conj_inplace(x + 1)]
    f = function([z, x], outs, mode=Mode(linker=linker), accept_inplace=True)
    v = _complex_values("complex128", 3)
    got_z, got_x = f(v, np.arange(3.0))
    np.testing.assert_allclose(got_z, np.conj(v * 2))
    np.testing.assert_allclose(got_x, np.arange(3.0) + 1)


def test_real_of_a_real_tensor_is_a_copy():
    x = tt.dvector("x")
    v = np.arange(3.0)
    out = function([x], tt.real(x), mode=Mode(linker="py"))(v)
    out[0] = 7.0
    assert v[0] == 0.0


def test_complex_values_run_on_the_host():
    # No C kernel for complex values on the CPU engine (the float part still gets one);
    # on OpenCL they are fallbacks the placement names.
    z = tt.zvector("z")
    f = function([z], abs(tt.exp(z) * 2 + 1), mode=Mode(linker="cpu"))
    assert c_code(f) == ""
    v = _complex_values("complex128", 3)
    np.testing.assert_allclose(f(v), np.abs(np.exp(v) * 2 + 1))
    x = tt.dvector("x")
    assert "exp(" in c_code(function([x], tt.exp(x) * 2 + 1, mode=Mode(linker="cpu")))
    mode = _mode("opencl")
    h = function([x, z], tt.exp(x) * 2 + tt.real(z * 2), mode=mode)
    np.testing.assert_allclose(h(np.ones(3), v), np.exp(1) * 2 + (v * 2).real)
    assert h.fn.placement.fallbacks, "the complex node runs on the host, named"


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_cumulative_sums_and_products_of_complex_values(dtype, linker):
    # numpy's and Theano's take them; they were refused with a TypeError.
    z = tt.matrix("z", dtype=dtype)
    v = (np.arange(6).reshape(2, 3) + 1j * np.array([[1, -2, 0.5], [0, 3, -1]])).astype(dtype)
    v[1, 0] = 0
    outs = [tt.cumsum(z, axis=0), tt.cumsum(z), tt.cumprod(z, axis=1), tt.cumprod(z)]
    got = function([z], outs, mode=_mode(linker))(v)
    want = [np.cumsum(v, 0), np.cumsum(v), np.cumprod(v, 1), np.cumprod(v)]
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, rtol=1e-5)


# -- gradients: real costs through complex values ---------------------------------------

GRADS = [
    (
        "real_imag",
        lambda m: 0.5 * tt.real(tt.complex(m[0], m[1])) + 0.9 * tt.imag(tt.complex(m[0], m[1])),
    ),
    ("abs_sq", lambda m: abs(tt.complex(m[0], m[1]) ** 2).sum()),
    ("abs", lambda m: 0.5 * abs(tt.complex(m[0], m[1]))),
    ("polar", lambda m: tt.real(tt.complex_from_polar(abs(m[0]) + 0.1, m[1]) * (1 + 2j))),
    ("angle", lambda m: tt.angle(tt.complex(m[0], m[1]))),
    ("conj", lambda m: tt.imag(tt.conj(tt.complex(m[0], m[1])) * tt.complex(m[1], m[0]))),
    ("exp_mul", lambda m: tt.real(tt.exp(tt.complex(m[0], m[1])) * tt.complex(m[1], m[0]))),
    ("div", lambda m: tt.imag(tt.complex(m[0], m[1]) / tt.complex(m[1], 2 + m[0] ** 2))),
    ("sqrt_sum", lambda m: abs(tt.sqrt(tt.complex(m[0] + 3, m[1])).sum())),
    ("mixed", lambda m: abs((tt.complex(m[0], m[1]) * m[1]) ** 2).sum()),
]


@pytest.mark.parametrize("name, cost", GRADS, ids=[g[0] for g in GRADS])
def test_gradients_through_complex_values_match_finite_differences(name, cost):
    verify_grad(cost, [RNG.standard_normal((2, 5))], rng=np.random.default_rng(1))


MATRIX_GRADS = [
    ("dot_mm", lambda m: abs(tt.dot(tt.complex(m[0], m[1]), tt.complex(m[1], m[0]) + 1))),
    ("dot_mv", lambda m: abs(tt.dot(tt.complex(m[0], m[1]), tt.complex(m[1, 0], m[0, 1])))),
    ("dot_real_complex", lambda m: tt.imag(tt.dot(m[0], tt.complex(m[1], m[0])))),
    ("prod", lambda m: abs(tt.prod(tt.complex(m[0], m[1]), axis=0))),
    ("cumsum", lambda m: abs(tt.cumsum(tt.complex(m[0], m[1]), axis=1) * (1 + 2j)).sum()),
    ("cumprod", lambda m: abs(tt.cumprod(tt.complex(m[0], m[1]), axis=0)).sum()),
    ("cumprod_flat", lambda m: tt.imag(tt.cumprod(tt.complex(m[0], m[1]))).sum()),
    ("mean_sq", lambda m: abs(tt.mean(tt.complex(m[0], m[1]) ** 2))),
]


@pytest.mark.parametrize("name, cost", MATRIX_GRADS, ids=[g[0] for g in MATRIX_GRADS])
def test_gradients_of_complex_products_and_reductions(name, cost):
    verify_grad(cost, [RNG.standard_normal((2, 3, 3))], rng=np.random.default_rng(4))


def _c(m):
    return tt.complex(m[0], m[1])


CONTRACTION_GRADS = [
    ("tensordot", lambda m: abs(tensordot(_c(m), _c(m[::-1]) + 1, axes=[[1, 2], [2, 1]]))),
    ("batched_dot", lambda m: abs(batched_dot(_c(m), _c(m[::-1]) + 1))),
    ("einsum", lambda m: abs(einsum("ijk,ikl->ijl", _c(m), _c(m[::-1]) + 1))),
    ("einsum_real_complex", lambda m: tt.real(einsum("ijk,ikl->ijl", m[0], _c(m[::-1])))),
]


@pytest.mark.parametrize("name, cost", CONTRACTION_GRADS, ids=[g[0] for g in CONTRACTION_GRADS])
def test_gradients_of_complex_contractions(name, cost):
    verify_grad(cost, [RNG.standard_normal((2, 3, 3, 3))], rng=np.random.default_rng(5))


def test_gradient_of_a_complex_input_is_dre_plus_1j_dim():
    # Theano's convention: dC/d(re z) + 1j * dC/d(im z), here for C = sum |z|^2 = 2 z.
    z = tt.zvector("z")
    g = tt.grad((abs(z) ** 2).sum(), z)
    v = _complex_values("complex128", 4)
    np.testing.assert_allclose(function([z], g)(v), 2 * v)
    w = tt.zvector("w")
    g = tt.grad(tt.real(z * w).sum(), z)  # d/dz of re(z w) is conj(w)
    np.testing.assert_allclose(function([z, w], g)(v, v + 1), np.conj(v + 1))


# -- tensor.fft: rfft and irfft ---------------------------------------------------------

FFT_SHAPES = [(2, 8), (3, 7), (1, 4, 6), (2, 3, 5)]
SCALE = {None: "backward", "ortho": "ortho", "no_norm": "backward"}


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("norm", [None, "ortho", "no_norm"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", FFT_SHAPES, ids=str)
def test_rfft_and_irfft_match_numpy(shape, dtype, norm, linker):
    x = tt.tensor(dtype, shape=(None,) * len(shape))
    v = RNG.random(shape).astype(dtype)
    spectrum = fft.rfft(x, norm)
    back = fft.irfft(spectrum, norm, is_odd=shape[-1] % 2 == 1)
    s, b, s_shape, b_shape = function(
        [x], [spectrum, back, spectrum.shape, back.shape], mode=_mode(linker)
    )(v)
    axes = tuple(range(1, len(shape)))
    ref = np.fft.rfftn(v.astype("float64"), axes=axes, norm=SCALE[norm])
    assert s.dtype == b.dtype == dtype
    assert s.shape == ref.shape + (2,) == tuple(s_shape)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(s[..., 0] + 1j * s[..., 1], ref, atol=tol, rtol=tol)
    scale = np.prod(shape[1:]) if norm == "no_norm" else 1
    np.testing.assert_allclose(b, v * scale, atol=tol * scale, rtol=tol)
    assert b.shape == v.shape == tuple(b_shape)


def test_irfft_matches_numpys_inverse():
    spectrum = tt.dtensor4("spectrum")
    v = RNG.random((1, 6, 4, 2))
    ref = np.fft.irfftn(v[..., 0] + 1j * v[..., 1], axes=(1, 2))
    for norm, scale in [(None, 1), ("ortho", np.sqrt(36)), ("no_norm", 36)]:
        got = function([spectrum], fft.irfft(spectrum, norm))(v)
        np.testing.assert_allclose(got, ref * scale, atol=1e-12)


def test_fft_shapes_are_inferred_without_the_transform():
    x = tt.dtensor3("x")
    for out in [fft.rfft(x), fft.irfft(x), fft.irfft(x, is_odd=True)]:
        f = function([x], out.shape)
        assert not any(
            isinstance(n.op, (fft.RFFTOp, fft.IRFFTOp)) for n in f.maker.fgraph.apply_nodes
        )
        v = RNG.random((2, 5, 6))
        assert tuple(f(v)) == function([x], out)(v).shape


@pytest.mark.parametrize("shape", FFT_SHAPES, ids=str)
def test_fft_gradients_match_finite_differences(shape):
    rng = np.random.default_rng(2)
    odd = shape[-1] % 2 == 1
    spectrum_shape = shape[:-1] + (shape[-1] // 2 + 1, 2)
    verify_grad(lambda a: fft.rfft(a), [rng.random(shape)], rng=rng)
    verify_grad(lambda a: fft.rfft(a, "ortho"), [rng.random(shape)], rng=rng)
    verify_grad(lambda a: fft.irfft(a, is_odd=odd), [rng.random(spectrum_shape)], rng=rng)
    verify_grad(lambda a: fft.irfft(a, "no_norm", odd), [rng.random(spectrum_shape)], rng=rng)


def test_fft_refusals():
    with pytest.raises(ValueError, match="Invalid value 123 for norm"):
        fft.rfft(tt.dmatrix(), norm=123)
    with pytest.raises(ValueError, match="Invalid value 123 for is_odd"):
        fft.irfft(tt.dtensor3(), is_odd=123)
    with pytest.raises(TypeError, match="must be real"):
        fft.rfft(tt.zmatrix())
    with pytest.raises(TypeError, match="2 dimensions or more"):
        fft.rfft_op(tt.dvector())
    with pytest.raises(TypeError, match="3 dimensions or more"):
        fft.irfft_op(tt.dmatrix())
    with pytest.raises(TypeError, match="integer vector"):
        fft.rfft_op(tt.dmatrix(), tt.dvector())


# -- tensor.fourier: Fourier ----------------------------------------------------------


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_fourier_matches_numpy(dtype, linker):
    a, axis = tt.matrix("a", dtype=dtype), tt.iscalar("axis")
    v = _complex_values(dtype, (6, 4)) if "complex" in dtype else RNG.random((6, 4)).astype(dtype)
    for n in [None, 3, 9]:
        f = function([a, axis], [cfft(a, n, axis), cfft(a, n, axis).shape], mode=_mode(linker))
        for ax in (0, 1):
            got, shape = f(v, ax)
            ref = np.fft.fft(v, n, ax)
            assert got.dtype == "complex128" and tuple(shape) == ref.shape
            np.testing.assert_allclose(got, ref, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    got = function([a], cfft(a, None, None), mode=_mode(linker))(v)
    np.testing.assert_allclose(got, np.fft.fft(v), rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)


def test_fourier_shape_is_inferred_without_the_transform():
    a, b = tt.dmatrix("a"), tt.iscalar("b")
    for out, args, vals in [
        (cfft(a, 16, 1), [a], [RNG.random((12, 4))]),
        (cfft(a, None, None), [a], [RNG.random((12, 4))]),
        (cfft(a, 16, b), [a, b], [RNG.random((12, 4)), 0]),
        (cfft(a, None, b), [a, b], [RNG.random((12, 4)), 1]),
    ]:
        f = function(args, out.shape)
        assert not any(isinstance(n.op, Fourier) for n in f.maker.fgraph.apply_nodes)
        assert tuple(f(*vals)) == function(args, out)(*vals).shape


CASES = [
    ((5,), None, None),
    ((5,), 3, 0),
    ((5,), 8, 0),
    ((2, 5), 4, 1),
    ((3, 4), 6, 0),
    ((2, 3, 4), None, 1),
]


@pytest.mark.parametrize("shape, n, axis", CASES, ids=str)
def test_fourier_gradients_match_finite_differences(shape, n, axis):
    rng = np.random.default_rng(3)
    ax = len(shape) - 1 if axis is None else axis
    out_shape = shape[:ax] + (n or shape[ax],) + shape[ax + 1 :]
    u, w = rng.standard_normal(out_shape), rng.standard_normal(out_shape)
    verify_grad(
        lambda x: tt.real(cfft(x, n, axis)) * u + tt.imag(cfft(x, n, axis)) * w,
        [rng.standard_normal(shape)],
        rng=rng,
    )
    verify_grad(
        lambda x, y: abs(cfft(tt.complex(x, y), n, axis)) * u,
        [rng.standard_normal(shape), rng.standard_normal(shape)],
        rng=rng,
    )


def test_fourier_adjoint_is_the_adjoint():
    # <F x, y> == <x, F^H y> for complex x, y, with cropping and padding.
    for length, n in [(5, 5), (5, 3), (3, 7)]:
        x, y = _complex_values("complex128", length), _complex_values("complex128", n)
        g = tt.zvector("g")
        adj = function([g], FourierAdjoint()(g, length, n, 0))(y)
        np.testing.assert_allclose(np.vdot(y, np.fft.fft(x, n)), np.vdot(adj, x), rtol=1e-12)


def test_fourier_refusals():
    with pytest.raises(TypeError, match="not a scalar"):
        cfft(tt.dscalar(), None, None)
    with pytest.raises(TypeError, match="smaller than dimension of array"):
        cfft(tt.dmatrix(), None, 2)
    with pytest.raises(TypeError, match="strictly positive"):
        cfft(tt.dmatrix(), 0, 1)
    with pytest.raises(TypeError, match="of type integer"):
        cfft(tt.dmatrix(), tt.dscalar(), 1)
    v = tt.dvector("v")
    with pytest.raises(NotImplementedError, match="axis being a constant"):
        tt.grad(abs(cfft(v, None, tt.iscalar("k"))).sum(), v)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_the_gradient_of_a_complex_modulus_at_zero_is_zero(dtype):
    # z / |z| is 0/0 at z = 0: the gradient there is 0, as the real abs's sign(0), so
    # that abs(complex(r, 0)) has abs(r)'s gradient (it was NaN at r = 0).
    z = tt.vector("z", dtype=dtype)
    g = function([z], grad(tt.abs(z).sum(), z))(np.array([0, 3 + 4j, -2j], dtype=dtype))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, np.array([0, 0.6 + 0.8j, -1j]), rtol=1e-6)
    r = tt.dvector("r")
    gr = function([r], grad(tt.abs(tt.complex(r, r * 0)).sum(), r))(np.array([0.0, 2.0, -1.0]))
    np.testing.assert_array_equal(gr, [0.0, 1.0, -1.0])
