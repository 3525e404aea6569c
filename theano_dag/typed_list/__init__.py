"""Theano's ``theano.typed_list``: a Python list of values of one type as a graph value.

``make_list([a, b])`` is a variable of ``TypedListType(a.type)``; ``length(l)`` its
length, ``getitem(l, i)`` its element ``i``, ``append(l, x)`` a new list with ``x`` at
its end; :mod:`~theano_dag.typed_list.basic` has the other list operations (``extend``,
``insert``, ``remove``, ``reverse``, ``index_``, ``count``), also methods of the list
variables. The list ops run on the reference engine (``perform``); the CPU engine runs
them as it runs any op without C code.

>>> import numpy as np
>>> import theano_dag, theano_dag.tensor as tt
>>> a, b = tt.dvectors("a", "b")
>>> l = make_list([a, b])
>>> f = theano_dag.function([a, b], [length(l), getitem(append(l, a * 2), 2)])
>>> n, third = f(np.ones(2), np.zeros(2))
>>> int(n), third.tolist()
(2, [2.0, 2.0])
"""

from theano_dag.typed_list import opt  # registers typed_list_inplace_opt
from theano_dag.typed_list.basic import *  # noqa: F403
from theano_dag.typed_list.basic import __all__ as _basic_all
from theano_dag.typed_list.type import TypedListType

__all__ = [*_basic_all, "TypedListType", "opt"]
