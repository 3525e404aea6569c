"""``FunctionGraph``: a mutable graph with declared inputs and outputs (``theano.graph.fg``).

The FunctionGraph owns the Apply nodes between its inputs and outputs, knows every
variable's clients, and is the object that optimizers rewrite with ``replace``.
Features (``theano_dag.graph.toolbox``) listen to its events and may veto changes.

Everything here is iterative and linear in the size of what changes, so graphs of
hundreds of thousands of nodes (or chains that deep) are fine.
"""

from __future__ import annotations

import pickle
import warnings
from time import perf_counter

from theano_dag.config import config
from theano_dag.graph.algorithms import _clone_in_order
from theano_dag.graph.basic import (
    Apply,
    Constant,
    Variable,
    _copy_tag,
    applys_between,
    as_string,
    clone_get_equiv,
    io_toposort,
    vars_between,
)
from theano_dag.graph.toolbox import (
    AlreadyThere,
    BadOptimization,
    Feature,
    InputReorder,
    ReplaceValidate,
)
from theano_dag.graph.utils import (
    InconsistencyError,
    TestValueError,
    copy_stack_trace,
    get_stack_trace,
)

__all__ = [
    "FunctionGraph",
    "InconsistencyError",
    "MissingInputError",
    "IntegrityError",
    "InputReorder",
]


# Levels between a node and its inputs in the graph a FunctionGraph is built with
# (see FunctionGraph._raise_levels).
_LEVEL_GAP = 64


class MissingInputError(Exception):
    """A variable needed to compute the outputs is not among the declared inputs.

    ``variable`` is the missing Variable.
    """

    def __init__(self, *args, variable=None):
        super().__init__("\n".join(str(a) for a in args))
        self.variable = variable


class IntegrityError(Exception):
    """Raised by ``FunctionGraph.check_integrity`` when the cached structure is wrong."""


