"""Theano's ``theano.sparse`` namespace: sparse matrices, which theano_dag does not have
yet (the README and docs/theano.md say so). ``enable_sparse`` is ``False``, the value
Theano itself has when scipy is missing, so that code checking it (Theano's own shared
variable tests do) takes its dense path.

>>> enable_sparse
False
"""

__all__ = ["enable_sparse"]

enable_sparse = False
