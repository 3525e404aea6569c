"""Algorithms over the graph of ``theano_dag.graph.basic`` (re-exported from there).

Walking (``walk``, ``ancestors``, ``graph_inputs``, ...), cloning (``clone``,
``clone_get_equiv``, ``clone_replace``), ordering (``general_toposort``,
``io_toposort``) and printing (``as_string``), as in ``theano.graph.basic``; comparison
(``equal_computations``, ``is_same_graph``) is in ``comparison``. All iterative: no recursion, so
100,000-deep chains work.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Hashable, Iterable

from theano_dag.graph.basic import Apply, Variable

__all__ = [
    "toposort",
    "walk",
    "ancestors",
    "graph_inputs",
    "inputs",
    "vars_between",
    "variables",
    "orphans_between",
    "orphans",
    "applys_between",
    "ops",
    "variables_and_orphans",
    "stack_search",
    "clone",
    "clone_get_equiv",
    "clone_replace",
    "general_toposort",
    "indexed_toposort",
    "io_toposort",
    "post_order",
    "io_connection_pattern",
    "as_string",
    "op_as_string",
    "view_roots",
    "list_of_nodes",
    "is_in_ancestors",
]


# ---------------------------------------------------------------------------
# Walking the graph


def walk(
    nodes: Iterable,
    expand: Callable,
    bfs: bool = True,
    return_children: bool = False,
    hash_fn: Callable[[object], Hashable] = id,
):
    """Yield each node reachable from ``nodes`` through ``expand`` once.

    >>> list(walk([1], lambda n: [n + 1] if n < 4 else None))
    [1, 2, 3, 4]
    """
    todo = deque(nodes)
    seen = set()
    pop = todo.popleft if bfs else todo.pop
    while todo:
        node = pop()
        h = hash_fn(node)
        if h in seen:
            continue
        seen.add(h)
        new = expand(node)
        if return_children:
            # The caller may iterate the children; a one-shot iterator would then be empty here.
            if new is not None and not isinstance(new, (list, tuple)):
                new = list(new)
            yield node, new
        else:
            yield node
        if new:
            todo.extend(new)


def ancestors(graphs: Iterable[Variable], blockers=None):
    """Yield the variables ``graphs`` depend on (themselves included), depth first.

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> list(ancestors([z]))
    [z, x, y]
    >>> list(ancestors([z], blockers=[z]))
    [z]
    """
    blockers = set(blockers) if blockers else ()

    def expand(r):
        if r.owner is not None and r not in blockers:
            return reversed(r.owner.inputs)

    yield from walk(graphs, expand, bfs=False)


def graph_inputs(graphs: Iterable[Variable], blockers=None) -> list:
    """Return the ownerless variables that ``graphs`` depend on, in depth-first order.

    The search stops at ``blockers``; like Theano, a blocker that has an owner is
    not itself returned.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.op import Op
    >>> class Join(Op):
    ...     def make_node(self, *xs):
    ...         return Apply(self, list(xs), [Variable(Generic())])
    >>> a, b = Variable(Generic(), name="a"), Variable(Generic(), name="b")
    >>> graph_inputs([Join()(a, Join()(b, a))])
    [a, b]
    """
    return [r for r in ancestors(graphs, blockers) if r.owner is None]


inputs = graph_inputs


def vars_between(ins: Iterable[Variable], outs: Iterable[Variable]):
    """Yield the variables on paths from ``ins`` to ``outs`` (with all outputs of each node).

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> list(vars_between([x], [z]))
    [z, y, x]
    """
    ins = set(ins)

    def expand(r):
        if r.owner is not None and r not in ins:
            return reversed(r.owner.inputs + r.owner.outputs)

    yield from walk(outs, expand)


def variables(i, o) -> list:
    """List the variables between ``i`` and ``o`` (Theano 1.0 name of ``vars_between``).

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> variables([x], [z])
    [z, y, x]
    """
    return list(vars_between(i, o))


def orphans_between(ins, outs) -> list:
    """Return the ownerless variables needed by ``outs`` that are not in ``ins``.

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> orphans_between([x], [z])
    [y]
    """
    ins_set = set(ins)
    return [r for r in vars_between(ins_set, outs) if r.owner is None and r not in ins_set]


orphans = orphans_between


def applys_between(ins, outs) -> list:
    """Return the Apply nodes between ``ins`` and ``outs`` (each once).

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> applys_between([x, y], [z])
    [f(x, y)]
    """
    ins = set(ins)
    seen = {}
    for r in vars_between(ins, outs):
        if r not in ins and r.owner is not None:
            seen.setdefault(r.owner, None)
    return list(seen)


def ops(i, o) -> set:
    """Return the set of Apply nodes between ``i`` and ``o`` (Theano 1.0 name).

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> ops([x, y], [z])
    {f(x, y)}
    """
    return set(applys_between(i, o))


def variables_and_orphans(i, o):
    """Return ``(variables, orphans)`` between ``i`` and ``o``.

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> variables_and_orphans([x], [z])
    ([z, y, x], [y])
    """
    vs = variables(i, o)
    i = set(i)
    return vs, [r for r in vs if r.owner is None and r not in i]


def stack_search(start, expand, mode="bfs", build_inv=False):
    """Search from ``start`` with ``expand``; return the nodes (and the inverse map if asked).

    >>> stack_search([1], lambda n: [n * 2] if n < 8 else None)
    [1, 2, 4, 8]
    """
    if mode not in ("bfs", "dfs"):
        raise ValueError(f"mode should be 'bfs' or 'dfs', got {mode!r}")
    rval, inv = [], {}
    for node, children in walk(start, expand, bfs=mode == "bfs", return_children=True):
        rval.append(node)
        if build_inv and children:
            for c in children:
                inv.setdefault(c, []).append(node)
    return (rval, inv) if build_inv else rval


# ---------------------------------------------------------------------------
# Cloning


def clone(inputs, outputs, copy_inputs=True, copy_orphans=None):
    """Copy the graph between ``inputs`` and ``outputs``; return ``(new_inputs, new_outputs)``.

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> (x2, y2), (z2,) = clone([x, y], [z])
    >>> z2.owner.inputs == [x2, y2], x2 is x
    (True, False)
    """
    if copy_orphans is None:
        copy_orphans = copy_inputs
    equiv = clone_get_equiv(inputs, outputs, copy_inputs, copy_orphans)
    return [equiv[i] for i in inputs], [equiv[o] for o in outputs]


def clone_get_equiv(inputs, outputs, copy_inputs=True, copy_orphans=True, memo=None):
    """Copy the graph between ``inputs`` and ``outputs``; return the ``{old: new}`` map.

    The map covers every Variable and Apply of the graph. Inputs (and orphans,
    such as constants) are copied only when asked; otherwise they map to themselves.

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> equiv = clone_get_equiv([x], [z], copy_inputs=False, copy_orphans=False)
    >>> equiv[x] is x, equiv[y] is y, equiv[z] is z, equiv[z.owner].inputs
    (True, True, False, [x, y])
    """
    return _clone_in_order(inputs, outputs, copy_inputs, copy_orphans, memo)[0]


def _clone_in_order(inputs, outputs, copy_inputs=True, copy_orphans=True, memo=None):
    """``clone_get_equiv``'s map and the Apply nodes it copied, in the order copied (a
    topological order: ``io_toposort``'s)."""
    if memo is None:
        memo = {}
    for inp in inputs:
        if copy_inputs:
            cpy = inp.clone()
            cpy.owner = None
            cpy.index = None
            memo.setdefault(inp, cpy)
        else:
            memo.setdefault(inp, inp)
    get = memo.get
    order = io_toposort(inputs, outputs)
    for node in order:
        new_inputs = []
        for inp in node.inputs:
            new = get(inp)
            if new is None:
                new = memo[inp] = inp.clone() if copy_orphans else inp
            new_inputs.append(new)
        new_node = node.clone_with_new_inputs(new_inputs)
        memo.setdefault(node, new_node)
        for out, new_out in zip(node.outputs, new_node.outputs):
            memo.setdefault(out, new_out)
    # An output that no node computes (an ownerless output that is not an input).
    for out in outputs:
        if out not in memo:
            memo[out] = out.clone()
    return memo, order


