"""ResNet50 (He, Zhang, Ren, Sun, CVPR 2016), as published: a 7x7 stem, four stages of
bottleneck blocks (3, 4, 6, 3), the stride on each stage's first 1x1 convolution (the
paper's Caffe model), projection shortcuts where the shape changes, global average pooling
and a 1000-way softmax.

>>> from theano_dag.models import NumpyOps, init_params, resnet50
>>> import numpy as np
>>> params = init_params(resnet50, (1, 3, 32, 32))
>>> len(params.arrays), params.nbytes // 2**20
(267, 97)
"""

from __future__ import annotations

__all__ = ["resnet50", "STAGES"]

# (blocks, bottleneck width) per stage; each block's output has 4x the width
STAGES = ((3, 64), (4, 128), (6, 256), (3, 512))
EPS = 1e-5


def _bottleneck(net, x, name, width, stride, project):
    ops = net.ops
    y = net.conv_bn(x, f"{name}.a", width, 1, stride, eps=EPS)
    y = net.conv_bn(y, f"{name}.b", width, 3, 1, 1, eps=EPS)
    y = net.conv_bn(y, f"{name}.c", 4 * width, 1, eps=EPS, act=False, gamma="gamma_branch")
    if project:
        x = net.conv_bn(x, f"{name}.proj", 4 * width, 1, stride, eps=EPS, act=False)
    return ops.relu(ops.add(y, x))


def resnet50(net, x, classes=1000, logits=False):
    """Class probabilities (``logits=True``: the logits) of NCHW images ``x`` (any size
    from 32x32; 224 or 299 as published), built with ``net.ops``."""
    ops = net.ops
    y = net.conv_bn(x, "stem", 64, 7, 2, 3, eps=EPS)
    y = ops.max_pool(y, 3, 2, 1)
    for s, (blocks, width) in enumerate(STAGES):
        for b in range(blocks):
            stride = 2 if b == 0 and s > 0 else 1
            y = _bottleneck(net, y, f"res{s + 2}.{b}", width, stride, project=b == 0)
    z = net.dense(ops.mean_hw(y), "fc", classes)
    return z if logits else ops.softmax(z)
