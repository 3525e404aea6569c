"""theano_dag FunctionGraph <-> Theano FunctionGraph: ``to_theano`` / ``from_theano``.

Written against theano-pymc 1.1.2, which needs numpy<1.24 and scipy<1.10, so it lives
in its own environment (``make test`` builds ``.venv-theano`` for its tests):
``pip install theano-pymc==1.1.2 "numpy<1.24" "scipy<1.10"``. Theano's types carry a
broadcastable pattern and no other static shape; its ``max`` is ``MaxAndArgmax``; its
``Softmax`` works on the rows of a matrix. See :mod:`~theano_dag.formats.foreign` for
what maps and what is wrapped.
"""

from __future__ import annotations

from theano_dag.formats.chain import register_conversion
from theano_dag.formats.foreign import Flavor, from_foreign, to_foreign

__all__ = ["TheanoFlavor", "from_theano", "to_theano"]


class TheanoFlavor(Flavor):
    """Where theano-pymc 1.1.2 keeps the classes the conversion needs."""

    package = "theano"
    install = 'pip install theano-pymc==1.1.2 "numpy<1.24" "scipy<1.10"'
    scalar_modules = ("theano.scalar.basic", "theano.scalar.basic_scipy", "theano.tensor.nnet.sigm")
    # Theano's sparse ops with a Python implementation (those of theano.sparse.opt are C only).
    sparse_modules = ("theano.sparse.basic", "theano.sparse.sandbox.sp2")
    paths = {
        "FunctionGraph": "theano.graph.fg:FunctionGraph",
        "Op": "theano.graph.op:Op",
        "Apply": "theano.graph.basic:Apply",
        "Constant": "theano.graph.basic:Constant",
        "MethodNotDefined": "theano.graph.utils:MethodNotDefined",
        "generic": "theano.graph.type:generic",
        "TensorType": "theano.tensor.type:TensorType",
        "TensorConstant": "theano.tensor.var:TensorConstant",
        "ScalarType": "theano.scalar.basic:Scalar",
        "ScalarConstant": "theano.scalar.basic:ScalarConstant",
        "ScalarOp": "theano.scalar.basic:ScalarOp",
        "Cast": "theano.scalar.basic:Cast",
        "Composite": "theano.scalar.basic:Composite",
        "get_scalar_type": "theano.scalar.basic:get_scalar_type",
        "Elemwise": "theano.tensor.elemwise:Elemwise",
        "DimShuffle": "theano.tensor.elemwise:DimShuffle",
        "CAReduce": "theano.tensor.elemwise:CAReduce",
        "Sum": "theano.tensor.elemwise:Sum",
        "Prod": "theano.tensor.elemwise:Prod",
        "Max": "theano.tensor.basic:Max",
        "Min": "theano.tensor.basic:Min",
        "All": "theano.tensor.elemwise:All",
        "Any": "theano.tensor.elemwise:Any",
        "AdvancedSubtensor1": "theano.tensor.subtensor:AdvancedSubtensor1",
        "set_subtensor": "theano.tensor.subtensor:set_subtensor",
        "inc_subtensor": "theano.tensor.subtensor:inc_subtensor",
        "get_idx_list_fn": "theano.tensor.subtensor:get_idx_list",
        "Reshape": "theano.tensor.basic:Reshape",
        "Shape": "theano.compile.ops:Shape",
        "Shape_i": "theano.compile.ops:Shape_i",
        "MakeVector": "theano.tensor.opt:MakeVector",
        "Eye": "theano.tensor.basic:Eye",
        "Softmax": "theano.tensor.nnet.nnet:Softmax",
        "LogSoftmax": "theano.tensor.nnet.nnet:LogSoftmax",
        "SoftmaxGrad": "theano.tensor.nnet.nnet:SoftmaxGrad",
        "Cholesky": "theano.tensor.slinalg:Cholesky",
        "Eigh": "theano.tensor.nlinalg:Eigh",
        "SparseType": "theano.sparse.type:SparseType",
        "SparseConstant": "theano.sparse.basic:SparseConstant",
        "SparseCast": "theano.sparse.basic:Cast",
        "tensor": "theano:tensor",
        "compile_function": "theano:function",
    }

    def tensor_type(self, dtype, shape):
        return self.TensorType(dtype, tuple(s == 1 for s in shape))

    def static_shape(self, ftype):
        return tuple(1 if b else None for b in ftype.broadcastable)

    def dimshuffle(self, x, new_order):
        return self.DimShuffle(x.type.broadcastable, list(new_order))(x)

    def get_idx_list(self, node, n_lead):
        # the function reads the index inputs after one leading input (x)
        return self.get_idx_list_fn([node.inputs[0], *node.inputs[n_lead:]], node.op.idx_list)

    def softmax(self, name, axis, ins):
        # Theano's softmax ops work along the rows of a matrix only
        if ins[-1].type.ndim != 2 or axis not in (-1, 1):
            return None
        return [getattr(self, name)()(*ins)]

    def softmax_axis(self, op, ndim):
        return -1 if ndim == 2 else None  # Theano's are over a matrix's rows

    def cholesky(self, x, lower):
        return self.Cholesky(lower=lower)(x)

    def eigh(self, x, uplo):
        return self.Eigh(uplo)(x, return_list=True)

    def einsum(self, subscripts, ins):
        return None  # Theano has no einsum


_FLAVOR = TheanoFlavor()


def to_theano(fgraph, strict=False):
    """A ``theano.graph.fg.FunctionGraph`` computing what the theano_dag ``fgraph`` does.

    Inputs and outputs keep their order, names, dtypes and broadcastable patterns; the
    result compiles with ``theano.function(tfg.inputs, tfg.outputs)``. An op without a
    Theano counterpart (``Einsum``, say) runs its own ``perform`` inside a wrapper op,
    unless ``strict=True``, which raises
    :class:`~theano_dag.formats.foreign.NoCounterpartError` naming it. Without
    theano-pymc installed this raises ImportError with the command that installs it:

    >>> from theano_dag import tensor as tt
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> x = tt.dvector("x")
    >>> fg = FunctionGraph([x], [tt.exp(x)], clone=False)
    >>> try:
    ...     tfg = to_theano(fg)
    ... except ImportError as err:  # no theano-pymc here
    ...     assert "pip install theano-pymc==1.1.2" in str(err)
    ... else:
    ...     assert [type(n.op).__name__ for n in tfg.toposort()] == ["Elemwise"]
    """
    return to_foreign(fgraph, _FLAVOR, strict, who="to_theano")


def from_theano(theano_fgraph, strict=False):
    """A theano_dag FunctionGraph computing what a Theano FunctionGraph does.

    ``MaxAndArgmax`` becomes ``Max`` and ``Argmax``; scalar index inputs become 0-d
    tensors. ``strict`` as in :func:`to_theano`.

    >>> try:
    ...     from_theano("not a graph")
    ... except ImportError as err:  # no theano-pymc here
    ...     assert "from_theano needs theano" in str(err)
    ... except TypeError as err:
    ...     assert str(err) == "from_theano needs a theano FunctionGraph, got str"
    """
    return from_foreign(theano_fgraph, _FLAVOR, strict, who="from_theano")


def _is_theano_fgraph(graph):
    return type(graph).__module__ == "theano.graph.fg"


register_conversion(
    "theano_fgraph", "fgraph", lambda g, strict=False, **_: from_theano(g, strict),
    detect=_is_theano_fgraph,
)  # fmt: skip
register_conversion("fgraph", "theano_fgraph", lambda g, strict=False, **_: to_theano(g, strict))
