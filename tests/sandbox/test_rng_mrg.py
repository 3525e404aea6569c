"""Theano's MRG streams on MRG31k3p (``theano_dag.sandbox.rng_mrg``): the generator's
integer arithmetic against its definition as two matrix recurrences, the C loop against
numpy's, the streams' seeding and layout, the laws of the draws, and the categorical ops
made from uniforms (``theano_dag.sandbox.multinomial``) against a loop written out.
(Theano's own numbers, and L'Ecuyer's reference samples, are compared in
``tests_theano``, where theano-pymc is installed.)"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.sandbox import rng_mrg
from theano_dag.sandbox.multinomial import ChoiceFromUniform, MultinomialFromUniform
from theano_dag.sandbox.rng_mrg import MRG_RandomStreams, mrg_uniform

SEED = np.array([12345] * 6, dtype="int32")


def _states(n, seed=SEED):
    return rng_mrg.substream_states(seed, n)


def test_one_step_is_the_generators_matrix_recurrence():
    # The shifts and masks of Theano's code compute x1 <- 2**22 x1[-2] + 129 x1[-3] mod M1
    # and x2 <- 2**15 x2[-1] + 32769 x2[-3] mod M2: the matrices A1, A2 (MRG31k3p's).
    states = _states(50)
    x = np.ascontiguousarray(states.astype(np.int64).T)
    rng_mrg._advance(x)
    by_matrix = rng_mrg._jump(states, (rng_mrg._A1, rng_mrg._A2))
    np.testing.assert_array_equal(x.T, by_matrix)
    # states near the moduli (where Theano's int32 sums wrap) as well
    edge = np.array([[2147483646, 2147483646, 2147483646, 2147462578, 2147462578, 2147462578]])
    x = np.ascontiguousarray(edge.astype(np.int64).T)
    rng_mrg._advance(x)
    np.testing.assert_array_equal(x.T, rng_mrg._jump(edge, (rng_mrg._A1, rng_mrg._A2)))


def test_substreams_and_streams_are_jumps_of_two_to_the_72_and_134():
    states = _states(9)
    one = SEED
    for i in range(9):  # by doubling, the same as one jump after the other
        np.testing.assert_array_equal(states[i], one)
        one = rng_mrg.ff_2p72(one)
    # 2**134 = (2**72) ** ... : the stream jump is the substream jump squared 62 times more
    jump = rng_mrg._SUBSTREAM
    for _ in range(62):
        jump = (
            rng_mrg._matmul_mod(jump[0], jump[0], rng_mrg.M1),
            rng_mrg._matmul_mod(jump[1], jump[1], rng_mrg.M2),
        )
    assert jump == rng_mrg._STREAM
    np.testing.assert_array_equal(rng_mrg.ff_2p134(SEED), rng_mrg._jump(SEED, jump)[0])
    got = rng_mrg.multMatVect(SEED, np.array(rng_mrg._SUBSTREAM[0]), rng_mrg.M1,
                              np.array(rng_mrg._SUBSTREAM[1]), rng_mrg.M2)  # fmt: skip
    np.testing.assert_array_equal(got, rng_mrg.ff_2p72(SEED))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, streams", [(7, 3), (12, 12), (5, 20), (100, 33)])
def test_value_i_comes_from_stream_i_mod_streams_in_c_and_numpy(dtype, n, streams):
    states = _states(streams)
    new, values = rng_mrg.mrg_draw(states, n, dtype)
    # written out: one stream after the other
    x = np.ascontiguousarray(states.astype(np.int64).T)
    want = np.empty(n, dtype)
    for i in range(n):
        col = x[:, i % streams : i % streams + 1]
        col_copy = col.copy()
        want[i] = rng_mrg._unit(rng_mrg._advance(col_copy), dtype)[0]
        x[:, i % streams] = col_copy[:, 0]
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(new, x.T.astype(np.int32))
    assert values.min() > 0 and values.max() <= 1
    # the op: its C loop (the CPU engine), numpy's without a compiler, the py linker
    state = tt.constant(states)
    for flags, mode in (({}, None), ({"cxx": ""}, None), ({}, Mode(linker="py"))):
        with config.change_flags(**flags):
            new_s, u = mrg_uniform.new(state, 1, dtype, (n,))
            f = theano_dag.function([], [new_s, u], mode=mode)
            got_state, got = f()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_state, new)


def test_streams_seed_layout_and_updates():
    srng = MRG_RandomStreams(seed=234)
    assert srng.rstate.tolist() == [234] * 6
    u = srng.uniform((10, 20))
    state = u.owner.inputs[0].owner.inputs[0].owner.inputs[0]  # u * (1 - 0) + 0
    assert state.get_value().shape == (33, 6)  # 200 // 6 streams (Theano's guess)
    np.testing.assert_array_equal(state.get_value(), _states(33, np.array([234] * 6, "int32")))
    np.testing.assert_array_equal(srng.rstate, rng_mrg.ff_2p134(np.array([234] * 6, "int32")))
    assert len(srng.state_updates[0]) == 4 and srng.updates() == [srng.state_updates[0][:2]]
    h = tt.dmatrix("h")
    v = srng.uniform(h.shape, nstreams=4)
    assert v.owner.inputs[0].owner.inputs[0].owner.inputs[0].get_value().shape == (4, 6)
    f = theano_dag.function([h], [u, v])
    first = f(np.zeros((3, 2)))
    again = f(np.zeros((3, 2)))
    assert not np.array_equal(first[0], again[0])
    # the inplace pass advances the state itself: no copy per call
    ops = [n.op for n in f.maker.fgraph.apply_nodes if isinstance(n.op, mrg_uniform)]
    assert ops and all(op.inplace for op in ops)
    srng.seed()  # restart: the same draws again
    for a, b in zip(f(np.zeros((3, 2))), first):
        np.testing.assert_array_equal(a, b)
    for bad, kind in (
        (0, ValueError),
        (2**31, ValueError),
        ([0, 0, 0, 1, 1, 1], ValueError),
        ([1, 2, 3], TypeError),
    ):
        with pytest.raises(kind, match="MRG_RandomStreams: seed"):
            MRG_RandomStreams(seed=bad)
    assert MRG_RandomStreams(seed=[1, 2, 3, 4, 5, 6]).rstate.tolist() == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_laws_of_the_draws(dtype):
    srng = MRG_RandomStreams(seed=5)
    n = 20000
    f = theano_dag.function(
        [],
        [
            srng.uniform((n,), low=-1.0, high=3.0, dtype=dtype),
            srng.normal((n,), avg=1.0, std=2.0, dtype=dtype),
            srng.binomial((n,), p=0.3, dtype="int8"),
            srng.uniform((3,), dtype="float16"),
        ],
    )
    u, z, b, half = f()
    assert u.dtype == z.dtype == dtype and b.dtype == np.int8 and half.dtype == np.float16
    assert stats.kstest(u, stats.uniform(-1.0, 4.0).cdf).pvalue > 1e-3
    assert stats.kstest(z, stats.norm(1.0, 2.0).cdf).pvalue > 1e-3
    assert abs(b.mean() - 0.3) < 5 * np.sqrt(0.21 / n)
    assert ((half > 0) & (half <= 1)).all()


def _choice_loop(p, unis, n):
    """Theano's rule, written out: first column whose running sum exceeds u, that column
    set to 0 and the row renormalized after each draw."""
    p = p.astype("float64").copy()
    rows = p.shape[0]
    out = -np.ones((rows, n), dtype="int64")
    for c in range(n):
        for r in range(rows):
            running = 0.0
            for m in range(p.shape[1]):
                running += p[r, m]
                if running > unis[c * rows + r]:
                    out[r, c] = m
                    p[r, m] = 0.0
                    p[r] /= p[r].sum()
                    break
    return out


def test_multinomial_and_choice_from_uniforms_follow_the_rule():
    rng = np.random.RandomState(0)
    p = rng.dirichlet(np.ones(6), size=40)
    unis = rng.uniform(size=40 * 3)
    got = ChoiceFromUniform("int64")(p, unis, 3).eval()
    np.testing.assert_array_equal(got, _choice_loop(p, unis, 3))
    counts = MultinomialFromUniform("int64")(p, unis, 3).eval()
    want = np.zeros_like(counts)
    cum = p.cumsum(axis=1)
    for c in range(3):
        for r in range(40):
            want[r, np.argmax(cum[r] > unis[c * 40 + r])] += 1
    np.testing.assert_array_equal(counts, want)
    with pytest.raises(ValueError, match=r"12 uniforms for 40 rows and n=3; expected 120"):
        MultinomialFromUniform("int64")(p, unis[:12], 3).eval()
    # MRG streams draw them from their uniforms: the same rule on those
    srng = MRG_RandomStreams(seed=9)
    drawn = srng.choice(size=2, replace=False, p=p)
    assert drawn.owner.op == ChoiceFromUniform("int64")
    rows = drawn.eval()
    assert (np.sort(rows, axis=1)[:, 0] != np.sort(rows, axis=1)[:, 1]).all()


@pytest.mark.parametrize("flags", [{}, {"cxx": ""}], ids=["c", "numpy"])
def test_a_size_of_int32_lengths_is_read_as_such(flags):
    # PyMC3's ADVI sizes its draws by int32 scalars: the C loop reads int64 lengths, so
    # make_node casts the size (read as int64, [3, 2] in int32 was one length of 2**33 + 3)
    n, m = tt.iscalar("n"), tt.iscalar("m")
    with config.change_flags(**flags):
        u = MRG_RandomStreams(seed=2).uniform(size=tt.stack([n, m]), ndim=2)
        f = theano_dag.function([n, m], u)
        got = f(3, 2)
    (node,) = [v for v in f.maker.fgraph.apply_nodes if isinstance(v.op, mrg_uniform)]
    assert node.inputs[1].dtype == "int64"
    assert got.shape == (3, 2)
    ref = rng_mrg.mrg_draw(_states(60 * 256, np.array([2] * 6, "int32")), 6, got.dtype.name)[1]
    np.testing.assert_array_equal(got.ravel(), ref)


@pytest.mark.parametrize("flags", [{}, {"cxx": ""}], ids=["c", "numpy"])
def test_scalar_and_empty_draws(flags):
    # a size with a 0 entry draws nothing (Theano refuses it), from one stream
    with config.change_flags(**flags):
        srng = MRG_RandomStreams(seed=1)
        draws = [srng.uniform(()), srng.uniform((2, 0)), srng.normal((0,)), srng.binomial((0,))]
        got = theano_dag.function([], draws)()
    assert [g.shape for g in got] == [(), (2, 0), (0,), (0,)]
    assert 0 < float(got[0]) <= 1


def test_theanos_target_of_a_draw_is_the_cpu():
    # Theano's draws and shared variables take the device of their state (TheanoLM
    # passes target='cpu' to choice); the CPU is the only one here, and another target is
    # refused with a TypeError, as Theano without a GPU context refused it.
    p = np.array([[0.2, 0.3, 0.5], [0.5, 0.5, 0.0]])
    for draw in (
        lambda s, **k: s.uniform((3,), **k),
        lambda s, **k: s.normal((3,), **k),
        lambda s, **k: s.truncated_normal((3,), **k),
        lambda s, **k: s.binomial((3,), 1, 0.5, **k),
        lambda s, **k: s.multinomial(pvals=p, **k),
        lambda s, **k: s.choice(size=2, replace=False, p=p, **k),
    ):
        same = draw(MRG_RandomStreams(seed=4)).eval()
        np.testing.assert_array_equal(draw(MRG_RandomStreams(seed=4), target="cpu").eval(), same)
        with pytest.raises(TypeError, match="target='dev0'.*live on the CPU"):
            draw(MRG_RandomStreams(seed=4), target="dev0")
    assert theano_dag.shared(np.zeros(2), target="cpu").get_value().tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="target=None.*no GPU context"):
        theano_dag.shared(np.zeros(2), target=None)
