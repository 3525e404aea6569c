"""Registers the rewrites of sparse graphs (defined in :mod:`theano_dag.sparse.opt`, a
floor below) in the standard table, tagged ``sparse``."""

from theano_dag.opt.rewrites.table import RULES
from theano_dag.sparse.opt import SPARSE_RULES

for _db, _rewrite, _tags in SPARSE_RULES:
    RULES.add(_db, _rewrite, *_tags)
