/*
 * array_methods.c -- GPUArray methods: transfers (get, set and their async
 * forms), copy, to_device, fill, astype, and the method table (the shape
 * methods, view to swapaxes, are array_shape.c's; item and tolist
 * array_scalar.c's; __dlpack__ dlpack_export.c's).
 */
#include "pygpu.h"
#include "copy/copy.h"
#include "transfer/pinned_pool.h"

#define SELF ((PyGPUArray *)self)
#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

static pygpu_side device_side(PyGPUArray *a) { return (pygpu_side){a->data, GA_STRIDES(a), 1, a->device, NULL}; }

PyObject *pygpu_shape_repr(const ptrdiff_t *shape, int nd)
{
    PyObject *t = pygpu_tuple_of(shape, nd), *r;
    if (!t)
        return NULL;
    r = PyObject_Repr(t);
    Py_DECREF(t);
    return r;
}

/* ---- transfers ------------------------------------------------------------ */

/* A new C-order host array for `a`'s elements: page-locked if asked; else,
 * where the transfer wing says so (pygpu_pinned_for_get), from the pinned
 * pool (DMA goes straight into it at the link's speed), falling back to
 * ordinary memory when the pool is full.  New reference. */
static PyObject *new_host_array(pygpu_state *st, PyGPUArray *a, int pagelocked)
{
    PyObject *out;
    ptrdiff_t nbytes = pygpu_array_size(a) * GA_ITEMSIZE(a);
    if (pagelocked)
        return pygpu_pagelocked_empty(st, a->descr, a->nd, GA_SHAPE(a), 0);
    if (pygpu_pinned_for_get((size_t)nbytes)) {
        out = pygpu_pagelocked_empty(st, a->descr, a->nd, GA_SHAPE(a), 1);
        if (out || PyErr_Occurred())
            return out;
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
    /* (async: the array is the host memory's owner, kept until a download
     * in the background has written it) */
    pygpu_side host = {PyArray_BYTES((PyArrayObject *)out), PyArray_STRIDES((PyArrayObject *)out), 0, -1,
                       async ? out : NULL};
    if (pygpu_copy(st, host, device_side(a), a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, async) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

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
static PyArrayObject *host_value(PyObject *value, PyArray_Descr *descr)
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
    PyGPUArray *c = (PyGPUArray *)pygpu_array_empty_like(st, a, a->descr, order, stream);
    if (pygpu_device_leave(st, prev) < 0)
        Py_CLEAR(c);
    if (c && pygpu_copy(st, device_side(c), device_side(a), a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, 1) < 0)
        Py_CLEAR(c);
    if (c) {
        pygpu_array_note_stream(st, c, stream, s);
        if (dev == a->device)
            pygpu_array_note_stream(st, a, stream, s);
    }
    return (PyObject *)c;
}

/* NumPy's ComplexWarning where complex values go into a real or integer
 * type; 0, or -1 when the warning is an error. */
static int complex_warning(PyArray_Descr *from, PyArray_Descr *to)
{
    if (from->kind != 'c' || to->kind == 'c' || to->kind == 'b')
        return 0;
    PyObject *mod = PyImport_ImportModule("numpy.exceptions");
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "ComplexWarning") : NULL;
    int r = cls ? PyErr_WarnEx(cls, "Casting complex values to real discards the imaginary part", 1) : -1;
    Py_XDECREF(cls);
    Py_XDECREF(mod);
    return r;
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
    if (broadcast_to(a, v->nd, GA_SHAPE(v), GA_STRIDES(v), strides) < 0 || complex_warning(v->descr, a->descr) < 0)
        return -1;
    if (may_overlap(a, v)) {
        if (!(tmp = (PyGPUArray *)pygpu_array_dense_copy(st, v, PYGPU_ORDER_K, s, stream, a->device)))
            return -1;
        broadcast_to(a, tmp->nd, GA_SHAPE(tmp), GA_STRIDES(tmp), strides);
    }
    PyGPUArray *from = tmp ? tmp : v;
    pygpu_side src = {from->data, strides, 1, from->device, NULL};
    if (PyArray_EquivTypes(a->descr, v->descr))
        r = pygpu_copy(st, device_side(a), src, a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, async);
    else if ((r = pygpu_cast(st, device_side(a), pygpu_ktype_of(a->descr), src, pygpu_ktype_of(v->descr), a->nd,
                             GA_SHAPE(a), s)) == 1) {
        PyErr_SetString(PyExc_RuntimeError, "PyGPU's cast kernel cannot run on this device");
        r = -1;
    }
    if (r == 0)
        pygpu_array_note_stream(st, v, stream, s);
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
            r = pygpu_copy(st, device_side(a), device_side(tmp ? tmp : v), a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s,
                           async);
            Py_XDECREF(tmp);
            if (r == 0) {
                pygpu_array_note_stream(st, a, stream, s);
                if (v->device == a->device)
                    pygpu_array_note_stream(st, v, stream, s);
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
                pygpu_array_note_stream(st, a, stream, s);
            return r;
        }
        if (!(value = host = pygpu_array_get(v, NULL, stream, 0, 0)))
            return -1;
    }
    PyArrayObject *h = host_value(value, a->descr);
    if (!h)
        goto done;
    if (PyArray_SIZE(h) == 1 && PyArray_NDIM(h) <= a->nd) {
        /* One value for every element: a fill, no host copy of the view. */
        r = pygpu_fill(st, device_side(a), a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), PyArray_BYTES(h), s);
    } else if (broadcast_to(a, PyArray_NDIM(h), PyArray_SHAPE(h), PyArray_STRIDES(h), strides) == 0) {
        pygpu_side src = {PyArray_BYTES(h), strides, 0, -1, (PyObject *)h};
        r = pygpu_copy(st, device_side(a), src, a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, async);
    }
    if (r == 0)
        pygpu_array_note_stream(st, a, stream, s);
    Py_DECREF(h);
