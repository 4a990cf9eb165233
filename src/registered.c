/*
 * registered.c -- ordinary host memory page-locked in place while its
 * owner lives; see registered.h.
 *
 * A staged copy passes every byte through host memory once more than the
 * DMA does (read from the user's memory, written into a staging buffer,
 * read again by the DMA); with several devices fed at once the host's
 * memory bandwidth runs out first.  A buffer that transfers meet again
 * (the same owner, the same buffer), once enough bytes have moved through
 * it to pay for it, is registered with the runtime where it lies, and the
 * copies after that are the DMA alone.  The owner is
 * the NumPy array at the end of the view's base chain that owns its data;
 * a weak reference to it lets the registration go when it is collected.
 * A buffer that moved (the owner resized) is let go at its next meeting,
 * before anything trusts it; the limit (transfer_config's register_limit)
 * lets the least recently used go first; none is let go while a copy is
 * using it.  The GIL is the lock: every function runs with it, and
 * releases it only around the runtime's own register and unregister,
 * with the slot marked so that nothing else touches it meanwhile.
 */
#include "registered.h"
#include "fork.h"
#include "state.h"              /* (NumPy's API table) */
#include "transfer/events.h"
#include "transfer/settings.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* An asynchronous copy of a slot's pages, queued on a stream: an event
 * recorded after it on that stream, of `device`. */
typedef struct {
    int device;
    pygpu_event_t ev;
} queued_copy;

typedef struct {
    PyObject *wr;               /* weak reference to the owner; NULL: a free slot */
    char *start;                /* the pages registered */
    size_t len;
    const char *data;           /* the owner's buffer when registered */
    size_t nbytes;
    uint64_t used;              /* the tick of its last use (least recently used goes first) */
    int inflight;               /* copies using it now */
    int busy;                   /* being registered or let go (the GIL released) */
    int unpinned;               /* unregistered before a fork (the slot goes at its next meeting) */
    int n_queued;
    queued_copy queued[PYGPU_REGISTER_QUEUED];  /* asynchronous copies of it that may still run */
} slot;

static slot regs[PYGPU_REGISTER_SLOTS];
static struct {
    PyObject *wr;               /* an owner met before, weakly */
    const char *data;
    size_t nbytes;
    size_t moved;               /* the bytes its transfers moved so far */
} seen[PYGPU_REGISTER_SEEN];
static uint64_t tick;
static size_t held;             /* bytes registered */
static size_t made, released, refused;
static PyObject *gone_cb;       /* the weak references' callback */

/* 1 if weak reference `wr` still refers to `obj`; with obj NULL, 1 if
 * it refers to anything. */
static int refers_to(PyObject *wr, PyObject *obj)
{
    if (!wr)
        return 0;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *o = NULL;
    if (PyWeakref_GetRef(wr, &o) < 0)
        PyErr_Clear();
    int r = o && (!obj || o == obj);
    Py_XDECREF(o);
    return r;
#else
    PyObject *o = PyWeakref_GetObject(wr);      /* (borrowed; Py_None once collected) */
    return o && o != Py_None && (!obj || o == obj);
#endif
}

/* Wait for the copies `q[0..n)` (an asynchronous copy queued on a stream
 * may still be reading or writing pages about to be let go).  Each waits
 * for its own stream's work up to it, not the device: a device-wide
 * synchronization would break a capture another thread has begun on that
 * device (the runtime refuses it in every capture mode), and the event's
 * wait is made in relaxed mode (rt_gpu.c).  Without the GIL. */
static void wait_for(const queued_copy *q, int n)
{
    for (int k = 0; k < n; k++)
        if (pygpu_rt_event_synchronize(q[k].ev) != 0)
            (void)pygpu_rt_get_last_error();
}

/* wait_for, then their events given back. */
static void drain(queued_copy *q, int n)
{
    wait_for(q, n);
    for (int k = 0; k < n; k++)
        pygpu_event_give(q[k].device, q[k].ev);
}

/* Move the copies slot `r` keeps into `out` (PYGPU_REGISTER_QUEUED of
 * them at most); how many. */
static int take_queued(slot *r, queued_copy *out)
{
    int n = r->n_queued;
    memcpy(out, r->queued, (size_t)n * sizeof *out);
    r->n_queued = 0;
    return n;
}

/* Unregister slot i's pages and free the slot (not while a copy uses it:
 * its owner is alive then, and the slot goes at a later meeting; after
 * the devices that asynchronous copies of it were queued on are done). */
