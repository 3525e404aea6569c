"""``theano.tensor.signal``'s path: pooling (``signal.pool``)."""

from theano_dag.tensor.signal import pool  # noqa: F401

__all__ = ["pool"]
