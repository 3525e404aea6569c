"""Plain-dict graph formats: dag, tuple-dag, index-dag and unidag, and conversions.

A computation is a set of *jobs*; a job applies ``fn`` to a tuple of argument
variables and produces one or more output variables. The four formats write
the same jobs differently (variables are any hashable objects except tuples,
``fn`` any object at all)::

    tuple-dag  {(c, d): {'fn': op, 'args': (a, b)}}          one key per job
    index-dag  {(c, d): {'fn': op, 'args': (a, b)},          tuple-dag plus one
                c: {'fn': index, 'args': ((c, d), 0)},       `index` entry per
                d: {'fn': index, 'args': ((c, d), 1)}}       output
    dag        like index-dag, but a job with one output is keyed by that
               output itself: {c: {'fn': op, 'args': (a, b)}}
    unidag     {job: (jobs it immediately precedes, ...)}    jobs only

Tuples are reserved for the keys of multi-output jobs, which is why a variable
cannot itself be a tuple. Graph inputs are the arguments no job defines; pass
``inputs=`` to any function here to have them checked against a declared tuple.
Every conversion validates its input and raises :class:`GraphFormatError` (a
``ValueError``) naming what is wrong: a cycle, an undefined argument, an index
out of range, a variable defined twice.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

__all__ = [
    "FORMATS",
    "CycleError",
    "GraphFormatError",
    "IndexOutOfRangeError",
    "convert",
    "dag_jobs",
    "dag_to_index_dag",
    "dag_to_unidag",
    "detect_format",
    "graph_inputs",
    "graph_outputs",
    "index",
    "index_dag_to_dag",
    "index_dag_to_tuple_dag",
    "interpret",
    "register_conversion",
    "toposort",
    "tuple_dag_to_index_dag",
    "unidag_to_dag",
    "validate",
]

#: The dict formats, in the order of the conversion chain of the seed.
FORMATS = ("tuple_dag", "index_dag", "dag", "unidag")
_JOB_FORMATS = FORMATS[:3]


class _IndexKeyword:
    """The ``index`` keyword: the ``fn`` of entries that pick one output of a job.

    It is a singleton (copies and pickles give it back) and also a function:
    ``index(outs, i)`` is ``outs[i]``, so an index-dag can be run as it is.

    >>> index
    index
    >>> index(('c', 'd'), 1)
    'd'
    """

    __slots__ = ()
    __name__ = "index"
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __call__(self, outputs, i):
        return outputs[i]

    def __repr__(self):
        return "index"

    def __reduce__(self):
        # pickle stores a reference to the module attribute, keeping one instance
        return "index"

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


index = _IndexKeyword()


class GraphFormatError(ValueError):
    """A dict graph that breaks the rules of its format."""


class CycleError(GraphFormatError):
    """A graph with a cycle; ``.cycle`` lists the variables (or jobs) on it, closed."""

    def __init__(self, message, cycle):
        super().__init__(message)
        self.cycle = tuple(cycle)


class IndexOutOfRangeError(GraphFormatError, IndexError):
    """An ``index`` entry whose position is not an output of its job."""


# -- parsing and validation ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    key: Hashable  # the job's dict key: its only output, or the tuple of its outputs
    outs: tuple
    fn: object
    args: tuple


@dataclass
class _Parsed:
    jobs: list  # in dict order
    producer: dict  # variable -> _Job
    order: list  # jobs, each after the jobs it depends on
    inputs: tuple  # declared inputs, or the undefined arguments in order of first use


def _fmt_name(fmt):
    name = str(fmt).replace("-", "_").lower()
    if name not in FORMATS and name not in _EXTRA_FORMATS:
        known = ", ".join(FORMATS + tuple(_EXTRA_FORMATS))
        raise ValueError(f"unknown graph format {fmt!r}; expected one of {known}")
    return name


def _check_entry(key, entry):
    if not isinstance(entry, Mapping) or set(entry) != {"fn", "args"}:
        raise TypeError(
            f"entry for {key!r} must be a dict {{'fn': ..., 'args': (...)}}, got {entry!r}"
        )
    if not isinstance(entry["args"], tuple):
        raise TypeError(f"'args' of entry {key!r} must be a tuple, got {entry['args']!r}")
    return entry["fn"], entry["args"]


def _check_variable(var, where):
    if isinstance(var, tuple):
        raise GraphFormatError(
            f"{where} is the tuple {var!r}; variables cannot be tuples "
            "(tuple keys name the outputs of one job)"
        )
    try:
        hash(var)
    except TypeError:
        raise TypeError(f"{where} is {var!r}, which is not hashable") from None


def _same(a, b):
    return a is b or a == b


def _parse(graph, fmt, inputs=None, outputs=None):
    """Check ``graph`` against the rules of ``fmt`` and return its jobs in order."""
    if not isinstance(graph, Mapping):
        raise TypeError(f"a {fmt} must be a dict, got {type(graph).__name__}")
    jobs, index_entries = [], []
    for key, entry in graph.items():
        fn, args = _check_entry(key, entry)
        if fn is index:
            if fmt == "tuple_dag":
                raise GraphFormatError(
                    f"entry {key!r} uses `index`, which a tuple-dag does not have "
                    "(is this an index-dag?)"
                )
            index_entries.append((key, args))
            continue
        if isinstance(key, tuple):
            if not key:
                raise GraphFormatError("a job must have at least one output; got the key ()")
            if fmt == "dag" and len(key) == 1:
                raise GraphFormatError(
                    f"job {key!r} has one output; a dag keys it by {key[0]!r} itself "
                    "(is this an index-dag?)"
                )
            outs = key
        elif fmt == "dag":
            outs = (key,)
        else:
            raise GraphFormatError(
                f"key {key!r} of a {fmt} entry must be a tuple of outputs "
                f"(or an `index` entry); a non-tuple job key belongs to a dag"
            )
        for i, out in enumerate(outs):
            _check_variable(out, f"output {i} of job {key!r}")
        jobs.append(_Job(key, outs, fn, args))

    producer = {}
    for job in jobs:
        for out in job.outs:
            if out in producer:
                other = producer[out].key
                where = "twice by job" if other is job.key else f"by jobs {other!r} and"
                raise GraphFormatError(f"variable {out!r} is defined {where} {job.key!r}")
            producer[out] = job

    _check_index_entries(fmt, jobs, index_entries, producer)
    declared = _check_inputs(inputs, producer)
    found = {}
    for job in jobs:
        for i, arg in enumerate(job.args):
            _check_variable(arg, f"argument {i} of job {job.key!r}")
            if arg in producer or arg in found:
                continue
            if declared is not None and arg not in declared:
                raise GraphFormatError(
                    f"argument {arg!r} of job {job.key!r} is defined by no entry "
                    f"and is not a declared input"
                )
            found[arg] = None
    for out in outputs or ():
        if out not in producer and (declared is None or out not in declared):
            raise GraphFormatError(f"output {out!r} is defined by no entry and is no input")
    order = _job_order(jobs, producer)
    return _Parsed(jobs, producer, order, tuple(declared if declared is not None else found))


def _check_index_entries(fmt, jobs, index_entries, producer):
    indexed = {}
    for key, args in index_entries:
        if isinstance(key, tuple):
            raise GraphFormatError(
                f"`index` entry keyed by the tuple {key!r}; it must be keyed "
                "by the variable it picks"
            )
        if len(args) != 2 or not isinstance(args[0], tuple):
            raise GraphFormatError(
                f"`index` entry for {key!r} must have args (outputs_tuple, position), got {args!r}"
            )
        outs, i = args
        job = producer.get(outs[0]) if outs else None
        if job is None or job.key != outs:
            raise GraphFormatError(
                f"`index` entry for {key!r} refers to {outs!r}, which is no job of this {fmt}"
            )
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"position of `index` entry {key!r} must be an int, got {i!r}")
        if not 0 <= i < len(outs):
            raise IndexOutOfRangeError(
                f"`index` entry for {key!r} picks output {i} of job {outs!r}, "
                f"which has {len(outs)} outputs"
            )
        if not _same(outs[i], key):
            raise GraphFormatError(
                f"`index` entry for {key!r} picks output {i} of job {outs!r}, which is {outs[i]!r}"
            )
        indexed[key] = True
    if fmt == "tuple_dag":
        return
    for job in jobs:
        if isinstance(job.key, tuple):
            for out in job.outs:
                if out not in indexed:
                    raise GraphFormatError(
                        f"output {out!r} of job {job.key!r} has no `index` entry; "
                        f"a {fmt} needs one per output of a tuple-keyed job"
                    )


def _check_inputs(inputs, producer):
    if inputs is None:
        return None
    declared = {}
    for i, var in enumerate(inputs):
        _check_variable(var, f"input {i}")
        if var in declared:
            raise GraphFormatError(f"input {var!r} is declared twice")
        if var in producer:
            raise GraphFormatError(f"input {var!r} is also defined by job {producer[var].key!r}")
        declared[var] = None
    return declared


def _job_order(jobs, producer):
    """Kahn's algorithm over jobs; leftovers mean a cycle, reported by its variables."""
    deps = {
        id(job): {id(producer[a]): producer[a] for a in job.args if a in producer} for job in jobs
    }
    users = {id(job): [] for job in jobs}
    for job in jobs:
        for dep_id in deps[id(job)]:
            users[dep_id].append(job)
    waiting = {id(job): len(deps[id(job)]) for job in jobs}
    # a heap on dict position keeps the order stable: a graph already in order stays so
    rank = {id(job): k for k, job in enumerate(jobs)}
    ready = [(rank[id(job)], job) for job in jobs if not waiting[id(job)]]
    order = []
    while ready:
        _, job = heapq.heappop(ready)
        order.append(job)
        for user in users[id(job)]:
            waiting[id(user)] -= 1
            if not waiting[id(user)]:
                heapq.heappush(ready, (rank[id(user)], user))
    if len(order) == len(jobs):
        return order
    # Every job left waits on another job left, so walking back from one reaches a cycle.
    job = next(j for j in jobs if waiting[id(j)])
    seen, path = {}, []  # path[k] = (job, variable it uses from the next job on the path)
    while id(job) not in seen:
        seen[id(job)] = len(path)
        var = next(a for a in job.args if a in producer and waiting[id(producer[a])])
        path.append((job, var))
        job = producer[var]
    cycle_vars = [var for _, var in path[seen[id(job)] :]][::-1]  # in data-flow order
    cycle = cycle_vars + cycle_vars[:1]
    raise CycleError(
        "the graph has a cycle through the variables " + " -> ".join(map(repr, cycle)), cycle
    )


