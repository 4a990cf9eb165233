/*
 * background.c -- the background's queue (see background.h): the tasks of
 * transfers that complete in the background, the mover and the lander
 * threads that take them (and the warmer, which page-locks blocks for the
 * pool), the uploads' counters, the reaper; the uploads are
 * background_up.c, the downloads background_down.c, which make the
 * tasks and hand them over here.
 *
 * One mover thread per process takes the uploads' tasks in the order they
 * were queued, one lander thread the downloads', and one warmer thread the
 * blocks to page-lock for the pool; each calls its task's `run`.  An upload's
 * gates wait for the mover's count of chunks copied (`copied`, under
 * bg_mu), a download's host function for the lander's `landed`.
 * The reaper, with the GIL held, gives back a task's block and counters
 * and releases its owner once the task is over.
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
#include "events.h"
#include "hostcopy.h"
#include "lanes.h"
#include "pinned_pool.h"
#include "settings.h"
#include "../fork.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A thread of the background (the mover, the lander, the warmer) and its
 * queue of tasks, taken in order (bg_mu). */
typedef struct {
    task *head, *tail;
    pthread_cond_t cv;          /* a task for it, or it idle */
    int running, busy;
    int device;                 /* its current device, kept by its tasks' run (a new thread is on device 0) */
} bg_thread;

static pthread_mutex_t bg_mu = PTHREAD_MUTEX_INITIALIZER;       /* the threads' queues, the tasks' counts */
static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;    /* a transfer handed over and queued (above) */
static pthread_cond_t copied_cv = PTHREAD_COND_INITIALIZER;     /* an upload's chunk copied, or a download landed */
static task *reap_list, *reap_tail;     /* the tasks ended, in order (bg_mu) */
static int exit_wait;

static bg_thread mover = {NULL, NULL, PTHREAD_COND_INITIALIZER, 0, 0, 0};
static bg_thread lander = {NULL, NULL, PTHREAD_COND_INITIALIZER, 0, 0, 0};
static bg_thread warmer = {NULL, NULL, PTHREAD_COND_INITIALIZER, 0, 0, 0};
static bg_thread *const bg_threads[] = {[PYGPU_BG_MOVER] = &mover, [PYGPU_BG_LANDER] = &lander,
                                        [PYGPU_BG_WARMER] = &warmer};
#define BG_THREADS ((int)(sizeof bg_threads / sizeof *bg_threads))
static size_t warming;          /* the size of the block the warmer is asked to page-lock, if any */
static atomic_int in_flight;    /* tasks not yet reaped */
static atomic_int reapable;

/* The uploads' counters: PYGPU_BG_COUNTERS of them in one page-locked
 * block, made at the first upload; those free are on a stack (bg_mu).
 * Once a wait has failed, host functions gate every upload after it. */
_Static_assert(PYGPU_BG_COUNTERS <= 32767, "counters_free numbers them in shorts");
static uint32_t *counters;
static short counters_free[PYGPU_BG_COUNTERS];
static int ncounters_free, counters_tried;
static atomic_int waits_fail, writes_fail;

/* The chunks of n elements, all of one size: PYGPU_BG_UP_CHUNK bytes
 * (uploads) or PYGPU_BG_DOWN_CHUNK (downloads), or a
 * PYGPU_BG_SMALL_CHUNKS-th of a smaller transfer, or a PYGPU_BG_CHUNKS-th
 * (PYGPU_BG_DOWN_CHUNKS-th) of a bigger one; a ring's (either way):
 * PYGPU_BG_RING_CHUNK bytes, or a smaller one cut to go round the ring
 * PYGPU_BG_RING_LAPS times, or a PYGPU_BG_RING_CHUNKS-th of a bigger one.
 * The stream has an upload's data after the first chunk's copy and every
 * chunk's DMA in turn (each gate lets its DMA through some microseconds
 * after the mover's copy, which keeps up with the link), so the first
 * copy is time the background adds; and each chunk costs the caller two
 * calls on the stream (docs/performance.md#background-chunks). */
