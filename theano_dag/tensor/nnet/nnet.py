"""Activations, softmax and cross-entropies (``theano.tensor.nnet.nnet``).

``Softmax``/``LogSoftmax`` are Ops with numerically stable ``perform`` (the max is
subtracted before ``exp``); their gradients are the ``SoftmaxGrad`` Op and a short
tensor expression. ``CrossentropySoftmaxArgmax1HotWithBias`` is the fused
softmax + negative log-likelihood that the stabilize rewrites target: its gradient
(``CrossentropySoftmax1HotWithBiasDx``) is ``softmax - one_hot`` and never divides by
a probability. Everything simpler (relu, binary cross-entropy) is a tensor expression
whose gradient comes from the elementwise ops.
"""

from __future__ import annotations

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import grad_undefined, is_disconnected
from theano_dag.graph.op import Op
from theano_dag.scalar import binary_crossentropy as scalar_bce
from theano_dag.scalar import sigmoid_binary_crossentropy as scalar_sigmoid_bce
from theano_dag.scalar import softsign as scalar_softsign  # Theano's name
from theano_dag.scalar import upcast, upgrade_to_float
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.elemwise import _SHORT_SELECT, Elemwise, reduce_last_axis
from theano_dag.tensor.shape import checked_shape, equal_lengths, shape_padleft
from theano_dag.tensor.type import TensorType, discrete_dtypes, float_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "relu",
    "elu",
    "selu",
    "softsign",
    "sigmoid",
    "softplus",
    "Softmax",
    "SoftmaxGrad",
    "SoftmaxWithBias",
    "LogSoftmax",
    "softmax",
    "softmax_op",
    "softmax_grad",
    "softmax_graph",
    "softmax_with_bias",
    "log_softmax",
    "logsoftmax",
    "CrossentropyCategorical1Hot",
    "CrossentropyCategorical1HotGrad",
    "crossentropy_categorical_1hot",
    "crossentropy_categorical_1hot_grad",
    "CrossentropySoftmaxArgmax1HotWithBias",
    "CrossentropySoftmax1HotWithBiasDx",
    "crossentropy_softmax_argmax_1hot_with_bias",
    "crossentropy_softmax_1hot_with_bias",
    "crossentropy_softmax_1hot",
    "crossentropy_softmax_1hot_with_bias_dx",
    "categorical_crossentropy",
    "binary_crossentropy",
    "sigmoid_binary_crossentropy",
    "to_one_hot",
]

sigmoid = tm.sigmoid
softplus = tm.softplus


def _agreed(op, node, input_shapes, pairs):
    """Per pair of ``(input, dimension)`` pairs, the one length they must share (as
    ``op``'s perform checks), named by the inputs; see ``equal_lengths``."""
    out = []
    for pair in pairs:
        names = [f"{node.inputs[k]} along dimension {d}" for k, d in pair]
        lengths = [input_shapes[k][d] for k, d in pair]
        out.append(equal_lengths(lengths, str(op), names.__getitem__))
    return out


def _float_tensor(op, name, x, ndim=None):
    x = as_tensor_variable(x)
    if x.dtype not in float_dtypes:
        raise TypeError(f"{op}: argument {name} must be a float tensor, got {x.type}")
    if ndim is not None and x.ndim != ndim:
        raise TypeError(f"{op}: argument {name} must have {ndim} dimension(s), got {x.type}")
    return x


def _int_vector(op, name, x):
    x = as_tensor_variable(x)
    if x.dtype not in discrete_dtypes or x.dtype == "bool" or x.ndim != 1:
        raise TypeError(
            f"{op}: argument {name} must be an integer vector of class indices, " f"got {x.type}"
        )
    return x


class LabelOutOfRangeError(IndexError, ValueError):
    """A class index out of range: an ``IndexError``, as numpy's indexing of the written
    form (``-log(sm)[arange(n), y]``) raises for a label past the last class, and a
    ``ValueError``, as Theano's check of the labels raised."""


def _check_labels(op, idx, n_classes):
    """Labels in ``[0, n)``, as Theano's cross-entropy ops require: a label below 0 is
    refused too, where numpy's indexing would read ``-1`` as the last class (a label of
    -1 often marks an example to leave out; a loss of the last class would be silently
    wrong)."""
    if idx.size and (idx.min() < 0 or idx.max() >= n_classes):
        raise LabelOutOfRangeError(
            f"{op}: class index out of range [0, {n_classes}): " f"min {idx.min()}, max {idx.max()}"
        )


# -- activations ----------------------------------------------------------------------


