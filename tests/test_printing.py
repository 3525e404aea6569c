"""theano_dag.printing: debugprint golden output, pprint, DOT text, deep graphs."""

import io
import sys
import types

import numpy as np
import pytest

import theano_dag.tensor as tt
from theano_dag.compile import Mode, function
from theano_dag.compile.builders import OpFromGraph
from theano_dag.graph.basic import Apply, Constant
from theano_dag.graph.fg import FunctionGraph
from theano_dag.graph.op import Op
from theano_dag.graph.type import Generic
from theano_dag.printing import (
    char_from_number,
    debugprint,
    hex_digest,
    min_informative_str,
    pprint,
    pydot_source,
    pydotprint,
    register_pprint,
    var_descriptor,
)
from theano_dag.scan import scan

g = Generic()


class Named(Op):
    """A toy op printed as ``name``; ``nout`` outputs."""

    __props__ = ("name", "nout")

    def __init__(self, name, nout=1):
        self.name = name
        self.nout = nout

    def __str__(self):
        return self.name.capitalize()

    def make_node(self, *xs):
        return Apply(self, list(xs), [g() for _ in range(self.nout)])

    def perform(self, node, inputs, out):
        for cell in out:
            cell[0] = inputs[0]


add, mul, neg, exp, sub, pw = (Named(n) for n in ("add", "mul", "neg", "exp", "sub", "pow"))
split = Named("split", nout=2)


def test_debugprint_golden_variable():
    x, y, z = g("x"), g("y"), g("z")
    s = add(x, y)
    out = mul(s, exp(s), z)
    out.name = "out"
    assert debugprint(out, file="str") == (
        "Mul [id A] 'out'\n"
        " |Add [id B]\n"
        " | |x [id C]\n"
        " | |y [id D]\n"
        " |Exp [id E]\n"
        " | |Add [id B]\n"
        " |z [id F]"
    )


def test_debugprint_golden_function_with_order_and_types():
    x, y = g("x"), g("y")
    a, b = split(x)
    f = function([x, y], [add(a, y), neg(b)], mode=Mode(linker="py", optimizer=None))
    assert debugprint(f, file="str", print_type=True) == (
        "Add [id A] <Generic> 1\n"
        " |Split.0 [id B] <Generic> 0\n"
        " | |x [id C] <Generic>\n"
        " |y [id D] <Generic>\n"
        "Neg [id E] <Generic> 2\n"
        " |Split.1 [id B] <Generic> 0"
    )


def test_debugprint_ids_depth_and_file():
    x = g("x")
    v = neg(exp(x))
    assert debugprint(v, file="str", ids="") == "Neg\n |Exp\n   |x"
    assert debugprint(v, file="str", ids="int", depth=2) == "Neg [id 0]\n |Exp [id 1]"
    buf = io.StringIO()
    assert debugprint([v, x], file=buf) is buf
    assert buf.getvalue() == "Neg [id A]\n |Exp [id B]\n   |x [id C]\nx [id C]\n"
    with pytest.raises(TypeError, match="debugprint cannot print an object of type int"):
        debugprint(3)
    with pytest.raises(ValueError, match="ids must be 'CHAR', 'int', 'id' or ''"):
        debugprint(v, ids="hex")


def test_debugprint_stdout(capsys):
    q = g("q")
    debugprint(FunctionGraph([q], [neg(q)], clone=False))
    assert capsys.readouterr().out.startswith("Neg [id A] 0\n |q [id B]")


def test_char_from_number():
    assert [char_from_number(n) for n in (0, 2, 25, 26, 52, 701)] == [
        "A",
        "C",
        "Z",
        "BA",
        "CA",
        "BAZ",
    ]


def test_pprint_falls_back_to_calls():
    x, y = g("x"), g("y")
    a, b = split(x)
    assert pprint(add(exp(x), b)) == "Add(Exp(x), Split(x)[1])"
    assert pprint([x, neg(y)]) == "x\nNeg(y)"


def _vectors():
    from theano_dag.tensor.type import TensorType

    return [TensorType("float64", shape=(None,))(n) for n in "xyz"]


