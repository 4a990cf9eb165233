/*
 * pinned_pool.c -- the caching pool of page-locked host memory; see
 * pinned_pool.h.
 *
 * Page-locking is slow (docs/performance.md#pinned-pool), so blocks
 * given back are cached for the next take of a similar size, up to a limit
 * (PYGPU_PINNED_LIMIT bytes, suffixes K/M/G; default a quarter of the
 * machine's memory); past the limit, callers use ordinary memory.
 */
#include "pinned_pool.h"
#include "settings.h"
#include "../backend/rt.h"
#include "../env.h"
#include "../fork.h"
#include "../pages.h"
#include "../tuning.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* The blocks, in slots of a table that only grows (an evicted block's slot
 * is reused); the cached ones are also on the list of their size class
 * (2^k to 2^(k+1) bytes), so that a take looks at two short lists, and a
 * give finds its block through a hash of the pointers, never walking every
 * block (a program may hold thousands of get() results from the pool). */
#define CLASSES 64

typedef struct {
    void *ptr;                  /* NULL: an empty slot (`next` links the empty ones) */
    size_t size;
    int in_use;
    int prev, next;             /* on its class's list of cached blocks; -1 ends */
    unsigned resets;            /* pygpu_reset_total() when it was made (fork.h) */
    int node;                   /* the NUMA node its pages lie on, -1: none asked */
} pool_block;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pool_block *blocks;
static int nslots, cap_slots, empty = -1;
static int cached_head[CLASSES];        /* (0 before the first take: see pool_ready) */
static int *where;                      /* pointer hash -> slot + 1 (0: none), open addressing */
static size_t where_cap, where_used;
static pygpu_pinned_stats stats;
static int limit_read;

static int class_of(size_t n) { return 63 - __builtin_clzll((unsigned long long)n); }

static void list_push(int i)
{
    int k = class_of(blocks[i].size);
    blocks[i].prev = -1;
    blocks[i].next = cached_head[k];
    if (cached_head[k] >= 0)
        blocks[cached_head[k]].prev = i;
    cached_head[k] = i;
}

static void list_remove(int i)
{
    int k = class_of(blocks[i].size);
    if (blocks[i].prev >= 0)
        blocks[blocks[i].prev].next = blocks[i].next;
    else
        cached_head[k] = blocks[i].next;
    if (blocks[i].next >= 0)
        blocks[blocks[i].next].prev = blocks[i].prev;
}

static size_t hash_of(const void *p)
{
    unsigned long long x = (unsigned long long)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 29;
    return (size_t)x;
}

/* The slot of block `p`, or -1. */
static int slot_of(const void *p)
{
    if (!where_cap)
        return -1;
    for (size_t h = hash_of(p) & (where_cap - 1);; h = (h + 1) & (where_cap - 1)) {
        if (!where[h])
            return -1;
        if (blocks[where[h] - 1].ptr == p)
            return where[h] - 1;
    }
}

static void where_put(int slot)
{
    size_t h = hash_of(blocks[slot].ptr) & (where_cap - 1);
    while (where[h])
        h = (h + 1) & (where_cap - 1);
    where[h] = slot + 1;
    where_used++;
}

/* Room in the hash for one more pointer; 0 if it cannot be had. */
static int where_room(void)
{
    if (2 * (where_used + 1) <= where_cap)
        return 1;
    size_t cap = where_cap ? 2 * where_cap : 64;
    int *old = where;
    size_t old_cap = where_cap;
    if (!(where = calloc(cap, sizeof *where))) {
        where = old;
        return 0;
    }
    where_cap = cap;
    where_used = 0;
    for (size_t h = 0; h < old_cap; h++)
        if (old[h])
            where_put(old[h] - 1);
    free(old);
    return 1;
}

