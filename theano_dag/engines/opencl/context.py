"""The OpenCL device: choosing it, its queue and memory pool, transfers, the program cache.

``get_context()`` returns the process-wide :class:`DeviceContext` for the
platform and device named by ``config.opencl__platform`` and
``config.opencl__device`` (case-insensitive substrings; empty picks the first,
preferring a GPU). pyopencl is imported only here and only when a device is
first needed, so that the rest of theano_dag imports without it.

Every host<->device copy made by the engine goes through
:meth:`DeviceContext.upload` or :meth:`DeviceContext.download`, which count
them in ``ctx.transfers`` (tests and benchmarks read the counts).

Built programs are cached in memory (per context) and, by pyopencl's own
``Program.build(cache_dir=...)``, on disk under ``config.compiledir/opencl``, so
that a second process loads the binary instead of compiling the source again.
``ctx.program_stats`` counts builds and hits.
"""

from __future__ import annotations

import os
import re
import threading
import time
import warnings
from dataclasses import dataclass

import numpy as np

from theano_dag.config import config, install_hint
from theano_dag.engines.opencl.impl import I64, copy_source, type_scalar_args
from theano_dag.engines.opencl.values import DArr
from theano_dag.scalar.basic import OPENCL_TYPES

__all__ = [
    "OpenCLUnavailable",
    "DeviceContext",
    "TransferStats",
    "get_context",
    "reset_context",
    "import_pyopencl",
    "opencl_available",
]


#: ``td_log1p(x)``: ``log1p(x)``, ``x`` itself below 1e-30 (where log1p(x) rounds to x):
#: PoCL's log1p gives 0 for a subnormal x, so softplus(-745.13) was 0, not 5e-324, and
#: log1p(-5e-324) +0. The OpenCL kernels call it for ``log1p`` (see
#: ``engines.opencl.elemwise.elemwise_body``).
LOG1P_MACRO = "#define td_log1p(x) (fabs(x) < 1e-30f ? (x) : log1p(x))\n"


class OpenCLUnavailable(ImportError):
    """pyopencl is missing or no OpenCL platform/device matches the config."""


def import_pyopencl():
    """Return the ``pyopencl`` module, or raise OpenCLUnavailable naming the extra.

    >>> try:
    ...     cl = import_pyopencl()
    ... except OpenCLUnavailable as e:
    ...     cl = None
    ...     assert "pip install '.[opencl]'" in str(e)
    """
    try:
        import pyopencl
        import pyopencl.array  # noqa: F401
        import pyopencl.tools  # noqa: F401
    except ImportError as e:
        raise OpenCLUnavailable(
            "The OpenCL engine needs pyopencl and an OpenCL driver (pocl-binary-distribution "
            "is a CPU driver that needs no system packages): "
            f"{install_hint('opencl', 'pyopencl>=2022.1')} pocl-binary-distribution. "
            f"Import failed: {e}"
        ) from e
    return pyopencl


@dataclass
class TransferStats:
    """Counts of host<->device copies (``h2d``: uploads, ``d2h``: downloads) and their bytes.

    >>> t = TransferStats()
    >>> t.h2d, t.d2h_bytes
    (0, 0)
    """

    h2d: int = 0
    d2h: int = 0
    h2d_bytes: int = 0
    d2h_bytes: int = 0

    def snapshot(self) -> TransferStats:
        """A copy of the counts now (subtract two snapshots to count one call)."""
        return TransferStats(self.h2d, self.d2h, self.h2d_bytes, self.d2h_bytes)

    def __sub__(self, other):
        return TransferStats(
            self.h2d - other.h2d,
            self.d2h - other.d2h,
            self.h2d_bytes - other.h2d_bytes,
            self.d2h_bytes - other.d2h_bytes,
        )


def _pick(items, pattern, describe, what):
    if not pattern:
        return items[0]
    for item in items:
        if pattern.lower() in describe(item).lower():
            return item
    names = ", ".join(repr(describe(i)) for i in items) or "none"
    raise OpenCLUnavailable(
        f"No OpenCL {what} matches config.opencl__{what}={pattern!r}; available: {names}"
    )


def _candidates(cl):
    """The devices matching the config, a GPU first (what the engine is for)."""
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # the ICD loader found no platform at all
        raise OpenCLUnavailable(f"No OpenCL platform found: {e}") from e
    if not platforms:
        raise OpenCLUnavailable("No OpenCL platform found")
    if config.opencl__platform:
        platforms = [_pick(platforms, config.opencl__platform, lambda p: p.name, "platform")]
    devices = []
    for p in platforms:
        try:
            devices += p.get_devices()
        except Exception:  # a platform with no device of any type
            continue
    devices.sort(key=lambda d: not (d.type & cl.device_type.GPU))
    if not devices:
        raise OpenCLUnavailable("The OpenCL platforms have no devices")
    if config.opencl__device:
        wanted = config.opencl__device.lower()
        devices = [d for d in devices if wanted in d.name.lower()] or [
            _pick(devices, config.opencl__device, lambda d: d.name, "device")
        ]
    return devices


