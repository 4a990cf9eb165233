/*
 * settings_py.c -- the Python face of the transfer machinery: its settings
 * (transfer_config), the pinned pool's limit and statistics, and the one
 * call that readies the machinery at module init.
 */
#include "../pygpu.h"
#include "settings_py.h"
#include "background.h"
#include "events.h"
#include "lanes.h"
#include "pinned_pool.h"
#include "pipeline.h"
#include "settings.h"
#include "trace.h"
#include "workers.h"
#include "../convert.h"
#include "../copy/copy.h"
#include "../registered.h"
#include "../shape.h"

static PyObject *config_dict(void)
{
    pygpu_transfer_config c;
    pygpu_transfer_config_get(&c);
    return Py_BuildValue("{s:n,s:i,s:i,s:i,s:N,s:O,s:n,s:n,s:i,s:n,s:O}", "chunk", (Py_ssize_t)c.chunk, "depth",
                         c.depth, "threads", c.threads, "threads_alone", c.threads_alone, "min_bytes",
                         c.min_bytes == SIZE_MAX ? Py_NewRef(Py_None) : PyLong_FromSize_t(c.min_bytes),
                         "peer", c.peer ? Py_True : Py_False, "crowd_up", (Py_ssize_t)c.crowd_up, "crowd_down",
                         (Py_ssize_t)c.crowd_down, "crowd_threads", c.crowd_threads, "register_limit",
                         (Py_ssize_t)c.register_limit, "numa", c.numa ? Py_True : Py_False);
}

/* A crowded lane's chunk: 0 (the chunk setting's) or at least 4096 bytes. */
static int crowd_arg(PyObject *arg, const char *name, size_t *out)
{
    size_t v;
    if (pygpu_size_arg(arg, name, &v) < 0)
        return -1;
    if (v != 0 && v < 4096) {
        PyErr_Format(PyExc_ValueError, "%s must be 0 (as chunk) or at least 4096 bytes, not %zu", name, v);
        return -1;
    }
    *out = v;
    return 0;
}

/* A switch: True or False, nothing else. */
static int bool_arg(PyObject *arg, const char *name, int *out)
{
    if (!PyBool_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s must be True or False, not %.100s", name, Py_TYPE(arg)->tp_name);
        return -1;
    }
    *out = arg == Py_True;
    return 0;
}

