"""Dict graphs out to graph tools: a ``networkx.DiGraph`` (optional extra) or Graphviz DOT text.

Both views share one picture of a graph. Jobs are nodes (``kind='job'``, with their
``fn``); variables are nodes too (``kind='variable'``, or ``'input'`` when no job
defines them), except in a unidag, which has jobs only. An edge runs from each
argument to the job that uses it (``argnums`` = its positions) and from a job to each
of its outputs when they are separate nodes (``index`` = the output's position).
Nodes are named by the keys of the dict, so a dag's single-output job is the node
of its output variable. Any other registered format (a FunctionGraph, ...) is
drawn as the tuple-dag it converts to; an OpGraph draws itself (its own ``to_dot``
and ``to_networkx``).
"""

from __future__ import annotations

from theano_dag.config import install_hint
from theano_dag.formats.chain import FORMATS, _fmt_name, convert, detect_format
from theano_dag.formats.dicts import _parse, _parse_unidag, index
from theano_dag.formats.opgraph import OpGraph

__all__ = ["to_dot", "to_networkx"]


def _is_opgraph(graph):
    return isinstance(graph, OpGraph)


def _fn_label(fn):
    # functions, classes and ufuncs read best by name; op objects by their str
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else str(fn)


def _elements(graph, fmt):
    """``(nodes, edges)``: ``[(key, attrs)]`` and ``[(src, dst, attrs)]`` in a stable order."""
    fmt = _fmt_name(fmt) if fmt is not None else detect_format(graph)
    if fmt not in FORMATS:
        # other formats (a FunctionGraph, ...) are drawn as the tuple-dag they convert to
        graph, fmt = convert(graph, to="tuple_dag", frm=fmt), "tuple_dag"
    nodes, edges = {}, []
    if fmt == "unidag":
        _parse_unidag(graph)
        for job in graph:
            nodes[job] = {"kind": "job", "label": str(job)}
        edges = [(job, nxt, {}) for job, nexts in graph.items() for nxt in nexts]
        return list(nodes.items()), edges
    parsed = _parse(graph, fmt)
    for var in parsed.inputs:
        nodes[var] = {"kind": "input", "label": str(var)}
    for job in parsed.jobs:
        outputs_apart = isinstance(job.key, tuple)  # else the job node is its output variable
        label = _fn_label(job.fn) if outputs_apart else f"{job.key}: {_fn_label(job.fn)}"
        nodes[job.key] = {"kind": "job", "fn": job.fn, "label": label}
        if outputs_apart:
            for i, out in enumerate(job.outs):
                attrs = {"kind": "variable", "label": str(out)}
                if fmt != "tuple_dag":
                    attrs["fn"] = index
                nodes[out] = attrs
                edges.append((job.key, out, {"index": i}))
    for job in parsed.jobs:
        argnums = {}  # an argument used twice is one edge with both positions
        for i, arg in enumerate(job.args):
            argnums.setdefault(arg, []).append(i)
        edges.extend((arg, job.key, {"argnums": tuple(ns)}) for arg, ns in argnums.items())
    return list(nodes.items()), edges


def to_networkx(graph, fmt=None):
    """A ``networkx.DiGraph`` of a dict graph (any format; ``fmt`` detected when omitted).

    Needs the optional extra ``networkx`` (``pip install '.[networkx]'`` in a checkout).

    >>> g = to_networkx({('q', 'r'): {'fn': 'divmod', 'args': ('a', 'b')}})
    >>> sorted(g.edges(data=True), key=str)
    [('a', ('q', 'r'), {'argnums': (0,)}), ('b', ('q', 'r'), {'argnums': (1,)}),
     (('q', 'r'), 'q', {'index': 0}), (('q', 'r'), 'r', {'index': 1})]
    >>> g.nodes[('q', 'r')]['kind'], g.nodes['a']['kind']
    ('job', 'input')
    """
    try:
        import networkx as nx  # an optional extra: needed only when asked for
    except ImportError:
        raise ImportError(
            "to_networkx needs networkx, an optional extra: "
            + install_hint("networkx", "networkx>=2.8")
        ) from None
    if _is_opgraph(graph):
        return graph.to_networkx()
    nodes, edges = _elements(graph, fmt)
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    return g


def _quote(text):
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph, fmt=None, *, name="G"):
    """Graphviz DOT text for a dict graph: jobs are boxes, variables ellipses.

    Edges into a job with several arguments are labelled with the argument's
    position, edges out of a multi-output job with the output's position.

    >>> print(to_dot({'b': {'fn': 'neg', 'args': ('a',)}}))
    digraph "G" {
      n0 [label="a", shape=ellipse];
      n1 [label="b: neg", shape=box];
      n0 -> n1;
    }
    """
    if _is_opgraph(graph):
        return graph.to_dot(name)
    nodes, edges = _elements(graph, fmt)
    ids = {}
    lines = [f"digraph {_quote(name)} {{"]
    for key, attrs in nodes:
        ids[key] = f"n{len(ids)}"
        shape = "box" if attrs["kind"] == "job" else "ellipse"
        lines.append(f"  {ids[key]} [label={_quote(attrs['label'])}, shape={shape}];")
    n_args = {}
    for _, dst, attrs in edges:
        n_args[dst] = n_args.get(dst, 0) + len(attrs.get("argnums", ()))
    for src, dst, attrs in edges:
        label = attrs.get("index")
        if "argnums" in attrs and n_args[dst] > 1:
            label = ",".join(map(str, attrs["argnums"]))
        extra = f" [label={_quote(label)}]" if label is not None else ""
        lines.append(f"  {ids[src]} -> {ids[dst]}{extra};")
    lines.append("}")
    return "\n".join(lines)
