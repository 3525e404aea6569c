"""Types of things that are not arrays, as in ``theano.tensor.type_other``: ``NoneTypeT``,
the type of ``None``, and ``NoneConst``, the constant ``None`` (an op's optional input
left out, such as a reduction's axis).

>>> NoneConst.data is None, str(NoneConst.type)
(True, 'NoneTypeT')
>>> NoneTypeT().filter(None) is None
True
"""

from __future__ import annotations

from theano_dag.graph.basic import Constant
from theano_dag.graph.type import Type

__all__ = ["NoneTypeT", "NoneConst", "none_type_t", "make_slice"]


class NoneTypeT(Type):
    """The type whose one value is ``None``."""

    __props__ = ()

    def filter(self, data, strict=False, allow_downcast=None):
        if data is not None:
            raise TypeError(f"NoneTypeT: expected None, got {data!r}")
        return None

    def is_valid_value(self, data) -> bool:
        return data is None

    def __str__(self):
        return "NoneTypeT"


none_type_t = NoneTypeT()
NoneConst = Constant(none_type_t, None, name="NoneConst")


def make_slice(start=None, stop=None, step=None):
    """``slice(start, stop, step)``: theano_dag indexes with Python slices whose bounds
    may be symbolic scalars, where Theano built a slice variable (``MakeSlice``).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> tt.as_tensor_variable(np.arange(5.0))[make_slice(1, None, 2)].eval()
    array([1., 3.])
    """
    if isinstance(start, slice):
        return start
    return slice(start, stop, step)
