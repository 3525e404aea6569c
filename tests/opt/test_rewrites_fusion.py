"""Elementwise fusion and fused reductions."""

import numpy as np
import pytest
from engine_modes import ENGINES, rewritten_mode  # the engines, fast_run on each

import theano_dag.scalar as ts
import theano_dag.tensor as tt
from theano_dag.compile.function import function
from theano_dag.graph.basic import io_toposort
from theano_dag.graph.fg import FunctionGraph
from theano_dag.opt.rewrites import fusion
from theano_dag.opt.rewrites.fusion import FusionOptimizer
from theano_dag.printing import debugprint
from theano_dag.scalar import Composite
from theano_dag.tensor.elemwise import Elemwise, Sum
from theano_dag.tensor.fused import FusedReduce

from .rewrite_helpers import apply_dbs, check, fgraph_values

rng = np.random.default_rng(11)


def fuse(fg, max_inputs=32):
    FusionOptimizer(max_inputs).optimize(fg)
    return fg


def composites(fg):
    return [
        n
        for n in fg.apply_nodes
        if isinstance(n.op, Elemwise) and isinstance(n.op.scalar_op, Composite)
    ]


def test_a_tree_becomes_one_loop():
    x, y, z = (tt.dvector(n) for n in "xyz")
    fg = check(
        [x, y, z], [tt.exp(x) * y + tt.sin(z)], None, [rng.normal(size=4) for _ in range(3)], fuse
    )
    assert len(fg.apply_nodes) == 1
    assert debugprint(fg, file="str") == (
        "Elemwise{Composite{add(mul(exp(i0), i1), sin(i2))},no_inplace} [id A] 0\n"
        " |x [id B]\n"
        " |y [id C]\n"
        " |z [id D]"
    )


def test_shared_subexpression_inside_a_group():
    x = tt.dvector("x")
    e = tt.exp(x)
    fg = check([x], [tt.sin(e) + tt.cos(e)], None, [rng.normal(size=3)], fuse)
    assert len(fg.apply_nodes) == 1  # exp's two uses are both in the group


def test_a_value_used_outside_is_not_fused_away():
    x, y = tt.dvector("x"), tt.dvector("y")
    e = tt.exp(x)
    fg = check([x, y], [e * y + 1, e], None, [rng.normal(size=3)] * 2, fuse)
    assert fg.outputs[1].owner.op == tt.exp
    assert len(composites(fg)) == 1


def test_no_fusion_across_broadcast_patterns():
    # exp of a row feeding a matrix loop would be recomputed for every line: not fused
    r, m = tt.drow("r"), tt.dmatrix("m")
    fg = check(
        [r, m], [tt.exp(r) + m * 2], None, [rng.normal(size=(1, 3)), rng.normal(size=(2, 3))], fuse
    )
    assert any(n.op == tt.exp for n in fg.apply_nodes)


def test_constants_are_inlined():
    x = tt.dvector("x")
    fg = fuse(FunctionGraph([x], [(x + 1.5) * 2]))
    (node,) = fg.apply_nodes
    assert node.inputs == fg.inputs


@pytest.mark.parametrize("max_inputs", [3, 8])
def test_max_inputs(max_inputs):
    xs = [tt.dvector(f"x{k}") for k in range(20)]
    out = xs[0]
    for v in xs[1:]:
        out = tt.exp(out) + v
    args = [rng.normal(size=2) * 0.1 for _ in xs]
    fg = check(xs, [out], None, args, lambda fg: fuse(fg, max_inputs))
    comps = composites(fg)
    assert comps and all(len(n.inputs) <= max_inputs for n in comps)
    assert len(fg.apply_nodes) < 20


def test_nested_composites_inline():
    x, y = tt.dvector("x"), tt.dvector("y")
    inner = Elemwise(Composite(*_scalar_graph()))(x, y)
    fg = check([x, y], [tt.exp(inner) + x], None, [rng.normal(size=3)] * 2, fuse)
    assert len(fg.apply_nodes) == 1


def _scalar_graph():
    from theano_dag import scalar as ts

    a, b = ts.float64("a"), ts.float64("b")
    return [a, b], [a * b + 1]


