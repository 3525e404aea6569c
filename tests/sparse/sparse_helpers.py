"""What the sparse tests share: random CSR/CSC matrices, the engines they run on, and
evaluating graphs whose inputs and outputs may be sparse."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
from theano_dag import sparse as S
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.opencl.context import opencl_available
from theano_dag.tensor.shape import Shape_i

sp = pytest.importorskip("scipy.sparse")

REF = Mode(linker="py", optimizer=None)
# The CPU engine planning every dense value (no size threshold), with the rewrites on.
CPU = Mode(linker=CPULinker(min_plan_bytes=0))
ENGINES = {"py": REF, "cpu": CPU}
# OpenCL runs sparse ops on the host (the dense values around them on the device).
OCL_OK, OCL_WHY = opencl_available()
if OCL_OK:
    ENGINES["opencl"] = Mode(linker="opencl")
FLOATS = ("float32", "float64")
SHAPE = (4, 5)


def random_sparse(rng, format, dtype, shape=SHAPE, density=0.4, positive=False):
    """A random matrix of ``format`` with about ``density`` stored entries, none zero;
    in [0.5, 2) when ``positive``, else signed and away from 0."""
    mask = rng.random(shape) < density
    if mask.size:
        mask[0, 0] = True  # never empty (unless the shape is)
    if positive:
        vals = rng.uniform(0.5, 2.0, shape)
    else:
        vals = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    dense = _of_dtype(np.where(mask, vals, 0.0), dtype)
    return sp.csr_matrix(dense) if format == "csr" else sp.csc_matrix(dense)


def _of_dtype(a, dtype):
    """``a`` in ``dtype``; for an integer dtype, its entries doubled and rounded away from
    zero (a non-zero entry stays non-zero)."""
    if np.dtype(dtype).kind in "iu":
        a = np.sign(a) * np.ceil(np.abs(a) * 2)
    return np.asarray(a).astype(dtype)


def as_dense(v):
    return v.toarray() if sp.issparse(v) else np.asarray(v)


def run(inputs, outputs, values, mode):
    """Compile and call once; outputs as a list."""
    f = theano_dag.function(inputs, outputs, mode=mode, on_unused_input="ignore")
    out = f(*values)
    return out if isinstance(outputs, list) else [out]


def inferred_shapes(node, inputs, values):
    """The shapes ``node.op.infer_shape`` gives (from the inputs' own lengths), evaluated."""
    in_shapes = [
        tuple(Shape_i(d)(v) for d in range(v.type.ndim)) if hasattr(v.type, "ndim") else None
        for v in node.inputs
    ]
    shapes = node.op.infer_shape(None, node, in_shapes)
    flat = [theano_dag.tensor.as_tensor_variable(e) for s in shapes for e in s]
    vals = run(inputs, flat, values, REF) if flat else []
    result, k = [], 0
    for s in shapes:
        result.append(tuple(int(vals[k + j]) for j in range(len(s))))
        k += len(s)
    return result


class Row:
    """One op to check: ``build(*vars)`` makes its output; ``ref(*values)`` is scipy's (or
    numpy's) result; ``kinds`` says each input's kind: ``"csr"``, ``"csc"`` (sparse),
    ``"pos_csr"`` (sparse with positive entries), ``"dense"`` (a matrix of SHAPE),
    ``"row"``/``"col"`` (vectors along each axis), ``"right"`` (a 5x3 matrix),
    ``"left"`` (3x4), ``"out"`` (4x3), ``"sq_csr"``/``"sq_csc"`` (square sparse),
    ``"scalar"``. ``structured``: the gradient is checked on the stored entries only.
    ``parts``: the row gives a matrix's parts to an op of one format (Theano's C
    forms), which cannot tell the other format's parts (no "other_format" edge case)."""

    def __init__(self, name, build, ref, kinds, structured=False, grad=True, parts=False):
        self.name, self.build, self.ref, self.kinds = name, build, ref, kinds
        self.structured, self.grad, self.parts = structured, grad, parts

    def __repr__(self):
        return self.name

    def values(self, rng, dtype, shape=SHAPE):
        """Values of the row's kinds, the matrices of ``shape`` (the others follow it)."""
        out = []
        for k in self.kinds:
            if k in ("csr", "csc"):
                out.append(random_sparse(rng, k, dtype, shape=shape))
            elif k.startswith("sq_"):  # square (4 x 4)
                out.append(random_sparse(rng, k[3:], dtype, shape=(shape[0],) * 2))
            elif k.startswith("pos_"):
                out.append(random_sparse(rng, k[4:], dtype, shape=shape, positive=True))
            elif k == "dense":
                out.append(_of_dtype(rng.uniform(-2, 2, shape), dtype))
            elif k == "row":
                out.append(_of_dtype(rng.uniform(0.5, 2, shape[1]), dtype))
            elif k == "col":
                out.append(_of_dtype(rng.uniform(0.5, 2, shape[0]), dtype))
            elif k in ("right", "right_t"):
                out.append(_of_dtype(rng.uniform(-2, 2, (shape[1], 3)), dtype))
            elif k == "left":
                out.append(_of_dtype(rng.uniform(-2, 2, (3, shape[0])), dtype))
            elif k == "out":  # the shape of a product of shape by "right"
                out.append(_of_dtype(rng.uniform(-2, 2, (shape[0], 3)), dtype))
            elif k == "scalar":
                out.append(_of_dtype(rng.uniform(0.5, 2), dtype))
            else:
                raise ValueError(k)
        return out

    def variables(self, values):
        out = []
        for k, v in enumerate(values):
            if sp.issparse(v):
                out.append(S.matrix(v.format, f"in{k}", dtype=v.dtype))
            else:
                out.append(theano_dag.tensor.TensorType(v.dtype, shape=(None,) * v.ndim)(f"in{k}"))
        return out
