"""``Mode``: which optimizer rewrites the graph and which linker (engine) runs it.

Optimizers and linkers are looked up by name in two registries that other
packages fill without editing this file:

* ``register_optimizer(name, opt)``: ``opt`` is an object with
  ``.optimize(fgraph)``, a query object (with ``including``/``excluding``/
  ``requiring``, resolved through the optimizer database registered with
  ``register_optdb``), or a zero-argument callable returning either (called
  on first use).
* ``register_linker(name, factory)``: ``factory`` is a Linker (copied on use)
  or a zero-argument callable returning a new Linker.

The engines' table of linkers lives in ``theano_dag.engines`` (``LINKERS``, which
``predefined_linkers`` is): this module imports the engine packages it knows, and
each adds its linkers there. The standard optimizer names (``fast_run``,
``fast_compile``, ``merge``, ``stabilize``, ``o1``..``o3``, ``None``) are queries of the
global ``theano_dag.opt.optdb``, registered below. A query also includes the rewrites
tagged with the engine's ``required_rewrites`` (its lowering passes: row tiling for
``cpu``, device placement for ``opencl``) and leaves out its ``incompatible_rewrites``,
as PyTensor's JAX and Numba modes do.
"""

from __future__ import annotations

import copy

import theano_dag.engines.cpu  # noqa: F401  (adds "cpu" to the engines' table)
import theano_dag.engines.dask  # noqa: F401  (adds "dask"; dask is needed only to compile)
import theano_dag.engines.opencl  # noqa: F401  (adds "opencl"; pyopencl loads on first use)
from theano_dag.config import FLAGS, config
from theano_dag.engines import LINKERS, inner
from theano_dag.engines.basic import Linker
from theano_dag.gradient import row_loop
from theano_dag.graph.rewriting.basic import GlobalOptimizer
from theano_dag.graph.rewriting.db import Query
from theano_dag.graph.rewriting.db import changes as _db_changes
from theano_dag.opt.optdb import (
    OPT_FAST_COMPILE,
    OPT_FAST_RUN,
    OPT_MERGE,
    OPT_NONE,
    OPT_STABILIZE,
    optdb,
)

__all__ = [
    "AddFeatureOptimizer",
    "Mode",
    "get_mode",
    "get_default_mode",
    "register_mode",
    "register_linker",
    "register_optimizer",
    "register_optdb",
    "get_linker",
    "get_optimizer",
    "predefined_linkers",
    "predefined_optimizers",
    "predefined_modes",
    "FAST_RUN",
    "FAST_COMPILE",
    "PerformOnly",
    "DASK",
]

predefined_linkers: dict = LINKERS
# The standard optimizer names: queries of the optimizer database below.
predefined_optimizers: dict = {
    "fast_run": OPT_FAST_RUN,
    "fast_compile": OPT_FAST_COMPILE,
    "merge": OPT_MERGE,
    "stabilize": OPT_STABILIZE,
    "o1": OPT_FAST_COMPILE,
    "o2": OPT_FAST_RUN.excluding("fusion", "inplace"),
    "o3": OPT_FAST_RUN,
    "None": OPT_NONE,
}
predefined_modes: dict = {}


def _stable_form(fgraph):
    """The passes up to stabilize, on ``fgraph``: the form whose derivatives ``jacobian``
    and ``hessian`` take (``theano_dag.gradient.row_loop``). The query's optimizer is the
    one functions share (``_query_optdb``), made once."""
    _query_optdb(OPT_STABILIZE).optimize(fgraph)


row_loop.STABLE_FORM[:] = [_stable_form]
# The database that resolves query objects (a list, so a test can put its own in).
_OPTDB: list = [optdb]


