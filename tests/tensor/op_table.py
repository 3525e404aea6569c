"""The op table: one row per tensor op (or op configuration) for ``test_op_table.py``.

A row says how to build the op on symbolic inputs, how to make input values, what numpy
computes for them, the dtypes to try, and whether (and wrt which inputs) to check the
gradient by finite differences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import nnet3d_reference
import nnet_reference
import numpy as np
from scipy import linalg as scipy_linalg
from scipy import special

import theano_dag.tensor as tt
from theano_dag import gradient
from theano_dag import scalar as ts
from theano_dag.config import config
from theano_dag.graph.identity_ops import DeepCopyOp, ViewOp
from theano_dag.tensor import blas, fft, hints, nnet
from theano_dag.tensor import linalg as la
from theano_dag.tensor.arrays import (
    AllocEmpty,
    Assert,
    Mean,
    Tri,
    scalar_from_tensor,
    tensor_from_scalar,
)
from theano_dag.tensor.elemwise import CAReduce, Max, ProdWithoutZeros, Sum
from theano_dag.tensor.fourier import Fourier
from theano_dag.tensor.fused import Adagrad, FusedReduce
from theano_dag.tensor.nnet import blocksparse, conv3d2d, corr, corr3d, pool, prepend, sigm
from theano_dag.tensor.nnet.abstract_conv import Conv2dBiasAct
from theano_dag.tensor.type_other import MakeSlice
from theano_dag.tensor.xlogx import xlogx, xlogy0  # tt.xlogx is the module (Theano's)
from theano_dag.typed_list import make_list

FLOATS = ("float32", "float64")
NUMERIC = ("float32", "float64", "int32", "int64")


def U(*shape, lo=-2.0, hi=2.0):
    """Uniform values in [lo, hi) of ``shape`` in the dtype asked for (ints: integers)."""

    def gen(rng, dtype):
        if np.dtype(dtype).kind in "iu":
            return rng.integers(int(np.floor(lo)), int(np.ceil(hi)) + 1, size=shape).astype(dtype)
        if dtype == "bool":
            return rng.integers(0, 2, size=shape).astype(bool)
        return rng.uniform(lo, hi, size=shape).astype(dtype)

    return gen


def I(*shape, lo=0, hi=3):  # noqa: E743
    """Integer (int64) values whatever the row's dtype: indices, counts."""
    return lambda rng, dtype: rng.integers(lo, hi, size=shape).astype("int64")


def B(*shape):
    """Random bools whatever the row's dtype."""
    return lambda rng, dtype: rng.integers(0, 2, size=shape).astype(bool)


def NZ(*shape, lo=0.5, hi=2.0):
    """Values away from zero, with random signs (divisors); ints in [1, 4] with signs."""

    def gen(rng, dtype):
        sign = np.where(rng.integers(0, 2, size=shape) == 1, 1, -1)
        if np.dtype(dtype).kind in "iu":
            return (sign * rng.integers(1, 5, size=shape)).astype(dtype)
        return (sign * rng.uniform(lo, hi, size=shape)).astype(dtype)

    return gen


@dataclass
class Row:
    name: str
    build: Callable
    ref: Callable
    gens: tuple
    dtypes: tuple = FLOATS
    grad: bool = True
    grad_inputs: tuple | None = None  # which inputs to differentiate (default: float ones)
    rtol32: float = 1e-4
    rtol64: float = 1e-7
    check_dtype: bool = True
    extra: dict = field(default_factory=dict)

    def __str__(self):
        return self.name


def _unary(name, ref, gen=None, dtypes=FLOATS, grad=True, **kw):
    fn = getattr(tt, name)
    return Row(name, fn, ref, (gen or U(3, 4),), dtypes=dtypes, grad=grad, **kw)


def _binary(name, ref, gens=None, dtypes=NUMERIC, grad=True, **kw):
    fn = getattr(tt, name)
    return Row(name, fn, ref, gens or (U(3, 4), U(3, 4)), dtypes=dtypes, grad=grad, **kw)


POS = U(3, 4, lo=0.5, hi=3.0)
UNIT = U(3, 4, lo=-0.9, hi=0.9)

ELEMWISE = [
    _unary("neg", np.negative, dtypes=NUMERIC),
    _unary("abs", np.abs, dtypes=NUMERIC),
    _unary("sgn", np.sign, dtypes=NUMERIC),
    _unary("exp", np.exp),
    _unary("exp2", np.exp2),
    _unary("log", np.log, POS),
    _unary("log2", np.log2, POS),
    _unary("log10", np.log10, POS),
    _unary("log1p", np.log1p, POS),
    _unary("expm1", np.expm1),
    _unary("sqrt", np.sqrt, POS),
    _unary("sqr", np.square, dtypes=NUMERIC),
    _unary("reciprocal", np.reciprocal, NZ(3, 4)),
    _unary("sin", np.sin),
    _unary("cos", np.cos),
    _unary("tan", np.tan, UNIT),
    _unary("arcsin", np.arcsin, UNIT),
    _unary("arccos", np.arccos, UNIT),
    _unary("arctan", np.arctan),
    _unary("sinh", np.sinh),
    _unary("cosh", np.cosh),
    _unary("tanh", np.tanh),
    _unary("sech2", lambda x: (1 / np.cosh(x.astype("float64")) ** 2).astype(x.dtype)),
    _unary("sigmoid", special.expit, U(3, 4, lo=-30, hi=30)),
    _unary("softplus", lambda x: np.logaddexp(0, x), U(3, 4, lo=-30, hi=30)),
    _unary("erf", special.erf),
    _unary("erfc", special.erfc),
    _unary("floor", np.floor, U(3, 4, lo=-5, hi=5), grad=False),
    _unary("ceil", np.ceil, U(3, 4, lo=-5, hi=5), grad=False),
    _unary("trunc", np.trunc, U(3, 4, lo=-5, hi=5), grad=False),
    Row("round", tt.round, np.round, (U(3, 4, lo=-5, hi=5),), grad=False),
    Row(
        "round_half_away",
        lambda x: tt.round(x, "half_away_from_zero"),
        lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
        (U(3, 4, lo=-5, hi=5),),
        grad=False,
    ),
    _unary("isnan", np.isnan, grad=False),
    _unary("isinf", np.isinf, grad=False),
    _unary("identity", np.copy, dtypes=NUMERIC),
    _binary("add", np.add),
    _binary("sub", np.subtract),
    _binary("mul", np.multiply),
    _binary("true_div", np.true_divide, (U(3, 4), NZ(3, 4))),
    _binary("int_div", np.floor_divide, (U(3, 4, lo=-5, hi=5), NZ(3, 4)), grad=False),
    _binary("mod", np.mod, (U(3, 4, lo=-5, hi=5), NZ(3, 4)), grad_inputs=(0,)),
    _binary("pow", np.power, (POS, U(3, 4, lo=-1.5, hi=1.5)), dtypes=FLOATS),
    Row(
        "pow_int",
        tt.pow,
        np.power,
        (U(3, 4, lo=-3, hi=3), U(3, 4, lo=0, hi=3)),
        dtypes=("int32", "int64"),
        grad=False,
    ),
    _binary("maximum", np.maximum),
    _binary("minimum", np.minimum),
    _binary("arctan2", np.arctan2, dtypes=FLOATS),
    *[
        _binary(n, f, grad=False)
        for n, f in (
            ("lt", np.less),
            ("gt", np.greater),
            ("le", np.less_equal),
            ("ge", np.greater_equal),
            ("eq", np.equal),
            ("neq", np.not_equal),
        )
    ],
    *[
        Row(
            n,
            getattr(tt, n),
            f,
            (U(3, 4, lo=-8, hi=8), U(3, 4, lo=-8, hi=8)),
            dtypes=("int8", "int32", "int64", "bool"),
            grad=False,
        )
        for n, f in (("and_", np.bitwise_and), ("or_", np.bitwise_or), ("xor", np.bitwise_xor))
    ],
    Row(
        "invert",
        tt.invert,
        np.invert,
        (U(3, 4, lo=-8, hi=8),),
        dtypes=("int8", "int64", "bool"),
        grad=False,
    ),
    # -0.5 and 0.75 are exact in float32, so they stay float32 constants (Theano's autocast)
    Row("clip", lambda x: tt.clip(x, -0.5, 0.75), lambda x: np.clip(x, -0.5, 0.75), (U(3, 4),)),
    Row("clip_sym", tt.clip, np.clip, (U(3, 4), U(3, 4, lo=-1, hi=-0.1), U(3, 4, lo=0.1, hi=1))),
    Row("switch", tt.switch, np.where, (B(3, 4), U(3, 4), U(3, 4)), grad_inputs=(1, 2)),
    Row("fma", tt.fma, lambda x, y, z: x * y + z, (U(3, 4), U(3, 4), U(3, 4)), dtypes=NUMERIC),
    Row(
        "cast_int32",
        lambda x: tt.cast(x, "int32"),
        lambda x: x.astype("int32"),
        (U(3, 4, lo=-5, hi=5),),
        grad=False,
    ),
    Row(
        "cast_float32",
        lambda x: tt.cast(x, "float32"),
        lambda x: x.astype("float32"),
        (U(3, 4),),
        dtypes=("float64", "int64"),
        grad=False,
    ),
    Row(
        "astype_64",
        lambda x: x.astype("float64"),
        lambda x: x.astype("float64"),
        (U(3, 4),),
        dtypes=("float32",),
        grad=False,
    ),
    # broadcasting and upcasting
    Row("add_row", tt.add, np.add, (U(3, 4), U(1, 4))),
    Row("mul_col_row", tt.mul, np.multiply, (U(3, 1), U(1, 4))),
    Row("sub_rank", tt.sub, np.subtract, (U(2, 3, 4), U(4))),
    Row(
        "add3",
        lambda a, b, c: a + b + c,
        lambda a, b, c: a + b + c,
        (U(3, 4), U(1, 4), U(3, 1)),
        dtypes=NUMERIC,
    ),
    Row(
        "scalar_ops",
        lambda x: 2 * x - 1.5 / (x * x + 1) + x**2,
        lambda x: 2 * x - 1.5 / (x * x + 1) + x**2,
        (U(3, 4),),
    ),
    Row(
        "composite",
        lambda x, y: tt.Elemwise(_composite())(x, y),
        lambda x, y: np.exp(x) * y + np.tanh(y),
        (U(3, 4), U(3, 4)),
        dtypes=("float64",),
    ),
]


def _composite():
    x, y = ts.float64("x"), ts.float64("y")
    return ts.Composite([x, y], [ts.exp(x) * y + ts.tanh(y)])


CUBE = (U(2, 3, 4),)


def _reduce_rows(name, fn, ref, gens=CUBE, grad=True, dtypes=FLOATS, **kw):
    rows = []
    for axis in (None, 0, 1, (0, 2), -1):
        for keep in (False, True):
            rows.append(
                Row(
                    f"{name}[axis={axis},keep={keep}]",
                    lambda x, a=axis, k=keep: fn(x, axis=a, keepdims=k),
                    lambda x, a=axis, k=keep: ref(x, axis=a, keepdims=k),
                    gens,
                    dtypes=dtypes,
                    grad=grad,
                    **kw,
                )
            )
    return rows


