"""``theano.scan.utils``'s path (theano-pymc 1.1): the graph helpers Theano's scan code
exports there, which theano_dag keeps in ``graph.basic``.

>>> import theano_dag.tensor as tt
>>> from theano_dag.scan.utils import clone, equal_computations
>>> x, y = tt.dvector("x"), tt.dvector("y")
>>> equal_computations([x + 1], [x + 1]), equal_computations([x + 1], [y + 1])
(True, False)
>>> equal_computations([clone(x * 2, replace={x: y})], [y * 2])
True
"""

from theano_dag.graph.basic import (
    Constant,
    clone_replace,
    equal_computations,
    graph_inputs,
    io_toposort,
)
from theano_dag.graph.shared import SharedVariable
from theano_dag.scan.basic import until
from theano_dag.scan.op import Scan

# Theano's scan.utils.clone is graph.basic.clone_replace (same signature).
clone = clone_replace

__all__ = ["clone", "equal_computations", "map_variables", "until"]


def map_variables(replacer, graphs, additional_inputs=()):
    """The graphs ``graphs`` with each variable ``v`` in them (inner graphs of loops and
    ``OpFromGraph`` included) replaced by ``replacer(v)`` (``v`` itself to keep it), and
    what is computed from it rebuilt (Theano's ``scan.utils.map_variables``). An outer
    variable a replacement brings into a loop's step becomes a non-sequence of the loop;
    a shared variable with an update cannot be brought in (NotImplementedError: its
    updates would change).

    >>> import theano_dag.tensor as tt
    >>> a, b, c = tt.dscalars("a", "b", "c")
    >>> (v,) = map_variables(lambda x: c if x is b else x, [a + b])
    >>> v.owner.inputs == [a, c]
    True
    """
    graphs = list(graphs)
    roots = [*graph_inputs(graphs), *additional_inputs]
    memo = {}
    for v in roots:
        if v not in memo:
            memo[v] = replacer(v)
    for node in io_toposort(roots, graphs):
        inputs = [memo.get(x, x) for x in node.inputs]
        if _has_inner_graph(node.op):
            outputs = _map_inner(replacer, node.op, inputs)
        elif all(x is y for x, y in zip(inputs, node.inputs)):
            outputs = node.outputs
        else:
            outputs = node.op.make_node(*inputs).outputs
        for old, new in zip(node.outputs, outputs):
            memo[old] = replacer(new)
    return [memo.get(g, g) for g in graphs]


def _has_inner_graph(op):
    """A Scan, or an OpFromGraph (known by its attributes: compile is a floor above)."""
    return isinstance(op, Scan) or hasattr(op, "n_explicit") and hasattr(op, "inner_inputs")


def _map_inner(replacer, op, outer_inputs):
    """The outputs of ``op`` (a Scan or OpFromGraph) on ``outer_inputs`` with its inner
    graph mapped; outer variables the replacements read become extra inputs."""
    inner_in = list(op.inner_inputs)
    inner_out = map_variables(replacer, list(op.inner_outputs), inner_in)
    foreign = [
        v for v in graph_inputs(inner_out) if v not in inner_in and not isinstance(v, Constant)
    ]
    for v in foreign:
        if isinstance(v, SharedVariable) and (
            getattr(v, "update", None) is not None or v.default_update is not None
        ):
            raise NotImplementedError(
                f"map_variables: the replacement brings shared variable {v}, which has an "
                "update, into an inner graph (its updates would change)"
            )
    holders = [v.type() for v in foreign]
    if holders:
        inner_out = clone_replace(inner_out, dict(zip(foreign, holders)))
    if isinstance(op, Scan):
        new = op.rebuilt(inner_inputs=[*inner_in, *holders], inner_outputs=inner_out)
        return new(*outer_inputs, *foreign, return_list=True)
    new = type(op)([*inner_in, *holders], inner_out, inline=op.is_inline, name=op.name)
    return new(*outer_inputs, *foreign, return_list=True)