/* Take `p` out of the hash, shifting back the entries after it. */
static void where_remove(const void *p)
{
    size_t mask = where_cap - 1, h = hash_of(p) & mask;
    while (blocks[where[h] - 1].ptr != p)
        h = (h + 1) & mask;
    where[h] = 0;
    where_used--;
    for (size_t j = (h + 1) & mask; where[j]; j = (j + 1) & mask) {
        size_t home = hash_of(blocks[where[j] - 1].ptr) & mask;
        /* Move j back to h if h lies between its home and j (cyclically). */
        if (((j - home) & mask) >= ((j - h) & mask)) {
            where[h] = where[j];
            where[j] = 0;
            h = j;
        }
    }
}

/* A slot for a new block of `size` at `p`, in use; -1 if none can be had. */
static int slot_new(void *p, size_t size, unsigned resets, int node)
{
    int i;
    if (!where_room())
        return -1;
    if (empty >= 0) {
        i = empty;
        empty = blocks[i].next;
    } else {
        if (nslots == cap_slots) {
            int cap = cap_slots ? 2 * cap_slots : 16;
            pool_block *nb = realloc(blocks, (size_t)cap * sizeof *nb);
            if (!nb)
                return -1;
            blocks = nb;
            cap_slots = cap;
        }
        i = nslots++;
    }
    blocks[i] = (pool_block){p, size, 1, -1, -1, resets, node};
    where_put(i);
    return i;
}

/* Slot i emptied (its block out of the lists and the hash already). */
static void slot_free(int i)
{
    blocks[i].ptr = NULL;
    blocks[i].next = empty;
    empty = i;
}

static size_t default_limit(void)
{
    const pygpu_env *env = pygpu_env_get();
    if (env->pinned_limit_set)
        return env->pinned_limit;
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size / PYGPU_PINNED_LIMIT_SHARE : PYGPU_PINNED_LIMIT_GUESS;
}

/* The class lists start empty, and the limit is read from the environment
 * (pool_mu held; once). */
static void pool_ready(void)
{
    static int lists_ready;
    if (!lists_ready) {
        for (int k = 0; k < CLASSES; k++)
            cached_head[k] = -1;
        lists_ready = 1;
    }
    if (!limit_read) {
        stats.limit = default_limit();
        limit_read = 1;
    }
}

/* A block of the pool freed (not in a broken child, which leaves the
 * parent's memory alone: there its blocks are only forgotten). */
static void unpin(void *p, size_t size)
{
    if (pygpu_fork_broken())
        return;
    pygpu_rt_host_unpin(p, size);
    (void)pygpu_rt_get_last_error();
}

/* Blocks unlinked from the pool, to be freed after: a list ended by a NULL
 * pointer. */
typedef struct {
    void *ptr;
    size_t size;
} unlinked;

/* Block i added to the list of n (cap: its room); 0 where it cannot grow. */
static int listed(unlinked **list, size_t *n, size_t *cap, int i)
{
    if (*n + 1 >= *cap) {
        size_t more = *cap ? 2 * *cap : 8;
        unlinked *l = realloc(*list, more * sizeof *l);
        if (!l)
            return 0;
        *list = l;
        *cap = more;
    }
    (*list)[(*n)++] = (unlinked){blocks[i].ptr, blocks[i].size};
    (*list)[*n].ptr = NULL;
    return 1;
}

/* Unlink cached blocks (pool_mu held), the biggest first, until `need`
 * more bytes fit the limit, or all when need == SIZE_MAX; returns them in
 * a list for release() to free once pool_mu is let go: freeing page-locked
 * memory may wait for the device, and takes of cached blocks (a background
 * upload's, on the caller's thread) must not wait for it meanwhile.
 * (Where the list cannot be had, a block is freed at once.) */
