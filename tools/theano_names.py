"""The one table for running Theano 1.1.2's own tests (and programs) against theano_dag:
what ``tools/theano_suite.py`` (``make theano-suite``, and its ``--selection graph-link``)
and ``tools/compare_theano_programs.py`` change in Theano's code, and what they leave out.

* ``rewrite`` and ``REWRITTEN_IMPORTS``: Theano's module names -> the theano_dag modules
  holding the same names, from the package's table (``theano_dag.compat.theano_names``,
  which the ``theano`` import alias reads too: the longest prefix wins, else ``theano.X``
  -> ``theano_dag.X``), and the few import lines rewritten whole;
* ``SELECTIONS``: which test files each comparison runs, and the files it leaves out
  (``LEFT_OUT``) with their reasons;
* ``LEFT_ASIDE``: single tests of Theano's C backend internals, with their reasons. They
  run on both sides and are left out of both counts (the sampling of every N-th test is
  made first, so that leaving a test aside does not change which others run).
"""

from __future__ import annotations

import re

from theano_dag.compat.theano_names import MODULES

# A module name as a whole word: not part of theano_dag, theano-pymc, a longer module
# name or an attribute (``x.theano``); THEANO_FLAGS stays (case matters).
_PATTERN = re.compile(
    r"(?<![\w.-])("
    + "|".join(re.escape(m) for m in sorted(MODULES, key=len, reverse=True))
    + r")(?![\w-])"
)

# Modules that Theano's tests import by name from another module's namespace (``from
# theano.graph.opt import logging, theano``): imported as modules instead.
_BORROWED_MODULES = ("theano_dag", "logging")
_BORROWED = re.compile(r"^[ \t]+(" + "|".join(_BORROWED_MODULES) + r"),[ \t]*\n", re.M)


# Import lines of Theano's tests rewritten whole, with the reason: the name they import is
# part of Theano's C backend, and theano_dag's counterpart has another name.
REWRITTEN_IMPORTS = {
    # DualLinker runs Theano's Python and C implementations and compares them; its Python
    # half (whose outputs it returns) is theano_dag's reference engine.
    "from theano.link.c.basic import DualLinker": (
        "from theano_dag.engines.basic import PerformLinker as DualLinker"
    ),
}


def rewrite(text: str) -> str:
    """``text`` with its Theano module names changed to theano_dag's (in imports and in
    dotted uses alike, as ``theano.tensor.dvector`` or ``theano.config``).

    >>> rewrite("from theano.graph.opt import LocalOptimizer\\nimport theano.tensor as tt")
    'from theano_dag.graph.rewriting import LocalOptimizer\\nimport theano_dag.tensor as tt'
    >>> rewrite("from theano.link.vm import VMLinker")
    'from theano_dag.engines.theano_linkers import VMLinker'
    """
    for old, new in REWRITTEN_IMPORTS.items():
        text = text.replace(old, new)
    text = _PATTERN.sub(lambda m: MODULES[m.group(1)], text)
    borrowed = _BORROWED.findall(text)
    if borrowed:
        text = _BORROWED.sub("", text)
        text = "".join(f"import {name}\n" for name in dict.fromkeys(borrowed)) + text
    return text


# What each comparison runs: glob patterns of test files under Theano's tree, and how
# many of each file's tests (every N-th, by position in the collected order).
SELECTIONS = {
    # The "tensor, compile and gradient tests" (47 files at rel-1.1.2, 42 once
    # LEFT_OUT is left out). Theano's tests/sparse and the subpackages
    # tests/tensor/{nnet,signal,random} are not in it (nor in the first count).
    "suite": {
        "files": (
            "tests/tensor/test_*.py",
            "tests/compile/test_*.py",
            "tests/compile/function/test_*.py",
            "tests/test_gradient.py",
        ),
        "every": 3,
    },
    # Theano's graph and link tests, all of them (README: the graph/link count).
    "graph-link": {"files": ("tests/graph/test_*.py", "tests/link/test_*.py"), "every": 1},
    # Theano's sparse tests, every file and every test (README: the sparse count).
    "sparse": {"files": ("tests/sparse/test_*.py", "tests/sparse/sandbox/test_*.py"), "every": 1},
    # The rest of Theano's CPU tests: nnet, signal, random, scan, scalar, typed_list, misc
    # and the top-level files (ifelse, printing, rop, config...); not the GPU backend
    # (tests/gpuarray), d3viz or the sandbox (its own selection).
    "rest": {
        "files": (
            "tests/tensor/nnet/test_*.py",
            "tests/tensor/signal/test_*.py",
            "tests/tensor/random/test_*.py",
            "tests/scan/test_*.py",
            "tests/scalar/test_*.py",
            "tests/typed_list/test_*.py",
            "tests/misc/test_*.py",
            "tests/test_*.py",
        ),
        "every": 1,
        "except": ("tests/test_gradient.py",),  # in "suite"
    },
    # Theano's sandbox: the MRG streams and their multinomial ops, the linear-algebra
    # hints and rules (theano.sandbox.linalg).
    "sandbox": {"files": ("tests/sandbox/test_*.py", "tests/sandbox/linalg/test_*.py"), "every": 1},
}

