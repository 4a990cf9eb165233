/*
 * array.c -- the one internal constructor every GPUArray comes from
 * (pygpu_array_wrap), and the ways it is called with fresh memory: empty
 * arrays in any layout, views, and dense copies of another array.
 *
 * The type's slots are array_type.c's; GPUArray(...) and the creation
 * functions array_new.c's; the host doors array_host.c's.
 */
#include "pygpu.h"
#include "array.h"
#include "convert.h"
#include "copy/copy.h"
#include "device.h"
#include "memory.h"
#include "shape.h"
#include "state.h"
#include "stream.h"

#include <structmember.h>

_Static_assert(sizeof(ptrdiff_t) == sizeof(Py_ssize_t), "ptrdiff_t and Py_ssize_t differ");

static int layout_flags(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides, ptrdiff_t itemsize)
{
    return (pygpu_shape_is_contiguous(nd, shape, strides, itemsize, 0) ? PYGPU_C_CONTIGUOUS : 0) |
           (pygpu_shape_is_contiguous(nd, shape, strides, itemsize, 1) ? PYGPU_F_CONTIGUOUS : 0);
}

PyObject *pygpu_array_wrap(pygpu_state *st, PyTypeObject *tp, PyArray_Descr *descr, int nd,
                           const ptrdiff_t *shape, const ptrdiff_t *strides, char *data,
                           PyObject *mem, PyObject *base, int device, int writeable)
{
    (void)st;
    if (nd > PYGPU_MAXDIMS) {
        Py_DECREF(descr);
        return PyErr_Format(PyExc_ValueError, "too many dimensions: %d (at most %d)", nd, PYGPU_MAXDIMS);
    }
    PyGPUArray *a = (PyGPUArray *)tp->tp_alloc(tp, 3 * nd);   /* shape, strides, DLPack's strides */
    if (!a) {
        Py_DECREF(descr);
        return NULL;
    }
    ptrdiff_t itemsize = (ptrdiff_t)PyDataType_ELSIZE(descr);
    a->nd = nd;
    a->data = data;
    a->device = device;
    a->descr = descr;
    a->mem = Py_NewRef(mem ? mem : Py_None);
    pygpu_memory_view(a->mem, 1);
    a->base = Py_XNewRef(base);
    if (nd > 0) {               /* (0-d: shape and strides may be NULL, which memcpy may not take) */
        memcpy(GA_SHAPE(a), shape, (size_t)nd * sizeof(ptrdiff_t));
        if (strides)
            memcpy(GA_STRIDES(a), strides, (size_t)nd * sizeof(ptrdiff_t));
        else
            pygpu_shape_strides(nd, shape, itemsize, 0, GA_STRIDES(a));
    }
    a->flags = layout_flags(nd, GA_SHAPE(a), GA_STRIDES(a), itemsize) | (writeable ? PYGPU_WRITEABLE : 0);
    a->shape_tuple = pygpu_tuple_of(shape, nd);
    a->ptr_int = a->shape_tuple ? PyLong_FromVoidPtr(data) : NULL;
    if (!a->ptr_int) {
        Py_DECREF(a);
        return NULL;
    }
    return (PyObject *)a;
}

/* A new array of `shape` with fresh memory laid out by `strides` (a
 * contiguous layout), or NULL strides: contiguous like `like` (order 'K'),
 * else C or F order by `fortran`.  Steals `descr`. */
