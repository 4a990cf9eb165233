/*
 * array_methods.c -- GPUArray methods: transfers (get, set and their async
 * forms), copy, fill, and the shape functions that make views (view,
 * reshape, ravel, squeeze, transpose, swapaxes) or copies (flatten).
 */
#include "pygpu.h"
#include "transfer/pinned_pool.h"

#define SELF ((PyGPUArray *)self)
#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

static pygpu_side device_side(PyGPUArray *a) { return (pygpu_side){a->data, GA_STRIDES(a), 1, a->device}; }

static PyObject *shape_repr(const ptrdiff_t *shape, int nd)
{
    PyObject *t = pygpu_tuple_of(shape, nd), *r;
    if (!t)
        return NULL;
    r = PyObject_Repr(t);
    Py_DECREF(t);
    return r;
}

/* numpy.exceptions.AxisError for `axis` of an nd-dimensional array. */
static int axis_error(Py_ssize_t axis, int nd)
{
    PyObject *mod = PyImport_ImportModule("numpy.exceptions");
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "AxisError") : NULL;
    Py_XDECREF(mod);
    if (cls) {
        PyObject *exc = PyObject_CallFunction(cls, "ni", axis, nd);
        if (exc) {
            PyErr_SetObject(cls, exc);
            Py_DECREF(exc);
        }
        Py_DECREF(cls);
    }
    return -1;
}

/* Normalise an axis argument for nd axes; 0, or -1 with AxisError/TypeError. */
static int axis_arg(PyObject *obj, int nd, int *axis)
{
    Py_ssize_t v = PyNumber_AsSsize_t(obj, PyExc_IndexError);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < -nd || v >= nd)
        return axis_error(v, nd);
    *axis = (int)(v < 0 ? v + nd : v);
    return 0;
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
            PyObject *want = shape_repr(GA_SHAPE(a), a->nd), *got = shape_repr(PyArray_SHAPE(o), PyArray_NDIM(o));
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
    pygpu_side host = {PyArray_BYTES((PyArrayObject *)out), PyArray_STRIDES((PyArrayObject *)out), 0, -1};
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
    PyObject *want = shape_repr(GA_SHAPE(a), a->nd), *got = shape_repr(hshape, hnd);
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
static PyObject *dense_copy(pygpu_state *st, PyGPUArray *a, int order, pygpu_stream_t s, PyObject *stream, int dev)
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
        if (!(tmp = (PyGPUArray *)dense_copy(st, v, PYGPU_ORDER_K, s, stream, a->device)))
            return -1;
        broadcast_to(a, tmp->nd, GA_SHAPE(tmp), GA_STRIDES(tmp), strides);
    }
    PyGPUArray *from = tmp ? tmp : v;
    pygpu_side src = {from->data, strides, 1, from->device};
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
            PyObject *tmp = NULL;
            if (may_overlap(a, v)) {    /* as NumPy: the result is as if v were copied first */
                if (!(tmp = dense_copy(st, v, PYGPU_ORDER_K, s, stream, a->device)))
                    return -1;
                v = (PyGPUArray *)tmp;
            }
            r = pygpu_copy(st, device_side(a), device_side(v), a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, async);
            Py_XDECREF(tmp);
            if (r == 0) {
                pygpu_array_note_stream(st, a, stream, s);
                if (v->device == a->device)
                    pygpu_array_note_stream(st, (PyGPUArray *)value, stream, s);
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
        pygpu_side src = {PyArray_BYTES(h), strides, 0, -1};
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
    return dense_copy(st, a, order, s, stream, dev);
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
        return dense_copy(st, a, order, s, stream, a->device);
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

/* ---- views ------------------------------------------------------------------ */

static PyObject *array_view_method(PyObject *self, PyObject *args, PyObject *kwds)
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
static int reshape_shape(PyGPUArray *a, PyObject *args, int *nd, ptrdiff_t *shape)
{
    PyObject *obj = PyTuple_GET_SIZE(args) == 1 ? PyTuple_GET_ITEM(args, 0) : args;
    ptrdiff_t known, size = pygpu_array_size(a), given[PYGPU_MAXDIMS];
    int unknown = -1;
    if (pygpu_dims_arg(obj, nd, shape, -1) < 0)
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
        PyObject *want = shape_repr(shape, *nd);
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
    PyGPUArray *c = (PyGPUArray *)dense_copy(st, a, fortran, s, NULL, a->device);
    if (!c)
        return NULL;
    pygpu_shape_strides(nd, shape, GA_ITEMSIZE(a), fortran, strides);
    PyObject *r = pygpu_array_wrap(st, Py_TYPE(a), (Py_INCREF(a->descr), a->descr), nd, shape, strides, c->data,
                                   c->mem, NULL, c->device, 1);
    if (r)
        pygpu_array_note_stream(st, (PyGPUArray *)r, NULL, s);
    Py_DECREF(c);
    return r;
}

static PyObject *array_reshape(PyObject *self, PyObject *args, PyObject *kwds)
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
    if ((fortran = flat_order(SELF, order)) < 0 || reshape_shape(SELF, args, &nd, shape) < 0)
        return NULL;
    if (order && PyUnicode_Check(order) && PyUnicode_CompareWithASCIIString(order, "K") == 0) {
        PyErr_SetString(PyExc_ValueError, "order 'K' is not permitted for reshaping");
        return NULL;
    }
    return reshape_to(SELF, nd, shape, fortran);
}

