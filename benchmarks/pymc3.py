"""PyMC3 3.11 on theano_dag and on theano-pymc 1.1.2's C backend: model build time and NUTS speed.

Five models (``_pymc3_models.py``):

* ``linreg``: a Bayesian linear regression, 100 rows x 3 features;
* ``eight_schools``: eight schools, non-centred;
* ``hierarchical_glm``: a hierarchical linear regression, 120 rows in 8 groups, each
  group's intercept and slope non-centred around common means;
* ``gp_marginal``: a Gaussian process on 40 points, its marginal likelihood (Cholesky);
* ``ar1_scan``: an AR(1) model on 100 steps, its conditional means computed by ``scan``.

And, when asked (``--models exoplanet_transit --extra-path build/client-suites/packages-
exoplanet``, where ``make client-suites`` installs exoplanet), a planet's transit in 500
points through exoplanet 0.5.3's orbit and light-curve Ops, whose points in transit are
a length known only when the function runs.

Each side runs in its own child process of the PyMC3 venv's interpreter (``make
venv-pymc3`` builds ``.venv-pymc3``; ``--python``): theano_dag through its ``theano`` alias
(this checkout first on ``PYTHONPATH``), theano-pymc with ``.venv-pymc3/theano-pymc``
first on ``sys.path`` and the alias's finder taken off (``--theano-pymc``), C backend, its
NumPy C-API BLAS (``blas__ldflags=``) and its compile cache in ``--compiledir``. The
children take turns, one model at a time, ``--repeats`` rounds. In each child:

* **build**: ``model.logp_dlogp_function()``, the log-density + gradient function NUTS
  calls, timed from the built model to the compiled function (the first in the process);
* **NUTS**: ``pm.init_nuts("jitter+adapt_diag")`` then ``pm.sample`` of one chain, ``--tune``
  + ``--draws`` iterations, ``cores=1``, the same ``--seed`` on both sides. The sampling
  loop is timed from the end of its first iteration to the end of its last (a
  ``callback``), without the set-up ``pm.sample`` does first (theano-pymc compiles the
  trace's point function there: seconds). theano_dag is timed after its C kernels are
  loaded. ``draws_per_s``: iterations (tuning and draws) per second of that loop;
  ``leapfrog_per_s``: leapfrog steps (calls of the compiled function) per second;
* **call**: one call of the compiled function at the last draw (``call_us``), and of
  PyMC3's wrapper around it (``value_grad_call_us``), best of 3 rounds of ``--calls``.

Every time is taken twice: wall-clock, and the process's CPU time (``_cpu``), which moves
less with the other jobs of a shared machine (the sampler runs on one thread). The
summary's targets are on CPU time. ``pymc3_us_per_leapfrog_cpu``: a leapfrog step's time
besides the call, PyMC3's own Python, the same code on both sides; ``speedup_bound_cpu``:
the speedup theano_dag would have if its call took no time at all.

Medians over the rounds; the build time over the rounds after the first (on a cold cache
theano-pymc's first build compiles C for minutes: ``first_build_s``). The two chains start
alike but part after some draws (the last bits of a gradient differ), so the posteriors are
compared within Monte Carlo error: for every component of every free variable, ``z = |mean_dag
- mean_theano| / sqrt(mcse_dag^2 + mcse_theano^2)``, where ``mcse = sd / sqrt(ess)`` (ArviZ's
bulk effective sample size of the post-tuning draws); ``posterior_max_z`` is the largest,
``posterior_agree`` is ``max_z < 4``.

One JSON line per model with both sides and ``theano_dag_speedup_*`` (theano-pymc's time
over theano_dag's: above 1, theano_dag is faster), a first line describing the machine and
a last line with the medians over the models and the targets (NUTS: faster on every model,
at least 1.5x on the median; build: at least 5x faster).

Run: ``.venv/bin/python benchmarks/pymc3.py [--python .venv-pymc3/bin/python] [--repeats 3]
[--tune 500] [--draws 500] [--models linreg eight_schools ...]``. Each child's figures go to
stderr as it ends (one JSON line), the summary lines to stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = ROOT / ".venv-pymc3"
MODELS = ("linreg", "eight_schools", "hierarchical_glm", "gp_marginal", "ar1_scan")
# Models of a library outside the venv, run when asked (--models, with --extra-path).
EXTRA_MODELS = ("exoplanet_transit",)
SIDES = ("theano_dag", "theano_pymc")
# The real Theano on its side: the alias's finder off sys.meta_path (it refuses to hide one).
# Scan's Cython loop does not compile on Python 3.11 (Cython 0.29's generated C): marked
# unimportable, so that scan runs Theano's own fallback, its Python loop around the inner
# function compiled in C, as Theano does wherever the Cython module cannot be built.
SITECUSTOMIZE = (
    "import sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, 'theano_dag_theano_alias', 0)]"
    "\n"
    "sys.modules['theano.scan.scan_perform_ext'] = None\n"
)
Z_LIMIT = 4.0


def side_env(side: str, theano_pymc: Path, compiledir: Path, work: Path, extra=()) -> dict:
    """The environment of one side's child (``extra``: more directories on its path, after
    the side's own)."""
    env = {k: v for k, v in os.environ.items() if k not in ("THEANO_FLAGS", "PYTHONPATH")}
    env.pop("OPENBLAS_CORETYPE", None)  # numpy's own choice of kernel, on both sides
    if side == "theano_pymc":
        (work / "side").mkdir(parents=True, exist_ok=True)
        (work / "side" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env["PYTHONPATH"] = os.pathsep.join([str(work / "side"), str(theano_pymc)])
        env["THEANO_FLAGS"] = f"base_compiledir={compiledir},blas__ldflags="
    else:
        env["PYTHONPATH"] = str(ROOT)  # this checkout's theano_dag behind the alias
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *map(str, extra)])
    return env


