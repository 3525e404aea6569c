"""The op table's rows at lengths their values were not drawn for: one axis of one input
(or the same axis of every input) cut to length 0, made one longer than the others
expect, or of length 1 where its type does not declare it broadcastable. The rewritten
graph on each engine must do what the reference engine does with the written graph: the
same values, or an error of the same kind.

These lengths found values made of memory nobody wrote (a filter gradient over a batch
of no images, a grouped convolution of filters that do not divide by the groups, an
inverse permutation by indices that repeat), a rewrite that raised for a batch of no
rows (the fused cross-entropy's zero bias read row 0), three places where dask.array
differs from numpy (a join leaving out an empty part whatever its other lengths, a
slice counting a start before the first entry from the end, a reshape of no values
failing) and lengths of 1 broadcast where the type says they may not be (the Dask
engine's BLAS ops, OpenCL's fused reductions). The rewritten graph of each output's
shape (the ops' ``infer_shape``) must give the value's shape at those lengths too. A
sample of the rows runs here (every ``STRIDE``-th, and those); all of them:
``THEANO_DAG_LENGTH_SWEEP=all``.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from op_table import TABLE, row_inputs

from theano_dag.compile.function import function
from theano_dag.compile.mode import Mode
from theano_dag.engines.cpu.linker import CPULinker
from theano_dag.engines.dask import DaskLinker
from theano_dag.engines.opencl.context import opencl_available

SEED = 4321
STRIDE = 3
FOUND = {
    "conv2d[4]",
    "conv2d_grad_wrt_weights",
    "permute_row_elements[1]",
    "categorical_crossentropy_1hot",
    "join",
    "stack",
    "subtensor_sym_neg_step",
    "allclose",
    "categorical_crossentropy_dist",
    "gemm",
    "gemv",
    "ger",
    "adagrad[0]",
    "kron",
    "images2neibs[ignore_borders,(2, 3),(2, 1)]",
}
ROWS = [
    row
    for k, row in enumerate(TABLE)
    if os.environ.get("THEANO_DAG_LENGTH_SWEEP") == "all" or k % STRIDE == 0 or row.name in FOUND
]
REF = Mode(linker="py", optimizer=None)
ENGINES = {
    "py": lambda: Mode(linker="py", optimizer="fast_run"),
    "cpu": lambda: Mode(linker=CPULinker(min_plan_bytes=0, poison=True), optimizer="fast_run"),
    "dask": lambda: Mode(linker=DaskLinker(chunks=2, scheduler="sync"), optimizer="fast_run"),
    "opencl": lambda: Mode(linker="opencl", optimizer="fast_run"),
}
OCL_OK, OCL_WHY = opencl_available()


def _variants(values):
    """The inputs with one axis of one of them, or that axis of all, cut or lengthened."""

    def cut(v, ax):
        return np.take(v, [], axis=ax)

    def longer(v, ax):
        return np.concatenate([v, np.take(v, [0], axis=ax)], axis=ax)

    def one(v, ax):
        return np.take(v, [0], axis=ax)

    out = []
    for change in (cut, longer, one):
        for k, v in enumerate(values):
            for ax in range(v.ndim):
                if v.shape[ax] > 1:  # (a length 1 is broadcastable in the input's type)
                    out.append([change(w, ax) if j == k else w for j, w in enumerate(values)])
        for ax in range(max((v.ndim for v in values), default=0)):
            fits = [v.ndim > ax and v.shape[ax] > 1 for v in values]
            if sum(fits) > 1:
                out.append([change(v, ax) if f else v for v, f in zip(values, fits)])
    return out


def _outcome(f, values):
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out = f(*[v.copy() for v in values])
    except Exception as e:  # noqa: BLE001 (the error's kind is the outcome)
        return e
    return [np.asarray(o) for o in (out if isinstance(out, list) else [out])]


def _same(got, want, dtype):
    if isinstance(want, Exception):
        assert isinstance(got, Exception), f"the reference raises {want!r}, the engine gives values"
        assert isinstance(got, type(want)) or isinstance(want, type(got)), (got, want)
        return
    assert not isinstance(got, Exception), f"the reference gives values, the engine raises {got!r}"
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind in "fc":
            tol = 1e-4 if dtype == "float32" or w.dtype.itemsize < 8 else 1e-7
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("row", ROWS, ids=str)
def test_rows_at_other_lengths(row, engine):
    if engine == "opencl" and not OCL_OK:
        pytest.skip(f"no OpenCL: {OCL_WHY}")
    dtype = row.dtypes[-1]
    syms, values = row_inputs(row, dtype, np.random.default_rng(SEED))
    variants = _variants(values)
    if not variants:
        pytest.skip("no axis longer than 1")
    outs = row.build(*syms)
    ref = function(syms, outs, mode=REF, on_unused_input="ignore")
    try:
        f = function(syms, outs, mode=ENGINES[engine](), on_unused_input="ignore")
    except NotImplementedError as e:  # (the Dask engine's refusal of sparse values)
        pytest.skip(str(e))
    for vals in variants:
        shapes = [v.shape for v in vals]
        try:
            _same(_outcome(f, vals), _outcome(ref, vals), dtype)
        except AssertionError as e:
            raise AssertionError(f"{row} at shapes {shapes}: {e}") from None


# The rows whose shape graph raises, at some of these lengths, where the value is numpy's
# (numpy does not check them): a boolean mask of no entries along an axis of another
# length, and tensorsolve's equations against values of no entries.
SHAPE_STRICTER = {"adv_bool_mask", "tensorsolve_axes"}


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_rows_inferred_shapes_at_other_lengths(row):
    # The rewritten graph of ``out.shape`` (the ops' infer_shape, without computing them)
    # against the shape of the value, at the lengths above: images2neibs with
    # ignore_borders inferred a negative number of rows along a side shorter than a patch.
    dtype = row.dtypes[-1]
    syms, values = row_inputs(row, dtype, np.random.default_rng(SEED))
    outs = row.build(*syms)
    outs = [o for o in (outs if isinstance(outs, list | tuple) else [outs]) if o.ndim > 0]
    if not outs:
        pytest.skip("no output of a dimension")
    ref = function(syms, outs, mode=REF, on_unused_input="ignore")
    shapes = function(syms, [o.shape for o in outs], mode="FAST_RUN", on_unused_input="ignore")
    for vals in [values, *_variants(values)]:
        want = _outcome(ref, vals)
        if isinstance(want, Exception):
            continue
        got = _outcome(shapes, vals)
        where = f"{row} at shapes {[v.shape for v in vals]}"
        if isinstance(got, Exception) and row.name in SHAPE_STRICTER:
            continue
        assert not isinstance(got, Exception), f"{where}: the shape graph raises {got!r}"
        assert [tuple(int(n) for n in g) for g in got] == [w.shape for w in want], where
