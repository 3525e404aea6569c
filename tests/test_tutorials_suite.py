"""tools/tutorials_suite.py (``make tutorials-suite``): the comparison of two sides' call
lines, the start-up hook that writes them (run here on theano_dag's side, through the
theano alias), and the stand-in data files in the formats the tutorials read."""

import gzip
import os
import pickle
import subprocess
import sys

import pytest
import tutorials_suite as suite

LINE = "f0 c{c} float64(3,) s={s} a={a} | int64()"


@pytest.mark.parametrize(
    "dag, differ",
    [
        (LINE.format(c=0, s="1.5", a="2.5"), 0),
        (LINE.format(c=0, s="1.5000001", a="2.5"), 0),  # within 1e-6 of 1.5
        (LINE.format(c=0, s="1.51", a="2.5"), 1),
        (LINE.format(c=0, s="1.5", a="2.5").replace("(3,)", "(1, 3)"), 1),  # a shape
        (LINE.format(c=1, s="1.5", a="2.5"), 1),  # another call
    ],
)
def test_lines_are_compared_by_text_and_by_number_within_the_tolerance(dag, differ):
    theano = LINE.format(c=0, s="1.5", a="2.5")
    got, first = suite.compare([theano], [dag], 1e-6)
    assert got == differ
    assert (first is None) == (differ == 0)
    if differ:
        assert first == {"theano": theano, "theano_dag": dag}


def test_nans_agree_and_a_missing_call_counts():
    a = LINE.format(c=0, s="nan", a="nan")
    assert suite.compare([a], [a], 1e-6) == (0, None)
    assert suite.compare([a, a], [a], 1e-6)[0] == 1
    assert suite.compare([a], [LINE.format(c=0, s="1", a="nan")], 1e-6)[0] == 1


def test_every_tutorial_names_its_module_and_settings():
    for name, (call, uses_scan) in suite.TUTORIALS.items():
        compile(suite.RUNNER.format(call=call), name, "exec")
        assert isinstance(uses_scan, bool)
    # Theano's Python mode for the ones with a scan loop (the DBN's has one step)
    assert suite.TUTORIALS["rbm"][1] and not suite.TUTORIALS["DBN"][1]


def test_the_hook_writes_one_line_per_call_through_the_theano_alias(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(suite.HOOK.format(prelude=suite.DAG_PRELUDE))
    calls = tmp_path / "calls"
    program = (
        "import numpy as np, theano, theano.tensor as T\n"
        "x = T.dvector('x')\n"
        "f = theano.function([x], [x * 2, x.sum()])\n"
        "g = theano.function([x], x + 1)\n"
        "f(np.arange(3.0)); g(np.ones(2)); f(np.ones(3))\n"
        "print(type(theano).__module__)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(site), TUTORIALS_CALLS=str(calls))
    out = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True
    )
    assert "theano_dag" in out.stdout  # the alias's module, not a real Theano
    assert calls.read_text().splitlines() == [
        "f0 c0 float64(3,) s=6 a=6 | float64() s=3 a=3",
        "f1 c0 float64(2,) s=4 a=4",
        "f0 c1 float64(3,) s=6 a=6 | float64() s=3 a=3",
    ]


def test_the_stand_in_data_have_the_tutorials_formats(tmp_path):
    suite.write_data(tmp_path, sys.executable)
    with gzip.open(tmp_path / "mnist.pkl.gz", "rb") as f:
        sets = pickle.load(f)
    assert [(x.shape, x.dtype.name, y.shape) for x, y in sets] == [
        ((1200, 784), "float32", (1200,)),
        ((600, 784), "float32", (600,)),
        ((600, 784), "float32", (600,)),
    ]
    assert 0 <= sets[0][0].min() and sets[0][0].max() < 1 and set(sets[0][1]) <= set(range(10))
    with open(tmp_path / "imdb.pkl", "rb") as f:
        train, test = pickle.load(f), pickle.load(f)
    assert (len(train[0]), len(test[0])) == (800, 400) and set(train[1]) == {0, 1}
    with gzip.open(tmp_path / "atis.fold3.pkl.gz", "rb") as f:
        train, valid, test, dicts = pickle.load(f)
    assert [len(s[0]) for s in (train, valid, test)] == [150, 40, 40]
    assert all(len(w) == len(y) for w, y in zip(train[0], train[2]))
    assert set(dicts) == {"words2idx", "labels2idx"} and dicts["labels2idx"]["O"] == 0
