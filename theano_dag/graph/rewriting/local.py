"""Local optimizers: rewrites of one Apply node (``theano.graph.opt``'s LocalOptimizer family).

A local optimizer's ``transform(fgraph, node)`` returns ``False``/``None`` (nothing to do),
a list of Variables to replace ``node.outputs`` with, or a dict ``{old: new}``. A
navigator (``TopoOptimizer``, ``EquilibriumOptimizer``) decides where to apply it.

A rewrite written as a function (``local_optimizer``) may also return one Variable, the
replacement of the node's (default) output; with ``fit=``, every replacement is first
made to have the type of what it replaces, or the rewrite declines (``as_replacements``).

``tracks()`` lists the Op classes or Op instances a rewrite looks at; navigators index
rewrites by it, so a node only meets the rewrites that can match it (one dict lookup per
node). ``None`` (or an empty list, as in the Theano tutorial) means every node.

Rewrites written for Theano 1.0, whose ``transform`` takes only ``(self, node)``, keep
working: the signature is detected when the class is defined.
"""

from __future__ import annotations

import copy
import inspect
import sys
import threading
import time
from collections import defaultdict

from theano_dag.graph.basic import Variable
from theano_dag.graph.op import Op
from theano_dag.graph.rewriting.basic import _attach_destroy_handler, opt_name

__all__ = [
    "LocalOptimizer",
    "FromFunctionLocalOptimizer",
    "as_replacements",
    "local_optimizer",
    "LocalOptGroup",
    "OpSub",
    "OpRemove",
    "TrackIndex",
    "LocalStats",
    "plain_transforms",
    "pre_greedy_local_optimizer",
]


