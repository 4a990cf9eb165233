/*
 * background.c -- uploads that complete in the background; see
 * background.h.
 *
 * One mover thread per process takes the tasks in the order they were
 * queued and copies each chunk of the host data into the task's
 * page-locked block with the workers; each chunk's gate, on the caller's
 * stream ahead of that chunk's DMA, holds the stream until the mover has
 * copied it.  A gate is the stream waiting for the task's counter in
 * page-locked memory to pass the chunk (the mover raises it), or, where
 * the device has no such wait, a host function waiting for the mover.
 * Either waits for host work only, never for device work, as the runtimes
 * require of host functions.  An event after the last DMA (or, where none
 * could be made, a host function) ends the task; the reaper, with the GIL
 * held, gives back the block and the counter and releases the owner once
 * the stream has passed that event and the mover is done with the task.
 *
 * An upload bigger than a ring (BG_RING_SLOTS chunks of BG_RING_CHUNK)
 * goes through one where the stream can both wait on a counter and write
 * one: the device writes the task's `sent` counter after each chunk's
 * DMA, and the mover copies chunk k into its slot once the DMA of chunk k
 * - BG_RING_SLOTS is over, so that the DMA reads lines the cores have
 * just written, still cached, and the block is small.
 *
 * Downloads: the lander thread copies each chunk out once its event has
 * passed.  A download bigger than the last-level cache goes through a
 * ring of BG_RING_SLOTS chunks: chunk k's DMA waits for the lander to
 * have copied out chunk k - BG_RING_SLOTS (a gate on host work, as an
 * upload's), so that it lands in lines still cached, and the block is
 * small.
 *
 * Where a background thread waits for the device (the mover for a ring
 * upload's DMAs, the lander for a download's), the device may in turn be
 * waiting for that thread: a ring's DMAs wait for it, and a stream waits
 * for the work queued before it on others (the legacy default stream and
 * the blocking streams wait for each other).  So the threads take the
 * transfers in the order their work reaches the streams (`queue_mu` is
 * held from the hand-over until the work is queued): a transfer then
 * waits only for work queued before its own, which never waits for it.
 */
#define _POSIX_C_SOURCE 200809L
#include "background.h"
#include "hostcopy.h"
#include "lanes.h"
#include "pinned_pool.h"
#include "settings.h"
#include "trace.h"
#include "workers.h"
#include "../fork.h"
#include "../shape.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BG_CHUNKS 256           /* chunks of an upload, at most (each costs the caller two calls on the stream) */
#define BG_UP_CHUNK ((ptrdiff_t)8 << 20)        /* bytes an upload's chunk, where there are 4 or more (see cut) */
#define BG_DOWN_CHUNKS 32       /* chunks of a download into a whole block, at most (each has an event) */
#define BG_DOWN_CHUNK ((ptrdiff_t)8 << 20)
#define BG_RING_SLOTS 4         /* a ring download's block: this many chunks */
#define BG_RING_CHUNK ((ptrdiff_t)16 << 20)     /* bytes a ring download's chunk, at most (see cut) */
#define BG_RING_CHUNKS 128      /* chunks of a ring download, at most */
#define BG_COUNTERS 1024        /* uploads in flight gated by the device's wait, at most (then host functions) */

typedef struct task task;

typedef struct {
    task *t;
    int k;
} gate_arg;

