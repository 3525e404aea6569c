"""Batch normalization (``theano.tensor.nnet.bn``).

Written with elementwise ops and reductions, so the fusion rewrite can merge it into one
kernel: there is no dedicated Op to keep in step. The training-mode output passes through
``BatchNormTrainGradient``, an identity that gives its gradient as Theano's
``AbstractBatchNormTrainGrad`` does: written with the batch statistics that
``batch_normalization_train`` returns, so that a second-order gradient taken with those
statistics held constant (``consider_constant``) holds them constant, and one taken
without differentiates through them. The rewrites remove the identity.
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Apply
from theano_dag.graph.identity_ops import ViewOp
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.elemwise import reduce_grad_to
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "batch_normalization",
    "batch_normalization_train",
    "batch_normalization_test",
    "AbstractBatchNormTrain",
    "AbstractBatchNormInference",
    "AbstractBatchNormTrainGrad",
    "BatchNormTrainGradient",
]


def batch_normalization(inputs, gamma, beta, mean, std, mode="low_mem"):
    """``(inputs - mean) * (gamma / std) + beta``, every argument broadcast against
    ``inputs``.

    ``mode`` (``'low_mem'``/``'high_mem'``) is accepted for Theano compatibility; both
    build the same graph here (fusion decides what is kept in memory).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, g, b, m, s = tt.dmatrix("x"), tt.drow("g"), tt.drow("b"), tt.drow("m"), tt.drow("s")
    >>> out = batch_normalization(x, g, b, m, s)
    >>> out.eval({x: np.array([[1.0, 4.0]]), g: np.ones((1, 2)), b: np.zeros((1, 2)),
    ...           m: np.array([[0.0, 2.0]]), s: np.array([[1.0, 2.0]])})
    array([[1., 1.]])
    """
    if mode not in ("low_mem", "high_mem"):
        raise ValueError(
            f"batch_normalization: mode must be 'low_mem' or 'high_mem', " f"got {mode!r}"
        )
    inputs = as_tensor_variable(inputs)
    args = {"gamma": gamma, "beta": beta, "mean": mean, "std": std}
    for name, v in args.items():
        v = as_tensor_variable(v)
        if v.ndim > inputs.ndim:
            raise TypeError(
                f"batch_normalization: {name} has {v.ndim} dimensions, more than "
                f"inputs ({inputs.ndim})"
            )
        args[name] = v
    return (inputs - args["mean"]) * (args["gamma"] / args["std"]) + args["beta"]


def _prepare_axes(axes, ndim, who):
    if isinstance(axes, str):
        if axes == "per-activation":
            axes = (0,)
        elif axes == "spatial":
            axes = (0,) + tuple(range(2, ndim))
        else:
            raise ValueError(
                f"{who}: axes must be 'per-activation', 'spatial' or a tuple of "
                f"ints, got {axes!r}"
            )
    elif isinstance(axes, (tuple, list, np.ndarray)):
        axes = tuple(int(a) for a in axes)
    else:
        raise ValueError(
            f"{who}: axes must be 'per-activation', 'spatial' or a tuple of " f"ints, got {axes!r}"
        )
    axes = tuple(sorted(set(axes)))
    if not axes:
        raise ValueError(f"{who}: there must be at least one normalization axis")
    if min(axes) < 0 or max(axes) >= ndim:
        raise ValueError(f"{who}: axes must be in [0, {ndim}), got {axes}")
    return axes, tuple(d for d in range(ndim) if d not in axes)


def _expand_params(who, ndim, axes, keep, **params):
    """Give each parameter the full rank with length-1 ``axes``; return also whether
    they came in reduced rank (then the statistics are returned reduced too)."""
    ranks = {v.ndim for v in params.values()}
    if len(ranks) != 1 or ranks.pop() not in (ndim, len(keep)):
        detail = ", ".join(f"{k} has {v.ndim}" for k, v in params.items())
        raise ValueError(
            f"{who}: parameters must have {len(keep)} dimensions (the "
            f"non-normalized axes) or {ndim} (like inputs); {detail}"
        )
    reduced = next(iter(params.values())).ndim != ndim
    out = {}
    for name, v in params.items():
        if reduced:
            out[name] = v.dimshuffle(_expand_pattern(ndim, keep))
        elif all(v.type.shape[d] == 1 for d in axes):
            out[name] = v
        else:
            # Make the normalized axes statically length 1 (Theano's addbroadcast).
            out[name] = tb.reshape(v, [1 if d in axes else tb.shape_i(v, d) for d in range(ndim)])
    return out, reduced


def _expand_pattern(ndim, keep):
    """The dimshuffle that gives a value of the kept axes the full rank (length 1 on the
    normalized axes)."""
    pattern = ["x"] * ndim
    for i, d in enumerate(keep):
        pattern[d] = i
    return tuple(pattern)


def _check_epsilon(epsilon, who):
    if float(np.asarray(epsilon, dtype=config.floatX)) < 1e-5:
        raise ValueError(f"{who}: epsilon must be at least 1e-5, got {epsilon}")


def batch_normalization_train(
    inputs,
    gamma,
    beta,
    axes="per-activation",
    epsilon=1e-4,
    running_average_factor=0.1,
    running_mean=None,
    running_var=None,
):
    """Normalize with the batch statistics; return ``(out, mean, invstd)`` and, when
    ``running_mean``/``running_var`` are given, their updated values too.

    ``axes``: ``'per-activation'`` (``(0,)``), ``'spatial'`` (``(0, 2, 3, ...)``) or a
    tuple. ``gamma``/``beta`` have either the rank of the kept axes or that of
    ``inputs`` (with length 1 on ``axes``); the statistics come back in the same layout.
    The running variance uses the unbiased batch variance (``m / (m - 1)``), as Theano.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, g, b = tt.dmatrix("x"), tt.dvector("g"), tt.dvector("b")
    >>> out, mean, invstd = batch_normalization_train(x, g, b)
    >>> mean.eval({x: np.array([[1.0, 2.0], [3.0, 6.0]])})
    array([2., 4.])
    """
    who = "batch_normalization_train"
    inputs = as_tensor_variable(inputs)
    ndim = inputs.ndim
    axes, keep = _prepare_axes(axes, ndim, who)
    _check_epsilon(epsilon, who)
    if (running_mean is None) != (running_var is None):
        raise ValueError(
            f"{who}: running_mean and running_var must both be given or both " "be None"
        )
    params = {"gamma": as_tensor_variable(gamma), "beta": as_tensor_variable(beta)}
    if running_mean is not None:
        params["running_mean"] = as_tensor_variable(running_mean)
        params["running_var"] = as_tensor_variable(running_var)
    p, reduced = _expand_params(who, ndim, axes, keep, **params)

    mean = tm.mean(inputs, axis=axes, keepdims=True)
    var = tm.var(inputs, axis=axes, keepdims=True)
    invstd = 1.0 / tm.sqrt(var + np.asarray(epsilon, dtype=inputs.dtype))
    out = (inputs - mean) * invstd * p["gamma"] + p["beta"]
    results = [out, mean, invstd]
    if running_mean is not None:
        factor = np.asarray(running_average_factor, dtype=inputs.dtype)
        m = 1
        for d in axes:
            m = m * tb.shape_i(inputs, d)
        m = tb.cast(m, inputs.dtype)
        new_mean = p["running_mean"] * (1 - factor) + mean * factor
        new_var = p["running_var"] * (1 - factor) + (m / (m - 1)) * var * factor
        results += [new_mean, new_var]
    expand = None
    if reduced:
        results = [results[0]] + [r.dimshuffle(keep) for r in results[1:]]
        expand = _expand_pattern(ndim, keep)
    # The gradient of ``out`` reads the statistics the caller gets.
    results[0] = BatchNormTrainGradient(axes, expand)(
        out, inputs, p["gamma"], p["beta"], results[1], results[2]
    )
    return tuple(results)


def _train_gradients(axes, x, dy, gamma, mean, invstd):
    """The gradients of the training-mode output with respect to ``x``, ``gamma`` and
    ``beta`` given the output's gradient ``dy``, written with ``mean`` and ``invstd``
    (full rank, length 1 on ``axes``) as Theano's ``AbstractBatchNormTrainGrad`` writes
    them, so that their own derivatives, where those two are held constant, are Theano's.
    """
    centred = x - mean
    # d(centred * invstd)/dx through invstd: -invstd**3 * centred * mean(dy * centred)
    c = dy * invstd - centred * (tm.mean(dy * centred, axis=axes, keepdims=True) * invstd**3)
    g_x = gamma * (c - tm.mean(c, axis=axes, keepdims=True))
    g_gamma = tm.sum(dy * invstd * centred, axis=axes, keepdims=True)
    g_beta = tm.sum(dy, axis=axes, keepdims=True)
    return g_x, g_gamma, g_beta


class BatchNormTrainGradient(ViewOp):
    """The training-mode output of ``batch_normalization_train`` with its gradient.

    ``BatchNormTrainGradient(axes, expand)(out, x, gamma, beta, mean, invstd)`` is
    ``out`` (computed by elementwise ops and reductions), whose gradient with respect to
    ``x``, ``gamma`` and ``beta`` is Theano's batch-normalization gradient, written with
    the ``mean`` and ``invstd`` that the caller received (``expand``: the dimshuffle that
    gives them full rank, or None). ``out`` itself gets no gradient (its graph's gradient
    is that one), nor do the statistics through this node: their uses of ``x`` are in
    the gradient's graph. The useless-identity rewrite removes it, as every ``ViewOp``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> out = batch_normalization_train(x, np.ones(2), np.zeros(2))[0]
    >>> type(out.owner.op).__name__
    'BatchNormTrainGradient'
    >>> written_out = (x - x.mean(axis=0)) / tt.sqrt(x.var(axis=0) + 1e-4)
    >>> w = np.array([[1.0, 2.0], [3.0, 5.0], [0.0, -1.0]])
    >>> xv = np.array([[1.0, 2.0], [3.0, 6.0], [4.0, -1.0]])
    >>> g_x = tt.grad((out * w).sum(), x).eval({x: xv})
    >>> np.allclose(g_x, tt.grad((written_out * w).sum(), x).eval({x: xv}))
    True
    """

    __props__ = ("axes", "expand")

    def __init__(self, axes, expand=None):
        self.axes = tuple(axes)
        self.expand = None if expand is None else tuple(expand)

    def make_node(self, out, x, gamma, beta, mean, invstd):
        ins = [as_tensor_variable(v) for v in (out, x, gamma, beta, mean, invstd)]
        return Apply(self, ins, [ins[0].type()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[False], [True], [True], [True], [False], [False]]

    def grad(self, inputs, output_grads):
        _, x, gamma, beta, mean, invstd = inputs
        if self.expand is not None:
            mean, invstd = mean.dimshuffle(self.expand), invstd.dimshuffle(self.expand)
        g_x, g_gamma, g_beta = _train_gradients(self.axes, x, output_grads[0], gamma, mean, invstd)
        none = disconnected_type()
        grads = [reduce_grad_to(g, v) for g, v in ((g_x, x), (g_gamma, gamma), (g_beta, beta))]
        return [none, *grads, none, none]

    def R_op(self, inputs, eval_points):
        return [eval_points[0]]


def batch_normalization_test(inputs, gamma, beta, mean, var, axes="per-activation", epsilon=1e-4):
    """Normalize with given (running) statistics:
    ``(inputs - mean) * gamma / sqrt(var + epsilon) + beta``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, g, b, m, v = (tt.dmatrix("x"), tt.dvector("g"), tt.dvector("b"), tt.dvector("m"),
    ...                  tt.dvector("v"))
    >>> batch_normalization_test(x, g, b, m, v, epsilon=1e-5).eval(
    ...     {x: np.array([[3.0]]), g: np.ones(1), b: np.zeros(1), m: np.ones(1),
    ...      v: np.full(1, 4.0)}).round(4)
    array([[1.]])
    """
    who = "batch_normalization_test"
    inputs = as_tensor_variable(inputs)
    axes, keep = _prepare_axes(axes, inputs.ndim, who)
    _check_epsilon(epsilon, who)
    p, _ = _expand_params(
        who,
        inputs.ndim,
        axes,
        keep,
        gamma=as_tensor_variable(gamma),
        beta=as_tensor_variable(beta),
        mean=as_tensor_variable(mean),
        var=as_tensor_variable(var),
    )
    std = tm.sqrt(p["var"] + np.asarray(epsilon, dtype=inputs.dtype))
    return (inputs - p["mean"]) * (p["gamma"] / std) + p["beta"]


class _AbstractBatchNorm(Op):
    """Theano's abstract batch-normalization ops. Calling one builds what
    ``batch_normalization_train``/``_test`` (or the training gradient) build, from
    elementwise ops and reductions, so a graph never holds one of these (what Theano's
    rewrites guarantee once they replace them). ``axes``: a tuple of ints, as Theano's.
    """

    __props__ = ("axes",)

    def __init__(self, axes=(0,)):
        if not isinstance(axes, (tuple, list)) or not axes:
            raise ValueError(
                f"{type(self).__name__}: axes must be a non-empty tuple of ints, got {axes!r}"
            )
        self.axes = tuple(int(a) for a in axes)

    def make_node(self, *inputs):
        raise NotImplementedError(
            f"{type(self).__name__}: theano_dag builds batch normalization from "
            "elementwise ops and makes no node of this op: call the op itself, or "
            "batch_normalization_train or batch_normalization_test"
        )


class AbstractBatchNormTrain(_AbstractBatchNorm):
    """Theano's training-mode batch normalization: ``AbstractBatchNormTrain(axes)(x,
    scale, bias, epsilon=1e-4, running_average_factor=0.1, running_mean=None,
    running_var=None)`` is ``batch_normalization_train`` with those arguments.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x, g, b = tt.dmatrix("x"), tt.drow("g"), tt.drow("b")
    >>> out, mean, invstd = AbstractBatchNormTrain((0,))(x, g, b)
    >>> mean.eval({x: np.array([[1.0, 2.0], [3.0, 6.0]])})
    array([[2., 4.]])
    """

    def __call__(
        self,
        x,
        scale,
        bias,
        epsilon=1e-4,
        running_average_factor=0.1,
        running_mean=None,
        running_var=None,
    ):
        return list(
            batch_normalization_train(
                x,
                scale,
                bias,
                self.axes,
                epsilon,
                running_average_factor,
                running_mean,
                running_var,
            )
        )


class AbstractBatchNormInference(_AbstractBatchNorm):
    """Theano's inference-mode batch normalization: ``AbstractBatchNormInference(axes)(x,
    scale, bias, estimated_mean, estimated_variance, epsilon=1e-4)`` is
    ``batch_normalization_test`` with those arguments.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dmatrix("x")
    >>> one, zero = np.ones((1, 1)), np.zeros((1, 1))
    >>> AbstractBatchNormInference((0,))(x, one, zero, zero, one * 4, 1e-5).eval(
    ...     {x: np.array([[3.0]])}).round(4)
    array([[1.5]])
    """

    def __call__(self, x, scale, bias, estimated_mean, estimated_variance, epsilon=1e-4):
        return batch_normalization_test(
            x, scale, bias, estimated_mean, estimated_variance, self.axes, epsilon
        )


class AbstractBatchNormTrainGrad(_AbstractBatchNorm):
    """Theano's gradient of the training-mode batch normalization:
    ``AbstractBatchNormTrainGrad(axes)(x, dy, scale, x_mean, x_invstd, epsilon=1e-4)``
    gives the gradients with respect to ``x``, ``scale`` and ``bias`` of the output
    whose gradient is ``dy``, written with the statistics ``x_mean`` and ``x_invstd``
    (each with ``scale``'s full rank; ``epsilon`` is accepted as Theano's and unused).

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x, dy = tt.dmatrix("x"), tt.dmatrix("dy")
    >>> ones = np.ones((1, 2))
    >>> g_x, g_scale, g_bias = AbstractBatchNormTrainGrad((0,))(x, dy, ones, ones, ones)
    >>> g_bias.eval({dy: np.array([[1.0, 2.0], [3.0, 4.0]])})
    array([[4., 6.]])
    """

    def __call__(self, x, dy, scale, x_mean, x_invstd, epsilon=1e-4):
        x, dy, scale, x_mean, x_invstd = (
            as_tensor_variable(v) for v in (x, dy, scale, x_mean, x_invstd)
        )
        who = type(self).__name__
        axes, _ = _prepare_axes(self.axes, x.ndim, who)
        for name, v in (("dy", dy), ("scale", scale), ("x_mean", x_mean), ("x_invstd", x_invstd)):
            if v.ndim != x.ndim:
                raise ValueError(
                    f"{who}: {name} must have the {x.ndim} dimensions of x, got {v.ndim}"
                )
        g_x, g_scale, g_bias = _train_gradients(axes, x, dy, scale, x_mean, x_invstd)
        return [g_x, reduce_grad_to(g_scale, scale), reduce_grad_to(g_bias, scale)]
