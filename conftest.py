"""pytest's setup for the whole checkout, read before any test or module is collected.

The package is imported whole first, as a user's ``import theano_dag`` does. With
``--import-mode=importlib`` pytest executes a module collected for its doctests from its
own file; collected alone (``pytest theano_dag/tensor/basic.py``), before the package, it
ran against a half-imported package, where modules that reach each other through it at
call time (``theano_dag.tensor.arrays``) are not there yet.
"""

import theano_dag  # noqa: F401
