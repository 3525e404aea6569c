"""tools/theano_fuzz.py (``make theano-fuzz``): the fuzzer's reproducers rewritten for
Theano 1.1.2, and the classes of its outcomes. Theano itself runs in ``make theano-fuzz``;
here, the rewritten script runs on theano_dag behind stand-ins of Theano's names, which
checks that the rewriting keeps a runnable program that computes the same graph."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np

from theano_dag.testing import fuzz

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("theano_fuzz", ROOT / "tools" / "theano_fuzz.py")
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)


def _recipe(seed, want):
    rng = np.random.default_rng(seed)
    return next(r for r in (fuzz.generate(rng) for _ in range(500)) if want(r))


def test_the_script_imports_theano_and_declares_broadcastable_patterns():
    rec = _recipe(1, lambda r: any(n[0] == "input" and 1 in n[1] for n in r.nodes))
    script = tool.theano_script(fuzz.reproducer(rec, "py"))
    assert "theano_dag.tensor" not in script and "import theano.tensor as tt" in script
    assert "shape=(" not in script and "broadcastable=(True" in script
    assert 'Mode(linker="py", optimizer="fast_run")' in script
    assert tool.theano_script("tt.TensorType('float64', shape=())('x')") == (
        "tt.TensorType('float64', broadcastable=())('x')"
    )


def test_the_script_takes_sigmoid_from_nnet():
    x = ("input", ("a",), "float64")
    rec = fuzz.Recipe(
        nodes=[x, ("sigmoid", (0,), None)],
        outputs=[1],
        seed=3,
        dims=[("a",)] * 2,
        dtypes=["float64"] * 2,
        nonfinite=True,
    )
    script = tool.theano_script(fuzz.reproducer(rec, "py"))
    assert "tt.nnet.sigmoid(v0)" in script and "tt.sigmoid(" not in script


def test_the_rewritten_script_runs_and_agrees_on_theano_dag_behind_theanos_names(tmp_path):
    # A package named theano whose modules are theano_dag's: the script's own check of
    # the outputs against numpy must pass, as it does for the unrewritten reproducer.
    pkg = tmp_path / "theano"
    (pkg / "compile").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "from theano_dag import config, function, shared\nfrom . import tensor, gradient\n"
    )
    (pkg / "tensor.py").write_text(
        "from theano_dag.tensor import *\nfrom theano_dag.tensor import nnet\n"
    )
    (pkg / "gradient.py").write_text("from theano_dag.gradient import grad\n")
    (pkg / "compile" / "__init__.py").write_text("")
    (pkg / "compile" / "mode.py").write_text("from theano_dag.compile.mode import Mode\n")
    rec = _recipe(2, lambda r: len(r.outputs) > 1 and any(n[0] == "input" for n in r.nodes))
    path = tmp_path / "g.py"
    path.write_text(tool.theano_script(fuzz.reproducer(rec, "py")))
    env_path = f"{tmp_path}:{ROOT}"
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path[:0] = {env_path.split(':')!r};"
            f" exec(open({str(path)!r}).read())",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_outcomes_are_classified_by_exit_status_and_where_theano_raised():
    assert tool.classify({"rc": 0}) == "agree"
    assert tool.classify({"rc": 1}) == "differs"
    assert tool.classify({"rc": "refuses"}) == "theano refuses"
    assert tool.classify({"rc": "raises"}) == "theano raises"
