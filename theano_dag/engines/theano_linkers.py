"""Theano's linker classes (``theano.link.vm``, ``theano.link.c.basic``) on the
reference engine's per-node thunks.

Theano's ``OpWiseCLinker`` ran each node's C code where the op had some and its
``perform`` otherwise, node after node; ``VMLinker`` ran the same thunks in a loop
that could call a ``callback`` after each node. Here both are the reference linker
(``PerformLinker``): a ``COp`` runs its C code (compiled by the CPU engine), other
ops their ``perform``. What they do not reproduce: a C loop (``use_cloop``), lazy
evaluation (``lazy``: the rewrite pass ``lazy_branches`` makes an ``ifelse`` lazy, so
without rewrites an ``IfElse`` has both branches' inputs computed), thunks with a
``cthunk``, and evaluating a subset of the outputs (``allow_partial_eval``).
``MissingGXX`` is the error Theano raises when its C linkers find no compiler.
``CLinker``, Theano's linker that compiled a whole graph into one C module, is the CPU
engine's linker, which compiles a graph into generated C kernels.

>>> import numpy as np, theano_dag, theano_dag.tensor as tt
>>> seen = []
>>> linker = VMLinker(callback=lambda node, thunk, storage_map, compute_map: seen.append(node))
>>> x = tt.dvector("x")
>>> mode = theano_dag.Mode(optimizer=None, linker=linker)
>>> f = theano_dag.function([x], tt.exp(x) * 2, mode=mode)
>>> f(np.zeros(2)), len(seen) == len(f.maker.fgraph.toposort())
(array([2., 2.]), True)
"""

from __future__ import annotations

from theano_dag.engines.basic import PerformLinker
from theano_dag.engines.cpu.linker import CPULinker as CLinker

__all__ = ["CLinker", "MissingGXX", "OpWiseCLinker", "VMLinker", "Loop"]


class MissingGXX(Exception):
    """No C++ compiler was found for code that needs one (``theano.link.c.exceptions``)."""


class OpWiseCLinker(PerformLinker):
    """One thunk per node, in the schedule's order: a COp's C code, else ``perform``."""

    def __init__(self, fallback_on_perform=True, allow_gc=None, nice_errors=True, schedule=None):
        super().__init__(allow_gc=allow_gc, schedule=schedule)
        self.fallback_on_perform = fallback_on_perform
        self.nice_errors = nice_errors


class Loop:
    """Theano's Python VM loop; here the list of thunks a VMLinker's function runs."""

    def __init__(self, fgraph, nodes, thunks, callback=None):
        self.fgraph, self.nodes, self.thunks, self.callback = fgraph, nodes, thunks, callback


class VMLinker(PerformLinker):
    """The reference linker with Theano's VMLinker arguments; ``callback(node, thunk,
    storage_map, compute_map)`` is called after each node runs."""

    def __init__(
        self,
        allow_gc=None,
        use_cloop=False,
        callback=None,
        callback_input=None,
        lazy=None,
        schedule=None,
        c_thunks=None,
        allow_partial_eval=None,
    ):
        super().__init__(allow_gc=allow_gc, schedule=schedule)
        self.use_cloop = use_cloop
        self.callback = callback
        self.callback_input = callback_input
        self.lazy = lazy
        self.c_thunks = c_thunks
        self.allow_partial_eval = allow_partial_eval

    def accept(self, fgraph, no_recycling=None, profile=None):
        if self.fgraph is not None and self.fgraph is not fgraph:
            return self.clone().accept(fgraph, no_recycling, profile)
        return super().accept(fgraph, no_recycling, profile)

    def clone(self, allow_gc=None):
        return type(self)(
            allow_gc=self.allow_gc if allow_gc is None else allow_gc,
            use_cloop=self.use_cloop,
            callback=self.callback,
            callback_input=self.callback_input,
            lazy=self.lazy,
            schedule=self._scheduler,
            c_thunks=self.c_thunks,
            allow_partial_eval=self.allow_partial_eval,
        )

    def make_all(self, input_storage=None, output_storage=None, storage_map=None):
        fn, ins, outs, thunks, order = super().make_all(input_storage, output_storage, storage_map)
        if self.callback is not None or self.callback_input is not None:
            fn = _with_callbacks(fn, self.callback, self.callback_input)
        return fn, ins, outs, thunks, order


def _with_callbacks(fn, callback, callback_input):
    """Wrap each step of ``fn`` (a Streamline) to call the callbacks around its thunk."""
    storage_map = fn.storage_map
    compute_map = {v: [True] for v in storage_map}
    steps = []
    for node, (thunk, old_storage) in zip(fn.nodes, fn.steps):

        def step(node=node, thunk=thunk):
            if callback_input is not None:
                for v in node.inputs:
                    callback_input(v, storage_map[v])
            thunk()
            if callback is not None:
                callback(node=node, thunk=thunk, storage_map=storage_map, compute_map=compute_map)

        steps.append((step, old_storage))
    fn.steps = steps
    return fn
