"""``function``: compile symbolic inputs and outputs into a callable (``theano.function``).

``function`` first rebuilds the user's graph (``rebuild_collect_shared``):
``givens`` are substituted, the shared variables the graph reads are
collected (they become implicit inputs), and ``updates`` plus the shared
variables' ``default_update`` become update expressions. A FunctionMaker then
optimizes and links the graph. Everything is iterative, so graphs of any
depth compile.
"""

from __future__ import annotations

import pickle

from theano_dag.compile.function_module import (
    DuplicateInputError,
    FunctionMaker,
    UnusedInputError,
)
from theano_dag.compile.io import In, SymbolicOutput, convert_function_input, update_type_fits
from theano_dag.compile.sharedvalue import SharedVariable, shared
from theano_dag.graph.algorithms import post_order
from theano_dag.graph.basic import Constant, Variable
from theano_dag.graph.utils import (
    gc_paused,  # re-exported: its old home
    user_location,
)

__all__ = ["function", "function_dump", "pfunc", "rebuild_collect_shared"]


def _pairs(pairs, what):
    """Iterate ``(key, value)`` pairs of a dict or of a list of 2-sequences."""
    if pairs is None:
        return []
    if isinstance(pairs, dict):
        return list(pairs.items())
    pairs = list(pairs)
    for p in pairs:
        if isinstance(p, Variable) or not isinstance(p, (tuple, list)) or len(p) != 2:
            raise ValueError(
                f"The {what} parameter must be a dict or a list of (variable, expression) "
                f"pairs; got an element {p!r}"
            )
    return [tuple(p) for p in pairs]


