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
#include "peer.h"
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
 * else C or F order by `fortran`; on the current device for `stream`, or
 * with `order` on device `across`, another (pygpu_memory_new_across: NULL
 * with no exception where it declines).  Steals `descr`. */
static PyObject *laid_out(pygpu_state *st, PyTypeObject *tp, PyArray_Descr *descr, int nd, const ptrdiff_t *shape,
                          int fortran, const ptrdiff_t *like, PyObject *stream, int across, pygpu_stream_t order)
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
    PyObject *mem = across < 0 ? pygpu_memory_new(st, (size_t)nbytes, stream, &purpose)
                               : pygpu_memory_new_across(st, (size_t)nbytes, across, order, &purpose);
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
    return laid_out(st, tp, descr, nd, shape, fortran, NULL, stream, -1, PYGPU_STREAM_NULL);
}

/* empty_like, or with `across` >= 0 laid_out's way across. */
static PyObject *like(pygpu_state *st, PyGPUArray *a, PyArray_Descr *descr, int order, PyObject *stream, int across)
{
    int f_only = (a->flags & PYGPU_F_CONTIGUOUS) && !(a->flags & PYGPU_C_CONTIGUOUS);
    if (order == PYGPU_ORDER_A || (order == PYGPU_ORDER_K && (a->flags & (PYGPU_C_CONTIGUOUS | PYGPU_F_CONTIGUOUS))))
        order = f_only ? PYGPU_ORDER_F : PYGPU_ORDER_C;     /* (as NumPy: 'K' of a contiguous array) */
    return laid_out(st, Py_TYPE(a), descr, a->nd, GA_SHAPE(a), order == PYGPU_ORDER_F,
                    order == PYGPU_ORDER_K ? GA_STRIDES(a) : NULL, stream, across, PYGPU_STREAM_NULL);
}

PyObject *pygpu_array_empty_like(pygpu_state *st, PyGPUArray *a, PyArray_Descr *descr, int order, PyObject *stream)
{
    return like(st, a, descr, order, stream, -1);
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

/* dense_copy's to `dev`, another device that a's reaches peer to peer,
 * for its legacy stream, with a's device current throughout: the new
 * array from dev's pool, allocated and written on a's device's legacy
 * stream (after the work queued there, as every copy between devices),
 * and waited for there.  No event between the two devices, which would
 * cost 2 us of a 16 MiB copy's 58 (docs/performance.md#between-devices-call-by-call).
 * NULL with no exception where this way declines. */
static PyObject *dense_copy_across(pygpu_state *st, PyGPUArray *a, int order, PyObject *stream, int dev)
{
    int prev;
    ptrdiff_t count;
    if (pygpu_shape_size(a->nd, GA_SHAPE(a), &count) < 0 || count == 0 || !pygpu_peer_usable(dev, a->device) ||
        pygpu_device_enter(st, a->device, &prev) < 0)
        return NULL;
    Py_INCREF(a->descr);
    PyGPUArray *c = (PyGPUArray *)like(st, a, a->descr, order, stream, dev);
    if (c && pygpu_copy_across(st, pygpu_device_side(c), pygpu_device_side(a), a->nd, GA_SHAPE(a),
                               GA_ITEMSIZE(a)) < 0)
        Py_CLEAR(c);
    if (pygpu_device_leave(st, prev) < 0)
        Py_CLEAR(c);
    if (c)
        pygpu_array_set_last_stream(st, c, stream, PYGPU_STREAM_NULL);
    return (PyObject *)c;
}

/* A dense copy of `a` on device `dev` (stream `s` of it), laid out in
 * `order` (enum pygpu_order); new reference.  A copy to another device is
 * done when this returns. */
PyObject *pygpu_array_dense_copy(pygpu_state *st, PyGPUArray *a, int order, pygpu_stream_t s, PyObject *stream,
                                 int dev)
{
    int prev;
    if (pygpu_memory_usable(a->mem) < 0)
        return NULL;
    if (dev != a->device && s == PYGPU_STREAM_NULL) {
        PyObject *c = dense_copy_across(st, a, order, stream, dev);
        if (c || PyErr_Occurred())
            return c;
    }
    if (pygpu_device_enter(st, dev, &prev) < 0)
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