static PyObject *empty_laid_out(pygpu_state *st, PyTypeObject *tp, PyArray_Descr *descr, int nd,
                                const ptrdiff_t *shape, int fortran, const ptrdiff_t *like, PyObject *stream)
{
    ptrdiff_t nbytes, strides[PYGPU_MAXDIMS];
    ptrdiff_t itemsize = (ptrdiff_t)PyDataType_ELSIZE(descr);
    if (pygpu_checked_nbytes(nd, shape, itemsize, &nbytes) < 0) {
        Py_DECREF(descr);
        return NULL;
    }
    if (like)
        pygpu_shape_strides_like(nd, shape, like, itemsize, strides);
    else
        pygpu_shape_strides(nd, shape, itemsize, fortran, strides);
    pygpu_alloc_purpose purpose = {nd, shape, descr};
    PyObject *mem = pygpu_memory_new(st, (size_t)nbytes, stream, &purpose);
    if (!mem) {
        Py_DECREF(descr);
        return NULL;
    }
    PyGPUMemory *m = (PyGPUMemory *)mem;
    PyObject *a = pygpu_array_wrap(st, tp, descr, nd, shape, strides, m->ptr, mem, NULL, m->device, 1);
    if (a) {    /* the memory is ready on the stream it was allocated on */
        ((PyGPUArray *)a)->last_stream = m->stream;
        ((PyGPUArray *)a)->last_stream_ref = Py_XNewRef(m->stream_ref);
    }
    Py_DECREF(mem);
    return a;
}

PyObject *pygpu_array_empty(pygpu_state *st, PyTypeObject *tp, PyArray_Descr *descr, int nd,
                            const ptrdiff_t *shape, int fortran, PyObject *stream)
{
    return empty_laid_out(st, tp, descr, nd, shape, fortran, NULL, stream);
}

PyObject *pygpu_array_empty_like(pygpu_state *st, PyGPUArray *a, PyArray_Descr *descr, int order, PyObject *stream)
{
    int f_only = (a->flags & PYGPU_F_CONTIGUOUS) && !(a->flags & PYGPU_C_CONTIGUOUS);
    if (order == PYGPU_ORDER_A || (order == PYGPU_ORDER_K && (a->flags & (PYGPU_C_CONTIGUOUS | PYGPU_F_CONTIGUOUS))))
        order = f_only ? PYGPU_ORDER_F : PYGPU_ORDER_C;     /* (as NumPy: 'K' of a contiguous array) */
    return empty_laid_out(st, Py_TYPE(a), descr, a->nd, GA_SHAPE(a), order == PYGPU_ORDER_F,
                          order == PYGPU_ORDER_K ? GA_STRIDES(a) : NULL, stream);
}

PyObject *pygpu_array_view(PyGPUArray *a, int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                           char *data, PyArray_Descr *descr)
{
    /* As NumPy: a view's base is the array that owns the memory. */
    PyObject *base = a->base && PyObject_TypeCheck(a->base, Py_TYPE(a)) ? a->base : (PyObject *)a;
    if (!descr)
        descr = a->descr;
    Py_INCREF(descr);
    return pygpu_array_wrap(NULL, Py_TYPE(a), descr, nd, shape, strides, data, a->mem, base, a->device,
                            a->flags & PYGPU_WRITEABLE);
}

/* A dense copy of `a` on device `dev` (stream `s` of it), laid out in
 * `order` (enum pygpu_order); new reference.  A copy to another device is
 * done when this returns. */
PyObject *pygpu_array_dense_copy(pygpu_state *st, PyGPUArray *a, int order, pygpu_stream_t s, PyObject *stream,
                                 int dev)
{
    int prev;
    if (pygpu_memory_usable(a->mem) < 0 || pygpu_device_enter(st, dev, &prev) < 0)
        return NULL;
    Py_INCREF(a->descr);
    /* (the copy too with `dev` current: it would make it current again) */
    PyGPUArray *c = (PyGPUArray *)pygpu_array_empty_like(st, a, a->descr, order, stream);
    if (c && pygpu_copy(st, pygpu_device_side(c), pygpu_device_side(a), a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, 1) < 0)
        Py_CLEAR(c);
    if (pygpu_device_leave(st, prev) < 0)
        Py_CLEAR(c);
    if (c) {
        pygpu_array_set_last_stream(st, c, stream, s);
        if (dev == a->device)
            pygpu_array_set_last_stream(st, a, stream, s);
    }
    return (PyObject *)c;
}
