"""A linked graph as steps, and its per-signature plans with their generated code.

:class:`Program` is built once per compiled function: the run order, constant
folding of small all-constant nodes, and the :class:`~.impls.Step` lists of each
node. For each input-shape signature, :meth:`Program.plan` infers every shape,
decides where each value lives, asks the memory planner for blocks, and
generates straight-line Python source (one or a few lines per node) that
:mod:`.codegen` compiles. Plans are cached per signature by the linker.

Where a value lives (its *category*):

* ``pooled``: in a planned block (``b3 = block[:n].view(dtype).reshape(shape)``);
* ``fresh``: numpy allocates it (small outputs and values, ops without an
  ``out=`` form, values whose shape is unknown before the run);
* ``outblk``: an output (or what an output views) in a block each call allocates
  afresh: the dead values before it share that block, so a chain that ends in an
  output needs no memory besides the output;
* ``alloc``: a fresh array the step writes into (a small output whose natural
  shape is not its broadcast shape), bound to the value's name before the step;
* ``dyn``: the result of a C kernel whose shape depends on data, which its inputs'
  shapes give (each dimension's length from an input that does not declare it
  broadcastable): a fresh array of that shape, bound before the step as ``alloc``'s,
  so that the kernel runs in a segment;
* ``own``: a buffer of its own kept by the plan (an ``Out(borrow=True)`` output,
  every value under ``incremental``);
* ``update``: written straight into the storage of the shared variable it
  updates (Owl's update edges);
* ``view``: aliases an input of its step.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from theano_dag.engines.basic import creation_lines, raise_with_op
from theano_dag.engines.cpu.emit.impls import Temp, call_steps, make_steps
from theano_dag.engines.cpu.plan.shapes import ShapeError, broadcast_shapes, infer_shapes
from theano_dag.engines.memory import MemoryPlan, PlanNode, _fmt_bytes, check_plan, plan_memory
from theano_dag.graph.basic import Constant

__all__ = ["Program", "Plan", "DEFAULT_MIN_PLAN_BYTES", "FOLD_MAX_BYTES"]

# Below this size numpy's own small-array cache allocates faster than an ``out=``
# argument is parsed, so such values are left to numpy (measured crossover ~8 KiB).
DEFAULT_MIN_PLAN_BYTES = 16384
# Nodes on constants only are computed once at link time when their result is this small.
FOLD_MAX_BYTES = 1 << 16
ALIGN = 64


def _is_tensor_type(t):
    return getattr(t, "dtype", None) is not None and getattr(t, "ndim", None) is not None


def _nbytes(shape, dtype):
    n = _ITEMSIZE.get(dtype)
    if n is None:  # (asked of every value of every plan: np.dtype looked up once a dtype)
        n = _ITEMSIZE[dtype] = np.dtype(dtype).itemsize
    for s in shape:
        n *= s
    return n


_ITEMSIZE: dict = {}


# The planner's names of the steps, ``str(idx)``, made once per process (every plan
# names its steps so).
_STEP_NAMES: list = []


def _step_names(n):
    """``_STEP_NAMES`` with at least ``n`` names."""
    if n > len(_STEP_NAMES):
        _STEP_NAMES.extend(str(k) for k in range(len(_STEP_NAMES), n + 1024))
    return _STEP_NAMES


# The names of computed values, ``v<k>``, made once per process (every function names
# its values so).
_VALUE_NAMES: list = []


def _value_names(n):
    """``_VALUE_NAMES`` with at least ``n`` names."""
    if n > len(_VALUE_NAMES):
        _VALUE_NAMES.extend(f"v{k}" for k in range(len(_VALUE_NAMES), n + 1024))
    return _VALUE_NAMES


def _aligned_block(nbytes):
    raw = np.empty(nbytes + ALIGN, dtype=np.uint8)
    # (The address from the array interface: ``raw.ctypes`` makes a ctypes object.)
    off = (-raw.__array_interface__["data"][0]) % ALIGN
    return raw[off : off + nbytes]


@functools.lru_cache(maxsize=4096)  # a few distinct hints per process: each cleaned once
def _identifier(hint) -> str:
    """The identifier part of a global's name made from ``hint`` (Program.global_name)."""
    return "".join(c if c.isalnum() else "_" for c in str(hint))[:24] or "g"


