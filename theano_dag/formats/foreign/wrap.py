"""Ops with no counterpart on the other side, wrapped to run as their own package runs them.

:class:`ForeignOp` holds a foreign node in a theano_dag graph; the class made by
:func:`foreign_wrapper_class` holds a theano_dag node in a foreign graph.
"""

from __future__ import annotations

import numpy as np

from theano_dag.formats.foreign.flavor import foreign_type, our_type
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.sparse.type import SparseType

__all__ = ["ForeignOp", "foreign_wrapper_class"]


class ForeignOp(Op):
    """A foreign op in a theano_dag graph: ``perform`` runs the foreign op on the foreign
    node it came from, through the thunk the op makes for its own Python engine
    (``make_thunk(..., impl="py")``: an op such as Scan sets itself up there, compiling
    its inner function), or for an op with only a C implementation, a foreign function
    compiled for that node alone."""

    def __init__(self, flavor, fnode):
        self.flavor = flavor
        self.fnode = fnode
        self.fop = fnode.op
        self._fn = None
        self._thunk = None

    def __str__(self):
        return f"{type(self.flavor).__name__.removesuffix('Flavor')}{{{self.fop}}}"

    __repr__ = __str__

    def make_node(self, *inputs):
        if len(inputs) != len(self.fnode.inputs):
            raise TypeError(f"{self} expects {len(self.fnode.inputs)} inputs, got {len(inputs)}")
        outs = [our_type(self.flavor, o.type)() for o in self.fnode.outputs]
        return Apply(self, list(inputs), outs)

    def perform(self, node, inputs, output_storage, params=None):
        fl, fnode = self.flavor, self.fnode
        args = [
            np.asarray(v)[()] if fl.is_scalar_type(fv.type) else v
            for v, fv in zip(inputs, fnode.inputs)
        ]
        try:
            cells = self._run_thunk(args)
        except (NotImplementedError, fl.MethodNotDefined):
            if self._fn is None:
                self._fn = _compile_single(fl, fnode)
            results = self._fn(*args)
            cells = [[r] for r in results]
        for cell, out, value in zip(output_storage, node.outputs, cells):
            dtype = getattr(out.type, "dtype", None)
            if isinstance(out.type, SparseType):  # a scipy.sparse matrix on both sides
                cell[0] = out.type.filter(value[0])
            else:
                cell[0] = np.asarray(value[0], dtype=dtype) if dtype is not None else value[0]

    def _run_thunk(self, args):
        """Run the foreign op's own Python thunk on ``args``; its output cells."""
        if self._thunk is None:
            fnode = self.fnode
            storage = {v: [None] for v in (*fnode.inputs, *fnode.outputs)}
            # The inputs are always given (a lazy thunk asks for none); outputs not yet.
            computed = {v: [v not in fnode.outputs] for v in storage}
            thunk = self.fop.make_thunk(fnode, storage, computed, [], impl="py")
            ins = [storage[v] for v in fnode.inputs]
            outs = [storage[v] for v in fnode.outputs]
            self._thunk = (thunk, ins, outs, [computed[v] for v in fnode.outputs])
        thunk, ins, outs, out_computed = self._thunk
        for cell, value in zip(ins, args):
            cell[0] = value
        for cell, done in zip(outs, out_computed):
            cell[0] = None  # a fresh result each call, never a buffer handed out before
            done[0] = False
        try:
            thunk()
            return [[cell[0]] for cell in outs]
        finally:
            for cell in ins:
                cell[0] = None


def _compile_single(fl, fnode):
    ins = [v.type() for v in fnode.inputs]
    outs = fnode.op.make_node(*ins).outputs
    return fl.function(ins, list(outs))


def foreign_wrapper_class(fl):
    """A foreign Op class whose instances run one theano_dag node's ``perform``."""
    cls = getattr(fl, "_wrapper_cls", None)
    if cls is not None:
        return cls

    def make_node(self, *inputs):
        outs = [foreign_type(fl, o.type)() for o in self.td_node.outputs]
        return fl.Apply(self, list(inputs), outs)

    def perform(self, node, inputs, output_storage, params=None):
        self.td_op.perform(self.td_node, list(inputs), output_storage)

    def init(self, td_node):
        self.td_node = td_node
        self.td_op = td_node.op

    cls = type(
        "TheanoDagOp",
        (fl.Op,),
        {
            "__init__": init,
            "make_node": make_node,
            "perform": perform,
            "__str__": lambda self: f"TheanoDag{{{self.td_op}}}",
            "__doc__": "A theano_dag op run by its own perform (it has no counterpart here).",
        },
    )
    fl._wrapper_cls = cls
    return cls
