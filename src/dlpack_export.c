/*
 * dlpack_export.c -- DLPack going out: GPUArray.__dlpack__ and
 * __dlpack_device__ (Array API standard, 2023.12), and the managed tensors
 * that the C exchange API hands out (dlpack_exchange.c).
 *
 * A capsule holds one malloc'd block (the managed tensor, then the shape
 * and strides it points to) whose manager_ctx is a strong reference to the
 * array (or to the copy made for the consumer).  The deleter drops that
 * reference: with the GIL taken if the caller has not got it, and not at
 * all once the interpreter is finalizing or gone.  Stream rules: the
 * consumer names its stream; the producer makes it wait, through an event,
 * for the stream of the array's last work (cai.c keeps that record).
 */
#include "pygpu.h"
#include "dlpack_export.h"
#include "array_host.h"
#include "dlpack.h"
#include "dlpack_shared.h"
#include "errors.h"
#include "memory.h"
#include "state.h"
#include "stream.h"

#include <stdlib.h>
#include <string.h>

#define OWN_TYPE PYGPU_DL_OWN_TYPE
#define HOST_BACKEND PYGPU_DL_HOST_BACKEND

static DLDevice own_device(PyGPUArray *a)
{
    DLDevice d = {OWN_TYPE, HOST_BACKEND ? 0 : a->device};
    return d;
}

/* ---- export: the capsule ------------------------------------------------------ */

typedef struct {
    union {
        DLManagedTensor legacy;
        DLManagedTensorVersioned versioned;
    } m;
    int64_t dims[];             /* the shape, then the strides */
} export_block;

/* Drop the reference an export holds, from any thread, at any time. */
static void drop_context(PyObject *ctx)
{
    if (!ctx || !Py_IsInitialized())
        return;                 /* after finalization the object went with the interpreter */
    int held = PyGILState_Check();
    if (!held && PYGPU_FINALIZING())
        return;                 /* taking the GIL now would end this thread: keep the reference */
    PyGILState_STATE g = PyGILState_UNLOCKED;
    if (!held)
        g = PyGILState_Ensure();
    PyObject *t, *v, *tb;       /* a deleter may run while an exception is being raised */
    PyErr_Fetch(&t, &v, &tb);
    Py_DECREF(ctx);
    PyErr_Restore(t, v, tb);
    if (!held)
        PyGILState_Release(g);
}

static void legacy_deleter(DLManagedTensor *self)
{
    PyObject *ctx = self->manager_ctx;
    free(self);
    drop_context(ctx);
}

static void versioned_deleter(DLManagedTensorVersioned *self)
{
    PyObject *ctx = self->manager_ctx;
    free(self);
    drop_context(ctx);
}

/* A capsule nobody consumed frees its tensor when it dies. */
static void export_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, PYGPU_DLPACK_CAPSULE)) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, PYGPU_DLPACK_CAPSULE);
        m->deleter(m);
    } else if (PyCapsule_IsValid(cap, PYGPU_DLPACK_VERSIONED_CAPSULE)) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, PYGPU_DLPACK_VERSIONED_CAPSULE);
        m->deleter(m);
    }
}

/* The DLPack dtype of a GPUArray dtype; 0, or -1 with BufferError. */
static int dl_dtype(PyArray_Descr *d, DLDataType *out)
{
    int code;
    switch (d->kind) {
    case 'b': code = kDLBool; break;
    case 'i': code = kDLInt; break;
    case 'u': code = kDLUInt; break;
    case 'f': code = kDLFloat; break;
    case 'c': code = kDLComplex; break;
    default:
        PyErr_Format(PyExc_BufferError, "dtype %R has no DLPack equivalent", (PyObject *)d);
        return -1;
    }
    out->code = (uint8_t)code;
    out->bits = (uint8_t)(PyDataType_ELSIZE(d) * 8);
    out->lanes = 1;
    return 0;
}

/* DLPack's strides (elements) of a layout in bytes, into out[0..nd): a
 * short axis gets the dense value (any stride will do there); 0, or -1
 * with BufferError for a stride that is not a multiple of the itemsize. */
