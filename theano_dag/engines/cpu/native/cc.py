"""The C compiler driver of the CPU engine: flags, the on-disk kernel cache, builds.

A kernel library (the C source of all fused kernels of one function) is compiled
with one compiler call into ``<compiledir>/kernels/<key>.so``, ``key`` being a hash
of the source, the compiler's identity and the flags. The compiler writes a file
of its own, renamed into place (``rename`` is atomic), so a reader sees a complete
library or none; the rename is done by the shell that runs the compiler, so a
build started by a process that exits before it ends still fills the cache.
Processes compiling the same library take turns (a file lock, ``<key>.lock``),
so it is compiled once. Beside each library, ``<key>.so.sum`` holds its SHA-256:
a library that does not match it (truncated, overwritten: loading it could kill
the process) is removed and built again. Once a library has matched it, the file's
status (size, times, inode) is written under the checksum, and a later load whose
status is the same trusts it without reading it through: any write, truncation or
replacement of the file changes its status (its change time, which no program
can set back), so a damaged library is still found.

The folder is bounded (``MAX_LIBRARIES`` libraries, ``MAX_BYTES`` bytes, the least
recently used out first, by ``misc.cache_eviction``): a library's files (the library,
its checksum, its source, its lock) go together, and a process that loads a library
dates its lock file, the library itself keeping its status. A library removed while a
process has it loaded stays mapped in that process; the next one to need it builds it
again.

Faults leave the caller on numpy with one warning naming the cause (see
``ckernel``): a compiler that fails, or runs past ``COMPILE_TIMEOUT_S`` (it is
killed), or is missing (``config.cxx`` names no program), and a cache directory
that cannot be written.

Flags keep numpy's floating-point results (NaN, inf, -0.0, denormals) while the
loops vectorize: no ``-ffast-math``; ``-fno-math-errno`` and ``-fno-trapping-math``
let GCC vectorize ``exp``/``sin``/... calls through glibc's libmvec (the kernels
declare its vector variants themselves, see :func:`simd_functions`);
``-ffp-contract=off`` keeps ``a*b+c`` rounded twice, as numpy does; ``-fwrapv``
makes integer overflow wrap, as numpy's does. The instruction set is the
x86-64 level of this CPU (``-march=x86-64-v3`` ...), part of the cache key.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import os
import platform
import shutil
import signal
import subprocess
import threading
import time
import uuid
import warnings
import weakref
from dataclasses import dataclass, field

from theano_dag.misc.cache_eviction import evict_if_due

__all__ = [
    "Toolchain",
    "Build",
    "CompileError",
    "CompileTimeout",
    "COMPILE_TIMEOUT_S",
    "get_toolchain",
    "x86_64_level",
    "simd_functions",
    "MVEC_FUNCTIONS",
    "kernel_dir",
    "stats",
]

CACHE_VERSION = "2"  # 2: libraries carry a checksum
# Optimisation and floating-point flags (see the module docstring for why each).
BASE_FLAGS = (
    "-std=gnu11",
    "-O3",
    "-fPIC",
    "-shared",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-ffp-contract=off",
    "-fwrapv",
    "-fno-semantic-interposition",
    "-w",
)
# Sources this long compile at -O2: -O3's extra unrolling of a body of thousands of
# statements costs seconds and gains nothing measurable.
O2_ABOVE_BYTES = 200_000
OPENMP_FLAGS = ("-fopenmp",)

# Counters for tests and profiles: compiler runs and cache hits in this process.
stats = {"compiles": 0, "cache_hits": 0, "failures": 0, "cancelled": 0}
# The folder's bound (see the module docstring), sized at most every EVICT_EVERY seconds.
# The bytes are the real bound (libraries average about 70 KB: 1 GiB holds some 15,000);
# the count is above the ~4,200 libraries the test suite builds, which a bound under it
# evicted in the order the next run needs them, so that each run built them all again.
MAX_LIBRARIES = 12_000
MAX_BYTES = 1 << 30
EVICT_EVERY = 600.0
_lock = threading.Lock()


# Seconds a compiler may run before it is killed and the kernels stay on numpy.
COMPILE_TIMEOUT_S = 600.0


class CompileError(RuntimeError):
    """The C compiler failed; the message holds its command and its error output."""


class CompileTimeout(CompileError):
    """The C compiler ran past ``COMPILE_TIMEOUT_S`` and was killed."""


class BuildCancelled(CompileError):
    """A background build whose owners had all died before the compiler could start it."""


def x86_64_level() -> int:
    """The x86-64 micro-architecture level of this CPU (1..4), 0 elsewhere.

    >>> x86_64_level() in (0, 1, 2, 3, 4)
    True
    """
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return 0
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
            else:
                return 1
    except OSError:
        return 1
    v2 = {"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"}
    v3 = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
    v4 = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    level = 1
    for need in (v2, v3, v4):
        if not need <= flags:
            break
        level += 1
    return level


# libm functions glibc's libmvec has vector variants of (double name; the float one
# adds "f"), with their number of arguments.
MVEC_FUNCTIONS = {
    "acos": 1, "acosh": 1, "asin": 1, "asinh": 1, "atan": 1, "atanh": 1, "cbrt": 1,
    "cos": 1, "cosh": 1, "erf": 1, "erfc": 1, "exp": 1, "exp10": 1, "exp2": 1,
    "expm1": 1, "log": 1, "log10": 1, "log1p": 1, "log2": 1, "sin": 1, "sinh": 1,
    "tan": 1, "tanh": 1, "atan2": 2, "hypot": 2, "pow": 2,
}  # fmt: skip
# x86-64 vector ABI: ISA letter and lanes of (double, float) for SSE, AVX, AVX2, AVX-512.
_ABI = (("b", 2, 4), ("c", 4, 8), ("d", 4, 8), ("e", 8, 16))


def _load_libmvec():
    for name in ("libmvec.so.1", "libmvec.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _symbol_finder(lib):
    """A function telling whether ``lib`` (a ``ctypes.CDLL``) exports a symbol.

    One ``dlsym`` a name: ``hasattr(lib, name)`` looks the symbol up the same way but
    builds a function object for it too, which for libmvec's 208 names took ~1.2 ms
    of every process's first compiled function.
    """
    try:
        dlsym = ctypes.CDLL(None).dlsym
        dlsym.restype = ctypes.c_void_p
        dlsym.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
    except (OSError, AttributeError):  # no dlsym to call: ask ctypes
        return lambda name: hasattr(lib, name)
    return lambda name: dlsym(lib._handle, name.encode()) is not None


_SIMD_CACHE: dict = {}


def simd_functions(level=None) -> tuple:
    """Names of the libm functions whose libmvec vector variants all exist here.

    Kernels declare these with ``__attribute__((simd))`` so that GCC calls the vector
    variants without ``-ffast-math`` (glibc's headers only declare them under it).

    >>> all(isinstance(f, str) for f in simd_functions())
    True
    """
    level = x86_64_level() if level is None else level
    if level == 0:
        return ()
    if level not in _SIMD_CACHE:
        lib = _load_libmvec()
        found = []
        if lib is not None:
            exports = _symbol_finder(lib)
            for fn, nargs in sorted(MVEC_FUNCTIONS.items()):
                v = "v" * nargs
                names = [f"_ZGV{isa}N{nd}{v}_{fn}" for isa, nd, _ in _ABI]
                names += [f"_ZGV{isa}N{nf}{v}_{fn}f" for isa, _, nf in _ABI]
                if all(exports(n) for n in names):
                    found.append(fn)
        _SIMD_CACHE[level] = tuple(found)
    return _SIMD_CACHE[level]


@dataclass(frozen=True)
class Toolchain:
    """A compiler and the flags kernels are built with; ``key(source)`` names a build."""

    cxx: str
    flags: tuple
    libs: tuple
    identity: str
    level: int = 0
    simd: tuple = field(default=())

    def flags_for(self, source: str) -> tuple:
        if len(source) > O2_ABOVE_BYTES:
            return tuple("-O2" if f == "-O3" else f for f in self.flags)
        return self.flags

    def key(self, source: str) -> str:
        h = hashlib.sha256()
        for part in (
            CACHE_VERSION,
            self.identity,
            " ".join(self.flags_for(source)),
            " ".join(self.libs),
            source,
        ):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:32]


_TOOLCHAINS: dict = {}


def get_toolchain(cxx: str | None) -> Toolchain | None:
    """The toolchain of compiler ``cxx`` (a name or path), None when it is '' or missing.

    >>> get_toolchain("") is None
    True
    """
    if not cxx:
        return None
    if cxx in _TOOLCHAINS:
        return _TOOLCHAINS[cxx]
    path = shutil.which(cxx)
    tc = None
    if path is None:
        # Said once (the toolchain is cached): fused kernels run through numpy.
        warnings.warn(
            f"theano_dag: the C compiler {cxx!r} (config.cxx) is not found; "
            "fused kernels run through numpy",
            RuntimeWarning,
            stacklevel=2,
        )
    else:
        real = os.path.realpath(path)
        st = os.stat(real)
        # The binary's path, size and time stand for its version without running it.
        identity = f"{real}:{st.st_size}:{int(st.st_mtime)}"
        level = x86_64_level()
        flags = list(BASE_FLAGS) + list(OPENMP_FLAGS)
        if level >= 2:
            flags.append(f"-march=x86-64-v{level}")
        libs = ["-lm"]
        simd = simd_functions(level)
        if simd:
            libs.insert(0, "-lmvec")
        tc = Toolchain(path, tuple(flags), tuple(libs), identity, level, simd)
    _TOOLCHAINS[cxx] = tc
    return tc


def _fallback_toolchain(tc: Toolchain) -> Toolchain:
    """The same compiler without OpenMP, -march and libmvec (for compilers lacking them)."""
    flags = tuple(f for f in tc.flags if f not in OPENMP_FLAGS and not f.startswith("-march"))
    return Toolchain(tc.cxx, flags, ("-lm",), tc.identity, 0, ())


# -- fork safety ------------------------------------------------------------------------
# libgomp's worker threads do not survive fork(): in the child, the first parallel loop
# waits for them forever (multiprocessing's default start method on Linux forks). Every
# loaded library exports td_set_serial; in a forked child all of them, and those loaded
# there later, run their loops on one thread (what PyTorch does for its pool, too).
_LIBRARIES: weakref.WeakSet = weakref.WeakSet()
_FORKED = [False]


def register_library(lib):
    """Track a loaded library (a ``ctypes.CDLL`` exporting ``td_set_serial``) so that a
    forked child process switches it to one thread; in such a child, switch it now."""
    with _lock:
        _LIBRARIES.add(lib)
    if _FORKED[0]:
        lib.td_set_serial(1)


def forked() -> bool:
    """Whether this process is a fork of one that had loaded kernel libraries.

    >>> forked() in (True, False)
    True
    """
    return _FORKED[0]


def _after_fork_in_child():
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    if not len(_LIBRARIES):
        return  # no OpenMP ran here: the child may use threads as usual
    _FORKED[0] = True
    for lib in list(_LIBRARIES):
        lib.td_set_serial(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def kernel_dir(compiledir: str) -> str:
    """The folder of compiled kernel libraries inside ``compiledir``.

    >>> kernel_dir("/tmp/cache")
    '/tmp/cache/kernels'
    """
    return os.path.join(compiledir, "kernels")


# Runs the compiler, then renames its output into place; being a shell of its own,
# it finishes the job even if the Python process that started it has exited.
# Compiles, writes the checksum beside the output, then renames both into place (the
# checksum first: a reader that sees the library sees its checksum).
_SCRIPT = (
    'tmp="$1"; final="$2"; src="$3"; csrc="$4"; shift 4; '
    '"$@" || exit $?; '
    "if command -v sha256sum >/dev/null 2>&1; then "
    'sha256sum "$tmp" > "$tmp.sum" && mv -f "$tmp.sum" "$final.sum" || exit 70; fi; '
    'mv -f "$tmp" "$final" && mv -f "$src" "$csrc"'
)


def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_sum(final: str):
    """Record ``final``'s checksum (where the shell had no ``sha256sum``)."""
    tmp = f"{final}.sum.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    with open(tmp, "w") as f:
        f.write(_digest(final) + "\n")
    os.replace(tmp, final + ".sum")


# A library's status is a witness of its bytes only once its change time lies this
# far in the past: the kernel stamps a change with a clock of a few milliseconds'
# resolution, so a write just after the library was checked could leave the time as
# it was (and the size too).
STAMP_AFTER_S = 2.0
# Libraries this process found intact: path -> their status then.
_INTACT: dict = {}


def _status(st) -> str:
    return f"status {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {st.st_dev}"


def _damage(final: str) -> str | None:
    """Why the cached library ``final`` cannot be trusted, or None when it matches its
    checksum (read through once; later, while the file's status is the one recorded
    then, in this process or under the checksum, without reading it)."""
    try:
        status = _status(os.stat(final))
    except OSError as e:
        return f"unreadable: {e}"
    if _INTACT.get(final) == status:
        return None
    try:
        with open(final + ".sum") as f:
            text = f.read(4096)
    except OSError:
        return "no checksum beside it"
    want = text[:64]
    recorded = text.split("\n")[1:2]
    if recorded == [status] and len(want) == 64:
        _INTACT[final] = status
        return None
    try:
        got = _digest(final)
        st = os.stat(final)
    except OSError as e:
        return f"unreadable: {e}"
    if got != want:
        return f"checksum mismatch ({st.st_size} bytes)"
    if _status(st) == status and time.time() - st.st_ctime > STAMP_AFTER_S:
        # Unchanged while it was read, and long enough ago that any later change shows.
        _INTACT[final] = status
        _record_status(final, want, status)
    return None


def _record_status(final: str, digest: str, status: str):
    """Write ``status`` under the checksum of ``final`` (best effort: a read-only cache
    is checked in full at each process's first load, as before)."""
    tmp = f"{final}.sum.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "w") as f:
            f.write(f"{digest}\n{status}\n")
        os.replace(tmp, final + ".sum")
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


# Libraries this process has loaded from the cache (each dated once per process).
_USED: set = set()


def _library_of(name: str) -> str:
    """The library a file of the kernel folder belongs to: its key, the name's first part.

    >>> _library_of("3fa2.so.sum"), _library_of("3fa2.1234.5e6f.c")
    ('3fa2', '3fa2')
    """
    return name.split(".", 1)[0]


def _cached(final: str) -> bool:
    """Whether the intact library ``final`` is in the cache; a damaged one is removed
    (with a warning saying why), so that it is built again."""
    if not os.path.exists(final):
        return False
    why = _damage(final)
    if why is None:
        with _lock:
            stats["cache_hits"] += 1
            first_use = final not in _USED
            _USED.add(final)
        if first_use:
            # Dated for the bound through its lock: the library's own times are part of
            # the status that vouches for its bytes.
            with contextlib.suppress(OSError):
                os.utime(final[: -len(".so")] + ".lock")
        return True
    with _lock:
        stats["damaged"] = stats.get("damaged", 0) + 1
    warnings.warn(
        f"theano_dag: the cached kernel library {final} is damaged ({why}); building it again",
        RuntimeWarning,
        stacklevel=3,
    )
    for path in (final, final + ".sum"):
        # A read-only cache keeps it: then the build fails, and says why.
        with contextlib.suppress(OSError):
            os.unlink(path)
    return False


def _lock_file(path: str) -> int:
    """Open ``path`` (created if needed) and hold an exclusive lock on it until the
    returned descriptor is closed: processes compiling the same library take turns,
    so the second finds the first one's library."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        raise
    return fd


def _run(argv, timeout):
    """Run ``argv`` in a session of its own; on timeout kill the whole session (the
    shell and the compiler it started) and raise ``subprocess.TimeoutExpired``."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


_NICE = shutil.which("nice")


def _compile(tc: Toolchain, source: str, directory: str, final: str):
    os.makedirs(directory, exist_ok=True)
    tag = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
    base = final[: -len(".so")]
    src = f"{base}.{tag}.c"
    tmp = f"{base}.{tag}.so.tmp"
    with open(src, "w") as f:
        f.write(source)
    cmd = [tc.cxx, *tc.flags_for(source), src, "-o", tmp, *tc.libs]
    with _lock:
        stats["compiles"] += 1
    argv = ["sh", "-c", _SCRIPT, "sh", tmp, final, src, base + ".c", *cmd]
    if _NICE:
        # Background work: on a busy machine the calls running numpy meanwhile (the
        # first calls of a cold cache) keep their share of the cores.
        argv = [_NICE, "-n", "10", *argv]
    try:
        proc = _run(argv, COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        with _lock:
            stats["failures"] += 1
        raise CompileTimeout(
            f"C compiler timed out after {COMPILE_TIMEOUT_S:g} s and was killed: "
            f"{' '.join(cmd)}\n(source kept in {src})"
        ) from None
    if proc.returncode != 0 or not os.path.exists(final):
        if os.path.exists(tmp):
            os.unlink(tmp)
        with _lock:
            stats["failures"] += 1
        raise CompileError(
            f"C compiler failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"{proc.stderr[-4000:]}\n(source kept in {src})"
        )
    if not os.path.exists(final + ".sum"):
        _write_sum(final)


def compile_library(tc: Toolchain, source: str, directory: str) -> str:
    """The path of the library built from ``source``: from the cache, else compiled.

    A compiler without OpenMP, ``-march=x86-64-vN`` or libmvec gets one more try
    without them (not one that timed out). A cache directory that cannot be written
    raises CompileError saying so.
    """
    final = os.path.join(directory, tc.key(source) + ".so")
    if _cached(final):
        return final
    try:
        os.makedirs(directory, exist_ok=True)
        lock = _lock_file(final[: -len(".so")] + ".lock")
    except OSError as e:
        with _lock:
            stats["failures"] += 1
        raise CompileError(f"the kernel cache {directory} cannot be written: {e}") from e
    try:
        if _cached(final):  # another process built it while this one waited
            return final
        try:
            _compile(tc, source, directory, final)
        except CompileTimeout:
            raise
        except CompileError:
            fb = _fallback_toolchain(tc)
            if fb.flags == tc.flags and fb.libs == tc.libs:
                raise
            # The fallback's library lives under the first key, so later runs hit the cache.
            _compile(fb, source, directory, final)
    finally:
        os.close(lock)  # releases the lock
    evict_if_due(directory, MAX_LIBRARIES, MAX_BYTES, EVICT_EVERY, entry_of=_library_of)
    return final


def cached_library(tc: Toolchain, source: str, directory: str, key=None) -> str | None:
    """The cached library of ``source`` if it exists and is intact (no compiler run);
    ``key``: ``tc.key(source)``, when the caller knows it."""
    final = os.path.join(directory, (key or tc.key(source)) + ".so")
    return final if _cached(final) else None


_BUILDS: dict = {}
# Compilers running at once in this process: a program making many functions queues
# their builds instead of starting a compiler per function at the same time.
MAX_PARALLEL_BUILDS = max(2, os.cpu_count() or 2)
_SLOTS = threading.BoundedSemaphore(MAX_PARALLEL_BUILDS)


class Build:
    """One library build, run in a background thread or in the caller's.

    ``wait(timeout)`` blocks until it ends and says whether it did; then ``path`` is
    the library or ``error`` the exception. A build running in this process is shared
    by the callers that start one of the same source (:meth:`start`).
    """

    def __init__(self, tc: Toolchain, source: str, directory: str):
        self.tc, self.source, self.directory = tc, source, directory
        self.path = None
        self.error = None
        self.seconds = None  # the compiler's wall time, once done
        self.done = threading.Event()
        self._callbacks = []
        self._finished = False
        self._cb_lock = threading.Lock()
        self._key = None  # its entry in _BUILDS, while it runs
        self._owners = []  # weak references to the owners of its callbacks (see start)
        self._unowned = False  # whether a callback came without an owner

    @classmethod
    def start(cls, tc, source, directory, background=True, on_done=None, owner=None) -> Build:
        """The build of ``source``: the one running in this process, else a new one.

        ``on_done(build)`` is called when it ends. With ``owner``, ``on_done`` must not
        hold the owner: a background build whose owners have all died by the time a
        compiler is free for it is not run (``error`` is a :class:`BuildCancelled`), so
        that a program making functions faster than the compiler builds them does not
        queue the builds of the functions it dropped before those of the ones it keeps.
        """
        key = (tc.key(source), directory)
        with _lock:
            b = _BUILDS.get(key)
            new = b is None or b.error is not None
            if new:
                b = cls(tc, source, directory)
                b._key = key
                _BUILDS[key] = b
            if on_done is not None:  # under the lock: a cancellation sees every claim
                if owner is None:
                    b._unowned = True
                else:
                    b._owners.append(weakref.ref(owner))
        if on_done is not None:
            b.add_done_callback(on_done)
        if new:
            if background:
                threading.Thread(
                    target=b._run, args=(True,), name="theano_dag-cc", daemon=True
                ).start()
            else:
                b._run(False)
        return b

    def _forsaken(self) -> bool:
        # Every claim came with an owner, and every owner has died.
        return bool(self._owners) and not self._unowned and all(r() is None for r in self._owners)

    def _run(self, background=False):
        t0 = time.perf_counter()
        try:
            with _SLOTS:
                with _lock:  # (a start from now on makes a new build: this one has failed)
                    cancel = background and self._forsaken()
                    if cancel:
                        stats["cancelled"] += 1
                        self.error = BuildCancelled("no function waits for this build any more")
                if not cancel:
                    self.path = compile_library(self.tc, self.source, self.directory)
        except Exception as e:  # reported through .error and the callbacks
            self.error = e
        self.seconds = time.perf_counter() - t0
        with self._cb_lock:
            self._finished = True
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)
        self.done.set()  # after the callbacks: a waiter sees the library loaded
        # Shared while it runs only: once built, the library is found in the cache, and a
        # process making many functions would otherwise keep every source it compiled.
        with _lock:
            if _BUILDS.get(self._key) is self:
                del _BUILDS[self._key]

    def add_done_callback(self, fn):
        """Call ``fn(build)`` when the build ends (now, if it has)."""
        with self._cb_lock:
            if not self._finished:
                self._callbacks.append(fn)
                return
        fn(self)

    def wait(self, timeout=None) -> bool:
        return self.done.wait(timeout)
