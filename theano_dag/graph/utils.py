"""Small helpers shared by the graph core: the ``__props__`` metaclass, scratchpads,
``gc_paused`` (used by the compiler and by the engines alike) and the user's stack
(``user_stack``, ``add_tag_trace``, ``copy_stack_trace``)."""

from __future__ import annotations

import contextlib
import functools
import gc
import operator
import os
import sys
import threading

from theano_dag.utils import cmp  # noqa: F401  (Theano's graph code imports it from here)

# The package's own directory: frames from files under it are not the user's.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class MethodNotDefined(NotImplementedError):
    """Raised by an Op or Type method that a subclass must implement but did not.

    It subclasses NotImplementedError so that code written against either
    convention (Theano raises both, depending on the method) catches it.
    """


class TestValueError(Exception):
    """Raised when a test value is missing or does not fit its variable."""

    __test__ = False  # not a pytest test class, despite the name


class MetaType(type):
    """Metaclass that turns ``__props__`` into ``__eq__``, ``__hash__`` and ``__str__``.

    Two Ops whose class and props are equal compare equal, so ``MergeOptimizer``
    can see that two Apply nodes compute the same thing.

    >>> class Scale(MetaObject):
    ...     __props__ = ("factor",)
    ...     def __init__(self, factor):
    ...         self.factor = factor
    >>> Scale(2) == Scale(2), Scale(2) == Scale(3), str(Scale(2))
    (True, False, 'Scale{factor=2}')

    A plain ``type``, not an ``ABCMeta``: ``isinstance`` against an ABC goes through
    ``ABCMeta.__instancecheck__``, several times slower, and optimizers ask
    ``isinstance(x, Variable)`` (or an Op class) hundreds of thousands of times.
    """

    def __new__(mcs, name, bases, dct):
        props = dct.get("__props__")
        if props is not None:
            if not isinstance(props, tuple):
                raise TypeError(f"{name}.__props__ must be a tuple of attribute names")
            if not all(isinstance(p, str) for p in props):
                raise TypeError(f"{name}.__props__ must contain only strings, got {props!r}")

            # attrgetter reads the attributes in C: ops and types are compared and
            # hashed (through their props) many times per node an optimizer visits.
            if len(props) >= 2:
                getter = operator.attrgetter(*props)
            elif props:
                one = operator.attrgetter(props[0])

                def getter(self):
                    return (one(self),)

            else:

                def getter(self):
                    return ()

            def _props(self):
                return getter(self)

            def _props_dict(self):
                return {a: getattr(self, a) for a in props}

            dct["_props"] = _props
            dct["_props_dict"] = _props_dict
            if "__hash__" not in dct:
                dct["__hash__"] = lambda self: hash((type(self), getter(self)))
            if "__eq__" not in dct:
                # Identity first: graphs reuse a few op instances for many nodes.
                dct["__eq__"] = lambda self, other: self is other or (
                    type(self) is type(other) and getter(self) == getter(other)
                )
            if "__str__" not in dct:
                if props:
                    dct["__str__"] = lambda self: "{}{{{}}}".format(
                        type(self).__name__, ", ".join(f"{p}={getattr(self, p)!r}" for p in props)
                    )
                else:
                    dct["__str__"] = lambda self: type(self).__name__
        return super().__new__(mcs, name, bases, dct)


class MetaObject(metaclass=MetaType):
    """Base class of Op and Type: gets equality from ``__props__``."""

    __slots__ = ()

    def __ne__(self, other):
        return not self == other

    def __repr__(self):
        # Ops and Types read best as their str (``Add``, ``Scale{factor=2}``) in lists
        # and error messages; without a custom __str__, keep object's repr (and avoid
        # the str -> repr -> str loop).
        if type(self).__str__ is object.__str__:
            return object.__repr__(self)
        return str(self)


@functools.cache
def _slot_names(cls) -> tuple:
    """Every ``__slots__`` entry along the MRO of ``cls`` (for pickling slotted classes);
    kept per class: pickling a graph asks it once per Variable and Apply."""
    names = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        names.extend(s for s in slots if s not in ("__weakref__", "__dict__") and s not in names)
    return tuple(names)


