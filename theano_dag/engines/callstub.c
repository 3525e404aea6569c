/* The C half of a compiled function's call (theano_dag.engines.callspec.CallBase).
 *
 * `f(x)` on a theano_dag Function lands here first. When the engine has handed over a
 * guard (the CPU engine does, for the input signature it saw last), the arguments are
 * checked here, in C: as many as expected, no keywords, each an exact numpy ndarray
 * with the expected dtype object and shape. Then the guard's body, a generated Python
 * function of exactly that many arguments and no checks of its own, runs inside a
 * context where numpy ignores floating-point errors. Anything else goes to the
 * Python-level entry, which handles every call (keywords, defaults, other shapes,
 * errors); a failed check goes to the guard's `miss`, which installs the code of the
 * new signature.
 *
 * Why C: in Python the same path costs a property read, a functools.partial, a
 * Context.run and a function taking any arguments, together about 0.6 us against
 * numpy's 0.8 us for x + 1 on ten values (benchmarks/call_overhead.py).
 *
 * numpy's headers are not needed: the head of numpy's array object
 * (PyArrayObject_fields, public ABI since numpy 1.7, unchanged in numpy 2) is declared
 * below, and the ndarray type and dtype objects are handed over from Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} ArrayHead;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *entry;      /* takes any call */
    PyObject *body;       /* the guarded call: exactly n arrays, checked here */
    PyObject *miss;       /* miss(args_tuple) when a check fails */
    PyObject *array_type; /* numpy.ndarray */
    PyObject *dtypes;     /* tuple of n dtype objects, compared by identity */
    PyObject *ctx;        /* contextvars.Context in which numpy ignores FP errors, or NULL */
    PyObject *cv;         /* numpy's error-state ContextVar, for when ctx is busy */
    PyObject *ignore;     /* its value that ignores every error */
    PyObject *other;      /* other(...) runs a call from a thread other than owner */
    unsigned long owner;  /* the thread whose calls this object runs itself */
    Py_ssize_t n;         /* -1: no guard; every call goes to entry */
    int *ndims;
    Py_ssize_t *dims;     /* the n shapes, one after the other */
} CallBase;

static void
drop_guard(CallBase *self)
{
    self->n = -1;
    Py_CLEAR(self->body);
    Py_CLEAR(self->miss);
    Py_CLEAR(self->array_type);
    Py_CLEAR(self->dtypes);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->cv);
    Py_CLEAR(self->ignore);
    PyMem_Free(self->ndims);
    PyMem_Free(self->dims);
    self->ndims = NULL;
    self->dims = NULL;
}

static PyObject *
run_body(CallBase *self, PyObject *body, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *res;
    if (self->ctx == NULL)
        return PyObject_Vectorcall(body, args, nargs, NULL);
    if (PyContext_Enter(self->ctx) == 0) {
        res = PyObject_Vectorcall(body, args, nargs, NULL);
        if (PyContext_Exit(self->ctx) < 0) {
            Py_XDECREF(res);
            return NULL;
        }
        return res;
    }
    /* The context is entered already: this function is running in another thread, or
     * called again from inside its own call. Set numpy's state in this thread's own
     * context instead (a little slower, always correct). */
    PyErr_Clear();
    if (self->cv == NULL)
        return PyObject_Vectorcall(body, args, nargs, NULL);
    PyObject *token = PyContextVar_Set(self->cv, self->ignore);
    if (token == NULL)
        return NULL;
    res = PyObject_Vectorcall(body, args, nargs, NULL);
    if (PyContextVar_Reset(self->cv, token) < 0) {
        Py_CLEAR(res);
    }
    Py_DECREF(token);
    return res;
}

static PyObject *
callbase_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    CallBase *self = (CallBase *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->other != NULL && PyThread_get_thread_ident() != self->owner) {
        /* The engines reuse a function's storage from call to call: another thread
         * runs a copy of its own (Function._call_in_other_thread). */
        PyObject *other = Py_NewRef(self->other);
        PyObject *res = PyObject_Vectorcall(other, args, nargsf, kwnames);
        Py_DECREF(other);
        return res;
    }
    if (self->n >= 0 && nargs == self->n && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)) {
        Py_ssize_t off = 0;
        int hit = 1;
        for (Py_ssize_t i = 0; i < nargs && hit; i++) {
            ArrayHead *a = (ArrayHead *)args[i];
            int nd = self->ndims[i];
            if ((PyObject *)Py_TYPE(a) != self->array_type || a->nd != nd ||
                a->descr != PyTuple_GET_ITEM(self->dtypes, i)) {
                hit = 0;
                break;
            }
            for (int d = 0; d < nd; d++) {
                if (a->dimensions[d] != self->dims[off + d]) {
                    hit = 0;
                    break;
                }
            }
            off += nd;
        }
        /* Hold the callables: the call may install another guard, dropping these. */
        PyObject *fn = hit ? self->body : self->miss;
        Py_INCREF(fn);
        PyObject *res;
        if (hit) {
            res = run_body(self, fn, args, nargs);
        }
        else {
            PyObject *tup = PyTuple_New(nargs);
            if (tup == NULL) {
                Py_DECREF(fn);
                return NULL;
            }
            for (Py_ssize_t i = 0; i < nargs; i++) {
                Py_INCREF(args[i]);
                PyTuple_SET_ITEM(tup, i, args[i]);
            }
            res = PyObject_CallOneArg(fn, tup);
            Py_DECREF(tup);
        }
        Py_DECREF(fn);
        return res;
    }
    if (self->entry == NULL) {
        PyErr_SetString(PyExc_TypeError, "this function has no call path yet");
        return NULL;
    }
    PyObject *entry = self->entry;
    Py_INCREF(entry);
    PyObject *res = PyObject_Vectorcall(entry, args, nargsf, kwnames);
    Py_DECREF(entry);
    return res;
}

