"""The nodes of an OpGraph: tensors, and the operations that map tensors to tensors.

Every operation reads its meaning from the mode labels on its edges: an input
edge names the modes of the tensor it reads, an output edge the modes of the
tensor it writes, position by position. So ``C("i,j") = A("i,j") + B("j,i")``
adds ``A`` to the transpose of ``B``, and :class:`Multiplication` is Einstein
summation read straight from the labels. Each operation says how to check its
labels, how to compute its outputs with numpy (the reference every rewrite is
checked against) and how to infer their shapes; a new operation is a new
subclass with those three methods.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field

import numpy as np

from theano_dag.sparse.type import is_sparse_value

__all__ = [
    "Add",
    "Cholesky",
    "Chip",
    "Division",
    "EigenSolve",
    "ElementwiseMultiplication",
    "MatrixMultiply",
    "Multiplication",
    "Node",
    "Operation",
    "Permute",
    "Pow",
    "Reshape",
    "Scale",
    "Slice",
    "Subtraction",
    "Tensor",
    "parse_modes",
]


def parse_modes(labels):
    """The mode names of an edge label: ``"i,j"`` -> ``('i', 'j')``; ``""`` is a scalar.

    >>> parse_modes("mu, nu")
    ('mu', 'nu')
    >>> parse_modes("")
    ()
    """
    if isinstance(labels, str):
        modes = tuple(m.strip() for m in labels.split(",")) if labels.strip() else ()
    elif isinstance(labels, tuple | list) and all(isinstance(m, str) for m in labels):
        modes = tuple(m.strip() for m in labels)
    else:
        raise TypeError(f"edge labels must be a string like 'i,j', got {labels!r}")
    if any(not m or "," in m for m in modes):
        raise ValueError(f"edge labels {labels!r} have an empty mode name; expected e.g. 'i,j'")
    return modes


class Node:
    """A node of an OpGraph: a :class:`Tensor` or an :class:`Operation`."""

    is_tensor = False

    def label(self):
        return type(self).__name__


@dataclass(frozen=True)
class Tensor(Node):
    """A tensor node. ``value`` (an array) is an optional data reference, not compared.

    >>> Tensor("A", shape=(2, 3))
    Tensor(name='A', shape=(2, 3))
    """

    name: str | None = None
    shape: tuple | None = None
    value: object = field(default=None, compare=False, repr=False)

    is_tensor = True

    def __post_init__(self):
        if is_sparse_value(self.value):
            raise TypeError(
                f"Tensor {self.label()}: its value is a scipy.sparse matrix, and an OpGraph "
                "holds dense arrays only"
            )
        shape = self.shape
        if shape is None and self.value is not None:
            shape = np.shape(self.value)
        if shape is not None:
            shape = tuple(None if d is None else int(d) for d in shape)
        object.__setattr__(self, "shape", shape)

    def label(self):
        return self.name if self.name is not None else "Tensor"


class Operation(Node):
    """An operation node. Subclasses set the arities and define the methods below.

    ``ins`` and ``outs`` are the mode tuples of the input and output edges, in
    the order the edges were added.
    """

    n_inputs: tuple[int, int | None] = (1, 1)  # (least, most); None: no limit
    n_outputs = 1

    def check(self, ins, outs):
        """Raise ``ValueError`` saying what is wrong when the labels make no sense."""

    def compute(self, arrays, ins, outs):
        """The output arrays, each with its modes in the order of its output edge."""
        raise NotImplementedError(f"{self.label()} has no reference implementation")

    def infer_shape(self, shapes, ins, outs):
        """Output shapes (tuples, ``None`` for an unknown size) from input shapes."""
        dims = _dims_by_mode(shapes, ins)
        return [tuple(dims.get(m) for m in out) for out in outs]

    def label(self):
        params = ", ".join(repr(v) for v in vars(self).values())
        return f"{type(self).__name__}({params})" if params else type(self).__name__


def _dims_by_mode(shapes, ins):
    dims = {}
    for shape, modes in zip(shapes, ins):
        for m, d in zip(modes, shape or (None,) * len(modes)):
            if d is None:
                continue
            if dims.get(m, d) != d:
                raise ValueError(f"mode {m!r} has size {dims[m]} on one input and {d} on another")
            dims[m] = d
    return dims


def _is_perm(a, b):
    return len(a) == len(b) and len(set(a)) == len(a) and set(a) == set(b)


def _align(array, modes, target):
    """Transpose ``array`` (modes ``modes``) to the mode order ``target``."""
    return np.transpose(array, [modes.index(m) for m in target])


def _no_repeats(modes, what):
    if len(set(modes)) != len(modes):
        raise ValueError(f"{what} {','.join(modes)!r} repeats a mode")


class _Elementwise(Operation):
    """Inputs and output carry the same modes, in any order (a permutation on an edge)."""

    n_inputs = (2, None)

    def check(self, ins, outs):
        _no_repeats(outs[0], "output")
        for k, modes in enumerate(ins):
            if not _is_perm(modes, outs[0]):
                raise ValueError(
                    f"input {k} has modes {','.join(modes)!r} but the output has "
                    f"{','.join(outs[0])!r}; an elementwise operation needs the same modes"
                )

    def compute(self, arrays, ins, outs):
        return [self._apply([_align(a, m, outs[0]) for a, m in zip(arrays, ins)])]


@dataclass(frozen=True)
class Add(_Elementwise):
    """Elementwise sum of two or more tensors."""

    def _apply(self, xs):
        return sum(xs[1:], xs[0])


@dataclass(frozen=True)
class Subtraction(_Elementwise):
    """First input minus the second."""

    n_inputs = (2, 2)

    def _apply(self, xs):
        return xs[0] - xs[1]


@dataclass(frozen=True)
class ElementwiseMultiplication(_Elementwise):
    """Elementwise (Hadamard) product of two or more tensors."""

    def _apply(self, xs):
        return math.prod(xs[1:], start=xs[0])


@dataclass(frozen=True)
class Division(_Elementwise):
    """First input divided elementwise by the second."""

    n_inputs = (2, 2)

    def _apply(self, xs):
        return xs[0] / xs[1]


@dataclass(frozen=True)
class Scale(_Elementwise):
    """A tensor times the scalar ``factor``."""

    factor: float = 1.0
    n_inputs = (1, 1)

    def _apply(self, xs):
        return self.factor * xs[0]


@dataclass(frozen=True)
class Pow(_Elementwise):
    """A tensor raised elementwise to ``exponent`` (like numpy's ``**``)."""

    exponent: float = 2
    n_inputs = (1, 1)

    def _apply(self, xs):
        x = xs[0]
        if self.exponent < 0:  # integer arrays cannot take negative integer powers
            x = x.astype(np.result_type(x, np.float64))
        return x**self.exponent


@dataclass(frozen=True)
class Permute(_Elementwise):
    """Reorders modes: the output edge lists the input's modes in a new order."""

    n_inputs = (1, 1)

    def _apply(self, xs):
        return xs[0]


@dataclass(frozen=True)
class Multiplication(Operation):
    """Generalized Einstein summation read from the labels.

    Contraction (``"i,k" * "k,j" -> "i,j"``), trace (``"i,i" -> ""``), tensor
    product (``"i" * "j" -> "i,j"``) and elementwise product (``"i" * "i" -> "i"``).

    >>> Multiplication().subscripts([('i', 'k'), ('k', 'j')], [('i', 'j')])
    'ab,bc->ac'
    """

    n_inputs = (1, None)

    def check(self, ins, outs):
        _no_repeats(outs[0], "output")
        known = {m for modes in ins for m in modes}
        for m in outs[0]:
            if m not in known:
                raise ValueError(f"output mode {m!r} is on no input")

    def subscripts(self, ins, outs):
        """The ``np.einsum`` subscripts for these labels (mode names become letters)."""
        letters = {}
        for modes in (*ins, outs[0]):
            for m in modes:
                if m not in letters:
                    if len(letters) == len(string.ascii_letters):
                        raise ValueError("more than 52 distinct modes in one Multiplication")
                    letters[m] = string.ascii_letters[len(letters)]
        term = lambda modes: "".join(letters[m] for m in modes)
        return ",".join(map(term, ins)) + "->" + term(outs[0])

    def compute(self, arrays, ins, outs):
        return [np.einsum(self.subscripts(ins, outs), *arrays)]


@dataclass(frozen=True)
class MatrixMultiply(Operation):
    """A matrix product, as gemm computes it: ``"i,k" * "k,j" -> "i,j"`` and only that."""

    n_inputs = (2, 2)

    def check(self, ins, outs):
        if len(ins[0]) != 2 or len(ins[1]) != 2 or len(outs[0]) != 2:
            raise ValueError("MatrixMultiply needs matrices: labels like 'i,k', 'k,j' -> 'i,j'")
        (a, b), (c, d), out = ins[0], ins[1], outs[0]
        if b != c or out != (a, d) or len({a, b, d}) != 3:
            raise ValueError(
                f"MatrixMultiply needs labels 'i,k', 'k,j' -> 'i,j'; got "
                f"{a},{b!r} * {c},{d!r} -> {','.join(out)!r}"
            )

    def compute(self, arrays, ins, outs):
        return [np.matmul(arrays[0], arrays[1])]


@dataclass(frozen=True)
class Slice(Operation):
    """The block ``[begin, end)`` of a tensor, one bound per mode (``None`` end: to the end)."""

    begin: tuple = ()
    end: tuple = ()

    def __post_init__(self):
        begin, end = tuple(self.begin), tuple(self.end)
        if len(begin) != len(end):
            raise ValueError(f"Slice bounds differ in length: begin {begin}, end {end}")
        for b, e in zip(begin, end):
            if (
                not isinstance(b, int)
                or b < 0
                or (e is not None and (not isinstance(e, int) or e < b))
            ):
                raise ValueError(f"Slice bounds need 0 <= begin <= end, got {begin} to {end}")
        object.__setattr__(self, "begin", begin)
        object.__setattr__(self, "end", end)

    def check(self, ins, outs):
        _no_repeats(ins[0], "input")
        if len(ins[0]) != len(self.begin):
            raise ValueError(
                f"Slice has {len(self.begin)} bounds but its input has rank {len(ins[0])}"
            )
        if not _is_perm(outs[0], ins[0]):
            raise ValueError("Slice output must carry the input's modes (in any order)")

    def compute(self, arrays, ins, outs):
        block = arrays[0][tuple(slice(b, e) for b, e in zip(self.begin, self.end))]
        return [_align(block, ins[0], outs[0])]

    def infer_shape(self, shapes, ins, outs):
        shape = shapes[0] or (None,) * len(ins[0])
        sizes = {}
        for m, d, b, e in zip(ins[0], shape, self.begin, self.end):
            stop = e if d is None else min(d, e) if e is not None else d
            sizes[m] = None if stop is None else max(stop - b, 0)
        return [tuple(sizes[m] for m in outs[0])]


@dataclass(frozen=True)
class Reshape(Operation):
    """The input's elements (in C order) in a tensor of ``shape``; one entry may be -1."""

    shape: tuple = ()

    def __post_init__(self):
        shape = tuple(int(d) for d in self.shape)
        if shape.count(-1) > 1 or any(d < -1 for d in shape):
            raise ValueError(f"Reshape shape {shape} may hold one -1 and otherwise sizes >= 0")
        object.__setattr__(self, "shape", shape)

    def check(self, ins, outs):
        _no_repeats(outs[0], "output")
        if len(outs[0]) != len(self.shape):
            raise ValueError(f"Reshape to {self.shape} needs an output of rank {len(self.shape)}")

    def compute(self, arrays, ins, outs):
        return [np.reshape(arrays[0], self.shape)]

    def infer_shape(self, shapes, ins, outs):
        if -1 not in self.shape:
            return [self.shape]
        shape = shapes[0]
        if shape is None or None in shape:
            return [tuple(None if d == -1 else d for d in self.shape)]
        known = math.prod(d for d in self.shape if d != -1)
        fill = math.prod(shape) // known if known else 0
        return [tuple(fill if d == -1 else d for d in self.shape)]


@dataclass(frozen=True)
class Chip(Operation):
    """The sub-tensor at ``offset`` along mode number ``mode`` (that mode dropped)."""

    mode: int = 0
    offset: int = 0

    def check(self, ins, outs):
        _no_repeats(ins[0], "input")
        if not 0 <= self.mode < len(ins[0]):
            raise ValueError(f"Chip mode {self.mode} is not a mode of a rank-{len(ins[0])} input")
        rest = ins[0][: self.mode] + ins[0][self.mode + 1 :]
        if not _is_perm(outs[0], rest):
            raise ValueError(f"Chip output must carry the modes {','.join(rest)!r}")

    def compute(self, arrays, ins, outs):
        rest = ins[0][: self.mode] + ins[0][self.mode + 1 :]
        return [_align(np.take(arrays[0], self.offset, axis=self.mode), rest, outs[0])]


class _MatrixFunction(Operation):
    """Input 0 is a matrix ``"i,j"``; outputs carry its modes (a swapped order transposes)."""

    def check(self, ins, outs):
        if len(ins[0]) != 2 or ins[0][0] == ins[0][1]:
            raise ValueError(f"{self.label()} needs a matrix input labelled like 'i,j'")
        for k, modes in enumerate(ins[1:], 1):
            if not _is_perm(modes, ins[0]):
                raise ValueError(f"input {k} must carry the modes of input 0")
        if not _is_perm(outs[0], ins[0]):
            raise ValueError(f"{self.label()} output 0 must carry the input's modes")


@dataclass(frozen=True)
class Cholesky(_MatrixFunction):
    """The lower Cholesky factor ``L`` of a symmetric positive definite matrix (A = L L^T)."""

    def compute(self, arrays, ins, outs):
        return [_align(np.linalg.cholesky(arrays[0]), ins[0], outs[0])]


@dataclass(frozen=True)
class EigenSolve(_MatrixFunction):
    """Eigenvectors and eigenvalues of a symmetric ``A``, or of ``A v = w B v`` given ``B``.

    Outputs in edge order: the vectors (the input's modes; column ``j`` is the
    ``j``-th vector) and the values (the input's second mode), ascending.
    """

    n_inputs = (1, 2)
    n_outputs = 2

    def check(self, ins, outs):
        super().check(ins, outs)
        if outs[1] != ins[0][1:]:
            raise ValueError(
                f"EigenSolve output 1 (the values) must carry the input's second mode "
                f"{ins[0][1]!r}, got {','.join(outs[1])!r}"
            )

    def compute(self, arrays, ins, outs):
        a = arrays[0]
        if len(arrays) == 1:
            values, vectors = np.linalg.eigh(a)
        else:
            # A v = w B v with B = L L^T is the symmetric problem C u = w u, C = L^-1 A L^-T
            b = _align(arrays[1], ins[1], ins[0])
            low = np.linalg.cholesky(b)
            c = np.linalg.solve(low, np.linalg.solve(low, a).T).T
            values, u = np.linalg.eigh(c)
            vectors = np.linalg.solve(low.T, u)
        return [_align(vectors, ins[0], outs[0]), values]
