/*
 * cai.c -- __cuda_array_interface__ (version 3) both ways, handing
 * consumers the stream of the array's last work (stream.c keeps that
 * record, for DLPack too).
 *
 * Only CUDA arrays export the interface: the protocol describes CUDA device
 * pointers and CUDA streams, so a HIP array claiming it would send HIP
 * pointers to consumers that call the CUDA runtime on them, and a host array
 * would send host pointers to consumers that expect device memory.  Those
 * backends export DLPack (kDLROCM, kDLCPU) instead, where the device type
 * travels with the pointer.  For the same reason only the CUDA backend
 * imports it; the others check the dict and refuse it with BufferError.
 *
 * Streams: an array remembers the stream of the last work queued on its
 * memory (on its root array: views share it), starting with the stream its
 * memory was allocated on.  Exporting it tells the consumer which stream to
 * order after; importing makes the current stream wait for the producer's.
 */
#include "pygpu.h"
#include "cai.h"
#include "array.h"
#include "convert.h"
#include "device.h"
#include "dtype.h"
#include "errors.h"
#include "memory.h"
#include "shape.h"
#include "state.h"
#include "stream.h"

#include <string.h>

/* ---- layouts that come from other libraries -------------------------------- */

int pygpu_foreign_layout(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides, ptrdiff_t itemsize,
                         const char *who)
{
    ptrdiff_t size, span = itemsize;
    if (pygpu_shape_size(nd, shape, &size) < 0) {
        PyErr_Format(PyExc_BufferError, "%s: the shape's size overflows", who);
        return -1;
    }
    if (size == 0)
        return 0;
    for (int i = 0; i < nd; i++) {
        if (shape[i] < 2)
            continue;
        if (strides[i] == PTRDIFF_MIN) {
            PyErr_Format(PyExc_BufferError, "%s: stride %d is out of range", who, i);
            return -1;
        }
        ptrdiff_t step = strides[i] < 0 ? -strides[i] : strides[i];
        if (step > (PTRDIFF_MAX - span) / (shape[i] - 1)) {
            PyErr_Format(PyExc_BufferError, "%s: the strides reach past the address space", who);
            return -1;
        }
        span += step * (shape[i] - 1);
    }
    return 0;
}

/* ---- export ---------------------------------------------------------------- */

/* The typestr ('<f4', '|b1') and descr item (('', typestr)) of `d`, from
 * the interop cache; borrowed. */
static PyObject *cached_by_type(PyObject *t, PyArray_Descr *d)
{
    int n = d->type_num;
    return n >= 0 && n < PyTuple_GET_SIZE(t) ? PyTuple_GET_ITEM(t, n) : Py_None;
}

/* d[key] = value, stealing `value`; 0, or -1 with an exception set. */
static int put(PyObject *d, PyObject *key, PyObject *value)
{
    if (!value)
        return -1;
    int r = PyDict_SetItem(d, key, value);
    Py_DECREF(value);
    return r;
}

/* The CAI `stream` entry for handle s: 1 names the legacy default stream
 * (0 is not allowed by the protocol), 2 the per-thread one. */
static PyObject *stream_entry(pygpu_stream_t s)
{
    return s == PYGPU_STREAM_NULL ? PyLong_FromLong(1) : PyLong_FromVoidPtr(s);
}

