"""Ops that exist for differentiation: identities that shape the gradient.

The identity ops (``ZeroGrad``, ``DisconnectedGrad``, ``UndefinedGrad``,
``ConsiderConstant``, ``GradClip``, ``GradScale``) return their input unchanged and only
change what ``grad`` does when it passes through them. They run (``perform`` returns a
view of the input) but the optimizer ought to remove them before a function runs.
"""

from __future__ import annotations

from theano_dag import tensor as tt
from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.identity_ops import ViewOp
from theano_dag.graph.null_type import disconnected_type, grad_undefined

__all__ = [
    "ZeroGrad",
    "DisconnectedGrad",
    "UndefinedGrad",
    "ConsiderConstant",
    "GradClip",
    "GradScale",
    "zero_grad",
    "disconnected_grad",
    "undefined_grad",
    "consider_constant",
    "grad_clip",
    "grad_scale",
    "zero_grad_",
    "disconnected_grad_",
    "undefined_grad_",
    "consider_constant_",
]


class _GradIdentity(ViewOp):
    """Identity in the forward pass (a view of its input); subclasses set the gradient.

    Being ViewOps, they are what the optimizer's view-removing rewrite takes out.
    """

    __props__ = ()

    def make_node(self, x):
        if not isinstance(x, Variable):
            x = tt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def R_op(self, inputs, eval_points):
        return list(eval_points)


class ZeroGrad(_GradIdentity):
    """Identity whose gradient is zero (the graph behind it still counts as connected)."""

    def grad(self, inputs, output_grads):
        return [tt.zeros_like(output_grads[0])]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return [tt.zeros_like(eval_points[0])]


class ConsiderConstant(ZeroGrad):
    """Theano's older name for ``ZeroGrad`` (what ``consider_constant(x)`` applies)."""


class DisconnectedGrad(_GradIdentity):
    """Identity that cuts the graph for ``grad``: nothing behind it is differentiated."""

    def grad(self, inputs, output_grads):
        return [disconnected_type()]

    def R_op(self, inputs, eval_points):
        return [None]

    def connection_pattern(self, node):
        return [[False]]


class UndefinedGrad(_GradIdentity):
    """Identity whose gradient is undefined: ``grad`` through it raises NullTypeGradError."""

    def grad(self, inputs, output_grads):
        return [grad_undefined(self, 0, inputs[0])]

    def R_op(self, inputs, eval_points):
        return [None]


class GradClip(_GradIdentity):
    """Identity whose gradient is clipped to ``[clip_lower_bound, clip_upper_bound]``."""

    __props__ = ("clip_lower_bound", "clip_upper_bound")

    def __init__(self, clip_lower_bound, clip_upper_bound):
        if clip_upper_bound < clip_lower_bound:
            raise ValueError(
                f"GradClip: the upper bound {clip_upper_bound} is below the "
                f"lower bound {clip_lower_bound}"
            )
        self.clip_lower_bound = clip_lower_bound
        self.clip_upper_bound = clip_upper_bound

    def grad(self, inputs, output_grads):
        return [tt.clip(output_grads[0], self.clip_lower_bound, self.clip_upper_bound)]


class GradScale(_GradIdentity):
    """Identity whose gradient is multiplied by ``multiplier``."""

    __props__ = ("multiplier",)

    def __init__(self, multiplier):
        self.multiplier = multiplier

    def grad(self, inputs, output_grads):
        return [output_grads[0] * self.multiplier]


# The ops ``zero_grad`` & co. apply, under Theano's names (code compares node ops to them).
zero_grad_ = ZeroGrad()
disconnected_grad_ = DisconnectedGrad()
undefined_grad_ = UndefinedGrad()
consider_constant_ = ConsiderConstant()


def zero_grad(x):
    """Return ``x`` unchanged, but with a zero gradient.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import grad
    >>> x = tt.dscalar("x")
    >>> float(grad(x * zero_grad(x), x).eval({x: 3.0}))
    3.0
    """
    return zero_grad_(x)


def disconnected_grad(x):
    """Return ``x`` unchanged, but with no gradient path through it (faster than zero_grad).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import grad
    >>> x = tt.dscalar("x")
    >>> float(grad(x * disconnected_grad(x), x).eval({x: 3.0}))
    3.0
    """
    return disconnected_grad_(x)


def undefined_grad(x):
    """Return ``x`` unchanged, but with an undefined gradient (``grad`` through it raises).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import grad
    >>> x = tt.dscalar("x")
    >>> grad(undefined_grad(x) * 2, x)
    Traceback (most recent call last):
    ...
    theano_dag.gradient.reverse.NullTypeGradError: grad: the gradient with respect to x is...
    """
    return undefined_grad_(x)


def consider_constant(x):
    """Deprecated (as in Theano): use ``zero_grad`` or ``disconnected_grad``.

    >>> import warnings
    >>> import theano_dag.tensor as tt
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     y = consider_constant(tt.dscalar("x"))
    >>> y.owner.op
    ConsiderConstant
    """
    import warnings

    warnings.warn(
        "consider_constant() is deprecated, use zero_grad() or disconnected_grad()",
        DeprecationWarning,
        stacklevel=2,
    )
    return consider_constant_(x)


def grad_clip(x, lower_bound, upper_bound):
    """Return ``x`` unchanged; its gradient is clipped to ``[lower_bound, upper_bound]``.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import grad
    >>> x = tt.dscalar("x")
    >>> float(grad(grad_clip(x, -1, 1) ** 2, x).eval({x: 2.0}))
    1.0
    """
    return GradClip(lower_bound, upper_bound)(x)


def grad_scale(x, multiplier):
    """Return ``x`` unchanged; its gradient is multiplied by ``multiplier``.

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.gradient import grad
    >>> x = tt.dscalar("x")
    >>> float(grad(grad_scale(x ** 2, -0.5), x).eval({x: 2.0}))
    -2.0
    """
    return GradScale(multiplier)(x)
