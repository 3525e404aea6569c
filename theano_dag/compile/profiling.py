"""Profiling compiled functions (``theano.compile.profiling``).

``function(..., profile=True)``, or the flag ``config.profile`` for every function,
gives each function a :class:`ProfileStats` (``f.profile``) on every engine, whose
``summary()`` prints the time per op class, per op and per node, the compile time and
the memory plan (to stderr, or ``summary(file=...)``; ``str(f.profile)`` is the text).
As in Theano, when ``config.profile`` is set at exit, the summaries of the profiled
functions that were called are printed to stderr: ``profile=True`` alone prints
nothing at exit.
"""

from __future__ import annotations

import atexit
import sys

from theano_dag.config import config
from theano_dag.engines.profile import ProfileStats

__all__ = ["ProfileStats", "print_at_exit", "print_profiles"]

# The profiles printed at exit: kept alive with the program, as Theano keeps them.
_AT_EXIT: list = []


def print_at_exit(profile):
    """Print ``profile``'s summary when the interpreter exits, if ``config.profile`` is
    set then and the function was called (Theano's rule); not one made with
    ``ProfileStats(atexit_print=False)``."""
    if getattr(profile, "atexit_print", True) and not any(p is profile for p in _AT_EXIT):
        _AT_EXIT.append(profile)


def print_profiles(file=None, force=False):
    """Print the summary of every profile registered with :func:`print_at_exit` whose
    function was called: only if ``config.profile`` is set, unless ``force``."""
    if not (force or config.profile):
        return
    file = sys.stderr if file is None else file
    for profile in _AT_EXIT:
        if profile.calls:
            profile.summary(file=file)
            print(file=file)


atexit.register(print_profiles)
