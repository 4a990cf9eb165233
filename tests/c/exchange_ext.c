/*
 * exchange_ext.c -- a C consumer and producer of the DLPack 1.3 C exchange
 * API, built by tests/test_exchange.py as the module `exchange_ext`.
 *
 * Consumer: functions that take any object whose type carries
 * __dlpack_c_exchange_api__ (GPUArray, torch.Tensor) and use its table the
 * way a kernel library would, from C.
 *
 * Producer: fake_api(mode) gives a table capsule for a Python class to
 * carry; its functions export the NumPy array in the object's `arr`
 * attribute as a kDLCPU tensor, with what the object's other attributes
 * ask for (byte_offset, readonly, device, dtype), and each mode breaks the
 * table or the tensor in one way.  Counters say how many tensors were made
 * and how many deleters ran.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pygpu/pygpu_dlpack.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API_NAME PYGPU_DLPACK_EXCHANGE_CAPSULE

/* ---- consumer ------------------------------------------------------------- */

/* The table of type(obj); NULL with an exception. */
static const DLPackExchangeAPI *table_of(PyObject *obj)
{
    PyObject *tp = PyType_Check(obj) ? obj : (PyObject *)Py_TYPE(obj);
    PyObject *cap = PyObject_GetAttrString(tp, PYGPU_DLPACK_EXCHANGE_ATTR);
    if (!cap)
        return NULL;
    const DLPackExchangeAPI *api = PyCapsule_GetPointer(cap, API_NAME);
    Py_DECREF(cap);
    return api;
}

static PyObject *ints(const int64_t *v, int n)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(v ? v[i] : -1));
    return t;
}

static PyObject *describe(const DLTensor *t)
{
    return Py_BuildValue("{s:N,s:N,s:N,s:(iii),s:(ii),s:K}", "data", PyLong_FromVoidPtr(t->data), "shape",
                         ints(t->shape, t->ndim), "strides", ints(t->strides, t->ndim), "dtype", t->dtype.code,
                         t->dtype.bits, t->dtype.lanes, "device", (int)t->device.device_type, t->device.device_id,
                         "byte_offset", (unsigned long long)t->byte_offset);
}

/* consume(x, table_type=None): a managed tensor through the table (of
 * type(x), or of table_type), described, then released. */
static PyObject *consume(PyObject *self, PyObject *args)
{
    PyObject *x, *tt = NULL;
    if (!PyArg_ParseTuple(args, "O|O", &x, &tt))
        return NULL;
    const DLPackExchangeAPI *api = table_of(tt ? tt : x);
    DLManagedTensorVersioned *m = NULL;
    if (!api || api->managed_tensor_from_py_object_no_sync(x, &m) != 0)
        return NULL;
    PyObject *d = describe(&m->dl_tensor);
    if (d && (PyDict_SetItemString(d, "flags", PyLong_FromUnsignedLongLong(m->flags)) < 0 ||
              PyDict_SetItemString(d, "version", Py_BuildValue("(II)", m->version.major, m->version.minor)) < 0))
        Py_CLEAR(d);
    m->deleter(m);
    return d;
}

/* view(x): the DLTensor view, described. */
static PyObject *view(PyObject *self, PyObject *x)
{
    const DLPackExchangeAPI *api = table_of(x);
    DLTensor t;
    if (!api || api->dltensor_from_py_object_no_sync(x, &t) != 0)
        return NULL;
    return describe(&t);
}

/* roundtrip(x, target_type=None): x's managed tensor made into an object
 * by target_type's table (default: x's own). */
static PyObject *roundtrip(PyObject *self, PyObject *args)
{
    PyObject *x, *target = Py_None;
    void *out = NULL;
    if (!PyArg_ParseTuple(args, "O|O", &x, &target))
        return NULL;
    const DLPackExchangeAPI *from = table_of(x), *to = from;
    DLManagedTensorVersioned *m = NULL;
    if (from && target != Py_None)
        to = table_of(target);
    if (!from || !to || from->managed_tensor_from_py_object_no_sync(x, &m) != 0)
        return NULL;
    if (to->managed_tensor_to_py_object_no_sync(m, &out) != 0)
        return NULL;
    return out;
}

