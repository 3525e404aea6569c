"""Sparse matrices: theano_dag's sparse products and a GCN training step beside
scipy.sparse and PyTorch's sparse CSR.

Side by side in one run, float32, on CSR matrices of 10^5 to 10^6 rows:

* ``product``: a CSR matrix (rows x cols, ``density`` of its entries stored) times a
  dense (cols x 32) matrix. ``theano_dag``: a compiled ``structured_dot`` on the CPU
  engine (scipy.sparse's kernel behind it); ``scipy``: ``a @ b``; ``torch``:
  ``torch.sparse.mm`` on a ``sparse_csr_tensor`` sharing the arrays, with torch's own
  threads, and ``torch_1t`` capped to one thread (scipy's kernel runs on one).
* ``gcn_step``: one SGD step of a two-layer graph convolution, ``softmax(A relu(A X W1)
  W2)`` with a cross-entropy over every node, ``A`` the n x n normalised adjacency of a
  random graph of mean degree ``degree`` (density degree / n), X (n x 32), W1 (32 x 16),
  W2 (16 x 8): forward, the gradients of W1 and W2, and the update. ``theano_dag``: one
  compiled function with the updates (A, X, labels, W1, W2 shared); ``scipy_eager``: the
  same step written by hand with scipy.sparse and numpy; ``torch``/``torch_1t``: autograd
  through ``torch.sparse.mm``. Each side's loss and new weights are checked against
  ``scipy_eager`` first.

Times are medians over ``--repeats`` interleaved rounds (each round times every engine
on the same inputs), in ms, with each engine's ratio to scipy's (``*_vs_scipy``, above 1:
slower; ``*_vs_scipy_eager`` for the GCN step) and, for the GCN step, theano_dag's to
torch's (``theano_dag_vs_torch``); ``*_best_ms``, the fastest round, and ``*_cpu_ms``, the median
CPU time of the process per call (every thread's: on a machine shared with other jobs,
what the call costs, where the wall time also holds the waits for a core). Peak
memory (``*_peak_mib``): each engine's one call in a child process of its own, from
its inputs built and a first call made, the peak resident set (``VmHWM``, reset just
before the call) less the resident set before it; beside it ``dense_mib``, what the
sparse matrix would take as a dense array, and ``sparse_mib``, what it takes as CSR.

The first line describes the machine: CPU, ``OPENBLAS_CORETYPE`` (unset it, as
``make bench-sparse`` does, for numpy's own kernel choice), the BLAS and OpenMP pools
``threadpoolctl`` reports, and torch's version and threads, or why torch is absent.

Run: ``make bench-sparse`` (a venv with torch's CPU build, .venv-bench-torch), or
``.venv/bin/python benchmarks/sparse_products.py [--repeats 9] [--quick] [--no-memory]``
without torch (its columns are skipped with a message naming the missing extra).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp

import theano_dag
import theano_dag.tensor as tt
from theano_dag import sparse as S
from theano_dag.engines.cpu.native.ckernel import compile_mode
from theano_dag.testing import procmem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm import blas_info, cpu_flags  # noqa: E402

DTYPE = "float32"
K = 32  # columns of the dense operand of the products, features of the GCN's input
HIDDEN, CLASSES = 16, 8
LR = 0.5
# (rows, cols, density): square adjacencies and bag-of-words-like 10^4 columns
PRODUCTS = [
    (10**5, 10**5, 1e-4),
    (10**5, 10**5, 1e-3),
    (10**5, 10**4, 1e-2),
    (10**6, 10**4, 1e-4),
    (10**6, 10**4, 1e-3),
]
# (nodes, mean degree): density 10^-4 and 10^-3 at 10^5 nodes, 10^-5 at 10^6
GCNS = [(10**5, 10), (10**5, 100), (10**6, 10)]
QUICK_PRODUCTS = [(10**5, 10**5, 1e-4), (10**6, 10**4, 1e-4)]
QUICK_GCNS = [(10**5, 10)]
TORCH_MISSING = (
    "torch is not installed: make bench-sparse builds .venv-bench-torch with it "
    "(or pip install 'theano_dag[bench]')"
)
MIB = 2.0**20


def _torch():
    try:
        import torch  # noqa: PLC0415 (optional peer: the benchmark runs without it)
    except ImportError:
        return None
    # torch says at the first CSR tensor that its sparse CSR support is in beta
    warnings.filterwarnings("ignore", message=".*[Ss]parse.*", category=UserWarning)
    return torch


def random_csr(rows, cols, density, seed=0):
    """A CSR matrix with about ``rows * cols * density`` stored entries, uniformly placed
    (duplicates summed), values uniform in [-1, 1): built from coordinates, since
    ``scipy.sparse.random`` draws from all ``rows * cols`` positions."""
    rng = np.random.default_rng(seed)
    nnz = int(round(rows * cols * density))
    r = rng.integers(0, rows, nnz, dtype=np.int32)
    c = rng.integers(0, cols, nnz, dtype=np.int32)
    v = rng.uniform(-1.0, 1.0, nnz).astype(DTYPE)
    a = sp.csr_matrix((v, (r, c)), shape=(rows, cols))
    a.sum_duplicates()
    return a


def normalised_adjacency(nodes, degree, seed=0):
    """``D^-1/2 (A + I) D^-1/2`` of a random undirected graph of mean degree about
    ``degree``, CSR float32."""
    upper = random_csr(nodes, nodes, degree / nodes / 2, seed)
    upper.data[:] = 1.0
    a = (upper + upper.T + sp.identity(nodes, DTYPE, format="csr")).tocsr()
    a.data[:] = 1.0
    scale = sp.diags((1.0 / np.sqrt(np.asarray(a.sum(axis=1)).ravel())).astype(DTYPE))
    out = (scale @ a @ scale).tocsr().astype(DTYPE)
    out.sort_indices()
    return out


def _torch_csr(torch, a):
    return torch.sparse_csr_tensor(
        torch.from_numpy(a.indptr.astype(np.int64)),
        torch.from_numpy(a.indices.astype(np.int64)),
        torch.from_numpy(a.data),
        size=a.shape,
    )


def _threads(torch, n):
    """Context: torch capped to ``n`` threads (None: as it is)."""

    @contextlib.contextmanager
    def ctx():
        if n is None:
            yield
            return
        old = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(old)

    return ctx


# ---------------------------------------------------------------- the products


def product_engines(a, b, torch):
    """name -> (call, context factory); the absent ones -> reason."""
    out, skipped = {}, {}
    x, y = S.csr_matrix("x", dtype=DTYPE), tt.matrix("y", dtype=DTYPE)
    f = theano_dag.function([x, y], S.structured_dot(x, y))
    out["theano_dag"] = (lambda: f(a, b), contextlib.nullcontext)
    out["scipy"] = (lambda: a @ b, contextlib.nullcontext)
    if torch is None:
        skipped["torch"] = TORCH_MISSING
    else:
        at, bt = _torch_csr(torch, a), torch.from_numpy(b)
        out["torch"] = (lambda: torch.sparse.mm(at, bt).numpy(), _threads(torch, None))
        out["torch_1t"] = (lambda: torch.sparse.mm(at, bt).numpy(), _threads(torch, 1))
    return out, skipped


def product_inputs(rows, cols, density):
    a = random_csr(rows, cols, density)
    b = np.random.default_rng(1).standard_normal((cols, K)).astype(DTYPE)
    return a, b


def time_product(case, repeats, torch, memory):
    rows, cols, density = case
    a, b = product_inputs(rows, cols, density)
    row = {
        "benchmark": "sparse",
        "case": f"product {rows:.0e}x{cols:.0e} density {density:g} @ {cols:.0e}x{K} {DTYPE}",
        "nnz": int(a.nnz),
        "unit": "ms",
    }
    engs, skipped = product_engines(a, b, torch)
    row.update({f"{k}_skipped": v for k, v in skipped.items()})
    ref = (a.astype("float64") @ b.astype("float64")).astype(DTYPE)
    scale = float(np.abs(ref).max()) or 1.0
    for name, (call, ctx) in list(engs.items()):
        with ctx():
            err = float(np.abs(np.asarray(call()) - ref).max()) / scale
        if err > 1e-5:
            row[f"{name}_error"] = f"max relative error {err:.3g}"
            del engs[name]
    _time_into(row, engs, repeats, number=_calls_for(engs["scipy"][0]))
    if memory:
        _peaks_into(row, "product", case, list(engs), a)
    return row


# ---------------------------------------------------------------- the GCN step


def gcn_inputs(nodes, degree):
    adj = normalised_adjacency(nodes, degree)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((nodes, K)).astype(DTYPE)
    labels = rng.integers(0, CLASSES, nodes)
    w1 = (rng.standard_normal((K, HIDDEN)) / np.sqrt(K)).astype(DTYPE)
    w2 = (rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN)).astype(DTYPE)
    return adj, x, labels, w1, w2


def gcn_scipy(adj, x, labels, w1, w2):
    """``step() -> loss`` written by hand with scipy.sparse and numpy; ``params()``."""
    n = x.shape[0]
    adj_t = adj.T  # CSC view of the same arrays: A.T @ g without a conversion
    w = [w1.copy(), w2.copy()]
    onehot_rows = np.arange(n)

    def step():
        w1, w2 = w
        p1 = adj @ (x @ w1)
        h = np.maximum(p1, 0)
        z = adj @ (h @ w2)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) - z[onehot_rows, labels]))
        g = e / s
        g[onehot_rows, labels] -= 1.0
        g /= n
        g_hw2 = adj_t @ g
        g_w2 = h.T @ g_hw2
        g_p1 = (g_hw2 @ w2.T) * (p1 > 0)
        g_w1 = x.T @ (adj_t @ g_p1)
        w[0] = w1 - np.float32(LR) * g_w1
        w[1] = w2 - np.float32(LR) * g_w2
        return loss

    return step, lambda: [v.copy() for v in w]


def gcn_theano_dag(adj, x, labels, w1, w2):
    A = theano_dag.shared(adj, name="A")
    X = theano_dag.shared(x, name="X")
    y = theano_dag.shared(labels, name="labels")
    W1 = theano_dag.shared(w1.copy(), name="W1")
    W2 = theano_dag.shared(w2.copy(), name="W2")
    H = tt.nnet.relu(S.structured_dot(A, tt.dot(X, W1)))
    P = tt.nnet.softmax(S.structured_dot(A, tt.dot(H, W2)))
    loss = tt.nnet.categorical_crossentropy(P, y).mean()
    g1, g2 = theano_dag.grad(loss, [W1, W2])
    with compile_mode("sync"):  # time the C kernels, not numpy while they build
        f = theano_dag.function([], loss, updates=[(W1, W1 - LR * g1), (W2, W2 - LR * g2)])
    return (lambda: float(f())), lambda: [W1.get_value(), W2.get_value()]


def gcn_torch(torch, adj, x, labels, w1, w2):
    at = _torch_csr(torch, adj)
    xt, yt = torch.from_numpy(x), torch.from_numpy(labels)
    W1 = torch.tensor(w1, requires_grad=True)
    W2 = torch.tensor(w2, requires_grad=True)
    F = torch.nn.functional

    def step():
        h = F.relu(torch.sparse.mm(at, xt @ W1))
        z = torch.sparse.mm(at, h @ W2)
        loss = F.cross_entropy(z, yt)
        loss.backward()
        with torch.no_grad():
            for w in (W1, W2):
                w -= LR * w.grad
                w.grad = None
        return loss.item()

    return step, lambda: [W1.detach().numpy().copy(), W2.detach().numpy().copy()]


def gcn_builders(torch):
    out = {"theano_dag": gcn_theano_dag, "scipy_eager": gcn_scipy}
    if torch is not None:
        out["torch"] = lambda *a: gcn_torch(torch, *a)
        out["torch_1t"] = out["torch"]
    return out


def time_gcn(case, repeats, torch, memory):
    nodes, degree = case
    inputs = gcn_inputs(nodes, degree)
    adj = inputs[0]
    row = {
        "benchmark": "sparse",
        "case": f"gcn_step {nodes:.0e} nodes degree {degree} ({K}-{HIDDEN}-{CLASSES}) {DTYPE}",
        "nnz": int(adj.nnz),
        "unit": "ms/step",
    }
    if torch is None:
        row["torch_skipped"] = TORCH_MISSING
    ctxs = {"torch": _threads(torch, None), "torch_1t": _threads(torch, 1)} if torch else {}
    ref_step, ref_params = gcn_scipy(*inputs)
    ref_loss, ref_w = ref_step(), ref_params()
    engs = {}
    for name, build in gcn_builders(torch).items():
        ctx = ctxs.get(name, contextlib.nullcontext)
        with ctx():
            step, params = build(*inputs)
            loss = step()
        diff = max(
            abs(loss - ref_loss) / abs(ref_loss),
            *(float(np.abs(p - r).max() / np.abs(r).max()) for p, r in zip(params(), ref_w)),
        )
        if diff > 1e-4:
            row[f"{name}_error"] = f"disagrees with scipy_eager: relative {diff:.3g}"
            continue
        engs[name] = (step, ctx)
    base = engs["scipy_eager"][0]
    _time_into(row, engs, repeats, number=_calls_for(base), base="scipy_eager")
    if "theano_dag_ms" in row and "torch_ms" in row:
        row["theano_dag_vs_torch"] = round(row["theano_dag_ms"] / row["torch_ms"], 3)
    if memory:
        _peaks_into(row, "gcn", case, list(engs), adj)
    return row


# ---------------------------------------------------------------- timing, memory


def _calls_for(call, min_s=0.05):
    t0 = time.perf_counter()
    call()
    return max(1, int(min_s / max(time.perf_counter() - t0, 1e-7)))


def _time_into(row, engs, repeats, number, base="scipy"):
    """Median ms per call over ``repeats`` interleaved rounds; ratios to ``base``."""
    times = {name: [] for name in engs}
    cpu = {name: [] for name in engs}
    for r in range(repeats):
        for name in sorted(engs, reverse=bool(r % 2)):
            call, ctx = engs[name]
            with ctx():
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(number):
                    call()
                times[name].append((time.perf_counter() - t0) / number)
                cpu[name].append((time.process_time() - c0) / number)
    for name, ts in times.items():
        row[f"{name}_ms"] = round(statistics.median(ts) * 1e3, 3)
        row[f"{name}_best_ms"] = round(min(ts) * 1e3, 3)
        row[f"{name}_cpu_ms"] = round(statistics.median(cpu[name]) * 1e3, 3)
    for name in times:
        if name != base and f"{base}_ms" in row:
            row[f"{name}_vs_{base}"] = round(row[f"{name}_ms"] / row[f"{base}_ms"], 3)


def _peaks_into(row, kind, case, names, a):
    row["dense_mib"] = round(a.shape[0] * a.shape[1] * a.dtype.itemsize / MIB, 1)
    row["sparse_mib"] = round((a.data.nbytes + a.indices.nbytes + a.indptr.nbytes) / MIB, 1)
    for name in names:
        cmd = [sys.executable, __file__, "--child", kind, json.dumps(case), name]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if out.returncode:
            row[f"{name}_peak_error"] = out.stderr.strip().splitlines()[-1:]
        else:
            row[f"{name}_peak_mib"] = round(int(out.stdout.split()[-1]) / MIB, 1)


def child(kind, case, name):
    """One call of ``name`` on ``case``: print the peak resident set it added, in bytes."""
    torch = _torch()
    ctx = contextlib.nullcontext
    if kind == "product":
        a, b = product_inputs(*case)
        engs, _ = product_engines(a, b, torch)
        call, ctx = engs[name]
    else:
        inputs = gcn_inputs(*case)
        builders = gcn_builders(torch)
        builders["scipy_eager"] = gcn_scipy
        if name.startswith("torch"):
            ctx = _threads(torch, 1 if name == "torch_1t" else None)
        with ctx():
            call, _ = builders[name](*inputs)
        del inputs
    with ctx():
        call()  # the first call: kernels built, buffers and thread pools made
        procmem.reset_peak(release=True)
        before = procmem.status()["VmRSS"] * 1024
        call()
        print(procmem.peak_bytes() - before)


def head(torch):
    info = {
        "benchmark": "sparse",
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, numpy {np.__version__}, "
        f"scipy {scipy.__version__}",
        "cpu": cpu_flags(),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "blas": blas_info(),
    }
    if torch is None:
        info["torch"] = TORCH_MISSING
    else:
        info["torch"] = f"{torch.__version__}, {torch.get_num_threads()} threads"
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9, help="interleaved rounds (median)")
    ap.add_argument("--quick", action="store_true", help="the smallest cases, three rounds")
    ap.add_argument("--no-memory", action="store_true", help="no peak memory children")
    ap.add_argument("--only", choices=["product", "gcn"], help="one kind of case")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, case, name = args.child
        child(kind, tuple(json.loads(case)), name)
        return 0
    if args.quick:
        args.repeats = 3
    torch = _torch()
    print(json.dumps(head(torch)), flush=True)
    memory = not args.no_memory
    if args.only != "gcn":
        for case in QUICK_PRODUCTS if args.quick else PRODUCTS:
            print(json.dumps(time_product(case, args.repeats, torch, memory)), flush=True)
    if args.only != "product":
        for case in QUICK_GCNS if args.quick else GCNS:
            print(json.dumps(time_gcn(case, args.repeats, torch, memory)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
