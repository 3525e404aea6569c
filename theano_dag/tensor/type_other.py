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

__all__ = ["NoneTypeT", "NoneConst", "none_type_t"]


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