def _infix_cases():
    from theano_dag.tensor import math as tm

    return [
        (lambda x, y, z: (x + y) * tm.exp(z), "(x + y) * exp(z)"),
        (lambda x, y, z: x + y * z, "x + y * z"),
        (lambda x, y, z: x - (y - z), "x - (y - z)"),
        (lambda x, y, z: x - y - z, "x - y - z"),
        (lambda x, y, z: x + (y + z), "x + y + z"),
        (lambda x, y, z: x / (y * z), "x / (y * z)"),
        (lambda x, y, z: (x**y) ** z, "(x ** y) ** z"),
        (lambda x, y, z: x ** (y**z), "x ** y ** z"),
        (lambda x, y, z: -(x + y), "-(x + y)"),
        (lambda x, y, z: -x < 2.5, "-x < 2.5"),
        (lambda x, y, z: x * 2, "x * 2"),
        (lambda x, y, z: tm.maximum(x, y) // 3, "maximum(x, y) // 3"),
    ]


@pytest.mark.parametrize("case", range(12))
def test_pprint_infix(case):
    build, text = _infix_cases()[case]
    assert pprint(build(*_vectors())) == text


def test_pprint_tensor_reductions_and_transpose():
    from theano_dag.tensor import math as tm
    from theano_dag.tensor.type import TensorType

    x, y, _ = _vectors()
    m = TensorType("float64", shape=(None, None))("m")
    assert pprint(m.T + 1) == "m.T + 1"
    text = pprint(tm.sum(x * y))
    assert text.endswith("(x * y)") and not text.startswith("add")


def test_register_pprint():
    class Dot(Op):
        __props__ = ()

        def make_node(self, a, b):
            return Apply(self, [a, b], [a.type()])

    register_pprint(Dot, lambda node, args: (f"{args[0][0]} @ {args[1][0]}", 20))
    x, y, z = _vectors()
    assert pprint(Dot()(x, y) + z) == "x @ y + z"


def test_deep_chain_prints_without_recursion():
    x = g("x")
    v = x
    for _ in range(5000):
        v = neg(v)
    text = debugprint(v, file="str")
    assert text.count("\n") == 5000 and text.endswith("  |x [id " + char_from_number(5000) + "]")
    assert pprint(v) == "Neg(" * 5000 + "x" + ")" * 5000
    v = _vectors()[0]
    for _ in range(5000):
        v = -v
    assert pprint(v) == "-" * 5000 + "x"
    dot = pydot_source(v)
    assert dot.count("->") == 5001


def test_pydot_source_golden():
    x, y = g("x"), g("y")
    c = Constant(g, 2, name="two")
    out = mul(add(x, y), c)
    out.name = "r"
    assert pydot_source(out) == (
        "digraph G {\n"
        '  n0 [label="x", shape=box, style=filled, fillcolor=limegreen];\n'
        '  n1 [label="y", shape=box, style=filled, fillcolor=limegreen];\n'
        '  n2 [label="Add 0", shape=ellipse];\n'
        '  n3 [label="two", shape=box, style=filled, fillcolor=lightgrey];\n'
        '  n4 [label="Mul 1", shape=ellipse];\n'
        '  n5 [label="output 0 r", shape=box, style=filled, fillcolor=dodgerblue];\n'
        '  n0 -> n2 [label="0"];\n'
        '  n1 -> n2 [label="1"];\n'
        '  n2 -> n4 [label="0"];\n'
        '  n3 -> n4 [label="1"];\n'
        "  n4 -> n5;\n"
        "}"
    )


def test_pydotprint_without_graphviz(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(ImportError, match=r"pip install '\.\[graphviz\]'"):
        pydotprint(neg(g("x")))


def test_pydotprint_renders_with_graphviz(monkeypatch, tmp_path):
    calls = []

    class Source:
        def __init__(self, text):
            self.text = text

        def render(self, filename, format, cleanup):
            calls.append((self.text, filename, format, cleanup))
            return f"{filename}.{format}"

    fake = types.SimpleNamespace(Source=Source, ExecutableNotFound=RuntimeError)
    monkeypatch.setitem(sys.modules, "graphviz", fake)
    out = pydotprint(neg(g("x")), outfile=str(tmp_path / "graph.svg"))
    assert out == str(tmp_path / "graph.svg")
    text, filename, fmt, cleanup = calls[0]
    assert text.startswith("digraph G {") and '"Neg 0"' in text
    assert (filename, fmt, cleanup) == (str(tmp_path / "graph"), "svg", True)
    pydotprint(neg(g("x")), outfile=str(tmp_path / "graph"), format="pdf")
    assert calls[1][1:3] == (str(tmp_path / "graph"), "pdf")


def test_debugprint_golden_tensor_function():
    from theano_dag.tensor import math as tm

    x, y, _ = _vectors()
    f = function([x, y], [(x + y) * tm.exp(x), x], mode="PerformOnly")
    assert debugprint(f, file="str") == (
        "Elemwise{mul,no_inplace} [id A] 2\n"
        " |Elemwise{add,no_inplace} [id B] 0\n"
        " | |x [id C]\n"
        " | |y [id D]\n"
        " |Elemwise{exp,no_inplace} [id E] 1\n"
        "   |x [id C]\n"
        "DeepCopyOp [id F] 'x' 3\n"
        " |x [id C]"
    )


def test_min_informative_str_stops_at_names():
    a, b, d, e = (tt.matrix(n) for n in "ABDE")
    c = a + b
    c.name = "C"
    g = c + (d + e)
    assert min_informative_str(g) == (
        "A. Elemwise{add,no_inplace}\n B. C\n C. Elemwise{add,no_inplace}\n  D. D\n  E. E"
    )


def test_hex_digest_and_var_descriptor_tell_layouts_and_graphs_apart():
    x = np.arange(6.0)
    assert hex_digest(x) == hex_digest(x.copy())
    assert hex_digest(x) != hex_digest(x.reshape(2, 3))
    assert hex_digest(x.reshape(2, 3)) != hex_digest(x.reshape(3, 2).T.copy())
    with pytest.raises(TypeError):
        hex_digest([1.0])
    a, b = tt.dvectors("a", "b")
    assert var_descriptor(a + b) == var_descriptor(a + b)
    assert var_descriptor(a + b) != var_descriptor(b + a)
    named = a + b
    named.name = "s"  # a name on an intermediate variable does not hide its graph
    assert var_descriptor(named) == var_descriptor(a + b)


def test_pprint_writes_indexing_as_python_does():
    """Theano's pprint of Subtensor and the advanced indexings: ``x[1:, i]``."""
    x, i = tt.dmatrix("x"), tt.lscalar("i")
    v = tt.dvector()
    cases = [
        (x[1], "x[1]"),
        (x[1:], "x[1:]"),
        (x[:, 1], "x[:, 1]"),
        (x[::-1], "x[::-1]"),
        (x[i:2, i], "x[i:2, i]"),
        (x[1:][0], "x[1:][0]"),
        ((x + 1)[0], "(x + 1)[0]"),
        (tt.exp(x[:, 0]), "exp(x[:, 0])"),
        (x[x > 0], "x[x > 0]"),
        (v[1], "<TensorType(float64, vector)>[1]"),
    ]
    for var, text in cases:
        assert pprint(var) == text
    rows = tt.lvector("rows")
    assert pprint(x[rows]) == "x[rows]"


def test_debugprint_links_inner_inputs_to_the_outer_ones():
    """Theano's ``-> [id X]``: each input of an inner graph (a scan's step, an
    OpFromGraph) names the outer variable it is fed."""

    a, b = tt.dscalar("a"), tt.dscalar("b")
    op = OpFromGraph([a, b], [a * b + 1])
    y = tt.dscalar("y")
    text = debugprint(op(y, y * 2), file="str")
    outer, inner = text.split("\nInner graphs:\n")
    assert outer.splitlines() == [
        "OpFromGraph{} [id A]",
        " |y [id B]",
        " |Elemwise{mul,no_inplace} [id C]",
        "   |y [id B]",
        "   |2 [id D]",
    ]
    assert " > | |a [id G] -> [id B]" in inner and " > | |b [id H] -> [id C]" in inner

    coefficients, x = tt.dvector("coefficients"), tt.dscalar("x")
    terms, _ = scan(
        lambda c, power, free: c * free**power,
        sequences=[coefficients, tt.arange(10)],
        non_sequences=x,
    )
    outer, inner = debugprint(terms, file="str").split("\nInner graphs:\n")

    def id_of(text, line_start):
        (line,) = [ln for ln in text.splitlines() if ln.lstrip(" |>").startswith(line_start)]
        return line.split("[id ")[1].split("]")[0]

    # the inner inputs: the rows of the sequences' slices (Subtensor{:int64:}), and x
    slices = [ln.split("[id ")[1][:-1] for ln in outer.splitlines() if "{:int64:}" in ln]
    assert len(slices) == 2
    assert inner.count("->") == 3
    assert f"coefficients[t] [id {id_of(inner, 'coefficients[t]')}] -> [id {slices[0]}]" in inner
    assert f"-> [id {slices[1]}]" in inner
    assert f"x [id {id_of(inner, 'x [id')}] -> [id {id_of(outer, 'x [id')}]" in inner
