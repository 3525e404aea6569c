"""``theano.sandbox``'s path: the MRG random streams (``sandbox.rng_mrg``)."""

from theano_dag.sandbox import rng_mrg  # noqa: F401

__all__ = ["rng_mrg"]
