#section init_code

/* run once when the library loads */

#section code

{
    npy_intp n = PyArray_SIZE(INPUT_0);
    Py_XDECREF(OUTPUT_0);
    OUTPUT_0 = (PyArrayObject*)PyArray_NewLikeArray(INPUT_0, NPY_CORDER, NULL, 0);
    if (OUTPUT_0 == NULL) FAIL;
    for (npy_intp i = 0; i < n; i++) {
        DTYPE_INPUT_0 v = ((DTYPE_INPUT_0*)PyArray_DATA(INPUT_0))[i];
        if (v < 0) {
            PyErr_SetString(PyExc_ValueError, "plus_one: a negative value");
            FAIL;
        }
        ((DTYPE_OUTPUT_0*)PyArray_DATA(OUTPUT_0))[i] = v + 1;
    }
}

#section code_cleanup

/* nothing to release */
