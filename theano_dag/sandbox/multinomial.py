"""``theano.sandbox.multinomial``: draws of a categorical distribution made from uniform
draws, as Theano's MRG streams make them.

For row ``n`` of the probabilities ``pvals`` and a uniform draw ``u``, the outcome is the
first column whose cumulative probability (summed in float64, in order) exceeds ``u``.
``MultinomialFromUniform`` counts ``k`` such outcomes per row (uniform ``c * rows + n``
for the ``c``-th); ``ChoiceFromUniform`` draws ``k`` of them without replacement, the
chosen column's probability set to 0 and the row renormalized after each, with the
arithmetic of Theano's C code, so that the same uniforms give Theano's outcomes.

>>> import numpy as np
>>> op = MultinomialFromUniform("int64")
>>> op(np.array([[0.2, 0.8], [0.9, 0.1]]), np.array([0.5, 0.5])).eval().tolist()
[[0, 1], [1, 0]]
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import disconnected_type
from theano_dag.graph.op import Op
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["ChoiceFromUniform", "MultinomialFromUniform"]


def _outcomes(cumsum, u):
    """The first column of each row of ``cumsum`` exceeding ``u`` (that row's uniform);
    the number of columns where none does (rounding at the end of a row, a row of zeros
    or NaN)."""
    above = cumsum > u[:, None]
    return np.where(above.any(axis=1), above.argmax(axis=1), cumsum.shape[1])


class MultinomialFromUniform(Op):
    """Counts of ``n`` categorical draws per row of ``pvals`` (a matrix), made from the
    uniforms ``unis`` (``rows * n`` of them); ``odtype`` is the counts' dtype (``"auto"``:
    ``pvals``'s), Theano's op.

    >>> import numpy as np
    >>> p = np.array([[0.5, 0.5]])
    >>> MultinomialFromUniform("int64")(p, np.array([0.2, 0.7, 0.9]), 3).eval().tolist()
    [[1, 2]]
    """

    __props__ = ("odtype",)

    def __init__(self, odtype):
        self.odtype = odtype

    def __str__(self):
        return f"{type(self).__name__}{{{self.odtype}}}"

    def _inputs(self, pvals, unis, n):
        pvals, unis, n = (as_tensor_variable(v) for v in (pvals, unis, n))
        if pvals.ndim != 2:
            raise NotImplementedError(f"{self}: pvals must be a matrix, got {pvals.type}")
        if unis.ndim != 1:
            raise NotImplementedError(f"{self}: unis must be a vector, got {unis.type}")
        if n.ndim != 0 or not n.dtype.startswith(("int", "uint")):
            raise TypeError(f"{self}: n must be an int scalar, got {n.type}")
        return pvals, unis, n

    def make_node(self, pvals, unis, n=1):
        pvals, unis, n = self._inputs(pvals, unis, n)
        odtype = pvals.dtype if self.odtype == "auto" else self.odtype
        return Apply(self, [pvals, unis, n], [TensorType(odtype, shape=pvals.type.shape)()])

    def _check(self, pvals, unis, n):
        if unis.shape[0] != pvals.shape[0] * n:
            raise ValueError(
                f"{self}: {unis.shape[0]} uniforms for {pvals.shape[0]} rows and n={n}; "
                f"expected {pvals.shape[0] * n}"
            )

    def perform(self, node, inputs, output_storage, params=None):
        pvals, unis, n = inputs
        n = int(n)
        self._check(pvals, unis, n)
        rows, cols = pvals.shape
        counts = np.zeros((rows, cols), dtype=node.outputs[0].dtype)
        cumsum = np.cumsum(pvals, axis=1, dtype="float64")  # in order, as Theano's C code
        for c in range(n):
            m = _outcomes(cumsum, unis[c * rows : (c + 1) * rows])
            hit = m < cols
            np.add.at(counts, (np.nonzero(hit)[0], m[hit]), 1)
        output_storage[0][0] = counts

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True], [True], [False]]  # n gives a count, not a value

    def L_op(self, inputs, outputs, output_grads):
        pvals, unis, _ = inputs
        return [pvals.zeros_like(), unis.zeros_like(), disconnected_type()]


class ChoiceFromUniform(MultinomialFromUniform):
    """``n`` distinct columns per row of ``pvals``, drawn one after the other from the
    uniforms ``unis`` (``rows * n``), each with the probabilities of the columns left
    (``replace=False``, Theano's only case); ``odtype``: the indices' dtype (``"auto"``:
    int64).

    >>> import numpy as np
    >>> p = np.array([[0.1, 0.2, 0.7]])
    >>> ChoiceFromUniform("int64")(p, np.array([0.5, 0.5]), 2).eval().tolist()
    [[2, 1]]
    """

    __props__ = ("odtype", "replace")

    def __init__(self, odtype, replace=False):
        super().__init__(odtype)
        self.replace = bool(replace)

    def make_node(self, pvals, unis, n=1):
        pvals, unis, n = self._inputs(pvals, unis, n)
        odtype = "int64" if self.odtype == "auto" else self.odtype
        # broadcastable where pvals is, as Theano's: its static lengths where they are 1
        shape = (pvals.type.shape[0], 1 if pvals.type.shape[1] == 1 else None)
        return Apply(self, [pvals, unis, n], [TensorType(odtype, shape=shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        pvals, unis, n = inputs
        n = int(n)
        rows, cols = pvals.shape
        if n > cols and not self.replace:
            raise ValueError(
                f"{self}: cannot draw {n} columns without replacement from rows of {cols}"
            )
        self._check(pvals, unis, n)
        p = np.array(pvals)  # a copy: the renormalized rows are the op's own
        out = np.full((rows, n), -1, dtype=node.outputs[0].dtype)
        every = np.arange(rows)
        for c in range(n):
            cumsum = np.cumsum(p, axis=1, dtype="float64")
            m = _outcomes(cumsum, unis[c * rows : (c + 1) * rows])
            hit = m < cols
            out[hit, c] = m[hit]
            if self.replace or c == n - 1:
                continue
            r, k = every[hit], m[hit]
            # Theano's C code: the sum starts from the cumulative sum before the chosen
            # column (in p's dtype), then adds the columns from it on, the chosen one 0
            start = (cumsum[r, k] - p[r, k].astype("float64")).astype(p.dtype)
            p[r, k] = 0
            tail = np.where(np.arange(cols)[None, :] > k[:, None], p[r], 0).astype(p.dtype)
            total = np.cumsum(np.concatenate([start[:, None], tail], axis=1), axis=1)[:, -1]
            p[r] = p[r] / total[:, None]
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[0][0], node.inputs[2])]
