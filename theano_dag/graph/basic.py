"""The graph: ``Variable --owner--> Apply(op, inputs, outputs)`` and the algorithms over it.

Mirrors ``theano.graph.basic`` (theano-pymc 1.1.2). The node classes live here; the
algorithms (walk, ancestors, clone, io_toposort, as_string, equal_computations, ...) are
written in ``theano_dag.graph.algorithms`` and re-exported here, so that
``from theano_dag.graph.basic import io_toposort`` works as in Theano. Every algorithm
is iterative: a graph of any depth works without touching Python's recursion limit.
"""

from __future__ import annotations

import itertools
import numbers
from copy import copy

from theano_dag.config import config
from theano_dag.graph.utils import (
    MetaObject,
    MethodNotDefined,
    Scratchpad,
    TestValueError,
    ValidatingScratchpad,
    _slot_names,
)

__all__ = [
    "NoParams",
    "Node",
    "Apply",
    "Variable",
    "Constant",
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
    "io_toposort",
    "io_connection_pattern",
    "as_string",
    "op_as_string",
    "view_roots",
    "list_of_nodes",
    "is_in_ancestors",
    "nodes_constructed",
    "equal_computations",
    "is_same_graph",
]


NoParams = object()
"""What ``Apply.run_params`` returns when the op has no params: ``perform`` gets none."""

_UNSET = object()  # a slot never set (pickling leaves it out)


def _get_slotted_state(obj) -> dict:
    state = {}
    for k in _slot_names(type(obj)):
        v = getattr(obj, k, _UNSET)
        if v is not _UNSET:
            state[k] = v
    extra = getattr(obj, "__dict__", None)
    if extra:
        state.update(extra)
    return state


def _set_slotted_state(obj, state) -> None:
    for k, v in state.items():
        object.__setattr__(obj, k, v)


def _copy_tag(tag):
    """``copy(tag)``; a Scratchpad's own ``__copy__`` called directly (copy's dispatch
    costs as much as the copy, and every clone of a graph copies each node's tags)."""
    return tag.__copy__() if isinstance(tag, Scratchpad) else copy(tag)


class Node(MetaObject):
    """A vertex of the bipartite graph: either an Apply or a Variable."""

    __slots__ = ()

    def get_parents(self):
        """Return the nodes this one directly depends on."""
        raise NotImplementedError()