/* A thread count that may be 0 (as threads): 0..64. */
static int thread_count_arg(PyObject *arg, const char *name, int *out)
{
    size_t v;
    if (pygpu_size_arg(arg, name, &v) < 0)
        return -1;
    if (v > 64) {
        PyErr_Format(PyExc_ValueError, "%s must be 0 (as threads) or 1..64, not %zu", name, v);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static PyObject *transfer_config(PyObject *m, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"chunk",    "depth",      "threads",       "threads_alone",  "min_bytes", "peer",
                             "crowd_up", "crowd_down", "crowd_threads", "register_limit", "numa",      NULL};
    PyObject *chunk = NULL, *depth = NULL, *threads = NULL, *threads_alone = NULL, *min_bytes = NULL, *peer = NULL,
             *crowd_up = NULL, *crowd_down = NULL, *crowd_threads = NULL, *register_limit = NULL, *numa = NULL;
    pygpu_transfer_config c;
    size_t v;
    (void)m;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOOOOOOOOOO:transfer_config", kwlist, &chunk, &depth, &threads,
                                     &threads_alone, &min_bytes, &peer, &crowd_up, &crowd_down, &crowd_threads,
                                     &register_limit, &numa))
        return NULL;
    pygpu_transfer_config_get(&c);
    if (chunk) {
        if (pygpu_size_arg(chunk, "chunk", &v) < 0)
            return NULL;
        if (v < 4096)
            return PyErr_Format(PyExc_ValueError, "chunk must be at least 4096 bytes, not %zu", v);
        c.chunk = v;
    }
    if (depth) {
        if (pygpu_size_arg(depth, "depth", &v) < 0)
            return NULL;
        if (v < 2 || v > 16)
            return PyErr_Format(PyExc_ValueError, "depth must be 2..16, not %zu", v);
        c.depth = (int)v;
    }
    if (threads) {
        if (pygpu_size_arg(threads, "threads", &v) < 0)
            return NULL;
        if (v < 1 || v > 64)
            return PyErr_Format(PyExc_ValueError, "threads must be 1..64, not %zu", v);
        c.threads = (int)v;
        c.threads_alone = c.crowd_threads = 0;  /* (a count asked for holds for every transfer, unless the
                                                 * others are given too) */
    }
    if (threads_alone && thread_count_arg(threads_alone, "threads_alone", &c.threads_alone) < 0)
        return NULL;
    if (crowd_threads && thread_count_arg(crowd_threads, "crowd_threads", &c.crowd_threads) < 0)
        return NULL;
    if (min_bytes) {
        if (min_bytes == Py_None)
            v = SIZE_MAX;
        else if (pygpu_size_arg(min_bytes, "min_bytes", &v) < 0)
            return NULL;
        c.min_bytes = v;
    }
    if (peer && bool_arg(peer, "peer", &c.peer) < 0)
        return NULL;
    if (numa && bool_arg(numa, "numa", &c.numa) < 0)
        return NULL;
    if (crowd_up && crowd_arg(crowd_up, "crowd_up", &c.crowd_up) < 0)
        return NULL;
    if (crowd_down && crowd_arg(crowd_down, "crowd_down", &c.crowd_down) < 0)
        return NULL;
    if (register_limit && pygpu_size_arg(register_limit, "register_limit", &c.register_limit) < 0)
        return NULL;
    if (chunk || depth || threads || threads_alone || min_bytes || peer || crowd_up || crowd_down || crowd_threads ||
        numa) {
        Py_BEGIN_ALLOW_THREADS
        pygpu_transfer_config_set(&c);
        pygpu_staging_release();        /* buffers of the old size go back to the pool */
        Py_END_ALLOW_THREADS
    } else if (register_limit) {
        pygpu_transfer_config_set(&c);
    }
    if (register_limit)
        pygpu_registered_trim(c.register_limit);        /* (a lower limit: the least recently used go) */
    return config_dict();
}

static PyObject *pinned_pool_stats(PyObject *m, PyObject *unused)
{
    pygpu_pinned_stats s;
    (void)m;
    (void)unused;
    pygpu_copy_reap();          /* (finished background transfers' blocks are back) */
    pygpu_pinned_stats_get(&s);
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:i}", "limit", (Py_ssize_t)s.limit, "in_use",
                         (Py_ssize_t)s.in_use, "cached", (Py_ssize_t)s.cached, "hits", (Py_ssize_t)s.hits, "misses",
                         (Py_ssize_t)s.misses, "placed", (Py_ssize_t)s.placed, "unplaced", (Py_ssize_t)s.unplaced,
                         "background", pygpu_bg_pending());
}

