"""images2neibs / neibs2images (theano.tensor.nnet.neighbours): every mode against a
plain-Python reference of Theano's rules, in float32 and float64, on every engine;
infer_shape; the gradient (every mode, overlapping patches too) by finite differences;
the checks of patch sizes and steps; neibs2images as the inverse."""

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.gradient.verify import verify_grad
from theano_dag.tensor.nnet import neighbours
from theano_dag.tensor.nnet.neighbours import Images2Neibs, images2neibs, neibs2images

OCL_OK, OCL_WHY = opencl_available()
ENGINES = [
    "py",
    "cpu",
    pytest.param("opencl", marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL: {OCL_WHY}")),
]


def _mode(engine):
    if engine == "py":
        return Mode(linker="py", optimizer=None)
    if engine == "opencl":
        return Mode(linker="opencl")
    return Mode(linker=CPULinker(min_plan_bytes=0))


def reference(img, shape, step, mode):
    """Theano's patch rules, one pixel at a time."""
    (c, d), (sx, sy) = shape, step
    b, s, h, w = img.shape

    def count(size, patch, st):
        if mode == "wrap_centered":
            return -(-size // st)
        reach = {"half": size - patch % 2, "full": size + patch - 2}.get(mode, size - patch)
        return 1 + reach // st

    shift = {"wrap_centered": (c // 2, d // 2), "half": (c // 2, d // 2)}
    shift["full"] = (c - 1, d - 1)
    dx, dy = shift.get(mode, (0, 0))
    rows = []
    for n in range(b):
        for ch in range(s):
            for a in range(count(h, c, sx)):
                for bb in range(count(w, d, sy)):
                    row = []
                    for i in range(c):
                        for j in range(d):
                            r, k = a * sx + i - dx, bb * sy + j - dy
                            if mode == "wrap_centered":
                                r, k = r % h, k % w
                            inside = 0 <= r < h and 0 <= k < w
                            row.append(img[n, ch, r, k] if inside else 0)
                    rows.append(row)
    return np.array(rows, dtype=img.dtype)


CASES = [  # mode, image shape, neib_shape, neib_step
    ("valid", (2, 3, 4, 6), (2, 3), None),
    ("valid", (1, 2, 5, 5), (3, 3), (1, 2)),  # overlapping patches
    ("ignore_borders", (2, 1, 5, 7), (2, 3), None),
    ("ignore_borders", (1, 2, 6, 5), (3, 2), (2, 1)),
    ("wrap_centered", (1, 2, 4, 5), (3, 3), (1, 1)),
    ("wrap_centered", (2, 1, 5, 6), (3, 5), (2, 3)),
    ("half", (1, 2, 5, 4), (3, 2), (1, 1)),
    ("full", (1, 1, 4, 5), (2, 3), (1, 1)),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES])
def test_images2neibs_against_the_reference(case, dtype, engine):
    mode, shape, neib_shape, neib_step = case
    img = np.random.default_rng(0).normal(size=shape).astype(dtype)
    x = tt.tensor4("x", dtype=dtype)
    out = images2neibs(x, neib_shape, neib_step, mode=mode)
    f = function([x], [out, out.shape], mode=_mode(engine))
    got, got_shape = f(img)
    want = reference(img, neib_shape, neib_step or neib_shape, mode)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)
    assert tuple(got_shape) == want.shape


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shape", [(2, 2, 5, 1), (2, 2, 5, 0), (1, 2, 1, 7), (1, 1, 0, 0)])
def test_ignore_borders_along_a_side_shorter_than_a_patch(shape, engine):
    # No patch fits: no rows. The inferred length was 1 + (side - patch) // step per axis
    # multiplied out, negative (-8 rows for (2, 2, 5, 1)) where the patches are none.
    x = tt.tensor4("x")
    out = images2neibs(x, (2, 3), (2, 1), mode="ignore_borders")
    f = function([x], [out, out.shape], mode=_mode(engine))
    shape_only = function([x], out.shape)
    assert not any(isinstance(n.op, Images2Neibs) for n in shape_only.maker.fgraph.toposort())
    got, got_shape = f(np.ones(shape, dtype=x.dtype))
    assert got.shape == (0, 6)
    assert tuple(got_shape) == (0, 6)
    assert tuple(shape_only(np.ones(shape, dtype=x.dtype))) == (0, 6)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES])