def rebuild_collect_shared(
    outputs,
    inputs=None,
    replace=None,
    updates=None,
    rebuild_strict=True,
    copy_inputs_over=True,
    no_default_updates=False,
):
    """Rebuild ``outputs`` with ``replace`` substituted; collect shared variables and updates.

    Returns ``(input_variables, cloned_outputs, [clone_d, update_d, update_expr,
    shared_inputs])`` like Theano: ``update_expr`` is the list of
    ``(shared_variable, cloned_update)`` pairs, explicit ones first, and
    ``shared_inputs`` lists every shared variable met, in order.
    """
    clone_d: dict = {}
    update_d: dict = {}
    update_expr: list = []
    shared_inputs: list = []

    def visit_leaf(v):
        if isinstance(v, SharedVariable):
            if v not in shared_inputs:
                shared_inputs.append(v)
            default = v.default_update
            wants_default = no_default_updates is False or (
                isinstance(no_default_updates, list) and v not in no_default_updates
            )
            if default is not None and wants_default and v not in update_d:
                upd = _check_update(v, default)
                update_d[v] = upd
                update_expr.append((v, upd))
        clone_d[v] = v if copy_inputs_over else v.clone()

    def clone_graph(variables):
        """Clone what ``variables`` depend on, stopping at what ``clone_d`` already maps.

        The leaves met are visited in the order of the variables: those each variable
        needs (in its nodes' order), then the variable itself if it is a leaf."""
        # The nodes not cloned yet: clone_d is not copied per output (a list of all
        # that is mapped per output made function quadratic in the number of outputs).
        # This runs once per node of the user's graph: no per-node generators.
        get = clone_d.get
        for node in post_order(variables, set(), known=clone_d):
            if node in clone_d:
                continue
            ins = node.inputs
            new_inputs = []
            same = True
            for i in ins:
                n = get(i)
                if n is None:
                    visit_leaf(i)
                    n = clone_d[i]
                if n is not i:
                    same = False
                new_inputs.append(n)
            if same:
                new_node = node
                clone_d[node] = node
                for o in node.outputs:
                    clone_d.setdefault(o, o)
                continue
            new_node = node.clone_with_new_inputs(new_inputs, strict=rebuild_strict)
            clone_d[node] = new_node
            for old_o, new_o in zip(node.outputs, new_node.outputs):
                clone_d.setdefault(old_o, new_o)
        for v in variables:
            if v not in clone_d:
                visit_leaf(v)
        return [clone_d[v] for v in variables]

    for v_orig, v_repl in _pairs(replace, "givens"):
        if not isinstance(v_orig, Variable):
            raise TypeError(
                f"givens keys must be Variables, got {type(v_orig).__name__}: " f"{v_orig!r}"
            )
        if not isinstance(v_repl, Variable):
            v_repl = shared(v_repl)
        if v_orig.type != v_repl.type:
            try:
                v_repl = v_orig.type.filter_variable(v_repl)
            except TypeError:
                # rebuild_strict=False lets the graph be rebuilt on other types (the nodes
                # above the replacement infer theirs again, as Theano does).
                if rebuild_strict:
                    raise TypeError(
                        f"givens: cannot replace {v_orig} (type {v_orig.type}) by {v_repl} "
                        f"(type {v_repl.type}): the types must match"
                    ) from None
        if v_orig in clone_d:
            raise ValueError(
                f"givens: {v_orig} is used to compute another replacement but is itself "
                f"replaced by {v_repl}; replacements may not depend on replaced variables"
            )
        clone_d[v_orig] = clone_graph([v_repl])[0]

    input_variables = []
    for i in inputs or []:
        input_variables.append(clone_d.setdefault(i, i if copy_inputs_over else i.clone()))
    for v in input_variables:
        if isinstance(v, SharedVariable):
            raise TypeError(
                f"Cannot use a shared variable ({v}) as explicit input: it is an implicit "
                "input of every function that uses it. Substitute a non-shared variable with "
                "the `givens` parameter instead"
            )

    for store_into, update_val in _pairs(updates, "updates"):
        if not isinstance(store_into, SharedVariable):
            raise TypeError(
                f"update target must be a SharedVariable, got {type(store_into).__name__}: "
                f"{store_into}"
            )
        if store_into in update_d:
            raise ValueError(
                f"the shared variable {store_into} has two update expressions: "
                f"{update_d[store_into]} and {update_val}"
            )
        update_val = _check_update(store_into, update_val)
        update_d[store_into] = update_val
        update_expr.append((store_into, update_val))

    if outputs is None:
        cloned_outputs = []
    else:
        single = not isinstance(outputs, (list, tuple))
        out_list = [outputs] if single else list(outputs)
        if all(type(v) is not SymbolicOutput and getattr(v, "owner", None) for v in out_list):
            # Computed outputs only: one walk over all of them meets the nodes and
            # leaves in the order a walk per output would (what the loop below does
            # for each output not mapped yet), without a walk's setup per output.
            clone_graph(out_list)
        cloned_list = []
        for v in out_list:
            if isinstance(v, SymbolicOutput):
                cloned_list.append(SymbolicOutput(clone_graph([v.variable])[0], borrow=v.borrow))
            elif isinstance(v, Variable):
                # Mapped by the walk above (every computed output): no walk of its own.
                known = clone_d.get(v)
                cloned_list.append(known if known is not None else clone_graph([v])[0])
            else:
                raise TypeError(
                    "Outputs must be Variables or Out instances, got " f"{type(v).__name__}: {v!r}"
                )
        cloned_outputs = cloned_list[0] if single else cloned_list

    # Update expressions may read more shared variables, whose default updates
    # extend update_expr while we walk it.
    k = 0
    while k < len(update_expr):
        v, v_update = update_expr[k]
        update_d[v] = clone_graph([v_update])[0]
        if v not in shared_inputs:
            shared_inputs.append(v)
        k += 1
    return input_variables, cloned_outputs, [clone_d, update_d, update_expr, shared_inputs]


class GivensInputError(ValueError, RuntimeError):
    """``givens`` replaces an input of the function: a ValueError, and the RuntimeError
    Theano raised."""


class OutputKeyError(TypeError, AssertionError):
    """A dict of outputs with a key that is not a string: a TypeError, and the
    AssertionError Theano raised."""


def _check_update(store_into, update_val):
    # An update whose type is more specific than the shared variable's (a static
    # length where the variable has none, as ``s - ones(4)`` for a vector ``s``) is
    # accepted: every value it can take is a valid value of the shared variable.
    # Theano, without static lengths, saw the two as the same type.
    try:
        upd = store_into.type.filter_variable(update_val, allow_convert=True)
    except TypeError:
        upd = None
    if upd is None or not update_type_fits(store_into.type, upd.type):
        hint = ""
        if upd is not None and store_into.type.is_super(upd.type):
            hint = (
                ": it has length 1 where the shared variable's length is not known, and an "
                "update is stored as it is, never broadcast (broadcast it explicitly, e.g. "
                "tt.zeros_like(s) + update, as Theano asks)"
            )
        raise TypeError(
            f"An update must have the same type as the shared variable it updates: "
            f"{store_into} has type {store_into.type}, its update {update_val} has type "
            f"{getattr(update_val, 'type', type(update_val).__name__)}{hint}"
        )
    return upd


