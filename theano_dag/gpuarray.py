"""Theano's ``theano.gpuarray`` namespace: the libgpuarray (``pygpu``) GPU backend, which
theano_dag does not have. Its GPU engine is OpenCL (:mod:`theano_dag.engines.opencl`,
``Mode(linker="opencl")``). ``pygpu_activated`` is ``False``, the value Theano itself has
when pygpu is not installed, so that code checking it takes its CPU path.

>>> pygpu_activated
False
"""

__all__ = ["pygpu_activated"]

pygpu_activated = False
