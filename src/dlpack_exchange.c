/*
 * dlpack_exchange.c -- the DLPack 1.3 C exchange API, both ways.
 *
 * Producer: GPUArray's type carries `__dlpack_c_exchange_api__`, a capsule
 * named "dlpack_exchange_api" holding the static table below; C code
 * exchanges GPUArrays through it without calling into Python.  The managed
 * tensors it makes are those of __dlpack__ (dlpack_export.c): they keep the array
 * alive, and their deleter runs from any thread, GIL held or not.
 *
 * Consumer: from_dlpack and asarray look up the table of the object's type
 * (once per type: state->xcache) and take the tensor through it, asking the
 * producer's current_work_stream and making the current stream wait for it
 * where the Python protocol would have had the producer do so.  A type
 * whose attribute is not a table PyGPU can use (another capsule, a major
 * version without a 1.x table on its prev_api chain, a missing function) is
 * imported through __dlpack__ / the CAI as before.
 *
 * The table is process-wide by nature (one per loaded backend library), and
 * so is the state its functions use, as for the C API capsule (capi.c).
 */
#include "pygpu.h"
#include "dlpack_exchange.h"
#include "array.h"
#include "device.h"
#include "dlpack.h"
#include "dlpack_export.h"
#include "dlpack_import.h"
#include "dlpack_shared.h"
#include "dtype.h"
#include "memory.h"
#include "stream.h"

#include <string.h>

static pygpu_state *xstate;

/* ---- producer ----------------------------------------------------------------- */

/* 0 if `obj` is a usable GPUArray; else -1 with TypeError/ValueError. */
static int own_array(void *obj)
{
    if (!obj || !PyObject_TypeCheck((PyObject *)obj, xstate->Array)) {
        PyErr_Format(PyExc_TypeError, "pygpu's DLPack exchange API takes a pygpu.GPUArray, not %.100s",
                     obj ? Py_TYPE((PyObject *)obj)->tp_name : "NULL");
        return -1;
    }
    return pygpu_memory_usable(((PyGPUArray *)obj)->mem);
}

static int x_from_py_object(void *obj, DLManagedTensorVersioned **out)
{
    if (own_array(obj) < 0)
        return -1;
    return (*out = pygpu_dl_export((PyGPUArray *)obj)) ? 0 : -1;
}

static int x_dltensor_from_py_object(void *obj, DLTensor *out)
{
    if (own_array(obj) < 0)
        return -1;
    return pygpu_dl_view((PyGPUArray *)obj, out);
}

static int x_to_py_object(DLManagedTensorVersioned *m, void **out)
{
    if (!m) {
        PyErr_SetString(PyExc_ValueError, "managed_tensor_to_py_object_no_sync: NULL tensor");
        return -1;
    }
    /* copy=False: a tensor this backend cannot view is refused, not copied. */
    return (*out = pygpu_dl_adopt(xstate, m, 0, -1)) ? 0 : -1;
}

/* CUDA's convention: the legacy default stream is NULL, the per-thread
 * default stream cudaStreamPerThread (2): PyGPU's handles are those. */
static int x_current_work_stream(DLDeviceType type, int32_t id, void **out)
{
    *out = NULL;
    if (type == kDLCPU || PYGPU_DL_HOST_BACKEND)
        return 0;
    if (type != PYGPU_DL_OWN_TYPE) {
        PyErr_Format(PyExc_ValueError, "current_work_stream: the %s backend has no streams of DLPack device type "
                     "%d", pygpu_rt_vendor(), (int)type);
        return -1;
    }
    PyObject *cur = pygpu_current_stream(xstate);
    if (!cur)
        return -1;
    *out = pygpu_current_stream_on(cur, id);
    Py_DECREF(cur);
    return 0;
}

/* The descriptor of a DLPack dtype GPUArray holds; NULL with BufferError. */
static PyArray_Descr *descr_of(DLDataType t)
{
    static const char kinds[] = {[kDLInt] = 'i', [kDLUInt] = 'u', [kDLFloat] = 'f', [kDLComplex] = 'c',
                                 [kDLBool] = 'b'};
    char kind = t.code < sizeof kinds ? kinds[t.code] : 0;
    PyArray_Descr *d = kind && t.lanes == 1 && t.bits % 8 == 0 ? pygpu_descr_from_kind(kind, t.bits / 8) : NULL;
    if (!d)
        PyErr_Format(PyExc_BufferError, "DLPack dtype (code %d, %d bits, %d lanes) has no GPUArray equivalent",
                     t.code, t.bits, t.lanes);
    return d;
}

