"""Theano's ``theano.tensor.opt`` namespace: the public names of every rewrite family
(``theano_dag.opt.rewrites``) in one module, as Theano's code imports them
(``from theano.tensor.opt import constant_folding``), with the ops Theano defined there
(``theano_dag.tensor.opt``: ``MakeVector``, ``Assert``..., importable below the optimizer).

>>> from theano_dag.opt.tensor_opt import constant_folding
>>> str(constant_folding)
'constant_folding'
>>> from theano_dag.opt.tensor_opt import MakeVector
"""

from theano_dag.graph.rewriting import (  # noqa: F401 (Theano's tensor.opt has them too)
    PatternSub,
    TopoOptimizer,
    in2out,
    local_optimizer,
    out2in,
)
from theano_dag.opt.optdb import (  # noqa: F401 (Theano's tensor.opt registers rewrites)
    register_canonicalize,
    register_specialize,
    register_stabilize,
    register_uncanonicalize,
    register_useless,
)
from theano_dag.opt.rewrites.algebra import *  # noqa: F403
from theano_dag.opt.rewrites.blas import *  # noqa: F403
from theano_dag.opt.rewrites.constant_folding import *  # noqa: F403
from theano_dag.opt.rewrites.fusion import *  # noqa: F403
from theano_dag.opt.rewrites.inplace import *  # noqa: F403
from theano_dag.opt.rewrites.logic import *  # noqa: F403
from theano_dag.opt.rewrites.products import *  # noqa: F403
from theano_dag.opt.rewrites.reduce import *  # noqa: F403
from theano_dag.opt.rewrites.shapes import *  # noqa: F403
from theano_dag.opt.rewrites.sigmoid import *  # noqa: F403
from theano_dag.opt.rewrites.softmax import *  # noqa: F403
from theano_dag.opt.rewrites.specialize import *  # noqa: F403
from theano_dag.opt.rewrites.stabilize import *  # noqa: F403
from theano_dag.opt.rewrites.subtensor import *  # noqa: F403
from theano_dag.opt.rewrites.uncanonicalize import *  # noqa: F403
from theano_dag.opt.rewrites.useless import *  # noqa: F403
from theano_dag.tensor.arrays import extract_constant  # noqa: F401 (as below)
from theano_dag.tensor.basic import (  # noqa: F401 (Theano's rewrites import them from here)
    NotScalarConstantError,
    get_scalar_constant_value,
)
from theano_dag.tensor.opt import *  # noqa: F403
