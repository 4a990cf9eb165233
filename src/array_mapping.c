/*
 * array_mapping.c -- indexing.  A key is parsed into index entries first
 * (integers, slices, newaxis, one ellipsis), then the view is built in one
 * pass over them: basic indexing never copies.  Assignment indexes the same
 * way and copies the value into the view.
 */
#include "pygpu.h"
#include "array_mapping.h"
#include "array.h"
#include "array_host.h"
#include "state.h"

enum entry_kind { E_INT, E_SLICE, E_NEWAXIS, E_ELLIPSIS };

typedef struct {
    enum entry_kind kind;
    Py_ssize_t value;           /* E_INT: the index */
    PyObject *slice;            /* E_SLICE: borrowed */
} entry;

/* (array_type: the indexed array's, whose module knows GPUArrays) */
static int unsupported(PyTypeObject *array_type, PyObject *item)
{
    pygpu_state *st = pygpu_state_of_type(array_type);
    if (!st)
        return 1;
    if (PyBool_Check(item) || PyArray_Check(item) || pygpu_is_gpuarray(st, item) || PyList_Check(item) ||
        (PyObject_HasAttrString(item, "__array__") && !PyIndex_Check(item)) ||
        PyObject_HasAttrString(item, "__cuda_array_interface__")) {
        PyErr_SetString(PyExc_IndexError,
                        "integer-array and boolean-mask indexing are not supported by GPUArray "
                        "(only integers, slices, ..., and None)");
        return 1;
    }
    return 0;
}

/* Parse `key` into at most `max` entries; the count, or -1. */
static int parse_key(PyTypeObject *array_type, PyObject *key, entry *out, int max)
{
    PyObject *tuple = PyTuple_Check(key) ? key : NULL;
    Py_ssize_t n = tuple ? PyTuple_GET_SIZE(tuple) : 1;
    int ellipses = 0;
    if (n > max) {
        PyErr_SetString(PyExc_IndexError, "too many indices for array");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = tuple ? PyTuple_GET_ITEM(tuple, i) : key;
        entry *e = &out[i];
        if (PyLong_CheckExact(item)) {
            e->kind = E_INT;
            e->value = PyNumber_AsSsize_t(item, PyExc_IndexError);
            if (e->value == -1 && PyErr_Occurred())
                return -1;
        } else if (PySlice_Check(item)) {
            e->kind = E_SLICE;
            e->slice = item;
        } else if (item == Py_None) {
            e->kind = E_NEWAXIS;
        } else if (item == Py_Ellipsis) {
            if (++ellipses > 1) {
                PyErr_SetString(PyExc_IndexError, "an index can only have a single ellipsis ('...')");
                return -1;
            }
            e->kind = E_ELLIPSIS;
        } else if (unsupported(array_type, item)) {
            return -1;
        } else if (PyIndex_Check(item)) {
            e->kind = E_INT;
            e->value = PyNumber_AsSsize_t(item, PyExc_IndexError);
            if (e->value == -1 && PyErr_Occurred())
                return -1;
        } else {
            PyErr_Format(PyExc_IndexError,
                         "only integers, slices (`:`), ellipsis (`...`) and numpy.newaxis (`None`) "
                         "are valid indices, not %.100s", Py_TYPE(item)->tp_name);
            return -1;
        }
    }
    return (int)n;
}

/* The view `a[key]`; new reference. */
static PyObject *index_view(PyGPUArray *a, PyObject *key)
{
    entry entries[2 * PYGPU_MAXDIMS];
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];
    int n = parse_key(Py_TYPE(a), key, entries, 2 * PYGPU_MAXDIMS), used = 0, ints = 0, added = 0;
    int nd = 0, axis = 0;
    if (n < 0)
        return NULL;
    for (int i = 0; i < n; i++) {
        ints += entries[i].kind == E_INT;
        used += entries[i].kind == E_INT || entries[i].kind == E_SLICE;
        added += entries[i].kind == E_NEWAXIS;
    }
    if (used > a->nd)
        return PyErr_Format(PyExc_IndexError, "too many indices for array: array is %d-dimensional, "
                            "but %d were indexed", a->nd, used);
    if (a->nd - ints + added > PYGPU_MAXDIMS)      /* (the view's axes, as the pass below makes them) */
        return PyErr_Format(PyExc_IndexError, "too many dimensions: the index gives %d (at most %d)",
                            a->nd - ints + added, PYGPU_MAXDIMS);
    ptrdiff_t offset = 0;       /* bytes from a->data (which is NULL for some empty arrays) */
    for (int i = 0; i <= n; i++) {
        entry *e = &entries[i];
        if (i == n || e->kind == E_ELLIPSIS) {
            /* The ellipsis (or the end of the key) takes the axes not indexed. */
            int take = i == n ? a->nd - axis : a->nd - used;
            for (int k = 0; k < take; k++, axis++, nd++) {
                shape[nd] = GA_SHAPE(a)[axis];
                strides[nd] = GA_STRIDES(a)[axis];
            }
            continue;
        }
        if (e->kind == E_NEWAXIS) {
            shape[nd] = 1;
            strides[nd++] = 0;
            continue;
        }
        ptrdiff_t len = GA_SHAPE(a)[axis], stride = GA_STRIDES(a)[axis];
        if (e->kind == E_INT) {
            Py_ssize_t k = e->value < 0 ? e->value + len : e->value;
            if (k < 0 || k >= len)
                return PyErr_Format(PyExc_IndexError, "index %zd is out of bounds for axis %d with size %zd",
                                    e->value, axis, len);
            offset += k * stride;
        } else {
            Py_ssize_t start, stop, step;
            if (PySlice_Unpack(e->slice, &start, &stop, &step) < 0)
                return NULL;
            Py_ssize_t count = PySlice_AdjustIndices(len, &start, &stop, step);
            if (count > 0)
                offset += start * stride;
            shape[nd] = count;
            /* With one element or none, stride * step may overflow (a[::2**62]): it
             * wraps as NumPy's does, in unsigned arithmetic, where wrapping is defined. */
            strides[nd++] = (ptrdiff_t)((size_t)stride * (size_t)step);
        }
        axis++;
    }
    return pygpu_array_view(a, nd, shape, strides, (char *)((uintptr_t)a->data + (uintptr_t)offset), NULL);
}

PyObject *pygpu_array_subscript(PyObject *self, PyObject *key)
{
    return index_view((PyGPUArray *)self, key);
}

int pygpu_array_ass_subscript(PyObject *self, PyObject *key, PyObject *value)
{
    if (!value) {
        PyErr_SetString(PyExc_ValueError, "cannot delete array elements");
        return -1;
    }
    PyGPUArray *a = (PyGPUArray *)self;
    if (!(a->flags & PYGPU_WRITEABLE)) {
        PyErr_SetString(PyExc_ValueError, "assignment destination is read-only");
        return -1;
    }
    PyObject *view = index_view(a, key);
    if (!view)
        return -1;
    int r = pygpu_array_assign((PyGPUArray *)view, value, NULL, 0);
    Py_DECREF(view);
    return r;
}

PyObject *pygpu_array_item(PyObject *self, Py_ssize_t i)
{
    PyObject *key = PyLong_FromSsize_t(i), *r;
    if (!key)
        return NULL;
    r = index_view((PyGPUArray *)self, key);
    Py_DECREF(key);
    return r;
}

Py_ssize_t pygpu_array_length(PyObject *self)
{
    PyGPUArray *a = (PyGPUArray *)self;
    if (a->nd == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of unsized object");
        return -1;
    }
    return GA_SHAPE(a)[0];
}
