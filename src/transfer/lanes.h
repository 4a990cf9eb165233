/*
 * lanes.h -- the staging lanes (lanes.c): the page-locked buffers and
 * events of one staged transfer at a time, on one device.  Each thread's
 * transfer takes a lane of its own (its device's idle one, or a new one),
 * so that transfers from several threads or to several devices run side by
 * side, their host copies taking turns on the workers chunk by chunk
 * (workers.c), and none falls back to the runtime's slow way for finding
 * another at work.  Idle lanes keep their buffers for the next transfers
 * (pygpu_staging_release gives them back); once a burst is over, those
 * beyond one per device go back to the pinned pool after a second idle.
 * A transfer that starts while another is at work on its device takes a
 * lane of smaller buffers (the crowd_up and crowd_down settings): the
 * lanes of many threads together stay small enough for the host's caches.
 * Pure C over the runtime interface, callable without the GIL.
 */
#ifndef PYGPU_TRANSFER_LANES_H
#define PYGPU_TRANSFER_LANES_H

#include <stddef.h>

#include "../backend/rt.h"
#include "settings.h"
#include "trace.h"
#include "../tuning.h"

_Static_assert(PYGPU_WHOLE_CHUNKS <= PYGPU_TRACE_DMA_MAX, "the trace records a timing event per DMA call");

typedef struct pygpu_lane {
    int busy, serves;           /* taken by a transfer to device `serves` */
    int drop;                   /* give the buffers back when that transfer ends */
    double idle_since;          /* when its last transfer ended (seconds, monotonic) */
    int depth, device;          /* the buffers: `depth` of `chunk` bytes, on `device` (-1: none) */
    size_t chunk;
    void *buf[PYGPU_MAX_DEPTH];
    pygpu_event_t ev[PYGPU_MAX_DEPTH];
    int recorded[PYGPU_MAX_DEPTH];      /* ev[b] marks buffer b's last DMA */
    pygpu_event_t whole[PYGPU_WHOLE_CHUNKS];  /* one per DMA call of a whole-buffer transfer */
    unsigned turn;              /* whole-buffer downloads so far: where the next one starts */
} pygpu_lane;

/* A lane for an upload (up = 1) or a download to or from device `dev`,
 * with buffers for `cfg`: of cfg->crowd_up (crowd_down) bytes, where that
 * is set and smaller than cfg->chunk, if another transfer is at work on
 * the device, else of cfg->chunk; cfg->chunk is set to the lane's.  Waits
 * while the device has as many transfers staged as it may (stop(arg) is
 * asked every 10 ms: non-zero gives up); NULL when it gave up or the
 * buffers cannot be had (the pinned pool's limit). */
pygpu_lane *pygpu_lane_take(pygpu_transfer_config *cfg, int dev, int up, int (*stop)(void *), void *arg);
/* 1 while another transfer than the lane's own is at work on its device. */
int pygpu_lane_crowded(const pygpu_lane *l);
/* Whether the caller's transfer (its lane taken) is the only staged one at
 * work in the process, on any device (uploads and downloads completing in
 * the background hold no lane, and are not counted). */
int pygpu_lanes_alone(void);
/* Whether no staged transfer is at work in the process (for the
 * background's threads, which hold no lane). */
int pygpu_lanes_idle(void);
/* Give a lane back at the end of its transfer. */
void pygpu_lane_give(pygpu_lane *l);
/* Registers the lanes' fork handler. */
void pygpu_lanes_init(void);

#endif
