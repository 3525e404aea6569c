"""The in-place elementwise ops (``theano.tensor.inplace``): ``<name>_inplace`` is
``Elemwise(<scalar op>, {0: 0})``, which writes its result into its first input.

As in Theano, the result has the first input's dtype (``int_vector + float_vector`` in place
is computed as numpy does, then cast back to the integers, truncating) and its shape (an
input that the others would broadcast is refused). Graphs rarely need them written by
hand: the inplace rewrites make the same ops from the ordinary ones.

>>> import numpy as np
>>> from theano_dag import function, tensor as tt
>>> x = tt.dvector("x")
>>> out = exp_inplace(x)
>>> out.owner.op.destroy_map
{0: [0]}
>>> f = function([x], out, accept_inplace=True)
>>> v = np.zeros(2)
>>> f(v)
array([1., 1.])
"""

from __future__ import annotations

import copy

from theano_dag import scalar as ts
from theano_dag.scalar.basic import transfer_type
from theano_dag.tensor.elemwise import DimShuffle, Elemwise

# Theano's names (the ones before "_inplace") and the scalar op of each.
_OPS = {
    "lt": ts.lt,
    "gt": ts.gt,
    "le": ts.le,
    "ge": ts.ge,
    "eq": ts.eq,
    "neq": ts.neq,
    "and_": ts.and_,
    "or_": ts.or_,
    "xor": ts.xor,
    "invert": ts.invert,
    "abs_": ts.abs_,
    "exp": ts.exp,
    "exp2": ts.exp2,
    "expm1": ts.expm1,
    "neg": ts.neg,
    "inv": ts.reciprocal,
    "reciprocal": ts.reciprocal,
    "log": ts.log,
    "log1p": ts.log1p,
    "log2": ts.log2,
    "log10": ts.log10,
    "sgn": ts.sgn,
    "ceil": ts.ceil,
    "floor": ts.floor,
    "trunc": ts.trunc,
    "round_half_to_even": ts.round_half_to_even,
    "round_half_away_from_zero": ts.round_half_away_from_zero,
    "sqr": ts.sqr,
    "sqrt": ts.sqrt,
    "deg2rad": ts.deg2rad,
    "rad2deg": ts.rad2deg,
    "cos": ts.cos,
    "arccos": ts.arccos,
    "sin": ts.sin,
    "arcsin": ts.arcsin,
    "tan": ts.tan,
    "arctan": ts.arctan,
    "arctan2": ts.arctan2,
    "cosh": ts.cosh,
    "arccosh": ts.arccosh,
    "sinh": ts.sinh,
    "arcsinh": ts.arcsinh,
    "tanh": ts.tanh,
    "arctanh": ts.arctanh,
    "erf": ts.erf,
    "erfc": ts.erfc,
    "erfcx": ts.erfcx,
    "erfinv": ts.erfinv,
    "erfcinv": ts.erfcinv,
    "gamma": ts.gamma,
    "gammaln": ts.gammaln,
    "psi": ts.psi,
    "tri_gamma": ts.tri_gamma,
    "chi2sf": ts.chi2sf,
    "j0": ts.j0,
    "j1": ts.j1,
    "jv": ts.jv,
    "i0": ts.i0,
    "i1": ts.i1,
    "iv": ts.iv,
    "sigmoid": ts.sigmoid,
    "softplus": ts.softplus,
    "second": ts.second,
    "maximum": ts.maximum,
    "minimum": ts.minimum,
    "add": ts.add,
    "sub": ts.sub,
    "mul": ts.mul,
    "true_div": ts.true_div,
    "int_div": ts.int_div,
    "mod": ts.mod,
    "pow": ts.pow,
    "conj": ts.conj,
}

__all__ = sorted(f"{name}_inplace" for name in _OPS)


def _first_input_dtype(op):
    """``op`` computing as numpy would and giving the first input's dtype (Theano's
    ``transfer_type(0)`` scalar ops), named ``<op>_inplace``."""
    new = copy.copy(op)
    new.output_types_preference = transfer_type(0)
    new.compute_in_output_dtype = False  # int += float: the float sum, then truncated
    new.name = f"{op.name}_inplace"
    return new


for _name, _op in _OPS.items():
    globals()[f"{_name}_inplace"] = Elemwise(_first_input_dtype(_op), {0: 0})
fill_inplace = globals()["second_inplace"]
__all__.append("fill_inplace")
del _name, _op


def transpose_inplace(x):
    """``x`` with its axes reversed, as a view of ``x`` (no copy; Theano's name).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> m = tt.dmatrix("m")
    >>> transpose_inplace(m).eval({m: np.arange(6.0).reshape(2, 3)}).shape
    (3, 2)
    """
    return DimShuffle(x.broadcastable, list(range(x.ndim - 1, -1, -1)), inplace=True)(x)


__all__.append("transpose_inplace")
