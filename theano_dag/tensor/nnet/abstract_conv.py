"""Convolution on NCHW and NCDHW tensors (``theano.tensor.nnet.abstract_conv``).

Three Ops per number of spatial dimensions (2 or 3), each the transpose of the others so
gradients of any order close over them:

- ``AbstractConv2d(img, kern)`` / ``AbstractConv3d``: the forward convolution;
- ``AbstractConv2d_gradWeights(img, topgrad, shape)`` / ``AbstractConv3d_gradWeights``:
  gradient w.r.t. the filters;
- ``AbstractConv2d_gradInputs(kern, topgrad, shape)`` / ``AbstractConv3d_gradInputs``:
  gradient w.r.t. the image.

``shape`` is an int vector with the spatial lengths of the result (with a stride they
are not recoverable from ``topgrad`` alone). The 2-D and 3-D Ops share their code
(``AbstractConv``, ``AbstractConv_gradWeights``, ``AbstractConv_gradInputs``, for
``convdim`` spatial dimensions), as in Theano; they are distinct classes so that an
engine that has kernels for one (the CPU engine's 2-D emitters) is not handed the other.

``perform`` is im2col in numpy: ``sliding_window_view`` gives every receptive field
without copying and one ``tensordot`` (BLAS) contracts it with the filters; the
image gradient scatters back with one strided add per filter tap. ``filter_flip=True``
(the default, as in Theano) is a true convolution; ``False`` is cross-correlation.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from theano_dag.config import config
from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.op import Op
from theano_dag.scalar import upcast
from theano_dag.tensor import basic as tb
from theano_dag.tensor import math as tm
from theano_dag.tensor.arrays import Assert
from theano_dag.tensor.shape import checked_shape
from theano_dag.tensor.type import TensorType, float_dtypes, int_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "imported_scipy_signal",
    "bilinear_upsampling",
    "bilinear_kernel_1D",
    "bilinear_kernel_2D",
    "causal_conv1d",
    "separable_conv2d",
    "separable_conv3d",
    "assert_conv_shape",
    "assert_shape",
    "check_conv_gradinputs_shape",
    "get_conv_gradinputs_shape",
    "get_conv_gradinputs_shape_1axis",
    "get_conv_gradweights_shape",
    "get_conv_gradweights_shape_1axis",
    "AbstractConv",
    "AbstractConv_gradWeights",
    "AbstractConv_gradInputs",
    "AbstractConv2d",
    "AbstractConv2d_gradWeights",
    "AbstractConv2d_gradInputs",
    "AbstractConv3d",
    "AbstractConv3d_gradWeights",
    "AbstractConv3d_gradInputs",
    "BaseAbstractConv",
    "Conv2dBiasAct",
    "Conv2d",
    "ConvGradWeights",
    "ConvGradInputs",
    "conv2d",
    "conv2d_grad_wrt_inputs",
    "conv2d_transpose",
    "conv2d_grad_wrt_weights",
    "conv3d",
    "conv3d_grad_wrt_inputs",
    "conv3d_grad_wrt_weights",
    "get_conv_output_shape",
    "get_conv_shape_1axis",
    "border_mode_to_pad",
    "check_conv_groups",
    "check_grad_inputs_groups",
    "check_grad_weights_groups",
]

# The layout named in error messages, per number of spatial dimensions.
_LAYOUTS = {2: "NCHW", 3: "NCDHW"}


# -- parameters -------------------------------------------------------------------------


# Theano's flag that its convolutions' Python code can run (it needs scipy.signal); these
# need nothing optional, so they always can.
imported_scipy_signal = True


def _ints(value, n, name, who, minimum):
    """``value`` (an int, or ``n`` ints) as a tuple of ``n`` ints ``>= minimum``."""
    if isinstance(value, (int, np.integer)):
        value = (value,) * n
    try:
        vals = tuple(value)
    except TypeError:
        vals = None
    if vals is None or len(vals) != n:
        kind = "a pair" if n == 2 else f"a tuple of {n}"
        raise TypeError(f"{who}: {name} must be an int or {kind} of ints, got {value!r}")
    if not all(isinstance(v, (int, np.integer)) and v >= minimum for v in vals):
        raise ValueError(f"{who}: {name} must be ints >= {minimum}, got {value!r}")
    return tuple(int(v) for v in vals)


def _norm_border_mode(border_mode, who, convdim=2):
    """Canonical border mode: ``'valid'``, ``'full'``, ``'half'``, or a tuple of
    ``convdim`` entries, each an int (symmetric padding) or a ``(before, after)`` pair."""
    kind = "a pair" if convdim == 2 else f"a tuple of {convdim}"
    expected = f"'valid', 'full', 'half', an int or {kind}"
    if isinstance(border_mode, str):
        if border_mode not in ("valid", "full", "half"):
            raise ValueError(f"{who}: border_mode must be {expected}, got {border_mode!r}")
        return border_mode
    if isinstance(border_mode, (int, np.integer)):
        border_mode = (border_mode,) * convdim
    if not isinstance(border_mode, (tuple, list)) or len(border_mode) != convdim:
        raise ValueError(f"{who}: border_mode must be {expected}, got {border_mode!r}")
    out = []
    for p in border_mode:
        if isinstance(p, (int, np.integer)):
            if p < 0:
                raise ValueError(f"{who}: padding must be >= 0, got {border_mode!r}")
            out.append(int(p))
        else:
            lo, hi = _ints(p, 2, "border_mode", who, 0)
            out.append(lo if lo == hi else (lo, hi))
    return "valid" if out == [0] * convdim else tuple(out)


def border_mode_to_pad(border_mode, kshp, dilation=None):
    """The ``(before, after)`` zero padding per spatial axis that a border mode means for
    filters of spatial shape ``kshp`` (2 or 3 axes).

    >>> border_mode_to_pad("half", (3, 5))
    ((1, 1), (2, 2))
    >>> border_mode_to_pad((1, (0, 2)), (3, 3))
    ((1, 1), (0, 2))
    >>> border_mode_to_pad("full", (3, 1, 2))
    ((2, 2), (0, 0), (1, 1))
    """
    nd = len(kshp)
    dilation = (1,) * nd if dilation is None else dilation
    mode = _norm_border_mode(border_mode, "border_mode_to_pad", nd)
    if any(isinstance(k, (int, np.integer)) and k < 1 for k in kshp):
        # (the engines padded by negative lengths, or summed no taps, each its own way)
        raise ValueError(
            f"convolution: filters of spatial shape {tuple(int(k) for k in kshp)} have no "
            "taps along an axis (each length must be at least 1)"
        )
    pads = []
    for d in range(nd):
        keff = (kshp[d] - 1) * dilation[d] + 1
        if mode == "valid":
            p = 0
        elif mode == "full":
            p = keff - 1
        elif mode == "half":
            p = keff // 2
        else:
            p = mode[d]
        pads.append(p if isinstance(p, tuple) else (p, p))
    return tuple(pads)


def get_conv_shape_1axis(image_shape, kernel_shape, border_mode, subsample, dilation=1):
    """Output length along one axis (ints or symbolic scalars; None if unknown).

    >>> get_conv_shape_1axis(7, 3, "valid", 2), get_conv_shape_1axis(7, 3, "full", 1)
    (3, 9)
    """
    if image_shape is None or kernel_shape is None:
        return None
    if isinstance(border_mode, str):
        keff = (kernel_shape - 1) * dilation + 1
        pad = {"valid": 0, "full": keff - 1, "half": keff // 2}[border_mode]
        total = 2 * pad
    elif isinstance(border_mode, tuple):
        total = border_mode[0] + border_mode[1]
    else:
        total = 2 * border_mode
    return (image_shape + total - ((kernel_shape - 1) * dilation + 1)) // subsample + 1


def get_conv_output_shape(image_shape, kernel_shape, border_mode, subsample, filter_dilation=None):
    """Output shape ``(batch, n_filters, *spatial)`` of a 2-D or 3-D convolution (the
    number of spatial axes is ``len(image_shape) - 2``).

    >>> get_conv_output_shape((2, 3, 8, 8), (4, 3, 3, 3), "half", (2, 2))
    (2, 4, 4, 4)
    >>> get_conv_output_shape((2, 3, 8, 8, 6), (4, 3, 3, 3, 1), "valid", (1, 2, 3))
    (2, 4, 6, 3, 2)
    """
    nd = len(image_shape) - 2
    filter_dilation = (1,) * nd if filter_dilation is None else filter_dilation
    mode = _norm_border_mode(border_mode, "get_conv_output_shape", nd)
    spatial = []
    for d in range(nd):
        bm = mode if isinstance(mode, str) else mode[d]
        spatial.append(
            get_conv_shape_1axis(
                image_shape[2 + d], kernel_shape[2 + d], bm, subsample[d], filter_dilation[d]
            )
        )
    return (image_shape[0], kernel_shape[0], *spatial)


# -- numpy kernels ----------------------------------------------------------------------
# Each works for any number of spatial axes: those after the batch and channel axes.


def _pad(x, pads):
    if any(any(p) for p in pads):
        return np.pad(x, ((0, 0), (0, 0), *pads))
    return x


def _flip(w):
    """The filters reversed along every spatial axis (a true convolution)."""
    return w[(slice(None), slice(None)) + (slice(None, None, -1),) * (w.ndim - 2)]


def _windows(xp, kshp, out_sp, stride, dil):
    """Every receptive field of the padded image: a view ``(N, C, *out_sp, *kshp)``."""
    nd = len(kshp)
    keff = tuple((kshp[d] - 1) * dil[d] + 1 for d in range(nd))
    w = sliding_window_view(xp, keff, axis=tuple(range(2, 2 + nd)))
    return w[
        (slice(None), slice(None))
        + tuple(slice(0, (out_sp[d] - 1) * stride[d] + 1, stride[d]) for d in range(nd))
        + tuple(slice(None, None, dil[d]) for d in range(nd))
    ]


def _out_sp(padded_sp, kshp, stride, dil, who, shapes):
    nd = len(kshp)
    out = tuple((padded_sp[d] - (kshp[d] - 1) * dil[d] - 1) // stride[d] + 1 for d in range(nd))
    if min(out) <= 0:
        raise ValueError(
            f"{who}: the filters ({'x'.join(map(str, kshp))}, dilation {dil}) are larger "
            f"than the padded image ({'x'.join(map(str, padded_sp))}); shapes "
            f"{shapes}"
        )
    return out


def check_conv_groups(who, xshape, wshape, groups):
    """Raise where images of shape ``xshape`` and filters of shape ``wshape`` do not fit
    ``groups`` groups: the image's channels are the filters' times the groups, and the
    filters divide by the groups (an engine's grouped products would leave the rest
    unread).

    >>> check_conv_groups("conv", (2, 2, 5, 4), (5, 1, 2, 3), 2)
    Traceback (most recent call last):
    ...
    ValueError: conv: image has 2 channels, filters expect 1 per group x 2 group(s) and 5 ...
    """
    c, (f, cg) = xshape[1], wshape[:2]
    if c != cg * groups or f % groups:
        raise ValueError(
            f"{who}: image has {c} channels, filters expect {cg} per group x "
            f"{groups} group(s) and {f} filters (must divide by the groups); "
            f"shapes {tuple(xshape)}, {tuple(wshape)}"
        )


def check_grad_weights_groups(who, xshape, gyshape, groups):
    """Raise where images of shape ``xshape`` and an output gradient of shape
    ``gyshape`` do not fit ``groups`` groups (or differ in batch length)."""
    if xshape[1] % groups or gyshape[1] % groups or gyshape[0] != xshape[0]:
        raise ValueError(
            f"{who}: image {tuple(xshape)} and output gradient {tuple(gyshape)} do not fit "
            f"{groups} group(s)"
        )


def check_grad_inputs_groups(who, wshape, gyshape, groups):
    """Raise where filters of shape ``wshape`` and an output gradient of shape
    ``gyshape`` do not fit ``groups`` groups (one gradient channel per filter)."""
    if gyshape[1] != wshape[0] or wshape[0] % groups:
        raise ValueError(
            f"{who}: output gradient {tuple(gyshape)} does not fit filters {tuple(wshape)} in "
            f"{groups} group(s)"
        )


def _conv_forward(op, x, w):
    nd = x.ndim - 2
    (f, cg), kshp = w.shape[:2], w.shape[2:]
    g = op.num_groups
    check_conv_groups(op, x.shape, w.shape, g)
    pads = border_mode_to_pad(op.border_mode, kshp, op.filter_dilation)
    xp = _pad(x, pads)
    out_sp = _out_sp(xp.shape[2:], kshp, op.subsample, op.filter_dilation, op, (x.shape, w.shape))
    if op.filter_flip:
        w = _flip(w)
    win = _windows(xp, kshp, out_sp, op.subsample, op.filter_dilation)
    fg = f // g
    # win[n, c, *out, *k] . w[f, c, *k] -> (n, *out, f)
    taps = list(range(2 + nd, 2 + 2 * nd))
    parts = [
        np.tensordot(
            win[:, i * cg : (i + 1) * cg],
            w[i * fg : (i + 1) * fg],
            axes=([1, *taps], list(range(1, 2 + nd))),
        )
        for i in range(g)
    ]
    out = parts[0] if g == 1 else np.concatenate(parts, axis=-1)
    return np.ascontiguousarray(np.moveaxis(out, -1, 1))


def _conv_grad_weights(op, x, gy, kshp):
    nd = x.ndim - 2
    n, c = x.shape[:2]
    g = op.num_groups
    f = gy.shape[1]
    check_grad_weights_groups(op, x.shape, gy.shape, g)
    pads = border_mode_to_pad(op.border_mode, kshp, op.filter_dilation)
    xp = _pad(x, pads)
    out_sp = _out_sp(xp.shape[2:], kshp, op.subsample, op.filter_dilation, op, (x.shape, gy.shape))
    if out_sp != gy.shape[2:]:
        raise ValueError(
            f"{op}: output gradient has spatial shape {gy.shape[2:]}, the "
            f"convolution of image {x.shape} gives {out_sp}"
        )
    win = _windows(xp, kshp, out_sp, op.subsample, op.filter_dilation)
    cg, fg = c // g, f // g
    # gy[n, f, *out] . win[n, c, *out, *k] -> (f, c, *k)
    summed = [0, *range(2, 2 + nd)]
    parts = [
        np.tensordot(
            gy[:, i * fg : (i + 1) * fg], win[:, i * cg : (i + 1) * cg], axes=(summed, summed)
        )
        for i in range(g)
    ]
    dw = parts[0] if g == 1 else np.concatenate(parts, axis=0)
    if op.filter_flip:
        dw = _flip(dw)
    return np.ascontiguousarray(dw)


def _conv_grad_inputs(op, w, gy, imshp):
    nd = w.ndim - 2
    (f, cg), kshp = w.shape[:2], w.shape[2:]
    g = op.num_groups
    n = gy.shape[0]
    check_grad_inputs_groups(op, w.shape, gy.shape, g)
    pads = border_mode_to_pad(op.border_mode, kshp, op.filter_dilation)
    padded = tuple(imshp[d] + sum(pads[d]) for d in range(nd))
    out_sp = _out_sp(
        padded, kshp, op.subsample, op.filter_dilation, op, (w.shape, gy.shape, tuple(imshp))
    )
    if out_sp != gy.shape[2:]:
        raise ValueError(
            f"{op}: output gradient has spatial shape {gy.shape[2:]}, the "
            f"convolution of a {tuple(imshp)} image gives {out_sp}"
        )
    if op.filter_flip:
        w = _flip(w)
    fg = f // g
    dtype = np.result_type(w.dtype, gy.dtype)
    dxp = np.zeros((n, cg * g, *padded), dtype=dtype)
    stride, dil = op.subsample, op.filter_dilation
    for i in range(g):
        # cols[c, *k, n, *out]: what each receptive-field tap receives. The taps come
        # before the images so that each tap's share is one contiguous block (with the
        # taps last, reading one tap strides over all of them: up to 4x slower in 3-D).
        cols = np.tensordot(w[i * fg : (i + 1) * fg], gy[:, i * fg : (i + 1) * fg], axes=([0], [1]))
        dst = dxp[:, i * cg : (i + 1) * cg].swapaxes(0, 1)  # (c, n, *padded), a view
        for tap in itertools.product(*(range(k) for k in kshp)):
            dst[
                (slice(None), slice(None))
                + tuple(
                    slice(a * dil[d], a * dil[d] + stride[d] * (out_sp[d] - 1) + 1, stride[d])
                    for d, a in enumerate(tap)
                )
            ] += cols[(slice(None), *tap)]
    inner = tuple(slice(pads[d][0], pads[d][0] + imshp[d]) for d in range(nd))
    return np.ascontiguousarray(dxp[(slice(None), slice(None), *inner)])


# Unshared (locally connected) 2-D convolution: a filter per output position, the
# filters ``(F, OH, OW, C/groups, KH, KW)``. The receptive fields are those of the shared
# convolution; each output position contracts its own with its own filters.


def _unshared_geometry(op, imshp, w_shape, out_given, shapes):
    """The padding and the output's spatial shape, checked against the filters' grid
    ``w_shape[1:3]`` (and ``out_given``, the output gradient's, when given)."""
    kshp = w_shape[4:]
    pads = border_mode_to_pad(op.border_mode, kshp, op.filter_dilation)
    padded = tuple(imshp[d] + sum(pads[d]) for d in range(2))
    out_sp = _out_sp(padded, kshp, op.subsample, op.filter_dilation, op, shapes)
    if tuple(w_shape[1:3]) != out_sp or (out_given is not None and tuple(out_given) != out_sp):
        raise ValueError(
            f"{op}: unshared filters {w_shape} and output {out_given} do not fit the "
            f"output positions {out_sp} of the convolution; shapes {shapes}"
        )
    return pads, out_sp


def _unshared_groups(op, c, f, shapes):
    g = op.num_groups
    if c % g or f % g:
        raise ValueError(f"{op}: {c} channels and {f} filters do not fit {g} group(s); {shapes}")
    return g, c // g, f // g


def _unshared_forward(op, x, w):
    g, cg, fg = _unshared_groups(op, x.shape[1], w.shape[0], (x.shape, w.shape))
    if w.shape[3] != cg:
        raise ValueError(f"{op}: image {x.shape} and unshared filters {w.shape} disagree")
    pads, out_sp = _unshared_geometry(op, x.shape[2:], w.shape, None, (x.shape, w.shape))
    if op.filter_flip:
        w = w[..., ::-1, ::-1]
    win = _windows(_pad(x, pads), w.shape[4:], out_sp, op.subsample, op.filter_dilation)
    parts = [
        np.einsum("ncijkl,fijckl->nfij", win[:, i * cg : (i + 1) * cg], w[i * fg : (i + 1) * fg])
        for i in range(g)
    ]
    return np.ascontiguousarray(np.concatenate(parts, axis=1))


def _unshared_grad_weights(op, x, gy, kshp):
    g, cg, fg = _unshared_groups(op, x.shape[1], gy.shape[1], (x.shape, gy.shape))
    w_shape = (gy.shape[1], *gy.shape[2:], cg, *kshp)
    pads, out_sp = _unshared_geometry(op, x.shape[2:], w_shape, gy.shape[2:], (x.shape, gy.shape))
    win = _windows(_pad(x, pads), kshp, out_sp, op.subsample, op.filter_dilation)
    parts = [
        np.einsum(
            "nfij,ncijkl->fijckl", gy[:, i * fg : (i + 1) * fg], win[:, i * cg : (i + 1) * cg]
        )
        for i in range(g)
    ]
    dw = np.concatenate(parts, axis=0)
    if op.filter_flip:
        dw = dw[..., ::-1, ::-1]
    return np.ascontiguousarray(dw)


def _unshared_grad_inputs(op, w, gy, imshp):
    f, cg = w.shape[0], w.shape[3]
    g, _, fg = _unshared_groups(op, cg * op.num_groups, f, (w.shape, gy.shape))
    if gy.shape[1] != f:
        raise ValueError(f"{op}: output gradient {gy.shape} does not fit filters {w.shape}")
    shapes = (w.shape, gy.shape, tuple(imshp))
    pads, out_sp = _unshared_geometry(op, imshp, w.shape, gy.shape[2:], shapes)
    if op.filter_flip:
        w = w[..., ::-1, ::-1]
    padded = tuple(imshp[d] + sum(pads[d]) for d in range(2))
    n = gy.shape[0]
    dxp = np.zeros((n, cg * g, *padded), dtype=np.result_type(w.dtype, gy.dtype))
    stride, dil = op.subsample, op.filter_dilation
    for i in range(g):
        # cols[c, k, l, n, i, j]: what tap (k, l) of output position (i, j) sends back
        cols = np.einsum(
            "fijckl,nfij->cklnij", w[i * fg : (i + 1) * fg], gy[:, i * fg : (i + 1) * fg]
        )
        dst = dxp[:, i * cg : (i + 1) * cg].swapaxes(0, 1)
        for a, b in itertools.product(range(w.shape[4]), range(w.shape[5])):
            dst[
                :,
                :,
                a * dil[0] : a * dil[0] + stride[0] * (out_sp[0] - 1) + 1 : stride[0],
                b * dil[1] : b * dil[1] + stride[1] * (out_sp[1] - 1) + 1 : stride[1],
            ] += cols[:, a, b]
    inner = tuple(slice(pads[d][0], pads[d][0] + imshp[d]) for d in range(2))
    return np.ascontiguousarray(dxp[(slice(None), slice(None), *inner)])


# -- Ops --------------------------------------------------------------------------------


def _image_tensor(op, name, x):
    x = as_tensor_variable(x)
    nd = op.convdim
    if x.ndim != 2 + nd:
        raise TypeError(
            f"{op}: argument {name} must be a {2 + nd}-D tensor ({_LAYOUTS[nd]}), got {x.type}"
        )
    if x.dtype not in float_dtypes:
        raise TypeError(f"{op}: argument {name} must be a float tensor, got {x.type}")
    return x


def _shape_vector(op, name, shape):
    nd = op.convdim
    shape = as_tensor_variable(shape)
    if shape.ndim != 1 or shape.dtype not in int_dtypes:
        raise TypeError(
            f"{op}: argument {name} must be an int vector of {nd} spatial lengths, "
            f"got {shape.type}"
        )
    length = shape.data.shape[0] if isinstance(shape, Constant) else shape.type.shape[0]
    if length not in (None, nd):
        raise TypeError(f"{op}: argument {name} must have {nd} entries, got {shape}")
    return shape


def _static_entries(v, n):
    """The ``n`` entries of a shape vector where known at graph-build time (else None)."""
    if isinstance(v, Constant):
        return tuple(int(s) for s in np.asarray(v.data))
    if v.owner is not None and isinstance(v.owner.op, tb.MakeVector):
        return tuple(
            int(np.asarray(i.data)) if isinstance(i, Constant) else None for i in v.owner.inputs
        )
    return (None,) * n


def _symbolic_entries(v, n):
    if v.owner is not None and isinstance(v.owner.op, tb.MakeVector):
        return tuple(v.owner.inputs)
    static = _static_entries(v, n)
    return tuple(s if s is not None else v[d] for d, s in enumerate(static))


def _spatial_shape(x):
    return tb.make_vector(*(tb.shape_i(x, d) for d in range(2, x.ndim)))


def _kernel_shape(kern, convdim):
    """The filters' spatial lengths: their last ``convdim`` (unshared filters have the
    output positions before them)."""
    return tb.make_vector(*(tb.shape_i(kern, d) for d in range(kern.ndim - convdim, kern.ndim)))


def _kern_tensor(op, name, kern):
    """The filters: as an image tensor, or 6-D ``(F, OH, OW, C/groups, KH, KW)`` for an
    unshared convolution."""
    if not op.unshared:
        return _image_tensor(op, name, kern)
    kern = as_tensor_variable(kern)
    if kern.ndim != 6 or kern.dtype not in float_dtypes:
        raise TypeError(
            f"{op}: argument {name} of an unshared convolution must be a 6-D float tensor "
            f"(filters, output rows, output columns, channels, rows, columns), got {kern.type}"
        )
    return kern


def _hint(hint, n, name, who):
    """A shape hint as a tuple of ``n`` ints or Nones (constants read), or None."""
    if hint is None:
        return None
    if isinstance(hint, Variable):
        # a symbolic (or constant) vector: Theano wants a tuple or list of its entries
        raise ValueError(
            f"{who}: {name} must be None or a tuple of constant ints, got the tensor {hint}"
        )
    hint = tuple(hint)
    if len(hint) != n:
        raise ValueError(f"{who}: {name} must have {n} entries, got {hint!r}")
    out = []
    for h in hint:
        if isinstance(h, Constant):
            h = np.asarray(h.data)
            h = int(h) if h.ndim == 0 and h.dtype.kind in "iu" else h
        if h is not None and not isinstance(h, (int, np.integer)):
            raise ValueError(
                f"{who}: {name} must be None or a tuple of constant ints, got {hint!r}"
            )
        out.append(None if h is None else int(h))
    return tuple(out)


def _check_hint(op, name, hint, var):
    """A shape hint (``imshp``/``kshp``, Theano's optional parameters) against the type:
    entries that both know must agree."""
    if hint is None:
        return
    if len(hint) != var.ndim or any(
        h is not None and s is not None and h != s for h, s in zip(hint, var.type.shape)
    ):
        raise ValueError(f"{op}: {name} {tuple(hint)} does not match {var.type}")


class BaseAbstractConv(Op):
    """Parameters shared by the convolution Ops over ``convdim`` (a class attribute, 2
    or 3) spatial axes (see ``conv2d``, ``conv3d``). ``imshp``/``kshp`` are Theano's
    optional shape hints of the image and the filters (None entries unknown): they are
    checked against the inputs' types, and are not part of the Op's identity.

    >>> op = AbstractConv3d(border_mode=1, subsample=2)
    >>> op.border_mode, op.subsample
    ((1, 1, 1), (2, 2, 2))
    """

    __props__ = ("border_mode", "subsample", "filter_flip", "filter_dilation", "num_groups")
    convdim = 2

    def __init__(
        self,
        border_mode="valid",
        subsample=None,
        filter_flip=True,
        filter_dilation=None,
        num_groups=1,
        unshared=False,
        *,
        imshp=None,
        kshp=None,
    ):
        who = type(self).__name__
        nd = self.convdim
        self.unshared = bool(unshared)
        if self.unshared and nd != 2:
            raise ValueError(f"{who}: unshared convolutions are 2-D only")
        self.border_mode = _norm_border_mode(border_mode, who, nd)
        self.subsample = _ints(1 if subsample is None else subsample, nd, "subsample", who, 1)
        self.filter_flip = bool(filter_flip)
        self.filter_dilation = _ints(
            1 if filter_dilation is None else filter_dilation, nd, "filter_dilation", who, 1
        )
        if not isinstance(num_groups, (int, np.integer)) or num_groups < 1:
            raise ValueError(f"{who}: num_groups must be an int >= 1, got {num_groups!r}")
        self.num_groups = int(num_groups)
        self.imshp = _hint(imshp, 2 + nd, "imshp", who)
        self.kshp = _hint(kshp, 2 + nd, "kshp", who)

    def __str__(self):
        unshared = ", unshared" if self.unshared else ""
        return (
            f"{type(self).__name__}{{{self.border_mode}, {self.subsample}, "
            f"{self.filter_flip}, {self.filter_dilation}, {self.num_groups}{unshared}}}"
        )

    __repr__ = __str__

    def _params(self):
        params = dict(
            border_mode=self.border_mode,
            subsample=self.subsample,
            filter_flip=self.filter_flip,
            filter_dilation=self.filter_dilation,
            num_groups=self.num_groups,
        )
        if self.unshared:  # (the 3-D Ops do not take it)
            params["unshared"] = True
        return params

    def _family(self):
        """The (forward, gradWeights, gradInputs) Ops of this number of spatial axes,
        with this Op's parameters."""
        fwd, gw, gi = _FAMILIES[self.convdim]
        p = self._params()
        return fwd(**p), gw(**p), gi(**p)

    def _out_len(self, img, kern, d):
        bm = self.border_mode if isinstance(self.border_mode, str) else self.border_mode[d]
        return get_conv_shape_1axis(img, kern, bm, self.subsample[d], self.filter_dilation[d])

    def _fitting_len(self, img, kern, d):
        """``_out_len``, passed on once it is at least 1 (an ``Assert``): filters larger
        than the padded image, which perform refuses, have none. A length known now
        (an int: an engine planning the run, which checks) is as is."""
        n = self._out_len(img, kern, d)
        if not isinstance(n, Variable) or isinstance(n, Constant):
            return n
        msg = (
            f"{self}: the filters (dilated) are larger than the padded image along "
            f"spatial dimension {d}: no output position"
        )
        return Assert(msg)(n, tm.ge(n, 1))

    def _grad_checked(self, out, pairs):
        """``out``, the shape of a gradient, each length checked by the agreement of
        each ``(a, b, names)`` of ``pairs``, as perform checks the lengths it is given
        (``checked_shape``)."""
        for a, b, names in pairs:
            out = checked_shape(out, [a, b], str(self), names)
        return out

    def _out_pairs(self, img_sp, kern_sp, gs):
        """The pairs (``_grad_checked``) of the convolution's output lengths, of an
        image and filters of spatial lengths ``img_sp`` and ``kern_sp``, and the output
        gradient's (of shape ``gs``)."""
        return [
            (
                self._fitting_len(img_sp[d], kern_sp[d], d),
                gs[2 + d],
                (
                    f"the convolution's output along spatial dimension {d}",
                    f"the output gradient's along dimension {2 + d}",
                ),
            )
            for d in range(self.convdim)
        ]


class AbstractConv(BaseAbstractConv):
    """The forward convolution of images ``(N, C, *spatial)`` with filters
    ``(F, C/groups, *kernel)``: the code of ``AbstractConv2d`` and ``AbstractConv3d``,
    which differ in ``convdim`` only.

    >>> AbstractConv2d.convdim, AbstractConv3d.convdim
    (2, 3)
    >>> issubclass(AbstractConv3d, AbstractConv), issubclass(AbstractConv3d, AbstractConv2d)
    (True, False)
    """

    def make_node(self, img, kern):
        img = _image_tensor(self, "img", img)
        kern = _kern_tensor(self, "kern", kern)
        _check_hint(self, "imshp", self.imshp, img)
        _check_hint(self, "kshp", self.kshp, kern)
        c, cg = img.type.shape[1], kern.type.shape[kern.ndim - self.convdim - 1]
        if c is not None and cg is not None and c != cg * self.num_groups:
            raise ValueError(
                f"{self}: img has {c} channels but kern expects {cg} x "
                f"{self.num_groups} group(s)"
            )
        k0 = kern.ndim - self.convdim
        sp = [
            self._out_len(img.type.shape[2 + d], kern.type.shape[k0 + d], d)
            for d in range(self.convdim)
        ]
        if any(s is not None and s <= 0 for s in sp):
            raise ValueError(
                f"{self}: the filters {kern.type.shape} do not fit in the image "
                f"{img.type.shape}"
            )
        shape = (img.type.shape[0], kern.type.shape[0], *sp)
        out = TensorType(upcast(img.dtype, kern.dtype), shape=shape)
        return Apply(self, [img, kern], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        x, w = inputs
        out = (_unshared_forward if self.unshared else _conv_forward)(self, x, w)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        xs, ws = input_shapes
        k0 = node.inputs[1].ndim - self.convdim  # (the shapes may be shape vectors)
        sp = [self._fitting_len(xs[2 + d], ws[k0 + d], d) for d in range(self.convdim)]
        # the image's channels the filters', times the groups, as perform checks them
        cg = ws[k0 - 1] if self.num_groups == 1 else ws[k0 - 1] * self.num_groups
        names = ("the image's channels", f"the filters' channels x {self.num_groups} group(s)")
        return [checked_shape((xs[0], ws[0], *sp), [xs[1], cg], str(self), names)]

    def L_op(self, inputs, outputs, output_grads):
        img, kern = inputs
        (g,) = output_grads
        _, grad_weights, grad_inputs = self._family()
        d_img = grad_inputs(kern, g, _spatial_shape(img))
        d_kern = grad_weights(img, g, _kernel_shape(kern, self.convdim))
        return [tb.cast(d_img, img.dtype), tb.cast(d_kern, kern.dtype)]

    def R_op(self, inputs, eval_points):
        img, kern = inputs
        terms = []
        if eval_points[0] is not None:
            terms.append(self(eval_points[0], kern))
        if eval_points[1] is not None:
            terms.append(self(img, eval_points[1]))
        return [None if not terms else terms[0] if len(terms) == 1 else terms[0] + terms[1]]


class AbstractConv_gradWeights(BaseAbstractConv):  # noqa: N801 (Theano's name)
    """Gradient of the convolution w.r.t. the filters: inputs ``(img, topgrad, shape)``
    with ``shape`` the filters' spatial lengths (``AbstractConv2d_gradWeights``,
    ``AbstractConv3d_gradWeights``).

    >>> issubclass(AbstractConv3d_gradWeights, AbstractConv_gradWeights)
    True
    """

    def make_node(self, img, topgrad, shape):
        img = _image_tensor(self, "img", img)
        topgrad = _image_tensor(self, "topgrad", topgrad)
        shape = _shape_vector(self, "shape", shape)
        _check_hint(self, "imshp", self.imshp, img)
        c = img.type.shape[1]
        cg = None if c is None else c // self.num_groups
        # unshared: a filter per output position, their grid before the channels
        grid = topgrad.type.shape[2:] if self.unshared else ()
        out_shape = (topgrad.type.shape[1], *grid, cg, *_static_entries(shape, self.convdim))
        out = TensorType(upcast(img.dtype, topgrad.dtype), shape=out_shape)
        return Apply(self, [img, topgrad, shape], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        x, gy, shape = inputs
        grad = _unshared_grad_weights if self.unshared else _conv_grad_weights
        dw = grad(self, x, gy, tuple(int(s) for s in shape))
        output_storage[0][0] = np.asarray(dw, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        xs, gs, _ = input_shapes
        c = xs[1] if self.num_groups == 1 else xs[1] // self.num_groups
        grid = (gs[2], gs[3]) if self.unshared else ()
        kern_sp = _symbolic_entries(node.inputs[2], self.convdim)
        # perform's checks: one batch, and the convolution of the image by such filters
        # has the output gradient's spatial lengths
        batch = (xs[0], gs[0], ("the image's batch", "the output gradient's batch"))
        pairs = [batch, *self._out_pairs(xs[2:], kern_sp, gs)]
        return [self._grad_checked((gs[1], *grid, c, *kern_sp), pairs)]

    def connection_pattern(self, node):
        return [[True], [True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        img, topgrad, _ = inputs
        (g,) = output_grads
        conv, _, grad_inputs = self._family()
        d_img = grad_inputs(g, topgrad, _spatial_shape(img))
        d_top = conv(img, g)
        return [tb.cast(d_img, img.dtype), tb.cast(d_top, topgrad.dtype), tb.disconnected()]


class AbstractConv_gradInputs(BaseAbstractConv):  # noqa: N801 (Theano's name)
    """Gradient of the convolution w.r.t. the image: inputs ``(kern, topgrad, shape)``
    with ``shape`` the image's spatial lengths, a transposed convolution
    (``AbstractConv2d_gradInputs``, ``AbstractConv3d_gradInputs``).

    >>> issubclass(AbstractConv3d_gradInputs, AbstractConv_gradInputs)
    True
    """

    def make_node(self, kern, topgrad, shape):
        kern = _kern_tensor(self, "kern", kern)
        topgrad = _image_tensor(self, "topgrad", topgrad)
        shape = _shape_vector(self, "shape", shape)
        _check_hint(self, "kshp", self.kshp, kern)
        cg = kern.type.shape[kern.ndim - self.convdim - 1]
        c = None if cg is None else cg * self.num_groups
        out_shape = (topgrad.type.shape[0], c, *_static_entries(shape, self.convdim))
        out = TensorType(upcast(kern.dtype, topgrad.dtype), shape=out_shape)
        return Apply(self, [kern, topgrad, shape], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        w, gy, shape = inputs
        grad = _unshared_grad_inputs if self.unshared else _conv_grad_inputs
        dx = grad(self, w, gy, tuple(int(s) for s in shape))
        output_storage[0][0] = np.asarray(dx, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        ws, gs, _ = input_shapes
        k0 = node.inputs[0].ndim - self.convdim
        cg = ws[k0 - 1]
        c = cg if self.num_groups == 1 else cg * self.num_groups
        img_sp = _symbolic_entries(node.inputs[2], self.convdim)
        # perform's checks: the filters' count is the output gradient's channels, and the
        # convolution of such an image by the filters has its spatial lengths (and, an
        # unshared one, the filters' grid of output positions)
        filters = (ws[0], gs[1], ("the filters' count", "the output gradient's channels"))
        pairs = [filters, *self._out_pairs(img_sp, ws[k0:], gs)]
        if self.unshared:
            names = [
                (f"the filters' grid along {d}", f"the output gradient's along {2 + d}")
                for d in range(2)
            ]
            pairs += [(ws[1 + d], gs[2 + d], names[d]) for d in range(2)]
        return [self._grad_checked((gs[0], c, *img_sp), pairs)]

    def connection_pattern(self, node):
        return [[True], [True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        kern, topgrad, _ = inputs
        (g,) = output_grads
        conv, grad_weights, _ = self._family()
        d_kern = grad_weights(g, topgrad, _kernel_shape(kern, self.convdim))
        d_top = conv(g, kern)
        return [tb.cast(d_kern, kern.dtype), tb.cast(d_top, topgrad.dtype), tb.disconnected()]


class AbstractConv2d(AbstractConv):
    """Convolve a batch of images ``(N, C, H, W)`` with filters ``(F, C/groups, KH, KW)``,
    or, ``unshared=True``, with a filter per output position, ``(F, OH, OW, C/groups,
    KH, KW)`` (a locally connected layer).

    >>> from theano_dag import tensor as tt
    >>> x = tt.TensorType("float64", shape=(None, 3, 8, 8))("x")
    >>> w = tt.TensorType("float64", shape=(4, 3, 3, 3))("w")
    >>> AbstractConv2d(border_mode="half", subsample=(2, 2))(x, w).type
    TensorType(float64, shape=(?, 4, 4, 4))
    """

    __props__ = BaseAbstractConv.__props__ + ("unshared",)
    convdim = 2


class AbstractConv2d_gradWeights(AbstractConv_gradWeights):  # noqa: N801 (Theano's name)
    """Gradient of ``AbstractConv2d`` w.r.t. the filters: inputs ``(img, topgrad, shape)``
    with ``shape`` the filters' ``(KH, KW)``.

    >>> from theano_dag import tensor as tt
    >>> op = AbstractConv2d_gradWeights()
    >>> op(tt.dtensor4("x"), tt.dtensor4("gy"), [3, 3]).type
    TensorType(float64, shape=(?, ?, 3, 3))
    """

    __props__ = BaseAbstractConv.__props__ + ("unshared",)
    convdim = 2


class AbstractConv2d_gradInputs(AbstractConv_gradInputs):  # noqa: N801 (Theano's name)
    """Gradient of ``AbstractConv2d`` w.r.t. the image: inputs ``(kern, topgrad, shape)``
    with ``shape`` the image's ``(H, W)`` (a transposed convolution).

    >>> from theano_dag import tensor as tt
    >>> op = AbstractConv2d_gradInputs(subsample=(2, 2))
    >>> op(tt.dtensor4("w"), tt.dtensor4("gy"), [9, 9]).type
    TensorType(float64, shape=(?, ?, 9, 9))
    """

    __props__ = BaseAbstractConv.__props__ + ("unshared",)
    convdim = 2


class _Conv3dParams:
    """Theano's constructor of the 3-D Ops: the shape hints first, then the parameters
    (each an int or a triple)."""

    convdim = 3

    def __init__(
        self,
        imshp=None,
        kshp=None,
        border_mode="valid",
        subsample=(1, 1, 1),
        filter_flip=True,
        filter_dilation=(1, 1, 1),
        num_groups=1,
    ):
        super().__init__(
            border_mode,
            subsample,
            filter_flip,
            filter_dilation,
            num_groups,
            imshp=imshp,
            kshp=kshp,
        )


class AbstractConv3d(_Conv3dParams, AbstractConv):
    """Convolve a batch of volumes ``(N, C, D, H, W)`` with filters
    ``(F, C/groups, KD, KH, KW)``.

    >>> from theano_dag import tensor as tt
    >>> x = tt.TensorType("float64", shape=(None, 2, 6, 8, 8))("x")
    >>> w = tt.TensorType("float64", shape=(4, 2, 3, 3, 3))("w")
    >>> AbstractConv3d(border_mode="half", subsample=(1, 2, 2))(x, w).type
    TensorType(float64, shape=(?, 4, 6, 4, 4))
    """


class AbstractConv3d_gradWeights(_Conv3dParams, AbstractConv_gradWeights):  # noqa: N801
    """Gradient of ``AbstractConv3d`` w.r.t. the filters: inputs ``(img, topgrad, shape)``
    with ``shape`` the filters' ``(KD, KH, KW)``.

    >>> from theano_dag import tensor as tt
    >>> op = AbstractConv3d_gradWeights()
    >>> op(tt.dtensor5("x"), tt.dtensor5("gy"), [3, 1, 2]).type
    TensorType(float64, shape=(?, ?, 3, 1, 2))
    """


class AbstractConv3d_gradInputs(_Conv3dParams, AbstractConv_gradInputs):  # noqa: N801
    """Gradient of ``AbstractConv3d`` w.r.t. the image: inputs ``(kern, topgrad, shape)``
    with ``shape`` the image's ``(D, H, W)`` (a transposed convolution).

    >>> from theano_dag import tensor as tt
    >>> op = AbstractConv3d_gradInputs(subsample=2)
    >>> op(tt.dtensor5("w"), tt.dtensor5("gy"), [5, 9, 9]).type
    TensorType(float64, shape=(?, ?, 5, 9, 9))
    """


_FAMILIES = {
    2: (AbstractConv2d, AbstractConv2d_gradWeights, AbstractConv2d_gradInputs),
    3: (AbstractConv3d, AbstractConv3d_gradWeights, AbstractConv3d_gradInputs),
}


_ACTIVATIONS = (None, "relu")


class Conv2dBiasAct(BaseAbstractConv):
    """``act(conv2d(img, kern) * scale + bias)`` (``scale`` and ``bias`` per filter,
    ``scale`` optional) as one node: what the optimizer makes of a convolution followed
    by a per-filter bias, a batch normalization's scale and a ``relu``, so that an engine
    applies them while the convolution's output is still in cache, in its memory.

    ``activation`` is None or ``'relu'`` (``max(z, 0)``, which ``0.5 * (z + |z|)``
    equals). The gradient is that of the unfused graph. A ``scale`` input leaves the
    engine the choice of where to apply it: to the filters (``conv(img, kern * scale)``,
    the cheaper when the filters are smaller than the output, at batch 1 in a network's
    first layers) or to the output (when the filters are the larger, in its last), so that
    a batch normalization folded into variable filters does not rescale every filter
    at every call.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, w, b = tt.dtensor4("x"), tt.dtensor4("w"), tt.dvector("b")
    >>> y = Conv2dBiasAct(activation="relu")(x, w, b)
    >>> y.eval({x: np.ones((1, 1, 2, 2)), w: np.ones((2, 1, 2, 2)),
    ...         b: np.array([-5.0, 1.0])})[0, :, 0, 0]
    array([0., 5.])
    """

    __props__ = BaseAbstractConv.__props__ + ("activation",)

    def __init__(self, activation=None, **params):
        super().__init__(**params)
        if self.unshared:
            raise ValueError("Conv2dBiasAct: an unshared convolution is not fused")
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"Conv2dBiasAct: activation must be one of {_ACTIVATIONS}, got {activation!r}"
            )
        self.activation = activation

    def __str__(self):
        return f"{super().__str__()[:-1]}, {self.activation}}}"

    __repr__ = __str__

    def conv_op(self):
        """The plain convolution this node starts with."""
        return AbstractConv2d(**self._params())

    def make_node(self, img, kern, bias, scale=None):
        conv = self.conv_op().make_node(img, kern)
        img, kern = conv.inputs
        out_type = conv.outputs[0].type
        per_filter = [as_tensor_variable(bias)]
        if scale is not None:
            per_filter.append(as_tensor_variable(scale))
        for name, v in zip(("bias", "scale"), per_filter):
            if v.ndim != 1 or v.dtype != out_type.dtype:
                raise TypeError(
                    f"{self}: {name} must be a vector of the output's dtype "
                    f"{out_type.dtype}, got {v.type}"
                )
        return Apply(self, [img, kern, *per_filter], [out_type()])

    def perform(self, node, inputs, output_storage, params=None):
        x, w, b = inputs[:3]
        for name, v in zip(("bias", "scale"), inputs[2:]):
            if v.shape != (w.shape[0],):
                raise ValueError(f"{self}: {name} has shape {v.shape}, the filters {w.shape}")
        out = _conv_forward(self, x, w)
        if len(inputs) == 4:
            out *= inputs[3][:, None, None]
        out += b[:, None, None]
        if self.activation == "relu":
            np.maximum(out, 0, out=out)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return self.conv_op().infer_shape(fgraph, node, input_shapes[:2])

    def L_op(self, inputs, outputs, output_grads):
        img, kern, bias = inputs[:3]
        (g,) = output_grads
        if self.activation == "relu":
            g = g * tb.cast(outputs[0] > 0, g.dtype)
        d_bias = tb.cast(g.sum(axis=(0, 2, 3)), bias.dtype)
        if len(inputs) == 3:
            d_img, d_kern = self.conv_op().L_op([img, kern], None, [g])
            return [d_img, d_kern, d_bias]
        scale = inputs[3]
        # y = conv * scale + bias: the convolution's gradient is g * scale, the scale's
        # the sum of g * conv over everything but the filters.
        d_img, d_kern = self.conv_op().L_op(
            [img, kern], None, [g * scale.dimshuffle("x", 0, "x", "x")]
        )
        d_scale = (g * self.conv_op()(img, kern)).sum(axis=(0, 2, 3))
        return [d_img, d_kern, d_bias, tb.cast(d_scale, scale.dtype)]


# The brief's short names for the same Ops.
Conv2d = AbstractConv2d
ConvGradWeights = AbstractConv2d_gradWeights
ConvGradInputs = AbstractConv2d_gradInputs


def _resolve(primary, alias, primary_name, alias_name, default):
    # Without the alias, the argument as given: ``border_mode=None`` is refused, as in
    # Theano (which has no aliases), not taken for the default.
    if alias is not None:
        if primary is not None and primary != default:
            raise ValueError(f"conv2d: give {primary_name} or {alias_name}, not both")
        return alias
    return primary


def conv2d(
    input,
    filters,
    input_shape=None,
    filter_shape=None,
    border_mode="valid",  # noqa: A002
    subsample=(1, 1),
    filter_flip=True,
    filter_dilation=(1, 1),
    num_groups=1,
    padding=None,
    stride=None,
    dilation=None,
    **kwargs,
):
    """2-D convolution of NCHW images with ``(F, C/num_groups, KH, KW)`` filters.

    ``border_mode`` (alias ``padding``): ``'valid'``, ``'full'``, ``'half'``, an int, or a
    pair of ints / ``(before, after)`` pairs. ``subsample`` (alias ``stride``) and
    ``filter_dilation`` (alias ``dilation``) are ints or pairs. ``filter_flip=True``
    flips the filters (a true convolution, Theano's default); ``False`` correlates.
    ``input_shape``/``filter_shape`` are optional hints, checked against the types.
    ``unshared=True``: a locally connected layer, filters
    ``(F, OH, OW, C/num_groups, KH, KW)`` with one filter per output position.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, w = tt.dtensor4("x"), tt.dtensor4("w")
    >>> y = conv2d(x, w, border_mode="half")
    >>> y.eval({x: np.ones((1, 1, 3, 3)), w: np.ones((1, 1, 3, 3))})[0, 0]
    array([[4., 6., 4.],
           [6., 9., 6.],
           [4., 6., 4.]])
    """
    unshared = bool(kwargs.get("unshared", False))
    unknown = set(kwargs) - {"unshared", "image_shape"}
    if unknown:
        raise TypeError(f"conv2d: unexpected keyword argument(s) {sorted(unknown)}")
    if kwargs.get("image_shape") is not None:
        input_shape = kwargs["image_shape"]
    border_mode = _resolve(border_mode, padding, "border_mode", "padding", "valid")
    subsample = _resolve(subsample, stride, "subsample", "stride", (1, 1))
    filter_dilation = _resolve(filter_dilation, dilation, "filter_dilation", "dilation", (1, 1))
    input = as_tensor_variable(input)  # noqa: A001
    filters = as_tensor_variable(filters)
    for name, var, hint in (("input", input, input_shape), ("filters", filters, filter_shape)):
        if hint is None:
            continue
        if len(hint) != var.ndim or any(
            h is not None and s is not None and h != s for h, s in zip(hint, var.type.shape)
        ):
            raise ValueError(f"conv2d: {name}_shape {tuple(hint)} does not match {var.type}")
    # With the flag conv__assert_shape, the hints are checked when the function runs.
    input = assert_shape(input, input_shape, "conv2d: the input has not the shape given")  # noqa: A001
    filters = assert_shape(filters, filter_shape, "conv2d: the filters have not the shape given")
    op = AbstractConv2d(
        border_mode=border_mode,
        subsample=subsample,
        filter_flip=filter_flip,
        filter_dilation=filter_dilation,
        num_groups=num_groups,
        unshared=unshared,
    )
    return op(input, filters)


def conv2d_grad_wrt_inputs(
    output_grad,
    filters,
    input_shape,
    filter_shape=None,
    border_mode="valid",
    subsample=(1, 1),
    filter_flip=True,
    filter_dilation=(1, 1),
    num_groups=1,
    unshared=False,
):
    """The transposed convolution: gradient of ``conv2d`` w.r.t. an input of shape
    ``input_shape`` (its last two entries are used); ``unshared`` as for ``conv2d``.

    >>> from theano_dag import tensor as tt
    >>> conv2d_grad_wrt_inputs(tt.dtensor4("gy"), tt.dtensor4("w"), (None, None, 5, 5)).ndim
    4
    """
    op = AbstractConv2d_gradInputs(
        border_mode=border_mode,
        subsample=subsample,
        filter_flip=filter_flip,
        filter_dilation=filter_dilation,
        num_groups=num_groups,
        unshared=unshared,
    )
    filters = assert_shape(filters, filter_shape, "conv2d_grad_wrt_inputs: unexpected filter shape")
    return op(filters, output_grad, tb.as_int_vector(list(input_shape)[-2:], "input_shape"))


def conv2d_transpose(
    input,  # noqa: A002
    filters,
    output_shape,
    filter_shape=None,
    border_mode="valid",
    input_dilation=(1, 1),
    filter_flip=True,
    filter_dilation=(1, 1),
    num_groups=1,
):
    """The transposed convolution (Theano's name): the gradient of ``conv2d`` with
    respect to its input, applied to ``input``. ``output_shape`` is the shape of the
    result (the convolution's input; its last two entries are used); ``input_dilation``
    is the stride of the convolution it transposes.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, w = tt.dtensor4("x"), tt.dtensor4("w")
    >>> y = conv2d_transpose(x, w, (1, 1, 3, 3))
    >>> y.eval({x: np.ones((1, 1, 2, 2)), w: np.ones((1, 1, 2, 2))})[0, 0]
    array([[1., 2., 1.],
           [2., 4., 2.],
           [1., 2., 1.]])
    """
    return conv2d_grad_wrt_inputs(
        output_grad=input,
        filters=filters,
        input_shape=output_shape,
        filter_shape=filter_shape,
        border_mode=border_mode,
        subsample=input_dilation,
        filter_flip=filter_flip,
        filter_dilation=filter_dilation,
        num_groups=num_groups,
    )


def conv2d_grad_wrt_weights(
    input,
    output_grad,
    filter_shape,
    input_shape=None,  # noqa: A002
    border_mode="valid",
    subsample=(1, 1),
    filter_flip=True,
    filter_dilation=(1, 1),
    num_groups=1,
    unshared=False,
):
    """Gradient of ``conv2d`` w.r.t. filters of shape ``filter_shape`` (last two used;
    ``unshared`` as for ``conv2d``).

    >>> from theano_dag import tensor as tt
    >>> conv2d_grad_wrt_weights(tt.dtensor4("x"), tt.dtensor4("gy"), (2, 1, 3, 3)).type
    TensorType(float64, shape=(?, ?, 3, 3))
    """
    op = AbstractConv2d_gradWeights(
        border_mode=border_mode,
        subsample=subsample,
        filter_flip=filter_flip,
        filter_dilation=filter_dilation,
        num_groups=num_groups,
        unshared=unshared,
    )
    input = assert_shape(input, input_shape, "conv2d_grad_wrt_weights: unexpected input shape")  # noqa: A001
    return op(input, output_grad, tb.as_int_vector(list(filter_shape)[-2:], "filter_shape"))


def conv3d(
    input,
    filters,
    input_shape=None,
    filter_shape=None,
    border_mode="valid",  # noqa: A002
    subsample=(1, 1, 1),
    filter_flip=True,
    filter_dilation=(1, 1, 1),
    num_groups=1,
):
    """3-D convolution of NCDHW volumes with ``(F, C/num_groups, KD, KH, KW)`` filters
    (Theano's signature).

    ``border_mode``: ``'valid'``, ``'full'``, ``'half'``, an int, or a triple of ints or
    ``(before, after)`` pairs (Theano refuses the pairs in 3-D; theano_dag pads each axis
    as asked). ``subsample`` and ``filter_dilation`` are ints or triples.
    ``filter_flip=True`` flips the filters along the three axes (a true convolution);
    ``False`` correlates. ``input_shape``/``filter_shape`` are optional hints, checked
    against the types.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, w = tt.dtensor5("x"), tt.dtensor5("w")
    >>> y = conv3d(x, w, border_mode="half")
    >>> y.eval({x: np.ones((1, 1, 3, 3, 3)), w: np.ones((1, 1, 3, 3, 3))})[0, 0, 0]
    array([[ 8., 12.,  8.],
           [12., 18., 12.],
           [ 8., 12.,  8.]])
    """
    op = AbstractConv3d(
        imshp=input_shape,
        kshp=filter_shape,
        border_mode=border_mode,
        subsample=subsample,
        filter_flip=filter_flip,
        filter_dilation=filter_dilation,
        num_groups=num_groups,
    )
    msg = "conv3d: the {} have not the shape given"
    input = assert_shape(as_tensor_variable(input), input_shape, msg.format("input"))  # noqa: A001
    filters = assert_shape(as_tensor_variable(filters), filter_shape, msg.format("filters"))
    return op(input, filters)


def conv3d_grad_wrt_inputs(
    output_grad,
    filters,
    input_shape,
    filter_shape=None,
    border_mode="valid",
    subsample=(1, 1, 1),
    filter_flip=True,
    filter_dilation=(1, 1, 1),
    num_groups=1,
):
    """The transposed 3-D convolution: gradient of ``conv3d`` w.r.t. an input of shape
    ``input_shape`` (its last three entries are used; they may be symbolic).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> gy, w = tt.dtensor5("gy"), tt.dtensor5("w")
    >>> gx = conv3d_grad_wrt_inputs(gy, w, (1, 1, 4, 4, 4), subsample=2)
    >>> gx.eval({gy: np.ones((1, 1, 2, 2, 2)), w: np.ones((1, 1, 2, 2, 2))}).sum()
    np.float64(64.0)
    """
    op = AbstractConv3d_gradInputs(
        kshp=filter_shape,
        border_mode=border_mode,
        subsample=subsample,
        filter_flip=filter_flip,
        filter_dilation=filter_dilation,
        num_groups=num_groups,
    )
    filters = assert_shape(filters, filter_shape, "conv3d_grad_wrt_inputs: unexpected filter shape")
    return op(filters, output_grad, tb.as_int_vector(list(input_shape)[-3:], "input_shape"))


def conv3d_grad_wrt_weights(
    input,
    output_grad,
    filter_shape,
    input_shape=None,  # noqa: A002
    border_mode="valid",
    subsample=(1, 1, 1),
    filter_flip=True,
    filter_dilation=(1, 1, 1),
    num_groups=1,
):
    """Gradient of ``conv3d`` w.r.t. filters of shape ``filter_shape`` (last three used).

    >>> from theano_dag import tensor as tt
    >>> conv3d_grad_wrt_weights(tt.dtensor5("x"), tt.dtensor5("gy"), (2, 1, 3, 3, 1)).type
    TensorType(float64, shape=(?, ?, 3, 3, 1))
    """
    op = AbstractConv3d_gradWeights(
        imshp=input_shape,
        border_mode=border_mode,
        subsample=subsample,
        filter_flip=filter_flip,
        filter_dilation=filter_dilation,
        num_groups=num_groups,
    )
    input = assert_shape(input, input_shape, "conv3d_grad_wrt_weights: unexpected input shape")  # noqa: A001
    return op(input, output_grad, tb.as_int_vector(list(filter_shape)[-3:], "filter_shape"))


# -- shape arithmetic of the gradients, and shape checks --------------------------------


def _pads_1axis(border_mode, keff):
    """``(before, after)`` padding of one axis for a border mode entry, or None when
    the padding depends on the kernel (``keff`` None)."""
    if border_mode == "valid":
        return 0, 0
    if border_mode in ("full", "half"):
        if keff is None:
            return None
        p = keff - 1 if border_mode == "full" else keff // 2
        return p, p
    lo, hi = border_mode if isinstance(border_mode, tuple) else (border_mode, border_mode)
    if lo < 0 or hi < 0:
        raise ValueError(f"border_mode must be >= 0, got {border_mode!r}")
    return lo, hi


def _per_axis(border_mode, nd):
    """A border mode as one entry per spatial axis."""
    if isinstance(border_mode, tuple):
        if len(border_mode) != nd:
            raise ValueError(f"border_mode {border_mode!r} must have {nd} entries")
        return list(border_mode)
    return [border_mode] * nd


def get_conv_gradinputs_shape_1axis(kernel_shape, top_shape, border_mode, subsample, dilation):
    """The image length along one axis that a convolution's output length ``top_shape``
    comes from; None when unknown or not unique (``subsample`` above 1).

    >>> get_conv_gradinputs_shape_1axis(3, 5, "valid", 1, 1)
    7
    """
    if any(v is None for v in (kernel_shape, top_shape, border_mode, subsample, dilation)):
        return None
    if subsample != 1:
        return None
    keff = (kernel_shape - 1) * dilation + 1
    lo, hi = _pads_1axis(border_mode, keff)
    return top_shape + keff - 1 - lo - hi


def get_conv_gradinputs_shape(
    kernel_shape, top_shape, border_mode, subsample, filter_dilation=None, num_groups=1
):
    """The image shape ``(batch, channels, *spatial)`` a convolution with these kernels
    (``kernel_shape``) and parameters maps to ``top_shape``; a spatial entry is None
    where it cannot be known (a stride above 1, or an unknown length).

    >>> get_conv_gradinputs_shape((4, 3, 3, 3), (2, 4, 6, 6), "half", (1, 1))
    (2, 3, 6, 6)
    """
    nd = len(top_shape) - 2
    dilation = (1,) * nd if filter_dilation is None else tuple(filter_dilation)
    modes = _per_axis(border_mode, nd)
    spatial = tuple(
        get_conv_gradinputs_shape_1axis(
            kernel_shape[-nd + d], top_shape[2 + d], modes[d], subsample[d], dilation[d]
        )
        for d in range(nd)
    )
    channels = kernel_shape[1]
    if channels is not None and num_groups > 1:
        channels = channels * num_groups
    return (top_shape[0], channels) + spatial


def get_conv_gradweights_shape_1axis(image_shape, top_shape, border_mode, subsample, dilation):
    """The kernel length along one axis that maps an image length ``image_shape`` to an
    output length ``top_shape``; None when unknown or not unique (``subsample`` above 1
    or ``'half'`` borders).

    >>> get_conv_gradweights_shape_1axis(7, 5, "valid", 1, 1)
    3
    """
    if any(v is None for v in (image_shape, top_shape, border_mode, subsample, dilation)):
        return None
    if subsample != 1 or border_mode == "half":
        return None
    if border_mode == "full":
        keff = top_shape - image_shape + 1
    else:
        lo, hi = _pads_1axis(border_mode, None)
        keff = image_shape + lo + hi - top_shape + 1
    # keff = (k - 1) * dilation + 1
    return (keff - 1) // dilation + 1


def get_conv_gradweights_shape(
    image_shape,
    top_shape,
    border_mode,
    subsample,
    filter_dilation=None,
    num_groups=1,
    unshared=False,
):
    """The kernel shape ``(n_filters, channels / num_groups, *spatial)`` mapping
    ``image_shape`` to ``top_shape``; spatial entries None where they cannot be known.
    ``unshared`` (a kernel per output position) gives
    ``(n_filters, *top_spatial, channels, *spatial)``.

    >>> get_conv_gradweights_shape((2, 3, 8, 8), (2, 4, 6, 6), "valid", (1, 1))
    (4, 3, 3, 3)
    """
    nd = len(image_shape) - 2
    dilation = (1,) * nd if filter_dilation is None else tuple(filter_dilation)
    modes = _per_axis(border_mode, nd)
    spatial = tuple(
        get_conv_gradweights_shape_1axis(
            image_shape[2 + d], top_shape[2 + d], modes[d], subsample[d], dilation[d]
        )
        for d in range(nd)
    )
    n_filters, channels = top_shape[1], image_shape[1]
    if channels is not None and num_groups > 1:
        channels = channels // num_groups
    if unshared:
        return (n_filters,) + tuple(top_shape[2:]) + (channels,) + spatial
    return (n_filters, channels) + spatial


def _constant_int(v):
    """``v`` as an int when it is a number or a constant scalar, else None."""
    if v is None:
        return None
    try:
        return int(tb.get_scalar_constant_value(v))
    except tb.NotScalarConstantError:
        return None


def check_conv_gradinputs_shape(
    image_shape, kernel_shape, output_shape, border_mode, subsample, filter_dilation=None
):
    """False when a convolution of ``image_shape`` by ``kernel_shape`` with these
    parameters cannot give ``output_shape``; True otherwise (also where an entry is
    None or symbolic, so not checkable).

    >>> check_conv_gradinputs_shape((2, 3, 8, 8), (4, 3, 3, 3), (2, 4, 6, 6), "valid", (1, 1))
    True
    >>> check_conv_gradinputs_shape((2, 3, 8, 8), (4, 3, 3, 3), (2, 4, 7, 6), "valid", (1, 1))
    False
    """
    image_shape, kernel_shape = tuple(image_shape), tuple(kernel_shape)
    output_shape = tuple(output_shape)
    nd = len(image_shape) - 2
    if len(kernel_shape) != nd + 2 or len(output_shape) != nd + 2 or len(subsample) != nd:
        return False
    if filter_dilation is not None and len(filter_dilation) != nd:
        return False
    computed = get_conv_output_shape(
        image_shape, kernel_shape, border_mode, subsample, filter_dilation
    )
    for given, want in zip(output_shape, computed):
        given, want = _constant_int(given), _constant_int(want)
        if given is not None and want is not None and given != want:
            return False
    return True


def assert_conv_shape(shape):
    """``shape`` (of a convolution's image, kernels or output) checked: the first two
    entries ``>= 0``, the spatial ones ``> 0``. A constant entry that fails raises
    ``ValueError`` now; a symbolic one is wrapped in an ``Assert`` (``AssertionError``
    when the function runs).

    >>> from theano_dag import tensor as tt
    >>> assert_conv_shape((2, 3, 4, 5))
    (2, 3, 4, 5)
    """
    out = []
    for i, n in enumerate(shape):
        lowest = 0 if i < 2 else 1
        msg = f"The convolution would produce an invalid shape (dim[{i}] < {lowest})."
        value = _constant_int(n)
        if value is not None:
            if value < lowest:
                raise ValueError(msg)
            out.append(n)
        else:
            out.append(Assert(msg)(n, tm.ge(n, lowest)))
    return tuple(out)


def assert_shape(x, expected_shape, msg="Unexpected shape."):
    """``x`` wrapped in an ``Assert`` that its shape is ``expected_shape`` (None entries
    unchecked), when the flag ``conv__assert_shape`` is on; else ``x`` itself.

    >>> from theano_dag import tensor as tt
    >>> x = tt.dmatrix("x")
    >>> assert_shape(x, (None, 3)) is x  # the flag is off by default
    True
    """
    if expected_shape is None or not config.conv__assert_shape:
        return x
    x = as_tensor_variable(x)
    tests = [
        tm.eq(tb.shape_i(x, i), expected_shape[i])
        for i in range(x.ndim)
        if expected_shape[i] is not None
    ]
    return Assert(msg)(x, *tests) if tests else x


# -- convolutions built from the abstract ones --------------------------------------------


def _separable(
    conv,
    input,  # noqa: A002
    depthwise_filters,
    pointwise_filters,
    num_channels,
    input_shape,
    depthwise_filter_shape,
    pointwise_filter_shape,
    border_mode,
    subsample,
    filter_flip,
    filter_dilation,
):
    """A depthwise ``conv`` (one group per input channel) then a pointwise one."""
    depthwise = conv(
        input,
        depthwise_filters,
        input_shape=input_shape,
        filter_shape=depthwise_filter_shape,
        border_mode=border_mode,
        subsample=subsample,
        filter_flip=filter_flip,
        filter_dilation=filter_dilation,
        num_groups=num_channels,
    )
    return conv(
        depthwise, pointwise_filters, filter_shape=pointwise_filter_shape, filter_flip=filter_flip
    )


def separable_conv2d(
    input,  # noqa: A002
    depthwise_filters,
    pointwise_filters,
    num_channels,
    input_shape=None,
    depthwise_filter_shape=None,
    pointwise_filter_shape=None,
    border_mode="valid",
    subsample=(1, 1),
    filter_flip=True,
    filter_dilation=(1, 1),
):
    """A depthwise convolution (each of the ``num_channels`` input channels by its own
    filters: ``depthwise_filters`` is ``(channels * multiplier, 1, rows, cols)``) then a
    pointwise one (``pointwise_filters``, ``(out_channels, channels * multiplier, 1,
    1)``, mixing the channels). ``border_mode``, ``subsample`` and ``filter_dilation``
    apply to the depthwise step.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, dw, pw = tt.dtensor4("x"), tt.dtensor4("dw"), tt.dtensor4("pw")
    >>> y = separable_conv2d(x, dw, pw, 2)
    >>> y.eval({x: np.ones((1, 2, 3, 3)), dw: np.ones((2, 1, 2, 2)),
    ...         pw: np.ones((1, 2, 1, 1))})[0, 0]
    array([[8., 8.],
           [8., 8.]])
    """
    return _separable(
        conv2d,
        input,
        depthwise_filters,
        pointwise_filters,
        num_channels,
        input_shape,
        depthwise_filter_shape,
        pointwise_filter_shape,
        border_mode,
        subsample,
        filter_flip,
        filter_dilation,
    )


def separable_conv3d(
    input,  # noqa: A002
    depthwise_filters,
    pointwise_filters,
    num_channels,
    input_shape=None,
    depthwise_filter_shape=None,
    pointwise_filter_shape=None,
    border_mode="valid",
    subsample=(1, 1, 1),
    filter_flip=True,
    filter_dilation=(1, 1, 1),
):
    """``separable_conv2d`` over three spatial axes (``conv3d``'s layout).

    >>> from theano_dag import tensor as tt
    >>> separable_conv3d(tt.dtensor5(), tt.dtensor5(), tt.dtensor5(), 2).ndim
    5
    """
    return _separable(
        conv3d,
        input,
        depthwise_filters,
        pointwise_filters,
        num_channels,
        input_shape,
        depthwise_filter_shape,
        pointwise_filter_shape,
        border_mode,
        subsample,
        filter_flip,
        filter_dilation,
    )


def causal_conv1d(
    input,  # noqa: A002
    filters,
    filter_shape,
    input_shape=None,
    subsample=1,
    filter_flip=True,
    filter_dilation=1,
    num_groups=1,
    unshared=False,
):
    """Causal 1-D convolution of ``(batch, channels, length)`` sequences with
    ``(out_channels, channels, filter_length)`` filters: the output at step ``t`` reads
    the inputs up to ``t`` only (the sequence is zero-padded on the left by
    ``filter_dilation * (filter_length - 1)``). ``filter_shape`` is required (its last
    entry gives that padding).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, w = tt.dtensor3("x"), tt.dtensor3("w")
    >>> causal_conv1d(x, w, (1, 1, 2)).eval({x: np.arange(1.0, 5.0).reshape(1, 1, 4),
    ...                                      w: np.ones((1, 1, 2))})
    array([[[1., 3., 5., 7.]]])
    """
    if unshared:
        raise NotImplementedError("causal_conv1d: unshared convolution is not supported")
    input = as_tensor_variable(input)  # noqa: A001
    filters = as_tensor_variable(filters)
    if input.ndim != 3:
        raise ValueError("causal_conv1d: the input must be a 3-d tensor")
    if filters.ndim != 3:
        raise ValueError("causal_conv1d: the filters must be a 3-d tensor")
    if len(filter_shape) != 3:
        raise ValueError("causal_conv1d: filter_shape must have 3 entries")
    length = int(tb.get_scalar_constant_value(filter_shape[2]))
    left = filter_dilation * (length - 1)
    out = conv2d(
        input.dimshuffle(0, 1, 2, "x"),
        filters.dimshuffle(0, 1, 2, "x"),
        input_shape=None if input_shape is None else tuple(input_shape) + (1,),
        filter_shape=tuple(filter_shape[:2]) + (length, 1),
        border_mode=((left, 0), 0),
        subsample=(subsample, 1),
        filter_flip=filter_flip,
        filter_dilation=(filter_dilation, 1),
        num_groups=num_groups,
    )
    return out[:, :, :, 0]


def bilinear_kernel_1D(ratio, normalize=True):  # noqa: N802 (Theano's name)
    """The 1-D kernel that upsamples by ``ratio`` with linear interpolation:
    ``1, 2, ..., ratio, ..., 2, 1`` (divided by ``ratio`` when ``normalize``), floatX.

    >>> bilinear_kernel_1D(3).eval().round(4)
    array([0.3333, 0.6667, 1.    , 0.6667, 0.3333])
    """
    ramp = tb.arange(1, ratio + 1, dtype=config.floatX)
    kern = tb.concatenate([ramp, ramp[-2::-1]])
    if normalize:
        kern = kern / tb.cast(ratio, config.floatX)
    return kern


def bilinear_kernel_2D(ratio, normalize=True):  # noqa: N802 (Theano's name)
    """The 2-D kernel (outer product of 1-D ones) that upsamples by ``ratio`` (an int,
    or ``(rows, cols)``) with bilinear interpolation.

    >>> bilinear_kernel_2D(2).eval()
    array([[0.25, 0.5 , 0.25],
           [0.5 , 1.  , 0.5 ],
           [0.25, 0.5 , 0.25]])
    """
    rows, cols = ratio if isinstance(ratio, tuple) else (ratio, ratio)
    return bilinear_kernel_1D(rows, normalize).dimshuffle(0, "x") * bilinear_kernel_1D(
        cols, normalize
    ).dimshuffle("x", 0)


def bilinear_upsampling(
    input,  # noqa: A002
    ratio=None,
    frac_ratio=None,
    batch_size=None,
    num_input_channels=None,
    use_1D_kernel=True,  # noqa: N803 (Theano's name)
):
    """``(batch, channels, rows, cols)`` images upsampled by the integer ``ratio`` to
    ``(rows * ratio, cols * ratio)`` by bilinear interpolation, the border rows and
    columns repeated outward (Theano's values). ``use_1D_kernel`` upsamples the rows
    then the columns (else one 2-D kernel: the same values); ``batch_size`` and
    ``num_input_channels`` are hints. ``frac_ratio``, ``(p, q)`` or one such pair per
    axis, upsamples by ``p / q`` (with ``use_1D_kernel=False``, as in Theano): the
    upsampling by ``p`` read every ``q``-th row and column, ``ceil(rows * p / q)`` of
    them.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dtensor4("x")
    >>> bilinear_upsampling(x, 2).eval({x: np.array([[[[1.0, 2.0]]]])})[0, 0]
    array([[1. , 1.5, 2. , 2. ],
           [1. , 1.5, 2. , 2. ]])
    """
    if ratio and frac_ratio:
        raise ValueError("bilinear_upsampling: give ratio or frac_ratio, not both")
    if not (ratio or frac_ratio):
        raise ValueError("bilinear_upsampling: no ratio (nor frac_ratio) given")
    input = as_tensor_variable(input)  # noqa: A001
    if frac_ratio:
        if use_1D_kernel:
            raise ValueError(
                "bilinear_upsampling: fractional ratios need use_1D_kernel=False (as in Theano)"
            )
        return _frac_bilinear_upsampling(input, frac_ratio)
    rows, cols = tb.shape_i(input, 2), tb.shape_i(input, 3)
    images = input.reshape((-1, 1, rows, cols))
    # One border row and column repeated on each side, so that the interpolation at the
    # edges reads the edge values.
    images = tb.concatenate([images[:, :, :1, :], images, images[:, :, -1:, :]], axis=2)
    images = tb.concatenate([images[:, :, :, :1], images, images[:, :, :, -1:]], axis=3)
    # The transposed convolution by the bilinear kernel (length 2 * ratio - 1, stride
    # ratio) with this padding puts the original samples at the centres of the blocks.
    pad = 2 * ratio - (ratio - 1) // 2 - 1
    if use_1D_kernel:
        kern = bilinear_kernel_1D(ratio)
        by_rows = conv2d_grad_wrt_inputs(
            images,
            kern.dimshuffle("x", "x", 0, "x"),
            input_shape=(None, 1, rows * ratio, cols + 2),
            border_mode=(pad, 0),
            subsample=(ratio, 1),
        )
        out = conv2d_grad_wrt_inputs(
            by_rows,
            kern.dimshuffle("x", "x", "x", 0),
            input_shape=(None, 1, rows * ratio, cols * ratio),
            border_mode=(0, pad),
            subsample=(1, ratio),
        )
    else:
        out = conv2d_grad_wrt_inputs(
            images,
            bilinear_kernel_2D(ratio).dimshuffle("x", "x", 0, 1),
            input_shape=(None, 1, rows * ratio, cols * ratio),
            border_mode=(pad, pad),
            subsample=(ratio, ratio),
        )
    shape = (tb.shape_i(input, 0), tb.shape_i(input, 1), rows * ratio, cols * ratio)
    return out.reshape(shape)


def _frac_ratios(frac_ratio):
    """``((p_rows, q_rows), (p_cols, q_cols))`` in lowest terms from Theano's
    ``frac_ratio``: one ``(p, q)`` pair for both axes, or a pair per axis."""
    if not isinstance(frac_ratio, tuple) or len(frac_ratio) != 2:
        raise ValueError(f"bilinear_upsampling: frac_ratio must be a tuple, got {frac_ratio!r}")
    pairs = frac_ratio if isinstance(frac_ratio[0], tuple) else (frac_ratio, frac_ratio)
    out = []
    for pair in pairs:
        p, q = (int(v) for v in pair)
        if p < 1 or q < 1:
            raise ValueError(f"bilinear_upsampling: ratios must be positive, got {frac_ratio!r}")
        g = math.gcd(p, q)
        out.append((p // g, q // g))
    return tuple(out)


def _upsample_axis(x, axis, p, q):
    """``x`` interpolated along ``axis`` at the samples of Theano's bilinear upsampling
    by ``p`` (sample ``j`` at ``(j - (p - 1) // 2) / p`` input steps, held at the
    borders), every ``q``-th of them."""
    length = tb.shape_i(x, axis)
    n = (length * p + q - 1) // q
    num = tb.arange(n) * q - (p - 1) // 2  # p times the input position
    lo = tm.clip(num // p, 0, length - 1)
    hi = tm.minimum(lo + 1, length - 1)
    t = tb.cast(tm.clip(num - lo * p, 0, p), x.dtype) / np.asarray(p, dtype=x.dtype)
    pattern = ["x"] * x.ndim
    pattern[axis] = 0
    t = t.dimshuffle(pattern)
    index = (slice(None),) * axis
    return x[(*index, lo)] * (1 - t) + x[(*index, hi)] * t


def _frac_bilinear_upsampling(x, frac_ratio):
    (pr, qr), (pc, qc) = _frac_ratios(frac_ratio)
    if x.ndim != 4:
        raise TypeError(f"bilinear_upsampling: input must be 4-D (NCHW), got {x.type}")
    return _upsample_axis(_upsample_axis(x, 2, pr, qr), 3, pc, qc)
