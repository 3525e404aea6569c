"""Theano's linker classes (OpWiseCLinker, VMLinker) on the reference engine."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag import scalar
from theano_dag.compile import Mode
from theano_dag.engines.theano_linkers import Loop, MissingGXX, OpWiseCLinker, VMLinker
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import COp


class _Twice(COp):
    __props__ = ()

    def make_node(self, x):
        x = scalar.as_scalar(x)
        return Apply(self, [x], [x.type()])

    def c_code(self, node, name, inp, out, sub):
        return f"{out[0]} = 2 * {inp[0]};"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_vm_linker_calls_back_after_each_node(dtype):
    calls = []

    def callback(node, thunk, storage_map, compute_map):
        calls.append((str(node.op), storage_map[node.outputs[0]][0]))

    a, b, c = (tt.scalar(n, dtype=dtype) for n in "abc")
    f = theano_dag.function(
        [a, b, c], (a + b) * c, mode=Mode(optimizer=None, linker=VMLinker(callback=callback))
    )
    assert f(1, 2, 3) == 9
    assert len(calls) == len(f.maker.fgraph.toposort()) == 2
    assert calls[-1][1] == 9
    f(1, 1, 1)
    assert len(calls) == 4


def test_vm_linker_without_callback_and_its_arguments():
    x = tt.dvector("x")
    for linker in (VMLinker(allow_gc=False, use_cloop=False), VMLinker(lazy=True)):
        f = theano_dag.function([x], tt.exp(x) + 1, mode=Mode(linker=linker))
        np.testing.assert_allclose(f([0.0, 1.0]), np.exp([0.0, 1.0]) + 1)
    assert issubclass(MissingGXX, Exception) and Loop is not None


def test_opwise_c_linker_runs_cops_c_code_and_perform():
    i = scalar.float64("i")
    f = theano_dag.function(
        [i],
        _Twice()(i) + scalar.float64("k").type.make_constant(1.0),
        mode=Mode(linker=OpWiseCLinker()),
    )
    assert f(3.0) == 7.0
