"""Theano's ``theano.gpuarray`` namespace: the libgpuarray (``pygpu``) GPU backend, which
theano_dag does not have. Its GPU engine is OpenCL (:mod:`theano_dag.engines.opencl`,
``Mode(linker="opencl")``). ``pygpu_activated`` is ``False``, the value Theano itself has
when pygpu is not installed, and ``dnn.dnn_present()`` is ``False`` (cuDNN is a pygpu
backend), so that code checking them takes its CPU path.

>>> pygpu_activated
False
>>> dnn.dnn_present(), dnn.dnn_present.msg
(False, 'PyGPU not available')
"""

from theano_dag.gpuarray import dnn

__all__ = ["dnn", "pygpu_activated"]

pygpu_activated = False