def _parse_unidag(unidag):
    if not isinstance(unidag, Mapping):
        raise TypeError(f"a unidag must be a dict, got {type(unidag).__name__}")
    for job, nexts in unidag.items():
        if not isinstance(nexts, tuple):
            raise TypeError(f"unidag entry for job {job!r} must be a tuple of jobs, got {nexts!r}")
        seen = set()
        for nxt in nexts:
            if nxt not in unidag:
                raise GraphFormatError(
                    f"job {job!r} precedes {nxt!r}, which is not a job of the unidag "
                    "(every job is a key; one that precedes nothing maps to ())"
                )
            if nxt in seen:
                raise GraphFormatError(f"job {job!r} lists {nxt!r} twice")
            seen.add(nxt)
    # Reuse the job toposort: job j "uses" each job that precedes it.
    before = {job: [] for job in unidag}
    for job, nexts in unidag.items():
        for nxt in nexts:
            before[nxt].append(job)
    fake = [_Job(job, (job,), None, tuple(before[job])) for job in unidag]
    try:
        order = _job_order(fake, {job.key: job for job in fake})
    except CycleError as err:
        raise CycleError(
            "the unidag has a cycle through the jobs " + " -> ".join(map(repr, err.cycle)),
            err.cycle,
        ) from None
    return [job.key for job in order]