def _max_identity(x, axis=None, keepdims=False):
    """``Max`` with ``empty_identity``: the shift of a log-sum-exp."""
    return tt.math._reduce(Max, x, axis, keepdims, empty_identity=True)


def _np_max_identity(x, axis=None, keepdims=False):
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return np.max(x, axis=axis, keepdims=keepdims, initial=lowest)


REDUCTIONS = [
    *_reduce_rows("sum", tt.sum, np.sum, dtypes=NUMERIC),
    *_reduce_rows("prod", tt.prod, np.prod, dtypes=NUMERIC),
    *_reduce_rows("max", tt.max, np.max, dtypes=NUMERIC),
    *_reduce_rows("min", tt.min, np.min, dtypes=NUMERIC),
    *_reduce_rows("max_identity", _max_identity, _np_max_identity, dtypes=NUMERIC),
    *_reduce_rows(
        "max_identity_of_empty",
        _max_identity,
        _np_max_identity,
        gens=(U(2, 0, 4),),
        grad=False,
        dtypes=NUMERIC,
    ),
    *_reduce_rows("mean", tt.mean, np.mean, dtypes=NUMERIC),
    *_reduce_rows("var", tt.var, np.var),
    *_reduce_rows("std", tt.std, np.std, gens=(U(2, 3, 4, lo=-3, hi=3),)),
    *_reduce_rows(
        "all",
        tt.all,
        np.all,
        gens=(U(2, 3, 4, lo=-1, hi=3),),
        grad=False,
        dtypes=("int32", "bool", "float64"),
    ),
    *_reduce_rows(
        "any",
        tt.any,
        np.any,
        gens=(U(2, 3, 4, lo=-1, hi=1),),
        grad=False,
        dtypes=("int32", "bool", "float64"),
    ),
    Row(
        "prod_zeros",
        lambda x: tt.prod(x, axis=1),
        lambda x: np.prod(x, axis=1),
        (lambda rng, dt: np.array([[0, 2, 3], [1, 0, 0], [2, 3, 4]], dtype=dt),),
    ),
    Row(
        "var_ddof",
        lambda x: tt.var(x, axis=0, ddof=1),
        lambda x: np.var(x, axis=0, ddof=1),
        (U(5, 3),),
    ),
    *[
        Row(
            f"{n}[axis={a},keep={k}]",
            lambda x, f=f, a=a, k=k: f(x, axis=a, keepdims=k),
            lambda x, r=r, a=a, k=k: r(x, axis=a, keepdims=k),
            (U(3, 4, 5),),
            dtypes=NUMERIC,
            grad=False,
        )
        for n, f, r in (("argmax", tt.argmax, np.argmax), ("argmin", tt.argmin, np.argmin))
        for a in (None, 0, 2, -1)
        for k in (False, True)
    ],
]

SHAPE = [
    Row(
        "reshape",
        lambda x: x.reshape((4, 3)),
        lambda x: x.reshape(4, 3),
        (U(3, 4),),
        dtypes=NUMERIC,
    ),
    Row("reshape_-1", lambda x: x.reshape((2, -1, 2)), lambda x: x.reshape(2, -1, 2), (U(3, 4),)),
    Row(
        "reshape_sym",
        lambda x: x.reshape((x.shape[1], x.shape[0])),
        lambda x: x.reshape(x.shape[1], x.shape[0]),
        (U(3, 4),),
    ),
    Row("flatten", lambda x: x.flatten(), lambda x: x.reshape(-1), (U(2, 3, 4),)),
    Row("flatten2", lambda x: tt.flatten(x, 2), lambda x: x.reshape(2, -1), (U(2, 3, 4),)),
    Row("transpose", lambda x: x.T, lambda x: x.T, (U(3, 4),), dtypes=NUMERIC),
    Row(
        "transpose_axes",
        lambda x: x.transpose(1, 2, 0),
        lambda x: x.transpose(1, 2, 0),
        (U(2, 3, 4),),
    ),
    Row(
        "dimshuffle",
        lambda x: x.dimshuffle("x", 1, "x", 0),
        lambda x: x.T[None, :, None, :],
        (U(3, 4),),
    ),
    Row("dimshuffle_drop", lambda x: x.dimshuffle(0, 2), lambda x: x[:, 0, :], (U(3, 1, 4),)),
    Row(
        "join",
        lambda a, b: tt.join(1, a, b),
        lambda a, b: np.concatenate([a, b], 1),
        (U(3, 2), U(3, 4)),
        dtypes=NUMERIC,
    ),
    Row(
        "concatenate",
        lambda a, b, c: tt.concatenate([a, b, c]),
        lambda a, b, c: np.concatenate([a, b, c]),
        (U(2), U(3), U(1)),
    ),
    Row(
        "stack",
        lambda a, b: tt.stack([a, b], axis=1),
        lambda a, b: np.stack([a, b], 1),
        (U(3, 4), U(3, 4)),
    ),
    Row("stack_scalars", lambda a, b: tt.stack([a, b]), lambda a, b: np.stack([a, b]), (U(), U())),
    Row("split", lambda x: tt.split(x, [1, 3], 2, axis=1)[1], lambda x: x[:, 1:], (U(3, 4),)),
    Row(
        "alloc", lambda v: tt.alloc(v, 2, 3, 4), lambda v: np.broadcast_to(v, (2, 3, 4)), (U(3, 1),)
    ),
    Row(
        "fill",
        tt.fill,
        lambda m, v: np.broadcast_to(v, m.shape).astype(v.dtype),
        (U(3, 4), U()),
        grad_inputs=(1,),
    ),
    Row("zeros_like", tt.zeros_like, np.zeros_like, (U(3, 4),), dtypes=NUMERIC, grad=False),
    Row("ones_like", tt.ones_like, np.ones_like, (U(3, 4),), dtypes=NUMERIC, grad=False),
    Row(
        "zeros",
        lambda x: tt.zeros((x.shape[0], 2), dtype=x.dtype) + x[:, 0].dimshuffle(0, "x"),
        lambda x: np.zeros((x.shape[0], 2), x.dtype) + x[:, :1],
        (U(3, 4),),
    ),
    Row(
        "arange",
        lambda n: tt.arange(n),
        lambda n: np.arange(n),
        (I(lo=2, hi=6),),
        dtypes=("int64",),
        grad=False,
    ),
    Row(
        "arange_float",
        lambda x: tt.arange(0.0, 1.0, 0.25) * x,
        lambda x: np.arange(0.0, 1.0, 0.25) * x,
        (U(4),),
        dtypes=("float64",),
    ),
    Row(
        "eye",
        lambda x: tt.eye(3, 4, 1, dtype=x.dtype) * x,
        lambda x: np.eye(3, 4, 1, dtype=x.dtype) * x,
        (U(3, 4),),
    ),
    Row("tile", lambda x: tt.tile(x, (2, 3)), lambda x: np.tile(x, (2, 3)), (U(2, 3),)),
    Row("repeat", lambda x: tt.repeat(x, 3, axis=1), lambda x: np.repeat(x, 3, 1), (U(2, 3),)),
    Row("repeat_flat", lambda x: tt.repeat(x, 2), lambda x: np.repeat(x, 2), (U(2, 3),)),
    Row(
        "repeat_vec",
        lambda x, r: tt.repeat(x, r, axis=0),
        lambda x, r: np.repeat(x, r, 0),
        (U(3, 2), I(3, lo=0, hi=3)),
        grad=False,
    ),
    Row("shape", lambda x: tt.shape(x), lambda x: np.array(x.shape), (U(3, 4),), grad=False),
    Row(
        "shape_i",
        lambda x: tt.shape_i(x, 1) * x,
        lambda x: x.shape[1] * x,
        (U(3, 4),),
        check_dtype=False,
    ),
]

INDEXING = [
    Row("subtensor_slice", lambda x: x[1:, ::2], lambda x: x[1:, ::2], (U(4, 5),), dtypes=NUMERIC),
    Row("subtensor_int", lambda x: x[2], lambda x: x[2], (U(4, 5),)),
    Row("subtensor_neg", lambda x: x[-1, ::-2], lambda x: x[-1, ::-2], (U(4, 5),)),
    Row("subtensor_mixed", lambda x: x[1:3, 0, -2:], lambda x: x[1:3, 0, -2:], (U(4, 3, 5),)),
    Row("subtensor_sym", lambda x, i: x[i:, i], lambda x, i: x[i:, i], (U(4, 5), I(lo=0, hi=3))),
    Row(
        "subtensor_sym_neg_step",
        lambda x, i: x[i::-1],
        lambda x, i: x[i::-1],
        (U(6), I(lo=-4, hi=5)),
    ),
    Row("subtensor_newaxis", lambda x: x[None, 1:, None], lambda x: x[None, 1:, None], (U(3, 4),)),
    Row("subtensor_ellipsis", lambda x: x[..., 1], lambda x: x[..., 1], (U(2, 3, 4),)),
    Row("subtensor_scalar", lambda x: x[1, 2], lambda x: x[1, 2], (U(3, 4),)),
    Row(
        "set_subtensor",
        lambda x, y: tt.set_subtensor(x[1:, 2], y),
        lambda x, y: _set(x, (slice(1, None), 2), y),
        (U(4, 5), U(3)),
    ),
    Row(
        "inc_subtensor",
        lambda x, y: tt.inc_subtensor(x[:, 1:3], y),
        lambda x, y: _inc(x, (slice(None), slice(1, 3)), y),
        (U(4, 5), U(1, 2)),
    ),
    Row("take_rows", lambda x, i: x[i], lambda x, i: x[i], (U(4, 3), I(5, lo=-4, hi=4))),
    Row(
        "take_fn",
        lambda x, i: tt.take(x, i, axis=1),
        lambda x, i: np.take(x, i, axis=1),
        (U(4, 3), I(2, 2, lo=0, hi=3)),
    ),
    Row(
        "adv_inc1",
        lambda x, y, i: tt.inc_subtensor(x[i], y),
        lambda x, y, i: _inc_at(x, i, y),
        (U(4, 3), U(5, 3), I(5, lo=0, hi=4)),
    ),
    Row(
        "adv_set1",
        lambda x, y, i: tt.set_subtensor(x[i], y),
        lambda x, y, i: _set(x, i, y),
        (U(4, 3), U(3), lambda rng, dt: np.array([2, 0])),
    ),
    Row(
        "adv_two_arrays",
        lambda x, i, j: x[i, j],
        lambda x, i, j: x[i, j],
        (U(4, 5), I(3, lo=0, hi=4), I(3, lo=0, hi=5)),
    ),
    Row(
        "adv_slice_array",
        lambda x, i: x[1:, i],
        lambda x, i: x[1:, i],
        (U(4, 5), I(2, 2, lo=0, hi=5)),
    ),
    Row(
        "adv_bool_mask", lambda x, m: x[m], lambda x, m: x[m], (U(4, 5), B(4, 5)), grad_inputs=(0,)
    ),
    Row(
        "adv_inc_general",
        lambda x, y, i: tt.inc_subtensor(x[:, i], y),
        lambda x, y, i: _inc_at(x, (slice(None), i), y),
        (U(3, 4), U(3, 5), I(5, lo=0, hi=4)),
    ),
    # A value of one row whose type does not declare it (unbroadcast), which numpy spreads
    # when the function runs: its gradient sums over the rows it filled (SumToShape).
    Row(
        "set_subtensor_spread",
        lambda x, y: tt.set_subtensor(x[1:], tt.unbroadcast(y, 0)),
        lambda x, y: _set(x, slice(1, None), y),
        (U(4, 5), U(1, 5)),
    ),
    Row(
        "adv_inc1_spread",
        lambda x, y, i: tt.inc_subtensor(x[i], tt.unbroadcast(y, 0, 1)),
        lambda x, y, i: _inc_at(x, i, np.broadcast_to(y, (5, 3))),
        (U(4, 3), U(1, 1), I(5, lo=0, hi=4)),
    ),
    Row(
        "alloc_spread",
        lambda v: tt.alloc(tt.unbroadcast(v, 1), 2, 3, 4),
        lambda v: np.broadcast_to(v, (2, 3, 4)),
        (U(3, 1),),
    ),
]


