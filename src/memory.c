/*
 * memory.c -- raw device memory: the DeviceAllocation owner, mem_alloc, and
 * the byte copies between allocations, addresses and host buffers.
 *
 * A DeviceAllocation owns one allocation and frees it when it dies (or on
 * free()).  Allocations come from the runtime's stream-ordered pool when the
 * device has one, ordered on a stream, and are given back on that stream.
 */
#include "pygpu.h"
#include "memory.h"
#include "convert.h"
#include "copy/copy.h"
#include "device.h"
#include "errors.h"
#include "fork.h"
#include "state.h"
#include "stream.h"

#include <structmember.h>

/* ---- DeviceAllocation ---------------------------------------------------- */

/* Free `ptr` (pooled, IPC or plain) on device `dev`, ordered on `stream`;
 * with `kept` (pooled memory only), not while a capture records `stream`
 * (or it is the legacy stream while a stream that waits for it is
 * captured): then *kept = 1 and nothing is freed. */
static pygpu_status free_on(void *ptr, int dev, int pooled, int ipc, pygpu_stream_t stream, int *kept)
{
    int prev = -1;
    if (pygpu_fork_broken())
        return 0;               /* the parent's memory: not the child's to free */
    if (pygpu_rt_get_device(&prev) == 0 && prev != dev)
        pygpu_rt_set_device(dev);
    else
        prev = -1;
    if (kept)
        *kept = pooled && pygpu_stream_capturing(stream) != PYGPU_CAPTURE_NONE;
    pygpu_status s = kept && *kept ? 0
                   : pooled ? pygpu_rt_free_async(ptr, stream) : ipc ? pygpu_rt_ipc_free(ptr) : pygpu_rt_free(ptr);
    if (prev >= 0)
        pygpu_rt_set_device(prev);
    return s;
}

/* Take a cached block of `size` bytes on `dev`; 1 if found. */
static int cache_take(pygpu_block_cache *c, int dev, size_t size, void **ptr)
{
    for (int i = c->n - 1; i >= 0; i--) {
        if (c->block[i].size == size && c->block[i].device == dev) {
            *ptr = c->block[i].ptr;
            c->block[i] = c->block[--c->n];
            return 1;
        }
    }
    return 0;
}

/* Keep a freed block; 0 if the cache is full. */
static int cache_put(pygpu_block_cache *c, void *ptr, size_t size, int dev)
{
    if (c->n == PYGPU_CACHE_SLOTS)
        return 0;
    c->block[c->n].ptr = ptr;
    c->block[c->n].size = size;
    c->block[c->n++].device = dev;
    return 1;
}

void pygpu_cache_flush(pygpu_state *st)
{
    pygpu_block_cache *c = &st->cache;
    while (c->n > 0) {
        c->n--;
        if (free_on(c->block[c->n].ptr, c->block[c->n].device, 1, 0, PYGPU_STREAM_NULL, NULL) != 0)
            (void)pygpu_rt_get_last_error();
    }
}

/* Keep the pooled allocation of `m` on st's put-off list (its stream,
 * and the Stream that owns it, with it); 1 if kept. */
static int put_off(pygpu_state *st, PyGPUMemory *m)
{
    pygpu_put_off *q = &st->put_off;
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 8;
        void *more = PyMem_Realloc(q->item, (size_t)cap * sizeof *q->item);
        if (!more)
            return 0;
        q->item = more;
        q->cap = cap;
    }
    q->item[q->n].ptr = m->ptr;
    q->item[q->n].device = m->device;
    q->item[q->n].resets = m->resets;
    q->item[q->n].stream = m->stream;
    q->item[q->n++].stream_ref = m->stream_ref;     /* (the reference moves) */
    m->stream_ref = NULL;
    return 1;
}

void pygpu_memory_put_off_retry(pygpu_state *st)
{
    pygpu_put_off *q = &st->put_off;
    for (int i = 0; i < q->n;) {
        int kept = 0, gone = pygpu_reset_since(q->item[i].device, q->item[i].resets);   /* (died with a reset) */
        pygpu_status s = gone ? 0 : free_on(q->item[i].ptr, q->item[i].device, 1, 0, q->item[i].stream, &kept);
        if (kept) {
            i++;
            continue;
        }
        if (s != 0)
            (void)pygpu_rt_get_last_error();
        Py_CLEAR(q->item[i].stream_ref);
        q->item[i] = q->item[--q->n];
    }
}

