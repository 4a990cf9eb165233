/*
 * dlpack.c -- DLPack both ways, and the front doors for other libraries'
 * arrays: GPUArray.__dlpack__ and __dlpack_device__ (Array API standard,
 * 2023.12), pygpu.from_dlpack(x, *, device=None, copy=None) and
 * pygpu.asarray(obj, dtype=None).
 *
 * Export: a capsule holds one malloc'd block (the managed tensor, then the
 * shape and strides it points to) whose manager_ctx is a strong reference
 * to the array (or to the copy made for the consumer).  The deleter drops
 * that reference: with the GIL taken if the caller has not got it, and not
 * at all once the interpreter is finalizing or gone.  Stream rules: the
 * consumer names its stream; the producer makes it wait, through an event,
 * for the stream of the array's last work (cai.c keeps that record).
 *
 * Import: the capsule is checked before it is taken, so that a refused
 * capsule still frees itself; once taken (renamed "used_..."), an owner
 * object calls the producer's deleter when the last array viewing the
 * memory dies.  Host data on a GPU backend is copied to the device.
 */
#include "pygpu.h"
#include "dlpack.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(int64_t) == sizeof(ptrdiff_t), "DLPack's int64 dims and ptrdiff_t differ");

#define OWN_TYPE PYGPU_DL_OWN_TYPE
#define HOST_BACKEND PYGPU_DL_HOST_BACKEND

#if PY_VERSION_HEX >= 0x030D0000
#  define FINALIZING() Py_IsFinalizing()
#else
#  define FINALIZING() _Py_IsFinalizing()
#endif

PyObject *pygpu_interop_get(pygpu_state *st, int index) { return PyTuple_GET_ITEM(st->interop, index); }
#define CACHED(st, ix) pygpu_interop_get((st), PYGPU_IX_##ix)

/* ---- small helpers ----------------------------------------------------------- */

static int is_host_type(long t) { return t == kDLCPU || t == kDLCUDAHost || t == kDLROCMHost; }

/* 1 if this backend's arrays can view memory of device type `t` in place. */
static int reachable(long t)
{
#if defined(PYGPU_BACKEND_CUDA)
    return t == kDLCUDA || t == kDLCUDAManaged;
#elif defined(PYGPU_BACKEND_HIP)
    return t == kDLROCM;
#else
    return is_host_type(t);
#endif
}

int pygpu_dl_reach(long t) { return (reachable(t) ? 1 : 0) | (is_host_type(t) ? 2 : 0); }

static const char *device_name(long t)
{
    static const char *const names[] = {
        [kDLCPU] = "kDLCPU", [kDLCUDA] = "kDLCUDA", [kDLCUDAHost] = "kDLCUDAHost",
        [kDLOpenCL] = "kDLOpenCL", [kDLVulkan] = "kDLVulkan", [kDLMetal] = "kDLMetal", [kDLVPI] = "kDLVPI",
        [kDLROCM] = "kDLROCM", [kDLROCMHost] = "kDLROCMHost", [kDLExtDev] = "kDLExtDev",
        [kDLCUDAManaged] = "kDLCUDAManaged", [kDLOneAPI] = "kDLOneAPI", [kDLWebGPU] = "kDLWebGPU",
        [kDLHexagon] = "kDLHexagon", [kDLMAIA] = "kDLMAIA",
    };
    return t >= 0 && t < (long)(sizeof names / sizeof names[0]) && names[t] ? names[t] : "an unknown device type";
}

static DLDevice own_device(PyGPUArray *a)
{
    DLDevice d = {OWN_TYPE, HOST_BACKEND ? 0 : a->device};
    return d;
}

/* The current stream's handle, and the Stream object (new reference). */
static PyObject *current(pygpu_state *st, pygpu_stream_t *h)
{
    PyObject *s = pygpu_current_stream(st);
    if (s)
        *h = ((PyGPUStream *)s)->handle;
    return s;
}

/* A stream argument naming the stream of `a`'s last work; new reference. */
static PyObject *last_stream_arg(PyGPUArray *a)
{
    PyGPUArray *r = pygpu_array_root(a);
    return r->last_stream_ref ? Py_NewRef(r->last_stream_ref) : PyLong_FromVoidPtr(r->last_stream);
}

/* Replace the exception being handled by type(message), keeping it as the
 * new one's __cause__; fmt as PyUnicode_FromFormat's. */
static void raise_from(PyObject *type, const char *fmt, ...)
{
    PyObject *cause = NULL, *t, *tb, *msg, *exc;
    va_list va;
    PyErr_Fetch(&t, &cause, &tb);
    PyErr_NormalizeException(&t, &cause, &tb);
    if (cause && tb)
        PyException_SetTraceback(cause, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    va_start(va, fmt);
    msg = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    exc = msg ? PyObject_CallOneArg(type, msg) : NULL;
    Py_XDECREF(msg);
    if (exc) {
        if (cause) {
            PyException_SetCause(exc, Py_NewRef(cause));
            PyException_SetContext(exc, Py_NewRef(cause));
        }
        PyErr_SetObject(type, exc);
        Py_DECREF(exc);
    }
    Py_XDECREF(cause);
}

/* Vectorcall arguments into out[0..n) (NULL where not given): at most
 * `maxpos` positionally, names[0..posonly) only positionally. */
static int parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      const char *const *names, int n, int maxpos, int posonly, PyObject **out)
{
    if (nargs > maxpos) {
        if (maxpos == 0)
            PyErr_Format(PyExc_TypeError, "%s() takes no positional arguments (%zd given)", fname, nargs);
        else
            PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional argument%s (%zd given)", fname,
                         maxpos, maxpos == 1 ? "" : "s", nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int j = posonly;
        while (j < n && PyUnicode_CompareWithASCIIString(key, names[j]) != 0)
            j++;
        if (j == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fname, key);
            return -1;
        }
        if (out[j]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname, names[j]);
            return -1;
        }
        out[j] = args[nargs + k];
    }
    return 0;
}

