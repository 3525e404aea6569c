"""Optimizer databases (``theano.graph.optdb``): rewrites registered by name and tags.

A ``DB`` maps names and tags to optimizers; ``query`` picks the ones a ``Query``
selects and builds an optimizer from them: a ``SequenceDB`` gives a ``SeqOptimizer``
ordered by position, an ``EquilibriumDB`` an ``EquilibriumOptimizer``, a
``LocalGroupDB`` a ``LocalOptGroup``. A DB may contain other DBs; a query reaches
into them (with ``Query.subquery[name]`` when given).

Registries are plain objects: a test can build a fresh one. The tag ``cxx_only`` marks
rewrites that need a C compiler; queries leave them out while ``config.cxx`` is empty.
"""

from __future__ import annotations

import math
import sys
from io import StringIO

from theano_dag.config import config
from theano_dag.graph.rewriting import basic as opt  # noqa: F401 (Theano's optdb.opt)
from theano_dag.graph.rewriting.basic import GlobalOptimizer, SeqOptimizer
from theano_dag.graph.rewriting.local import LocalOptGroup, LocalOptimizer
from theano_dag.graph.rewriting.navigator import (
    EquilibriumOptimizer,
    NavigatorOptimizer,
    TopoOptimizer,
)

__all__ = ["DB", "Query", "SequenceDB", "EquilibriumDB", "LocalGroupDB", "TopoDB", "ProxyDB"]

# Tag of rewrites that insert ops with only a C implementation.
CXX_ONLY = "cxx_only"

# Every change of any DB (register, add_tags, remove_tags) bumps this counter, so that a
# check of what the DBs hold can be kept until the next change (compile.function_cache).
_CHANGES = [0]


def changes() -> int:
    """How many times a DB changed in this process (any DB, any change)."""
    return _CHANGES[0]