static int element_strides(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides, ptrdiff_t itemsize,
                           int64_t *out)
{
    ptrdiff_t dense = 1;
    for (int i = nd - 1; i >= 0; i--) {
        if (shape[i] > 1 && strides[i] % itemsize != 0) {
            PyErr_Format(PyExc_BufferError, "stride %zd on axis %d is not a multiple of the itemsize (%zd): "
                         "DLPack counts strides in elements", strides[i], i, itemsize);
            return -1;
        }
        out[i] = shape[i] > 1 ? strides[i] / itemsize : dense;
        dense *= shape[i] > 1 ? shape[i] : 1;
    }
    return 0;
}

/* A managed tensor (legacy or versioned) for the elements at `data`
 * (layout in bytes), kept alive by a new reference to `owner`, in one
 * malloc'd block; NULL with an exception set. */
static export_block *export_new(PyObject *owner, char *data, int nd, const ptrdiff_t *shape,
                                const ptrdiff_t *strides, PyArray_Descr *descr, DLDevice dev, int versioned,
                                uint32_t minor, uint64_t flags)
{
    DLDataType dt;
    if (dl_dtype(descr, &dt) < 0)
        return NULL;
    export_block *b = malloc(sizeof *b + 2 * (size_t)nd * sizeof(int64_t));
    if (!b)
        return (export_block *)PyErr_NoMemory();
    int64_t *sh = b->dims, *sd = b->dims + nd;
    if (element_strides(nd, shape, strides, (ptrdiff_t)PyDataType_ELSIZE(descr), sd) < 0) {
        free(b);
        return NULL;
    }
    if (nd > 0)
        memcpy(sh, shape, (size_t)nd * sizeof(int64_t));
    DLTensor *t = versioned ? &b->m.versioned.dl_tensor : &b->m.legacy.dl_tensor;
    t->data = data;
    t->device = dev;
    t->ndim = nd;
    t->dtype = dt;
    t->shape = sh;
    t->strides = sd;
    t->byte_offset = 0;
    if (versioned) {
        b->m.versioned.version.major = PYGPU_DLPACK_MAJOR;
        b->m.versioned.version.minor = minor;
        b->m.versioned.manager_ctx = Py_NewRef(owner);
        b->m.versioned.deleter = versioned_deleter;
        b->m.versioned.flags = flags;
    } else {
        b->m.legacy.manager_ctx = Py_NewRef(owner);
        b->m.legacy.deleter = legacy_deleter;
    }
    return b;
}

/* A capsule for the elements at `data` (layout in bytes), kept alive by a
 * new reference to `owner`; new reference. */
static PyObject *make_capsule(PyObject *owner, char *data, int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                              PyArray_Descr *descr, DLDevice dev, int versioned, uint32_t minor, uint64_t flags)
{
    export_block *b = export_new(owner, data, nd, shape, strides, descr, dev, versioned, minor, flags);
    if (!b)
        return NULL;
    PyObject *cap = PyCapsule_New(b, versioned ? PYGPU_DLPACK_VERSIONED_CAPSULE : PYGPU_DLPACK_CAPSULE,
                                  export_destructor);
    if (!cap) {
        if (versioned)
            versioned_deleter(&b->m.versioned);
        else
            legacy_deleter(&b->m.legacy);
    }
    return cap;
}

DLManagedTensorVersioned *pygpu_dl_export(PyGPUArray *a)
{
    uint64_t flags = (a->flags & PYGPU_WRITEABLE) ? 0 : DLPACK_FLAG_BITMASK_READ_ONLY;
    export_block *b = export_new((PyObject *)a, a->data, a->nd, GA_SHAPE(a), GA_STRIDES(a), a->descr,
                                 own_device(a), 1, PYGPU_DLPACK_MINOR, flags);
    return b ? &b->m.versioned : NULL;
}

