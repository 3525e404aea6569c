"""Random draws in graphs (``theano.tensor.random``): ``RandomStream`` and the
``RandomVariable`` ops it builds.

>>> import theano_dag
>>> from theano_dag.tensor.random import RandomStream
>>> srng = RandomStream(seed=0)
>>> u = srng.uniform((2,))
>>> f = theano_dag.function([], u)
>>> bool((f() != f()).all())
True
"""

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
]
