"""What a foreign package (Theano, PyTensor) is to the conversion: a :class:`Flavor`.

A flavor says where the foreign package keeps each class the conversion needs and
how it differs from the other one; the functions here map types and casts between
the two sides, which every op rule and wrapper needs.
"""

from __future__ import annotations

import importlib

import numpy as np

from theano_dag.graph.type import Generic
from theano_dag.sparse.basic import cast as sparse_cast
from theano_dag.sparse.type import SparseType, type_formats
from theano_dag.tensor.basic import cast
from theano_dag.tensor.type import TensorType

__all__ = ["Flavor", "NoCounterpartError", "cast_to", "foreign_type", "our_type"]


class NoCounterpartError(NotImplementedError):
    """An op that the other package has no counterpart for, converted with ``strict=True``."""


class Flavor:
    """Where a foreign package keeps what the conversion needs, and how it differs.

    Subclasses set ``package`` (the import name), ``install`` (the pip hint) and the
    dotted paths in ``paths``; :meth:`load` imports them once, as attributes.
    """

    package = ""
    install = ""
    paths: dict = {}
    scalar_modules: tuple = ()
    sparse_modules: tuple = ()  # where the sparse ops a conversion may map by name live

    def __init__(self):
        self._loaded = False

    def load(self, who):
        if self._loaded:
            return self
        try:
            importlib.import_module(self.package)
        except Exception as err:  # an old package on a new numpy fails with other errors too
            raise ImportError(
                f"{who} needs {self.package}, an optional extra: {self.install} "
                f"(importing it failed: {type(err).__name__}: {err})"
            ) from err
        for attr, path in self.paths.items():
            module, _, name = path.rpartition(":")
            setattr(self, attr, getattr(importlib.import_module(module), name))
        self.scalar_mods = [importlib.import_module(m) for m in self.scalar_modules]
        self.sparse_mods = [importlib.import_module(m) for m in self.sparse_modules]
        self._loaded = True
        return self

    # -- types and variables -------------------------------------------------------------------

    def tensor_type(self, dtype, shape):
        """The foreign TensorType of ``dtype`` and static ``shape`` (entries None or ints)."""
        raise NotImplementedError

    def static_shape(self, ftype):
        """Our static shape of a foreign TensorType."""
        raise NotImplementedError

    def is_tensor_type(self, ftype):
        return isinstance(ftype, self.TensorType) and not self.is_sparse_type(ftype)

    def is_sparse_type(self, ftype):
        """Whether ``ftype`` is the foreign package's type of sparse matrices."""
        cls = getattr(self, "SparseType", None)
        return cls is not None and isinstance(ftype, cls)

    def sparse_type(self, format, dtype):
        """The foreign type of ``format`` (csr/csc) sparse matrices of ``dtype``."""
        return self.SparseType(format, dtype)

    def is_scalar_type(self, ftype):
        return isinstance(ftype, self.ScalarType)

    def scalar_constant(self, value, dtype):
        stype = self.get_scalar_type(dtype)
        return self.ScalarConstant(stype, np.asarray(value, dtype=dtype)[()])

    def tensor_constant(self, data, ftype, name=None):
        return self.TensorConstant(ftype, np.array(data, dtype=ftype.dtype), name=name)

    def function(self, inputs, outputs):
        return self.compile_function(inputs, outputs)

    # -- ops whose construction differs between the packages -----------------------------------

    def dimshuffle(self, x, new_order):
        raise NotImplementedError

    def reduce_axis(self, axis):
        """Our ``axis`` (None or a tuple) as the foreign reduction ops take it."""
        return axis


def our_type(fl, ftype, var=None):
    """Our type of the foreign type ``ftype``: a foreign scalar becomes a 0-d tensor, a
    sparse matrix type ours of its format and dtype. ``var`` (the foreign variable) is
    named in the error for a sparse format we do not have."""
    if fl.is_sparse_type(ftype):
        if ftype.format not in type_formats:
            name = getattr(var, "name", None) or var
            what = f"{name} is " if var is not None else ""
            raise NotImplementedError(
                f"{what}a {ftype.format} sparse matrix ({ftype}): theano_dag's sparse "
                f"formats are {', '.join(type_formats)}"
            )
        return SparseType(ftype.format, ftype.dtype)
    if fl.is_tensor_type(ftype):
        return TensorType(ftype.dtype, shape=fl.static_shape(ftype))
    if fl.is_scalar_type(ftype):
        return TensorType(ftype.dtype, shape=())
    return Generic()


def foreign_type(fl, otype):
    """The foreign type of our type ``otype`` (a generic one for a non-tensor)."""
    if isinstance(otype, TensorType):
        return fl.tensor_type(otype.dtype, otype.shape)
    if isinstance(otype, SparseType):
        return fl.sparse_type(otype.format, otype.dtype)
    return fl.generic


def cast_to(fl, var, dtype, ours):
    """``var`` cast to ``dtype`` when the two packages' upcasting rules disagree."""
    if getattr(var, "dtype", dtype) == dtype:
        return var
    if isinstance(var.type, SparseType):
        return sparse_cast(var, dtype)
    if fl.is_sparse_type(var.type):
        return fl.SparseCast(dtype)(var)
    if ours:
        return cast(var, dtype)
    return fl.Elemwise(getattr(fl.scalar_mods[0], f"convert_to_{dtype}"))(var)