class FunctionGraph:
    """The subgraph between ``inputs`` and ``outputs``, with clients and listeners.

    ``clients[var]`` lists the ``(node, i)`` pairs with ``node.inputs[i] is var``;
    ``node`` is the string ``"output"`` when ``var`` is ``outputs[i]``.
    With ``clone=True`` (the default) the graph is copied first, so the user's
    variables are never modified by rewrites.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.op import Op
    >>> class F(Op):
    ...     __props__ = ()
    ...     def make_node(self, *xs):
    ...         return Apply(self, list(xs), [Generic()()])
    >>> x, y = Generic()("x"), Generic()("y")
    >>> fg = FunctionGraph([x, y], [F()(x, F()(y))], clone=False)
    >>> len(fg.apply_nodes), fg.outputs[0].owner.inputs[0] is x
    (2, True)
    >>> fg.replace(x, y)
    >>> fg
    FunctionGraph(F(y, F(y)))
    >>> len(fg.clients[y]), fg.clients[x], x in fg  # x stays a (now unused) input
    (2, [], True)
    """

    def __init__(
        self,
        inputs,
        outputs,
        features=None,
        clone=True,
        update_mapping=None,
        _import_order=None,
        **clone_kwds,
    ):
        inputs = _as_variable_list(inputs, "inputs")
        outputs = _as_variable_list(outputs, "outputs")
        seen: set = set()
        for k, var in enumerate(inputs):
            if var in seen:
                raise ValueError(
                    f"Input {var} (position {k}) is given more than once in the inputs "
                    f"of the FunctionGraph; each input must appear once"
                )
            seen.add(var)
            # Cloning (with its inputs copied) cuts the graph at an owned input: the
            # copy has no owner, as in Theano. Without a copy it cannot be an input.
            if var.owner is not None and not (clone and clone_kwds.get("copy_inputs", True)):
                raise ValueError(
                    f"Input {var} (position {k}) is the output of {var.owner}; the inputs of "
                    f"a FunctionGraph built with clone=False must have no owner (clone the "
                    f"graph or use its inputs)"
                )
        # The nodes in a topological order, when it is known: with clone=False, the
        # caller's (the function cache's, which has it at hand) ``_import_order``, the
        # order the import's own walk would find (``io_toposort(inputs, outputs)``).
        copied = None if clone else _import_order
        # A plain copy (what ``function`` asks for: inputs and constants copied, no
        # features of the caller's) is made and imported node by node in one walk.
        one_walk = (
            clone
            and not features
            and _PLAIN_COPY.issuperset(clone_kwds)
            and all(clone_kwds.values())
        )
        if one_walk:
            memo: dict = {}
            for inp in inputs:  # as _clone_in_order copies them
                cpy = inp.clone()
                cpy.owner = None
                cpy.index = None
                memo.setdefault(inp, cpy)
            order = io_toposort(inputs, outputs)
            orig_inputs, orig_outputs = inputs, outputs
            inputs = [memo[i] for i in inputs]
        elif clone:
            if "memo" in clone_kwds:  # nodes mapped beforehand: no order of the copy
                equiv = clone_get_equiv(inputs, outputs, **clone_kwds)
            else:
                equiv, order = _clone_in_order(inputs, outputs, **clone_kwds)
                copied = [equiv[node] for node in order]
            inputs = [equiv[i] for i in inputs]
            outputs = [equiv[o] for o in outputs]
        if features is None:
            features = []

        self.execute_callbacks_time = 0.0
        self.execute_callbacks_times: dict = {}
        self._features: list = []
        self._callbacks: dict = {}
        self.apply_nodes: set = set()
        self.variables: set = set()
        self.clients: dict = {}
        # var -> {client: position in clients[var]}, for variables with many clients
        # only: removing one of thousands of clients is then O(1), not a list scan.
        self._client_index: dict = {}
        self._input_set: set = set()
        self.inputs: list = []
        # Empty while features attach: the graph is imported after, and the
        # features see every node through on_import.
        self.outputs: list = []
        self.profile = None
        self.update_mapping = update_mapping
        # A topological "level" per node: every input's owner has a smaller one.
        # It lets the cycle check stop early (see _first_dependency).
        self._level: dict = {}
        # Bumped on every structural change; keys the toposort cache.
        self._version = 0
        self._toposort_cache = None

        for f in features:
            self.attach_feature(f)
        self.attach_feature(ReplaceValidate())

        for var in inputs:
            self.add_input(var, check=False)
        if one_walk:
            outputs = self._copy_and_import(order, memo, orig_outputs)
            if outputs is None:
                # What the walk leaves to the copy and import below (an error to
                # report: a missing input, an op's bad maps; an input whose copy has
                # another type object, which clone_with_new_inputs converts): the graph
                # is left as the inputs made it, and copied and imported as below.
                equiv, order = _clone_in_order(
                    orig_inputs, orig_outputs, memo={i: memo[i] for i in orig_inputs}
                )
                copied = [equiv[node] for node in order]
                outputs = [equiv[o] for o in orig_outputs]
            else:
                self.outputs = outputs
                for k, out in enumerate(outputs):
                    self._append_client(out, ("output", k))
                self._version += 1  # (what is computed changed: value_computed's memo)
                return
        self.outputs = list(outputs)
        try:
            # All outputs in one walk: the same nodes in the same order as one output
            # after the other, without a walk's setup per output (graphs with thousands).
            # The copy's order is the order the import's own walk would find (the same
            # post-order walk over the same graph): it is not walked again.
            self._import_graph(
                list(self.outputs), reason="init", level_step=_LEVEL_GAP, new_nodes=copied
            )
        except (MissingInputError, TypeError):
            # Nothing was imported: again one output after the other, whose error
            # names the output that needs the missing input.
            for k, out in enumerate(self.outputs):
                self._import_graph(
                    [out], reason="init", needed_by=("output", k, out), level_step=_LEVEL_GAP
                )
            raise
        for k, out in enumerate(self.outputs):
            self._append_client(out, ("output", k))
        self._version += 1  # (what is computed changed: value_computed's memo)

    def _copy_and_import(self, order, memo, outputs):
        """Copy the nodes of ``order`` (a topological order of the graph of
        ``outputs``, whose inputs ``memo`` maps to their copies, already inputs of this
        graph) and import each copy as it is made: what ``_clone_in_order`` then
        ``_import_graph`` do, in one walk. Returns the outputs' copies; or None, with
        the graph left as it was, at the first thing it leaves to them: an error that
        the import reports (an ownerless variable that is neither an input nor a
        constant, an op whose maps ``setup_node`` refuses), an input of a plain node
        whose copy has another type object.

        The only feature is the ReplaceValidate made with the graph, which has seen no
        node removed: its ``on_import`` would do nothing. A plain Apply without notes
        and its outputs of a class that copies plainly (``Variable._plain_copy``) are
        made as their constructors would make them, without the constructors' checks,
        which the originals passed; other nodes by ``clone_with_new_inputs``.
        """
        variables = self.variables
        clients = self.clients
        level = self._level
        apply_nodes = self.apply_nodes
        append_client = self._append_client
        version = self._version
        get = memo.get
        new = object.__new__
        count = Variable.__count__
        plain: dict = {}  # Variable class -> whether it is copied plainly
        checked_ops: set = set()
        noted = []  # copies made by clone_with_new_inputs: noted once all is well
        copied = []
        reason_s = "init"
        n_max = _INDEX_MIN_CLIENTS
        for node in order:
            op = node.op
            if id(op) not in checked_ops:
                try:
                    self.setup_node(node)
                except TypeError:
                    return self._undo_copy(version)
                checked_ops.add(id(op))
            if not (
                type(node) is Apply
                and node._tag is None
                and node._imported_by is None
                and node._removed_by is None
            ):
                if not self._copy_and_import_node(node, memo, noted, copied):
                    return self._undo_copy(version)
                continue
            # A plain node: copied (as Apply.clone_with_new_inputs copies it, without
            # its checks) and imported (as _import_graph imports a node: its outputs,
            # then the inputs new to the graph, the constants, then their clients and
            # its level) in one pass over its inputs and one over its outputs.
            new_node = new(Apply)
            new_inputs = []
            orphans = None  # the constants first met here, and their positions
            lvl = 0
            i = 0
            for inp in node.inputs:
                cpy = get(inp)
                if cpy is None:  # an orphan: a constant is copied
                    if not isinstance(inp, Constant):
                        return self._undo_copy(version)
                    cpy = memo[inp] = inp.clone()
                    if orphans is None:
                        orphans = [i]
                    else:
                        orphans.append(i)
                else:
                    if cpy.type is not inp.type:  # clone_with_new_inputs would convert it
                        return self._undo_copy(version)
                    if orphans is None:  # (after a new constant: once it is imported)
                        lst = clients[cpy]
                        if len(lst) < n_max:
                            lst.append((new_node, i))
                        else:
                            append_client(cpy, (new_node, i))
                    o = cpy.owner
                    if o is not None:
                        lo = level.get(o, 0)
                        if lo > lvl:
                            lvl = lo
                new_inputs.append(cpy)
                i += 1
            new_node.op = op
            new_node._tag = None
            new_node._imported_by = [reason_s]
            new_node._removed_by = None
            new_node.inputs = new_inputs
            new_outputs = []
            j = 0
            for out in node.outputs:
                cls = out.__class__
                p = plain.get(cls)
                if p is None:
                    p = plain[cls] = cls._plain_copy()
                if p:
                    cp = new(cls)
                    tag = out._tag
                    if tag is None:
                        cp._tag = None
                        cp._trace = getattr(out, "_trace", None)  # (see Variable.tag)
                    else:
                        cp._tag = _copy_tag(tag)
                        cp._trace = None
                    cp.type = out.type
                    cp.owner = new_node
                    cp.index = j
                    cp.name = out.name
                    cp.creation_index = next(count)
                else:
                    cp = out.clone()
                    cp.owner = new_node
                    cp.index = j
                new_outputs.append(cp)
                memo.setdefault(out, cp)
                variables.add(cp)
                clients[cp] = []
                j += 1
            new_node.outputs = new_outputs
            apply_nodes.add(new_node)
            copied.append(new_node)
            if orphans is not None:
                for k in orphans:
                    cpy = new_inputs[k]
                    variables.add(cpy)
                    clients[cpy] = []
                for k in range(orphans[0], i):
                    cpy = new_inputs[k]
                    lst = clients[cpy]
                    if len(lst) < n_max:
                        lst.append((new_node, k))
                    else:
                        append_client(cpy, (new_node, k))
            level[new_node] = lvl + _LEVEL_GAP
        copies = []
        for out in outputs:
            cpy = get(out)
            if cpy is None:  # an output that no node computes (as _clone_in_order)
                cpy = memo[out] = out.clone()
                if _is_missing(cpy, variables):
                    return self._undo_copy(version)
            copies.append(cpy)
        for node in noted:
            node._note("imported_by", reason_s)
        if order:
            self._version += 1
        for r in copies:
            if r not in variables:
                variables.add(r)
                clients[r] = []
                self._version += 1
        # The copies were made in the order toposort finds (io_toposort's walk over the
        # same graph): kept for its first call.
        self._toposort_cache = (self._version, copied)
        return copies

    def _copy_and_import_node(self, node, memo, noted, copied) -> bool:
        """``_copy_and_import``'s step for a node that is not a plain Apply without
        notes: copied by its ``clone_with_new_inputs`` and imported as
        ``_import_graph`` imports it (its notes written once the whole walk is done).
        False, with nothing imported, at an input that is missing."""
        variables = self.variables
        clients = self.clients
        new_inputs = []
        for inp in node.inputs:
            cpy = memo.get(inp)
            if cpy is None:
                if not isinstance(inp, Constant):
                    return False
                cpy = memo[inp] = inp.clone()
            new_inputs.append(cpy)
        new_node = node.clone_with_new_inputs(new_inputs)
        noted.append(new_node)
        copied.append(new_node)
        for out, cp in zip(node.outputs, new_node.outputs):
            memo.setdefault(out, cp)
        self.apply_nodes.add(new_node)
        for cp in new_node.outputs:
            variables.add(cp)
            clients[cp] = []
        level = self._level
        lvl = 0
        for i, inp in enumerate(new_node.inputs):
            if inp not in variables:  # a constant (or an input the clone converted)
                variables.add(inp)
                clients[inp] = []
            self._append_client(inp, (new_node, i))
            o = inp.owner
            if o is not None:
                lo = level.get(o, 0)
                if lo > lvl:
                    lvl = lo
        level[new_node] = lvl + _LEVEL_GAP
        return True

    def _undo_copy(self, version):
        """Leave the graph as its inputs made it (``_copy_and_import``
        stopped): no node, no variable but the inputs; returns None."""
        self.apply_nodes.clear()
        self._level.clear()
        self._client_index.clear()
        self.variables = set(self.inputs)
        self.clients = {v: [] for v in self.inputs}
        self._version = version
        return None

    # ------------------------------------------------------------------
    # Inputs, clients, import and prune

    def add_input(self, var, check=True):
        """Declare ``var`` (an ownerless Variable) as a new input of the graph.

        With ``check``, a variable that already is an input is left alone.
        """
        if not isinstance(var, Variable):
            raise TypeError(f"add_input expects a Variable, got {type(var).__name__}: {var!r}")
        if check and var in self.inputs:
            return
        if var.owner is not None:
            raise ValueError(f"Cannot add {var} as an input: it is the output of {var.owner}")
        self.inputs.append(var)
        self._input_set.add(var)
        self.setup_var(var)
        self.variables.add(var)
        self._version += 1

    def setup_var(self, var):
        """Give ``var`` an (empty) clients list in this graph."""
        self.clients.setdefault(var, [])

    def setup_node(self, node):
        """Check that ``node``'s op has well-formed ``view_map`` and ``destroy_map``."""
        op = node.op
        for attr in ("view_map", "destroy_map"):
            m = getattr(op, attr, None)
            if m and not all(isinstance(v, (list, tuple)) for v in m.values()):
                raise TypeError(
                    f"Op {op} has a bad {attr} {m!r}: the values must be lists or tuples "
                    f"of input indices"
                )

    def get_clients(self, var):
        """Return the ``(node, i)`` pairs such that ``node.inputs[i] is var``."""
        return self.clients[var]

    def add_client(self, var, new_client):
        """Record that ``new_client = (node, i)`` uses ``var``."""
        self._append_client(var, new_client)

    def _append_client(self, var, client):
        lst = self.clients[var]
        idx = self._client_index.get(var)
        if idx is not None:
            idx[client] = len(lst)
        lst.append(client)
        if idx is None and len(lst) > _INDEX_MIN_CLIENTS:
            self._client_index[var] = {c: k for k, c in enumerate(lst)}

    def _drop_client(self, var, var_clients, client) -> bool:
        """Remove ``client`` from ``var_clients`` (the list of ``var``); False if absent.

        Short lists keep their order; a long one (indexed) moves its last entry into the
        freed place, so that removal is O(1).
        """
        idx = self._client_index.get(var)
        if idx is None:
            try:
                var_clients.remove(client)
            except ValueError:
                return False
            return True
        pos = idx.pop(client, None)
        if pos is None:
            return False
        last = var_clients.pop()
        if pos < len(var_clients):
            var_clients[pos] = last
            idx[last] = pos
        if not var_clients:
            del self._client_index[var]
        return True

    def remove_client(self, var, client_to_remove, reason=None):
        """Remove one client of ``var``; prune what is no longer used, iteratively.

        A variable without clients leaves the graph (declared inputs stay), and an
        Apply whose outputs all lost their clients is pruned (``on_prune``), which
        in turn removes it from its inputs' clients.
        """
        clients = self.clients
        inputs = self._inputs_set()
        reason_s = None  # str(reason), made once: a replacement may prune many nodes
        stack = [(var, client_to_remove)]
        while stack:
            var, client = stack.pop()
            var_clients = clients.get(var)
            if var_clients is None:
                continue
            if not self._drop_client(var, var_clients, client):
                continue
            if var_clients:
                continue
            owner = var.owner
            if owner is None:
                if var not in inputs:
                    # An unused constant (or orphan) has no reason to stay.
                    self.variables.discard(var)
                    del clients[var]
                    self._version += 1
                continue
            if owner not in self.apply_nodes:
                continue
            outputs = owner.outputs
            if len(outputs) != 1 and any(clients.get(o) for o in outputs):
                continue  # (a single output is ``var`` itself, now without clients)
            if reason_s is None:
                reason_s = str(reason)
            owner._note("removed_by", reason_s)
            self.apply_nodes.remove(owner)
            self._level.pop(owner, None)
            for o in owner.outputs:
                self.variables.discard(o)
                clients.pop(o, None)
                self._client_index.pop(o, None)
            self._version += 1
            self.execute_callbacks("on_prune", owner, reason)
            i = 0
            for inp in owner.inputs:
                stack.append((inp, (owner, i)))
                i += 1

    def import_var(self, var, reason=None, import_missing=False):
        """Bring ``var`` (and the nodes it needs that are new) into the graph."""
        self._import_graph([var], reason=reason, import_missing=import_missing)

    def import_node(self, apply_node, check=True, reason=None, import_missing=False):
        """Import ``apply_node`` and every new node it depends on, in topological order.

        With ``check``, an ownerless non-constant variable that is not an input
        raises MissingInputError (or becomes an input with ``import_missing``).
        """
        if not isinstance(apply_node, Apply):
            raise TypeError(f"import_node expects an Apply, got {type(apply_node).__name__}")
        self._import_graph(
            list(apply_node.outputs),
            reason=reason,
            check=check,
            import_missing=import_missing,
            only_owners=True,
        )

    def _new_nodes(self, roots):
        """Return the Apply nodes ``roots`` depend on that are not in the graph, inputs first."""
        variables = self.variables
        apply_nodes = self.apply_nodes
        stack = [
            r.owner for r in reversed(roots) if r.owner is not None and r.owner not in apply_nodes
        ]
        state: dict = {}
        order = []
        while stack:
            node = stack[-1]
            st = state.get(node)
            if st is None:
                state[node] = 1
                for inp in reversed(node.inputs):
                    o = inp.owner
                    if o is not None and inp not in variables and o not in state:
                        stack.append(o)
            else:
                stack.pop()
                if st == 1:
                    state[node] = 2
                    order.append(node)
        return order

    def _import_graph(
        self,
        roots,
        reason=None,
        check=True,
        import_missing=False,
        needed_by=None,
        only_owners=False,
        level_step=1,
        new_nodes=None,
    ):
        variables = self.variables
        if not only_owners and len(roots) == 1 and roots[0] in variables:
            return  # already in the graph: what a replacement by a known variable meets
        if new_nodes is None:
            new_nodes = self._new_nodes(roots)
        if check:
            # Find every missing input before touching the graph, so a failure
            # leaves it as it was.
            missing = []
            if not only_owners:
                missing.extend((r, None, None) for r in roots if _is_missing(r, variables))
            for node in new_nodes:
                for j, inp in enumerate(node.inputs):
                    if inp.owner is None and _is_missing(inp, variables):
                        missing.append((inp, node, j))
            if missing:
                if not import_missing:
                    var, node, j = missing[0]
                    if hasattr(var.type, "why_null"):
                        # A NullType gradient reached the graph: say why, as Theano does.
                        raise TypeError(f"Computation graph contains a NaN. {var.type.why_null}")
                    target = _describe_target(needed_by, roots[0])
                    where = f", input {j} of {node}," if node is not None else ""
                    raise MissingInputError(
                        f"Undeclared input: {var} (of type {var.type}){where} is needed to "
                        f"compute {target} but is not among the inputs of the FunctionGraph; "
                        f"declare it as an input",
                        variable=var,
                    )
                for var, _, _ in missing:
                    self.add_input(var)

        clients = self.clients
        append_client = self._append_client
        level = self._level
        apply_nodes = self.apply_nodes
        import_cbs = self._get_callbacks("on_import")
        reason_s = str(reason) if new_nodes else None
        checked_ops: set = set()
        t0 = perf_counter()
        for node in new_nodes:
            op_id = id(node.op)
            if op_id not in checked_ops:
                self.setup_node(node)
                checked_ops.add(op_id)
            apply_nodes.add(node)
            node._note("imported_by", reason_s)
            for o in node.outputs:
                variables.add(o)
                clients.setdefault(o, [])
            lvl = 0
            for i, inp in enumerate(node.inputs):
                if inp not in variables:
                    variables.add(inp)
                    clients[inp] = []
                append_client(inp, (node, i))
                o = inp.owner
                if o is not None:
                    lo = level.get(o, 0)
                    if lo > lvl:
                        lvl = lo
            level[node] = lvl + level_step
            # Called directly rather than through execute_callbacks: this loop is
            # the hot path of building a big graph. Time is added up once below.
            for _, fn in import_cbs:
                fn(self, node, reason)
        if new_nodes:
            self._version += 1
            if import_cbs:
                self.execute_callbacks_time += perf_counter() - t0
        if not only_owners:
            for r in roots:
                if r not in variables:
                    variables.add(r)
                    clients.setdefault(r, [])
                    self._version += 1

    # ------------------------------------------------------------------
    # Changing the graph

    def change_input(self, node, i, new_var, reason=None, import_missing=False):
        """Make ``node.inputs[i]`` (or ``outputs[i]`` when ``node == "output"``) be ``new_var``.

        The types must be equal. A change that would make the graph cyclic is
        refused with InconsistencyError and the graph is left unchanged. Features
        get ``on_change_input(fgraph, node, i, old_var, new_var, reason)``.
        """
        old = self.outputs[i] if _is_output(node) else node.inputs[i]
        if old is new_var:
            return
        if old.type != new_var.type and not (
            _is_super(old.type, new_var.type) or _is_super(new_var.type, old.type)
        ):
            # A type more specific than the old one (static shape known) is accepted, as
            # in PyTensor, and so is the reverse, so that such a change can be undone.
            _check_same_type(old, new_var, reason)
        if not _is_output(node):
            culprit = self._first_dependency(new_var, {node})
            if culprit is not None:
                raise InconsistencyError(
                    f"Changing input {i} of {node} to {new_var} would create a cycle: "
                    f"{new_var} depends on {node}"
                )
        self._change_input(node, i, old, new_var, reason, import_missing)

    def _change_input(self, node, i, old, new_var, reason, import_missing):
        if new_var not in self.variables:  # (the next clients of a replacement: it is in)
            self._import_graph(
                [new_var],
                reason=reason,
                import_missing=import_missing,
                needed_by=("the replacement", None, new_var),
            )
        if type(node) is str:  # _is_output
            self.outputs[i] = new_var
        else:
            node.inputs[i] = new_var
            self._raise_levels(node, new_var)
        self._append_client(new_var, (node, i))
        self._version += 1
        self.remove_client(old, (node, i), reason=reason)
        self.execute_callbacks("on_change_input", node, i, old, new_var, reason=reason)

    def reorder_inputs(self, node, new_inputs, reason=None):
        """Give ``node`` a permutation of its inputs, in place.

        For an op whose result does not depend on the order of its inputs (a
        commutative scalar op): the node and its outputs stay, so no client of theirs
        changes, which costs far less than replacing the node by a new one. Every input
        that moves must keep its type. Features get ``on_change_input`` for each moved
        position, with an ``InputReorder`` as the reason (it holds the old order, so
        that the change can be undone as one).

        >>> from theano_dag.graph.type import Generic
        >>> from theano_dag.graph.op import Op
        >>> class Add(Op):
        ...     __props__ = ()
        ...     def make_node(self, *xs):
        ...         return Apply(self, list(xs), [Generic()()])
        >>> x, y = Generic()("x"), Generic()("y")
        >>> fg = FunctionGraph([x, y], [Add()(y, x)], clone=False)
        >>> node = fg.outputs[0].owner
        >>> fg.reorder_inputs(node, [x, y])
        >>> fg, fg.outputs[0].owner is node, fg.clients[x]
        (FunctionGraph(Add(x, y)), True, [(Add(x, y), 0)])
        """
        if node not in self.apply_nodes:
            raise ValueError(f"reorder_inputs: {node} is not in this FunctionGraph")
        old = list(node.inputs)
        new_inputs = list(new_inputs)
        if len(new_inputs) != len(old) or sorted(map(id, new_inputs)) != sorted(map(id, old)):
            raise ValueError(
                f"reorder_inputs: {new_inputs} is not a permutation of the inputs of {node}"
            )
        moved = [k for k, (a, b) in enumerate(zip(old, new_inputs)) if a is not b]
        for k in moved:
            if old[k].type != new_inputs[k].type:
                raise TypeError(
                    f"reorder_inputs: input {k} of {node} has type {old[k].type}; moving "
                    f"{new_inputs[k]} of type {new_inputs[k].type} there would change it"
                )
        if not moved:
            return
        clients = self.clients
        for k in moved:
            self._drop_client(old[k], clients[old[k]], (node, k))
        node.inputs[:] = new_inputs
        for k in moved:
            self._append_client(new_inputs[k], (node, k))
        self._version += 1
        why = InputReorder(reason, old)
        for k in moved:
            self.execute_callbacks("on_change_input", node, k, old[k], new_inputs[k], reason=why)

    def replace(self, var, new_var, reason=None, verbose=None, import_missing=False):
        """Make every client of ``var`` use ``new_var`` instead.

        ``var`` must be in the graph (ValueError otherwise) and ``new_var`` must
        have the same type, or one ``var.type.convert_variable`` can convert to
        (TypeError otherwise). A replacement that would make the graph cyclic is
        refused with InconsistencyError before anything changes.
        """
        if verbose:
            print(reason, var, new_var)
        if not isinstance(new_var, Variable):
            raise TypeError(
                f"Cannot replace {var} by {new_var!r}: the replacement must be a Variable, "
                f"got {type(new_var).__name__}"
            )
        if var.type != new_var.type:
            converted = var.type.convert_variable(new_var)
            if converted is None or not (
                converted.type == var.type or _is_super(var.type, converted.type)
            ):
                _check_same_type(var, new_var, reason)
            new_var = converted
        if config.compute_test_value != "off":
            _check_test_value_shapes(var, new_var)
        if var not in self.variables:
            raise ValueError(
                f"Cannot replace {var}: it does not belong to this FunctionGraph "
                f"(reason: {reason})"
            )
        if var is new_var:
            return
        var_clients = list(self.clients[var])
        if not var_clients:
            return
        targets = {node for node, _ in var_clients if not _is_output(node)}
        culprit = self._first_dependency(new_var, targets)
        if culprit is not None:
            raise InconsistencyError(
                f"Replacing {var} by {new_var} would create a cycle: {new_var} depends on "
                f"{culprit}, which uses {var} (reason: {reason})"
            )
        if new_var.owner is not None and not get_stack_trace(new_var):
            # A node a rewrite made answers for the user's line of the one it replaces.
            copy_stack_trace(var, new_var)
        for node, i in var_clients:
            self._change_input(node, i, var, new_var, reason, import_missing)

    def replace_all(self, pairs, reason=None, import_missing=False):
        """``replace`` each ``(var, new_var)`` pair in turn.

        Every ``var`` must be in the graph when the call starts; one that an
        earlier pair removed from the graph (e.g. an unused output of a replaced
        multi-output node) is skipped.
        """
        pairs = list(pairs)
        for var, _ in pairs:
            if var not in self.variables:
                raise ValueError(
                    f"Cannot replace {var}: it does not belong to this FunctionGraph "
                    f"(reason: {reason})"
                )
        for var, new_var in pairs:
            if var in self.variables:
                self.replace(var, new_var, reason=reason, import_missing=import_missing)

    def _inputs_set(self) -> set:
        """The inputs as a set (rebuilt only if ``inputs`` was changed by hand)."""
        if len(self._input_set) != len(self.inputs):
            self._input_set = set(self.inputs)
        return self._input_set

    def _first_dependency(self, new_var, targets):
        """Return a node of ``targets`` (Applies in the graph) that ``new_var`` depends on."""
        if not targets:
            return None
        level = self._level
        apply_nodes = self.apply_nodes
        # A node at a level <= every target's cannot be downstream of any target.
        floor = min(level[t] for t in targets)
        seen: set = set()
        stack = [new_var]
        while stack:
            o = stack.pop().owner
            if o is None or o in seen:
                continue
            seen.add(o)
            if o in targets:
                return o
            if o in apply_nodes and level[o] <= floor:
                continue
            stack.extend(o.inputs)
        return None

    # The graph a FunctionGraph starts with gets levels _LEVEL_GAP apart along each
    # edge, the nodes rewrites add 1 above their inputs: a replacement deeper than
    # what it replaces then fits below the nodes that read it, where levels one apart
    # made every replacement raise the levels of all that lies downstream of it
    # (quadratic on deep graphs: 10^5 nodes spent a fifth of function() in here).
    def _raise_levels(self, node, new_var):
        """Restore ``level[input owner] < level[node]`` after ``new_var`` became an input."""
        level = self._level
        owner = new_var.owner
        need = level.get(owner, 0) + 1 if owner is not None else 1
        if level[node] >= need:
            return
        clients = self.clients
        work = [(node, need)]
        while work:
            n, lvl = work.pop()
            if level[n] >= lvl:
                continue
            level[n] = lvl
            for o in n.outputs:
                for c, _ in clients.get(o, ()):
                    if not _is_output(c) and level[c] <= lvl:
                        work.append((c, lvl + 1))

    # ------------------------------------------------------------------
    # Ordering and checking

    def toposort(self):
        """Return the Apply nodes in an order where each node comes after its inputs.

        Feature orderings are honoured too. Without orderings the order is cached
        until the graph changes.

        >>> from theano_dag.graph.type import Generic
        >>> from theano_dag.graph.op import Op
        >>> class F(Op):
        ...     __props__ = ("name",)
        ...     def __init__(self, name):
        ...         self.name = name
        ...     def make_node(self, *xs):
        ...         return Apply(self, list(xs), [Generic()()])
        >>> x = Generic()("x")
        >>> fg = FunctionGraph([x], [F("b")(F("a")(x))], clone=False)
        >>> [n.op.name for n in fg.toposort()]
        ['a', 'b']
        """
        if len(self.apply_nodes) < 2:
            return list(self.apply_nodes)
        ords = self.orderings()
        if ords:
            return io_toposort(self.inputs, self.outputs, ords)
        cache = self._toposort_cache
        if cache is not None and cache[0] == self._version:
            return list(cache[1])
        order = io_toposort(self.inputs, self.outputs)
        self._toposort_cache = (self._version, order)
        return list(order)

    def check_integrity(self):
        """Recompute the structure from scratch and raise IntegrityError on any mismatch.

        Checks ``apply_nodes``, ``variables``, the exact ``clients`` of every
        variable, that no undeclared input is used, and the graph is acyclic.
        """
        check_integrity(self)

    # ------------------------------------------------------------------
    # Copying, pickling, misc

    def clone(self, check_integrity=True):
        """Return a copy of this graph (with copies of its features)."""
        return self.clone_get_equiv(check_integrity)[0]

    def clone_get_equiv(self, check_integrity=True, attach_feature=True, **kwargs):
        """Return ``(new_fgraph, equiv)`` where ``equiv`` maps old variables and nodes to new.

        ``kwargs`` (``copy_inputs``, ``copy_orphans``) go to ``basic.clone_get_equiv``.
        Features are copied with ``feature.clone()``.

        >>> from theano_dag.graph.type import Generic
        >>> from theano_dag.graph.op import Op
        >>> class F(Op):
        ...     def make_node(self, *xs):
        ...         return Apply(self, list(xs), [Generic()()])
        >>> x = Generic()("x")
        >>> fg = FunctionGraph([x], [F()(x)], clone=False)
        >>> fg2, equiv = fg.clone_get_equiv()
        >>> equiv[x] is fg2.inputs[0], equiv[x] is x
        (True, False)
        >>> fg2, equiv = fg.clone_get_equiv(copy_inputs=False)
        >>> fg2.inputs[0] is x
        True
        """
        if check_integrity:
            self.check_integrity()
        equiv = clone_get_equiv(self.inputs, self.outputs, **kwargs)
        new = FunctionGraph(
            [equiv[i] for i in self.inputs],
            [equiv[o] for o in self.outputs],
            clone=False,
            update_mapping=self.update_mapping,
        )
        if check_integrity:
            new.check_integrity()
        if attach_feature:
            for feature in self._features:
                clone = getattr(feature, "clone", None)
                new.attach_feature(clone() if clone is not None else feature)
        return new, equiv

    def disown(self):
        """Detach every feature and forget the graph; this object is unusable afterwards."""
        for f in list(self._features):
            self.remove_feature(f)
        self.clients = {}
        self._client_index = {}
        self._input_set = set()
        self.apply_nodes = set()
        self.variables = set()
        self._level = {}
        self.inputs = None
        self.outputs = None
        self.profile = None
        self.update_mapping = None

    def __getstate__(self):
        return pickle_state(self)

    def __setstate__(self, state):
        restore_state(self, state)

    def __contains__(self, item):
        if isinstance(item, Variable):
            return item in self.variables
        if isinstance(item, Apply):
            return item in self.apply_nodes
        raise TypeError(f"A FunctionGraph contains Variables and Apply nodes, not {item!r}")

    def __repr__(self):
        return f"FunctionGraph({', '.join(as_string(self.inputs, self.outputs))})"

    __str__ = __repr__

    # Features: attaching them, calling them back on each change, their orderings

    def attach_feature(self, feature):
        """Add ``feature`` and call its ``on_attach(fgraph)``.

        A feature that is already attached, or whose ``on_attach`` raises
        ``AlreadyThere``, is silently not added.
        """
        if any(f is feature for f in self._features):
            return
        attach = getattr(feature, "on_attach", None)
        if attach is not None:
            try:
                attach(self)
            except AlreadyThere:
                return
        self.execute_callbacks_times.setdefault(feature, 0.0)
        self._features.append(feature)
        # The toposort cache stays valid: it is only used when no feature adds orderings,
        # and optimizers attach and remove features all the time.
        self._callbacks = {}

    def remove_feature(self, feature):
        """Remove ``feature`` and call its ``on_detach(fgraph)``; unknown features are ignored."""
        for k, f in enumerate(self._features):
            if f is feature:
                del self._features[k]
                break
        else:
            return
        self._callbacks = {}
        detach = getattr(feature, "on_detach", None)
        if detach is not None:
            detach(self)

    def _get_callbacks(self, name):
        cbs = self._callbacks.get(name)
        if cbs is None:
            # Methods a feature inherits unchanged from Feature do nothing: skip them.
            noop = getattr(Feature, name, None)
            cbs = []
            for f in self._features:
                fn = getattr(f, name, None)
                if fn is None:
                    continue
                if noop is not None and getattr(type(f), name, None) is noop:
                    continue
                cbs.append((f, fn))
            # The features that record changes to undo them hear of a change first: a
            # feature that raises on a change (DebugMode's checker) stops the callbacks
            # after it, and a change they did not record would be missing from the undo.
            cbs.sort(key=lambda fc: not getattr(fc[0], "records_changes", False))
            self._callbacks[name] = cbs
        return cbs

    def execute_callbacks(self, name, *args, **kwargs):
        """Call ``feature.<name>(fgraph, *args, **kwargs)`` on every feature that has it."""
        cbs = self._callbacks.get(name)
        if cbs is None:
            cbs = self._get_callbacks(name)
        if not cbs:
            return
        t0 = perf_counter()
        if self.profile is None:
            # Every change of the graph comes here: without a profile to fill, only the
            # total is timed (as for on_import, see _import_graph).
            for _, fn in cbs:
                fn(self, *args, **kwargs)
        else:
            times = self.execute_callbacks_times
            for feature, fn in cbs:
                tf0 = perf_counter()
                fn(self, *args, **kwargs)
                times[feature] = times.get(feature, 0.0) + perf_counter() - tf0
        self.execute_callbacks_time += perf_counter() - t0

    def collect_callbacks(self, name, *args):
        """Return ``{feature: feature.<name>(*args)}`` for every feature that has ``name``."""
        d = {}
        for feature in self._features:
            fn = getattr(feature, name, None)
            if fn is not None:
                d[feature] = fn(*args)
        return d

    def orderings(self):
        """Return ``{node: [nodes that must run before it]}`` gathered from the features.

        Features give extra constraints through ``orderings(fgraph)`` (DestroyHandler
        uses this to run every reader of a value before the node that destroys it).
        """
        all_ords = []
        for feature, fn in self._get_callbacks("orderings"):
            ords = fn(self)
            if not isinstance(ords, dict):
                raise TypeError(
                    f"{feature}.orderings must return a dict {{node: [prerequisites]}}, "
                    f"got {type(ords).__name__}"
                )
            for node, prereqs in ords.items():
                if isinstance(prereqs, (set, frozenset)):
                    raise TypeError(
                        f"{feature}.orderings gave a {type(prereqs).__name__} of prerequisites "
                        f"for {node}; use an ordered collection so toposort is deterministic"
                    )
            if ords:
                all_ords.append(ords)
        if len(all_ords) == 1:
            return {k: list(v) for k, v in all_ords[0].items()}
        combined: dict = {}
        for ords in all_ords:
            for node, prereqs in ords.items():
                combined.setdefault(node, []).extend(prereqs)
        return combined