def run_child(python, side, model, a, work) -> dict:
    # -P: the script's directory not on sys.path, where this file would shadow PyMC3
    cmd = [python, "-P", str(HERE / "_pymc3_models.py"), "--model", model, "--tune", str(a.tune),
           "--draws", str(a.draws), "--seed", str(a.seed), "--calls", str(a.calls)]  # fmt: skip
    env = side_env(side, Path(a.theano_pymc), Path(a.compiledir), work, a.extra_path)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{side} {model}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def posterior_z(dag: dict, theano: dict) -> float:
    """The largest distance between the two posterior means, in Monte Carlo errors."""
    zs = []
    for name, d in dag.items():
        t = theano[name]
        for md, mt, ed, et in zip(d["mean"], t["mean"], d["mcse"], t["mcse"], strict=True):
            zs.append(abs(md - mt) / math.hypot(ed, et))
    return max(zs)


def side_summary(runs: list) -> dict:
    """One side's figures: medians over the rounds (build time: over the rounds after
    the first, when there are several)."""
    med = statistics.median
    warm = runs[1:] or runs
    out = {
        "build_s": round(med(r["build_s"] for r in warm), 3),
        "build_cpu_s": round(med(r["build_cpu_s"] for r in warm), 3),
        "first_build_s": round(runs[0]["build_s"], 3),
    }
    for clock, suffix in (("loop_s", ""), ("loop_cpu_s", "_cpu")):
        out["draws_per_s" + suffix] = round(med(r["loop_iterations"] / r[clock] for r in runs), 1)
        out["leapfrog_per_s" + suffix] = round(
            med(r["loop_leapfrog_steps"] / r[clock] for r in runs), 1
        )
    for key in ("call_us", "call_cpu_us", "value_grad_call_us", "value_grad_call_cpu_us"):
        out[key] = round(med(r[key] for r in runs), 1)
    # What a leapfrog step costs besides the call of the compiled function: PyMC3's own
    # Python (the tree, the potential, the trace), the same code on both sides.
    out["pymc3_us_per_leapfrog_cpu"] = round(
        1e6 / out["leapfrog_per_s_cpu"] - out["value_grad_call_cpu_us"], 1
    )
    out["leapfrog_steps"] = runs[0]["leapfrog_steps"]
    out["divergences"] = runs[0]["divergences_after_tuning"]
    out["nodes"] = runs[0]["nodes"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=str(VENV / "bin" / "python"))
    ap.add_argument("--theano-pymc", default=str(VENV / "theano-pymc"))
    ap.add_argument("--compiledir", default=str(ROOT / "build" / "pymc3-bench" / "theano"))
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=[*MODELS, *EXTRA_MODELS])
    ap.add_argument(
        "--extra-path",
        nargs="*",
        default=[],
        help="directories the children import more from (exoplanet_transit: exoplanet's)",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per child")
    a = ap.parse_args(argv)
    if not Path(a.python).exists() or not (Path(a.theano_pymc) / "theano").is_dir():
        # left out, as the other benchmarks leave out a peer that is not installed
        why = f"no PyMC3 venv at {a.python} with theano-pymc in {a.theano_pymc} (make venv-pymc3)"
        print(json.dumps({"benchmark": "pymc3", "left_out": why}), flush=True)
        return
    work = ROOT / "build" / "pymc3-bench"
    runs = {(m, s): [] for m in a.models for s in SIDES}
    for r in range(a.repeats):
        for m in a.models:
            for s in SIDES:
                child = run_child(a.python, s, m, a, work)
                runs[m, s].append(child)
                # each child's figures as it ends (stderr): a run stopped early keeps them
                got = {k: v for k, v in child.items() if k != "posterior"}
                print(json.dumps({"round": r, "side": s, **got}), file=sys.stderr, flush=True)
    first = runs[a.models[0], "theano_pymc"][0]
    print(
        json.dumps(
            {
                "benchmark": "pymc3",
                "machine": f"{platform.machine()} {platform.python_version()}",
                "cpus": os.cpu_count(),
                "theano_dag": runs[a.models[0], "theano_dag"][0]["theano"],
                "theano_pymc": first["theano"],
                "tune": a.tune,
                "draws": a.draws,
                "seed": a.seed,
                "repeats": a.repeats,
            }
        ),
        flush=True,
    )
    rows = []
    for m in a.models:
        dag, th = side_summary(runs[m, "theano_dag"]), side_summary(runs[m, "theano_pymc"])
        z = posterior_z(*(runs[m, s][0]["posterior"] for s in SIDES))
        row = {"benchmark": "pymc3", "model": m, "theano_dag": dag, "theano_pymc": th}
        for key in ("draws", "leapfrog"):
            for suffix in ("", "_cpu"):
                ratio = dag[f"{key}_per_s{suffix}"] / th[f"{key}_per_s{suffix}"]
                row[f"theano_dag_speedup_{key}{suffix}"] = round(ratio, 2)
        for suffix in ("", "_cpu"):
            ratio = th[f"value_grad_call{suffix}_us"] / dag[f"value_grad_call{suffix}_us"]
            row[f"theano_dag_speedup_call{suffix}"] = round(ratio, 2)
        row["theano_dag_speedup_build"] = round(th["build_s"] / dag["build_s"], 1)
        # The most theano_dag's call could gain: theano-pymc's leapfrog step against
        # PyMC3's part of it alone (a call that took no time).
        row["speedup_bound_cpu"] = round(
            1 + th["value_grad_call_cpu_us"] / dag["pymc3_us_per_leapfrog_cpu"], 2
        )
        row["posterior_max_z"] = round(z, 2)
        row["posterior_agree"] = z < Z_LIMIT
        rows.append(row)
        print(json.dumps(row), flush=True)
    draws = [r["theano_dag_speedup_draws_cpu"] for r in rows]
    build = [r["theano_dag_speedup_build"] for r in rows]
    summary = {
        "benchmark": "pymc3",
        "summary": True,
        "median_speedup_draws_cpu": statistics.median(draws),
        "median_speedup_draws": statistics.median(r["theano_dag_speedup_draws"] for r in rows),
        "median_speedup_build": statistics.median(build),
        "target_nuts_met": min(draws) > 1 and statistics.median(draws) >= 1.5,
        "target_build_met": min(build) >= 5,
        "posteriors_agree": all(r["posterior_agree"] for r in rows),
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