done:
    Py_XDECREF(host);
    return r;
}

static PyObject *get_impl(PyObject *self, PyObject *args, PyObject *kwds, int async)
{
    static char *kwlist[] = {"ary", "pagelocked", "async_", "stream", NULL};   /* PyCUDA's order */
    static char *kwlist_async[] = {"stream", "ary", NULL};
    PyObject *ary = Py_None, *stream = Py_None;
    int pagelocked = 0, async_ = 0;
    if (async ? !PyArg_ParseTupleAndKeywords(args, kwds, "|OO:get_async", kwlist_async, &stream, &ary)
              : !PyArg_ParseTupleAndKeywords(args, kwds, "|OppO:get", kwlist, &ary, &pagelocked, &async_, &stream))
        return NULL;
    /* get(async_=True) is get_async: into the caller's page-locked `ary`
     * it only queues the copy (a new array is always complete). */
    return pygpu_array_get(SELF, ary, stream, pagelocked, async || async_);
}

static PyObject *array_get(PyObject *self, PyObject *a, PyObject *k) { return get_impl(self, a, k, 0); }
static PyObject *array_get_async(PyObject *self, PyObject *a, PyObject *k) { return get_impl(self, a, k, 1); }

static PyObject *set_impl(PyObject *self, PyObject *args, PyObject *kwds, int async)
{
    static char *kwlist[] = {"ary", "stream", "async_", NULL};
    PyObject *ary, *stream = Py_None, *flag = Py_False;
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
    PyArrayObject *v = host_value(value, SELF->descr);
    if (!v)
        return NULL;
    if (PyArray_SIZE(v) != 1) {
        Py_DECREF(v);
        PyErr_SetString(PyExc_ValueError, "fill() takes one value");
        return NULL;
    }
    int r = pygpu_fill(st, device_side(SELF), SELF->nd, GA_SHAPE(SELF), GA_ITEMSIZE(SELF), PyArray_BYTES(v), s);
    Py_DECREF(v);
    if (r == 0)
        pygpu_array_note_stream(st, SELF, stream, s);
    return r < 0 ? NULL : Py_NewRef(self);
}

