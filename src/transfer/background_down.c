/*
 * background_down.c -- downloads that complete in the background (see
 * background_down.h; their tasks and threads are background.c's).
 *
 * The call queues each chunk's DMA into the task's page-locked block and
 * an event after it, then a host function that holds the stream until
 * the lander thread has copied every chunk out; the lander copies each
 * chunk out once its event has passed.  A download bigger than the
 * last-level cache goes through a ring of PYGPU_BG_RING_SLOTS chunks
 * (tuning.h): chunk k's DMA waits for the lander to have copied out chunk
 * k - PYGPU_BG_RING_SLOTS (a gate on host work, as an upload's), so that
 * it lands in lines still cached, and the block is small.
 */
#define _POSIX_C_SOURCE 200809L
#include "background_down.h"
#include "background.h"
#include "events.h"
#include "hostcopy.h"
#include "trace.h"
#include "workers.h"

#include <stdatomic.h>

/* A download's chunk k from the block into the host memory. */
static void land_chunk(task *t, int k, int threads)
{
    ptrdiff_t e = t->start[k], cnt = t->start[k + 1] - e;
    pygpu_range_job j = {{t->host, t->strides, 0}, {pygpu_bg_slot(t, k), NULL, 0}, t->shape, t->nd, t->itemsize, e, cnt,
                         t->land_stream, 0};
    pygpu_parallel_range(&j, threads);
}

/* 1 once chunk k's DMA and event are queued, 0 if they never will be
 * (queuing stopped before them). */
static int chunk_queued(task *t, int k)
{
    for (int spins = 0;; spins++) {
        if (atomic_load(&t->queued) > k)
            return 1;
        if (atomic_load(&t->queue_over))
            return atomic_load(&t->queued) > k;
        pygpu_bg_pause_after(spins);
    }
}

/* A download's chunks into the host memory: each once its event has
 * passed where `wait` (the lander), else at once (the host function after
 * them all, which may make no runtime call); a ring download's count
 * raised after each.  After a failed DMA nothing more is copied (the
 * stream holds the error, for its next synchronization to raise). */
static void land_task(task *t, int wait)
{
    int ok = 1, threads = pygpu_bg_task_threads(t);
    pygpu_workers_heat(threads - 1);
    for (int k = 0; ok && chunk_queued(t, k); k++) {
        if (wait && !(ok = pygpu_rt_event_synchronize(t->ev[k]) == 0))
            break;
        land_chunk(t, k, threads);
        if (t->ring)                    /* (the slot's lines read: its next DMA may go) */
            __atomic_store_n(t->counter, (uint32_t)(k + 1), __ATOMIC_RELEASE);
    }
    if (t->ring)                        /* (after a failure too: no gate is left shut) */
        __atomic_store_n(t->counter, (uint32_t)t->nchunks, __ATOMIC_RELEASE);
    pygpu_workers_cool();
    if (!ok)
        (void)pygpu_rt_get_last_error();
    pygpu_bg_tell_landed(t);
}

/* The lander: a thread of its own, apart from the mover (it waits for
 * every download's DMAs, and an upload's gates must not wait behind those;
 * the mover waits only for a ring upload's own), takes the downloads in
 * the order they were queued, and copies out each chunk as
 * soon as its DMA is over.  A download whose host function runs before
 * the lander has taken it is copied out by that host function instead
 * (all its DMAs are over by then), so that a host function never waits
 * for another download's device work: where the runtime runs host
 * functions on one thread, that could be waiting for a gate queued behind
 * it.  `device`: the lander's current device (a new thread is on device
 * 0). */
static void lander_run(task *t, int *device)
{
    /* On the download's device, set only where it differs: the one CI
     * failure of the lander was LeakSanitizer's check crashing at exit
     * ("Tracer caught signal 11"), which tools/asan.sh ties to
     * thread-local variables set in threads of a dlopen'ed library, and
     * setting the device sets one. */
    if (t->device != *device) {
        if (pygpu_rt_set_device(t->device) == 0)
            *device = t->device;
        else
            (void)pygpu_rt_get_last_error();
    }
    land_task(t, 1);
}

/* A download still in the lander's queue when its host function runs,
 * copied out there (all its DMAs are over). */
static void land_here(task *t)
{
    land_task(t, 0);
}

