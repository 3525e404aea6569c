"""The memory planner: Owl's Algorithm 1, as a pure function over value ids and byte sizes.

The planner knows nothing about graphs, ops or arrays. A caller (the CPU or the
OpenCL engine) describes one evaluation as a list of :class:`PlanNode` in
topological order; each node reads some values and writes others, and every
value is named by a hashable id. From that and the byte size of each value,
:func:`plan_memory` decides which values share which flat byte buffers
("blocks"), so that an engine can preallocate a few blocks once and run every
later call without allocating.

The model, in the words of the pebble game (Owl, "Functional Design of
Computation Graph", section 3): a block is a pebble that has a size; placing a
pebble is writing a value; sliding a pebble from an input to the node's output
is an in-place operation; a pebble comes back to the pool when the last reader
of its value has run. Every node runs exactly once (minimal time), so the plan
never recomputes a value to save space.

Kinds of values:

* *pooled* values get a block: every value some node produces that is neither
  pinned nor a view. A pooled value occupies the first ``size`` bytes of its
  block (offset 0): the engine takes ``block[:size]`` and reshapes it.
* *pinned* values never share memory and never enter the pool: graph inputs,
  constants, outputs handed to the user, shared variables and update sources.
  The engine gives them storage of their own. A value consumed by some node but
  produced by none is external, and is treated as pinned.
* *views* alias another value (their *base*): ``x.T``, a reshape, a slice. A
  view gets no block; it keeps its base alive until the view's own last reader
  has run. A pinned view (say an output that is ``x.T``) pins its root base.

Numbers a plan reports (all in bytes, each pooled value's size rounded up to
``alignment``):

* ``planned_bytes``: the sum of the block sizes, what the engine allocates.
* ``eager_peak_bytes``: what an evaluation that keeps every intermediate
  (pooled value) alive until the end needs: the sum of their sizes.
* ``live_peak_bytes``: the largest total, over the nodes, of the pooled values
  that must hold distinct bytes while that node runs: its outputs and every
  earlier value it or a later node still reads, less, for each output, the
  smaller of its size and that of the largest input it may overwrite in place
  (one read for the last time here). No plan can do with less, so
  ``live_peak_bytes <= planned_bytes <= eager_peak_bytes`` always holds.

Complexity: O(n log b) comparisons for n values and b blocks (best fit is a
bisection in the sorted list of free blocks; putting a block back shifts that
list, a memmove that is negligible next to the Python work), plus O(n) passes
over the nodes. A 100,000-node chain plans in well under a second.

:func:`check_plan` verifies any plan independently (tests and DebugMode use it).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["DEFAULT_ALIGNMENT", "MemoryPlan", "PlanNode", "check_plan", "plan_memory"]

# A cache line, and enough for aligned SIMD loads in generated kernels.
DEFAULT_ALIGNMENT = 64


def _id_tuple(ids, what: str, node_name: str) -> tuple:
    where = f"PlanNode {node_name!r}" if node_name else "PlanNode"
    if isinstance(ids, (str, bytes)):
        raise TypeError(
            f"{where}: {what} must be a tuple of value ids, got the string {ids!r} "
            f"(write ({ids!r},) for a single id)"
        )
    try:
        ids = tuple(ids)
    except TypeError:
        raise TypeError(
            f"{where}: {what} must be a tuple of value ids, got {type(ids).__name__}"
        ) from None
    # Hashing each id, not isinstance(v, Hashable): the ABC check costs several times
    # more, and an engine plans one node per step of a function with thousands of steps.
    for i, v in enumerate(ids):
        try:
            hash(v)
        except TypeError:
            raise TypeError(
                f"{where}: value ids must be hashable; {what}[{i}] is a {type(v).__name__}"
            ) from None
    return ids


@dataclass(frozen=True)
class PlanNode:
    """One step of an evaluation, as the memory planner sees it.

    ``outputs`` are the ids of the values the node writes, ``inputs`` the ids
    it reads (an id may repeat, as in ``x * x``). ``inplace`` lists the
    ``(output, input)`` pairs the op allows to share memory: the output may be
    written over that input. The planner uses a pair only when the input is a
    pooled value whose last reader is this node. ``name`` only serves messages.

    >>> PlanNode(outputs=("y",), inputs=("x", "x"), inplace=(("y", "x"),), name="sqr")
    PlanNode(outputs=('y',), inputs=('x', 'x'), inplace=(('y', 'x'),), name='sqr')
    >>> PlanNode(outputs=("y",), inputs=("x",), inplace=(("y", "z"),))
    Traceback (most recent call last):
    ...
    ValueError: PlanNode: inplace pair ('y', 'z') names input 'z', which is not among its ...
    """

    outputs: tuple
    inputs: tuple = ()
    inplace: tuple = ()
    name: str = ""

    def __post_init__(self):
        where = f"PlanNode {self.name!r}" if self.name else "PlanNode"
        outputs = _id_tuple(self.outputs, "outputs", self.name)
        inputs = _id_tuple(self.inputs, "inputs", self.name)
        if len(set(outputs)) != len(outputs):
            raise ValueError(f"{where}: outputs {outputs!r} name the same value twice")
        pairs = []
        for pair in _id_tuple(self.inplace, "inplace", self.name):
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise ValueError(
                    f"{where}: inplace entries must be (output, input) pairs, " f"got {pair!r}"
                )
            out, inp = pair
            if out not in outputs:
                raise ValueError(
                    f"{where}: inplace pair {pair!r} names output {out!r}, "
                    f"which is not among its outputs {outputs!r}"
                )
            if inp not in inputs:
                raise ValueError(
                    f"{where}: inplace pair {pair!r} names input {inp!r}, "
                    f"which is not among its inputs {inputs!r}"
                )
            pairs.append(pair)
        object.__setattr__(self, "outputs", outputs)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "inplace", tuple(pairs))

    @classmethod
    def trusted(cls, outputs: tuple, inputs: tuple, inplace: tuple = (), name: str = ""):
        """A PlanNode made without the checks of the constructor, for an engine whose
        steps give tuples of distinct hashable outputs and inplace pairs of their own
        outputs and inputs (it plans one node per step, thousands per function).

        >>> PlanNode.trusted(("y",), ("x",), (("y", "x"),), "neg") == PlanNode(
        ...     outputs=("y",), inputs=("x",), inplace=(("y", "x"),), name="neg")
        True
        """
        node = object.__new__(cls)
        # Its fields set in its __dict__ (frozen: no __setattr__), half the time of four
        # object.__setattr__ calls.
        d = node.__dict__
        d["outputs"] = outputs
        d["inputs"] = inputs
        d["inplace"] = inplace
        d["name"] = name
        return node


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


class _LivePeak:
    """``MemoryPlan.live_peak_bytes``: a number given to the constructor, or, in a plan
    from :func:`plan_memory`, computed on first read (an engine plans at every new
    signature and seldom asks: a profile's summary and tests do)."""

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, plan, owner=None):
        if plan is None:
            return 0  # the field's default
        value = plan.__dict__[self.slot]
        if type(value) is not int:  # (graph, aligned sizes) from plan_memory
            value = plan.__dict__[self.slot] = _live_peak(*value)
        return value

    def __set__(self, plan, value):
        plan.__dict__[self.slot] = value


