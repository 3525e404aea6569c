"""``theano.sandbox.linalg``'s path: Theano's linear-algebra hints and rules, gathered in
:mod:`theano_dag.sandbox.linalg.ops` (as Theano's package gathered them in its ``ops``)."""

from theano_dag.sandbox.linalg.ops import *  # noqa: F403
from theano_dag.sandbox.linalg.ops import __all__  # noqa: F401
