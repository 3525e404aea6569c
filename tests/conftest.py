"""Put each tests/ sub-folder on sys.path so test modules import their helpers by name,
and tools/, whose scripts their tests import by name (as the scripts import each other).

(pytest runs with --import-mode=importlib, which does not add test folders to sys.path,
so that test files with the same basename in different folders do not clash.)

Also what keeps the suite's results independent of the machine's speed (CI runs on shared,
busy machines): hypothesis checks no time, and two fixtures for tests whose result would
otherwise depend on when a kernel library, compiling in the background, loads.
"""

import pathlib
import sys

import pytest
from hypothesis import HealthCheck, settings

from theano_dag import config
from theano_dag.engines.cpu.native import cc, ckernel

_HERE = pathlib.Path(__file__).parent
for _sub in sorted(p for p in _HERE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
    if str(_sub) not in sys.path:
        sys.path.insert(0, str(_sub))
if str(_HERE.parent) not in sys.path:
    sys.path.insert(0, str(_HERE.parent))
if str(_HERE.parent / "tools") not in sys.path:
    sys.path.append(str(_HERE.parent / "tools"))

# No deadline per example, and no failing health check for a slow generation of
# examples: on a loaded machine both fail a test that is right. (Built on the profile
# hypothesis chose, its "ci" one on CI.)
settings.register_profile(
    "theano_dag",
    parent=settings.default,
    deadline=None,
    suppress_health_check=sorted(
        {*settings.default.suppress_health_check, HealthCheck.too_slow}, key=lambda h: h.value
    ),
)
settings.load_profile("theano_dag")


@pytest.fixture(autouse=True)
def _no_function_cache():
    """The cache of optimized graphs (flag ``function_cache``) off: tests change rewrites
    (monkeypatch, register) and expect them to run on every compile.
    tests/compile/test_function_cache.py turns it on again with a fixture of its own."""
    with config.change_flags(function_cache=False):
        yield


# An upper bound for a wait that would otherwise hang, never what a test checks: far
# above what a loaded machine takes.
HANG_S = 600


@pytest.fixture
def kernels_at_first_call():
    """Kernel libraries built (or read from the cache) and loaded at a function's first
    call, in the calling thread: every call of the test runs the same code, C kernels
    (numpy without a compiler). By default a cold cache compiles in the background and
    the library loads between two calls, at a moment that depends on the machine's speed;
    C and numpy may differ in the last bit."""
    with ckernel.compile_mode("sync"):
        yield


@pytest.fixture
def no_kernel_builds_in_flight():
    """Wait, before the test, for the kernel libraries that earlier tests left compiling in
    the background (a cold cache; longer on a busy machine): one that finishes during the
    test would add its compile and its loaded library to what the test measures or
    counts."""
    for build in list(cc._BUILDS.values()):
        build.wait(HANG_S)


@pytest.fixture
def step_library_loaded():
    """The step library of the configured compiler loaded in this process (from the user's
    kernel cache, built there if needed): a function compiled into a new cache then builds
    its own kernels only, whatever ran before the test."""
    tc = cc.get_toolchain(config.cxx)
    if tc is None:
        pytest.skip("no C compiler (config.cxx)")
    lib = ckernel.step_library(tc, config.compiledir)
    lib.start(background=False)
    assert lib.wait(HANG_S), lib.error
    return lib
