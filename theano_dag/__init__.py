"""theano_dag: a Theano-style symbolic compiler for array programs.

The public face: ``function``, ``shared``, ``grad``, ``config``, ``In``, ``Out``, ``Mode``.

>>> import numpy as np
>>> import theano_dag
>>> import theano_dag.tensor as tt
>>> x = tt.dvector("x")
>>> f = theano_dag.function([x], theano_dag.grad((x**2).sum(), x))
>>> f(np.array([1.0, 2.0]))
array([2., 4.])
"""

import sys

# The optimizer and the engines load with compile (compile.mode imports them), as PyTensor
# loads its rewrites on import: the time to a first result then counts compiling the
# graph, not importing some twenty modules.
# As in Theano, `theano_dag.scan` is the function: its package stays importable by path
# (`from theano_dag.scan import until`), and theano_dag.scan_module is Theano 1.0's path.
from theano_dag import (
    printing,  # theano_dag.printing, as theano.printing
    scan_module,
    sparse,  # registers the shared constructor of scipy.sparse values (imports no scipy)
)
from theano_dag import tensor as _tensor
from theano_dag.compile import In, Mode, OpFromGraph, Out, function, shared
from theano_dag.compile.profiling import ProfileStats
from theano_dag.config import change_flags, config
from theano_dag.gradient import Lop, Rop, grad, hessian, jacobian, subgraph_grad
from theano_dag.gradient.verify import verify_grad, verify_grad_sparse
from theano_dag.graph.algorithms import clone_replace
from theano_dag.graph.updates import OrderedUpdates

# Theano loads theano.tensor.opt with theano, and its users read theano.tensor.opt.X
# without importing it: theano_dag.opt.tensor_opt, its counterpart, loads likewise.
from theano_dag.opt import tensor_opt as _tensor_opt  # noqa: F401
from theano_dag.printing import pp, pprint
from theano_dag.scan import foldl, foldr, map, reduce, scan  # noqa: A004
from theano_dag.tensor.subtensor import sparse_grad

# Theano code calls T.grad; the gradient floor sits above tensor, so the package (which
# imports both) puts the differentiation functions into tensor's namespace.
_tensor.grad, _tensor.jacobian, _tensor.hessian = grad, jacobian, hessian
_tensor.Rop, _tensor.Lop, _tensor.verify_grad = Rop, Lop, verify_grad
# theano.sparse.verify_grad_sparse: likewise for the sparse floor.
sparse.verify_grad_sparse = verify_grad_sparse

# theano.clone(output, replace=...): Theano's name for clone_replace.
clone = clone_replace

# Theano's modules of its flags (`from theano import configdefaults`): theano_dag's config
# module holds their names (`theano_dag.config` is the flags object itself).
configdefaults = configparser = sys.modules["theano_dag.config"]


__version__ = "0.1.0"
__all__ = [
    "config",
    "__version__",
    "function",
    "shared",
    "In",
    "Out",
    "Mode",
    "grad",
    "jacobian",
    "hessian",
    "Rop",
    "Lop",
    "subgraph_grad",
    "printing",
    "pprint",
    "pp",
    "scan",
    "map",
    "reduce",
    "foldl",
    "foldr",
    "scan_module",
    "sparse",
    "OpFromGraph",
    "OrderedUpdates",
    "clone",
    "change_flags",
    "configdefaults",
    "sparse_grad",
    "ProfileStats",
]
