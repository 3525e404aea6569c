"""Put each tests/ sub-folder on sys.path so test modules import their helpers by name.

(pytest runs with --import-mode=importlib, which does not add test folders to sys.path,
so that test files with the same basename in different folders do not clash.)
"""

import pathlib
import sys

_HERE = pathlib.Path(__file__).parent
for _sub in sorted(p for p in _HERE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
    if str(_sub) not in sys.path:
        sys.path.insert(0, str(_sub))
if str(_HERE.parent) not in sys.path:
    sys.path.insert(0, str(_HERE.parent))
