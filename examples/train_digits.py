"""Train logistic regression, then a 2-layer MLP, on the bundled handwritten digits.

Run with ``make demo``. Uses only Theano-style APIs: symbolic tensors, ``grad``,
``shared`` parameters and ``updates``.
"""

from __future__ import annotations

import time

import numpy as np

import theano_dag
import theano_dag.tensor as tt
from theano_dag.datasets import load_digits
from theano_dag.tensor import nnet


def one_hot(y, n=10):
    out = np.zeros((len(y), n))
    out[np.arange(len(y)), y] = 1.0
    return out


def train(name, params, probs, x, y, data, lr, epochs, batch=64, mode=None):
    x_train, y_train, x_test, y_test = data
    cost = nnet.categorical_crossentropy(probs, y).mean()
    grads = theano_dag.grad(cost, params)
    t0 = time.perf_counter()
    step = theano_dag.function(
        [x, y], cost, updates=[(p, p - lr * g) for p, g in zip(params, grads)], mode=mode
    )
    predict = theano_dag.function([x], tt.argmax(probs, axis=1), mode=mode)
    print(f"{name}: compiled in {time.perf_counter() - t0:.2f} s")
    rng = np.random.default_rng(0)
    targets = one_hot(y_train)
    for epoch in range(epochs):
        order = rng.permutation(len(x_train))
        losses = [
            step(x_train[idx], targets[idx])
            for idx in np.array_split(order, max(1, len(order) // batch))
        ]
        if epoch % max(1, epochs // 5) == 0 or epoch == epochs - 1:
            print(f"  epoch {epoch:3d}  loss {np.mean(losses):.4f}")
    accuracy = float(np.mean(predict(x_test) == y_test))
    print(f"  test accuracy {accuracy:.3f}")
    return accuracy


def main(epochs=30, mode=None):
    data = load_digits()
    rng = np.random.default_rng(42)
    x, y = tt.dmatrix("x"), tt.dmatrix("y")

    w = theano_dag.shared(np.zeros((64, 10)), name="w")
    b = theano_dag.shared(np.zeros(10), name="b")
    acc_lr = train(
        "logistic regression",
        [w, b],
        nnet.softmax(tt.dot(x, w) + b),
        x,
        y,
        data,
        0.5,
        epochs,
        mode=mode,
    )

    w1 = theano_dag.shared(rng.normal(0, 0.1, (64, 64)), name="w1")
    b1 = theano_dag.shared(np.zeros(64), name="b1")
    w2 = theano_dag.shared(rng.normal(0, 0.1, (64, 10)), name="w2")
    b2 = theano_dag.shared(np.zeros(10), name="b2")
    hidden = nnet.relu(tt.dot(x, w1) + b1)
    acc_mlp = train(
        "2-layer MLP",
        [w1, b1, w2, b2],
        nnet.softmax(tt.dot(hidden, w2) + b2),
        x,
        y,
        data,
        0.2,
        epochs,
        mode=mode,
    )
    return acc_lr, acc_mlp


if __name__ == "__main__":
    main()