static void cut(task *t, ptrdiff_t n)
{
    ptrdiff_t most_chunks = t->ring ? PYGPU_BG_RING_CHUNKS : t->upload ? PYGPU_BG_CHUNKS : PYGPU_BG_DOWN_CHUNKS;
    ptrdiff_t laps = PYGPU_BG_RING_LAPS * PYGPU_BG_RING_SLOTS;
    ptrdiff_t per = (t->ring ? PYGPU_BG_RING_CHUNK : t->upload ? PYGPU_BG_UP_CHUNK : PYGPU_BG_DOWN_CHUNK) / t->itemsize,
              part = t->ring ? (n + laps - 1) / laps : (n + PYGPU_BG_SMALL_CHUNKS - 1) / PYGPU_BG_SMALL_CHUNKS,
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

/* Where chunk k is in the task's block: its place in the whole, or its
 * slot in a ring. */
char *pygpu_bg_slot(const task *t, int k)
{
    ptrdiff_t at = t->ring ? (k % t->ring) * (t->start[1] - t->start[0]) : t->start[k];
    return t->block + at * t->itemsize;
}

/* The threads that copy a task's chunks, as for a staged transfer (alone:
 * no staged transfer at work, the background holding no lane). */
int pygpu_bg_task_threads(const task *t)
{
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    return pygpu_transfer_threads(&cfg, (size_t)(t->start[t->nchunks] * t->itemsize), pygpu_lanes_idle());
}

/* A block of t->warm bytes page-locked into the pool; t is over.  (The
 * warmer's work on a task of pygpu_bg_warm's.  Not the mover's: page-locking
 * and the pool's evictions (unregistering) are runtime calls that may wait
 * for the device, whose streams may hold gated uploads queued behind the
 * task in the mover's order, waiting for the mover's copies; the mover
 * makes no runtime call, so that nothing it does waits for a stream.) */
static void warm_block(task *t, int *device)
{
    (void)device;
    void *b = pygpu_pinned_take(t->warm, t->device);
    if (b)
        pygpu_pinned_give(b);
    free(t);
    atomic_fetch_sub(&in_flight, 1);
    pthread_mutex_lock(&bg_mu);
    warming = 0;
    pthread_mutex_unlock(&bg_mu);
}

/* Between two looks at something another thread (or the device) sets:
 * a short spin, then short naps (tuning.h). */
void pygpu_bg_pause_after(int spins)
{
    if (spins > PYGPU_BG_SPINS)
        nanosleep(&(struct timespec){0, PYGPU_BG_NAP_NS}, NULL);
}

/* A background thread: its tasks in order.  A task taken is marked
 * claimed (a download's host function then leaves it to the lander). */
static void *thread_main(void *arg)
{
    bg_thread *b = arg;
    pygpu_rt_thread_relax();        /* (its waits and frees go through beside a capture in global mode) */
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
        t->run(t, &b->device);      /* (t may be over and reaped from here on) */
        pthread_mutex_lock(&bg_mu);
        b->busy = 0;
        pthread_cond_broadcast(&b->cv);         /* (the wait at exit) */
    }
    return NULL;
}

/* At exit, the background threads finish what they have (gates and
 * host functions still waiting on a stream would keep the runtime's
 * teardown waiting); a few seconds at most. */
static void bg_at_exit(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&bg_mu);
    for (int i = 0; i < BG_THREADS; i++)
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

/* Hand t to thread b, to run(t, ...), with queue_mu taken, which the
 * caller lets go (pygpu_bg_queued) once the task's work is on the stream
 * (so that the threads take the transfers in that order); 0 and *taken
 * set, or -1 where the thread cannot be started (the task given back, the
 * lock not held). */
int pygpu_bg_hand_over(enum pygpu_bg_thread thread, task *t, void (*run)(task *t, int *device), int *taken)
{
    bg_thread *b = bg_threads[thread];
    t->run = run;
    pthread_mutex_lock(&queue_mu);
    pthread_mutex_lock(&bg_mu);
    int handed = enqueue(b, t) == 0;
    pthread_mutex_unlock(&bg_mu);
    if (!handed) {
        pthread_mutex_unlock(&queue_mu);
        pygpu_bg_task_free(t);
        return -1;
    }
    *taken = 1;
    atomic_fetch_add(&in_flight, 1);
    return 0;
}

void pygpu_bg_queued(void)
{
    pthread_mutex_unlock(&queue_mu);
}

/* No cached block of `bytes`: the warmer page-locks one for the pool (the
 * milliseconds that takes are not the caller's), so that the next
 * transfer of this size (an upload in the background, a get()) finds it. */
