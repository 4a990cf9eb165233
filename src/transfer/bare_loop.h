/*
 * bare_loop.h -- the floor of a mid-size staged transfer (bare_loop.c): the
 * same host copies, on the same workers, and the same DMAs as the staging
 * pipeline, in windows, with nothing around them.  An instrument for
 * `python -m pygpu.bench --scale`.  Pure C, callable without the GIL.
 */
#ifndef PYGPU_TRANSFER_BARE_LOOP_H
#define PYGPU_TRANSFER_BARE_LOOP_H

#include "../backend/rt.h"

#include <stddef.h>

#define PYGPU_BARE_WINDOWS 8    /* at most */

/* `reps` transfers of `n` bytes between touched host memory `host` and
 * device memory `dev` (of the current device) through the page-locked
 * ring `ring` of `ring_bytes` (each transfer in the next slot of n bytes,
 * as the pipeline turns round its buffers), in `windows` windows: up, each
 * window copied in by `threads` threads then its DMA queued; down, every
 * window's DMA queued, then each copied out once its event has passed.
 * `ev` holds `windows` events of the device; `s` is a stream of it.
 * *median_s: the median time of one transfer, after a few not counted.
 * *call names the runtime call that failed. */
pygpu_status pygpu_bare_loop(int up, char *host, char *dev, char *ring, size_t ring_bytes, size_t n, int windows,
                             int threads, int reps, pygpu_stream_t s, pygpu_event_t *ev, double *median_s,
                             const char **call);

#endif /* PYGPU_TRANSFER_BARE_LOOP_H */
