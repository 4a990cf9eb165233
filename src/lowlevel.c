/*
 * lowlevel.c -- what the original PyGPU interface (pygpu/lowlevel.py) needs
 * from C: the runtime calls that have no other Python door, returning raw
 * status codes rather than raising, and _HostBuffer, the base of
 * DeviceArray_<dtype>, which exports its host side through the buffer
 * protocol.
 *
 * Everything else of that interface is Python over the rest of the module.
 * Python classes cannot export buffers before 3.12 (PEP 688), so the one
 * type here does it for them: _HostBuffer redirects a buffer request to the
 * object in its `_host` slot (a NumPy array), which then owns the export.
 */
#include "pygpu.h"
#include "lowlevel.h"
#include "marks.h"
#include "convert.h"
#include "copy/copy.h"
#include "errors.h"
#include "fork.h"
#include "memory.h"
#include "peer.h"
#include "registered.h"
#include "transfer/bare_loop.h"
#include "transfer/bus.h"
#include "transfer/events.h"
#include "transfer/lanes.h"
#include "transfer/pinned_pool.h"
#include "transfer/pipeline.h"
#include "transfer/settings.h"

#include <structmember.h>
#include <string.h>
#include <time.h>

/* ---- _HostBuffer --------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *host;             /* the object whose buffer is exported, or NULL */
} PyGPUHostBuffer;

static PyObject *hostbuf_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    return tp->tp_alloc(tp, 0);         /* subclasses take their own arguments */
}

static int hostbuf_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(((PyGPUHostBuffer *)self)->host);
    return 0;
}

static int hostbuf_clear(PyObject *self)
{
    Py_CLEAR(((PyGPUHostBuffer *)self)->host);
    return 0;
}

static void hostbuf_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    hostbuf_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* The buffer of `_host`: the request is redirected, so view->obj is the
 * host object and releasing the view goes back to it. */
static int hostbuf_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    PyObject *host = ((PyGPUHostBuffer *)self)->host;
    if (!host || host == Py_None) {
        PyErr_Format(PyExc_BufferError, "this %.100s has no host data", Py_TYPE(self)->tp_name);
        view->obj = NULL;
        return -1;
    }
    return PyObject_GetBuffer(host, view, flags);
}

static PyMemberDef hostbuf_members[] = {
    {"_host", T_OBJECT, offsetof(PyGPUHostBuffer, host), 0,
     "The host object whose buffer this object exports (None: no buffer)."},
    {0},
};

static PyType_Slot hostbuf_slots[] = {
    {Py_tp_doc, "_HostBuffer()\n--\n\n"
                "Base of the original PyGPU's DeviceArray_<dtype>: exports the buffer\n"
                "of the object in its `_host` slot as its own."},
    {Py_tp_new, hostbuf_new},
    {Py_tp_dealloc, hostbuf_dealloc},
    {Py_tp_traverse, hostbuf_traverse},
    {Py_tp_clear, hostbuf_clear},
    {Py_bf_getbuffer, hostbuf_getbuffer},
    {Py_tp_members, hostbuf_members},
    {0, NULL},
};