void pygpu_memory_put_off_clear(pygpu_state *st)
{
    pygpu_memory_put_off_retry(st);
    for (int i = 0; i < st->put_off.n; i++)     /* (still captured as the module goes: left to the process's end) */
        Py_CLEAR(st->put_off.item[i].stream_ref);
    PyMem_Free(st->put_off.item);
    st->put_off = (pygpu_put_off){0};
}

/* Give the allocation back; the raw status (no Python error set).  A
 * pooled one whose stream a capture records waits on the put-off list. */
static pygpu_status release(PyGPUMemory *m)
{
    pygpu_status s = 0;
    int kept = 0;
    /* (nothing allocated: zero bytes, or it failed; or it died with a reset of its device: fork.h) */
    if (!m->ptr || pygpu_reset_since(m->device, m->resets)) {
        m->ptr = NULL;
        m->freed = 1;
        Py_CLEAR(m->stream_ref);
        return 0;
    }
    /* (a DeviceAllocation's type is always this module's: no error to clear) */
    pygpu_state *st = m->cacheable || m->pooled ? pygpu_state_of((PyObject *)m) : NULL;
    if (!st || !m->cacheable || !cache_put(&st->cache, m->ptr, m->capacity, m->device)) {
        s = free_on(m->ptr, m->device, m->pooled, m->ipc, m->stream, st ? &kept : NULL);
        if (kept)       /* (no memory for the list, the extreme case: the block is lost, the capture kept) */
            (void)put_off(st, m);
    }
    m->ptr = NULL;
    m->freed = 1;
    Py_CLEAR(m->stream_ref);
    return s;
}

/* Allocate m->capacity bytes for `m` on stream `h`: from the cache, the
 * pool (emptying the cache and trying again when out of memory) or plain. */
static pygpu_status allocate(pygpu_state *st, PyGPUMemory *m, pygpu_stream_t h)
{
    pygpu_status s;
    if (!st->use_pool) {
        Py_BEGIN_ALLOW_THREADS
        s = pygpu_rt_malloc(&m->ptr, m->capacity);
        Py_END_ALLOW_THREADS
        return s;
    }
    if (m->cacheable && cache_take(&st->cache, m->device, m->capacity, &m->ptr)) {
        m->pooled = 1;
        return 0;
    }
    s = pygpu_rt_malloc_async(&m->ptr, m->capacity, h, &m->pooled);
    if (pygpu_rt_is_out_of_memory(s) && st->cache.n > 0) {
        (void)pygpu_rt_get_last_error();
        pygpu_cache_flush(st);
        s = pygpu_rt_malloc_async(&m->ptr, m->capacity, h, &m->pooled);
    }
    m->cacheable &= m->pooled;
    return s;
}

/* Allocate `m` on `m->device`, not the current device, from its pool,
 * ordered on `order` (a stream of the current device); nothing where that
 * pool is not known yet or the allocation fails (*declined): the caller
 * allocates on the device itself, where an allocation short of memory
 * empties the cache and tries again, and a failure is named. */
static void allocate_across(PyGPUMemory *m, pygpu_stream_t order, int *declined)
{
    if (pygpu_rt_malloc_on_async(&m->ptr, m->capacity, m->device, order, &m->pooled) != 0) {
        (void)pygpu_rt_get_last_error();
        m->ptr = NULL;
        m->pooled = 0;
    }
    *declined = !m->ptr;
    m->cacheable &= m->pooled;
}

/* memory_new and memory_new_across: `nbytes` on `dev`, given back on
 * `stream`'s handle there; allocated on that handle, or with `order`
 * (dev not current), from dev's pool ordered on *order. */
