"""The op table: one row per tensor op (or op configuration) for ``test_op_table.py``.

A row says how to build the op on symbolic inputs, how to make input values, what numpy
computes for them, the dtypes to try, and whether (and wrt which inputs) to check the
gradient by finite differences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import special

import theano_dag.tensor as tt

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
    from theano_dag import scalar as ts

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


REDUCTIONS = [
    *_reduce_rows("sum", tt.sum, np.sum, dtypes=NUMERIC),
    *_reduce_rows("prod", tt.prod, np.prod, dtypes=NUMERIC),
    *_reduce_rows("max", tt.max, np.max, dtypes=NUMERIC),
    *_reduce_rows("min", tt.min, np.min, dtypes=NUMERIC),
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


TABLE = ELEMWISE + REDUCTIONS + SHAPE + INDEXING + DOT + EXTRAS


def row_inputs(row, dtype, rng):
    """Values for one row of the table, and symbolic inputs of matching types (an axis of
    length 1 is broadcastable, as the values' shapes say)."""
    values = [np.asarray(gen(rng, dtype)) for gen in row.gens]
    syms = [
        tt.TensorType(v.dtype, shape=tuple(1 if s == 1 else None for s in v.shape))(f"i{k}")
        for k, v in enumerate(values)
    ]
    return syms, values
