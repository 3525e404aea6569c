"""A Theano 1.1.2 program with a custom COp (C code only), as in Theano's tutorial."""

import numpy as np
import theano
import theano.tensor as tt
from theano.graph.basic import Apply
from theano.graph.op import COp


class Fibby(COp):
    __props__ = ()

    def make_node(self, x):
        x_ = tt.as_tensor_variable(x)
        assert x_.ndim == 1
        return Apply(self, inputs=[x_], outputs=[x_.type()])

    def c_code(self, node, name, inames, onames, sub):
        (x,) = inames
        (y,) = onames
        fail = sub["fail"]
        return """
            Py_XDECREF(%(y)s);
            %(y)s = (PyArrayObject*)PyArray_FromArray(%(x)s, 0, NPY_ARRAY_ENSURECOPY);
            if (!%(y)s)
              %(fail)s;
            {
              dtype_%(y)s * y = (dtype_%(y)s*)PyArray_DATA(%(y)s);
              dtype_%(x)s * x = (dtype_%(x)s*)PyArray_DATA(%(x)s);
              for (int i = 2; i < PyArray_DIMS(%(x)s)[0]; ++i)
                y[i] = y[i-1] * y[i-2] + x[i];
            }
            """ % locals()  # noqa: UP031 (Theano's substitution style)

    def perform(self, node, inputs, output_storage):
        raise NotImplementedError("Fibby has only C code")  # Theano's Op wants one

    def c_code_cache_version(self):
        return (1,)


x = tt.dvector("x")
f = theano.function([x], Fibby()(x) * 2 + 1)
print(np.round(f(np.array([1.0, 2.0, 0.5, 1.5, -1.0, 0.25])), 6).tolist())
xf = tt.fvector("xf")
g = theano.function([xf], Fibby()(xf).sum())
print(round(float(g(np.linspace(0, 1, 7).astype("float32"))), 4))
