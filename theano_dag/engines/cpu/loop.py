"""The C loop of a ``Scan`` whose step is all fused elementwise kernels.

A loop's steps run the same compiled step on values of the same shapes, so after one step
run by Python the CPU engine knows every array each kernel reads and writes: the step's
inputs (views of one row each), the plan's buffers, the non-sequences. :func:`record_step`
runs that step and records its kernel calls; when the step made nothing but those calls
(each plan step one kernel, the C library loaded), :class:`KernelLoop` replays them from a
C loop (``native/loop_driver.c``) for the other steps: per step it points the input views
at their rows, calls the kernels, and copies the outputs into their rows. No Python runs,
no array is made, no shape is checked or planned per step (the kernels check their
operands themselves; an error code hands the step back to Python, which raises what numpy
would).

Without a compiler (``config.cxx=''``) :func:`loop_library` is None and the loop runs in
Python (``scan.op``).

>>> import numpy as np
>>> lib = loop_library()
>>> lib is None or lib.td_loop_arity() == MAX_ARGS
True
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from theano_dag.config import config
from theano_dag.engines.cpu.emit.csource import array_layout
from theano_dag.engines.cpu.native import c_source, cc

__all__ = ["KernelLoop", "MAX_ARGS", "loop_library", "record_step"]

# The most arrays one kernel call takes in the C loop (its switch of call arities).
MAX_ARGS = 8

_LIBS: dict = {}
_LOCK = threading.Lock()


class _Rows(ctypes.Structure):
    # td_rows: row (t + off) % size of an array whose row 0 starts at base.
    _fields_ = [
        ("base", ctypes.c_void_p),
        ("stride", ctypes.c_ssize_t),
        ("off", ctypes.c_long),
        ("size", ctypes.c_long),
    ]


def loop_library():
    """The loaded C loop driver for the configured compiler, or None (no compiler, no
    trusted array layout, or a failed build: the Python loop runs then)."""
    key = config.cxx
    if key in _LIBS:
        return _LIBS[key]
    with _LOCK:
        if key in _LIBS:
            return _LIBS[key]
        lib = None
        tc = cc.get_toolchain(key)
        if tc is not None and array_layout() is not None:
            try:
                path = cc.compile_library(
                    tc, c_source("loop_driver.c"), cc.kernel_dir(config.compiledir)
                )
                lib = ctypes.CDLL(path)
                lib.td_loop.restype = ctypes.c_long
                lib.td_loop_arity.restype = ctypes.c_int
            except (cc.CompileError, OSError):
                lib = None  # the Python loop runs
        _LIBS[key] = lib
        return lib


def _kernels_of(fn):
    """The CKernels of an inner function's CPU program, or None."""
    program = getattr(getattr(fn, "thunk", None), "program", None)
    lib = getattr(program, "ckernels", None)
    if lib is None or not getattr(lib, "ready", False):
        return None
    return lib.kernels


def record_step(fn, run, args):
    """Run one step, ``run(args)``, recording its kernel calls.

    ``fn`` is the step's ``InnerFunction`` and ``run`` its checked runner. Returns
    ``(outputs, calls)``: ``calls`` is a list of ``(C function, argument arrays)``, one
    per step of the plan that ran, or None when the step did anything but call loaded
    kernels (then the C loop cannot replay it).
    """
    kernels = _kernels_of(fn)
    plan = getattr(getattr(fn, "thunk", None), "current", None)
    if not kernels or plan is None:
        return run(args), None
    calls = []
    # A kernel's ctypes function itself, never a lazily binding stub: the C loop calls
    # the recorded functions by address.
    saved = [(k, k.bound_c() if hasattr(k, "bound_c") else k.c) for k in kernels]
    # A segment of the step's code runs its kernels in C, past their ``c``: while the
    # step is recorded, it runs them one by one through ``c``.
    segments = [(s, s.c) for s in list(fn.thunk.program.ckernels.segments)]

    def recorder(c):
        def call(*a):
            calls.append((c, a))
            return c(*a)

        return call

    for k, c in saved:
        k.c = recorder(c)
    for s, _c in segments:
        s.c = s.each
    try:
        outs = run(args)
    finally:
        for k, c in saved:
            k.c = c
        for s, c in segments:
            s.c = c
    # The plan is the one of these shapes (the runner looked it up): one kernel per step.
    if fn.thunk.current is not plan or len(calls) != len(plan.steps):
        return outs, None
    if any(not isinstance(c, ctypes._CFuncPtr) or len(a) > MAX_ARGS for c, a in calls):
        return outs, None
    return outs, calls