def test_infer_shape_without_computing(case):
    mode, shape, neib_shape, neib_step = case
    x = tt.tensor4("x")
    out = images2neibs(x, neib_shape, neib_step, mode=mode)
    f = function([x], out.shape)
    assert not any(isinstance(n.op, Images2Neibs) for n in f.maker.fgraph.toposort())
    want = reference(np.zeros(shape), neib_shape, neib_step or neib_shape, mode).shape
    assert tuple(f(np.zeros(shape))) == want


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES])
def test_gradient_by_finite_differences(case):
    mode, shape, neib_shape, neib_step = case
    img = np.random.default_rng(1).normal(size=shape)
    weights = np.random.default_rng(2).normal(
        size=reference(img, neib_shape, neib_step or neib_shape, mode).shape
    )
    verify_grad(
        lambda x: images2neibs(x, neib_shape, neib_step, mode=mode) * weights,
        [img],
        rng=np.random.default_rng(3),
    )


def test_second_order_goes_through_the_transpose():
    x = tt.dtensor4("x")
    g = tt.grad((images2neibs(x, (2, 2), (1, 1)) ** 2).sum(), x)
    h = tt.grad((g * np.arange(9.0).reshape(1, 1, 3, 3)).sum(), x)
    img = np.ones((1, 1, 3, 3))
    # g = 2 * x * (number of patches reading each pixel): h = 2 * counts * weights
    counts = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]])
    np.testing.assert_allclose(
        function([x], h)(img)[0, 0], 2 * counts * np.arange(9.0).reshape(3, 3)
    )


@pytest.mark.parametrize("mode", ["valid", "ignore_borders"])
def test_neibs2images_inverts_side_by_side_patches(mode):
    x = tt.dtensor4("x")
    shape = (2, 3, 4, 6) if mode == "valid" else (2, 3, 5, 7)
    img = np.random.default_rng(4).normal(size=shape)
    back = neibs2images(images2neibs(x, (2, 3), mode=mode), (2, 3), x.shape, mode=mode)
    got = function([x], back)(img)
    want = img.copy()
    if mode == "ignore_borders":
        want[:, :, 4:, :] = 0
        want[:, :, :, 6:] = 0
    np.testing.assert_array_equal(got, want)
    neibs = tt.dmatrix("neibs")
    with pytest.raises(ValueError, match="do not fit an image of shape"):
        function([neibs], neibs2images(neibs, (2, 2), (1, 1, 4, 4)))(np.zeros((3, 4)))


def test_patch_checks():
    x = tt.dtensor4("x")
    img = np.zeros((1, 1, 5, 5))
    with pytest.raises(ValueError, match=r"mode='valid'\): patches of 2 every 2 do not cover"):
        function([x], images2neibs(x, (2, 2)), mode=_mode("py"))(img)
    with pytest.raises(ValueError, match="patch shape 2 is even"):
        function([x], images2neibs(x, (2, 3), mode="wrap_centered"), mode=_mode("py"))(img)
    with pytest.raises(ValueError, match="must be positive"):
        function([x], images2neibs(x, (0, 2), mode="ignore_borders"), mode=_mode("py"))(img)
    with pytest.raises(NotImplementedError, match="mode 'same' is not one of"):
        images2neibs(x, (2, 2), mode="same")
    with pytest.raises(TypeError, match="ten4 must be 4-D"):
        images2neibs(tt.dmatrix(), (2, 2))
    assert tt.nnet.neighbours is neighbours and tt.nnet.images2neibs is images2neibs