def clone_replace(output, replace=None, strict=True, share_inputs=True):
    """Copy the graph of ``output`` with the variables of ``replace`` substituted.

    ``replace`` is a dict or a list of ``(old, new)`` pairs. Every Apply between the
    graph inputs and ``output`` is copied; each ``new`` is used as it is and its own
    graph is not searched (so ``x -> 2 * x`` works). With ``share_inputs`` the graph
    inputs and constants are reused, otherwise they are cloned too, one copy each, in
    the replacements' graphs as well (as Theano's). With ``strict`` a replacement must
    have (or convert to) the type of what it replaces.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.op import Op
    >>> class F(Op):
    ...     __props__ = ()
    ...     def make_node(self, *xs):
    ...         return Apply(self, list(xs), [Generic()()])
    >>> x, y = Generic()("x"), Generic()("y")
    >>> out = F()(F()(x))
    >>> new = clone_replace(out, {x: y})
    >>> new.owner.inputs[0].owner.inputs, out.owner.inputs[0].owner.inputs
    ([y], [x])
    """
    if isinstance(replace, dict):
        items = list(replace.items())
    elif isinstance(replace, (list, tuple)):
        items = list(replace)
    elif replace is None:
        items = []
    else:
        raise ValueError(
            f"clone_replace: replace must be a dict, a list of (old, new) pairs or None, "
            f"got {type(replace).__name__}: {replace!r}"
        )
    single = isinstance(output, Variable)
    outs = [output] if single else list(output)
    copies: dict = {}  # each ownerless input (or constant) of the graphs: its copy

    def copied(v):
        if v not in copies:
            copies[v] = v if share_inputs else v.clone()
        return copies[v]

    memo: dict = {}
    for old, new in items:
        if not isinstance(old, Variable):
            raise TypeError(f"clone_replace: the key {old!r} to replace must be a Variable")
        if not isinstance(new, Variable) or (strict and new.type != old.type):
            new = old.type.filter_variable(new)
        memo[old] = new
    if not share_inputs and items:
        # A replacement's graph is the new graph's too: its inputs are copied as well.
        news = list(memo.values())
        new_memo: dict = {}
        for node in io_toposort(graph_inputs(news), news):
            ins = [new_memo[i] if i in new_memo else copied(i) for i in node.inputs]
            new_memo.update(zip(node.outputs, node.clone_with_new_inputs(ins).outputs))
        for old in list(memo):
            new = memo[old]
            memo[old] = new_memo[new] if new in new_memo else copied(new)
    for node in io_toposort(list(memo), outs):
        for i in node.inputs:
            if i not in memo:  # an ownerless input of the graph (or a constant)
                memo[i] = copied(i)
        new_node = node.clone_with_new_inputs([memo[i] for i in node.inputs], strict=strict)
        memo[node] = new_node
        for o, n in zip(node.outputs, new_node.outputs):
            # setdefault: an output that is itself replaced keeps its replacement.
            memo.setdefault(o, n)
    res = [memo[o] if o in memo else copied(o) for o in outs]
    return res[0] if single else res


