"""Shared random generators (``theano.tensor.random.var``): ``shared`` of a numpy
``Generator`` or ``RandomState`` makes a :class:`RandomStateSharedVariable`, a copy of the
generator unless ``borrow=True``, as Theano's ``shared(np.random.RandomState(seed))``.

Importing :mod:`theano_dag.tensor.random` registers :func:`randomstate_constructor` with
:func:`theano_dag.graph.shared.shared`.

>>> import numpy as np
>>> from theano_dag.compile.sharedvalue import shared
>>> rng = np.random.RandomState(123)
>>> s = shared(rng)
>>> s.type, s.get_value(borrow=True) is rng, shared(rng, borrow=True).get_value(borrow=True) is rng
(RandomStateType, False, True)
"""

from __future__ import annotations

import copy

import numpy as np

from theano_dag.graph.shared import SharedVariable, shared_constructor
from theano_dag.tensor.random.type import random_generator_type, random_state_type

__all__ = ["RandomStateSharedVariable", "randomstate_constructor"]


class RandomStateSharedVariable(SharedVariable):
    """A shared variable holding a numpy random generator (Theano's class name; here for
    a ``Generator`` too)."""


@shared_constructor
def randomstate_constructor(value, name=None, strict=False, allow_downcast=None, borrow=False):
    """Shared variable of a numpy ``RandomState`` (type ``RandomStateType``) or
    ``Generator`` (type ``RandomGeneratorType``); a deep copy unless ``borrow``.

    >>> import numpy as np
    >>> g = np.random.default_rng(0)
    >>> borrowed = randomstate_constructor(g, borrow=True)
    >>> borrowed.type, borrowed.get_value(borrow=True) is g
    (RandomGeneratorType, True)
    """
    if isinstance(value, np.random.RandomState):
        rtype = random_state_type
    elif isinstance(value, np.random.Generator):
        rtype = random_generator_type
    else:
        raise TypeError(f"not a numpy random generator: {type(value).__name__}")
    if not borrow:
        value = copy.deepcopy(value)
    return RandomStateSharedVariable(
        type=rtype, value=value, name=name, strict=strict, allow_downcast=allow_downcast
    )