static unlinked *evict(size_t need)
{
    unlinked *list = NULL;
    size_t n = 0, cap = 0;
    pool_ready();
    for (int k = CLASSES - 1; k >= 0; k--) {
        while (cached_head[k] >= 0) {
            if (need != SIZE_MAX && stats.in_use + stats.cached + need <= stats.limit)
                return list;
            int i = cached_head[k];
            list_remove(i);
            where_remove(blocks[i].ptr);
            if (!listed(&list, &n, &cap, i))
                unpin(blocks[i].ptr, blocks[i].size);
            stats.cached -= blocks[i].size;
            slot_free(i);
        }
    }
    return list;
}

/* Free evict()'s blocks (pool_mu not held), and its list. */
static void release(unlinked *list)
{
    for (size_t i = 0; list && list[i].ptr; i++)
        unpin(list[i].ptr, list[i].size);
    free(list);
}

/* The smallest cached block of at least `want` bytes and at most twice
 * that, on NUMA node `node` (-1: any) (pool_mu held): in want's class, or
 * the next; -1 if none. */
static int best_fit(size_t want, int node)
{
    int best = -1, k = class_of(want);
    for (int c = k; c <= k + 1 && c < CLASSES && best < 0; c++)
        for (int i = cached_head[c]; i >= 0; i = blocks[i].next)
            if (blocks[i].size >= want && blocks[i].size / 2 <= want && (node < 0 || blocks[i].node == node) &&
                (best < 0 || blocks[i].size < blocks[best].size))
                best = i;
    return best;
}

/* Sizes are rounded so that similar requests share blocks. */
static size_t round_size(size_t n)
{
    size_t g = n >= PYGPU_PINNED_GRAIN_BIG ? PYGPU_PINNED_GRAIN_BIG : PYGPU_PINNED_GRAIN;
    return (n + g - 1) / g * g;
}

/* A cached block for `want` bytes on `node` (-1: any), or NULL (pool_mu
 * held). */
static void *take_cached(size_t want, int node)
{
    int best = best_fit(want, node);
    if (best < 0)
        return NULL;
    list_remove(best);
    blocks[best].in_use = 1;
    stats.cached -= blocks[best].size;
    stats.in_use += blocks[best].size;
    stats.hits++;
    return blocks[best].ptr;
}

/* ---- where the blocks lie ------------------------------------------------- */

/* Each device's NUMA node, once asked (node + 2; 1: none, 0: not asked
 * yet), for the first PLACED_DEVICES devices (those past them: none). */
#define PLACED_DEVICES 64
static atomic_int node_of[PLACED_DEVICES];
static atomic_int placing_refused;      /* the kernel refused a placement outright: no more asked */

/* The node a block for device `dev` goes on, or -1 (none known, or
 * placement off). */
static int node_for(int dev)
{
    pygpu_transfer_config cfg;
    if (dev < 0 || dev >= PLACED_DEVICES || atomic_load(&placing_refused))
        return -1;
    pygpu_transfer_config_get(&cfg);
    if (!cfg.numa)
        return -1;
    int known = atomic_load(&node_of[dev]);
    if (!known) {
        int node = -1;
        if (pygpu_rt_device_numa_node(dev, &node) != 0) {
            (void)pygpu_rt_get_last_error();
            node = -1;
        }
        known = node < 0 ? 1 : node + 2;
        atomic_store(&node_of[dev], known);
    }
    return known - 2;
}

/* What a block's placement for `dev` on `node` teaches (pygpu_pages_map's
 * `placement`): a node the kernel does not have is none for that device
 * from here on, and any other refusal (not allowed here, no NUMA calls)
 * stops placement altogether; the block's own node, or -1 (pool_mu held). */
static int placed(int dev, int node, int placement)
{
    if (placement == PYGPU_PAGES_PLACED) {
        stats.placed++;
        return node;
    }
    if (placement == PYGPU_PAGES_UNPLACED)
        return -1;
    stats.unplaced++;
    if (placement == EINVAL && dev >= 0 && dev < PLACED_DEVICES)
        atomic_store(&node_of[dev], 1);
    else
        atomic_store(&placing_refused, 1);
    return -1;
}

/* ---- taking and giving --------------------------------------------------- */

