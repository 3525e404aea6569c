"""theano_dag.typed_list (Theano's typed lists)."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.typed_list import TypedListType, append, getitem, length, make_list
from theano_dag.typed_list.basic import Append, Reverse, TypedListVariable


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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_list_methods_values(dtype):
    a, b = tt.vector("a", dtype=dtype), tt.vector("b", dtype=dtype)
    lst = make_list([a, b])
    i = tt.lscalar("i")
    outs = [
        lst.extend(make_list([b])),
        lst.insert(i, a * 3),
        lst.append(b).remove(b),
        lst.reverse(),
        lst[1:],
        lst.ind(b),
        lst.append(b).count(b),
        lst.__len__(),
    ]
    f = theano_dag.function([a, b, i], outs)
    av, bv = np.arange(2, dtype=dtype), np.ones(2, dtype=dtype)
    ext, ins, rem, rev, tail, ind, cnt, n = f(av, bv, 1)
    py = [av, bv]
    for got, want in [
        (ext, [av, bv, bv]),
        (ins, [av, av * 3, bv]),
        (rem, [av, bv]),
        (rev, [bv, av]),
        (tail, [bv]),
    ]:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert g.dtype == dtype
    assert (int(ind), int(cnt), int(n)) == (1, 2, 2)
    assert all(not np.shares_memory(g, p) for g in ext for p in py)
    with pytest.raises(ValueError, match="not in the list"):
        theano_dag.function([a, b], lst.ind(a + 5))(av, bv)


def test_list_types_depth_and_errors():
    m = tt.dmatrix().type
    nested = TypedListType(TypedListType(TypedListType(m)))
    assert TypedListType(m, 2) == nested and nested.get_depth() == 2
    assert nested != TypedListType(TypedListType(m))
    assert isinstance(nested(), TypedListVariable)
    with pytest.raises(TypeError, match="must be a Type"):
        TypedListType(None)
    with pytest.raises(TypeError):
        TypedListType(m).filter([4])
    assert TypedListType(m).filter([np.zeros((2, 2), dtype="float32")])[0].dtype == "float64"


def test_inplace_rewrite_changes_an_unshared_list():
    a, b = tt.dvectors("a", "b")
    lst = TypedListType(a.type)("lst")
    out = Reverse()(Append()(lst, a))
    f = theano_dag.function([theano_dag.In(lst, mutable=True), a], out)
    assert [n.op.inplace for n in f.maker.fgraph.toposort()] == [True, True]
    got = f([np.zeros(2)], np.ones(2))
    np.testing.assert_array_equal(np.array(got), [[1.0, 1.0], [0.0, 0.0]])
    # The caller's list may not be changed (not mutable): only the copy is changed in place.
    g = theano_dag.function([lst, a], out)
    assert [n.op.inplace for n in g.maker.fgraph.toposort()] == [False, True]
    value = [np.zeros(2)]
    g(value, np.ones(2))
    assert len(value) == 1
    excluded = theano_dag.compile.mode.get_default_mode().excluding("inplace")
    h = theano_dag.function([theano_dag.In(lst, mutable=True), a], out, mode=excluded)
    assert [n.op.inplace for n in h.maker.fgraph.toposort()] == [False, False]
