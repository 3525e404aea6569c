"""Configuration flags, read once at import, like Theano's ``THEANO_FLAGS`` and ``.theanorc``.

At import, the rc files are read first (``~/.theano_dagrc``, or the paths listed in
``THEANO_DAGRC``, separated by ``os.pathsep``), then ``THEANO_DAG_FLAGS``
(``"floatX=float32,mode=FAST_COMPILE"``), which wins. An rc file is an INI file: flags in
``[global]``, and a flag ``a__b`` as ``b`` in section ``[a]``::

    [global]
    floatX = float32
    [traceback]
    limit = 4

Under the ``theano`` import alias (``python -m theano_dag.compat install-theano-alias``),
Theano's own sources are read too, as Theano reads them: ``~/.theanorc`` (or ``THEANORC``)
before ours, ``THEANO_FLAGS`` after the rc files and before ``THEANO_DAG_FLAGS``. Without
the alias, a ``THEANO_FLAGS`` in the environment warns that it is not read.

A flag name the config does not know is reported by a warning that names the close
matches, and import goes on (as Theano and PyTensor do). ``print(config)`` lists every
flag with its value; ``config.change_flags(floatX="float32")`` changes flags for a
``with`` block. Options are read at the edges (``function``, ``Mode``), not deep inside
the core.
"""

from __future__ import annotations

import configparser
import difflib
import functools
import os
import platform
import shlex
import shutil
import sys
import threading
import warnings
from dataclasses import dataclass, field


@dataclass
class _Flag:
    default: object
    doc: str
    choices: tuple | None = None
    kind: type = str
    param: ConfigParam | None = None  # a flag added by ``Config.add``: its parser
    minimum: int | None = None  # an int flag's least value


class ConfigParam:
    """How a flag added by :meth:`Config.add` reads its values (Theano's
    ``configparser.ConfigParam``): ``apply`` turns a value (a string from the environment,
    or what code sets) into the flag's value, ``validate`` says whether that is allowed,
    and an immutable flag keeps the value it had first.

    >>> p = ConfigParam("Low", apply=str.lower, validate=lambda v: v in ("low", "high"))
    >>> p.apply("HIGH")
    'high'
    >>> p.apply("middle")
    Traceback (most recent call last):
    ...
    ValueError: Invalid value ('middle') for configuration variable None
    """

    def __init__(self, default, apply=None, validate=None, mutable=True):
        self.default = default
        self._apply_fn = apply
        self._validate_fn = validate
        self._mutable = mutable
        self.name = None  # given by Config.add

    @property
    def is_mutable(self) -> bool:
        return self._mutable

    def _apply(self, value):
        return value if self._apply_fn is None else self._apply_fn(value)

    def validate(self, value):
        return True if self._validate_fn is None else self._validate_fn(value)

    def apply(self, value):
        """The flag's value for ``value``; ValueError when it is not a valid one."""
        applied = self._apply(value)
        if self.validate(applied) is False:
            raise ValueError(f"Invalid value ({value!r}) for configuration variable {self.name!r}")
        return applied

    def __set__(self, owner, value):
        # Theano's parameters are descriptors: setting one stores the applied value.
        if not self._mutable and hasattr(self, "val"):
            raise Exception(
                f"Can't change the value of {self.name} config parameter after initialization!"
            )
        self.val = self.apply(value)


class _TypedParam(ConfigParam):
    """A parameter of one kind of value: ``validate`` second, as Theano's ``IntParam(5,
    lambda i: i > 0)``."""

    def __init__(self, default, validate=None, mutable=True):
        super().__init__(default, validate=validate, mutable=mutable)


class StrParam(_TypedParam):
    """A string flag."""

    def _apply(self, value):
        return super()._apply(str(value))


class IntParam(_TypedParam):
    """An integer flag (``"3"`` reads as 3).

    >>> IntParam(5).apply("3")
    3
    """

    def _apply(self, value):
        try:
            return super()._apply(int(value))
        except (TypeError, ValueError):
            raise ValueError(
                f"Invalid value ({value!r}) for configuration variable {self.name!r}: "
                "expected an integer"
            ) from None