def _like(x, value):
    """A Python number as a constant of ``x``'s float dtype (so float32 stays float32)."""
    if isinstance(value, (int, float)) and x.dtype in float_dtypes:
        return np.asarray(value, dtype=x.dtype)
    return value


def relu(x, alpha=0):
    """Rectified linear unit; ``alpha`` is the slope for negative inputs (leaky relu).

    Written as ``0.5 * (x + |x|)`` (Theano's form: one elementwise kernel forward and
    backward).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> relu(x).eval({x: np.array([-2.0, 0.0, 3.0])})
    array([0., 0., 3.])
    >>> relu(x, alpha=0.1).eval({x: np.array([-2.0, 3.0])})
    array([-0.2,  3. ])
    """
    if getattr(x, "dtype", None) == "bool":
        x = x.astype("int8")  # bool + bool is a logical or: relu(True) would be 0.5
    if str(getattr(x, "dtype", "")) in discrete_dtypes:
        # x + |x| wraps in an integer dtype (int8 64 + 64 is -128: relu gave -64), so x
        # is cast first to the float dtype the result has anyway.
        x = x.astype((0.5 * x).dtype)
    if isinstance(alpha, (int, float)) and alpha == 0:
        # Theano's arithmetic on x as given: a numpy array gives an array (Lasagne's
        # rectify is called on both).
        return 0.5 * (x + abs(x))
    x = as_tensor_variable(x)
    if isinstance(alpha, (int, float)) and x.dtype in float_dtypes:
        # A Python slope takes x's dtype, so a float32 network stays float32.
        f1 = np.asarray(0.5 * (1 + alpha), dtype=x.dtype)
        f2 = np.asarray(0.5 * (1 - alpha), dtype=x.dtype)
    else:
        alpha = as_tensor_variable(alpha)  # may be a learnable (shared) slope
        f1 = 0.5 * (1 + alpha)
        f2 = 0.5 * (1 - alpha)
    return f1 * x + f2 * abs(x)


def elu(x, alpha=1):
    """Exponential linear unit: ``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> elu(x).eval({x: np.array([0.0, 2.0])})
    array([0., 2.])
    """
    x = as_tensor_variable(x)
    if x.dtype in discrete_dtypes:
        # expm1 of an integer is taken in the float that holds it (float32 for int8); a
        # slope float32 cannot hold makes the product float64, with float32's digits
        # (selu of an int8 -1 was 5e-8 off): x is cast to the product's dtype first
        x = tb.cast(x, (_like(x, alpha) * tm.expm1(x)).dtype)
    # expm1 of min(x, 0): the branch not taken stays finite, so that its gradient, which
    # the switch multiplies by 0, is not exp(x) = inf (0 * inf is NaN past x = 709
    # wherever the rewrites that sink the switch do not run)
    neg = tm.minimum(x, _like(x, 0))
    return tm.switch(x > 0, x, _like(x, alpha) * tm.expm1(neg))


def selu(x):
    """Scaled exponential linear unit (Klambauer et al. 2017).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> round(float(selu(x).eval({x: np.array([1.0])})[0]), 4)
    1.0507
    """
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    x = as_tensor_variable(x)
    return _like(x, scale) * elu(x, alpha)


_softsign = Elemwise(scalar_softsign, name="softsign")


def softsign(x):
    """``x / (1 + |x|)``, one elementwise op (Theano's ``scalar_softsign``): +-1 at
    +-inf, where the quotient is inf / inf, and a derivative ``1 / (1 + |x|)**2`` that
    is finite wherever it is representable.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> softsign(x).eval({x: np.array([1.0, -3.0, np.inf])})
    array([ 0.5 , -0.75,  1.  ])
    """
    x = as_tensor_variable(x)
    if x.dtype in discrete_dtypes:
        # Theano's softsign upgrades integers to the float that holds them (int32 to
        # float64); int / int would be floatX.
        x = tb.cast(x, upgrade_to_float(x.dtype)[0])
    return _softsign(x)


# -- softmax --------------------------------------------------------------------------


def _reduce_keep(ufunc, x, axis):
    """``ufunc.reduce(x, axis=axis, keepdims=True)``; by columns over a short last axis
    (numpy's row-by-row reduction of a (500, 2) took most of a softmax's time)."""
    if axis % x.ndim == x.ndim - 1:
        return reduce_last_axis(ufunc, x, keepdims=True)
    return ufunc.reduce(x, axis=axis, keepdims=True)


