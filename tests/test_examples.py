"""The README's main example (``make demo``) trains to better than 90% test accuracy."""

import importlib.util
import pathlib

import pytest

from theano_dag.compile.mode import Mode

EXAMPLE = pathlib.Path(__file__).parent.parent / "examples" / "train_digits.py"


def load_example():
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("mode", [None, Mode(linker="py")], ids=["default", "reference"])
def test_demo_trains_both_classifiers_above_90_percent(mode, capsys):
    acc_lr, acc_mlp = load_example().main(epochs=12, mode=mode)
    out = capsys.readouterr().out
    assert "logistic regression: compiled" in out and "2-layer MLP: compiled" in out
    assert acc_lr > 0.90
    assert acc_mlp > 0.90
    # the loss printed at the last epoch is below the first one, for each model
    losses = [float(line.split()[-1]) for line in out.splitlines() if "loss" in line]
    half = len(losses) // 2
    assert losses[half - 1] < losses[0] and losses[-1] < losses[half]
