"""Scalar types and ops (``theano.scalar``): the per-element vocabulary of Elemwise.

>>> from theano_dag import scalar as ts
>>> ts.add.c_code(["a", "b"], ["float32", "int32"], ["float64"])
['(((double)(a)) + ((double)(b)))']
>>> ts.sigmoid.output_types(("int8",))
('float32',)
"""

from theano_dag.scalar.arith import *  # noqa: F403
from theano_dag.scalar.arith import __all__ as _arith_all
from theano_dag.scalar.basic import *  # noqa: F403
from theano_dag.scalar.basic import __all__ as _basic_all
from theano_dag.scalar.basic import const_like, get_scalar_type, zero_grads
from theano_dag.scalar.basic_scipy import (  # Theano's scalar namespace holds basic_scipy's
    GammaInc,
    GammaIncC,
    GammaLn,
    TriGamma,
    gammainc,
    gammaincc,
)
from theano_dag.scalar.composite import Composite, c_literal
from theano_dag.scalar.math import *  # noqa: F403
from theano_dag.scalar.math import __all__ as _math_all

bool_ = get_scalar_type("bool")
int8, int16, int32, int64 = (get_scalar_type(d) for d in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (
    get_scalar_type(d) for d in ("uint8", "uint16", "uint32", "uint64")
)
float32, float64 = get_scalar_type("float32"), get_scalar_type("float64")
float16 = get_scalar_type("float16")
complex64, complex128 = get_scalar_type("complex64"), get_scalar_type("complex128")

# Theano's names of two scalar op instances.
scalar_maximum, scalar_minimum = maximum, minimum  # noqa: F405

# Theano's tuples of scalar types, by family (``theano.scalar.all_types``...).
int_types = (int8, int16, int32, int64)
uint_types = (uint8, uint16, uint32, uint64)
integer_types = int_types + uint_types
float_types = (float16, float32, float64)
complex_types = (complex64, complex128)
discrete_types = (bool_, *integer_types)
continuous_types = float_types + complex_types
all_types = discrete_types + continuous_types

__all__ = (
    list(_basic_all)
    + list(_arith_all)
    + list(_math_all)
    + [
        "Composite",
        "GammaInc",
        "GammaIncC",
        "GammaLn",
        "TriGamma",
        "gammainc",
        "gammaincc",
        "c_literal",
        "const_like",
        "zero_grads",
        "bool_",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
        "int_types",
        "uint_types",
        "integer_types",
        "float_types",
        "complex_types",
        "discrete_types",
        "continuous_types",
        "all_types",
        "scalar_maximum",
        "scalar_minimum",
    ]
)