class Scratchpad:
    """A bag of attributes (``var.tag``) where rewrites and users leave notes."""

    def clear(self):
        self.__dict__.clear()

    def __update__(self, other):
        self.__dict__.update(other.__dict__)
        return self

    def __copy__(self):
        # copy.copy's generic reduce path costs more than the rest of a node clone.
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    def __repr__(self):
        return f"scratchpad{self.__dict__}"

    __str__ = __repr__

    def info(self):
        print(f"<theano_dag.graph.utils.Scratchpad at {id(self)}>")
        for k, v in self.__dict__.items():
            print(f"  {k}: {v}")


class ValidatingScratchpad(Scratchpad):
    """A Scratchpad that passes one attribute (the test value) through a filter."""

    def __init__(self, attr, attr_filter):
        super().__init__()
        object.__setattr__(self, "attr", attr)
        object.__setattr__(self, "attr_filter", attr_filter)

    def __setattr__(self, attr, obj):
        if getattr(self, "attr", None) == attr:
            obj = self.attr_filter(obj)
        object.__setattr__(self, attr, obj)


class InconsistencyError(Exception):
    """Raised (usually by a Feature) when a change would leave the graph invalid."""


# The pauses in progress, in every thread: the collector's switch is the process's, so
# one thread's pause must not end another's, nor read "off" as the program's own choice
# when it is only another thread's pause (the last pause to end would then leave it off).
_pause_lock = threading.Lock()
_pause_depth = 0
_pause_restore = False  # whether the collector was on when the first pause began

# CPython has a full collection once the oldest generation has grown by a quarter since
# the last one, counting what its own collections move there: the objects ``promote``
# moves are not counted, so a program compiling functions in a loop would never have
# one, and the functions it drops (in reference cycles, as Theano's are) would stay for
# good. The same rule on the heap: once the objects promoted since the last full
# collection outnumber what CPython's thresholds let be made between two (700 * 10 * 10
# by default), a pause measures the heap; once they outnumber that again and the heap has
# grown by a quarter since, a pause starts with a full collection. The heap's size is the
# interpreter's memory blocks, not the oldest generation's objects: counting those is a
# walk of every object (10 ms in the first call after a 3,000-node compile), the blocks a
# walk of the allocator's pools (tens of microseconds).
_blocks_at_full = None  # the interpreter's blocks when first measured since the last full one
_promoted = 0  # objects promoted since (net of those freed: gc.get_count()'s first entry)


def _on_collection(phase, info):
    global _blocks_at_full, _promoted
    if phase == "stop" and info["generation"] == 2:
        _blocks_at_full, _promoted = None, 0


gc.callbacks.append(_on_collection)


def _collect_if_due():
    global _blocks_at_full, _promoted
    t0, t1, t2 = gc.get_threshold()
    if not t0 or _promoted <= t0 * t1 * t2:  # t0 == 0: automatic collection off
        return
    if _blocks_at_full is None:
        _blocks_at_full, _promoted = sys.getallocatedblocks(), 0
    elif sys.getallocatedblocks() - _blocks_at_full > _blocks_at_full // 4:
        gc.collect()  # (resets the counts, through _on_collection)


@contextlib.contextmanager
def gc_paused(promote: bool = False):
    """No cyclic garbage collection within the block (then back as it was).

    Compiling makes and drops many small graph objects, and each burst of them starts
    one of CPython's collections, which walk every object alive, the user's whole graph
    included: pausing them took a 5,000-node graph's ``function`` from 1.9 s to 1.5 s.
    What the compile leaves behind is collected after, as usual.

    With ``promote``, the objects made within the block (and the others the collector
    had not yet moved to its oldest generation) go straight there at the end, as
    ``gc.freeze`` then ``gc.unfreeze`` do, without being examined: otherwise the first
    collection after the block walks every one of them, the compiled graph and its
    plans, which all stay alive, to free the few the compile dropped in cycles (an
    eighth of a 3,000-node graph's ``function`` time). Those few wait for the next full
    collection instead, which starts a later pause once the heap has grown by a
    quarter since the last (CPython's own rule, which does not count the objects moved
    so). Nothing is moved when the block did not switch the collector off itself
    (nested, or off already) or when the program has frozen objects (unfreezing would
    release them).

    Blocks may overlap across threads (the Dask engine's workers load kernels while
    another thread compiles): the collector is back on when the last of them ends, if it
    was on when the first began.

    >>> import gc
    >>> with gc_paused():
    ...     gc.isenabled()
    False
    """
    global _pause_depth, _pause_restore, _promoted
    with _pause_lock:
        if _pause_depth == 0:
            _pause_restore = gc.isenabled()
            if _pause_restore:
                _collect_if_due()
            gc.disable()
        _pause_depth += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pause_depth -= 1
            if _pause_depth == 0 and _pause_restore:
                if promote and not gc.get_freeze_count():
                    # The objects made since the last collection or promotion (freed
                    # ones deducted), which these two calls move without a walk: every
                    # tracked object into the permanent generation, then into the oldest.
                    _promoted += gc.get_count()[0]
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


