"""Moving between the dict formats: detect a graph's format, convert along the chain, query it.

The seed's chain is tuple_dag <-> index_dag <-> dag <-> unidag; :func:`convert`
walks it (breadth first over registered steps, so converters to other graph
libraries can join with :func:`register_conversion`). :func:`interpret` runs the
jobs of a graph in order; converters to other graph libraries build on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from theano_dag.formats.dicts import (
    GraphFormatError,
    _parse,
    _parse_unidag,
    _write,
    dag_to_index_dag,
    dag_to_unidag,
    index,
    index_dag_to_dag,
    index_dag_to_tuple_dag,
    tuple_dag_to_index_dag,
    unidag_to_dag,
)

__all__ = [
    "FORMATS",
    "convert",
    "detect_format",
    "graph_inputs",
    "graph_outputs",
    "interpret",
    "register_conversion",
    "toposort",
    "validate",
]

#: The dict formats, in the order of the conversion chain of the seed.
FORMATS = ("tuple_dag", "index_dag", "dag", "unidag")
_JOB_FORMATS = FORMATS[:3]


def _fmt_name(fmt):
    name = str(fmt).replace("-", "_").lower()
    if name not in FORMATS and name not in _EXTRA_FORMATS:
        known = ", ".join(FORMATS + tuple(_EXTRA_FORMATS))
        raise ValueError(f"unknown graph format {fmt!r}; expected one of {known}")
    return name


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
        for a in job.args:
            if a not in values and a not in parsed.producer:  # a Constant, passed by the parse
                raise GraphFormatError(
                    f"argument {a!r} of job {job.key!r} has no value: put the constant in env"
                )
    for job in parsed.order:
        results = tuple(apply(job.fn, [values[a] for a in job.args]))
        if len(results) != len(job.outs):
            raise ValueError(
                f"job {job.key!r} has {len(job.outs)} outputs but apply returned "
                f"{len(results)} values"
            )
        values.update(zip(job.outs, results))
    return values
