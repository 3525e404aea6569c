"""Neural-network ops (``theano.tensor.nnet``): activations, softmax, cross-entropies,
2-D convolution, pooling and batch normalization.

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> from theano_dag.tensor import nnet
>>> x = tt.dmatrix("x")
>>> nnet.softmax(nnet.relu(x)).eval({x: np.array([[-1.0, 0.0]])})
array([[0.5, 0.5]])
"""

from theano_dag.tensor.nnet.abstract_conv import (
    AbstractConv2d,
    AbstractConv2d_gradInputs,
    AbstractConv2d_gradWeights,
    Conv2d,
    ConvGradInputs,
    ConvGradWeights,
    border_mode_to_pad,
    conv2d,
    conv2d_grad_wrt_inputs,
    conv2d_grad_wrt_weights,
    get_conv_output_shape,
    get_conv_shape_1axis,
)
from theano_dag.tensor.nnet.bn import (
    batch_normalization,
    batch_normalization_test,
    batch_normalization_train,
)
from theano_dag.tensor.nnet.nnet import (
    CrossentropyCategorical1Hot,
    CrossentropyCategorical1HotGrad,
    CrossentropySoftmax1HotWithBiasDx,
    CrossentropySoftmaxArgmax1HotWithBias,
    LogSoftmax,
    Softmax,
    SoftmaxGrad,
    binary_crossentropy,
    categorical_crossentropy,
    crossentropy_categorical_1hot,
    crossentropy_categorical_1hot_grad,
    crossentropy_softmax_1hot,
    crossentropy_softmax_1hot_with_bias,
    crossentropy_softmax_1hot_with_bias_dx,
    crossentropy_softmax_argmax_1hot_with_bias,
    elu,
    log_softmax,
    logsoftmax,
    logsoftmax_op,
    relu,
    selu,
    sigmoid,
    sigmoid_binary_crossentropy,
    softmax,
    softmax_grad,
    softmax_graph,
    softmax_op,
    softmax_with_bias,
    softplus,
    softsign,
    to_one_hot,
)
from theano_dag.tensor.nnet.pool import (
    AveragePoolGrad,
    DownsampleFactorMaxGradGrad,
    MaxPoolGrad,
    Pool,
    avg_pool_2d,
    max_pool_2d,
    pool_2d,
    pool_output_shape,
)

__all__ = [
    "AbstractConv2d", "AbstractConv2d_gradInputs", "AbstractConv2d_gradWeights", "Conv2d",
    "ConvGradInputs", "ConvGradWeights", "border_mode_to_pad", "conv2d",
    "conv2d_grad_wrt_inputs", "conv2d_grad_wrt_weights", "get_conv_output_shape",
    "get_conv_shape_1axis",
    "batch_normalization", "batch_normalization_test", "batch_normalization_train",
    "CrossentropyCategorical1Hot", "CrossentropyCategorical1HotGrad",
    "CrossentropySoftmax1HotWithBiasDx", "CrossentropySoftmaxArgmax1HotWithBias",
    "LogSoftmax", "Softmax", "SoftmaxGrad", "binary_crossentropy", "categorical_crossentropy",
    "crossentropy_categorical_1hot", "crossentropy_categorical_1hot_grad",
    "crossentropy_softmax_1hot", "crossentropy_softmax_1hot_with_bias",
    "crossentropy_softmax_1hot_with_bias_dx", "crossentropy_softmax_argmax_1hot_with_bias",
    "elu", "log_softmax", "logsoftmax", "logsoftmax_op", "relu", "selu", "sigmoid",
    "sigmoid_binary_crossentropy", "softmax", "softmax_grad", "softmax_graph", "softmax_op",
    "softmax_with_bias", "softplus", "softsign", "to_one_hot",
    "AveragePoolGrad", "DownsampleFactorMaxGradGrad", "MaxPoolGrad", "Pool", "avg_pool_2d",
    "max_pool_2d", "pool_2d", "pool_output_shape",
]
