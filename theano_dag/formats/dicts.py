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
``inputs=`` to any function here to have them checked against a declared tuple (a
theano_dag ``Constant`` carries its value, so it may be an argument without being
declared).
Every conversion validates its input and raises :class:`GraphFormatError` (a
``ValueError``) naming what is wrong: a cycle, an undefined argument, an index
out of range, a variable defined twice. :mod:`theano_dag.formats.chain` detects
formats and converts between any two.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from theano_dag.graph.algorithms import indexed_toposort
from theano_dag.graph.basic import Constant

__all__ = [
    "CycleError",
    "GraphFormatError",
    "IndexOutOfRangeError",
    "dag_jobs",
    "dag_to_index_dag",
    "dag_to_unidag",
    "index",
    "index_dag_to_dag",
    "index_dag_to_tuple_dag",
    "tuple_dag_to_index_dag",
    "unidag_to_dag",
]


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


def _is_constant(var):
    """A graph Constant carries its value, so it needs no job and no declaration as an input."""
    return isinstance(var, Constant)


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
            if declared is not None and arg not in declared and not _is_constant(arg):
                raise GraphFormatError(
                    f"argument {arg!r} of job {job.key!r} is defined by no entry "
                    f"and is not a declared input"
                )
            found[arg] = None
    for out in outputs or ():
        if out not in producer and (declared is None or out not in declared):
            if _is_constant(out):
                continue
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
    """The jobs in dependency order (dict position first among the ready ones, so a graph
    already in order stays so); a cycle is reported by its variables."""
    rank = {id(job): k for k, job in enumerate(jobs)}
    deps = [
        list(dict.fromkeys(rank[id(producer[a])] for a in job.args if a in producer))
        for job in jobs
    ]
    order, waiting = indexed_toposort(deps)
    if len(order) == len(jobs):
        return [jobs[k] for k in order]
    # Every job left waits on another job left, so walking back from one reaches a cycle.
    job = next(j for k, j in enumerate(jobs) if waiting[k])
    seen, path = {}, []  # path[k] = (job, variable it uses from the next job on the path)
    while id(job) not in seen:
        seen[id(job)] = len(path)
        var = next(a for a in job.args if a in producer and waiting[rank[id(producer[a])]])
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
        found = set(implied[job])
        for nxt in nexts:
            if nxt not in found:
                raise GraphFormatError(
                    f"the unidag says that job {job!r} precedes {nxt!r}, "
                    f"but {nxt!r} uses no output of {job!r}"
                )
        given = set(nexts)
        for nxt in implied[job]:
            if nxt not in given:
                raise GraphFormatError(
                    f"the unidag does not say that job {job!r} precedes {nxt!r}, "
                    f"but {nxt!r} uses an output of {job!r}"
                )
    return dag
