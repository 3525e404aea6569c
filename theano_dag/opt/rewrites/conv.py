"""Convolution folding: a batch normalization, a bias and a relu into the convolution.

Rules of the ``conv_fold`` pass, which runs before canonicalize, on the graph as the
user's functions built it (``batch_normalization*`` and ``relu`` write these forms);
``C`` is an ``AbstractConv2d(x, W)`` output used only there, ``m``, ``s``, ``b`` are per
filter (shape ``(1, F, 1, 1)``, as ``v.dimshuffle('x', 0, 'x', 'x')``):

=========================================  ==========================================
``(C - m) * s + b``                        ``Conv2dBiasAct(x, W, b - m * s, s)``
``C * s + b``                              ``Conv2dBiasAct(x, W, b, s)``
``C + b``                                  ``Conv2dBiasAct(x, W, b)``
``0.5 * (y + abs(y))``, ``maximum(y, 0)``  ``Conv2dBiasAct(..., activation='relu')``
  with ``y = Conv2dBiasAct(...)``
=========================================  ==========================================

The first is inference batch normalization folded into the convolution: exact in real
arithmetic. The scale ``s`` stays an input of the fused node, and the engine applies
it to the filters or to the output, whichever is smaller
(``theano_dag.engines.cpu.emit.conv``): folding it into variable filters in the graph
(``W * s``) rescaled all of a network's filters at every call, 22 M floats for
InceptionV3, 12% of its time at batch 1. Filters and scale that are constants are
still folded in the graph (``Conv2dBiasAct(x, W * s, ...)``), which constant folding
then computes once. The fused node lets an engine scale, add the bias and apply the
relu to the convolution's output while it is in cache, in place.

>>> import theano_dag, numpy as np
>>> from theano_dag import tensor as tt
>>> from theano_dag.tensor import nnet
>>> x, w, b = tt.dtensor4("x"), tt.dtensor4("w"), tt.dvector("b")
>>> y = nnet.relu(nnet.conv2d(x, w) + b.dimshuffle("x", 0, "x", "x"))
>>> f = theano_dag.function([x, w, b], y)
>>> [str(n.op) for n in f.maker.fgraph.toposort()]
['Conv2dBiasAct{valid, (1, 1), True, (1, 1), 1, relu}']
"""

from __future__ import annotations

from theano_dag import scalar as ts
from theano_dag.graph.algorithms import graph_inputs
from theano_dag.graph.basic import Constant
from theano_dag.graph.rewriting.local import local_optimizer
from theano_dag.opt.rewrites.table import RULES
from theano_dag.opt.rewrites.utils import const_value, scalar_op, single_client
from theano_dag.tensor.elemwise import DimShuffle, Elemwise
from theano_dag.tensor.nnet.abstract_conv import AbstractConv2d, Conv2dBiasAct

__all__ = ["local_conv_bn_fold", "local_conv_bias", "local_conv_bias_relu"]


def _conv_of(fgraph, var):
    """The plain ``AbstractConv2d`` node computing ``var`` when nothing else reads it."""
    node = var.owner
    if node is None or type(node.op) is not AbstractConv2d or not single_client(fgraph, var):
        return None
    if node.op.unshared:  # (Conv2dBiasAct's engines have no unshared kernels)
        return None
    return node


def _per_filter(var, like):
    """``var`` as a vector over the filters when it is a ``(1, F, 1, 1)`` broadcast of
    ``like``'s dtype (else None)."""
    t = var.type
    if getattr(t, "ndim", None) != 4 or t.dtype != like.type.dtype:
        return None
    if t.shape[0] != 1 or t.shape[2] != 1 or t.shape[3] != 1:
        return None
    if t.shape[1] == 1 and like.type.shape[1] != 1:
        return None  # one value for every filter: its length would be wrong
    return _vector(var)


def _vector(var):
    """``var``, a ``(1, F, 1, 1)`` (or all-ones) broadcast, as a vector over dimension 1.

    Elementwise work on such broadcasts (a batch norm's ``gamma / sqrt(var + eps)`` on
    its DimShuffled statistics) is rebuilt on the vectors themselves: otherwise each
    convolution keeps a DimShuffle per statistic and one to take the vector back, about
    three nodes per layer that run at every call (280 of InceptionV3's 600)."""
    node = var.owner
    if node is not None and isinstance(node.op, DimShuffle):
        x = node.inputs[0]
        if tuple(node.op.new_order) == ("x", 0, "x", "x"):
            return x
        if x.type.ndim == 0:
            return x.dimshuffle("x")
    if node is not None and type(node.op) is Elemwise and len(node.outputs) == 1:
        ins = [_vector(i) for i in node.inputs]
        out = node.op(*ins)
        if out.type.dtype == var.type.dtype and out.type.ndim == 1:
            return out
    return var.dimshuffle(1)


