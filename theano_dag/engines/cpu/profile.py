"""``function(..., profile=True)`` on the CPU engine: the engines' ``ProfileStats``,
whose compile times the CPU engine splits into plan / codegen / C compile, with its
memory plan and, under ``incremental=True``, how many nodes each call ran."""

from __future__ import annotations

from theano_dag.engines.profile import ProfileStats

__all__ = ["CPUProfile"]


class CPUProfile(ProfileStats):
    """The CPU engine's profile.

    >>> p = CPUProfile(name="f")
    >>> print(str(p).splitlines()[0])
    Function profile: f (CPU engine)
    """

    engine = "CPU engine"