/* A new GPUArray for the allocator's prototype; new reference. */
static PyObject *allocate(const DLTensor *p)
{
    int prev = -1;
    long type = (int)p->device.device_type;
    if (type != PYGPU_DL_OWN_TYPE || (PYGPU_DL_HOST_BACKEND && p->device.device_id != 0))
        return PyErr_Format(PyExc_BufferError, "managed_tensor_allocator: the %s backend allocates on DLPack "
                            "device type %d, not (%ld, %d)", pygpu_rt_vendor(), (int)PYGPU_DL_OWN_TYPE, type,
                            (int)p->device.device_id);
    if (p->ndim < 0 || p->ndim > PYGPU_MAXDIMS || (p->ndim > 0 && !p->shape))
        return PyErr_Format(PyExc_ValueError, "managed_tensor_allocator: ndim %d out of range 0..%d",
                            (int)p->ndim, PYGPU_MAXDIMS);
    PyArray_Descr *d = descr_of(p->dtype);
    if (!d)
        return NULL;
    if (!PYGPU_DL_HOST_BACKEND && pygpu_device_enter(xstate, p->device.device_id, &prev) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    ptrdiff_t shape[PYGPU_MAXDIMS];
    for (int i = 0; i < p->ndim; i++)
        shape[i] = (ptrdiff_t)p->shape[i];
    PyObject *a = pygpu_array_empty(xstate, xstate->Array, d, p->ndim, shape, 0, NULL);
    if (prev >= 0 && pygpu_device_leave(xstate, prev) < 0)
        Py_CLEAR(a);
    return a;
}

/* Hand the exception being raised to SetError (kind: its class name), and
 * clear it. */
static void report(void *ctx, void (*SetError)(void *, const char *, const char *))
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyObject *msg = v ? PyObject_Str(v) : NULL;
    const char *text = msg ? PyUnicode_AsUTF8(msg) : NULL;
    PyErr_Clear();
    SetError(ctx, t ? ((PyTypeObject *)t)->tp_name : "RuntimeError", text ? text : "(no message)");
    Py_XDECREF(msg);
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
}

/* May be called without the GIL (TVM-FFI's allocator is): it takes it. */
static int x_allocator(DLTensor *proto, DLManagedTensorVersioned **out, void *ctx,
                       void (*SetError)(void *, const char *, const char *))
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *a = NULL;
    *out = NULL;
    if (!proto)
        PyErr_SetString(PyExc_ValueError, "managed_tensor_allocator: NULL prototype");
    else if ((a = allocate(proto)) != NULL)
        *out = pygpu_dl_export((PyGPUArray *)a);   /* (it holds the array) */
    Py_XDECREF(a);
    int r = *out ? 0 : -1;
    if (r < 0 && SetError)
        report(ctx, SetError);
    PyGILState_Release(g);
    return r;
}

static DLPackExchangeAPI exchange_api = {
    .header = {.version = {PYGPU_DLPACK_MAJOR, PYGPU_DLPACK_EXCHANGE_MINOR}, .prev_api = NULL},
    .managed_tensor_allocator = x_allocator,
    .managed_tensor_from_py_object_no_sync = x_from_py_object,
    .managed_tensor_to_py_object_no_sync = x_to_py_object,
    .dltensor_from_py_object_no_sync = x_dltensor_from_py_object,
    .current_work_stream = x_current_work_stream,
};

const void *pygpu_exchange_table(void) { return &exchange_api; }

/* ---- consumer ----------------------------------------------------------------- */

/* The 1.x table behind capsule `cap`, or NULL (no exception) if it is not
 * one PyGPU can use. */