class _Ctx:
    """What emitters may ask of the program: global names, constants, scratch values."""

    def __init__(self, program):
        self.p = program

    def glob(self, obj, hint):
        return self.p.global_name(obj, hint)

    def const(self, value, hint="k"):
        return self.p.const_name(value, hint)

    def temp(self, dtype, label):
        return Temp(dtype, label)

    def is_const(self, v):
        return isinstance(v, Constant) or v in self.p.folded

    def value_of(self, v):
        return v.data if isinstance(v, Constant) else self.p.folded[v]


class Program:
    """Everything about a linked graph that does not depend on the input shapes."""

    def __init__(
        self,
        fgraph,
        order,
        *,
        updates=None,
        borrowed=(),
        incremental=False,
        min_plan_bytes=DEFAULT_MIN_PLAN_BYTES,
        poison=False,
    ):
        self.fgraph = fgraph
        self.poison = bool(poison)
        self.order = list(order)
        self.incremental = incremental
        self.min_plan_bytes = min_plan_bytes
        self.inputs = list(fgraph.inputs)
        self.outputs = list(fgraph.outputs)
        self.updates = dict(updates or {})  # shared input var -> update output var
        self.borrowed = set(borrowed)
        self.ns: dict = {}
        self._glob_ids: dict = {}
        self.folded: dict = {}
        self._fold()
        ctx = _Ctx(self)
        self.node_steps = []  # (node, expanded steps or None, call steps)
        folded = self.folded
        append = self.node_steps.append
        for node in self.order:
            outs = node.outputs
            # (A node of no outputs is "all folded" too: nothing to compute.)
            if (folded or not outs) and all(o in folded for o in outs):
                continue
            steps = make_steps(node, ctx)
            call = steps if steps[0].kind == "call" and len(steps) == 1 else None
            append((node, steps, call))
        self.names = self._name_values()
        self.output_set = set(self.outputs)
        self.has_destroyers = any(
            getattr(node.op, "destroy_map", None) for node, _, _ in self.node_steps
        )

    @functools.cached_property
    def node_index(self):
        """``{node: its position in node_steps}``, made when first asked (a shape error's
        message): not for every function linked."""
        return {node: k for k, (node, _, _) in enumerate(self.node_steps)}

    # -- names -------------------------------------------------------------------

    def global_name(self, obj, hint):
        key = id(obj)
        known = self._glob_ids.get(key)
        if known is not None:
            return known[0]
        name = f"_g{len(self._glob_ids)}_{_identifier(hint)}"
        self._glob_ids[key] = (name, obj)  # keeps obj alive so its id stays unique
        self.ns[name] = obj
        return name

    def const_name(self, value, hint="k"):
        return self.global_name(value, hint)

    def _fold(self):
        """Compute small nodes whose inputs are all constants once, now."""
        folded = self.folded
        outputs = destroyed = None  # made when the first node of constant inputs is met
        for node in self.order:
            ins = node.inputs
            if not ins:
                continue
            for v in ins:
                if not (isinstance(v, Constant) or v in folded):
                    break
            else:
                if destroyed is None:
                    outputs, destroyed = set(self.fgraph.outputs), self.destroyed_values
                if getattr(node.op, "destroy_map", None) or any(
                    o in outputs or o in destroyed for o in node.outputs
                ):
                    continue
                try:
                    if not node.op.do_constant_folding(self.fgraph, node):
                        continue
                except Exception:
                    continue
                args = [v.data if isinstance(v, Constant) else folded[v] for v in ins]
                cells = [[None] for _ in node.outputs]
                try:
                    with np.errstate(all="ignore"):
                        node.op.perform(node, args, cells)
                except Exception:
                    continue  # left to run time, where the error belongs
                vals = [c[0] for c in cells]
                if any(getattr(v, "nbytes", 0) > FOLD_MAX_BYTES for v in vals):
                    continue
                for o, v in zip(node.outputs, vals):
                    folded[o] = v

    @functools.cached_property
    def destroyed_values(self) -> set:
        """The values some node overwrites, and what they view: each call must compute
        them afresh, never fold them into a constant, and an input among them is written
        by the call (a caller's array aliasing it is read from a copy). The graph's, so
        made once for every plan."""
        destroyed = set()
        for node in reversed(self.order):
            for ins in (getattr(node.op, "destroy_map", None) or {}).values():
                destroyed.update(node.inputs[i] for i in ins)
            for o, ins in (getattr(node.op, "view_map", None) or {}).items():
                if node.outputs[o] in destroyed:
                    destroyed.update(node.inputs[i] for i in ins)
        return destroyed

    def _name_values(self):
        names: dict = {}
        for k, v in enumerate(self.inputs):
            names[v] = f"x{k}"
        folded = self.folded
        value_names = _value_names(2 * len(self.node_steps) + len(self.outputs))
        n = 0
        # (Most values are met again as a later node's input: looked up here first; a
        # computed value, most of the new ones, named without a call.)
        for node, steps, _call in self.node_steps:
            for v in node.inputs:
                if v not in names:
                    if v.owner is not None and v not in folded:
                        names[v] = value_names[n] if n < len(value_names) else f"v{n}"
                        n += 1
                    else:
                        n = self._name_value(names, v, n)
            for st in steps:
                for v in st.inputs:
                    if v not in names:
                        n = self._name_value(names, v, n)
                for v in st.outputs:
                    if v not in names:
                        if v not in folded:
                            names[v] = value_names[n] if n < len(value_names) else f"v{n}"
                            n += 1
                        else:
                            n = self._name_value(names, v, n)
            for v in node.outputs:
                if v not in names:
                    n = self._name_value(names, v, n)
        for v in self.outputs:
            if v not in names:
                n = self._name_value(names, v, n)
        return names

    def _name_value(self, names, v, n):
        """Name ``v`` (a constant, a folded value, else the next computed value's name
        ``v<n>``) in ``names``; returns the next ``n``."""
        if isinstance(v, Constant):
            names[v] = self.const_name(v.data, "c")
        elif v in self.folded:
            names[v] = self.const_name(self.folded[v], "f")
        else:
            names[v] = f"v{n}"
            n += 1
        return n

    # -- planning ----------------------------------------------------------------

    def plan(self, sig):
        """The :class:`Plan` for the input-shape signature ``sig`` (one entry per input)."""
        t0 = time.perf_counter()
        input_shapes = dict(zip(self.inputs, sig))
        try:
            shapes, _known = infer_shapes(
                self.fgraph, [n for n, _, _ in self.node_steps], input_shapes, self.folded
            )
        except ShapeError as e:
            pos = self.node_index.get(e.node, "?")
            storage = {}
            for v, shp in zip(e.node.inputs, e.in_shapes or ()):
                if shp is not None:
                    storage[v] = [_Described(shp, v.type.dtype)]
            raise_with_op(self.fgraph, e.node, e, position=pos, storage_map=storage)
        steps = self._choose_steps(shapes)
        plan = Plan(self, sig, steps, shapes)
        plan.plan_time = time.perf_counter() - t0
        return plan

    def _choose_steps(self, shapes):
        """Each node's expanded steps, or its ``perform`` call where a shape is unknown
        (but for a step whose result allocates itself, where an input's shape depends
        on data: a C kernel, a reduction, a product)."""
        chosen = []
        append = chosen.append
        for node, steps, call in self.node_steps:
            use = steps
            if call is None:
                for st in steps:
                    for v in st.inputs:
                        # (Every value of the graph has its shape: only a scratch value
                        # may be missing.)
                        if v not in shapes and isinstance(v, Temp):
                            shapes[v] = None
                    view = st.kind == "view"
                    for v, d in zip(st.outputs, st.dtypes):
                        if isinstance(v, Temp):
                            ins = [shapes.get(i) for i in st.inputs]
                            if v.like is not None:
                                like = [
                                    np.shape(i[1]) if isinstance(i, tuple) else shapes.get(i)
                                    for i in v.like
                                ]
                                shapes[v] = broadcast_shapes(like)
                            elif any(s is None for s in ins):
                                shapes[v] = None
                            elif st.temp_shape_outputs:
                                outs = [shapes.get(o) for o in node.outputs]
                                shapes[v] = (
                                    None
                                    if any(s is None for s in outs)
                                    else tuple(st.temp_shape(ins, outs))
                                )
                            elif st.temp_shape is not None:
                                shapes[v] = tuple(st.temp_shape(ins))
                            else:
                                shapes[v] = broadcast_shapes(ins + list(st.const_shapes))
                        if d is not None and not view and shapes.get(v) is None:
                            # A result (a scratch value too) that its step's code
                            # allocates at run time (``emit.allocates``: a C kernel's,
                            # a reduction's, a product's) may stay unplanned, where an
                            # input's shape depends on data; any other needs its shape.
                            if not (
                                getattr(st.emit, "allocates", False)
                                and _data_dependent(node, shapes)
                            ):
                                use = None
                if use is None:
                    use = call_steps(node, _Ctx(self))
            append((node, use))
        return chosen