def _param_to_in(param, allow_downcast=None):
    if isinstance(param, Constant):
        raise TypeError(f"Constants are not allowed as function inputs: {param}")
    if isinstance(param, Variable):
        return In(variable=param, allow_downcast=allow_downcast)
    if isinstance(param, In):
        return param
    raise TypeError(
        f"function inputs must be Variables or In instances, got {type(param).__name__}: "
        f"{param!r}"
    )


@gc_paused(promote=True)
def pfunc(
    params,
    outputs=None,
    mode=None,
    updates=None,
    givens=None,
    no_default_updates=False,
    accept_inplace=False,
    name=None,
    rebuild_strict=True,
    allow_input_downcast=None,
    profile=None,
    on_unused_input=None,
    output_keys=None,
    incremental=False,
):
    """``function`` with the parameters checked and the graph rebuilt (Theano's ``pfunc``)."""
    if not isinstance(params, (list, tuple)):
        raise TypeError(
            f"function inputs must be a list or tuple of Variables, got {type(params).__name__}"
        )
    if not isinstance(no_default_updates, (bool, list)):
        raise TypeError("no_default_updates must be a bool or a list of shared variables")
    inputs = [_param_to_in(p, allow_downcast=allow_input_downcast) for p in params]
    in_variables = [i.variable for i in inputs]
    for i, v in enumerate(in_variables):
        if v in in_variables[i + 1 :]:
            j = in_variables.index(v, i + 1)
            raise DuplicateInputError(  # an UnusedInputError, as Theano raises here
                f"Variable {v} is given twice in the inputs of function, at positions {i} and "
                f"{j}: a call would ignore one of the two values given for it. List each "
                "input once."
            )
    in_var_set = set(in_variables)
    for x, _y in _pairs(givens, "givens"):
        if x in in_var_set:
            raise GivensInputError(
                f"givens tries to replace '{x}', which is an input of the function: that has "
                "no effect. Give the function a new input `y` and use givens={x: g(y)}"
            )
    single = outputs is not None and not isinstance(outputs, (list, tuple))
    out_list = [] if outputs is None else ([outputs] if single else list(outputs))
    extended = out_list + [i.update for i in inputs if i.update is not None]
    input_variables, cloned_extended, other = rebuild_collect_shared(
        extended,
        in_variables,
        replace=givens,
        updates=updates,
        rebuild_strict=rebuild_strict,
        copy_inputs_over=True,
        no_default_updates=no_default_updates,
    )
    clone_d, update_d, _update_expr, shared_inputs = other
    if outputs is None:
        cloned_outputs = []  # as Theano's pfunc: a call gives [] (FunctionMaker's None: None)
    elif single:
        cloned_outputs = cloned_extended[0]
    else:
        cloned_outputs = cloned_extended[: len(out_list)]
    for spec, iv in zip(inputs, input_variables):
        spec.variable = iv
        if spec.update is not None:
            spec.update = clone_d.get(spec.update, spec.update)
    for sv in shared_inputs:
        if sv in update_d:
            si = In(
                variable=sv,
                value=sv.container,
                mutable=True,
                borrow=True,
                update=update_d[sv],
                shared=True,
            )
        else:
            si = In(variable=sv, value=sv.container, mutable=False, borrow=True, shared=True)
        inputs.append(si)
    maker = FunctionMaker(
        inputs,
        cloned_outputs,
        mode=mode,
        accept_inplace=accept_inplace,
        profile=profile,
        on_unused_input=on_unused_input,
        name=name,
        output_keys=output_keys,
        incremental=incremental,
    )
    return maker.create()


