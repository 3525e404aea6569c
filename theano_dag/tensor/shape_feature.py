"""``ShapeFeature`` (Theano's ``tensor.opt.ShapeFeature``): a FunctionGraph feature that
keeps, for every variable of the graph, its shape as a tuple of symbolic lengths, from the
ops' ``infer_shape`` (a ``Shape_i`` of the variable where an op has none).

>>> import theano_dag.tensor as tt
>>> from theano_dag.graph.fg import FunctionGraph
>>> x = tt.dmatrix("x")
>>> y = tt.dmatrix("y")
>>> fg = FunctionGraph([x, y], [tt.exp(x) + 1, y.T], clone=False)
>>> sf = ShapeFeature()
>>> fg.attach_feature(sf)
>>> sf.same_shape(x, fg.outputs[0]), sf.same_shape(x, fg.outputs[1])
(True, False)
>>> sf.same_shape(y, fg.outputs[1], 0, 1)  # y.T: its dimension 1 is y's dimension 0
True
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Constant, Variable
from theano_dag.graph.comparison import equal_computations
from theano_dag.graph.toolbox import Feature
from theano_dag.tensor.basic import constant
from theano_dag.tensor.shape import shape_i

__all__ = ["ShapeFeature"]


def _length(value):
    """One length as a variable (infer_shape may give ints)."""
    if isinstance(value, Variable):
        return value
    return constant(np.int64(value))


class ShapeFeature(Feature):
    """``shape_of[var]``: the symbolic shape of each variable of the graph (None for a
    variable without dimensions, such as a list or a random state)."""

    def on_attach(self, fgraph):
        if hasattr(fgraph, "shape_feature"):
            raise ValueError("ShapeFeature: the graph already has one")
        fgraph.shape_feature = self
        self.shape_of: dict = {}
        for var in fgraph.inputs:
            self.init_r(var)
        for node in fgraph.toposort():
            self.on_import(fgraph, node, "on_attach")

    def on_detach(self, fgraph):
        self.shape_of = {}
        del fgraph.shape_feature

    def init_r(self, var):
        """Give ``var`` a shape of its own (``Shape_i`` of it, or constants) if it has none."""
        if var not in self.shape_of:
            ndim = getattr(var.type, "ndim", None)
            self.shape_of[var] = (
                None if ndim is None else tuple(shape_i(var, i) for i in range(ndim))
            )

    def on_import(self, fgraph, node, reason):
        for var in node.inputs:
            self.init_r(var)
        infer = getattr(node.op, "infer_shape", None)
        shapes = None
        if infer is not None:
            try:
                shapes = infer(fgraph, node, [self.shape_of[v] for v in node.inputs])
            except (NotImplementedError, TypeError, ValueError, AttributeError):
                shapes = None  # the op's shape is that of its output, asked at run time
        for k, out in enumerate(node.outputs):
            if shapes is None or shapes[k] is None or getattr(out.type, "ndim", None) is None:
                self.init_r(out)
            else:
                self.shape_of[out] = tuple(_length(s) for s in shapes[k])

    def on_change_input(self, fgraph, node, i, var, new_var, reason=None):
        self.init_r(new_var)

    def get_shape(self, var, idx):
        """The symbolic length of dimension ``idx`` of ``var``."""
        self.init_r(var)
        return self.shape_of[var][idx]

    def shape_tuple(self, var):
        """The symbolic shape of ``var``."""
        self.init_r(var)
        return self.shape_of[var]

    def same_shape(self, x, y, dim_x=None, dim_y=None) -> bool:
        """Whether ``x`` and ``y`` (or their dimensions ``dim_x`` and ``dim_y``) have lengths
        computed the same way (a True answer is certain, a False one may be a missed
        proof)."""
        sx, sy = self.shape_tuple(x), self.shape_tuple(y)
        if sx is None or sy is None:
            return False
        if dim_x is not None:
            sx = (sx[dim_x],)
        if dim_y is not None:
            sy = (sy[dim_y],)
        if len(sx) != len(sy):
            return False
        for a, b in zip(sx, sy):
            if isinstance(a, Constant) and isinstance(b, Constant):
                if not np.array_equal(a.data, b.data):
                    return False
            elif not equal_computations([a], [b]):
                return False
        return True
