"""benchmarks/networks.py's table (no network is run): runs merged by case, the timed
calls of each engine, the --engine-repeats argument."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "networks.py"


@pytest.fixture(scope="module")
def networks():
    spec = importlib.util.spec_from_file_location("networks_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _line(networks, case, cpu, calls):
    results = {
        e: {"eval_ms": 2 * v, "eval_cpu_ms": v, "peak_mib": 100.0, "build_s": 1.0, "repeats": n}
        for (e, v), n in zip(cpu.items(), calls)
    }
    return networks._case_line(case, results, 30, False)


def test_render_merges_runs_by_case_and_shows_the_calls(networks, tmp_path):
    old = _line(networks, "resnet50_b1", {"numpy_eager": 400.0, "theano_dag": 200.0}, [10, 10])
    other = _line(networks, "inception_v3_b1", {"numpy_eager": 600.0, "theano_dag": 300.0}, [5, 5])
    new = _line(networks, "resnet50_b1", {"numpy_eager": 500.0, "theano_dag": 250.0}, [10, 30])
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(json.dumps(old) + "\n" + json.dumps(other) + "\n")
    second.write_text("not json\n" + json.dumps(new) + "\n")
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{networks.START}\nold table\n{networks.END}\nafter\n")
    args = [
        "--render",
        str(first),
        str(second),
        "--doc",
        str(doc),
        "--png",
        str(tmp_path / "n.png"),
    ]
    assert networks.main(args) == 0
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old table" not in text
    # the later run's line of resnet50_b1 wins; inception_v3_b1 comes from the first run
    assert "| resnet50_b1 (1x299x299) | 500 | 250 |" in text
    assert "| inception_v3_b1 (1x299x299) | 600 | 300 |" in text
    assert "| resnet50_b1 | 10 | 30 |" in text  # timed calls per engine
    assert "| resnet50_b1 | 2x |" in text  # numpy eager / theano_dag, CPU time


def test_engine_repeats_must_name_an_engine(networks, capsys):
    with pytest.raises(SystemExit):
        networks.main(["--engine-repeats", "numpy=5", "--cases"])
    assert "--engine-repeats: expected ENGINE=N" in capsys.readouterr().err
