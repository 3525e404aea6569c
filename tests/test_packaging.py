"""What a user installing the package relies on: its metadata, its data, a light import."""

import fnmatch
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
tomllib = pytest.importorskip("tomllib")  # Python 3.11+
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def run_python(code):
    """Run ``code`` in a fresh interpreter that imports this checkout's theano_dag."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )


def test_import_takes_no_scipy():
    out = run_python(
        "import sys, theano_dag, theano_dag.tensor;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    assert out.stdout.strip() == "[]"


def test_erf_without_scipy_warns_once_naming_the_extra_and_matches_math():
    out = run_python(
        "import sys, warnings, math; sys.modules['scipy'] = None\n"
        "import numpy as np, theano_dag, theano_dag.tensor as tt\n"
        "x = tt.dvector('x')\n"
        "f = theano_dag.function([x], [tt.erf(x), tt.erfc(x)], mode='FAST_COMPILE')\n"
        "v = np.array([-2.0, 0.0, 0.3, 1.5])\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    a, b = f(v)\n"
        "    f(v)\n"
        "assert np.allclose(a, [math.erf(t) for t in v], rtol=1e-15, atol=0)\n"
        "assert np.allclose(b, [math.erfc(t) for t in v], rtol=1e-15, atol=0)\n"
        "for m in w: print(m.category.__name__, m.message)\n"
    )
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2, lines  # one per function, not one per call
    assert lines[0].startswith("RuntimeWarning erf runs math.erf once per element")
    assert "pip install '.[scipy]'" in lines[0] and "pip install 'scipy>=1.9'" in lines[0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_erf_with_scipy_is_scipy_special(dtype):
    special = pytest.importorskip("scipy.special")
    import theano_dag
    import theano_dag.tensor as tt

    x = tt.vector("x", dtype=dtype)
    f = theano_dag.function([x], [tt.erf(x), tt.erfc(x)], mode="FAST_COMPILE")
    v = np.linspace(-3, 3, 13).astype(dtype)
    a, b = f(v)
    rtol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(a, special.erf(v), rtol=rtol, atol=1e-7)
    np.testing.assert_allclose(b, special.erfc(v), rtol=rtol, atol=1e-7)


def test_package_data_ships_every_c_source_and_data_file():
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["theano_dag"]
    pkg = ROOT / "theano_dag"
    needed = [p for ext in ("*.c", "*.npz", "*.md") for p in pkg.rglob(ext)]
    assert any(p.suffix == ".c" for p in needed)
    missing = [
        str(p.relative_to(pkg))
        for p in needed
        if not any(fnmatch.fnmatch(str(p.relative_to(pkg)), pat) for pat in patterns)
    ]
    assert not missing, f"files the package reads that the wheel would leave out: {missing}"


def test_metadata_names_licence_and_bounds():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    for f in project["license-files"]:
        assert (ROOT / f).is_file(), f
    assert "CC BY 4.0" in (ROOT / "theano_dag/datasets/DIGITS.md").read_text()
    extras = project["optional-dependencies"]
    assert "scikit-learn" not in str(extras)  # nothing imports it
    # the PyTensor interop reads its internals: only the tested releases
    assert extras["pytensor"] == ["pytensor>=3.0.7,<3.1"]
    for name, reqs in extras.items():
        for req in reqs:
            if not req.startswith("theano_dag["):
                assert any(op in req for op in (">=", "==")), (name, req)