def _set(x, idx, y):
    out = x.copy()
    out[idx] = y
    return out


def _inc(x, idx, y):
    out = x.copy()
    out[idx] += y
    return out


def _inc_at(x, idx, y):
    out = x.copy()
    np.add.at(out, idx, y)
    return out


DOT = [
    Row("dot_mm", tt.dot, np.dot, (U(3, 4), U(4, 2)), dtypes=NUMERIC),
    Row("dot_mv", tt.dot, np.dot, (U(3, 4), U(4))),
    Row("dot_vm", tt.dot, np.dot, (U(4), U(4, 2))),
    Row("dot_vv", tt.dot, np.dot, (U(4), U(4)), dtypes=NUMERIC),
    Row("dot_scalar", tt.dot, np.dot, (U(), U(3, 4))),
    Row("matmul_op", lambda a, b: a @ b, lambda a, b: a @ b, (U(3, 4), U(4, 2))),
    # numpy's matmul beyond two dimensions (batch axes broadcast), not Theano's dot
    Row("matmul_batched", lambda a, b: a @ b, np.matmul, (U(2, 3, 4), U(2, 4, 5))),
    Row("matmul_broadcast_batch", lambda a, b: a @ b, np.matmul, (U(1, 3, 4), U(2, 4, 5))),
    Row("matmul_vector_batch", tt.matmul, np.matmul, (U(4), U(2, 4, 5))),
    Row("matmul_batch_vector", tt.matmul, np.matmul, (U(2, 3, 4), U(4))),
    Row(
        "dot_mixed_dtype",
        lambda a, b: tt.dot(a, tt.cast(b, "float32")),
        lambda a, b: np.dot(a, b.astype("float32")),
        (U(3, 4), U(4, 2)),
        dtypes=("float64",),
        grad=False,
    ),  # the float32 cast makes finite differences meaningless
    Row("outer", tt.outer, np.outer, (U(3), U(4))),
]


def C(value):
    """A fixed int64 value whatever the row's dtype (an ifelse condition)."""
    return lambda rng, dtype: np.asarray(value, dtype="int64")


def CLOSE(*shape):
    """Differences that are tiny (close), small, or large, in random places."""

    def gen(rng, dtype):
        scale = rng.choice([0.0, 1e-9, 1e-6, 1e-3, 1.0], size=shape)
        return (scale * rng.uniform(-1, 1, size=shape)).astype(dtype)

    return gen


def _mode_rows(name, fn, ref, axes, gens, dtypes=NUMERIC, grad=True):
    return [
        Row(
            f"{name}[axis={a}]",
            lambda x, a=a: fn(x, axis=a),
            lambda x, a=a: ref(x, axis=a),
            gens,
            dtypes=dtypes,
            grad=grad,
        )
        for a in axes
    ]


def _max_and_argmax(x, axis, keepdims):
    if axis is None or isinstance(axis, int):
        return np.max(x, axis=axis, keepdims=keepdims), np.argmax(x, axis=axis, keepdims=keepdims)
    kept = [d for d in range(x.ndim) if d not in axis]
    moved = x.transpose(*kept, *axis).reshape([x.shape[d] for d in kept] + [-1])
    idx = np.argmax(moved, axis=-1)
    if keepdims:
        idx = np.expand_dims(idx, axis)
    return np.max(x, axis=axis, keepdims=keepdims), idx


EXTRAS = [
    *_mode_rows("cumsum", tt.cumsum, np.cumsum, (None, 0, 1, -1), (U(3, 4),)),
    *_mode_rows("cumsum3", tt.cumsum, np.cumsum, (None, 1), (U(2, 3, 4),), dtypes=FLOATS),
    *_mode_rows("cumprod", tt.cumprod, np.cumprod, (None, 0, -1), (NZ(3, 4),)),
    *_mode_rows("sort", tt.sort, np.sort, (-1, 0, None), (U(3, 4, lo=-5, hi=5),)),
    *_mode_rows("sort3", tt.sort, np.sort, (1,), (U(2, 3, 4),), dtypes=FLOATS),
    *_mode_rows("argsort", tt.argsort, np.argsort, (-1, 0, None), (U(3, 4),), grad=False),
    Row("diag_vector", tt.diag, np.diag, (U(3),), dtypes=NUMERIC),
    Row("diag_vector_k", lambda v: tt.diag(v, -2), lambda v: np.diag(v, -2), (U(3),)),
    Row("diag_matrix", tt.diag, np.diag, (U(3, 3),), dtypes=NUMERIC),
    Row("diag_wide_k", lambda m: tt.diag(m, 2), lambda m: np.diag(m, 2), (U(3, 5),)),
    Row("diag_tall_neg", lambda m: tt.diag(m, -1), lambda m: np.diag(m, -1), (U(5, 3),)),
    Row(
        "diagonal_3d",
        lambda x: tt.diagonal(x, 1, 0, 2),
        lambda x: np.diagonal(x, 1, 0, 2),
        (U(3, 2, 4),),
    ),
    Row("tril", tt.tril, np.tril, (U(3, 4),), dtypes=NUMERIC),
    Row("tril_k", lambda m: tt.tril(m, 1), lambda m: np.tril(m, 1), (U(4, 3),)),
    Row("triu", tt.triu, np.triu, (U(3, 4),), dtypes=NUMERIC),
    Row("triu_k_batched", lambda m: tt.triu(m, -1), lambda m: np.triu(m, -1), (U(2, 3, 4),)),
    Row(
        "tri",
        lambda x: tt.tri(3, 4, 1, dtype=x.dtype) * x,
        lambda x: np.tri(3, 4, 1, dtype=x.dtype) * x,
        (U(3, 4),),
    ),
    Row(
        "isclose",
        lambda a, d: tt.isclose(a, a + d),
        lambda a, d: np.isclose(a, a + d),
        (U(3, 4), CLOSE(3, 4)),
        grad=False,
    ),
    Row(
        "isclose_special",
        lambda a, b: tt.isclose(a, b, equal_nan=True),
        lambda a, b: np.isclose(a, b, equal_nan=True),
        (
            lambda rng, dt: np.array([np.inf, -np.inf, np.nan, np.nan, 1.0, np.inf], dt),
            lambda rng, dt: np.array([np.inf, np.inf, np.nan, 1.0, np.inf, 1.0], dt),
        ),
        grad=False,
    ),
    Row(
        "isclose_int",
        lambda a, b: tt.isclose(a, b, atol=1),
        lambda a, b: np.isclose(a, b, atol=1),
        (U(3, 4, lo=-3, hi=3), U(3, 4, lo=-3, hi=3)),
        dtypes=("int32", "int64"),
        grad=False,
    ),
    Row(
        "allclose",
        lambda a, d: tt.allclose(a, a + d, atol=1e-5),
        lambda a, d: np.allclose(a, a + d, atol=1e-5),
        (U(3, 4), CLOSE(3, 4)),
        grad=False,
    ),
    *[
        Row(
            f"max_and_argmax[{k},axis={a},keep={keep}]",
            lambda x, k=k, a=a, keep=keep: tt.max_and_argmax(x, axis=a, keepdims=keep)[k],
            lambda x, k=k, a=a, keep=keep: _max_and_argmax(x, a, keep)[k],
            (U(2, 3, 4),),
            dtypes=NUMERIC,
            grad=k == 0,
        )
        for k in (0, 1)
        for a, keep in ((None, False), (1, True), ((0, 2), False), ((0, 2), True))
    ],
    Row(
        "squeeze_axis",
        lambda x: tt.squeeze(x, axis=0),
        lambda x: np.squeeze(x, axis=0),
        (U(1, 3, 1),),
        dtypes=NUMERIC,
    ),
    Row("squeeze_all", tt.squeeze, np.squeeze, (U(1, 3, 1),)),
    Row(
        "expand_dims",
        lambda x: tt.expand_dims(x, (0, -1)),
        lambda x: np.expand_dims(x, (0, -1)),
        (U(3, 4),),
    ),
    Row("flip", tt.flip, np.flip, (U(3, 4),), dtypes=NUMERIC),
    Row("flip_axis", lambda x: tt.flip(x, 1), lambda x: np.flip(x, 1), (U(2, 3, 4),)),
    Row(
        "shape_padleft",
        lambda x: tt.shape_padleft(x, 2),
        lambda x: x[None, None],
        (U(3, 4),),
        dtypes=NUMERIC,
    ),
    Row("shape_padright", tt.shape_padright, lambda x: x[..., None], (U(3, 4),)),
    Row("shape_padaxis", lambda x: tt.shape_padaxis(x, 1), lambda x: x[:, None], (U(3, 4),)),
    Row(
        "unbroadcast",
        lambda x: tt.unbroadcast(x, 0) * 2,
        lambda x: x * 2,
        (U(1, 4),),
        dtypes=NUMERIC,
    ),
    Row(
        "addbroadcast",
        lambda x, y: tt.addbroadcast(tt.unbroadcast(x, 0), 0) + y,
        lambda x, y: x + y,
        (U(1, 4), U(3, 4)),
    ),
    Row(
        "patternbroadcast",
        lambda x, y: tt.patternbroadcast(tt.unbroadcast(x, 1), (False, True)) * y,
        lambda x, y: x * y,
        (U(3, 1), U(3, 4)),
    ),
    Row(
        "specify_shape",
        lambda x: tt.specify_shape(x, (3, None)) * 2,
        lambda x: x * 2,
        (U(3, 4),),
        dtypes=NUMERIC,
    ),
    Row(
        "specify_shape_sym",
        lambda x, y: tt.specify_shape(x, y.shape) + y,
        lambda x, y: x + y,
        (U(3, 4), U(3, 4)),
    ),
    *[
        Row(
            f"ifelse[{c}]",
            lambda c, a, b: tt_ifelse(c, a, b),
            lambda c, a, b: (a if c else b).copy(),
            (C(c), U(3, 4), U(3, 4)),
            dtypes=NUMERIC,
            grad_inputs=(1, 2),
        )
        for c in (0, 1)
    ],
    *[
        Row(
            f"ifelse_shapes[{c}]",
            lambda c, a, b: tt_ifelse(tt.gt(c, 0), a, b),
            lambda c, a, b: (a if c > 0 else b).copy(),
            (C(c), U(3, 4), U(2, 4)),
            grad_inputs=(1, 2),
        )
        for c in (0, 1)
    ],
]


