/*
 * stream.c -- the Stream type, the current stream (`with stream:`, kept in
 * a context-variable chain of state.c: per thread, and per task under
 * asyncio), stream arguments, and the stream bookkeeping of arrays: the
 * record of the stream of an array's last work (which the CUDA Array
 * Interface and DLPack hand to consumers) and ordering one stream after
 * another.
 */
#include "pygpu.h"
#include "stream.h"
#include "device.h"
#include "errors.h"
#include "fork.h"
#include "state.h"

/* 0 if `s` is still the runtime's; -1 with a GPUError if it was made
 * before a reset of its device (the special streams never are). */
static int stream_live(pygpu_state *st, const PyGPUStream *s)
{
    return s->device < 0 ? 0 : pygpu_reset_check(st, s->device, s->resets, "stream");
}

PyObject *pygpu_current_stream(pygpu_state *st)
{
    PyObject *link = NULL;
    if (PyContextVar_Get(st->stream_var, NULL, &link) < 0)
        return NULL;
    if (!link || !PyTuple_Check(link)) {      /* unset, or None outside any `with` */
        Py_XDECREF(link);
        return Py_NewRef(st->null_stream);
    }
    PyObject *s = Py_NewRef(PyTuple_GET_ITEM(link, 0));
    Py_DECREF(link);
    if (stream_live(st, (PyGPUStream *)s) < 0)
        Py_CLEAR(s);
    return s;
}

/* The handle of `obj`'s __cuda_stream__ (the bound method `method`), which
 * returns (version, handle) with version 0; 0, or -1 with an exception. */
static int cuda_stream_protocol(pygpu_state *st, PyObject *obj, PyObject *method, pygpu_stream_t *out)
{
    PyObject *r = PyObject_CallNoArgs(method);
    if (!r)
        return -1;
    int rc = -1;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2 || !PyLong_Check(PyTuple_GET_ITEM(r, 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(r, 1)) || PyBool_Check(PyTuple_GET_ITEM(r, 1))) {
        PyErr_Format(PyExc_TypeError, "%.100s.__cuda_stream__() must return (version, handle), two ints, not %R",
                     Py_TYPE(obj)->tp_name, r);
    } else {
        long version = PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
        if (version == -1 && PyErr_Occurred())
            ;
        else if (version != 0)
            PyErr_Format(PyExc_ValueError, "%.100s.__cuda_stream__() gives version %ld of the protocol; PyGPU "
                         "reads version 0", Py_TYPE(obj)->tp_name, version);
        else
            rc = pygpu_stream_arg(st, PyTuple_GET_ITEM(r, 1), out);
    }
    Py_DECREF(r);
    return rc;
}

int pygpu_stream_arg(pygpu_state *st, PyObject *obj, pygpu_stream_t *out)
{
    if (pygpu_fork_check(st) < 0)   /* (every transfer names its stream: the door for a forked child) */
        return -1;
    if (obj == NULL || obj == Py_None) {
        PyObject *s = pygpu_current_stream(st);
        if (!s)
            return -1;
        *out = ((PyGPUStream *)s)->handle;
        Py_DECREF(s);
        return 0;
    }
    if (PyObject_TypeCheck(obj, st->Stream)) {
        *out = ((PyGPUStream *)obj)->handle;
        return stream_live(st, (PyGPUStream *)obj);
    }
    if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        /* A raw handle (another library's stream): the caller keeps it alive. */
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (overflow < 0 || (!overflow && v < 0)) {
            PyErr_Format(PyExc_ValueError, "stream handle %R is negative: a handle is an address (an int >= 0)",
                         obj);
            return -1;
        }
        void *h = PyLong_AsVoidPtr(obj);
        if (h == NULL && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "stream handle %R does not fit in a pointer", obj);
            return -1;
        }
        *out = h;
        return 0;
    }
    PyObject *proto = PyObject_GetAttr(obj, st->names.cuda_stream_attr);
    if (proto) {
        int r = cuda_stream_protocol(st, obj, proto, out);
        Py_DECREF(proto);
        return r;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "stream must be a pygpu.Stream, an object with __cuda_stream__, an int handle or "
                 "None, not %.100s", Py_TYPE(obj)->tp_name);
    return -1;
}

