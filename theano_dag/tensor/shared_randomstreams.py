"""``theano.tensor.shared_randomstreams``'s path: :class:`RandomStreams`, Theano 1.0's
size-first random streams (``srng.normal(size, avg, std)``), the class Lasagne and older
Theano code use. Theano 1.1.2's numpy-like ``RandomStream`` is in
:mod:`theano_dag.tensor.random`.

>>> srng = RandomStreams(seed=3)
>>> srng.uniform((2,)).ndim, srng.normal((4,), avg=1.0, std=0.5).type.shape
(1, (4,))
"""

from theano_dag.tensor.random.utils import RandomStreams
from theano_dag.tensor.random.var import RandomStateSharedVariable, randomstate_constructor

__all__ = ["RandomStreams", "RandomStateSharedVariable", "randomstate_constructor"]