def register_linker(name: str, factory, override: bool = False):
    """Make ``Mode(linker=name)`` use ``factory`` (a Linker or a callable returning one).

    >>> from theano_dag.engines.basic import Linker, PerformLinker
    >>> register_linker("my_py", lambda: PerformLinker(allow_gc=False), override=True)
    >>> get_linker("my_py").allow_gc
    False
    """
    if name in predefined_linkers and not override:
        raise ValueError(f"Linker name already taken: {name!r} (pass override=True to replace)")
    predefined_linkers[name] = factory


def register_optimizer(name: str, opt, override: bool = False):
    """Make ``Mode(optimizer=name)`` use ``opt`` (see the module docstring for what it may be).

    >>> from theano_dag.graph.rewriting.db import Query
    >>> register_optimizer("canonical_only", Query(include=["canonicalize"]), override=True)
    >>> Mode(linker="py", optimizer="canonical_only").provided_optimizer
    'canonical_only'
    """
    if name in predefined_optimizers and not override:
        raise ValueError(f"Optimizer name already taken: {name!r} (pass override=True to replace)")
    predefined_optimizers[name] = opt


def register_optdb(db):
    """Set the optimizer database that resolves query objects: ``db.query(q)``."""
    _OPTDB[:] = [db]


def register_mode(name: str, mode, override: bool = False):
    """Make ``function(..., mode=name)`` use ``mode`` (a Mode or a callable returning one).

    >>> no_fusion = FAST_RUN.excluding("fusion")
    >>> register_mode("no_fusion", no_fusion, override=True)
    >>> get_mode("no_fusion") is no_fusion
    True
    """
    if name in predefined_modes and not override:
        raise ValueError(f"Mode name already taken: {name!r} (pass override=True to replace)")
    predefined_modes[name] = mode


def get_linker(name: str):
    """Return a new, unbound Linker for a registered name."""
    if name not in predefined_linkers:
        raise ValueError(
            f"Unknown linker {name!r}; registered linkers: {', '.join(sorted(predefined_linkers))}"
        )
    factory = predefined_linkers[name]
    if isinstance(factory, type) or not hasattr(factory, "accept"):
        return factory()
    return factory.clone() if hasattr(factory, "clone") else copy.copy(factory)


def _is_query(opt) -> bool:
    return not hasattr(opt, "optimize") and hasattr(opt, "including")


def _optdb():
    if not _OPTDB:
        raise ValueError(
            "Mode: an optimizer query needs an optimizer database; none is registered "
            "(register_optdb)"
        )
    return _OPTDB[0]


# (query's tags, DB state, flags) -> the optimizer the optdb made for it: a query costs
# 0.7 ms, a fifth of a small function's compile. The optimizers keep no state between
# graphs (their caches are per op instance, bounded), so functions share them.
_QUERIES: dict = {}
MAX_QUERIES = 64


def _query_optdb(query):
    """``_optdb().query(query)``, made once per query, state of the DBs and flags.

    >>> q = Query(include=["fast_run"])
    >>> _query_optdb(q) is _query_optdb(Query(include=["fast_run"]))
    True
    >>> _query_optdb(q) is _query_optdb(q.excluding("fusion"))
    False
    """
    db = _optdb()
    key = _query_key(query)
    if key is not None:
        # Every flag: an optimizer's constructor may read one (optdb__max_use_ratio).
        # (The database itself, not its id: the key keeps it alive.)
        key = (key, db, _db_changes(), tuple([getattr(config, f) for f in FLAGS]))
        try:
            hit = _QUERIES.get(key)
        except TypeError:  # a flag value that is not hashable: not kept
            key = hit = None
        if hit is not None:
            return hit
    opt = db.query(query)
    if key is not None:
        if len(_QUERIES) >= MAX_QUERIES:
            _QUERIES.clear()
        _QUERIES[key] = opt
    return opt


