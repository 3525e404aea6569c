"""``theano.scan_module``'s path (Theano 1.0): ``scan``, ``until`` and the loops built on it.

>>> from theano_dag.scan_module import scan, until
>>> scan.__module__
'theano_dag.scan.basic'
"""

from theano_dag.scan import (  # noqa: A004
    Scan,
    foldl,
    foldr,
    map,
    reduce,
    scan,
    scan_checkpoints,
    until,
)

__all__ = ["scan", "until", "Scan", "map", "reduce", "foldl", "foldr", "scan_checkpoints"]