def _made_by_theano_dag() -> bool:
    """Whether the DB change being made comes from theano_dag's own modules as they are
    imported: the frames from the caller outward reach the top level of a theano_dag
    module before any frame of code outside theano_dag (a user's module or function)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__") or ""
        if not (name == "theano_dag" or name.startswith("theano_dag.")):
            return False
        if frame.f_code.co_name == "<module>":
            return True
        frame = frame.f_back
    return True


class _OrderedSet(dict):
    """Insertion-ordered set of objects (by identity of hash), enough for a DB."""

    def add(self, x):
        self[x] = None

    def discard(self, x):
        self.pop(x, None)


def _tags(tags, what):
    if tags is None:
        return []
    if isinstance(tags, str):
        return [tags]
    tags = list(tags)
    for t in tags:
        # None is a tag no optimizer has: Theano's tests write Query(include=[None]) for
        # a query that selects nothing.
        if not isinstance(t, str) and t is not None:
            raise TypeError(f"Query: {what} tags must be strings (or None), got {t!r}")
    return tags


class Query:
    """Which optimizers to take from a DB.

    ``include``: an optimizer is taken if it has one of these tags (or names);
    ``require``: ... and all of these; ``exclude``: ... and none of these;
    ``subquery``: ``{db name: Query}`` used inside that sub-DB instead of this one;
    ``position_cutoff``: a SequenceDB keeps only positions below it.

    >>> q = Query(include=["fast_run"]).excluding("inplace")
    >>> sorted(q.include), sorted(q.exclude)
    (['fast_run'], ['inplace'])
    """

    def __init__(
        self,
        include,
        require=None,
        exclude=None,
        subquery=None,
        position_cutoff=math.inf,
        extra_optimizations=None,
    ):
        self.include = dict.fromkeys(_tags(include, "include"))
        self.require = dict.fromkeys(_tags(require, "require"))
        self.exclude = dict.fromkeys(_tags(exclude, "exclude"))
        self.subquery = dict(subquery or {})
        self.position_cutoff = math.inf if position_cutoff is None else position_cutoff
        self.extra_optimizations = list(extra_optimizations or [])

    def _copy(self, **changes):
        args = dict(
            include=list(self.include),
            require=list(self.require),
            exclude=list(self.exclude),
            subquery=self.subquery,
            position_cutoff=self.position_cutoff,
            extra_optimizations=self.extra_optimizations,
        )
        args.update(changes)
        return Query(**args)

    def including(self, *tags):
        """A new Query that also includes ``tags``."""
        return self._copy(include=list(self.include) + _tags(tags, "include"))

    def excluding(self, *tags):
        """A new Query that also excludes ``tags``."""
        return self._copy(exclude=list(self.exclude) + _tags(tags, "exclude"))

    def requiring(self, *tags):
        """A new Query that also requires ``tags``."""
        return self._copy(require=list(self.require) + _tags(tags, "require"))

    def register(self, *optimizations):
        """A new Query whose SequenceDB result also runs ``(optimizer, position)`` pairs."""
        return self._copy(extra_optimizations=self.extra_optimizations + list(optimizations))

    def __repr__(self):
        return (
            f"Query(include={list(self.include)}, require={list(self.require)}, "
            f"exclude={list(self.exclude)}, subquery={self.subquery}, "
            f"position_cutoff={self.position_cutoff})"
        )

    __str__ = __repr__

    def __eq__(self, other):
        return (
            isinstance(other, Query)
            and repr(self) == repr(other)
            and (self.extra_optimizations == other.extra_optimizations)
        )

    def __hash__(self):
        return hash(repr(self))


class DB:
    """Optimizers (or DBs) registered under a unique name and any number of tags.

    >>> from theano_dag.graph.rewriting.basic import optimizer
    >>> db = DB()
    >>> db.register("nothing", optimizer(lambda fg: None), "fast_run")
    >>> "nothing" in db, [o.name for o in db.query("+fast_run")]
    (True, ['nothing'])
    """

    def __init__(self):
        self.__db__: dict = {}
        self._names: set = set()
        self._registered: dict = {}  # id(obj) -> name, to refuse registering an object twice
        self.name = None  # set by the DB this one is registered in
        # Other names of this DB (Theano's): what it registers answers to them as tags too.
        self.name_aliases: tuple = ()
        # Changes made by code outside theano_dag (a user's rewrite): the function cache
        # leaves the graphs of a query over this DB uncached when there is one.
        self.foreign_changes = 0

    def _changed(self):
        _CHANGES[0] += 1
        if not _made_by_theano_dag():
            self.foreign_changes += 1

    def __setattr__(self, name, value):
        # An attribute a query reads (``max_use_ratio``, ``failure_callback``...) counts
        # as a change: the optimizers queried before are not reused (compile.mode keeps
        # them per DB state).
        object.__setattr__(self, name, value)
        _CHANGES[0] += 1

    __hash__ = object.__hash__

    def register(self, name, obj, *tags, **kwargs):
        """Register ``obj`` as ``name`` with ``tags``.

        ``use_db_name_as_tag=False`` keeps this DB's own name out of the tags (by
        default everything in a DB named ``canonicalize`` is tagged ``canonicalize``).
        """
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"{type(self).__name__}.register: the name must be a non-empty "
                f"string, got {name!r}"
            )
        if not isinstance(obj, (DB, GlobalOptimizer, LocalOptimizer)):
            raise TypeError(
                f"{type(self).__name__}.register({name!r}): {obj!r} is not an optimizer, "
                "local optimizer or DB"
            )
        if name in self.__db__:
            what = "the name of another registered object" if name in self._names else "a tag"
            raise ValueError(
                f"The name {name!r} is already {what} in this DB "
                f"({type(self).__name__}.register); choose another name"
            )
        use_db_name = kwargs.pop("use_db_name_as_tag", True)
        if kwargs:
            raise TypeError(
                f"{type(self).__name__}.register: unexpected arguments " f"{sorted(kwargs)}"
            )
        for t in tags:
            if not isinstance(t, str):
                raise TypeError(f"register({name!r}): tags must be strings, got {t!r}")
            if t in self._names:
                raise ValueError(
                    f"The tag {t!r} given to register({name!r}) is the name of a registered "
                    "object"
                )
        other = self._registered.get(id(obj))
        if other is not None:
            raise ValueError(
                f"register({name!r}): this object is already registered as {other!r}; "
                "use a ProxyDB to register it twice"
            )
        if use_db_name and self.name is not None:
            tags = tags + (self.name, *self.name_aliases)
        obj.name = name
        self.__db__[name] = _OrderedSet({obj: None})
        self._names.add(name)
        self._registered[id(obj)] = name
        self.__db__.setdefault(type(obj).__name__, _OrderedSet()).add(obj)
        self._add_tags(name, tags)
        self._changed()

    def add_tags(self, name, *tags):
        """Give the object registered as ``name`` more tags."""
        self._add_tags(name, tags)
        self._changed()

    def _add_tags(self, name, tags):
        obj = self[name]
        for tag in tags:
            if tag in self._names:
                raise ValueError(
                    f"add_tags({name!r}): the tag {tag!r} is the name of a " "registered object"
                )
            self.__db__.setdefault(tag, _OrderedSet()).add(obj)

    def remove_tags(self, name, *tags):
        """Take tags away from the object registered as ``name``."""
        obj = self[name]
        for tag in tags:
            if tag in self._names:
                raise ValueError(f"remove_tags({name!r}): {tag!r} is a name, not a tag")
            self.__db__.get(tag, _OrderedSet()).discard(obj)
        self._changed()

    def names(self) -> list:
        """The registered names, in registration order."""
        return [n for n in self.__db__ if n in self._names]

    def tags_of(self, name) -> list:
        """The tags (and name) the object registered as ``name`` answers to."""
        obj = self[name]
        return [t for t, objs in self.__db__.items() if obj in objs]

    def __query__(self, q):
        if not isinstance(q, Query):
            raise TypeError(f"{type(self).__name__}.query: expected a Query, got {q!r}")
        selected = _OrderedSet()
        for tag in q.include:
            selected.update(self.__db__.get(tag, {}))
        for tag in q.require:
            have = self.__db__.get(tag, {})
            selected = _OrderedSet((o, None) for o in selected if o in have)
        exclude = list(q.exclude)
        if not config.cxx:
            exclude.append(CXX_ONLY)
        for tag in exclude:
            for o in self.__db__.get(tag, {}):
                selected.discard(o)
        result = _OrderedSet()
        for obj in selected:
            if isinstance(obj, DB):
                sub_q = q.subquery.get(obj.name)
                if sub_q is None:
                    sub_q = q._copy(extra_optimizations=[]) if q.extra_optimizations else q
                replacement = obj.query(sub_q)
                if isinstance(replacement, list):  # a plain DB: group what it selected
                    if replacement and all(isinstance(o, LocalOptimizer) for o in replacement):
                        replacement = LocalOptGroup(*replacement)
                    else:
                        replacement = SeqOptimizer(replacement)
                replacement.name = obj.name
                result.add(replacement)
            else:
                result.add(obj)
        return list(result)

    def query(self, *tags, **kwtags):
        """Select optimizers: ``query(Query(...))`` or ``query('+tag', '&tag', '-tag')``.

        ``+`` includes, ``&`` requires, ``-`` excludes; keyword arguments are subqueries.
        A plain DB returns the list of what it selected; the subclasses build an optimizer.
        """
        if tags and isinstance(tags[0], Query):
            if len(tags) > 1 or kwtags:
                raise TypeError("query: give either one Query or tag strings, not both")
            return self.__query__(tags[0])
        bad = [t for t in tags if not isinstance(t, str) or t[:1] not in ("+", "&", "-")]
        if bad:
            raise ValueError(
                f"query: every tag must start with '+' (include), '&' (require) or "
                f"'-' (exclude); got {bad[0]!r}"
            )
        return self.__query__(
            Query(
                include=[t[1:] for t in tags if t[0] == "+"],
                require=[t[1:] for t in tags if t[0] == "&"],
                exclude=[t[1:] for t in tags if t[0] == "-"],
                subquery=kwtags,
            )
        )

    def __getitem__(self, name):
        objs = self.__db__.get(name)
        if not objs:
            raise KeyError(f"Nothing registered as {name!r} in this {type(self).__name__}")
        if len(objs) > 1:
            raise ValueError(f"{name!r} is a tag of {len(objs)} objects; use query")
        return next(iter(objs))

    def __contains__(self, name):
        return name in self.__db__

    def __iter__(self):
        return iter(self.names())

    def print_summary(self, stream=sys.stdout):
        print(f"{type(self).__name__} (id {id(self)})", file=stream)
        for name in self.names():
            tags = [t for t in self.tags_of(name) if t != name]
            print(f"  {name}: {', '.join(tags)}", file=stream)

    def __str__(self):
        sio = StringIO()
        self.print_summary(sio)
        return sio.getvalue()


def _position(position, name, positions):
    if position == "last":
        return max(positions.values(), default=-1) + 1
    if isinstance(position, bool) or not isinstance(position, (int, float)):
        raise TypeError(
            f"register({name!r}): position must be a number or 'last', got " f"{position!r}"
        )
    return position


class SequenceDB(DB):
    """Optimizers applied one after the other, in increasing ``position``.

    ``register(name, obj, position, *tags)`` (``position`` may also be a keyword or
    'last'). ``query`` returns a ``SeqOptimizer``.

    >>> from theano_dag.graph.rewriting.basic import optimizer
    >>> db = SequenceDB()
    >>> db.register("b", optimizer(lambda fg: None), 2, "fast_run")
    >>> db.register("a", optimizer(lambda fg: None), 1, "fast_run")
    >>> [o.name for o in db.query("+fast_run")], db.positions()
    (['a', 'b'], {'b': 2, 'a': 1})
    """

    seq_opt = SeqOptimizer

    def __init__(self, failure_callback=None):
        super().__init__()
        self.__position__: dict = {}
        self.failure_callback = failure_callback

    def register(self, name, obj, *args, **kwargs):
        if "position" in kwargs:
            position, tags = kwargs.pop("position"), args
        elif args:
            position, tags = args[0], args[1:]
        else:
            raise TypeError(f"SequenceDB.register({name!r}): missing the position")
        position = _position(position, name, self.__position__)
        super().register(name, obj, *tags, **kwargs)
        self.__position__[name] = position

    def positions(self) -> dict:
        """``{name: position}`` of everything registered (the order is data)."""
        return dict(self.__position__)

    def query(self, *tags, **kwtags):
        position_cutoff = kwtags.pop("position_cutoff", math.inf)
        opts = list(super().query(*tags, **kwtags))
        positions = self.__position__
        if tags and isinstance(tags[0], Query):
            q = tags[0]
            if q.position_cutoff is not None:
                position_cutoff = min(position_cutoff, q.position_cutoff)
            if q.extra_optimizations:
                positions = dict(positions)
                for extra, pos in q.extra_optimizations:
                    extra.name = (
                        getattr(extra, "name", None) or f"{type(extra).__name__}_{id(extra)}"
                    )
                    positions[extra.name] = pos
                    opts.append(extra)
        opts = [o for o in opts if positions[o.name] < position_cutoff]
        opts.sort(key=lambda o: (positions[o.name], o.name))
        return self.seq_opt(opts, failure_callback=self.failure_callback)

    def print_summary(self, stream=sys.stdout):
        print(f"{type(self).__name__} (id {id(self)})", file=stream)
        print("  position  name  tags", file=stream)
        for name, pos in sorted(self.__position__.items(), key=lambda kv: (kv[1], kv[0])):
            tags = [t for t in self.tags_of(name) if t != name]
            print(f"  {pos:>8g}  {name}  {', '.join(tags)}", file=stream)


class EquilibriumDB(DB):
    """Local (and global) optimizers applied until none changes the graph.

    ``query`` returns an ``EquilibriumOptimizer``. ``register(..., final_opt=True)``
    runs a global optimizer after each round, ``cleanup=True`` after every change.
    """

    def __init__(self, ignore_newtrees=True, tracks_on_change_inputs=False, max_use_ratio=None):
        super().__init__()
        self.ignore_newtrees = ignore_newtrees
        self.tracks_on_change_inputs = tracks_on_change_inputs
        self.max_use_ratio = max_use_ratio
        self.__final__: dict = {}
        self.__cleanup__: dict = {}

    def register(self, name, obj, *tags, **kwargs):
        final_opt = kwargs.pop("final_opt", False)
        cleanup = kwargs.pop("cleanup", False)
        if final_opt and cleanup:
            raise ValueError(
                f"EquilibriumDB.register({name!r}): an optimizer cannot be both "
                "final_opt and cleanup"
            )
        super().register(name, obj, *tags, **kwargs)
        self.__final__[name] = final_opt
        self.__cleanup__[name] = cleanup

    def query(self, *tags, **kwtags):
        opts = list(super().query(*tags, **kwtags))
        final = [o for o in opts if self.__final__.get(o.name, False)]
        cleanup = [o for o in opts if self.__cleanup__.get(o.name, False)]
        rest = [o for o in opts if o not in final and o not in cleanup]
        return EquilibriumOptimizer(
            rest,
            max_use_ratio=self.max_use_ratio,
            ignore_newtrees=self.ignore_newtrees,
            tracks_on_change_inputs=self.tracks_on_change_inputs,
            failure_callback=NavigatorOptimizer.warn_inplace,
            final_optimizers=final,
            cleanup_optimizers=cleanup,
        )


class LocalGroupDB(DB):
    """Local optimizers grouped into one ``LocalOptGroup`` (ordered by ``position``)."""

    def __init__(self, apply_all_opts=False, profile=False, local_opt=LocalOptGroup):
        super().__init__()
        self.failure_callback = None
        self.apply_all_opts = apply_all_opts
        self.profile = profile
        self.local_opt = local_opt
        self.__position__: dict = {}

    def register(self, name, obj, *tags, **kwargs):
        position = kwargs.pop("position", "last")
        if not isinstance(obj, LocalOptimizer):
            raise TypeError(f"LocalGroupDB.register({name!r}): {obj!r} is not a local optimizer")
        position = _position(position, name, self.__position__)
        super().register(name, obj, *tags, **kwargs)
        self.__position__[name] = position

    def query(self, *tags, **kwtags):
        opts = list(super().query(*tags, **kwtags))
        opts.sort(key=lambda o: (self.__position__[o.name], o.name))
        return self.local_opt(*opts, apply_all_opts=self.apply_all_opts, profile=self.profile)


class TopoDB(DB):
    """Wrap a DB of local optimizers: ``query`` gives a ``TopoOptimizer`` over its result."""

    def __init__(self, db, order="in_to_out", ignore_newtrees=False, failure_callback=None):
        super().__init__()
        self.db = db
        self.order = order
        self.ignore_newtrees = ignore_newtrees
        self.failure_callback = failure_callback

    def query(self, *tags, **kwtags):
        return TopoOptimizer(
            self.db.query(*tags, **kwtags), self.order, self.ignore_newtrees, self.failure_callback
        )


class ProxyDB(DB):
    """Stand-in for another DB, so that one DB can sit at two places of a SequenceDB."""

    def __init__(self, db):
        if not isinstance(db, DB):
            raise TypeError(f"ProxyDB: expected a DB, got {db!r}")
        super().__init__()
        self.db = db

    def query(self, *tags, **kwtags):
        return self.db.query(*tags, **kwtags)