def _n_positional(fn):
    """Number of positional parameters of ``fn``, or None when it takes ``*args``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _node_only(legacy):
    """Wrap a Theano 1.0 ``transform(self, node)`` so it also accepts ``(fgraph, node)``."""

    def transform(self, *args, **kwargs):
        node = kwargs.pop("node", None) if "node" in kwargs else args[-1]
        return legacy(self, node)

    transform.__wrapped__ = legacy
    transform.__doc__ = legacy.__doc__
    return transform


class LocalOptimizer:
    """A rewrite of one node; subclasses implement ``transform(fgraph, node)``.

    >>> class Nothing(LocalOptimizer):
    ...     def transform(self, node):  # the Theano 1.0 signature also works
    ...         return False
    >>> Nothing().transform(None, "a node"), Nothing().transform("a node")
    (False, False)
    """

    # Whether new nodes this rewrite creates may be rewritten by it again in the same pass.
    reentrant = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fn = cls.__dict__.get("transform")
        if inspect.isfunction(fn) and _n_positional(fn) == 2:
            cls.transform = _node_only(fn)
            cls._legacy_transform = True

    def tracks(self):
        """Op classes or instances this rewrite applies to; None for every node."""
        return None

    def needs(self):
        """Classes of Op or scalar op of which the graph must hold a node for this
        rewrite to apply anywhere (``theano_dag.graph.rewriting.presence``); None when
        it may apply to any graph. Navigators do not try it on graphs without one."""
        return None

    def transform(self, fgraph, node, *args, **kwargs):
        """Return False/None, a list of replacements for ``node.outputs``, or a dict.

        A local rewrite never changes the graph itself: the navigator makes the
        replacements (and can undo them). A change in place is a global pass's job.
        """
        raise NotImplementedError(f"{type(self).__name__}.transform is not implemented")

    def add_requirements(self, fgraph):
        """Attach the features this rewrite relies on."""

    def print_summary(self, stream=sys.stdout, level=0, depth=-1):
        print(f"{' ' * level}{type(self).__name__} {opt_name(self)} id={id(self)}", file=stream)


def as_replacements(node, result, fit=None, shape_sources=()):
    """What a local rewrite returned, in the form navigators take (a list or a dict).

    ``result`` may be one Variable: the replacement of ``node``'s output (of its default
    output when it has several). ``fit(old, new, shape_sources)`` (PyTensor's
    ``allow_cast``, made general) returns ``new`` with ``old``'s type (cast, given the
    broadcast dimensions it lacks from ``shape_sources``) or None when it cannot: then
    the whole rewrite declines (False). A rule that must spread its replacement over the
    shape of other variables calls its ``fit`` itself, with those variables.

    >>> from theano_dag.graph.type import Generic
    >>> from theano_dag.graph.basic import Apply
    >>> from theano_dag.graph.op import Op
    >>> class Id(Op):
    ...     __props__ = ()
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [x.type()])
    >>> x = Generic()("x")
    >>> node = Id()(x).owner
    >>> as_replacements(node, x)
    [x]
    >>> as_replacements(node, x, fit=lambda old, new, sources: None)
    False
    """
    if result is None or result is False:
        return result
    if result is True:
        raise TypeError(
            f"A local rewrite returned True for {node}: it returns its replacements and "
            "leaves the graph to the navigator (a change in place is a global pass)"
        )
    outputs = node.outputs
    if isinstance(result, Variable):
        if len(outputs) == 1:
            result = [result]
        else:
            default = getattr(node.op, "default_output", None)
            if default is None:
                raise ValueError(
                    f"A local rewrite returned one Variable for {node}, which has "
                    f"{len(outputs)} outputs and no default_output: return a list or a dict"
                )
            result = {outputs[default]: result}
    if fit is None:
        return result
    sources = shape_sources
    if isinstance(result, dict):
        fitted = {}
        for old, new in result.items():
            if new is not None and old != "remove":
                new = fit(old, new, sources)
                if new is None:
                    return False
            fitted[old] = new
        return fitted
    fitted = []
    for old, new in zip(outputs, result):
        if new is not None:
            new = fit(old, new, sources)
            if new is None:
                return False
        fitted.append(new)
    return fitted + list(result[len(outputs) :])  # a length error stays the navigator's


class FromFunctionLocalOptimizer(LocalOptimizer):
    """A local optimizer made from ``fn(fgraph, node)`` (or ``fn(node)``); see
    ``local_optimizer``."""

    def __init__(self, fn, tracks=None, requirements=(), fit=None, needs=None):
        self.fn = fn
        self._tracks = tracks
        self._needs = tuple(needs) if needs else None
        self.requirements = tuple(requirements)
        self.fit = fit
        self.__name__ = getattr(fn, "__name__", "FromFunctionLocalOptimizer")
        self.__doc__ = getattr(fn, "__doc__", None)
        # The function's module and the function itself: doctest's finder (pytest's
        # --doctest-modules) collects a module's examples from its functions and
        # classes only, and finds a decorated rewrite's through __wrapped__.
        self.__module__ = getattr(fn, "__module__", None)
        self.__wrapped__ = fn
        self._node_only = _n_positional(fn) == 1

    def transform(self, *args, **kwargs):
        result = self.fn(args[-1]) if self._node_only else self.fn(*args, **kwargs)
        if result is None or result is False:  # the common case first: nothing to do
            return result
        node = args[1] if len(args) > 1 else (args[0] if args else kwargs["node"])
        return as_replacements(node, result, self.fit)

    def __call__(self, *args, **kwargs):
        return self.transform(*args, **kwargs)

    def add_requirements(self, fgraph):
        for req in self.requirements:
            req(fgraph)

    def tracks(self):
        return self._tracks

    def needs(self):
        return self._needs

    def __str__(self):
        return self.__name__

    __repr__ = __str__


def plain_transforms(lopts) -> dict:
    """``{lopt: (fn, fit)}`` for the rewrites of ``lopts`` that are plain functions
    (``local_optimizer``) taking ``(fgraph, node)``, ``transform`` not replaced on the
    instance, with a ``fit`` or not: their ``transform`` is ``fn(fgraph, node)``, then,
    when it returns something, ``as_replacements(node, result, fit)``, which a navigator
    does itself: one call less for every rewrite tried on every node.

    >>> def as_is(old, new, shape_sources):
    ...     return new
    >>> @local_optimizer(None, fit=as_is)
    ... def nothing(fgraph, node):
    ...     return None
    >>> plain_transforms([nothing])[nothing] == (nothing.fn, as_is)
    True
    """
    out = {}
    for lopt in lopts:
        if (
            type(lopt) is FromFunctionLocalOptimizer
            and not lopt._node_only
            and "transform" not in lopt.__dict__
        ):
            out[lopt] = (lopt.fn, lopt.fit)
    return out


def _check_tracks(tracks, where):
    if tracks is None:
        return None
    if isinstance(tracks, (Op, type)):
        tracks = [tracks]
    tracks = list(tracks)
    if not tracks:
        raise ValueError(f"{where}: use None instead of an empty list to apply to all nodes")
    for t in tracks:
        if not (isinstance(t, Op) or (isinstance(t, type) and issubclass(t, Op))):
            raise ValueError(f"{where}: tracks must be Op classes or Op instances, got {t!r}")
    return tracks


def local_optimizer(tracks, inplace=False, requirements=(), fit=None, needs=None):
    """Decorator: turn ``f(fgraph, node)`` into a local optimizer tracking ``tracks``.

    ``f`` returns None/False (no match), one Variable (the new output), a list or a dict
    (see ``LocalOptimizer.transform``). ``fit(old, new, shape_sources)`` makes each
    replacement fit the type of what it replaces, or declines the rewrite
    (``as_replacements``). ``inplace=True`` adds a ``DestroyHandler`` to the
    requirements. ``needs``: classes of Op or scalar op of which the graph must hold a
    node for ``f`` to apply anywhere (``LocalOptimizer.needs``); a navigator does not
    call ``f`` on a graph holding none.

    >>> from theano_dag.graph.op import Op
    >>> class Neg(Op):
    ...     __props__ = ()
    >>> @local_optimizer([Neg])
    ... def local_nothing(fgraph, node):
    ...     return False
    >>> local_nothing.tracks(), str(local_nothing)
    ([<class 'theano_dag.graph.rewriting.local.Neg'>], 'local_nothing')
    """

    def decorator(f):
        where = f"local_optimizer({getattr(f, '__name__', f)!s})"
        checked = _check_tracks(tracks, where)
        reqs = tuple(requirements)
        if inplace:
            reqs = reqs + (_attach_destroy_handler,)
        return FromFunctionLocalOptimizer(f, checked, reqs, fit=fit, needs=needs)

    return decorator


def _tracks_of(lopt):
    t = lopt.tracks()
    if t is None:
        return None
    t = list(t)
    return t or None  # the Theano tutorial returns [] to mean "every node"


class TrackIndex:
    """Find, for an Op, the local optimizers whose ``tracks`` match it (cached).

    A tracked class matches its subclasses; a tracked instance matches equal Ops.
    Optimizers come back in the order they were given.

    >>> from theano_dag.graph.op import Op
    >>> class A(Op):
    ...     __props__ = ()
    >>> class B(A):
    ...     __props__ = ()
    >>> @local_optimizer([A])
    ... def on_a(fgraph, node):
    ...     return False
    >>> @local_optimizer(None)
    ... def on_all(fgraph, node):
    ...     return False
    >>> [str(o) for o in TrackIndex([on_a, on_all]).lookup(B())]
    ['on_a', 'on_all']
    """

    OP_CACHE_SIZE = 4096

    def __init__(self, lopts):
        self.lopts = list(lopts)
        self.rank = {}
        self.all: list = []
        self.by_class: dict = defaultdict(list)
        self.by_instance: dict = defaultdict(list)
        self.unhashable: list = []  # (op, lopt) for ops that cannot be dict keys
        for r, lopt in enumerate(self.lopts):
            self.rank.setdefault(lopt, r)
            if type(lopt) is LocalOptGroup and not lopt.opts:
                # An empty group (a pass whose rewrites live in a module not imported, as
                # ifelse's) meets no node; its tracks, None, would say every node.
                continue
            tracks = _tracks_of(lopt)
            if tracks is None:
                self.all.append(lopt)
                continue
            for t in tracks:
                if isinstance(t, type):
                    self.by_class[t].append(lopt)
                else:
                    try:
                        self.by_instance[t].append(lopt)
                    except TypeError:
                        self.unhashable.append((t, lopt))
        self._type_cache: dict = {}
        self._op_cache: dict = {}  # id(op) -> (op, optimizers); holding op keeps its id valid

    def _for_type(self, cls):
        found = self._type_cache.get(cls)
        if found is None:
            found = list(self.all)
            for klass in cls.__mro__:
                found.extend(self.by_class.get(klass, ()))
            found = self._ordered(found)
            self._type_cache[cls] = found
        return found

    def _ordered(self, lopts):
        seen = set()
        out = []
        for lo in sorted(lopts, key=self.rank.__getitem__):
            if lo not in seen:
                seen.add(lo)
                out.append(lo)
        return out

    def lookup(self, op) -> list:
        """Return the optimizers to try on a node whose op is ``op``."""
        if not (self.by_instance or self.unhashable):
            return self._for_type(type(op))
        # Matching instance tracks hashes the op through its __props__: do it once per
        # op instance (graphs reuse a few op instances for many nodes).
        entry = self._op_cache.get(id(op))
        if entry is not None and entry[0] is op:
            return entry[1]
        found = self._for_type(type(op))
        extra = []
        if self.by_instance:
            try:
                extra = self.by_instance.get(op, [])
            except TypeError:
                extra = [lo for t, los in self.by_instance.items() if t == op for lo in los]
        extra = extra + [lo for t, lo in self.unhashable if t == op]
        if extra:
            found = self._ordered(found + extra)
        if len(self._op_cache) >= self.OP_CACHE_SIZE:
            self._op_cache.clear()  # bounded: a long session meets many op instances
        self._op_cache[id(op)] = (op, found)
        return found

    def can_meet(self, classes) -> bool:
        """Whether a node whose op is an instance of one of ``classes`` could meet an
        optimizer here (False: a navigator over a graph holding only such nodes would
        offer none of them any rewrite).

        An instance track counts for every class related to the instance's (its class,
        a subclass or a base): equal Ops are of related classes.

        >>> from theano_dag.graph.op import Op
        >>> class A(Op):
        ...     __props__ = ()
        >>> class B(Op):
        ...     __props__ = ()
        >>> @local_optimizer([A])
        ... def on_a(fgraph, node):
        ...     return False
        >>> index = TrackIndex([on_a])
        >>> index.can_meet([A]), index.can_meet([B]), TrackIndex([]).can_meet([A])
        (True, False, False)
        """
        classes = list(classes)
        if not classes:
            return False
        if self.all:
            return True
        if any(self._for_type(cls) for cls in classes):
            return True
        tracked = [type(t) for t in self.by_instance] + [type(t) for t, _ in self.unhashable]
        return any(issubclass(k, t) or issubclass(t, k) for t in tracked for k in classes)

    def __len__(self):
        return len(self.lopts)


class LocalStats:
    """Per-rewrite counters: seconds spent, times tried, times applied, nodes created."""

    def __init__(self):
        self.time: dict = defaultdict(float)
        self.tried: dict = defaultdict(int)
        self.applied: dict = defaultdict(int)
        self.created: dict = defaultdict(int)

    def write(self, stream=sys.stdout, level=0):
        pad = "    " * level
        used = [o for o in self.tried if self.applied[o]]
        unused = [o for o in self.tried if not self.applied[o]]
        if used:
            print(f"{pad}  time - applied - tried - nodes created - rewrite", file=stream)
            for o in sorted(used, key=lambda o: -self.time[o]):
                print(
                    f"{pad}  {self.time[o]:.6f}s - {self.applied[o]} - {self.tried[o]} - "
                    f"{self.created[o]} - {opt_name(o)}",
                    file=stream,
                )
        t_unused = sum(self.time[o] for o in unused)
        print(f"{pad}  {t_unused:.6f}s in {len(unused)} rewrites that never applied", file=stream)

    def merge(self, other: LocalStats):
        for name in ("time", "tried", "applied", "created"):
            mine = getattr(self, name)
            for k, v in getattr(other, name).items():
                mine[k] += v


# id(group) -> (group, the rewrites of it that applied last), per thread.
_APPLIED = threading.local()


class LocalOptGroup(LocalOptimizer):
    """Try several local optimizers on a node; the first that applies wins.

    With ``apply_all_opts=True`` the group keeps rewriting the node it produced until
    no rewrite applies.
    """

    def __init__(self, *optimizers, apply_all_opts=False, profile=False, name=None):
        if len(optimizers) == 1 and isinstance(optimizers[0], (list, tuple)):
            optimizers = tuple(optimizers[0])
        for o in optimizers:
            if not isinstance(o, LocalOptimizer):
                raise TypeError(f"LocalOptGroup: {o!r} is not a LocalOptimizer")
        self.opts = tuple(optimizers)
        self.reentrant = any(getattr(o, "reentrant", True) for o in self.opts)
        self.retains_inputs = all(getattr(o, "retains_inputs", False) for o in self.opts)
        self.apply_all_opts = apply_all_opts
        self.profile = profile
        self.stats = LocalStats()
        self.index = TrackIndex(self.opts)
        self._direct = plain_transforms(self.opts)
        self._plans: dict = {}  # id(op) -> (op, ((rewrite, plain function, its fit), ...))
        if name is not None:
            self.__name__ = name

    def __str__(self):
        return getattr(self, "__name__", None) or (
            f"LocalOptGroup({','.join(opt_name(o) for o in self.opts)})"
        )

    def tracks(self):
        out = []
        for o in self.opts:
            t = _tracks_of(o)
            if t is None:
                return None
            out.extend(t)
        return out or None

    def applied_rewrite(self):
        """The rewrite(s) of the group that made the last replacement in this thread (a
        name for reports): the rewrite itself, or ``"a, then b"`` when several chained."""
        chain = _APPLIED.__dict__.get(id(self))
        if not chain or chain[0] is not self:
            return None
        chain = chain[1]
        if not chain:
            return None
        if len(chain) == 1:
            return chain[0]
        return ", then ".join(opt_name(o) for o in chain)

    def transform(self, fgraph, node):
        repl = None
        # What applied, per thread: the functions compiled with one mode share its
        # optimizers, in every thread that compiles.
        chains = _APPLIED.__dict__
        if len(chains) >= 256:
            chains.clear()  # (groups made for one pass come and go)
        chains[id(self)] = (self, ())
        applied = ()  # a list once a rewrite applies
        profile = self.profile
        direct = self._direct
        plans = self._plans
        while True:
            new_repl = None
            op = node.op
            # The rewrites of the op with their plain functions, looked up once per op
            # instance (index.lookup and a direct.get per rewrite on every node).
            plan = plans.get(id(op))
            if plan is None or plan[0] is not op:
                if len(plans) >= TrackIndex.OP_CACHE_SIZE:
                    plans.clear()  # bounded, as TrackIndex's own cache
                found = tuple((o, *direct.get(o, (None, None))) for o in self.index.lookup(op))
                plan = plans[id(op)] = (op, found)
            for opt, fn, fit in plan[1]:
                t0 = time.perf_counter() if profile else 0.0
                if fn is not None and "transform" not in opt.__dict__:
                    # The function itself, as its transform would call it (see
                    # plain_transforms): most rewrites tried find nothing to do.
                    new_repl = fn(fgraph, node)
                    if new_repl is not None and new_repl is not False:
                        new_repl = as_replacements(node, new_repl, fit)
                else:
                    new_repl = opt.transform(fgraph, node)
                if profile:
                    self.stats.time[opt] += time.perf_counter() - t0
                    self.stats.tried[opt] += 1
                if new_repl:
                    if profile:
                        self.stats.applied[opt] += 1
                    if not applied:
                        applied = []
                        chains[id(self)] = (self, applied)
                    applied.append(opt)
                    break
            if not new_repl:
                return repl
            if not self.apply_all_opts:
                return new_repl
            new_vars = list(new_repl.values()) if isinstance(new_repl, dict) else new_repl
            repl = new_repl
            first = new_vars[0]
            if first is None or first.owner is None or isinstance(new_repl, dict):
                return repl
            owners = {v.owner for v in new_vars if v is not None}
            if len(owners) != 1 or len(first.owner.outputs) != len(node.outputs):
                return repl
            node = first.owner

    def add_requirements(self, fgraph):
        for o in self.opts:
            o.add_requirements(fgraph)

    def print_summary(self, stream=sys.stdout, level=0, depth=-1):
        super().print_summary(stream, level, depth)
        if depth != 0:
            for o in self.opts:
                o.print_summary(stream, level=level + 2, depth=depth - 1)


class OpSub(LocalOptimizer):
    """Replace each application of ``op1`` by ``op2`` on the same inputs.

    >>> from theano_dag.graph.op import Op
    >>> class Add(Op):
    ...     __props__ = ()
    >>> class Sub(Op):
    ...     __props__ = ()
    >>> str(OpSub(Add(), Sub()))
    'Add -> Sub'
    """

    reentrant = False  # the nodes it makes hold op2, which it does not track
    retains_inputs = True

    def __init__(self, op1, op2, transfer_tags=True):
        self.op1 = op1
        self.op2 = op2
        self.transfer_tags = transfer_tags

    def op_key(self):
        return self.op1

    def tracks(self):
        return [self.op1]

    def transform(self, fgraph, node):
        if node.op != self.op1:
            return False
        repl = self.op2.make_node(*node.inputs)
        if self.transfer_tags:
            repl.tag = copy.copy(node.tag)
            for out, new_out in zip(node.outputs, repl.outputs):
                new_out.tag = copy.copy(out.tag)
        return repl.outputs

    def __str__(self):
        return f"{self.op1} -> {self.op2}"


class OpRemove(LocalOptimizer):
    """Remove each application of ``op``: output ``k`` is replaced by input ``k``.

    >>> from theano_dag.graph.op import Op
    >>> class Identity(Op):
    ...     __props__ = ()
    >>> str(OpRemove(Identity()))
    'Identity(x) -> x'
    """

    reentrant = False  # it adds no node at all

    def __init__(self, op):
        self.op = op

    def op_key(self):
        return self.op

    def tracks(self):
        return [self.op]

    def transform(self, fgraph, node):
        if node.op != self.op:
            return False
        if len(node.inputs) != len(node.outputs):
            raise ValueError(
                f"OpRemove({self.op}): the node has {len(node.inputs)} inputs and "
                f"{len(node.outputs)} outputs; OpRemove needs as many outputs as inputs"
            )
        return list(node.inputs)

    def __str__(self):
        return f"{self.op}(x) -> x"


def pre_greedy_local_optimizer(fgraph, optimizations, out):
    """Apply the local rewrites ``optimizations`` to the graph of ``out``, bottom-up,
    before it is part of a FunctionGraph; return ``out``'s replacement (Theano's name).

    Nodes of ``fgraph`` (which may be None) are left alone. Like Theano, this rewires the
    inputs of the visited nodes in place, and runs one pass: each node gets each rewrite
    once, the next ones applied to what the previous one made. Its use is folding
    constants in a graph being built (the indices of a subtensor).

    >>> from theano_dag.graph.basic import Apply, Constant
    >>> from theano_dag.graph.op import Op
    >>> from theano_dag.graph.type import Generic
    >>> class Add(Op):
    ...     __props__ = ()
    ...     def make_node(self, a, b):
    ...         return Apply(self, [a, b], [Generic()()])
    >>> @local_optimizer([Add])
    ... def fold(fgraph, node):
    ...     if all(isinstance(i, Constant) for i in node.inputs):
    ...         return [Constant(Generic(), node.inputs[0].data + node.inputs[1].data)]
    >>> one, two, x = Constant(Generic(), 1), Constant(Generic(), 2), Generic()("x")
    >>> out = Add()(Add()(one, two), x)
    >>> new = pre_greedy_local_optimizer(None, [fold], out)
    >>> new.owner.inputs[0].data, new.owner.inputs[1] is x
    (3, True)
    """
    skip = fgraph.apply_nodes if fgraph is not None else ()
    # The nodes between the graph's inputs and ``out``, inputs first (iteratively, so
    # that a deep graph does not reach the recursion limit).
    order, seen = [], set()
    stack = [(out.owner, False)] if out.owner is not None else []
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node in seen or node in skip:
            continue
        seen.add(node)
        stack.append((node, True))
        for inp in reversed(node.inputs):
            if inp.owner is not None and inp.owner not in seen:
                stack.append((inp.owner, False))
    done: dict = {}
    for node in order:
        node.inputs = [done.get(i, i) for i in node.inputs]
        current = node
        for opt in optimizations:
            ret = as_replacements(current, opt.transform(fgraph, current))
            if not ret:
                continue
            if isinstance(ret, dict):
                ret = [ret.get(o, o) for o in current.outputs]
            for old, new in zip(node.outputs, ret):
                done[old] = new
            if ret[0].owner is None:
                break
            current = ret[0].owner
    return done.get(out, out)
