"""Batch normalization (``theano.tensor.nnet.bn``).

Written with elementwise ops and reductions, so ``grad`` differentiates it and the
fusion rewrite can merge it into one kernel: there is no dedicated Op to keep in step.
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config
from theano_dag.graph.op import Op
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "batch_normalization",
    "batch_normalization_train",
    "batch_normalization_test",
    "AbstractBatchNormTrain",
    "AbstractBatchNormInference",
    "AbstractBatchNormTrainGrad",
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
            pattern = ["x"] * ndim
            for i, d in enumerate(keep):
                pattern[d] = i
            out[name] = v.dimshuffle(pattern)
        elif all(v.type.shape[d] == 1 for d in axes):
            out[name] = v
        else:
            # Make the normalized axes statically length 1 (Theano's addbroadcast).
            out[name] = tb.reshape(v, [1 if d in axes else tb.shape_i(v, d) for d in range(ndim)])
    return out, reduced


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
    if reduced:
        results = [results[0]] + [r.dimshuffle(keep) for r in results[1:]]
    return tuple(results)


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
    """Theano's abstract batch-normalization ops, by name only: theano_dag's
    ``batch_normalization_train``/``_test`` build elementwise ops and reductions instead,
    so a compiled graph never holds one of these (what Theano's rewrites guarantee once
    they replace them); building one directly raises ``NotImplementedError``."""

    __props__ = ()

    def make_node(self, *inputs):
        raise NotImplementedError(
            f"{type(self).__name__}: theano_dag builds batch normalization from "
            "elementwise ops; call batch_normalization_train or batch_normalization_test"
        )


class AbstractBatchNormTrain(_AbstractBatchNorm):
    """Theano's training-mode batch normalization op (see ``_AbstractBatchNorm``).

    >>> import theano_dag.tensor as tt
    >>> AbstractBatchNormTrain()(tt.dmatrix())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    NotImplementedError: AbstractBatchNormTrain: theano_dag builds batch normalization ...
    """


class AbstractBatchNormInference(_AbstractBatchNorm):
    """Theano's inference-mode batch normalization op (see ``_AbstractBatchNorm``)."""


class AbstractBatchNormTrainGrad(_AbstractBatchNorm):
    """Theano's gradient of ``AbstractBatchNormTrain`` (see ``_AbstractBatchNorm``)."""
