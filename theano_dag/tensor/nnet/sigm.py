"""``theano.tensor.nnet.sigm``: the sigmoid family, where Theano's code imports it.

>>> import numpy as np
>>> import theano_dag.tensor as tt
>>> x = tt.dvector("x")
>>> float(softplus(x).eval({x: np.array([0.0])})[0]) == float(np.log(2.0))
True
"""

from theano_dag.tensor.math import sigmoid, softplus

__all__ = ["sigmoid", "softplus"]
