"""Theano's subtensor helpers (advanced_inc/set_subtensor[1], get_canonical_form_slice,
basic_shape, indexed_result_shape, type_other.make_slice) against numpy's indexing."""

import itertools

import numpy as np
import pytest

from theano_dag import function
from theano_dag import tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.tensor.subtensor import (
    advanced_inc_subtensor,
    advanced_inc_subtensor1,
    advanced_set_subtensor,
    advanced_set_subtensor1,
    basic_shape,
    get_canonical_form_slice,
    indexed_result_shape,
)
from theano_dag.tensor.type_other import make_slice

ENGINES = [Mode(linker="py"), Mode(linker="cpu")]


@pytest.mark.parametrize("mode", ENGINES, ids=["py", "cpu"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_advanced_inc_and_set(dtype, mode):
    x = tt.matrix("x", dtype=dtype)
    y = tt.vector("y", dtype=dtype)
    xv = np.arange(12, dtype=dtype).reshape(4, 3)
    yv = np.array([1.0, 2.0, 3.0], dtype=dtype)
    rows = [1, 1, 3]
    f = function(
        [x, y],
        [
            advanced_inc_subtensor1(x, y, rows),
            advanced_set_subtensor1(x, y, [0, 2]),
            advanced_inc_subtensor(x, 5.0, [0, 0], [2, 2]),
            advanced_set_subtensor(x, -1.0, [0, 3], [1, 2]),
        ],
        mode=mode,
    )
    outs = f(xv, yv)
    ref = xv.copy()
    np.add.at(ref, rows, yv)
    np.testing.assert_array_equal(outs[0], ref)
    ref = xv.copy()
    ref[[0, 2]] = yv
    np.testing.assert_array_equal(outs[1], ref)
    ref = xv.copy()
    np.add.at(ref, ([0, 0], [2, 2]), 5.0)
    np.testing.assert_array_equal(outs[2], ref)
    ref = xv.copy()
    ref[[0, 3], [1, 2]] = -1.0
    np.testing.assert_array_equal(outs[3], ref)


def test_canonical_form_slice_reproduces_every_slice():
    start, stop, step, length = tt.lscalars("start", "stop", "step", "length")
    canon, direction = get_canonical_form_slice(slice(start, stop, step), length)
    f = function([start, stop, step, length], [canon.start, canon.stop, canon.step, direction])
    a = np.arange(7)
    for b, e, s in itertools.product([-9, -3, 0, 2, 6, 9], [-9, -1, 0, 3, 7, 10], [-3, -1, 1, 2]):
        c0, c1, c2, d = (int(v) for v in f(b, e, s, len(a)))
        assert c2 > 0
        np.testing.assert_array_equal(a[c0:c1:c2][::d], a[b:e:s], err_msg=str((b, e, s)))
    none_canon, d = get_canonical_form_slice(slice(None, None, -2), 7)
    parts = [int(v.eval()) for v in (none_canon.start, none_canon.stop, none_canon.step, d)]
    np.testing.assert_array_equal(a[parts[0] : parts[1] : parts[2]][:: parts[3]], a[::-2])


def _value(v):
    return int(np.asarray(v.eval() if hasattr(v, "eval") else v))


def test_basic_and_indexed_result_shapes():
    assert [_value(v) for v in basic_shape((5, 4), (make_slice(1, 3),))] == [2]
    n = tt.lscalar("n")
    (length,) = basic_shape((n, 4), (slice(1, None, 2),))
    assert function([n], length)(9) == 4
    a = np.arange(5 * 6 * 7).reshape(5, 6, 7)
    for idx in [(slice(None),), (np.array([0, 2]), slice(1, 3)), (1, np.array([[0], [1]]))]:
        sym = tuple(tt.as_tensor(i) if isinstance(i, np.ndarray) else i for i in idx)
        shape = indexed_result_shape(tt.as_tensor(a).shape, sym)
        assert tuple(_value(d) for d in shape) == a[idx].shape
    # Theano's make_slice is MakeSlice's instance: a slice variable whose bounds count.
    (length,) = basic_shape((n, 4), (make_slice(1, None, 2),))
    assert function([n], length)(9) == 4