static PyObject *array_ravel(PyObject *self, PyObject *args, PyObject *kwds)
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
    return PyObject_CallMethod(self, "flatten", "s", fortran ? "F" : "C");
}

static PyObject *array_flatten(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"order", NULL};
    PyObject *order = NULL;
    pygpu_state *st = pygpu_state_of(self);
    pygpu_stream_t s;
    int fortran;
    ptrdiff_t n = pygpu_array_size(SELF), stride = GA_ITEMSIZE(SELF);
    if (!st || !PyArg_ParseTupleAndKeywords(args, kwds, "|O:flatten", kwlist, &order) ||
        (fortran = flat_order(SELF, order)) < 0 || pygpu_stream_for(st, NULL, SELF->device, "array", &s) < 0)
        return NULL;
    PyGPUArray *c = (PyGPUArray *)dense_copy(st, SELF, fortran, s, NULL, SELF->device);
    if (!c)
        return NULL;
    PyObject *r = pygpu_array_wrap(st, Py_TYPE(self), (Py_INCREF(SELF->descr), SELF->descr), 1, &n, &stride,
                                   c->data, c->mem, NULL, c->device, 1);
    if (r)
        pygpu_array_note_stream(st, (PyGPUArray *)r, NULL, s);
    Py_DECREF(c);
    return r;
}

static PyObject *array_squeeze(PyObject *self, PyObject *args, PyObject *kwds)
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
            return axis_error(v, 0), NULL;
    } else {
        PyObject *seq = PyIndex_Check(axis) ? PyTuple_Pack(1, axis) : PySequence_Fast(axis, "axis must be ints");
        if (!seq)
            return NULL;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            if (axis_arg(PySequence_Fast_GET_ITEM(seq, i), SELF->nd, &k) < 0) {
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

static PyObject *array_transpose(PyObject *self, PyObject *args)
{
    int perm[PYGPU_MAXDIMS], seen[PYGPU_MAXDIMS] = {0}, nd = SELF->nd;
    PyObject *axes = args;
    if (PyTuple_GET_SIZE(args) == 1) {     /* transpose(axes): a sequence (a NumPy array too), or None */
        PyObject *one = PyTuple_GET_ITEM(args, 0);
        if (!PyIndex_Check(one) || (PyArray_Check(one) && PyArray_NDIM((PyArrayObject *)one) > 0))
            axes = one;
    }
    if (axes == Py_None || (PyTuple_Check(axes) && PyTuple_GET_SIZE(axes) == 0)) {
        for (int i = 0; i < nd; i++)
            perm[i] = nd - 1 - i;
        return permuted(SELF, perm);
    }
    PyObject *seq = PySequence_Fast(axes, "transpose() axes must be ints");
    if (!seq)
        return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != nd) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "axes don't match array");
        return NULL;
    }
    for (int i = 0; i < nd; i++) {
        if (axis_arg(PySequence_Fast_GET_ITEM(seq, i), nd, &perm[i]) < 0) {
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

static PyObject *array_swapaxes(PyObject *self, PyObject *args)
{
    PyObject *o1, *o2;
    int a1, a2, perm[PYGPU_MAXDIMS];
    if (!PyArg_ParseTuple(args, "OO:swapaxes", &o1, &o2) || axis_arg(o1, SELF->nd, &a1) < 0 ||
        axis_arg(o2, SELF->nd, &a2) < 0)
        return NULL;
    for (int i = 0; i < SELF->nd; i++)
        perm[i] = i;
    perm[a1] = a2;
    perm[a2] = a1;
    return permuted(SELF, perm);
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
    {"view", KW(array_view_method),
     "view(dtype=None)\n--\n\nThe same memory seen as another dtype (or a plain view)."},
    {"reshape", KW(array_reshape),
     "reshape(*shape, order='C')\n--\n\nA view with another shape when one exists, else a copy."},
    {"ravel", KW(array_ravel), "ravel(order='C')\n--\n\nA 1-d view when one exists, else a copy."},
    {"flatten", KW(array_flatten), "flatten(order='C')\n--\n\nA 1-d copy."},
    {"squeeze", KW(array_squeeze), "squeeze(axis=None)\n--\n\nA view without axes of length one."},
    {"transpose", array_transpose, METH_VARARGS,
     "transpose(*axes)\n--\n\nA view with the axes permuted (reversed by default)."},
    {"swapaxes", array_swapaxes, METH_VARARGS, "swapaxes(axis1, axis2, /)\n--\n\nA view with two axes swapped."},
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