class FloatParam(_TypedParam):
    """A float flag."""

    def _apply(self, value):
        try:
            return super()._apply(float(value))
        except (TypeError, ValueError):
            raise ValueError(
                f"Invalid value ({value!r}) for configuration variable {self.name!r}: "
                "expected a number"
            ) from None


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class BoolParam(_TypedParam):
    """A boolean flag: True, 1, "1", "true" (any case), "yes", "on", and their opposites.

    >>> BoolParam(False).apply("True"), BoolParam(True).apply(0)
    (True, False)
    """

    def _apply(self, value):
        text = str(value).strip().lower()
        if value is True or text in _TRUE:
            return super()._apply(True)
        if value is False or text in _FALSE:
            return super()._apply(False)
        raise ValueError(
            f"Invalid value ({value!r}) for configuration variable {self.name!r}: "
            "expected a boolean"
        )


class NoneOrBoolParam(BoolParam):
    """A flag of None (``None``, ``"None"``) or a boolean, read as :class:`BoolParam` reads
    one (Theano's ``vm__lazy``).

    >>> p = NoneOrBoolParam(None)
    >>> p.apply("None"), p.apply("true"), p.apply(False)
    (None, True, False)
    """

    def _apply(self, value):
        if value is None or str(value).strip().lower() == "none":
            return None
        try:
            return super()._apply(value)
        except ValueError:
            raise ValueError(
                f"config.{self.name}: expected None, True or False, got {value!r}"
            ) from None


class EnumStr(ConfigParam):
    """A flag whose value is one of a few strings: the default and ``options``.

    >>> EnumStr("blue", ["red"]).all
    ['blue', 'red']
    """

    def __init__(self, default, options, validate=None, mutable=True):
        self.all = [default, *options]
        for option in self.all:
            if not isinstance(option, str):
                raise ValueError(f"Non-str value '{option}' for an EnumStr parameter.")
        super().__init__(default, validate=validate, mutable=mutable)

    def _apply(self, value):
        if value not in self.all:
            raise ValueError(
                f"Invalid value ({value!r}) for configuration variable {self.name!r}. "
                f"Valid options are {self.all}"
            )
        return super()._apply(value)


class DeviceParam(ConfigParam):
    """A device name: the default, ``opencl...`` or ``cuda...`` (Theano's parameter of
    its ``device`` flag); Theano's old ``gpu...`` names are refused."""

    def __init__(self, default, mutable=True):
        super().__init__(default, mutable=mutable)

    def _apply(self, value):
        if value == self.default or str(value).startswith(("cpu", "opencl", "cuda")):
            return value
        if str(value).startswith("gpu"):
            raise ValueError(
                "You are trying to use the old GPU back-end (device=gpu...); its devices are "
                "named cuda... or opencl..."
            )
        raise ValueError(
            f"Invalid value ({value!r}) for configuration variable {self.name!r}: a device "
            "is cpu, opencl* or cuda*"
        )

    def __str__(self):
        return f"{self.name} ({self.default}, opencl*, cuda*) "


def short_platform(r=None, p=None) -> str:
    """``platform.platform()`` with the kernel release shortened to its major and minor
    version and its other version numbers dropped (Theano's name for a compile cache
    folder: kernel updates keep the folder).

    >>> short_platform("3.2.0-70-generic", "Linux-3.2.0-70-generic-x86_64-with-glibc")
    'Linux-3.2--generic-x86_64-with-glibc'
    >>> short_platform("2.6.35.14-106.fc14.x86_64", "Linux-2.6.35.14-106.fc14.x86_64-x86_64")
    'Linux-2.6-fc14.x86_64-x86_64'
    """
    r = platform.release() if r is None else r
    p = platform.platform() if p is None else p
    first, *rest = r.split("-")
    pieces = [".".join(first.split(".")[:2])]
    for piece in rest:
        # a piece's leading numbers are a build number: dropped, the words kept
        parts = piece.split(".")
        while parts and parts[0].isdigit():
            parts.pop(0)
        pieces.append(".".join(parts))
    return p.replace(r, "-".join(pieces))


def _default_cxx() -> str:
    return _which_cxx(os.environ.get("PATH"))


