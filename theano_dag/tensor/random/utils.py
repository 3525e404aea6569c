"""``RandomStream``: a source of symbolic random draws whose state advances with every
call of a compiled function (Theano's ``RandomStreams`` API).

Each draw gets its own generator, seeded from the stream's seed, in a shared variable
whose ``default_update`` is the generator after the draw; ``function`` applies that
update after each call. The same seed therefore gives the same sequence of draws, and
two calls give different draws.
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config
from theano_dag.graph.shared import SharedVariable
from theano_dag.scalar.basic import upcast
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import arange
from theano_dag.tensor.random import basic
from theano_dag.tensor.random.op import as_size, random_generator_type
from theano_dag.tensor.shape import reshape, shape_i
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["RandomStream", "RandomStreams"]


class RandomStream:
    """Symbolic random draws: ``srng.normal(size)``, ``uniform``, ``binomial``,
    ``random_integers``, ``integers``, ``poisson``, ``exponential``, ``gamma``, ``beta``,
    ``categorical``, ``multinomial``, ``dirichlet``, ``choice``, ``permutation`` and
    ``shuffle_row_elements``, with the argument names of Theano's ``RandomStreams``
    (``size`` first).

    ``size`` is None (the parameters' broadcast shape), an int, a tuple of ints or int
    scalars, or an int vector such as ``x.shape``; ``ndim`` gives the number of dimensions
    when that is not known from ``size``.

    >>> import numpy as np
    >>> import theano_dag
    >>> from theano_dag import tensor as tt
    >>> srng = RandomStream(seed=42)
    >>> x = tt.dmatrix("x")
    >>> mask = srng.binomial(size=x.shape, p=0.5, dtype=x.dtype)
    >>> dropout = theano_dag.function([x], x * mask)
    >>> a, b = dropout(np.ones((2, 50))), dropout(np.ones((2, 50)))
    >>> a.shape, set(np.unique(a)) <= {0.0, 1.0}, bool((a != b).any())
    ((2, 50), True, True)
    """

    def __init__(self, seed=None):
        self.default_instance_seed = seed
        self._seeds = np.random.SeedSequence(seed)
        self.state_updates: list = []

    def seed(self, seed=None):
        """Restart every draw of this stream from ``seed`` (default: the stream's seed), as
        if the stream had just been made with it."""
        if seed is None:
            seed = self.default_instance_seed
        self._seeds = np.random.SeedSequence(seed)
        for old_r, _ in self.state_updates:
            old_r.set_value(self._new_generator(), borrow=True)

    def updates(self):
        """The ``(rng_shared, new_rng)`` pairs of every draw (their default updates)."""
        return list(self.state_updates)

    def _new_generator(self):
        (child,) = self._seeds.spawn(1)
        return np.random.Generator(np.random.PCG64(child))

    def gen(self, op, size, *params, ndim=None):
        """Draw with the ``RandomVariable`` ``op`` from a new generator of this stream.

        Returns the draws; ``out.rng`` is the shared generator and ``out.update`` the
        ``(rng, new_rng)`` pair, as in Theano.
        """
        rng = SharedVariable(type=random_generator_type, value=self._new_generator())
        rng.tag.is_rng = True
        size = as_size(size, ndim=ndim, who=f"{op.name}: size")
        new_rng, out = op(rng, size, *params)
        rng.default_update = new_rng
        out.rng = rng
        out.update = (rng, new_rng)
        self.state_updates.append(out.update)
        return out

    def normal(self, size=None, avg=0.0, std=1.0, ndim=None, dtype=None):
        """Gaussian draws of mean ``avg`` and standard deviation ``std`` (dtype: floatX
        upcast with the parameters').

        >>> srng = RandomStream(seed=1)
        >>> round(float(srng.normal((1000,), avg=3.0).eval().mean()))
        3
        """
        avg, std = as_tensor_variable(avg), as_tensor_variable(std)
        dtype = dtype or upcast(config.floatX, avg.dtype, std.dtype)
        return self.gen(basic.NormalRV(dtype), size, avg, std, ndim=ndim)

    def uniform(self, size=None, low=0.0, high=1.0, ndim=None, dtype=None):
        """Uniform draws in ``[low, high)``.

        >>> srng = RandomStream(seed=1)
        >>> u = srng.uniform((100,), low=2.0, high=3.0).eval()
        >>> bool((u >= 2).all() and (u < 3).all())
        True
        """
        low, high = as_tensor_variable(low), as_tensor_variable(high)
        dtype = dtype or upcast(config.floatX, low.dtype, high.dtype)
        return self.gen(basic.UniformRV(dtype), size, low, high, ndim=ndim)

    def binomial(self, size=None, n=1, p=0.5, ndim=None, dtype="int64"):
        """Binomial draws: successes in ``n`` trials of probability ``p`` (``n=1``: a
        Bernoulli mask, as in dropout).

        >>> srng = RandomStream(seed=1)
        >>> b = srng.binomial((5,), n=1, p=0.5).eval()
        >>> b.dtype, set(b.tolist()) <= {0, 1}
        (dtype('int64'), True)
        """
        n, p = as_tensor_variable(n), as_tensor_variable(p)
        return self.gen(basic.BinomialRV(dtype), size, n, p, ndim=ndim)

    def choice(self, size=None, a=2, replace=True, p=None, ndim=None, dtype="int64"):
        """Draws from ``a`` (an int ``n`` for ``arange(n)``, or a vector), with
        probabilities ``p`` (None: equal), with or without ``replace``.

        >>> srng = RandomStream(seed=1)
        >>> sorted(srng.choice((3,), a=3, replace=False).eval().tolist())
        [0, 1, 2]
        """
        a = as_tensor_variable(a)
        if a.ndim == 1 and dtype == "int64":
            dtype = a.dtype  # draws of the values of a
        p = np.zeros(0, dtype="float64") if p is None else p
        return self.gen(basic.ChoiceRV(dtype, replace), size, a, p, ndim=ndim)

    def permutation(self, size=None, n=1, ndim=None, dtype="int64"):
        """Permutations of ``arange(n)``, one per element of ``size`` (shape
        ``size + (n,)``).

        >>> srng = RandomStream(seed=1)
        >>> sorted(srng.permutation(n=4).eval().tolist())
        [0, 1, 2, 3]
        """
        return self.gen(basic.PermutationRV(dtype), size, n, ndim=ndim)

    def _float_dtype(self, dtype, *params):
        return dtype or upcast(config.floatX, *(p.dtype for p in params))

    def random_integers(self, size=None, low=0, high=1, ndim=None, dtype="int64"):
        """Integers drawn uniformly from ``[low, high]``, both ends included (Theano's).

        >>> srng = RandomStream(seed=1)
        >>> sorted(set(srng.random_integers((200,), 1, 3).eval().tolist()))
        [1, 2, 3]
        """
        low, high = as_tensor_variable(low), as_tensor_variable(high)
        return self.gen(basic.IntegersRV(dtype), size, low, high + 1, ndim=ndim)

    def integers(self, size=None, low=0, high=None, ndim=None, dtype="int64"):
        """Integers drawn uniformly from ``[low, high)`` (numpy's; ``high=None``:
        ``[0, low)``).

        >>> srng = RandomStream(seed=1)
        >>> sorted(set(srng.integers((200,), 3).eval().tolist()))
        [0, 1, 2]
        """
        if high is None:
            low, high = 0, low
        low, high = as_tensor_variable(low), as_tensor_variable(high)
        return self.gen(basic.IntegersRV(dtype), size, low, high, ndim=ndim)

    def poisson(self, size=None, lam=1.0, ndim=None, dtype="int64"):
        """Poisson draws of mean ``lam``.

        >>> srng = RandomStream(seed=1)
        >>> round(float(srng.poisson((4000,), lam=3.0).eval().mean()), 1)
        3.0
        """
        return self.gen(basic.PoissonRV(dtype), size, lam, ndim=ndim)

    def exponential(self, size=None, scale=1.0, ndim=None, dtype=None):
        """Exponential draws of mean ``scale``.

        >>> srng = RandomStream(seed=1)
        >>> bool((srng.exponential((10,)).eval() > 0).all())
        True
        """
        scale = as_tensor_variable(scale)
        dtype = self._float_dtype(dtype, scale)
        return self.gen(basic.ExponentialRV(dtype), size, scale, ndim=ndim)

    def gamma(self, size=None, shape=1.0, scale=1.0, ndim=None, dtype=None):
        """Gamma draws of ``shape`` and ``scale`` (numpy's parameters; mean
        ``shape * scale``).

        >>> srng = RandomStream(seed=1)
        >>> round(float(srng.gamma((4000,), 2.0, 1.5).eval().mean()), 1)
        3.0
        """
        shape, scale = as_tensor_variable(shape), as_tensor_variable(scale)
        dtype = self._float_dtype(dtype, shape, scale)
        return self.gen(basic.GammaRV(dtype), size, shape, scale, ndim=ndim)

    def beta(self, size=None, alpha=1.0, beta=1.0, ndim=None, dtype=None):
        """Beta draws in ``[0, 1]``.

        >>> srng = RandomStream(seed=1)
        >>> round(float(srng.beta((4000,), 2.0, 2.0).eval().mean()), 1)
        0.5
        """
        alpha, beta = as_tensor_variable(alpha), as_tensor_variable(beta)
        dtype = self._float_dtype(dtype, alpha, beta)
        return self.gen(basic.BetaRV(dtype), size, alpha, beta, ndim=ndim)

    def categorical(self, size=None, p=None, ndim=None, dtype="int64"):
        """One index per probability vector ``p`` (its last axis).

        >>> srng = RandomStream(seed=1)
        >>> srng.categorical(p=[[0.0, 1.0], [1.0, 0.0]]).eval().tolist()
        [1, 0]
        """
        return self.gen(basic.CategoricalRV(dtype), size, p, ndim=ndim)

    def multinomial(self, size=None, n=1, pvals=(0.5, 0.5), ndim=None, dtype="int64"):
        """Counts of ``n`` trials over the outcomes of probabilities ``pvals`` (last axis):
        draws of shape ``size + (len(pvals),)``.

        >>> srng = RandomStream(seed=1)
        >>> srng.multinomial((2,), n=5, pvals=[0.0, 1.0]).eval().tolist()
        [[0, 5], [0, 5]]
        """
        return self.gen(basic.MultinomialRV(dtype), size, n, pvals, ndim=ndim)

    def dirichlet(self, size=None, alpha=(1.0, 1.0), ndim=None, dtype=None):
        """Probability vectors from the Dirichlet distribution of ``alpha``.

        >>> srng = RandomStream(seed=1)
        >>> bool(np.allclose(srng.dirichlet((3,), alpha=[1.0, 2.0, 3.0]).eval().sum(1), 1))
        True
        """
        alpha = as_tensor_variable(alpha)
        dtype = self._float_dtype(dtype, alpha)
        return self.gen(basic.DirichletRV(dtype), size, alpha, ndim=ndim)

    def shuffle_row_elements(self, input):  # noqa: A002 (Theano's name)
        """``input`` with the elements of each row (its last axis) in a random order,
        a new order per row.

        >>> srng = RandomStream(seed=1)
        >>> m = np.arange(6.0).reshape(2, 3)
        >>> [sorted(r) for r in srng.shuffle_row_elements(m).eval().tolist()]
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        """
        x = as_tensor_variable(input)
        n = shape_i(x, x.ndim - 1)
        lead = [shape_i(x, d) for d in range(x.ndim - 1)]
        rows = tm.prod(lead, dtype="int64") if lead else 1
        flat = reshape(x, [rows, n])
        perm = self.permutation(size=(rows,), n=n)
        shuffled = flat[arange(rows).dimshuffle(0, "x"), perm]
        return reshape(shuffled, [shape_i(x, d) for d in range(x.ndim)])


# Theano's older name (theano.tensor.shared_randomstreams.RandomStreams).
RandomStreams = RandomStream
