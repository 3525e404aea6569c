"""Registers the rewrites of sparse graphs (defined in :mod:`theano_dag.sparse.opt`, a
floor below) in the standard table, tagged ``sparse``; and ``Remove0`` among the ops the
inplace pass may make overwrite their input (Theano's ``local_inplace_remove0``)."""

from theano_dag.opt.rewrites.inplace import INPLACE_MAKERS
from theano_dag.opt.rewrites.table import RULES
from theano_dag.sparse.opt import SPARSE_RULES
from theano_dag.sparse.structure import Remove0

for _db, _rewrite, _tags in SPARSE_RULES:
    RULES.add(_db, _rewrite, *_tags)

INPLACE_MAKERS[Remove0] = ((0,), lambda node, i: Remove0(inplace=True))