static void release(int i)
{
    slot *r = &regs[i];
    if (!r->wr || r->busy || r->inflight)
        return;
    char *start = r->start;
    queued_copy queued[PYGPU_REGISTER_QUEUED];
    int n = take_queued(r, queued);
    r->busy = 1;
    if (!pygpu_fork_broken()) {     /* (a forked child leaves the parent's pages and events alone) */
        pygpu_status s = 0;
        int pinned = !r->unpinned;  /* (unregistered before a fork already, its copies waited for) */
        Py_BEGIN_ALLOW_THREADS
        drain(queued, n);
        if (pinned)
            s = pygpu_rt_host_unregister(start);
        Py_END_ALLOW_THREADS
        if (s != 0)
            (void)pygpu_rt_get_last_error();    /* (memory unmapped already: nothing left to undo) */
    }
    held -= r->len;
    released++;
    Py_CLEAR(r->wr);
    r->busy = 0;
}

/* The weak reference's callback: its owner is being collected. */
static PyObject *owner_gone(PyObject *self, PyObject *wr)
{
    (void)self;
    Py_INCREF(wr);              /* (the slots' reference may be its last) */
    for (int i = 0; i < PYGPU_REGISTER_SLOTS; i++)
        if (regs[i].wr == wr)
            release(i);
    for (int j = 0; j < PYGPU_REGISTER_SEEN; j++)
        if (seen[j].wr == wr)
            Py_CLEAR(seen[j].wr);
    Py_DECREF(wr);
    Py_RETURN_NONE;
}

static PyMethodDef gone_def = {"_registered_owner_gone", owner_gone, METH_O, NULL};

/* A weak reference to `own` whose callback lets its slots go; NULL (no
 * error set) for an owner without weak references, or no memory. */
static PyObject *weakly(PyArrayObject *own)
{
    PyObject *wr = NULL;
    if (gone_cb || (gone_cb = PyCFunction_New(&gone_def, NULL)))
        wr = PyWeakref_NewRef((PyObject *)own, gone_cb);
    if (!wr)
        PyErr_Clear();
    return wr;
}

/* The NumPy array that owns the memory `arr` views, or NULL (borrowed). */
static PyArrayObject *owner_of(PyObject *arr)
{
    if (!PyArray_Check(arr))
        return NULL;
    PyArrayObject *a = (PyArrayObject *)arr;
    while (PyArray_BASE(a) && PyArray_Check(PyArray_BASE(a)))
        a = (PyArrayObject *)PyArray_BASE(a);
    return !PyArray_BASE(a) && PyArray_CHKFLAGS(a, NPY_ARRAY_OWNDATA) ? a : NULL;
}

/* Free up to `need` bytes within `limit`, least recently used first; 1 if
 * they fit then. */
static int make_room(size_t need, size_t limit)
{
    if (need > limit)
        return 0;
    while (held + need > limit) {
        int lru = -1;
        for (int i = 0; i < PYGPU_REGISTER_SLOTS; i++)
            if (regs[i].wr && !regs[i].busy && !regs[i].inflight && (lru < 0 || regs[i].used < regs[lru].used))
                lru = i;
        if (lru < 0)
            return 0;
        release(lru);
    }
    return 1;
}

/* Let go the slots whose owner is gone without their callback having
 * freed them (it found them in use). */
static void sweep(void)
{
    for (int i = 0; i < PYGPU_REGISTER_SLOTS; i++)
        if (regs[i].wr && !refers_to(regs[i].wr, NULL))
            release(i);
}

/* Register the owner's buffer in a free slot; its handle (slot + 1), or 0.
 * Only the whole pages inside the buffer: a page it shares with other
 * memory (malloc's neighbours on the heap) stays pageable, for a copy of
 * a neighbour that begins in a registered page and runs past it is one the
 * runtime refuses (cudaErrorInvalidValue) -- the partial pages at either
 * end of the buffer are copied apart (copy.c). */
