"""``OpenCLLinker``: the OpenCL engine's linker (``Mode(linker='opencl')``).

The optdb pass ``device_placement`` (tag ``opencl``, which this engine's Modes
include) has put the transfers on the graph as visible nodes; ``accept(fgraph)``
reads where every node runs back from it (``placement.place(..., lower=False)``,
which changes nothing); ``make_thunk()`` builds one OpenCL program with every
kernel, uploads the constants once, and returns the callable.

Each call, per *signature* (the shapes, and for device arrays the strides, of
the inputs), a plan is made once and cached: the concrete shape of every value
(``engines.cpu.shapes.infer_shapes``), then the memory plan of the device values
(``engines.memory.plan_memory``: one device buffer per block, each value at its
offset in one). Values whose shape depends on data, and the outputs, get
buffers from the memory pool at run time instead.

Inputs may be numpy arrays (copied to the device when a device node reads
them) or ``pyopencl.array.Array`` (used in place). Outputs are copied back as
numpy arrays, except those declared ``Out(..., borrow=True)``, all of them with
``return_device_arrays=True``, and updates of shared variables that live on the
device (see ``shared.py``), which stay device arrays.
"""

from __future__ import annotations

import time

import numpy as np

from theano_dag.config import config
from theano_dag.engines.basic import Container, Linker, io_storage_map, raise_with_op
from theano_dag.engines.callspec import Thunk
from theano_dag.engines.cpu.plan.shapes import infer_shapes
from theano_dag.engines.memory import PlanNode, plan_memory
from theano_dag.engines.opencl import (  # noqa: F401 (register kernels)
    assign,
    blas,
    elemwise,
    reduce,
)
from theano_dag.engines.opencl.context import get_context
from theano_dag.engines.opencl.placement import BOTH, DEVICE, place
from theano_dag.engines.opencl.shared import DeviceInputType
from theano_dag.engines.opencl.values import DArr, from_cl_array, is_device_array, to_cl_array
from theano_dag.engines.profile import ProfileStats
from theano_dag.graph.basic import Constant
from theano_dag.scalar.basic import OPENCL_TYPES
from theano_dag.tensor.shape import Shape
from theano_dag.tensor.type import TensorType

__all__ = ["OpenCLLinker", "DevicePlan"]

_ABSENT = object()  # no host value yet (None can be one)


def _nbytes(shape, dtype) -> int:
    n = np.dtype(dtype).itemsize
    for s in shape:
        n *= int(s)
    return n


def _device_array_type(t) -> bool:
    """Whether a value of type ``t`` can be handed out as a device array: a tensor of a
    type OpenCL has (not a random generator, a typed list, a sparse matrix, a ScalarType's
    numpy scalar or a complex array, which stay host values)."""
    return isinstance(t, TensorType) and t.dtype in OPENCL_TYPES


class DevicePlan:
    """The memory plan of one signature: ``slots[var] = (buffer, offset, capacity)``."""

    def __init__(self, memory_plan, slots, buffers, shapes):
        self.memory_plan = memory_plan
        self.slots = slots
        self.buffers = buffers
        self.shapes = shapes

    @property
    def planned_bytes(self) -> int:
        return 0 if self.memory_plan is None else self.memory_plan.planned_bytes

    def summary(self) -> str:
        if self.memory_plan is None:
            return "no memory plan (shapes unknown before the run)"
        return "device memory: " + self.memory_plan.summary()


