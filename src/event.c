/*
 * event.c -- the Event type: markers in a stream, for ordering across
 * streams and for timing.
 */
#include "pygpu.h"
#include "event.h"
#include "device.h"
#include "errors.h"
#include "fork.h"
#include "state.h"
#include "stream.h"

#include <string.h>

static PyObject *event_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"timing", "blocking", "interprocess", NULL};
    int timing = 1, blocking = 0, interprocess = 0;
    pygpu_state *st = pygpu_state_of_type(tp);
    if (!st || !PyArg_ParseTupleAndKeywords(args, kwds, "|ppp:Event", kwlist, &timing, &blocking,
                                            &interprocess))
        return NULL;
    if (interprocess && timing) {
        PyErr_SetString(PyExc_ValueError, "an interprocess Event cannot record timing: pass timing=False");
        return NULL;
    }
    int dev = pygpu_current_device(st);
    if (dev < 0)
        return NULL;
    PyGPUEvent *e = (PyGPUEvent *)tp->tp_alloc(tp, 0);
    if (!e)
        return NULL;
    e->device = dev;
    e->resets = pygpu_reset_count(dev);
    e->recorded = 0;
    e->flags = (timing ? 0 : PYGPU_EVENT_DISABLE_TIMING) | (blocking ? PYGPU_EVENT_BLOCKING_SYNC : 0) |
               (interprocess ? PYGPU_EVENT_INTERPROCESS : 0);
    if (pygpu_check(st, pygpu_rt_event_create(&e->handle, e->flags), "EventCreateWithFlags") < 0) {
        e->handle = NULL;
        Py_DECREF(e);
        return NULL;
    }
    return (PyObject *)e;
}

static void event_dealloc(PyObject *self)
{
    PyGPUEvent *e = (PyGPUEvent *)self;
    PyTypeObject *tp = Py_TYPE(self);
    if (e->handle && !pygpu_fork_broken() && !pygpu_reset_since(e->device, e->resets)) {
        pygpu_rt_event_destroy(e->handle);
        (void)pygpu_rt_get_last_error();
    }
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *event_repr(PyObject *self)
{
    PyGPUEvent *e = (PyGPUEvent *)self;
    return PyUnicode_FromFormat("<pygpu.Event %p on device %d%s>", e->handle, e->device,
                                e->recorded ? "" : ", not recorded");
}

static PyObject *event_record(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"stream", NULL};
    PyObject *stream = Py_None;
    pygpu_state *st = pygpu_state_of(self);
    PyGPUEvent *e = (PyGPUEvent *)self;
    if (!st || !PyArg_ParseTupleAndKeywords(args, kwds, "|O:record", kwlist, &stream) ||
        pygpu_event_record_on(st, e, stream) < 0)
        return NULL;
    return Py_NewRef(self);
}

static int wait_event(pygpu_state *st, PyGPUEvent *e)
{
    pygpu_status s;
    if (pygpu_fork_check(st) < 0 || pygpu_event_live(st, e) < 0)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    s = pygpu_rt_event_synchronize(e->handle);
    Py_END_ALLOW_THREADS
    return pygpu_check(st, s, "EventSynchronize");
}

static PyObject *event_synchronize(PyObject *self, PyObject *unused)
{
    (void)unused;
    pygpu_state *st = pygpu_state_of(self);
    if (!st || wait_event(st, (PyGPUEvent *)self) < 0)
        return NULL;
    return Py_NewRef(self);
}

static PyObject *event_query(PyObject *self, PyObject *unused)
{
    (void)unused;
    pygpu_state *st = pygpu_state_of(self);
    if (!st || pygpu_fork_check(st) < 0 || pygpu_event_live(st, (PyGPUEvent *)self) < 0)
        return NULL;
    return pygpu_query_result(st, pygpu_rt_event_query(((PyGPUEvent *)self)->handle), "EventQuery");
}

