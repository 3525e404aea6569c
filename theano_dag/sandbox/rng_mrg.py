"""``theano.sandbox.rng_mrg.MRG_RandomStreams``'s path and signatures.

Theano's MRG streams drew with its own MRG31k3p generator, which ran on the GPU; here
the draws come from numpy's generators like the other random streams, so the numbers
differ from Theano's for the same seed (their distributions do not). ``nstreams`` is
accepted and ignored.

>>> import numpy as np
>>> import theano_dag
>>> import theano_dag.tensor as tt
>>> srng = MRG_RandomStreams(seed=234)
>>> h = tt.dmatrix("h")
>>> keep = srng.binomial(size=h.shape, p=0.5, dtype=h.dtype)
>>> dropout = theano_dag.function([h], h * keep / 0.5)
>>> set(np.unique(dropout(np.ones((4, 8))))) <= {0.0, 2.0}
True
"""

from __future__ import annotations

from theano_dag.config import config
from theano_dag.scalar.basic import upcast
from theano_dag.tensor.random.basic import TruncatedNormalRV
from theano_dag.tensor.random.utils import RandomStreams
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["MRG_RandomStream", "MRG_RandomStreams"]

# The standard deviation of a standard normal truncated to [-2, 2]
# (scipy.stats.truncnorm(-2, 2).std()).
_TRUNCATED_STD = 0.87962566103423978


class MRG_RandomStreams(RandomStreams):  # noqa: N801 (Theano's name)
    """Theano's ``MRG_RandomStreams(seed=12345)``: ``uniform``, ``normal``, ``binomial``
    (``p`` only, ``n=1``), ``multinomial`` (a row of ``pvals`` per draw), ``choice`` and
    the draws of :class:`~theano_dag.tensor.random.utils.RandomStreams`.

    >>> MRG_RandomStreams(seed=1).uniform((3,), ndim=1).ndim
    1
    """

    def __init__(self, seed=12345):
        super().__init__(seed)

    def uniform(self, size=None, low=0.0, high=1.0, ndim=None, dtype=None, nstreams=None):
        return super().uniform(size, low, high, ndim=ndim, dtype=dtype)

    def normal(
        self,
        size=None,
        avg=0.0,
        std=1.0,
        ndim=None,
        dtype=None,
        nstreams=None,
        truncate=False,
    ):
        """Gaussian draws of mean ``avg`` and standard deviation ``std``; with
        ``truncate=True``, kept within two ``std`` of ``avg`` (their standard deviation
        is then about ``0.88 * std``), as Theano's.

        >>> srng = MRG_RandomStreams(seed=1)
        >>> x = srng.normal((1000,), avg=1.0, std=2.0, truncate=True).eval()
        >>> bool(x.min() >= -3.0 and x.max() <= 5.0)
        True
        """
        if not truncate:
            return super().normal(size, avg, std, ndim=ndim, dtype=dtype)
        avg, std = as_tensor_variable(avg), as_tensor_variable(std)
        dtype = dtype or upcast(config.floatX, avg.dtype, std.dtype)
        return self._draw(TruncatedNormalRV(dtype), [avg, std], size, ndim)

    def truncated_normal(self, size=None, avg=0.0, std=1.0, ndim=None, dtype=None, nstreams=None):
        """Gaussian draws kept within two standard deviations, of mean ``avg`` and
        standard deviation ``std`` (Theano's: ``normal(truncate=True)`` of a wider
        normal, ``std / 0.8796...``).

        >>> x = MRG_RandomStreams(seed=1).truncated_normal((20000,), std=2.0).eval()
        >>> round(float(x.std()), 1)
        2.0
        """
        avg, std = as_tensor_variable(avg), as_tensor_variable(std)
        dtype = dtype or upcast(config.floatX, avg.dtype, std.dtype)
        wider = std / _TRUNCATED_STD
        return self.normal(size, avg, wider, ndim=ndim, dtype=dtype, truncate=True)

    def binomial(self, size=None, p=0.5, ndim=None, dtype="int64", nstreams=None, n=1):
        return super().binomial(size, n=n, p=p, ndim=ndim, dtype=dtype)

    def multinomial(self, size=None, n=1, pvals=None, ndim=None, dtype="int64", nstreams=None):
        """One-hot rows (``n=1``) or counts: a draw per row of the matrix ``pvals``.

        >>> import numpy as np
        >>> srng = MRG_RandomStreams(seed=1)
        >>> srng.multinomial(pvals=np.array([[0.0, 1.0], [1.0, 0.0]])).eval().tolist()
        [[0, 1], [1, 0]]
        """
        if pvals is None:
            raise TypeError("MRG_RandomStreams.multinomial: pvals (a matrix) is required")
        return super().multinomial(None if size is None else size, n, pvals, ndim, dtype)

    def choice(self, size=1, a=None, replace=True, p=None, ndim=None, dtype="int64", nstreams=None):
        return super().choice(
            size, a=2 if a is None else a, replace=replace, p=p, ndim=ndim, dtype=dtype
        )


# Theano 1.1.2's name for the class (MRG_RandomStreams is the older one, still used).
MRG_RandomStream = MRG_RandomStreams