/* current_stream(x, device_type, device_id) */
static PyObject *current_stream(PyObject *self, PyObject *args)
{
    PyObject *x;
    int type, id;
    void *s = (void *)1;
    if (!PyArg_ParseTuple(args, "Oii", &x, &type, &id))
        return NULL;
    const DLPackExchangeAPI *api = table_of(x);
    if (!api || api->current_work_stream((DLDeviceType)type, id, &s) != 0)
        return NULL;
    return PyLong_FromVoidPtr(s);
}

typedef struct {
    char kind[64], message[512];
    int calls;
} error_box;

static void set_error(void *ctx, const char *kind, const char *message)
{
    error_box *b = ctx;
    b->calls++;
    snprintf(b->kind, sizeof b->kind, "%s", kind);
    snprintf(b->message, sizeof b->message, "%s", message);
}

/* allocate(x, shape, code, bits, device_type, device_id, nogil): a new
 * array through x's table's allocator (called without the GIL if nogil),
 * made into an object by its to_py function. */
static PyObject *allocate(PyObject *self, PyObject *args)
{
    PyObject *x, *shape_obj;
    int code, bits, type, id, nogil, rc;
    int64_t shape[8];
    if (!PyArg_ParseTuple(args, "OO!iiiip", &x, &PyTuple_Type, &shape_obj, &code, &bits, &type, &id, &nogil))
        return NULL;
    const DLPackExchangeAPI *api = table_of(x);
    if (!api)
        return NULL;
    DLTensor proto = {0};
    proto.ndim = (int32_t)PyTuple_GET_SIZE(shape_obj);
    for (int i = 0; i < proto.ndim && i < 8; i++)
        shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape_obj, i));
    proto.shape = shape;
    proto.dtype.code = (uint8_t)code;
    proto.dtype.bits = (uint8_t)bits;
    proto.dtype.lanes = 1;
    proto.device.device_type = (DLDeviceType)type;
    proto.device.device_id = id;
    DLManagedTensorVersioned *m = NULL;
    error_box box = {{0}, {0}, 0};
    if (nogil) {
        Py_BEGIN_ALLOW_THREADS
        rc = api->managed_tensor_allocator(&proto, &m, &box, set_error);
        Py_END_ALLOW_THREADS
    } else {
        rc = api->managed_tensor_allocator(&proto, &m, &box, set_error);
    }
    if (rc != 0 || !m) {
        if (box.calls != 1)
            return PyErr_Format(PyExc_AssertionError, "SetError called %d times", box.calls);
        return PyErr_Format(PyExc_RuntimeError, "%s: %s", box.kind, box.message);
    }
    void *out = NULL;
    if (api->managed_tensor_to_py_object_no_sync(m, &out) != 0)
        return NULL;
    return out;
}

