/*
 * background.h -- uploads from pageable memory that complete in the
 * background (background.c): the call queues, on the caller's stream, the
 * DMA of each chunk from a page-locked block behind a gate (the stream
 * waiting on a counter in page-locked memory, else a host function) that
 * opens once the mover thread has copied that chunk into the block, and
 * returns; work queued on the stream afterwards sees the data.  The host
 * memory's owner and the block are kept until the mover is done with the
 * task and the stream has passed its last DMA.  Pure C, callable without
 * the GIL, except pygpu_bg_reap.
 */
#ifndef PYGPU_TRANSFER_BACKGROUND_H
#define PYGPU_TRANSFER_BACKGROUND_H

#include <stddef.h>

#include "../backend/rt.h"
#include "../tuning.h"          /* (PYGPU_BG_MIN: uploads of fewer bytes are not worth a background task) */

/* Host elements [0, n) in C order over shape (strides: the host layout)
 * up into the dense device buffer `dev` on stream s, in the background.
 * `owner` (a PyObject holding the host memory, with a reference the task
 * takes over) is handed to the reaper once the host memory has been read.
 * *taken = 0 when the upload is not for the background, and the caller
 * keeps its reference: no cached page-locked block fits (the mover then
 * page-locks one for the pool, so that the next upload of this size goes
 * in the background: that takes milliseconds a hundred MiB, which are not
 * the caller's), or no mover thread could be started.  Else a status:
 * where queuing failed part way, the stream is waited for before this
 * returns, and the task is over. */
pygpu_status pygpu_bg_upload(char *dev, const char *host, const ptrdiff_t *strides, int nd, const ptrdiff_t *shape,
                             ptrdiff_t itemsize, pygpu_stream_t s, void *owner, int *taken);
/* The dense device buffer `dev` down into host elements [0, n) in C order
 * over shape (strides: the host layout) on stream s, in the background:
 * the call queues each chunk's DMA into a page-locked block and an event
 * after it, then a host function that holds the stream until the lander
 * thread has copied every chunk out (each as soon as its event has
 * passed), and returns.  A download bigger than the last-level cache goes
 * through a block of four chunks, each DMA behind a gate (the stream's
 * wait on a counter) that opens once the lander has copied out the chunk
 * that slot held.  Work queued on the stream afterwards, and its
 * synchronization, see the host memory written.  `owner` (a PyObject
 * holding the host memory, with a reference the task takes over) is
 * handed to the reaper once the task is over.  *taken = 0 when the
 * download is not for the background (as for pygpu_bg_upload: no cached
 * block fits, or no events could be made), and the caller keeps its
 * reference; so too where the stream cannot wait on a counter for a ring.
 * Else a status: where queuing failed part way, the stream is waited
 * for before this returns, and the task is over. */
pygpu_status pygpu_bg_download(char *host, const ptrdiff_t *strides, int nd, const ptrdiff_t *shape,
                               ptrdiff_t itemsize, const char *dev, pygpu_stream_t s, void *owner, int *taken);
/* Give back what finished tasks held: their blocks to the pinned pool, and
 * each owner to release(owner) (called with the GIL held). */
void pygpu_bg_reap(void (*release)(void *owner));
/* Background tasks not yet over: uploads and downloads not yet reaped,
 * and blocks being page-locked for the pool. */
int pygpu_bg_pending(void);
/* Registers the fork handler and the wait at exit. */
void pygpu_bg_init(void);

#endif /* PYGPU_TRANSFER_BACKGROUND_H */
