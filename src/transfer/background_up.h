/*
 * background_up.h -- uploads from pageable memory that complete in the
 * background (background_up.c): the call queues, on the caller's stream,
 * the DMA of each chunk from a page-locked block behind a gate (the
 * stream waiting on a counter in page-locked memory, else a host
 * function) that opens once the mover thread has copied that chunk into
 * the block, and returns; work queued on the stream afterwards sees the
 * data.  The host memory's owner and the block are kept until the mover
 * is done with the task and the stream has passed its last DMA.  Pure C,
 * callable without the GIL.
 */
#ifndef PYGPU_TRANSFER_BACKGROUND_UP_H
#define PYGPU_TRANSFER_BACKGROUND_UP_H

#include <stddef.h>

#include "../backend/rt.h"

/* Host elements [0, n) in C order over shape (strides: the host layout)
 * up into the dense device buffer `dev` on stream s, in the background.
 * `owner` (a PyObject holding the host memory, with a reference the task
 * takes over) is handed to the reaper once the host memory has been read.
 * *taken = 0 when the upload is not for the background, and the caller
 * keeps its reference: no cached page-locked block fits (the warmer then
 * page-locks one for the pool, so that the next upload of this size goes
 * in the background: that takes milliseconds a hundred MiB, which are not
 * the caller's), or no mover thread could be started.  Else a status:
 * where queuing failed part way, the stream is waited for before this
 * returns, and the task is over. */
pygpu_status pygpu_bg_upload(char *dev, const char *host, const ptrdiff_t *strides, int nd, const ptrdiff_t *shape,
                             ptrdiff_t itemsize, pygpu_stream_t s, void *owner, int *taken);

#endif /* PYGPU_TRANSFER_BACKGROUND_UP_H */
