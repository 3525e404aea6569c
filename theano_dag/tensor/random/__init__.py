"""Random draws in graphs (``theano.tensor.random``): ``RandomStream`` (Theano 1.1.2's
numpy-like stream), ``RandomStreams`` (Theano 1.0's size-first one) and the
``RandomVariable`` ops they build; :mod:`theano_dag.tensor.random.basic` holds every
distribution by Theano 1.1.2's names (``NormalRV`` and ``normal``, ``PoissonRV`` and
``poisson``, ...).

>>> import theano_dag
>>> from theano_dag.tensor.random import RandomStream
>>> srng = RandomStream(seed=0)
>>> u = srng.uniform(0.0, 1.0, size=(2,))
>>> f = theano_dag.function([], u)
>>> bool((f() != f()).all())
True
"""

from theano_dag.tensor.random import basic  # noqa: F401 (theano.tensor.random.basic)
from theano_dag.tensor.random.basic import (
    BinomialRV,
    ChoiceRV,
    NormalRV,
    PermutationRV,
    UniformRV,
)
from theano_dag.tensor.random.op import (
    RandomGeneratorType,
    RandomVariable,
    random_generator_type,
)
from theano_dag.tensor.random.utils import RandomStream, RandomStreams
from theano_dag.tensor.random.var import RandomStateSharedVariable  # registers shared()

__all__ = [
    "RandomStream",
    "RandomStreams",
    "RandomVariable",
    "RandomGeneratorType",
    "random_generator_type",
    "NormalRV",
    "UniformRV",
    "BinomialRV",
    "ChoiceRV",
    "PermutationRV",
    "RandomStateSharedVariable",
]
