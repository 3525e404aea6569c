"""Make tests/graph/toy.py importable as ``toy`` (the test tree has no packages),
and offer ``checked_fgraph``: a fixture that runs ``check_integrity`` after every
public mutation of every FunctionGraph during a test."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

_MUTATORS = (
    "replace",
    "replace_all",
    "change_input",
    "reorder_inputs",
    "add_input",
    "attach_feature",
    "remove_feature",
)


@pytest.fixture
def checked_fgraph(monkeypatch):
    """Check every FunctionGraph's integrity after each public mutation, also when the
    mutation raised (a refused change must leave a valid graph). Returns a counter."""
    from theano_dag.graph.fg import FunctionGraph

    checks = {"n": 0}

    def check(fg):
        if fg.inputs is not None:  # not disowned
            fg.check_integrity()
            checks["n"] += 1

    def wrap(name):
        orig = getattr(FunctionGraph, name)

        def checked(self, *args, **kwargs):
            try:
                return orig(self, *args, **kwargs)
            finally:
                check(self)

        monkeypatch.setattr(FunctionGraph, name, checked)

    for name in _MUTATORS:
        wrap(name)
    orig_init = FunctionGraph.__init__

    def checked_init(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        check(self)

    monkeypatch.setattr(FunctionGraph, "__init__", checked_init)
    return checks
