/*
 * array_methods.c -- GPUArray methods: transfers (get, set and their async
 * forms), copy, to_device, fill, astype, and the method table (the shape
 * methods, view to swapaxes, are array_shape.c's; item and tolist
 * array_scalar.c's; __dlpack__ dlpack_export.c's).
 */
#include "pygpu.h"
#include "array_methods.h"
#include "array.h"
#include "array_cast.h"
#include "array_host.h"
#include "array_scalar.h"
#include "array_shape.h"
#include "convert.h"
#include "copy/copy.h"
#include "device.h"
#include "dlpack.h"
#include "dlpack_export.h"
#include "dtype.h"
#include "memory.h"
#include "state.h"
#include "stream.h"
#include "marks.h"

#define SELF ((PyGPUArray *)self)
#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS


static PyObject *get_impl(PyObject *self, PyObject *args, PyObject *kwds, int async)
{
    static char *kwlist[] = {"ary", "pagelocked", "async_", "stream", NULL};   /* PyCUDA's order */
    static char *kwlist_async[] = {"stream", "ary", NULL};
    PyObject *ary = Py_None, *stream = Py_None;
    int pagelocked = 0, async_ = 0;
    pygpu_mark(0);
    if (async ? !PyArg_ParseTupleAndKeywords(args, kwds, "|OO:get_async", kwlist_async, &stream, &ary)
              : !PyArg_ParseTupleAndKeywords(args, kwds, "|OppO:get", kwlist, &ary, &pagelocked, &async_, &stream))
        return NULL;
    /* get(async_=True) is get_async: into the caller's page-locked `ary`
     * it only queues the copy (a new array is always complete). */
    PyObject *got = pygpu_array_get(SELF, ary, stream, pagelocked, async || async_);
    pygpu_mark(13);
    return got;
}

static PyObject *array_get(PyObject *self, PyObject *a, PyObject *k) { return get_impl(self, a, k, 0); }
static PyObject *array_get_async(PyObject *self, PyObject *a, PyObject *k) { return get_impl(self, a, k, 1); }

static PyObject *set_impl(PyObject *self, PyObject *args, PyObject *kwds, int async)
{
    static char *kwlist[] = {"ary", "stream", "async_", NULL};
    PyObject *ary, *stream = Py_None, *flag = Py_False;
    pygpu_mark(0);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OO", kwlist, &ary, &stream, &flag))
        return NULL;
    if (PyBool_Check(stream)) {         /* PyCUDA's order: set(ary, async_, stream) */
        PyObject *t = stream;
        stream = PyBool_Check(flag) ? Py_None : flag;
        flag = t;
    }
    int async_ = PyObject_IsTrue(flag);
    if (async_ < 0)
        return NULL;
    async |= async_;
    if (!(SELF->flags & PYGPU_WRITEABLE)) {
        PyErr_SetString(PyExc_ValueError, "assignment destination is read-only");
        return NULL;
    }
    if (pygpu_array_assign(SELF, ary, stream, async) < 0)
        return NULL;
    pygpu_mark(13);
    Py_RETURN_NONE;
}

static PyObject *array_set(PyObject *self, PyObject *a, PyObject *k) { return set_impl(self, a, k, 0); }
static PyObject *array_set_async(PyObject *self, PyObject *a, PyObject *k) { return set_impl(self, a, k, 1); }

static PyObject *array_dunder_array(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OO:__array__", kwlist, &dtype, &copy))
        return NULL;
    if (copy == Py_False) {
        PyErr_SetString(PyExc_ValueError,
                        "a GPUArray cannot be seen as a NumPy array without a copy (it is in device memory)");
        return NULL;
    }
    PyObject *h = pygpu_array_get(SELF, NULL, NULL, 0, 0);
    if (!h || dtype == Py_None)
        return h;
    PyObject *r = PyObject_CallMethod(h, "astype", "O", dtype);
    Py_DECREF(h);
    return r;
}

/* ---- copies and fills ----------------------------------------------------- */
/* The layout of a copy for an order argument (enum pygpu_order): 'C',
 * 'F', 'A' or 'K'; None (or no argument) is 'K', so that a copy keeps the
 * layout as PyCUDA's does (an F-ordered array stays F-ordered).  -2 with
 * ValueError. */
static int copy_order(PyObject *order)
{
    int o = pygpu_order_arg(order, 1);
    return o == -1 ? PYGPU_ORDER_K : o;
}

/* A dense copy of `a` in `order` (enum pygpu_order) on the device named by
 * `device` (None: a's own), for copy() and to_device(); with
 * `self_if_there`, a itself when it is on that device already.  New
 * reference. */