static int register_owner(PyArrayObject *own, const char *data, size_t nbytes, size_t limit)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *start = (char *)(((uintptr_t)data + page - 1) & ~(uintptr_t)(page - 1));
    char *end = (char *)(((uintptr_t)data + nbytes) & ~(uintptr_t)(page - 1));
    if (end <= start)
        return 0;
    size_t len = (size_t)(end - start);
    int i;
    sweep();
    for (i = 0; i < PYGPU_REGISTER_SLOTS; i++)      /* (no page of it registered already) */
        if (regs[i].wr && regs[i].start < start + len && start < regs[i].start + regs[i].len)
            return 0;
    if (!make_room(len, limit))
        return 0;
    for (i = 0; i < PYGPU_REGISTER_SLOTS && regs[i].wr; i++)
        ;
    if (i == PYGPU_REGISTER_SLOTS) {
        int lru = -1;           /* (every slot taken: the least recently used goes) */
        for (int k = 0; k < PYGPU_REGISTER_SLOTS; k++)
            if (!regs[k].busy && !regs[k].inflight && (lru < 0 || regs[k].used < regs[lru].used))
                lru = k;
        if (lru < 0)
            return 0;
        release(lru);
        if (regs[lru].wr)
            return 0;
        i = lru;
    }
    slot *r = &regs[i];
    if (!(r->wr = weakly(own)))
        return 0;               /* (an owner without weak references, or no memory: staged as before) */
    *r = (slot){r->wr, start, len, data, nbytes, ++tick, 0, 1, 0, 0, {{0, NULL}}};
    held += len;
    pygpu_status s;
    Py_BEGIN_ALLOW_THREADS
    s = pygpu_rt_host_register(start, len);
    Py_END_ALLOW_THREADS
    r->busy = 0;
    if (s != 0) {               /* (refused: locked-memory limits, a mapping the runtime cannot lock) */
        (void)pygpu_rt_get_last_error();
        held -= len;
        refused++;
        Py_CLEAR(r->wr);
        return 0;
    }
    made++;
    return i + 1;
}

int pygpu_registered_prepare(PyObject *arr, const void *p, size_t n)
{
    pygpu_transfer_config cfg;
    if (n < PYGPU_REGISTER_MIN)         /* (before the settings' lock: small copies pay nothing) */
        return 0;
    pygpu_transfer_config_get(&cfg);
    if (cfg.register_limit == 0)
        return 0;
    PyArrayObject *own = owner_of(arr);
    if (!own)
        return 0;
    const char *data = PyArray_BYTES(own), *q = p;
    size_t nbytes = (size_t)PyArray_NBYTES(own);
    if (q < data || q + n > data + nbytes)
        return 0;
    for (int i = 0; i < PYGPU_REGISTER_SLOTS; i++) {
        slot *r = &regs[i];
        if (!refers_to(r->wr, (PyObject *)own))
            continue;
        if (r->busy)
            return 0;
        if (r->data != data || r->nbytes != nbytes || r->unpinned) {   /* its buffer moved, or a fork: let go */
            release(i);
            break;
        }
        r->used = ++tick;
        r->inflight++;
        return i + 1;
    }
    /* Met before (the same owner and buffer)?  Then register it once
     * PYGPU_REGISTER_MOVED bytes have moved through it: a registration
     * costs about as much as two staged copies of the buffer, and a
     * buffer met only a few times should not pay it. */
    int free_j = -1;
    for (int j = 0; j < PYGPU_REGISTER_SEEN; j++) {
        if (refers_to(seen[j].wr, (PyObject *)own) && seen[j].data == data && seen[j].nbytes == nbytes) {
            if ((seen[j].moved += n) < PYGPU_REGISTER_MOVED)
                return 0;
            Py_CLEAR(seen[j].wr);
            int h = register_owner(own, data, nbytes, cfg.register_limit);
            if (h)
                regs[h - 1].inflight++;
            return h;
        }
        if (free_j < 0 && !refers_to(seen[j].wr, NULL))
            free_j = j;
    }
    /* Met once: remembered (weakly), the oldest forgotten to make room. */
    if (free_j < 0) {
        free_j = (int)(tick % PYGPU_REGISTER_SEEN);
        tick++;
    }
    Py_XSETREF(seen[free_j].wr, weakly(own));
    seen[free_j].data = data;
    seen[free_j].nbytes = nbytes;
    seen[free_j].moved = n;
    return 0;
}

/* Before a fork, the pages go back to being ordinary memory (the runtime
 * may keep page-locked memory out of a child, where the user's arrays
 * must be whole); no Python object is touched here (a fork may come from
 * a thread without the GIL), the slots go at their next meeting.  Those a
 * copy is using stay as they are. */
static void registered_fork(enum pygpu_fork_phase phase)
{
    if (phase == PYGPU_FORK_PREPARE && !pygpu_fork_broken())
        pygpu_registered_unpin_all();
}