def _dyn_source(st, j):
    """Where output ``j`` of step ``st`` takes its run-time shape from, where the step is
    a C kernel's that may write a target (a segment runs it): per dimension, an input of
    the output's dimensions that does not declare it broadcastable (None: every input
    declares it, so its length is 1). The kernel refuses an input that does not
    broadcast to its output (Theano's rule: a length 1 only where declared), so the
    output has exactly that shape. The step itself where its emit has a ``shape_line``
    (its kernel broadcasts as numpy does: the line checks the inputs and gives the
    shape). None where the step is another's, or an input has other dimensions."""
    kt = getattr(st.emit, "kernel_target", None)
    if kt is None or j != 0 or len(st.outputs) != 1:
        return None
    if getattr(st.emit, "shape_line", None) is not None:
        return st  # the step's own line gives the shape (and checks the inputs)
    k = kt[2]
    ndim = k.ndim
    if k.destroy or len(st.inputs) != k.nin:
        return None
    source = [None] * ndim
    for v in st.inputs:
        bcast = getattr(getattr(v, "type", None), "broadcastable", None)
        if bcast is None or len(bcast) != ndim:
            return None
        for d, b in enumerate(bcast):
            if not b and source[d] is None:
                source[d] = v
    return tuple(source)


def _data_dependent(node, shapes) -> bool:
    """Whether an array input of ``node`` has a shape known only at run time (where all
    are known and the op's rule gave its result none, the run is to raise an error)."""
    return any(
        shapes.get(i) is None and getattr(i.type, "ndim", None) is not None for i in node.inputs
    )


