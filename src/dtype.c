/*
 * dtype.c -- which NumPy dtypes a GPUArray holds: the numeric types (bool,
 * signed and unsigned integers, float16/32/64, complex64/128) in native
 * byte order.  Descriptors are NumPy's own, so every spelling NumPy accepts
 * works.
 */
#include "pygpu.h"

int pygpu_descr_supported(PyArray_Descr *d)
{
    switch (d->type_num) {
    case NPY_BOOL:
    case NPY_BYTE: case NPY_UBYTE:
    case NPY_SHORT: case NPY_USHORT:
    case NPY_INT: case NPY_UINT:
    case NPY_LONG: case NPY_ULONG:
    case NPY_LONGLONG: case NPY_ULONGLONG:
    case NPY_HALF: case NPY_FLOAT: case NPY_DOUBLE:
    case NPY_CFLOAT: case NPY_CDOUBLE:
        return PyArray_ISNBO(d->byteorder);
    default:
        return 0;
    }
}

PyArray_Descr *pygpu_descr_arg(PyObject *obj)
{
    PyArray_Descr *d = NULL;
    if (obj == NULL || obj == Py_None)
        return PyArray_DescrFromType(NPY_DOUBLE);
    if (!PyArray_DescrConverter(obj, &d))
        return NULL;
    if (!pygpu_descr_supported(d)) {
        PyErr_Format(PyExc_TypeError,
                     "dtype %R is not supported by GPUArray: use bool, int8-64, uint8-64, "
                     "float16/32/64 or complex64/128 in native byte order", (PyObject *)d);
        Py_DECREF(d);
        return NULL;
    }
    return d;
}
