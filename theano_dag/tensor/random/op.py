"""``RandomVariable``: an Op that draws from a distribution with a numpy generator
(``theano.tensor.random.op``).

A draw node has inputs ``(rng, size, *params)`` and outputs ``(new_rng, draws)``:

* ``rng`` holds a ``numpy.random.Generator`` (or a legacy ``RandomState``), usually in a
  shared variable. The op draws from a copy and returns the advanced copy as
  ``new_rng``, so the input's state stays as it was. Making ``new_rng`` the shared
  variable's ``default_update`` (what ``RandomStream`` does) gives fresh draws on every
  call of a compiled function, and the same draws for the same seed. When nothing else
  reads ``rng`` and the function replaces it by ``new_rng`` anyway, the inplace pass
  (``opt.rewrites.inplace``) gives the node the op's ``inplace`` twin, which advances
  the generator itself (Theano's ``random_make_inplace``): copying a generator's state
  costs more than a small draw.
* ``size`` is an int64 vector (empty: the shape the parameters broadcast to).
* ``params`` are the distribution's parameters, tensors broadcasting against ``size``.

An op is called either with the node's inputs, ``op(rng, size, *params)`` (the outputs
``[new_rng, draws]``), or as Theano 1.1.2's distributions are, numpy-like:
``op(*params, size=None, rng=None, dtype=None)`` (the draws; see
:meth:`RandomVariable.draw`).
"""

from __future__ import annotations

import copy

import numpy as np

from theano_dag.config import config
from theano_dag.graph.basic import Apply, Variable
from theano_dag.graph.null_type import disconnected_type, grad_undefined
from theano_dag.graph.op import Op
from theano_dag.graph.shared import SharedVariable
from theano_dag.graph.type import Generic
from theano_dag.tensor.basic import get_vector_length
from theano_dag.tensor.elemwise import broadcast_static_shape
from theano_dag.tensor.shape import _shape_entries, as_int_vector, make_vector
from theano_dag.tensor.type import TensorType, int_dtypes, uint_dtypes
from theano_dag.tensor.type_other import NoneConst
from theano_dag.tensor.variable import as_tensor_variable, constant

__all__ = [
    "RandomGeneratorType",
    "random_generator_type",
    "RandomVariable",
    "as_size",
    "default_shape_from_params",
    "Observed",
    "observed",
]

_GENERATORS = (np.random.Generator, np.random.RandomState)


class RandomGeneratorType(Generic):
    """The type of numpy random generators (``Generator``, or a legacy ``RandomState``).

    >>> import numpy as np
    >>> t = RandomGeneratorType()
    >>> t.is_valid_value(np.random.default_rng(0)), t.is_valid_value(3)
    (True, False)
    """

    __props__ = ()

    def filter(self, data, strict=False, allow_downcast=None):
        if isinstance(data, _GENERATORS):
            return data
        raise TypeError(
            f"{self} expected a numpy.random.Generator or RandomState, got {type(data).__name__}"
        )

    def is_valid_value(self, data) -> bool:
        return isinstance(data, _GENERATORS)

    @staticmethod
    def values_eq(a, b) -> bool:
        return type(a) is type(b) and _state(a) == _state(b)

    def __str__(self):
        return "RandomGeneratorType"

    __repr__ = __str__


def _state(rng):
    if isinstance(rng, np.random.Generator):
        return repr(rng.bit_generator.state)
    return repr(rng.get_state(legacy=False))


random_generator_type = RandomGeneratorType()


def as_size(size, ndim=None, who="size"):
    """``size`` (None, an int, a tuple of ints/int scalars, or an int vector) as an int64
    vector whose length is known at build time (``ndim`` says it for a symbolic vector).

    >>> as_size(None).data.shape, as_size((2, 3)).data.tolist()
    ((0,), [2, 3])
    """
    if size is None:
        vec = constant(np.zeros(0, dtype="int64"))
    elif isinstance(size, (list, tuple)):
        vec = as_int_vector(list(size), who) if size else constant(np.zeros(0, dtype="int64"))
    else:
        vec = as_int_vector(size, who)
    n = _known_length(vec)
    if n is None:
        if ndim is None:
            raise ValueError(
                f"{who}: the length of the size vector {vec} is not known when the graph is "
                "built; pass ndim= (the number of dimensions of the draws)"
            )
        vec = make_vector(*[vec[i] for i in range(ndim)])
    elif ndim is not None and n not in (0, ndim):
        raise ValueError(f"{who}: size {size} has {n} entries, but ndim={ndim}")
    if any(e is not None and e < 0 for e in _size_entries(vec)):
        raise ValueError(f"{who}: size {size} has a negative entry")
    return vec


