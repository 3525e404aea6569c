"""Fused elementwise C kernels for the CPU engine.

Each ``Elemwise{Composite}`` node (and each plain ``Elemwise`` whose scalar op
numpy has no ufunc for) becomes one C function (see :mod:`.csource`); all the
kernels of one compiled function go into one library, built by one compiler
call (:mod:`.cc`), cached on disk and loaded with ctypes.

Time to first result: a library found in the cache is loaded at once; otherwise
it compiles in a background thread while the calls run the numpy path, and
the kernels swap in when it is ready. ``wait_for_kernels(f)`` waits for that
(tests, benchmarks); ``compile_mode("sync")`` makes builds synchronous.

With no compiler (``config.cxx=''``), every node runs through numpy as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import threading
import types
import warnings
import weakref

import numpy as np

from theano_dag.config import config
from theano_dag.engines.cpu.emit import csource
from theano_dag.engines.cpu.emit.csource import (
    DTYPE_CODES,
    NotCompilable,
    array_layout,
    kernel_source,
    preamble,
    steps_source,
)
from theano_dag.engines.cpu.emit.emitters import _axpby, _const_index
from theano_dag.engines.cpu.emit.impls import (
    IMPLS,
    KernelCall,
    Step,
    Temp,
    _destroying,
    _is_float_to_int_cast,
    make_call,
    register_impl,
)
from theano_dag.engines.cpu.native import cc, kindex, segment
from theano_dag.graph.basic import Constant
from theano_dag.graph.utils import gc_paused
from theano_dag.tensor import blas
from theano_dag.tensor.elemwise import (
    CAReduce,
    Elemwise,
    check_runtime_broadcast,
    reduce_last_axis,
)
from theano_dag.tensor.extra_ops import AllocDiag
from theano_dag.tensor.fused import FusedReduce
from theano_dag.tensor.linalg import Cholesky, CholeskyGrad, Solve
from theano_dag.tensor.math import Dot
from theano_dag.tensor.nnet import nnet
from theano_dag.tensor.subtensor import AdvancedIncSubtensor1, AdvancedSubtensor1, IncSubtensor
from theano_dag.tensor.type import TensorType

__all__ = [
    "CKernel",
    "KernelLibrary",
    "RowsKernel",
    "SoftmaxKernel",
    "StepKernel",
    "StepLibrary",
    "step_library",
    "NotCompilable",
    "c_code",
    "wait_for_kernels",
    "kernel_calls",
    "kernel_library",
    "compile_mode",
    "register",
    "unregister",
]

# OpenMP's workers spin for a while after each parallel loop by default. On a machine
# with few cores they then starve the BLAS threads of the Dot/Gemm that usually comes
# next (measured on 2 cores: the MLP training step took 39 ms instead of 4.9 ms). So
# the workers sleep unless the user chose otherwise. libgomp reads this once, when it
# is first loaded, which is by our first kernel library.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# "background": compile while numpy runs; "sync": compile before the first call;
# "off": no C kernels. None: as config.cpu__kernel_compile says.
_MODE = [None]


def _mode(mode=None):
    """The compile mode in force: ``mode``, else :func:`compile_mode`'s, else the flag's."""
    return mode or _MODE[0] or config.cpu__kernel_compile


@contextlib.contextmanager
def compile_mode(mode):
    """Within the block, kernel libraries compile in ``mode``: ``"background"`` or
    ``"sync"`` (outside any block, ``config.cpu__kernel_compile`` says which), or
    ``"off"``; ``"never"`` (for tests) makes the libraries but never builds them, so
    that every call after a kernel's first runs its numpy steps.

    >>> with compile_mode("sync"):
    ...     pass
    """
    if mode not in ("background", "sync", "off", "never"):
        raise ValueError(
            f"compile_mode: expected 'background', 'sync', 'off' or 'never', got {mode!r}"
        )
    old = _MODE[0]
    _MODE[0] = mode
    try:
        yield
    finally:
        _MODE[0] = old


_DTYPES: dict = {}


def _np_dtype(name):
    """``np.dtype(name)``, looked up once per dtype name (every kernel asks)."""
    d = _DTYPES.get(name)
    if d is None:
        d = _DTYPES[name] = np.dtype(name)
    return d


def _is_composite(sop):
    return hasattr(sop, "nodes") and hasattr(sop, "inputs") and hasattr(sop, "outputs")


def _started_ready(k) -> bool:
    """At a kernel's first call before its library was built: start the build (the
    plan's code is being run, so every kernel is known); True when ``k`` has its C entry
    by now (a synchronous build), so that the call runs it."""
    lib = k.library
    if lib is None or lib.started:
        return False
    lib.start()
    return k.ready


# The C templates (and layouts) of the kernels made in this process, keyed as a
# library's (CKernel), with the thread thresholds kernel_source reads.
_TEMPLATES: dict = {}
MAX_TEMPLATES = 2048
# The sources of the libraries of this process and their cache keys
# (KernelLibrary._source_and_key), and the libraries loaded, by path.
_LIBRARY_KEYS: dict = {}
MAX_LIBRARY_KEYS = 64
_LOADED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _ctypes_entry(lib, k):
    """``entry()``: the ctypes function of kernel ``k``'s C entry in ``lib`` (made once,
    at the first call); raises OSError now when ``lib`` lacks the entry or its array
    form (a library that is not the one its source was built into)."""
    segment.entry_address(lib, k.name)
    segment.array_entry(lib, k.name)
    nargs = k.nin + k.nout
    made = []

    def entry():
        if not made:
            fn = getattr(lib, k.name)
            fn.argtypes = [ctypes.py_object] * nargs
            fn.restype = ctypes.c_int
            made.append(fn)
        return made[0]

    return entry


# The ``consts`` and ``destroy`` of the many kernels that have none (read, never
# written): one empty mapping, not an empty dict per kernel.
_NO_ITEMS = types.MappingProxyType({})


class CKernel:
    """One Elemwise node as a C function: ``k(*arrays, out=None)``.

    ``arrays`` are the node's inputs at ``arg_pos`` (size-1 constants are compiled
    in); ``out`` an output array (a tuple for several outputs) or None.

    The engine's generated code calls ``k.c(*arrays, *outs)`` directly (about 0.3 us):
    it returns 0, or an error code after which ``k.fail(*arrays, *outs)`` converts an
    operand it refused (a numpy scalar for a 0-d array) or raises the error numpy
    would. Until the library is loaded, ``k.c`` runs the node through numpy.

    >>> import theano_dag.tensor as tt
    >>> k = CKernel(tt.exp(tt.dvector("x")).owner)  # no library: numpy
    >>> k(np.zeros(2)), k.ready
    (array([1., 1.]), False)
    """

    def __init__(self, node, library=None, name="k", templates=None, kinds=None):
        # ``templates``: the library's C of its kernels, by op, types and compiled-in
        # constants, which a function's hundreds of plain nodes share, and the fused
        # nodes that fusion made alike (a fifth to a third of them in a random graph).
        # ``kinds``: the library's kernels of no compiled-in constant by the identity of
        # their op and types (a function's nodes share a few dozen of each), with all
        # that this constructor derives from them: the kernel of a node of a kind seen
        # before is made without its key. (Made for every Elemwise node of a function
        # when it is linked: kept lean.)
        op = node.op
        inputs, outputs = node.inputs, node.outputs
        self.node = node
        self.name = name
        self.library = library
        consts = None
        for v in inputs:
            # (A computed value, most inputs, is no constant: its owner says so sooner.)
            if v.owner is None and isinstance(v, Constant):
                consts = {}
                break
        if consts is None:
            self.consts = _NO_ITEMS
            self.arg_pos = arg_pos = list(range(len(inputs)))
        else:
            self.consts = consts
            self.arg_pos = arg_pos = []
            for p, v in enumerate(inputs):
                if isinstance(v, Constant) and np.size(v.data) == 1 and all(v.type.broadcastable):
                    consts[p] = np.asarray(v.data)  # its shape, for the numpy fallback
                else:
                    arg_pos.append(p)
            if not consts:
                self.consts = _NO_ITEMS
        kind_key = None
        if kinds is not None and not consts:
            # (Identities are safe keys: the library keeps its kernels, so their nodes'
            # ops and types, alive as long as ``kinds``.)
            kind_key = (id(op), *[id(v.type) for v in inputs], None)
            kind_key += tuple([id(o.type) for o in outputs])
            kind = kinds.get(kind_key)
            if kind is not None:
                (
                    self.template,
                    self.template_key,
                    self.template_digest,
                    self.nin,
                    self.nout,
                    self.in_dtypes,
                    self.out_dtypes,
                    self._shape_arg,
                    self.ndim,
                    self.destroy,
                ) = kind
                return
        # The C with a placeholder for its name: identical kernels share one function.
        scalars = {p: c.reshape(()) for p, c in consts.items()} if consts else {}
        in_types = [v.type for v in inputs]
        out_types = [o.type for o in outputs]
        key = template = layout = digest = None
        if templates is not None:
            # Equal ops (as the merge optimizer takes them) on equal dtypes, broadcast
            # patterns and constants generate the same C (kernel_source reads no more of
            # the types: hashing and comparing the types themselves cost 3x as much).
            # Composites are equal when their graphs are (Composite._structure: each
            # node's op, where its inputs come from, constants by dtype and bytes,
            # every dtype), which is all that kernel_source reads of them; the hash
            # is the printed text, so only composites printed alike are compared.
            key = (
                op,
                tuple([(t.dtype, t.broadcastable) for t in in_types]),
                tuple([(t.dtype, t.broadcastable) for t in out_types]),
                tuple(arg_pos),
                tuple([(p, c.dtype.str, c.tobytes()) for p, c in scalars.items()]),
            )
            known = templates.get(key)
            if known is None:
                # Other functions of this process made the same kernels (a gradient
                # and its forward graph, a model compiled again): their C is looked up
                # with what else kernel_source reads, the thresholds of its threads.
                process_key = (key, csource.PARALLEL_WORK, csource.MIN_PARALLEL)
                known = _TEMPLATES.get(process_key)
                if known is not None:
                    known = templates[key] = (*known, key)
            if known is not None:
                # The key kept is the library's first of its kind (an equal one): the
                # kernel's own, with its tuples, is dropped at once.
                template, layout, digest, key = known
        if key is not None and library is not None and library.index is not None:
            first = library.first_key
            if first is None:
                first = library.first_key = key
            if template is None:
                # Not made in this process: the kernel index may hold it (kindex).
                template, digest = library.index.template(key, first)
        if template is None:
            template = kernel_source("@K@", node, arg_pos, scalars)
        if layout is None:
            # Read from the dtypes, broadcast patterns and positions alone (all in the
            # key, whatever the op): kernels of one template share them, read-only.
            # ``shape_arg``: an input whose runtime shape is the output's (no
            # broadcastable axis).
            shape_arg = None
            for j, p in enumerate(arg_pos):
                if not any(in_types[p].broadcastable):
                    shape_arg = j
                    break
            layout = (
                [_np_dtype(in_types[p].dtype) for p in arg_pos],
                [_np_dtype(t.dtype) for t in out_types],
                shape_arg,
                out_types[0].ndim,
            )
            if key is not None:
                if len(_TEMPLATES) >= MAX_TEMPLATES:  # a bound for long-lived processes
                    _TEMPLATES.clear()
                _TEMPLATES[process_key] = (template, layout, digest)
                templates[key] = (template, layout, digest, key)
        self.template = template
        # What names it in the kernel index (kindex), the digest when it was looked up.
        self.template_key, self.template_digest = key, digest
        self.nin = len(arg_pos)
        self.nout = len(outputs)
        self.in_dtypes, self.out_dtypes, self._shape_arg, self.ndim = layout
        # (An Elemwise's pattern as its items: its inplace_pattern makes a dict.)
        destroy = getattr(op, "inplace_items", None)
        if destroy is None:
            destroy = getattr(op, "inplace_pattern", None)
            destroy = dict(destroy).items() if destroy else ()
        self.destroy = (
            {o: arg_pos.index(i) for o, i in destroy if i in arg_pos} if destroy else _NO_ITEMS
        )
        if kind_key is not None:
            kinds[kind_key] = (
                template,
                key,
                digest,
                self.nin,
                self.nout,
                *layout,
                self.destroy,
            )

    def __repr__(self):
        return f"<CKernel {self.name} ({'C' if self.ready else 'numpy'}) of {self.node.op}>"

    @property
    def ready(self):
        """Whether the kernel runs in C: its library is loaded. Its ``c`` becomes the
        ctypes function of its C entry at its first call (``_numpy_c``): most kernels
        only ever run inside segments, through their array entry points, and making a
        ctypes function costs several microseconds a kernel (the library's loading
        checked that the symbol is there)."""
        lib = self.library
        return lib is not None and lib._entries is not None

    def bound_c(self):
        """``c``, with a lazily bound kernel's ctypes function made now: what a caller
        that keeps the function itself (the C loop of ``scan``, which calls it by its
        address) must hold, rather than the Python function that makes it."""
        if "c" not in self.__dict__ and self.ready:
            self.c = self.library._entries[self.name]()
        return self.c

    def __call__(self, *xs, out=None):
        if len(xs) != self.nin:
            raise TypeError(
                f"{self.node.op}: its kernel takes {self.nin} arrays (the inputs "
                f"at {self.arg_pos}), got {len(xs)}"
            )
        if self.nout == 1:
            if out is None:
                out = self._alloc(xs, 0)
            if self.c(*xs, out):
                self.fail(*xs, out)
            return out
        outs = (
            tuple(out) if out is not None else tuple(self._alloc(xs, j) for j in range(self.nout))
        )
        if self.c(*xs, *outs):
            self.fail(*xs, *outs)
        return outs

    def _alloc(self, xs, j):
        if j in self.destroy:
            return xs[self.destroy[j]]
        if self._shape_arg is not None:
            shape = np.shape(xs[self._shape_arg])
        elif xs:
            # Most calls' operands have one shape: numpy's broadcast (a few us) only
            # where they differ (the kernel checks them all the same).
            shapes = [x.shape if type(x) is np.ndarray else np.shape(x) for x in xs]
            shape = shapes[0]
            for other in shapes:
                if other != shape:
                    try:
                        shape = np.broadcast_shapes(*shapes)
                    except ValueError:
                        self._refuse_shapes(xs)
                    break
        else:
            shape = (1,) * self.ndim
        return np.empty(shape, dtype=self.out_dtypes[j])

    def _numpy_c(self, *args):
        """``c`` until the kernel is bound: its C entry once the library is loaded (made
        now, and put in its place: shared by the kernels of one name), else start the
        library's build and compute with numpy."""
        lib = self.library
        if lib is not None:
            entries = lib._entries
            if entries is None and not lib.started:
                lib.start()  # a synchronous build (or the cache) may load it now
                entries = lib._entries
            if entries is not None:
                fn = self.c = entries[self.name]()
                return fn(*args)
        return self._numpy(args)

    def _numpy(self, args):
        """The kernel's numpy fallback on ``args`` (inputs, then outputs)."""
        xs = args[: self.nin]
        if xs:
            # numpy broadcasts any length 1; the C kernel refuses one its input does not
            # declare broadcastable (a shape known only at run time is checked here).
            first = np.shape(xs[0])
            for x in xs:
                if np.shape(x) != first:
                    self._check_broadcast(xs)
                    break
        with np.errstate(all="ignore"):
            fallbacks = self._fallbacks
            if fallbacks is not None and "fallback" not in self.__dict__:
                return fallbacks.first_use(self, args)  # the library's are not built yet
            return self.fallback(*args)

    # The library's _Fallbacks while its numpy fallbacks are not built (_Fallbacks.add),
    # and the kernel's calls until then.
    _fallbacks = None
    _fallback_calls = 0

    # (The class's, until loading puts the C entry on the kernel: no bound method kept
    # per kernel.)
    c = _numpy_c

    def fallback(self, *args):
        """The node through ``Elemwise.perform`` (the engine installs a faster one)."""
        if len(args) != self.nin + self.nout:
            raise TypeError(
                f"{self.node.op}: expected {self.nin} arrays and {self.nout} "
                f"outputs, got {len(args)} arguments"
            )
        xs, outs = args[: self.nin], args[self.nin :]
        node = self.node
        cells = [[None] for _ in node.outputs]
        node.op.perform(node, self._full_inputs(xs), cells)
        for o, c in zip(outs, cells):
            if o is not c[0]:
                np.copyto(o, c[0], casting="unsafe")
        return 0

    def fail(self, *args):
        """After ``c(*args)`` returned an error code: convert the operand it refused and
        run again, or raise the error numpy would."""
        nin = self.nin
        args = list(args)
        dtypes = self.in_dtypes + self.out_dtypes
        rc = self.c(*args)  # checks fail before anything is written: safe to repeat
        for _ in range(len(args) + 1):
            if not rc:
                # The repeat ran: the refusal no longer holds (a strided call refused
                # while the step library loaded in the background, given it meanwhile).
                return
            kind, k = rc >> 16, rc & 0xFFFF
            if kind not in (1, 2):  # 1: not an ndarray, 2: not the dtype's own descriptor
                break
            v = args[k]
            if k >= nin and not isinstance(v, np.ndarray):
                raise TypeError(
                    f"{self.node.op}: output {k - nin} must be an ndarray, got "
                    f"{type(v).__name__}"
                )
            arr = np.asarray(v)
            if arr.dtype != dtypes[k]:
                what = f"input {k}" if k < nin else f"output {k - nin}"
                raise TypeError(
                    f"{self.node.op}: {what} must have dtype {dtypes[k]}, got " f"{arr.dtype}"
                )
            args[k] = arr.view(dtypes[k])
            rc = self.c(*args)
        if rc >> 16 == 5:
            raise MemoryError(f"{self.node.op}: out of memory for the kernel's buffers")
        if rc >> 16 == 6:  # strided operands, the step library not loaded (yet)
            self._numpy(args)
            return
        kind, k = rc >> 16, rc & 0xFFFF
        if kind not in (3, 4):  # not a wrong ndim or shape: no shape to blame
            raise RuntimeError(f"{self.node.op}: its C kernel returned error code {rc:#x}")
        xs, outs = args[:nin], args[nin:]
        # Wrong ndim or shapes: the reference Elemwise says what is wrong, if it can.
        if k < nin:
            self._check_broadcast(xs)
        what = f"input {k}" if k < nin else f"output {k - nin}"
        raise ValueError(
            f"{self.node.op}: {what} has shape {np.shape(args[k])}, which does not "
            f"broadcast to the output shape {np.shape(outs[0])} (input shapes "
            f"{[np.shape(x) for x in xs]})"
        )

    def _check_broadcast(self, xs):
        """The reference Elemwise's check of operands ``xs`` (its error names the inputs
        and the axis), where the op has one."""
        check = getattr(self.node.op, "_check_runtime_broadcast", None)
        if check is not None:
            check(self.node, self._full_inputs(xs))

    def _refuse_shapes(self, xs):
        """Raise the error of operands whose shapes do not broadcast, as ``fail`` does."""
        self._check_broadcast(xs)
        raise ValueError(
            f"{self.node.op}: input shapes {[np.shape(x) for x in xs]} do not broadcast"
        )

    def _full_inputs(self, xs):
        full = []
        it = iter(xs)
        for p in range(len(self.node.inputs)):
            full.append(self.consts[p] if p in self.consts else next(it))
        return full