int pygpu_stream_owner(pygpu_state *st, PyObject *obj, pygpu_stream_t h)
{
    if (obj == NULL || obj == Py_None || PyLong_Check(obj))
        return 0;
    if (PyObject_TypeCheck(obj, st->Stream))
        return ((PyGPUStream *)obj)->owned && ((PyGPUStream *)obj)->handle == h;
    return 1;               /* (an object that pygpu_stream_arg took by its __cuda_stream__) */
}

pygpu_stream_t pygpu_current_stream_on(PyObject *current, int dev)
{
    PyGPUStream *s = (PyGPUStream *)current;
    return s->device >= 0 && s->device != dev ? PYGPU_STREAM_NULL : s->handle;
}

int pygpu_stream_for(pygpu_state *st, PyObject *obj, int dev, const char *what, pygpu_stream_t *out)
{
    if (dev < 0)
        return pygpu_stream_arg(st, obj, out);
    if (obj == NULL || obj == Py_None) {
        PyObject *cur = pygpu_current_stream(st);
        if (!cur)
            return -1;
        *out = pygpu_current_stream_on(cur, dev);
        Py_DECREF(cur);
        return 0;
    }
    if (PyObject_TypeCheck(obj, st->Stream)) {
        int sdev = ((PyGPUStream *)obj)->device;
        if (sdev >= 0 && sdev != dev) {
            PyErr_Format(PyExc_ValueError, "the stream is on device %d but the %s is on device %d", sdev, what,
                         dev);
            return -1;
        }
    }
    return pygpu_stream_arg(st, obj, out);
}

/* ---- the Stream type --------------------------------------------------- */

static PyGPUStream *stream_alloc(PyTypeObject *tp)
{
    PyGPUStream *s = (PyGPUStream *)tp->tp_alloc(tp, 0);
    if (s) {
        s->handle = NULL;
        s->device = -1;
        s->owned = 0;
    }
    return s;
}

static PyObject *stream_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"non_blocking", "priority", NULL};
    int non_blocking = 0;
    PyObject *nb_obj = NULL, *prio_obj = NULL;
    pygpu_state *st = pygpu_state_of_type(tp);
    if (!st || !PyArg_ParseTupleAndKeywords(args, kwds, "|OO:Stream", kwlist, &nb_obj, &prio_obj))
        return NULL;
    if (nb_obj) {       /* a bool (NumPy's too; or an int, PyCUDA's flags), as strict as the priority */
        if (!PyLong_Check(nb_obj) && !PyArray_IsScalar(nb_obj, Bool))
            return PyErr_Format(PyExc_TypeError, "Stream non_blocking must be a bool, not %.100s",
                                Py_TYPE(nb_obj)->tp_name);
        if ((non_blocking = PyObject_IsTrue(nb_obj)) < 0)
            return NULL;
    }
    int priority = 0;
    if (prio_obj) {
        if (!PyLong_Check(prio_obj) || PyBool_Check(prio_obj))
            return PyErr_Format(PyExc_TypeError, "Stream priority must be an int, not %.100s",
                                Py_TYPE(prio_obj)->tp_name);
        int overflow = 0;
        long p = PyLong_AsLongAndOverflow(prio_obj, &overflow);
        if (p == -1 && PyErr_Occurred())
            return NULL;
        if (overflow)           /* clamped to the device's range, as any priority */
            p = overflow < 0 ? INT_MIN : INT_MAX;
        priority = p < INT_MIN ? INT_MIN : p > INT_MAX ? INT_MAX : (int)p;
    }
    int dev = pygpu_current_device(st);
    if (dev < 0)
        return NULL;
    PyGPUStream *s = stream_alloc(tp);
    if (!s)
        return NULL;
    s->flags = non_blocking ? PYGPU_STREAM_NON_BLOCKING : 0;
    s->device = dev;
    s->resets = pygpu_reset_count(dev);
    if (pygpu_check(st, pygpu_rt_stream_create(&s->handle, s->flags, priority), "StreamCreateWithPriority") < 0) {
        Py_DECREF(s);
        return NULL;
    }
    s->owned = 1;
    return (PyObject *)s;
}

