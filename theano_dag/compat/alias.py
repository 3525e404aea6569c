"""The ``theano`` import alias: ``import theano`` (and every ``theano.X``) gives theano_dag.

A meta-path finder answers every module name under ``theano``: ``theano.X`` is the
theano_dag module that ``compat.theano_names`` maps it to, the same module object (so the
classes, and ``isinstance`` on them, are theano_dag's). ``theano`` itself is a thin module
that reads theano_dag's namespace and carries the version of the Theano API that
theano_dag follows (``theano.__version__``, which Theano's clients check).

This file is loaded at interpreter start-up by the ``.pth`` file that ``python -m
theano_dag.compat install-theano-alias`` writes, without importing theano_dag: only
``import theano`` pays for importing it. It is not meant to be imported by name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings

# The attribute that marks the finder on sys.meta_path: theano_dag.config looks for it to
# read THEANO_FLAGS and .theanorc, as Theano does, when the alias is installed.
MARKER = "theano_dag_theano_alias"

# theano-pymc's version, the Theano API theano_dag follows; the local label says it is
# theano_dag (PEP 440 and semver both accept it and compare it as 1.1.2).
THEANO_API_VERSION = "1.1.2"


class TheanoModule(types.ModuleType):
    """The module ``theano``: theano_dag's names (read through), Theano's ``__version__``."""

    def __init__(self, target: types.ModuleType):
        super().__init__("theano", target.__doc__)
        self.__dict__["_theano_dag"] = target
        self.__version__ = f"{THEANO_API_VERSION}+theano-dag.{target.__version__}"
        self.__file__ = target.__file__
        self.__package__, self.__loader__ = "theano", None  # not theano_dag's: set on import
        self.__path__ = []  # a package whose submodules only the alias finder gives

    # The module's own attributes: once deleted they are gone, as from any module, not
    # theano_dag's read through (PyMC3 deletes __version__ to test its check of a broken
    # Theano).
    OWN = frozenset({"__version__", "__file__", "__path__", "__package__", "__loader__"})

    # Theano 1.1's deprecated spellings at the top of ``theano``: name -> (module, name).
    DEPRECATED = {"change_flags": ("config", "change_flags")}

    def __getattr__(self, name):
        if name in TheanoModule.OWN:
            raise AttributeError(f"module 'theano' has no attribute {name!r}")
        if name in TheanoModule.DEPRECATED:
            return _deprecated(self.__dict__["_theano_dag"], name, *TheanoModule.DEPRECATED[name])
        try:
            return getattr(self.__dict__["_theano_dag"], name)
        except AttributeError:
            pass
        # Theano 1.0's names from theano.gof (theano.Variable, Lasagne's isinstance test),
        # where theano_dag's namespace has none. Read from sys.modules: `import theano`
        # imported compat.gof with the table's modules, and this file, loaded at start-up,
        # imports nothing of theano_dag.
        gof = sys.modules.get("theano_dag.compat.gof")
        if gof is not None and name in gof.TOP_LEVEL:
            return getattr(gof, name)
        raise AttributeError(f"module 'theano' has no attribute {name!r}")

    def __dir__(self):
        gof = sys.modules.get("theano_dag.compat.gof")
        old = set(gof.TOP_LEVEL) if gof is not None else set()
        return sorted(set(dir(self.__dict__["_theano_dag"])) | set(self.__dict__) | old)


def _deprecated(target, name, owner, attr):
    """``theano.<name>``: ``theano.<owner>.<attr>`` with a DeprecationWarning at each call,
    as Theano 1.1 gives it (PyMC3's tests still write ``theano.change_flags``)."""
    fn = getattr(getattr(target, owner), attr)

    def call(*args, **kwargs):
        warnings.warn(
            f"theano.{name} is deprecated: use theano.{owner}.{attr} instead",
            DeprecationWarning,
            stacklevel=2,
        )
        return fn(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = fn.__doc__
    return call


class _Loader(importlib.abc.Loader):
    """Gives the module found by ``TheanoAliasFinder`` and leaves it as it was."""

    def __init__(self, module: types.ModuleType):
        self.module = module
        self.spec = module.__dict__.get("__spec__")  # None for `theano`: importlib's stays

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        # importlib set module.__spec__ to the alias's spec: theano_dag's modules keep theirs.
        if self.spec is not None:
            module.__spec__ = self.spec


class TheanoAliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``theano`` and ``theano.X`` as theano_dag's modules (see the module docstring).

    A real Theano on ``sys.path`` is not shadowed: ``import theano`` then raises
    ``ImportError`` naming both.
    """

    theano_dag_theano_alias = True  # MARKER

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "theano" and not fullname.startswith("theano."):
            return None
        if fullname == "theano":
            module = _make_theano()
        else:
            # Deferred: theano_dag is imported when a theano module is, not at start-up.
            from theano_dag.compat.theano_names import theano_dag_module

            name = theano_dag_module(fullname)
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as err:
                if err.name is not None and name.startswith(err.name):
                    return None  # theano_dag has no such module: so neither has theano
                raise
        return importlib.machinery.ModuleSpec(
            fullname, _Loader(module), is_package=hasattr(module, "__path__")
        )


def real_theano_spec():
    """The spec of a ``theano`` package on ``sys.path`` (a real Theano), or None."""
    return importlib.machinery.PathFinder.find_spec("theano")


def _make_theano() -> types.ModuleType:
    real = real_theano_spec()
    if real is not None:
        where = real.submodule_search_locations or [real.origin]
        raise ImportError(
            f"the theano import alias of theano_dag is installed, and a real Theano is "
            f"importable too (from {where[0]}): uninstall one of them (python -m "
            f"theano_dag.compat uninstall-theano-alias removes the alias)",
            name="theano",
        )
    # Deferred: importing theano_dag is what `import theano` does under the alias.
    import theano_dag
    from theano_dag.compat.theano_names import MODULES, STAR_NAMES

    theano = TheanoModule(theano_dag)
    modules = _alias_modules(MODULES, theano)
    # Registered at once: `from theano.link.c.basic import X` then finds its module even
    # where theano_dag has no parent package of that name (theano_dag.link.c).
    sys.modules.update(modules)
    _link_children(modules)
    _star_names(modules, STAR_NAMES)
    return theano


def _alias_modules(table: dict, theano: types.ModuleType) -> dict:
    """Theano's module names -> modules: the table's entries, and every theano_dag module
    already imported under its Theano name (theano_dag.tensor.nnet -> theano.tensor.nnet)."""
    modules = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("theano_dag.") and isinstance(module, types.ModuleType):
            modules["theano" + name[len("theano_dag") :]] = module
    for alias, name in table.items():
        if alias != "theano":
            modules[alias] = importlib.import_module(name)
    modules["theano"] = theano
    # The parent packages of the table's entries that theano_dag does not have
    # (theano.link, theano.link.c): empty packages holding their children.
    for alias in list(modules):
        parent = alias.rpartition(".")[0]
        while parent and parent not in modules:
            package = types.ModuleType(parent, "Theano's package (theano_dag's alias)")
            package.__path__ = []
            modules[parent] = package
            parent = parent.rpartition(".")[0]
    return modules


def _link_children(modules: dict):
    """Make each aliased module an attribute of its parent, as an import would, where the
    parent has no other object of that name (theano_dag.compile.function is a function
    there, and stays one)."""
    for alias, module in modules.items():
        parent, _, child = alias.rpartition(".")
        if not parent:
            continue
        holder = modules[parent]
        current = getattr(holder, child, None)  # theano's own reads theano_dag's
        if current is None or isinstance(current, types.ModuleType):
            setattr(holder, child, module)


def _star_names(modules: dict, table: dict):
    """Give each module of ``table`` the names its Theano star import gave (``__all__``
    extended with those it has; ``theano``'s list is its own, theano_dag's read through
    and left as it is)."""
    for alias, names in table.items():
        module = modules.get(alias)
        exported = getattr(module, "__all__", None)
        if exported is None:  # no list: a star import gives every public name already
            continue
        extra = [n for n in names if n not in exported and hasattr(module, n)]
        if extra:
            module.__all__ = [*exported, *extra]


def install():
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(getattr(f, MARKER, False) for f in sys.meta_path):
        sys.meta_path.insert(0, TheanoAliasFinder())