@functools.lru_cache(maxsize=8)
def _which_cxx(path) -> str:
    # Per PATH: the default is read a dozen times per compile, and each search stats
    # every folder of PATH (a change of PATH is seen; a compiler installed into a folder
    # already searched is seen by the next process).
    return shutil.which("gcc", path=path) or shutil.which("cc", path=path) or ""


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
    "cpu__poison": _Flag(
        False,
        "CPU engine, for tests: fill every planned buffer with NaN (floats) or 0xA5 bytes "
        "(integers) before it is written, and check each plan, so a read before a write "
        "shows every time",
        kind=bool,
    ),
    # The engine's DEFAULT_MIN_PLAN_BYTES (engines sit above config: a test keeps them equal).
    "cpu__min_plan_bytes": _Flag(
        16384,
        "CPU engine: values of fewer bytes are left to numpy's allocator instead of planned "
        "buffers (0 plans every value); a CPULinker's own min_plan_bytes wins",
        kind=int,
        minimum=0,
    ),
    "cpu__kernel_compile": _Flag(
        "background",
        "CPU engine: fused C kernels the kernel cache lacks compile 'background' (the first "
        "calls run numpy meanwhile, whose last bits can differ from C's) or 'sync' (the "
        "first call waits for them: the same bits from every call, whatever the cache held)",
        ("background", "sync"),
    ),
    "compiledir": _Flag(None, "where compiled kernels are cached"),
    "on_opt_error": _Flag("warn", "what a failing rewrite does", ("warn", "raise", "ignore")),
    "on_unused_input": _Flag("raise", "unused function input", ("raise", "warn", "ignore")),
    "optimizer_excluding": _Flag("", "colon-separated tags to exclude"),
    "optimizer_including": _Flag("", "colon-separated tags to include"),
    "compute_test_value": _Flag(
        "off", "evaluate test values on build", ("off", "ignore", "warn", "raise", "pdb")
    ),
    "print_test_value": _Flag(
        False, "a variable's repr shows its test value (tag.test_value) when it has one", kind=bool
    ),
    "unittests__rseed": _Flag("666", "seed of Theano's test helpers ('random': none)"),
    "profile": _Flag(False, "profile every function", kind=bool),
    "function_cache": _Flag(
        True,
        "keep the graphs function() optimizes in <compiledir>/functions and load them "
        "when the same graph is compiled again (graphs with user ops or rewrites never)",
        kind=bool,
    ),
    "allow_gc": _Flag(True, "free intermediates after use in the reference engine", kind=bool),
    "opencl__platform": _Flag("", "OpenCL platform name substring (empty: first)"),
    "opencl__device": _Flag("", "OpenCL device name substring (empty: first)"),
    "opencl__host_fallback": _Flag(True, "run ops without OpenCL kernel on the host", kind=bool),
    "cast_policy": _Flag("custom", "dtype of python scalars", ("custom", "numpy+floatX")),
    # Like mode and linker, a registered name (compile.mode.register_optimizer), checked
    # at use; it replaces the default mode's optimizer when set ("None": no rewrites).
    "optimizer": _Flag(
        "fast_run",
        "optimizer of the default mode: fast_run, fast_compile, merge, stabilize, o1..o3, None",
    ),
    "exception_verbosity": _Flag(
        "low",
        "'high' adds the failing node's inputs (types, shapes, strides, values) to runtime errors",
        ("low", "high"),
    ),
    "warn_float64": _Flag(
        "ignore",
        "what creating a float64 tensor variable does",
        ("ignore", "warn", "raise", "pdb"),
    ),
    "cycle_detection": _Flag(
        "regular",
        "the DestroyHandler's cycle check for in-place rewrites (Theano's names; both "
        "give the same graphs here)",
        ("regular", "fast"),
    ),
    "traceback__limit": _Flag(
        8, "how many frames of the user's stack a node keeps (tag.trace); 0: none", kind=int
    ),
}

# Theano's flags that Theano's own code and tests set, which change nothing here: each
# warn__* flag warns about a bug of an old Theano version that theano_dag never had, and the
# others tune Theano's C backend (BLAS linking, compiler flags, conv shape asserts) or its
# DebugMode. Accepted so that such code runs; nothing reads them.
_WARN_BUGS = (
    "argmax_pushdown_bug",
    "gpu_set_subtensor",
    "gpu_set_subtensor1",
    "gpusum_01_011_0111_bug",
    "identify_1pexp_bug",
    "inc_set_subtensor",
    "inc_set_subtensor1",
    "inc_subtensor1_opt",
    "reduce_join",
    "sum_div_dimshuffle_bug",
    "sum_sum_bug",
    "subtensor_merge_bug",
    "signal_conv2d_interface",
    "vm_gc_bug",
)
_NO_EFFECT = "Theano's flag, accepted for Theano's code; no effect in theano_dag"