# -- writing jobs in each format ----------------------------------------------------------------


def _entry(fn, args):
    return {"fn": fn, "args": args}


def _write(jobs, fmt):
    out = {}
    for job in jobs:
        if fmt == "dag" and len(job.outs) == 1:
            out[job.outs[0]] = _entry(job.fn, job.args)
            continue
        out[job.outs] = _entry(job.fn, job.args)
        if fmt != "tuple_dag":
            for i, var in enumerate(job.outs):
                out[var] = _entry(index, (job.outs, i))
    return out


def _unidag_of(parsed):
    succ = {id(job): {} for job in parsed.jobs}
    for job in parsed.jobs:
        for arg in job.args:
            if arg in parsed.producer:
                succ[id(parsed.producer[arg])][id(job)] = job
    # successors listed in the order their jobs appear (canonical, so round trips are exact)
    rank = {id(job): k for k, job in enumerate(parsed.jobs)}
    return {
        job.key: tuple(j.key for j in sorted(succ[id(job)].values(), key=lambda j: rank[id(j)]))
        for job in parsed.jobs
    }


# -- public conversions -------------------------------------------------------------------------


def tuple_dag_to_index_dag(tuple_dag, *, inputs=None):
    """Add an ``index`` entry for every output of every job (the seed's "blown out" form).

    >>> tuple_dag_to_index_dag({('c', 'd'): {'fn': 'op', 'args': ('a', 'b')}})
    {('c', 'd'): {'fn': 'op', 'args': ('a', 'b')},
     'c': {'fn': index, 'args': (('c', 'd'), 0)},
     'd': {'fn': index, 'args': (('c', 'd'), 1)}}
    """
    return _write(_parse(tuple_dag, "tuple_dag", inputs).jobs, "index_dag")