def _known_length(vec):
    try:
        return get_vector_length(vec)
    except ValueError:
        return None


def _size_entries(vec):
    """Static entries of the size vector (None where symbolic)."""
    entries = _shape_entries(vec)
    return [None] * _known_length(vec) if entries is None else entries


class RandomVariable(Op):
    """Base class of the draw ops; a subclass sets ``name`` (Theano's: the distribution's
    name, ``"normal"``; the op prints as ``normal_rv{dtype}``), ``param_names``,
    ``default_dtype`` and, unless the generator's method of that name draws it,
    ``draw_numpy``.

    >>> from theano_dag.tensor.random.basic import NormalRV
    >>> NormalRV("float64")
    normal_rv{float64}
    """

    __props__ = ("dtype", "inplace")
    name = "random_variable"
    param_names: tuple = ()
    default_dtype = "floatX"
    # The inplace twin (made by the inplace pass, :meth:`inplace_twin`) draws from its
    # input generator itself and returns it as the new one.
    inplace = False
    destroy_map: dict = {}

    def __init__(self, dtype=None):
        # what was asked for: "floatX" is looked up again by each numpy-like call, so
        # the module-level distributions (``basic.normal``) follow config changes
        self.asked_dtype = dtype or self.default_dtype
        self.dtype = _resolve_dtype(self.asked_dtype)

    def __str__(self):
        return f"{self.name}_rv{{{self.dtype}{', inplace' if self.inplace else ''}}}"

    __repr__ = __str__

    def inplace_twin(self):
        """This op advancing its input generator instead of a copy of it (what the
        inplace pass puts where the function replaces the generator by the new one).

        >>> from theano_dag.tensor.random.basic import NormalRV
        >>> op = NormalRV("float64").inplace_twin()
        >>> op, op.destroy_map
        (normal_rv{float64, inplace}, {0: [0]})
        """
        op = copy.copy(self)
        op.inplace = True
        op.destroy_map = {0: [0]}
        return op

    def rng_fn(self, rng, *args, size=None):
        """Numeric draws from the numpy generator ``rng`` (None: a new unseeded one) for
        the parameter values ``args``, Theano's signature: ``size`` (None: the parameters'
        shape) a keyword or the last positional argument.

        >>> import numpy as np
        >>> from theano_dag.tensor.random.basic import normal
        >>> normal.rng_fn(np.random.default_rng(0), 0.0, 1.0, (2,)).shape
        (2,)
        """
        if len(args) == len(self.param_names) + 1:
            *args, size = args
        if rng is None:
            rng = np.random.default_rng()
        if size is not None:
            size = tuple(np.atleast_1d(size).tolist())
        return self.draw_numpy(rng, *args, size=size)

    def draw_numpy(self, rng, *params, size):
        """The draws of a subclass: by default the generator's method of the
        distribution's name (as Theano's ``rng_fn``)."""
        return getattr(rng, self.name)(*params, size=size)

    # -- building draws ----------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], Variable) and isinstance(args[0].type, Generic):
            return super().__call__(*args, **kwargs)  # the node's inputs (rng, size, *params)
        _refuse_generators(self, args)
        return self.draw(*args, **kwargs)

    def draw(self, *params, size=None, rng=None, dtype=None, ndim=None, name=None):
        """The draws, numpy-like: the distribution's parameters first (a subclass names
        them and gives their defaults, as Theano 1.1.2's ``RandomVariable.__call__``),
        then the keywords of :meth:`draw_params`.

        >>> from theano_dag.tensor.random.basic import normal
        >>> normal(3.0, 1e-9, size=(2,)).eval().round().tolist()
        [3.0, 3.0]
        """
        return self.draw_params(params, size=size, rng=rng, dtype=dtype, ndim=ndim, name=name)

    def draw_params(self, params, size=None, rng=None, dtype=None, ndim=None, name=None):
        """The draws for the node's parameters ``params`` (in ``param_names`` order).

        ``size`` is None (the parameters' broadcast shape), an int, a tuple of ints or int
        scalars, or an int vector (``ndim`` gives its length when not known); ``rng`` a
        variable holding a numpy generator (None: a new, unseeded shared one); ``dtype``
        the draws' dtype (None: the op's). The draws carry ``rng`` and ``update``, the
        ``(rng, new_rng)`` pair to make ``rng``'s update for fresh draws per call.

        >>> import numpy as np
        >>> from theano_dag.tensor.random.basic import uniform
        >>> u = uniform.draw_params([2.0, 3.0], size=3, dtype="float32")
        >>> u.type, u.update[1] is u.owner.outputs[0]
        (TensorType(float32, shape=(3,)), True)
        """
        _refuse_generators(self, params)
        op = self.with_dtype(dtype)
        if rng is None:
            rng = SharedVariable(type=random_generator_type, value=np.random.default_rng())
        size = as_size(size, ndim=ndim, who=f"{op}: size")
        new_rng, out = Op.__call__(op, rng, size, *params)
        if name is not None:
            out.name = name
        out.rng = rng
        out.update = (rng, new_rng)
        return out

    def with_dtype(self, dtype=None):
        """This op drawing ``dtype`` (None: the dtype it was asked for, floatX looked up
        now).

        >>> from theano_dag.tensor.random.basic import NormalRV
        >>> NormalRV("float64").with_dtype("float32")
        normal_rv{float32}
        """
        dtype = _resolve_dtype(dtype or self.asked_dtype)
        if dtype == self.dtype:
            return self
        op = copy.copy(self)
        op.asked_dtype = op.dtype = dtype
        return op

    # -- the pieces a subclass may change -------------------------------------------------

    def check_params(self, params):
        """Raise TypeError for a parameter of the wrong kind (named in the message)."""
        for name, p in zip(self.param_names, params):
            if p.dtype.startswith("complex") or p.dtype == "bool":
                raise TypeError(f"{self}: parameter {name} must be real numbers, got {p.type}")

    def static_shape(self, size_entries, params):
        """The draws' static shape (None for unknown lengths)."""
        if size_entries:
            return tuple(size_entries)
        return broadcast_static_shape([p.type.shape for p in params], str(self))

    def symbolic_shape(self, size, param_shapes, params):
        """The draws' shape as scalars (for ``infer_shape``)."""
        n = size_length(size)
        if n:
            return tuple(size[i] for i in range(n))
        return _broadcast_symbolic(param_shapes, params)

    def _infer_shape(self, size, dist_params, param_shapes=None):
        """The draws' shape, one scalar per dimension, for ``size`` (a tuple of ints or
        int scalars, or an int vector; empty: from the parameters) and the parameters
        ``dist_params`` (``param_shapes``: their shapes, if known better; Theano's name).

        >>> import numpy as np
        >>> from theano_dag import tensor as tt
        >>> from theano_dag.tensor.random.basic import normal
        >>> m = tt.lscalar("m")
        >>> shape = normal._infer_shape((2, m), [np.zeros(3), 1.0])
        >>> [int(s.eval({m: 3})) if s.owner else int(s.eval()) for s in shape]
        [2, 3]
        """
        size = as_size(size if size is not None and len(size) else None, who=f"{self}: size")
        params = [as_tensor_variable(p) for p in dist_params]
        if param_shapes is None:
            param_shapes = [tuple(p.shape[i] for i in range(p.ndim)) for p in params]
        return self.symbolic_shape(size, param_shapes, params)

    # -- the Op ------------------------------------------------------------------------------

    def make_node(self, rng, size, *params):
        if not isinstance(rng, Variable) or not isinstance(rng.type, Generic):
            raise TypeError(
                f"{self}: rng must be a variable holding a numpy random generator (for "
                f"instance shared(np.random.default_rng(seed))), got {rng!r}"
            )
        if len(params) != len(self.param_names):
            raise TypeError(
                f"{self}: expected {len(self.param_names)} parameters "
                f"{self.param_names}, got {len(params)}"
            )
        size = as_size(size, who=f"{self}: size")
        params = [as_tensor_variable(p) for p in params]
        self.check_params(params)
        shape = self.static_shape(_size_entries(size), params)
        draws = TensorType(self.dtype, shape=shape)()
        return Apply(self, [rng, size, *params], [rng.type(), draws])

    def perform(self, node, inputs, output_storage, params=None):
        rng, size, *ps = inputs
        if not isinstance(rng, _GENERATORS):
            raise TypeError(
                f"{self}: the rng input holds a {type(rng).__name__}, expected a "
                "numpy.random.Generator or RandomState"
            )
        if not self.inplace:
            rng = copy.deepcopy(rng)  # the input state stays as it was (no destroy_map)
        shape = tuple(int(s) for s in size) or None
        try:
            draws = self.rng_fn(rng, *ps, size=shape)
        except ValueError as e:
            raise ValueError(
                f"{self}: cannot draw with size {shape} and parameters of shapes "
                f"{[np.shape(p) for p in ps]}: {e}"
            ) from None
        output_storage[0][0] = rng
        output_storage[1][0] = np.asarray(draws, dtype=self.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        _, size, *params = node.inputs
        return [None, self.symbolic_shape(size, input_shapes[2:], params)]

    def do_constant_folding(self, fgraph, node):
        return False  # a draw is not a constant, whatever its inputs

    def connection_pattern(self, node):
        # Outputs [new rng, draws]: the draws depend on the generator's state (Theano's
        # OpFromGraph and scan read that from here), not on size's values.
        return [[True, True], [False, False]] + [[False, True]] * (len(node.inputs) - 2)

    def L_op(self, inputs, outputs, output_grads):
        return [
            grad_undefined(self, 0, inputs[0], "a random generator has no gradient"),
            disconnected_type(),
        ] + [
            grad_undefined(self, k + 2, p, "the draws are not differentiable in the parameters")
            for k, p in enumerate(inputs[2:])
        ]


def _refuse_generators(op, params):
    if any(isinstance(p, _GENERATORS) for p in params):
        raise TypeError(
            f"{op}: a numpy generator among the parameters; pass it as "
            "rng=shared(generator), or call op(rng_variable, size, *params)"
        )


def _resolve_dtype(dtype):
    return config.floatX if dtype == "floatX" else np.dtype(dtype).name


def _broadcast_symbolic(param_shapes, params):
    nd = max((p.ndim for p in params), default=0)
    out = []
    for d in range(nd):
        length = 1
        for p, shp in zip(params, param_shapes):
            k = d - (nd - p.ndim)
            if k >= 0 and not p.type.broadcastable[k]:
                length = shp[k]  # the parameters agree (or numpy raises at run time)
                break
        out.append(length)
    return tuple(out)


def int_param(p):
    """Whether the parameter ``p`` holds integers."""
    return p.dtype in int_dtypes + uint_dtypes


def size_length(size):
    """The number of entries of a draw node's size input."""
    return len(_size_entries(size))


def default_shape_from_params(ndim_supp, dist_params, rep_param_idx=0, param_shapes=None):
    """The shape of one draw of a distribution whose draws have ``ndim_supp`` dimensions
    (a vector: 1), read from the last ``ndim_supp`` dimensions of the parameter
    ``rep_param_idx`` (or of its shape in ``param_shapes``): Theano's helper.

    >>> import numpy as np
    >>> default_shape_from_params(2, (np.ones(2), np.ones((2, 3, 4))), rep_param_idx=1)
    (3, 4)
    """
    if ndim_supp <= 0:
        raise ValueError("ndim_supp must be greater than 0")
    if param_shapes is not None:
        return tuple(param_shapes[rep_param_idx])[-ndim_supp:]
    ref = dist_params[rep_param_idx]
    if not hasattr(ref, "ndim"):
        ref = np.asarray(ref)
    if ref.ndim < ndim_supp:
        raise ValueError(
            f"Reference parameter does not match the expected dimensions; {ref} has less "
            f"than {ndim_supp} dim(s)."
        )
    shape = ref.shape
    return tuple(shape[-ndim_supp:]) if isinstance(shape, tuple) else shape[-ndim_supp:]


class Observed(Op):
    """``observed(rv, value)``: ``value``, marked as an observation of the random variable
    ``rv`` (None: of no variable); the two must be of one type. Its value is ``value``,
    and the gradient with respect to the value is undefined (Theano 1.1.2's op).

    >>> import numpy as np
    >>> from theano_dag.tensor.random.basic import normal
    >>> x = normal(0.0, 1.0, size=(2,))
    >>> observed(x, np.array([0.5, -1.0])).eval().tolist()
    [0.5, -1.0]
    """

    __props__ = ()
    view_map = {0: [1]}

    def make_node(self, rv, val):
        val = as_tensor_variable(val)
        if rv is None:
            rv = NoneConst.clone()
        elif not _may_hold(getattr(rv, "type", None), val.type):
            raise TypeError(
                f"observed: the value's type {val.type} does not fit the random variable "
                f"{rv} of type {getattr(rv, 'type', None)}"
            )
        return Apply(self, [rv, val], [val.type()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = inputs[1]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[1]]

    def L_op(self, inputs, outputs, output_grads):
        return [
            disconnected_type(),
            grad_undefined(self, 1, inputs[1], "an observed value has no gradient"),
        ]

    def connection_pattern(self, node):
        return [[False], [True]]


observed = Observed()


def _may_hold(rv_type, val_type):
    """Whether a value of ``val_type`` may be a draw of ``rv_type``: one dtype, one number
    of dimensions, and lengths that agree where both are known."""
    return (
        isinstance(rv_type, TensorType)
        and rv_type.dtype == val_type.dtype
        and rv_type.ndim == val_type.ndim
        and all(a is None or b is None or a == b for a, b in zip(rv_type.shape, val_type.shape))
    )
