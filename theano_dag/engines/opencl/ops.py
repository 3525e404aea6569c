"""The transfer ops, ``GpuFromHost`` and ``HostFromGpu`` (Theano's names).

The OpenCL engine keeps every value on the device except where a node runs
on the host. Its placement rewrite inserts these ops on the edges that cross
between the two, so that ``debugprint`` shows each copy. Their types are the
tensor types of what they copy; on the reference engine they are identities
(the value is returned as is), so a rewritten graph still runs anywhere.
"""

from __future__ import annotations

from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["GpuFromHost", "HostFromGpu", "gpu_from_host", "host_from_gpu"]


class _Transfer(Op):
    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x):
        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [output_grads[0]]

    def __str__(self):
        return type(self).__name__

    __repr__ = __str__


class GpuFromHost(_Transfer):
    """Copy a host value to the device (inserted before a device node that reads a value
    computed on the host).

    >>> import theano_dag.tensor as tt
    >>> x = tt.fvector("x")
    >>> gpu_from_host(x).owner.op, gpu_from_host(x).type == x.type
    (GpuFromHost, True)
    """


class HostFromGpu(_Transfer):
    """Copy a device value to the host (inserted before a node that runs on the host).

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> host_from_gpu(x).eval({x: np.ones(2)})
    array([1., 1.])
    """


gpu_from_host = GpuFromHost()
host_from_gpu = HostFromGpu()
