"""Building a ``COp``'s C code (Theano's ``c_code`` and friends) with the CPU engine's
compiler and kernel cache.

Each op and tuple of input types gets one C library: the op's headers and support
code, then a function ``td_cop_run(inputs, outputs)`` over two Python lists, in which
the op's ``c_code`` runs with Theano's substitutions (``%(x)s`` the variables,
``%(fail)s`` a jump that reports the Python exception the code set). Tensors are
``PyArrayObject*`` with ``dtype_<name>`` and ``type_num_<name>`` declared, as Theano
declares them; an output holds the previous value (or NULL) and is left holding a new
reference. The library is loaded with ``ctypes.PyDLL``, so the code runs holding the
GIL and an exception it sets is raised in Python.
"""

from __future__ import annotations

import ctypes
import dataclasses
import sysconfig
import threading

import numpy as np

from theano_dag.config import config
from theano_dag.engines.cpu.native.cc import compile_library, get_toolchain, kernel_dir
from theano_dag.graph.op import COp, register_c_runner
from theano_dag.scalar.basic import ScalarType

__all__ = ["c_source", "make_runner"]

_RUNNERS: dict = {}
_LOCK = threading.Lock()


def _hook(op, name):
    """``op``'s C hook ``name``, or ``COp``'s default where ``op`` is a plain ``Op`` with
    ``c_code`` only (Theano 1.0's ``Op`` had every hook; its C linker compiled such ops)."""
    fn = getattr(op, name, None)
    return fn if fn is not None else getattr(COp, name).__get__(op)


def _is_tensor(var) -> bool:
    return (
        getattr(var.type, "dtype", None) is not None and getattr(var.type, "ndim", None) is not None
    )


def _declare(var, cname: str, is_input: bool, j: int) -> list:
    if isinstance(var.type, ScalarType):
        # Theano's scalars are C values (``npy_int32 V1``), passed as 0-d arrays.
        dtype = np.dtype(var.type.dtype)
        lines = [f"typedef npy_{dtype.name} dtype_{cname};", f"npy_{dtype.name} {cname} = 0;"]
        if is_input:
            lines.append(
                f"{cname} = *(npy_{dtype.name}*)PyArray_DATA("
                f"(PyArrayObject*)PyList_GET_ITEM(td_ins, {j}));"
            )
        return lines
    if not _is_tensor(var):
        if is_input:
            return [f"PyObject* {cname} = PyList_GET_ITEM(td_ins, {j});"]
        return [f"PyObject* {cname} = NULL;"]
    dtype = np.dtype(var.type.dtype)
    lines = [
        f"typedef npy_{dtype.name} dtype_{cname};",
        f"const int type_num_{cname} = {dtype.num};",
    ]
    if is_input:
        lines.append(f"PyArrayObject* {cname} = (PyArrayObject*)PyList_GET_ITEM(td_ins, {j});")
    else:
        lines += [
            f"PyArrayObject* {cname} = NULL;",
            f"if (PyList_GET_ITEM(td_outs, {j}) != Py_None) {{",
            f"    {cname} = (PyArrayObject*)PyList_GET_ITEM(td_outs, {j});",
            f"    Py_INCREF({cname});",
            "}",
        ]
    return lines


