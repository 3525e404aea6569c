"""Checking gradients by finite differences: ``numeric_grad`` and ``verify_grad``.

``verify_grad(fun, pt)`` compares ``grad`` of a random projection ``sum(u * fun(*x))``
with a one-sided finite-difference estimate at ``pt`` (Theano's method; the random
projection turns any output into a scalar and catches wrong entries anywhere).
"""

from __future__ import annotations

import numpy as np

from theano_dag import sparse as sp_ops
from theano_dag import tensor as tt
from theano_dag.gradient.reverse import grad
from theano_dag.sparse.type import is_sparse_value

# The finite differences themselves are plain numpy, kept with the tensor vocabulary
# (theano.tensor.numeric_grad is a Theano name too).
from theano_dag.tensor.fdiff import numeric_grad

__all__ = ["numeric_grad", "verify_grad", "verify_grad_sparse", "GradientError", "mode_not_slow"]


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
    """The mode to compute costs in: FAST_COMPILE and DebugMode become FAST_RUN.

    >>> mode_not_slow("FAST_COMPILE"), mode_not_slow("PerformOnly")
    ('FAST_RUN', 'PerformOnly')
    """
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
        # A dense input may have a sparse gradient (sparse_grad(x[ilist])): its values.
        analytic = [
            g.toarray() if is_sparse_value(g) else np.asarray(g)
            for g in grad_fn(*[p.copy() for p in pt], r)
        ]
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


def verify_grad_sparse(op, pt, structured=False, *args, **kwargs):
    """``verify_grad`` for ``op`` (an Op or function) whose inputs or output are sparse
    (Theano's ``theano.sparse.verify_grad_sparse``).

    ``pt`` holds scipy.sparse matrices and arrays. With ``structured=False`` the check is
    over every entry of each sparse input (the matrices are varied as dense ones); with
    ``structured=True`` only over their stored entries (the pattern is held fixed), for
    the ops whose gradient is structured. Other arguments go to :func:`verify_grad`.

    >>> import numpy as np, scipy.sparse as sp
    >>> from theano_dag import sparse
    >>> x = sp.csr_matrix(np.array([[0.0, 2.0], [3.0, 0.0]]))
    >>> verify_grad_sparse(sparse.structured_exp, [x], structured=True)
    >>> verify_grad_sparse(sparse.neg, [x])
    """
    pt = list(pt)
    kinds = [(p.format, p) if is_sparse_value(p) else None for p in pt]

    def as_input(var, kind):
        if kind is None:
            return var
        fmt, value = kind
        if structured:
            return sp_ops.CSM(fmt)(var, value.indices, value.indptr, value.shape)
        return sp_ops.SparseFromDense(fmt)(var)

    def fun(*xs):
        out = op(*[as_input(x, k) for x, k in zip(xs, kinds)])
        if sp_ops.variable._is_sparse_variable(out):
            out = sp_ops.DenseFromSparse(structured=structured)(out)
        return out

    if structured:
        dense_pt = [p.data if k else p for p, k in zip(pt, kinds)]
    else:
        dense_pt = [p.toarray() if k else p for p, k in zip(pt, kinds)]
    verify_grad(fun, dense_pt, *args, **kwargs)