/* After a download's last DMA and event: the stream goes on once the
 * lander has copied every chunk out (a host function may wait for host
 * work), and the task is over. */
static void landed(void *arg)
{
    task *t = arg;
    pygpu_bg_claim_or_wait(PYGPU_BG_LANDER, t, land_here);
    pygpu_bg_finish(t);
}

/* A download's events, as many as its chunks, from those its device keeps
 * (events.c: made where none is kept; the reaper gives them back); 0 if
 * they cannot be had (those taken are given back). */
static int events_made(task *t)
{
    for (int k = 0; k < t->nchunks; k++) {
        if (pygpu_event_take(t->device, &t->ev[k]) != 0) {
            (void)pygpu_rt_get_last_error();
            t->ev[k] = NULL;
            while (k-- > 0) {
                pygpu_event_give(t->device, t->ev[k]);
                t->ev[k] = NULL;
            }
            return 0;
        }
    }
    return 1;
}

pygpu_status pygpu_bg_download(char *host, const ptrdiff_t *strides, int nd, const ptrdiff_t *shape,
                               ptrdiff_t itemsize, const char *dev, pygpu_stream_t s, void *owner, int *taken)
{
    pygpu_status r = 0;
    pygpu_trace_clock clock = {0};
    PYGPU_TRACE_TICK(clock);
    int device;
    *taken = 0;
    if (pygpu_rt_get_device(&device) != 0) {
        (void)pygpu_rt_get_last_error();
        return 0;
    }
    task *t = pygpu_bg_task_new(0, host, strides, nd, shape, itemsize, device);
    if (!t)
        return 0;
    PYGPU_TRACE_TICK(clock);
    if (!events_made(t)) {
        (void)pygpu_rt_get_last_error();
        pygpu_bg_task_free(t);
        return 0;
    }
    /* A ring needs the stream's wait, and the lander at work while the
     * chunks are queued: it is handed the task first (the host's runtime,
     * whose gates wait in this call, needs that too).  Else the download
     * is not taken. */
    if (t->ring && pygpu_bg_ring_tried(t, s) != 0) {
        pygpu_bg_task_free(t);
        return 0;
    }
    PYGPU_TRACE_TICK(clock);
    if (pygpu_bg_hand_over(PYGPU_BG_LANDER, t, lander_run, taken) != 0)
        return 0;
    t->owner = owner;                   /* (read by the reaper only, once the task is over) */
    PYGPU_TRACE_TICK(clock);
    int nchunks = t->nchunks, ring = t->ring, land_stream = t->land_stream;   /* (t: the lander's now) */
    for (int k = 0; r == 0 && k < nchunks; k++) {
        ptrdiff_t e = t->start[k], bytes = (t->start[k + 1] - e) * itemsize;
        if (ring && k >= ring && (r = pygpu_rt_stream_wait_value(s, t->counter, (uint32_t)(k + 1 - ring))))
            break;
        r = pygpu_rt_memcpy_async(pygpu_bg_slot(t, k), dev + e * itemsize, (size_t)bytes, PYGPU_COPY_D2H, s);
        if (r == 0 && (r = pygpu_rt_event_record(t->ev[k], s)) == 0)
            atomic_store(&t->queued, k + 1);
    }
    atomic_store(&t->queue_over, 1);
    /* The host function that waits for the lander (a runtime that runs
     * host functions at once, the host's, runs it before this returns). */
    PYGPU_TRACE_TICK(clock);
    if (r == 0)
        r = pygpu_rt_launch_host_func(s, landed, t);
    pygpu_bg_queued();
    PYGPU_TRACE_TICK(clock);
    if (pygpu_trace_is_on()) {
        static const char *const parts[] = {"task and block", "events", "hand-over", "chunks", "end"};
        pygpu_trace_call(&clock, parts, "pygpu background: down in %d chunks through %s, copied out with %s stores",
                         nchunks, ring ? "a ring" : "a whole block", land_stream ? "streaming" : "plain");
    }
    if (r == 0)
        return 0;
    /* Else what was queued is waited for and copied out by the lander
     * before the block goes back; the caller raises the status. */
    pygpu_status w = pygpu_rt_stream_synchronize(s);
    if (r == 0)
        r = w;
    landed(t);
    return r;
}

