"""2-D convolution on NCHW tensors (``theano.tensor.nnet.abstract_conv``).

Three Ops, each the transpose of the others so gradients of any order close over them:

- ``AbstractConv2d(img, kern)``: the forward convolution;
- ``AbstractConv2d_gradWeights(img, topgrad, shape)``: gradient w.r.t. the filters;
- ``AbstractConv2d_gradInputs(kern, topgrad, shape)``: gradient w.r.t. the image.

``shape`` is an int vector with the two spatial lengths of the result (with a stride
they are not recoverable from ``topgrad`` alone).

``perform`` is im2col in numpy: ``sliding_window_view`` gives every receptive field
without copying and one ``tensordot`` (BLAS) contracts it with the filters; the
image gradient scatters back with one strided add per filter tap. ``filter_flip=True``
(the default, as in Theano) is a true convolution; ``False`` is cross-correlation.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.op import Op
from theano_dag.scalar import upcast
from theano_dag.tensor import basic as tb
from theano_dag.tensor.type import TensorType, float_dtypes, int_dtypes
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "AbstractConv2d",
    "AbstractConv2d_gradWeights",
    "AbstractConv2d_gradInputs",
    "Conv2dBiasAct",
    "Conv2d",
    "ConvGradWeights",
    "ConvGradInputs",
    "conv2d",
    "conv2d_grad_wrt_inputs",
    "conv2d_grad_wrt_weights",
    "get_conv_output_shape",
    "get_conv_shape_1axis",
    "border_mode_to_pad",
]


# -- parameters -------------------------------------------------------------------------


def _pair(value, name, who, minimum):
    if isinstance(value, (int, np.integer)):
        value = (value, value)
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(f"{who}: {name} must be an int or a pair of ints, got {value!r}") from None
    if not all(isinstance(v, (int, np.integer)) and v >= minimum for v in (a, b)):
        raise ValueError(f"{who}: {name} must be ints >= {minimum}, got {value!r}")
    return int(a), int(b)


def _norm_border_mode(border_mode, who):
    """Canonical border mode: ``'valid'``, ``'full'``, ``'half'``, or a pair whose entries
    are an int (symmetric padding) or a ``(before, after)`` pair."""
    if isinstance(border_mode, str):
        if border_mode not in ("valid", "full", "half"):
            raise ValueError(
                f"{who}: border_mode must be 'valid', 'full', 'half', an int or "
                f"a pair, got {border_mode!r}"
            )
        return border_mode
    if isinstance(border_mode, (int, np.integer)):
        border_mode = (border_mode, border_mode)
    if not isinstance(border_mode, (tuple, list)) or len(border_mode) != 2:
        raise ValueError(
            f"{who}: border_mode must be 'valid', 'full', 'half', an int or a "
            f"pair, got {border_mode!r}"
        )
    out = []
    for p in border_mode:
        if isinstance(p, (int, np.integer)):
            if p < 0:
                raise ValueError(f"{who}: padding must be >= 0, got {border_mode!r}")
            out.append(int(p))
        else:
            lo, hi = _pair(p, "border_mode", who, 0)
            out.append(lo if lo == hi else (lo, hi))
    return "valid" if out == [0, 0] else tuple(out)


def border_mode_to_pad(border_mode, kshp, dilation=(1, 1)):
    """The ``((top, bottom), (left, right))`` zero padding a border mode means for
    filters of spatial shape ``kshp``.

    >>> border_mode_to_pad("half", (3, 5))
    ((1, 1), (2, 2))
    >>> border_mode_to_pad((1, (0, 2)), (3, 3))
    ((1, 1), (0, 2))
    """
    mode = _norm_border_mode(border_mode, "border_mode_to_pad")
    pads = []
    for d in range(2):
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


def get_conv_output_shape(
    image_shape, kernel_shape, border_mode, subsample, filter_dilation=(1, 1)
):
    """Output shape ``(batch, n_filters, height, width)`` of a 2-D convolution.

    >>> get_conv_output_shape((2, 3, 8, 8), (4, 3, 3, 3), "half", (2, 2))
    (2, 4, 4, 4)
    """
    mode = _norm_border_mode(border_mode, "get_conv_output_shape")
    spatial = []
    for d in range(2):
        bm = mode if isinstance(mode, str) else mode[d]
        spatial.append(
            get_conv_shape_1axis(
                image_shape[2 + d], kernel_shape[2 + d], bm, subsample[d], filter_dilation[d]
            )
        )
    return (image_shape[0], kernel_shape[0], *spatial)


# -- numpy kernels ----------------------------------------------------------------------


def _pad(x, pads):
    if any(pads[0]) or any(pads[1]):
        return np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]))
    return x


def _windows(xp, kshp, out_hw, stride, dil):
    """Every receptive field of the padded image: a view ``(N, C, OH, OW, KH, KW)``."""
    kh_eff = (kshp[0] - 1) * dil[0] + 1
    kw_eff = (kshp[1] - 1) * dil[1] + 1
    w = sliding_window_view(xp, (kh_eff, kw_eff), axis=(2, 3))
    w = w[:, :, :: stride[0], :: stride[1], :: dil[0], :: dil[1]]
    return w[:, :, : out_hw[0], : out_hw[1]]


def _out_hw(padded_hw, kshp, stride, dil, who, shapes):
    out = tuple((padded_hw[d] - (kshp[d] - 1) * dil[d] - 1) // stride[d] + 1 for d in range(2))
    if min(out) <= 0:
        raise ValueError(
            f"{who}: the filters ({kshp[0]}x{kshp[1]}, dilation {dil}) are larger "
            f"than the padded image ({padded_hw[0]}x{padded_hw[1]}); shapes "
            f"{shapes}"
        )
    return out


def _conv_forward(op, x, w):
    n, c, _, _ = x.shape
    f, cg, kh, kw = w.shape
    g = op.num_groups
    if c != cg * g or f % g:
        raise ValueError(
            f"{op}: image has {c} channels, filters expect {cg} per group x "
            f"{g} group(s) and {f} filters (must divide by the groups); "
            f"shapes {x.shape}, {w.shape}"
        )
    pads = border_mode_to_pad(op.border_mode, (kh, kw), op.filter_dilation)
    xp = _pad(x, pads)
    out_hw = _out_hw(
        xp.shape[2:], (kh, kw), op.subsample, op.filter_dilation, op, (x.shape, w.shape)
    )
    if op.filter_flip:
        w = w[:, :, ::-1, ::-1]
    win = _windows(xp, (kh, kw), out_hw, op.subsample, op.filter_dilation)
    fg = f // g
    parts = [
        np.tensordot(
            win[:, i * cg : (i + 1) * cg], w[i * fg : (i + 1) * fg], axes=([1, 4, 5], [1, 2, 3])
        )
        for i in range(g)
    ]
    out = parts[0] if g == 1 else np.concatenate(parts, axis=-1)
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


def _conv_grad_weights(op, x, gy, kshp):
    n, c, _, _ = x.shape
    g = op.num_groups
    f = gy.shape[1]
    if c % g or f % g or gy.shape[0] != n:
        raise ValueError(
            f"{op}: image {x.shape} and output gradient {gy.shape} do not fit " f"{g} group(s)"
        )
    pads = border_mode_to_pad(op.border_mode, kshp, op.filter_dilation)
    xp = _pad(x, pads)
    out_hw = _out_hw(xp.shape[2:], kshp, op.subsample, op.filter_dilation, op, (x.shape, gy.shape))
    if out_hw != gy.shape[2:]:
        raise ValueError(
            f"{op}: output gradient has spatial shape {gy.shape[2:]}, the "
            f"convolution of image {x.shape} gives {out_hw}"
        )
    win = _windows(xp, kshp, out_hw, op.subsample, op.filter_dilation)
    cg, fg = c // g, f // g
    parts = [
        np.tensordot(
            gy[:, i * fg : (i + 1) * fg], win[:, i * cg : (i + 1) * cg], axes=([0, 2, 3], [0, 2, 3])
        )
        for i in range(g)
    ]
    dw = parts[0] if g == 1 else np.concatenate(parts, axis=0)
    if op.filter_flip:
        dw = dw[:, :, ::-1, ::-1]
    return np.ascontiguousarray(dw)


def _conv_grad_inputs(op, w, gy, imshp):
    f, cg, kh, kw = w.shape
    g = op.num_groups
    n = gy.shape[0]
    if gy.shape[1] != f or f % g:
        raise ValueError(
            f"{op}: output gradient {gy.shape} does not fit filters {w.shape} " f"in {g} group(s)"
        )
    pads = border_mode_to_pad(op.border_mode, (kh, kw), op.filter_dilation)
    hp = imshp[0] + sum(pads[0])
    wp = imshp[1] + sum(pads[1])
    out_hw = _out_hw(
        (hp, wp), (kh, kw), op.subsample, op.filter_dilation, op, (w.shape, gy.shape, tuple(imshp))
    )
    if out_hw != gy.shape[2:]:
        raise ValueError(
            f"{op}: output gradient has spatial shape {gy.shape[2:]}, the "
            f"convolution of a {tuple(imshp)} image gives {out_hw}"
        )
    if op.filter_flip:
        w = w[:, :, ::-1, ::-1]
    fg = f // g
    dtype = np.result_type(w.dtype, gy.dtype)
    dxp = np.zeros((n, cg * g, hp, wp), dtype=dtype)
    (sh, sw), (dh, dw) = op.subsample, op.filter_dilation
    oh, ow = out_hw
    for i in range(g):
        # cols[n, c, oh, ow, kh, kw]: what each receptive-field tap receives.
        cols = np.tensordot(
            gy[:, i * fg : (i + 1) * fg], w[i * fg : (i + 1) * fg], axes=([1], [0])
        ).transpose(0, 3, 1, 2, 4, 5)
        dst = dxp[:, i * cg : (i + 1) * cg]
        for a in range(kh):
            for b in range(kw):
                dst[
                    :,
                    :,
                    a * dh : a * dh + sh * (oh - 1) + 1 : sh,
                    b * dw : b * dw + sw * (ow - 1) + 1 : sw,
                ] += cols[..., a, b]
    (pt, _), (pl, _) = pads
    return np.ascontiguousarray(dxp[:, :, pt : pt + imshp[0], pl : pl + imshp[1]])


# -- Ops --------------------------------------------------------------------------------


def _tensor4(op, name, x):
    x = as_tensor_variable(x)
    if x.ndim != 4:
        raise TypeError(f"{op}: argument {name} must be a 4-D tensor (NCHW), got {x.type}")
    if x.dtype not in float_dtypes:
        raise TypeError(f"{op}: argument {name} must be a float tensor, got {x.type}")
    return x


def _shape_vector(op, name, shape):
    shape = as_tensor_variable(shape)
    if shape.ndim != 1 or shape.dtype not in int_dtypes:
        raise TypeError(
            f"{op}: argument {name} must be an int vector of 2 spatial lengths, "
            f"got {shape.type}"
        )
    if shape.type.shape[0] not in (None, 2):
        raise TypeError(f"{op}: argument {name} must have 2 entries, got {shape.type}")
    return shape


def _static_entries(v):
    """The two entries of a shape vector where known at graph-build time (else None)."""
    if isinstance(v, Constant):
        return tuple(int(s) for s in np.asarray(v.data))
    if v.owner is not None and isinstance(v.owner.op, tb.MakeVector):
        return tuple(
            int(np.asarray(i.data)) if isinstance(i, Constant) else None for i in v.owner.inputs
        )
    return (None, None)


def _symbolic_entries(v):
    if v.owner is not None and isinstance(v.owner.op, tb.MakeVector):
        return tuple(v.owner.inputs)
    static = _static_entries(v)
    return tuple(s if s is not None else v[d] for d, s in enumerate(static))


def _spatial_shape(x):
    return tb.make_vector(tb.shape_i(x, 2), tb.shape_i(x, 3))


class BaseAbstractConv2d(Op):
    """Parameters shared by the three convolution Ops (see ``conv2d``)."""

    __props__ = ("border_mode", "subsample", "filter_flip", "filter_dilation", "num_groups")

    def __init__(
        self,
        border_mode="valid",
        subsample=(1, 1),
        filter_flip=True,
        filter_dilation=(1, 1),
        num_groups=1,
    ):
        who = type(self).__name__
        self.border_mode = _norm_border_mode(border_mode, who)
        self.subsample = _pair(subsample, "subsample", who, 1)
        self.filter_flip = bool(filter_flip)
        self.filter_dilation = _pair(filter_dilation, "filter_dilation", who, 1)
        if not isinstance(num_groups, (int, np.integer)) or num_groups < 1:
            raise ValueError(f"{who}: num_groups must be an int >= 1, got {num_groups!r}")
        self.num_groups = int(num_groups)

    def __str__(self):
        return (
            f"{type(self).__name__}{{{self.border_mode}, {self.subsample}, "
            f"{self.filter_flip}, {self.filter_dilation}, {self.num_groups}}}"
        )

    __repr__ = __str__

    def _params(self):
        return dict(
            border_mode=self.border_mode,
            subsample=self.subsample,
            filter_flip=self.filter_flip,
            filter_dilation=self.filter_dilation,
            num_groups=self.num_groups,
        )

    def _out_len(self, img, kern, d):
        bm = self.border_mode if isinstance(self.border_mode, str) else self.border_mode[d]
        return get_conv_shape_1axis(img, kern, bm, self.subsample[d], self.filter_dilation[d])


class AbstractConv2d(BaseAbstractConv2d):
    """Convolve a batch of images ``(N, C, H, W)`` with filters ``(F, C/groups, KH, KW)``.

    >>> from theano_dag import tensor as tt
    >>> x = tt.TensorType("float64", shape=(None, 3, 8, 8))("x")
    >>> w = tt.TensorType("float64", shape=(4, 3, 3, 3))("w")
    >>> AbstractConv2d(border_mode="half", subsample=(2, 2))(x, w).type
    TensorType(float64, shape=(?, 4, 4, 4))
    """

    def make_node(self, img, kern):
        img = _tensor4(self, "img", img)
        kern = _tensor4(self, "kern", kern)
        c, cg = img.type.shape[1], kern.type.shape[1]
        if c is not None and cg is not None and c != cg * self.num_groups:
            raise ValueError(
                f"{self}: img has {c} channels but kern expects {cg} x "
                f"{self.num_groups} group(s)"
            )
        hw = [self._out_len(img.type.shape[2 + d], kern.type.shape[2 + d], d) for d in (0, 1)]
        if any(s is not None and s <= 0 for s in hw):
            raise ValueError(
                f"{self}: the filters {kern.type.shape} do not fit in the image "
                f"{img.type.shape}"
            )
        shape = (img.type.shape[0], kern.type.shape[0], *hw)
        out = TensorType(upcast(img.dtype, kern.dtype), shape=shape)
        return Apply(self, [img, kern], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        x, w = inputs
        out = _conv_forward(self, x, w)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        xs, ws = input_shapes
        return [(xs[0], ws[0], self._out_len(xs[2], ws[2], 0), self._out_len(xs[3], ws[3], 1))]

    def L_op(self, inputs, outputs, output_grads):
        img, kern = inputs
        (g,) = output_grads
        d_img = AbstractConv2d_gradInputs(**self._params())(kern, g, _spatial_shape(img))
        d_kern = AbstractConv2d_gradWeights(**self._params())(img, g, _spatial_shape(kern))
        return [tb.cast(d_img, img.dtype), tb.cast(d_kern, kern.dtype)]

    def R_op(self, inputs, eval_points):
        img, kern = inputs
        terms = []
        if eval_points[0] is not None:
            terms.append(self(eval_points[0], kern))
        if eval_points[1] is not None:
            terms.append(self(img, eval_points[1]))
        return [None if not terms else terms[0] if len(terms) == 1 else terms[0] + terms[1]]


class AbstractConv2d_gradWeights(BaseAbstractConv2d):  # noqa: N801 (Theano's name)
    """Gradient of ``AbstractConv2d`` w.r.t. the filters: inputs ``(img, topgrad, shape)``
    with ``shape`` the filters' ``(KH, KW)``.

    >>> from theano_dag import tensor as tt
    >>> op = AbstractConv2d_gradWeights()
    >>> op(tt.dtensor4("x"), tt.dtensor4("gy"), [3, 3]).type
    TensorType(float64, shape=(?, ?, 3, 3))
    """

    def make_node(self, img, topgrad, shape):
        img = _tensor4(self, "img", img)
        topgrad = _tensor4(self, "topgrad", topgrad)
        shape = _shape_vector(self, "shape", shape)
        c = img.type.shape[1]
        cg = None if c is None else c // self.num_groups
        out_shape = (topgrad.type.shape[1], cg, *_static_entries(shape))
        out = TensorType(upcast(img.dtype, topgrad.dtype), shape=out_shape)
        return Apply(self, [img, topgrad, shape], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        x, gy, shape = inputs
        dw = _conv_grad_weights(self, x, gy, tuple(int(s) for s in shape))
        output_storage[0][0] = np.asarray(dw, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        xs, gs, _ = input_shapes
        kh, kw = _symbolic_entries(node.inputs[2])
        c = xs[1] if self.num_groups == 1 else xs[1] // self.num_groups
        return [(gs[1], c, kh, kw)]

    def connection_pattern(self, node):
        return [[True], [True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        img, topgrad, _ = inputs
        (g,) = output_grads
        d_img = AbstractConv2d_gradInputs(**self._params())(g, topgrad, _spatial_shape(img))
        d_top = AbstractConv2d(**self._params())(img, g)
        return [tb.cast(d_img, img.dtype), tb.cast(d_top, topgrad.dtype), tb.disconnected()]


class AbstractConv2d_gradInputs(BaseAbstractConv2d):  # noqa: N801 (Theano's name)
    """Gradient of ``AbstractConv2d`` w.r.t. the image: inputs ``(kern, topgrad, shape)``
    with ``shape`` the image's ``(H, W)`` (a transposed convolution).

    >>> from theano_dag import tensor as tt
    >>> op = AbstractConv2d_gradInputs(subsample=(2, 2))
    >>> op(tt.dtensor4("w"), tt.dtensor4("gy"), [9, 9]).type
    TensorType(float64, shape=(?, ?, 9, 9))
    """

    def make_node(self, kern, topgrad, shape):
        kern = _tensor4(self, "kern", kern)
        topgrad = _tensor4(self, "topgrad", topgrad)
        shape = _shape_vector(self, "shape", shape)
        cg = kern.type.shape[1]
        c = None if cg is None else cg * self.num_groups
        out_shape = (topgrad.type.shape[0], c, *_static_entries(shape))
        out = TensorType(upcast(kern.dtype, topgrad.dtype), shape=out_shape)
        return Apply(self, [kern, topgrad, shape], [out()])

    def perform(self, node, inputs, output_storage, params=None):
        w, gy, shape = inputs
        dx = _conv_grad_inputs(self, w, gy, tuple(int(s) for s in shape))
        output_storage[0][0] = np.asarray(dx, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        ws, gs, _ = input_shapes
        h, w = _symbolic_entries(node.inputs[2])
        c = ws[1] if self.num_groups == 1 else ws[1] * self.num_groups
        return [(gs[0], c, h, w)]

    def connection_pattern(self, node):
        return [[True], [True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        kern, topgrad, _ = inputs
        (g,) = output_grads
        d_kern = AbstractConv2d_gradWeights(**self._params())(g, topgrad, _spatial_shape(kern))
        d_top = AbstractConv2d(**self._params())(g, kern)
        return [tb.cast(d_kern, kern.dtype), tb.cast(d_top, topgrad.dtype), tb.disconnected()]


_ACTIVATIONS = (None, "relu")


class Conv2dBiasAct(BaseAbstractConv2d):
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

    __props__ = BaseAbstractConv2d.__props__ + ("activation",)

    def __init__(self, activation=None, **params):
        super().__init__(**params)
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
    if alias is not None:
        if primary is not None and primary != default:
            raise ValueError(f"conv2d: give {primary_name} or {alias_name}, not both")
        return alias
    return default if primary is None else primary


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

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x, w = tt.dtensor4("x"), tt.dtensor4("w")
    >>> y = conv2d(x, w, border_mode="half")
    >>> y.eval({x: np.ones((1, 1, 3, 3)), w: np.ones((1, 1, 3, 3))})[0, 0]
    array([[4., 6., 4.],
           [6., 9., 6.],
           [4., 6., 4.]])
    """
    if kwargs.get("unshared"):
        raise NotImplementedError(
            "conv2d: unshared (locally connected) convolution is not " "supported"
        )
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
        if len(hint) != 4 or any(
            h is not None and s is not None and h != s for h, s in zip(hint, var.type.shape)
        ):
            raise ValueError(f"conv2d: {name}_shape {tuple(hint)} does not match {var.type}")
    op = AbstractConv2d(
        border_mode=border_mode,
        subsample=subsample,
        filter_flip=filter_flip,
        filter_dilation=filter_dilation,
        num_groups=num_groups,
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
):
    """The transposed convolution: gradient of ``conv2d`` w.r.t. an input of shape
    ``input_shape`` (its last two entries are used).

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
    )
    return op(filters, output_grad, tb.as_int_vector(list(input_shape)[-2:], "input_shape"))


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
):
    """Gradient of ``conv2d`` w.r.t. filters of shape ``filter_shape`` (last two used).

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
    )
    return op(input, output_grad, tb.as_int_vector(list(filter_shape)[-2:], "filter_shape"))
