"""The standard rewrites, one family per module; ``table.RULES`` says where each goes.

============================  =========================================================
module                        what
============================  =========================================================
``constant_folding``          compute nodes of constants at compile time
``useless``                   remove nodes that compute nothing new
``conv``                      batch normalization, bias and relu folded into convolutions
``algebra``                   identities (x+0, x*1, x*0, --x, ...), broadcasts, order
``logic``                     comparisons, and/or, switches the graph already answers
``products``                  canonical products, ``x*y/y -> x``
``reduce``                    reductions merged, of stacks, over length-1 dimensions
``shapes``                    DimShuffle lifted and merged, reshape/alloc simplified
``subtensor``                 indexings merged, lifted, read back from what was set
``sigmoid``                   sigmoid recognised, log-sigmoid as softplus, the sigmoids
                              of a gradient cancelled (before ``stabilize``: order matters)
``softmax``                   log-softmax, softmax, their gradients, log-sum-exp,
                              fused cross-entropy
``stabilize``                 log1p, expm1, softplus, log1mexp, log-add-exp, log(erfc)
``blas``                      dot plus accumulation -> Gemm / Gemv / Ger, Dot22
``linalg``                    products with an inverse as solves, solves with a Cholesky
                              factor as triangular solves, what hints (``psd``) allow
``specialize``                x**2 -> sqr, Adagrad fusion, a*b + c -> fma
``uncanonicalize``            DimShuffles folded into the Alloc, Reshape or Subtensor
                              next to them (after specialize)
``sparse``                    sparse graphs (``theano_dag.sparse.opt``): CSM parts
                              read back, ``mul_s_v``, ``usmm``
``fusion``                    elementwise trees -> Elemwise{Composite}, fused reductions
``inplace``                   overwrite inputs nothing else needs
============================  =========================================================
"""

from theano_dag.opt.rewrites import (  # noqa: F401 - importing fills the rule table
    algebra,
    blas,
    constant_folding,
    conv,
    fusion,
    inplace,
    linalg,
    logic,
    products,
    reduce,
    shapes,
    sigmoid,
    softmax,
    sparse,
    specialize,
    stabilize,
    subtensor,
    uncanonicalize,
    useless,
)
from theano_dag.opt.rewrites.table import RULES, Rule, RuleTable

__all__ = ["RULES", "Rule", "RuleTable"]