_SUFFIX = {"float64": "f64", "float32": "f32"}


class StepKernel:
    """A step whose C is fixed, in the step library (:class:`StepLibrary`: a sum, a
    matrix-vector product, a subtensor write, rows at an index vector ...), named
    ``<stem>_f64`` or ``<stem>_f32``: ``c`` runs numpy (starting the builds) until the
    step library is loaded and ``_bind`` gives it the C entry (``address``, which a
    segment calls); subclasses define ``fail``, numpy's version.
    """

    def __init__(self, node, dtype, stem, library=None):
        self.node = node
        self.library = library
        self.name = f"{stem}_{_SUFFIX[dtype]}"
        self.c = self._numpy_c
        self.ready = False
        self.address = None

    def __repr__(self):
        state = "C" if self.ready else "numpy"
        return f"<{type(self).__name__} {self.name} ({state}) of {self.node.op}>"

    def _bind(self, lib):
        if segment.NativeSegment is None:  # no C entry without the call's C half
            return
        entry = segment.entry_address(lib, f"{self.name}_v")
        n = self.nin + self.nout
        # A segment of this one step: the C entry point called with the arrays.
        self.c = segment.NativeSegment((entry,), (tuple(range(n)),), n)
        self.address = entry
        self.ready = True

    def _numpy_c(self, *args):
        if _started_ready(self):
            return self.c(*args)
        self.fail(*args)
        return 0


class SumKernel(StepKernel):
    """The sum of a float array over all its axes (``kind="all"``), its leading ones
    (``"lead"``) or its trailing ones (``"trail"``), in C: ``td_sum_f64`` ... of the
    step library, as numpy's ``add.reduce`` computes it on C-contiguous arrays,
    bit for bit (numpy's call took about 2 us: most of a small graph's reductions).
    Kinds ``"maxtrail"`` and ``"mintrail"``: the maximum or minimum over the last axis,
    as :func:`reduce_last_axis` computes it (the ``(500, 2)`` max of a mixture's
    log-sum-exp: 2.7 us in numpy). ``c(x, out)`` and ``fail(x, out)`` as a
    :class:`CKernel`'s; ``fail`` (another layout, a numpy scalar, a row of more than 4
    values whose result is a zero or a NaN, more than 16384 values) runs numpy.

    >>> import theano_dag.tensor as tt
    >>> k = SumKernel(tt.sum(tt.dvector()).owner, "float64", (0,))  # no library: numpy
    >>> out = np.empty(()); k.c(np.arange(4.0), out), out
    (0, array(6.))
    """

    nin, nout = 1, 1
    _NAMES = {
        "all": "td_sum",
        "lead": "td_sumlead",
        "trail": "td_sumtrail",
        "maxtrail": "td_maxtrail",
        "mintrail": "td_mintrail",
    }
    _SELECT = {"maxtrail": np.maximum, "mintrail": np.minimum}

    def __init__(self, node, dtype, axes, library=None, kind="all", initial=None):
        super().__init__(node, dtype, self._NAMES[kind], library)
        self.axes = axes
        self.select = self._SELECT.get(kind)
        self.initial = initial  # of a row of no elements (the C kernel fails on one)

    def _bind(self, lib):
        # called through ctypes on a line of its own, by its array entry in a segment
        fn = getattr(lib, self.name)
        fn.argtypes = [ctypes.py_object] * 2
        fn.restype = ctypes.c_int
        self.address = segment.entry_address(lib, f"{self.name}_v")
        self.c = fn
        self.ready = True

    def fail(self, x, out):
        """numpy's sum (maximum, minimum) of ``x`` into ``out`` (what the numpy step runs)."""
        if self.select is not None:
            reduce_last_axis(self.select, x, out, initial=self.initial)
        else:
            np.add.reduce(x, axis=self.axes, out=out)