class OpenCLLinker(Linker):
    """Run a FunctionGraph on an OpenCL device (see the module docstring).

    ``return_device_arrays``: every output stays on the device.
    ``host_fallback``: run ops without a kernel on the host (None: the config flag).
    ``build_options``: OpenCL compiler options (e.g. ``["-cl-fast-relaxed-math"]``, or
    ``["-cl-opt-disable"]`` where compile time matters more than speed).
    """

    # The Mode's query runs the OpenCL engine's lowering pass (device placement).
    required_rewrites = ("opencl",)

    def __init__(
        self,
        return_device_arrays=False,
        host_fallback=None,
        allow_gc=None,
        schedule=None,
        build_options=(),
    ):
        super().__init__(allow_gc=True if allow_gc is None else allow_gc, scheduler=schedule)
        self.return_device_arrays = bool(return_device_arrays)
        self.host_fallback = host_fallback
        self.build_options = tuple(build_options)
        self.fgraph = None
        self.no_recycling = []
        self.updates = {}
        self.placement = None
        self.ctx = None
        self.profile = None

    def clone(self, allow_gc=None):
        return type(self)(
            self.return_device_arrays,
            self.host_fallback,
            self.allow_gc if allow_gc is None else allow_gc,
            self._scheduler,
            self.build_options,
        )

    def accept(self, fgraph, no_recycling=None, profile=None):
        """Bind to ``fgraph`` and read where its nodes run (the graph is left as it is:
        the ``device_placement`` pass inserted the transfers)."""
        if self.fgraph is not None and self.fgraph is not fgraph:
            return self.clone().accept(fgraph, no_recycling, profile)
        self.fgraph = fgraph
        self.no_recycling = list(no_recycling or [])
        self.profile = profile
        self.ctx = get_context()
        fallback = (
            config.opencl__host_fallback if self.host_fallback is None else self.host_fallback
        )
        self.placement = place(fgraph, self.ctx, bool(fallback), lower=False)
        return self

    def accept_var_updates(self, updates):
        """``{shared input variable: update output variable}`` (from FunctionMaker)."""
        self.updates = dict(updates)

    def make_thunk(self, input_storage=None, output_storage=None, storage_map=None):
        fg = self.fgraph
        if fg is None:
            raise ValueError("OpenCLLinker.make_thunk: call accept(fgraph) first")
        if input_storage is None:
            input_storage = [[None] for _ in fg.inputs]
        if output_storage is None:
            output_storage = [[None] for _ in fg.outputs]
        t0 = time.perf_counter()
        runner = _Runner(self, input_storage, output_storage)
        runner.given_cells = storage_map  # a copy's cells of the original (share_memory)
        if runner.profile is not None:
            runner.profile.link_time += time.perf_counter() - t0
        ins = [
            Container(DeviceInputType(v.type) if hasattr(v.type, "ndim") else v, cell, name=v.name)
            for v, cell in zip(fg.inputs, input_storage)
        ]
        outs = [Container(v, cell, readonly=True) for v, cell in zip(fg.outputs, output_storage)]
        return runner, ins, outs


