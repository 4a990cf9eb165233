/*
 * test_pinned_pool.c -- the pool of page-locked blocks
 * (src/transfer/pinned_pool.c) over the host runtime: thousands of blocks
 * of random sizes taken and given back in random order, against a model
 * of what the pool promises: a take gets a block at least as big as asked
 * and at most twice the rounded size, never one in use; in_use and cached
 * add up; a given-back block is reused for a take of its size; the limit
 * holds (a take past it gets NULL); trim leaves nothing cached; a block
 * made before a device reset is freed when given back, not cached.  And
 * where the blocks lie: a device's on its NUMA node (PYGPU_HOST_NUMA), a
 * take for it never given another node's block, a node the kernel refuses
 * forgotten for that device after one try, and the numa setting turning
 * it all off.
 */
#define _GNU_SOURCE             /* setenv */
#include "check.h"
#include "numa.h"
#include "transfer/pinned_pool.h"
#include "transfer/settings.h"
#include "fork.h"

#include <stdlib.h>
#include <string.h>

void pygpu_fork_register(pygpu_fork_fn fn) { (void)fn; }
void pygpu_fork_hold(enum pygpu_fork_phase phase, pthread_mutex_t *mu) { (void)phase; (void)mu; }
int pygpu_fork_broken(void) { return 0; }
static unsigned resets;
unsigned pygpu_reset_total(void) { return resets; }

#define LIVE 2000

static void *live[LIVE];
static size_t asked[LIVE];

static pygpu_pinned_stats stats_now(void)
{
    pygpu_pinned_stats st;
    pygpu_pinned_stats_get(&st);
    return st;
}

/* Device 0 on node 0 (every Linux host has it), device 1 on node 1000,
 * which none here has, device 2 on none (past PYGPU_HOST_NUMA's list). */
static void placement(void)
{
    const size_t n = 200000;
    pygpu_pinned_trim();
    pygpu_pinned_stats st0 = stats_now();
    void *any = pygpu_pinned_take(n, -1);          /* (made on no node) */
    CHECK(any != NULL && pygpu_numa_preferred(any) == -1);
    pygpu_pinned_give(any);
    void *on0 = pygpu_pinned_take(n, 0);
    pygpu_pinned_stats st = stats_now();
    int placing = st.placed == st0.placed + 1;
    if (placing) {
        CHECK(on0 != any && pygpu_numa_preferred(on0) == 0);      /* (not the cached block of no node) */
        pygpu_pinned_give(on0);
        CHECK(pygpu_pinned_take(n, 0) == on0);                      /* (its node's, cached) */
        CHECK(pygpu_pinned_take(n, 2) == any);                      /* (device 2 is on none: any block) */
        pygpu_pinned_give(any);
        pygpu_pinned_give(on0);
    } else {
        printf("placement refused here: blocks made on no node\n");
        CHECK(st.unplaced == st0.unplaced + 1 && st.placed == st0.placed);
        pygpu_pinned_give(on0);
    }
    /* node 1000: refused once (EINVAL), then device 1 is on none */
    st0 = stats_now();
    void *d1 = pygpu_pinned_take(3 * n, 1);
    CHECK(d1 != NULL && pygpu_numa_preferred(d1) == -1);
    st = stats_now();
    CHECK(st.unplaced == st0.unplaced + (placing ? 1 : 0) && st.placed == st0.placed);
    pygpu_pinned_give(d1);
    CHECK(pygpu_pinned_take(3 * n, 1) == d1);                       /* (cached: on none, any block) */
    void *d1b = pygpu_pinned_take(3 * n, 1);
    CHECK(d1b != NULL && d1b != d1 && stats_now().unplaced == st.unplaced);    /* (not tried again) */
    pygpu_pinned_give(d1);
    pygpu_pinned_give(d1b);
    /* the setting off: device 0's blocks made on no node, any taken */
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    cfg.numa = 0;
    pygpu_transfer_config_set(&cfg);
    pygpu_pinned_trim();
    st0 = stats_now();
    void *off = pygpu_pinned_take(n, 0);
    CHECK(off != NULL && pygpu_numa_preferred(off) == -1 && stats_now().placed == st0.placed);
    cfg.numa = 1;
    pygpu_transfer_config_set(&cfg);
    pygpu_pinned_give(off);
    void *back = pygpu_pinned_take(n, 0);           /* (on again: the block of no node is not device 0's) */
    CHECK(placing ? back != off && pygpu_numa_preferred(back) == 0 : back == off);
    pygpu_pinned_give(back);
    pygpu_pinned_trim();
}

int main(void)
{
    setenv("PYGPU_HOST_DEVICES", "3", 1);
    setenv("PYGPU_HOST_NUMA", "0,1000", 1);
    pygpu_pinned_stats st;
    size_t held = 0;
    pygpu_pinned_set_limit((size_t)1 << 30);
    for (int round = 0; round < 20000; round++) {
        int i = (int)rng_range(0, LIVE - 1);
        if (live[i]) {
            memset(live[i], 0xA5, asked[i]);        /* (all of it is ours: ASan and valgrind would see) */
            pygpu_pinned_give(live[i]);
            live[i] = NULL;
            held -= asked[i];
            continue;
        }
        asked[i] = (size_t)(rng_next() % 4 ? rng_range(1, 64 << 10) : rng_range(1, 1 << 20));   /* (~300 MiB live) */
        live[i] = pygpu_pinned_take(asked[i], -1);
        CHECK(live[i] != NULL);
        if (!live[i])
            continue;
        held += asked[i];
        for (int j = 0; j < LIVE; j += 97)      /* never a block someone holds */
            CHECK(j == i || live[j] != live[i]);
        memset(live[i], 0x5A, asked[i]);
    }
    pygpu_pinned_stats_get(&st);
    CHECK(st.in_use >= held);
    CHECK(st.hits > 1000);                      /* given-back blocks were reused */
    /* A block given back comes back for the same size. */
    void *a = pygpu_pinned_take(100000, -1);
    pygpu_pinned_give(a);
    CHECK(pygpu_pinned_take(100000, -1) == a);
    pygpu_pinned_give(a);
    /* Nothing over the limit. */
    pygpu_pinned_trim();
    pygpu_pinned_stats_get(&st);
    CHECK(st.cached == 0);
    pygpu_pinned_set_limit(st.in_use + (1 << 20));
    void *big = pygpu_pinned_take(4 << 20, -1);
    CHECK(big == NULL);
    void *fits = pygpu_pinned_take(512 << 10, -1);
    CHECK(fits != NULL);
    pygpu_pinned_give(fits);
    for (int i = 0; i < LIVE; i++)
        if (live[i])
            pygpu_pinned_give(live[i]);
    pygpu_pinned_trim();
    pygpu_pinned_stats_get(&st);
    CHECK(st.in_use == 0 && st.cached == 0);
    /* A block made before a reset goes when given back; one made after stays. */
    pygpu_pinned_set_limit((size_t)1 << 30);
    void *before = pygpu_pinned_take(300000, -1);
    CHECK(before != NULL);
    resets++;
    void *after = pygpu_pinned_take(300000, -1);
    CHECK(after != NULL && after != before);
    pygpu_pinned_give(before);
    pygpu_pinned_stats_get(&st);
    CHECK(st.cached == 0 && st.in_use > 0);
    pygpu_pinned_give(after);
    pygpu_pinned_stats_get(&st);
    CHECK(st.cached > 0 && st.in_use == 0);
    pygpu_pinned_trim();
    placement();
    return check_done("test_pinned_pool");
}
