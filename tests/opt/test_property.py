"""Property test: FAST_RUN computes what the unoptimized graph computes.

Hypothesis builds random graphs of elementwise ops (with the constants and patterns the
rewrites look for: x*1, x-x, log(1+x), x**2, ...), reductions, dimshuffles, dots (and
the dot-plus-accumulation patterns of BLAS), softmax, switch and casts, over inputs of
fixed shapes; then it compares the FAST_RUN graph with the unoptimized one, both run by
the reference engine, on random inputs:

- finite inputs: FAST_RUN with every rewrite; where the reference value is finite (and
  not near overflow), the values must be close. Where it is not finite, a rewrite may
  legitimately give a better value (``log(exp(x)) -> x`` for x = 800), so it is not
  compared;
- inputs with NaN and inf: FAST_RUN without the rewrites tagged ``nonfinite_unsafe``
  (``x*0 -> 0``...); now NaN must stay NaN, and an infinite reference must not become
  NaN (it may become finite, a stabilization, or change sign: signed zeros are not
  kept, so ``1/x`` of a zero may flip the sign of an infinity).

Each drawn graph is compiled once (three functions, cached by the graph's recipe) and run
on three input sets.
"""

import os
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.tensor.nnet import softmax

# Kinds of variables and their runtime shapes: M a (3, 4) matrix, Q (4, 4), R a (1, 4)
# row, V a (4,) vector, C a (3,) vector, S a scalar.
SHAPES = {"M": (3, 4), "Q": (4, 4), "R": (1, 4), "V": (4,), "C": (3,), "S": ()}
# Kinds that broadcast together, and the kind of the result.
BROADCAST = {
    frozenset("M"): "M",
    frozenset("MR"): "M",
    frozenset("MV"): "M",
    frozenset("MS"): "M",
    frozenset("Q"): "Q",
    frozenset("QR"): "Q",
    frozenset("QV"): "Q",
    frozenset("QS"): "Q",
    frozenset("R"): "R",
    frozenset("RV"): "R",
    frozenset("RS"): "R",
    frozenset("V"): "V",
    frozenset("VS"): "V",
    frozenset("C"): "C",
    frozenset("CS"): "C",
    frozenset("S"): "S",
}
UNARY = [
    "exp",
    "log",
    "log1p",
    "sqrt",
    "neg",
    "sqr",
    "abs",
    "tanh",
    "sigmoid",
    "softplus",
    "sin",
    "expm1",
    "reciprocal",
]
BINARY = ["add", "sub", "mul", "true_div", "maximum", "minimum"]
CONSTS = [0.0, 1.0, -1.0, 2.0, 0.5, 3.0]
CONST_OPS = ["add", "sub", "mul", "true_div", "mul", "true_div", "maximum"]
# What a step does, weighted (elementwise arithmetic is what most rewrites are about).
STEP_KINDS = (
    ["unary"] * 3
    + ["binary"] * 3
    + ["const"] * 5
    + ["pattern"] * 4
    + ["pow"] * 2
    + ["reduce", "dot", "gemm", "softmax", "transpose", "row"]
)
POWERS = [2.0, 0.5, -1.0, 1.0, 0.0, 3.0, -0.5]
# Special shapes of graph that some rewrites look for (the argument kinds they need).
PATTERNS = {
    "neg_neg": ("*",),
    "sub_self": ("*",),
    "div_self": ("*",),
    "log_1p": ("*",),
    "log_exp": ("*",),
    "exp_log": ("*",),
    "log_sigmoid": ("*",),
    "log_1m_sigmoid": ("*",),
    "mul_div": ("*", "*"),
    "fma": ("*", "*", "*"),
    "zeros_like": ("*",),
    "ones_like": ("*",),
    "double_t": ("MQ",),
    "switch_pos": ("*",),
    "adagrad": ("*", "*"),
    "cast32": ("*",),
}


@st.composite
def recipes(draw, max_steps=8):
    """A graph recipe: a tuple of steps, each ``(op, argument indices, extra)``."""
    kinds = ["M", "Q", "V", "C", "S", "R"]
    steps = []
    n_steps = draw(st.integers(1, max_steps))
    for _ in range(n_steps):
        op = draw(st.sampled_from(STEP_KINDS))
        step = _step(draw, op, kinds)
        if step is not None:
            steps.append(step)
            kinds.append(step[-1])
    n_out = draw(st.integers(1, 2))
    dtype = draw(st.sampled_from(["float64", "float64", "float32"]))
    return tuple(steps), n_out, dtype


def _pick(draw, kinds, allowed=None):
    idx = [k for k, kd in enumerate(kinds) if allowed is None or kd in allowed]
    if not idx:
        return None
    return draw(st.sampled_from(idx))