PyObject *pygpu_array_cai(PyObject *self, void *closure)
{
    (void)closure;
    PyGPUArray *a = (PyGPUArray *)self;
    pygpu_state *st = pygpu_state_of(self);
    if (!st || pygpu_memory_usable(a->mem) < 0 || pygpu_fork_check(st) < 0)
        return NULL;
    PyObject *typestr = cached_by_type(st->names.typestrs, a->descr);
    PyObject *item = cached_by_type(st->names.descr_items, a->descr);
    if (typestr == Py_None) {
        PyErr_Format(PyExc_AttributeError, "dtype %R has no __cuda_array_interface__ typestr", (PyObject *)a->descr);
        return NULL;
    }
    int empty = 0;
    for (int i = 0; i < a->nd; i++)
        empty |= GA_SHAPE(a)[i] == 0;
    PyObject *d = PyDict_Copy(st->names.cai_template);
    if (!d)
        return NULL;
    /* (the protocol asks for address 0 for empty arrays) */
    PyObject *data = PyTuple_Pack(2, empty ? st->names.zero : a->ptr_int,
                                  (a->flags & PYGPU_WRITEABLE) ? Py_False : Py_True);
    PyObject *descr = PyList_New(1);
    if (descr)
        PyList_SET_ITEM(descr, 0, Py_NewRef(item));
    if (PyDict_SetItem(d, st->names.shape, a->shape_tuple) < 0 ||
        PyDict_SetItem(d, st->names.typestr, typestr) < 0 ||
        put(d, st->names.data, data) < 0 ||
        PyDict_SetItem(d, st->names.version, st->names.three) < 0 ||
        put(d, st->names.strides,
            (a->flags & PYGPU_C_CONTIGUOUS) ? Py_NewRef(Py_None) : pygpu_tuple_of(GA_STRIDES(a), a->nd)) < 0 ||
        put(d, st->names.descr, descr) < 0 ||
        put(d, st->names.stream, stream_entry(pygpu_array_root(a)->last_stream)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* ---- import ---------------------------------------------------------------- */

/* iface[key] (borrowed), or NULL: with ValueError when `required`. */
static PyObject *entry(PyObject *iface, PyObject *name, int required)
{
    PyObject *v = PyDict_GetItemWithError(iface, name);
    if (!v && !PyErr_Occurred() && required)
        PyErr_Format(PyExc_ValueError, "__cuda_array_interface__ has no %R entry", name);
    return v;
}

/* The dtype a typestr names; new reference, or NULL with TypeError. */
static PyArray_Descr *typestr_descr(PyObject *typestr)
{
    PyArray_Descr *d = NULL;
    if (!PyUnicode_Check(typestr)) {
        PyErr_Format(PyExc_TypeError, "__cuda_array_interface__ typestr must be a str, not %.100s",
                     Py_TYPE(typestr)->tp_name);
        return NULL;
    }
    if (!PyArray_DescrConverter(typestr, &d)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "__cuda_array_interface__ typestr %R is not a dtype", typestr);
        return NULL;
    }
    if (!pygpu_descr_supported(d)) {
        PyErr_Format(PyExc_TypeError, "__cuda_array_interface__ typestr %R (%R) is not a GPUArray dtype: "
                     "use bool, int8-64, uint8-64, float16/32/64 or complex64/128 in native byte order",
                     typestr, (PyObject *)d);
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* The (pointer, read-only) pair; 0, or -1 with an exception set. */
static int data_entry(PyObject *data, char **ptr, int *readonly)
{
    if (!PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2 || !PyLong_Check(PyTuple_GET_ITEM(data, 0))) {
        PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ data must be a tuple (pointer: int, "
                                         "read_only: bool)");
        return -1;
    }
    *ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    if (*ptr == NULL && PyErr_Occurred())
        return -1;
    return (*readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1))) < 0 ? -1 : 0;
}

/* The producer's stream: *has 0 for None (no synchronisation needed). */
static int stream_entry_arg(PyObject *v, pygpu_stream_t *s, int *has)
{
    *has = 0;
    if (!v || v == Py_None)
        return 0;
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "__cuda_array_interface__ stream must be an int or None, not %.100s",
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long h = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (h == -1 && PyErr_Occurred())
        return -1;
    if (overflow < 0 || (!overflow && h <= 0)) {
        PyErr_Format(PyExc_ValueError, "__cuda_array_interface__ stream %R is not allowed: 1 is the legacy "
                     "default stream, 2 the per-thread one, larger values stream handles (0 is ambiguous)", v);
        return -1;
    }
    if ((*s = PyLong_AsVoidPtr(v)) == NULL && PyErr_Occurred())
        return -1;
    *has = 1;
    return 0;
}

typedef struct {
    int nd;
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];
    int has_strides, readonly, has_stream;
    char *ptr;
    pygpu_stream_t stream;
} cai_layout;

/* Read and check every entry of the dict; descr: new reference. */
static int parse_iface(pygpu_state *st, PyObject *iface, cai_layout *l, PyArray_Descr **descr)
{
    PyObject *v;
    *descr = NULL;
    if (!PyDict_Check(iface)) {
        PyErr_Format(PyExc_TypeError, "__cuda_array_interface__ must be a dict, not %.100s", Py_TYPE(iface)->tp_name);
        return -1;
    }
    if (!(v = entry(iface, st->names.version, 1)))
        return -1;
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ version must be an int");
        return -1;
    }
    if (!(v = entry(iface, st->names.shape, 1)) || pygpu_shape_arg(st, v, &l->nd, l->shape) < 0)
        return -1;
    if (!(v = entry(iface, st->names.data, 1)) || data_entry(v, &l->ptr, &l->readonly) < 0)
        return -1;
    if ((v = entry(iface, st->names.mask, 0)) != NULL && v != Py_None) {
        PyErr_SetString(PyExc_BufferError, "__cuda_array_interface__ with a mask: masked arrays are not supported");
        return -1;
    }
    if (PyErr_Occurred() || stream_entry_arg(entry(iface, st->names.stream, 0), &l->stream, &l->has_stream) < 0)
        return -1;
    v = entry(iface, st->names.strides, 0);
    l->has_strides = v && v != Py_None;
    if (PyErr_Occurred())
        return -1;
    if (l->has_strides) {
        int n;
        if (pygpu_dims_arg(st, v, &n, l->strides, PTRDIFF_MIN) < 0)
            return -1;
        if (n != l->nd) {
            PyErr_Format(PyExc_ValueError, "__cuda_array_interface__ strides has %d entries but the shape has %d",
                         n, l->nd);
            return -1;
        }
    }
    if (!(v = entry(iface, st->names.typestr, 1)) || !(*descr = typestr_descr(v)))
        return -1;
    ptrdiff_t itemsize = (ptrdiff_t)PyDataType_ELSIZE(*descr), size;
    if (!l->has_strides && pygpu_shape_strides(l->nd, l->shape, itemsize, 0, l->strides) < 0) {
        PyErr_SetString(PyExc_BufferError, "__cuda_array_interface__: the shape's byte count overflows");
        goto fail;
    }
    if (pygpu_foreign_layout(l->nd, l->shape, l->strides, itemsize, "__cuda_array_interface__") < 0)
        goto fail;
    pygpu_shape_size(l->nd, l->shape, &size);
    if (size > 0 && l->ptr == NULL) {
        PyErr_SetString(PyExc_ValueError, "__cuda_array_interface__: null data pointer for a non-empty array");
        goto fail;
    }
    return 0;
fail:
    Py_CLEAR(*descr);
    return -1;
}

