"""The confusion matrix of two label vectors (Theano's ``confusion_matrix``).

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> a, p = tt.dvector("a"), tt.dvector("p")
>>> conf, order = confusion_matrix(a, p)
>>> conf.eval({a: np.array([0.0, 1.0, 1.0]), p: np.array([0.0, 0.0, 1.0])})
array([[1, 0],
       [1, 1]])
"""

from __future__ import annotations

from theano_dag.tensor import basic as tb
from theano_dag.tensor import extra_ops  # a module: extra_ops imports nnet (to_one_hot)
from theano_dag.tensor import math as tm
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["confusion_matrix"]


def confusion_matrix(actual, pred):
    """``[conf, order]``: ``order`` the sorted labels seen in ``actual`` or ``pred``,
    ``conf[i, j]`` the number of positions with actual label ``order[i]`` and predicted
    label ``order[j]`` (int64).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a, p = tt.ivector("a"), tt.ivector("p")
    >>> conf, order = confusion_matrix(a, p)
    >>> order.eval({a: np.array([3, 1], dtype="int32"), p: np.array([1, 1], dtype="int32")})
    array([1, 3], dtype=int32)
    """
    actual, pred = as_tensor_variable(actual), as_tensor_variable(pred)
    if actual.ndim != 1 or pred.ndim != 1:
        raise ValueError("confusion_matrix: actual and pred must be vectors")
    order = extra_ops.unique(tb.concatenate([actual, pred]))
    one_hot_actual = tb.cast(tm.eq(actual.dimshuffle(0, "x"), order.dimshuffle("x", 0)), "int64")
    one_hot_pred = tb.cast(tm.eq(pred.dimshuffle(0, "x"), order.dimshuffle("x", 0)), "int64")
    return [tm.dot(one_hot_actual.T, one_hot_pred), order]