def _step(draw, op, kinds):
    """One step, ending with the kind of its result (or None if none fits)."""
    if op == "unary":
        a = _pick(draw, kinds)
        return ("unary", draw(st.sampled_from(UNARY)), (a,), kinds[a])
    if op in ("binary", "const", "pow"):
        a = _pick(draw, kinds)
        if op == "const":
            c = draw(st.sampled_from(CONSTS))
            fn = draw(st.sampled_from(CONST_OPS))
            swap = draw(st.booleans())
            return ("const", (fn, c, swap), (a,), kinds[a])
        if op == "pow":
            return ("pow", draw(st.sampled_from(POWERS)), (a,), kinds[a])
        partners = [k for k, kd in enumerate(kinds) if frozenset(kinds[a] + kd) in BROADCAST]
        b = draw(st.sampled_from(partners))
        kind = BROADCAST[frozenset(kinds[a] + kinds[b])]
        return ("binary", draw(st.sampled_from(BINARY)), (a, b), kind)
    if op == "pattern":
        name = draw(st.sampled_from(sorted(PATTERNS)))
        args = []
        first = None
        for spec in PATTERNS[name]:
            allowed = spec if spec != "*" else (kinds[first] if first is not None else None)
            a = _pick(draw, kinds, allowed)
            if a is None:
                return None
            first = a if first is None else first
            args.append(a)
        return ("pattern", name, tuple(args), kinds[args[0]])
    if op == "reduce":
        a = _pick(draw, kinds, "MQV")
        fn = draw(st.sampled_from(["sum", "max", "prod", "mean"]))
        if kinds[a] == "V":
            return ("reduce", (fn, None), (a,), "S")
        axis = draw(st.sampled_from([0, 1, None]))
        kind = {None: "S", 0: "V", 1: "C" if kinds[a] == "M" else "V"}[axis]
        return ("reduce", (fn, axis), (a,), kind)
    if op == "dot":
        a = _pick(draw, kinds, "MQV")
        if kinds[a] == "M":
            return ("dot", None, (a, _pick(draw, kinds, "Q")), "M")
        if kinds[a] == "Q":
            b = _pick(draw, kinds, "QV")
            return ("dot", None, (a, b), kinds[b])
        b = _pick(draw, kinds, "QV")
        return ("dot", None, (a, b), "V" if kinds[b] == "Q" else "S")
    if op == "gemm":
        z = _pick(draw, kinds, "MQV")
        kz = kinds[z]
        x = _pick(draw, kinds, "Q" if kz == "V" else kz)
        y = _pick(draw, kinds, "V" if kz == "V" else "Q")
        form = draw(st.sampled_from(["z+xy", "z-xy", "az+bxy", "xy+z", "outer"]))
        if form == "outer":
            return (
                "gemm",
                form,
                (_pick(draw, kinds, "Q"), _pick(draw, kinds, "V"), _pick(draw, kinds, "V")),
                "Q",
            )
        return ("gemm", form, (z, x, y), kz)
    if op == "softmax":
        a = _pick(draw, kinds, "MQ")
        return ("softmax", draw(st.booleans()), (a,), kinds[a])
    if op == "transpose":
        a = _pick(draw, kinds, "Q")
        return ("transpose", None, (a,), "Q")
    if op == "row":
        a = _pick(draw, kinds, "V")
        return ("row", None, (a,), "R")
    raise AssertionError(op)


def _pattern(name, xs, num):
    x = xs[0]
    if name == "neg_neg":
        return tt.neg(tt.neg(x))
    if name == "sub_self":
        return x - x
    if name == "div_self":
        return x / x
    if name == "log_1p":
        return tt.log(1 + x)
    if name == "log_exp":
        return tt.log(tt.exp(x))
    if name == "exp_log":
        return tt.exp(tt.log(x))
    if name == "log_sigmoid":
        return tt.log(tt.sigmoid(x))
    if name == "log_1m_sigmoid":
        return tt.log(1 - tt.sigmoid(x))
    if name == "mul_div":
        return (x * xs[1]) / xs[1]
    if name == "fma":
        return xs[0] * xs[1] + xs[2]
    if name == "zeros_like":
        return x + tt.zeros_like(x)
    if name == "ones_like":
        return x * tt.ones_like(x)
    if name == "double_t":
        return x.T.T
    if name == "switch_pos":
        return tt.switch(x > 0, x, num(0.0) * x)
    if name == "adagrad":
        g, acc = xs
        acc2 = acc + g * g
        return g / tt.sqrt(acc2 + num(1e-6)) + acc2
    if name == "cast32":
        return tt.cast(tt.cast(x, "float32"), "float64")
    raise AssertionError(name)


def _gemm_form(form, xs, num):
    z, x, y = xs
    d = tt.dot(x, y)
    if form == "z+xy":
        return z + d
    if form == "z-xy":
        return z - d
    if form == "az+bxy":
        return num(2.0) * z + num(0.5) * d
    return d + z


