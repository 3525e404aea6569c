"""The numerical vocabulary (``theano.tensor``): types, variables and array ops.

>>> from theano_dag import tensor as tt
>>> x = tt.dmatrix("x")
>>> y = tt.exp(x).sum(axis=1)
>>> y.type, str(y.owner.op)
(TensorType(float64, vector), 'Sum{axis=(1,)}')
"""

from theano_dag import scalar  # noqa: F401
from theano_dag import scalar as scal  # noqa: F401 (Theano's tt.scal)
from theano_dag.graph.basic import Variable  # noqa: F401 (Theano's T.Variable)

# Submodules Theano users reach as attributes (tt.nnet.softmax, tt.blas.Gemm, ...); imported
# last because they build on everything above.
from theano_dag.tensor import (  # noqa: E402, F401
    blas,
    blas_c,
    contractions,
    inplace,
    io,
    linalg,
    nlinalg,
    nnet,
    opt,
    random,
    shared_randomstreams,
    sharedvar,  # registers numpy arrays and numbers with theano_dag.shared
    signal,
    slinalg,
    type_other,  # noqa: F401 (Theano's tensor.type_other.NoneConst)
    xlogx,
)
from theano_dag.tensor.arrays import *  # noqa: F403
from theano_dag.tensor.arrays import __all__ as _arrays_all
from theano_dag.tensor.basic import *  # noqa: F403
from theano_dag.tensor.basic import __all__ as _basic_all
from theano_dag.tensor.contractions import (  # noqa: E402, F401
    batched_dot,
    batched_tensordot,
    einsum,
    matmul,
    tensordot,
)
from theano_dag.tensor.elemwise import (  # noqa: F401
    CAReduce,
    Composite,
    DimShuffle,
    Elemwise,
    Max,
    Min,
    Sum,
)

# After basic (sorted order): extra_ops.squeeze, which takes axis=, replaces basic.squeeze.
from theano_dag.tensor.extra_ops import *  # noqa: F403
from theano_dag.tensor.extra_ops import __all__ as _extra_all
from theano_dag.tensor.fdiff import numeric_grad  # noqa: E402, F401
from theano_dag.tensor.io import load  # noqa: F401 (Theano's tensor.load)
from theano_dag.tensor.math import *  # noqa: F403
from theano_dag.tensor.math import __all__ as _math_all
from theano_dag.tensor.math import dot as dense_dot  # noqa: E402, F401 (Theano's name)
from theano_dag.tensor.plural import *  # noqa: F403
from theano_dag.tensor.plural import __all__ as _plural_all
from theano_dag.tensor.shape import *  # noqa: F403
from theano_dag.tensor.shape import __all__ as _shape_all
from theano_dag.tensor.sharedvar import tensor_constructor as _shared  # noqa: F401 (Theano's)
from theano_dag.tensor.sort import *  # noqa: F403
from theano_dag.tensor.sort import __all__ as _sort_all
from theano_dag.tensor.subtensor import (  # noqa: F401
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    IncSubtensor,
    Subtensor,
    advanced_inc_subtensor,
    advanced_inc_subtensor1,
    advanced_set_subtensor,
    advanced_set_subtensor1,
    inc_subtensor,
    set_subtensor,
    take,
)
from theano_dag.tensor.type import *  # noqa: F403
from theano_dag.tensor.type import TensorType as Tensor  # noqa: E402, F401 (Theano's alias)
from theano_dag.tensor.type import __all__ as _type_all
from theano_dag.tensor.type_other import NoneConst, SliceType, slicetype  # noqa: E402, F401
from theano_dag.tensor.variable import (  # noqa: F401
    TensorConstant,
    TensorVariable,
    autocast_scalar,
)

Constant = TensorConstant  # Theano's theano.tensor.Constant

__all__ = sorted(
    set(_basic_all)
    | set(_math_all)
    | set(_type_all)
    | set(_plural_all)
    | set(_shape_all)
    | set(_sort_all)
    | set(_extra_all)
    | set(_arrays_all)
    | {
        "scalar",
        "CAReduce",
        "Composite",
        "DimShuffle",
        "Elemwise",
        "Max",
        "Min",
        "Sum",
        "SliceType",
        "slicetype",
        "Subtensor",
        "IncSubtensor",
        "AdvancedSubtensor1",
        "AdvancedIncSubtensor1",
        "AdvancedSubtensor",
        "AdvancedIncSubtensor",
        "set_subtensor",
        "inc_subtensor",
        "take",
        "advanced_inc_subtensor",
        "advanced_inc_subtensor1",
        "advanced_set_subtensor",
        "advanced_set_subtensor1",
        "Constant",
        "TensorConstant",
        "TensorVariable",
        "autocast_scalar",
        "batched_dot",
        "batched_tensordot",
        "einsum",
        "tensordot",
        "nnet",
        "blas",
        "contractions",
        "linalg",
        "slinalg",
        "nlinalg",
        "random",
        "shared_randomstreams",
        "signal",
        "Variable",
        "xlogx",
        "inplace",
        "opt",
        "scal",
        "numeric_grad",
        "dense_dot",
        "Tensor",
        "NoneConst",
        "type_other",
    }
)
