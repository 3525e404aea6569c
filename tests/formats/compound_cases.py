"""theano_dag's compound scalar ops (one op each, a formula in elementary ops elsewhere)
and the inputs that test their conversions: the edges their rules are for (the 0 *
log(0) terms of a cross-entropy, inf - inf, a 1 + y that rounds to 1) and values in
between. Shared by the ONNX, PyTensor and Theano tests."""

import numpy as np

from theano_dag import scalar as ts
from theano_dag import tensor as tt
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor import nnet

# probabilities o, targets t, logits z and their targets
_O = [0, 1, 0, 1, 0.3, 1e-30, 1 - 1e-7, 0.5, 0.2, 1e-8]
_T = [0, 1, 1, 0, 0.7, 0, 1, 0.5, 1, 0]
_Z = [-np.inf, np.inf, -800, 800, 0, 40, -40, 1e-3, np.nan, 17]
_TZ = [0, 1, 1, 0, 0.5, 1, 0, 0.3, 0.5, 1]
_NEG = [-np.inf, -800, -40, -1, -0.7, -1e-3, -1e-20, 0, -0.0, np.nan]

#: name -> (function of tensors, the values of its arguments)
COMPOUND = {
    "binary_crossentropy": (nnet.binary_crossentropy, (_O, _T)),
    "binary_crossentropy_grad": (tt.Elemwise(ts.binary_crossentropy_grad), (_O, _T)),
    "sigmoid_binary_crossentropy": (nnet.sigmoid_binary_crossentropy, (_Z, _TZ)),
    "sech2": (tt.sech2, (_Z,)),
    "exp_sub": (tt.Elemwise(ts.exp_sub), (_Z, _Z[::-1])),
    "softsign": (nnet.softsign, (_Z,)),
    "logaddexp": (tt.logaddexp, (_Z, _Z[::-1])),
    "log1mexp": (tt.log1mexp, (_NEG,)),
    "xlogx": (tt.xlogx.xlogx, (np.abs(_Z),)),
    "xlogy0": (tt.xlogx.xlogy0, (_O, _Z)),
}
_X = [-np.inf, -30, -1, 0, 0.3, 1.4, 2.5, 2.7, 8.9, 9.1, 25.9, 26.1, 300, 1e5, np.inf, np.nan]
#: the ops of erfc's tail: PyTensor and Theano have erfcx and erfc, ONNX neither
ERFC_TAIL = {
    "erfcx_deriv": (tt.erfcx_deriv, (_X,)),
    "log_erfc": (tt.log_erfc, (_X,)),
}


def compound_case(name, dtype):
    """``(inputs, output, values)`` of the case ``name`` in ``dtype``."""
    build, args = {**COMPOUND, **ERFC_TAIL}[name]
    xs = [tt.vector(f"x{k}", dtype=dtype) for k in range(len(args))]
    return xs, build(*xs), [np.asarray(a, dtype=dtype) for a in args]


def check_formula_conversion(name, dtype, ours, to_other, from_other, runs):
    """Case ``name`` in ``dtype`` converted to another library by ``to_other`` (strict and
    not) as its ops of the formula, no node wrapping ours (``TheanoDag{...}``); each of
    ``runs`` (``run(graph, values)`` of the other library's modes) and ``ours`` of the
    graph converted back by ``from_other`` give ``ours``'s values within 8 ulps."""
    xs, out, values = compound_case(name, dtype)
    fg = FunctionGraph(xs, [out], clone=False)
    with np.errstate(all="ignore"):
        (want,) = ours(fg, values)
    rtol = 8 * np.finfo(dtype).eps
    for strict in (True, False):
        other = to_other(fg, strict=strict)
        assert not [n for n in other.toposort() if str(n.op).startswith("TheanoDag{")]
        with np.errstate(all="ignore"):
            got = [run(other, values)[0] for run in runs]
            got.append(ours(from_other(other, strict=True), values)[0])
        for g in got:
            assert g.dtype == want.dtype
            np.testing.assert_allclose(g, want, rtol=rtol, atol=0)
