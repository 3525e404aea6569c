"""Configuration flags, read once from ``THEANO_DAG_FLAGS`` (like ``THEANO_FLAGS``).

``THEANO_DAG_FLAGS="floatX=float32,mode=FAST_COMPILE"`` sets flags at import;
``config.change_flags(floatX="float32")`` changes them for a ``with`` block.
Options are read at the edges (``function``, ``Mode``), not deep inside the core.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field


@dataclass
class _Flag:
    default: object
    doc: str
    choices: tuple | None = None
    kind: type = str


def _default_cxx() -> str:
    return shutil.which("gcc") or shutil.which("cc") or ""


def _default_compiledir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "theano_dag")


FLAGS: dict[str, _Flag] = {
    "floatX": _Flag("float64", "dtype of float constructors", ("float64", "float32", "float16")),
    # mode and linker name registry entries (compile.mode.register_mode/register_linker),
    # so they are checked when used, not here.
    "mode": _Flag("FAST_RUN", "default compilation mode (a registered mode name)"),
    "linker": _Flag("cpu", "default engine (a registered linker name)"),
    "device": _Flag("cpu", "where functions run", ("cpu", "opencl")),
    "cxx": _Flag(None, "C compiler used for fused kernels; '' disables C"),
    "compiledir": _Flag(None, "where compiled kernels are cached"),
    "cpu_gemm": _Flag(
        "auto",
        "matrix products of the CPU engine: 'auto' (C where it targets AVX-512), 'c', 'numpy'",
        ("auto", "c", "numpy"),
    ),
    "on_opt_error": _Flag("warn", "what a failing rewrite does", ("warn", "raise", "ignore")),
    "on_unused_input": _Flag("raise", "unused function input", ("raise", "warn", "ignore")),
    "optimizer_excluding": _Flag("", "colon-separated tags to exclude"),
    "optimizer_including": _Flag("", "colon-separated tags to include"),
    "compute_test_value": _Flag("off", "evaluate test values on build", ("off", "raise", "warn")),
    "profile": _Flag(False, "profile every function", kind=bool),
    "allow_gc": _Flag(True, "free intermediates after use in the reference engine", kind=bool),
    "opencl__platform": _Flag("", "OpenCL platform name substring (empty: first)"),
    "opencl__device": _Flag("", "OpenCL device name substring (empty: first)"),
    "opencl__host_fallback": _Flag(True, "run ops without OpenCL kernel on the host", kind=bool),
    "cast_policy": _Flag("custom", "dtype of python scalars", ("custom", "numpy+floatX")),
    # read by Theano's own tests (unittest_tools.fetch_seed) when they run on theano_dag
    "unittests__rseed": _Flag("666", "seed of tests' random numbers ('random': a new one)"),
}


def _parse(name: str, value):
    flag = FLAGS[name]
    if flag.kind is bool and isinstance(value, str):
        low = value.strip().lower()
        if low not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise ValueError(f"config.{name}: expected a boolean, got {value!r}")
        value = low in ("1", "true", "yes", "on")
    if flag.choices is not None and value not in flag.choices:
        raise ValueError(f"config.{name}: {value!r} is not one of {', '.join(flag.choices)}")
    return value


@dataclass
class Config:
    """The flags as attributes. See ``FLAGS`` for names, defaults and documentation.

    >>> from theano_dag import config
    >>> with config.change_flags(floatX="float32"):
    ...     config.floatX
    'float32'
    """

    _values: dict = field(default_factory=dict)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in FLAGS:
            raise AttributeError(f"config has no flag {name!r}")
        if name in self._values:
            return self._values[name]
        default = FLAGS[name].default
        if name == "cxx" and default is None:
            return _default_cxx()
        if name == "compiledir" and default is None:
            return _default_compiledir()
        return default

    def __setattr__(self, name, value):
        if name == "_values":
            object.__setattr__(self, name, value)
            return
        if name not in FLAGS:
            raise AttributeError(f"config has no flag {name!r}; known: {', '.join(FLAGS)}")
        self._values[name] = _parse(name, value)

    @contextlib.contextmanager
    def change_flags(self, **kwargs):
        """Set flags for the duration of a ``with`` block, then restore them."""
        old = dict(self._values)
        try:
            for k, v in kwargs.items():
                setattr(self, k, v)
            yield self
        finally:
            self._values = old

    def load_env(self, text: str | None):
        """Apply a ``THEANO_DAG_FLAGS``-style string: ``name=value,name=value``."""
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            if "=" not in item:
                raise ValueError(f"THEANO_DAG_FLAGS: expected name=value, got {item!r}")
            k, v = (s.strip() for s in item.split("=", 1))
            setattr(self, k.replace(".", "__"), v)


config = Config()
config.load_env(os.environ.get("THEANO_DAG_FLAGS"))
