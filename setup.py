"""The C extension of theano_dag; everything else is in pyproject.toml.

``theano_dag.engines._callstub`` is the C half of a compiled function's call
(engines/callstub.c). It is optional: where no C compiler is found the package installs
without it and calls go through the Python half (``engines.callspec.NATIVE_CALL``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("theano_dag.engines._callstub", ["theano_dag/engines/callstub.c"], optional=True)
    ],
)
