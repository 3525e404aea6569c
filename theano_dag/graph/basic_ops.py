"""BasicOps: the set of ops an engine can run, declared by the engine.

One class serves every kind of graph: an engine's set of ``Op`` classes (the OpenCL
engine's kernels, a live view of its registry) and an OpGraph engine's set of
operations (:mod:`theano_dag.formats.opgraph`). A member is an op class, which admits
every instance of it or of a subclass, or an op instance, which admits only its equals.
"""

from __future__ import annotations

from collections.abc import Set

__all__ = ["BasicOps"]


class BasicOps(Set):
    """The ops an engine can run: op classes (any parameters) or op instances (exactly
    those parameters).

    ``kind`` is the base class members must derive from (or be instances of);
    ``source``, when given instead of ``ops``, is a live collection of op classes (a
    registry keyed by class, say) read on every use, so ops registered later count.

    >>> class Add: pass
    >>> class Pow:
    ...     def __init__(self, e): self.e = e
    ...     def __eq__(self, other): return type(other) is Pow and other.e == self.e
    ...     def __hash__(self): return hash(self.e)
    ...     def __repr__(self): return f"Pow({self.e})"
    >>> cpu = BasicOps([Add, Pow(2)], name="cpu")
    >>> Add() in cpu, Add in cpu, Pow(2) in cpu, Pow(3) in cpu, Pow in cpu
    (True, True, True, False, False)
    >>> registry = {}
    >>> live = BasicOps(source=registry, name="device")
    >>> registry[Add] = "a kernel factory"
    >>> Add in live, len(live)
    (True, 1)
    """

    kind: type = object

    def __init__(self, ops=(), name=None, source=None):
        if source is not None:
            if ops:
                raise TypeError("BasicOps takes ops or a live source, not both")
            self._source = source
        else:
            items = list(ops)
            for op in items:
                self._check(op)
            self._source = frozenset(items)
        self.name = name

    def _check(self, op):
        kind = self.kind
        if not (isinstance(op, kind) or isinstance(op, type) and issubclass(op, kind)):
            raise TypeError(f"BasicOps holds operations or operation classes, got {op!r}")

    @classmethod
    def _from_iterable(cls, it):
        return cls(it)

    def __contains__(self, op):
        items = self._source
        if isinstance(op, type):
            return any(c in items for c in op.__mro__)
        if op in items:
            return True
        return any(c in items for c in type(op).__mro__)

    def __iter__(self):
        return iter(sorted(self._source, key=self.label))

    def __len__(self):
        return len(self._source)

    @staticmethod
    def label(op):
        """How ``op`` is named in messages: a class by its name, an instance by its
        ``label()`` when it has one, else its repr."""
        if isinstance(op, type):
            return op.__name__
        label = getattr(op, "label", None)
        return label() if callable(label) else repr(op)

    def __repr__(self):
        name = f", name={self.name!r}" if self.name else ""
        return f"{type(self).__name__}({[self.label(op) for op in self]}{name})"
