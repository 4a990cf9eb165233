/*
 * background_up.c -- uploads that complete in the background (see
 * background_up.h; their tasks and threads are background.c's).
 *
 * The mover thread takes the tasks in the order they were queued and
 * copies each chunk of the host data into the task's page-locked block
 * with the workers; each chunk's gate, on the caller's stream ahead of
 * that chunk's DMA, holds the stream until the mover has copied it.  A
 * gate is the stream waiting for the task's counter in page-locked memory
 * to pass the chunk (the mover raises it), or, where the device has no
 * such wait, a host function waiting for the mover.  Either waits for
 * host work only, never for device work, as the runtimes require of host
 * functions.  An event after the last DMA (or, where none could be made,
 * a host function) ends the task; the reaper (background.c) gives back
 * the block and the counter and releases the owner once the stream has
 * passed that event and the mover is done with the task.
 *
 * An upload bigger than a ring (PYGPU_BG_RING_SLOTS chunks of
 * PYGPU_BG_RING_CHUNK, tuning.h) goes through one where the stream can
 * both wait on a counter and write one: the device writes the task's
 * `sent` counter after each chunk's DMA, and the mover copies chunk k into
 * its slot once the DMA of chunk k - PYGPU_BG_RING_SLOTS is over, so that
 * the DMA reads lines the cores have just written, still cached, and the
 * block is small.
 */
#define _POSIX_C_SOURCE 200809L
#include "background_up.h"
#include "background.h"
#include "events.h"
#include "hostcopy.h"
#include "trace.h"
#include "workers.h"

#include <stdatomic.h>

static void copy_chunk(task *t, int k, int threads)
{
    ptrdiff_t e = t->start[k], cnt = t->start[k + 1] - e;
    pygpu_range_job j = {{pygpu_bg_slot(t, k), NULL, 0}, {t->host, t->strides, 0}, t->shape, t->nd, t->itemsize, e, cnt,
                         pygpu_up_stream(cnt * t->itemsize), 0};
    pygpu_parallel_range(&j, threads);
}

/* 1 once a ring upload's slot for chunk k is free (the device has written
 * `sent` past the DMA of chunk k - ring), 0 if the caller gave up queuing
 * the task's work (which it does once the stream has passed what it had
 * queued: no DMA reads the block any more). */
static int slot_free(task *t, int k)
{
    uint32_t need = (uint32_t)(k + 1 - t->ring);
    for (int spins = 0;; spins++) {
        if (__atomic_load_n(t->sent, __ATOMIC_ACQUIRE) >= need)
            return 1;
        if (atomic_load(&t->abandon))
            return 0;
        pygpu_bg_pause_after(spins);
    }
}

/* An upload's gates told that `copied` chunks are in its block: the
 * counter first (the workers' stores are visible by then), then the count
 * under the queue's lock, which is the last the mover reads or writes of
 * the task once it is whole (the reaper keeps a task until then). */
static void tell(task *t, int copied)
{
    if (t->counter)
        __atomic_store_n(t->counter, (uint32_t)copied, __ATOMIC_RELEASE);
    pygpu_bg_tell_copied(t, copied);
}

/* An upload's chunks into its block (a ring upload's each once its slot
 * is free), each gate told as its chunk lands.  A ring upload given up
 * is told whole where it stopped: no gate is left shut.  The mover's
 * work on an upload (its device unused: the host copies need none). */
static void copy_task(task *t, int *device)
{
    (void)device;
    int n = t->nchunks, threads = pygpu_bg_task_threads(t), k;
    pygpu_workers_heat(threads - 1);            /* (they spin between its chunks, as for a staged transfer) */
    for (k = 0; k < n && (!t->ring || k < t->ring || slot_free(t, k)); k++) {
        copy_chunk(t, k, threads);
        tell(t, k + 1);
    }
    pygpu_workers_cool();
    if (k < n)
        tell(t, n);
}

/* A gate by a host function: chunk k's DMA goes once the mover has copied it. */
static void gate(void *arg)
{
    gate_arg *g = arg;
    pygpu_bg_wait_copied(g->t, g->k + 1);
}