def _named(param, name):
    """``param`` with the flag's name, which its errors give (Config.add names its own)."""
    param.name = name
    return param


FLAGS.update({f"warn__{name}": _Flag(False, _NO_EFFECT, kind=bool) for name in _WARN_BUGS})
FLAGS.update(
    {
        "blas__ldflags": _Flag(
            "",
            "Theano's flag, accepted for Theano's code; no effect on values or speed in "
            "theano_dag (numpy's BLAS does the products); when set, the sparse rewrite "
            "local_sampling_dot_csr makes SamplingDotCSR, as Theano's does",
        ),
        "gcc__cxxflags": _Flag("", _NO_EFFECT),
        "conv__assert_shape": _Flag(False, _NO_EFFECT, kind=bool),
        "compute_test_value_opt": _Flag(
            "off",
            "compute_test_value while a function's rewrites run",
            ("off", "ignore", "warn", "raise", "pdb"),
        ),
        "profiling__min_peak_memory": _Flag(False, _NO_EFFECT, kind=bool),
        # Theano's VM collects per-node memory only under this flag; the engines here
        # report their memory plan in every profile (ProfileStats.memory), so it is
        # accepted and changes nothing.
        "profile_memory": _Flag(False, _NO_EFFECT, kind=bool),
        "DebugMode__patience": _Flag(10, _NO_EFFECT, kind=int),
        "DebugMode__check_finite": _Flag(
            True, "DebugMode's default check_isfinite (NaN and infinities)", kind=bool
        ),
        "DebugMode__check_c": _Flag(
            True, "DebugMode's default check_c_code (an op's own C code run)", kind=bool
        ),
        "DebugMode__check_py": _Flag(
            True,
            "DebugMode's default check_py_code (an op's Python code run beside its C code)",
            kind=bool,
        ),
        "DebugMode__check_strides": _Flag(
            0,
            "DebugMode's default require_matching_strides (0: no check, 1: warn, 2: raise)",
            kind=int,
        ),
        "DebugMode__check_preallocated_output": _Flag(
            "",
            "DebugMode's default check_preallocated_output: kinds of output buffers, "
            "separated by ':' (previous, c_contiguous, f_contiguous, strided, wrong_size, "
            "initial, ALL)",
        ),
        "DebugMode__check_preallocated_output_ndim": _Flag(
            4, "the dimensions DebugMode strides in its strided output buffers", kind=int
        ),
        "deterministic": _Flag("default", _NO_EFFECT, ("default", "more")),
        # Theano pickles a function's optimized graph and rewrites it again on load only
        # under this flag; theano_dag pickles the user's graph and compiles it on load
        # with the function's mode, so both settings load the same optimized function.
        "reoptimize_unpickled_function": _Flag(False, _NO_EFFECT, kind=bool),
        "openmp": _Flag(False, _NO_EFFECT, kind=bool),
        "openmp_elemwise_minsize": _Flag(200000, _NO_EFFECT, kind=int),
        # Theano's VM evaluates an ifelse lazily unless this is False; a compiled ifelse
        # here is lazy on every engine (the lazy_branches rewrite), whatever it says.
        "vm__lazy": _Flag(
            None,
            "Theano's flag (whether its VM may skip the branch an ifelse does not take: "
            "None or True); accepted for Theano's code, no effect",
            param=_named(NoneOrBoolParam(None), "vm__lazy"),
        ),
        # Theano's scan lets its step write into the loop's buffers under this flag; the
        # Scan op here copies each step's rows into them (Theano's behaviour with it off).
        "scan__allow_output_prealloc": _Flag(
            False,
            "Theano's flag (whether scan's step writes straight into the loop's buffers); "
            "theano_dag's loop copies each step's rows, as Theano's with it off; no effect",
            kind=bool,
        ),
    }
)

