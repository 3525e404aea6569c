"""Engines: what turns an optimized FunctionGraph into runnable code, and what they share."""

from theano_dag.engines.basic import (
    Container,
    Linker,
    LocalLinker,
    PerformLinker,
    WrapLinker,
)

__all__ = ["Container", "Linker", "LocalLinker", "PerformLinker", "WrapLinker"]
