"""CPU engine emitters for convolution and pooling: im2col into planned workspaces + BLAS.

A convolution is a matrix product once each receptive field is laid out as a column
(*im2col*): for one image, ``out (F, OH*OW) = W (F, C*KH*KW) @ cols (C*KH*KW, OH*OW)``,
which lands in NCHW order with no transpose. The columns are one copy of the (padded)
image, made by a C loop (``native/conv_kernels.c``, :class:`ConvKernels`, built by
``config.cxx``; numpy's strided copy without a compiler); the product is OpenBLAS's
GEMM through ``numpy.matmul`` with ``out=``. A 3x3 convolution at stride 1 on an output
of :data:`WINOGRAD_MIN_PIXELS` or more runs as Winograd's F(4x4, 3x3) instead
(:data:`WINOGRAD4_MIN_PIXELS`; F(2x2, 3x3) below it): the filters, the image's 6x6
tiles and the products transformed in C, 36 products of ``U[k] (F, C) @ V[k] (C,
tiles)`` per band of tile rows: 4x fewer multiplications (F(2x2, 3x3): 16 products,
2.25x); a 5x5 one as F(2x2, 3x3) on its four 3x3 blocks (one product over 4C
channels). 1x7 and 7x1 convolutions at stride 1
run as Winograd's F(3, 7) along the filters' axis (9 products per band, 2.33x fewer
multiplications). Images or filters with a NaN or an infinity take im2col: every
Winograd transform adds and subtracts neighbours, which would spread such a value to
outputs whose windows do not hold it, or turn an infinity into inf - inf = NaN.
Why this method (measured in ``benchmarks/conv.py`` and
``benchmarks/results/conv_direct_c_probe.txt``; docs/performance.md, "Convolution"):
the GEMM is most of the time on ResNet50's layers and OpenBLAS's is as fast as any we
can call; a direct convolution compiled from C (four filters per pass, vectorized by
the compiler) was 3x to 10x slower than it. The ``onednn`` package is Intel's SYCL
build, which needs the DPC++ and OpenCL runtimes; it was not bound here.

What the memory planner sees: each node is a few steps, and every scratch array is a
:class:`~.impls.Temp` written by a step of its own (the *workspace*): the zero-padded
image, the columns, the filters' accumulator. So workspaces share blocks with the dead
values around them like any value, and the output goes into the target the plan gives.
The columns of a whole batch are made at once (one batched ``matmul``) up to
:data:`WORKSPACE_MAX_BYTES`; bigger batches are done in chunks of images. The forward
convolution makes the columns of an image over :data:`TILE_BYTES` in tiles of output
rows, each multiplied into its rows of the output while it is in cache.

- forward: pad -> im2col -> ``W @ cols`` per group into the output;
- gradient w.r.t. the filters: pad -> im2col -> ``gy[n] @ cols[n].T`` summed over images;
- gradient w.r.t. the image: ``W.T @ gy`` -> columns -> scatter-add of each filter tap
  (col2im, clipped to the image: no padded buffer);
- 1x1 filters with stride 1 and no padding skip the columns: the image is its own.

A workspace a given convolution does not need (no padding; a plain 1x1) is planned
with shape ``(0,)``. ``Conv2dBiasAct`` (the ``conv_fold`` rewrites' node) scales, adds
its bias and applies its relu to each chunk of the output right after its product, in
place (one C pass; in the Winograd path, in the output's transform); or scales its
filters into a workspace when they are smaller than the output.

Pooling (2-D, every mode and border) is a C loop that folds the rows of each output row,
then each such row along its columns (no workspace). Without a compiler, or for a
strided image, it is a running ``maximum``/``add`` of one strided slice per window
offset into the output, over a planned padded copy when there is padding or a partial
window; a global pool (more offsets than windows) is one reduction over the windows'
view.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import threading
import warnings

import numpy as np
from numpy.lib.stride_tricks import as_strided

from theano_dag.config import config
from theano_dag.engines.cpu.emit.impls import Step, register_impl
from theano_dag.engines.cpu.native import c_source, cc
from theano_dag.tensor.nnet.abstract_conv import (
    AbstractConv2d,
    AbstractConv2d_gradInputs,
    AbstractConv2d_gradWeights,
    Conv2dBiasAct,
    border_mode_to_pad,
    check_conv_groups,
    check_grad_inputs_groups,
    check_grad_weights_groups,
)
from theano_dag.tensor.nnet.pool import Pool

try:  # the `threads` extra: the BLAS held to one thread while the engine's threads share
    from threadpoolctl import ThreadpoolController  # a Winograd convolution's bands
except ImportError:
    ThreadpoolController = None

__all__ = [
    "ConvGeometry",
    "ConvKernels",
    "conv_kernels",
    "WORKSPACE_MAX_BYTES",
    "conv_forward",
    "conv_grad_weights",
    "conv_grad_inputs",
    "pool_forward",
]

# The columns of this many bytes at most are made at once: a bigger batch is done in
# chunks of images (the columns of one image are made whatever their size).
WORKSPACE_MAX_BYTES = 1 << 25
# The forward convolution makes the columns of an image bigger than this in tiles of
# output rows, each multiplied while it is in cache: InceptionV3's stem would write
# 25 MB of columns per image to memory and read them back (and plan that workspace).
TILE_BYTES = 1 << 21
_FLOATS = ("float32", "float64")
# A 3x3 convolution at stride 1 with at least this many output pixels runs as
# Winograd's F(2x2, 3x3) (below it, the transforms cost more than the products save:
# InceptionV3's 8x8 layers); its workspace holds the transformed filters and one band
# of tile rows' transformed image and products, of about this many bytes.
WINOGRAD_MIN_PIXELS = 400
WINOGRAD_BAND_BYTES = 1 << 21
# Winograd's products are F x C by C x tiles: with fewer input channels than this they
# run far below the BLAS's speed and im2col's one product is faster (a 5x5 layer of 1
# channel at 28x28, batch 128: 8.7 ms against 4.8; 3 channels, 3x3: 1.5x slower).
WINOGRAD_MIN_CHANNELS = 32
# The transforms keep a few rows of the image on the C stack: wider images take im2col.
WINOGRAD_MAX_WIDTH = 4096
# A 3x3 convolution on an output of at least this many pixels runs as F(4x4, 3x3): 36
# products of a quarter of the tiles, 4x fewer multiplications than im2col's (1.2x to
# 1.7x faster than F(2x2, 3x3) from 24x24 to 147x147 outputs, InceptionV3's and
# ResNet50's layers; slower at 14x14, which takes im2col anyway).
WINOGRAD4_MIN_PIXELS = 400
# 1x7 and 7x1 convolutions at stride 1 with at least this many output pixels run as
# Winograd's F(3, 7) along the filters' axis (9 products per band, 2.33x fewer
# multiplications): InceptionV3's 17x17 layers.
WINOGRAD7_MIN_PIXELS = 100


class ConvGeometry:
    """The static parameters of one convolution node, resolved for its filter size.

    >>> g = ConvGeometry(AbstractConv2d(border_mode="half"), (3, 3))
    >>> g.pads, g.padded((1, 2, 5, 5)), g.out_hw((5, 5))
    (((1, 1), (1, 1)), (1, 2, 7, 7), (5, 5))
    """

    __slots__ = ("pads", "stride", "dil", "flip", "groups", "kshp", "plain", "native")

    def __init__(self, op, kshp, native=None):
        self.kshp = tuple(kshp)
        # The C copy loops (a ConvKernels), or None: numpy's strided copies.
        self.native = native
        self.pads = border_mode_to_pad(op.border_mode, self.kshp, op.filter_dilation)
        self.stride = op.subsample
        self.dil = op.filter_dilation
        self.flip = op.filter_flip
        self.groups = op.num_groups
        # A 1x1 filter at stride 1 without padding reads the image as its own columns.
        self.plain = self.kshp == (1, 1) and self.stride == (1, 1) and not self.padding

    @property
    def padding(self):
        return any(self.pads[0]) or any(self.pads[1])

    def padded(self, xshape):
        (pt, pb), (pl, pr) = self.pads
        return (xshape[0], xshape[1], xshape[2] + pt + pb, xshape[3] + pl + pr)

    def out_hw(self, hw):
        (pt, pb), (pl, pr) = self.pads
        padded = (hw[0] + pt + pb, hw[1] + pl + pr)
        return tuple(
            (padded[d] - (self.kshp[d] - 1) * self.dil[d] - 1) // self.stride[d] + 1
            for d in range(2)
        )

    def scales_filters(self, xshape, wshape):
        """Whether a per-filter scale is cheaper applied to the filters than to the
        output: each costs a pass over what it scales."""
        oh, ow = self.out_hw(xshape[2:])
        return math.prod(wshape[1:]) <= xshape[0] * oh * ow

    def tile_rows(self, c, out_hw, itemsize):
        """How many output rows the forward convolution makes columns of at once: all
        of them, unless an image's columns exceed :data:`TILE_BYTES`."""
        per_row = c * self.kshp[0] * self.kshp[1] * out_hw[1] * itemsize
        return max(1, min(out_hw[0], TILE_BYTES // max(per_row, 1)))

    def winograd(self, out_hw, dtype, channels):
        """Whether the forward convolution runs as Winograd's F(4x4, 3x3) or F(2x2,
        3x3) (:meth:`wino_tile`): 3x3 filters (5x5 ones as four 3x3 blocks:
        :attr:`wino_blocks`) at stride 1, undilated and ungrouped, with the C kernels, on
        a big enough output and image of :data:`WINOGRAD_MIN_CHANNELS` or more channels.

        >>> g = ConvGeometry(AbstractConv2d(border_mode="half"), (3, 3))
        >>> g.winograd((35, 35), "float32", 64)  # no C kernels
        False
        """
        return (
            self.native is not None
            and channels >= WINOGRAD_MIN_CHANNELS
            and self.kshp in ((3, 3), (5, 5))
            and self.stride == (1, 1)
            and self.dil == (1, 1)
            and self.groups == 1
            and out_hw[0] * out_hw[1] >= WINOGRAD_MIN_PIXELS
            and out_hw[1] <= WINOGRAD_MAX_WIDTH
            and np.dtype(dtype).name in _FLOATS
        )

    def winograd7(self, out_hw, dtype, channels):
        """``"rows"`` (7x1 filters) or ``"cols"`` (1x7) when the forward convolution runs
        as Winograd's F(3, 7) along the filters' axis: stride 1, undilated, ungrouped,
        with the C kernels, on an output of :data:`WINOGRAD7_MIN_PIXELS` or more and an
        image of :data:`WINOGRAD_MIN_CHANNELS` or more channels; else None.

        >>> g = ConvGeometry(AbstractConv2d(border_mode="half"), (1, 7))
        >>> g.winograd7((17, 17), "float32", 192) is None  # no C kernels
        True
        """
        if (
            self.native is None
            or channels < WINOGRAD_MIN_CHANNELS
            or self.stride != (1, 1)
            or self.dil != (1, 1)
            or self.groups != 1
            or out_hw[0] * out_hw[1] < WINOGRAD7_MIN_PIXELS
            or out_hw[1] > WINOGRAD_MAX_WIDTH
            or np.dtype(dtype).name not in _FLOATS
        ):
            return None
        return {(7, 1): "rows", (1, 7): "cols"}.get(self.kshp)

    def winograd7_offset(self, axis):
        """The rows (``axis`` "rows") or columns ("cols") of padding before the image
        when the F(3, 7) path reads it in place, padded along the filters' axis only;
        None when it needs the padded copy (padding across that axis too) or for
        ``axis`` None.

        >>> ConvGeometry(AbstractConv2d(border_mode=(0, 3)), (1, 7)).winograd7_offset("cols")
        3
        """
        if axis == "rows" and self.pads[1] == (0, 0):
            return self.pads[0][0]
        if axis == "cols" and self.pads[0] == (0, 0):
            return self.pads[1][0]
        return None

    @staticmethod
    def winograd7_band(axis, c, f, out_hw, itemsize):
        """``(outer rows per band, outer rows, tiles per outer row)`` of the F(3, 7)
        path: 7x1 filters tile each three output rows (one tile per column), 1x7
        filters each three output columns (one tile per row); a band's transformed
        image and products are about :data:`WINOGRAD_BAND_BYTES`.

        >>> ConvGeometry.winograd7_band("cols", 192, 192, (17, 17), 4)
        (6, 6, 17)
        """
        if axis == "rows":
            outer, inner = (out_hw[0] + 2) // 3, out_hw[1]
        else:  # the same on the image transposed
            outer, inner = (out_hw[1] + 2) // 3, out_hw[0]
        per_row = 9 * (c + f) * inner * itemsize
        return max(1, min(outer, WINOGRAD_BAND_BYTES // per_row)), outer, inner

    def winograd7_shape(self, c, f, out_hw, itemsize):
        """The F(3, 7) path's workspace, as :meth:`winograd_shape` with 9 slabs."""
        axis = {(7, 1): "rows", (1, 7): "cols"}[self.kshp]
        rows, _outer, inner = self.winograd7_band(axis, c, f, out_hw, itemsize)
        t = rows * inner
        return (9 * (f * c + _slab(c * t, itemsize) + _slab(f * t, itemsize)),)

    def wino_tile(self, out_hw):
        """The outputs a Winograd tile gives along each side: 4 (F(4x4, 3x3)) for 3x3
        filters on an output of :data:`WINOGRAD4_MIN_PIXELS` or more, else 2."""
        big = out_hw[0] * out_hw[1] >= WINOGRAD4_MIN_PIXELS
        return 4 if self.kshp == (3, 3) and big else 2

    @staticmethod
    def winograd_band(c, f, out_hw, itemsize, m=2):
        """``(tile rows per band, tiles per row)`` of the Winograd path: 2x2 outputs a
        tile; a band's transformed image and products are about
        :data:`WINOGRAD_BAND_BYTES`.

        >>> ConvGeometry.winograd_band(64, 96, (35, 35), 4)
        (11, 18)
        """
        th, tw = -(-out_hw[0] // m), -(-out_hw[1] // m)
        per_row = (m + 2) ** 2 * (c + f) * tw * itemsize
        return max(1, min(th, WINOGRAD_BAND_BYTES // per_row)), tw

    @property
    def wino_blocks(self):
        """The 3x3 blocks of each filter on the Winograd path: 4 for 5x5 filters (zeroed
        to 6x6), each block's transformed image a share of C more channels."""
        return 4 if self.kshp == (5, 5) else 1

    def winograd_shape(self, c, f, out_hw, itemsize):
        """The Winograd path's workspace (in place of the columns): the transformed
        filters ``(16, F, C)``, then a band's image ``(16, C, T)`` and products
        ``(16, F, T)``, T tiles a band, as one flat array (each of the 16 slabs of the
        last two a little longer: :func:`_slab`); C counts each 3x3 block's channels."""
        c = c * self.wino_blocks
        m = self.wino_tile(out_hw)
        rows, tw = self.winograd_band(c, f, out_hw, itemsize, m)
        t = rows * tw
        return ((m + 2) ** 2 * (f * c + _slab(c * t, itemsize) + _slab(f * t, itemsize)),)

    def forward_cols_shape(self, n, c, out_hw, itemsize):
        """The forward convolution's columns: as :meth:`cols_shape`, or one tile of
        :meth:`tile_rows` output rows of one image.

        >>> g = ConvGeometry(AbstractConv2d(border_mode="half"), (3, 3))
        >>> g.forward_cols_shape(8, 32, (147, 147), 4), g.forward_cols_shape(8, 64, (8, 8), 4)
        ((1, 288, 1764), (8, 576, 64))
        """
        rows = self.tile_rows(c, out_hw, itemsize)
        if rows < out_hw[0]:
            return (1, c * self.kshp[0] * self.kshp[1], rows * out_hw[1])
        return self.cols_shape(n, c, out_hw, itemsize)

    def cols_shape(self, n, c, out_hw, itemsize):
        """``(images per chunk, C*KH*KW, OH*OW)``: the columns' workspace."""
        k = c * self.kshp[0] * self.kshp[1]
        per_image = k * out_hw[0] * out_hw[1] * itemsize
        nb = max(1, min(n, WORKSPACE_MAX_BYTES // max(per_image, 1)))
        return (nb, k, out_hw[0] * out_hw[1])


_P, _L, _I = ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int
_CODES = {"float32": "f32", "float64": "f64"}


class ConvKernels:
    """The C loops of ``native/conv_kernels.c`` (im2col, the fused epilogue, Winograd's
    transforms) for float32 and float64, loaded from ``lib``. ``im2col`` and
    ``epilogue`` return False, having done nothing, for arrays they do not take
    (another dtype, a row not contiguous), which then go through numpy; the Winograd
    path (:func:`_winograd_forward`) is chosen only for arrays they take."""

    def __init__(self, lib):
        self.im2col_fn, self.epilogue_fn = {}, {}
        self.wino_in_fn, self.wino_out_fn, self.wino_filters_fn = {}, {}, {}
        self.pool_fn, self.w7_fn, self.w7_filters_fn, self.all_finite_fn = {}, {}, {}, {}
        self.w4_fn = {}
        # keyed by the numpy dtype (a dtype's .name is a Python-level property: slow)
        for dtype, code in ((np.dtype(d), c) for d, c in _CODES.items()):
            f = getattr(lib, f"td_im2col_{code}")
            f.argtypes = [_P, _L, _L] + [_I] * 9 + [_P, _L]
            f.restype = None
            self.im2col_fn[dtype] = f
            f = getattr(lib, f"td_epilogue_{code}")
            f.argtypes = [_P, _L, _I, _L, _P, _P, _I]
            f.restype = None
            self.epilogue_fn[dtype] = f
            f = getattr(lib, f"td_wino_in_{code}")
            f.argtypes = [_P, _L, _L] + [_I] * 6 + [_P, _L, _L]
            f.restype = None
            self.wino_in_fn[dtype] = f
            for taps in (3, 5):
                f = getattr(lib, f"td_wino_filters{'' if taps == 3 else 5}_{code}")
                f.argtypes = [_P, _L, _I, _I, _P, _L]
                f.restype = None
                self.wino_filters_fn[dtype, taps] = f
            f = getattr(lib, f"td_pool_{code}")
            f.argtypes = [_P] + [_I] * 3 + [_P] + [_I] * 9 + [_P]
            f.restype = ctypes.c_int
            self.pool_fn[dtype] = f
            f = getattr(lib, f"td_wino_out_{code}")
            f.argtypes = [_P, _L, _L] + [_I] * 4 + [_P, _L, _I, _I, _P, _P, _I]
            f.restype = None
            self.wino_out_fn[dtype] = f
            # F(4x4, 3x3): the same arguments as F(2x2, 3x3)'s
            f4 = [getattr(lib, f"td_w4_{part}_{code}") for part in ("in", "out", "filters")]
            for f, like in zip(f4, (self.wino_in_fn, self.wino_out_fn, None)):
                f.argtypes = like[dtype].argtypes if like is not None else [_P, _L, _I, _I, _P, _L]
                f.restype = None
            self.w4_fn[dtype] = tuple(f4)
            # F(3, 7): {"rows": (in, out), "cols": (in, out)}
            fns = {}
            for axis in ("rows", "cols"):  # the same arguments; "cols" can run out of memory
                fi = getattr(lib, f"td_w7_in_{axis}_{code}")
                fi.argtypes = [_P, _L, _L] + [_I] * 5 + [_P, _L, _L, _I]
                fi.restype = ctypes.c_int if axis == "cols" else None
                fo = getattr(lib, f"td_w7_out_{axis}_{code}")
                fo.argtypes = [_P, _L, _L] + [_I] * 4 + [_P, _L, _I, _P, _P, _I]
                fo.restype = ctypes.c_int if axis == "cols" else None
                fns[axis] = (fi, fo)
            self.w7_fn[dtype] = fns
            f = getattr(lib, f"td_w7_filters_{code}")
            f.argtypes = [_P, _L, _I, _I, _P, _L]
            f.restype = None
            self.w7_filters_fn[dtype] = f
            f = getattr(lib, f"td_all_finite_{code}")
            f.argtypes = [_P, _L, _L, _I, _I, _I]
            f.restype = ctypes.c_int
            self.all_finite_fn[dtype] = f

    def im2col(self, src, cv, geo, nrows, ow):
        """The columns ``cv`` ``(m, K, nrows*ow)`` of the images ``src`` ``(m, C, H, W)``
        (from the tile's first source row)."""
        fn = self.im2col_fn.get(src.dtype)
        size = src.itemsize
        st = src.strides
        if fn is None or cv.dtype != src.dtype or st[3] != size or cv.strides[2] != size:
            return False
        if min(st) < 0 or any(v % size for v in st + cv.strides):
            return False
        kh, kw = geo.kshp
        for j in range(src.shape[0]):
            fn(
                src[j].ctypes.data,
                st[1] // size,
                st[2] // size,
                src.shape[1],
                kh,
                kw,
                nrows,
                ow,
                geo.stride[0],
                geo.stride[1],
                geo.dil[0],
                geo.dil[1],
                cv[j].ctypes.data,
                cv.strides[1] // size,
            )
        return True

    def epilogue(self, o, bias, relu, scale):
        """``o`` ``(m, F, P)`` scaled, biased and rectified in place, in one pass."""
        fn = self.epilogue_fn.get(o.dtype)
        size = o.itemsize
        vectors = [v for v in (bias, scale) if v is not None]
        if fn is None or o.strides[2] != size or o.strides[1] % size or o.strides[1] < 0:
            return False
        if any(v.dtype != o.dtype or not v.flags.c_contiguous for v in vectors):
            return False
        b = None if bias is None else bias.ctypes.data
        sc = None if scale is None else scale.ctypes.data
        for j in range(o.shape[0]):
            fn(o[j].ctypes.data, o.strides[1] // size, o.shape[1], o.shape[2], sc, b, int(relu))
        return True


def conv_kernels():
    """The C copy loops (:class:`ConvKernels`) built by the compiler ``config.cxx`` (and
    cached on disk like the fused kernels), or None without one: the emitters then copy
    through numpy.

    >>> k = conv_kernels()
    >>> k is None or isinstance(k, ConvKernels)
    True
    """
    return _load_kernels(config.cxx, config.compiledir)


@functools.cache
def _load_kernels(cxx, compiledir):
    tc = cc.get_toolchain(cxx)
    if tc is None:
        return None
    try:
        path = cc.compile_library(tc, c_source("conv_kernels.c"), cc.kernel_dir(compiledir))
        return ConvKernels(ctypes.CDLL(path))
    except (cc.CompileError, OSError) as e:
        warnings.warn(
            f"theano_dag: the convolution's C copy loops did not build ({e}); numpy copies",
            RuntimeWarning,
            stacklevel=2,
        )
        return None


def _filters(w, geo):
    """The filters as ``(F, C/groups*KH*KW)`` rows (flipped for a true convolution)."""
    if geo.flip:
        w = w[:, :, ::-1, ::-1]
    return _flat(w, 1)


def _flat(a, k):
    """``a`` with its axes from ``k`` on as one (not ``-1``, which numpy cannot resolve
    when a leading axis is empty: an empty batch, no filters)."""
    return a.reshape(*a.shape[:k], int(np.prod(a.shape[k:])))


def _pad_into(x, xp, geo):
    """Copy ``x`` into the middle of ``xp`` and zero its border (``xp`` is reused memory)."""
    (pt, pb), (pl, pr) = geo.pads
    h, w = x.shape[2:]
    xp[:, :, :pt] = 0
    xp[:, :, pt + h :] = 0
    xp[:, :, pt : pt + h, :pl] = 0
    xp[:, :, pt : pt + h, pl + w :] = 0
    xp[:, :, pt : pt + h, pl : pl + w] = x
    return xp


def _im2col(xp, cols, s, e, geo, out_hw, rows=None):
    """Columns of images ``s:e`` of the padded image into ``cols[:e-s]``; ``rows``
    (a range) restricts them to those output rows."""
    m = e - s
    c = xp.shape[1]
    kh, kw = geo.kshp
    oh, ow = out_hw
    src = xp[s:e]
    if rows is not None:
        src = src[:, :, rows.start * geo.stride[0] :]
        oh = len(rows)
    cv = cols[:m, :, : oh * ow]
    if geo.native is not None and geo.native.im2col(src, cv, geo, oh, ow):
        return cv
    st = xp.strides
    view = as_strided(
        src,
        (m, c, kh, kw, oh, ow),
        (
            st[0],
            st[1],
            st[2] * geo.dil[0],
            st[3] * geo.dil[1],
            st[2] * geo.stride[0],
            st[3] * geo.stride[1],
        ),
        writeable=False,
    )
    np.copyto(cv.reshape(m, c, kh, kw, oh, ow), view)
    return cv


def _ws(buf, shape, dtype):
    """The planned workspace ``buf`` when it has ``shape`` (else a fresh array)."""
    if buf is not None and buf.shape == shape:
        return buf
    return np.empty(shape, dtype=dtype)


def _slab(n, itemsize):
    """The stride (in items) of the Winograd path's 16 slabs of ``n`` items: a whole,
    odd number of 64-byte lines, so that the transforms' 16 streams (one per slab) fall
    in different cache sets (at a stride of a multiple of 4 KiB they would share a few:
    a 2.4x slower output transform on InceptionV3's 147x147 layer)."""
    line = 64 // itemsize
    lines = -(-n // line)
    return (lines + 1 - lines % 2) * line


def _c_takes(fns, xp, wm, out, vectors):
    """Whether a Winograd path's C kernels (``fns``, by dtype) take these arrays: the
    machine's byte order, images with unit-stride rows and whole-element strides, filters
    ``(F, C*taps)`` with unit-stride rows, a C-contiguous output and the epilogue's
    ``vectors`` (None for one not given) of the same dtype."""
    dt, size = xp.dtype, xp.itemsize
    if dt not in fns:  # a byte order other than the machine's
        return False
    if xp.strides[3] != size or any(v % size for v in xp.strides) or min(xp.strides) < 0:
        return False
    if not out.flags.c_contiguous or out.dtype != dt or wm.dtype != dt:
        return False
    if any(v is not None and (v.dtype != dt or not v.flags.c_contiguous) for v in vectors):
        return False
    return wm.strides[1] == size and wm.strides[0] % size == 0


def _all_finite(k, xp, wm):
    """Whether the images ``xp`` and the filters ``wm`` ``(F, C*taps)`` hold only finite
    values. A Winograd transform adds and subtracts neighbouring values: a NaN or an
    infinity in a tile or a filter reaches outputs whose direct sum would not hold it
    (F(2x2, 3x3) too: an infinity in two of a tile's products gives inf - inf = NaN
    where the direct sum is an infinity), so those take im2col."""
    dt, size = xp.dtype, xp.itemsize
    n, c, hp, wp = xp.shape
    sc, rs = xp.strides[1] // size, xp.strides[2] // size
    finite = k.all_finite_fn[dt]
    if not finite(wm.ctypes.data, wm.strides[0] // size, 0, wm.shape[0], 1, wm.shape[1]):
        return False
    return all(finite(xp[i].ctypes.data, sc, rs, c, hp, wp) for i in range(n))


def _winograd_forward(xp, wm, ws, out, geo, out_hw, bias, relu, scale):
    """The forward convolution of the padded images ``xp`` by the filters ``wm``
    ``(F, C*9)`` as Winograd's F(4x4, 3x3) or F(2x2, 3x3)
    (:meth:`ConvGeometry.wino_tile`) into ``out``, with the epilogue; 5x5 filters
    ``(F, C*25)`` as their four 3x3 blocks (:attr:`ConvGeometry.wino_blocks`) by
    F(2x2, 3x3), one product over the blocks' 4C transformed channels. False, having
    done nothing, for arrays the C kernels do not take, or for images or filters with a
    NaN or an infinity (im2col then: :func:`_all_finite`)."""
    k = geo.native
    n, c, hp, wp = xp.shape
    f = wm.shape[0]
    dt, size = xp.dtype, xp.itemsize
    if not _c_takes(k.wino_in_fn, xp, wm, out, (bias, scale)):
        return False
    nb = geo.wino_blocks
    mt = geo.wino_tile(out_hw)  # outputs a tile gives along each side
    ns = (mt + 2) ** 2  # products: one per value of a tile
    sc, rs = xp.strides[1] // size, xp.strides[2] // size
    if not _all_finite(k, xp, wm):
        return False  # a NaN or an infinity would reach outputs whose windows miss it
    ws = _ws(ws, geo.winograd_shape(c, f, out_hw, size), dt)
    c4 = nb * c  # the channels of the product: each 3x3 block's share
    rows, tw = geo.winograd_band(c4, f, out_hw, size, mt)
    tb = rows * tw
    sv, sm = _slab(c4 * tb, size), _slab(f * tb, size)
    nu = ns * f * c4
    u = ws[:nu].reshape(ns, f, c4)
    v, m = _band_views(ws[nu:], ns, c4, f, tb, sv, sm)
    if mt == 4:
        wino_in, wino_out, filters = k.w4_fn[dt]
    else:
        wino_in, wino_out = k.wino_in_fn[dt], k.wino_out_fn[dt]
        filters = k.wino_filters_fn[dt, geo.kshp[0]]
    filters(wm.ctypes.data, wm.strides[0] // size, f, c, u.ctypes.data, f * c4)
    oh, ow = out_hw
    th = -(-oh // mt)
    # block b reads the image moved by (3p, 3q), b = 2p + q
    moves = [(3 * (b // 2), 3 * (b % 2)) for b in range(nb)]
    sp = None if scale is None else scale.ctypes.data
    bp = None if bias is None else bias.ctypes.data
    # (image, first tile row) of each band: every band writes its own rows of out
    bands = [(i, tr0) for i in range(n) for tr0 in range(0, th, rows)]

    def run(share, v, m):
        for i, tr0 in share:
            ntr = min(rows, th - tr0)
            t = ntr * tw
            oi = out[i].ctypes.data
            for b, (p, q) in enumerate(moves):
                xb = xp[i].ctypes.data + (p * rs + q) * size
                vb = v.ctypes.data + b * c * tb * size
                wino_in(xb, sc, rs, c, hp - p, wp - q, tr0, ntr, tw, vb, tb, sv)
            np.matmul(u, v[:, :, :t], out=m[:, :, :t])
            wino_out(m.ctypes.data, tb, sm, f, tr0, ntr, tw, oi, oh * ow, oh, ow, sp, bp, relu)

    def scratch():
        return _band_views(np.empty(ns * (sv + sm), dt), ns, c4, f, tb, sv, sm)

    _run_bands(bands, run, v, m, scratch, 2 * ns * f * c4 * th * tw * n)
    return True


def _band_views(buf, ns, c, f, tb, sv, sm):
    """A Winograd band's two arrays in ``buf``: the transformed tiles ``v (ns, c, tb)``,
    slabs ``sv`` elements apart, then the products ``m (ns, f, tb)``, slabs ``sm`` apart
    (an odd number of cache lines: :func:`_slab`)."""
    size = buf.itemsize
    v = as_strided(buf, (ns, c, tb), (sv * size, tb * size, size))
    m = as_strided(buf[ns * sv :], (ns, f, tb), (sm * size, tb * size, size))
    return v, m


def _run_bands(bands, run, v, m, scratch, flops):
    """``run(share, v, m)`` over the Winograd path's ``bands``: on this thread with the
    workspace's ``v`` and ``m``, or shared between as many threads as the BLAS has, each
    further one with its own ``scratch()`` (:func:`_blas_threads`)."""
    blas = _blas_threads(len(bands), flops)
    if blas is None:
        run(bands, v, m)
        return
    ctl, workers = blas
    shares = [bands[j::workers] for j in range(workers)]
    scratches = [scratch() for _ in shares[1:]]
    errors = []

    def guarded(share, v, m):
        try:
            run(share, v, m)
        except BaseException as exc:  # re-raised by the caller's thread
            errors.append(exc)

    # Each thread its bands with products on one BLAS thread: OpenBLAS splitting each
    # small product over its threads spins a thread between products on the core the
    # transforms need (two cores: 2.2x slower than one; docs/performance.md).
    try:
        limited = ctl.limit(limits=1, user_api="blas")  # applied here, undone on exit
    except Exception:  # a BLAS that refuses: its own threads, one band after the other
        run(bands, v, m)
        return
    with limited:
        threads = [
            threading.Thread(target=guarded, args=(sh, *vm), daemon=True)
            for sh, vm in zip(shares[1:], scratches)
        ]
        for th_ in threads:
            th_.start()
        guarded(shares[0], v, m)
        for th_ in threads:
            th_.join()
    if errors:
        raise errors[0]


def _winograd7_forward(xp, wm, ws, out, geo, out_hw, bias, relu, scale, axis, off=0):
    """The forward convolution of the images ``xp``, padded but for ``off`` rows (7x1
    filters, ``axis`` "rows") or columns (1x7, "cols") of zeros before them along the
    filters' axis, by the filters ``wm`` ``(F, C*7)`` as Winograd's F(3, 7) along that axis into
    ``out``, with the epilogue; False, having done nothing, for arrays the C kernels do
    not take or images or filters with a NaN or an infinity (im2col then). The filters and each
    band of tiles are transformed in C, each band multiplied by 9 OpenBLAS products and
    transformed back with the epilogue."""
    k = geo.native
    n, c, hp, wp = xp.shape
    f = wm.shape[0]
    dt, size = xp.dtype, xp.itemsize
    if not _c_takes(k.w7_fn, xp, wm, out, (bias, scale)):
        return False
    if not _all_finite(k, xp, wm):
        return False  # a NaN or an infinity: F(3, 7) would spread it to its neighbours
    sc, rs = xp.strides[1] // size, xp.strides[2] // size
    w_in, w_out = k.w7_fn[dt][axis]
    rows, outer, inner = geo.winograd7_band(axis, c, f, out_hw, size)
    ws = _ws(ws, geo.winograd7_shape(c, f, out_hw, size), dt)
    tb = rows * inner
    sv, sm = _slab(c * tb, size), _slab(f * tb, size)
    nu = 9 * f * c
    u = ws[:nu].reshape(9, f, c)
    v, m = _band_views(ws[nu:], 9, c, f, tb, sv, sm)
    k.w7_filters_fn[dt](wm.ctypes.data, wm.strides[0] // size, f, c, u.ctypes.data, f * c)
    oh, ow = out_hw
    sp = None if scale is None else scale.ctypes.data
    bp = None if bias is None else bias.ctypes.data
    # (image, first outer row) of each band: tile rows (7x1) or image rows (1x7)
    bands = [(i, r0) for i in range(n) for r0 in range(0, outer, rows)]
    last = oh if axis == "rows" else ow  # the output rows (columns) the tiles cover

    def run(share, v, m):
        for i, r0 in share:
            nr = min(rows, outer - r0)
            t = nr * inner
            xi, oi = xp[i].ctypes.data, out[i].ctypes.data
            if w_in(xi, sc, rs, c, hp, wp, r0, nr, v.ctypes.data, tb, sv, off):
                raise MemoryError("convolution: no memory for a band's columns")
            np.matmul(u, v[:, :, :t], out=m[:, :, :t])
            if w_out(m.ctypes.data, tb, sm, f, r0, nr, inner, oi, oh * ow, last, sp, bp, relu):
                raise MemoryError("convolution: no memory for a band's outputs")

    def scratch():
        return _band_views(np.empty(9 * (sv + sm), dt), 9, c, f, tb, sv, sm)

    _run_bands(bands, run, v, m, scratch, 18 * f * c * outer * inner * n)
    return True


# A Winograd convolution of at least this many multiply-adds shares its bands between
# threads (below, starting threads costs more than it saves).
WINOGRAD_THREADS_MIN_FLOPS = 1 << 24
_BLAS_CONTROL: list = []  # [ThreadpoolController or None], made on first use


def _blas_threads(n_bands, flops):
    """``(controller, threads)`` for a Winograd convolution of ``n_bands`` bands and
    ``flops`` multiply-adds to share between threads, the BLAS's own thread count of
    them; None to run it on this thread (threadpoolctl missing, a BLAS on one thread,
    one band, little work)."""
    if n_bands < 2 or flops < WINOGRAD_THREADS_MIN_FLOPS or ThreadpoolController is None:
        return None
    if not _BLAS_CONTROL:
        try:
            _BLAS_CONTROL.append(ThreadpoolController())
        except Exception:  # a library threadpoolctl cannot read: no sharing
            _BLAS_CONTROL.append(None)
    ctl = _BLAS_CONTROL[0]
    if ctl is None:
        return None
    blas = ctl.select(user_api="blas")
    infos = blas.info() if blas is not None else []
    if len(infos) != 1:  # no BLAS found, or several: leave them as they are
        return None
    n = min(int(infos[0].get("num_threads") or 1), n_bands, os.cpu_count() or 1)
    return (blas, n) if n > 1 else None


def _epilogue(o, bias, relu, scale=None, native=None):
    """The fused scale, bias and relu, in place on a block of the output ``(n, F, OH*OW)``
    (by ``native``, a :class:`ConvKernels`, when it takes the arrays)."""
    if scale is None and bias is None and not relu:
        return
    if native is not None and native.epilogue(o, bias, relu, scale):
        return
    if scale is not None:
        np.multiply(o, scale[:, None], out=o)
    if bias is not None:
        np.add(o, bias[:, None], out=o)
    if relu:
        np.maximum(o, 0, out=o)


def _grouped_matmul(wm, cols, out, g):
    """``out = wm @ cols`` per group: group ``i``'s filters (rows of ``wm``) read only
    its share of the columns' rows and write only its share of the output's rows."""
    if g == 1:
        np.matmul(wm, cols, out=out)
        return
    fg, kg = wm.shape[0] // g, cols.shape[1] // g
    for i in range(g):
        np.matmul(
            wm[i * fg : (i + 1) * fg],
            cols[:, i * kg : (i + 1) * kg],
            out=out[:, i * fg : (i + 1) * fg],
        )


def _fitting_out_hw(geo, xshape, shapes, who):
    """The output lengths of the convolution of an image of shape ``xshape``, refused
    where the filters are larger than the padded image, as perform refuses them (the
    lengths would be 0 or less: no empty result)."""
    out_hw = geo.out_hw(xshape[2:])
    if min(out_hw) <= 0:
        raise ValueError(
            f"{who}: the filters ({'x'.join(map(str, geo.kshp))}, dilation "
            f"{tuple(geo.dil)}) are larger than the padded image "
            f"({'x'.join(map(str, geo.padded(xshape)[2:]))}); shapes {shapes}"
        )
    return out_hw


def conv_forward(x, w, xp, cols, out, geo, bias=None, relu=False, scale=None, ws=None):
    """``out = conv(x, w)`` with workspaces ``xp`` (the padded image) and ``cols`` (the
    columns; unused by a plain 1x1 convolution); None (or a workspace of another shape)
    allocates them, and ``out``. ``scale`` and ``bias`` (per filter) and ``relu`` are
    applied to each chunk of images as soon as it is computed; or ``scale`` to the
    filters, into the workspace ``ws``, when they are the smaller
    (:meth:`ConvGeometry.scales_filters`).

    >>> geo = ConvGeometry(AbstractConv2d(filter_flip=False), (1, 1))
    >>> x, w = np.ones((1, 2, 2, 2)), np.ones((3, 2, 1, 1))
    >>> conv_forward(x, w, None, None, None, geo)[0, :, 0, 0]
    array([2., 2., 2.])
    >>> conv_forward(x, w, None, None, None, geo, np.zeros(3), True, np.arange(-1.0, 2))[0, :, 0, 0]
    array([0., 0., 2.])
    """
    n, c = x.shape[:2]
    f = w.shape[0]
    g = geo.groups
    check_conv_groups("convolution", x.shape, w.shape, g)
    for name, v in (("bias", bias), ("scale", scale)):
        if v is not None and v.shape != (f,):
            raise ValueError(f"convolution: {name} has shape {v.shape}, the filters {w.shape}")
    out_hw = _fitting_out_hw(geo, x.shape, (x.shape, w.shape), "convolution")
    if out is None:
        out = np.empty((n, f) + out_hw, dtype=x.dtype)
    wm = _filters(w, geo)
    if scale is not None and geo.scales_filters(x.shape, w.shape):
        wm = np.multiply(wm, scale[:, None], out=_ws(ws, wm.shape, wm.dtype))
        scale = None
    outm = out.reshape(n, f, out_hw[0] * out_hw[1])
    if geo.plain:
        _grouped_matmul(wm, _flat(x, 2), outm, g)
        _epilogue(outm, bias, relu, scale, geo.native)
        return out
    axis = geo.winograd7(out_hw, x.dtype, c)
    off = geo.winograd7_offset(axis)
    if off is not None and _winograd7_forward(
        x, wm, cols, out, geo, out_hw, bias, relu, scale, axis, off
    ):  # padded along the filters' axis only: the kernels read the image in place
        return out
    if geo.padding:
        x = _pad_into(x, _ws(xp, geo.padded(x.shape), x.dtype), geo)
    if geo.winograd(out_hw, x.dtype, c) and _winograd_forward(
        x, wm, cols, out, geo, out_hw, bias, relu, scale
    ):
        return out
    if (
        axis
        and off is None
        and _winograd7_forward(x, wm, cols, out, geo, out_hw, bias, relu, scale, axis)
    ):
        return out
    cols = _ws(cols, geo.forward_cols_shape(n, c, out_hw, x.itemsize), x.dtype)
    nb = cols.shape[0]
    oh, ow = out_hw
    step = geo.tile_rows(c, out_hw, x.itemsize)
    tiles = [None] if step >= oh else [range(r, min(oh, r + step)) for r in range(0, oh, step)]
    for s in range(0, n, nb):
        e = min(n, s + nb)
        for rows in tiles:
            cv = _im2col(x, cols, s, e, geo, out_hw, rows)
            o = outm[s:e] if rows is None else outm[s:e, :, rows.start * ow : rows.stop * ow]
            _grouped_matmul(wm, cv, o, g)
            _epilogue(o, bias, relu, scale, geo.native)
    return out


def conv_grad_weights(x, gy, xp, cols, acc, out, geo):
    """``out = dconv/dw`` for image ``x`` and output gradient ``gy``: the sum over images
    of ``gy[n] @ cols[n].T``, each product in ``acc``, a ``(F, C/groups*KH*KW)`` scratch
    (workspaces as in :func:`conv_forward`).

    >>> geo = ConvGeometry(AbstractConv2d(filter_flip=False), (1, 1))
    >>> x, gy = np.ones((2, 1, 2, 2)), np.ones((2, 3, 2, 2))
    >>> conv_grad_weights(x, gy, None, None, None, None, geo).ravel()
    array([8., 8., 8.])
    """
    n, c = x.shape[:2]
    f = gy.shape[1]
    g = geo.groups
    check_grad_weights_groups("conv_grad_weights", x.shape, gy.shape, g)
    fg, cg = f // g, c // g
    kh, kw = geo.kshp
    kg = cg * kh * kw
    # gy must be the output gradient of the convolution of x (perform refuses the rest):
    # the loops below would read a part of x silently.
    want = (n, f, *_fitting_out_hw(geo, x.shape, (x.shape, gy.shape), "conv_grad_weights"))
    if gy.shape != want:
        raise ValueError(
            f"conv_grad_weights: output gradient has shape {gy.shape}, the convolution "
            f"of an image of shape {x.shape} by {f} filters gives {want}"
        )
    if out is None:
        out = np.empty((f, cg, kh, kw), dtype=gy.dtype)
    if n == 0:  # a sum over no images (the loop below writes out at the first image)
        out[...] = 0
        return out
    acc = _ws(acc, (f, kg), gy.dtype)
    # Flipped filters: the products go into a flipped view of the output.
    dst = out[:, :, ::-1, ::-1] if geo.flip else out
    acc4 = acc.reshape(f, cg, kh, kw)
    gym = _flat(gy, 2)
    out_hw = gy.shape[2:]
    if geo.plain:
        nb = n
    else:
        if geo.padding:
            x = _pad_into(x, _ws(xp, geo.padded(x.shape), x.dtype), geo)
        cols = _ws(cols, geo.cols_shape(n, c, out_hw, x.itemsize), x.dtype)
        nb = cols.shape[0]
    for s in range(0, n, nb):
        e = min(n, s + nb)
        cv = _flat(x, 2)[s:e] if geo.plain else _im2col(x, cols, s, e, geo, out_hw)
        for j in range(e - s):
            for i in range(g):
                np.matmul(
                    gym[s + j, i * fg : (i + 1) * fg],
                    cv[j, i * kg : (i + 1) * kg].T,
                    out=acc[i * fg : (i + 1) * fg],
                )
            if s + j == 0:
                np.copyto(dst, acc4)
            else:
                np.add(dst, acc4, out=dst)
    return out


def conv_grad_inputs(w, gy, cols, out, imshp, geo):
    """``out = dconv/dx`` of an image of spatial shape ``imshp``: ``W.T @ gy`` into the
    columns, then each filter tap's slice added into the image (clipped to it).

    >>> geo = ConvGeometry(AbstractConv2d(border_mode="half"), (3, 3))
    >>> conv_grad_inputs(np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3)), None, None, (3, 3), geo)
    array([[[[4., 6., 4.],
             [6., 9., 6.],
             [4., 6., 4.]]]])
    """
    n, f = gy.shape[:2]
    cg = w.shape[1]
    g = geo.groups
    check_grad_inputs_groups("conv_grad_inputs", w.shape, gy.shape, g)
    fg = f // g
    c = cg * g
    kh, kw = geo.kshp
    h, wd = int(imshp[0]), int(imshp[1])
    # An image shape whose convolution does not give gy's shape is an error (the op's
    # perform says so too); the loops below would fill some image silently.
    shapes = (w.shape, gy.shape, (h, wd))
    out_hw = _fitting_out_hw(geo, (n, c, h, wd), shapes, "conv_grad_inputs")
    if tuple(gy.shape[2:]) != out_hw:
        raise ValueError(
            f"conv_grad_inputs: output gradient has spatial shape {tuple(gy.shape[2:])}, "
            f"the convolution of a {(h, wd)} image gives {out_hw}"
        )
    if out is None:
        out = np.empty((n, c, h, wd), dtype=gy.dtype)
    wt = _filters(w, geo)
    gym = _flat(gy, 2)
    if geo.plain:
        outm = _flat(out, 2)
        for i in range(g):
            np.matmul(
                wt[i * fg : (i + 1) * fg].T,
                gym[:, i * fg : (i + 1) * fg],
                out=outm[:, i * cg : (i + 1) * cg],
            )
        return out
    out[...] = 0
    oh, ow = gy.shape[2:]
    (pt, _), (pl, _) = geo.pads
    (sh, sw), (dh, dw) = geo.stride, geo.dil
    taps = []
    for a in range(kh):
        r0, r1, i0, i1 = _tap_range(a * dh - pt, sh, oh, h)
        for b in range(kw):
            c0, c1, j0, j1 = _tap_range(b * dw - pl, sw, ow, wd)
            if r1 > r0 and c1 > c0:
                taps.append((a, b, slice(r0, r1, sh), slice(c0, c1, sw), i0, i1, j0, j1))
    cols = _ws(cols, geo.cols_shape(n, c, (oh, ow), gy.itemsize), gy.dtype)
    nb, k = cols.shape[:2]
    kg = k // g
    for s in range(0, n, nb):
        e = min(n, s + nb)
        m = e - s
        cv = cols[:m]
        for i in range(g):
            np.matmul(
                wt[i * fg : (i + 1) * fg].T,
                gym[s:e, i * fg : (i + 1) * fg],
                out=cv[:, i * kg : (i + 1) * kg],
            )
        c6 = cv.reshape(m, c, kh, kw, oh, ow)
        dst = out[s:e]
        for a, b, rs, cs, i0, i1, j0, j1 in taps:
            d = dst[:, :, rs, cs]
            np.add(d, c6[:, :, a, b, i0:i1, j0:j1], out=d)
    return out


def _tap_range(offset, stride, n_out, n_in):
    """For a tap at ``offset`` (in image coordinates, padding subtracted): the image
    rows ``r0:r1`` (step ``stride``) it touches inside the image, and the output rows
    ``i0:i1`` they come from."""
    i0 = max(0, (-offset + stride - 1) // stride)
    i1 = min(n_out, (n_in - 1 - offset) // stride + 1)
    if i1 <= i0:
        return 0, 0, 0, 0
    return offset + i0 * stride, offset + (i1 - 1) * stride + 1, i0, i1


# -- emitters --------------------------------------------------------------------------


class ConvPlan:
    """A convolution node's parameters and its :class:`ConvGeometry` per filter size
    (the filters' spatial shape may be known only when the function is called).

    >>> ConvPlan(AbstractConv2d(border_mode="half")).geo((5, 3)).pads
    ((2, 2), (1, 1))
    """

    def __init__(self, op, native=None):
        self.op = op
        self.native = native
        self._geo = {}

    def geo(self, kshp):
        key = (int(kshp[0]), int(kshp[1]))
        g = self._geo.get(key)
        if g is None:
            g = self._geo[key] = ConvGeometry(self.op, key, self.native)
        return g


_NONE = (0,)  # the shape of a workspace a convolution of this size does not use


def _workspace_step(ctx, node, dtype, label, inputs, shape_fn, with_outputs=False):
    """A step that provides a scratch array (its target, else a fresh one) of
    ``shape_fn(input shapes[, output shapes])``: the memory planner places it like any
    value. Made fresh, it is sized from the arrays (``with_outputs``: made by the
    function itself, which finds it of the wrong shape)."""
    t = ctx.temp(dtype, label)
    empty = ctx.glob(np.empty, "empty")
    dn = ctx.glob(np.dtype(dtype), "D")
    if with_outputs:

        def fresh(*arrays):
            return _NONE
    else:

        def fresh(*arrays):
            return shape_fn([a.shape for a in arrays])

    sfn = ctx.glob(fresh, f"{label}_shape")

    def emit(ins, outs, target):
        if target is not None:
            return [f"{outs[0]} = {target}"]
        return [f"{outs[0]} = {empty}({sfn}({', '.join(ins)}), {dn})"]

    step = Step(
        node,
        (t,),
        inputs,
        emit,
        dtypes=(dtype,),
        temp_shape=shape_fn,
        temp_shape_outputs=with_outputs,
    )
    return t, step


def _same_float(node):
    ds = {v.type.dtype for v in node.inputs if v.type.ndim == 4} | {node.outputs[0].type.dtype}
    return len(ds) == 1 and ds.pop() in _FLOATS


def _conv_workspaces(ctx, node, cp, dtype, inputs, kern_shape, with_outputs=False, tiled=False):
    """The padded image's and the columns' workspace steps of a convolution of
    ``inputs[0]``; ``kern_shape(shapes of inputs[, of the outputs])`` gives the filters'
    spatial shape; ``tiled``: the forward convolution's columns (in tiles of rows)."""
    itemsize = np.dtype(dtype).itemsize

    def pad_shape(*s):
        geo = cp.geo(kern_shape(*s))
        if not geo.padding or geo.plain:
            return _NONE
        xs = s[0][0]
        axis = geo.winograd7(geo.out_hw(xs[2:]), dtype, xs[1]) if tiled else None
        if geo.winograd7_offset(axis) is not None:
            return _NONE  # read in place by F(3, 7), padded along the filters' axis only
        return geo.padded(s[0][0])

    def cols_shape(*s):
        geo = cp.geo(kern_shape(*s))
        if geo.plain:
            return _NONE
        xs = s[0][0]
        out_hw = geo.out_hw(xs[2:])
        if tiled and geo.winograd(out_hw, dtype, xs[1]):
            return geo.winograd_shape(xs[1], s[0][1][0], out_hw, itemsize)
        if tiled and geo.winograd7(out_hw, dtype, xs[1]):
            return geo.winograd7_shape(xs[1], s[0][1][0], out_hw, itemsize)
        shape_of = geo.forward_cols_shape if tiled else geo.cols_shape
        return shape_of(xs[0], xs[1], out_hw, itemsize)

    xp, st1 = _workspace_step(ctx, node, dtype, "conv_pad", inputs, pad_shape, with_outputs)
    cols, st2 = _workspace_step(ctx, node, dtype, "conv_cols", inputs, cols_shape, with_outputs)
    return [xp, cols], [st1, st2]


def _conv_steps(node, ctx):
    x, w = node.inputs[:2]
    fused = isinstance(node.op, Conv2dBiasAct)
    if node.op.unshared or not _same_float(node) or ctx.is_const(x):
        return None
    dtype = node.outputs[0].type.dtype
    cp = ConvPlan(node.op, conv_kernels())
    ins = list(node.inputs)
    scaled = len(ins) == 4
    relu = fused and node.op.activation == "relu"
    temps, steps = _conv_workspaces(ctx, node, cp, dtype, (x, w), lambda s: s[1][2:], tiled=True)
    if scaled:

        def filters_shape(s):
            xs, wsh = s
            if cp.geo(wsh[2:]).scales_filters(xs, wsh):
                return (wsh[0], int(np.prod(wsh[1:])))
            return _NONE

        wsc, st = _workspace_step(ctx, node, dtype, "conv_scaled", (x, w), filters_shape)
        temps.append(wsc)
        steps.append(st)
    fn = ctx.glob(conv_forward, "conv_forward")
    cn = ctx.glob(cp, "conv_plan")
    n_args = len(ins)

    def emit(names, outs, target):
        x_, w_ = names[:2]
        xp, cols = names[n_args : n_args + 2]
        t = target if target is not None else "None"
        tail = f", {names[2]}, {relu}" if fused else ""
        if scaled:
            tail += f", {names[3]}, {names[n_args + 2]}"
        geo = f"{cn}.geo({w_}.shape[2:])"
        return [f"{outs[0]} = {fn}({x_}, {w_}, {xp}, {cols}, {t}, {geo}{tail})"]

    steps.append(Step(node, node.outputs, ins + temps, emit))
    return steps


def _grad_weights_steps(node, ctx):
    x, gy, shape = node.inputs
    if node.op.unshared or not _same_float(node) or ctx.is_const(x) or ctx.is_const(gy):
        return None
    dtype = node.outputs[0].type.dtype
    cp = ConvPlan(node.op, conv_kernels())
    # The filters' size is the value of ``shape``, which the node's output shape holds.
    temps, steps = _conv_workspaces(
        ctx, node, cp, dtype, (x,), lambda s, o: o[0][2:], with_outputs=True
    )

    def acc_shape(s, o):
        f, cg, kh, kw = o[0]
        return (f, cg * kh * kw)

    acc, st = _workspace_step(ctx, node, dtype, "conv_acc", (x, gy), acc_shape, True)
    steps.append(st)
    fn = ctx.glob(conv_grad_weights, "conv_grad_weights")
    cn = ctx.glob(cp, "conv_plan")

    def emit(names, outs, target):
        x_, gy_, shape_, xp, cols, acc_ = names
        t = target if target is not None else "None"
        geo = f"{cn}.geo({shape_})"
        return [f"{outs[0]} = {fn}({x_}, {gy_}, {xp}, {cols}, {acc_}, {t}, {geo})"]

    steps.append(Step(node, node.outputs, [x, gy, shape] + temps + [acc], emit))
    return steps


def _grad_inputs_steps(node, ctx):
    w, gy, shape = node.inputs
    if node.op.unshared or not _same_float(node) or ctx.is_const(gy):
        return None
    dtype = node.outputs[0].type.dtype
    itemsize = np.dtype(dtype).itemsize
    cp = ConvPlan(node.op)

    def cols_shape(s):
        geo = cp.geo(s[0][2:])
        if geo.plain:
            return _NONE
        return geo.cols_shape(s[1][0], s[0][1] * geo.groups, s[1][2:], itemsize)

    cols, st = _workspace_step(ctx, node, dtype, "conv_cols", (w, gy), cols_shape)
    fn = ctx.glob(conv_grad_inputs, "conv_grad_inputs")
    cn = ctx.glob(cp, "conv_plan")

    def emit(names, outs, target):
        w_, gy_, shape_, cols_ = names
        t = target if target is not None else "None"
        geo = f"{cn}.geo({w_}.shape[2:])"
        return [f"{outs[0]} = {fn}({w_}, {gy_}, {cols_}, {t}, {shape_}, {geo})"]

    return [st, Step(node, node.outputs, [w, gy, shape, cols], emit)]


# The C pooling loop keeps one output row on the C stack: wider outputs take numpy's.
POOL_C_MAX_WIDTH = 1 << 14


class _PoolPlan:
    """One pooling node's geometry and its averaging counts, cached per image shape;
    ``native`` (a :class:`ConvKernels`) pools in C, else numpy folds strided slices."""

    def __init__(self, op, native=None):
        self.op = op
        self.native = native
        self.counts = {}
        self._c_div = {}

    def in_c(self, xshape):
        """Whether the C loop pools an image of this shape (it needs no workspace)."""
        (oh, ow), _ext = self.op._geometry(xshape)
        return self.native is not None and self.op.ndim == 2 and ow <= POOL_C_MAX_WIDTH

    def workspace(self, shape, xshape):
        """A numpy-path workspace's planned shape: none when the C loop pools."""
        return _NONE if self.in_c(xshape) else shape

    def pool_c(self, x, out, out_hw, ext):
        """``out`` = the pool of ``x`` by the C loop; False, having done nothing, for
        arrays it does not take (another dtype, not contiguous)."""
        fn = self.native.pool_fn.get(x.dtype)
        if fn is None or out.dtype != x.dtype:
            return False
        if not (x.flags.c_contiguous and out.flags.c_contiguous):
            return False
        op = self.op
        div = None
        if op.mode in ("average_inc_pad", "average_exc_pad"):
            # in the image's dtype: a count is exact in it, and the C loop's quotient is
            # then the one numpy's division (in float64, rounded back) gives
            key = (tuple(x.shape[-2:]), x.dtype)
            div = self._c_div.get(key)
            if div is None:
                d = self.divisor(x.shape, out_hw, ext)
                div = self._c_div[key] = np.ascontiguousarray(
                    np.broadcast_to(d, tuple(out_hw)), dtype=x.dtype
                )
        h, w = x.shape[-2:]
        planes = math.prod(x.shape[:-2])
        (kh, kw), (sh, sw), (pt, pl) = op.ws, op.stride, op.pad
        dp = None if div is None else div.ctypes.data
        mx = op.mode == "max"
        if fn(
            x.ctypes.data, planes, h, w, out.ctypes.data, *out_hw, kh, kw, sh, sw, pt, pl, mx, dp
        ):
            raise MemoryError(f"pooling: no memory for a {h}x{out_hw[1]} workspace")
        return True

    def padded_shape(self, xshape):
        _out, ext = self.op._geometry(xshape)
        return tuple(xshape[:-2]) + tuple(ext)

    def needs_padding(self, xshape):
        return self.padded_shape(xshape) != tuple(xshape)

    def separable(self, xshape):
        """Whether the windows are folded a row pass then a column pass (``kh + kw``
        slices, not ``kh * kw``), and the rows' workspace shape it needs (else
        ``(0,)``): every pool with windows of more than 2x2 that is not global."""
        op = self.op
        (oh, ow), _ext = op._geometry(xshape)
        kh, kw = op.ws
        if kh * kw <= kh + kw or kh * kw > oh * ow or min(oh, ow) == 0:
            return _NONE
        return tuple(xshape[:-2]) + ((oh - 1) * op.stride[0] + kh, ow)

    def divisor(self, xshape, out, ext):
        key = tuple(xshape[-2:])
        d = self.counts.get(key)
        if d is None:
            d = self.counts[key] = self.op._counts(xshape, out, ext)
        return d


def pool_forward(x, xp, out, pp, rows=None):
    """2-D pooling of ``x``'s last two axes into ``out`` (None allocates it): one strided
    slice per window offset folded with ``maximum``/``add``; ``xp`` is the padded copy's
    workspace (None when the windows fit the image). Windows of more than 2x2 are
    folded along the rows into the workspace ``rows`` first, then along the columns
    (:meth:`_PoolPlan.separable`): a 3x3 window costs 6 slices, not 9.

    >>> pp = _PoolPlan(Pool((2, 2)))
    >>> pool_forward(np.arange(16.0).reshape(1, 4, 4), None, None, pp)
    array([[[ 5.,  7.],
            [13., 15.]]])
    >>> pool_forward(np.arange(16.0).reshape(1, 4, 4), None, None, _PoolPlan(Pool((3, 3))))
    array([[[10.]]])
    """
    op = pp.op
    out_hw, ext = op._geometry(x.shape)
    if out is None:
        out = np.empty(x.shape[:-2] + tuple(out_hw), dtype=x.dtype)
    if min(out_hw) == 0:
        return out
    if pp.in_c(x.shape) and pp.pool_c(x, out, out_hw, ext):
        return out
    if xp is not None:
        xp = _ws(xp, pp.padded_shape(x.shape), x.dtype)
        fill = op._fill(x.dtype)
        xp[...] = fill
        xp[op._inner(x.shape)] = x
        y = xp
    else:
        y = x
    fold = np.maximum if op.mode == "max" else np.add
    rows_shape = pp.separable(x.shape)
    if rows_shape != _NONE:
        rows = _ws(rows, rows_shape, x.dtype)
        (kh, kw), (sh, sw) = op.ws, op.stride
        (oh, ow) = out_hw
        # rows[..., i, j] = fold of y[..., i, j*sw + b] over b; out folds rows[a + i*sh]
        cols = [y[..., : rows_shape[-2], b : b + sw * (ow - 1) + 1 : sw] for b in range(kw)]
        fold(cols[0], cols[1], out=rows)
        for c in cols[2:]:
            fold(rows, c, out=rows)
        lines = [rows[..., a : a + sh * (oh - 1) + 1 : sh, :] for a in range(kh)]
        fold(lines[0], lines[1], out=out)
        for ln in lines[2:]:
            fold(out, ln, out=out)
        first = None
    elif op.ws[0] * op.ws[1] > out_hw[0] * out_hw[1]:
        # More window offsets than windows (a global pool): one reduction over the
        # windows' view costs less than a call per offset.
        win = op._windows(y, out_hw)
        fold.reduce(win, axis=(-2, -1), out=out)
        first = None
    else:
        first = True
    for sl in op._offsets(out_hw) if first else ():
        if first:
            np.copyto(out, y[sl])
            first = False
        else:
            fold(out, y[sl], out=out)
    if op.mode in ("average_inc_pad", "average_exc_pad"):
        np.divide(out, pp.divisor(x.shape, out_hw, ext), out=out, casting="unsafe")
    return out


def _pool_steps(node, ctx):
    op = node.op
    (x,) = node.inputs
    dtype = node.outputs[0].type.dtype
    if op.ndim != 2 or x.type.dtype != dtype or dtype not in _FLOATS or ctx.is_const(x):
        return None
    pp = _PoolPlan(op, conv_kernels())
    steps, ins = [], [x]
    kh, kw = op.ws
    if kh * kw > kh + kw:  # may be separable (the image's shape decides)
        rows, st = _workspace_step(
            ctx, node, dtype, "pool_rows", (x,), lambda s: pp.workspace(pp.separable(s[0]), s[0])
        )
        steps.append(st)
    padded = any(op.pad) or not op.ignore_border
    if padded:
        # Padding, or partial windows at the border: a padded copy in a workspace (whose
        # shape equals the image's when the windows happen to fit: the copy is then cheap).
        xp, st = _workspace_step(
            ctx, node, dtype, "pool_pad", (x,), lambda s: pp.workspace(pp.padded_shape(s[0]), s[0])
        )
        steps.append(st)
        ins.append(xp)
    fn = ctx.glob(pool_forward, "pool_forward")
    pn = ctx.glob(pp, "pool_geo")

    def emit(names, outs, target):
        a_xp = names[1] if padded else "None"
        t = target if target is not None else "None"
        a_rows = names[-1] if kh * kw > kh + kw else "None"
        return [f"{outs[0]} = {fn}({names[0]}, {a_xp}, {t}, {pn}, {a_rows})"]

    if kh * kw > kh + kw:
        ins.append(rows)
    steps.append(Step(node, node.outputs, ins, emit))
    return steps


register_impl(Pool)(_pool_steps)
register_impl(AbstractConv2d, Conv2dBiasAct)(_conv_steps)
register_impl(AbstractConv2d_gradWeights)(_grad_weights_steps)
register_impl(AbstractConv2d_gradInputs)(_grad_inputs_steps)
