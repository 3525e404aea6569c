"""A cache on disk of the graphs ``function`` optimized, as JAX caches its compilations.

Compiling a graph it compiled before (in this process or an earlier one), ``function``
loads the optimized graph from ``<compiledir>/functions/`` instead of copying and
rewriting the user's graph; the engine links it and makes its first call as usual.

The key is a digest of everything the optimized graph depends on, gathered by one walk
of the user's graph in topological order: each node's op (its description,
``theano_dag.graph.op_key``: its class, its props, which its ``__eq__`` compares, and
its name; an object without props by its whole state), where its
inputs come from, its outputs' types, classes and names; each constant's type, dtype,
shape and bytes; each input's type, name and ``In`` flags; the outputs' ``Out`` flags;
the mode's optimizer query, the optdb's registrations and settings, the linker's class and
options; every config flag; and the versions of theano_dag (its files' names, sizes and
modification times), numpy and Python. A graph is cached only when all of that is known
to be faithful (``entry_for``); otherwise it compiles as it always did. Test values
(``compute_test_value``) are not in the key, since the rewrites run without them (under
``compute_test_value_opt``, "off"), only which variables hold one and which share one: a
loaded variable gets the test value of the user's variable that the rewritten graph's
copy of it would hold.

An entry is one file: a header (the key's digest and a checksum of the payload), then a
compact pickle of the graph as tables: the distinct ops and types (an op of the user's
graph found again as the very object the user's graph holds, by the place of its node in
the key's walk; the ops the rewrites made pickled together), the constants, and the
nodes in topological order as ``(op, inputs, output types, names)``. The features of the
normal path's graph (DestroyHandler, Supervisor, ...) are attached again, in the same
order. A damaged entry is removed
with a warning and the graph compiled again; an entry whose ops do not load back is
replaced by a mark that the graph is not to be cached.

>>> import tempfile
>>> import theano_dag, theano_dag.tensor as tt
>>> from theano_dag import config
>>> from theano_dag.compile.function_module import function_cache
>>> with tempfile.TemporaryDirectory() as d, config.change_flags(
...     function_cache=True, compiledir=d
... ):
...     before = function_cache.stats()
...     for _ in range(2):  # the second compile loads what the first one stored
...         x = tt.dvector("x")
...         f = theano_dag.function([x], tt.exp(x) * 2, mode="FAST_COMPILE")
...     after = function_cache.stats()
...     after["stores"] - before["stores"], after["hits"] - before["hits"]
(1, 1)
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tempfile
import time
import warnings
from array import array

import numpy as np

from theano_dag.compile.mode import Mode, _optdb, engine_query, get_optimizer
from theano_dag.config import FLAGS, config
from theano_dag.engines.basic import PerformLinker
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.graph.basic import Apply, Constant, Variable, io_toposort
from theano_dag.graph.destroyhandler import DestroyHandler
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.op_key import NotDescribable, describe
from theano_dag.graph.rewriting import db as _db
from theano_dag.graph.rewriting.basic import ChangeLog
from theano_dag.graph.rewriting.db import Query
from theano_dag.graph.rewriting.merge import MergeFeature
from theano_dag.graph.rewriting.presence import OpPresence
from theano_dag.graph.shared import SharedVariable
from theano_dag.graph.toolbox import PreserveVariableAttributes, ReplaceValidate, Supervisor
from theano_dag.misc.cache_eviction import TMP_PREFIX, evict_if_due
from theano_dag.misc.code_version import code_version
from theano_dag.opt.optdb import optdb
from theano_dag.scalar.basic import ScalarConstant, ScalarVariable
from theano_dag.scalar.composite import Composite
from theano_dag.tensor.elemwise import DimShuffle
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.variable import TensorConstant, TensorVariable

__all__: list = []  # used by FunctionMaker; stats() is reached as function_cache.stats

# The format of an entry; a change of the layout changes it (old entries then miss).
_FORMAT = 4
_MAGIC = b"TDFC\x00\x01\r\n"
_DIGEST = 32
_CHECK = 16
_HEADER = len(_MAGIC) + _DIGEST + _CHECK
MAX_ENTRIES = 2000
MAX_BYTES = 256 * 2**20
# The directory is sized at most this often (seconds), by the process that stores.
_EVICT_EVERY = 600.0

_key_failures: list = []  # a key that could not be made warns once per process

_stats = {
    "hits": 0,
    "misses": 0,
    "stores": 0,
    "ineligible": 0,
    "damaged": 0,
    # CPU seconds spent: computing keys, loading entries (hits), storing them (misses).
    "key_seconds": 0.0,
    "load_seconds": 0.0,
    "store_seconds": 0.0,
}

# The engines whose linking of a loaded graph is known to be the same as of a rewritten one.
_LINKERS = (CPULinker, PerformLinker)
# What a node's outputs and a graph's constants may be: classes built as (type, ...) alone.
_OUTPUT_CLASSES = (Variable, TensorVariable, ScalarVariable)
_CONSTANT_CLASSES = (Constant, TensorConstant, ScalarConstant)
# Attributes of a variable's tag that the cache keeps (trace, test_value) or that every
# tag has. A test value is no part of the key (rewrites run without test values, so the
# optimized graph does not depend on them): an entry notes which of the user's variables
# each of its variables took its test value from, and a load gives it that variable's.
_VAR_TAG_KEYS = frozenset({"attr", "attr_filter", "trace", "test_value"})
_NO_VALUE = object()
_NODE_TAG_KEYS = frozenset({"imported_by", "removed_by"})
# Ops whose objects hold a graph of their own (Scan, OpFromGraph, an Elemwise of a
# Composite): the key would have to walk it too.
_INNER_GRAPH_ATTRS = ("fgraph", "inner_inputs", "inner_outputs", "_fgraph", "nodes")
_GRAPH_PIECES = (Variable, Apply, FunctionGraph)

# id(object) -> (object, its key): ops and types are mostly shared instances. The
# object is held so that its id is not reused while the entry is here.
_keys: dict = {}
# key -> op or type: the object a loaded entry uses, so that a loaded graph holds the
# user's own op instances (as a rewritten copy does) and a second load unpickles nothing.
_objects: dict = {}
_MEMO_LIMIT = 20_000
# pickle of the ops a graph's rewrites made -> those ops, for the last few graphs.
_op_lists: dict = {}
_OP_LISTS_LIMIT = 64
_optdb_checked: list = [None, None]  # [_db.changes() when checked, _optdb_state()]


def stats() -> dict:
    """Counts of this process: ``hits``, ``misses`` (then stored: ``stores``),
    ``ineligible`` graphs and ``damaged`` entries removed, and the seconds spent on
    keys, loads and stores."""
    return dict(_stats)


def forget():
    """Drop what this process remembers of the entries (the keys of its ops and types, the
    objects and the ops of the graphs it stored or loaded): the next load reads its entry
    from disk and unpickles it as a fresh process would. For the fuzzer's
    ``--function-cache``, which compares such loads with compiles without the cache."""
    _keys.clear()
    _objects.clear()
    _op_lists.clear()


def cache_dir() -> str:
    """Where the entries are: ``<compiledir>/functions``."""
    return os.path.join(config.compiledir, "functions")


# ---------------------------------------------------------------------------
# The key


def _key_of(obj) -> bytes:
    hit = _keys.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    return _entry(obj)[1]


def _ours(cls) -> bool:
    module = getattr(cls, "__module__", "") or ""
    return module.startswith("theano_dag.")


def _has_inner_graph(op) -> bool:
    """Whether ``op`` (or its scalar op) holds a graph: an attribute named as one, or one
    that is a graph's piece (a Variable, an Apply, a FunctionGraph, a list of them)."""
    scalar_op = getattr(op, "scalar_op", None)
    for o in (op, scalar_op) if scalar_op is not None else (op,):
        d = getattr(o, "__dict__", None)
        if d is None or not _ours(type(o)):
            return True
        for a in _INNER_GRAPH_ATTRS:
            if a in d or hasattr(type(o), a):
                return True
        for v in d.values():
            t = type(v)
            if (t is list or t is tuple) and v:
                if any(isinstance(i, _GRAPH_PIECES) for i in v):
                    return True
            elif isinstance(v, _GRAPH_PIECES):
                return True
    return False


