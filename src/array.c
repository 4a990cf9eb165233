/*
 * array.c -- the GPUArray type: the one internal constructor every path
 * funnels into, allocation, the Python constructor, and the module-level
 * constructors written in C (empty, to_gpu, to_gpu_async).
 *
 * Attributes are in array_getset.c, methods in array_methods.c, indexing in
 * array_mapping.c, and copies in the copy planner (copy/copy.c).
 */
#include "pygpu.h"
#include "copy/copy.h"

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

/* Check a shape's size and byte count; 0, or -1 with ValueError. */
static int checked_nbytes(int nd, const ptrdiff_t *shape, ptrdiff_t itemsize, ptrdiff_t *nbytes)
{
    int r = pygpu_shape_nbytes(nd, shape, itemsize, nbytes);
    if (r == PYGPU_SHAPE_NEGATIVE) {
        PyErr_SetString(PyExc_ValueError, "negative dimensions are not allowed");
        return -1;
    }
    if (r < 0) {
        PyErr_SetString(PyExc_ValueError, "array is too big: its byte count overflows");
        return -1;
    }
    return 0;
}

/* A new array of `shape` with fresh memory laid out by `strides` (a
 * contiguous layout), or NULL strides: contiguous like `like` (order 'K'),
 * else C or F order by `fortran`.  Steals `descr`. */