/* Check that `e` can be timed; -1 with ValueError saying why not. */
static int timeable(PyGPUEvent *e, const char *which)
{
    if (!e->recorded) {
        PyErr_Format(PyExc_ValueError, "the %s event was never recorded: call record() first", which);
        return -1;
    }
    if (e->flags & PYGPU_EVENT_DISABLE_TIMING) {
        PyErr_Format(PyExc_ValueError, "the %s event was created with timing=False", which);
        return -1;
    }
    return 0;
}

/* Milliseconds from `start` to `end`, waiting for both. */
static PyObject *elapsed(PyObject *start, PyObject *end)
{
    pygpu_state *st = pygpu_state_of(start);
    if (!st)
        return NULL;
    if (!PyObject_TypeCheck(end, st->Event))
        return PyErr_Format(PyExc_TypeError, "expected a pygpu.Event, not %.100s", Py_TYPE(end)->tp_name);
    PyGPUEvent *a = (PyGPUEvent *)start, *b = (PyGPUEvent *)end;
    float ms = 0;
    if (timeable(a, "start") < 0 || timeable(b, "end") < 0 || wait_event(st, a) < 0 ||
        wait_event(st, b) < 0 ||
        pygpu_check(st, pygpu_rt_event_elapsed_ms(&ms, a->handle, b->handle), "EventElapsedTime") < 0)
        return NULL;
    return PyFloat_FromDouble(ms);
}

static PyObject *event_elapsed_time(PyObject *self, PyObject *end) { return elapsed(self, end); }
static PyObject *event_time_till(PyObject *self, PyObject *end) { return elapsed(self, end); }
static PyObject *event_time_since(PyObject *self, PyObject *start)
{
    pygpu_state *st = pygpu_state_of(self);
    if (!st)
        return NULL;
    if (!PyObject_TypeCheck(start, st->Event))
        return PyErr_Format(PyExc_TypeError, "expected a pygpu.Event, not %.100s", Py_TYPE(start)->tp_name);
    return elapsed(start, self);
}

/* ipc_handle(): the bytes with which another process opens this event
 * (Event.from_ipc_handle) to wait for it. */
static PyObject *event_ipc_handle(PyObject *self, PyObject *unused)
{
    (void)unused;
    pygpu_state *st = pygpu_state_of(self);
    PyGPUEvent *e = (PyGPUEvent *)self;
    unsigned char h[PYGPU_IPC_EVENT_HANDLE_BYTES];
    if (!st || pygpu_fork_check(st) < 0 || pygpu_event_live(st, e) < 0)
        return NULL;
    if (!(e->flags & PYGPU_EVENT_INTERPROCESS)) {
        PyErr_SetString(PyExc_ValueError, "ipc_handle(): this event was not made with interprocess=True");
        return NULL;
    }
    if (pygpu_check(st, pygpu_rt_ipc_event_handle(e->handle, h), "IpcGetEventHandle") < 0)
        return NULL;
    return PyBytes_FromStringAndSize((const char *)h, sizeof h);
}

/* Event.from_ipc_handle(handle): another process's interprocess event,
 * opened here (timing off; its record is the other process's to make). */
static PyObject *event_from_ipc_handle(PyObject *cls, PyObject *arg)
{
    PyTypeObject *tp = (PyTypeObject *)cls;
    pygpu_state *st = pygpu_state_of_type(tp);
    Py_buffer b;
    pygpu_event_t h = NULL;
    if (!st || pygpu_fork_check(st) < 0 || PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    if (b.len != PYGPU_IPC_EVENT_HANDLE_BYTES) {
        PyErr_Format(PyExc_ValueError, "Event.from_ipc_handle(): a handle is %d bytes (from Event.ipc_handle()), "
                     "not %zd", PYGPU_IPC_EVENT_HANDLE_BYTES, b.len);
        PyBuffer_Release(&b);
        return NULL;
    }
    unsigned char bytes[PYGPU_IPC_EVENT_HANDLE_BYTES];
    memcpy(bytes, b.buf, sizeof bytes);
    PyBuffer_Release(&b);
    int dev = pygpu_current_device(st);
    if (dev < 0 || pygpu_check(st, pygpu_rt_ipc_event_open(bytes, &h), "IpcOpenEventHandle") < 0)
        return NULL;
    PyGPUEvent *e = (PyGPUEvent *)tp->tp_alloc(tp, 0);
    if (!e) {
        pygpu_rt_event_destroy(h);
        return NULL;
    }
    e->handle = h;
    e->device = dev;
    e->resets = pygpu_reset_count(dev);
    e->recorded = 1;            /* (by the other process: waiting for it is asked for) */
    e->flags = PYGPU_EVENT_INTERPROCESS | PYGPU_EVENT_DISABLE_TIMING;
    return (PyObject *)e;
}

static PyObject *event_ptr(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromVoidPtr(((PyGPUEvent *)self)->handle);
}

static PyObject *event_recorded(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((PyGPUEvent *)self)->recorded);
}