static PyType_Spec hostbuf_spec = {
    .name = "pygpu._HostBuffer",
    .basicsize = sizeof(PyGPUHostBuffer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = hostbuf_slots,
};

/* ---- runtime calls that report a status ---------------------------------- */

/* An address argument: a non-negative int; 0, or -1 with an exception. */
static int address_arg(PyObject *obj, void **out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "an address must be an int, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyLong_AsVoidPtr(obj);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

static PyObject *ll_get_last_error(PyObject *m, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"peek", NULL};
    int peek = 0;
    (void)m;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:_get_last_error", kwlist, &peek))
        return NULL;
    return PyLong_FromLong(peek ? pygpu_rt_peek_last_error() : pygpu_rt_get_last_error());
}

/* Every allocation of the current device dies with the reset: the
 * background transfers in flight are waited for (their page-locked blocks
 * and events would die under them), the host buffers page-locked in place
 * are let go (the reset drops their registration), and PyGPU's caches of
 * freed device blocks, page-locked blocks and events are emptied, so that
 * nothing the module keeps for reuse outlives it; its peer access and its
 * pool's grants go with it, and are asked for again when next used. */
static PyObject *ll_device_reset(PyObject *m, PyObject *unused)
{
    (void)unused;
    pygpu_status s;
    int dev = -1;
    pygpu_copy_reap_all();
    pygpu_cache_flush(PyModule_GetState(m));
    pygpu_registered_wait_all();
    pygpu_registered_unpin_all();
    Py_BEGIN_ALLOW_THREADS
    pygpu_staging_release();
    pygpu_pinned_trim();
    pygpu_events_release();
    if (pygpu_rt_get_device(&dev) != 0)
        dev = -1;
    s = pygpu_rt_device_reset();
    if (s == 0) {
        pygpu_peer_forget(dev);
        pygpu_reset_note(dev);
    }
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(s);
}

static PyObject *ll_host_register(PyObject *m, PyObject *args)
{
    PyObject *addr_obj, *n_obj;
    void *p;
    size_t n;
    (void)m;
    if (!PyArg_ParseTuple(args, "OO:_host_register", &addr_obj, &n_obj) || address_arg(addr_obj, &p) < 0 ||
        pygpu_size_arg(n_obj, "nbytes", &n) < 0)
        return NULL;
    pygpu_status s;
    Py_BEGIN_ALLOW_THREADS
    s = pygpu_rt_host_register(p, n);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(s);
}

static PyObject *ll_host_unregister(PyObject *m, PyObject *arg)
{
    void *p;
    (void)m;
    if (address_arg(arg, &p) < 0)
        return NULL;
    pygpu_status s;
    Py_BEGIN_ALLOW_THREADS
    s = pygpu_rt_host_unregister(p);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(s);
}

/* _stream_begin_capture(handle, mode=0) and _stream_end_capture(handle):
 * the runtime's own status, for the tests of what PyGPU's calls do under
 * a capture (PyGPU begins none itself; the graph ended is discarded). */
static PyObject *ll_stream_begin_capture(PyObject *m, PyObject *args)
{
    PyObject *handle;
    void *s;
    int mode = PYGPU_CAPTURE_MODE_GLOBAL;
    (void)m;
    if (!PyArg_ParseTuple(args, "O|i:_stream_begin_capture", &handle, &mode) || address_arg(handle, &s) < 0)
        return NULL;
    if (mode < PYGPU_CAPTURE_MODE_GLOBAL || mode > PYGPU_CAPTURE_MODE_RELAXED)
        return PyErr_Format(PyExc_ValueError, "_stream_begin_capture(): mode must be 0 (global), 1 (thread-local) "
                            "or 2 (relaxed), not %d", mode);
    return PyLong_FromLong(pygpu_rt_stream_begin_capture((pygpu_stream_t)s, mode));
}

static PyObject *ll_stream_end_capture(PyObject *m, PyObject *arg)
{
    void *s;
    (void)m;
    if (address_arg(arg, &s) < 0)
        return NULL;
    return PyLong_FromLong(pygpu_rt_stream_end_capture((pygpu_stream_t)s));
}

/* _bus_hold(device, up, delta): count `delta` more bulk copies in flight
 * on the device in that direction, as another thread's (bus.c); the new
 * count.  _bus_kernel_copies(): the copies PyGPU's kernel carried. */
static PyObject *ll_bus_hold(PyObject *m, PyObject *args)
{
    int device, up, delta;
    (void)m;
    if (!PyArg_ParseTuple(args, "ipi:_bus_hold", &device, &up, &delta))
        return NULL;
    int n = pygpu_bus_hold(device, up ? PYGPU_COPY_H2D : PYGPU_COPY_D2H, delta);
    if (n < 0)
        return PyErr_Format(PyExc_ValueError, "_bus_hold(): device %d has no slot (or the count went below 0)", device);
    return PyLong_FromLong(n);
}

static PyObject *ll_bus_kernel_copies(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyLong_FromLong(pygpu_bus_kernel_copies());
}

/* _events_kept(device): the events kept for reuse on the device (events.c). */
static PyObject *ll_events_kept(PyObject *m, PyObject *args)
{
    int device;
    (void)m;
    if (!PyArg_ParseTuple(args, "i:_events_kept", &device))
        return NULL;
    return PyLong_FromLong(pygpu_events_kept(device));
}

/* _bare_loop(up, nbytes, windows, reps, legacy=False): the median seconds
 * of one transfer of the staging's floor (transfer/bare_loop.c) on the
 * current device, between touched host memory 16 bytes past a page (where
 * NumPy's data begin) and a new device buffer, through a new page-locked
 * ring of 64 MiB (or of two transfers), on as many threads as a staged
 * transfer of that size takes, on a new non-blocking stream (`legacy`:
 * the legacy stream, as PyGPU's copies with no stream given).  For the
 * bench. */
static PyObject *ll_bare_loop(PyObject *m, PyObject *args)
{
    int up, windows, reps, legacy = 0;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "pnii|p:_bare_loop", &up, &n, &windows, &reps, &legacy))
        return NULL;
    if (n <= 0 || windows < 1 || windows > PYGPU_BARE_WINDOWS || reps < 1)
        return PyErr_Format(PyExc_ValueError, "_bare_loop(): nbytes (%zd) and reps (%d) must be positive and "
                            "windows (%d) from 1 to %d", n, reps, windows, PYGPU_BARE_WINDOWS);
    size_t nbytes = (size_t)n, ring_bytes = 2 * nbytes > (64u << 20) ? 2 * nbytes : (64u << 20);
    size_t host_bytes = (nbytes + 16 + 4095) & ~(size_t)4095;
    char *host = aligned_alloc(4096, host_bytes), *dev = NULL, *ring = NULL;
    if (!host)
        return PyErr_NoMemory();
    memset(host, 3, host_bytes);
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    int threads = pygpu_transfer_threads(&cfg, nbytes, 0);
    pygpu_stream_t s = PYGPU_STREAM_NULL;
    pygpu_event_t ev[PYGPU_BARE_WINDOWS] = {0};
    const char *call = "Malloc";
    double median = 0;
    pygpu_status r;
    Py_BEGIN_ALLOW_THREADS
    r = pygpu_rt_malloc((void **)&dev, nbytes);
    if (r == 0 && (call = "MallocHost", r = pygpu_rt_host_alloc((void **)&ring, ring_bytes)) == 0)
        memset(ring, 0, ring_bytes);
    if (r == 0 && !legacy)
        call = "StreamCreate", r = pygpu_rt_stream_create(&s, PYGPU_STREAM_NON_BLOCKING, 0);
    for (int k = 0; r == 0 && k < windows; k++)
        call = "EventCreateWithFlags", r = pygpu_rt_event_create(&ev[k], PYGPU_EVENT_DISABLE_TIMING);
    if (r == 0)
        r = pygpu_bare_loop(up, host + 16, dev, ring, ring_bytes, nbytes, windows, threads, reps, s, ev, &median,
                            &call);
    if (r != 0)             /* (nothing queued may still use what is freed below) */
        (void)pygpu_rt_stream_synchronize(s);
    for (int k = 0; k < windows; k++)
        if (ev[k])
            (void)pygpu_rt_event_destroy(ev[k]);
    if (s)
        (void)pygpu_rt_stream_destroy(s);
    if (ring)
        (void)pygpu_rt_host_free(ring);
    if (dev)
        (void)pygpu_rt_free(dev);
    Py_END_ALLOW_THREADS
    free(host);
    if (pygpu_check(PyModule_GetState(m), r, call) < 0)
        return NULL;
    return PyFloat_FromDouble(median);
}