static PyObject *set_pinned_pool_limit(PyObject *m, PyObject *arg)
{
    size_t v;
    (void)m;
    if (pygpu_size_arg(arg, "limit", &v) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pygpu_pinned_set_limit(v);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *trim_pinned_pool(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    pygpu_copy_reap();
    Py_BEGIN_ALLOW_THREADS
    pygpu_staging_release();
    pygpu_pinned_trim();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *is_pinned(PyObject *m, PyObject *obj)
{
    Py_buffer view;
    int pinned = 0;
    (void)m;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();  /* a strided array: ask about the bytes it spans */
        if (PyObject_GetBuffer(obj, &view, PyBUF_STRIDED_RO) < 0)
            return NULL;
    }
    if (view.len > 0) {
        ptrdiff_t lo = 0, hi = view.itemsize;
        if (view.shape && view.strides)
            pygpu_shape_extent(view.ndim, view.shape, view.strides, view.itemsize, &lo, &hi);
        else
            hi = view.len;
        (void)pygpu_rt_host_is_pinned((const char *)view.buf + lo, (size_t)(hi - lo), &pinned);
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(pinned);
}

static PyObject *registered_stats(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return pygpu_registered_stats();
}

static PyMethodDef transfer_functions[] = {
    {"registered_stats", registered_stats, METH_NOARGS,
     "registered_stats()\n--\n\n{'buffers', 'bytes', 'limit', 'registered', 'released', 'refused'}: the users'\n"
     "host buffers page-locked in place now (transfer_config's register_limit), and the registrations made,\n"
     "let go and refused by the runtime so far."},
    {"is_pinned", is_pinned, METH_O,
     "is_pinned(ary, /)\n--\n\nTrue if the host buffer `ary` is page-locked (allocated or registered\n"
     "with the runtime) from its first byte to its last.  On the host backend only memory registered in\n"
     "place (transfer_config's register_limit) reads as page-locked."},
    {"transfer_config", (PyCFunction)(void (*)(void))transfer_config, METH_VARARGS | METH_KEYWORDS,
     "transfer_config(*, chunk=None, depth=None, threads=None, threads_alone=None, min_bytes=None, peer=None,\n"
     "                crowd_up=None, crowd_down=None, crowd_threads=None, register_limit=None, numa=None)\n--\n\n"
     "The staging pipeline's settings as a dict, after changing the ones given:\n"
     "chunk (bytes per staging buffer), depth (buffers in flight), threads (host\n"
     "threads copying each chunk), threads_alone (the same for a transfer of more\n"
     "than depth x chunk bytes while no other is at work in the process; 0: as\n"
     "threads, which setting threads without it also sets), min_bytes (smaller pageable\n"
     "copies, or None for all, go the runtime's own way), peer (copies between\n"
     "devices go peer to peer where the hardware allows; False stages them through\n"
     "pinned host memory), crowd_up and crowd_down (bytes per staging buffer, at\n"
     "most, of an upload or a download that starts while another transfer is at\n"
     "work on its device; 0: as chunk), crowd_threads (host threads copying each\n"
     "chunk of an upload while another transfer is at work on its device; 0: as\n"
     "threads, which setting threads without it also sets), register_limit (bytes of\n"
     "host buffers that synchronous transfers of 4 MiB or more meet twice, page-locked\n"
     "in place until their owner is collected; default an eighth of physical memory on\n"
     "a GPU backend, 0 (none) on the host backend), numa (PyGPU's page-locked blocks for\n"
     "a device, its staging buffers among them, lie on the device's NUMA node where the\n"
     "host tells it: Device.numa_node; default True, PYGPU_NUMA=0 False)."},
    {"pinned_pool_stats", pinned_pool_stats, METH_NOARGS,
     "pinned_pool_stats()\n--\n\n{'limit', 'in_use', 'cached', 'hits', 'misses'} of the pinned pool, "
     "'placed' and 'unplaced': its blocks made for a device on the device's NUMA node, and elsewhere, the kernel "
     "having refused the node (transfer_config's numa), and 'background': asynchronous uploads from and downloads "
     "into pageable memory not yet over (and blocks being page-locked for them)."},
    {"set_pinned_pool_limit", set_pinned_pool_limit, METH_O,
     "set_pinned_pool_limit(nbytes, /)\n--\n\nBound the page-locked memory the pool holds."},
    {"trim_pinned_pool", trim_pinned_pool, METH_NOARGS,
     "trim_pinned_pool()\n--\n\nFree the pool's cached blocks and the staging buffers."},
    {0},
};

int pygpu_transfer_functions_init(PyObject *m) { return PyModule_AddFunctions(m, transfer_functions); }

void pygpu_transfer_init(void)
{
    /* (fork handlers: run in this order before a fork, in reverse after;
     * the trace's last: no lock of the others' is taken under its lock) */
    pygpu_settings_init();
    pygpu_workers_init();
    pygpu_pipeline_init();
    pygpu_pinned_pool_init();
    pygpu_registered_init();
    pygpu_events_init();
    pygpu_trace_init();
}
