"""``theano.scan.utils``'s path (theano-pymc 1.1): the graph helpers Theano's scan code
exports there, which theano_dag keeps in ``graph.basic``.

>>> import theano_dag.tensor as tt
>>> from theano_dag.scan.utils import clone, equal_computations
>>> x, y = tt.dvector("x"), tt.dvector("y")
>>> equal_computations([x + 1], [x + 1]), equal_computations([x + 1], [y + 1])
(True, False)
>>> equal_computations([clone(x * 2, replace={x: y})], [y * 2])
True
"""

from theano_dag.graph.basic import clone_replace, equal_computations
from theano_dag.scan.basic import until

# Theano's scan.utils.clone is graph.basic.clone_replace (same signature).
clone = clone_replace

__all__ = ["clone", "equal_computations", "until"]
