"""Hints: what a user knows of a value that the graph cannot prove (a matrix is symmetric,
positive semi-definite; a value is positive), given to the rewrites as a node of the
graph (Theano's ``theano.sandbox.linalg.Hint``).

``psd(A)`` is ``A`` itself, marked; the linear-algebra rewrites read the mark
(``theano_dag.opt.rewrites.linalg``): a ``solve`` with a positive semi-definite matrix goes
through its Cholesky factor, the transpose of a symmetric matrix is the matrix. A hint is
a promise: nothing checks it, and a wrong one gives what the promise implies (the factor
of the lower triangle, the matrix for its transpose). The ``specialize`` pass removes the
hint nodes, once the rewrites that read them have run.

>>> import theano_dag.tensor as tt
>>> a = tt.dmatrix("a")
>>> is_psd(psd(a)), is_symmetric(psd(a)), is_psd(a)
(True, True, False)
"""

from __future__ import annotations

from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.tensor import math as tm
from theano_dag.tensor.basic import NotScalarConstantError, get_scalar_constant_value
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["Hint", "hints", "is_positive", "is_psd", "is_symmetric", "psd"]


class Hint(Op):
    """``x`` itself, carrying ``hints`` (keyword arguments, e.g. ``psd=True``) for the
    rewrites; a view of its input, with the gradient of the identity.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> h = Hint(positive=True)(x)
    >>> hints(h), h.eval({x: np.ones(2)})
    ({'positive': True}, array([1., 1.]))
    """

    __props__ = ("hints",)
    view_map = {0: [0]}

    def __init__(self, **kwargs):
        self.hints = tuple(sorted(kwargs.items()))

    def __str__(self):
        return "Hint{" + ", ".join(f"{k}={v}" for k, v in self.hints) + "}"

    def make_node(self, x):
        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, fgraph, node, shapes):
        return [shapes[0]]

    def grad(self, inputs, output_grads):
        return output_grads

    def R_op(self, inputs, eval_points):
        return eval_points


def hints(variable) -> dict:
    """The hints given to ``variable`` (a dict; empty without a :class:`Hint`).

    >>> import theano_dag.tensor as tt
    >>> hints(psd(tt.dmatrix())), hints(tt.dmatrix())
    ({'psd': True, 'symmetric': True}, {})
    """
    owner = variable.owner
    if owner is not None and isinstance(owner.op, Hint):
        return dict(owner.op.hints)
    return {}


def psd(v):
    r"""``v`` marked positive semi-definite: a symmetric matrix with :math:`x^T v x \ge 0`
    for every vector ``x`` (Theano's name).

    >>> import theano_dag.tensor as tt
    >>> psd(tt.dmatrix("a")).owner.op
    Hint{psd=True, symmetric=True}
    """
    return Hint(psd=True, symmetric=True)(v)


def is_psd(v) -> bool:
    """Whether ``v`` is marked positive semi-definite (by :func:`psd`).

    >>> import theano_dag.tensor as tt
    >>> is_psd(psd(tt.dmatrix())), is_psd(tt.dmatrix())
    (True, False)
    """
    return bool(hints(v).get("psd", False))


def is_symmetric(v) -> bool:
    """Whether ``v`` is marked symmetric (by :func:`psd`, or a ``symmetric`` hint).

    >>> import theano_dag.tensor as tt
    >>> is_symmetric(Hint(symmetric=True)(tt.dmatrix()))
    True
    """
    return bool(hints(v).get("symmetric", False))


def is_positive(v) -> bool:
    """Whether ``v`` is known to hold no negative value: marked ``positive``, or a square
    or an even integer power (Theano's test; such a value may be 0).

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> is_positive(x**2), is_positive(tt.sqr(x)), is_positive(x**3), is_positive(x)
    (True, True, False, False)
    """
    if hints(v).get("positive", False):
        return True
    owner = v.owner
    if owner is None:
        return False
    if owner.op == tm.sqr:
        return True
    if owner.op == tm.pow:
        try:
            exponent = get_scalar_constant_value(owner.inputs[1])
        except NotScalarConstantError:
            return False
        return bool(exponent % 2 == 0)
    return False