def function(
    inputs,
    outputs=None,
    mode=None,
    updates=None,
    givens=None,
    no_default_updates=False,
    accept_inplace=False,
    name=None,
    rebuild_strict=True,
    allow_input_downcast=None,
    profile=None,
    on_unused_input=None,
    incremental=False,
):
    """Compile a callable computing ``outputs`` from ``inputs``.

    ``inputs``: a list of Variables or ``In`` (or Theano's tuple shorthand for an ``In``,
    ``((x, update), value)`` and the like: ``convert_function_input``). ``outputs``: a Variable or
    ``Out`` (the call returns one value), a list of them (it returns a list),
    a dict of them (it returns a dict with the same keys), or None.
    ``updates``: ``(shared_variable, expression)`` pairs applied after
    all outputs are computed, all at once. ``givens``: ``(variable,
    replacement)`` pairs substituted in the graph. ``mode``: a Mode or a mode
    name. ``allow_input_downcast``: accept values that lose precision when
    cast to the input's dtype. ``on_unused_input``: 'raise', 'warn' or 'ignore'.
    ``profile``: collect time and memory per node (``f.profile.summary()``).
    ``incremental``: a call recomputes only what depends on inputs that changed
    since the last call (the CPU engine). ``f.name`` is ``name``, or, as in
    Theano, ``"file:line"`` of the code that called ``function``.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> from theano_dag.compile.sharedvalue import shared
    >>> x = tt.dscalar("x")
    >>> acc = shared(np.float64(0.0), name="acc")
    >>> f = function([x], acc, updates=[(acc, acc + x)])
    >>> float(f(2.0)), float(f(3.0)), float(acc.get_value())
    (0.0, 2.0, 5.0)
    """
    if isinstance(inputs, Variable) or isinstance(inputs, In):
        raise TypeError(
            "function's first argument must be a list of input variables, got a single "
            f"{type(inputs).__name__}: {inputs}; write function([x], ...)"
        )
    if isinstance(inputs, (list, tuple)) and any(isinstance(i, (list, tuple)) for i in inputs):
        # Theano's tuple shorthand, ((x, update), value) and the like, stands for an In.
        inputs = [convert_function_input(i) for i in inputs]
    output_keys = None
    if isinstance(outputs, dict):
        # A dict of outputs: the call returns a dict with the same keys, strings (Theano's
        # rule: the keys name the outputs; a number would also break their sorting).
        bad = [k for k in outputs if not isinstance(k, str)]
        if bad:
            raise OutputKeyError(
                f"function: the keys of a dict of outputs must be strings, got {bad[0]!r} "
                f"({type(bad[0]).__name__})"
            )
        keys = sorted(outputs)
        output_keys, outputs = keys, [outputs[k] for k in keys]
    fn = pfunc(
        params=inputs,
        outputs=outputs,
        mode=mode,
        updates=updates,
        givens=givens,
        no_default_updates=no_default_updates,
        accept_inplace=accept_inplace,
        name=name,
        rebuild_strict=rebuild_strict,
        allow_input_downcast=allow_input_downcast,
        profile=profile,
        on_unused_input=on_unused_input,
        output_keys=output_keys,
        incremental=incremental,
    )
    if name is None:
        # Theano's default name, set on the function only: errors and profiles name a
        # function by the name its user gave.
        fn.name = user_location()
    return fn


# Theano exposes it here too.
UnusedInputError = UnusedInputError


def function_dump(
    filename,
    inputs,
    outputs=None,
    mode=None,
    updates=None,
    givens=None,
    no_default_updates=False,
    accept_inplace=False,
    name=None,
    rebuild_strict=True,
    allow_input_downcast=None,
    profile=None,
    on_unused_input=None,
    extra_tag_to_remove=None,
):
    """Pickle the arguments of a ``function(...)`` call to ``filename`` instead of compiling
    (Theano's reproducer for compilation problems): ``function(**pickle.load(f))`` compiles
    the same function, shared variables and their values included.

    >>> import os, pickle, tempfile
    >>> import numpy as np
    >>> from theano_dag import tensor as tt
    >>> x = tt.dvector("x")
    >>> path = os.path.join(tempfile.mkdtemp(), "dump.pkl")
    >>> function_dump(path, [x], x * 2)
    >>> with open(path, "rb") as f:
    ...     f2 = function(**pickle.load(f))
    >>> f2(np.array([1.0, 2.0]))
    array([2., 4.])
    """
    if not isinstance(filename, str):
        raise TypeError(f"function_dump: filename must be a str, got {filename!r}")
    if extra_tag_to_remove is not None:
        raise NotImplementedError("function_dump: extra_tag_to_remove is not supported")
    args = dict(
        inputs=inputs,
        outputs=outputs,
        mode=mode,
        updates=updates,
        givens=givens,
        no_default_updates=no_default_updates,
        accept_inplace=accept_inplace,
        name=name,
        rebuild_strict=rebuild_strict,
        allow_input_downcast=allow_input_downcast,
        profile=profile,
        on_unused_input=on_unused_input,
    )
    with open(filename, "wb") as f:
        pickle.dump(args, f, protocol=pickle.HIGHEST_PROTOCOL)