/* copy=: None -> -1, False -> 0, True -> 1; -2 with TypeError. */
static int copy_arg(PyObject *v, const char *fname)
{
    if (!v || v == Py_None)
        return -1;
    if (v == Py_True || v == Py_False)
        return v == Py_True;
    PyErr_Format(PyExc_TypeError, "%s(): copy must be True, False or None, not %.100s", fname, Py_TYPE(v)->tp_name);
    return -2;
}

/* A tuple of two ints (max_version, dl_device); 0, or -1 with TypeError. */
static int int_pair(PyObject *v, const char *what, long *a, long *b)
{
    if (PyTuple_Check(v) && PyTuple_GET_SIZE(v) == 2 && PyIndex_Check(PyTuple_GET_ITEM(v, 0)) &&
        PyIndex_Check(PyTuple_GET_ITEM(v, 1))) {
        if ((*a = PyLong_AsLong(PyTuple_GET_ITEM(v, 0))) == -1 && PyErr_Occurred())
            goto range;
        if ((*b = PyLong_AsLong(PyTuple_GET_ITEM(v, 1))) == -1 && PyErr_Occurred())
            goto range;
        return 0;
    range:
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "%s: %R is out of range", what, v);
        }
        return -1;
    }
    PyErr_Format(PyExc_TypeError, "%s must be None or a tuple of two ints, not %R", what, v);
    return -1;
}

static void count_devices_error(long t, long id, int n)
{
    PyErr_Format(PyExc_BufferError, "the data is on %s device %ld, but the %s backend has %d device%s",
                 device_name(t), id, pygpu_rt_vendor(), n, n == 1 ? "" : "s");
}