def test_fused_reduce():
    x, y = tt.dmatrix("x"), tt.dmatrix("y")
    args = [rng.normal(size=(2, 3)), rng.normal(size=(2, 3))]
    fg = check(
        [x, y],
        [tt.sum(tt.exp(x) * y, axis=1), tt.max(x + y)],
        None,
        args,
        lambda fg: apply_dbs(fg, "elemwise_fusion", "fused_reduce"),
    )
    ops = [o.owner.op for o in fg.outputs]
    assert all(isinstance(op, FusedReduce) for op in ops) and len(fg.apply_nodes) == 2
    assert isinstance(ops[0].reduce_op, Sum) and ops[0].reduce_op.axis == (1,)
    assert str(ops[1]) == "FusedReduce{Max, add}"


def test_no_fused_reduce_when_the_elementwise_result_is_used_elsewhere():
    x = tt.dmatrix("x")
    e = tt.exp(x)
    fg = apply_dbs(FunctionGraph([x], [tt.sum(e), e]), "elemwise_fusion", "fused_reduce")
    assert not any(isinstance(n.op, FusedReduce) for n in fg.apply_nodes)
    np.testing.assert_allclose(fgraph_values(fg, [np.ones((1, 2))])[0], 2 * np.e)


def test_fusion_is_excluded_with_its_tag():
    x, y = tt.dvector("x"), tt.dvector("y")
    from theano_dag.opt import Query, optdb

    fg = FunctionGraph([x, y], [tt.exp(x) * y])
    optdb.query(Query(include=["fast_run"], exclude=["fusion"])).optimize(fg)
    assert not composites(fg) and len(fg.apply_nodes) == 2


def test_composite_text_of_a_long_chain():
    # The text is written out in linear time; it reads as the nested expression.
    from theano_dag import scalar as ts
    from theano_dag.scalar import Composite

    x, y = ts.float64("x"), ts.float64("y")
    e = x
    for k in range(3000):
        e = ts.sin(e) * y if k % 2 else ts.cos(e) + 1.5
    c = Composite([x, y], [e, x])
    text = str(c)
    assert text.startswith("Composite{mul(sin(add(cos(")
    assert text.endswith("i1), i0}")
    assert text.count("(") == text.count(")") == 2 * 3000  # two ops per step
    # Shared subexpressions are written out each time, as before.
    a = ts.exp(x)
    assert str(Composite([x], [a * a, a])) == "Composite{mul(exp(i0), exp(i0)), exp(i0)}"


def test_composite_text_of_values_read_more_than_once_names_them():
    # Written as one expression, x * x repeated 14 times holds 2**14 reads of x (and
    # tanh(h * h + h) repeated, 3 per step: a 22-step chain took 14 s to fuse, 40 steps
    # would take years). Such a text names each node's value once, in the graph's order.
    x = ts.float64("x")
    squares, other = x, x
    for k in range(14):
        squares = squares * squares
        other = other * other if k < 13 else other + other
    c = Composite([x], [squares])
    assert str(c) == "Composite{" + "; ".join(
        ["t0 = mul(i0, i0)", *[f"t{k} = mul(t{k - 1}, t{k - 1})" for k in range(1, 14)], "t13"]
    ) + "}"  # fmt: skip
    assert c == Composite([x], [squares]) and hash(c) == hash(Composite([x], [squares]))
    assert c != Composite([x], [other]) and c != Composite([x], [squares * 1.5])
    assert float(c.compute([np.float64(1.0001)], ["float64"])[0]) == pytest.approx(
        1.0001 ** (2**14), rel=1e-12
    )

    v = tt.dvector("v")
    h = v
    for _ in range(30):
        h = tt.tanh(h * h + h) * 0.5
    f = function([v], h)
    (node,) = f.maker.fgraph.apply_nodes
    assert len(str(node.op)) < 100 * 30  # a few terms per step
    values = np.linspace(-1, 1, 7)
    want = values
    for _ in range(30):
        want = np.tanh(want * want + want) * 0.5
    np.testing.assert_allclose(f(values), want, rtol=1e-13)


def test_composite_without_copy_keeps_the_graph():
    from theano_dag import scalar as ts
    from theano_dag.scalar import Composite

    x = ts.float64("x")
    out = ts.exp(x) + 1
    c = Composite([x], [out], copy=False)
    assert c.inputs[0] is x and c.outputs[0] is out
    assert c == Composite([x], [out])


