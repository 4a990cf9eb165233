/*
 * dlpack_import.c -- DLPack coming in: the tensor of a capsule, or of the
 * capsule an object's __dlpack__ gives (asked with the Array API
 * standard's arguments, 2023.12), as a GPUArray; and from_dlpack's rule
 * for our own arrays.  The way out is dlpack_export.c, what both share
 * dlpack_shared.c; the ladder that chooses among the protocols, for
 * from_dlpack and asarray alike, is interop.c.
 *
 * Import: the capsule is checked before it is taken, so that a refused
 * capsule still frees itself; once taken (renamed "used_..."), an owner
 * object calls the producer's deleter when the last array viewing the
 * memory dies.  Host data on a GPU backend is copied to the device.
 */
#include "pygpu.h"
#include "dlpack_import.h"
#include "array.h"
#include "array_host.h"
#include "device.h"
#include "dlpack.h"
#include "dlpack_check.h"
#include "dlpack_shared.h"
#include "dtype.h"
#include "state.h"
#include "stream.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(int64_t) == sizeof(ptrdiff_t), "DLPack's int64 dims and ptrdiff_t differ");

#define OWN_TYPE PYGPU_DL_OWN_TYPE
#define HOST_BACKEND PYGPU_DL_HOST_BACKEND

/* The current stream's handle, and the Stream object (new reference). */
static PyObject *current(pygpu_state *st, pygpu_stream_t *h)
{
    PyObject *s = pygpu_current_stream(st);
    if (s)
        *h = ((PyGPUStream *)s)->handle;
    return s;
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

static void count_devices_error(long t, long id, int n)
{
    PyErr_Format(PyExc_BufferError, "the data is on %s device %ld, but the %s backend has %d device%s",
                 pygpu_dl_device_name(t), id, pygpu_rt_vendor(), n, n == 1 ? "" : "s");
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
    if (!pygpu_dl_reachable(type)) {
        if (!pygpu_dl_is_host_type(type))
            return PyErr_Format(PyExc_BufferError, "the DLPack data is on %s (device_type %ld) device %d, which "
                                "the %s backend cannot reach", pygpu_dl_device_name(type), type,
                                (int)t->device.device_id, pygpu_rt_vendor()),
                   -1;
        if (copy == 0)
            return PyErr_Format(PyExc_BufferError, "from_dlpack(copy=False): the data is in host memory (%s), "
                                "and a %s GPUArray needs a copy of it on the device", pygpu_dl_device_name(type),
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
    pygpu_array_set_last_stream(st, a, cur, h);
    Py_DECREF(cur);
    return arr;
}

/* Host data copied to device `target` (-1: the current one) through the
 * upload door (as to_gpu), converted to `dtype` if given; new reference. */
PyObject *pygpu_dl_upload(pygpu_state *st, PyObject *host, int target, PyObject *dtype)
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
        PyObject *c = pygpu_dl_device_copy(st, a);
        return c ? on_current_stream(st, c) : NULL;
    }
    /* Another device: through the host (rare, and right on every backend). */
    PyObject *stream = pygpu_dl_last_stream_arg(a), *h = stream ? pygpu_array_get(a, NULL, stream, 0, 0) : NULL, *r;
    Py_XDECREF(stream);
    if (!h)
        return NULL;
    r = pygpu_dl_upload(st, h, dev, NULL);
    Py_DECREF(h);
    return r;
}

/* The GPUArray for a taken tensor: a view of it, or (host data on a GPU
 * backend, copy=True, another device) a copy; new reference. */
static PyObject *array_of(pygpu_state *st, dl_layout *l, PyObject *owner, int copy, int target)
{
    PyArray_Descr *descr = l->descr;
    l->descr = NULL;
    if (!pygpu_dl_reachable(l->device_type)) {
        PyObject *h = PyArray_NewFromDescr(&PyArray_Type, descr, l->nd, l->shape, l->strides, l->data,
                                           l->readonly ? 0 : NPY_ARRAY_WRITEABLE, NULL);
        if (!h || PyArray_SetBaseObject((PyArrayObject *)h, Py_NewRef(owner)) < 0) {
            Py_XDECREF(h);
            return NULL;
        }
        PyObject *r = pygpu_dl_upload(st, h, target, NULL);
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
    pygpu_array_set_last_stream(st, (PyGPUArray *)a, cur, h);  /* the producer ordered it before this stream */
    Py_DECREF(cur);
    if ((copy == 1 && !l->copied) || (target >= 0 && target != dev))
        Py_SETREF(a, copy_to(st, (PyGPUArray *)a, target >= 0 ? target : dev));
    return a;
}

/* ---- import: asking the producer ---------------------------------------------- */

/* x.__dlpack_device__() as (type, id); 0, or -1 with an exception (TypeError
 * when x has no such method). */
int pygpu_dl_query_device(pygpu_state *st, PyObject *x, long *dev)
{
    PyObject *name = st->names.dlpack_device_attr, *buf[2] = {NULL, x};
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
    int rc = pygpu_dl_int_pair(r, "__dlpack_device__()", &dev[0], &dev[1]);
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
    PyObject *name = st->names.dlpack_attr, *old = st->names.old_producers, *r, *kw;
    PyObject *copy_obj = copy < 0 ? Py_None : copy ? Py_True : Py_False;
    PyObject *buf[6] = {NULL, x, stream, st->names.max_version, NULL, NULL};
    size_t nargsf = 1 | PY_VECTORCALL_ARGUMENTS_OFFSET;
    int is_old = PySet_Contains(old, (PyObject *)Py_TYPE(x));
    if (is_old < 0)
        return NULL;
    if (is_old) {
        if (dl_device)
            return PyErr_Format(PyExc_BufferError, "%.100s.__dlpack__ predates DLPack 1.0: it cannot export to "
                                "another device", Py_TYPE(x)->tp_name);
        return PyObject_VectorcallMethod(name, buf + 1, nargsf, st->names.kw_s);
    }
    if (dl_device) {
        buf[4] = dl_device;
        buf[5] = copy_obj;
        kw = st->names.kw_svdc;
    } else if (copy >= 0) {
        buf[4] = copy_obj;
        kw = st->names.kw_svc;
    } else {
        kw = st->names.kw_sv;
    }
    r = PyObject_VectorcallMethod(name, buf + 1, nargsf, kw);
    if (r || dl_device || !PyErr_ExceptionMatches(PyExc_TypeError))
        return r;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    r = PyObject_VectorcallMethod(name, buf + 1, nargsf, st->names.kw_s);
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
    if (pygpu_dl_reachable(dev[0])) {
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
        return PyErr_Format(PyExc_BufferError, pygpu_dl_is_host_type(dev[0])
                            ? "from_dlpack(copy=False): the data is in host memory (%s), and a %s GPUArray needs "
                              "a copy of it on the device"
                            : "from_dlpack(copy=False): the data is on %s, which the %s backend cannot reach without "
                              "a copy", pygpu_dl_device_name(dev[0]), pygpu_rt_vendor());
    if (pygpu_dl_is_host_type(dev[0]))
        return call_dlpack(st, x, Py_None, NULL, -1);
    cap = call_dlpack(st, x, Py_None, st->names.cpu_device, -1);
    if (!cap)
        raise_from(PyExc_BufferError, "from_dlpack(): the data is on %s device %ld, which the %s backend cannot "
                   "reach, and its producer would not copy it to the host", pygpu_dl_device_name(dev[0]), dev[1],
                   pygpu_rt_vendor());
    return cap;
}

PyObject *pygpu_dl_from_own(pygpu_state *st, PyGPUArray *a, int target, int copy)
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

PyObject *pygpu_dl_import(pygpu_state *st, PyObject *x, int target, int copy, const long *dev)
{
    PyObject *cap, *owner = NULL, *r = NULL;
    long d[2];
    dl_layout l;
    if (PyCapsule_CheckExact(x)) {
        cap = Py_NewRef(x);
    } else {
        if (!dev && pygpu_dl_query_device(st, x, d) < 0)
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
