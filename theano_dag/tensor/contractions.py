"""Tensor contractions: ``einsum``, ``tensordot``, ``batched_dot`` (``theano.tensor`` names).

One Op, ``Einsum``, does all of them: generalized Einstein summation with explicit
subscripts (``"ij,jk->ik"``), the OpGraph "multiplication" operator. Its gradient with
respect to each operand is again an ``Einsum`` with permuted subscripts, so gradients of
any order stay in the same vocabulary, and ``tensordot``/``batched_dot`` are thin
wrappers that only build subscripts.

The Op's subscripts are canonical: explicit output, no ellipsis, every letter a
single ASCII letter. One extension over numpy: an output term may repeat a letter
(``"i->ii"``), meaning "place the values on that diagonal, zeros elsewhere". It is
what the gradient of a trace-like term (``"ii->"``) needs.
"""

from __future__ import annotations

import string

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import Op
from theano_dag.scalar import holomorphic_grads, upcast
from theano_dag.tensor.basic import cast, ones_like, zeros_like
from theano_dag.tensor.math import add, dot
from theano_dag.tensor.shape import checked_shape, equal_lengths
from theano_dag.tensor.type import TensorType, continuous_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["Einsum", "einsum", "tensordot", "batched_dot", "batched_tensordot", "matmul"]

_LETTERS = string.ascii_letters


def _parse(subscripts, ndims, who="einsum"):
    """Canonical ``(input_terms, output_term)`` for ``subscripts`` over operands of
    ``ndims`` dimensions: ellipses expanded into unused letters, implicit output made
    explicit (numpy's rule: the letters used once, in alphabetical order)."""
    if not isinstance(subscripts, str):
        raise TypeError(
            f"{who}: subscripts must be a string like 'ij,jk->ik', "
            f"got {type(subscripts).__name__}"
        )
    s = subscripts.replace(" ", "")
    if s.count("->") > 1:
        raise ValueError(f"{who}: subscripts {subscripts!r} contain '->' more than once")
    lhs, arrow, rhs = s.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(
            f"{who}: subscripts {subscripts!r} name {len(terms)} operand(s), "
            f"but {len(ndims)} were given"
        )
    used = set()
    for t in terms + [rhs]:
        for c in t.replace("...", ""):
            if c not in _LETTERS:
                raise ValueError(
                    f"{who}: invalid subscript character {c!r} in "
                    f"{subscripts!r}; use ASCII letters (and '...')"
                )
            used.add(c)
    free = [c for c in _LETTERS if c not in used]
    n_ell = 0
    for t, nd in zip(terms, ndims):
        if "..." in t:
            n_ell = max(n_ell, nd - len(t.replace("...", "")))
    if n_ell > len(free):
        raise ValueError(f"{who}: too many dimensions under '...' in {subscripts!r}")
    ell = free[:n_ell]

    def expand(t, nd, k):
        if t.count("...") > 1:
            raise ValueError(f"{who}: operand {k} has more than one '...' in {subscripts!r}")
        if "..." not in t:
            return t
        n = nd - len(t.replace("...", ""))
        if n < 0:
            raise TypeError(
                f"{who}: operand {k} has {nd} dimensions, fewer than its " f"subscripts {t!r} name"
            )
        # Ellipsis dimensions align from the right, as numpy broadcasting does.
        return t.replace("...", "".join(ell[n_ell - n :]))

    ins = [expand(t, nd, k) for k, (t, nd) in enumerate(zip(terms, ndims))]
    for k, (t, nd) in enumerate(zip(ins, ndims)):
        if len(t) != nd:
            raise TypeError(
                f"{who}: operand {k} has {nd} dimension(s), but its subscripts "
                f"{terms[k]!r} name {len(t)}"
            )
    if arrow:
        if "..." in rhs:
            out = rhs.replace("...", "".join(ell))
        elif ell and any("..." in t for t in terms):
            raise ValueError(
                f"{who}: output subscripts of {subscripts!r} need '...' " "since an input has one"
            )
        else:
            out = rhs
    else:
        counts = {}
        for t in ins:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = "".join(ell) + "".join(
            sorted(c for c, n in counts.items() if n == 1 and c not in ell)
        )
    return ins, out