static PyObject *empty_laid_out(pygpu_state *st, PyTypeObject *tp, PyArray_Descr *descr, int nd,
                                const ptrdiff_t *shape, int fortran, const ptrdiff_t *like, PyObject *stream)
{
    ptrdiff_t nbytes, strides[PYGPU_MAXDIMS];
    ptrdiff_t itemsize = (ptrdiff_t)PyDataType_ELSIZE(descr);
    if (checked_nbytes(nd, shape, itemsize, &nbytes) < 0) {
        Py_DECREF(descr);
        return NULL;
    }
    if (like)
        pygpu_shape_strides_like(nd, shape, like, itemsize, strides);
    else
        pygpu_shape_strides(nd, shape, itemsize, fortran, strides);
    PyObject *mem = pygpu_memory_new(st, (size_t)nbytes, stream);
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

/* 1 if `obj` is one integer (a NumPy array of one or more axes is not, nor
 * a GPUArray, though a 0-d one of integers has __index__). */
static int is_scalar_index(PyObject *obj)
{
    return PyIndex_Check(obj) && !(PyArray_Check(obj) && PyArray_NDIM((PyArrayObject *)obj) > 0) &&
           !pygpu_is_gpuarray(obj);
}

int pygpu_dims_arg(PyObject *obj, int *nd, ptrdiff_t *out, ptrdiff_t min)
{
    PyObject *seq = is_scalar_index(obj) ? PyTuple_Pack(1, obj)
                                         : PySequence_Fast(obj, "shape must be an int or a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > PYGPU_MAXDIMS) {
        PyErr_Format(PyExc_ValueError, "too many dimensions: %zd (at most %d)", n, PYGPU_MAXDIMS);
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!is_scalar_index(item)) {
            PyErr_Format(PyExc_TypeError, "shape entries must be ints, not %.100s", Py_TYPE(item)->tp_name);
            goto fail;
        }
        out[i] = PyNumber_AsSsize_t(item, PyExc_ValueError);
        if (out[i] == -1 && PyErr_Occurred())
            goto fail;
        if (out[i] < min) {
            PyErr_SetString(PyExc_ValueError, "negative dimensions are not allowed");
            goto fail;
        }
    }
    Py_DECREF(seq);
    *nd = (int)n;
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

int pygpu_shape_arg(PyObject *obj, int *nd, ptrdiff_t *shape)
{
    return pygpu_dims_arg(obj, nd, shape, 0);
}

/* Parse strides: nd ints of any sign; 0, or -1 with an exception. */
static int strides_arg(PyObject *obj, int nd, ptrdiff_t *strides)
{
    int n;
    if (pygpu_dims_arg(obj, &n, strides, PTRDIFF_MIN) < 0)
        return -1;
    if (n != nd) {
        PyErr_Format(PyExc_ValueError, "strides has %d entries but the shape has %d", n, nd);
        return -1;
    }
    return 0;
}

/* 'C' -> 0, 'F' -> 1 (None: 0); `allow_any` also takes 'A' and 'K'
 * (PYGPU_ORDER_A, PYGPU_ORDER_K) and None (-> -1). */
static int order_arg(PyObject *obj, int allow_any)
{
    if (obj == NULL || obj == Py_None)
        return allow_any ? -1 : 0;
    if (PyUnicode_Check(obj) && PyUnicode_GetLength(obj) == 1) {
        Py_UCS4 c = PyUnicode_READ_CHAR(obj, 0);
        if (c == 'C' || c == 'c')
            return PYGPU_ORDER_C;
        if (c == 'F' || c == 'f')
            return PYGPU_ORDER_F;
        if (allow_any && (c == 'A' || c == 'a'))
            return PYGPU_ORDER_A;
        if (allow_any && (c == 'K' || c == 'k'))
            return PYGPU_ORDER_K;
    }
    PyErr_Format(PyExc_ValueError, "order must be %s, not %R", allow_any ? "'C', 'F', 'A' or 'K'" : "'C' or 'F'",
                 obj);
    return -2;
}

int pygpu_order_arg(PyObject *obj, int allow_any) { return order_arg(obj, allow_any); }

/* The host array an upload copies: `obj` as NumPy converts it (cast to
 * `descr` if given, which is stolen, with NumPy's FORCECAST), in a dtype
 * PyGPU holds (non-native byte order made native; others refused).  The
 * one set of conversion rules of every upload: to_gpu with or without an
 * allocator, asarray and from_dlpack of host data.  New reference. */
static PyArrayObject *upload_source(PyObject *obj, PyArray_Descr *descr)
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
static int upload_into(pygpu_state *st, PyGPUArray *a, PyArrayObject *h, PyObject *stream, int async)
{
    pygpu_stream_t s;
    if (pygpu_stream_for(st, stream, a->device, "array", &s) < 0)
        return -1;
    pygpu_side dst = {a->data, GA_STRIDES(a), 1, a->device, NULL};
    pygpu_side src = {PyArray_BYTES(h), PyArray_STRIDES(h), 0, -1, (PyObject *)h};    /* (kept by an upload in the background) */
    if (pygpu_copy(st, dst, src, a->nd, GA_SHAPE(a), GA_ITEMSIZE(a), s, async) < 0)
        return -1;
    pygpu_array_note_stream(st, a, stream, s);
    return 0;
}

static int f_only(PyArrayObject *h) { return PyArray_IS_F_CONTIGUOUS(h) && !PyArray_IS_C_CONTIGUOUS(h); }

/* pygpu_array_from_host, making an array of type `tp` (GPUArray or a subclass). */
static PyObject *from_host(pygpu_state *st, PyTypeObject *tp, PyObject *obj, PyArray_Descr *descr,
                           PyObject *stream, int async)
{
    PyArrayObject *h = upload_source(obj, descr);
    if (!h)
        return NULL;
    PyArray_Descr *d = PyArray_DESCR(h);
    Py_INCREF(d);
    PyGPUArray *a = (PyGPUArray *)pygpu_array_empty(st, tp, d, PyArray_NDIM(h), PyArray_SHAPE(h), f_only(h),
                                                    stream);
    if (a && upload_into(st, a, h, stream, async) < 0)
        Py_CLEAR(a);
    Py_DECREF(h);
    return (PyObject *)a;
}

PyObject *pygpu_array_from_host(pygpu_state *st, PyObject *obj, PyArray_Descr *descr, PyObject *stream, int async)
{
    return from_host(st, st->Array, obj, descr, stream, async);
}

/* The address `gpudata` names: a DeviceAllocation's (ValueError once
 * freed), an int, or int() of an object that has one (PyCUDA's pooled
 * allocations); floats, bools, strings and negative ints are refused. */
static int address_of(PyObject *obj, char **ptr)
{
    PyNumberMethods *nb = Py_TYPE(obj)->tp_as_number;
    int overflow = 0;
    if (PyFloat_Check(obj) || PyBool_Check(obj) || pygpu_is_gpuarray(obj) || !nb || (!nb->nb_int && !nb->nb_index)) {
        PyErr_Format(PyExc_TypeError, "gpudata must be a device allocation or an int address, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *v = PyNumber_Long(obj);
    if (!v)
        return -1;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow < 0 || (!overflow && x < 0)) {
        PyErr_Format(PyExc_ValueError, "gpudata address %S is negative", v);
        Py_DECREF(v);
        return -1;
    }
    *ptr = PyLong_AsVoidPtr(v);
    if (*ptr == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "gpudata address %S does not fit in a pointer", v);
    }
    Py_DECREF(v);
    return PyErr_Occurred() ? -1 : 0;
}

/* The bytes a layout given by the caller touches, [*lo, *hi) from element
 * 0; 0, or -1 with ValueError when they do not fit in the address space. */
static int caller_extent(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides, ptrdiff_t itemsize,
                         ptrdiff_t *lo, ptrdiff_t *hi)
{
    if (pygpu_shape_extent_checked(nd, shape, strides, itemsize, lo, hi) < 0) {
        PyErr_SetString(PyExc_ValueError, "strides= reach past the address space for this shape");
        return -1;
    }
    return 0;
}

/* GPUArray over caller-provided memory (element 0 at `offset` bytes past
 * int(gpudata)), checked against an allocation's size where it is known. */
static PyObject *over_memory(pygpu_state *st, PyTypeObject *tp, PyArray_Descr *descr, int nd,
                             const ptrdiff_t *shape, const ptrdiff_t *strides, PyObject *gpudata,
                             ptrdiff_t offset, PyObject *base)
{
    char *ptr;
    ptrdiff_t lo, hi, itemsize = (ptrdiff_t)PyDataType_ELSIZE(descr);
    PyObject *owner = base && base != Py_None ? base : gpudata;
    if (address_of(gpudata, &ptr) < 0 || caller_extent(nd, shape, strides, itemsize, &lo, &hi) < 0 ||
        pygpu_memory_usable(owner) < 0)
        goto fail;
    if (hi > lo && !ptr) {
        PyErr_SetString(PyExc_ValueError, "gpudata is a null address");
        goto fail;
    }
    ptr += offset;
    int device = -1;
    if (PyObject_TypeCheck(gpudata, st->Memory)) {
        PyGPUMemory *m = (PyGPUMemory *)gpudata;
        ptrdiff_t start = offset;           /* (element 0's byte in the allocation) */
        device = m->device;
        if (hi > lo && (start + lo < 0 || start > PTRDIFF_MAX - hi || (size_t)(start + hi) > m->size)) {
            PyErr_Format(PyExc_ValueError,
                         "the array (bytes %zd..%zd from its start) does not fit in the %zu-byte allocation",
                         lo, hi, m->size);
            goto fail;
        }
    }
    if (device < 0 && (device = pygpu_current_device(st)) < 0)
        goto fail;
    return pygpu_array_wrap(st, tp, descr, nd, shape, strides, ptr, owner,
                            base && base != Py_None ? base : NULL, device, 1);
fail:
    Py_DECREF(descr);
    return NULL;
}

static PyObject *array_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"shape", "dtype", "allocator", "base", "gpudata", "strides", "order",
                             "stream", NULL};
    PyObject *shape_obj, *dtype = Py_None, *allocator = Py_None, *base = Py_None, *gpudata = Py_None;
    PyObject *strides_obj = Py_None, *order = Py_None, *stream = Py_None;
    pygpu_state *st = pygpu_state_of_type(tp);
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];
    int nd;
    if (!st || !PyArg_ParseTupleAndKeywords(args, kwds, "O|OOOOOO$O:GPUArray", kwlist, &shape_obj, &dtype,
                                            &allocator, &base, &gpudata, &strides_obj, &order, &stream))
        return NULL;
    if (PyArray_Check(shape_obj) ||
        (!is_scalar_index(shape_obj) && !PyTuple_Check(shape_obj) && !PyList_Check(shape_obj) &&
         (PyObject_CheckBuffer(shape_obj) || PyObject_HasAttrString(shape_obj, "__array_interface__") ||
          PyObject_HasAttrString(shape_obj, "__array__")))) {
        /* GPUArray(host_data): a device copy. */
        PyArray_Descr *d = dtype == Py_None ? NULL : pygpu_descr_arg(dtype);
        if (dtype != Py_None && !d)
            return NULL;
        return from_host(st, tp, shape_obj, d, stream, 0);
    }
    int fortran = order_arg(order, 0);
    if (fortran < 0 || pygpu_shape_arg(shape_obj, &nd, shape) < 0)
        return NULL;
    PyArray_Descr *descr = pygpu_descr_arg(dtype);
    if (!descr)
        return NULL;
    ptrdiff_t itemsize = (ptrdiff_t)PyDataType_ELSIZE(descr);
    ptrdiff_t nbytes, lo, hi;
    if (checked_nbytes(nd, shape, itemsize, &nbytes) < 0)
        goto fail;
    if (strides_obj != Py_None) {
        if (strides_arg(strides_obj, nd, strides) < 0)
            goto fail;
    } else {
        pygpu_shape_strides(nd, shape, itemsize, fortran, strides);
    }
    if (gpudata != Py_None)
        return over_memory(st, tp, descr, nd, shape, strides, gpudata, 0, base);
    if (allocator != Py_None) {
        /* PyCUDA style: allocator(nbytes) returns the memory, int() its address. */
        if (caller_extent(nd, shape, strides, itemsize, &lo, &hi) < 0)
            goto fail;
        PyObject *mem = PyObject_CallFunction(allocator, "n", (Py_ssize_t)(hi - lo));
        if (!mem)
            goto fail;
        PyObject *a = over_memory(st, tp, descr, nd, shape, strides, mem, -lo, base);
        Py_DECREF(mem);
        return a;
    }
    if (strides_obj != Py_None) {
        PyErr_SetString(PyExc_ValueError, "strides= needs gpudata= (the memory they describe)");
        goto fail;
    }
    return pygpu_array_empty(st, tp, descr, nd, shape, fortran, stream);
