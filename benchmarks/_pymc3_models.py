"""The models of ``benchmarks/pymc3.py``, built and sampled with PyMC3 3.11 in one process.

Run as a script by ``pymc3.py`` in a child interpreter that has PyMC3 (``make
venv-pymc3``'s), once per side and model: ``import theano`` there gives theano-pymc 1.1.2
or theano_dag (through its alias), so the same PyMC3 code below runs on either. The
script prints one JSON object (run it with ``-P``: ``benchmarks/pymc3.py`` would shadow
PyMC3 on ``sys.path``): the build time of the model's log-density + gradient
function (wall-clock and CPU, and of a second build in the same process; on theano_dag
with the counts of its cache of optimized graphs over the two), the NUTS run's time and
its number of leapfrog steps, the time of one call of the compiled function, and each
free variable's posterior mean, standard deviation and Monte Carlo standard error of the
mean (``sd / sqrt(ess)``, ArviZ's bulk effective sample size of the one chain).

    python -P _pymc3_models.py --model linreg --tune 500 --draws 500 --seed 1

This file imports only the standard library and numpy at the top: PyMC3 and Theano are
imported in ``main``, after the side's environment is in place.
"""

from __future__ import annotations

import argparse
import json
import time
import timeit

import numpy as np

# The data: fixed, made from one seed, the same on both sides.
LINREG_ROWS, LINREG_FEATURES = 100, 3
SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
AR1_STEPS, AR1_RHO, AR1_SIGMA = 100, 0.7, 0.5
GLM_GROUPS, GLM_ROWS = 8, 120
GP_POINTS = 40
TRANSIT_POINTS, TRANSIT_NOISE = 500, 5e-4


def linreg(pm, tt, theano):
    """Bayesian linear regression: 100 rows x 3 features, Normal priors, HalfNormal scale."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(LINREG_ROWS, LINREG_FEATURES))
    y = 1.0 + X @ np.array([1.0, -2.0, 0.5]) + 0.3 * rng.normal(size=LINREG_ROWS)
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 10.0, shape=LINREG_FEATURES)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", alpha + tt.dot(X, beta), sigma, observed=y)
    return model


def eight_schools(pm, tt, theano):
    """Eight schools, non-centred: theta = mu + tau * theta_tilde."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta_tilde = pm.Normal("theta_tilde", 0.0, 1.0, shape=8)
        theta = pm.Deterministic("theta", mu + tau * theta_tilde)
        pm.Normal("y", theta, SCHOOLS_SIGMA, observed=SCHOOLS_Y)
    return model


def ar1_scan(pm, tt, theano):
    """AR(1) on 100 steps, its conditional means computed by ``scan``."""
    rng = np.random.RandomState(1)
    y = np.zeros(AR1_STEPS)
    for t in range(1, AR1_STEPS):
        y[t] = AR1_RHO * y[t - 1] + AR1_SIGMA * rng.normal()
    with pm.Model() as model:
        rho = pm.Normal("rho", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        previous = tt.as_tensor_variable(y[:-1])
        mean, _ = theano.scan(
            lambda y_prev, r: r * y_prev, sequences=[previous], non_sequences=[rho]
        )
        pm.Normal("y", mean, sigma, observed=y[1:])
    return model


def hierarchical_glm(pm, tt, theano):
    """Hierarchical linear regression, 120 rows in 8 groups: each group's intercept and
    slope drawn around common means (non-centred), indexed per row (``a[group]``)."""
    rng = np.random.RandomState(2)
    group = np.arange(GLM_ROWS) % GLM_GROUPS
    x = rng.normal(size=GLM_ROWS)
    a_true = 1.0 + 0.5 * rng.normal(size=GLM_GROUPS)
    b_true = -0.5 + 0.3 * rng.normal(size=GLM_GROUPS)
    y = a_true[group] + b_true[group] * x + 0.4 * rng.normal(size=GLM_ROWS)
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0.0, 10.0)
        sigma_a = pm.HalfNormal("sigma_a", 1.0)
        mu_b = pm.Normal("mu_b", 0.0, 10.0)
        sigma_b = pm.HalfNormal("sigma_b", 1.0)
        a_offset = pm.Normal("a_offset", 0.0, 1.0, shape=GLM_GROUPS)
        b_offset = pm.Normal("b_offset", 0.0, 1.0, shape=GLM_GROUPS)
        a = mu_a + sigma_a * a_offset
        b = mu_b + sigma_b * b_offset
        eps = pm.HalfCauchy("eps", 1.0)
        pm.Normal("y", a[group] + b[group] * x, eps, observed=y)
    return model


