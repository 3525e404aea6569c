"""Make tests/graph/toy.py importable as ``toy`` (the test tree has no packages)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
