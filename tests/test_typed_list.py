"""theano_dag.typed_list (Theano's typed lists)."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
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


@pytest.mark.parametrize("linker", ["py", "cpu"])
def test_shape_of_a_typed_list_is_numpys_shape_of_its_value(linker):
    # shape() and shape_i() of a typed list raised (it is not a tensor); Theano's Shape
    # took any variable: numpy.shape of the list of equally shaped arrays
    a, b = tt.tensor3("a"), tt.tensor3("b")
    tl = make_list([a, b])
    shp, first = tt.shape(tl), tt.shape_i(tl, 0)
    assert isinstance(shp.owner.op, tt.ValueShape) and shp.type.shape == (None,)
    f = theano_dag.function([a, b], [shp, first], mode=theano_dag.Mode(linker=linker))
    v = np.zeros((2, 3, 4), dtype=a.dtype)
    got_shape, got_first = f(v, v)
    assert got_shape.dtype == "int64" and got_shape.tolist() == [2, 2, 3, 4]
    assert int(got_first) == 2
    with pytest.raises(TypeError, match="ValueShape: expected a variable"):
        tt.ValueShape()([1, 2])