def gp_marginal(pm, tt, theano):
    """Gaussian process regression on 40 points, its marginal likelihood (a Cholesky
    factor of the 40 x 40 covariance): squared-exponential kernel, length scale, amplitude
    and noise sampled."""
    rng = np.random.RandomState(3)
    X = np.linspace(0.0, 10.0, GP_POINTS)[:, None]
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=GP_POINTS)
    with pm.Model() as model:
        ls = pm.Gamma("ls", alpha=2.0, beta=1.0)
        eta = pm.HalfNormal("eta", 2.0)
        cov = eta**2 * pm.gp.cov.ExpQuad(1, ls)
        gp = pm.gp.Marginal(cov_func=cov)
        sigma = pm.HalfNormal("sigma", 1.0)
        gp.marginal_likelihood("y", X=X, y=y, noise=sigma)
    return model


def exoplanet_transit(pm, tt, theano):
    """A planet's transit in 500 photometric points (exoplanet 0.5.3's quick start): a
    Keplerian orbit, a limb-darkened light curve through exoplanet-core's Ops, which keeps
    the points in transit (a length known only when it runs). exoplanet is not in the
    PyMC3 venv: ``pymc3.py --extra-path`` puts its packages on the children's path
    (``make client-suites`` installs them in ``build/client-suites/packages-exoplanet``)."""
    import exoplanet as xo  # noqa: PLC0415 (optional: only with --extra-path)

    rng = np.random.RandomState(42)
    t = np.sort(rng.uniform(0, 20, TRANSIT_POINTS))
    with pm.Model() as model:
        mean = pm.Normal("mean", mu=0.0, sd=1.0)
        u = xo.distributions.QuadLimbDark("u")
        log_period = pm.Normal("log_period", mu=np.log(3.0), sd=0.1)
        period = pm.Deterministic("period", tt.exp(log_period))
        t0 = pm.Normal("t0", mu=1.0, sd=0.1)
        r = pm.Uniform("r", lower=0.01, upper=0.1, testval=0.04)
        b = xo.distributions.ImpactParameter("b", ror=r, testval=0.3)
        orbit = xo.orbits.KeplerianOrbit(period=period, t0=t0, b=b)
        lc = xo.LimbDarkLightCurve(u).get_light_curve(orbit=orbit, r=r, t=t)
        light = pm.math.sum(lc, axis=-1) + mean
        y = 0.001 * np.sin(t) + rng.normal(0, TRANSIT_NOISE, len(t))
        pm.Normal("obs", mu=light, sd=TRANSIT_NOISE, observed=y)
    return model


MODELS = {
    "linreg": linreg,
    "eight_schools": eight_schools,
    "hierarchical_glm": hierarchical_glm,
    "gp_marginal": gp_marginal,
    "ar1_scan": ar1_scan,
    "exoplanet_transit": exoplanet_transit,
}


def _summary(pm, samples):
    """Mean, sd and the Monte Carlo standard error of the mean of each component."""
    import arviz as az  # noqa: PLC0415 (PyMC3's dependency: only in the child's venv)

    flat = np.asarray(samples, dtype=np.float64).reshape(len(samples), -1)
    mean, sd = flat.mean(0), flat.std(0, ddof=1)
    ess = np.array([float(az.ess(flat[None, :, k], method="bulk")) for k in range(flat.shape[1])])
    return {"mean": mean.tolist(), "sd": sd.tolist(), "mcse": (sd / np.sqrt(ess)).tolist()}


