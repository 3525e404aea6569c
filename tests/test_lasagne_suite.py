"""tools/lasagne_suite.py (``make lasagne-suite``): the stand-in MNIST files its mnist
example reads, the doctests' entry (Lasagne's modules' docstring examples and nothing else),
and the pytest arguments and table names of its entries."""

import gzip
import os
import sys

import lasagne_suite
import numpy as np
import pymc3_suite


def _idx(path, offset):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return np.frombuffer(raw[:offset], ">i4"), np.frombuffer(raw, np.uint8, offset=offset)


def test_stand_in_mnist_is_in_mnists_format_and_learnable(tmp_path):
    lasagne_suite.write_mnist(tmp_path, train=10050, test=30)
    for split, n in (("train", 10050), ("test", 30)):
        images_name, labels_name = lasagne_suite.MNIST_FILES[split]
        head, images = _idx(tmp_path / images_name, 16)
        assert head.tolist() == [2051, n, 28, 28]
        head, labels = _idx(tmp_path / labels_name, 8)
        assert head.tolist() == [2049, n]
        images = images.reshape(n, 28, 28)  # as mnist.py reads them, after the header
        assert set(labels.tolist()) <= set(range(10))
        for image, k in zip(images, labels):
            band = np.zeros((28, 28), bool)
            band[2 * k + 4 : 2 * k + 7, 4:24] = True
            assert (image[band] == 255).all() and (image[~band] < 64).all()
    # the same files each time: both sides train on the same data
    first = (tmp_path / "t10k-images-idx3-ubyte.gz").read_bytes()
    lasagne_suite.write_mnist(tmp_path, train=10050, test=30)
    assert gzip.decompress((tmp_path / "t10k-images-idx3-ubyte.gz").read_bytes()) == (
        gzip.decompress(first)
    )


def test_entries_are_the_test_files_then_the_doctests(tmp_path):
    for rel in ("lasagne/tests/test_b.py", "lasagne/tests/layers/test_a.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    (tmp_path / "lasagne/tests/conftest.py").write_text("")
    assert lasagne_suite.test_files(tmp_path) == [
        "lasagne/tests/layers/test_a.py",
        "lasagne/tests/test_b.py",
        "lasagne",
    ]
    assert lasagne_suite.pytest_args("lasagne/tests/test_b.py") == ["--runslow"]
    assert lasagne_suite.pytest_args("lasagne")[0] == "--doctest-modules"
    assert lasagne_suite.label("lasagne/tests/layers/test_a.py") == "`test_a.py`"
    assert lasagne_suite.label("lasagne") == "doctests of `lasagne/`"


def test_the_doctests_entry_runs_the_modules_docstrings_only(tmp_path):
    # Lasagne's layout: a package whose tests/ holds its test files; the entry counts the
    # modules' docstring examples, one each, and leaves the test files' tests to theirs.
    pkg = tmp_path / "site" / "lasagne"
    (pkg / "tests").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "tests" / "__init__.py").write_text("")
    (pkg / "utils.py").write_text(
        'def one():\n    """\n    >>> one()\n    1\n    """\n    return 1\n'
    )
    (pkg / "bad.py").write_text(
        'def two():\n    """\n    >>> two()\n    3\n    """\n    return 2\n'
    )
    (pkg / "tests" / "test_utils.py").write_text("def test_one():\n    assert True\n")
    (tmp_path / "plugin").mkdir()
    (tmp_path / "logs").mkdir()
    (tmp_path / "plugin" / "pymc3_suite_plugin.py").write_text(pymc3_suite.PLUGIN)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "plugin"), "PYMC3_SUITE_PER_FILE": "0"}
    r = pymc3_suite.run_file(
        sys.executable,
        tmp_path / "site",
        lasagne_suite.DOCTESTS,
        env,
        120,
        tmp_path / "logs",
        lasagne_suite.pytest_args(lasagne_suite.DOCTESTS),
    )
    assert r["outcomes"] == {
        "lasagne/bad.py::lasagne.bad.two": "failure",
        "lasagne/utils.py::lasagne.utils.one": "passed",
    }
