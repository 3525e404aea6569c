"""Make tests/compile/compile_toys.py importable (the test tree has no packages)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
