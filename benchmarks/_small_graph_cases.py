"""The graphs of ``benchmarks/small_graphs.py``, written once for any Theano-like library.

Each case is a function ``case(lib, data) -> (inputs, outputs, updates, args)`` over a
namespace ``lib`` that holds the library's tensor module (``tt``), ``grad``, ``shared``,
``function``, ``sigmoid`` and ``solve_lower`` (a lower-triangular solve): the same code
builds the graph in theano_dag, PyTensor and theano-pymc. ``data`` holds the arrays
(inputs and constants), made once by the parent process and handed to every library,
so that all of them compute the same numbers.

Run as a script (``python _small_graph_cases.py --lib theano --data IN.npz --out
OUT.npz``) it builds the cases with theano-pymc in that interpreter and times them on
request (one line ``CASE NUMBER`` on its stdin per round): the parent runs it
with the ``--theano-python`` of ``small_graphs.py`` (theano-pymc 1.1.2 needs an older
numpy than theano_dag's venv). This file imports only numpy at the top for that reason.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import timeit
import types

import numpy as np

# Sizes: the graphs a sampler or an online learner calls thousands of times.
LINREG_ROWS, LINREG_FEATURES = 100, 3
MLP_BATCH, MLP_WIDTH = 4, 8
GRU_BATCH, GRU_WIDTH = 4, 8
MVN_ROWS, MVN_DIM = 20, 4
LOGREG_ROWS, LOGREG_FEATURES = 32, 8
LOGREG_RATE = 0.1


def make_data(seed=0):
    """Every array the cases use, by name (inputs and the constants of the graphs)."""
    rng = np.random.default_rng(seed)
    d = {}
    d["linreg_X"] = rng.standard_normal((LINREG_ROWS, LINREG_FEATURES))
    d["linreg_y"] = (
        1.0 + d["linreg_X"] @ np.array([1.0, -2.0, 0.5]) + 0.3 * rng.standard_normal(LINREG_ROWS)
    )
    # alpha, beta (3), log(sigma): the flat vector a sampler hands to the function.
    d["linreg_q"] = np.array([0.8, 1.1, -1.9, 0.4, math.log(0.35)])
    for layers in (2, 8):
        d[f"mlp{layers}_x"] = rng.standard_normal((MLP_BATCH, MLP_WIDTH))
        d[f"mlp{layers}_t"] = rng.standard_normal((MLP_BATCH, MLP_WIDTH))
        for i in range(layers):
            d[f"mlp{layers}_W{i}"] = rng.standard_normal((MLP_WIDTH, MLP_WIDTH)) / MLP_WIDTH**0.5
            d[f"mlp{layers}_b{i}"] = 0.1 * rng.standard_normal(MLP_WIDTH)
    d["gru_x"] = rng.standard_normal((GRU_BATCH, GRU_WIDTH))
    d["gru_h"] = np.tanh(rng.standard_normal((GRU_BATCH, GRU_WIDTH)))
    for g in "zrh":
        d[f"gru_W{g}"] = rng.standard_normal((GRU_WIDTH, GRU_WIDTH)) / GRU_WIDTH**0.5
        d[f"gru_U{g}"] = rng.standard_normal((GRU_WIDTH, GRU_WIDTH)) / GRU_WIDTH**0.5
        d[f"gru_b{g}"] = 0.1 * rng.standard_normal(GRU_WIDTH)
    d["mvn_X"] = rng.standard_normal((MVN_ROWS, MVN_DIM)) + np.arange(MVN_DIM)
    d["mvn_mu"] = np.arange(MVN_DIM) + 0.1 * rng.standard_normal(MVN_DIM)
    a = rng.standard_normal((MVN_DIM, MVN_DIM))
    d["mvn_L"] = np.linalg.cholesky(a @ a.T + MVN_DIM * np.eye(MVN_DIM))
    d["logreg_x"] = rng.standard_normal((LOGREG_ROWS, LOGREG_FEATURES))
    d["logreg_y"] = (rng.random(LOGREG_ROWS) < 0.5).astype(np.float64)
    d["logreg_w"] = 0.1 * rng.standard_normal(LOGREG_FEATURES)
    d["logreg_b"] = np.array(0.0)
    return d


def _normal_logp(tt, value, mu, sigma):
    # PyMC3 3.11's Normal.logp: tau = sigma ** -2, the density bounded by sigma > 0.
    tau = 1.0 * sigma**-2.0
    logp = (-tau * (value - mu) ** 2 + tt.log(tau / np.pi / 2.0)) / 2.0
    return tt.switch(1 * (sigma > 0), logp, -np.inf)


def linreg(lib, d):
    """Log-density and its gradient of a Bayesian linear regression, as PyMC3 builds them:
    one flat vector in, sliced and reshaped into alpha, beta and log(sigma); Normal priors,
    a HalfNormal scale through a log transform, a Normal likelihood of the observations."""
    tt = lib.tt
    q = tt.dvector("__args_joined")
    alpha = q[0:1].reshape(())
    beta = q[1:4].reshape((3,))
    sigma_log = q[4:5].reshape(())
    sigma = tt.exp(sigma_log)
    prior_alpha = _normal_logp(tt, alpha, 0.0, tt.constant(10.0))
    prior_beta = _normal_logp(tt, beta, 0.0, tt.constant(10.0))
    # HalfNormal(1) of exp(sigma_log), plus the log transform's Jacobian (sigma_log).
    tau_s = tt.constant(1.0)
    hn = -0.5 * tau_s * sigma**2 + 0.5 * tt.log(tau_s * 2.0 / np.pi)
    prior_sigma = tt.switch(1 * (sigma >= 0) * (1 * (tau_s > 0)), hn, -np.inf) + sigma_log
    mu = alpha + tt.dot(tt.constant(d["linreg_X"]), beta)
    like = _normal_logp(tt, tt.constant(d["linreg_y"]), mu, sigma)
    factors = [prior_alpha, prior_beta, prior_sigma, like]
    cost = tt.sum(tt.stack([tt.sum(f) for f in factors]))
    g = lib.grad(cost, q)
    return [q], [cost, g], [], [d["linreg_q"]]


def _mlp(layers):
    def mlp(lib, d):
        tt = lib.tt
        p = f"mlp{layers}_"
        x, t = tt.dmatrix("x"), tt.dmatrix("t")
        params = []
        h = x
        for i in range(layers):
            W, b = tt.dmatrix(f"W{i}"), tt.dvector(f"b{i}")
            params += [W, b]
            h = tt.tanh(tt.dot(h, W) + b)
        cost = tt.mean((h - t) ** 2)
        grads = lib.grad(cost, params)
        args = [d[p + "x"], d[p + "t"]]
        for i in range(layers):
            args += [d[f"{p}W{i}"], d[f"{p}b{i}"]]
        return [x, t, *params], [cost, *grads], [], args

    mlp.__doc__ = (
        f"A {layers}-layer tanh MLP, batch 4 x width 8: squared-error cost and its gradients."
    )
    return mlp


def gru(lib, d):
    """One step of a GRU cell, batch 4 x width 8 (the body of a recurrent loop)."""
    tt = lib.tt
    x, h = tt.dmatrix("x"), tt.dmatrix("h")
    w = {}
    for g in "zrh":
        w[g] = (tt.dmatrix("W" + g), tt.dmatrix("U" + g), tt.dvector("b" + g))
    z = lib.sigmoid(tt.dot(x, w["z"][0]) + tt.dot(h, w["z"][1]) + w["z"][2])
    r = lib.sigmoid(tt.dot(x, w["r"][0]) + tt.dot(h, w["r"][1]) + w["r"][2])
    hc = tt.tanh(tt.dot(x, w["h"][0]) + tt.dot(r * h, w["h"][1]) + w["h"][2])
    h_new = (1.0 - z) * h + z * hc
    ins = [x, h] + [v for g in "zrh" for v in w[g]]
    args = [d["gru_x"], d["gru_h"]] + [d[f"gru_{k}{g}"] for g in "zrh" for k in "WUb"]
    return ins, [h_new], [], args


def mvnormal(lib, d):
    """Multivariate normal log-density of 20 rows in 4 dimensions through a Cholesky factor
    (PyMC3's ``MvNormal(mu, chol=L)``), with its gradient wrt ``mu`` and ``L``."""
    tt = lib.tt
    mu, L = tt.dvector("mu"), tt.dmatrix("L")
    X = tt.constant(d["mvn_X"])
    delta = X - mu
    z = lib.solve_lower(L, delta.T)
    n, k = d["mvn_X"].shape
    logp = -0.5 * tt.sum(z**2) - n * tt.sum(tt.log(L.diagonal())) - 0.5 * n * k * np.log(2 * np.pi)
    gmu, gL = lib.grad(logp, [mu, L])
    return [mu, L], [logp, gmu, gL], [], [d["mvn_mu"], d["mvn_L"]]


def logreg_sgd(lib, d):
    """One SGD step of a logistic regression on 32 rows: the cost out, the weights updated
    in shared variables."""
    tt = lib.tt
    x, y = tt.dmatrix("x"), tt.dvector("y")
    w = lib.shared(d["logreg_w"].copy(), name="w")
    b = lib.shared(d["logreg_b"].copy(), name="b")
    p = lib.sigmoid(tt.dot(x, w) + b)
    cost = -tt.mean(y * tt.log(p) + (1.0 - y) * tt.log(1.0 - p))
    gw, gb = lib.grad(cost, [w, b])
    updates = [(w, w - LOGREG_RATE * gw), (b, b - LOGREG_RATE * gb)]
    return [x, y], [cost], updates, [d["logreg_x"], d["logreg_y"]]


CASES = {
    "linreg_logp_dlogp": linreg,
    "mlp2_cost_grad": _mlp(2),
    "mlp8_cost_grad": _mlp(8),
    "gru_step": gru,
    "mvnormal_chol_logp_grad": mvnormal,
    "logreg_sgd_step": logreg_sgd,
}


def theano_lib():
    """theano-pymc 1.1.2 with its C backend (the cvm linker, FAST_RUN's rewrites)."""
    import theano  # noqa: PLC0415 (only in the child that runs theano-pymc's venv)
    import theano.tensor as tt  # noqa: PLC0415
    from theano.tensor.slinalg import solve_lower_triangular  # noqa: PLC0415

    mode = theano.compile.mode.Mode(linker="cvm", optimizer="fast_run")
    return types.SimpleNamespace(
        name="theano_c",
        tt=tt,
        grad=theano.grad,
        shared=theano.shared,
        sigmoid=tt.nnet.sigmoid,
        solve_lower=solve_lower_triangular,
        function=lambda i, o, u: theano.function(i, o, updates=u, mode=mode),
        version=theano.__version__,
        blas=str(theano.config.blas__ldflags) or "NumPy C-API based BLAS (no ldflags)",
    )


def time_calls(fns, number, repeats):
    """Median microseconds per call of each ``name -> (f, args)``; the callables take turns
    in each round, so that a machine busy for a while slows all of them alike. ``args``
    None: ``f(number)`` times a batch itself (in another process) and returns seconds."""
    runs = {name: [] for name in fns}
    for _ in range(repeats):
        for name, (f, args) in fns.items():
            if args is None:
                runs[name].append(f(number) / number)
            else:
                t = timeit.timeit(lambda f=f, a=args: f(*a), number=number)
                runs[name].append(t / number)
    return {name: statistics.median(r) * 1e6 for name, r in runs.items()}


def blas_info():
    """The BLAS libraries this process loaded, as threadpoolctl reports them."""
    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415 (optional: the bench extra)
    except ImportError as e:
        return {"error": f"threadpoolctl not importable: {e}"}
    keep = ("internal_api", "version", "architecture", "num_threads")
    return [{k: p.get(k) for k in keep} for p in threadpool_info()]


def main(argv=None):
    """Child side: build every case with theano-pymc, save the first call's outputs to
    ``--out``, print one JSON line, then serve the parent's timing requests (one line
    ``CASE NUMBER`` in, one line of microseconds per call out), so that the parent's
    engines and this one take turns within each round."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", choices=["theano"], required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    a = ap.parse_args(argv)
    lib = theano_lib()
    with np.load(a.data) as z:
        d = {k: z[k] for k in z.files}
    saved, fns = {}, {}
    for name in a.cases:
        ins, outs, ups, args = CASES[name](lib, d)
        f = lib.function(ins, outs, ups)
        for i, v in enumerate(f(*args)):
            saved[f"{name}/{i}"] = np.asarray(v)
        fns[name] = (f, args)
    np.savez(a.out, **saved)
    head = {"lib": lib.name, "version": lib.version, "blas": lib.blas}
    print(json.dumps({**head, "blas_loaded": blas_info()}), flush=True)
    for line in sys.stdin:
        name, number = line.split()
        t = time_calls({name: fns[name]}, int(number), 1)[name]
        print(t, flush=True)


if __name__ == "__main__":
    sys.exit(main())
