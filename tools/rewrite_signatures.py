"""Write the optimized graph of 19 benchmark graphs (``debugprint`` of each compiled
function's graph, one text file per graph) to a directory, to check that a change to the
optimizer, the graph core or tensor construction rewrites them identically.

The graphs: the random DAGs (1,000, 3,000 and a 300-node one of another seed) and a
40-layer MLP with its gradient from ``benchmarks/compile_time.py``, the DAGs of 1,000 and
3,000 nodes and a 500-op chain from ``benchmarks/first_result.py``, the six cases of
``benchmarks/small_graphs.py``, two graphs mixing softmax, sigmoid, softplus and
product rewrites, and the networks of ``theano_dag.models`` (ResNet50 and InceptionV3
inference, ResNet50's weight gradients, the MNIST training step), whose shapes are
rewrites of convolutions and pools layer after layer. Run it before and after the change,
then compare::

    PYTHONPATH=. .venv/bin/python tools/rewrite_signatures.py /tmp/before
    # ... the change ...
    PYTHONPATH=. .venv/bin/python tools/rewrite_signatures.py /tmp/after
    diff -r /tmp/before /tmp/after
"""

from __future__ import annotations

import hashlib
import io
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "benchmarks"))
os.environ["COMPILE_TIME_NO_PYTENSOR"] = "1"  # compile_time's optional peer: not needed

import _small_graph_cases as small  # noqa: E402
import compile_time as ct  # noqa: E402
import first_result as fr  # noqa: E402
import small_graphs  # noqa: E402

import theano_dag  # noqa: E402
import theano_dag.tensor as tt  # noqa: E402
from theano_dag import models  # noqa: E402
from theano_dag.models.mnist import mnist_training_step  # noqa: E402
from theano_dag.printing import debugprint  # noqa: E402


def _first_result_graph(kind, n):
    ins = [tt.dvector(f"x{k}") for k in range(fr.N_INPUTS)]
    out = fr.build(tt, ins, fr.recipe(kind, n), fr.op_table(tt, numpy_like=False))
    return ins, [out], None


def _mixed():
    x, y = tt.dmatrices("x", "y")
    w = tt.dvector("w")
    e = tt.exp(x * 2.0) / tt.exp(x * 2.0).sum(axis=1, keepdims=True) + tt.log(1 + tt.exp(-y)) * w
    c = (x * y * 3.0 / (y * 2.0) - (-x) * 0.5).sum() + tt.nnet.sigmoid(x).mean()
    return [x, y, w], [e, c, theano_dag.grad(c, x)], None


def _softmax():
    x, v = tt.dmatrix("x"), tt.dvector("v")
    s = tt.nnet.softmax(x.dot(x.T) + v)
    cost = tt.log(s).sum()
    return [x, v], [cost, theano_dag.grad(cost, v), (x / x.sum()) * -2.0 / (v * v)], None


def _mnist_step():
    params = models.init_params(models.mnist_convnet, (1, 1, 28, 28))
    inputs, loss, updates = mnist_training_step(models.Net(models.TensorOps(), params))
    return inputs, [loss], updates


def graphs() -> dict:
    """Name -> a function returning ``(inputs, outputs, updates)``."""
    out = {
        "ct_dag1000": lambda: (*ct.build_dag(tt, ct.dag_recipe(1000)), None),
        "ct_dag3000": lambda: (*ct.build_dag(tt, ct.dag_recipe(3000)), None),
        "ct_dag300_s7": lambda: (*ct.build_dag(tt, ct.dag_recipe(300, seed=7)), None),
        "ct_mlp40": lambda: (*ct.build_mlp(tt, theano_dag.grad, n_layers=40), None),
        "fr_dag1000": lambda: _first_result_graph("dag", 1000),
        "fr_dag3000": lambda: _first_result_graph("dag", 3000),
        "fr_chain500": lambda: _first_result_graph("chain", 500),
    }
    lib = small_graphs.theano_dag_lib()  # its cases only build graphs here
    data = small.make_data()
    for name, case in small.CASES.items():
        out["sg_" + name] = lambda case=case: tuple(case(lib, data)[:3])
    out["extra_mix"] = _mixed
    out["extra_softmax"] = _softmax
    for key, name in (("net_resnet50", "ResNet50 inference"),
                      ("net_inception_v3", "InceptionV3 inference"),
                      ("net_resnet50_grad", "ResNet50 weight gradients")):  # fmt: skip
        out[key] = lambda spec=ct.NETWORKS[name]: (*ct.build_network(*spec), None)
    out["net_mnist_step"] = _mnist_step
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):  # -h / --help: not a directory name
        sys.exit("usage: rewrite_signatures.py OUT_DIR")
    out_dir = argv[0]
    os.makedirs(out_dir, exist_ok=True)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    for name, build in graphs().items():
        ins, outs, updates = build()
        f = theano_dag.function(ins, list(outs), updates=updates, on_unused_input="ignore")
        text = io.StringIO()
        debugprint(f.maker.fgraph, file=text)
        with open(os.path.join(out_dir, f"{name}.txt"), "w") as fh:
            fh.write(text.getvalue())
        digest = hashlib.sha1(text.getvalue().encode()).hexdigest()[:12]
        print(f"{name:30s} {len(f.maker.fgraph.apply_nodes):6d} nodes  {digest}")


if __name__ == "__main__":
    main()
