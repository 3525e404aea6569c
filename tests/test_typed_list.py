"""theano_dag.typed_list (Theano's typed lists) and tensor.shape_feature.ShapeFeature."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.shape_feature import ShapeFeature
from theano_dag.typed_list import TypedListType, append, getitem, length, make_list


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_list_ops_values(dtype):
    a, b = tt.vector("a", dtype=dtype), tt.vector("b", dtype=dtype)
    lst = make_list([a, b])
    assert lst.type == TypedListType(a.type)
    i = tt.lscalar("i")
    f = theano_dag.function([a, b, i], [length(append(lst, a)), getitem(lst, i)])
    av, bv = np.arange(3, dtype=dtype), np.ones(2, dtype=dtype)
    n, item = f(av, bv, 1)
    assert int(n) == 3
    np.testing.assert_array_equal(item, bv)
    assert item.dtype == dtype


def test_list_errors():
    with pytest.raises(TypeError, match="element 1 has type"):
        make_list([tt.dvector(), tt.fvector()])
    with pytest.raises(TypeError, match="integer scalar"):
        getitem(make_list([tt.dvector()]), tt.dscalar())
    with pytest.raises(TypeError, match="takes a list"):
        TypedListType(tt.dvector().type).filter(np.zeros(2))


def test_shape_feature_follows_infer_shape():
    x, y = tt.dmatrix("x"), tt.dvector("y")
    out = tt.exp(x) + y  # broadcasts y over the rows of x
    fg = FunctionGraph([x, y], [out, x.T], clone=False)
    sf = ShapeFeature()
    fg.attach_feature(sf)
    assert fg.shape_feature is sf
    assert sf.same_shape(x, out, 0, 0)
    assert sf.same_shape(x, fg.outputs[1], 1, 0) and not sf.same_shape(x, fg.outputs[1])
    f = theano_dag.function([x, y], list(sf.shape_tuple(out)), on_unused_input="ignore")
    assert [int(v) for v in f(np.zeros((2, 3)), np.zeros(3))] == [2, 3]
    fg.remove_feature(sf)
    assert not hasattr(fg, "shape_feature")