_RC_SECTION = "global"


def _parse(name: str, value):
    flag = FLAGS[name]
    if flag.param is not None:
        return flag.param.apply(value)
    if flag.kind is bool and isinstance(value, str):
        low = value.strip().lower()
        if low not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise ValueError(f"config.{name}: expected a boolean, got {value!r}")
        value = low in ("1", "true", "yes", "on")
    if flag.kind is int and not isinstance(value, int):
        try:
            value = int(value)
        except ValueError:
            raise ValueError(f"config.{name}: expected an integer, got {value!r}") from None
    if flag.minimum is not None and (isinstance(value, bool) or value < flag.minimum):
        raise ValueError(f"config.{name}: expected an integer >= {flag.minimum}, got {value!r}")
    if name == "optimizer" and value is None:
        value = "None"  # Theano's spelling of "no rewrites", as a registered name
    if flag.choices is not None and value not in flag.choices:
        raise ValueError(f"config.{name}: {value!r} is not one of {', '.join(flag.choices)}")
    return value


class _Values(dict):
    """The flags set on a ``Config``: a dict that, on every change, drops the values
    its config keeps as plain attributes (see ``Config.__getattr__``)."""

    __slots__ = ("_owner", "_gen")

    def _changed(self):
        self._gen = getattr(self, "_gen", 0) + 1
        owner = getattr(self, "_owner", None)
        if owner is not None:
            owner._forget_cached()

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key):
        super().__delitem__(key)
        self._changed()

    def pop(self, *args):
        try:
            return super().pop(*args)
        finally:
            self._changed()

    def popitem(self):
        try:
            return super().popitem()
        finally:
            self._changed()

    def setdefault(self, key, default=None):
        try:
            return super().setdefault(key, default)
        finally:
            self._changed()

    def update(self, *args, **kwargs):
        try:
            super().update(*args, **kwargs)
        finally:
            self._changed()

    def clear(self):
        super().clear()
        self._changed()

    def __ior__(self, other):
        self.update(other)
        return self


# Flags whose default is computed when asked (the environment may change): never cached.
_COMPUTED_DEFAULTS = ("cxx", "compiledir")