fail:
    Py_DECREF(descr);
    return NULL;
}

static int array_traverse(PyObject *self, visitproc visit, void *arg)
{
    PyGPUArray *a = (PyGPUArray *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(a->mem);
    Py_VISIT(a->base);
    Py_VISIT(a->last_stream_ref);
    return 0;
}

static int array_clear(PyObject *self)
{
    PyGPUArray *a = (PyGPUArray *)self;
    pygpu_memory_view(a->mem, -1);
    Py_CLEAR(a->mem);
    Py_CLEAR(a->base);
    Py_CLEAR(a->shape_tuple);
    Py_CLEAR(a->ptr_int);
    Py_CLEAR(a->last_stream_ref);
    return 0;
}

static void array_dealloc(PyObject *self)
{
    PyGPUArray *a = (PyGPUArray *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (a->weakreflist)
        PyObject_ClearWeakRefs(self);
    array_clear(self);
    Py_CLEAR(a->descr);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *array_repr(PyObject *self);
static PyObject *array_str(PyObject *self);
static PyObject *array_iter(PyObject *self);

static PyMemberDef array_members[] = {
    {"shape", T_OBJECT_EX, offsetof(PyGPUArray, shape_tuple), READONLY, "The length of each axis."},
    {"ptr", T_OBJECT_EX, offsetof(PyGPUArray, ptr_int), READONLY,
     "Device address of element [0, ..., 0], an int."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(PyGPUArray, weakreflist), READONLY, NULL},
    {0},
};

static PyType_Slot array_slots[] = {
    {Py_tp_doc, "GPUArray(shape, dtype=None, allocator=None, base=None, gpudata=None, strides=None, "
                "order=None, *, stream=None)\n--\n\n"
                "A NumPy-style array in device memory (dtype None: float64; order None: 'C').\n"
                "GPUArray(host_data) copies host data (anything NumPy converts) to the device."},
    {Py_tp_new, array_new},
    {Py_tp_dealloc, array_dealloc},
    {Py_tp_traverse, array_traverse},
    {Py_tp_clear, array_clear},
    {Py_tp_repr, array_repr},
    {Py_tp_str, array_str},
    {Py_mp_subscript, pygpu_array_subscript},
    {Py_mp_ass_subscript, pygpu_array_ass_subscript},
    {Py_mp_length, pygpu_array_length},
    {Py_sq_length, pygpu_array_length},
    {Py_sq_item, pygpu_array_item},
    {Py_nb_bool, pygpu_array_bool},
    {Py_nb_float, pygpu_array_float},
    {Py_nb_int, pygpu_array_int},
    {Py_nb_index, pygpu_array_index},
    {Py_tp_iter, array_iter},
    {Py_tp_members, array_members},
    {Py_tp_getset, pygpu_array_getset},
    {Py_tp_methods, pygpu_array_methods},
    {0, NULL},
};

static PyType_Spec array_spec = {
    .name = "pygpu.GPUArray",
    .basicsize = offsetof(PyGPUArray, dims),
    .itemsize = sizeof(ptrdiff_t),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = array_slots,
};

/* repr/str: the values as NumPy shows them. */
static PyObject *host_copy(PyObject *self)
{
    return pygpu_array_get((PyGPUArray *)self, NULL, NULL, 0, 0);
}

static PyObject *array_repr(PyObject *self)
{
    PyObject *h = host_copy(self), *text = NULL, *lines = NULL, *out = NULL, *r = NULL;
    if (!h)
        return NULL;
    /* NumPy writes "array(...)", continuation lines indented under the
     * parenthesis: rename it and indent them by the three letters added. */
    if (!(text = PyObject_Repr(h)) || !(lines = PyUnicode_Splitlines(text, 0)) || !(out = PyList_New(0)))
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lines); i++) {
        PyObject *line = PyList_GET_ITEM(lines, i), *fixed;
        if (i == 0) {
            PyObject *rest = PyUnicode_Substring(line, 5, PY_SSIZE_T_MAX);   /* after "array" */
            fixed = rest ? PyUnicode_FromFormat("GPUArray%U", rest) : NULL;
            Py_XDECREF(rest);
        } else if (PyUnicode_GET_LENGTH(line) > 0)
            fixed = PyUnicode_FromFormat("   %U", line);
        else
            fixed = Py_NewRef(line);
        if (!fixed || PyList_Append(out, fixed) < 0) {
            Py_XDECREF(fixed);
            goto done;
        }
        Py_DECREF(fixed);
    }
    PyObject *nl = PyUnicode_FromString("\n");
    if (nl) {
        r = PyUnicode_Join(nl, out);
        Py_DECREF(nl);
    }
done:
    Py_XDECREF(text);
    Py_XDECREF(lines);
    Py_XDECREF(out);
    Py_DECREF(h);
    return r;
}

static PyObject *array_str(PyObject *self)
{
    PyObject *h = host_copy(self);
    if (!h)
        return NULL;
    PyObject *r = PyObject_Str(h);
    Py_DECREF(h);
    return r;
}

/* iter(a): the views a[0], a[1], ...; a 0-d array is not iterable. */
static PyObject *array_iter(PyObject *self)
{
    if (((PyGPUArray *)self)->nd == 0) {
        PyErr_SetString(PyExc_TypeError, "iteration over a 0-d array");
        return NULL;
    }
    return PySeqIter_New(self);
}

/* ---- module functions ------------------------------------------------------ */

/* PyCUDA puts its allocator(nbytes) before `order` (empty) and `stream`
 * (to_gpu_async), PyGPU after: of the two arguments, the callable one is
 * the allocator; with None in the other's place, a non-callable in the
 * allocator's place is the other.
 * 0, or -1 with TypeError when the allocator is not callable. */
static int allocator_arg(PyObject **other, PyObject **allocator)
{
    if (PyCallable_Check(*other) || (*other == Py_None && !PyCallable_Check(*allocator))) {
        PyObject *t = *other;
        *other = *allocator;
        *allocator = t;
    }
    if (*allocator != Py_None && !PyCallable_Check(*allocator)) {
        PyErr_Format(PyExc_TypeError, "allocator must be callable, not %.100s", Py_TYPE(*allocator)->tp_name);
        return -1;
    }
    return 0;
}

/* A new GPUArray from allocator(nbytes) (GPUArray's own allocator path). */
static PyObject *allocated_empty(pygpu_state *st, PyObject *shape, PyObject *dtype, PyObject *order,
                                 PyObject *allocator)
{
    PyObject *args = PyTuple_Pack(3, shape, dtype, allocator), *kw = NULL, *r = NULL;
    if (args && (kw = Py_BuildValue("{s:O}", "order", order)))
        r = PyObject_Call((PyObject *)st->Array, args, kw);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return r;
}

static PyObject *mod_empty(PyObject *m, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"shape", "dtype", "order", "allocator", "stream", NULL};
    PyObject *shape_obj, *dtype = Py_None, *order = Py_None, *stream = Py_None, *allocator = Py_None;
    pygpu_state *st = PyModule_GetState(m);
    ptrdiff_t shape[PYGPU_MAXDIMS];
    int nd, fortran;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OOO$O:empty", kwlist, &shape_obj, &dtype, &order, &allocator,
                                     &stream) ||
        allocator_arg(&order, &allocator) < 0)
        return NULL;
    if (allocator != Py_None)
        return allocated_empty(st, shape_obj, dtype, order, allocator);
    if ((fortran = order_arg(order, 0)) < 0 || pygpu_shape_arg(shape_obj, &nd, shape) < 0)
        return NULL;
    PyArray_Descr *descr = pygpu_descr_arg(dtype);
    if (!descr)
        return NULL;
    return pygpu_array_empty(st, st->Array, descr, nd, shape, fortran, stream);
}

