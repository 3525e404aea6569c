"""The kernel index: the C of a library's kernels remembered on disk, by what decides it.

A process linking a function generates the C template of each distinct kernel (the
function's fused nodes: a millisecond per 40) and hashes the library's source to find it
in the kernel cache. A process linking a function it linked before (the cache of
optimized graphs hands it the same graph) would make the same C again; the index gives
it back instead.

Each kernel is named by a faithful text of what its C is made from (:func:`kernel_text`:
the scalar op's description, ``theano_dag.graph.op_key``, or a Composite's graph node by
node, its operands' dtypes and broadcast patterns, its compiled-in constants' dtypes and
bytes), digested with the environment the emitters read (theano_dag's code version,
every config flag, the threads' thresholds). An op that has no description (a user's op,
whose code the code version does not hold; one whose equality is not its props'; a
lambda among its props) has no text: its kernel's C is generated, as before. A library
is named by its kernels' digests in order, with its toolchain and numpy's array layout;
its entry holds the source's cache key.

An entry is one file ``<compiledir>/kernel_index/<digest>``, named by the digest of the
library's first kernel, holding the templates of that library's kernels by digest and
its cache key: the library of a function linked again is found with one read, however
many libraries the cache holds. Each template is taken only under its own kernel's
digest, so an entry written for another library (one that shares its first kernel) gives
what it has in common and nothing else. An entry is written whole and renamed into
place; one that does not match its checksum or does not load is removed with one
warning, and the C is generated as if it were not there. The folder is kept under
MAX_ENTRIES entries and MAX_BYTES bytes, the least recently used out first
(``theano_dag.misc.cache_eviction``, as the cache of optimized graphs is).
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import tempfile
import warnings
import zlib

import numpy as np

from theano_dag.config import FLAGS, config
from theano_dag.engines.cpu.emit import csource
from theano_dag.graph.basic import Constant
from theano_dag.graph.op_key import NotDescribable, describe
from theano_dag.misc.cache_eviction import TMP_PREFIX, evict_if_due
from theano_dag.misc.code_version import code_version
from theano_dag.scalar.composite import Composite
from theano_dag.tensor.elemwise import Elemwise

__all__: list = []  # the CPU engine's (ckernel), not a user's

INDEX_VERSION = b"kindex 2"
_MAGIC = b"TDKIDX1\n"
_CHECK = 12  # bytes of the payload's checksum (_checksum)
# Entries larger than this are not read (a damaged size; a library has a few MB at most).
MAX_ENTRY_BYTES = 64 << 20
# The folder's bound (misc.cache_eviction), sized at most every EVICT_EVERY seconds.
MAX_ENTRIES = 12_000  # as cc.MAX_LIBRARIES: an entry per library
MAX_BYTES = 128 << 20
EVICT_EVERY = 600.0

stats = {"hits": 0, "misses": 0, "writes": 0, "damaged": 0}


class _NoText(Exception):
    """A value whose text would not be faithful: the kernel gets no index entry."""


def _checksum(payload: bytes) -> bytes:
    """The payload's length and CRC-32 (a tenth of a cryptographic digest's time, and
    what a damaged file shows: a truncation changes the length, a changed byte the CRC)."""
    return len(payload).to_bytes(8, "little") + zlib.crc32(payload).to_bytes(4, "little")


def _composite_text(op) -> str:
    # What Composite._structure holds (which its equality compares), written in one
    # pass (twice as fast as making the structure and printing it): each node's op,
    # where its inputs come from (input ``i<k>``, node ``n<n>`` or its output
    # ``n<n>.<j>``, a constant's dtype, shape and bytes), its outputs' dtypes; then
    # where each output comes from. Every piece ends where its form says (a repr, a
    # number before "," or ")"), so two graphs have one text only if they are the same.
    where = {v: f"i{k}" for k, v in enumerate(op.inputs)}
    parts = []
    for n, node in enumerate(op.nodes):
        parts.append(describe(node.op))
        args = []
        for v in node.inputs:
            w = where.get(v)
            args.append(_const_text(v) if w is None else w)
        outs = node.outputs
        if len(outs) == 1:
            where[outs[0]] = f"n{n}"
            parts.append(f"({','.join(args)})->{outs[0].type.dtype}")
        else:
            for j, o in enumerate(outs):
                where[o] = f"n{n}.{j}"
            parts.append(f"({','.join(args)})->{[o.type.dtype for o in outs]}")
    outs = []
    for v in op.outputs:
        w = where.get(v)
        outs.append(_const_text(v) if w is None else w)
    return f"Composite{parts!r}{outs!r}"


def _const_text(v) -> str:
    if not isinstance(v, Constant):
        raise _NoText(f"a free variable {v}")  # (Composite refuses them)
    data = np.asarray(v.data)
    return f"c{v.type.dtype}{data.shape}{data.tobytes()!r}"


def kernel_text(key) -> str | None:
    """The text of a CKernel's key ``(op, inputs' (dtype, broadcastable), outputs' (dtype,
    broadcastable), arg_pos, constants (position, dtype, bytes))``, or None when the op
    has none (see the module docstring).

    >>> import theano_dag.tensor as tt
    >>> key = (tt.exp(tt.dvector()).owner.op, (("float64", (False,)),),
    ...        (("float64", (False,)),), (0,), ())
    >>> kernel_text(key).startswith("theano_dag.scalar.math:Exp(ref(")
    True
    """
    op, ins, outs, arg_pos, consts = key
    if type(op) is not Elemwise:
        return None  # kernel_source reads an Elemwise's scalar op: others are not known
    sop = op.scalar_op
    try:
        sop_text = _composite_text(sop) if type(sop) is Composite else describe(sop)
    except (_NoText, NotDescribable):
        return None
    return f"{sop_text}|{op.inplace_items!r}|{ins!r}|{outs!r}|{arg_pos!r}|{consts!r}"


def environment() -> bytes:
    """What the emitters read besides a kernel's key: the code, every flag, the threads'
    thresholds (one digest; computed at each library's first kernel: flags change)."""
    h = hashlib.blake2b(INDEX_VERSION)
    h.update(code_version())
    h.update(repr([(name, getattr(config, name)) for name in FLAGS]).encode())
    h.update(f"{csource.PARALLEL_WORK} {csource.MIN_PARALLEL}".encode())
    return h.digest()


def digest(env: bytes, text: str) -> bytes:
    h = hashlib.blake2b(env, digest_size=32)
    h.update(text.encode())
    return h.digest()


def library_digest(env: bytes, toolchain, layout, kernel_digests) -> bytes:
    """The digest naming a library: its kernels' digests in the order they were added
    (which decides their names and the order of their C), its toolchain (compiler,
    flags, libraries, libmvec's functions) and numpy's array layout."""
    h = hashlib.blake2b(env, digest_size=32)
    h.update(repr((toolchain, sorted(layout.items()) if layout else None)).encode())
    for d in kernel_digests:
        h.update(d)
    return h.digest()


def index_dir(compiledir: str) -> str:
    """The folder of the index's entries inside ``compiledir``.

    >>> index_dir("/tmp/cache")
    '/tmp/cache/kernel_index'
    """
    return os.path.join(compiledir, "kernel_index")


class Entry:
    """One library's entry: templates by kernel digest, cache keys by library digest;
    ``read`` once, ``write`` when this process made something it lacked."""

    def __init__(self, directory: str, name: bytes):
        self.path = os.path.join(index_dir(directory), name.hex()[:40])
        self.templates: dict = {}
        self.keys: dict = {}

    def read(self):
        try:
            with open(self.path, "rb") as f:
                raw = f.read(MAX_ENTRY_BYTES + 1)
        except OSError:
            return  # none yet (or unreadable: then it is not written either)
        why = None
        if len(raw) > MAX_ENTRY_BYTES:
            why = "too large"
        elif raw[: len(_MAGIC)] != _MAGIC:
            why = "not an index entry"
        else:
            check = raw[len(_MAGIC) : len(_MAGIC) + _CHECK]
            payload = raw[len(_MAGIC) + _CHECK :]
            if _checksum(payload) != check:
                why = f"checksum mismatch ({len(raw)} bytes)"
            else:
                try:
                    templates, keys = marshal.loads(payload)
                    if not (
                        type(templates) is dict
                        and type(keys) is dict
                        and all(type(k) is bytes and type(t) is str for k, t in templates.items())
                        and all(type(k) is bytes and type(t) is str for k, t in keys.items())
                    ):
                        raise ValueError("unexpected contents")
                except (ValueError, EOFError, TypeError) as e:
                    why = f"does not load: {e}"
        if why is not None:
            stats["damaged"] += 1
            warnings.warn(
                f"theano_dag: the kernel index entry {self.path} is damaged ({why}); "
                "its kernels' C is generated again",
                RuntimeWarning,
                stacklevel=4,
            )
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            return
        self.templates, self.keys = templates, keys
        with contextlib.suppress(OSError):
            os.utime(self.path)  # used now: the oldest entries are evicted first

    def write(self, templates: dict, keys: dict):
        """Replace the entry with ``templates`` and ``keys`` (best effort: a cache that
        cannot be written is read as it is)."""
        payload = marshal.dumps((templates, keys))
        check = _checksum(payload)
        directory = os.path.dirname(self.path)
        tmp = None
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=TMP_PREFIX)
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + check + payload)
            os.replace(tmp, self.path)
            stats["writes"] += 1
        except OSError:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            return
        evict_if_due(directory, MAX_ENTRIES, MAX_BYTES, EVICT_EVERY)