struct task {
    task *next;                 /* in the mover's (or lander's) queue */
    task *reap_next;            /* in the reaper's list (an upload is there while the mover may still have it) */
    char *block;                /* the page-locked copy of the host data */
    char *host;
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS], itemsize;
    int nd, nchunks;
    ptrdiff_t start[BG_CHUNKS + 1];     /* chunk k: elements [start[k], start[k + 1]) */
    int copied;                 /* an upload's chunks in the block (bg_mu) */
    int upload;
    uint32_t *counter;          /* an upload's chunks copied, for the device's wait; or NULL */
    uint32_t *sent;             /* a ring upload's DMAs over, written by the device */
    atomic_int abandon;         /* a ring upload's queuing failed: the mover stops at the next slot */
    pygpu_event_t done;         /* an upload's, after its last DMA; or NULL (then a host function ends it) */
    gate_arg gate[BG_CHUNKS];
    void *owner;
    size_t warm;                /* not an upload: page-lock a block of this size for the pool */
    /* A download: the event after each chunk's DMA, the chunks queued (the
     * lander copies out those; queuing over once `queue_over`), the
     * device, and whether the lander is done.  A ring download's block
     * holds `ring` chunks in turn: chunk k's DMA waits for the lander's
     * count (`counter`, chunks copied out) to reach k + 1 - ring. */
    pygpu_event_t ev[BG_RING_CHUNKS];
    atomic_int queued, queue_over;
    int device, landed, ring;
    int land_stream;            /* a download's copy-out with non-temporal stores (past the cache) */
    int claimed;                /* taken by its thread (bg_mu); a download's host function may take it first */
};

static pthread_mutex_t bg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;      /* a transfer handed over and queued (above) */
static pthread_cond_t copied_cv = PTHREAD_COND_INITIALIZER;    /* an upload's chunk copied, or a download landed */
static task *reap_list, *reap_tail;     /* the tasks ended, in order (bg_mu) */
static int exit_wait;

/* A thread of the background (the mover, the lander) and its queue of
 * tasks, taken in order (bg_mu). */
typedef struct {
    task *head, *tail;
    pthread_cond_t cv;          /* a task for it, or it idle */
    int running, busy;
    void (*run)(task *t);       /* what it does with a task, without bg_mu */
} bg_thread;

static void mover_run(task *t);
static void lander_run(task *t);
static bg_thread mover = {NULL, NULL, PTHREAD_COND_INITIALIZER, 0, 0, mover_run};
static bg_thread lander = {NULL, NULL, PTHREAD_COND_INITIALIZER, 0, 0, lander_run};
static bg_thread *const bg_threads[] = {&mover, &lander};
static size_t warming;          /* the size of the block the mover is asked to page-lock, if any */
static atomic_int pending, reapable;

/* The uploads' counters: BG_COUNTERS of them in one page-locked block,
 * made at the first upload; those free are on a stack (bg_mu).  Once a
 * wait has failed, host functions gate every upload after it. */
static uint32_t *counters;
static short counters_free[BG_COUNTERS];
static int ncounters_free, counters_tried;
static atomic_int waits_fail, writes_fail;

/* The chunks of n elements, all of one size: BG_UP_CHUNK bytes (uploads)
 * or BG_DOWN_CHUNK (downloads), or a quarter of a smaller transfer, or a
 * BG_CHUNKS-th (BG_DOWN_CHUNKS-th) of a bigger one; a ring download's:
 * BG_RING_CHUNK bytes, or an eighth of a smaller one, or a
 * BG_RING_CHUNKS-th of a bigger one.  The stream has an
 * upload's data after the first chunk's copy and every chunk's DMA in
 * turn (each gate lets its DMA through some microseconds after the
 * mover's copy, which keeps up with the link), so the first copy is time
 * the background adds; above 8 MiB the copies into the block would not
 * use streaming stores; and each chunk costs the caller two calls on the
 * stream: chunks of 4 MiB arrived as fast as chunks of 8 and took the
 * caller twice as long (docs/performance.md). */
static void cut(task *t, ptrdiff_t n)
{
    ptrdiff_t most_chunks = t->ring ? BG_RING_CHUNKS : t->upload ? BG_CHUNKS : BG_DOWN_CHUNKS;
    ptrdiff_t per = (t->ring ? BG_RING_CHUNK : t->upload ? BG_UP_CHUNK : BG_DOWN_CHUNK) / t->itemsize,
              part = t->ring ? (n + 2 * BG_RING_SLOTS - 1) / (2 * BG_RING_SLOTS) : (n + 3) / 4,
              most = (n + most_chunks - 1) / most_chunks;
    if (per > part)
        per = part;
    if (per < most)
        per = most;
    if (per < 1)
        per = 1;
    t->nchunks = (int)((n + per - 1) / per);
    for (int k = 0; k < t->nchunks; k++)
        t->start[k] = k * per;
    t->start[t->nchunks] = n;
}

