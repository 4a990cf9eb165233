/*
 * pinned.c -- page-locked host memory for Python: the HostAllocation
 * type, which exports its bytes through the buffer protocol
 * (numpy.frombuffer views it), from the pinned pool
 * (transfer/pinned_pool.c) or allocated on its own.
 */
#include "pygpu.h"
#include "pinned.h"
#include "convert.h"
#include "errors.h"
#include "fork.h"
#include "shape.h"
#include "state.h"
#include "transfer/pinned_pool.h"

#include <stdlib.h>
#include <structmember.h>

static char empty_bytes[1];     /* what a zero-byte allocation exports */

static void host_release(PyGPUHostMemory *h)
{
    if (h->ptr && h->pooled) {
        pygpu_pinned_give(h->ptr);
    } else if (h->ptr && !pygpu_fork_broken()) {
        pygpu_rt_host_unpin(h->ptr, h->size);
        (void)pygpu_rt_get_last_error();
    }
    h->ptr = NULL;
}

static void host_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    host_release((PyGPUHostMemory *)self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int host_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    PyGPUHostMemory *h = (PyGPUHostMemory *)self;
    if (!h->ptr && h->size) {
        PyErr_SetString(PyExc_ValueError, "this HostAllocation was freed");
        view->obj = NULL;
        return -1;
    }
    if (PyBuffer_FillInfo(view, self, h->ptr ? h->ptr : empty_bytes, (Py_ssize_t)h->size, 0, flags) < 0)
        return -1;
    h->exports++;
    return 0;
}

static void host_releasebuffer(PyObject *self, Py_buffer *view)
{
    (void)view;
    ((PyGPUHostMemory *)self)->exports--;
}

static PyObject *host_free(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyGPUHostMemory *h = (PyGPUHostMemory *)self;
    if (h->exports > 0) {
        PyErr_Format(PyExc_BufferError, "cannot free a HostAllocation while %zd view%s of it exist",
                     h->exports, h->exports == 1 ? "" : "s");
        return NULL;
    }
    host_release(h);
    h->size = 0;
    Py_RETURN_NONE;
}

static PyObject *host_ptr(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromVoidPtr(((PyGPUHostMemory *)self)->ptr);
}

static PyObject *host_repr(PyObject *self)
{
    PyGPUHostMemory *h = (PyGPUHostMemory *)self;
    return PyUnicode_FromFormat("<pygpu.HostAllocation %p, %zu bytes page-locked>", h->ptr, h->size);
}

static PyMemberDef host_members[] = {
    {"size", T_PYSSIZET, offsetof(PyGPUHostMemory, size), READONLY, "Bytes allocated."},
    {0},
};

static PyGetSetDef host_getset[] = {
    {"ptr", host_ptr, NULL, "The host address as an int (0 once freed).", NULL},
    {0},
};

static PyMethodDef host_methods[] = {
    {"free", host_free, METH_NOARGS,
     "free()\n--\n\nGive the memory back now (BufferError while views of it exist)."},
    {0},
};

static PyType_Slot host_slots[] = {
    {Py_tp_doc, "HostAllocation: page-locked host memory from mem_alloc_host(); a\n"
                "writable buffer, freed when the object and all views of it die."},
    {Py_tp_dealloc, host_dealloc},
    {Py_tp_repr, host_repr},
    {Py_bf_getbuffer, host_getbuffer},
    {Py_bf_releasebuffer, host_releasebuffer},
    {Py_tp_members, host_members},
    {Py_tp_getset, host_getset},
    {Py_tp_methods, host_methods},
    {0, NULL},
};

static PyType_Spec host_spec = {
    .name = "pygpu.HostAllocation",
    .basicsize = sizeof(PyGPUHostMemory),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = host_slots,
};

/* A new HostAllocation of n bytes (a block the pool has cached for
 * transfers with device `dev` when `pooled`: NULL with no exception where
 * it has none; else made now, on no device's NUMA node in particular), for
 * `purpose` (NULL: raw memory, as the message says if it runs out); new
 * reference. */
