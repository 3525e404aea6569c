"""Symbolic slices and None (theano_dag.tensor.type_other), and Theano's
``AdvancedSubtensor()`` whose index kinds come from its arguments."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile import Mode
from theano_dag.graph.basic import Constant
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.rewriting import pre_greedy_local_optimizer
from theano_dag.opt.tensor_opt import constant_folding
from theano_dag.tensor.subtensor import AdvancedSubtensor
from theano_dag.tensor.type_other import (
    MakeSlice,
    NoneConst,
    SliceConstant,
    as_int_none_variable,
    slicetype,
)


def test_make_slice_runs_and_folds():
    i = tt.iscalar("i")
    s = MakeSlice()(1, i, None)
    assert s.type == slicetype
    f = theano_dag.function([i], s, mode=Mode(linker="py"))
    assert f(7) == slice(1, 7, None)
    folded = pre_greedy_local_optimizer(FunctionGraph([], []), [constant_folding], MakeSlice()(2))
    assert isinstance(folded, SliceConstant) and folded.data == slice(2, None, None)
    assert isinstance(hash(folded.signature()), int)


def test_slice_constant_signature_compares_bounds():
    a = SliceConstant(slicetype, slice(np.int64(1), None, 2))
    b = SliceConstant(slicetype, slice(1, None, 2))
    assert a.signature() == b.signature() and a.equals(b)
    assert not a.equals(SliceConstant(slicetype, slice(1, None, 3)))
    assert str(b) == "SliceConstant{1, None, 2}"
    with pytest.raises(TypeError, match="Expected a slice"):
        slicetype.filter(3)


def test_none_const_and_bounds():
    assert isinstance(NoneConst, Constant) and NoneConst.data is None
    assert as_int_none_variable(None) is NoneConst
    with pytest.raises(TypeError, match="integer scalar or None"):
        as_int_none_variable(tt.dscalar())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_advanced_subtensor_without_idx_list_takes_a_constant_slice(dtype):
    x = tt.matrix("x", dtype=dtype)
    out = AdvancedSubtensor()(x, [2, 3], SliceConstant(slicetype, slice(1, None, 2)))
    v = np.arange(20, dtype=dtype).reshape(4, 5)
    np.testing.assert_array_equal(theano_dag.function([x], out)(v), v[[2, 3], 1::2])
