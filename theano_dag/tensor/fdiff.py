"""Finite-difference gradients of numpy functions (``numeric_grad``), used by
``theano_dag.gradient.verify_grad`` and reachable as ``theano.tensor.numeric_grad``."""

from __future__ import annotations

import numpy as np

__all__ = ["numeric_grad"]


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
