"""Random theano_dag tensor graphs for the conversion tests (a hypothesis strategy).

Every dimension has length N, so any two operands fit together. Imported by the
format tests here and by tests_theano/ (its conftest puts this folder on sys.path).
"""

import numpy as np
from hypothesis import strategies as st

from theano_dag import tensor as tt
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.nnet import softmax

N = 3
UNARY = [tt.exp, tt.tanh, tt.neg, tt.sqr, tt.abs, tt.sigmoid]
BINARY = [tt.add, tt.mul, tt.sub, tt.maximum]
KINDS = ["unary", "binary", "const", "reduce", "shuffle", "dot", "sub", "softmax", "cast"]


def random_args(rng):
    """Values for the inputs x (matrix), v (vector), s (scalar) of a random graph."""
    return [rng.random((N, N)), rng.random(N), np.float64(rng.random())]


@st.composite
def tensor_graphs(draw, max_ops=8):
    """A FunctionGraph on x, v, s with 1 to ``max_ops`` random ops and 1 to 3 outputs."""
    x, v, s = tt.dmatrix("x"), tt.dvector("v"), tt.dscalar("s")
    pool = [x, v, s]
    for _ in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(KINDS))
        a = draw(st.sampled_from(pool))
        if kind == "unary":
            out = draw(st.sampled_from(UNARY))(a)
        elif kind == "binary":
            out = draw(st.sampled_from(BINARY))(a, draw(st.sampled_from(pool)))
        elif kind == "const":
            out = a * draw(st.sampled_from([0.5, 2, -1.25]))
        elif kind == "reduce":
            if a.ndim == 0:
                continue
            axis = draw(st.sampled_from([None, *range(a.ndim)]))
            out = draw(st.sampled_from([tt.sum, tt.max, tt.prod]))(a, axis=axis)
        elif kind == "shuffle":
            out = a.T if a.ndim == 2 else a.dimshuffle("x", *range(a.ndim))
        elif kind == "dot":
            # only full-length dimensions line up (a dimshuffled vector has a length-1 one)
            fits = [p for p in pool if p.ndim in (1, 2) and not any(p.broadcastable)]
            b = draw(st.sampled_from(fits))
            out = tt.dot(a, b) if a in fits else a * b
        elif kind == "sub":
            if a.ndim == 0 or a.broadcastable[0]:
                continue  # a[1] needs a first dimension of length N, not 1 (a dimshuffled row)
            out = draw(st.sampled_from([a[::-1], a[1], a[:]]))  # lengths stay N
        elif kind == "softmax":
            if a.ndim != 2:
                continue
            out = softmax(a)
        else:
            out = tt.cast(tt.cast(a, "float32"), "float64")
        pool.append(out)
    n_out = draw(st.integers(1, 3))
    outs = [draw(st.sampled_from(pool[3:] or pool)) for _ in range(n_out)]
    return FunctionGraph([x, v, s], outs, clone=False)