void *pygpu_pinned_take_cached(size_t n, int dev)
{
    int node = node_for(dev);
    pthread_mutex_lock(&pool_mu);
    pool_ready();
    void *p = take_cached(round_size(n ? n : 1), node);
    pthread_mutex_unlock(&pool_mu);
    return p;
}

void *pygpu_pinned_take(size_t n, int dev)
{
    void *p = NULL;
    size_t want = round_size(n ? n : 1);
    int node = node_for(dev), placement = PYGPU_PAGES_UNPLACED;
    pthread_mutex_lock(&pool_mu);
    pool_ready();
    if ((p = take_cached(want, node)) != NULL)
        goto done;
    unlinked *evicted = evict(want);
    if (stats.in_use + stats.cached + want > stats.limit || want > stats.limit) {
        pthread_mutex_unlock(&pool_mu);
        release(evicted);
        return NULL;
    }
    /* Reserve the bytes, then page-lock without holding the lock: it is slow. */
    stats.in_use += want;
    pthread_mutex_unlock(&pool_mu);
    release(evicted);
    unsigned resets = pygpu_reset_total();
    pygpu_status s = pygpu_rt_host_pin(&p, want, node, &placement);
    pthread_mutex_lock(&pool_mu);
    if (s != 0 || slot_new(p, want, resets, placed(dev, node, placement)) < 0) {
        if (s != 0)
            (void)pygpu_rt_get_last_error();
        else
            unpin(p, want);
        stats.in_use -= want;
        p = NULL;
        goto done;
    }
    stats.misses++;
done:
    pthread_mutex_unlock(&pool_mu);
    return p;
}

/* (A block made before a device reset is registered no more: freed, not
 * cached.) */
void pygpu_pinned_give(void *p)
{
    unlinked stale = {NULL, 0};
    pthread_mutex_lock(&pool_mu);
    int i = slot_of(p);
    if (i >= 0 && blocks[i].in_use) {
        blocks[i].in_use = 0;
        stats.in_use -= blocks[i].size;
        if (blocks[i].resets != pygpu_reset_total()) {
            stale = (unlinked){p, blocks[i].size};
            where_remove(p);
            slot_free(i);
        } else {
            stats.cached += blocks[i].size;
            list_push(i);
        }
    }
    unlinked *evicted = stats.in_use + stats.cached > stats.limit ? evict(0) : NULL;
    pthread_mutex_unlock(&pool_mu);
    release(evicted);
    if (stale.ptr)
        unpin(stale.ptr, stale.size);
}

static void pool_fork(enum pygpu_fork_phase phase)
{
    pygpu_fork_hold(phase, &pool_mu);
}

void pygpu_pinned_stats_get(pygpu_pinned_stats *s)
{
    pthread_mutex_lock(&pool_mu);
    pool_ready();
    *s = stats;
    pthread_mutex_unlock(&pool_mu);
}

void pygpu_pinned_set_limit(size_t limit)
{
    pthread_mutex_lock(&pool_mu);
    limit_read = 1;
    stats.limit = limit;
    unlinked *evicted = evict(0);
    pthread_mutex_unlock(&pool_mu);
    release(evicted);
}

void pygpu_pinned_trim(void)
{
    pthread_mutex_lock(&pool_mu);
    unlinked *evicted = evict(SIZE_MAX);
    pthread_mutex_unlock(&pool_mu);
    release(evicted);
}

void pygpu_pinned_pool_init(void)
{
    pygpu_fork_register(pool_fork);
}

/* get()'s arrays of PYGPU_POOLED_GET_MIN or more, and big enough to stage,
 * come from the pool.  Smaller ones would be faster from it too; whether
 * they should come from it awaits a measurement of programs holding many
 * results (docs/performance.md#pooled-get). */
int pygpu_pinned_for_get(size_t nbytes)
{
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    return nbytes >= cfg.min_bytes && nbytes >= PYGPU_POOLED_GET_MIN;
}
