"""Checking gradients by finite differences: ``numeric_grad`` and ``verify_grad``.

``verify_grad(fun, pt)`` compares ``grad`` of a random projection ``sum(u * fun(*x))``
with a one-sided finite-difference estimate at ``pt`` (Theano's method; the random
projection turns any output into a scalar and catches wrong entries anywhere).
"""

from __future__ import annotations

import numpy as np

from theano_dag import tensor as tt
from theano_dag.gradient.reverse import grad

__all__ = ["numeric_grad", "verify_grad", "GradientError", "mode_not_slow"]


class numeric_grad:  # noqa: N801 (Theano's name)
    """The finite-difference gradient of a scalar function ``f`` at ``pt``.

    ``self.gf`` holds one array per argument (or a single array when ``pt`` is one array).
    The step is ``eps`` (by default by dtype: 1e-7 for float64, 3e-4 for float32).

    >>> import numpy as np
    >>> ng = numeric_grad(lambda x: (x ** 2).sum(), np.array([1.0, 3.0]))
    >>> np.round(ng.gf, 4)
    array([2., 6.])
    """

    type_eps = {"float64": 1e-7, "float32": 3e-4, "float16": 1e-1}

    def __init__(self, f, pt, eps=None, out_type=None):
        packed = not isinstance(pt, (list, tuple))
        apt = [np.array(p) for p in ([pt] if packed else pt)]
        dtypes = [str(p.dtype) for p in apt]
        for k, dt in enumerate(dtypes):
            if dt not in self.type_eps:
                raise TypeError(
                    f"numeric_grad: argument {k} has dtype {dt}; expected one of "
                    f"{tuple(self.type_eps)}"
                )
        # Work in the most precise dtype present (smallest step), step as the least precise.
        working = min(dtypes, key=lambda dt: self.type_eps[dt])
        if eps is None:
            eps = max(self.type_eps[dt] for dt in dtypes)
        sizes = [p.size for p in apt]
        x = np.concatenate([p.ravel().astype(working) for p in apt]) if apt else np.zeros(0)
        gx = np.zeros(
            x.size, dtype=out_type if out_type and out_type.startswith("complex") else working
        )

        def unpack(flat):
            out, pos = [], 0
            for p, s in zip(apt, sizes):
                out.append(flat[pos : pos + s].reshape(p.shape).astype(p.dtype))
                pos += s
            return out

        f_x = f(*unpack(x))
        for i in range(x.size):
            step = x.copy()
            step[i] += eps
            gx[i] = (f(*unpack(step)) - f_x) / eps
        gf, pos = [], 0
        for p, s in zip(apt, sizes):
            gf.append(gx[pos : pos + s].reshape(p.shape))
            pos += s
        self.gf = gf[0] if packed else gf

    @staticmethod
    def abs_rel_err(a, b):
        """Return ``(|a - b|, |a - b| / max(|a| + |b|, 1e-8))`` elementwise."""
        abs_err = np.abs(np.asarray(a) - np.asarray(b))
        rel_err = abs_err / np.maximum(np.abs(a) + np.abs(b), [1e-8])
        return np.asarray(abs_err), np.asarray(rel_err)

    def abs_rel_errors(self, g_pt):
        """Return ``(abs_err, rel_err)`` of each of ``g_pt`` against ``self.gf``."""
        gf = self.gf if isinstance(self.gf, list) else [self.gf]
        if len(g_pt) != len(gf):
            raise ValueError(f"expected {len(gf)} gradients, got {len(g_pt)}")
        errs = []
        for i, (a, b) in enumerate(zip(g_pt, gf)):
            if np.shape(a) != np.shape(b):
                raise ValueError(
                    f"gradient {i} has shape {np.shape(a)}, the numeric gradient "
                    f"has shape {np.shape(b)}"
                )
            errs.append(self.abs_rel_err(a, b))
        return errs

    def max_err(self, g_pt, abs_tol, rel_tol):
        """Find where ``g_pt`` is worst by ``min(abs_err / abs_tol, rel_err / rel_tol)``.

        Returns ``(argument index, flat position, abs_err, rel_err)`` there.
        """
        best = None
        for k, (abs_err, rel_err) in enumerate(self.abs_rel_errors(g_pt)):
            if not (np.all(np.isfinite(abs_err)) and np.all(np.isfinite(rel_err))):
                raise ValueError(f"gradient {k} has non-finite errors: {abs_err!r}")
            if abs_err.size == 0:
                continue
            scaled = np.minimum(abs_err / abs_tol, rel_err / rel_tol).ravel()
            pos = int(scaled.argmax())
            if best is None or scaled[pos] > best[0]:
                best = (scaled[pos], k, pos, abs_err.ravel()[pos], rel_err.ravel()[pos])
        if best is None:
            return 0, 0, 0.0, 0.0
        return best[1:]


