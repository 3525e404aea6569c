"""Theano's tensor.inplace ops (overwriting their first input), the inverse hyperbolic
functions, deg2rad/rad2deg, the Bessel functions and chi2sf: values against numpy/scipy in
float32 and float64 on the reference and CPU engines, gradients by finite differences."""

import numpy as np
import pytest

from theano_dag import function
from theano_dag import tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.gradient.verify import verify_grad
from theano_dag.scalar.basic import round_half_away_from_zero_vec
from theano_dag.tensor import inplace

sps = pytest.importorskip("scipy.special")
stats = pytest.importorskip("scipy.stats")

ENGINES = [Mode(linker="py"), Mode(linker="cpu")]
UNARY = {
    "arcsinh": (np.arcsinh, [-2.0, 0.5, 3.0]),
    "arccosh": (np.arccosh, [1.5, 2.0, 5.0]),
    "arctanh": (np.arctanh, [-0.5, 0.1, 0.9]),
    "deg2rad": (np.deg2rad, [0.0, 90.0, -45.0]),
    "rad2deg": (np.rad2deg, [0.0, 1.0, -2.0]),
    "j0": (sps.j0, [0.5, 1.0, 4.0]),
    "j1": (sps.j1, [0.5, 1.0, 4.0]),
    "i0": (sps.i0, [0.5, 1.0, 3.0]),
    "i1": (sps.i1, [0.5, 1.0, 3.0]),
}


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_and_gradient(name, dtype, mode):
    ref, vals = UNARY[name]
    x = tt.vector("x", dtype=dtype)
    v = np.array(vals, dtype=dtype)
    out = function([x], getattr(tt, name)(x), mode=mode)(v)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, ref(v), rtol=1e-5 if dtype == "float32" else 1e-12)
    if dtype == "float64" and name not in ("j1", "i1"):
        verify_grad(getattr(tt, name), [v], rng=np.random.default_rng(0))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_bessel_and_chi2sf(dtype):
    v = tt.vector("v", dtype=dtype)
    x = tt.vector("x", dtype=dtype)
    order = np.array([0.0, 1.0, 2.5], dtype=dtype)
    at = np.array([0.5, 2.0, 3.0], dtype=dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    f = function([v, x], [tt.jv(v, x), tt.iv(v, x), tt.chi2sf(x, v + 1)])
    jv, iv, sf = f(order, at)
    np.testing.assert_allclose(jv, sps.jv(order, at), rtol=tol)
    np.testing.assert_allclose(iv, sps.iv(order, at), rtol=tol)
    # chi2sf is float64 whatever its inputs (Theano's upgrade_to_float64): scipy's value
    np.testing.assert_allclose(sf, stats.chi2.sf(at, order + 1), rtol=1e-12)
    assert jv.dtype == iv.dtype == dtype and sf.dtype == "float64"


def test_bessel_gradient_in_x():
    order = np.array([0.0, 1.0, 2.5])
    at = np.array([0.5, 2.0, 3.0])
    for fn in (tt.jv, tt.iv):
        verify_grad(lambda x, fn=fn: fn(order, x), [at], rng=np.random.default_rng(1))


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
def test_inplace_ops_overwrite_their_first_input(mode):
    x, y = tt.dvectors("x", "y")
    a, b = np.array([1.0, 4.0]), np.array([2.0, 3.0])
    for op, expected in [
        (inplace.add_inplace, a + b),
        (inplace.sub_inplace, a - b),
        (inplace.maximum_inplace, np.maximum(a, b)),
        (inplace.pow_inplace, a**b),
    ]:
        out = op(x, y)
        assert out.owner.op.destroy_map == {0: [0]}
        f = function([x, y], out, mode=mode, accept_inplace=True)
        first = a.copy()
        np.testing.assert_allclose(f(first, b), expected)
        np.testing.assert_allclose(first, expected)  # written in place, as in Theano
    g = function([x], inplace.sqrt_inplace(x), mode=mode, accept_inplace=True)
    first = a.copy()
    np.testing.assert_allclose(g(first), np.sqrt(a))
    np.testing.assert_allclose(first, np.sqrt(a))


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
def test_an_inplace_op_gives_its_first_input_dtype(mode):
    i, x = tt.ivector("i"), tt.dvector("x")
    f = function([i, x], inplace.add_inplace(i, x), mode=mode, accept_inplace=True)
    a = np.array([2, -4, 0], dtype="int32")
    out = f(a, np.array([-0.64, 0.95, 1.5]))
    # numpy's float sum, truncated to the integers (Theano's transfer_type(0))
    assert out.dtype == "int32" and out.tolist() == [1, -3, 1] and a.tolist() == [1, -3, 1]
    with pytest.raises(TypeError, match="cannot overwrite input 0"):
        inplace.add_inplace(tt.dvector("v"), tt.dmatrix("m"))


def test_round_half_away_from_zero_vec():
    v = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.49])
    np.testing.assert_array_equal(round_half_away_from_zero_vec(v), [-3, -2, -1, 1, 2, 3, 2])
