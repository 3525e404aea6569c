"""tools/theano_names.py and tools/run_theano_tests.py: the import rewriting, the
graph/link selection with its reasons, and the count per file."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


names = _load("theano_names")
runner = _load("run_theano_tests")


def test_modules_are_mapped_longest_prefix_first():
    src = (
        "import theano\n"
        "import theano.tensor as tt\n"
        "from theano.configdefaults import config\n"
        "from theano.graph.optdb import Query\n"
        "from theano.graph.opt import MergeOptimizer\n"
        "from theano.link.c.basic import OpWiseCLinker\n"
        "from theano.tensor.opt import constant_folding\n"
        "x = theano.function([], theano.tensor.constant(1))\n"
        "# theano-pymc, THEANO_FLAGS, theano_dag and obj.theano stay\n"
    )
    assert names.rewrite(src) == (
        "import theano_dag\n"
        "import theano_dag.tensor as tt\n"
        "from theano_dag.config import config\n"
        "from theano_dag.graph.rewriting.db import Query\n"
        "from theano_dag.graph.rewriting import MergeOptimizer\n"
        "from theano_dag.engines.theano_linkers import OpWiseCLinker\n"
        "from theano_dag.opt.tensor_opt import constant_folding\n"
        "x = theano_dag.function([], theano_dag.tensor.constant(1))\n"
        "# theano-pymc, THEANO_FLAGS, theano_dag and obj.theano stay\n"
    )


def test_borrowed_modules_become_imports():
    src = "from theano.graph.opt import (\n    logging,\n    theano,\n    TopoOptimizer,\n)\n"
    out = names.rewrite(src)
    assert out.startswith("import logging\nimport theano_dag\n")
    assert "from theano_dag.graph.rewriting import (\n    TopoOptimizer,\n)" in out


def test_every_mapped_module_imports():
    for target in set(names.MODULES.values()):
        __import__(target)


def test_what_is_left_out_has_a_reason_about_the_c_backend():
    left = {**names.LEFT_OUT, **names.DESELECTED}
    assert left and all(why.strip() for why in left.values())
    assert all(" C " in f" {why} " or "CVM" in why or "C struct" in why for why in left.values())
    assert all(t.startswith(("tests/graph/", "tests/link/")) for t in left)


def test_count_per_file():
    report = (
        "PASSED tests/graph/test_fg.py::TestFunctionGraph::test_pickle\n"
        "FAILED tests/graph/test_fg.py::TestFunctionGraph::test_replace - boom\n"
        "ERROR tests/link/test_jax.py\n"
        "XFAIL tests/graph/test_basic.py::test_view_roots - Not implemented\n"
    )
    counts = runner.per_file(report)
    assert dict(counts["tests/graph/test_fg.py"]) == {"PASSED": 1, "FAILED": 1}
    assert dict(counts["tests/link/test_jax.py"]) == {"ERROR": 1}
    assert dict(counts["tests/graph/test_basic.py"]) == {"XFAIL": 1}
