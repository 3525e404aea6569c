"""The one entry point for compiling inner graphs: :func:`compile_inner`.

Ops that hold a graph of their own (the CPU engine's ``RowTiled`` tile, the gradient's
``MapOverIndex`` row, the ``Scan`` op's step) compile it here, never by calling
``function()``: the engines sit below ``compile``, and an inner graph needs none of a
user's call semantics (defaults, updates, input protection), only its values.

``mode`` is anything with a ``linker`` and an ``optimizer`` attribute: a
``compile.Mode``, or an :class:`InnerMode` naming them directly. ``None`` is the
default mode, which ``compile.mode`` hands down with :func:`set_default_mode` (it sits
above the engines, so the engines do not reach up for it). A mode whose linker is the
``linker`` flag's (the default one) takes the linker that linker names for inner graphs
(:func:`inner_mode`): the Dask engine's inner graphs run on the CPU engine.

The inputs are never overwritten (a ``Supervisor`` keeps the optimizer's in-place
rewrites off them). With ``borrow=True`` the outputs are *borrowed* (as
``Out(borrow=True)``): a value returned may live in a buffer that the next call reuses
(or stay on the device), or be a view of an input (``x[1:]``), so the caller copies what
it keeps; ``borrow=False`` makes every output the caller's: a host array that no later
call reuses, sharing memory with no input and no other output.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from theano_dag.config import config
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.toolbox import Supervisor

__all__ = [
    "InnerMode",
    "InnerFunction",
    "compile_inner",
    "default_mode",
    "inner_mode",
    "set_default_mode",
]


@dataclass(frozen=True)
class InnerMode:
    """The two things :func:`compile_inner` needs: a linker and an optimizer (or None).

    The linker is used as given (bound to the inner graph by ``accept``); pass a
    fresh one per compile.
    """

    linker: object
    optimizer: object = None


_default_mode = [None]  # a zero-argument callable giving the default mode


def set_default_mode(getter):
    """Make ``compile_inner(..., mode=None)`` use ``getter()`` (``compile.mode`` sets
    its ``get_default_mode`` here on import)."""
    _default_mode[0] = getter


def default_mode():
    """The mode ``compile_inner(..., mode=None)`` uses (see :func:`set_default_mode`)."""
    if _default_mode[0] is None:
        raise ValueError("compile_inner: no mode given and no default mode set (import theano_dag)")
    return _default_mode[0]()


def inner_mode(mode=None):
    """The mode an inner graph compiles with, given its op's ``mode`` (as
    ``scan(..., mode=...)`` sets it; None: the default mode). A mode that names its
    linker (``Mode(linker="dask")``, ``"DASK"``, an :class:`InnerMode`) is used as it is.
    One whose linker is the ``linker`` flag's (the default mode, ``FAST_RUN`` and their
    ``including``/``excluding`` copies) gets that linker's ``inner_linker()``
    (``engines.basic.Linker.inner_linker``), its optimizer's query then taking that
    engine's lowering passes. Under the Dask engine that is the CPU engine: a scan or a
    lazy branch runs as one task over its whole inputs, and each of its steps as a dask
    graph of its own would cost far more than the step. The other engines run their
    inner graphs themselves.

    With ``linker=dask`` (``config.change_flags(linker="dask")``) ``inner_mode()`` has
    a ``CPULinker`` (``docs/architecture.md``); a mode that names its linker is kept:

    >>> from theano_dag.engines.basic import PerformLinker
    >>> mine = InnerMode(PerformLinker())
    >>> inner_mode(mine) is mine
    True
    """
    if mode is None:
        mode = default_mode()
    elif getattr(mode, "provided_linker", "named") is not None:
        return mode  # its linker named by its maker: theirs
    linker = mode.linker
    # A linker of a user's own, not a Linker, runs its inner graphs itself.
    inner = linker.inner_linker() if hasattr(linker, "inner_linker") else linker
    if inner is linker:
        return mode
    if hasattr(mode, "clone"):  # a compile.Mode: its query then lowers for the new engine
        return mode.clone(linker=inner)
    return InnerMode(inner, mode.optimizer)


class InnerFunction:
    """A compiled inner graph: ``f(*values)`` returns the list of output values.

    Each value goes through its input's type filter (once per shape signature when
    it is already an array of the input's dtype); see the module docstring for who
    owns the outputs. ``fgraph`` is the graph that was linked.

    A thread other than the one that compiled it runs its own copy (the same graph
    linked again, :meth:`for_this_thread`): the engine's steps and their planned
    buffers belong to one link, and a function's copies in several threads (its op's
    inner function shared) are called at once.
    """

    # Shape signatures remembered as fitting the inputs' types, at most.
    MAX_SIGNATURES = 64

    def __init__(self, fgraph, linker, no_recycling=None, owned=False):
        self.fgraph = fgraph
        self.linker = linker
        self._no_recycling = no_recycling
        self._owned = owned  # borrow=False: see _own
        self._owner = threading.get_ident()
        self._threads = threading.local()  # another thread's own copy
        thunk, ins, outs = linker.make_thunk()
        self._thunk = thunk
        self.thunk = thunk  # the engine's, for what drives the step itself (a C loop)
        self._inputs = [(c, c.storage) for c in ins]
        self._outputs = [c.storage for c in outs]
        dtypes = [getattr(c.type, "dtype", None) for c in ins]
        self._dtypes = [None if d is None else np.dtype(d) for d in dtypes]
        self._fits: set = set()
        # An engine may run straight on the values (the CPU engine's thunk does), without
        # the cells and their reads and writes: a tile is called many times per call.
        self._run_values = getattr(thunk, "run_values", None)

    def for_this_thread(self) -> InnerFunction:
        """This function in the thread that compiled it; in another thread, that
        thread's own link of the same graph (made on its first call there).

        >>> import numpy as np, threading
        >>> import theano_dag.tensor as tt
        >>> from theano_dag.engines.basic import PerformLinker
        >>> x = tt.dvector("x")
        >>> f = compile_inner([x], [x * 2], InnerMode(PerformLinker()))
        >>> seen = []
        >>> t = threading.Thread(target=lambda: seen.append(f.for_this_thread()))
        >>> t.start(); t.join()
        >>> f.for_this_thread() is f, seen[0] is f, float(seen[0](np.ones(1))[0][0])
        (True, False, 2.0)
        """
        if threading.get_ident() == self._owner:
            return self
        own = getattr(self._threads, "fn", None)
        if own is None:
            linker = self.linker.clone().accept(self.fgraph, no_recycling=self._no_recycling)
            own = self._threads.fn = InnerFunction(
                self.fgraph, linker, self._no_recycling, self._owned
            )
        return own

    def __call__(self, *args):
        if threading.get_ident() != self._owner:
            return self.for_this_thread()(*args)
        if len(args) != len(self._inputs):
            raise TypeError(
                f"inner function of {len(self._inputs)} inputs called with {len(args)} values"
            )
        # The common case, the outer engine's own arrays: a few identity tests and one
        # set lookup, the type filter having passed these shapes before.
        for v, dtype in zip(args, self._dtypes):
            if type(v) is not np.ndarray or v.dtype is not dtype:
                return self._run(self._filter(args))
        sig = tuple([v.shape for v in args])
        if sig not in self._fits:
            vals = self._filter(args)
            if all(a is v for a, v in zip(args, vals)):
                if len(self._fits) >= self.MAX_SIGNATURES:
                    self._fits.clear()
                self._fits.add(sig)
            return self._run(vals)
        return self._run(args)

    def checked_runner(self, args):
        """Check ``args`` once and return a callable ``run(values)`` for values of the
        same dtypes and shapes (a loop's steps): it skips the checks ``__call__`` makes.
        It returns a sequence of the outputs (borrowed, as ``borrow=True`` says).
        Values that the type filter would convert get the checked ``__call__`` instead.

        >>> import numpy as np
        >>> import theano_dag.tensor as tt
        >>> from theano_dag.engines.basic import PerformLinker
        >>> x = tt.dvector("x")
        >>> run = compile_inner([x], [x + 1], InnerMode(PerformLinker())).checked_runner(
        ...     [np.zeros(2)])
        >>> [float(v) for v in run([np.ones(2)])[0]]
        [2.0, 2.0]
        """
        if threading.get_ident() != self._owner:
            return self.for_this_thread().checked_runner(args)
        if len(args) != len(self._inputs):
            raise TypeError(
                f"inner function of {len(self._inputs)} inputs called with {len(args)} values"
            )
        vals = self._filter(args)
        if not all(a is v for a, v in zip(args, vals)):
            return lambda values: self(*values)
        # An engine may look its plan up once for values of fixed shapes (the CPU engine).
        fixed = getattr(self._thunk, "fixed_shape_runner", None)
        run = fixed(vals) if fixed is not None else None
        if run is None:
            return self._run
        if self._owned:
            return lambda values: self._own(values, run(values))
        return run

    def _filter(self, args):
        vals = []
        for (container, cell), value in zip(self._inputs, args):
            container.data = value  # converts, or raises naming the type
            vals.append(cell[0])
        return vals

    def _run(self, vals):
        if self._run_values is not None:
            outs = self._run_values(vals)
        else:
            for (_container, cell), value in zip(self._inputs, vals):
                cell[0] = value
            self._thunk()
            outs = [cell[0] for cell in self._outputs]
        return self._own(vals, outs) if self._owned else outs

    @staticmethod
    def _own(vals, outs):
        """``outs`` made the caller's (``borrow=False``): an output that may share memory
        with an input (the input itself, ``x[1:]``, ``x.T``) or with an earlier output (the
        same variable twice, two views of one value) is copied. The outer engine reuses
        an input's memory once the node holding this function has read it, and no op's
        view_map declares a view through its inner graph. A read-only output (a constant
        of the inner graph, which rewrites may leave as a whole output, or a view of one)
        is copied too: the caller may destroy what it owns, and the C engine's kernels
        would write through the flag into the constant, changing later calls."""
        arrays = [v for v in vals if type(v) is np.ndarray]
        outs = list(outs)
        for k, v in enumerate(outs):
            if type(v) is np.ndarray and (
                not v.flags.writeable or any(np.may_share_memory(v, a) for a in arrays)
            ):
                v = outs[k] = v.copy()
            if type(v) is np.ndarray:
                arrays.append(v)
        return outs


def compile_inner(inputs, outputs=None, mode=None, borrow=True) -> InnerFunction:
    """Compile an inner graph into an :class:`InnerFunction`.

    ``inputs, outputs``: lists of variables (the graph is copied), or a FunctionGraph
    as ``inputs`` alone (linked as it is when ``mode`` has no optimizer, copied
    before it is rewritten otherwise). ``mode`` and ``borrow``: see the module
    docstring.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> from theano_dag.engines.basic import PerformLinker
    >>> x = tt.dvector("x")
    >>> f = compile_inner([x], [tt.exp(x) * 2], InnerMode(PerformLinker()))
    >>> f(np.zeros(2))
    [array([2., 2.])]
    """
    mode = inner_mode(mode)
    optimizer = mode.optimizer
    if isinstance(inputs, FunctionGraph):
        if outputs is not None:
            raise TypeError("compile_inner: give a FunctionGraph alone, or inputs and outputs")
        fgraph = inputs.clone() if optimizer is not None else inputs
    else:
        fgraph = FunctionGraph(list(inputs), list(outputs), clone=True)
    if optimizer is not None:
        fgraph.attach_feature(Supervisor(fgraph.inputs))
        run = getattr(optimizer, "optimize", None) or optimizer
        # As for a function: rewrites build nodes whose inputs carry no test value.
        with config.change_flags(compute_test_value=config.compute_test_value_opt):
            run(fgraph)
    # no_recycling lists the outputs the caller keeps; the others are borrowed.
    keep = [] if borrow else [o for o in fgraph.outputs if o.owner is not None]
    linker = mode.linker.accept(fgraph, no_recycling=keep)
    return InnerFunction(fgraph, linker, keep, owned=not borrow)
