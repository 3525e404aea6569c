"""Profiling compiled functions (``theano.compile.profiling``).

``function(..., profile=True)``, or the flag ``config.profile`` for every function,
gives each function a :class:`ProfileStats` (``f.profile``) on every engine, whose
``summary()`` lists the time per op class, per op and per node, the compile time and
the memory plan. With ``config.profile`` set, the summaries of the functions compiled
meanwhile are printed to stderr when the interpreter exits, as Theano does.
"""

from __future__ import annotations

import atexit
import sys

from theano_dag.engines.profile import ProfileStats

__all__ = ["ProfileStats", "print_at_exit", "print_profiles"]

# The profiles printed at exit: kept alive with the program, as Theano keeps them.
_AT_EXIT: list = []


def print_at_exit(profile):
    """Print ``profile``'s summary when the interpreter exits."""
    if not any(p is profile for p in _AT_EXIT):
        _AT_EXIT.append(profile)


def print_profiles(file=None):
    """Print the summary of every profile registered with :func:`print_at_exit`."""
    file = sys.stderr if file is None else file
    for profile in _AT_EXIT:
        print(profile.summary(), file=file)
        print(file=file)


atexit.register(print_profiles)