static PyObject *memory_make(pygpu_state *st, size_t nbytes, PyObject *stream, int dev, const pygpu_stream_t *order,
                             const pygpu_alloc_purpose *purpose)
{
    PyGPUMemory *m = NULL;
    PyObject *cur = NULL;
    pygpu_stream_t h;
    pygpu_status s;
    int declined = 0;
    if (stream == NULL || stream == Py_None) {      /* (one lookup: the handle and the Stream kept) */
        if (!(stream = cur = pygpu_current_stream(st)))
            return NULL;
        h = pygpu_current_stream_on(cur, dev);
    } else if (pygpu_stream_for(st, stream, dev, "allocation", &h) < 0) {
        goto done;
    }
    if (st->put_off.n)          /* (frees a capture put off, where it has ended) */
        pygpu_memory_put_off_retry(st);
    /* (memory allocated by a capture is the graph's, valid only while it runs) */
    if (pygpu_capture_refuse(st, order ? *order : h, 0, "An allocation", "Allocate the arrays before the capture "
                             "begins: work on them joins it.") < 0)
        goto done;
    m = (PyGPUMemory *)st->Memory->tp_alloc(st->Memory, 0);
    if (!m)
        goto done;
    m->size = m->capacity = nbytes;
    m->device = dev;
    m->resets = pygpu_reset_count(dev);
    /* The per-thread default stream is another stream in each thread: give
     * such memory back on the legacy stream, which waits for it. */
    m->stream = h == PYGPU_STREAM_PER_THREAD ? PYGPU_STREAM_NULL : h;
    if (pygpu_stream_owner(st, stream, h))
        m->stream_ref = Py_NewRef(stream);
    m->cacheable = st->use_cache && st->use_pool && h == PYGPU_STREAM_NULL && nbytes > 0 &&
                   nbytes <= PYGPU_CACHE_MAX_BLOCK;
    if (m->cacheable)       /* sizes rounded up, so that near sizes share blocks */
        m->capacity = (nbytes + 511) & ~(size_t)511;
    /* (across: not from the cache, whose blocks the work queued on their
     * own device may still use; the pool orders its reuse) */
    s = 0;
    if (!order)
        s = allocate(st, m, h);
    else if (st->use_pool)
        allocate_across(m, *order, &declined);
    else
        declined = 1;
    if (s != 0 || declined) {
        m->ptr = NULL;
        m->freed = 1;
        Py_CLEAR(m);
        if (s != 0)
            (void)pygpu_check_alloc(st, s, st->use_pool ? "MallocAsync" : "Malloc", nbytes, dev, purpose);
    }
done:
    Py_XDECREF(cur);
    return (PyObject *)m;
}

PyObject *pygpu_memory_new(pygpu_state *st, size_t nbytes, PyObject *stream, const pygpu_alloc_purpose *purpose)
{
    int dev = pygpu_current_device(st);
    return dev < 0 ? NULL : memory_make(st, nbytes, stream, dev, NULL, purpose);
}

PyObject *pygpu_memory_new_across(pygpu_state *st, size_t nbytes, int dev, pygpu_stream_t order,
                                  const pygpu_alloc_purpose *purpose)
{
    return memory_make(st, nbytes, NULL, dev, &order, purpose);
}

