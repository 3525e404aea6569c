"""Patches of images as rows of a matrix (Theano's ``theano.tensor.nnet.neighbours``).

``images2neibs(ten4, neib_shape, neib_step, mode)`` cuts each ``(rows, cols)`` image of a
4-D tensor ``(batch, channels, rows, cols)`` into ``neib_shape`` patches taken every
``neib_step`` (default: ``neib_shape``, patches side by side) and returns them as the rows
of a matrix: one row per patch, in the order batch, channel, patch row, patch column, each
row the patch read row by row. ``mode`` says what happens at the borders:

- ``'valid'``: the patches must cover the image exactly, else ``ValueError``;
- ``'ignore_borders'``: the rows and columns no whole patch reaches are dropped;
- ``'wrap_centered'``: a patch is centred on each step's pixel, the image wrapping
  around (odd patch shapes only);
- ``'half'``, ``'full'``: ``'valid'`` on the image padded with zeros by
  ``neib_shape // 2``, or by ``neib_shape - 1``, on each side.

``neibs2images(neibs, neib_shape, original_shape, mode)`` is the inverse for patches side
by side: it puts the rows back in place (the borders ``'ignore_borders'`` dropped are
zeros). The gradient of ``images2neibs`` is the sum, over the patches, of their gradients
put back in place: every mode has one, overlapping patches too.

>>> import numpy as np
>>> from theano_dag import tensor as tt
>>> img = tt.tensor4("img")
>>> neibs = images2neibs(img, (2, 2))
>>> value = np.arange(16.0).reshape(1, 1, 4, 4)
>>> neibs.eval({img: value})
array([[ 0.,  1.,  4.,  5.],
       [ 2.,  3.,  6.,  7.],
       [ 8.,  9., 12., 13.],
       [10., 11., 14., 15.]])
>>> bool((neibs2images(neibs, (2, 2), img.shape).eval({img: value}) == value).all())
True
"""

from __future__ import annotations

import numpy as np

from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import grad_undefined
from theano_dag.graph.op import Op
from theano_dag.tensor import math as tm
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.variable import as_tensor_variable

__all__ = ["Images2Neibs", "NeibsShapeError", "Neibs2ImagesSum", "images2neibs", "neibs2images"]

MODES = ("valid", "ignore_borders", "wrap_centered", "half", "full")


class NeibsShapeError(ValueError, TypeError):
    """Patches that do not fit the image as the mode requires (Theano raised TypeError)."""


