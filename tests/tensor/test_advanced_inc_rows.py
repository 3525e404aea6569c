"""``AdvancedIncSubtensor1`` adding into a float vector (``inc_subtensor(x[i], y)``, the
gradient of ``a[group]``): repeated indices accumulate, negative ones count from the end,
an index out of range raises, on every engine and against ``numpy.add.at``."""

import numpy as np
import pytest
from engine_modes import ENGINES, FLOATS, mode_of

from theano_dag import function
from theano_dag import tensor as tt
from theano_dag.tensor import subtensor
from theano_dag.tensor.subtensor import AdvancedIncSubtensor1, _add_counts


def _want(x, i, y):
    out = x.copy()
    np.add.at(out, i, y)
    return out


CASES = {
    "repeated": (np.arange(12) % 5, np.linspace(-1.0, 2.0, 12)),
    "negative": (np.array([0, -1, 3, -1, 2]), np.array([1.0, 2.0, 3.0, 4.0, 5.0])),
    "scalar_y": (np.array([1, 1, 4]), np.float64(0.5)),
    "empty": (np.zeros(0, dtype="int64"), np.zeros(0)),
}


@pytest.mark.parametrize("slow_add_at", [False, True])
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_inc_rows_of_a_vector_against_add_at(monkeypatch, engine, dtype, case, slow_add_at):
    # both paths, whichever numpy runs the test (bincount where numpy's add.at is slow)
    monkeypatch.setattr(subtensor, "_ADD_AT_SLOW", slow_add_at)
    i_val, y_val = CASES[case]
    x_val = np.linspace(0.0, 1.0, 5).astype(dtype)
    x, i = tt.vector("x", dtype=dtype), tt.lvector("i")
    y = tt.scalar("y", dtype=dtype) if np.ndim(y_val) == 0 else tt.vector("y", dtype=dtype)
    out = AdvancedIncSubtensor1()(x, y, i)
    f = function([x, y, i], out, mode=mode_of(engine))
    got = f(x_val, np.asarray(y_val, dtype=dtype), i_val)
    want = _want(x_val, i_val, np.asarray(y_val, dtype=dtype))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-12)
    np.testing.assert_array_equal(x_val, np.linspace(0.0, 1.0, 5).astype(dtype))  # untouched


@pytest.mark.parametrize("slow_add_at", [False, True])
@pytest.mark.parametrize("engine", ENGINES)
def test_inc_rows_index_out_of_range_raises(monkeypatch, engine, slow_add_at):
    monkeypatch.setattr(subtensor, "_ADD_AT_SLOW", slow_add_at)
    x, y, i = tt.dvector("x"), tt.dvector("y"), tt.lvector("i")
    f = function([x, y, i], AdvancedIncSubtensor1()(x, y, i), mode=mode_of(engine))
    with pytest.raises(IndexError):
        f(np.zeros(3), np.ones(2), np.array([0, 3]))
    with pytest.raises(IndexError):
        f(np.zeros(3), np.ones(2), np.array([0, -4]))


def test_add_counts_applies_only_where_bincount_gives_add_at(monkeypatch):
    monkeypatch.setattr(subtensor, "_ADD_AT_SLOW", True)  # numpy 2's add.at is fast
    out = np.zeros(4)
    assert _add_counts(out, np.array([1, 1, 3]), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(out, [0.0, 3.0, 0.0, 3.0])
    huge = np.array([0, 10**15])  # refused before bincount would make room for it
    for i in (np.array([0, -1]), np.array([0, 4]), huge, np.array([], dtype="int64")):
        before = out.copy()
        assert not _add_counts(out, i, np.ones(i.shape))
        np.testing.assert_array_equal(out, before)  # left to np.add.at, untouched
    assert not _add_counts(np.zeros((2, 2)), np.array([0]), np.ones((1, 2)))  # rows
    assert not _add_counts(np.zeros(3, dtype="int64"), np.array([0]), np.ones(1))
    assert not _add_counts(np.zeros(3), np.array([0]), np.ones(1, dtype=complex))
