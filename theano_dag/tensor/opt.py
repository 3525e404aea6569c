"""``theano.tensor.opt``'s names that code outside the optimizer uses: the ops that Theano
defined there (``MakeVector``, ``Shape_i``, ``Assert``) and ``make_vector``. The rewrites
themselves live in ``theano_dag.opt``.

>>> from theano_dag import tensor as tt
>>> make_vector(tt.lscalar("n"), 2).owner.op == MakeVector("int64")
True
"""

from theano_dag.tensor.arrays import Assert, assert_op
from theano_dag.tensor.shape import MakeVector, Shape_i, make_vector, shape_i

# Theano's other name of the Assert op (theano.tensor.opt.assert_).
assert_ = assert_op

__all__ = ["Assert", "assert_", "assert_op", "MakeVector", "Shape_i", "make_vector", "shape_i"]