def test_complex_nodes_stay_out_of_a_real_loop():
    # A complex value has no C type: fused with the real chain before it, the whole loop
    # would run in numpy. The real chain is one loop of its own; the complex ops stay apart.
    x, z = tt.dvector("x"), tt.zvector("z")
    vals = [rng.normal(size=4), rng.normal(size=4) + 1j * rng.normal(size=4)]
    fg = check([x, z], [tt.real(z * tt.exp(x * 2 + 1))], None, vals, fuse)
    (loop,) = composites(fg)
    assert loop.inputs == [x] and loop.outputs[0].type.dtype == "float64"
    assert sorted(str(n.op.scalar_op) for n in fg.apply_nodes if n is not loop) == ["mul", "real"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_composites_unread_outputs_are_not_computed(engine, dtype):
    # local_useless_composite: Elemwise{Composite{f, g, h}} with only g read is made
    # again as Elemwise{Composite{g}}; with all read, it stays
    s, t = ts.get_scalar_type(dtype)("s"), ts.get_scalar_type(dtype)("t")
    comp = Composite([s, t], [s + t, ts.exp(s) * t, s - t])
    x, y = tt.vector("x", dtype=dtype), tt.vector("y", dtype=dtype)
    outs = Elemwise(comp)(x, y)
    f = function([x, y], outs[1], mode=rewritten_mode(engine))
    nodes = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Elemwise)]
    assert [len(n.outputs) for n in nodes] == [1]
    assert nodes[0].op.scalar_op.nout == 1
    xv, yv = np.array([0.5, -1.0, 2.0], dtype=dtype), np.array([3.0, 0.25, -2.0], dtype=dtype)
    got = f(xv, yv)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, np.exp(xv) * yv, rtol=1e-6 if dtype == "float32" else 1e-14)
    fg = FunctionGraph([x, y], list(outs), clone=True)
    apply_dbs(fg, "useless")
    assert [len(n.outputs) for n in fg.apply_nodes] == [3]


def test_the_composites_scalar_nodes_have_the_tensor_nodes_dtypes():
    # Fusion makes the scalar node of each fused op itself (the tensor node's dtypes
    # say what ScalarOp.make_node would): mixed dtypes keep each step's dtype, and the
    # values are numpy's.
    x, i, b = tt.fvector("x"), tt.bvector("i"), tt.dvector("b")
    out = tt.exp(i) * x + tt.cast(i * 2, "float32") - b
    fg = fuse(FunctionGraph([x, i, b], [out], clone=True))
    (node,) = composites(fg)
    comp = node.op.scalar_op
    made = {str(n.op): n.outputs[0].type.dtype for n in comp.nodes}
    assert made["exp"] == str(tt.exp(i).dtype) and made["sub"] == out.dtype == "float64"
    vals = [rng.normal(size=5).astype("float32"), np.arange(5, dtype="int8"), rng.normal(size=5)]
    (got,) = fgraph_values(fg, vals)
    xv, iv, bv = vals
    e = np.exp(iv.astype(made["exp"]))  # numpy's exp of int8 would be float16
    want = (e * xv + (iv * 2).astype("float32")).astype("float32") - bv
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (unfused,) = fgraph_values(FunctionGraph([x, i, b], [out], clone=True), vals)
    np.testing.assert_array_equal(got, unfused)
    assert got.dtype == np.float64


def test_a_scalar_op_with_its_own_make_node_is_asked_for_its_node():
    made = []

    class Twice(ts.UnaryScalarOp):
        nfunc_spec = None

        def impl(self, v):
            return 2 * v

        def make_node(self, *inputs):
            made.append(inputs)
            return super().make_node(*inputs)

        def c_code(self, node, name, inputs, outputs, sub):
            return f"{outputs[0]} = 2 * {inputs[0]};"

    twice = Elemwise(Twice(ts.upgrade_to_float, name="twice"))
    x = tt.dvector("x")
    fg = fuse(FunctionGraph([x], [twice(tt.exp(x)) + 1], clone=True))
    assert len(composites(fg)) == 1
    ((arg,),) = made  # fusion's call, on the composite's scalar variable
    assert isinstance(arg.type, ts.ScalarType)
    (got,) = fgraph_values(fg, [np.arange(3.0)])
    np.testing.assert_allclose(got, 2 * np.exp(np.arange(3.0)) + 1)


