"""C libraries that load late: the moment a background build finishes, chosen.

On a cold kernel cache a function's first calls run numpy while its C libraries build in
a background thread (its own kernels, and the step library that runs its sums, small
products and strided loops). Each library is loaded, and the function's kernels and
segments switch to C, whenever its build ends: between two calls, between two kernels of
one call, or between a kernel's refusal of its operands and ``fail``'s repeat of the call.
A call must give the same values wherever that happens. Two bugs lived in those moments
(a refusal that no longer held raised a shape error; a segment bound again forgot the step
it had stopped at, and ran an in-place kernel twice); timing finds such bugs once in
dozens of runs.

:func:`late_loads` makes the moment a choice: inside it, the libraries' loads wait, and
each of the places where a call meets a library not loaded (a kernel's numpy path, a
kernel's or a segment's ``fail``, a segment running its kernels one by one) counts as a
point; at the points listed in ``at`` the next waiting load is made, as the background
thread would have made it there. Builds are synchronous (``compile_mode("sync")``), so
every choice is reproducible.

>>> import numpy as np
>>> import theano_dag.tensor as tt
>>> from theano_dag import function
>>> x = tt.dvector("x")
>>> with late_loads(at=(1, 2)) as points:
...     f = function([x], tt.exp(x) * 2 + x)
...     values = [f(np.arange(3.0)) for _ in range(3)]
>>> all(np.allclose(v, np.exp(np.arange(3.0)) * 2 + np.arange(3.0)) for v in values)
True
>>> points.fired[0]  # the first waiting load, made at the first point
1
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field

from theano_dag.engines.cpu.native import ckernel, segment

__all__ = ["LatePoints", "late_loads"]


@dataclass
class LatePoints:
    """What a :func:`late_loads` block saw: ``count`` points met, ``fired`` the points at
    which a load was made, ``waiting`` the loads not made yet."""

    at: tuple
    count: int = 0
    fired: list = field(default_factory=list)
    waiting: list = field(default_factory=list)

    def point(self):
        """One more point: the waiting loads due here are made."""
        self.count += 1
        while self.waiting and self.at and self.at[0] <= self.count:
            self.at = self.at[1:]
            self.fired.append(self.count)
            self.waiting.pop(0)()

    def load_all(self):
        """Make every waiting load (in the order their builds ended)."""
        while self.waiting:
            self.waiting.pop(0)()


@contextlib.contextmanager
def late_loads(at=()):
    """Inside the block, C libraries load at the points ``at`` (1 for the first point met,
    a load per point listed, in the order their builds ended); the loads still waiting
    are made when the block ends. Kernels build synchronously, each library's step
    library is one of its own (so its load waits too), and the block yields the
    :class:`LatePoints` it counts with."""
    points = LatePoints(tuple(sorted(at)))
    saved = []

    def patch(owner, name, value):
        saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    kernel_load = ckernel.KernelLibrary._load
    step_load = ckernel.StepLibrary._load

    def load_kernels(self, path):
        # As in a process that opens the library now: without the step library's strided
        # loop until that library loads (one loaded earlier in this process, the same
        # file, would have it already).
        ckernel._open_library(path).td_set_general(None)
        kernel_load(self, path)

    def wait_kernels(self, path):
        points.waiting.append(lambda: load_kernels(self, path))

    def wait_steps(self, path):
        points.waiting.append(lambda: step_load(self, path))

    def counted(fn):
        @functools.wraps(fn)
        def run(self, *args):
            points.point()
            return fn(self, *args)

        return run

    patch(ckernel.KernelLibrary, "_load", wait_kernels)
    patch(ckernel.StepLibrary, "_load", wait_steps)
    for owner, name in (
        (ckernel.CKernel, "c"),  # (the class's _numpy_c, until a kernel is bound)
        (ckernel.CKernel, "fail"),
        (ckernel.StepKernel, "_numpy_c"),
        (segment.KernelSegment, "each"),
        (segment.KernelSegment, "fail"),
    ):
        patch(owner, name, counted(owner.__dict__[name]))
    # A step library of the block's own: one loaded before would be shared, loaded.
    patch(ckernel, "_STEP_LIBRARIES", {})
    try:
        with ckernel.compile_mode("sync"):
            yield points
    finally:
        try:
            points.load_all()
        finally:
            for owner, name, value in reversed(saved):
                setattr(owner, name, value)
