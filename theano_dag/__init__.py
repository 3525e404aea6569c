"""theano_dag: a Theano-style symbolic compiler for array programs.

The public face: ``function``, ``shared``, ``grad``, ``config``, ``In``, ``Out``, ``Mode``.
"""

from theano_dag.compile import In, Mode, Out, function, shared
from theano_dag.config import config

__version__ = "0.1.0"
__all__ = ["config", "__version__", "function", "shared", "In", "Out", "Mode"]
