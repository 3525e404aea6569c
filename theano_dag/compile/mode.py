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
each adds its linkers there. A query also includes the rewrites tagged with the
engine's ``required_rewrites`` (its lowering passes: row tiling for ``cpu``, device
placement for ``opencl``) and leaves out its ``incompatible_rewrites``, as PyTensor's
JAX and Numba modes do. Optimizer names not yet registered are looked up again after
importing the packages in ``PLUGIN_MODULES`` (the optimizer database registers the
standard names when imported). Until it does, the standard optimizer names
(``fast_run``, ``fast_compile``, ...) mean "no rewrites", and the ``cpu`` linker
falls back to the reference ``py`` engine when its name is not in the table.
"""

from __future__ import annotations

import copy
import importlib

import theano_dag.engines.cpu  # noqa: F401  (adds "cpu" to the engines' table)
import theano_dag.engines.opencl  # noqa: F401  (adds "opencl"; pyopencl loads on first use)
from theano_dag.config import config
from theano_dag.engines import LINKERS, inner

__all__ = [
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
]

# Packages that register optimizers or modes when imported (the engines are imported
# above: they only fill the engines' table).
PLUGIN_MODULES = ["theano_dag.opt"]

# Standard optimizer names that mean "no rewrites" until an optimizer package registers them.
STANDARD_OPTIMIZER_NAMES = (
    "fast_run",
    "fast_compile",
    "merge",
    "stabilize",
    "o1",
    "o2",
    "o3",
    "None",
)

# Linker names that fall back to another when nothing registered them.
LINKER_FALLBACKS = {"cpu": "py"}

predefined_linkers: dict = LINKERS
predefined_optimizers: dict = {}
predefined_modes: dict = {}
_OPTDB: list = []
_plugins_loaded = False


def _load_plugins():
    """Import the plugin packages once, so that they register their names."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for mod in PLUGIN_MODULES:
        try:
            importlib.import_module(mod)
        except ImportError as e:
            # Only a missing plugin package is tolerated; a broken one must be seen.
            if getattr(e, "name", None) != mod:
                raise


def register_linker(name: str, factory, override: bool = False):
    """Make ``Mode(linker=name)`` use ``factory`` (a Linker or a callable returning one).

    >>> from theano_dag.engines.basic import PerformLinker
    >>> register_linker("my_py", lambda: PerformLinker(allow_gc=False), override=True)
    >>> get_linker("my_py").allow_gc
    False
    """
    if name in predefined_linkers and not override:
        raise ValueError(f"Linker name already taken: {name!r} (pass override=True to replace)")
    predefined_linkers[name] = factory


def register_optimizer(name: str, opt, override: bool = False):
    """Make ``Mode(optimizer=name)`` use ``opt`` (see the module docstring for what it may be)."""
    if name in predefined_optimizers and not override:
        raise ValueError(f"Optimizer name already taken: {name!r} (pass override=True to replace)")
    predefined_optimizers[name] = opt


def register_optdb(db):
    """Set the optimizer database that resolves query objects: ``db.query(q)``."""
    _OPTDB[:] = [db]


def register_mode(name: str, mode, override: bool = False):
    """Make ``function(..., mode=name)`` use ``mode`` (a Mode or a callable returning one)."""
    if name in predefined_modes and not override:
        raise ValueError(f"Mode name already taken: {name!r} (pass override=True to replace)")
    predefined_modes[name] = mode


def get_linker(name: str):
    """Return a new, unbound Linker for a registered name."""
    if name not in predefined_linkers:
        _load_plugins()
    if name not in predefined_linkers and name in LINKER_FALLBACKS:
        name = LINKER_FALLBACKS[name]
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
        _load_plugins()
    if not _OPTDB:
        try:
            from theano_dag.opt import optdb  # type: ignore[attr-defined]
        except ImportError:
            raise ValueError(
                "Mode: an optimizer query needs an optimizer database; none is registered "
                "(register_optdb) and theano_dag.opt.optdb is not available"
            ) from None
        _OPTDB.append(optdb)
    return _OPTDB[0]