def tt_ifelse(c, a, b):
    from theano_dag.ifelse import ifelse

    return ifelse(c, a, b)


def ZEROS_AND(gen):
    """``gen``'s values with every third entry set to exactly 0."""

    def wrapped(rng, dtype):
        v = np.array(gen(rng, dtype))
        v.flat[::3] = 0
        return v

    return wrapped


def _complex_ref(a, b):
    return (a + 1j * b).astype(np.result_type(a.dtype, np.complex64))


SPECIAL = [
    _unary("arcsinh", np.arcsinh, dtypes=NUMERIC),
    _unary("arccosh", np.arccosh, U(3, 4, lo=1.1, hi=3.0)),
    _unary("arctanh", np.arctanh, UNIT),
    _unary("deg2rad", np.deg2rad, U(3, 4, lo=-200, hi=200), dtypes=NUMERIC),
    _unary("rad2deg", np.rad2deg, dtypes=NUMERIC),
    _unary("erfinv", special.erfinv, UNIT),
    _unary("erfcinv", special.erfcinv, U(3, 4, lo=0.1, hi=1.9)),
    _unary("erfcx", special.erfcx, U(3, 4, lo=-1.5, hi=4.0), dtypes=NUMERIC),
    _unary(
        "erfcx_deriv",
        lambda x: (2 * x * special.erfcx(x) - 2 / np.sqrt(np.pi)).astype(x.dtype),
        U(3, 4, lo=-1.5, hi=4.0),
    ),
    _unary("log_erfc", lambda x: np.log(special.erfc(x)), U(3, 4, lo=-2.0, hi=5.0)),
    # its terms are ExpSub's: exp(x - max), 1 at the max
    _unary("logsumexp", lambda x: np.asarray(special.logsumexp(x), x.dtype)),
    _unary("gamma", special.gamma, U(3, 4, lo=1.0, hi=3.0), dtypes=NUMERIC),
    _unary("gammaln", special.gammaln, U(3, 4, lo=1.0, hi=3.0), dtypes=NUMERIC),
    _unary("psi", special.psi, POS),
    # scipy's polygamma computes in float64 whatever its input; no gradient (Theano's)
    _unary("tri_gamma", lambda x: special.polygamma(1, x).astype(x.dtype), POS, grad=False),
    _unary("i0", special.i0, dtypes=NUMERIC),
    _unary("i1", special.i1),
    _unary("j0", special.j0),
    _unary("j1", special.j1, dtypes=NUMERIC),
    _unary("log1mexp", lambda x: np.log(-np.expm1(x)), U(3, 4, lo=-3.0, hi=-0.1)),
    Row("xlogx", xlogx, lambda x: special.xlogy(x, x), (POS,)),
    Row(
        "xlogx_zeros",
        xlogx,
        lambda x: special.xlogy(x, x),
        (ZEROS_AND(POS),),
        grad=False,
    ),
    _binary("logaddexp", np.logaddexp),
    Row("xlogy0", xlogy0, special.xlogy, (ZEROS_AND(POS), POS), grad_inputs=(1,)),
    *[
        _binary(
            n, getattr(special, n), (U(3, 4, lo=0.0, hi=3.0), POS), dtypes=FLOATS, grad_inputs=(1,)
        )
        for n in ("jv", "iv")
    ],
    *[
        _binary(n, getattr(special, n), (POS, POS), dtypes=FLOATS, grad_inputs=(1,))
        for n in ("gammainc", "gammaincc")
    ],
    _binary(
        "chi2sf",
        # float64 whatever the inputs, as Theano's (upgrade_to_float64)
        lambda x, k: special.gammaincc(np.float64(k) / 2, np.float64(x) / 2),
        (POS, U(3, 4, lo=1.0, hi=4.0)),
        dtypes=FLOATS,
        grad=False,
    ),
    Row("complex", tt.complex, _complex_ref, (U(3, 4), U(3, 4)), grad=False),
    Row(
        "complex_real_imag",
        lambda a, b: tt.real(tt.complex(a, b) * tt.complex(b, a)) + tt.imag(tt.complex(a, b)),
        lambda a, b: np.real(_complex_ref(a, b) * _complex_ref(b, a)) + b,
        (U(3, 4), U(3, 4)),
    ),
    Row(
        "conj_angle",
        lambda a, b: tt.angle(tt.conj(tt.complex(a, b))),
        # angle is float64 whatever its input (Theano's type)
        lambda a, b: np.angle(np.conj(_complex_ref(a, b))).astype("float64"),
        (U(3, 4), NZ(3, 4)),
    ),
    Row(
        "complex_from_polar",
        tt.complex_from_polar,
        lambda r, t: (r * np.exp(1j * t)).astype(np.result_type(r.dtype, np.complex64)),
        (POS, U(3, 4)),
        grad=False,
    ),
    Row(
        "complex_from_polar_abs_real",
        lambda r, t: tt.abs(tt.complex_from_polar(r, t)) * tt.real(tt.complex_from_polar(r, t)),
        lambda r, t: r * r * np.cos(t),
        (POS, U(3, 4)),
    ),
]


def PERMS(*shape):
    """Random permutations of ``range(shape[-1])`` along the last axis (int64)."""
    return lambda rng, dtype: np.argsort(rng.random(shape), axis=-1)


def SORTED(*shape, lo=-2.0, hi=2.0):
    """``U``'s values sorted (searchsorted's haystack)."""
    return lambda rng, dtype: np.sort(U(*shape, lo=lo, hi=hi)(rng, dtype))


def FEW(*shape):
    """Values among a few, so that some repeat (unique's input)."""
    return lambda rng, dtype: rng.choice([-1.5, 0.0, 0.5, 2.0], size=shape).astype(dtype)


def _permute_rows(x, y, inverse):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        if inverse:
            out[i, y[i]] = x[i]
        else:
            out[i] = x[i, y[i]]
    return out


def _unravel(i, dims, k):
    return np.unravel_index(i, tuple(dims))[k]


ARRAYS = [
    Row("mean_op", lambda x: Mean(1)(x), lambda x: np.mean(x, axis=1), CUBE, dtypes=NUMERIC),
    Row("mean_op_all", lambda x: Mean()(x), np.mean, (U(3, 4),)),
    Row(
        "tri_op",
        lambda x: Tri(x.dtype)(3, 4, 1) * x,
        lambda x: np.tri(3, 4, 1, dtype=x.dtype) * x,
        (U(3, 4),),
        dtypes=NUMERIC,
    ),
    Row(
        "tri_op_sym",
        lambda n, m: Tri("int8")(n, m, -1),
        lambda n, m: np.tri(n, m, -1, dtype="int8"),
        (I(lo=2, hi=5), I(lo=1, hi=5)),
        dtypes=("int64",),
        grad=False,
    ),
    # no gradient, as in Theano (which input flows is known only when the function runs)
    Row("default", tt.default, lambda x, d: x.copy(), (U(3, 4), U(3, 4)), grad=False),
    Row(
        "assert",
        lambda x: Assert("x must be below 3")(x, tt.all(x < 3)) * 2,
        lambda x: x * 2,
        (U(3, 4),),
        dtypes=NUMERIC,
    ),
    Row(
        "alloc_empty_filled",
        lambda x: tt.set_subtensor(AllocEmpty(x.dtype)(x.shape[0], x.shape[1])[:], x),
        np.copy,
        (U(3, 4),),
        dtypes=NUMERIC,
    ),
    Row(
        "scalar_from_tensor",
        lambda x: tensor_from_scalar(scalar_from_tensor(x)) * x,
        lambda x: x * x,
        (U(),),
        dtypes=NUMERIC,
    ),
    Row(
        "nonzero",
        lambda x: tt.nonzero(x)[1],
        lambda x: np.nonzero(x)[1],
        (U(3, 4, lo=-1, hi=1),),
        dtypes=NUMERIC,
        grad=False,
    ),
    Row(
        "nonzero_matrix",
        lambda x: tt.nonzero(x, return_matrix=True),
        lambda x: np.array(np.nonzero(x)),
        (U(3, 4, lo=-1, hi=1),),
        dtypes=("int32", "float64", "bool"),
        grad=False,
    ),
    Row("flatnonzero", tt.flatnonzero, np.flatnonzero, (U(3, 4, lo=-1, hi=1),), grad=False),
    Row(
        "nonzero_values",
        tt.nonzero_values,
        lambda x: x[np.nonzero(x)],
        (ZEROS_AND(U(3, 4)),),
        dtypes=NUMERIC,
        grad=False,  # a step of finite differences moves entries off 0: the length changes
    ),
    Row("nonzero_values_grad", tt.nonzero_values, lambda x: x[np.nonzero(x)], (U(3, 4),)),
    Row(
        "choose",
        tt.choose,
        np.choose,
        (I(3, 4, lo=0, hi=3), U(3, 3, 4)),
        dtypes=NUMERIC,
    ),
    Row(
        "choose_listed",
        lambda a, b, c: tt.choose(a, [b, c]),
        lambda a, b, c: np.choose(a, [b, c]),
        (I(3, 4, lo=0, hi=2), U(3, 4), U(1, 4)),
        dtypes=NUMERIC,
    ),
    *[
        Row(
            f"permute_row_elements[{inv}]",
            lambda x, y, inv=inv: tt.permute_row_elements(x, y, inv),
            lambda x, y, inv=inv: _permute_rows(x, y, inv),
            (U(3, 4), PERMS(3, 4)),
            dtypes=NUMERIC,
        )
        for inv in (0, 1)
    ],
    *[
        Row(
            f"permute_row_elements_bcast[{inv},{which}]",
            lambda x, y, inv=inv: tt.permute_row_elements(x, y, inv),
            lambda x, y, inv=inv: _permute_rows(*np.broadcast_arrays(x, y), inv),
            gens,
        )
        for inv in (0, 1)
        for which, gens in (("y", (U(3, 4), PERMS(4))), ("x", (U(1, 4), PERMS(3, 4))))
    ],
    Row(
        "inverse_permutation",
        tt.inverse_permutation,
        lambda p: np.argsort(p, axis=-1),
        (PERMS(3, 5),),
        dtypes=("int64",),
        grad=False,
    ),
    # extra_ops
    Row("bartlett", tt.bartlett, np.bartlett, (I(lo=1, hi=7),), dtypes=("int64",), grad=False),
    Row(
        "broadcast_to",
        lambda x: tt.broadcast_to(x, (2, 3, 4)),
        lambda x: np.broadcast_to(x, (2, 3, 4)),
        (U(3, 1),),
        dtypes=NUMERIC,
    ),
    Row(
        "broadcast_to_sym",
        lambda x, y: tt.broadcast_to(x, y.shape),
        lambda x, y: np.broadcast_to(x, y.shape),
        (U(4), U(3, 4)),
        grad_inputs=(0,),
    ),
    Row("cpu_contiguous", lambda x: tt.cpu_contiguous(x.T), lambda x: x.T.copy(), (U(3, 4),)),
    *[
        Row(
            f"diff[n={n},axis={a}]",
            lambda x, n=n, a=a: tt.diff(x, n, a),
            lambda x, n=n, a=a: np.diff(x, n, a),
            (U(3, 5),),
            dtypes=NUMERIC,
        )
        for n, a in ((1, -1), (2, 1), (1, 0), (3, 1))
    ],
    Row(
        "fill_diagonal",
        tt.fill_diagonal,
        lambda a, v: _fill_diag(a, v, 0),
        (U(3, 4), U()),
        dtypes=NUMERIC,
    ),
    Row("fill_diagonal_tall", tt.fill_diagonal, lambda a, v: _fill_diag(a, v, 0), (U(5, 3), U())),
    *[
        Row(
            f"fill_diagonal_offset[{k}]",
            lambda a, v, k=k: tt.fill_diagonal_offset(a, v, k),
            lambda a, v, k=k: _fill_diag(a, v, k),
            (U(3, 4), U()),
            dtypes=NUMERIC,
        )
        for k in (-2, 0, 1, 3)
    ],
    Row(
        "ravel_multi_index",
        lambda i, j: tt.ravel_multi_index((i, j), (3, 4)),
        lambda i, j: np.ravel_multi_index((i, j), (3, 4)),
        (I(5, lo=0, hi=3), I(5, lo=0, hi=4)),
        dtypes=("int64",),
        grad=False,
    ),
    Row(
        "ravel_multi_index_F",
        lambda i, j: tt.ravel_multi_index((i, j), (3, 4), order="F"),
        lambda i, j: np.ravel_multi_index((i, j), (3, 4), order="F"),
        (I(2, 3, lo=0, hi=3), I(2, 3, lo=0, hi=4)),
        dtypes=("int64",),
        grad=False,
    ),
    *[
        Row(
            f"unravel_index[{k},{order}]",
            lambda i, k=k, o=order: tt.unravel_index(i, (3, 4, 2), order=o)[k],
            lambda i, k=k, o=order: np.unravel_index(i, (3, 4, 2), order=o)[k],
            (I(2, 5, lo=0, hi=24),),
            dtypes=("int64",),
            grad=False,
        )
        for k in (0, 2)
        for order in ("C", "F")
    ],
    *[
        Row(
            f"searchsorted[{side}]",
            lambda x, v, side=side: tt.searchsorted(x, v, side=side),
            lambda x, v, side=side: np.searchsorted(x, v, side=side),
            (SORTED(6, lo=-3, hi=3), U(3, 4, lo=-4, hi=4)),
            dtypes=NUMERIC,
            grad=False,
        )
        for side in ("left", "right")
    ],
    Row(
        "searchsorted_sorter",
        lambda x, v: tt.searchsorted(x, v, sorter=tt.argsort(x)),
        lambda x, v: np.searchsorted(x, v, sorter=np.argsort(x)),
        (U(6), U(5)),
        grad=False,
    ),
    *[
        Row(
            f"unique[{k},axis={axis}]",
            lambda x, k=k, axis=axis: tt.unique(x, True, True, True, axis=axis)[k],
            lambda x, k=k, axis=axis: _unique(x, axis)[k],
            (FEW(3, 4),),
            dtypes=NUMERIC,
            grad=False,
        )
        for k in range(4)
        for axis in (None, 1)
    ],
    Row("unique_values", tt.unique, np.unique, (FEW(3, 4),), grad=False),
]