def index_dag_to_tuple_dag(index_dag, *, inputs=None):
    """Drop the ``index`` entries of an index-dag, leaving one tuple-keyed entry per job.

    >>> index_dag_to_tuple_dag({('c',): {'fn': 'op', 'args': ('a',)},
    ...                         'c': {'fn': index, 'args': (('c',), 0)}})
    {('c',): {'fn': 'op', 'args': ('a',)}}
    """
    return _write(_parse(index_dag, "index_dag", inputs).jobs, "tuple_dag")


def index_dag_to_dag(index_dag, *, inputs=None):
    """Simplify an index-dag: a job with one output is keyed by that output, without ``index``.

    >>> index_dag_to_dag({('c',): {'fn': 'neg', 'args': ('a',)},
    ...                   'c': {'fn': index, 'args': (('c',), 0)}})
    {'c': {'fn': 'neg', 'args': ('a',)}}
    """
    return _write(_parse(index_dag, "index_dag", inputs).jobs, "dag")


def dag_to_index_dag(dag, *, inputs=None):
    """Blow a dag out into an index-dag: single-output jobs get a 1-tuple key and an ``index``.

    >>> dag_to_index_dag({'c': {'fn': 'neg', 'args': ('a',)}})
    {('c',): {'fn': 'neg', 'args': ('a',)}, 'c': {'fn': index, 'args': (('c',), 0)}}
    """
    return _write(_parse(dag, "dag", inputs).jobs, "index_dag")


def dag_to_unidag(dag, *, inputs=None):
    """Forget the variables of a dag: map each job to the jobs it immediately precedes.

    A job is named by its dag key (its output, or the tuple of its outputs). Every
    job is a key, one that precedes nothing maps to ``()``, and successors are
    listed in the order their jobs appear in ``dag``. Keep :func:`dag_jobs` of the
    dag to convert back with :func:`unidag_to_dag`.

    >>> dag = {'b': {'fn': 'neg', 'args': ('a',)},
    ...        'c': {'fn': 'exp', 'args': ('b',)},
    ...        'd': {'fn': 'add', 'args': ('b', 'c')}}
    >>> dag_to_unidag(dag)
    {'b': ('c', 'd'), 'c': ('d',), 'd': ()}
    """
    return _unidag_of(_parse(dag, "dag", inputs))


