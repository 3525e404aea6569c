"""Theano's ``theano.gpuarray.dnn`` checks, which say that cuDNN is not there: theano_dag
has no pygpu backend. Each check returns ``False`` and, as Theano's do, carries why in its
``msg`` attribute (``avail`` holds the answer).

>>> dnn_present(), dnn_available(None), dnn_available.msg
(False, False, 'PyGPU not available')
"""

__all__ = ["dnn_available", "dnn_present"]

_WHY = "PyGPU not available"


def dnn_present():
    """Whether cuDNN can be used: never here (``dnn_present.msg`` says why).

    >>> dnn_present()
    False
    """
    return False


def dnn_available(context_name=None):
    """Whether cuDNN can be used on the GPU context ``context_name``: never here.

    >>> dnn_available("dev0")
    False
    """
    return False


for _check in (dnn_present, dnn_available):
    _check.avail, _check.msg = False, _WHY