def _fill_diag(a, v, k):
    out = a.copy()
    rows = np.arange(out.shape[0])
    cols = rows + k
    keep = (cols >= 0) & (cols < out.shape[1])
    out[rows[keep], cols[keep]] = v
    return out


def _unique(x, axis):
    return np.unique(x, True, True, True, axis=axis)


def SPD(n):
    """A symmetric positive definite ``n x n`` matrix, well conditioned."""

    def gen(rng, dtype):
        m = rng.uniform(-1, 1, size=(n, n))
        return (m @ m.T + n * np.eye(n)).astype(dtype)

    return gen


def WELL(*shape):
    """Random square matrices (a stack when ``shape`` has 3 entries) made well conditioned
    by a large diagonal."""

    def gen(rng, dtype):
        m = rng.uniform(-1, 1, size=shape) + shape[-1] * np.eye(shape[-1])
        return m.astype(dtype)

    return gen


def _lin(name, build, ref, gens, **kw):
    kw.setdefault("rtol32", 1e-3)
    return Row(name, build, ref, gens, **kw)


def _sym(x):
    """The symmetric matrix whose lower triangle is ``x``'s (what eigh reads)."""
    return tt.tril(x) + tt.tril(x, -1).T


def _np_sym(x):
    return np.tril(x) + np.tril(x, -1).T


LINALG = [
    # a hint (theano.sandbox.linalg's psd): the value itself, the identity's gradient; the
    # solve with it goes through a Cholesky factor on the engines that rewrite
    _lin("hint_psd", lambda a: hints.psd(a) * 2, lambda a: a * 2, (SPD(4),)),
    _lin(
        "hint_psd_solve",
        lambda a, b: la.solve(hints.psd(a), b),
        lambda a, b: np.linalg.solve(a, b),
        (SPD(4), U(4, 2)),
        grad_inputs=(1,),
    ),
    _lin("cholesky", la.cholesky, np.linalg.cholesky, (SPD(4),)),
    _lin(
        "cholesky_upper",
        lambda x: la.cholesky(x, lower=False),
        lambda x: np.linalg.cholesky(x).T,
        (SPD(4),),
    ),
    _lin("matrix_inverse", la.matrix_inverse, np.linalg.inv, (WELL(4, 4),)),
    _lin("pinv", la.pinv, np.linalg.pinv, (U(3, 5),)),
    _lin("det", la.det, np.linalg.det, (WELL(4, 4),)),
    _lin("adjugate", la.adjugate, lambda x: np.linalg.det(x) * np.linalg.inv(x), (WELL(4, 4),)),
    *[
        _lin(
            f"slogdet[{k}]",
            lambda x, k=k: la.slogdet(x)[k],
            lambda x, k=k: np.linalg.slogdet(x)[k],
            (WELL(4, 4) if k else U(4, 4),),
            grad=k == 1,
        )
        for k in (0, 1)
    ],
    *[
        _lin(
            f"solve[{assume},{b_shape}]",
            lambda a, b, assume=assume: la.solve(a, b, assume_a=assume),
            lambda a, b: np.linalg.solve(a, b if b.ndim == 2 else b[:, None]).reshape(b.shape),
            (SPD(4) if assume == "pos" else WELL(4, 4), U(*b_shape)),
        )
        for assume in ("gen", "pos")
        for b_shape in ((4,), (4, 2))
    ],
    *[
        _lin(
            f"solve_triangular[lower={lower},trans={trans},unit={unit}]",
            lambda a, b, lower=lower, trans=trans, unit=unit: la.solve_triangular(
                a, b, trans=trans, lower=lower, unit_diagonal=unit
            ),
            lambda a, b, lower=lower, trans=trans, unit=unit: scipy_linalg.solve_triangular(
                a, b, trans=trans, lower=lower, unit_diagonal=unit
            ),
            (WELL(4, 4), U(4, 3)),
        )
        for lower, trans, unit in ((True, 0, False), (False, 0, False), (True, 1, True))
    ],
    _lin(
        "cho_solve",
        lambda c, b: la.cho_solve((la.cholesky(c), True), b),
        lambda c, b: np.linalg.solve(c, b),
        (SPD(4), U(4, 2)),
    ),
    *[
        _lin(
            f"eigh[{k},{uplo}]",
            # the squared eigenvectors: free of LAPACK's choice of signs
            lambda x, k=k, uplo=uplo: la.eigh(x, uplo)[k] ** (k + 1),
            lambda x, k=k, uplo=uplo: np.linalg.eigh(x, uplo)[k] ** (k + 1),
            (SPD(4),),
            # finite differences move one entry: eigh reads only one triangle
        )
        for k in (0, 1)
        for uplo in ("L", "U")
    ],
    _lin("eigvalsh", lambda x: la.eigvalsh(x), np.linalg.eigvalsh, (SPD(4),)),
    *[
        _lin(
            f"generalized_eigh[{k}]",
            lambda a, b, k=k: la.generalized_eigh(_sym(a), _sym(b))[k] ** (k + 1),
            lambda a, b, k=k: scipy_linalg.eigh(_np_sym(a), _np_sym(b))[k] ** (k + 1),
            (SPD(4), SPD(4)),
            grad=k == 0,  # the eigenvectors have none
        )
        for k in (0, 1)
    ],
    *[
        _lin(
            f"eig[{k}]",
            lambda x, k=k: la.eig(x)[k] ** (k + 1),
            lambda x, k=k: np.linalg.eig(x)[k] ** (k + 1),
            (SPD(4),),
            grad=False,  # none, as in Theano
        )
        for k in (0, 1)
    ],
    *[
        _lin(
            f"svd[{k},full={full}]",
            # |u| and |vt|: free of LAPACK's choice of signs
            lambda x, k=k, full=full: abs(la.svd(x, full)[k]),
            lambda x, k=k, full=full: abs(np.linalg.svd(x, full)[k]),
            (U(5, 3),),
            grad=k == 1,
        )
        for k in (0, 1, 2)
        for full in (True, False)
    ],
    _lin(
        "svd_values",
        lambda x: la.svd(x, compute_uv=False),
        lambda x: np.linalg.svd(x, compute_uv=False),
        (U(3, 5),),
    ),
    *[
        _lin(
            f"qr[{k},{mode}]",
            lambda x, k=k, mode=mode: abs(la.qr(x, mode)[k]),
            lambda x, k=k, mode=mode: abs(np.linalg.qr(x, mode)[k]),
            (U(5, 3),),
            grad=False,  # none, as in Theano
        )
        for k in (0, 1)
        for mode in ("reduced", "complete")
    ],
    _lin(
        "qr_r",
        lambda x: abs(la.qr(x, "r")),
        lambda x: abs(np.linalg.qr(x, "r")),
        (U(3, 5),),
        grad=False,
    ),
    _lin("expm", la.expm, scipy_linalg.expm, (U(4, 4, lo=-1, hi=1),)),
    _lin(
        "tensorinv",
        lambda a: la.tensorinv(a, ind=1),
        lambda a: np.linalg.tensorinv(a, ind=1),
        (lambda rng, dt: WELL(4, 4)(rng, dt).reshape(4, 2, 2),),
        grad=False,  # none, as in Theano
    ),
    _lin(
        "tensorsolve",
        la.tensorsolve,
        np.linalg.tensorsolve,
        (lambda rng, dt: WELL(4, 4)(rng, dt).reshape(2, 2, 4), U(2, 2)),
        grad=False,  # none, as in Theano
    ),
    _lin(
        "tensorsolve_axes",
        lambda a, b: la.tensorsolve(a, b, axes=(0,)),
        lambda a, b: np.linalg.tensorsolve(a, b, axes=(0,)),
        (lambda rng, dt: WELL(6, 6)(rng, dt).reshape(2, 6, 3), U(6)),
        grad=False,
    ),
    *[
        _lin(
            f"lstsq[{k}]",
            lambda a, b, k=k: la.lstsq()(a, b, -1)[k],
            lambda a, b, k=k: np.linalg.lstsq(a, b, rcond=-1)[k],
            (U(5, 3), U(5, 2)),
            grad=False,  # none, as in Theano
            check_dtype=k != 2,  # the rank: numpy's int32 on some platforms, int64 here
        )
        for k in range(4)
    ],
    _lin("trace", la.trace, np.trace, (U(4, 4),)),
    _lin("kron", la.kron, np.kron, (U(2, 3), U(3, 2))),
    _lin("matrix_dot", la.matrix_dot, lambda a, b, c: a @ b @ c, (U(2, 3), U(3, 4), U(4, 2))),
    *[
        _lin(
            f"matrix_power[{n}]",
            lambda m, n=n: la.matrix_power(m, n),
            lambda m, n=n: np.linalg.matrix_power(m, n),
            (WELL(3, 3),),
        )
        for n in (0, 3, -2)
    ],
    *[
        _lin(
            f"norm[{o}]",
            lambda x, o=o: la.norm(x, o),
            lambda x, o=o: np.linalg.norm(x, o),
            (NZ(4, 3),),
        )
        for o in (None, "fro", 1, -1, np.inf, 2, "nuc")
    ],
    *[
        _lin(
            f"norm_vector[{o}]",
            lambda x, o=o: la.norm(x, o),
            lambda x, o=o: np.linalg.norm(x, o),
            (NZ(5),),
        )
        for o in (None, 1, 3, np.inf, -np.inf)
    ],
]