class GradientError(Exception):
    """The analytic and numeric gradients differ by more than the tolerances."""

    def __init__(self, arg, err_pos, shape, val1, val2, abs_err, rel_err, abs_tol, rel_tol):
        super().__init__(arg, err_pos, shape, val1, val2, abs_err, rel_err, abs_tol, rel_tol)
        self.arg, self.err_pos, self.shape = arg, err_pos, shape
        self.val1, self.val2 = val1, val2
        self.abs_err, self.rel_err = abs_err, rel_err
        self.abs_tol, self.rel_tol = abs_tol, rel_tol

    def __str__(self):
        return (
            "GradientError: numeric gradient and analytic gradient exceed tolerance:\n"
            f"        At position {self.err_pos} of argument {self.arg} with shape "
            f"{self.shape},\n"
            f"            val1 = {self.val1:f}      ,  val2 = {self.val2:f}\n"
            f"            abs. error = {self.abs_err:f},  abs. tolerance = {self.abs_tol:f}\n"
            f"            rel. error = {self.rel_err:f},  rel. tolerance = {self.rel_tol:f}"
        )


def mode_not_slow(mode):
    """The mode to compute costs in: FAST_COMPILE and DebugMode become FAST_RUN."""
    name = mode if isinstance(mode, str) else type(mode).__name__ if mode is not None else None
    if name in ("FAST_COMPILE", "DebugMode", "DEBUG_MODE"):
        return "FAST_RUN"
    return mode


_TYPE_TOL = {"float16": 5e-2, "float32": 1e-2, "float64": 1e-4}


def verify_grad(
    fun,
    pt,
    n_tests=2,
    rng=None,
    eps=None,
    out_type=None,
    abs_tol=None,
    rel_tol=None,
    mode=None,
    cast_to_output_type=False,
    no_debug_ref=True,
):
    """Check ``grad`` of ``fun`` at ``pt`` against finite differences; raise on mismatch.

    ``fun`` takes one symbolic tensor per array of ``pt`` and returns one variable.
    The check differentiates ``sum(u * fun(*x))`` for a random ``u`` drawn from ``rng``
    (a ``numpy.random.Generator`` or ``RandomState``; a fixed seed if None), ``n_tests``
    times, and raises ``GradientError`` naming the argument, the position and both errors
    when both the absolute and relative errors exceed their tolerances.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> verify_grad(tt.tanh, [np.array([[2.0, 3.0], [-1.0, 3.3]])],
    ...             rng=np.random.default_rng(1))
    """
    from theano_dag.compile.function import function  # a checker that compiles: compile is above

    if not isinstance(pt, (list, tuple)):
        raise TypeError(f"verify_grad: pt must be a list of arrays, got {type(pt).__name__}")
    pt = [np.array(p) for p in pt]
    for i, p in enumerate(pt):
        if str(p.dtype) not in _TYPE_TOL:
            raise TypeError(
                f"verify_grad can work only with floating point inputs, but input "
                f"{i} has dtype {p.dtype}"
            )
    if abs_tol is None:
        abs_tol = max(_TYPE_TOL[str(p.dtype)] for p in pt)
    if rel_tol is None:
        rel_tol = max(_TYPE_TOL[str(p.dtype)] for p in pt)
    if rng is None:
        rng = np.random.default_rng(42)

    def uniform(shape):
        if isinstance(rng, np.random.Generator):
            return rng.random(shape)
        return rng.rand(*shape)

    def compile_(inputs, outputs, m):
        return function(
            inputs,
            outputs,
            mode=m,
            allow_input_downcast=True,
            on_unused_input="ignore",
            accept_inplace=True,
        )

    tensor_pt = [
        tt.TensorType(str(p.dtype), broadcastable=tuple(s == 1 for s in p.shape))(f"input {i}")
        for i, p in enumerate(pt)
    ]
    o_output = fun(*tensor_pt)
    if isinstance(o_output, (list, tuple)):
        raise NotImplementedError(
            "verify_grad can't check a function with several outputs; "
            "check each output separately"
        )
    o_output = tt.as_tensor_variable(o_output)
    o_fn_out = np.asarray(compile_(tensor_pt, o_output, mode)(*[p.copy() for p in pt]))

    def random_projection():
        # Elements in [0.5, 1.5): none so small that the finite difference loses precision.
        plain = np.asarray(uniform(o_fn_out.shape)) + 0.5
        if cast_to_output_type and o_output.dtype == "float32":
            return plain.astype("float32")
        return plain

    t_r = tt.TensorType(
        str(random_projection().dtype), broadcastable=tuple(s == 1 for s in o_fn_out.shape)
    )("random_projection")
    cost = tt.sum(t_r * o_output)
    cost_mode = mode_not_slow(mode) if no_debug_ref else mode
    cost_fn = compile_([*tensor_pt, t_r], cost, cost_mode)
    symbolic_grad = grad(cost, tensor_pt, disconnected_inputs="ignore")
    grad_fn = compile_([*tensor_pt, t_r], symbolic_grad, mode)

    for _ in range(n_tests):
        r = random_projection()
        num_grad = numeric_grad(
            lambda *xs, r=r: cost_fn(*xs, r), [p.copy() for p in pt], eps, out_type
        )
        analytic = [np.asarray(g) for g in grad_fn(*[p.copy() for p in pt], r)]
        max_arg, max_pos, max_abs, max_rel = num_grad.max_err(analytic, abs_tol, rel_tol)
        if max_abs > abs_tol and max_rel > rel_tol:
            gf = num_grad.gf
            raise GradientError(
                max_arg,
                max_pos,
                analytic[max_arg].shape,
                analytic[max_arg].ravel()[max_pos],
                gf[max_arg].ravel()[max_pos],
                max_abs,
                max_rel,
                abs_tol,
                rel_tol,
            )