static PyObject *event_timing(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(!(((PyGPUEvent *)self)->flags & PYGPU_EVENT_DISABLE_TIMING));
}

static PyObject *event_device(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromLong(((PyGPUEvent *)self)->device);
}

static PyObject *event_int(PyObject *self) { return event_ptr(self, NULL); }

static PyGetSetDef event_getset[] = {
    {"ptr", event_ptr, NULL, "The event's handle (cudaEvent_t / hipEvent_t) as an int.", NULL},
    {"handle", event_ptr, NULL, "Same as ptr.", NULL},
    {"recorded", event_recorded, NULL, "True once record() has been called.", NULL},
    {"timing", event_timing, NULL, "True if the event records time.", NULL},
    {"device", event_device, NULL, "The device the event was made on.", NULL},
    {0},
};

static PyMethodDef event_methods[] = {
    {"record", (PyCFunction)(void (*)(void))event_record, METH_VARARGS | METH_KEYWORDS,
     "record(stream=None)\n--\n\nRecord the event on `stream` (default: the current stream); return self."},
    {"synchronize", event_synchronize, METH_NOARGS,
     "synchronize()\n--\n\nWait until the recorded work is done; return self."},
    {"query", event_query, METH_NOARGS, "query()\n--\n\nTrue if the recorded work is done."},
    {"elapsed_time", event_elapsed_time, METH_O,
     "elapsed_time(end, /)\n--\n\nMilliseconds from this event to `end`, waiting for both."},
    {"time_till", event_time_till, METH_O,
     "time_till(end, /)\n--\n\nMilliseconds from this event to `end` (PyCUDA's name)."},
    {"time_since", event_time_since, METH_O,
     "time_since(start, /)\n--\n\nMilliseconds from `start` to this event (PyCUDA's name)."},
    {"ipc_handle", event_ipc_handle, METH_NOARGS,
     "ipc_handle()\n--\n\nThe bytes with which another process opens this event (Event.from_ipc_handle) to "
     "wait for it; the event must be made with interprocess=True (and timing=False)."},
    {"from_ipc_handle", event_from_ipc_handle, METH_O | METH_CLASS,
     "from_ipc_handle(handle, /)\n--\n\nAnother process's interprocess event (the bytes of its "
     "ipc_handle()), opened in this one on the current device: streams here may wait for it "
     "(Stream.wait_event), and query() and synchronize() ask about its last record.  Not in the process "
     "that made it."},
    {0},
};

static PyType_Slot event_slots[] = {
    {Py_tp_doc, "Event(timing=True, blocking=False, interprocess=False)\n--\n\n"
                "A marker in a stream, for ordering work across streams and for timing."},
    {Py_tp_new, event_new},
    {Py_tp_dealloc, event_dealloc},
    {Py_tp_repr, event_repr},
    {Py_nb_int, event_int},
    {Py_tp_getset, event_getset},
    {Py_tp_methods, event_methods},
    {0, NULL},
};

static PyType_Spec event_spec = {
    .name = "pygpu.Event",
    .basicsize = sizeof(PyGPUEvent),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_BASETYPE,
    .slots = event_slots,
};

int pygpu_event_init(PyObject *m, pygpu_state *st)
{
    st->Event = (PyTypeObject *)PyType_FromModuleAndSpec(m, &event_spec, NULL);
    return st->Event ? PyModule_AddType(m, st->Event) : -1;
}
