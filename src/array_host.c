/*
 * array_host.c -- the three doors between host data and GPUArrays, side by
 * side over one conversion of the host value (as NumPy pairs
 * PyArray_FromAny with PyArray_CopyObject): the construction rule (host
 * data into a new array: to_gpu, asarray and from_dlpack of host data,
 * GPUArray(host_data)), the assignment rule (a[...] = value, set: host data
 * or another array, broadcast and converted), and the download (get).
 */
#include "pygpu.h"
#include "array_host.h"
#include "marks.h"
#include "array.h"
#include "convert.h"
#include "copy/copy.h"
#include "dtype.h"
#include "memory.h"
#include "pinned.h"
#include "shape.h"
#include "state.h"
#include "stream.h"
#include "transfer/background.h"
#include "transfer/pinned_pool.h"

/* ---- construction ------------------------------------------------------------ */


/* The host array an upload copies: `obj` as NumPy converts it (cast to
 * `descr` if given, which is stolen, with NumPy's FORCECAST), in a dtype
 * PyGPU holds (non-native byte order made native; others refused).  The
 * one set of conversion rules of every upload: to_gpu with or without an
 * allocator, asarray and from_dlpack of host data.  New reference. */
PyArrayObject *pygpu_upload_source(PyObject *obj, PyArray_Descr *descr)
{
    PyArrayObject *h = (PyArrayObject *)PyArray_FromAny(obj, descr, 0, 0, NPY_ARRAY_FORCECAST, NULL);
    if (!h)
        return NULL;
    PyArray_Descr *d = PyArray_DESCR(h);
    if (!pygpu_descr_supported(d)) {
        /* Data in the other byte order is converted (the upload copies it
         * anyway); other dtypes are refused, naming the ones held. */
        PyArray_Descr *nd = PyArray_ISNBO(d->byteorder) ? NULL : PyArray_DescrNewByteorder(d, NPY_NATIVE);
        if (!nd || !pygpu_descr_supported(nd)) {
            Py_XDECREF(nd);
            PyErr_Clear();
            nd = pygpu_descr_arg((PyObject *)d);        /* (the error naming the dtypes held) */
        }
        if (!nd) {
            Py_DECREF(h);
            return NULL;
        }
        Py_SETREF(h, (PyArrayObject *)PyArray_FromAny((PyObject *)h, nd, 0, 0, NPY_ARRAY_FORCECAST, NULL));
    }
    return h;
}

/* The upload itself: host array `h` copied into `a` (a new array of its
 * shape and type) on `stream`, which `a` then records; 0, or -1. */
int pygpu_upload_into(pygpu_state *st, PyGPUArray *a, PyArrayObject *h, PyObject *stream, int async)
{
    pygpu_stream_t s;
    if (pygpu_stream_for(st, stream, a->device, "array", &s) < 0)
        return -1;
    pygpu_side dst = {a->data, GA_STRIDES(a), 1, a->device, NULL, NULL};
    pygpu_side src = {PyArray_BYTES(h), PyArray_STRIDES(h), 0, -1, (PyObject *)h, NULL};    /* (kept by an upload in the background) */
    if (pygpu_copy(st, dst, src, a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, async) < 0)
        return -1;
    pygpu_array_set_last_stream(st, a, stream, s);
    return 0;
}

static int f_only(PyArrayObject *h) { return PyArray_IS_F_CONTIGUOUS(h) && !PyArray_IS_C_CONTIGUOUS(h); }

PyObject *pygpu_array_from_host_as(pygpu_state *st, PyTypeObject *tp, PyObject *obj, PyArray_Descr *descr,
                           PyObject *stream, int async)
{
    PyArrayObject *h = pygpu_upload_source(obj, descr);
    if (!h)
        return NULL;
    PyArray_Descr *d = PyArray_DESCR(h);
    Py_INCREF(d);
    PyGPUArray *a = (PyGPUArray *)pygpu_array_empty(st, tp, d, PyArray_NDIM(h), PyArray_SHAPE(h), f_only(h),
                                                    stream);
    if (a && pygpu_upload_into(st, a, h, stream, async) < 0)
        Py_CLEAR(a);
    Py_DECREF(h);
    return (PyObject *)a;
}

