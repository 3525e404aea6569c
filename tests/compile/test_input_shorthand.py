"""Theano's tuple shorthand for function inputs (``convert_function_input``): ``(x, value)``,
``((x, update), value)``, ``(name, x, value)`` and ``(name, (x, update), value)`` stand for
``In``s, the state they keep is read and written through ``fn[name]``, ``fn.value`` and
``fn.container``, and a malformed tuple is refused naming it."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.io import In, convert_function_input
from theano_dag.compile.mode import Mode
from theano_dag.config import config

MODES = [
    pytest.param(lambda: None, id="cpu"),
    pytest.param("no_c", id="cpu_without_c"),
    pytest.param(lambda: "FAST_COMPILE", id="fast_compile"),
    pytest.param(lambda: Mode(linker="py", optimizer=None), id="py"),
]


def _function(mode, inputs, outputs):
    flags = {"cxx": ""} if mode == "no_c" else {}
    with config.change_flags(**flags):
        return theano_dag.function(inputs, outputs, mode=None if mode == "no_c" else mode())


@pytest.mark.parametrize("mode", MODES)
def test_state_kept_by_the_function_is_read_and_written_three_ways(mode):
    # Theano's documentation of function inputs, value for value.
    a, b, c = tt.dscalars("x", "y", "s")
    fn = _function(mode, [a, b, ((c, c + a + b), 10.0)], [])
    assert fn["s"] is fn.value[c] and fn["s"] is fn.container[c].value
    assert fn["s"] == 10.0
    assert fn(1, 2) == [] and fn["s"] == 13.0
    fn["s"] = 99.0
    fn(1, 0)
    assert fn["s"] == 100.0
    fn.value[c] = 99.0
    fn(1, 0)
    assert fn["s"] == 100.0 and fn["s"] == fn.container[c].value


@pytest.mark.parametrize("mode", MODES)
def test_defaults_names_and_updates_in_one_list(mode):
    x, y, z, w = tt.dscalar(), tt.dscalar("y"), tt.dscalar("z"), tt.dscalar("w")
    fn = _function(mode, [x, y, In(z, value=42), ((w, w + x), 0)], x + y + z)
    assert [float(fn(1, 2)), float(fn["w"])] == [45.0, 1.0]  # z is 42, w goes 0 -> 1
    assert [float(fn(1, y=2)), float(fn["w"])] == [45.0, 2.0]
    assert [float(fn(1, 2, 3)), float(fn["w"])] == [6.0, 3.0]
    assert [float(fn(1, 2, w=400)), float(fn["w"])] == [45.0, 401.0]
    with pytest.raises(TypeError, match="missing a value for input 'y'"):
        fn(1)
    # a name first: the keyword that sets the input, and the key of its state
    v = tt.dscalar("v")
    g = _function(mode, [x, ("total", (v, v + x), 5.0), ("k", z, 2.0)], v * z)
    assert float(g(1.0)) == 10.0 and float(g["total"]) == 6.0
    assert float(g(1.0, k=3.0)) == 18.0 and float(g["total"]) == 7.0


def test_each_form_stands_for_an_in():
    x, up = tt.dscalar("x"), tt.dscalar("u")
    cases = {
        (x, 3.0): ("x", 3.0, None),
        ((x, up), 3.0): ("x", 3.0, up),
        ("n", x): ("n", None, None),
        ("n", x, 3.0): ("n", 3.0, None),
        ("n", (x, up), 3.0): ("n", 3.0, up),
    }
    for spec, (name, value, update) in cases.items():
        got = convert_function_input(spec)
        assert isinstance(got, In) and got.variable is x, spec
        assert (got.name, got.value, got.update) == (name, value, update), spec
        assert got.mutable == (update is not None)
    given = In(x)
    assert convert_function_input(given) is given
    assert convert_function_input((given, 7.0)).value == 7.0


@pytest.mark.parametrize(
    "spec, message",
    [
        ((), "Invalid input syntax"),
        (("n",), "Invalid input syntax"),
        ((1.0, 2.0), "Invalid input syntax"),
        (((tt.dscalar("x"),), 1.0), "Invalid input syntax"),
        ((tt.dscalar("x"), 1.0, 2.0), "Invalid input syntax"),
        (((tt.dscalar("x"), 2.0), 1.0), "the update 2.0 is no Variable"),
        ((tt.dscalar("x"), tt.dscalar("v")), "must be a value, not the symbolic v"),
        (tt.constant(1.0), "Constants are not allowed as function inputs"),
        (3, "is not a Variable, an In, or Theano's tuple shorthand"),
    ],
)
def test_a_malformed_shorthand_is_refused_naming_it(spec, message):
    with pytest.raises(TypeError, match=message):
        convert_function_input(spec)


def test_function_refuses_a_malformed_shorthand_before_compiling():
    x = tt.dscalar("x")
    with pytest.raises(TypeError, match=r"Invalid input syntax: \(x, 1.0, 2.0\)"):
        theano_dag.function([x, (x, 1.0, 2.0)], x)
    # a function whose inputs are all plain variables is not read as shorthand
    assert float(theano_dag.function([x], x * 2)(np.float64(3.0))) == 6.0