class Apply(Node):
    """One application of ``op`` to ``inputs``, producing ``outputs``.

    >>> from theano_dag.graph.type import Generic
    >>> a, b = Variable(Generic(), name="a"), Variable(Generic(), name="b")
    >>> node = Apply("op", [a], [b])
    >>> b.owner is node, b.index, node.nin, node.nout
    (True, 0, 1, 1)
    """

    __slots__ = ("op", "inputs", "outputs", "_tag", "_imported_by", "_removed_by", "__weakref__")

    def __init__(self, op, inputs, outputs):
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"The inputs of Apply({op}) must be a list or tuple, got {inputs!r}")
        if not isinstance(outputs, (list, tuple)):
            raise TypeError(f"The outputs of Apply({op}) must be a list or tuple, got {outputs!r}")
        self.op = op
        self._tag = None
        # ``tag.imported_by`` and ``tag.removed_by`` (what FunctionGraphs note on every
        # node they import or prune), kept aside until the tag is made: a Scratchpad
        # per node for them alone costs objects and time on every graph change.
        self._imported_by = self._removed_by = None
        for x in inputs:
            if not isinstance(x, Variable):
                i = next(k for k, v in enumerate(inputs) if not isinstance(v, Variable))
                raise TypeError(
                    f"Input {i} of Apply({op}) must be a Variable, got {type(x).__name__}: {x!r}"
                )
        self.inputs = list(inputs)
        self.outputs = outputs = list(outputs)
        if len(outputs) == 1:  # the common case, checked and linked in one go
            out = outputs[0]
            if (
                isinstance(out, Variable)
                and (out.owner is None or (out.owner is self and out.index == 0))
                and not isinstance(out, Constant)
            ):
                out.owner = self
                out.index = 0
                return
        # Check every output before linking any, so a refused node leaves no half-made links.
        seen: set = set()
        for i, out in enumerate(self.outputs):
            if not isinstance(out, Variable):
                raise TypeError(
                    f"Output {i} of Apply({op}) must be a Variable, got {type(out).__name__}"
                )
            if (out.owner is not None and (out.owner is not self or out.index != i)) or (
                id(out) in seen
            ):
                raise ValueError(
                    f"Output {i} of Apply({op}) ({out}) already belongs to another Apply node"
                )
            if isinstance(out, Constant):
                raise ValueError(
                    f"Output {i} of Apply({op}) ({out}) is a Constant: "
                    "Constant instances cannot have an owner."
                )
            seen.add(id(out))
        for i, out in enumerate(self.outputs):
            out.owner = self
            out.index = i

    @property
    def tag(self):
        """A Scratchpad where rewrites and users leave notes (made on first use)."""
        # Most nodes never get a note: creating the scratchpad lazily halves the
        # objects per node, which is what the garbage collector's cost scales with.
        tag = self._tag
        if tag is None:
            tag = self._tag = Scratchpad()
            if self._imported_by is not None:
                tag.imported_by = self._imported_by
                self._imported_by = None
            if self._removed_by is not None:
                tag.removed_by = self._removed_by
                self._removed_by = None
        return tag

    @tag.setter
    def tag(self, value):
        self._tag = value
        self._imported_by = self._removed_by = None

    def _note(self, attr, reason):
        """Append ``reason`` to ``tag.<attr>`` (``imported_by`` or ``removed_by``),
        in the slot kept aside for it while the node has no tag."""
        tag = self._tag
        if tag is None:
            slot = "_" + attr
            notes = getattr(self, slot)
            if notes is None:
                setattr(self, slot, [reason])
            else:
                notes.append(reason)
            return
        notes = getattr(tag, attr, None)
        if notes is None:
            setattr(tag, attr, [reason])
        else:
            notes.append(reason)

    def __getstate__(self):
        return _get_slotted_state(self)

    def __setstate__(self, state):
        self._imported_by = self._removed_by = None  # absent from older pickles
        _set_slotted_state(self, state)

    def run_params(self):
        """Return ``op.get_params(self)``, or ``NoParams`` when the op has no params."""
        get_params = getattr(self.op, "get_params", None)
        if get_params is None:
            return NoParams
        try:
            return get_params(self)
        except MethodNotDefined:
            return NoParams

    @property
    def params_type(self):
        """The op's ``params_type`` (None when it has none)."""
        return getattr(self.op, "params_type", None)

    def default_output(self):
        """Return the output the op designates as default, or the only output."""
        do = getattr(self.op, "default_output", None)
        if do is None:
            if len(self.outputs) == 1:
                return self.outputs[0]
            raise ValueError(
                f"{self.op}.default_output should be an output index when the op has "
                f"{len(self.outputs)} outputs"
            )
        if isinstance(do, bool) or not isinstance(do, numbers.Integral):
            raise ValueError(
                f"{self.op}.default_output should be an int, the index of one of its "
                f"{len(self.outputs)} outputs; got {do!r}"
            )
        if not 0 <= do < len(self.outputs):
            raise ValueError(
                f"{self.op}.default_output is out of range: {do} for {len(self.outputs)} outputs"
            )
        return self.outputs[do]

    out = property(default_output, doc="Alias of ``default_output()``.")

    @property
    def nin(self):
        """Number of inputs."""
        return len(self.inputs)

    @property
    def nout(self):
        """Number of outputs."""
        return len(self.outputs)

    def __str__(self):
        return op_as_string(self.inputs, self)

    def __repr__(self):
        return str(self)

    def clone(self):
        """Return a copy of this node with the same inputs and new output Variables."""
        cp = self.__class__(self.op, self.inputs, [o.clone() for o in self.outputs])
        if self._tag is not None:
            cp._tag = _copy_tag(self._tag)
        else:  # the notes' lists shared, as a copied tag shares them
            cp._imported_by, cp._removed_by = self._imported_by, self._removed_by
        return cp

    def clone_with_new_inputs(self, inputs, strict=True):
        """Return an Apply of the same op on ``inputs``.

        With ``strict`` the new inputs must have the same types as the old ones
        (``Type.filter_variable`` may convert them); otherwise ``op.make_node``
        rebuilds the node, and its outputs may get other types.
        """
        if len(inputs) != len(self.inputs):
            raise ValueError(
                f"clone_with_new_inputs of {self.op}: expected {len(self.inputs)} inputs, "
                f"got {len(inputs)}"
            )
        new_inputs = list(inputs)
        remake = False
        i = 0
        for cur in self.inputs:
            new = new_inputs[i]
            # A plain value is a type mismatch: strict mode wraps it as a Constant.
            # (A clone shares its original's type object: no comparison needed.)
            if not isinstance(new, Variable) or (new.type is not cur.type and cur.type != new.type):
                if strict:
                    new_inputs[i] = cur.type.filter_variable(new)
                else:
                    remake = True
            i += 1
        if remake:
            node = self.op.make_node(*new_inputs)
            if self._tag is not None or self._imported_by or self._removed_by:
                node.tag = copy(self.tag).__update__(node.tag)
            return node
        # self.clone() on the new inputs: a FunctionGraph copies every node this way.
        node = self.__class__(self.op, new_inputs, [o.clone() for o in self.outputs])
        if self._tag is not None:
            node._tag = _copy_tag(self._tag)
        else:  # the notes' lists shared, as a copied tag shares them
            node._imported_by, node._removed_by = self._imported_by, self._removed_by
        return node

    def get_parents(self):
        return list(self.inputs)