# ---------------------------------------------------------------------------
# Ordering


def general_toposort(outputs, deps, compute_deps_cache=None, deps_cache=None, clients=None):
    """Order everything ``outputs`` depend on through ``deps`` so dependencies come first.

    ``deps(x)`` returns the direct dependencies of ``x``. Raises ValueError on a cycle.

    >>> general_toposort(["c"], {"c": ["a", "b"], "b": ["a"], "a": []}.get)
    ['a', 'b', 'c']
    """
    if compute_deps_cache is None:
        if deps_cache is None:
            deps_cache = {}

        def compute_deps_cache(io):
            d = deps_cache.get(io, _MISSING)
            if d is _MISSING:
                d = deps(io)
                if isinstance(d, (set, frozenset)):
                    raise TypeError(
                        f"deps({io!r}) returned a {type(d).__name__}: its iteration order is "
                        "not deterministic, so neither would the toposort be; return a list"
                    )
                if d and not isinstance(d, list):
                    d = list(d)
                # Duplicates need no care: a dependency listed twice is counted twice
                # in ``pending`` and releases its client twice.
                deps_cache[io] = d
            return d

    elif deps_cache is None:
        raise ValueError("deps_cache must be given with compute_deps_cache")

    # Depth-first discovery (as ``walk(..., bfs=False)``, inlined: this is a hot loop),
    # then Kahn's algorithm: a node is ready once all its dependencies are placed.
    _clients: dict = {}
    pending: dict = {}
    sources = deque()
    seen: set = set()
    stack = list(outputs)
    n_found = 0
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        n_found += 1
        children = compute_deps_cache(node)
        if children:
            if not isinstance(children, list):
                children = list(children)
            pending[node] = len(children)
            for child in children:
                _clients.setdefault(child, []).append(node)
            stack.extend(children)
        else:
            sources.append(node)
    if clients is not None:
        clients.update(_clients)
    order = []
    while sources:
        node = sources.popleft()
        order.append(node)
        for client in _clients.get(node, ()):
            pending[client] -= 1
            if pending[client] == 0:
                sources.append(client)
    if len(order) != n_found:
        stuck = [str(n) for n, c in pending.items() if c > 0][:10]
        raise ValueError(f"graph contains cycles (through {', '.join(stuck)})")
    return order