pygpu_status pygpu_bg_upload(char *dev, const char *host, const ptrdiff_t *strides, int nd, const ptrdiff_t *shape,
                             ptrdiff_t itemsize, pygpu_stream_t s, void *owner, int *taken)
{
    pygpu_status r = 0;
    pygpu_trace_clock clock = {0};
    PYGPU_TRACE_TICK(clock);
    int device;                 /* (its end's event: one its device keeps, given back by the reaper) */
    if (pygpu_rt_get_device(&device) != 0) {
        (void)pygpu_rt_get_last_error();
        device = -1;
    }
    task *t = pygpu_bg_task_new(1, (char *)host, strides, nd, shape, itemsize, device);
    *taken = 0;
    if (!t)
        return 0;
    if (t->ring && pygpu_bg_ring_tried(t, s) != 0) {
        pygpu_bg_task_free(t);
        return 0;
    }
    t->owner = owner;
    PYGPU_TRACE_TICK(clock);
    if (t->device < 0 || pygpu_event_take(t->device, &t->done) != 0) {
        (void)pygpu_rt_get_last_error();
        t->done = NULL;
    }
    PYGPU_TRACE_TICK(clock);
    /* Queued for the mover first: a runtime that runs host functions at
     * once (the host's) runs the first gate before this returns. */
    if (pygpu_bg_hand_over(PYGPU_BG_MOVER, t, copy_task, taken) != 0)
        return 0;
    PYGPU_TRACE_TICK(clock);
    int k, wait = t->counter != NULL, nchunks = t->nchunks, ring = t->ring;
    for (k = 0; r == 0 && k < nchunks; k++) {
        ptrdiff_t e = t->start[k], bytes = (t->start[k + 1] - e) * itemsize;
        if (wait && pygpu_rt_stream_wait_value(s, t->counter, (uint32_t)(k + 1)) != 0) {
            pygpu_bg_waits_failed();
            wait = 0;               /* (this chunk on: host functions; the mover still raises the counter) */
        }
        if (!wait) {
            t->gate[k] = (gate_arg){t, k};
            r = pygpu_rt_launch_host_func(s, gate, &t->gate[k]);
        }
        if (r == 0)
            r = pygpu_rt_memcpy_async(dev + e * itemsize, pygpu_bg_slot(t, k), (size_t)bytes, PYGPU_COPY_H2D, s);
        if (r == 0 && ring)
            r = pygpu_rt_stream_write_value(s, t->sent, (uint32_t)(k + 1));
    }
    PYGPU_TRACE_TICK(clock);
    /* The end: an event, which the reaper looks at (the stream then has
     * nothing after the last DMA to wait for), else a host function. */
    if (r == 0 && t->done) {
        if ((r = pygpu_rt_event_record(t->done, s)) == 0)
            pygpu_bg_finish(t);
    } else if (r == 0) {
        r = pygpu_rt_launch_host_func(s, pygpu_bg_finish, t);
    }
    pygpu_bg_queued();
    PYGPU_TRACE_TICK(clock);
    if (pygpu_trace_is_on()) {               /* (t may be over by now) */
        static const char *const parts[] = {"task and block", "event", "hand-over", "chunks", "end"};
        pygpu_trace_call(&clock, parts, "pygpu background: up in %d chunks through %s, gated by %s", nchunks,
                         ring ? "a ring" : "a whole block", wait ? "the device's wait on a counter" : "host functions");
    }
    if (r != 0) {
        /* What was queued is let through (the mover copies every chunk
         * that its gates wait for), and waited for; then a ring upload is
         * given up (its mover waits for DMAs that were never queued), and
         * the block goes back. */
        (void)pygpu_rt_stream_synchronize(s);
        (void)pygpu_rt_get_last_error();
        atomic_store(&t->abandon, 1);
        pygpu_bg_wait_copied(t, t->nchunks);
        pygpu_bg_finish(t);
    }
    return r;
}
