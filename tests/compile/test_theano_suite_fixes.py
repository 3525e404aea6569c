"""Function behaviours found by running theano-pymc 1.1.2's own compile tests in full
against theano_dag; each test failed before its fix, on every engine."""

import inspect

import numpy as np
import pytest
from engine_modes import ENGINES  # the reference, CPU and OpenCL engines (skipped without)

import theano_dag.tensor as tt
from theano_dag import In, function
from theano_dag.compile.mode import Mode


@pytest.mark.parametrize("engine", ENGINES)
def test_a_value_given_to_one_call_leaves_the_default(engine):
    # In(a, value=1.0): f(x, a=2.0) uses 2.0 for that call only; f[a] and f.value stay
    # 1.0, and a state (s, updated) keeps what the calls made of it.
    x, s, a = tt.scalars("x", "s", "a")
    f = function(
        [x, In(a, value=1.0, name="a"), In(s, value=0.0, update=s + a * x)],
        s + a * x,
        mode=Mode(linker=engine),
    )
    assert float(f(3.0)) == 3.0
    assert float(f(3.0, a=2.0)) == 9.0
    assert float(f[a]) == 1.0 and float(f.value["a"]) == 1.0
    assert float(f[s]) == 9.0
    assert float(f(1.0)) == 10.0
    f[a] = 5.0
    assert float(f[a]) == 5.0 and float(f(1.0)) == 15.0
    assert np.isclose(float(f["s"]), 15.0)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "name",
    [
        "inplace_elemwise_optimizer",
        "inplace_elemwise_opt",
        "inplace_opt",
        "InplaceBlasOpt",
        "blas_opt_inplace",
        "typed_list_inplace_opt",
    ],
)
def test_theanos_names_of_the_inplace_pass_exclude_it(engine, name):
    # mode.excluding("inplace_elemwise_optimizer") (Theano's MonitorMode test): no node
    # overwrites an input, and the values are numpy's
    x = tt.dvector("x")
    o = tt.outer(x, x)
    out = tt.log(o) * o
    with_inplace = function([x], out, mode=Mode(linker=engine, optimizer="fast_run"))
    assert any(n.op.destroy_map for n in with_inplace.maker.fgraph.apply_nodes)
    mode = Mode(linker=engine, optimizer="fast_run").excluding(name)
    f = function([x], out, mode=mode)
    assert not any(n.op.destroy_map for n in f.maker.fgraph.apply_nodes)
    v = np.array([0.5, 2.0, 3.0])
    want = np.log(np.outer(v, v)) * np.outer(v, v)
    np.testing.assert_allclose(f(v), want, rtol=1e-12)
    np.testing.assert_allclose(with_inplace(v), want, rtol=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_theanos_name_of_the_blas_pass_excludes_it(engine):
    # mode.excluding("BlasOpt"): the product stays a Dot (no Dot22/Gemm), same values
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    out = tt.dot(x, y) * 2.0 + x
    fast = function([x, y], out, mode=Mode(linker=engine, optimizer="fast_run"))
    plain = function(
        [x, y], out, mode=Mode(linker=engine, optimizer="fast_run").excluding("BlasOpt")
    )
    blas_ops = {"Dot22", "Dot22Scalar", "Gemm", "Gemv", "Ger"}
    names = {type(n.op).__name__ for n in plain.maker.fgraph.apply_nodes}
    assert "Dot" in names and not names & blas_ops
    assert {type(n.op).__name__ for n in fast.maker.fgraph.apply_nodes} & blas_ops
    a, b = np.arange(6.0).reshape(2, 3), np.arange(9.0).reshape(3, 3) / 7
    want = a @ b * 2.0 + a
    np.testing.assert_allclose(plain(a, b), want, rtol=1e-12)
    np.testing.assert_allclose(fast(a, b), want, rtol=1e-12)
    # ... and including("BlasOpt") with no other rewrites runs the pass's rules, as in
    # Theano (its rules carry the pass's name)
    only = function([x, y], out, mode=Mode(linker=engine, optimizer=None).including("BlasOpt"))
    assert {type(n.op).__name__ for n in only.maker.fgraph.apply_nodes} & blas_ops
    np.testing.assert_allclose(only(a, b), want, rtol=1e-12)


def test_function_default_name_is_the_callers_file_and_line():
    # Theano names a function by where it was made; a name given is kept; errors still
    # name the function only by a name its user gave
    x = tt.dvector("x")
    line = inspect.currentframe().f_lineno
    f = function([x], x + 1.0)
    assert f.name == f"{__file__}:{line + 1}"
    assert function([x], x + 1.0, name="mine").name == "mine"
    with pytest.raises(TypeError, match="^Function: bad input"):
        f("not a number")
