/*
 * pinned_pool.c -- the caching pool of page-locked host memory; see
 * pinned_pool.h.
 *
 * Page-locking is slow (about 0.46 s per GiB for cudaHostAlloc), so blocks
 * given back are cached for the next take of a similar size, up to a limit
 * (PYGPU_PINNED_LIMIT bytes, suffixes K/M/G; default a quarter of the
 * machine's memory); past the limit, callers use ordinary memory.
 */
#include "pinned_pool.h"
#include "settings.h"
#include "../backend/rt.h"
#include "../fork.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    void *ptr;
    size_t size;
    int in_use;
} pool_block;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pool_block *blocks;
static size_t nblocks, cap_blocks;
static pygpu_pinned_stats stats;
static int limit_read;

static size_t default_limit(void)
{
    const char *e = getenv("PYGPU_PINNED_LIMIT");
    if (e && *e) {
        char *end;
        unsigned long long v = strtoull(e, &end, 10);
        switch (*end) {
        case 'G': case 'g': v <<= 10; /* fall through */
        case 'M': case 'm': v <<= 10; /* fall through */
        case 'K': case 'k': v <<= 10; break;
        default: break;
        }
        return (size_t)v;
    }
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size / 4 : (size_t)1 << 30;
}

static void ensure_limit(void)
{
    if (!limit_read) {
        stats.limit = default_limit();
        limit_read = 1;
    }
}

/* Free cached blocks (pool_mu held) until `need` more bytes fit the limit,
 * or all when need == SIZE_MAX. */
static void evict(size_t need)
{
    for (size_t i = 0; i < nblocks;) {
        if (need != SIZE_MAX && stats.in_use + stats.cached + need <= stats.limit)
            return;
        if (blocks[i].in_use) {
            i++;
            continue;
        }
        if (!pygpu_fork_broken()) {     /* (a broken child leaves the parent's memory alone) */
            pygpu_rt_host_free(blocks[i].ptr);
            (void)pygpu_rt_get_last_error();
        }
        stats.cached -= blocks[i].size;
        blocks[i] = blocks[--nblocks];
    }
}

/* Sizes are rounded so that similar requests share blocks. */
static size_t round_size(size_t n)
{
    size_t g = n >= ((size_t)1 << 20) ? (size_t)1 << 20 : (size_t)4 << 10;
    return (n + g - 1) / g * g;
}

void *pygpu_pinned_take(size_t n)
{
    void *p = NULL;
    size_t want = round_size(n ? n : 1), best = SIZE_MAX;
    pthread_mutex_lock(&pool_mu);
    ensure_limit();
    /* The smallest cached block that fits, wasting at most half of it. */
    for (size_t i = 0; i < nblocks; i++)
        if (!blocks[i].in_use && blocks[i].size >= want && blocks[i].size / 2 <= want &&
            (best == SIZE_MAX || blocks[i].size < blocks[best].size))
            best = i;
    if (best != SIZE_MAX) {
        blocks[best].in_use = 1;
        stats.cached -= blocks[best].size;
        stats.in_use += blocks[best].size;
        stats.hits++;
        p = blocks[best].ptr;
        goto done;
    }
    evict(want);
    if (stats.in_use + stats.cached + want > stats.limit || want > stats.limit)
        goto done;
    if (nblocks == cap_blocks) {
        size_t cap = cap_blocks ? 2 * cap_blocks : 16;
        pool_block *nb = realloc(blocks, cap * sizeof *nb);
        if (!nb)
            goto done;
        blocks = nb;
        cap_blocks = cap;
    }
    /* Reserve the bytes, then page-lock without holding the lock: it is slow. */
    stats.in_use += want;
    pthread_mutex_unlock(&pool_mu);
    pygpu_status s = pygpu_rt_host_alloc(&p, want);
    pthread_mutex_lock(&pool_mu);
    if (s != 0) {
        (void)pygpu_rt_get_last_error();
        stats.in_use -= want;
        p = NULL;
        goto done;
    }
    if (nblocks == cap_blocks) {    /* another thread filled the table meanwhile */
        size_t cap = 2 * cap_blocks;
        pool_block *nb = realloc(blocks, cap * sizeof *nb);
        if (!nb) {
            pygpu_rt_host_free(p);
            stats.in_use -= want;
            p = NULL;
            goto done;
        }
        blocks = nb;
        cap_blocks = cap;
    }
    blocks[nblocks++] = (pool_block){p, want, 1};
    stats.misses++;
done:
    pthread_mutex_unlock(&pool_mu);
    return p;
}

void pygpu_pinned_give(void *p)
{
    pthread_mutex_lock(&pool_mu);
    for (size_t i = 0; i < nblocks; i++) {
        if (blocks[i].ptr == p && blocks[i].in_use) {
            blocks[i].in_use = 0;
            stats.in_use -= blocks[i].size;
            stats.cached += blocks[i].size;
            break;
        }
    }
    if (stats.in_use + stats.cached > stats.limit)
        evict(0);
    pthread_mutex_unlock(&pool_mu);
}

static void pool_fork(enum pygpu_fork_phase phase)
{
    if (phase == PYGPU_FORK_PREPARE)
        pthread_mutex_lock(&pool_mu);
    else
        pthread_mutex_unlock(&pool_mu);
}

void pygpu_pinned_stats_get(pygpu_pinned_stats *s)
{
    pthread_mutex_lock(&pool_mu);
    ensure_limit();
    *s = stats;
    pthread_mutex_unlock(&pool_mu);
}

void pygpu_pinned_set_limit(size_t limit)
{
    pthread_mutex_lock(&pool_mu);
    limit_read = 1;
    stats.limit = limit;
    evict(0);
    pthread_mutex_unlock(&pool_mu);
}

void pygpu_pinned_trim(void)
{
    pthread_mutex_lock(&pool_mu);
    evict(SIZE_MAX);
    pthread_mutex_unlock(&pool_mu);
}

void pygpu_pinned_pool_init(void)
{
    pygpu_fork_register(pool_fork);
}

/* get()'s arrays of this size or more, and big enough to stage, come from
 * the pool.  Smaller ones would be faster from it too (64 KiB on an H200:
 * 9.8 us into a pooled array, 11.7-16.9 staged into a new one, 17.7 the
 * runtime's way), but the pool keeps a plain list of its blocks, searched
 * at every take: a program holding many thousands of small results would
 * pay for that. */
#define POOLED_GET_MIN ((size_t)1 << 20)

int pygpu_pinned_for_get(size_t nbytes)
{
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    return nbytes >= cfg.min_bytes && nbytes >= POOLED_GET_MIN;
}
