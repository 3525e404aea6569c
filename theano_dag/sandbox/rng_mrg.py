"""``theano.sandbox.rng_mrg``: Theano's MRG streams, drawing with its MRG31k3p generator.

MRG31k3p (L'Ecuyer and Touzin, "Fast combined multiple recursive generators with
multipliers of the form a = +-2^q +-2^r", 2000) combines two recurrences over 31-bit
integers, three values each: a state is six int32. Theano's ``MRG_RandomStreams`` draws
from many streams at once: a draw's state is a matrix of one row per stream, its rows
substreams 2**72 values apart, and each new draw of a stream object starts 2**134 values
further on. ``mrg_uniform`` is the draw: the state matrix in, the advanced matrix and the
values in (0, 1] out, value ``i`` from stream ``i % nstreams``. Here its loop is C code the
CPU engine compiles (numpy's, all streams at once, without a compiler), with the integer
arithmetic of Theano's C code, so a seed gives Theano's numbers; ``normal``,
``binomial``, ``multinomial`` and ``choice`` are built on it as Theano builds them
(Box-Muller on pairs of uniforms, comparisons with ``p``, cumulative sums), so they give
Theano's numbers too, the normal ones up to the last bit of ``log``,
``cos`` and ``sin``.

>>> import numpy as np
>>> import theano_dag
>>> import theano_dag.tensor as tt
>>> srng = MRG_RandomStreams(seed=234)
>>> h = tt.dmatrix("h")
>>> keep = srng.binomial(size=h.shape, p=0.5, dtype=h.dtype)
>>> dropout = theano_dag.function([h], h * keep / 0.5)
>>> set(np.unique(dropout(np.ones((4, 8))))) <= {0.0, 2.0}
True
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from theano_dag import tensor as tt
from theano_dag.config import config
from theano_dag.gradient.ops import undefined_grad
from theano_dag.graph.basic import Apply
from theano_dag.graph.null_type import disconnected_type, grad_undefined
from theano_dag.graph.op import _C_RUNNER, COp, Op
from theano_dag.graph.shared import check_cpu_target
from theano_dag.graph.utils import MethodNotDefined
from theano_dag.opt.rewrites.inplace import INPLACE_MAKERS
from theano_dag.sandbox.multinomial import ChoiceFromUniform, MultinomialFromUniform
from theano_dag.scalar.basic import upcast
from theano_dag.tensor.random.basic import TruncatedNormalRV
from theano_dag.tensor.random.op import _size_entries, as_size
from theano_dag.tensor.random.utils import RandomStreams
from theano_dag.tensor.sharedvar import tensor_constructor
from theano_dag.tensor.type import TensorType
from theano_dag.tensor.variable import as_tensor_variable

__all__ = [
    "MRG_RandomStream",
    "MRG_RandomStreams",
    "ff_2p72",
    "ff_2p134",
    "multMatVect",
    "guess_n_streams",
    "mrg_uniform",
]

# The standard deviation of a standard normal truncated to [-2, 2]
# (scipy.stats.truncnorm(-2, 2).std()).
_TRUNCATED_STD = 0.87962566103423978

M1 = 2147483647  # 2**31 - 1, the first recurrence's modulus
M2 = 2147462579  # 2**31 - 21069, the second's
# The recurrences as matrices over a component's last three values (newest first):
# x1 <- 2**22 x1[-2] + (2**7 + 1) x1[-3] mod M1, x2 <- 2**15 x2[-1] + (2**15 + 1) x2[-3] mod M2.
_A1 = ((0, 4194304, 129), (1, 0, 0), (0, 1, 0))
_A2 = ((32768, 0, 32769), (1, 0, 0), (0, 1, 0))


def _matmul_mod(a, b, m):
    return tuple(
        tuple(sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3)) for i in range(3)
    )


def _matpow_mod(a, e, m):
    out = ((1, 0, 0), (0, 1, 0), (0, 0, 1))
    while e:
        if e & 1:
            out = _matmul_mod(out, a, m)
        a, e = _matmul_mod(a, a, m), e >> 1
    return out


def _power(jump, e):
    return (_matpow_mod(jump[0], e, M1), _matpow_mod(jump[1], e, M2))


# Substreams start 2**72 values apart; a stream object's next draw 2**134 further on.
_SUBSTREAM = _power((_A1, _A2), 2**72)
_STREAM = _power((_A1, _A2), 2**134)


def _jump(states, jump, moduli=(M1, M2)):
    """Each row of ``states`` (six int32 per row) advanced by ``jump``, the pair of
    matrices of the two recurrences (modulo ``moduli``)."""
    s = np.asarray(states, dtype=np.int64).reshape(-1, 6)
    out = np.empty(s.shape, dtype=np.int64)
    for half, (mat, m) in enumerate(zip(jump, moduli)):
        a = np.array(mat, dtype=np.int64)
        x = s[:, 3 * half : 3 * half + 3]
        # each product < 2**62, reduced before the sum, as Theano's DotModulo does
        out[:, 3 * half : 3 * half + 3] = ((a[None] * x[:, None, :]) % m).sum(axis=2) % m
    return out.astype(np.int32)


def multMatVect(v, A, m1, B, m2):  # noqa: N802 (Theano's name)
    """``A`` times the first half of the six int32 ``v`` modulo ``m1``, ``B`` times the
    second half modulo ``m2`` (Theano's helper; its matrices are int64 3 x 3).

    >>> multMatVect(np.array([1, 2, 3, 4, 5, 6], "int32"), np.eye(3, dtype="int64"), 7,
    ...             2 * np.eye(3, dtype="int64"), 7).tolist()
    [1, 2, 3, 1, 3, 5]
    """
    return _jump(v, (np.asarray(A).tolist(), np.asarray(B).tolist()), (int(m1), int(m2)))[0]


def ff_2p72(rstate):
    """The state ``rstate`` (six int32) advanced by 2**72 values: the next substream.

    >>> ff_2p72(np.array([12345] * 6, dtype="int32")).dtype
    dtype('int32')
    """
    return _jump(rstate, _SUBSTREAM)[0]


def ff_2p134(rstate):
    """The state ``rstate`` advanced by 2**134 values: where the next draw's streams start."""
    return _jump(rstate, _STREAM)[0]


def substream_states(rstate, n_streams):
    """``n_streams`` states, row ``i`` being ``rstate`` advanced by ``i * 2**72`` values
    (by doubling: a block of rows jumps at once by the power of the jump it needs).

    >>> s = substream_states(np.array([12345] * 6, dtype="int32"), 3)
    >>> bool((s[2] == ff_2p72(ff_2p72(s[0]))).all())
    True
    """
    states = np.empty((n_streams, 6), dtype=np.int32)
    states[0] = rstate
    jump, have = _SUBSTREAM, 1
    while have < n_streams:
        take = min(have, n_streams - have)
        states[have : have + take] = _jump(states[:take], jump)  # jump is A ** have
        have += take
        jump = (_matmul_mod(jump[0], jump[0], M1), _matmul_mod(jump[1], jump[1], M2))
    return states


def _reduce(v, m):
    v -= (v >= m) * m  # branch-free: a masked subtract is several times slower here


def _advance(x):
    """One step of every stream: ``x`` holds their states, one row per value (6 x
    streams, int64), updated in place; returns the integers in [1, M1] that become the
    draws. In int64 this is exact; Theano's C code works in int32, whose wrapped sums
    its ``< 0 || >= M`` tests bring to the same values."""
    x11, x12, x13, x21, x22, x23 = x
    y1 = (x12 & 511) << 22
    y1 += x12 >> 9
    y1 += (x13 & 16777215) << 7
    y1 += x13 >> 24
    _reduce(y1, M1)
    y1 += x13
    _reduce(y1, M1)
    z = (x21 & 65535) << 15
    z += 21069 * (x21 >> 16)
    _reduce(z, M2)
    y2 = (x23 & 65535) << 15
    y2 += 21069 * (x23 >> 16)
    _reduce(y2, M2)
    y2 += x23
    _reduce(y2, M2)
    y2 += z
    _reduce(y2, M2)
    x[2], x[1], x[0] = x12, x11, y1  # (each row copied before the next is written)
    x[5], x[4], x[3] = x22, x21, y2
    k = y1 - y2
    k += (k <= 0) * M1
    return k


def _unit(k, dtype):
    """The integers ``k`` in [1, M1] as draws in (0, 1] of ``dtype``, rounded as Theano's
    C code rounds them (float32: the integer to float32, then a float32 product)."""
    if dtype == "float32":
        out = k.astype(np.float32)
        out *= np.float32(4.6566126e-10)
        return out
    if dtype == "float16":  # Theano's Python code: 15 bits, never 0
        return (((k & 0x7FFF) + 1) * float(np.float16(3.0458e-05))).astype(np.float16)
    return k * 4.656612873077392578125e-10  # 1 / 2**31


def mrg_draw(rstate, n, dtype):
    """``(new_state, draws)``: ``n`` draws of ``dtype`` from the streams of ``rstate``
    (one row each), draw ``i`` from stream ``i % nstreams``.

    >>> state = substream_states(np.array([12345] * 6, dtype="int32"), 4)
    >>> new, u = mrg_draw(state, 6, "float64")
    >>> u.shape, bool(((u > 0) & (u <= 1)).all()), new.dtype
    ((6,), True, dtype('int32'))
    """
    state = np.ascontiguousarray(np.asarray(rstate, dtype=np.int64).T)  # 6 x streams
    out = np.empty(n, dtype=dtype)
    streams = state.shape[1]
    for start in range(0, n, streams):
        k = min(streams, n - start)
        if k == streams:
            out[start : start + k] = _unit(_advance(state), dtype)
        else:  # the first k streams only
            part = np.ascontiguousarray(state[:, :k])
            out[start : start + k] = _unit(_advance(part), dtype)
            state[:, :k] = part
    return state.T.astype(np.int32), out


def guess_n_streams(size, warn=False):
    """Theano's number of streams for a draw of ``size``: a sixth of the values for a
    size of Python ints (all of them up to 6), at most 60 * 256; 60 * 256 when ``size``
    is symbolic (``warn``: with a warning).

    >>> guess_n_streams((10, 20)), guess_n_streams((3,)), guess_n_streams((1000, 1000))
    (33, 3, 15360)
    """
    if isinstance(size, (tuple, list)) and all(type(i) is int for i in size):
        n = math.prod(size)
        return min(n // 6 if n > 6 else n, 60 * 256)
    if warn:
        warnings.warn(
            f"MRG_RandomStreams cannot tell the number of streams from size {size}: 60 * 256",
            stacklevel=3,
        )
    return 60 * 256


# The draw loop in C (the CPU engine compiles it, as a COp's code; numpy's loop above is
# the fallback): one stream after the other as in Theano's, in int64 (exact, where int32
# would wrap), the draws rounded as above.
_C_LOOP = """
{
    const npy_int64 M1 = 2147483647, M2 = 2147462579;
    PyArrayObject* td_state = %(rstate)s;
    npy_intp td_streams, td_n = 1, td_dims[%(ndim_or_1)d];
    int td_i;
    if (PyArray_NDIM(td_state) != 2 || PyArray_DIM(td_state, 1) != 6
        || PyArray_TYPE(td_state) != NPY_INT32) {
        PyErr_SetString(PyExc_ValueError,
                        "mrg_uniform: the state must be an int32 matrix of 6 columns");
        %(fail)s
    }
    td_streams = PyArray_DIM(td_state, 0);
    if (td_streams == 0) {
        PyErr_SetString(PyExc_ValueError, "mrg_uniform: the state has no stream (no row)");
        %(fail)s
    }
    for (td_i = 0; td_i < %(ndim)d; td_i++) {
        td_dims[td_i] = (npy_intp)*(npy_int64*)PyArray_GETPTR1(%(size)s, td_i);
        td_n *= td_dims[td_i];
    }
    if (td_n > M1) {
        PyErr_SetString(PyExc_ValueError, "mrg_uniform draws at most 2**31 - 1 values");
        %(fail)s
    }
    Py_XDECREF(%(o_sample)s);
    %(o_sample)s = (PyArrayObject*)PyArray_EMPTY(%(ndim)d, td_dims, %(typenum)d, 0);
    if (%(o_sample)s == NULL) %(fail)s
    Py_XDECREF(%(o_rstate)s);
    if (%(inplace)d && PyArray_IS_C_CONTIGUOUS(td_state)) {
        Py_INCREF(td_state);
        %(o_rstate)s = td_state;
    } else {
        %(o_rstate)s = (PyArrayObject*)PyArray_NewCopy(td_state, NPY_CORDER);
        if (%(o_rstate)s == NULL) %(fail)s
    }
    {
        npy_int32* td_st = (npy_int32*)PyArray_DATA(%(o_rstate)s);
        %(ctype)s* td_out = (%(ctype)s*)PyArray_DATA(%(o_sample)s);
        npy_intp td_j;
        for (td_j = 0; td_j < td_n; td_j++) {
            npy_int32* s = td_st + (td_j %% td_streams) * 6;
            npy_int64 x11 = s[0], x12 = s[1], x13 = s[2], x21 = s[3], x22 = s[4], x23 = s[5];
            npy_int64 y1, y2, z, k;
            y1 = ((x12 & 511) << 22) + (x12 >> 9) + ((x13 & 16777215) << 7) + (x13 >> 24);
            if (y1 >= M1) y1 -= M1;
            y1 += x13;
            if (y1 >= M1) y1 -= M1;
            z = ((x21 & 65535) << 15) + 21069 * (x21 >> 16);
            if (z >= M2) z -= M2;
            y2 = ((x23 & 65535) << 15) + 21069 * (x23 >> 16);
            if (y2 >= M2) y2 -= M2;
            y2 += x23;
            if (y2 >= M2) y2 -= M2;
            y2 += z;
            if (y2 >= M2) y2 -= M2;
            s[0] = (npy_int32)y1; s[1] = (npy_int32)x11; s[2] = (npy_int32)x12;
            s[3] = (npy_int32)y2; s[4] = (npy_int32)x21; s[5] = (npy_int32)x22;
            k = y1 - y2;
            if (k <= 0) k += M1;
            td_out[td_j] = %(convert)s;
        }
    }
}
"""

_C_CONVERT = {
    "float32": ("npy_float32", "(npy_float32)k * 4.6566126e-10f"),
    "float64": ("npy_float64", "(npy_float64)k * 4.656612873077392578125e-10"),
}


class mrg_uniform(COp):  # noqa: N801 (Theano's name)
    """Uniform draws in (0, 1] of MRG31k3p: inputs the state matrix (int32, one row of
    six per stream) and the size, outputs the advanced state and the draws (Theano's
    ``mrg_uniform``). The draw loop is C code the CPU engine compiles, with numpy's
    (``mrg_draw``) where there is no compiler (float16 draws always). The inplace pass
    gives it its ``inplace`` twin where the function replaces the state by the new one
    anyway.

    >>> state = tt.constant(substream_states(np.array([7] * 6, dtype="int32"), 2))
    >>> new, u = mrg_uniform.new(state, 1, "float64", (3,))
    >>> u.eval().shape
    (3,)
    """

    __props__ = ("dtype", "ndim", "inplace")

    def __init__(self, dtype, ndim, inplace=False):
        self.dtype, self.ndim, self.inplace = np.dtype(dtype).name, int(ndim), bool(inplace)
        if self.dtype not in ("float16", "float32", "float64"):
            raise TypeError(f"mrg_uniform draws floats, not {self.dtype}")
        if self.inplace:
            self.destroy_map = {0: [0]}

    def __str__(self):
        where = "inplace" if self.inplace else "no_inplace"
        return f"mrg_uniform{{TensorType({self.dtype}, {self.ndim}d),{where}}}"

    @classmethod
    def new(cls, rstate, ndim, dtype, size):
        """``[new_state, draws]`` of ``size`` from the state ``rstate`` (Theano's)."""
        size = as_size(size, ndim=ndim, who="mrg_uniform: size")
        return cls(dtype, len(_size_entries(size)))(rstate, size)

    def make_node(self, rstate, size):
        rstate = as_tensor_variable(rstate)
        if rstate.ndim != 2 or rstate.dtype != "int32":
            raise TypeError(f"mrg_uniform: the state must be an int32 matrix, got {rstate.type}")
        size = as_size(size, ndim=self.ndim, who="mrg_uniform: size")
        if size.dtype != "int64":  # the C loop reads int64 lengths
            size = tt.cast(size, "int64")
        entries = _size_entries(size)
        if len(entries) != self.ndim:
            raise ValueError(f"mrg_uniform: size has {len(entries)} entries, expected {self.ndim}")
        draws = TensorType(self.dtype, shape=tuple(entries))()
        return Apply(self, [rstate, size], [rstate.type(), draws])

    def c_code(self, node, name, inputs, outputs, sub):
        if self.dtype not in _C_CONVERT:
            raise MethodNotDefined("mrg_uniform draws float16 in numpy")
        ctype, convert = _C_CONVERT[self.dtype]
        return _C_LOOP % {
            "rstate": inputs[0],
            "size": inputs[1],
            "o_rstate": outputs[0],
            "o_sample": outputs[1],
            "ndim": self.ndim,
            "ndim_or_1": max(self.ndim, 1),
            "typenum": np.dtype(self.dtype).num,
            "inplace": int(self.inplace),
            "ctype": ctype,
            "convert": convert,
            "fail": sub["fail"],
        }

    def c_code_cache_version(self):
        return (2,)

    def perform(self, node, inputs, output_storage, params=None):
        run = _c_loop(self, node) if self.dtype in _C_CONVERT else None
        if run is not None:
            run(inputs, output_storage)
            return
        rstate, size = inputs
        shape = tuple(int(s) for s in size)
        n = math.prod(shape)
        if rstate.ndim != 2 or rstate.shape[1] != 6 or rstate.dtype != np.int32:
            raise ValueError(
                f"mrg_uniform: the state must be an int32 matrix of 6 columns, got "
                f"{rstate.dtype} of shape {rstate.shape}"
            )
        if n > M1:
            raise ValueError(f"mrg_uniform draws at most 2**31 - 1 values, not {n}")
        if rstate.shape[0] == 0:
            raise ValueError("mrg_uniform: the state has no stream (no row)")
        new, draws = mrg_draw(rstate, n, self.dtype)
        if self.inplace:
            rstate[...] = new
            new = rstate
        output_storage[0][0] = new
        output_storage[1][0] = draws.reshape(shape)

    def make_py_thunk(self, node, storage_map, compute_map, no_recycling, debug=False):
        return Op.make_py_thunk(self, node, storage_map, compute_map, no_recycling, debug)

    def infer_shape(self, fgraph, node, input_shapes):
        size = node.inputs[1]
        return [input_shapes[0], tuple(size[i] for i in range(self.ndim))]

    def do_constant_folding(self, fgraph, node):
        return False  # a draw is not a constant

    def connection_pattern(self, node):
        return [[True, True], [False, False]]

    def L_op(self, inputs, outputs, output_grads):
        return [
            grad_undefined(self, 0, inputs[0], "no gradient through random sampling"),
            disconnected_type(),
        ]

    def R_op(self, inputs, eval_points):
        return [None, None]


# The C loop's runner per (op, input types), None after a failure to build it (which
# warns once: numpy's loop draws the same numbers). A call looks it up here once, not
# again in the engine's cache of runners.
_C_LOOPS: dict = {}


def _c_loop(op, node):
    if not config.cxx or _C_RUNNER[0] is None:
        return None  # no compiler asked for, or no engine to build with: numpy's loop
    key = (op, tuple(v.type for v in node.inputs))
    try:
        return _C_LOOPS[key]
    except KeyError:
        pass
    try:
        run = _C_RUNNER[0](op, node)
    except Exception as e:  # noqa: BLE001 (any failure of the compiler degrades)
        warnings.warn(
            f"mrg_uniform: its C loop did not build ({type(e).__name__}: {e}); drawing "
            "in numpy (the same numbers, slower)",
            stacklevel=2,
        )
        run = None
    _C_LOOPS[key] = run
    return run


def _mrg_inplace(node, i):
    op = node.op
    if i != 0 or op.inplace or node.inputs[0].type != node.outputs[0].type:
        return None
    return mrg_uniform(op.dtype, op.ndim, inplace=True)


# The inplace pass's registry (Theano's mrg_random_make_inplace): a draw whose function
# replaces its state by the new one anyway advances that state itself, not a copy.
INPLACE_MAKERS[mrg_uniform] = ((0,), _mrg_inplace)


def _check_target(target):
    """Theano's ``target`` of a draw (the device of its state): the CPU only here."""
    check_cpu_target(target, "MRG_RandomStreams: target")


class MRG_RandomStreams(RandomStreams):  # noqa: N801 (Theano's name)
    """Theano's ``MRG_RandomStreams(seed=12345)``: ``uniform``, ``normal``,
    ``truncated_normal``, ``binomial`` (``n=1``), ``multinomial`` (a row of ``pvals`` per
    draw) and ``choice`` (columns of a matrix ``p``) draw with MRG31k3p, as Theano's do;
    other draws (``binomial`` with ``n > 1``, ``choice`` of ``a``...) are those of
    :class:`~theano_dag.tensor.random.utils.RandomStreams`. ``seed`` is an int (0 <
    seed < 2**31 - 21069) or six ints; ``nstreams`` the number of streams of a draw
    (default: ``guess_n_streams(size)``).

    >>> MRG_RandomStreams(seed=1).uniform((3,), ndim=1).ndim
    1
    """

    def __init__(self, seed=12345):
        self.set_rstate(seed)  # first: its message, not numpy's, for a seed it refuses
        super().__init__(seed if isinstance(seed, (int, np.integer)) else list(seed))

    def set_rstate(self, seed):
        """Start the streams from ``seed``: an int (its six copies) or six ints, the first
        three below 2**31 - 1 and not all 0, the last three below 2**31 - 21069 and not
        all 0."""
        if isinstance(seed, (int, np.integer)):
            if not 0 < seed < M2:
                raise ValueError(f"MRG_RandomStreams: seed must be in (0, {M2}), got {seed}")
            self.rstate = np.array([seed] * 6, dtype="int32")
            return
        values = list(seed) if isinstance(seed, (list, tuple, np.ndarray)) else None
        if values is None or len(values) != 6:
            raise TypeError(f"MRG_RandomStreams: seed must be an int or six ints, got {seed!r}")
        for part, m in ((values[:3], M1), (values[3:], M2)):
            if all(v == 0 for v in part) or any(not 0 <= v < m for v in part):
                raise ValueError(
                    f"MRG_RandomStreams: seed {values}: each half must be in [0, {m}) and "
                    "not all 0"
                )
        self.rstate = np.array(values, dtype="int32")

    def inc_rstate(self):
        """Move the stream object's state 2**134 values on (where a next draw starts)."""
        self.rstate = ff_2p134(self.rstate)

    def get_substream_rstates(self, n_streams, dtype, inc_rstate=True):
        """The state matrix of a new draw: ``n_streams`` substreams of ``rstate``, 2**72
        values apart; then ``rstate`` moves on (``inc_rstate``)."""
        if not 0 < n_streams < 2**31:
            raise ValueError(f"MRG_RandomStreams: nstreams must be positive, got {n_streams}")
        states = substream_states(self.rstate, int(n_streams))
        if inc_rstate:
            self.inc_rstate()
        return states

    def n_streams(self, size):
        """The number of streams of a draw of ``size``: ``guess_n_streams(size)``."""
        return guess_n_streams(size)

    def seed(self, seed=None):
        """Restart every draw of this stream object from ``seed`` (default: its seed), as
        if it had just been made with it.

        >>> import theano_dag
        >>> srng = MRG_RandomStreams(seed=3)
        >>> u = srng.uniform((4,))
        >>> f = theano_dag.function([], u)
        >>> first = f()
        >>> srng.seed()
        >>> bool((f() == first).all())
        True
        """
        if seed is None:
            seed = self.default_instance_seed
        self.set_rstate(seed)
        super().seed(seed if isinstance(seed, (int, np.integer)) else list(seed))

    def _restart(self, entry):
        if len(entry) != 4:  # a draw of RandomStreams': a new generator
            super()._restart(entry)
            return
        state, new, size, nstreams = entry  # an MRG draw: new substreams, in order
        nstreams = self.n_streams(size) if nstreams is None else nstreams
        dtype = new.owner.outputs[1].dtype
        state.set_value(self.get_substream_rstates(nstreams, dtype), borrow=True)

    def _uniform01(self, size, ndim, dtype, nstreams):
        """Draws in (0, 1] of ``size`` from a new state matrix (Theano's ``mrg_uniform``
        output, with its ``rstate`` and ``update``)."""
        vector = as_size(size, ndim=ndim, who="MRG_RandomStreams: size")  # checked first
        # (an empty draw still gets one stream: Theano refuses a size with a 0 entry)
        n = max(self.n_streams(size), 1) if nstreams is None else nstreams
        state = tensor_constructor(self.get_substream_rstates(n, dtype), borrow=True)
        state.tag.is_rng = True
        new_state, u = mrg_uniform.new(state, ndim, dtype, vector)
        u.rstate, u.update = state, (state, new_state)
        state.default_update = new_state
        self.state_updates.append((state, new_state, size, nstreams))
        return u

    def uniform(
        self, size=None, low=0.0, high=1.0, ndim=None, dtype=None, nstreams=None, target="cpu"
    ):
        """Uniform draws between ``low`` and ``high`` (dtype: floatX upcast with theirs),
        ``u * (high - low) + low`` for ``u`` MRG31k3p's, as Theano's; ``size`` None: the
        shape ``low`` and ``high`` broadcast to.

        >>> u = MRG_RandomStreams(seed=1).uniform((100,), low=2.0, high=3.0).eval()
        >>> bool((u > 2).all() and (u <= 3).all())
        True
        """
        _check_target(target)
        low, high = as_tensor_variable(low), as_tensor_variable(high)
        dtype = dtype or upcast(config.floatX, low.dtype, high.dtype)
        low, high = undefined_grad(tt.cast(low, dtype)), undefined_grad(tt.cast(high, dtype))
        if size is None:
            size = (low + high).shape
        u = self._uniform01(size, ndim, dtype, nstreams)
        return u * (high - low) + low

    def normal(
        self,
        size=None,
        avg=0.0,
        std=1.0,
        ndim=None,
        dtype=None,
        nstreams=None,
        truncate=False,
        target="cpu",
    ):
        """Gaussian draws of mean ``avg`` and standard deviation ``std`` by Box-Muller on
        pairs of MRG uniforms (Theano's); with ``truncate=True``, draws of the normal
        truncated to two ``std`` of ``avg`` (their standard deviation is then about
        ``0.88 * std``), by rejection: Theano's redraw of the radius leaves its law about
        1% off, so these numbers are not Theano's.

        >>> srng = MRG_RandomStreams(seed=1)
        >>> x = srng.normal((1000,), avg=1.0, std=2.0, truncate=True).eval()
        >>> bool(x.min() >= -3.0 and x.max() <= 5.0)
        True
        """
        _check_target(target)
        avg, std = as_tensor_variable(avg), as_tensor_variable(std)
        dtype = dtype or upcast(config.floatX, avg.dtype, std.dtype)
        if truncate:
            # Not Theano's redraw of the radius at the same angle, which leaves its law
            # about 1% off a truncated normal's (a Kolmogorov-Smirnov test of 20,000
            # draws rejects it): rejection, exact, with numbers of its own.
            return self._draw(TruncatedNormalRV(dtype), [avg, std], size, ndim)
        avg, std = undefined_grad(tt.cast(avg, dtype)), undefined_grad(tt.cast(std, dtype))
        if size is None:
            size = (avg + std).shape
        size = as_size(size, ndim=ndim, who="MRG_RandomStreams.normal: size")
        n_odd = tt.prod(size, dtype="int64")
        n_even = n_odd + n_odd % 2
        u = self.uniform((n_even,), 0.0, 1.0, ndim=1, dtype=dtype, nstreams=nstreams, target=target)
        u1, u2 = u[: n_even // 2], u[n_even // 2 :]
        r = tt.sqrt(-2.0 * tt.log(u1))
        theta = np.array(2.0 * np.pi, dtype=dtype) * u2
        cos_theta, sin_theta = tt.cos(theta), tt.sin(theta)
        z0, z1 = r * cos_theta, r * sin_theta
        values = tt.join(0, z0, z1)
        samples = tt.reshape(values[:n_odd], size, ndim=len(_size_entries(size)))
        return samples * std + avg

    def truncated_normal(
        self, size=None, avg=0.0, std=1.0, ndim=None, dtype=None, nstreams=None, target="cpu"
    ):
        """Gaussian draws kept within two standard deviations, of mean ``avg`` and
        standard deviation ``std`` (Theano's: ``normal(truncate=True)`` of a wider
        normal, ``std / 0.8796...``).

        >>> x = MRG_RandomStreams(seed=1).truncated_normal((20000,), std=2.0).eval()
        >>> round(float(x.std()), 1)
        2.0
        """
        std = std / tt.constant(_TRUNCATED_STD)
        return self.normal(
            size, avg, std, ndim=ndim, dtype=dtype, nstreams=nstreams, truncate=True, target=target
        )

    def binomial(
        self, size=None, n=1, p=0.5, ndim=None, dtype="int64", nstreams=None, target="cpu"
    ):
        """Successes in ``n`` trials of probability ``p`` (Theano's order: ``size, n, p``);
        with ``n=1`` (Theano's only case) MRG uniforms below ``p``.

        >>> srng = MRG_RandomStreams(seed=1)
        >>> sorted(set(srng.binomial((50,), 1, 0.5).eval().tolist()))
        [0, 1]
        """
        _check_target(target)
        if isinstance(n, (int, np.integer)) and n == 1:
            p = undefined_grad(as_tensor_variable(p))
            if size is None:
                size = p.shape
            u = self.uniform(size=size, ndim=ndim, nstreams=nstreams, target=target)
            return tt.cast(u < p, dtype)
        return super().binomial(size, n=n, p=p, ndim=ndim, dtype=dtype)

    def multinomial(
        self, size=None, n=1, pvals=None, ndim=None, dtype="int64", nstreams=None, target="cpu"
    ):
        """One-hot rows (``n=1``) or counts of ``n`` draws: per row of the matrix
        ``pvals``, from MRG uniforms (Theano's ``MultinomialFromUniform``); with a
        ``size`` or a ``pvals`` of another rank, the draws of ``RandomStreams``.

        >>> import numpy as np
        >>> srng = MRG_RandomStreams(seed=1)
        >>> srng.multinomial(pvals=np.array([[0.0, 1.0], [1.0, 0.0]])).eval().tolist()
        [[0, 1], [1, 0]]
        """
        _check_target(target)
        if pvals is None:
            raise TypeError("MRG_RandomStreams.multinomial: pvals (a matrix) is required")
        pvals = as_tensor_variable(pvals)
        if size is not None or ndim is not None or pvals.ndim != 2:
            return super().multinomial(size, n, pvals, ndim, dtype)
        pvals = undefined_grad(pvals)
        unis = self.uniform(size=pvals[:, 0].shape * n, ndim=1, nstreams=nstreams, target=target)
        return MultinomialFromUniform(dtype)(pvals, unis, as_tensor_variable(n))

    def choice(
        self,
        size=1,
        a=None,
        replace=True,
        p=None,
        ndim=None,
        dtype="int64",
        nstreams=None,
        target="cpu",
    ):
        """Theano's MRG ``choice``: with ``a=None`` and ``p`` a matrix, ``size`` distinct
        column indices per row of ``p``, drawn one after the other from MRG uniforms with
        probabilities ``p``'s row among the columns not drawn yet (without replacement
        only, as Theano's ``ChoiceFromUniform``); otherwise the ``choice`` of Theano 1.0's
        ``RandomStreams`` (``a`` defaulting to 2).

        >>> import numpy as np
        >>> srng = MRG_RandomStreams(seed=1)
        >>> p = np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
        >>> rows = srng.choice(size=2, replace=False, p=p).eval()
        >>> sorted(rows[0].tolist()), int(rows[1, 0])
        ([1, 2], 0)
        """
        _check_target(target)
        rows = None if p is None else as_tensor_variable(p)
        if a is None and rows is not None and rows.ndim == 2:
            if replace:
                raise NotImplementedError(
                    "MRG_RandomStreams.choice with a matrix p draws without replacement "
                    "only: pass replace=False"
                )
            if ndim is not None:
                raise ValueError("MRG_RandomStreams.choice: ndim is not used with a matrix p")
            k = as_tensor_variable(size)
            if k.ndim != 0 or not k.dtype.startswith(("int", "uint")):
                raise TypeError(f"MRG_RandomStreams.choice: size must be an int, got {size!r}")
            rows = undefined_grad(rows)  # the draws are not differentiable in p (Theano's)
            unis = self.uniform(size=rows[:, 0].shape * k, ndim=1, nstreams=nstreams, target=target)
            return ChoiceFromUniform(odtype=dtype)(rows, unis, k)
        return super().choice(
            size, a=2 if a is None else a, replace=replace, p=p, ndim=ndim, dtype=dtype
        )

    def multinomial_wo_replacement(
        self, size=None, n=1, pvals=None, ndim=None, dtype="int64", nstreams=None, target="cpu"
    ):
        """Theano's deprecated name for ``choice(size=n, replace=False, p=pvals)``.

        >>> import numpy as np, warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     d = MRG_RandomStreams(seed=1).multinomial_wo_replacement(pvals=np.eye(2))
        >>> d.eval().tolist()
        [[0], [1]]
        """
        warnings.warn(
            "MRG_RandomStreams.multinomial_wo_replacement is deprecated (as in Theano): "
            "use choice(size=n, replace=False, p=pvals)",
            DeprecationWarning,
            stacklevel=2,
        )
        if size is not None:
            raise ValueError(
                "MRG_RandomStreams.multinomial_wo_replacement: size must be None (n gives "
                "the number of draws per row of pvals)"
            )
        return self.choice(
            size=n, replace=False, p=pvals, ndim=ndim, dtype=dtype, nstreams=nstreams, target=target
        )


# Theano 1.1.2's name for the class (MRG_RandomStreams is the older one, still used).
MRG_RandomStream = MRG_RandomStreams