/* Where chunk k is in the task's block: its place in the whole, or a ring
 * download's slot. */
static char *slot(const task *t, int k)
{
    ptrdiff_t at = t->ring ? (k % t->ring) * (t->start[1] - t->start[0]) : t->start[k];
    return t->block + at * t->itemsize;
}

/* The threads that copy a task's chunks, as for a staged transfer (alone:
 * no staged transfer at work, the background holding no lane). */
static int task_threads(const task *t)
{
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    return pygpu_transfer_threads(&cfg, (size_t)(t->start[t->nchunks] * t->itemsize), pygpu_lanes_idle());
}

static void copy_chunk(task *t, int k, int threads)
{
    ptrdiff_t e = t->start[k], cnt = t->start[k + 1] - e;
    pygpu_range_job j = {{slot(t, k), NULL, 0}, {t->host, t->strides, 0}, t->shape, t->nd, t->itemsize, e, cnt,
                         pygpu_up_stream(cnt * t->itemsize)};
    pygpu_parallel_range(&j, threads);
}

/* A download's chunk k from the block into the host memory. */
static void land_chunk(task *t, int k, int threads)
{
    ptrdiff_t e = t->start[k], cnt = t->start[k + 1] - e;
    pygpu_range_job j = {{t->host, t->strides, 0}, {slot(t, k), NULL, 0}, t->shape, t->nd, t->itemsize, e, cnt,
                         t->land_stream};
    pygpu_parallel_range(&j, threads);
}

/* A block of t->warm bytes page-locked into the pool; t is over. */
static void warm_block(task *t)
{
    void *b = pygpu_pinned_take(t->warm);
    if (b)
        pygpu_pinned_give(b);
    free(t);
    atomic_fetch_sub(&pending, 1);
    pthread_mutex_lock(&bg_mu);
    warming = 0;
    pthread_mutex_unlock(&bg_mu);
}

/* Between two looks at something another thread (or the device) sets:
 * a short spin, then 20 us sleeps. */
static void pause_after(int spins)
{
    if (spins > 64)
        nanosleep(&(struct timespec){0, 20000}, NULL);
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
        pause_after(spins);
    }
}

/* An upload's gates told that `copied` chunks are in its block: the
 * counter first (the workers' stores are visible by then), then the count
 * under the lock, which is the last the mover reads or writes of the task
 * once it is whole (the reaper keeps a task until then). */
static void tell(task *t, int copied)
{
    if (t->counter)
        __atomic_store_n(t->counter, (uint32_t)copied, __ATOMIC_RELEASE);
    pthread_mutex_lock(&bg_mu);
    t->copied = copied;
    pthread_cond_broadcast(&copied_cv);
    pthread_mutex_unlock(&bg_mu);
}

/* An upload's chunks into its block (a ring upload's each once its slot
 * is free), each gate told as its chunk lands.  A ring upload given up
 * is told whole where it stopped: no gate is left shut. */
static void copy_task(task *t)
{
    int n = t->nchunks, threads = task_threads(t), k;
    pygpu_workers_heat(threads - 1);            /* (they spin between its chunks, as for a staged transfer) */
    for (k = 0; k < n && (k < t->ring || !t->ring || slot_free(t, k)); k++) {
        copy_chunk(t, k, threads);
        tell(t, k + 1);
    }
    pygpu_workers_cool();
    if (k < n)
        tell(t, n);
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
        pause_after(spins);
    }
}

/* A download's chunks into the host memory: each once its event has
 * passed where `wait` (the lander), else at once (the host function after
 * them all, which may make no runtime call); a ring download's count
 * raised after each.  After a failed DMA nothing more is copied (the
 * stream holds the error, for its next synchronization to raise). */