int pygpu_dl_view(PyGPUArray *a, DLTensor *out)
{
    if (dl_dtype(a->descr, &out->dtype) < 0 ||
        element_strides(a->nd, GA_SHAPE(a), GA_STRIDES(a), GA_ITEMSIZE(a), GA_DLSTRIDES(a)) < 0)
        return -1;
    out->data = a->data;
    out->device = own_device(a);
    out->ndim = a->nd;
    out->shape = (int64_t *)GA_SHAPE(a);
    out->strides = (int64_t *)GA_DLSTRIDES(a);
    out->byte_offset = 0;
    return 0;
}

/* ---- export: __dlpack__ and __dlpack_device__ --------------------------------- */

/* max_version: *versioned 1 for a 1.x capsule, with the minor version to
 * write (the lower of ours and the consumer's). */
static int version_arg(PyObject *v, int *versioned, uint32_t *minor)
{
    long major, mi;
    *versioned = 0;
    *minor = 0;
    if (!v || v == Py_None)
        return 0;
    if (pygpu_dl_int_pair(v, "__dlpack__(): max_version", &major, &mi) < 0)
        return -1;
    if (major < 1)
        return 0;
    *versioned = 1;
    *minor = major > 1 || mi > PYGPU_DLPACK_MINOR ? PYGPU_DLPACK_MINOR : mi < 0 ? 0 : (uint32_t)mi;
    return 0;
}

/* The consumer's stream= for this backend: *sync 0 when no ordering is
 * wanted (-1, or a CPU array), else the handle to make wait in *s. */
static int consumer_stream_arg(PyObject *v, pygpu_stream_t *s, int *sync)
{
    long long h = 0;
    int overflow = 0;
    *s = PYGPU_STREAM_NULL;
    *sync = 0;
    if (v && v != Py_None) {
        if (!PyLong_Check(v) || PyBool_Check(v)) {
            PyErr_Format(PyExc_TypeError, "__dlpack__(): stream must be an int or None, not %.100s",
                         Py_TYPE(v)->tp_name);
            return -1;
        }
        h = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (h == -1 && PyErr_Occurred())
            return -1;
        if (h == -1 && !overflow)
            return 0;                       /* the consumer asks for no synchronisation */
    }
#if HOST_BACKEND
    if (v && v != Py_None) {
        PyErr_Format(PyExc_ValueError, "__dlpack__(): a kDLCPU array takes stream=None (or -1), not %R", v);
        return -1;
    }
    return 0;
#else
    *sync = 1;
    if (!v || v == Py_None)
        return 0;                           /* the legacy default stream */
#  if defined(PYGPU_BACKEND_CUDA)
    if (!overflow && (h == 1 || h == 2)) {
        *s = h == 1 ? PYGPU_STREAM_NULL : PYGPU_STREAM_PER_THREAD;
        return 0;
    }
    if (overflow < 0 || (!overflow && h <= 0)) {
        PyErr_Format(PyExc_ValueError, "__dlpack__(): stream=%R is not allowed for CUDA: pass None or 1 (the "
                     "legacy default stream), 2 (the per-thread default stream), a stream handle, or -1 (no "
                     "synchronisation)", v);
        return -1;
    }
#  else
    if (!overflow && h == 0)
        return 0;
    if (overflow < 0 || (!overflow && h < 3)) {
        PyErr_Format(PyExc_ValueError, "__dlpack__(): stream=%R is not allowed for ROCm: pass None or 0 (the "
                     "default stream), a stream handle, or -1 (no synchronisation)", v);
        return -1;
    }
#  endif
    if ((*s = PyLong_AsVoidPtr(v)) == NULL && PyErr_Occurred())
        return -1;
    *sync = 1;
    return 0;
#endif
}