def _letter_sizes(ins, shapes):
    """Map each letter to the sizes it has among ``shapes`` (aligned with ``ins``)."""
    sizes: dict = {}
    for t, shp in zip(ins, shapes):
        for c, n in zip(t, shp):
            sizes.setdefault(c, []).append(n)
    return sizes


def _fresh_letters(used, n):
    free = [c for c in _LETTERS if c not in used]
    if len(free) < n:
        raise ValueError("einsum: more than 52 distinct subscripts are needed")
    return free[:n]


class Einsum(Op):
    """Einstein summation over explicit subscripts, e.g. ``Einsum("ij,jk->ik")``.

    All operands' letters must agree in length (a statically broadcastable dimension
    is renamed apart by ``einsum()`` before the Op is made). The output dtype is the
    numpy upcast of the operands' dtypes.

    >>> from theano_dag import tensor as tt
    >>> z = Einsum("ij,jk->ik")(tt.dmatrix("a"), tt.dmatrix("b"))
    >>> z.owner.op, z.type
    (Einsum{ij,jk->ik}, TensorType(float64, matrix))
    """

    __props__ = ("subscripts",)

    def __init__(self, subscripts):
        lhs, arrow, rhs = subscripts.partition("->")
        if not arrow or "." in subscripts or " " in subscripts:
            raise ValueError(
                f"Einsum: subscripts must be canonical ('ij,jk->ik': explicit "
                f"output, no '...', no spaces), got {subscripts!r}"
            )
        self.subscripts = subscripts
        self.in_terms = tuple(lhs.split(","))
        self.out_term = rhs
        for c in subscripts.replace(",", "").replace("->", ""):
            if c not in _LETTERS:
                raise ValueError(f"Einsum: invalid subscript character {c!r} in {subscripts!r}")
        missing = set(rhs) - set("".join(self.in_terms))
        if missing:
            raise ValueError(
                f"Einsum: output subscripts {sorted(missing)} of {subscripts!r} "
                "appear in no operand"
            )

    def __str__(self):
        return f"Einsum{{{self.subscripts}}}"

    __repr__ = __str__

    def make_node(self, *operands):
        if len(operands) != len(self.in_terms):
            raise TypeError(
                f"{self}: expected {len(self.in_terms)} operand(s), " f"got {len(operands)}"
            )
        xs = [as_tensor_variable(x) for x in operands]
        for k, (x, t) in enumerate(zip(xs, self.in_terms)):
            if x.ndim != len(t):
                raise TypeError(
                    f"{self}: operand {k} ({x}) must have {len(t)} dimension(s) "
                    f"for subscripts {t!r}, got {x.ndim}"
                )
        sizes = _letter_sizes(self.in_terms, [x.type.shape for x in xs])
        static = {}
        for c, ns in sizes.items():
            known = {n for n in ns if n is not None}
            if len(known) > 1:
                raise ValueError(
                    f"{self}: subscript {c!r} has different static lengths "
                    f"{sorted(known)} among the operands"
                )
            static[c] = known.pop() if known else None
        dtype = upcast(*[x.dtype for x in xs])
        out_shape = tuple(static[c] for c in self.out_term)
        return Apply(self, xs, [TensorType(dtype, shape=out_shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        sizes = _letter_sizes(self.in_terms, [x.shape for x in inputs])
        for c, ns in sizes.items():
            if len(set(ns)) > 1:
                raise ValueError(
                    f"{self}: subscript {c!r} has lengths {ns} among the operands "
                    f"(shapes {[x.shape for x in inputs]})"
                )
        out = self.out_term
        uniq = "".join(dict.fromkeys(out))
        spec = ",".join(self.in_terms) + "->" + uniq
        # optimize=True lets numpy pick a contraction order and use BLAS (tensordot).
        r = np.einsum(spec, *inputs, optimize=len(inputs) > 1)
        dtype = node.outputs[0].dtype
        if uniq != out:
            full = np.zeros([sizes[c][0] for c in out], dtype=dtype)
            np.einsum(f"{out}->{uniq}", full)[...] = r  # a writable view of the diagonal
            r = full
        elif any(np.may_share_memory(r, x) for x in inputs):
            r = r.copy()  # "ij->ji" is a view in numpy; our output must own its data
        output_storage[0][0] = np.asarray(r, dtype=dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        # Each letter's lengths checked equal, as perform checks them: a letter of the
        # output gives its length; a letter summed over guards the output's lengths.
        where, names = {}, {}
        for k, (t, shp) in enumerate(zip(self.in_terms, input_shapes)):
            for d, (c, n) in enumerate(zip(t, shp)):
                where.setdefault(c, []).append(n)
                names.setdefault(c, []).append(f"{node.inputs[k]} along dimension {d}")
        length = {
            c: equal_lengths(ns, f"{self}: subscript {c!r}", names[c].__getitem__)
            for c, ns in where.items()
            if c in self.out_term
        }
        out = tuple(length[c] for c in self.out_term)
        for c, ns in where.items():
            if c not in self.out_term:
                out = checked_shape(out, ns, f"{self}: subscript {c!r}", names[c])
        return [out]

    def L_op(self, inputs, outputs, output_grads):
        # A product is holomorphic: complex values conjugate around the real formula.
        grads = holomorphic_grads(
            lambda gs: self._real_grads(inputs, gs[0]), inputs, outputs, output_grads
        )
        # An integer or bool input keeps its float zero (cast to bool it was refused:
        # grad of tensordot(b, b) for a bool b raised TypeError).
        return [
            cast(g, x.dtype) if g.dtype != x.dtype and x.dtype in continuous_dtypes else g
            for g, x in zip(grads, inputs)
        ]

    def _real_grads(self, inputs, g):
        grads = []
        for k, x in enumerate(inputs):
            if x.dtype not in continuous_dtypes:
                # Theano's convention: an integer input gets a zero float gradient.
                grads.append(zeros_like(x, dtype=config.floatX))
                continue
            terms = [self.out_term] + [t for j, t in enumerate(self.in_terms) if j != k]
            args = [g] + [y for j, y in enumerate(inputs) if j != k]
            target = self.in_terms[k]
            if set(target) - set("".join(terms)):
                # A letter only operand k has is summed in the forward pass: its gradient
                # is constant along it, and ones_like(x) supplies the length.
                terms.append(target)
                args.append(ones_like(x))
            grads.append(Einsum(",".join(terms) + "->" + target)(*args))
        return grads

    def R_op(self, inputs, eval_points):
        terms = []
        for k, ev in enumerate(eval_points):
            if ev is not None:
                args = list(inputs)
                args[k] = ev
                terms.append(self(*args))
        if not terms:
            return [None]
        return [terms[0] if len(terms) == 1 else add(*terms)]


def _rename_broadcast(ins, xs):
    """Give a statically length-1 dimension its own letter where the same letter has
    another length elsewhere: numpy would broadcast it, and renaming makes that explicit
    (a length-1 letter summed alone changes nothing) so gradients keep the right shape."""
    sizes = _letter_sizes(ins, [x.type.shape for x in xs])
    used = set("".join(ins))
    out = []
    for t, x in zip(ins, xs):
        chars = list(t)
        for d, c in enumerate(t):
            if x.type.shape[d] == 1 and any(n != 1 for n in sizes[c]):
                (fresh,) = _fresh_letters(used, 1)
                used.add(fresh)
                chars[d] = fresh
        out.append("".join(chars))
    return out


def einsum(subscripts, *operands):
    """Einstein summation, as ``numpy.einsum``: ``einsum("ij,jk->ik", a, b)``.

    Supports explicit and implicit output, ``...``, traces (``"ii->"``), diagonals
    (``"ii->i"``), transposes, outer products and batches. The result is one
    ``Einsum`` node whose gradient is again an einsum.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dmatrix("a"), tt.dmatrix("b")
    >>> c = einsum("ij,jk->ik", a, b)
    >>> c.owner.op
    Einsum{ij,jk->ik}
    >>> x = np.arange(6.0).reshape(2, 3)
    >>> c.eval({a: x, b: x.T})
    array([[ 5., 14.],
           [14., 50.]])
    >>> einsum("ii", tt.dmatrix("m")).owner.op
    Einsum{ii->}
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise TypeError("einsum: at least one operand is needed")
    xs = []
    for k, x in enumerate(operands):
        try:
            xs.append(as_tensor_variable(x))
        except TypeError as e:
            raise TypeError(f"einsum: operand {k} is not a tensor: {e}") from None
    ins, out = _parse(subscripts, [x.ndim for x in xs])
    if len(set(out)) != len(out):
        raise ValueError(f"einsum: output subscripts {out!r} repeat a letter")
    missing = set(out) - set("".join(ins))
    if missing:
        raise ValueError(
            f"einsum: output subscripts {sorted(missing)} of {subscripts!r} " "appear in no operand"
        )
    ins = _rename_broadcast(ins, xs)
    return Einsum(",".join(ins) + "->" + out)(*xs)


def _labels_einsum(sa, sb, out, a, b):
    """``einsum`` over integer labels, renamed to letters in order of appearance."""
    names: dict = {}
    for lab in list(sa) + list(sb):
        names.setdefault(lab, _LETTERS[len(names)])

    def term(labels):
        return "".join(names[lab] for lab in labels)

    return einsum(f"{term(sa)},{term(sb)}->{term(out)}", a, b)


def _norm_axes(axes, a, b, who):
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > a.ndim or n > b.ndim:
            raise ValueError(
                f"{who}: axes={n} is out of range for inputs of {a.ndim} and "
                f"{b.ndim} dimensions"
            )
        return list(range(a.ndim - n, a.ndim)), list(range(n))
    try:
        ax_a, ax_b = axes
    except (TypeError, ValueError):
        raise ValueError(
            f"{who}: axes must be an int or a pair of axis lists, " f"got {axes!r}"
        ) from None
    ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
    ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
    if len(ax_a) != len(ax_b):
        raise ValueError(f"{who}: axes {axes!r} name {len(ax_a)} axes of a but {len(ax_b)} " "of b")
    for which, ax, x in (("a", ax_a, a), ("b", ax_b, b)):
        for d in ax:
            if not -x.ndim <= d < x.ndim:
                raise ValueError(
                    f"{who}: axis {d} is out of range for {which} with " f"{x.ndim} dimensions"
                )
    ax_a = [d % a.ndim for d in ax_a]
    ax_b = [d % b.ndim for d in ax_b]
    if len(set(ax_a)) != len(ax_a) or len(set(ax_b)) != len(ax_b):
        raise ValueError(f"{who}: axes {axes!r} repeat an axis")
    return ax_a, ax_b


def tensordot(a, b, axes=2):
    """Sum products over the given axes, as ``numpy.tensordot``.

    ``axes`` is an int ``n`` (the last ``n`` axes of ``a`` with the first ``n`` of
    ``b``) or a pair of axis lists.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dtensor3("a"), tt.dmatrix("b")
    >>> tensordot(a, b, axes=[[2], [0]]).owner.op
    Einsum{abc,cd->abd}
    >>> x, y = np.ones((2, 3, 4)), np.ones((4, 5))
    >>> tensordot(a, b, axes=1).eval({a: x, b: y}).shape
    (2, 3, 5)
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    ax_a, ax_b = _norm_axes(axes, a, b, "tensordot")
    sa = list(range(a.ndim))
    sb = list(range(a.ndim, a.ndim + b.ndim))
    for da, db in zip(ax_a, ax_b):
        sb[db] = sa[da]
    out = [c for d, c in enumerate(sa) if d not in ax_a] + [
        c for d, c in enumerate(sb) if d not in ax_b
    ]
    return _labels_einsum(sa, sb, out, a, b)


def batched_tensordot(x, y, axes=2):
    """``tensordot`` of ``x[i]`` and ``y[i]`` for each ``i`` along the first (batch) axis.

    ``axes`` counts axes of the full inputs (so never 0, the batch axis).

    >>> from theano_dag import tensor as tt
    >>> batched_tensordot(tt.dtensor3("x"), tt.dtensor3("y"), [[2], [1]]).owner.op
    Einsum{abc,acd->abd}
    """
    x, y = as_tensor_variable(x), as_tensor_variable(y)
    if x.ndim < 1 or y.ndim < 1:
        raise TypeError(
            "batched_tensordot: both inputs need a batch axis (ndim >= 1), "
            f"got {x.ndim} and {y.ndim} dimensions"
        )
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n >= x.ndim or n >= y.ndim:
            raise ValueError(
                f"batched_tensordot: axes={n} is out of range for inputs of "
                f"{x.ndim} and {y.ndim} dimensions"
            )
        axes = [list(range(x.ndim - n, x.ndim)), list(range(1, n + 1))]
    ax_x, ax_y = _norm_axes(axes, x, y, "batched_tensordot")
    if 0 in ax_x or 0 in ax_y:
        raise ValueError("batched_tensordot: axis 0 is the batch axis and cannot be summed")
    sx = list(range(x.ndim))
    sy = list(range(x.ndim, x.ndim + y.ndim))
    sy[0] = sx[0]
    for dx, dy in zip(ax_x, ax_y):
        sy[dy] = sx[dx]
    out = (
        [sx[0]]
        + [c for d, c in enumerate(sx) if d and d not in ax_x]
        + [c for d, c in enumerate(sy) if d and d not in ax_y]
    )
    return _labels_einsum(sx, sy, out, x, y)


def batched_dot(a, b):
    """``dot(a[i], b[i])`` for each ``i`` of the first (batch) axis.

    Like Theano: a batch of vectors times a batch of scalars scales elementwise;
    otherwise the last axis of ``a[i]`` meets the second-to-last of ``b[i]`` (or its
    only axis), as ``numpy.dot`` does.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dtensor3("a"), tt.dtensor3("b")
    >>> batched_dot(a, b).owner.op
    Einsum{abc,acd->abd}
    >>> batched_dot(a, b).eval({a: np.ones((2, 3, 4)), b: np.ones((2, 4, 5))})[0, 0, 0]
    np.float64(4.0)
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.ndim == 0:
        raise TypeError("batched_dot: a must have at least one (batch) axis, got a scalar")
    if b.ndim == 0:
        raise TypeError("batched_dot: b must have at least one (batch) axis, got a scalar")
    sa = list(range(a.ndim))
    sb = list(range(a.ndim, a.ndim + b.ndim))
    sb[0] = sa[0]
    if a.ndim == 1 or b.ndim == 1:
        # A batch of scalars scales the other batch elementwise.
        out = sa if b.ndim == 1 else sb
    else:
        k = max(1, b.ndim - 2)
        sb[k] = sa[-1]
        out = sa[:-1] + [c for d, c in enumerate(sb) if d and d != k]
    return _labels_einsum(sa, sb, out, a, b)


def matmul(x1, x2):
    """``numpy.matmul`` (Python's ``x1 @ x2``): matrix products over the last two axes,
    the axes before them broadcast as batch axes; a vector operand is a row (first) or a
    column (second) whose axis is dropped from the result. Up to two dimensions it is
    ``dot``; with more, Theano's ``dot`` of a 3-d tensor contracts differently
    (``tensordot`` of the last axis with the second-to-last), and ``@`` is not ``dot``.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> a, b = tt.dtensor3("a"), tt.dtensor3("b")
    >>> (a @ b).eval({a: np.ones((2, 3, 4)), b: np.ones((2, 4, 5))}).shape
    (2, 3, 5)
    """
    a, b = as_tensor_variable(x1), as_tensor_variable(x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(
            f"matmul: scalar operands are not allowed (use *), got {a.ndim}-d and {b.ndim}-d"
        )
    if a.ndim <= 2 and b.ndim <= 2:
        return dot(a, b)
    row, col = a.ndim == 1, b.ndim == 1
    if row:
        a = a.dimshuffle("x", 0)
    if col:
        b = b.dimshuffle(0, "x")
    out = einsum("...ij,...jk->...ik", a, b)
    if row and col:
        return out[..., 0, 0]
    if row:
        return out[..., 0, :]
    if col:
        return out[..., 0]
    return out
