"""Theano 1.1.2 programs built on ``theano.sparse``, run twice with only their imports
changed: once with theano-pymc, once with theano_dag. Their losses, gradients and trained
parameters must agree.

- a logistic regression on a bag-of-words CSR matrix, trained by minibatch SGD;
- a two-layer graph convolution (GCN) whose normalised adjacency is a shared CSR matrix,
  trained by full-batch SGD;
- a linear model whose CSC design matrix is built from its stored values (``CSC``), with
  the gradient of its cost in the weights, the noise scale and the stored values.
"""

import importlib

import numpy as np
import pytest
import scipy.sparse as sp


def _modules(package):
    """The modules a Theano program imports, from ``theano`` or ``theano_dag``."""
    names = {"theano": "", "T": ".tensor", "S": ".sparse"}
    return {k: importlib.import_module(package + v) for k, v in names.items()}


def bag_of_words(rng, docs=60, vocab=40):
    """Word counts (about 15% of them stored) and labels that depend on a few words."""
    counts = rng.poisson(0.17, size=(docs, vocab)).astype("float64")
    score = counts[:, :6].sum(axis=1) - counts[:, 6:12].sum(axis=1)
    labels = (score + 0.3 * rng.randn(docs) > 0).astype("float64")
    return sp.csr_matrix(counts), labels


def bow_logistic_regression(m):
    """Logistic regression on a bag-of-words CSR matrix: minibatches of 15 documents
    (row slices of the matrix), 8 SGD steps with an L2 penalty; the losses of every step,
    then the trained weights and bias."""
    T, S, theano = m["T"], m["S"], m["theano"]
    rng = np.random.RandomState(4)
    counts, labels = bag_of_words(rng)
    X, y = S.csr_matrix("X", dtype="float64"), T.dvector("y")
    w = theano.shared(0.01 * rng.randn(counts.shape[1]), name="w")
    b = theano.shared(np.float64(0.0), name="b")
    p = T.nnet.sigmoid(S.dot(X, w) + b)
    loss = T.nnet.binary_crossentropy(p, y).mean() + 1e-3 * T.sum(w**2)
    gw, gb = T.grad(loss, [w, b])
    step = theano.function([X, y], loss, updates=[(w, w - 0.5 * gw), (b, b - 0.5 * gb)])
    losses = []
    for _epoch in range(2):
        for start in range(0, 60, 15):
            rows = slice(start, start + 15)
            losses.append(step(counts[rows], labels[rows]))
    return [np.array(losses), w.get_value(), b.get_value()]


def normalised_adjacency(rng, nodes):
    """``D^-1/2 (A + I) D^-1/2`` of a random undirected graph, as CSR."""
    upper = sp.random(nodes, nodes, density=0.08, random_state=rng, format="csr")
    upper.data[:] = 1.0
    a = ((upper + upper.T) > 0).astype("float64") + sp.identity(nodes, format="csr")
    scale = sp.diags(1.0 / np.sqrt(np.asarray(a.sum(axis=1)).ravel()))
    return sp.csr_matrix(scale @ a @ scale)


def graph_convolution(m):
    """A two-layer GCN, ``softmax(A relu(A X W1) W2)``, with the normalised adjacency
    ``A`` a shared CSR matrix: 6 full-batch SGD steps of the cross-entropy on the labelled
    nodes; the losses, then the trained weights."""
    T, S, theano = m["T"], m["S"], m["theano"]
    rng = np.random.RandomState(5)
    nodes, features, hidden, classes = 40, 6, 8, 3
    adjacency = theano.shared(normalised_adjacency(rng, nodes), name="A")
    features_v = rng.randn(nodes, features)
    labels_v = rng.randint(0, classes, size=nodes).astype("int64")
    train_v = np.arange(0, nodes, 2)
    W1 = theano.shared(rng.randn(features, hidden) * 0.5, name="W1")
    W2 = theano.shared(rng.randn(hidden, classes) * 0.5, name="W2")
    X, labels, train = T.dmatrix("X"), T.lvector("labels"), T.lvector("train")
    H = T.nnet.relu(S.structured_dot(adjacency, T.dot(X, W1)))
    P = T.nnet.softmax(S.structured_dot(adjacency, T.dot(H, W2)))
    loss = T.nnet.categorical_crossentropy(P[train], labels[train]).mean()
    g1, g2 = T.grad(loss, [W1, W2])
    step = theano.function(
        [X, labels, train], loss, updates=[(W1, W1 - 0.5 * g1), (W2, W2 - 0.5 * g2)]
    )
    losses = [step(features_v, labels_v, train_v) for _ in range(6)]
    return [np.array(losses), W1.get_value(), W2.get_value()]


