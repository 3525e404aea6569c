"""Symbolic differentiation (``theano.gradient``): ``grad``, ``Lop``, ``Rop``, ``jacobian``.

What each module holds:

- :mod:`~theano_dag.gradient.reverse`: reverse mode over ``Op.L_op`` (``grad``, ``Lop``,
  ``Rop``, ``subgraph_grad``);
- :mod:`~theano_dag.gradient.ops`: identity ops that only change the gradient
  (``zero_grad``, ``grad_clip``, ...);
- :mod:`~theano_dag.gradient.row_loop`: ``jacobian`` and ``hessian``, one row at a time;
- :mod:`~theano_dag.gradient.verify`: finite-difference checks (``verify_grad``).

The placeholder types (``DisconnectedType``, ``NullType``) live in the graph floor
(:mod:`theano_dag.graph.null_type`), because every op's ``grad`` returns them.

>>> import theano_dag.tensor as tt
>>> x = tt.dscalar("x")
>>> grad(x**3, x).eval({x: 2.0})
array(12.)
"""

from theano_dag.gradient.ops import (
    ConsiderConstant,
    DisconnectedGrad,
    GradClip,
    GradScale,
    UndefinedGrad,
    ZeroGrad,
    consider_constant,
    consider_constant_,
    disconnected_grad,
    disconnected_grad_,
    grad_clip,
    grad_scale,
    undefined_grad,
    undefined_grad_,
    zero_grad,
    zero_grad_,
)
from theano_dag.gradient.reverse import (
    DisconnectedInputError,
    GradArgumentError,
    GradArgumentTypeError,
    Lop,
    NullTypeGradError,
    NullTypeRopError,
    Rop,
    grad,
    subgraph_grad,
)
from theano_dag.gradient.row_loop import MapOverIndex, hessian, jacobian, map_over_index
from theano_dag.gradient.verify import GradientError, mode_not_slow, numeric_grad, verify_grad
from theano_dag.graph.null_type import (
    DisconnectedType,
    NullType,
    disconnected_type,
    grad_not_implemented,
    grad_undefined,
)

__all__ = [
    "grad",
    "Lop",
    "Rop",
    "jacobian",
    "hessian",
    "subgraph_grad",
    "DisconnectedInputError",
    "NullTypeGradError",
    "NullTypeRopError",
    "GradArgumentError",
    "GradArgumentTypeError",
    "DisconnectedType",
    "NullType",
    "disconnected_type",
    "grad_undefined",
    "grad_not_implemented",
    "ZeroGrad",
    "DisconnectedGrad",
    "UndefinedGrad",
    "ConsiderConstant",
    "GradClip",
    "GradScale",
    "MapOverIndex",
    "zero_grad",
    "zero_grad_",
    "disconnected_grad",
    "disconnected_grad_",
    "undefined_grad_",
    "consider_constant_",
    "undefined_grad",
    "consider_constant",
    "grad_clip",
    "grad_scale",
    "map_over_index",
    "numeric_grad",
    "verify_grad",
    "GradientError",
    "mode_not_slow",
]
