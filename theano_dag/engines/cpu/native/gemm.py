"""Matrix products in C for the CPU engine: ``C = alpha * A @ B + beta * C``.

Dot22, Dot (of two matrices) and Gemm run here when the C toolchain targets AVX-512
(``-march=x86-64-v4``); elsewhere, and for products this kernel declines (complex
dtypes, a dimension below 8, operands that overlap the output), numpy's BLAS runs.

Why not always numpy's BLAS: two reasons measured on the 2-core machine of the
benchmarks (``benchmarks/mlp_training.py``).

* numpy's OpenBLAS keeps its worker threads spinning for a while after each call. The
  fused elementwise kernels that come next use OpenMP's threads, and on 2 cores the two
  pools fight: elementwise steps between products ran 2-3x slower than alone. Running
  the products on OpenMP too leaves one pool.
* OpenBLAS picks its kernels from ``OPENBLAS_CORETYPE`` or its CPU table; where that
  means AVX2 on an AVX-512 CPU it reaches half of what the CPU can do.

The algorithm is the one of BLIS (Van Zee and van de Geijn, 2015): B is packed into
panels of ``NR`` columns, A into panels of ``MR`` rows, and a register-blocked micro
kernel (``MR x NR`` accumulators in vector registers, written with GCC's vector
extensions) runs over them. Threads split the longer output dimension; each packs its
own panels. ``config.cpu_gemm`` picks the implementation: ``"auto"`` (this kernel on
AVX-512), ``"c"`` (this kernel wherever a compiler is; tests use it) or ``"numpy"``.

>>> import numpy as np
>>> a, b = np.ones((2, 3)), np.ones((3, 2))
>>> gemm(a, b, np.empty((2, 2)), 1.0, 0.0)
array([[3., 3.],
       [3., 3.]])
"""

from __future__ import annotations

import ctypes
import threading
import warnings

import numpy as np

from theano_dag.config import config
from theano_dag.engines.cpu.emit.csource import array_layout
from theano_dag.engines.cpu.native import c_source, cc

__all__ = ["gemm", "load", "ready", "wanted", "gemm_source", "MIN_DIM"]

# A product with an output side below this runs in numpy (a matrix-vector product in
# disguise: the micro kernel would compute mostly padding).
MIN_DIM = 8
# m * n * k from which the product splits over threads (waking them costs microseconds).
PARALLEL_WORK = 1 << 21


def gemm_source(layout=None) -> str:
    """The C source of the library (``layout``: ndarray field offsets, measured).

    >>> "int td_gemm(" in gemm_source()
    True
    """
    layout = layout or array_layout() or {}
    defines = [f"#define TD_OFF_{k.upper()} {v}" for k, v in sorted(layout.items())]
    defines += [
        "#define TD_KC 256",
        "#define TD_MC 192",
        "#define TD_NC 4096",
        f"#define TD_MIN_DIM {MIN_DIM}",
        f"#define TD_PARALLEL_WORK {PARALLEL_WORK}.0",
    ]
    head = "\n".join(
        [
            "/* theano_dag matrix products (generated) */",
            "#include <stddef.h>",
            "#include <stdlib.h>",
            "#include <string.h>",
            "#ifdef _OPENMP",
            "#include <omp.h>",
            "#endif",
            *defines,
            "/* 1 in a child forked after OpenMP ran (see csource): one thread. */",
            "static int td_serial;",
            "void td_set_serial(int serial) { td_serial = serial; }",
        ]
    )
    # the packed-panel kernel (gemm_kernel.c) once per float type, then the entry points
    kernel = c_source("gemm_kernel.c")
    f32, f64 = (
        kernel.replace("@T@", t).replace("@S@", s) for t, s in (("float", "s"), ("double", "d"))
    )
    return "\n".join([head, "", f32, "", f64, "", c_source("gemm_entry.c")])


# -- loading ---------------------------------------------------------------------------

_STATE = {"fn": None, "lib": None, "build": None, "error": None, "key": None}
_LOCK = threading.Lock()


def wanted() -> bool:
    """Whether ``config.cpu_gemm`` and this machine call for the C products.

    >>> with config.change_flags(cpu_gemm="numpy"):
    ...     wanted()
    False
    """
    return _wanted(cc.get_toolchain(config.cxx))