class MatVecKernel(StepKernel):
    """A small matrix-vector product in C, a step of a segment: ``kind`` ``"mv"``
    (``c(A, x, out)``: ``out = A @ x``), ``"vm"`` (``c(x, A, out)``: ``out = x @ A``) or
    ``"gemv"`` (``c(y, alpha, A, x, beta, out)``: ``out = beta * y + alpha * (A @ x)``,
    rounded as the engine's numpy steps round it), by ``td_mv_f64`` ... of the
    step library (``native/gemv_driver.c``): numpy's call of a product of a few
    hundred values cost more than the product. ``c`` returns a false value, or a true
    one after which ``fail`` runs numpy (BLAS; a matrix of more than 16384 values, an
    operand of another layout or type) or raises numpy's error.

    >>> import theano_dag.tensor as tt
    >>> node = tt.dot(tt.dmatrix(), tt.dvector()).owner
    >>> k = MatVecKernel(node, "float64", "mv")  # no library: numpy
    >>> out = np.empty(2); k.c(np.eye(2), np.array([3.0, 4.0]), out), out
    (0, array([3., 4.]))
    """

    nout = 1
    _NIN = {"mv": 2, "vm": 2, "gemv": 5}

    def __init__(self, node, dtype, kind, library=None):
        super().__init__(node, dtype, f"td_{kind}", library)
        self.kind = kind
        self.nin = self._NIN[kind]

    def fail(self, *args):
        """numpy's product into ``out`` (what the numpy steps run); raises numpy's error
        for operands that do not fit."""
        if self.kind != "gemv":
            np.dot(args[0], args[1], out=args[2])
            return
        y, a, A, x, b, out = args
        p = np.dot(A, x)
        if y.shape != p.shape:
            raise ValueError(f"{self.node.op}: y has shape {y.shape}, the product A @ x {p.shape}")
        _axpby(y, a, p, b, out)


class SubtensorKernel(StepKernel):
    """``x[index] = y`` (``kind="set"``) or ``x[index] += y`` (``"inc"``) in place, for an
    index of known integers and slices, in C: ``td_setsub_f64`` ... of the step
    library, a step of a segment (numpy's indexed assignment of a few values cost
    0.3-0.5 us). ``c(x, y, code)`` with ``code`` the index as :func:`index_code` encodes
    it; ``fail`` runs numpy's assignment (an index out of range, a y that does not
    broadcast or shares memory with x, another layout) or raises numpy's error.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector()
    >>> node = tt.inc_subtensor(x[1:3], tt.dscalar()).owner
    >>> k = SubtensorKernel(node, "float64", "inc", (slice(1, 3),))  # no library: numpy
    >>> a = np.zeros(4); k.c(a, np.array(2.0), index_code((slice(1, 3),))), a
    (0, array([0., 2., 2., 0.]))
    """

    nin, nout = 3, 0

    def __init__(self, node, dtype, kind, index, library=None):
        super().__init__(node, dtype, f"td_{kind}sub", library)
        self.kind = kind
        self.index = tuple(index)

    def fail(self, x, y, code):
        """numpy's assignment (what the numpy step runs)."""
        if self.kind == "set":
            x[self.index] = y
        else:
            x[self.index] += y


class RowsKernel(StepKernel):
    """Rows of a float vector or matrix at an int64 index vector, in C, a step of a
    segment: ``kind="take"`` (``c(x, i, out)``: ``out = x[i]``), ``"set"`` (``c(x, y,
    i)``: ``x[i] = y`` in place) or ``"inc"`` (``x[i] += y`` in place, repeated rows
    accumulating as ``numpy.add.at``), by ``td_take_f64`` ... of the step
    library (numpy's fancy indexing of a hundred values cost about 1-2 us). Every index
    is checked first (negative ones count from the end, as numpy's); ``c`` returns a
    true value, having written nothing, for an index out of range or an operand of
    another layout, and ``fail`` runs numpy, which raises its own IndexError.

    >>> import theano_dag.tensor as tt
    >>> node = tt.dvector()[tt.lvector()].owner
    >>> k = RowsKernel(node, "float64", "take")  # no library: numpy
    >>> out = np.empty(3); k.c(np.arange(4.0), np.array([3, -1, 0]), out), out
    (0, array([3., 3., 0.]))
    """

    nout = 0
    nin = 3
    _NAMES = {"take": "td_take", "set": "td_setrows", "inc": "td_incrows"}

    def __init__(self, node, dtype, kind, library=None):
        super().__init__(node, dtype, self._NAMES[kind], library)
        self.kind = kind

    def fail(self, a, b, c):
        """numpy's indexing (what the op's ``perform`` runs): raises numpy's IndexError
        for an index out of range."""
        if self.kind == "take":
            np.copyto(c, a[b])
        elif self.kind == "set":
            a[c] = b
        else:
            np.add.at(a, c, np.asarray(b, dtype=a.dtype))


class LinalgKernel(StepKernel):
    """Small dense linear algebra in C, a step of a segment (``native/linalg_driver.c``):
    ``kind`` ``"chol"`` / ``"cholnan"`` (``c(A, out)``: :class:`~theano_dag.tensor.linalg.
    Cholesky`, lower, ``on_error`` ``"raise"`` / ``"nan"``), ``"trsl"``, ``"trsu"``,
    ``"trsl1"``, ``"trsu1"`` (``c(A, b, out)``: a triangular
    :class:`~theano_dag.tensor.linalg.Solve`, lower or upper, ``1``: unit diagonal),
    ``"cholgrad"`` (``c(A, L, dL, out)``) and ``"allocdiag"`` (``c(v, offset, out)``:
    :class:`~theano_dag.tensor.extra_ops.AllocDiag` of a vector), for matrices of at
    most 128 rows, computed in double on the calling thread. ``c`` returns a false
    value, or a true one after which ``fail`` runs the op's ``perform`` (LAPACK through
    numpy or scipy: a larger matrix, another layout, or a matrix LAPACK refuses, whose
    error it raises).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.tensor.linalg import cholesky
    >>> k = LinalgKernel(cholesky(tt.dmatrix()).owner, "float64", "chol")  # no library
    >>> out = np.empty((2, 2)); k.c(np.array([[4.0, 2.0], [2.0, 5.0]]), out), out
    (0, array([[2., 0.],
           [1., 2.]]))
    """

    nout = 1
    _NIN = {"chol": 1, "cholnan": 1, "cholgrad": 3, "allocdiag": 2}

    def __init__(self, node, dtype, kind, library=None):
        super().__init__(node, dtype, f"td_{kind}", library)
        self.kind = kind
        self.nin = self._NIN.get(kind, 2)
        self._perform = make_call(node)

    def fail(self, *args):
        """The op's ``perform`` into ``out`` (what the engine runs without C); raises its
        error (numpy's ``LinAlgError`` for a matrix LAPACK refuses)."""
        ins = args[:1] if self.kind == "allocdiag" else args[:-1]
        np.copyto(args[-1], self._perform(*ins))


class SoftmaxKernel(StepKernel):
    """:class:`~theano_dag.tensor.nnet.nnet.Softmax` (``kind="softmax"``, ``c(x, axis,
    out)``), :class:`~theano_dag.tensor.nnet.nnet.LogSoftmax` (``"logsoftmax"``) or
    :class:`~theano_dag.tensor.nnet.nnet.SoftmaxGrad` (``"smgrad"``, ``c(dy, sm, axis,
    out)``) along ``axis`` (a 0-d int64 array, not negative) of C-contiguous float arrays,
    in C, a step of a segment (``native/softmax_driver.c``): the perform's numpy calls of
    a small softmax cost 10-40 us. ``c`` returns a false value, or a true one after which
    ``fail`` runs the op's ``perform`` into ``out`` (an input of another layout, an
    output over an input, dy and sm of different shapes, whose error it raises).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag.tensor.nnet import softmax
    >>> k = SoftmaxKernel(softmax(tt.dmatrix()).owner, "float64", "softmax")  # no library
    >>> out = np.empty((1, 2)); k.c(np.zeros((1, 2)), np.array(1), out), out
    (0, array([[0.5, 0.5]]))
    """

    nout = 1

    def __init__(self, node, dtype, kind, library=None):
        super().__init__(node, dtype, f"td_{kind}", library)
        self.kind = kind
        self.nin = 3 if kind == "smgrad" else 2
        self._perform = make_call(node)

    def fail(self, *args):
        """The op's ``perform`` into ``out`` (what the engine runs without C); raises its
        error."""
        np.copyto(args[-1], self._perform(*args[:-2]))


def checked_broadcast_shape(op, variables, values, extra=()):
    """The shape ``values`` (of the inputs ``variables`` of elementwise ``op``) and the
    size-1 constants of shapes ``extra`` broadcast to, after Theano's check of them
    (:func:`~theano_dag.tensor.elemwise.check_runtime_broadcast`, its ValueError).

    >>> import theano_dag.tensor as tt
    >>> x, r = tt.dmatrix("x"), tt.drow("r")
    >>> checked_broadcast_shape((x + r).owner.op, [x, r], (np.ones((2, 3)), np.ones((1, 3))))
    (2, 3)
    """
    shapes = [x.shape if type(x) is np.ndarray else np.shape(x) for x in values]
    first = shapes[0]
    nd = len(first)
    for other in shapes:
        if other != first:
            break
    else:  # (most calls: one shape, which every allowed constant broadcasts to)
        if all(len(c) <= nd for c in extra):
            return first
    if all(len(s) == nd for s in shapes) and all(len(c) <= nd for c in extra):
        # Shapes of one length (a column against a matrix): the lengths along each axis,
        # then Theano's rule (a length 1 against a longer one only where declared), in
        # a few loops rather than numpy's broadcast (several microseconds).
        out = list(first)
        for s in shapes:
            for d in range(nd):
                n = s[d]
                if n != out[d]:
                    if out[d] == 1:
                        out[d] = n
                    elif n != 1:
                        out = None
                        break
            if out is None:
                break
        if out is not None:
            for s, v in zip(shapes, variables):
                bcast = v.type.broadcastable
                for d in range(nd):
                    if s[d] == 1 and out[d] != 1 and not bcast[d]:
                        out = None
                        break
                if out is None:
                    break
        if out is not None:
            return tuple(out)
    check_runtime_broadcast(op, variables, values)  # raises Theano's error, where due
    return np.broadcast_shapes(*shapes, *extra)


def _into_target(lib, kname, k, args, out, target):
    """The lines of a step whose kernel ``k`` (global ``kname``) writes the planned block
    ``target``: ``out`` bound to it (the plan binds the target before the step), then the
    kernel's call on ``args`` and ``out``. Starts ``lib``'s build: the plan is being
    generated, so every kernel is known by now."""
    if not lib.started:  # (asked by every kernel step of the plan)
        lib.start()
    bind = [] if target == out else [f"{out} = {target}"]
    return [*bind, KernelCall(kname, k, [*args, out])]


