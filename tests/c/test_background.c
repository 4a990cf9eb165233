/*
 * test_background.c -- uploads and downloads that complete in the
 * background (src/transfer/background*.c) over the host runtime, from
 * twelve threads at once (six uploading, six downloading): the first
 * transfer of a size is declined while the mover page-locks a block of
 * that size, the next is taken; every taken transfer delivers its bytes
 * (dense and strided host sides; a download leaves the host elements
 * outside its view alone); every owner is released exactly once by the
 * reaper; nothing stays pending; the tasks' events go back to those the
 * device keeps; once trimmed, no page-locked memory is in use.  Also run
 * under ThreadSanitizer.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "transfer/background.h"
#include "transfer/background_down.h"
#include "transfer/background_up.h"
#include "transfer/events.h"
#include "transfer/pinned_pool.h"
#include "fork.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void pygpu_fork_register(pygpu_fork_fn fn) { (void)fn; }
void pygpu_fork_hold(enum pygpu_fork_phase phase, pthread_mutex_t *mu) { (void)phase; (void)mu; }
void pygpu_fork_hold_calling(enum pygpu_fork_phase phase, pthread_mutex_t *mu) { (void)phase; (void)mu; }
int pygpu_fork_broken(void) { return 0; }
unsigned pygpu_reset_total(void) { return 0; }

#define THREADS 12
#define ROUNDS 12

static atomic_int taken_n, released, wrong;
static int owners[THREADS * ROUNDS * 2];

static void release(void *owner)
{
    int *o = owner;
    if ((*o)++ != 0)                        /* (the reaper runs in one thread at a time here: see reaper) */
        atomic_fetch_add(&wrong, 1);
    atomic_fetch_add(&released, 1);
}

static pthread_mutex_t reap_mu = PTHREAD_MUTEX_INITIALIZER;  /* (the GIL, in PyGPU) */

static void reap(void)
{
    pthread_mutex_lock(&reap_mu);
    pygpu_bg_reap(release);
    pthread_mutex_unlock(&reap_mu);
}

static uint64_t seeds[THREADS];

/* How long to wait for the mover at the most: a hang guard, far beyond
 * what it needs even on a loaded machine or under valgrind (a count of
 * 1 ms sleeps was a deadline of a few seconds in disguise). */
#define GIVE_UP_S 120.0

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *mover(void *arg)
{
    int me = (int)(long)arg, down = me & 1;
    uint64_t seed = seeds[me];
    for (int r = 0; r < ROUNDS; r++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        ptrdiff_t rows = 64 + (ptrdiff_t)(seed % 64), cols = (ptrdiff_t)(PYGPU_BG_MIN / 8 / 64) + (ptrdiff_t)(seed % 300);
        int strided = (seed >> 20) & 1;
        ptrdiff_t pitch = strided ? 2 * cols : cols, n = rows * cols;
        double *host = malloc((size_t)(rows * pitch) * sizeof *host), *dev = malloc((size_t)n * sizeof *dev);
        for (ptrdiff_t i = 0; i < rows * pitch; i++)
            host[i] = down ? -1.0 : (double)(i ^ me);
        for (ptrdiff_t i = 0; down && i < n; i++)
            dev[i] = (double)(i ^ me);
        ptrdiff_t shape[2] = {rows, cols}, strides[2] = {pitch * 8, strided ? 16 : 8};
        int taken = 0;
        double give_up = now_s() + GIVE_UP_S;
        for (int attempt = 0; !taken && (attempt == 0 || now_s() < give_up); attempt++) {
            int *owner = &owners[(me * ROUNDS + r) * 2 + (attempt > 0)];
            pygpu_status s = down ? pygpu_bg_download((char *)host, strides, 2, shape, 8, (const char *)dev,
                                                      PYGPU_STREAM_NULL, owner, &taken)
                                  : pygpu_bg_upload((char *)dev, (const char *)host, strides, 2, shape, 8,
                                                    PYGPU_STREAM_NULL, owner, &taken);
            if (s != 0)
                atomic_fetch_add(&wrong, 1);
            if (!taken) {
                struct timespec ms = {0, 1000000};
                nanosleep(&ms, NULL);       /* (the mover is page-locking a block of this size) */
            }
            reap();
        }
        if (!taken) {
            atomic_fetch_add(&wrong, 1);
        } else {
            atomic_fetch_add(&taken_n, 1);
            /* (the host runtime runs the stream's work as it is queued: the bytes are there) */
            for (ptrdiff_t i = 0; i < rows; i++)
                for (ptrdiff_t j = 0; j < cols; j++)
                    if (dev[i * cols + j] != host[i * pitch + j * (strided ? 2 : 1)] ||
                        (down && strided && host[i * pitch + 2 * j + 1] != -1.0)) {
                        atomic_fetch_add(&wrong, 1);
                        i = rows;
                        break;
                    }
        }
        reap();
        free(host);
        free(dev);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    pygpu_pinned_stats st;
    pygpu_pinned_set_limit((size_t)1 << 31);
    pygpu_bg_init();
    for (int i = 0; i < THREADS; i++)
        seeds[i] = (uint64_t)rng_range(1, (long long)1 << 40);   /* (xorshift's state must not be 0) */
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, mover, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    double give_up = now_s() + GIVE_UP_S;
    while (pygpu_bg_pending() > 0 && now_s() < give_up) {      /* (blocks still being page-locked) */
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        reap();
    }
    CHECK(atomic_load(&wrong) == 0);
    CHECK(atomic_load(&taken_n) == THREADS * ROUNDS);
    CHECK(atomic_load(&released) == THREADS * ROUNDS);
    CHECK(pygpu_bg_pending() == 0);
    /* (each task's events came from the device's kept ones and went back
     * there: 144 tasks fill what it keeps, 16) */
    CHECK(pygpu_events_kept(0) == 16);
    pygpu_events_release();
    CHECK(pygpu_events_kept(0) == 0);
    pygpu_pinned_trim();
    pygpu_pinned_stats_get(&st);
    CHECK(st.in_use == 0);
    return check_done("test_background");
}
