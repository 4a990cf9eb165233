/*
 * dtype.c -- which NumPy dtypes a GPUArray holds: the numeric types (bool,
 * signed and unsigned integers, float16/32/64, complex64/128) in native
 * byte order.  Descriptors are NumPy's own, so every spelling NumPy accepts
 * works.
 */
#include "pygpu.h"
#include "dtype.h"
#include "kernels/kernels.h"
#include "state.h"

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

PyArray_Descr *pygpu_descr_from_kind(char kind, int itemsize)
{
    int t = -1;
    switch (kind) {
    case 'b': t = itemsize == 1 ? NPY_BOOL : -1; break;
    case 'i':
        t = itemsize == 1 ? NPY_INT8 : itemsize == 2 ? NPY_INT16 : itemsize == 4 ? NPY_INT32
          : itemsize == 8 ? NPY_INT64 : -1;
        break;
    case 'u':
        t = itemsize == 1 ? NPY_UINT8 : itemsize == 2 ? NPY_UINT16 : itemsize == 4 ? NPY_UINT32
          : itemsize == 8 ? NPY_UINT64 : -1;
        break;
    case 'f': t = itemsize == 2 ? NPY_HALF : itemsize == 4 ? NPY_FLOAT : itemsize == 8 ? NPY_DOUBLE : -1; break;
    case 'c': t = itemsize == 8 ? NPY_CFLOAT : itemsize == 16 ? NPY_CDOUBLE : -1; break;
    default: break;
    }
    return t < 0 ? NULL : PyArray_DescrFromType(t);
}

int pygpu_ktype_of(PyArray_Descr *d)
{
    static const int ints[] = {PK_I8, PK_I16, -1, PK_I32, -1, -1, -1, PK_I64};
    static const int uints[] = {PK_U8, PK_U16, -1, PK_U32, -1, -1, -1, PK_U64};
    int size = (int)PyDataType_ELSIZE(d);
    if (!pygpu_descr_supported(d))
        return -1;
    switch (d->kind) {
    case 'b': return PK_BOOL;
    case 'i': return size >= 1 && size <= 8 ? ints[size - 1] : -1;
    case 'u': return size >= 1 && size <= 8 ? uints[size - 1] : -1;
    case 'f': return size == 2 ? PK_F16 : size == 4 ? PK_F32 : size == 8 ? PK_F64 : -1;
    case 'c': return size == 8 ? PK_C64 : size == 16 ? PK_C128 : -1;
    default: return -1;
    }
}

int pygpu_complex_warning(pygpu_state *st, PyArray_Descr *from, PyArray_Descr *to)
{
    if (from->kind != 'c' || to->kind == 'c' || to->kind == 'b')
        return 0;
    return PyErr_WarnEx(st->ComplexWarning, "Casting complex values to real discards the imaginary part", 1);
}