def build(recipe):
    """``(inputs, outputs)`` of a recipe (inputs and constants of the recipe's dtype)."""
    steps, n_out, dtype = recipe
    num = np.dtype(dtype).type
    inputs = [
        tt.TensorType(dtype, shape=s)(name)
        for name, s in (
            ("m", (None, None)),
            ("q", (None, None)),
            ("v", (None,)),
            ("c", (None,)),
            ("s", ()),
            ("r", (1, None)),
        )
    ]
    vs = list(inputs)
    for op, extra, args, _kind in steps:
        xs = [vs[a] for a in args]
        if op == "unary":
            out = getattr(tt, extra)(xs[0])
        elif op == "binary":
            out = getattr(tt, extra)(*xs)
        elif op == "const":
            fn, c, swap = extra
            c = tt.constant(num(c))
            out = getattr(tt, fn)(c, xs[0]) if swap else getattr(tt, fn)(xs[0], c)
        elif op == "pow":
            out = xs[0] ** tt.constant(num(extra))
        elif op == "pattern":
            out = _pattern(extra, xs, num)
        elif op == "reduce":
            fn, axis = extra
            out = getattr(tt, fn)(xs[0], axis=axis)
        elif op == "dot":
            out = tt.dot(*xs)
        elif op == "gemm":
            if extra == "outer":
                a, u, w = xs
                out = a + num(0.5) * tt.outer(u, w)
            else:
                out = _gemm_form(extra, xs, num)
        elif op == "softmax":
            sm = softmax(xs[0])
            out = tt.log(sm) if extra else sm
        elif op == "transpose":
            out = xs[0].T
        elif op == "row":
            out = xs[0].dimshuffle("x", 0)
        vs.append(out)
    outputs = vs[-n_out:] if len(vs) - len(inputs) >= n_out else vs[-1:]
    return inputs, outputs


MAX_EXAMPLES = int(os.environ.get("THEANO_DAG_PROPERTY_EXAMPLES", "2000"))
_CACHE: dict = {}
REFERENCE = Mode(linker="py", optimizer=None)
FAST_RUN = Mode(linker="py", optimizer="fast_run")
FAST_RUN_SAFE = FAST_RUN.excluding("nonfinite_unsafe")


def compiled(recipe):
    """(reference, fast_run, fast_run_safe) functions of a recipe, compiled once."""
    if recipe not in _CACHE:
        inputs, outputs = build(recipe)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a rewrite that fails (and is rolled back) fails
            fns = tuple(
                function(inputs, outputs, mode=m, on_unused_input="ignore")
                for m in (REFERENCE, FAST_RUN, FAST_RUN_SAFE)
            )
        _CACHE[recipe] = fns
    return _CACHE[recipe]


def input_values(seed, nonfinite, dtype):
    rng = np.random.default_rng(seed)
    vals = []
    for kind in ("M", "Q", "V", "C", "S", "R"):
        a = np.asarray(rng.uniform(-2.0, 2.0, size=SHAPES[kind]), dtype=dtype)
        if nonfinite and a.size:
            flat = a.reshape(-1)
            for v in (np.nan, np.inf, -np.inf, 0.0):
                flat[rng.integers(flat.size)] = v
        vals.append(a)
    return vals


def _close(got, want, nonfinite, recipe):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    big = 1e100 if want.dtype == np.float64 else 1e30
    trusted = np.isfinite(want) & (np.abs(want) < big)
    rtol, atol = (1e-6, 1e-9) if want.dtype == np.float64 else (1e-3, 1e-5)
    np.testing.assert_allclose(
        got[trusted], want[trusted], rtol=rtol, atol=atol, err_msg=f"recipe {recipe}"
    )
    if nonfinite:
        # NaN must stay NaN. An infinite reference may become finite (a stabilization)
        # or change sign: rewrites do not keep the sign of zeros (-softplus(x) may be
        # -0.0 where log(1 - sigmoid(x)) is +0.0), and 1/±0 is ±inf. It must not be NaN.
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got[nan]), True, err_msg=f"recipe {recipe}")
        inf = np.isinf(want)
        assert not np.isnan(got[inf]).any(), f"NaN where the reference is inf: {recipe}"


@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(recipes())
def test_fast_run_matches_the_reference(recipe):
    ref, fast, safe = compiled(recipe)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed, nonfinite in ((0, False), (1, False), (2, True)):
            args = input_values(seed, nonfinite, recipe[2])
            want = ref(*args)
            got = (safe if nonfinite else fast)(*args)
            for g, w in zip(got, want):
                _close(g, w, nonfinite, recipe)
            # Inputs are not declared mutable: inplace rewrites must leave them alone.
            for a, b in zip(args, input_values(seed, nonfinite, recipe[2])):
                np.testing.assert_array_equal(a, b)
