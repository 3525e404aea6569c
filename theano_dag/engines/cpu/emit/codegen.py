"""Straight-line Python source for one plan, compiled once per distinct source.

Each plan becomes a module of one function, one line (or a few) per node::

    def core(x0):
        _tok = _err_off()
        try:
            v0 = _add1(x0, _k0, out=b0)
            v1 = _exp2(v0)
        except Exception as _e:
            _fail(_e)
        finally:
            _err_on(_tok)
        return (v1,)

Names starting with ``_`` and ``b`` are globals of the plan (numpy functions,
constants, the plan's block views); ``x`` names are inputs, ``v`` names values.
Floating-point errors are ignored while it runs, as in ``Op.perform``. A value
numpy allocated is deleted after its last reader, so memory is given back as
early as the reference engine does. An error is re-raised with the node that
raised it (found from the line number).

Variants: ``fast`` (checks the inputs itself, applies updates and returns what
``Function`` would: the call path), ``core`` (all outputs as a tuple), and the
``profile`` and ``incremental`` versions of ``core``.

The code objects of long sources are also cached on disk (``<compiledir>/pycode``),
so that a new process running the same graph skips the Python compiler; the folder is
bounded as the other caches are (``misc.cache_eviction``: ``PYCODE_MAX_ENTRIES`` files,
``PYCODE_MAX_BYTES`` bytes, the least recently used out first).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import importlib.util
import linecache
import marshal
import os
import re
import time
import types
import uuid

import numpy as np

from theano_dag.config import config
from theano_dag.engines.basic import raise_with_op
from theano_dag.engines.callspec import buffer_owner, unaliased
from theano_dag.engines.cpu.emit.impls import KernelCall
from theano_dag.misc.cache_eviction import TMP_PREFIX, evict_if_due
from theano_dag.tensor.elemwise import DimShuffle
from theano_dag.tensor.shape import Reshape
from theano_dag.tensor.subtensor import Subtensor

__all__ = ["build_core", "build_fast", "err_off", "err_on", "poison", "CODE_CACHE"]

CODE_CACHE: dict = {}


def _errstate_var():
    try:  # numpy >= 2 keeps its error state in a ContextVar
        from numpy._core import umath

        cv = umath._extobj_contextvar
    except (ImportError, AttributeError):
        return None, None
    with np.errstate(all="ignore"):
        return cv, cv.get()


_CV, _IGNORE = _errstate_var()


def errstate_var():
    """numpy's error-state ``ContextVar`` and its value that ignores every error, or
    ``(None, None)`` when numpy keeps its error state elsewhere (numpy < 2).

    >>> import numpy as np
    >>> cv, ignore = errstate_var()
    >>> cv is None or cv.get() is not ignore
    True
    """
    return _CV, _IGNORE


def _errstate_hooks():
    """Cheap enter/exit of ``np.errstate(all='ignore')``."""
    if _CV is not None:
        # Both are C calls: no Python frame on the hot path.
        return functools.partial(_CV.set, _IGNORE), _CV.reset

    geterrobj, seterrobj = getattr(np, "geterrobj", None), getattr(np, "seterrobj", None)
    if seterrobj is not None:
        # numpy 1.x: the thread's error object [bufsize, errmask, errcall] set directly,
        # a mask of 0 ignoring every error (a fifth of the cost of np.errstate's enter and
        # exit, which a sampler's call of a small function pays every time).
        def off():
            old = geterrobj()
            seterrobj([old[0], 0, old[2]])
            return old

        return off, seterrobj

    def off():
        es = np.errstate(all="ignore")
        es.__enter__()
        return es

    def on(es):
        es.__exit__(None, None, None)

    return off, on


err_off, err_on = _errstate_hooks()


def ignoring_context():
    """A ``contextvars.Context`` in which numpy ignores floating-point errors, or None.

    The call path runs inside it (``ctx.run(fast, ...)``): entering a context costs
    less than setting and resetting numpy's error state around each call. None when
    numpy keeps its error state elsewhere (then the generated code sets it itself).

    >>> import numpy as np
    >>> ctx = ignoring_context()
    >>> ctx is None or ctx.run(np.geterr)["divide"]
    'ignore'
    """
    if _CV is None:
        return None
    ctx = contextvars.copy_context()
    ctx.run(_CV.set, _IGNORE)
    return ctx


# Distinct sources kept compiled (and their text kept for tracebacks).
CODE_CACHE_SIZE = 1024


def _compile(source, tag):
    code = CODE_CACHE.get(source)
    if code is None:
        if len(CODE_CACHE) >= CODE_CACHE_SIZE:
            old_source = next(iter(CODE_CACHE))
            linecache.cache.pop(CODE_CACHE.pop(old_source).co_filename, None)
        digest = hashlib.sha1(source.encode()).hexdigest()[:12]
        filename = f"<theano_dag.cpu {tag} {digest}>"
        lines = source.splitlines(True)
        linecache.cache[filename] = (len(source), None, lines, filename)
        if len(source) >= DISK_CACHE_MIN_CHARS:
            code = _disk_compile(source, filename)
        else:
            code = compile(source, filename, "exec")
        CODE_CACHE[source] = code
    return code


# Sources at least this long have their code object kept on disk too, in
# ``<compiledir>/pycode``: compiling the ~15 KB source of a graph of ~400 nodes took
# 2.2 ms of a fresh process's first call, loading it back 0.15 ms. Shorter sources
# compile faster than a file is written.
DISK_CACHE_MIN_CHARS = 8192
# The folder's bound, sized at most every PYCODE_EVICT_EVERY seconds.
PYCODE_MAX_ENTRIES = 2000
PYCODE_MAX_BYTES = 128 << 20
PYCODE_EVICT_EVERY = 600.0


def _disk_compile(source, filename):
    """``compile(source, filename, "exec")``, through a cache of code objects on disk.

    The key covers the bytecode format (the interpreter's magic number) and the
    filename baked into the code. Like the kernel cache (see ``cc``), a file is written
    under a name of its own and renamed into place, so concurrent processes read a
    whole file or none; anything unreadable is compiled afresh.
    """

    h = hashlib.sha256()
    for part in (importlib.util.MAGIC_NUMBER, filename.encode(), source.encode()):
        h.update(part)
        h.update(b"\0")
    try:
        path = os.path.join(config.compiledir, "pycode", h.hexdigest()[:32] + ".code")
    except Exception:  # no usable compiledir: just compile
        return compile(source, filename, "exec")
    try:
        with open(path, "rb") as f:
            code = marshal.loads(f.read())
            with contextlib.suppress(OSError):
                os.utime(f.fileno())  # used now: the bound keeps it longer
        if isinstance(code, types.CodeType) and code.co_filename == filename:
            return code
    except Exception:  # missing, or not whole marshal data: compile it again
        pass
    code = compile(source, filename, "exec")
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f"{TMP_PREFIX}{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        os.makedirs(directory, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(marshal.dumps(code))
        os.replace(tmp, path)
    except OSError:  # a read-only or full cache: the code still runs
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return code
    evict_if_due(directory, PYCODE_MAX_ENTRIES, PYCODE_MAX_BYTES, PYCODE_EVICT_EVERY)
    return code


# A line a run of kernel steps may move above the kernels before it: it only names an
# array (``v3 = b1``: a block, the destroyed input of an in-place kernel).
_ALIAS = re.compile(r"[A-Za-z_]\w* = [A-Za-z_]\w*")
# The one line of a view step: ``v1 = v0[_g3_idx]``, ``v1 = v0.transpose(_g2_perm)``,
# ``v1 = _g8_reshape(v0)``.
_VIEW_LINE = re.compile(r"[A-Za-z_]\w* = [A-Za-z_][\w.()\[\], ]*")


def _view_source(line):
    """The name a view line reads: ``v0`` of ``v1 = v0[...]`` or ``v1 = _g8_reshape(v0)``."""
    rhs = line.split(" = ", 1)[1]
    if rhs.startswith("_g") and "(" in rhs:
        return rhs.split("(", 1)[1][:-1]
    return re.match(r"\w+", rhs).group(0)


class _Runs:
    """Consecutive kernel steps of a body, gathered into one segment line.

    A step joins the run when its lines are aliases or its target's allocation, then
    one :class:`~theano_dag.engines.cpu.emit.impls.KernelCall`: those lines move above
    the segment (they read no values), its ``del`` lines below it. ``flush`` writes
    the run: the moved lines, ``if _SEGn.c(args): _SEGn.fail(args)`` (its position in
    ``where`` is ``(segment, step indices)``, for the error of the kernel that failed),
    the deletions. A run of one kernel is a segment too: one C call instead of ctypes'.
    """

    def __init__(self, lines, where, pad, extra):
        self.lines, self.where, self.pad, self.extra = lines, where, pad, extra
        # (step index, moved lines, kernel, its arguments' names, its line): the line is
        # a KernelCall, or for a kernel taken without its lines (take_kernel) the plan's
        # ctx, which names the kernel if the run is no segment; kernel, names and line
        # are None for a view taken above the run.
        self.run = []
        self.dels = []
        self.made = 0  # segments named so far
        self.lib = None  # the library of the run's kernels (a run starts with a kernel)

    def join(self, idx, emitted, setup, dels, step=None):
        """Take step ``idx`` (its lines ``emitted``) into the run; False if it cannot."""
        if not emitted or not isinstance(emitted[-1], KernelCall):
            if self.run and self._hoistable(step, emitted):
                # A view inside a run: taken above the segment with the other moved
                # lines (it reads its input's shape and strides, never its values).
                self.run.append((idx, list(emitted), None, None, None))
                self.dels += dels
                return True
            return False
        call = emitted[-1]
        lib = getattr(call.kernel, "library", None)
        if lib is None or (self.run and self.lib is not lib):
            return False
        moved = emitted[:-1]
        for line in moved:
            if line != setup and not _ALIAS.fullmatch(line):
                return False
        self.lib = lib
        self.run.append((idx, moved, call.kernel, call.args, call))
        self.dels += dels
        return True

    def take_kernel(self, idx, kernel_target, names, out, target, setup, dels):
        """Take step ``idx``, a C kernel writing ``target`` (its emit's
        ``kernel_target``: library, the plan's ``ctx``, kernel), into the run as
        ``join`` would take its lines (``setup``, ``out = target``, the kernel's call)
        without making them; False if it cannot (another library's run)."""
        lib, ctx, k = kernel_target
        if self.run and self.lib is not lib:
            return False
        if not lib.started:  # the plan is being generated: every kernel is known by now
            lib.start()
        moved = [] if setup is None else [setup]
        if target != out:
            moved.append(f"{out} = {target}")
        self.lib = lib
        self.run.append((idx, moved, k, (*names, out), ctx))
        self.dels += dels
        return True

    def _hoistable(self, step, emitted):
        """Whether ``step`` is a view that may run before the run's kernels: a constant
        subtensor or a dimshuffle (shape and strides only), or a reshape of a value
        the run does not touch (numpy copies what it cannot reshape in place)."""
        if step is None or step.kind != "view" or len(emitted) != 1:
            return False
        if not _VIEW_LINE.fullmatch(emitted[0]):
            return False
        op = step.node.op
        if type(op) in (Subtensor, DimShuffle):
            return True
        if type(op) is not Reshape:
            return False
        touched = set()
        for _idx, moved, kernel, args, _line in self.run:
            if kernel is not None:
                touched.update(args)
                touched.update(line.split(" = ", 1)[0] for line in moved)
            elif _view_source(moved[0]) in touched:
                touched.add(moved[0].split(" = ", 1)[0])
        return _view_source(emitted[0]) not in touched

    def flush(self):
        run, self.run = self.run, []
        dels, self.dels = self.dels, []
        if not run:
            return
        pad, lines, where = self.pad, self.lines, self.where
        names, operands, kernels, steps = {}, [], [], []
        for idx, _moved, kernel, args, _line in run:
            if kernel is not None:
                operands.append(tuple([names.setdefault(a, len(names)) for a in args]))
                kernels.append(kernel)
                steps.append(idx)
        seg = self.lib.segment(kernels, operands, len(names))
        for idx, moved, kernel, args, line in run:
            for text in moved:
                lines.append(pad + text)
                where.append(idx)
            if seg is None and kernel is not None:
                if not isinstance(line, str):  # taken without its line: named now
                    line = KernelCall(line.glob(kernel, kernel.name.upper()), kernel, args)
                lines.append(pad + line)
                where.append(idx)
        if seg is not None:
            sname = f"_SEG{self.made}"
            self.made += 1
            self.extra[sname] = seg
            args = ", ".join(names)
            lines.append(pad + f"if {sname}.c({args}): {sname}.fail({args})")
            where.append((seg, steps))
        if dels:
            lines.append(pad + "del " + ", ".join(sorted(set(dels))))
            where.append(run[-1][0])


def _body(plan, mode, extra=None):
    """Lines of the computation (indented 8), and a map body line -> step index (or
    ``(segment, step indices)`` for a segment's line). Segments' names go into
    ``extra`` (the generated function's globals)."""
    p = plan.program
    names = p.names
    cat = plan.cat
    lines, where = [], []
    last = {}
    for idx, (_k, st) in enumerate(plan.steps):
        for v in st.inputs:
            last[v] = idx
        for v in st.outputs:
            last.setdefault(v, idx)
    dels: dict = {}
    if mode in ("core", "fast", "profile"):
        keep = set(p.outputs) | set(p.inputs)
        nbytes, min_bytes = plan.nbytes, p.min_plan_bytes
        for v, idx in last.items():
            c = cat.get(v)
            if (c != "fresh" and c != "alloc" and c != "dyn" and c != "view") or v in keep:
                continue
            if c != "view":
                # (The plan knows the bytes of most values: Plan.small for the others.)
                n = nbytes.get(v)
                if n < min_bytes if n is not None else plan.small(v):
                    continue  # freeing it early saves nothing worth a statement
            dels.setdefault(idx, []).append(names[v])
    pad = " " * 8
    cur_node = None
    # Kernel steps gathered into segments: not where a step must stand alone (poisoned
    # targets are filled and checked around each step; a profile times each node; an
    # incremental run skips nodes).
    runs = None
    if mode in ("core", "fast") and not p.poison and extra is not None:
        runs = _Runs(lines, where, pad, extra)
    # (Once per step of every plan: the plan's methods and the modes looked up once.)
    poison = p.poison
    profile, incremental = mode == "profile", mode == "incremental"
    ind = pad + ("    " if incremental else "")
    target_and_setup = plan.target_and_setup
    join = runs.join if runs is not None else None
    steps = plan.steps
    n_steps = len(steps)
    for idx, (k, st) in enumerate(steps):
        if k != cur_node:  # the node's first step
            cur_node = k
            if profile:
                lines.append(pad + "_t = _pc()")
                where.append(idx)
            elif incremental:
                lines.append(pad + f"if _M >> {k} & 1:")
                where.append(idx)
        ins = [names[v] for v in st.inputs]
        outs = [names[v] for v in st.outputs]
        target = setup = None
        if st.kind == "out" and len(outs) == 1:
            target, setup = target_and_setup(st.outputs[0])
            if target is not None:
                # A C kernel into its target joins the run without its lines.
                kernel_target = getattr(st.emit, "kernel_target", None)
                if (
                    kernel_target is not None
                    and join is not None
                    and runs.take_kernel(
                        idx, kernel_target, ins, outs[0], target, setup, dels.get(idx, ())
                    )
                ):
                    dels.pop(idx, None)
                    continue
        if target is None:
            emitted = st.emit(ins, outs, None)
        elif poison:
            pre, post = [], []
            if setup is not None:
                pre.append(setup)
            # Garbage in the target just before the step writes it: any element the
            # step leaves unwritten, or any input that shares the target's memory
            # without the planner's leave, shows in the result.
            if plan.poisoned_target(idx, st.outputs[0]):
                pre.append(f"_poison({target})")
            post.append(f"if {outs[0]} is not {target}: _astray({idx}, {outs[0]}, {target})")
            if setup is not None:
                post.append(f"del {target}")
            emitted = pre + st.emit(ins, outs, target) + post
        elif setup is not None:
            emitted = [setup, *st.emit(ins, outs, target)]
        else:
            emitted = st.emit(ins, outs, target)
        if join is not None:
            if join(idx, emitted, setup, dels.get(idx, ()), st):
                dels.pop(idx, None)
                continue
            runs.flush()
        for line in emitted:
            lines.append(ind + line)
            where.append(idx)
        if profile and (idx + 1 == n_steps or steps[idx + 1][0] != k):
            lines.append(pad + f"_T[{k}] += _pc() - _t; _N[{k}] += 1")
            where.append(idx)
        if idx in dels:
            lines.append(pad + "del " + ", ".join(sorted(set(dels[idx]))))
            where.append(idx)
    if runs is not None:
        runs.flush()
    return lines, where


def _header_lines(plan):
    """Aliasing checks before in-place updates: a shared value the update would overwrite
    must not share memory with another input (Theano copies it then, so do we)."""
    p = plan.program
    lines = []
    if not plan.update_inplace:
        return lines
    for w in plan.update_inplace:
        wn = p.names[w]
        others = [p.names[v] for v in p.inputs if v is not w]
        if others:
            cond = " or ".join(f"_msm({wn}, {o})" for o in others)
            lines.append(f"        if {cond}:")
            lines.append(f"            {wn} = {wn}.copy()")
    return lines


def _make_fail(plan, where, first_line):
    p = plan.program

    def fail(e):
        tb = e.__traceback__
        lineno = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.startswith("<theano_dag.cpu"):
                lineno = tb.tb_lineno
                frame = tb.tb_frame
                break
            tb = tb.tb_next
        if lineno is None:
            raise e
        # The prologue, just above the body, allocates the blocks each call hands out.
        j = lineno - first_line + len(plan.prologue)
        if isinstance(e, MemoryError) and 0 <= j < len(plan.prologue):
            b = plan.prologue_blocks[j]
            if b is not None:
                raise plan.block_memory_error(b) from e
        if not 0 <= lineno - first_line < len(where):
            raise e
        idx = where[lineno - first_line]
        if not isinstance(idx, int):  # a segment's line: the kernel that raised
            seg, idxs = idx
            idx = idxs[seg.at]
        k, st = plan.steps[idx]
        node = st.node
        local = frame.f_locals
        storage = {}
        for v in node.inputs:
            nm = p.names.get(v)
            if nm is not None and nm in local:
                storage[v] = [local[nm]]
            elif nm is not None and nm in frame.f_globals:
                storage[v] = [frame.f_globals[nm]]
        raise_with_op(p.fgraph, node, e, position=k, storage_map=storage)

    return fail


def poison(arr):
    """Fill ``arr`` with garbage that shows: NaN for floats (and complex), ``0xA5`` in
    every byte of anything else.

    >>> a = np.zeros(2); poison(a); a
    array([nan, nan])
    >>> b = np.zeros(2, np.int16); poison(b); b
    array([-23131, -23131], dtype=int16)
    """
    if arr.dtype.kind in "fc":
        arr.fill(np.nan)
    elif arr.flags.c_contiguous and arr.ndim:
        arr.view(np.uint8).fill(0xA5)
    else:  # a 0-d or strided array: the pattern as one value (a bool becomes True)
        arr[...] = np.frombuffer(bytes([0xA5]) * arr.dtype.itemsize, arr.dtype)[0]


def _astray_check(plan):
    def astray(idx, value, target):
        """A step of the poisoned mode bound its output to other memory than its target:
        a view of the target (same bytes, shape and dtype) is fine, anything else is a
        step that wrote where the plan did not look, or read what it did not write."""
        if (
            isinstance(value, np.ndarray)
            and value.shape == target.shape
            and value.dtype == target.dtype
            and value.__array_interface__["data"][0] == target.__array_interface__["data"][0]
            and value.strides == target.strides
        ):
            return
        _k, st = plan.steps[idx]
        got = f"{type(value).__name__} {getattr(value, 'shape', '')}"
        raise AssertionError(
            f"CPU engine (poisoned mode): step {idx} of {st.node} left its output in "
            f"{got}, not in the {target.dtype} array {target.shape} it was given"
        )

    return astray


def _namespace(plan, where, first_line, extra=None):
    p = plan.program
    ns = dict(p.ns)
    ns.update(plan.slot_values)
    ns["_err_off"], ns["_err_on"] = err_off, err_on
    ns["_empty"] = np.empty
    ns["_msm"] = np.may_share_memory
    ns["_fail"] = _make_fail(plan, where, first_line)
    ns["_pc"] = time.perf_counter
    if p.poison:
        ns["_poison"] = poison
        ns["_astray"] = _astray_check(plan)
    ns.update(extra or {})
    return ns


def _assemble(plan, head, body, where, tail, mode, extra=None, errstate=True):
    src = list(head)
    if errstate:
        src.append("    _tok = _err_off()")
    src.append("    try:")
    hdr = _header_lines(plan) + ["        " + line for line in plan.prologue]
    first_line = len(src) + len(hdr) + 1  # 1-based line number of body[0]
    src += hdr
    where = where if body else []
    src += body if body else ["        pass"]
    src.append("    except Exception as _e:")
    src.append("        _fail(_e)")
    if errstate:
        src.append("    finally:")
        src.append("        _err_on(_tok)")
    src += tail
    source = "\n".join(src) + "\n"
    t0 = time.perf_counter()
    code = _compile(source, mode)
    ns = _namespace(plan, where, first_line, extra)
    exec(code, ns)
    plan.codegen_time += time.perf_counter() - t0
    return ns, source


def _ret_tuple(names):
    if not names:
        return "()"
    return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"


def build_core(plan, mode="core", extra=None):
    """Compile the plan's ``core(*inputs) -> tuple of all outputs`` (``mode``: ``"core"``,
    ``"profile"`` or ``"incremental"``, the last taking the dirty mask ``_M`` first)."""
    t0 = time.perf_counter()
    p = plan.program
    args = ", ".join(p.names[v] for v in p.inputs)
    extra = dict(extra or {})
    body, where = _body(plan, mode, extra)
    if mode == "incremental":
        head = [f"def core(_M, {args}):" if args else "def core(_M):"]
        values = [p.names[v] for v in _persistent(plan)]
        if values:
            head.append(f"    {_ret_tuple(values)[1:-1]} = _V")
        tail = []
        if values:
            tail.append(f"    _V[:] = {_ret_tuple(values)}")
        tail.append(f"    return {_ret_tuple([p.names[v] for v in p.outputs])}")
    else:
        head = [f"def core({args}):"]
        tail = [f"    return {_ret_tuple([p.names[v] for v in p.outputs])}"]
    plan.codegen_time += time.perf_counter() - t0
    ns, source = _assemble(plan, head, body, where, tail, mode, extra)
    return ns["core"], source


class _Missing:
    """The default of a fast call's parameters: that argument was not given."""

    def __repr__(self):
        return "<not given>"


_NA = _Missing()


def _slow_na(slow):
    def call(given, rest, kw):
        args = [a for a in given if a is not _NA]
        return slow(*args, *rest, **kw)

    return call


def _persistent(plan):
    """Values an incremental core keeps from call to call (all it computes)."""
    seen, out = set(), []
    for _idx, (_k, st) in enumerate(plan.steps):
        for v in st.outputs:
            if v not in seen:
                seen.add(v)
                out.append(v)
    return out


def build_fast(plan, spec, slow, switch, errstate=True, guarded=False):
    """Compile the plan's call path, a specialisation of ``spec`` (a ``CallSpec``):
    ``fast(x0, x1, ...)`` checks the explicit inputs against this plan's signature
    (else ``switch(args)``), reads the shared values, runs, stores the updates and
    returns what ``PlainCall(spec)`` returns. Any other call (another number of
    arguments, keywords) goes to ``slow``, the plain call.
    ``errstate=False``: the caller runs it where numpy ignores floating-point errors
    (:func:`ignoring_context`). ``guarded=True``: the caller has checked the explicit
    inputs already (a :class:`~theano_dag.engines.callspec.Guard`, in C), so ``fast``
    takes exactly them and checks only the shared inputs it reads."""
    t0 = time.perf_counter()
    p = plan.program
    names = p.names
    explicit = [names[p.inputs[k]] for k in spec.explicit]
    # Fixed parameters with a marker default: cheaper than unpacking *args, and a call
    # with fewer arguments still reaches the generated code (which hands it on).
    if guarded:
        head = [f"def fast({', '.join(explicit)}):"]
    else:
        params = [f"{nm}=_NA" for nm in explicit] + ["*_rest", "**_kw"]
        head = [f"def fast({', '.join(params)}):"]
        cond = ["_rest", "_kw"] + ([f"{explicit[-1]} is _NA"] if explicit else [])
        head.append(f"    if {' or '.join(cond)}:")
        head.append(
            f"        return _slow_na(({', '.join(explicit)}{',' if explicit else ''}), _rest, _kw)"
        )
    extra = {"_slow_na": _slow_na(slow), "_switch": switch, "_nd": np.ndarray, "_NA": _NA}
    checks = []
    for k, v in enumerate(p.inputs):
        nm = names[v]
        if k not in spec.explicit:
            extra[f"_inC{k}"] = spec.input_cells[k]
            head.append(f"    {nm} = _inC{k}[0]")
        if guarded and k in spec.explicit:
            continue
        extra[f"_inD{k}"] = np.dtype(v.type.dtype)
        extra[f"_inS{k}"] = plan.sig[k]
        # ``__class__`` is an attribute read; ``type(x)`` a global lookup and a call.
        checks.append(
            f"{nm}.__class__ is not _nd or {nm}.dtype is not _inD{k} or {nm}.shape != _inS{k}"
        )
    if checks:
        head.append("    if " + " or ".join(checks) + ":")
        head.append(f"        return _switch(({', '.join(explicit)}{',' if explicit else ''}))")

    # The two alias checks below run at every call: written out, the owner of an array's
    # memory read as callspec.buffer_owner gives it (called only where it is a view).
    def owner_id(nm):
        return f"id({nm} if {nm}.base is None else _owner({nm}))"

    held = [names[p.inputs[k]] for k in plan.overwritten_inputs if k not in spec.explicit]
    if plan.kept_ids or (explicit and held):
        extra["_owner"] = buffer_owner
    if plan.kept_ids:
        # An input that is (or views) a buffer the plan keeps (a borrowed output the
        # caller feeds back) is read from a copy: the call overwrites that buffer.
        extra["_kept"] = plan.kept_ids
        extra["_copy"] = np.ndarray.copy
        for v in p.inputs:
            nm = names[v]
            head.append(f"    if {owner_id(nm)} in _kept:")
            head.append(f"        {nm} = _copy({nm})")
    if explicit and held:
        # A caller's array that is (or views) a shared value this call overwrites in
        # place is read from a copy (PlainCall's _unalias_inputs, for any types).
        head.append(f"    _held = {{{', '.join(owner_id(nm) for nm in held)}}}")
        head.append(f"    if {' or '.join(f'{owner_id(nm)} in _held' for nm in explicit)}:")
        head.append(
            f"        {', '.join(explicit)}, = _unaliased(({', '.join(explicit)},), "
            f"({', '.join(held)},))"
        )
        extra["_unaliased"] = unaliased
    body, where = _body(plan, "fast", extra)
    tail = []
    for k_in, k_out in spec.updates:
        tail.append(f"    _inC{k_in}[0] = {names[p.outputs[k_out]]}")
        extra[f"_inC{k_in}"] = spec.input_cells[k_in]
    rets = [names[v] for v in p.outputs[: spec.n_returned]]
    if spec.return_none:
        tail.append("    return None")
    elif spec.unpack_single:
        tail.append(f"    return {rets[0]}")
    else:
        tail.append(f"    return [{', '.join(rets)}]")
    plan.codegen_time += time.perf_counter() - t0
    ns, source = _assemble(plan, head, body, where, tail, "fast", extra, errstate)
    return ns["fast"], source