# ----------------------------------------------------------------------
# Helpers


# Lists of clients longer than this get a position index (O(1) removal).
_INDEX_MIN_CLIENTS = 32

# The copy arguments of a FunctionGraph whose copy _copy_and_import makes (both True).
_PLAIN_COPY = frozenset(("copy_inputs", "copy_orphans"))


def _is_output(node):
    return type(node) is str


def _describe_target(needed_by, root):
    """What a missing input was needed for, in words. ``needed_by`` is ``(what, k, var)``:
    formatting variables costs, so it is only done when an error is raised."""
    if needed_by is None:
        return f"{root}"
    what, k, var = needed_by
    return f"{what} {k} ({var})" if k is not None else f"{what} {var}"


def _is_missing(var, variables):
    return var.owner is None and var not in variables and not isinstance(var, Constant)


def _as_variable_list(xs, what):
    if isinstance(xs, Variable) or not isinstance(xs, (list, tuple)):
        raise TypeError(f"The {what} of a FunctionGraph must be a list of Variables, got {xs!r}")
    for k, x in enumerate(xs):
        if not isinstance(x, Variable):
            raise TypeError(
                f"{what[:-1].capitalize()} {k} of the FunctionGraph must be a Variable, "
                f"got {type(x).__name__}: {x!r}"
            )
    return list(xs)


