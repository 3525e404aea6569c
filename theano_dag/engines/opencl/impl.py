"""How each op runs on the device: the ``Impl`` contract, the registry, and the view ops.

An engine registers one *implementation factory* per Op class (the Ops know
nothing of the engine). ``make_impl(node, ctx)`` returns an :class:`Impl` or
raises :class:`Unsupported` saying why; the placement rewrite runs such nodes
on the host. ``BASIC_OPS`` is the set of Op classes with an implementation.

An Impl says, for the memory planner, which outputs view which input
(``view_of``) and which may overwrite a dying input (``inplace_pairs``), gives
its kernel sources, and ``run``s: device inputs arrive as :class:`DArr`, inputs
listed in ``host_inputs`` as numpy values (shape vectors, indices), and each
output is asked from the engine with ``out(k, shape, dtype)`` so that it lands
in its planned block.
"""

from __future__ import annotations

import numpy as np

from theano_dag.engines.opencl.values import DArr, c_strides
from theano_dag.graph.basic_ops import BasicOps
from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp
from theano_dag.scalar.basic import OPENCL_TYPES, ScalarType
from theano_dag.tensor.elemwise import DimShuffle
from theano_dag.tensor.shape import Rebroadcast, Reshape
from theano_dag.tensor.subtensor import Subtensor

__all__ = [
    "Impl",
    "Unsupported",
    "IMPLS",
    "BASIC_OPS",
    "register_impl",
    "make_impl",
    "I64",
    "copy_to_contiguous",
    "type_scalar_args",
    "basic_view",
]

I64 = np.int64
# Work-group shapes for 1-, 2- and 3-d launches that leave the size to the engine.
_GROUPS = {1: (64,), 2: (8, 8), 3: (4, 4, 4)}


class Unsupported(Exception):
    """This node has no device implementation (the message says why)."""


