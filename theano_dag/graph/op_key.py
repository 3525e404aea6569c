"""A faithful description of an op (or a type) as text, for the caches that outlive a
process: the cache of optimized graphs and the CPU engine's kernel index key their
entries by it, so two ops with one description must compute the same thing.

What makes a description faithful is written here once:

- An object whose class has ``__props__`` is its class and its props, but only when its
  equality is the one ``__props__`` made (two ops of equal props are then the same op,
  as merge takes them); a class that compares more or less than its props is refused.
- Any other object of a class written in Python is its class and its whole state (its
  ``__dict__`` and slots, by attribute name).
- Classes and functions are their module and name, only where that name finds that very
  object (not a lambda, a closure or a class made in a function) and only in code whose
  version the caches' keys hold (:data:`TRUSTED_PACKAGES`: theano_dag's files, numpy's
  and Python's versions); a user's function could change behind the same name.
- Numbers, strings, bytes, containers, numpy dtypes, arrays and scalars are their type
  and value (an array's dtype, shape and bytes); graph pieces (variables, nodes, graphs)
  are refused: an op holding a graph would need the graph walked.

A description holds no address, hash order or other per-process detail (sets are sorted),
so equal ops made in two processes have one description. Each piece ends where its form
says (a repr, a bracket), so two different values never give one text. Descriptions are
remembered per object (ops and types are shared, immutable instances).

>>> import theano_dag.scalar as ts
>>> describe(ts.switch)
'theano_dag.scalar.arith:Switch(theano_dag.scalar.basic:transfer_type{positions=tuple(int:1,int:2)})'
>>> op_key(type(ts.angle)(lambda *dtypes: ("float64",))) is None  # not found by its name
True
"""

from __future__ import annotations

import enum
import sys
import types

import numpy as np

from theano_dag.graph.basic import Node
from theano_dag.graph.utils import _slot_names

__all__ = ["NotDescribable", "describe", "op_key", "TRUSTED_PACKAGES"]

# Top-level packages whose classes and functions are named by their names: theano_dag's
# files are in the caches' code version, numpy's version and Python's too.
TRUSTED_PACKAGES = ("theano_dag", "numpy", "builtins", "math", "operator", "_operator")

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type())
_PROPS_EQ = "MetaType.__new__.<locals>.<lambda>"  # the __eq__ that __props__ makes

# (id(obj), with name[, trusted where not the default]) -> (obj, text or None, why not):
# the object is held so that its id is not reused while the entry is here.
_memo: dict = {}
MAX_MEMO = 20_000
_props_memo: dict = {}  # class -> its __props__ if its equality is theirs, else a reason


class NotDescribable(Exception):
    """``describe`` cannot vouch for a description of the object; the message says why."""


def op_key(obj, *, name: bool = False, trusted=TRUSTED_PACKAGES) -> str | None:
    """:func:`describe` ``obj``, or None where it cannot vouch for a description.

    >>> import theano_dag.scalar as ts
    >>> op_key(ts.exp)
    'theano_dag.scalar.math:Exp(ref(theano_dag.scalar.basic:upgrade_to_float))'
    >>> op_key(ts.exp, trusted=("numpy",)) is None  # theano_dag's code not held
    True
    """
    try:
        return describe(obj, name=name, trusted=trusted)
    except NotDescribable:
        return None


def describe(obj, *, name: bool = False, trusted=TRUSTED_PACKAGES) -> str:
    """The faithful description of ``obj`` (see the module's docstring), or
    NotDescribable. ``name``: whether a props object's ``name`` attribute is part of it
    (equal ops of other names compare equal; a cache that keeps names needs it).
    ``trusted``: the top-level packages whose classes and functions go by name.

    >>> import numpy as np
    >>> describe((1, 1.0, "a", np.dtype("float32")))
    "tuple(int:1,float:1.0,str:'a',dtype:<f4)"
    >>> describe(lambda x: x)
    Traceback (most recent call last):
    ...
    theano_dag.graph.op_key.NotDescribable: <lambda> is not found by its name ...
    """
    hit = _memo.get((id(obj), name) if trusted is TRUSTED_PACKAGES else None)
    if hit is not None and hit[0] is obj:  # (the caches ask for the same ops again)
        if hit[1] is None:
            raise NotDescribable(hit[2])
        return hit[1]
    return _Describer(name, trusted).text(obj)


