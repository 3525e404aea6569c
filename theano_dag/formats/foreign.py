"""Conversion between theano_dag's FunctionGraphs and a foreign one (Theano's or PyTensor's).

Theano (theano-pymc) and PyTensor name their graph classes, types and ops alike, so one
walker serves both; a :class:`Flavor` says where each foreign class lives and how the
two packages differ (:mod:`~theano_dag.formats.theano_interop`,
:mod:`~theano_dag.formats.pytensor_interop`). Ops map by meaning through the rule
tables of :mod:`~theano_dag.formats.foreign_ops`; types keep their dtype and
broadcastable pattern (PyTensor's static shapes too); constants keep their values; a
foreign scalar becomes a 0-d tensor. An op with no counterpart is wrapped in an op
whose ``perform`` calls the original's ``perform`` (:class:`ForeignOp` on this side,
``TheanoDagOp`` on the other); ``strict=True`` raises :class:`NoCounterpartError`
naming it instead.
"""

from __future__ import annotations

import importlib
import inspect
import types as pytypes

import numpy as np

from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.op import Op
from theano_dag.graph.type import Generic

__all__ = ["Flavor", "ForeignOp", "NoCounterpartError", "from_foreign", "to_foreign"]


class NoCounterpartError(NotImplementedError):
    """An op that the other package has no counterpart for, converted with ``strict=True``."""


class Flavor:
    """Where a foreign package keeps what the conversion needs, and how it differs.

    Subclasses set ``package`` (the import name), ``install`` (the pip hint) and the
    dotted paths in ``paths``; :meth:`load` imports them once, as attributes.
    """

    package = ""
    install = ""
    paths: dict = {}
    scalar_modules: tuple = ()

    def __init__(self):
        self._loaded = False

    def load(self, who):
        if self._loaded:
            return self
        try:
            importlib.import_module(self.package)
        except Exception as err:  # an old package on a new numpy fails with other errors too
            raise ImportError(
                f"{who} needs {self.package}, an optional extra: {self.install} "
                f"(importing it failed: {type(err).__name__}: {err})"
            ) from err
        for attr, path in self.paths.items():
            module, _, name = path.rpartition(":")
            setattr(self, attr, getattr(importlib.import_module(module), name))
        self.scalar_mods = [importlib.import_module(m) for m in self.scalar_modules]
        self._loaded = True
        return self

    # -- types and variables -------------------------------------------------------------------

    def tensor_type(self, dtype, shape):
        """The foreign TensorType of ``dtype`` and static ``shape`` (entries None or ints)."""
        raise NotImplementedError

    def static_shape(self, ftype):
        """Our static shape of a foreign TensorType."""
        raise NotImplementedError

    def is_tensor_type(self, ftype):
        return isinstance(ftype, self.TensorType)

    def is_scalar_type(self, ftype):
        return isinstance(ftype, self.ScalarType)

    def scalar_constant(self, value, dtype):
        stype = self.get_scalar_type(dtype)
        return self.ScalarConstant(stype, np.asarray(value, dtype=dtype)[()])

    def tensor_constant(self, data, ftype, name=None):
        return self.TensorConstant(ftype, np.array(data, dtype=ftype.dtype), name=name)

    def function(self, inputs, outputs):
        return self.compile_function(inputs, outputs)

    # -- ops whose construction differs between the packages -----------------------------------

    def dimshuffle(self, x, new_order):
        raise NotImplementedError

    def reduce_axis(self, axis):
        """Our ``axis`` (None or a tuple) as the foreign reduction ops take it."""
        return axis


def _our_type(fl, ftype):
    from theano_dag import tensor as tt

    if fl.is_tensor_type(ftype):
        return tt.TensorType(ftype.dtype, shape=fl.static_shape(ftype))
    if fl.is_scalar_type(ftype):
        return tt.TensorType(ftype.dtype, shape=())
    return Generic()