def _optdb_state():
    """``(pristine, fingerprint)`` of the global optdb: whether it holds only theano_dag's
    own rewrites (no DB under it was changed by code outside theano_dag) and its settings
    can be described faithfully, and a digest of what a query reads from it: per DB, the
    names registered under each tag in order and its settings (positions, which rewrites
    are final or cleanup ones, ``max_use_ratio``, ``ignore_newtrees``, ``order``...),
    which tells apart two processes whose theano_dag modules registered different
    rewrites, and a DB whose setting was changed after a graph was stored. Computed
    again after any DB changed."""
    n = _db.changes()
    if _optdb_checked[0] != n:
        ok, seen, todo = True, set(), [optdb]
        h = hashlib.blake2b(digest_size=_DIGEST)
        while todo:
            d = todo.pop()
            if id(d) in seen:
                continue
            seen.add(id(d))
            ok = ok and d.foreign_changes == 0
            table = d.__db__
            settings = {k: v for k, v in vars(d).items() if k not in _DB_TABLES}
            try:
                text = describe(settings)
            except NotDescribable:
                ok, text = False, ""
            names = {tag: [getattr(o, "name", None) for o in objs] for tag, objs in table.items()}
            h.update(repr((d.name, sorted(d._names), names, text)).encode())
            for objs in table.values():
                todo.extend(o for o in objs if isinstance(o, _db.DB))
            inner = getattr(d, "db", None)
            if isinstance(inner, _db.DB):
                todo.append(inner)
        _optdb_checked[:] = [n, (ok, h.hexdigest())]
    return _optdb_checked[1]