def _is_super(t, other) -> bool:
    """Whether every value of type ``other`` is a value of type ``t`` (False if unknown)."""
    is_super = getattr(t, "is_super", None)
    return bool(is_super(other)) if is_super is not None else False


class ReplacementTypeError(BadOptimization, TypeError):
    """A replacement whose type is not (and cannot be converted to) the replaced one's:
    a TypeError, and Theano's BadOptimization (what its ``replace`` raises)."""

    def __init__(self, old, new, reason):
        super().__init__(old, new, reason=reason)
        self.args = (
            f"The type of the replacement must be the same as the type of the original "
            f"Variable: cannot replace {old} of type {old.type} by {new} of type {new.type}"
            f" (reason: {reason})",
        )

    def __str__(self):
        return self.args[0]


def _check_same_type(old, new, reason):
    if old.type != new.type:
        raise ReplacementTypeError(old, new, reason)


def _check_test_value_shapes(var, new_var):
    # With test values on, a replacement must keep the test value's shape (Theano's check).
    try:
        old_value, new_value = var.get_test_value(), new_var.get_test_value()
    except TestValueError:
        return
    old_shape, new_shape = getattr(old_value, "shape", None), getattr(new_value, "shape", None)
    if old_shape != new_shape:
        raise AssertionError(
            "The replacement variable has a test value with a shape different from the "
            f"original variable's test value. Original: {old_shape}, new: {new_shape}"
        )