static void land_task(task *t, int wait)
{
    int ok = 1, threads = task_threads(t);
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
    pthread_mutex_lock(&bg_mu);
    t->landed = 1;
    pthread_cond_broadcast(&copied_cv);
    pthread_mutex_unlock(&bg_mu);
}

/* The lander: a thread of its own, apart from the mover (it waits for the
 * device, and an upload's gates must never wait behind that), takes the
 * downloads in the order they were queued, and copies out each chunk as
 * soon as its DMA is over.  A download whose host function runs before
 * the lander has taken it is copied out by that host function instead
 * (all its DMAs are over by then), so that a host function never waits
 * for another download's device work: where the runtime runs host
 * functions on one thread, that could be waiting for a gate queued behind
 * it. */
static int lander_device;       /* the lander's current device (a new thread is on device 0) */

static void lander_run(task *t)
{
    /* On the download's device, set only where it differs: the one CI
     * failure of the lander was LeakSanitizer's check crashing at exit
     * ("Tracer caught signal 11"), which tools/asan.sh ties to
     * thread-local variables set in threads of a dlopen'ed library, and
     * setting the device sets one. */
    if (t->device != lander_device) {
        if (pygpu_rt_set_device(t->device) == 0)
            lander_device = t->device;
        else
            (void)pygpu_rt_get_last_error();
    }
    land_task(t, 1);
}

static void mover_run(task *t)
{
    if (t->warm)
        warm_block(t);
    else
        copy_task(t);
}

/* A background thread: its tasks in order.  A task taken is marked
 * claimed (a download's host function then leaves it to the lander). */
static void *thread_main(void *arg)
{
    bg_thread *b = arg;
    pthread_mutex_lock(&bg_mu);
    for (;;) {
        while (!b->head)
            pthread_cond_wait(&b->cv, &bg_mu);
        task *t = b->head;
        if (!(b->head = t->next))
            b->tail = NULL;
        t->claimed = 1;
        b->busy = 1;
        pthread_mutex_unlock(&bg_mu);
        b->run(t);                  /* (t may be over and reaped from here on) */
        pthread_mutex_lock(&bg_mu);
        b->busy = 0;
        pthread_cond_broadcast(&b->cv);         /* (the wait at exit) */
    }
    return NULL;
}

/* At exit, the mover and the lander finish what they have (gates and
 * host functions still waiting on a stream would keep the runtime's
 * teardown waiting); a few seconds at most. */
static void bg_at_exit(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&bg_mu);
    for (int i = 0; i < 2; i++)
        while (bg_threads[i]->running && (bg_threads[i]->head || bg_threads[i]->busy))
            if (pthread_cond_timedwait(&bg_threads[i]->cv, &bg_mu, &until) != 0)
                break;
    pthread_mutex_unlock(&bg_mu);
}

/* (bg_mu held) Hand t to thread b, started if need be; 0, or -1 if it
 * cannot be started. */
static int enqueue(bg_thread *b, task *t)
{
    if (!b->running) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int r = pthread_create(&th, &attr, thread_main, b);
        pthread_attr_destroy(&attr);
        if (r != 0)
            return -1;
        if (!exit_wait)
            exit_wait = atexit(bg_at_exit) == 0;
        b->running = 1;
    }
    if (b->tail)
        b->tail->next = t;
    else
        b->head = t;
    b->tail = t;
    pthread_cond_broadcast(&b->cv);
    return 0;
}

/* No cached block of `bytes`: the mover page-locks one for the pool (the
 * milliseconds that takes are not the caller's), so that the next upload
 * of this size goes in the background. */
static void warm_pool(size_t bytes)
{
    task *w = calloc(1, sizeof *w);
    if (!w)
        return;
    w->warm = bytes;
    pthread_mutex_lock(&bg_mu);
    if (warming == bytes || enqueue(&mover, w) != 0) {     /* (asked already: the uploads meanwhile are not) */
        free(w);
    } else {
        warming = bytes;
        atomic_fetch_add(&pending, 1);
    }
    pthread_mutex_unlock(&bg_mu);
}