static PyObject *to_gpu_impl(PyObject *m, PyObject *args, PyObject *kwds, int async)
{
    static char *kwlist[] = {"ary", "stream", "allocator", "dtype", NULL};
    PyObject *obj, *stream = Py_None, *dtype = Py_None, *allocator = Py_None;
    pygpu_state *st = PyModule_GetState(m);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OO$O", kwlist, &obj, &stream, &allocator, &dtype) ||
        allocator_arg(&stream, &allocator) < 0)
        return NULL;
    PyArray_Descr *d = NULL;
    if (dtype != Py_None && !(d = pygpu_descr_arg(dtype)))
        return NULL;
    if (allocator == Py_None)
        return pygpu_array_from_host(st, obj, d, stream, async);
    /* PyCUDA's to_gpu(ary, allocator): memory from the allocator, then the
     * same upload as without one. */
    PyArrayObject *h = upload_source(obj, d);
    PyObject *a = NULL, *shape = NULL, *order = NULL;
    if (!h)
        return NULL;
    if ((shape = PyObject_GetAttrString((PyObject *)h, "shape")) && (order = PyUnicode_FromString(f_only(h) ? "F" : "C")))
        a = allocated_empty(st, shape, (PyObject *)PyArray_DESCR(h), order, allocator);
    if (a && upload_into(st, (PyGPUArray *)a, h, stream, async) < 0)
        Py_CLEAR(a);
    Py_XDECREF(shape);
    Py_XDECREF(order);
    Py_DECREF(h);
    return a;
}

