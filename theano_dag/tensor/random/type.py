"""The types of random generators (``theano.tensor.random.type``): theano_dag's
``RandomGeneratorType`` (a numpy ``Generator`` or ``RandomState``) and Theano 1.1.2's
``RandomStateType``, for legacy ``numpy.random.RandomState`` objects only.

>>> import numpy as np
>>> random_state_type.filter(np.random.RandomState(1)).randint(10)
5
>>> random_state_type.is_valid_value(np.random.default_rng(1))
False
"""

from __future__ import annotations

import sys

import numpy as np

from theano_dag.tensor.random.op import RandomGeneratorType, random_generator_type

__all__ = [
    "RandomGeneratorType",
    "RandomStateType",
    "random_generator_type",
    "random_state_type",
]


class RandomStateType(RandomGeneratorType):
    """The type of ``numpy.random.RandomState`` values; two are equal when their bit
    generators are of one kind and in one state."""

    __props__ = ()

    def filter(self, data, strict=False, allow_downcast=None):
        if isinstance(data, np.random.RandomState):
            return data
        raise TypeError(f"{self} expected a numpy.random.RandomState, got {type(data).__name__}")

    def is_valid_value(self, data) -> bool:
        return isinstance(data, np.random.RandomState)

    def get_shape_info(self, obj):
        """The generator a variable holds (its "shape" is the generator itself)."""
        return obj.get_value(borrow=True)

    def get_size(self, shape_info):
        """The bytes of the generator's state."""
        return sys.getsizeof(shape_info.get_state(legacy=False))

    @staticmethod
    def may_share_memory(a, b) -> bool:
        # Two RandomState objects over one bit generator draw from one state.
        return a is b or a._bit_generator is b._bit_generator

    def __str__(self):
        return "RandomStateType"

    __repr__ = __str__


random_state_type = RandomStateType()