/* ---- astype ----------------------------------------------------------------- */

/* NumPy's casting rule named by `obj` (None: no argument, 'unsafe') in
 * *rule; 'same_value' (NumPy 2.4's rule that checks every value) leaves
 * *rule unsafe and sets *by_numpy: NumPy does that one, on the host.  0, or
 * -1 with NumPy's TypeError or ValueError. */
static int casting_arg(PyObject *obj, NPY_CASTING *rule, int *by_numpy)
{
    static const struct { const char *name; NPY_CASTING rule; } rules[] = {
        {"no", NPY_NO_CASTING}, {"equiv", NPY_EQUIV_CASTING}, {"safe", NPY_SAFE_CASTING},
        {"same_kind", NPY_SAME_KIND_CASTING}, {"unsafe", NPY_UNSAFE_CASTING}, {"same_value", NPY_UNSAFE_CASTING},
    };
    *rule = NPY_UNSAFE_CASTING;
    *by_numpy = 0;
    if (!obj)
        return 0;
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "casting must be str, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (PyUnicode_CompareWithASCIIString(obj, rules[i].name) == 0) {
            *rule = rules[i].rule;
            *by_numpy = i == 5;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "casting must be one of 'no', 'equiv', 'safe', 'same_kind', 'unsafe', "
                 "'same_value' (got %R)", obj);
    return -1;
}

/* 1 if `a` already is laid out as `order` asks (enum pygpu_order). */
static int in_order(PyGPUArray *a, int order)
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
        (here && complex_warning(a->descr, descr) < 0) || pygpu_device_enter(st, a->device, &prev) < 0)
        return NULL;
    Py_INCREF(descr);
    PyGPUArray *r = (PyGPUArray *)pygpu_array_empty_like(st, a, descr, order, stream);
    if (pygpu_device_leave(st, prev) < 0)
        Py_CLEAR(r);
    if (!r)
        return NULL;
    int done = here ? pygpu_cast(st, device_side(r), pygpu_ktype_of(descr), device_side(a),
                                 pygpu_ktype_of(a->descr), a->nd, GA_SHAPE(a), s)
                    : 1;
    if (done == 1)      /* no kernels here, or a rule that NumPy checks: NumPy converts */
        done = convert_on_host(a, r, numpy_casting ? numpy_casting : "unsafe", stream);
    if (done < 0) {
        Py_DECREF(r);
        return NULL;
    }
    pygpu_array_note_stream(st, r, stream, s);
    pygpu_array_note_stream(st, a, stream, s);
    return (PyObject *)r;
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
    if ((o = copy_order(order)) < 0 || casting_arg(casting, &rule, &by_numpy) < 0 ||
        (want_copy = PyObject_IsTrue(copy)) < 0)
        return NULL;
    PyArray_Descr *descr = pygpu_descr_arg(dtype);
    if (!descr)
        return NULL;
    PyObject *r = NULL;
    if (!PyArray_CanCastTypeTo(SELF->descr, descr, rule)) {
        PyErr_Format(PyExc_TypeError, "Cannot cast array data from %R to %R according to the rule %R",
                     (PyObject *)SELF->descr, (PyObject *)descr, casting);
    } else if (!want_copy && !by_numpy && PyArray_EquivTypes(SELF->descr, descr) && in_order(SELF, o)) {
        r = Py_NewRef(self);
    } else {
        r = pygpu_array_astype(SELF, descr, o, by_numpy ? "same_value" : NULL, stream);
    }
    Py_DECREF(descr);
    return r;
}

PyMethodDef pygpu_array_methods[] = {
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