static PyObject *host_alloc(pygpu_state *st, size_t n, int pooled, int dev, const pygpu_alloc_purpose *purpose)
{
    pygpu_status s;
    int placement;
    PyGPUHostMemory *h = (PyGPUHostMemory *)st->HostMemory->tp_alloc(st->HostMemory, 0);
    if (!h)
        return NULL;
    h->size = n;
    if (pooled) {
        h->ptr = pygpu_pinned_take_cached(n, dev);
        h->pooled = h->ptr != NULL;
        if (!h->ptr)
            Py_CLEAR(h);
    } else if (n) {
        Py_BEGIN_ALLOW_THREADS
        s = pygpu_rt_host_pin(&h->ptr, n, -1, &placement);
        Py_END_ALLOW_THREADS
        if (s != 0) {
            h->ptr = NULL;
            Py_DECREF(h);
            (void)pygpu_check_alloc(st, s, "HostRegister", n, -1, purpose);
            return NULL;
        }
    }
    return (PyObject *)h;
}

static PyObject *mem_alloc_host(PyObject *mod, PyObject *arg)
{
    size_t n;
    if (pygpu_size_arg(arg, "mem_alloc_host() nbytes", &n) < 0)
        return NULL;
    return host_alloc(PyModule_GetState(mod), n, 0, -1, NULL);
}

/* The HostAllocation for an array of `shape` and `descr` (checked: NumPy's
 * ValueError where its bytes do not fit in the address space), as
 * host_alloc makes it; new reference. */
static PyObject *host_alloc_for(pygpu_state *st, PyArray_Descr *descr, int nd, const ptrdiff_t *shape, int pooled,
                                int dev)
{
    ptrdiff_t nbytes;
    pygpu_alloc_purpose purpose = {nd, shape, descr};
    if (pygpu_checked_nbytes(nd, shape, (ptrdiff_t)PyDataType_ELSIZE(descr), &nbytes) < 0)
        return NULL;
    return host_alloc(st, (size_t)nbytes, pooled, dev, &purpose);
}

/* _mem_alloc_host_for(shape, dtype): the HostAllocation behind
 * pagelocked_empty (driver.py), which names the array if it runs out. */
static PyObject *mem_alloc_host_for(PyObject *mod, PyObject *args)
{
    PyObject *shape_obj, *dtype, *r;
    PyArray_Descr *descr = NULL;
    ptrdiff_t shape[PYGPU_MAXDIMS];
    int nd;
    pygpu_state *st = PyModule_GetState(mod);
    if (!PyArg_ParseTuple(args, "OO:_mem_alloc_host_for", &shape_obj, &dtype) ||
        pygpu_shape_arg(st, shape_obj, &nd, shape) < 0 || !PyArray_DescrConverter(dtype, &descr))
        return NULL;
    r = host_alloc_for(st, descr, nd, shape, 0, -1);
    Py_DECREF(descr);
    return r;
}

PyObject *pygpu_pagelocked_empty(pygpu_state *st, PyArray_Descr *descr, int nd, const ptrdiff_t *shape,
                                 int pooled, int dev)
{
    PyObject *mem = host_alloc_for(st, descr, nd, shape, pooled, dev);
    if (!mem)
        return NULL;
    Py_INCREF(descr);
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr, nd, (npy_intp *)shape, NULL,
                                         ((PyGPUHostMemory *)mem)->ptr ? ((PyGPUHostMemory *)mem)->ptr
                                                                      : empty_bytes,
                                         NPY_ARRAY_CARRAY, NULL);
    if (!arr || PyArray_SetBaseObject((PyArrayObject *)arr, mem) < 0) {   /* steals mem */
        if (!arr)
            Py_DECREF(mem);
        Py_XDECREF(arr);
        return NULL;
    }
    return arr;
}

static PyMethodDef pinned_functions[] = {
    {"mem_alloc_host", mem_alloc_host, METH_O,
     "mem_alloc_host(nbytes, /)\n--\n\nAllocate page-locked host memory; a HostAllocation."},
    {"_mem_alloc_host_for", mem_alloc_host_for, METH_VARARGS,
     "_mem_alloc_host_for(shape, dtype, /)\n--\n\n"
     "The HostAllocation of pagelocked_empty(shape, dtype), which names the array if it runs out."},
    {0},
};

int pygpu_pinned_functions_init(PyObject *m) { return PyModule_AddFunctions(m, pinned_functions); }

int pygpu_pinned_init(PyObject *m, pygpu_state *st)
{
    st->HostMemory = (PyTypeObject *)PyType_FromModuleAndSpec(m, &host_spec, NULL);
    return st->HostMemory ? PyModule_AddType(m, st->HostMemory) : -1;
}
