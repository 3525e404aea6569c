"""An optimized graph that holds a check of lengths (``EqualLengths``) exported: the dict
formats carry the op itself, PyTensor gets its ``Assert`` (and gives ours back), and ONNX,
which has no operator that raises, a clear error."""

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.formats import convert, from_pytensor, to_pytensor
from theano_dag.formats.onnx import OnnxExportError, to_onnx
from theano_dag.tensor.arrays import Assert
from theano_dag.tensor.shape import EqualLengths, LengthMismatchError

x, y = tt.dvector("x"), tt.dvector("y")
MESSAGE = "Elemwise{mul,no_inplace} along dimension 0: lengths that must be equal differ"


def _checked_fgraph():
    f = theano_dag.function([x, y], tt.alloc(0.0, (x * y).shape[0]))
    fg = f.maker.fgraph
    assert any(isinstance(n.op, EqualLengths) for n in fg.apply_nodes)
    return fg


@pytest.mark.parametrize("fmt", ["dag", "tuple_dag", "index_dag"])
def test_a_dict_format_keeps_the_check(fmt):
    fg = _checked_fgraph()
    graph = convert(fg, to=fmt)
    assert any(isinstance(job["fn"], EqualLengths) for job in graph.values())
    back = convert(graph, to="fgraph")
    f = theano_dag.function(back.inputs, back.outputs)
    np.testing.assert_array_equal(f(np.ones(3), np.ones(3))[0], np.zeros(3))
    with pytest.raises(LengthMismatchError) as info:
        f(np.ones(3), np.ones(4))
    assert str(info.value).splitlines()[0] == f"{MESSAGE} (x: 3, y: 4)"


def test_pytensor_gets_an_assert():
    pytensor = pytest.importorskip("pytensor")

    pfg = to_pytensor(_checked_fgraph(), strict=True)
    (check,) = [n for n in pfg.apply_nodes if type(n.op).__name__ == "Assert"]
    assert check.op.msg == f"{MESSAGE} (x, y)"
    pf = pytensor.function(pfg.inputs, pfg.outputs)
    np.testing.assert_array_equal(pf(np.ones(3), np.ones(3))[0], np.zeros(3))
    with pytest.raises(AssertionError, match=r"differ \(x, y\)"):
        pf(np.ones(3), np.ones(4))
    back = from_pytensor(pfg)
    assert any(isinstance(n.op, Assert) for n in back.apply_nodes)
    f = theano_dag.function(back.inputs, back.outputs)
    with pytest.raises(AssertionError, match=r"differ \(x, y\)"):
        f(np.ones(3), np.ones(4))


def test_onnx_refuses_a_check_clearly():
    pytest.importorskip("onnx")

    with pytest.raises(OnnxExportError) as info:
        to_onnx(_checked_fgraph())
    assert str(info.value).startswith(
        "to_onnx: no ONNX operator for EqualLengths (EqualLengths), a check that raises"
    )
    assert "local_remove_all_assert" in str(info.value)
