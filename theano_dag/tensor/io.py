"""``theano.tensor.io``: ``load``, a tensor read from a ``.npy`` file when the function
runs (the path is the value of a Generic variable)."""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.op import Op
from theano_dag.graph.type import Generic
from theano_dag.tensor.type import TensorType

__all__ = ["LoadFromDisk", "load"]


class LoadFromDisk(Op):
    """The array saved at a path (``numpy.load``), of a declared dtype and broadcastable
    pattern. ``mmap_mode`` is None (read into memory) or ``"c"`` (a copy-on-write memory
    map): the modes that write to the file are refused, since an in-place op of the graph
    would change it.
    """

    __props__ = ("dtype", "broadcastable", "mmap_mode")

    def __init__(self, dtype, broadcastable, mmap_mode=None):
        self.dtype = np.dtype(dtype).name
        self.broadcastable = tuple(bool(b) for b in broadcastable)
        if mmap_mode not in (None, "c"):
            raise ValueError(
                f"LoadFromDisk: mmap_mode {mmap_mode!r} is not allowed; use None or 'c' "
                "(a mode that writes would change the file when an op works in place)"
            )
        self.mmap_mode = mmap_mode

    def make_node(self, path):
        if not isinstance(path, Variable):
            path = Generic().make_constant(path)
        shape = tuple(1 if b else None for b in self.broadcastable)
        return Apply(self, [path], [TensorType(self.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        (path,) = inputs
        data = np.load(path, mmap_mode=self.mmap_mode)
        if data.dtype.name != self.dtype:
            raise TypeError(f"{self}: {path} holds {data.dtype}, expected {self.dtype}")
        output_storage[0][0] = data

    def connection_pattern(self, node):
        return [[False]]

    def __str__(self):
        pattern = self.broadcastable
        return f"Load{{dtype: {self.dtype}, broadcastable: {pattern}, mmap: {self.mmap_mode}}}"


def load(path, dtype, broadcastable, mmap_mode=None):
    """A tensor read from the ``.npy`` file at ``path`` when the function runs.

    >>> import os, tempfile, numpy as np, theano_dag
    >>> from theano_dag.graph.type import Generic
    >>> fname = os.path.join(tempfile.mkdtemp(), "a.npy")
    >>> np.save(fname, np.arange(3, dtype="int32"))
    >>> p = Generic()("p")
    >>> theano_dag.function([p], load(p, "int32", (False,)) * 2)(fname)
    array([0, 2, 4], dtype=int32)
    """
    return LoadFromDisk(dtype, broadcastable, mmap_mode)(path)
