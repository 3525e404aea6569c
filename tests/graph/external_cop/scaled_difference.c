#section support_code

/* Plain support code: no macros here. */
static int td_test_same_length(PyArrayObject* a, PyArrayObject* b)
{
    return PyArray_DIMS(a)[0] == PyArray_DIMS(b)[0];
}

#section support_code_apply

/* One per node: its name carries APPLY_SPECIFIC's suffix, its types the node's dtypes. */
int APPLY_SPECIFIC(scaled_difference)(PyArrayObject* a, PyArrayObject* b,
                                      PyArrayObject** out)
{
    npy_intp n = PyArray_DIMS(a)[0];
    if (!td_test_same_length(a, b)) {
        PyErr_Format(PyExc_ValueError, "scaled_difference: lengths %ld and %ld differ",
                     (long)n, (long)PyArray_DIMS(b)[0]);
        return 1;
    }
    if (*out == NULL || PyArray_DIMS(*out)[0] != n) {
        Py_XDECREF(*out);
        *out = (PyArrayObject*)PyArray_EMPTY(1, PyArray_DIMS(a), TYPENUM_OUTPUT_0, 0);
        if (*out == NULL) return 1;
    }
    for (npy_intp i = 0; i < n; i++) {
        DTYPE_INPUT_0 x = *(DTYPE_INPUT_0*)PyArray_GETPTR1(a, i);
        DTYPE_INPUT_1 y = *(DTYPE_INPUT_1*)PyArray_GETPTR1(b, i);
        ((DTYPE_OUTPUT_0*)PyArray_DATA(*out))[i] = (DTYPE_OUTPUT_0)(x - 2 * y);
    }
    return 0;
}