# Integrity checking and pickling: what FunctionGraph does rarely

# Attributes the FunctionGraph itself owns (the others were installed by features).
_CORE_ATTRS = frozenset(
    "execute_callbacks_time _features apply_nodes variables clients inputs outputs "
    "profile update_mapping _level _version _client_index _input_set".split()
)


def check_integrity(fgraph):
    """Recompute ``fgraph``'s structure from scratch; raise IntegrityError on a mismatch
    (see ``FunctionGraph.check_integrity``)."""
    nodes = set(applys_between(fgraph.inputs, fgraph.outputs))
    if fgraph.apply_nodes != nodes:
        raise IntegrityError(
            f"The nodes are inappropriately cached. missing: "
            f"{_few(nodes - fgraph.apply_nodes)}, in excess: {_few(fgraph.apply_nodes - nodes)}"
        )
    # Theano's checks and messages first (its tests match them), then our own.
    for node in nodes:
        for i, inp in enumerate(node.inputs):
            have = fgraph.clients.get(inp, [])
            if not any(c is node and j == i for c, j in have):
                raise IntegrityError(f"Inconsistent clients list {(node, i)} in {have}")
    variables = set(vars_between(fgraph.inputs, fgraph.outputs))
    variables.update(fgraph.inputs)
    if fgraph.variables != variables:
        raise IntegrityError(
            f"The variables are inappropriately cached. missing: "
            f"{_few(variables - fgraph.variables)}, in excess: "
            f"{_few(fgraph.variables - variables)}"
        )
    inputs = set(fgraph.inputs)
    for var in variables:
        if var.owner is None and var not in inputs and not isinstance(var, Constant):
            raise IntegrityError(f"Undeclared input: {var}")
        for node, i in fgraph.clients.get(var, []):
            if _is_output(node):
                if i >= len(fgraph.outputs) or fgraph.outputs[i] is not var:
                    raise IntegrityError(f"Inconsistent clients list: {var}, output {i}")
                continue
            if node not in nodes:
                raise IntegrityError(f"Client not in FunctionGraph: {var}, {(node, i)}")
            if node.inputs[i] is not var:
                raise IntegrityError(f"Inconsistent clients list: {var}, {node.inputs[i]}")
    if set(fgraph.clients) != variables:
        raise IntegrityError(
            f"Inconsistent clients list: the clients are kept for the wrong variables. missing: "
            f"{_few(variables - set(fgraph.clients))}, in excess: "
            f"{_few(set(fgraph.clients) - variables)}"
        )
    expected: dict = {v: [] for v in variables}
    for node in nodes:
        for i, inp in enumerate(node.inputs):
            expected[inp].append((node, i))
    for k, out in enumerate(fgraph.outputs):
        expected[out].append(("output", k))
    for var in variables:
        have = fgraph.clients[var]
        if len(have) != len(expected[var]) or set(map(_client_key, have)) != set(
            map(_client_key, expected[var])
        ):
            raise IntegrityError(
                f"Inconsistent clients of {var}: cached {have}, actual {expected[var]}"
            )
    if set(fgraph._level) != nodes:
        raise IntegrityError("The node levels are kept for the wrong nodes")
    for node in nodes:
        for inp in node.inputs:
            if inp.owner is not None and fgraph._level[inp.owner] >= fgraph._level[node]:
                raise IntegrityError(f"Node levels are not topological at {node}")
    try:
        io_toposort(fgraph.inputs, fgraph.outputs)
    except ValueError as e:
        raise IntegrityError(f"The graph contains a cycle: {e}") from None