_MISSING = object()


def indexed_toposort(deps) -> tuple[list, list]:
    """Kahn's algorithm over items ``0..len(deps)-1``; ``deps[i]`` lists what item ``i``
    depends on (a dependency listed twice is waited for twice).

    Among the items that are ready, the lowest index goes first, so items already in a
    valid order keep it. Returns ``(order, waiting)``: ``order`` is complete unless there
    is a cycle, and then ``waiting[i] > 0`` marks the items on or behind one (the
    callers name a cycle in their own terms). The other sorts of the package, over
    Apply nodes, jobs of a dict graph and OpGraph nodes, are this one or
    :func:`general_toposort`.

    >>> indexed_toposort([[2], [], []])
    ([1, 2, 0], [0, 0, 0])
    >>> indexed_toposort([[1], [0], []])
    ([2], [1, 1, 0])
    """
    waiting = [len(d) for d in deps]
    users: list = [[] for _ in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = [i for i, w in enumerate(waiting) if not w]  # ascending: already a heap
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if not waiting[u]:
                heapq.heappush(ready, u)
    return order, waiting


def post_order(outputs, computed, known=()) -> list:
    """The Apply nodes that compute ``outputs`` from the Variables in ``computed`` (a
    set, which grows by the outputs of the nodes listed) or in ``known`` (any container,
    left as it is: a dict of those already cloned, too large to copy per call), in a
    topological order: an iterative post-order depth-first walk over Apply nodes.

    A node is "expanded" once its missing dependencies are pushed above it on the
    stack, so everything above an expanded, unfinished node is one of its ancestors:
    needing such a node again means a cycle.

    >>> from theano_dag.graph.type import generic
    >>> x = generic("x")
    >>> z = Apply("f", [x], [generic("z")]).outputs[0]
    >>> w = Apply("g", [z, x], [generic("w")]).outputs[0]
    >>> post_order([w], {x}), post_order([w], set(), known={z: None})
    ([f(x), g(z, x)], [g(z, x)])
    """
    order = []
    expanded: set = set()
    done: set = set()
    todo = [
        o.owner
        for o in reversed(list(outputs))
        if o.owner is not None and o not in computed and o not in known
    ]
    while todo:
        cur = todo[-1]
        if cur in expanded:
            todo.pop()
            if cur in done:
                continue  # already placed (it was on the stack twice)
        else:
            expanded.add(cur)
            n_todo = len(todo)
            for i in reversed(cur.inputs):
                if i not in computed and i not in known:
                    owner = i.owner
                    if owner is not None:
                        if owner in expanded:
                            raise ValueError(f"graph contains cycles (through {owner})")
                        todo.append(owner)
            if len(todo) != n_todo:
                continue
            todo.pop()
        done.add(cur)
        computed.update(cur.outputs)
        order.append(cur)
    return order


def _post_order_to_sources(outputs) -> list:
    """``post_order(outputs, set(inputs))`` when every input is ownerless: the walk then
    stops at ownerless variables only, so it keeps one state per node (expanded, done)
    instead of sets of variables, and compares nothing per input but its owner's state.
    The order is the same node for node (FunctionGraph.toposort sorts graphs this way,
    several times per compile).

    >>> from theano_dag.graph.type import generic
    >>> x = generic("x")
    >>> z = Apply("f", [x], [generic("z")]).outputs[0]
    >>> w = Apply("g", [z, x, z], [generic("w")]).outputs[0]
    >>> _post_order_to_sources([w, z]) == post_order([w, z], {x})
    True
    """
    order = []
    state: dict = {}  # node -> 1 while its inputs are being placed, 2 once placed
    get = state.get
    todo = [o.owner for o in reversed(list(outputs)) if o.owner is not None]
    push, pop = todo.append, todo.pop
    while todo:
        cur = todo[-1]
        st = get(cur)
        if st is None:
            state[cur] = 1
            n_todo = len(todo)
            for i in reversed(cur.inputs):
                owner = i.owner
                if owner is not None:
                    s = get(owner)
                    if s is None:
                        push(owner)
                    elif s == 1:
                        raise ValueError(f"graph contains cycles (through {owner})")
            if len(todo) != n_todo:
                continue
        elif st == 2:
            pop()  # already placed (it was on the stack twice)
            continue
        pop()
        state[cur] = 2
        order.append(cur)
    return order


def io_toposort(inputs, outputs, orderings=None, clients=None) -> list:
    """Return the Apply nodes between ``inputs`` and ``outputs`` in a topological order.

    ``orderings`` maps an Apply to Applies that must run before it (what
    DestroyHandler asks for), on top of the data dependencies.

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> w = Apply("g", [z], [generic("w")]).outputs[0]
    >>> io_toposort([x, y], [w])
    [f(x, y), g(z)]
    >>> io_toposort([z], [w])
    [g(z)]
    """
    if not orderings and clients is None:
        inputs = list(inputs)
        for i in inputs:
            if i.owner is not None:  # a graph cut inside: stop at these variables
                return post_order(outputs, set(inputs))
        return _post_order_to_sources(outputs)

    iset = set(inputs)
    orderings = orderings or {}
    if clients is None:
        # Orderings only: sort the Apply nodes alone (half the vertices of the
        # bipartite graph); a node depends on the owners of its inputs.
        def node_deps(node):
            rval = [i.owner for i in node.inputs if i.owner is not None and i not in iset]
            extra = orderings.get(node)
            if extra:
                rval.extend(extra)
            return rval

        starts = [o.owner for o in outputs if o.owner is not None and o not in iset]
        return general_toposort(starts, node_deps)

    # ``clients`` is filled for the whole bipartite graph (variables and nodes).
    def compute_deps(obj):
        if obj in iset:
            return []
        if isinstance(obj, Variable):
            return [obj.owner] if obj.owner is not None else []
        rval = list(obj.inputs)
        rval.extend(orderings.get(obj, ()))
        return rval

    topo = general_toposort(outputs, compute_deps, clients=clients)
    return [o for o in topo if isinstance(o, Apply)]


def list_of_nodes(inputs, outputs) -> list:
    """Return the Apply nodes between ``inputs`` and ``outputs``.

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> list_of_nodes([x, y], [z])
    [f(x, y)]
    """
    iset = set(inputs)
    return list(
        walk(
            [o.owner for o in outputs if o.owner is not None],
            lambda n: [
                i.owner
                for i in n.inputs
                if i.owner is not None and not any(o in iset for o in i.owner.outputs)
            ],
        )
    )


def is_in_ancestors(l_apply: Apply, f_node: Apply) -> bool:
    """Return True if ``f_node`` is ``l_apply`` or one of its ancestors.

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> w = Apply("g", [z], [generic("w")]).outputs[0]
    >>> is_in_ancestors(w.owner, z.owner), is_in_ancestors(z.owner, w.owner)
    (True, False)
    """
    for node in walk([l_apply], lambda n: [i.owner for i in n.inputs if i.owner is not None]):
        if node is f_node:
            return True
    return False


def io_connection_pattern(inputs, outputs) -> list:
    """Return ``pattern[i][o]``: whether output ``o`` depends on input ``i``.

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> io_connection_pattern([x, y], [z, x])
    [[True, True], [True, False]]
    """
    n_in = len(inputs)
    # One bit per input: the dependency set of a variable is a Python int.
    mask = {inp: 1 << i for i, inp in enumerate(inputs)}
    for node in io_toposort(inputs, outputs):
        cp = getattr(node.op, "connection_pattern", None)
        cp = cp(node) if cp is not None else None
        for o_idx, out in enumerate(node.outputs):
            m = 0
            for i_idx, inp in enumerate(node.inputs):
                if cp is None or cp[i_idx][o_idx]:
                    m |= mask.get(inp, 0)
            mask[out] = m
    return [[bool(mask.get(o, 0) >> i & 1) for o in outputs] for i in range(n_in)]


def view_roots(node: Variable) -> list:
    """Return the variables that ``node`` is a view of, following view_maps to the end.

    >>> from theano_dag.graph.op import Op
    >>> from theano_dag.graph.type import generic
    >>> class View(Op):
    ...     view_map = {0: [0]}
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [generic()])
    >>> x = generic("x")
    >>> view_roots(View()(View()(x)))
    [x]
    """
    roots, todo = [], [node]
    while todo:
        v = todo.pop()
        owner = v.owner
        vmap = getattr(owner.op, "view_map", None) if owner is not None else None
        idx = vmap.get(v.index) if vmap else None
        if idx:
            todo.extend(owner.inputs[i] for i in reversed(idx))
        else:
            roots.append(v)
    return roots


# ---------------------------------------------------------------------------
# Printing


def default_leaf_formatter(x):
    return str(x)


def default_node_formatter(node, argstrings):
    return f"{node.op}({', '.join(argstrings)})"


def as_string(
    inputs, outputs, leaf_formatter=default_leaf_formatter, node_formatter=default_node_formatter
) -> list:
    """Return one string per output; a node used twice is labelled ``*1 -> ...`` then ``*1``.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.op import Op
    >>> class Add(Op):
    ...     __props__ = ()
    ...     def make_node(self, *xs):
    ...         return Apply(self, list(xs), [Variable(Generic())])
    >>> x = Variable(Generic(), name="x")
    >>> y = Add()(x, x)
    >>> as_string([x], [Add()(y, y)])
    ['Add(*1 -> Add(x, x), *1)']
    """
    iset = set(inputs)
    n_uses: dict = {}
    for node in io_toposort(inputs, outputs):
        for i in node.inputs:
            if i.owner is not None and i not in iset:
                n_uses[i.owner] = n_uses.get(i.owner, 0) + 1
    for o in outputs:
        if o.owner is not None and o not in iset:
            n_uses[o.owner] = n_uses.get(o.owner, 0) + 1
    labels: dict = {}
    rendered = []
    for out in outputs:
        # Explicit stack instead of recursion: ("enter", var) and ("exit", var) frames.
        results: list = []
        todo = [("enter", out)]
        while todo:
            kind, var = todo.pop()
            node = var.owner
            if kind == "enter":
                if node is None or var in iset:
                    results.append(leaf_formatter(var))
                    continue
                suffix = f"::{var.index}" if len(node.outputs) > 1 else ""
                if n_uses.get(node, 0) > 1:
                    if node in labels:
                        results.append(labels[node] + suffix)
                        continue
                    labels[node] = f"*{len(labels) + 1}"
                todo.append(("exit", var))
                todo.extend(("enter", i) for i in reversed(node.inputs))
            else:
                n = len(node.inputs)
                args = results[len(results) - n :]
                del results[len(results) - n :]
                s = node_formatter(node, args)
                if node in labels:
                    s = f"{labels[node]} -> {s}"
                if len(node.outputs) > 1:
                    s += f"::{var.index}"
                results.append(s)
        rendered.append(results[-1])
    return rendered


def op_as_string(
    i, op, leaf_formatter=default_leaf_formatter, node_formatter=default_node_formatter
) -> str:
    """Return the string of Apply ``op`` with its inputs described relative to ``i``.

    >>> from theano_dag.graph.type import generic
    >>> x, y = generic("x"), generic("y")
    >>> z = Apply("f", [x, y], [generic("z")]).outputs[0]
    >>> w = Apply("g", [z, x], [generic()]).outputs[0]
    >>> op_as_string([x, y], w.owner), op_as_string([z, x], w.owner)
    ('g(f(x, y), x)', 'g(z, x)')
    """
    strs = as_string(i, op.inputs, leaf_formatter, node_formatter)
    return node_formatter(op, strs)


def toposort(prereqs_d):
    """Sort the keys of ``{item: collection of prerequisites}`` so prerequisites come first.

    >>> toposort({"b": ["a"], "c": ["b", "a"], "a": []})
    ['a', 'b', 'c']
    """
    items = set(prereqs_d)
    for v in prereqs_d.values():
        items.update(v)
    order = general_toposort(sorted(items, key=repr), lambda x: list(prereqs_d.get(x, ())))
    return order