/* dl_device=(kDLCPU, 0) from a GPU array: a host copy flagged as copied. */
static PyObject *export_host_copy(PyGPUArray *a, int copy, int versioned, uint32_t minor)
{
    if (copy == 0)
        return PyErr_Format(PyExc_BufferError, "__dlpack__(copy=False): exporting a %s array to kDLCPU needs a copy",
                            pygpu_rt_vendor());
    PyObject *stream = pygpu_dl_last_stream_arg(a), *h;
    h = stream ? pygpu_array_get(a, NULL, stream, 0, 0) : NULL;   /* (done when it returns) */
    Py_XDECREF(stream);
    if (!h)
        return NULL;
    PyArrayObject *n = (PyArrayObject *)h;
    DLDevice cpu = {kDLCPU, 0};
    PyObject *cap = make_capsule(h, PyArray_BYTES(n), PyArray_NDIM(n), PyArray_SHAPE(n), PyArray_STRIDES(n),
                                 PyArray_DESCR(n), cpu, versioned, minor, DLPACK_FLAG_BITMASK_IS_COPIED);
    Py_DECREF(h);
    return cap;
}

PyObject *pygpu_array_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"stream", "max_version", "dl_device", "copy"};
    PyObject *v[4] = {NULL, NULL, NULL, NULL}, *tmp = NULL, *cap = NULL;
    PyGPUArray *a = (PyGPUArray *)self;
    pygpu_state *st = pygpu_state_of(self);
    DLDevice own = own_device(a);
    long want_type = own.device_type, want_id = own.device_id;
    int versioned, copy, sync;
    uint32_t minor;
    pygpu_stream_t consumer;
    if (!st || pygpu_memory_usable(a->mem) < 0 || pygpu_fork_check(st) < 0 ||
        pygpu_dl_parse_args("__dlpack__", args, nargs, kwnames, names, 4, 0, 0, v) < 0 ||
        version_arg(v[1], &versioned, &minor) < 0 || (copy = pygpu_dl_copy_arg(v[3], "__dlpack__")) == -2 ||
        (v[2] && v[2] != Py_None && pygpu_dl_int_pair(v[2], "__dlpack__(): dl_device", &want_type, &want_id) < 0))
        return NULL;
    if (want_type != own.device_type || want_id != own.device_id) {
        if (want_type == kDLCPU && want_id == 0)
            return export_host_copy(a, copy, versioned, minor);
        return PyErr_Format(PyExc_BufferError, "__dlpack__(): cannot export this array (%s device %d) to "
                            "dl_device=(%ld, %ld): only its own device and (kDLCPU, 0) are served",
                            pygpu_dl_device_name(own.device_type), (int)own.device_id, want_type, want_id);
    }
    if (consumer_stream_arg(v[0], &consumer, &sync) < 0)
        return NULL;
    if (copy == 1) {
        if (!(tmp = pygpu_dl_device_copy(st, a)))
            return NULL;
        a = (PyGPUArray *)tmp;
    } else if (!versioned && !(a->flags & PYGPU_WRITEABLE)) {
        return PyErr_Format(PyExc_BufferError, "__dlpack__(): the array is read-only, which a legacy (unversioned) "
                            "DLPack capsule cannot say: ask with max_version=(1, 0) or later");
    }
    if (!sync || pygpu_stream_order(st, a->device, pygpu_array_root(a)->last_stream, consumer) == 0) {
        uint64_t flags = ((a->flags & PYGPU_WRITEABLE) ? 0 : DLPACK_FLAG_BITMASK_READ_ONLY) |
                         (tmp ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
        cap = make_capsule((PyObject *)a, a->data, a->nd, GA_SHAPE(a), GA_STRIDES(a), a->descr, own, versioned,
                           minor, flags);
    }
    Py_XDECREF(tmp);
    return cap;
}

PyObject *pygpu_array_dlpack_device(PyObject *self, PyObject *unused)
{
    (void)unused;
    DLDevice d = own_device((PyGPUArray *)self);
    PyObject *t = PyTuple_New(2), *a = PyLong_FromLong(d.device_type), *b = PyLong_FromLong(d.device_id);
    if (!t || !a || !b) {
        Py_XDECREF(t);
        Py_XDECREF(a);
        Py_XDECREF(b);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, a);
    PyTuple_SET_ITEM(t, 1, b);
    return t;
}
