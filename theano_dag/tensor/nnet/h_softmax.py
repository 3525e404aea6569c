"""Two-level hierarchical softmax (Theano's ``h_softmax``): the outputs are split into
``n_classes`` classes of ``n_outputs_per_class``; the probability of an output is the
probability of its class times its probability within the class.

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> x = tt.dmatrix("x")
>>> W1, b1 = np.zeros((3, 2)), np.zeros(2)
>>> W2, b2 = np.zeros((2, 3, 2)), np.zeros((2, 2))
>>> h_softmax(x, 1, 4, 2, 2, W1, b1, W2, b2).eval({x: np.ones((1, 3))})
array([[0.25, 0.25, 0.25, 0.25]])
"""

from __future__ import annotations

from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.contractions import batched_dot, tensordot
from theano_dag.tensor.nnet.nnet import softmax
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["h_softmax"]


def h_softmax(
    x, batch_size, n_outputs, n_classes, n_outputs_per_class, W1, b1, W2, b2, target=None
):  # noqa: N803 (Theano's parameter names)
    """Hierarchical softmax of ``x`` (``batch_size`` rows of features).

    ``W1`` (features x n_classes) and ``b1`` (n_classes) give the class probabilities;
    ``W2`` (n_classes x features x n_outputs_per_class) and ``b2`` (n_classes x
    n_outputs_per_class) the probabilities within each class. Without ``target``: a
    ``batch_size x n_outputs`` matrix of all output probabilities (the first
    ``n_outputs`` of ``n_classes * n_outputs_per_class``); with an integer vector
    ``target``: the vector of each row's probability of its target, computing only the
    target's class.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, y = tt.dmatrix("x"), tt.ivector("y")
    >>> W1, b1 = np.zeros((3, 2)), np.zeros(2)
    >>> W2, b2 = np.zeros((2, 3, 2)), np.zeros((2, 2))
    >>> p = h_softmax(x, 2, 4, 2, 2, W1, b1, W2, b2, y)
    >>> p.eval({x: np.ones((2, 3)), y: np.array([0, 3], dtype="int32")})
    array([0.25, 0.25])
    """
    x = as_tensor_variable(x)
    W1, b1, W2, b2 = (as_tensor_variable(v) for v in (W1, b1, W2, b2))
    class_probs = softmax(tm.dot(x, W1) + b1)  # batch x n_classes
    if target is None:
        # All classes: (batch, n_classes, per_class) activations, softmax per class.
        act = tensordot(x, W2, axes=[[1], [1]]) + b2
        within = softmax(act.reshape((batch_size * n_classes, n_outputs_per_class)))
        within = within.reshape((batch_size, n_classes, n_outputs_per_class))
        probs = class_probs.dimshuffle(0, 1, "x") * within
        probs = probs.reshape((batch_size, n_classes * n_outputs_per_class))
        return probs[:, :n_outputs]
    target = as_tensor_variable(target)
    cls = target // n_outputs_per_class
    pos = target % n_outputs_per_class
    rows = tb.arange(batch_size)
    act = batched_dot(x, W2[cls]) + b2[cls]  # batch x per_class
    within = softmax(act)
    return class_probs[rows, cls] * within[rows, pos]