static void stream_dealloc(PyObject *self)
{
    PyGPUStream *s = (PyGPUStream *)self;
    PyTypeObject *tp = Py_TYPE(self);
    if (s->owned && s->handle && !pygpu_fork_broken() && !pygpu_reset_since(s->device, s->resets)) {
        /* Pending work completes; the runtime releases the stream after it. */
        pygpu_rt_stream_destroy(s->handle);
        (void)pygpu_rt_get_last_error();
    }
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *stream_repr(PyObject *self)
{
    PyGPUStream *s = (PyGPUStream *)self;
    if (s->handle == PYGPU_STREAM_NULL)
        return PyUnicode_FromString("<pygpu.Stream null (legacy default)>");
    if (s->handle == PYGPU_STREAM_PER_THREAD)
        return PyUnicode_FromString("<pygpu.Stream per-thread default>");
    return PyUnicode_FromFormat("<pygpu.Stream %p on device %d%s>", s->handle, s->device,
                                (s->flags & PYGPU_STREAM_NON_BLOCKING) ? ", non-blocking" : "");
}

static PyObject *stream_int(PyObject *self) { return PyLong_FromVoidPtr(((PyGPUStream *)self)->handle); }

static Py_hash_t stream_hash(PyObject *self)
{
    Py_hash_t h = (Py_hash_t)(uintptr_t)((PyGPUStream *)self)->handle;
    return h == -1 ? -2 : h;
}

static PyObject *stream_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = ((PyGPUStream *)a)->handle == ((PyGPUStream *)b)->handle;
    return PyBool_FromLong(eq == (op == Py_EQ));
}

static PyObject *stream_ptr(PyObject *self, void *c)
{
    (void)c;
    return stream_int(self);
}

static PyObject *stream_device(PyObject *self, void *c)
{
    (void)c;
    PyGPUStream *s = (PyGPUStream *)self;
    if (s->device >= 0)
        return PyLong_FromLong(s->device);
    pygpu_state *st = pygpu_state_of(self);
    int dev = st ? pygpu_current_device(st) : -1;
    return dev < 0 ? NULL : PyLong_FromLong(dev);
}

static PyObject *stream_priority(PyObject *self, void *c)
{
    (void)c;
    pygpu_state *st = pygpu_state_of(self);
    int p = 0;
    if (!st || stream_live(st, (PyGPUStream *)self) < 0 ||
        pygpu_check(st, pygpu_rt_stream_priority(((PyGPUStream *)self)->handle, &p), "StreamGetPriority") < 0)
        return NULL;
    return PyLong_FromLong(p);
}

static PyObject *stream_non_blocking(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong((((PyGPUStream *)self)->flags & PYGPU_STREAM_NON_BLOCKING) != 0);
}