/* A counter, at 0, or NULL where there is none (the device's wait failed
 * before, or BG_COUNTERS are in use, or no page-locked block could be
 * had). */
static uint32_t *counter_take(void)
{
    if (atomic_load(&waits_fail))
        return NULL;
    pthread_mutex_lock(&bg_mu);
    if (!counters && !counters_tried) {
        void *p = NULL;
        counters_tried = 1;
        if (pygpu_rt_host_alloc(&p, BG_COUNTERS * sizeof *counters) == 0) {
            counters = p;
            for (int i = 0; i < BG_COUNTERS; i++)
                counters_free[i] = (short)(BG_COUNTERS - 1 - i);
            ncounters_free = BG_COUNTERS;
        } else {
            (void)pygpu_rt_get_last_error();
        }
    }
    uint32_t *c = ncounters_free ? &counters[counters_free[--ncounters_free]] : NULL;
    pthread_mutex_unlock(&bg_mu);
    if (c)
        __atomic_store_n(c, 0, __ATOMIC_RELAXED);
    return c;
}

/* (bg_mu held) */
static void counter_give(uint32_t *c)
{
    if (c)
        counters_free[ncounters_free++] = (short)(c - counters);
}

/* A gate by a host function: chunk k's DMA goes once the mover has copied it. */
static void gate(void *arg)
{
    gate_arg *g = arg;
    pthread_mutex_lock(&bg_mu);
    while (g->t->copied <= g->k)
        pthread_cond_wait(&copied_cv, &bg_mu);
    pthread_mutex_unlock(&bg_mu);
}

/* The task onto the reaper's list (no runtime call here, nor the GIL: the
 * reaper gives back its block and its owner): as a host function after
 * the last DMA, or at once for an upload whose end is an event (the mover
 * may not have begun it yet: the reaper waits for both). */
static void finish(void *arg)
{
    task *t = arg;
    t->reap_next = NULL;
    pthread_mutex_lock(&bg_mu);
    if (reap_tail)
        reap_tail->reap_next = t;
    else
        reap_list = t;
    reap_tail = t;
    atomic_store(&reapable, 1);
    pthread_mutex_unlock(&bg_mu);
}

/* What a task holds, given back (bg_mu not held): its events, its
 * counters, its block, and the task; not the owner.  For a task never
 * taken, and by the reaper (which has given the counters back already). */
static void task_free(task *t)
{
    if (t->done)
        (void)pygpu_rt_event_destroy(t->done);
    for (int k = 0; k < BG_RING_CHUNKS && t->ev[k]; k++)      /* (a download's) */
        (void)pygpu_rt_event_destroy(t->ev[k]);
    if (t->counter || t->sent) {
        pthread_mutex_lock(&bg_mu);
        counter_give(t->counter);
        counter_give(t->sent);
        pthread_mutex_unlock(&bg_mu);
    }
    if (t->block)
        pygpu_pinned_give(t->block);
    free(t);
}

/* A task for host elements [0, n) in C order over shape (strides: the
 * host layout at `host`) with its block and its chunks; NULL when the
 * transfer is not for the background (too small, or no cached block fits:
 * then the mover page-locks one for the next).  An upload takes a counter
 * for its gates.  An upload bigger than a ring goes through one where the
 * stream can write a counter too: its chunks are copied with plain stores
 * (they are over 8 MiB) into lines the DMA then reads out of the cache,
 * where a block as big as the upload is written with streaming stores
 * and read out of memory (docs/performance.md: background uploads).  A
 * download bigger than the last-level cache goes through a ring where the
 * stream can wait on a counter, so that its chunks land in lines the
 * cores have just read out of the block, still cached, and the block
 * stays small; and it is copied out with non-temporal stores, since its
 * destination's lines would only pass through the cache
 * (docs/performance.md: background downloads).  The caller tries the
 * stream's wait (and write) before it takes a ring task. */
