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
from theano_dag.tensor.random import basic
from theano_dag.tensor.random.op import as_size, random_generator_type
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["RandomStream", "RandomStreams"]


class RandomStream:
    """Symbolic random draws: ``srng.normal(size)``, ``uniform``, ``binomial``, ``choice``,
    ``permutation``, with the argument names of Theano's ``RandomStreams``.

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


# Theano's older name (theano.tensor.shared_randomstreams.RandomStreams).
RandomStreams = RandomStream
