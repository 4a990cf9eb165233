/*
 * staging.h -- moving pageable host memory at the link's speed: a caching
 * pool of page-locked host memory (pinned.c), a small persistent pool of
 * worker threads for host copies, and the chunked staging pipeline
 * (staging.c).  Pure C over the runtime interface: statuses, no Python.
 */
#ifndef PYGPU_STAGING_H
#define PYGPU_STAGING_H

#include <stddef.h>

#include "backend/rt.h"
#include "shape.h"

/* ---- the pinned pool (pinned.c) ------------------------------------------ */

typedef struct {
    size_t limit;               /* bytes of page-locked memory the pool may hold */
    size_t in_use;              /* handed out and not yet given back */
    size_t cached;              /* given back, kept for reuse */
    size_t hits, misses;        /* takes served from the cache / by a new allocation */
} pygpu_pinned_stats;

/* Page-locked memory of at least n bytes, from the cache or new; NULL when
 * the pool's limit does not allow it (the caller uses ordinary memory). */
void *pygpu_pinned_take(size_t n);
/* Give back a block from pygpu_pinned_take. */
void pygpu_pinned_give(void *p);
void pygpu_pinned_stats_get(pygpu_pinned_stats *s);
/* Set the limit (cached blocks over it are freed); trim frees every cached block. */
void pygpu_pinned_set_limit(size_t limit);
void pygpu_pinned_trim(void);

/* ---- transfer settings ------------------------------------------------- */

typedef struct {
    size_t chunk;               /* bytes per staging buffer */
    int depth;                  /* staging buffers in flight */
    int threads;                /* host threads copying each chunk (1 = the caller alone) */
    size_t min_bytes;           /* smaller pageable copies go the runtime's own way */
    int peer;                   /* copies between devices go peer to peer where the
                                 * hardware allows (else staged through the host) */
} pygpu_transfer_config;

void pygpu_transfer_config_get(pygpu_transfer_config *c);
void pygpu_transfer_config_set(const pygpu_transfer_config *c);
/* Copies down into pageable memory of at most this many bytes bounce
 * through a page-locked block (PYGPU_STAGING_BOUNCE bytes; 0: never). */
size_t pygpu_bounce_max(void);
/* With PYGPU_STAGING_TRACE=1: print the trace of the last staged transfer,
 * marking now ('s') as the end of the whole copy. */
void pygpu_staging_trace_done(void);
void pygpu_staging_trace_enter(void);

/* ---- host copies on the worker threads --------------------------------- */

/* Copy elements [start, start + count) (in C order over `shape`) between two
 * host layouts, split across the worker threads. */
void pygpu_parallel_strided_copy(char *dst, const ptrdiff_t *dst_strides, const char *src,
                                 const ptrdiff_t *src_strides, int nd, const ptrdiff_t *shape,
                                 ptrdiff_t itemsize, ptrdiff_t start, ptrdiff_t count);

/* ---- the pipeline ------------------------------------------------------- */

/* Polled between chunks; non-zero stops the transfer (KeyboardInterrupt). */
typedef int (*pygpu_interrupt_fn)(void *arg);

/* Told, in order, how many bytes of an upload's dense device side have
 * their DMA queued on the stream; non-zero (a status) stops the transfer. */
typedef pygpu_status (*pygpu_queued_fn)(void *arg, size_t bytes);

typedef struct {
    pygpu_stream_t stream;
    pygpu_interrupt_fn interrupted;
    void *interrupt_arg;
    const char *call;           /* set to the runtime call that failed */
    int stopped;                /* set when `interrupted` stopped it */
    pygpu_queued_fn queued;     /* if set: pygpu_staged_h2d calls it as its DMA is queued */
    void *queued_arg;
} pygpu_staging_ctx;

/* The host layout of a staged copy: `ptr` + strides over the pair's shape
 * (the device side is dense in that order). */
typedef struct {
    char *ptr;
    const ptrdiff_t *strides;
    int nd;
    const ptrdiff_t *shape;
    ptrdiff_t itemsize;
} pygpu_host_layout;

/* Whether a host<->device copy of `nbytes` from/to `host` should be staged
 * (pageable and large enough); 0 for page-locked memory. */
int pygpu_should_stage(const void *host, size_t nbytes);

/* Host (any layout) -> dense device memory, through the pinned pipeline.
 * Returns when the host memory may be reused and the copies are queued.
 * *staged is 0 if the staging buffers were busy or could not be had (the
 * caller goes another way; nothing was done). */
pygpu_status pygpu_staged_h2d(pygpu_staging_ctx *c, char *dev, pygpu_host_layout host, int *staged);
/* Dense device memory -> host (any layout); returns when the host has it. */
pygpu_status pygpu_staged_d2h(pygpu_staging_ctx *c, pygpu_host_layout host, const char *dev, int *staged);
/* A device view with non-negative strides `dev_strides` (over the host
 * layout's shape) -> host: windows of the bytes it covers come down and the
 * workers gather the elements; done when this returns. */
pygpu_status pygpu_staged_d2h_view(pygpu_staging_ctx *c, pygpu_host_layout host, const char *dev,
                                   const ptrdiff_t *dev_strides, int *staged);
/* Host -> device rows: the elements (in C order) go to rows of `width`
 * bytes, `pitch` bytes apart, by 2-D copies from the staging buffers. */
pygpu_status pygpu_staged_h2d_rows(pygpu_staging_ctx *c, char *dev, ptrdiff_t pitch, ptrdiff_t width,
                                   pygpu_host_layout host, int *staged);
/* Wait for and give back the staging buffers (before a fork, at exit, or
 * when the configuration changes). */
void pygpu_staging_release(void);

#endif /* PYGPU_STAGING_H */