static void memory_dealloc(PyObject *self)
{
    PyGPUMemory *m = (PyGPUMemory *)self;
    PyTypeObject *tp = Py_TYPE(self);
    if (m->weakreflist)
        PyObject_ClearWeakRefs(self);
    if (release(m) != 0)
        (void)pygpu_rt_get_last_error();
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int check_live(PyGPUMemory *m)
{
    if (m->freed) {
        PyErr_SetString(PyExc_ValueError, "this DeviceAllocation was freed");
        return -1;
    }
    return 0;
}

static PyObject *memory_ptr(PyObject *self, void *c)
{
    (void)c;
    PyGPUMemory *m = (PyGPUMemory *)self;
    return check_live(m) < 0 ? NULL : PyLong_FromVoidPtr(m->ptr);
}

static PyObject *memory_int(PyObject *self) { return memory_ptr(self, NULL); }

static PyObject *memory_repr(PyObject *self)
{
    PyGPUMemory *m = (PyGPUMemory *)self;
    if (m->freed)
        return PyUnicode_FromFormat("<pygpu.DeviceAllocation freed, %zu bytes>", m->size);
    return PyUnicode_FromFormat("<pygpu.DeviceAllocation %p, %zu bytes on device %d>", m->ptr,
                                m->size, m->device);
}

static PyObject *memory_free(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyGPUMemory *m = (PyGPUMemory *)self;
    pygpu_state *st = pygpu_state_of(self);
    if (!st)
        return NULL;
    if (m->views > 0) {         /* arrays use it: they refuse it from now, the last gives it back */
        m->freed = 1;
        Py_RETURN_NONE;
    }
    if (pygpu_check(st, release(m), "Free") < 0)
        return NULL;
    Py_RETURN_NONE;
}

void pygpu_memory_view(PyObject *mem, int delta)
{
    if (!mem || Py_TYPE(mem)->tp_dealloc != memory_dealloc)
        return;
    PyGPUMemory *m = (PyGPUMemory *)mem;
    m->views += delta;
    if (m->views == 0 && m->freed && m->ptr && release(m) != 0)
        (void)pygpu_rt_get_last_error();
}

int pygpu_memory_usable(PyObject *mem)
{
    if (mem && Py_TYPE(mem)->tp_dealloc == memory_dealloc && ((PyGPUMemory *)mem)->freed) {
        PyErr_SetString(PyExc_ValueError, "the DeviceAllocation holding this array's memory was freed "
                                          "(DeviceAllocation.free()): the array can no longer be used");
        return -1;
    }
    return 0;
}

static PyMemberDef memory_members[] = {
    {"size", T_PYSSIZET, offsetof(PyGPUMemory, size), READONLY, "Bytes allocated."},
    {"device", T_INT, offsetof(PyGPUMemory, device), READONLY, "The device holding the memory."},
    {"pooled", T_BOOL, offsetof(PyGPUMemory, pooled), READONLY,
     "True if it came from the stream-ordered pool."},
    {"ipc", T_BOOL, offsetof(PyGPUMemory, ipc), READONLY,
     "True if other processes can map it (mem_alloc(ipc=True); its handle: mem_get_ipc_handle)."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(PyGPUMemory, weakreflist), READONLY, NULL},
    {0},
};

static PyGetSetDef memory_getset[] = {
    {"ptr", memory_ptr, NULL, "The device address as an int.", NULL},
    {0},
};

static PyMethodDef memory_methods[] = {
    {"free", memory_free, METH_NOARGS,
     "free()\n--\n\nGive the memory back now; later use of this object raises ValueError."},
    {0},
};

static PyType_Slot memory_slots[] = {
    {Py_tp_doc, "DeviceAllocation: one device allocation, made by mem_alloc(), freed\n"
                "when the object dies or free() is called."},
    {Py_tp_dealloc, memory_dealloc},
    {Py_tp_repr, memory_repr},
    {Py_nb_int, memory_int},
    {Py_nb_index, memory_int},
    {Py_tp_members, memory_members},
    {Py_tp_getset, memory_getset},
    {Py_tp_methods, memory_methods},
    {0, NULL},
};

static PyType_Spec memory_spec = {
    .name = "pygpu.DeviceAllocation",
    .basicsize = sizeof(PyGPUMemory),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = memory_slots,
};

int pygpu_memory_init(PyObject *m, pygpu_state *st)
{
    st->Memory = (PyTypeObject *)PyType_FromModuleAndSpec(m, &memory_spec, NULL);
    return st->Memory ? PyModule_AddType(m, st->Memory) : -1;
}

/* ---- module functions: allocation --------------------------------------- */

/* Plain device memory on the current device that other processes can map
 * (its handle: mem_get_ipc_handle, src/ipc.c); freed at once, not ordered. */
static PyObject *memory_new_ipc(pygpu_state *st, size_t nbytes)
{
    pygpu_status s;
    int dev = pygpu_current_device(st);
    if (dev < 0)
        return NULL;
    PyGPUMemory *m = (PyGPUMemory *)st->Memory->tp_alloc(st->Memory, 0);
    if (!m)
        return NULL;
    m->size = m->capacity = nbytes;
    m->device = dev;
    m->resets = pygpu_reset_count(dev);
    m->ipc = 1;
    m->stream = PYGPU_STREAM_NULL;
    Py_BEGIN_ALLOW_THREADS
    s = pygpu_rt_ipc_alloc(&m->ptr, nbytes);
    Py_END_ALLOW_THREADS
    if (s != 0) {
        m->ptr = NULL;
        m->freed = 1;
        Py_DECREF(m);
        (void)pygpu_check_alloc(st, s, "Malloc", nbytes, dev, NULL);
        return NULL;
    }
    return (PyObject *)m;
}

static PyObject *mem_alloc(PyObject *mod, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nbytes", "stream", "ipc", NULL};
    PyObject *n_obj, *stream = Py_None;
    int ipc = 0;
    size_t n;
    pygpu_state *st = PyModule_GetState(mod);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$p:mem_alloc", kwlist, &n_obj, &stream, &ipc) ||
        pygpu_size_arg(n_obj, "mem_alloc() nbytes", &n) < 0)
        return NULL;
    if (ipc && stream != Py_None)
        return PyErr_Format(PyExc_ValueError, "mem_alloc(ipc=True) takes no stream: memory other processes "
                            "can map is not ordered on one");
    return ipc ? memory_new_ipc(st, n) : pygpu_memory_new(st, n, stream, NULL);
}

