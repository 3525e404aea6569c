"""``tensor.utils``: hash_from_ndarray and shape_of_variables."""

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.utils import hash_from_ndarray, shape_of_variables


def test_hash_from_ndarray_tells_values_shapes_dtypes_apart():
    a = np.arange(25).reshape(5, 5)
    arrays = [np.zeros((1, 5)), np.zeros((1, 6)), np.zeros((1, 0)), np.zeros((2, 0)), a, a.T]
    arrays += [np.zeros(3, dtype="uint32"), np.zeros(3, dtype="int32"), a[::2], a[::-1]]
    hashes = [hash_from_ndarray(x) for x in arrays]
    assert len(set(hashes)) == len(hashes)
    assert hash_from_ndarray(a[1:3, ::2]) == hash_from_ndarray(a[1:3, ::2].copy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_shape_of_variables(dtype):
    x = tt.matrix("x", dtype=dtype)
    y = tt.exp(x[1:]).T
    z = tt.dot(x, x.T)
    g = FunctionGraph([x], [y, z], clone=False)
    shapes = shape_of_variables(g, {x: (4, 3)})
    assert shapes[x] == (4, 3) and shapes[y] == (3, 3) and shapes[z] == (4, 4)
    with pytest.raises(ValueError, match="not inputs of fgraph"):
        shape_of_variables(FunctionGraph([x], [y]), {x: (4, 3)})
