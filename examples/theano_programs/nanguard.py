"""A Theano 1.1.2 program run under NanGuardMode."""

import numpy as np
import theano
import theano.tensor as tt
from theano.compile.nanguardmode import NanGuardMode

x = tt.dmatrix("x")
w = theano.shared(np.full((3, 2), 0.5), name="w")
y = tt.log(tt.dot(x, w)).sum()
f = theano.function(
    [x], y, mode=NanGuardMode(nan_is_error=True, inf_is_error=True, big_is_error=True)
)
print(round(float(f(np.ones((4, 3)))), 6))
for bad in (-np.ones((4, 3)), np.zeros((4, 3)), np.full((4, 3), 1e11)):
    try:
        f(bad)
        print("no error")
    except AssertionError:
        print("AssertionError")
