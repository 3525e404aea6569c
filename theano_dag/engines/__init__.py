"""Engines: what turns an optimized FunctionGraph into runnable code, and what they share.

``LINKERS`` is the table of engines by name: ``Mode(linker=name)`` looks names up there
(``compile.mode.predefined_linkers`` is this table). The reference engine's names are
in it from the start; each engine package adds its own when imported
(``register_linker``), and ``compile.mode`` imports the engine packages it knows.

>>> type(LINKERS["py"]()).__name__
'PerformLinker'
"""

from theano_dag.engines.basic import (
    Container,
    Linker,
    LocalLinker,
    PerformLinker,
    WrapLinker,
)

__all__ = [
    "Container",
    "Linker",
    "LocalLinker",
    "PerformLinker",
    "WrapLinker",
    "LINKERS",
    "register_linker",
]


def _py_nogc():
    return PerformLinker(allow_gc=False)


# name -> a Linker (copied on use) or a zero-argument callable returning a new Linker
LINKERS: dict = {"py": PerformLinker, "perform": PerformLinker, "py_nogc": _py_nogc}


def register_linker(name: str, factory, override: bool = False, table=None):
    """Make ``Mode(linker=name)`` use ``factory`` (a Linker or a callable returning one).

    ``table``: the table to fill (default ``LINKERS``).

    >>> table = {}  # a fresh table, as a test would make
    >>> register_linker("my_py", _py_nogc, table=table)
    >>> table["my_py"]().allow_gc
    False
    """
    table = LINKERS if table is None else table
    if name in table and not override:
        raise ValueError(f"Linker name already taken: {name!r} (pass override=True to replace)")
    table[name] = factory
