/*
 * array_shape.c -- GPUArray's shape methods: those that make views (view,
 * reshape, ravel, squeeze, transpose, swapaxes) and flatten, which copies;
 * reshape and ravel copy too where no view has the asked shape, as NumPy's.
 */
#include "pygpu.h"
#include "array_shape.h"
#include "array.h"
#include "convert.h"
#include "dtype.h"
#include "shape.h"
#include "state.h"
#include "stream.h"

#define SELF ((PyGPUArray *)self)

/* numpy.exceptions.AxisError for `axis` of an nd-dimensional array of
 * type `tp` (whose module state caches the class); -1. */
static int axis_error(PyTypeObject *tp, Py_ssize_t axis, int nd)
{
    pygpu_state *st = pygpu_state_of_type(tp);
    PyObject *exc = st ? PyObject_CallFunction(st->AxisError, "ni", axis, nd) : NULL;
    if (exc) {
        PyErr_SetObject(st->AxisError, exc);
        Py_DECREF(exc);
    }
    return -1;
}

/* Normalise an axis argument for nd axes; 0, or -1 with AxisError/TypeError. */
static int axis_arg(PyTypeObject *tp, PyObject *obj, int nd, int *axis)
{
    Py_ssize_t v = PyNumber_AsSsize_t(obj, PyExc_IndexError);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < -nd || v >= nd)
        return axis_error(tp, v, nd);
    *axis = (int)(v < 0 ? v + nd : v);
    return 0;
}

/* C or F order (1 for F) for reshape, ravel and flatten: 'C' (None), 'F',
 * or for 'A' and 'K' F where `a` is F-contiguous and not C-contiguous, as
 * NumPy reads the elements; -2 with ValueError. */
static int flat_order(PyGPUArray *a, PyObject *order)
{
    int o = pygpu_order_arg(order, 1);
    if (o == -1)
        return 0;
    if (o == PYGPU_ORDER_A || o == PYGPU_ORDER_K)
        return (a->flags & PYGPU_F_CONTIGUOUS) && !(a->flags & PYGPU_C_CONTIGUOUS);
    return o;
}

/* ---- views ------------------------------------------------------------------ */

PyObject *pygpu_array_view_method(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"dtype", NULL};
    PyObject *dtype = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:view", kwlist, &dtype))
        return NULL;
    if (dtype == Py_None)
        return pygpu_array_view(SELF, SELF->nd, GA_SHAPE(SELF), GA_STRIDES(SELF), SELF->data, NULL);
    PyArray_Descr *d = pygpu_descr_arg(dtype);
    if (!d)
        return NULL;
    ptrdiff_t old = GA_ITEMSIZE(SELF), new = (ptrdiff_t)PyDataType_ELSIZE(d);
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];
    int nd = SELF->nd;
    memcpy(shape, GA_SHAPE(SELF), (size_t)nd * sizeof(ptrdiff_t));
    memcpy(strides, GA_STRIDES(SELF), (size_t)nd * sizeof(ptrdiff_t));
    if (old != new) {
        if (nd == 0) {
            PyErr_SetString(PyExc_ValueError, "changing the dtype of a 0-d array needs the same itemsize");
            goto fail;
        }
        if (strides[nd - 1] != old && shape[nd - 1] > 1 && pygpu_array_size(SELF) > 0) {
            PyErr_SetString(PyExc_ValueError, "to change to a dtype of a different size, the last axis must be "
                                              "contiguous");
            goto fail;
        }
        if ((shape[nd - 1] * old) % new != 0) {
            PyErr_Format(PyExc_ValueError, "when changing to a dtype of a different size, the last axis "
                         "(%zd bytes) must divide by the new itemsize (%zd)", shape[nd - 1] * old, new);
            goto fail;
        }
        shape[nd - 1] = shape[nd - 1] * old / new;
        strides[nd - 1] = new;
    }
    return pygpu_array_view(SELF, nd, shape, strides, SELF->data, d);   /* steals d */
fail:
    Py_DECREF(d);
    return NULL;
}

/* Parse shape from reshape's arguments (a tuple, or ints), resolving -1. */
static int reshape_shape(pygpu_state *st, PyGPUArray *a, PyObject *args, int *nd, ptrdiff_t *shape)
{
    PyObject *obj = PyTuple_GET_SIZE(args) == 1 ? PyTuple_GET_ITEM(args, 0) : args;
    ptrdiff_t known, size = pygpu_array_size(a), given[PYGPU_MAXDIMS];
    int unknown = -1;
    if (pygpu_dims_arg(st, obj, nd, shape, -1) < 0)
        return -1;
    for (int i = 0; i < *nd; i++) {
        given[i] = shape[i] < 0 ? 1 : shape[i];
        if (shape[i] >= 0)
            continue;
        if (unknown >= 0) {
            PyErr_SetString(PyExc_ValueError, "can only specify one unknown dimension");
            return -1;
        }
        unknown = i;
    }
    if (pygpu_shape_nbytes(*nd, given, GA_ITEMSIZE(a), &known) < 0) {    /* (as NumPy, even if empty) */
        PyErr_SetString(PyExc_ValueError, "cannot reshape: the new shape's size overflows");
        return -1;
    }
    known /= GA_ITEMSIZE(a);
    if (unknown >= 0 && known > 0 && size % known == 0)
        shape[unknown] = size / known;
    else if (unknown >= 0 || known != size) {
        PyObject *want = pygpu_shape_repr(shape, *nd);
        if (want)
            PyErr_Format(PyExc_ValueError, "cannot reshape array of size %zd into shape %U", size, want);
        Py_XDECREF(want);
        return -1;
    }
    return 0;
}