@contextlib.contextmanager
def gc_as_set():
    """Within the block, the collector on or off as the program set it, not as a pause
    of :func:`gc_paused` left it: for an import that records whether the collector is on.

    ``dask.array`` does (its slicing turns the collector off for each slice and back on
    only if it was on when the module was imported): imported during a compile, it
    would leave the collector off for good after the first slice.

    >>> import gc
    >>> with gc_paused(), gc_as_set():
    ...     gc.isenabled()
    True
    """
    with _pause_lock:
        resume = _pause_depth > 0 and _pause_restore and not gc.isenabled()
        if resume:
            gc.enable()
    try:
        yield
    finally:
        if resume:
            with _pause_lock:
                if _pause_depth > 0:
                    gc.disable()


def user_location() -> str | None:
    """``"file:line"`` of the first frame of the current stack outside theano_dag (the
    user's line that led here), or None when there is none: Theano's default name of a
    compiled function.

    >>> user_location().startswith("<doctest")
    True
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return None if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes ``warnings.warn``, called by the caller of this
    function, point at the first frame outside theano_dag (the user's line)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


def user_stack(limit: int, skip: int = 0) -> list:
    """The innermost ``limit`` frames of the current stack that are not theano_dag's,
    outermost first, as Theano's ``tag.trace`` keeps them: ``(filename, lineno, name,
    line)`` tuples (``traceback.format_list`` prints them), whose ``line`` is None until
    printed, so that keeping one stack per node costs little. ``skip``: how many frames
    above the caller's are theano_dag's own, passed over without being looked at.

    The list is shared by every call from the same lines (a graph's nodes are mostly
    made by a few lines, in loops): do not modify it. Sharing spares the tuples, and the
    garbage collector the objects, of one stack per node.

    >>> a, b = user_stack(2), user_stack(2)  # one line: one stack
    >>> a[-1][2], a is b
    ('<module>', True)
    """
    # The walk that finds the stack already made keys it by each frame's instruction
    # offset (f_lasti), which the frame holds, not by its line number, which the frame
    # works out from its code's line table on each read; an offset not met before is
    # looked up again by lines, so that a line's stack stays one list.
    # sys._getframe(depth) makes the frame object of the frame asked for only: the
    # skipped ones (an Op's __call__ and add_tag_trace, per node) get none.
    key: list = []
    frame = sys._getframe(1 + skip)
    package = _PACKAGE_DIR
    n = 0
    while frame is not None and n < limit:
        code = frame.f_code
        if not code.co_filename.startswith(package):
            key.append(id(code))
            key.append(-1 - frame.f_lasti)  # negative: never a line number of a line key
            n += 1
        frame = frame.f_back
    key_t = tuple(key)
    entry = _STACKS.get(key_t)
    if entry is not None:
        return entry[1]
    # Walked again (once per distinct offsets) for the line numbers and the code
    # objects themselves, which the cache keeps so that their ids, in its keys, stay
    # theirs.
    codes, frames, line_key = [], [], []
    frame = sys._getframe(1 + skip)
    while frame is not None and len(frames) < limit:
        code = frame.f_code
        if not code.co_filename.startswith(package):
            lineno = frame.f_lineno
            codes.append(code)
            frames.append((code.co_filename, lineno, code.co_name, None))
            line_key.append(id(code))
            line_key.append(lineno)
        frame = frame.f_back
    frames.reverse()
    if len(_STACKS) >= _STACKS_MAX:
        _STACKS.clear()
    line_t = tuple(line_key)
    entry = _STACKS.get(line_t)
    if entry is None:
        entry = _STACKS[line_t] = (codes, frames)
    _STACKS[key_t] = entry
    return entry[1]


# Stacks ``user_stack`` made, under two keys each: (ids of the code objects, line
# numbers) and (ids of the code objects, -1 - instruction offsets) -> (the code objects,
# the stack). Bounded: a long session meets many lines.
_STACKS: dict = {}
_STACKS_MAX = 4096


# > 0 while nodes are made by the compiler, not by the user (see tag_trace_paused).
_TRACE_PAUSED = [0]


@contextlib.contextmanager
def tag_trace_paused():
    """Nodes made within the block get no ``tag.trace``: the rewrites a function's
    optimizer runs make nodes whose user stack is only the ``function(...)`` call; they
    get the stacks of the nodes they replace instead (``FunctionGraph.replace`` and
    ``copy_stack_trace``)."""
    _TRACE_PAUSED[0] += 1
    try:
        yield
    finally:
        _TRACE_PAUSED[0] -= 1


def add_tag_trace(variables, limit: int, skip: int = 0):
    """Keep in each of ``variables``' ``tag.trace`` the user's stack where they are made
    (Theano's ``tag.trace``: a list of stacks, one here; a rewrite gives what it makes
    the stacks of what it replaces, ``copy_stack_trace``). ``limit`` 0 keeps nothing;
    ``skip``: how many frames above the caller's are theano_dag's (``user_stack``'s).

    >>> from theano_dag.graph.type import Generic
    >>> v = Generic()("v")
    >>> _ = add_tag_trace([v], 3)
    >>> stack = v.tag.trace[0]
    >>> 1 <= len(stack) <= 3 and stack[-1][2]
    '<module>'
    """
    if limit > 0 and not _TRACE_PAUSED[0]:
        stack = user_stack(limit, skip + 1)
        # One list of stacks per distinct stack, shared as the stack itself is (nodes
        # only ever get new lists, copy_stack_trace).
        last = _LAST_TRACE
        if last[0] is stack:
            stacks = last[1]
        else:
            stacks = [stack]
            last[0], last[1] = stack, stacks
        for v in variables:  # _set_trace's steps, per node made
            if getattr(v, "_tag", False) is None:
                v._trace = stacks
            else:
                v.tag.trace = stacks
    return variables


def _set_trace(var, stacks):
    """``var.tag.trace = stacks``, kept aside in the Variable's ``_trace`` while it has no
    tag (the tag is made when asked for, with the trace in it)."""
    if getattr(var, "_tag", False) is None:
        var._trace = stacks
    else:
        var.tag.trace = stacks


# The last stack ``add_tag_trace`` recorded, and the list of stacks it gave nodes.
_LAST_TRACE: list = [None, None]


def get_stack_trace(variable) -> list:
    """The stacks kept for ``variable`` (``[]`` when none)."""
    tag = getattr(variable, "_tag", None)
    if tag is None:
        return list(getattr(variable, "_trace", None) or [])
    return list(getattr(tag, "trace", None) or [])


def copy_stack_trace(from_var, to_var):
    """Give ``to_var`` (a variable or a list) the stacks of ``from_var`` (one or a list),
    so that an error in the node a rewrite made names the lines of the nodes it replaced.

    >>> from theano_dag.graph.type import Generic
    >>> a, b = Generic()("a"), Generic()("b")
    >>> a.tag.trace = [["frame"]]
    >>> copy_stack_trace(a, b)
    >>> b.tag.trace
    [['frame']]
    """
    sources = from_var if isinstance(from_var, (list, tuple)) else [from_var]
    stacks: list = []
    for v in sources:
        for stack in get_stack_trace(v):
            if stack not in stacks:
                stacks.append(stack)
    if not stacks:
        return
    targets = to_var if isinstance(to_var, (list, tuple)) else [to_var]
    for v in targets:
        _set_trace(v, list(stacks))
