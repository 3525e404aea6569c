"""``Composite``: one scalar op made of a whole scalar graph (what fusion produces).

Its numpy evaluation walks the scalar graph over whole arrays; its C form is a list
of statements, one temporary per scalar node, that a C or OpenCL kernel puts in its
loop body (``c_code_statements``), or one nested expression per output (``c_code``).
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply, Constant, Variable, clone_get_equiv, io_toposort
from theano_dag.graph.fg import FunctionGraph
from theano_dag.scalar.basic import (
    C_TYPES,
    ScalarOp,
    ScalarType,
    ScalarVariable,
    get_scalar_type,
    vocabulary,
)

__all__ = ["Composite", "c_literal"]


def c_literal(value, dtype, types=C_TYPES) -> str:
    """A C/OpenCL literal of ``value`` typed as ``dtype``.

    >>> c_literal(1.5, "float32"), c_literal(float("inf"), "float64"), c_literal(3, "int32")
    ('((float)1.5)', '((double)INFINITY)', '3')
    """
    v = np.asarray(value).astype(dtype)[()]
    t = types[dtype]
    if dtype == "bool":
        return "1" if v else "0"
    if np.issubdtype(v.dtype, np.floating):
        if np.isnan(v):
            return f"(({t})NAN)"
        if np.isinf(v):
            return f"(({t})INFINITY)" if v > 0 else f"(-({t})INFINITY)"
        return f"(({t}){float(v)!r})"
    return str(int(v))


# A graph of at most this many nodes has its text written node by node (each node's from
# its inputs' texts, which copies subexpressions: fine when they are short).
_TEXT_BY_NODE_MAX = 64
# Written as one expression, a graph whose nodes read a value more than once repeats it
# at each read: the text doubles with each level of ``h * h``. Above this many terms, and
# this many times the terms of the graph's nodes, it names each node's value once instead
# (``t0 = ...; t1 = ...``).
_TEXT_TERMS_MAX = 4096
_TEXT_TERMS_RATIO = 4


class Composite(ScalarOp):
    """A scalar op defined by the scalar graph from ``inputs`` to ``outputs``.

    The graph is copied (the caller's variables stay free for other uses) unless
    ``copy=False``, which hands the graph over to the op; with it, ``nodes`` may give
    the graph's nodes already in the order ``io_toposort(inputs, outputs)`` gives them
    (a builder that made them in that order: fusion), which spares sorting them.

    >>> from theano_dag import scalar as ts
    >>> x, y = ts.float64("x"), ts.float64("y")
    >>> c = Composite([x, y], [ts.exp(x) * y + 1])
    >>> c.nin, c.nout, str(c)
    (2, 1, 'Composite{add(mul(exp(i0), i1), 1)}')
    >>> float(c.compute([np.float64(0.0), np.float64(2.0)], ["float64"])[0])
    3.0
    >>> c.c_code(["a", "b"], ["float64", "float64"], ["float64"])
    ['((exp(a) * b) + ((double)(1)))']
    """

    compute_in_output_dtype = False

    def __init__(self, inputs, outputs, name=None, copy=True, nodes=None):
        for i, v in enumerate(inputs):
            if not isinstance(v, ScalarVariable) or v.owner is not None:
                raise TypeError(
                    f"Composite: input {i} must be an ownerless scalar variable, " f"got {v!r}"
                )
        for i, v in enumerate(outputs):
            if not isinstance(v.type, ScalarType):
                raise TypeError(f"Composite: output {i} must be a scalar variable, got {v!r}")
        if copy:
            equiv = clone_get_equiv(inputs, outputs, copy_inputs=True, copy_orphans=True)
            self.inputs = [equiv[v] for v in inputs]
            self.outputs = [equiv[v] for v in outputs]
        else:  # the caller built the graph for this op alone (fusion): no need to copy it
            self.inputs = list(inputs)
            self.outputs = list(outputs)
        if nodes is None or copy:
            nodes = io_toposort(self.inputs, self.outputs)
        self.nodes = list(nodes)
        known = set(self.inputs)
        for node in self.nodes:
            for v in node.inputs:
                if v.owner is None and v not in known and not isinstance(v, Constant):
                    raise ValueError(f"Composite: {v} is used by the graph but is not an input")
        self.nin = len(inputs)
        self.nout = len(outputs)
        self.in_dtypes = tuple(v.type.dtype for v in self.inputs)
        self.out_dtypes = tuple(v.type.dtype for v in self.outputs)
        self._text = self._graph_text()
        self.name = name or f"Composite{{{self._text}}}"

    @property
    def fgraph(self):
        """The scalar graph as a FunctionGraph (Theano's attribute), a copy made at each
        use: changing it does not change the op.

        >>> from theano_dag import scalar as ts
        >>> x = ts.float64("x")
        >>> len(Composite([x], [ts.exp(x) * 2 + 1]).fgraph.apply_nodes)
        3
        """
        return FunctionGraph(self.inputs, self.outputs, clone=True)

    # identity: two composites computing the same graph are the same op. The printed
    # text (cheap, made by __init__) is the hash and the first test; the structure, made
    # only for composites printed alike, decides.
    def __eq__(self, other):
        if other is self:
            return True
        return (
            type(other) is type(self)
            and other._key() == self._key()
            and other._structure_key() == self._structure_key()
        )

    def __hash__(self):
        return hash(self._key())

    def _key(self):
        return (self.in_dtypes, self.out_dtypes, self._text)

    def _structure_key(self):
        # Made on first use: the graph is not changed after __init__. (A composite
        # unpickled from an older version has none cached.)
        key = self.__dict__.get("_structure_cache")
        if key is None:
            key = self._structure_cache = self._structure()
        return key

    def _structure(self):
        """The graph as a tuple that equality compares: per node, its op (itself: ops
        compare by their props), where each input comes from (the composite's input
        ``k``, an earlier node's output, or a constant's dtype and bytes) and its outputs'
        dtypes; then where each output comes from. The printed text is not enough: it
        shows neither a constant's dtype nor an intermediate's, which decide what the
        graph computes (``(i0 + int8(100)) * 0.5`` wraps where ``int16(100)`` does not).

        >>> from theano_dag import scalar as ts
        >>> x = ts.float64("x")
        >>> Composite([x], [x * 2]) == Composite([x], [x * 2])
        True
        >>> Composite([x], [x * 2]) == Composite([x], [x * np.float32(2)])
        False
        """
        where = {v: ("in", k) for k, v in enumerate(self.inputs)}

        def source(v):
            known = where.get(v)
            if known is not None:
                return known
            if isinstance(v, Constant):
                data = np.asarray(v.data)
                return ("const", v.type.dtype, data.shape, data.tobytes())
            return ("free", str(v))  # refused by __init__ for inputs of nodes

        nodes = []
        for n, node in enumerate(self.nodes):
            args = tuple([source(v) for v in node.inputs])
            nodes.append((node.op, args, tuple([o.type.dtype for o in node.outputs])))
            for j, o in enumerate(node.outputs):
                where[o] = ("node", n, j)
        return tuple(nodes), tuple([source(o) for o in self.outputs])

    def _graph_text(self):
        """The expression of each output, inputs named ``i0``, ``i1``, ... (or, where
        values read more than once would make it far longer than the graph, each node's
        value named once: :meth:`_named_text`).

        Written out piece by piece from the outputs down: building each node's text from
        its inputs' texts would copy every subexpression once per level above it, which
        is quadratic for the long chains fusion makes. A small graph (most of what
        fusion makes) is written node by node all the same, in one step per node.
        """
        names = {v: f"i{k}" for k, v in enumerate(self.inputs)}
        written, graph = self._terms()
        if written > max(_TEXT_TERMS_MAX, _TEXT_TERMS_RATIO * graph):
            return self._named_text(names)
        if len(self.nodes) <= _TEXT_BY_NODE_MAX:
            texts = names  # variable -> its text
            for node in self.nodes:
                args = []
                for v in node.inputs:
                    t = texts.get(v)
                    args.append(t if t is not None else self._leaf_text(v))
                text = f"{node.op}({', '.join(args)})"
                for o in node.outputs:
                    texts[o] = text
            return ", ".join([texts.get(o) or str(o) for o in self.outputs])
        in_graph = set(self.nodes)
        texts = []
        for o in self.outputs:
            if o in names or o.owner in in_graph:
                texts.append(self._expression_text(o, names, in_graph))
            else:
                texts.append(str(o))
        return ", ".join(texts)

    def _terms(self):
        """``(written, graph)``: the number of terms (inputs, constants, nodes) the
        outputs' expressions written out would hold, a value read twice counted twice
        (counted without writing them), and the number the graph's nodes hold."""
        terms = {}
        graph = 0
        for node in self.nodes:
            n = 1 + sum([terms.get(v, 1) for v in node.inputs])
            graph += 1 + len(node.inputs)
            for o in node.outputs:
                terms[o] = n
        return sum([terms.get(o, 1) for o in self.outputs]), graph

    def _named_text(self, names):
        """The graph with each node's value named once: ``t0 = op(i0, ...); ...``, then
        the outputs. Its length grows with the nodes, however often values are read.

        >>> from theano_dag import scalar as ts
        >>> x = ts.float64("x")
        >>> y = x
        >>> for _ in range(13):  # x to the power 2**13: 2**13 reads of x written out
        ...     y = y * y
        >>> str(Composite([x], [y]))
        'Composite{t0 = mul(i0, i0); t1 = mul(t0, t0); ...; t12 = mul(t11, t11); t12}'
        """
        texts = dict(names)
        lines = []
        for n, node in enumerate(self.nodes):
            args = ", ".join([texts.get(v) or self._leaf_text(v) for v in node.inputs])
            lines.append(f"t{n} = {node.op}({args})")
            for j, o in enumerate(node.outputs):
                texts[o] = f"t{n}" if len(node.outputs) == 1 else f"t{n}[{j}]"
        outs = ", ".join([texts.get(o) or str(o) for o in self.outputs])
        return "; ".join([*lines, outs])

    @staticmethod
    def _expression_text(var, names, in_graph):
        parts = []
        append = parts.append
        stack = [var]  # Variables still to write, or literal text
        pop, push = stack.pop, stack.append
        while stack:
            item = pop()
            if item.__class__ is str:
                append(item)
                continue
            name = names.get(item)
            if name is not None:
                append(name)
                continue
            node = item.owner
            if node in in_graph:
                inputs = node.inputs
                append(f"{node.op}(")
                # ``)``, then the inputs from the last, ", " between them: popped in
                # reading order.
                push(")")
                k = len(inputs) - 1
                while k > 0:
                    push(inputs[k])
                    push(", ")
                    k -= 1
                if inputs:
                    push(inputs[0])
            else:
                append(Composite._leaf_text(item))
        return "".join(parts)

    @staticmethod
    def _leaf_text(var):
        """The text of a variable of the graph no node of it computes (a constant)."""
        if isinstance(var, Constant):
            d = var.data
            return str(d) if not hasattr(d, "item") else str(d.item())
        return str(var)

    # What __init__ sets, and the caches a composite may hold (made again on first use).
    _TABLE_FIELDS = frozenset(
        ("inputs", "outputs", "nodes", "nin", "nout", "in_dtypes", "out_dtypes", "_text", "name")
    )
    _CACHES = frozenset(("_structure_cache",))

    def _tables(self):
        """``(Composite._from_tables, args)``: the scalar graph as small tables (per
        node its op, where its inputs come from, its outputs' types), which a pickle
        stores in a third of the bytes and loads in a third of the time of the graph's
        objects; or None when the graph holds what the tables do not carry (a tag, a
        variable of another class, an attribute set after ``__init__``).

        >>> from theano_dag import scalar as ts
        >>> x = ts.float64("x")
        >>> c = Composite([x], [ts.exp(x) * 2])
        >>> build, args = c._tables()
        >>> d = build(*args)
        >>> d == c, str(d), d.nodes[0].inputs[0] is d.inputs[0]
        (True, 'Composite{mul(exp(i0), 2)}', True)
        """
        if type(self) is not Composite or not self._TABLE_FIELDS.issuperset(
            self.__dict__.keys() - self._CACHES
        ):
            return None
        where = {}
        notes = []  # (variable number, name, trace) of the variables that have any
        for k, v in enumerate(self.inputs):
            if type(v) is not ScalarVariable or v._tag is not None:
                return None
            where[v] = k
            if v.name is not None or v._trace is not None:
                notes.append((k, v.name, v._trace))
        k = len(self.inputs)
        nodes = []
        for node in self.nodes:
            if type(node) is not Apply or node._tag is not None:
                return None
            refs = []
            for v in node.inputs:
                r = where.get(v)
                if r is None:
                    if not isinstance(v, Constant):
                        return None
                    r = v  # a constant, pickled as itself
                refs.append(r)
            out_types = []
            for j, o in enumerate(node.outputs):
                if type(o) is not ScalarVariable or o._tag is not None or o.index != j:
                    return None
                where[o] = k
                if o.name is not None or o._trace is not None:
                    notes.append((k, o.name, o._trace))
                out_types.append(o.type)
                k += 1
            nodes.append(
                (node.op, tuple(refs), tuple(out_types), node._imported_by, node._removed_by)
            )
        outputs = []
        for o in self.outputs:
            r = where.get(o)
            if r is None:
                if not isinstance(o, Constant):
                    return None
                r = o
            outputs.append(r)
        in_types = tuple([v.type for v in self.inputs])
        return Composite._from_tables, (in_types, nodes, outputs, notes, self._text, self.name)

    @staticmethod
    def _from_tables(in_types, nodes, outputs, notes, text, name):
        """The composite that ``_tables`` wrote: its objects made directly, as a pickle
        makes them (no ``__init__``, whose checks and text the tables already passed)."""
        new = object.__new__
        count = Variable.__count__
        variables = []
        for t in in_types:
            v = new(ScalarVariable)
            v.type, v.owner, v.index, v.name, v._tag, v._trace = t, None, None, None, None, None
            v.creation_index = next(count)
            variables.append(v)
        graph = []
        for node_op, refs, out_types, imported_by, removed_by in nodes:
            node = new(Apply)
            node.op = node_op
            node.inputs = [variables[r] if type(r) is int else r for r in refs]
            node._tag = None
            node._imported_by, node._removed_by = imported_by, removed_by
            outs = []
            j = 0
            for t in out_types:
                v = new(ScalarVariable)
                v.type, v.owner, v.index, v.name, v._tag, v._trace = t, node, j, None, None, None
                v.creation_index = next(count)
                outs.append(v)
                j += 1
            node.outputs = outs
            variables += outs
            graph.append(node)
        for k, vname, trace in notes:
            variables[k].name, variables[k]._trace = vname, trace
        op = new(Composite)
        op.inputs = variables[: len(in_types)]
        op.outputs = [variables[r] if type(r) is int else r for r in outputs]
        op.nodes = graph
        op.nin = len(in_types)
        op.nout = len(outputs)
        op.in_dtypes = tuple([t.dtype for t in in_types])
        op.out_dtypes = tuple([v.type.dtype for v in op.outputs])
        op._text = text
        op.name = name
        return op

    def retyped(self, dtypes):
        """This composite's graph on inputs of ``dtypes``, each node made again so that
        its dtype follows them (Theano applies a composite to inputs of any types).

        >>> from theano_dag import scalar as ts
        >>> x = ts.float32("x")
        >>> Composite([x], [x + 1]).retyped(["float64"]).out_dtypes
        ('float64',)
        """
        inputs = [get_scalar_type(d)() for d in dtypes]
        equiv = dict(zip(self.inputs, inputs))
        for node in self.nodes:
            args = [equiv.get(v, v) for v in node.inputs]
            op = node.op
            in_dtypes = tuple(a.type.dtype for a in args)
            if isinstance(op, Composite) and in_dtypes != op.in_dtypes:
                op = op.retyped(in_dtypes)
            equiv.update(zip(node.outputs, op.make_node(*args).outputs))
        return Composite(inputs, [equiv.get(o, o) for o in self.outputs], copy=False)

    def make_node(self, *inputs):
        """The composite applied to ``inputs``; inputs of other dtypes than its own get
        the composite remade for them (``retyped``), as Theano's does.

        >>> from theano_dag import scalar as ts
        >>> i, f = ts.int8("i"), ts.float32("f")
        >>> c = Composite([i, f], [i * f])
        >>> c.make_node(ts.float64("x"), f).op.out_dtypes
        ('float64',)
        """
        # (read off the variables: the common case, dtypes that fit, converts once)
        dtypes = tuple(getattr(getattr(i, "type", None), "dtype", None) for i in inputs)
        if len(inputs) == self.nin and dtypes != self.in_dtypes and None not in dtypes:
            return self.retyped(dtypes).make_node(*inputs)
        return super().make_node(*inputs)

    def output_types_preference(self, *dtypes):
        if tuple(dtypes) != self.in_dtypes:
            raise TypeError(f"{self} expects input dtypes {self.in_dtypes}, got {tuple(dtypes)}")
        return self.out_dtypes

    def compute(self, inputs, out_dtypes):
        """Evaluate the scalar graph over numpy arrays."""
        values = {v: np.asarray(x) for v, x in zip(self.inputs, inputs)}
        for node in self.nodes:
            args = [
                np.asarray(v.data) if isinstance(v, Constant) else values[v] for v in node.inputs
            ]
            outs = node.op.compute(args, [o.type.dtype for o in node.outputs])
            values.update(zip(node.outputs, outs))
        return [np.asarray(values[o], dtype=d) for o, d in zip(self.outputs, out_dtypes)]

    def impl(self, *inputs):
        outs = self.compute(inputs, self.out_dtypes)
        return outs[0] if self.nout == 1 else outs

    @staticmethod
    def _expr_of(v, exprs, types, literal=c_literal):
        if isinstance(v, Constant):
            return literal(v.data, v.type.dtype, types)
        return exprs[v]

    def c_code(self, inputs, in_dtypes, out_dtypes, types=C_TYPES, literal=c_literal) -> list:
        """One nested C expression per output (intermediates cast to their dtype);
        ``literal(value, dtype, types)`` writes the graph's constants."""
        exprs = dict(zip(self.inputs, inputs))
        for node in self.nodes:
            args = [self._expr_of(v, exprs, types, literal) for v in node.inputs]
            outs = self._node_c_code(node, args, types, literal)
            for o, e in zip(node.outputs, outs):
                exprs[o] = e if o in self.outputs else self._as_type(e, o, node, types)
        return [self._expr_of(o, exprs, types, literal) for o in self.outputs]

    @staticmethod
    def _node_c_code(node, args, types, literal):
        in_dt = [v.type.dtype for v in node.inputs]
        out_dt = [o.type.dtype for o in node.outputs]
        if isinstance(node.op, Composite):  # a nested one writes its constants the same way
            return node.op.c_code(args, in_dt, out_dt, types, literal)
        return node.op.c_code(args, in_dt, out_dt, types)

    @staticmethod
    def _as_type(expr, var, node, types):
        # Intermediates keep the dtype of their scalar variable, as an array would.
        in_dt = {v.type.dtype for v in node.inputs}
        if in_dt == {var.type.dtype}:
            return expr
        return f"(({types[var.type.dtype]}){expr})"

    def c_code_statements(self, inputs, types=C_TYPES, prefix="v", literal=c_literal):
        """``(statements, output_names)``: one typed temporary per scalar node;
        ``literal(value, dtype, types)`` writes the graph's constants.

        >>> from theano_dag import scalar as ts
        >>> x = ts.float32("x")
        >>> s = ts.sqr(x)
        >>> Composite([x], [s + s]).c_code_statements(["in0[i]"])
        (['float v0 = (in0[i] * in0[i]);', 'float v1 = (v0 + v0);'], ['v1'])
        """
        names = dict(zip(self.inputs, inputs))
        lines = []
        k = 0
        for node in self.nodes:
            args = [self._expr_of(v, names, types, literal) for v in node.inputs]
            exprs = self._node_c_code(node, args, types, literal)
            for o, e in zip(node.outputs, exprs):
                name = f"{prefix}{k}"
                k += 1
                lines.append(f"{types[o.type.dtype]} {name} = {e};")
                names[o] = name
        return lines, [self._expr_of(o, names, types, literal) for o in self.outputs]

    complex_grad = True  # the expansion differentiates each node in the convention

    def L_op(self, inputs, outputs, output_grads):
        """Gradients by expanding the scalar graph into Elemwise tensor ops."""
        return vocabulary(inputs[0]).elemwise.expand_composite_grad(self, inputs, output_grads)
