"""The distributions (each a ``RandomVariable``; ``RandomStream`` is the usual way to use
them): ``normal``, ``uniform``, ``binomial``, ``integers``, ``poisson``, ``exponential``,
``gamma``, ``beta`` draw one number per element; ``categorical`` draws one index per
probability vector, ``multinomial`` and ``dirichlet`` one vector per parameter vector;
``choice`` and ``permutation`` draw from ``arange(n)``.
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Constant
from theano_dag.tensor.random.op import (
    RandomVariable,
    _broadcast_static,
    int_param,
    size_length,
)

__all__ = [
    "NormalRV",
    "UniformRV",
    "BinomialRV",
    "IntegersRV",
    "PoissonRV",
    "ExponentialRV",
    "GammaRV",
    "BetaRV",
    "CategoricalRV",
    "MultinomialRV",
    "DirichletRV",
    "ChoiceRV",
    "PermutationRV",
]


class NormalRV(RandomVariable):
    """Gaussian draws: parameters ``loc`` (mean) and ``scale`` (standard deviation).

    >>> import numpy as np
    >>> from theano_dag.compile.sharedvalue import shared
    >>> rng = shared(np.random.default_rng(0))
    >>> new_rng, x = NormalRV("float64")(rng, (2, 3), 0.0, 1.0)
    >>> x.type
    TensorType(float64, shape=(2, 3))
    """

    name = "normal_rv"
    param_names = ("loc", "scale")

    def rng_fn(self, rng, loc, scale, size):
        return rng.normal(loc, scale, size=size)


class UniformRV(RandomVariable):
    """Uniform draws in ``[low, high)``."""

    name = "uniform_rv"
    param_names = ("low", "high")

    def rng_fn(self, rng, low, high, size):
        return rng.uniform(low, high, size=size)


class BinomialRV(RandomVariable):
    """Binomial draws: the number of successes in ``n`` trials of probability ``p``."""

    name = "binomial_rv"
    param_names = ("n", "p")
    default_dtype = "int64"

    def check_params(self, params):
        super().check_params(params)
        if not int_param(params[0]):
            raise TypeError(f"{self}: parameter n must be integers, got {params[0].type}")

    def rng_fn(self, rng, n, p, size):
        return rng.binomial(n, p, size=size)


class IntegersRV(RandomVariable):
    """Integers drawn uniformly from ``[low, high)`` (``numpy.random.Generator.integers``)."""

    name = "integers_rv"
    param_names = ("low", "high")
    default_dtype = "int64"

    def check_params(self, params):
        super().check_params(params)
        for name, p in zip(self.param_names, params):
            if not int_param(p):
                raise TypeError(f"{self}: parameter {name} must be integers, got {p.type}")

    def rng_fn(self, rng, low, high, size):
        if isinstance(rng, np.random.RandomState):
            return rng.randint(low, high, size=size)
        return rng.integers(low, high, size=size)


class PoissonRV(RandomVariable):
    """Poisson draws of mean ``lam``."""

    name = "poisson_rv"
    param_names = ("lam",)
    default_dtype = "int64"

    def rng_fn(self, rng, lam, size):
        return rng.poisson(lam, size=size)


class ExponentialRV(RandomVariable):
    """Exponential draws of mean ``scale`` (rate ``1 / scale``)."""

    name = "exponential_rv"
    param_names = ("scale",)

    def rng_fn(self, rng, scale, size):
        return rng.exponential(scale, size=size)


class GammaRV(RandomVariable):
    """Gamma draws of ``shape`` k and ``scale`` theta (mean ``k * theta``)."""

    name = "gamma_rv"
    param_names = ("shape", "scale")

    def rng_fn(self, rng, shape, scale, size):
        return rng.gamma(shape, scale, size=size)


class BetaRV(RandomVariable):
    """Beta draws in ``[0, 1]`` with parameters ``alpha`` and ``beta``."""

    name = "beta_rv"
    param_names = ("alpha", "beta")

    def rng_fn(self, rng, alpha, beta, size):
        return rng.beta(alpha, beta, size=size)


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


class _VectorParamRV(RandomVariable):
    """A draw per vector of the last parameter (its last axis is the support): the batch
    shape is ``size``, or the parameters' broadcast shape without that axis; ``core``
    says whether each draw is a vector of that length (multinomial, dirichlet) or a
    single number (categorical)."""

    core = True

    def check_params(self, params):
        super().check_params(params)
        if params[-1].ndim < 1:
            raise TypeError(
                f"{self}: {self.param_names[-1]} must be a vector (or a batch of vectors), "
                f"got {params[-1].type}"
            )

    def _batch_static(self, params):
        shapes = [p.type.shape for p in params[:-1]] + [params[-1].type.shape[:-1]]
        return _broadcast_static(shapes, str(self))

    def static_shape(self, size_entries, params):
        batch = tuple(size_entries) if size_entries else self._batch_static(params)
        return batch + (params[-1].type.shape[-1:] if self.core else ())

    def symbolic_shape(self, size, param_shapes, params):
        n = size_length(size)
        if n:
            batch = tuple(size[i] for i in range(n))
        else:  # the parameters' broadcast shape, the support axis left out
            patterns = [p.type.broadcastable for p in params[:-1]]
            patterns.append(params[-1].type.broadcastable[:-1])
            shapes = list(param_shapes[:-1]) + [tuple(param_shapes[-1])[:-1]]
            batch = _broadcast_lengths(patterns, shapes)
        return batch + ((param_shapes[-1][-1],) if self.core else ())

    def _batch(self, size, params):
        if size:
            return tuple(size)
        return np.broadcast_shapes(*[np.shape(p) for p in params[:-1]], np.shape(params[-1])[:-1])


class CategoricalRV(_VectorParamRV):
    """The index drawn with the probabilities ``p`` (its last axis): one per vector."""

    name = "categorical_rv"
    param_names = ("p",)
    default_dtype = "int64"
    core = False

    def rng_fn(self, rng, p, size):
        batch = self._batch(size, [p])
        p = np.broadcast_to(p, batch + p.shape[-1:])
        cdf = np.cumsum(p, axis=-1)
        u = rng.random(batch + (1,)) * cdf[..., -1:]  # unnormalized p are scaled
        return np.minimum((u >= cdf).sum(axis=-1), p.shape[-1] - 1)


class MultinomialRV(_VectorParamRV):
    """Counts of ``n`` trials over the outcomes of probabilities ``p`` (last axis)."""

    name = "multinomial_rv"
    param_names = ("n", "p")
    default_dtype = "int64"

    def rng_fn(self, rng, n, p, size):
        batch = self._batch(size, [n, p])
        n = np.broadcast_to(n, batch)
        p = np.broadcast_to(p, batch + p.shape[-1:])
        out = np.empty(batch + p.shape[-1:], dtype="int64")
        for idx in np.ndindex(*batch):
            out[idx] = rng.multinomial(int(n[idx]), p[idx])
        return out


class DirichletRV(_VectorParamRV):
    """Probability vectors drawn from the Dirichlet distribution of ``alpha`` (last axis)."""

    name = "dirichlet_rv"
    param_names = ("alpha",)

    def rng_fn(self, rng, alpha, size):
        batch = self._batch(size, [alpha])
        alpha = np.broadcast_to(alpha, batch + alpha.shape[-1:])
        out = np.empty(alpha.shape)
        for idx in np.ndindex(*batch):
            out[idx] = rng.dirichlet(alpha[idx])
        return out


class ChoiceRV(RandomVariable):
    """Draws from ``a`` (a vector, or an int ``n`` meaning ``arange(n)``) with
    probabilities ``p`` (an empty vector: equal ones), with or without ``replace``.

    The draws have the shape ``size`` (a scalar when ``size`` is empty).
    """

    __props__ = ("dtype", "replace")
    name = "choice_rv"
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

    def static_shape(self, size_entries, params):
        return tuple(size_entries)

    def symbolic_shape(self, size, param_shapes, params):
        n = size_length(size)
        return tuple(size[i] for i in range(n))

    def rng_fn(self, rng, a, p, size):
        a = a if np.ndim(a) else int(a)
        return rng.choice(a, size=size, replace=self.replace, p=p if len(p) else None)


class PermutationRV(RandomVariable):
    """Random permutations of ``arange(n)``: the draws have the shape ``size + (n,)``."""

    name = "permutation_rv"
    param_names = ("n",)
    default_dtype = "int64"

    def check_params(self, params):
        (n,) = params
        if n.ndim != 0 or not int_param(n):
            raise TypeError(f"{self}: n must be an integer scalar, got {n.type}")

    def static_shape(self, size_entries, params):
        (n,) = params
        return (*size_entries, int(n.data) if isinstance(n, Constant) else None)

    def symbolic_shape(self, size, param_shapes, params):
        n = size_length(size)
        return (*(size[i] for i in range(n)), params[0])

    def rng_fn(self, rng, n, size):
        n = int(n)
        batch = size or ()
        out = np.empty((*batch, n), dtype="int64")
        for idx in np.ndindex(*batch):
            out[idx] = rng.permutation(n)
        return out
