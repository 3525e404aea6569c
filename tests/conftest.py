"""Put each tests/ sub-folder on sys.path so test modules import their helpers by name.

(pytest runs with --import-mode=importlib, which does not add test folders to sys.path,
so that test files with the same basename in different folders do not clash.)

Also what keeps the suite's results independent of the machine's speed (CI runs on shared,
busy machines): hypothesis checks no time.
"""

import pathlib
import sys

from hypothesis import HealthCheck, settings

_HERE = pathlib.Path(__file__).parent
for _sub in sorted(p for p in _HERE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
    if str(_sub) not in sys.path:
        sys.path.insert(0, str(_sub))
if str(_HERE.parent) not in sys.path:
    sys.path.insert(0, str(_HERE.parent))

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
