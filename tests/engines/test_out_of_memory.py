"""An allocation that fails names what asked for it: the node(s), their values' dtypes and
shapes, not the byte array that numpy names.

The sizes are beyond any machine's address space (2 PiB), so the allocation fails
everywhere, whatever the overcommit policy; the inputs are zero-stride views of one number
(``np.broadcast_to``), so the test itself uses no memory to speak of.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu import CPULinker
from theano_dag.engines.opencl.context import opencl_available

OPENCL, _WHY = opencl_available()
N = 2**24  # an N x N float64 matrix is 2 PiB
HUGE = np.broadcast_to(np.float64(1.0), (N,))
SHAPE = f"float64, shape ({N}, {N})"


def _cpu(**kw):
    return Mode(linker=CPULinker(min_plan_bytes=0, **kw), optimizer="fast_run")


def _raises_block_error(f, *args):
    with pytest.raises(MemoryError) as info:
        f(*args)
    text = str(info.value)
    assert type(info.value) is MemoryError
    assert re.match(r"CPU engine: out of memory for block \d+ of the memory plan \(", text)
    assert "Unable to allocate" not in text  # numpy's message, about a uint8 array
    assert isinstance(info.value.__cause__, MemoryError)  # numpy's, chained
    assert f"The function's input shapes: ({N},), ({N},)" in text
    assert "Backtrace when the node is created" in text
    assert __file__ in text
    return text


def test_a_planned_block_that_fails_names_the_values_it_holds():
    x, y = tt.dvector("x"), tt.dvector("y")
    f = theano_dag.function([x, y], tt.exp(tt.outer(x, y) + 1).sum(axis=0), mode=_cpu())
    text = _raises_block_error(f, HUGE, HUGE)
    shuffles = "InplaceDimShuffle{0,x}.0, InplaceDimShuffle{x,0}.0"
    assert f"Dot22.0 = Dot22({shuffles}): {SHAPE}" in text
    # The plan is made again at the next call: a small one works.
    np.testing.assert_allclose(f(np.ones(3), np.ones(3)), np.full(3, 3 * np.e**2))


def test_a_per_call_output_block_that_fails_names_its_value():
    x, y = tt.dvector("x"), tt.dvector("y")
    f = theano_dag.function([x, y], tt.outer(x, y) * 2, mode=_cpu())
    np.testing.assert_allclose(f(np.ones(2), np.ones(2)), np.full((2, 2), 2.0))
    text = _raises_block_error(f, HUGE, HUGE)
    assert "which holds 1 value:\n" in text and SHAPE in text
    np.testing.assert_allclose(f(np.ones(2), np.ones(2)), np.full((2, 2), 2.0))


def test_an_own_buffer_that_fails_names_its_value():
    x, y = tt.dvector("x"), tt.dvector("y")
    out = theano_dag.Out(tt.outer(x, y) * 2, borrow=True)  # a buffer the plan keeps
    f = theano_dag.function([x, y], out, mode=_cpu())
    with pytest.raises(MemoryError) as info:
        f(HUGE, HUGE)
    assert str(info.value) == (
        "CPU engine: out of memory for a buffer of 2097152.0 GiB, which holds 1 value:\n"
        "  Dot22Scalar.0 = Dot22Scalar(InplaceDimShuffle{0,x}.0, InplaceDimShuffle{x,0}.0, "
        f"2.0): {SHAPE}"
    )


ENGINES = [
    pytest.param(lambda: None, id="cpu"),
    pytest.param(lambda: "FAST_COMPILE", id="fast_compile"),
    pytest.param(lambda: Mode(linker="py", optimizer=None), id="py"),
    pytest.param(
        lambda: Mode(linker="opencl"),
        id="opencl",
        marks=pytest.mark.skipif(not OPENCL, reason=f"no OpenCL device: {_WHY}"),
    ),
]


@pytest.mark.parametrize("engine", ENGINES)
def test_numpy_running_out_of_memory_in_a_node_names_the_node(engine):
    # Alloc's output is allocated by numpy inside the node, on every engine.
    x, n = tt.dvector("x"), tt.lscalar("n")
    f = theano_dag.function([x, n], tt.alloc(x, n, x.shape[0]), mode=engine())
    with pytest.raises(MemoryError) as info:
        f(HUGE, N)
    text = str(info.value)
    assert text.startswith(f"Unable to allocate 2.00 PiB for an array with shape ({N}, {N})")
    assert "Apply node that caused the error: Alloc(x, n, " in text
    assert isinstance(info.value.__cause__, MemoryError)