@dataclass
class MemoryPlan:
    """Where every pooled value lives, and what that saves.

    ``blocks[i]`` is the size in bytes of block ``i``; ``assignment`` maps each
    pooled value to ``(block index, byte offset)`` (the offset is 0 in plans
    from :func:`plan_memory`); pinned values, views and external values have no
    entry. ``inplace`` maps each output that the plan writes over one of its
    inputs to that input. ``pinned`` holds the produced values that need
    storage of their own (caller-pinned, plus the root bases of pinned views).
    ``views`` is the caller's view -> base mapping. See the module docstring for
    what ``eager_peak_bytes`` and ``live_peak_bytes`` measure.

    >>> plan = MemoryPlan(blocks=[128, 64], assignment={"a": (0, 0), "b": (1, 0)})
    >>> plan.n_blocks, plan.planned_bytes
    (2, 192)
    """

    blocks: list
    assignment: dict
    alignment: int = DEFAULT_ALIGNMENT
    inplace: dict = field(default_factory=dict)
    pinned: frozenset = frozenset()
    views: dict = field(default_factory=dict)
    eager_peak_bytes: int = 0
    live_peak_bytes: int = _LivePeak()

    @property
    def n_blocks(self) -> int:
        """How many blocks the engine allocates."""
        return len(self.blocks)

    @property
    def planned_bytes(self) -> int:
        """Bytes in all blocks together."""
        return sum(self.blocks)

    def summary(self) -> str:
        """One line for a profile: blocks, bytes planned, and the two yardsticks.

        >>> node = PlanNode(outputs=("y",), inputs=("x",))
        >>> plan_memory([node], {"y": 4096}, pinned=("x",)).summary()
        '1 block, 4.0 KiB planned for 1 value (0 in place); keep-all 4.0 KiB, live peak 4.0 KiB'
        """
        nb, nv = self.n_blocks, len(self.assignment)
        return (
            f"{nb} block{'s' * (nb != 1)}, {_fmt_bytes(self.planned_bytes)} planned for "
            f"{nv} value{'s' * (nv != 1)} ({len(self.inplace)} in place); "
            f"keep-all {_fmt_bytes(self.eager_peak_bytes)}, "
            f"live peak {_fmt_bytes(self.live_peak_bytes)}"
        )