static task *task_new(int upload, char *host, const ptrdiff_t *strides, int nd, const ptrdiff_t *shape,
                      ptrdiff_t itemsize)
{
    ptrdiff_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    if (nd > PYGPU_MAXDIMS || (size_t)(n * itemsize) < PYGPU_BG_MIN)
        return NULL;
    task *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->upload = upload;
    t->host = host;
    t->nd = nd;
    t->itemsize = itemsize;
    memcpy(t->shape, shape, (size_t)nd * sizeof *shape);
    memcpy(t->strides, strides, (size_t)nd * sizeof *strides);
    size_t total = (size_t)(n * itemsize);
    t->land_stream = !upload && total > pygpu_cache_bytes();
    int ring = upload ? total > (size_t)(BG_RING_SLOTS * BG_RING_CHUNK) && !atomic_load(&writes_fail)
                      : t->land_stream;
    if (upload || ring)
        t->counter = counter_take();
    if (ring && t->counter && (!upload || (t->sent = counter_take()) != NULL))
        t->ring = BG_RING_SLOTS;
    cut(t, n);
    size_t bytes = (size_t)((t->ring ? t->ring * (t->start[1] - t->start[0]) : n) * itemsize);
    if (!(t->block = pygpu_pinned_take_cached(bytes))) {
        task_free(t);
        warm_pool(bytes);
        return NULL;
    }
    return t;
}

/* A ring task's trial of the stream's wait (a wait for 0 holds nothing)
 * and, for an upload, its write (of 0, which the counter holds); 0 if the
 * stream has them, else -1 (and no ring from here on). */
static int ring_tried(task *t, pygpu_stream_t s)
{
    if (pygpu_rt_stream_wait_value(s, t->counter, 0) != 0) {
        atomic_store(&waits_fail, 1);
        return -1;
    }
    if (t->upload && pygpu_rt_stream_write_value(s, t->sent, 0) != 0) {
        atomic_store(&writes_fail, 1);
        return -1;
    }
    return 0;
}

pygpu_status pygpu_bg_upload(char *dev, const char *host, const ptrdiff_t *strides, int nd, const ptrdiff_t *shape,
                             ptrdiff_t itemsize, pygpu_stream_t s, void *owner, int *taken)
{
    pygpu_status r = 0;
    task *t = task_new(1, (char *)host, strides, nd, shape, itemsize);
    *taken = 0;
    if (!t)
        return 0;
    if (t->ring && ring_tried(t, s) != 0) {
        task_free(t);
        return 0;
    }
    t->owner = owner;
    if (pygpu_rt_event_create(&t->done, PYGPU_EVENT_DISABLE_TIMING) != 0) {
        (void)pygpu_rt_get_last_error();
        t->done = NULL;
    }
    /* Queued for the mover first: a runtime that runs host functions at
     * once (the host's) runs the first gate before this returns. */
    pthread_mutex_lock(&queue_mu);
    pthread_mutex_lock(&bg_mu);
    int handed = enqueue(&mover, t) == 0;
    pthread_mutex_unlock(&bg_mu);
    if (!handed) {
        pthread_mutex_unlock(&queue_mu);
        task_free(t);
        return 0;
    }
    *taken = 1;
    atomic_fetch_add(&pending, 1);
    int k, wait = t->counter != NULL, nchunks = t->nchunks, ring = t->ring;
    for (k = 0; r == 0 && k < nchunks; k++) {
        ptrdiff_t e = t->start[k], bytes = (t->start[k + 1] - e) * itemsize;
        if (wait && pygpu_rt_stream_wait_value(s, t->counter, (uint32_t)(k + 1)) != 0) {
            atomic_store(&waits_fail, 1);
            wait = 0;               /* (this chunk on: host functions; the mover still raises the counter) */
        }
        if (!wait) {
            t->gate[k] = (gate_arg){t, k};
            r = pygpu_rt_launch_host_func(s, gate, &t->gate[k]);
        }
        if (r == 0)
            r = pygpu_rt_memcpy_async(dev + e * itemsize, slot(t, k), (size_t)bytes, PYGPU_COPY_H2D, s);
        if (r == 0 && ring)
            r = pygpu_rt_stream_write_value(s, t->sent, (uint32_t)(k + 1));
    }
    /* The end: an event, which the reaper looks at (the stream then has
     * nothing after the last DMA to wait for), else a host function. */
    if (r == 0 && t->done) {
        if ((r = pygpu_rt_event_record(t->done, s)) == 0)
            finish(t);
    } else if (r == 0) {
        r = pygpu_rt_launch_host_func(s, finish, t);
    }
    pthread_mutex_unlock(&queue_mu);
    if (pygpu_trace_on)                 /* (t may be over by now) */
        fprintf(stderr, "pygpu background: up in %d chunks through %s, gated by %s\n", nchunks,
                ring ? "a ring" : "a whole block", wait ? "the device's wait on a counter" : "host functions");
    if (r != 0) {
        /* What was queued is let through (the mover copies every chunk
         * that its gates wait for), and waited for; then a ring upload is
         * given up (its mover waits for DMAs that were never queued), and
         * the block goes back. */
        (void)pygpu_rt_stream_synchronize(s);
        (void)pygpu_rt_get_last_error();
        atomic_store(&t->abandon, 1);
        pthread_mutex_lock(&bg_mu);
        while (t->copied < t->nchunks)
            pthread_cond_wait(&copied_cv, &bg_mu);
        pthread_mutex_unlock(&bg_mu);
        finish(t);
    }
    return r;
}