def _linalg_kind(node):
    """The :class:`LinalgKernel` kind running ``node``, or None."""
    op = node.op
    if type(op) is Cholesky:
        return ("chol" if op.on_error == "raise" else "cholnan") if op.lower else None
    if type(op) is CholeskyGrad:
        return "cholgrad"
    if type(op) is Solve and op.A_structure in ("lower_triangular", "upper_triangular"):
        side = "l" if op.A_structure == "lower_triangular" else "u"
        return f"trs{side}{'1' if op.unit_diagonal else ''}"
    if type(op) is AllocDiag and node.inputs[0].type.ndim == 1:
        return "allocdiag" if (op.axis1, op.axis2) in ((0, 1), (1, 0)) else None
    return None


def _float_operands(node, ctx):
    """``(dtype, constants by position, the other inputs)`` of ``node`` when its inputs
    and its output have one float dtype, else None: what a step kernel's step takes."""
    od = node.outputs[0].type.dtype
    if od not in ("float32", "float64") or any(v.type.dtype != od for v in node.inputs):
        return None
    consts = {
        p: ctx.const(np.asarray(ctx.value_of(v)), "k")
        for p, v in enumerate(node.inputs)
        if ctx.is_const(v)
    }
    return od, consts, [v for p, v in enumerate(node.inputs) if p not in consts]


def _step_kernel_step(node, ctx, lib, k, tag, operands, extra=list):
    """The step of step kernel ``k`` (of ``lib``) computing ``node`` where it writes
    a target, with ``extra()``'s constants after the inputs; the op's ``perform``
    elsewhere (``operands``: :func:`_float_operands`)."""
    od, consts, ins = operands
    kname = ctx.glob(k, tag)
    fn = ctx.glob(k._perform, "F")  # the op's perform, as the kernel's fail runs it

    def emit(names, outs, target):
        it = iter(names)
        args = [consts[p] if p in consts else next(it) for p in range(len(node.inputs))]
        if target is None:
            return [f"{outs[0]} = {fn}({', '.join(args)})"]
        return _into_target(lib, kname, k, [*args, *extra()], outs[0], target)

    return [Step(node, node.outputs, ins, emit, prefer_target=True, dtypes=(od,))]


def _make_linalg_emitter(previous):
    """Cholesky (lower), CholeskyGrad, triangular Solve and AllocDiag of a vector, all
    of one float dtype: a :class:`LinalgKernel` step where it writes a target, the op's
    ``perform`` elsewhere."""

    def linalg_steps(node, ctx):
        steps = previous(node, ctx) if previous is not None else None
        lib = _library_of(ctx)
        kind = _linalg_kind(node)
        if lib is None or lib.started or kind is None:
            return steps
        operands = _float_operands(node, ctx)
        if operands is None:
            return steps
        k = lib.add_linalg(node, operands[0], kind)

        def extra():
            if kind == "allocdiag":
                return [ctx.const(np.array(node.op.offset, dtype=np.int64), "k")]
            return []

        return _step_kernel_step(node, ctx, lib, k, "LA", operands, extra)

    return linalg_steps


_SOFTMAX_KINDS = {
    nnet.Softmax: "softmax",
    nnet.LogSoftmax: "logsoftmax",
    nnet.SoftmaxGrad: "smgrad",
}


def _make_softmax_emitter(previous):
    """Softmax, LogSoftmax and SoftmaxGrad of float inputs of the output's dtype: a
    :class:`SoftmaxKernel` step where it writes a target, the op's ``perform``
    elsewhere."""

    def softmax_steps(node, ctx):
        steps = previous(node, ctx) if previous is not None else None
        lib = _library_of(ctx)
        kind = _SOFTMAX_KINDS.get(type(node.op))
        if lib is None or lib.started or kind is None:
            return steps
        operands = _float_operands(node, ctx)
        if operands is None or not operands[2]:
            return steps
        axis = ctx.const(np.array(node.op.axis % node.outputs[0].type.ndim, np.int64), "k")
        k = lib.add_softmax(node, operands[0], kind)
        return _step_kernel_step(node, ctx, lib, k, "SM", operands, lambda: [axis])

    return softmax_steps


_NO_BOUND = np.iinfo(np.int64).min


def index_code(index):
    """The int64 array :class:`SubtensorKernel`'s C reads an index of integers and
    slices from: ``0, i`` per integer, ``1, start, stop, step`` per slice (the int64
    minimum for a bound left out).

    >>> index_code((2, slice(None, 3))).tolist()[:2]
    [0, 2]
    """
    out = []
    for e in index:
        if isinstance(e, slice):
            out += [1] + [_NO_BOUND if b is None else int(b) for b in (e.start, e.stop, e.step)]
        else:
            out += [0, int(e)]
    return np.array(out, dtype=np.int64)


def _call_if_alive(method: weakref.WeakMethod, *args):
    """Call the method a weak reference holds, unless its object has died."""
    bound = method()
    if bound is not None:
        bound(*args)


class KernelLibrary:
    """The kernels of one compiled function and their one shared library.

    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> lib = KernelLibrary()
    >>> k = lib.add((tt.sigmoid(x)).owner)
    >>> "int k0(" in lib.source()
    True
    """

    def __init__(self, toolchain=None, compiledir=None, mode=None):
        self.toolchain = toolchain
        self.compiledir = compiledir
        self.mode = _mode(mode)
        self.kernels = []
        # The kernel index on disk (kindex), and the key of the first kernel, which
        # names the library's entry.
        self.index = kindex.LibraryIndex(compiledir) if compiledir else None
        self.first_key = None
        self._by_source = {}
        self._templates: dict = {}  # plain ops' C templates (CKernel)
        self._kinds: dict = {}  # what CKernel derives from a node's op and types
        self.started = False
        # The libraries still to load once started: "kernels" (its own, where it has
        # generated kernels) and "steps" (the step library).
        self._pending = set()
        self._failures = {}  # the warnings of the parts that failed, by part
        self.steps = None  # the StepLibrary, once started
        self.build = None
        self.path = None
        self.error = None
        self._loaded = threading.Event()
        # Once loaded: each CKernel's name -> the maker of its ctypes function.
        self._entries = None
        self._lock = threading.Lock()
        self._lib = None
        # The segments of the plans' code (weakly: a plan dropped drops its segments),
        # switched to C when the library is loaded.
        self.segments: weakref.WeakSet = weakref.WeakSet()

    def add(self, node) -> CKernel:
        """A kernel for ``node`` (raises NotCompilable); identical ones share C code."""
        if self.started:
            raise RuntimeError("KernelLibrary.add: the library is already built")
        k = CKernel(node, self, templates=self._templates, kinds=self._kinds)
        name = self._by_source.get(k.template)
        if name is None:
            name = f"k{len(self._by_source)}"
            self._by_source[k.template] = name
        k.name = name
        self.kernels.append(k)
        return k

    def _add_step(self, method, k):
        if self.started:
            raise RuntimeError(f"KernelLibrary.{method}: the library is already built")
        self.kernels.append(k)
        return k

    def add_sum(self, node, dtype, axes, kind="all", initial=None) -> SumKernel:
        """A :class:`SumKernel` of ``node`` (its C is in the step library)."""
        return self._add_step("add_sum", SumKernel(node, dtype, axes, self, kind, initial))

    def add_matvec(self, node, dtype, kind) -> MatVecKernel:
        """A :class:`MatVecKernel` of ``node`` (its C is in the step library)."""
        return self._add_step("add_matvec", MatVecKernel(node, dtype, kind, self))

    def add_subtensor(self, node, dtype, kind, index) -> SubtensorKernel:
        """A :class:`SubtensorKernel` of ``node`` (its C is in the step library)."""
        return self._add_step("add_subtensor", SubtensorKernel(node, dtype, kind, index, self))

    def add_rows(self, node, dtype, kind) -> RowsKernel:
        """A :class:`RowsKernel` of ``node`` (its C is in the step library)."""
        return self._add_step("add_rows", RowsKernel(node, dtype, kind, self))

    def add_linalg(self, node, dtype, kind) -> LinalgKernel:
        """A :class:`LinalgKernel` of ``node`` (its C is in the step library)."""
        return self._add_step("add_linalg", LinalgKernel(node, dtype, kind, self))

    def add_softmax(self, node, dtype, kind) -> SoftmaxKernel:
        """A :class:`SoftmaxKernel` of ``node`` (its C is in the step library)."""
        return self._add_step("add_softmax", SoftmaxKernel(node, dtype, kind, self))

    def segment(self, kernels, operands, nargs):
        """A :class:`~.segment.KernelSegment` of ``kernels`` (of this library), or None
        where segments would not run in C (the C half of the call lacks them)."""
        if not segment.available() or any(k.library is not self for k in kernels):
            return None
        return segment.KernelSegment(kernels, operands, nargs)

    def add_segment(self, seg):
        """Track ``seg``: bound to the libraries now if its kernels are loaded, else when
        they are."""
        with self._lock:
            self.segments.add(seg)
            started = self.started
        if started:
            seg.bind(self._lib)

    def source(self) -> str:
        """The whole C source: the preamble and one function per distinct kernel (the
        steps' fixed C is the step library's, :func:`steps_source`)."""
        parts = [preamble(*_layout_and_simd(self.toolchain))]
        for template, name in self._by_source.items():
            parts.append(template.replace("@K@", name))
        return "\n".join(parts)

    def _source_and_key(self):
        """``source()`` and its cache key, kept for the process: a function made again
        (or another of the same kernels) has the same templates under the same names,
        and its library is found without joining and hashing the source again."""
        # (The templates' hashes are known: add() looked each one up.)
        memo_key = (self.toolchain, tuple(self._by_source.items()))
        known = _LIBRARY_KEYS.get(memo_key)
        if known is None:
            # A library this process has not made: the kernel index may know its key
            # (the source is then made only if the library is not in the cache).
            found = None
            if self.index is not None and self.first_key is not None:
                ks = [k for k in self.kernels if type(k) is CKernel]
                layout = array_layout()
                found = self.index.library_key(ks, self.first_key, self.toolchain, layout)
            if found is not None and found[2] is not None:
                known = (None, found[2])
            else:
                src = self.source()
                known = (src, self.toolchain.key(src))
                if found is not None:
                    self.index.save(ks, found, known[1])
            if len(_LIBRARY_KEYS) >= MAX_LIBRARY_KEYS:
                _LIBRARY_KEYS.clear()
            _LIBRARY_KEYS[memo_key] = known
        return known

    @property
    def ready(self) -> bool:
        return self._loaded.is_set()

    @property
    def compile_seconds(self):
        """Seconds the compiler ran for this library (0.0: from the cache; None: not
        built, or still building); the step library's build is not counted."""
        if self.build is None:
            return 0.0 if self.ready else None
        return self.build.seconds

    def start(self):
        """Load the libraries from the cache, or start building them (once): its own,
        for its generated kernels, and the step library, for its step kernels."""
        if self.started:  # every step of a plan's code asks: no lock once started
            return
        with self._lock:
            if self.started:
                return
            self.started = True
        if not self.kernels or self.toolchain is None or self.mode in ("off", "never"):
            return
        # The step library runs the step kernels, and the generated kernels' loop over
        # operands that are not all contiguous.
        kernels = any(type(k) is CKernel for k in self.kernels)
        self._pending = {"kernels", "steps"} if kernels else {"steps"}
        background = self.mode == "background"
        self.steps = step_library(self.toolchain, self.compiledir)
        if kernels:  # first: the function's own kernels are what it needs most
            self._start_kernels(background)
        self.steps.start(background)
        if not background and self.steps.build is not None:
            # Started in the background by an earlier function: its end (the load comes
            # before it, or under late_loads is put off to a chosen point).
            self.steps.build.wait()
        self.steps.when_loaded(self._steps_loaded)

    def _start_kernels(self, background):
        src, key = self._source_and_key()
        directory = cc.kernel_dir(self.compiledir)
        path = cc.cached_library(self.toolchain, src, directory, key=key)
        if path is not None:
            self._load(path)
            return
        if src is None:  # the key came from the kernel index
            src = self.source()
        # Weakly: a function dropped before its build ends is freed now, its library is
        # not loaded for nothing, and a build not yet begun is not run (Build.start).
        built = weakref.WeakMethod(self._built)
        self.build = cc.Build.start(
            self.toolchain,
            src,
            directory,
            background=background,
            on_done=lambda build: _call_if_alive(built, build),
            owner=self,
        )

    def _built(self, build):
        if build.error is not None:
            self.error = build.error
            self._loaded_part(
                "kernels", f"theano_dag: C kernels unavailable, numpy runs instead: {build.error}"
            )
            return
        self._load(build.path)

    def _load(self, path):
        try:
            lib = _open_library(path)
            with gc_paused():
                # Kernels of one C function (one name: the same C, so the same
                # arguments) share its ctypes function, made when one of them is
                # first called outside a segment (CKernel._numpy_c); its symbols are
                # checked now.
                entries = {}
                for k in self.kernels:
                    if type(k) is CKernel and k.name not in entries:
                        entries[k.name] = _ctypes_entry(lib, k)
        except (OSError, AttributeError) as e:
            self.error = e
            self._loaded_part("kernels", f"theano_dag: cannot load C kernels from {path}: {e}")
            return
        self.path = path
        with self._lock:
            self._lib = lib  # keeps the library loaded
            self._entries = entries  # its kernels are ready (CKernel.ready)
        self._loaded_part("kernels")

    def _steps_loaded(self, lib):
        error = self.steps.error
        if lib is not None:
            try:
                with gc_paused():
                    for k in self.kernels:
                        if type(k) is not CKernel:
                            k._bind(lib)
            except (OSError, AttributeError) as e:
                error = e
        if error is None:
            self._loaded_part("steps")
        else:
            self._loaded_part(
                "steps",
                "theano_dag: the C steps are unavailable, numpy runs them and the kernels' "
                f"calls on strided operands instead: {error}",
            )

    def _loaded_part(self, part, failure=None):
        """``part`` ("kernels" or "steps") is loaded, or failed (``failure``: the warning
        to give). The segments whose kernels are all loaded run in C from now (a
        segment's kernels may be of both libraries), the kernels take the step library's
        strided loop once both are loaded, and once both are done a failure gives one
        warning (the step library's once per process)."""
        with self._lock:
            self._pending.discard(part)
            if failure is not None:
                self._failures[part] = failure
            done = not self._pending
            segs = list(self.segments)
            failures = dict(self._failures)
        if self._lib is not None and self.steps.lib is not None:
            self._lib.td_set_general(ctypes.c_void_p(self.steps.general))
        for seg in segs:
            seg.bind(self._lib)  # (a segment with a kernel not loaded stays as it is)
        if not done:
            return
        if "kernels" not in failures:
            self._loaded.set()
        # One fault (a compiler that fails, a cache that cannot be written) fails both
        # libraries: one warning, the kernels' (the steps' is given once).
        if "kernels" in failures or (failures and not self.steps.warned):
            self.steps.warned = self.steps.warned or "steps" in failures
            warnings.warn(
                failures.get("kernels", failures.get("steps")), RuntimeWarning, stacklevel=2
            )

    def wait(self, timeout=None) -> bool:
        """Start the builds if needed, wait for them; True when the kernels and steps run
        in C."""
        self.start()
        if self.build is not None:
            self.build.wait(timeout)
        if self.steps is not None:
            self.steps.wait(timeout)
        return self.ready