/* 0 if GPU device `id` exists; else -1 with BufferError. */
static int check_gpu_id(pygpu_state *st, long t, long id)
{
    int n = pygpu_device_count(st);
    if (n < 0)
        return -1;
    if (id < 0 || id >= n) {
        count_devices_error(t, id, n);
        return -1;
    }
    return 0;
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
    if (!held && FINALIZING())
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
    if (int_pair(v, "__dlpack__(): max_version", &major, &mi) < 0)
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

/* A dense copy of `a` on its device, queued after its pending work; new
 * reference. */
static PyObject *device_copy(pygpu_state *st, PyGPUArray *a)
{
    PyObject *stream = last_stream_arg(a), *r = NULL;
    if (stream) {
        PyObject *buf[3] = {NULL, (PyObject *)a, stream};
        r = PyObject_VectorcallMethod(CACHED(st, COPY_ATTR), buf + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                      CACHED(st, KW_S));
        Py_DECREF(stream);
    }
    return r;
}

/* dl_device=(kDLCPU, 0) from a GPU array: a host copy flagged as copied. */
static PyObject *export_host_copy(PyGPUArray *a, int copy, int versioned, uint32_t minor)
{
    if (copy == 0)
        return PyErr_Format(PyExc_BufferError, "__dlpack__(copy=False): exporting a %s array to kDLCPU needs a copy",
                            pygpu_rt_vendor());
    PyObject *stream = last_stream_arg(a), *h;
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
        parse_args("__dlpack__", args, nargs, kwnames, names, 4, 0, 0, v) < 0 ||
        version_arg(v[1], &versioned, &minor) < 0 || (copy = copy_arg(v[3], "__dlpack__")) == -2 ||
        (v[2] && v[2] != Py_None && int_pair(v[2], "__dlpack__(): dl_device", &want_type, &want_id) < 0))
        return NULL;
    if (want_type != own.device_type || want_id != own.device_id) {
        if (want_type == kDLCPU && want_id == 0)
            return export_host_copy(a, copy, versioned, minor);
        return PyErr_Format(PyExc_BufferError, "__dlpack__(): cannot export this array (%s device %d) to "
                            "dl_device=(%ld, %ld): only its own device and (kDLCPU, 0) are served",
                            device_name(own.device_type), (int)own.device_id, want_type, want_id);
    }
    if (consumer_stream_arg(v[0], &consumer, &sync) < 0)
        return NULL;
    if (copy == 1) {
        if (!(tmp = device_copy(st, a)))
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

/* ---- import: taking a capsule ---------------------------------------------- */

typedef struct {
    int nd;
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];   /* strides in bytes */
    char *data;
    long device_type;
    int device_id;
    PyArray_Descr *descr;       /* new reference */
    int readonly, copied;
} dl_layout;

/* Check the tensor a capsule carries and read its layout (`copy`: the
 * from_dlpack argument, for data that would need one); 0, or -1 with an
 * exception set and nothing taken.  The device is checked here, the rest
 * by pygpu_dl_check (dlpack_check.c). */
static int read_tensor(pygpu_state *st, const DLTensor *t, uint64_t flags, int copy, dl_layout *l)
{
    long type = (int)t->device.device_type;     /* (an int-sized enum: may read as unsigned) */
    pygpu_dl_layout c;
    char why[256];
    l->descr = NULL;
    if (!reachable(type)) {
        if (!is_host_type(type))
            return PyErr_Format(PyExc_BufferError, "the DLPack data is on %s (device_type %ld) device %d, which "
                                "the %s backend cannot reach", device_name(type), type,
                                (int)t->device.device_id, pygpu_rt_vendor()),
                   -1;
        if (copy == 0)
            return PyErr_Format(PyExc_BufferError, "from_dlpack(copy=False): the data is in host memory (%s), "
                                "and a %s GPUArray needs a copy of it on the device", device_name(type),
                                pygpu_rt_vendor()),
                   -1;
    } else if (!HOST_BACKEND && check_gpu_id(st, type, t->device.device_id) < 0) {
        return -1;
    }
    if (pygpu_dl_check(t, &c, why, sizeof why) < 0) {
        PyErr_SetString(PyExc_BufferError, why);
        return -1;
    }
    if (!(l->descr = pygpu_descr_from_kind(c.kind, c.itemsize)))
        return PyErr_Format(PyExc_BufferError, "DLPack dtype: no descriptor for kind %c, %d bytes", c.kind,
                            c.itemsize), -1;
    l->nd = c.nd;
    memcpy(l->shape, c.shape, sizeof c.shape);
    memcpy(l->strides, c.strides, sizeof c.strides);
    l->data = c.data;
    l->device_type = type;
    l->device_id = t->device.device_id;
    l->readonly = (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    l->copied = (flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0;
    return 0;
}

/* The owner of an imported tensor: a capsule whose death calls the
 * producer's deleter.  Its context tells the two managed forms apart. */
#define OWNER_NAME "pygpu.dlpack_import"
static const char tag_legacy = 'l', tag_versioned = 'v';

static void owner_destructor(PyObject *owner)
{
    if (!PyCapsule_IsValid(owner, OWNER_NAME))
        return;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    void *p = PyCapsule_GetPointer(owner, OWNER_NAME);
    void *tag = PyCapsule_GetContext(owner);
    if (tag == (void *)&tag_versioned) {
        DLManagedTensorVersioned *m = p;
        if (m->deleter)
            m->deleter(m);
    } else if (tag == (void *)&tag_legacy) {
        DLManagedTensor *m = p;
        if (m->deleter)
            m->deleter(m);
    }
    PyErr_Clear();
    PyErr_Restore(t, v, tb);
}

/* Check a DLPack capsule and take its tensor: the layout in *l, and in
 * *owner a new reference to the object that frees it.  Refused capsules
 * are left unconsumed (they free themselves). */
static int take_capsule(pygpu_state *st, PyObject *cap, int copy, dl_layout *l, PyObject **owner)
{
    if (!PyCapsule_CheckExact(cap)) {
        PyErr_Format(PyExc_TypeError, "__dlpack__() must return a DLPack capsule, not %.100s", Py_TYPE(cap)->tp_name);
        return -1;
    }
    const char *name = PyCapsule_GetName(cap);
    if (!name && PyErr_Occurred())
        return -1;
    if (name && (!strcmp(name, PYGPU_DLPACK_CAPSULE_USED) || !strcmp(name, PYGPU_DLPACK_VERSIONED_CAPSULE_USED))) {
        PyErr_Format(PyExc_BufferError, "this DLPack capsule (%s) was already consumed: a capsule can be "
                     "imported once", name);
        return -1;
    }
    int versioned = name && !strcmp(name, PYGPU_DLPACK_VERSIONED_CAPSULE);
    if (!versioned && (!name || strcmp(name, PYGPU_DLPACK_CAPSULE))) {
        PyErr_Format(PyExc_ValueError, "a capsule named %s is not a DLPack capsule (expected 'dltensor' or "
                     "'dltensor_versioned')", name ? name : "(none)");
        return -1;
    }
    void *p = PyCapsule_GetPointer(cap, name);
    const DLTensor *t;
    uint64_t flags = 0;
    if (!p)
        return -1;
    if (versioned) {
        DLManagedTensorVersioned *m = p;
        if (m->version.major != PYGPU_DLPACK_MAJOR) {
            /* Another layout: only its deleter may be used, and it must be. */
            unsigned major = m->version.major, minor = m->version.minor;
            if (PyCapsule_SetName(cap, PYGPU_DLPACK_VERSIONED_CAPSULE_USED) < 0)
                return -1;
            if (m->deleter)
                m->deleter(m);
            PyErr_Format(PyExc_BufferError, "DLPack %u.%u capsule: PyGPU reads DLPack %d.x", major, minor,
                         PYGPU_DLPACK_MAJOR);
            return -1;
        }
        t = &m->dl_tensor;
        flags = m->flags;
    } else {
        t = &((DLManagedTensor *)p)->dl_tensor;
    }
    if (read_tensor(st, t, flags, copy, l) < 0)
        return -1;
    *owner = PyCapsule_New(p, OWNER_NAME, owner_destructor);
    if (!*owner || PyCapsule_SetContext(*owner, (void *)(versioned ? &tag_versioned : &tag_legacy)) < 0 ||
        PyCapsule_SetName(cap, versioned ? PYGPU_DLPACK_VERSIONED_CAPSULE_USED : PYGPU_DLPACK_CAPSULE_USED) < 0) {
        if (*owner)
            (void)PyCapsule_SetContext(*owner, NULL);  /* (disarmed: the capsule still frees the tensor) */
        Py_CLEAR(*owner);
        Py_CLEAR(l->descr);
        return -1;
    }
    return 0;
}

void pygpu_dl_release(DLManagedTensorVersioned *m)
{
    if (!m->deleter)
        return;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    m->deleter(m);
    PyErr_Clear();
    PyErr_Restore(t, v, tb);
}

static PyObject *array_of(pygpu_state *st, dl_layout *l, PyObject *owner, int copy, int target);

PyObject *pygpu_dl_adopt(pygpu_state *st, DLManagedTensorVersioned *m, int copy, int target)
{
    dl_layout l;
    if (m->version.major != PYGPU_DLPACK_MAJOR) {
        PyErr_Format(PyExc_BufferError, "DLPack %u.%u tensor: PyGPU reads DLPack %d.x", (unsigned)m->version.major,
                     (unsigned)m->version.minor, PYGPU_DLPACK_MAJOR);
        pygpu_dl_release(m);
        return NULL;
    }
    if (read_tensor(st, &m->dl_tensor, m->flags, copy, &l) < 0) {
        pygpu_dl_release(m);
        return NULL;
    }
    PyObject *owner = PyCapsule_New(m, OWNER_NAME, owner_destructor), *r = NULL;
    if (!owner || PyCapsule_SetContext(owner, (void *)&tag_versioned) < 0) {
        Py_XDECREF(owner);          /* (no context yet: it does not call the deleter) */
        Py_DECREF(l.descr);
        pygpu_dl_release(m);
        return NULL;
    }
    r = array_of(st, &l, owner, copy, target);
    Py_DECREF(owner);
    return r;
}

/* ---- import: arrays ------------------------------------------------------------ */

/* `arr` (a GPUArray; stolen) made safe to use on the current stream. */
static PyObject *on_current_stream(pygpu_state *st, PyObject *arr)
{
    PyGPUArray *a = (PyGPUArray *)arr;
    pygpu_stream_t h;
    PyObject *cur = current(st, &h);
    if (!cur || pygpu_stream_order(st, a->device, pygpu_array_root(a)->last_stream, h) < 0) {
        Py_XDECREF(cur);
        Py_DECREF(arr);
        return NULL;
    }
    pygpu_array_note_stream(st, a, cur, h);
    Py_DECREF(cur);
    return arr;
}

/* Host data copied to device `target` (-1: the current one) through the
 * upload door (as to_gpu), converted to `dtype` if given; new reference. */
static PyObject *upload(pygpu_state *st, PyObject *host, int target, PyObject *dtype)
{
    PyArray_Descr *d = NULL;
    PyObject *r = NULL;
    int prev = -1;
    if (dtype && dtype != Py_None && !(d = pygpu_descr_arg(dtype)))
        return NULL;
    if (target < 0 || pygpu_device_enter(st, target, &prev) == 0) {
        r = pygpu_array_from_host(st, host, d, Py_None, 0);
        d = NULL;                   /* (stolen) */
        if (prev >= 0 && pygpu_device_leave(st, prev) < 0)
            Py_CLEAR(r);
    }
    Py_XDECREF(d);
    return r;
}

/* A copy of `a` on device `dev`, safe on the current stream; new reference. */
static PyObject *copy_to(pygpu_state *st, PyGPUArray *a, int dev)
{
    if (dev == a->device) {
        PyObject *c = device_copy(st, a);
        return c ? on_current_stream(st, c) : NULL;
    }
    /* Another device: through the host (rare, and right on every backend). */
    PyObject *stream = last_stream_arg(a), *h = stream ? pygpu_array_get(a, NULL, stream, 0, 0) : NULL, *r;
    Py_XDECREF(stream);
    if (!h)
        return NULL;
    r = upload(st, h, dev, NULL);
    Py_DECREF(h);
    return r;
}

/* The GPUArray for a taken tensor: a view of it, or (host data on a GPU
 * backend, copy=True, another device) a copy; new reference. */
static PyObject *array_of(pygpu_state *st, dl_layout *l, PyObject *owner, int copy, int target)
{
    PyArray_Descr *descr = l->descr;
    l->descr = NULL;
    if (!reachable(l->device_type)) {
        PyObject *h = PyArray_NewFromDescr(&PyArray_Type, descr, l->nd, l->shape, l->strides, l->data,
                                           l->readonly ? 0 : NPY_ARRAY_WRITEABLE, NULL);
        if (!h || PyArray_SetBaseObject((PyArrayObject *)h, Py_NewRef(owner)) < 0) {
            Py_XDECREF(h);
            return NULL;
        }
        PyObject *r = upload(st, h, target, NULL);
        Py_DECREF(h);
        return r;
    }
    int dev = HOST_BACKEND ? pygpu_current_device(st) : l->device_id;
    if (dev < 0) {
        Py_DECREF(descr);
        return NULL;
    }
    PyObject *a = pygpu_array_wrap(st, st->Array, descr, l->nd, l->shape, l->strides, l->data, owner, owner, dev,
                                   !l->readonly);
    pygpu_stream_t h;
    PyObject *cur = a ? current(st, &h) : NULL;
    if (!cur) {
        Py_XDECREF(a);
        return NULL;
    }
    pygpu_array_note_stream(st, (PyGPUArray *)a, cur, h);  /* the producer ordered it before this stream */
    Py_DECREF(cur);
    if ((copy == 1 && !l->copied) || (target >= 0 && target != dev))
        Py_SETREF(a, copy_to(st, (PyGPUArray *)a, target >= 0 ? target : dev));
    return a;
}

/* ---- import: asking the producer ---------------------------------------------- */

/* x.__dlpack_device__() as (type, id); 0, or -1 with an exception (TypeError
 * when x has no such method). */
static int query_device(pygpu_state *st, PyObject *x, long *dev)
{
    PyObject *name = CACHED(st, DLPACK_DEVICE_ATTR), *buf[2] = {NULL, x};
    PyObject *r = PyObject_VectorcallMethod(name, buf + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (!r) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        int has = PyObject_HasAttr(x, name);
        if (has) {
            PyErr_Restore(t, v, tb);
        } else {
            Py_XDECREF(t);
            Py_XDECREF(v);
            Py_XDECREF(tb);
            PyErr_Format(PyExc_TypeError, "from_dlpack() takes an object with __dlpack__ and __dlpack_device__ "
                         "methods, or a DLPack capsule, not %.100s", Py_TYPE(x)->tp_name);
        }
        return -1;
    }
    int rc = int_pair(r, "__dlpack_device__()", &dev[0], &dev[1]);
    Py_DECREF(r);
    return rc;
}

/* The stream= to give a producer whose memory this backend reaches: the
 * current stream in the protocol's numbering; new reference. */
static PyObject *consumer_stream_value(pygpu_state *st)
{
#if HOST_BACKEND
    (void)st;
    return Py_NewRef(Py_None);
#else
    pygpu_stream_t h;
    PyObject *cur = current(st, &h);
    if (!cur)
        return NULL;
    Py_DECREF(cur);
#  if defined(PYGPU_BACKEND_CUDA)
    return h == PYGPU_STREAM_NULL ? PyLong_FromLong(1) : PyLong_FromVoidPtr(h);
#  else
    return h == PYGPU_STREAM_NULL || h == PYGPU_STREAM_PER_THREAD ? PyLong_FromLong(0) : PyLong_FromVoidPtr(h);
#  endif
#endif
}

/* x.__dlpack__(stream=..., max_version=(1, 1)[, dl_device=...][, copy=...]);
 * producers from before DLPack 1.0 take only stream=: they are asked again
 * so, and remembered.  New reference. */
static PyObject *call_dlpack(pygpu_state *st, PyObject *x, PyObject *stream, PyObject *dl_device, int copy)
{
    PyObject *name = CACHED(st, DLPACK_ATTR), *old = CACHED(st, OLD_PRODUCERS), *r, *kw;
    PyObject *copy_obj = copy < 0 ? Py_None : copy ? Py_True : Py_False;
    PyObject *buf[6] = {NULL, x, stream, CACHED(st, MAX_VERSION), NULL, NULL};
    size_t nargsf = 1 | PY_VECTORCALL_ARGUMENTS_OFFSET;
    int is_old = PySet_Contains(old, (PyObject *)Py_TYPE(x));
    if (is_old < 0)
        return NULL;
    if (is_old) {
        if (dl_device)
            return PyErr_Format(PyExc_BufferError, "%.100s.__dlpack__ predates DLPack 1.0: it cannot export to "
                                "another device", Py_TYPE(x)->tp_name);
        return PyObject_VectorcallMethod(name, buf + 1, nargsf, CACHED(st, KW_S));
    }
    if (dl_device) {
        buf[4] = dl_device;
        buf[5] = copy_obj;
        kw = CACHED(st, KW_SVDC);
    } else if (copy >= 0) {
        buf[4] = copy_obj;
        kw = CACHED(st, KW_SVC);
    } else {
        kw = CACHED(st, KW_SV);
    }
    r = PyObject_VectorcallMethod(name, buf + 1, nargsf, kw);
    if (r || dl_device || !PyErr_ExceptionMatches(PyExc_TypeError))
        return r;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    r = PyObject_VectorcallMethod(name, buf + 1, nargsf, CACHED(st, KW_S));
    if (!r) {                       /* not the keywords, then: report the first error */
        PyErr_Clear();
        PyErr_Restore(t, v, tb);
        return NULL;
    }
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    if (PySet_Add(old, (PyObject *)Py_TYPE(x)) < 0)
        PyErr_Clear();
    return r;
}

/* A capsule from producer x, whose data is on (dev[0], dev[1]); new reference. */
static PyObject *request_capsule(pygpu_state *st, PyObject *x, const long *dev, int target, int copy)
{
    PyObject *cap = NULL;
    if (reachable(dev[0])) {
        int prev = -1;
        if (!HOST_BACKEND) {
            if (check_gpu_id(st, dev[0], dev[1]) < 0)
                return NULL;
            if (copy == 0 && target >= 0 && target != dev[1])
                return PyErr_Format(PyExc_BufferError, "from_dlpack(copy=False): the data is on device %ld, and "
                                    "device=%d needs a copy", dev[1], target);
            /* (so that the default streams named below are that device's) */
            if (pygpu_device_enter(st, (int)dev[1], &prev) < 0)
                return NULL;
        }
        PyObject *stream = consumer_stream_value(st);
        if (stream) {
            cap = call_dlpack(st, x, stream, NULL, copy);
            Py_DECREF(stream);
        }
        if (prev >= 0) {
            if (!cap)
                (void)pygpu_rt_set_device(prev);
            else if (pygpu_device_leave(st, prev) < 0)
                Py_CLEAR(cap);
        }
        return cap;
    }
    if (copy == 0)
        return PyErr_Format(PyExc_BufferError, is_host_type(dev[0])
                            ? "from_dlpack(copy=False): the data is in host memory (%s), and a %s GPUArray needs "
                              "a copy of it on the device"
                            : "from_dlpack(copy=False): the data is on %s, which the %s backend cannot reach without "
                              "a copy", device_name(dev[0]), pygpu_rt_vendor());
    if (is_host_type(dev[0]))
        return call_dlpack(st, x, Py_None, NULL, -1);
    cap = call_dlpack(st, x, Py_None, CACHED(st, CPU_DEVICE), -1);
    if (!cap)
        raise_from(PyExc_BufferError, "from_dlpack(): the data is on %s device %ld, which the %s backend cannot "
                   "reach, and its producer would not copy it to the host", device_name(dev[0]), dev[1],
                   pygpu_rt_vendor());
    return cap;
}

/* from_dlpack(x) of one of our own GPUArrays: a view, or a copy. */
static PyObject *from_own(pygpu_state *st, PyGPUArray *a, int target, int copy)
{
    if (copy != 1 && (target < 0 || target == a->device)) {
        PyObject *v = pygpu_array_view(a, a->nd, GA_SHAPE(a), GA_STRIDES(a), a->data, NULL);
        return v ? on_current_stream(st, v) : NULL;
    }
    if (copy == 0)
        return PyErr_Format(PyExc_BufferError, "from_dlpack(copy=False): the array is on device %d, and device=%d "
                            "needs a copy", a->device, target);
    return copy_to(st, a, target >= 0 ? target : a->device);
}

/* The import engine (copy: -1 None, 0 False, 1 True; target: a device
 * ordinal or -1; dev: x's __dlpack_device__ if known). */
static PyObject *from_dlpack(pygpu_state *st, PyObject *x, int target, int copy, const long *dev)
{
    PyObject *cap, *owner = NULL, *r = NULL;
    long d[2];
    dl_layout l;
    if (PyObject_TypeCheck(x, st->Array))
        return from_own(st, (PyGPUArray *)x, target, copy);
    if (PyCapsule_CheckExact(x)) {
        cap = Py_NewRef(x);
    } else {
        const void *api = pygpu_exchange_api_of(st, Py_TYPE(x));
        int fallback = 0;
        if (api && ((r = pygpu_exchange_import(st, x, api, target, copy, 0, &fallback)) || !fallback))
            return r;
        if (!api && PyErr_Occurred())
            return NULL;
        if (!dev && query_device(st, x, d) < 0)
            return NULL;
        if (!(cap = request_capsule(st, x, dev ? dev : d, target, copy)))
            return NULL;
    }
    if (take_capsule(st, cap, copy, &l, &owner) == 0) {
        r = array_of(st, &l, owner, copy, target);
        Py_DECREF(owner);
    }
    if (!r) {   /* a refused capsule's destructor runs the producer's code: keep the error */
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        Py_DECREF(cap);
        PyErr_Restore(t, v, tb);
        return NULL;
    }
    Py_DECREF(cap);
    return r;
}

/* from_dlpack's device=: None (-1), a Device, an ordinal, or this
 * backend's (device_type, device_id). */
static int target_arg(pygpu_state *st, PyObject *v, int *target)
{
    long t, id;
    *target = -1;
    if (!v || v == Py_None)
        return 0;
    if (PyObject_TypeCheck(v, st->Device)) {
        *target = ((PyGPUDevice *)v)->id;
        return 0;
    }
    if (PyTuple_Check(v)) {
        if (int_pair(v, "from_dlpack(): device", &t, &id) < 0)
            return -1;
        if (t != OWN_TYPE || (HOST_BACKEND && id != 0)) {
            PyErr_Format(PyExc_BufferError, "from_dlpack(device=(%ld, %ld)): a %s GPUArray cannot be on %s device "
                         "%ld", t, id, pygpu_rt_vendor(), device_name(t), id);
            return -1;
        }
        if (HOST_BACKEND)
            return 0;
    } else if (PyIndex_Check(v) && !PyBool_Check(v)) {
        if ((id = PyLong_AsLong(v)) == -1 && PyErr_Occurred())
            return -1;
    } else {
        PyErr_Format(PyExc_TypeError, "from_dlpack(): device must be a pygpu.Device, a device ordinal, a "
                     "(device_type, device_id) tuple or None, not %.100s", Py_TYPE(v)->tp_name);
        return -1;
    }
    if (pygpu_check_device_id(st, id) < 0)
        return -1;
    *target = (int)id;
    return 0;
}

static PyObject *mod_from_dlpack(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"x", "device", "copy"};
    PyObject *v[3] = {NULL, NULL, NULL};
    pygpu_state *st = PyModule_GetState(m);
    int copy, target;
    if (parse_args("from_dlpack", args, nargs, kwnames, names, 3, 1, 1, v) < 0)
        return NULL;
    if (!v[0])
        return PyErr_Format(PyExc_TypeError, "from_dlpack() missing required argument 'x' (pos 1)");
    if ((copy = copy_arg(v[2], "from_dlpack")) == -2 || target_arg(st, v[1], &target) < 0)
        return NULL;
    return from_dlpack(st, v[0], target, copy, NULL);
}

/* ---- asarray ---------------------------------------------------------------- */

/* 1 if obj has attribute `name`, 0 if not, -1 with an exception. */
static int has_attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v) {
        Py_DECREF(v);
        return 1;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* `obj` as a GPUArray without a copy where one can be avoided; host data
 * is copied (converted to `dtype` if given). */
static PyObject *as_array(pygpu_state *st, PyObject *obj, PyObject *dtype)
{
    int has;
    long dev[2];
    if (PyObject_TypeCheck(obj, st->Array))
        return Py_NewRef(obj);
    if (PyArray_Check(obj))
        return upload(st, obj, -1, dtype);
    const void *api = pygpu_exchange_api_of(st, Py_TYPE(obj));
    if (api) {      /* host data is copied here as all host data is (on every backend) */
        int fallback = 0;
        PyObject *r = pygpu_exchange_import(st, obj, api, -1, -1, 1, &fallback);
        if (r || !fallback)
            return r;
    } else if (PyErr_Occurred()) {
        return NULL;
    }
#if defined(PYGPU_BACKEND_CUDA)
    PyObject *iface = PyObject_GetAttr(obj, CACHED(st, CAI_ATTR));
    if (iface) {
        PyObject *r = pygpu_cai_import(st, obj, iface);
        Py_DECREF(iface);
        return r;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return NULL;
    PyErr_Clear();
#endif
    if (PyCapsule_CheckExact(obj))
        return from_dlpack(st, obj, -1, -1, NULL);
    if ((has = has_attr(obj, CACHED(st, DLPACK_ATTR))) < 0)
        return NULL;
    if (has) {
        /* Host data is copied here as all host data is (on every backend). */
        if (query_device(st, obj, dev) < 0)
            return NULL;
        return from_dlpack(st, obj, -1, is_host_type(dev[0]) ? 1 : -1, dev);
    }
#if !defined(PYGPU_BACKEND_CUDA)
    PyObject *cai = PyObject_GetAttr(obj, CACHED(st, CAI_ATTR));
    if (cai) {
        PyObject *r = pygpu_cai_import(st, obj, cai);   /* (checks it, then says why it cannot) */
        Py_DECREF(cai);
        return r;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return NULL;
    PyErr_Clear();
#endif
    return upload(st, obj, -1, dtype);
}

PyObject *pygpu_asarray(pygpu_state *st, PyObject *obj) { return as_array(st, obj, NULL); }

static PyObject *mod_asarray(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"obj", "dtype"};
    PyObject *v[2] = {NULL, NULL}, *dtype, *r;
    pygpu_state *st = PyModule_GetState(m);
    PyArray_Descr *want = NULL;
    if (parse_args("asarray", args, nargs, kwnames, names, 2, 2, 0, v) < 0)
        return NULL;
    if (!v[0])
        return PyErr_Format(PyExc_TypeError, "asarray() missing required argument 'obj' (pos 1)");
    dtype = v[1] && v[1] != Py_None ? v[1] : NULL;
    if (dtype && !(want = pygpu_descr_arg(dtype)))
        return NULL;
    r = as_array(st, v[0], dtype);
    if (r && want && !PyArray_EquivTypes(((PyGPUArray *)r)->descr, want))
        Py_SETREF(r, pygpu_array_astype((PyGPUArray *)r, want, PYGPU_ORDER_K, NULL, Py_None));
    Py_XDECREF(want);
    return r;
}

/* ---- init ------------------------------------------------------------------- */

#define FASTKW(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL | METH_KEYWORDS

static PyMethodDef interop_methods[] = {
    {"from_dlpack", FASTKW(mod_from_dlpack),
     "from_dlpack(x, /, *, device=None, copy=None)\n--\n\n"
     "A GPUArray sharing the memory of `x`, an object with __dlpack__ and __dlpack_device__\n"
     "(or a DLPack capsule), as the Array API standard says: safe to use on the current\n"
     "stream.  Host data is copied to the device on GPU backends; copy=True always copies,\n"
     "copy=False raises BufferError where a copy would be needed."},
    {"asarray", FASTKW(mod_asarray),
     "asarray(obj, dtype=None)\n--\n\n"
     "`obj` as a GPUArray: GPUArrays as they are, device arrays of other libraries\n"
     "(__cuda_array_interface__, DLPack) without a copy, host data copied to the device."},
    {0},
};

/* The typestr of type number `n` ('<f4'), or None where GPUArray has no such dtype. */
static PyObject *typestr_of(int n)
{
    PyArray_Descr *d = PyArray_DescrFromType(n);
    PyObject *r;
    if (!d) {
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    int size = (int)PyDataType_ELSIZE(d);
    char order = size == 1 ? '|' : PY_LITTLE_ENDIAN ? '<' : '>';
    r = pygpu_descr_supported(d) ? PyUnicode_FromFormat("%c%c%d", order, d->kind, size) : Py_NewRef(Py_None);
    Py_DECREF(d);
    return r;
}

static PyObject *names_tuple(int n, const char *const *names)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_InternFromString(names[i]);
        if (!s)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static PyObject *make_cache(void)
{
    static const char *const keys[] = {"shape", "typestr", "data", "version", "strides", "descr", "stream", "mask"};
    static const char *const kw[] = {"stream", "max_version", "dl_device", "copy"};
    static const char *const kw_svc[] = {"stream", "max_version", "copy"};
    PyObject *t = PyTuple_New(PYGPU_IX_COUNT), *types = PyTuple_New(NPY_HALF + 1), *items = PyTuple_New(NPY_HALF + 1);
    PyObject *empty = PyUnicode_FromString("");
    if (!t || !types || !items || !empty)
        goto fail;
    for (int n = 0; n <= NPY_HALF; n++) {
        PyObject *s = typestr_of(n);
        if (!s)
            goto fail;
        PyTuple_SET_ITEM(types, n, s);
        PyObject *item = s == Py_None ? Py_NewRef(Py_None) : PyTuple_Pack(2, empty, s);
        if (!item)
            goto fail;
        PyTuple_SET_ITEM(items, n, item);
    }
    for (int i = 0; i < 8; i++)
        PyTuple_SET_ITEM(t, PYGPU_IX_SHAPE + i, PyUnicode_InternFromString(keys[i]));
    PyTuple_SET_ITEM(t, PYGPU_IX_ZERO, PyLong_FromLong(0));
    PyTuple_SET_ITEM(t, PYGPU_IX_THREE, PyLong_FromLong(3));
    PyTuple_SET_ITEM(t, PYGPU_IX_TYPESTRS, types);
    PyTuple_SET_ITEM(t, PYGPU_IX_DESCR_ITEMS, items);
    types = items = NULL;
    PyTuple_SET_ITEM(t, PYGPU_IX_CAI_ATTR, PyUnicode_InternFromString("__cuda_array_interface__"));
    PyTuple_SET_ITEM(t, PYGPU_IX_DLPACK_ATTR, PyUnicode_InternFromString("__dlpack__"));
    PyTuple_SET_ITEM(t, PYGPU_IX_DLPACK_DEVICE_ATTR, PyUnicode_InternFromString("__dlpack_device__"));
    PyTuple_SET_ITEM(t, PYGPU_IX_COPY_ATTR, PyUnicode_InternFromString("copy"));
    PyTuple_SET_ITEM(t, PYGPU_IX_KW_S, names_tuple(1, kw));
    PyTuple_SET_ITEM(t, PYGPU_IX_KW_SV, names_tuple(2, kw));
    PyTuple_SET_ITEM(t, PYGPU_IX_KW_SVC, names_tuple(3, kw_svc));
    PyTuple_SET_ITEM(t, PYGPU_IX_KW_SVDC, names_tuple(4, kw));
    PyTuple_SET_ITEM(t, PYGPU_IX_MAX_VERSION, Py_BuildValue("(ii)", PYGPU_DLPACK_MAJOR, PYGPU_DLPACK_MINOR));
    PyTuple_SET_ITEM(t, PYGPU_IX_CPU_DEVICE, Py_BuildValue("(ii)", (int)kDLCPU, 0));
    PyTuple_SET_ITEM(t, PYGPU_IX_OLD_PRODUCERS, PySet_New(NULL));
    PyObject *tmpl = PyDict_New();      /* sized for the CAI keys once; copies need no resizing */
    for (int i = 0; tmpl && i < PYGPU_IX_MASK - PYGPU_IX_SHAPE; i++) {
        PyObject *k = PyTuple_GET_ITEM(t, PYGPU_IX_SHAPE + i);
        if (!k || PyDict_SetItem(tmpl, k, Py_None) < 0)
            Py_CLEAR(tmpl);
    }
    PyTuple_SET_ITEM(t, PYGPU_IX_CAI_TEMPLATE, tmpl);
    PyTuple_SET_ITEM(t, PYGPU_IX_EXCHANGE_ATTR, PyUnicode_InternFromString(PYGPU_DLPACK_EXCHANGE_ATTR));
    PyTuple_SET_ITEM(t, PYGPU_IX_CUDA_STREAM_ATTR, PyUnicode_InternFromString("__cuda_stream__"));
    for (int i = 0; i < PYGPU_IX_COUNT; i++)
        if (!PyTuple_GET_ITEM(t, i))
            goto fail;
    Py_DECREF(empty);
    return t;
fail:
    if (!PyErr_Occurred())
        PyErr_NoMemory();
    Py_XDECREF(t);
    Py_XDECREF(types);
    Py_XDECREF(items);
    Py_XDECREF(empty);
    return NULL;
}

int pygpu_interop_init(PyObject *m, pygpu_state *st)
{
    if (!(st->interop = make_cache()))
        return -1;
    return PyModule_AddFunctions(m, interop_methods);
}
