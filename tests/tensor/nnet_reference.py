"""Numpy references for the nnet tests, written with plain loops and independently of
the implementation (``theano_dag.tensor.nnet``): convolution by summing over every
output position and tap, pooling by visiting Theano's windows one at a time."""

from __future__ import annotations

import numpy as np


def ref_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def ref_log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _pads(mode, kshp, dil):
    out = []
    for d in range(2):
        keff = (kshp[d] - 1) * dil[d] + 1
        if mode == "valid":
            p = (0, 0)
        elif mode == "full":
            p = (keff - 1, keff - 1)
        elif mode == "half":
            p = (keff // 2, keff // 2)
        else:
            p = mode[d] if isinstance(mode[d], tuple) else (mode[d], mode[d])
        out.append(p)
    return out


def _conv_args(x_shape, w_shape, kw):
    mode = kw.get("border_mode", "valid")
    if isinstance(mode, int):
        mode = (mode, mode)
    st = kw.get("subsample", (1, 1))
    st = (st, st) if isinstance(st, int) else st
    dil = kw.get("filter_dilation", (1, 1))
    dil = (dil, dil) if isinstance(dil, int) else dil
    return (
        _pads(mode, w_shape[2:], dil),
        st,
        dil,
        kw.get("filter_flip", True),
        kw.get("num_groups", 1),
    )


def ref_conv2d(x, w, **kw):
    pads, st, dil, flip, groups = _conv_args(x.shape, w.shape, kw)
    if flip:
        w = w[:, :, ::-1, ::-1]
    xp = np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]))
    n, _, hp, wp = xp.shape
    f, cg, kh, kw_ = w.shape
    oh = (hp - dil[0] * (kh - 1) - 1) // st[0] + 1
    ow = (wp - dil[1] * (kw_ - 1) - 1) // st[1] + 1
    out = np.zeros((n, f, oh, ow))
    for k in range(f):
        g = k // (f // groups)
        for i in range(oh):
            for j in range(ow):
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    i * st[0] : i * st[0] + dil[0] * (kh - 1) + 1 : dil[0],
                    j * st[1] : j * st[1] + dil[1] * (kw_ - 1) + 1 : dil[1],
                ]
                out[:, k, i, j] = (patch * w[k]).sum(axis=(1, 2, 3))
    return out


def ref_conv_grad_inputs(w, gy, imshp, **kw):
    pads, st, dil, flip, groups = _conv_args(None, w.shape, kw)
    if flip:
        w = w[:, :, ::-1, ::-1]
    f, cg, kh, kw_ = w.shape
    n, _, oh, ow = gy.shape
    dxp = np.zeros((n, cg * groups, imshp[0] + sum(pads[0]), imshp[1] + sum(pads[1])))
    for k in range(f):
        g = k // (f // groups)
        for i in range(oh):
            for j in range(ow):
                for a in range(kh):
                    for b in range(kw_):
                        dxp[
                            :, g * cg : (g + 1) * cg, i * st[0] + a * dil[0], j * st[1] + b * dil[1]
                        ] += gy[:, k, i, j][:, None] * w[k, :, a, b]
    return dxp[:, :, pads[0][0] : pads[0][0] + imshp[0], pads[1][0] : pads[1][0] + imshp[1]]


def ref_conv_grad_weights(x, gy, kshp, **kw):
    pads, st, dil, flip, groups = _conv_args(x.shape, (None, None, *kshp), kw)
    xp = np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]))
    f = gy.shape[1]
    cg = x.shape[1] // groups
    dw = np.zeros((f, cg, *kshp))
    for k in range(f):
        g = k // (f // groups)
        for a in range(kshp[0]):
            for b in range(kshp[1]):
                for i in range(gy.shape[2]):
                    for j in range(gy.shape[3]):
                        dw[k, :, a, b] += (
                            gy[:, k, i, j][:, None]
                            * xp[
                                :,
                                g * cg : (g + 1) * cg,
                                i * st[0] + a * dil[0],
                                j * st[1] + b * dil[1],
                            ]
                        ).sum(axis=0)
    return dw[:, :, ::-1, ::-1] if flip else dw


def _pool_regions(length, ws, st, pad, ignore_border, mode):
    """Theano's windows along one axis: (start, end) in padded coordinates, plus the
    part of it that is kept for the mode."""
    padded = length + 2 * pad
    if ignore_border:
        n = max((padded - ws) // st + 1, 0)
    elif st >= ws:
        n = (padded - 1) // st + 1
    else:
        n = max(0, (padded - 1 - ws + st) // st) + 1
    regions = []
    for j in range(n):
        start, end = j * st, min(j * st + ws, padded)
        if mode != "average_inc_pad":
            start, end = max(start, pad), min(end, padded - pad)
        regions.append((start, end))
    return regions


def ref_pool(x, ws, stride=None, pad=(0, 0), ignore_border=True, mode="max"):
    stride = ws if stride is None else stride
    xp = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(pad[0], pad[0]), (pad[1], pad[1])])
    rows = _pool_regions(x.shape[-2], ws[0], stride[0], pad[0], ignore_border, mode)
    cols = _pool_regions(x.shape[-1], ws[1], stride[1], pad[1], ignore_border, mode)
    out = np.zeros(x.shape[:-2] + (len(rows), len(cols)))
    fn = {"max": np.max, "sum": np.sum}.get(mode, np.mean)
    for i, (r0, r1) in enumerate(rows):
        for j, (c0, c1) in enumerate(cols):
            out[..., i, j] = fn(xp[..., r0:r1, c0:c1], axis=(-2, -1))
    return out


def ref_max_pool_grad(x, gz, ws, stride=None, pad=(0, 0), ignore_border=True):
    stride = ws if stride is None else stride
    xp = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(pad[0], pad[0]), (pad[1], pad[1])])
    gx = np.zeros(xp.shape)
    rows = _pool_regions(x.shape[-2], ws[0], stride[0], pad[0], ignore_border, "max")
    cols = _pool_regions(x.shape[-1], ws[1], stride[1], pad[1], ignore_border, "max")
    for idx in np.ndindex(*x.shape[:-2]):
        for i, (r0, r1) in enumerate(rows):
            for j, (c0, c1) in enumerate(cols):
                win = xp[idx][r0:r1, c0:c1]
                hit = win == win.max()
                gx[idx][r0:r1, c0:c1] += hit * gz[idx][i, j]
    return gx[..., pad[0] : pad[0] + x.shape[-2], pad[1] : pad[1] + x.shape[-1]]


def ref_avg_pool_grad(x, gz, ws, stride=None, pad=(0, 0), ignore_border=True, mode="sum"):
    stride = ws if stride is None else stride
    shape = x.shape[:-2] + (x.shape[-2] + 2 * pad[0], x.shape[-1] + 2 * pad[1])
    gx = np.zeros(shape)
    rows = _pool_regions(x.shape[-2], ws[0], stride[0], pad[0], ignore_border, mode)
    cols = _pool_regions(x.shape[-1], ws[1], stride[1], pad[1], ignore_border, mode)
    for i, (r0, r1) in enumerate(rows):
        for j, (c0, c1) in enumerate(cols):
            count = 1 if mode == "sum" else (r1 - r0) * (c1 - c0)
            gx[..., r0:r1, c0:c1] += gz[..., i : i + 1, j : j + 1] / count
    return gx[..., pad[0] : pad[0] + x.shape[-2], pad[1] : pad[1] + x.shape[-1]]


def ref_bn_train(x, g, b, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    invstd = 1 / np.sqrt(var + eps)
    return (x - mean) * invstd * g + b, mean, invstd