static PyObject *mod_to_gpu(PyObject *m, PyObject *a, PyObject *k) { return to_gpu_impl(m, a, k, 0); }
static PyObject *mod_to_gpu_async(PyObject *m, PyObject *a, PyObject *k) { return to_gpu_impl(m, a, k, 1); }

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

PyMethodDef pygpu_array_module_methods[] = {
    {"empty", KW(mod_empty),
     "empty(shape, dtype=None, order=None, allocator=None, *, stream=None)\n--\n\n"
     "A new GPUArray, uninitialised (dtype None: float64; order None: 'C';\n"
     "PyCUDA's empty(shape, dtype, allocator, order) too)."},
    {"to_gpu", KW(mod_to_gpu),
     "to_gpu(ary, stream=None, allocator=None, *, dtype=None)\n--\n\n"
     "A GPUArray copy of host data; returns when copied (PyCUDA's to_gpu(ary, allocator) too)."},
    {"to_gpu_async", KW(mod_to_gpu_async),
     "to_gpu_async(ary, stream=None, allocator=None, *, dtype=None)\n--\n\n"
     "A GPUArray copy of host data, queued on the stream (see docs for when `ary` may change;\n"
     "PyCUDA's to_gpu_async(ary, allocator, stream) too)."},
    {0},
};

int pygpu_array_init(PyObject *m, pygpu_state *st)
{
    st->Array = (PyTypeObject *)PyType_FromModuleAndSpec(m, &array_spec, NULL);
    if (!st->Array || PyModule_AddType(m, st->Array) < 0 || pygpu_flags_init(m, st) < 0)
        return -1;
    return PyModule_AddFunctions(m, pygpu_array_module_methods);
}