static PyObject *
callbase_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    CallBase *self = (CallBase *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = callbase_vectorcall;
    self->n = -1;
    return (PyObject *)self;
}

static int
callbase_traverse(CallBase *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->entry);
    Py_VISIT(self->other);
    Py_VISIT(self->body);
    Py_VISIT(self->miss);
    Py_VISIT(self->array_type);
    Py_VISIT(self->dtypes);
    Py_VISIT(self->ctx);
    Py_VISIT(self->cv);
    Py_VISIT(self->ignore);
    return 0;
}

static int
callbase_clear(CallBase *self)
{
    Py_CLEAR(self->entry);
    Py_CLEAR(self->other);
    drop_guard(self);
    return 0;
}

static void
callbase_dealloc(CallBase *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    callbase_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

PyDoc_STRVAR(set_entry_doc,
             "_set_entry(entry): every call goes to ``entry`` (any drop of the guard).");

static PyObject *
callbase_set_entry(CallBase *self, PyObject *entry)
{
    Py_INCREF(entry);
    Py_XSETREF(self->entry, entry);
    drop_guard(self);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(set_owner_doc,
             "_set_owner(ident, other): calls from threads other than ``ident`` run other(...).");

static PyObject *
callbase_set_owner(CallBase *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_set_owner takes 2 arguments");
        return NULL;
    }
    unsigned long ident = PyLong_AsUnsignedLong(args[0]);
    if (ident == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    self->owner = ident;
    Py_XSETREF(self->other, args[1] == Py_None ? NULL : Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

PyDoc_STRVAR(set_guard_doc,
             "_set_guard(entry, body, miss, array_type, dtypes, shapes, ctx, cv, ignore):\n"
             "calls of len(dtypes) arrays of these dtypes and shapes run body(*arrays)\n"
             "inside ctx; a failed check runs miss(args); any other call entry(...).");

static PyObject *
callbase_set_guard(CallBase *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "_set_guard takes 9 arguments");
        return NULL;
    }
    PyObject *dtypes = args[4], *shapes = args[5];
    if (!PyTuple_Check(dtypes) || !PyTuple_Check(shapes) ||
        PyTuple_GET_SIZE(dtypes) != PyTuple_GET_SIZE(shapes)) {
        PyErr_SetString(PyExc_TypeError, "_set_guard: dtypes and shapes are tuples of one length");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(dtypes), total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyTuple_GET_ITEM(shapes, i);
        if (!PyTuple_Check(s)) {
            PyErr_SetString(PyExc_TypeError, "_set_guard: each shape is a tuple");
            return NULL;
        }
        total += PyTuple_GET_SIZE(s);
    }
    int *ndims = PyMem_Malloc(sizeof(int) * (n ? n : 1));
    Py_ssize_t *dims = PyMem_Malloc(sizeof(Py_ssize_t) * (total ? total : 1));
    if (ndims == NULL || dims == NULL) {
        PyMem_Free(ndims);
        PyMem_Free(dims);
        return PyErr_NoMemory();
    }
    Py_ssize_t off = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyTuple_GET_ITEM(shapes, i);
        ndims[i] = (int)PyTuple_GET_SIZE(s);
        for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(s); d++) {
            Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(s, d));
            if (v == -1 && PyErr_Occurred()) {
                PyMem_Free(ndims);
                PyMem_Free(dims);
                return NULL;
            }
            dims[off++] = v;
        }
    }
    Py_INCREF(args[0]);
    Py_XSETREF(self->entry, args[0]);
    drop_guard(self);
    self->body = Py_NewRef(args[1]);
    self->miss = Py_NewRef(args[2]);
    self->array_type = Py_NewRef(args[3]);
    self->dtypes = Py_NewRef(dtypes);
    self->ctx = args[6] == Py_None ? NULL : Py_NewRef(args[6]);
    self->cv = args[7] == Py_None ? NULL : Py_NewRef(args[7]);
    self->ignore = args[7] == Py_None ? NULL : Py_NewRef(args[8]);
    self->ndims = ndims;
    self->dims = dims;
    self->n = n;
    Py_RETURN_NONE;
}