#ifdef PYGPU_BACKEND_CUDA
/* The device holding `ptr` (the current one for an empty array); -1 with
 * BufferError when the device cannot address it. */
static int device_of(pygpu_state *st, const void *ptr)
{
    int dev = -1;
    if (ptr == NULL)
        return pygpu_current_device(st);
    if (pygpu_check(st, pygpu_rt_pointer_device(ptr, &dev), "PointerGetAttributes") < 0)
        return -1;
    if (dev < 0)
        PyErr_Format(PyExc_BufferError, "__cuda_array_interface__: address %p is not memory the %s runtime "
                     "can use (unregistered host memory?)", ptr, pygpu_rt_vendor());
    return dev;
}
#endif

PyObject *pygpu_cai_import(pygpu_state *st, PyObject *obj, PyObject *iface)
{
    cai_layout l;
    PyArray_Descr *descr;
    if (parse_iface(st, iface, &l, &descr) < 0)
        return NULL;
#ifndef PYGPU_BACKEND_CUDA
    (void)obj;
    Py_DECREF(descr);
    return PyErr_Format(PyExc_BufferError, "__cuda_array_interface__ describes CUDA memory, which the %s backend "
                        "cannot use (import through DLPack instead)", pygpu_rt_vendor());
#else
    PyObject *cur = NULL, *a = NULL;
    int dev = device_of(st, l.ptr);
    if (dev < 0 || !(cur = pygpu_current_stream(st)))
        goto done;
    pygpu_stream_t mine = ((PyGPUStream *)cur)->handle;
    if (l.has_stream && pygpu_stream_order(st, dev, l.stream, mine) < 0)
        goto done;
    a = pygpu_array_wrap(st, st->Array, descr, l.nd, l.shape, l.strides, l.ptr, obj, obj, dev, !l.readonly);
    descr = NULL;   /* (stolen) */
    if (a)
        pygpu_array_set_last_stream(st, (PyGPUArray *)a, cur, mine);
done:
    Py_XDECREF(descr);
    Py_XDECREF(cur);
    return a;
#endif
}