def _foreign_type(fl, otype):
    from theano_dag.tensor.type import TensorType

    if isinstance(otype, TensorType):
        return fl.tensor_type(otype.dtype, otype.shape)
    return fl.generic


# -- wrapping: ops without a counterpart ----------------------------------------------------------


class ForeignOp(Op):
    """A foreign op in a theano_dag graph: ``perform`` runs the foreign op's ``perform`` on
    the foreign node it came from (or, for an op with only a C implementation, a foreign
    function compiled for that node alone)."""

    def __init__(self, flavor, fnode):
        self.flavor = flavor
        self.fnode = fnode
        self.fop = fnode.op
        self._fn = None

    def __str__(self):
        return f"{type(self.flavor).__name__.removesuffix('Flavor')}{{{self.fop}}}"

    __repr__ = __str__

    def _takes_params(self):
        # Theano passes an op with a params_type its params; PyTensor 3 no longer does
        if getattr(self.fop, "params_type", None) is None:
            return False
        sig = inspect.signature(self.fop.perform)
        return len(sig.parameters) >= 4

    def make_node(self, *inputs):
        if len(inputs) != len(self.fnode.inputs):
            raise TypeError(f"{self} expects {len(self.fnode.inputs)} inputs, got {len(inputs)}")
        outs = [_our_type(self.flavor, o.type)() for o in self.fnode.outputs]
        return Apply(self, list(inputs), outs)

    def perform(self, node, inputs, output_storage, params=None):
        fl, fnode = self.flavor, self.fnode
        args = [
            np.asarray(v)[()] if fl.is_scalar_type(fv.type) else v
            for v, fv in zip(inputs, fnode.inputs)
        ]
        cells = [[None] for _ in fnode.outputs]
        try:
            if self._takes_params():
                self.fop.perform(fnode, args, cells, self.fop.get_params(fnode))
            else:
                self.fop.perform(fnode, args, cells)
        except (NotImplementedError, fl.MethodNotDefined):
            if self._fn is None:
                self._fn = _compile_single(fl, fnode)
            results = self._fn(*args)
            cells = [[r] for r in results]
        for cell, out, value in zip(output_storage, node.outputs, cells):
            dtype = getattr(out.type, "dtype", None)
            cell[0] = np.asarray(value[0], dtype=dtype) if dtype is not None else value[0]


def _compile_single(fl, fnode):
    ins = [v.type() for v in fnode.inputs]
    outs = fnode.op.make_node(*ins).outputs
    return fl.function(ins, list(outs))


def _foreign_wrapper_class(fl):
    """A foreign Op class whose instances run one theano_dag node's ``perform``."""
    cls = getattr(fl, "_wrapper_cls", None)
    if cls is not None:
        return cls

    def make_node(self, *inputs):
        outs = [_foreign_type(fl, o.type)() for o in self.td_node.outputs]
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


# -- the walkers ----------------------------------------------------------------------------------


def _check_fgraph(graph, cls, who, what):
    if not isinstance(graph, cls):
        raise TypeError(f"{who} needs a {what} FunctionGraph, got {type(graph).__name__}")


def _cast_to(fl, var, dtype, ours):
    """``var`` cast to ``dtype`` when the two packages' upcasting rules disagree."""
    if getattr(var, "dtype", dtype) == dtype:
        return var
    if ours:
        from theano_dag.tensor.basic import cast

        return cast(var, dtype)
    return fl.Elemwise(getattr(fl.scalar_mods[0], f"convert_to_{dtype}"))(var)