def _split(node, scalar_cls):
    """The two inputs of a binary ``scalar_cls`` Elemwise node (else None)."""
    if not isinstance(scalar_op(node), scalar_cls) or len(node.inputs) != 2:
        return None
    return node.inputs


def _fused(conv_node, kern, bias, scale=None):
    extra = () if scale is None else (scale,)
    return Conv2dBiasAct(**conv_node.op._params())(conv_node.inputs[0], kern, bias, *extra)


def _constant(*variables):
    """Whether the variables are computed from constants alone (constant folding will
    compute them once)."""
    return all(isinstance(v, Constant) for v in graph_inputs(variables))


# nonfinite_unsafe: the shift distributed over the scale, (C - m) * s + b as
# C * s + (b - m * s), and a constant scale folded into the filters are exact for a
# finite scale; with an infinite one the written form is an infinity where the folded
# one adds opposite infinities (NaN).
@RULES.conv_fold("nonfinite_unsafe")
@local_optimizer([Elemwise], needs=[AbstractConv2d])
def local_conv_bn_fold(fgraph, node):
    """``(C - m) * s + b`` and ``C * s + b`` -> ``Conv2dBiasAct(x, W, b - m * s, s)``."""
    pair = _split(node, ts.Add)
    if pair is None:
        return None
    out = node.outputs[0]
    for prod, shift in (pair, pair[::-1]):
        if prod.owner is None or not single_client(fgraph, prod):
            continue
        factors = _split(prod.owner, ts.Mul)
        if factors is None:
            continue
        for centred, scale in (factors, factors[::-1]):
            mean = None
            conv = _conv_of(fgraph, centred)
            if conv is None and centred.owner is not None and single_client(fgraph, centred):
                diff = _split(centred.owner, ts.Sub)
                if diff is not None:
                    conv = _conv_of(fgraph, diff[0])
                    mean = diff[1]
            if conv is None:
                continue
            c = conv.outputs[0]
            s, b = _per_filter(scale, c), _per_filter(shift, c)
            m = None if mean is None else _per_filter(mean, c)
            if s is None or b is None or (mean is not None and m is None):
                continue
            bias = b if m is None else b - m * s
            kern = conv.inputs[1]
            if _constant(kern, s):
                new = _fused(conv, kern * s.dimshuffle(0, "x", "x", "x"), bias)
            else:
                new = _fused(conv, kern, bias, s)
            if new.type != out.type:
                continue
            return [new]
    return None


@RULES.conv_fold()
@local_optimizer([Elemwise], needs=[AbstractConv2d])
def local_conv_bias(fgraph, node):
    """``C + b`` -> ``Conv2dBiasAct(x, W, b)``."""
    pair = _split(node, ts.Add)
    if pair is None:
        return None
    for c, shift in (pair, pair[::-1]):
        conv = _conv_of(fgraph, c)
        b = None if conv is None else _per_filter(shift, c)
        if b is None:
            continue
        new = _fused(conv, conv.inputs[1], b)
        if new.type == node.outputs[0].type:
            return [new]
    return None


def _unfused_bias(fgraph, var, readers):
    """The ``Conv2dBiasAct`` node (no activation) computing ``var`` when only the
    ``readers`` nodes read it."""
    node = var.owner
    if node is None or type(node.op) is not Conv2dBiasAct or node.op.activation is not None:
        return None
    clients = fgraph.clients.get(var, ())
    if any(type(c) is str or c not in readers for c, _ in clients):
        return None
    return node


@RULES.conv_fold()
@local_optimizer([Elemwise], needs=[Conv2dBiasAct])
def local_conv_bias_relu(fgraph, node):
    """``0.5 * (y + abs(y))`` and ``maximum(y, 0)`` of ``y = Conv2dBiasAct(...)`` -> its
    relu form."""
    fused = None
    pair = _split(node, ts.Mul)
    if pair is not None:
        for half, total in (pair, pair[::-1]):
            if const_value(half) != 0.5 or total.owner is None:
                continue
            terms = _split(total.owner, ts.Add)
            if terms is None or not single_client(fgraph, total):
                continue
            for y, a in (terms, terms[::-1]):
                if a.owner is None or not isinstance(scalar_op(a.owner), ts.Abs):
                    continue
                if a.owner.inputs[0] is not y or not single_client(fgraph, a):
                    continue
                fused = _unfused_bias(fgraph, y, (total.owner, a.owner))
                if fused is not None:
                    break
            if fused is not None:
                break
    pair = _split(node, ts.Maximum)
    if pair is not None:
        for y, zero in (pair, pair[::-1]):
            if const_value(zero) == 0:
                fused = _unfused_bias(fgraph, y, (node,))
                if fused is not None:
                    break
    if fused is None:
        return None
    new = Conv2dBiasAct(**{**fused.op._params(), "activation": "relu"})(*fused.inputs)
    if new.type != node.outputs[0].type:
        return None
    return [new]