_PROBE_SOURCE = "__kernel void theano_dag_probe(__global int* a) { a[get_global_id(0)] = 1; }"


def _select_device(cl):
    """Return ``(device, context)`` for the first candidate that can build a program.

    A device that is listed but cannot compile is skipped, not used: the pip wheel
    of PoCL, for one, cannot build on a CPU its LLVM does not recognise
    ("unknown target CPU 'generic'"; the Makefile then installs Debian's PoCL).
    """
    reasons = []
    for device in _candidates(cl):
        try:
            context = cl.Context([device])
            cl.Program(context, _PROBE_SOURCE).build()
            return device, context
        except Exception as e:  # noqa: BLE001  any failure means "not usable"
            first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            reasons.append(f"{device.platform.name} / {device.name}: {first}")
    raise OpenCLUnavailable("No OpenCL device can build programs: " + "; ".join(reasons))


# ---------------------------------------------------------------------------
# The context


class DeviceContext:
    """One OpenCL device with its context, in-order queue, memory pool and caches."""

    def __init__(self, cl, device, context=None):
        self.cl = cl
        self.device = device
        self.context = context if context is not None else cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self.pool = cl.tools.MemoryPool(cl.tools.ImmediateAllocator(self.queue))
        self.has_fp64 = "cl_khr_fp64" in device.extensions or bool(
            getattr(device, "double_fp_config", 0)
        )
        self.max_work_group_size = int(device.max_work_group_size)
        self.transfers = TransferStats()
        self.program_stats = {"builds": 0, "memory_hits": 0, "disk_hits": 0}
        self._programs: dict = {}
        self._copy_kernels: dict = {}
        self._typed: set = set()  # copy kernels whose scalar argument types are declared
        self._lock = threading.Lock()

    def __repr__(self):
        return f"DeviceContext({self.describe()})"

    def describe(self) -> str:
        """``'device name' on 'platform name'``."""
        return f"{self.device.name!r} on {self.device.platform.name!r}"

    # -- memory -----------------------------------------------------------------

    def allocate(self, nbytes: int):
        """A device buffer of at least ``nbytes`` bytes from the pool (freed when dropped)."""
        return self.pool.allocate(max(int(nbytes), 8))

    def buffer(self, nbytes: int):
        """A device buffer of its own (for planned blocks, which live as long as a plan)."""
        return self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE, max(int(nbytes), 8))

    def upload(self, array: np.ndarray, buffer=None, offset: int = 0):
        """Copy ``array`` (made C-contiguous) to ``buffer`` (a new one if None); return it."""
        # asarray, not ascontiguousarray: the latter makes a 0-d value 1-d
        array = np.asarray(array, order="C")
        if buffer is None:
            buffer = self.allocate(array.nbytes)
        if array.nbytes:
            self.cl.enqueue_copy(self.queue, buffer, array, dst_offset=offset, is_blocking=True)
        self.transfers.h2d += 1
        self.transfers.h2d_bytes += array.nbytes
        return buffer

    def download(self, buffer, offset: int, nbytes: int, out: np.ndarray):
        """Copy ``nbytes`` at ``offset`` of ``buffer`` into the C-contiguous ``out``."""
        if nbytes:
            self.cl.enqueue_copy(self.queue, out, buffer, src_offset=offset, is_blocking=True)
        self.transfers.d2h += 1
        self.transfers.d2h_bytes += nbytes
        return out

    def from_host(self, array):
        """Upload a numpy array (or number): a new contiguous DArr."""

        array = np.asarray(array, order="C")
        return DArr(self.upload(array), 0, array.shape, array.dtype)

    def to_host(self, d) -> np.ndarray:
        """Download a DArr (of any strides) into a new numpy array."""
        out = np.empty(d.shape, dtype=d.dtype)
        if d.size == 0:
            return out
        if not d.is_c_contiguous:
            d = self.contiguous(d)
        return self.download(d.data, d.offset, d.nbytes, out)

    def contiguous(self, d):
        """A C-contiguous device copy of the DArr ``d``."""

        name, src = copy_source(d.ndim, OPENCL_TYPES[d.dtype.name])
        kernel = self._copy_kernels.get(name)
        if kernel is None:
            kernel = self.cl.Kernel(self.build_program(self.header() + src), name)
            self._copy_kernels[name] = kernel
        y = DArr(self.allocate(d.nbytes), 0, d.shape, d.dtype)
        args = [I64(d.size)] + [I64(s) for s in d.shape[1:]]
        args += [d.data, I64(d.elem_offset)] + [I64(s) for s in d.elem_strides()]
        args += [y.data, I64(0)]
        if name not in self._typed:
            type_scalar_args(kernel, args)
            self._typed.add(name)
        kernel.set_args(*args)
        self.cl.enqueue_nd_range_kernel(self.queue, kernel, (-(-d.size // 64) * 64,), (64,))
        return y

    # -- programs ---------------------------------------------------------------

    def header(self) -> str:
        """What every program starts with: float64 enabled where the device has it, no
        contraction of ``a * b + c`` into one fused multiply-add (OpenCL C allows it by
        default): rounded twice, as numpy and the C kernels compute it (contracted,
        ``2 * FLT_MAX + -inf`` was ``-inf``, numpy's NaN); and ``td_log1p``
        (:data:`LOG1P_MACRO`), which kernels call for ``log1p``."""
        common = "#pragma OPENCL FP_CONTRACT OFF\n" + LOG1P_MACRO
        if self.has_fp64:
            return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + common
        return common

    def cache_dir(self) -> str:
        """Where pyopencl keeps built binaries for this package: ``compiledir/opencl``."""
        return os.path.join(config.compiledir, "opencl")

    def build_program(self, source: str, options=()):
        """The built program for ``source``: from memory, else ``Program.build``.

        pyopencl's build keeps its own on-disk cache of binaries (in :meth:`cache_dir`,
        keyed by source, options and device), so a second process loads a binary instead
        of compiling; it skips that cache for drivers that cache builds themselves (PoCL,
        NVIDIA), where asking for a binary costs more than a build. A build that lacks a
        kernel its source declares (a damaged or stale cache entry) is made once more
        without the caches, with a warning; then a clear error if still lacking.
        """
        cl = self.cl
        options = list(options)
        key = (source, tuple(options))
        with self._lock:
            prg = self._programs.get(key)
            if prg is not None:
                self.program_stats["memory_hits"] += 1
                return prg
            try:
                prg = cl.Program(self.context, source).build(options, cache_dir=self.cache_dir())
                missing = _missing_kernels(cl, prg, source)
                if missing:
                    # A damaged or stale cache entry (pyopencl's binaries, or the driver's
                    # own, which PoCL keys on the options: hence the define) lacks them.
                    self.program_stats["damaged"] = self.program_stats.get("damaged", 0) + 1
                    warnings.warn(
                        f"theano_dag: the cached OpenCL build of a program on "
                        f"{self.describe()} lacks its kernels {missing}; building it again "
                        "without the caches",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                    nonce = f"-DTHEANO_DAG_UNCACHED={os.getpid()}_{time.time_ns()}"
                    prg = cl.Program(self.context, source).build(options + [nonce], cache_dir=False)
                    missing = _missing_kernels(cl, prg, source)
            except cl.RuntimeError as e:
                raise RuntimeError(
                    f"OpenCL build failed on {self.describe()}:\n{e}\n--- source ---\n"
                    + _numbered(source)
                ) from e
            if missing:
                raise RuntimeError(
                    f"OpenCL build on {self.describe()} gave a program without the kernels "
                    f"{missing}, even without the caches\n--- source ---\n" + _numbered(source)
                )
            # pyopencl records (how, whether from its disk cache, seconds) on the program
            info = getattr(prg, "_build_duration_info", None)
            self.program_stats["disk_hits" if info and info[1] else "builds"] += 1
            self._programs[key] = prg
            return prg

    def clear_memory_cache(self):
        """Forget built programs (the disk cache stays): what a new process sees."""
        with self._lock:
            self._programs.clear()


def _missing_kernels(cl, program, source: str) -> list:
    """The kernels ``source`` declares that the built ``program`` does not list."""
    try:
        have = set(program.get_info(cl.program_info.KERNEL_NAMES).split(";"))
    except cl.Error:  # pragma: no cover - a driver without the query (OpenCL 1.1)
        return []
    return [k for k in re.findall(r"__kernel\s+void\s+(\w+)", source) if k not in have]


def _numbered(source: str) -> str:
    return "\n".join(f"{k + 1:4d}  {line}" for k, line in enumerate(source.splitlines()))


_CONTEXTS: dict = {}
_CONTEXTS_LOCK = threading.Lock()


def get_context() -> DeviceContext:
    """The DeviceContext for the configured platform and device (made once per choice).

    Raises :class:`OpenCLUnavailable` with the reason when there is none.
    """
    key = (config.opencl__platform, config.opencl__device)
    with _CONTEXTS_LOCK:
        ctx = _CONTEXTS.get(key)
        if ctx is None:
            cl = import_pyopencl()
            device, context = _select_device(cl)
            ctx = DeviceContext(cl, device, context)
            _CONTEXTS[key] = ctx
        return ctx


def reset_context():
    """Drop the cached contexts (the next ``get_context`` makes a new one)."""
    with _CONTEXTS_LOCK:
        _CONTEXTS.clear()


def opencl_available() -> tuple[bool, str]:
    """``(True, description)`` if a device can be used, else ``(False, reason)``.

    >>> ok, why = opencl_available()
    >>> isinstance(ok, bool) and isinstance(why, str)
    True
    """
    try:
        return True, get_context().describe()
    except OpenCLUnavailable as e:
        return False, str(e)
