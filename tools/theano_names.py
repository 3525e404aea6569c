"""What running Theano 1.1.2's own tests against theano_dag needs, in one place for the
runners (``tools/run_theano_tests.py``: tests/graph and tests/link;
``tools/compare_theano_programs.py``; ``tools/theano_suite.py`` may use it too):

* ``MODULES`` and ``rewrite``: Theano's module names -> the theano_dag modules holding
  the same names (the longest prefix wins, else ``theano.X`` -> ``theano_dag.X``);
* ``GRAPH_LINK_FILES``, ``LEFT_OUT`` and ``DESELECTED``: the graph/link selection and
  what is left out of it, each with its reason (only tests of Theano's C backend
  internals are left out).
"""

from __future__ import annotations

import re

# Theano module -> the theano_dag module with the same names (the longest prefix wins).
MODULES = {
    "theano.configdefaults": "theano_dag.config",
    "theano.configparser": "theano_dag.config",
    "theano.graph.opt": "theano_dag.graph.rewriting",
    "theano.graph.optdb": "theano_dag.graph.rewriting.db",
    "theano.graph.opt_utils": "theano_dag.graph.rewriting",
    "theano.graph.sched": "theano_dag.graph.sched",
    "theano.link.basic": "theano_dag.engines.basic",
    "theano.link.utils": "theano_dag.engines.basic",
    "theano.link.c.basic": "theano_dag.engines.theano_linkers",
    "theano.link.c.exceptions": "theano_dag.engines.theano_linkers",
    "theano.link.vm": "theano_dag.engines.theano_linkers",
    "theano.tensor.opt": "theano_dag.opt.tensor_opt",
    "theano.tensor.var": "theano_dag.tensor.variable",
    "theano.tensor.type_other": "theano_dag.tensor.type_other",
    "theano.gradient": "theano_dag.gradient",
    "theano.utils": "theano_dag.graph.utils",
    "theano": "theano_dag",
}
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


def rewrite(text: str) -> str:
    """``text`` with its Theano module names changed to theano_dag's (in imports and in
    dotted uses alike, as ``theano.tensor.dvector`` or ``theano.config``).

    >>> rewrite("from theano.graph.opt import LocalOptimizer\\nimport theano.tensor as tt")
    'from theano_dag.graph.rewriting import LocalOptimizer\\nimport theano_dag.tensor as tt'
    >>> rewrite("from theano.link.vm import VMLinker")
    'from theano_dag.engines.theano_linkers import VMLinker'
    """
    text = _PATTERN.sub(lambda m: MODULES[m.group(1)], text)
    borrowed = _BORROWED.findall(text)
    if borrowed:
        text = _BORROWED.sub("", text)
        text = "".join(f"import {name}\n" for name in dict.fromkeys(borrowed)) + text
    return text


# The graph/link selection: what the tests need, and the folders run.
GRAPH_LINK_FILES = ["tests/__init__.py", "tests/unittest_tools.py", "tests/graph", "tests/link"]
GRAPH_LINK_RUN = ["tests/graph", "tests/link"]

# Files left out, with the reason: each tests Theano's C backend internals.
LEFT_OUT = {
    "tests/link/c": "Theano's C linker itself (CLinker, DualLinker, cmodule, the C op-params "
    "and compile cache)",
    "tests/graph/test_params_type.py": "ParamsType: the C struct through which the C backend "
    "passes op parameters (its C code and ExternalCOp's C files)",
    "tests/graph/test_types.py": "CDataType, CEnumType and EnumList: types of the C backend "
    "whose values are C pointers and C enums",
}

# Single tests left out, with the reason: each tests Theano's C backend internals.
DESELECTED = {
    "tests/graph/test_op.py::TestOp::test_op_struct": "c_support_code_struct and "
    "c_init_code_struct: per-thunk C struct state of the C linker",
    "tests/link/test_vm.py::test_c_thunks": "the 'cthunk' attribute of the C linker's thunks",
    "tests/link/test_vm.py::test_no_recycling": "the C module shared by two functions' C thunks",
    "tests/link/test_vm.py::test_VMLinker_make_vm_cvm": "the CVM, Theano's VM loop in C",
    "tests/link/test_vm.py::test_VMLinker_make_vm_no_cvm": "the CVM, Theano's VM loop in C, "
    "and MissingGXX from importing its C module",
}
