"""Writing into part of an array on the device: ``IncSubtensor`` (set or add ``y`` into a
basic-indexed view of a copy of ``x``) and ``Join`` (each input copied into its slice).

Both use one kernel per (dimensions, types, set or add): ``dst[view] = src`` or
``dst[view] += src``, the view and the source both strided, the source broadcast (a zero
stride) along its length-1 and missing leading dimensions. A loop's gradient shifts its
window of cotangents with them (``scan.grad``), so a loop with taps such as ``[-1, -3]``
differentiates on the device.

>>> name, src = assign_source(2, "double", "float", inc=True)
>>> name, "+=" in src
('inc2_double_float', True)
"""

from __future__ import annotations

import numpy as np

from theano_dag.engines.opencl.impl import (
    I64,
    Impl,
    Unsupported,
    basic_view,
    register_impl,
)
from theano_dag.engines.opencl.values import DArr
from theano_dag.scalar.basic import OPENCL_TYPES
from theano_dag.tensor.basic import Join
from theano_dag.tensor.subtensor import IncSubtensor

__all__ = ["assign_source", "IncSubtensorImpl", "JoinImpl"]


def assign_source(
    ndim: int, dst_ctype: str, src_ctype: str, inc: bool, dst_bool: bool = False
) -> tuple[str, str]:
    """``(name, source)`` of the kernel ``dst[view] (+)= (dst type) src`` over ``ndim``
    dimensions, both sides given by element offsets and strides. ``dst_bool``: the
    destination holds bools (OpenCL's ``uchar``): what is stored is 0 or 1, and an
    increment is a logical or, as numpy's ``+=`` on bools.

    >>> print(assign_source(1, "uchar", "uchar", inc=True, dst_bool=True)[1].splitlines()[-2])
        y[yo + i0 * ys0] = (uchar)((y[yo + i0 * ys0] != 0) | (x[xo + i0 * xs0] != 0));
    """
    kind = ("inc" if inc else "set") + ("b" if dst_bool else "")
    name = f"{kind}{ndim}_{dst_ctype}_{src_ctype}".replace(" ", "_")
    dims = "".join(f", const long d{k}" for k in range(1, ndim))
    xs = "".join(f", const long xs{k}" for k in range(ndim))
    ys = "".join(f", const long ys{k}" for k in range(ndim))
    lines = ["    long r = gid;"]
    for k in range(ndim - 1, 0, -1):
        lines.append(f"    const long i{k} = r % d{k}; r /= d{k};")
    if ndim:
        lines.append("    const long i0 = r;")
    xi = "".join(f" + i{k} * xs{k}" for k in range(ndim))
    yi = "".join(f" + i{k} * ys{k}" for k in range(ndim))
    dst_e, src_e = f"y[yo{yi}]", f"x[xo{xi}]"
    if dst_bool:
        value = f"({src_e} != 0)"
        if inc:
            value = f"(({dst_e} != 0) | {value})"
        store = f"{dst_e} = ({dst_ctype}){value};"
    else:
        store = f"{dst_e} {'+=' if inc else '='} ({dst_ctype}){src_e};"
    src = (
        f"__kernel void {name}(const long n{dims}, __global const {src_ctype}* x, "
        f"const long xo{xs}, __global {dst_ctype}* y, const long yo{ys})\n{{\n"
        "    const long gid = get_global_id(0);\n    if (gid >= n) return;\n"
        + "\n".join(lines)
        + f"\n    {store}\n}}\n"
    )
    return name, src


def _is_bool(dtype) -> bool:
    return np.dtype(dtype) == np.bool_


def _ctype(dtype) -> str:
    name = np.dtype(dtype).name
    if name not in OPENCL_TYPES:
        raise Unsupported(f"no OpenCL type for {name}")
    return OPENCL_TYPES[name]


