"""``theano.tensor.shared_randomstreams``'s path: ``RandomStreams`` is
:class:`theano_dag.tensor.random.utils.RandomStream`.

>>> RandomStreams(seed=3).uniform((2,)).ndim
1
"""

from theano_dag.tensor.random.utils import RandomStream, RandomStreams

__all__ = ["RandomStream", "RandomStreams"]
