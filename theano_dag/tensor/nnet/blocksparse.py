"""Block-sparse products (Theano's ``theano.tensor.nnet.blocksparse``): a layer whose
weight matrix is split into blocks, of which each example uses only a few, chosen by
index matrices.

``SparseBlockGemv`` adds, for each example ``b`` and output block ``j``, the products of
the example's input blocks ``h[b, i]`` with the weight blocks ``W[inputIdx[b, i],
outputIdx[b, j]]``; ``SparseBlockOuter`` adds outer products into chosen weight blocks
(the weights' gradient).

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> W, h, b = tt.dtensor4("W"), tt.dtensor3("h"), tt.dmatrix("b")
>>> ii, oi = tt.lmatrix("ii"), tt.lmatrix("oi")
>>> out = sparse_block_dot(W, h, ii, b, oi)
>>> out.eval({W: np.ones((2, 3, 1, 1)), h: np.ones((1, 2, 1)), b: np.zeros((3, 1)),
...           ii: np.array([[0, 1]]), oi: np.array([[2]])})
array([[[2.]]])
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import grad_undefined
from theano_dag.scalar import upcast
from theano_dag.tensor import basic as tb
from theano_dag.tensor.blas import _Destructive  # (inplace prop, destroy_map, name)
from theano_dag.tensor.type import TensorType, discrete_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "SparseBlockGemv",
    "SparseBlockOuter",
    "sparse_block_dot",
    "sparse_block_gemv",
    "sparse_block_gemv_inplace",
    "sparse_block_outer",
    "sparse_block_outer_inplace",
]


def _tensor(op, name, var, ndim, integer=False):
    var = as_tensor_variable(var)
    if var.ndim != ndim:
        raise TypeError(f"{op}: {name} must have {ndim} dimensions, got {var.type}")
    if integer and (var.dtype not in discrete_dtypes or var.dtype == "bool"):
        raise TypeError(f"{op}: {name} must hold integer indices, got {var.type}")
    return var


class SparseBlockGemv(_Destructive):
    """``o[b, j] + sum_i h[b, i] @ W[inputIdx[b, i], outputIdx[b, j]]`` for inputs ``(o,
    W, h, inputIdx, outputIdx)``: ``o`` is ``(batch, output blocks, output size)``, ``W``
    ``(input blocks, output blocks, input size, output size)``, ``h`` ``(batch, input
    blocks used, input size)``. ``inplace`` writes the result into ``o``.

    >>> SparseBlockGemv(inplace=True)
    SparseBlockGemv{inplace}
    """

    def make_node(self, o, W, h, inputIdx, outputIdx):  # noqa: N803 (Theano's names)
        o = _tensor(self, "o", o, 3)
        W = _tensor(self, "W", W, 4)  # noqa: N806
        h = _tensor(self, "h", h, 3)
        inputIdx = _tensor(self, "inputIdx", inputIdx, 2, integer=True)  # noqa: N806
        outputIdx = _tensor(self, "outputIdx", outputIdx, 2, integer=True)  # noqa: N806
        out = TensorType(upcast(o.dtype, W.dtype, h.dtype), shape=o.type.shape)
        return Apply(self, [o, W, h, inputIdx, outputIdx], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        o, W, h, iidx, oidx = inputs  # noqa: N806
        dtype = node.outputs[0].dtype
        out = o if self.inplace and o.dtype == dtype else np.array(o, dtype=dtype)
        for b in range(out.shape[0]):
            blocks = W[np.ix_(iidx[b], oidx[b])]  # (used in, used out, in size, out size)
            out[b] += np.einsum("ik,ijkl->jl", h[b], blocks)
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        o, W, h, iidx, oidx = inputs  # noqa: N806
        (go,) = output_grads
        # h's gradient: the same product with the blocks transposed, from outputs to inputs.
        g_h = sparse_block_gemv(tb.zeros_like(h), W.dimshuffle(1, 0, 3, 2), go, oidx, iidx)
        g_W = sparse_block_outer(tb.zeros_like(W), h, go, iidx, oidx)  # noqa: N806
        why = "block indices are discrete"
        return [
            go,
            tb.cast(g_W, W.dtype),
            tb.cast(g_h, h.dtype),
            grad_undefined(self, 3, iidx, why),
            grad_undefined(self, 4, oidx, why),
        ]


class SparseBlockOuter(_Destructive):
    """``o`` plus ``alpha * outer(x[b, i], y[b, j])`` added into block ``(xIdx[b, i],
    yIdx[b, j])``, for inputs ``(o, x, y, xIdx, yIdx[, alpha])`` (``o`` is ``(x blocks, y
    blocks, x size, y size)``). ``inplace`` writes the result into ``o``.

    >>> SparseBlockOuter()
    SparseBlockOuter{no_inplace}
    """

    def make_node(self, o, x, y, xIdx, yIdx, alpha=None):  # noqa: N803 (Theano's names)
        o = _tensor(self, "o", o, 4)
        x = _tensor(self, "x", x, 3)
        y = _tensor(self, "y", y, 3)
        xIdx = _tensor(self, "xIdx", xIdx, 2, integer=True)  # noqa: N806
        yIdx = _tensor(self, "yIdx", yIdx, 2, integer=True)  # noqa: N806
        dtype = upcast(o.dtype, x.dtype, y.dtype)
        alpha = tb.constant(np.asarray(1, dtype=dtype)) if alpha is None else alpha
        alpha = as_tensor_variable(alpha)
        if alpha.ndim != 0:
            raise TypeError(f"{self}: alpha must be a scalar, got {alpha.type}")
        out = TensorType(dtype, shape=o.type.shape)
        return Apply(self, [o, x, y, xIdx, yIdx, alpha], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        o, x, y, xidx, yidx, alpha = inputs
        dtype = node.outputs[0].dtype
        out = o if self.inplace and o.dtype == dtype else np.array(o, dtype=dtype)
        products = alpha * np.einsum("bik,bjl->bijkl", x, y)
        # Blocks chosen twice accumulate (np.add.at, not fancy-index assignment).
        np.add.at(out, (xidx[:, :, None], yidx[:, None, :]), products.astype(dtype, copy=False))
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


sparse_block_gemv = SparseBlockGemv(False)
sparse_block_gemv_inplace = SparseBlockGemv(True)
sparse_block_outer = SparseBlockOuter(False)
sparse_block_outer_inplace = SparseBlockOuter(True)


def sparse_block_dot(W, h, inputIdx, b, outputIdx):  # noqa: N803 (Theano's names)
    """The block-sparse layer: ``b[outputIdx[n, j]] + sum_i h[n, i] @ W[inputIdx[n, i],
    outputIdx[n, j]]``. ``h`` is ``(batch, input blocks used, input size)`` with index
    matrices, or one example (a matrix, index vectors); ``b`` holds a bias per output
    block.

    >>> from theano_dag import tensor as tt
    >>> sparse_block_dot(tt.dtensor4(), tt.dmatrix(), tt.lvector(), tt.dmatrix(),
    ...                  tt.lvector()).ndim
    3
    """
    h = as_tensor_variable(h)
    inputIdx = as_tensor_variable(inputIdx)  # noqa: N806
    outputIdx = as_tensor_variable(outputIdx)  # noqa: N806
    if inputIdx.ndim != h.ndim - 1 or outputIdx.ndim != inputIdx.ndim:
        raise TypeError(
            "sparse_block_dot: inputIdx and outputIdx must have one dimension less than h"
        )
    if h.ndim == 2:
        h = h.dimshuffle("x", 0, 1)
        inputIdx = inputIdx.dimshuffle("x", 0)  # noqa: N806
        outputIdx = outputIdx.dimshuffle("x", 0)  # noqa: N806
    bias = as_tensor_variable(b).take(outputIdx, axis=0)
    return sparse_block_gemv(bias, W, h, inputIdx, outputIdx)
