"""Random streams: sources of symbolic random draws whose state advances with every call
of a compiled function.

``RandomStream`` is Theano 1.1.2's (``theano.tensor.random.utils.RandomStream``): numpy-like
methods, the distribution's parameters first and ``size`` a keyword
(``srng.normal(0.0, 1.0, size=(3,))``). ``RandomStreams`` is Theano 1.0's
(``theano.tensor.shared_randomstreams.RandomStreams``, which Lasagne and older code use):
``size`` first (``srng.normal((3,), avg=0.0, std=1.0)``). Both draw with the ops of
:mod:`theano_dag.tensor.random.basic` and share the stream machinery below.

Each draw gets its own generator, seeded from the stream's seed, in a shared variable
whose ``default_update`` is the generator after the draw; ``function`` applies that
update after each call. The same seed therefore gives the same sequence of draws, and
two calls give different draws.
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Variable
from theano_dag.graph.shared import SharedVariable
from theano_dag.scalar.basic import upcast
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import arange
from theano_dag.tensor.extra_ops import broadcast_to
from theano_dag.tensor.random import basic
from theano_dag.tensor.random.op import RandomVariable, random_generator_type
from theano_dag.tensor.shape import reshape, shape_i
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["RandomStream", "RandomStreams", "broadcast_params"]


def broadcast_params(params, ndims_params):
    """The distribution parameters ``params`` broadcast against each other over their
    batch dimensions, each keeping its last ``ndims_params[i]`` (core) dimensions as they
    are (Theano's ``tensor.random.utils.broadcast_params``). numpy arrays give numpy
    arrays (views), variables give variables.

    >>> import numpy as np
    >>> mean, cov = np.zeros((2, 3)), np.eye(3)
    >>> [p.shape for p in broadcast_params([mean, cov], [1, 2])]
    [(2, 3), (2, 3, 3)]
    """
    if all(not isinstance(p, Variable) for p in params):
        params = [np.asarray(p) for p in params]
        batch = np.broadcast_shapes(
            *[p.shape[: p.ndim - nd] for p, nd in zip(params, ndims_params)]
        )
        return [
            np.broadcast_to(p, batch + p.shape[p.ndim - nd :])
            for p, nd in zip(params, ndims_params)
        ]
    params = [as_tensor_variable(p) for p in params]
    n_batch = max(p.ndim - nd for p, nd in zip(params, ndims_params))
    # Each parameter with its batch dimensions padded on the left to n_batch.
    padded = [
        p.dimshuffle(["x"] * (n_batch - (p.ndim - nd)) + list(range(p.ndim)))
        for p, nd in zip(params, ndims_params)
    ]
    batch = []
    for k in range(n_batch):
        dims = [p.shape[k] for p in padded if not p.type.broadcastable[k]]
        size = dims[0] if dims else 1
        for d in dims[1:]:
            size = tm.maximum(size, d)
        batch.append(size)
    return [
        broadcast_to(p, [*batch, *[p.shape[i] for i in range(n_batch, p.ndim)]]) for p in padded
    ]


class _Streams:
    """What both streams share: the seed, one new generator per draw, and the updates.

    As in Theano, ``gen_seedgen`` (a ``numpy.random.RandomState`` of the stream's seed)
    gives each draw its seed, ``randint(2 ** 30)``, and the draw's generator is a
    ``RandomState`` of that seed (so a seed gives Theano's numbers, and the user may
    ``seed``, ``get_state`` and ``set_state`` it, as Theano's documentation does).
    """

    def __init__(self, seed=None):
        self.default_instance_seed = seed
        self.gen_seedgen = np.random.RandomState(seed)
        self.state_updates: list = []

    def seed(self, seed=None):
        """Restart every draw of this stream from ``seed`` (default: the stream's seed), as
        if the stream had just been made with it.

        >>> rs = RandomStream(seed=3)
        >>> u = rs.uniform(size=(2,))
        >>> first = u.eval()
        >>> rs.seed()
        >>> bool((u.eval() == first).all())
        True
        """
        if seed is None:
            seed = self.default_instance_seed
        self.gen_seedgen.seed(seed)
        for entry in self.state_updates:
            self._restart(entry)

    def _restart(self, entry):
        """Give the draw of ``state_updates`` entry ``entry`` a new generator from
        ``gen_seedgen`` (a subclass's draws may keep other entries)."""
        entry[0].set_value(self._new_generator(), borrow=True)

    def updates(self):
        """The ``(rng_shared, new_rng)`` pairs of every draw (their default updates)."""
        return [(entry[0], entry[1]) for entry in self.state_updates]

    def _new_generator(self):
        return np.random.RandomState(int(self.gen_seedgen.randint(2**30)))

    def _new_rng(self):
        rng = SharedVariable(type=random_generator_type, value=self._new_generator())
        rng.tag.is_rng = True
        return rng

    def _track(self, out):
        """Make the draw ``out``'s generator advance with each call, and remember it."""
        rng, new_rng = out.update
        rng.default_update = new_rng
        self.state_updates.append(out.update)
        return out

    def _draw(self, op, params, size=None, ndim=None, dtype=None):
        """Draws of ``op`` with its node's ``params`` from a new generator of the stream."""
        out = op.draw_params(params, size=size, rng=self._new_rng(), dtype=dtype, ndim=ndim)
        return self._track(out)


class RandomStream(_Streams):
    """Symbolic random draws with Theano 1.1.2's signatures (numpy's): the distribution's
    parameters first, then the keywords ``size`` (None: the parameters' broadcast shape;
    an int, a tuple of ints or int scalars, or an int vector such as ``x.shape``),
    ``dtype`` (the default: floatX for real draws, int64 for integers), ``ndim`` (the
    length of a symbolic ``size`` vector when that is not known) and ``name``.

    ``normal``, ``halfnormal``, ``uniform``, ``cauchy``, ``halfcauchy``, ``exponential``,
    ``gamma`` (shape, rate), ``invgamma``, ``beta``, ``truncexpon``, ``bernoulli``,
    ``binomial``, ``nbinom``, ``betabinom``, ``poisson``, ``randint``/``integers``,
    ``categorical``, ``multinomial``, ``dirichlet``, ``multivariate_normal``, ``choice``
    and ``permutation``; ``gen(op, *args, **kwargs)`` draws with any distribution of
    :mod:`theano_dag.tensor.random.basic`.

    >>> import numpy as np
    >>> import theano_dag
    >>> from theano_dag import tensor as tt
    >>> srng = RandomStream(seed=42)
    >>> x = tt.dmatrix("x")
    >>> mask = srng.binomial(1, 0.5, size=x.shape, dtype=x.dtype)
    >>> dropout = theano_dag.function([x], x * mask)
    >>> a, b = dropout(np.ones((2, 50))), dropout(np.ones((2, 50)))
    >>> a.shape, set(np.unique(a)) <= {0.0, 1.0}, bool((a != b).any())
    ((2, 50), True, True)
    """

    def __init__(self, seed=None, namespace=None):
        super().__init__(seed)
        # Where a distribution without a method here is looked up by name (Theano's);
        # None for the default, so that a stream pickles (a module does not).
        self._namespace = namespace

    @property
    def namespaces(self):
        """The modules (or objects) a distribution is looked up in by name."""
        return [basic if self._namespace is None else self._namespace]

    def __getattr__(self, name):
        """A distribution of the stream's namespace that has no method here
        (``srng.nbinom``...): a function drawing it from a new generator, as Theano's.

        >>> from types import SimpleNamespace
        >>> srng = RandomStream(seed=1, namespace=SimpleNamespace(gauss=basic.normal))
        >>> srng.gauss(0.0, 1.0, size=(2,)).type.shape
        (2,)
        """
        if name.startswith("_") or "_namespace" not in self.__dict__:
            raise AttributeError(name)  # (copy and pickle ask before __init__ ran)
        found = next((getattr(ns, name) for ns in self.namespaces if hasattr(ns, name)), None)
        if not isinstance(found, RandomVariable):
            raise AttributeError(
                f"RandomStream has no attribute {name!r}: it is no RandomVariable of "
                f"{', '.join(getattr(ns, '__name__', repr(ns)) for ns in self.namespaces)}"
            )

        def draw(*args, **kwargs):
            return self.gen(found, *args, **kwargs)

        draw.__name__ = draw.__qualname__ = name
        draw.__doc__ = found.__doc__
        setattr(self, name, draw)
        return draw

    def gen(self, op, *args, **kwargs):
        """Draws of the distribution ``op`` (``basic.normal``, ...) called with ``args``
        and ``kwargs`` (numpy-like), from a new generator of this stream.

        Returns the draws; ``out.rng`` is the shared generator and ``out.update`` the
        ``(rng, new_rng)`` pair, as in Theano.

        >>> from theano_dag.tensor.random.basic import cauchy
        >>> RandomStream(seed=1).gen(cauchy, 0.0, 1.0, size=(2, 3)).type.shape
        (2, 3)
        """
        if "rng" in kwargs:
            raise TypeError("RandomStream.gen: a stream draws with its own rng; drop rng=")
        return self._track(op.draw(*args, rng=self._new_rng(), **kwargs))

    def normal(self, loc=0.0, scale=1.0, size=None, **kwargs):
        """Gaussian draws of mean ``loc`` and standard deviation ``scale``.

        >>> srng = RandomStream(seed=1)
        >>> round(float(srng.normal(3.0, 1.0, size=(1000,)).eval().mean()))
        3
        """
        return self.gen(basic.normal, loc, scale, size=size, **kwargs)

    def halfnormal(self, loc=0.0, scale=1.0, size=None, **kwargs):
        """``loc + scale * |z|``, ``z`` standard normal."""
        return self.gen(basic.halfnormal, loc, scale, size=size, **kwargs)

    def uniform(self, low=0.0, high=1.0, size=None, **kwargs):
        """Uniform draws in ``[low, high)``.

        >>> u = RandomStream(seed=1).uniform(2.0, 3.0, size=(100,)).eval()
        >>> bool((u >= 2).all() and (u < 3).all())
        True
        """
        return self.gen(basic.uniform, low, high, size=size, **kwargs)

    def cauchy(self, loc=0.0, scale=1.0, size=None, **kwargs):
        """Cauchy draws of median ``loc`` and scale ``scale``."""
        return self.gen(basic.cauchy, loc, scale, size=size, **kwargs)

    def halfcauchy(self, loc=0.0, scale=1.0, size=None, **kwargs):
        """``loc + scale * |c|``, ``c`` standard Cauchy."""
        return self.gen(basic.halfcauchy, loc, scale, size=size, **kwargs)

    def exponential(self, scale=1.0, size=None, **kwargs):
        """Exponential draws of mean ``scale``."""
        return self.gen(basic.exponential, scale, size=size, **kwargs)

    def gamma(self, shape, rate, size=None, **kwargs):
        """Gamma draws of ``shape`` and ``rate`` (Theano 1.1.2's; mean ``shape / rate``).

        >>> round(float(RandomStream(seed=1).gamma(2.0, 0.5, size=(4000,)).eval().mean()))
        4
        """
        return self.gen(basic.gamma, shape, rate, size=size, **kwargs)

    def invgamma(self, shape, rate, size=None, **kwargs):
        """Inverse-gamma draws: ``1 / g`` for ``g`` a gamma of ``shape`` and ``rate``."""
        return self.gen(basic.invgamma, shape, rate, size=size, **kwargs)

    def beta(self, alpha, beta, size=None, **kwargs):
        """Beta draws in ``[0, 1]``."""
        return self.gen(basic.beta, alpha, beta, size=size, **kwargs)

    def truncexpon(self, b, loc, scale, size=None, **kwargs):
        """``loc + scale * x``, ``x`` exponential truncated to ``[0, b]``."""
        return self.gen(basic.truncexpon, b, loc, scale, size=size, **kwargs)

    def bernoulli(self, p, size=None, **kwargs):
        """1 with probability ``p``, else 0 (int64)."""
        return self.gen(basic.bernoulli, p, size=size, **kwargs)

    def binomial(self, n, p, size=None, **kwargs):
        """Successes in ``n`` trials of probability ``p`` (int64).

        >>> b = RandomStream(seed=1).binomial(1, 0.5, size=(5,)).eval()
        >>> b.dtype, set(b.tolist()) <= {0, 1}
        (dtype('int64'), True)
        """
        return self.gen(basic.binomial, n, p, size=size, **kwargs)

    def nbinom(self, n, p, size=None, **kwargs):
        """Failures before the ``n``-th success in trials of probability ``p``."""
        return self.gen(basic.nbinom, n, p, size=size, **kwargs)

    def betabinom(self, n, a, b, size=None, **kwargs):
        """Successes in ``n`` trials of a probability drawn from ``beta(a, b)``."""
        return self.gen(basic.betabinom, n, a, b, size=size, **kwargs)

    def poisson(self, lam=1.0, size=None, **kwargs):
        """Poisson draws of mean ``lam`` (int64).

        >>> round(float(RandomStream(seed=1).poisson(3.0, size=(4000,)).eval().mean()), 1)
        3.0
        """
        return self.gen(basic.poisson, lam, size=size, **kwargs)

    def randint(self, low, high=None, size=None, **kwargs):
        """Integers drawn uniformly from ``[low, high)`` (``high=None``: ``[0, low)``).

        >>> sorted(set(RandomStream(seed=1).randint(1, 4, size=(200,)).eval().tolist()))
        [1, 2, 3]
        """
        return self.gen(basic.randint, low, high, size=size, **kwargs)

    integers = randint  # numpy Generator's name

    def categorical(self, p, size=None, **kwargs):
        """One index per probability vector ``p`` (its last axis).

        >>> RandomStream(seed=1).categorical([[0.0, 1.0], [1.0, 0.0]]).eval().tolist()
        [1, 0]
        """
        return self.gen(basic.categorical, p, size=size, **kwargs)

    def multinomial(self, n, p, size=None, **kwargs):
        """Counts of ``n`` trials over the outcomes of probabilities ``p`` (last axis).

        >>> RandomStream(seed=1).multinomial(5, [0.0, 1.0], size=(2,)).eval().tolist()
        [[0, 5], [0, 5]]
        """
        return self.gen(basic.multinomial, n, p, size=size, **kwargs)

    def dirichlet(self, alphas, size=None, **kwargs):
        """Probability vectors from the Dirichlet distribution of ``alphas``."""
        return self.gen(basic.dirichlet, alphas, size=size, **kwargs)

    def multivariate_normal(self, mean=None, cov=None, size=None, **kwargs):
        """Gaussian vectors of mean ``mean`` and covariance ``cov``."""
        return self.gen(basic.multivariate_normal, mean, cov, size=size, **kwargs)

    def choice(self, a, size=None, replace=True, p=None, **kwargs):
        """Draws from ``a`` (an int ``n`` for ``arange(n)``, or a vector), with
        probabilities ``p`` (None: equal), with or without ``replace``.

        >>> sorted(RandomStream(seed=1).choice(3, size=(3,), replace=False).eval().tolist())
        [0, 1, 2]
        """
        return self.gen(basic.choice, a, size=size, replace=replace, p=p, **kwargs)

    def permutation(self, x, **kwargs):
        """A permutation of ``arange(x)`` for an int ``x``; ``x`` shuffled along its first
        axis for an array.

        >>> sorted(RandomStream(seed=1).permutation(4).eval().tolist())
        [0, 1, 2, 3]
        """
        return self.gen(basic.permutation, x, **kwargs)


class RandomStreams(_Streams):
    """Symbolic random draws with Theano 1.0's signatures
    (``theano.tensor.shared_randomstreams.RandomStreams``): ``size`` first, then the
    parameters by Theano 1.0's names: ``normal(size, avg, std)``, ``uniform``,
    ``binomial``, ``random_integers``, ``integers``, ``poisson``, ``exponential``,
    ``gamma``, ``beta``, ``categorical``, ``multinomial``, ``dirichlet``, ``choice``,
    ``permutation`` and ``shuffle_row_elements``. Real draws default to floatX upcast with
    the parameters' dtypes, as Theano 1.0's.

    ``size`` is None (the parameters' broadcast shape), an int, a tuple of ints or int
    scalars, or an int vector such as ``x.shape``; ``ndim`` gives the number of dimensions
    when that is not known from ``size``.

    >>> import numpy as np
    >>> import theano_dag
    >>> from theano_dag import tensor as tt
    >>> srng = RandomStreams(seed=42)
    >>> x = tt.dmatrix("x")
    >>> mask = srng.binomial(size=x.shape, p=0.5, dtype=x.dtype)
    >>> dropout = theano_dag.function([x], x * mask)
    >>> a, b = dropout(np.ones((2, 50))), dropout(np.ones((2, 50)))
    >>> a.shape, set(np.unique(a)) <= {0.0, 1.0}, bool((a != b).any())
    ((2, 50), True, True)
    """

    def gen(self, op, size, *params, ndim=None):
        """Draw with the ``RandomVariable`` ``op`` and its node's ``params`` from a new
        generator of this stream (Theano 1.0's ``gen(op, size, *params)``).

        Returns the draws; ``out.rng`` is the shared generator and ``out.update`` the
        ``(rng, new_rng)`` pair, as in Theano.

        >>> from theano_dag.tensor.random.basic import NormalRV
        >>> RandomStreams(seed=1).gen(NormalRV(), (2,), 0.0, 1.0).type.shape
        (2,)
        """
        return self._draw(op, params, size, ndim)

    def _float_dtype(self, dtype, *params):
        return dtype or upcast(config.floatX, *(p.dtype for p in params))

    def normal(self, size=None, avg=0.0, std=1.0, ndim=None, dtype=None):
        """Gaussian draws of mean ``avg`` and standard deviation ``std`` (dtype: floatX
        upcast with the parameters').

        >>> srng = RandomStreams(seed=1)
        >>> round(float(srng.normal((1000,), avg=3.0).eval().mean()))
        3
        """
        avg, std = as_tensor_variable(avg), as_tensor_variable(std)
        dtype = dtype or upcast(config.floatX, avg.dtype, std.dtype)
        return self._draw(basic.NormalRV(dtype), [avg, std], size, ndim)

    def uniform(self, size=None, low=0.0, high=1.0, ndim=None, dtype=None):
        """Uniform draws in ``[low, high)``.

        >>> srng = RandomStreams(seed=1)
        >>> u = srng.uniform((100,), low=2.0, high=3.0).eval()
        >>> bool((u >= 2).all() and (u < 3).all())
        True
        """
        low, high = as_tensor_variable(low), as_tensor_variable(high)
        dtype = dtype or upcast(config.floatX, low.dtype, high.dtype)
        return self._draw(basic.UniformRV(dtype), [low, high], size, ndim)

    def binomial(self, size=None, n=1, p=0.5, ndim=None, dtype="int64"):
        """Binomial draws: successes in ``n`` trials of probability ``p`` (``n=1``: a
        Bernoulli mask, as in dropout).

        >>> srng = RandomStreams(seed=1)
        >>> b = srng.binomial((5,), n=1, p=0.5).eval()
        >>> b.dtype, set(b.tolist()) <= {0, 1}
        (dtype('int64'), True)
        """
        n, p = as_tensor_variable(n), as_tensor_variable(p)
        return self._draw(basic.BinomialRV(dtype), [n, p], size, ndim)

    def choice(self, size=None, a=2, replace=True, p=None, ndim=None, dtype="int64"):
        """Draws from ``a`` (an int ``n`` for ``arange(n)``, or a vector), with
        probabilities ``p`` (None: equal), with or without ``replace``.

        >>> srng = RandomStreams(seed=1)
        >>> sorted(srng.choice((3,), a=3, replace=False).eval().tolist())
        [0, 1, 2]
        """
        a = as_tensor_variable(a)
        if a.ndim == 1 and dtype == "int64":
            dtype = a.dtype  # draws of the values of a
        p = np.zeros(0, dtype="float64") if p is None else p
        return self._draw(basic.ChoiceRV(dtype, replace), [a, p], size, ndim)

    def permutation(self, size=None, n=1, ndim=None, dtype="int64"):
        """Permutations of ``arange(n)``, one per element of ``size`` (shape
        ``size + (n,)``).

        >>> srng = RandomStreams(seed=1)
        >>> sorted(srng.permutation(n=4).eval().tolist())
        [0, 1, 2, 3]
        """
        return self._draw(basic.PermutationRV(dtype), [n], size, ndim)

    def random_integers(self, size=None, low=0, high=1, ndim=None, dtype="int64"):
        """Integers drawn uniformly from ``[low, high]``, both ends included (Theano's).

        >>> srng = RandomStreams(seed=1)
        >>> sorted(set(srng.random_integers((200,), 1, 3).eval().tolist()))
        [1, 2, 3]
        """
        low, high = as_tensor_variable(low), as_tensor_variable(high)
        return self._draw(basic.IntegersRV(dtype), [low, high + 1], size, ndim)

    def integers(self, size=None, low=0, high=None, ndim=None, dtype="int64"):
        """Integers drawn uniformly from ``[low, high)`` (numpy's; ``high=None``:
        ``[0, low)``).

        >>> srng = RandomStreams(seed=1)
        >>> sorted(set(srng.integers((200,), 3).eval().tolist()))
        [0, 1, 2]
        """
        if high is None:
            low, high = 0, low
        low, high = as_tensor_variable(low), as_tensor_variable(high)
        return self._draw(basic.IntegersRV(dtype), [low, high], size, ndim)

    def poisson(self, size=None, lam=1.0, ndim=None, dtype="int64"):
        """Poisson draws of mean ``lam``.

        >>> srng = RandomStreams(seed=1)
        >>> round(float(srng.poisson((4000,), lam=3.0).eval().mean()), 1)
        3.0
        """
        return self._draw(basic.PoissonRV(dtype), [lam], size, ndim)

    def exponential(self, size=None, scale=1.0, ndim=None, dtype=None):
        """Exponential draws of mean ``scale``.

        >>> srng = RandomStreams(seed=1)
        >>> bool((srng.exponential((10,)).eval() > 0).all())
        True
        """
        scale = as_tensor_variable(scale)
        dtype = self._float_dtype(dtype, scale)
        return self._draw(basic.ExponentialRV(dtype), [scale], size, ndim)

    def gamma(self, size=None, shape=1.0, scale=1.0, ndim=None, dtype=None):
        """Gamma draws of ``shape`` and ``scale`` (numpy's parameters; mean
        ``shape * scale``).

        >>> srng = RandomStreams(seed=1)
        >>> round(float(srng.gamma((4000,), 2.0, 1.5).eval().mean()), 1)
        3.0
        """
        shape, scale = as_tensor_variable(shape), as_tensor_variable(scale)
        dtype = self._float_dtype(dtype, shape, scale)
        return self._draw(basic.GammaRV(dtype), [shape, scale], size, ndim)

    def beta(self, size=None, alpha=1.0, beta=1.0, ndim=None, dtype=None):
        """Beta draws in ``[0, 1]``.

        >>> srng = RandomStreams(seed=1)
        >>> round(float(srng.beta((4000,), 2.0, 2.0).eval().mean()), 1)
        0.5
        """
        alpha, beta = as_tensor_variable(alpha), as_tensor_variable(beta)
        dtype = self._float_dtype(dtype, alpha, beta)
        return self._draw(basic.BetaRV(dtype), [alpha, beta], size, ndim)

    def categorical(self, size=None, p=None, ndim=None, dtype="int64"):
        """One index per probability vector ``p`` (its last axis).

        >>> srng = RandomStreams(seed=1)
        >>> srng.categorical(p=[[0.0, 1.0], [1.0, 0.0]]).eval().tolist()
        [1, 0]
        """
        return self._draw(basic.CategoricalRV(dtype), [p], size, ndim)

    def multinomial(self, size=None, n=1, pvals=(0.5, 0.5), ndim=None, dtype="int64"):
        """Counts of ``n`` trials over the outcomes of probabilities ``pvals`` (last axis):
        draws of shape ``size + (len(pvals),)``.

        >>> srng = RandomStreams(seed=1)
        >>> srng.multinomial((2,), n=5, pvals=[0.0, 1.0]).eval().tolist()
        [[0, 5], [0, 5]]
        """
        return self._draw(basic.MultinomialRV(dtype), [n, pvals], size, ndim)

    def dirichlet(self, size=None, alpha=(1.0, 1.0), ndim=None, dtype=None):
        """Probability vectors from the Dirichlet distribution of ``alpha``.

        >>> srng = RandomStreams(seed=1)
        >>> bool(np.allclose(srng.dirichlet((3,), alpha=[1.0, 2.0, 3.0]).eval().sum(1), 1))
        True
        """
        alpha = as_tensor_variable(alpha)
        dtype = self._float_dtype(dtype, alpha)
        return self._draw(basic.DirichletRV(dtype), [alpha], size, ndim)

    def shuffle_row_elements(self, input):  # noqa: A002 (Theano's name)
        """``input`` with the elements of each row (its last axis) in a random order,
        a new order per row.

        >>> srng = RandomStreams(seed=1)
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
