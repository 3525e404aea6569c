"""Where each node runs: the rewrite that puts ``GpuFromHost``/``HostFromGpu`` on the graph.

Walking the graph in topological order, every node gets one of:

* ``device``: it has an implementation (see ``impl.BASIC_OPS``); its inputs
  must be on the device, except those its implementation reads on the host
  (shape vectors, indices, scalars passed by value);
* ``meta``: ``Shape``/``Shape_i`` read only the shape of their input, wherever
  it is, and give a small host value;
* ``host``: small scalar or integer-vector arithmetic on host values (shape
  computations), run with ``perform``; or, with ``config.opencl__host_fallback``,
  an op that has no implementation. With the fallback off such an op raises
  NotImplementedError naming it.

Graph inputs and constants are on both sides (the engine copies them where
they are read); every other value that crosses sides gets one transfer node,
shared by all its readers, so ``debugprint`` shows each copy.

``place`` runs twice per function: as the optdb pass ``device_placement`` (tags
``opencl``, ``device_placement``; ``theano_dag.opt.lowering``), which inserts the
transfers, and in ``OpenCLLinker.accept`` with ``lower=False``, which only reads the
placed graph back (and raises :class:`NotPlaced` where a transfer is missing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from theano_dag.engines.opencl import (  # noqa: F401 (register kernels)
    assign,
    blas,
    elemwise,
    reduce,
)
from theano_dag.engines.opencl.impl import Unsupported, make_impl
from theano_dag.engines.opencl.ops import GpuFromHost, HostFromGpu, gpu_from_host, host_from_gpu
from theano_dag.graph.basic import Constant
from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp
from theano_dag.graph.utils import copy_stack_trace
from theano_dag.tensor.shape import Shape, Shape_i

__all__ = ["Placement", "NotPlaced", "place", "DEVICE", "HOST", "BOTH"]

DEVICE, HOST, BOTH = "device", "host", "both"
TRANSFER_REASON = "opencl_transfer"


class NotPlaced(ValueError):
    """The graph lacks a transfer node that the OpenCL engine needs: the
    ``device_placement`` pass did not run on it."""


@dataclass
class Placement:
    """The result of :func:`place`: per node ``where`` and ``impls``, per variable ``loc``."""

    where: dict = field(default_factory=dict)
    impls: dict = field(default_factory=dict)
    loc: dict = field(default_factory=dict)
    fallbacks: list = field(default_factory=list)  # (node, reason) run on the host
    transfers: list = field(default_factory=list)  # the transfer nodes inserted

    def location(self, var):
        if isinstance(var, Constant):
            return BOTH
        return self.loc.get(var, BOTH)


def _meta_ops():
    return (Shape, Shape_i)


def _is_small_host_result(node) -> bool:
    """Outputs a host computation may produce without moving data: 0-d values and
    integer vectors (shapes)."""
    for o in node.outputs:
        ndim = getattr(o.type, "ndim", None)
        dtype = getattr(o.type, "dtype", "")
        if ndim == 0 or all(getattr(o.type, "broadcastable", ())):
            continue
        if ndim == 1 and (dtype.startswith("int") or dtype.startswith("uint")):
            continue
        return False
    return True


def _fallback_error(node, reason):
    return NotImplementedError(
        f"The OpenCL engine cannot run {node.op} ({reason}); node: {node}. Set "
        "config.opencl__host_fallback=True to run it on the host with explicit "
        "GpuFromHost/HostFromGpu transfers, or rewrite it into ops the engine supports "
        "(see theano_dag.engines.opencl.BASIC_OPS)."
    )


def place(fgraph, ctx, host_fallback: bool, lower: bool = True) -> Placement:
    """Decide where every node of ``fgraph`` runs and insert the transfer nodes (in place).

    Returns the :class:`Placement`. Idempotent: transfer nodes already in the
    graph are kept, and no second copy of one is made. ``lower=False`` changes
    nothing: a value on the wrong side raises :class:`NotPlaced`.
    """
    meta_ops = _meta_ops()
    pl = Placement()
    loc = pl.loc
    for v in fgraph.inputs:
        loc[v] = BOTH
    made: dict = {}  # (var, direction) -> transfer output

    def transfer(var, to_device):
        key = (var, to_device)
        if key not in made:
            new = gpu_from_host(var) if to_device else host_from_gpu(var)
            copy_stack_trace(var, new)  # an error in the copy names the value's lines
            node = new.owner
            pl.where[node] = "h2d" if to_device else "d2h"
            loc[new] = DEVICE if to_device else HOST
            pl.transfers.append(node)
            made[key] = new
        return made[key]

    def move_inputs(node, wanted):
        """Give ``node`` input ``i`` on side ``wanted[i]`` (DEVICE, HOST or None: any)."""
        for i, var in enumerate(list(node.inputs)):
            have = pl.location(var)
            want = wanted[i]
            if want is None or have in (BOTH, want):
                continue
            if not lower:
                side = "device" if want == DEVICE else "host"
                raise NotPlaced(
                    f"The OpenCL engine needs input {i} of {node} ({var}) on the {side}, "
                    "and the graph has no transfer for it: the optdb pass "
                    "'device_placement' did not run (a Mode whose query includes "
                    "'opencl' and does not exclude 'device_placement' runs it)"
                )
            new = transfer(var, want == DEVICE)
            fgraph.change_input(node, i, new, reason=TRANSFER_REASON)

    for node in fgraph.toposort():
        op = node.op
        if isinstance(op, GpuFromHost):
            pl.where[node] = "h2d"
            loc[node.outputs[0]] = DEVICE
            made[(node.inputs[0], True)] = node.outputs[0]
            continue
        if isinstance(op, HostFromGpu):
            pl.where[node] = "d2h"
            loc[node.outputs[0]] = HOST
            made[(node.inputs[0], False)] = node.outputs[0]
            continue
        if isinstance(op, meta_ops):
            pl.where[node] = "meta"
            for o in node.outputs:
                loc[o] = HOST
            continue
        in_locs = [pl.location(v) for v in node.inputs]
        if (
            all(loc_ == HOST or isinstance(v, Constant) for v, loc_ in zip(node.inputs, in_locs))
            and any(loc_ == HOST for loc_ in in_locs)
            and _is_small_host_result(node)
        ):
            # Shape arithmetic: the values are already on the host and tiny.
            pl.where[node] = "host"
            for o in node.outputs:
                loc[o] = HOST
            continue
        if isinstance(op, (DeepCopyOp, ViewOp)) and in_locs[0] == HOST:
            # The copy that keeps two outputs apart (insert_deepcopy, after the
            # optimizer) of a value the host computed is made on the host: moving the
            # value to the device only to copy it there and bring it back gains nothing.
            pl.where[node] = "host"
            for o in node.outputs:
                loc[o] = HOST
            continue
        host_scalars = {
            i
            for i, (v, loc_) in enumerate(zip(node.inputs, in_locs))
            if loc_ == HOST and all(getattr(v.type, "broadcastable", (False,)))
        }
        try:
            impl = make_impl(node, ctx, host_scalars)
        except Unsupported as e:
            if not host_fallback:
                raise _fallback_error(node, str(e)) from None
            pl.where[node] = "host"
            pl.fallbacks.append((node, str(e)))
            move_inputs(node, [HOST] * len(node.inputs))
            for o in node.outputs:
                loc[o] = HOST
            continue
        pl.where[node] = "device"
        pl.impls[node] = impl
        host_in = set(impl.host_inputs)
        move_inputs(node, [HOST if i in host_in else DEVICE for i in range(len(node.inputs))])
        for o in node.outputs:
            loc[o] = DEVICE
    return pl