def _aligned(size: int, alignment: int) -> int:
    return -(-size // alignment) * alignment


class _Graph:
    """The caller's description, validated and indexed (shared by planner and checker)."""

    def __init__(self, nodes, sizes, pinned, views):
        # (An engine plans one node per step of every plan: loops without generators.)
        self.nodes = nodes = list(nodes)
        for k, node in enumerate(nodes):
            if type(node) is not PlanNode and not isinstance(node, PlanNode):
                raise TypeError(f"nodes[{k}] must be a PlanNode, got {type(node).__name__}")
        producer: dict = {}
        for k, node in enumerate(nodes):
            for v in node.outputs:
                if v in producer:
                    raise ValueError(
                        f"value {v!r} is produced twice: by "
                        f"{self.label(producer[v])} and by {self.label(k)}"
                    )
                producer[v] = k
        get = producer.get
        for k, node in enumerate(nodes):
            for v in node.inputs:
                j = get(v)
                if j is not None and j >= k:
                    raise ValueError(
                        f"{self.label(k)} reads value {v!r} before {self.label(j)} produces it; "
                        "nodes must be given in topological order"
                    )
        self.producer = producer

        views = {} if views is None else dict(views)
        known = set(producer)
        if views:  # the values read, for the check of the views' bases
            for node in nodes:
                known.update(node.inputs)
        for view, base in views.items():
            if view not in producer:
                raise ValueError(f"view {view!r} is not produced by any node")
            if base not in known:
                raise ValueError(f"base {base!r} of view {view!r} is not a value of the graph")
            j = producer.get(base)
            if j is not None and j >= producer[view]:
                raise ValueError(
                    f"base {base!r} of view {view!r} is produced by {self.label(j)}, "
                    f"not before the view's {self.label(producer[view])}"
                )
        self.views = views
        # Bases are produced strictly before their views, so this order sees a base first.
        self.root: dict = {}
        self.view_order = sorted(views, key=producer.__getitem__)
        for view in self.view_order:
            base = views[view]
            self.root[view] = self.root.get(base, base)

        if isinstance(pinned, (str, bytes)):
            raise TypeError(f"pinned must be a collection of value ids, got the string {pinned!r}")
        pinned = set(pinned)
        eff = {v for v in pinned if v in producer}
        # A pinned view pins what it aliases: the user may hold it across calls.
        eff.update(self.root[v] for v in pinned if v in views and self.root[v] in producer)
        self.pinned = frozenset(eff)

        pinned = self.pinned
        self.pooled = [
            v for node in self.nodes for v in node.outputs if v not in views and v not in pinned
        ]
        self.size: dict = {}
        for v in self.pooled:
            s = sizes.get(v)
            if type(s) is int and s >= 0:  # (nearly always)
                self.size[v] = s
                continue
            if v not in sizes:
                raise ValueError(
                    f"no size given for value {v!r} " f"(produced by {self.label(producer[v])})"
                )
            s = sizes[v]
            try:
                if isinstance(s, bool):
                    raise TypeError
                s = operator.index(s)
            except TypeError:
                raise ValueError(
                    f"size of value {v!r} must be an integer number of bytes, " f"got {s!r}"
                ) from None
            if s < 0:
                raise ValueError(f"size of value {v!r} must be >= 0 bytes, got {s}")
            self.size[v] = s

    def label(self, k: int) -> str:
        name = self.nodes[k].name
        return f"node {k} ({name})" if name else f"node {k}"

    def lifetimes(self) -> dict:
        """Index of the last node that needs each produced value (directly or via a view).

        A value nobody reads ends at its own node; a pinned view ends after the last
        node. Computed from last-use indices, independently of the planner's counts.
        """
        n = len(self.nodes)
        end = dict(self.producer)
        for k, node in enumerate(self.nodes):
            for v in node.inputs:
                if v in end:
                    end[v] = k
        for v in self.views:
            if v in self.pinned:
                end[v] = n
        for view in reversed(self.view_order):
            base = self.views[view]
            if base in end:
                end[base] = max(end[base], end[view])
        return end


def _live_peak(g: _Graph, size: dict) -> int:
    # While node k runs, every pooled value born at or before k whose lifetime reaches k
    # holds its own bytes, except that an output may overwrite one input dying at k where
    # allowed: the most such a pair can save is the smaller of the two sizes. Taking each
    # output's best pair over-counts the saving, so the result stays a lower bound.
    n = len(g.nodes)
    end = g.lifetimes()
    diff = [0] * (n + 1)
    for v in g.pooled:
        diff[g.producer[v]] += size[v]
        diff[min(end[v], n - 1) + 1] -= size[v]
    peak = running = 0
    views, root = g.views, g.root
    for k, node in enumerate(g.nodes):
        running += diff[k]
        saving = 0
        if node.inplace:
            via_view = {root[v] for v in node.inputs if v in views} if views else ()
            best: dict = {}
            for w, u in node.inplace:
                if w in size and u in size and end[u] == k and u not in via_view:
                    best[w] = max(best.get(w, 0), min(size[w], size[u]))
            saving = sum(best.values())
        if running - saving > peak:
            peak = running - saving
    return peak


def plan_memory(
    nodes: Iterable[PlanNode],
    sizes: Mapping,
    pinned: Iterable = (),
    views: Mapping | None = None,
    alignment: int = DEFAULT_ALIGNMENT,
) -> MemoryPlan:
    """Plan the blocks of one evaluation with Owl's Algorithm 1.

    ``nodes`` are in topological order; ``sizes`` maps each produced value to
    its size in bytes (only pooled values need one); ``pinned`` lists values
    that never share memory (ids the graph does not use are ignored);
    ``views`` maps each view to the value it aliases; sizes are rounded up to
    ``alignment`` bytes.

    Walking the nodes in order with a reference count per value, each pooled
    output of a node gets, in this order of preference:

    1. the block of an input it may overwrite (an allowed ``inplace`` pair)
       whose last reader is this node, that is pooled, and that no view read by
       this node aliases (best fit among several such inputs; the block grows
       if the output is bigger);
    2. the smallest free block at least as big (bisection in the sorted pool);
    3. the largest free block, grown to fit;
    4. a new block.

    Inputs whose last reader is the node go back to the pool only after all
    its outputs are placed, so an op never writes over an input it was not
    allowed to; outputs nobody reads go back right after their node.

    A chain of three elementwise ops where the middle one may work in place;
    ``x`` is a graph input and ``c`` the output, both pinned:

    >>> nodes = [
    ...     PlanNode(outputs=("a",), inputs=("x",)),
    ...     PlanNode(outputs=("b",), inputs=("a",), inplace=(("b", "a"),)),
    ...     PlanNode(outputs=("c",), inputs=("b",)),
    ... ]
    >>> plan = plan_memory(nodes, {"a": 800, "b": 800}, pinned=("x", "c"))
    >>> plan.blocks, plan.assignment, plan.inplace
    ([832], {'a': (0, 0), 'b': (0, 0)}, {'b': 'a'})
    >>> plan.eager_peak_bytes, plan.live_peak_bytes
    (1664, 832)
    """
    try:
        ok = not isinstance(alignment, bool) and operator.index(alignment) > 0
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"alignment must be a positive integer number of bytes, got {alignment!r}")
    g = _Graph(nodes, sizes, pinned, views)
    size = {v: _aligned(s, alignment) for v, s in g.size.items()}
    views, root, pinned_set = g.views, g.root, g.pinned

    # refs[v]: readers of v still to run, plus one per view that still aliases v.
    refs = dict.fromkeys(g.producer, 0)
    for node in g.nodes:
        for v in node.inputs:
            if v in refs:
                refs[v] += 1
    for base in views.values():
        if base in refs:
            refs[base] += 1

    def drop(v):
        """v's count reached zero: return the pooled value that dies with it, if any."""
        while v in views and v not in pinned_set:
            base = views[v]
            if base not in refs:  # aliases an external input: nothing to free
                return None
            refs[base] -= 1
            if refs[base]:
                return None
            v = base
        return None if v in pinned_set or v in views else v

    blocks: list[int] = []
    free: list[tuple[int, int]] = []  # (size, block index), sorted: the reusable pool
    block_of: dict = {}
    inplace: dict = {}

    def find_best_block(s: int) -> int:
        i = bisect.bisect_left(free, (s, -1))
        if i < len(free):  # smallest free block that fits
            return free.pop(i)[1]
        if free:  # none fits: grow the largest free one
            b = free.pop()[1]
            blocks[b] = s
            return b
        blocks.append(s)
        return len(blocks) - 1

    # (Once per node of every plan: the sets of a node made only when it has in-place
    # pairs, the lookups of a value done once.)
    for node in g.nodes:
        dying = []
        for v in node.inputs:
            r = refs.get(v)
            if r is not None:
                refs[v] = r = r - 1
                if r == 0:
                    # (A value that is no view, most of them, dies itself: no call.)
                    if v in views:
                        dead = drop(v)
                        if dead is not None:
                            dying.append(dead)
                    elif v not in pinned_set:
                        dying.append(v)
        pairs = node.inplace
        if pairs:
            # An input also read through a view at this node must not be overwritten.
            candidates = set(dying)
            if views:
                candidates.difference_update([root[v] for v in node.inputs if v in views])
            taken = set()
        for out in node.outputs:
            s = size.get(out)
            if s is None:
                continue
            best = None
            if pairs:
                best_key = None
                for o, inp in pairs:
                    if o == out and inp in candidates:
                        bs = blocks[block_of[inp]]
                        key = (0, bs) if bs >= s else (1, -bs)
                        if best_key is None or key < best_key:
                            best, best_key = inp, key
            if best is not None:
                candidates.discard(best)
                taken.add(best)
                inplace[out] = best
                b = block_of[best]
                blocks[b] = max(blocks[b], s)
            else:
                b = find_best_block(s)
            block_of[out] = b
        for v in dying:
            if not pairs or v not in taken:  # a block handed to an output in place stays busy
                bisect.insort(free, (blocks[block_of[v]], block_of[v]))
        for out in node.outputs:
            if refs[out] == 0:
                dead = drop(out) if out in views else None if out in pinned_set else out
                if dead is not None:
                    bisect.insort(free, (blocks[block_of[dead]], block_of[dead]))

    plan = MemoryPlan(
        blocks=blocks,
        assignment={v: (block_of[v], 0) for v in g.pooled},
        alignment=alignment,
        inplace=inplace,
        pinned=g.pinned,
        views=dict(views),
        eager_peak_bytes=sum(size.values()),
    )
    plan.live_peak_bytes = (g, size)  # computed when read (_LivePeak)
    return plan


