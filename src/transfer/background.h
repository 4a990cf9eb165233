/*
 * background.h -- the background's queue (background.c): the tasks of
 * transfers that complete in the background, the threads that take
 * them in order (the mover, for uploads; the lander, for downloads; the
 * warmer, for blocks page-locked for the pool), their locks and counts, the
 * uploads' counters, and the reaper that gives back what finished tasks
 * held.  The uploads (background_up.c) and the downloads
 * (background_down.c) make tasks and hand them over here; the queue
 * reaches their work only through the task's `run`.  Pure C, callable
 * without the GIL, except pygpu_bg_reap.
 */
#ifndef PYGPU_TRANSFER_BACKGROUND_H
#define PYGPU_TRANSFER_BACKGROUND_H

#include "../backend/rt.h"
#include "../shape.h"
#include "../tuning.h"          /* (PYGPU_BG_*: the background's sizes and bounds) */

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The task's arrays hold the chunks of any task (tuning.h: the bounds of
 * an upload's, a download's, a ring's). */
_Static_assert(PYGPU_BG_RING_CHUNKS <= PYGPU_BG_CHUNKS && PYGPU_BG_DOWN_CHUNKS <= PYGPU_BG_CHUNKS,
               "start[] holds every task's chunks");
_Static_assert(PYGPU_BG_DOWN_CHUNKS <= PYGPU_BG_RING_CHUNKS, "ev[] holds every download's chunks");

typedef struct task task;

typedef struct {
    task *t;
    int k;
} gate_arg;

/* The background's threads, each with its queue of tasks (the warmer's
 * are background.c's own: blocks page-locked for the pool). */
enum pygpu_bg_thread { PYGPU_BG_MOVER, PYGPU_BG_LANDER, PYGPU_BG_WARMER };

struct task {
    task *next;                 /* in its thread's queue (the mover's, the lander's, the warmer's) */
    task *reap_next;            /* in the reaper's list (an upload is there while the mover may still have it) */
    /* What its thread does with it, without the queue's lock; `device`:
     * the thread's current device, which the call keeps (a new thread is
     * on device 0). */
    void (*run)(task *t, int *device);
    char *block;                /* the page-locked copy of the host data */
    char *host;
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS], itemsize;
    int nd, nchunks;
    ptrdiff_t start[PYGPU_BG_CHUNKS + 1];       /* chunk k: elements [start[k], start[k + 1]) */
    int copied;                 /* an upload's chunks in the block (the queue's lock) */
    int upload;
    uint32_t *counter;          /* an upload's chunks copied (a ring download's copied out), for the
                                 * device's wait; or NULL */
    uint32_t *sent;             /* a ring upload's DMAs over, written by the device */
    atomic_int abandon;         /* a ring upload's queuing failed: the mover stops at the next slot */
    pygpu_event_t done;         /* an upload's, after its last DMA; or NULL (then a host function ends it) */
    gate_arg gate[PYGPU_BG_CHUNKS];
    void *owner;
    size_t warm;                /* not an upload: page-lock a block of this size for the pool */
    /* A download: the event after each chunk's DMA, the chunks queued (the
     * lander copies out those; queuing over once `queue_over`), the
     * device (an upload's too: its events are that device's, kept there
     * for the next task by events.c), and whether the lander is done.  A ring download's block
     * holds `ring` chunks in turn: chunk k's DMA waits for the lander's
     * count (`counter`, chunks copied out) to reach k + 1 - ring; a ring
     * upload's, for the device's count (`sent`) to pass k + 1 - ring
     * before the mover copies chunk k. */
    pygpu_event_t ev[PYGPU_BG_RING_CHUNKS];
    atomic_int queued, queue_over;
    int device, landed, ring;   /* landed: the queue's lock */
    int land_stream;            /* a download's copy-out with non-temporal stores (past the cache) */
    int claimed;                /* taken by its thread (the queue's lock); a download's host function may take it first */
};

/* A task for host elements [0, n) (see background.c) with device `dev`
 * (the current one: -1 where it is not known), or NULL. */
task *pygpu_bg_task_new(int upload, char *host, const ptrdiff_t *strides, int nd, const ptrdiff_t *shape,
                        ptrdiff_t itemsize, int dev);
/* Its events, counters, block and itself given back; not the owner. */
void pygpu_bg_task_free(task *t);
/* Hand t to thread `thread`, which calls t->run(t, ...), with the queue
 * taken until the caller has queued the task's work and called
 * pygpu_bg_queued (see background.c); 0, or -1 (t given back). */
int pygpu_bg_hand_over(enum pygpu_bg_thread thread, task *t, void (*run)(task *t, int *device), int *taken);
/* The task's work is on the stream: the next transfer may be handed over. */
void pygpu_bg_queued(void);
/* The task onto the reaper's list (a host function, or called). */
void pygpu_bg_finish(void *arg);
/* 0 if the stream can wait (and, for an upload, write) for a ring. */
int pygpu_bg_ring_tried(task *t, pygpu_stream_t s);
/* The device's wait on a counter failed: no counter from here on. */
void pygpu_bg_waits_failed(void);
/* Where chunk k is in the task's block. */
char *pygpu_bg_slot(const task *t, int k);
/* The threads that copy a task's chunks. */
int pygpu_bg_task_threads(const task *t);
/* Between two looks at something another thread or the device sets. */
void pygpu_bg_pause_after(int spins);
/* An upload's `copied` set, and those waiting for it told. */
void pygpu_bg_tell_copied(task *t, int copied);
/* Until an upload's `copied` reaches n. */
void pygpu_bg_wait_copied(task *t, int n);
/* A download's `landed` set, and those waiting for it told. */
void pygpu_bg_tell_landed(task *t);
/* Until a download is landed; where its thread has not taken it yet, it
 * is taken out of that thread's queue and here(t) lands it at once. */
void pygpu_bg_claim_or_wait(enum pygpu_bg_thread thread, task *t, void (*here)(task *t));

/* Give back what finished tasks held: their blocks to the pinned pool, and
 * each owner to release(owner) (called with the GIL held). */
void pygpu_bg_reap(void (*release)(void *owner));
/* pygpu_bg_reap until no task is in flight: each ends once its stream has
 * passed it and its thread is done with it, neither of which waits for
 * the GIL (held by the caller, for release). */
void pygpu_bg_reap_all(void (*release)(void *owner));
/* The uploads' counters' page-locked block freed, a new one made when
 * next needed (before a device reset, which would free it under the
 * counters); nothing done while a task holds a counter. */
void pygpu_bg_forget_counters(void);
/* Background tasks not yet over: uploads and downloads not yet reaped,
 * and blocks being page-locked for the pool. */
int pygpu_bg_pending(void);
/* Registers the fork handler and the wait at exit. */
void pygpu_bg_init(void);
/* The warmer asked to page-lock a block of `bytes` for the pool's
 * transfers with device `dev`, for which it had none cached (not again
 * while a block of that size is in the making).  Without the GIL or with
 * it. */
void pygpu_bg_warm(size_t bytes, int dev);

#endif /* PYGPU_TRANSFER_BACKGROUND_H */