def _layout_and_simd(toolchain):
    """The array layout and the libmvec functions a library's preamble is made for."""
    simd = toolchain.simd if toolchain is not None else cc.simd_functions()
    layout = array_layout() or {"type": 8, "data": 16, "nd": 24, "dims": 32,
                                "strides": 40, "descr": 56}  # fmt: skip
    return layout, simd


def _open_library(path):
    """The loaded library at ``path``, initialised (``td_init``) and tracked for forks.

    CDLL: the GIL is released while a kernel runs (it touches no Python object but the
    arrays its caller holds). A library this process has loaded is the one dlopen would
    give again (it goes by the path): its object, with its symbols looked up, serves
    every function whose kernels it holds."""
    lib = _LOADED.get(path)
    if lib is None:
        lib = ctypes.CDLL(path)
        descrs = (ctypes.c_void_p * len(DTYPE_CODES))(*[id(np.dtype(d)) for d in DTYPE_CODES])
        lib.td_init(ctypes.c_void_p(id(np.ndarray)), descrs)
        cc.register_library(lib)
        _LOADED[path] = lib
    return lib


class StepLibrary:
    """The C of the steps that are not generated kernels (the sums, the small products,
    subtensor writes, linear algebra and softmaxes of :class:`StepKernel`) and of the
    generated kernels' loop over operands that are not all contiguous (``td_general``,
    whose address is ``general``): one library per compiler and kernel cache
    (:func:`step_library`), built once and shared by every kernel library of the
    process. In each kernel library, this fixed C took five sixths of the compile time
    of a small function.

    >>> lib = step_library(cc.get_toolchain(config.cxx), config.compiledir)
    >>> lib.started or lib.lib is None
    True
    """

    def __init__(self, toolchain, compiledir):
        self.toolchain = toolchain
        self.compiledir = compiledir
        self.started = False
        self.build = None
        self.lib = None
        self.path = None  # the library's file, once loaded
        self.general = None  # the address of td_general, once loaded
        self.error = None
        self.warned = False  # whether its failure was told (once per process)
        self._done = threading.Event()  # loaded, or failed
        self._callbacks = []
        self._lock = threading.Lock()

    def __repr__(self):
        state = "loaded" if self.lib is not None else "failed" if self.error else "not loaded"
        return f"<StepLibrary ({state}) in {cc.kernel_dir(self.compiledir)}>"

    def start(self, background=True):
        """Load the library from the cache, or start building it (once)."""
        with self._lock:
            if self.started:
                return
            self.started = True
        src = steps_source(*_layout_and_simd(self.toolchain))
        directory = cc.kernel_dir(self.compiledir)
        path = cc.cached_library(self.toolchain, src, directory)
        if path is not None:
            self._load(path)
            return
        self.build = cc.Build.start(
            self.toolchain, src, directory, background=background, on_done=self._built
        )

    def _built(self, build):
        if build.error is not None:
            self._finish(None, build.error)
        else:
            self._load(build.path)

    def _load(self, path):
        try:
            lib = _open_library(path)
            general = segment.entry_address(lib, "td_general")
        except (OSError, AttributeError) as e:
            self._finish(None, e)
            return
        self.general, self.path = general, path
        self._finish(lib, None)

    def _finish(self, lib, error):
        """Loaded (``lib``) or failed (``error``): the waiting callbacks are called. (A
        failure's warning is the kernel libraries': KernelLibrary._loaded_part.)"""
        with self._lock:
            self.lib, self.error = lib, error
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(lib)
        self._done.set()

    def when_loaded(self, fn):
        """Call ``fn(lib)`` once the library is loaded, ``fn(None)`` if it failed: now if
        either has happened."""
        with self._lock:
            done = self.lib is not None or self.error is not None
            if not done:
                self._callbacks.append(fn)
        if done:
            fn(self.lib)

    def wait(self, timeout=None) -> bool:
        """Wait for the build and the load; True when the library is loaded."""
        if self.build is not None:
            self.build.wait(timeout)
        return self._done.wait(timeout) and self.lib is not None


_STEP_LIBRARIES: dict = {}
_STEP_LOCK = threading.Lock()


def step_library(toolchain, compiledir) -> StepLibrary:
    """The :class:`StepLibrary` of ``toolchain`` in the kernel cache of ``compiledir``
    (one per process; not started). Where this process has loaded the step library of
    ``toolchain`` from another cache, that one: its C is the same (functions compiled
    into a new cache, as tests do, then build their own kernels only)."""
    key = (toolchain, cc.kernel_dir(compiledir))
    with _STEP_LOCK:
        lib = _STEP_LIBRARIES.get(key)
        if lib is None:
            loaded = [s for (t, _), s in _STEP_LIBRARIES.items() if t == toolchain and s.lib]
            lib = loaded[0] if loaded else StepLibrary(toolchain, compiledir)
            _STEP_LIBRARIES[key] = lib
    return lib


def kernel_library(toolchain="config", compiledir=None, mode=None):
    """A new KernelLibrary for the configured compiler, or None when C is off.

    >>> with config.change_flags(cxx=""):
    ...     kernel_library() is None
    True
    """
    if _mode(mode) == "off" or array_layout() is None:
        return None
    if toolchain == "config":
        toolchain = cc.get_toolchain(config.cxx)
    if toolchain is None:
        return None
    return KernelLibrary(toolchain, compiledir or config.compiledir, mode)


# -- engine integration --------------------------------------------------------------


def _program_of(f):
    """The CPU Program of a Function, a CPUThunk or a Program."""
    for attr in ("fn", "program"):
        while hasattr(f, attr) and not hasattr(f, "node_steps"):
            f = getattr(f, attr)
    return f if hasattr(f, "node_steps") else None


def c_code(f) -> str:
    """The C source of the fused kernels of ``f`` (a Function on the CPU engine, or a
    FunctionGraph whose Elemwise nodes are shown as the engine would compile them).

    >>> import theano_dag.tensor as tt
    >>> from theano_dag import scalar as ts
    >>> from theano_dag.graph.fg import FunctionGraph
    >>> from theano_dag.tensor.elemwise import Elemwise
    >>> s, x = ts.float32("s"), tt.fvector("x")
    >>> y = Elemwise(ts.Composite([s], [ts.exp(s) * 2]))(x)
    >>> src = c_code(FunctionGraph([x], [y]))
    >>> print(src.splitlines()[0])
    /* theano_dag fused elementwise kernels (generated) */
    >>> print([line.strip() for line in src.splitlines() if " = exp(" in line])
    ['float t0 = exp(x0);']
    """
    prog = _program_of(f)
    if prog is not None:
        lib = getattr(prog, "ckernels", None)
        if lib is None or not lib.kernels:
            return ""
        return lib.source()
    fgraph = getattr(getattr(f, "maker", None), "fgraph", f)
    lib = KernelLibrary(cc.get_toolchain(config.cxx))
    for node in fgraph.toposort():
        if _wants_c(node):
            try:
                lib.add(node)
            except NotCompilable:
                pass
    return lib.source() if lib.kernels else ""


def wait_for_kernels(f, timeout=None) -> bool:
    """Wait until the C kernels of ``f`` are compiled and loaded; True when ``f``'s
    fused nodes now run in C (False: none, no compiler, or the build failed).

    >>> import theano_dag
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> wait_for_kernels(theano_dag.function([x], x + 1))  # nothing fused: no kernels
    False
    """
    prog = _program_of(f)
    lib = getattr(prog, "ckernels", None) if prog is not None else None
    if lib is None or not lib.kernels:
        return False
    return lib.wait(timeout)


