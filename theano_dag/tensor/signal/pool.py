"""``theano.tensor.signal.pool``'s path: the pooling ops live in
:mod:`theano_dag.tensor.nnet.pool`.

>>> import theano_dag.tensor as tt
>>> pool_2d(tt.dtensor4("x"), ws=(2, 2), ignore_border=True).ndim
4
>>> pool_3d(tt.dtensor5("x"), ws=(2, 2, 2), ignore_border=True).ndim
5
>>> Pool.out_shape((1, 4, 4, 4), (2, 2, 2), ndim=3)
[1, 2, 2, 2]
"""

from theano_dag.tensor.nnet.pool import (
    AveragePoolGrad,
    DownsampleFactorMaxGradGrad,
    MaxPoolGrad,
    Pool,
    avg_pool_2d,
    max_pool_2d,
    max_pool_2d_same_size,
    pool_2d,
    pool_3d,
    pool_output_shape,
)

__all__ = [
    "AveragePoolGrad",
    "DownsampleFactorMaxGradGrad",
    "MaxPoolGrad",
    "Pool",
    "avg_pool_2d",
    "max_pool_2d",
    "max_pool_2d_same_size",
    "pool_2d",
    "pool_3d",
    "pool_output_shape",
]