static const DLPackExchangeAPI *usable_table(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, PYGPU_DLPACK_EXCHANGE_CAPSULE))
        return NULL;
    const DLPackExchangeAPIHeader *h = PyCapsule_GetPointer(cap, PYGPU_DLPACK_EXCHANGE_CAPSULE);
    for (int hops = 0; h && hops < 16 && h->version.major != PYGPU_DLPACK_MAJOR; hops++)
        h = h->version.major > PYGPU_DLPACK_MAJOR ? h->prev_api : NULL;   /* (older tables go back, not forth) */
    const DLPackExchangeAPI *api = h && h->version.major == PYGPU_DLPACK_MAJOR ? (const DLPackExchangeAPI *)h : NULL;
    if (!api || !api->managed_tensor_from_py_object_no_sync || !api->current_work_stream)
        return NULL;
    return api;
}

const void *pygpu_exchange_api_of(pygpu_state *st, PyTypeObject *tp)
{
    pygpu_xcache_entry *e = &st->xcache[((uintptr_t)tp >> 6) % PYGPU_XCACHE_SLOTS];
    if (e->type == tp && e->tag == tp->tp_version_tag && e->tag != 0)
        return e->api;
    const DLPackExchangeAPI *api = NULL;
    PyObject *cap = PyObject_GetAttr((PyObject *)tp, st->names.exchange_attr);
    if (cap) {
        api = usable_table(cap);
        Py_DECREF(cap);
    } else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
    } else {
        return NULL;
    }
    if (tp->tp_version_tag != 0) {     /* (the lookup gave the type a tag if it can have one) */
        e->type = tp;
        e->tag = tp->tp_version_tag;
        e->api = api;
    }
    return api;
}

/* 0 if device `id` exists; else -1 with BufferError. */
static int device_exists(pygpu_state *st, long type, int id)
{
    int n = pygpu_device_count(st);
    if (n < 0)
        return -1;
    if (id < 0 || id >= n) {
        PyErr_Format(PyExc_BufferError, "the data is on DLPack device (%ld, %d), but the %s backend has %d "
                     "device%s", type, id, pygpu_rt_vendor(), n, n == 1 ? "" : "s");
        return -1;
    }
    return 0;
}

/* Make the current stream wait for the producer's work on GPU device `id`. */
static int order_after_producer(pygpu_state *st, const DLPackExchangeAPI *api, long type, int id)
{
    void *theirs = NULL;
    if (device_exists(st, type, id) < 0 || api->current_work_stream((DLDeviceType)type, id, &theirs) != 0)
        return -1;
    PyObject *cur = pygpu_current_stream(st);
    if (!cur)
        return -1;
    pygpu_stream_t ours = pygpu_current_stream_on(cur, id);
    Py_DECREF(cur);
    return pygpu_stream_order(st, id, (pygpu_stream_t)theirs, ours);
}

PyObject *pygpu_exchange_import(pygpu_state *st, PyObject *x, const void *table, int target, int copy, int copy_host,
                                int *fallback)
{
    const DLPackExchangeAPI *api = table;
    DLManagedTensorVersioned *m = NULL;
    *fallback = 0;
    if (api->managed_tensor_from_py_object_no_sync(x, &m) != 0 || !m) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_SystemError, "%.100s's DLPack exchange API failed without saying why",
                         Py_TYPE(x)->tp_name);
        return NULL;
    }
    if (m->version.major == PYGPU_DLPACK_MAJOR) {   /* (else the layout is unknown: adopt refuses it) */
        long type = (int)m->dl_tensor.device.device_type;
        int reach = pygpu_dl_reach(type);
        if (!reach) {           /* the producer may copy it to the host through __dlpack__ */
            pygpu_dl_release(m);
            *fallback = 1;
            return NULL;
        }
        if ((reach & 2) && copy_host && copy < 0)
            copy = 1;
        if (reach == 1 && !PYGPU_DL_HOST_BACKEND &&
            order_after_producer(st, api, type, m->dl_tensor.device.device_id) < 0) {
            pygpu_dl_release(m);
            return NULL;
        }
    }
    return pygpu_dl_adopt(st, m, copy, target);
}

int pygpu_exchange_init(pygpu_state *st)
{
    xstate = st;
    PyObject *cap = PyCapsule_New(&exchange_api, PYGPU_DLPACK_EXCHANGE_CAPSULE, NULL);
    if (!cap)
        return -1;
    int r = PyDict_SetItem(st->Array->tp_dict, st->names.exchange_attr, cap);
    Py_DECREF(cap);
    if (r < 0)
        return -1;
    PyType_Modified(st->Array);
    return 0;
}
