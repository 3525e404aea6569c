"""``theano.tensor.signal``'s path: pooling (``signal.pool``) and 2-D convolution of
images and image stacks (``signal.conv``)."""

from theano_dag.tensor.signal import conv, pool  # noqa: F401

__all__ = ["conv", "pool"]