def _minus_max(x, axis):
    """``x - max(x, axis)``, 0 where ``x`` is a maximum of +inf: ``inf - inf`` would be
    NaN, and the softmax's limit there puts the whole mass on the infinite entries
    (shared equally between them)."""
    if x.size == 0:  # (lanes of no values have no max: an empty result, as numpy's)
        return np.array(x, copy=True)
    m = _reduce_keep(np.maximum, x, axis)
    if np.inf not in m:  # the common case: one pass, as before (one C call to test)
        return x - m
    top = m == np.inf
    with np.errstate(invalid="ignore"):
        return np.where(top & (x == m), 0, x - m)


def _short_rows(x, axis):
    """``x`` with its short last axis first, a C-contiguous ``(n, rows)`` copy, when
    ``axis`` is that axis; None otherwise. The softmaxes then reduce and broadcast along
    long rows: numpy loops over a trailing axis of 2 one row at a time (most of the 40 us
    of a (500, 2) softmax). Its max is numpy's there (_SHORT_SELECT), and its sums, of
    values that are not negative, are numpy's sums from 0."""
    if x.ndim < 2 or axis % x.ndim != x.ndim - 1 or not x.flags.c_contiguous:
        return None
    n = x.shape[-1]
    if not 1 <= n <= _SHORT_SELECT:
        return None
    return np.ascontiguousarray(x.reshape(-1, n).T)


def _rows_back(t, x):
    """The ``(n, rows)`` result ``t`` of :func:`_short_rows` in ``x``'s shape, C-contiguous."""
    return np.ascontiguousarray(t.T).reshape(x.shape)


def _np_softmax(x, axis):
    t = _short_rows(x, axis)
    if t is not None:
        return _rows_back(_np_softmax(t, 0), x)
    e = np.exp(_minus_max(x, axis))
    e /= _reduce_keep(np.add, e, axis)
    return e


def _np_log_softmax(x, axis):
    if x.size == 0:  # (the log of the empty lanes' zero sums would warn)
        return np.array(x, copy=True)
    t = _short_rows(x, axis)
    if t is not None:
        return _rows_back(_np_log_softmax(t, 0), x)
    z = _minus_max(x, axis)
    z -= np.log(_reduce_keep(np.add, np.exp(z), axis))
    return z


class _AxisOp(Op):
    __props__ = ("axis",)

    def __init__(self, axis=-1):
        if not isinstance(axis, (int, np.integer)):
            raise TypeError(f"{type(self).__name__}: axis must be an int, got {axis!r}")
        self.axis = int(axis)

    def __str__(self):
        return f"{type(self).__name__}{{axis={self.axis}}}"

    __repr__ = __str__

    def _check_axis(self, x):
        if not -x.ndim <= self.axis < x.ndim:
            raise TypeError(
                f"{self}: axis {self.axis} is out of range for an input of "
                f"{x.ndim} dimension(s)"
            )