# A DB's tables (what ``_optdb_state`` walks apart) and the inner DB it walks into.
_DB_TABLES = frozenset({"__db__", "_names", "_registered", "db"})


def _linker_key(linker):
    if type(linker) not in _LINKERS:
        return None
    items = []
    for k, v in sorted(vars(linker).items()):
        if k in ("fgraph", "no_recycling", "updates"):
            continue
        if v is not None and not isinstance(v, (bool, int, float, str)):
            return None
        items.append(f"{k}={v!r}")
    return f"{type(linker).__module__}.{type(linker).__qualname__}({','.join(items)})"


def _mode_key(mode):
    """The mode's optimizer query and linker, or None when its graphs are not cached."""
    if type(mode) is not Mode:  # DebugMode, MonitorMode, NanGuardMode...
        return None
    linker = mode.linker
    lk = _linker_key(linker)
    if lk is None:
        return None
    opt = mode.provided_optimizer
    if isinstance(opt, str):
        opt = get_optimizer(opt)
    opt = engine_query(opt, linker)
    if opt is None:
        return f"{lk}|None"
    if type(opt) is not Query or opt.extra_optimizations:
        return None
    if _optdb() is not optdb:
        return None
    pristine, fingerprint = _optdb_state()
    if not pristine:
        return None
    return f"{lk}|{opt!r}|{fingerprint}"


def _flags_key() -> str:
    return repr([(name, getattr(config, name)) for name in FLAGS])


class _Ineligible(Exception):
    pass


def _tag_ok(v) -> bool:
    """Whether ``v``'s tag holds only what the cache keeps (a trace, a test value) or every
    tag has."""
    tag = v._tag
    return tag is None or _VAR_TAG_KEYS.issuperset(vars(tag))


def _class_ok(cls) -> bool:
    ok = _classes_ok.get(cls)
    if ok is None:
        ok = _classes_ok[cls] = _ours(cls)
    return ok


_classes_ok: dict = {}


_DIMSHUFFLE_STATE = DimShuffle((False,), [0]).__dict__.keys()


def _op_entry(op):
    """``(op, its key)``, memoized; raises _Ineligible for an op the cache refuses."""
    if type(op) is DimShuffle and op.__dict__.keys() == _DIMSHUFFLE_STATE:
        # One per broadcast constant: written out (its other fields follow from these).
        key = b"DimShuffle|%s|%s|%s" % (
            repr(op.input_broadcastable).encode(),
            repr(op.new_order).encode(),
            repr(op.inplace).encode(),
        )
        return _remember(op, key)
    if not _ours(type(op)) or _has_inner_graph(op):
        raise _Ineligible
    return _entry(op)


def _type_entry(t):
    if not _ours(type(t)):
        raise _Ineligible
    return _entry(t)


def _entry(obj):
    """``(obj, its key)``: its description (graph.op_key: its class, its props, which its
    ``__eq__`` compares, and its name; an object without props by its whole state),
    memoized by the object."""
    if type(obj) is TensorType:  # the most common by far: written out
        key = b"TensorType|%s|%s|%s" % (
            obj.dtype.encode(),
            repr(obj.shape).encode(),
            repr(obj.name).encode(),
        )
    else:
        try:
            key = describe(obj, name=True).encode()
        except NotDescribable:
            raise _Ineligible from None
    return _remember(obj, key)


def _remember(obj, blob):
    if len(_keys) > _MEMO_LIMIT or len(_objects) > _MEMO_LIMIT:
        _keys.clear()  # (a walk in progress keeps what it found: its table has it)
        _objects.clear()
    entry = _keys[id(obj)] = (obj, blob)
    _objects.setdefault(blob, obj)
    return entry