def _node_of_fresh_output(op, inputs, vtype, cls) -> Apply:
    """``Apply(op, inputs, [cls(vtype, None, None, None)])`` made without the
    constructors' checks and calls, for a make_node on its hot path: the caller knows
    that ``inputs`` are Variables and that ``cls``'s constructor does nothing but
    Variable's now (no construction observer either)."""
    out = _new(cls)
    out._tag = None
    out._trace = None
    out.type = vtype
    out.name = None
    out.creation_index = next(_counter)
    node = _new(Apply)
    node.op = op
    node._tag = None
    node._imported_by = node._removed_by = None
    node.inputs = list(inputs)
    node.outputs = [out]
    out.owner = node
    out.index = 0
    return node


_new = object.__new__


class Variable(Node):
    """A value in the graph: a graph input (``owner is None``) or an Apply's output.

    >>> from theano_dag.graph.type import Generic
    >>> x = Variable(Generic(), name="x")
    >>> x.owner is None, str(x)
    (True, 'x')
    """

    __slots__ = (
        "type",
        "owner",
        "index",
        "name",
        "_tag",
        "_trace",
        "creation_index",
        "_fn_cache",
        "__weakref__",
    )
    __count__ = itertools.count()
    construction_observers: list = []

    def __init__(self, type, owner=None, index=None, name=None):
        self._tag = None
        # The user's stacks (``tag.trace``) until the tag is made: most variables get a
        # trace and never another note, and a Scratchpad per variable costs objects.
        self._trace = None
        self.type = type
        if owner is not None and not isinstance(owner, Apply):
            raise TypeError(f"owner must be an Apply instance, got {owner!r}")
        self.owner = owner
        if index is not None and not isinstance(index, int):
            raise TypeError(f"index must be an int, got {index!r}")
        self.index = index
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a string, got {name!r}")
        self.name = name
        # A number that orders variables by creation (a stable sort key for rewrites).
        self.creation_index = next(Variable.__count__)
        if Variable.construction_observers:
            Variable.notify_construction_observers(self)

    @property
    def auto_name(self) -> str:
        """A name unique to this variable, ``auto_<creation_index>``."""
        return f"auto_{self.creation_index}"

    def __getstate__(self):
        state = _get_slotted_state(self)
        # A compiled function is a cache, not part of the graph.
        state.pop("_fn_cache", None)
        return state

    def __setstate__(self, state):
        self._trace = None  # absent from what older versions pickled
        _set_slotted_state(self, state)

    @property
    def tag(self):
        """A Scratchpad for notes; ``tag.test_value`` is checked by the type's ``filter``."""
        tag = self._tag
        if tag is None:  # made on first use, as for Apply.tag
            tag = self._tag = ValidatingScratchpad("test_value", self.type.filter)
            trace = getattr(self, "_trace", None)  # (a Variable made without __init__)
            if trace is not None:  # kept aside until now (add_tag_trace)
                tag.trace = trace
                self._trace = None
        return tag

    @tag.setter
    def tag(self, value):
        self._tag = value
        self._trace = None

    def get_test_value(self):
        """Return ``tag.test_value``; raise TestValueError when there is none."""
        if self._tag is None or not hasattr(self._tag, "test_value"):
            raise TestValueError(f"{self} has no test value")
        return self.tag.test_value

    def __str__(self):
        if self.name is not None:
            return self.name
        if self.owner is not None:
            op = self.owner.op
            if self.index == getattr(op, "default_output", None):
                return f"{op}.out"
            return f"{op}.{self.index}"
        return f"<{self.type}>"

    def __repr__(self):
        if config.print_test_value:  # Theano's flag: the test value under the name
            try:
                return f"{self}\n{self.get_test_value()!r}"
            except TestValueError:
                pass
        return str(self)

    def clone(self):
        """Return a new Variable like this one, with no owner (tag copied)."""
        cp = self.__class__(self.type, None, None, self.name)
        if self._tag is not None:
            cp._tag = _copy_tag(self._tag)
        else:
            cp._trace = getattr(self, "_trace", None)
        return cp

    def get_parents(self):
        return [self.owner] if self.owner is not None else []

    @classmethod
    def _plain_copy(cls) -> bool:
        """Whether ``var.clone()`` of this class now does only what ``Variable.clone``
        and ``Variable.__init__`` do (no check or note of a subclass's, no construction
        observer): a copy of a whole graph (FunctionGraph's) may then set the slots of
        the clones itself. A subclass whose constructor adds something that can be off
        says when it is."""
        return (
            cls.__init__ is Variable.__init__
            and cls.clone is Variable.clone
            and not Variable.construction_observers
        )

    # Graph variables have no order; subclasses (tensors) give these a symbolic meaning.
    def __lt__(self, other):
        raise NotImplementedError(f"Subclasses of Variable must provide __lt__ ({type(self)})")

    def __le__(self, other):
        raise NotImplementedError(f"Subclasses of Variable must provide __le__ ({type(self)})")

    def __gt__(self, other):
        raise NotImplementedError(f"Subclasses of Variable must provide __gt__ ({type(self)})")

    def __ge__(self, other):
        raise NotImplementedError(f"Subclasses of Variable must provide __ge__ ({type(self)})")

    def eval(self, inputs_to_values=None):
        """Compile (once, cached per set of inputs) and run the graph of this variable.

        >>> from theano_dag import tensor as tt
        >>> x = tt.dscalar("x")
        >>> float((x * 2).eval({x: 3.0}))
        6.0
        """
        from theano_dag.compile.function import function  # eval compiles: compile is above graph

        inputs_to_values = dict(inputs_to_values or {})
        keys = tuple(sorted(inputs_to_values, key=id))
        cache = getattr(self, "_fn_cache", None)
        if cache is None:
            cache = self._fn_cache = {}
        if keys not in cache:
            cache[keys] = function(list(keys), self)
        return cache[keys](*[inputs_to_values[k] for k in keys])

    @classmethod
    def append_construction_observer(cls, observer):
        cls.construction_observers.append(observer)

    @classmethod
    def remove_construction_observer(cls, observer):
        cls.construction_observers.remove(observer)

    @classmethod
    def notify_construction_observers(cls, instance):
        for observer in cls.construction_observers:
            observer(instance)


