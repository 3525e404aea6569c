"""The pattern table (one ``PatternSub`` line per rule): each rule alone, checked for
structure (``is_same_graph`` with the expected graph) and for values against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.rewriting.pattern import PatternSub
from theano_dag.opt.rewrites import algebra as alg
from theano_dag.opt.rewrites import specialize as spec

from .rewrite_helpers import apply_rules, assert_allclose, check, fgraph_values

rng = np.random.default_rng(7)


def c64(v):
    return tt.constant(np.asarray(v, dtype="float64"))


def c32(v):
    return tt.constant(np.asarray(v, dtype="int32"))


def _x():
    return tt.dvector("x")


def _m():
    return tt.dmatrix("m")


def _i():
    return tt.ivector("i")


X = rng.uniform(0.5, 2.0, size=4)
M = rng.uniform(-2.0, 2.0, size=(3, 4))
I = np.array([3, -7, 0, 5], dtype="int32")

# rule, input maker, expression, expected graph, numpy, input value
TABLE = [
    (alg.local_add_zero_float, _x, lambda x: x + 0, lambda x: x, lambda x: x + 0, X),
    (alg.local_add_zero_float, _x, lambda x: 0 + x, lambda x: x, lambda x: 0 + x, X),
    (alg.local_add_zero, _x, lambda x: x + 0, lambda x: x + 0, lambda x: x + 0, X),  # floats: kept
    (alg.local_add_zero, _i, lambda i: 0 + i, lambda i: i, lambda i: 0 + i, I),
    (
        alg.local_add_zero,
        _i,
        lambda i: i + 0.0,
        lambda i: tt.cast(i, "float64"),
        lambda i: i + 0.0,
        I,
    ),
    (alg.local_mul_one, _x, lambda x: x * 1, lambda x: x, lambda x: x * 1, X),
    (alg.local_mul_one, _x, lambda x: 1 * x, lambda x: x, lambda x: 1 * x, X),
    (alg.local_mul_zero, _m, lambda m: m * 0, lambda m: tt.fill(m, c64(0)), lambda m: m * 0, M),
    (alg.local_mul_zero, _m, lambda m: 0 * m, lambda m: tt.fill(m, c64(0)), lambda m: 0 * m, M),
    (alg.local_zero_div, _m, lambda m: 0 / m, lambda m: tt.fill(m, c64(0)), lambda m: 0 / m, M),
    (
        alg.local_zero_int_div,
        _i,
        lambda i: 0 // i,
        lambda i: tt.fill(i, c32(0)),
        lambda i: 0 // i,
        I + 8,  # no zero divisor: numpy would warn
    ),
    (alg.local_div_one, _x, lambda x: x / 1, lambda x: x, lambda x: x / 1, X),
    (alg.local_int_div_one, _i, lambda i: i // 1, lambda i: i, lambda i: i // 1, I),
    (alg.local_int_div_one, _x, lambda x: x // 1, lambda x: x // 1, np.floor, X),  # floats: kept
    (alg.local_intdiv_by_one, _x, lambda x: x // 1, lambda x: tt.floor(x), np.floor, X),
    (alg.local_intdiv_by_one, _i, lambda i: i // 1, lambda i: i // 1, lambda i: i, I),  # ints: kept
    (alg.local_sub_zero, _x, lambda x: x - 0, lambda x: x, lambda x: x - 0, X),
    (alg.local_sub_self, _m, lambda m: m - m, lambda m: tt.fill(m, c64(0)), lambda m: m - m, M),
    (alg.local_neg_neg, _x, lambda x: tt.neg(tt.neg(x)), lambda x: x, lambda x: x, X),
    (alg.local_abs_neg, _m, lambda m: abs(-m), lambda m: abs(m), lambda m: abs(-m), M),
    (alg.local_abs_neg, _i, lambda i: abs(-i), lambda i: abs(i), lambda i: abs(-i), I),
    (alg.local_log_exp, _x, lambda x: tt.log(tt.exp(x)), lambda x: x, lambda x: x, X),
    (
        alg.local_exp_log,
        _x,
        lambda x: tt.exp(tt.log(x)),
        lambda x: tt.switch(tt.ge(x, 0), x, tt.constant(np.array([np.nan]))),
        lambda x: np.exp(np.log(x)),
        X,
    ),
    (spec.local_mul_to_sqr, _x, lambda x: x * x, lambda x: tt.sqr(x), np.square, X),
]


@pytest.mark.parametrize(
    "rule, make, expr, expected, numpy_fn, value",
    TABLE,
    ids=[f"{row[0]}-{k}" for k, row in enumerate(TABLE)],
)
def test_pattern_rule(rule, make, expr, expected, numpy_fn, value):
    assert isinstance(rule, PatternSub)
    v = make()
    out = expr(v)
    fg = check([v], [out], [expected(v)], [value], lambda fg: apply_rules(fg, rule, fold=False))
    assert fg.outputs[0].type == out.type  # the framework fitted dtype and broadcast
    assert_allclose(fgraph_values(fg, [value]), [np.asarray(numpy_fn(value), dtype=out.dtype)])


def test_every_pattern_rule_of_the_tables_is_in_the_test_table():
    patterns = {
        r
        for module in (alg, spec)
        for r in vars(module).values()
        if isinstance(r, PatternSub) and str(r).startswith("local_")
    }
    assert patterns == {row[0] for row in TABLE}


def test_mul_zero_of_a_broadcast_row_gives_zeros_of_the_product_shape():
    # row * zeros((3, 4)): the zeros give the shape; the replacement keeps it
    r = tt.drow("r")
    out = r * tt.zeros((3, 4))
    fg = FunctionGraph([r], [out], clone=False)
    apply_rules(fg, alg.local_mul_zero, fold=False)
    assert fg.outputs[0].type == out.type
    got = fgraph_values(fg, [rng.normal(size=(1, 4))])[0]
    np.testing.assert_array_equal(got, np.zeros((3, 4)))


def test_sub_self_and_mul_zero_turn_nan_into_zero_as_documented():
    # The caveat of the nonfinite_unsafe tag: NaN - NaN and NaN * 0 are NaN in numpy.
    x = tt.dvector("x")
    fg = FunctionGraph([x], [x - x, x * 0], clone=False)
    apply_rules(fg, alg.local_sub_self, alg.local_mul_zero, fold=False)
    got = fgraph_values(fg, [np.array([np.nan, 1.0])])
    np.testing.assert_array_equal(got[0], [0.0, 0.0])
    np.testing.assert_array_equal(got[1], [0.0, 0.0])
    tags = {r.name: r.tags for r in alg.RULES if r.db == "canonicalize"}
    assert alg.NONFINITE_UNSAFE in tags["local_sub_self"]
    assert alg.NONFINITE_UNSAFE in tags["local_mul_zero"]


def test_neg_neg_of_no_bool_since_a_bool_is_not_negated():
    # numpy and Theano refuse -b: no graph holds neg(neg(b)) for the rule to leave alone
    b = tt.vector("b", dtype="bool")
    with pytest.raises(TypeError, match=r"neg: a boolean is not negated with - \(numpy and"):
        tt.neg(b)
    with pytest.raises(TypeError, match=r"sub: booleans are not subtracted"):
        b - b
    assert (b - 1).dtype == "int8" and (~b).dtype == "bool"