def engine_query(query, linker):
    """``query`` with the engine's lowering passes: the rewrites tagged with one of
    ``linker.required_rewrites`` included, those tagged ``linker.incompatible_rewrites``
    left out. ``None`` (no rewrites) becomes the empty query ``"None"`` when the engine
    needs lowering, so that ``Mode(linker="opencl", optimizer=None)`` still places its
    nodes; an optimizer that is no query is returned as it is.

    >>> from theano_dag.engines.basic import PerformLinker
    >>> from theano_dag.engines.cpu import CPULinker
    >>> from theano_dag.opt.db import Query
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
        _load_plugins()
    if name not in predefined_optimizers:
        if name in STANDARD_OPTIMIZER_NAMES:
            return None
        raise ValueError(
            f"Unknown optimizer {name!r}; registered optimizers: "
            f"{', '.join(sorted(predefined_optimizers)) or '(none)'}"
        )
    opt = predefined_optimizers[name]
    if callable(opt) and not hasattr(opt, "optimize") and not _is_query(opt):
        opt = opt()
        predefined_optimizers[name] = opt
    return opt


class Mode:
    """How to compile: an optimizer (rewrites) and a linker (the engine).

    ``linker``: a Linker or a registered name (None: ``config.linker`` at use).
    ``optimizer``: an object with ``.optimize(fgraph)``, a query object, a
    registered name, ``None`` for no rewrites, or ``"default"`` for
    ``"fast_run"``. ``including``/``excluding``/``requiring`` return new Modes
    whose query has those tags added; the Mode itself never changes.

    >>> m = Mode(linker="py", optimizer=None)
    >>> m.optimizer is None, type(m.linker).__name__
    (True, 'PerformLinker')
    >>> m.excluding("fusion").provided_optimizer is None
    True
    """

    def __init__(self, linker=None, optimizer="default"):
        if isinstance(optimizer, str) and optimizer == "default":
            optimizer = "fast_run"
        self.provided_linker = linker
        self.provided_optimizer = optimizer
        self.call_time = 0.0
        self.fn_time = 0.0

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
        return lk

    @property
    def optimizer(self):
        """The optimizer (an object with ``.optimize(fgraph)``) or None; a query also
        runs the linker's lowering passes (``engine_query``)."""
        opt = self.provided_optimizer
        if isinstance(opt, str):
            opt = get_optimizer(opt)
        opt = engine_query(opt, self.linker)
        if opt is not None and _is_query(opt):
            opt = _optdb().query(opt)
        return opt

    def _query(self):
        opt = self.provided_optimizer
        if isinstance(opt, str):
            opt = get_optimizer(opt)
        return opt

    def _with_tags(self, method: str, tags):
        opt = self._query()
        if opt is None:
            # No rewrites at all: there is nothing to include or exclude from.
            return self.clone()
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
        new = copy.copy(self)
        new.provided_linker, new.provided_optimizer = linker, optimizer
        new.call_time = new.fn_time = 0.0
        return new

    def __str__(self):
        return (
            f"{type(self).__name__}(linker={self.provided_linker}, "
            f"optimizer={self.provided_optimizer})"
        )

    __repr__ = __str__


FAST_RUN = Mode(linker=None, optimizer="fast_run")
FAST_COMPILE = Mode(linker="py", optimizer="fast_compile")
PerformOnly = Mode(linker="py", optimizer=None)

predefined_modes.update(
    {"FAST_RUN": FAST_RUN, "FAST_COMPILE": FAST_COMPILE, "PerformOnly": PerformOnly}
)


def get_mode(name_or_mode=None):
    """Return the Mode for a name or Mode (None: ``config.mode`` plus the
    ``optimizer_including``/``optimizer_excluding`` flags).

    >>> get_mode("PerformOnly") is PerformOnly
    True
    >>> get_mode(PerformOnly) is PerformOnly
    True
    """
    if name_or_mode is not None and not isinstance(name_or_mode, str):
        if not isinstance(name_or_mode, Mode):
            raise TypeError(
                f"mode must be a Mode or a mode name, got {type(name_or_mode).__name__}: "
                f"{name_or_mode!r}"
            )
        return name_or_mode
    name = config.mode if name_or_mode is None else name_or_mode
    if name == "Mode":
        mode = Mode(linker=config.linker, optimizer="default")
    else:
        if name not in predefined_modes:
            _load_plugins()
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
        if config.optimizer_excluding:
            mode = mode.excluding(*config.optimizer_excluding.split(":"))
        if config.optimizer_including:
            mode = mode.including(*config.optimizer_including.split(":"))
    return mode


def get_default_mode():
    """The Mode ``function`` uses when given none."""
    return get_mode(None)


# Inner graphs (engines.inner.compile_inner) compiled with no mode use the default one.
inner.set_default_mode(get_default_mode)
