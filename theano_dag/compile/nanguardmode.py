"""``NanGuardMode``: a Mode that stops at the first node whose output holds a NaN, an
infinity or a huge value (``theano.compile.nanguardmode``).

Every node runs on the reference engine, one at a time; after each, its outputs are
checked, and the function's inputs are checked before the first. The error names the
node, its position and the user's line where it was made.

>>> import numpy as np
>>> import theano_dag
>>> import theano_dag.tensor as tt
>>> x = tt.dvector("x")
>>> f = theano_dag.function([x], tt.log(x), mode=NanGuardMode())
>>> f(np.array([1.0, 2.0]))
array([0.        , 0.69314718])
>>> try:
...     f(np.array([-1.0]))
... except AssertionError as e:
...     print(str(e).splitlines()[0])
NanGuardMode: NaN in output 0 of Elemwise{log,no_inplace}(x) (node 0 of 1)
"""

from __future__ import annotations

import numpy as np

from theano_dag.compile.mode import Mode, register_mode
from theano_dag.engines.basic import PerformLinker, WrapLinker

__all__ = ["NanGuardMode", "BIG_VALUE"]

# What big_is_error calls big (Theano's threshold): a float this large in magnitude
# is almost always a value that is about to overflow.
BIG_VALUE = 1e10


def _problem(value, nan, inf, big) -> str | None:
    """What is wrong with ``value`` ("NaN", "Inf", "a big value"), or None."""
    if not isinstance(value, (np.ndarray, np.generic, float, complex)):
        return None
    arr = np.asarray(value)
    if arr.dtype.kind not in "fc" or arr.size == 0:
        return None
    if nan and np.isnan(arr).any():
        return "NaN"
    if inf and np.isinf(arr).any():
        return "Inf"
    if big and (np.abs(arr[np.isfinite(arr)]) > BIG_VALUE).any():
        return f"a big value (magnitude > {BIG_VALUE:g})"
    return None


class _Guard:
    """The wrapper run around each node: run it, then check its outputs."""

    def __init__(self, nan, inf, big):
        self.nan, self.inf, self.big = nan, inf, big

    def check_inputs(self, fgraph, values):
        for k, (var, value) in enumerate(zip(fgraph.inputs, values)):
            what = _problem(value, self.nan, self.inf, self.big)
            if what is not None:
                raise AssertionError(f"NanGuardMode: {what} in input {k} ({var}) of the function")

    def __call__(self, fgraph, i, node, thunk):
        thunk()
        for j, cell in enumerate(thunk.outputs):
            what = _problem(cell[0], self.nan, self.inf, self.big)
            if what is not None:
                # The engine adds the node, its inputs and where the user made it.
                raise AssertionError(
                    f"NanGuardMode: {what} in output {j} of {node} (node {i} of "
                    f"{len(fgraph.apply_nodes)})"
                )


class _GuardLinker(WrapLinker):
    """A WrapLinker over the reference engine whose ``pre`` checks the inputs."""

    def pre(self, f, inputs, order, thunk_groups):
        self.wrapper.check_inputs(self.fgraph, inputs)


class NanGuardMode(Mode):
    """A Mode that raises ``AssertionError`` at the first NaN (``nan_is_error``), infinity
    (``inf_is_error``) or value of magnitude above ``BIG_VALUE`` (``big_is_error``) in a
    function's inputs or in any node's outputs. ``optimizer`` as for ``Mode``; the nodes
    run on the reference engine, whatever ``linker`` says (Theano's argument is kept)."""

    def __init__(
        self,
        nan_is_error=True,
        inf_is_error=True,
        big_is_error=True,
        optimizer="default",
        linker=None,
    ):
        super().__init__(linker=linker, optimizer=optimizer)
        self.nan_is_error = bool(nan_is_error)
        self.inf_is_error = bool(inf_is_error)
        self.big_is_error = bool(big_is_error)

    @property
    def linker(self):
        guard = _Guard(self.nan_is_error, self.inf_is_error, self.big_is_error)
        return _GuardLinker([PerformLinker(allow_gc=False)], guard)


register_mode("NanGuardMode", NanGuardMode, override=True)  # a re-import re-registers
