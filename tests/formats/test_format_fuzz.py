"""The format fuzzer's fixed-seed sample: the fuzzer's random graphs exported to ONNX
(run by ONNX Runtime and imported back), converted to PyTensor (run by PyTensor and
converted back) and through the tuple-dag format, against numpy."""

from __future__ import annotations

import io

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("pytensor")

from theano_dag.testing import format_fuzz  # noqa: E402


def test_fixed_seed_sample_agrees_with_numpy_through_every_format():
    out = io.StringIO()
    failures, refused = format_fuzz.run(80, seed=2031, out=out)
    assert failures == [], out.getvalue()
    # the graphs that the targets take are most of them: the sample checks something
    assert refused["onnx"] < 50 and refused["pytensor"] < 30, refused


def test_a_missing_extra_is_named(monkeypatch):
    monkeypatch.setattr(format_fuzz.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match=r"onnx need onnx, onnxruntime.*pip install"):
        format_fuzz.run(1, targets=["onnx"])