def _query_key(query):
    """The tags and cutoff of a plain ``Query`` (its subqueries' too), or None when it
    holds optimizers of its own (``register``) or is of another class."""
    if type(query) is not Query or query.extra_optimizations:
        return None
    subs = []
    for name, sub in sorted(query.subquery.items(), key=lambda kv: str(kv[0])):
        k = _query_key(sub)
        if k is None:
            return None
        subs.append((name, k))
    return (
        tuple(query.include),
        tuple(query.require),
        tuple(query.exclude),
        query.position_cutoff,
        tuple(subs),
    )


def engine_query(query, linker):
    """``query`` with the engine's lowering passes: the rewrites tagged with one of
    ``linker.required_rewrites`` included, those tagged ``linker.incompatible_rewrites``
    left out. ``None`` (no rewrites) becomes the empty query ``"None"`` when the engine
    needs lowering, so that ``Mode(linker="opencl", optimizer=None)`` still places its
    nodes; an optimizer that is no query is returned as it is.

    >>> from theano_dag.engines.basic import PerformLinker
    >>> from theano_dag.engines.cpu import CPULinker
    >>> from theano_dag.graph.rewriting.db import Query
    >>> q = engine_query(Query(include=["fast_run"]), CPULinker(tile=False))
    >>> list(q.include), list(q.exclude)
    (['fast_run', 'cpu'], ['row_tiling'])
    >>> engine_query(None, PerformLinker()) is None
    True
    """
    required = tuple(getattr(linker, "required_rewrites", ()))
    incompatible = tuple(getattr(linker, "incompatible_rewrites", ()))
    if query is None and required:
        query = get_optimizer("None")
    if query is None or not _is_query(query):
        return query
    if required:
        query = query.including(*required)
    if incompatible:
        query = query.excluding(*incompatible)
    return query


def get_optimizer(name):
    """Return what a registered optimizer name stands for (None: no rewrites)."""
    if name is None:
        return None
    if name not in predefined_optimizers:
        raise ValueError(
            f"Unknown optimizer {name!r}; registered optimizers: "
            f"{', '.join(sorted(predefined_optimizers)) or '(none)'}"
        )
    opt = predefined_optimizers[name]
    if callable(opt) and not hasattr(opt, "optimize") and not _is_query(opt):
        opt = opt()
        predefined_optimizers[name] = opt
    return opt


class _FrozenAfterInit(type):
    """Freezes an instance once its (outermost) ``__init__`` has run, so that a
    subclass's ``__init__`` may still set its own fields."""

    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        object.__setattr__(obj, "_frozen", True)
        return obj