def dag_jobs(dag, *, inputs=None):
    """The jobs of a dag without its ``index`` entries: ``{job: {'fn': ..., 'args': ...}}``.

    This is what :func:`dag_to_unidag` forgets besides the edges, so
    ``unidag_to_dag(dag_to_unidag(dag), dag_jobs(dag)) == dag``.

    >>> dag_jobs({('c', 'd'): {'fn': 'divmod', 'args': ('a', 'b')},
    ...           'c': {'fn': index, 'args': (('c', 'd'), 0)},
    ...           'd': {'fn': index, 'args': (('c', 'd'), 1)}})
    {('c', 'd'): {'fn': 'divmod', 'args': ('a', 'b')}}
    """
    return {job.key: _entry(job.fn, job.args) for job in _parse(dag, "dag", inputs).jobs}


def unidag_to_dag(unidag, jobs, *, inputs=None):
    """Rebuild a dag from a unidag and the jobs it names.

    A unidag has no variables, so the ops and arguments come back in ``jobs``:
    ``{job: {'fn': op, 'args': (...)}}`` keyed exactly like the unidag (a job with
    one output by that output, a job with several by the tuple of them), as
    :func:`dag_jobs` returns them. The edges the arguments imply must be those of
    the unidag, else :class:`GraphFormatError` names the first that differs. The
    dag lists the jobs in the unidag's order.

    >>> unidag_to_dag({'b': ('c',), 'c': ()},
    ...               {'b': {'fn': 'neg', 'args': ('a',)}, 'c': {'fn': 'exp', 'args': ('b',)}})
    {'b': {'fn': 'neg', 'args': ('a',)}, 'c': {'fn': 'exp', 'args': ('b',)}}
    """
    _parse_unidag(unidag)
    if not isinstance(jobs, Mapping):
        raise TypeError(f"jobs must be a dict {{job: {{'fn':..., 'args':...}}}}, got {jobs!r}")
    missing = [job for job in unidag if job not in jobs]
    if missing:
        raise GraphFormatError(f"job {missing[0]!r} of the unidag has no entry in jobs")
    extra = [job for job in jobs if job not in unidag]
    if extra:
        raise GraphFormatError(f"jobs has an entry for {extra[0]!r}, which is no job of the unidag")
    parsed_jobs = []
    for key in unidag:
        fn, args = _check_entry(key, jobs[key])
        outs = key if isinstance(key, tuple) else (key,)
        parsed_jobs.append(_Job(key, outs, fn, args))
    dag = _write(parsed_jobs, "dag")
    implied = _unidag_of(_parse(dag, "dag", inputs))
    for job, nexts in unidag.items():
        given, found = set(nexts), set(implied[job])
        if given != found:
            wrong = sorted(map(repr, given ^ found))[0]
            said = "says" if wrong in map(repr, given - found) else "does not say"
            raise GraphFormatError(
                f"the unidag {said} that job {job!r} precedes {wrong}, but the jobs' arguments "
                f"{'do not agree' if said == 'says' else 'say so'}"
            )
    return dag


# -- format detection and conversion along the chain --------------------------------------------


def _step(conversion):
    return lambda graph, inputs=None, **_: conversion(graph, inputs=inputs)


_STEPS: dict[tuple[str, str], Callable] = {
    ("tuple_dag", "index_dag"): _step(tuple_dag_to_index_dag),
    ("index_dag", "tuple_dag"): _step(index_dag_to_tuple_dag),
    ("index_dag", "dag"): _step(index_dag_to_dag),
    ("dag", "index_dag"): _step(dag_to_index_dag),
    ("dag", "unidag"): _step(dag_to_unidag),
}
_EXTRA_FORMATS: dict[str, Callable] = {}  # name -> detector(graph) -> bool


def _unidag_to_dag_step(g, inputs=None, jobs=None, **_):
    if jobs is None:
        raise TypeError(
            "a unidag has no variables: converting it needs jobs={job: {'fn':..., 'args':...}} "
            "(see dag_jobs)"
        )
    return unidag_to_dag(g, jobs, inputs=inputs)


_STEPS[("unidag", "dag")] = _unidag_to_dag_step