class Softmax(_AxisOp):
    """``exp(x) / sum(exp(x))`` along ``axis``, computed stably (max subtracted first).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> Softmax(axis=-1)(x).eval({x: np.array([[0.0, 0.0], [1000.0, 1000.0]])})
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """

    def make_node(self, x):
        x = _float_tensor(self, "x", x)
        if x.ndim == 0:
            raise TypeError(f"{self}: argument x must have at least 1 dimension, got a scalar")
        self._check_axis(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = _np_softmax(inputs[0], self.axis)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        return [SoftmaxGrad(self.axis)(output_grads[0], outputs[0])]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return self.L_op(inputs, [self(*inputs)], eval_points)


class SoftmaxGrad(_AxisOp):
    """Gradient of softmax: ``(dy - sum(dy * sm, axis)) * sm`` for inputs ``(dy, sm)``.

    >>> from theano_dag import tensor as tt
    >>> SoftmaxGrad(-1)(tt.dmatrix("dy"), tt.dmatrix("sm")).owner.op
    SoftmaxGrad{axis=-1}
    """

    def make_node(self, dy, sm):
        dy = _float_tensor(self, "dy", dy)
        sm = _float_tensor(self, "sm", sm)
        if dy.ndim != sm.ndim:
            raise TypeError(
                f"{self}: dy and sm must have the same number of dimensions, got "
                f"{dy.ndim} and {sm.ndim}"
            )
        self._check_axis(sm)
        out = TensorType(upcast(dy.dtype, sm.dtype), shape=sm.type.shape)
        return Apply(self, [dy, sm], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        dy, sm = inputs
        if dy.shape != sm.shape:
            raise ValueError(f"{self}: dy {dy.shape} and sm {sm.shape} differ in shape")
        dx = dy * sm
        dx -= sm * _reduce_keep(np.add, dx, self.axis)
        output_storage[0][0] = np.asarray(dx, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        # sm's shape and dy's agree, as perform checks
        pairs = [((1, d), (0, d)) for d in range(node.inputs[1].ndim)]
        return [tuple(_agreed(self, node, input_shapes, pairs))]

    def L_op(self, inputs, outputs, output_grads):
        dy, sm = inputs
        (g,) = output_grads
        s = tm.sum(dy * sm, axis=self.axis, keepdims=True)
        gs = tm.sum(g * sm, axis=self.axis, keepdims=True)
        return [self(g, sm), g * dy - g * s - gs * dy]


class LogSoftmax(_AxisOp):
    """``x - log(sum(exp(x)))`` along ``axis``, computed stably.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> LogSoftmax()(x).eval({x: np.array([1000.0, 1000.0])})
    array([-0.69314718, -0.69314718])
    """

    def make_node(self, x):
        x = _float_tensor(self, "x", x)
        if x.ndim == 0:
            raise TypeError(f"{self}: argument x must have at least 1 dimension, got a scalar")
        self._check_axis(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = _np_log_softmax(inputs[0], self.axis)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        (g,) = output_grads
        return [g - tm.exp(outputs[0]) * tm.sum(g, axis=self.axis, keepdims=True)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        ev = eval_points[0]
        sm = tm.exp(self(*inputs))
        return [ev - tm.sum(ev * sm, axis=self.axis, keepdims=True)]


softmax_op = Softmax(axis=-1)
logsoftmax_op = LogSoftmax(axis=-1)


def _norm_axis(x, axis, who):
    """``axis`` of ``x`` as the ops carry it: ``-1`` for the last axis (so that a softmax
    over a matrix's rows is Theano's ``softmax_op`` however it was built, and merges
    with it), the non-negative index otherwise."""
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{who}: axis must be an int, got {axis!r}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(
            f"{who}: axis {axis} is out of range for an input of {x.ndim} " "dimension(s)"
        )
    axis = int(axis) % x.ndim
    return -1 if axis == x.ndim - 1 else axis


def _theano_rows(c, axis):
    """``c`` and the axis of a softmax called with ``axis`` (None: Theano's call, with no
    axis). Theano's ``softmax(v)`` of a vector ``v`` is the softmax of the one row
    ``v[None, :]``, a ``(1, n)`` matrix, and its programs index it so (``s[:, 0, :]`` in
    its tutorials' recurrent network); ``axis=-1`` gives a vector, as PyTensor's."""
    if axis is None:
        if c.ndim == 1:
            c = shape_padleft(c)
        axis = -1
    return c, axis


def softmax(c, axis=None):
    """Softmax of ``c`` along ``axis`` (the last one by default), as one ``Softmax`` node.
    With no ``axis``, a vector is one row, as in Theano: the result is a ``(1, n)``
    matrix (``axis=-1`` keeps a vector).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> softmax(x).eval({x: np.log(np.array([[1.0, 3.0]]))})
    array([[0.25, 0.75]])
    >>> v = tt.dvector("v")
    >>> softmax(v).ndim, softmax(v, axis=-1).ndim
    (2, 1)
    """
    c, axis = _theano_rows(as_tensor_variable(c), axis)
    axis = _norm_axis(c, axis, "softmax")
    return Softmax(axis)(c)


def log_softmax(c, axis=None):
    """Log of the softmax of ``c`` along ``axis``, as one stable ``LogSoftmax`` node
    (a vector with no ``axis``: one row, as :func:`softmax`).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> np.exp(log_softmax(x).eval({x: np.log(np.array([[1.0, 3.0]]))}))
    array([[0.25, 0.75]])
    """
    c, axis = _theano_rows(as_tensor_variable(c), axis)
    axis = _norm_axis(c, axis, "log_softmax")
    return LogSoftmax(axis)(c)


logsoftmax = log_softmax


def softmax_grad(dy, sm, axis=-1):
    """The ``SoftmaxGrad`` node for output gradient ``dy`` and softmax output ``sm``:
    ``(dy - sum(dy * sm, axis)) * sm``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> dy, sm = tt.dmatrix("dy"), tt.dmatrix("sm")
    >>> softmax_grad(dy, sm).eval({dy: np.array([[1.0, 0.0]]), sm: np.array([[0.25, 0.75]])})
    array([[ 0.1875, -0.1875]])
    """
    sm = as_tensor_variable(sm)
    return SoftmaxGrad(_norm_axis(sm, axis, "softmax_grad"))(dy, sm)


def softmax_graph(c, axis=-1):
    """Softmax written out as ``exp(c) / sum(exp(c))`` (what the rewrites recognise).

    >>> from theano_dag import tensor as tt
    >>> softmax_graph(tt.dmatrix("x")).owner.op.scalar_op.name
    'true_div'
    """
    e = tm.exp(as_tensor_variable(c))
    return e / tm.sum(e, axis=axis, keepdims=True)


def softmax_with_bias(x, b):
    """``softmax(x + b)`` for a matrix ``x`` and a bias vector ``b`` (rows of x).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, b = tt.dmatrix("x"), tt.dvector("b")
    >>> softmax_with_bias(x, b).eval({x: np.zeros((1, 2)), b: np.log([1.0, 3.0])})
    array([[0.25, 0.75]])
    """
    x = _float_tensor("softmax_with_bias", "x", x, 2)
    b = _float_tensor("softmax_with_bias", "b", b, 1)
    return softmax(x + b.dimshuffle("x", 0))


class SoftmaxWithBias(Op):
    """``softmax(x + b)`` for a matrix ``x`` and a bias vector ``b`` added to each row, as
    one node (Theano's op; ``softmax_with_bias`` builds ``softmax(x + b)`` instead, the
    form the cross-entropy rewrites recognise).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, b = tt.dmatrix("x"), tt.dvector("b")
    >>> SoftmaxWithBias()(x, b).eval({x: np.zeros((1, 2)), b: np.log([1.0, 3.0])})
    array([[0.25, 0.75]])
    """

    __props__ = ()

    def make_node(self, x, b):
        x = _float_tensor(self, "x", x, 2)
        b = _float_tensor(self, "b", b, 1)
        out = TensorType(upcast(x.dtype, b.dtype), shape=x.type.shape)
        return Apply(self, [x, b], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        x, b = inputs
        if b.shape[0] != x.shape[1]:
            raise ValueError(f"{self}: x has {x.shape[1]} columns but b has {b.shape[0]} entries")
        z = (x + b).astype(node.outputs[0].dtype, copy=False)
        output_storage[0][0] = _np_softmax(z, 1)

    def infer_shape(self, fgraph, node, input_shapes):
        (cols,) = _agreed(self, node, input_shapes, [((0, 1), (1, 0))])
        return [(input_shapes[0][0], cols)]

    def L_op(self, inputs, outputs, output_grads):
        x, b = inputs
        dx = SoftmaxGrad(-1)(output_grads[0], outputs[0])
        return [tb.cast(dx, x.dtype), tb.cast(tm.sum(dx, axis=0), b.dtype)]


# -- one-hot cross-entropies ----------------------------------------------------------


def _one_hot_mask(idx, n, dtype):
    """``mask[i, j] = (j == idx[i])`` as ``dtype``, built from elementwise ops so that it
    differentiates and fuses like any other expression."""
    cols = tb.arange(n).dimshuffle("x", 0)
    return tb.cast(tm.eq(cols, idx.dimshuffle(0, "x")), dtype)


def to_one_hot(y, nb_class, dtype=None):
    """A one-hot matrix from an integer vector of class indices.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> y = tt.lvector("y")
    >>> to_one_hot(y, 3).eval({y: np.array([2, 0])})
    array([[0., 0., 1.],
           [1., 0., 0.]])
    """
    y = _int_vector("to_one_hot", "y", y)
    return _one_hot_mask(y, nb_class, dtype or config.floatX)


class CrossentropyCategorical1Hot(Op):
    """``-log(coding_dist[i, true_one_of_n[i]])`` for each row ``i``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> p, y = tt.dmatrix("p"), tt.lvector("y")
    >>> crossentropy_categorical_1hot(p, y).eval({p: np.array([[0.5, 0.5], [0.1, 0.9]]),
    ...                                           y: np.array([0, 1])}).round(4)
    array([0.6931, 0.1054])
    """

    __props__ = ()

    def make_node(self, coding_dist, true_one_of_n):
        c = _float_tensor(self, "coding_dist", coding_dist, 2)
        y = _int_vector(self, "true_one_of_n", true_one_of_n)
        return Apply(self, [c, y], [TensorType(c.dtype, shape=(c.type.shape[0],))()])

    def perform(self, node, inputs, output_storage, params=None):
        c, y = inputs
        if c.shape[0] != y.shape[0]:
            raise ValueError(
                f"{self}: coding_dist has {c.shape[0]} rows but true_one_of_n "
                f"has {y.shape[0]} entries"
            )
        _check_labels(self, y, c.shape[1])
        output_storage[0][0] = -np.log(c[np.arange(len(y)), y])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(_agreed(self, node, input_shapes, [((0, 0), (1, 0))]))]

    def L_op(self, inputs, outputs, output_grads):
        c, y = inputs
        return [
            crossentropy_categorical_1hot_grad(output_grads[0], c, y),
            grad_undefined(self, 1, y, "class indices are discrete"),
        ]


class CrossentropyCategorical1HotGrad(Op):
    """Gradient of ``CrossentropyCategorical1Hot`` with respect to ``coding_dist``:
    ``-g[i] / coding_dist[i, y[i]]`` at ``(i, y[i])``, zero elsewhere."""

    __props__ = ()

    def make_node(self, g_y, coding_dist, true_one_of_n):
        g = _float_tensor(self, "g_y", g_y, 1)
        c = _float_tensor(self, "coding_dist", coding_dist, 2)
        y = _int_vector(self, "true_one_of_n", true_one_of_n)
        out = TensorType(upcast(g.dtype, c.dtype), shape=c.type.shape)
        return Apply(self, [g, c, y], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        g, c, y = inputs
        _check_labels(self, y, c.shape[1])
        out = np.zeros(c.shape, dtype=node.outputs[0].dtype)
        rows = np.arange(len(y))
        out[rows, y] = -g / c[rows, y]
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[1]]

    def L_op(self, inputs, outputs, output_grads):
        g, c, y = inputs
        (gg,) = output_grads
        mask = _one_hot_mask(y, tb.shape_i(c, 1), c.dtype)
        picked_c = tm.sum(c * mask, axis=1)
        picked_gg = tm.sum(gg * mask, axis=1)
        d_g = -picked_gg / picked_c
        d_c = mask * (picked_gg * g / tm.sqr(picked_c)).dimshuffle(0, "x")
        return [d_g, d_c, grad_undefined(self, 2, y, "class indices are discrete")]


crossentropy_categorical_1hot = CrossentropyCategorical1Hot()
crossentropy_categorical_1hot_grad = CrossentropyCategorical1HotGrad()


class CrossentropySoftmaxArgmax1HotWithBias(Op):
    """Fused ``sm = softmax(x + b)``, ``nll[i] = -log(sm[i, y_idx[i]])``, ``am = argmax``.

    Outputs ``(nll, sm, am)``. The negative log-likelihood is computed from the
    log-softmax, so it stays finite where ``softmax`` underflows to 0.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, b, y = tt.dmatrix("x"), tt.dvector("b"), tt.lvector("y")
    >>> nll, sm, am = crossentropy_softmax_argmax_1hot_with_bias(x, b, y)
    >>> nll.eval({x: np.array([[0.0, 800.0]]), b: np.zeros(2), y: np.array([0])})
    array([800.])
    """

    __props__ = ()

    def make_node(self, x, b, y_idx):
        x = _float_tensor(self, "x", x, 2)
        b = _float_tensor(self, "b", b, 1)
        y = _int_vector(self, "y_idx", y_idx)
        if (
            x.type.shape[1] is not None
            and b.type.shape[0] is not None
            and x.type.shape[1] != b.type.shape[0]
        ):
            raise ValueError(
                f"{self}: x has {x.type.shape[1]} columns but b has " f"{b.type.shape[0]} entries"
            )
        dtype = upcast(x.dtype, b.dtype)
        rows = x.type.shape[0]
        return Apply(
            self,
            [x, b, y],
            [
                TensorType(dtype, shape=(rows,))(),
                TensorType(dtype, shape=x.type.shape)(),
                TensorType(y.dtype, shape=(rows,))(),
            ],
        )

    def perform(self, node, inputs, output_storage, params=None):
        x, b, y = inputs
        if b.shape[0] != x.shape[1]:
            raise ValueError(
                f"{self}: x has {x.shape[1]} columns but b has {b.shape[0]} " "entries"
            )
        if y.shape[0] != x.shape[0]:
            raise ValueError(
                f"{self}: x has {x.shape[0]} rows but y_idx has {y.shape[0]} " "entries"
            )
        _check_labels(self, y, x.shape[1])
        dtype = node.outputs[0].dtype
        z = _minus_max((x + b).astype(dtype, copy=False), 1)
        log_norm = np.log(np.exp(z).sum(axis=1, keepdims=True))
        rows = np.arange(len(y))
        output_storage[0][0] = np.asarray(log_norm[:, 0] - z[rows, y], dtype=dtype)
        output_storage[1][0] = np.asarray(np.exp(z - log_norm), dtype=dtype)
        # (no rows, no classes: numpy's argmax of the (0, 0) raises)
        am = np.argmax(z, axis=1) if z.size else np.zeros(len(z), dtype=np.int64)
        output_storage[2][0] = np.asarray(am, dtype=node.outputs[2].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        # x's columns b's length, x's rows y_idx's, as perform checks (the columns'
        # check guards the rows of the outputs without columns)
        rows, cols = _agreed(self, node, input_shapes, [((0, 0), (2, 0)), ((0, 1), (1, 0))])
        names = (f"{node.inputs[0]} along dimension 1", f"{node.inputs[1]} along dimension 0")
        lengths = [input_shapes[0][1], input_shapes[1][0]]
        (checked,) = checked_shape((rows,), lengths, str(self), names)
        return [(checked,), (rows, cols), (checked,)]

    def connection_pattern(self, node):
        return [[True, True, False], [True, True, False], [True, False, False]]

    def L_op(self, inputs, outputs, output_grads):
        x, b, y = inputs
        g_nll, g_sm, _ = output_grads
        sm = outputs[1]
        terms = []
        if not is_disconnected(g_nll):
            terms.append(crossentropy_softmax_1hot_with_bias_dx(g_nll, sm, y))
        if not is_disconnected(g_sm):
            terms.append(SoftmaxGrad(-1)(g_sm, sm))
        dx = tm.add(*terms) if len(terms) > 1 else terms[0] if terms else tb.zeros_like(x)
        db = tm.sum(dx, axis=0)
        # The class indices reach only nll: no gradient flows to them through sm.
        g_y = (
            tb.disconnected()
            if is_disconnected(g_nll)
            else grad_undefined(self, 2, y, "class indices are discrete")
        )
        return [tb.cast(dx, x.dtype), tb.cast(db, b.dtype), g_y]


class CrossentropySoftmax1HotWithBiasDx(Op):
    """Gradient of the fused cross-entropy: ``dy[i] * (sm[i] - one_hot(y_idx[i]))``; a
    broadcastable ``dy`` of length 1 is the same for every row (as in Theano).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> dy, sm, y = tt.TensorType("float64", shape=(1,))("dy"), tt.dmatrix("sm"), tt.lvector("y")
    >>> dx = crossentropy_softmax_1hot_with_bias_dx(dy, sm, y)
    >>> dx.eval({dy: np.array([2.0]), sm: np.full((2, 2), 0.5), y: np.array([0, 1])})
    array([[-1.,  1.],
           [ 1., -1.]])
    """

    __props__ = ()

    def make_node(self, dy, sm, y_idx):
        dy = _float_tensor(self, "dy", dy, 1)
        sm = _float_tensor(self, "sm", sm, 2)
        y = _int_vector(self, "y_idx", y_idx)
        out = TensorType(upcast(dy.dtype, sm.dtype), shape=sm.type.shape)
        return Apply(self, [dy, sm, y], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        dy, sm, y = inputs
        shared = node.inputs[0].type.broadcastable[0] and dy.shape[0] == 1
        if (dy.shape[0] != sm.shape[0] and not shared) or y.shape[0] != sm.shape[0]:
            raise ValueError(
                f"{self}: dy {dy.shape}, sm {sm.shape} and y_idx {y.shape} do "
                "not agree on the number of rows"
            )
        _check_labels(self, y, sm.shape[1])
        dx = np.asarray(sm * dy[:, None], dtype=node.outputs[0].dtype)
        dx[np.arange(len(y)), y] -= dy
        output_storage[0][0] = dx

    def infer_shape(self, fgraph, node, input_shapes):
        # sm's rows y_idx's, and dy's unless it is one row declared broadcastable
        rows = [(1, 0), (2, 0)] + ([] if node.inputs[0].type.broadcastable[0] else [(0, 0)])
        (n,) = _agreed(self, node, input_shapes, [tuple(rows)])
        return [(n, input_shapes[1][1])]

    def L_op(self, inputs, outputs, output_grads):
        dy, sm, y = inputs
        (g,) = output_grads
        mask = _one_hot_mask(y, tb.shape_i(sm, 1), sm.dtype)
        d_dy = tm.sum(g * (sm - mask), axis=1)
        if dy.type.broadcastable[0]:  # one dy for every row: its gradient is their sum
            d_dy = tm.sum(d_dy, keepdims=True)
        d_sm = g * dy.dimshuffle(0, "x")
        return [
            tb.cast(d_dy, dy.dtype),
            tb.cast(d_sm, sm.dtype),
            grad_undefined(self, 2, y, "class indices are discrete"),
        ]


crossentropy_softmax_argmax_1hot_with_bias = CrossentropySoftmaxArgmax1HotWithBias()
crossentropy_softmax_1hot_with_bias_dx = CrossentropySoftmax1HotWithBiasDx()


def crossentropy_softmax_1hot_with_bias(x, b, y_idx):
    """``(nll, softmax(x + b))`` from the fused op (Theano's helper).

    >>> from theano_dag import tensor as tt
    >>> nll, sm = crossentropy_softmax_1hot_with_bias(tt.dmatrix(), tt.dvector(), tt.lvector())
    >>> nll.owner.op
    CrossentropySoftmaxArgmax1HotWithBias
    """
    return crossentropy_softmax_argmax_1hot_with_bias(x, b, y_idx)[:2]


def crossentropy_softmax_1hot(x, y_idx):
    """``(nll, softmax(x))`` with a zero bias, from the fused op.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, y = tt.dmatrix("x"), tt.lvector("y")
    >>> nll, sm = crossentropy_softmax_1hot(x, y)
    >>> nll.eval({x: np.log(np.array([[1.0, 3.0]])), y: np.array([1])}).round(4)
    array([0.2877])
    """
    x = _float_tensor("crossentropy_softmax_1hot", "x", x, 2)
    b = tb.zeros((tb.Shape_i(1)(x),), dtype=x.dtype)  # (not zeros_like(x[0]): x may have no rows)
    return crossentropy_softmax_1hot_with_bias(x, b, y_idx)


def categorical_crossentropy(coding_dist, true_dist):
    """Cross-entropy between predicted rows ``coding_dist`` and targets ``true_dist``.

    ``true_dist`` is either a distribution per row (same rank: ``-sum(t * log(p))``) or
    an integer vector of class indices (one rank less: ``-log(p[i, t[i]])``).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> p, t = tt.dmatrix("p"), tt.dmatrix("t")
    >>> categorical_crossentropy(p, t).eval({p: np.array([[0.5, 0.5]]),
    ...                                      t: np.array([[1.0, 0.0]])}).round(4)
    array([0.6931])
    """
    coding_dist = as_tensor_variable(coding_dist)
    true_dist = as_tensor_variable(true_dist)
    if true_dist.ndim == coding_dist.ndim:
        return -tm.sum(true_dist * tm.log(coding_dist), axis=coding_dist.ndim - 1)
    if true_dist.ndim == coding_dist.ndim - 1:
        return crossentropy_categorical_1hot(coding_dist, true_dist)
    raise TypeError(
        f"categorical_crossentropy: rank mismatch between coding_dist "
        f"({coding_dist.ndim} dimensions) and true_dist ({true_dist.ndim}); "
        "expected the same rank or one less (class indices)"
    )


_bce = Elemwise(scalar_bce, name="binary_crossentropy")


def binary_crossentropy(output, target):
    """Elementwise ``-(t * log(o) + (1 - t) * log(1 - o))`` for probabilities ``o``, a
    term of weight 0 taking no part (0 at ``o = t = 0``, not ``0 * -inf``), with its
    derivative in ``o`` by the same rule (:class:`theano_dag.scalar.BinaryCrossentropy`;
    of a sigmoid, the stabilize rewrites make it :func:`sigmoid_binary_crossentropy`).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> o, t = tt.dvector("o"), tt.dvector("t")
    >>> binary_crossentropy(o, t).eval({o: np.array([0.5, 0.9]),
    ...                                 t: np.array([1.0, 1.0])}).round(4)
    array([0.6931, 0.1054])
    """
    return _bce(output, target)


_sigmoid_bce = Elemwise(scalar_sigmoid_bce, name="sigmoid_binary_crossentropy")


def sigmoid_binary_crossentropy(output, target):
    """``binary_crossentropy(sigmoid(output), target)`` computed stably from logits:
    finite for finite ``output``, 0 where the target's own term is 0 (``output = -inf``
    for ``target = 0``), and the gradients ``sigmoid(output) - target`` and ``-output``
    (:class:`theano_dag.scalar.SigmoidBinaryCrossentropy`).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> o, t = tt.dvector("o"), tt.dvector("t")
    >>> sigmoid_binary_crossentropy(o, t).eval({o: np.array([-800.0]),
    ...                                         t: np.array([1.0])})
    array([800.])
    """
    return _sigmoid_bce(output, target)
