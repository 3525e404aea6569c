"""The OpGraph container (a Boost-Graph-Library-like API) and its reference evaluator.

Nodes are referred to by index, since equal nodes may appear many times (two
``Add()`` nodes are two additions). Edges are directed (data flow) and carry mode
labels. The graph is bipartite: tensors connect only to operations and
operations only to tensors. A tensor has at most one producing operation; an
operation's inputs (and outputs) are ordered by the order their edges were added.
Between two nodes there is at most one edge, so a pair of nodes names an edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theano_dag.config import install_hint
from theano_dag.formats.opgraph.nodes import Node, Operation, parse_modes
from theano_dag.graph.algorithms import indexed_toposort
from theano_dag.sparse.type import is_sparse_value

__all__ = ["Edge", "OpGraph", "OpGraphError", "evaluate", "infer_shapes"]


class OpGraphError(ValueError):
    """An OpGraph that breaks its rules (bipartite, one producer, labels, acyclic)."""


@dataclass(frozen=True)
class Edge:
    """A directed edge ``src -> dst`` labelled with the modes it carries.

    >>> Edge(0, 2, "i, j")
    Edge(0, 2, 'i,j')
    >>> Edge(0, 2, "i,j").modes
    ('i', 'j')
    """

    src: int
    dst: int
    labels: str

    def __post_init__(self):
        object.__setattr__(self, "labels", ",".join(parse_modes(self.labels)))

    @property
    def modes(self):
        return parse_modes(self.labels)

    def __repr__(self):
        return f"Edge({self.src}, {self.dst}, {self.labels!r})"


class OpGraph:
    """A bipartite DAG of tensors and operations, with edges labelled by modes.

    ``n_reserve`` is a capacity hint, as in the design (Python lists need none).
    The graph for ``C("i,j") = A("i,j") + B("i,j")``:

    >>> from theano_dag.formats.opgraph import Add, Tensor
    >>> g = OpGraph()
    >>> [g.add_node(n) for n in (Tensor("A"), Tensor("B"), Add(), Tensor("C"))]
    [0, 1, 2, 3]
    >>> for src, dst in [(0, 2), (1, 2), (2, 3)]:
    ...     _ = g.add_edge(src, dst, "i,j")
    >>> g.degree(2), g.in_degree(2), g.out_degree(2)
    (3, 2, 1)
    >>> g.edges(0), g.adjacent_nodes(0), g.source(2, 0), g.sink(2, 0)
    ((Edge(0, 2, 'i,j'),), (2,), 0, 2)
    """

    def __init__(self, n_reserve=0):
        if not isinstance(n_reserve, int) or n_reserve < 0:
            raise ValueError(f"n_reserve must be an int >= 0, got {n_reserve!r}")
        self.n_reserve = n_reserve
        self._nodes = []
        self._edges = []
        self._in = []  # node -> indices into _edges, in insertion order
        self._out = []
        self._pair = {}  # frozenset({a, b}) -> edge index

    # -- building ------------------------------------------------------------------------------

    def add_node(self, node):
        """Add a node (an instance, or an operation class taking no arguments); return its index."""
        if isinstance(node, type) and issubclass(node, Operation):
            node = node()
        if not isinstance(node, Node):
            raise TypeError(f"add_node takes a Tensor or an Operation, got {node!r}")
        self._nodes.append(node)
        self._in.append([])
        self._out.append([])
        return len(self._nodes) - 1

    def add_edge(self, src, dst, labels):
        """Add the edge ``src -> dst`` carrying the modes ``labels`` (e.g. ``"i,j"``)."""
        self._check_index(src)
        self._check_index(dst)
        a, b = self._nodes[src], self._nodes[dst]
        if a.is_tensor == b.is_tensor:
            kind = "tensors" if a.is_tensor else "operations"
            raise OpGraphError(
                f"an OpGraph is bipartite: an edge joins a tensor and an operation, but node "
                f"{src} ({a.label()}) and node {dst} ({b.label()}) are both {kind}"
            )
        key = frozenset((src, dst))
        if key in self._pair:
            raise OpGraphError(
                f"nodes {src} and {dst} are already joined by {self._edges[self._pair[key]]}; "
                "fuse the modes into one edge (or add a second tensor node for a second use)"
            )
        if b.is_tensor and self._in[dst]:
            producer = self._edges[self._in[dst][0]].src
            raise OpGraphError(
                f"tensor node {dst} ({b.label()}) is already produced by node {producer}; "
                "a tensor has one producer"
            )
        edge = Edge(src, dst, labels)
        self._pair[key] = len(self._edges)
        self._in[dst].append(len(self._edges))
        self._out[src].append(len(self._edges))
        self._edges.append(edge)
        return edge

    def _check_index(self, n):
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < len(self._nodes):
            raise IndexError(f"node {n!r} does not exist (the graph has {len(self._nodes)} nodes)")

    # -- inspecting ----------------------------------------------------------------------------

    def node(self, n):
        """The node object at index ``n``."""
        self._check_index(n)
        return self._nodes[n]

    __getitem__ = node

    def nodes(self):
        """All node objects, in index order."""
        return tuple(self._nodes)

    def edges(self, n=None):
        """All edges, or the edges touching node ``n``, in insertion order."""
        if n is None:
            return tuple(self._edges)
        self._check_index(n)
        return tuple(self._edges[e] for e in sorted(self._in[n] + self._out[n]))

    def in_edges(self, n):
        self._check_index(n)
        return tuple(self._edges[e] for e in self._in[n])

    def out_edges(self, n):
        self._check_index(n)
        return tuple(self._edges[e] for e in self._out[n])

    def adjacent_nodes(self, n):
        """Indices of the nodes joined to ``n``, in the order of :meth:`edges`."""
        return tuple(e.dst if e.src == n else e.src for e in self.edges(n))

    def num_nodes(self):
        return len(self._nodes)

    def num_edges(self):
        return len(self._edges)

    def degree(self, n):
        return self.in_degree(n) + self.out_degree(n)

    def in_degree(self, n):
        return len(self.in_edges(n))

    def out_degree(self, n):
        return len(self.out_edges(n))

    def _edge_between(self, a, b):
        self._check_index(a)
        self._check_index(b)
        if frozenset((a, b)) not in self._pair:
            raise OpGraphError(f"no edge joins nodes {a} and {b}")
        return self._edges[self._pair[frozenset((a, b))]]

    def source(self, a, b):
        """The tail of the edge joining ``a`` and ``b`` (given in either order)."""
        return self._edge_between(a, b).src

    def sink(self, a, b):
        """The head of the edge joining ``a`` and ``b`` (given in either order)."""
        return self._edge_between(a, b).dst

    def is_tensor(self, n):
        return self.node(n).is_tensor

    def inputs(self, n):
        """The input nodes of node ``n``, in order."""
        return tuple(e.src for e in self.in_edges(n))

    def outputs(self, n):
        """The output nodes of node ``n``, in order."""
        return tuple(e.dst for e in self.out_edges(n))

    def sources(self):
        """Tensors that no operation produces (the graph's inputs)."""
        return tuple(n for n, x in enumerate(self._nodes) if x.is_tensor and not self._in[n])

    def sinks(self):
        """Tensors that no operation reads (the graph's results)."""
        return tuple(n for n, x in enumerate(self._nodes) if x.is_tensor and not self._out[n])

    def rank(self, n):
        """The number of modes of tensor ``n`` (from its edges; ``None`` if it has none)."""
        edges = self.edges(n)
        return len(edges[0].modes) if edges else None

    def toposort(self):
        """Node indices, each after the nodes it depends on (lowest index first when free).

        Raises :class:`OpGraphError` naming the nodes on a cycle.
        """
        order, waiting = indexed_toposort([[self._edges[e].src for e in ins] for ins in self._in])
        if len(order) < len(self._nodes):
            cycle = self._find_cycle(waiting)
            raise OpGraphError("the OpGraph has a cycle through nodes " + " -> ".join(cycle))
        return order

    def _find_cycle(self, waiting):
        n = next(i for i, w in enumerate(waiting) if w)
        seen = []
        while n not in seen:
            seen.append(n)
            n = next(self._edges[e].src for e in self._in[n] if waiting[self._edges[e].src])
        cycle = seen[seen.index(n) :][::-1]
        first = cycle.index(min(cycle))  # start at the lowest node, so the message is stable
        cycle = cycle[first:] + cycle[:first]
        return [str(m) for m in cycle + cycle[:1]]

    def op_labels(self, n):
        """``(ins, outs)``: the mode tuples of operation ``n``'s input and output edges."""
        return (
            [e.modes for e in self.in_edges(n)],
            [e.modes for e in self.out_edges(n)],
        )

    def validate(self):
        """Check arities, labels, tensor ranks and acyclicity; raise :class:`OpGraphError`."""
        for n, node in enumerate(self._nodes):
            if node.is_tensor:
                ranks = {len(e.modes) for e in self.edges(n)}
                if len(ranks) > 1:
                    raise OpGraphError(
                        f"tensor node {n} ({node.label()}) has edges of ranks {sorted(ranks)}: "
                        + ", ".join(map(repr, self.edges(n)))
                    )
                shape = node.shape
                if shape is not None and ranks and len(shape) not in ranks:
                    raise OpGraphError(
                        f"tensor node {n} ({node.label()}) has shape {shape} but edges of rank "
                        f"{ranks.pop()}"
                    )
                continue
            least, most = node.n_inputs
            n_in = len(self._in[n])
            if n_in < least or (most is not None and n_in > most):
                want = f"{least}" if least == most else f"{least} to {most or 'any number of'}"
                raise OpGraphError(f"node {n} ({node.label()}) needs {want} inputs, has {n_in}")
            if len(self._out[n]) != node.n_outputs:
                raise OpGraphError(
                    f"node {n} ({node.label()}) has {node.n_outputs} output(s), "
                    f"but {len(self._out[n])} output edge(s)"
                )
            ins, outs = self.op_labels(n)
            try:
                node.check(ins, outs)
            except ValueError as err:
                raise OpGraphError(f"node {n} ({node.label()}): {err}") from None
        self.toposort()

    def to_dot(self, name="OpGraph"):
        """Graphviz DOT text in the design's notation: tensors squares, operations circles."""
        lines = [f'digraph "{name}" {{']
        for n, node in enumerate(self._nodes):
            shape = "square" if node.is_tensor else "circle"
            label = node.label().replace('"', '\\"')
            lines.append(f'  n{n} [label="{label}", shape={shape}];')
        lines += [f'  n{e.src} -> n{e.dst} [label="{e.labels}"];' for e in self._edges]
        return "\n".join(lines + ["}"])

    def to_networkx(self):
        """A ``networkx.DiGraph`` on the node indices: node attribute ``node`` (the object) and
        ``kind`` (``'tensor'`` or ``'operation'``), edge attribute ``labels``.

        Needs the optional extra ``networkx`` (``pip install '.[networkx]'`` in a checkout).
        """
        try:
            import networkx as nx  # an optional extra: needed only when asked for
        except ImportError:
            raise ImportError(
                "OpGraph.to_networkx needs networkx, an optional extra: "
                + install_hint("networkx", "networkx>=2.8")
            ) from None
        g = nx.DiGraph()
        for n, node in enumerate(self._nodes):
            g.add_node(n, node=node, kind="tensor" if node.is_tensor else "operation")
        g.add_edges_from((e.src, e.dst, {"labels": e.labels}) for e in self._edges)
        return g

    def __repr__(self):
        return f"<OpGraph: {self.num_nodes()} nodes, {self.num_edges()} edges>"


def infer_shapes(opgraph, shapes=None):
    """The shape of every tensor, entries ``None`` where unknown.

    Source shapes come from ``shapes`` (``{tensor_index: shape}``), else from the
    Tensor node's ``shape`` or ``value``.

    >>> from theano_dag.formats.opgraph import Multiplication, Tensor
    >>> g = OpGraph()
    >>> a, b, m, c = (g.add_node(x) for x in (Tensor("A", (2, 3)), Tensor("B", (3, 4)),
    ...                                      Multiplication(), Tensor("C")))
    >>> _ = g.add_edge(a, m, "i,k"), g.add_edge(b, m, "k,j"), g.add_edge(m, c, "i,j")
    >>> infer_shapes(g)[c]
    (2, 4)
    """
    opgraph.validate()
    shapes = dict(shapes or {})
    known = {}
    for n in opgraph.toposort():
        node = opgraph.node(n)
        if node.is_tensor:
            if n not in known:
                shape = shapes.get(n, node.shape)
                rank = opgraph.rank(n)
                known[n] = tuple(shape) if shape is not None else (None,) * (rank or 0)
            continue
        ins, outs = opgraph.op_labels(n)
        result = node.infer_shape([known[t] for t in opgraph.inputs(n)], ins, outs)
        for t, shape in zip(opgraph.outputs(n), result):
            known[t] = shape
    return {n: known[n] for n in sorted(known)}


def evaluate(opgraph, values=None, outputs=None):
    """Run an OpGraph with numpy: ``{tensor_index: array}`` in, every tensor's array out.

    Source tensors take their arrays from ``values``, else from the Tensor's
    ``value``. ``outputs`` (tensor indices) limits what is returned.

    >>> import numpy as np
    >>> from theano_dag.formats.opgraph import Pow, Tensor
    >>> g = OpGraph(3)
    >>> a, p, c = g.add_node(Tensor("A")), g.add_node(Pow(2)), g.add_node(Tensor("C"))
    >>> _ = g.add_edge(a, p, "i,j"), g.add_edge(p, c, "i,j")
    >>> evaluate(g, {a: np.array([[1, 2], [3, 4]])})[c]
    array([[ 1,  4],
           [ 9, 16]])
    """
    opgraph.validate()
    values = dict(values or {})
    known = {}
    for n in values:
        node = opgraph.node(n)
        if not node.is_tensor or opgraph.in_degree(n):
            what = "an operation" if not node.is_tensor else "computed by its producer"
            raise OpGraphError(f"a value was given for node {n} ({node.label()}), which is {what}")
    for n in opgraph.toposort():
        node = opgraph.node(n)
        if node.is_tensor:
            if opgraph.in_degree(n):
                continue
            if n not in values and node.value is None:
                raise OpGraphError(f"no value for source tensor node {n} ({node.label()})")
            if n in values and is_sparse_value(values[n]):
                raise OpGraphError(
                    f"the value of source tensor node {n} ({node.label()}) is a scipy.sparse "
                    "matrix; an OpGraph holds dense arrays only"
                )
            array = np.asarray(values[n] if n in values else node.value)
            rank = opgraph.rank(n)
            if rank is not None and array.ndim != rank:
                raise OpGraphError(
                    f"tensor node {n} ({node.label()}) has rank {rank} on its edges, "
                    f"but its value has shape {array.shape}"
                )
            known[n] = array
            continue
        ins, outs = opgraph.op_labels(n)
        results = node.compute([known[t] for t in opgraph.inputs(n)], ins, outs)
        for t, array, modes in zip(opgraph.outputs(n), results, outs):
            known[t] = np.asarray(array)
            if known[t].ndim != len(modes):
                raise OpGraphError(
                    f"node {n} ({node.label()}) made an array of shape {known[t].shape} for "
                    f"tensor {t}, whose edge has modes {','.join(modes)!r}"
                )
    wanted = sorted(known) if outputs is None else list(outputs)
    for t in wanted:
        if t not in known:
            raise OpGraphError(f"node {t} is not a tensor of this OpGraph")
    return {t: known[t] for t in wanted}
