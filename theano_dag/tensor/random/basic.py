"""The distributions, Theano 1.1.2's ``theano.tensor.random.basic``: each a
``RandomVariable`` class (``NormalRV``, ...) and an instance named as the distribution
(``normal``, ...), called numpy-like: ``normal(loc=0.0, scale=1.0, size=None, rng=None,
dtype=None)``. ``RandomStream`` is the usual way to use them.

``normal``, ``halfnormal``, ``truncated_normal`` (at two standard deviations),
``uniform``, ``cauchy``, ``halfcauchy``, ``exponential``, ``gamma``, ``invgamma``,
``beta``, ``truncexpon``, ``bernoulli``, ``binomial``, ``nbinom``, ``betabinom``,
``poisson``, ``randint`` (``integers``) draw one number per element; ``categorical``
draws one index per probability vector, ``multinomial``, ``dirichlet`` and
``multivariate_normal`` one vector per parameter vector; ``choice`` and ``permutation``
draw from ``arange(n)`` or a vector.

``size`` is numpy's: the shape of the draws (of the batch of draws for the vector
distributions, the vector's length added), the parameters broadcasting against it.

>>> import numpy as np
>>> from theano_dag.compile.sharedvalue import shared
>>> rng = shared(np.random.default_rng(0))
>>> x = normal(0.0, 1.0, size=(2, 3), rng=rng)
>>> x.type, x.owner.op
(TensorType(float64, shape=(2, 3)), normal_rv{float64})
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Constant, Variable
from theano_dag.tensor.basic import cast
from theano_dag.tensor.elemwise import broadcast_static_shape
from theano_dag.tensor.random.op import (
    RandomVariable,
    int_param,
    size_length,
)
from theano_dag.tensor.shape import shape_i
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "RandomVariable",
    "NormalRV",
    "HalfNormalRV",
    "TruncatedNormalRV",
    "UniformRV",
    "CauchyRV",
    "HalfCauchyRV",
    "ExponentialRV",
    "GammaRV",
    "InvGammaRV",
    "BetaRV",
    "TruncExponentialRV",
    "BernoulliRV",
    "BinomialRV",
    "NegBinomialRV",
    "BetaBinomialRV",
    "PoissonRV",
    "PolyaGammaRV",
    "IntegersRV",
    "RandIntRV",
    "CategoricalRV",
    "MultinomialRV",
    "DirichletRV",
    "MvNormalRV",
    "ChoiceRV",
    "PermutationRV",
    "normal",
    "halfnormal",
    "truncated_normal",
    "uniform",
    "cauchy",
    "halfcauchy",
    "exponential",
    "gamma",
    "invgamma",
    "beta",
    "truncexpon",
    "bernoulli",
    "binomial",
    "nbinom",
    "betabinom",
    "poisson",
    "polyagamma",
    "randint",
    "integers",
    "categorical",
    "multinomial",
    "dirichlet",
    "multivariate_normal",
    "choice",
    "permutation",
]


def _draw_shape(size, *params):
    """The shape of a draw built from numpy arrays: ``size``, which the parameters must
    broadcast to (as numpy's own draws require), or else their broadcast shape."""
    shape = np.broadcast_shapes(*(np.shape(p) for p in params))
    if size is None:
        return shape
    if np.broadcast_shapes(tuple(size), shape) != tuple(size):
        raise ValueError(f"parameters of broadcast shape {shape} do not fit size {tuple(size)}")
    return tuple(size)


def _require_int(op, params, names):
    for name, p in zip(op.param_names, params):
        if name in names and not int_param(p):
            raise TypeError(f"{op}: parameter {name} must be integers, got {p.type}")


# -- one number per element ----------------------------------------------------------------


class NormalRV(RandomVariable):
    """Gaussian draws: parameters ``loc`` (mean) and ``scale`` (standard deviation).

    >>> import numpy as np
    >>> from theano_dag.compile.sharedvalue import shared
    >>> rng = shared(np.random.default_rng(0))
    >>> new_rng, x = NormalRV("float64")(rng, (2, 3), 0.0, 1.0)
    >>> x.type
    TensorType(float64, shape=(2, 3))
    """

    name = "normal"
    param_names = ("loc", "scale")

    def draw(self, loc=0.0, scale=1.0, size=None, **kwargs):
        return super().draw(loc, scale, size=size, **kwargs)

    def draw_numpy(self, rng, loc, scale, size):
        return rng.normal(loc, scale, size=size)


class HalfNormalRV(RandomVariable):
    """``loc + scale * |z|`` for a standard normal ``z`` (scipy's ``halfnorm``).

    >>> bool((halfnormal(1.0, 2.0, size=(50,)).eval() >= 1.0).all())
    True
    """

    name = "halfnormal"
    param_names = ("loc", "scale")

    def draw(self, loc=0.0, scale=1.0, size=None, **kwargs):
        return super().draw(loc, scale, size=size, **kwargs)

    def draw_numpy(self, rng, loc, scale, size):
        shape = _draw_shape(size, loc, scale)
        return loc + scale * np.abs(rng.standard_normal(shape))


class TruncatedNormalRV(RandomVariable):
    """``loc + scale * z`` for a standard normal ``z`` kept within ``[-2, 2]``: the
    normal truncated at two standard deviations of Theano's MRG streams
    (``normal(truncate=True)``), drawn by rejection (about 4.6% of the draws are drawn
    again, each round). Its standard deviation is about ``0.8796 * scale``.

    >>> x = truncated_normal(1.0, 2.0, size=(1000,)).eval()
    >>> bool(((x >= -3.0) & (x <= 5.0)).all())
    True
    """

    name = "truncated_normal"
    param_names = ("loc", "scale")

    def draw(self, loc=0.0, scale=1.0, size=None, **kwargs):
        return super().draw(loc, scale, size=size, **kwargs)

    def draw_numpy(self, rng, loc, scale, size):
        z = np.asarray(rng.standard_normal(_draw_shape(size, loc, scale)))
        flat = z.reshape(-1)  # a view: z is new and contiguous
        again = np.flatnonzero(np.abs(flat) > 2.0)
        while again.size:
            flat[again] = rng.standard_normal(again.size)
            again = again[np.abs(flat[again]) > 2.0]
        return loc + scale * z


class UniformRV(RandomVariable):
    """Uniform draws in ``[low, high)``."""

    name = "uniform"
    param_names = ("low", "high")

    def draw(self, low=0.0, high=1.0, size=None, **kwargs):
        return super().draw(low, high, size=size, **kwargs)

    def draw_numpy(self, rng, low, high, size):
        return rng.uniform(low, high, size=size)


class CauchyRV(RandomVariable):
    """Cauchy draws of location ``loc`` (the median) and scale ``scale``."""

    name = "cauchy"
    param_names = ("loc", "scale")

    def draw(self, loc=0.0, scale=1.0, size=None, **kwargs):
        return super().draw(loc, scale, size=size, **kwargs)

    def draw_numpy(self, rng, loc, scale, size):
        return loc + scale * _standard_cauchy(rng, _draw_shape(size, loc, scale))


def _standard_cauchy(rng, shape):
    """Standard Cauchy draws; from a RandomState (Theano's streams) by the inverse of the
    distribution function, ``tan(pi (u - 1/2))``, as Theano's draws (scipy's) are, so that
    a seed gives Theano's numbers."""
    if isinstance(rng, np.random.RandomState):
        return np.tan(np.pi * (rng.uniform(size=shape) - 0.5))
    return rng.standard_cauchy(shape)


class HalfCauchyRV(RandomVariable):
    """``loc + scale * |c|`` for a standard Cauchy ``c`` (scipy's ``halfcauchy``)."""

    name = "halfcauchy"
    param_names = ("loc", "scale")

    def draw(self, loc=0.0, scale=1.0, size=None, **kwargs):
        return super().draw(loc, scale, size=size, **kwargs)

    def draw_numpy(self, rng, loc, scale, size):
        shape = _draw_shape(size, loc, scale)
        if isinstance(rng, np.random.RandomState):  # Theano's (scipy's) inverse, as above
            return loc + scale * np.tan(np.pi / 2 * rng.uniform(size=shape))
        return loc + scale * np.abs(rng.standard_cauchy(shape))


class ExponentialRV(RandomVariable):
    """Exponential draws of mean ``scale`` (rate ``1 / scale``)."""

    name = "exponential"
    param_names = ("scale",)

    def draw(self, scale=1.0, size=None, **kwargs):
        return super().draw(scale, size=size, **kwargs)

    def draw_numpy(self, rng, scale, size):
        return rng.exponential(scale, size=size)


class GammaRV(RandomVariable):
    """Gamma draws of ``shape`` k and ``scale`` theta (mean ``k * theta``).

    Called as Theano 1.1.2's ``gamma(shape, rate)``: the node's scale is ``1 / rate``.

    >>> round(float(gamma(2.0, 4.0, size=(20000,)).eval().mean()), 1)
    0.5
    """

    name = "gamma"
    param_names = ("shape", "scale")

    def draw(self, shape, rate, size=None, **kwargs):
        # A rate given as a number is inverted in float64 (Theano's, in Python): as a
        # constant it may be float32 (3.0 is), and 1 / 3 in float32 is 3e-8 off.
        if isinstance(rate, Variable):
            scale = 1.0 / rate
        else:
            scale = 1.0 / np.asarray(rate, dtype="float64")
            scale = float(scale) if scale.ndim == 0 else scale  # a number: autocast as Theano
        return super().draw(shape, scale, size=size, **kwargs)

    def draw_numpy(self, rng, shape, scale, size):
        return rng.gamma(shape, scale, size=size)


class InvGammaRV(RandomVariable):
    """Inverse-gamma draws ``rate / g`` for ``g`` a gamma of ``shape`` and scale 1 (the
    inverse of a gamma of ``shape`` and ``rate``; scipy's ``invgamma(shape, scale=rate)``,
    mean ``rate / (shape - 1)``)."""

    name = "invgamma"
    param_names = ("shape", "rate")

    def draw_numpy(self, rng, shape, rate, size):
        shape_ = _draw_shape(size, shape, rate)
        return rate / rng.gamma(shape, 1.0, size=shape_)


class BetaRV(RandomVariable):
    """Beta draws in ``[0, 1]`` with parameters ``alpha`` and ``beta``."""

    name = "beta"
    param_names = ("alpha", "beta")

    def draw_numpy(self, rng, alpha, beta, size):
        return rng.beta(alpha, beta, size=size)


class TruncExponentialRV(RandomVariable):
    """``loc + scale * x`` for ``x`` exponential truncated to ``[0, b]`` (scipy's
    ``truncexpon(b, loc, scale)``), drawn by inverting its distribution function."""

    name = "truncexpon"
    param_names = ("b", "loc", "scale")

    def draw_numpy(self, rng, b, loc, scale, size):
        u = rng.random(_draw_shape(size, b, loc, scale))
        # the inverse of F(x) = (1 - exp(-x)) / (1 - exp(-b)), kept accurate for small b
        return loc - scale * np.log1p(u * np.expm1(-np.asarray(b, dtype="float64")))


class BernoulliRV(RandomVariable):
    """1 with probability ``p``, else 0."""

    name = "bernoulli"
    param_names = ("p",)
    default_dtype = "int64"

    def draw_numpy(self, rng, p, size):
        return rng.binomial(1, p, size=size)


class BinomialRV(RandomVariable):
    """Binomial draws: the number of successes in ``n`` trials of probability ``p``."""

    name = "binomial"
    param_names = ("n", "p")
    default_dtype = "int64"

    def check_params(self, params):
        super().check_params(params)
        _require_int(self, params, ("n",))

    def draw_numpy(self, rng, n, p, size):
        return rng.binomial(n, p, size=size)


class NegBinomialRV(RandomVariable):
    """The number of failures before the ``n``-th success in trials of probability ``p``
    (numpy's ``negative_binomial``, scipy's ``nbinom``)."""

    name = "nbinom"
    param_names = ("n", "p")
    default_dtype = "int64"

    def draw_numpy(self, rng, n, p, size):
        return rng.negative_binomial(n, p, size=size)


class BetaBinomialRV(RandomVariable):
    """Binomial draws of ``n`` trials whose probability is drawn from ``beta(a, b)``."""

    name = "betabinom"
    param_names = ("n", "a", "b")
    default_dtype = "int64"

    def check_params(self, params):
        super().check_params(params)
        _require_int(self, params, ("n",))

    def draw_numpy(self, rng, n, a, b, size):
        shape = _draw_shape(size, n, a, b)
        return rng.binomial(n, rng.beta(a, b, size=shape))


class PoissonRV(RandomVariable):
    """Poisson draws of mean ``lam``."""

    name = "poisson"
    param_names = ("lam",)
    default_dtype = "int64"

    def draw(self, lam=1.0, size=None, **kwargs):
        return super().draw(lam, size=size, **kwargs)

    def draw_numpy(self, rng, lam, size):
        return rng.poisson(lam, size=size)


# Terms of the series a Polya-Gamma draw is summed from; the rest is replaced by its mean.
_PG_TERMS = 200


class PolyaGammaRV(RandomVariable):
    """Polya-Gamma draws ``PG(b, c)`` (Polson, Scott and Windle 2013), which Theano 1.1.2
    draws with the optional ``pypolyagamma`` package; here without it, from the series
    ``PG(b, c) = sum_k g_k / (2 pi^2 ((k - 1/2)^2 + c^2 / (4 pi^2)))``, ``g_k`` gamma of
    shape ``b``: its first 200 terms, the rest replaced by its mean (so the mean,
    ``b / (2c) tanh(c / 2)``, is exact and the variance off by under 1e-7 of itself).

    >>> d = polyagamma(1.0, 0.0, size=(20000,)).eval()
    >>> round(float(d.mean()), 2)  # b / 4 for c = 0
    0.25
    """

    name = "polyagamma"
    param_names = ("b", "c")

    def draw_numpy(self, rng, b, c, size):
        shape = _draw_shape(size, b, c)
        b = np.broadcast_to(np.asarray(b, dtype="float64"), shape)
        c2 = np.broadcast_to(np.square(np.asarray(c, dtype="float64")), shape)
        total = np.zeros(shape)
        for k in range(1, _PG_TERMS + 1):
            total += rng.gamma(b, 1.0) / ((k - 0.5) ** 2 + c2 / (4 * np.pi**2))
        # the tail's mean: b * sum_{k > K} 1 / ((k - 1/2)^2 + d), d = c^2 / (4 pi^2),
        # approximated by its integral from K to infinity, 1 / sqrt(d) * atan(sqrt(d) / K)
        # (1 / K when d = 0); its error is O(b / K^3).
        d = c2 / (4 * np.pi**2)
        root = np.sqrt(d)
        with np.errstate(divide="ignore", invalid="ignore"):
            tail = np.where(root > 0, np.arctan(root / _PG_TERMS) / root, 1.0 / _PG_TERMS)
        return (total + b * tail) / (2 * np.pi**2)


class IntegersRV(RandomVariable):
    """Integers drawn uniformly from ``[low, high)`` (``numpy.random.Generator.integers``;
    called as ``randint(low, high=None)``, ``high=None`` meaning ``[0, low)``).

    >>> sorted(set(randint(3, size=(200,)).eval().tolist()))
    [0, 1, 2]
    """

    name = "randint"
    param_names = ("low", "high")
    default_dtype = "int64"

    def check_params(self, params):
        super().check_params(params)
        _require_int(self, params, self.param_names)

    def draw(self, low, high=None, size=None, **kwargs):
        if high is None:
            low, high = 0, low
        return super().draw(low, high, size=size, **kwargs)

    def draw_numpy(self, rng, low, high, size):
        if isinstance(rng, np.random.RandomState):
            return rng.randint(low, high, size=size)
        return rng.integers(low, high, size=size)


# Theano 1.1.2's name.
RandIntRV = IntegersRV


def _broadcast_lengths(patterns, shapes):
    """The broadcast shape of tensors of broadcastable ``patterns`` and symbolic ``shapes``
    (the length of the first non-broadcastable dimension, right-aligned)."""
    nd = max((len(b) for b in patterns), default=0)
    out = []
    for d in range(nd):
        length = 1
        for bcast, shp in zip(patterns, shapes):
            k = d - (nd - len(bcast))
            if k >= 0 and not bcast[k]:
                length = shp[k]  # the parameters agree (or numpy raises at run time)
                break
        out.append(length)
    return tuple(out)


# -- one draw per parameter vector ---------------------------------------------------------


class _VectorParamRV(RandomVariable):
    """A draw per core block of the parameters: ``core_ndims`` says how many trailing axes
    of each parameter form one draw's parameter (a probability vector: 1, a covariance
    matrix: 2); the batch shape is ``size``, or the parameters' broadcast shape without
    those axes. ``support`` gives the index of the parameter whose last axis is the length
    of each draw (None: each draw is a single number, as categorical's)."""

    core_ndims: tuple = ()
    support: int | None = -1

    def check_params(self, params):
        super().check_params(params)
        for name, p, nd in zip(self.param_names, params, self.core_ndims):
            if p.ndim < nd:
                kind = "a vector" if nd == 1 else "a matrix"
                raise TypeError(f"{self}: {name} must be {kind} (or a batch of them), got {p.type}")

    def _core_cut(self, shape, nd):
        return tuple(shape)[: len(shape) - nd]

    def _support_static(self, params):
        if self.support is None:
            return ()
        return tuple(params[self.support].type.shape[-1:])

    def static_shape(self, size_entries, params):
        if size_entries:
            batch = tuple(size_entries)
        else:
            shapes = [self._core_cut(p.type.shape, nd) for p, nd in zip(params, self.core_ndims)]
            batch = broadcast_static_shape(shapes, str(self))
        return batch + self._support_static(params)

    def symbolic_shape(self, size, param_shapes, params):
        n = size_length(size)
        if n:
            batch = tuple(size[i] for i in range(n))
        else:  # the parameters' broadcast shape, the core axes left out
            patterns = [
                self._core_cut(p.type.broadcastable, nd) for p, nd in zip(params, self.core_ndims)
            ]
            shapes = [self._core_cut(s, nd) for s, nd in zip(param_shapes, self.core_ndims)]
            batch = _broadcast_lengths(patterns, shapes)
        if self.support is None:
            return batch
        return batch + (tuple(param_shapes[self.support])[-1],)

    def _batch(self, size, params):
        if size:
            return tuple(size)
        return np.broadcast_shapes(
            *[self._core_cut(np.shape(p), nd) for p, nd in zip(params, self.core_ndims)]
        )

    def _broadcast(self, batch, params):
        return [
            np.broadcast_to(p, batch + np.shape(p)[np.ndim(p) - nd :])
            for p, nd in zip(params, self.core_ndims)
        ]


class CategoricalRV(_VectorParamRV):
    """The index drawn with the probabilities ``p`` (its last axis): one per vector."""

    name = "categorical"
    param_names = ("p",)
    default_dtype = "int64"
    core_ndims = (1,)
    support = None

    def draw_numpy(self, rng, p, size):
        batch = self._batch(size, [p])
        (p,) = self._broadcast(batch, [p])
        cdf = np.cumsum(p, axis=-1)
        u = rng.random(batch + (1,)) * cdf[..., -1:]  # unnormalized p are scaled
        return np.minimum((u >= cdf).sum(axis=-1), p.shape[-1] - 1)


class MultinomialRV(_VectorParamRV):
    """Counts of ``n`` trials over the outcomes of probabilities ``p`` (last axis)."""

    name = "multinomial"
    param_names = ("n", "p")
    default_dtype = "int64"
    core_ndims = (0, 1)

    def check_params(self, params):
        super().check_params(params)
        _require_int(self, params, ("n",))

    def draw_numpy(self, rng, n, p, size):
        batch = self._batch(size, [n, p])
        n, p = self._broadcast(batch, [n, p])
        out = np.empty(batch + p.shape[-1:], dtype="int64")
        for idx in np.ndindex(*batch):
            out[idx] = rng.multinomial(int(n[idx]), p[idx])
        return out


class DirichletRV(_VectorParamRV):
    """Probability vectors drawn from the Dirichlet distribution of ``alpha`` (last axis)."""

    name = "dirichlet"
    param_names = ("alpha",)
    core_ndims = (1,)

    def draw_numpy(self, rng, alpha, size):
        batch = self._batch(size, [alpha])
        (alpha,) = self._broadcast(batch, [alpha])
        out = np.empty(alpha.shape)
        for idx in np.ndindex(*batch):
            out[idx] = rng.dirichlet(alpha[idx])
        return out


class MvNormalRV(_VectorParamRV):
    """Multivariate Gaussian draws of mean vectors ``mean`` and covariance matrices ``cov``
    (batches broadcast); a covariance that is not positive semi-definite raises.

    >>> x = multivariate_normal([0.0, 10.0], [[1.0, 0.0], [0.0, 1e-12]], size=(3,))
    >>> v = x.eval()
    >>> v.shape, v[:, 1].round().tolist()
    ((3, 2), [10.0, 10.0, 10.0])
    """

    name = "multivariate_normal"
    param_names = ("mean", "cov")
    core_ndims = (1, 2)
    support = 0

    def draw(self, mean=None, cov=None, size=None, **kwargs):
        mean = np.array([0.0]) if mean is None else mean
        cov = np.array([[1.0]]) if cov is None else cov
        return super().draw(mean, cov, size=size, **kwargs)

    def draw_numpy(self, rng, mean, cov, size):
        batch = self._batch(size, [mean, cov])
        mean, cov = self._broadcast(batch, [mean, cov])
        out = np.empty(mean.shape)
        for idx in np.ndindex(*batch):
            out[idx] = rng.multivariate_normal(mean[idx], cov[idx], check_valid="raise")
        return out


# -- draws from a set ----------------------------------------------------------------------


class ChoiceRV(RandomVariable):
    """Draws from ``a`` (a vector, or an int ``n`` meaning ``arange(n)``) with
    probabilities ``p`` (an empty vector: equal ones), with or without ``replace``.

    The draws have the shape ``size`` (a scalar when ``size`` is empty).

    >>> sorted(choice(4, size=(4,), replace=False).eval().tolist())
    [0, 1, 2, 3]
    """

    __props__ = ("dtype", "replace", "inplace")
    name = "choice"
    param_names = ("a", "p")
    default_dtype = "int64"

    def __init__(self, dtype=None, replace=True):
        super().__init__(dtype)
        self.replace = bool(replace)

    def check_params(self, params):
        a, p = params
        if a.ndim > 1 or (a.ndim == 0 and not int_param(a)):
            raise TypeError(f"{self}: a must be an int or a vector, got {a.type}")
        if p.ndim != 1 or p.dtype.startswith(("int", "uint", "complex", "bool")):
            raise TypeError(f"{self}: p must be a vector of probabilities, got {p.type}")

    def draw(self, a, size=None, replace=True, p=None, dtype=None, **kwargs):
        a = as_tensor_variable(a)
        # the draws are values of a vector a (its dtype), indices for an int a
        dtype = dtype or (a.dtype if a.ndim == 1 else self.asked_dtype)
        p = np.zeros(0, dtype="float64") if p is None else p
        op = type(self)(dtype, replace)
        return op.draw_params([a, p], size=size, dtype=dtype, **kwargs)

    def static_shape(self, size_entries, params):
        return tuple(size_entries)

    def symbolic_shape(self, size, param_shapes, params):
        n = size_length(size)
        return tuple(size[i] for i in range(n))

    def draw_numpy(self, rng, a, p, size):
        a = a if np.ndim(a) else int(a)
        return rng.choice(a, size=size, replace=self.replace, p=p if len(p) else None)


class PermutationRV(RandomVariable):
    """Random permutations of ``arange(n)``: the draws have the shape ``size + (n,)``.

    Called as Theano 1.1.2's ``permutation(x)``: an int ``x`` gives a permutation of
    ``arange(x)``, an array ``x`` a copy of ``x`` shuffled along its first axis (``size``,
    if given, asks for that many independent ones).

    >>> sorted(permutation(5).eval().tolist())
    [0, 1, 2, 3, 4]
    >>> sorted(permutation(np.array([7.0, 8.0, 9.0])).eval().tolist())
    [7.0, 8.0, 9.0]
    """

    name = "permutation"
    param_names = ("n",)
    default_dtype = "int64"

    def check_params(self, params):
        (n,) = params
        if n.ndim != 0 or not int_param(n):
            raise TypeError(f"{self}: n must be an integer scalar, got {n.type}")

    def draw(self, x, size=None, dtype=None, name=None, **kwargs):
        x = as_tensor_variable(x)
        if x.ndim == 0:
            return super().draw(x, size=size, dtype=dtype, name=name, **kwargs)
        order = super().draw(shape_i(x, 0), size=size, **kwargs)
        out = x[order]
        if dtype is not None and dtype != out.dtype:
            out = cast(out, dtype)
        out.name = name
        out.rng, out.update = order.rng, order.update
        return out

    def static_shape(self, size_entries, params):
        (n,) = params
        return (*size_entries, int(n.data) if isinstance(n, Constant) else None)

    def symbolic_shape(self, size, param_shapes, params):
        n = size_length(size)
        return (*(size[i] for i in range(n)), params[0])

    def draw_numpy(self, rng, n, size):
        n = int(n)
        batch = size or ()
        out = np.empty((*batch, n), dtype="int64")
        for idx in np.ndindex(*batch):
            out[idx] = rng.permutation(n)
        return out


# The distributions as Theano 1.1.2 names them: call them numpy-like.
normal = NormalRV()
halfnormal = HalfNormalRV()
truncated_normal = TruncatedNormalRV()
uniform = UniformRV()
cauchy = CauchyRV()
halfcauchy = HalfCauchyRV()
exponential = ExponentialRV()
gamma = GammaRV()
invgamma = InvGammaRV()
beta = BetaRV()
truncexpon = TruncExponentialRV()
bernoulli = BernoulliRV()
binomial = BinomialRV()
nbinom = NegBinomialRV()
betabinom = BetaBinomialRV()
poisson = PoissonRV()
polyagamma = PolyaGammaRV()
randint = IntegersRV()
integers = randint
categorical = CategoricalRV()
multinomial = MultinomialRV()
dirichlet = DirichletRV()
multivariate_normal = MvNormalRV()
choice = ChoiceRV()
permutation = PermutationRV()