def to_foreign(fgraph, flavor, strict=False, who="to_foreign"):
    """A foreign FunctionGraph computing what theano_dag's ``fgraph`` computes.

    The inputs and outputs keep their order and names. See the module docstring.
    """
    from theano_dag.formats.foreign_ops import to_rule

    fl = flavor.load(who)
    _check_fgraph(fgraph, FunctionGraph, who, "theano_dag")
    vmap = {}
    for x in fgraph.inputs:
        vmap[x] = _foreign_type(fl, x.type)(name=x.name)

    def var(v):
        if v not in vmap:
            if not isinstance(v, Constant):
                raise ValueError(f"{who}: {v} is neither an input nor computed in the graph")
            ftype = _foreign_type(fl, v.type)
            if fl.is_tensor_type(ftype):
                vmap[v] = fl.tensor_constant(v.data, ftype, name=v.name)
            else:
                vmap[v] = fl.Constant(ftype, v.data, name=v.name)
        return vmap[v]

    for node in fgraph.toposort():
        ins = [var(v) for v in node.inputs]
        if isinstance(node.op, ForeignOp) and node.op.flavor is fl:
            outs = node.op.fop(*ins, return_list=True)  # back to the op it wraps
        else:
            rule = to_rule(node.op)
            outs = rule(fl, node, ins) if rule is not None else None
        if outs is None:
            if strict:
                raise NoCounterpartError(
                    f"{who}: the theano_dag op {node.op} has no counterpart in {fl.package} "
                    "(strict=True; without it the op is wrapped and runs its own perform)"
                )
            outs = _foreign_wrapper_class(fl)(node)(*ins, return_list=True)
        for old, new in zip(node.outputs, outs):
            new = _cast_to(fl, new, getattr(old.type, "dtype", None), ours=False)
            if old.name is not None and new.name is None:
                new.name = old.name
            vmap[old] = new
    return fl.FunctionGraph(
        [vmap[x] for x in fgraph.inputs], [var(o) for o in fgraph.outputs], clone=False
    )


def from_foreign(ffgraph, flavor, strict=False, who="from_foreign"):
    """A theano_dag FunctionGraph computing what the foreign ``ffgraph`` computes."""
    from theano_dag import tensor as tt
    from theano_dag.formats.foreign_ops import from_rule

    fl = flavor.load(who)
    _check_fgraph(ffgraph, fl.FunctionGraph, who, fl.package)
    vmap = {}
    for x in ffgraph.inputs:
        vmap[x] = _our_type(fl, x.type)(x.name)

    def var(v):
        if v not in vmap:
            if not isinstance(v, fl.Constant):
                raise ValueError(f"{who}: {v} is neither an input nor computed in the graph")
            otype = _our_type(fl, v.type)
            if isinstance(otype, tt.TensorType):
                # our constants' types know only which dimensions have length 1
                data = np.array(v.data, dtype=otype.dtype)
                ctype = tt.TensorType(otype.dtype, broadcastable=[n == 1 for n in data.shape])
                vmap[v] = tt.TensorConstant(ctype, data, name=v.name)
            else:
                vmap[v] = Constant(otype, v.data, name=v.name)
        return vmap[v]

    for node in ffgraph.toposort():
        ins = [var(v) for v in node.inputs]
        if isinstance(node.op, _foreign_wrapper_class(fl)):
            outs = node.op.td_op(*ins, return_list=True)  # back to the op it wraps
        else:
            rule = from_rule(fl, node.op)
            outs = rule(fl, node, ins) if rule is not None else None
        if outs is None:
            if strict:
                raise NoCounterpartError(
                    f"{who}: the {fl.package} op {node.op} has no counterpart in theano_dag "
                    "(strict=True; without it the op is wrapped and runs its own perform)"
                )
            outs = ForeignOp(fl, node)(*ins, return_list=True)
        for old, new in zip(node.outputs, outs):
            if new is None:
                continue  # an output no rule makes: unused, or the graph would not come here
            new = _cast_to(fl, new, getattr(_our_type(fl, old.type), "dtype", None), ours=True)
            if old.name is not None and new.name is None:
                new.name = old.name
            vmap[old] = new
    return FunctionGraph(
        [vmap[x] for x in ffgraph.inputs], [var(o) for o in ffgraph.outputs], clone=False
    )


def proxy(node, op):
    """A stand-in for ``node`` with another op (a Blockwise's core op, say) for the rules."""
    return pytypes.SimpleNamespace(op=op, inputs=node.inputs, outputs=node.outputs)