def _grid(size, patch, step, mode):
    """The number of patches along one axis of length ``size``: Theano's rule per mode,
    with the length checks of ``'valid'``, ``'half'`` and ``'full'``."""
    # 'half' and 'full' are 'valid' on the image padded by patch // 2 or patch - 1 per side
    reach = {"half": size - patch % 2, "full": size + patch - 2}.get(mode, size - patch)
    if mode == "wrap_centered":
        if patch % 2 != 1:
            raise NeibsShapeError(
                f"images2neibs(mode='wrap_centered'): patch shape {patch} is even"
            )
        if size < patch:
            raise NeibsShapeError(
                f"images2neibs(mode='wrap_centered'): image side {size} smaller than patch {patch}"
            )
        return -(-size // step)
    if mode != "ignore_borders" and (size < patch or reach % step != 0):
        raise NeibsShapeError(
            f"images2neibs(mode={mode!r}): patches of {patch} every {step} do not cover an "
            f"image side of {size} exactly"
        )
    return max(1 + reach // step, 0)  # 'ignore_borders': none along a side shorter than a patch


def _positions(size, patch, step, mode):
    """``(grid, patch)`` image indices that each patch reads along one axis, and a mask of
    those inside the image (outside: padding zeros)."""
    grid = _grid(size, patch, step, mode)
    shift = {"wrap_centered": patch // 2, "half": patch // 2, "full": patch - 1}.get(mode, 0)
    idx = np.arange(grid)[:, None] * step + np.arange(patch)[None, :] - shift
    if mode == "wrap_centered":
        return idx % size, np.ones(idx.shape, dtype=bool)
    inside = (idx >= 0) & (idx < size)
    return np.where(inside, idx, 0), inside


def _index(shape, neib_shape, neib_step, mode):
    (c, d), (sx, sy) = (int(v) for v in neib_shape), (int(v) for v in neib_step)
    if min(c, d) <= 0 or min(sx, sy) <= 0:
        raise ValueError(
            f"images2neibs: neib_shape {tuple(neib_shape)} and neib_step {tuple(neib_step)} "
            "must be positive"
        )
    rows, row_in = _positions(shape[2], c, sx, mode)
    cols, col_in = _positions(shape[3], d, sy, mode)
    # (grid_rows, grid_cols, c, d) indices into an image, and the mask of real pixels
    r = rows[:, None, :, None]
    k = cols[None, :, None, :]
    mask = row_in[:, None, :, None] & col_in[None, :, None, :]
    return np.broadcast_to(r, mask.shape), np.broadcast_to(k, mask.shape), mask


def _as_pair(v, what):
    v = as_tensor_variable(v)
    if v.ndim != 1 or v.dtype not in ("int8", "int16", "int32", "int64"):
        raise TypeError(f"images2neibs: {what} must be a vector of 2 integers, got {v.type}")
    return v


class Images2Neibs(Op):
    """``images2neibs``'s op: inputs ``(ten4, neib_shape, neib_step)``, the output the
    ``(patches, patch size)`` matrix (see the module docstring)."""

    __props__ = ("mode",)

    def __init__(self, mode="valid"):
        if mode not in MODES:
            raise NotImplementedError(f"images2neibs: mode {mode!r} is not one of {MODES}")
        self.mode = mode

    def make_node(self, ten4, neib_shape, neib_step=None):
        ten4 = as_tensor_variable(ten4)
        if ten4.ndim != 4:
            raise TypeError(f"images2neibs: ten4 must be 4-D, got {ten4.type}")
        neib_shape = _as_pair(neib_shape, "neib_shape")
        neib_step = neib_shape if neib_step is None else _as_pair(neib_step, "neib_step")
        out = TensorType(ten4.dtype, shape=(None, None))()
        return Apply(self, [ten4, neib_shape, neib_step], [out])

    def perform(self, node, inputs, output_storage, params=None):
        ten4, neib_shape, neib_step = inputs
        r, k, mask = _index(ten4.shape, neib_shape, neib_step, self.mode)
        patches = ten4[:, :, r, k] * mask if not mask.all() else ten4[:, :, r, k]
        # (batch, channels, grid_rows, grid_cols, c, d) -> one patch per row
        n = int(np.prod(patches.shape[:4]))
        size = patches.shape[4] * patches.shape[5]  # not -1: an empty batch has n = 0
        output_storage[0][0] = np.ascontiguousarray(patches.reshape(n, size), dtype=ten4.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        (b, s, h, w), _, _ = input_shapes
        neib_shape, neib_step = node.inputs[1], node.inputs[2]
        c, d = neib_shape[0], neib_shape[1]
        sx, sy = neib_step[0], neib_step[1]
        if self.mode == "wrap_centered":
            gr, gc = -((-h) // sx), -((-w) // sy)
        elif self.mode == "half":
            gr, gc = 1 + (h - c % 2) // sx, 1 + (w - d % 2) // sy
        elif self.mode == "full":
            gr, gc = 1 + (h + c - 2) // sx, 1 + (w + d - 2) // sy
        else:
            # 'ignore_borders' takes no patch along a side shorter than the patch ('valid'
            # raises there): no row, not a negative count.
            gr = tm.maximum(1 + (h - c) // sx, 0)
            gc = tm.maximum(1 + (w - d) // sy, 0)
        return [(b * s * gr * gc, c * d)]

    def grad(self, inputs, output_grads):
        ten4, neib_shape, neib_step = inputs
        (gz,) = output_grads
        return [
            Neibs2ImagesSum(self.mode)(gz, ten4.shape, neib_shape, neib_step),
            grad_undefined(self, 1, neib_shape, "the patch shape is discrete"),
            grad_undefined(self, 2, neib_step, "the step is discrete"),
        ]


class Neibs2ImagesSum(Op):
    """The transpose of ``Images2Neibs``: inputs ``(neibs, image_shape, neib_shape,
    neib_step)``; each row of ``neibs`` is added back where its patch came from, into zeros
    of ``image_shape`` (padding and wrapped-around positions as ``Images2Neibs`` read them).
    ``images2neibs``'s gradient, and ``neibs2images`` for patches side by side."""

    __props__ = ("mode",)

    def __init__(self, mode="valid"):
        if mode not in MODES:
            raise NotImplementedError(f"neibs2images: mode {mode!r} is not one of {MODES}")
        self.mode = mode

    def make_node(self, neibs, image_shape, neib_shape, neib_step):
        neibs = as_tensor_variable(neibs)
        if neibs.ndim != 2:
            raise TypeError(f"neibs2images: neibs must be a matrix, got {neibs.type}")
        image_shape = as_tensor_variable(image_shape)
        if image_shape.ndim != 1:
            raise TypeError(f"neibs2images: the image shape must be a vector, got {image_shape}")
        out = TensorType(neibs.dtype, shape=(None,) * 4)()
        return Apply(
            self,
            [
                neibs,
                image_shape,
                _as_pair(neib_shape, "neib_shape"),
                _as_pair(neib_step, "neib_step"),
            ],
            [out],
        )

    def perform(self, node, inputs, output_storage, params=None):
        neibs, image_shape, neib_shape, neib_step = inputs
        shape = tuple(int(v) for v in image_shape)
        if len(shape) != 4:
            raise ValueError(f"neibs2images: the image shape {shape} is not 4-D")
        r, k, mask = _index(shape, neib_shape, neib_step, self.mode)
        expected = (shape[0] * shape[1] * r.shape[0] * r.shape[1], r.shape[2] * r.shape[3])
        if neibs.shape != expected:
            raise ValueError(
                f"neibs2images: {neibs.shape[0]} patches of {neibs.shape[1]} values do not fit "
                f"an image of shape {shape} (mode {self.mode!r} gives {expected})"
            )
        out = np.zeros(shape, dtype=neibs.dtype)
        patches = neibs.reshape(shape[:2] + r.shape)
        # np.add.at: a pixel that several patches read (overlapping patches) sums them
        np.add.at(out, (slice(None), slice(None), r[mask], k[mask]), patches[..., mask])
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        image_shape = node.inputs[1]
        return [tuple(image_shape[i] for i in range(4))]

    def grad(self, inputs, output_grads):
        neibs, image_shape, neib_shape, neib_step = inputs
        (gz,) = output_grads
        return [
            Images2Neibs(self.mode)(gz, neib_shape, neib_step),
            grad_undefined(self, 1, image_shape, "the image shape is discrete"),
            grad_undefined(self, 2, neib_shape, "the patch shape is discrete"),
            grad_undefined(self, 3, neib_step, "the step is discrete"),
        ]


def images2neibs(ten4, neib_shape, neib_step=None, mode="valid"):
    """The ``neib_shape`` patches of the images of ``ten4``, taken every ``neib_step``
    (default: side by side), as the rows of a matrix; ``mode`` as in the module docstring.

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> img = tt.dtensor4("img")
    >>> images2neibs(img, (1, 2)).eval({img: np.arange(4.0).reshape(1, 1, 2, 2)})
    array([[0., 1.],
           [2., 3.]])
    """
    return Images2Neibs(mode)(ten4, neib_shape, neib_step)


def neibs2images(neibs, neib_shape, original_shape, mode="valid"):
    """The images that ``images2neibs(images, neib_shape, mode=mode)`` cut into ``neibs``
    (patches side by side), of shape ``original_shape``; ``'valid'`` and
    ``'ignore_borders'`` (whose dropped borders come back as zeros).

    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> neibs = tt.dmatrix("neibs")
    >>> neibs2images(neibs, (1, 2), (1, 1, 2, 2)).eval({neibs: np.array([[0.0, 1.0], [2.0, 3.0]])})
    array([[[[0., 1.],
             [2., 3.]]]])
    """
    if mode not in ("valid", "ignore_borders"):
        raise NotImplementedError(
            f"neibs2images: mode {mode!r}; only 'valid' and 'ignore_borders' are inverted"
        )
    neib_shape = _as_pair(neib_shape, "neib_shape")
    return Neibs2ImagesSum(mode)(neibs, original_shape, neib_shape, neib_shape)