def check_plan(
    nodes: Iterable[PlanNode],
    sizes: Mapping,
    plan: MemoryPlan,
    pinned: Iterable | None = None,
    views: Mapping | None = None,
) -> None:
    """Raise ValueError unless ``plan`` is safe for these nodes; return None if it is.

    Safe means: every pooled value has a block and fits in it at its offset;
    pinned values, views and external values have none; every in-place reuse
    the plan records is one the node allows; and no two values whose lifetimes
    overlap share a byte of a block. The one overlap allowed is the in-place
    one: at the node where input ``u`` is read for the last time, an output
    ``w`` may start at ``u``'s offset when ``(w, u)`` is an allowed pair, ``u``
    is a direct input of that node, and no view of ``u`` is read there.

    Lifetimes are recomputed here from last-use indices, independently of the
    planner's reference counts. ``pinned`` and ``views`` default to those the
    plan recorded. The messages name the values at fault.

    >>> nodes = [PlanNode(outputs=("a",), inputs=("x",)),
    ...          PlanNode(outputs=("b",), inputs=("a", "x"))]
    >>> sizes = {"a": 64, "b": 64}
    >>> check_plan(nodes, sizes, plan_memory(nodes, sizes, pinned=("x",)))
    >>> bad = MemoryPlan(blocks=[64], assignment={"a": (0, 0), "b": (0, 0)})
    >>> check_plan(nodes, sizes, bad, pinned=("x",))
    Traceback (most recent call last):
    ...
    ValueError: values 'a' and 'b' share bytes of block 0 while both are live: 'a' lives ...
    """
    g = _Graph(
        nodes,
        sizes,
        plan.pinned if pinned is None else pinned,
        plan.views if views is None else views,
    )
    end = g.lifetimes()
    pooled = set(g.pooled)
    for v in plan.assignment:
        if v not in pooled:
            if v in g.views:
                why = "a view"
            elif v in g.pinned:
                why = "pinned"
            elif v in g.producer:
                why = "not a pooled value"
            else:
                why = "not produced by any node"
            raise ValueError(f"value {v!r} is {why} and must not have a block in the plan")
    n_blocks = len(plan.blocks)
    by_block: dict = {}
    for v in g.pooled:
        if v not in plan.assignment:
            raise ValueError(
                f"value {v!r} (produced by {g.label(g.producer[v])}) " "has no block in the plan"
            )
        b, off = plan.assignment[v]
        if not 0 <= b < n_blocks:
            raise ValueError(
                f"value {v!r} is assigned block {b}, but the plan has " f"{n_blocks} blocks"
            )
        if off < 0 or off + g.size[v] > plan.blocks[b]:
            raise ValueError(
                f"value {v!r} ({g.size[v]} bytes at offset {off}) does not fit "
                f"block {b} of {plan.blocks[b]} bytes"
            )
        by_block.setdefault(b, []).append((g.producer[v], v))

    for out, inp in plan.inplace.items():
        k = g.producer.get(out)
        if k is None or (out, inp) not in g.nodes[k].inplace:
            where = g.label(k) if k is not None else "no node"
            raise ValueError(
                f"the plan writes {out!r} over {inp!r} in place, " f"which {where} does not allow"
            )

    def inplace_ok(u, w) -> bool:
        k = g.producer[w]
        node = g.nodes[k]
        return (
            g.producer[u] < k == end[u]
            and (w, u) in node.inplace
            and u in node.inputs
            and plan.assignment[u][1] == plan.assignment[w][1]
            and not any(v in g.views and g.root[v] == u for v in node.inputs)
        )

    for b, items in by_block.items():
        items.sort(key=operator.itemgetter(0))
        active: list = []  # values of this block whose lifetime reaches the current birth
        for birth, w in items:
            active = [u for u in active if end[u] >= birth]
            w_lo = plan.assignment[w][1]
            w_hi = w_lo + g.size[w]
            for u in active:
                u_lo = plan.assignment[u][1]
                u_hi = u_lo + g.size[u]
                overlap = u_lo < w_hi and w_lo < u_hi and u_hi > u_lo and w_hi > w_lo
                if overlap and not inplace_ok(u, w):
                    raise ValueError(
                        f"values {u!r} and {w!r} share bytes of block {b} while both are live: "
                        f"{u!r} lives from {g.label(g.producer[u])} to {_end_label(g, end[u])}, "
                        f"{w!r} from {g.label(birth)} to {_end_label(g, end[w])}"
                    )
            active.append(w)


def _end_label(g: _Graph, k: int) -> str:
    return g.label(k) if k < len(g.nodes) else "the end"
