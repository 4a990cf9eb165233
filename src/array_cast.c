/*
 * array_cast.c -- astype: an array's elements converted to another dtype
 * in a new array on its device, by PyGPU's cast kernel, or by NumPy on the
 * host where the kernel cannot run or NumPy's rule checks each value.
 */
#include "pygpu.h"
#include "array_cast.h"
#include "array.h"
#include "array_host.h"
#include "copy/copy.h"
#include "device.h"
#include "dtype.h"
#include "memory.h"
#include "state.h"
#include "stream.h"


/* ---- astype ----------------------------------------------------------------- */

/* 1 if `a` already is laid out as `order` asks (enum pygpu_order). */
int pygpu_array_in_order(PyGPUArray *a, int order)
{
    int c = (a->flags & PYGPU_C_CONTIGUOUS) != 0, f = (a->flags & PYGPU_F_CONTIGUOUS) != 0;
    return order == PYGPU_ORDER_K || (order == PYGPU_ORDER_C && c) || (order == PYGPU_ORDER_F && f) ||
           (order == PYGPU_ORDER_A && (c || f));
}

/* `a`'s elements, converted by NumPy on the host (`casting` its rule's
 * name), into `out` on the device; 0, or -1 with an exception. */
static int convert_on_host(PyGPUArray *a, PyGPUArray *out, const char *casting, PyObject *stream)
{
    PyObject *h = pygpu_array_get(a, NULL, stream, 0, 0), *c = NULL;
    if (h)
        c = PyObject_CallMethod(h, "astype", "Oss", (PyObject *)out->descr, "K", casting);
    int r = c ? pygpu_array_assign(out, c, stream, 0) : -1;
    Py_XDECREF(c);
    Py_XDECREF(h);
    return r;
}

PyObject *pygpu_array_astype(PyGPUArray *a, PyArray_Descr *descr, int order, const char *numpy_casting,
                             PyObject *stream)
{
    pygpu_state *st = pygpu_state_of((PyObject *)a);
    pygpu_stream_t s;
    int prev, here;
    if (!st || pygpu_memory_usable(a->mem) < 0 || pygpu_stream_for(st, stream, a->device, "array", &s) < 0)
        return NULL;
    if (PyArray_EquivTypes(a->descr, descr) && !numpy_casting)
        return pygpu_array_dense_copy(st, a, order, s, stream, a->device);
    if ((here = numpy_casting ? 0 : pygpu_kernels_usable(st, a->device)) < 0 ||
        (here && pygpu_complex_warning(st, a->descr, descr) < 0) || pygpu_device_enter(st, a->device, &prev) < 0)
        return NULL;
    Py_INCREF(descr);
    PyGPUArray *r = (PyGPUArray *)pygpu_array_empty_like(st, a, descr, order, stream);
    if (pygpu_device_leave(st, prev) < 0)
        Py_CLEAR(r);
    if (!r)
        return NULL;
    int done = here ? pygpu_cast(st, pygpu_device_side(r), pygpu_ktype_of(descr), pygpu_device_side(a),
                                 pygpu_ktype_of(a->descr), a->nd, GA_SHAPE(a), s)
                    : 1;
    if (done == 1)      /* no kernels here, or a rule that NumPy checks: NumPy converts */
        done = convert_on_host(a, r, numpy_casting ? numpy_casting : "unsafe", stream);
    if (done < 0) {
        Py_DECREF(r);
        return NULL;
    }
    pygpu_array_set_last_stream(st, r, stream, s);
    pygpu_array_set_last_stream(st, a, stream, s);
    return (PyObject *)r;
}