static PyObject *copy_to_device(PyGPUArray *a, int order, PyObject *device, PyObject *stream, int self_if_there)
{
    pygpu_state *st = pygpu_state_of((PyObject *)a);
    pygpu_stream_t s;
    int dev = a->device;
    if (!st || (device != Py_None && pygpu_device_arg(st, device, "device", &dev) < 0) ||
        pygpu_stream_for(st, stream, dev, "copy", &s) < 0)
        return NULL;
    if (self_if_there && dev == a->device)
        return Py_NewRef((PyObject *)a);
    return pygpu_array_dense_copy(st, a, order, s, stream, dev);
}

static PyObject *array_copy(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"order", "stream", "device", NULL};
    PyObject *order = NULL, *stream = Py_None, *device = Py_None;
    int o;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OO:copy", kwlist, &order, &stream, &device) ||
        (o = copy_order(order)) < 0)
        return NULL;
    return copy_to_device(SELF, o, device, stream, 0);
}

static PyObject *array_to_device(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"device", "stream", NULL};
    PyObject *device, *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$O:to_device", kwlist, &device, &stream))
        return NULL;
    if (device == Py_None) {
        PyErr_SetString(PyExc_TypeError, "to_device() needs a device (a pygpu.Device or an int ordinal), not None");
        return NULL;
    }
    return copy_to_device(SELF, PYGPU_ORDER_K, device, stream, 1);
}

static PyObject *array_fill(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"value", "stream", NULL};
    PyObject *value, *stream = Py_None;
    pygpu_state *st = pygpu_state_of(self);
    pygpu_stream_t s;
    if (!st || !PyArg_ParseTupleAndKeywords(args, kwds, "O|O:fill", kwlist, &value, &stream) ||
        pygpu_memory_usable(SELF->mem) < 0 || pygpu_stream_for(st, stream, SELF->device, "array", &s) < 0)
        return NULL;
    if (!(SELF->flags & PYGPU_WRITEABLE)) {
        PyErr_SetString(PyExc_ValueError, "assignment destination is read-only");
        return NULL;
    }
    PyArrayObject *v = pygpu_host_value(value, SELF->descr);
    if (!v)
        return NULL;
    if (PyArray_SIZE(v) != 1) {
        Py_DECREF(v);
        PyErr_SetString(PyExc_ValueError, "fill() takes one value");
        return NULL;
    }
    int r = pygpu_fill(st, pygpu_device_side(SELF), SELF->nd, GA_SHAPE(SELF), GA_ITEMSIZE(SELF), PyArray_BYTES(v), s);
    Py_DECREF(v);
    if (r == 0)
        pygpu_array_set_last_stream(st, SELF, stream, s);
    return r < 0 ? NULL : Py_NewRef(self);
}

static PyObject *array_astype(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"dtype", "order", "casting", "subok", "copy", "stream", NULL};
    PyObject *dtype, *order = NULL, *casting = NULL, *subok = NULL, *copy = Py_True, *stream = Py_None;
    pygpu_state *st = pygpu_state_of(self);
    NPY_CASTING rule;
    int by_numpy, o, want_copy;
    if (!st || !PyArg_ParseTupleAndKeywords(args, kwds, "O|OOOO$O:astype", kwlist, &dtype, &order, &casting,
                                            &subok, &copy, &stream))
        return NULL;
    if (order && order != Py_None && PyObject_TypeCheck(order, st->Stream)) {
        if (stream != Py_None) {
            PyErr_SetString(PyExc_TypeError, "astype() got a stream twice (PyCUDA's astype(dtype, stream) form, "
                                             "and stream=)");
            return NULL;
        }
        stream = order;         /* PyCUDA's astype(dtype, stream) */
        order = NULL;
    }
    (void)subok;                /* (GPUArray has no subclasses to keep) */
    if ((o = copy_order(order)) < 0 || pygpu_casting_arg(casting, &rule, &by_numpy) < 0 ||
        (want_copy = PyObject_IsTrue(copy)) < 0)
        return NULL;
    PyArray_Descr *descr = pygpu_descr_arg(dtype);
    if (!descr)
        return NULL;
    PyObject *r = NULL;
    if (!PyArray_CanCastTypeTo(SELF->descr, descr, rule)) {
        PyErr_Format(PyExc_TypeError, "Cannot cast array data from %R to %R according to the rule %R",
                     (PyObject *)SELF->descr, (PyObject *)descr, casting);
    } else if (!want_copy && !by_numpy && PyArray_EquivTypes(SELF->descr, descr) && pygpu_array_in_order(SELF, o)) {
        r = Py_NewRef(self);
    } else {
        r = pygpu_array_astype(SELF, descr, o, by_numpy ? "same_value" : NULL, stream);
    }
    Py_DECREF(descr);
    return r;
}