def c_source(op, node) -> str:
    """The C source of ``op`` applied at ``node`` (what the cache keys the library by).

    >>> from theano_dag.graph.op import COp
    >>> from theano_dag.graph.basic import Apply
    >>> import theano_dag.tensor as tt
    >>> class Double(COp):
    ...     __props__ = ()
    ...     def make_node(self, x):
    ...         return Apply(self, [x], [x.type()])
    ...     def c_code(self, node, name, inp, out, sub):
    ...         return f"/* {inp[0]} -> {out[0]} */ %(fail)s" % sub
    >>> src = c_source(Double(), Double()(tt.dvector()).owner)
    >>> "typedef npy_float64 dtype_V1;" in src and "/* V1 -> V2 */" in src
    True
    """
    name = f"node_{type(op).__name__}"
    ins = [f"V{k + 1}" for k in range(len(node.inputs))]
    outs = [f"V{len(ins) + k + 1}" for k in range(len(node.outputs))]
    sub = {"fail": "{ td_failed = 1; goto td_done; }", "id": 1, "struct_id": 1}
    headers = []
    for h in _hook(op, "c_headers")():
        headers.append(f"#include {h}" if h.startswith(("<", '"')) else f"#include <{h}>")
    body = []
    for k, v in enumerate(node.inputs):
        body += _declare(v, ins[k], True, k)
    for k, v in enumerate(node.outputs):
        body += _declare(v, outs[k], False, k)
    code = op.c_code(node, name, ins, outs, sub)
    cleanup = _hook(op, "c_code_cleanup")(node, name, ins, outs, sub)
    set_outputs = []
    for k, cname in enumerate(outs):
        if isinstance(node.outputs[k].type, ScalarType):
            num = np.dtype(node.outputs[k].type.dtype).num
            set_outputs += [
                "if (!td_failed) {",
                f"    PyObject* td_s{k} = PyArray_SimpleNew(0, NULL, {num});",
                f"    if (td_s{k} == NULL) td_failed = 1;",
                f"    else {{ *(dtype_{cname}*)PyArray_DATA((PyArrayObject*)td_s{k}) = {cname};",
                f"           PyList_SetItem(td_outs, {k}, td_s{k}); }}",
                "}",
            ]
            continue
        set_outputs += [
            f"if ({cname} == NULL) {{ Py_INCREF(Py_None); "
            f"PyList_SetItem(td_outs, {k}, Py_None); }}",
            f"else PyList_SetItem(td_outs, {k}, (PyObject*){cname});",
        ]
    version = _hook(op, "c_code_cache_version")()
    indent = "\n    "
    init = [*_hook(op, "c_init_code")(), _hook(op, "c_init_code_apply")(node, name)]
    return f"""/* COp {op} (c_code_cache_version {version!r}) */
#include <Python.h>
#include <numpy/arrayobject.h>
#include <math.h>
#include <stdbool.h>
{chr(10).join(headers)}

{_hook(op, "c_support_code")()}

{_hook(op, "c_support_code_apply")(node, name)}

int td_cop_init(void) {{
    if (_import_array() < 0) return -1;
    {{
{chr(10).join(init)}
    }}
    return 0;
}}

int td_cop_run(PyObject* td_ins, PyObject* td_outs) {{
    int td_failed = 0;
    {indent.join(body)}
    {{
{code}
    }}
td_done:;
    {{
{cleanup}
    }}
    {indent.join(set_outputs)}
    return td_failed;
}}
"""


def _toolchain(op):
    tc = get_toolchain(config.cxx)
    if tc is None:
        raise RuntimeError(
            f"{type(op).__name__} has C code to run and no C compiler is set "
            "(config.cxx is empty or not found)"
        )
    extra = [
        f"-I{sysconfig.get_paths()['include']}",
        f"-I{np.get_include()}",
        *(f"-I{d}" for d in _hook(op, "c_header_dirs")()),
        *_hook(op, "c_compile_args")(),
    ]
    libs = [
        *(f"-L{d}" for d in _hook(op, "c_lib_dirs")()),
        *(f"-l{lib}" for lib in _hook(op, "c_libraries")()),
    ]
    return dataclasses.replace(
        tc, flags=tuple(tc.flags) + tuple(extra), libs=tuple(libs) + tuple(tc.libs)
    )


def make_runner(op, node):
    """``run(input_values, output_storage)`` for ``op`` at ``node``: its C code, compiled
    once per op and input types (and cached on disk by source, as the kernels are)."""
    key = (op, tuple(v.type for v in node.inputs))
    run = _RUNNERS.get(key)
    if run is not None:
        return run
    with _LOCK:
        run = _RUNNERS.get(key)
        if run is None:
            run = _RUNNERS[key] = _build(op, node)
    return run


def _build(op, node):
    source = c_source(op, node)
    path = compile_library(_toolchain(op), source, kernel_dir(config.compiledir))
    lib = ctypes.PyDLL(path)
    lib.td_cop_init.restype = ctypes.c_int
    if lib.td_cop_init() != 0:
        raise ImportError(f"{type(op).__name__}: numpy's C API did not load in {path}")
    fn = lib.td_cop_run
    fn.argtypes = [ctypes.py_object, ctypes.py_object]
    fn.restype = ctypes.c_int
    tensor_in = [_is_tensor(v) for v in node.inputs]
    scalar_in = [
        np.dtype(v.type.dtype) if isinstance(v.type, ScalarType) else None for v in node.inputs
    ]
    scalar_out = [isinstance(v.type, ScalarType) for v in node.outputs]
    n_out = len(node.outputs)
    label = f"{op} ({type(op).__name__}.c_code)"

    def run(inputs, output_storage, _lib=lib):
        ins = [
            np.asarray(x, dtype=d) if d is not None else np.asarray(x) if t else x
            for x, t, d in zip(inputs, tensor_in, scalar_in)
        ]
        outs = [cell[0] for cell in output_storage]
        if fn(ins, outs) != 0:
            raise RuntimeError(f"{label} failed without setting a Python exception")
        for j in range(n_out):
            if outs[j] is None:
                raise RuntimeError(f"{label} left output {j} NULL")
            output_storage[j][0] = outs[j][()] if scalar_out[j] else outs[j]

    return run


register_c_runner(make_runner)
