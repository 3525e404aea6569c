"""Theano's ``theano.utils``: the helpers and constants that code and tests read: the bit
width of a pointer (``LOCAL_BITWIDTH``) and of a C ``long``, numpy's default integer on
this platform (``PYTHON_INT_BITWIDTH``); ``cmp`` and ``exc_message``.

>>> LOCAL_BITWIDTH in (32, 64), PYTHON_INT_BITWIDTH in (32, 64)
(True, True)
"""

import struct

__all__ = ["LOCAL_BITWIDTH", "PYTHON_INT_BITWIDTH", "cmp", "exc_message"]

LOCAL_BITWIDTH = struct.calcsize("P") * 8
PYTHON_INT_BITWIDTH = struct.calcsize("l") * 8


def cmp(a, b) -> int:
    """Python 2's three-way comparison: -1, 0 or 1 (``theano.utils.cmp``).

    >>> cmp(1, 2), cmp("b", "a"), cmp(3, 3)
    (-1, 1, 0)
    """
    return (a > b) - (a < b)


def exc_message(e: BaseException):
    """The message of ``e``: its first argument, looked for inside the exception it wraps
    when that argument is itself an exception (an error raised again with the original as
    its argument).

    >>> exc_message(ValueError(KeyError("the key")))
    'the key'
    """
    msg = e.args[0]
    return exc_message(msg) if isinstance(msg, BaseException) else msg
