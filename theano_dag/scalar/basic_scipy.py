"""Theano's ``theano.scalar.basic_scipy``: the scalar special functions by Theano's class
names (``GammaLn``, ``Psi``, ``TriGamma``, ``Erfinv``...), and the regularized incomplete
gamma functions ``gammainc(k, x)`` (lower, ``P``) and ``gammaincc(k, x)`` (upper,
``Q = 1 - P``), which compute with ``scipy.special`` when they run.

>>> from theano_dag.scalar.math import Gammaln
>>> GammaLn is Gammaln, gammainc.output_types(("int32", "float32"))
(True, ('float64',))
"""

from __future__ import annotations

import importlib.util

from theano_dag.graph.null_type import grad_not_implemented
from theano_dag.scalar.basic import (
    BinaryScalarOp,
    upgrade_to_float,
    upgrade_to_float_no_complex,
    vocabulary,
)
from theano_dag.scalar.math import (
    I0,
    I1,
    J0,
    J1,
    Chi2SF,
    Erf,
    Erfc,
    Erfcinv,
    Erfcx,
    Erfinv,
    Gamma,
    Gammaln,
    Iv,
    Jv,
    Psi,
    Tri_gamma,
    _scipy_special,
    chi2sf,
    erf,
    erfc,
    erfcinv,
    erfcx,
    erfinv,
    gamma,
    gammaln,
    i0,
    i1,
    iv,
    j0,
    j1,
    jv,
    psi,
    tri_gamma,
)

# Theano's flag: whether scipy.special is there (these ops compute with it). Found without
# importing scipy, which loads at the first call of one of them.
imported_scipy_special = importlib.util.find_spec("scipy") is not None

__all__ = [
    "Chi2SF",
    "Erf",
    "Erfc",
    "Erfcinv",
    "Erfcx",
    "Erfinv",
    "Gamma",
    "GammaInc",
    "GammaIncC",
    "GammaLn",
    "I0",
    "I1",
    "Iv",
    "J0",
    "J1",
    "Jv",
    "Psi",
    "TriGamma",
    "chi2sf",
    "erf",
    "erfc",
    "erfcinv",
    "erfcx",
    "erfinv",
    "gamma",
    "gammainc",
    "gammaincc",
    "gammaln",
    "i0",
    "i1",
    "iv",
    "j0",
    "j1",
    "jv",
    "psi",
    "tri_gamma",
    "upgrade_to_float",
    "upgrade_to_float_no_complex",
]

# Theano's class names of the ops theano_dag.scalar.math defines.
GammaLn = Gammaln
TriGamma = Tri_gamma


def _d_lower_dx(k, x):
    # d/dx P(k, x) = x**(k - 1) * exp(-x) / gamma(k), in logs so that it does not overflow
    of = vocabulary(x)
    return of.exp((k - 1) * of.log(x) - x - of.gammaln(k))


class GammaInc(BinaryScalarOp):
    """``gammainc(k, x)``: the regularized lower incomplete gamma function
    ``P(k, x) = gamma(k, x) / Gamma(k)`` (``scipy.special.gammainc``). Its gradient in
    ``x`` is ``x**(k - 1) * exp(-x) / Gamma(k)``; in ``k`` it has none (Theano's)."""

    nfunc = staticmethod(lambda k, x: _scipy_special("gammainc")(k, x))

    def grad(self, inputs, output_grads):
        k, x = inputs
        (gz,) = output_grads
        return [grad_not_implemented(self, 0, k), gz * _d_lower_dx(k, x)]


class GammaIncC(BinaryScalarOp):
    """``gammaincc(k, x)``: the regularized upper incomplete gamma function
    ``Q(k, x) = 1 - P(k, x)`` (``scipy.special.gammaincc``); its gradient in ``x`` is
    minus ``gammainc``'s, none in ``k``."""

    nfunc = staticmethod(lambda k, x: _scipy_special("gammaincc")(k, x))

    def grad(self, inputs, output_grads):
        k, x = inputs
        (gz,) = output_grads
        return [grad_not_implemented(self, 0, k), -gz * _d_lower_dx(k, x)]


gammainc = GammaInc(upgrade_to_float_no_complex, name="gammainc")
gammaincc = GammaIncC(upgrade_to_float_no_complex, name="gammaincc")