def _wait_for_kernels(fn):
    """On theano_dag, wait until the function's C kernels are loaded (a cold kernel cache
    compiles them in the background while numpy runs): the sampler is timed on them."""
    try:
        from theano_dag.engines.cpu.native.ckernel import wait_for_kernels  # noqa: PLC0415
    except ImportError:  # theano-pymc's side
        return None
    return wait_for_kernels(fn)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=list(MODELS))
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--calls", type=int, default=2000, help="calls timed of the compiled function")
    a = ap.parse_args(argv)

    # deferred: the side's `theano` is whatever this interpreter's environment gives
    import pymc3 as pm  # noqa: PLC0415
    import theano  # noqa: PLC0415
    import theano.tensor as tt  # noqa: PLC0415

    model = MODELS[a.model](pm, tt, theano)
    with model:
        t0, c0 = time.perf_counter(), time.process_time()
        fn = model.logp_dlogp_function()
        build_s, build_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        model.logp_dlogp_function()
        rebuild_s, rebuild_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        # theano_dag's cache of optimized graphs: what the two builds loaded and stored
        cache = getattr(theano.compile, "function_cache", None)
        cache = None if cache is None else cache.stats()

        start, step = pm.init_nuts(
            init="jitter+adapt_diag", chains=1, random_seed=a.seed, progressbar=False
        )
        vg = step._logp_dlogp_func
        in_c = _wait_for_kernels(vg._theano_function)
        ends = []  # when each iteration ended: the loop timed without its set-up
        t0 = time.perf_counter()
        trace = pm.sample(
            draws=a.draws, tune=a.tune, step=step, start=start, chains=1, cores=1,
            random_seed=a.seed, progressbar=False, return_inferencedata=False,
            compute_convergence_checks=False, discard_tuned_samples=False,
            callback=lambda **_: ends.append((time.perf_counter(), time.process_time())),
        )  # fmt: skip
        sample_s = time.perf_counter() - t0

    tree = np.asarray(trace.get_sampler_stats("tree_size"))
    diverging = np.asarray(trace.get_sampler_stats("diverging"))
    # one call of the compiled function as NUTS makes it, at the last draw
    q = vg.dict_to_array(trace.point(len(trace) - 1))
    fn.set_extra_values({})
    vg.set_extra_values({})
    raw = vg._theano_function
    grad_out = np.empty_like(q)
    calls = {}
    for clock in (time.perf_counter, time.process_time):
        for name, fn in (("call", lambda: raw(q)), ("value_grad_call", lambda: vg(q, grad_out))):
            t = min(timeit.repeat(fn, timer=clock, number=a.calls, repeat=3)) / a.calls * 1e6
            calls[name + ("_us" if clock is time.perf_counter else "_cpu_us")] = t
    names = [v.name for v in model.free_RVs]
    out = {
        "model": a.model,
        "theano": theano.__version__,
        "build_s": build_s,
        "build_cpu_s": build_cpu_s,
        "rebuild_s": rebuild_s,
        "rebuild_cpu_s": rebuild_cpu_s,
        "function_cache": cache,
        "sample_s": sample_s,
        "iterations": a.tune + a.draws,
        # from the end of the first iteration to the end of the last
        "loop_s": ends[-1][0] - ends[0][0],
        "loop_cpu_s": ends[-1][1] - ends[0][1],
        "loop_iterations": len(ends) - 1,
        "loop_leapfrog_steps": int(tree[1:].sum()),
        "leapfrog_steps": int(tree.sum()),
        "divergences_after_tuning": int(diverging[a.tune :].sum()),
        "kernels_in_c": in_c,
        **calls,
        "nodes": len(raw.maker.fgraph.apply_nodes),
        "posterior": {n: _summary(pm, trace[n][a.tune :]) for n in names},
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
