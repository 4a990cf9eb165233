/*
 * test_lanes.c -- the staging lanes (src/transfer/lanes.c) over the host
 * runtime: a transfer alone on its device is not crowded, two on one
 * device both are, one on another device is not, and giving one back ends
 * the crowd; a device's ninth transfer waits for a lane and gives up when
 * asked to; from many threads at once the count comes back to nobody at
 * work; a transfer that starts while another is at work gets a lane of the
 * crowded size of its direction; every buffer goes back to the pinned
 * pool.
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
void pygpu_fork_hold(enum pygpu_fork_phase phase, pthread_mutex_t *mu) { (void)phase; (void)mu; }
int pygpu_fork_broken(void) { return 0; }
unsigned pygpu_reset_total(void) { return 0; }

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
        pygpu_transfer_config mine = cfg;
        pygpu_lane *l = pygpu_lane_take(&mine, dev, i % 2, NULL, NULL);
        if (!l || l->buf[0] == NULL)
            atomic_fetch_add(&wrong, 1);
        if (l)
            pygpu_lane_give(l);
    }
    return NULL;
}

/* A transfer that starts alone gets buffers of cfg.chunk; one that starts
 * while another is at work on its device gets crowd_up (an upload) or
 * crowd_down (a download) bytes, where set and smaller; a transfer on
 * another device is alone; the idle lanes of each size are taken again. */
static void crowded_lanes(void)
{
    pygpu_transfer_config big = cfg, t;
    big.chunk = (size_t)rng_range(64, 128) << 10;
    big.crowd_up = (size_t)rng_range(4, 16) << 10;
    big.crowd_down = big.crowd_up + 4096;
    pygpu_lane *a, *b, *c, *d, *e;

    t = big;
    CHECK((a = pygpu_lane_take(&t, 0, 1, NULL, NULL)) != NULL);
    CHECK(t.chunk == big.chunk && a->chunk == big.chunk);       /* (alone) */
    t = big;
    CHECK((b = pygpu_lane_take(&t, 0, 1, NULL, NULL)) != NULL);
    CHECK(t.chunk == big.crowd_up && b->chunk == big.crowd_up);
    t = big;
    CHECK((c = pygpu_lane_take(&t, 0, 0, NULL, NULL)) != NULL);
    CHECK(t.chunk == big.crowd_down && c->chunk == big.crowd_down);
    t = big;
    CHECK((d = pygpu_lane_take(&t, 1, 0, NULL, NULL)) != NULL);
    CHECK(t.chunk == big.chunk);                                /* (alone on device 1) */
    t = big;
    t.crowd_down = 0;                                           /* (0: as chunk) */
    CHECK((e = pygpu_lane_take(&t, 1, 0, NULL, NULL)) != NULL);
    CHECK(t.chunk == big.chunk);
    pygpu_lane_give(e);
    t = big;
    t.crowd_up = big.chunk * 2;                                 /* (bigger than chunk: as chunk) */
    CHECK((e = pygpu_lane_take(&t, 1, 1, NULL, NULL)) != NULL);
    CHECK(t.chunk == big.chunk);
    pygpu_lane_give(e);
    void *small_buf = b->buf[0];
    pygpu_lane_give(b);
    t = big;
    CHECK((b = pygpu_lane_take(&t, 0, 1, NULL, NULL)) != NULL);   /* (crowded again: the same lane, kept) */
    CHECK(b->chunk == big.crowd_up && b->buf[0] == small_buf);
    pygpu_lane_give(b);
    pygpu_lane_give(c);
    pygpu_lane_give(d);
    pygpu_lane_give(a);
    t = big;
    CHECK((a = pygpu_lane_take(&t, 0, 1, NULL, NULL)) != NULL);
    CHECK(t.chunk == big.chunk && a->chunk == big.chunk);       /* (alone again) */
    pygpu_lane_give(a);
}

int main(void)
{
    pygpu_lane *a, *b, *c, *many[8];
    pygpu_pinned_stats st;
    pygpu_pinned_set_limit((size_t)1 << 30);
    pygpu_transfer_config_get(&cfg);
    cfg.depth = 2;
    cfg.chunk = (size_t)rng_range(16, 64) << 10;     /* (any size: the lanes do not care) */

    CHECK((a = pygpu_lane_take(&cfg, 0, 1, NULL, NULL)) != NULL);
    CHECK(!pygpu_lane_crowded(a));
    CHECK((b = pygpu_lane_take(&cfg, 0, 1, NULL, NULL)) != NULL && b != a);
    CHECK(pygpu_lane_crowded(a) && pygpu_lane_crowded(b));
    CHECK((c = pygpu_lane_take(&cfg, 1, 0, NULL, NULL)) != NULL);
    CHECK(!pygpu_lane_crowded(c));
    pygpu_lane_give(b);
    CHECK(!pygpu_lane_crowded(a));
    pygpu_lane_give(a);
    pygpu_lane_give(c);

    /* Eight at work on device 0: a ninth waits, and gives up when told. */
    for (int i = 0; i < 8; i++)
        CHECK((many[i] = pygpu_lane_take(&cfg, 0, 1, NULL, NULL)) != NULL);
    CHECK(pygpu_lane_crowded(many[0]));
    CHECK(pygpu_lane_take(&cfg, 0, 1, give_up, NULL) == NULL);
    CHECK(asked_to_stop == 1);
    CHECK((c = pygpu_lane_take(&cfg, 1, 0, give_up, NULL)) != NULL);     /* (another device: room) */
    pygpu_lane_give(c);
    for (int i = 0; i < 8; i++)
        pygpu_lane_give(many[i]);

    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, hammer, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&wrong) == 0);
    CHECK((a = pygpu_lane_take(&cfg, 0, 1, NULL, NULL)) != NULL);
    CHECK(!pygpu_lane_crowded(a));          /* (the count came back to nobody else) */
    pygpu_lane_give(a);

    crowded_lanes();

    pygpu_staging_release();
    pygpu_pinned_trim();
    pygpu_pinned_stats_get(&st);
    CHECK(st.in_use == 0);
    return check_done("test_lanes");
}