def register_conversion(frm, to, fn, detect=None):
    """Add a step ``fn(graph, **options) -> graph`` from format ``frm`` to ``to`` for
    :func:`convert`; ``detect(graph) -> bool`` lets :func:`detect_format` recognise
    a new format. ``fn`` receives every option given to :func:`convert`.

    >>> register_conversion('pairs', 'dag', lambda g, **_: {k: {'fn': f, 'args': a}
    ...                                                     for k, f, a in g},
    ...                     detect=lambda g: isinstance(g, list))
    >>> convert([('b', 'neg', ('a',))], to='unidag')
    {'b': ()}
    >>> _ = _STEPS.pop(('pairs', 'dag')), _EXTRA_FORMATS.pop('pairs')
    """
    for name in (frm, to):
        if name not in FORMATS and name not in _EXTRA_FORMATS:
            _EXTRA_FORMATS[name] = None
    if detect is not None:
        _EXTRA_FORMATS[frm] = detect
    _STEPS[(frm, to)] = fn


def detect_format(graph):
    """Name the format of ``graph``: ``'tuple_dag'``, ``'index_dag'``, ``'dag'`` or ``'unidag'``.

    A graph whose jobs all have several outputs is written the same way as a dag
    and as an index-dag; it is reported as ``'index_dag'``. ``{}`` is a ``'dag'``.

    >>> detect_format({('c', 'd'): {'fn': 'op', 'args': ('a', 'b')}})
    'tuple_dag'
    >>> detect_format({'c': {'fn': 'op', 'args': ('a',)}})
    'dag'
    >>> detect_format({'a': ('b',), 'b': ()})
    'unidag'
    """
    for name, detect in _EXTRA_FORMATS.items():
        if detect is not None and detect(graph):
            return name
    if not isinstance(graph, Mapping):
        raise TypeError(
            f"cannot tell the format of a {type(graph).__name__}; expected a dict "
            "(dag, tuple_dag, index_dag or unidag) or pass frm="
        )
    if not graph:
        return "dag"
    kinds = set()
    for key, value in graph.items():
        if isinstance(value, Mapping) and "fn" in value:
            if value["fn"] is index:
                kinds.add("index")
            elif isinstance(key, tuple):
                kinds.add("tuple_job")
            else:
                kinds.add("single_job")
        elif isinstance(value, tuple):
            kinds.add("unidag")
        else:
            raise TypeError(
                f"entry for {key!r} is neither {{'fn': ..., 'args': ...}} (dag formats) "
                f"nor a tuple of jobs (unidag): {value!r}"
            )
    if "unidag" in kinds:
        if kinds != {"unidag"}:
            raise TypeError("graph mixes unidag entries (tuples) with dag entries (dicts)")
        return "unidag"
    if "single_job" in kinds:
        return "dag"
    return "index_dag" if "index" in kinds else "tuple_dag"


def _path(frm, to):
    """Shortest chain of registered steps from ``frm`` to ``to`` (breadth first)."""
    prev, frontier = {frm: None}, [frm]
    while frontier and to not in prev:
        nxt = []
        for a in frontier:
            for x, y in _STEPS:
                if x == a and y not in prev:
                    prev[y] = a
                    nxt.append(y)
        frontier = nxt
    if to not in prev:
        raise ValueError(f"no conversion from {frm!r} to {to!r}")
    steps, node = [], to
    while prev[node] is not None:
        steps.append((prev[node], node))
        node = prev[node]
    return steps[::-1]


def convert(graph, to="unidag", frm=None, **options):
    """Convert ``graph`` to format ``to``, walking the chain tuple_dag <-> index_dag <-> dag <->
    unidag.

    ``frm`` is detected when not given (see :func:`detect_format`). Options go to
    each step: ``inputs=`` (declared graph inputs, checked) and ``jobs=`` (needed to
    leave a unidag, see :func:`unidag_to_dag`). Converting to the same format
    validates and returns a copy.

    >>> convert({('c',): {'fn': 'neg', 'args': ('a',)}}, to='dag')
    {'c': {'fn': 'neg', 'args': ('a',)}}
    >>> convert({('c', 'd'): {'fn': 'op', 'args': ('a',)}, ('e',): {'fn': 'f', 'args': ('d',)}})
    {('c', 'd'): ('e',), 'e': ()}
    """
    frm = _fmt_name(frm) if frm is not None else detect_format(graph)
    to = _fmt_name(to)
    if frm == to:
        if frm == "unidag":
            _parse_unidag(graph)
            return dict(graph)
        if frm in _JOB_FORMATS:
            return _write(_parse(graph, frm, options.get("inputs")).jobs, frm)
        return graph
    for a, b in _path(frm, to):
        graph = _STEPS[(a, b)](graph, **options)
    return graph


