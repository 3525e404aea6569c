"""Small data sets shipped inside the package, so examples and tests need no download."""

from __future__ import annotations

import os

import numpy as np

_HERE = os.path.dirname(__file__)


def load_digits(dtype="float64", seed=0, test_fraction=0.25):
    """Return ``(x_train, y_train, x_test, y_test)`` for the 8x8 handwritten digits.

    The 1,797 images are the test part of the UCI "Optical Recognition of Handwritten
    Digits" (Alpaydin and Kaynak, 1998; CC BY 4.0, see ``DIGITS.md`` beside this module),
    as scikit-learn bundles them (pixel values 0..16, scaled here to [0, 1]), split once
    with a fixed shuffle.

    >>> x_train, y_train, x_test, y_test = load_digits()
    >>> x_train.shape, x_test.shape, int(y_train.max())
    ((1348, 64), (449, 64), 9)
    """
    with np.load(os.path.join(_HERE, "digits.npz")) as f:
        x = f["images"].astype(dtype) / 16.0
        y = f["target"].astype("int64")
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_test = int(round(len(x) * test_fraction))
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test]
