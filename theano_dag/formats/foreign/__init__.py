"""Conversion between theano_dag's FunctionGraphs and a foreign one (Theano's or PyTensor's).

Theano (theano-pymc) and PyTensor name their graph classes, types and ops alike, so one
walker (:mod:`~theano_dag.formats.foreign.convert`) serves both; a
:class:`~theano_dag.formats.foreign.flavor.Flavor` says where each foreign class lives and
how the two packages differ (:mod:`~theano_dag.formats.theano_interop`,
:mod:`~theano_dag.formats.pytensor_interop`). Ops map by meaning through the rule tables
of :mod:`~theano_dag.formats.foreign.rules`, scalar ops by name through
:mod:`~theano_dag.formats.foreign.scalars`; types keep their dtype and broadcastable
pattern (PyTensor's static shapes too); constants keep their values; a foreign scalar
becomes a 0-d tensor. An op with no counterpart is wrapped in an op whose ``perform``
calls the original's ``perform`` (:class:`~theano_dag.formats.foreign.wrap.ForeignOp` on
this side, ``TheanoDagOp`` on the other; :mod:`~theano_dag.formats.foreign.wrap`);
``strict=True`` raises :class:`NoCounterpartError` naming it instead.
"""

from theano_dag.formats.foreign.convert import from_foreign, to_foreign
from theano_dag.formats.foreign.flavor import Flavor, NoCounterpartError
from theano_dag.formats.foreign.wrap import ForeignOp

__all__ = ["Flavor", "ForeignOp", "NoCounterpartError", "from_foreign", "to_foreign"]
