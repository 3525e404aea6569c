"""``Op``: what an Apply node computes (``theano.graph.op``).

An Op is one small class: ``make_node`` builds the Apply, ``perform`` computes in
Python, ``infer_shape`` gives output shapes, ``grad``/``L_op`` give gradients, and
``__props__`` gives equality so merge can recognise the same computation twice.
Engines keep their own implementations elsewhere, keyed by Op class.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import pdb
import pickle
import re
import sys
import warnings
from copy import deepcopy

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Apply, NoParams, Variable
from theano_dag.graph.type import Type
from theano_dag.graph.utils import MetaObject, MethodNotDefined, TestValueError, add_tag_trace

__all__ = [
    "Op",
    "PureOp",
    "COp",
    "ExternalCOp",
    "FromFunctionOp",
    "as_op",
    "compute_test_value",
    "register_c_runner",
    "get_test_value",
    "get_test_values",
]


def compute_test_value(node: Apply) -> None:
    """Run ``node`` on its inputs' test values and store ``tag.test_value`` on its outputs.

    What ``Op.__call__`` does when ``config.compute_test_value`` is not ``"off"``: an
    input without a test value raises ValueError (``"raise"``) or warns and skips the
    node (``"warn"``).

    >>> from theano_dag.graph.type import Generic
    >>> @as_op([Generic()], [Generic()])
    ... def inc(v):
    ...     return v + 1
    >>> x = Generic()("x")
    >>> x.tag.test_value = 41
    >>> y = inc(x)
    >>> compute_test_value(y.owner)
    >>> y.get_test_value()
    42
    """
    storage_map: dict = {}
    compute_map: dict = {}
    # An input the op destroys gets a copy: its test value belongs to its variable.
    destroyed = {i for positions in getattr(node.op, "destroy_map", {}).values() for i in positions}
    for i, inp in enumerate(node.inputs):
        try:
            value = inp.get_test_value()
            storage_map[inp] = [deepcopy(value) if i in destroyed else value]
        except TestValueError:
            msg = (
                f"Cannot compute test value: input {i} ({inp}) of Op {node.op} "
                "missing default value"
            )
            action = config.compute_test_value
            if action == "ignore":
                return
            if action == "warn":
                warnings.warn(msg, stacklevel=3)
                return
            raise ValueError(msg) from None
        compute_map[inp] = [True]
    for out in node.outputs:
        storage_map[out] = [None]
        compute_map[out] = [False]
    thunk = node.op.make_thunk(node, storage_map, compute_map, no_recycling=[])
    thunk()
    for out in node.outputs:
        if not compute_map[out][0]:
            raise ValueError(f"{node.op} did not compute output {out.index} for its test value")
        out.tag.test_value = storage_map[out][0]


def get_test_value(v):
    """The test value of ``v``: its ``tag.test_value`` (TestValueError when it has none),
    a constant's data, a shared variable's value; of a list or tuple (a shape of scalar
    variables), the list or tuple of its items' test values; anything else as it is.

    >>> from theano_dag.graph.type import Generic
    >>> x = Generic()("x")
    >>> x.tag.test_value = 3
    >>> get_test_value((x, 2))
    (3, 2)
    """
    if isinstance(v, (list, tuple)):
        return type(v)(get_test_value(item) for item in v)
    if not isinstance(v, Variable):
        return v
    if hasattr(v, "data"):  # a Constant
        return v.data
    if hasattr(v, "get_value") and not hasattr(v.tag, "test_value"):
        return v.get_value(borrow=True)
    return v.get_test_value()


def get_test_values(*args) -> list:
    """``[tuple of the test values of args]`` (``[value]`` for one argument) when
    ``config.compute_test_value`` is on and every argument has one; ``[]`` when it is
    off, or when one is missing and it is ``"ignore"`` or ``"warn"`` (which warns);
    ``"raise"`` raises TestValueError (Theano's helper: ``for x_val, in
    get_test_values(x)`` runs its body only when the values exist).

    >>> from theano_dag.graph.type import Generic
    >>> x = Generic()("x")
    >>> x.tag.test_value = 3
    >>> get_test_values(x)
    []
    >>> with config.change_flags(compute_test_value="ignore"):
    ...     get_test_values(x, 4)
    [(3, 4)]
    """
    action = config.compute_test_value
    if action == "off":
        return []
    values = []
    for i, arg in enumerate(args):
        try:
            values.append(get_test_value(arg))
        except TestValueError:
            msg = f"Argument {i} ({arg}) has no test value"
            if action == "warn":
                warnings.warn(msg, stacklevel=2)
            elif action == "raise":
                raise TestValueError(msg) from None
            elif action == "pdb":
                pdb.post_mortem(sys.exc_info()[2])
            return []
    return values if len(values) == 1 else [tuple(values)]


class Op(MetaObject):
    """Base class of all operations.

    ``destroy_map`` maps an output index to the input indices it overwrites;
    ``view_map`` maps an output index to the input indices it aliases.

    >>> from theano_dag.graph.type import Generic
    >>> class Double(Op):
    ...     __props__ = ()
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [Generic()()])
    ...     def perform(self, node, inputs, output_storage):
    ...         output_storage[0][0] = 2 * inputs[0]
    >>> x = Generic()("x")
    >>> y = Double()(x)
    >>> y.owner.op, y.owner.inputs
    (Double, [x])
    """

    default_output = None
    destroy_map: dict = {}
    view_map: dict = {}
    # Whether the op reads a None given for an input whose type has no None among its
    # values (Theano passes a caller's None through: ``default`` picks its other input,
    # ``eye`` reads a missing M as numpy does); a call giving None to an input that an
    # op without it reads is refused, naming the input.
    takes_none: bool = False

    def make_node(self, *inputs) -> Apply:
        """Build the Apply node of this op on ``inputs``.

        The default uses ``self.itypes``/``self.otypes`` when the op defines them.
        """
        itypes = getattr(self, "itypes", None)
        otypes = getattr(self, "otypes", None)
        if itypes is None or otypes is None:
            raise NotImplementedError(f"{type(self).__name__} must define make_node")
        if len(inputs) != len(itypes):
            raise ValueError(f"{self} expects {len(itypes)} inputs, got {len(inputs)}")
        # Theano's ``tt.dmatrix`` is a type; ours is a constructor: take what it makes.
        itypes = [t if isinstance(t, Type) else t().type for t in itypes]
        checked = []
        for k, (inp, t) in enumerate(zip(inputs, itypes)):
            if not isinstance(inp, Variable) or inp.type != t:
                try:
                    inp = t.filter_variable(inp)
                except TypeError as e:
                    raise TypeError(f"{self}: input {k} should be of type {t}: {e}") from None
            checked.append(inp)
        return Apply(self, checked, [t() for t in otypes])

    def __call__(self, *inputs, return_list=False, **kwargs):
        """Make the Apply node and return its default output (or all outputs)."""
        node = self.make_node(*inputs, **kwargs) if kwargs else self.make_node(*inputs)
        add_tag_trace(node.outputs, config.traceback__limit, 1)  # 1: this frame
        if config.compute_test_value != "off":
            compute_test_value(node)
        if self.default_output is not None:
            rval = node.outputs[self.default_output]
            return [rval] if return_list else rval
        if return_list:
            return list(node.outputs)
        if len(node.outputs) == 1:
            return node.outputs[0]
        return node.outputs

    def __ne__(self, other):
        return not (self == other)

    def perform(self, node, inputs, output_storage, params=None):
        """Compute the outputs: write ``output_storage[i][0]`` for each output ``i``.

        An op with ``c_code`` and no ``perform`` runs its C code, built as a ``COp``'s
        (Theano 1.0's ``Op`` had the C hooks, and its C linker compiled such ops)."""
        if callable(getattr(self, "c_code", None)) and _C_RUNNER[0] is not None:
            _C_RUNNER[0](self, node)(inputs, output_storage)
            return
        raise MethodNotDefined(f"{type(self).__name__}.perform is not implemented")

    def infer_shape(self, fgraph, node, input_shapes):
        """Return one shape tuple per output, from the input shapes."""
        raise MethodNotDefined(f"{type(self).__name__}.infer_shape is not implemented")

    def grad(self, inputs, output_grads):
        """Return the gradient with respect to each input (symbolic)."""
        raise MethodNotDefined(f"{type(self).__name__}.grad is not implemented")

    def L_op(self, inputs, outputs, output_grads):
        """Left-multiply the Jacobian by ``output_grads``; defaults to ``grad``."""
        return self.grad(inputs, output_grads)

    def R_op(self, inputs, eval_points):
        """Right-multiply the Jacobian by ``eval_points``."""
        raise MethodNotDefined(f"{type(self).__name__}.R_op is not implemented")

    def connection_pattern(self, node):
        """``pattern[i][o]``: whether output ``o`` depends on input ``i`` (all True here)."""
        return [[True] * len(node.outputs) for _ in node.inputs]

    def do_constant_folding(self, fgraph, node) -> bool:
        """Whether constant folding may compute this node at compile time."""
        return True

    def get_params(self, node):
        """Return the params ``perform`` gets for ``node``; by default the op has none."""
        raise MethodNotDefined("get_params")

    def prepare_node(self, node, storage_map, compute_map, impl):
        """Hook called once before a thunk for ``node`` is made."""

    def make_py_thunk(self, node, storage_map, compute_map, no_recycling, debug=False):
        """Return a callable that runs ``perform`` on the node's storage cells.

        ``storage_map`` maps each variable to its one-element list; ``compute_map``
        (may be None) maps each variable to a one-element list of "is computed".
        """
        node_in = [storage_map[r] for r in node.inputs]
        node_out = [storage_map[r] for r in node.outputs]
        perform = getattr(self, "debug_perform", self.perform) if debug else self.perform
        params = node.run_params()
        # Only outputs are marked: the inputs were computed before this thunk runs.
        out_flags = [compute_map[o] for o in node.outputs] if compute_map is not None else []

        if params is NoParams:

            def thunk():
                r = perform(node, [x[0] for x in node_in], node_out)
                for flag in out_flags:
                    flag[0] = True
                return r

        else:
            params_type = node.params_type
            if params_type is not None:
                params = params_type.filter(params)

            def thunk():
                r = perform(node, [x[0] for x in node_in], node_out, params)
                for flag in out_flags:
                    flag[0] = True
                return r

        thunk.inputs, thunk.outputs, thunk.perform = node_in, node_out, perform
        thunk.lazy = False
        return thunk

    def make_thunk(self, node, storage_map, compute_map, no_recycling, impl=None):
        """Return a zero-argument callable that computes ``node`` (the Python one here)."""
        self.prepare_node(node, storage_map, compute_map, impl)
        return self.make_py_thunk(node, storage_map, compute_map, no_recycling)


PureOp = Op

# What builds a COp's C code into something callable: set by the CPU engine
# (theano_dag.engines.cpu.native.cop), which owns the compiler and its cache.
_C_RUNNER: list = [None]


def register_c_runner(make_runner):
    """Make ``make_runner(op, node)`` the builder of COps' C code: it returns a callable
    ``run(input_values, output_storage)`` (the CPU engine registers its own)."""
    _C_RUNNER[0] = make_runner


class COp(Op):
    """An Op whose computation is C code (Theano's ``COp``), with no ``perform`` needed.

    Subclasses write ``c_code(node, name, inputs, outputs, sub)``: C statements over the
    variables named in ``inputs``/``outputs`` (``PyArrayObject*`` for tensors, the
    outputs holding the previous value or NULL, to be set to a new reference) that jump
    to ``sub["fail"]`` on error after setting a Python exception. ``c_support_code``,
    ``c_support_code_apply``, ``c_init_code``, ``c_init_code_apply``, ``c_headers``,
    ``c_header_dirs``, ``c_libraries``, ``c_lib_dirs``, ``c_compile_args``,
    ``c_code_cleanup`` and ``c_code_cache_version`` are Theano's hooks. The code is
    compiled as C (C17, with ``stdbool.h``), where Theano compiled C++. The CPU engine
    compiles the code with its compiler and cache (one library per op and input types)
    and every engine runs it through ``perform``.
    """

    def c_code(self, node, name, inputs, outputs, sub):
        raise MethodNotDefined(f"{type(self).__name__}.c_code is not implemented")

    def c_code_cleanup(self, node, name, inputs, outputs, sub):
        return ""

    def c_support_code(self, **kwargs):
        return ""

    def c_support_code_apply(self, node, name):
        return ""

    def c_init_code(self, **kwargs):
        """C statements run once when the compiled code is loaded (Theano's hook)."""
        return []

    def c_init_code_apply(self, node, name):
        """C statements for this node run once when its code is loaded."""
        return ""

    def c_headers(self, **kwargs):
        return []

    def c_header_dirs(self, **kwargs):
        return []

    def c_libraries(self, **kwargs):
        return []

    def c_lib_dirs(self, **kwargs):
        return []

    def c_compile_args(self, **kwargs):
        return []

    def c_code_cache_version(self):
        return ()

    def perform(self, node, inputs, output_storage, params=None):
        """Run the C code (a subclass may give a Python ``perform`` of its own; engines
        still run the C code, as Theano's C linkers did)."""
        self._run_c(node, inputs, output_storage)

    def _run_c(self, node, inputs, output_storage):
        if _C_RUNNER[0] is None:
            raise MethodNotDefined(
                f"{type(self).__name__} has only C code and no C compiler is registered "
                "(import theano_dag.engines.cpu, which compile does)"
            )
        # The builder keeps what it built (by op and input types): nothing is stored on
        # the node, so graphs holding COps still pickle.
        _C_RUNNER[0](self, node)(inputs, output_storage)

    def _has_c_code(self):
        return type(self).c_code is not COp.c_code

    def make_py_thunk(self, node, storage_map, compute_map, no_recycling, debug=False):
        """A thunk running the C code on the node's cells (whatever ``perform`` is); a
        COp with no ``c_code`` runs its ``perform``, as Theano falls back to Python."""
        if _C_RUNNER[0] is None or not self._has_c_code():
            return super().make_py_thunk(node, storage_map, compute_map, no_recycling, debug)
        run = _C_RUNNER[0](self, node)
        node_in = [storage_map[r] for r in node.inputs]
        node_out = [storage_map[r] for r in node.outputs]
        out_flags = [compute_map[o] for o in node.outputs] if compute_map is not None else []

        def thunk():
            run([x[0] for x in node_in], node_out)
            for flag in out_flags:
                flag[0] = True

        return thunk


def _c_macros(node, name, with_io=None, sub=None):
    """``(#defines, #undefs)`` of an ExternalCOp's code for ``node``: ``APPLY_SPECIFIC``,
    the dtype, typenum and itemsize of each input and output with a dtype, and with
    ``sub`` (the code sections) ``FAIL``, and ``INPUT_i``/``OUTPUT_i`` for ``with_io``."""
    defs = []
    variables = [(f"INPUT_{i}", v) for i, v in enumerate(node.inputs)]
    variables += [(f"OUTPUT_{i}", v) for i, v in enumerate(node.outputs)]
    for label, v in variables:
        dtype = getattr(v.type, "dtype", None)
        if dtype is None:
            continue
        d = np.dtype(dtype)
        defs += [
            (f"DTYPE_{label}", f"npy_{d.name}"),
            (f"TYPENUM_{label}", str(d.num)),
            (f"ITEMSIZE_{label}", str(d.itemsize)),
        ]
    defs.append(("APPLY_SPECIFIC(str)", f"str##_{name}"))
    if sub is not None:
        defs.append(("FAIL", sub["fail"]))
    if with_io is not None:
        inputs, outputs = with_io
        defs += [(f"INPUT_{i}", v) for i, v in enumerate(inputs)]
        defs += [(f"OUTPUT_{i}", v) for i, v in enumerate(outputs)]
    define = "\n".join(f"#define {k} {v}" for k, v in defs)
    undef = "\n".join(f"#undef {k.split('(')[0]}" for k, _ in defs)
    return define, undef


class ExternalCOp(COp):
    """A COp whose C code is in files (Theano's ``ExternalCOp``): ``func_files`` (a path
    or a list of them, relative to the file of the subclass) hold sections marked
    ``#section <name>`` (``support_code``, ``support_code_apply``, ``init_code``,
    ``init_code_apply``, ``code``, ``code_cleanup``); sections of later files add to
    earlier ones. With ``func_name``, the node's code calls that function with the
    inputs and pointers to the outputs (``int f(PyArrayObject* in0, ...,
    PyArrayObject** out0, ...)``, nonzero after setting a Python exception on error);
    without, the ``code`` section is the node's code. The sections see Theano's macros:
    ``APPLY_SPECIFIC(str)``, ``DTYPE_INPUT_0``, ``TYPENUM_OUTPUT_0``,
    ``ITEMSIZE_INPUT_1``..., and in ``code``/``code_cleanup`` ``FAIL``, ``INPUT_0``,
    ``OUTPUT_0``... Theano's ``*_struct`` sections (state kept per compiled function in
    its C linker's struct) have no counterpart here: a file with one is refused.
    """

    SECTIONS = frozenset(
        {"init_code", "init_code_apply", "support_code", "support_code_apply", "code"}
        | {"code_cleanup"}
    )
    STRUCT_SECTIONS = frozenset({"init_code_struct", "support_code_struct", "cleanup_code_struct"})
    _SECTION = re.compile(r"^#section ([a-zA-Z0-9_]+)$", re.MULTILINE)
    _OLD_MARKER = re.compile(r"^THEANO_(APPLY|SUPPORT)_CODE_SECTION$", re.MULTILINE)

    @classmethod
    def get_path(cls, f):
        """``f`` made absolute from the directory of the file defining ``cls``."""
        if os.path.isabs(f):
            return f
        return os.path.realpath(os.path.join(os.path.dirname(inspect.getfile(cls)), f))

    def __init__(self, func_files, func_name=None):
        self.func_files = (
            list(func_files) if isinstance(func_files, (list, tuple)) else [func_files]
        )
        self.func_name = func_name
        self.load_c_code(self.func_files)
        if not self.code_sections:
            raise ValueError(f"{type(self).__name__}: no section is defined in {self.func_files}")
        if func_name is not None and "code" in self.code_sections:
            raise ValueError(
                f"{type(self).__name__}: a 'code' section and func_name={func_name!r} "
                "both give the node's code; keep one"
            )

    def load_c_code(self, func_files):
        """Read the sections of ``func_files`` into ``code_sections`` (name -> code)."""
        self.func_codes, self.code_sections = [], {}
        for path in (self.get_path(f) for f in func_files):
            with open(path) as f:
                text = f.read()
            self.func_codes.append(text)
            old, new = self._OLD_MARKER.search(text), self._SECTION.search(text)
            if old and new:
                raise ValueError(
                    f"{path}: both #section markers and the old THEANO_*_CODE_SECTION "
                    "markers; use one syntax"
                )
            if old:
                parts = self._OLD_MARKER.split(text)
                for kind, code in zip(parts[1::2], parts[2::2]):
                    key = "support_code_apply" if kind == "APPLY" else "support_code"
                    self.code_sections[key] = code
                continue
            if not new:
                raise ValueError(f"{path}: no '#section <name>' marker")
            parts = self._SECTION.split(text)
            if parts[0].strip():
                raise ValueError(f"{path}: code before the first #section: {parts[0].strip()!r}")
            for section, code in zip(parts[1::2], parts[2::2]):
                if section in self.STRUCT_SECTIONS:
                    raise NotImplementedError(
                        f"{path}: section {section!r} keeps state in Theano's per-function "
                        "C struct, which theano_dag's compiled ops do not have; move the "
                        "state into the node's code"
                    )
                if section not in self.SECTIONS:
                    raise ValueError(
                        f"{path}: unknown section {section!r}; expected one of "
                        f"{sorted(self.SECTIONS)}"
                    )
                self.code_sections[section] = self.code_sections.get(section, "") + code

    def c_code_cache_version(self):
        # a digest of the files, the same in every process (str hashes are salted), so the
        # compiled code is found in the cache again
        return (hashlib.sha256("\0".join(self.func_codes).encode()).hexdigest()[:16],)

    def c_support_code(self, **kwargs):
        return self.code_sections.get("support_code", "")

    def c_init_code(self, **kwargs):
        code = self.code_sections.get("init_code")
        return [code] if code else []

    def _apply_section(self, section, node, name, **macros):
        code = self.code_sections.get(section)
        if code is None:
            return ""
        define, undef = _c_macros(node, name, **macros)
        return "\n".join(["", define, code, undef])

    def c_support_code_apply(self, node, name):
        return self._apply_section("support_code_apply", node, name)

    def c_init_code_apply(self, node, name):
        return self._apply_section("init_code_apply", node, name)

    def c_code(self, node, name, inputs, outputs, sub):
        if self.func_name is not None:
            args = list(inputs) + ["NULL"] * (getattr(self, "_cop_num_inputs", 0) - len(inputs))
            outs = [f"&{o}" for o in outputs]
            outs += ["NULL"] * (getattr(self, "_cop_num_outputs", 0) - len(outputs))
            define, undef = _c_macros(node, name)
            call = f"{self.func_name}({', '.join(args + outs)})"
            return f"{define}\nif ({call} != 0) {sub['fail']}\n{undef}"
        if "code" not in self.code_sections:
            raise MethodNotDefined(f"{type(self).__name__}: no 'code' section and no func_name")
        return self._apply_section("code", node, name, with_io=(inputs, outputs), sub=sub)

    def c_code_cleanup(self, node, name, inputs, outputs, sub):
        return self._apply_section("code_cleanup", node, name, with_io=(inputs, outputs), sub=sub)


class FromFunctionOp(Op):
    """An Op that calls a plain Python function (Owl's Delay node); see ``as_op``."""

    __props__ = ("fn", "itypes", "otypes", "infer_shape_fn")

    def __init__(self, fn, itypes, otypes, infer_shape=None):
        self.fn = fn
        self.itypes = tuple(itypes)
        self.otypes = tuple(otypes)
        self.infer_shape_fn = infer_shape
        self.__name__ = getattr(fn, "__name__", "as_op")

    def __str__(self):
        return f"FromFunctionOp{{{self.__name__}}}"

    def __reduce__(self):
        # ``@as_op`` puts the op where the function was defined: pickle it by that name.
        mod = getattr(self.fn, "__module__", None)
        name = getattr(self.fn, "__qualname__", self.__name__)
        try:
            obj = _load_back(mod, name)
        except (ImportError, KeyError, AttributeError, TypeError):
            raise pickle.PicklingError(f"Can't pickle as_op(), not found as {mod}.{name}") from None
        if obj is not self:
            raise pickle.PicklingError(f"Can't pickle as_op(), not the object at {mod}.{name}")
        return _load_back, (mod, name)

    def perform(self, node, inputs, output_storage, params=None):
        outs = self.fn(*inputs)
        if len(self.otypes) == 1:
            outs = [outs]
        if len(outs) != len(self.otypes):
            raise ValueError(
                f"{self}: the function returned {len(outs)} outputs, expected "
                f"{len(self.otypes)}"
            )
        # A plain function declares no view: returned as they are, (a view of) an input
        # or another output would be taken for a fresh array, and an in-place op after
        # this one would write through it into the caller's input. Those are copied.
        arrays = [v for v in inputs if isinstance(v, np.ndarray)]
        for cell, t, val in zip(output_storage, self.otypes, outs):
            val = t.filter(val)
            if isinstance(val, np.ndarray):
                if any(np.may_share_memory(val, a) for a in arrays):
                    val = val.copy()
                arrays.append(val)
            cell[0] = val

    def infer_shape(self, fgraph, node, input_shapes):
        if self.infer_shape_fn is None:
            raise MethodNotDefined(f"{self} was built by as_op without infer_shape")
        return self.infer_shape_fn(fgraph, node, input_shapes)


def _load_back(mod, name):
    obj = importlib.import_module(mod)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def as_op(itypes, otypes, infer_shape=None):
    """Decorator: wrap a plain Python function as an Op with the given input/output types.

    >>> from theano_dag.graph.type import Generic
    >>> @as_op([Generic()], [Generic()])
    ... def shout(s):
    ...     return s.upper()
    >>> x = Generic()("x")
    >>> shout(x).owner.op
    FromFunctionOp{shout}
    """

    itypes = list(itypes) if isinstance(itypes, (list, tuple)) else [itypes]
    otypes = list(otypes) if isinstance(otypes, (list, tuple)) else [otypes]
    for which, ts in (("itypes", itypes), ("otypes", otypes)):
        bad = [t for t in ts if not isinstance(t, Type)]
        if bad:
            raise TypeError(f"as_op: {which} must be a list of Types, got {bad[0]!r}")
    if infer_shape is not None and not callable(infer_shape):
        raise TypeError("as_op: infer_shape must be callable")

    def make_op(fn):
        return FromFunctionOp(fn, itypes, otypes, infer_shape)

    return make_op