def kernel_calls(f) -> list:
    """The kernels and steps (:class:`CKernel`, :class:`LinalgKernel` ...) that the code of
    ``f``'s current plan runs, in order: by a line of their own (``_K0.c(...)``) or inside
    a segment (``_SEG0.c(...)``). ``f`` must have been called (its plan is the last
    call's).

    >>> import numpy as np, theano_dag
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> f = theano_dag.function([x], tt.exp(x) * 2 + 1)
    >>> _ = f(np.zeros(3))
    >>> all(hasattr(k, "c") and hasattr(k, "fail") for k in kernel_calls(f))
    True
    """
    plan = f.fn.current
    code = plan.fast if plan.fast is not None else plan.core
    found = []
    for name in re.findall(r"(\w+)\.c\(", f.fn.source()):
        obj = code.__globals__[name]
        found += obj.kernels if isinstance(obj, segment.KernelSegment) else [obj]
    return found


# The in-place pairs ``(0, j)`` of kernel steps, one tuple each, shared by all steps.
_OUT0_IN = tuple((0, j) for j in range(64))


class _KernelEmit:
    """The ``emit(names, outs, target)`` of a C kernel's step: the lines calling kernel
    ``k`` of ``lib``. ``kernel_target`` is what it makes of a target, for the code
    generator to take into a segment without the lines (codegen._Runs.take_kernel):
    the library, the plan's ``ctx`` and the kernel. The kernel gets a global name
    (``ctx.glob``) only when a line calls it by name: most kernels run inside segments,
    which hold them. (A class of slots, not a closure with a ``kernel_target``
    attribute: one is made per kernel node, and the closure, its cells and its
    attribute's dict took four times the memory.)"""

    __slots__ = ("kernel_target",)

    # Without a target the kernel allocates its result (CKernel._alloc): the plan may
    # leave its shape unknown (data-dependent) and still run it in C.
    allocates = True

    def __init__(self, lib, ctx, k):
        self.kernel_target = (lib, ctx, k)

    def __call__(self, names, outs, target):
        lib, ctx, k = self.kernel_target
        kname = ctx.glob(k, k.name.upper())
        if target is not None:
            return _into_target(lib, kname, k, names, outs[0], target)
        lib.start()  # the plan is being generated: every kernel is known by now
        if k.nout == 1:
            return [f"{outs[0]} = {kname}({', '.join(names)})"]
        return [f"{', '.join(outs)}, = {kname}({', '.join(names)})"]


def _wants_c(node, numpy_steps=None):
    if not isinstance(node.op, Elemwise):
        return False
    sop = node.op.scalar_op
    if _is_composite(sop):
        return True
    # A plain op: C only where numpy has no single ufunc for it (its steps would call
    # the scalar op's Python compute and allocate), or for a cast from a float to an
    # integer, which numpy does in three passes (the range's two, the conversion) and C in one.
    if node.inputs and _is_float_to_int_cast(sop, node.inputs[0].type.dtype):
        return True
    # A 0-d result: numpy gives a scalar, which the step wraps back into an array (two
    # calls); the kernel writes into its planned 0-d block (one).
    if all(o.type.ndim == 0 for o in node.outputs):
        return True
    if numpy_steps is None:
        return False
    return any(getattr(s, "prefer_fresh", False) for s in numpy_steps)


def _library_of(ctx):
    prog = ctx.p
    lib = getattr(prog, "ckernels", False)
    if lib is False:
        lib = kernel_library()
        prog.ckernels = lib
    return lib


def _make_emitter(previous):
    def elemwise_steps(node, ctx):
        lib = _library_of(ctx)
        if lib is None:
            return previous(node, ctx)
        # Where the function has kernels already, a plain op joins them: inside a
        # segment its kernel costs less than numpy's call (about 0.25 us).
        joins = bool(lib.kernels) and segment.available() and not lib.started
        # A kernel's numpy steps are only made if its fallback is ever needed (never,
        # when the library is in the cache); a plain op's decide here whether it
        # takes a kernel unless it joins them anyway.
        steps = None
        if not joins and not _is_composite(node.op.scalar_op):
            steps = previous(node, ctx)
            if steps is not None and not _wants_c(node, steps):
                return steps
        try:
            k = lib.add(node)
        except NotCompilable:
            return steps if steps is not None else previous(node, ctx)
        fallbacks = getattr(lib, "fallbacks", None)
        if fallbacks is None:
            fallbacks = lib.fallbacks = _Fallbacks(ctx)
        fallbacks.add(k, node, steps, previous)
        inputs = node.inputs
        consts = k.consts
        ins = tuple([inputs[p] for p in k.arg_pos]) if consts else tuple(inputs)
        nout = k.nout
        inplace = []
        outputs = node.outputs
        if nout == 1:
            d = outputs[0].type.dtype
            od = (d,)
            for j, v in enumerate(ins):
                # (A computed value, most inputs, is no constant: its owner says so sooner.)
                if v.type.dtype == d and (v.owner is not None or not isinstance(v, Constant)):
                    inplace.append(_OUT0_IN[j] if j < len(_OUT0_IN) else (0, j))
        else:
            od = tuple([o.type.dtype for o in outputs])
        const_shapes = tuple([np.shape(inputs[p].data) for p in consts]) if consts else ()
        step = Step.elementwise_out(
            node,
            tuple(outputs),
            ins,
            _KernelEmit(lib, ctx, k),
            "out" if nout == 1 else "call",
            tuple(inplace),
            const_shapes,
            od,
        )
        # (An Elemwise's pattern read as its items: inplace_pattern makes a dict.)
        destroy = getattr(node.op, "inplace_items", None)
        if destroy is None:
            destroy = getattr(node.op, "inplace_pattern", None)
        if destroy:
            destroy = dict(destroy)
            done = _destroying(ctx, node, [step], destroy)
            if done is None:
                return steps if steps is not None else previous(node, ctx)
            return done
        return [step]

    return elemwise_steps


def _fallback_source(node, steps, k, ctx, fname):
    """Source of ``fname(*arrays, *outs)`` running the numpy steps the engine would
    have run; None when the steps do not allow it (an in-place node, no steps).

    The steps run at the memory floor of a chain, as the planner would run them:
    a step writes over a scratch value of its own that dies there (an input pair it
    declares in-place) when that value has the output's shape, the step of a
    kernel output writes into ``out``, and a scratch value is dropped after its
    last use. So a 40-op chain holds one scratch array, not 40 (issue 18: the
    first call of a cold cache peaked at 96x the warm one).
    """
    if not steps or getattr(node.op, "destroy_map", None):
        return None
    names = {node.inputs[p]: f"a{j}" for j, p in enumerate(k.arg_pos)}
    arrays = frozenset(names)  # the kernel's array inputs: its output may be one of them
    outs = {o: f"o{j}" for j, o in enumerate(node.outputs)}
    copyto = ctx.glob(np.copyto, "copyto")
    last = {}
    for i, st in enumerate(steps):
        for v in st.inputs:
            last[v] = i
    owned = set()  # scratch values this function made: free to overwrite once dead
    lines = ["_S = o0.shape"]
    for i, st in enumerate(steps):
        if st.kind == "view" or any(v not in names for v in st.inputs):
            return None
        ins = [names[v] for v in st.inputs]
        onames = []
        for v in st.outputs:
            names[v] = f"t{len(names)}"
            onames.append(names[v])
        single = st.kind == "out" and len(st.outputs) == 1
        if single and st.outputs[0] in outs and _reads_after_writing(st, arrays):
            lines += st.emit(ins, onames, None)
            lines.append(f"{copyto}({outs[st.outputs[0]]}, {onames[0]}, casting='unsafe')")
        elif single and st.outputs[0] in outs:
            lines += st.emit(ins, onames, outs[st.outputs[0]])
        else:
            reuse = None
            if single:
                reuse = next(
                    (p for _, p in st.inplace if st.inputs[p] in owned and last[st.inputs[p]] == i),
                    None,
                )
            if reuse is None:
                lines += st.emit(ins, onames, None)
            else:
                # Only a scratch array of the output's shape can take the result (an
                # input of a broadcasting step may be smaller; a 0-d step gives a numpy
                # scalar, which no ufunc takes as ``out``).
                nd = ctx.glob(np.ndarray, "ndarray")
                lines.append(f"if {ins[reuse]}.__class__ is {nd} and {ins[reuse]}.shape == _S:")
                lines += [f"    {line}" for line in st.emit(ins, onames, ins[reuse])]
                lines.append("else:")
                lines += [f"    {line}" for line in st.emit(ins, onames, None)]
            for v, n in zip(st.outputs, onames):
                if v in outs:
                    lines.append(f"{copyto}({outs[v]}, {n}, casting='unsafe')")
                elif not st.prefer_fresh:
                    # A computed step may hand back one of its inputs: not scratch.
                    owned.add(v)
        dead = sorted({names[v] for v in st.inputs if v in owned and last[v] == i})
        if dead:
            lines.append(f"del {', '.join(dead)}")
    if any(o not in names for o in node.outputs):
        return None
    params = [f"a{j}" for j in range(k.nin)] + [f"o{j}" for j in range(k.nout)]
    body = "".join(f"    {line}\n" for line in lines)
    return f"def {fname}({', '.join(params)}):\n{body}    return 0\n"


def _reads_after_writing(step, arrays) -> bool:
    """Whether ``step``, writing the kernel's output, may read one of the kernel's
    ``arrays`` after it has written there. The plan may put a kernel's output over any
    of its inputs of the output's dtype (the C reads an element's inputs before it
    writes the element), but a step of several lines allows only the inputs its own
    in-place pairs name: ``fma(x, y, z)`` writes ``x * y`` into its target, then adds
    ``z``, which the target may have been."""
    overwritable = {p for o, p in step.inplace if o == 0}
    dtype = step.dtypes[0]
    return any(
        v in arrays and p not in overwritable and v.type.dtype == dtype
        for p, v in enumerate(step.inputs)
    )


# From this many output elements on, even a kernel's first call runs the numpy steps
# (``Elemwise.perform`` keeps every intermediate of the fused graph alive at once).
COLD_STEPS_MIN_SIZE = 1 << 15

# The numpy steps of an elementwise kernel run over blocks of this many elements, so
# that the scratch values stay in the cache between steps (numexpr's trick): on 1e6
# float64 values a 10-op chain took 0.8x the time of the steps over whole arrays.
FALLBACK_BLOCK = 1 << 14


def _blocked(fb, block=FALLBACK_BLOCK):
    """``fb(*inputs, out)`` (the numpy steps of an elementwise kernel of one output) run
    block by block over the output's elements.

    Blocks are taken along the last axis of C-contiguous views of shape ``(1, ..., 1,
    size)``: a step meets a block of the shape it would have met whole, but for the
    leading ones, and the size-one inputs and constants broadcast as they did. An
    input of another shape (broadcast along some axes) or a non-contiguous array runs
    ``fb`` whole.

    >>> import numpy as np
    >>> def fb(a, o):
    ...     np.multiply(a, 2.0, out=o)
    ...     return 0
    >>> a, o = np.arange(6.0).reshape(2, 3), np.empty((2, 3))
    >>> _blocked(fb, block=4)(a, o), o.tolist()
    (0, [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]])
    """
    nd = np.ndarray

    @functools.wraps(fb)  # its name and source stay fb's (tests, profiles)
    def run(*args):
        out = args[-1]
        shape, size = out.shape, out.size
        if size < 2 * block or out.__class__ is not nd or not out.flags.c_contiguous:
            return fb(*args)
        flat = (1,) * (len(shape) - 1) + (size,)
        views = []
        for a in args[:-1]:
            if a.__class__ is nd and a.shape == shape and a.flags.c_contiguous:
                views.append(a.reshape(flat))
            elif np.size(a) == 1 and np.ndim(a) <= len(shape):
                views.append(None)  # broadcasts to a block as to the whole
            else:
                return fb(*args)
        o = out.reshape(flat)
        for lo in range(0, size, block):
            hi = lo + block
            fb(*[a if v is None else v[..., lo:hi] for a, v in zip(args, views)], o[..., lo:hi])
        return 0

    return run


