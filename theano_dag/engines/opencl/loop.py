"""``Scan`` on the device: the loop's state stays in device buffers for the whole loop.

The OpenCL engine implements a ``Scan`` node (:class:`ScanImpl`) when its step can be
compiled for the OpenCL engine (``scan(..., mode=Mode(linker="opencl"))``, or no mode:
see :func:`step_mode`) and it carries no values other than tensors. Then:

- sequences, initial states and non-sequences arrive as device arrays, like any
  kernel's inputs (the placement pass put one transfer before each host input);
- each state's history is one device buffer (all its ``m + n_steps`` rows, or the
  ``store`` rows of a circular buffer), each per-step output one buffer of
  ``n_steps`` rows; they are the node's outputs, in its planned blocks;
- each step calls the compiled step's :meth:`~theano_dag.engines.opencl.linker._Runner.run_device`
  on *views* of rows of those buffers (no copy), and the kernel computing each new
  row writes it straight into its buffer row;
- only ``n_steps``, and with ``until`` the condition (one scalar a step), are read on
  the host; what the user asks for comes back once, after the loop, as for any node.

Otherwise the node runs on the host (``Scan.perform``), visibly: ``debugprint`` shows
the ``HostFromGpu`` before it and ``opencl_profile`` lists it under "on the host". A
step that runs some of its own ops on the host warns once, naming them (each step then
copies their values across).

>>> from theano_dag.engines.opencl.impl import BASIC_OPS
>>> from theano_dag.scan.op import Scan
>>> Scan in BASIC_OPS
True
"""

from __future__ import annotations

import warnings

import numpy as np

from theano_dag.engines.inner import InnerMode, compile_inner, default_mode
from theano_dag.engines.opencl.impl import (
    Impl,
    Unsupported,
    copy_source,
    copy_to_contiguous,
    register_impl,
)
from theano_dag.engines.opencl.linker import OpenCLLinker
from theano_dag.engines.opencl.values import DArr
from theano_dag.scalar.basic import OPENCL_TYPES
from theano_dag.scan.op import Scan
from theano_dag.tensor.type import TensorType

__all__ = ["ScanImpl", "HostStepWarning", "step_mode"]


class HostStepWarning(UserWarning):
    """A ``Scan`` step on the OpenCL engine runs some of its ops on the host."""


def _row(a: DArr, i: int) -> DArr:
    """Row ``i`` of ``a`` as a view (no copy)."""
    return a.view(a.shape[1:], a.strides[1:], a.offset + i * a.strides[0])


def _rows(a: DArr, start: int, stop: int) -> DArr:
    """Rows ``start:stop`` of ``a`` as a view."""
    return a.view((stop - start, *a.shape[1:]), a.strides, a.offset + start * a.strides[0])


def step_mode(op):
    """The mode the step of ``op`` compiles with on this engine, or Unsupported saying why.

    A loop given no mode (``scan(..., mode=None)``) runs its step on the engine that runs
    the loop: the default mode's optimizer, this engine's linker. A mode given for
    another engine is kept, and the loop runs on the host.
    """
    mode = op.mode
    if mode is None:
        mode = default_mode()
        if not isinstance(mode.linker, OpenCLLinker) and hasattr(mode, "clone"):
            mode = mode.clone(linker=OpenCLLinker())
    linker = getattr(mode, "linker", None)
    if not isinstance(linker, OpenCLLinker):
        raise Unsupported(
            f"its step is compiled for {type(linker).__name__}, not the OpenCL engine "
            "(scan(..., mode=Mode(linker='opencl')) runs the loop on the device)"
        )
    return mode