def _wanted(tc) -> bool:
    choice = config.cpu_gemm
    if choice == "numpy" or tc is None or array_layout() is None:
        return False
    return choice == "c" or tc.level >= 4


def load(wait=False) -> bool:
    """Make the C products available: from the compile cache, else build them (in the
    background unless ``wait``). True once they run. False while building, and where
    ``config.cpu_gemm`` or the machine rules them out (then numpy runs).

    >>> isinstance(load(), bool)
    True
    """
    tc = cc.get_toolchain(config.cxx)
    key = (config.cpu_gemm, config.cxx, config.compiledir)
    with _LOCK:
        if _STATE["key"] != key:  # a flag changed: decide again
            _STATE.update(fn=None, lib=None, build=None, error=None, key=key)
        if not _wanted(tc):
            _STATE["fn"] = None
            return False
        if _STATE["fn"] is not None:
            return True
        build = _STATE["build"]
        if build is None and _STATE["error"] is None:
            src = gemm_source()
            directory = cc.kernel_dir(config.compiledir)
            path = cc.cached_library(tc, src, directory)
            if path is not None:
                _bind(path)
                return _STATE["fn"] is not None
            build = _STATE["build"] = cc.Build.start(tc, src, directory, background=not wait)
            build.add_done_callback(_built)
    if build is not None and wait:
        build.wait()
    return _STATE["fn"] is not None


def _built(build):
    if build.error is not None:
        _STATE["error"] = build.error
        warnings.warn(
            f"theano_dag: C matrix products unavailable, numpy runs them: {build.error}",
            RuntimeWarning,
            stacklevel=2,
        )
        return
    _bind(build.path)


def _bind(path):
    try:
        lib = ctypes.CDLL(path)  # the GIL is released while a product runs
        lib.td_gemm_init(
            ctypes.c_void_p(id(np.ndarray)),
            ctypes.c_void_p(id(np.dtype("float32"))),
            ctypes.c_void_p(id(np.dtype("float64"))),
        )
        if config.cpu_gemm == "auto" and not lib.td_gemm_avx512():
            _STATE["error"] = "the library was built without AVX-512"
            return
        cc.register_library(lib)
        fn = lib.td_gemm
        fn.argtypes = [ctypes.py_object] * 3 + [ctypes.c_double] * 2
        fn.restype = ctypes.c_int
    except (OSError, AttributeError) as e:
        _STATE["error"] = e
        warnings.warn(f"theano_dag: cannot load {path}: {e}", RuntimeWarning, stacklevel=2)
        return
    _STATE["lib"] = lib
    _STATE["fn"] = fn


def ready() -> bool:
    """Whether products run in C now (see :func:`load`).

    >>> isinstance(ready(), bool)
    True
    """
    return _STATE["fn"] is not None


def gemm(a, b, c, alpha, beta):
    """``c = alpha * a @ b + beta * c`` in place, and return ``c``; ``beta == 0``
    ignores what ``c`` held (NaN included), as BLAS does. In C where :func:`load` made
    it available and the operands suit it, else with numpy.

    >>> import numpy as np
    >>> c = np.ones((2, 2))
    >>> gemm(np.eye(2), np.full((2, 2), 2.0), c, 0.5, 3.0)
    array([[4., 3.],
           [3., 4.]])
    """
    fn = _STATE["fn"]
    # (read-only memory, say a borrowed np.load(mmap_mode="r") array, gets numpy's error)
    if fn is not None and c.flags.writeable:
        rc = fn(a, b, c, alpha, beta)
        if rc == 0:
            return c
        if rc == 2:
            raise MemoryError("gemm: out of memory for the packing buffers")
    return _numpy_gemm(a, b, c, alpha, beta)


def _numpy_gemm(a, b, c, alpha, beta):
    if beta == 0 and c.flags.c_contiguous and not _overlap(c, a, b):
        np.dot(a, b, out=c)
        if alpha != 1:
            np.multiply(c, alpha, out=c)
        return c
    p = np.dot(a, b)
    if alpha != 1:
        np.multiply(p, alpha, out=p)
    if beta == 0:
        np.copyto(c, p)
        return c
    if beta != 1:
        np.multiply(c, beta, out=c)
    np.add(c, p, out=c)
    return c


def _overlap(c, a, b):
    return np.may_share_memory(c, a) or np.may_share_memory(c, b)
