/*
 * cross.h -- dense bytes from one device to another that it cannot reach,
 * through page-locked host buffers in a pipeline (cross.c).  Pure C over
 * the runtime interface: statuses, no Python, callable without the GIL.
 */
#ifndef PYGPU_TRANSFER_CROSS_H
#define PYGPU_TRANSFER_CROSS_H

#include <stddef.h>

#include "../backend/rt.h"
#include "pipeline.h"

/* `n` dense bytes from `src` on `sdev` to `dst` on `ddev` through pinned host
 * buffers: device to host on `sdev`'s legacy stream, host to device on
 * c->stream, `depth` buffers in flight, ordered by events (no host waits).
 * `ddev` is current on entry and on return; c->call names the call that
 * failed.  *staged is 0 if the pinned pool had no buffer for it (nothing
 * was done: the caller goes another way). */
pygpu_status pygpu_staged_cross(pygpu_staging_ctx *c, char *dst, int ddev, const char *src, int sdev, size_t n,
                                int *staged);

#endif /* PYGPU_TRANSFER_CROSS_H */
