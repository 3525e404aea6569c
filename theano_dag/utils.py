"""Theano's ``theano.utils`` constants that code and tests read: the bit width of a pointer
(``LOCAL_BITWIDTH``) and of a C ``long``, numpy's default integer on this platform
(``PYTHON_INT_BITWIDTH``).

>>> LOCAL_BITWIDTH in (32, 64), PYTHON_INT_BITWIDTH in (32, 64)
(True, True)
"""

import struct

__all__ = ["LOCAL_BITWIDTH", "PYTHON_INT_BITWIDTH"]

LOCAL_BITWIDTH = struct.calcsize("P") * 8
PYTHON_INT_BITWIDTH = struct.calcsize("l") * 8
