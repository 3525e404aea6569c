"""``theano.sandbox``'s path: the MRG random streams (``sandbox.rng_mrg``) and the
linear-algebra hints (``sandbox.linalg``)."""

from theano_dag.sandbox import linalg, rng_mrg  # noqa: F401

__all__ = ["linalg", "rng_mrg"]
