"""Packaging entry point for theano_dag (tool settings live in pyproject.toml)."""

from setuptools import find_packages, setup

EXTRAS = {
    "test": [
        "pytest>=7",
        "hypothesis>=6",
        "ruff==0.8.6",
        "import-linter>=2.1,<3",
        "scikit-learn>=1.2",
        "pytensor",
    ],
    "examples": ["scikit-learn>=1.2"],
    "networkx": ["networkx>=2.8"],
    "graphviz": ["graphviz>=0.20"],
    "plot": ["matplotlib>=3.5"],
    "opencl": ["pyopencl>=2022.1", "pocl-binary-distribution>=1.0"],
    "dask": ["dask[array,distributed]>=2024.1,<2027"],
    "pytensor": ["pytensor"],
    "bench": ["pytensor", "jax", "matplotlib>=3.5"],
}
EXTRAS["dev"] = sorted({p for k in ("test", "networkx", "opencl") for p in EXTRAS[k]})

setup(
    name="theano_dag",
    version="0.1.0",
    description="A Theano-style symbolic compiler for array programs",
    packages=find_packages(include=["theano_dag", "theano_dag.*"]),
    # the fixed C sources of the CPU engine are read at build time (engines.cpu.native)
    package_data={"theano_dag": ["datasets/*.npz", "engines/cpu/native/*.c"]},
    python_requires=">=3.10",
    install_requires=["numpy>=1.23,<3"],
    extras_require=EXTRAS,
)