class Constant(Variable):
    """A Variable with a fixed value; it never has an owner.

    >>> from theano_dag.graph.type import Generic
    >>> c = Constant(Generic(), 5)
    >>> c.data, c.value, c.clone().data, str(c)
    (5, 5, 5, 'Constant{5}')
    """

    __slots__ = ("data",)

    def __init__(self, type, data, name=None):
        super().__init__(type, None, None, name)
        self.data = type.filter(data)

    @property
    def owner(self):
        return None

    @owner.setter
    def owner(self, value):
        if value is not None:
            raise ValueError("Constant instances cannot have an owner.")

    @property
    def value(self):
        """The constant's data (read only)."""
        return self.data

    def get_test_value(self):
        return self.data

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("owner", None)
        return state

    def __setstate__(self, state):
        state = dict(state)
        state.pop("owner", None)
        self._trace = None  # absent from what older versions pickled
        for k, v in state.items():
            object.__setattr__(self, k, v)

    def equals(self, other):
        return isinstance(other, Constant) and self.signature() == other.signature()

    def signature(self):
        """A hashable key: two constants with equal signatures hold the same value."""
        return (self.type, self.data)

    def merge_signature(self):
        return self.signature()

    def __str__(self):
        if self.name is not None:
            return self.name
        s = str(self.data)
        if len(s) > 20:
            s = s[:10] + "..." + s[-10:]
        return f"Constant{{{s}}}"

    def clone(self):
        cp = self.__class__(self.type, self.data, self.name)
        if self._tag is not None:
            cp._tag = copy(self._tag)
        else:
            cp._trace = getattr(self, "_trace", None)
        return cp


_counter = Variable.__count__  # (for _node_of_fresh_output)

# Re-exported at the end: the algorithms module needs the classes above. (Importing it
# first is safe too: ``theano_dag.graph``'s __init__ imports this module before it.)
from theano_dag.graph.algorithms import (  # noqa: E402
    ancestors,
    applys_between,
    as_string,
    clone,
    clone_get_equiv,
    clone_replace,
    general_toposort,
    graph_inputs,
    inputs,
    io_connection_pattern,
    io_toposort,
    is_in_ancestors,
    list_of_nodes,
    op_as_string,
    ops,
    orphans,
    orphans_between,
    stack_search,
    variables,
    variables_and_orphans,
    vars_between,
    view_roots,
    walk,
)
from theano_dag.graph.comparison import (  # noqa: E402
    equal_computations,
    is_same_graph,
    nodes_constructed,
)