# -- queries and a small interpreter shared by the converters to other graph libraries ----------


def _parse_any(graph, fmt, inputs=None, outputs=None):
    fmt = _fmt_name(fmt) if fmt is not None else detect_format(graph)
    if fmt not in _JOB_FORMATS:
        raise TypeError(f"a {fmt} has no variables; this needs a dag, index_dag or tuple_dag")
    return _parse(graph, fmt, inputs, outputs)


def validate(graph, fmt=None, *, inputs=None, outputs=None):
    """Check ``graph`` against its format; return the format's name or raise.

    >>> validate({'b': {'fn': 'neg', 'args': ('a',)}}, inputs=('a',), outputs=('b',))
    'dag'
    >>> validate({'b': {'fn': 'neg', 'args': ('b',)}})
    Traceback (most recent call last):
    ...
    theano_dag.formats.dicts.CycleError: the graph has a cycle through the variables 'b' -> 'b'
    """
    fmt = _fmt_name(fmt) if fmt is not None else detect_format(graph)
    if fmt == "unidag":
        _parse_unidag(graph)
    elif fmt in _JOB_FORMATS:
        _parse(graph, fmt, inputs, outputs)
    return fmt


def toposort(graph, fmt=None, *, inputs=None):
    """Job keys of ``graph`` (any dict format), each after the jobs it depends on.

    >>> toposort({'c': {'fn': 'exp', 'args': ('b',)}, 'b': {'fn': 'neg', 'args': ('a',)}})
    ['b', 'c']
    """
    fmt = _fmt_name(fmt) if fmt is not None else detect_format(graph)
    if fmt == "unidag":
        return _parse_unidag(graph)
    return [job.key for job in _parse_any(graph, fmt, inputs).order]


def graph_inputs(graph, fmt=None):
    """The arguments no job defines, in order of first use (a dict alone cannot say more).

    >>> graph_inputs({'c': {'fn': 'add', 'args': ('a', 'b')}, 'd': {'fn': 'neg', 'args': ('c',)}})
    ('a', 'b')
    """
    return _parse_any(graph, fmt).inputs


def graph_outputs(graph, fmt=None):
    """The variables no job uses, in the order their jobs appear.

    >>> graph_outputs({('c', 'd'): {'fn': 'divmod', 'args': ('a', 'b')},
    ...                ('e',): {'fn': 'neg', 'args': ('c',)}})
    ('d', 'e')
    """
    parsed = _parse_any(graph, fmt)
    used = {arg for job in parsed.jobs for arg in job.args}
    return tuple(out for job in parsed.jobs for out in job.outs if out not in used)


def interpret(graph, env, apply, *, fmt=None, outputs=None):
    """Run the jobs of a dag, index-dag or tuple-dag in dependency order.

    ``env`` maps the graph inputs to values (any objects: numbers, arrays, the
    variables of another graph being built); ``apply(fn, arg_values)`` returns the
    sequence of a job's output values. Returns a new dict from every variable to
    its value. An argument that is neither computed nor in ``env`` is an error.

    >>> import operator
    >>> tdag = {('s',): {'fn': operator.add, 'args': ('a', 'b')},
    ...         ('q', 'r'): {'fn': divmod, 'args': ('s', 'b')}}
    >>> interpret(tdag, {'a': 5, 'b': 2}, lambda fn, args: (fn(*args),) if fn is not divmod
    ...           else fn(*args))
    {'a': 5, 'b': 2, 's': 7, 'q': 3, 'r': 1}
    """
    parsed = _parse_any(graph, fmt, tuple(env), outputs)
    values = dict(env)
    for job in parsed.order:
        results = tuple(apply(job.fn, [values[a] for a in job.args]))
        if len(results) != len(job.outs):
            raise ValueError(
                f"job {job.key!r} has {len(job.outs)} outputs but apply returned "
                f"{len(results)} values"
            )
        values.update(zip(job.outs, results))
    return values