# Digests of the kernel keys met in this process, by environment and key.
_DIGESTS: dict = {}
MAX_DIGESTS = 8192


def _digest_of(env: bytes, key) -> bytes | None:
    dkey = (env, key)
    d = _DIGESTS.get(dkey, False)
    if d is False:
        text = kernel_text(key)
        d = None if text is None else digest(env, text)
        if len(_DIGESTS) >= MAX_DIGESTS:
            _DIGESTS.clear()
        _DIGESTS[dkey] = d
    return d


class LibraryIndex:
    """The index as one KernelLibrary uses it: ``template(key, first)`` while kernels are
    added (``first``: the key of the library's first kernel, which names its entry),
    ``library_key(...)`` and ``save(...)`` when the library starts."""

    def __init__(self, compiledir: str):
        self.dir = compiledir
        self.env = None
        self.entry = None

    def _entry(self, first_key):
        if self.entry is None:
            if self.env is None:
                self.env = environment()
            d = _digest_of(self.env, first_key)
            if d is None:
                return None
            self.entry = Entry(self.dir, d)
            self.entry.read()
        return self.entry

    def template(self, key, first_key):
        """``(template or None, digest or None)`` of the kernel of ``key``."""
        entry = self._entry(first_key)
        if entry is None:
            return None, None
        d = _digest_of(self.env, key)
        t = None if d is None else entry.templates.get(d)
        stats["hits" if t is not None else "misses"] += 1
        return t, d

    def library_key(self, kernels, first_key, toolchain, layout):
        """``(library digest, kernel digests, cache key or None)`` of a library's C
        ``kernels`` (CKernels, in the order they were added), or None when one of them
        has no text."""
        if not kernels or self._entry(first_key) is None:
            return None
        env = self.env
        digests = []
        for k in kernels:
            # (Known from the kernel's lookup, unless its template was made earlier in
            # the process: a key's hash and comparison cost more than its digest.)
            d = k.template_digest or _digest_of(env, k.template_key)
            if d is None:
                return None
            digests.append(d)
        ld = library_digest(env, toolchain, layout, digests)
        return ld, digests, self.entry.keys.get(ld)

    def save(self, kernels, found, cache_key: str):
        """Write the entry of this library (its templates, its cache key) unless it holds
        them already."""
        ld, digests, _known = found
        entry = self.entry
        if entry.keys.get(ld) == cache_key and all(d in entry.templates for d in digests):
            return
        templates = {d: k.template for d, k in zip(digests, kernels)}
        entry.write(templates, {ld: cache_key})
        entry.templates, entry.keys = templates, {ld: cache_key}