def _walk(inputs, outputs, accept_inplace):
    """The key's bytes, the user's variables in the walk's order (graph inputs first,
    by position in the inputs) and, per input, whether the outputs or the updates need
    it, by one walk of the graph; raises _Ineligible."""
    index: dict = {}
    variables: list = []
    # The distinct ops and types, each once, by first use; the graph as a stream of
    # numbers (table positions, variable numbers) and a stream of names.
    table: dict = {}
    blobs: list = []
    ints: list = []
    names: list = []
    memo = _keys
    for spec in inputs:
        v = spec.variable
        if v in index or not _tag_ok(v) or not _class_ok(type(v)):
            raise _Ineligible
        index[v] = len(variables)
        variables.append(v)
        t = v.type
        hit = memo.get(id(t))
        if hit is None or hit[0] is not t:
            hit = _type_entry(t)
        names.append(
            f"{type(v).__name__}|{v.name}|{spec.name}|{spec.mutable}|{spec.borrow}|"
            f"{spec.strict}|{spec.allow_downcast}|{spec.implicit}|"
            f"{isinstance(v, SharedVariable)}|{spec.update is not None}"
        )
        k = table.get(hit[1])
        if k is None:
            k = table[hit[1]] = len(blobs)
            blobs.append(hit[1])
        ints.append(k)
    roots = [s.variable for s in outputs] + [s.update for s in inputs if s.update is not None]
    n_in = len(variables)
    used = [False] * n_in  # per input: whether the outputs or updates need it
    for v in roots:
        k = index.get(v)
        if k is not None:
            used[k] = True
    append = ints.append
    classes: dict = {}  # a variable's class -> its number here
    for node in io_toposort(list(variables), roots):
        op = node.op
        hit = memo.get(id(op))
        if hit is None or hit[0] is not op:
            hit = _op_entry(op)
        if node._tag is not None and not _NODE_TAG_KEYS.issuperset(vars(node._tag)):
            raise _Ineligible
        k = table.get(hit[1])
        if k is None:
            k = table[hit[1]] = len(blobs)
            blobs.append(hit[1])
        append(-1 - k)  # a node: its op's table position, negative
        append(len(node.inputs))
        for i in node.inputs:
            k = index.get(i)
            if k is None:
                k = _add_leaf(i, index, variables, blobs, ints, names)
            elif k < n_in:
                used[k] = True
            append(k)
        for o in node.outputs:
            t = o.type
            hit = memo.get(id(t))
            if hit is None or hit[0] is not t:
                hit = _type_entry(t)
            if o._tag is not None and not _tag_ok(o):
                raise _Ineligible
            k = table.get(hit[1])
            if k is None:
                k = table[hit[1]] = len(blobs)
                blobs.append(hit[1])
            append(k)
            cls = type(o)
            k = classes.get(cls)
            if k is None:
                if not _ours(cls):
                    raise _Ineligible
                k = classes[cls] = len(classes)
            append(k)
            names.append(o.name)
            index[o] = len(variables)
            variables.append(o)
    for v in roots:
        if v not in index:  # an ownerless output that is no input
            _add_leaf(v, index, variables, blobs, ints, names)
    names += [f"{c.__module__}.{c.__qualname__}" for c in classes]
    ints.append(-(2**40))  # the outputs follow
    for spec in outputs:
        ints += (index[spec.variable], bool(spec.borrow))
    for spec in inputs:
        if spec.update is not None:
            ints.append(index[spec.update])
    head = b"%d|%d|%d|%d|%d|" % (_FORMAT, accept_inplace, len(blobs), len(ints), len(names))
    parts = [head, code_version(), _flags_key().encode()]
    parts += blobs
    parts.append(array("q", ints).tobytes())
    parts.append(repr(names).encode())
    # Not the test values, but which variables have one and which share one object (an
    # op that returns its input gives its output the input's): a load gives a variable
    # the test value of the first user's variable holding the object it held, which is
    # then the value a rewrite's copy of a tag would carry.
    pairs, _ = _test_value_sources(variables)
    parts.append(array("q", pairs).tobytes())
    return parts, variables, used


def _test_value_sources(variables):
    """``([k, first, ...], {id(value): first})``: per variable of ``variables`` with a test
    value, its position and the first position of one whose test value is the same object
    (the objects stay alive in the tags while the dict is used)."""
    pairs: list = []
    first: dict = {}
    for k, v in enumerate(variables):
        tag = v._tag
        if tag is not None:
            value = tag.__dict__.get("test_value", _NO_VALUE)
            if value is not _NO_VALUE:
                pairs += (k, first.setdefault(id(value), k))
    return pairs, first


def _add_leaf(v, index, variables, blobs, ints, names):
    if not isinstance(v, Constant) or not _tag_ok(v):
        raise _Ineligible  # a missing input: the normal path says which
    if not _class_ok(type(v)):
        raise _Ineligible
    index[v] = len(variables)
    variables.append(v)
    data = v.data
    if isinstance(data, np.ndarray):
        if data.dtype.hasobject:
            raise _Ineligible
        blob = b"%s|%s|%s" % (data.dtype.str.encode(), repr(data.shape).encode(), data.tobytes())
    else:
        try:
            blob = pickle.dumps(data, protocol=5)
        except Exception:
            raise _Ineligible from None
    t = v.type
    hit = _keys.get(id(t))
    if hit is None or hit[0] is not t:
        hit = _type_entry(t)
    ints.append(-(2**41) - len(blobs))  # a constant: its own blobs follow
    blobs += [hit[1], blob]
    names.append(f"{type(v).__name__}|{v.name}")
    return index[v]