class ScanImpl(Impl):
    """A ``Scan`` whose state stays on the device (see the module docstring)."""

    host_inputs = (0,)  # n_steps

    def __init__(self, node, ctx):
        super().__init__(node, ctx)
        op = node.op
        if op.n_carry:
            raise Unsupported("it carries non-tensor values (random generators) step to step")
        for v in [*node.inputs[1:], *node.outputs]:
            if not isinstance(v.type, TensorType) or v.type.dtype not in OPENCL_TYPES:
                raise Unsupported(f"its value {v} of type {v.type} has no device type")
        self.mode = step_mode(op)
        self.fn = None  # the compiled step, on first run

    def sources(self):
        out = {}
        for v in self.node.outputs:
            ctype = OPENCL_TYPES[v.type.dtype]
            for ndim in (v.type.ndim - 1, v.type.ndim):  # a row; initial rows
                name, src = copy_source(ndim, ctype)
                out[name] = src
        return out

    # -- the step -------------------------------------------------------------------

    def step(self):
        """The step's runner (``linker._Runner``), compiled once, its outputs left on
        the device."""
        if self.fn is None:
            op = self.node.op
            linker = self.mode.linker
            step_linker = OpenCLLinker(
                return_device_arrays=True,
                host_fallback=linker.host_fallback,
                build_options=linker.build_options,
            )
            fn = compile_inner(
                list(op.inner_inputs),
                list(op.inner_outputs),
                InnerMode(step_linker, self.mode.optimizer),
            )
            host = fn.thunk.placement.fallbacks
            if host:
                names = ", ".join(sorted({str(n.op) for n, _ in host}))
                warnings.warn(
                    f"{op}: the OpenCL engine runs the step's {names} on the host; each "
                    "step copies their inputs and outputs between host and device",
                    HostStepWarning,
                    stacklevel=2,
                )
            self.fn = fn
        return self.fn.thunk

    def summary(self) -> str:
        """One line for ``opencl_profile``: the loop, where its state and its step run."""
        head = f"loop {self.node.op}: state on the device"
        if self.fn is None:
            return head + ", step not compiled yet (no call)"
        runner = self.fn.thunk
        host = runner.placement.fallbacks
        where = ", ".join(sorted({str(n.op) for n, _ in host})) + " on the host" if host else ""
        return f"{head}, step of {len(runner.order)} nodes, {len(runner.kernel_names)} kernels" + (
            f" ({where})" if where else ""
        )

    # -- copies on the device ---------------------------------------------------------

    def _copy(self, src, dst: DArr):
        """``dst[...] = src``: on the device for a DArr, one upload for a host value."""
        if not isinstance(src, DArr):
            self.ctx.upload(np.asarray(src, dtype=dst.dtype), dst.data, dst.offset)
        elif src.size == 0:
            return
        elif src.is_c_contiguous:
            cl = self.ctx.cl
            cl.enqueue_copy(
                self.ctx.queue,
                dst.data,
                src.data,
                byte_count=src.nbytes,
                src_offset=src.offset,
                dst_offset=dst.offset,
            )
        else:
            copy_to_contiguous(self, src, dst)

    # -- the loop -------------------------------------------------------------------------

    def run(self, inputs, out):
        op = self.node.op
        n_steps, seqs, inits, _carries, nonseqs = op.split_outer(inputs)
        n = op.check_steps(n_steps, seqs)
        if n == 0:
            return self._run_on_host(inputs)
        ctx = self.ctx
        outvars = self.node.outputs
        nst, n_nitsot = op.n_states, op.n_nitsot
        buffers, sizes = [], []
        for k, (init, m, var) in enumerate(zip(inits, op.mintaps, outvars)):
            if init.shape[0] < m:
                raise ValueError(
                    f"{op}: state {k} has taps {list(op.state_taps[k])} and needs "
                    f"{m} initial steps, but its initial value has {init.shape[0]}"
                )
            # Row p of the state's history lives at p % size (size < m + n: circular).
            size = m + n if not op.store[k] else min(op.store[k], m + n)
            buf = out(k, (size, *init.shape[1:]), var.type.dtype)
            self._copy(_rows(init, 0, m), _rows(buf, 0, m))
            buffers.append(buf)
            sizes.append(size)
        # Each step's tap reads: (buffer, offset of the tap from t, size).
        tap_reads = [
            (buf, m + tap, size)
            for buf, m, size, taps in zip(buffers, op.mintaps, sizes, op.state_taps)
            for tap in taps
        ]
        nitsot = [None] * n_nitsot
        runner = self.step()
        steps = n
        for t in range(n):
            args = [_row(s, t) for s in seqs]
            args += [_row(buf, (t + off) % size) for buf, off, size in tap_reads]
            args += nonseqs
            targets = {
                k: _row(buf, (t + m) % size)
                for k, (buf, m, size) in enumerate(zip(buffers, op.mintaps, sizes))
            }
            for j, arr in enumerate(nitsot):
                if arr is not None:
                    targets[nst + j] = _row(arr, t)
            outs = runner.run_device(args, targets)
            for k in range(nst):
                row, target = outs[k], targets[k]
                shape = tuple(np.shape(row)) if not isinstance(row, DArr) else row.shape
                if shape != target.shape:
                    raise ValueError(
                        f"{op}: step {t} gave state {k} the shape {shape}, but "
                        f"its initial value has rows of shape {target.shape}"
                    )
                if row is not target:
                    self._copy(row, target)
            for j in range(n_nitsot):
                row = outs[nst + j]
                shape = tuple(np.shape(row)) if not isinstance(row, DArr) else row.shape
                if nitsot[j] is None:
                    nitsot[j] = out(nst + j, (n, *shape), outvars[nst + j].type.dtype)
                    target = _row(nitsot[j], t)
                else:
                    target = targets[nst + j]
                    if shape != target.shape:
                        raise ValueError(
                            f"{op}: step {t} gave output {nst + j} the shape {shape}, "
                            f"the steps before {target.shape}"
                        )
                if row is not target:
                    self._copy(row, target)
            if op.has_until:
                cond = outs[-1]
                # The one value a step reads on the host: whether the loop goes on.
                if isinstance(cond, DArr):
                    cond = ctx.to_host(cond)
                if bool(np.asarray(cond)):
                    steps = t + 1
                    break
        results = []
        for buf, size, m in zip(buffers, sizes, op.mintaps):
            written = m + steps  # rows of history: initial ones, then steps
            if written > size:
                # The circular buffer, its oldest kept row first.
                first = written % size
                res = DArr(ctx.allocate(buf.nbytes), 0, buf.shape, buf.dtype)
                self._copy(_rows(buf, first, size), _rows(res, 0, size - first))
                self._copy(_rows(buf, 0, first), _rows(res, size - first, size))
                buf = res
            elif written < size:
                buf = _rows(buf, 0, written)
            results.append(buf)
        for arr in nitsot:
            results.append(arr if steps == n else _rows(arr, 0, steps))
        return results

    def _run_on_host(self, inputs):
        """No step runs: ``Scan.perform`` gives the outputs' shapes (a few copies)."""
        ctx = self.ctx
        vals = [inputs[0]] + [ctx.to_host(d) for d in inputs[1:]]
        cells = [[None] for _ in self.node.outputs]
        self.node.op.perform(self.node, vals, cells)
        return [ctx.from_host(c[0]) for c in cells]


register_impl(Scan)(ScanImpl)
