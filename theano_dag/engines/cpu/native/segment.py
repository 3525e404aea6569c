"""Segments: a run of consecutive C kernel steps of a plan, entered by one call.

The generated call of a plan (``emit.codegen``) runs each fused elementwise kernel
that writes into a planned block by one line, ``if K.c(a, b, out): K.fail(a, b,
out)``; through ctypes each such call cost about 0.6 us, more than the work of a
kernel over a hundred values. Consecutive kernel lines become one line instead,
``if _SEG0.c(a, b, out, c, out2): _SEG0.fail(a, b, out, c, out2)``: a
:class:`KernelSegment`, whose ``c`` is the C half of the call's ``Segment``
(``engines/callstub.c``) once the kernels' library is loaded. It hands each kernel
its operands (positions into the segment's arguments) and calls the kernels' array
entry points (``kN_v``) one after the other, without Python between them.

Until the library is loaded (the first calls, while it compiles in the background),
``c`` runs the kernels one by one through their own ``c``, which is numpy then; a
library that fails to build leaves it so, as it leaves the kernels. A kernel that
fails in the segment (a wrong shape, an operand that is a numpy scalar where a 0-d
array was planned) has written nothing: ``fail`` explains or repairs it through that
kernel's own ``fail`` and runs the rest one by one.
"""

from __future__ import annotations

import ctypes

try:  # the symbol lookup of the C library, without making a ctypes function (POSIX)
    from _ctypes import dlsym as _dlsym
except ImportError:
    _dlsym = None

try:  # the C half of the call, when it was built (setup.py) with segments in it
    from theano_dag.engines._callstub import Segment as NativeSegment
except ImportError:
    NativeSegment = None

__all__ = ["KernelSegment", "NativeSegment", "available", "entry_address", "array_entry"]


def entry_address(lib, name) -> int:
    """The address of the C function ``name`` of ``lib`` (a loaded ``ctypes.CDLL``),
    looked up once per library (several segments and kernels ask); OSError or
    AttributeError when ``lib`` has no such symbol."""
    known = lib.__dict__.get("_td_entries")
    if known is None:
        known = lib.__dict__["_td_entries"] = {}
    address = known.get(name)
    if address is None:
        if _dlsym is not None:
            # A fifteenth of the cost of getattr(lib, name), which makes a ctypes function.
            address = _dlsym(lib._handle, name)
        else:
            address = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        known[name] = address
    return address


def _array_entries(lib) -> dict:
    table = lib.__dict__.get("_td_arrays")  # kernel name -> address of its array entry
    if table is None:
        table = lib.__dict__["_td_arrays"] = {}
    return table


def array_entry(lib, kernel) -> int:
    """The address of ``kernel``'s array entry point (``<kernel>_v``) in ``lib``, which a
    segment calls; OSError or AttributeError when ``lib`` has none."""
    table = _array_entries(lib)
    address = table.get(kernel)
    if address is None:
        address = table[kernel] = entry_address(lib, f"{kernel}_v")
    return address


def available() -> bool:
    """Whether kernel segments run in C here (the C half of the call has them).

    >>> available() in (True, False)
    True
    """
    return NativeSegment is not None


class KernelSegment:
    """Kernels ``kernels`` (``CKernel``, one library) run in order by ``c(*arrays)``:
    kernel ``j`` on the arrays at positions ``operands[j]``; ``c`` returns a false
    value, or a true one after which ``fail(*arrays)`` finishes the run (or raises the
    error of the kernel that failed). ``at`` is the position of the kernel that ran
    last in Python (for the engine's error message).

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> from theano_dag.engines.cpu.native.ckernel import CKernel
    >>> x = tt.dvector("x")
    >>> k = CKernel(tt.exp(x).owner)  # no library: numpy
    >>> a, out = np.zeros(2), np.empty(2)
    >>> seg = KernelSegment([k, k], ((0, 1), (1, 1)), 2)
    >>> seg.c(a, out) or seg.fail(a, out), out
    (None, array([2.71828183, 2.71828183]))
    """

    def __init__(self, kernels, operands, nargs):
        self.kernels = list(kernels)
        self.operands = tuple(tuple(p) for p in operands)
        self.nargs = nargs
        self.at = 0
        self.c = self.each
        self.native = False
        self.entries = None  # the C entry points it is bound to
        lib = self.kernels[0].library if self.kernels else None
        if lib is not None:
            lib.add_segment(self)

    def __repr__(self):
        names = ", ".join(k.name for k in self.kernels)
        return f"<KernelSegment ({'C' if self.native else 'Python'}) of {names}>"

    def each(self, *args):
        """Run the kernels one by one through their own ``c`` (numpy until the library
        is loaded); returns False."""
        for j, (k, pos) in enumerate(zip(self.kernels, self.operands)):
            a = [args[i] for i in pos]
            self.at = j
            if k.c(*a):
                k.fail(*a)
        return False

    def bind(self, lib):
        """Run in C through ``lib`` (the loaded ``ctypes.CDLL`` of the generated kernels,
        None where there are none) and the step library (a step kernel's ``address``):
        all kernels must be ready; nothing changes without the C half of the call."""
        if NativeSegment is None:
            return
        # Kernels of one C function (one name) share its entry: looked up once per
        # library, for all of its segments (a plan's code has several).
        table = _array_entries(lib) if lib is not None else None
        entries = []
        for k in self.kernels:
            if not k.ready:
                return
            address = getattr(k, "address", None)  # a step kernel's, in the step library
            if address is None:
                address = table.get(k.name)
                if address is None:
                    address = array_entry(lib, k.name)
            entries.append(address)
        entries = tuple(entries)
        if self.native and self.entries == entries:
            # Bound already (the library binds again when its step library loads, from
            # that thread): a new C segment would not know the step a call that failed
            # just now stopped at, and ``fail`` would run the kernels before it again.
            return
        self.entries = entries
        self.c = NativeSegment(entries, self.operands, self.nargs)
        self.native = True

    def fail(self, *args):
        """After ``c(*args)`` returned a true value: the kernel that failed, through its
        own ``fail`` (which raises, or converts the operand it refused and runs), then
        the kernels after it one by one."""
        start = self.c.failed_step if self.native else len(self.kernels)
        if start < 0:  # never, unless its C segment was replaced: nothing is run twice
            raise RuntimeError(f"{self!r}: fail() with no failed step to start from")
        for j in range(start, len(self.kernels)):
            k = self.kernels[j]
            a = [args[i] for i in self.operands[j]]
            self.at = j
            if j == start or k.c(*a):
                k.fail(*a)
