"""floatX=float32: the dtypes a float32 program gets (Theano's, checked with theano-pymc
1.1.2 at floatX=float32) and the values, against numpy's."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.config import config


@pytest.mark.parametrize("args", [(0.0, 1.0, 0.25), (0.5,), (1.5, 3), (np.float32(3.5),)])
def test_arange_of_python_floats_is_floatx(args):
    # A float64 range would upcast every float32 graph it enters: arange(0, 1, 0.25) + x
    # was float64 for a float32 x.
    with config.change_flags(floatX="float32"):
        r = tt.arange(*args)
        x = tt.fvector("x")
        f = theano_dag.function([x], [r, r + x])
        n = len(np.arange(*args))
        got, shifted = f(np.ones(n, dtype="float32"))
    assert r.dtype == "float32" and (r + x).dtype == "float32"
    assert got.dtype == shifted.dtype == np.float32
    np.testing.assert_array_equal(got, np.arange(*args, dtype="float32"))
    np.testing.assert_array_equal(shifted, np.arange(*args, dtype="float32") + 1)


def test_arange_dtype_from_its_arguments_under_float32():
    with config.change_flags(floatX="float32"):
        assert tt.arange(tt.fscalar()).dtype == "float32"
        assert tt.arange(tt.dscalar()).dtype == "float64"
        assert tt.arange(0, 1, np.float64(0.25)).dtype == "float64"  # an explicit float64
        assert tt.arange(tt.iscalar(), 10, 0.5).dtype == "float64"  # int32 with a float
        assert tt.arange(4).dtype == "int64"
    with config.change_flags(floatX="float64"):
        assert tt.arange(0.0, 1.0, 0.25).dtype == "float64"  # as numpy's
