"""``theano.tensor.xlogx``'s path: ``xlogx`` and ``xlogy0`` live in
:mod:`theano_dag.tensor.math`.

>>> import numpy as np
>>> xlogx(np.array([0.0, 1.0])).eval()
array([0., 0.])
"""

from theano_dag.scalar.math import XLogY0
from theano_dag.tensor.math import xlogx, xlogy0

__all__ = ["XLogY0", "xlogx", "xlogy0"]