class _Describer:
    __slots__ = ("name", "trusted", "active")

    def __init__(self, name, trusted):
        self.name = name
        self.trusted = trusted if trusted is TRUSTED_PACKAGES else tuple(trusted)
        self.active: set = set()  # ids of the objects being described (a cycle: refused)

    def text(self, x) -> str:
        t = type(x)
        if t is str or t is int or t is float or t is bool or t is bytes or t is complex:
            return f"{t.__name__}:{x!r}"
        if x is None:
            return "None"
        if x is _UNSET:
            return "unset"
        if t is tuple or t is list:
            return f"{t.__name__}({','.join([self.text(i) for i in x])})"
        # Sorted: equal dicts and sets have one text whatever order they were made in
        # (equal props: the same op), and a set's order is its hashes', per process.
        if t is dict:
            items = sorted([f"{self.text(k)}:{self.text(v)}" for k, v in x.items()])
            return f"dict({','.join(items)})"
        if t is frozenset or t is set:
            return f"{t.__name__}({','.join(sorted([self.text(i) for i in x]))})"
        if t is slice:
            return f"slice({self.text(x.start)},{self.text(x.stop)},{self.text(x.step)})"
        if isinstance(x, np.dtype):
            return f"dtype:{_dtype_str(x)}"
        if t is np.ndarray:
            return f"ndarray({_dtype_str(x.dtype)},{x.shape!r},{x.tobytes()!r})"
        if isinstance(x, np.generic):
            return f"npscalar({_dtype_str(x.dtype)},{x.tobytes()!r})"
        if isinstance(x, (type, types.FunctionType, types.BuiltinFunctionType)):
            return f"ref({self.ref(x)})"
        if t is np.ufunc:
            # numpy's own by name; one made by frompyfunc is named for its function.
            if getattr(np, x.__name__, None) is not x:
                raise NotDescribable(f"the ufunc {x.__name__} is not numpy's")
            return f"ufunc({x.__name__})"
        if isinstance(x, enum.Enum):
            return f"enum({self.ref(t)}.{x.name})"
        if isinstance(x, Node):
            raise NotDescribable(f"a graph's piece among the props ({t.__name__})")
        return self.object(x)

    def ref(self, x) -> str:
        """``module:qualname`` of a class or function that its name finds in a trusted
        package."""
        module = getattr(x, "__module__", None) or ""
        qualname = getattr(x, "__qualname__", None) or getattr(x, "__name__", "?")
        if module.split(".")[0] not in self.trusted:
            raise NotDescribable(
                f"{qualname} is from {module or 'an unknown module'}, whose code the "
                "keys do not hold"
            )
        found = sys.modules.get(module)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if found is not x:
            raise NotDescribable(
                f"{qualname} is not found by its name in {module} (a lambda, a closure or "
                "a class made in a function)"
            )
        return f"{module}:{qualname}"

    def object(self, x) -> str:
        key = (id(x), self.name)
        if self.trusted is not TRUSTED_PACKAGES:
            key += (self.trusted,)
        hit = _memo.get(key)
        if hit is not None and hit[0] is x:
            if hit[1] is None:
                raise NotDescribable(hit[2])
            return hit[1]
        if id(x) in self.active:
            raise NotDescribable(f"a {type(x).__name__} that holds itself")
        self.active.add(id(x))
        try:
            text = self._object(x)
        except NotDescribable as e:
            _remember(key, x, None, str(e))
            raise
        finally:
            self.active.discard(id(x))
        _remember(key, x, text, None)
        return text

    def _object(self, x) -> str:
        cls = type(x)
        where = self.ref(cls)
        props = _props_memo.get(cls)
        if props is None:
            props = _props_memo[cls] = _props_of(cls)
        if type(props) is str:
            raise NotDescribable(props)
        if props is not False:
            parts = [self.text(getattr(x, p)) for p in props]
            if self.name:
                parts.append(f"name={self.text(getattr(x, 'name', None))}")
            return f"{where}({';'.join(parts)})"
        # Not a props object: its whole state, which its class written in Python keeps
        # in its __dict__ and slots (a class written in C keeps state neither shows).
        if any(c is not object and not c.__flags__ & _HEAPTYPE for c in cls.__mro__):
            raise NotDescribable(f"{cls.__qualname__} keeps state that is not its attributes")
        state = dict(getattr(x, "__dict__", None) or {})
        for s in _slot_names(cls):
            state[s] = getattr(x, s, _UNSET)
        items = [f"{k}={self.text(state[k])}" for k in sorted(state)]
        return f"{where}{{{';'.join(items)}}}"


class _Unset:
    """An empty slot's value in a state."""


_UNSET = _Unset()


def _remember(key, x, text, why):
    if len(_memo) >= MAX_MEMO:
        _memo.clear()
    _memo[key] = (x, text, why)


def _dtype_str(d) -> str:
    # A structured dtype's str ("|V16") does not say its fields.
    if d.fields is not None or d.subdtype is not None or d.hasobject:
        raise NotDescribable(f"the dtype {d} (structured or of objects)")
    return d.str


def _props_of(cls):
    """``cls.__props__`` when its equality is the one the metaclass made from them (not
    overridden), a reason when it is not, False when ``cls`` has no props."""
    for c in cls.__mro__:
        if "__props__" in c.__dict__:
            eq = c.__dict__.get("__eq__")
            if eq is None or cls.__eq__ is not eq or eq.__qualname__ != _PROPS_EQ:
                return f"{cls.__qualname__}'s equality is not its props' (__eq__ overridden)"
            return c.__dict__["__props__"]
    return False