static PyMethodDef array_methods[] = {
    {"get", KW(array_get),
     "get(ary=None, pagelocked=False, async_=False, stream=None)\n--\n\n"
     "The elements in a new NumPy array (C order; page-locked if asked), or in `ary`;\n"
     "`async_=True` is get_async."},
    {"get_async", KW(array_get_async),
     "get_async(stream=None, ary=None)\n--\n\nAs get(), ordered on `stream`; into a page-locked `ary` the copy\n"
     "is only queued (`ary` holds the data once the stream has passed it)."},
    {"set", KW(array_set),
     "set(ary, stream=None, async_=False)\n--\n\nCopy host data into the array, as a[...] = ary\n"
     "(PyCUDA's set(ary, async_, stream) works too)."},
    {"set_async", KW(array_set_async),
     "set_async(ary, stream=None)\n--\n\nAs set(), queued on `stream`."},
    {"copy", KW(array_copy),
     "copy(order='K', *, stream=None, device=None)\n--\n\n"
     "A new array with the same elements, on `device` (default: this array's), laid out\n"
     "as `order` says: 'K' (the default, as PyCUDA: this array's axis order, so that an\n"
     "F-ordered array stays F-ordered), 'C', 'F' or 'A', as in NumPy.\n"
     "A copy to another device goes peer to peer where the hardware allows,\n"
     "else through pinned host memory, and is done when this returns."},
    {"to_device", KW(array_to_device),
     "to_device(device, *, stream=None)\n--\n\n"
     "This array on `device`: itself if it is there, else a copy (as copy(device=...),\n"
     "in this array's layout)."},
    {"fill", KW(array_fill), "fill(value, stream=None)\n--\n\nSet every element to `value`; returns self."},
    {"astype", KW(array_astype),
     "astype(dtype, order='K', casting='unsafe', subok=True, copy=True, *, stream=None)\n--\n\n"
     "The elements converted to `dtype` in a new array, as NumPy's astype converts them, on the\n"
     "device (PyGPU's cast kernel, queued on `stream`).  `order` lays it out ('K': as this\n"
     "array), `casting` is NumPy's rule; copy=False returns self when nothing needs to change.\n"
     "PyCUDA's astype(dtype, stream) works too."},
    {"view", KW(pygpu_array_view_method),
     "view(dtype=None)\n--\n\nThe same memory seen as another dtype (or a plain view)."},
    {"reshape", KW(pygpu_array_reshape),
     "reshape(*shape, order='C')\n--\n\nA view with another shape when one exists, else a copy."},
    {"ravel", KW(pygpu_array_ravel), "ravel(order='C')\n--\n\nA 1-d view when one exists, else a copy."},
    {"flatten", KW(pygpu_array_flatten), "flatten(order='C')\n--\n\nA 1-d copy."},
    {"squeeze", KW(pygpu_array_squeeze), "squeeze(axis=None)\n--\n\nA view without axes of length one."},
    {"transpose", pygpu_array_transpose, METH_VARARGS,
     "transpose(*axes)\n--\n\nA view with the axes permuted (reversed by default)."},
    {"swapaxes", pygpu_array_swapaxes, METH_VARARGS, "swapaxes(axis1, axis2, /)\n--\n\nA view with two axes swapped."},
    {"item", pygpu_array_item_method, METH_VARARGS,
     "item(*args)\n--\n\nOne element as a Python scalar, as NumPy's item(): no argument for a size-1 array,\n"
     "a flat index (C order), or one index per axis (or a tuple of them).  Reads that element."},
    {"tolist", pygpu_array_tolist, METH_NOARGS,
     "tolist()\n--\n\nThe elements as nested lists of Python scalars, as NumPy's tolist().  Reads the array."},
    {"__complex__", pygpu_array_complex, METH_NOARGS,
     "__complex__()\n--\n\ncomplex(a) of a size-1 array, as NumPy gives it.  Reads the element."},
    {"__array__", KW(array_dunder_array), "__array__(dtype=None, copy=None)\n--\n\nA host copy for NumPy."},
    {"__dlpack__", (PyCFunction)(void (*)(void))pygpu_array_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "A DLPack capsule viewing the array (Array API standard), ordered after its pending work\n"
     "on the consumer's `stream`: versioned when max_version >= (1, 0), legacy otherwise."},
    {"__dlpack_device__", pygpu_array_dlpack_device, METH_NOARGS,
     "__dlpack_device__()\n--\n\n(device_type, device_id): (kDLCUDA=2, id), (kDLROCM=10, id) or (kDLCPU=1, 0)."},
    {0},
};

PyMethodDef *pygpu_array_method_defs(void) { return array_methods; }
