"""Plural constructors: ``x, y = dscalars('x', 'y')``, ``a, b, c = fmatrices(3)``.

Theano built these with ``apply_across_args``; the rules are kept, quirks included:

* ``dscalars(3)``: a list of three unnamed variables;
* ``dscalars('x', 'y')`` or ``dscalars(['x', 'y'])``: one variable per name;
* ``dscalars('x')``: a single variable (not a list);
* ``dscalars('xy')``: one name per *character*, like Theano (``[x, y]``).

>>> x, y = dscalars("x", "y")
>>> x.type, y.name
(TensorType(float64, scalar), 'y')
>>> len(fmatrices(3)), fmatrices(3)[0].dtype
(3, 'float32')
"""

from __future__ import annotations

from theano_dag.tensor import type as _type

__all__: list = []

# Theano's plural families: the kind and its plural, times the dtype prefixes it had.
_KINDS = {
    "scalar": "scalars",
    "vector": "vectors",
    "matrix": "matrices",
    "row": "rows",
    "col": "cols",
    "tensor3": "tensor3s",
    "tensor4": "tensor4s",
    "tensor5": "tensor5s",
}
_PREFIXES = ("", "f", "d", "i", "l")


def _plural(single, plural_name):
    def many(*names):
        if names and isinstance(names[0], int) and not isinstance(names[0], bool):
            if len(names) != 1 or names[0] < 0:
                raise TypeError(f"{plural_name}: expected one non-negative count, got {names}")
            return [single() for _ in range(names[0])]
        if len(names) == 1:
            names = names[0]
        if not names:
            raise TypeError(f"{plural_name}: give a count or at least one name")
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"{plural_name}: names must be strings, got {n!r}")
        if len(names) == 1:
            return single(names[0])
        return [single(n) for n in names]

    many.__name__ = plural_name
    many.__doc__ = (
        f"Several ``{single.__name__}`` variables: ``{plural_name}(n)`` unnamed, or one per "
        f"name in ``{plural_name}('a', 'b', ...)``."
    )
    return many


for _kind, _plural_kind in _KINDS.items():
    for _p in _PREFIXES:
        _name = _p + _plural_kind
        globals()[_name] = _plural(getattr(_type, _p + _kind), _name)
        __all__.append(_name)
del _kind, _plural_kind, _p, _name
