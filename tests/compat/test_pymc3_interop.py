"""PyMC3 3.11.6 on theano_dag through the ``theano`` alias, against theano-pymc 1.1.2: one
linear regression, its log-density and gradient at the test point, its NUTS posterior and
its ADVI fit, computed on both sides in ``.venv-pymc3`` (``make venv-pymc3``; the test
skips, saying so, where that venv is absent).

theano-pymc runs in Python mode (``cxx=``): the same values as its C backend without
minutes of C compilation on a cold cache. The two samplers use the same seeds but their
chains part after a few draws (the last bits of a gradient differ), so the posteriors are
compared within Monte Carlo error and the ADVI fits within the posterior's spread.
"""

import json
import os
import subprocess
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
VENV = ROOT / ".venv-pymc3"
PYTHON = VENV / "bin" / "python"
THEANO_PYMC = VENV / "theano-pymc"

pytestmark = pytest.mark.skipif(
    not (PYTHON.exists() and (THEANO_PYMC / "theano").is_dir()),
    reason=f"no PyMC3 venv at {VENV} with theano-pymc in it (make venv-pymc3 builds it)",
)

DRAWS = 400

MODEL = textwrap.dedent(
    f"""
    import json

    import numpy as np
    import pymc3 as pm
    import theano
    import theano.tensor as tt

    rng = np.random.RandomState(42)
    X = rng.normal(size=(50, 2))
    y = 1.0 + X @ np.array([1.5, -0.7]) + rng.normal(scale=0.5, size=50)
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 10.0)
        b = pm.Normal("b", 0.0, 10.0, shape=2)
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("y", a + tt.dot(X, b), s, observed=y)
        point = model.test_point
        logp = float(model.logp(point))
        dlogp = model.dlogp_array(model.dict_to_array(point)).tolist()
        trace = pm.sample(
            {DRAWS}, tune=400, chains=1, cores=1, random_seed=1, progressbar=False,
            return_inferencedata=False, compute_convergence_checks=False,
        )
        approx = pm.fit(
            3000, method="advi", random_seed=2, progressbar=False,
            obj_optimizer=pm.adam(learning_rate=0.05),
        )
    advi = approx.bij.rmap(approx.mean.eval())
    names = ("a", "b", "s_log__")
    print(json.dumps({{
        "theano": theano.__version__,
        "X": X.tolist(), "y": y.tolist(),
        "logp": logp, "dlogp": dlogp,
        "mean": {{v: np.mean(trace[v], 0).tolist() for v in names}},
        "sd": {{v: np.std(trace[v], 0).tolist() for v in names}},
        "advi": {{v: np.asarray(advi[v]).tolist() for v in names}},
    }}))
    """
)

SITECUSTOMIZE = (
    "import sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, 'theano_dag_theano_alias', 0)]"
    "\n"
)


def _run(side, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("THEANO_FLAGS", "PYTHONPATH")}
    env["HOME"] = str(tmp_path)  # no ~/.theanorc of the machine
    if side == "theano":
        # the real Theano: the alias's finder taken off, theano-pymc on the path
        (tmp_path / "side").mkdir()
        (tmp_path / "side" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "side"), str(THEANO_PYMC)])
        env["THEANO_FLAGS"] = f"cxx=,base_compiledir={tmp_path / 'theano-cache'}"
    else:
        env["PYTHONPATH"] = str(ROOT)  # this checkout's theano_dag behind the alias
    proc = subprocess.run(
        [str(PYTHON), "-c", MODEL], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    with ThreadPoolExecutor(2) as pool:
        runs = {
            side: pool.submit(_run, side, tmp_path_factory.mktemp(side))
            for side in ("theano", "theano_dag")
        }
        return {side: run.result() for side, run in runs.items()}


def test_both_sides_run_their_own_theano(sides):
    assert sides["theano"]["theano"] == "1.1.2"
    assert sides["theano_dag"]["theano"].startswith("1.1.2+theano-dag.")


def test_log_density_and_gradient_agree(sides):
    t, d = sides["theano"], sides["theano_dag"]
    np.testing.assert_allclose(d["logp"], t["logp"], rtol=1e-13)
    np.testing.assert_allclose(d["dlogp"], t["dlogp"], rtol=1e-12)


def _least_squares(side):
    X, y = np.asarray(side["X"]), np.asarray(side["y"])
    coef, *_ = np.linalg.lstsq(np.column_stack([np.ones(len(y)), X]), y, rcond=None)
    return {"a": coef[0], "b": coef[1:]}


def test_nuts_posteriors_agree_within_monte_carlo_error(sides):
    t, d = sides["theano"], sides["theano_dag"]
    ls = _least_squares(t)
    for v in ("a", "b", "s_log__"):
        sd = np.asarray(t["sd"][v])
        # Monte Carlo error of a mean of DRAWS draws (a third of them independent, at the
        # least, for NUTS on this posterior), four of them, for the two chains together
        tolerance = 4 * sd * np.sqrt(2 / (DRAWS / 3))
        np.testing.assert_array_less(np.abs(np.subtract(d["mean"][v], t["mean"][v])), tolerance)
        np.testing.assert_allclose(d["sd"][v], sd, rtol=0.3)
        if v in ls:  # flat priors against these data: the posterior mean is least squares'
            np.testing.assert_array_less(np.abs(np.subtract(d["mean"][v], ls[v])), 3 * sd)


def test_advi_fits_agree_within_the_posteriors_spread(sides):
    t, d = sides["theano"], sides["theano_dag"]
    for v in ("a", "b", "s_log__"):
        sd = np.asarray(t["sd"][v])
        np.testing.assert_array_less(np.abs(np.subtract(d["advi"][v], t["advi"][v])), 2 * sd)
        for side in (t, d):
            np.testing.assert_array_less(np.abs(np.subtract(side["advi"][v], t["mean"][v])), 2 * sd)