def _random_dag(seed, n_nodes=120, max_inputs=31):
    """A random elementwise DAG (values with several uses, constants, a row broadcast
    into matrices, an int8 matrix cast along), fused with ``max_inputs``."""
    r = np.random.default_rng(seed)
    xs = [tt.dmatrix("a"), tt.dmatrix("b"), tt.drow("c"), tt.bmatrix("i")]
    vs = list(xs)
    unary = [tt.exp, tt.sin, tt.neg, tt.sqr, lambda v: v * 2.5, lambda v: v + 1, tt.tanh]
    binary = [tt.add, tt.mul, tt.sub, tt.maximum]
    for _ in range(n_nodes):
        lo = max(0, len(vs) - 12)  # a window: nearby values get several uses
        if r.random() < 0.4:
            vs.append(unary[r.integers(len(unary))](vs[r.integers(lo, len(vs))]))
        else:
            a, b = vs[r.integers(lo, len(vs))], vs[r.integers(lo, len(vs))]
            vs.append(binary[r.integers(len(binary))](a, b))
    used = {id(i) for v in vs if v.owner is not None for i in v.owner.inputs}
    outs = [v for v in vs[len(xs) :] if id(v) not in used]
    return fuse(FunctionGraph(xs, outs, clone=True), max_inputs)


@pytest.mark.parametrize("seed", range(6))
def test_fusion_makes_each_composite_as_the_generic_constructor(seed):
    # Fusion hands Composite its scalar graph with the nodes already in order (made
    # walking from the root, inputs left to right): the order, the text and the C code
    # are those of a composite that copies and sorts the same graph itself.

    fg = _random_dag(seed, max_inputs=31 if seed % 2 else 4)
    comps = [n.op.scalar_op for n in composites(fg)]
    assert len(comps) > 5
    for c in comps:
        assert c.nodes == io_toposort(c.inputs, c.outputs)
        again = Composite(c.inputs, c.outputs)
        assert again == c and hash(again) == hash(c) and again.name == c.name
        names = [f"x{k}" for k in range(c.nin)]
        assert again.c_code_statements(names) == c.c_code_statements(names)


@pytest.mark.parametrize("seed", range(4))
def test_nodes_that_stay_alone_are_skipped_without_changing_the_groups(seed, monkeypatch):
    # A node none of whose inputs it could absorb is passed over before a group is
    # made for it; asking _grow anyway gives the same graph.
    def described(fg):
        return [(debugprint(o, file="str"), [str(n.op) for n in fg.toposort()]) for o in fg.outputs]

    fast = described(_random_dag(seed, max_inputs=3 + seed))
    monkeypatch.setattr(fusion, "_takes_an_input", lambda root, clients, memo: True)
    assert described(_random_dag(seed, max_inputs=3 + seed)) == fast


def test_composite_text_reads_as_the_expression():
    # The text is the nested expression, constants and inputs included, each shared
    # subexpression written where it is used, whichever way it is made.
    def text(v, names):
        if v in names:
            return names[v]
        if v.owner is None:
            return str(v.data.item())
        return f"{v.owner.op}({', '.join(text(i, names) for i in v.owner.inputs)})"

    r = np.random.default_rng(3)
    # Small graphs (written node by node) and long ones (written from the outputs down),
    # the long ones a chain taking inputs along (their text stays short enough).
    for n_nodes, shared in [(12, True)] * 20 + [(150, False)] * 3:
        ins = [ts.float64(f"s{k}") for k in range(3)]
        vs = list(ins)
        for _ in range(n_nodes):
            a = vs[r.integers(len(vs))] if shared else vs[-1]
            b = vs[r.integers(len(vs))] if shared else ins[r.integers(3)]
            pick = r.integers(4)
            vs.append([ts.exp(a), a * b, a + 1.5, ts.maximum(a, b)][pick])
        outs = [vs[-1], vs[-3], ins[1]]
        c = Composite(ins, outs)
        assert (len(c.nodes) > 64) == (not shared)
        names = {v: f"i{k}" for k, v in enumerate(c.inputs)}
        assert c._text == ", ".join(text(o, names) for o in c.outputs)


def test_composite_takes_the_sorted_nodes_of_a_graph_it_does_not_copy():
    x, y = ts.float64("x"), ts.float64("y")
    out = ts.exp(x) * y + 1
    nodes = [out.owner.inputs[0].owner.inputs[0].owner, out.owner.inputs[0].owner, out.owner]
    c = Composite([x, y], [out], copy=False, nodes=nodes)
    assert c.nodes == nodes and c == Composite([x, y], [out])
    # A copied graph is sorted again: the nodes given are not its nodes.
    assert Composite([x, y], [out], nodes=nodes).nodes[2] is not out.owner
