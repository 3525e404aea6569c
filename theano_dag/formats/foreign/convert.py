"""The walkers: a theano_dag FunctionGraph to a foreign one and back, node by node.

Each node goes through the op tables of :mod:`~theano_dag.formats.foreign.rules`;
a node no rule maps is wrapped (:mod:`~theano_dag.formats.foreign.wrap`), or with
``strict=True`` raises :class:`~theano_dag.formats.foreign.flavor.NoCounterpartError`.
"""

from __future__ import annotations

import numpy as np

from theano_dag.formats.foreign.flavor import NoCounterpartError, cast_to, foreign_type, our_type
from theano_dag.formats.foreign.rules import from_rule, to_rule
from theano_dag.formats.foreign.wrap import ForeignOp, foreign_wrapper_class
from theano_dag.graph.basic import Constant
from theano_dag.graph.fg import FunctionGraph
from theano_dag.sparse.type import SparseType
from theano_dag.sparse.variable import SparseConstant
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.variable import TensorConstant

__all__ = ["from_foreign", "to_foreign"]


def _check_fgraph(graph, cls, who, what):
    if not isinstance(graph, cls):
        raise TypeError(f"{who} needs a {what} FunctionGraph, got {type(graph).__name__}")


def _apply_rule(rule, fl, node, ins):
    """``(outputs, why not)``: the rule's outputs, or None and the reason when there is
    no rule or the other side's op refuses these inputs' types (PyTensor's sign of a
    bool, its rounding of an integer): the node is then wrapped like one without a
    rule."""
    if rule is None:
        return None, ""
    try:
        return rule(fl, node, ins), ""
    except TypeError as exc:
        types = ", ".join(str(getattr(v, "type", v)) for v in node.inputs)
        return None, f" for inputs of types {types} ({type(exc).__name__}: {exc})"


def to_foreign(fgraph, flavor, strict=False, who="to_foreign"):
    """A foreign FunctionGraph computing what theano_dag's ``fgraph`` computes.

    The inputs and outputs keep their order and names; see :mod:`theano_dag.formats.foreign`.
    """
    fl = flavor.load(who)
    _check_fgraph(fgraph, FunctionGraph, who, "theano_dag")
    vmap = {}
    for x in fgraph.inputs:
        vmap[x] = foreign_type(fl, x.type)(name=x.name)

    def var(v):
        if v not in vmap:
            if not isinstance(v, Constant):
                raise ValueError(f"{who}: {v} is neither an input nor computed in the graph")
            ftype = foreign_type(fl, v.type)
            if fl.is_tensor_type(ftype):
                vmap[v] = fl.tensor_constant(v.data, ftype, name=v.name)
            elif fl.is_sparse_type(ftype):
                vmap[v] = fl.SparseConstant(ftype, v.data.copy(), name=v.name)
            else:
                vmap[v] = fl.Constant(ftype, v.data, name=v.name)
        return vmap[v]

    for node in fgraph.toposort():
        ins = [var(v) for v in node.inputs]
        if isinstance(node.op, ForeignOp) and node.op.flavor is fl:
            outs = node.op.fop(*ins, return_list=True)  # back to the op it wraps
        else:
            rule = to_rule(node.op)
            outs, refused = _apply_rule(rule, fl, node, ins)
        if outs is None:
            if strict:
                raise NoCounterpartError(
                    f"{who}: the theano_dag op {node.op} has no counterpart in {fl.package}"
                    f"{refused} (strict=True; without it the op is wrapped and runs its own "
                    "perform)"
                )
            outs = foreign_wrapper_class(fl)(node)(*ins, return_list=True)
        for old, new in zip(node.outputs, outs):
            new = cast_to(fl, new, getattr(old.type, "dtype", None), ours=False)
            if old.name is not None and new.name is None:
                new.name = old.name
            vmap[old] = new
    return fl.FunctionGraph(
        [vmap[x] for x in fgraph.inputs], [var(o) for o in fgraph.outputs], clone=False
    )


def from_foreign(ffgraph, flavor, strict=False, who="from_foreign"):
    """A theano_dag FunctionGraph computing what the foreign ``ffgraph`` computes."""
    fl = flavor.load(who)
    _check_fgraph(ffgraph, fl.FunctionGraph, who, fl.package)
    vmap = {}
    for x in ffgraph.inputs:
        vmap[x] = our_type(fl, x.type, x)(x.name)

    def var(v):
        if v not in vmap:
            if not isinstance(v, fl.Constant):
                raise ValueError(f"{who}: {v} is neither an input nor computed in the graph")
            otype = our_type(fl, v.type, v)
            if isinstance(otype, SparseType):
                vmap[v] = SparseConstant(otype, v.data.copy(), name=v.name)
            elif isinstance(otype, TensorType):
                # our constants' types know only which dimensions have length 1
                data = np.array(v.data, dtype=otype.dtype)
                ctype = TensorType(otype.dtype, broadcastable=[n == 1 for n in data.shape])
                vmap[v] = TensorConstant(ctype, data, name=v.name)
            else:
                vmap[v] = Constant(otype, v.data, name=v.name)
        return vmap[v]

    for node in ffgraph.toposort():
        ins = [var(v) for v in node.inputs]
        if isinstance(node.op, foreign_wrapper_class(fl)):
            outs = node.op.td_op(*ins, return_list=True)  # back to the op it wraps
        else:
            rule = from_rule(fl, node.op)
            outs, refused = _apply_rule(rule, fl, node, ins)
        if outs is None:
            if strict:
                raise NoCounterpartError(
                    f"{who}: the {fl.package} op {node.op} has no counterpart in theano_dag"
                    f"{refused} (strict=True; without it the op is wrapped and runs its own "
                    "perform)"
                )
            outs = ForeignOp(fl, node)(*ins, return_list=True)
        for old, new in zip(node.outputs, outs):
            if new is None:
                continue  # an output no rule makes: unused, or the graph would not come here
            new = cast_to(fl, new, getattr(our_type(fl, old.type, old), "dtype", None), ours=True)
            if old.name is not None and new.name is None:
                new.name = old.name
            vmap[old] = new
    return FunctionGraph(
        [vmap[x] for x in ffgraph.inputs], [var(o) for o in ffgraph.outputs], clone=False
    )
