"""Random draws in graphs (``theano.tensor.random``): ``RandomStream`` (Theano 1.1.2's
numpy-like stream), ``RandomStreams`` (Theano 1.0's size-first one) and the
``RandomVariable`` ops they build, whose instances in :mod:`.basic` (``normal``,
``poisson``, ...) are Theano 1.1.2's distributions.

>>> import theano_dag
>>> from theano_dag.tensor.random import RandomStream
>>> srng = RandomStream(seed=0)
>>> u = srng.uniform(0.0, 1.0, size=(2,))
>>> f = theano_dag.function([], u)
>>> bool((f() != f()).all())
True
"""

from theano_dag.tensor.random import basic
from theano_dag.tensor.random.basic import (
    BernoulliRV,
    BetaBinomialRV,
    BetaRV,
    BinomialRV,
    CategoricalRV,
    CauchyRV,
    ChoiceRV,
    DirichletRV,
    ExponentialRV,
    GammaRV,
    HalfCauchyRV,
    HalfNormalRV,
    IntegersRV,
    InvGammaRV,
    MultinomialRV,
    MvNormalRV,
    NegBinomialRV,
    NormalRV,
    PermutationRV,
    PoissonRV,
    RandIntRV,
    TruncExponentialRV,
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
    "basic",
    "NormalRV",
    "HalfNormalRV",
    "UniformRV",
    "CauchyRV",
    "HalfCauchyRV",
    "ExponentialRV",
    "GammaRV",
    "InvGammaRV",
    "BetaRV",
    "TruncExponentialRV",
    "BernoulliRV",
    "BinomialRV",
    "NegBinomialRV",
    "BetaBinomialRV",
    "PoissonRV",
    "IntegersRV",
    "RandIntRV",
    "CategoricalRV",
    "MultinomialRV",
    "DirichletRV",
    "MvNormalRV",
    "ChoiceRV",
    "PermutationRV",
]
