"""The rewrite rules and the optimization database ``function`` draws its optimizer from.

``theano_dag.opt.optdb`` lays the database out; the rules live in ``theano_dag.opt.rewrites``
and the engines' lowering passes in ``theano_dag.opt.lowering``. The framework they are
written with (``theano.graph.opt`` and ``theano.graph.optdb`` of theano-pymc 1.1.2) lives in
``theano_dag.graph.rewriting``; its names are re-exported here for users, and
``docs/optimization.md`` walks through it with the Theano tutorial's examples.
"""

from theano_dag.graph.rewriting import *  # noqa: F403
from theano_dag.graph.rewriting import __all__ as _framework_all

# The global optimization database and the helpers that add rewrites to it.
from theano_dag.opt.optdb import (
    build_optdb,
    optdb,
    register_canonicalize,
    register_specialize,
    register_stabilize,
    register_useless,
)

__all__ = [
    *_framework_all,
    "build_optdb",
    "optdb",
    "register_canonicalize",
    "register_specialize",
    "register_stabilize",
    "register_useless",
]
