"""OpGraph <-> FunctionGraph: compiled OpGraphs agree with the numpy reference evaluator."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theano_dag import function
from theano_dag import tensor as tt
from theano_dag.formats import convert, detect_format, to_dot
from theano_dag.formats.opgraph import (
    Add,
    Chip,
    Cholesky,
    Division,
    EigenSolve,
    ElementwiseMultiplication,
    MatrixMultiply,
    Multiplication,
    OpGraph,
    Permute,
    Pow,
    Reshape,
    Scale,
    Slice,
    Subtraction,
    Tensor,
    UnsupportedOperationError,
    evaluate,
    fgraph_to_opgraph,
    opgraph_to_fgraph,
)
from theano_dag.graph.basic import Constant, graph_inputs
from theano_dag.graph.fg import FunctionGraph
from theano_dag.tensor.contractions import Einsum, einsum
from theano_dag.tensor.linalg import cholesky, eigh, generalized_eigh
from theano_dag.tensor.math import Dot
from theano_dag.tensor.shape import reshape

rng = np.random.default_rng(5)


def build(nodes, edges):
    g = OpGraph()
    for node in nodes:
        g.add_node(node)
    for src, dst, labels in edges:
        g.add_edge(src, dst, labels)
    return g


def spd(n):
    x = rng.standard_normal((n, n))
    return x @ x.T + n * np.eye(n)


def run(fg, args):
    return function(fg.inputs, fg.outputs, on_unused_input="ignore")(*args)


def check_compiled(g, arrays, atol=1e-10):
    """Compile ``g`` through opgraph_to_fgraph and compare every sink with evaluate()."""
    fg = opgraph_to_fgraph(g)
    want = evaluate(g, dict(zip(g.sources(), arrays)))
    got = run(fg, arrays)
    for t, value in zip(g.sinks(), got):
        np.testing.assert_allclose(value, want[t], atol=atol)
    return fg


# -- the design's examples, compiled ------------------------------------------------------------


def test_a_plus_b():
    g = build([Tensor("A"), Tensor("B"), Add(), Tensor("C")],
              [(0, 2, "i,j"), (1, 2, "i,j"), (2, 3, "i,j")])  # fmt: skip
    fg = check_compiled(g, [rng.random((2, 3)), rng.random((2, 3))])
    assert [v.name for v in fg.inputs] == ["A", "B"] and fg.outputs[0].name == "C"
    assert str(fg) == "FunctionGraph(Elemwise{add,no_inplace}(A, B))"


def test_pow_a_2():
    g = build([Tensor("A"), Pow(2), Tensor("C")], [(0, 1, "i,j"), (1, 2, "i,j")])
    check_compiled(g, [rng.standard_normal((3, 4))])


def test_a_used_four_times():
    nodes = [
        Tensor("A"), Tensor("B"), Cholesky(), Tensor("L"), EigenSolve(), Tensor("v"),
        Tensor("lambda"), Slice((0, 0), (10, 10)), Tensor("a10_10"), Pow(2), Tensor("a2"),
    ]  # fmt: skip
    edges = [
        (0, 2, "i,j"), (2, 3, "i,j"), (0, 4, "i,j"), (1, 4, "i,j"), (4, 5, "i,j"), (4, 6, "j"),
        (0, 7, "i,j"), (7, 8, "i,j"), (0, 9, "i,j"), (9, 10, "i,j"),
    ]  # fmt: skip
    g = build(nodes, edges)
    fg = check_compiled(g, [spd(12), spd(12)], atol=1e-8)
    assert fg.clients[fg.inputs[0]].__len__() == 4


def test_two_outputs():
    nodes = [Tensor("a"), Tensor("b"), Multiplication(), Tensor("c"), Tensor("b"), Division(),
             Tensor("d")]  # fmt: skip
    edges = [(0, 2, "i,j,k"), (1, 2, "i,j,k"), (2, 3, "i,j,k"), (0, 5, "i,j,k"), (4, 5, "i,j,k"),
             (5, 6, "i,j,k")]  # fmt: skip
    g = build(nodes, edges)
    b = rng.uniform(1, 2, (2, 3, 4))
    fg = check_compiled(g, [rng.standard_normal((2, 3, 4)), b, b])
    assert [v.name for v in fg.outputs] == ["c", "d"]


# -- every operation ----------------------------------------------------------------------------


def unary(op, a, out, shape=None):
    return build([Tensor("X", shape), op, Tensor("Y")], [(0, 1, a), (1, 2, out)])


def binary(op, a, b, out):
    return build([Tensor("A"), Tensor("B"), op, Tensor("C")], [(0, 2, a), (1, 2, b), (2, 3, out)])


@pytest.mark.parametrize(
    "g, shapes, op_types",
    [
        (binary(Multiplication(), "i,k", "k,j", "i,j"), [(2, 3), (3, 4)], {Dot}),
        (binary(Multiplication(), "k,i", "j,k", "j,i"), [(3, 2), (4, 3)], {Dot}),
        (binary(Multiplication(), "i,k", "k", "i"), [(2, 3), (3,)], {Dot}),
        (binary(Multiplication(), "k", "k", ""), [(3,), (3,)], {Dot}),
        (binary(Multiplication(), "i", "j", "i,j"), [(2,), (3,)], {Einsum}),
        (binary(Multiplication(), "i,j", "i,j", ""), [(2, 3), (2, 3)], {Einsum}),
        (binary(Multiplication(), "i,j,k", "k,j", "i"), [(2, 3, 4), (4, 3)], {Einsum}),
        (unary(Multiplication(), "i,i", ""), [(3, 3)], {Einsum}),
        (unary(Multiplication(), "i,j,k", "k,i,j"), [(2, 3, 4)], set()),
        (binary(MatrixMultiply(), "i,k", "k,j", "i,j"), [(2, 3), (3, 4)], {Dot}),
        (binary(Add(), "i,j", "j,i", "i,j"), [(2, 3), (3, 2)], set()),
        (binary(Subtraction(), "i,j", "j,i", "j,i"), [(2, 3), (3, 2)], set()),
        (binary(ElementwiseMultiplication(), "i", "i", "i"), [(3,), (3,)], set()),
        (unary(Scale(-2.5), "i,j", "j,i"), [(2, 3)], set()),
        (unary(Pow(-1), "i", "i"), [(3,)], set()),
        (unary(Permute(), "i,j,k", "k,i,j"), [(2, 3, 4)], set()),
        (unary(Slice((1, 0, 2), (3, None, 5)), "i,j,k", "k,i,j"), [(4, 5, 6)], set()),
        (unary(Reshape((20, -1)), "i,j,k", "a,b"), [(4, 5, 6)], set()),
        (unary(Chip(1, 3), "i,j,k", "k,i"), [(4, 5, 6)], set()),
        (unary(Cholesky(), "i,j", "j,i"), [None], set()),
    ],
)
def test_each_operation_compiles(g, shapes, op_types):
    arrays = [spd(4) if s is None else rng.uniform(0.5, 2, s) for s in shapes]
    fg = check_compiled(g, arrays)
    found = {type(n.op) for n in fg.apply_nodes}
    assert op_types <= found
    if not op_types:
        assert not found & {Dot, Einsum}


def test_eigen_solve_with_transposed_vectors():
    g = build([Tensor("A"), EigenSolve(), Tensor("vT"), Tensor("w")],
              [(0, 1, "i,j"), (1, 2, "j,i"), (1, 3, "j")])  # fmt: skip
    check_compiled(g, [spd(5)])


def test_inputs_outputs_dtype_and_constants():
    g = build([Tensor("A"), Tensor("K", value=np.full((2, 2), 3, dtype="int32")), Add(),
               Tensor("C")], [(0, 2, "i,j"), (1, 2, "i,j"), (2, 3, "i,j")])  # fmt: skip
    fg = opgraph_to_fgraph(g, dtype="float32")
    assert [v.dtype for v in fg.inputs] == ["float32", "int32"]
    fg = opgraph_to_fgraph(g, inputs=[0], dtype="float32")
    assert [v.name for v in fg.inputs] == ["A"]
    (out,) = run(fg, [np.ones((2, 2), "float32")])
    np.testing.assert_array_equal(out, np.full((2, 2), 4.0))
    g2 = build([Tensor("A"), Tensor("B"), Add(), Tensor("C")],
               [(0, 2, "i"), (1, 2, "i"), (2, 3, "i")])  # fmt: skip
    with pytest.raises(ValueError, match=r"source tensor node 1 \(B\) is no input and has no"):
        opgraph_to_fgraph(g2, inputs=[0])
    with pytest.raises(ValueError, match=r"input node 2 \(Add\) is not a source tensor"):
        opgraph_to_fgraph(g2, inputs=[2])


def test_convert_registers_opgraph():
    g = binary(Add(), "i", "i", "i")
    assert detect_format(g) == "opgraph"
    fg = convert(g, to="fgraph")
    assert isinstance(fg, FunctionGraph)
    dag = convert(g, to="dag")
    assert [e["fn"] for e in dag.values()] == [n.op for n in fg.toposort()]
    assert to_dot(g) == g.to_dot("G")
    back = convert(fg, to="opgraph")
    assert [n.label() for n in back.nodes()] == ["A", "B", "Add", "C"]


# -- FunctionGraph -> OpGraph ---------------------------------------------------------------------


def check_to_opgraph(inputs, outputs, arrays, atol=1e-10):
    fg = FunctionGraph(inputs, outputs, clone=False)
    g, ins, outs = fgraph_to_opgraph(fg)
    got = evaluate(g, dict(zip(ins, arrays)))
    for t, want in zip(outs, run(fg, arrays)):
        np.testing.assert_allclose(got[t], want, atol=atol)
    return g, ins, outs


def test_fgraph_to_opgraph_operations():
    # static shapes: adding or dropping dimensions becomes a Reshape, which needs them
    a, b = tt.TensorType("float64", shape=(3, 3))("a"), tt.TensorType("float64", shape=(3, 3))("b")
    v = tt.TensorType("float64", shape=(3,))("v")
    eye3 = tt.constant(3 * np.eye(3))
    outs = [
        a + b.T, (a - b) * a / b, a * 2.5, 3 * a, a**2, tt.dot(a, b), tt.dot(a, v), tt.dot(v, a),
        tt.dot(v, v), einsum("ij,jk->ki", a, b), a[1:, :2], a[2], a[1:, 0], a.T,
        a.dimshuffle(0, "x", 1), v.dimshuffle("x", 0), cholesky(a @ a.T + eye3),
        *eigh(a + a.T), *generalized_eigh(a + a.T, b @ b.T + eye3),
        reshape(a, (9,)), a[:],
    ]  # fmt: skip
    g, _, _ = check_to_opgraph([a, b, v], outs, [rng.random((3, 3)), rng.random((3, 3)) + 1,
                                           rng.random(3)], atol=1e-8)  # fmt: skip
    labels = {n.label() for n in g.nodes() if not n.is_tensor}
    assert {
        "Add",
        "Subtraction",
        "Division",
        "Scale(2.5)",
        "Scale(3)",
        "Pow(2)",
        "Permute",
        "Multiplication",
        "Cholesky",
        "EigenSolve",
        "Chip(0, 2)",
        "Reshape((9,))",
    } <= labels


def test_fgraph_to_opgraph_inputs_as_outputs_and_constants():
    a = tt.dvector("a")
    c = tt.constant(np.array([1.0, 2.0]))
    g, ins, outs = check_to_opgraph([a], [a + c, a, c], [np.array([3.0, 4.0])])
    assert outs[1] == ins[0] and g.sources() == (ins[0], outs[2])
    np.testing.assert_array_equal(g.node(outs[2]).value, [1.0, 2.0])


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda a: tt.exp(a), "Elemwise{exp,no_inplace} has no OpGraph operation$"),
        (
            lambda a: a + tt.constant(np.arange(3.0)),
            r"Elemwise{add,no_inplace} has no OpGraph operation \(broadcasting\)",
        ),
        (lambda a: a[::-1], r"Subtensor{::int64} has no OpGraph operation \(negative bound or"),
        (lambda a: a[tt.lscalar("i")], r"Subtensor{int64} has no OpGraph operation \(symbolic"),
        (lambda a: a.sum(axis=0), r"Sum{axis=\(0,\)} has no OpGraph operation"),
        (
            lambda a: a.dimshuffle(0, "x", 1),
            r"InplaceDimShuffle{0,x,1} has no OpGraph operation "
            r"\(adds or drops dimensions of unknown length\)",
        ),
    ],
)
def test_fgraph_to_opgraph_unsupported(make, why):
    a = tt.dmatrix("a")
    out = make(a)
    fg = FunctionGraph(
        [
            a,
            *[
                v
                for v in graph_inputs([out])
                if v is not a and v.owner is None and not isinstance(v, Constant)
            ],
        ],
        [out],
        clone=False,
    )
    with pytest.raises(UnsupportedOperationError, match="fgraph_to_opgraph: " + why):
        fgraph_to_opgraph(fg)
    with pytest.raises(TypeError, match="needs a FunctionGraph, got OpGraph"):
        fgraph_to_opgraph(OpGraph())


# -- random contractions: OpGraph -> FunctionGraph -> OpGraph -------------------------------------


@st.composite
def multiplications(draw):
    modes = "ijkl"
    sizes = {m: draw(st.integers(1, 3)) for m in modes}
    ins = [draw(st.lists(st.sampled_from(modes), min_size=1, max_size=3, unique=True))
           for _ in range(draw(st.integers(1, 3)))]  # fmt: skip
    used = sorted({m for t in ins for m in t})
    out = draw(st.permutations(used).map(lambda p: p[: draw(st.integers(0, len(p)))]))
    nodes = [Tensor(f"T{k}") for k in range(len(ins))] + [Multiplication(), Tensor("out")]
    op = len(ins)
    edges = [(k, op, ",".join(t)) for k, t in enumerate(ins)] + [(op, op + 1, ",".join(out))]
    arrays = [rng.standard_normal([sizes[m] for m in t]) for t in ins]
    return build(nodes, edges), arrays


@settings(max_examples=25, deadline=None)
@given(multiplications())
def test_random_multiplications_compile_and_come_back(case):
    g, arrays = case
    fg = check_compiled(g, arrays)
    back, ins, outs = fgraph_to_opgraph(fg)
    got = evaluate(back, dict(zip(ins, arrays)))
    np.testing.assert_allclose(
        got[outs[0]], evaluate(g, dict(zip(g.sources(), arrays)))[g.sinks()[0]], atol=1e-10
    )