/* `a` viewed (or, where no view exists, copied) as shape; new reference. */
static PyObject *reshape_to(PyGPUArray *a, int nd, const ptrdiff_t *shape, int fortran)
{
    ptrdiff_t strides[PYGPU_MAXDIMS];
    if (pygpu_shape_reshape_view(a->nd, GA_SHAPE(a), GA_STRIDES(a), nd, shape, GA_ITEMSIZE(a), fortran, strides))
        return pygpu_array_view(a, nd, shape, strides, a->data, NULL);
    pygpu_state *st = pygpu_state_of((PyObject *)a);
    pygpu_stream_t s;
    if (!st || pygpu_stream_for(st, NULL, a->device, "array", &s) < 0)
        return NULL;
    PyGPUArray *c = (PyGPUArray *)pygpu_array_dense_copy(st, a, fortran, s, NULL, a->device);
    if (!c)
        return NULL;
    pygpu_shape_strides(nd, shape, GA_ITEMSIZE(a), fortran, strides);
    PyObject *r = pygpu_array_wrap(st, Py_TYPE(a), (Py_INCREF(a->descr), a->descr), nd, shape, strides, c->data,
                                   c->mem, NULL, c->device, 1);
    if (r)
        pygpu_array_set_last_stream(st, (PyGPUArray *)r, NULL, s);
    Py_DECREF(c);
    return r;
}

PyObject *pygpu_array_reshape(PyObject *self, PyObject *args, PyObject *kwds)
{
    ptrdiff_t shape[PYGPU_MAXDIMS];
    int nd, fortran = 0;
    PyObject *order = kwds ? PyDict_GetItemString(kwds, "order") : NULL;
    if (kwds && PyDict_GET_SIZE(kwds) > (order ? 1 : 0)) {
        PyErr_SetString(PyExc_TypeError, "reshape() takes only the keyword argument 'order'");
        return NULL;
    }
    if (PyTuple_GET_SIZE(args) == 0) {
        PyErr_SetString(PyExc_TypeError, "reshape() needs a shape");
        return NULL;
    }
    if ((fortran = flat_order(SELF, order)) < 0 || reshape_shape(pygpu_state_of(self), SELF, args, &nd, shape) < 0)
        return NULL;
    if (order && PyUnicode_Check(order) && PyUnicode_CompareWithASCIIString(order, "K") == 0) {
        PyErr_SetString(PyExc_ValueError, "order 'K' is not permitted for reshaping");
        return NULL;
    }
    return reshape_to(SELF, nd, shape, fortran);
}

/* A 1-d copy of `a`'s elements, read in C or F (`fortran`) order; new reference. */
static PyObject *flat_copy(PyGPUArray *a, int fortran)
{
    pygpu_state *st = pygpu_state_of((PyObject *)a);
    pygpu_stream_t s;
    ptrdiff_t n = pygpu_array_size(a), stride = GA_ITEMSIZE(a);
    if (!st || pygpu_stream_for(st, NULL, a->device, "array", &s) < 0)
        return NULL;
    PyGPUArray *c = (PyGPUArray *)pygpu_array_dense_copy(st, a, fortran, s, NULL, a->device);
    if (!c)
        return NULL;
    PyObject *r = pygpu_array_wrap(st, Py_TYPE(a), (Py_INCREF(a->descr), a->descr), 1, &n, &stride, c->data,
                                   c->mem, NULL, c->device, 1);
    if (r)
        pygpu_array_set_last_stream(st, (PyGPUArray *)r, NULL, s);
    Py_DECREF(c);
    return r;
}

PyObject *pygpu_array_ravel(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"order", NULL};
    PyObject *order = NULL;
    int fortran;
    ptrdiff_t n = pygpu_array_size(SELF), stride = GA_ITEMSIZE(SELF);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:ravel", kwlist, &order) ||
        (fortran = flat_order(SELF, order)) < 0)
        return NULL;
    /* As NumPy: a view when the elements are contiguous in that order, else a copy. */
    if (SELF->flags & (fortran ? PYGPU_F_CONTIGUOUS : PYGPU_C_CONTIGUOUS))
        return pygpu_array_view(SELF, 1, &n, &stride, SELF->data, NULL);
    return flat_copy(SELF, fortran);
}