void pygpu_bg_warm(size_t bytes, int dev)
{
    task *w = calloc(1, sizeof *w);
    if (!w)
        return;
    w->warm = bytes;
    w->device = dev;
    w->run = warm_block;
    pthread_mutex_lock(&bg_mu);
    if (warming == bytes || enqueue(&warmer, w) != 0) {     /* (asked already: the uploads meanwhile are not) */
        free(w);
    } else {
        warming = bytes;
        atomic_fetch_add(&in_flight, 1);
    }
    pthread_mutex_unlock(&bg_mu);
}

/* A counter, at 0, or NULL where there is none (the device's wait failed
 * before, or PYGPU_BG_COUNTERS are in use, or no page-locked block could be
 * had). */
static uint32_t *counter_take(void)
{
    if (atomic_load(&waits_fail))
        return NULL;
    pthread_mutex_lock(&bg_mu);
    if (!counters && !counters_tried) {
        void *p = NULL;
        counters_tried = 1;
        if (pygpu_rt_host_alloc(&p, PYGPU_BG_COUNTERS * sizeof *counters) == 0) {
            counters = p;
            for (int i = 0; i < PYGPU_BG_COUNTERS; i++)
                counters_free[i] = (short)(PYGPU_BG_COUNTERS - 1 - i);
            ncounters_free = PYGPU_BG_COUNTERS;
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

void pygpu_bg_forget_counters(void)
{
    pthread_mutex_lock(&bg_mu);
    if (counters && ncounters_free == PYGPU_BG_COUNTERS) {     /* (none in use: no task in flight) */
        if (pygpu_rt_host_free(counters) != 0)
            (void)pygpu_rt_get_last_error();
        counters = NULL;
        ncounters_free = counters_tried = 0;
    }
    pthread_mutex_unlock(&bg_mu);
}

/* (bg_mu held) */
static void counter_give(uint32_t *c)
{
    if (c)
        counters_free[ncounters_free++] = (short)(c - counters);
}

/* An upload's count of chunks in its block, under the lock (the last the
 * mover writes of a whole task: the reaper keeps it until then), and its
 * gates told. */
void pygpu_bg_tell_copied(task *t, int copied)
{
    pthread_mutex_lock(&bg_mu);
    t->copied = copied;
    pthread_cond_broadcast(&copied_cv);
    pthread_mutex_unlock(&bg_mu);
}

/* Until the mover has copied n of an upload's chunks (a gate by a host
 * function, or a failed upload's end). */
void pygpu_bg_wait_copied(task *t, int n)
{
    pthread_mutex_lock(&bg_mu);
    while (t->copied < n)
        pthread_cond_wait(&copied_cv, &bg_mu);
    pthread_mutex_unlock(&bg_mu);
}

/* A download copied out, and its host function told. */
void pygpu_bg_tell_landed(task *t)
{
    pthread_mutex_lock(&bg_mu);
    t->landed = 1;
    pthread_cond_broadcast(&copied_cv);
    pthread_mutex_unlock(&bg_mu);
}

/* A download's host function, after its last DMA and event: a task still
 * in its thread's queue comes out of it and here(t) copies it out at once
 * (so that a host function never waits for another download's device
 * work); then until the task is landed. */
void pygpu_bg_claim_or_wait(enum pygpu_bg_thread thread, task *t, void (*here)(task *t))
{
    bg_thread *b = bg_threads[thread];
    pthread_mutex_lock(&bg_mu);
    if (!t->claimed) {              /* still in the lander's queue: out of it, and copied out here */
        task **at = &b->head, *prev = NULL;
        while (*at != t) {
            prev = *at;
            at = &(*at)->next;
        }
        *at = t->next;
        if (b->tail == t)
            b->tail = prev;
        t->claimed = 1;
        pthread_mutex_unlock(&bg_mu);
        here(t);
        pthread_mutex_lock(&bg_mu);
    }
    while (!t->landed)
        pthread_cond_wait(&copied_cv, &bg_mu);
    pthread_mutex_unlock(&bg_mu);
}

/* The task onto the reaper's list (no runtime call here, nor the GIL: the
 * reaper gives back its block and its owner): as a host function after
 * the last DMA, or at once for an upload whose end is an event (the mover
 * may not have begun it yet: the reaper waits for both). */
void pygpu_bg_finish(void *arg)
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
void pygpu_bg_task_free(task *t)
{
    pygpu_event_give(t->device, t->done);                          /* (an upload's; kept for the next) */
    for (int k = 0; k < PYGPU_BG_RING_CHUNKS && t->ev[k]; k++)      /* (a download's) */
        pygpu_event_give(t->device, t->ev[k]);
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
 * then the warmer page-locks one for the next).  An upload takes a counter
 * for its gates.  An upload bigger than a ring goes through one where the
 * stream can write a counter too: its chunks are copied with plain stores
 * (they are over 8 MiB) into lines the DMA then reads out of the cache,
 * where a block as big as the upload is written with streaming stores
 * and read out of memory (docs/performance.md#background-rings).  A
 * download bigger than the last-level cache goes through a ring where the
 * stream can wait on a counter, so that its chunks land in lines the
 * cores have just read out of the block, still cached, and the block
 * stays small; and it is copied out with non-temporal stores, since its
 * destination's lines would only pass through the cache
 * (docs/performance.md#background-rings).  The caller tries the
 * stream's wait (and write) before it takes a ring task. */
task *pygpu_bg_task_new(int upload, char *host, const ptrdiff_t *strides, int nd, const ptrdiff_t *shape,
                      ptrdiff_t itemsize, int dev)
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
    t->device = dev;
    t->host = host;
    t->nd = nd;
    t->itemsize = itemsize;
    memcpy(t->shape, shape, (size_t)nd * sizeof *shape);
    memcpy(t->strides, strides, (size_t)nd * sizeof *strides);
    size_t total = (size_t)(n * itemsize);
    t->land_stream = !upload && pygpu_down_stream(total);
    int ring = upload ? total > (size_t)(PYGPU_BG_RING_SLOTS * PYGPU_BG_RING_CHUNK) && !atomic_load(&writes_fail)
                      : t->land_stream;
    if (upload || ring)
        t->counter = counter_take();
    if (ring && t->counter && (!upload || (t->sent = counter_take()) != NULL))
        t->ring = PYGPU_BG_RING_SLOTS;
    cut(t, n);
    size_t bytes = (size_t)((t->ring ? t->ring * (t->start[1] - t->start[0]) : n) * itemsize);
    if (!(t->block = pygpu_pinned_take_cached(bytes, dev))) {
        pygpu_bg_task_free(t);
        pygpu_bg_warm(bytes, dev);
        return NULL;
    }
    return t;
}

/* A ring task's trial of the stream's wait (a wait for 0 holds nothing)
 * and, for an upload, its write (of 0, which the counter holds); 0 if the
 * stream has them, else -1 (and no ring from here on). */
int pygpu_bg_ring_tried(task *t, pygpu_stream_t s)
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

void pygpu_bg_waits_failed(void)
{
    atomic_store(&waits_fail, 1);
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

/* The list is in the order the tasks were queued, which is the order they
 * end on one stream: a call looks past a few tasks not yet over
 * (PYGPU_BG_REAP_LOOK_PAST), so that its work stays bounded however many
 * uploads are in flight. */
void pygpu_bg_reap(void (*release)(void *owner))
{
    if (!atomic_load(&reapable))
        return;
    task *t = NULL, **to = &t, **at = &reap_list, *prev = NULL;
    int not_over = 0;
    pthread_mutex_lock(&bg_mu);
    while (*at && not_over < PYGPU_BG_REAP_LOOK_PAST) {
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
        pygpu_bg_task_free(t);
        if (owner)
            release(owner);
        atomic_fetch_sub(&in_flight, 1);
        t = next;
    }
}

void pygpu_bg_reap_all(void (*release)(void *owner))
{
    for (int spins = 0; atomic_load(&in_flight) > 0; spins++) {
        pygpu_bg_reap(release);
        if (atomic_load(&in_flight) > 0)
            pygpu_bg_pause_after(spins);
    }
}

int pygpu_bg_pending(void)
{
    return atomic_load(&in_flight);
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
    for (int i = 0; i < BG_THREADS; i++) {
        bg_thread *b = bg_threads[i];
        pthread_cond_init(&b->cv, NULL);
        b->head = b->tail = NULL;
        b->busy = b->running = 0;           /* (started again when needed) */
        b->device = 0;
    }
    atomic_store(&in_flight, 0);
    atomic_store(&reapable, 0);
}

void pygpu_bg_init(void)
{
    pygpu_fork_register(bg_fork);
}
