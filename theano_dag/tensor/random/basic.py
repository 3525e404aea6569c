"""The distributions: ``normal``, ``uniform``, ``binomial``, ``choice``, ``permutation``
(each a ``RandomVariable``; ``RandomStream`` is the usual way to use them).
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Constant
from theano_dag.tensor.random.op import RandomVariable, int_param, size_length

__all__ = ["NormalRV", "UniformRV", "BinomialRV", "ChoiceRV", "PermutationRV"]


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