PyObject *pygpu_array_from_host(pygpu_state *st, PyObject *obj, PyArray_Descr *descr, PyObject *stream, int async)
{
    return pygpu_array_from_host_as(st, st->Array, obj, descr, stream, async);
}

/* ---- download -------------------------------------------------------------------- */


/* ---- transfers ------------------------------------------------------------ */

/* A new C-order host array for `a`'s elements: page-locked if asked; else,
 * where the transfer wing says so (pygpu_pinned_for_get), a block the
 * pinned pool has cached (DMA goes straight into it at the link's speed);
 * else ordinary memory, and the warmer page-locks a block for the next
 * get() of this size.  Not made here: page-locking runs at a few GB/s, a
 * tenth of a staged download into fresh memory, and a program that keeps
 * its results would meet it at every get() (docs/performance.md#pooled-get).
 * New reference. */
static PyObject *new_host_array(pygpu_state *st, PyGPUArray *a, int pagelocked)
{
    PyObject *out;
    ptrdiff_t nbytes = pygpu_array_size(a) * GA_ITEMSIZE(a);
    if (pagelocked)
        return pygpu_pagelocked_empty(st, a->descr, a->nd, GA_SHAPE(a), 0, -1);
    if (pygpu_pinned_for_get((size_t)nbytes)) {
        out = pygpu_pagelocked_empty(st, a->descr, a->nd, GA_SHAPE(a), 1, a->device);
        if (out || PyErr_Occurred())
            return out;
        pygpu_bg_warm((size_t)nbytes, a->device);
    }
    /* (Past the pool's limit: a staged download of 32 MiB or more faults
     * the fresh pages in while its DMA runs.) */
    Py_INCREF(a->descr);
    return PyArray_Empty(a->nd, GA_SHAPE(a), a->descr, 0);
}

