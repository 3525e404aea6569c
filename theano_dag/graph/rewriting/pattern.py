"""``PatternSub``: a rewrite written as data, ``(op, sub_pattern, ...) -> out_pattern``.

Input patterns::

    input_pattern ::= (op, sub_pattern, ...)
                   |  {'pattern': input_pattern, 'constraint': fn,
                       'allow_multiple_clients': bool}
    sub_pattern   ::= input_pattern | 'name' | a Constant | an int or float

A string is a pattern variable: it matches any Variable, and every occurrence of the
same string must match the *same* Variable. A number matches a Constant holding that
value; a Constant matches an equal Constant. ``constraint(expr)`` (or
``constraint(fgraph, expr)``) is an extra test on the Variable matched there; one
marked ``side_effect_free = True`` may be asked before the rest of the match (a first
look at each node the pattern is tried on), and then again by the match.

Output patterns use the same syntax without dicts; strings are replaced by what they
matched and ``(op, ...)`` calls ``op(...)``. A sub-pattern (not the root) only matches a
Variable that has a single client, unless ``allow_multiple_clients`` is set, so that the
rewrite removes the nodes it matched instead of duplicating work.

Two options make a pattern cover what a hand-written rule would:

- ``fit(old, new, shape_sources)`` (PyTensor's ``allow_cast``, made general): every
  replacement passes through ``fit``, which returns it made to fit the replaced
  variable (cast, broadcast over ``shape_sources``, the variables the pattern matched)
  or None, and the rewrite declines (also where the types agree: a replacement may
  drop what the replaced variable checked; a ``fit`` with ``fit.uses_fgraph = True`` is
  also given ``fgraph=`` to judge that). A number in the output pattern is handed
  to ``fit`` as it is, to become a constant of the replaced variable's type.
- ``commutative=True``: a binary root also matches with its two arguments swapped
  (``x + 0`` and ``0 + x`` are one rule).
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from theano_dag.graph.basic import Constant, Variable
from theano_dag.graph.op import Op
from theano_dag.graph.rewriting.local import LocalOptimizer, _n_positional

__all__ = ["PatternSub"]

# The arity of a constraint, looked up once per function (inspect.signature is slow, and
# a pattern's constraints are asked about on every node the pattern is tried on).
_constraint_arity = functools.lru_cache(maxsize=1024)(_n_positional)


def _check_pattern(pattern, where, names, is_input, top=False):
    """Validate a pattern at construction time; collect its variable names."""
    if isinstance(pattern, (list, tuple)):
        if not pattern:
            raise TypeError(f"PatternSub: empty tuple in the {where} pattern")
        head = pattern[0]
        if is_input and not isinstance(head, Op):
            # A node's op is compared with the head: anything but an Op never matches.
            raise TypeError(
                f"PatternSub: an input (sub)pattern must start with an Op instance, got "
                f"{head!r}; a function that builds nodes can only be used in the output pattern"
            )
        if not callable(head):
            raise TypeError(
                f"PatternSub: a {where} (sub)pattern must start with an Op, got {head!r}"
            )
        for p in pattern[1:]:
            _check_pattern(p, where, names, is_input)
    elif isinstance(pattern, dict):
        if not is_input:
            raise TypeError("PatternSub: the output pattern cannot contain a dict")
        if "pattern" not in pattern:
            raise TypeError(f"PatternSub: malformed pattern {pattern!r} (expected key 'pattern')")
        unknown = set(pattern) - {"pattern", "constraint", "allow_multiple_clients"}
        if unknown:
            raise TypeError(
                f"PatternSub: unknown keys {sorted(unknown)} in pattern {pattern!r}; expected "
                "'pattern', 'constraint', 'allow_multiple_clients'"
            )
        if top and not isinstance(pattern["pattern"], (list, tuple)):
            raise TypeError("PatternSub: the input pattern must start with an Op")
        _check_pattern(pattern["pattern"], where, names, is_input, top)
    elif isinstance(pattern, str):
        if top and is_input:
            raise TypeError("PatternSub: the input pattern must start with an Op, not a string")
        names.add(pattern)
    elif isinstance(pattern, (bool, np.bool_)):
        raise TypeError(f"PatternSub: {pattern!r} is not a valid pattern element")
    elif isinstance(pattern, (int, float, np.integer, np.floating, Variable)):
        if top and is_input:
            raise TypeError("PatternSub: the input pattern must start with an Op")
    else:
        raise TypeError(
            f"PatternSub: {pattern!r} in the {where} pattern is not a tuple, dict, string, "
            "number or Constant"
        )


def _swap_root(pattern):
    if isinstance(pattern, dict):
        return {**pattern, "pattern": _swap_root(pattern["pattern"])}
    if len(pattern) != 3:
        raise TypeError(
            f"PatternSub: commutative=True needs a root pattern with two arguments, got "
            f"{len(pattern) - 1} in {pattern!r}"
        )
    return (pattern[0], pattern[2], pattern[1])


# What an argument of the root pattern needs of the node's input at its position, for
# the node to possibly match: anything, a Constant, or a computed variable (one with an
# owner); or, for a name under a constraint (``{"pattern": "x", "constraint": f}``)
# marked ``f.side_effect_free = True``, the constraint itself, asked first (then again
# by the match: a constraint without the mark is asked once, by the match only).
_ANY, _CONSTANT, _COMPUTED = 0, 1, 2


def _argument_needs(pattern):
    """Per argument of the root ``pattern``, what it needs of the input at its position
    (``_ANY``, ``_CONSTANT``, ``_COMPUTED``, or ``(constraint, its arity)`` for a
    constrained name); None when no argument needs anything.

    A constant or a number matches only a Constant, a sub-pattern ``(op, ...)`` only a
    variable an ``op`` node computes; a constraint on a sub-pattern only narrows it, and
    one on a name is asked first when it says it may be (``side_effect_free``).

    >>> from theano_dag.graph.type import Generic
    >>> one = Constant(Generic(), 1)
    >>> _argument_needs(("add", "x", one)), _argument_needs(("neg", ("neg", "x")))
    ((0, 1), (2,))
    >>> _argument_needs(("add", "x", "y")) is None
    True
    """
    if isinstance(pattern, dict):
        pattern = pattern["pattern"]
    needs = []
    for p in pattern[1:]:
        constraint = None
        if isinstance(p, dict):
            constraint = p.get("constraint")
            while isinstance(p, dict):
                p = p["pattern"]
        if isinstance(p, (tuple, list)):
            needs.append(_COMPUTED)
        elif isinstance(p, str):
            if constraint is None or not getattr(constraint, "side_effect_free", False):
                needs.append(_ANY)
            else:
                needs.append((constraint, _constraint_arity(constraint)))
        else:  # a Constant, or a number (matched against a Constant's data)
            needs.append(_CONSTANT)
    needs = tuple(needs)
    return needs if any(needs) else None


def _may_match(fgraph, inputs, needs) -> bool:
    """Whether ``inputs`` (a node's) can meet ``needs`` (``_argument_needs``)."""
    if len(inputs) != len(needs):
        return False
    for v, need in zip(inputs, needs):
        if need == _ANY:
            continue
        if need == _CONSTANT:
            if not isinstance(v, Constant):
                return False
        elif need == _COMPUTED:
            if v.owner is None:
                return False
        else:
            constraint, arity = need
            try:
                ok = constraint(fgraph, v) if arity == 2 else constraint(v)
            except Exception:  # left to the match, which may fail before asking it
                continue
            if not ok:
                return False
    return True


def _constant_equals(pattern, expr) -> bool:
    try:
        return bool(pattern.equals(expr))
    except Exception:  # data whose == is elementwise: compare arrays instead
        return pattern.type == expr.type and np.array_equal(pattern.data, expr.data)


class PatternSub(LocalOptimizer):
    """Replace every match of ``in_pattern`` by ``out_pattern``.

    ``skip_identities_fn(expr)`` may return a Variable equivalent to ``expr`` to retry a
    failed match on; ``tracks``/``get_nodes`` let the rewrite be indexed under a rarer
    op (``get_nodes(fgraph, node)`` lists the nodes to try the pattern on).

    >>> from theano_dag.graph.op import Op
    >>> class Div(Op):
    ...     __props__ = ()
    >>> class Mul(Op):
    ...     __props__ = ()
    >>> div, mul = Div(), Mul()
    >>> str(PatternSub((div, (mul, "x", "y"), "y"), "x"))
    'Div(Mul(x, y), y) -> x'
    """

    def __init__(
        self,
        in_pattern,
        out_pattern,
        allow_multiple_clients=False,
        skip_identities_fn=None,
        name=None,
        pdb=False,
        tracks=(),
        get_nodes=None,
        values_eq_approx=None,
        fit=None,
        commutative=False,
    ):
        in_names: set = set()
        out_names: set = set()
        _check_pattern(in_pattern, "input", in_names, True, top=True)
        _check_pattern(out_pattern, "output", out_names, False)
        missing = out_names - in_names
        if missing:
            raise ValueError(
                f"PatternSub: the output pattern uses {sorted(missing)}, which the input "
                f"pattern does not define (it defines {sorted(in_names)})"
            )
        self.in_pattern = in_pattern
        self.out_pattern = out_pattern
        self.op = in_pattern["pattern"][0] if isinstance(in_pattern, dict) else in_pattern[0]
        self.allow_multiple_clients = allow_multiple_clients
        self.skip_identities_fn = skip_identities_fn
        # (a failed match is retried only through skip_identities_fn)
        self._retries = skip_identities_fn is not None
        self.values_eq_approx = values_eq_approx
        self.pdb = pdb
        self.fit = fit
        self.commutative = commutative
        # The root pattern with its two arguments swapped (matched against the node's
        # inputs as they are, so that the bindings come in the node's order).
        self._swapped = _swap_root(in_pattern) if commutative else None
        # What the node's inputs must be for the pattern (or its swapped form) to match,
        # checked before matching: most nodes a pattern is tried on fail it there (no
        # constant where ``x * 1`` has one), before any binding is made. Not with
        # retries: skip_identities_fn may see through an input.
        self._needs = None if self._retries else _argument_needs(in_pattern)
        self._needs_swapped = (
            _argument_needs(self._swapped) if self._needs and commutative else None
        )
        if name:
            self.__name__ = name
        if tracks != () and get_nodes is None:
            raise ValueError("PatternSub: giving tracks also requires get_nodes")
        self._tracks = tracks
        self.get_nodes = get_nodes

    def op_key(self):
        return self.op

    def tracks(self):
        if self._tracks != ():
            return self._tracks
        return [self.op]

    def transform(self, fgraph, node, get_nodes=True):
        """Return ``[replacement]`` if ``node`` matches the input pattern, else False."""
        if get_nodes and self.get_nodes is not None:
            for real_node in self.get_nodes(fgraph, node):
                if real_node == "output":
                    continue
                ret = self.transform(fgraph, real_node, get_nodes=False)
                if ret:
                    if isinstance(ret, dict):
                        return ret
                    return dict(zip(real_node.outputs, ret))
            return False
        if node.op is not self.op and node.op != self.op:
            return False
        needs = self._needs
        if needs is not None and not _may_match(fgraph, node.inputs, needs):
            swapped = self._needs_swapped
            if swapped is None or not _may_match(fgraph, node.inputs, swapped):
                return False
        if len(node.outputs) == 1:
            root = node.outputs[0]
        elif getattr(node.op, "default_output", None) is not None:
            root = node.outputs[node.op.default_output]
        else:
            return False
        u = self._match(fgraph, self.in_pattern, root, {}, True)
        if u is None and self._swapped is not None:
            u = self._match(fgraph, self._swapped, root, {}, True)
        if u is None:
            return False
        ret = self._build(self.out_pattern, u)
        if self.fit is not None:
            if getattr(self.fit, "uses_fgraph", False):
                ret = self.fit(root, ret, list(u.values()), fgraph=fgraph)
            else:
                ret = self.fit(root, ret, list(u.values()))
            if ret is None:
                return False
        elif not isinstance(ret, Variable):
            ret = root.type.filter_variable(ret)
        if self.values_eq_approx is not None:
            ret.tag.values_eq_approx = self.values_eq_approx
        if len(node.outputs) == 1:
            return [ret]
        return {root: ret}

    def _retry(self, fgraph, pattern, expr, u, allow_multiple_clients):
        equiv = self.skip_identities_fn(expr)
        if equiv is None:
            return None
        return self._match(fgraph, pattern, equiv, u, allow_multiple_clients)

    def _match(self, fgraph, pattern, expr, u, multi):
        """Return the bindings ``{name: Variable}`` extending ``u``, or None.

        ``multi``: whether ``expr`` may have several clients.
        """
        kind = type(pattern)  # type() first: this runs for every node a pattern is tried on
        if kind is tuple or kind is list:
            owner = expr.owner
            if (
                owner is None
                or (owner.op is not pattern[0] and owner.op != pattern[0])
                or len(pattern) - 1 != len(owner.inputs)
                or (not multi and len(fgraph.clients[expr]) > 1)
            ):
                return self._retry(fgraph, pattern, expr, u, multi) if self._retries else None
            for p, v in zip(pattern[1:], owner.inputs):
                u = self._match(fgraph, p, v, u, self.allow_multiple_clients)
                if u is None:
                    return None
            if self.pdb:
                import pdb

                pdb.set_trace()
            return u
        if kind is dict:
            constraint = pattern.get("constraint")
            if constraint is not None:
                ok = (
                    constraint(fgraph, expr)
                    if _constraint_arity(constraint) == 2
                    else (constraint(expr))
                )
                if not ok:
                    return self._retry(fgraph, pattern, expr, u, multi) if self._retries else None
            amc = pattern.get("allow_multiple_clients", multi)
            return self._match(fgraph, pattern["pattern"], expr, u, amc)
        if kind is str:
            bound = u.get(pattern)
            if bound is None:
                u = dict(u)
                u[pattern] = expr
                return u
            if bound is expr:
                return u
            return self._retry(fgraph, pattern, expr, u, multi) if self._retries else None
        if isinstance(pattern, Constant):
            if isinstance(expr, Constant) and _constant_equals(pattern, expr):
                return u
            return self._retry(fgraph, pattern, expr, u, multi) if self._retries else None
        # A number: matches a Constant holding that value (in every element).
        if isinstance(expr, Constant):
            try:
                if np.all(np.asarray(expr.data) == pattern):
                    return u
            except (TypeError, ValueError):
                pass
        return self._retry(fgraph, pattern, expr, u, multi) if self._retries else None

    def _build(self, pattern, u):
        if isinstance(pattern, (list, tuple)):
            return pattern[0](*[self._build(p, u) for p in pattern[1:]])
        if isinstance(pattern, str):
            return u[pattern]
        if isinstance(pattern, Constant):
            return pattern.clone()
        return pattern

    def __str__(self):
        name = getattr(self, "__name__", None)
        if name:
            return name

        def to_str(p):
            if isinstance(p, (list, tuple)):
                return f"{p[0]}({', '.join(to_str(q) for q in p[1:])})"
            if isinstance(p, dict):
                cons = p.get("constraint", "no conditions")
                cons = getattr(cons, "__name__", cons)
                return f"{to_str(p['pattern'])} subject to {cons}"
            return str(p)

        return f"{to_str(self.in_pattern)} -> {to_str(self.out_pattern)}"

    __repr__ = __str__

    def print_summary(self, stream=sys.stdout, level=0, depth=-1):
        print(f"{' ' * level}PatternSub {self} id={id(self)}", file=stream)
