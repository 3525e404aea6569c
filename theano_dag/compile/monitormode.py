"""``MonitorMode``: a Mode that calls the user's functions before and after every node
(``theano.compile.monitormode``).

``pre_func(fgraph, i, node, fn)`` and ``post_func(fgraph, i, node, fn)`` (Theano 1.1's
signature) get the function's graph, the node's position in the run order, the node, and
its thunk, whose ``fn.inputs`` and ``fn.outputs`` are the
storage cells of its input and output values (``fn.outputs[0][0]`` after it ran).

>>> import numpy as np
>>> import theano_dag
>>> import theano_dag.tensor as tt
>>> seen = []
>>> def post(fgraph, i, node, fn):
...     seen.append((str(node.op), fn.outputs[0][0].tolist()))
>>> x = tt.dvector("x")
>>> f = theano_dag.function([x], tt.exp(x) * 2, mode=MonitorMode(post_func=post, optimizer=None))
>>> _ = f(np.zeros(2))
>>> seen[-1]
('Elemwise{mul,no_inplace}', [2.0, 2.0])
"""

from __future__ import annotations

import numpy as np

from theano_dag.compile.mode import Mode
from theano_dag.engines.basic import PerformLinker, WrapLinker

__all__ = ["MonitorMode", "detect_nan"]


class _Monitor:
    def __init__(self, pre_func, post_func):
        self.pre_func, self.post_func = pre_func, post_func

    def __call__(self, fgraph, i, node, fn):
        if self.pre_func is not None:
            self.pre_func(fgraph, i, node, fn)
        fn()
        if self.post_func is not None:
            self.post_func(fgraph, i, node, fn)


class MonitorMode(Mode):
    """A Mode that runs each node on the reference engine between ``pre_func`` and
    ``post_func`` (either may be None). ``optimizer`` as for ``Mode``."""

    def __init__(self, pre_func=None, post_func=None, optimizer="default", linker=None):
        super().__init__(linker=linker, optimizer=optimizer)
        self.pre_func = pre_func
        self.post_func = post_func

    @property
    def linker(self):
        return WrapLinker([PerformLinker(allow_gc=False)], _Monitor(self.pre_func, self.post_func))


def detect_nan(fgraph, i, node, fn):
    """A ``post_func`` that prints the node, its inputs and outputs when an output holds a
    NaN (Theano's ``detect_nan``)."""
    for out in fn.outputs:
        value = out[0]
        if isinstance(value, np.ndarray) and value.dtype.kind in "fc" and np.isnan(value).any():
            print("*** NaN detected ***")
            print(f"Node {i}: {node}")
            print("Inputs : %s" % [cell[0] for cell in fn.inputs])
            print("Outputs: %s" % [cell[0] for cell in fn.outputs])
            break