def pickle_state(fgraph):
    """``fgraph.__getstate__``: features and attributes that cannot be pickled are dropped
    with a warning, and nodes are listed inputs-first (no recursion on deep chains)."""
    d = dict(fgraph.__dict__)
    for key in ("execute_callbacks_times", "_callbacks", "_toposort_cache"):
        d.pop(key, None)
    for feature in fgraph._features:
        for attr in getattr(feature, "pickle_rm_attr", ()):
            d.pop(attr, None)
    # Features and attributes they installed that cannot be pickled are
    # dropped with a warning rather than making the whole graph unpicklable.
    kept = []
    for feature in fgraph._features:
        err = _pickle_problem(fgraph, feature)
        if err is None:
            kept.append(feature)
        else:
            warnings.warn(
                f"FunctionGraph pickling: dropping feature {feature!r}, which cannot be "
                f"pickled ({err})",
                stacklevel=2,
            )
            for attr in getattr(feature, "pickle_rm_attr", ()):
                d.pop(attr, None)
    d["_features"] = kept
    for key in [k for k in d if k not in _CORE_ATTRS]:
        err = _pickle_problem(fgraph, d[key])
        if err is not None:
            warnings.warn(
                f"FunctionGraph pickling: dropping attribute {key!r}, which cannot be "
                f"pickled ({err})",
                stacklevel=2,
            )
            del d[key]
    # Pickle the nodes inputs-first: each node's inputs are then already in the
    # pickle memo, so pickling never recurses down a deep chain.
    order = list(fgraph.inputs)
    order.extend(io_toposort(fgraph.inputs, fgraph.outputs))
    return {"_pickle_order": order, **d}


def restore_state(fgraph, state):
    """``fgraph.__setstate__``."""
    state = dict(state)
    state.pop("_pickle_order", None)
    fgraph.__dict__.update(state)
    fgraph.execute_callbacks_times = {f: 0.0 for f in fgraph._features}
    fgraph._callbacks = {}
    fgraph._toposort_cache = None
    for feature in fgraph._features:
        unpickle = getattr(feature, "unpickle", None)
        if unpickle is not None:
            unpickle(fgraph)


def _client_key(client):
    node, i = client
    return (id(node) if not _is_output(node) else "output", i)


def _few(items, n=5):
    items = list(items)
    s = ", ".join(str(x) for x in items[:n])
    return f"[{s}{', ...' if len(items) > n else ''}]"


class _NullWriter:
    def write(self, b):
        return len(b)


def _pickle_problem(fgraph, obj):
    """Return why ``obj`` cannot be pickled (ignoring graph objects it refers to), or None."""

    class Probe(pickle.Pickler):
        def persistent_id(self, o):
            if o is fgraph or isinstance(o, (Variable, Apply)):
                return 1
            return None

    try:
        Probe(_NullWriter(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as e:
        return f"{type(e).__name__}: {e}"
    return None
