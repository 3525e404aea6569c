"""The table of the standard rewrites: which DB of the optdb each one goes into.

This is the one way a standard rule is registered: a decorator of the table named for
the DB the rule goes into (``@RULES.canonicalize("fast_compile")`` above a function
rule; ``RULES.canonicalize()(pattern(...))`` for a pattern rule).
``theano_dag.opt.optdb.build_optdb`` reads the table to fill a *fresh* optdb. Nothing is
registered into a global registry at import time, so a test can build as many
independent optdbs as it likes.

>>> from theano_dag.graph.rewriting.local import local_optimizer
>>> rules = RuleTable()
>>> @rules.canonicalize("fast_compile")
... @local_optimizer(None)
... def local_nothing(fgraph, node):
...     return False
>>> @rules.useless()
... @local_optimizer(None)
... def local_nothing_either(fgraph, node):
...     return False
>>> [(r.db, r.name, r.tags) for r in rules]  # doctest: +NORMALIZE_WHITESPACE
[('canonicalize', 'local_nothing', ('fast_compile',)),
 ('useless', 'local_nothing_either', ('fast_compile',)),
 ('canonicalize', 'local_nothing_either', ('fast_compile',))]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from theano_dag.graph.rewriting.basic import opt_name

__all__ = ["Rule", "RuleTable", "RULES"]

# The EquilibriumDBs (and the TopoDB) of the optdb that take local rewrites.
LOCAL_DBS = (
    "useless",
    "conv_fold",
    "canonicalize",
    "stabilize",
    "specialize",
    "blas",
    "fma",
    "uncanonicalize",
    "fused_reduce",
    "inplace",
)


@dataclass(frozen=True)
class Rule:
    """One rewrite to register: ``db[name] = rewrite`` with ``tags`` (plus 'fast_run',
    unless ``opt_in``: then only a query naming it runs it)."""

    db: str
    name: str
    rewrite: object
    tags: tuple = ()
    kwargs: dict = field(default_factory=dict)
    opt_in: bool = False


class RuleTable:
    """An ordered list of ``Rule``s, filled by decorators, read by ``build_optdb``."""

    def __init__(self):
        self.rules: list = []

    def add(self, db, rewrite, *tags, name=None, opt_in=False, **kwargs):
        """Record ``rewrite`` for the DB ``db``; returns the rewrite (usable as decorator).
        ``opt_in=True``: a rewrite no mode runs unless its query names it (or a tag of
        it), as Theano's ``local_remove_all_assert``."""
        if db not in LOCAL_DBS:
            raise ValueError(f"RuleTable.add: unknown DB {db!r}; expected one of {LOCAL_DBS}")
        name = name or opt_name(rewrite)
        if any(r.name == name and r.db == db for r in self.rules):
            raise ValueError(f"RuleTable.add: a rule named {name!r} is already in {db!r}")
        self.rules.append(Rule(db, name, rewrite, tuple(tags), dict(kwargs), opt_in))
        return rewrite

    def _decorator(self, db, tags, kwargs):
        def decorate(rewrite):
            return self.add(db, rewrite, *tags, **kwargs)

        return decorate

    def useless(self, *tags, canonicalize=True, **kwargs):
        """Decorator: a rule that only removes computations; it runs in the early
        ``useless`` pass and (unless ``canonicalize=False``) again in canonicalize, both
        times in FAST_COMPILE too."""

        def decorate(rewrite):
            self.add("useless", rewrite, "fast_compile", *tags, **kwargs)
            if canonicalize:
                self.add("canonicalize", rewrite, "fast_compile", *tags, **kwargs)
            return rewrite

        return decorate

    def conv_fold(self, *tags, **kwargs):
        """Decorator: a rule of the ``conv_fold`` EquilibriumDB (before canonicalize)."""
        return self._decorator("conv_fold", tags, kwargs)

    def canonicalize(self, *tags, **kwargs):
        """Decorator: a rule of the ``canonicalize`` EquilibriumDB."""
        return self._decorator("canonicalize", tags, kwargs)

    def stabilize(self, *tags, **kwargs):
        """Decorator: a rule of the ``stabilize`` EquilibriumDB."""
        return self._decorator("stabilize", tags, kwargs)

    def specialize(self, *tags, **kwargs):
        """Decorator: a rule of the ``specialize`` EquilibriumDB."""
        return self._decorator("specialize", tags, kwargs)

    def blas(self, *tags, **kwargs):
        """Decorator: a rule of the ``blas`` EquilibriumDB (dot plus accumulation)."""
        return self._decorator("blas", tags, kwargs)

    def fma(self, *tags, **kwargs):
        """Decorator: a rule of the ``fma`` pass (one out-to-in walk after specialize)."""
        return self._decorator("fma", tags, kwargs)

    def uncanonicalize(self, *tags, **kwargs):
        """Decorator: a rule of the ``uncanonicalize`` EquilibriumDB (after specialize)."""
        return self._decorator("uncanonicalize", tags, kwargs)

    def fused_reduce(self, *tags, **kwargs):
        """Decorator: a rule of the ``fused_reduce`` pass (one walk after fusion)."""
        return self._decorator("fused_reduce", tags, kwargs)

    def __iter__(self):
        return iter(self.rules)

    def __len__(self):
        return len(self.rules)


# The table of theano_dag's own rewrites (filled when theano_dag.opt.rewrites is imported).
RULES = RuleTable()
