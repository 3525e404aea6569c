"""Tests of the Theano interop, run by ``make test`` in .venv-theano (theano-pymc 1.1.2).

theano-pymc needs numpy<1.24 and scipy<1.10, so these tests live outside tests/ and run in
their own environment. THEANO_FLAGS must be set before theano is imported: no BLAS to link
(numpy's is used) and a compile directory inside the build folder.
"""

import os
import pathlib
import sys

_ROOT = pathlib.Path(__file__).resolve().parent.parent
os.environ.setdefault(
    "THEANO_FLAGS", f"blas__ldflags=,base_compiledir={_ROOT / 'build' / 'theano'}"
)
# the random graph strategy is shared with the main test suite
sys.path.insert(0, str(_ROOT / "tests" / "formats"))
sys.path.insert(0, str(_ROOT))


def pytest_configure(config):
    # theano-pymc 1.1.2 uses numpy aliases that numpy 1.23 calls deprecated
    config.addinivalue_line("filterwarnings", r"ignore::DeprecationWarning:theano\.")