#ifdef PYGPU_MARKS
static _Thread_local long long pygpu_marks_ns[PYGPU_MARKS_N];

void pygpu_mark(int i)
{
    struct timespec ts;
    if (i == 0)
        memset(pygpu_marks_ns, 0, sizeof pygpu_marks_ns);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    pygpu_marks_ns[i] = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
#endif

/* _marks(): the times (ns) at the marks of this thread's last call (0 where
 * it passed none), or None where the build has no marks (marks.h). */
static PyObject *ll_marks(PyObject *m, PyObject *unused)
{
    (void)m, (void)unused;
#ifdef PYGPU_MARKS
    PyObject *t = PyTuple_New(PYGPU_MARKS_N);
    for (int i = 0; t && i < PYGPU_MARKS_N; i++) {
        PyObject *v = PyLong_FromLongLong(pygpu_marks_ns[i]);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
#else
    Py_RETURN_NONE;
#endif
}

static PyMethodDef lowlevel_methods[] = {
    {"_get_last_error", (PyCFunction)(void (*)(void))ll_get_last_error, METH_VARARGS | METH_KEYWORDS,
     "_get_last_error(peek=False)\n--\n\nThe runtime's last error code (cleared unless `peek`)."},
    {"_device_reset", ll_device_reset, METH_NOARGS,
     "_device_reset()\n--\n\nReset the current device (every allocation on it dies); the status code."},
    {"_host_register", ll_host_register, METH_VARARGS,
     "_host_register(address, nbytes, /)\n--\n\nPage-lock host memory; the status code."},
    {"_stream_begin_capture", ll_stream_begin_capture, METH_VARARGS,
     "_stream_begin_capture(handle, mode=0, /)\n--\n\nBegin a graph capture of the stream (0 global, 1 "
     "thread-local, 2 relaxed; for tests); the status code."},
    {"_stream_end_capture", ll_stream_end_capture, METH_O,
     "_stream_end_capture(handle, /)\n--\n\nEnd the stream's graph capture, its graph discarded (for tests); "
     "the status code."},
    {"_bus_hold", ll_bus_hold, METH_VARARGS,
     "_bus_hold(device, up, delta, /)\n--\n\nCount `delta` more bulk copies in flight on the device in that "
     "direction, as another thread's (for tests); the new count."},
    {"_bus_kernel_copies", ll_bus_kernel_copies, METH_NOARGS,
     "_bus_kernel_copies()\n--\n\nHow many copies between host and device PyGPU's copy kernel has carried "
     "beside another thread's bulk copy (for tests)."},
    {"_bare_loop", ll_bare_loop, METH_VARARGS,
     "_bare_loop(up, nbytes, windows, reps, legacy=False, /)\n--\n\nThe median seconds of one transfer of the "
     "staging's floor: the same host copies and DMAs in `windows` windows, with nothing around them, on a "
     "non-blocking stream of its own (`legacy`: the legacy stream) (for the bench)."},
    {"_marks", ll_marks, METH_NOARGS,
     "_marks()\n--\n\nThe times (ns) at the marks of this thread's last call, or None where the build has "
     "none (research builds with -DPYGPU_MARKS; tools/research/call-marks.py)."},
    {"_events_kept", ll_events_kept, METH_VARARGS,
     "_events_kept(device, /)\n--\n\nHow many events PyGPU keeps for reuse on the device (for tests)."},
    {"_host_unregister", ll_host_unregister, METH_O,
     "_host_unregister(address, /)\n--\n\nUndo _host_register; the status code."},
    {0},
};

int pygpu_lowlevel_init(PyObject *m, pygpu_state *st)
{
    (void)st;
    PyTypeObject *tp = (PyTypeObject *)PyType_FromModuleAndSpec(m, &hostbuf_spec, NULL);
    if (!tp)
        return -1;
    int r = PyModule_AddType(m, tp);
    Py_DECREF(tp);
    return r < 0 ? -1 : PyModule_AddFunctions(m, lowlevel_methods);
}
