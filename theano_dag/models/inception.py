"""InceptionV3 (Szegedy et al., "Rethinking the Inception Architecture", CVPR 2016), as
published: the stem, three Inception-A blocks (35x35), reduction A, four Inception-B
blocks with the 7x7 convolutions factorised into 1x7 and 7x1, reduction B, two
Inception-C blocks with the expanded 1x3 / 3x1 filter banks, global average pooling and a
1000-way softmax. Every convolution is followed by batch normalisation and relu. The
smallest image it takes is 75x75 (299x299 as published).

>>> from theano_dag.models import init_params, inception_v3
>>> params = init_params(inception_v3, (1, 3, 75, 75))
>>> sum(a.size for n, a in params.arrays.items() if n.endswith(".w")) // 10**6
23
"""

from __future__ import annotations

__all__ = ["inception_v3"]

EPS = 1e-3


def _block_a(net, x, name, pool_features):
    ops, cb = net.ops, net.conv_bn
    b1 = cb(x, f"{name}.1x1", 64, 1)
    b5 = cb(cb(x, f"{name}.5x5_1", 48, 1), f"{name}.5x5_2", 64, 5, pad=2)
    b3 = cb(x, f"{name}.3x3dbl_1", 64, 1)
    b3 = cb(cb(b3, f"{name}.3x3dbl_2", 96, 3, pad=1), f"{name}.3x3dbl_3", 96, 3, pad=1)
    bp = cb(ops.avg_pool(x, 3, 1, 1), f"{name}.pool", pool_features, 1)
    return ops.concat([b1, b5, b3, bp])


def _reduction_a(net, x, name):
    ops, cb = net.ops, net.conv_bn
    b3 = cb(x, f"{name}.3x3", 384, 3, 2)
    bd = cb(x, f"{name}.3x3dbl_1", 64, 1)
    bd = cb(cb(bd, f"{name}.3x3dbl_2", 96, 3, pad=1), f"{name}.3x3dbl_3", 96, 3, 2)
    return ops.concat([b3, bd, ops.max_pool(x, 3, 2)])


def _block_b(net, x, name, c7):
    """The factorised 7x7: a 1x7 then a 7x1 convolution (and twice that on the second
    branch), each padded to keep the 17x17 grid."""
    ops, cb = net.ops, net.conv_bn
    b1 = cb(x, f"{name}.1x1", 192, 1)
    b7 = cb(x, f"{name}.7x7_1", c7, 1)
    b7 = cb(b7, f"{name}.7x7_2", c7, (1, 7), pad=(0, 3))
    b7 = cb(b7, f"{name}.7x7_3", 192, (7, 1), pad=(3, 0))
    bd = cb(x, f"{name}.7x7dbl_1", c7, 1)
    for i, (cout, k, pad) in enumerate(
        [(c7, (7, 1), (3, 0)), (c7, (1, 7), (0, 3)), (c7, (7, 1), (3, 0)), (192, (1, 7), (0, 3))]
    ):
        bd = cb(bd, f"{name}.7x7dbl_{i + 2}", cout, k, pad=pad)
    bp = cb(ops.avg_pool(x, 3, 1, 1), f"{name}.pool", 192, 1)
    return ops.concat([b1, b7, bd, bp])


def _reduction_b(net, x, name):
    ops, cb = net.ops, net.conv_bn
    b3 = cb(cb(x, f"{name}.3x3_1", 192, 1), f"{name}.3x3_2", 320, 3, 2)
    b7 = cb(x, f"{name}.7x7x3_1", 192, 1)
    b7 = cb(b7, f"{name}.7x7x3_2", 192, (1, 7), pad=(0, 3))
    b7 = cb(b7, f"{name}.7x7x3_3", 192, (7, 1), pad=(3, 0))
    b7 = cb(b7, f"{name}.7x7x3_4", 192, 3, 2)
    return ops.concat([b3, b7, ops.max_pool(x, 3, 2)])


def _block_c(net, x, name):
    ops, cb = net.ops, net.conv_bn

    def split(y, tag):  # the expanded filter bank: 1x3 and 3x1 side by side
        return [
            cb(y, f"{name}.{tag}a", 384, (1, 3), pad=(0, 1)),
            cb(y, f"{name}.{tag}b", 384, (3, 1), pad=(1, 0)),
        ]

    b1 = cb(x, f"{name}.1x1", 320, 1)
    b3 = ops.concat(split(cb(x, f"{name}.3x3_1", 384, 1), "3x3_2"))
    bd = cb(cb(x, f"{name}.3x3dbl_1", 448, 1), f"{name}.3x3dbl_2", 384, 3, pad=1)
    bd = ops.concat(split(bd, "3x3dbl_3"))
    bp = cb(ops.avg_pool(x, 3, 1, 1), f"{name}.pool", 192, 1)
    return ops.concat([b1, b3, bd, bp])


def inception_v3(net, x, classes=1000, logits=False):
    """Class probabilities (``logits=True``: the logits) of NCHW images ``x`` (from
    75x75; 299x299 as published), built with ``net.ops``."""
    ops, cb = net.ops, net.conv_bn
    y = cb(x, "stem.1", 32, 3, 2)
    y = cb(y, "stem.2", 32, 3)
    y = cb(y, "stem.3", 64, 3, pad=1)
    y = ops.max_pool(y, 3, 2)
    y = cb(y, "stem.4", 80, 1)
    y = cb(y, "stem.5", 192, 3)
    y = ops.max_pool(y, 3, 2)
    for i, pool_features in enumerate((32, 64, 64)):
        y = _block_a(net, y, f"mixed{i}", pool_features)
    y = _reduction_a(net, y, "mixed3")
    for i, c7 in enumerate((128, 160, 160, 192)):
        y = _block_b(net, y, f"mixed{i + 4}", c7)
    y = _reduction_b(net, y, "mixed8")
    y = _block_c(net, y, "mixed9")
    y = _block_c(net, y, "mixed10")
    z = net.dense(ops.mean_hw(y), "fc", classes)
    return z if logits else ops.softmax(z)
