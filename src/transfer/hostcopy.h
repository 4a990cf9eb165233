/*
 * hostcopy.h -- host-side copies of element ranges between two layouts,
 * split across the worker threads (hostcopy.c), and the fault-in of fresh
 * destinations.  Pure C, callable without the GIL.
 */
#ifndef PYGPU_TRANSFER_HOSTCOPY_H
#define PYGPU_TRANSFER_HOSTCOPY_H

#include <stddef.h>

#include "workers.h"

/* One side of a range copy.  A dense side holds exactly the range: `ptr` is
 * its first element and elements follow at itemsize.  A strided side holds
 * element [0, ..., 0] at `ptr` - `origin` (so a buffer can hold a window of
 * a bigger layout: origin is the window's first byte offset). */
typedef struct {
    char *ptr;
    const ptrdiff_t *strides;   /* NULL: dense */
    ptrdiff_t origin;
} pygpu_range_side;

/* Elements [start, start + count), in C order over `shape`, from src to
 * dst; `stream`: written with non-temporal stores (a staging buffer on its
 * way up: pygpu_up_stream; a download's destination past the cache:
 * pygpu_down_stream). */
typedef struct {
    pygpu_range_side dst, src;
    const ptrdiff_t *shape;
    int nd;
    ptrdiff_t itemsize, start, count;
    int stream;
    int traced;                 /* its parts go into the staging trace (set when it starts) */
} pygpu_range_job;

/* Whether a chunk of `bytes` going up into a staging buffer is written with
 * non-temporal stores. */
int pygpu_up_stream(ptrdiff_t bytes);

/* The host's last-level cache in bytes: PYGPU_CACHE_BYTES (K/M/G) where
 * set, else what the system reports, else 32 MiB. */
size_t pygpu_cache_bytes(void);

/* Whether a download of `total` bytes is copied out of the staging
 * buffers with non-temporal stores: past the last-level cache, where the
 * destination's lines are not cached anyway and plain stores would first
 * read each of them from memory (docs/performance.md: streaming stores
 * going down). */
int pygpu_down_stream(size_t total);

/* How many parts a range copy of `bytes` is cut into for `threads`. */
int pygpu_range_parts(ptrdiff_t bytes, int threads);
/* The copy started on the workers (join it with pygpu_job_join; j must
 * live until then), or done at once. */
pygpu_job pygpu_range_start(pygpu_range_job *j, int threads);
void pygpu_parallel_range(pygpu_range_job *j, int threads);

/* Copy elements [start, start + count) (in C order over `shape`) between two
 * host layouts, split across the worker threads. */
void pygpu_parallel_strided_copy(char *dst, const ptrdiff_t *dst_strides, const char *src,
                                 const ptrdiff_t *src_strides, int nd, const ptrdiff_t *shape,
                                 ptrdiff_t itemsize, ptrdiff_t start, ptrdiff_t count);

/* (Destinations of PYGPU_FRESH_MIN bytes or more, tuning.h, may be fresh
 * from the kernel; smaller arrays come from malloc's reused memory.) */
/* Whether [p, p + n) looks never touched (some sampled pages have no
 * memory yet). */
int pygpu_looks_fresh(const void *p, size_t n);
/* Fault in the pages of [p, p + n) on `threads` threads, keeping their bytes. */
void pygpu_parallel_prefault(void *p, size_t n, int threads);

#endif /* PYGPU_TRANSFER_HOSTCOPY_H */
