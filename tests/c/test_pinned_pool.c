/*
 * test_pinned_pool.c -- the pool of page-locked blocks
 * (src/transfer/pinned_pool.c) over the host runtime: thousands of blocks
 * of random sizes taken and given back in random order, against a model
 * of what the pool promises: a take gets a block at least as big as asked
 * and at most twice the rounded size, never one in use; in_use and cached
 * add up; a given-back block is reused for a take of its size; the limit
 * holds (a take past it gets NULL); trim leaves nothing cached; a block
 * made before a device reset is freed when given back, not cached.
 */
#include "check.h"
#include "transfer/pinned_pool.h"
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

int main(void)
{
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
        live[i] = pygpu_pinned_take(asked[i]);
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
    void *a = pygpu_pinned_take(100000);
    pygpu_pinned_give(a);
    CHECK(pygpu_pinned_take(100000) == a);
    pygpu_pinned_give(a);
    /* Nothing over the limit. */
    pygpu_pinned_trim();
    pygpu_pinned_stats_get(&st);
    CHECK(st.cached == 0);
    pygpu_pinned_set_limit(st.in_use + (1 << 20));
    void *big = pygpu_pinned_take(4 << 20);
    CHECK(big == NULL);
    void *fits = pygpu_pinned_take(512 << 10);
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
    void *before = pygpu_pinned_take(300000);
    CHECK(before != NULL);
    resets++;
    void *after = pygpu_pinned_take(300000);
    CHECK(after != NULL && after != before);
    pygpu_pinned_give(before);
    pygpu_pinned_stats_get(&st);
    CHECK(st.cached == 0 && st.in_use > 0);
    pygpu_pinned_give(after);
    pygpu_pinned_stats_get(&st);
    CHECK(st.cached > 0 && st.in_use == 0);
    pygpu_pinned_trim();
    return check_done("test_pinned_pool");
}