def sparse_design_linear_model(m):
    """A Gaussian linear model ``y ~ N(X beta, sigma^2)`` whose 50 x 12 CSC design matrix
    is built from its stored values (``CSC``): the negative log-likelihood and its
    gradient in ``beta``, ``log sigma`` and the stored values, and the (structured)
    gradient in the matrix itself."""
    T, S, theano = m["T"], m["S"], m["theano"]
    rng = np.random.RandomState(6)
    design = sp.random(50, 12, density=0.2, random_state=rng, format="csc")
    design.data[:] = rng.randn(design.nnz)
    y_v = design @ np.linspace(-1.0, 1.0, 12) + 0.1 * rng.randn(50)
    values, beta, log_sigma = T.dvector("values"), T.dvector("beta"), T.dscalar("log_sigma")
    y = T.dvector("y")
    X = S.CSC(values, design.indices, design.indptr, design.shape)
    mu = S.structured_dot(X, beta.dimshuffle(0, "x")).flatten()
    sigma = T.exp(log_sigma)
    nll = T.sum(0.5 * ((y - mu) / sigma) ** 2 + log_sigma + 0.5 * np.log(2 * np.pi))
    g_beta, g_log_sigma, g_values = T.grad(nll, [beta, log_sigma, values])
    f = theano.function([values, beta, log_sigma, y], [nll, g_beta, g_log_sigma, g_values])
    out = f(design.data, 0.3 * rng.randn(12), np.float64(-0.5), y_v)
    # the same cost with the matrix itself an input: its gradient keeps X's pattern
    Xin = S.csc_matrix("X", dtype="float64")
    mu_in = S.structured_dot(Xin, beta.dimshuffle(0, "x")).flatten()
    nll_in = T.sum(0.5 * (y - mu_in) ** 2)
    g_X = theano.function([Xin, beta, y], T.grad(nll_in, Xin))(design, np.ones(12), y_v)
    return [*out, g_X.toarray(), np.array([g_X.nnz == design.nnz, g_X.format == "csc"])]


PROGRAMS = [bow_logistic_regression, graph_convolution, sparse_design_linear_model]


@pytest.mark.parametrize("program", PROGRAMS)
def test_sparse_program_gives_theanos_results(program):
    want = program(_modules("theano"))
    got = program(_modules("theano_dag"))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


def test_programs_learn():
    # The comparison above is only worth something if the programs do real work: the
    # training losses fall, and the linear model's gradients match numpy's.
    m = _modules("theano_dag")
    lr_losses = bow_logistic_regression(m)[0]
    assert lr_losses[4:].mean() < lr_losses[:4].mean()
    gcn_losses = graph_convolution(m)[0]
    assert np.all(np.diff(gcn_losses) < 0)
    nll, g_beta, g_log_sigma, g_values, g_X, flags = sparse_design_linear_model(m)
    rng = np.random.RandomState(6)
    design = sp.random(50, 12, density=0.2, random_state=rng, format="csc")
    design.data[:] = rng.randn(design.nnz)
    y = design @ np.linspace(-1.0, 1.0, 12) + 0.1 * rng.randn(50)
    beta, sigma = 0.3 * rng.randn(12), np.exp(-0.5)
    r = (y - design @ beta) / sigma
    np.testing.assert_allclose(nll, np.sum(0.5 * r**2 - 0.5 + 0.5 * np.log(2 * np.pi)))
    np.testing.assert_allclose(g_beta, -(design.T @ r) / sigma)
    np.testing.assert_allclose(g_log_sigma, np.sum(1 - r**2))
    coo = design.tocoo()  # CSC's stored order is column by column, as coo from csc keeps it
    np.testing.assert_allclose(g_values, -r[coo.row] * beta[coo.col] / sigma)
    r1 = y - design @ np.ones(12)
    want_gx = -np.outer(r1, np.ones(12)) * (design.toarray() != 0)
    np.testing.assert_allclose(g_X, want_gx)
    assert flags.all()
