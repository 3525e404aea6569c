"""The Results block of docs/performance.md is what `make bench` writes from its own run.

`benchmarks/plot_results.py` renders the tables from `benchmarks/results/latest.jsonl`;
the block committed in the page must be exactly that rendering (so a hand edit, or a
change to the targets without regenerating, fails here), and the targets it applies are
the page's.
"""

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def plot_results():
    path = ROOT / "benchmarks" / "plot_results.py"
    spec = importlib.util.spec_from_file_location("plot_results", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_block_is_the_rendering_of_the_committed_run(plot_results):
    results = ROOT / "benchmarks" / "results" / "latest.jsonl"
    machine, rows, runs = plot_results.load(results)
    want = plot_results.render(
        machine, rows, runs, "performance.png", "benchmarks/results/latest.jsonl"
    )
    page = (ROOT / "docs" / "performance.md").read_text()
    block = page.split(plot_results.START, 1)[1].split(plot_results.END, 1)[0]
    assert block == f"\n{want}\n"
    # The block says where its figures come from and when they were measured.
    assert block.startswith("\nFrom `benchmarks/results/latest.jsonl`")
    assert machine["date"] in block and machine["git_commit"] in block


def _call_row(ours, eager):
    return {
        "benchmark": "call_overhead",
        "case": "x+1",
        "theano_dag_us": ours,
        "numpy_eager_us": eager,
        "target_us_scaled": 10.0,
    }


def test_call_target_includes_the_ratio_to_numpy_eager(plot_results):
    text, met = plot_results.target("call_overhead", _call_row(0.6, 0.5))
    assert "<= 1.2x numpy eager" in text
    assert met == "yes (absolute), yes (scaled), yes (vs eager)"
    _, met = plot_results.target("call_overhead", _call_row(0.61, 0.5))
    assert met == "yes (absolute), yes (scaled), **no** (vs eager)"


def test_optimizer_target_is_a_tenth_of_pytensor(plot_results):
    row = {"benchmark": "compile_time", "case": "c", "theano_dag_s": 0.1, "pytensor_s": 1.0}
    assert plot_results.target("compile_time", row) == ("<= 0.1x PyTensor's FAST_RUN", True)
    row["theano_dag_s"] = 0.11
    assert plot_results.target("compile_time", row)[1] is False
    del row["pytensor_s"]
    assert plot_results.target("compile_time", row)[1] is None
