/*
 * lanes.c -- the staging lanes; see lanes.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "lanes.h"
#include "pinned_pool.h"
#include "pipeline.h"
#include "../fork.h"
#include "../tuning.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define MAX_LANES 32                /* in all */

typedef pygpu_lane lane;

static pthread_mutex_t lanes_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lanes_cv = PTHREAD_COND_INITIALIZER;
static lane lanes[MAX_LANES];
/* Transfers at work on each device (by its number modulo CROWD_SLOTS: two
 * devices that share a count only look busier), read without the lock. */
#define CROWD_SLOTS 64
static atomic_int at_work_on[CROWD_SLOTS];
static atomic_int at_work;          /* on every device */

static atomic_int *crowd_of(int dev)
{
    return &at_work_on[(unsigned)dev % CROWD_SLOTS];
}

int pygpu_lane_crowded(const pygpu_lane *l)
{
    return atomic_load(crowd_of(l->serves)) > 1;
}

int pygpu_lanes_alone(void)
{
    return atomic_load(&at_work) == 1;
}

int pygpu_lanes_idle(void)
{
    return atomic_load(&at_work) == 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Wait for and free a lane's buffers and events (an idle lane, or the
 * caller's own). */
static void lane_drop(lane *l)
{
    for (int b = 0; b < l->depth; b++) {
        if (l->ev[b] && !pygpu_fork_broken()) {   /* (a broken child leaves the parent's events alone) */
            if (l->recorded[b])
                pygpu_rt_event_synchronize(l->ev[b]);
            pygpu_rt_event_destroy(l->ev[b]);
        }
        if (l->buf[b])
            pygpu_pinned_give(l->buf[b]);
        l->ev[b] = NULL;
        l->buf[b] = NULL;
        l->recorded[b] = 0;
    }
    for (int k = 0; k < PYGPU_WHOLE_CHUNKS; k++) {
        if (l->whole[k] && !pygpu_fork_broken())
            pygpu_rt_event_destroy(l->whole[k]);
        l->whole[k] = NULL;
    }
    (void)pygpu_rt_get_last_error();
    l->depth = 0;
    l->device = -1;
    l->drop = 0;
}

/* Make the caller's lane's buffers for `c` on device `dev`; 0 if they
 * cannot be had. */
static int lane_ready(lane *l, const pygpu_transfer_config *c, int dev)
{
    if (l->depth == c->depth && l->chunk == c->chunk && l->device == dev)
        return 1;
    lane_drop(l);
    for (int b = 0; b < c->depth; b++) {
        l->buf[b] = pygpu_pinned_take(c->chunk, dev);
        if (!l->buf[b] || pygpu_rt_event_create(&l->ev[b], PYGPU_EVENT_DISABLE_TIMING) != 0) {
            l->depth = b + 1;
            lane_drop(l);
            return 0;
        }
    }
    l->depth = c->depth;
    l->chunk = c->chunk;
    l->device = dev;
    return 1;
}

/* An idle lane for device `dev` (lanes_mu held): one with buffers of the
 * settings `c` there, else an empty one, else an idle one to rebuild; NULL
 * when the device has PYGPU_LANES_PER_DEVICE transfers at work, or none is idle. */
static lane *lane_find(const pygpu_transfer_config *c, int dev)
{
    lane *same = NULL, *empty = NULL, *other = NULL;
    int at_work = 0;
    for (int i = 0; i < MAX_LANES; i++) {
        lane *l = &lanes[i];
        if (l->busy)
            at_work += l->serves == dev;
        else if (l->device == dev && l->depth == c->depth && l->chunk == c->chunk)
            same = same ? same : l;
        else if (l->depth == 0)
            empty = empty ? empty : l;
        else
            other = other ? other : l;
    }
    if (at_work >= PYGPU_LANES_PER_DEVICE)
        return NULL;
    return same ? same : empty ? empty : other;
}

void pygpu_staging_release(void)
{
    pthread_mutex_lock(&lanes_mu);
    for (int i = 0; i < MAX_LANES; i++) {
        if (lanes[i].busy)
            lanes[i].drop = 1;      /* (its transfer gives them back as it ends) */
        else
            lane_drop(&lanes[i]);
    }
    pthread_mutex_unlock(&lanes_mu);
}

/* Give the caller's lane back, and wake a transfer waiting for one (its
 * buffers go back to the pinned pool if staging_release asked while it was
 * at work). */
void pygpu_lane_give(lane *l)
{
    pthread_mutex_lock(&lanes_mu);
    int drop = l->drop;
    pthread_mutex_unlock(&lanes_mu);
    if (drop)
        lane_drop(l);           /* (still busy: nobody else touches it) */
    pthread_mutex_lock(&lanes_mu);
    atomic_fetch_sub(crowd_of(l->serves), 1);
    atomic_fetch_sub(&at_work, 1);
    l->busy = 0;
    l->idle_since = now_s();
    pthread_cond_broadcast(&lanes_cv);
    pthread_mutex_unlock(&lanes_mu);
}

/* A lane left idle for PYGPU_LANE_IDLE_S while its device has another with
 * buffers (a burst of transfers from several threads is over), claimed
 * for dropping (lanes_mu held; serves -1 marks it); NULL if none. */
static lane *surplus_lane(void)
{
    double t = now_s();
    for (int i = 0; i < MAX_LANES; i++) {
        lane *l = &lanes[i];
        if (l->busy || l->depth == 0 || t - l->idle_since < PYGPU_LANE_IDLE_S)
            continue;
        for (int j = 0; j < MAX_LANES; j++) {
            if (j != i && lanes[j].depth > 0 && lanes[j].device == l->device && lanes[j].serves != -1) {
                l->busy = 1;
                l->serves = -1;
                return l;
            }
        }
    }
    return NULL;
}

/* The buffers' size for a transfer that starts now (lanes_mu held). */
static size_t chunk_now(const pygpu_transfer_config *cfg, size_t chunk, int dev, int up)
{
    size_t crowd = up ? cfg->crowd_up : cfg->crowd_down;
    return crowd && crowd < chunk && atomic_load(crowd_of(dev)) > 0 ? crowd : chunk;
}

pygpu_lane *pygpu_lane_take(pygpu_transfer_config *cfg, int dev, int up, int (*stop)(void *), void *arg)
{
    lane *l;
    size_t chunk = cfg->chunk;
    pthread_mutex_lock(&lanes_mu);
    while (cfg->chunk = chunk_now(cfg, chunk, dev, up), !(l = lane_find(cfg, dev))) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 10 * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&lanes_cv, &lanes_mu, &until);
        pthread_mutex_unlock(&lanes_mu);
        if (stop && stop(arg))
            return NULL;
        pthread_mutex_lock(&lanes_mu);
    }
    l->busy = 1;
    l->serves = dev;
    atomic_fetch_add(crowd_of(dev), 1);
    atomic_fetch_add(&at_work, 1);
    lane *spare = surplus_lane();
    pthread_mutex_unlock(&lanes_mu);
    if (spare) {                /* (one at a time: each take drops at most one) */
        lane_drop(spare);
        pthread_mutex_lock(&lanes_mu);
        spare->busy = 0;
        pthread_mutex_unlock(&lanes_mu);
    }
    if (!lane_ready(l, cfg, dev)) {
        pygpu_lane_give(l);
        return NULL;
    }
    return l;
}

/* The child of a fork in which another thread was in a transfer starts
 * without any lane's buffers (they stay "in use" in the child's pool). */
static void lanes_fork(enum pygpu_fork_phase phase)
{
    int busy = 0;
    if (phase != PYGPU_FORK_CHILD)
        return;
    pthread_mutex_init(&lanes_mu, NULL);
    pthread_cond_init(&lanes_cv, NULL);
    for (int i = 0; i < MAX_LANES; i++)
        busy |= lanes[i].busy;
    if (busy) {
        memset(lanes, 0, sizeof lanes);
        for (int i = 0; i < CROWD_SLOTS; i++)
            atomic_store(&at_work_on[i], 0);
        atomic_store(&at_work, 0);
        for (int i = 0; i < MAX_LANES; i++)
            lanes[i].device = -1;
    }
}

void pygpu_lanes_init(void)
{
    pygpu_fork_register(lanes_fork);
}