class _AssignImpl(Impl):
    """An op that writes sources into views of its output with :func:`assign_source`."""

    def _assign(self, src: DArr, dst: DArr, inc: bool, what):
        """``dst (+)= src``, ``src`` broadcast to ``dst``'s shape (ValueError if it cannot be)."""
        if src.ndim > dst.ndim:
            raise ValueError(f"{what}: cannot broadcast shape {src.shape} to {dst.shape}")
        pad = dst.ndim - src.ndim
        shape = (1,) * pad + src.shape
        strides = (0,) * pad + src.elem_strides()
        sstrides = []
        for s, st, d in zip(shape, strides, dst.shape):
            if s != d and s != 1:
                raise ValueError(f"{what}: cannot broadcast shape {src.shape} to {dst.shape}")
            sstrides.append(0 if s == 1 else st)
        if dst.size == 0:
            return
        name, _ = assign_source(
            dst.ndim, _ctype(dst.dtype), _ctype(src.dtype), inc, _is_bool(dst.dtype)
        )
        args = [I64(dst.size)] + [I64(d) for d in dst.shape[1:]]
        args += [src.data, I64(src.elem_offset)] + [I64(s) for s in sstrides]
        args += [dst.data, I64(dst.elem_offset)] + [I64(s) for s in dst.elem_strides()]
        self.launch(name, (dst.size,), args)


class IncSubtensorImpl(_AssignImpl):
    """``x[idx] = y`` or ``x[idx] += y`` on a copy of ``x`` (basic indices, read on the
    host)."""

    def __init__(self, node, ctx):
        super().__init__(node, ctx)
        self.host_inputs = tuple(range(2, len(node.inputs)))
        x, y = node.inputs[:2]
        self.name, self.src = assign_source(
            x.type.ndim - _int_entries(node.op),
            _ctype(x.type.dtype),
            _ctype(y.type.dtype),
            inc=not node.op.set_instead_of_inc,
            dst_bool=_is_bool(x.type.dtype),
        )
        self.copy_name, self.copy_src = assign_source(
            x.type.ndim,
            _ctype(x.type.dtype),
            _ctype(x.type.dtype),
            inc=False,
            dst_bool=_is_bool(x.type.dtype),
        )

    def sources(self):
        return {self.name: self.src, self.copy_name: self.copy_src}

    def run(self, inputs, out):
        x, y, *vals = inputs
        op = self.node.op
        res = out(0, x.shape, x.dtype)
        self._assign(x, res, False, op)
        self._assign(y, basic_view(res, op, vals), not op.set_instead_of_inc, op)
        return [res]


def _int_entries(op) -> int:
    """How many dimensions the basic indices of ``op`` remove (one per integer index)."""
    return sum(1 for entry in op.idx_list if entry[0] == "int")


class JoinImpl(_AssignImpl):
    """Each input copied into its slice of the output along ``axis``."""

    def __init__(self, node, ctx):
        super().__init__(node, ctx)
        out_var = node.outputs[0]
        if node.op.axis is None:
            raise Unsupported("its axis is an input")
        if any(v.type.dtype != out_var.type.dtype for v in node.inputs):
            raise Unsupported("its inputs' dtypes differ from its output's")
        self.axis = node.op.axis % out_var.type.ndim
        ctype = _ctype(out_var.type.dtype)
        self.name, self.src = assign_source(
            out_var.type.ndim, ctype, ctype, inc=False, dst_bool=_is_bool(out_var.type.dtype)
        )

    def sources(self):
        return {self.name: self.src}

    def run(self, inputs, out):
        op, axis = self.node.op, self.axis
        first = inputs[0]
        for x in inputs[1:]:
            if x.ndim != first.ndim or any(
                a != b for d, (a, b) in enumerate(zip(x.shape, first.shape)) if d != axis
            ):
                raise ValueError(f"{op}: cannot join shapes {[v.shape for v in inputs]}")
        shape = list(first.shape)
        shape[axis] = sum(x.shape[axis] for x in inputs)
        res = out(0, tuple(shape), first.dtype)
        start = 0
        for x in inputs:
            n = x.shape[axis]
            part = res.view(x.shape, res.strides, res.offset + start * res.strides[axis])
            self._assign(x, part, False, op)
            start += n
        return [res]


register_impl(IncSubtensor)(IncSubtensorImpl)
register_impl(Join)(JoinImpl)