def _as(ref):
    """``ref``'s value in its first input's dtype (the loop references give float64)."""
    return lambda x, *rest: np.asarray(ref(x, *rest)).astype(x.dtype)


def _np_anti_diagonals(x, i0, i1):
    """``out[.., r, .., c, ..] = x[.., r + n1 - 1 - c, .., c, ..]``, entry by entry."""
    n0, n1 = x.shape[i0], x.shape[i1]
    shape = list(x.shape)
    shape[i0] = n0 - n1 + 1
    out = np.empty(shape, x.dtype)
    for idx in np.ndindex(*shape):
        src = list(idx)
        src[i0] = idx[i0] + n1 - 1 - idx[i1]
        out[idx] = x[tuple(src)]
    return out


def _np_inc_anti_diagonals(x, a):
    """``x`` (a matrix) with ``a`` added at ``[r + n1 - 1 - c, c]``."""
    out = x.copy()
    n1 = x.shape[1]
    for r, c in np.ndindex(*a.shape):
        out[r + n1 - 1 - c, c] += a[r, c]
    return out


def _np_block_outer(o, x, y, xi, yi):
    """Outer products added into the blocks one at a time (repeated blocks add up)."""
    out = o.copy()
    for b in range(x.shape[0]):
        for i in range(xi.shape[1]):
            for j in range(yi.shape[1]):
                out[xi[b, i], yi[b, j]] += np.outer(x[b, i], y[b, j])
    return out


