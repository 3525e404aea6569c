"""Programs from Theano 1.1.2's loop documentation, run with only their imports changed
(``import theano`` -> ``import theano_dag as theano``, ``theano.tensor`` likewise)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

IMPORTS = """
import numpy
import numpy as np
import theano_dag as theano
import theano_dag.tensor as T
"""

PROGRAMS = {
    # Computing A**k elementwise (the loop tutorial's first example).
    "power": (
        """
        k = T.iscalar("k")
        A = T.vector("A")
        result, updates = theano.scan(fn=lambda prior_result, A: prior_result * A,
                                      outputs_info=T.ones_like(A),
                                      non_sequences=A,
                                      n_steps=k)
        final_result = result[-1]
        power = theano.function(inputs=[A, k], outputs=final_result, updates=updates)
        out = power(range(10), 2)
        """,
        lambda ns: np.testing.assert_allclose(ns["out"], np.arange(10.0) ** 2),
    ),
    # Evaluating a polynomial: two sequences of different lengths, a non-sequence.
    "polynomial": (
        """
        coefficients = theano.tensor.vector("coefficients")
        x = T.scalar("x")
        max_coefficients_supported = 10000
        full_range = theano.tensor.arange(max_coefficients_supported)
        components, updates = theano.scan(
            fn=lambda coefficient, power, free_variable: coefficient * (free_variable ** power),
            outputs_info=None,
            sequences=[coefficients, full_range],
            non_sequences=x)
        polynomial = components.sum()
        calculate_polynomial = theano.function(inputs=[coefficients, x], outputs=polynomial)
        test_coefficients = numpy.asarray([1, 0, 2], dtype=numpy.float32)
        test_value = 3
        out = calculate_polynomial(test_coefficients, test_value)
        """,
        lambda ns: np.testing.assert_allclose(ns["out"], 19.0),
    ),
    # A cumulative sum over arange (the scan reference's accumulate_by_adding).
    "cumulative_sum": (
        """
        up_to = T.iscalar("up_to")
        def accumulate_by_adding(arange_val, sum_to_date):
            return sum_to_date + arange_val
        seq = T.arange(up_to)
        outputs_info = T.as_tensor_variable(np.asarray(0, seq.dtype))
        scan_result, scan_updates = theano.scan(fn=accumulate_by_adding,
                                                outputs_info=outputs_info,
                                                sequences=seq)
        triangular_sequence = theano.function(inputs=[up_to], outputs=scan_result)
        out = triangular_sequence(15)
        """,
        lambda ns: np.testing.assert_array_equal(ns["out"], np.cumsum(np.arange(15))),
    ),
    # tanh(x(t).dot(W) + b) over the rows of X, then the recurrent version with P[::-1].
    "rnn": (
        """
        X = T.matrix("X")
        W = T.matrix("W")
        b_sym = T.vector("b_sym")
        results, updates = theano.scan(lambda v: T.tanh(T.dot(v, W) + b_sym), sequences=X)
        compute_elementwise = theano.function(inputs=[X, W, b_sym], outputs=results)
        x = np.eye(2, dtype=theano.config.floatX)
        w = np.ones((2, 2), dtype=theano.config.floatX)
        b = np.ones((2), dtype=theano.config.floatX)
        b[1] = 2
        out = compute_elementwise(x, w, b)

        Y = T.matrix("Y")
        U = T.matrix("U")
        V = T.matrix("V")
        P = T.matrix("P")
        results, updates = theano.scan(
            lambda y, p, x_tm1: T.tanh(T.dot(x_tm1, W) + T.dot(y, U) + T.dot(p, V)),
            sequences=[Y, P[::-1]], outputs_info=[X])
        compute_seq = theano.function(inputs=[X, W, Y, U, P, V], outputs=results)
        x2 = np.zeros((2), dtype=theano.config.floatX)
        x2[1] = 1
        y = np.ones((5, 2), dtype=theano.config.floatX)
        y[0, :] = -3
        u = np.ones((2, 2), dtype=theano.config.floatX)
        p = np.ones((5, 2), dtype=theano.config.floatX)
        p[0, :] = 3
        v = np.ones((2, 2), dtype=theano.config.floatX)
        out2 = compute_seq(x2.reshape(1, 2), w, y, u, p, v)
        """,
        lambda ns: _check_rnn(ns),
    ),
    # A loop ended by `until` (theano.scan_module.until), and reduce/map.
    "until_reduce_map": (
        """
        def power_of_2(previous_power, max_value):
            return previous_power * 2, theano.scan_module.until(previous_power * 2 > max_value)
        max_value = T.scalar()
        values, _ = theano.scan(power_of_2, outputs_info=T.constant(1.),
                                non_sequences=max_value, n_steps=1024)
        f = theano.function([max_value], values)
        out = f(45)

        v = T.vector("v")
        total, _ = theano.reduce(lambda x, acc: acc + x, v, T.constant(0.0, dtype=v.dtype))
        squares, _ = theano.map(lambda x: x * x, v)
        g = theano.function([v], [total, squares])
        out2 = g([1.0, 2.0, 3.0])
        """,
        lambda ns: (
            np.testing.assert_allclose(ns["out"], [2, 4, 8, 16, 32, 64]),
            np.testing.assert_allclose(ns["out2"][0], 6.0),
            np.testing.assert_allclose(ns["out2"][1], [1, 4, 9]),
        ),
    ),
}


def _check_rnn(ns):
    x, w, b = ns["x"], ns["w"], ns["b"]
    np.testing.assert_allclose(ns["out"], np.tanh(x.dot(w) + b), rtol=1e-6)
    y, u, p, v = ns["y"], ns["u"], ns["p"], ns["v"]
    h = ns["x2"][None, :]
    want = []
    for t in range(5):
        h = np.tanh(h.dot(w) + y[t].dot(u) + p[4 - t].dot(v))
        want.append(h)
    np.testing.assert_allclose(ns["out2"], np.array(want), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_theano_doc_program_runs_with_imports_changed(name):
    source, check = PROGRAMS[name]
    ns: dict = {}
    exec(compile(IMPORTS + textwrap.dedent(source), f"<theano doc: {name}>", "exec"), ns)
    check(ns)
