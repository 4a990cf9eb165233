/*
 * test_lanes.c -- the staging lanes (src/transfer/lanes.c) over the host
 * runtime: a transfer alone on its device is not crowded, two on one
 * device both are, one on another device is not, and giving one back ends
 * the crowd; a device's ninth transfer waits for a lane and gives up when
 * asked to; from many threads at once the count comes back to nobody at
 * work; every buffer goes back to the pinned pool.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "transfer/lanes.h"
#include "transfer/pinned_pool.h"
#include "transfer/pipeline.h"
#include "fork.h"

#include <pthread.h>
#include <stdatomic.h>

void pygpu_fork_register(pygpu_fork_fn fn) { (void)fn; }
int pygpu_fork_broken(void) { return 0; }

static pygpu_transfer_config cfg;
static int asked_to_stop;

static int give_up(void *arg)
{
    (void)arg;
    asked_to_stop++;
    return 1;
}

#define THREADS 12
#define ROUNDS 200
static atomic_int wrong;

/* Take and give lanes on devices 0 and 1 over and over: each take gets a
 * lane with its buffers (twelve threads, six a device: no wait). */
static void *hammer(void *arg)
{
    int dev = (int)(long)arg % 2;
    for (int i = 0; i < ROUNDS; i++) {
        pygpu_lane *l = pygpu_lane_take(&cfg, dev, NULL, NULL);
        if (!l || l->buf[0] == NULL)
            atomic_fetch_add(&wrong, 1);
        if (l)
            pygpu_lane_give(l);
    }
    return NULL;
}

int main(void)
{
    pygpu_lane *a, *b, *c, *many[8];
    pygpu_pinned_stats st;
    pygpu_pinned_set_limit((size_t)1 << 30);
    pygpu_transfer_config_get(&cfg);
    cfg.depth = 2;
    cfg.chunk = (size_t)rng_range(16, 64) << 10;     /* (any size: the lanes do not care) */

    CHECK((a = pygpu_lane_take(&cfg, 0, NULL, NULL)) != NULL);
    CHECK(!pygpu_lane_crowded(a));
    CHECK((b = pygpu_lane_take(&cfg, 0, NULL, NULL)) != NULL && b != a);
    CHECK(pygpu_lane_crowded(a) && pygpu_lane_crowded(b));
    CHECK((c = pygpu_lane_take(&cfg, 1, NULL, NULL)) != NULL);
    CHECK(!pygpu_lane_crowded(c));
    pygpu_lane_give(b);
    CHECK(!pygpu_lane_crowded(a));
    pygpu_lane_give(a);
    pygpu_lane_give(c);

    /* Eight at work on device 0: a ninth waits, and gives up when told. */
    for (int i = 0; i < 8; i++)
        CHECK((many[i] = pygpu_lane_take(&cfg, 0, NULL, NULL)) != NULL);
    CHECK(pygpu_lane_crowded(many[0]));
    CHECK(pygpu_lane_take(&cfg, 0, give_up, NULL) == NULL);
    CHECK(asked_to_stop == 1);
    CHECK((c = pygpu_lane_take(&cfg, 1, give_up, NULL)) != NULL);     /* (another device: room) */
    pygpu_lane_give(c);
    for (int i = 0; i < 8; i++)
        pygpu_lane_give(many[i]);

    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, hammer, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&wrong) == 0);
    CHECK((a = pygpu_lane_take(&cfg, 0, NULL, NULL)) != NULL);
    CHECK(!pygpu_lane_crowded(a));          /* (the count came back to nobody else) */
    pygpu_lane_give(a);

    pygpu_staging_release();
    pygpu_pinned_trim();
    pygpu_pinned_stats_get(&st);
    CHECK(st.in_use == 0);
    return check_done("test_lanes");
}