class KernelLoop:
    """Steps ``t0 .. n-1`` of a loop from C, replaying one recorded step.

    ``views``: ``(array, rows)`` per input view, ``rows`` being ``(outer array, offset,
    size)``: the view is pointed at row ``(t + offset) % size`` of the outer array each
    step. ``calls``: from :func:`record_step`. ``copies``: ``(output array, rows)``: the
    output's bytes go to row ``(t + offset) % size`` of the outer array. ``cond``: the
    until flag's output array, or None.
    """

    def __init__(self, lib, views, calls, copies, cond=None):
        self.lib = lib
        self._keep = (views, calls, copies, cond)  # the arrays the C loop points at
        self.nviews = len(views)
        self.views = (ctypes.c_void_p * max(1, len(views)))(*[id(v) for v, _ in views])
        self.view_rows = (_Rows * max(1, len(views)))(*[_rows(r) for _, r in views])
        self.ncalls = len(calls)
        self.fns = (ctypes.c_void_p * max(1, len(calls)))(
            *[ctypes.cast(c, ctypes.c_void_p).value for c, _ in calls]
        )
        self.nargs = (ctypes.c_int * max(1, len(calls)))(*[len(a) for _, a in calls])
        flat = [id(x) for _, a in calls for x in a]
        self.args = (ctypes.c_void_p * max(1, len(flat)))(*flat)
        self.ncopies = len(copies)
        self.src = (ctypes.c_void_p * max(1, len(copies)))(*[id(o) for o, _ in copies])
        self.dst_rows = (_Rows * max(1, len(copies)))(*[_rows(r) for _, r in copies])
        self.nbytes = (ctypes.c_ssize_t * max(1, len(copies)))(*[o.nbytes for o, _ in copies])
        self.cond = ctypes.c_void_p(id(cond) if cond is not None else None)
        self.cond_bytes = cond.nbytes if cond is not None else 0
        self.data_off = array_layout()["data"]

    @staticmethod
    def fits(outputs, rows):
        """Whether each output array can be copied as bytes into a row of its outer array
        (C-contiguous, same dtype and size as the row)."""
        for o, (arr, _, _) in zip(outputs, rows):
            if not isinstance(o, np.ndarray) or not o.flags.c_contiguous:
                return False
            if o.dtype != arr.dtype or o.shape != arr.shape[1:]:
                return False
        return True

    def run(self, t0, n):
        """Run steps ``t0 .. n-1``; returns ``(steps done, status)``, status 0: all,
        1: the until flag stopped it, 2: step ``steps done`` failed in a kernel (run it
        in Python to raise the error)."""
        status = ctypes.c_int(0)
        done = self.lib.td_loop(
            ctypes.c_long(t0),
            ctypes.c_long(n),
            ctypes.c_ssize_t(self.data_off),
            ctypes.c_int(self.nviews),
            self.views,
            self.view_rows,
            ctypes.c_int(self.ncalls),
            self.fns,
            self.nargs,
            self.args,
            ctypes.c_int(self.ncopies),
            self.src,
            self.dst_rows,
            self.nbytes,
            self.cond,
            ctypes.c_int(self.cond_bytes),
            ctypes.byref(status),
        )
        return int(done), status.value


def _rows(rows):
    arr, off, size = rows
    return _Rows(arr.ctypes.data, arr.strides[0] if arr.ndim else 0, off, max(1, size))