static PyObject *
callbase_get_entry(CallBase *self, void *closure)
{
    if (self->entry == NULL)
        Py_RETURN_NONE;
    return Py_NewRef(self->entry);
}

static PyObject *
callbase_get_guarded(CallBase *self, void *closure)
{
    return PyBool_FromLong(self->n >= 0);
}

PyDoc_STRVAR(init_subclass_doc,
             "A subclass (Function) is called through vectorcall as CallBase is: Python 3.12\n"
             "gives a heap subclass the flag itself, 3.11 makes the call build a tuple.");

static PyObject *
callbase_init_subclass(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    PyTypeObject *tp = (PyTypeObject *)cls;
    /* Only where the subclass keeps the base's call (no __call__ of its own): then
     * tp_vectorcall_offset, always inherited, points at our vectorcall slot. */
    if (tp->tp_call == PyVectorcall_Call && tp->tp_vectorcall_offset > 0)
        tp->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
    Py_RETURN_NONE;
}

static PyMethodDef callbase_methods[] = {
    {"__init_subclass__", (PyCFunction)(void (*)(void))callbase_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, init_subclass_doc},
    {"_set_entry", (PyCFunction)callbase_set_entry, METH_O, set_entry_doc},
    {"_set_guard", (PyCFunction)(void (*)(void))callbase_set_guard, METH_FASTCALL, set_guard_doc},
    {"_set_owner", (PyCFunction)(void (*)(void))callbase_set_owner, METH_FASTCALL, set_owner_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef callbase_getset[] = {
    {"_entry", (getter)callbase_get_entry, NULL, "the entry that takes any call", NULL},
    {"_guarded", (getter)callbase_get_guarded, NULL, "whether a guard is installed", NULL},
    {NULL},
};

static PyMemberDef callbase_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(CallBase, vectorcall), READONLY, NULL},
    {NULL},
};

static PyType_Slot callbase_slots[] = {
    {Py_tp_doc, "Base of a compiled function: its call, checked and dispatched in C."},
    {Py_tp_new, callbase_new},
    {Py_tp_dealloc, callbase_dealloc},
    {Py_tp_traverse, callbase_traverse},
    {Py_tp_clear, callbase_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_methods, callbase_methods},
    {Py_tp_getset, callbase_getset},
    {Py_tp_members, callbase_members},
    {0, NULL},
};

static PyType_Spec callbase_spec = {
    .name = "theano_dag.engines._callstub.CallBase",
    .basicsize = sizeof(CallBase),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = callbase_slots,
};

/* -- Segment: a run of C kernels entered once ------------------------------------------
 *
 * The CPU engine's generated call runs a run of consecutive C kernel steps (fused
 * elementwise loops writing into the planner's blocks) as one call of a Segment:
 * `seg(*arrays)` hands each step its operands (positions into the arrays) and calls
 * the steps' C entry points (`int kN_v(void **operands)`, 0 or an error code) one after
 * the other, without Python between them. A step that fails has written nothing: the
 * segment stops there, keeps the step's position and code (`failed_step`,
 * `failed_rc`) and returns True, for the engine to explain the error (or convert an
 * operand) and run the rest itself; otherwise it returns False. The GIL is released
 * while the steps run, as the kernels' ctypes entries did.
 */

typedef int (*td_step_fn)(void **operands);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t nargs;       /* arrays a call takes */
    Py_ssize_t nsteps;
    Py_ssize_t maxops;      /* the most operands of one step */
    td_step_fn *fns;        /* each step's entry point */
    int *nops;              /* each step's number of operands */
    Py_ssize_t *slots;      /* the steps' operand positions, one step after the other */
    Py_ssize_t failed_step; /* the step that failed last (-1: none yet) */
    int failed_rc;          /* and its error code */
} Segment;