PyObject *pygpu_array_flatten(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"order", NULL};
    PyObject *order = NULL;
    int fortran;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:flatten", kwlist, &order) ||
        (fortran = flat_order(SELF, order)) < 0)
        return NULL;
    return flat_copy(SELF, fortran);
}

PyObject *pygpu_array_squeeze(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"axis", NULL};
    PyObject *axis = Py_None;
    int drop[PYGPU_MAXDIMS] = {0}, nd = 0, k;
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:squeeze", kwlist, &axis))
        return NULL;
    if (axis == Py_None) {
        for (int i = 0; i < SELF->nd; i++)
            drop[i] = GA_SHAPE(SELF)[i] == 1;
    } else if (SELF->nd == 0 && PyIndex_Check(axis)) {
        /* NumPy lets a 0-d array "squeeze" axis 0 or -1 */
        Py_ssize_t v = PyNumber_AsSsize_t(axis, PyExc_IndexError);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v != 0 && v != -1)
            return axis_error(Py_TYPE(self), v, 0), NULL;
    } else {
        PyObject *seq = PyIndex_Check(axis) ? PyTuple_Pack(1, axis) : PySequence_Fast(axis, "axis must be ints");
        if (!seq)
            return NULL;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            if (axis_arg(Py_TYPE(self), PySequence_Fast_GET_ITEM(seq, i), SELF->nd, &k) < 0) {
                Py_DECREF(seq);
                return NULL;
            }
            if (drop[k]) {
                Py_DECREF(seq);
                PyErr_SetString(PyExc_ValueError, "duplicate value in 'axis'");
                return NULL;
            }
            if (GA_SHAPE(SELF)[k] != 1) {
                Py_DECREF(seq);
                PyErr_SetString(PyExc_ValueError, "cannot select an axis to squeeze out which has size not "
                                                  "equal to one");
                return NULL;
            }
            drop[k] = 1;
        }
        Py_DECREF(seq);
    }
    for (int i = 0; i < SELF->nd; i++) {
        if (!drop[i]) {
            shape[nd] = GA_SHAPE(SELF)[i];
            strides[nd++] = GA_STRIDES(SELF)[i];
        }
    }
    return pygpu_array_view(SELF, nd, shape, strides, SELF->data, NULL);
}

static PyObject *permuted(PyGPUArray *a, const int *perm)
{
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];
    for (int i = 0; i < a->nd; i++) {
        shape[i] = GA_SHAPE(a)[perm[i]];
        strides[i] = GA_STRIDES(a)[perm[i]];
    }
    return pygpu_array_view(a, a->nd, shape, strides, a->data, NULL);
}

PyObject *pygpu_array_T(PyGPUArray *a)
{
    int perm[PYGPU_MAXDIMS];
    for (int i = 0; i < a->nd; i++)
        perm[i] = a->nd - 1 - i;
    return permuted(a, perm);
}

PyObject *pygpu_array_transpose(PyObject *self, PyObject *args)
{
    int perm[PYGPU_MAXDIMS], seen[PYGPU_MAXDIMS] = {0}, nd = SELF->nd;
    PyObject *axes = args;
    if (PyTuple_GET_SIZE(args) == 1) {     /* transpose(axes): a sequence (a NumPy array too), or None */
        PyObject *one = PyTuple_GET_ITEM(args, 0);
        if (!PyIndex_Check(one) || (PyArray_Check(one) && PyArray_NDIM((PyArrayObject *)one) > 0))
            axes = one;
    }
    if (axes == Py_None || (PyTuple_Check(axes) && PyTuple_GET_SIZE(axes) == 0))
        return pygpu_array_T(SELF);
    PyObject *seq = PySequence_Fast(axes, "transpose() axes must be ints");
    if (!seq)
        return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != nd) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "axes don't match array");
        return NULL;
    }
    for (int i = 0; i < nd; i++) {
        if (axis_arg(Py_TYPE(self), PySequence_Fast_GET_ITEM(seq, i), nd, &perm[i]) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
        if (seen[perm[i]]++) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_ValueError, "repeated axis in transpose");
            return NULL;
        }
    }
    Py_DECREF(seq);
    return permuted(SELF, perm);
}

PyObject *pygpu_array_swapaxes(PyObject *self, PyObject *args)
{
    PyObject *o1, *o2;
    int a1, a2, perm[PYGPU_MAXDIMS];
    if (!PyArg_ParseTuple(args, "OO:swapaxes", &o1, &o2) || axis_arg(Py_TYPE(self), o1, SELF->nd, &a1) < 0 ||
        axis_arg(Py_TYPE(self), o2, SELF->nd, &a2) < 0)
        return NULL;
    for (int i = 0; i < SELF->nd; i++)
        perm[i] = i;
    perm[a1] = a2;
    perm[a2] = a1;
    return permuted(SELF, perm);
}