class _Fallbacks:
    """The numpy fallbacks of a library's kernels while it compiles: a kernel's first
    call on a small output runs ``Elemwise.perform`` (nothing to prepare: the first
    result comes soonest); a first call on a large one, and every later call, the
    engine's numpy steps in place (``_fallback_source``), block by block when they
    are all elementwise (``_blocked``), compiled together for all kernels then (never,
    when the library was loaded before that)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.pending = []

    def add(self, k, node, steps, emitter):
        """``steps``: the node's numpy steps, or None to ask ``emitter`` when needed."""
        self.pending.append((k, node, steps, emitter))
        k._fallbacks = self  # (an attribute, not an object per kernel: first_use)

    def first_use(self, k, args):
        """Kernel ``k``'s fallback until the library's are built: its first call on a
        small output runs ``Elemwise.perform``, anything else builds them all."""
        k._fallback_calls += 1
        if k._fallback_calls == 1 and np.size(args[-1]) < COLD_STEPS_MIN_SIZE:
            return CKernel.fallback(k, *args)
        self.build()
        return k.fallback(*args)

    def build(self):
        with gc_paused():
            self._build()

    def _build(self):
        pending, self.pending = self.pending, []
        srcs, kernels = [], []
        for j, (k, node, steps, emitter) in enumerate(pending):
            if steps is None:
                steps = emitter(node, self.ctx)
            src = _fallback_source(node, steps, k, self.ctx, f"fb{j}")
            if src is None:
                k.fallback = CKernel.fallback.__get__(k)
            else:
                srcs.append(src)
                blocks = k.nout == 1 and all(st.elementwise and st.kind == "out" for st in steps)
                kernels.append((k, f"fb{j}", blocks))
        local: dict = {}
        if srcs:
            code = compile("".join(srcs), "<theano_dag.ckernel fallbacks>", "exec")
            exec(code, self.ctx.p.ns, local)
        for k, name, blocks in kernels:
            k.fallback = _blocked(local[name]) if blocks else local[name]


def _make_fused_reduce_emitter(previous, elemwise_numpy):
    """FusedReduce: its elementwise part by a C kernel (of the equivalent ``Elemwise``
    node) into the planned scratch value, then the reduction as the numpy path does it.
    Without the kernel the elementwise part of a ``switch`` or a ``second`` would run
    through the scalar op's Python ``compute``."""

    def fused_reduce_steps(node, ctx):
        steps = previous(node, ctx)
        lib = _library_of(ctx)
        if lib is None:
            return steps
        if steps is not None:
            red = steps[-1]
            if len(steps) < 2 or len(red.inputs) != 1 or not isinstance(red.inputs[0], Temp):
                return steps
            mid = red.inputs[0]
        else:
            # No numpy step for this reduction (a float32 sum accumulates in float64):
            # the kernel, then the reduction's own perform on its result.
            mid, red = _reduce_by_perform(node, ctx)
            if mid is None:
                return None
        ndim = max(v.type.ndim for v in node.inputs)
        if red.kind == "out":
            fast = _sum_step(node, ctx, node.op.reduce_op, mid, mid.dtype, ndim, red)
            red = red if fast is None else fast
        # The kernel's node has the FusedReduce's input types (the Elemwise it fuses made
        # them of one number of dimensions): its driver refuses a length 1 along an axis
        # its input does not declare broadcastable, as FusedReduce's ``perform`` does.
        # Inputs of other numbers of dimensions (a node made without ``make_node``) are
        # each taken as broadcastable along every axis (of the output's length, or 1),
        # and a line before the kernel checks them. The compiled-in scalar constants stay
        # as they are.
        own_types = all(v.type.ndim == ndim for v in node.inputs)
        fake = [
            v
            if isinstance(v, Constant) and np.size(v.data) == 1 and all(v.type.broadcastable)
            else v.type()
            if own_types
            else TensorType(v.type.dtype, shape=(1,) * v.type.ndim)()
            for v in node.inputs
        ]
        try:
            enode = Elemwise(node.op.scalar_op).make_node(*fake)
        except Exception:  # no Elemwise node of these inputs: the numpy steps
            return steps
        if enode.outputs[0].type.dtype != mid.dtype or len(enode.outputs) != 1:
            return steps
        try:
            k = lib.add(enode)
        except NotCompilable:
            return steps
        fallbacks = getattr(lib, "fallbacks", None)
        if fallbacks is None:
            fallbacks = lib.fallbacks = _Fallbacks(ctx)
        fallbacks.add(k, enode, None, elemwise_numpy)
        kname = ctx.glob(k, k.name.upper())
        ins = [node.inputs[p] for p in k.arg_pos]

        const_shapes = [np.shape(node.inputs[p].data) for p in k.consts]

        def shape_line(names):
            # Its scratch value unplanned (a shape that depends on data): an array of the
            # inputs' broadcast shape, after the check a planned shape made, which a
            # kernel's node of inputs broadcastable along every axis does not: a length 1
            # that FusedReduce refuses.
            check = ctx.glob(checked_broadcast_shape, "bshape")
            op, variables = ctx.glob(node.op, "op"), ctx.glob(tuple(ins), "vars")
            extra = ctx.glob(tuple(const_shapes), "cshapes")
            return f"{check}({op}, {variables}, ({', '.join(names)},), {extra})"

        def emit(names, outs, target):
            if target is not None:
                return _into_target(lib, kname, k, names, outs[0], target)
            lib.start()  # the plan is being generated: every kernel is known by now
            dname = ctx.glob(np.dtype(k.out_dtypes[0]), "D")
            return [
                f"{outs[0]} = _empty({shape_line(names)}, {dname})",
                KernelCall(kname, k, [*names, outs[0]]),
            ]

        # Where the scratch value's shape depends on data, the plan binds it before the
        # step, and a segment may run the kernel: an array of the shape its inputs give
        # (plan.program._dyn_source), which the kernel checks, or of ``shape_line``'s.
        emit.allocates = True
        emit.kernel_target = (lib, ctx, k)
        if not own_types:
            emit.shape_line = shape_line
        inplace = [
            (0, j)
            for j, v in enumerate(ins)
            if v.type.dtype == mid.dtype and not isinstance(v, Constant)
        ]
        step = Step(
            node,
            (mid,),
            ins,
            emit,
            kind="out",
            inplace=inplace,
            elementwise=True,
            const_shapes=const_shapes,
            prefer_target=True,
            dtypes=(mid.dtype,),
        )
        return [step, red]

    return fused_reduce_steps


def _sum_step(node, ctx, op, x, x_dtype, x_ndim, numpy_step):
    """A step summing value ``x`` over all its axes, its leading or its trailing ones
    (or taking its maximum or minimum over its last axis) into the output of ``node`` by
    a :class:`SumKernel` where it writes a target, by ``numpy_step``'s lines elsewhere;
    None when ``op`` is no such reduction (or the library is built)."""
    lib = _library_of(ctx)
    if lib is None or lib.started or x_ndim == 0:
        return None
    ufunc = getattr(op, "ufunc", None)
    if ufunc not in (np.add, np.maximum, np.minimum) or type(op).perform is not CAReduce.perform:
        return None
    od = node.outputs[0].type.dtype
    if x_dtype != od or od not in ("float32", "float64") or op.acc_dtype_for(x_dtype) != od:
        return None
    axes = tuple(op._axes(x_ndim))
    out_ndim = node.outputs[0].type.ndim
    if out_ndim != x_ndim - len(set(axes)):  # keepdims
        return None
    if ufunc is not np.add:
        # the numpy step's reduce_last_axis by columns, the C one row by row alike
        if x_ndim < 2 or axes != (x_ndim - 1,):
            return None
        kind = "maxtrail" if ufunc is np.maximum else "mintrail"
    elif sorted(axes) == list(range(x_ndim)):
        kind = "all"
    elif sorted(axes) == list(range(len(axes))):
        kind = "lead"
    elif sorted(axes) == list(range(x_ndim - len(axes), x_ndim)):
        kind = "trail"
    else:
        return None
    k = lib.add_sum(node, od, axes, kind, op.initial_for(od))
    kname = ctx.glob(k, "SUM")

    def emit(names, outs, target):
        if target is None:
            return numpy_step.emit(names, outs, None)
        return _into_target(lib, kname, k, names[:1], outs[0], target)

    emit.allocates = getattr(numpy_step.emit, "allocates", False)
    return Step(node, node.outputs, (x,), emit, kind="out", prefer_target=True, dtypes=(od,))


def _make_sum_emitter(previous):
    """CAReduce: a float sum, or a maximum or minimum over a short last axis, by a
    :class:`SumKernel`."""

    def careduce_steps(node, ctx):
        steps = previous(node, ctx)
        if steps is None or len(steps) != 1:
            return steps
        (x,) = node.inputs
        st = _sum_step(node, ctx, node.op, x, x.type.dtype, x.type.ndim, steps[0])
        return steps if st is None else [st]

    return careduce_steps


def _reduce_by_perform(node, ctx):
    """``(scratch value, step)``: the FusedReduce ``node``'s reduction run by its
    ``reduce_op.perform`` on a scratch value of the elementwise result; ``(None, None)``
    when the inputs do not allow it."""
    ins = node.inputs
    ndim = node.inputs[0].type.ndim
    if any(not hasattr(v.type, "dtype") or v.type.ndim != ndim for v in ins):
        return None, None
    if all(isinstance(v, Constant) for v in ins):
        return None, None
    mid_dtype = node.op.scalar_op.output_types(tuple(v.type.dtype for v in ins))[0]
    rnode = node.op.reduce_op.make_node(TensorType(mid_dtype, shape=(None,) * ndim)())
    got, want = rnode.outputs[0].type, node.outputs[0].type
    if got.dtype != want.dtype or got.ndim != want.ndim:
        return None, None
    mid = ctx.temp(mid_dtype, "fused_mid")
    mid.like = [("const", ctx.value_of(v)) if ctx.is_const(v) else v for v in ins]
    fn = ctx.glob(make_call(rnode), "F")

    def emit(names, outs, target):
        return [f"{outs[0]} = {fn}({names[0]})"]

    return mid, Step(node, node.outputs, (mid,), emit, kind="call")