@dataclass
class Config:
    """The flags as attributes. See ``FLAGS`` for names, defaults and documentation.

    >>> from theano_dag import config
    >>> with config.change_flags(floatX="float32"):
    ...     config.floatX
    'float32'
    """

    _values: dict = field(default_factory=dict, repr=False)

    def __getattr__(self, name):
        # Only reached for a flag not read since the last change: its value is then kept
        # as a plain attribute, which the next reads find without coming here (graph
        # building reads a few flags per node; this method costs 20 times a plain read).
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in FLAGS:
            raise AttributeError(f"config has no flag {name!r}")
        values = self._values
        gen = getattr(values, "_gen", 0)
        if name in values:
            value = values[name]
        else:
            default = FLAGS[name].default
            if default is None and name in _COMPUTED_DEFAULTS:
                return _default_cxx() if name == "cxx" else _default_compiledir()
            value = default
        if type(values) is _Values:  # a change of the flags drops the copy
            self.__dict__[name] = value
            if getattr(values, "_gen", 0) != gen or self._values is not values:
                # Changed by another thread since the value was read: not kept.
                self.__dict__.pop(name, None)
        return value

    def _forget_cached(self):
        d = self.__dict__
        for name in [k for k in d if k in FLAGS]:
            del d[name]

    def __setattr__(self, name, value):
        if name == "_values":
            if type(value) is not _Values:
                value = _Values(value)
            value._owner = self
            object.__setattr__(self, name, value)
            self._forget_cached()
            return
        if name not in FLAGS:
            raise AttributeError(f"config has no flag {name!r}; known: {', '.join(FLAGS)}")
        self._values[name] = _parse(name, value)

    def add(self, name: str, doc: str, configparam: ConfigParam, in_c_key: bool = True):
        """Add the flag ``name`` (Theano's ``config.add``, for a library's own flags): its
        value is read by ``configparam`` (a :class:`ConfigParam`), its default checked
        now. Dotted names are refused (sections are written ``section__name``), and so is
        a name already taken. ``in_c_key`` is accepted for Theano's code.

        >>> config.add("mylib__verbose", "mylib's verbosity", IntParam(0))
        >>> config.mylib__verbose
        0
        >>> with config.change_flags(mylib__verbose="2"):
        ...     config.mylib__verbose
        2
        """
        if "." in name:
            raise ValueError(
                f"Dot-based sections were removed: name the flag {name.replace('.', '__')!r}"
            )
        if name in FLAGS:
            raise AttributeError(f"The config flag {name!r} is already registered")
        if not isinstance(configparam, ConfigParam):
            raise TypeError(f"config.add: expected a ConfigParam, got {configparam!r}")
        configparam.name = name
        default = configparam.default
        default = configparam.apply(default() if callable(default) else default)
        FLAGS[name] = _Flag(default, doc, param=configparam)
        self._forget_cached()

    def change_flags(self, *args, **kwargs) -> ChangeFlags:
        """Set flags for the duration of a ``with`` block (or of each call of the function
        it decorates), then restore them; the flags as keywords, or dicts (Theano's form).
        See ``ChangeFlags``.

        >>> with config.change_flags({"floatX": "float32"}, on_opt_error="raise"):
        ...     config.floatX, config.on_opt_error
        ('float32', 'raise')
        """
        return ChangeFlags(self, *args, **kwargs)

    def is_set(self, name: str) -> bool:
        """Whether flag ``name`` was given a value (by the environment, an rc file or code)."""
        return name in self._values

    def __str__(self):
        lines = []
        for name, flag in FLAGS.items():
            choices = f" ({', '.join(flag.choices)})" if flag.choices else ""
            lines.append(
                f"{name}{choices}\n    Doc:  {flag.doc}\n    Value:  {getattr(self, name)}"
            )
        return "\n\n".join(lines)

    def __repr__(self):
        changed = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"Config({changed})"

    def _set_from_text(self, name: str, value: str, where: str, lenient: bool = False):
        """Set a flag read from text; an unknown name warns with the close matches. A value
        the flag refuses raises, or, when ``lenient`` (flags written for Theano), warns and
        leaves the flag as it is."""
        name = name.replace(".", "__")
        if name not in FLAGS:
            close = difflib.get_close_matches(name, FLAGS, n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            warnings.warn(
                f"{where}: theano_dag has no flag {name!r}, it is ignored{hint}", stacklevel=3
            )
            return
        try:
            setattr(self, name, value)
        except ValueError as err:
            if not lenient:
                raise
            warnings.warn(f"{where}: {err}; the flag is left as it is", stacklevel=3)

    def load_env(self, text: str | None):
        """Apply a ``THEANO_DAG_FLAGS``-style string: ``name=value,name=value``.

        >>> import warnings
        >>> cfg = Config()
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     cfg.load_env("floatx=float32,profile=True")
        >>> print(w[0].message)
        THEANO_DAG_FLAGS: theano_dag has no flag 'floatx', it is ignored; did you mean 'floatX'?
        >>> cfg.profile, cfg.floatX
        (True, 'float64')
        """
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            if "=" not in item:
                raise ValueError(f"THEANO_DAG_FLAGS: expected name=value, got {item!r}")
            k, v = (s.strip() for s in item.split("=", 1))
            self._set_from_text(k, v, "THEANO_DAG_FLAGS")

    def load_theano_flags(self, text: str | None):
        """Apply a ``THEANO_FLAGS`` string as Theano reads it: comma-separated
        ``name=value`` (``section__name=value``), quotes as in a shell, the last value of a
        name wins. An item without ``=``, a flag theano_dag does not have and a value it
        refuses (``device=cuda``) each warn and change nothing.

        >>> import warnings
        >>> cfg = Config()
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     cfg.load_theano_flags("floatX=float32,device=cuda,traceback__limit='3'")
        >>> cfg.floatX, cfg.device, cfg.traceback__limit
        ('float32', 'cpu', 3)
        >>> print(w[0].message)
        THEANO_FLAGS: config.device: 'cuda' is not one of cpu, opencl; the flag is left as it is
        """
        splitter = shlex.shlex(text or "", posix=True)
        splitter.whitespace, splitter.whitespace_split = ",", True
        for item in splitter:
            item = item.strip()
            if not item:
                continue
            if "=" not in item:
                warnings.warn(f"THEANO_FLAGS: {item!r} has no value, it is ignored", stacklevel=2)
                continue
            k, v = item.split("=", 1)
            self._set_from_text(k.strip(), v.strip(), "THEANO_FLAGS", lenient=True)

    def load_rc(self, paths, theano: bool = False, environ=os.environ):
        """Apply the rc files ``paths`` (INI: ``[global]`` flags, ``[a]`` ``b`` = flag
        ``a__b``); a missing file is skipped, later files win. ``theano``: the files are
        Theano's (``.theanorc``), read as Theano reads them (``%(USER)s`` and the like
        expand, from ``environ``; a value theano_dag refuses warns)."""
        for path in paths:
            path = os.path.expanduser(path)
            if not os.path.isfile(path):
                continue
            interpolation = configparser.BasicInterpolation() if theano else None
            parser = configparser.ConfigParser(interpolation=interpolation)
            parser.optionxform = str  # flag names are case-sensitive (floatX)
            if theano:
                parser.read_dict({"DEFAULT": _theanorc_defaults(environ)})
            parser.read(path)
            for section in parser.sections():
                for key in parser.options(section):
                    if key in parser.defaults():
                        continue
                    name = key if section == _RC_SECTION else f"{section}__{key}"
                    self._set_from_text(name, parser.get(section, key), path, lenient=theano)


_MISSING = object()

# The ChangeFlags entered and not yet exited, per (id of their Config, flag), in the order
# they were entered: a block exited before one entered after it hands it what it saved.
_ENTERED: dict = {}
_ENTERED_LOCK = threading.Lock()


class ChangeFlags:
    """Flags changed while a ``with`` block runs: ``__enter__`` sets them, ``__exit__``
    puts back the values they had (a flag that was never set goes back to its default).
    Nothing else restores them: an object entered and never exited leaves the flags set,
    as Theano's ``change_flags`` does (PyMC3 enters one in ``with model:`` and exits it at
    the block's end). Used as a decorator, it changes the flags during each call.

    It pickles with its flags (not the values it saved); unpickled, it changes the global
    ``config``.

    >>> from theano_dag import config
    >>> ctx = config.change_flags(floatX="float32")
    >>> ctx.__enter__() is ctx, config.floatX
    (True, 'float32')
    >>> ctx.__exit__(None, None, None); config.floatX
    'float64'
    >>> @config.change_flags(on_opt_error="raise")
    ... def strict():
    ...     return config.on_opt_error
    >>> strict(), config.on_opt_error
    ('raise', 'warn')
    """

    def __init__(self, cfg: Config, *args, **kwargs):
        changes = {}
        for mapping in (*args, kwargs):
            changes.update(mapping)
        for name, value in changes.items():
            if name not in FLAGS:
                raise AttributeError(f"config has no flag {name!r}")
            changes[name] = _parse(name, value)  # a bad value raises here, not in the block
        self._config, self.flags, self._saved = cfg, changes, None

    def __enter__(self):
        cfg = self._config
        with _ENTERED_LOCK:
            self._saved = {name: cfg._values.get(name, _MISSING) for name in self.flags}
            cfg._values.update(self.flags)
            for name in self.flags:
                _ENTERED.setdefault((id(cfg), name), []).append(self)
        return self

    def __exit__(self, *exc_info):
        cfg = self._config
        values = cfg._values
        with _ENTERED_LOCK:
            for name, old in (self._saved or {}).items():
                key = (id(cfg), name)
                entered = _ENTERED.get(key, [])
                k = next((i for i in range(len(entered) - 1, -1, -1) if entered[i] is self), None)
                if k is not None:
                    del entered[k]
                    if not entered:
                        del _ENTERED[key]
                    if k < len(entered):
                        # Exited before a block entered after it (in another thread: two
                        # functions compiling at once): the flag keeps that block's value,
                        # and that block's exit puts back what this one found.
                        entered[k]._saved[name] = old
                        continue
                if old is _MISSING:
                    values.pop(name, None)
                else:
                    values[name] = old
            self._saved = None

    def __call__(self, func):
        @functools.wraps(func)
        def with_flags(*args, **kwargs):
            # A fresh context per call: a recursive call saves its own values.
            with ChangeFlags(self._config, self.flags):
                return func(*args, **kwargs)

        return with_flags

    def __getstate__(self):
        return {"flags": self.flags}

    def __setstate__(self, state):
        self._config, self.flags, self._saved = config, state["flags"], None

    def __repr__(self):
        return f"change_flags({', '.join(f'{k}={v!r}' for k, v in self.flags.items())})"


def rc_paths(environ=os.environ) -> list:
    """The rc files read at import: ``THEANO_DAGRC`` (``os.pathsep``-separated) or
    ``~/.theano_dagrc``."""
    env = environ.get("THEANO_DAGRC")
    if env is not None:
        return [p for p in env.split(os.pathsep) if p]
    return [os.path.join("~", ".theano_dagrc")]


def theano_rc_paths(environ=os.environ) -> list:
    """Theano's rc files, read under the ``theano`` alias: ``THEANORC``
    (``os.pathsep``-separated) or ``~/.theanorc``."""
    env = environ.get("THEANORC")
    if env is not None:
        return [p for p in env.split(os.pathsep) if p]
    return [os.path.join("~", ".theanorc")]


def _theanorc_defaults(env) -> dict:
    # The names Theano's .theanorc may interpolate, e.g. base_compiledir = /tmp/%(USER)s.
    return {
        "USER": env.get("USER", os.path.split(os.path.expanduser("~"))[-1]),
        "LSCRATCH": env.get("LSCRATCH", ""),
        "TMPDIR": env.get("TMPDIR", ""),
        "TEMP": env.get("TEMP", ""),
        "TMP": env.get("TMP", ""),
        "PID": str(os.getpid()),
    }


def theano_alias_installed() -> bool:
    """Whether the ``theano`` import alias (``theano_dag.compat``) is installed in this
    interpreter: its finder is on ``sys.meta_path``, put there at start-up."""
    return any(getattr(finder, "theano_dag_theano_alias", False) for finder in sys.meta_path)


def load_config(cfg: Config, environ=os.environ, theano: bool = False):
    """Apply the rc files and flags of the environment ``environ`` to ``cfg``, later
    sources winning: under the ``theano`` alias (``theano``) Theano's ``.theanorc``, then
    ``.theano_dagrc``, then ``THEANO_FLAGS``, then ``THEANO_DAG_FLAGS``. Without the alias,
    a ``THEANO_FLAGS`` in the environment is not read, and a warning says so."""
    if theano:
        cfg.load_rc(theano_rc_paths(environ), theano=True, environ=environ)
    cfg.load_rc(rc_paths(environ))
    if theano:
        cfg.load_theano_flags(environ.get("THEANO_FLAGS"))
    elif environ.get("THEANO_FLAGS"):
        warnings.warn(
            "THEANO_FLAGS is set but theano_dag reads THEANO_DAG_FLAGS (THEANO_FLAGS only "
            "under the theano import alias: python -m theano_dag.compat install-theano-alias)",
            stacklevel=2,
        )
    cfg.load_env(environ.get("THEANO_DAG_FLAGS"))


config = Config()
load_config(config, theano=theano_alias_installed())


def change_flags(*args, **kwargs) -> ChangeFlags:
    """``config.change_flags`` by its old name at module level (deprecated), which
    Theano's ``configparser`` kept: exoplanet's tests write
    ``theano.configparser.change_flags(...)``.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with change_flags(floatX="float32"):
    ...         config.floatX
    'float32'
    """
    warnings.warn(
        "change_flags is deprecated: use config.change_flags", DeprecationWarning, stacklevel=2
    )
    return config.change_flags(*args, **kwargs)


def install_hint(extra: str, requirement: str) -> str:
    """The line that installs an optional extra, as a user can paste it in any shell.

    theano_dag is installed from a checkout (it is on no package index), so the extra is
    named by path; the requirement alone works anywhere. Brackets are quoted for zsh.

    >>> print(install_hint("networkx", "networkx>=2.8"))
    pip install 'networkx>=2.8' (the 'networkx' extra: pip install '.[networkx]' in a
    theano_dag checkout)
    """
    return (
        f"pip install '{requirement}' "
        f"(the '{extra}' extra: pip install '.[{extra}]' in a theano_dag checkout)"
    )
