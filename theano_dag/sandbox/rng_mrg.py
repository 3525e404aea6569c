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

import warnings

from theano_dag import tensor as tt
from theano_dag.gradient.ops import undefined_grad
from theano_dag.tensor.arrays import Assert
from theano_dag.tensor.random.basic import TruncatedNormalRV
from theano_dag.tensor.random.utils import RandomStreams
from theano_dag.tensor.sort import argsort
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
        return self._draw(
            TruncatedNormalRV(self._float_dtype(dtype, avg, std)), [avg, std], size, ndim
        )

    def truncated_normal(self, size=None, avg=0.0, std=1.0, ndim=None, dtype=None, nstreams=None):
        """Gaussian draws kept within two standard deviations, of mean ``avg`` and
        standard deviation ``std`` (Theano's: ``normal(truncate=True)`` of a wider
        normal, ``std / 0.8796...``).

        >>> x = MRG_RandomStreams(seed=1).truncated_normal((20000,), std=2.0).eval()
        >>> round(float(x.std()), 1)
        2.0
        """
        avg, std = as_tensor_variable(avg), as_tensor_variable(std)
        dtype = self._float_dtype(dtype, avg, std)  # before widening std upcasts it
        wider = std / _TRUNCATED_STD
        return self.normal(size, avg, wider, ndim=ndim, dtype=dtype, truncate=True)

    def binomial(self, size=None, n=1, p=0.5, ndim=None, dtype="int64", nstreams=None):
        """Successes in ``n`` trials of probability ``p`` (Theano's order: ``size, n, p``).

        >>> srng = MRG_RandomStreams(seed=1)
        >>> sorted(set(srng.binomial((50,), 1, 0.5).eval().tolist()))
        [0, 1]
        """
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
        """Theano's MRG ``choice``: with ``a=None`` and ``p`` a matrix, ``size`` distinct
        column indices per row of ``p``, drawn one after the other with probabilities
        ``p``'s row among the columns not drawn yet (without replacement only, as
        Theano's); otherwise the ``choice`` of Theano 1.0's ``RandomStreams`` (``a``
        defaulting to 2).

        >>> import numpy as np
        >>> srng = MRG_RandomStreams(seed=1)
        >>> p = np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
        >>> rows = srng.choice(size=2, replace=False, p=p).eval()
        >>> sorted(rows[0].tolist()), int(rows[1, 0])
        ([1, 2], 0)
        """
        rows = None if p is None else as_tensor_variable(p)
        if a is None and rows is not None and rows.ndim == 2:
            if replace:
                raise NotImplementedError(
                    "MRG_RandomStreams.choice with a matrix p draws without replacement "
                    "only: pass replace=False"
                )
            if ndim is not None:
                raise ValueError("MRG_RandomStreams.choice: ndim is not used with a matrix p")
            return self._choice_rows(size, rows, dtype)
        return super().choice(
            size, a=2 if a is None else a, replace=replace, p=p, ndim=ndim, dtype=dtype
        )

    def _choice_rows(self, size, p, dtype):
        # Drawing k columns one after the other, each with the probabilities of the ones
        # left, is taking the k largest log(p) + Gumbel noise (the Gumbel-top-k trick):
        # one uniform draw per entry and a sort of each row.
        k = as_tensor_variable(size)
        if k.ndim != 0 or not k.dtype.startswith(("int", "uint")):
            raise TypeError(f"MRG_RandomStreams.choice: size must be an int, got {size!r}")
        p = undefined_grad(p)  # the draws are not differentiable in p (Theano's)
        u = self.uniform(size=p.shape, ndim=2, dtype="float64")
        keys = tt.log(p) - tt.log(-tt.log(u))
        order = argsort(-keys, axis=1)
        fits = tt.le(k, p.shape[1])
        order = Assert(
            "MRG_RandomStreams.choice: cannot draw more columns than p has without replacement"
        )(order, fits)
        # Theano's draws are broadcastable where p is (a column p gives a column)
        return tt.patternbroadcast(tt.cast(order[:, :k], dtype), p.broadcastable)

    def multinomial_wo_replacement(
        self, size=None, n=1, pvals=None, ndim=None, dtype="int64", nstreams=None
    ):
        """Theano's deprecated name for ``choice(size=n, replace=False, p=pvals)``.

        >>> import numpy as np, warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     d = MRG_RandomStreams(seed=1).multinomial_wo_replacement(pvals=np.eye(2))
        >>> d.eval().tolist()
        [[0], [1]]
        """
        warnings.warn(
            "MRG_RandomStreams.multinomial_wo_replacement is deprecated (as in Theano): "
            "use choice(size=n, replace=False, p=pvals)",
            DeprecationWarning,
            stacklevel=2,
        )
        if size is not None:
            raise ValueError(
                "MRG_RandomStreams.multinomial_wo_replacement: size must be None (n gives "
                "the number of draws per row of pvals)"
            )
        return self.choice(size=n, replace=False, p=pvals, ndim=ndim, dtype=dtype)


# Theano 1.1.2's name for the class (MRG_RandomStreams is the older one, still used).
MRG_RandomStream = MRG_RandomStreams
