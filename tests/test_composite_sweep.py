"""tools/composite_sweep.py: the composite functions at extreme inputs, value and gradient
against mpmath, with the default rewrites on the reference engine and the CPU engine's C
kernels. A function is right at every point, or listed in KNOWN with the reason its
wrong values are left (strict xfail: a fix must take it off the list)."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "composite_sweep", ROOT / "tools" / "composite_sweep.py"
)
sweep = importlib.util.module_from_spec(_spec)
sys.modules["composite_sweep"] = sweep  # dataclasses look their module up by name
_spec.loader.exec_module(sweep)

#: case -> why its wrong values are left (numpy's, Theano's and PyTensor's are the same)
KNOWN = {
    "tanh": "the derivative 1 - tanh(x)**2 of the output is 0 where tanh rounds to +-1 (|x| "
    "> 9 in float32, 19 in float64; the true value is 4 exp(-2|x|)), as every peer's: the "
    "exact tensor.sech2(x) reads the input, which a tanh layer would then keep for the "
    "backward pass (+56% planned memory for six 1024-wide layers)",
    "mean": "the sum overflows before the division (mean of 1.7e308s is inf)",
    "var": "the squared deviations overflow (var of [2e19, -2e19, 0] in float32 is inf)",
    "std": "sqrt of the overflowing variance; 0 with a NaN gradient where it underflows",
    "x.norm(2, axis=1)": "the sum of squares overflows (numpy.linalg.norm's does too)",
    "linalg.norm": "the sum of squares overflows (numpy.linalg.norm's does too)",
}
ENGINES = ("py", "cpu_c")


def _params():
    for case in sweep.CASES:
        marks = (
            [pytest.mark.xfail(strict=True, reason=KNOWN[case.name])] if case.name in KNOWN else []
        )
        yield pytest.param(case, marks=marks, id=case.name)


def test_known_failures_are_cases():
    assert set(KNOWN) <= {c.name for c in sweep.CASES}


@pytest.mark.parametrize("case", list(_params()))
def test_composite_at_extremes(case):
    bad = []
    for dtype in case.dtypes:
        if dtype not in sweep.FLOATS + ("int8", "int64"):
            continue
        for engine in ENGINES:
            res = sweep.run(case, dtype, engine)
            if res.error or res.bad:
                bad.append(sweep.format_result(res))
    assert not bad, "\n".join(bad)
