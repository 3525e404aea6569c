"""Native code: the C compiler driver, the kernel libraries it builds and loads, and the
fixed C sources (the ``.c`` files beside this module, read by :func:`c_source`).

:mod:`~theano_dag.engines.cpu.native.cc` compiles a library (flags, the on-disk cache);
:mod:`~theano_dag.engines.cpu.native.ckernel` loads the fused elementwise kernels (and
the float sums) and runs nodes through them; :mod:`~theano_dag.engines.cpu.native.segment`
runs consecutive kernels of a plan by one C call. Matrix products run in numpy's BLAS
(docs/performance.md, "Matrix products", gives the measurement behind that).
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["c_source"]

_HERE = Path(__file__).parent


@functools.cache
def c_source(name: str) -> str:
    """The text of the fixed C source ``name`` shipped beside this module.

    A leading ``/*! ... */`` note is for readers of the file and is not part of the
    text (so the generated libraries, and their cache keys, do not change with it).

    >>> src = c_source("elemwise_driver.c")
    >>> "int td_run(" in src, src.startswith("/*!")
    (True, False)
    """
    text = (_HERE / name).read_text(encoding="utf-8")
    if text.startswith("/*!"):
        text = text[text.index("*/\n") + 3 :]
    return text