/* After a download's last DMA and event: the stream goes on once the
 * lander has copied every chunk out (a host function may wait for host
 * work), and the task is over. */
static void landed(void *arg)
{
    task *t = arg;
    pthread_mutex_lock(&bg_mu);
    if (!t->claimed) {              /* still in the lander's queue: out of it, and copied out here */
        task **at = &lander.head, *prev = NULL;
        while (*at != t) {
            prev = *at;
            at = &(*at)->next;
        }
        *at = t->next;
        if (lander.tail == t)
            lander.tail = prev;
        t->claimed = 1;
        pthread_mutex_unlock(&bg_mu);
        land_task(t, 0);
        pthread_mutex_lock(&bg_mu);
    }
    while (!t->landed)
        pthread_cond_wait(&copied_cv, &bg_mu);
    pthread_mutex_unlock(&bg_mu);
    finish(t);
}

/* A download's events, as many as its chunks; 0 if they cannot be had
 * (those made are destroyed). */
static int events_made(task *t)
{
    for (int k = 0; k < t->nchunks; k++) {
        if (pygpu_rt_event_create(&t->ev[k], PYGPU_EVENT_DISABLE_TIMING) != 0) {
            (void)pygpu_rt_get_last_error();
            t->ev[k] = NULL;
            while (k-- > 0) {
                (void)pygpu_rt_event_destroy(t->ev[k]);
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
    task *t = task_new(0, host, strides, nd, shape, itemsize);
    *taken = 0;
    if (!t)
        return 0;
    if (pygpu_rt_get_device(&t->device) != 0 || !events_made(t)) {
        (void)pygpu_rt_get_last_error();
        task_free(t);
        return 0;
    }
    /* A ring needs the stream's wait, and the lander at work while the
     * chunks are queued: it is handed the task first (the host's runtime,
     * whose gates wait in this call, needs that too).  Else the download
     * is not taken. */
    if (t->ring && ring_tried(t, s) != 0) {
        task_free(t);
        return 0;
    }
    pthread_mutex_lock(&queue_mu);
    pthread_mutex_lock(&bg_mu);
    int handed = enqueue(&lander, t) == 0;
    pthread_mutex_unlock(&bg_mu);
    if (!handed) {
        pthread_mutex_unlock(&queue_mu);
        task_free(t);
        return 0;
    }
    t->owner = owner;                   /* (read by the reaper only, once the task is over) */
    *taken = 1;
    atomic_fetch_add(&pending, 1);
    if (pygpu_trace_on)                 /* (t is the lander's now, but not over before queue_over) */
        fprintf(stderr, "pygpu background: down in %d chunks through %s, copied out with %s stores\n",
                t->nchunks, t->ring ? "a ring" : "a whole block", t->land_stream ? "streaming" : "plain");
    for (int k = 0; r == 0 && k < t->nchunks; k++) {
        ptrdiff_t e = t->start[k], bytes = (t->start[k + 1] - e) * itemsize;
        if (t->ring && k >= t->ring && (r = pygpu_rt_stream_wait_value(s, t->counter, (uint32_t)(k + 1 - t->ring))))
            break;
        if ((r = pygpu_rt_memcpy_async(slot(t, k), dev + e * itemsize, (size_t)bytes, PYGPU_COPY_D2H, s)) == 0 &&
            (r = pygpu_rt_event_record(t->ev[k], s)) == 0)
            atomic_store(&t->queued, k + 1);
    }
    atomic_store(&t->queue_over, 1);
    /* The host function that waits for the lander (a runtime that runs
     * host functions at once, the host's, runs it before this returns). */
    if (r == 0)
        r = pygpu_rt_launch_host_func(s, landed, t);
    pthread_mutex_unlock(&queue_mu);
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

/* (bg_mu held) 1 if a task on the reap list is over: an upload once the
 * mover has counted its last chunk (its last gate may let the DMA through
 * before) and the stream has passed its end event (a failed stream counts
 * as passed; an event never recorded has passed). */
static int over(task *t)
{
    if (t->upload && t->copied < t->nchunks)
        return 0;
    return !t->done || !pygpu_rt_is_not_ready(pygpu_rt_event_query(t->done));
}

/* Tasks on the reap list not yet over that a reaper call looks past, at
 * most: the list is in the order the tasks were queued, which is the order
 * they end on one stream, so that a call's work stays bounded however
 * many uploads are in flight. */
#define REAP_LOOK_PAST 8

void pygpu_bg_reap(void (*release)(void *owner))
{
    if (!atomic_load(&reapable))
        return;
    task *t = NULL, **to = &t, **at = &reap_list, *prev = NULL;
    int not_over = 0;
    pthread_mutex_lock(&bg_mu);
    while (*at && not_over < REAP_LOOK_PAST) {
        task *o = *at;
        if (over(o)) {
            *at = o->reap_next;             /* (out of the list, onto t's) */
            if (reap_tail == o)
                reap_tail = prev;
            counter_give(o->counter);
            counter_give(o->sent);
            o->counter = o->sent = NULL;
            o->reap_next = NULL;
            *to = o;
            to = &o->reap_next;
        } else {
            not_over++;
            prev = o;
            at = &o->reap_next;
        }
    }
    atomic_store(&reapable, reap_list != NULL);
    pthread_mutex_unlock(&bg_mu);
    while (t) {
        task *next = t->reap_next;
        void *owner = t->owner;
        task_free(t);
        if (owner)
            release(owner);
        atomic_fetch_sub(&pending, 1);
        t = next;
    }
}

int pygpu_bg_pending(void)
{
    return atomic_load(&pending);
}

/* The child of a fork has no mover; the parent's tasks are the parent's. */
static void bg_fork(enum pygpu_fork_phase phase)
{
    if (phase != PYGPU_FORK_CHILD)
        return;
    pthread_mutex_init(&bg_mu, NULL);
    pthread_cond_init(&copied_cv, NULL);
    reap_list = reap_tail = NULL;
    warming = 0;
    counters = NULL;                        /* (the parent's page-locked memory is not the child's) */
    ncounters_free = counters_tried = 0;
    atomic_store(&waits_fail, 0);
    atomic_store(&writes_fail, 0);
    pthread_mutex_init(&queue_mu, NULL);
    for (int i = 0; i < 2; i++) {
        bg_thread *b = bg_threads[i];
        pthread_cond_init(&b->cv, NULL);
        b->head = b->tail = NULL;
        b->busy = b->running = 0;           /* (started again when needed) */
    }
    lander_device = 0;
    atomic_store(&pending, 0);
    atomic_store(&reapable, 0);
}

void pygpu_bg_init(void)
{
    pygpu_fork_register(bg_fork);
}
