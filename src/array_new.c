/*
 * array_new.c -- GPUArray(...) (PyCUDA's constructor: a shape, or host
 * data, or caller-provided memory) and the module's creation functions
 * written in C (empty, to_gpu, to_gpu_async, with PyCUDA's allocators):
 * Python arguments turned into calls of the one constructor and the
 * construction door.
 */
#include "pygpu.h"
#include "array_new.h"
#include "array.h"
#include "array_host.h"
#include "convert.h"
#include "device.h"
#include "dtype.h"
#include "memory.h"
#include "shape.h"
#include "state.h"


/* Parse strides: nd ints of any sign; 0, or -1 with an exception. */
static int strides_arg(pygpu_state *st, PyObject *obj, int nd, ptrdiff_t *strides)
{
    int n;
    if (pygpu_dims_arg(st, obj, &n, strides, PTRDIFF_MIN) < 0)
        return -1;
    if (n != nd) {
        PyErr_Format(PyExc_ValueError, "strides has %d entries but the shape has %d", n, nd);
        return -1;
    }
    return 0;
}

/* The address `gpudata` names: a DeviceAllocation's (ValueError once
 * freed), an int, or int() of an object that has one (PyCUDA's pooled
 * allocations); floats, bools, strings and negative ints are refused. */
static int address_of(pygpu_state *st, PyObject *obj, char **ptr)
{
    PyNumberMethods *nb = Py_TYPE(obj)->tp_as_number;
    int overflow = 0;
    if (PyFloat_Check(obj) || PyBool_Check(obj) || pygpu_is_gpuarray(st, obj) || !nb || (!nb->nb_int && !nb->nb_index)) {
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
    if (address_of(st, gpudata, &ptr) < 0 || caller_extent(nd, shape, strides, itemsize, &lo, &hi) < 0 ||
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

PyObject *pygpu_array_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
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
        (!pygpu_is_int_arg(st, shape_obj) && !PyTuple_Check(shape_obj) && !PyList_Check(shape_obj) &&
         (PyObject_CheckBuffer(shape_obj) || PyObject_HasAttrString(shape_obj, "__array_interface__") ||
          PyObject_HasAttrString(shape_obj, "__array__")))) {
        /* GPUArray(host_data): a device copy. */
        PyArray_Descr *d = dtype == Py_None ? NULL : pygpu_descr_arg(dtype);
        if (dtype != Py_None && !d)
            return NULL;
        return pygpu_array_from_host_as(st, tp, shape_obj, d, stream, 0);
    }
    int fortran = pygpu_order_arg(order, 0);
    if (fortran < 0 || pygpu_shape_arg(st, shape_obj, &nd, shape) < 0)
        return NULL;
    PyArray_Descr *descr = pygpu_descr_arg(dtype);
    if (!descr)
        return NULL;
    ptrdiff_t itemsize = (ptrdiff_t)PyDataType_ELSIZE(descr);
    ptrdiff_t nbytes, lo, hi;
    if (pygpu_checked_nbytes(nd, shape, itemsize, &nbytes) < 0)
        goto fail;
    if (strides_obj != Py_None) {
        if (strides_arg(st, strides_obj, nd, strides) < 0)
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
    if ((fortran = pygpu_order_arg(order, 0)) < 0 || pygpu_shape_arg(st, shape_obj, &nd, shape) < 0)
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
    PyArrayObject *h = pygpu_upload_source(obj, d);
    PyObject *a = NULL, *shape = NULL, *order = NULL;
    if (!h)
        return NULL;
    if ((shape = PyObject_GetAttrString((PyObject *)h, "shape")) && (order = PyUnicode_FromString(PyArray_IS_F_CONTIGUOUS(h) && !PyArray_IS_C_CONTIGUOUS(h) ? "F" : "C")))
        a = allocated_empty(st, shape, (PyObject *)PyArray_DESCR(h), order, allocator);
    if (a && pygpu_upload_into(st, (PyGPUArray *)a, h, stream, async) < 0)
        Py_CLEAR(a);
    Py_XDECREF(shape);
    Py_XDECREF(order);
    Py_DECREF(h);
    return a;
}

static PyObject *mod_to_gpu(PyObject *m, PyObject *a, PyObject *k) { return to_gpu_impl(m, a, k, 0); }
static PyObject *mod_to_gpu_async(PyObject *m, PyObject *a, PyObject *k) { return to_gpu_impl(m, a, k, 1); }

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

static PyMethodDef creation_methods[] = {
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

int pygpu_array_new_init(PyObject *m) { return PyModule_AddFunctions(m, creation_methods); }