def _make_dot_emitter(previous):
    """Dot of a float matrix and a vector (either order): a :class:`MatVecKernel` where it
    writes a target, numpy's lines elsewhere."""

    def dot_steps(node, ctx):
        steps = previous(node, ctx)
        lib = _library_of(ctx)
        if steps is None or len(steps) != 1 or lib is None or lib.started:
            return steps
        x, y = node.inputs[:2]
        od = node.outputs[0].type.dtype
        if od not in ("float32", "float64") or not x.type.dtype == y.type.dtype == od:
            return steps
        kind = {(2, 1): "mv", (1, 2): "vm"}.get((x.type.ndim, y.type.ndim))
        if kind is None:
            return steps
        (st,) = steps
        k = lib.add_matvec(node, od, kind)
        kname = ctx.glob(k, "MV")

        def emit(names, outs, target):
            if target is None:
                return st.emit(names, outs, None)
            return _into_target(lib, kname, k, names, outs[0], target)

        emit.allocates = getattr(st.emit, "allocates", False)  # (numpy's lines there)
        return [Step(node, node.outputs, st.inputs, emit, prefer_target=True, dtypes=(od,))]

    return dot_steps


def _make_gemv_emitter(previous):
    """Gemv of float operands: ``beta * y + alpha * (A @ x)`` by one
    :class:`MatVecKernel` step where it writes a target (or, in place, into ``y``);
    numpy's lines elsewhere."""

    def gemv_steps(node, ctx):
        steps = previous(node, ctx)
        lib = _library_of(ctx)
        if steps is None or len(steps) != 2 or lib is None or lib.started:
            return steps
        z, a, A, x, b = node.inputs
        od = node.outputs[0].type.dtype
        if od not in ("float32", "float64") or ctx.is_const(z):
            return steps
        if any(v.type.dtype != od for v in node.inputs):
            return steps
        if (z.type.ndim, a.type.ndim, A.type.ndim, x.type.ndim, b.type.ndim) != (1, 0, 2, 1, 0):
            return steps
        # Known scalars as 0-d arrays of the output's dtype (the C reads them there).
        consts = {
            p: ctx.const(np.asarray(ctx.value_of(v), dtype=od), "k")
            for p, v in enumerate(node.inputs)
            if p in (1, 4) and ctx.is_const(v)
        }
        ins = [v for p, v in enumerate(node.inputs) if p not in consts]
        k = lib.add_matvec(node, od, "gemv")
        kname = ctx.glob(k, "GEMV")
        destroy = bool(getattr(node.op, "destroy_map", None))
        rest = steps

        def args_of(names):
            it = iter(names)
            return [consts[p] if p in consts else next(it) for p in range(5)]

        if destroy:

            def emit_inplace(names, outs, target):
                lib.start()
                args = args_of(names)
                return [f"{outs[0]} = {args[0]}", KernelCall(kname, k, [*args, args[0]])]

            return [
                Step(node, node.outputs, ins, emit_inplace, kind="view", views={0: 0}, dtypes=(od,))
            ]
        prod = rest[0]

        def emit(names, outs, target):
            if target is None:
                # numpy's two steps, the product into a fresh array first
                args = args_of(names)
                tmp = f"{outs[0]}_p"
                lines = prod.emit([args[2], args[3]], [tmp], None)
                return lines + rest[1].emit(
                    [args[0], tmp, *[args[p] for p in (1, 4) if p not in consts]], outs, None
                )
            return _into_target(lib, kname, k, args_of(names), outs[0], target)

        return [
            Step(
                node,
                node.outputs,
                ins,
                emit,
                inplace=[(0, 0)],
                prefer_target=True,
                dtypes=(od,),
            )
        ]

    return gemv_steps


def _make_inc_subtensor_emitter(previous):
    """In-place set/inc_subtensor of a float array at known integers and slices: a
    :class:`SubtensorKernel` step (numpy's lines until the library is built)."""

    def inc_subtensor_steps(node, ctx):
        steps = previous(node, ctx)
        lib = _library_of(ctx)
        op = node.op
        if steps is None or len(steps) != 1 or lib is None or lib.started or not op.inplace:
            return steps
        x, y, *idx_inputs = node.inputs
        od = x.type.dtype
        if od not in ("float32", "float64") or y.type.dtype != od or ctx.is_const(x):
            return steps
        index = _const_index(node, ctx, idx_inputs)
        if index is None or y.type.ndim > x.type.ndim:
            return steps
        index = index[:-1]  # without the Ellipsis: the axes after it are taken whole
        k = lib.add_subtensor(node, od, "set" if op.set_instead_of_inc else "inc", index)
        kname = ctx.glob(k, "SUB")
        code = ctx.const(index_code(index), "idx")
        yconst = ctx.const(np.asarray(ctx.value_of(y)), "k") if ctx.is_const(y) else None
        ins = (x,) if yconst else (x, y)

        def emit(names, outs, target):
            lib.start()  # the plan is being generated: every kernel is known by now
            yn = yconst or names[1]
            return [f"{outs[0]} = {names[0]}", KernelCall(kname, k, [names[0], yn, code])]

        return [Step(node, node.outputs, ins, emit, kind="view", views={0: 0})]

    return inc_subtensor_steps


def _int64_index(ctx, v):
    """``(name, None)`` of a known index vector as an int64 constant (its values kept),
    ``(None, v)`` for an int64 variable, None for anything else."""
    if ctx.is_const(v):
        val = np.asarray(ctx.value_of(v))
        if val.ndim != 1 or val.dtype.kind not in "iu":
            return None
        as64 = val.astype(np.int64)
        if not np.array_equal(as64, val):
            return None
        return ctx.const(as64, "idx"), None
    if v.type.dtype != "int64":
        return None
    return None, v


def _make_take_emitter(previous):
    """``x[i]`` (AdvancedSubtensor1) of a float vector or matrix and an int64 vector: a
    :class:`RowsKernel` step where it writes a target, numpy's ``x[i]`` elsewhere; the
    op's ``perform`` for anything else."""

    def take_steps(node, ctx):
        steps = previous(node, ctx) if previous is not None else None
        lib = _library_of(ctx)
        if type(node.op) is not AdvancedSubtensor1 or lib is None or lib.started:
            return steps
        x, i = node.inputs
        od = x.type.dtype
        if od not in ("float32", "float64") or x.type.ndim not in (1, 2) or ctx.is_const(x):
            return steps
        index = _int64_index(ctx, i)
        if index is None:
            return steps
        iconst, ivar = index
        ins = (x,) if ivar is None else (x, ivar)
        k = lib.add_rows(node, od, "take")
        kname = ctx.glob(k, "TAKE")

        def emit(names, outs, target):
            iname = iconst or names[1]
            if target is None:
                return [f"{outs[0]} = {names[0]}[{iname}]"]
            return _into_target(lib, kname, k, [names[0], iname], outs[0], target)

        return [Step(node, node.outputs, ins, emit, prefer_target=True, dtypes=(od,))]

    return take_steps


def _make_inc_rows_emitter(previous):
    """In-place ``inc_subtensor(x[i], y)`` / ``set_subtensor`` (AdvancedIncSubtensor1) of a
    float vector or matrix at an int64 vector: a :class:`RowsKernel` step; the op's
    ``perform`` for anything else."""

    def inc_rows_steps(node, ctx):
        steps = previous(node, ctx) if previous is not None else None
        lib = _library_of(ctx)
        op = node.op
        if type(op) is not AdvancedIncSubtensor1 or lib is None or lib.started or not op.inplace:
            return steps
        x, y, i = node.inputs
        od = x.type.dtype
        if od not in ("float32", "float64") or y.type.dtype != od or ctx.is_const(x):
            return steps
        if x.type.ndim not in (1, 2) or y.type.ndim > x.type.ndim:
            return steps
        index = _int64_index(ctx, i)
        if index is None:
            return steps
        iconst, ivar = index
        yconst = ctx.const(np.asarray(ctx.value_of(y)), "k") if ctx.is_const(y) else None
        ins = (x,) + (() if yconst else (y,)) + (() if ivar is None else (ivar,))
        k = lib.add_rows(node, od, "set" if op.set_instead_of_inc else "inc")
        kname = ctx.glob(k, "ROWS")

        def emit(names, outs, target):
            lib.start()  # the plan is being generated: every kernel is known by now
            it = iter(names[1:])
            yn = yconst or next(it)
            iname = iconst or next(it)
            return [f"{outs[0]} = {names[0]}", KernelCall(kname, k, [names[0], yn, iname])]

        return [Step(node, node.outputs, ins, emit, kind="view", views={0: 0})]

    return inc_rows_steps


_REGISTERED_MATVEC: dict = {}


def register_matvec():
    """Make the CPU engine run float Dot (matrix and vector) and Gemv nodes through
    :class:`MatVecKernel` steps, in-place set/inc_subtensor at known indices through
    :class:`SubtensorKernel` steps, ``x[i]`` and in-place set/inc of rows at an index
    vector through :class:`RowsKernel` steps, small Cholesky factors, their gradients,
    triangular solves and diagonal matrices through :class:`LinalgKernel` steps, and
    softmaxes through :class:`SoftmaxKernel` steps (idempotent)."""
    if _REGISTERED_MATVEC:
        return
    for cls, make in (
        (Dot, _make_dot_emitter),
        (blas.Gemv, _make_gemv_emitter),
        (IncSubtensor, _make_inc_subtensor_emitter),
    ):
        previous = IMPLS.get(cls)
        if previous is not None:
            _REGISTERED_MATVEC[cls] = previous
            register_impl(cls)(make(previous))
    # No numpy emitter before these: their ``perform`` runs where the kernel does not.
    for cls, make in (
        (AdvancedSubtensor1, _make_take_emitter),
        (AdvancedIncSubtensor1, _make_inc_rows_emitter),
        (Cholesky, _make_linalg_emitter),
        (CholeskyGrad, _make_linalg_emitter),
        (Solve, _make_linalg_emitter),
        (AllocDiag, _make_linalg_emitter),
        (nnet.Softmax, _make_softmax_emitter),
        (nnet.LogSoftmax, _make_softmax_emitter),
        (nnet.SoftmaxGrad, _make_softmax_emitter),
    ):
        previous = IMPLS.get(cls)
        _REGISTERED_MATVEC[cls] = previous
        register_impl(cls)(make(previous))


def unregister_matvec():
    """Undo :func:`register_matvec`."""
    for cls, previous in _REGISTERED_MATVEC.items():
        if previous is None:
            IMPLS.pop(cls, None)
        else:
            register_impl(cls)(previous)
    _REGISTERED_MATVEC.clear()


_REGISTERED: list = []


def register():
    """Make the CPU engine run fused Elemwise nodes, and the elementwise part of
    FusedReduce nodes, through C kernels (idempotent)."""
    if _REGISTERED:
        return
    previous = IMPLS.get(Elemwise)
    if previous is None:
        return
    register_impl(Elemwise)(_make_emitter(previous))
    _REGISTERED.append(previous)
    previous_fr = IMPLS.get(FusedReduce)
    if previous_fr is not None:
        register_impl(FusedReduce)(_make_fused_reduce_emitter(previous_fr, previous))
        _REGISTERED.append(previous_fr)
    previous_ca = IMPLS.get(CAReduce)
    if previous_ca is not None:
        register_impl(CAReduce)(_make_sum_emitter(previous_ca))
        _REGISTERED.append(previous_ca)


def unregister():
    """Undo :func:`register`: Elemwise nodes run through numpy again."""
    if not _REGISTERED:
        return
    if len(_REGISTERED) > 2:
        register_impl(CAReduce)(_REGISTERED.pop())
    if len(_REGISTERED) > 1:
        register_impl(FusedReduce)(_REGISTERED.pop())
    register_impl(Elemwise)(_REGISTERED.pop())
