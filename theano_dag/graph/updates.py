"""``OrderedUpdates``: Theano's mapping from shared variables to their new values.

An ordered dict whose keys must be shared variables; ``+`` joins two of them and refuses
two different updates of one variable. ``function(..., updates=...)`` takes it as any
mapping of updates.

>>> import numpy as np
>>> from theano_dag.compile.sharedvalue import shared
>>> a, b = shared(np.float64(0.0), name="a"), shared(np.float64(1.0), name="b")
>>> both = OrderedUpdates([(a, a + 1)]) + OrderedUpdates([(b, b * 2)])
>>> [k.name for k in both]
['a', 'b']
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

from theano_dag.graph.shared import SharedVariable


class OrderedUpdates(OrderedDict):
    """Ordered ``{shared_variable: new_value}``; keys other than shared variables raise
    ``TypeError``, and joining two different updates of one variable raises ``KeyError``."""

    def __init__(self, *args, **kwargs):
        if args and _unordered(args[0]):
            warnings.warn(
                "OrderedUpdates from a plain dict of several updates: their order is the "
                "dict's, pass a list of pairs or an OrderedDict to fix it",
                stacklevel=2,
            )
        super().__init__(*args, **kwargs)
        for key in self:
            _check_key(key)

    def __setitem__(self, key, value):
        _check_key(key)
        super().__setitem__(key, value)

    def update(self, other=None, **kwargs):
        """Add the updates of ``other``; an update of a variable already updated to
        something else raises ``KeyError('Collision', variable)``."""
        if other is None:
            return
        if _unordered(other):
            warnings.warn(
                "OrderedUpdates.update with a plain dict of several updates: their order "
                "is the dict's",
                stacklevel=2,
            )
        for key, value in OrderedDict(other).items():
            if key in self:
                if self[key] is value:
                    continue
                raise KeyError("Collision", key)
            self[key] = value

    def __add__(self, other):
        joined = OrderedUpdates()
        joined.update(self)
        joined.update(other)
        return joined

    def __radd__(self, other):
        joined = OrderedUpdates()
        joined.update(other)
        joined.update(self)
        return joined


def _unordered(mapping) -> bool:
    # Theano's warning: a dict that is not an OrderedDict had no fixed order before 3.7.
    return isinstance(mapping, dict) and not isinstance(mapping, OrderedDict) and len(mapping) > 1


def _check_key(key):
    if not isinstance(key, SharedVariable):
        raise TypeError(f"OrderedUpdates keys must be shared variables, got {key!r}")
