"""Printing graphs: ``debugprint`` (an indented tree), ``pprint`` (infix math) and Graphviz DOT.

Everything here walks the graph with explicit stacks, so a chain of any depth
prints without touching Python's recursion limit.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from io import StringIO

import numpy as np

from theano_dag.config import config, install_hint
from theano_dag.graph.basic import Apply, Constant, Variable, io_toposort
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.op import Op
from theano_dag.graph.shared import SharedVariable
from theano_dag.tensor.elemwise import Elemwise
from theano_dag.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1, Subtensor

__all__ = [
    "Print",
    "debugprint",
    "dprint",
    "pprint",
    "pp",
    "register_pprint",
    "char_from_number",
    "hex_digest",
    "min_informative_str",
    "var_descriptor",
    "pydot_source",
    "to_dot",
    "pydotprint",
]


def char_from_number(number: int) -> str:
    """Base-26 letters for debugprint ids: 0 -> 'A', 25 -> 'Z', 26 -> 'BA'.

    >>> [char_from_number(n) for n in (0, 1, 25, 26, 27)]
    ['A', 'B', 'Z', 'BA', 'BB']
    """
    if number == 0:
        return "A"
    out = ""
    while number:
        number, rem = divmod(number, 26)
        out = chr(ord("A") + rem) + out
    return out


def min_informative_str(obj, indent_level=0, _prev_obs=None, _tag_generator=None) -> str:
    """Theano's short description of ``obj`` for error messages: a tree that stops at
    named variables and constants, one line per variable, tagged A, B, ... in order of
    first appearance (a variable seen again is ``<tag>``); each level indents one space.

    >>> import theano_dag.tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.dmatrix("b")
    >>> c = a + b
    >>> print(min_informative_str(c * c))
    A. Elemwise{mul,no_inplace}
     B. Elemwise{add,no_inplace}
      C. a
      D. b
     <B>
    """
    seen = {} if _prev_obs is None else _prev_obs
    counter = [0] if _tag_generator is None else _tag_generator
    indent = " " * indent_level
    if id(obj) in seen:
        return f"{indent}<{seen[id(obj)]}>"
    tag = seen[id(obj)] = char_from_number(counter[0])
    counter[0] += 1
    owner = getattr(obj, "owner", None)
    if hasattr(obj, "__array__"):
        text = "<ndarray>"
    elif getattr(obj, "name", None) is not None:
        text = obj.name
    elif owner is not None:
        lines = [str(owner.op)]
        for x in owner.inputs:
            lines.append(min_informative_str(x, indent_level + 1, seen, counter))
        text = "\n".join(lines)
    else:
        text = str(obj)
    return f"{indent}{tag}. {text}"


def var_descriptor(obj, _prev_obs=None, _tag_generator=None) -> str:
    """Theano's one-line description of how ``obj`` is computed, with no address in it
    (two runs of one program give one text): ``tag=op(inputs...)`` down to the graph's
    inputs, by name; an array by its strides and digest; a variable seen again ``<tag>``.

    >>> import theano_dag.tensor as tt
    >>> a, b = tt.dvectors("a", "b")
    >>> c = a + b
    >>> var_descriptor(c * c)
    'A=Elemwise{mul,no_inplace}(B=Elemwise{add,no_inplace}(C=a,D=b),<B>)'
    """
    seen = {} if _prev_obs is None else _prev_obs
    counter = [0] if _tag_generator is None else _tag_generator
    if id(obj) in seen:
        return f"<{seen[id(obj)]}>"
    tag = seen[id(obj)] = char_from_number(counter[0])
    counter[0] += 1
    owner = getattr(obj, "owner", None)
    if hasattr(obj, "__array__"):
        a = np.ascontiguousarray(obj)
        strides = ",".join(str(k) for k in np.asarray(obj).strides)
        text = f"<ndarray:strides=[{strides}],digest={hashlib.sha256(a).hexdigest()}>"
    elif owner is not None:
        args = ",".join(var_descriptor(x, seen, counter) for x in owner.inputs)
        text = f"{owner.op}({args})"
    elif getattr(obj, "name", None) is not None:
        # Only a graph input goes by its name: naming an intermediate variable must not
        # give a deeper graph the description of a shallower one.
        text = obj.name
    else:
        text = str(obj)
        if " at 0x" in text:  # an address: the description would differ between runs
            text = f"<{type(obj).__module__}.{type(obj).__qualname__}>"
    return f"{tag}={text}"


def hex_digest(x) -> str:
    """A digest of the numpy array ``x``: the SHA-256 of its bytes, then its strides and
    shape (the bytes alone do not say how they are laid out), as Theano's.

    >>> import numpy as np
    >>> hex_digest(np.zeros((2, 3)))[64:]
    '|strides=[24,8]|shape=[2,3]'
    >>> hex_digest(np.zeros(6)) == hex_digest(np.zeros((2, 3)))
    False
    """
    if not isinstance(x, np.ndarray):
        raise TypeError(f"hex_digest: expected a numpy array, got {type(x).__name__}")
    strides = ",".join(str(k) for k in x.strides)
    shape = ",".join(str(k) for k in x.shape)
    return f"{hashlib.sha256(x.tobytes()).hexdigest()}|strides=[{strides}]|shape=[{shape}]"


def _roots(obj):
    """``[(variable, toposort or None, storage_map or None)]`` to print for ``obj``."""
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    roots = []
    for item in items:
        if isinstance(item, Variable):
            roots.append((item, None, None))
        elif isinstance(item, Apply):
            roots.extend((o, None, None) for o in item.outputs)
        elif isinstance(getattr(item, "variable", None), Variable):
            # In / Out (compile's SymbolicInput / SymbolicOutput) wrap the variable to print.
            roots.append((item.variable, None, None))
        elif isinstance(getattr(getattr(item, "maker", None), "fgraph", None), FunctionGraph):
            # A compiled Function (compile sits above printing): print its optimized graph.
            fg = item.maker.fgraph
            topo = fg.toposort()
            smap = getattr(item.fn, "storage_map", None)
            roots.extend((o, topo, smap) for o in fg.outputs)
        elif isinstance(item, FunctionGraph):
            topo = item.toposort()
            roots.extend((o, topo, None) for o in item.outputs)
        else:
            raise TypeError(
                f"debugprint cannot print an object of type {type(item).__name__}: expected a "
                "Variable, an Apply, a Function, a FunctionGraph, or a list of them"
            )
    return roots


def _inner_links(node):
    """``{inner input: outer input}`` of a node whose op holds a graph: a loop's
    (Scan: its sequences' rows, each state's taps, carried values and non-sequences,
    read from the op's layout), or one input per outer input (OpFromGraph)."""
    op = node.op
    inner = list(getattr(op, "inner_inputs", ()))
    if hasattr(op, "split_outer") and hasattr(op, "inner_tap_inputs"):
        _, seqs, states, carried, non_seqs = op.split_outer(node.inputs)
        links = dict(zip(op.inner_seqs(inner), seqs))
        for taps, outer in zip(op.inner_tap_inputs(), states):
            links.update((tap, outer) for tap in taps)
        links.update(zip(op.inner_carry_inputs(), carried))
        links.update(zip(op.inner_non_seqs(inner), non_seqs))
        return links
    if len(inner) == len(node.inputs):
        return dict(zip(inner, node.inputs))
    return {}


def debugprint(
    obj,
    depth=-1,
    print_type=False,
    file=None,
    ids="CHAR",
    stop_on_name=False,
    done=None,
    print_storage=False,
    used_ids=None,
    print_destroy_map=False,
    print_view_map=False,
    _inner=False,
    _links=None,
):
    """Print the graph of ``obj`` as an indented tree, one line per variable.

    ``obj`` is a Variable, an Apply, a Function, a FunctionGraph, or a list of
    them. A computed variable prints as its op (``.i`` for the ``i``-th output
    of a multi-output op), an id, ``'name'`` when named, and for a Function its
    position in the run order; its inputs follow, indented under `` |``. A node
    seen before prints only its id. The graphs inside ops (a scan's step, an
    OpFromGraph) follow under "Inner graphs:", each of their inputs with ``-> [id X]``,
    the outer variable it is fed (Theano's arrow). ``ids`` is "CHAR" (A, B, ...), "int",
    "id" (Python ids) or "" (none). ``file``: None (stdout), "str" (return the
    text) or a file object.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.op import Op
    >>> class Add(Op):
    ...     __props__ = ()
    ...     def make_node(self, *xs):
    ...         return Apply(self, list(xs), [Generic()()])
    >>> x, y = Generic()("x"), Generic()("y")
    >>> s = Add()(x, y)
    >>> print(debugprint(Add()(s, s), file="str"))
    Add [id A]
     |Add [id B]
     | |x [id C]
     | |y [id D]
     |Add [id B]
    """
    if not isinstance(depth, int):
        raise TypeError(f"debugprint: depth must be an int, got {depth!r}")
    if ids not in ("CHAR", "int", "id", ""):
        raise ValueError(f"debugprint: ids must be 'CHAR', 'int', 'id' or '', got {ids!r}")
    out = StringIO() if file == "str" else (sys.stdout if file is None else file)
    done = {} if done is None else done
    used_ids = {} if used_ids is None else used_ids

    def id_of(key):
        if key not in used_ids:
            n = len(used_ids)
            used_ids[key] = {
                "CHAR": f"[id {char_from_number(n)}]",
                "int": f"[id {n}]",
                "id": f"[id {id(key)}]",
                "": "",
            }[ids]
        return used_ids[key]

    for root, order, smap in _roots(obj):
        position = {node: k for k, node in enumerate(order)} if order else {}
        stack = [(root, "", "", depth)]
        while stack:
            var, prefix, prefix_child, d = stack.pop()
            if d == 0:
                continue
            parts = []
            node = var.owner
            if node is not None:
                idx = f".{node.outputs.index(var)}" if len(node.outputs) > 1 else ""
                parts.append(f"{prefix}{node.op}{idx}")
                key = node
            else:
                parts.append(f"{prefix}{var}")
                key = var
            ident = id_of(key)
            if ident:
                parts.append(ident)
            if print_type:
                parts.append(f"<{var.type}>")
            if node is not None:
                if var.name is not None:
                    parts.append(f"'{var.name}'")
                if print_destroy_map and getattr(node.op, "destroy_map", None):
                    parts.append(f"d={node.op.destroy_map}")
                if print_view_map and getattr(node.op, "view_map", None):
                    parts.append(f"v={node.op.view_map}")
                if node in position:
                    parts.append(str(position[node]))
            if print_storage and smap is not None and var in smap:
                parts.append(str(smap[var][0]))
            if _links and var in _links:
                # an inner graph's input: the outer variable it is fed (Theano's arrow)
                outer = _links[var]
                parts.append(f"-> {id_of(outer.owner if outer.owner is not None else outer)}")
            print(" ".join(parts), file=out)
            if node is None or key in done:
                continue
            done[key] = ident
            if stop_on_name and var.name is not None and var is not root:
                continue
            children = []
            n = len(node.inputs)
            for k, inp in enumerate(node.inputs):
                child_prefix_child = prefix_child + ("  " if k == n - 1 else " |")
                children.append((inp, prefix_child + " |", child_prefix_child, d - 1))
            stack.extend(reversed(children))
    # Ops that hold a graph of their own (Scan, OpFromGraph, MapOverIndex: an
    # ``inner_outputs`` attribute) print it after the outer graph, as Theano does, each
    # line of it under `` >``; an inner graph's own inner graphs follow in turn.
    inner_nodes = [k for k in done if getattr(getattr(k, "op", None), "inner_outputs", None)]
    if inner_nodes and depth != 0 and not _inner:
        print("\nInner graphs:", file=out)
        shown = set()
        while inner_nodes:
            node = inner_nodes.pop(0)
            if node.op in shown:
                continue
            shown.add(node.op)
            print(f"\n{node.op} {id_of(node)}".rstrip(), file=out)
            sub_done: dict = {}
            links = _inner_links(node)
            for inner_out in node.op.inner_outputs:
                text = debugprint(
                    inner_out,
                    depth=depth,
                    print_type=print_type,
                    file="str",
                    ids=ids,
                    stop_on_name=stop_on_name,
                    done=sub_done,
                    used_ids=used_ids,
                    _inner=True,
                    _links=links,
                )
                for line in text.splitlines():
                    print(f" >{line}", file=out)
            inner_nodes.extend(
                k
                for k in sub_done
                if getattr(getattr(k, "op", None), "inner_outputs", None) and k.op not in shown
            )
    if file == "str":
        return out.getvalue().rstrip("\n")
    if file is None:
        return None
    return file


dprint = debugprint


# ---------------------------------------------------------------------------
# pprint: infix math

# Python's operator precedence: higher binds tighter.
_BINARY = {
    "add": ("+", 10),
    "sub": ("-", 10),
    "mul": ("*", 20),
    "true_div": ("/", 20),
    "int_div": ("//", 20),
    "mod": ("%", 20),
    "pow": ("**", 40),
    "lt": ("<", 5),
    "gt": (">", 5),
    "le": ("<=", 5),
    "ge": (">=", 5),
    "eq": ("==", 5),
    "neq": ("!=", 5),
    "and_": ("&", 8),
    "or_": ("|", 6),
    "xor": ("^", 7),
}
_UNARY = {"neg": ("-", 30), "invert": ("~", 30)}
_ATOM = 100

# Extra printers: op class -> fn(node, [(string, precedence, key)]) -> (string, precedence)
_PRINTERS: dict = {}


def register_pprint(op_type, printer):
    """Make ``pprint`` print nodes of ``op_type`` with ``printer(node, args)``, where ``args``
    is one ``(string, precedence, op_key)`` per input; it returns ``(string, precedence)``
    (precedence 100 for an atom such as a call)."""
    _PRINTERS[op_type] = printer


def _is_elementwise(op) -> bool:
    # Reductions also carry a scalar_op (Sum has add): only Elemwise is infix.
    return isinstance(op, Elemwise)


def _op_key(op) -> str:
    """The scalar op's name for elementwise ops (``add``, ``exp``...), else ''."""
    scalar = getattr(op, "scalar_op", None)
    if scalar is not None and _is_elementwise(op):
        return getattr(scalar, "name", None) or type(scalar).__name__.lower()
    return ""


def _is_broadcast_only(op) -> bool:
    """A DimShuffle that only adds broadcastable axes, keeping the order: invisible in math."""
    order = getattr(op, "new_order", None)
    if order is None:
        return False
    kept = [a for a in order if a != "x"]
    return kept == sorted(kept) and len(kept) == len(getattr(op, "input_broadcastable", kept))


def _is_transpose(op) -> bool:
    order = getattr(op, "new_order", None)
    if order is None or "x" in order:
        return False
    return list(order) == list(range(len(order)))[::-1] and len(order) > 1


def _format_node(node, args):
    op = node.op
    for klass in type(op).__mro__:
        if klass in _PRINTERS:
            return _PRINTERS[klass](node, args)
    key = _op_key(op)
    n = len(args)
    if key in _BINARY and n >= 2:
        sym, prec = _BINARY[key]
        pieces = []
        for k, (s, p, child_key) in enumerate(args):
            # Left-associative, except ** which is right-associative; a + (b + c)
            # and a * (b * c) need no parentheses.
            needs = p < prec or (p == prec and (k > 0 if sym != "**" else k == 0))
            if child_key == key and key in ("add", "mul"):
                needs = False
            pieces.append(f"({s})" if needs else s)
        return f" {sym} ".join(pieces), prec
    if key in _UNARY and n == 1:
        sym, prec = _UNARY[key]
        s, p, _ = args[0]
        return (f"{sym}{s}" if p >= prec else f"{sym}({s})"), prec
    if getattr(op, "new_order", None) is not None and n == 1:
        if _is_broadcast_only(op):
            return args[0][:2]
        if _is_transpose(op):
            s, p, _ = args[0]
            return (f"{s}.T" if p >= _ATOM else f"({s}).T"), _ATOM
    name = key or str(op)
    return f"{name}({', '.join(a[0] for a in args)})", _ATOM


def _leaf(var) -> str:
    if isinstance(var, Constant) and var.name is None:
        data = var.data
        if isinstance(data, (bool, int, float, complex)):
            return str(data)
        item = getattr(data, "item", None)
        if getattr(data, "ndim", None) == 0 and item is not None:
            return str(item())
        return str(var)
    return str(var)


def _pprint_var(root) -> str:
    memo: dict = {}
    stack = [root]
    while stack:
        var = stack[-1]
        if var in memo:
            stack.pop()
            continue
        node = var.owner
        if node is None:
            memo[var] = (_leaf(var), _ATOM, None)
            stack.pop()
            continue
        missing = [i for i in node.inputs if i not in memo]
        if missing:
            stack.extend(reversed(missing))
            continue
        stack.pop()
        s, p = _format_node(node, [memo[i] for i in node.inputs])
        if len(node.outputs) > 1:
            s, p = f"{s}[{node.outputs.index(var)}]", _ATOM
        memo[var] = (s, p, _op_key(node.op) if p != _ATOM else None)
    return memo[root][0]


def _index_printer(node, args):
    """``x[1:, i]``: an indexing node as Python writes the index (Theano's pprint of
    Subtensor and the advanced indexings); an index the op holds no structure of (the
    advanced ones of Theano 1.0's form) prints its inputs in order."""
    (text, prec, _), *rest = args
    base = text if prec >= _ATOM else f"({text})"
    values = iter(a[0] for a in rest)
    idx_list = getattr(node.op, "idx_list", None)
    if idx_list is None:
        return f"{base}[{', '.join(values)}]", _ATOM
    parts = []
    for entry in idx_list:
        kind = entry[0]
        if kind == "slice":
            start, stop, *step = [next(values) if present else "" for present in entry[1:]]
            parts.append(f"{start}:{stop}" + (f":{step[0]}" if step and step[0] else ""))
        elif kind == "none":
            parts.append("None")
        else:  # an int, a tensor or a slice given at run time: one input each
            parts.append(next(values))
    return f"{base}[{', '.join(parts)}]", _ATOM


for _indexing in (Subtensor, AdvancedSubtensor1, AdvancedSubtensor):
    register_pprint(_indexing, _index_printer)


def pprint(obj) -> str:
    """Infix text of a graph: ``(x + y) * exp(z)``; ops without a symbol print as calls.

    ``obj``: a Variable, a Function or FunctionGraph (one line per output), or
    a list of Variables.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.op import Op
    >>> class Exp(Op):
    ...     __props__ = ()
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [Generic()()])
    >>> pprint(Exp()(Generic()("z")))
    'Exp(z)'
    """
    roots = [v for v, _, _ in _roots(obj)]
    return "\n".join(_pprint_var(v) for v in roots)


pp = pprint


# ---------------------------------------------------------------------------
# Graphviz

_COLORS = {
    "input": "limegreen",
    "shared": "palegreen",
    "constant": "lightgrey",
    "output": "dodgerblue",
    "apply": "white",
}


def _dot_escape(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def pydot_source(obj, print_type=False, max_label_size=70, graph_name="G") -> str:
    """Graphviz DOT text of a graph: Apply nodes as ellipses (with their position in the
    run order), inputs green boxes, constants grey, outputs blue; edges labelled with
    the input position when a node has several inputs.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.op import Op
    >>> class Neg(Op):
    ...     __props__ = ()
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [Generic()()])
    >>> print(pydot_source(Neg()(Generic()("x"))))
    digraph G {
      n0 [label="x", shape=box, style=filled, fillcolor=limegreen];
      n1 [label="Neg 0", shape=ellipse];
      n2 [label="output 0", shape=box, style=filled, fillcolor=dodgerblue];
      n0 -> n1;
      n1 -> n2;
    }
    """
    roots = _roots(obj)
    outputs = [v for v, _, _ in roots]
    order = next((o for _, o, _ in roots if o is not None), None)
    if order is None:
        order = io_toposort([], outputs)

    def label(text):
        text = str(text)
        return text if len(text) <= max_label_size else text[: max_label_size - 3] + "..."

    ids: dict = {}
    lines = [f"digraph {graph_name} {{"]
    edges = []

    def var_node(var):
        if var in ids:
            return ids[var]
        ids[var] = f"n{len(ids)}"
        kind = (
            "constant"
            if isinstance(var, Constant)
            else ("shared" if isinstance(var, SharedVariable) else "input")
        )
        text = str(var) + (f"\\n{var.type}" if print_type else "")
        lines.append(
            f'  {ids[var]} [label="{_dot_escape(label(text))}", shape=box, style=filled, '
            f"fillcolor={_COLORS[kind]}];"
        )
        return ids[var]

    for k, node in enumerate(order):
        for inp in node.inputs:
            if inp.owner is None:
                var_node(inp)
        ids[node] = f"n{len(ids)}"
        lines.append(
            f'  {ids[node]} [label="{_dot_escape(label(f"{node.op} {k}"))}", ' "shape=ellipse];"
        )
        for i, inp in enumerate(node.inputs):
            src = ids[inp] if inp.owner is None else ids[inp.owner]
            attrs = []
            if len(node.inputs) > 1:
                attrs.append(f"{i}")
            if inp.owner is not None and inp.name:
                attrs.append(inp.name)
            if print_type and inp.owner is not None:
                attrs.append(str(inp.type))
            edge = f"  {src} -> {ids[node]}"
            if attrs:
                edge += f' [label="{_dot_escape(" ".join(attrs))}"]'
            edges.append(edge + ";")
    for k, out in enumerate(outputs):
        src = ids[out.owner] if out.owner is not None else var_node(out)
        name = f"output {k}" + (f" {out.name}" if out.name else "")
        oid = f"n{len(ids)}"
        ids[("output", k)] = oid
        lines.append(
            f'  {oid} [label="{_dot_escape(label(name))}", shape=box, style=filled, '
            f"fillcolor={_COLORS['output']}];"
        )
        edges.append(f"  {src} -> {oid};")
    return "\n".join(lines + edges + ["}"])


to_dot = pydot_source


# Theano's flag of whether pydotprint can draw: here, whether the graphviz package it
# renders with is installed (looked up, not imported: importing it costs time).
pydot_imported = importlib.util.find_spec("graphviz") is not None


def pydotprint(fct, outfile=None, format=None, print_type=False, max_label_size=70):
    """Render the graph of ``fct`` to an image file with the ``graphviz`` package; return
    the file's path. ``format`` defaults to ``outfile``'s extension, else png; ``outfile``
    to ``<compiledir>/theano_dag.pydotprint.<format>``."""
    try:
        import graphviz
    except ImportError:
        raise ImportError(
            "pydotprint needs the graphviz Python package (and Graphviz's `dot` program): "
            f"{install_hint('graphviz', 'graphviz>=0.20')}. "
            "pydot_source() gives the DOT text without it."
        ) from None

    source = pydot_source(fct, print_type=print_type, max_label_size=max_label_size)
    ext = os.path.splitext(outfile)[1].lstrip(".") if outfile else ""
    format = format or ext or "png"
    if outfile is None:
        outfile = os.path.join(config.compiledir, f"theano_dag.pydotprint.{format}")
    # graphviz appends ".<format>" itself.
    base = outfile[: -len(format) - 1] if outfile.endswith(f".{format}") else outfile
    os.makedirs(os.path.dirname(os.path.abspath(base)), exist_ok=True)
    try:
        return graphviz.Source(source).render(filename=base, format=format, cleanup=True)
    except graphviz.ExecutableNotFound as e:
        raise RuntimeError(
            f"pydotprint: Graphviz's `dot` program is not installed or not on PATH ({e})"
        ) from e


def _print_attrs(op, value):
    """``Print``'s default ``global_fn``: the message and each attribute of the value."""
    for attr in op.attrs:
        shown = getattr(value, attr)
        if callable(shown):
            shown = shown()
        print(op.message, attr, "=", shown)


class Print(Op):
    """Pass a value through unchanged, printing ``message`` and the attributes ``attrs``
    of the value (``__str__``: the value itself; ``shape``, ``dtype``...) each time the
    function computes it (Theano's ``theano.printing.Print``). ``global_fn(op, value)``
    replaces the printing. It is never folded as a constant, so it prints at every call;
    gradients go through it.

    >>> import numpy as np
    >>> import theano_dag
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> f = theano_dag.function([x], Print("x is", attrs=("shape", "__str__"))(x) * 2)
    >>> f(np.array([1.0, 2.0]))
    x is shape = (2,)
    x is __str__ = [1. 2.]
    array([2., 4.])
    """

    __props__ = ("message", "attrs", "global_fn")
    view_map = {0: [0]}

    def __init__(self, message="", attrs=("__str__",), global_fn=_print_attrs):
        self.message = message
        self.attrs = tuple(attrs)
        self.global_fn = global_fn

    def make_node(self, x):
        if not isinstance(x, Variable):
            raise TypeError(f"Print expects a Variable, got {type(x).__name__}")
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[0]
        self.global_fn(self, inputs[0])

    def infer_shape(self, fgraph, node, input_shapes):
        return input_shapes

    def grad(self, inputs, output_grads):
        return list(output_grads)

    def R_op(self, inputs, eval_points):
        return list(eval_points)

    def do_constant_folding(self, fgraph, node):
        return False  # a folded Print would print once, when the function is compiled