class Impl:
    """One node's device implementation (see the module docstring)."""

    host_inputs: tuple = ()

    def __init__(self, node, ctx):
        self.node = node
        self.ctx = ctx
        self.kernels: dict = {}
        self.typed: set = set()  # the kernels whose scalar arguments' types are declared
        self.last_launch = None  # the kernel this node ran last (tests, profiles)

    def view_of(self) -> dict:
        """``{output index: input index}`` for outputs that alias an input."""
        return {}

    def inplace_pairs(self) -> list:
        """``(output index, input index)`` pairs that may share memory when the input dies."""
        return []

    def sources(self) -> dict:
        """``{kernel name: OpenCL source}`` this node needs."""
        return {}

    def bind(self, program):
        """Take this node's kernels from the built program."""
        cl = self.ctx.cl
        self.kernels = {name: cl.Kernel(program, name) for name in self.sources()}

    def launch(self, name, gsize, args, lsize=None):
        """Enqueue kernel ``name`` over ``gsize`` work-items (nothing when it is 0).

        Without ``lsize`` the work-group size is fixed (``GROUP`` items, the
        global size padded to a multiple: kernels check their bounds), so that a
        driver that compiles per work-group size (PoCL) compiles each kernel once.
        """
        if any(g == 0 for g in gsize):
            return
        if lsize is None:
            lsize = _GROUPS[len(gsize)]
            gsize = tuple(-(-g // w) * w for g, w in zip(gsize, lsize))
        k = self.kernels[name]
        self.last_launch = name
        if name not in self.typed:
            type_scalar_args(k, args)
            self.typed.add(name)
        k.set_args(*args)
        self.ctx.cl.enqueue_nd_range_kernel(self.ctx.queue, k, gsize, lsize)

    def run(self, inputs, out):
        raise NotImplementedError


def type_scalar_args(kernel, args):
    """Declare the types of ``kernel``'s scalar arguments from a first call's ``args``,
    when each is a numpy scalar (as the engine passes them).

    pyopencl then packs them itself: setting the arguments of an undeclared kernel costs
    tens of microseconds a scalar (measured on PoCL), which a loop pays at every step.
    """
    if any(isinstance(a, (int, float)) for a in args):
        return  # a Python number: its C type is the kernel's to say, not the value's
    kernel.set_scalar_arg_dtypes([a.dtype if isinstance(a, np.generic) else None for a in args])


IMPLS: dict = {}


def register_impl(*op_classes):
    """Class decorator: ``factory(node, ctx)`` implements nodes of ``op_classes``."""

    def deco(factory):
        for cls in op_classes:
            IMPLS[cls] = factory
        return factory

    return deco


#: The Op classes with a device implementation (a live view of the registry).
BASIC_OPS = BasicOps(source=IMPLS, name="opencl")


def make_impl(node, ctx, host_scalars=frozenset()) -> Impl:
    """The device implementation of ``node``, or Unsupported.

    ``host_scalars``: positions of inputs that are one-element values on the host,
    which some kernels take by value.
    """
    for v in node.outputs:
        if isinstance(v.type, ScalarType):
            # a numpy scalar, not an array: the host's value is what the user gets
            raise Unsupported(f"{node.op}: its output {v} is a scalar (ScalarType), no array")
    for v in (*node.inputs, *node.outputs):
        dtype = getattr(v.type, "dtype", None)
        if dtype is not None and dtype not in OPENCL_TYPES:
            # complex values: no OpenCL type to copy, view or compute them with
            raise Unsupported(f"{node.op}: no OpenCL type for {dtype} ({v})")
        if dtype == "float16":
            # Loading or storing a half needs cl_khr_fp16 (PoCL on a CPU lacks it, and the
            # copy kernels failed to build); the arithmetic kernels refuse it too.
            raise Unsupported(f"{node.op}: float16 values ({v}) are computed on the host")
    for cls in type(node.op).__mro__:
        factory = IMPLS.get(cls)
        if factory is not None:
            if getattr(factory, "takes_host_scalars", False):
                return factory(node, ctx, host_scalars=frozenset(host_scalars))
            return factory(node, ctx)
    raise Unsupported(f"no OpenCL kernel for {type(node.op).__name__}")


# ---------------------------------------------------------------------------
# Copies


def copy_source(ndim: int, ctype: str) -> tuple[str, str]:
    """``(name, source)`` of a kernel copying a strided array into a contiguous one.

    >>> name, src = copy_source(2, "float")
    >>> name, "d1" in src
    ('copy2_float', True)
    """
    name = f"copy{ndim}_{ctype.replace(' ', '_')}"
    dims = "".join(f", const long d{k}" for k in range(1, ndim))
    strides = "".join(f", const long s{k}" for k in range(ndim))
    lines = ["    long r = gid;"]
    idx = []
    for k in range(ndim - 1, 0, -1):
        lines.append(f"    const long i{k} = r % d{k}; r /= d{k};")
    if ndim:
        lines.append("    const long i0 = r;")
        idx = [f"i{k} * s{k}" for k in range(ndim)]
    src = (
        f"__kernel void {name}(const long n{dims}, __global const {ctype}* x, const long xo"
        f"{strides}, __global {ctype}* y, const long yo)\n{{\n"
        "    const long gid = get_global_id(0);\n    if (gid >= n) return;\n"
        + "\n".join(lines)
        + f"\n    y[yo + gid] = x[xo{''.join(' + ' + i for i in idx)}];\n}}\n"
    )
    return name, src


def copy_to_contiguous(impl: Impl, x: DArr, dst: DArr):
    """Copy the strided ``x`` into the contiguous ``dst`` with ``impl``'s copy kernel."""

    name, _ = copy_source(x.ndim, OPENCL_TYPES[x.dtype.name])
    args = [I64(x.size)] + [I64(d) for d in x.shape[1:]]
    args += [x.data, I64(x.elem_offset)] + [I64(s) for s in x.elem_strides()]
    args += [dst.data, I64(dst.elem_offset)]
    impl.launch(name, (x.size,), args)


class _CopyImpl(Impl):
    """Copies into a fresh contiguous output (DeepCopyOp, and the copy half of others)."""

    def _copy_sources(self, var):
        name, src = copy_source(var.ndim, OPENCL_TYPES[var.dtype])
        return {name: src}

    def sources(self):
        return self._copy_sources(self.node.inputs[0])

    def run(self, inputs, out):
        (x,) = inputs
        y = out(0, x.shape, x.dtype)
        copy_to_contiguous(self, x, y)
        return [y]


def _deep_copy_factory(node, ctx):
    if getattr(node.inputs[0].type, "dtype", None) is None:
        raise Unsupported(f"DeepCopyOp: {node.inputs[0].type} is no array: copied on the host")
    return _CopyImpl(node, ctx)


class _ViewImpl(Impl):
    def view_of(self):
        return {0: 0}


class _IdentityView(_ViewImpl):
    def run(self, inputs, out):
        return [inputs[0]]


class _DimShuffleImpl(_ViewImpl):
    def run(self, inputs, out):
        (x,) = inputs
        op = self.node.op
        for d in op.drop:
            if x.shape[d] != 1:
                raise ValueError(
                    f"{op}: cannot drop dimension {d} of an input of shape {x.shape} "
                    "(its length is not 1)"
                )
        shape, strides = [], []
        for o in op.new_order:
            if o == "x":
                shape.append(1)
                strides.append(0)
            else:
                shape.append(x.shape[o])
                strides.append(x.strides[o])
        return [x.view(shape, strides)]


class _RebroadcastImpl(_ViewImpl):
    """The same memory, its broadcastable dimensions checked to have length 1."""

    def run(self, inputs, out):
        (x,) = inputs
        op = self.node.op
        for a, b in op.axis.items():
            if b and x.shape[a] != 1:
                raise ValueError(
                    f"{op}: dimension {a} of the input has length {x.shape[a]}, expected 1 "
                    f"(it was declared broadcastable; the input's shape is {x.shape})"
                )
        return [x]


class _ReshapeImpl(_ViewImpl):
    host_inputs = (1,)

    def sources(self):
        return _CopyImpl._copy_sources(self, self.node.inputs[0])

    def run(self, inputs, out):
        x, shp = inputs
        op = self.node.op
        shp = [int(s) for s in np.asarray(shp).reshape(-1)]
        if len(shp) != op.ndim:
            raise ValueError(
                f"{op}: the shape {tuple(shp)} has {len(shp)} entries, " f"expected {op.ndim}"
            )
        if shp.count(-1) > 1 or any(s < -1 for s in shp):
            raise ValueError(f"{op}: invalid shape {tuple(shp)}")
        if -1 in shp:
            rest = int(np.prod([s for s in shp if s != -1]))
            if rest == 0 or x.size % rest:
                raise ValueError(
                    f"{op}: cannot reshape an array of shape {x.shape} into " f"shape {tuple(shp)}"
                )
            shp[shp.index(-1)] = x.size // rest
        if int(np.prod(shp)) != x.size:
            raise ValueError(
                f"{op}: cannot reshape an array of shape {x.shape} into shape " f"{tuple(shp)}"
            )
        for d, s in enumerate(self.node.outputs[0].type.shape):
            if s is not None and shp[d] != s:
                raise ValueError(
                    f"{op}: output shape {tuple(shp)} differs from the static "
                    f"shape {self.node.outputs[0].type.shape}"
                )
        if not x.is_c_contiguous:
            # Not a view then: a contiguous copy first (the planner was told "view", so
            # this copy is allocated outside the plan).
            y = out(0, x.shape, x.dtype, planned=False)
            copy_to_contiguous(self, x, y)
            x = y
        return [x.view(shp, c_strides(shp, x.dtype.itemsize))]


def _norm_index(i, n, d, op):
    if not -n <= i < n:
        raise IndexError(f"{op}: index {i} is out of bounds for axis {d} with size {n}")
    return i + n if i < 0 else i


class _SubtensorImpl(_ViewImpl):
    """Basic indexing as a view: an offset and new strides, no copy."""

    def __init__(self, node, ctx):
        super().__init__(node, ctx)
        self.host_inputs = tuple(range(1, len(node.inputs)))

    def run(self, inputs, out):
        x, *vals = inputs
        return [basic_view(x, self.node.op, vals)]


def basic_view(x: DArr, op, vals) -> DArr:
    """The view of ``x`` that basic indexing ``op.idx_list`` with the index values ``vals``
    selects (an offset and new strides, no copy)."""
    if len(op.idx_list) > x.ndim:
        raise IndexError(f"{op}: too many indices for an array of {x.ndim} dimensions")
    it = iter(int(v) for v in vals)
    offset, shape, strides = x.offset, [], []
    for d, entry in enumerate(op.idx_list):
        n, st = x.shape[d], x.strides[d]
        if entry[0] == "int":
            offset += _norm_index(next(it), n, d, op) * st
            continue
        parts = [next(it) if present else None for present in entry[1:]]
        start, stop, step = slice(*parts).indices(n)
        length = len(range(start, stop, step))
        if length:
            offset += start * st
        shape.append(length)
        strides.append(st * step)
    shape += x.shape[len(op.idx_list) :]
    strides += x.strides[len(op.idx_list) :]
    return x.view(shape, strides, offset)


def _install():
    IMPLS[DeepCopyOp] = _deep_copy_factory
    IMPLS[ViewOp] = _IdentityView
    IMPLS[DimShuffle] = _DimShuffleImpl
    IMPLS[Reshape] = _ReshapeImpl
    IMPLS[Rebroadcast] = _RebroadcastImpl
    IMPLS[Subtensor] = _SubtensorImpl


_install()
