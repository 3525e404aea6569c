"""``theano.scan_module``'s path (Theano 1.0): ``scan``, ``until`` and the loops built on it.

>>> from theano_dag.scan_module import scan, until
>>> scan.__module__
'theano_dag.scan.basic'
"""

from theano_dag.scan import Scan, foldl, foldr, map, reduce, scan, until  # noqa: A004

__all__ = ["scan", "until", "Scan", "map", "reduce", "foldl", "foldr"]