# Files left out of every selection, with the reason: each tests Theano's C backend
# internals or machinery theano_dag does not reproduce by design.
LEFT_OUT = {
    "tests/tensor/test_blas_c.py": "Theano's C BLAS ops (CGemv, CGer) and their C code",
    "tests/tensor/test_blas_scipy.py": "Theano's scipy BLAS backend ops",
    "tests/tensor/test_gc.py": "Theano's C linker garbage-collection internals",
    "tests/tensor/test_mpi.py": "MPI send/receive ops (needs mpi4py and mpiexec)",
    "tests/compile/test_compilelock.py": "the lock of Theano's C compilation cache",
    "tests/link/c": "Theano's C linker itself (CLinker, DualLinker, cmodule, the C op-params "
    "and compile cache)",
    "tests/graph/test_params_type.py": "ParamsType: the C struct through which the C backend "
    "passes op parameters (its C code and ExternalCOp's C files)",
    "tests/graph/test_types.py": "CDataType, CEnumType and EnumList: types of the C backend "
    "whose values are C pointers and C enums",
}

# Single tests left aside, with the reason: each tests Theano's C backend internals. An id
# without parameters covers each of its parametrized cases; a class's id, its tests.
LEFT_ASIDE = {
    "tests/graph/test_op.py::TestOp::test_op_struct": "c_support_code_struct and "
    "c_init_code_struct: per-thunk C struct state of the C linker",
    "tests/link/test_vm.py::test_c_thunks": "the 'cthunk' attribute of the C linker's thunks",
    "tests/link/test_vm.py::test_no_recycling": "the C module shared by two functions' C thunks",
    "tests/link/test_vm.py::test_VMLinker_make_vm_cvm": "the CVM, Theano's VM loop in C",
    "tests/link/test_vm.py::test_VMLinker_make_vm_no_cvm": "the CVM, Theano's VM loop in C, "
    "and MissingGXX from importing its C module",
    # Proposed by the helper on the tensor tests (its list of C-backend tests):
    "tests/tensor/test_basic.py::test_unalign": "Theano's C code refuses unaligned numpy "
    "arrays (TypeError), a property of its C elemwise kernels (theano_dag computes them)",
    "tests/tensor/test_opt.py::TestFusion::test_no_c_code": "fusion must skip scalar ops "
    "without c_code: a limit of Theano's C Composite code generation; needs the cvm linker",
}


def left_out(rel: str) -> bool:
    """Whether the test file ``rel`` is in ``LEFT_OUT`` (itself or a folder above it).

    >>> left_out("tests/link/c/test_cmodule.py"), left_out("tests/link/test_vm.py")
    (True, False)
    """
    return any(rel == f or rel.startswith(f.rstrip("/") + "/") for f in LEFT_OUT)


def left_aside(test_id: str) -> bool:
    """Whether the test ``test_id`` (pytest's id) is in ``LEFT_ASIDE``.

    >>> left_aside("tests/link/test_vm.py::test_c_thunks"), left_aside("tests/a.py::t")
    (True, False)
    >>> left_aside("tests/tensor/test_opt.py::TestFusion::test_no_c_code")
    True
    """
    test = test_id.split("[")[0]
    return any(test == t or test.startswith(t + "::") for t in LEFT_ASIDE)