class _Runner(Thunk):
    """The thunk a Function runs (``fn``); see the module docstring. When profiling, its
    ``profile`` (a ProfileStats) gets the calls and each node's time, measured after the
    device's queue has finished; ``profile_summary()`` adds the device, the plan and the
    transfers."""

    def __init__(self, linker, input_storage, output_storage):
        self.linker = linker
        self.ctx = linker.ctx
        fg = linker.fgraph
        pl = linker.placement
        self.fgraph = fg
        self.order = linker.schedule(fg)
        self.where = pl.where
        self.impls = pl.impls
        self.placement = pl
        self.input_storage = input_storage
        self.output_storage = output_storage
        self.allow_gc = True
        self.plans: dict = {}
        self.given_cells = None
        self._storage_map = None
        self.profiling = bool(linker.profile) or bool(config.profile)
        self.node_times = [0.0] * len(self.order)
        self.calls = 0
        if self.profiling:
            given = linker.profile
            self.profile = (
                given
                if isinstance(given, ProfileStats)
                else ProfileStats(name=getattr(fg, "name", None), engine="OpenCL engine")
            )
            self.profile.set_nodes(self.order)
            self.node_times = self.profile.node_time  # one list, filled by __call__
        self.source = self._build()
        self.constants = self._upload_constants()
        in_idx = {v: k for k, v in enumerate(fg.inputs)}
        self.update_of = {
            j: in_idx[inp]
            for inp, out in linker.updates.items()
            for j, o in enumerate(fg.outputs)
            if o is out and inp in in_idx
        }
        keep = set(linker.no_recycling)
        self.out_device = [
            _device_array_type(v.type)
            and (
                linker.return_device_arrays
                or (v.owner is not None and v not in keep and j not in self.update_of)
            )
            for j, v in enumerate(fg.outputs)
        ]
        self._last_use()
        # Inputs whose value has a shape (a typed list's, a ragged list of arrays, has none).
        self._shaped_inputs = [getattr(v.type, "ndim", None) is not None for v in fg.inputs]
        self._input_dtypes = [
            np.dtype(v.type.dtype) if _device_array_type(v.type) else None for v in fg.inputs
        ]
        # Per output, the variable a target may be written for by the kernel computing it
        # (run_device): None for an output listed twice, an input or a constant.
        outs = fg.outputs
        self._writable_outputs = [
            v if v.owner is not None and outs.count(v) == 1 else None for v in outs
        ]

    @property
    def storage_map(self) -> dict:
        """Theano's ``fn.storage_map``: the cells of the inputs, the outputs and the
        constants (made on first use). The values between them live on the device, in
        the plans' buffers, which have no cells."""
        if self._storage_map is None:
            self._storage_map = io_storage_map(
                self.fgraph, self.input_storage, self.output_storage, self.given_cells
            )
        return self._storage_map

    # -- compile time -------------------------------------------------------------

    def _build(self) -> str:
        sources: dict = {}
        for node in self.order:
            impl = self.impls.get(node)
            if impl is not None:
                sources.update(impl.sources())
        text = self.ctx.header() + "\n".join(sources[k] for k in sorted(sources))
        self.kernel_names = sorted(sources)
        if sources:
            program = self.ctx.build_program(text, self.linker.build_options)
            for impl in self.impls.values():
                impl.bind(program)
        return text

    def _upload_constants(self) -> dict:
        out = {}
        for node in self.order:
            if self.where[node] not in ("device", "h2d"):
                continue
            host_in = set(self.impls[node].host_inputs) if node in self.impls else set()
            for i, v in enumerate(node.inputs):
                if isinstance(v, Constant) and i not in host_in and v not in out:
                    data = np.asarray(v.data)
                    if data.dtype.kind in "biuf" and data.dtype != np.float16:
                        out[v] = self.ctx.from_host(data)
        return out

    def _last_use(self):
        """``dead[k]``: the values nothing reads after step ``k`` (dropped then)."""
        last = {}
        for k, node in enumerate(self.order):
            for v in node.inputs:
                last[v] = k
        keep = set(self.fgraph.outputs) | set(self.fgraph.inputs)
        self.dead = [[] for _ in self.order]
        for v, k in last.items():
            if v not in keep and not isinstance(v, Constant):
                self.dead[k].append(v)

    # -- planning -------------------------------------------------------------------

    def _plan(self, sig, input_shapes) -> DevicePlan:
        fg, order = self.fgraph, self.order
        shapes, _known = infer_shapes(fg, order, input_shapes)
        pl = self.placement
        nodes, sizes, views, pinned = [], {}, {}, set(fg.outputs)
        for node in order:
            where = self.where[node]
            # d2h nodes produce nothing on the device but read a device value, which
            # must stay alive (unshared) until the copy to the host has run.
            if where not in ("device", "h2d", "d2h"):
                continue
            outs = tuple(o for o in node.outputs if pl.location(o) == DEVICE)
            ins = tuple(v for v in node.inputs if pl.location(v) in (DEVICE, BOTH))
            impl = self.impls.get(node)
            inplace = ()
            if impl is not None:
                for j, i in impl.view_of().items():
                    views[node.outputs[j]] = node.inputs[i]
                inplace = tuple(
                    (node.outputs[j], node.inputs[i])
                    for j, i in impl.inplace_pairs()
                    if node.inputs[i] in ins
                )
            for o in outs:
                shp = shapes.get(o)
                if o in views:
                    continue
                if shp is None:
                    pinned.add(o)
                else:
                    sizes[o] = _nbytes(shp, o.type.dtype)
            nodes.append(PlanNode(outputs=outs, inputs=ins, inplace=inplace, name=str(node.op)))
        if not nodes:
            return DevicePlan(None, {}, [], shapes)
        mp = plan_memory(nodes, sizes, pinned=pinned, views=views)
        buffers = [self.ctx.buffer(b) for b in mp.blocks]
        slots = {v: (buffers[b], off, mp.blocks[b] - off) for v, (b, off) in mp.assignment.items()}
        return DevicePlan(mp, slots, buffers, shapes)

    # -- running --------------------------------------------------------------------

    def __call__(self):
        if self.profiling:
            start = time.perf_counter()
            try:
                self._run()
            finally:
                self.profile.calls += 1
                self.profile.call_time += time.perf_counter() - start
        else:
            self._run()

    def _run(self):
        fg = self.fgraph
        host: dict = {}
        dev: dict = {}
        for v, cell, dtype in zip(fg.inputs, self.input_storage, self._input_dtypes):
            x = cell[0]
            if is_device_array(x):
                d = dev[v] = from_cl_array(x)
                if dtype is not None and d.dtype != dtype:
                    # Function's filter refuses it, except with trust_input: the kernels
                    # would read its bytes as the declared type
                    raise TypeError(
                        f"OpenCL engine: input {v} expected a device array of dtype {dtype}, "
                        f"got one of dtype {d.dtype} (device arrays are not converted)"
                    )
            else:
                host[v] = x
        get_host = self._execute(dev, host)
        self._outputs(dev, host, get_host)
        self.calls += 1

    def run_device(self, values, targets=None) -> list:
        """Run on ``values`` (one per input: a :class:`DArr`, or a host value) and return
        each output where it was computed: a DArr, or a host value for one the host
        computed (nothing is copied back). ``targets``: ``{output index: DArr}``, where
        the kernel that computes that output may write it (a loop's buffer row); the
        output returned is the target then, unless a view or the host computed it.
        A loop runs its steps with it, its state never leaving the device.
        """
        fg = self.fgraph
        host: dict = {}
        dev: dict = {}
        for v, x in zip(fg.inputs, values):
            if isinstance(x, DArr):
                dev[v] = x
            else:
                host[v] = x
        into = {}
        if targets:
            writable = self._writable_outputs
            for j, d in targets.items():
                v = writable[j]
                if v is not None:
                    into[v] = d
        if self.profiling:
            start = time.perf_counter()
        self._execute(dev, host, into)
        if self.profiling:
            self.profile.calls += 1
            self.profile.call_time += time.perf_counter() - start
        self.calls += 1
        result = []
        for v in fg.outputs:
            if isinstance(v, Constant):
                result.append(v.data)
            else:
                d = dev.get(v)
                result.append(host[v] if d is None else d)
        return result

    def _execute(self, dev, host, into=None):
        """Run every node on the inputs in ``dev`` (device) and ``host``; the values
        computed land in the same dicts. Returns ``get_host``."""
        ctx = self.ctx
        fg = self.fgraph
        sig = []
        shapes = {}
        for v, shaped in zip(fg.inputs, self._shaped_inputs):
            d = dev.get(v)
            if d is not None:
                sig.append((d.shape, d.strides))
                shapes[v] = d.shape
            else:
                x = host.get(v)
                shp = np.shape(x) if shaped and x is not None else None
                sig.append(shp)
                shapes[v] = shp
        sig = tuple(sig)
        plan = self.plans.get(sig)
        if plan is None:
            try:
                plan = self._plan(sig, shapes)
            except Exception as e:
                node = getattr(e, "node", None)
                if node is not None:
                    raise_with_op(fg, node, e)
                raise
            self.plans[sig] = plan
        self.last_plan = plan
        slots = plan.slots
        consts = self.constants
        into = into or {}

        def get_dev(v):
            d = dev.get(v)
            if d is None:
                d = consts.get(v)
                if d is None:
                    val = v.data if isinstance(v, Constant) else host[v]
                    # in the declared dtype: an input given unfiltered (trust_input) in
                    # another one, or as a list, would have its bytes misread by kernels
                    d = ctx.from_host(np.asarray(val, dtype=v.type.dtype))
                    if not isinstance(v, Constant):
                        dev[v] = d
            return d

        def get_host(v):
            if isinstance(v, Constant):
                return v.data
            h = host.get(v, _ABSENT)
            if h is _ABSENT:  # None is a value (an input given None, as Default reads)
                h = ctx.to_host(dev[v])
                host[v] = h
            return h

        for k, node in enumerate(self.order):
            t0 = time.perf_counter() if self.profiling else 0.0
            where = self.where[node]
            try:
                if where == "device":
                    impl = self.impls[node]
                    host_in = impl.host_inputs
                    ins = [
                        get_host(v) if i in host_in else get_dev(v)
                        for i, v in enumerate(node.inputs)
                    ]

                    def out(j, shape, dtype, planned=True, _node=node):
                        var = _node.outputs[j]
                        target = into.get(var)
                        if (
                            target is not None
                            and target.shape == tuple(shape)
                            and target.dtype == dtype
                        ):
                            return target
                        need = _nbytes(shape, dtype)
                        slot = slots.get(var) if planned else None
                        if slot is not None and slot[2] >= need:
                            return DArr(slot[0], slot[1], shape, dtype)
                        return DArr(ctx.allocate(need), 0, shape, dtype)

                    for o, val in zip(node.outputs, impl.run(ins, out)):
                        dev[o] = val
                elif where == "h2d":
                    src = node.inputs[0]
                    o = node.outputs[0]
                    h = np.asarray(get_host(src), dtype=o.type.dtype, order="C")
                    slot = slots.get(o)
                    if slot is not None and slot[2] >= h.nbytes:
                        ctx.upload(h, slot[0], slot[1])
                        dev[o] = DArr(slot[0], slot[1], h.shape, h.dtype)
                    else:
                        dev[o] = ctx.from_host(h)
                elif where == "d2h":
                    host[node.outputs[0]] = get_host(node.inputs[0])
                elif where == "meta":
                    self._meta(node, dev, host)
                else:  # host: run the reference implementation
                    cells = [[None] for _ in node.outputs]
                    node.op.perform(node, [get_host(v) for v in node.inputs], cells)
                    for o, c in zip(node.outputs, cells):
                        host[o] = c[0]
            except Exception as e:
                raise_with_op(fg, node, e, position=k)
            if self.profiling:
                ctx.queue.finish()
                self.node_times[k] += time.perf_counter() - t0
                self.profile.node_calls[k] += 1
            for v in self.dead[k]:
                dev.pop(v, None)
                host.pop(v, None)
        return get_host

    def _meta(self, node, dev, host):
        v = node.inputs[0]
        val = dev.get(v)
        if val is None:
            val = v.data if isinstance(v, Constant) else host.get(v)
            if val is None:
                val = self.constants[v]
        shape = np.shape(val) if not isinstance(val, DArr) else val.shape
        if isinstance(node.op, Shape):
            host[node.outputs[0]] = np.asarray(shape, dtype="int64")
        else:
            i = node.op.i
            if not -len(shape) <= i < len(shape):
                raise IndexError(f"{node.op}: the input has {len(shape)} dimensions")
            host[node.outputs[0]] = np.asarray(shape[i], dtype="int64")

    def _outputs(self, dev, host, get_host):
        ctx = self.ctx
        in_cells = self.input_storage
        for j, (v, cell) in enumerate(zip(self.fgraph.outputs, self.output_storage)):
            if v.owner is None:  # an input or a constant returned as it is
                if isinstance(v, Constant):
                    cell[0] = v.data
                else:
                    cell[0] = in_cells[self.fgraph.inputs.index(v)][0]
                continue
            to_device = self.out_device[j]
            if j in self.update_of:
                to_device = is_device_array(in_cells[self.update_of[j]][0])
            d = dev.get(v)
            if to_device:
                if d is None:
                    d = ctx.from_host(host[v])
                elif not d.is_c_contiguous:
                    # pyopencl's own methods (get, arithmetic) want contiguous arrays.
                    d = ctx.contiguous(d)
                cell[0] = to_cl_array(d, ctx.queue)
            else:
                cell[0] = host[v] if d is None else ctx.to_host(d)

    # -- introspection ---------------------------------------------------------------

    def opencl_source(self) -> str:
        """The OpenCL program of this function (every kernel it launches)."""
        return self.source

    @property
    def planned_device_bytes(self) -> int:
        """Bytes in the planned device blocks of the last signature run (0 before a run)."""
        plan = getattr(self, "last_plan", None)
        return 0 if plan is None else plan.planned_bytes

    def profile_summary(self) -> str:
        """Text: the device, the memory plan and bytes, transfers, and per-node times."""
        lines = [
            f"OpenCL engine on {self.ctx.describe()}: {len(self.order)} nodes, "
            f"{len(self.kernel_names)} kernels, {self.calls} calls"
        ]
        plan = getattr(self, "last_plan", None)
        if plan is not None:
            lines.append(plan.summary())
            lines.append(f"planned device bytes: {plan.planned_bytes}")
        fb = self.placement.fallbacks
        if fb:
            lines.append("on the host: " + ", ".join(f"{n.op} ({why})" for n, why in fb))
        for node in self.order:
            summary = getattr(self.impls.get(node), "summary", None)
            if summary is not None:
                lines.append(summary())
        t = self.ctx.transfers
        lines.append(
            f"transfers so far (all functions): {t.h2d} to device ({t.h2d_bytes} B), "
            f"{t.d2h} to host ({t.d2h_bytes} B)"
        )
        if self.profiling and self.calls:
            total = sum(self.node_times) or 1.0
            ranked = sorted(enumerate(self.node_times), key=lambda kv: -kv[1])[:15]
            for k, s in ranked:
                node = self.order[k]
                lines.append(
                    f"  {100 * s / total:5.1f}%  {s / self.calls * 1e3:8.3f} ms/call  "
                    f"{self.where[node]:6s}  {node.op}"
                )
        return "\n".join(lines)