/* release_nogil(x): a managed tensor whose deleter runs without the GIL. */
static PyObject *release_nogil(PyObject *self, PyObject *x)
{
    const DLPackExchangeAPI *api = table_of(x);
    DLManagedTensorVersioned *m = NULL;
    if (!api || api->managed_tensor_from_py_object_no_sync(x, &m) != 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    m->deleter(m);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* hold(x): a managed tensor that is never given back. */
static PyObject *hold(PyObject *self, PyObject *x)
{
    const DLPackExchangeAPI *api = table_of(x);
    DLManagedTensorVersioned *m = NULL;
    if (!api || api->managed_tensor_from_py_object_no_sync(x, &m) != 0)
        return NULL;
    Py_RETURN_NONE;     /* (m is dropped on purpose) */
}

/* exchange(x, n): n managed tensors out and released; ns per exchange. */
static PyObject *exchange(PyObject *self, PyObject *args)
{
    PyObject *x;
    Py_ssize_t n;
    struct timespec t0, t1;
    if (!PyArg_ParseTuple(args, "On", &x, &n))
        return NULL;
    const DLPackExchangeAPI *api = table_of(x);
    if (!api)
        return NULL;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (Py_ssize_t i = 0; i < n; i++) {
        DLManagedTensorVersioned *m = NULL;
        if (api->managed_tensor_from_py_object_no_sync(x, &m) != 0)
            return NULL;
        m->deleter(m);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return PyFloat_FromDouble(((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
                              (double)(n > 0 ? n : 1));
}

/* ---- producer: the fake tables ---------------------------------------------- */

static long made, deleted, stream_calls;

typedef struct {
    DLManagedTensorVersioned m;
    int64_t shape[8], strides[8];
} fake_tensor;

static void fake_deleter(DLManagedTensorVersioned *self)
{
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF((PyObject *)self->manager_ctx);
    deleted++;
    free(self);
    PyGILState_Release(g);
}

/* An int attribute of obj, or `dflt` where it has none. */
static long long attr_int(PyObject *obj, const char *name, long long dflt)
{
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (!v) {
        PyErr_Clear();
        return dflt;
    }
    long long r = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return r;
}

/* obj.arr (a NumPy array, through its __array_interface__) as a tensor. */
static int fake_from_py(void *py, DLManagedTensorVersioned **out)
{
    PyObject *obj = py, *arr = PyObject_GetAttrString(obj, "arr"), *iface = NULL;
    if (!arr)
        return -1;
    iface = PyObject_GetAttrString(arr, "__array_interface__");
    if (!iface) {
        Py_DECREF(arr);
        return -1;
    }
    PyObject *data = PyDict_GetItemString(iface, "data"), *shape = PyDict_GetItemString(iface, "shape");
    PyObject *typestr = PyDict_GetItemString(iface, "typestr");
    const char *ts = typestr ? PyUnicode_AsUTF8(typestr) : NULL;
    fake_tensor *f = calloc(1, sizeof *f);
    if (!f || !data || !shape || !ts || PyTuple_GET_SIZE(shape) > 8) {
        free(f);
        Py_DECREF(iface);
        Py_DECREF(arr);
        PyErr_SetString(PyExc_RuntimeError, "fake producer: a C-contiguous NumPy array in .arr, please");
        return -1;
    }
    int nd = (int)PyTuple_GET_SIZE(shape), size = atoi(ts + 2);
    int64_t skip = attr_int(obj, "skip", 0);      /* elements before the view: byte_offset */
    for (int i = nd - 1, dense = 1; i >= 0; i--) {
        f->shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        f->strides[i] = dense;
        dense *= (int)f->shape[i];
    }
    if (nd > 0)
        f->shape[0] -= skip;
    DLTensor *t = &f->m.dl_tensor;
    t->data = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    t->byte_offset = (uint64_t)(skip * size);
    t->ndim = nd;
    t->shape = f->shape;
    t->strides = f->strides;
    t->dtype.code = (uint8_t)attr_int(obj, "code", ts[1] == 'f' ? kDLFloat : ts[1] == 'i' ? kDLInt : kDLUInt);
    t->dtype.bits = (uint8_t)(size * 8);
    t->dtype.lanes = 1;
    t->device.device_type = (DLDeviceType)attr_int(obj, "device_type", kDLCPU);
    t->device.device_id = 0;
    f->m.version.major = (uint32_t)attr_int(obj, "tensor_major", 1);
    f->m.version.minor = 3;
    f->m.flags = attr_int(obj, "readonly", 0) ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    f->m.manager_ctx = arr;     /* (the reference taken above) */
    f->m.deleter = fake_deleter;
    Py_DECREF(iface);
    made++;
    *out = &f->m;
    return 0;
}

static int fake_fails(void *py, DLManagedTensorVersioned **out)
{
    PyErr_SetString(PyExc_RuntimeError, "the producer failed on purpose");
    return -1;
}

static int fake_fails_silently(void *py, DLManagedTensorVersioned **out) { return -1; }

static int fake_stream(DLDeviceType type, int32_t id, void **out)
{
    stream_calls++;
    *out = NULL;
    return 0;
}

static int fake_stream_fails(DLDeviceType type, int32_t id, void **out)
{
    PyErr_SetString(PyExc_RuntimeError, "no stream today");
    return -1;
}

static int fake_to_py(DLManagedTensorVersioned *m, void **out)
{
    m->deleter(m);
    PyErr_SetString(PyExc_NotImplementedError, "fake producer: to_py");
    return -1;
}

static int fake_alloc(DLTensor *p, DLManagedTensorVersioned **out, void *ctx,
                      void (*SetError)(void *, const char *, const char *))
{
    SetError(ctx, "NotImplementedError", "fake producer: allocator");
    return -1;
}

#define FAKE(maj, min, from, stream) \
    {{{maj, min}, NULL}, fake_alloc, from, fake_to_py, NULL, stream}

static DLPackExchangeAPI fake_ok = FAKE(1, 3, fake_from_py, fake_stream);
static DLPackExchangeAPI fake_newer = FAKE(2, 0, fake_from_py, fake_stream);
static DLPackExchangeAPI fake_newer_chain = FAKE(2, 0, fake_from_py, fake_stream);
static DLPackExchangeAPI fake_older = FAKE(0, 9, fake_from_py, fake_stream);
static DLPackExchangeAPI fake_null = FAKE(1, 3, NULL, fake_stream);
static DLPackExchangeAPI fake_null_stream = FAKE(1, 3, fake_from_py, NULL);
static DLPackExchangeAPI fake_failing = FAKE(1, 3, fake_fails, fake_stream);
static DLPackExchangeAPI fake_silent = FAKE(1, 3, fake_fails_silently, fake_stream);
static DLPackExchangeAPI fake_bad_stream = FAKE(1, 3, fake_from_py, fake_stream_fails);

static PyObject *fake_api(PyObject *self, PyObject *arg)
{
    static const struct { const char *mode; DLPackExchangeAPI *api; const char *name; } modes[] = {
        {"ok", &fake_ok, API_NAME}, {"wrong_name", &fake_ok, "dlpack_exchange_api_v0"},
        {"newer_major", &fake_newer, API_NAME}, {"newer_major_chain", &fake_newer_chain, API_NAME},
        {"older_major", &fake_older, API_NAME}, {"null_function", &fake_null, API_NAME},
        {"null_stream", &fake_null_stream, API_NAME}, {"fails", &fake_failing, API_NAME},
        {"fails_silently", &fake_silent, API_NAME}, {"stream_fails", &fake_bad_stream, API_NAME},
    };
    const char *mode = PyUnicode_AsUTF8(arg);
    if (!mode)
        return NULL;
    fake_newer_chain.header.prev_api = &fake_ok.header;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(mode, modes[i].mode))
            return PyCapsule_New(modes[i].api, modes[i].name, NULL);
    return PyErr_Format(PyExc_ValueError, "no mode %s", mode);
}

static PyObject *counters(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("{s:l,s:l,s:l}", "made", made, "deleted", deleted, "stream_calls", stream_calls);
}

static PyMethodDef methods[] = {
    {"consume", consume, METH_VARARGS, NULL},
    {"view", view, METH_O, NULL},
    {"roundtrip", roundtrip, METH_VARARGS, NULL},
    {"current_stream", current_stream, METH_VARARGS, NULL},
    {"allocate", allocate, METH_VARARGS, NULL},
    {"release_nogil", release_nogil, METH_O, NULL},
    {"hold", hold, METH_O, NULL},
    {"exchange", exchange, METH_VARARGS, NULL},
    {"fake_api", fake_api, METH_O, NULL},
    {"counters", counters, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, .m_name = "exchange_ext", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit_exchange_ext(void) { return PyModule_Create(&def); }