PyObject *pygpu_array_get(PyGPUArray *a, PyObject *out, PyObject *stream, int pagelocked, int async)
{
    pygpu_state *st = pygpu_state_of((PyObject *)a);
    pygpu_stream_t s;
    if (!st || pygpu_memory_usable(a->mem) < 0 || pygpu_stream_for(st, stream, a->device, "array", &s) < 0)
        return NULL;
    if (out && out != Py_None) {
        if (!PyArray_Check(out))
            return PyErr_Format(PyExc_TypeError, "get(ary=...) takes a numpy.ndarray, not %.100s",
                                Py_TYPE(out)->tp_name);
        PyArrayObject *o = (PyArrayObject *)out;
        if (!PyArray_EquivTypes(PyArray_DESCR(o), a->descr))
            return PyErr_Format(PyExc_TypeError, "get(ary=...): ary has dtype %R but the array has %R",
                                (PyObject *)PyArray_DESCR(o), (PyObject *)a->descr);
        if (PyArray_NDIM(o) != a->nd ||     /* (a 0-d array's shape may be NULL: no memcmp) */
            (a->nd > 0 && memcmp(PyArray_SHAPE(o), GA_SHAPE(a), (size_t)a->nd * sizeof(ptrdiff_t)) != 0)) {
            PyObject *want = pygpu_shape_repr(GA_SHAPE(a), a->nd), *got = pygpu_shape_repr(PyArray_SHAPE(o), PyArray_NDIM(o));
            if (want && got)
                PyErr_Format(PyExc_ValueError, "get(ary=...): ary has shape %U but the array has %U", got, want);
            Py_XDECREF(want);
            Py_XDECREF(got);
            return NULL;
        }
        if (!PyArray_ISWRITEABLE(o)) {
            PyErr_SetString(PyExc_ValueError, "get(ary=...): ary is read-only");
            return NULL;
        }
        Py_INCREF(out);
    } else if (!(out = new_host_array(st, a, pagelocked))) {
        return NULL;
    } else {
        async = 0;
    }
    /* (the array is the host memory's owner: kept until a download in the
     * background has written it, when async; else its buffer may be
     * page-locked in place, registered.c) */
    pygpu_side host = {PyArray_BYTES((PyArrayObject *)out), PyArray_STRIDES((PyArrayObject *)out), 0, -1, out, NULL};
    pygpu_mark(1);
    if (pygpu_copy(st, host, pygpu_device_side(a), a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, async) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* ---- assignment -------------------------------------------------------------------- */


/* Broadcast a layout (hnd axes) to `a`'s shape: its strides, or -1 with
 * ValueError. */
static int broadcast_to(PyGPUArray *a, int hnd, const ptrdiff_t *hshape, const ptrdiff_t *hstrides, ptrdiff_t *strides)
{
    int shift = a->nd - hnd;
    for (int i = 0; i < a->nd; i++) {
        int j = i - shift;
        if (j < 0)
            strides[i] = 0;
        else if (hshape[j] == GA_SHAPE(a)[i])
            strides[i] = hstrides[j];
        else if (hshape[j] == 1)
            strides[i] = 0;
        else
            goto mismatch;
    }
    if (shift >= 0)
        return 0;
    for (int j = 0; j < -shift; j++)     /* extra leading axes must be 1 */
        if (hshape[j] != 1)
            goto mismatch;
    return 0;
mismatch:;
    PyObject *want = pygpu_shape_repr(GA_SHAPE(a), a->nd), *got = pygpu_shape_repr(hshape, hnd);
    if (want && got)
        PyErr_Format(PyExc_ValueError, "could not broadcast input array from shape %U into shape %U", got, want);
    Py_XDECREF(want);
    Py_XDECREF(got);
    return -1;
}

/* `value` as a host array of dtype `descr`, converted as NumPy's assignment
 * converts it: arrays cast unsafely, Python scalars and sequences checked
 * (so 300 into int8 raises OverflowError, as in NumPy).  New reference. */
PyArrayObject *pygpu_host_value(PyObject *value, PyArray_Descr *descr)
{
    if (PyArray_Check(value)) {
        Py_INCREF(descr);
        return (PyArrayObject *)PyArray_FromAny(value, descr, 0, 0, NPY_ARRAY_FORCECAST, NULL);
    }
    PyArrayObject *shape_of = (PyArrayObject *)PyArray_FromAny(value, NULL, 0, 0, 0, NULL);
    if (!shape_of)
        return NULL;
    Py_INCREF(descr);
    PyArrayObject *h = (PyArrayObject *)PyArray_Empty(PyArray_NDIM(shape_of), PyArray_SHAPE(shape_of), descr, 0);
    Py_DECREF(shape_of);
    if (h && PyObject_SetItem((PyObject *)h, Py_Ellipsis, value) < 0)
        Py_CLEAR(h);
    return h;
}

/* 1 if the device bytes of a and b may overlap. */
static int may_overlap(PyGPUArray *a, PyGPUArray *b)
{
    ptrdiff_t alo, ahi, blo, bhi;
    pygpu_shape_extent(a->nd, GA_SHAPE(a), GA_STRIDES(a), GA_ITEMSIZE(a), &alo, &ahi);
    pygpu_shape_extent(b->nd, GA_SHAPE(b), GA_STRIDES(b), GA_ITEMSIZE(b), &blo, &bhi);
    if (ahi == alo || bhi == blo)
        return 0;
    return a->data + alo < b->data + bhi && b->data + blo < a->data + ahi;
}

static int same_shape(PyGPUArray *a, PyGPUArray *b)
{
    return a->nd == b->nd && memcmp(GA_SHAPE(a), GA_SHAPE(b), (size_t)a->nd * sizeof(ptrdiff_t)) == 0;
}

/* `v` (on a's device) into `a`, broadcast to its shape and converted to
 * its type by PyGPU's kernels, as NumPy assigns: as if from a copy of `v`
 * where the two overlap.  0, or -1 with an exception. */
static int assign_on_device(pygpu_state *st, PyGPUArray *a, PyGPUArray *v, PyObject *stream, pygpu_stream_t s,
                            int async)
{
    ptrdiff_t strides[PYGPU_MAXDIMS];
    PyGPUArray *tmp = NULL;
    int r = -1;
    if (broadcast_to(a, v->nd, GA_SHAPE(v), GA_STRIDES(v), strides) < 0 || pygpu_complex_warning(st, v->descr, a->descr) < 0)
        return -1;
    if (may_overlap(a, v)) {
        if (!(tmp = (PyGPUArray *)pygpu_array_dense_copy(st, v, PYGPU_ORDER_K, s, stream, a->device)))
            return -1;
        broadcast_to(a, tmp->nd, GA_SHAPE(tmp), GA_STRIDES(tmp), strides);
    }
    PyGPUArray *from = tmp ? tmp : v;
    pygpu_side src = {from->data, strides, 1, from->device, NULL, from->mem};
    if (PyArray_EquivTypes(a->descr, v->descr))
        r = pygpu_copy(st, pygpu_device_side(a), src, a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, async);
    else if ((r = pygpu_cast(st, pygpu_device_side(a), pygpu_ktype_of(a->descr), src, pygpu_ktype_of(v->descr), a->nd,
                             GA_SHAPE(a), s)) == 1) {
        PyErr_SetString(PyExc_RuntimeError, "PyGPU's cast kernel cannot run on this device");
        r = -1;
    }
    if (r == 0)
        pygpu_array_set_last_stream(st, v, stream, s);
    Py_XDECREF(tmp);
    return r;
}

int pygpu_array_assign(PyGPUArray *a, PyObject *value, PyObject *stream, int async)
{
    pygpu_state *st = pygpu_state_of((PyObject *)a);
    pygpu_stream_t s;
    ptrdiff_t strides[PYGPU_MAXDIMS];
    PyObject *host = NULL;
    int r = -1;
    if (!st || pygpu_memory_usable(a->mem) < 0 || pygpu_stream_for(st, stream, a->device, "array", &s) < 0)
        return -1;
    if (PyObject_TypeCheck(value, st->Array)) {
        PyGPUArray *v = (PyGPUArray *)value;
        if (pygpu_memory_usable(v->mem) < 0)
            return -1;
        if (same_shape(a, v) && PyArray_EquivTypes(a->descr, v->descr)) {
            PyGPUArray *tmp = NULL;     /* (v stays the value: the copy is read, the value noted) */
            if (may_overlap(a, v)) {    /* as NumPy: the result is as if v were copied first */
                if (!(tmp = (PyGPUArray *)pygpu_array_dense_copy(st, v, PYGPU_ORDER_K, s, stream, a->device)))
                    return -1;
            }
            r = pygpu_copy(st, pygpu_device_side(a), pygpu_device_side(tmp ? tmp : v), a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s,
                           async);
            Py_XDECREF(tmp);
            if (r == 0) {
                pygpu_array_set_last_stream(st, a, stream, s);
                if (v->device == a->device)
                    pygpu_array_set_last_stream(st, v, stream, s);
            }
            return r;
        }
        /* Broadcasting or casting: on the device by PyGPU's kernels, else
         * (another device, no kernels) through the host, where NumPy does both. */
        int here = v->device == a->device ? pygpu_kernels_usable(st, a->device) : 0;
        if (here < 0)
            return -1;
        if (here) {
            if ((r = assign_on_device(st, a, v, stream, s, async)) == 0)
                pygpu_array_set_last_stream(st, a, stream, s);
            return r;
        }
        if (!(value = host = pygpu_array_get(v, NULL, stream, 0, 0)))
            return -1;
    }
    PyArrayObject *h = pygpu_host_value(value, a->descr);
    if (!h)
        goto done;
    /* One value for every element: a fill, no host copy of the view.  But
     * not an array's one element under a capture: the graph would keep the
     * value of the capture's time, where a copy (of page-locked memory)
     * reads it at each replay; pygpu_copy joins that or refuses it. */
    if (PyArray_SIZE(h) == 1 && PyArray_NDIM(h) <= a->nd &&
        !(PyArray_Check(value) && pygpu_stream_capturing(s) != PYGPU_CAPTURE_NONE)) {
        r = pygpu_fill(st, pygpu_device_side(a), a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), PyArray_BYTES(h), s);
    } else if (broadcast_to(a, PyArray_NDIM(h), PyArray_SHAPE(h), PyArray_STRIDES(h), strides) == 0) {
        pygpu_side src = {PyArray_BYTES(h), strides, 0, -1, (PyObject *)h, NULL};
        pygpu_mark(1);
        r = pygpu_copy(st, pygpu_device_side(a), src, a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, async);
    }
    if (r == 0)
        pygpu_array_set_last_stream(st, a, stream, s);
    Py_DECREF(h);
done:
    Py_XDECREF(host);
    return r;
}
