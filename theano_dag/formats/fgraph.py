"""FunctionGraph <-> tuple-dag: the link between theano_dag's graphs and the dict formats.

A FunctionGraph becomes a tuple-dag whose keys are its own Variables: one entry per
Apply node, ``{tuple(node.outputs): {'fn': node.op, 'args': tuple(node.inputs)}}``,
in topological order. Constants stay Constant Variables among the arguments (they
carry their values, so no job defines them and they are not inputs). A dict alone
leaves the order of the inputs and outputs uncertain, so both directions carry them.

The way back rebuilds every node with ``op.make_node`` on the rebuilt arguments and
keeps the given input Variables and the Constants, so the result
:func:`~theano_dag.graph.basic.is_same_graph` the original. Both directions are
registered with :func:`~theano_dag.formats.chain.convert` under the format name
``'fgraph'``, so ``convert(fgraph, to='unidag')`` works, and so do
:func:`~theano_dag.formats.export.to_dot` and ``to_networkx`` on a FunctionGraph.
"""

from __future__ import annotations

from theano_dag.formats.chain import graph_outputs, register_conversion
from theano_dag.formats.dicts import GraphFormatError, _parse
from theano_dag.graph.basic import Constant, Variable
from theano_dag.graph.fg import FunctionGraph

__all__ = ["fgraph_to_tuple_dag", "tuple_dag_to_fgraph"]


def fgraph_to_tuple_dag(fgraph):
    """``(tuple_dag, inputs, outputs)`` of a FunctionGraph; the keys are its Variables.

    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> fg = FunctionGraph([x], [tt.exp(x) + 1], clone=False)
    >>> tdag, inputs, outputs = fgraph_to_tuple_dag(fg)
    >>> [(str(entry["fn"]), [str(a) for a in entry["args"]]) for entry in tdag.values()]
    [('Elemwise{exp,no_inplace}', ['x']), ('InplaceDimShuffle{x}', ['1']),
     ('Elemwise{add,no_inplace}', ['Elemwise{exp,no_inplace}.0', 'InplaceDimShuffle{x}.0'])]
    >>> inputs == (x,), outputs == tuple(fg.outputs)
    (True, True)
    """
    if not isinstance(fgraph, FunctionGraph):
        raise TypeError(f"fgraph_to_tuple_dag needs a FunctionGraph, got {type(fgraph).__name__}")
    tuple_dag = {
        tuple(node.outputs): {"fn": node.op, "args": tuple(node.inputs)}
        for node in fgraph.toposort()
    }
    return tuple_dag, tuple(fgraph.inputs), tuple(fgraph.outputs)


def _check_inputs(inputs):
    inputs = tuple(inputs)
    for k, var in enumerate(inputs):
        if not isinstance(var, Variable) or isinstance(var, Constant) or var.owner is not None:
            raise TypeError(
                f"input {k} is {var!r}; tuple_dag_to_fgraph needs the graph's input Variables "
                "(ownerless, not constants), e.g. from fgraph_to_tuple_dag"
            )
    return inputs


def tuple_dag_to_fgraph(tuple_dag, inputs, outputs):
    """Rebuild a FunctionGraph from a tuple-dag of Ops and its ``inputs`` and ``outputs``.

    Each job's ``fn`` must be an Op; it is applied with ``make_node`` to the rebuilt
    arguments. The input Variables and the Constants are used as they are (an argument
    that is a plain value goes to ``make_node`` as it is, which usually makes it a
    constant); rebuilt outputs keep the names of the keys they replace.

    >>> from theano_dag import tensor as tt
    >>> from theano_dag.graph.basic import is_same_graph
    >>> x = tt.dvector("x")
    >>> fg = FunctionGraph([x], [tt.exp(x) + 1], clone=False)
    >>> fg2 = tuple_dag_to_fgraph(*fgraph_to_tuple_dag(fg))
    >>> fg2.inputs == [x], is_same_graph(fg.outputs[0], fg2.outputs[0])
    (True, True)
    """
    inputs = _check_inputs(inputs)
    outputs = tuple(outputs)
    # plain values among the arguments need no declaration: make_node turns them into constants
    values = tuple(a for a in _parse(tuple_dag, "tuple_dag").inputs if not isinstance(a, Variable))
    parsed = _parse(tuple_dag, "tuple_dag", inputs + values, outputs)
    new = {var: var for var in inputs}
    for job in parsed.order:
        make_node = getattr(job.fn, "make_node", None)
        if make_node is None:
            raise TypeError(
                f"job {job.key!r} has fn {job.fn!r}, which is not an Op (no make_node); "
                "a FunctionGraph needs Ops"
            )
        node = make_node(*[new.get(a, a) for a in job.args])
        if len(node.outputs) != len(job.outs):
            raise GraphFormatError(
                f"job {job.key!r} names {len(job.outs)} outputs, but {job.fn} makes "
                f"{len(node.outputs)}"
            )
        for old, var in zip(job.outs, node.outputs):
            name = getattr(old, "name", None)
            if name is not None and var.name is None:
                var.name = name
            new[old] = var
    outs = []
    for k, out in enumerate(outputs):
        if out not in new and not isinstance(out, Constant):
            raise GraphFormatError(f"output {k} ({out!r}) is no Variable the graph defines")
        outs.append(new.get(out, out))
    return FunctionGraph(list(inputs), outs, clone=False)


# -- steps of convert() ------------------------------------------------------------------------


def _to_tuple_dag_step(fgraph, **_):
    return fgraph_to_tuple_dag(fgraph)[0]


def _to_fgraph_step(tuple_dag, inputs=None, outputs=None, **_):
    if inputs is None:
        # Without declared inputs, the free non-constant Variables in order of first use.
        free = _parse(tuple_dag, "tuple_dag").inputs
        inputs = [a for a in free if isinstance(a, Variable) and not isinstance(a, Constant)]
    if outputs is None:
        outputs = graph_outputs(tuple_dag, "tuple_dag")
    return tuple_dag_to_fgraph(tuple_dag, inputs, outputs)


register_conversion(
    "fgraph", "tuple_dag", _to_tuple_dag_step, detect=lambda g: isinstance(g, FunctionGraph)
)
register_conversion("tuple_dag", "fgraph", _to_fgraph_step)