class Plan:
    """Where every value lives for one signature, the blocks, and the generated source."""

    def __init__(self, program, sig, node_steps, shapes):
        self.program = program
        self.sig = sig
        self.node_steps = node_steps
        self.shapes = shapes
        self.steps = [(k, st) for k, (_node, sts) in enumerate(node_steps) for st in sts]
        self.fast = None
        self.core = None
        self.codegen_time = 0.0
        self._dtype_names: dict = {}  # dtype -> the global naming it (target_setup)
        self._categorize()
        self._plan_blocks()
        if program.poison:
            self.check()

    # Each produced value: its step, its position there, how it is read.
    def _categorize(self):
        p = self.program
        producer, base = {}, {}
        for idx, (_k, st) in enumerate(self.steps):
            views = st.views
            for j, v in enumerate(st.outputs):
                producer[v] = (idx, j)
                if views and j in views:
                    base[v] = st.inputs[views[j]]
        self.producer, self.base = producer, base
        # Everything the user gets must be memory of its own: outputs and what they view.
        pinned = set()
        for v in p.outputs:
            while v in producer and v not in pinned:
                pinned.add(v)
                if v not in base:
                    break
                v = base[v]
        cat = {}
        # The bytes of each value that may get a block of its own (the blocks' sizes),
        # and its dtype.
        self.nbytes = nbytes = {}
        self.dtype_of = dtype_of = {}
        sizes = {}  # (shape, dtype) -> bytes: most values of a plan have a few shapes
        # A "dyn" value -> where its shape comes from (_dyn_source).
        self.dyn_source = dyn_source = {}
        incremental = p.incremental
        shape_of, min_bytes, natural_ok = self.shapes.get, p.min_plan_bytes, self._natural_ok
        for _k, st in self.steps:
            views, out_kind, dtypes = st.views, st.kind == "out", st.dtypes
            for j, v in enumerate(st.outputs):
                d = dtypes[j]
                shp = shape_of(v)
                if views and j in views:
                    cat[v] = "view"
                elif not out_kind or d is None or shp is None:
                    cat[v] = "fresh"
                    if shp is None and d is not None and out_kind:
                        src = _dyn_source(st, j)
                        if src is not None:
                            cat[v], dyn_source[v], dtype_of[v] = "dyn", src, d
                else:
                    # (Whether numpy's natural result has the value's shape is asked only
                    # where it decides.)
                    n = sizes.get((shp, d))
                    if n is None:
                        n = sizes[shp, d] = _nbytes(shp, d)
                    nbytes[v] = n
                    dtype_of[v] = d
                    small = n < min_bytes
                    if incremental:
                        # Every value must outlive the call: no block is ever reused.
                        cat[v] = "fresh" if natural_ok(st, shp) else "alloc"
                    elif v in pinned:
                        if v in p.borrowed:
                            cat[v] = "own"
                        elif small:
                            fresh = not st.prefer_target and natural_ok(st, shp)
                            cat[v] = "fresh" if fresh else "alloc"
                        else:
                            # A block allocated afresh by each call, which the value
                            # shares with the dead values before it (in place when it
                            # may): a chain ending in an output needs no other memory.
                            cat[v] = "outblk"
                    elif (st.prefer_fresh or (small and not st.prefer_target)) and natural_ok(
                        st, shp
                    ):
                        cat[v] = "fresh"
                    else:
                        cat[v] = "pooled"
        self.cat = cat
        self.update_inplace = {} if incremental else self._update_edges()
        # The shared variable whose storage each such update is written into.
        self.update_storage = {u: w for w, u in self.update_inplace.items()}
        for u in self.update_inplace.values():
            cat[u] = "update"

    @functools.cached_property
    def readers(self):
        """``{value: the indices of the steps that read it}``, made when first asked (the
        updates written in place ask): most plans have no update."""
        readers = {}
        get = readers.get
        for idx, (_k, st) in enumerate(self.steps):
            for v in st.inputs:
                r = get(v)
                if r is None:
                    readers[v] = [idx]
                else:
                    r.append(idx)
        return readers

    def _natural_ok(self, st, shp):
        if not st.elementwise:
            return True
        get = self.shapes.get
        shp = tuple(shp)
        if st.inputs:
            # (Asked of every elementwise step of every plan: loops, no generators.)
            for v in st.inputs:
                if get(v) != shp:
                    break
            else:
                # Inputs of the output's shape (most steps), size-1 constants of no more
                # dimensions: they broadcast to it.
                for c in st.const_shapes:
                    if len(c) > len(shp) or not all(d == 1 for d in c):
                        break
                else:
                    return True
        ins = [get(v) for v in st.inputs] + list(st.const_shapes)
        return broadcast_shapes(ins) == shp

    def _update_edges(self):
        """Shared variables whose update can be computed straight into their storage."""
        p = self.program
        result = {}
        n_out_users = {}
        for v in p.outputs:
            n_out_users[v] = n_out_users.get(v, 0) + 1
        for w, u in p.updates.items():
            if u not in self.producer or self.cat.get(u) not in ("fresh", "alloc", "own", "outblk"):
                continue
            idx, j = self.producer[u]
            st = self.steps[idx][1]
            if st.kind != "out" or n_out_users.get(u, 0) != 1 or u in p.borrowed:
                continue
            shp, wshape = self.shapes.get(u), self.shapes.get(w)
            if shp is None or wshape != shp or st.dtypes[j] != w.type.dtype:
                continue
            if _nbytes(shp, st.dtypes[j]) < p.min_plan_bytes:
                continue
            # The old value must be dead when the update is written: no later reader of w
            # or of anything viewing it, it is not returned, and this step reads it only
            # where it may be overwritten.
            aliases = self._aliases_of(w)
            if any(a in p.output_set for a in aliases):
                continue
            ok = True
            for a in aliases:
                for r in self.readers.get(a, ()):
                    if r > idx or (r == idx and a is not w):
                        ok = False
            if ok and w in st.inputs:
                pos = st.inputs.index(w)
                ok = (j, pos) in st.inplace
            if ok:
                result[w] = u
        return result

    def _aliases_of(self, w):
        out, todo = {w}, [w]
        while todo:
            v = todo.pop()
            for idx in self.readers.get(v, ()):
                st = self.steps[idx][1]
                for j, o in enumerate(st.outputs):
                    if j in st.views and st.inputs[st.views[j]] is v and o not in out:
                        out.add(o)
                        todo.append(o)
        return out

    def _plan_blocks(self, replans=0):
        p = self.program
        cat, shapes = self.cat, self.shapes
        pool_cats = ("pooled", "outblk")
        pooled = [v for v, c in cat.items() if c in pool_cats]
        nbytes = self.nbytes
        sizes = {v: nbytes[v] for v in pooled}
        nodes = []
        append = nodes.append
        trusted = PlanNode.trusted  # (a Step's outputs and inputs are tuples already)
        cat_of, shape_of, dtype_of = cat.get, shapes.get, self.dtype_of
        step_names = _step_names(len(self.steps))
        for idx, (_k, st) in enumerate(self.steps):
            pairs = ()
            if st.inplace:
                outs, ins = st.outputs, st.inputs
                for j, i in st.inplace:
                    out, inp = outs[j], ins[i]
                    # (A pooled input has its dtype recorded.)
                    if cat_of(inp) != "pooled" or cat_of(out) not in pool_cats:
                        continue
                    if shape_of(inp) != shape_of(out) or dtype_of[inp] != st.dtypes[j]:
                        continue
                    pairs += ((out, inp),)
            append(trusted(st.outputs, st.inputs, pairs, step_names[idx]))
        # The caller reads the outputs after the last node: their blocks stay busy.
        returned = [v for v in dict.fromkeys(p.outputs) if v in self.producer]
        known = set(returned)
        returned += [v for v, c in cat.items() if c == "outblk" and v not in known]
        append(trusted((), tuple(returned), (), "return"))  # (distinct values: from a dict)
        views = {v: self.base[v] for v, c in cat.items() if c == "view"}
        pinned = [v for v, c in cat.items() if c not in pool_cats and c != "view"]
        pinned += p.inputs
        self.memory = plan_memory(nodes, sizes, pinned=pinned, views=views)
        # What the planner was told, for check_plan (tests, DebugMode).
        self.plan_input = (nodes, sizes)
        # The caller keeps an output's whole block: an output much smaller than the block
        # it landed in gets an array of its own instead (and the plan is made again).
        wasteful = [
            v
            for v, (b, _o) in self.memory.assignment.items()
            if cat[v] == "outblk" and 2 * sizes[v] < self.memory.blocks[b]
        ]
        if wasteful and replans < 3:
            for v in wasteful:
                cat[v] = "alloc"
            return self._plan_blocks(replans + 1)
        leaked = set(pooled) - set(self.memory.assignment)
        if leaked:  # the planner pinned a root we did not expect: give it its own memory
            for v in leaked:
                cat[v] = "own"
        # Blocks that end the call holding an output are allocated by each call.
        per_call = {b for v, (b, _o) in self.memory.assignment.items() if cat[v] == "outblk"}
        blocks = []
        for b, n in enumerate(self.memory.blocks):
            try:
                blocks.append(None if b in per_call else _aligned_block(n))
            except MemoryError as e:
                raise self.block_memory_error(b) from e
        self.slots: dict = {}
        self.slot_values: dict = {}
        self.prologue: list = []
        self.prologue_blocks: list = []  # the block each prologue line allocates, or None
        made: dict = {}
        u8 = p.global_name(np.dtype(np.uint8), "u8")
        for b in sorted(per_call):
            self.slot_values[f"bn{b}"] = self.memory.blocks[b]
            self.prologue.append(f"_blk{b} = _empty(bn{b}, {u8})")
            self.prologue_blocks.append(b)
        dtype_of = self.dtype_of  # (every value with a block has its dtype recorded)
        for v, (b, off) in self.memory.assignment.items():
            d = dtype_of[v]
            key = (b, d, shapes[v])
            if key in made:
                self.slots[v] = made[key]
                continue
            n = sizes[v]
            name = f"b{len(made)}"
            if b in per_call:
                dn = p.global_name(np.dtype(d), "D")
                self.slot_values[f"{name}s"] = (off, off + n, tuple(shapes[v]))
                self.prologue.append(
                    f"{name} = _blk{b}[{name}s[0]:{name}s[1]].view({dn}).reshape({name}s[2])"
                )
                self.prologue_blocks.append(None)
            else:
                self.slot_values[name] = blocks[b][off : off + n].view(d).reshape(shapes[v])
            made[key] = name
            self.slots[v] = name
        self.own_bytes = 0
        for v, c in cat.items():
            if c == "own":
                try:
                    arr = np.empty(shapes[v], dtype=cat_dtype(self, v))
                except MemoryError as e:
                    raise MemoryError(
                        f"CPU engine: out of memory for a buffer of "
                        f"{_fmt_bytes(_nbytes(shapes[v], cat_dtype(self, v)))}, which holds "
                        + self._describe_values([v])
                    ) from e
                self.own_bytes += arr.nbytes
                self._slot(v, arr)
            elif c == "alloc":
                self._slot(v, tuple(shapes[v]))
        self.blocks = blocks
        # The inputs whose storage a call writes (an update computed into it, an in-place
        # op): a caller's array that is (or views) one of them is read from a copy.
        overwritten = set(self.update_inplace)
        if p.has_destroyers:
            overwritten |= p.destroyed_values
        self.overwritten_inputs = tuple(k for k, v in enumerate(p.inputs) if v in overwritten)
        # The buffers this plan keeps and writes at every call that a caller may hold: an
        # Out(borrow=True) output's. A call given one of them (or a view of it) as an
        # input, as a loop feeding an output back does, reads a copy (codegen.build_fast,
        # CPUThunk): the call writes the new output there before it has read the input.
        self.kept_ids = frozenset(
            id(self.slot_values[self.slots[v]])
            for v, c in cat.items()
            if c == "own" and isinstance(self.slot_values.get(self.slots.get(v)), np.ndarray)
        )
        self.n_unplanned = sum(1 for c in cat.values() if c in ("fresh", "alloc", "dyn"))

    def block_memory_error(self, b) -> MemoryError:
        """The error of a failed allocation of block ``b``: its size and the values the
        plan puts in it (the node that computes each, its dtype and shape), not the byte
        array that numpy names."""
        held = [v for v, (bb, _o) in self.memory.assignment.items() if bb == b]
        lines = [
            f"CPU engine: out of memory for block {b} of the memory plan "
            f"({_fmt_bytes(self.memory.blocks[b])}), which holds " + self._describe_values(held),
            f"The function's input shapes: {', '.join(str(tuple(s)) for s in self.sig)}",
        ]
        first = [v for v in held if v in self.producer][:1]
        if first:  # where the user made the first of them
            lines += creation_lines(self.steps[self.producer[first[0]][0]][1].node)
        return MemoryError("\n".join(lines))

    def _describe_values(self, values, most=6) -> str:
        """``values`` as a message lists them, one a line: the node computing each, its
        dtype and shape."""
        lines = [f"{len(values)} value{'s' * (len(values) != 1)}:"]
        for v in values[:most]:
            node = self.steps[self.producer[v][0]][1].node if v in self.producer else None
            what = f"{v} = {node}" if node is not None and str(v) != str(node) else str(v)
            lines.append(f"  {what}: {cat_dtype(self, v)}, shape {tuple(self.shapes[v])}")
        if len(values) > most:
            lines.append(f"  and {len(values) - most} more")
        return "\n".join(lines)

    def _slot(self, v, value):
        name = f"bo{len(self.slots)}"
        self.slots[v] = name
        self.slot_values[name] = value

    def target(self, v):
        """The name of the array a step writes value ``v`` into (None: numpy allocates it).

        Always a plain name, bound before the step (:meth:`target_setup`): an emitter may
        read its target more than once (``dot(a, b, t)`` then ``v = t``), so an expression
        that allocates would hand each reading a different array.
        """
        c = self.cat.get(v)
        if c in ("pooled", "own", "outblk"):
            return self.slots[v]
        if c == "alloc" or c == "dyn":
            # Poisoned, a name apart, so that the check after the step can tell whether
            # the output is the array that was allocated.
            return ("t" if self.program.poison else "") + self.program.names[v]
        if c == "update":
            return self.program.names[self.update_storage[v]]
        return None

    def target_and_setup(self, v):
        """``(self.target(v), self.target_setup(v))``, with one look at the value's
        category (the code generator asks both of every step's output)."""
        c = self.cat.get(v)
        if c == "pooled" or c == "own" or c == "outblk":
            return self.slots[v], None
        if c == "alloc" or c == "dyn":
            return self.target(v), self.target_setup(v)
        if c == "update":
            return self.target(v), None
        return None, None

    def target_setup(self, v):
        """The line binding value ``v``'s target before its step (None: it is bound)."""
        c = self.cat.get(v)
        if c != "alloc" and c != "dyn":
            return None
        d = self.dtype_of.get(v)  # (recorded for every sized value, most of them)
        if d is None:
            d = cat_dtype(self, v)
        dname = self._dtype_names.get(d)
        if dname is None:
            dname = self._dtype_names[d] = self.program.global_name(np.dtype(d), "D")
        if c == "dyn":
            names = self.program.names
            source = self.dyn_source[v]
            if not isinstance(source, tuple):  # a step that says its output's shape
                shape = source.emit.shape_line([names[i] for i in source.inputs])
            elif source and source[0] is not None and all(x is source[0] for x in source):
                shape = f"{names[source[0]]}.shape"  # one input has the output's shape
            else:
                dims = [
                    "1" if x is None else f"{names[x]}.shape[{d}]" for d, x in enumerate(source)
                ]
                shape = f"({', '.join(dims)},)" if dims else "()"
        else:
            shape = self.slots[v]
        return f"{self.target(v)} = _empty({shape}, {dname})"

    def poisoned_target(self, idx, v):
        """Whether poisoning may fill value ``v``'s target just before step ``idx``
        writes it: not when it is the memory of an input the step still reads (an
        in-place output, or an update written over the variable the step reads)."""
        c = self.cat.get(v)
        if c in ("pooled", "outblk"):
            return v not in self.memory.inplace
        if c == "update":
            return self.update_storage[v] not in self.steps[idx][1].inputs
        return c in ("own", "alloc", "dyn")

    def check(self):
        """Raise ValueError unless this plan keeps every value's bytes its own.

        Two judges: the memory planner's checker on what the planner was told
        (:func:`~theano_dag.engines.memory.check_plan`: no block shared by two live
        values, in-place reuse only where a step allows it), and the slots the
        generated code uses: each pooled value's array lies at its planned place in
        its planned block, with its shape and dtype.
        """
        nodes, sizes = self.plan_input
        check_plan(nodes, sizes, self.memory)
        for v, (b, off) in self.memory.assignment.items():
            if self.cat.get(v) not in ("pooled", "outblk"):
                raise ValueError(f"value {v} has a block but is a {self.cat.get(v)!r} value")
            name = self.slots.get(v)
            if name is None:
                raise ValueError(f"value {v} has block {b} but no array in the generated code")
            if self.blocks[b] is None:  # a block each call allocates
                lo, hi, shape = self.slot_values[f"{name}s"]
                if (lo, hi) != (off, off + sizes[v]) or tuple(shape) != tuple(self.shapes[v]):
                    raise ValueError(
                        f"value {v}: its array is bytes {lo}:{hi} of the call's block {b}, "
                        f"shape {shape}; planned {off}:{off + sizes[v]}, {self.shapes[v]}"
                    )
                continue
            arr = self.slot_values[name]
            start = self.blocks[b].ctypes.data + off
            if (
                arr.ctypes.data != start
                or arr.nbytes != sizes[v]
                or arr.shape != tuple(self.shapes[v])
                or arr.dtype != np.dtype(cat_dtype(self, v))
            ):
                raise ValueError(
                    f"value {v}: its array ({arr.shape}, {arr.dtype}) is not the "
                    f"{sizes[v]} bytes at offset {off} of block {b} planned for it"
                )

    def small(self, v):
        """Whether value ``v`` is known to be smaller than the planning threshold."""
        shp = self.shapes.get(v)
        if shp is None or v not in self.producer:
            return False
        d = cat_dtype(self, v)
        return d is not None and _nbytes(shp, d) < self.program.min_plan_bytes

    def memory_plan(self) -> MemoryPlan:
        """The memory plan of this signature (pooled values only)."""
        return self.memory


class _Described:
    """Stands for a value in an error message: its shape and dtype."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)


def cat_dtype(plan, v):
    idx, j = plan.producer[v]
    return plan.steps[idx][1].dtypes[j]
