"""Scalar ops between the two sides, by name: the table :data:`SCALAR_NAMES` and the
conversion of a scalar op or a ``Composite`` (scalar graph) it drives.
"""

from __future__ import annotations

from theano_dag import scalar as ts
from theano_dag.formats.decompose import expand
from theano_dag.graph.basic import io_toposort

__all__ = ["SCALAR_NAMES", "scalar_from_foreign", "scalar_to_foreign"]

#: our scalar op (attribute of theano_dag.scalar) -> the names it has in the foreign packages
SCALAR_NAMES = {
    "add": ("add",), "sub": ("sub",), "mul": ("mul",), "true_div": ("true_div",),
    "int_div": ("int_div",), "mod": ("mod",), "neg": ("neg",), "abs_": ("abs_", "abs"),
    "sgn": ("sgn", "sign"), "pow": ("pow",), "maximum": ("scalar_maximum", "maximum"),
    "minimum": ("scalar_minimum", "minimum"), "lt": ("lt",), "gt": ("gt",),
    "le": ("le",), "ge": ("ge",), "eq": ("eq",), "neq": ("neq",), "and_": ("and_",),
    "or_": ("or_",), "xor": ("xor",), "invert": ("invert",), "isnan": ("isnan",),
    "isinf": ("isinf",), "switch": ("switch",), "identity": ("identity",),
    "second": ("second",), "exp": ("exp",), "exp2": ("exp2",), "log": ("log",),
    "log2": ("log2",), "log10": ("log10",), "log1p": ("log1p",), "expm1": ("expm1",),
    "sqrt": ("sqrt",), "sqr": ("sqr",), "reciprocal": ("reciprocal", "inv"), "sin": ("sin",),
    "cos": ("cos",), "tan": ("tan",), "arcsin": ("arcsin",), "arccos": ("arccos",),
    "arctan": ("arctan",), "arctan2": ("arctan2",), "sinh": ("sinh",), "cosh": ("cosh",),
    "tanh": ("tanh",), "sigmoid": ("sigmoid", "scalar_sigmoid"),
    "softplus": ("softplus", "scalar_softplus"), "erf": ("erf",), "erfc": ("erfc",),
    "erfcx": ("erfcx",), "log1mexp": ("log1mexp",), "floor": ("floor",), "ceil": ("ceil",),
    "trunc": ("trunc",),
    "round_half_to_even": ("round_half_to_even",),
    "round_half_away_from_zero": ("round_half_away_from_zero",),
}  # fmt: skip
# Not in the table: ``clip``, the same name for two rules where an argument is NaN (ours
# gives NaN, as numpy; PyTensor's ignores a NaN bound). Each side's is written in the
# other's ops (_composite).


def _scalar_tables(fl):
    """``(ours -> foreign, foreign -> ours)`` scalar op dicts, built once per flavor."""
    if getattr(fl, "_scalar_tables", None) is None:
        to, back = {}, {}
        for ours, names in SCALAR_NAMES.items():
            ours = getattr(ts, ours)
            for name in names:
                found = next((getattr(m, name) for m in fl.scalar_mods if hasattr(m, name)), None)
                if isinstance(found, fl.ScalarOp):
                    to[ours] = found
                    back.setdefault(found, ours)
                    break
        fl._scalar_tables = (to, back)
    return fl._scalar_tables


def scalar_to_foreign(fl, op):
    if isinstance(op, ts.Cast):
        return getattr(fl.scalar_mods[0], f"convert_to_{op.o_type}", None)
    if isinstance(op, ts.Composite):
        return _composite(fl, op, to_foreign=True)
    return _scalar_tables(fl)[0].get(op)


def scalar_from_foreign(fl, fop):
    if isinstance(fop, fl.Cast):
        return ts.convert_to(fop.o_type.dtype)
    if isinstance(fop, fl.Composite):
        return _composite(fl, fop, to_foreign=False)
    return _scalar_tables(fl)[1].get(fop)


def _composite(fl, comp, to_foreign):
    """The Composite of the other side, its scalar graph rebuilt op by op (None if it can't)."""
    if to_foreign:
        new_input = lambda v: fl.get_scalar_type(v.type.dtype)()
        new_const = lambda c: fl.scalar_constant(c.data, c.type.dtype)
        convert, make = scalar_to_foreign, fl.Composite
    else:
        new_input = lambda v: ts.get_scalar_type(v.type.dtype)()
        new_const = lambda c: ts.ScalarConstant(ts.get_scalar_type(c.type.dtype), c.data)
        convert, make = scalar_from_foreign, ts.Composite
    outputs = comp.outputs
    if to_foreign:  # our compound ops the other side lacks, in elementary ones
        has = lambda op: isinstance(op, ts.Cast) or _scalar_tables(fl)[0].get(op) is not None
        outputs = expand(comp.inputs, outputs, has)
    vmap = {v: new_input(v) for v in comp.inputs}
    for node in io_toposort(comp.inputs, outputs):
        args = [vmap[v] if v in vmap else new_const(v) for v in node.inputs]
        op = convert(fl, node.op)
        if op is not None:
            vmap.update(zip(node.outputs, op.make_node(*args).outputs))
        elif to_foreign and node.op is ts.fma:  # x * y + z, in two ops
            mul, add = (scalar_to_foreign(fl, o) for o in (ts.mul, ts.add))
            vmap[node.outputs[0]] = add(mul(args[0], args[1]), args[2])
        elif to_foreign and node.op is ts.clip:
            # ours: minimum(maximum(x, lo), hi) (NaN from any argument), lo where x < lo > hi
            mx, mn, lt, gt, and_, sw = (
                scalar_to_foreign(fl, o)
                for o in (ts.maximum, ts.minimum, ts.lt, ts.gt, ts.and_, ts.switch)
            )
            x, lo, hi = args
            vmap[node.outputs[0]] = sw(and_(lt(x, lo), gt(lo, hi)), lo, mn(mx(x, lo), hi))
        elif not to_foreign and type(node.op).__name__ == "Clip":
            # theirs: lo where x < lo, else hi where x > hi, else x
            x, lo, hi = args
            vmap[node.outputs[0]] = ts.switch(ts.lt(x, lo), lo, ts.switch(ts.gt(x, hi), hi, x))
        else:
            return None
    outs = [vmap[o] if o in vmap else new_const(o) for o in outputs]
    return make([vmap[v] for v in comp.inputs], outs)
