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

from theano_dag.tensor.random.utils import RandomStreams

__all__ = ["MRG_RandomStream", "MRG_RandomStreams"]


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
        if truncate:
            raise NotImplementedError(
                "MRG_RandomStreams.normal(truncate=True) is not supported; draw with "
                "truncate=False and clip, or resample, in the graph"
            )
        return super().normal(size, avg, std, ndim=ndim, dtype=dtype)

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