class Mode(metaclass=_FrozenAfterInit):
    """How to compile: an optimizer (rewrites) and a linker (the engine).

    ``linker``: a Linker or a registered name (None: ``config.linker`` at use).
    ``optimizer``: an object with ``.optimize(fgraph)``, a query object, a
    registered name, ``None`` for no rewrites, or ``"default"`` for
    ``"fast_run"``. ``including``/``excluding``/``requiring``/``clone`` return
    new Modes; a Mode itself never changes (one is shared by every function
    compiled with it), and assigning to one raises.

    >>> m = Mode(linker="py", optimizer=None)
    >>> m.optimizer is None, type(m.linker).__name__
    (True, 'PerformLinker')
    >>> m.excluding("fusion").provided_optimizer is None
    True
    >>> try:
    ...     m.provided_linker = "cpu"
    ... except AttributeError as e:
    ...     print(str(e).split(";")[0])
    Mode is immutable: cannot set 'provided_linker'
    >>> m.clone(linker="cpu").provided_linker, m.provided_linker
    ('cpu', 'py')
    """

    # Theano's DebugMode flag (reject non-finite values), which Theano's code sets on a
    # copy of the default mode. No engine reads it on a plain Mode, so setting it
    # changes no compiled function: the one field left settable after __init__.
    check_isfinite = True
    _SETTABLE = frozenset({"check_isfinite"})

    def __init__(self, linker=None, optimizer="default"):
        if isinstance(optimizer, str) and optimizer == "default":
            optimizer = "fast_run"
        self.provided_linker = linker
        self.provided_optimizer = optimizer

    def __setattr__(self, name, value):
        if self.__dict__.get("_frozen") and name not in self._SETTABLE:
            raise AttributeError(
                f"{type(self).__name__} is immutable: cannot set {name!r}; make a changed copy "
                "with mode.clone(linker=..., optimizer=...), including(...) or excluding(...)"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    @property
    def linker(self):
        """A fresh, unbound Linker (each function gets its own)."""
        lk = self.provided_linker
        if lk is None:
            # Resolved at use, so that config.change_flags(linker=...) is seen;
            # device=opencl picks the OpenCL engine as THEANO_FLAGS=device=cuda did.
            lk = "opencl" if config.device == "opencl" else config.linker
        if isinstance(lk, str):
            return get_linker(lk)
        # A copy: accept() binds a linker to one graph, and the Mode's own instance is
        # shared by every function compiled with it.
        return lk.clone() if isinstance(lk, Linker) else lk

    @property
    def optimizer(self):
        """The optimizer (an object with ``.optimize(fgraph)``) or None; a query also
        runs the linker's lowering passes (``engine_query``)."""
        opt = self.provided_optimizer
        if isinstance(opt, str):
            opt = get_optimizer(opt)
        opt = engine_query(opt, self.linker)
        if opt is not None and _is_query(opt):
            opt = _query_optdb(opt)
        return opt

    @property
    def _optimizer(self):
        """Theano's attribute: the optimizer as the mode holds it (a query object, which
        ``mode._optimizer.position_cutoff = ...`` changes in place for this mode and its
        clones, or an optimizer, or None). Read-only: a Mode does not change; its
        ``including``/``excluding``/``clone`` give another optimizer.

        >>> m = Mode(linker="py", optimizer="fast_run").excluding("fusion")
        >>> sorted(m._optimizer.include), m._optimizer.position_cutoff
        (['fast_run'], inf)
        """
        return self._query()

    def _query(self):
        opt = self.provided_optimizer
        if isinstance(opt, str):
            opt = get_optimizer(opt)
        return opt

    def _with_tags(self, method: str, tags):
        opt = self._query()
        if opt is None:
            if method == "excluding":
                return self.clone()  # no rewrites: nothing to leave out
            # As in Theano, no rewrites is the empty query: including() adds to it.
            opt = get_optimizer("None")
        if not hasattr(opt, method):
            raise TypeError(
                f"Mode.{method}: the optimizer {opt!r} is not a query, so it has no tags; "
                "use a registered optimizer name or a query object"
            )
        return self.clone(optimizer=getattr(opt, method)(*tags))

    def including(self, *tags):
        """A new Mode whose optimizer query also includes the rewrites tagged ``tags``."""
        return self._with_tags("including", tags)

    def excluding(self, *tags):
        """A new Mode whose optimizer query leaves out the rewrites tagged ``tags``."""
        return self._with_tags("excluding", tags)

    def requiring(self, *tags):
        """A new Mode whose optimizer query keeps only rewrites tagged all of ``tags``."""
        return self._with_tags("requiring", tags)

    def register(self, *optimizations):
        """A new Mode whose query also runs ``(optimizer, position)`` pairs."""
        return self._with_tags("register", optimizations)

    def clone(self, link_kwargs=None, optimizer="", linker=None):
        """A copy of this Mode, optionally with another optimizer or linker."""
        if optimizer == "":
            optimizer = self.provided_optimizer
        if linker is None:
            linker = self.provided_linker
            if link_kwargs and linker is not None and not isinstance(linker, str):
                linker = linker.clone(**link_kwargs)
        new = copy.copy(self)  # a subclass's own fields come along
        object.__setattr__(new, "provided_linker", linker)
        object.__setattr__(new, "provided_optimizer", optimizer)
        return new

    def __str__(self):
        return (
            f"{type(self).__name__}(linker={self.provided_linker}, "
            f"optimizer={self.provided_optimizer})"
        )

    __repr__ = __str__


class AddFeatureOptimizer(GlobalOptimizer):
    """A pass that changes nothing and attaches ``feature`` to the graph it runs on, so
    that the rewrites registered after it obey the feature (Theano's name).

    >>> import theano_dag, theano_dag.tensor as tt
    >>> from theano_dag.graph.toolbox import NoOutputFromInplace
    >>> mode = theano_dag.Mode(optimizer="fast_run").register(
    ...     (AddFeatureOptimizer(NoOutputFromInplace()), 49.9)
    ... )
    >>> x = tt.dmatrix("x")
    >>> f = theano_dag.function([x], tt.tanh(x * 2), mode=mode)
    >>> f.maker.fgraph.outputs[0].owner.op.destroy_map  # no output computed in place
    {}
    """

    def __init__(self, feature):
        self.feature = feature

    def add_requirements(self, fgraph):
        fgraph.attach_feature(self.feature)

    def apply(self, fgraph):
        pass


FAST_RUN = Mode(linker=None, optimizer="fast_run")
FAST_COMPILE = Mode(linker="py", optimizer="fast_compile")
PerformOnly = Mode(linker="py", optimizer=None)
DASK = Mode(linker="dask", optimizer="fast_run")

predefined_modes.update(
    {"FAST_RUN": FAST_RUN, "FAST_COMPILE": FAST_COMPILE, "PerformOnly": PerformOnly, "DASK": DASK}
)


def get_mode(name_or_mode=None):
    """Return the Mode for a name or Mode (None: ``config.mode``, with the optimizer
    ``config.optimizer`` when that flag is set, and the ``optimizer_including``/
    ``optimizer_excluding`` flags).

    >>> get_mode("PerformOnly") is PerformOnly
    True
    >>> get_mode(PerformOnly) is PerformOnly
    True
    >>> with config.change_flags(optimizer=None):
    ...     get_mode().provided_optimizer
    'None'
    """
    if name_or_mode is not None and not isinstance(name_or_mode, str):
        if not isinstance(name_or_mode, Mode):
            raise TypeError(
                f"mode must be a Mode or a mode name, got {type(name_or_mode).__name__}: "
                f"{name_or_mode!r}"
            )
        return name_or_mode
    name = config.mode if name_or_mode is None else name_or_mode
    if isinstance(name, Mode):
        # config.change_flags(mode=Mode(...)) (Theano's tests set one): used as it is,
        # as Theano's get_mode does, the optimizer flags applying to it below.
        mode = name
    elif name == "Mode":
        mode = Mode(linker=config.linker, optimizer=config.optimizer)
    else:
        if name == "DEBUG_MODE" and name not in predefined_modes:
            name = "DebugMode"
        if name not in predefined_modes:
            raise ValueError(
                f"Unknown mode {name!r}; registered modes: {', '.join(sorted(predefined_modes))}"
            )
        mode = predefined_modes[name]
        if not isinstance(mode, Mode):
            mode = mode()
            predefined_modes[name] = mode
    if name_or_mode is None:
        # The flags apply to the default mode only, as in Theano.
        if config.is_set("optimizer"):
            mode = mode.clone(optimizer=config.optimizer)
        if config.optimizer_excluding:
            mode = mode.excluding(*config.optimizer_excluding.split(":"))
        if config.optimizer_including:
            mode = mode.including(*config.optimizer_including.split(":"))
    return mode


def get_default_mode():
    """The Mode ``function`` uses when given none.

    >>> from theano_dag import config
    >>> with config.change_flags(mode="FAST_COMPILE"):
    ...     get_default_mode() is FAST_COMPILE
    True
    """
    return get_mode(None)


# Inner graphs (engines.inner.compile_inner) compiled with no mode use the default one.
inner.set_default_mode(get_default_mode)