static PyObject *stream_synchronize(PyObject *self, PyObject *unused)
{
    (void)unused;
    pygpu_state *st = pygpu_state_of(self);
    pygpu_stream_t h = ((PyGPUStream *)self)->handle;
    pygpu_status s;
    if (!st || pygpu_fork_check(st) < 0 || stream_live(st, (PyGPUStream *)self) < 0 ||
        pygpu_capture_refuse(st, h, 0, "Stream.synchronize()", "Synchronize after the capture has ended.") < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    s = pygpu_rt_stream_synchronize(h);
    Py_END_ALLOW_THREADS
    if (pygpu_check(st, s, "StreamSynchronize") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *stream_query(PyObject *self, PyObject *unused)
{
    (void)unused;
    pygpu_state *st = pygpu_state_of(self);
    if (!st || pygpu_fork_check(st) < 0 || stream_live(st, (PyGPUStream *)self) < 0)
        return NULL;
    return pygpu_query_result(st, pygpu_rt_stream_query(((PyGPUStream *)self)->handle), "StreamQuery");
}

static PyObject *stream_wait_event(PyObject *self, PyObject *ev)
{
    pygpu_state *st = pygpu_state_of(self);
    if (!st)
        return NULL;
    if (!PyObject_TypeCheck(ev, st->Event))
        return PyErr_Format(PyExc_TypeError, "wait_event() takes a pygpu.Event, not %.100s",
                            Py_TYPE(ev)->tp_name);
    if (stream_live(st, (PyGPUStream *)self) < 0 || pygpu_event_live(st, (PyGPUEvent *)ev) < 0 ||
        pygpu_check(st, pygpu_rt_stream_wait_event(((PyGPUStream *)self)->handle, ((PyGPUEvent *)ev)->handle),
                    "StreamWaitEvent") < 0)
        return NULL;
    Py_RETURN_NONE;
}

int pygpu_event_live(pygpu_state *st, const PyGPUEvent *e)
{
    return pygpu_reset_check(st, e->device, e->resets, "event");
}

int pygpu_event_record_on(pygpu_state *st, PyGPUEvent *e, PyObject *stream)
{
    pygpu_stream_t h;
    int prev;
    if (pygpu_event_live(st, e) < 0 || pygpu_stream_for(st, stream, e->device, "event", &h) < 0 ||
        pygpu_device_enter(st, e->device, &prev) < 0)
        return -1;
    pygpu_status r = pygpu_rt_event_record(e->handle, h);
    if (pygpu_device_leave(st, prev) < 0 || pygpu_check(st, r, "EventRecord") < 0)
        return -1;
    e->recorded = 1;
    return 0;
}

static PyObject *stream_record(PyObject *self, PyObject *args)
{
    pygpu_state *st = pygpu_state_of(self);
    PyObject *ev = Py_None;
    if (!st || !PyArg_ParseTuple(args, "|O:record", &ev))
        return NULL;
    if (ev == Py_None)
        ev = PyObject_CallNoArgs((PyObject *)st->Event);
    else if (PyObject_TypeCheck(ev, st->Event))
        Py_INCREF(ev);
    else
        return PyErr_Format(PyExc_TypeError, "record() takes a pygpu.Event or None, not %.100s",
                            Py_TYPE(ev)->tp_name);
    if (!ev)
        return NULL;
    if (pygpu_event_record_on(st, (PyGPUEvent *)ev, self) < 0)
        Py_CLEAR(ev);
    return ev;
}

static PyObject *stream_cuda_stream(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("(iN)", 0, PyLong_FromVoidPtr(((PyGPUStream *)self)->handle));
}

static PyObject *stream_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    pygpu_state *st = pygpu_state_of(self);
    if (!st || pygpu_ctxstack_push(st->stream_var, self) < 0)
        return NULL;
    return Py_NewRef(self);
}

static PyObject *stream_exit(PyObject *self, PyObject *args)
{
    (void)args;
    pygpu_state *st = pygpu_state_of(self);
    PyObject *top = st ? pygpu_ctxstack_pop(st->stream_var) : NULL;
    if (!top)
        return NULL;
    int same = top == self;
    Py_DECREF(top);
    if (!same) {
        PyErr_SetString(PyExc_RuntimeError, "stream contexts exited out of order");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyGetSetDef stream_getset[] = {
    {"ptr", stream_ptr, NULL, "The stream's handle (cudaStream_t / hipStream_t) as an int.", NULL},
    {"handle", stream_ptr, NULL, "Same as ptr.", NULL},
    {"device", stream_device, NULL, "The device the stream belongs to.", NULL},
    {"priority", stream_priority, NULL, "The stream's priority (lower is more urgent).", NULL},
    {"non_blocking", stream_non_blocking, NULL, "True if the stream does not wait for the legacy default stream.", NULL},
    {0},
};

static PyMethodDef stream_methods[] = {
    {"synchronize", stream_synchronize, METH_NOARGS,
     "synchronize()\n--\n\nWait until all work queued on the stream is done."},
    {"query", stream_query, METH_NOARGS, "query()\n--\n\nTrue if all work queued on the stream is done."},
    {"wait_event", stream_wait_event, METH_O,
     "wait_event(event, /)\n--\n\nMake later work on this stream wait for `event`."},
    {"record", stream_record, METH_VARARGS,
     "record(event=None, /)\n--\n\nRecord `event` (or a new Event) on this stream; return it."},
    {"__cuda_stream__", stream_cuda_stream, METH_NOARGS,
     "__cuda_stream__()\n--\n\n(0, handle): the CUDA stream protocol (version 0), as cuda.core reads it."},
    {"__enter__", stream_enter, METH_NOARGS, NULL},
    {"__exit__", stream_exit, METH_VARARGS, NULL},
    {0},
};

static PyType_Slot stream_slots[] = {
    {Py_tp_doc, "Stream(non_blocking=False, priority=0)\n--\n\n"
                "A stream of the current device.  `with stream:` makes it the\n"
                "current stream for PyGPU operations in this thread."},
    {Py_tp_new, stream_new},
    {Py_tp_dealloc, stream_dealloc},
    {Py_tp_repr, stream_repr},
    {Py_tp_hash, stream_hash},
    {Py_tp_richcompare, stream_richcompare},
    {Py_nb_int, stream_int},
    {Py_tp_getset, stream_getset},
    {Py_tp_methods, stream_methods},
    {0, NULL},
};

static PyType_Spec stream_spec = {
    .name = "pygpu.Stream",
    .basicsize = sizeof(PyGPUStream),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_BASETYPE,
    .slots = stream_slots,
};

/* A Stream object for one of the runtime's special handles; new reference. */
static PyObject *special_stream(pygpu_state *st, pygpu_stream_t handle)
{
    PyGPUStream *s = stream_alloc(st->Stream);
    if (s)
        s->handle = handle;
    return (PyObject *)s;
}

int pygpu_stream_init(PyObject *m, pygpu_state *st)
{
    st->Stream = (PyTypeObject *)PyType_FromModuleAndSpec(m, &stream_spec, NULL);
    if (!st->Stream)
        return -1;
    st->null_stream = special_stream(st, PYGPU_STREAM_NULL);
    st->per_thread_stream = special_stream(st, PYGPU_STREAM_PER_THREAD);
    if (!st->null_stream || !st->per_thread_stream ||
        PyDict_SetItemString(st->Stream->tp_dict, "null", st->null_stream) < 0 ||
        PyDict_SetItemString(st->Stream->tp_dict, "per_thread", st->per_thread_stream) < 0)
        return -1;
    PyType_Modified(st->Stream);
    return PyModule_AddType(m, st->Stream);
}

/* ---- module functions --------------------------------------------------- */

static PyObject *mod_current_stream(PyObject *m, PyObject *unused)
{
    (void)unused;
    return pygpu_current_stream(pygpu_module_state(m));
}

static PyObject *mod_stream_priority_range(PyObject *m, PyObject *unused)
{
    (void)unused;
    int least = 0, greatest = 0;
    if (pygpu_fork_check(pygpu_module_state(m)) < 0 || pygpu_check(pygpu_module_state(m), pygpu_rt_stream_priority_range(&least, &greatest),
                    "DeviceGetStreamPriorityRange") < 0)
        return NULL;
    return Py_BuildValue("(ii)", least, greatest);
}

static PyMethodDef stream_functions[] = {
    {"current_stream", mod_current_stream, METH_NOARGS,
     "current_stream()\n--\n\nThe innermost `with stream:` of this thread, else Stream.null."},
    {"stream_priority_range", mod_stream_priority_range, METH_NOARGS,
     "stream_priority_range()\n--\n\n(least, greatest) stream priority of the current device."},
    {0},
};

int pygpu_stream_functions_init(PyObject *m) { return PyModule_AddFunctions(m, stream_functions); }

/* ---- the stream of an array's pending work (for __cuda_array_interface__ and DLPack) ---- */

static int special_handle(pygpu_stream_t s)
{
    return s == PYGPU_STREAM_NULL || s == PYGPU_STREAM_PER_THREAD || s == (pygpu_stream_t)1;
}

void pygpu_array_set_last_stream(pygpu_state *st, PyGPUArray *a, PyObject *stream, pygpu_stream_t s)
{
    PyGPUArray *root = pygpu_array_root(a);
    PyObject *ref = NULL, *cur = NULL;
    if (!special_handle(s)) {
        /* A created Stream must outlive the record of it; an int handle is
         * the caller's to keep alive. */
        if ((stream == NULL || stream == Py_None) && (cur = pygpu_current_stream(st)) == NULL)
            PyErr_Clear();  /* (only with no memory left: the record then keeps no reference) */
        PyObject *obj = cur ? cur : stream;
        if (obj && pygpu_stream_owner(st, obj, s))
            ref = obj;
    }
    root->last_stream = s;
    Py_XSETREF(root->last_stream_ref, Py_XNewRef(ref));
    Py_XDECREF(cur);
}

int pygpu_stream_capturing(pygpu_stream_t s)
{
    int how = PYGPU_CAPTURE_NONE;
    if (pygpu_rt_stream_capturing(s, &how) != 0) {
        (void)pygpu_rt_get_last_error();
        return PYGPU_CAPTURE_NONE;
    }
    return how;
}

int pygpu_capture_refused(pygpu_state *st, pygpu_stream_t s, int how, const char *what, const char *instead)
{
    if (how == PYGPU_CAPTURE_NONE)
        return 0;
    if (how == PYGPU_CAPTURE_IMPLICIT)
        PyErr_Format(st->GPUError, "%s: the legacy default stream cannot be used while a stream that waits for it "
                     "is being captured into a graph (using it would invalidate that capture; nothing was queued). "
                     "Use a stream of your own (pygpu.Stream(non_blocking=True)) or end the capture first", what);
    else if (how == PYGPU_CAPTURE_INVALIDATED)
        PyErr_Format(st->GPUError, "%s: stream %p is in a graph capture that was invalidated by an earlier call; "
                     "end the capture (it fails) and begin it again", what, s);
    else
        PyErr_Format(st->GPUError, "%s cannot join the graph capture of stream %p: it would wait for the host, "
                     "which a graph cannot (nothing was queued, the capture is still valid). %s", what, s,
                     instead ? instead : "End the capture first.");
    return -1;
}

int pygpu_capture_refuse(pygpu_state *st, pygpu_stream_t s, int joins, const char *what, const char *instead)
{
    int how = pygpu_stream_capturing(s);
    if (how == PYGPU_CAPTURE_NONE || (how == PYGPU_CAPTURE_ACTIVE && joins))
        return how;
    return pygpu_capture_refused(st, s, how, what, instead);
}

int pygpu_stream_order(pygpu_state *st, int dev, pygpu_stream_t from, pygpu_stream_t to)
{
    if (from == (pygpu_stream_t)1)     /* cudaStreamLegacy names the legacy stream too */
        from = PYGPU_STREAM_NULL;
    if (to == (pygpu_stream_t)1)
        to = PYGPU_STREAM_NULL;
    if (from == to)
        return 0;
    int prev;
    if (pygpu_device_enter(st, dev, &prev) < 0)
        return -1;
    /* A wait between a capture and anything outside it would break the
     * capture (the legacy stream, or a stream not in it): none is made.
     * Two streams of one capture are ordered as any two (fork and join). */
    int from_cap = pygpu_stream_capturing(from), to_cap = pygpu_stream_capturing(to);
    if ((from_cap || to_cap) && !(from_cap == PYGPU_CAPTURE_ACTIVE && to_cap == PYGPU_CAPTURE_ACTIVE))
        return pygpu_device_leave(st, prev);
    pygpu_event_t e = NULL;
    const char *call = "EventCreateWithFlags";
    pygpu_status s = pygpu_rt_event_create(&e, PYGPU_EVENT_DISABLE_TIMING);
    if (s == 0) {
        call = "EventRecord";
        s = pygpu_rt_event_record(e, from);
    }
    if (s == 0) {
        call = "StreamWaitEvent";
        s = pygpu_rt_stream_wait_event(to, e);
    }
    if (e && pygpu_rt_event_destroy(e) != 0)   /* (released once the wait has passed it) */
        (void)pygpu_rt_get_last_error();
    int r = pygpu_check(st, s, call);
    if (r < 0) {
        if (pygpu_rt_set_device(prev) != 0)
            (void)pygpu_rt_get_last_error();
        return -1;
    }
    return pygpu_device_leave(st, prev);
}
