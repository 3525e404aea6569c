"""``ExternalCOp``: an Op whose C code is in files with ``#section`` markers (Theano's),
compiled by the CPU engine: the function-call and code-section forms, the macros, paths
relative to the op's module, and files refused with the reason."""

from __future__ import annotations

import numpy as np
import pytest

import theano_dag
import theano_dag.tensor as tt
from theano_dag.compat import gof
from theano_dag.compile.mode import Mode
from theano_dag.config import config
from theano_dag.graph.basic import Apply
from theano_dag.graph.op import ExternalCOp
from theano_dag.scalar.basic import upcast

pytestmark = pytest.mark.skipif(not config.cxx, reason="ExternalCOp needs a C compiler")


class ScaledDifference(ExternalCOp):
    """``a - 2 * b`` by a function of the file, called with the inputs and the output."""

    __props__ = ()

    def __init__(self):
        super().__init__("external_cop/scaled_difference.c", "APPLY_SPECIFIC(scaled_difference)")

    def make_node(self, a, b):
        a, b = tt.as_tensor_variable(a), tt.as_tensor_variable(b)
        return Apply(self, [a, b], [tt.TensorType(upcast(a.dtype, b.dtype), shape=(None,))()])


class PlusOne(ExternalCOp):
    """``x + 1`` by the file's ``code`` section (its FAIL, INPUT_0, OUTPUT_0 macros)."""

    __props__ = ()

    def __init__(self):
        super().__init__(["external_cop/plus_one_code.c"])

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])


@pytest.mark.parametrize("mode", [None, Mode(linker="py"), "FAST_COMPILE"])
def test_a_function_of_the_file_computes_the_op(mode):
    a, b = tt.dvector("a"), tt.fvector("b")
    f = theano_dag.function([a, b], ScaledDifference()(a, b), mode=mode)
    av, bv = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, -1.0], dtype="float32")
    out = f(av, bv)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, av - 2 * bv.astype("float64"))
    # strided inputs: the code reads them by PyArray_GETPTR1
    np.testing.assert_array_equal(f(np.arange(6.0)[::2], bv), np.arange(6.0)[::2] - 2 * bv)
    with pytest.raises(ValueError, match="scaled_difference: lengths 2 and 3 differ"):
        f(np.ones(2), bv)


def test_the_code_section_with_fail_and_the_io_macros():
    x = tt.fvector("x")
    f = theano_dag.function([x], PlusOne()(x) * 2)
    np.testing.assert_allclose(f(np.array([0.0, 1.5], dtype="float32")), [2.0, 5.0])
    with pytest.raises(ValueError, match="plus_one: a negative value"):
        f(np.array([1.0, -1.0], dtype="float32"))
    op = PlusOne()
    assert set(op.code_sections) == {"init_code", "code", "code_cleanup"}
    node = op(x).owner
    source = op.c_code(node, "node_PlusOne", ["V1"], ["V2"], {"fail": "goto fail;"})
    for line in ("#define INPUT_0 V1", "#define OUTPUT_0 V2", "#define FAIL goto fail;"):
        assert line in source
    assert "#define DTYPE_INPUT_0 npy_float32" in source and "#undef APPLY_SPECIFIC" in source


def _op_of(tmp_path, *texts, func_name=None):
    paths = []
    for i, text in enumerate(texts):
        path = tmp_path / f"part{i}.c"
        path.write_text(text)
        paths.append(str(path))  # absolute: taken as they are
    return ExternalCOp(paths, func_name)


def test_later_files_add_to_the_sections_and_the_version_follows_the_text(tmp_path):
    op = _op_of(tmp_path, "#section support_code\nint a;\n", "#section support_code\nint b;\n")
    assert op.c_support_code().split() == ["int", "a;", "int", "b;"]
    other = _op_of(tmp_path, "#section support_code\nint c;\n")
    assert op.c_code_cache_version() != other.c_code_cache_version()
    old = _op_of(tmp_path, "THEANO_SUPPORT_CODE_SECTION\nint d;\nTHEANO_APPLY_CODE_SECTION\nint e;")
    assert "int d;" in old.code_sections["support_code"]
    assert "int e;" in old.code_sections["support_code_apply"]


@pytest.mark.parametrize(
    "text, func_name, error, message",
    [
        ("int x;\n#section code\n;", None, ValueError, "code before the first #section"),
        ("#section kernels\n;", None, ValueError, "unknown section 'kernels'"),
        ("int x;", None, ValueError, "no '#section <name>' marker"),
        ("#section support_code_struct\nint s;", None, NotImplementedError, "per-function"),
        ("#section code\n;", "f", ValueError, "a 'code' section and func_name='f'"),
        (
            "#section code\n;\nTHEANO_APPLY_CODE_SECTION\n",
            None,
            ValueError,
            "both #section markers and the old",
        ),
    ],
)
def test_a_file_that_cannot_be_read_is_refused_with_the_reason(
    tmp_path, text, func_name, error, message
):
    with pytest.raises(error, match=message):
        _op_of(tmp_path, text, func_name=func_name)


def test_relative_paths_are_read_from_the_directory_of_the_ops_module():
    path = ScaledDifference.get_path("external_cop/scaled_difference.c")
    assert path.endswith("tests/graph/external_cop/scaled_difference.c")
    assert ScaledDifference.get_path("/abs/f.c") == "/abs/f.c"


def test_theano_1_0s_gof_cop_is_the_op_with_code_in_files():
    # Theano 1.0's theano.gof.COp took the files (theano-pymc renamed it ExternalCOp).
    class Twice(gof.COp):
        __props__ = ()

        def __init__(self):
            gof.COp.__init__(self, ["external_cop/scaled_difference.c"],
                             "APPLY_SPECIFIC(scaled_difference)")  # fmt: skip

        def make_node(self, a):
            a = tt.as_tensor_variable(a)
            return Apply(self, [a, tt.zeros_like(a) - a], [a.type()])

    assert gof.COp is ExternalCOp
    a = tt.dvector("a")
    np.testing.assert_array_equal(Twice()(a).eval({a: np.array([1.0, 2.0])}), [3.0, 6.0])
