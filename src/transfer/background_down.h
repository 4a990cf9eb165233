/*
 * background_down.h -- downloads into pageable memory that complete in
 * the background (background_down.c).  Pure C, callable without the GIL.
 */
#ifndef PYGPU_TRANSFER_BACKGROUND_DOWN_H
#define PYGPU_TRANSFER_BACKGROUND_DOWN_H

#include <stddef.h>

#include "../backend/rt.h"

/* The dense device buffer `dev` down into host elements [0, n) in C order
 * over shape (strides: the host layout) on stream s, in the background:
 * the call queues each chunk's DMA into a page-locked block and an event
 * after it, then a host function that holds the stream until the lander
 * thread has copied every chunk out (each as soon as its event has
 * passed), and returns.  A download bigger than the last-level cache goes
 * through a block of PYGPU_BG_RING_SLOTS chunks (tuning.h), each DMA
 * behind a gate (the stream's wait on a counter) that opens once the
 * lander has copied out the chunk that slot held.  Work queued on the stream afterwards, and its
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

#endif /* PYGPU_TRANSFER_BACKGROUND_DOWN_H */
