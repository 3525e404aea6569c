"""The benchmark scripts run as ``python benchmarks/NAME.py``, which puts benchmarks/
first on ``sys.path``: a script named like a package a library imports hides it there.
dask tries ``import sparse`` (pydata/sparse, optional) and, finding a script of that name,
failed at import, so every dask benchmark stopped before its first case.
"""

import importlib.metadata
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Optional packages the peers and the dependencies try to import when present, installed
# here or not (dask.array: sparse, cupy, zarr...; the peers' own names).
OPTIONAL_IMPORTS = {
    "sparse", "cupy", "cupyx", "zarr", "h5py", "xarray", "pandas", "tiledb", "numba",
    "jax", "jaxlib", "torch", "onnx", "onnxruntime", "pytensor", "theano", "pyopencl",
    "pyclblast", "distributed", "dask", "numpy", "scipy", "threadpoolctl", "psutil",
}  # fmt: skip


def test_no_benchmark_script_hides_a_package():
    installed = set(importlib.metadata.packages_distributions())
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py")}
    assert "dask_engine" in scripts  # the glob sees the scripts
    assert not scripts & (installed | OPTIONAL_IMPORTS)
