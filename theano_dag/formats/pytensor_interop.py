"""theano_dag FunctionGraph <-> PyTensor FunctionGraph: ``to_pytensor`` / ``from_pytensor``.

Needs PyTensor, an optional extra (``pip install '.[pytensor]'`` in a checkout). Written against
PyTensor 3; what PyTensor does differently from Theano is in :class:`PyTensorFlavor`
(static shapes on types, ``DimShuffle(input_ndim=, new_order=)``, axis tuples on
``Softmax``, ``Blockwise``-wrapped linear algebra, its own ``Einsum``). See
:mod:`~theano_dag.formats.foreign` for what maps and what is wrapped.
"""

from __future__ import annotations

from theano_dag.config import install_hint
from theano_dag.formats.chain import register_conversion
from theano_dag.formats.foreign import Flavor, from_foreign, to_foreign

__all__ = ["PyTensorFlavor", "from_pytensor", "to_pytensor"]


class PyTensorFlavor(Flavor):
    """Where PyTensor keeps the classes the conversion needs."""

    package = "pytensor"
    install = install_hint("pytensor", "pytensor>=3.0.7,<3.1")
    scalar_modules = ("pytensor.scalar.basic", "pytensor.scalar.math")
    sparse_modules = ("pytensor.sparse.basic", "pytensor.sparse.math")
    paths = {
        "SparseType": "pytensor.sparse.type:SparseTensorType",
        "SparseConstant": "pytensor.sparse.variable:SparseConstant",
        "SparseCast": "pytensor.sparse.basic:Cast",
        "FunctionGraph": "pytensor.graph.fg:FunctionGraph",
        "Op": "pytensor.graph.op:Op",
        "Apply": "pytensor.graph.basic:Apply",
        "Constant": "pytensor.graph.basic:Constant",
        "MethodNotDefined": "pytensor.graph.utils:MethodNotDefined",
        "generic": "pytensor.link.c.type:generic",
        "TensorType": "pytensor.tensor.type:TensorType",
        "TensorConstant": "pytensor.tensor.variable:TensorConstant",
        "ScalarType": "pytensor.scalar.basic:ScalarType",
        "ScalarConstant": "pytensor.scalar.basic:ScalarConstant",
        "ScalarOp": "pytensor.scalar.basic:ScalarOp",
        "Cast": "pytensor.scalar.basic:Cast",
        "Composite": "pytensor.scalar.basic:Composite",
        "get_scalar_type": "pytensor.scalar.basic:get_scalar_type",
        "Elemwise": "pytensor.tensor.elemwise:Elemwise",
        "DimShuffle": "pytensor.tensor.elemwise:DimShuffle",
        "CAReduce": "pytensor.tensor.elemwise:CAReduce",
        "Sum": "pytensor.tensor.math:Sum",
        "Prod": "pytensor.tensor.math:Prod",
        "Max": "pytensor.tensor.math:Max",
        "Min": "pytensor.tensor.math:Min",
        "All": "pytensor.tensor.math:All",
        "Any": "pytensor.tensor.math:Any",
        "AdvancedSubtensor1": "pytensor.tensor.subtensor:AdvancedSubtensor1",
        "set_subtensor": "pytensor.tensor.subtensor:set_subtensor",
        "inc_subtensor": "pytensor.tensor.subtensor:inc_subtensor",
        "get_idx_list_fn": "pytensor.tensor.subtensor:get_idx_list",
        "Reshape": "pytensor.tensor.shape:Reshape",
        "Shape": "pytensor.tensor.shape:Shape",
        "Shape_i": "pytensor.tensor.shape:Shape_i",
        "MakeVector": "pytensor.tensor.basic:MakeVector",
        "Eye": "pytensor.tensor.basic:Eye",
        "Assert": "pytensor.raise_op:Assert",
        "Softmax": "pytensor.tensor.special:Softmax",
        "LogSoftmax": "pytensor.tensor.special:LogSoftmax",
        "Cholesky": "pytensor.tensor.linalg.decomposition.cholesky:Cholesky",
        "Eigh": "pytensor.tensor.linalg.decomposition.eigen:Eigh",
        "einsum_fn": "pytensor.tensor.einsum:einsum",
        "tensor": "pytensor:tensor",
        "compile_function": "pytensor:function",
    }

    def tensor_type(self, dtype, shape):
        return self.TensorType(dtype, shape=tuple(shape))

    def static_shape(self, ftype):
        return tuple(ftype.shape)

    def dimshuffle(self, x, new_order):
        return self.DimShuffle(input_ndim=x.type.ndim, new_order=tuple(new_order))(x)

    def get_idx_list(self, node, n_lead):
        # the function reads the index inputs after one leading input (x)
        return self.get_idx_list_fn([node.inputs[0], *node.inputs[n_lead:]], node.op.idx_list)

    def softmax(self, name, axis, ins):
        if name == "SoftmaxGrad":
            return None  # PyTensor 3 writes the gradient as a graph, not as an op
        x = ins[0]
        return [getattr(self, name)(axis=(axis % x.type.ndim,))(x)]

    def softmax_axis(self, op, ndim):
        axis = op.axis
        if axis is None:  # all axes at once: the same as ours only for a vector
            return 0 if ndim == 1 else None
        return axis[0] if len(axis) == 1 else None

    def cholesky(self, x, lower):
        return self.Cholesky(lower=lower)(x)

    def eigh(self, x, uplo):
        return self.Eigh(lower=uplo == "L")(x, return_list=True)

    def einsum(self, subscripts, ins):
        return [self.einsum_fn(subscripts, *ins)]


_FLAVOR = PyTensorFlavor()


def to_pytensor(fgraph, strict=False):
    """A ``pytensor.graph.fg.FunctionGraph`` computing what the theano_dag ``fgraph`` does.

    Inputs and outputs keep their order, names, dtypes and static shapes. An op without
    a PyTensor counterpart runs its own ``perform`` inside a wrapper op, unless
    ``strict=True``, which raises :class:`~theano_dag.formats.foreign.NoCounterpartError`.

    >>> from theano_dag import tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x = tt.dmatrix("x")
    >>> pfg = to_pytensor(FunctionGraph([x], [tt.exp(x).sum(axis=1)], clone=False))
    >>> [type(n.op).__name__ for n in pfg.toposort()], pfg.inputs[0].name
    (['Elemwise', 'Sum'], 'x')
    """
    return to_foreign(fgraph, _FLAVOR, strict, who="to_pytensor")


def from_pytensor(pytensor_fgraph, strict=False):
    """A theano_dag FunctionGraph computing what a PyTensor FunctionGraph does.

    >>> import pytensor.tensor as pt
    >>> from pytensor.graph.fg import FunctionGraph as PFunctionGraph
    >>> x = pt.dmatrix("x")
    >>> fg = from_pytensor(PFunctionGraph([x], [pt.exp(x).sum(axis=1)]))
    >>> fg
    FunctionGraph(Sum{axis=(1,)}(Elemwise{exp,no_inplace}(x)))
    """
    return from_foreign(pytensor_fgraph, _FLAVOR, strict, who="from_pytensor")


def _is_pytensor_fgraph(graph):
    return type(graph).__module__ == "pytensor.graph.fg"


register_conversion(
    "pytensor_fgraph", "fgraph", lambda g, strict=False, **_: from_pytensor(g, strict),
    detect=_is_pytensor_fgraph,
)  # fmt: skip
register_conversion(
    "fgraph", "pytensor_fgraph", lambda g, strict=False, **_: to_pytensor(g, strict)
)