def _np_neibs(img, patch, step, mode):
    """Patches as rows, visited one at a time (independent of ``Images2Neibs``)."""
    n, c, h, w = img.shape
    (ph, pw), (sh, sw) = patch, step
    if mode == "wrap_centered":
        rows = [[(i * sh + a - ph // 2) % h for a in range(ph)] for i in range(-(-h // sh))]
        cols = [[(j * sw + b - pw // 2) % w for b in range(pw)] for j in range(-(-w // sw))]
        src = img
    else:
        pad = {"half": (ph // 2, pw // 2), "full": (ph - 1, pw - 1)}.get(mode, (0, 0))
        src = np.pad(img, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
        hh, ww = src.shape[2:]
        rows = [list(range(i, i + ph)) for i in range(0, hh - ph + 1, sh)]
        cols = [list(range(j, j + pw)) for j in range(0, ww - pw + 1, sw)]
    out = [
        src[b, ch][np.ix_(r, q)].reshape(-1)
        for b in range(n)
        for ch in range(c)
        for r in rows
        for q in cols
    ]
    return np.array(out, dtype=img.dtype).reshape(len(out), ph * pw)


def _xent_1hot_bias(x, b, y):
    sm = nnet_reference.ref_softmax(x + b)
    return -np.log(sm[np.arange(len(y)), y]), sm, np.argmax(x + b, axis=1)


NNET = [
    *[
        Row(
            f"{n}[axis={a}]",
            lambda x, f=f, a=a: f(x, axis=a),
            lambda x, r=r, a=a: r(x, axis=a),
            (U(3, 4),),
            rtol32=1e-3,
        )
        for n, f, r in (
            ("softmax", nnet.softmax, nnet_reference.ref_softmax),
            ("log_softmax", nnet.log_softmax, nnet_reference.ref_log_softmax),
        )
        for a in (-1, 0)
    ],
    Row(
        "softmax_3d",
        lambda x: nnet.softmax(x, axis=1),
        lambda x: nnet_reference.ref_softmax(x, 1),
        CUBE,
    ),
    Row(
        "softmax_with_bias",
        nnet.softmax_with_bias,
        lambda x, b: nnet_reference.ref_softmax(x + b),
        (U(3, 4), U(4)),
    ),
    Row(
        "SoftmaxWithBias",
        lambda x, b: nnet.SoftmaxWithBias()(x, b),
        lambda x, b: nnet_reference.ref_softmax(x + b),
        (U(3, 4), U(4)),
    ),
    Row(
        "prepend_scalar_constant_to_each_row",
        prepend.Prepend_scalar_constant_to_each_row(1.5),
        lambda x: np.concatenate([np.full((x.shape[0], 1), 1.5, x.dtype), x], axis=1),
        (U(3, 4),),
    ),
    Row(
        "prepend_scalar_to_each_row",
        prepend.Prepend_scalar_to_each_row(),
        lambda s, x: np.concatenate([np.full((x.shape[0], 1), s, x.dtype), x], axis=1),
        (U(), U(3, 4)),
    ),
    # An approximation whose gradient is the sigmoid's (out * (1 - out); Theano's had
    # none), not the derivative of the approximation: no numeric gradient check.
    Row(
        "ultra_fast_sigmoid",
        sigm.ultra_fast_sigmoid,
        lambda x: 0.5 + 0.5 * np.clip(x / 2 * (27 + x * x / 4) / (27 + 9 * x * x / 4), -1, 1),
        (U(3, 4, lo=-8, hi=8),),
        grad=False,
    ),
    Row("relu", nnet.relu, lambda x: np.maximum(x, 0), (U(3, 4),)),
    Row(
        "relu_leaky",
        lambda x: nnet.relu(x, 0.25),
        lambda x: np.where(x > 0, x, 0.25 * x),
        (U(3, 4),),
    ),
    Row("elu", nnet.elu, lambda x: np.where(x > 0, x, np.expm1(x)), (U(3, 4),)),
    Row("softsign", nnet.softsign, lambda x: x / (1 + abs(x)), (U(3, 4),)),
    *[
        Row(
            f"crossentropy_softmax_argmax_1hot_with_bias[{k}]",
            lambda x, b, y, k=k: nnet.crossentropy_softmax_argmax_1hot_with_bias(x, b, y)[k],
            lambda x, b, y, k=k: _xent_1hot_bias(x, b, y)[k],
            (U(3, 4), U(4), I(3, lo=0, hi=4)),
            grad=k < 2,
            rtol32=1e-3,
        )
        for k in range(3)
    ],
    Row(
        "crossentropy_softmax_1hot",
        lambda x, y: nnet.crossentropy_softmax_1hot(x, y)[0],
        lambda x, y: _xent_1hot_bias(x, 0, y)[0],
        (U(3, 4), I(3, lo=0, hi=4)),
        rtol32=1e-3,
    ),
    Row(
        "categorical_crossentropy_1hot",
        lambda x, y: nnet.categorical_crossentropy(nnet.softmax(x), y),
        lambda x, y: -np.log(nnet_reference.ref_softmax(x)[np.arange(len(y)), y]),
        (U(3, 4), I(3, lo=0, hi=4)),
        rtol32=1e-3,
    ),
    Row(
        "categorical_crossentropy_dist",
        nnet.categorical_crossentropy,
        lambda p, t: -(t * np.log(p)).sum(axis=1),
        (U(3, 4, lo=0.1, hi=1), U(3, 4, lo=0, hi=1)),
    ),
    Row(
        "binary_crossentropy",
        nnet.binary_crossentropy,
        lambda o, t: -(t * np.log(o) + (1 - t) * np.log(1 - o)),
        (U(3, 4, lo=0.05, hi=0.95), U(3, 4, lo=0, hi=1)),
    ),
    Row(
        "sigmoid_binary_crossentropy",
        nnet.sigmoid_binary_crossentropy,
        lambda z, t: -(t * np.log(special.expit(z)) + (1 - t) * np.log(special.expit(-z))),
        (U(3, 4, lo=-4, hi=4), U(3, 4, lo=0, hi=1)),
    ),
    Row(
        "to_one_hot",
        lambda y: nnet.to_one_hot(y, 5),
        lambda y: np.eye(5, dtype=config.floatX)[y],
        (I(4, lo=0, hi=5),),
        dtypes=("int64",),
        grad=False,
    ),
    *[
        Row(
            f"images2neibs[{mode},{patch},{step}]",
            lambda x, p=patch, st=step, m=mode: nnet.images2neibs(x, p, st, m),
            lambda x, p=patch, st=step, m=mode: _np_neibs(x, p, st or p, m),
            (U(2, 2, 5, 4) if mode != "valid" else U(2, 2, 4, 4),),
        )
        for mode, patch, step in (
            ("valid", (2, 2), None),
            ("valid", (2, 2), (1, 2)),
            ("ignore_borders", (2, 3), (2, 1)),
            ("wrap_centered", (3, 3), (2, 2)),
            ("half", (3, 3), (1, 1)),
            ("full", (2, 3), (1, 1)),
        )
    ],
    Row(
        "images2neibs_empty_batch",
        lambda x: nnet.images2neibs(x, (2, 2)),
        lambda x: _np_neibs(x, (2, 2), (2, 2), "valid"),
        (U(0, 2, 4, 4),),
    ),
    Row(
        "neibs2images",
        lambda n: nnet.neibs2images(n, (2, 2), (2, 2, 4, 4)),
        lambda n: n.reshape(2, 2, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 2, 4, 4),
        (U(16, 4),),
    ),
    *[
        Row(
            f"pool_2d[{mode},ws={ws},st={st},pad={pad},ib={ib}]",
            lambda x, ws=ws, st=st, pad=pad, ib=ib, m=mode: pool.pool_2d(x, ws, ib, st, pad, m),
            _as(
                lambda x, ws=ws, st=st, pad=pad, ib=ib, m=mode: nnet_reference.ref_pool(
                    x, ws, st, pad, ib, m
                )
            ),
            (U(2, 2, 5, 4),),
        )
        for mode in ("max", "sum", "average_inc_pad", "average_exc_pad")
        for ws, st, pad, ib in (
            ((2, 2), None, (0, 0), True),
            ((3, 2), (1, 2), (1, 1), True),
            ((2, 3), None, (0, 0), False),
        )
    ],
    *[
        Row(
            f"pool_3d[{mode}]",
            lambda x, m=mode: pool.pool_3d(x, (2, 2, 2), True, (1, 2, 1), (0, 1, 0), m),
            _as(
                lambda x, m=mode: nnet3d_reference.ref_pool3d(
                    x, (2, 2, 2), (1, 2, 1), (0, 1, 0), True, m
                )
            ),
            (U(1, 2, 3, 4, 3),),
        )
        for mode in ("max", "average_exc_pad")
    ],
    Row(
        "max_pool_2d_same_size",
        lambda x: pool.max_pool_2d_same_size(x, (2, 2)),
        _as(
            lambda x: nnet_reference.ref_max_pool_grad(
                x, nnet_reference.ref_pool(x, (2, 2)), (2, 2)
            )
        ),
        (U(2, 4, 4),),
    ),
    Row(
        "pool_2d_symbolic_window",
        lambda x, w: pool.pool_2d(x, ws=w, ignore_border=True, mode="max"),
        _as(lambda x, w: nnet_reference.ref_pool(x, tuple(w))),
        (U(2, 4, 6), lambda rng, dt: np.array([2, 3])),
    ),
    Row(
        "pool_2d_symbolic_window_avg",
        lambda x, w: pool.pool_2d(
            x, ws=w, stride=(1, 1), ignore_border=True, mode="average_inc_pad"
        ),
        _as(lambda x, w: nnet_reference.ref_pool(x, tuple(w), (1, 1), mode="average_inc_pad")),
        (U(2, 4, 6), lambda rng, dt: np.array([2, 3])),
    ),
    *[
        Row(
            f"conv2d[{i}]",
            lambda x, w, kw=kw: nnet.conv2d(x, w, **kw),
            _as(lambda x, w, kw=kw: nnet_reference.ref_conv2d(x, w, **kw)),
            (
                U(2, 2, 5, 4),
                U(4 if kw.get("num_groups") else 3, 1 if kw.get("num_groups") else 2, 2, 3),
            ),
            rtol32=1e-3,
        )
        for i, kw in enumerate(
            (
                {},
                {"border_mode": "full", "filter_flip": False},
                {"border_mode": "half", "subsample": (2, 1)},
                {"border_mode": (1, 2), "filter_dilation": (2, 1)},
                {"num_groups": 2},
            )
        )
    ],
    *[
        Row(
            f"conv2d_empty[{what}]",
            lambda x, w: nnet.conv2d(x, w, border_mode="half"),
            _as(lambda x, w: nnet_reference.ref_conv2d(x, w, border_mode="half")),
            gens,
        )
        for what, gens in (
            ("batch", (U(0, 2, 5, 4), U(3, 2, 2, 3))),
            ("filters", (U(2, 2, 5, 4), U(0, 2, 2, 3))),
        )
    ],
    Row(
        "conv2d_grad_wrt_inputs",
        lambda gy, w: nnet.conv2d_grad_wrt_inputs(gy, w, (2, 2, 5, 4), border_mode="half"),
        _as(lambda gy, w: nnet_reference.ref_conv_grad_inputs(w, gy, (5, 4), border_mode="half")),
        (U(2, 3, 5, 4), U(3, 2, 3, 3)),
        rtol32=1e-3,
    ),
    Row(
        "conv2d_grad_wrt_weights",
        lambda x, gy: nnet.conv2d_grad_wrt_weights(x, gy, (3, 2, 2, 3), subsample=(1, 2)),
        _as(lambda x, gy: nnet_reference.ref_conv_grad_weights(x, gy, (2, 3), subsample=(1, 2))),
        (U(2, 2, 5, 4), U(2, 3, 4, 1)),
        rtol32=1e-3,
    ),
    Row(
        "SparseBlockGemv",
        blocksparse.sparse_block_gemv,
        lambda o, W, h, ii, oi: o
        + np.einsum("bik,bijkl->bjl", h, W[ii[:, :, None], oi[:, None, :]]),
        (U(2, 3, 4), U(5, 6, 2, 4), U(2, 2, 2), I(2, 2, lo=0, hi=4), I(2, 3, lo=0, hi=5)),
        rtol32=1e-3,
    ),
    Row(
        "SparseBlockOuter",
        blocksparse.sparse_block_outer,
        lambda o, x, y, xi, yi: _np_block_outer(o, x, y, xi, yi),
        (U(4, 5, 2, 3), U(2, 2, 2), U(2, 3, 3), I(2, 2, lo=0, hi=3), I(2, 3, lo=0, hi=4)),
        grad=False,
        rtol32=1e-3,
    ),
    Row(
        "DiagonalSubtensor",
        lambda x: conv3d2d.DiagonalSubtensor()(x, 0, 2),
        lambda x: _np_anti_diagonals(x, 0, 2),
        (U(4, 3, 2),),
    ),
    Row(
        "IncDiagonalSubtensor",
        lambda x, a: conv3d2d.IncDiagonalSubtensor()(x, 0, 1, a),
        lambda x, a: _np_inc_anti_diagonals(x, a),
        (U(4, 3), U(2, 3)),
    ),
    Row(
        "CorrMM",
        lambda x, w: corr.CorrMM(border_mode=(1, 0))(x, w),
        _as(lambda x, w: nnet_reference.ref_conv2d(x, w, border_mode=(1, 0), filter_flip=False)),
        (U(2, 2, 5, 4), U(3, 2, 2, 3)),
        rtol32=1e-3,
    ),
    Row(
        "CorrMM_gradInputs",
        lambda w, gy: corr.CorrMM_gradInputs(border_mode="half")(w, gy),
        _as(
            lambda w, gy: nnet_reference.ref_conv_grad_inputs(
                w, gy, (5, 4), border_mode="half", filter_flip=False
            )
        ),
        (U(3, 2, 3, 3), U(2, 3, 5, 4)),
        rtol32=1e-3,
    ),
    Row(
        "CorrMM_gradWeights",
        lambda x, gy: corr.CorrMM_gradWeights()(x, gy),
        _as(lambda x, gy: nnet_reference.ref_conv_grad_weights(x, gy, (2, 3), filter_flip=False)),
        (U(2, 2, 5, 4), U(2, 3, 4, 2)),
        rtol32=1e-3,
    ),
    Row(
        "Corr3dMM",
        lambda x, w: corr3d.Corr3dMM()(x, w),
        _as(lambda x, w: nnet3d_reference.ref_conv3d(x, w, filter_flip=False)),
        (U(1, 2, 4, 3, 4), U(2, 2, 2, 2, 3)),
        rtol32=1e-3,
    ),
    Row(
        "Corr3dMMGradInputs",
        lambda w, gy: corr3d.Corr3dMMGradInputs()(w, gy),
        _as(
            lambda w, gy: nnet3d_reference.ref_conv3d_grad_inputs(
                w, gy, (4, 3, 4), filter_flip=False
            )
        ),
        (U(2, 2, 2, 2, 3), U(1, 2, 3, 2, 2)),
        rtol32=1e-3,
    ),
    Row(
        "Corr3dMMGradWeights",
        lambda x, gy: corr3d.Corr3dMMGradWeights()(x, gy),
        _as(
            lambda x, gy: nnet3d_reference.ref_conv3d_grad_weights(
                x, gy, (2, 2, 3), filter_flip=False
            )
        ),
        (U(1, 2, 4, 3, 4), U(1, 2, 3, 2, 2)),
        rtol32=1e-3,
    ),
    Row(
        "conv2d_bias_act",
        lambda x, w, b: Conv2dBiasAct(activation="relu", border_mode="half")(x, w, b),
        _as(
            lambda x, w, b: np.maximum(
                nnet_reference.ref_conv2d(x, w, border_mode="half") + b[:, None, None], 0
            )
        ),
        (U(2, 2, 5, 4), U(3, 2, 3, 3), U(3)),
        rtol32=1e-3,
    ),
    Row(
        "conv2d_bias_scale",
        lambda x, w, b, s: Conv2dBiasAct()(x, w, b, s),
        _as(
            lambda x, w, b, s: nnet_reference.ref_conv2d(x, w) * s[:, None, None] + b[:, None, None]
        ),
        (U(2, 2, 5, 4), U(3, 2, 2, 2), U(3), U(3)),
        rtol32=1e-3,
    ),
    *[
        Row(
            f"conv3d[{i}]",
            lambda x, w, kw=kw: nnet.conv3d(x, w, **kw),
            _as(lambda x, w, kw=kw: nnet3d_reference.ref_conv3d(x, w, **kw)),
            (U(1, 2, 4, 3, 4), U(2, 2, 2, 2, 3)),
            rtol32=1e-3,
        )
        for i, kw in enumerate(({}, {"border_mode": "half", "subsample": (1, 2, 1)}))
    ],
    Row(
        "conv3d_grad_wrt_inputs",
        lambda gy, w: nnet.conv3d_grad_wrt_inputs(gy, w, (1, 2, 4, 3, 4)),
        _as(lambda gy, w: nnet3d_reference.ref_conv3d_grad_inputs(w, gy, (4, 3, 4))),
        (U(1, 2, 3, 2, 2), U(2, 2, 2, 2, 3)),
        rtol32=1e-3,
    ),
    Row(
        "conv3d_grad_wrt_weights",
        lambda x, gy: nnet.conv3d_grad_wrt_weights(x, gy, (2, 2, 2, 2, 3)),
        _as(lambda x, gy: nnet3d_reference.ref_conv3d_grad_weights(x, gy, (2, 2, 3))),
        (U(1, 2, 4, 3, 4), U(1, 2, 3, 2, 2)),
        rtol32=1e-3,
    ),
]


def _rfft_ref(x, norm=None):
    f = np.fft.rfftn(x, axes=tuple(range(1, x.ndim)), norm=norm)
    return np.stack([f.real, f.imag], axis=-1).astype(x.dtype)


def _irfft_ref(spec, norm=None, odd=False):
    z = spec[..., 0] + 1j * spec[..., 1]
    n = 2 * (z.shape[-1] - 1) + odd
    s = (*z.shape[1:-1], n)
    return np.fft.irfftn(z, s=s, axes=tuple(range(1, z.ndim)), norm=norm).astype(spec.dtype)


def DISTINCT(*shape):
    """Distinct values (ints too: no ties, so the order of the indices is numpy's)."""
    n = int(np.prod(shape))
    return lambda rng, dtype: (rng.permutation(n).reshape(shape) - n // 2).astype(dtype)


def _topk_ref(x, k, axis, indices):
    order = np.argsort(-x if k > 0 else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(abs(k)), axis=axis)
    return idx if indices else np.take_along_axis(x, idx, axis=axis)


def _adagrad_ref(acc, g, k):
    new = acc + g * g
    return (new, g / np.sqrt(new + 1e-6))[k]


MORE = [
    Row(
        "gemm",
        blas.gemm,
        lambda z, a, x, y, b: b * z + a * (x @ y),
        (U(3, 2), U(), U(3, 4), U(4, 2), U()),
        rtol32=1e-3,
    ),
    Row(
        "gemv",
        blas.gemv,
        lambda y, a, m, x, b: b * y + a * (m @ x),
        (U(3), U(), U(3, 4), U(4), U()),
        rtol32=1e-3,
    ),
    Row("ger", blas.ger, lambda m, a, x, y: m + a * np.outer(x, y), (U(3, 4), U(), U(3), U(4))),
    Row("dot22", blas.dot22, np.dot, (U(3, 4), U(4, 2)), rtol32=1e-3),
    Row(
        "dot22scalar",
        blas.dot22scalar,
        lambda x, y, a: a * (x @ y),
        (U(3, 4), U(4, 2), U()),
        rtol32=1e-3,
    ),
    *[
        Row(
            f"einsum[{spec}]",
            lambda *xs, spec=spec: tt.einsum(spec, *xs),
            lambda *xs, spec=spec: np.einsum(spec, *xs),
            tuple(U(*shape) for shape in shapes),
            rtol32=1e-3,
        )
        for spec, shapes in (
            ("ij,jk->ik", ((3, 4), (4, 2))),
            ("bij,bjk->bik", ((2, 3, 4), (2, 4, 2))),
            ("ii->i", ((3, 3),)),
            ("ij->", ((3, 4),)),
            ("i,j,k->ijk", ((2,), (3,), (2,))),
            ("...ij,...j->...i", ((2, 3, 4), (2, 4))),
        )
    ],
    Row(
        "tensordot",
        lambda a, b: tt.tensordot(a, b, [[1, 2], [0, 1]]),
        lambda a, b: np.tensordot(a, b, [[1, 2], [0, 1]]),
        (U(2, 3, 4), U(3, 4, 2)),
        rtol32=1e-3,
    ),
    Row(
        "batched_dot",
        tt.batched_dot,
        lambda a, b: np.einsum("bij,bjk->bik", a, b),
        (U(2, 3, 4), U(2, 4, 2)),
        rtol32=1e-3,
    ),
    *[
        Row(
            f"careduce[{name},axis={axis}]",
            lambda x, op=op, axis=axis: CAReduce(op, axis)(x),
            # the raw reduction keeps the input's dtype (Sum and Prod upcast as numpy)
            lambda x, f=f, axis=axis: f(x, axis=axis).astype(x.dtype),
            CUBE,
            dtypes=NUMERIC,
            grad=False,  # none, as in Theano: Sum, Prod, Max... have theirs
        )
        for name, op, f in (
            ("add", ts.add, np.sum),
            ("mul", ts.mul, np.prod),
            ("maximum", ts.maximum, np.max),
        )
        for axis in ((1,), (0, 2), None)
    ],
    *[
        Row(
            f"{name}_dtype[axis={axis}]",
            lambda x, f=f, axis=axis: f(x, axis=axis, dtype=x.dtype),
            lambda x, f=r, axis=axis: f(x, axis=axis, dtype=x.dtype),
            (U(2, 3, 4, lo=-3, hi=3),),
            dtypes=("int8", "int32", "float32", "float64"),
        )
        for name, f, r in (("sum", tt.sum, np.sum), ("prod", tt.prod, np.prod))
        for axis in (1, (0, 2), None)
    ],
    Row(
        "prod_without_zeros",
        lambda x: ProdWithoutZeros(axis=(1,))(x),
        lambda x: np.prod(np.where(x == 0, 1, x), axis=1),
        (ZEROS_AND(U(3, 4)),),
        dtypes=NUMERIC,
        grad=False,  # none, as in Theano
    ),
    Row(
        "fused_reduce",
        lambda x: FusedReduce(Sum(axis=(1,)), ts.sqr)(x),
        lambda x: np.sum(x * x, axis=1),
        CUBE,
        dtypes=NUMERIC,
    ),
    *[
        Row(
            f"adagrad[{k}]",
            lambda acc, g, k=k: Adagrad(1e-6)(acc, g)[k],
            lambda acc, g, k=k: _adagrad_ref(acc, g, k),
            (POS, U(3, 4)),
            grad=False,  # an update rule, no gradient
        )
        for k in (0, 1)
    ],
    *[
        Row(
            f"rfft[{norm},{len(shape)}d]",
            lambda x, norm=norm: fft.rfft(x, norm),
            lambda x, norm=norm: _rfft_ref(x, norm),
            (U(*shape),),
            rtol32=1e-3,
        )
        for norm in (None, "ortho")
        for shape in ((2, 6), (2, 3, 4))
    ],
    *[
        Row(
            f"irfft[{norm},odd={odd}]",
            lambda x, norm=norm, odd=odd: fft.irfft(x, norm, odd),
            lambda x, norm=norm, odd=odd: _irfft_ref(x, norm, odd),
            # an image's spectrum: its imaginary parts at 0 (and n/2) are 0
            (lambda rng, dt, odd=odd: _rfft_ref(U(2, 3, 6 + odd)(rng, dt)),),
            rtol32=1e-3,
            grad=False,
        )
        for norm in (None, "ortho")
        for odd in (False, True)
    ],
    Row(
        "irfft_grad",
        lambda x: fft.irfft(fft.rfft(x)),
        lambda x: x.copy(),
        (U(2, 6),),
        rtol32=1e-3,
    ),
    Row(
        "fourier",
        lambda x: Fourier()(x, None, 1),
        lambda x: np.fft.fft(x, axis=1),
        (U(3, 4),),
        check_dtype=False,  # complex128 whatever the input (Theano's type)
        grad=False,
    ),
    Row(
        "fourier_n",
        lambda x: abs(Fourier()(x, 6, 0)),
        lambda x: abs(np.fft.fft(x, 6, axis=0)),
        (U(4, 3),),
        check_dtype=False,
        rtol32=1e-3,
    ),
    *[
        Row(
            f"topk[{k},axis={axis},{what}]",
            lambda x, k=k, axis=axis, f=f: f(x, k, axis),
            lambda x, k=k, axis=axis, i=what == "idx": _topk_ref(x, k, axis, i),
            (DISTINCT(3, 5),),
            dtypes=NUMERIC if what == "idx" else FLOATS,
            grad=what == "values",
        )
        for k, axis in ((2, -1), (-3, 0), (5, 1))
        for what, f in (("values", tt.topk), ("idx", tt.argtopk))
    ],
    Row(
        "topk_and_argtopk",
        lambda x: tt.topk_and_argtopk(x, 2)[0] * tt.cast(tt.topk_and_argtopk(x, 2)[1], x.dtype),
        lambda x: _topk_ref(x, 2, -1, False) * _topk_ref(x, 2, -1, True).astype(x.dtype),
        (U(3, 5),),
    ),
    *[
        Row(
            f"sort_symbolic_axis[{axis},{kind}]",
            lambda x, ax, f=f: f(x, axis=ax),
            lambda x, ax, r=r: r(x, axis=int(ax)),
            (U(3, 4), C(axis)),
            grad=kind == "sort",
        )
        for axis in (0, 1, -1)
        for kind, f, r in (("sort", tt.sort, np.sort), ("argsort", tt.argsort, np.argsort))
    ],
    Row(
        "make_slice",
        lambda x, i, j: x[MakeSlice()(i, j)],
        lambda x, i, j: x[i:j],
        (U(5, 3), C(1), C(4)),
    ),
    Row(
        "make_slice_step",
        lambda x, j: x[:, MakeSlice()(None, j, 2)],
        lambda x, j: x[:, :j:2],
        (U(3, 5), C(4)),
    ),
    Row(
        "value_shape",
        lambda x: tt.shape(make_list([x, x, x])),
        lambda x: np.array((3, *x.shape)),
        (U(2, 4),),
        grad=False,
    ),
]


def _jacobian_ref(x):
    s = x.sum()
    return np.diag(2 * x * s) + (x**2)[:, None]


# Ops whose gradient is the point: a row's value is a gradient through them.
# The identities whose gradient is cut: values as x, gradients through them as zero.
_GRAD_CUTS = (
    ("zero_grad", gradient.zero_grad),
    ("consider_constant", gradient.consider_constant),
    ("disconnected_grad", gradient.disconnected_grad),
)

GRADIENT = [
    *[
        Row(
            f"{name}_value",
            lambda x, f=f: f(x) * 2,
            lambda x: x * 2,
            (U(3, 4),),
            grad=False,
        )
        for name, f in (
            *_GRAD_CUTS,
            ("undefined_grad", gradient.undefined_grad),
            ("view_op", ViewOp()),
            ("deep_copy_op", DeepCopyOp()),
        )
    ],
    *[
        Row(
            f"{name}_gradient",
            # d/dx sum(f(x) * x) = x: f's own gradient is cut
            lambda x, f=f: gradient.grad(tt.sum(f(x) * x), x),
            lambda x: x.copy(),
            (U(3, 4),),
            grad=False,
        )
        for name, f in _GRAD_CUTS
    ],
    Row(
        "grad_clip_gradient",
        lambda x, y: gradient.grad(tt.sum(gradient.grad_clip(x, -0.5, 0.5) * y), x),
        lambda x, y: np.clip(y, -0.5, 0.5),
        (U(3, 4), U(3, 4)),
        grad=False,
    ),
    Row(
        "grad_clip_wide",  # bounds wider than the gradient: finite differences agree
        lambda x: gradient.grad_clip(x, -100, 100) * x,
        lambda x: x * x,
        (U(3, 4),),
    ),
    Row(
        "grad_scale_gradient",
        lambda x: gradient.grad(tt.sum(gradient.grad_scale(x, 0.5) ** 2), x),
        lambda x: x.copy(),  # 0.5 * 2x
        (U(3, 4),),
        grad=False,
    ),
    Row("grad_scale_one", lambda x: gradient.grad_scale(x, 1.0) * x, lambda x: x * x, (U(3, 4),)),
    Row(
        "jacobian",
        lambda x: gradient.jacobian(x**2 * x.sum(), x),
        _jacobian_ref,
        (U(4),),
        rtol32=1e-3,
    ),
    Row(
        "hessian",
        lambda x: gradient.hessian(tt.sum(x**3), x),
        lambda x: np.diag(6 * x),
        (U(4),),
        rtol32=1e-3,
    ),
]


SECTIONS = (ELEMWISE, REDUCTIONS, SHAPE, INDEXING, DOT, EXTRAS)
SECTIONS += (SPECIAL, ARRAYS, LINALG, NNET, MORE, GRADIENT)
TABLE = [row for section in SECTIONS for row in section]


def row_inputs(row, dtype, rng):
    """Values for one row of the table, and symbolic inputs of matching types (an axis of
    length 1 is broadcastable, as the values' shapes say)."""
    values = [np.asarray(gen(rng, dtype)) for gen in row.gens]
    syms = [
        tt.TensorType(v.dtype, shape=tuple(1 if s == 1 else None for s in v.shape))(f"i{k}")
        for k, v in enumerate(values)
    ]
    return syms, values
