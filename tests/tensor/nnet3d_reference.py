"""Numpy references for the 3-D convolution and pooling tests, written with plain loops
and independently of the implementation: a convolution by visiting every output voxel's
receptive field, a pooling by visiting Theano's windows one at a time."""

from __future__ import annotations

import itertools

import numpy as np

# -- convolution ------------------------------------------------------------------------


def _pads(border_mode, kshp, dil):
    keff = [(k - 1) * d + 1 for k, d in zip(kshp, dil)]
    if border_mode == "valid":
        return [(0, 0)] * 3
    if border_mode == "full":
        return [(k - 1, k - 1) for k in keff]
    if border_mode == "half":
        return [(k // 2, k // 2) for k in keff]
    if isinstance(border_mode, int):
        border_mode = (border_mode,) * 3
    return [p if isinstance(p, tuple) else (p, p) for p in border_mode]


def _triple(v):
    return (v,) * 3 if isinstance(v, int) else tuple(v)


def _geometry(xshape, wshape, kw):
    st = _triple(kw.get("subsample", 1))
    dil = _triple(kw.get("filter_dilation", 1))
    pads = _pads(kw.get("border_mode", "valid"), wshape[2:], dil)
    padded = [xshape[2 + d] + sum(pads[d]) for d in range(3)]
    out = [(padded[d] - (wshape[2 + d] - 1) * dil[d] - 1) // st[d] + 1 for d in range(3)]
    return st, dil, pads, out


def _field(o, wshape, st, dil):
    """The receptive field of output voxel ``o`` in the padded input (three slices)."""
    return tuple(
        slice(o[d] * st[d], o[d] * st[d] + (wshape[2 + d] - 1) * dil[d] + 1, dil[d])
        for d in range(3)
    )


def _oriented(w, kw):
    return w[:, :, ::-1, ::-1, ::-1] if kw.get("filter_flip", True) else w


def ref_conv3d(x, w, **kw):
    """Each output voxel as the sum of its receptive field times the filter."""
    st, dil, pads, out_sp = _geometry(x.shape, w.shape, kw)
    g = kw.get("num_groups", 1)
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    w = _oriented(w, kw)
    cg, fg = w.shape[1], w.shape[0] // g
    out = np.zeros((x.shape[0], w.shape[0], *out_sp))
    for n, f in itertools.product(range(x.shape[0]), range(w.shape[0])):
        chans = slice(f // fg * cg, (f // fg + 1) * cg)
        for o in itertools.product(*map(range, out_sp)):
            out[(n, f, *o)] = np.sum(xp[(n, chans, *_field(o, w.shape, st, dil))] * w[f])
    return out


def ref_conv3d_grad_inputs(w, gy, imshp, **kw):
    """Each output voxel's gradient times the filter, added back over its field."""
    xshape = (gy.shape[0], w.shape[1] * kw.get("num_groups", 1), *imshp)
    st, dil, pads, out_sp = _geometry(xshape, w.shape, kw)
    g = kw.get("num_groups", 1)
    w = _oriented(w, kw)
    cg, fg = w.shape[1], w.shape[0] // g
    gxp = np.zeros((xshape[0], xshape[1], *(imshp[d] + sum(pads[d]) for d in range(3))))
    for n, f in itertools.product(range(gy.shape[0]), range(w.shape[0])):
        chans = slice(f // fg * cg, (f // fg + 1) * cg)
        for o in itertools.product(*map(range, out_sp)):
            gxp[(n, chans, *_field(o, w.shape, st, dil))] += gy[(n, f, *o)] * w[f]
    inner = tuple(slice(pads[d][0], pads[d][0] + imshp[d]) for d in range(3))
    return gxp[(slice(None), slice(None), *inner)]


def ref_conv3d_grad_weights(x, gy, kshp, **kw):
    """Each output voxel's gradient times its receptive field, summed."""
    g = kw.get("num_groups", 1)
    wshape = (gy.shape[1], x.shape[1] // g, *kshp)
    st, dil, pads, out_sp = _geometry(x.shape, wshape, kw)
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    cg, fg = wshape[1], wshape[0] // g
    gw = np.zeros(wshape)
    for n, f in itertools.product(range(x.shape[0]), range(wshape[0])):
        chans = slice(f // fg * cg, (f // fg + 1) * cg)
        for o in itertools.product(*map(range, out_sp)):
            gw[f] += gy[(n, f, *o)] * xp[(n, chans, *_field(o, wshape, st, dil))]
    return _oriented(gw, kw)


# -- pooling ------------------------------------------------------------------------------


def _regions(shape, ws, stride, pad, ignore_border):
    """Per pooled axis, each window's slice of the padded axis and the slice of it
    that holds real values."""
    regions = []
    for v, w, s, p in zip(shape, ws, stride, pad):
        padded = v + 2 * p
        if ignore_border:
            n = max((padded - w) // s + 1, 0)
        else:
            # Windows open at every stride inside the axis (cut at its end) until one
            # reaches the end.
            n = 0
            while n * s < padded:
                n += 1
                if (n - 1) * s + w >= padded:
                    break
        axis = []
        for j in range(n):
            start, end = j * s, min(j * s + w, padded)
            axis.append((slice(start, end), slice(max(start, p), min(end, p + v))))
        regions.append(axis)
    return regions


def ref_pool3d(x, ws, stride=None, pad=(0, 0, 0), ignore_border=True, mode="max"):
    stride = ws if stride is None else stride
    regions = _regions(x.shape[-3:], ws, stride, pad, ignore_border)
    xp = np.pad(x, [(0, 0)] * (x.ndim - 3) + [(p, p) for p in pad])
    out = np.zeros(x.shape[:-3] + tuple(len(r) for r in regions))
    for lead in np.ndindex(*x.shape[:-3]):
        for o in itertools.product(*(range(len(r)) for r in regions)):
            full = tuple(regions[d][o[d]][0] for d in range(3))
            real = tuple(regions[d][o[d]][1] for d in range(3))
            if mode == "average_inc_pad":
                out[lead + o] = xp[lead + full].mean()
            else:
                vals = xp[lead + real]
                fn = {"max": np.max, "sum": np.sum, "average_exc_pad": np.mean}[mode]
                out[lead + o] = fn(vals)
    return out


def ref_pool3d_grad(x, gz, ws, stride=None, pad=(0, 0, 0), ignore_border=True, mode="max"):
    """Each window hands its gradient to its maxima (max), or spreads it over its
    elements divided by its count (the averages)."""
    stride = ws if stride is None else stride
    regions = _regions(x.shape[-3:], ws, stride, pad, ignore_border)
    xp = np.pad(x, [(0, 0)] * (x.ndim - 3) + [(p, p) for p in pad])
    gxp = np.zeros(xp.shape)
    for lead in np.ndindex(*x.shape[:-3]):
        for o in itertools.product(*(range(len(r)) for r in regions)):
            full = lead + tuple(regions[d][o[d]][0] for d in range(3))
            real = lead + tuple(regions[d][o[d]][1] for d in range(3))
            g = gz[lead + o]
            if mode == "max":
                vals = xp[real]
                gxp[real] += (vals == vals.max()) * g
            elif mode == "sum":
                gxp[real] += g
            elif mode == "average_inc_pad":
                gxp[full] += g / xp[full].size
            else:
                gxp[real] += g / xp[real].size
    inner = tuple(slice(p, p + v) for p, v in zip(pad, x.shape[-3:]))
    return gxp[(Ellipsis, *inner)]