void pygpu_registered_unpin_all(void)
{
    for (int i = 0; i < PYGPU_REGISTER_SLOTS; i++) {
        slot *r = &regs[i];
        if (r->wr && !r->busy && !r->inflight && !r->unpinned) {
            wait_for(r->queued, r->n_queued);   /* (kept: events.c's own fork handler holds its lock now, or soon) */
            if (pygpu_rt_host_unregister(r->start) != 0)
                (void)pygpu_rt_get_last_error();
            r->unpinned = 1;
        }
    }
}

void pygpu_registered_init(void)
{
    pygpu_fork_register(registered_fork);
}

int pygpu_registered_hold(const void *p, size_t n)
{
    const char *q = p;
    if (!held || !n)
        return 0;
    for (int i = 0; i < PYGPU_REGISTER_SLOTS; i++) {
        slot *r = &regs[i];
        if (r->wr && !r->busy && r->start < q + n && q < r->start + r->len) {
            r->inflight++;
            return i + 1;
        }
    }
    return 0;
}

void pygpu_registered_range(int handle, const char **start, size_t *len)
{
    *start = handle > 0 ? regs[handle - 1].start : NULL;
    *len = handle > 0 ? regs[handle - 1].len : 0;
}

void pygpu_registered_queued(int handle, int device, pygpu_stream_t s)
{
    if (handle <= 0)
        return;
    slot *r = &regs[handle - 1];
    while (r->n_queued == PYGPU_REGISTER_QUEUED) {      /* (full: those done given back) */
        int k = 0;
        for (int j = 0; j < r->n_queued; j++) {
            if (pygpu_rt_event_query(r->queued[j].ev) == 0)
                pygpu_event_give(r->queued[j].device, r->queued[j].ev);
            else
                r->queued[k++] = r->queued[j];
        }
        (void)pygpu_rt_get_last_error();
        if ((r->n_queued = k) < PYGPU_REGISTER_QUEUED)
            break;
        /* Still full: the oldest waited for, the GIL released (the copy
         * holds the slot); another thread's copy of it may fill it
         * meanwhile, and then it is looked at again. */
        queued_copy oldest = r->queued[0];
        memmove(r->queued, r->queued + 1, (size_t)(--r->n_queued) * sizeof *r->queued);
        Py_BEGIN_ALLOW_THREADS
        drain(&oldest, 1);
        Py_END_ALLOW_THREADS
    }
    pygpu_event_t ev = NULL;
    if (pygpu_event_take(device, &ev) != 0 || pygpu_rt_event_record(ev, s) != 0) {
        (void)pygpu_rt_get_last_error();        /* (no event: the stream waited for now instead) */
        pygpu_event_give(device, ev);
        if (pygpu_rt_stream_synchronize(s) != 0)
            (void)pygpu_rt_get_last_error();
        return;
    }
    r->queued[r->n_queued++] = (queued_copy){device, ev};
}

void pygpu_registered_wait_all(void)
{
    for (int i = 0; i < PYGPU_REGISTER_SLOTS; i++) {
        slot *r = &regs[i];
        queued_copy queued[PYGPU_REGISTER_QUEUED];
        if (!r->n_queued || r->busy)
            continue;
        int n = take_queued(r, queued);
        Py_BEGIN_ALLOW_THREADS
        drain(queued, n);
        Py_END_ALLOW_THREADS
    }
}

void pygpu_registered_done(int handle)
{
    if (handle > 0 && regs[handle - 1].inflight > 0)
        regs[handle - 1].inflight--;
}

void pygpu_registered_trim(size_t keep)
{
    (void)make_room(0, keep);
    if (keep == 0)              /* (off: the owners met once are forgotten too, weakly referenced no more) */
        for (int j = 0; j < PYGPU_REGISTER_SEEN; j++)
            Py_CLEAR(seen[j].wr);
}

PyObject *pygpu_registered_stats(void)
{
    pygpu_transfer_config cfg;
    int buffers = 0;
    pygpu_transfer_config_get(&cfg);
    for (int i = 0; i < PYGPU_REGISTER_SLOTS; i++)
        buffers += regs[i].wr != NULL;
    return Py_BuildValue("{s:i,s:n,s:n,s:n,s:n,s:n}", "buffers", buffers, "bytes", (Py_ssize_t)held, "limit",
                         (Py_ssize_t)cfg.register_limit, "registered", (Py_ssize_t)made, "released",
                         (Py_ssize_t)released, "refused", (Py_ssize_t)refused);
}
