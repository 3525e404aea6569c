"""Compiled functions pickle in every mode and engine (Theano's contract): the maker
pickles the user's graph and the Mode, loading compiles it again, shared values and
input states come along."""

import copy
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.io import In
from theano_dag.compile.mode import Mode
from theano_dag.engines.opencl.context import opencl_available

OCL_OK, OCL_WHY = opencl_available()

MODES = [
    pytest.param("FAST_RUN", id="FAST_RUN"),
    pytest.param("FAST_COMPILE", id="FAST_COMPILE"),
    pytest.param(Mode(linker="py"), id="py"),
    pytest.param(Mode(linker="cpu", optimizer=None), id="cpu-no-rewrites"),
    pytest.param(
        Mode(linker="opencl"),
        id="opencl",
        marks=pytest.mark.skipif(not OCL_OK, reason=f"no OpenCL device: {OCL_WHY}"),
    ),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pickled_function_gives_same_values_and_updates(mode, dtype):
    x = tt.matrix("x", dtype=dtype)
    w = theano_dag.shared(np.linspace(-1, 1, 6).reshape(3, 2).astype(dtype), name="w")
    y = tt.tanh(tt.dot(x, w)).sum(axis=1)
    f = theano_dag.function([x], y, mode=mode, updates=[(w, w * 2)])
    xv = (np.arange(6).reshape(2, 3) / 10).astype(dtype)
    f(xv)  # w doubled once before pickling
    g = pickle.loads(pickle.dumps(f))
    (g_w,) = g.get_shared()
    assert g_w is not w and g_w.name == "w"
    np.testing.assert_array_equal(g_w.get_value(), w.get_value())
    expected = f(xv)
    got = g(xv)
    assert got.dtype == expected.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    # The loaded function updates its own copy of w, not the original.
    np.testing.assert_array_equal(g_w.get_value(), w.get_value())
    g(xv)
    np.testing.assert_allclose(g_w.get_value(), 2 * w.get_value())


@pytest.mark.parametrize("reoptimize", [True, False])
def test_reoptimize_unpickled_function_flag_loads_the_same_function(reoptimize):
    """Theano's flag: either setting loads a function that gives the same values (here
    the user's graph is pickled and compiled with the function's mode on load)."""
    x1, x2 = tt.fmatrix("x1"), tt.fmatrix("x2")
    x3 = theano_dag.shared(np.ones((4, 4), dtype="float32"))
    y = tt.sum(tt.sum(x1**2 + x2) + x3)
    f = theano_dag.function([x1, x2], y, updates=[(x3, x3 + 1)])
    blob = pickle.dumps(f, -1)
    a = np.full((4, 4), 0.5, dtype="float32")
    with theano_dag.config.change_flags(reoptimize_unpickled_function=reoptimize):
        g = pickle.loads(blob)
    assert g(a, a) == f(a, a) == np.float32(16 * (16 * 0.75 + 1))
    assert [o.op for o in g.maker.fgraph.toposort()] == [o.op for o in f.maker.fgraph.toposort()]


@pytest.mark.parametrize("mode", MODES[:3])
def test_pickle_keeps_defaults_states_names_and_output_forms(mode):
    x, y = tt.dscalar("x"), tt.dscalar("y")
    acc = tt.dscalar("acc")
    f = theano_dag.function(
        [x, In(y, value=3.0), In(acc, value=0.0, update=acc + x)],
        [x * y, acc],
        mode=mode,
        name="counter",
    )
    f(1.0)
    f(2.0)  # acc is now 3
    g = pickle.loads(pickle.dumps(f))
    assert g.name == "counter"
    assert g["acc"] == 3.0 and g["y"] == 3.0
    np.testing.assert_allclose(g(4.0), f(4.0))
    one = theano_dag.function([x], x + 1, mode=mode)
    assert pickle.loads(pickle.dumps(one))(1.0) == 2.0  # a single output stays unpacked
    none = theano_dag.function([x], None, mode=mode, on_unused_input="ignore")
    assert pickle.loads(pickle.dumps(none))(1.0) == []  # no outputs: [], as Theano's


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_functions_sharing_a_state_cell_share_the_loaded_one(mode, how):
    # In(s, value=f1.container[s]): f2 reads and updates f1's state. Pickled or
    # deep-copied together, the loaded pair shares one cell, apart from the originals.
    x, s, a = tt.dscalar("x"), tt.dscalar("s"), tt.dscalar("a")
    f1 = theano_dag.function(
        [x, In(a, value=2.0), In(s, value=0.0, update=s + a * x, mutable=True)],
        s + a * x,
        mode=mode,
    )
    f2 = theano_dag.function(
        [x, In(s, value=f1.container[s], update=s + x, mutable=True)], s + x, mode=mode
    )
    f1(1.0)  # s = 2
    f1(1.0, a=5.0)  # s = 7; the default of a stays 2
    f2(3.0)  # s = 10
    g1, g2 = pickle.loads(pickle.dumps([f1, f2])) if how == "pickle" else copy.deepcopy([f1, f2])
    assert g1.container["s"].storage is g2.container["s"].storage
    assert g1.container["s"].storage is not f1.container[s].storage
    assert g1["s"] == 10.0 and g2["s"] == 10.0 and g1["a"] == 2.0
    assert g2(1.0) == 11.0
    assert g1(1.0) == 13.0  # reads the 11 that g2 stored, with a's default
    assert g2["s"] == 13.0
    assert f1[s] == 10.0 and f2[s] == 10.0  # the originals are untouched


def test_deepcopy_shares_a_default_cell_that_another_function_reads():
    # Theano's test_deepcopy_shared_container: f reads h's default cell as an implicit
    # input; copied with one memo, the copies share theirs.
    a, x = tt.dscalar("a"), tt.dscalar("x")
    h = theano_dag.function([In(a, value=0.0)], a)
    f = theano_dag.function([x, In(a, value=h.container[a], implicit=True)], x + a)
    memo = {}
    ac = copy.deepcopy(a, memo)
    hc = copy.deepcopy(h, memo)
    fc = copy.deepcopy(f, memo)
    h[a] = 1.0
    hc[ac] = 2.0
    assert f[a] == 1.0 and fc[ac] == 2.0
    assert f(1.0) == 2.0 and fc(1.0) == 3.0


def test_pickle_keeps_trust_input_and_profile():
    x = tt.dvector("x")
    f = theano_dag.function([x], x * 2, profile=True)
    f.trust_input = True
    g = pickle.loads(pickle.dumps(f))
    assert g.trust_input is True
    assert g.profile is not None and g.profile is not f.profile
    np.testing.assert_array_equal(g(np.ones(2)), [2.0, 2.0])


def test_pickling_a_copy_says_why_it_cannot():
    x = tt.dvector("x")
    f = theano_dag.function([x], x * 2).copy()
    with pytest.raises(TypeError, match="already optimized graph"):
        pickle.dumps(f)


def test_trained_predict_function_loads_in_a_new_process(tmp_path):
    # Logistic regression trained by SGD; its predict function is pickled and loaded
    # by a fresh interpreter, which must give the predictions of this one.
    rng = np.random.default_rng(0)
    data = rng.normal(size=(40, 3))
    labels = (data @ [1.0, -2.0, 0.5] > 0).astype("float64")
    x, t = tt.dmatrix("x"), tt.dvector("t")
    w = theano_dag.shared(np.zeros(3), name="w")
    b = theano_dag.shared(0.0, name="b")
    p = tt.sigmoid(tt.dot(x, w) + b)
    cost = -(t * tt.log(p) + (1 - t) * tt.log(1 - p)).mean()
    gw, gb = theano_dag.grad(cost, [w, b])
    train = theano_dag.function([x, t], cost, updates=[(w, w - 0.5 * gw), (b, b - 0.5 * gb)])
    for _ in range(50):
        train(data, labels)
    predict = theano_dag.function([x], p > 0.5)
    path = tmp_path / "predict.pkl"
    path.write_bytes(pickle.dumps(predict))
    np.save(tmp_path / "data.npy", data)
    script = textwrap.dedent(
        f"""
        import pickle, numpy as np
        f = pickle.loads(open({str(path)!r}, "rb").read())
        print(list(f(np.load({str(tmp_path / "data.npy")!r})).astype(int)))
        print(repr(float(f.get_shared()[0].get_value()[0])))
        """
    )
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    ).stdout.splitlines()
    assert out[0] == str(list(predict(data).astype(int)))
    assert float(out[1]) == w.get_value()[0] != 0.0
    assert (predict(data) == labels.astype(bool)).mean() > 0.9
