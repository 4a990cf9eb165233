/*
 * pinned_pool.h -- a caching pool of page-locked host memory (pinned_pool.c),
 * process-wide and locked: the staging buffers and the arrays get() returns
 * come from it.  Pure C.
 */
#ifndef PYGPU_TRANSFER_PINNED_POOL_H
#define PYGPU_TRANSFER_PINNED_POOL_H

#include <stddef.h>

typedef struct {
    size_t limit;               /* bytes of page-locked memory the pool may hold */
    size_t in_use;              /* handed out and not yet given back */
    size_t cached;              /* given back, kept for reuse */
    size_t hits, misses;        /* takes served from the cache / by a new allocation */
    size_t placed;              /* blocks made on their device's NUMA node */
    size_t unplaced;            /* blocks made elsewhere, the kernel having refused the node */
} pygpu_pinned_stats;

/* Page-locked memory of at least n bytes for transfers with device `dev`
 * (-1: none in particular), from the cache or new; NULL when the pool's
 * limit does not allow it (the caller uses ordinary memory).  Where the
 * host tells the device's NUMA node and the numa setting is on
 * (settings.h), the block's pages lie on that node: a cached block of
 * another node is not taken for it. */
void *pygpu_pinned_take(size_t n, int dev);
/* A cached block of at least n bytes for device `dev`, as above, or NULL
 * (nothing is page-locked anew: that takes milliseconds a hundred MiB). */
void *pygpu_pinned_take_cached(size_t n, int dev);
/* Give back a block from pygpu_pinned_take. */
void pygpu_pinned_give(void *p);
void pygpu_pinned_stats_get(pygpu_pinned_stats *s);
/* Set the limit (cached blocks over it are freed); trim frees every cached block. */
void pygpu_pinned_set_limit(size_t limit);
void pygpu_pinned_trim(void);

/* Whether get() of `nbytes` takes its new host array from the pool: from
 * POOLED_GET_MIN (pinned_pool.c), and only where the copy is big enough to
 * be staged (settings.c's min_bytes). */
int pygpu_pinned_for_get(size_t nbytes);

/* Registers the pool's fork handler (its lock held over fork). */
void pygpu_pinned_pool_init(void);

#endif /* PYGPU_TRANSFER_PINNED_POOL_H */