static PyObject *
segment_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Segment *self = (Segment *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != self->nargs || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)) {
        PyErr_Format(PyExc_TypeError, "Segment takes %zd arrays, got %zd arguments",
                     self->nargs, nargs);
        return NULL;
    }
    void *ops[self->maxops > 0 ? self->maxops : 1];
    int rc = 0;
    Py_ssize_t j = 0, off = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; j < self->nsteps; j++) {
        const int n = self->nops[j];
        for (int k = 0; k < n; k++)
            ops[k] = (void *)args[self->slots[off + k]];
        off += n;
        rc = self->fns[j](ops);
        if (rc)
            break;
    }
    Py_END_ALLOW_THREADS
    if (rc) {
        self->failed_step = j;
        self->failed_rc = rc;
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

static void
segment_free_tables(Segment *self)
{
    PyMem_Free(self->fns);
    PyMem_Free(self->nops);
    PyMem_Free(self->slots);
    self->fns = NULL;
    self->nops = NULL;
    self->slots = NULL;
}

static PyObject *
segment_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *fns, *operands;
    Py_ssize_t nargs;
    static char *kwlist[] = {"entries", "operands", "nargs", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!n:Segment", kwlist, &PyTuple_Type, &fns,
                                     &PyTuple_Type, &operands, &nargs))
        return NULL;
    Py_ssize_t nsteps = PyTuple_GET_SIZE(fns);
    if (PyTuple_GET_SIZE(operands) != nsteps || nargs < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "Segment: one tuple of operand positions per entry, nargs >= 0");
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t j = 0; j < nsteps; j++) {
        PyObject *o = PyTuple_GET_ITEM(operands, j);
        if (!PyTuple_Check(o)) {
            PyErr_SetString(PyExc_TypeError, "Segment: each step's operands are a tuple");
            return NULL;
        }
        total += PyTuple_GET_SIZE(o);
    }
    Segment *self = (Segment *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = segment_vectorcall;
    self->nargs = nargs;
    self->nsteps = nsteps;
    self->failed_step = -1;
    self->fns = PyMem_Malloc(sizeof(td_step_fn) * (nsteps ? nsteps : 1));
    self->nops = PyMem_Malloc(sizeof(int) * (nsteps ? nsteps : 1));
    self->slots = PyMem_Malloc(sizeof(Py_ssize_t) * (total ? total : 1));
    if (self->fns == NULL || self->nops == NULL || self->slots == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    Py_ssize_t off = 0;
    for (Py_ssize_t j = 0; j < nsteps; j++) {
        void *fn = PyLong_AsVoidPtr(PyTuple_GET_ITEM(fns, j));
        if (fn == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "Segment: a null entry point");
            Py_DECREF(self);
            return NULL;
        }
        self->fns[j] = (td_step_fn)fn;
        PyObject *o = PyTuple_GET_ITEM(operands, j);
        Py_ssize_t n = PyTuple_GET_SIZE(o);
        self->nops[j] = (int)n;
        if (n > self->maxops)
            self->maxops = n;
        for (Py_ssize_t k = 0; k < n; k++) {
            Py_ssize_t pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(o, k));
            if (pos == -1 && PyErr_Occurred()) {
                Py_DECREF(self);
                return NULL;
            }
            if (pos < 0 || pos >= nargs) {
                PyErr_Format(PyExc_ValueError, "Segment: operand position %zd out of range",
                             pos);
                Py_DECREF(self);
                return NULL;
            }
            self->slots[off++] = pos;
        }
    }
    return (PyObject *)self;
}

static void
segment_dealloc(Segment *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    segment_free_tables(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyMemberDef segment_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Segment, vectorcall), READONLY, NULL},
    {"failed_step", T_PYSSIZET, offsetof(Segment, failed_step), READONLY,
     "the position of the step that failed last (-1: none)"},
    {"failed_rc", T_INT, offsetof(Segment, failed_rc), READONLY, "its error code"},
    {"nsteps", T_PYSSIZET, offsetof(Segment, nsteps), READONLY, "the number of steps"},
    {NULL},
};

static PyType_Slot segment_slots[] = {
    {Py_tp_doc, "Segment(entries, operands, nargs): C steps run one after the other by one "
                "call (see the engine's native.segment)."},
    {Py_tp_new, segment_new},
    {Py_tp_dealloc, segment_dealloc},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, segment_members},
    {0, NULL},
};

static PyType_Spec segment_spec = {
    .name = "theano_dag.engines._callstub.Segment",
    .basicsize = sizeof(Segment),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = segment_slots,
};

static int
callstub_exec(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &callbase_spec, NULL);
    if (type == NULL)
        return -1;
    if (PyModule_AddObject(module, "CallBase", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    PyObject *seg = PyType_FromModuleAndSpec(module, &segment_spec, NULL);
    if (seg == NULL)
        return -1;
    if (PyModule_AddObject(module, "Segment", seg) < 0) {
        Py_DECREF(seg);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot callstub_slots[] = {
    {Py_mod_exec, callstub_exec},
    {0, NULL},
};

static struct PyModuleDef callstub_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "theano_dag.engines._callstub",
    .m_doc = "The C half of a compiled function's call (see callspec.CallBase).",
    .m_size = 0,
    .m_slots = callstub_slots,
};

PyMODINIT_FUNC
PyInit__callstub(void)
{
    return PyModuleDef_Init(&callstub_module);
}
