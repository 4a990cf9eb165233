/*
 * background_task.h -- what background.c and background_down.c share (not
 * part of the transfer layer's interface, which is background.h): a
 * background transfer's task, the threads that take them, and the calls
 * on tasks that both sides make.
 */
#ifndef PYGPU_TRANSFER_BACKGROUND_TASK_H
#define PYGPU_TRANSFER_BACKGROUND_TASK_H

#include "../backend/rt.h"
#include "../shape.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define BG_CHUNKS 256           /* chunks of an upload, at most (each costs the caller two calls on the stream) */
#define BG_UP_CHUNK ((ptrdiff_t)8 << 20)        /* bytes an upload's chunk, where there are 4 or more (see cut) */
#define BG_DOWN_CHUNKS 32       /* chunks of a download into a whole block, at most (each has an event) */
#define BG_DOWN_CHUNK ((ptrdiff_t)8 << 20)
#define BG_RING_SLOTS 4         /* a ring's block: this many chunks */
#define BG_RING_CHUNK ((ptrdiff_t)16 << 20)     /* bytes a ring's chunk, at most (see cut) */
#define BG_RING_CHUNKS 128      /* chunks of a transfer through a ring, at most */
#define BG_COUNTERS 1024        /* counters in use at once, at most (then host functions gate the uploads) */

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
    int copied;                 /* an upload's chunks in the block (pygpu_bg_mu) */
    int upload;
    uint32_t *counter;          /* an upload's chunks copied (a ring download's copied out), for the
                                 * device's wait; or NULL */
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
     * count (`counter`, chunks copied out) to reach k + 1 - ring; a ring
     * upload's, for the device's count (`sent`) to pass k + 1 - ring
     * before the mover copies chunk k. */
    pygpu_event_t ev[BG_RING_CHUNKS];
    atomic_int queued, queue_over;
    int device, landed, ring;
    int land_stream;            /* a download's copy-out with non-temporal stores (past the cache) */
    int claimed;                /* taken by its thread (pygpu_bg_mu); a download's host function may take it first */
};

/* A thread of the background (the mover, the lander) and its queue of
 * tasks, taken in order (pygpu_bg_mu). */
typedef struct {
    task *head, *tail;
    pthread_cond_t cv;          /* a task for it, or it idle */
    int running, busy;
    void (*run)(task *t);       /* what it does with a task, without pygpu_bg_mu */
} bg_thread;

/* The mover's and the lander's shared state (background.c). */
extern pthread_mutex_t pygpu_bg_mu;         /* the threads' queues, the tasks' counts */
extern pthread_mutex_t pygpu_bg_queue_mu;   /* a transfer handed over and queued (background.c) */
extern pthread_cond_t pygpu_bg_copied_cv;   /* an upload's chunk copied, or a download landed */
extern bg_thread pygpu_bg_lander;
extern atomic_int pygpu_bg_in_flight;       /* tasks not yet reaped */
extern int pygpu_bg_lander_device;          /* the lander's current device (background_down.c) */

/* A task for host elements [0, n) (see background.c), or NULL. */
task *pygpu_bg_task_new(int upload, char *host, const ptrdiff_t *strides, int nd, const ptrdiff_t *shape,
                        ptrdiff_t itemsize);
/* Its events, counters, block and itself given back; not the owner. */
void pygpu_bg_task_free(task *t);
/* Hand t to thread b, pygpu_bg_queue_mu taken until the caller has queued
 * the task's work (see background.c); 0, or -1 (t given back). */
int pygpu_bg_hand_over(bg_thread *b, task *t, int *taken);
/* The task onto the reaper's list (a host function, or called). */
void pygpu_bg_finish(void *arg);
/* 0 if the stream can wait (and, for an upload, write) for a ring. */
int pygpu_bg_ring_tried(task *t, pygpu_stream_t s);
/* Where chunk k is in the task's block. */
char *pygpu_bg_slot(const task *t, int k);
/* The threads that copy a task's chunks. */
int pygpu_bg_task_threads(const task *t);
/* Between two looks at something another thread or the device sets. */
void pygpu_bg_pause_after(int spins);
/* The lander's work on a download (background_down.c). */
void pygpu_bg_lander_run(task *t);

#endif /* PYGPU_TRANSFER_BACKGROUND_TASK_H */
