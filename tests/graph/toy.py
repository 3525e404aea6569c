"""Toy types and ops for testing the graph core without the tensor library.

``MyType(thingy)``: two MyTypes are equal when their ``thingy`` is; values are
anything. ``MyOp(name, nin=None, nout=1, destroy_map=None, view_map=None)``:
an op whose outputs have the type ``MyType(name)`` unless ``otype`` is given.
"""

from theano_dag.graph.basic import Apply, Constant, Variable
from theano_dag.graph.op import Op
from theano_dag.graph.type import Type


class MyType(Type):
    __props__ = ("thingy",)

    def __init__(self, thingy="t"):
        self.thingy = thingy

    def filter(self, data, strict=False, allow_downcast=None):
        return data

    def __repr__(self):
        return f"MyType({self.thingy!r})"


class MyVariable(Variable):
    pass


class MyConstant(Constant):
    pass


MyType.Variable = MyVariable
MyType.Constant = MyConstant


def MyVar(name, thingy="t"):
    """A fresh input variable of type ``MyType(thingy)``."""
    return MyVariable(MyType(thingy), None, None, name)


class MyOp(Op):
    __props__ = ("name", "nin", "nout", "otype", "_dmap", "_vmap")

    def __init__(self, name, nin=None, nout=1, otype=None, destroy_map=None, view_map=None):
        self.name = name
        self.nin = nin
        self.nout = nout
        self.otype = otype
        self._dmap = tuple(sorted((k, tuple(v)) for k, v in (destroy_map or {}).items()))
        self._vmap = tuple(sorted((k, tuple(v)) for k, v in (view_map or {}).items()))
        self.destroy_map = {k: list(v) for k, v in self._dmap}
        self.view_map = {k: list(v) for k, v in self._vmap}

    def make_node(self, *inputs):
        if self.nin is not None and len(inputs) != self.nin:
            raise TypeError(f"{self.name} takes {self.nin} inputs, got {len(inputs)}")
        for x in inputs:
            if not isinstance(x, Variable):
                raise TypeError(f"{self.name}: expected a Variable, got {x!r}")
        otype = self.otype if self.otype is not None else (inputs[0].type if inputs else MyType())
        return Apply(self, list(inputs), [otype() for _ in range(self.nout)])

    def perform(self, node, inputs, output_storage, params=None):
        for k, cell in enumerate(output_storage):
            cell[0] = (self.name, k, tuple(inputs))

    def __str__(self):
        return self.name


op1 = MyOp("op1")
op2 = MyOp("op2")
op3 = MyOp("op3")
op4 = MyOp("op4")
op5 = MyOp("op5")
op_multi = MyOp("op_multi", nout=2)
# Overwrites its input 0 in place (output 0 reuses that memory).
op_d = MyOp("op_d", destroy_map={0: [0]})
# Output 0 is a view of (aliases) input 0.
op_v = MyOp("op_v", view_map={0: [0]})
# Destroys input 0 and tolerates the same variable as input 1 (like add_inplace(x, x)).
op_d_same = MyOp("op_d_same", destroy_map={0: [0]})
op_d_same.destroyhandler_tolerate_same = [(0, 1)]