static PyObject *set_memory_pool(PyObject *mod, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    pygpu_state *st = PyModule_GetState(mod);
    if (!on)
        pygpu_cache_flush(st);
    st->use_pool = on;
    Py_RETURN_NONE;
}

static PyObject *trim_memory_pool(PyObject *mod, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"keep_bytes", "device", NULL};
    PyObject *keep_obj = NULL, *dev_obj = Py_None;
    size_t keep = 0;
    int dev;
    pygpu_state *st = PyModule_GetState(mod);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OO:trim_memory_pool", kwlist, &keep_obj, &dev_obj) ||
        (keep_obj && pygpu_size_arg(keep_obj, "keep_bytes", &keep) < 0))
        return NULL;
    if (dev_obj == Py_None) {
        if ((dev = pygpu_current_device(st)) < 0)
            return NULL;
    } else {
        int overflow = 0;
        if (!PyIndex_Check(dev_obj) || PyBool_Check(dev_obj))
            return PyErr_Format(PyExc_TypeError, "trim_memory_pool(): device must be a device ordinal (int) or "
                                "None, not %.100s", Py_TYPE(dev_obj)->tp_name);
        long d = PyLong_AsLongAndOverflow(dev_obj, &overflow);
        if (d == -1 && PyErr_Occurred())
            return NULL;
        if (overflow || pygpu_check_device_id(st, d) < 0)
            return overflow ? PyErr_Format(PyExc_ValueError, "device %R out of range", dev_obj) : NULL;
        dev = (int)d;
    }
    pygpu_cache_flush(st);
    if (pygpu_check(st, pygpu_rt_mempool_trim(dev, keep), "MemPoolTrimTo") < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- module functions: copies ------------------------------------------- */

int pygpu_address_arg(pygpu_state *st, PyObject *obj, void **ptr, size_t *size)
{
    if (PyObject_TypeCheck(obj, st->Memory)) {
        PyGPUMemory *m = (PyGPUMemory *)obj;
        if (check_live(m) < 0)
            return -1;
        *ptr = m->ptr;
        *size = m->size;
        return 0;
    }
    if (PyIndex_Check(obj) && !PyBool_Check(obj)) {     /* an int, or int-like (IPCMemoryHandle) */
        int overflow = 0;
        PyObject *v_obj = PyNumber_Index(obj);
        if (!v_obj)
            return -1;
        long long v = PyLong_AsLongLongAndOverflow(v_obj, &overflow);
        if (overflow < 0 || (!overflow && v < 0)) {
            PyErr_Format(PyExc_ValueError, "device address %R is negative", v_obj);
            Py_DECREF(v_obj);
            return -1;
        }
        *ptr = PyLong_AsVoidPtr(v_obj);
        *size = SIZE_MAX;
        if (*ptr == NULL && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "device address %R does not fit in a pointer", v_obj);
            Py_DECREF(v_obj);
            return -1;
        }
        Py_DECREF(v_obj);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "a device address must be a DeviceAllocation or an int, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

/* Check that `n` bytes fit in a region of `size` bytes. */
static int fits(const char *fn, const char *which, size_t n, size_t size)
{
    if (n > size) {
        PyErr_Format(PyExc_ValueError, "%s: %zu bytes do not fit in the %zu-byte %s allocation", fn, n,
                     size, which);
        return -1;
    }
    return 0;
}

/* The device of a device address argument: a DeviceAllocation's own, else
 * -1 (an int address is used from the current device). */
static int address_device(pygpu_state *st, PyObject *obj)
{
    return PyObject_TypeCheck(obj, st->Memory) ? ((PyGPUMemory *)obj)->device : -1;
}

/* Copy n bytes through the copy planner (which stages large pageable host
 * memory, and runs on the device of the allocations); unless `async`, wait
 * for it.  `ddev`/`sdev`: the devices of the device sides, or -1. */
static int run_copy(pygpu_state *st, void *dst, int ddev, const void *src, int sdev, size_t n,
                    enum pygpu_copy_kind kind, pygpu_stream_t s, int async)
{
    ptrdiff_t shape = (ptrdiff_t)n, one = 1;
    pygpu_side d = {dst, &one, kind != PYGPU_COPY_D2H, ddev, NULL, NULL};
    pygpu_side f = {(char *)src, &one, kind != PYGPU_COPY_H2D, sdev, NULL, NULL};
    if (n > 0 && (!dst || !src)) {
        PyErr_Format(PyExc_ValueError, "device address 0 is null: %zu bytes cannot be copied there", n);
        return -1;
    }
    return n == 0 ? 0 : pygpu_copy(st, d, f, 1, &shape, 1, s, async);
}

/* memcpy_htod (up) or memcpy_dtoh: between a device address and a
 * contiguous host buffer (writable going down). */
static PyObject *copy_host(PyObject *mod, PyObject *args, PyObject *kwds, int async, int up)
{
    static char *kwlist[] = {"dest", "src", "stream", NULL};
    const char *fn = up ? (async ? "memcpy_htod_async" : "memcpy_htod") : (async ? "memcpy_dtoh_async" : "memcpy_dtoh");
    PyObject *dest, *src, *stream = Py_None, *r = NULL;
    Py_buffer buf = {0};
    void *dptr;
    size_t dsize;
    pygpu_stream_t s;
    pygpu_state *st = PyModule_GetState(mod);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|O", kwlist, &dest, &src, &stream))
        return NULL;
    PyObject *dev = up ? dest : src, *host = up ? src : dest;
    int device = address_device(st, dev);
    if (pygpu_address_arg(st, dev, &dptr, &dsize) < 0 || pygpu_stream_for(st, stream, device, "allocation", &s) < 0 ||
        PyObject_GetBuffer(host, &buf, PyBUF_ANY_CONTIGUOUS | (up ? 0 : PyBUF_WRITABLE)) < 0)
        return NULL;
    size_t n = (size_t)buf.len;
    if (fits(fn, up ? "destination" : "source", n, dsize) < 0 ||
        (up ? run_copy(st, dptr, device, buf.buf, -1, n, PYGPU_COPY_H2D, s, async)
            : run_copy(st, buf.buf, -1, dptr, device, n, PYGPU_COPY_D2H, s, async)) < 0)
        goto done;
    r = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&buf);
    return r;
}

static PyObject *copy_htod(PyObject *mod, PyObject *args, PyObject *kwds, int async)
{
    return copy_host(mod, args, kwds, async, 1);
}

static PyObject *copy_dtoh(PyObject *mod, PyObject *args, PyObject *kwds, int async)
{
    return copy_host(mod, args, kwds, async, 0);
}

static PyObject *copy_dtod(PyObject *mod, PyObject *args, PyObject *kwds, int async)
{
    static char *kwlist[] = {"dest", "src", "nbytes", "stream", NULL};
    const char *fn = async ? "memcpy_dtod_async" : "memcpy_dtod";
    PyObject *dest, *src, *n_obj, *stream = Py_None;
    void *dptr, *sptr;
    size_t dsize, ssize, n;
    pygpu_stream_t s;
    pygpu_state *st = PyModule_GetState(mod);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O", kwlist, &dest, &src, &n_obj, &stream) ||
        pygpu_address_arg(st, dest, &dptr, &dsize) < 0 || pygpu_address_arg(st, src, &sptr, &ssize) < 0 ||
        pygpu_size_arg(n_obj, "nbytes", &n) < 0 ||
        pygpu_stream_for(st, stream, address_device(st, dest), "allocation", &s) < 0 ||
        fits(fn, "destination", n, dsize) < 0 || fits(fn, "source", n, ssize) < 0 ||
        run_copy(st, dptr, address_device(st, dest), sptr, address_device(st, src), n, PYGPU_COPY_D2D, s, async) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* cudaMemcpyPeer itself: no planning, no device switch. */
static PyObject *copy_peer(PyObject *mod, PyObject *args, PyObject *kwds, int async)
{
    static char *kwlist[] = {"dest", "src", "nbytes", "dest_device", "src_device", "stream", NULL};
    const char *fn = async ? "memcpy_peer_async" : "memcpy_peer";
    PyObject *dest, *src, *n_obj, *ddev_obj, *sdev_obj, *stream = Py_None;
    void *dptr, *sptr;
    size_t dsize, ssize, n;
    int ddev, sdev;
    pygpu_stream_t s;
    pygpu_status r = 0;
    pygpu_state *st = PyModule_GetState(mod);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO|O", kwlist, &dest, &src, &n_obj, &ddev_obj, &sdev_obj,
                                     &stream) ||
        pygpu_address_arg(st, dest, &dptr, &dsize) < 0 || pygpu_address_arg(st, src, &sptr, &ssize) < 0 ||
        pygpu_size_arg(n_obj, "nbytes", &n) < 0 || pygpu_device_arg(st, ddev_obj, "dest_device", &ddev) < 0 ||
        pygpu_device_arg(st, sdev_obj, "src_device", &sdev) < 0 || pygpu_stream_arg(st, stream, &s) < 0 ||
        fits(fn, "destination", n, dsize) < 0 || fits(fn, "source", n, ssize) < 0 ||
        pygpu_capture_refuse(st, s, async, fn, "Use memcpy_peer_async: it joins the capture.") < 0)
        return NULL;
    if (n) {
        Py_BEGIN_ALLOW_THREADS
        r = pygpu_rt_memcpy_peer_async(dptr, ddev, sptr, sdev, n, s);
        if (r == 0 && !async)
            r = pygpu_rt_stream_synchronize(s);
        Py_END_ALLOW_THREADS
    }
    if (pygpu_check(st, r, "MemcpyPeerAsync") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *fill_d8(PyObject *mod, PyObject *args, PyObject *kwds, int async)
{
    static char *kwlist[] = {"dest", "value", "nbytes", "stream", NULL};
    const char *fn = async ? "memset_d8_async" : "memset_d8";
    PyObject *dest, *n_obj, *stream = Py_None;
    unsigned char value;
    void *dptr;
    size_t dsize, n;
    int dev, prev = -1;
    pygpu_stream_t s;
    pygpu_status r = 0;
    pygpu_state *st = PyModule_GetState(mod);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ObO|O", kwlist, &dest, &value, &n_obj, &stream) ||
        pygpu_address_arg(st, dest, &dptr, &dsize) < 0 || pygpu_size_arg(n_obj, "nbytes", &n) < 0 ||
        pygpu_stream_for(st, stream, dev = address_device(st, dest), "allocation", &s) < 0 ||
        fits(fn, "destination", n, dsize) < 0)
        return NULL;
    if (n && !dptr)
        return PyErr_Format(PyExc_ValueError, "device address 0 is null: %zu bytes cannot be set there", n);
    if (dev >= 0 && pygpu_device_enter(st, dev, &prev) < 0)
        return NULL;
    if (pygpu_capture_refuse(st, s, async, fn, "Use memset_d8_async: it joins the capture.") < 0) {
        if (prev >= 0 && pygpu_rt_set_device(prev) != 0)
            (void)pygpu_rt_get_last_error();
        return NULL;
    }
    if (n) {
        Py_BEGIN_ALLOW_THREADS
        r = pygpu_rt_memset_async(dptr, value, n, s);
        if (r == 0 && !async)
            r = pygpu_rt_stream_synchronize(s);
        Py_END_ALLOW_THREADS
    }
    if (pygpu_check(st, r, "MemsetAsync") < 0) {
        if (prev >= 0 && pygpu_rt_set_device(prev) != 0)
            (void)pygpu_rt_get_last_error();
        return NULL;
    }
    if (prev >= 0 && pygpu_device_leave(st, prev) < 0)
        return NULL;
    Py_RETURN_NONE;
}

#define SYNC_AND_ASYNC(name, impl)                                                        \
    static PyObject *name(PyObject *m, PyObject *a, PyObject *k) { return impl(m, a, k, 0); } \
    static PyObject *name##_async(PyObject *m, PyObject *a, PyObject *k) { return impl(m, a, k, 1); }

SYNC_AND_ASYNC(memcpy_htod, copy_htod)
SYNC_AND_ASYNC(memcpy_dtoh, copy_dtoh)
SYNC_AND_ASYNC(memcpy_dtod, copy_dtod)
SYNC_AND_ASYNC(memcpy_peer, copy_peer)
SYNC_AND_ASYNC(memset_d8, fill_d8)

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS

static PyMethodDef memory_functions[] = {
    {"mem_alloc", KW(mem_alloc),
     "mem_alloc(nbytes, stream=None, *, ipc=False)\n--\n\n"
     "Allocate device memory on the current device; a DeviceAllocation.  From the\n"
     "stream-ordered pool, ordered on `stream`; with ipc=True plain device memory that\n"
     "other processes can map (mem_get_ipc_handle, IPCMemoryHandle)."},
    {"set_memory_pool", set_memory_pool, METH_O,
     "set_memory_pool(enabled, /)\n--\n\nAllocate from the stream-ordered pool (True) or not."},
    {"trim_memory_pool", KW(trim_memory_pool),
     "trim_memory_pool(keep_bytes=0, device=None)\n--\n\n"
     "Give cached pool memory back to the system, keeping at most keep_bytes."},
    {"memcpy_htod", KW(memcpy_htod),
     "memcpy_htod(dest, src, stream=None)\n--\n\nCopy buffer `src` to device address `dest`; wait."},
    {"memcpy_htod_async", KW(memcpy_htod_async),
     "memcpy_htod_async(dest, src, stream=None)\n--\n\n"
     "Queue a copy of buffer `src` to `dest`; keep `src` alive and unchanged until the stream passes it."},
    {"memcpy_dtoh", KW(memcpy_dtoh),
     "memcpy_dtoh(dest, src, stream=None)\n--\n\nFill writable buffer `dest` from device address `src`; wait."},
    {"memcpy_dtoh_async", KW(memcpy_dtoh_async),
     "memcpy_dtoh_async(dest, src, stream=None)\n--\n\n"
     "Queue filling `dest` from `src`; `dest` is ready once the stream passes it."},
    {"memcpy_dtod", KW(memcpy_dtod),
     "memcpy_dtod(dest, src, nbytes, stream=None)\n--\n\nCopy nbytes between device addresses; wait."},
    {"memcpy_dtod_async", KW(memcpy_dtod_async),
     "memcpy_dtod_async(dest, src, nbytes, stream=None)\n--\n\nQueue a device-to-device copy."},
    {"memcpy_peer", KW(memcpy_peer),
     "memcpy_peer(dest, src, nbytes, dest_device, src_device, stream=None)\n--\n\n"
     "Copy nbytes from `src` on src_device to `dest` on dest_device (the runtime's\n"
     "MemcpyPeer: direct where peer access is enabled, else staged by the driver); wait."},
    {"memcpy_peer_async", KW(memcpy_peer_async),
     "memcpy_peer_async(dest, src, nbytes, dest_device, src_device, stream=None)\n--\n\n"
     "Queue a copy between devices."},
    {"memset_d8", KW(memset_d8),
     "memset_d8(dest, value, nbytes, stream=None)\n--\n\nSet nbytes at `dest` to byte `value`; wait."},
    {"memset_d8_async", KW(memset_d8_async),
     "memset_d8_async(dest, value, nbytes, stream=None)\n--\n\nQueue setting nbytes to byte `value`."},
    {0},
};

int pygpu_memory_functions_init(PyObject *m) { return PyModule_AddFunctions(m, memory_functions); }