class Entry:
    """The cache's slot for one graph: ``load()`` its optimized graph, or ``store(fgraph)``
    the one the normal path made."""

    def __init__(self, digest: bytes, inputs, outputs, user_variables, used_inputs=None):
        self.digest = digest
        self.inputs = inputs
        self.outputs = outputs
        self.user_variables = user_variables
        # Per input: whether the outputs or the updates need it (the key's walk saw it).
        self.used_inputs = used_inputs
        self.path = os.path.join(cache_dir(), digest.hex())
        self.unloadable = False  # its entry says the graph does not load back

    # -- load

    def load(self):
        """The optimized FunctionGraph (with the normal path's features), or None."""
        t0 = time.process_time()
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read()
        except OSError:
            _stats["misses"] += 1
            return None
        try:
            data = self._payload(raw)
        except Exception as e:  # a damaged entry: say which, drop it, compile
            self._drop(f"is damaged or unreadable ({e}); it was removed")
            return None
        if data is None:  # a graph whose entry did not load back: compiled, not cached
            self.unloadable = True
            _stats["ineligible"] += 1
            return None
        try:
            fgraph = self._rebuild(data)
        except Exception as e:  # an op or a type that does not load back
            self._drop(f"does not load back ({type(e).__name__}: {e}); the graph is not cached")
            self.unloadable = True
            self._write(pickle.dumps(None, protocol=5))
            return None
        _stats["hits"] += 1
        try:
            os.utime(self.path)  # the oldest entries are evicted first
        except OSError:
            pass
        _stats["load_seconds"] += time.process_time() - t0
        return fgraph

    def _drop(self, what):
        _stats["damaged"] += 1
        warnings.warn(
            f"function cache: the entry {self.path} {what}, and the graph is compiled " "again",
            stacklevel=5,
        )
        try:
            os.remove(self.path)
        except OSError:
            pass

    def _payload(self, raw: bytes):
        if len(raw) < _HEADER or raw[: len(_MAGIC)] != _MAGIC:
            raise ValueError("not a function cache entry")
        digest = raw[len(_MAGIC) : len(_MAGIC) + _DIGEST]
        check = raw[len(_MAGIC) + _DIGEST : _HEADER]
        payload = raw[_HEADER:]
        if digest != self.digest:
            raise ValueError("the entry's key is not its file's")
        if hashlib.blake2b(payload, digest_size=_CHECK).digest() != check:
            raise ValueError("checksum mismatch")
        return pickle.loads(payload)

    def _rebuild(self, data):
        (fmt, user_op_refs, new_blob, type_blobs, consts, stacks, notes, nodes, outs) = data[:9]
        update_mapping, feats = data[9:]
        if fmt != _FORMAT:
            raise ValueError(f"format {fmt}, expected {_FORMAT}")
        objects = _objects
        if len(objects) > _MEMO_LIMIT:
            objects.clear()

        def obj(key, blob):
            # The object of this process with that key (the user's op), else the pickle's.
            o = objects.get(key)
            if o is None:
                o = objects[key] = pickle.loads(blob)
            return o

        user = self.user_variables
        ops = [user[k].owner.op for k in user_op_refs]
        new_ops = _op_lists.get(new_blob)
        if new_ops is None:
            new_ops = pickle.loads(new_blob)
            _remember_ops(new_blob, new_ops)
        ops += reversed(new_ops)  # op -1 - k is new_ops[k]: ops[-1 - k]
        types = [(obj(k, b), cls) for k, b, cls in type_blobs]
        stacks = [_user_stack(user, s) if type(s) is tuple else s for s in stacks]
        variables = []
        for spec in self.inputs:
            cpy = spec.variable.clone()
            cpy.owner = None
            cpy.index = None
            variables.append(cpy)
        for cls, t, value, name, trace, test_value in consts:
            c = cls(types[t][0], value, name)
            if trace is not None:
                c._trace = [stacks[s] for s in trace if stacks[s] is not None]
            if test_value is not None:
                _give_test_value(c, user, test_value)
            variables.append(c)
        noted = []
        traces: dict = {}  # one list per distinct trace, shared as a clone shares it

        def trace_list(trace):
            tr = traces.get(trace)
            if tr is None:
                tr = traces[trace] = [stacks[s] for s in trace if stacks[s] is not None]
            return tr

        # The nodes and their outputs set up as their constructors would, without the
        # constructors' checks, which the graph passed when it was made: a third of
        # the building. (Observers of variables' construction get the constructors.)
        direct = not Variable.construction_observers
        new = object.__new__
        count = Variable.__count__
        order = []
        for op_i, in_refs, out_defs, note in nodes:
            inputs = [variables[i] for i in in_refs]
            outputs = []
            if direct:
                node = new(Apply)
                node.op = ops[op_i]
                node._tag = None
                node._imported_by = node._removed_by = None
                node.inputs = inputs
                for j, (t, name, trace, test_value) in enumerate(out_defs):
                    vtype, cls = types[t]
                    o = new(cls)
                    o._tag = None
                    o._trace = None if trace is None else trace_list(trace)
                    o.type = vtype
                    o.owner = node
                    o.index = j
                    o.name = name
                    o.creation_index = next(count)
                    if test_value is not None:
                        _give_test_value(o, user, test_value)
                    outputs.append(o)
                node.outputs = outputs
            else:
                for t, name, trace, test_value in out_defs:
                    vtype, cls = types[t]
                    o = cls(vtype, None, None, name)
                    if trace is not None:
                        o._trace = trace_list(trace)
                    if test_value is not None:
                        _give_test_value(o, user, test_value)
                    outputs.append(o)
                node = Apply(ops[op_i], inputs, outputs)
            order.append(node)
            noted.append(note)
            variables.extend(outputs)
        n_in = len(self.inputs)
        features = [ReplaceValidate()]  # first, as every FunctionGraph has it
        for name, arg in feats:
            if name == "Supervisor":
                features.append(Supervisor([variables[i] for i in arg]))
            elif name == "DestroyHandler":
                features.append(DestroyHandler(algo=arg))
            elif name == "MergeFeature":
                # Indexed if the graph is ever merged again (the rewrites left it
                # merged, and the engines do not read the index).
                features.append(MergeFeature(deferred=True))
            else:
                features.append(_PLAIN_FEATURES[name]())
        # The features are attached before the nodes are imported: each sees every node
        # once, as it is imported, instead of walking the whole graph when attached.
        # The entry's order is the import's own walk's (see _serialize): not walked again.
        fgraph = FunctionGraph(
            variables[:n_in],
            [variables[i] for i in outs],
            features=features,
            clone=False,
            update_mapping=update_mapping,
            _import_order=order,
        )
        for node, note in zip(order, noted):  # the notes of the rewrites, not the import's
            imported = None if note is None else list(notes[note])
            tag = node._tag
            if tag is None:
                node._imported_by = imported
            elif imported is None:
                tag.__dict__.pop("imported_by", None)
            else:
                tag.imported_by = imported
        return fgraph

    # -- store

    def store(self, fgraph):
        """Write ``fgraph`` (optimized, after insert_deepcopy) to the cache, unless it holds
        something the format cannot rebuild faithfully."""
        if self.unloadable:
            return False
        t0 = time.process_time()
        try:
            payload = self._serialize(fgraph)
        except _Ineligible:
            _stats["ineligible"] += 1
            return False
        finally:
            _stats["store_seconds"] += time.process_time() - t0
        if not self._write(payload):
            return False
        _stats["stores"] += 1
        evict_if_due(os.path.dirname(self.path), MAX_ENTRIES, MAX_BYTES, _EVICT_EVERY)
        return True

    def _write(self, payload: bytes) -> bool:
        """Write the entry atomically (a temporary file, then renamed)."""
        check = hashlib.blake2b(payload, digest_size=_CHECK).digest()
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=TMP_PREFIX)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(_MAGIC + self.digest + check + payload)
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.remove(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            return False  # a read-only or full disk: the function is compiled all the same
        return True

    def _serialize(self, fgraph) -> bytes:
        # The order FunctionGraph's import walks the graph in (a post-order from the
        # outputs; the inputs are ownerless): the load hands it over, not walked again.
        # The loaded graph's toposort() then gives the order the normal path's does.
        order = io_toposort(fgraph.inputs, fgraph.outputs)
        index = {v: k for k, v in enumerate(fgraph.inputs)}
        op_ids: dict = {}
        user_op_refs: list = []
        type_ids: dict = {}
        type_blobs: list = []
        consts: list = []
        # The user's stacks (tag.trace), found again in the user's graph on a load.
        stack_ids: dict = {}
        stacks: list = []
        for k, v in enumerate(self.user_variables):
            trace = _trace_of(v)
            if trace:
                for j, s in enumerate(trace):
                    stack_ids.setdefault(id(s), (k, j))
        stack_index: dict = {}
        _, value_sources = _test_value_sources(self.user_variables)

        def test_value_ref(v):
            # The user's variable whose test value ``v``'s tag holds (a copy of its tag).
            tag = v._tag
            if tag is None:
                return None
            value = tag.__dict__.get("test_value", _NO_VALUE)
            if value is _NO_VALUE:
                return None
            k = value_sources.get(id(value))
            if k is None:  # a value none of the user's variables holds: not rebuilt
                raise _Ineligible
            return k

        note_index: dict = {}
        notes: list = []
        nodes: list = []

        def type_id(v):
            key = (id(v.type), type(v))
            t = type_ids.get(key)
            if t is None:
                if not _ours(type(v.type)):
                    raise _Ineligible
                t = type_ids[key] = len(type_blobs)
                type_blobs.append((_key_of(v.type), _real_pickle(v.type), type(v)))
            return t

        def trace_refs(v):
            trace = _trace_of(v)
            if not trace:
                return None
            refs = []
            for s in trace:
                r = stack_index.get(id(s))
                if r is None:
                    r = stack_index[id(s)] = len(stacks)
                    stacks.append(stack_ids.get(id(s), s))
                refs.append(r)
            return tuple(refs)

        # Numbering: the inputs, then the constants, then the nodes' outputs in order.
        for node in order:
            for i in node.inputs:
                if i not in index and i.owner is None:
                    _add_constant(i, index, consts, type_id, trace_refs, test_value_ref)
        for v in fgraph.outputs:
            if v not in index and v.owner is None:
                _add_constant(v, index, consts, type_id, trace_refs, test_value_ref)
        k = len(index)
        for node in order:
            for out in node.outputs:
                index[out] = k
                k += 1
        # An op of the user's graph is found again as the op of the node that makes the
        # user's variable at the same place of the key's walk (equal keys: the same walk),
        # the very object the graph being compiled holds, not an equal one of another
        # graph (an op may hold more than its props compare, as PdbBreakpoint's view_map);
        # the ops the rewrites made are pickled together, in one go both ways. (Not the
        # owners of the inputs: the walk stops at the inputs, the key does not hold them.)
        user = self.user_variables
        user_ops: dict = {}
        for k in range(len(self.inputs), len(user)):
            owner = user[k].owner
            if owner is not None:
                user_ops.setdefault(id(owner.op), k)
        new_ops: list = []
        for node in order:
            op = node.op
            o = op_ids.get(id(op))
            if o is None:
                if not _ours(type(op)):
                    raise _Ineligible
                if id(op) in user_ops:
                    o = len(user_op_refs)
                    user_op_refs.append(user_ops[id(op)])
                else:
                    o = -1 - len(new_ops)
                    new_ops.append(op)
                op_ids[id(op)] = o
            in_refs = tuple(index[i] for i in node.inputs)
            tag = node._tag
            if tag is not None:
                if not _NODE_TAG_KEYS.issuperset(vars(tag)) or getattr(tag, "removed_by", None):
                    raise _Ineligible
                imported = getattr(tag, "imported_by", None)
            else:
                if node._removed_by:
                    raise _Ineligible
                imported = node._imported_by
            note = None
            if imported:
                key = tuple(imported)
                note = note_index.get(key)
                if note is None:
                    note = note_index[key] = len(notes)
                    notes.append(key)
            outs = []
            for out in node.outputs:
                if type(out) not in _OUTPUT_CLASSES or not _tag_ok(out):
                    raise _Ineligible
                outs.append((type_id(out), out.name, trace_refs(out), test_value_ref(out)))
            nodes.append((o, in_refs, outs, note))
        outs = [index[v] for v in fgraph.outputs]
        feats = []
        for f in fgraph._features:
            name = type(f).__name__
            if type(f) is ReplaceValidate:
                continue
            if type(f) is Supervisor:
                pos = {v: k for k, v in enumerate(fgraph.inputs)}
                if any(p not in pos for p in f.protected):
                    raise _Ineligible
                feats.append((name, [pos[p] for p in f.protected]))
            elif type(f) is DestroyHandler:
                feats.append((name, f.algo))
            elif _PLAIN_FEATURES.get(name) is type(f):
                feats.append((name, None))
            else:
                raise _Ineligible
        new_blob = _real_pickle(new_ops)
        # (Whether they load back is seen when they are loaded: an entry that does not is
        # replaced by a mark that the graph is not cached.)
        _remember_ops(new_blob, new_ops)
        data = (
            _FORMAT,
            user_op_refs,
            new_blob,
            type_blobs,
            consts,
            stacks,
            notes,
            nodes,
            outs,
            fgraph.update_mapping,
            feats,
        )
        return _real_pickle(data)


def _add_constant(v, index, consts, type_id, trace_refs, test_value_ref):
    if type(v) not in _CONSTANT_CLASSES or not _tag_ok(v):
        raise _Ineligible  # (a graph input the specs do not list is refused earlier)
    index[v] = len(index)
    consts.append((type(v), type_id(v), v.data, v.name, trace_refs(v), test_value_ref(v)))


def _give_test_value(v, user, k):
    """Give the loaded ``v`` the test value the user's variable ``k`` holds now, as it is
    (a copied tag does not filter it again)."""
    tag = user[k]._tag
    value = _NO_VALUE if tag is None else tag.__dict__.get("test_value", _NO_VALUE)
    if value is not _NO_VALUE:
        object.__setattr__(v.tag, "test_value", value)


class _Pickler(pickle.Pickler):
    """numpy's builtin dtypes pickled by name, so that they load as numpy's own objects
    (a plain pickle loads an equal copy): code that tells dtypes apart by identity (the
    engines' names of generated globals) sees a loaded graph as the rewritten one.
    Composites (the fused kernels, most of a loaded graph's bytes) by their tables, and
    each distinct one once: fusion makes an op per kernel, many of them equal (the same
    scalar graph, constants and dtypes, and the same name), which load as one op, as
    the engines, which compile one kernel for equal ones, see them anyway."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._composites: dict = {}  # (composite, name) -> the first equal one pickled

    def reducer_override(self, obj):
        if type(obj) is Composite:  # the fused kernels: by tables, not their graph's objects
            tables = obj._tables()
            if tables is None:
                return NotImplemented
            _, (_, nodes, _, notes, _, _) = tables
            if not notes and not any(n[3] or n[4] for n in nodes):  # no names, no notes
                first = self._composites.setdefault((obj, obj.name), obj)
                if first is not obj:
                    return _same, (first,)  # (pickled already: a reference to it)
            return tables
        if isinstance(obj, np.dtype) and obj.isbuiltin == 1:
            return np.dtype, (obj.str,)
        return NotImplemented


def _same(obj):
    return obj


def _real_pickle(obj) -> bytes:
    buf = io.BytesIO()
    try:
        _Pickler(buf, protocol=5).dump(obj)
    except Exception:
        raise _Ineligible from None
    return buf.getvalue()


def _remember_ops(blob, ops):
    # The ops that rewrites made, under their pickle: shared by later loads.
    if len(_op_lists) >= _OP_LISTS_LIMIT:
        _op_lists.clear()
    _op_lists[blob] = ops


_PLAIN_FEATURES = {
    "PreserveVariableAttributes": PreserveVariableAttributes,
    "ChangeLog": ChangeLog,
    "MergeFeature": MergeFeature,
    "OpPresence": OpPresence,
}


def _user_stack(user, where):
    """Stack ``where[1]`` of the user's variable ``where[0]`` (None if it has none now)."""
    trace = _trace_of(user[where[0]])
    return trace[where[1]] if trace and len(trace) > where[1] else None


def _trace_of(v):
    tag = v._tag
    if tag is None:
        return v._trace
    return getattr(tag, "trace", None)


def entry_for(inputs, outputs, mode, accept_inplace, profile):
    """The cache's Entry for compiling ``inputs`` (In specs, the implicit shared ones
    included) to ``outputs`` (Out specs) with ``mode``, or None when the graph is not to
    be cached (the flag ``function_cache`` off, profiling, rewrites that compute test
    values or warn of float64 variables, a mode, linker, optimizer, op or type the cache
    cannot vouch for)."""
    if not config.function_cache or profile:
        return None
    t0 = time.process_time()
    try:
        return _entry_for(inputs, outputs, mode, accept_inplace)
    finally:
        _stats["key_seconds"] += time.process_time() - t0


def _entry_for(inputs, outputs, mode, accept_inplace):
    # Test values on the user's graph (compute_test_value) change nothing in between:
    # the rewrites and the copies of the outputs run under compute_test_value_opt. When
    # that is on, they compute test values (which may fail), and warn_float64 warns of
    # the variables they make: a load, which skips them, would not.
    if config.compute_test_value_opt != "off" or config.warn_float64 != "ignore":
        return None
    try:
        mode_key = _mode_key(mode)
        if mode_key is None:
            raise _Ineligible
        data, variables, used = _walk(inputs, outputs, accept_inplace)
    except _Ineligible:
        _stats["ineligible"] += 1
        return None
    except Exception as e:  # a graph the key cannot describe: compiled as always
        _stats["ineligible"] += 1
        if not _key_failures:
            warnings.warn(
                f"function cache: a graph's key could not be made ({type(e).__name__}: "
                f"{e}); such graphs are compiled without the cache",
                stacklevel=4,
            )
        _key_failures.append(type(e).__name__)
        return None
    return Entry(_digest(mode_key.encode(), data), inputs, outputs, variables, used)


def _digest(head: bytes, parts) -> bytes:
    """The key's digest: each part preceded by its length, so that no two lists of parts
    (a constant's raw bytes among them) make the same stream."""
    h = hashlib.blake2b(digest_size=_DIGEST)
    for part in (head, *parts):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()
